/* Elementwise and broadcast kernels against double loops; outputs poisoned;
 * sum_axis checked as the finite-difference gradient of bias_add. */
#include "kernels/elementwise.h"
#include "kt_util.h"

static const size_t sizes[] = {1, 3, 8, 17, 1000, 4099};

Test(elementwise, fill_copy_scale_axpy_add)
{
    kt_rng r = kt_seed(11);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        float *x = kt_rand(&r, n, -2, 2), *y = kt_rand(&r, n, -2, 2), *z = kt_alloc(n);
        double *w = kt_dalloc(n);

        tsr_cpu_fill(n, 1.25f, z);
        for (size_t i = 0; i < n; i++)
            w[i] = 1.25;
        kt_assert_close("fill", z, w, n, 0, 0);

        kt_poison(z, n);
        tsr_cpu_copy(n, x, z);
        for (size_t i = 0; i < n; i++)
            w[i] = x[i];
        kt_assert_close("copy", z, w, n, 0, 0);

        kt_poison(z, n);
        tsr_cpu_scale(n, -0.75f, x, z);
        for (size_t i = 0; i < n; i++)
            w[i] = -0.75 * x[i];
        kt_assert_close("scale", z, w, n, 1e-7, 1e-7);
        tsr_cpu_scale(n, 2.0f, z, z); /* in place */
        for (size_t i = 0; i < n; i++)
            w[i] *= 2.0;
        kt_assert_close("scale in place", z, w, n, 1e-7, 1e-7);

        float *yy = kt_dup(y, n);
        tsr_cpu_axpy(n, 0.3f, x, yy);
        for (size_t i = 0; i < n; i++)
            w[i] = (double)y[i] + 0.3 * x[i];
        kt_assert_close("axpy", yy, w, n, 1e-6, 1e-6);

        kt_poison(z, n);
        tsr_cpu_add(n, x, y, z);
        for (size_t i = 0; i < n; i++)
            w[i] = (double)x[i] + y[i];
        kt_assert_close("add", z, w, n, 1e-6, 1e-7);
        tsr_cpu_add(n, x, yy, yy); /* z aliases y */
        for (size_t i = 0; i < n; i++)
            w[i] = (double)y[i] + 0.3 * x[i] + x[i];
        kt_assert_close("add aliased", yy, w, n, 1e-6, 1e-6);
        free(x), free(y), free(z), free(yy), free(w);
    }
}

static const int shapes[][3] = {{1, 1, 0}, {1, 7, 2}, {7, 1, 0}, {13, 11, 3}, {600, 5, 1}, {33, 70, 0}};

Test(elementwise, bias_add_both_axes_with_ld)
{
    kt_rng r = kt_seed(12);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int axis = 0; axis < 2; axis++) {
            int m = shapes[s][0], n = shapes[s][1], ld = m + shapes[s][2];
            size_t nx = (size_t)ld * n;
            float *x = kt_rand(&r, nx, -1, 1), *b = kt_rand(&r, axis ? n : m, -1, 1);
            double *w = kt_dalloc(nx);
            for (int j = 0; j < n; j++)
                for (int i = 0; i < ld; i++)
                    w[i + (size_t)j * ld] = x[i + (size_t)j * ld] + (i < m ? (axis ? b[j] : b[i]) : 0.0);
            tsr_cpu_bias_add(axis, m, n, b, x, ld);
            kt_assert_close("bias_add", x, w, nx, 1e-6, 1e-7);
            free(x), free(b), free(w);
        }
}

Test(elementwise, sum_axis_beta_zero_and_one)
{
    kt_rng r = kt_seed(13);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int axis = 0; axis < 2; axis++)
            for (int beta1 = 0; beta1 < 2; beta1++) {
                int m = shapes[s][0], n = shapes[s][1], ld = m + shapes[s][2];
                int ny = axis ? n : m;
                float *x = kt_rand(&r, (size_t)ld * n, -1, 1);
                for (int j = 0; j < n; j++) /* padding rows must not be summed */
                    for (int i = m; i < ld; i++)
                        x[i + (size_t)j * ld] = NAN;
                float *y = kt_rand(&r, ny, -1, 1);
                if (!beta1)
                    kt_poison(y, ny);
                double *w = kt_dalloc(ny);
                for (int j = 0; j < n; j++)
                    for (int i = 0; i < m; i++)
                        w[axis ? j : i] += 1.5 * x[i + (size_t)j * ld];
                for (int e = 0; e < ny; e++)
                    w[e] += beta1 ? y[e] : 0.0;
                tsr_cpu_sum_axis(axis, m, n, 1.5f, x, ld, beta1 ? 1.0f : 0.0f, y);
                kt_assert_close("sum_axis", y, w, ny, 1e-5, 1e-6);
                free(x), free(y), free(w);
            }
}

/* L(b) = sum_ij wt(i,j) * (x(i,j) + b[i or j]); dL/db = sum_axis(wt): check
 * the kernel against central differences of L in double */
Test(elementwise, sum_axis_is_bias_add_gradient_fd)
{
    kt_rng r = kt_seed(14);
    int m = 9, n = 6;
    for (int axis = 0; axis < 2; axis++) {
        int nb = axis ? n : m;
        float *wt = kt_rand(&r, (size_t)m * n, -1, 1), *x = kt_rand(&r, (size_t)m * n, -1, 1);
        double *b = kt_dalloc(nb), *fd = kt_dalloc(nb);
        float *g = kt_alloc(nb);
        for (int e = 0; e < nb; e++)
            b[e] = kt_unif(&r, -1, 1);
        for (int e = 0; e < nb; e++) {
            double lp = 0, lm = 0, h = 1e-6;
            for (int j = 0; j < n; j++)
                for (int i = 0; i < m; i++) {
                    int be = axis ? j : i;
                    double bp = b[be] + (be == e ? h : 0), bm = b[be] - (be == e ? h : 0);
                    lp += wt[i + j * m] * (x[i + j * m] + bp);
                    lm += wt[i + j * m] * (x[i + j * m] + bm);
                }
            fd[e] = (lp - lm) / (2 * h);
        }
        tsr_cpu_sum_axis(axis, m, n, 1.0f, wt, m, 0.0f, g);
        kt_assert_close("sum_axis vs finite differences", g, fd, nb, 1e-6, 1e-5);
        free(wt), free(x), free(b), free(fd), free(g);
    }
}
