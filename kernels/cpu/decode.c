/* CPU attention of new tokens over a KV cache (kernels/decode.h). */
#include "kernels/decode.h"

#include <math.h>
#include <string.h>

#include "kernels/cpu/vecmath.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DEC_HAVE_AVX512 1
#define DEC_AVX512 __attribute__((target("avx512f,avx512bw")))
#endif

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
 * columns stay in L1. One body for bf16 and fp32 W: TOF gives one weight as
 * fp32. */
#define GEMV_N_C(name, wtype, TOF)                                                        \
    TSR_CPU_CLONES void name(int m, int n, int k, const wtype *w, const float *x, int ldx,  \
                             float beta, float *y)                                        \
    {                                                                                     \
        if (beta == 0.0f)                                                                 \
            for (int j = 0; j < n; j++)                                                   \
                memset(y + (size_t)j * m, 0, (size_t)m * sizeof *y);                      \
        int p = 0;                                                                        \
        for (; p + 4 <= k; p += 4) {                                                      \
            const wtype *w0 = w + (size_t)p * m, *w1 = w0 + m, *w2 = w1 + m, *w3 = w2 + m; \
            for (int j = 0; j < n; j++) {                                                 \
                const float *xj = x + (size_t)j * ldx + p;                                \
                float x0 = xj[0], x1 = xj[1], x2 = xj[2], x3 = xj[3];                     \
                float *yj = y + (size_t)j * m;                                            \
                for (int i = 0; i < m; i++)                                               \
                    yj[i] += TOF(w0[i]) * x0 + TOF(w1[i]) * x1 + TOF(w2[i]) * x2 +        \
                             TOF(w3[i]) * x3;                                             \
            }                                                                             \
        }                                                                                 \
        for (; p < k; p++) {                                                              \
            const wtype *w0 = w + (size_t)p * m;                                          \
            for (int j = 0; j < n; j++) {                                                 \
                float x0 = x[(size_t)j * ldx + p], *yj = y + (size_t)j * m;               \
                for (int i = 0; i < m; i++)                                               \
                    yj[i] += TOF(w0[i]) * x0;                                             \
            }                                                                             \
        }                                                                                 \
    }
#define F32_AS_IS(v) (v)
GEMV_N_C(tsr_cpu_decode_gemv_bf16_c, uint16_t, bf16f)
GEMV_N_C(tsr_cpu_decode_gemv_f32_c, float, F32_AS_IS)
#undef GEMV_N_C

/* Dot products of W's columns with the x columns, 16 lanes of partial sums
 * (a fixed lane order: vectorized without reassociating), up to 8 x
 * columns per pass over a W column. */
TSR_CPU_CLONES void tsr_cpu_decode_gemv_bf16_t_c(int m, int n, int k, const uint16_t *w,
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

#ifdef DEC_HAVE_AVX512
/* 16 bf16 at p widened to fp32 (zero-extend, shift into the high half) */
DEC_AVX512 static inline __m512 bf16x16(const uint16_t *p)
{
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* y (m, n) = W (m, k) x (k, n) [+ y] with 16-lane vectors: 16 rows of four W
 * columns loaded (and widened) once, then applied to every x column (the y
 * columns stay in L1). One body for both weight types: LOAD16 gives 16 of
 * them as fp32, TOF one. */
#define GEMV_N_512(name, wtype, LOAD16, TOF)                                            \
    DEC_AVX512 static void name(int m, int n, int k, const wtype *w, const float *x, int ldx, \
                                float beta, float *y)                                   \
    {                                                                                   \
        if (beta == 0.0f)                                                               \
            for (int j = 0; j < n; j++)                                                 \
                memset(y + (size_t)j * m, 0, (size_t)m * sizeof *y);                    \
        int m16 = m / 16 * 16, p = 0;                                                   \
        for (; p + 4 <= k; p += 4) {                                                    \
            const wtype *w0 = w + (size_t)p * m, *w1 = w0 + m, *w2 = w1 + m, *w3 = w2 + m; \
            for (int i = 0; i < m16; i += 16) {                                         \
                __m512 v0 = LOAD16(w0 + i), v1 = LOAD16(w1 + i);                        \
                __m512 v2 = LOAD16(w2 + i), v3 = LOAD16(w3 + i);                        \
                for (int j = 0; j < n; j++) {                                           \
                    const float *xj = x + (size_t)j * ldx + p;                          \
                    float *yj = y + (size_t)j * m + i;                                  \
                    __m512 a = _mm512_loadu_ps(yj);                                     \
                    a = _mm512_fmadd_ps(v0, _mm512_set1_ps(xj[0]), a);                  \
                    a = _mm512_fmadd_ps(v1, _mm512_set1_ps(xj[1]), a);                  \
                    a = _mm512_fmadd_ps(v2, _mm512_set1_ps(xj[2]), a);                  \
                    a = _mm512_fmadd_ps(v3, _mm512_set1_ps(xj[3]), a);                  \
                    _mm512_storeu_ps(yj, a);                                            \
                }                                                                       \
            }                                                                           \
            for (int j = 0; j < n; j++) {                                               \
                const float *xj = x + (size_t)j * ldx + p;                              \
                float *yj = y + (size_t)j * m;                                          \
                for (int i = m16; i < m; i++)                                           \
                    yj[i] += TOF(w0[i]) * xj[0] + TOF(w1[i]) * xj[1] +                  \
                             TOF(w2[i]) * xj[2] + TOF(w3[i]) * xj[3];                   \
            }                                                                           \
        }                                                                               \
        for (; p < k; p++) {                                                            \
            const wtype *w0 = w + (size_t)p * m;                                        \
            for (int j = 0; j < n; j++) {                                               \
                float x0 = x[(size_t)j * ldx + p], *yj = y + (size_t)j * m;             \
                for (int i = 0; i < m; i++)                                             \
                    yj[i] += TOF(w0[i]) * x0;                                           \
            }                                                                           \
        }                                                                               \
    }
GEMV_N_512(gemv_n_512, uint16_t, bf16x16, bf16f)
GEMV_N_512(gemv_f32_512, float, _mm512_loadu_ps, F32_AS_IS)
#undef GEMV_N_512

/* tsr_cpu_decode_gemv_bf16_t_c with 16-lane vectors: each 16 values of a W column widened once
 * for up to 8 x columns (8 accumulators in flight) */
DEC_AVX512 static void gemv_t_512(int m, int n, int k, const uint16_t *w, const float *x,
                                  float *y)
{
    enum { NJ = 8 };
    int k16 = k / 16 * 16;
    for (int j0 = 0; j0 < n; j0 += NJ) {
        int nj = n - j0 < NJ ? n - j0 : NJ;
        const float *xj[NJ];
        for (int j = 0; j < NJ; j++)
            xj[j] = x + (size_t)(j0 + (j < nj ? j : 0)) * k;
        for (int i = 0; i < m; i++) {
            const uint16_t *wi = w + (size_t)i * k;
            __m512 a[NJ];
            for (int j = 0; j < NJ; j++)
                a[j] = _mm512_setzero_ps();
            if (nj == 1) {
                __m512 b = _mm512_setzero_ps();
                int c = 0;
                for (; c + 32 <= k16; c += 32) {
                    a[0] = _mm512_fmadd_ps(bf16x16(wi + c), _mm512_loadu_ps(xj[0] + c), a[0]);
                    b = _mm512_fmadd_ps(bf16x16(wi + c + 16), _mm512_loadu_ps(xj[0] + c + 16), b);
                }
                for (; c < k16; c += 16)
                    a[0] = _mm512_fmadd_ps(bf16x16(wi + c), _mm512_loadu_ps(xj[0] + c), a[0]);
                a[0] = _mm512_add_ps(a[0], b);
            } else {
                for (int c = 0; c < k16; c += 16) {
                    __m512 wv = bf16x16(wi + c);
                    for (int j = 0; j < NJ; j++)
                        if (j < nj)
                            a[j] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xj[j] + c), a[j]);
                }
            }
            for (int j = 0; j < nj; j++) {
                float sj = _mm512_reduce_add_ps(a[j]);
                for (int c = k16; c < k; c++)
                    sj += bf16f(wi[c]) * xj[j][c];
                y[(size_t)(j0 + j) * m + i] = sj;
            }
        }
    }
}

static int use_avx512(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}
#endif

void tsr_cpu_decode_gemv_bf16(int m, int n, int k, const uint16_t *w, const float *x, int ldx,
                              float beta, float *y)
{
#ifdef DEC_HAVE_AVX512
    if (use_avx512()) {
        gemv_n_512(m, n, k, w, x, ldx, beta, y);
        return;
    }
#endif
    tsr_cpu_decode_gemv_bf16_c(m, n, k, w, x, ldx, beta, y);
}

void tsr_cpu_decode_gemv_f32(int m, int n, int k, const float *w, const float *x, int ldx,
                             float beta, float *y)
{
#ifdef DEC_HAVE_AVX512
    if (use_avx512()) {
        gemv_f32_512(m, n, k, w, x, ldx, beta, y);
        return;
    }
#endif
    tsr_cpu_decode_gemv_f32_c(m, n, k, w, x, ldx, beta, y);
}

TSR_CPU_CLONES void tsr_cpu_decode_sum2(int m, int n, float beta, const float *b,
                                        const float *p0, const float *p1, float *y)
{
    for (int j = 0; j < n; j++) {
        float *yj = y + (size_t)j * m;
        const float *q0 = p0 + (size_t)j * m, *q1 = p1 + (size_t)j * m;
        for (int i = 0; i < m; i++)
            yj[i] = (beta != 0.0f ? yj[i] : 0.0f) + b[i] + q0[i] + q1[i];
    }
}

void tsr_cpu_decode_gemv_bf16_t(int m, int n, int k, const uint16_t *w, const float *x, float *y)
{
#ifdef DEC_HAVE_AVX512
    if (use_avx512()) {
        gemv_t_512(m, n, k, w, x, y);
        return;
    }
#endif
    tsr_cpu_decode_gemv_bf16_t_c(m, n, k, w, x, y);
}
