/* kernels/cpu/vecmath.h — internal helpers of the CPU kernels: an exp that
 * gcc -O3 vectorizes (glibc's expf is a call per element unless -ffast-math),
 * and reductions written with independent partial sums so that they vectorize
 * without reassociation flags.
 *
 * Must never: be included outside kernels/cpu and their tests
 * (tests/kernels/test_vecmath.c measures the approximations), or depend on
 * -ffast-math.
 */
#ifndef TSR_KERNELS_CPU_VECMATH_H
#define TSR_KERNELS_CPU_VECMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* The build targets baseline x86-64 (SSE2).  Kernels whose loops are bound by
 * arithmetic at that width get AVX2+FMA-era (x86-64-v3) and AVX-512
 * (x86-64-v4) clones that the loader picks at run time on CPUs that have
 * them (v4 measured faster on Sapphire Rapids: attention 1.3x, the exp-bound
 * loops 1.1-1.5x; docs/kernels.md).  All clones compute the same values: ISO C
 * mode keeps fp contraction off (no FMA), and every reduction fixes its
 * association in the source (TSR_VACC partial sums, sums over a fixed index
 * order), not by vector width.  A helper called from a clone must be inlined
 * into it (static inline, always_inline where gcc might not): an out-of-line
 * static function is compiled for the baseline only. */
#ifndef TSR_CPU_CLONES /* tests/kernels/clones_*.c compile one target each */
#if defined(__GNUC__) && defined(__x86_64__) && defined(__ELF__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__)
#define TSR_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TSR_CPU_CLONES
#endif
#endif

/* The exponentials.  Both reduce to r in [-ln2/2, ln2/2] by Cody-Waite
 * (n = round(x / ln2) by the 1.5*2^23 trick, ln2 split in two so that
 * n*0.693359375 is exact), evaluate Cephes' expf minimax polynomial, and scale
 * by 2^n built in the exponent bits.  Measured against double over every 8th
 * float of [-87, 87] (tests/kernels/test_vecmath.c): max relative error
 * 8.1e-8 = 1.36 * 2^-24 (1.4 ulp).  Range limits are integer operations on
 * the bit pattern (signed compares and min: AVX2 has no unsigned ones), not
 * float selects: gcc turns selects into branches around float operations,
 * which it may not if-convert under the default -ftrapping-math, and then no
 * loop calling them vectorizes. */

/* exp(x) for xc with |xc| <= 87 (the caller clamps): the shared core */
static inline float tsr_vexpf_core(float xc)
{
    const float shifter = 12582912.0f; /* 1.5 * 2^23 */
    float t = xc * 1.44269504088896341f + shifter;
    float n = t - shifter;
    float r = xc - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float z = r * r;
    float p = 1.9875691500e-4f; /* Cephes expf minimax polynomial */
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * z + r + 1.0f;
    /* 2^n: n is the low bits of t's pattern (t = 1.5*2^23 + n exactly) */
    uint32_t tb;
    memcpy(&tb, &t, sizeof tb);
    uint32_t sbits = (tb - 0x4b400000u + 127u) << 23;
    float s;
    memcpy(&s, &sbits, sizeof s);
    return p * s;
}

/* |x| clamped to 87 (exp(87) = 6.1e37, exp(-87) = 1.6e-38 stay normal),
 * with the sign kept; a NaN becomes +-87 */
static inline float tsr_vclamp87(float x, int32_t *sax)
{
    uint32_t ux;
    memcpy(&ux, &x, sizeof ux);
    int32_t ax = (int32_t)(ux & 0x7fffffffu);
    *sax = ax;
    uint32_t uc = (uint32_t)(ax < 0x42ae0000 ? ax : 0x42ae0000) | (ux & 0x80000000u);
    float xc;
    memcpy(&xc, &uc, sizeof xc);
    return xc;
}

/* exp(x) in fp32: 1.4 ulp for |x| <= 87; 0 below -87 (so exp(-inf) = 0),
 * +inf above 87 (exp(88.7) is the largest float: the few finite values
 * between are given up for a cheaper range check), NaN stays NaN. */
static inline float tsr_vexpf(float x)
{
    int32_t ax;
    float y = tsr_vexpf_core(tsr_vclamp87(x, &ax));
    uint32_t ux, uy;
    memcpy(&ux, &x, sizeof ux);
    memcpy(&uy, &y, sizeof uy);
    uint32_t outm = 0u - (uint32_t)(ax > 0x42ae0000);       /* |x| > 87, inf or NaN */
    uint32_t posm = 0u - (uint32_t)((int32_t)ux >= 0);
    uint32_t nanm = 0u - (uint32_t)(ax > 0x7f800000);
    uy = (~outm & uy) | (outm & posm & 0x7f800000u); /* +inf above, 0 below */
    uy = (nanm & (ux | 0x00400000u)) | (~nanm & uy);  /* NaN stays (quiet) */
    memcpy(&y, &uy, sizeof y);
    return y;
}

/* exp(x) with |x| clamped to 87: 1.4 ulp for |x| <= 87, exp(+-87) beyond,
 * and a NaN gives a finite value.  For callers whose result does not depend
 * on the tails (a sigmoid: 1 / (1 + exp(87)) is 1.6e-38, not 0) and that
 * carry NaN through another operand (GELU multiplies by x).  A fifth cheaper
 * than tsr_vexpf. */
static inline float tsr_vexpf_clamped(float x)
{
    int32_t ax;
    return tsr_vexpf_core(tsr_vclamp87(x, &ax));
}

/* bf16(x) rounded to nearest even, in integer arithmetic (vectorizes), as
 * kernels/convert.h: add 0x7fff plus the lowest kept bit, so that ties go to
 * the even result; a NaN keeps its sign and payload top with the quiet bit
 * forced (a bit mask, not a select, so that loops calling it vectorize). */
static inline uint16_t tsr_bf16_rne(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t nanm = 0u - (uint32_t)((u & 0x7fffffffu) > 0x7f800000u);
    return (uint16_t)((nanm & ((u >> 16) | 0x40u)) | (~nanm & rounded));
}

/* sqrt(x) for finite x >= 0 without libm: sqrtf carries an errno branch
 * (default -fmath-errno) that stops vectorization.  1/sqrt from the bit
 * trick (3.4% error), three Newton steps (error below 1e-7 relative), then
 * x * (1/sqrt(x)); exact 0 for x = 0. */
static inline float tsr_vsqrtf(float x)
{
    uint32_t ux;
    memcpy(&ux, &x, sizeof ux);
    uint32_t ur = 0x5f375a86u - (ux >> 1);
    float r;
    memcpy(&r, &ur, sizeof r);
    float hx = 0.5f * x;
    r = r * (1.5f - hx * r * r);
    r = r * (1.5f - hx * r * r);
    r = r * (1.5f - hx * r * r);
    return x * r;
}

/* sum_i x[i] with TSR_VACC partial sums (vectorizes into several independent
 * vector accumulators: one add chain is latency-bound far below memory
 * bandwidth), carried into double every 256 elements so long tiles keep
 * fp32-level relative accuracy. */
#define TSR_VACC 32
/* pairwise sum of the TSR_VACC partial sums */
static inline float tsr_vfold(float *acc)
{
    for (int w = TSR_VACC / 2; w > 0; w /= 2)
        for (int u = 0; u < w; u++)
            acc[u] += acc[u + w];
    return acc[0];
}

static inline double tsr_vsum(const float *x, size_t n)
{
    double total = 0.0;
    size_t i = 0;
    while (i < n) {
        size_t end = n - i > 256 ? i + 256 : n;
        float acc[TSR_VACC] = {0};
        for (; i + TSR_VACC <= end; i += TSR_VACC)
            for (int u = 0; u < TSR_VACC; u++)
                acc[u] += x[i + u];
        float tail = 0.0f;
        for (; i < end; i++)
            tail += x[i];
        total += (double)tsr_vfold(acc) + tail;
    }
    return total;
}

/* sum_i x[i] * y[i], same scheme as tsr_vsum. */
static inline double tsr_vdot(const float *x, const float *y, size_t n)
{
    double total = 0.0;
    size_t i = 0;
    while (i < n) {
        size_t end = n - i > 256 ? i + 256 : n;
        float acc[TSR_VACC] = {0};
        for (; i + TSR_VACC <= end; i += TSR_VACC)
            for (int u = 0; u < TSR_VACC; u++)
                acc[u] += x[i + u] * y[i + u];
        float tail = 0.0f;
        for (; i < end; i++)
            tail += x[i] * y[i];
        total += (double)tsr_vfold(acc) + tail;
    }
    return total;
}

/* fp32 dot product for short vectors (attention's head dimension). */
static inline float tsr_vdotf(const float *x, const float *y, int n)
{
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int u = 0; u < 8; u++)
            acc[u] += x[i + u] * y[i + u];
    float tail = 0.0f;
    for (; i < n; i++)
        tail += x[i] * y[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

/* max_i x[i], n >= 1, for non-NaN x.  Compared as integers: the key
 * bits ^ ((bits >> 31) & 0x7fffffff) orders floats like signed ints, and an
 * integer max vectorizes where a float select does not (-ftrapping-math). */
static inline float tsr_vmax(const float *x, size_t n)
{
    int32_t acc[TSR_VACC];
    for (int u = 0; u < TSR_VACC; u++)
        acc[u] = INT32_MIN;
    size_t i = 0;
    for (; i + TSR_VACC <= n; i += TSR_VACC)
        for (int u = 0; u < TSR_VACC; u++) {
            int32_t b;
            memcpy(&b, &x[i + u], sizeof b);
            int32_t key = b ^ ((b >> 31) & 0x7fffffff);
            acc[u] = key > acc[u] ? key : acc[u];
        }
    int32_t mk = INT32_MIN;
    for (int u = 0; u < TSR_VACC; u++)
        mk = acc[u] > mk ? acc[u] : mk;
    for (; i < n; i++) {
        int32_t b;
        memcpy(&b, &x[i], sizeof b);
        int32_t key = b ^ ((b >> 31) & 0x7fffffff);
        mk = key > mk ? key : mk;
    }
    int32_t b = mk ^ ((mk >> 31) & 0x7fffffff); /* the map is its own inverse */
    float mx;
    memcpy(&mx, &b, sizeof mx);
    return mx;
}

#endif
