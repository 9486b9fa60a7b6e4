/* CPU AdamW step and squared norm.  The step is one pass over g, p, m, v
 * (28 bytes per parameter, 30 with the bf16 copy): it runs at memory
 * bandwidth, so its arithmetic (sqrt, division) needs no approximation. */
#include "kernels/adamw.h"

#include <math.h>

#include "kernels/cpu/vecmath.h"

/* The update of one parameter; the new p is returned, m and v updated. */
static inline __attribute__((always_inline)) float adam_one(float g, float *p, float *m,
                                                            float *v, float lr, float beta1,
                                                            float beta2, float eps, float wd,
                                                            float gs, float rbc1, float rbc2)
{
    float gi = gs * g;
    float mi = beta1 * *m + (1.0f - beta1) * gi;
    float vi = beta2 * *v + (1.0f - beta2) * gi * gi;
    float mhat = mi * rbc1, vhat = vi * rbc2;
    float pi = *p - lr * (mhat / (tsr_vsqrtf(vhat) + eps) + wd * *p);
    *m = mi;
    *v = vi;
    return pi;
}

/* g, p, m, v: (n); p_bf16: (n) or NULL; g zeroed when zero_g. Four loops
 * rather than tests per element: each stays a plain vectorisable stream. */
TSR_CPU_CLONES void tsr_cpu_adamw(size_t n, int step, float lr, float beta1, float beta2, float eps,
                                  float weight_decay, float grad_scale, float *restrict g,
                                  float *restrict p, float *restrict m, float *restrict v,
                                  uint16_t *restrict p_bf16, int zero_g)
{
    /* bias corrections in double: 1 - beta^step loses digits in fp32 */
    float rbc1 = (float)(1.0 / (1.0 - pow((double)beta1, (double)step)));
    float rbc2 = (float)(1.0 / (1.0 - pow((double)beta2, (double)step)));
#define ADAM_LOOP(store_bf16, consume)                                                  \
    for (size_t i = 0; i < n; i++) {                                                    \
        float pi = adam_one(g[i], &p[i], &m[i], &v[i], lr, beta1, beta2, eps,          \
                            weight_decay, grad_scale, rbc1, rbc2);                     \
        p[i] = pi;                                                                      \
        if (store_bf16)                                                                 \
            p_bf16[i] = tsr_bf16_rne(pi);                                               \
        if (consume)                                                                    \
            g[i] = 0.0f;                                                                \
    }
    if (!p_bf16 && !zero_g)
        ADAM_LOOP(0, 0)
    else if (!p_bf16)
        ADAM_LOOP(0, 1)
    else if (!zero_g)
        ADAM_LOOP(1, 0)
    else
        ADAM_LOOP(1, 1)
#undef ADAM_LOOP
}

/* x: (n), acc: (1) */
TSR_CPU_CLONES void tsr_cpu_sumsq(size_t n, const float *x, float *acc)
{
    acc[0] = (float)((double)acc[0] + tsr_vdot(x, x, n));
}
