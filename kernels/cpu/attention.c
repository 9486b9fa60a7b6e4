/* CPU flash-style causal attention on one (query tile, key/value tile) pair.
 * Each query walks the keys it can see in blocks of KB, keeping scores in a
 * stack buffer; the inner loops over the head dimension are contiguous. */
#include "kernels/attention.h"

#include <math.h>

#include "kernels/cpu/vecmath.h"

enum { KB = 64 };

/* Number of keys of the kv tile that query i (absolute q0 + i) sees. */
static inline int visible_keys(int tk, int q0, int k0, int i)
{
    int64_t nvis = (int64_t)q0 + i - k0 + 1;
    return nvis < 0 ? 0 : (nvis > tk ? tk : (int)nvis);
}

/* ms: (2, tq, nb), acc: (d, tq, nb) */
void tsr_cpu_attn_init(int d, int tq, int nb, float *ms, float *acc)
{
    size_t rows = (size_t)tq * nb;
    for (size_t r = 0; r < rows; r++) {
        ms[2 * r] = -INFINITY;
        ms[2 * r + 1] = 0.0f;
    }
    for (size_t e = 0; e < rows * d; e++)
        acc[e] = 0.0f;
}

/* q: (d, tq, nb), k, v: (d, tk, nb), ms: (2, tq, nb), acc: (d, tq, nb) */
TSR_CPU_CLONES void tsr_cpu_attn_fwd(int d, int tq, int tk, int nb, int q0, int k0, float scale,
                      const float *q, const float *k, const float *v, float *ms, float *acc)
{
    float s[KB];
    for (int b = 0; b < nb; b++) {
        const float *kb = k + (size_t)b * tk * d;
        const float *vb = v + (size_t)b * tk * d;
        for (int i = 0; i < tq; i++) {
            size_t row = (size_t)b * tq + i;
            const float *qi = q + row * d;
            float *ai = acc + row * d;
            int nvis = visible_keys(tk, q0, k0, i);
            float m = ms[2 * row], l = ms[2 * row + 1];
            for (int j0 = 0; j0 < nvis; j0 += KB) {
                int jn = nvis - j0 < KB ? nvis - j0 : KB;
                float bmax = -INFINITY;
                for (int jj = 0; jj < jn; jj++) {
                    s[jj] = scale * tsr_vdotf(qi, kb + (size_t)(j0 + jj) * d, d);
                    bmax = s[jj] > bmax ? s[jj] : bmax;
                }
                float mnew = bmax > m ? bmax : m;
                float corr = tsr_vexpf(m - mnew); /* 0 when m = -inf */
                l *= corr;
                for (int c = 0; c < d; c++)
                    ai[c] *= corr;
                for (int jj = 0; jj < jn; jj++) {
                    float p = tsr_vexpf(s[jj] - mnew);
                    const float *vj = vb + (size_t)(j0 + jj) * d;
                    l += p;
                    for (int c = 0; c < d; c++)
                        ai[c] += p * vj[c];
                }
                m = mnew;
            }
            ms[2 * row] = m;
            ms[2 * row + 1] = l;
        }
    }
}

/* ms_*: (2, tq, nb), acc_*: (d, tq, nb) */
void tsr_cpu_attn_merge(int d, int tq, int nb, const float *ms_src, const float *acc_src,
                        float *ms_dst, float *acc_dst)
{
    size_t rows = (size_t)tq * nb;
    for (size_t r = 0; r < rows; r++) {
        float m1 = ms_dst[2 * r], l1 = ms_dst[2 * r + 1];
        float m2 = ms_src[2 * r], l2 = ms_src[2 * r + 1];
        float m = m1 > m2 ? m1 : m2;
        if (m == -INFINITY)
            continue; /* both empty: dst stays empty */
        float c1 = tsr_vexpf(m1 - m), c2 = tsr_vexpf(m2 - m);
        float *a1 = acc_dst + r * d;
        const float *a2 = acc_src + r * d;
        for (int c = 0; c < d; c++)
            a1[c] = a1[c] * c1 + a2[c] * c2;
        ms_dst[2 * r] = m;
        ms_dst[2 * r + 1] = l1 * c1 + l2 * c2;
    }
}

/* ms: (2, tq, nb), acc, o: (d, tq, nb), lse: (tq, nb) */
void tsr_cpu_attn_finalize(int d, int tq, int nb, const float *ms, const float *acc,
                           float *o, float *lse)
{
    size_t rows = (size_t)tq * nb;
    for (size_t r = 0; r < rows; r++) {
        float m = ms[2 * r], l = ms[2 * r + 1];
        float inv = l > 0.0f ? 1.0f / l : 0.0f;
        for (int c = 0; c < d; c++)
            o[r * d + c] = acc[r * d + c] * inv;
        lse[r] = l > 0.0f ? m + logf(l) : -INFINITY;
    }
}

/* o, dout: (d, tq, nb), D: (tq, nb) */
void tsr_cpu_attn_bwd_dot(int d, int tq, int nb, const float *o, const float *dout, float *D)
{
    size_t rows = (size_t)tq * nb;
    for (size_t r = 0; r < rows; r++)
        D[r] = (float)tsr_vdot(o + r * d, dout + r * d, (size_t)d);
}

/* q, dout, dq: (d, tq, nb); k, v, dk, dv: (d, tk, nb); lse, D: (tq, nb) */
TSR_CPU_CLONES void tsr_cpu_attn_bwd(int d, int tq, int tk, int nb, int q0, int k0, float scale,
                      const float *q, const float *k, const float *v, const float *dout,
                      const float *lse, const float *D, float *dq, float *dk, float *dv)
{
    for (int b = 0; b < nb; b++) {
        const float *kb = k + (size_t)b * tk * d;
        const float *vb = v + (size_t)b * tk * d;
        float *dkb = dk + (size_t)b * tk * d;
        float *dvb = dv + (size_t)b * tk * d;
        for (int i = 0; i < tq; i++) {
            size_t row = (size_t)b * tq + i;
            const float *qi = q + row * d;
            const float *doi = dout + row * d;
            float *dqi = dq + row * d;
            float li = lse[row], Di = D[row];
            int nvis = visible_keys(tk, q0, k0, i);
            if (li == -INFINITY)
                continue;
            for (int j = 0; j < nvis; j++) {
                const float *kj = kb + (size_t)j * d;
                const float *vj = vb + (size_t)j * d;
                float p = tsr_vexpf(scale * tsr_vdotf(qi, kj, d) - li);
                float ds = p * (tsr_vdotf(doi, vj, d) - Di);
                float dss = scale * ds;
                float *dkj = dkb + (size_t)j * d;
                float *dvj = dvb + (size_t)j * d;
                for (int c = 0; c < d; c++) {
                    dvj[c] += p * doi[c];
                    dkj[c] += dss * qi[c];
                    dqi[c] += dss * kj[c];
                }
            }
        }
    }
}
