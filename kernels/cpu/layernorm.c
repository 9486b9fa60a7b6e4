/* CPU LayerNorm over the feature axis of (C, T) tiles, one token (column) at a
 * time: the column stays in L1 between its reduction and its update, so each
 * kernel reads the tile from memory once. */
#include "kernels/layernorm.h"

#include <math.h>

#include "kernels/cpu/vecmath.h"

/* x, out: (C, T); gamma, beta: (C); mean, rstd: (T) */
TSR_CPU_CLONES void tsr_cpu_layernorm_fwd(int C, int T, const float *x, const float *gamma,
                           const float *beta, float eps, float *out, float *mean, float *rstd)
{
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * C;
        float *ot = out + (size_t)t * C;
        float mu = (float)(tsr_vsum(xt, (size_t)C) / C);
        /* variance as mean of squared deviations: no cancellation */
        float acc[TSR_VACC] = {0};
        int i = 0;
        for (; i + TSR_VACC <= C; i += TSR_VACC)
            for (int u = 0; u < TSR_VACC; u++) {
                float dv = xt[i + u] - mu;
                acc[u] += dv * dv;
            }
        float var = tsr_vfold(acc);
        for (; i < C; i++)
            var += (xt[i] - mu) * (xt[i] - mu);
        var /= (float)C;
        float rs = 1.0f / sqrtf(var + eps);
        for (int c = 0; c < C; c++)
            ot[c] = (xt[c] - mu) * rs * gamma[c] + beta[c];
        mean[t] = mu;
        rstd[t] = rs;
    }
}

/* dout, x, dx: (C, T); gamma, dgamma, dbeta: (C); mean, rstd: (T) */
TSR_CPU_CLONES void tsr_cpu_layernorm_bwd(int C, int T, const float *dout, const float *x,
                           const float *gamma, const float *mean, const float *rstd,
                           float *restrict dx, float *restrict dgamma, float *restrict dbeta)
{
    for (int t = 0; t < T; t++) {
        const float *dt = dout + (size_t)t * C;
        const float *xt = x + (size_t)t * C;
        float *dxt = dx + (size_t)t * C;
        float mu = mean[t], rs = rstd[t];
        /* the two reductions of the chain rule through mean and variance */
        float a[TSR_VACC] = {0}, b[TSR_VACC] = {0};
        int i = 0;
        for (; i + TSR_VACC <= C; i += TSR_VACC)
            for (int u = 0; u < TSR_VACC; u++) {
                float g = gamma[i + u] * dt[i + u];
                a[u] += g;
                b[u] += g * (xt[i + u] - mu) * rs;
            }
        float sa = tsr_vfold(a);
        float sb = tsr_vfold(b);
        for (; i < C; i++) {
            float g = gamma[i] * dt[i];
            sa += g;
            sb += g * (xt[i] - mu) * rs;
        }
        float ma = sa / (float)C, mb = sb / (float)C;
        for (int c = 0; c < C; c++) {
            float xhat = (xt[c] - mu) * rs;
            dgamma[c] += dt[c] * xhat;
            dbeta[c] += dt[c];
            dxt[c] += rs * (gamma[c] * dt[c] - ma - xhat * mb);
        }
    }
}
