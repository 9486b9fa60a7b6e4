/* Every x86-64 level's build of the CPU kernels (baseline, v3, v4 — the
 * clones gcc's target_clones picks between at load time) computes the same
 * bits as the others and as the library's dispatched kernels, on shapes that
 * reach the vector tails: the association of every sum is fixed in the
 * source, and ISO C keeps fp contraction off (kernels/cpu/vecmath.h).  Levels
 * this CPU lacks are left out (logged). */
#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/crossentropy.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/rmsnorm.h"
#include "kernels/softmax.h"
#include "kernels/swiglu.h"
#include "kt_clones.h"
#include "kt_util.h"

/* the sets this CPU runs, the baseline first */
static int available(const kt_clone_set **sets)
{
    int n = 0;
    sets[n++] = &kt_clones_default;
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v3"))
        sets[n++] = &kt_clones_v3;
    else
        cr_log_info("clones: this CPU has no x86-64-v3; compared without it");
    if (__builtin_cpu_supports("x86-64-v4"))
        sets[n++] = &kt_clones_v4;
    else
        cr_log_info("clones: this CPU has no x86-64-v4; compared without it");
#endif
    return n;
}

static void same_bits(const char *what, const char *who, const void *a, const void *b,
                      size_t bytes)
{
    cr_assert_eq(memcmp(a, b, bytes), 0, "%s: the %s build differs from the baseline", what, who);
}

Test(clones, elementwise_and_reductions_bit_identical)
{
    const kt_clone_set *sets[3];
    int ns = available(sets);
    kt_rng r = kt_seed(501);
    const size_t n = 1037; /* 64 vectors of 16 and a tail of 13 */
    float *x = kt_rand(&r, n, -9, 9), *dout = kt_rand(&r, n, -1, 1);
    float *ref_f = kt_alloc(n), *ref_b = kt_alloc(n), *f = kt_alloc(n), *b = kt_alloc(n);
    sets[0]->gelu_fwd(n, x, ref_f);
    sets[0]->gelu_bwd(n, x, dout, ref_b);
    for (int s = 0; s <= ns; s++) {
        const char *who = s < ns ? sets[s]->name : "dispatched";
        if (s < ns)
            sets[s]->gelu_fwd(n, x, f), sets[s]->gelu_bwd(n, x, dout, b);
        else
            tsr_cpu_gelu_fwd(n, x, f), tsr_cpu_gelu_bwd(n, x, dout, b);
        same_bits("gelu_fwd", who, f, ref_f, n * 4);
        same_bits("gelu_bwd", who, b, ref_b, n * 4);
    }
    /* softmax state and cross-entropy gradient over a (m, cols) logits tile */
    const int m = 331, cols = 5;
    float *lg = kt_rand(&r, (size_t)m * cols, -12, 12);
    float ref_ms[10], ms[10], lse[5];
    int32_t tg[5] = {3, -1, 330, 17, 0};
    sets[0]->maxsumexp(m, cols, lg, m, ref_ms, 0);
    for (int j = 0; j < cols; j++)
        lse[j] = ref_ms[2 * j] + logf(ref_ms[2 * j + 1]);
    float *ref_d = kt_alloc((size_t)m * cols), *d = kt_alloc((size_t)m * cols);
    sets[0]->crossentropy_bwd(m, cols, 0, lg, m, lse, tg, 0.25f, ref_d, m);
    for (int s = 0; s <= ns; s++) {
        const char *who = s < ns ? sets[s]->name : "dispatched";
        if (s < ns) {
            sets[s]->maxsumexp(m, cols, lg, m, ms, 0);
            sets[s]->crossentropy_bwd(m, cols, 0, lg, m, lse, tg, 0.25f, d, m);
        } else {
            tsr_cpu_maxsumexp(m, cols, lg, m, ms, 0);
            tsr_cpu_crossentropy_bwd(m, cols, 0, lg, m, lse, tg, 0.25f, d, m);
        }
        same_bits("maxsumexp", who, ms, ref_ms, sizeof ms);
        same_bits("crossentropy_bwd", who, d, ref_d, (size_t)m * cols * 4);
    }
    /* layernorm forward and backward over (C, T), C with a tail */
    const int C = 77, T = 6;
    float *lx = kt_rand(&r, (size_t)C * T, -3, 3), *gm = kt_rand(&r, C, 0.5f, 1.5f);
    float *bt = kt_rand(&r, C, -1, 1), *ld = kt_rand(&r, (size_t)C * T, -1, 1);
    float *ref_o = kt_alloc((size_t)C * T), *o = kt_alloc((size_t)C * T), mr[12], ref_mr[12];
    float *ref_dx = kt_alloc((size_t)C * T), *dx = kt_alloc((size_t)C * T);
    float *ref_dg = kt_alloc(2 * (size_t)C), *dg = kt_alloc(2 * (size_t)C);
    sets[0]->layernorm_fwd(C, T, lx, gm, bt, 1e-5f, ref_o, ref_mr, ref_mr + T);
    memset(ref_dx, 0, sizeof(float) * C * T), memset(ref_dg, 0, sizeof(float) * 2 * C);
    sets[0]->layernorm_bwd(C, T, ld, lx, gm, ref_mr, ref_mr + T, ref_dx, ref_dg, ref_dg + C);
    for (int s = 1; s < ns; s++) {
        sets[s]->layernorm_fwd(C, T, lx, gm, bt, 1e-5f, o, mr, mr + T);
        memset(dx, 0, sizeof(float) * C * T), memset(dg, 0, sizeof(float) * 2 * C);
        sets[s]->layernorm_bwd(C, T, ld, lx, gm, ref_mr, ref_mr + T, dx, dg, dg + C);
        same_bits("layernorm_fwd", sets[s]->name, o, ref_o, (size_t)C * T * 4);
        same_bits("layernorm_fwd mean, rstd", sets[s]->name, mr, ref_mr, sizeof mr);
        same_bits("layernorm_bwd dx", sets[s]->name, dx, ref_dx, (size_t)C * T * 4);
        same_bits("layernorm_bwd dgamma, dbeta", sets[s]->name, dg, ref_dg, (size_t)C * 2 * 4);
    }
    /* adamw with the bf16 copy, and sumsq */
    float *p0 = kt_rand(&r, n, -1, 1), *m0 = kt_rand(&r, n, -0.1f, 0.1f);
    float *v0 = kt_rand(&r, n, 0, 0.01f);
    float *rp = kt_dup(p0, n), *rm = kt_dup(m0, n), *rv = kt_dup(v0, n);
    uint16_t *rb = malloc(2 * n), *bb = malloc(2 * n);
    cr_assert(rb && bb);
    float rss = 1.0f;
    sets[0]->adamw(n, 4, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.8f, x, rp, rm, rv, rb, 0);
    sets[0]->sumsq(n, x, &rss);
    for (int s = 1; s < ns; s++) {
        float *pp = kt_dup(p0, n), *mm = kt_dup(m0, n), *vv = kt_dup(v0, n), ss = 1.0f;
        sets[s]->adamw(n, 4, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.8f, x, pp, mm, vv, bb, 0);
        sets[s]->sumsq(n, x, &ss);
        same_bits("adamw p", sets[s]->name, pp, rp, n * 4);
        same_bits("adamw m", sets[s]->name, mm, rm, n * 4);
        same_bits("adamw v", sets[s]->name, vv, rv, n * 4);
        same_bits("adamw p_bf16", sets[s]->name, bb, rb, n * 2);
        same_bits("sumsq", sets[s]->name, &ss, &rss, 4);
        free(pp), free(mm), free(vv);
    }
    free(x), free(dout), free(ref_f), free(ref_b), free(f), free(b), free(lg), free(ref_d);
    free(d), free(lx), free(gm), free(bt), free(ld), free(ref_o), free(o), free(ref_dx);
    free(dx), free(ref_dg), free(dg), free(p0), free(m0), free(v0), free(rp), free(rm);
    free(rv), free(rb), free(bb);
}

/* attention on GPT-2's diagonal tile (d = 64, the instance of its own) and
 * on an odd head dimension with an off-diagonal pair, forward and backward;
 * q, k, v, dq, dk, dv contiguous with head stride max(tq, tk) d */
Test(clones, attention_bit_identical)
{
    const kt_clone_set *sets[3];
    int ns = available(sets);
    kt_rng r = kt_seed(502);
    const int shapes[2][5] = {{64, 64, 64, 2, 0}, {40, 37, 70, 1, 50}}; /* d, tq, tk, nb, q0 */
    for (int sh = 0; sh < 2; sh++) {
        int d = shapes[sh][0], tq = shapes[sh][1], tk = shapes[sh][2], nb = shapes[sh][3];
        int q0 = shapes[sh][4];
        int tmax = tq > tk ? tq : tk;
        long long hs = (long long)tmax * d;
        size_t nq = (size_t)d * tmax * nb, nk = nq, rows = (size_t)tq * nb;
        float *q = kt_rand(&r, nq, -2, 2), *k = kt_rand(&r, nk, -2, 2);
        float *v = kt_rand(&r, nk, -1, 1), *dout = kt_rand(&r, nq, -1, 1);
        float *lse = kt_rand(&r, rows, 3, 5), *D = kt_rand(&r, rows, -0.5f, 0.5f);
        float *ref[5], *got[5];
        size_t sz[5] = {2 * rows, nq, nq, nk, nk}; /* ms, acc, dq, dk, dv */
        for (int s = 0; s < ns; s++) {
            float **out = s == 0 ? ref : got;
            for (int a = 0; a < 5; a++)
                out[a] = kt_alloc(sz[a]);
            tsr_cpu_attn_init(d, tq, nb, out[0], out[1]);
            sets[s]->attn_fwd(d, tq, tk, nb, q0, 0, 0.125f, d, hs, q, k, v, out[0], out[1]);
            for (int a = 2; a < 5; a++)
                memset(out[a], 0, sz[a] * 4);
            sets[s]->attn_bwd(d, tq, tk, nb, q0, 0, 0.125f, d, hs, q, k, v, d, hs, dout, lse, D,
                              out[2], out[3], out[4]);
            if (s == 0)
                continue;
            const char *nm[5] = {"attn_fwd ms", "attn_fwd acc", "attn_bwd dq", "attn_bwd dk",
                                 "attn_bwd dv"};
            for (int a = 0; a < 5; a++) {
                same_bits(nm[a], sets[s]->name, got[a], ref[a], sz[a] * 4);
                free(got[a]);
            }
        }
        for (int a = 0; a < 5; a++)
            free(ref[a]);
        free(q), free(k), free(v), free(dout), free(lse), free(D);
    }
}

/* The Llama kernels with clones: RMSNorm (C with a tail of the 32 partial
 * sums, and over one 256-feature carry) and SwiGLU (gates into both of the
 * exp's tails), every level and the dispatched one against the baseline. */
Test(clones, rmsnorm_and_swiglu_bit_identical)
{
    const kt_clone_set *sets[3];
    int ns = available(sets);
    kt_rng r = kt_seed(502);
    const int C = 301, T = 5;
    size_t n = (size_t)C * T;
    float *x = kt_rand(&r, n, -3, 3), *w = kt_rand(&r, C, 0.5f, 1.5f), *dy = kt_rand(&r, n, -1, 1);
    float *g = kt_rand(&r, n, -100, 100);
    float ref_rs[5], rs[5];
    float *ref_o = kt_alloc(n), *ref_dx = kt_alloc(n), *ref_dw = kt_alloc(C);
    float *ref_h = kt_alloc(n), *ref_dg = kt_alloc(n), *ref_du = kt_alloc(n);
    float *o = kt_alloc(n), *dx = kt_alloc(n), *dw = kt_alloc(C);
    float *h = kt_alloc(n), *dg = kt_alloc(n), *du = kt_alloc(n);
    sets[0]->rmsnorm_fwd(C, T, x, w, 1e-5f, ref_o, ref_rs);
    memset(ref_dx, 0, n * 4), memset(ref_dw, 0, (size_t)C * 4);
    sets[0]->rmsnorm_bwd(C, T, dy, x, w, ref_rs, ref_dx, ref_dw);
    sets[0]->swiglu_fwd(C, T, g, C, x, C, ref_h, C);
    sets[0]->swiglu_bwd(C, T, g, C, x, C, dy, C, ref_dg, C, ref_du, C);
    for (int s = 0; s <= ns; s++) {
        const char *who = s < ns ? sets[s]->name : "dispatched";
        memset(dx, 0, n * 4), memset(dw, 0, (size_t)C * 4);
        if (s < ns) {
            sets[s]->rmsnorm_fwd(C, T, x, w, 1e-5f, o, rs);
            sets[s]->rmsnorm_bwd(C, T, dy, x, w, ref_rs, dx, dw);
            sets[s]->swiglu_fwd(C, T, g, C, x, C, h, C);
            sets[s]->swiglu_bwd(C, T, g, C, x, C, dy, C, dg, C, du, C);
        } else {
            tsr_cpu_rmsnorm_fwd(C, T, x, w, 1e-5f, o, rs);
            tsr_cpu_rmsnorm_bwd(C, T, dy, x, w, ref_rs, dx, dw);
            tsr_cpu_swiglu_fwd(C, T, g, C, x, C, h, C);
            tsr_cpu_swiglu_bwd(C, T, g, C, x, C, dy, C, dg, C, du, C);
        }
        same_bits("rmsnorm_fwd", who, o, ref_o, n * 4);
        same_bits("rmsnorm_fwd rstd", who, rs, ref_rs, sizeof rs);
        same_bits("rmsnorm_bwd dx", who, dx, ref_dx, n * 4);
        same_bits("rmsnorm_bwd dw", who, dw, ref_dw, (size_t)C * 4);
        same_bits("swiglu_fwd", who, h, ref_h, n * 4);
        same_bits("swiglu_bwd dg", who, dg, ref_dg, n * 4);
        same_bits("swiglu_bwd du", who, du, ref_du, n * 4);
    }
    free(x), free(w), free(dy), free(g), free(ref_o), free(ref_dx), free(ref_dw), free(ref_h);
    free(ref_dg), free(ref_du), free(o), free(dx), free(dw), free(h), free(dg), free(du);
}
