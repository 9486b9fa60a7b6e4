/* kernels/crossentropy.h — softmax cross-entropy of a logits tile that holds
 * a range of vocabulary rows [v0, v0 + nv): per-token loss and the logits'
 * gradient, given the logsumexp over the whole vocabulary (the merged
 * maxsumexp states of all vocabulary tiles, see softmax.h).
 *
 * Must never: allocate, know about tasks, or normalise over only its own
 * vocabulary range (lse must cover the whole vocabulary).
 *
 * Memory order: logits (nv, T) column-major with ld; column t holds token t's
 * logits for vocabulary ids v0 .. v0+nv-1.  targets[t] is the target id of
 * token t; a negative target means "ignored" (no loss, zero gradient).
 */
#ifndef TSR_KERNELS_CROSSENTROPY_H
#define TSR_KERNELS_CROSSENTROPY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* loss[t] += lse[t] - logits(targets[t] - v0, t)   for each t with
 * v0 <= targets[t] < v0 + nv; other entries of loss are untouched, so the
 * sum over all vocabulary tiles adds each token's loss exactly once.
 *   logits: (nv, T), lse: (T), targets: (T), loss: (T) */
void tsr_cpu_crossentropy_fwd(int nv, int T, int v0, const float *logits, int ld,
                              const float *lse, const int32_t *targets, float *loss);

/* dlogits(i, t) = scale * (exp(logits(i, t) - lse[t]) - [v0 + i == targets[t]])
 * written, or 0 for ignored tokens.  scale is dloss (e.g. 1 / number of tokens).
 *   logits, dlogits: (nv, T) with ld / ldd; dlogits may be logits (ld == ldd). */
void tsr_cpu_crossentropy_bwd(int nv, int T, int v0, const float *logits, int ld,
                              const float *lse, const int32_t *targets, float scale,
                              float *dlogits, int ldd);

/* CUDA versions, device pointers, asynchronous on `stream`;
 * 0 or TSR_EDEVICE (kernels/cuda_status.h names the failure). */
int tsr_cuda_crossentropy_fwd(void *stream, int nv, int T, int v0, const float *logits,
                              int ld, const float *lse, const int32_t *targets, float *loss);
int tsr_cuda_crossentropy_bwd(void *stream, int nv, int T, int v0, const float *logits,
                              int ld, const float *lse, const int32_t *targets, float scale,
                              float *dlogits, int ldd);

#ifdef __cplusplus
}
#endif
#endif
