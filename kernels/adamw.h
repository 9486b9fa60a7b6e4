/* kernels/adamw.h — the optimizer's tile kernels: one fused AdamW step
 * (bias correction, decoupled weight decay, optional gradient scaling for
 * clipping) and the squared L2 norm of a tile for global-norm clipping.
 * (Scaling a gradient tile on its own is tsr_cpu_scale in elementwise.h.)
 *
 * Must never: allocate, know about tasks, or read the step count from
 * anywhere but its argument (the optimizer owns it).
 *
 * Tiles are treated as flat contiguous vectors of n elements.
 */
#ifndef TSR_KERNELS_ADAMW_H
#define TSR_KERNELS_ADAMW_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One AdamW step, step >= 1, on p, m, v, g: (n), as in PyTorch/llm.c:
 *   g' = grad_scale * g
 *   m  = beta1 m + (1 - beta1) g'        v = beta2 v + (1 - beta2) g'^2
 *   p -= lr * ( (m / (1 - beta1^step)) / (sqrt(v / (1 - beta2^step)) + eps)
 *               + weight_decay * p )
 * grad_scale folds global-norm clipping into the step (1 for none).
 * p_bf16: (n) or NULL: when given, it also receives the updated p in bf16,
 * rounded to nearest even like kernels/convert.h (NaN stays a quiet NaN), in
 * the same pass: the bf16 copy of the weights that mixed-precision compute
 * reads, without a second pass over p.
 * zero_g: the gradient is consumed — each g[i] is set to 0 once read, in
 * the same pass, so that the next step's accumulation needs no separate
 * zeroing pass over memory that is no longer in cache. */
void tsr_cpu_adamw(size_t n, int step, float lr, float beta1, float beta2, float eps,
                   float weight_decay, float grad_scale, float *g,
                   float *p, float *m, float *v, uint16_t *p_bf16, int zero_g);

/* acc[0] += sum_i x[i]^2    x: (n), acc: (1), accumulated (in double internally). */
void tsr_cpu_sumsq(size_t n, const float *x, float *acc);

/* CUDA versions, device pointers, asynchronous on `stream`;
 * 0 or TSR_EDEVICE (kernels/cuda_status.h names the failure).
 * tsr_cuda_sumsq adds to acc[0] with one atomic per block; deterministic:
 * one block, so one addition in a fixed order (slower: one multiprocessor). */
int tsr_cuda_adamw(void *stream, size_t n, int step, float lr, float beta1, float beta2,
                   float eps, float weight_decay, float grad_scale, float *g,
                   float *p, float *m, float *v, uint16_t *p_bf16, int zero_g);
int tsr_cuda_sumsq(void *stream, size_t n, const float *x, float *acc, int deterministic);

#ifdef __cplusplus
}
#endif
#endif
