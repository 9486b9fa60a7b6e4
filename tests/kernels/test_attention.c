/* Flash-style causal attention, tile pair by tile pair, against a naive full
 * causal softmax attention in double:
 *  - forward over several kv tiles (+ the merge of two partial states built
 *    over disjoint kv tiles) equals softmax(QK^T/sqrt(d) + causal mask) V and
 *    its logsumexp;
 *  - backward accumulated over all tile pairs equals the double analytic
 *    gradient, which is itself checked by finite differences, and the kernel
 *    gradient is checked by finite differences directly on small cases;
 *  - shapes: 1x1, primes, tiles smaller than the head dimension, the diagonal
 *    crossing tiles anywhere, kv blocks longer than the CPU's 64-key chunk,
 *    non-zero absolute offsets, several heads; pairs above the diagonal are
 *    submitted too and must be no-ops; outputs poisoned before each call;
 *  - layouts (kernels/attention.h): contiguous (d, t, nb) tiles (ld = d, hs =
 *    max(tq, tk) d), and GPT-2's fused one, q, k, v of nb heads interleaved
 *    in one (3C, T) buffer (C = nb d, ld = 3C, hs = d), o and dout in (C, T),
 *    dq, dk, dv written into a (3C, T) buffer, all read and written in place
 *    at the tiles' offsets; optionally with padding rows after each position
 *    (ld = 3C + pad) holding NaN, which a wrong ld or hs would read (or which
 *    a wrong write would leave or overwrite: checked to stay NaN). */
#include "kernels/attention.h"
#include "kt_util.h"
#include "gqa_ref.h"

typedef struct {
    int d, T, nb, tq, tk, base, merge;
    int fused, pad; /* the fused layout, with pad NaN rows after each position */
} acase;

/* element (c, t, b) of a full (d, T, nb) array */
#define IX(c, t, b) ((size_t)(c) + (size_t)(t) * d + (size_t)(b) * T * d)

/* O and LSE of causal attention, all in double */
static void ref_fwd(int d, int T, int nb, double scale, const double *q, const double *k,
                    const double *v, double *o, double *lse)
{
    double *s = kt_dalloc(T);
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < T; i++) {
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j <= i; j++) {
                s[j] = 0;
                for (int c = 0; c < d; c++)
                    s[j] += q[IX(c, i, b)] * k[IX(c, j, b)];
                s[j] *= scale;
                mx = s[j] > mx ? s[j] : mx;
            }
            for (int j = 0; j <= i; j++)
                sum += exp(s[j] - mx);
            for (int c = 0; c < d; c++) {
                double acc = 0;
                for (int j = 0; j <= i; j++)
                    acc += exp(s[j] - mx) / sum * v[IX(c, j, b)];
                o[IX(c, i, b)] = acc;
            }
            lse[(size_t)b * T + i] = mx + log(sum);
        }
    free(s);
}

/* analytic gradients of L = sum W .* O, in double */
static void ref_bwd(int d, int T, int nb, double scale, const double *q, const double *k,
                    const double *v, const double *w, double *dq, double *dk, double *dv)
{
    size_t n = (size_t)d * T * nb;
    double *o = kt_dalloc(n), *lse = kt_dalloc((size_t)T * nb);
    ref_fwd(d, T, nb, scale, q, k, v, o, lse);
    memset(dq, 0, n * sizeof(double)), memset(dk, 0, n * sizeof(double)), memset(dv, 0, n * sizeof(double));
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < T; i++) {
            double Di = 0;
            for (int c = 0; c < d; c++)
                Di += w[IX(c, i, b)] * o[IX(c, i, b)];
            for (int j = 0; j <= i; j++) {
                double s = 0, dp = 0;
                for (int c = 0; c < d; c++) {
                    s += q[IX(c, i, b)] * k[IX(c, j, b)];
                    dp += w[IX(c, i, b)] * v[IX(c, j, b)];
                }
                double p = exp(scale * s - lse[(size_t)b * T + i]), ds = p * (dp - Di);
                for (int c = 0; c < d; c++) {
                    dv[IX(c, j, b)] += p * w[IX(c, i, b)];
                    dq[IX(c, i, b)] += scale * ds * k[IX(c, j, b)];
                    dk[IX(c, j, b)] += scale * ds * q[IX(c, i, b)];
                }
            }
        }
    free(o), free(lse);
}

static double ref_loss(int d, int T, int nb, double scale, const double *q, const double *k,
                       const double *v, const double *w)
{
    size_t n = (size_t)d * T * nb;
    double *o = kt_dalloc(n), *lse = kt_dalloc((size_t)T * nb), l = 0;
    ref_fwd(d, T, nb, scale, q, k, v, o, lse);
    for (size_t e = 0; e < n; e++)
        l += w[e] * o[e];
    free(o), free(lse);
    return l;
}

/* tile (d, n, nb) with head stride hn positions (hn >= n) <-> positions
 * [p0, p0 + n) of a full (d, T, nb) array */
static void gather(int d, int T, int nb, int p0, int n, int hn, const float *full, float *tile)
{
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < n; i++)
            memcpy(tile + ((size_t)b * hn + i) * d, full + IX(0, p0 + i, b), sizeof(float) * d);
}

static void scatter(int d, int T, int nb, int p0, int n, int hn, const float *tile, float *full)
{
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < n; i++)
            memcpy(full + IX(0, p0 + i, b), tile + ((size_t)b * hn + i) * d, sizeof(float) * d);
}

static int imin(int a, int b)
{
    return a < b ? a : b;
}

/* Tiled forward + backward with the CPU kernels; fills o, lse, dq, dk, dv
 * (full arrays).  dq, dk, dv start from the given values (accumulation). */
static void tiled(const acase *ac, const float *q, const float *k, const float *v,
                  const float *dout, float *o, float *lse, float *dq, float *dk, float *dv)
{
    int d = ac->d, T = ac->T, nb = ac->nb;
    float scale = 1.0f / sqrtf((float)d);
    /* q, k, v, dq, dk, dv share (ld, hs): tiles of max(tq, tk) positions */
    int tmax = ac->tq > ac->tk ? ac->tq : ac->tk;
    size_t mq = (size_t)d * tmax * nb, mk = mq;
    float *qt = kt_alloc(mq), *ot = kt_alloc(mq), *dot_ = kt_alloc(mq), *dqt = kt_alloc(mq);
    float *acc = kt_alloc(mq), *acc2 = kt_alloc(mq);
    float *ms = kt_alloc(2 * (size_t)ac->tq * nb), *ms2 = kt_alloc(2 * (size_t)ac->tq * nb);
    float *lt = kt_alloc((size_t)ac->tq * nb), *Dt = kt_alloc((size_t)ac->tq * nb);
    float *kt = kt_alloc(mk), *vt = kt_alloc(mk), *dkt = kt_alloc(mk), *dvt = kt_alloc(mk);
    /* forward: one q tile at a time, all kv tiles (those above the diagonal too) */
    for (int q0 = 0; q0 < T; q0 += ac->tq) {
        int tq = imin(ac->tq, T - q0);
        long long hs = (long long)tmax * d, hso = (long long)tq * d;
        gather(d, T, nb, q0, tq, tmax, q, qt);
        kt_poison(ms, 2 * (size_t)tq * nb), kt_poison(acc, (size_t)d * tq * nb);
        tsr_cpu_attn_init(d, tq, nb, ms, acc);
        tsr_cpu_attn_init(d, tq, nb, ms2, acc2);
        int idx = 0;
        for (int k0 = 0; k0 < T; k0 += ac->tk, idx++) {
            int tk = imin(ac->tk, T - k0);
            gather(d, T, nb, k0, tk, tmax, k, kt), gather(d, T, nb, k0, tk, tmax, v, vt);
            int second = ac->merge && (idx % 2 == 1);
            tsr_cpu_attn_fwd(d, tq, tk, nb, ac->base + q0, ac->base + k0, scale, d, hs, qt, kt,
                             vt, second ? ms2 : ms, second ? acc2 : acc);
        }
        if (ac->merge)
            tsr_cpu_attn_merge(d, tq, nb, ms2, acc2, ms, acc);
        kt_poison(ot, (size_t)d * tq * nb), kt_poison(lt, (size_t)tq * nb);
        tsr_cpu_attn_finalize(d, tq, nb, ms, acc, d, hso, ot, lt);
        scatter(d, T, nb, q0, tq, tq, ot, o);
        for (int b = 0; b < nb; b++)
            memcpy(lse + (size_t)b * T + q0, lt + (size_t)b * tq, sizeof(float) * tq);
    }
    /* backward: for each kv tile, all q tiles */
    for (int k0 = 0; k0 < T; k0 += ac->tk) {
        int tk = imin(ac->tk, T - k0);
        long long hs = (long long)tmax * d;
        gather(d, T, nb, k0, tk, tmax, k, kt), gather(d, T, nb, k0, tk, tmax, v, vt);
        gather(d, T, nb, k0, tk, tmax, dk, dkt), gather(d, T, nb, k0, tk, tmax, dv, dvt);
        for (int q0 = 0; q0 < T; q0 += ac->tq) {
            int tq = imin(ac->tq, T - q0);
            long long hso = (long long)tq * d;
            gather(d, T, nb, q0, tq, tmax, q, qt), gather(d, T, nb, q0, tq, tq, o, ot);
            gather(d, T, nb, q0, tq, tq, dout, dot_), gather(d, T, nb, q0, tq, tmax, dq, dqt);
            for (int b = 0; b < nb; b++)
                memcpy(lt + (size_t)b * tq, lse + (size_t)b * T + q0, sizeof(float) * tq);
            kt_poison(Dt, (size_t)tq * nb);
            tsr_cpu_attn_bwd_dot(d, tq, nb, d, hso, ot, dot_, Dt);
            tsr_cpu_attn_bwd(d, tq, tk, nb, ac->base + q0, ac->base + k0, scale, d, hs, qt, kt,
                             vt, d, hso, dot_, lt, Dt, dqt, dkt, dvt);
            scatter(d, T, nb, q0, tq, tmax, dqt, dq);
        }
        scatter(d, T, nb, k0, tk, tmax, dkt, dk), scatter(d, T, nb, k0, tk, tmax, dvt, dv);
    }
    free(qt), free(ot), free(dot_), free(dqt), free(acc), free(acc2), free(ms), free(ms2);
    free(lt), free(Dt), free(kt), free(vt), free(dkt), free(dvt);
}

/* The fused layout: x (d, T, nb) <-> rows [r0 + b d, r0 + b d + d) of
 * position t of a (ld, T) buffer (b the head); pack writes, unpack reads. */
static void pack(int d, int T, int nb, const float *x, int ld, int r0, float *buf)
{
    for (int b = 0; b < nb; b++)
        for (int t = 0; t < T; t++)
            memcpy(buf + (size_t)t * ld + r0 + (size_t)b * d, x + IX(0, t, b), sizeof(float) * d);
}

static void unpack(int d, int T, int nb, const float *buf, int ld, int r0, float *x)
{
    for (int b = 0; b < nb; b++)
        for (int t = 0; t < T; t++)
            memcpy(x + IX(0, t, b), buf + (size_t)t * ld + r0 + (size_t)b * d, sizeof(float) * d);
}

/* rows [r0, r1) of every position of a (ld, T) buffer are still NaN */
static void assert_pad_nan(const char *what, const float *buf, int ld, int T, int r0, int r1)
{
    for (int t = 0; t < T; t++)
        for (int r = r0; r < r1; r++)
            cr_assert(isnan(buf[(size_t)t * ld + r]), "%s: padding row %d of position %d written",
                      what, r, t);
}

/* tiled() in the fused layout: q, k, v packed into one (3C + pad, T) buffer
 * (C = nb d), dout into (C + pad, T); every kernel call gets views at the
 * tiles' offsets (ld = 3C + pad or C + pad, hs = d), nothing is gathered.
 * o, dq, dk, dv are unpacked into the full (d, T, nb) arrays at the end. */
static void tiled_fused(const acase *ac, const float *q, const float *k, const float *v,
                        const float *dout, float *o, float *lse, float *dq, float *dk, float *dv)
{
    int d = ac->d, T = ac->T, nb = ac->nb, C = nb * d, pad = ac->pad;
    int ld = 3 * C + pad, ldo = C + pad;
    float scale = 1.0f / sqrtf((float)d);
    float *qkv = kt_alloc((size_t)ld * T), *dqkv = kt_alloc((size_t)ld * T);
    float *ob = kt_alloc((size_t)ldo * T), *dob = kt_alloc((size_t)ldo * T);
    kt_poison(qkv, (size_t)ld * T), kt_poison(dqkv, (size_t)ld * T);
    kt_poison(ob, (size_t)ldo * T), kt_poison(dob, (size_t)ldo * T);
    pack(d, T, nb, q, ld, 0, qkv), pack(d, T, nb, k, ld, C, qkv), pack(d, T, nb, v, ld, 2 * C, qkv);
    pack(d, T, nb, dq, ld, 0, dqkv), pack(d, T, nb, dk, ld, C, dqkv);
    pack(d, T, nb, dv, ld, 2 * C, dqkv), pack(d, T, nb, dout, ldo, 0, dob);
    size_t mq = (size_t)d * ac->tq * nb, rows = (size_t)ac->tq * nb;
    float *acc = kt_alloc(mq), *acc2 = kt_alloc(mq), *ms = kt_alloc(2 * rows);
    float *ms2 = kt_alloc(2 * rows), *lt = kt_alloc(rows), *Dt = kt_alloc(rows);
    for (int q0 = 0; q0 < T; q0 += ac->tq) {
        int tq = imin(ac->tq, T - q0);
        const float *qt = qkv + (size_t)q0 * ld;
        kt_poison(ms, 2 * rows), kt_poison(acc, mq);
        tsr_cpu_attn_init(d, tq, nb, ms, acc);
        tsr_cpu_attn_init(d, tq, nb, ms2, acc2);
        int idx = 0;
        for (int k0 = 0; k0 < T; k0 += ac->tk, idx++) {
            int tk = imin(ac->tk, T - k0);
            const float *kt = qkv + (size_t)k0 * ld + C, *vt = kt + C;
            int second = ac->merge && (idx % 2 == 1);
            tsr_cpu_attn_fwd(d, tq, tk, nb, ac->base + q0, ac->base + k0, scale, ld, d, qt, kt,
                             vt, second ? ms2 : ms, second ? acc2 : acc);
        }
        if (ac->merge)
            tsr_cpu_attn_merge(d, tq, nb, ms2, acc2, ms, acc);
        kt_poison(lt, rows);
        tsr_cpu_attn_finalize(d, tq, nb, ms, acc, ldo, d, ob + (size_t)q0 * ldo, lt);
        for (int b = 0; b < nb; b++)
            memcpy(lse + (size_t)b * T + q0, lt + (size_t)b * tq, sizeof(float) * tq);
    }
    assert_pad_nan("fused attention o", ob, ldo, T, C, ldo);
    unpack(d, T, nb, ob, ldo, 0, o);
    for (int k0 = 0; k0 < T; k0 += ac->tk) {
        int tk = imin(ac->tk, T - k0);
        const float *kt = qkv + (size_t)k0 * ld + C, *vt = kt + C;
        float *dkt = dqkv + (size_t)k0 * ld + C, *dvt = dkt + C;
        for (int q0 = 0; q0 < T; q0 += ac->tq) {
            int tq = imin(ac->tq, T - q0);
            const float *qt = qkv + (size_t)q0 * ld, *ot = ob + (size_t)q0 * ldo;
            const float *dot_ = dob + (size_t)q0 * ldo;
            for (int b = 0; b < nb; b++)
                memcpy(lt + (size_t)b * tq, lse + (size_t)b * T + q0, sizeof(float) * tq);
            kt_poison(Dt, rows);
            tsr_cpu_attn_bwd_dot(d, tq, nb, ldo, d, ot, dot_, Dt);
            tsr_cpu_attn_bwd(d, tq, tk, nb, ac->base + q0, ac->base + k0, scale, ld, d, qt, kt,
                             vt, ldo, d, dot_, lt, Dt, dqkv + (size_t)q0 * ld, dkt, dvt);
        }
    }
    assert_pad_nan("fused attention dqkv", dqkv, ld, T, 3 * C, ld);
    unpack(d, T, nb, dqkv, ld, 0, dq), unpack(d, T, nb, dqkv, ld, C, dk);
    unpack(d, T, nb, dqkv, ld, 2 * C, dv);
    free(qkv), free(dqkv), free(ob), free(dob), free(acc), free(acc2), free(ms), free(ms2);
    free(lt), free(Dt);
}

static double *to_d(const float *x, size_t n)
{
    double *y = kt_dalloc(n);
    for (size_t i = 0; i < n; i++)
        y[i] = x[i];
    return y;
}

static void run(acase ac, uint64_t salt, int with_fd)
{
    kt_rng r = kt_seed(salt);
    int d = ac.d, T = ac.T, nb = ac.nb;
    size_t n = (size_t)d * T * nb;
    float *q = kt_rand(&r, n, -2, 2), *k = kt_rand(&r, n, -2, 2), *v = kt_rand(&r, n, -1, 1);
    float *dout = kt_rand(&r, n, -1, 1);
    float *o = kt_alloc(n), *lse = kt_alloc((size_t)T * nb);
    float *dq = kt_rand(&r, n, -1, 1), *dk = kt_rand(&r, n, -1, 1), *dv = kt_rand(&r, n, -1, 1);
    float *dq0 = kt_dup(dq, n), *dk0 = kt_dup(dk, n), *dv0 = kt_dup(dv, n);
    if (ac.fused)
        tiled_fused(&ac, q, k, v, dout, o, lse, dq, dk, dv);
    else
        tiled(&ac, q, k, v, dout, o, lse, dq, dk, dv);

    double *qd = to_d(q, n), *kd = to_d(k, n), *vd = to_d(v, n), *wd = to_d(dout, n);
    double *od = kt_dalloc(n), *ld = kt_dalloc((size_t)T * nb);
    double scale = 1.0 / sqrt((double)d);
    ref_fwd(d, T, nb, scale, qd, kd, vd, od, ld);
    char what[128];
    snprintf(what, sizeof what, "attention o d=%d T=%d nb=%d tiles %dx%d merge=%d fused=%d pad=%d",
             d, T, nb, ac.tq, ac.tk, ac.merge, ac.fused, ac.pad);
    kt_assert_close(what, o, od, n, 2e-6, 2e-5);
    kt_assert_close("attention lse", lse, ld, (size_t)T * nb, 2e-6, 2e-6);

    double *gq = kt_dalloc(n), *gk = kt_dalloc(n), *gv = kt_dalloc(n);
    ref_bwd(d, T, nb, scale, qd, kd, vd, wd, gq, gk, gv);
    if (with_fd) {
        /* the double analytic gradient against central differences */
        double *xs[3] = {qd, kd, vd}, *gs[3] = {gq, gk, gv};
        for (int a = 0; a < 3; a++)
            for (size_t e = 0; e < n; e++) {
                double x0 = xs[a][e], h = 1e-6;
                xs[a][e] = x0 + h;
                double lp = ref_loss(d, T, nb, scale, qd, kd, vd, wd);
                xs[a][e] = x0 - h;
                double lm = ref_loss(d, T, nb, scale, qd, kd, vd, wd);
                xs[a][e] = x0;
                double fd = (lp - lm) / (2 * h);
                cr_assert(fabs(fd - gs[a][e]) <= 1e-6 + 1e-5 * fabs(fd),
                          "reference grad %d[%zu] = %g, finite differences %g", a, e, gs[a][e], fd);
            }
    }
    for (size_t e = 0; e < n; e++)
        gq[e] += dq0[e], gk[e] += dk0[e], gv[e] += dv0[e];
    double tol = 1e-5 * (1 + kt_dmaxabs(gq, n));
    kt_assert_close("attention dq", dq, gq, n, tol, 1e-4);
    kt_assert_close("attention dk", dk, gk, n, tol, 1e-4);
    kt_assert_close("attention dv", dv, gv, n, tol, 1e-4);
    free(q), free(k), free(v), free(dout), free(o), free(lse), free(dq), free(dk), free(dv);
    free(dq0), free(dk0), free(dv0), free(qd), free(kd), free(vd), free(wd), free(od), free(ld);
    free(gq), free(gk), free(gv);
}

Test(attention, one_by_one)
{
    run((acase){.d = 1, .T = 1, .nb = 1, .tq = 1, .tk = 1}, 91, 1);
    run((acase){.d = 1, .T = 3, .nb = 1, .tq = 1, .tk = 1}, 92, 1);
}

Test(attention, primes_and_diagonal_crossing_tiles)
{
    run((acase){.d = 8, .T = 13, .nb = 2, .tq = 5, .tk = 3}, 93, 1);
    run((acase){.d = 7, .T = 11, .nb = 3, .tq = 11, .tk = 11}, 94, 0);
    run((acase){.d = 5, .T = 9, .nb = 1, .tq = 2, .tk = 9, .base = 37}, 95, 1);
    run((acase){.d = 3, .T = 17, .nb = 2, .tq = 4, .tk = 5, .merge = 1}, 96, 1);
}

Test(attention, tiles_smaller_than_head_dim)
{
    run((acase){.d = 16, .T = 17, .nb = 1, .tq = 7, .tk = 4, .base = 100}, 97, 0);
    run((acase){.d = 64, .T = 40, .nb = 2, .tq = 16, .tk = 24, .merge = 1}, 98, 0);
    run((acase){.d = 33, .T = 6, .nb = 1, .tq = 1, .tk = 2}, 99, 0);
}

Test(attention, kv_tile_longer_than_cpu_chunk)
{
    run((acase){.d = 4, .T = 150, .nb = 1, .tq = 50, .tk = 150}, 100, 0);
    run((acase){.d = 4, .T = 150, .nb = 1, .tq = 70, .tk = 67, .merge = 1}, 101, 0);
}

/* The CPU kernels' blocked form: GPT-2's head (d = 64, a 64-token diagonal
 * tile of 4 sequences, query blocks of 4 rows with a tail), head dimensions
 * that shrink the key block (d = 128: 64 keys, d = 200: 32 keys, a partial
 * last block), and one too large for it (d = 300: the row-at-a-time form). */
Test(attention, blocked_head_dims)
{
    run((acase){.d = 64, .T = 64, .nb = 4, .tq = 64, .tk = 64}, 102, 0);
    run((acase){.d = 64, .T = 71, .nb = 1, .tq = 37, .tk = 71, .base = 5}, 103, 0);
    run((acase){.d = 128, .T = 45, .nb = 1, .tq = 45, .tk = 45}, 104, 0);
    run((acase){.d = 200, .T = 40, .nb = 1, .tq = 19, .tk = 40, .merge = 1}, 105, 0);
    run((acase){.d = 300, .T = 9, .nb = 1, .tq = 4, .tk = 9}, 106, 0);
}

/* q, k, v read in place from one (3C, T) buffer (ld = 3C, hs = d), o written
 * into (C, T), dq, dk, dv into (3C, T): GPT-2's call (d = 64, 12 heads, the
 * diagonal 64-token tile and its neighbours), the row-at-a-time form
 * (d = 300), odd shapes with merges, and padded ld (NaN rows between
 * positions, which a wrong ld or hs would read). */
Test(attention, fused_qkv_strided_views)
{
    run((acase){.d = 64, .T = 128, .nb = 12, .tq = 64, .tk = 64, .fused = 1}, 107, 0);
    run((acase){.d = 8, .T = 13, .nb = 3, .tq = 5, .tk = 3, .fused = 1}, 108, 1);
    run((acase){.d = 7, .T = 23, .nb = 2, .tq = 6, .tk = 9, .base = 11, .merge = 1, .fused = 1,
                .pad = 3},
        109, 0);
    run((acase){.d = 64, .T = 71, .nb = 3, .tq = 37, .tk = 71, .fused = 1, .pad = 5}, 110, 0);
    run((acase){.d = 300, .T = 9, .nb = 2, .tq = 4, .tk = 9, .fused = 1, .pad = 1}, 111, 0);
}

/* ---- grouped-query attention (tsr_cpu_attn_fwd_gqa, _bwd_gqa) ----------
 * nb query heads over nkv = nb / kvg K/V heads, query head b reading K/V
 * head b / kvg, tile pair by tile pair over a sequence of T positions,
 * against the double reference of gqa_ref.h (dk, dv of a K/V head: the sum
 * over its query heads), at the tolerances of run() above (the kernels' sums
 * are those of the plain form; a shared K/V head's dk, dv sum kvg times as
 * many terms, and the tolerance scales with the largest gradient).  Layouts:
 * contiguous (d, T, nh) arrays (ld = d, hs = T d) or a Llama-style fused
 * (C + 2 Ckv + pad, T) qkv buffer (q of head b at rows b d, k of K/V head h at
 * C + h d, v at C + Ckv + h d, ld = C + 2 Ckv + pad, hs = d), o and dout in
 * (C + pad, T), the pad rows NaN and checked to stay NaN.  And bit for bit:
 * a GQA call equals nb calls of the plain kernels, one per query head (nb =
 * 1), on the shared K/V head's rows in place, in order of head (the fixed
 * order the header promises; kvg = 1 is then the plain form itself). */

typedef struct {
    int d, T, nb, kvg, tq, tk, base, fused, pad;
} gcase;

/* where the kernels see q, k, v, dq, dk, dv (x*), o, dout (o*) */
typedef struct {
    int ld, ldo;
    long long hs, hso;
    size_t nx, no, koff, voff;
} glayout;

static glayout glayout_of(const gcase *g)
{
    int d = g->d, T = g->T, C = g->nb * d, Ckv = g->nb / g->kvg * d;
    glayout L;
    if (g->fused) {
        L.ld = C + 2 * Ckv + g->pad, L.hs = d, L.ldo = C + g->pad, L.hso = d;
        L.koff = (size_t)C, L.voff = (size_t)C + Ckv;
        L.nx = (size_t)L.ld * T, L.no = (size_t)L.ldo * T;
    } else { /* q, k, v back to back in one buffer, each (d, T, nh) */
        L.ld = d, L.hs = (long long)T * d, L.ldo = d, L.hso = (long long)T * d;
        L.koff = (size_t)C * T, L.voff = L.koff + (size_t)Ckv * T;
        L.nx = L.voff + (size_t)Ckv * T, L.no = (size_t)C * T;
    }
    return L;
}

/* contiguous (d, T, nh) x <-> its view at buf + off in (ld, hs) */
static void gput(const float *x, int d, int T, int nh, int ld, long long hs, float *buf)
{
    for (int h = 0; h < nh; h++)
        for (int i = 0; i < T; i++)
            memcpy(buf + (size_t)h * hs + (size_t)i * ld, x + ((size_t)h * T + i) * d,
                   sizeof(float) * d);
}

static void gget(const float *buf, int d, int T, int nh, int ld, long long hs, float *x)
{
    for (int h = 0; h < nh; h++)
        for (int i = 0; i < T; i++)
            memcpy(x + ((size_t)h * T + i) * d, buf + (size_t)h * hs + (size_t)i * ld,
                   sizeof(float) * d);
}

/* The tiled forward (init, every kv tile, finalize) and backward (bwd_dot,
 * every kv tile) over the views; per_head: nb plain calls per tile pair, one
 * per query head, instead of one GQA call.  lse: (T, nb) full. */
static void gqa_tiled(const gcase *g, const glayout *L, int per_head, const float *x, float *o,
                      float *lse, const float *dout, float *dx)
{
    int d = g->d, T = g->T, nb = g->nb, kvg = g->kvg;
    float scale = 1.0f / sqrtf((float)d);
    size_t mq = (size_t)d * g->tq * nb;
    float *ms = kt_alloc(2 * (size_t)g->tq * nb), *acc = kt_alloc(mq);
    float *lt = kt_alloc((size_t)g->tq * nb), *Dt = kt_alloc((size_t)g->tq * nb);
    for (int q0 = 0; q0 < T; q0 += g->tq) {
        int tq = imin(g->tq, T - q0);
        const float *qt = x + (size_t)q0 * L->ld;
        float *dqt = dx + (size_t)q0 * L->ld, *ot = o + (size_t)q0 * L->ldo;
        const float *dot_ = dout + (size_t)q0 * L->ldo;
        tsr_cpu_attn_init(d, tq, nb, ms, acc);
        for (int k0 = 0; k0 < T; k0 += g->tk) {
            int tk = imin(g->tk, T - k0);
            const float *kt = x + L->koff + (size_t)k0 * L->ld, *vt = x + L->voff + (size_t)k0 * L->ld;
            if (!per_head) {
                tsr_cpu_attn_fwd_gqa(d, tq, tk, nb, kvg, g->base + q0, g->base + k0, scale,
                                     L->ld, L->hs, qt, kt, vt, ms, acc);
                continue;
            }
            for (int b = 0; b < nb; b++) {
                size_t kh = (size_t)(b / kvg) * L->hs;
                tsr_cpu_attn_fwd(d, tq, tk, 1, g->base + q0, g->base + k0, scale, L->ld, L->hs,
                                 qt + (size_t)b * L->hs, kt + kh, vt + kh,
                                 ms + 2 * (size_t)b * tq, acc + (size_t)b * tq * d);
            }
        }
        tsr_cpu_attn_finalize(d, tq, nb, ms, acc, L->ldo, L->hso, ot, lt);
        tsr_cpu_attn_bwd_dot(d, tq, nb, L->ldo, L->hso, ot, dot_, Dt);
        for (int b = 0; b < nb; b++)
            memcpy(lse + (size_t)b * T + q0, lt + (size_t)b * tq, sizeof(float) * tq);
        for (int k0 = 0; k0 < T; k0 += g->tk) {
            int tk = imin(g->tk, T - k0);
            size_t ko = (size_t)k0 * L->ld;
            const float *kt = x + L->koff + ko, *vt = x + L->voff + ko;
            float *dkt = dx + L->koff + ko, *dvt = dx + L->voff + ko;
            if (!per_head) {
                tsr_cpu_attn_bwd_gqa(d, tq, tk, nb, kvg, g->base + q0, g->base + k0, scale,
                                     L->ld, L->hs, qt, kt, vt, L->ldo, L->hso, dot_, lt, Dt, dqt,
                                     dkt, dvt);
                continue;
            }
            for (int b = 0; b < nb; b++) {
                size_t qh = (size_t)b * L->hs, kh = (size_t)(b / kvg) * L->hs;
                tsr_cpu_attn_bwd(d, tq, tk, 1, g->base + q0, g->base + k0, scale, L->ld, L->hs,
                                 qt + qh, kt + kh, vt + kh, L->ldo, L->hso,
                                 dot_ + (size_t)b * L->hso, lt + (size_t)b * tq,
                                 Dt + (size_t)b * tq, dqt + qh, dkt + kh, dvt + kh);
            }
        }
    }
    free(ms), free(acc), free(lt), free(Dt);
}

/* every element outside the views (the pad rows) still NaN */
static void assert_nan_outside(const char *what, const float *buf, size_t n, int d, int T, int nh,
                               int ld, long long hs, const size_t *offs, const int *nhs, int nv)
{
    unsigned char *in = calloc(n, 1);
    for (int a = 0; a < nv; a++)
        for (int h = 0; h < nhs[a]; h++)
            for (int i = 0; i < T; i++)
                memset(in + offs[a] + (size_t)h * hs + (size_t)i * ld, 1, (size_t)d);
    (void)nh;
    for (size_t e = 0; e < n; e++)
        cr_assert(in[e] || isnan(buf[e]), "%s: element %zu outside the views was written", what,
                  e);
    free(in);
}

static void gqa_run(gcase g, uint64_t salt, int with_fd)
{
    kt_rng r = kt_seed(salt);
    int d = g.d, T = g.T, nb = g.nb, nkv = nb / g.kvg;
    size_t nq = (size_t)d * T * nb, nk = (size_t)d * T * nkv;
    float *q = kt_rand(&r, nq, -2, 2), *k = kt_rand(&r, nk, -2, 2), *v = kt_rand(&r, nk, -1, 1);
    float *dout = kt_rand(&r, nq, -1, 1);
    float *dq0 = kt_rand(&r, nq, -1, 1), *dk0 = kt_rand(&r, nk, -1, 1), *dv0 = kt_rand(&r, nk, -1, 1);
    glayout L = glayout_of(&g);
    float *x = kt_alloc(L.nx), *dx = kt_alloc(L.nx), *ob = kt_alloc(L.no), *dob = kt_alloc(L.no);
    kt_poison(x, L.nx), kt_poison(dx, L.nx), kt_poison(ob, L.no), kt_poison(dob, L.no);
    gput(q, d, T, nb, L.ld, L.hs, x), gput(k, d, T, nkv, L.ld, L.hs, x + L.koff);
    gput(v, d, T, nkv, L.ld, L.hs, x + L.voff);
    gput(dq0, d, T, nb, L.ld, L.hs, dx), gput(dk0, d, T, nkv, L.ld, L.hs, dx + L.koff);
    gput(dv0, d, T, nkv, L.ld, L.hs, dx + L.voff);
    gput(dout, d, T, nb, L.ldo, L.hso, dob);
    float *ob2 = kt_dup(ob, L.no), *dx2 = kt_dup(dx, L.nx);
    float *lse = kt_alloc((size_t)T * nb), *lse2 = kt_alloc((size_t)T * nb);
    gqa_tiled(&g, &L, 0, x, ob, lse, dob, dx);
    gqa_tiled(&g, &L, 1, x, ob2, lse2, dob, dx2);

    char what[160];
    snprintf(what, sizeof what, "gqa d=%d T=%d nb=%d kvg=%d tiles %dx%d base=%d fused=%d pad=%d",
             d, T, nb, g.kvg, g.tq, g.tk, g.base, g.fused, g.pad);
    /* bit for bit the per-query-head plain calls */
    cr_assert(memcmp(ob, ob2, sizeof(float) * L.no) == 0, "%s: o differs from per-head calls",
              what);
    cr_assert(memcmp(lse, lse2, sizeof(float) * T * nb) == 0, "%s: lse differs", what);
    cr_assert(memcmp(dx, dx2, sizeof(float) * L.nx) == 0,
              "%s: dq, dk, dv differ from per-head calls", what);
    if (g.fused) {
        size_t xo[3] = {0, L.koff, L.voff}, oo[1] = {0};
        int xn[3] = {nb, nkv, nkv}, on[1] = {nb};
        assert_nan_outside(what, dx, L.nx, d, T, nb, L.ld, L.hs, xo, xn, 3);
        assert_nan_outside(what, ob, L.no, d, T, nb, L.ldo, L.hso, oo, on, 1);
    }

    /* against the double reference */
    gqa_shape s = {d, T, T, nb, g.kvg, g.base, g.base};
    double scale = 1.0 / sqrt((double)d);
    double *od = kt_dalloc(nq), *ld = kt_dalloc((size_t)T * nb), *Dd = kt_dalloc((size_t)T * nb);
    gqa_ref_fwd(&s, scale, q, k, v, dout, od, ld, Dd, NULL);
    float *o = kt_alloc(nq), *gq = kt_alloc(nq), *gk = kt_alloc(nk), *gv = kt_alloc(nk);
    gget(ob, d, T, nb, L.ldo, L.hso, o);
    kt_assert_close(what, o, od, nq, 2e-6, 2e-5);
    kt_assert_close("gqa lse", lse, ld, (size_t)T * nb, 2e-6, 2e-6);
    double *rq = kt_dalloc(nq), *rk = kt_dalloc(nk), *rv = kt_dalloc(nk);
    gqa_ref_bwd(&s, scale, q, k, v, dout, ld, Dd, rq, rk, rv);
    if (with_fd) {
        /* the reference's gradient against central differences of sum dout .* o */
        float *xs[3] = {q, k, v};
        double *gs[3] = {rq, rk, rv};
        size_t ns[3] = {nq, nk, nk};
        double *o2 = kt_dalloc(nq), *l2 = kt_dalloc((size_t)T * nb), *D2 = kt_dalloc((size_t)T * nb);
        for (int a = 0; a < 3; a++)
            for (size_t e = 0; e < ns[a]; e++) {
                float x0 = xs[a][e];
                double lp = 0, lm = 0, h = 1.0 / 1024; /* exact in float */
                xs[a][e] = x0 + (float)h;
                gqa_ref_fwd(&s, scale, q, k, v, dout, o2, l2, D2, NULL);
                for (size_t i = 0; i < (size_t)T * nb; i++)
                    lp += D2[i];
                xs[a][e] = x0 - (float)h;
                gqa_ref_fwd(&s, scale, q, k, v, dout, o2, l2, D2, NULL);
                for (size_t i = 0; i < (size_t)T * nb; i++)
                    lm += D2[i];
                xs[a][e] = x0;
                double fd = (lp - lm) / (2 * h);
                cr_assert(fabs(fd - gs[a][e]) <= 1e-4 + 1e-3 * fabs(fd),
                          "gqa reference grad %d[%zu] = %g, finite differences %g", a, e,
                          gs[a][e], fd);
            }
        free(o2), free(l2), free(D2);
    }
    for (size_t e = 0; e < nq; e++)
        rq[e] += dq0[e];
    for (size_t e = 0; e < nk; e++)
        rk[e] += dk0[e], rv[e] += dv0[e];
    double tol = 1e-5 * (1 + kt_dmaxabs(rq, nq) + kt_dmaxabs(rk, nk));
    gget(dx, d, T, nb, L.ld, L.hs, gq);
    gget(dx + L.koff, d, T, nkv, L.ld, L.hs, gk);
    gget(dx + L.voff, d, T, nkv, L.ld, L.hs, gv);
    kt_assert_close("gqa dq", gq, rq, nq, tol, 1e-4);
    kt_assert_close("gqa dk", gk, rk, nk, tol, 1e-4);
    kt_assert_close("gqa dv", gv, rv, nk, tol, 1e-4);
    free(q), free(k), free(v), free(dout), free(dq0), free(dk0), free(dv0), free(x), free(dx);
    free(ob), free(dob), free(ob2), free(dx2), free(lse), free(lse2), free(od), free(ld), free(Dd);
    free(o), free(gq), free(gk), free(gv), free(rq), free(rk), free(rv);
}

/* kvg = 1, 2 and nb (multi-query); GPT-2's and Llama's head dimension 64 with
 * T off the CPU's 64-key block and tiles off it too */
Test(attention, gqa_groups_head_dim_64)
{
    for (int kvg = 1; kvg <= 4; kvg *= 2)
        gqa_run((gcase){.d = 64, .T = 70, .nb = 4, .kvg = kvg, .tq = 32, .tk = 48}, 200 + kvg, 0);
    gqa_run((gcase){.d = 64, .T = 67, .nb = 4, .kvg = 2, .tq = 67, .tk = 67, .base = 9}, 205, 0);
}

/* 6 query heads (not a power of two) over 3, 2 and 1 K/V heads; odd head
 * dimensions; the reference checked by finite differences on a small one */
Test(attention, gqa_six_heads_odd_dims)
{
    gqa_run((gcase){.d = 3, .T = 5, .nb = 6, .kvg = 3, .tq = 2, .tk = 3}, 210, 1);
    gqa_run((gcase){.d = 7, .T = 13, .nb = 6, .kvg = 2, .tq = 5, .tk = 3, .base = 11}, 211, 0);
    gqa_run((gcase){.d = 33, .T = 19, .nb = 6, .kvg = 3, .tq = 7, .tk = 19}, 212, 0);
    gqa_run((gcase){.d = 7, .T = 11, .nb = 6, .kvg = 6, .tq = 11, .tk = 4}, 213, 0);
}

/* the Llama-style fused qkv buffer, padded with NaN rows; the d = 128 and
 * the row-at-a-time (d = 300) forms */
Test(attention, gqa_fused_and_large_heads)
{
    gqa_run((gcase){.d = 64, .T = 40, .nb = 6, .kvg = 3, .tq = 24, .tk = 16, .fused = 1, .pad = 3},
            220, 0);
    gqa_run((gcase){.d = 8, .T = 13, .nb = 6, .kvg = 2, .tq = 5, .tk = 3, .fused = 1, .pad = 1},
            221, 0);
    gqa_run((gcase){.d = 128, .T = 21, .nb = 3, .kvg = 3, .tq = 21, .tk = 10}, 222, 0);
    gqa_run((gcase){.d = 300, .T = 9, .nb = 2, .kvg = 2, .tq = 4, .tk = 9, .fused = 1, .pad = 2},
            223, 0);
}
