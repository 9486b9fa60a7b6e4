/* CUDA GEMM through cuBLAS: fp32, tf32 tensor cores, and bf16 storage with
 * fp32 accumulation.  One product is a cublasGemmEx call, a batch one
 * cublasGemmStridedBatchedEx call; a failure names the cuBLAS call.
 * Products with an epilogue (bias, GELU, their gradients) are one
 * cublasLtMatmul each: a cuBLASLt handle per device, a workspace and a bias
 * gradient buffer per stream (kernels/cuda/scratch.cuh), the heuristic's algorithm cached per problem;
 * where cuBLASLt has no algorithm, the cuBLAS product and the kernels below. */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <tessera/tessera.h>

#include <atomic>
#include <mutex>
#include <string.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/scratch.cuh"
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

/* ---- products with an epilogue (cuBLASLt) ------------------------------- */


__device__ __forceinline__ float ep_load(const float *p, size_t i)
{
    return p[i];
}
__device__ __forceinline__ float ep_load(const uint16_t *p, size_t i)
{
    return __uint_as_float((uint32_t)p[i] << 16);
}
__device__ __forceinline__ void ep_store(float *p, size_t i, float v)
{
    p[i] = v;
}
__device__ __forceinline__ void ep_store(uint16_t *p, size_t i, float v)
{
    uint32_t u = __float_as_uint(v);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    p[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? ((u >> 16) | 0x40u) : r);
}

/* The fallback's elementwise epilogue on C (m, n) ldc:
 *   bias (m) or NULL: C += bias(i); aux (m, n) ld_aux or NULL: aux = C (the
 *   GELU input) when gelu, else C *= gelu'(aux) when dgelu; gelu: C = gelu(C). */
template <typename T>
__global__ void k_gemm_epilogue(int m, int n, T *c, int ldc, const float *bias, T *aux,
                                int ld_aux, int gelu, int dgelu)
{
    size_t total = (size_t)m * (size_t)n, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < total; t += stride) {
        size_t i = t % (size_t)m, j = t / (size_t)m, at = j * (size_t)ldc + i;
        float v = ep_load(c, at);
        if (bias)
            v += bias[i];
        if (gelu) {
            if (aux)
                ep_store(aux, j * (size_t)ld_aux + i, v);
            v = tsr_gelu(v);
        } else if (dgelu) {
            v *= tsr_gelu_grad(ep_load(aux, j * (size_t)ld_aux + i));
        }
        ep_store(c, at, v);
    }
}

/* out(r) (+)= sum_p X(r, p), r < rows, p < len; X(r, p) at r + p*ld (by_row)
 * or p + r*ld. One warp per r, lanes over p, a fixed order (deterministic). */
template <typename T>
__global__ void k_gemm_sums(int rows, int len, const T *x, int ld, int by_row, float *out,
                            int accumulate)
{
    int lane = threadIdx.x & 31;
    int warps = (int)(blockDim.x >> 5), gw = (int)blockIdx.x * warps + (int)(threadIdx.x >> 5);
    for (int r = gw; r < rows; r += (int)gridDim.x * warps) {
        float s = 0.0f;
        for (int p = lane; p < len; p += 32)
            s += ep_load(x, by_row ? (size_t)p * (size_t)ld + (size_t)r
                                   : (size_t)r * (size_t)ld + (size_t)p);
        s = tsr_warp_sum(s);
        if (lane == 0)
            out[r] = accumulate ? out[r] + s : s;
    }
}

/* y(i) += x(i), i < n */
__global__ void k_gemm_add(int n, const float *x, float *y)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] += x[i];
}

namespace {

enum { LT_MAX_DEVICES = 64, LT_CACHE = 1024 };
#ifdef TSR_CUDA_EMU
const size_t LT_WORKSPACE = 0; /* the emulated cuBLASLt needs none */
#else
const size_t LT_WORKSPACE = (size_t)8 << 20; /* per stream */
#endif

/* A cached heuristic answer: the problem, and its algorithm or none. */
struct LtKey {
    int device, ab_type, c_type, compute, ta, tb, m, n, k, lda, ldb, ldc, ld_aux, epi, align;
};
struct LtEntry {
    LtKey key;
    int used, found;
    cublasLtMatmulAlgo_t algo;
};

std::mutex lt_mu;
std::atomic<uint64_t> lt_fused, lt_fallback;
cublasLtHandle_t lt_handle[LT_MAX_DEVICES];
LtEntry lt_cache[LT_CACHE];

int lt_get_handle(int device, cublasLtHandle_t *out)
{
    if (device < 0 || device >= LT_MAX_DEVICES)
        return tsr_cuda_invalid("cublasLt: device %d beyond %d", device, LT_MAX_DEVICES);
    std::lock_guard<std::mutex> lk(lt_mu);
    if (!lt_handle[device]) {
        cublasStatus_t st = cublasLtCreate(&lt_handle[device]);
        if (st != CUBLAS_STATUS_SUCCESS) {
            lt_handle[device] = nullptr;
            return tsr_cuda_blas_failed("cublasLtCreate", (int)st);
        }
    }
    *out = lt_handle[device];
    return 0;
}

/* The stream's cuBLASLt workspace (NULL and 0 bytes when it cannot be had:
 * cuBLASLt then picks algorithms without one). */
void lt_workspace(cudaStream_t stream, void **ws, size_t *bytes)
{
    *ws = nullptr;
    *bytes = 0;
    if (LT_WORKSPACE && tsr_cuda_stream_scratch(stream, TSR_SCRATCH_LT_WORKSPACE, LT_WORKSPACE,
                                                ws) == 0)
        *bytes = LT_WORKSPACE;
    else
        *ws = nullptr;
}

unsigned lt_hash(const LtKey &k)
{
    const unsigned char *p = (const unsigned char *)&k;
    unsigned h = 2166136261u;
    for (size_t i = 0; i < sizeof k; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

/* Alignment class of the pointers (cuBLASLt's choice depends on it). */
int lt_align(const void *const *ptrs, int n)
{
    uintptr_t bits = 0;
    for (int i = 0; i < n; i++)
        bits |= (uintptr_t)ptrs[i];
    return bits & 15u ? (bits & 7u ? (bits & 3u ? 1 : 4) : 8) : 16;
}

/* The cached algorithm for key (found: 1 with *algo, 0 none), or -1 when
 * the problem is not in the cache. */
int lt_cache_get(const LtKey &key, cublasLtMatmulAlgo_t *algo)
{
    std::lock_guard<std::mutex> lk(lt_mu);
    unsigned h = lt_hash(key) % LT_CACHE;
    for (int probe = 0; probe < 8; probe++) {
        LtEntry &e = lt_cache[(h + (unsigned)probe) % LT_CACHE];
        if (!e.used)
            return -1;
        if (!memcmp(&e.key, &key, sizeof key)) {
            if (e.found)
                *algo = e.algo;
            return e.found;
        }
    }
    return -1;
}

void lt_cache_put(const LtKey &key, int found, const cublasLtMatmulAlgo_t *algo)
{
    std::lock_guard<std::mutex> lk(lt_mu);
    unsigned h = lt_hash(key) % LT_CACHE;
    int slot = (int)(h % LT_CACHE); /* all probes taken: replace the first */
    for (int probe = 0; probe < 8; probe++) {
        LtEntry &e = lt_cache[(h + (unsigned)probe) % LT_CACHE];
        if (!e.used || !memcmp(&e.key, &key, sizeof key)) {
            slot = (int)((h + (unsigned)probe) % LT_CACHE);
            break;
        }
    }
    LtEntry &e = lt_cache[slot];
    e.key = key;
    e.used = 1;
    e.found = found;
    if (found)
        e.algo = *algo;
}

cublasLtEpilogue_t lt_epilogue(int kind, int has_aux)
{
    switch (kind) {
    case TSR_EPI_BIAS: return CUBLASLT_EPILOGUE_BIAS;
    case TSR_EPI_BIAS_GELU: return has_aux ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_BIAS;
    case TSR_EPI_DGELU: return CUBLASLT_EPILOGUE_DGELU;
    case TSR_EPI_DGELU_BGRAD: return CUBLASLT_EPILOGUE_DGELU_BGRAD;
    case TSR_EPI_BGRADA: return CUBLASLT_EPILOGUE_BGRADA;
    case TSR_EPI_BGRADB: return CUBLASLT_EPILOGUE_BGRADB;
    }
    return CUBLASLT_EPILOGUE_DEFAULT;
}

/* The descriptors of one problem, destroyed together. */
struct LtDescs {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    ~LtDescs()
    {
        if (op)
            cublasLtMatmulDescDestroy(op);
        if (a)
            cublasLtMatrixLayoutDestroy(a);
        if (b)
            cublasLtMatrixLayoutDestroy(b);
        if (c)
            cublasLtMatrixLayoutDestroy(c);
    }
};

/* A cuBLASLt call fn(args...) that must succeed: else TSR_EDEVICE naming fn. */
#define LT_TRY(fn, ...)                                                                   \
    do {                                                                                  \
        cublasStatus_t st_ = fn(__VA_ARGS__);                                             \
        if (st_ != CUBLAS_STATUS_SUCCESS)                                                 \
            return tsr_cuda_blas_failed(#fn, (int)st_);                                   \
    } while (0)

/* One problem of tsr_cuda_gemm_ep / _bf16_ep.
 *   C (m, n) = alpha op(A) (m, k) op(B) (k, n) + beta C, epilogue epi;
 *   A, B of ab_type, C (and aux) of c_type; bias and bgrad fp32. */
int gemm_ep(const char *fn, cudaStream_t stream, void *handle, cublasComputeType_t compute,
            cudaDataType_t ab_type, cudaDataType_t c_type, int transa, int transb, int m, int n,
            int k, float alpha, const void *a, int lda, const void *b, int ldb, float beta,
            void *c, int ldc, const tsr_gemm_epilogue_t *epi)
{
    if (m < 0 || n < 0 || k < 0)
        return tsr_cuda_invalid("%s: negative size (m %d, n %d, k %d)", fn, m, n, k);
    int kind = epi ? epi->kind : TSR_EPI_NONE;
    if (kind < TSR_EPI_NONE || kind > TSR_EPI_BGRADB)
        return tsr_cuda_invalid("%s: unknown epilogue %d", fn, kind);
    bool wants_bias = kind == TSR_EPI_BIAS || kind == TSR_EPI_BIAS_GELU;
    bool wants_grad = kind == TSR_EPI_DGELU_BGRAD || kind == TSR_EPI_BGRADA || kind == TSR_EPI_BGRADB;
    bool reads_aux = kind == TSR_EPI_DGELU || kind == TSR_EPI_DGELU_BGRAD;
    if ((wants_bias && !epi->bias) || (wants_grad && !epi->bgrad) || (reads_aux && !epi->aux) ||
        (epi && epi->aux && epi->ld_aux < (m > 1 ? m : 1)))
        return tsr_cuda_invalid("%s: epilogue %d without its vector or auxiliary matrix (ld %d "
                                "for %d rows)",
                                fn, kind, epi ? epi->ld_aux : 0, m);
    int glen = kind == TSR_EPI_BGRADB ? n : m;
    int lda_ = lda < 1 ? 1 : lda, ldb_ = ldb < 1 ? 1 : ldb;
    if (m == 0 || n == 0) { /* no product; a bias gradient of A or B still has its sums */
        int rc = 0;
        if ((kind == TSR_EPI_BGRADA || kind == TSR_EPI_BGRADB) && glen > 0) {
            int by_row = kind == TSR_EPI_BGRADA ? transa != TSR_TRANS : transb == TSR_TRANS;
            const void *x = kind == TSR_EPI_BGRADA ? a : b;
            int ld = kind == TSR_EPI_BGRADA ? lda_ : ldb_;
            if (ab_type == CUDA_R_16BF)
                TSR_LAUNCH(k_gemm_sums<uint16_t>, tsr_blocks((size_t)glen, 8), 256, 0, stream, glen,
                           k, (const uint16_t *)x, ld, by_row, epi->bgrad, epi->bgrad_accumulate);
            else
                TSR_LAUNCH(k_gemm_sums<float>, tsr_blocks((size_t)glen, 8), 256, 0, stream, glen, k,
                           (const float *)x, ld, by_row, epi->bgrad, epi->bgrad_accumulate);
            rc = tsr_cuda_launched("k_gemm_sums");
        } else if (kind == TSR_EPI_DGELU_BGRAD && !epi->bgrad_accumulate && glen > 0) {
            cudaError_t e = cudaMemsetAsync(epi->bgrad, 0, (size_t)glen * sizeof(float), stream);
            if (e != cudaSuccess)
                rc = tsr_cuda_failed("tsr_cuda_gemm_ep: cudaMemsetAsync", e);
        }
        return rc;
    }
    int device = 0;
    cudaError_t ce = cudaGetDevice(&device);
    if (ce != cudaSuccess)
        return tsr_cuda_failed("tsr_cuda_gemm_ep: cudaGetDevice", ce);
    cublasLtHandle_t lt = nullptr;
    void *ws = nullptr, *partial = nullptr;
    size_t ws_bytes = 0;
    int rc;
    if ((rc = lt_get_handle(device, &lt)))
        return rc;
    if (wants_grad && epi->bgrad_accumulate &&
        (rc = tsr_cuda_stream_scratch(stream, TSR_SCRATCH_BGRAD, (size_t)glen * sizeof(float),
                                      &partial)))
        return rc;
    lt_workspace(stream, &ws, &ws_bytes);
    bool has_aux = epi && epi->aux && (kind == TSR_EPI_BIAS_GELU || reads_aux);
    float *grad_out = wants_grad ? (epi->bgrad_accumulate ? (float *)partial : epi->bgrad) : nullptr;
    const void *ptrs[6] = {a, b, c, has_aux ? epi->aux : c, wants_bias ? (const void *)epi->bias : c,
                           grad_out ? (const void *)grad_out : c};
    LtKey key;
    memset(&key, 0, sizeof key);
    key = LtKey{device, (int)ab_type, (int)c_type, (int)compute, transa, transb, m, n, k, lda, ldb,
                ldc, has_aux ? epi->ld_aux : 0, (int)lt_epilogue(kind, has_aux), lt_align(ptrs, 6)};
    cublasLtMatmulAlgo_t algo;
    int found = lt_cache_get(key, &algo);
    LtDescs d;
    cublasLtEpilogue_t ep = lt_epilogue(kind, has_aux);
    cublasOperation_t ta = op_of(transa), tb = op_of(transb);
    int32_t bias_type = CUDA_R_32F;
    LT_TRY(cublasLtMatmulDescCreate, &d.op, compute, CUDA_R_32F);
    LT_TRY(cublasLtMatmulDescSetAttribute, d.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(int32_t));
    LT_TRY(cublasLtMatmulDescSetAttribute, d.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(int32_t));
    LT_TRY(cublasLtMatmulDescSetAttribute, d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(uint32_t));
    if (wants_bias || wants_grad) {
        const void *bp = wants_bias ? (const void *)epi->bias : (const void *)grad_out;
        LT_TRY(cublasLtMatmulDescSetAttribute, d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp,
               sizeof bp);
        /* fp32 bias and bias gradient: the default for an fp32 D; a bf16 D
         * would have bf16 ones by default */
        if (c_type != CUDA_R_32F)
            LT_TRY(cublasLtMatmulDescSetAttribute, d.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                   &bias_type, sizeof bias_type);
    }
    if (has_aux) { /* in D's type: cuBLASLt's default, no attribute */
        int64_t ld_aux = epi->ld_aux;
        LT_TRY(cublasLtMatmulDescSetAttribute, d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
               &epi->aux, sizeof epi->aux);
        LT_TRY(cublasLtMatmulDescSetAttribute, d.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld_aux,
               sizeof ld_aux);
    }
    LT_TRY(cublasLtMatrixLayoutCreate, &d.a, ab_type, transa == TSR_TRANS ? k : m,
                                      transa == TSR_TRANS ? m : k, lda_);
    LT_TRY(cublasLtMatrixLayoutCreate, &d.b, ab_type, transb == TSR_TRANS ? n : k,
                                      transb == TSR_TRANS ? k : n, ldb_);
    LT_TRY(cublasLtMatrixLayoutCreate, &d.c, c_type, m, n, ldc);
    if (found < 0) {
        /* the GELU auxiliary ld must be a multiple of 8 (cublasLt.h): no algorithm otherwise */
        found = 0;
        if (!(has_aux && epi->ld_aux % 8)) {
            cublasLtMatmulPreference_t pref = nullptr;
            uint64_t wsb = ws_bytes;
            cublasLtMatmulHeuristicResult_t res;
            int nres = 0;
            memset(&res, 0, sizeof res);
            cublasStatus_t st = cublasLtMatmulPreferenceCreate(&pref);
            if (st == CUBLAS_STATUS_SUCCESS)
                st = cublasLtMatmulPreferenceSetAttribute(
                    pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
            if (st == CUBLAS_STATUS_SUCCESS)
                st = cublasLtMatmulAlgoGetHeuristic(lt, d.op, d.a, d.b, d.c, d.c, pref, 1, &res,
                                                    &nres);
            if (pref)
                cublasLtMatmulPreferenceDestroy(pref);
            /* NOT_SUPPORTED (or any status): no algorithm, the fallback runs */
            if (st == CUBLAS_STATUS_SUCCESS && nres > 0 && res.state == CUBLAS_STATUS_SUCCESS) {
                found = 1;
                algo = res.algo;
            }
            (void)cudaGetLastError();
        }
        lt_cache_put(key, found, &algo);
    }
    if (found) {
        cublasStatus_t st = cublasLtMatmul(lt, d.op, &alpha, a, d.a, b, d.b, &beta, c, d.c, c, d.c,
                                           &algo, ws, ws_bytes, stream);
        if (st != CUBLAS_STATUS_SUCCESS)
            return tsr_cuda_blas_failed("cublasLtMatmul", (int)st);
        lt_fused++;
    } else { /* the cuBLAS product, then the epilogue's kernels */
        lt_fallback++;
        if ((rc = gemm_ex(fn, stream, handle, compute, ab_type, c_type, transa, transb, m, n, k,
                          alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1)))
            return rc;
        if (kind == TSR_EPI_BGRADA || kind == TSR_EPI_BGRADB) {
            /* op(A)(i, p): A(i, p) (rows of A) or A(p, i); op(B)(p, j): B(p, j) or B(j, p) */
            int by_row = kind == TSR_EPI_BGRADA ? transa != TSR_TRANS : transb == TSR_TRANS;
            const void *x = kind == TSR_EPI_BGRADA ? a : b;
            int ld = kind == TSR_EPI_BGRADA ? lda_ : ldb_;
            if (ab_type == CUDA_R_16BF)
                TSR_LAUNCH(k_gemm_sums<uint16_t>, tsr_blocks((size_t)glen, 8), 256, 0, stream, glen,
                           k, (const uint16_t *)x, ld, by_row, grad_out, 0);
            else
                TSR_LAUNCH(k_gemm_sums<float>, tsr_blocks((size_t)glen, 8), 256, 0, stream, glen, k,
                           (const float *)x, ld, by_row, grad_out, 0);
            if ((rc = tsr_cuda_launched("k_gemm_sums")))
                return rc;
        } else if (kind != TSR_EPI_NONE) {
            int gelu = kind == TSR_EPI_BIAS_GELU;
            const float *bias = wants_bias ? epi->bias : nullptr;
            void *aux = epi->aux;
            if (c_type == CUDA_R_16BF)
                TSR_LAUNCH(k_gemm_epilogue<uint16_t>, tsr_blocks((size_t)m * n, 256), 256, 0,
                           stream, m, n, (uint16_t *)c, ldc, bias, (uint16_t *)aux, epi->ld_aux,
                           gelu, (int)reads_aux);
            else
                TSR_LAUNCH(k_gemm_epilogue<float>, tsr_blocks((size_t)m * n, 256), 256, 0, stream,
                           m, n, (float *)c, ldc, bias, (float *)aux, epi->ld_aux, gelu,
                           (int)reads_aux);
            if ((rc = tsr_cuda_launched("k_gemm_epilogue")))
                return rc;
            if (kind == TSR_EPI_DGELU_BGRAD) {
                if (c_type == CUDA_R_16BF)
                    TSR_LAUNCH(k_gemm_sums<uint16_t>, tsr_blocks((size_t)m, 8), 256, 0, stream, m,
                               n, (const uint16_t *)c, ldc, 1, grad_out, 0);
                else
                    TSR_LAUNCH(k_gemm_sums<float>, tsr_blocks((size_t)m, 8), 256, 0, stream, m, n,
                               (const float *)c, ldc, 1, grad_out, 0);
                if ((rc = tsr_cuda_launched("k_gemm_sums")))
                    return rc;
            }
        }
    }
    if (wants_grad && epi->bgrad_accumulate) { /* bgrad += the partial, in stream order */
        TSR_LAUNCH(k_gemm_add, tsr_blocks((size_t)glen, 256), 256, 0, stream, glen, (float *)partial,
                   epi->bgrad);
        return tsr_cuda_launched("k_gemm_add");
    }
    return 0;
}

} // namespace

extern "C" int tsr_cuda_gemm_ep(void *stream, void *cublas_handle, int mode, int transa,
                                int transb, int m, int n, int k, float alpha, const float *a,
                                int lda, const float *b, int ldb, float beta, float *c, int ldc,
                                const tsr_gemm_epilogue_t *epi)
{
    cublasComputeType_t compute;
    switch (mode) {
    case TSR_GEMM_TF32: compute = CUBLAS_COMPUTE_32F_FAST_TF32; break;
    case TSR_GEMM_FP32: compute = CUBLAS_COMPUTE_32F; break;
    default:
        return tsr_cuda_invalid("tsr_cuda_gemm_ep: unknown precision mode %d (TSR_GEMM_TF32 or "
                                "TSR_GEMM_FP32)",
                                mode);
    }
    return gemm_ep("tsr_cuda_gemm_ep", TSR_STREAM(stream), cublas_handle, compute, CUDA_R_32F,
                   CUDA_R_32F, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, epi);
}

extern "C" int tsr_cuda_gemm_bf16_ep(void *stream, void *cublas_handle, int transa, int transb,
                                     int m, int n, int k, float alpha, const uint16_t *a, int lda,
                                     const uint16_t *b, int ldb, float beta, void *c,
                                     int c_is_bf16, int ldc, const tsr_gemm_epilogue_t *epi)
{
    return gemm_ep("tsr_cuda_gemm_bf16_ep", TSR_STREAM(stream), cublas_handle, CUBLAS_COMPUTE_32F,
                   CUDA_R_16BF, c_is_bf16 ? CUDA_R_16BF : CUDA_R_32F, transa, transb, m, n, k,
                   alpha, a, lda, b, ldb, beta, c, ldc, epi);
}

extern "C" void tsr_cuda_gemm_ep_counts(uint64_t *fused, uint64_t *fallback)
{
    *fused = lt_fused.load();
    *fallback = lt_fallback.load();
}
