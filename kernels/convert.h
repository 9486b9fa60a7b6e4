/* kernels/convert.h — fp32 <-> bf16 conversion of contiguous tiles, for bf16
 * storage of weights/activations (tsr_cuda_gemm_bf16) and checkpoints.
 * bf16 values are carried as uint16_t bit patterns (the upper half of an
 * IEEE-754 binary32).
 *
 * Must never: allocate, know about tasks, or round other than to nearest even
 * (truncation biases training).  NaN stays NaN (quiet), infinities stay.
 */
#ifndef TSR_KERNELS_CONVERT_H
#define TSR_KERNELS_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y[i] = bf16(x[i]), round to nearest even      x: (n) fp32, y: (n) bf16 */
void tsr_cpu_f32_to_bf16(size_t n, const float *x, uint16_t *y);
/* y[i] = float(x[i]) (exact)                     x: (n) bf16, y: (n) fp32 */
void tsr_cpu_bf16_to_f32(size_t n, const uint16_t *x, float *y);

/* CUDA versions, device pointers, asynchronous on `stream`;
 * 0 or TSR_EDEVICE (kernels/cuda_status.h names the failure). */
int tsr_cuda_f32_to_bf16(void *stream, size_t n, const float *x, uint16_t *y);
int tsr_cuda_bf16_to_f32(void *stream, size_t n, const uint16_t *x, float *y);

#ifdef __cplusplus
}
#endif
#endif
