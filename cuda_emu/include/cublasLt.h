/* cuda_emu/include/cublasLt.h — the emulated cuBLASLt subset the project uses
 * (-Dcuda=emu): a handle, matmul descriptors (compute type, transposes,
 * epilogue, bias / bias-gradient and auxiliary pointers), matrix layouts
 * (type, rows, cols, ld), preferences (maximum workspace), the heuristic
 * query and cublasLtMatmul with the epilogues DEFAULT, BIAS, GELU,
 * GELU_BIAS, GELU_AUX, GELU_AUX_BIAS, DGELU, DGELU_BGRAD, BGRADA and BGRADB,
 * on fp32 or bf16 A/B and fp32 or bf16 C = D (cuda_emu/blas.cc).
 *
 * Must never: compute in a precision a GPU would not (inputs rounded as the
 * compute type reads them, as the cuBLAS emulation does), accept a layout
 * the library documents as invalid (GELU auxiliary ld not a multiple of 8),
 * or use values of the enumerations other than cuBLASLt's own.
 */
#ifndef TSR_EMU_CUBLASLT_H
#define TSR_EMU_CUBLASLT_H

#include <stddef.h>
#include <stdint.h>

#include "cublas_v2.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cublasLtContext *cublasLtHandle_t;
typedef struct {
    uint64_t data[8];
} cublasLtMatmulAlgo_t;
typedef struct tsr_emu_lt_desc *cublasLtMatmulDesc_t;
typedef struct tsr_emu_lt_layout *cublasLtMatrixLayout_t;
typedef struct tsr_emu_lt_pref *cublasLtMatmulPreference_t;

typedef enum {
    CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0,
    CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,
    CUBLASLT_MATMUL_DESC_POINTER_MODE = 2,
    CUBLASLT_MATMUL_DESC_TRANSA = 3,
    CUBLASLT_MATMUL_DESC_TRANSB = 4,
    CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
    CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE = 22,
    CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26
} cublasLtMatmulDescAttributes_t;

typedef enum {
    CUBLASLT_EPILOGUE_DEFAULT = 1,
    CUBLASLT_EPILOGUE_BIAS = 4,
    CUBLASLT_EPILOGUE_GELU = 32,
    CUBLASLT_EPILOGUE_GELU_AUX = 32 | 128,
    CUBLASLT_EPILOGUE_GELU_BIAS = 32 | 4,
    CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 32 | 128 | 4,
    CUBLASLT_EPILOGUE_DGELU = 64 | 128,
    CUBLASLT_EPILOGUE_DGELU_BGRAD = 64 | 128 | 16,
    CUBLASLT_EPILOGUE_BGRADA = 256,
    CUBLASLT_EPILOGUE_BGRADB = 512
} cublasLtEpilogue_t;

typedef enum {
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1
} cublasLtMatmulPreferenceAttributes_t;

typedef struct {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
} cublasLtMatmulHeuristicResult_t;

TSR_EMU_API cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle);
TSR_EMU_API cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle);
TSR_EMU_API cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                                    cublasComputeType_t compute,
                                                    cudaDataType_t scale_type);
TSR_EMU_API cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc);
TSR_EMU_API cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                                          cublasLtMatmulDescAttributes_t attr,
                                                          const void *buf, size_t size);
TSR_EMU_API cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout,
                                                      cudaDataType type, uint64_t rows,
                                                      uint64_t cols, int64_t ld);
TSR_EMU_API cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout);
TSR_EMU_API cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref);
TSR_EMU_API cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
TSR_EMU_API cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
    size_t size);
TSR_EMU_API cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t results[],
    int *returned);
TSR_EMU_API cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                          const void *alpha, const void *A,
                                          cublasLtMatrixLayout_t Adesc, const void *B,
                                          cublasLtMatrixLayout_t Bdesc, const void *beta,
                                          const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                                          cublasLtMatrixLayout_t Ddesc,
                                          const cublasLtMatmulAlgo_t *algo, void *workspace,
                                          size_t workspace_bytes, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
