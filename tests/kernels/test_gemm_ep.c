/* GEMM with an epilogue (kernels/gemm.h: bias, bias + GELU with and without
 * the pre-GELU auxiliary output, GELU gradient, GELU gradient + bias
 * gradient, bias gradients of A and of B, stored or accumulated) against a
 * naive double loop: the CPU counterpart (tsr_cpu_gemm_ep, _bf16_ep), and
 * the CUDA one (cuBLASLt; emulated in a -Dcuda=emu build) in strict FP32,
 * TF32 and bf16 with fp32 and bf16 C, on shapes that are not multiples of 16
 * with every leading dimension above its rows. A GELU auxiliary ld that is
 * not a multiple of 8 takes the cuBLAS + kernels fallback; so does, under
 * emulation, a heuristic query made to fail. Skipped visibly without a GPU
 * (the CPU test runs anyway). */
#include <stdint.h>

#include <tessera/tessera.h>

#include "kernels/convert.h"
#include "kernels/gemm.h"
#include "kt_cuda.h"

enum { P_FP32, P_TF32, P_BF16, P_BF16_C16 }; /* precision of a case */

typedef struct {
    int kind, ta, tb, m, n, k, ld_aux, acc, with_aux;
    float alpha, beta;
} ep_case;

static double gelu_d(double x)
{
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

static double gelu_grad_d(double x)
{
    double t = tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) +
           0.5 * x * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
}

static float round_bf16(float x)
{
    uint16_t h;
    float y;
    tsr_cpu_f32_to_bf16(1, &x, &h);
    tsr_cpu_bf16_to_f32(1, &h, &y);
    return y;
}

/* The inputs of one case (host, fp32 values; bf16 precisions hold values
 * exactly representable in bf16) and the double reference. */
typedef struct {
    int ar, ac, br, bc, lda, ldb, ldc, glen;
    float *a, *b, *c, *aux, *bias, *bgrad;
    double *want_c, *want_aux, *want_g;
} ep_data;

static void ep_make(const ep_case *t, int prec, ep_data *d, uint64_t salt)
{
    kt_rng r = kt_seed(salt);
    d->ar = t->ta ? t->k : t->m, d->ac = t->ta ? t->m : t->k;
    d->br = t->tb ? t->n : t->k, d->bc = t->tb ? t->k : t->n;
    d->lda = d->ar + 3, d->ldb = d->br + 1, d->ldc = t->m + 2;
    d->glen = t->kind == TSR_EPI_BGRADB ? t->n : t->m;
    size_t na = (size_t)d->lda * d->ac, nb = (size_t)d->ldb * d->bc, nc = (size_t)d->ldc * t->n;
    size_t naux = (size_t)t->ld_aux * t->n;
    d->a = kt_rand(&r, na, -1, 1), d->b = kt_rand(&r, nb, -1, 1), d->c = kt_rand(&r, nc, -1, 1);
    d->aux = kt_rand(&r, naux, -3, 3);
    d->bias = kt_rand(&r, (size_t)t->m, -1, 1), d->bgrad = kt_rand(&r, (size_t)d->glen, -1, 1);
    if (prec == P_BF16 || prec == P_BF16_C16) {
        for (size_t i = 0; i < na; i++)
            d->a[i] = round_bf16(d->a[i]);
        for (size_t i = 0; i < nb; i++)
            d->b[i] = round_bf16(d->b[i]);
    }
    if (prec == P_BF16_C16) {
        for (size_t i = 0; i < nc; i++)
            d->c[i] = round_bf16(d->c[i]);
        for (size_t i = 0; i < naux; i++)
            d->aux[i] = round_bf16(d->aux[i]);
    }
    d->want_c = kt_dalloc((size_t)t->m * t->n);
    d->want_aux = kt_dalloc((size_t)t->m * t->n);
    d->want_g = kt_dalloc((size_t)d->glen);
    for (int j = 0; j < t->n; j++)
        for (int i = 0; i < t->m; i++) {
            double s = 0.0;
            for (int p = 0; p < t->k; p++) {
                double x = t->ta ? d->a[(size_t)i * d->lda + p] : d->a[(size_t)p * d->lda + i];
                double y = t->tb ? d->b[(size_t)p * d->ldb + j] : d->b[(size_t)j * d->ldb + p];
                s += x * y;
            }
            double v = t->alpha * s + (t->beta != 0.0f ? t->beta * d->c[(size_t)j * d->ldc + i] : 0.0);
            size_t ij = (size_t)j * t->m + i;
            if (t->kind == TSR_EPI_BIAS || t->kind == TSR_EPI_BIAS_GELU)
                v += d->bias[i];
            if (t->kind == TSR_EPI_BIAS_GELU) {
                d->want_aux[ij] = v;
                v = gelu_d(v);
            }
            if (t->kind == TSR_EPI_DGELU || t->kind == TSR_EPI_DGELU_BGRAD)
                v *= gelu_grad_d(d->aux[(size_t)j * t->ld_aux + i]);
            d->want_c[ij] = v;
        }
    for (int g = 0; g < d->glen; g++) {
        double s = 0.0;
        if (t->kind == TSR_EPI_DGELU_BGRAD)
            for (int j = 0; j < t->n; j++)
                s += d->want_c[(size_t)j * t->m + g];
        else if (t->kind == TSR_EPI_BGRADA)
            for (int p = 0; p < t->k; p++)
                s += t->ta ? d->a[(size_t)g * d->lda + p] : d->a[(size_t)p * d->lda + g];
        else if (t->kind == TSR_EPI_BGRADB)
            for (int p = 0; p < t->k; p++)
                s += t->tb ? d->b[(size_t)p * d->ldb + g] : d->b[(size_t)g * d->ldb + p];
        d->want_g[g] = (t->acc ? d->bgrad[g] : 0.0) + s;
    }
}

static void ep_free(ep_data *d)
{
    free(d->a), free(d->b), free(d->c), free(d->aux), free(d->bias), free(d->bgrad);
    free(d->want_c), free(d->want_aux), free(d->want_g);
}

static uint16_t *to_bf16_copy(const float *x, size_t n)
{
    uint16_t *h = malloc((n ? n : 1) * sizeof *h);
    cr_assert_not_null(h);
    tsr_cpu_f32_to_bf16(n, x, h);
    return h;
}

static int has_grad(int kind)
{
    return kind == TSR_EPI_DGELU_BGRAD || kind == TSR_EPI_BGRADA || kind == TSR_EPI_BGRADB;
}

static int uses_aux(const ep_case *t)
{
    return t->kind == TSR_EPI_DGELU || t->kind == TSR_EPI_DGELU_BGRAD ||
           (t->kind == TSR_EPI_BIAS_GELU && t->with_aux);
}

/* Compare C (m, n) at ldc, aux and the bias gradient with the reference. */
static void ep_check(const char *who, const ep_case *t, const ep_data *d, const float *c,
                     const float *aux, const float *g, double atol, double rtol)
{
    char base[160], what[176];
    float *col = kt_alloc((size_t)t->m * t->n), *acol = kt_alloc((size_t)t->m * t->n);
    for (int j = 0; j < t->n; j++)
        for (int i = 0; i < t->m; i++) {
            col[(size_t)j * t->m + i] = c[(size_t)j * d->ldc + i];
            if (aux)
                acol[(size_t)j * t->m + i] = aux[(size_t)j * t->ld_aux + i];
        }
    snprintf(base, sizeof base, "%s: epilogue %d (%c%c m %d n %d k %d ld_aux %d acc %d)", who,
             t->kind, t->ta ? 'T' : 'N', t->tb ? 'T' : 'N', t->m, t->n, t->k, t->ld_aux, t->acc);
    snprintf(what, sizeof what, "%s C", base);
    /* cuBLASLt's GELU gradient epilogue is its own approximation (its
     * accuracy is not documented): on an H100 (2026-11-27) 1 element of
     * 1073 differed by 6e-5 relative from the double reference, 3x the
     * products' own error; 10x the tolerance for those outputs */
    double dg = t->kind == TSR_EPI_DGELU || t->kind == TSR_EPI_DGELU_BGRAD ? 10 : 1;
    kt_assert_close(what, col, d->want_c, (size_t)t->m * t->n, atol * dg, rtol * dg);
    if (t->kind == TSR_EPI_BIAS_GELU && aux) {
        snprintf(what, sizeof what, "%s aux", base);
        kt_assert_close(what, acol, d->want_aux, (size_t)t->m * t->n, atol, rtol);
    }
    if (has_grad(t->kind)) {
        snprintf(what, sizeof what, "%s bgrad", base);
        /* a sum of up to max(n, k) terms, each within the product's error */
        kt_assert_close(what, g, d->want_g, (size_t)d->glen, atol * 4, rtol);
    }
    free(col), free(acol);
}

static const ep_case CASES[] = {
    {TSR_EPI_BIAS, 0, 0, 37, 29, 23, 0, 0, 0, 1.0f, 0.0f},
    {TSR_EPI_BIAS, 1, 0, 37, 29, 23, 0, 0, 0, 1.0f, 1.0f},
    {TSR_EPI_BIAS_GELU, 0, 0, 37, 29, 23, 40, 0, 1, 1.0f, 0.0f},
    {TSR_EPI_BIAS_GELU, 0, 1, 45, 19, 33, 48, 0, 1, 0.5f, 0.5f},
    {TSR_EPI_BIAS_GELU, 1, 1, 45, 19, 33, 45, 0, 1, 1.0f, 0.0f}, /* aux ld 45: fallback */
    {TSR_EPI_BIAS_GELU, 0, 0, 37, 29, 23, 0, 0, 0, 1.0f, 0.0f},  /* no aux */
    {TSR_EPI_DGELU, 1, 0, 37, 29, 23, 40, 0, 1, 1.0f, 0.0f},
    {TSR_EPI_DGELU_BGRAD, 1, 0, 37, 29, 23, 40, 0, 1, 1.0f, 0.0f},
    {TSR_EPI_DGELU_BGRAD, 1, 0, 37, 29, 23, 40, 1, 1, 1.0f, 0.0f},
    {TSR_EPI_DGELU_BGRAD, 0, 0, 21, 13, 50, 21, 1, 1, 1.0f, 0.0f}, /* aux ld 21: fallback */
    /* beta 1: the last product of a cut inner dimension (nn/ops.c) */
    {TSR_EPI_DGELU, 0, 1, 37, 29, 23, 40, 0, 1, 1.0f, 1.0f},
    {TSR_EPI_DGELU_BGRAD, 1, 1, 37, 29, 23, 40, 1, 1, 1.0f, 1.0f},
    {TSR_EPI_BIAS_GELU, 1, 0, 37, 29, 23, 40, 0, 1, 1.0f, 1.0f},
    {TSR_EPI_BGRADA, 0, 1, 37, 29, 23, 0, 0, 0, 1.0f, 1.0f},
    {TSR_EPI_BGRADA, 0, 1, 37, 29, 23, 0, 1, 0, 1.0f, 1.0f},
    {TSR_EPI_BGRADA, 1, 0, 19, 45, 31, 0, 1, 0, 1.0f, 0.0f},
    {TSR_EPI_BGRADB, 1, 0, 37, 29, 23, 0, 0, 0, 1.0f, 0.0f},
    {TSR_EPI_BGRADB, 0, 1, 19, 45, 31, 0, 1, 0, 1.0f, 1.0f},
    {TSR_EPI_BGRADA, 0, 1, 5, 0, 7, 0, 1, 0, 1.0f, 0.0f}, /* no columns: A's sums all the same */
    {TSR_EPI_BGRADB, 0, 0, 0, 6, 9, 0, 0, 0, 1.0f, 0.0f}, /* no rows: B's sums */
};
#define NCASES (sizeof CASES / sizeof CASES[0])

/* tolerances of a precision (inputs in [-1, 1], k <= 50) */
static void tolerances(int prec, double *atol, double *rtol)
{
    switch (prec) {
    case P_FP32: *atol = 2e-5, *rtol = 2e-5; break;
    case P_TF32: *atol = 2e-2, *rtol = 1e-2; break;
    case P_BF16: *atol = 2e-5, *rtol = 2e-5; break;
    default: *atol = 2e-2, *rtol = 1e-2; break; /* bf16 C: 8 mantissa bits */
    }
}

static void cpu_case(const ep_case *t, int prec, uint64_t salt)
{
    ep_data d;
    ep_make(t, prec, &d, salt);
    tsr_gemm_epilogue_t e = {t->kind, d.bias, uses_aux(t) ? d.aux : NULL, t->ld_aux, d.bgrad,
                             t->acc};
    size_t nc = (size_t)d.ldc * t->n, naux = (size_t)t->ld_aux * t->n;
    if (t->beta == 0.0f)
        kt_poison(d.c, nc);
    if (prec == P_BF16_C16) {
        uint16_t *a = to_bf16_copy(d.a, (size_t)d.lda * d.ac), *b = to_bf16_copy(d.b, (size_t)d.ldb * d.bc);
        uint16_t *c = to_bf16_copy(d.c, nc), *aux = to_bf16_copy(d.aux, naux);
        e.aux = uses_aux(t) ? aux : NULL;
        cr_assert_eq(tsr_cpu_gemm_bf16_ep(t->ta, t->tb, t->m, t->n, t->k, t->alpha, a, d.lda, b,
                                          d.ldb, t->beta, c, 1, d.ldc, &e), 0);
        tsr_cpu_bf16_to_f32(nc, c, d.c);
        tsr_cpu_bf16_to_f32(naux, aux, d.aux);
        free(a), free(b), free(c), free(aux);
    } else if (prec == P_BF16) {
        uint16_t *a = to_bf16_copy(d.a, (size_t)d.lda * d.ac), *b = to_bf16_copy(d.b, (size_t)d.ldb * d.bc);
        cr_assert_eq(tsr_cpu_gemm_bf16_ep(t->ta, t->tb, t->m, t->n, t->k, t->alpha, a, d.lda, b,
                                          d.ldb, t->beta, d.c, 0, d.ldc, &e), 0);
        free(a), free(b);
    } else {
        cr_assert_eq(tsr_cpu_gemm_ep(t->ta, t->tb, t->m, t->n, t->k, t->alpha, d.a, d.lda, d.b,
                                     d.ldb, t->beta, d.c, d.ldc, &e), 0);
    }
    double atol, rtol;
    tolerances(prec == P_TF32 ? P_FP32 : prec, &atol, &rtol);
    ep_check("cpu", t, &d, d.c, uses_aux(t) ? d.aux : NULL, d.bgrad, atol, rtol);
    ep_free(&d);
}

Test(gemm_ep, cpu_counterpart_against_double_loops)
{
    for (size_t i = 0; i < NCASES; i++) {
        cpu_case(&CASES[i], P_FP32, 100 + i);
        cpu_case(&CASES[i], P_BF16, 200 + i);
        cpu_case(&CASES[i], P_BF16_C16, 300 + i);
    }
}

static void gpu_case(cublasHandle_t h, void *st, const ep_case *t, int prec, uint64_t salt)
{
    ep_data d;
    ep_make(t, prec, &d, salt);
    size_t na = (size_t)d.lda * d.ac, nb = (size_t)d.ldb * d.bc, nc = (size_t)d.ldc * t->n;
    size_t naux = (size_t)t->ld_aux * t->n;
    int c16 = prec == P_BF16_C16, ab16 = prec == P_BF16 || c16;
    size_t es = ab16 ? 2 : 4, cs = c16 ? 2 : 4;
    void *ha = ab16 ? (void *)to_bf16_copy(d.a, na) : (void *)d.a;
    void *hb = ab16 ? (void *)to_bf16_copy(d.b, nb) : (void *)d.b;
    void *hc = c16 ? (void *)to_bf16_copy(d.c, nc) : (void *)d.c;
    void *haux = c16 ? (void *)to_bf16_copy(d.aux, naux) : (void *)d.aux;
    void *da = kt_to_dev_bytes(ha, na * es), *db = kt_to_dev_bytes(hb, nb * es);
    void *dc = t->beta == 0.0f ? kt_dev_bytes(nc * cs) : kt_to_dev_bytes(hc, nc * cs);
    void *daux = kt_to_dev_bytes(haux, (naux ? naux : 1) * cs);
    float *dbias = kt_to_dev(d.bias, (size_t)t->m), *dg = kt_to_dev(d.bgrad, (size_t)d.glen);
    tsr_gemm_epilogue_t e = {t->kind, dbias, uses_aux(t) ? daux : NULL, t->ld_aux, dg, t->acc};
    if (ab16)
        KT_CUDA_OK(tsr_cuda_gemm_bf16_ep(st, h, t->ta, t->tb, t->m, t->n, t->k, t->alpha, da,
                                         d.lda, db, d.ldb, t->beta, dc, c16, d.ldc, &e));
    else
        KT_CUDA_OK(tsr_cuda_gemm_ep(st, h, prec == P_TF32 ? TSR_GEMM_TF32 : TSR_GEMM_FP32, t->ta,
                                    t->tb, t->m, t->n, t->k, t->alpha, da, d.lda, db, d.ldb,
                                    t->beta, dc, d.ldc, &e));
    KT_CUDA_OK(cudaDeviceSynchronize());
    float *c = kt_alloc(nc), *aux = kt_alloc(naux ? naux : 1), *g = kt_from_dev(dg, (size_t)d.glen);
    if (c16) {
        KT_CUDA_OK(cudaMemcpy(hc, dc, nc * 2, cudaMemcpyDeviceToHost));
        KT_CUDA_OK(cudaMemcpy(haux, daux, (naux ? naux : 1) * 2, cudaMemcpyDeviceToHost));
        tsr_cpu_bf16_to_f32(nc, hc, c);
        tsr_cpu_bf16_to_f32(naux, haux, aux);
    } else {
        KT_CUDA_OK(cudaMemcpy(c, dc, nc * 4, cudaMemcpyDeviceToHost));
        KT_CUDA_OK(cudaMemcpy(aux, daux, (naux ? naux : 1) * 4, cudaMemcpyDeviceToHost));
    }
    double atol, rtol;
    tolerances(prec, &atol, &rtol);
    static const char *names[] = {"cuda fp32", "cuda tf32", "cuda bf16", "cuda bf16 (bf16 C)"};
    ep_check(names[prec], t, &d, c, uses_aux(t) ? aux : NULL, g, atol, rtol);
    if (ab16)
        free(ha), free(hb);
    if (c16)
        free(hc), free(haux);
    cudaFree(da), cudaFree(db), cudaFree(dc), cudaFree(daux), cudaFree(dbias), cudaFree(dg);
    free(c), free(aux), free(g);
    ep_free(&d);
}

/* Every case of one precision; the calls that ran as one cublasLtMatmul and
 * through the fallback are printed (on a GPU: whether cuBLASLt fused them)
 * and returned. */
static void gpu_all_counts(int prec, uint64_t *fused, uint64_t *fallback)
{
    KT_REQUIRE_GPU();
    cublasHandle_t h;
    KT_CUDA_OK(cublasCreate(&h));
    void *st = kt_stream();
    uint64_t f0, b0;
    tsr_cuda_gemm_ep_counts(&f0, &b0);
    for (size_t i = 0; i < NCASES; i++)
        gpu_case(h, st, &CASES[i], prec, 1000 * (uint64_t)prec + i);
    tsr_cuda_gemm_ep_counts(fused, fallback);
    *fused -= f0, *fallback -= b0;
    fprintf(stderr, "gemm_ep precision %d: %llu of %zu cases as one cublasLtMatmul, %llu by the "
                    "fallback\n",
            prec, (unsigned long long)*fused, NCASES, (unsigned long long)*fallback);
    cudaStreamDestroy((cudaStream_t)st);
    cublasDestroy(h);
}

/* Under emulation cuBLASLt takes every case but those with a GELU
 * auxiliary ld that is not a multiple of 8 (2) and the empty ones (2). */
static void gpu_all(int prec)
{
    uint64_t fused, fallback;
    gpu_all_counts(prec, &fused, &fallback);
    if (kt_emulated()) {
        cr_expect_eq(fallback, 2);
        cr_expect_eq(fused, NCASES - 4);
    }
}

Test(cuda_gemm_ep, strict_fp32) { gpu_all(P_FP32); }
Test(cuda_gemm_ep, tf32) { gpu_all(P_TF32); }
Test(cuda_gemm_ep, bf16_fp32_output) { gpu_all(P_BF16); }
Test(cuda_gemm_ep, bf16_bf16_output) { gpu_all(P_BF16_C16); }

/* Without an algorithm from cuBLASLt's heuristic the same results come from
 * the cuBLAS product and the fallback kernels. */
Test(cuda_gemm_ep, fallback_when_the_heuristic_has_no_algorithm)
{
    KT_REQUIRE_GPU();
    KT_REQUIRE_EMU();
    setenv("TESSERA_CUDA_EMU_FAIL",
           "cublasLtMatmulAlgoGetHeuristic:1,cublasLtMatmulAlgoGetHeuristic:2,"
           "cublasLtMatmulAlgoGetHeuristic:3,cublasLtMatmulAlgoGetHeuristic:4,"
           "cublasLtMatmulAlgoGetHeuristic:5,cublasLtMatmulAlgoGetHeuristic:6,"
           "cublasLtMatmulAlgoGetHeuristic:7,cublasLtMatmulAlgoGetHeuristic:8,"
           "cublasLtMatmulAlgoGetHeuristic:9,cublasLtMatmulAlgoGetHeuristic:10,"
           "cublasLtMatmulAlgoGetHeuristic:11,cublasLtMatmulAlgoGetHeuristic:12,"
           "cublasLtMatmulAlgoGetHeuristic:13,cublasLtMatmulAlgoGetHeuristic:14,"
           "cublasLtMatmulAlgoGetHeuristic:15",
           1);
    uint64_t fused, fallback;
    gpu_all_counts(P_FP32, &fused, &fallback);
    cr_expect_eq(fused, 0);
    unsetenv("TESSERA_CUDA_EMU_FAIL");
}

/* A failing cublasLtMatmul is TSR_EDEVICE with the call named. */
Test(cuda_gemm_ep, a_failing_matmul_is_a_device_error)
{
    KT_REQUIRE_GPU();
    KT_REQUIRE_EMU();
    cublasHandle_t h;
    KT_CUDA_OK(cublasCreate(&h));
    void *st = kt_stream();
    float *a = kt_dev(64), *b = kt_dev(64), *c = kt_dev(64), *bias = kt_dev(8);
    tsr_gemm_epilogue_t e = {TSR_EPI_BIAS, bias, NULL, 0, NULL, 0};
    setenv("TESSERA_CUDA_EMU_FAIL", "cublasLtMatmul:1", 1);
    int rc = tsr_cuda_gemm_ep(st, h, TSR_GEMM_TF32, 0, 0, 8, 8, 8, 1.0f, a, 8, b, 8, 0.0f, c, 8, &e);
    unsetenv("TESSERA_CUDA_EMU_FAIL");
    cr_assert_eq(rc, TSR_EDEVICE);
    cr_assert(kt_msg_has("cublasLtMatmul"), "message: %s", tsr_cuda_last_error());
    e.kind = 99;
    cr_assert_eq(tsr_cuda_gemm_ep(st, h, TSR_GEMM_TF32, 0, 0, 8, 8, 8, 1.0f, a, 8, b, 8, 0.0f, c,
                                  8, &e),
                 TSR_EINVAL);
    cudaFree(a), cudaFree(b), cudaFree(c), cudaFree(bias);
    cudaStreamDestroy((cudaStream_t)st);
    cublasDestroy(h);
}
