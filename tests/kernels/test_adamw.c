/* AdamW over several steps against a double reference of the PyTorch/llm.c
 * update (bias correction, decoupled weight decay, gradient scaling), and the
 * squared norm accumulated over tiles against double. */
#include "kernels/adamw.h"
#include "kt_util.h"

Test(adamw, several_steps_match_double)
{
    kt_rng r = kt_seed(71);
    const size_t sizes[] = {1, 7, 1031};
    for (int s = 0; s < 3; s++) {
        size_t n = sizes[s];
        float *p = kt_rand(&r, n, -1, 1), *m = kt_alloc(n), *v = kt_alloc(n);
        for (size_t i = 0; i < n; i++)
            m[i] = 0, v[i] = 0;
        double *pd = kt_dalloc(n), *md = kt_dalloc(n), *vd = kt_dalloc(n);
        for (size_t i = 0; i < n; i++)
            pd[i] = p[i];
        const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
        for (int step = 1; step <= 5; step++) {
            float gs = step == 3 ? 0.5f : 1.0f; /* one clipped step */
            float *g = kt_rand(&r, n, -1, 1);
            tsr_cpu_adamw(n, step, lr, b1, b2, eps, wd, gs, g, p, m, v);
            for (size_t i = 0; i < n; i++) {
                double gi = (double)gs * g[i];
                md[i] = (double)b1 * md[i] + (1 - (double)b1) * gi;
                vd[i] = (double)b2 * vd[i] + (1 - (double)b2) * gi * gi;
                double mh = md[i] / (1 - pow(b1, step)), vh = vd[i] / (1 - pow(b2, step));
                pd[i] -= lr * (mh / (sqrt(vh) + eps) + (double)wd * pd[i]);
            }
            free(g);
        }
        kt_assert_close("adamw p", p, pd, n, 1e-6, 1e-5);
        kt_assert_close("adamw m", m, md, n, 1e-7, 1e-5);
        kt_assert_close("adamw v", v, vd, n, 1e-8, 1e-5);
        free(p), free(m), free(v), free(pd), free(md), free(vd);
    }
}

/* a zero gradient on a zero state: only the decoupled decay moves p, and
 * nothing divides 0 by 0 */
Test(adamw, zero_gradient_and_state)
{
    float p[5] = {1, -2, 0, 3, 0.5f}, m[5] = {0}, v[5] = {0}, g[5] = {0};
    double want[5];
    for (int i = 0; i < 5; i++)
        want[i] = p[i] - 1e-2 * 0.1 * p[i];
    tsr_cpu_adamw(5, 1, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, 1.0f, g, p, m, v);
    kt_assert_close("adamw p, zero gradient", p, want, 5, 1e-7, 1e-6);
}

Test(adamw, sumsq_accumulates_over_tiles)
{
    kt_rng r = kt_seed(72);
    size_t n = 10007;
    float *x = kt_rand(&r, n, -3, 3);
    float acc[1] = {2.5f};
    double want = 2.5;
    for (size_t i = 0; i < n; i++)
        want += (double)x[i] * x[i];
    const size_t cuts[] = {0, 1, 8, 777, 10007};
    for (int c = 0; c < 4; c++)
        tsr_cpu_sumsq(cuts[c + 1] - cuts[c], x + cuts[c], acc);
    kt_assert_close("sumsq", acc, &want, 1, 0, 1e-6);
    free(x);
}
