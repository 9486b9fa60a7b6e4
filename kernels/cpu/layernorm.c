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

/* ---- row tiles (channel tiles): kernels/layernorm.h ---------------------- */

/* x: (M, T); mean: (T) or NULL; part: (T) — one token's column at a time */
TSR_CPU_CLONES void tsr_cpu_layernorm_part(int M, int T, const float *x, const float *mean,
                                           float *part)
{
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * M;
        if (!mean) { /* pass 1: the plain sum */
            part[t] = (float)tsr_vsum(xt, (size_t)M);
            continue;
        }
        /* pass 2: squared deviations from the whole column's mean */
        float mu = mean[t];
        float acc[TSR_VACC] = {0};
        int i = 0;
        for (; i + TSR_VACC <= M; i += TSR_VACC)
            for (int u = 0; u < TSR_VACC; u++) {
                float dv = xt[i + u] - mu;
                acc[u] += dv * dv;
            }
        float s = tsr_vfold(acc);
        for (; i < M; i++)
            s += (xt[i] - mu) * (xt[i] - mu);
        part[t] = s;
    }
}

/* dout, x: (M, T); gamma: (M); mean, rstd: (T); part: (2T) */
TSR_CPU_CLONES void tsr_cpu_layernorm_part_grad(int M, int T, const float *dout, const float *x,
                                                const float *gamma, const float *mean,
                                                const float *rstd, float *part)
{
    for (int t = 0; t < T; t++) {
        const float *dt = dout + (size_t)t * M, *xt = x + (size_t)t * M;
        float mu = mean[t], rs = rstd[t];
        float a[TSR_VACC] = {0}, b[TSR_VACC] = {0};
        int i = 0;
        for (; i + TSR_VACC <= M; i += TSR_VACC)
            for (int u = 0; u < TSR_VACC; u++) {
                float g = gamma[i + u] * dt[i + u];
                a[u] += g;
                b[u] += g * (xt[i + u] - mu) * rs;
            }
        float sa = tsr_vfold(a), sb = tsr_vfold(b);
        for (; i < M; i++) {
            float g = gamma[i] * dt[i];
            sa += g;
            sb += g * (xt[i] - mu) * rs;
        }
        part[t] = sa;
        part[T + t] = sb;
    }
}

/* acc: (n); parts: k arrays of (n), added in order */
void tsr_cpu_layernorm_combine(int n, int k, const float *const *parts, int init, int fin,
                               int C, float eps, float *acc)
{
    for (int i = 0; i < n; i++) {
        float s = init ? 0.0f : acc[i];
        for (int p = 0; p < k; p++)
            s += parts[p][i];
        if (fin == TSR_LN_FIN_MEAN)
            s = s / (float)C;
        else if (fin == TSR_LN_FIN_RSTD)
            s = 1.0f / sqrtf(s / (float)C + eps);
        acc[i] = s;
    }
}

/* x, out: (M, T); gamma, beta: (M); mean, rstd: (T) */
TSR_CPU_CLONES void tsr_cpu_layernorm_apply(int M, int T, const float *x, const float *gamma,
                                            const float *beta, const float *mean,
                                            const float *rstd, float *out)
{
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * M;
        float *ot = out + (size_t)t * M;
        float mu = mean[t], rs = rstd[t];
        for (int i = 0; i < M; i++)
            ot[i] = (xt[i] - mu) * rs * gamma[i] + beta[i];
    }
}

/* dout, x, dx: (M, T); gamma, dgamma, dbeta: (M); mean, rstd: (T); m2: (2T) */
TSR_CPU_CLONES void tsr_cpu_layernorm_apply_grad(int M, int T, const float *dout, const float *x,
                                                 const float *gamma, const float *mean,
                                                 const float *rstd, const float *m2,
                                                 float *restrict dx, float *restrict dgamma,
                                                 float *restrict dbeta)
{
    for (int t = 0; t < T; t++) {
        const float *dt = dout + (size_t)t * M, *xt = x + (size_t)t * M;
        float *dxt = dx + (size_t)t * M;
        float mu = mean[t], rs = rstd[t], ma = m2[t], mb = m2[T + t];
        for (int i = 0; i < M; i++) {
            float xhat = (xt[i] - mu) * rs;
            dgamma[i] += dt[i] * xhat;
            dbeta[i] += dt[i];
            dxt[i] += rs * (gamma[i] * dt[i] - ma - xhat * mb);
        }
    }
}
