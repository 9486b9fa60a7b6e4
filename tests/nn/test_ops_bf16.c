/* tests/nn/test_ops_bf16.c — the bf16 operations of nn/ops.h over tile
 * grids with edge tiles, against naive double loops: the bf16 GEMM (every
 * transposition, C fp32 or bf16, COMMUTE), conversions, and the producers
 * that compute in fp32 and store bf16 (LayerNorm forward and backward, GELU
 * forward and backward, the cross-entropy gradient, and the Llama layers'
 * RMSNorm forward and backward and SwiGLU forward and backward, also
 * against their fp32 ops on the same inputs).
 *
 * Tolerances: a bf16 value is its input rounded to nearest, within half an
 * ulp = 2^-8 of the value (8 significant bits); the references are computed
 * in double from the fp32 inputs (or, for GEMM, from the bf16-rounded
 * inputs, whose products are exact). Under the CUDA emulation the suite
 * runs on emulated GPUs too (tests/nn/meson.build). */
#include <criterion/criterion.h>
#include <math.h>

#include "nn/ops.h"
#include "tests/kernels/kt_util.h"
#include "tests/nn/ops_util.h"

static void rt_start(void)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 2;
    cfg.bind = 0;
    OK(tsr_init(&cfg));
}

/* element (i, j) of op(X) for X stored column-major (r rows) */
static double at(const float *x, int r, int trans, int i, int j)
{
    return trans ? x[j + (size_t)i * r] : x[i + (size_t)j * r];
}

static void gemm_case(int ta, int tb, int m, int n, int k, int tm, int tn, int tk, float beta,
                      int mode, int c_bf16)
{
    kt_rng r = kt_seed((uint64_t)(ta * 2 + tb) * 17 + (uint64_t)mode + 5u * c_bf16);
    int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    float *a = kt_rand(&r, (size_t)ar * ac, -1, 1), *b = kt_rand(&r, (size_t)br * bc, -1, 1);
    float *c = kt_rand(&r, (size_t)m * n, -1, 1);
    /* the reference multiplies the bf16 values the tensors hold */
    for (size_t i = 0; i < (size_t)ar * ac; i++)
        a[i] = (float)kt_bf16_value(kt_bf16_round(a[i]));
    for (size_t i = 0; i < (size_t)br * bc; i++)
        b[i] = (float)kt_bf16_value(kt_bf16_round(b[i]));
    if (c_bf16)
        for (size_t i = 0; i < (size_t)m * n; i++)
            c[i] = (float)kt_bf16_value(kt_bf16_round(c[i]));
    tsr_tensor_t A, Bm, Cm;
    bf16_tensor(&A, ar, ac, ta ? tk : tm, ta ? tm : tk, a);
    bf16_tensor(&Bm, br, bc, tb ? tn : tk, tb ? tk : tn, b);
    if (c_bf16)
        bf16_tensor(&Cm, m, n, tm, tn, c);
    else
        tensor_from(&Cm, m, n, tm, tn, c);
    float alpha = 0.75f;
    OK(tsr__op_gemm(ta, tb, alpha, &A, &Bm, beta, &Cm, mode));
    if (mode == TSR_COMMUTE)
        OK(tsr__op_gemm(ta, tb, alpha, &A, &Bm, beta, &Cm, mode));
    float *got = c_bf16 ? bf16_get(&Cm) : tensor_get(&Cm);
    double *want = kt_dalloc((size_t)m * n);
    int reps = mode == TSR_COMMUTE ? 2 : 1;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int p = 0; p < k; p++)
                s += at(a, ar, ta, i, p) * at(b, br, tb, p, j);
            double c0 = beta != 0.0f ? c[i + (size_t)j * m] : 0.0;
            want[i + (size_t)j * m] = reps * alpha * s + c0;
        }
    if (c_bf16) /* one k tile: the fp32 sum rounded once */
        assert_bf16_of("gemm_bf16 (C bf16)", got, want, (size_t)m * n, 1e-5, 1e-6);
    else
        kt_assert_close("gemm_bf16", got, want, (size_t)m * n, 1e-5, 1e-5);
    tsr__tensor_free(&A);
    tsr__tensor_free(&Bm);
    tsr__tensor_free(&Cm);
    free(a), free(b), free(c), free(got), free(want);
}

Test(nn_ops_bf16, gemm_tile_grids_with_edges)
{
    rt_start();
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            gemm_case(ta, tb, 23, 19, 37, 8, 7, 16, 0.0f, TSR_RW, 0);
            gemm_case(ta, tb, 23, 19, 37, 8, 7, 16, 1.0f, TSR_RW, 0);
            gemm_case(ta, tb, 23, 19, 37, 8, 7, 16, 1.0f, TSR_COMMUTE, 0);
            /* C bf16 from one k tile (several would round each partial sum) */
            gemm_case(ta, tb, 23, 19, 37, 8, 7, 37, 0.0f, TSR_RW, 1);
        }
    /* A bf16 with B fp32, or C bf16 with fp32 A and B: refused */
    tsr_tensor_t A16, B32, C16, A32;
    OK(tsr__tensor_init_bf16(&A16, 4, 4, 4, 4));
    OK(tsr__tensor_init(&B32, 4, 4, 4, 4));
    OK(tsr__tensor_init_bf16(&C16, 4, 4, 4, 4));
    OK(tsr__tensor_init(&A32, 4, 4, 4, 4));
    cr_assert_eq(tsr__op_gemm(OP_N, OP_N, 1.0f, &A16, &B32, 0.0f, &B32, TSR_RW), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "bf16"), "%s", tsr_error_message());
    cr_assert_eq(tsr__op_gemm(OP_N, OP_N, 1.0f, &A32, &B32, 0.0f, &C16, TSR_RW), TSR_EINVAL);
    tsr__tensor_free(&A16), tsr__tensor_free(&B32), tsr__tensor_free(&C16);
    tsr__tensor_free(&A32);
    tsr_shutdown();
}

Test(nn_ops_bf16, conversions_both_ways)
{
    rt_start();
    int rows = 13, cols = 11;
    kt_rng r = kt_seed(3);
    float *x = kt_rand(&r, (size_t)rows * cols, -100, 100);
    tsr_tensor_t X, H, Y;
    tensor_from(&X, rows, cols, 5, 4, x);
    bf16_tensor(&H, rows, cols, 5, 4, NULL);
    tensor_from(&Y, rows, cols, 5, 4, NULL);
    OK(tsr__op_convert(&X, &H));
    OK(tsr__op_convert(&H, &Y));
    uint16_t *h = malloc(sizeof(uint16_t) * rows * cols);
    OK(tsr__tensor_read(&H, h, (size_t)rows));
    float *y = tensor_get(&Y);
    for (int i = 0; i < rows * cols; i++) {
        cr_assert_eq(h[i], kt_bf16_round(x[i]), "bf16(%.9g) = 0x%04x", (double)x[i], h[i]);
        cr_assert_eq((double)y[i], kt_bf16_value(h[i]), "widened 0x%04x = %.9g", h[i], (double)y[i]);
    }
    cr_assert_eq(tsr__op_convert(&X, &Y), TSR_EINVAL, "fp32 to fp32 is no conversion");
    free(x), free(h), free(y);
    tsr__tensor_free(&X), tsr__tensor_free(&H), tsr__tensor_free(&Y);
    tsr_shutdown();
}

/* x (C, N) in token tiles of tt: LayerNorm forward into bf16 and the
 * backward with its bf16 copy of dx, against double loops. */
Test(nn_ops_bf16, layernorm_forward_and_backward)
{
    rt_start();
    enum { Cf = 24, Nt = 14, tt = 5 };
    kt_rng r = kt_seed(11);
    float *x = kt_rand(&r, Cf * Nt, -2, 2), *g = kt_rand(&r, Cf, 0.5f, 1.5f);
    float *bb = kt_rand(&r, Cf, -0.5f, 0.5f), *dout = kt_rand(&r, Cf * Nt, -1, 1);
    float *dx0 = kt_rand(&r, Cf * Nt, -1, 1);
    tsr_tensor_t X, G, Bt, O, Mu, Rs, D, DX, DX16, DG, DB;
    tsr_handle_t scratch;
    tensor_from(&X, Cf, Nt, Cf, tt, x);
    tensor_from(&G, Cf, 1, Cf, 1, g);
    tensor_from(&Bt, Cf, 1, Cf, 1, bb);
    bf16_tensor(&O, Cf, Nt, Cf, tt, NULL);
    tensor_from(&Mu, 1, Nt, 1, tt, NULL);
    tensor_from(&Rs, 1, Nt, 1, tt, NULL);
    tensor_from(&D, Cf, Nt, Cf, tt, dout);
    tensor_from(&DX, Cf, Nt, Cf, tt, dx0);
    bf16_tensor(&DX16, Cf, Nt, Cf, tt, NULL);
    tensor_from(&DG, Cf, 1, Cf, 1, NULL);
    tensor_from(&DB, Cf, 1, Cf, 1, NULL);
    /* a scratch smaller than a tile is refused */
    OK(tsr_handle_alloc(&scratch, (size_t)Cf * tt * 4 - 4));
    cr_assert_eq(tsr__op_layernorm_fwd_bf16(&X, &G, &Bt, &O, &Mu, &Rs, scratch, NULL), TSR_EINVAL);
    OK(tsr_handle_unregister(scratch));
    OK(tsr_handle_alloc(&scratch, (size_t)Cf * tt * 4));
    OK(tsr__op_layernorm_fwd_bf16(&X, &G, &Bt, &O, &Mu, &Rs, scratch, NULL));
    OK(tsr__op_layernorm_bwd_bf16(&D, &X, &G, &Mu, &Rs, &DX, &DX16, &DG, &DB, NULL));
    float *o = bf16_get(&O), *dx = tensor_get(&DX), *dx16 = bf16_get(&DX16);
    float *dg = tensor_get(&DG), *db = tensor_get(&DB);
    double *wo = kt_dalloc(Cf * Nt), *wdx = kt_dalloc(Cf * Nt), *wdg = kt_dalloc(Cf),
           *wdb = kt_dalloc(Cf), *dx_d = kt_dalloc(Cf * Nt);
    for (int t = 0; t < Nt; t++) {
        const float *xc = x + t * Cf, *dc = dout + t * Cf;
        double mu = 0, var = 0;
        for (int i = 0; i < Cf; i++)
            mu += xc[i];
        mu /= Cf;
        for (int i = 0; i < Cf; i++)
            var += (xc[i] - mu) * (xc[i] - mu);
        double rs = 1.0 / sqrt(var / Cf + 1e-5), mg = 0, mgx = 0;
        for (int i = 0; i < Cf; i++) {
            double xh = (xc[i] - mu) * rs;
            wo[i + t * Cf] = xh * g[i] + bb[i];
            wdg[i] += dc[i] * xh;
            wdb[i] += dc[i];
            mg += dc[i] * g[i];
            mgx += dc[i] * g[i] * xh;
        }
        mg /= Cf, mgx /= Cf;
        for (int i = 0; i < Cf; i++) {
            double xh = (xc[i] - mu) * rs;
            wdx[i + t * Cf] = dx0[i + t * Cf] + rs * (dc[i] * g[i] - mg - xh * mgx);
        }
    }
    assert_bf16_of("layernorm out", o, wo, Cf * Nt, 1e-5, 1e-5);
    kt_assert_close("layernorm dx", dx, wdx, Cf * Nt, 1e-4, 1e-4);
    kt_assert_close("layernorm dgamma", dg, wdg, Cf, 1e-4, 1e-4);
    kt_assert_close("layernorm dbeta", db, wdb, Cf, 1e-4, 1e-4);
    for (int i = 0; i < Cf * Nt; i++)
        dx_d[i] = dx[i];
    assert_bf16_of("layernorm dx16 = bf16(dx)", dx16, dx_d, Cf * Nt, 0, 0);
    free(x), free(g), free(bb), free(dout), free(dx0), free(o), free(dx), free(dx16);
    free(dg), free(db), free(wo), free(wdx), free(wdg), free(wdb), free(dx_d);
    tsr_tensor_t *all[] = {&X, &G, &Bt, &O, &Mu, &Rs, &D, &DX, &DX16, &DG, &DB};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tsr__tensor_free(all[i]);
    OK(tsr_handle_unregister(scratch));
    tsr_shutdown();
}

static double gelu_d(double x)
{
    return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

Test(nn_ops_bf16, gelu_forward_and_backward)
{
    rt_start();
    enum { R = 19, Nt = 9, tr = 8, tt = 4 };
    kt_rng r = kt_seed(13);
    float *x = kt_rand(&r, R * Nt, -4, 4), *d0 = kt_rand(&r, R * Nt, -1, 1);
    tsr_tensor_t X, O, D, D16;
    tsr_handle_t scratch;
    tensor_from(&X, R, Nt, tr, tt, x);
    bf16_tensor(&O, R, Nt, tr, tt, NULL);
    tensor_from(&D, R, Nt, tr, tt, d0);
    bf16_tensor(&D16, R, Nt, tr, tt, NULL);
    OK(tsr_handle_alloc(&scratch, (size_t)tr * tt * 4));
    OK(tsr__op_gelu_fwd_bf16(&X, &O, scratch));
    OK(tsr__op_gelu_bwd_bf16(&X, &D, &D16));
    float *o = bf16_get(&O), *d = tensor_get(&D), *d16 = bf16_get(&D16);
    double *wo = kt_dalloc(R * Nt), *wd = kt_dalloc(R * Nt), *dd = kt_dalloc(R * Nt);
    for (int i = 0; i < R * Nt; i++) {
        double h = 1e-4; /* the derivative by central differences: error ~ h^2 */
        wo[i] = gelu_d(x[i]);
        wd[i] = d0[i] * (gelu_d(x[i] + h) - gelu_d(x[i] - h)) / (2 * h);
        dd[i] = d[i];
    }
    assert_bf16_of("gelu out", o, wo, R * Nt, 1e-5, 1e-6);
    kt_assert_close("gelu d", d, wd, R * Nt, 1e-5, 1e-4);
    assert_bf16_of("gelu d16 = bf16(d)", d16, dd, R * Nt, 0, 0);
    free(x), free(d0), free(o), free(d), free(d16), free(wo), free(wd), free(dd);
    tsr__tensor_free(&X), tsr__tensor_free(&O), tsr__tensor_free(&D), tsr__tensor_free(&D16);
    OK(tsr_handle_unregister(scratch));
    tsr_shutdown();
}

Test(nn_ops_bf16, cross_entropy_gradient)
{
    rt_start();
    enum { Vv = 53, Nt = 12, tv = 16, tt = 5 };
    kt_rng r = kt_seed(17);
    float *logits = kt_rand(&r, Vv * Nt, -4, 4);
    int32_t tg[Nt];
    for (int t = 0; t < Nt; t++)
        tg[t] = t == 3 ? -1 : kt_randint(&r, 0, Vv);
    tsr_tensor_t L, Tg, ms, lse, loss, DL;
    tsr_handle_t scratch;
    tensor_from(&L, Vv, Nt, tv, tt, logits);
    tensor_from(&Tg, 1, Nt, 1, tt, tg);
    tensor_from(&ms, 2, Nt, 2, tt, NULL);
    tensor_from(&lse, 1, Nt, 1, tt, NULL);
    tensor_from(&loss, 1, Nt, 1, tt, NULL);
    bf16_tensor(&DL, Vv, Nt, tv, tt, NULL);
    OK(tsr_handle_alloc(&scratch, (size_t)tv * tt * 4));
    OK(tsr__op_xent_fwd(&L, &Tg, &ms, &lse, &loss));
    OK(tsr__op_xent_bwd_bf16(&L, &Tg, &lse, 0.5f, &DL, scratch));
    float *dl = bf16_get(&DL), *l_after = tensor_get(&L);
    double *want = kt_dalloc(Vv * Nt);
    for (int t = 0; t < Nt; t++) {
        double mx = -INFINITY, s = 0;
        for (int v = 0; v < Vv; v++)
            mx = fmax(mx, logits[v + t * Vv]);
        for (int v = 0; v < Vv; v++)
            s += exp(logits[v + t * Vv] - mx);
        for (int v = 0; v < Vv; v++)
            want[v + t * Vv] = tg[t] < 0 ? 0.0
                               : 0.5 * (exp(logits[v + t * Vv] - mx) / s - (v == tg[t]));
    }
    assert_bf16_of("dlogits", dl, want, Vv * Nt, 1e-5, 1e-7);
    cr_assert(memcmp(l_after, logits, sizeof(float) * Vv * Nt) == 0, "the logits are read only");
    free(logits), free(dl), free(l_after), free(want);
    tsr_tensor_t *all[] = {&L, &Tg, &ms, &lse, &loss, &DL};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tsr__tensor_free(all[i]);
    OK(tsr_handle_unregister(scratch));
    tsr_shutdown();
}

/* ---- the Llama layers into bf16 ------------------------------------------- */

/* a bf16 tensor's bit patterns */
static uint16_t *bf16_bits(const tsr_tensor_t *t)
{
    uint16_t *h = malloc(tsr__tensor_numel(t) * sizeof *h);
    OK(tsr__tensor_read(t, h, (size_t)t->rows));
    return h;
}

/* Whether every worker runs the same kind of device. Then a bf16 op and its
 * fp32 twin run the same fp32 kernel on the same inputs and their fp32
 * parts agree bitwise; the emulated-GPU runs beside CPU workers (nn_ops_cuda2)
 * mix CPU and GPU kernels, which may round the last bits differently. */
static int one_device_kind(void)
{
    int n = tsr_worker_count(), kind = -1;
    for (int i = 0; i < n; i++) {
        tsr_worker_stats_t s;
        OK(tsr_worker_stats(i, &s));
        if (kind >= 0 && s.device_kind != kind)
            return 0;
        kind = s.device_kind;
    }
    return 1;
}

/* got (bf16 bits) is the rounding of the fp32 op's ref: bitwise on one kind
 * of device, else within a bf16 half ulp of a value 1e-6 (~8 fp32 ulps) from
 * it */
static void assert_bf16_is(const char *what, const uint16_t *got, const float *ref, size_t n,
                           int exact)
{
    for (size_t i = 0; i < n; i++) {
        double g = kt_bf16_value(got[i]);
        if (exact)
            cr_assert_eq(got[i], kt_bf16_round(ref[i]), "%s[%zu]: 0x%04x, want bf16(%.9g)",
                         what, i, got[i], (double)ref[i]);
        else
            cr_assert(fabs(g - ref[i]) <= (ldexp(1.0, -8) + 1e-6) * fabs(ref[i]) + 1e-7,
                      "%s[%zu]: %.9g, the fp32 op's %.9g", what, i, g, (double)ref[i]);
    }
}

/* fp32 parts: bitwise on one kind of device, else within 1e-6 */
static void assert_f32_is(const char *what, const float *got, const float *ref, size_t n,
                          int exact)
{
    if (exact) {
        cr_assert(memcmp(got, ref, n * sizeof *got) == 0, "%s differs from the fp32 op's",
                  what);
        return;
    }
    double *d = kt_dalloc(n);
    for (size_t i = 0; i < n; i++)
        d[i] = ref[i];
    kt_assert_close(what, got, d, n, 1e-6, 1e-6);
    free(d);
}

/* RMSNorm (C, N) in column tiles of tt into bf16, forward and backward
 * (dx and dw start from random values: they accumulate), against double
 * loops (the fp32 kernel's error: a few ulps times sums of C terms, below
 * the 1e-5 and 2e-5 of test_llama_ops.c; then one bf16 rounding), and
 * against tsr__op_rmsnorm_fwd/bwd on the same inputs. */
static void rmsnorm_bf16_case(int C, int N, int tt)
{
    const float eps = 1e-5f;
    kt_rng r = kt_seed((uint64_t)(C * 1000 + N) + 7);
    size_t n = (size_t)C * N;
    float *x = kt_rand(&r, n, -2, 2), *w = kt_rand(&r, (size_t)C, 0.5f, 1.5f);
    float *dout = kt_rand(&r, n, -1, 1), *dx0 = kt_rand(&r, n, -1, 1);
    float *dw0 = kt_rand(&r, (size_t)C, -1, 1);
    tsr_tensor_t X, W, O16, RS, DOUT, DX, DX16, DW, O32, RS32, DX32, DW32;
    tsr_handle_t scratch;
    tensor_from(&X, C, N, C, tt, x);
    tensor_from(&W, C, 1, C, 1, w);
    bf16_tensor(&O16, C, N, C, tt, NULL);
    tensor_from(&RS, 1, N, 1, tt, NULL);
    tensor_from(&DOUT, C, N, C, tt, dout);
    tensor_from(&DX, C, N, C, tt, dx0);
    bf16_tensor(&DX16, C, N, C, tt, NULL);
    tensor_from(&DW, C, 1, C, 1, dw0);
    tensor_from(&O32, C, N, C, tt, NULL);
    tensor_from(&RS32, 1, N, 1, tt, NULL);
    tensor_from(&DX32, C, N, C, tt, dx0);
    tensor_from(&DW32, C, 1, C, 1, dw0);
    cr_assert_gt(X.grid_cols, 2);
    /* a scratch smaller than a tile, an fp32 output: refused */
    OK(tsr_handle_alloc(&scratch, (size_t)C * tt * 4 - 4));
    cr_assert_eq(tsr__op_rmsnorm_fwd_bf16(&X, &W, eps, &O16, &RS, scratch), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "scratch"), "%s", tsr_error_message());
    OK(tsr_handle_unregister(scratch));
    OK(tsr_handle_alloc(&scratch, (size_t)C * tt * 4));
    cr_assert_eq(tsr__op_rmsnorm_fwd_bf16(&X, &W, eps, &O32, &RS, scratch), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "bf16 output"), "%s", tsr_error_message());
    cr_assert_eq(tsr__op_rmsnorm_bwd_bf16(&DOUT, &X, &W, &RS, &DX, &DX32, &DW), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "bf16 output"), "%s", tsr_error_message());
    OK(tsr__op_rmsnorm_fwd_bf16(&X, &W, eps, &O16, &RS, scratch));
    OK(tsr__op_rmsnorm_bwd_bf16(&DOUT, &X, &W, &RS, &DX, &DX16, &DW));
    OK(tsr__op_rmsnorm_fwd(&X, &W, eps, &O32, &RS32));
    OK(tsr__op_rmsnorm_bwd(&DOUT, &X, &W, &RS32, &DX32, &DW32));
    float *o = bf16_get(&O16), *rs = tensor_get(&RS), *dx = tensor_get(&DX), *dw = tensor_get(&DW);
    float *o32 = tensor_get(&O32), *rs32 = tensor_get(&RS32), *dx32 = tensor_get(&DX32);
    float *dw32 = tensor_get(&DW32);
    uint16_t *o16 = bf16_bits(&O16), *dx16 = bf16_bits(&DX16);
    double *wo = kt_dalloc(n), *wrs = kt_dalloc((size_t)N), *wdx = kt_dalloc(n);
    double *wdw = kt_dalloc((size_t)C);
    for (int i = 0; i < C; i++)
        wdw[i] = dw0[i];
    for (int t = 0; t < N; t++) {
        const float *xt = x + (size_t)t * C, *dt = dout + (size_t)t * C;
        double ss = 0;
        for (int i = 0; i < C; i++)
            ss += (double)xt[i] * xt[i];
        double rstd = 1.0 / sqrt(ss / C + eps), dot = 0; /* sum_i dout_i w_i x_i */
        wrs[t] = rstd;
        for (int i = 0; i < C; i++) {
            wo[i + (size_t)t * C] = xt[i] * rstd * w[i];
            dot += (double)dt[i] * w[i] * xt[i];
        }
        for (int k = 0; k < C; k++) {
            wdx[k + (size_t)t * C] = dx0[k + (size_t)t * C] + dt[k] * (double)w[k] * rstd -
                                     xt[k] * dot * rstd * rstd * rstd / C;
            wdw[k] += (double)dt[k] * xt[k] * rstd;
        }
    }
    assert_bf16_of("rmsnorm_bf16 out", o, wo, n, 1e-5, 1e-6);
    kt_assert_close("rmsnorm_bf16 rstd", rs, wrs, (size_t)N, 0, 1e-5);
    kt_assert_close("rmsnorm_bf16 dx", dx, wdx, n, 2e-5, 2e-5);
    kt_assert_close("rmsnorm_bf16 dw", dw, wdw, (size_t)C, 2e-5, 2e-5);
    /* dx16 is dx rounded in the same task: bitwise, on any device */
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(dx16[i], kt_bf16_round(dx[i]), "dx16[%zu] = 0x%04x, dx %.9g", i, dx16[i],
                     (double)dx[i]);
    int exact = one_device_kind();
    assert_bf16_is("rmsnorm_bf16 out vs rmsnorm_fwd", o16, o32, n, exact);
    assert_f32_is("rmsnorm_bf16 rstd vs rmsnorm_fwd", rs, rs32, (size_t)N, exact);
    assert_f32_is("rmsnorm_bf16 dx vs rmsnorm_bwd", dx, dx32, n, exact);
    /* dw: COMMUTE over the column tiles, summed in any order */
    assert_f32_is("rmsnorm_bf16 dw vs rmsnorm_bwd", dw, dw32, (size_t)C, 0);
    tsr_tensor_t *all[] = {&X, &W, &O16, &RS, &DOUT, &DX, &DX16, &DW, &O32, &RS32, &DX32, &DW32};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tsr__tensor_free(all[i]);
    OK(tsr_handle_unregister(scratch));
    float *fl[] = {x, w, dout, dx0, dw0, o, rs, dx, dw, o32, rs32, dx32, dw32};
    for (size_t i = 0; i < sizeof fl / sizeof *fl; i++)
        free(fl[i]);
    free(o16), free(dx16), free(wo), free(wrs), free(wdx), free(wdw);
}

Test(nn_ops_bf16, rmsnorm_forward_and_backward)
{
    rt_start();
    rmsnorm_bf16_case(37, 53, 16); /* 4 column tiles, the last of 5 */
    rmsnorm_bf16_case(9, 7, 3);
    tsr_shutdown();
}

static double sigmoid_ref(double g)
{
    return 1.0 / (1.0 + exp(-g));
}

/* SwiGLU (F, N) in a 3 x 4 grid with edge tiles both ways into bf16,
 * against double loops (elementwise: the fp32 kernel is within a few ulps,
 * below 1e-5 relative, plus 1e-6 where silu' cancels, as in
 * test_llama_ops.c; then one bf16 rounding), and against
 * tsr__op_swiglu_fwd/bwd on the same inputs. */
Test(nn_ops_bf16, swiglu_forward_and_backward)
{
    rt_start();
    const int F = 45, N = 29, tf = 16, tt = 8;
    size_t n = (size_t)F * N;
    kt_rng r = kt_seed(79);
    float *g = kt_rand(&r, n, -6, 6), *u = kt_rand(&r, n, -2, 2), *dh = kt_rand(&r, n, -1, 1);
    g[3] = -90.0f; /* exp(-g) overflows: sigmoid exactly 0, no NaN */
    g[n - 2] = 90.0f;
    tsr_tensor_t G, U, DH, H16, DG16, DU16, H, DG, DU;
    tsr_handle_t scratch;
    tensor_from(&G, F, N, tf, tt, g);
    tensor_from(&U, F, N, tf, tt, u);
    tensor_from(&DH, F, N, tf, tt, dh);
    bf16_tensor(&H16, F, N, tf, tt, NULL);
    bf16_tensor(&DG16, F, N, tf, tt, NULL);
    bf16_tensor(&DU16, F, N, tf, tt, NULL);
    tensor_from(&H, F, N, tf, tt, NULL);
    tensor_from(&DG, F, N, tf, tt, NULL);
    tensor_from(&DU, F, N, tf, tt, NULL);
    cr_assert(G.grid_rows == 3 && G.grid_cols == 4);
    /* one fp32 tile of scratch: enough forward, not backward (two) */
    OK(tsr_handle_alloc(&scratch, (size_t)tf * tt * 4));
    OK(tsr__op_swiglu_fwd_bf16(&G, &U, &H16, scratch));
    cr_assert_eq(tsr__op_swiglu_bwd_bf16(&G, &U, &DH, &DG16, &DU16, scratch), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "scratch"), "%s", tsr_error_message());
    OK(tsr_handle_unregister(scratch));
    OK(tsr_handle_alloc(&scratch, (size_t)tf * tt * 4 * 2));
    /* fp32 outputs, a bf16 input, another tiling: refused */
    cr_assert_eq(tsr__op_swiglu_fwd_bf16(&G, &U, &H, scratch), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "bf16 output"), "%s", tsr_error_message());
    cr_assert_eq(tsr__op_swiglu_bwd_bf16(&G, &U, &DH, &DG16, &DU, scratch), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "bf16 output"), "%s", tsr_error_message());
    cr_assert_eq(tsr__op_swiglu_bwd_bf16(&G, &U, &H16, &DG16, &DU16, scratch), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "fp32"), "%s", tsr_error_message());
    tsr_tensor_t Bad;
    bf16_tensor(&Bad, F, N, tf, tt + 1, NULL);
    cr_assert_eq(tsr__op_swiglu_fwd_bf16(&G, &U, &Bad, scratch), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "differ"), "%s", tsr_error_message());
    tsr__tensor_free(&Bad);
    OK(tsr__op_swiglu_bwd_bf16(&G, &U, &DH, &DG16, &DU16, scratch));
    OK(tsr__op_swiglu_fwd(&G, &U, &H));
    OK(tsr__op_swiglu_bwd(&G, &U, &DH, &DG, &DU));
    float *h16 = bf16_get(&H16), *dg16 = bf16_get(&DG16), *du16 = bf16_get(&DU16);
    float *h = tensor_get(&H), *dg = tensor_get(&DG), *du = tensor_get(&DU);
    uint16_t *bh = bf16_bits(&H16), *bdg = bf16_bits(&DG16), *bdu = bf16_bits(&DU16);
    double *wh = kt_dalloc(n), *wdg = kt_dalloc(n), *wdu = kt_dalloc(n);
    for (size_t i = 0; i < n; i++) {
        double s = sigmoid_ref(g[i]), silu = g[i] * s;
        wh[i] = silu * u[i];
        wdu[i] = (double)dh[i] * silu;
        wdg[i] = (double)dh[i] * u[i] * (s + g[i] * s * (1.0 - s)); /* silu' = s + g s (1 - s) */
    }
    assert_bf16_of("swiglu_bf16 h", h16, wh, n, 1e-5, 1e-6);
    assert_bf16_of("swiglu_bf16 dgate", dg16, wdg, n, 1e-5, 1e-6);
    assert_bf16_of("swiglu_bf16 dup", du16, wdu, n, 1e-5, 1e-6);
    int exact = one_device_kind();
    assert_bf16_is("swiglu_bf16 h vs swiglu_fwd", bh, h, n, exact);
    assert_bf16_is("swiglu_bf16 dgate vs swiglu_bwd", bdg, dg, n, exact);
    assert_bf16_is("swiglu_bf16 dup vs swiglu_bwd", bdu, du, n, exact);
    tsr_tensor_t *all[] = {&G, &U, &DH, &H16, &DG16, &DU16, &H, &DG, &DU};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tsr__tensor_free(all[i]);
    OK(tsr_handle_unregister(scratch));
    float *fl[] = {g, u, dh, h16, dg16, du16, h, dg, du};
    for (size_t i = 0; i < sizeof fl / sizeof *fl; i++)
        free(fl[i]);
    free(bh), free(bdg), free(bdu), free(wh), free(wdg), free(wdu);
    tsr_shutdown();
}
