/* kernels/embedding.h — token embedding lookup (gather) and its gradient
 * (scatter-add) for a vocabulary tile that holds the rows [v0, v0 + nv) of
 * the embedding table.  Positional embeddings need no kernel of their own:
 * they are a plain add of a slice (elementwise.h).
 *
 * Must never: allocate, know about tasks, or touch a token whose id lies
 * outside the tile's range (another tile owns it).
 *
 * Memory order: the table tile w is (C, nv) column-major with ld = C, so the
 * embedding of id v0 + r is contiguous at w + r*C (PyTorch's row-major
 * (V, C) bytes).  Activations are (C, T) with ld = C.
 */
#ifndef TSR_KERNELS_EMBEDDING_H
#define TSR_KERNELS_EMBEDDING_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out(:, t) += w(:, tokens[t] - v0)  for each t with v0 <= tokens[t] < v0 + nv.
 *   w: (C, nv), tokens: (T), out: (C, T) (accumulated; other columns untouched) */
void tsr_cpu_embedding_fwd(int C, int T, int nv, int v0, const int32_t *tokens,
                           const float *w, float *out);

/* dw(:, tokens[t] - v0) += dout(:, t)  for each t with v0 <= tokens[t] < v0 + nv.
 *   dout: (C, T), dw: (C, nv) (accumulated; repeated tokens add up) */
void tsr_cpu_embedding_bwd(int C, int T, int nv, int v0, const int32_t *tokens,
                           const float *dout, float *dw);

/* CUDA versions, device pointers, asynchronous on `stream`;
 * 0 or TSR_EDEVICE (kernels/cuda_status.h names the failure).
 * The CUDA backward uses atomics (summation order of repeated tokens varies),
 * unless `deterministic`: then each channel of a row sums its tokens in
 * order (one thread each). */
int tsr_cuda_embedding_fwd(void *stream, int C, int T, int nv, int v0, const int32_t *tokens,
                           const float *w, float *out);
int tsr_cuda_embedding_bwd(void *stream, int C, int T, int nv, int v0, const int32_t *tokens,
                           const float *dout, float *dw, int deterministic);

#ifdef __cplusplus
}
#endif
#endif
