/* The CPU kernels' vectorizable exponentials (kernels/cpu/vecmath.h) against
 * double over a dense sweep of their input range: every 61st fp32 pattern of
 * [-87, 87] (about 37 million inputs, all exponents and mantissa residues),
 * in vector-sized batches through a loop gcc vectorizes, as in the kernels.
 * Their stated bound is 1.4 ulp (8.1e-8 relative, measured on every 8th
 * pattern); asserted: 1.5 * 2^-24.  Then the limits: 0 below -87 and at
 * -inf, +inf above 87, NaN kept; the clamped form saturates.  And the bf16
 * rounding of the AdamW copy on ties and specials. */
#include "kernels/cpu/vecmath.h"
#include "kt_util.h"

enum { BATCH = 4096 };

static void vexp_batch(int n, const float *x, float *y)
{
    for (int i = 0; i < n; i++)
        y[i] = tsr_vexpf(x[i]);
}

static void vexp_clamped_batch(int n, const float *x, float *y)
{
    for (int i = 0; i < n; i++)
        y[i] = tsr_vexpf_clamped(x[i]);
}

/* max relative error against double exp over the sweep, and where */
static double sweep(void (*fn)(int, const float *, float *), float *worst)
{
    static float x[BATCH], y[BATCH];
    double maxrel = 0.0;
    int n = 0;
    const uint32_t top = 0x42ae0000u; /* 87.0f */
    for (int sign = 0; sign < 2; sign++)
        for (uint32_t u = 0; u <= top; u += 61) {
            uint32_t bits = u | (sign ? 0x80000000u : 0u);
            memcpy(&x[n], &bits, 4);
            if (++n == BATCH || u + 61 > top) {
                fn(n, x, y);
                for (int i = 0; i < n; i++) {
                    double want = exp((double)x[i]);
                    double rel = fabs((double)y[i] - want) / want;
                    if (!(rel <= maxrel)) {
                        maxrel = rel;
                        *worst = x[i];
                    }
                }
                n = 0;
            }
        }
    return maxrel;
}

Test(vecmath, exp_max_error_over_the_range)
{
    float worst = 0;
    double e = sweep(vexp_batch, &worst);
    cr_log_info("tsr_vexpf: max relative error %.3g (%.2f x 2^-24) at x = %.9g", e,
                e / 0x1p-24, (double)worst);
    cr_assert(e <= 1.5 * 0x1p-24, "tsr_vexpf: relative error %g at x = %.9g", e, (double)worst);
    e = sweep(vexp_clamped_batch, &worst);
    cr_log_info("tsr_vexpf_clamped: max relative error %.3g (%.2f x 2^-24) at x = %.9g", e,
                e / 0x1p-24, (double)worst);
    cr_assert(e <= 1.5 * 0x1p-24, "tsr_vexpf_clamped: relative error %g at x = %.9g", e,
              (double)worst);
}

Test(vecmath, exp_limits)
{
    const float x[] = {0.0f, -0.0f, 1.0f, -87.0f, 87.0f, -87.01f, 87.01f, -100.0f, 100.0f,
                       -INFINITY, INFINITY, NAN, -NAN};
    enum { N = sizeof x / sizeof x[0] };
    float y[N], c[N];
    vexp_batch(N, x, y);
    vexp_clamped_batch(N, x, c);
    cr_assert_eq(y[0], 1.0f, "exp(0) = %.9g", (double)y[0]); /* r = 0, p = 1, 2^0 */
    cr_assert_eq(y[1], 1.0f, "exp(-0) = %.9g", (double)y[1]);
    cr_assert(fabs(y[2] - M_E) <= 1.5 * 0x1p-24 * M_E, "exp(1) = %.9g", (double)y[2]);
    cr_assert(fabs(y[3] - exp(-87.0)) <= 1.5 * 0x1p-24 * exp(-87.0), "exp(-87) = %g", (double)y[3]);
    cr_assert(fabs(y[4] - exp(87.0)) <= 1.5 * 0x1p-24 * exp(87.0), "exp(87) = %g", (double)y[4]);
    for (int i = 5; i < 11; i++) {
        int below = x[i] < 0;
        cr_assert_eq(y[i], below ? 0.0f : INFINITY, "exp(%g) = %g", (double)x[i], (double)y[i]);
        /* the clamped form saturates at exp(+-87) */
        cr_assert_eq(c[i], below ? c[3] : c[4], "clamped exp(%g) = %g", (double)x[i],
                     (double)c[i]);
    }
    cr_assert(isnan(y[11]) && isnan(y[12]), "exp(NaN) = %g, %g", (double)y[11], (double)y[12]);
    cr_assert(isfinite(c[11]), "clamped exp(NaN) is finite by contract: %g", (double)c[11]);
}

/* bf16 rounding: hand-rounded patterns (0x3f808000 is halfway between 0x3f80
 * and 0x3f81: even 0x3f80; 0x3f818000: 0x3f82), overflow to inf, NaN quiet */
Test(vecmath, bf16_round_to_nearest_even)
{
    const uint32_t in[] = {0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu, 0x7f7fffffu,
                           0x7f800000u, 0xff800000u, 0x7fa00001u, 0x80000000u, 0x00018000u};
    const uint16_t want[] = {0x3f80, 0x3f82, 0x3f81, 0x3f80, 0x7f80,
                             0x7f80, 0xff80, 0x7fe0, 0x8000, 0x0002};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        float f;
        memcpy(&f, &in[i], 4);
        uint16_t got = tsr_bf16_rne(f);
        cr_assert_eq(got, want[i], "bf16(0x%08x) = 0x%04x, want 0x%04x", in[i], got, want[i]);
    }
}
