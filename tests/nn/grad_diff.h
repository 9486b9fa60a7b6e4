/* tests/nn/grad_diff.h — how far two models' gradients are apart: the
 * comparison the GPT-2 tests use where a reordering of order-free sums
 * (tilings, micro-batches, recomputation with several token tiles) makes
 * bitwise equality impossible.
 *
 * Never hide a failure here: every call is asserted.
 */
#ifndef TSR_TESTS_NN_GRAD_DIFF_H
#define TSR_TESTS_NN_GRAD_DIFF_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include <tessera/gpt2.h>

/* A part (TSR_GPT2_PARAM, _GRAD, …) of parameter `name`, read to a new
 * host array of *n floats. */
static inline float *gpt2_part(tsr_gpt2_t *m, const char *name, int which, size_t *n)
{
    cr_assert_eq(tsr_gpt2_get(m, name, which, NULL, n), TSR_OK, "%s", tsr_error_message());
    float *x = malloc(*n * sizeof *x);
    cr_assert_not_null(x);
    cr_assert_eq(tsr_gpt2_get(m, name, which, x, n), TSR_OK, "%s", tsr_error_message());
    return x;
}

/* max |a - b| / (max |b| + tiny), the worst over every parameter's gradient */
static inline double grad_rel_diff(tsr_gpt2_t *a, tsr_gpt2_t *b)
{
    double worst = 0;
    for (int i = 0; i < tsr_gpt2_param_count(a); i++) {
        const char *name = tsr_gpt2_param_name(a, i);
        size_t n, n2;
        float *ga = gpt2_part(a, name, TSR_GPT2_GRAD, &n);
        float *gb = gpt2_part(b, name, TSR_GPT2_GRAD, &n2);
        cr_assert_eq(n, n2);
        double mx = 1e-12, diff = 0;
        for (size_t k = 0; k < n; k++) {
            mx = fmax(mx, fabs(gb[k]));
            diff = fmax(diff, fabs((double)ga[k] - gb[k]));
        }
        worst = fmax(worst, diff / mx);
        free(ga);
        free(gb);
    }
    return worst;
}

/* The first nonzero gradient element (its parameter's name in *where and
 * its index), or -1: every gradient reads zero. */
static inline long first_nonzero_grad(tsr_gpt2_t *m, const char **where)
{
    for (int i = 0; i < tsr_gpt2_param_count(m); i++) {
        const char *name = tsr_gpt2_param_name(m, i);
        size_t n;
        float *g = gpt2_part(m, name, TSR_GPT2_GRAD, &n);
        long at = -1;
        for (size_t k = 0; k < n && at < 0; k++)
            if (g[k] != 0.0f)
                at = (long)k;
        free(g);
        if (at >= 0) {
            if (where)
                *where = name;
            return at;
        }
    }
    return -1;
}

#endif
