/* kernels/softmax.h — the pieces of a softmax whose reduction axis is cut
 * into tiles: per-column running max and sum of exponentials (maxsumexp), the
 * merge of two partial states, and logsumexp.  Cross-entropy over vocabulary
 * tiles and flash attention both build on the same (max, sumexp) state.
 *
 * Must never: allocate, know about tasks, or form exp(x) without subtracting
 * the running max (overflow).
 *
 * Memory order: x is (m, n) column-major with ldx; the softmax runs over axis
 * 0 (down each column: over the vocabulary of a (V, T) logits tile).
 * A state tile ms is (2, n): ms[2*j] = max_j, ms[2*j+1] = sumexp_j, meaning
 * sum_i exp(x(i, j)) = sumexp_j * exp(max_j).  The empty state is (-inf, 0).
 */
#ifndef TSR_KERNELS_SOFTMAX_H
#define TSR_KERNELS_SOFTMAX_H

#ifdef __cplusplus
extern "C" {
#endif

/* State of the columns of x (m, n), m >= 1:
 *   accumulate == 0: ms(:, j) = (max_i x(i,j), sum_i exp(x(i,j) - max))   (ms not read)
 *   accumulate != 0: ms(:, j) = merge(ms(:, j), that state)
 * ms: (2, n). */
void tsr_cpu_maxsumexp(int m, int n, const float *x, int ldx, float *ms, int accumulate);

/* dst(:, j) = merge(dst(:, j), src(:, j)); src, dst: (2, n).  Empty states
 * (max = -inf) merge to the other state. */
void tsr_cpu_maxsumexp_merge(int n, const float *src, float *dst);

/* lse[j] = max_j + log(sumexp_j)   ms: (2, n), lse: (n); -inf for an empty state. */
void tsr_cpu_logsumexp(int n, const float *ms, float *lse);

/* CUDA versions, device pointers, asynchronous on `stream`;
 * 0 or TSR_EDEVICE (kernels/cuda_status.h names the failure). */
int tsr_cuda_maxsumexp(void *stream, int m, int n, const float *x, int ldx, float *ms,
                       int accumulate);
int tsr_cuda_maxsumexp_merge(void *stream, int n, const float *src, float *dst);
int tsr_cuda_logsumexp(void *stream, int n, const float *ms, float *lse);

#ifdef __cplusplus
}
#endif
#endif
