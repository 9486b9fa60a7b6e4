/* CPU attention of new tokens over a KV cache (kernels/decode.h). */
#include "kernels/decode.h"

#include <math.h>
#include <string.h>

#include "kernels/cpu/vecmath.h"

/* keys scored at a time: the scores of a chunk stay on the stack */
enum { CHUNK = 128, DMAX = 256 };

/* One query over keys [0, nkeys) of one slot's cache: the online softmax
 * merges chunk by chunk (rescaling the accumulator when the max grows). */
TSR_CPU_CLONES static void attend(int d, int nkeys, float scale, const float *q,
                                  const float *kc, const float *vc, float *y)
{
    float acc[DMAX], s[CHUNK];
    float m = -INFINITY, l = 0.0f;
    for (int c = 0; c < d; c++)
        acc[c] = 0.0f;
    for (int t0 = 0; t0 < nkeys; t0 += CHUNK) {
        int nt = nkeys - t0 < CHUNK ? nkeys - t0 : CHUNK;
        float cmax = -INFINITY;
        for (int t = 0; t < nt; t++) {
            const float *kt = kc + (size_t)(t0 + t) * d;
            float dot = 0.0f;
            for (int c = 0; c < d; c++)
                dot += q[c] * kt[c];
            s[t] = dot * scale;
            cmax = s[t] > cmax ? s[t] : cmax;
        }
        if (cmax > m) {
            float r = m == -INFINITY ? 0.0f : tsr_vexpf(m - cmax);
            l *= r;
            for (int c = 0; c < d; c++)
                acc[c] *= r;
            m = cmax;
        }
        for (int t = 0; t < nt; t++) {
            float p = tsr_vexpf(s[t] - m);
            const float *vt = vc + (size_t)(t0 + t) * d;
            l += p;
            for (int c = 0; c < d; c++)
                acc[c] += p * vt[c];
        }
    }
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int c = 0; c < d; c++)
        y[c] = acc[c] * inv;
}

void tsr_cpu_decode_attn(int d, int n, int maxlen, float scale, const int32_t *cols,
                         const float *q, const float *k, const float *v, int ld, float *kc,
                         float *vc, float *y)
{
    if (d <= 0 || d > DMAX)
        return; /* the codelet refuses such heads before submitting */
    /* every new key first: a prefill's queries see the keys of the same call */
    for (int j = 0; j < n; j++) {
        size_t col = (size_t)cols[2 * j] * (size_t)maxlen + (size_t)cols[2 * j + 1];
        memcpy(kc + col * d, k + (size_t)j * ld, (size_t)d * sizeof *kc);
        memcpy(vc + col * d, v + (size_t)j * ld, (size_t)d * sizeof *vc);
    }
    for (int j = 0; j < n; j++) {
        size_t base = (size_t)cols[2 * j] * (size_t)maxlen * d;
        attend(d, cols[2 * j + 1] + 1, scale, q + (size_t)j * ld, kc + base, vc + base,
               y + (size_t)j * d);
    }
}

void tsr_cpu_decode_embed(int C, const float *a, const float *b, float *out)
{
    for (int c = 0; c < C; c++)
        out[c] = a[c] + b[c];
}
