/* CPU RMSNorm over the feature axis of (C, T) tiles, one token (column) at a
 * time: the column stays in L1 between its reduction and its update, so each
 * kernel reads the tile from memory once. */
#include "kernels/rmsnorm.h"

#include <math.h>

#include "kernels/cpu/vecmath.h"

/* x, out: (C, T); w: (C); rstd: (T) */
TSR_CPU_CLONES void tsr_cpu_rmsnorm_fwd(int C, int T, const float *x, const float *w, float eps,
                                        float *out, float *rstd)
{
    for (int t = 0; t < T; t++) {
        const float *xt = x + (size_t)t * C;
        float *ot = out + (size_t)t * C;
        /* fp32 squares in TSR_VACC independent partial sums, folded pairwise
         * and carried every 256 features: no long serial add chain */
        float ms = (float)(tsr_vdot(xt, xt, (size_t)C) / C);
        float rs = 1.0f / sqrtf(ms + eps);
        for (int c = 0; c < C; c++)
            ot[c] = xt[c] * rs * w[c];
        rstd[t] = rs;
    }
}

/* dout, x, dx: (C, T); w, dw: (C); rstd: (T) */
TSR_CPU_CLONES void tsr_cpu_rmsnorm_bwd(int C, int T, const float *dout, const float *x,
                                        const float *w, const float *rstd, float *restrict dx,
                                        float *restrict dw)
{
    for (int t = 0; t < T; t++) {
        const float *dt = dout + (size_t)t * C;
        const float *xt = x + (size_t)t * C;
        float *dxt = dx + (size_t)t * C;
        float rs = rstd[t];
        /* the one reduction of the chain rule through rstd */
        float b[TSR_VACC] = {0};
        int i = 0;
        for (; i + TSR_VACC <= C; i += TSR_VACC)
            for (int u = 0; u < TSR_VACC; u++)
                b[u] += w[i + u] * dt[i + u] * (xt[i + u] * rs);
        float sb = tsr_vfold(b);
        for (; i < C; i++)
            sb += w[i] * dt[i] * (xt[i] * rs);
        float mb = sb / (float)C;
        for (int c = 0; c < C; c++) {
            float xhat = xt[c] * rs;
            dw[c] += dt[c] * xhat;
            dxt[c] += rs * (w[c] * dt[c] - xhat * mb);
        }
    }
}
