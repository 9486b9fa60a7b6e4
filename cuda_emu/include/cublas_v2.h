/* cuda_emu/include/cublas_v2.h — the emulated cuBLAS subset the project uses
 * (-Dcuda=emu): handles bound to a stream, GEMM on fp32/bf16 data with fp32 or
 * TF32 compute, strided batched GEMM, SAXPY, on OpenBLAS (cuda_emu/blas.cc).
 *
 * Must never: compute in a precision a GPU would not (TF32 inputs are rounded
 * to 10 mantissa bits, bf16 widened exactly, accumulation in fp32).
 */
#ifndef TSR_EMU_CUBLAS_V2_H
#define TSR_EMU_CUBLAS_V2_H

#include "cuda_runtime_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_MAPPING_ERROR = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
    CUBLAS_STATUS_LICENSE_ERROR = 16
} cublasStatus_t;

typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;

typedef enum cudaDataType_t {
    CUDA_R_32F = 0,
    CUDA_R_64F = 1,
    CUDA_R_16F = 2,
    CUDA_R_16BF = 14
} cudaDataType_t;
typedef cudaDataType_t cudaDataType;

typedef enum {
    CUBLAS_COMPUTE_16F = 64,
    CUBLAS_COMPUTE_16F_PEDANTIC = 65,
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_32F_PEDANTIC = 69,
    CUBLAS_COMPUTE_64F = 70,
    CUBLAS_COMPUTE_32F_FAST_16F = 74,
    CUBLAS_COMPUTE_32F_FAST_16BF = 75,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77
} cublasComputeType_t;

typedef enum { CUBLAS_GEMM_DEFAULT = -1, CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99 } cublasGemmAlgo_t;

typedef enum {
    CUBLAS_DEFAULT_MATH = 0,
    CUBLAS_TENSOR_OP_MATH = 1,
    CUBLAS_PEDANTIC_MATH = 2,
    CUBLAS_TF32_TENSOR_OP_MATH = 3
} cublasMath_t;

typedef struct cublasContext *cublasHandle_t;

TSR_EMU_API cublasStatus_t cublasCreate(cublasHandle_t *handle);
TSR_EMU_API cublasStatus_t cublasDestroy(cublasHandle_t handle);
TSR_EMU_API cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
TSR_EMU_API cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t *stream);
TSR_EMU_API cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
TSR_EMU_API cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t *mode);
TSR_EMU_API cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                                        cublasOperation_t transb, int m, int n, int k,
                                        const void *alpha, const void *A, cudaDataType_t Atype,
                                        int lda, const void *B, cudaDataType_t Btype, int ldb,
                                        const void *beta, void *C, cudaDataType_t Ctype, int ldc,
                                        cublasComputeType_t compute, cublasGemmAlgo_t algo);
TSR_EMU_API cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
    int k, const void *alpha, const void *A, cudaDataType_t Atype, int lda, long long strideA,
    const void *B, cudaDataType_t Btype, int ldb, long long strideB, const void *beta, void *C,
    cudaDataType_t Ctype, int ldc, long long strideC, int batch, cublasComputeType_t compute,
    cublasGemmAlgo_t algo);
TSR_EMU_API cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                                       cublasOperation_t transb, int m, int n, int k,
                                       const float *alpha, const float *A, int lda,
                                       const float *B, int ldb, const float *beta, float *C,
                                       int ldc);
TSR_EMU_API cublasStatus_t cublasSaxpy(cublasHandle_t handle, int n, const float *alpha,
                                       const float *x, int incx, float *y, int incy);
TSR_EMU_API const char *cublasGetStatusString(cublasStatus_t status);
TSR_EMU_API const char *cublasGetStatusName(cublasStatus_t status);

#ifdef __cplusplus
}
#endif

#endif
