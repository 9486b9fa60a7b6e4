/* maxsumexp over several tiles of a column (accumulate), merge of partial
 * states (including empty ones) and logsumexp, against double loops;
 * inputs include large magnitudes (overflow without max subtraction) and
 * -inf (masked) entries. */
#include "kernels/softmax.h"
#include "kt_util.h"

/* log sum_i exp(x(i, j)) over rows [0, m) in double */
static double ref_lse(int m, const float *xj)
{
    double mx = -INFINITY;
    for (int i = 0; i < m; i++)
        mx = xj[i] > mx ? xj[i] : mx;
    if (mx == -INFINITY)
        return -INFINITY;
    double s = 0;
    for (int i = 0; i < m; i++)
        s += exp(xj[i] - mx);
    return mx + log(s);
}

static void fill_col(kt_rng *r, float *x, int m, int ld, int n, float scale)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < ld; i++)
            x[i + (size_t)j * ld] = i < m ? scale * kt_unif(r, -1, 1) : NAN;
}

Test(softmax, maxsumexp_tiles_accumulate_then_logsumexp)
{
    kt_rng r = kt_seed(41);
    const int ms_[] = {1, 2, 7, 37, 300};
    const int ns_[] = {1, 3, 5};
    const float scales[] = {1.0f, 300.0f};
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 3; b++)
            for (int sc = 0; sc < 2; sc++) {
                int m = ms_[a], n = ns_[b], ld = m + 2;
                float *x = kt_alloc((size_t)ld * n);
                fill_col(&r, x, m, ld, n, scales[sc]);
                if (m > 3)
                    x[1] = -INFINITY; /* a masked entry in column 0 */
                /* cut the rows into tiles of 3 and accumulate their states */
                float *state = kt_alloc(2 * (size_t)n), *lse = kt_alloc(n);
                for (int i0 = 0; i0 < m; i0 += 3) {
                    int mb = m - i0 < 3 ? m - i0 : 3;
                    tsr_cpu_maxsumexp(mb, n, x + i0, ld, state, i0 > 0);
                }
                tsr_cpu_logsumexp(n, state, lse);
                double *want = kt_dalloc(n), *wmax = kt_dalloc(n);
                float *gmax = kt_alloc(n);
                for (int j = 0; j < n; j++) {
                    want[j] = ref_lse(m, x + (size_t)j * ld);
                    double mx = -INFINITY;
                    for (int i = 0; i < m; i++)
                        mx = x[i + (size_t)j * ld] > mx ? x[i + (size_t)j * ld] : mx;
                    wmax[j] = mx;
                    gmax[j] = state[2 * j];
                }
                kt_assert_close("running max", gmax, wmax, n, 0, 0);
                kt_assert_close("logsumexp over tiles", lse, want, n, 2e-6 * scales[sc], 2e-6);
                free(x), free(state), free(lse), free(want), free(wmax), free(gmax);
            }
}

Test(softmax, merge_partial_and_empty_states)
{
    kt_rng r = kt_seed(42);
    int m = 23, n = 6, split = 9;
    float *x = kt_alloc((size_t)m * n);
    fill_col(&r, x, m, m, n, 20.0f);
    float *s1 = kt_alloc(2 * n), *s2 = kt_alloc(2 * n), *lse = kt_alloc(n);
    tsr_cpu_maxsumexp(split, n, x, m, s1, 0);
    tsr_cpu_maxsumexp(m - split, n, x + split, m, s2, 0);
    /* column 4: second part empty; column 5: first part empty */
    s2[2 * 4] = -INFINITY, s2[2 * 4 + 1] = 0;
    s1[2 * 5] = -INFINITY, s1[2 * 5 + 1] = 0;
    tsr_cpu_maxsumexp_merge(n, s2, s1);
    tsr_cpu_logsumexp(n, s1, lse);
    double *want = kt_dalloc(n);
    for (int j = 0; j < n; j++)
        want[j] = ref_lse(m, x + (size_t)j * m);
    want[4] = ref_lse(split, x + 4 * m);
    want[5] = ref_lse(m - split, x + 5 * m + split);
    kt_assert_close("merged logsumexp", lse, want, n, 1e-5, 2e-6);
    /* both empty stays empty: lse = -inf */
    float e1[2] = {-INFINITY, 0}, e2[2] = {-INFINITY, 0}, l1[1] = {NAN};
    tsr_cpu_maxsumexp_merge(1, e2, e1);
    tsr_cpu_logsumexp(1, e1, l1);
    cr_assert(e1[0] == -INFINITY && e1[1] == 0.0f && l1[0] == -INFINITY);
    free(x), free(s1), free(s2), free(lse), free(want);
}
