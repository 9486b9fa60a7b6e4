/* CPU SwiGLU forward and backward over (F, T) tiles with leading dimensions. */
#include "kernels/swiglu.h"

#include <stddef.h>

#include "kernels/cpu/vecmath.h"

/* sigmoid(g) = 1 / (1 + exp(-g)) with the vectorizable exp: below g = -87
 * tsr_vexpf gives +inf and sigmoid is 0 exactly (true value under 1.7e-38),
 * above g = 87 it gives 0 and sigmoid is 1: finite g never gives a NaN. */
static inline float swiglu_sigmoid(float g)
{
    return 1.0f / (1.0f + tsr_vexpf(-g));
}

/* g, u, h: (F, T) with their leading dimensions */
TSR_CPU_CLONES void tsr_cpu_swiglu_fwd(int F, int T, const float *g, int ldg, const float *u,
                                       int ldu, float *h, int ldh)
{
    for (int t = 0; t < T; t++) {
        const float *gt = g + (size_t)t * ldg, *ut = u + (size_t)t * ldu;
        float *ht = h + (size_t)t * ldh;
        for (int i = 0; i < F; i++) {
            float gi = gt[i];
            ht[i] = gi * swiglu_sigmoid(gi) * ut[i];
        }
    }
}

/* g, u, dh, dg, du: (F, T) with their leading dimensions */
TSR_CPU_CLONES void tsr_cpu_swiglu_bwd(int F, int T, const float *g, int ldg, const float *u,
                                       int ldu, const float *dh, int ldh, float *restrict dg,
                                       int lddg, float *restrict du, int lddu)
{
    for (int t = 0; t < T; t++) {
        const float *gt = g + (size_t)t * ldg, *ut = u + (size_t)t * ldu;
        const float *dht = dh + (size_t)t * ldh;
        float *dgt = dg + (size_t)t * lddg, *dut = du + (size_t)t * lddu;
        for (int i = 0; i < F; i++) {
            float gi = gt[i], s = swiglu_sigmoid(gi), d = dht[i];
            /* s (1 + g (1 - s)): s = 0 exactly where g (1 - s) is huge */
            dgt[i] = d * ut[i] * (s * (1.0f + gi * (1.0f - s)));
            dut[i] = d * (gi * s);
        }
    }
}
