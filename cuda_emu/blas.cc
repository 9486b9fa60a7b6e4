/* cuda_emu/blas.cc — the emulated cuBLAS subset: a handle is a device and a
 * stream; a GEMM is queued on the stream and runs as OpenBLAS sgemm
 * (column-major, as cuBLAS) on inputs rounded as the GPU would read them:
 * TF32 (10-bit mantissa, round to nearest even) for CUBLAS_COMPUTE_32F_FAST_TF32
 * or the TF32 math mode, bf16 widened exactly, bf16 for _FAST_16BF;
 * accumulation in fp32, a bf16 result rounded to nearest even.
 *
 * Must never: read a matrix outside the allocation its pointer lies in (every
 * operand's extent is checked at the call), or read alpha/beta after the call
 * returns (host pointer mode: they are copied).
 */
#include "emu.h"

#include <cublas_v2.h>

#include <cblas.h>

#include <cstdio>
#include <cstring>

struct cublasContext {
    int device;
    cudaStream_t stream;
    cublasMath_t mode;
};

namespace {

using namespace emu;

float tf32(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) { /* finite: round to nearest even at bit 13 */
        u += 0x0fffu + ((u >> 13) & 1u);
        u &= 0xffffe000u;
    }
    memcpy(&x, &u, 4);
    return x;
}

float bf16_to_f(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t f_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu))
        return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

enum Round { R_NONE, R_TF32, R_BF16 };

struct Gemm {
    cublasOperation_t ta, tb;
    int m, n, k, lda, ldb, ldc, batch;
    long long sa, sb, sc;
    float alpha, beta;
    const void *A, *B;
    void *C;
    cudaDataType_t at, ct;
    Round round;
};

/* A stored matrix (rows x cols, leading dimension ld) as fp32 with the
 * compute type's input rounding. */
void load(const void *p, cudaDataType_t t, int rows, int cols, int ld, Round r, float *out)
{
    for (int j = 0; j < cols; j++)
        for (int i = 0; i < rows; i++) {
            size_t at = (size_t)j * (size_t)ld + (size_t)i;
            float v = t == CUDA_R_16BF ? bf16_to_f(((const uint16_t *)p)[at]) : ((const float *)p)[at];
            if (r == R_TF32)
                v = tf32(v);
            else if (r == R_BF16)
                v = bf16_to_f(f_to_bf16(v));
            out[(size_t)j * (size_t)rows + (size_t)i] = v;
        }
}

void run_gemm(void *arg)
{
    Gemm *g = (Gemm *)arg;
    int ar = g->ta == CUBLAS_OP_N ? g->m : g->k, ac = g->ta == CUBLAS_OP_N ? g->k : g->m;
    int br = g->tb == CUBLAS_OP_N ? g->k : g->n, bc = g->tb == CUBLAS_OP_N ? g->n : g->k;
    size_t es = g->at == CUDA_R_16BF ? 2 : 4, cs = g->ct == CUDA_R_16BF ? 2 : 4;
    std::vector<float> a((size_t)ar * ac), b((size_t)br * bc), c;
    if (g->ct == CUDA_R_16BF)
        c.resize((size_t)g->m * g->n);
    for (int i = 0; i < g->batch; i++) {
        const char *A = (const char *)g->A + (size_t)(i * g->sa) * es;
        const char *B = (const char *)g->B + (size_t)(i * g->sb) * es;
        char *C = (char *)g->C + (size_t)(i * g->sc) * cs;
        if (g->m == 0 || g->n == 0)
            continue;
        load(A, g->at, ar, ac, g->lda, g->round, a.data());
        load(B, g->at, br, bc, g->ldb, g->round, b.data());
        float *cp = (float *)C;
        int ldc = g->ldc;
        if (g->ct == CUDA_R_16BF) {
            load(C, g->ct, g->m, g->n, g->ldc, R_NONE, c.data());
            cp = c.data();
            ldc = g->m;
        }
        if (g->k == 0) {
            for (int j = 0; j < g->n; j++)
                for (int r = 0; r < g->m; r++) {
                    float &x = cp[(size_t)j * ldc + r];
                    x = g->beta == 0.0f ? 0.0f : g->beta * x;
                }
        } else {
            if (g->beta == 0.0f) /* cuBLAS does not read C when beta is 0 (NaN garbage) */
                for (int j = 0; j < g->n; j++)
                    for (int r = 0; r < g->m; r++)
                        cp[(size_t)j * ldc + r] = 0.0f;
            cblas_sgemm(CblasColMajor, g->ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
                        g->tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, g->m, g->n, g->k,
                        g->alpha, a.data(), ar > 0 ? ar : 1, b.data(), br > 0 ? br : 1, g->beta, cp,
                        ldc);
        }
        if (g->ct == CUDA_R_16BF)
            for (int j = 0; j < g->n; j++)
                for (int r = 0; r < g->m; r++)
                    ((uint16_t *)C)[(size_t)j * g->ldc + r] = f_to_bf16(c[(size_t)j * g->m + r]);
    }
    delete g;
}

/* The operand [p, p + extent elements) lies in one allocation the handle's
 * device may use. */
bool operand_ok(const char *call, const char *role, const cublasContext *h, const void *p,
                size_t elems, size_t es)
{
    if (elems == 0)
        return true;
    Loc l = locate(p);
    Device *d = device(h->device);
    bool good = (l.where == W_DEVICE && l.bytes &&
                 (l.device == h->device || (d && d->peer[l.device]))) ||
                (l.where == W_PINNED && l.bytes) || l.where == W_REGISTERED;
    if (!good) {
        fail_loud(cudaErrorIllegalAddress, "%s on device %d: %s is %s", call, h->device, role,
                  describe(p, l).c_str());
        return false;
    }
    if (l.bytes && (const char *)p + elems * es > l.start + l.bytes) {
        fail_loud(cudaErrorIllegalAddress, "%s: %s %s: %zu elements overrun the allocation", call,
                  role, describe(p, l).c_str(), elems);
        return false;
    }
    return true;
}

size_t extent(int rows, int cols, int ld, long long stride, int batch)
{
    if (rows == 0 || cols == 0 || batch == 0)
        return 0;
    return (size_t)(batch - 1) * (size_t)stride + (size_t)(cols - 1) * (size_t)ld + (size_t)rows;
}

cublasStatus_t gemm(const char *call, cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                    int m, int n, int k, const void *alpha, const void *A, cudaDataType_t at,
                    int lda, long long sa, const void *B, cudaDataType_t bt, int ldb, long long sb,
                    const void *beta, void *C, cudaDataType_t ct, int ldc, long long sc, int batch,
                    cublasComputeType_t compute)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (inject(call)) {
        fail(cudaErrorLaunchFailure, "%s: failure injected", call);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    if ((ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T) ||
        m < 0 || n < 0 || k < 0 || batch < 0 || !alpha || !beta) {
        fail(cudaErrorInvalidValue, "%s: invalid operation, size or scalar", call);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
    int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
    if (lda < (ar > 1 ? ar : 1) || ldb < (br > 1 ? br : 1) || ldc < (m > 1 ? m : 1)) {
        fail(cudaErrorInvalidValue, "%s: lda %d, ldb %d, ldc %d for m %d n %d k %d", call, lda, ldb,
             ldc, m, n, k);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (at != bt || (at != CUDA_R_32F && at != CUDA_R_16BF) ||
        (ct != CUDA_R_32F && ct != CUDA_R_16BF)) {
        fail(cudaErrorNotSupported, "%s: data types A %d, B %d, C %d", call, at, bt, ct);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    Round r;
    switch (compute) {
    case CUBLAS_COMPUTE_32F:
        r = h->mode == CUBLAS_TF32_TENSOR_OP_MATH && at == CUDA_R_32F ? R_TF32 : R_NONE;
        break;
    case CUBLAS_COMPUTE_32F_PEDANTIC: r = R_NONE; break;
    case CUBLAS_COMPUTE_32F_FAST_TF32: r = at == CUDA_R_32F ? R_TF32 : R_NONE; break;
    case CUBLAS_COMPUTE_32F_FAST_16BF: r = R_BF16; break;
    default:
        fail(cudaErrorNotSupported, "%s: compute type %d", call, (int)compute);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    size_t es = at == CUDA_R_16BF ? 2 : 4, cs = ct == CUDA_R_16BF ? 2 : 4;
    if (!operand_ok(call, "A", h, A, extent(ar, ac, lda, sa, batch), es) ||
        !operand_ok(call, "B", h, B, extent(br, bc, ldb, sb, batch), es) ||
        !operand_ok(call, "C", h, C, extent(m, n, ldc, sc, batch), cs))
        return CUBLAS_STATUS_EXECUTION_FAILED;
    Stream *s = stream_of(h->stream, call);
    if (!s)
        return CUBLAS_STATUS_EXECUTION_FAILED;
    {
        std::lock_guard<std::mutex> lk(g_mu);
        if (s->dev->sticky != cudaSuccess && s->dev->sticky_seen)
            return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    Gemm *g = new Gemm{ta, tb, m, n, k, lda, ldb, ldc, batch, sa, sb, sc,
                       *(const float *)alpha, *(const float *)beta, A, B, C, at, ct, r};
    Op *op = new Op(Op::BLAS);
    op->fn = run_gemm;
    op->user = g;
    submit(s, op);
    return CUBLAS_STATUS_SUCCESS;
}

struct Axpy {
    int n, incx, incy;
    float alpha;
    const float *x;
    float *y;
};

void run_axpy(void *arg)
{
    Axpy *a = (Axpy *)arg;
    cblas_saxpy(a->n, a->alpha, a->x, a->incx, a->y, a->incy);
    delete a;
}

} // namespace

extern "C" cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    if (!h)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (inject("cublasCreate")) {
        fail(cudaErrorMemoryAllocation, "cublasCreate: failure injected");
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    if (!device(current_device()))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    *h = new cublasContext{current_device(), nullptr, CUBLAS_DEFAULT_MATH};
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasDestroy(cublasHandle_t h)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (s) {
        Stream *st = stream_of(s, "cublasSetStream");
        if (!st)
            return CUBLAS_STATUS_INVALID_VALUE;
        if (st->dev->id != h->device) {
            fail_loud(cudaErrorInvalidResourceHandle,
                      "cublasSetStream: a stream of device %d for a handle of device %d",
                      st->dev->id, h->device);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    }
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasGetStream(cublasHandle_t h, cudaStream_t *s)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!s)
        return CUBLAS_STATUS_INVALID_VALUE;
    *s = h->stream;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h->mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasGetMathMode(cublasHandle_t h, cublasMath_t *mode)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!mode)
        return CUBLAS_STATUS_INVALID_VALUE;
    *mode = h->mode;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta,
                                       cublasOperation_t tb, int m, int n, int k,
                                       const void *alpha, const void *A, cudaDataType_t at,
                                       int lda, const void *B, cudaDataType_t bt, int ldb,
                                       const void *beta, void *C, cudaDataType_t ct, int ldc,
                                       cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    (void)algo;
    return gemm("cublasGemmEx", h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0, beta, C,
                ct, ldc, 0, 1, compute);
}

extern "C" cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const void *alpha, const void *A, cudaDataType_t at, int lda, long long sa, const void *B,
    cudaDataType_t bt, int ldb, long long sb, const void *beta, void *C, cudaDataType_t ct,
    int ldc, long long sc, int batch, cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    (void)algo;
    return gemm("cublasGemmStridedBatchedEx", h, ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt,
                ldb, sb, beta, C, ct, ldc, sc, batch, compute);
}

extern "C" cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                      int m, int n, int k, const float *alpha, const float *A,
                                      int lda, const float *B, int ldb, const float *beta,
                                      float *C, int ldc)
{
    return gemm("cublasSgemm", h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, 0, B, CUDA_R_32F,
                ldb, 0, beta, C, CUDA_R_32F, ldc, 0, 1, CUBLAS_COMPUTE_32F);
}

extern "C" cublasStatus_t cublasSaxpy(cublasHandle_t h, int n, const float *alpha, const float *x,
                                      int incx, float *y, int incy)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (inject("cublasSaxpy")) {
        fail(cudaErrorLaunchFailure, "cublasSaxpy: failure injected");
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    if (n < 0 || incx <= 0 || incy <= 0 || !alpha) {
        fail(cudaErrorInvalidValue, "cublasSaxpy: n %d, incx %d, incy %d", n, incx, incy);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (n == 0)
        return CUBLAS_STATUS_SUCCESS;
    if (!operand_ok("cublasSaxpy", "x", h, x, (size_t)(n - 1) * incx + 1, 4) ||
        !operand_ok("cublasSaxpy", "y", h, y, (size_t)(n - 1) * incy + 1, 4))
        return CUBLAS_STATUS_EXECUTION_FAILED;
    Stream *s = stream_of(h->stream, "cublasSaxpy");
    if (!s)
        return CUBLAS_STATUS_EXECUTION_FAILED;
    Op *op = new Op(Op::BLAS);
    op->fn = run_axpy;
    op->user = new Axpy{n, incx, incy, *alpha, x, y};
    submit(s, op);
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" const char *cublasGetStatusName(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

extern "C" const char *cublasGetStatusString(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "error detected trying to check the license";
    }
    return "unknown error";
}
