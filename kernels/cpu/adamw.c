/* CPU AdamW step and squared norm. */
#include "kernels/adamw.h"

#include <math.h>

#include "kernels/cpu/vecmath.h"

/* g, p, m, v: (n) */
TSR_CPU_CLONES void tsr_cpu_adamw(size_t n, int step, float lr, float beta1, float beta2, float eps,
                                  float weight_decay, float grad_scale, const float *restrict g,
                                  float *restrict p, float *restrict m, float *restrict v)
{
    /* bias corrections in double: 1 - beta^step loses digits in fp32 */
    float rbc1 = (float)(1.0 / (1.0 - pow((double)beta1, (double)step)));
    float rbc2 = (float)(1.0 / (1.0 - pow((double)beta2, (double)step)));
    for (size_t i = 0; i < n; i++) {
        float gi = grad_scale * g[i];
        float mi = beta1 * m[i] + (1.0f - beta1) * gi;
        float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        float mhat = mi * rbc1, vhat = vi * rbc2;
        p[i] -= lr * (mhat / (tsr_vsqrtf(vhat) + eps) + weight_decay * p[i]);
        m[i] = mi;
        v[i] = vi;
    }
}

/* x: (n), acc: (1) */
TSR_CPU_CLONES void tsr_cpu_sumsq(size_t n, const float *x, float *acc)
{
    acc[0] = (float)((double)acc[0] + tsr_vdot(x, x, n));
}
