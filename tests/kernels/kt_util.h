/* tests/kernels/kt_util.h — helpers shared by the kernel tests: a seeded
 * random generator, NaN-poisoned buffers, closeness checks against double
 * references, and the device probe for CUDA tests.
 *
 * Must never: call the code under test (references stay independent).
 */
#ifndef TSR_TESTS_KERNELS_KT_UTIL_H
#define TSR_TESTS_KERNELS_KT_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* splitmix64: fixed seeds keep failures reproducible; TSR_TEST_SEED varies them */
typedef struct {
    uint64_t s;
} kt_rng;

static inline kt_rng kt_seed(uint64_t salt)
{
    const char *env = getenv("TSR_TEST_SEED");
    uint64_t base = env ? strtoull(env, NULL, 0) : 0x7e55e4aULL;
    kt_rng r = {base * 0x9e3779b97f4a7c15ULL + salt};
    return r;
}

static inline uint64_t kt_next(kt_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* uniform in [lo, hi) */
static inline float kt_unif(kt_rng *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)((double)(kt_next(r) >> 11) * 0x1.0p-53);
}

static inline int kt_randint(kt_rng *r, int lo, int hi_excl)
{
    return lo + (int)(kt_next(r) % (uint64_t)(hi_excl - lo));
}

static inline float *kt_alloc(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    cr_assert_not_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = NAN;
    return p;
}

static inline double *kt_dalloc(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof(double));
    cr_assert_not_null(p);
    return p;
}

static inline void kt_poison(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = NAN;
}

static inline float *kt_rand(kt_rng *r, size_t n, float lo, float hi)
{
    float *p = kt_alloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = kt_unif(r, lo, hi);
    return p;
}

static inline float *kt_dup(const float *x, size_t n)
{
    float *p = kt_alloc(n);
    memcpy(p, x, n * sizeof(float));
    return p;
}

/* Number of elements with |got - want| > atol + rtol |want| (NaN counts as
 * wrong; matching infinities are right); reports the worst one. */
static inline size_t kt_count_bad(const char *what, const float *got, const double *want,
                                  size_t n, double atol, double rtol)
{
    size_t bad = 0, worst = 0;
    double worst_excess = -1.0;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        if (isinf(w) && g == w)
            continue;
        double err = fabs(g - w), tol = atol + rtol * fabs(w);
        if (!(err <= tol)) {
            bad++;
            double excess = isnan(err) ? INFINITY : err - tol;
            if (excess > worst_excess) {
                worst_excess = excess;
                worst = i;
            }
        }
    }
    if (bad)
        cr_log_error("%s: %zu of %zu wrong; worst [%zu] got %.9g want %.9g (atol %g rtol %g)",
                     what, bad, n, worst, (double)got[worst], want[worst], atol, rtol);
    return bad;
}

#define kt_assert_close(what, got, want, n, atol, rtol)                                   \
    cr_assert_eq(kt_count_bad((what), (got), (want), (n), (atol), (rtol)), 0,             \
                 "%s differs from the double reference", (what))

/* Same check between two float arrays (CUDA result vs CPU kernel). */
static inline size_t kt_count_bad_f(const char *what, const float *got, const float *want,
                                    size_t n, double atol, double rtol)
{
    double *w = kt_dalloc(n);
    for (size_t i = 0; i < n; i++)
        w[i] = want[i];
    size_t bad = kt_count_bad(what, got, w, n, atol, rtol);
    free(w);
    return bad;
}

#define kt_assert_close_f(what, got, want, n, atol, rtol)                                 \
    cr_assert_eq(kt_count_bad_f((what), (got), (want), (n), (atol), (rtol)), 0,           \
                 "%s differs from the CPU kernel", (what))

/* Max |x| over a double array, to scale absolute tolerances. */
static inline double kt_dmaxabs(const double *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

/* ---- bf16 in the tests, independent of kernels/convert.h ---------------- */

/* The float whose bit pattern is u. */
static inline float kt_f32_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The value of bf16 pattern h (the high half of an fp32). */
static inline float kt_bf16_value(uint16_t h)
{
    return kt_f32_of((uint32_t)h << 16);
}

/* f rounded to bf16 by the definition: of truncation and truncation + 1 ulp
 * (same sign), the nearer in double — rounding past the largest finite value
 * goes to 2^128, IEEE's overflow threshold — the even pattern on a tie;
 * infinities stay; any NaN gives 0xffff (tests check NaN apart). */
static inline uint16_t kt_bf16_round(float f)
{
    if (isnan(f))
        return 0xffff;
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    if ((lo & 0x7f80) == 0x7f80) /* already inf */
        return lo;
    double dl = fabs((double)f - (double)kt_bf16_value(lo));
    double vh = (hi & 0x7fff) == 0x7f80 ? copysign(ldexp(1.0, 128), f) : kt_bf16_value(hi);
    double dh = fabs((double)f - vh);
    if (dl != dh)
        return dl < dh ? lo : hi;
    return (lo & 1) ? hi : lo;
}

#endif
