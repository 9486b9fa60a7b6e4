/* fp32 <-> bf16: round to nearest even checked against a reference that picks
 * the nearer of the two neighbouring bf16 values in double; ties, NaN,
 * infinities, overflow to inf, subnormals; every bf16 pattern round-trips. */
#include "kernels/convert.h"
#include "kt_util.h"

Test(convert, round_to_nearest_even)
{
    kt_rng r = kt_seed(81);
    enum { N = 20000 };
    float *x = kt_alloc(N);
    uint16_t *y = malloc(sizeof(uint16_t) * N);
    const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu, 0x7f7fffffu,
                                0xff7fffffu, 0x7f7f8000u, 0x7f800000u, 0xff800000u, 0x00000001u,
                                0x80008000u, 0x00018000u, 0x0u, 0x80000000u, 0x7f7f7fffu};
    size_t ns = sizeof special / sizeof special[0];
    for (size_t i = 0; i < N; i++) {
        uint32_t u = (uint32_t)kt_next(&r);
        if ((u & 0x7f800000u) == 0x7f800000u)
            u &= 0xbfffffffu; /* keep NaN out of the random part */
        x[i] = i < ns ? kt_f32_of(special[i]) : kt_f32_of(u);
    }
    memset(y, 0xab, sizeof(uint16_t) * N);
    tsr_cpu_f32_to_bf16(N, x, y);
    for (size_t i = 0; i < N; i++) {
        uint16_t want = kt_bf16_round(x[i]);
        uint32_t u;
        memcpy(&u, &x[i], 4);
        cr_assert_eq(y[i], want, "bf16(%a = 0x%08x) = 0x%04x, want 0x%04x", (double)x[i], u,
                     y[i], want);
    }
    free(x), free(y);
}

Test(convert, nan_stays_nan_and_roundtrip)
{
    float nans[3] = {kt_f32_of(0x7fc00000u), kt_f32_of(0x7f800001u), kt_f32_of(0xff800100u)};
    uint16_t y[3];
    tsr_cpu_f32_to_bf16(3, nans, y);
    for (int i = 0; i < 3; i++)
        cr_assert((y[i] & 0x7f80) == 0x7f80 && (y[i] & 0x7f) != 0, "NaN became 0x%04x", y[i]);
    /* every bf16 pattern converts to fp32 exactly and back unchanged */
    uint16_t *all = malloc(sizeof(uint16_t) * 65536), *back = malloc(sizeof(uint16_t) * 65536);
    float *f = kt_alloc(65536);
    for (uint32_t i = 0; i < 65536; i++)
        all[i] = (uint16_t)i;
    tsr_cpu_bf16_to_f32(65536, all, f);
    tsr_cpu_f32_to_bf16(65536, f, back);
    for (uint32_t i = 0; i < 65536; i++) {
        uint32_t u;
        memcpy(&u, &f[i], 4);
        cr_assert_eq(u, i << 16, "bf16 0x%04x widened to 0x%08x", i, u);
        int is_nan = (i & 0x7f80) == 0x7f80 && (i & 0x7f);
        cr_assert(is_nan ? back[i] == (i | 0x40) : back[i] == i, "0x%04x -> 0x%04x", i, back[i]);
    }
    free(all), free(back), free(f);
}
