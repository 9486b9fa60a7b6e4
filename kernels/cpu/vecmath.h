/* kernels/cpu/vecmath.h — internal helpers of the CPU kernels: an exp that
 * gcc -O3 vectorizes (glibc's expf is a call per element unless -ffast-math),
 * and reductions written with independent partial sums so that they vectorize
 * without reassociation flags.
 *
 * Must never: be included outside kernels/cpu, or depend on -ffast-math.
 */
#ifndef TSR_KERNELS_CPU_VECMATH_H
#define TSR_KERNELS_CPU_VECMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* The build targets baseline x86-64 (SSE2).  Kernels whose loops are bound by
 * arithmetic at that width get a second, AVX2+FMA-era (x86-64-v3) clone that
 * the loader picks at run time on CPUs that have it.  Both clones compute the
 * same values: ISO C mode keeps fp contraction off, and the reductions fix
 * their association in the source (TSR_VACC partial sums), not by width. */
#if defined(__GNUC__) && defined(__x86_64__) && defined(__ELF__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__)
#define TSR_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TSR_CPU_CLONES
#endif

/* exp(x) in fp32, relative error about 2 ulp for x in [-87.3, 88]; 0 below
 * -87.3 (so exp(-inf) = 0), +inf above 88, NaN stays NaN.  Cody-Waite range
 * reduction to r in [-ln2/2, ln2/2] and Cephes' polynomial.  The range
 * checks are bit masks on the pattern, not selects: gcc turns selects into
 * branches around float operations, which it may not if-convert under the
 * default -ftrapping-math, and then no loop calling this vectorizes. */
static inline float tsr_vexpf(float x)
{
    const uint32_t bits_hi = 0x42b00000u; /* 88.0f */
    const uint32_t bits_lo = 0x42ae999au; /* 87.3f (magnitude of the lower bound) */
    uint32_t ux;
    memcpy(&ux, &x, sizeof ux);
    uint32_t ax = ux & 0x7fffffffu, neg = ux >> 31;
    uint32_t negm = 0u - neg;                                  /* all ones if x < 0 */
    uint32_t bound = bits_hi ^ ((bits_hi ^ bits_lo) & negm);
    uint32_t outm = 0u - (uint32_t)(ax > bound);              /* outside the range, or NaN */
    uint32_t nanm = 0u - (uint32_t)(ax > 0x7f800000u);
    uint32_t uc = (outm & (bound | (neg << 31))) | (~outm & ux); /* clamped, same sign */
    float xc;
    memcpy(&xc, &uc, sizeof xc);
    /* n = round(x / ln2) by the 1.5*2^23 trick (exact for |n| < 2^22) */
    const float shifter = 12582912.0f;
    float t = xc * 1.44269504088896341f + shifter;
    float n = t - shifter;
    /* r = x - n ln2 with ln2 split in two (Cephes): n*0.693359375 is exact */
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
    int32_t e = (int32_t)n;
    uint32_t sbits = (uint32_t)(e + 127) << 23;
    float s;
    memcpy(&s, &sbits, sizeof s);
    float y = p * s;
    uint32_t uy;
    memcpy(&uy, &y, sizeof uy);
    uy = (outm & ~negm & 0x7f800000u) | (~outm & uy); /* +inf above, 0 below */
    uy = (nanm & (ux | 0x00400000u)) | (~nanm & uy);
    memcpy(&y, &uy, sizeof y);
    return y;
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
