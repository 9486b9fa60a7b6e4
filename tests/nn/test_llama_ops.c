/* tests/nn/test_llama_ops.c — the Llama layers' tile operations (RMSNorm,
 * SwiGLU, RoPE, grouped-query attention; nn/ops.h) over tile grids with
 * edge tiles, against naive double loops written here (not the kernels),
 * forward and backward, and their refusals of tensors that do not fit. Part of the nn_ops suite, so it
 * also runs on two emulated GPUs beside the CPU workers and alone (the CUDA
 * implementations; tests/nn/meson.build).
 *
 * Tolerances: every kernel computes in fp32 with at most a few dozen terms
 * per sum (C = 37 features, N = 53 tokens), so its error is a few fp32
 * ulps of the largest term times the sum's length: 53 * 6e-8 * |term| ~ 3e-6
 * relative, below the 2e-5 used for sums; the elementwise results (SwiGLU,
 * RoPE: cos and sin rounded once from double) are within a few ulps of
 * values below ~5, below the 1e-5 used there. */
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

#define REFUSED(call, what)                                                             \
    do {                                                                                \
        cr_assert_eq((call), TSR_EINVAL, "%s was not refused", #call);                  \
        cr_assert(strstr(tsr_error_message(), (what)), "%s: %s", #call,                 \
                  tsr_error_message());                                                 \
    } while (0)

/* ---- RMSNorm ---------------------------------------------------------------- */

/* x (C, N) in column tiles of tt (the last one shorter): forward, then the
 * backward twice (dx and dw accumulate: both start from random values) */
static void rmsnorm_case(int C, int N, int tt)
{
    const float eps = 1e-5f;
    kt_rng r = kt_seed((uint64_t)(C * 1000 + N));
    size_t n = (size_t)C * N;
    float *x = kt_rand(&r, n, -2, 2), *w = kt_rand(&r, (size_t)C, 0.5f, 1.5f);
    float *dout = kt_rand(&r, n, -1, 1), *dx0 = kt_rand(&r, n, -1, 1);
    float *dw0 = kt_rand(&r, (size_t)C, -1, 1);
    tsr_tensor_t X, W, OUT, RSTD, DOUT, DX, DW;
    tensor_from(&X, C, N, C, tt, x);
    tensor_from(&W, C, 1, C, 1, w);
    tensor_from(&OUT, C, N, C, tt, NULL);
    tensor_from(&RSTD, 1, N, 1, tt, NULL);
    tensor_from(&DOUT, C, N, C, tt, dout);
    tensor_from(&DX, C, N, C, tt, dx0);
    tensor_from(&DW, C, 1, C, 1, dw0);
    cr_assert_gt(X.grid_cols, 2);
    OK(tsr__op_rmsnorm_fwd(&X, &W, eps, &OUT, &RSTD));
    OK(tsr__op_rmsnorm_bwd(&DOUT, &X, &W, &RSTD, &DX, &DW));
    OK(tsr__op_rmsnorm_bwd(&DOUT, &X, &W, &RSTD, &DX, &DW));
    float *gout = tensor_get(&OUT), *grstd = tensor_get(&RSTD), *gdx = tensor_get(&DX);
    float *gdw = tensor_get(&DW);
    double *out = kt_dalloc(n), *rs = kt_dalloc((size_t)N), *dx = kt_dalloc(n);
    double *dw = kt_dalloc((size_t)C);
    for (int i = 0; i < C; i++)
        dw[i] = dw0[i];
    for (int t = 0; t < N; t++) {
        const float *xt = x + (size_t)t * C, *dt = dout + (size_t)t * C;
        double ss = 0;
        for (int i = 0; i < C; i++)
            ss += (double)xt[i] * xt[i];
        double rstd = 1.0 / sqrt(ss / C + eps);
        rs[t] = rstd;
        /* out_i = x_i rstd w_i; d out_i / d x_k = w_i (rstd δ_ik - x_i x_k rstd^3 / C) */
        double dot = 0; /* sum_i dout_i w_i x_i */
        for (int i = 0; i < C; i++) {
            out[i + (size_t)t * C] = xt[i] * rstd * w[i];
            dot += (double)dt[i] * w[i] * xt[i];
        }
        for (int k = 0; k < C; k++) {
            double g = dt[k] * (double)w[k] * rstd - xt[k] * dot * rstd * rstd * rstd / C;
            dx[k + (size_t)t * C] = dx0[k + (size_t)t * C] + 2 * g;
            dw[k] += 2 * (double)dt[k] * xt[k] * rstd;
        }
    }
    kt_assert_close("rmsnorm out", gout, out, n, 1e-5, 1e-5);
    kt_assert_close("rmsnorm rstd", grstd, rs, (size_t)N, 0, 1e-5);
    kt_assert_close("rmsnorm dx", gdx, dx, n, 2e-5, 2e-5);
    kt_assert_close("rmsnorm dw", gdw, dw, (size_t)C, 2e-5, 2e-5);
    tsr_tensor_t *all[] = {&X, &W, &OUT, &RSTD, &DOUT, &DX, &DW};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tsr__tensor_free(all[i]);
    float *fl[] = {x, w, dout, dx0, dw0, gout, grstd, gdx, gdw};
    for (size_t i = 0; i < sizeof fl / sizeof *fl; i++)
        free(fl[i]);
    double *dl[] = {out, rs, dx, dw};
    for (size_t i = 0; i < sizeof dl / sizeof *dl; i++)
        free(dl[i]);
}

Test(nn_llama_ops, rmsnorm_forward_and_backward)
{
    rt_start();
    rmsnorm_case(37, 53, 16); /* 4 column tiles, the last of 5 */
    rmsnorm_case(9, 7, 3);
    tsr_shutdown();
}

Test(nn_llama_ops, rmsnorm_refuses_what_does_not_fit)
{
    rt_start();
    tsr_tensor_t X, Xs, W, Wbad, OUT, RSTD, RSTDbad, DX;
    tensor_from(&X, 12, 10, 12, 4, NULL);
    tensor_from(&Xs, 12, 10, 6, 4, NULL); /* features split */
    tensor_from(&W, 12, 1, 12, 1, NULL);
    tensor_from(&Wbad, 11, 1, 11, 1, NULL);
    tensor_from(&OUT, 12, 10, 12, 4, NULL);
    tensor_from(&RSTD, 1, 10, 1, 4, NULL);
    tensor_from(&RSTDbad, 1, 10, 1, 5, NULL);
    tensor_from(&DX, 12, 10, 12, 5, NULL);
    REFUSED(tsr__op_rmsnorm_fwd(&Xs, &W, 1e-5f, &OUT, &RSTD), "features (12) split");
    REFUSED(tsr__op_rmsnorm_fwd(&X, &Wbad, 1e-5f, &OUT, &RSTD), "weight (11, 1)");
    REFUSED(tsr__op_rmsnorm_fwd(&X, &W, 1e-5f, &OUT, &RSTDbad), "rstd");
    REFUSED(tsr__op_rmsnorm_fwd(&X, &W, 0.0f, &OUT, &RSTD), "eps");
    REFUSED(tsr__op_rmsnorm_fwd(&X, &W, 1e-5f, &DX, &RSTD), "differ");
    REFUSED(tsr__op_rmsnorm_bwd(&OUT, &X, &W, &RSTD, &DX, &W), "differ");
    REFUSED(tsr__op_rmsnorm_bwd(&OUT, &X, &W, &RSTD, &OUT, &Wbad), "differ");
    tsr_tensor_t *all[] = {&X, &Xs, &W, &Wbad, &OUT, &RSTD, &RSTDbad, &DX};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tsr__tensor_free(all[i]);
    tsr_shutdown();
}

/* ---- SwiGLU ----------------------------------------------------------------- */

static double sigmoid_ref(double g)
{
    return 1.0 / (1.0 + exp(-g));
}

Test(nn_llama_ops, swiglu_forward_and_backward)
{
    rt_start();
    const int F = 45, N = 29, tf = 16, tt = 8; /* a 3 x 4 grid, edges both ways */
    size_t n = (size_t)F * N;
    kt_rng r = kt_seed(77);
    float *g = kt_rand(&r, n, -6, 6), *u = kt_rand(&r, n, -2, 2), *dh = kt_rand(&r, n, -1, 1);
    g[3] = -90.0f; /* exp(-g) overflows: sigmoid exactly 0, no NaN */
    g[n - 2] = 90.0f;
    float *junk = kt_rand(&r, n, -1, 1);
    tsr_tensor_t G, U, H, DH, DG, DU;
    tensor_from(&G, F, N, tf, tt, g);
    tensor_from(&U, F, N, tf, tt, u);
    tensor_from(&H, F, N, tf, tt, junk); /* written, not accumulated */
    tensor_from(&DH, F, N, tf, tt, dh);
    tensor_from(&DG, F, N, tf, tt, junk);
    tensor_from(&DU, F, N, tf, tt, junk);
    OK(tsr__op_swiglu_fwd(&G, &U, &H));
    OK(tsr__op_swiglu_bwd(&G, &U, &DH, &DG, &DU));
    float *gh = tensor_get(&H), *gdg = tensor_get(&DG), *gdu = tensor_get(&DU);
    double *h = kt_dalloc(n), *dg = kt_dalloc(n), *du = kt_dalloc(n);
    for (size_t i = 0; i < n; i++) {
        double s = sigmoid_ref(g[i]), silu = g[i] * s;
        h[i] = silu * u[i];
        du[i] = (double)dh[i] * silu;
        /* d silu / dg = s + g s (1 - s) */
        dg[i] = (double)dh[i] * u[i] * (s + g[i] * s * (1.0 - s));
    }
    kt_assert_close("swiglu h", gh, h, n, 1e-6, 1e-5);
    kt_assert_close("swiglu dgate", gdg, dg, n, 1e-6, 1e-5);
    kt_assert_close("swiglu dup", gdu, du, n, 1e-6, 1e-5);
    /* refusals: a different tiling, a different shape */
    tsr_tensor_t Bad;
    tensor_from(&Bad, F, N, tf, tt + 1, NULL);
    REFUSED(tsr__op_swiglu_fwd(&G, &Bad, &H), "differ");
    REFUSED(tsr__op_swiglu_bwd(&G, &U, &DH, &DG, &Bad), "differ");
    tsr__tensor_free(&Bad);
    tensor_from(&Bad, F + 1, N, tf, tt, NULL);
    REFUSED(tsr__op_swiglu_fwd(&G, &U, &Bad), "differ");
    tsr__tensor_free(&Bad);
    tsr_tensor_t *all[] = {&G, &U, &H, &DH, &DG, &DU};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tsr__tensor_free(all[i]);
    float *fl[] = {g, u, dh, junk, gh, gdg, gdu};
    for (size_t i = 0; i < sizeof fl / sizeof *fl; i++)
        free(fl[i]);
    free(h);
    free(dg);
    free(du);
    tsr_shutdown();
}

/* ---- RoPE ------------------------------------------------------------------- */

/* x rotated by the position of each column (pos0 + t mod seq_len), with
 * rotate_half pairing inside each head; sgn -1: the inverse rotation */
static void rope_ref(int H, int d, int N, int seq_len, int pos0, double theta, const float *x,
                     double *out, double sgn)
{
    int half = d / 2;
    for (int t = 0; t < N; t++) {
        double p = pos0 + t % seq_len;
        for (int h = 0; h < H; h++) {
            const float *xh = x + (size_t)t * H * d + (size_t)h * d;
            double *oh = out + (size_t)t * H * d + (size_t)h * d;
            for (int i = 0; i < half; i++) {
                double a = p * pow(theta, -2.0 * i / d);
                double c = cos(a), s = sgn * sin(a);
                oh[i] = xh[i] * c - xh[i + half] * s;
                oh[i + half] = xh[i + half] * c + xh[i] * s;
            }
        }
    }
}

/* x (H d, N) tiled (tr, tt): forward in place, and backward on a gradient */
static void rope_case(int H, int d, int N, int tr, int tt, int seq_len, int pos0)
{
    const double theta = 500000.0;
    double *freq = kt_dalloc((size_t)d / 2);
    for (int i = 0; i < d / 2; i++)
        freq[i] = pow(theta, -2.0 * i / d);
    tsr_handle_t table;
    OK(tsr__rope_table(&table, d, freq));
    int C = H * d;
    size_t n = (size_t)C * N;
    kt_rng r = kt_seed((uint64_t)(C * 100 + N * 7 + tt));
    float *x = kt_rand(&r, n, -1, 1), *dy = kt_rand(&r, n, -1, 1);
    tsr_tensor_t X, DY;
    tensor_from(&X, C, N, tr, tt, x);
    tensor_from(&DY, C, N, tr, tt, dy);
    OK(tsr__op_rope_fwd(&X, H, d, seq_len, pos0, table));
    OK(tsr__op_rope_bwd(&DY, H, d, seq_len, pos0, table));
    float *gx = tensor_get(&X), *gdy = tensor_get(&DY);
    double *want = kt_dalloc(n), *dwant = kt_dalloc(n);
    rope_ref(H, d, N, seq_len, pos0, theta, x, want, 1.0);
    rope_ref(H, d, N, seq_len, pos0, theta, dy, dwant, -1.0);
    kt_assert_close("rope forward", gx, want, n, 1e-6, 1e-5);
    kt_assert_close("rope backward", gdy, dwant, n, 1e-6, 1e-5);
    tsr__tensor_free(&X);
    tsr__tensor_free(&DY);
    OK(tsr_handle_unregister(table));
    float *fl[] = {x, dy, gx, gdy};
    for (size_t i = 0; i < sizeof fl / sizeof *fl; i++)
        free(fl[i]);
    free(want);
    free(dwant);
    free(freq);
}

Test(nn_llama_ops, rope_forward_and_backward)
{
    rt_start();
    /* 3 heads of 10 in row tiles of 2 heads (the last of one); 3 sequences
     * of 13 in column tiles of 8: tiles cross sequence boundaries */
    rope_case(3, 10, 39, 20, 8, 13, 0);
    /* a position offset (generation's first new position), tiles of 2
     * whole sequences side by side and one more */
    rope_case(3, 10, 33, 30, 22, 11, 5);
    /* head_dim 128: a table of 64 doubles (512 bytes) */
    rope_case(2, 128, 21, 256, 6, 21, 0);
    /* positions far out: the angles are formed in double */
    rope_case(1, 64, 10, 64, 4, 10, 1000000);
    tsr_shutdown();
}

Test(nn_llama_ops, rope_refuses_what_does_not_fit)
{
    rt_start();
    double freq[5] = {1, 0.5, 0.25, 0.125, 0.0625};
    tsr_handle_t table, small;
    OK(tsr__rope_table(&table, 10, freq));
    OK(tsr__rope_table(&small, 8, freq));
    cr_assert_eq(tsr__rope_table(&small, 7, freq), TSR_EINVAL);
    tsr_tensor_t X, Xhalf;
    tensor_from(&X, 30, 12, 30, 4, NULL);
    tensor_from(&Xhalf, 30, 12, 15, 4, NULL); /* a tile ends inside a head */
    REFUSED(tsr__op_rope_fwd(&X, 4, 10, 12, 0, table), "x (30, 12)");
    REFUSED(tsr__op_rope_fwd(&Xhalf, 3, 10, 12, 0, table), "whole heads");
    REFUSED(tsr__op_rope_fwd(&X, 6, 5, 12, 0, table), "even");
    REFUSED(tsr__op_rope_fwd(&X, 3, 10, 12, 0, small), "frequency table");
    REFUSED(tsr__op_rope_bwd(&X, 3, 10, 0, 0, table), "positions");
    REFUSED(tsr__op_rope_bwd(&X, 3, 10, 12, -1, table), "positions");
    REFUSED(tsr__op_rope_fwd(&X, 3, 10, 12, INT_MAX - 5, table), "positions");
    OK(tsr__op_rope_fwd(&X, 3, 10, 12, INT_MAX - 11, table)); /* the last position fits */
    tsr__tensor_free(&X);
    tsr__tensor_free(&Xhalf);
    OK(tsr_handle_unregister(table));
    OK(tsr_handle_unregister(small));
    tsr_shutdown();
}

/* ---- grouped-query attention ------------------------------------------------ */

/* Naive causal GQA in double: qkv (C + 2 Ckv, N) column-major, q of head h
 * at rows h d, k and v of K/V head g at C + g d and C + Ckv + g d; query
 * head h reads K/V head h / (H / Hkv). y (C, N); dqkv gets dq, and dk, dv
 * summed over each K/V head's query heads. */
static void gqa_ref(const float *qkv, int H, int Hkv, int d, int S, int T, const float *dy,
                    double *y, double *dqkv)
{
    int C = H * d, Ckv = Hkv * d, R = C + 2 * Ckv, grp = H / Hkv;
    double scale = 1.0 / sqrt((double)d);
    double *p = kt_dalloc((size_t)T), *dp = kt_dalloc((size_t)T);
    for (size_t i = 0; i < (size_t)R * S * T; i++)
        dqkv[i] = 0;
    for (int s = 0; s < S; s++)
        for (int h = 0; h < H; h++) {
            int kr = C + (h / grp) * d, vr = kr + Ckv;
            for (int i = 0; i < T; i++) {
                size_t ti = (size_t)s * T + i;
                const float *q = qkv + h * d + ti * R;
                double m = -INFINITY, l = 0;
                for (int j = 0; j <= i; j++) {
                    const float *k = qkv + kr + ((size_t)s * T + j) * R;
                    double dot = 0;
                    for (int c = 0; c < d; c++)
                        dot += (double)q[c] * k[c];
                    p[j] = dot * scale;
                    m = p[j] > m ? p[j] : m;
                }
                for (int j = 0; j <= i; j++)
                    l += (p[j] = exp(p[j] - m));
                double Dsum = 0;
                for (int j = 0; j <= i; j++) {
                    const float *v = qkv + vr + ((size_t)s * T + j) * R;
                    p[j] /= l;
                    dp[j] = 0;
                    for (int c = 0; c < d; c++)
                        dp[j] += (double)dy[h * d + c + ti * C] * v[c];
                    Dsum += p[j] * dp[j];
                }
                for (int c = 0; c < d; c++) {
                    double o = 0;
                    for (int j = 0; j <= i; j++)
                        o += p[j] * qkv[vr + c + ((size_t)s * T + j) * R];
                    y[h * d + c + ti * C] = o;
                }
                for (int j = 0; j <= i; j++) {
                    size_t tj = (size_t)s * T + j;
                    double ds = p[j] * (dp[j] - Dsum) * scale;
                    for (int c = 0; c < d; c++) {
                        dqkv[h * d + c + ti * R] += ds * qkv[kr + c + tj * R];
                        dqkv[kr + c + tj * R] += ds * q[c];
                        dqkv[vr + c + tj * R] += p[j] * dy[h * d + c + ti * C];
                    }
                }
            }
        }
    free(p);
    free(dp);
}

/* H query heads over Hkv K/V heads of d, S sequences of T, token tiles of
 * tt, qkv and dqkv in one tile row of C + 2 Ckv */
static void gqa_case(int H, int Hkv, int d, int S, int T, int tt)
{
    int C = H * d, Ckv = Hkv * d, R = C + 2 * Ckv, N = S * T;
    kt_rng r = kt_seed((uint64_t)(H * 100 + Hkv * 10 + tt));
    float *qkv = kt_rand(&r, (size_t)R * N, -1, 1), *dy = kt_rand(&r, (size_t)C * N, -1, 1);
    float *dirty = kt_rand(&r, (size_t)R * N, 5, 9);
    attn_set_t a;
    attn_set_make(&a, R, R, C, C, H, H, N, tt, qkv, dy, dirty);
    free(dirty);
    OK(tsr__op_attention_gqa_fwd(&a.q, H, Hkv, T, 0, &a.ms, &a.acc, &a.y, &a.lse));
    OK(tsr__op_attention_gqa_bwd(&a.q, H, Hkv, T, 0, &a.y, &a.dy, &a.lse, &a.D, &a.dq));
    double *y = kt_dalloc((size_t)C * N), *dq = kt_dalloc((size_t)R * N);
    gqa_ref(qkv, H, Hkv, d, S, T, dy, y, dq);
    float *gy = tensor_get(&a.y), *gdq = tensor_get(&a.dq);
    kt_assert_close("gqa y", gy, y, (size_t)C * N, 1e-5, 1e-4);
    kt_assert_close("gqa dqkv", gdq, dq, (size_t)R * N, 1e-5, 1e-4);
    attn_set_free(&a);
    float *fl[] = {qkv, dy, gy, gdq};
    for (size_t i = 0; i < sizeof fl / sizeof *fl; i++)
        free(fl[i]);
    free(y);
    free(dq);
}

Test(nn_llama_ops, gqa_attention_forward_and_backward)
{
    rt_start();
    /* 6 heads of 16 over 2 and 1 K/V heads, two sequences of 12: token
     * tiles of 4 (three query and key tiles per sequence), of the two
     * sequences side by side, and the plain case (6 over 6) fused */
    gqa_case(6, 2, 16, 2, 12, 4);
    gqa_case(6, 1, 16, 2, 12, 4);
    gqa_case(6, 2, 16, 2, 12, 24);
    gqa_case(6, 1, 16, 2, 12, 12);
    gqa_case(6, 6, 16, 2, 12, 4);
    tsr_shutdown();
}

Test(nn_llama_ops, gqa_attention_refuses_what_does_not_fit)
{
    rt_start();
    int H = 6, d = 16, C = H * d, N = 24, T = 12;
    tsr_tensor_t tq, t3, ty, tl, tms, tacc;
    tensor_from(&tq, C + 2 * 2 * d, N, C + 2 * 2 * d, 4, NULL); /* 2 K/V heads */
    tensor_from(&t3, C + 2 * 2 * d, N, C, 4, NULL); /* split rows: only kv_heads = heads */
    tensor_from(&ty, C, N, C, 4, NULL);
    tensor_from(&tl, H, N, H, 4, NULL);
    tensor_from(&tms, 2 * H, N, 2 * H, 4, NULL);
    tensor_from(&tacc, C, N, C, 4, NULL);
    REFUSED(tsr__op_attention_gqa_fwd(&tq, H, 4, T, 0, &tms, &tacc, &ty, &tl), "do not divide");
    REFUSED(tsr__op_attention_gqa_fwd(&tq, H, 0, T, 0, &tms, &tacc, &ty, &tl), "do not divide");
    REFUSED(tsr__op_attention_gqa_fwd(&tq, H, 3, T, 0, &tms, &tacc, &ty, &tl), "rows");
    REFUSED(tsr__op_attention_gqa_fwd(&t3, H, 2, T, 0, &tms, &tacc, &ty, &tl), "one tile row");
    REFUSED(tsr__op_attention_gqa_bwd(&tq, H, 3, T, 0, &ty, &ty, &tl, &tl, &tq), "rows");
    OK(tsr__op_attention_gqa_fwd(&tq, H, 2, T, 0, &tms, &tacc, &ty, &tl));
    tsr_tensor_t *all[] = {&tq, &t3, &ty, &tl, &tms, &tacc};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tsr__tensor_free(all[i]);
    tsr_shutdown();
}
