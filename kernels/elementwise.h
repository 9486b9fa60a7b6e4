/* kernels/elementwise.h — elementwise and broadcast arithmetic on tiles:
 * fill, copy, scale, axpy, add, bias-add along an axis and the sum over the
 * other axis (the bias gradient).  Memory-bound; used for residual streams,
 * gradient accumulation and initialisation.
 *
 * Must never: allocate, know about tasks, or read an output it is told to
 * overwrite (so poisoned outputs never leak into results).
 *
 * Memory order: column-major; a tile (m, n) with leading dimension ld keeps
 * element (i, j) at i + j*ld.  The flat functions (fill .. add) treat a
 * contiguous tile (ld == m) as a vector of n = m*cols elements.  Outputs may
 * alias inputs exactly (in place) where noted, never partially.
 */
#ifndef TSR_KERNELS_ELEMENTWISE_H
#define TSR_KERNELS_ELEMENTWISE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* x[i] = value                 x: (n) */
void tsr_cpu_fill(size_t n, float value, float *x);
/* y[i] = x[i]                  x, y: (n), no overlap */
void tsr_cpu_copy(size_t n, const float *x, float *y);
/* y[i] = alpha * x[i]          x, y: (n), y may be x */
void tsr_cpu_scale(size_t n, float alpha, const float *x, float *y);
/* y[i] += alpha * x[i]         x, y: (n), no overlap */
void tsr_cpu_axpy(size_t n, float alpha, const float *x, float *y);
/* z[i] = x[i] + y[i]           x, y, z: (n), z may be x or y */
void tsr_cpu_add(size_t n, const float *x, const float *y, float *z);

/* Broadcast add of a vector along one axis of x (m, n), in place:
 *   axis 0: b is (m), x(i, j) += b[i]   (a per-feature bias on (C, T) activations)
 *   axis 1: b is (n), x(i, j) += b[j] */
void tsr_cpu_bias_add(int axis, int m, int n, const float *b, float *x, int ldx);

/* The gradient of tsr_cpu_bias_add: y = alpha * (sum of x over the other axis) + beta * y
 *   axis 0: y is (m), y[i] = alpha * sum_j x(i, j) + beta * y[i]
 *   axis 1: y is (n), y[j] = alpha * sum_i x(i, j) + beta * y[j]
 * beta == 0: y is not read.  Sums are carried in double. */
void tsr_cpu_sum_axis(int axis, int m, int n, float alpha, const float *x, int ldx,
                      float beta, float *y);

/* CUDA versions: same contracts, device pointers, asynchronous on `stream`
 * (a cudaStream_t).  Return 0 or TSR_EDEVICE (kernels/cuda_status.h
 * names the failure). */
int tsr_cuda_fill(void *stream, size_t n, float value, float *x);
int tsr_cuda_copy(void *stream, size_t n, const float *x, float *y);
int tsr_cuda_scale(void *stream, size_t n, float alpha, const float *x, float *y);
int tsr_cuda_axpy(void *stream, size_t n, float alpha, const float *x, float *y);
int tsr_cuda_add(void *stream, size_t n, const float *x, const float *y, float *z);
int tsr_cuda_bias_add(void *stream, int axis, int m, int n, const float *b, float *x, int ldx);
/* Sums are carried in fp32 on the device (pairwise within a block). */
int tsr_cuda_sum_axis(void *stream, int axis, int m, int n, float alpha, const float *x,
                      int ldx, float beta, float *y);

#ifdef __cplusplus
}
#endif
#endif
