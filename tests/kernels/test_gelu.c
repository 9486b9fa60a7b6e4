/* GELU (tanh form) forward and backward against double formulas, backward
 * also against central finite differences of the double forward. */
#include "kernels/gelu.h"
#include "kt_util.h"

static double ref_gelu(double x)
{
    double k = sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

static double ref_gelu_grad(double x)
{
    double k = sqrt(2.0 / M_PI);
    double u = k * (x + 0.044715 * x * x * x), th = tanh(u);
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

static float *inputs(kt_rng *r, size_t n)
{
    float *x = kt_rand(r, n, -6, 6);
    const float special[] = {0.0f, -0.0f, 1e-6f, -1e-6f, 12.0f, -12.0f, 40.0f, -40.0f, 3.0f};
    for (size_t i = 0; i < n && i < sizeof special / sizeof special[0]; i++)
        x[i] = special[i];
    return x;
}

Test(gelu, forward)
{
    kt_rng r = kt_seed(21);
    const size_t sizes[] = {1, 9, 31, 5000};
    for (size_t s = 0; s < 4; s++) {
        size_t n = sizes[s];
        float *x = inputs(&r, n), *y = kt_alloc(n);
        double *w = kt_dalloc(n);
        for (size_t i = 0; i < n; i++)
            w[i] = ref_gelu(x[i]);
        tsr_cpu_gelu_fwd(n, x, y);
        kt_assert_close("gelu_fwd", y, w, n, 2e-7, 2e-6);
        tsr_cpu_gelu_fwd(n, x, x); /* in place */
        kt_assert_close("gelu_fwd in place", x, w, n, 2e-7, 2e-6);
        free(x), free(y), free(w);
    }
}

Test(gelu, backward_formula_and_finite_differences)
{
    kt_rng r = kt_seed(22);
    const size_t sizes[] = {1, 9, 31, 5000};
    for (size_t s = 0; s < 4; s++) {
        size_t n = sizes[s];
        float *x = inputs(&r, n), *dout = kt_rand(&r, n, -1, 1), *dx = kt_alloc(n);
        double *w = kt_dalloc(n), *fd = kt_dalloc(n);
        for (size_t i = 0; i < n; i++) {
            w[i] = ref_gelu_grad(x[i]) * dout[i];
            double h = 1e-5 * (1.0 + fabs(x[i]));
            fd[i] = (ref_gelu(x[i] + h) - ref_gelu(x[i] - h)) / (2 * h) * dout[i];
        }
        /* the double reference itself must agree with finite differences */
        for (size_t i = 0; i < n; i++)
            cr_assert(fabs(w[i] - fd[i]) <= 1e-7 + 1e-6 * fabs(w[i]), "ref grad at x=%g", x[i]);
        tsr_cpu_gelu_bwd(n, x, dout, dx);
        kt_assert_close("gelu_bwd vs finite differences", dx, fd, n, 1e-6, 1e-5);
        tsr_cpu_gelu_bwd(n, x, dout, dout); /* dx aliases dout */
        kt_assert_close("gelu_bwd in place", dout, w, n, 1e-6, 1e-5);
        free(x), free(dout), free(dx), free(w), free(fd);
    }
}

/* A dense sweep of [-10, 10] (2^21 + 1 points) through the vectorized
 * kernels: the maximum error against double, logged, within the bounds the
 * sigmoid form gives (sigmoid within 2 ulp; forward 2e-7 absolute + 2e-6
 * relative, backward 1e-6 + 1e-5 as above). */
Test(gelu, dense_sweep_max_error)
{
    const size_t n = (1u << 21) + 1;
    float *x = kt_alloc(n), *y = kt_alloc(n), *ones = kt_alloc(n), *dx = kt_alloc(n);
    double *w = kt_dalloc(n), *wg = kt_dalloc(n);
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)(-10.0 + 20.0 * (double)i / (double)(n - 1));
        ones[i] = 1.0f;
        w[i] = ref_gelu(x[i]);
        wg[i] = ref_gelu_grad(x[i]);
    }
    tsr_cpu_gelu_fwd(n, x, y);
    tsr_cpu_gelu_bwd(n, x, ones, dx);
    /* absolute errors, and relative ones where the value is not near 0 */
    double ea = 0, er = 0, ga = 0, gr = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(y[i] - w[i]), g = fabs(dx[i] - wg[i]);
        ea = fmax(ea, e), ga = fmax(ga, g);
        if (fabs(w[i]) >= 1e-3)
            er = fmax(er, e / fabs(w[i]));
        if (fabs(wg[i]) >= 1e-3)
            gr = fmax(gr, g / fabs(wg[i]));
    }
    cr_log_info("gelu on [-10, 10]: forward max abs error %.3g, relative %.3g (|gelu| >= 1e-3); "
                "backward %.3g, %.3g", ea, er, ga, gr);
    kt_assert_close("gelu_fwd sweep", y, w, n, 2e-7, 2e-6);
    kt_assert_close("gelu_bwd sweep", dx, wg, n, 1e-6, 1e-5);
    free(x), free(y), free(ones), free(dx), free(w), free(wg);
}
