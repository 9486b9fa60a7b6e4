/* cuda_emu/blas.cc — the emulated cuBLAS and cuBLASLt subsets: a handle is a
 * device and a stream (a cuBLASLt handle: nothing, the stream comes with each
 * call); a GEMM is queued on the stream and runs as OpenBLAS sgemm
 * (column-major, as cuBLAS) on inputs rounded as the GPU would read them:
 * TF32 (10-bit mantissa, round to nearest even) for CUBLAS_COMPUTE_32F_FAST_TF32
 * or the TF32 math mode, bf16 widened exactly, bf16 for _FAST_16BF;
 * accumulation in fp32, a bf16 result rounded to nearest even. cuBLASLt's
 * epilogues (bias, GELU with its auxiliary input, GELU gradient, bias
 * gradients) are computed per element in double from the fp32 product and
 * stored in their types, the bias gradients summed in double.
 *
 * Must never: read a matrix outside the allocation its pointer lies in (every
 * operand's extent is checked at the call), or read alpha/beta after the call
 * returns (host pointer mode: they are copied).
 */
#include "emu.h"

#include <cublasLt.h>
#include <cublas_v2.h>

#include <cblas.h>

#include <cmath>
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

/* ---- cuBLASLt ------------------------------------------------------------ */

struct cublasLtContext {
    int magic;
};
struct tsr_emu_lt_desc {
    cublasComputeType_t compute;
    cudaDataType_t scale;
    int ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
    uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    void *bias = nullptr, *aux = nullptr;
    int64_t aux_ld = 0;
    int bias_type = -1, aux_type = -1; /* -1: D's type */
};
struct tsr_emu_lt_layout {
    cudaDataType_t type;
    uint64_t rows, cols;
    int64_t ld;
};
struct tsr_emu_lt_pref {
    uint64_t max_workspace = 0;
};

namespace {

struct LtGemm {
    int ta, tb, m, n, k, lda, ldb, ldc, ldd;
    float alpha, beta;
    const void *A, *B, *C;
    void *D;
    cudaDataType_t at, ct;
    Round round;
    uint32_t epi;
    void *bias, *aux;
    int64_t aux_ld;
    cudaDataType_t bias_t, aux_t;
};

const double GELU_S = 0.7978845608028654; /* sqrt(2/pi) */

double gelu(double x)
{
    return 0.5 * x * (1.0 + std::tanh(GELU_S * (x + 0.044715 * x * x * x)));
}

double gelu_grad(double x)
{
    double t = std::tanh(GELU_S * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_S * (1.0 + 3.0 * 0.044715 * x * x);
}

float get(const void *p, cudaDataType_t t, size_t at)
{
    return t == CUDA_R_16BF ? bf16_to_f(((const uint16_t *)p)[at]) : ((const float *)p)[at];
}

void put(void *p, cudaDataType_t t, size_t at, double v)
{
    if (t == CUDA_R_16BF)
        ((uint16_t *)p)[at] = f_to_bf16((float)v);
    else
        ((float *)p)[at] = (float)v;
}

bool has(uint32_t epi, uint32_t bit)
{
    return (epi & bit) != 0;
}

void run_lt(void *arg)
{
    LtGemm *g = (LtGemm *)arg;
    int ar = g->ta == CUBLAS_OP_N ? g->m : g->k, ac = g->ta == CUBLAS_OP_N ? g->k : g->m;
    int br = g->tb == CUBLAS_OP_N ? g->k : g->n, bc = g->tb == CUBLAS_OP_N ? g->n : g->k;
    std::vector<float> a((size_t)ar * ac), b((size_t)br * bc), t((size_t)g->m * g->n, 0.0f);
    load(g->A, g->at, ar, ac, g->lda, g->round, a.data());
    load(g->B, g->at, br, bc, g->ldb, g->round, b.data());
    if (g->k > 0 && g->m > 0 && g->n > 0)
        cblas_sgemm(CblasColMajor, g->ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
                    g->tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, g->m, g->n, g->k, g->alpha,
                    a.data(), ar > 0 ? ar : 1, b.data(), br > 0 ? br : 1, 0.0f, t.data(), g->m);
    uint32_t e = g->epi;
    bool bgrad_a = e == CUBLASLT_EPILOGUE_BGRADA, bgrad_b = e == CUBLASLT_EPILOGUE_BGRADB;
    bool dgelu = has(e, 64), bgrad_d = dgelu && has(e, 16);
    bool bias = !dgelu && !bgrad_a && !bgrad_b && has(e, CUBLASLT_EPILOGUE_BIAS);
    bool gelu_f = !dgelu && has(e, 32), aux_out = gelu_f && has(e, 128);
    std::vector<double> rows((size_t)g->m, 0.0);
    for (int j = 0; j < g->n; j++)
        for (int i = 0; i < g->m; i++) {
            size_t ij = (size_t)j * (size_t)g->m + (size_t)i;
            double v = t[ij]; /* the fp32 product, as the accumulator holds it */
            if (g->beta != 0.0f) /* C is not read when beta is 0 */
                v += (double)g->beta * get(g->C, g->ct, (size_t)j * g->ldc + i);
            v = (float)v; /* alpha AB + beta C in fp32 */
            if (bias)
                v += get(g->bias, g->bias_t, (size_t)i);
            if (aux_out)
                put(g->aux, g->aux_t, (size_t)j * (size_t)g->aux_ld + i, v);
            if (gelu_f)
                v = gelu(v);
            if (dgelu)
                v *= gelu_grad(get(g->aux, g->aux_t, (size_t)j * (size_t)g->aux_ld + i));
            v = (float)v;
            if (bgrad_d)
                rows[(size_t)i] += v;
            put(g->D, g->ct, (size_t)j * g->ldd + i, v);
        }
    if (bgrad_d)
        for (int i = 0; i < g->m; i++)
            put(g->bias, g->bias_t, (size_t)i, rows[(size_t)i]);
    if (bgrad_a) /* over k of op(A) (m, k): one value per row of D */
        for (int i = 0; i < g->m; i++) {
            double s = 0.0;
            for (int p = 0; p < g->k; p++)
                s += g->ta == CUBLAS_OP_N ? a[(size_t)p * ar + i] : a[(size_t)i * ar + p];
            put(g->bias, g->bias_t, (size_t)i, s);
        }
    if (bgrad_b) /* over k of op(B) (k, n): one value per column of D */
        for (int j = 0; j < g->n; j++) {
            double s = 0.0;
            for (int p = 0; p < g->k; p++)
                s += g->tb == CUBLAS_OP_N ? b[(size_t)j * br + p] : b[(size_t)p * br + j];
            put(g->bias, g->bias_t, (size_t)j, s);
        }
    delete g;
}

bool epilogue_known(uint32_t e)
{
    switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT:
    case CUBLASLT_EPILOGUE_BIAS:
    case CUBLASLT_EPILOGUE_GELU:
    case CUBLASLT_EPILOGUE_GELU_AUX:
    case CUBLASLT_EPILOGUE_GELU_BIAS:
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    case CUBLASLT_EPILOGUE_DGELU:
    case CUBLASLT_EPILOGUE_DGELU_BGRAD:
    case CUBLASLT_EPILOGUE_BGRADA:
    case CUBLASLT_EPILOGUE_BGRADB: return true;
    }
    return false;
}

/* The problem the descriptors describe is one the emulation (and the
 * library's documentation) accepts; why not in *why. */
bool lt_valid(const tsr_emu_lt_desc *d, const tsr_emu_lt_layout *A, const tsr_emu_lt_layout *B,
              const tsr_emu_lt_layout *C, const tsr_emu_lt_layout *D, const char **why)
{
    *why = nullptr;
    if (!d || !A || !B || !C || !D)
        *why = "a descriptor is NULL";
    else if (!epilogue_known(d->epilogue))
        *why = "epilogue not emulated";
    else if (A->type != B->type || (A->type != CUDA_R_32F && A->type != CUDA_R_16BF) ||
             C->type != D->type || (D->type != CUDA_R_32F && D->type != CUDA_R_16BF))
        *why = "data types (A and B fp32 or bf16, C = D fp32 or bf16)";
    else if (C->rows != D->rows || C->cols != D->cols)
        *why = "C and D shapes differ";
    else {
        uint64_t m = D->rows, n = D->cols;
        uint64_t am = d->ta == CUBLAS_OP_N ? A->rows : A->cols;
        uint64_t ak = d->ta == CUBLAS_OP_N ? A->cols : A->rows;
        uint64_t bk = d->tb == CUBLAS_OP_N ? B->rows : B->cols;
        uint64_t bn = d->tb == CUBLAS_OP_N ? B->cols : B->rows;
        uint32_t e = d->epilogue;
        if (am != m || bn != n || ak != bk)
            *why = "shapes of op(A), op(B) and D disagree";
        else if ((int64_t)A->rows > A->ld || (int64_t)B->rows > B->ld ||
                 (int64_t)C->rows > C->ld || (int64_t)D->rows > D->ld)
            *why = "a leading dimension is below the rows";
        else if (e != CUBLASLT_EPILOGUE_DEFAULT && !d->bias && e != CUBLASLT_EPILOGUE_GELU &&
                 e != CUBLASLT_EPILOGUE_GELU_AUX && e != CUBLASLT_EPILOGUE_DGELU)
            *why = "the epilogue needs CUBLASLT_MATMUL_DESC_BIAS_POINTER";
        else if ((e & 128) && (!d->aux || d->aux_ld < (int64_t)m || d->aux_ld % 8))
            *why = "the epilogue needs an auxiliary pointer and an ld >= rows, divisible by 8";
        else if ((d->bias_type != -1 && d->bias_type != CUDA_R_32F && d->bias_type != CUDA_R_16BF) ||
                 (d->aux_type != -1 && d->aux_type != CUDA_R_32F && d->aux_type != CUDA_R_16BF))
            *why = "bias or auxiliary data type";
    }
    return *why == nullptr;
}

cudaDataType_t type_or(int t, cudaDataType_t dflt)
{
    return t == -1 ? dflt : (cudaDataType_t)t;
}

} // namespace

extern "C" cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
    if (!h)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (inject("cublasLtCreate")) {
        fail(cudaErrorMemoryAllocation, "cublasLtCreate: failure injected");
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    *h = new cublasLtContext{0x1717};
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d,
                                                   cublasComputeType_t compute,
                                                   cudaDataType_t scale)
{
    if (!d)
        return CUBLAS_STATUS_INVALID_VALUE;
    *d = new tsr_emu_lt_desc{};
    (*d)->compute = compute;
    (*d)->scale = scale;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d)
{
    delete d;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                                         cublasLtMatmulDescAttributes_t attr,
                                                         const void *buf, size_t size)
{
    if (!d || !buf)
        return CUBLAS_STATUS_INVALID_VALUE;
    /* the sizes cuBLASLt checks: int32_t, uint32_t, pointers, int64_t */
    auto want = [&](size_t s) { return size == s; };
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
        if (!want(4)) break;
        d->compute = (cublasComputeType_t) * (const int32_t *)buf;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
        if (!want(4)) break;
        d->scale = (cudaDataType_t) * (const int32_t *)buf;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:
        if (!want(4) || *(const int32_t *)buf != 0) break; /* host pointers only */
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB: {
        if (!want(4)) break;
        int32_t v = *(const int32_t *)buf;
        if (v != CUBLAS_OP_N && v != CUBLAS_OP_T) break;
        (attr == CUBLASLT_MATMUL_DESC_TRANSA ? d->ta : d->tb) = v;
        return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
        if (!want(4)) break;
        d->epilogue = *(const uint32_t *)buf;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
        if (!want(sizeof(void *))) break;
        memcpy(&d->bias, buf, sizeof(void *));
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
        if (!want(sizeof(void *))) break;
        memcpy(&d->aux, buf, sizeof(void *));
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
        if (!want(8)) break;
        d->aux_ld = *(const int64_t *)buf;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
        if (!want(4)) break;
        (attr == CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE ? d->bias_type : d->aux_type) =
            *(const int32_t *)buf;
        return CUBLAS_STATUS_SUCCESS;
    }
    fail(cudaErrorInvalidValue, "cublasLtMatmulDescSetAttribute: attribute %d, %zu bytes",
         (int)attr, size);
    return CUBLAS_STATUS_INVALID_VALUE;
}

extern "C" cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type,
                                                     uint64_t rows, uint64_t cols, int64_t ld)
{
    if (!l || ld < 1 || rows > (uint64_t)INT32_MAX || cols > (uint64_t)INT32_MAX)
        return CUBLAS_STATUS_INVALID_VALUE;
    *l = new tsr_emu_lt_layout{type, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l)
{
    delete l;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p)
{
    if (!p)
        return CUBLAS_STATUS_INVALID_VALUE;
    *p = new tsr_emu_lt_pref{};
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p)
{
    delete p;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
    size_t size)
{
    if (!p || !buf || attr != CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES || size != 8)
        return CUBLAS_STATUS_INVALID_VALUE;
    p->max_workspace = *(const uint64_t *)buf;
    return CUBLAS_STATUS_SUCCESS;
}

/* One "algorithm" (data[0] = 1: the emulated product), no workspace; none
 * for a problem the emulation rejects (as cuBLASLt returns no algorithm for
 * an unsupported combination). */
extern "C" cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
    cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D, cublasLtMatmulPreference_t pref,
    int requested, cublasLtMatmulHeuristicResult_t results[], int *returned)
{
    if (!h || !pref || !returned || requested <= 0 || !results)
        return CUBLAS_STATUS_INVALID_VALUE;
    *returned = 0;
    if (inject("cublasLtMatmulAlgoGetHeuristic"))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    const char *why;
    if (!lt_valid(d, A, B, C, D, &why))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    memset(&results[0], 0, sizeof results[0]);
    results[0].algo.data[0] = 1;
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
                                         const void *alpha, const void *A,
                                         cublasLtMatrixLayout_t Ad, const void *B,
                                         cublasLtMatrixLayout_t Bd, const void *beta,
                                         const void *C, cublasLtMatrixLayout_t Cd, void *D,
                                         cublasLtMatrixLayout_t Dd, const cublasLtMatmulAlgo_t *algo,
                                         void *workspace, size_t workspace_bytes,
                                         cudaStream_t stream)
{
    const char *call = "cublasLtMatmul";
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (inject(call)) {
        fail(cudaErrorLaunchFailure, "%s: failure injected", call);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    const char *why = "";
    if (!alpha || !beta || !lt_valid(d, Ad, Bd, Cd, Dd, &why) || (algo && algo->data[0] != 1)) {
        fail(cudaErrorInvalidValue, "%s: %s", call,
             !alpha || !beta ? "alpha or beta is NULL" : algo && algo->data[0] != 1 ? "unknown algorithm" : why);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (d->compute != CUBLAS_COMPUTE_32F && d->compute != CUBLAS_COMPUTE_32F_FAST_TF32 &&
        d->compute != CUBLAS_COMPUTE_32F_FAST_16BF && d->compute != CUBLAS_COMPUTE_32F_PEDANTIC) {
        fail(cudaErrorNotSupported, "%s: compute type %d", call, (int)d->compute);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    (void)workspace, (void)workspace_bytes;
    Stream *s = stream_of(stream, call);
    if (!s)
        return CUBLAS_STATUS_EXECUTION_FAILED;
    cublasContext dev{s->dev->id, stream, CUBLAS_DEFAULT_MATH};
    int m = (int)Dd->rows, n = (int)Dd->cols;
    int k = (int)(d->ta == CUBLAS_OP_N ? Ad->cols : Ad->rows);
    cudaDataType_t bias_t = type_or(d->bias_type, Dd->type), aux_t = type_or(d->aux_type, Dd->type);
    uint32_t e = d->epilogue;
    size_t es = Ad->type == CUDA_R_16BF ? 2 : 4, cs = Dd->type == CUDA_R_16BF ? 2 : 4;
    size_t bias_len = e == CUBLASLT_EPILOGUE_BGRADB ? (size_t)n : (size_t)m;
    bool uses_bias = e != CUBLASLT_EPILOGUE_DEFAULT && e != CUBLASLT_EPILOGUE_GELU &&
                     e != CUBLASLT_EPILOGUE_GELU_AUX && e != CUBLASLT_EPILOGUE_DGELU;
    float b = *(const float *)beta;
    if (!operand_ok(call, "A", &dev, A, extent((int)Ad->rows, (int)Ad->cols, (int)Ad->ld, 0, 1), es) ||
        !operand_ok(call, "B", &dev, B, extent((int)Bd->rows, (int)Bd->cols, (int)Bd->ld, 0, 1), es) ||
        (b != 0.0f && !operand_ok(call, "C", &dev, C, extent(m, n, (int)Cd->ld, 0, 1), cs)) ||
        !operand_ok(call, "D", &dev, D, extent(m, n, (int)Dd->ld, 0, 1), cs) ||
        (uses_bias && !operand_ok(call, "bias", &dev, d->bias, bias_len,
                                  bias_t == CUDA_R_16BF ? 2 : 4)) ||
        ((e & 128) && !operand_ok(call, "aux", &dev, d->aux, extent(m, n, (int)d->aux_ld, 0, 1),
                                  aux_t == CUDA_R_16BF ? 2 : 4)))
        return CUBLAS_STATUS_EXECUTION_FAILED;
    {
        std::lock_guard<std::mutex> lk(g_mu);
        if (s->dev->sticky != cudaSuccess && s->dev->sticky_seen)
            return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    Round r = d->compute == CUBLAS_COMPUTE_32F_FAST_TF32 && Ad->type == CUDA_R_32F ? R_TF32
              : d->compute == CUBLAS_COMPUTE_32F_FAST_16BF                         ? R_BF16
                                                                                   : R_NONE;
    LtGemm *g = new LtGemm{d->ta, d->tb, m, n, k, (int)Ad->ld, (int)Bd->ld, (int)Cd->ld,
                           (int)Dd->ld, *(const float *)alpha, b, A, B, C, D, Ad->type,
                           Dd->type, r, e, d->bias, d->aux, d->aux_ld, bias_t, aux_t};
    Op *op = new Op(Op::BLAS);
    op->fn = run_lt;
    op->user = g;
    submit(s, op);
    return CUBLAS_STATUS_SUCCESS;
}
