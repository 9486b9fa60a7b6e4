/* CPU flash-style causal attention on one (query tile, key/value tile) pair,
 * as small dense products.  A block of up to KB keys is transposed once into
 * a (KB, d) stack buffer so that the scores of a block of queries,
 * S = Q K^T, are rank-1 updates over the head dimension that vectorize over
 * keys (4 queries x 32 keys of independent sums per step: no horizontal
 * reductions, which bounded the dot-product-per-pair form at about 8 GFLOP/s).
 * The exponentials of a block then vectorize over keys, and the products with
 * V (forward) and dout, Q, K (backward) are axpy rows over the head dimension.
 *
 * Every sum is accumulated in a fixed order written in the source (over c for
 * the scores, over keys or queries for the products, 16 partial sums folded
 * pairwise for l), so all clones compute the same values.
 *
 * q, k, v, o, dout, dq, dk, dv are strided views (ld, hs) as
 * kernels/attention.h describes: a position's d elements are contiguous, so
 * the rows read and written stay vectorizable whatever ld and hs are. */
#include "kernels/attention.h"

#include <math.h>
#include <string.h>

#include "kernels/cpu/vecmath.h"

enum {
    KB = 64,       /* keys per block (fewer when d is large: kT holds KT_MAX floats) */
    QB = 32,       /* queries per block of the backward's P and dS */
    KT_MAX = 8192, /* floats of a transposed key block: d * kb, kb >= 32 up to d = 256 */
    NR = 4,        /* query rows of the score micro-kernel */
    NC = 32,       /* key columns of the score micro-kernel */
    DMAX_BLOCKED = KT_MAX / NC, /* the largest d of the blocked form */
    VCOPY_QUERIES = 128, /* queries of a forward key block from which v is copied (rows_block) */
};

/* Number of keys of the kv tile that query i (absolute q0 + i) sees. */
static inline int visible_keys(int tk, int q0, int k0, int i)
{
    int64_t nvis = (int64_t)q0 + i - k0 + 1;
    return nvis < 0 ? 0 : (nvis > tk ? tk : (int)nvis);
}

/* Keys per block for head dimension d: a multiple of NC, at most KB, with
 * d * kb <= KT_MAX; 0 when d is too large for the blocked form. */
static inline int key_block(int d)
{
    int kb = KT_MAX / d / NC * NC;
    return kb > KB ? KB : kb;
}

/* xT(c, j) = x(c, j) for j < jn, 0 for jn <= j < ncols
 * x: (d, jn) with ld ldx (position j's row at x + j*ldx), xT: (ncols, d) with ld ncols */
static inline void transpose_block(int d, int jn, int ncols, const float *x, int ldx, float *xT)
{
    /* row by row of x: a strided view's rows are read once each, in order
     * (a sweep of one column over rows ldx apart thrashes a few L1 sets) */
    for (int j = 0; j < jn; j++) {
        const float *xj = x + (size_t)j * ldx;
        for (int c = 0; c < d; c++)
            xT[(size_t)c * ncols + j] = xj[c];
    }
    for (int c = 0; c < d; c++)
        for (int j = jn; j < ncols; j++)
            xT[(size_t)c * ncols + j] = 0.0f;
}

/* Rows [0, n) of a (d, n) view with ld ld, as a contiguous (d, n) block in
 * buf (ld d): the rows a loop reads again and again. Where ld is much larger
 * than d (GPT-2's fused qkv tile: ld = 3C = 36 d), rows ld * 4 bytes apart
 * fall into a few L1 sets (9216 bytes is 1024 mod 4096) and evict each
 * other; the block keeps them in distinct lines. A contiguous view (ld = d)
 * is returned as it is. */
static inline const float *rows_block(int n, int d, const float *x, int ld, float *buf)
{
    if (ld == d)
        return x;
    for (int j = 0; j < n; j++)
        memcpy(buf + (size_t)j * d, x + (size_t)j * ld, sizeof(float) * d);
    return buf;
}

/* s(j, r) = sum_c a(c, r) bT(j, c), in order c = 0, 1, ..., for nr (<= NR)
 * rows and ncols (a multiple of NC) columns.
 * a: (d, nr) with ld lda, bT: (ncols, d) with ld ldb, s: (ncols, nr) with ld lds */
static inline __attribute__((always_inline)) void scores(int nr, int d, int ncols,
                                                         const float *a, int lda,
                                                         const float *bT, int ldb, float *s,
                                                         int lds)
{
    for (int j = 0; j < ncols; j += NC) {
        float acc[NR][NC];
        for (int r = 0; r < NR; r++)
            for (int u = 0; u < NC; u++)
                acc[r][u] = 0.0f;
        for (int c = 0; c < d; c++) {
            const float *bc = bT + (size_t)c * ldb + j;
            for (int r = 0; r < nr; r++) {
                float ar = a[(size_t)r * lda + c];
                for (int u = 0; u < NC; u++)
                    acc[r][u] += ar * bc[u];
            }
        }
        for (int r = 0; r < nr; r++)
            memcpy(s + (size_t)r * lds + j, acc[r], sizeof acc[r]);
    }
}

/* s = A B^T for n rows of A (ld lda): the NR-row micro-kernel, then single rows */
static inline __attribute__((always_inline)) void scores_rows(int n, int d, int ncols,
                                                              const float *a, int lda,
                                                              const float *bT, int ldb,
                                                              float *s, int lds)
{
    int r = 0;
    for (; r + NR <= n; r += NR)
        scores(NR, d, ncols, a + (size_t)r * lda, lda, bT, ldb, s + (size_t)r * lds, lds);
    for (; r < n; r++)
        scores(1, d, ncols, a + (size_t)r * lda, lda, bT, ldb, s + (size_t)r * lds, lds);
}

/* x with its bits cleared where keep is 0: a select that vectorizes */
static inline float keep_if(float x, int keep)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u &= 0u - (uint32_t)(keep != 0);
    memcpy(&x, &u, sizeof x);
    return x;
}

/* sum of p[0..n), n a multiple of 16: 16 partial sums folded pairwise */
static inline float row_sum16(const float *p, int n)
{
    float acc[16] = {0};
    for (int j = 0; j < n; j += 16)
        for (int u = 0; u < 16; u++)
            acc[u] += p[j + u];
    for (int w = 8; w > 0; w /= 2)
        for (int u = 0; u < w; u++)
            acc[u] += acc[u + w];
    return acc[0];
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

/* The row-at-a-time forms, for head dimensions too large for a transposed
 * key block (d > KT_MAX / NC).  q, k, v (and dq, dk, dv) in (ld, hs), dout
 * in (ldo, hso), ms, acc, lse, D contiguous (kernels/attention.h). */
static void attn_fwd_rows(int d, int tq, int tk, int nb, int kvg, int q0, int k0, float scale, int ld,
                          long long hs, const float *q, const float *k, const float *v,
                          float *ms, float *acc)
{
    for (int b = 0; b < nb; b++) {
        const float *kb = k + (size_t)(b / kvg) * hs;
        const float *vb = v + (size_t)(b / kvg) * hs;
        for (int i = 0; i < tq; i++) {
            size_t row = (size_t)b * tq + i;
            const float *qi = q + (size_t)b * hs + (size_t)i * ld;
            float *ai = acc + row * d;
            int nvis = visible_keys(tk, q0, k0, i);
            float m = ms[2 * row], l = ms[2 * row + 1];
            for (int j = 0; j < nvis; j++) {
                float s = scale * tsr_vdotf(qi, kb + (size_t)j * ld, d);
                float mnew = s > m ? s : m;
                float corr = tsr_vexpf(m - mnew), p = tsr_vexpf(s - mnew);
                const float *vj = vb + (size_t)j * ld;
                l = l * corr + p;
                for (int c = 0; c < d; c++)
                    ai[c] = ai[c] * corr + p * vj[c];
                m = mnew;
            }
            ms[2 * row] = m;
            ms[2 * row + 1] = l;
        }
    }
}

static void attn_bwd_rows(int d, int tq, int tk, int nb, int kvg, int q0, int k0, float scale, int ld,
                          long long hs, const float *q, const float *k, const float *v, int ldo,
                          long long hso, const float *dout, const float *lse, const float *D,
                          float *dq, float *dk, float *dv)
{
    for (int b = 0; b < nb; b++) {
        for (int i = 0; i < tq; i++) {
            size_t row = (size_t)b * tq + i, qo = (size_t)b * hs + (size_t)i * ld;
            const float *qi = q + qo, *doi = dout + (size_t)b * hso + (size_t)i * ldo;
            float *dqi = dq + qo;
            float li = lse[row], Di = D[row];
            int nvis = visible_keys(tk, q0, k0, i);
            if (li == -INFINITY)
                continue;
            for (int j = 0; j < nvis; j++) {
                size_t ko = (size_t)(b / kvg) * hs + (size_t)j * ld;
                const float *kj = k + ko, *vj = v + ko;
                float p = tsr_vexpf(scale * tsr_vdotf(qi, kj, d) - li);
                float dss = scale * (p * (tsr_vdotf(doi, vj, d) - Di));
                float *dkj = dk + ko, *dvj = dv + ko;
                for (int c = 0; c < d; c++) {
                    dvj[c] += p * doi[c];
                    dkj[c] += dss * qi[c];
                    dqi[c] += dss * kj[c];
                }
            }
        }
    }
}

/* The blocked forward, kbk keys per block: per block of NR queries, S = Q K^T
 * by the micro-kernel, the online-softmax update of each row, and
 * acc_i += sum_j P_ij v_j in order of j into a register row. */
static inline __attribute__((always_inline)) void
attn_fwd_blocks(int d, int kbk, int tq, int tk, int nb, int kvg, int q0, int k0, float scale, int ld,
                long long hs, const float *q, const float *k, const float *v, float *ms,
                float *acc)
{
    float kT[KT_MAX], vbuf[KT_MAX];
    float s[NR * KB];
    for (int b = 0; b < nb; b++) {
        const float *kb = k + (size_t)(b / kvg) * hs;
        const float *vb = v + (size_t)(b / kvg) * hs;
        for (int j0 = 0; j0 < tk; j0 += kbk) {
            int jn = tk - j0 < kbk ? tk - j0 : kbk;
            int ncols = (jn + NC - 1) / NC * NC;
            /* the first query that sees key j0 */
            int64_t ifirst = (int64_t)k0 + j0 - q0;
            if (ifirst >= tq)
                break;
            int i0 = ifirst < 0 ? 0 : (int)ifirst;
            transpose_block(d, jn, ncols, kb + (size_t)j0 * ld, ld, kT);
            /* every query from i0 on reads these jn rows of v: for many of
             * them (a 256-query tile of the fused layout: 4.7 -> 4.3 ms) a
             * contiguous copy pays; for a 64-query tile it costs more
             * (0.193 -> 0.200 ms) than the conflicts it saves */
            const float *vblk = vb + (size_t)j0 * ld;
            if (tq - i0 >= VCOPY_QUERIES)
                vblk = rows_block(jn, d, vblk, ld, vbuf);
            int ldv = vblk == vbuf ? d : ld;
            for (int ib = i0; ib < tq; ib += NR) {
                int nr = tq - ib < NR ? tq - ib : NR;
                const float *qb = q + (size_t)b * hs + (size_t)ib * ld;
                /* the columns any of these rows sees (the last row sees most):
                 * on a diagonal block the rest is never computed */
                int vis = visible_keys(tk, q0, k0, ib + nr - 1) - j0;
                int nc = ((vis > jn ? jn : vis) + NC - 1) / NC * NC;
                if (nr == NR)
                    scores(NR, d, nc, qb, ld, kT, ncols, s, ncols);
                else
                    scores_rows(nr, d, nc, qb, ld, kT, ncols, s, ncols);
                for (int r = 0; r < nr; r++) {
                    int i = ib + r;
                    size_t row = (size_t)b * tq + i;
                    int lim = visible_keys(tk, q0, k0, i) - j0;
                    lim = lim > jn ? jn : lim;
                    float *sr = s + (size_t)r * ncols;
                    for (int j = 0; j < nc; j++)
                        sr[j] *= scale;
                    float bmax = tsr_vmax(sr, (size_t)lim);
                    float m = ms[2 * row], l = ms[2 * row + 1];
                    float mnew = bmax > m ? bmax : m;
                    float corr = tsr_vexpf(m - mnew); /* 0 when m = -inf */
                    for (int j = 0; j < nc; j++)
                        sr[j] = keep_if(tsr_vexpf(sr[j] - mnew), j < lim);
                    l = l * corr + row_sum16(sr, nc);
                    float *ai = acc + row * d;
                    float aa[DMAX_BLOCKED];
                    for (int c = 0; c < d; c++)
                        aa[c] = ai[c] * corr;
                    for (int j = 0; j < lim; j++) {
                        float p = sr[j];
                        const float *vj = vblk + (size_t)j * ldv;
                        for (int c = 0; c < d; c++)
                            aa[c] += p * vj[c];
                    }
                    memcpy(ai, aa, sizeof(float) * d);
                    ms[2 * row] = mnew;
                    ms[2 * row + 1] = l;
                }
            }
        }
    }
}

/* q: (d, tq, nb), k, v: (d, tk, nb / kvg), all in (ld, hs); ms: (2, tq, nb),
 * acc: (d, tq, nb) contiguous; query head b reads K/V head b / kvg.
 * d = 64 (GPT-2's heads) is an instance of its own, as in the backward. */
TSR_CPU_CLONES void tsr_cpu_attn_fwd_gqa(int d, int tq, int tk, int nb, int kvg, int q0, int k0,
                                         float scale, int ld, long long hs, const float *q,
                                         const float *k, const float *v, float *ms, float *acc)
{
    int kbk = key_block(d);
    if (kbk == 0)
        attn_fwd_rows(d, tq, tk, nb, kvg, q0, k0, scale, ld, hs, q, k, v, ms, acc);
    else if (d == 64)
        attn_fwd_blocks(64, KB, tq, tk, nb, kvg, q0, k0, scale, ld, hs, q, k, v, ms, acc);
    else
        attn_fwd_blocks(d, kbk, tq, tk, nb, kvg, q0, k0, scale, ld, hs, q, k, v, ms, acc);
}

/* one K/V head per query head */
void tsr_cpu_attn_fwd(int d, int tq, int tk, int nb, int q0, int k0, float scale, int ld,
                      long long hs, const float *q, const float *k, const float *v, float *ms,
                      float *acc)
{
    tsr_cpu_attn_fwd_gqa(d, tq, tk, nb, 1, q0, k0, scale, ld, hs, q, k, v, ms, acc);
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

/* ms: (2, tq, nb), acc: (d, tq, nb), lse: (tq, nb) contiguous;
 * o: (d, tq, nb) in (ldo, hso) */
void tsr_cpu_attn_finalize(int d, int tq, int nb, const float *ms, const float *acc, int ldo,
                           long long hso, float *o, float *lse)
{
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < tq; i++) {
            size_t r = (size_t)b * tq + i;
            float *oi = o + (size_t)b * hso + (size_t)i * ldo;
            float m = ms[2 * r], l = ms[2 * r + 1];
            float inv = l > 0.0f ? 1.0f / l : 0.0f;
            for (int c = 0; c < d; c++)
                oi[c] = acc[r * d + c] * inv;
            lse[r] = l > 0.0f ? m + logf(l) : -INFINITY;
        }
}

/* o, dout: (d, tq, nb) in (ldo, hso), D: (tq, nb) */
void tsr_cpu_attn_bwd_dot(int d, int tq, int nb, int ldo, long long hso, const float *o,
                          const float *dout, float *D)
{
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < tq; i++) {
            size_t off = (size_t)b * hso + (size_t)i * ldo;
            D[(size_t)b * tq + i] = (float)tsr_vdot(o + off, dout + off, (size_t)d);
        }
}

/* The blocked backward, kbk keys per block.  Per key block and block of QB
 * queries: S = Q K^T and dP = dout V^T by the score micro-kernel,
 * P = e^(scale S - lse) and dS = scale P (dP - D) over the block, then
 * dv_j += sum_i P_ij dout_i and dk_j += sum_i dS_ij q_i (in order of i) and
 * dq_i += sum_j dS_ij k_j (in order of j), into register rows. */
static inline __attribute__((always_inline)) void
attn_bwd_blocks(int d, int kbk, int tq, int tk, int nb, int kvg, int q0, int k0, float scale, int ld,
                long long hs, const float *q, const float *k, const float *v, int ldo,
                long long hso, const float *dout, const float *lse, const float *D, float *dq,
                float *dk, float *dv)
{
    float kT[KT_MAX], vT[KT_MAX], kbuf[KT_MAX];
    float qbuf[QB * DMAX_BLOCKED], dobuf[QB * DMAX_BLOCKED];
    float P[QB * KB], dS[QB * KB];
    int lim[QB];
    for (int b = 0; b < nb; b++) {
        const float *kb = k + (size_t)(b / kvg) * hs;
        const float *vb = v + (size_t)(b / kvg) * hs;
        const float *qb = q + (size_t)b * hs, *dob = dout + (size_t)b * hso;
        float *dqb = dq + (size_t)b * hs;
        float *dkb = dk + (size_t)(b / kvg) * hs, *dvb = dv + (size_t)(b / kvg) * hs;
        for (int j0 = 0; j0 < tk; j0 += kbk) {
            int jn = tk - j0 < kbk ? tk - j0 : kbk;
            int ncols = (jn + NC - 1) / NC * NC;
            int64_t ifirst = (int64_t)k0 + j0 - q0;
            if (ifirst >= tq)
                break;
            int ibeg = ifirst < 0 ? 0 : (int)ifirst;
            transpose_block(d, jn, ncols, kb + (size_t)j0 * ld, ld, kT);
            transpose_block(d, jn, ncols, vb + (size_t)j0 * ld, ld, vT);
            /* rows read once per query of a block (k) or per key (q, dout),
             * contiguous where the views are strided (rows_block) */
            const float *kblk = rows_block(jn, d, kb + (size_t)j0 * ld, ld, kbuf);
            int ldk = kblk == kbuf ? d : ld;
            for (int i0 = ibeg; i0 < tq; i0 += QB) {
                int in = tq - i0 < QB ? tq - i0 : QB;
                size_t row0 = (size_t)b * tq + i0;
                int vis = visible_keys(tk, q0, k0, i0 + in - 1) - j0;
                int nc = ((vis > jn ? jn : vis) + NC - 1) / NC * NC;
                scores_rows(in, d, nc, qb + (size_t)i0 * ld, ld, kT, ncols, P, ncols);
                scores_rows(in, d, nc, dob + (size_t)i0 * ldo, ldo, vT, ncols, dS, ncols);
                const float *qblk = rows_block(in, d, qb + (size_t)i0 * ld, ld, qbuf);
                const float *doblk = rows_block(in, d, dob + (size_t)i0 * ldo, ldo, dobuf);
                int ldq = qblk == qbuf ? d : ld, lddo = doblk == dobuf ? d : ldo;
                for (int r = 0; r < in; r++) {
                    float li = lse[row0 + r], Di = D[row0 + r];
                    int l = visible_keys(tk, q0, k0, i0 + r) - j0;
                    l = l > jn ? jn : (l < 0 ? 0 : l);
                    lim[r] = li == -INFINITY ? 0 : l;
                    float *pr = P + (size_t)r * ncols, *dsr = dS + (size_t)r * ncols;
                    for (int j = 0; j < nc; j++) {
                        float p = keep_if(tsr_vexpf(scale * pr[j] - li), j < lim[r]);
                        pr[j] = p;
                        dsr[j] = scale * (p * (dsr[j] - Di));
                    }
                }
                /* dv, dk: key by key, the queries in order */
                for (int j = 0; j < jn; j++) {
                    float *dvj = dvb + (size_t)(j0 + j) * ld;
                    float *dkj = dkb + (size_t)(j0 + j) * ld;
                    float av[DMAX_BLOCKED], ak[DMAX_BLOCKED];
                    memcpy(av, dvj, sizeof(float) * d);
                    memcpy(ak, dkj, sizeof(float) * d);
                    for (int r = 0; r < in; r++) {
                        if (j >= lim[r])
                            continue;
                        float p = P[(size_t)r * ncols + j], ds = dS[(size_t)r * ncols + j];
                        const float *doi = doblk + (size_t)r * lddo;
                        const float *qi = qblk + (size_t)r * ldq;
                        for (int c = 0; c < d; c++) {
                            av[c] += p * doi[c];
                            ak[c] += ds * qi[c];
                        }
                    }
                    memcpy(dvj, av, sizeof(float) * d);
                    memcpy(dkj, ak, sizeof(float) * d);
                }
                /* dq: query by query, the keys in order */
                for (int r = 0; r < in; r++) {
                    float *dqi = dqb + (size_t)(i0 + r) * ld;
                    const float *dsr = dS + (size_t)r * ncols;
                    float aq[DMAX_BLOCKED];
                    memcpy(aq, dqi, sizeof(float) * d);
                    for (int j = 0; j < lim[r]; j++) {
                        float ds = dsr[j];
                        const float *kj = kblk + (size_t)j * ldk;
                        for (int c = 0; c < d; c++)
                            aq[c] += ds * kj[c];
                    }
                    memcpy(dqi, aq, sizeof(float) * d);
                }
            }
        }
    }
}

/* q, dq: (d, tq, nb), k, v, dk, dv: (d, tk, nb / kvg), all in (ld, hs);
 * dout: (d, tq, nb) in (ldo, hso); lse, D: (tq, nb) contiguous.  Query head
 * b reads K/V head b / kvg; the heads run in order, so dk and dv of a K/V
 * head accumulate its query heads one after the other (a fixed order).
 * GPT-2's head dimension 64 gets its own instance: with d a constant the
 * accumulator rows live in registers. */
TSR_CPU_CLONES void tsr_cpu_attn_bwd_gqa(int d, int tq, int tk, int nb, int kvg, int q0, int k0,
                                         float scale, int ld, long long hs, const float *q,
                                         const float *k, const float *v, int ldo, long long hso,
                                         const float *dout, const float *lse, const float *D,
                                         float *dq, float *dk, float *dv)
{
    int kbk = key_block(d);
    if (kbk == 0)
        attn_bwd_rows(d, tq, tk, nb, kvg, q0, k0, scale, ld, hs, q, k, v, ldo, hso, dout, lse, D,
                      dq, dk, dv);
    else if (d == 64)
        attn_bwd_blocks(64, KB, tq, tk, nb, kvg, q0, k0, scale, ld, hs, q, k, v, ldo, hso, dout,
                        lse, D, dq, dk, dv);
    else
        attn_bwd_blocks(d, kbk, tq, tk, nb, kvg, q0, k0, scale, ld, hs, q, k, v, ldo, hso, dout,
                        lse, D, dq, dk, dv);
}

/* one K/V head per query head */
void tsr_cpu_attn_bwd(int d, int tq, int tk, int nb, int q0, int k0, float scale, int ld,
                      long long hs, const float *q, const float *k, const float *v, int ldo,
                      long long hso, const float *dout, const float *lse, const float *D,
                      float *dq, float *dk, float *dv)
{
    tsr_cpu_attn_bwd_gqa(d, tq, tk, nb, 1, q0, k0, scale, ld, hs, q, k, v, ldo, hso, dout, lse, D,
                         dq, dk, dv);
}
