/* tests/nn/test_ops.c — tensor operations over tile grids (with edge tiles)
 * against naive double-precision loops over the whole dense tensors: GEMM in
 * every transposition and accumulation mode, Linear layers, causal attention
 * forward and backward, cross-entropy, embeddings (also over row tiles of
 * the channels). */
#include <criterion/criterion.h>
#include <limits.h>
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
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "%s", tsr_error_message());
}

static void rt_stop(void)
{
    tsr_shutdown();
}

/* element (i, j) of op(X) for X stored column-major (r rows) */
static double at(const float *x, int r, int trans, int i, int j)
{
    return trans ? x[j + (size_t)i * r] : x[i + (size_t)j * r];
}

static void gemm_case(int ta, int tb, int m, int n, int k, int tm, int tn, int tk, float beta,
                      int mode)
{
    kt_rng r = kt_seed((uint64_t)(ta * 2 + tb) * 131 + (uint64_t)mode);
    int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    float *a = kt_rand(&r, (size_t)ar * ac, -1, 1), *b = kt_rand(&r, (size_t)br * bc, -1, 1);
    float *c = kt_rand(&r, (size_t)m * n, -1, 1);
    tsr_tensor_t A, B, Cm;
    tensor_from(&A, ar, ac, ta ? tk : tm, ta ? tm : tk, a);
    tensor_from(&B, br, bc, tb ? tn : tk, tb ? tk : tn, b);
    tensor_from(&Cm, m, n, tm, tn, c);
    float alpha = 0.75f;
    OK(tsr__op_gemm(ta, tb, alpha, &A, &B, beta, &Cm, mode));
    /* a COMMUTE accumulation applied twice must add both products */
    if (mode == TSR_COMMUTE)
        OK(tsr__op_gemm(ta, tb, alpha, &A, &B, beta, &Cm, mode));
    float *got = tensor_get(&Cm);
    double *want = kt_dalloc((size_t)m * n);
    int reps = mode == TSR_COMMUTE ? 2 : 1;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int p = 0; p < k; p++)
                s += at(a, ar, ta, i, p) * at(b, br, tb, p, j);
            want[i + (size_t)j * m] = reps * alpha * s + (beta != 0.0f ? c[i + (size_t)j * m] : 0.0);
        }
    kt_assert_close("gemm", got, want, (size_t)m * n, 1e-5, 1e-5);
    tsr__tensor_free(&A);
    tsr__tensor_free(&B);
    tsr__tensor_free(&Cm);
    free(a);
    free(b);
    free(c);
    free(got);
    free(want);
}

Test(nn_ops, gemm_tile_grids_with_edges)
{
    rt_start();
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            gemm_case(ta, tb, 37, 29, 41, 16, 8, 12, 0.0f, TSR_RW);
            gemm_case(ta, tb, 37, 29, 41, 16, 8, 12, 1.0f, TSR_RW);
            gemm_case(ta, tb, 20, 9, 33, 7, 4, 10, 1.0f, TSR_COMMUTE);
        }
    rt_stop();
}

Test(nn_ops, gemm_rejects_mismatched_tilings)
{
    rt_start();
    tsr_tensor_t A, B, Cm;
    tensor_from(&A, 8, 8, 4, 4, NULL);
    tensor_from(&B, 8, 8, 2, 4, NULL); /* inner dimension tiled 2 against 4 */
    tensor_from(&Cm, 8, 8, 4, 4, NULL);
    cr_assert_eq(tsr__op_gemm(0, 0, 1, &A, &B, 0, &Cm, TSR_RW), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "inner dimension"), "%s", tsr_error_message());
    cr_assert_eq(tsr__op_gemm(0, 0, 1, &A, &A, 0.5f, &Cm, TSR_COMMUTE), TSR_EINVAL);
    tsr__tensor_free(&A);
    tsr__tensor_free(&B);
    tsr__tensor_free(&Cm);
    rt_stop();
}

Test(nn_ops, tensor_grids_up_to_int_max)
{
    rt_start();
    tsr_tensor_t t;
    /* ceil(INT_MAX / (INT_MAX - 1)) = 2 tile rows, the last of one row; the
     * handles hold no memory until used */
    OK(tsr__tensor_init(&t, INT_MAX, 3, INT_MAX - 1, 2));
    cr_assert_eq(t.grid_rows, 2);
    cr_assert_eq(t.grid_cols, 2);
    cr_assert_eq(tsr__tile_m(&t, 0), INT_MAX - 1);
    cr_assert_eq(tsr__tile_m(&t, 1), 1);
    cr_assert_eq(tsr__tile_n(&t, 1), 1);
    cr_assert_eq(tsr__tensor_numel(&t), (size_t)INT_MAX * 3);
    tsr__tensor_free(&t);
    /* 2^62 tiles of one element: refused before anything is allocated */
    cr_assert_eq(tsr__tensor_init(&t, INT_MAX, INT_MAX, 1, 1), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "tiles"), "%s", tsr_error_message());
    cr_assert_null(t.tiles);
    cr_assert_eq(tsr__tensor_init(&t, INT_MAX, 1, -1, 1), TSR_EINVAL);
    rt_stop();
}

/* A Linear layer (out, in) over N token columns, tiled (to, ti) x (ti, tt)
 * with edge tiles: forward in both forms, backward twice (dw, db accumulate
 * COMMUTE), against double loops. */
/* redux: dw and db accumulate in TSR_REDUX (tsr__op_set_redux), each
 * worker into its own accumulator of a tile, summed when read. */
static void linear_case_of(int out, int in, int N, int to, int ti, int tt, int redux)
{
    kt_rng r = kt_seed((uint64_t)(out * 1000 + in));
    float *w = kt_rand(&r, (size_t)out * in, -1, 1), *b = kt_rand(&r, (size_t)out, -1, 1);
    float *x = kt_rand(&r, (size_t)in * N, -1, 1), *y0 = kt_rand(&r, (size_t)out * N, -1, 1);
    float *dy = kt_rand(&r, (size_t)out * N, -1, 1);
    float *dw0 = kt_rand(&r, (size_t)out * in, -1, 1), *db0 = kt_rand(&r, (size_t)out, -1, 1);
    tsr_tensor_t W, Bt, X, Y, Yres, DY, DX, DW, DB;
    tensor_from(&W, out, in, to, ti, w);
    tensor_from(&Bt, out, 1, to, 1, b);
    tensor_from(&X, in, N, ti, tt, x);
    tensor_from(&Y, out, N, to, tt, y0); /* overwritten */
    tensor_from(&Yres, out, N, to, tt, y0);
    tensor_from(&DY, out, N, to, tt, dy);
    tensor_from(&DX, in, N, ti, tt, y0); /* overwritten: garbage in */
    tensor_from(&DW, out, in, to, ti, dw0);
    tensor_from(&DB, out, 1, to, 1, db0);
    if (redux) {
        OK(tsr__op_set_redux(&DW));
        OK(tsr__op_set_redux(&DB));
    }
    OK(tsr__op_linear_fwd(&W, &Bt, &X, 0.0f, &Y));
    OK(tsr__op_linear_fwd(&W, &Bt, &X, 1.0f, &Yres));
    OK(tsr__op_linear_bwd(&W, &X, &DY, &DX, &DW, &DB));
    OK(tsr__op_linear_bwd(&W, &X, &DY, &DX, &DW, &DB));
    float *gy = tensor_get(&Y), *gres = tensor_get(&Yres), *gdx = tensor_get(&DX);
    float *gdw = tensor_get(&DW), *gdb = tensor_get(&DB);
    double *y = kt_dalloc((size_t)out * N), *res = kt_dalloc((size_t)out * N);
    double *dx = kt_dalloc((size_t)in * N), *dw = kt_dalloc((size_t)out * in);
    double *db = kt_dalloc((size_t)out);
    for (int t = 0; t < N; t++)
        for (int o = 0; o < out; o++) {
            double s = b[o];
            for (int i = 0; i < in; i++)
                s += (double)w[o + (size_t)i * out] * x[i + (size_t)t * in];
            y[o + (size_t)t * out] = s;
            res[o + (size_t)t * out] = s + y0[o + (size_t)t * out];
        }
    for (int t = 0; t < N; t++)
        for (int i = 0; i < in; i++) {
            double s = 0;
            for (int o = 0; o < out; o++)
                s += (double)w[o + (size_t)i * out] * dy[o + (size_t)t * out];
            dx[i + (size_t)t * in] = s;
        }
    for (int i = 0; i < in; i++)
        for (int o = 0; o < out; o++) {
            double s = 0;
            for (int t = 0; t < N; t++)
                s += (double)dy[o + (size_t)t * out] * x[i + (size_t)t * in];
            dw[o + (size_t)i * out] = dw0[o + (size_t)i * out] + 2 * s; /* two backwards */
        }
    for (int o = 0; o < out; o++) {
        double s = 0;
        for (int t = 0; t < N; t++)
            s += dy[o + (size_t)t * out];
        db[o] = db0[o] + 2 * s;
    }
    kt_assert_close("linear y", gy, y, (size_t)out * N, 1e-5, 1e-5);
    kt_assert_close("linear y += ", gres, res, (size_t)out * N, 1e-5, 1e-5);
    kt_assert_close("linear dx", gdx, dx, (size_t)in * N, 1e-5, 1e-5);
    kt_assert_close("linear dw", gdw, dw, (size_t)out * in, 1e-5, 1e-5);
    kt_assert_close("linear db", gdb, db, (size_t)out, 1e-5, 1e-5);
    tsr_tensor_t *all[] = {&W, &Bt, &X, &Y, &Yres, &DY, &DX, &DW, &DB};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tsr__tensor_free(all[i]);
    float *fl[] = {w, b, x, y0, dy, dw0, db0, gy, gres, gdx, gdw, gdb};
    for (size_t i = 0; i < sizeof fl / sizeof *fl; i++)
        free(fl[i]);
    double *dl[] = {y, res, dx, dw, db};
    for (size_t i = 0; i < sizeof dl / sizeof *dl; i++)
        free(dl[i]);
}

static void linear_case(int out, int in, int N, int to, int ti, int tt)
{
    linear_case_of(out, in, N, to, ti, tt, 0);
}

static double gelu_ref(double x)
{
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

static double gelu_grad_ref(double x)
{
    double t = tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) +
           0.5 * x * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
}

/* An MLP's two Linears: pre = W1 x + b1, h = gelu(pre) (linear_gelu_fwd),
 * then the second one's backward through the GELU (linear_gelu_bwd): dh =
 * gelu'(pre) W2^T dy, db1 += rows of dh, dw2 += dy h^T, db2 += rows of dy;
 * tiled (th, ti), (to, th) over tt tokens, against double loops. One tile
 * along in and out: one fused task per output tile; several: the GELU (and
 * its gradient) on the last product of each output tile. */
static void mlp_case(int in, int hid, int out, int N, int ti, int th, int to, int tt)
{
    kt_rng r = kt_seed((uint64_t)(in * 7 + hid * 131 + out));
    size_t nh = (size_t)hid * N;
    float *w1 = kt_rand(&r, (size_t)hid * in, -1, 1), *b1 = kt_rand(&r, (size_t)hid, -1, 1);
    float *x = kt_rand(&r, (size_t)in * N, -1, 1), *w2 = kt_rand(&r, (size_t)out * hid, -1, 1);
    float *dy = kt_rand(&r, (size_t)out * N, -1, 1), *junk = kt_rand(&r, nh, -1, 1);
    float *dw20 = kt_rand(&r, (size_t)out * hid, -1, 1), *db20 = kt_rand(&r, (size_t)out, -1, 1);
    float *db10 = kt_rand(&r, (size_t)hid, -1, 1);
    tsr_tensor_t W1, B1, X, PRE, H, W2, DY, DH, DW2, DB2, DB1;
    tensor_from(&W1, hid, in, th, ti, w1);
    tensor_from(&B1, hid, 1, th, 1, b1);
    tensor_from(&X, in, N, ti, tt, x);
    tensor_from(&PRE, hid, N, th, tt, junk);
    tensor_from(&H, hid, N, th, tt, junk);
    tensor_from(&W2, out, hid, to, th, w2);
    tensor_from(&DY, out, N, to, tt, dy);
    tensor_from(&DH, hid, N, th, tt, junk);
    tensor_from(&DW2, out, hid, to, th, dw20);
    tensor_from(&DB2, out, 1, to, 1, db20);
    tensor_from(&DB1, hid, 1, th, 1, db10);
    OK(tsr__op_linear_gelu_fwd(&W1, &B1, &X, &PRE, &H));
    OK(tsr__op_linear_gelu_bwd(&W2, &H, &DY, &PRE, &DH, &DW2, &DB2, &DB1));
    float *gpre = tensor_get(&PRE), *gh = tensor_get(&H), *gdh = tensor_get(&DH);
    float *gdw2 = tensor_get(&DW2), *gdb2 = tensor_get(&DB2), *gdb1 = tensor_get(&DB1);
    double *pre = kt_dalloc(nh), *h = kt_dalloc(nh), *dh = kt_dalloc(nh);
    double *dw2 = kt_dalloc((size_t)out * hid), *db2 = kt_dalloc((size_t)out);
    double *db1 = kt_dalloc((size_t)hid);
    for (int t = 0; t < N; t++)
        for (int o = 0; o < hid; o++) {
            double s = b1[o];
            for (int i = 0; i < in; i++)
                s += (double)w1[o + (size_t)i * hid] * x[i + (size_t)t * in];
            pre[o + (size_t)t * hid] = s;
            h[o + (size_t)t * hid] = gelu_ref(s);
        }
    for (int t = 0; t < N; t++)
        for (int i = 0; i < hid; i++) {
            double s = 0;
            for (int o = 0; o < out; o++)
                s += (double)w2[o + (size_t)i * out] * dy[o + (size_t)t * out];
            dh[i + (size_t)t * hid] = s * gelu_grad_ref(pre[i + (size_t)t * hid]);
        }
    /* dw2 and db1 from the h and dh the op produced (each checked against
     * its own reference below): the sums are checked to their own
     * precision, and the GELU epilogues' error in h and dh (within 1e-5
     * and 1e-4 each) is not summed over N tokens a second time — on an
     * H200, db1 from the double dh was 1.8e-5 relative off with every dh
     * inside its bound */
    for (int i = 0; i < hid; i++) {
        double s = 0;
        for (int t = 0; t < N; t++)
            s += gdh[i + (size_t)t * hid];
        db1[i] = db10[i] + s;
        for (int o = 0; o < out; o++) {
            double g = 0;
            for (int t = 0; t < N; t++)
                g += (double)dy[o + (size_t)t * out] * gh[i + (size_t)t * hid];
            dw2[o + (size_t)i * out] = dw20[o + (size_t)i * out] + g;
        }
    }
    for (int o = 0; o < out; o++) {
        double s = 0;
        for (int t = 0; t < N; t++)
            s += dy[o + (size_t)t * out];
        db2[o] = db20[o] + s;
    }
    kt_assert_close("mlp pre", gpre, pre, nh, 1e-5, 1e-5);
    kt_assert_close("mlp gelu", gh, h, nh, 1e-5, 1e-5);
    /* the GELU gradient from cuBLASLt's DGELU epilogue on a GPU: its own
     * approximation, measured within 6e-5 relative on an H100 (test_gemm_ep.c) */
    kt_assert_close("mlp dh", gdh, dh, nh, 1e-4, 1e-4);
    kt_assert_close("mlp dw2", gdw2, dw2, (size_t)out * hid, 1e-5, 1e-5);
    kt_assert_close("mlp db2", gdb2, db2, (size_t)out, 1e-5, 1e-5);
    kt_assert_close("mlp db1", gdb1, db1, (size_t)hid, 1e-5, 1e-5);
    tsr_tensor_t *all[] = {&W1, &B1, &X, &PRE, &H, &W2, &DY, &DH, &DW2, &DB2, &DB1};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tsr__tensor_free(all[i]);
    float *fl[] = {w1, b1, x, w2, dy, junk, dw20, db20, db10, gpre, gh, gdh, gdw2, gdb2, gdb1};
    for (size_t i = 0; i < sizeof fl / sizeof *fl; i++)
        free(fl[i]);
    double *dl[] = {pre, h, dh, dw2, db2, db1};
    for (size_t i = 0; i < sizeof dl / sizeof *dl; i++)
        free(dl[i]);
}

Test(nn_ops, mlp_linears_with_gelu_fused_and_unfused_against_loops)
{
    rt_start();
    mlp_case(16, 40, 16, 24, 16, 24, 16, 8); /* one tile along in and out: fused */
    mlp_case(19, 37, 21, 23, 8, 16, 12, 8);  /* edge tiles on every axis: GELU by the last product */
    rt_stop();
}

Test(nn_ops, linear_forward_and_backward_against_loops)
{
    rt_start();
    linear_case(24, 16, 12, 8, 16, 12);  /* one tile along in and N */
    linear_case(37, 29, 23, 16, 12, 8);  /* edge tiles on every axis */
    /* the gradients in REDUX: 48 token tiles add into each dw and db tile,
     * on every worker at once (on a GPU, several on its lanes) */
    linear_case_of(64, 48, 192, 32, 48, 4, 1);
    linear_case_of(37, 29, 23, 16, 12, 8, 1);
    /* a beta that is neither form, and a bias tiled unlike W's rows */
    tsr_tensor_t W, Bt, X, Y;
    tensor_from(&W, 8, 4, 4, 4, NULL);
    tensor_from(&Bt, 8, 1, 2, 1, NULL);
    tensor_from(&X, 4, 6, 4, 3, NULL);
    tensor_from(&Y, 8, 6, 4, 3, NULL);
    cr_assert_eq(tsr__op_linear_fwd(&W, &Bt, &X, 0.5f, &Y), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "beta"), "%s", tsr_error_message());
    cr_assert_eq(tsr__op_linear_fwd(&W, &Bt, &X, 0.0f, &Y), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "bias"), "%s", tsr_error_message());
    tsr__tensor_free(&W);
    tsr__tensor_free(&Bt);
    tsr__tensor_free(&X);
    tsr__tensor_free(&Y);
    rt_stop();
}

/* Naive causal attention in double over qkv (3C, N) for S sequences of T:
 * y (C, N); with dy given, the gradient dqkv (3C, N). */
static void attention_ref(const float *qkv, int H, int d, int S, int T, const float *dy,
                          double *y, double *dqkv)
{
    int C = H * d, R = 3 * C;
    double *p = kt_dalloc((size_t)T * T), *dp = kt_dalloc((size_t)T * T);
    double scale = 1.0 / sqrt((double)d);
    for (int s = 0; s < S; s++)
        for (int h = 0; h < H; h++) {
#define Q(c, t) qkv[(size_t)(h * d + (c)) + (size_t)(s * T + (t)) * R]
#define K(c, t) qkv[(size_t)(C + h * d + (c)) + (size_t)(s * T + (t)) * R]
#define V(c, t) qkv[(size_t)(2 * C + h * d + (c)) + (size_t)(s * T + (t)) * R]
            for (int i = 0; i < T; i++) {
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j <= i; j++) {
                    double e = 0;
                    for (int c = 0; c < d; c++)
                        e += Q(c, i) * K(c, j);
                    p[i + j * T] = e * scale;
                    mx = fmax(mx, e * scale);
                }
                for (int j = 0; j <= i; j++)
                    sum += (p[i + j * T] = exp(p[i + j * T] - mx));
                for (int j = 0; j <= i; j++)
                    p[i + j * T] /= sum;
                for (int c = 0; c < d; c++) {
                    double o = 0;
                    for (int j = 0; j <= i; j++)
                        o += p[i + j * T] * V(c, j);
                    y[(size_t)(h * d + c) + (size_t)(s * T + i) * C] = o;
                }
            }
            if (!dy)
                continue;
#define DY(c, t) dy[(size_t)(h * d + (c)) + (size_t)(s * T + (t)) * C]
#define DQ(c, t) dqkv[(size_t)(h * d + (c)) + (size_t)(s * T + (t)) * R]
#define DK(c, t) dqkv[(size_t)(C + h * d + (c)) + (size_t)(s * T + (t)) * R]
#define DV(c, t) dqkv[(size_t)(2 * C + h * d + (c)) + (size_t)(s * T + (t)) * R]
            for (int i = 0; i < T; i++) {
                double dot = 0;
                for (int j = 0; j <= i; j++) {
                    double g = 0;
                    for (int c = 0; c < d; c++)
                        g += DY(c, i) * V(c, j);
                    dp[i + j * T] = g;
                    dot += g * p[i + j * T];
                    for (int c = 0; c < d; c++)
                        DV(c, j) += p[i + j * T] * DY(c, i);
                }
                for (int j = 0; j <= i; j++) {
                    double ds = p[i + j * T] * (dp[i + j * T] - dot) * scale;
                    for (int c = 0; c < d; c++) {
                        DQ(c, i) += ds * K(c, j);
                        DK(c, j) += ds * Q(c, i);
                    }
                }
            }
        }
    free(p);
    free(dp);
}

/* The attention ops on qkv (3C, N) in (tc, tt) tiles: q, k, v rows of
 * C / tc head row tiles each (tc = C: every head in one tile, read in
 * place), y and dy (C, N) in (tc, tt) tiles, lse and D (H, N) in (H tc / C,
 * tt), the state ms (2H, N) and acc (C, N) cut alike. */
static void attention_case(int tt, int tc, int H, int d)
{
    int S = 4, T = 12, C = H * d, N = S * T, R = C / tc, hr = H / R;
    kt_rng r = kt_seed(77);
    float *qkv = kt_rand(&r, (size_t)3 * C * N, -1, 1), *dy = kt_rand(&r, (size_t)C * N, -1, 1);
    float *dirty = kt_rand(&r, (size_t)3 * C * N, 5, 9);
    attn_set_t a;
    attn_set_make(&a, 3 * C, tc, C, tc, H, hr, N, tt, qkv, dy, dirty);
    free(dirty);
    OK(tsr__op_attention_fwd(&a.q, H, T, 0, &a.ms, &a.acc, &a.y, &a.lse));
    OK(tsr__op_attention_bwd(&a.q, H, T, 0, &a.y, &a.dy, &a.lse, &a.D, &a.dq));
    double *y = kt_dalloc((size_t)C * N), *dq = kt_dalloc((size_t)3 * C * N);
    attention_ref(qkv, H, d, S, T, dy, y, dq);
    float *gy = tensor_get(&a.y), *gdq = tensor_get(&a.dq);
    kt_assert_close("attention y", gy, y, (size_t)C * N, 1e-5, 1e-4);
    kt_assert_close("attention dqkv", gdq, dq, (size_t)3 * C * N, 1e-5, 1e-4);
    /* refused: tiles that cut a head (12 rows of heads of 8), y or the
     * state not cut like qkv, a head count that does not divide C */
    tsr_tensor_t hq, hy;
    tensor_from(&hq, 3 * C, N, 12, tt, NULL);
    tensor_from(&hy, C, N, tc == C ? d : C, tt, NULL);
    cr_assert_eq(tsr__op_attention_fwd(&hq, H, T, 0, &a.ms, &a.acc, &a.y, &a.lse), TSR_EINVAL);
    cr_assert_eq(tsr__op_attention_fwd(&a.q, H, T, 0, &a.ms, &a.acc, &hy, &a.lse), TSR_EINVAL);
    cr_assert_eq(tsr__op_attention_bwd(&a.q, H, T, 0, &a.y, &hy, &a.lse, &a.D, &a.dq),
                 TSR_EINVAL);
    cr_assert_eq(tsr__op_attention_fwd(&a.q, H + 1, T, 0, &a.ms, &a.acc, &a.y, &a.lse),
                 TSR_EINVAL);
    attn_set_free(&a);
    tsr__tensor_free(&hq);
    tsr__tensor_free(&hy);
    free(qkv);
    free(dy);
    free(y);
    free(dq);
    free(gy);
    free(gdq);
}

/* Split a (rows, N) tensor of coarse row tiles into fine ones and merge it
 * back into a dirty coarse tensor: every element where it was. 17 fine
 * tiles per coarse tile take two tasks (the second adds to the tile). */
static void regroup_case(int fine, int coarse, int rows)
{
    enum { N = 10, tt = 4 };
    kt_rng r = kt_seed((uint64_t)(fine * 100 + coarse));
    float *x = kt_rand(&r, (size_t)rows * N, -3, 3), *dirty = kt_rand(&r, (size_t)rows * N, 5, 9);
    tsr_tensor_t C1, F, C2;
    tensor_from(&C1, rows, N, coarse, tt, x);
    tensor_from(&F, rows, N, fine, tt, NULL);
    tensor_from(&C2, rows, N, coarse, tt, dirty);
    OK(tsr__op_regroup(&C1, &F));
    OK(tsr__op_regroup(&F, &C2));
    float *f = tensor_get(&F), *c = tensor_get(&C2);
    for (int i = 0; i < rows * N; i++) {
        cr_assert_eq(f[i], x[i], "split, element %d (fine %d, coarse %d)", i, fine, coarse);
        cr_assert_eq(c[i], x[i], "merge, element %d (fine %d, coarse %d)", i, fine, coarse);
    }
    tsr__tensor_free(&C1), tsr__tensor_free(&F), tsr__tensor_free(&C2);
    free(x), free(dirty), free(f), free(c);
}

/* The squares of 40 tiles of three sizes into one accumulator, in tasks of
 * up to 15 tiles (and one of a single tile: 40 = 15 + 15 + 10, then one
 * more call of 1), against double sums. */
Test(nn_ops, sum_of_squares_over_many_tiles)
{
    rt_start();
    enum { NT = 40 };
    kt_rng r = kt_seed(41);
    static float *x[NT + 1];
    tsr_handle_t h[NT + 1], acc;
    double want = 0.5;
    for (int i = 0; i <= NT; i++) {
        int n = 7 + 13 * (i % 3);
        x[i] = kt_rand(&r, (size_t)n, -2, 2);
        for (int j = 0; j < n; j++)
            want += (double)x[i][j] * x[i][j];
        OK(tsr_handle_register(&h[i], x[i], (size_t)n * sizeof(float)));
    }
    float a = 0.5f;
    OK(tsr_handle_register(&acc, &a, sizeof a));
    OK(tsr__op_sumsq_tiles(h, NT, acc));
    OK(tsr__op_sumsq_tiles(h + NT, 1, acc));
    OK(tsr_wait_all());
    for (int i = 0; i <= NT; i++)
        OK(tsr_handle_unregister(h[i]));
    OK(tsr_handle_unregister(acc));
    cr_assert(fabs(a - want) <= 1e-5 * want, "sum of squares %.9g, want %.9g", (double)a, want);
    for (int i = 0; i <= NT; i++)
        free(x[i]);
    rt_stop();
}

Test(nn_ops, regroup_split_and_merge)
{
    rt_start();
    regroup_case(4, 12, 36);     /* q, k, v of 3 heads */
    regroup_case(2, 34, 102);    /* 17 fine tiles per coarse tile */
    regroup_case(3, 9, 30);      /* an edge coarse tile of 3 rows */
    rt_stop();
}

Test(nn_ops, causal_attention_forward_and_backward)
{
    rt_start();
    attention_case(4, 32, 4, 8);  /* three tiles per sequence */
    attention_case(12, 32, 4, 8); /* one tile per sequence */
    attention_case(24, 32, 4, 8); /* two whole sequences per tile */
    attention_case(4, 16, 4, 8);  /* two head row tiles of two heads */
    attention_case(24, 8, 4, 8);  /* a tile per head */
    /* heads wider than the tensor-core kernels take: the attn_*_wide
     * codelets (the FP32 kernels on a GPU) */
    attention_case(12, 272, 2, 136);
    rt_stop();
}

Test(nn_ops, cross_entropy_over_vocabulary_tiles)
{
    rt_start();
    int V = 53, N = 12, tv = 16, tt = 5;
    kt_rng r = kt_seed(5);
    float *logits = kt_rand(&r, (size_t)V * N, -4, 4);
    int32_t tg[12];
    for (int t = 0; t < N; t++)
        tg[t] = t == 3 ? -1 : kt_randint(&r, 0, V);
    tsr_tensor_t L, Tg, ms, lse, loss;
    tensor_from(&L, V, N, tv, tt, logits);
    tensor_from(&Tg, 1, N, 1, tt, tg);
    tensor_from(&ms, 2, N, 2, tt, NULL);
    tensor_from(&lse, 1, N, 1, tt, NULL);
    tensor_from(&loss, 1, N, 1, tt, NULL);
    OK(tsr__op_xent_fwd(&L, &Tg, &ms, &lse, &loss));
    OK(tsr__op_xent_bwd(&L, &Tg, &lse, 0.5f));
    double want_loss[12], *want_d = kt_dalloc((size_t)V * N);
    for (int t = 0; t < N; t++) {
        double mx = -INFINITY, s = 0;
        for (int v = 0; v < V; v++)
            mx = fmax(mx, logits[v + t * V]);
        for (int v = 0; v < V; v++)
            s += exp(logits[v + t * V] - mx);
        double l = mx + log(s);
        want_loss[t] = tg[t] < 0 ? 0.0 : l - logits[tg[t] + t * V];
        for (int v = 0; v < V; v++)
            want_d[v + (size_t)t * V] =
                tg[t] < 0 ? 0.0 : 0.5 * (exp(logits[v + t * V] - l) - (v == tg[t]));
    }
    float *gl = tensor_get(&loss), *gd = tensor_get(&L);
    kt_assert_close("loss", gl, want_loss, (size_t)N, 1e-5, 1e-5);
    kt_assert_close("dlogits", gd, want_d, (size_t)V * N, 1e-6, 1e-5);
    tsr_tensor_t *all[] = {&L, &Tg, &ms, &lse, &loss};
    for (size_t i = 0; i < 5; i++)
        tsr__tensor_free(all[i]);
    free(logits);
    free(gl);
    free(gd);
    free(want_d);
    rt_stop();
}

/* tt tokens and tc channels per tile (tc < C: row tiles of the channels,
 * the tables tiled alike; the last row tile shorter) */
static void embedding_case(int tt, int tc)
{
    int C = 6, V = 23, ctx = 10, T = 8, S = 4, N = S * T, tv = 7;
    kt_rng r = kt_seed(9);
    float *wte = kt_rand(&r, (size_t)C * V, -1, 1), *wpe = kt_rand(&r, (size_t)C * ctx, -1, 1);
    float *dout = kt_rand(&r, (size_t)C * N, -1, 1);
    int32_t tok[32];
    for (int t = 0; t < N; t++)
        tok[t] = t % 5 == 0 ? 4 : kt_randint(&r, 0, V); /* repeated ids add up */
    tsr_tensor_t Tk, E, P, X, DE, DP, DO;
    tensor_from(&Tk, 1, N, 1, tt, tok);
    tensor_from(&E, C, V, tc, tv, wte);
    tensor_from(&P, C, ctx, tc, tt < T ? tt : T, wpe);
    tensor_from(&X, C, N, tc, tt, NULL);
    tensor_from(&DE, C, V, tc, tv, NULL);
    tensor_from(&DP, C, ctx, tc, tt < T ? tt : T, NULL);
    tensor_from(&DO, C, N, tc, tt, dout);
    OK(tsr__op_embed_fwd(&Tk, &E, &P, T, &X));
    OK(tsr__op_embed_bwd(&Tk, &DO, T, &DE, &DP));
    double *x = kt_dalloc((size_t)C * N), *de = kt_dalloc((size_t)C * V);
    double *dp = kt_dalloc((size_t)C * ctx);
    for (int t = 0; t < N; t++)
        for (int c = 0; c < C; c++) {
            x[c + t * C] = (double)wte[c + tok[t] * C] + wpe[c + (t % T) * C];
            de[c + tok[t] * C] += dout[c + t * C];
            dp[c + (t % T) * C] += dout[c + t * C];
        }
    float *gx = tensor_get(&X), *gde = tensor_get(&DE), *gdp = tensor_get(&DP);
    kt_assert_close("embedding", gx, x, (size_t)C * N, 1e-6, 1e-6);
    kt_assert_close("dwte", gde, de, (size_t)C * V, 1e-5, 1e-5);
    kt_assert_close("dwpe", gdp, dp, (size_t)C * ctx, 1e-5, 1e-5);
    tsr_tensor_t *all[] = {&Tk, &E, &P, &X, &DE, &DP, &DO};
    for (size_t i = 0; i < 7; i++)
        tsr__tensor_free(all[i]);
    free(wte);
    free(wpe);
    free(dout);
    free(x);
    free(de);
    free(dp);
    free(gx);
    free(gde);
    free(gdp);
}

Test(nn_ops, embeddings_forward_and_backward)
{
    rt_start();
    embedding_case(4, 6);  /* two tiles per sequence */
    embedding_case(16, 6); /* two whole sequences per tile */
    embedding_case(4, 4);  /* channels in row tiles of 4 and 2 */
    embedding_case(16, 4);
    rt_stop();
}
