/* SwiGLU forward and backward against double loops (kt_llama_ref.h), in the
 * two layouts the header names (separate (F, T) tiles; one fused gate|up
 * (2F, T) tile, ld 2F) and with padded leading dimensions; g at large |g|
 * (the sigmoid's exp overflowing either way); the backward against central
 * finite differences of the double forward for a small case.
 *
 * Tolerances (fp32): forward = exp (1.4 ulp), add, division, two products:
 * within 1e-6 relative (about 8 ulp), plus 1e-30 absolute where the true
 * value is below fp32's normal range (g < -87 gives exactly 0).
 * Backward: du as the forward; dg = dh u s (1 + g (1 - s)) rounds 1 - s to
 * 2^-24 absolute, which g multiplies (error up to |g| 2^-24 relative, for
 * |g| < 17: beyond, s is 1 exactly and so is the true value to fp32), and
 * cancels near g = -2.4 where silu' crosses 0: 4e-6 relative + 2e-6 absolute
 * (|dh u| <= 2). */
#include "kernels/swiglu.h"
#include "kt_llama_ref.h"
#include "kt_util.h"

/* F off any vector width, T = 1; layout 0: separate, 1: fused, 2: padded */
static const int shapes[][3] = {{1, 1, 0}, {7, 5, 0}, {7, 5, 1}, {33, 1, 1}, {130, 17, 2},
                                {1024, 3, 1}};

static void run_case(kt_rng *r, int F, int T, int layout, float glo, float ghi)
{
    int ld = layout == 1 ? 2 * F : (layout == 2 ? F + 3 : F);
    size_t nb = (size_t)ld * T;
    /* one buffer per operand; fused: g and u the two halves of gu's columns */
    float *gu = kt_rand(r, layout == 1 ? nb : 2 * nb, -2, 2);
    float *g = gu, *u = layout == 1 ? gu + F : gu + nb;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < F; i++)
            g[i + (size_t)t * ld] = kt_unif(r, glo, ghi);
    float *dh = kt_rand(r, nb, -1, 1), *h = kt_alloc(nb);
    float *dgu = kt_alloc(layout == 1 ? nb : 2 * nb);
    float *dg = dgu, *du = layout == 1 ? dgu + F : dgu + nb;
    tsr_cpu_swiglu_fwd(F, T, g, ld, u, ld, h, ld);
    tsr_cpu_swiglu_bwd(F, T, g, ld, u, ld, dh, ld, dg, ld, du, ld);
    size_t n = (size_t)F * T;
    float *gh = kt_alloc(n), *gdg = kt_alloc(n), *gdu = kt_alloc(n);
    double *wh = kt_dalloc(n), *wdg = kt_dalloc(n), *wdu = kt_dalloc(n);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < F; i++) {
            size_t k = i + (size_t)t * F, o = i + (size_t)t * ld;
            double gv = g[o], uv = u[o], d = dh[o];
            wh[k] = kt_ref_swiglu(gv, uv);
            wdg[k] = d * uv * kt_ref_dsilu(gv);
            wdu[k] = d * gv * kt_ref_sigmoid(gv);
            gh[k] = h[o], gdg[k] = dg[o], gdu[k] = du[o];
        }
    kt_assert_close("swiglu h", gh, wh, n, 1e-30, 1e-6);
    kt_assert_close("swiglu dg", gdg, wdg, n, 2e-6, 4e-6);
    kt_assert_close("swiglu du", gdu, wdu, n, 1e-30, 1e-6);
    /* in place: h over g */
    tsr_cpu_swiglu_fwd(F, T, g, ld, u, ld, g, ld);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < F; i++)
            gh[i + (size_t)t * F] = g[i + (size_t)t * ld];
    kt_assert_close("swiglu h in place", gh, wh, n, 1e-30, 1e-6);
    free(gu), free(dh), free(h), free(dgu), free(gh), free(gdg), free(gdu), free(wh), free(wdg);
    free(wdu);
}

Test(swiglu, forward_backward_layouts)
{
    kt_rng r = kt_seed(71);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        run_case(&r, shapes[s][0], shapes[s][1], shapes[s][2], -8, 8);
}

/* |g| from 10 to 1e30 both ways: no NaN, no overflow, silu(g) -> g above and
 * -> 0 below, silu' -> 1 and -> 0. */
Test(swiglu, large_gate_values)
{
    const float gs[] = {0.0f,    -0.0f,  10.0f, -10.0f,  20.0f,   -20.0f, 86.0f, -86.0f,
                        87.5f, -87.5f, 88.8f, -88.8f,  100.0f, -100.0f, 1e4f,  -1e4f,
                        1e30f, -1e30f};
    int F = sizeof gs / sizeof gs[0];
    float *u = kt_alloc(F), *dh = kt_alloc(F), *h = kt_alloc(F), *dg = kt_alloc(F), *du = kt_alloc(F);
    for (int i = 0; i < F; i++)
        u[i] = 1.5f, dh[i] = 0.75f;
    tsr_cpu_swiglu_fwd(F, 1, gs, F, u, F, h, F);
    tsr_cpu_swiglu_bwd(F, 1, gs, F, u, F, dh, F, dg, F, du, F);
    double *wh = kt_dalloc(F), *wdg = kt_dalloc(F), *wdu = kt_dalloc(F);
    for (int i = 0; i < F; i++) {
        wh[i] = kt_ref_swiglu(gs[i], 1.5);
        wdg[i] = 0.75 * 1.5 * kt_ref_dsilu(gs[i]);
        wdu[i] = 0.75 * gs[i] * kt_ref_sigmoid(gs[i]);
    }
    kt_assert_close("swiglu h (large |g|)", h, wh, F, 1e-30, 1e-6);
    kt_assert_close("swiglu dg (large |g|)", dg, wdg, F, 1e-30, 4e-6);
    kt_assert_close("swiglu du (large |g|)", du, wdu, F, 1e-30, 1e-6);
    free(u), free(dh), free(h), free(dg), free(du), free(wh), free(wdg), free(wdu);
}

/* L = sum dh .* silu(g) u: its central differences in g and u (h = 1e-6,
 * in double) against the kernel's dg, du. */
Test(swiglu, backward_matches_finite_differences)
{
    kt_rng r = kt_seed(72);
    const int F = 5, T = 3;
    size_t n = (size_t)F * T;
    float *g = kt_rand(&r, n, -6, 6), *u = kt_rand(&r, n, -2, 2), *dh = kt_rand(&r, n, -1, 1);
    float *dg = kt_alloc(n), *du = kt_alloc(n);
    tsr_cpu_swiglu_bwd(F, T, g, F, u, F, dh, F, dg, F, du, F);
    double *fg = kt_dalloc(n), *fu = kt_dalloc(n);
    const double h = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double gv = g[i], uv = u[i], d = dh[i];
        /* L depends on g[i], u[i] only through term i */
        fg[i] = d * (kt_ref_swiglu(gv + h, uv) - kt_ref_swiglu(gv - h, uv)) / (2 * h);
        fu[i] = d * (kt_ref_swiglu(gv, uv + h) - kt_ref_swiglu(gv, uv - h)) / (2 * h);
        cr_assert(fabs(fg[i] - d * uv * kt_ref_dsilu(gv)) < 1e-8, "reference silu' at %g", gv);
    }
    kt_assert_close("swiglu dg (finite differences)", dg, fg, n, 2e-6, 4e-6);
    kt_assert_close("swiglu du (finite differences)", du, fu, n, 1e-6, 1e-6);
    free(g), free(u), free(dh), free(dg), free(du), free(fg), free(fu);
}

Test(swiglu, estimates)
{
    cr_assert_eq(tsr_swiglu_fwd_flops(100, 3), 1800.0);
    cr_assert_eq(tsr_swiglu_fwd_bytes(100, 3), 3600.0);
    cr_assert_eq(tsr_swiglu_bwd_flops(100, 3), 3600.0);
    cr_assert_eq(tsr_swiglu_bwd_bytes(100, 3), 6000.0);
}
