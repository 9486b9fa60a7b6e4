/* kernels/gemm.h — matrix products on tiles (the compute-bound core of every
 * linear layer and of tiled GEMM benchmarks), on CPU (oneDNN matmul
 * primitives where the build has oneDNN, else OpenBLAS) and CUDA (cuBLAS),
 * and products with a fused epilogue (bias, GELU, their gradients: cuBLASLt
 * on CUDA, the plain product and a loop on CPU).
 *
 * Must never: allocate tile memory (the CUDA epilogue GEMMs keep one
 * cuBLASLt handle per device and one workspace per stream, made at first
 * use and kept for the process), know about tasks or handles, change the
 * number of OpenBLAS threads, change any thread's OpenMP thread count other
 * than through tsr_cpu_gemm_set_thread_count (which changes the calling
 * thread's only), or change the cuBLAS handle's math mode (the precision is
 * chosen per call).
 *
 * Memory order: column-major like BLAS; a tile of shape (m, n) with leading
 * dimension ld stores element (i, j) at i + j*ld, ld >= m.  Shapes below are
 * in this (Fortran) order.  op(X) is X or X^T.
 */
#ifndef TSR_KERNELS_GEMM_H
#define TSR_KERNELS_GEMM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Transposition flags for op(). */
enum { TSR_NOTRANS = 0, TSR_TRANS = 1 };

/* Precision modes of tsr_cuda_gemm.  TF32 is what fp32 tiles use on a GPU
 * by default (inputs rounded to 10 mantissa bits, about 1e-3 relative error
 * per product, several times the FP32 throughput); FP32 is the strict mode
 * a configuration switch selects. */
enum {
    TSR_GEMM_FP32 = 0, /* fp32 storage, fp32 CUDA-core arithmetic (strict) */
    TSR_GEMM_TF32 = 1  /* fp32 storage, tf32 tensor-core products, fp32 accumulation */
};

/* C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b]   for b in [0, batch)
 *   op(A[b]): (m, k), A[b] starts at a + b*stride_a, A is (m, k) or (k, m) with lda
 *   op(B[b]): (k, n), B[b] starts at b + b*stride_b, B is (k, n) or (n, k) with ldb
 *   C[b]:     (m, n), starts at c + b*stride_c, ldc >= m
 * beta == 0: C is not read (NaN in C does not propagate).
 * Preconditions: m, n, k, batch >= 0; lda >= rows of A as stored; the C
 * matrices of different batches do not overlap. */
void tsr_cpu_gemm(int transa, int transb, int m, int n, int k, float alpha,
                  const float *a, int lda, int64_t stride_a,
                  const float *b, int ldb, int64_t stride_b, float beta,
                  float *c, int ldc, int64_t stride_c, int batch);

/* bf16 storage for A and B (uint16_t bit patterns, kernels/convert.h), fp32
 * accumulation: C[b] = alpha op(A[b]) op(B[b]) + beta C[b], C fp32 (c_is_bf16
 * 0) or bf16 rounded to nearest even (c_is_bf16 1); shapes, strides and
 * beta == 0 as tsr_cpu_gemm. */
void tsr_cpu_gemm_bf16(int transa, int transb, int m, int n, int k, float alpha,
                       const uint16_t *a, int lda, int64_t stride_a,
                       const uint16_t *b, int ldb, int64_t stride_b, float beta,
                       void *c, int c_is_bf16, int ldc, int64_t stride_c, int batch);

/* Both CPU GEMMs above run in the calling thread; with oneDNN each thread
 * keeps its own cache of created primitives (freed when the thread exits),
 * and a call oneDNN cannot make (an error, an unsupported case) is computed
 * by OpenBLAS, or for bf16 by widening to fp32 and OpenBLAS.
 * The library that runs them in this build: "onednn" or "openblas". */
const char *tsr_cpu_gemm_library(void);

/* How many threads a CPU GEMM called from the CALLING thread may use, for
 * this thread only; returns the previous count. With oneDNN this is the
 * calling thread's OpenMP nthreads-var (per thread in libgomp for a thread
 * outside an OpenMP team: other threads keep theirs; oneDNN starts a team of
 * that size per calling thread). Without oneDNN it does nothing and returns
 * 0: OpenBLAS's count is process-wide (openblas_set_num_threads). The
 * runtime sets 1 on each of its worker threads (one core each); on an
 * application's thread it sets 1 only while the simulation driver runs a
 * task there (simulate_exec), and puts the thread's own count back after. */
int tsr_cpu_gemm_set_thread_count(int n);

/* Same as tsr_cpu_gemm on a CUDA stream; all pointers are device pointers.
 * mode: TSR_GEMM_FP32 or TSR_GEMM_TF32.  cublas_handle is a cublasHandle_t
 * with the default math mode; its stream is set to `stream`.  batch == 1
 * is one cublasGemmEx call, more a cublasGemmStridedBatchedEx call.
 * Returns 0, TSR_EINVAL (an unknown mode, a negative size) or TSR_EDEVICE
 * (kernels/cuda_status.h names the cuBLAS call and its status). */
int tsr_cuda_gemm(void *stream, void *cublas_handle, int mode,
                  int transa, int transb, int m, int n, int k, float alpha,
                  const float *a, int lda, int64_t stride_a,
                  const float *b, int ldb, int64_t stride_b, float beta,
                  float *c, int ldc, int64_t stride_c, int batch);

/* bf16 storage for A and B (uint16_t bit patterns), fp32 accumulation.
 * C is bf16 when c_is_bf16 != 0, else fp32; alpha and beta are fp32.
 * Shapes as tsr_cpu_gemm; strides in elements.  Returns as tsr_cuda_gemm. */
int tsr_cuda_gemm_bf16(void *stream, void *cublas_handle,
                       int transa, int transb, int m, int n, int k, float alpha,
                       const uint16_t *a, int lda, int64_t stride_a,
                       const uint16_t *b, int ldb, int64_t stride_b, float beta,
                       void *c, int c_is_bf16, int ldc, int64_t stride_c, int batch);

/* ---- products with an epilogue -----------------------------------------
 * C (m, n) = alpha op(A) (m, k) op(B) (k, n) + beta C, then per kind:
 *   TSR_EPI_BIAS        C(i, j) += bias(i)
 *   TSR_EPI_BIAS_GELU   C(i, j) = gelu(G(i, j)), G = the product + beta C +
 *                       bias(i); aux (m, n) = G when aux is not NULL
 *   TSR_EPI_DGELU       C(i, j) = (alpha op(A) op(B) + beta C)(i, j)
 *                       * gelu'(aux(i, j))   (aux: the GELU input, read)
 *   TSR_EPI_DGELU_BGRAD as DGELU, and bgrad(i) = sum_j C(i, j)
 *   TSR_EPI_BGRADA      C plain, and bgrad(i) = sum_p op(A)(i, p)  (m)
 *   TSR_EPI_BGRADB      C plain, and bgrad(j) = sum_p op(B)(p, j)  (n)
 * gelu is the tanh form (kernels/gelu.h). bias and bgrad are fp32 vectors;
 * with bgrad_accumulate the sums are added to bgrad instead of stored.
 * aux has C's element type (bf16 when C is bf16) and leading dimension
 * ld_aux >= m. beta == 0: C is not read. */
enum {
    TSR_EPI_NONE = 0,
    TSR_EPI_BIAS = 1,
    TSR_EPI_BIAS_GELU = 2,
    TSR_EPI_DGELU = 3,
    TSR_EPI_DGELU_BGRAD = 4,
    TSR_EPI_BGRADA = 5,
    TSR_EPI_BGRADB = 6
};

typedef struct tsr_gemm_epilogue {
    int kind;             /* TSR_EPI_... */
    const float *bias;    /* BIAS, BIAS_GELU: (m) */
    void *aux;            /* BIAS_GELU: written (or NULL); DGELU*: read; (m, n) ld_aux */
    int ld_aux;
    float *bgrad;         /* DGELU_BGRAD, BGRADA: (m); BGRADB: (n) */
    int bgrad_accumulate; /* bgrad += the sums (1) or bgrad = the sums (0) */
} tsr_gemm_epilogue_t;

/* CPU: the product (tsr_cpu_gemm / tsr_cpu_gemm_bf16, batch 1), then the
 * epilogue as a loop over the tile in fp32 (a bf16 C is rounded after the
 * product and again after the epilogue; bias gradients summed in double).
 * epi NULL or TSR_EPI_NONE: the plain product. An unknown kind does nothing
 * to C and returns TSR_EINVAL; no memory for the sums TSR_ENOMEM; else 0. */
int tsr_cpu_gemm_ep(int transa, int transb, int m, int n, int k, float alpha, const float *a,
                    int lda, const float *b, int ldb, float beta, float *c, int ldc,
                    const tsr_gemm_epilogue_t *epi);
int tsr_cpu_gemm_bf16_ep(int transa, int transb, int m, int n, int k, float alpha,
                         const uint16_t *a, int lda, const uint16_t *b, int ldb, float beta,
                         void *c, int c_is_bf16, int ldc, const tsr_gemm_epilogue_t *epi);

/* CUDA: one cublasLtMatmul with the matching CUBLASLT_EPILOGUE_* (TF32 or
 * strict FP32 compute by mode as tsr_cuda_gemm; bf16: fp32 compute, C bf16
 * or fp32, bias and bias gradients fp32), the algorithm from cuBLASLt's
 * heuristic cached per problem. Where cuBLASLt offers no algorithm (a GELU
 * aux ld not a multiple of 8, a combination the library lacks) the same
 * result comes from the cuBLAS product and separate kernels. A bias gradient
 * to accumulate goes through a per-stream buffer, then is added to bgrad on
 * the stream. cublas_handle: as tsr_cuda_gemm (the fallback's product).
 * Returns 0, TSR_EINVAL (unknown kind or mode, a negative size, a missing
 * vector) or TSR_EDEVICE (the message names the cuBLASLt call). */
int tsr_cuda_gemm_ep(void *stream, void *cublas_handle, int mode, int transa, int transb, int m,
                     int n, int k, float alpha, const float *a, int lda, const float *b, int ldb,
                     float beta, float *c, int ldc, const tsr_gemm_epilogue_t *epi);
int tsr_cuda_gemm_bf16_ep(void *stream, void *cublas_handle, int transa, int transb, int m,
                          int n, int k, float alpha, const uint16_t *a, int lda,
                          const uint16_t *b, int ldb, float beta, void *c, int c_is_bf16,
                          int ldc, const tsr_gemm_epilogue_t *epi);
/* How many tsr_cuda_gemm_ep / _bf16_ep calls of this process ran as one
 * cublasLtMatmul (*fused) and how many through the fallback (*fallback):
 * what a GPU run reports to show that the epilogues are fused there. */
void tsr_cuda_gemm_ep_counts(uint64_t *fused, uint64_t *fallback);

#ifdef __cplusplus
}
#endif
#endif
