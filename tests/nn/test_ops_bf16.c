/* tests/nn/test_ops_bf16.c — the bf16 operations of nn/ops.h over tile
 * grids with edge tiles, against naive double loops: the bf16 GEMM (every
 * transposition, C fp32 or bf16, COMMUTE), conversions, and the producers
 * that compute in fp32 and store bf16 (LayerNorm forward and backward, GELU
 * forward and backward, the cross-entropy gradient).
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

#define OK(call) cr_assert_eq((call), TSR_OK, "%s: %s", #call, tsr_error_message())

static void rt_start(void)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 2;
    cfg.bind = 0;
    OK(tsr_init(&cfg));
}

static void f32_tensor(tsr_tensor_t *t, int rows, int cols, int tr, int tc, const void *src)
{
    OK(tsr__tensor_init(t, rows, cols, tr, tc));
    if (src)
        OK(tsr__tensor_write(t, src, (size_t)rows));
}

/* a bf16 tensor holding kt_bf16_round(src) (src NULL: zeros) */
static void bf16_tensor(tsr_tensor_t *t, int rows, int cols, int tr, int tc, const float *src)
{
    OK(tsr__tensor_init_bf16(t, rows, cols, tr, tc));
    cr_assert_eq(t->elem_bytes, 2);
    if (!src)
        return;
    size_t n = (size_t)rows * cols;
    uint16_t *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = kt_bf16_round(src[i]);
    OK(tsr__tensor_write(t, h, (size_t)rows));
    free(h);
}

static float *f32_get(const tsr_tensor_t *t)
{
    float *x = kt_alloc(tsr__tensor_numel(t));
    OK(tsr__tensor_read(t, x, (size_t)t->rows));
    return x;
}

/* a bf16 tensor's values, widened */
static float *bf16_get(const tsr_tensor_t *t)
{
    size_t n = tsr__tensor_numel(t);
    uint16_t *h = malloc(n * sizeof *h);
    OK(tsr__tensor_read(t, h, (size_t)t->rows));
    float *x = kt_alloc(n);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)kt_bf16_value(h[i]);
    free(h);
    return x;
}

/* every got[i] is want[i] rounded to bf16 by a correct rounding of a value
 * within rtol of it: |got - want| <= (2^-8 + rtol) |want| + atol */
static void assert_bf16_of(const char *what, const float *got, const double *want, size_t n,
                           double rtol, double atol)
{
    for (size_t i = 0; i < n; i++) {
        double bound = (ldexp(1.0, -8) + rtol) * fabs(want[i]) + atol;
        cr_assert(fabs(got[i] - want[i]) <= bound, "%s[%zu]: %.9g, want %.9g (bound %.3g)",
                  what, i, (double)got[i], want[i], bound);
    }
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
        f32_tensor(&Cm, m, n, tm, tn, c);
    float alpha = 0.75f;
    OK(tsr__op_gemm(ta, tb, alpha, &A, &Bm, beta, &Cm, mode));
    if (mode == TSR_COMMUTE)
        OK(tsr__op_gemm(ta, tb, alpha, &A, &Bm, beta, &Cm, mode));
    float *got = c_bf16 ? bf16_get(&Cm) : f32_get(&Cm);
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
    f32_tensor(&X, rows, cols, 5, 4, x);
    bf16_tensor(&H, rows, cols, 5, 4, NULL);
    f32_tensor(&Y, rows, cols, 5, 4, NULL);
    OK(tsr__op_convert(&X, &H));
    OK(tsr__op_convert(&H, &Y));
    uint16_t *h = malloc(sizeof(uint16_t) * rows * cols);
    OK(tsr__tensor_read(&H, h, (size_t)rows));
    float *y = f32_get(&Y);
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
    f32_tensor(&X, Cf, Nt, Cf, tt, x);
    f32_tensor(&G, Cf, 1, Cf, 1, g);
    f32_tensor(&Bt, Cf, 1, Cf, 1, bb);
    bf16_tensor(&O, Cf, Nt, Cf, tt, NULL);
    f32_tensor(&Mu, 1, Nt, 1, tt, NULL);
    f32_tensor(&Rs, 1, Nt, 1, tt, NULL);
    f32_tensor(&D, Cf, Nt, Cf, tt, dout);
    f32_tensor(&DX, Cf, Nt, Cf, tt, dx0);
    bf16_tensor(&DX16, Cf, Nt, Cf, tt, NULL);
    f32_tensor(&DG, Cf, 1, Cf, 1, NULL);
    f32_tensor(&DB, Cf, 1, Cf, 1, NULL);
    /* a scratch smaller than a tile is refused */
    OK(tsr_handle_alloc(&scratch, (size_t)Cf * tt * 4 - 4));
    cr_assert_eq(tsr__op_layernorm_fwd_bf16(&X, &G, &Bt, &O, &Mu, &Rs, scratch), TSR_EINVAL);
    OK(tsr_handle_unregister(scratch));
    OK(tsr_handle_alloc(&scratch, (size_t)Cf * tt * 4));
    OK(tsr__op_layernorm_fwd_bf16(&X, &G, &Bt, &O, &Mu, &Rs, scratch));
    OK(tsr__op_layernorm_bwd_bf16(&D, &X, &G, &Mu, &Rs, &DX, &DX16, &DG, &DB));
    float *o = bf16_get(&O), *dx = f32_get(&DX), *dx16 = bf16_get(&DX16);
    float *dg = f32_get(&DG), *db = f32_get(&DB);
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
    f32_tensor(&X, R, Nt, tr, tt, x);
    bf16_tensor(&O, R, Nt, tr, tt, NULL);
    f32_tensor(&D, R, Nt, tr, tt, d0);
    bf16_tensor(&D16, R, Nt, tr, tt, NULL);
    OK(tsr_handle_alloc(&scratch, (size_t)tr * tt * 4));
    OK(tsr__op_gelu_fwd_bf16(&X, &O, scratch));
    OK(tsr__op_gelu_bwd_bf16(&X, &D, &D16));
    float *o = bf16_get(&O), *d = f32_get(&D), *d16 = bf16_get(&D16);
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
    f32_tensor(&L, Vv, Nt, tv, tt, logits);
    f32_tensor(&Tg, 1, Nt, 1, tt, tg);
    f32_tensor(&ms, 2, Nt, 2, tt, NULL);
    f32_tensor(&lse, 1, Nt, 1, tt, NULL);
    f32_tensor(&loss, 1, Nt, 1, tt, NULL);
    bf16_tensor(&DL, Vv, Nt, tv, tt, NULL);
    OK(tsr_handle_alloc(&scratch, (size_t)tv * tt * 4));
    OK(tsr__op_xent_fwd(&L, &Tg, &ms, &lse, &loss));
    OK(tsr__op_xent_bwd_bf16(&L, &Tg, &lse, 0.5f, &DL, scratch));
    float *dl = bf16_get(&DL), *l_after = f32_get(&L);
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

