/* CUDA GEMM through cuBLAS: fp32, tf32 tensor cores, and bf16 storage with
 * fp32 accumulation, all as strided-batched GemmEx calls. */
#include <cublas_v2.h>

#include "kernels/gemm.h"

static cublasOperation_t op_of(int t)
{
    return t == TSR_TRANS ? CUBLAS_OP_T : CUBLAS_OP_N;
}

/* C[b] (m, n) = alpha op(A[b]) (m, k) op(B[b]) (k, n) + beta C[b] */
static int gemm_ex(void *stream, void *handle, cublasComputeType_t compute, cudaDataType_t ab_type,
                   cudaDataType_t c_type, int transa, int transb, int m, int n, int k, float alpha,
                   const void *a, int lda, int64_t stride_a, const void *b, int ldb,
                   int64_t stride_b, float beta, void *c, int ldc, int64_t stride_c, int batch)
{
    if (m <= 0 || n <= 0 || batch <= 0)
        return 0;
    cublasHandle_t h = (cublasHandle_t)handle;
    cublasStatus_t st = cublasSetStream(h, (cudaStream_t)stream);
    if (st != CUBLAS_STATUS_SUCCESS)
        return (int)st;
    /* the leading dimensions must be >= 1 even when a dimension is empty */
    int lda_ = lda < 1 ? 1 : lda, ldb_ = ldb < 1 ? 1 : ldb;
    st = cublasGemmStridedBatchedEx(h, op_of(transa), op_of(transb), m, n, k, &alpha, a, ab_type,
                                    lda_, (long long)stride_a, b, ab_type, ldb_,
                                    (long long)stride_b, &beta, c, c_type, ldc,
                                    (long long)stride_c, batch, compute, CUBLAS_GEMM_DEFAULT);
    return (int)st;
}

extern "C" int tsr_cuda_gemm(void *stream, void *cublas_handle, int mode, int transa, int transb,
                             int m, int n, int k, float alpha, const float *a, int lda,
                             int64_t stride_a, const float *b, int ldb, int64_t stride_b,
                             float beta, float *c, int ldc, int64_t stride_c, int batch)
{
    cublasComputeType_t compute =
        mode == TSR_GEMM_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    return gemm_ex(stream, cublas_handle, compute, CUDA_R_32F, CUDA_R_32F, transa, transb, m, n,
                   k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch);
}

extern "C" int tsr_cuda_gemm_bf16(void *stream, void *cublas_handle, int transa, int transb,
                                  int m, int n, int k, float alpha, const uint16_t *a, int lda,
                                  int64_t stride_a, const uint16_t *b, int ldb, int64_t stride_b,
                                  float beta, void *c, int c_is_bf16, int ldc, int64_t stride_c,
                                  int batch)
{
    return gemm_ex(stream, cublas_handle, CUBLAS_COMPUTE_32F, CUDA_R_16BF,
                   c_is_bf16 ? CUDA_R_16BF : CUDA_R_32F, transa, transb, m, n, k, alpha, a, lda,
                   stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch);
}
