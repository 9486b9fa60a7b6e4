/* kernels/decode.h — attention of new tokens over a KV cache, for
 * generation: each new token (a query column) first stores its key and
 * value at its position in its sequence's cache, then attends over every
 * cached position up to and including its own. One call serves one head;
 * the columns may belong to different sequences (slots) at different
 * positions (a decode step of a batch) or to one sequence at consecutive
 * positions (a prefill, causal within the call).
 *
 * Must never: allocate, know about tasks, or read cache positions past a
 * column's own (they may hold another, older sequence).
 *
 * Memory order (column-major):
 *   q, k, v: (d, n) with leading dimension ld — one head's rows inside the
 *            (C, n) tiles of the q, k and v projections (ld = C)
 *   cols:    (2, n) int32: column j is slot cols[2j] at position cols[2j+1]
 *   kc, vc:  (d, nslots * maxlen): slot s, position t at column s*maxlen + t
 *   y:       (d, n), ld d
 *   emb:     columns of C features
 * Scores are scale * q.k; the softmax runs in fp32 with the running max
 * subtracted (online, chunk by chunk).
 */
#ifndef TSR_KERNELS_DECODE_H
#define TSR_KERNELS_DECODE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* kc(:, s*maxlen + p) = k(:, j), vc(…) = v(:, j) for every column j = (s, p);
 * then y(:, j) = sum_{t <= p} softmax_t(scale q_j . kc_t) vc_t over slot s. */
void tsr_cpu_decode_attn(int d, int n, int maxlen, float scale, const int32_t *cols,
                         const float *q, const float *k, const float *v, int ld, float *kc,
                         float *vc, float *y);

/* out = a + b: one embedding column (a token's wte column plus its
 * position's wpe column), C features. */
void tsr_cpu_decode_embed(int C, const float *a, const float *b, float *out);

/* The matrix products of a decode step from bf16 weights (half the bytes
 * of a step that is bound by reading them), fp32 activations and sums.
 * w holds bf16 values (the high halves of fp32), column-major.
 *   N: y (m, n) = beta y + W x,   W (m, k) ld m, x (k, n) ld ldx >= k (rows
 *      of a taller tile), y ld m; beta 0 (y not read) or 1.
 *   T: y (m, n) = W^T x,          W (k, m) ld k, x (k, n) ld k, y ld m. */
void tsr_cpu_decode_gemv_bf16(int m, int n, int k, const uint16_t *w, const float *x, int ldx,
                              float beta, float *y);
void tsr_cpu_decode_gemv_bf16_t(int m, int n, int k, const uint16_t *w, const float *x, float *y);
/* The same in portable C (vectorized by the compiler): what the two above
 * run on a CPU without AVX-512 (they use it where present); for tests. */
void tsr_cpu_decode_gemv_bf16_c(int m, int n, int k, const uint16_t *w, const float *x,
                                int ldx, float beta, float *y);
/* The N form from fp32 W (ld m): for the output projections split in two
 * column halves. tsr_cpu_gemm (oneDNN) computes the same; this streams W
 * once for the step's few columns and decodes the 124M model faster (41.3
 * against 38.6 tokens/s at batch 1, 180 against 174 at batch 8, measured
 * side by side). On CUDA the decode step calls tsr_cuda_gemm (cuBLAS). */
void tsr_cpu_decode_gemv_f32(int m, int n, int k, const float *w, const float *x, int ldx,
                             float beta, float *y);
void tsr_cpu_decode_gemv_f32_c(int m, int n, int k, const float *w, const float *x, int ldx,
                               float beta, float *y);
/* y (m, n) = beta y + b + p0 + p1, b (m): the two partial products of a
 * Linear layer whose columns were split over two tasks, its bias, and
 * (beta 1) the residual. */
void tsr_cpu_decode_sum2(int m, int n, float beta, const float *b, const float *p0,
                         const float *p1, float *y);
void tsr_cpu_decode_gemv_bf16_t_c(int m, int n, int k, const uint16_t *w, const float *x,
                                  float *y);

/* CUDA versions, device pointers (cols too), asynchronous on `stream`;
 * 0 or TSR_EDEVICE (kernels/cuda_status.h names the failure), TSR_EINVAL
 * for a head wider than 256. */
int tsr_cuda_decode_attn(void *stream, int d, int n, int maxlen, float scale,
                         const int32_t *cols, const float *q, const float *k, const float *v,
                         int ld, float *kc, float *vc, float *y);
int tsr_cuda_decode_embed(void *stream, int C, const float *a, const float *b, float *out);
int tsr_cuda_decode_gemv_bf16(void *stream, int m, int n, int k, const uint16_t *w,
                              const float *x, int ldx, float beta, float *y);
int tsr_cuda_decode_sum2(void *stream, int m, int n, float beta, const float *b, const float *p0,
                         const float *p1, float *y);
int tsr_cuda_decode_gemv_bf16_t(void *stream, int m, int n, int k, const uint16_t *w,
                                const float *x, float *y);

#ifdef __cplusplus
}
#endif
#endif
