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

/* exp(x) in fp32, relative error about 2 ulp for x in [-87.3, 88]; 0 below
 * -87.3 (so exp(-inf) = 0), +inf above 88, NaN stays NaN.  Cody-Waite range
 * reduction to r in [-ln2/2, ln2/2] and Cephes' polynomial; no branches. */
static inline float tsr_vexpf(float x)
{
    const float hi = 88.0f, lo = -87.3f;
    float xc = x > hi ? hi : x;
    xc = xc < lo ? lo : xc;
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
    int32_t bits = (e + 127) << 23;
    float s;
    memcpy(&s, &bits, sizeof s);
    float y = p * s;
    y = x < lo ? 0.0f : y;
    y = x > hi ? INFINITY : y;
    y = x != x ? x : y;
    return y;
}

/* sum_i x[i] with 8 partial sums (vectorizes), carried into double every
 * 256 elements so long tiles keep fp32-level relative accuracy. */
static inline double tsr_vsum(const float *x, size_t n)
{
    double total = 0.0;
    size_t i = 0;
    while (i < n) {
        size_t end = n - i > 256 ? i + 256 : n;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (; i + 8 <= end; i += 8)
            for (int u = 0; u < 8; u++)
                acc[u] += x[i + u];
        float tail = 0.0f;
        for (; i < end; i++)
            tail += x[i];
        total += (double)((acc[0] + acc[4]) + (acc[1] + acc[5]) + (acc[2] + acc[6]) +
                          (acc[3] + acc[7]) + tail);
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
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (; i + 8 <= end; i += 8)
            for (int u = 0; u < 8; u++)
                acc[u] += x[i + u] * y[i + u];
        float tail = 0.0f;
        for (; i < end; i++)
            tail += x[i] * y[i];
        total += (double)((acc[0] + acc[4]) + (acc[1] + acc[5]) + (acc[2] + acc[6]) +
                          (acc[3] + acc[7]) + tail);
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

/* max_i x[i], n >= 1 (NaN-agnostic). */
static inline float tsr_vmax(const float *x, size_t n)
{
    float acc[8];
    for (int u = 0; u < 8; u++)
        acc[u] = -INFINITY;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int u = 0; u < 8; u++)
            acc[u] = x[i + u] > acc[u] ? x[i + u] : acc[u];
    float mx = -INFINITY;
    for (int u = 0; u < 8; u++)
        mx = acc[u] > mx ? acc[u] : mx;
    for (; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    return mx;
}

#endif
