/* CPU token embedding: gather forward, scatter-add backward, for one
 * vocabulary tile [v0, v0 + nv). */
#include "kernels/embedding.h"

#include <stddef.h>

/* tokens: (T), w: (C, nv), out: (C, T) */
void tsr_cpu_embedding_fwd(int C, int T, int nv, int v0, const int32_t *tokens,
                           const float *w, float *out)
{
    for (int t = 0; t < T; t++) {
        int64_t r = (int64_t)tokens[t] - v0;
        if (r < 0 || r >= nv)
            continue;
        const float *wr = w + (size_t)r * C;
        float *ot = out + (size_t)t * C;
        for (int c = 0; c < C; c++)
            ot[c] += wr[c];
    }
}

/* tokens: (T), dout: (C, T), dw: (C, nv) */
void tsr_cpu_embedding_bwd(int C, int T, int nv, int v0, const int32_t *tokens,
                           const float *dout, float *dw)
{
    for (int t = 0; t < T; t++) {
        int64_t r = (int64_t)tokens[t] - v0;
        if (r < 0 || r >= nv)
            continue;
        float *wr = dw + (size_t)r * C;
        const float *dt = dout + (size_t)t * C;
        for (int c = 0; c < C; c++)
            wr[c] += dt[c];
    }
}
