/* RMSNorm forward against double loops (out, rstd), backward against the
 * double analytic gradient (kt_llama_ref.h) and, for small shapes, central
 * finite differences of the double forward; backward outputs start non-zero
 * to check that dx and dw accumulate.
 *
 * Tolerances (fp32): the forward's sum of squares is formed in fp32 partial
 * sums (C/32 + 5 roundings at most on any path, under 1e-5 relative for the
 * C here, far less in practice), then sqrt, division and two products: out
 * and rstd within 1e-5 relative (+1e-6 absolute for outputs near 0).  The
 * backward's dx subtracts two terms of the size of rstd*|w*dout| (cancels):
 * 2e-5 absolute + 1e-4 relative, as LayerNorm's; dw sums T such products:
 * absolute 1e-5 per token. */
#include "kernels/rmsnorm.h"
#include "kt_llama_ref.h"
#include "kt_util.h"

/* C: 1, off the 32-wide partial sums (7, 31, 33, 130), over a 256-feature
 * carry (4097); T = 1 included */
static const int shapes[][2] = {{1, 1}, {1, 4}, {7, 5}, {31, 2}, {33, 1}, {768, 3}, {130, 17},
                                {4097, 2}};
static const float eps = 1e-5f;

Test(rmsnorm, forward)
{
    kt_rng r = kt_seed(61);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int C = shapes[s][0], T = shapes[s][1];
        size_t n = (size_t)C * T;
        float *x = kt_rand(&r, n, -2, 3), *w = kt_rand(&r, C, 0.5, 1.5);
        float *out = kt_alloc(n), *rstd = kt_alloc(T);
        double *xd = kt_to_d(x, n), *wd = kt_to_d(w, C), *wo = kt_dalloc(n), *wr = kt_dalloc(T);
        kt_ref_rms_fwd(C, T, xd, wd, eps, wo, wr);
        tsr_cpu_rmsnorm_fwd(C, T, x, w, eps, out, rstd);
        kt_assert_close("rmsnorm out", out, wo, n, 1e-6, 1e-5);
        kt_assert_close("rmsnorm rstd", rstd, wr, T, 0, 1e-5);
        tsr_cpu_rmsnorm_fwd(C, T, x, w, eps, x, rstd); /* in place */
        kt_assert_close("rmsnorm out in place", x, wo, n, 1e-6, 1e-5);
        free(x), free(w), free(out), free(rstd), free(xd), free(wd), free(wo), free(wr);
    }
}

/* Tokens of tiny and huge scale: eps dominates the first (rstd near
 * 1/sqrt(eps)), the second's squares (1e34 a feature) stay finite in fp32. */
Test(rmsnorm, forward_tiny_and_large_scales)
{
    kt_rng r = kt_seed(62);
    const float scales[] = {1e-6f, 1e17f};
    for (int k = 0; k < 2; k++) {
        int C = 37, T = 3;
        size_t n = (size_t)C * T;
        float *x = kt_rand(&r, n, -1, 1), *w = kt_rand(&r, C, 0.5, 1.5);
        for (size_t i = 0; i < n; i++)
            x[i] *= scales[k];
        float *out = kt_alloc(n), *rstd = kt_alloc(T);
        double *xd = kt_to_d(x, n), *wd = kt_to_d(w, C), *wo = kt_dalloc(n), *wr = kt_dalloc(T);
        kt_ref_rms_fwd(C, T, xd, wd, eps, wo, wr);
        tsr_cpu_rmsnorm_fwd(C, T, x, w, eps, out, rstd);
        kt_assert_close("rmsnorm out (scaled)", out, wo, n, 1e-6 * kt_dmaxabs(wo, n), 1e-5);
        kt_assert_close("rmsnorm rstd (scaled)", rstd, wr, T, 0, 1e-5);
        free(x), free(w), free(out), free(rstd), free(xd), free(wd), free(wo), free(wr);
    }
}

/* L = sum wt .* rmsnorm(x; w) */
static double loss(int C, int T, const double *x, const double *w, const double *wt,
                   double *scratch)
{
    kt_ref_rms_fwd(C, T, x, w, eps, scratch, NULL);
    double l = 0;
    for (int i = 0; i < C * T; i++)
        l += wt[i] * scratch[i];
    return l;
}

Test(rmsnorm, backward_accumulates)
{
    kt_rng r = kt_seed(63);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int C = shapes[s][0], T = shapes[s][1];
        size_t n = (size_t)C * T;
        float *x = kt_rand(&r, n, -2, 3), *w = kt_rand(&r, C, 0.5, 1.5);
        float *dout = kt_rand(&r, n, -1, 1);
        float *dx = kt_rand(&r, n, -1, 1), *dw = kt_rand(&r, C, -1, 1);
        double *wdx = kt_to_d(dx, n), *wdw = kt_to_d(dw, C);
        float *out = kt_alloc(n), *rstd = kt_alloc(T);
        tsr_cpu_rmsnorm_fwd(C, T, x, w, eps, out, rstd);
        tsr_cpu_rmsnorm_bwd(C, T, dout, x, w, rstd, dx, dw);
        double *xd = kt_to_d(x, n), *wd = kt_to_d(w, C), *dd = kt_to_d(dout, n);
        kt_ref_rms_bwd(C, T, dd, xd, wd, eps, wdx, wdw);
        kt_assert_close("rmsnorm dx", dx, wdx, n, 2e-5, 1e-4);
        kt_assert_close("rmsnorm dw", dw, wdw, C, 1e-5 * T, 1e-4);
        free(x), free(w), free(dout), free(dx), free(dw), free(wdx), free(wdw), free(out);
        free(rstd), free(xd), free(wd), free(dd);
    }
}

/* The kernel's gradient (and so the analytic reference's) against central
 * differences of the double forward, h = 1e-6 (truncation O(h^2), rounding
 * about 1e-16 |L| / h: both far under the fp32 tolerances). */
Test(rmsnorm, backward_matches_finite_differences)
{
    kt_rng r = kt_seed(64);
    const int C = 7, T = 3;
    size_t n = (size_t)C * T;
    float *x = kt_rand(&r, n, -2, 3), *w = kt_rand(&r, C, 0.5, 1.5), *dout = kt_rand(&r, n, -1, 1);
    float *dx = kt_rand(&r, n, -1, 1), *dw = kt_rand(&r, C, -1, 1);
    float *dx0 = kt_dup(dx, n), *dw0 = kt_dup(dw, C), *out = kt_alloc(n), *rstd = kt_alloc(T);
    tsr_cpu_rmsnorm_fwd(C, T, x, w, eps, out, rstd);
    tsr_cpu_rmsnorm_bwd(C, T, dout, x, w, rstd, dx, dw);
    double *xd = kt_to_d(x, n), *wd = kt_to_d(w, C), *wt = kt_to_d(dout, n);
    double *scr = kt_dalloc(n), *fx = kt_dalloc(n), *fw = kt_dalloc(C);
    const double h = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double x0 = xd[i];
        xd[i] = x0 + h;
        double lp = loss(C, T, xd, wd, wt, scr);
        xd[i] = x0 - h;
        double lm = loss(C, T, xd, wd, wt, scr);
        xd[i] = x0;
        fx[i] = dx0[i] + (lp - lm) / (2 * h);
    }
    for (int c = 0; c < C; c++) {
        double w0 = wd[c];
        wd[c] = w0 + h;
        double lp = loss(C, T, xd, wd, wt, scr);
        wd[c] = w0 - h;
        double lm = loss(C, T, xd, wd, wt, scr);
        wd[c] = w0;
        fw[c] = dw0[c] + (lp - lm) / (2 * h);
    }
    kt_assert_close("rmsnorm dx (finite differences)", dx, fx, n, 2e-5, 1e-4);
    kt_assert_close("rmsnorm dw (finite differences)", dw, fw, C, 2e-5, 1e-4);
    /* and the analytic double reference itself, tightly */
    double *ax = kt_to_d(dx0, n), *aw = kt_to_d(dw0, C);
    kt_ref_rms_bwd(C, T, wt, xd, wd, eps, ax, aw);
    for (size_t i = 0; i < n; i++)
        cr_assert(fabs(ax[i] - fx[i]) < 1e-8, "reference dx[%zu] %.12g vs fd %.12g", i, ax[i], fx[i]);
    for (int c = 0; c < C; c++)
        cr_assert(fabs(aw[c] - fw[c]) < 1e-8, "reference dw[%d] %.12g vs fd %.12g", c, aw[c], fw[c]);
    free(x), free(w), free(dout), free(dx), free(dw), free(dx0), free(dw0), free(out), free(rstd);
    free(xd), free(wd), free(wt), free(scr), free(fx), free(fw), free(ax), free(aw);
}

Test(rmsnorm, estimates)
{
    cr_assert_eq(tsr_rmsnorm_fwd_flops(768, 10), 10.0 * (4 * 768 + 4));
    cr_assert_eq(tsr_rmsnorm_fwd_bytes(768, 10), 4.0 * (2 * 768 * 10 + 768 + 10));
    cr_assert_eq(tsr_rmsnorm_bwd_flops(768, 10), 10.0 * (12 * 768 + 1));
    cr_assert_eq(tsr_rmsnorm_bwd_bytes(768, 10), 4.0 * (4 * 768 * 10 + 3 * 768 + 10));
}
