/* CUDA GEMM through cuBLAS: fp32, tf32 tensor cores, and bf16 storage with
 * fp32 accumulation.  One product is a cublasGemmEx call, a batch one
 * cublasGemmStridedBatchedEx call; a failure names the cuBLAS call. */
#include <cublas_v2.h>
#include <tessera/tessera.h>

#include "kernels/cuda/common.cuh"
#include "kernels/gemm.h"

static cublasOperation_t op_of(int t)
{
    return t == TSR_TRANS ? CUBLAS_OP_T : CUBLAS_OP_N;
}

/* C[b] (m, n) = alpha op(A[b]) (m, k) op(B[b]) (k, n) + beta C[b] */
static int gemm_ex(const char *fn, void *stream, void *handle, cublasComputeType_t compute,
                   cudaDataType_t ab_type, cudaDataType_t c_type, int transa, int transb, int m,
                   int n, int k, float alpha, const void *a, int lda, int64_t stride_a,
                   const void *b, int ldb, int64_t stride_b, float beta, void *c, int ldc,
                   int64_t stride_c, int batch)
{
    if (m < 0 || n < 0 || k < 0 || batch < 0)
        return tsr_cuda_invalid("%s: negative size (m %d, n %d, k %d, batch %d)", fn, m, n, k,
                                batch);
    if (m == 0 || n == 0 || batch == 0)
        return 0;
    cublasHandle_t h = (cublasHandle_t)handle;
    cublasStatus_t st = cublasSetStream(h, (cudaStream_t)stream);
    if (st != CUBLAS_STATUS_SUCCESS)
        return tsr_cuda_blas_failed("cublasSetStream", (int)st);
    /* the leading dimensions must be >= 1 even when k is 0 */
    int lda_ = lda < 1 ? 1 : lda, ldb_ = ldb < 1 ? 1 : ldb;
    if (batch == 1) {
        st = cublasGemmEx(h, op_of(transa), op_of(transb), m, n, k, &alpha, a, ab_type, lda_, b,
                          ab_type, ldb_, &beta, c, c_type, ldc, compute, CUBLAS_GEMM_DEFAULT);
        return st == CUBLAS_STATUS_SUCCESS ? 0 : tsr_cuda_blas_failed("cublasGemmEx", (int)st);
    }
    st = cublasGemmStridedBatchedEx(h, op_of(transa), op_of(transb), m, n, k, &alpha, a, ab_type,
                                    lda_, (long long)stride_a, b, ab_type, ldb_,
                                    (long long)stride_b, &beta, c, c_type, ldc,
                                    (long long)stride_c, batch, compute, CUBLAS_GEMM_DEFAULT);
    return st == CUBLAS_STATUS_SUCCESS ? 0
                                       : tsr_cuda_blas_failed("cublasGemmStridedBatchedEx", (int)st);
}

extern "C" int tsr_cuda_gemm(void *stream, void *cublas_handle, int mode, int transa, int transb,
                             int m, int n, int k, float alpha, const float *a, int lda,
                             int64_t stride_a, const float *b, int ldb, int64_t stride_b,
                             float beta, float *c, int ldc, int64_t stride_c, int batch)
{
    cublasComputeType_t compute;
    switch (mode) {
    case TSR_GEMM_TF32: compute = CUBLAS_COMPUTE_32F_FAST_TF32; break;
    case TSR_GEMM_FP32: compute = CUBLAS_COMPUTE_32F; break;
    default:
        return tsr_cuda_invalid("tsr_cuda_gemm: unknown precision mode %d (TSR_GEMM_TF32 or "
                                "TSR_GEMM_FP32)",
                                mode);
    }
    return gemm_ex("tsr_cuda_gemm", stream, cublas_handle, compute, CUDA_R_32F, CUDA_R_32F,
                   transa, transb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c,
                   ldc, stride_c, batch);
}

extern "C" int tsr_cuda_gemm_bf16(void *stream, void *cublas_handle, int transa, int transb,
                                  int m, int n, int k, float alpha, const uint16_t *a, int lda,
                                  int64_t stride_a, const uint16_t *b, int ldb, int64_t stride_b,
                                  float beta, void *c, int c_is_bf16, int ldc, int64_t stride_c,
                                  int batch)
{
    return gemm_ex("tsr_cuda_gemm_bf16", stream, cublas_handle, CUBLAS_COMPUTE_32F, CUDA_R_16BF,
                   c_is_bf16 ? CUDA_R_16BF : CUDA_R_32F, transa, transb, m, n, k, alpha, a, lda,
                   stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch);
}
