/* LayerNorm forward against double loops (out, mean, rstd), backward against
 * the double analytic gradient and central finite differences of the double
 * forward; backward outputs start non-zero to check accumulation. */
#include "kernels/layernorm.h"
#include "kt_util.h"

static void ref_fwd(int C, int T, const double *x, const double *g, const double *b, double eps,
                    double *out, double *mean, double *rstd)
{
    for (int t = 0; t < T; t++) {
        double mu = 0, var = 0;
        for (int c = 0; c < C; c++)
            mu += x[c + t * C];
        mu /= C;
        for (int c = 0; c < C; c++)
            var += (x[c + t * C] - mu) * (x[c + t * C] - mu);
        var /= C;
        double rs = 1.0 / sqrt(var + eps);
        for (int c = 0; c < C; c++)
            out[c + t * C] = (x[c + t * C] - mu) * rs * g[c] + b[c];
        if (mean)
            mean[t] = mu, rstd[t] = rs;
    }
}

static double *to_d(const float *x, size_t n)
{
    double *d = kt_dalloc(n);
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

static const int shapes[][2] = {{1, 1}, {1, 4}, {2, 3}, {7, 5}, {31, 2}, {768, 3}, {130, 17}};
static const float eps = 1e-5f;

Test(layernorm, forward)
{
    kt_rng r = kt_seed(31);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int C = shapes[s][0], T = shapes[s][1];
        size_t n = (size_t)C * T;
        float *x = kt_rand(&r, n, -2, 3), *g = kt_rand(&r, C, 0.5, 1.5), *b = kt_rand(&r, C, -1, 1);
        float *out = kt_alloc(n), *mean = kt_alloc(T), *rstd = kt_alloc(T);
        double *xd = to_d(x, n), *gd = to_d(g, C), *bd = to_d(b, C);
        double *wo = kt_dalloc(n), *wm = kt_dalloc(T), *wr = kt_dalloc(T);
        ref_fwd(C, T, xd, gd, bd, eps, wo, wm, wr);
        tsr_cpu_layernorm_fwd(C, T, x, g, b, eps, out, mean, rstd);
        kt_assert_close("layernorm out", out, wo, n, 1e-5, 1e-5);
        kt_assert_close("layernorm mean", mean, wm, T, 1e-6, 1e-5);
        kt_assert_close("layernorm rstd", rstd, wr, T, 1e-6, 1e-5);
        tsr_cpu_layernorm_fwd(C, T, x, g, b, eps, x, mean, rstd); /* in place */
        kt_assert_close("layernorm out in place", x, wo, n, 1e-5, 1e-5);
        free(x), free(g), free(b), free(out), free(mean), free(rstd);
        free(xd), free(gd), free(bd), free(wo), free(wm), free(wr);
    }
}

/* L = sum wt .* layernorm(x; g, b) */
static double loss(int C, int T, const double *x, const double *g, const double *b,
                   const double *wt, double *scratch)
{
    ref_fwd(C, T, x, g, b, eps, scratch, NULL, NULL);
    double l = 0;
    for (int i = 0; i < C * T; i++)
        l += wt[i] * scratch[i];
    return l;
}

Test(layernorm, backward_accumulates_and_matches_finite_differences)
{
    kt_rng r = kt_seed(32);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int C = shapes[s][0], T = shapes[s][1];
        if (C * T > 2000)
            continue; /* finite differences are O(n^2) */
        size_t n = (size_t)C * T;
        float *x = kt_rand(&r, n, -2, 3), *g = kt_rand(&r, C, 0.5, 1.5), *b = kt_rand(&r, C, -1, 1);
        float *dout = kt_rand(&r, n, -1, 1);
        float *dx = kt_rand(&r, n, -1, 1), *dg = kt_rand(&r, C, -1, 1), *db = kt_rand(&r, C, -1, 1);
        float *dx0 = kt_dup(dx, n), *dg0 = kt_dup(dg, C), *db0 = kt_dup(db, C);
        float *mean = kt_alloc(T), *rstd = kt_alloc(T), *out = kt_alloc(n);
        tsr_cpu_layernorm_fwd(C, T, x, g, b, eps, out, mean, rstd);
        tsr_cpu_layernorm_bwd(C, T, dout, x, g, mean, rstd, dx, dg, db);

        double *xd = to_d(x, n), *gd = to_d(g, C), *bd = to_d(b, C), *wt = to_d(dout, n);
        double *scr = kt_dalloc(n), *fx = kt_dalloc(n), *fg = kt_dalloc(C), *fb = kt_dalloc(C);
        const double h = 1e-6;
        for (size_t i = 0; i < n; i++) {
            double x0 = xd[i];
            xd[i] = x0 + h;
            double lp = loss(C, T, xd, gd, bd, wt, scr);
            xd[i] = x0 - h;
            double lm = loss(C, T, xd, gd, bd, wt, scr);
            xd[i] = x0;
            fx[i] = dx0[i] + (lp - lm) / (2 * h);
        }
        for (int c = 0; c < C; c++) {
            double g0 = gd[c], b0 = bd[c];
            gd[c] = g0 + h;
            double lp = loss(C, T, xd, gd, bd, wt, scr);
            gd[c] = g0 - h;
            double lm = loss(C, T, xd, gd, bd, wt, scr);
            gd[c] = g0;
            fg[c] = dg0[c] + (lp - lm) / (2 * h);
            bd[c] = b0 + h;
            lp = loss(C, T, xd, gd, bd, wt, scr);
            bd[c] = b0 - h;
            lm = loss(C, T, xd, gd, bd, wt, scr);
            bd[c] = b0;
            fb[c] = db0[c] + (lp - lm) / (2 * h);
        }
        kt_assert_close("layernorm dx", dx, fx, n, 2e-5, 1e-4);
        kt_assert_close("layernorm dgamma", dg, fg, C, 2e-5, 1e-4);
        kt_assert_close("layernorm dbeta", db, fb, C, 2e-5, 1e-4);
        free(x), free(g), free(b), free(dout), free(dx), free(dg), free(db), free(dx0);
        free(dg0), free(db0), free(mean), free(rstd), free(out), free(xd), free(gd), free(bd);
        free(wt), free(scr), free(fx), free(fg), free(fb);
    }
}
