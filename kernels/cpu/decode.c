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

/* bf16 (the high half of an fp32) to fp32: exact; a shift the compiler
 * vectorizes (vpmovzxwd + vpslld) */
static inline float bf16f(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Columns of W four at a time: y(:, j) += W(:, p..p+3) x(p..p+3, j). W is
 * read once for all n columns (n is a decode step's few tokens); the y
 * columns stay in L1. */
TSR_CPU_CLONES void tsr_cpu_decode_gemv_bf16(int m, int n, int k, const uint16_t *w,
                                             const float *x, float beta, float *y)
{
    if (beta == 0.0f)
        for (int j = 0; j < n; j++)
            memset(y + (size_t)j * m, 0, (size_t)m * sizeof *y);
    int p = 0;
    for (; p + 4 <= k; p += 4) {
        const uint16_t *w0 = w + (size_t)p * m, *w1 = w0 + m, *w2 = w1 + m, *w3 = w2 + m;
        for (int j = 0; j < n; j++) {
            const float *xj = x + (size_t)j * k + p;
            float x0 = xj[0], x1 = xj[1], x2 = xj[2], x3 = xj[3];
            float *yj = y + (size_t)j * m;
            for (int i = 0; i < m; i++)
                yj[i] += bf16f(w0[i]) * x0 + bf16f(w1[i]) * x1 + bf16f(w2[i]) * x2 +
                         bf16f(w3[i]) * x3;
        }
    }
    for (; p < k; p++) {
        const uint16_t *w0 = w + (size_t)p * m;
        for (int j = 0; j < n; j++) {
            float x0 = x[(size_t)j * k + p], *yj = y + (size_t)j * m;
            for (int i = 0; i < m; i++)
                yj[i] += bf16f(w0[i]) * x0;
        }
    }
}

/* Dot products of W's columns with the x columns, 16 lanes of partial sums
 * (a fixed lane order: vectorized without reassociating), up to 8 x
 * columns per pass over a W column. */
TSR_CPU_CLONES void tsr_cpu_decode_gemv_bf16_t(int m, int n, int k, const uint16_t *w,
                                               const float *x, float *y)
{
    enum { L = 16, NJ = 8 };
    for (int j0 = 0; j0 < n; j0 += NJ) {
        int nj = n - j0 < NJ ? n - j0 : NJ;
        for (int i = 0; i < m; i++) {
            const uint16_t *wi = w + (size_t)i * k;
            float acc[NJ][L];
            memset(acc, 0, sizeof acc);
            int c = 0;
            for (; c + L <= k; c += L) {
                float wv[L];
                for (int l = 0; l < L; l++)
                    wv[l] = bf16f(wi[c + l]);
                for (int j = 0; j < nj; j++) {
                    const float *xj = x + (size_t)(j0 + j) * k + c;
                    for (int l = 0; l < L; l++)
                        acc[j][l] += wv[l] * xj[l];
                }
            }
            for (int j = 0; j < nj; j++) {
                float s = 0.0f;
                for (int l = 0; l < L; l++)
                    s += acc[j][l];
                const float *xj = x + (size_t)(j0 + j) * k;
                for (int cc = c; cc < k; cc++)
                    s += bf16f(wi[cc]) * xj[cc];
                y[(size_t)(j0 + j) * m + i] = s;
            }
        }
    }
}
