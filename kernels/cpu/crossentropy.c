/* CPU softmax cross-entropy on a vocabulary tile, given the full-vocabulary
 * logsumexp. */
#include "kernels/crossentropy.h"

#include "kernels/cpu/vecmath.h"

/* logits: (nv, T) with ld; lse, targets, loss: (T) */
void tsr_cpu_crossentropy_fwd(int nv, int T, int v0, const float *logits, int ld,
                              const float *lse, const int32_t *targets, float *loss)
{
    for (int t = 0; t < T; t++) {
        int64_t r = (int64_t)targets[t] - v0;
        if (targets[t] < 0 || r < 0 || r >= nv)
            continue;
        loss[t] += lse[t] - logits[(size_t)r + (size_t)t * ld];
    }
}

/* logits, dlogits: (nv, T) with ld, ldd; lse, targets: (T) */
TSR_CPU_CLONES void tsr_cpu_crossentropy_bwd(int nv, int T, int v0, const float *logits, int ld,
                              const float *lse, const int32_t *targets, float scale,
                              float *dlogits, int ldd)
{
    for (int t = 0; t < T; t++) {
        const float *xt = logits + (size_t)t * ld;
        float *dt = dlogits + (size_t)t * ldd;
        if (targets[t] < 0) {
            for (int i = 0; i < nv; i++)
                dt[i] = 0.0f;
            continue;
        }
        float l = lse[t];
        for (int i = 0; i < nv; i++)
            dt[i] = scale * tsr_vexpf(xt[i] - l);
        int64_t r = (int64_t)targets[t] - v0;
        if (r >= 0 && r < nv)
            dt[r] -= scale;
    }
}
