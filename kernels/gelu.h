/* kernels/gelu.h — GELU activation with the tanh approximation used by GPT-2:
 *   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 * Elementwise over a contiguous tile.
 *
 * Must never: allocate, know about tasks, or switch to the erf form (GPT-2
 * checkpoints are trained with the tanh form).
 */
#ifndef TSR_KERNELS_GELU_H
#define TSR_KERNELS_GELU_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[i] = gelu(x[i])                       x, out: (n), out may be x */
void tsr_cpu_gelu_fwd(size_t n, const float *x, float *out);
/* dx[i] = gelu'(x[i]) * dout[i]  (written)  x, dout, dx: (n), dx may be dout */
void tsr_cpu_gelu_bwd(size_t n, const float *x, const float *dout, float *dx);

/* CUDA versions, device pointers, asynchronous on `stream`;
 * 0 or TSR_EDEVICE (kernels/cuda_status.h names the failure). */
int tsr_cuda_gelu_fwd(void *stream, size_t n, const float *x, float *out);
int tsr_cuda_gelu_bwd(void *stream, size_t n, const float *x, const float *dout, float *dx);

#ifdef __cplusplus
}
#endif
#endif
