/* kernels/cpu/gemm_dnnl.h — internal: the CPU GEMM through oneDNN matmul
 * primitives (only in a build with oneDNN, TSR_HAVE_DNNL), for
 * kernels/cpu/gemm.c.
 *
 * Must never: abort or print on a oneDNN error (the caller falls back to
 * OpenBLAS or the plain bf16 path), run a primitive on a thread other than
 * the one that created it, or change any thread's OpenMP setting except the
 * calling thread's through tsr__dnnl_set_threads.
 */
#ifndef TSR_KERNELS_CPU_GEMM_DNNL_H
#define TSR_KERNELS_CPU_GEMM_DNNL_H

#include <stdint.h>

/* C[b] = alpha op(A[b]) op(B[b]) + beta C[b] (semantics of kernels/gemm.h)
 * for b in [0, batch), k >= 1, m, n >= 1. bf16_in: A and B are bf16
 * (uint16_t), else fp32; c_bf16: C is bf16, else fp32 (only with bf16_in).
 * Returns how many leading batches it computed: batch when done, fewer when
 * oneDNN could not (creation failed, or only a reference implementation
 * exists, or an execution failed); the caller computes the rest. */
int tsr__dnnl_gemm(int bf16_in, int c_bf16, int transa, int transb, int m, int n, int k,
                   float alpha, const void *a, int lda, int64_t stride_a, const void *b, int ldb,
                   int64_t stride_b, float beta, void *c, int ldc, int64_t stride_c, int batch);

/* The OpenMP team size of the calling thread's oneDNN calls (its
 * nthreads-var); returns the previous one. */
int tsr__dnnl_set_threads(int n);

#endif
