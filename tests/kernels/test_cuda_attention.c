/* CUDA attention, softmax pieces, cross-entropy and embedding kernels against
 * the CPU kernels on the same inputs: attention tile pairs on, below and above
 * the diagonal, head dimensions from 1 to 256 (every register-tile variant),
 * tiles smaller than the head dimension and longer than one thread block;
 * device outputs poisoned; the TF32 tensor-core path against a double
 * reference; the strided views of kernels/attention.h: q, k, v of nb heads
 * interleaved in one (3C, t) buffer (ld = 3C, optionally padded with NaN
 * rows, hs = d), o and dout in (C, t), dq, dk, dv in (3C, t), in FP32 and
 * TF32 against the double reference.  Skipped visibly without a GPU. */
#include <tessera/tessera.h>

#include "kernels/attention.h"
#include "kernels/crossentropy.h"
#include "kernels/embedding.h"
#include "kernels/softmax.h"
#include "gqa_ref.h"
#include "kt_cuda.h"

typedef struct {
    int d, tq, tk, nb, q0, k0;
} pcase;

/* Random inputs of one tile pair: q (d, tq, nb), k, v (d, tk, nb), dout like
 * q, and a running state ms (2, tq, nb), acc like q: fresh (max -inf, sum 0,
 * acc 0) or one that already saw some earlier keys (finite max, positive
 * sum). */
typedef struct attn_inputs {
    float *q, *k, *v, *dout, *ms, *acc;
} attn_inputs_t;

static attn_inputs_t attn_inputs(kt_rng *r, int d, int tq, int tk, int nb, bool fresh)
{
    size_t nq = (size_t)d * tq * nb, nk = (size_t)d * tk * nb, rows = (size_t)tq * nb;
    attn_inputs_t in;
    in.q = kt_rand(r, nq, -2, 2);
    in.k = kt_rand(r, nk, -2, 2);
    in.v = kt_rand(r, nk, -1, 1);
    in.dout = kt_rand(r, nq, -1, 1);
    in.ms = kt_alloc(2 * rows);
    in.acc = kt_alloc(nq);
    for (size_t i = 0; i < rows; i++) {
        in.ms[2 * i] = fresh ? -INFINITY : kt_unif(r, -1, 1);
        in.ms[2 * i + 1] = fresh ? 0.0f : kt_unif(r, 0.5f, 2);
    }
    for (size_t e = 0; e < nq; e++)
        in.acc[e] = fresh ? 0.0f : kt_unif(r, -1, 1);
    return in;
}

/* Where the kernels see the operands (kernels/attention.h): q, k, v in one
 * buffer of nx elements at offsets 0, koff, voff with (ld, hs); o and dout in
 * buffers of no elements with (ldo, hso).  Contiguous: three (d, tmax, nb)
 * blocks, tmax = max(tq, tk) (ld = d, hs = tmax d), o (d, tq, nb).  Fused:
 * GPT-2's (3C + pad, tmax) qkv buffer, C = nb d (ld = 3C + pad, hs = d), o
 * in (C + pad, tq) (ldo = C + pad, hso = d). */
typedef struct {
    int ld, ldo;
    long long hs, hso;
    size_t nx, no, koff, voff;
} vlayout;

static vlayout make_layout(int d, int tq, int tk, int nb, int fused, int pad)
{
    vlayout L;
    int tmax = tq > tk ? tq : tk;
    if (fused) {
        int C = nb * d;
        L.ld = 3 * C + pad, L.hs = d, L.nx = (size_t)L.ld * tmax;
        L.koff = (size_t)C, L.voff = 2 * (size_t)C;
        L.ldo = C + pad, L.hso = d, L.no = (size_t)L.ldo * tq;
    } else {
        size_t S = (size_t)d * tmax * nb;
        L.ld = d, L.hs = (long long)tmax * d, L.nx = 3 * S, L.koff = S, L.voff = 2 * S;
        L.ldo = d, L.hso = (long long)tq * d, L.no = (size_t)d * tq * nb;
    }
    return L;
}

/* x (d, n, nb) contiguous <-> the view (ld, hs) at buf + off */
static void to_view(const float *x, int d, int n, int nb, int ld, long long hs, float *buf)
{
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < n; i++)
            memcpy(buf + (size_t)b * hs + (size_t)i * ld, x + ((size_t)b * n + i) * d,
                   sizeof(float) * d);
}

static void from_view(const float *buf, int d, int n, int nb, int ld, long long hs, float *x)
{
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < n; i++)
            memcpy(x + ((size_t)b * n + i) * d, buf + (size_t)b * hs + (size_t)i * ld,
                   sizeof(float) * d);
}

/* A buffer of n NaN with q (d, tq, nb), k, v (d, tk, nb) in their views */
static float *qkv_buffer(const vlayout *L, int d, int tq, int tk, int nb, const float *q,
                         const float *k, const float *v)
{
    float *x = kt_alloc(L->nx);
    kt_poison(x, L->nx);
    to_view(q, d, tq, nb, L->ld, L->hs, x);
    to_view(k, d, tk, nb, L->ld, L->hs, x + L->koff);
    to_view(v, d, tk, nb, L->ld, L->hs, x + L->voff);
    return x;
}

/* Every element of a buffer outside the views is still NaN: nothing wrote
 * there (mark: 1 where a view's element lies) */
static void assert_outside_nan(const char *what, const float *x, const unsigned char *mark,
                               size_t n)
{
    for (size_t e = 0; e < n; e++)
        cr_assert(mark[e] || isnan(x[e]), "%s: element %zu outside the views written (%g)", what,
                  e, x[e]);
}

static unsigned char *view_mark(size_t n, int d, int nb, int ld, long long hs,
                                const size_t *offs, const int *lens, int nviews)
{
    unsigned char *m = calloc(n, 1);
    cr_assert_not_null(m);
    for (int w = 0; w < nviews; w++)
        for (int b = 0; b < nb; b++)
            for (int i = 0; i < lens[w]; i++)
                memset(m + offs[w] + (size_t)b * hs + (size_t)i * ld, 1, (size_t)d);
    return m;
}

static void attn_pair(pcase c, void *st, uint64_t salt)
{
    kt_rng r = kt_seed(salt);
    int d = c.d, tq = c.tq, tk = c.tk, nb = c.nb;
    size_t nq = (size_t)d * tq * nb, rows = (size_t)tq * nb;
    float scale = 1.0f / sqrtf((float)d);
    attn_inputs_t in = attn_inputs(&r, d, tq, tk, nb, false);
    float *ms = in.ms, *acc = in.acc;
    /* contiguous views, q, k, v (and dq, dk, dv) sharing hs = max(tq, tk) d */
    vlayout L = make_layout(d, tq, tk, nb, 0, 0);
    float *x = qkv_buffer(&L, d, tq, tk, nb, in.q, in.k, in.v);
    for (size_t e = 0; e < L.nx; e++) /* the CPU kernels must not read the gaps either */
        x[e] = isnan(x[e]) ? 0.0f : x[e];
    float *q = x, *k = x + L.koff, *v = x + L.voff, *dout = in.dout;
    float *d_x = kt_to_dev(x, L.nx), *d_q = d_x, *d_k = d_x + L.koff, *d_v = d_x + L.voff;
    float *d_ms = kt_to_dev(ms, 2 * rows), *d_acc = kt_to_dev(acc, nq);
    KT_CUDA_OK(tsr_cuda_attn_fwd(st, TSR_ATTN_FP32, d, tq, tk, nb, 1, c.q0, c.k0, scale, L.ld, L.hs,
                                 d_q, d_k, d_v, d_ms, d_acc));
    tsr_cpu_attn_fwd(d, tq, tk, nb, c.q0, c.k0, scale, L.ld, L.hs, q, k, v, ms, acc);
    float *g = kt_from_dev(d_ms, 2 * rows);
    char what[128];
    snprintf(what, sizeof what, "cuda attn_fwd state d=%d tq=%d tk=%d q0=%d k0=%d", d, tq, tk,
             c.q0, c.k0);
    kt_assert_close_f(what, g, ms, 2 * rows, 1e-5, 1e-5);
    free(g);
    g = kt_from_dev(d_acc, nq);
    kt_assert_close_f("cuda attn_fwd acc", g, acc, nq, 1e-5, 1e-4);
    free(g);

    /* finalize and D on both sides, then the backward of the pair */
    float *o = kt_alloc(nq), *lse = kt_alloc(rows), *D = kt_alloc(rows);
    float *d_o = kt_dev(nq), *d_lse = kt_dev(rows), *d_D = kt_dev(rows), *d_do = kt_to_dev(dout, nq);
    KT_CUDA_OK(tsr_cuda_attn_finalize(st, d, tq, nb, d_ms, d_acc, L.ldo, L.hso, d_o, d_lse));
    tsr_cpu_attn_finalize(d, tq, nb, ms, acc, L.ldo, L.hso, o, lse);
    g = kt_from_dev(d_o, nq);
    kt_assert_close_f("cuda attn_finalize o", g, o, nq, 1e-5, 1e-4);
    free(g);
    g = kt_from_dev(d_lse, rows);
    kt_assert_close_f("cuda attn_finalize lse", g, lse, rows, 1e-5, 1e-5);
    free(g);
    KT_CUDA_OK(tsr_cuda_attn_bwd_dot(st, d, tq, nb, L.ldo, L.hso, d_o, d_do, d_D));
    tsr_cpu_attn_bwd_dot(d, tq, nb, L.ldo, L.hso, o, dout, D);
    g = kt_from_dev(d_D, rows);
    kt_assert_close_f("cuda attn_bwd_dot", g, D, rows, 1e-5, 1e-4);
    free(g);
    /* use identical inputs for the backward: the CPU's o, lse, D */
    kt_upload(d_lse, lse, rows), kt_upload(d_D, D, rows);
    float *dx = kt_rand(&r, L.nx, -1, 1);
    float *d_dx = kt_to_dev(dx, L.nx);
    KT_CUDA_OK(tsr_cuda_attn_bwd(st, TSR_ATTN_FP32, d, tq, tk, nb, 1, c.q0, c.k0, scale, L.ld, L.hs,
                                 d_q, d_k, d_v, L.ldo, L.hso, d_do, d_lse, d_D, d_dx,
                                 d_dx + L.koff, d_dx + L.voff));
    tsr_cpu_attn_bwd(d, tq, tk, nb, c.q0, c.k0, scale, L.ld, L.hs, q, k, v, L.ldo, L.hso, dout,
                     lse, D, dx, dx + L.koff, dx + L.voff);
    g = kt_from_dev(d_dx, L.nx);
    kt_assert_close_f("cuda attn_bwd dq", g, dx, L.koff, 1e-4, 1e-4);
    kt_assert_close_f("cuda attn_bwd dk", g + L.koff, dx + L.koff, L.koff, 1e-4, 1e-4);
    kt_assert_close_f("cuda attn_bwd dv", g + L.voff, dx + L.voff, L.koff, 1e-4, 1e-4);
    free(g);
    float *bufs[] = {d_x, d_ms, d_acc, d_o, d_lse, d_D, d_do, d_dx};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        cudaFree(bufs[i]);
    free(in.q), free(in.k), free(in.v), free(x), free(dout), free(ms), free(acc), free(o);
    free(lse), free(D), free(dx);
}

Test(cuda_attention, tile_pairs_all_head_dims)
{
    KT_REQUIRE_GPU();
    void *st = kt_stream();
    const pcase cases[] = {
        {1, 1, 1, 1, 0, 0},       /* 1x1 */
        {8, 13, 7, 2, 20, 20},    /* diagonal at the tile corner */
        {8, 13, 7, 2, 20, 25},    /* diagonal crossing inside */
        {33, 5, 3, 1, 10, 2},     /* tiles smaller than d, fully visible */
        {64, 100, 70, 3, 64, 64}, /* several blocks, GPT-2 head size */
        {64, 64, 64, 2, 0, 64},   /* above the diagonal: no-op */
        {100, 17, 40, 1, 40, 30}, /* d rounds up to 128 */
        {128, 70, 33, 2, 33, 0},
        {256, 40, 37, 1, 3, 0},   /* largest supported d */
        {65, 70, 45, 2, 50, 40},  /* d one past a variant, several key chunks */
        {200, 33, 50, 1, 60, 0},  /* 16-key chunks of the d = 256 variant, all visible */
        {31, 65, 129, 3, 64, 0},  /* queries one past a block, keys past the diagonal */
        {32, 130, 10, 2, 0, 64},  /* the first query block sees no key: state unchanged */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        attn_pair(cases[i], st, 400 + i);
    cudaStreamDestroy((cudaStream_t)st);
}

/* ---- the tensor-core paths (prec = TSR_ATTN_TF32, TSR_ATTN_BF16) ----
 *
 * Compared with a naive double-precision reference of the whole pair
 * (scores, the online-softmax update from a prior state, finalize, the
 * backward), not with the CPU kernels: the TF32 products differ from FP32 by
 * far more than the strict tolerances above.
 *
 * Tolerance.  TF32 keeps 10 mantissa bits: a rounded operand carries a
 * relative error up to u = 2^-11 (4.9e-4); a product of two, 2u.  A score
 * s = scale sum_c q_c k_c then errs by |ds| <= 2u scale sum_c |q_c k_c|, whose
 * first-order effect on o = sum_j w_j v_j / sum_j w_j is sum_j w_j ds_j
 * (v_j - o) / sum_j w_j; p and v are rounded once more (u each).  The
 * rounding errors are independent and of both signs, so over the d terms of
 * a score they add like a random walk: for the inputs here (|q|, |k| <= 2,
 * scale = 1/sqrt(d)) the score error is about 2u rms(q k) ~ 1.3e-3 and the
 * output error, averaged by the softmax weights, stays near u |v|.  We ask
 * max |got - ref| <= 4u max |ref| (1.95e-3, the ~2e-3 the brief of the kernels
 * names) for o and the ADDED part of dq, dk, dv, and 4u (1 + max |s|) for lse
 * (an absolute score error).  An indexing or masking error (a key too many or
 * too few, a wrong row) moves results by a softmax weight, 1e-2 and more. */
#define TF32_U (1.0 / 2048.0)
/* bf16 (TSR_ATTN_BF16) keeps 8 significant bits: the same reasoning with
 * u = 2^-8 (3.9e-3) */
#define BF16_U (1.0 / 256.0)

typedef struct {
    int d, tq, tk, nb, q0, k0, fresh; /* fresh: the state is attn_init's */
} tcase;

/* query i sees key j */
static int sees(const tcase *c, int i, int j)
{
    return (long long)c->k0 + j <= (long long)c->q0 + i;
}

/* max |got - want| over n (both -inf counts as 0; one -inf is infinite) */
static double maxerr(const float *got, const double *want, size_t n)
{
    double e = 0;
    for (size_t i = 0; i < n; i++) {
        double d = isinf(want[i]) && isinf(got[i]) && (want[i] < 0) == (got[i] < 0)
                       ? 0.0
                       : fabs((double)got[i] - want[i]);
        e = d > e || isnan(d) ? (isnan(d) ? INFINITY : d) : e;
    }
    return e;
}

/* max |x - base| over n: the part a kernel added */
static double maxadded(const double *x, const float *base, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fabs(x[i] - base[i]) > m ? fabs(x[i] - base[i]) : m;
    return m;
}

/* how a reference case runs: precision, layout (fused: the (3C + pad, t)
 * qkv buffer, else contiguous views), and the error unit of the precision */
typedef struct {
    int prec, fused, pad;
} rmode;

static void tf32_check(const char *what, const tcase *c, const rmode *md, double err, double tol)
{
    cr_assert(err <= tol,
              "%s d=%d tq=%d tk=%d nb=%d q0=%d k0=%d fresh=%d prec=%d fused=%d pad=%d: max error "
              "%.3g > %.3g",
              what, c->d, c->tq, c->tk, c->nb, c->q0, c->k0, c->fresh, md->prec, md->fused,
              md->pad, err, tol);
}

/* One tile pair against the double reference, in the precision and layout
 * of md; TF32 tolerances (below) for TF32, FP32 ones (U = 2^-17: sums of up
 * to a few hundred rounded terms) for FP32. */
static void attn_ref_case(tcase c, const rmode *md, void *st, uint64_t salt)
{
    const double U = md->prec == TSR_ATTN_TF32   ? TF32_U
                     : md->prec == TSR_ATTN_BF16 ? BF16_U
                                                 : 1.0 / 131072.0;
    kt_rng r = kt_seed(salt);
    int d = c.d, tq = c.tq, tk = c.tk, nb = c.nb;
    size_t nq = (size_t)d * tq * nb, nk = (size_t)d * tk * nb, rows = (size_t)tq * nb;
    float scale = 1.0f / sqrtf((float)d);
    attn_inputs_t in = attn_inputs(&r, d, tq, tk, nb, c.fresh);
    float *q = in.q, *k = in.k, *v = in.v, *dout = in.dout, *ms = in.ms, *acc = in.acc;

    /* reference: (d, tq, nb) o, (tq, nb) lse and D, in double */
    double *o = kt_dalloc(nq), *lse = kt_dalloc(rows), *D = kt_dalloc(rows);
    double *s = kt_dalloc((size_t)tk), smax = 0;
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < tq; i++) {
            size_t row = (size_t)b * tq + i;
            const float *qi = q + row * d;
            double m = ms[2 * row];
            for (int j = 0; j < tk; j++) {
                const float *kj = k + ((size_t)b * tk + j) * d;
                double dot = 0;
                for (int x = 0; x < d; x++)
                    dot += (double)qi[x] * kj[x];
                s[j] = scale * dot;
                if (sees(&c, i, j)) {
                    m = s[j] > m ? s[j] : m;
                    smax = fabs(s[j]) > smax ? fabs(s[j]) : smax;
                }
            }
            double l = m == -INFINITY ? 0.0 : ms[2 * row + 1] * exp(ms[2 * row] - m);
            for (int x = 0; x < d; x++)
                o[row * d + x] = m == -INFINITY ? 0.0 : acc[row * d + x] * exp(ms[2 * row] - m);
            for (int j = 0; j < tk; j++) {
                if (!sees(&c, i, j))
                    continue;
                double p = exp(s[j] - m);
                l += p;
                for (int x = 0; x < d; x++)
                    o[row * d + x] += p * v[((size_t)b * tk + j) * d + x];
            }
            lse[row] = l > 0 ? m + log(l) : -INFINITY;
            D[row] = 0;
            for (int x = 0; x < d; x++) {
                o[row * d + x] = l > 0 ? o[row * d + x] / l : 0.0;
                D[row] += (double)dout[row * d + x] * o[row * d + x];
            }
        }

    /* the kernels' views: q, k, v (and dq, dk, dv) in one buffer, o and
     * dout in another, everything outside the views NaN */
    vlayout L = make_layout(d, tq, tk, nb, md->fused, md->pad);
    size_t offs[3] = {0, L.koff, L.voff}, ooff = 0;
    int lens[3] = {tq, tk, tk};
    unsigned char *xmark = view_mark(L.nx, d, nb, L.ld, L.hs, offs, lens, 3);
    unsigned char *omark = view_mark(L.no, d, nb, L.ldo, L.hso, &ooff, lens, 1);
    float *xb = qkv_buffer(&L, d, tq, tk, nb, q, k, v), *ob = kt_alloc(L.no);
    kt_poison(ob, L.no);

    /* forward from the prior state, then finalize */
    float *d_x = kt_to_dev(xb, L.nx), *d_q = d_x, *d_k = d_x + L.koff, *d_v = d_x + L.voff;
    float *d_ms = kt_to_dev(ms, 2 * rows), *d_acc = kt_to_dev(acc, nq);
    float *d_o = kt_to_dev(ob, L.no), *d_lse = kt_dev(rows);
    KT_CUDA_OK(tsr_cuda_attn_fwd(st, md->prec, d, tq, tk, nb, 1, c.q0, c.k0, scale, L.ld, L.hs, d_q,
                                 d_k, d_v, d_ms, d_acc));
    KT_CUDA_OK(tsr_cuda_attn_finalize(st, d, tq, nb, d_ms, d_acc, L.ldo, L.hso, d_o, d_lse));
    float *gob = kt_from_dev(d_o, L.no), *glse = kt_from_dev(d_lse, rows), *go = kt_alloc(nq);
    assert_outside_nan("attn o", gob, omark, L.no);
    from_view(gob, d, tq, nb, L.ldo, L.hso, go);
    tf32_check("attn o", &c, md, maxerr(go, o, nq), 4 * U * kt_dmaxabs(o, nq) + 1e-6);
    tf32_check("attn lse", &c, md, maxerr(glse, lse, rows), 4 * U * (1 + smax));
    /* a query that saw no key: o = 0 and lse = -inf exactly */
    for (size_t row = 0; row < rows; row++)
        if (lse[row] == -INFINITY) {
            cr_assert(glse[row] == -INFINITY, "tf32 attn: row %zu saw no key, lse %g", row,
                      glse[row]);
            for (int x = 0; x < d; x++)
                cr_assert(go[row * d + x] == 0.0f, "tf32 attn: row %zu saw no key, o %g", row,
                          go[row * d + x]);
        }

    /* backward from the reference's lse and D, added to random dq, dk, dv */
    float *flse = kt_alloc(rows), *fD = kt_alloc(rows);
    for (size_t i = 0; i < rows; i++)
        flse[i] = (float)lse[i], fD[i] = (float)D[i];
    float *dq = kt_rand(&r, nq, -1, 1), *dk = kt_rand(&r, nk, -1, 1), *dv = kt_rand(&r, nk, -1, 1);
    double *rdq = kt_dalloc(nq), *rdk = kt_dalloc(nk), *rdv = kt_dalloc(nk);
    for (size_t e = 0; e < nq; e++)
        rdq[e] = dq[e];
    for (size_t e = 0; e < nk; e++)
        rdk[e] = dk[e], rdv[e] = dv[e];
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < tq; i++) {
            size_t row = (size_t)b * tq + i;
            if (lse[row] == -INFINITY)
                continue;
            const float *qi = q + row * d, *doi = dout + row * d;
            for (int j = 0; j < tk; j++) {
                if (!sees(&c, i, j))
                    continue;
                size_t kr = (size_t)b * tk + j;
                const float *kj = k + kr * d, *vj = v + kr * d;
                double dot = 0, dp = 0;
                for (int x = 0; x < d; x++)
                    dot += (double)qi[x] * kj[x], dp += (double)doi[x] * vj[x];
                double p = exp(scale * dot - (double)flse[row]);
                double ds = p * (dp - (double)fD[row]);
                for (int x = 0; x < d; x++) {
                    rdv[kr * d + x] += p * doi[x];
                    rdq[row * d + x] += scale * ds * kj[x];
                    rdk[kr * d + x] += scale * ds * qi[x];
                }
            }
        }
    float *dob = kt_alloc(L.no), *dxb = qkv_buffer(&L, d, tq, tk, nb, dq, dk, dv);
    kt_poison(dob, L.no);
    to_view(dout, d, tq, nb, L.ldo, L.hso, dob);
    float *d_do = kt_to_dev(dob, L.no), *d_l2 = kt_to_dev(flse, rows), *d_D = kt_to_dev(fD, rows);
    float *d_dx = kt_to_dev(dxb, L.nx);
    KT_CUDA_OK(tsr_cuda_attn_bwd(st, md->prec, d, tq, tk, nb, 1, c.q0, c.k0, scale, L.ld, L.hs, d_q,
                                 d_k, d_v, L.ldo, L.hso, d_do, d_l2, d_D, d_dx, d_dx + L.koff,
                                 d_dx + L.voff));
    float *gx = kt_from_dev(d_dx, L.nx), *g = kt_alloc(nq > nk ? nq : nk);
    assert_outside_nan("attn dq, dk, dv", gx, xmark, L.nx);
    from_view(gx, d, tq, nb, L.ld, L.hs, g);
    tf32_check("attn dq", &c, md, maxerr(g, rdq, nq), 4 * U * maxadded(rdq, dq, nq) + 1e-6);
    from_view(gx + L.koff, d, tk, nb, L.ld, L.hs, g);
    tf32_check("attn dk", &c, md, maxerr(g, rdk, nk), 4 * U * maxadded(rdk, dk, nk) + 1e-6);
    from_view(gx + L.voff, d, tk, nb, L.ld, L.hs, g);
    tf32_check("attn dv", &c, md, maxerr(g, rdv, nk), 4 * U * maxadded(rdv, dv, nk) + 1e-6);
    /* no atomics: a second run adds bit for bit the same */
    if (salt % 2 == 0) {
        kt_upload(d_dx, dxb, L.nx);
        KT_CUDA_OK(tsr_cuda_attn_bwd(st, md->prec, d, tq, tk, nb, 1, c.q0, c.k0, scale, L.ld, L.hs,
                                     d_q, d_k, d_v, L.ldo, L.hso, d_do, d_l2, d_D, d_dx,
                                     d_dx + L.koff, d_dx + L.voff));
        float *g2 = kt_from_dev(d_dx, L.nx);
        for (size_t e = 0; e < L.nx; e++)
            cr_assert(!xmark[e] || memcmp(&gx[e], &g2[e], sizeof(float)) == 0,
                      "attn dq, dk, dv: two runs differ at %zu", e);
        free(g2);
    }
    free(g), free(gx);
    float *bufs[] = {d_x, d_ms, d_acc, d_o, d_lse, d_do, d_l2, d_D, d_dx};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        cudaFree(bufs[i]);
    free(q), free(k), free(v), free(dout), free(ms), free(acc), free(o), free(lse), free(D);
    free(s), free(go), free(gob), free(glse), free(flse), free(fD), free(dq), free(dk), free(dv);
    free(rdq), free(rdk), free(rdv), free(xb), free(ob), free(dob), free(dxb), free(xmark);
    free(omark);
}

/* Head dimensions off 16 and the three tensor-core variants (DMAX 32, 64,
 * 128: 80 and 96 padded to 128, whose chunks are 16 rows), those that fall
 * back to the FP32 kernels (136, 200); tiles of 16..256 rows, edge tiles off
 * 16 and off the 64-row blocks and 32-row chunks; the diagonal
 * at a corner, crossing inside, q0 != k0 either way; fully visible pairs;
 * rows that see no key (o = 0, lse = -inf from a fresh state). */
Test(cuda_attention, tensor_cores_against_double)
{
    KT_REQUIRE_GPU();
    void *st = kt_stream();
    const tcase cases[] = {
        {64, 256, 256, 2, 0, 0, 1},    /* causal diagonal, 4 blocks, 8 chunks */
        {64, 100, 70, 3, 64, 64, 0},   /* edge tiles, diagonal at the corner */
        {16, 16, 16, 2, 0, 0, 1},      /* one warp tile */
        {1, 5, 3, 1, 2, 0, 0},         /* d = 1 */
        {8, 13, 7, 2, 20, 25, 1},      /* q0 < k0: the diagonal inside, rows that see nothing */
        {32, 48, 40, 2, 10, 0, 0},     /* DMAX 32, q0 > k0 */
        {48, 33, 50, 1, 60, 0, 1},     /* d off 16, every key visible */
        {31, 65, 129, 3, 64, 0, 0},    /* queries one past a block, keys past the diagonal */
        {64, 130, 10, 2, 0, 64, 1},    /* the first query block sees no key */
        {40, 97, 113, 1, 200, 180, 1}, /* the diagonal crossing off every multiple of 16 */
        {64, 128, 192, 1, 64, 0, 0},   /* more keys than queries */
        {80, 40, 37, 1, 3, 0, 0},      /* DMAX 128, padded */
        {128, 33, 20, 1, 10, 0, 1},    /* Llama's head: DMAX 128 */
        {128, 130, 150, 2, 0, 0, 1},   /* DMAX 128, causal diagonal, 3 blocks, 16-row chunks */
        {96, 70, 45, 1, 40, 17, 0},    /* DMAX 128, the diagonal crossing inside */
        {136, 21, 19, 1, 0, 0, 0},     /* above 128: the FP32 kernels */
        {200, 17, 16, 1, 0, 0, 0},
    };
    const rmode modes[] = {{TSR_ATTN_TF32, 0, 0}, {TSR_ATTN_BF16, 0, 0}};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            attn_ref_case(cases[i], &modes[m], st, 480 + 40 * m + i);
    cudaStreamDestroy((cudaStream_t)st);
}

/* GPT-2's layout: q, k, v of nb heads read in place from one (3C, t) buffer
 * (ld = 3C, hs = d), o written into (C, t), dout read from it, dq, dk, dv
 * added into (3C, t); padded ld (3C + pad, NaN rows a wrong ld or hs would
 * read, or a stray write would overwrite); both precisions, both tensor-core
 * variants and the FP32 fallback (d = 136), against the double reference. */
Test(cuda_attention, fused_qkv_strided_views)
{
    KT_REQUIRE_GPU();
    void *st = kt_stream();
    const tcase cases[] = {
        {64, 128, 128, 4, 0, 0, 1},   /* GPT-2's head, diagonal pair, 4 heads */
        {64, 100, 70, 3, 64, 64, 0},  /* edge tiles, diagonal at the corner */
        {32, 48, 40, 2, 10, 0, 0},    /* DMAX 32, q0 > k0 */
        {8, 13, 7, 3, 20, 25, 1},     /* rows that see nothing */
        {128, 70, 70, 2, 0, 0, 1},    /* DMAX 128, diagonal pair */
        {136, 40, 37, 2, 3, 0, 0},    /* above 128: the FP32 kernels */
    };
    const rmode modes[] = {{TSR_ATTN_FP32, 1, 0}, {TSR_ATTN_TF32, 1, 0}, {TSR_ATTN_FP32, 1, 3},
                           {TSR_ATTN_TF32, 1, 5}, {TSR_ATTN_BF16, 1, 4}};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            attn_ref_case(cases[i], &modes[m], st, 500 + 10 * m + i);
    cudaStreamDestroy((cudaStream_t)st);
}

/* A tile of nseq whole sequences (GPT-2's GPU tile holds the batch): one
 * launch over every head of every sequence adds, bit for bit, what one
 * launch per sequence adds (the reference: the per-sequence call the
 * double-precision tests above check), in each precision; q, k, v in the
 * fused (3C, nseq T) layout. */
Test(cuda_attention, sequences_of_a_tile_in_one_launch)
{
    KT_REQUIRE_GPU();
    void *st = kt_stream();
    const int d = 64, H = 3, T = 80, nseq = 3, C = H * d, ld = 3 * C;
    const size_t nx = (size_t)ld * T * nseq, no = (size_t)C * T * nseq;
    const size_t rows = (size_t)T * H * nseq, sr = (size_t)T * H;
    kt_rng r = kt_seed(77);
    float *x = kt_rand(&r, nx, -1, 1), *dout = kt_rand(&r, no, -1, 1);
    float *lse = kt_rand(&r, rows, 1, 2), *D = kt_rand(&r, rows, -0.1f, 0.1f);
    float *ms = kt_alloc(2 * rows), *acc = kt_alloc(rows * d);
    for (size_t i = 0; i < rows; i++)
        ms[2 * i] = -INFINITY, ms[2 * i + 1] = 0;
    for (size_t i = 0; i < rows * d; i++)
        acc[i] = 0;
    float *d_x = kt_to_dev(x, nx), *d_do = kt_to_dev(dout, no), *d_l = kt_to_dev(lse, rows);
    float *d_D = kt_to_dev(D, rows);
    const int precs[] = {TSR_ATTN_FP32, TSR_ATTN_TF32, TSR_ATTN_BF16};
    for (size_t p = 0; p < sizeof precs / sizeof precs[0]; p++) {
        float *out[2][5]; /* [one launch, per sequence][ms, acc, dq.., dk.., dv: the (3C) tile] */
        for (int way = 0; way < 2; way++) {
            float *d_ms = kt_to_dev(ms, 2 * rows), *d_acc = kt_to_dev(acc, rows * d);
            float *d_g = kt_dev(nx); /* dq, dk, dv: rows 0, C, 2C of the fused gradient */
            KT_CUDA_OK(cudaMemset(d_g, 0, nx * sizeof(float)) == cudaSuccess ? 0 : 1);
            int ns = way == 0 ? nseq : 1;
            for (int s0 = 0; s0 < nseq; s0 += ns) {
                size_t qo = (size_t)s0 * T * ld, oo = (size_t)s0 * T * C, so = (size_t)s0 * sr;
                KT_CUDA_OK(tsr_cuda_attn_fwd(st, precs[p], d, T, T, H, ns, 0, 0, 0.125f, ld, d,
                                             d_x + qo, d_x + qo + C, d_x + qo + 2 * C,
                                             d_ms + 2 * so, d_acc + so * d));
                KT_CUDA_OK(tsr_cuda_attn_bwd(st, precs[p], d, T, T, H, ns, 0, 0, 0.125f, ld, d,
                                             d_x + qo, d_x + qo + C, d_x + qo + 2 * C, C, d,
                                             d_do + oo, d_l + so, d_D + so, d_g + qo,
                                             d_g + qo + C, d_g + qo + 2 * C));
            }
            out[way][0] = kt_from_dev(d_ms, 2 * rows);
            out[way][1] = kt_from_dev(d_acc, rows * d);
            out[way][2] = kt_from_dev(d_g, nx);
            cudaFree(d_ms), cudaFree(d_acc), cudaFree(d_g);
        }
        const size_t n[3] = {2 * rows, rows * d, nx};
        const char *what[3] = {"ms", "acc", "dq, dk, dv"};
        for (int i = 0; i < 3; i++) {
            cr_assert(memcmp(out[0][i], out[1][i], n[i] * sizeof(float)) == 0,
                      "prec %d: %s of one launch differs from per-sequence launches", precs[p],
                      what[i]);
            double nz = 0;
            for (size_t e = 0; e < n[i]; e++)
                nz += out[0][i][e] != 0 && isfinite(out[0][i][e]);
            cr_assert(nz > n[i] / 4, "prec %d: %s mostly untouched", precs[p], what[i]);
            free(out[0][i]), free(out[1][i]);
        }
    }
    cudaFree(d_x), cudaFree(d_do), cudaFree(d_l), cudaFree(d_D);
    free(x), free(dout), free(lse), free(D), free(ms), free(acc);
    cudaStreamDestroy((cudaStream_t)st);
}

/* ---- grouped-query attention (tsr_cuda_attn_fwd_gqa, _bwd_gqa) ----------
 * nh query heads over nh / kvg K/V heads per sequence, nseq sequences in one
 * launch, query head h reading K/V head h / kvg; one tile pair from a fresh
 * state against the double reference of gqa_ref.h, the backward from the
 * reference's lse and D (as attn_ref_case does).  Tolerances: those of
 * attn_ref_case (4u max |ref| for o, 4u (1 + max |s|) for lse, 4u max
 * |added| for dq, dk, dv, u the operand precision's unit).  A shared K/V
 * head's dk, dv add kvg query heads' sums of the same rounded products: each
 * term's error is bounded as before and they add like a random walk while
 * the magnitude grows with them, so the same relative bound holds.  Also: the
 * forward (o, lse) and dq equal bit for bit the plain kernels on K/V copied
 * per query head (the query-side kernels only index K/V differently), and a
 * second backward adds bit for bit the same (no atomics). */
typedef struct {
    int d, tq, tk, nh, kvg, nseq, q0, k0;
} gqcase;

/* Where the kernels see the operands, for nkh K/V heads per sequence.
 * Fused (Llama): a (C + 2 Ckv + pad, nseq tmax) buffer, q of head h of
 * sequence s, position i at (s tq + i) ld + h d, k at (s tk + j) ld + C + h d,
 * v at + Ckv (ld = C + 2 Ckv + pad, hs = d); o in (C + pad, nseq tq).
 * Contiguous (nseq = 1): q, k, v blocks (d, tmax, heads), ld = d,
 * hs = tmax d; o (d, tq, nh). */
typedef struct {
    int ld, ldo;
    long long hs, hso;
    size_t nx, no, koff, voff;
} gqlayout;

static gqlayout gq_layout(const gqcase *c, int nkh, const rmode *md)
{
    int d = c->d, tmax = c->tq > c->tk ? c->tq : c->tk, C = c->nh * d, Ckv = nkh * d;
    gqlayout L;
    if (md->fused) {
        L.ld = C + 2 * Ckv + md->pad, L.hs = d, L.ldo = C + md->pad, L.hso = d;
        L.koff = (size_t)C, L.voff = (size_t)C + Ckv;
        L.nx = (size_t)L.ld * c->nseq * tmax, L.no = (size_t)L.ldo * c->nseq * c->tq;
    } else {
        cr_assert(c->nseq == 1, "contiguous views hold one sequence");
        L.ld = d, L.hs = (long long)tmax * d, L.ldo = d, L.hso = (long long)c->tq * d;
        L.koff = (size_t)C * tmax, L.voff = L.koff + (size_t)Ckv * tmax;
        L.nx = L.voff + (size_t)Ckv * tmax, L.no = (size_t)C * c->tq;
    }
    return L;
}

/* contiguous x (d, t, nseq nh) <-> the view at buf (positions t per
 * sequence, stride ld, heads hs apart); mark (if not NULL) flags the view */
static void gq_view(float *buf, unsigned char *mark, int ld, long long hs, int d, int t,
                    int nseq, int nh, float *x, int put)
{
    for (int s = 0; s < nseq; s++)
        for (int h = 0; h < nh; h++)
            for (int i = 0; i < t; i++) {
                size_t at = ((size_t)s * t + i) * ld + (size_t)h * hs;
                float *xr = x + (((size_t)s * nh + h) * t + i) * d;
                if (mark)
                    memset(mark + at, 1, (size_t)d);
                else if (put)
                    memcpy(buf + at, xr, sizeof(float) * d);
                else
                    memcpy(xr, buf + at, sizeof(float) * d);
            }
}

/* the kernels' run: fwd_gqa, finalize (per sequence), then bwd_gqa from
 * lse, D (nseq tq nh each) added to dxb; returns o's buffer, lse, the
 * gradients' buffer (dxb's layout); kvg 1 on expanded K/V: the plain calls */
typedef struct {
    float *o, *lse, *dx;
} gqout;

static gqout gq_run(const gqcase *c, const rmode *md, const gqlayout *L, int kvg, void *st,
                    const float *xb, const float *dob, const float *flse, const float *fD,
                    const float *dxb, int twice)
{
    int d = c->d, nh = c->nh, tq = c->tq;
    size_t rows = (size_t)c->nseq * nh * tq;
    float scale = 1.0f / sqrtf((float)d);
    float *ob = kt_alloc(L->no);
    kt_poison(ob, L->no);
    float *d_x = kt_to_dev(xb, L->nx), *d_ms = kt_dev(2 * rows), *d_acc = kt_dev(rows * d);
    float *d_o = kt_to_dev(ob, L->no), *d_lse = kt_dev(rows), *d_do = kt_to_dev(dob, L->no);
    float *d_l = kt_to_dev(flse, rows), *d_D = kt_to_dev(fD, rows), *d_dx = kt_to_dev(dxb, L->nx);
    KT_CUDA_OK(tsr_cuda_attn_init(st, d, tq, nh * c->nseq, d_ms, d_acc));
    if (kvg == 1 && twice < 0) /* the plain entry point */
        KT_CUDA_OK(tsr_cuda_attn_fwd(st, md->prec, d, tq, c->tk, nh, c->nseq, c->q0, c->k0, scale,
                                     L->ld, L->hs, d_x, d_x + L->koff, d_x + L->voff, d_ms,
                                     d_acc));
    else
        KT_CUDA_OK(tsr_cuda_attn_fwd_gqa(st, md->prec, d, tq, c->tk, nh, kvg, c->nseq, c->q0,
                                         c->k0, scale, L->ld, L->hs, d_x, d_x + L->koff,
                                         d_x + L->voff, d_ms, d_acc));
    size_t sr = (size_t)tq * nh;
    for (int s = 0; s < c->nseq; s++)
        KT_CUDA_OK(tsr_cuda_attn_finalize(st, d, tq, nh, d_ms + 2 * s * sr, d_acc + s * sr * d,
                                          L->ldo, L->hso, d_o + (size_t)s * tq * L->ldo,
                                          d_lse + s * sr));
    for (int rep = 0; rep < (twice > 0 ? 2 : 1); rep++) {
        if (kvg == 1 && twice < 0)
            KT_CUDA_OK(tsr_cuda_attn_bwd(st, md->prec, d, tq, c->tk, nh, c->nseq, c->q0, c->k0,
                                         scale, L->ld, L->hs, d_x, d_x + L->koff, d_x + L->voff,
                                         L->ldo, L->hso, d_do, d_l, d_D, d_dx, d_dx + L->koff,
                                         d_dx + L->voff));
        else
            KT_CUDA_OK(tsr_cuda_attn_bwd_gqa(st, md->prec, d, tq, c->tk, nh, kvg, c->nseq, c->q0,
                                             c->k0, scale, L->ld, L->hs, d_x, d_x + L->koff,
                                             d_x + L->voff, L->ldo, L->hso, d_do, d_l, d_D, d_dx,
                                             d_dx + L->koff, d_dx + L->voff));
        if (rep == 0 && twice > 0) {
            float *g1 = kt_from_dev(d_dx, L->nx);
            kt_upload(d_dx, dxb, L->nx);
            KT_CUDA_OK(tsr_cuda_attn_bwd_gqa(st, md->prec, d, tq, c->tk, nh, kvg, c->nseq, c->q0,
                                             c->k0, scale, L->ld, L->hs, d_x, d_x + L->koff,
                                             d_x + L->voff, L->ldo, L->hso, d_do, d_l, d_D, d_dx,
                                             d_dx + L->koff, d_dx + L->voff));
            float *g2 = kt_from_dev(d_dx, L->nx);
            cr_assert(memcmp(g1, g2, sizeof(float) * L->nx) == 0,
                      "gqa bwd: two runs differ (d=%d nh=%d kvg=%d prec=%d)", d, nh, kvg,
                      md->prec);
            free(g1), free(g2);
            break;
        }
    }
    gqout out = {kt_from_dev(d_o, L->no), kt_from_dev(d_lse, rows), kt_from_dev(d_dx, L->nx)};
    float *bufs[] = {d_x, d_ms, d_acc, d_o, d_lse, d_do, d_l, d_D, d_dx};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        cudaFree(bufs[i]);
    free(ob);
    return out;
}

static void gqa_cuda_case(gqcase c, const rmode *md, void *st, uint64_t salt)
{
    const double U = md->prec == TSR_ATTN_TF32   ? TF32_U
                     : md->prec == TSR_ATTN_BF16 ? BF16_U
                                                 : 1.0 / 131072.0;
    kt_rng r = kt_seed(salt);
    int d = c.d, tq = c.tq, tk = c.tk, nh = c.nh, nkh = nh / c.kvg;
    int NB = c.nseq * nh, NK = c.nseq * nkh; /* heads of all sequences */
    size_t nq = (size_t)d * tq * NB, nk = (size_t)d * tk * NK, rows = (size_t)tq * NB;
    float *q = kt_rand(&r, nq, -2, 2), *k = kt_rand(&r, nk, -2, 2), *v = kt_rand(&r, nk, -1, 1);
    float *dout = kt_rand(&r, nq, -1, 1);
    float *dq = kt_rand(&r, nq, -1, 1), *dk = kt_rand(&r, nk, -1, 1), *dv = kt_rand(&r, nk, -1, 1);
    char what[160];
    snprintf(what, sizeof what,
             "gqa d=%d tq=%d tk=%d nh=%d kvg=%d nseq=%d q0=%d k0=%d prec=%d fused=%d pad=%d", d,
             tq, tk, nh, c.kvg, c.nseq, c.q0, c.k0, md->prec, md->fused, md->pad);

    /* reference */
    gqa_shape sh = {d, tq, tk, NB, c.kvg, c.q0, c.k0};
    double scale = 1.0 / sqrt((double)d), smax;
    double *o = kt_dalloc(nq), *lse = kt_dalloc(rows), *D = kt_dalloc(rows);
    gqa_ref_fwd(&sh, (float)(1.0f / sqrtf((float)d)), q, k, v, dout, o, lse, D, &smax);
    (void)scale;
    float *flse = kt_alloc(rows), *fD = kt_alloc(rows);
    double *dlse = kt_dalloc(rows), *dD = kt_dalloc(rows);
    for (size_t i = 0; i < rows; i++)
        flse[i] = (float)lse[i], fD[i] = (float)D[i], dlse[i] = flse[i], dD[i] = fD[i];
    double *rq = kt_dalloc(nq), *rk = kt_dalloc(nk), *rv = kt_dalloc(nk);
    for (size_t e = 0; e < nq; e++)
        rq[e] = dq[e];
    for (size_t e = 0; e < nk; e++)
        rk[e] = dk[e], rv[e] = dv[e];
    gqa_ref_bwd(&sh, (float)(1.0f / sqrtf((float)d)), q, k, v, dout, dlse, dD, rq, rk, rv);

    /* the GQA views and run (the backward twice: determinism) */
    gqlayout L = gq_layout(&c, nkh, md);
    float *xb = kt_alloc(L.nx), *dxb = kt_alloc(L.nx), *dob = kt_alloc(L.no);
    kt_poison(xb, L.nx), kt_poison(dxb, L.nx), kt_poison(dob, L.no);
    gq_view(xb, NULL, L.ld, L.hs, d, tq, c.nseq, nh, q, 1);
    gq_view(xb + L.koff, NULL, L.ld, L.hs, d, tk, c.nseq, nkh, k, 1);
    gq_view(xb + L.voff, NULL, L.ld, L.hs, d, tk, c.nseq, nkh, v, 1);
    gq_view(dxb, NULL, L.ld, L.hs, d, tq, c.nseq, nh, dq, 1);
    gq_view(dxb + L.koff, NULL, L.ld, L.hs, d, tk, c.nseq, nkh, dk, 1);
    gq_view(dxb + L.voff, NULL, L.ld, L.hs, d, tk, c.nseq, nkh, dv, 1);
    gq_view(dob, NULL, L.ldo, L.hso, d, tq, c.nseq, nh, dout, 1);
    gqout g = gq_run(&c, md, &L, c.kvg, st, xb, dob, flse, fD, dxb, salt % 2 == 0);

    /* nothing outside the views written */
    unsigned char *xm = calloc(L.nx, 1), *om = calloc(L.no, 1);
    gq_view(NULL, xm, L.ld, L.hs, d, tq, c.nseq, nh, NULL, 0);
    gq_view(NULL, xm + L.koff, L.ld, L.hs, d, tk, c.nseq, nkh, NULL, 0);
    gq_view(NULL, xm + L.voff, L.ld, L.hs, d, tk, c.nseq, nkh, NULL, 0);
    gq_view(NULL, om, L.ldo, L.hso, d, tq, c.nseq, nh, NULL, 0);
    assert_outside_nan("gqa dq, dk, dv", g.dx, xm, L.nx);
    assert_outside_nan("gqa o", g.o, om, L.no);

    float *go = kt_alloc(nq), *gq = kt_alloc(nq), *gk = kt_alloc(nk), *gv = kt_alloc(nk);
    gq_view(g.o, NULL, L.ldo, L.hso, d, tq, c.nseq, nh, go, 0);
    gq_view(g.dx, NULL, L.ld, L.hs, d, tq, c.nseq, nh, gq, 0);
    gq_view(g.dx + L.koff, NULL, L.ld, L.hs, d, tk, c.nseq, nkh, gk, 0);
    gq_view(g.dx + L.voff, NULL, L.ld, L.hs, d, tk, c.nseq, nkh, gv, 0);
    tcase tc = {d, tq, tk, NB, c.q0, c.k0, 1}; /* for the messages */
    cr_log_info("%s", what);
    tf32_check("gqa o", &tc, md, maxerr(go, o, nq), 4 * U * kt_dmaxabs(o, nq) + 1e-6);
    tf32_check("gqa lse", &tc, md, maxerr(g.lse, lse, rows), 4 * U * (1 + smax));
    for (size_t row = 0; row < rows; row++)
        if (lse[row] == -INFINITY)
            cr_assert(g.lse[row] == -INFINITY, "%s: row %zu saw no key, lse %g", what, row,
                      g.lse[row]);
    tf32_check("gqa dq", &tc, md, maxerr(gq, rq, nq), 4 * U * maxadded(rq, dq, nq) + 1e-6);
    tf32_check("gqa dk", &tc, md, maxerr(gk, rk, nk), 4 * U * maxadded(rk, dk, nk) + 1e-6);
    tf32_check("gqa dv", &tc, md, maxerr(gv, rv, nk), 4 * U * maxadded(rv, dv, nk) + 1e-6);

    /* the plain kernels on K/V copied per query head: o, lse, dq bit for bit */
    float *ke = kt_alloc((size_t)d * tk * NB), *ve = kt_alloc((size_t)d * tk * NB);
    float *dke = kt_alloc((size_t)d * tk * NB), *dve = kt_alloc((size_t)d * tk * NB);
    for (int b = 0; b < NB; b++) {
        size_t n = (size_t)d * tk, src = (size_t)(b / c.kvg) * n;
        memcpy(ke + b * n, k + src, sizeof(float) * n);
        memcpy(ve + b * n, v + src, sizeof(float) * n);
        memcpy(dke + b * n, dk + src, sizeof(float) * n);
        memcpy(dve + b * n, dv + src, sizeof(float) * n);
    }
    gqlayout E = gq_layout(&c, nh, md);
    float *xe = kt_alloc(E.nx), *dxe = kt_alloc(E.nx);
    kt_poison(xe, E.nx), kt_poison(dxe, E.nx);
    gq_view(xe, NULL, E.ld, E.hs, d, tq, c.nseq, nh, q, 1);
    gq_view(xe + E.koff, NULL, E.ld, E.hs, d, tk, c.nseq, nh, ke, 1);
    gq_view(xe + E.voff, NULL, E.ld, E.hs, d, tk, c.nseq, nh, ve, 1);
    gq_view(dxe, NULL, E.ld, E.hs, d, tq, c.nseq, nh, dq, 1);
    gq_view(dxe + E.koff, NULL, E.ld, E.hs, d, tk, c.nseq, nh, dke, 1);
    gq_view(dxe + E.voff, NULL, E.ld, E.hs, d, tk, c.nseq, nh, dve, 1);
    gqcase ce = c;
    ce.kvg = 1;
    gqout e = gq_run(&ce, md, &E, 1, st, xe, dob, flse, fD, dxe, -1);
    float *eo = kt_alloc(nq), *eq = kt_alloc(nq);
    gq_view(e.o, NULL, E.ldo, E.hso, d, tq, c.nseq, nh, eo, 0);
    gq_view(e.dx, NULL, E.ld, E.hs, d, tq, c.nseq, nh, eq, 0);
    cr_assert(memcmp(eo, go, sizeof(float) * nq) == 0, "%s: o differs from the plain kernels on "
              "copied K/V", what);
    cr_assert(memcmp(e.lse, g.lse, sizeof(float) * rows) == 0, "%s: lse differs from the plain "
              "kernels on copied K/V", what);
    cr_assert(memcmp(eq, gq, sizeof(float) * nq) == 0, "%s: dq differs from the plain kernels on "
              "copied K/V", what);
    /* kv_group = 1: the same layout, and dk, dv too bit for bit the plain entry points' */
    if (c.kvg == 1)
        cr_assert(memcmp(e.dx, g.dx, sizeof(float) * L.nx) == 0,
                  "%s: kv_group 1 differs from tsr_cuda_attn_bwd", what);

    free(q), free(k), free(v), free(dout), free(dq), free(dk), free(dv), free(o), free(lse);
    free(D), free(flse), free(fD), free(dlse), free(dD), free(rq), free(rk), free(rv);
    free(xb), free(dxb), free(dob), free(g.o), free(g.lse), free(g.dx), free(xm), free(om);
    free(go), free(gq), free(gk), free(gv), free(ke), free(ve), free(dke), free(dve), free(xe), free(dxe);
    free(e.o), free(e.lse), free(e.dx), free(eo), free(eq);
}

/* kvg = 1, 2 and nh (multi-query); 6 heads over 3, 2 and 1 K/V heads; head
 * dimensions 128, 64, 32, 31 (not a multiple of 4: no cp.async) and 8 on
 * the tensor cores, 136 on the FP32 kernels; tiles off the 64-row blocks and
 * 32-row chunks, the diagonal crossing inside, rows that see no key; several
 * sequences in one launch; contiguous and Llama-style fused views (padded
 * with NaN rows); TF32, bf16 and FP32. */
Test(cuda_attention, grouped_query_heads)
{
    KT_REQUIRE_GPU();
    void *st = kt_stream();
    const gqcase cases[] = {
        {64, 70, 70, 4, 2, 1, 0, 0},  /* GQA, causal diagonal, T off the tiles */
        {64, 40, 70, 4, 4, 1, 30, 0}, /* multi-query, more keys than queries */
        {64, 33, 33, 2, 1, 1, 0, 0},  /* kvg = 1 */
        {31, 33, 47, 6, 3, 1, 20, 5}, /* 6 heads over 2, d off 4 */
        {8, 13, 7, 6, 6, 1, 20, 25},  /* 6 heads over 1, rows that see nothing */
        {32, 20, 20, 6, 2, 1, 0, 0},  /* 6 heads over 3, DMAX 32 */
        {128, 40, 40, 4, 2, 1, 0, 0}, /* Llama's head, GQA: DMAX 128 */
        {136, 21, 17, 4, 2, 1, 3, 0}, /* above 128: the FP32 kernels */
    };
    const rmode modes[] = {{TSR_ATTN_TF32, 0, 0}, {TSR_ATTN_BF16, 0, 0}, {TSR_ATTN_FP32, 0, 0}};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            gqa_cuda_case(cases[i], &modes[m], st, 900 + 20 * m + i);
    const gqcase fused[] = {
        {64, 37, 37, 6, 2, 2, 0, 0}, /* Llama's layout, 2 sequences in one launch */
        {8, 13, 7, 6, 3, 2, 20, 25},
        {80, 17, 17, 4, 4, 2, 0, 0},
    };
    const rmode fmodes[] = {{TSR_ATTN_TF32, 1, 3}, {TSR_ATTN_BF16, 1, 0}, {TSR_ATTN_FP32, 1, 5}};
    for (size_t m = 0; m < sizeof fmodes / sizeof fmodes[0]; m++)
        for (size_t i = 0; i < sizeof fused / sizeof fused[0]; i++)
            gqa_cuda_case(fused[i], &fmodes[m], st, 980 + 10 * m + i);
    cudaStreamDestroy((cudaStream_t)st);
}

/* kv_group must be at least 1 and divide the query heads */
Test(cuda_attention, gqa_rejects_a_bad_group)
{
    KT_REQUIRE_GPU();
    void *st = kt_stream();
    float *x = kt_dev(64);
    cr_assert(tsr_cuda_attn_fwd_gqa(st, TSR_ATTN_TF32, 8, 1, 1, 6, 4, 1, 0, 0, 1.0f, 8, 8, x, x,
                                    x, x, x) == TSR_EINVAL);
    cr_assert(kt_msg_has("tsr_cuda_attn_fwd_gqa: kv_group 4 does not divide the 6"), "message: %s",
              tsr_cuda_last_error());
    cr_assert(tsr_cuda_attn_fwd_gqa(st, TSR_ATTN_FP32, 8, 1, 1, 6, 0, 1, 0, 0, 1.0f, 8, 8, x, x,
                                    x, x, x) != 0);
    cr_assert(tsr_cuda_attn_bwd_gqa(st, TSR_ATTN_BF16, 8, 1, 1, 6, 5, 1, 0, 0, 1.0f, 8, 8, x, x,
                                    x, 8, 8, x, x, x, x, x, x) == TSR_EINVAL);
    cr_assert(kt_msg_has("tsr_cuda_attn_bwd_gqa: kv_group 5"), "message: %s",
              tsr_cuda_last_error());
    KT_CUDA_OK(cudaGetLastError()); /* nothing was launched */
    cudaFree(x);
    cudaStreamDestroy((cudaStream_t)st);
}

Test(cuda_attention, init_and_merge)
{
    KT_REQUIRE_GPU();
    void *st = kt_stream();
    kt_rng r = kt_seed(420);
    int d = 24, tq = 9, nb = 2;
    size_t rows = (size_t)tq * nb, n = (size_t)d * rows;
    float *ms1 = kt_alloc(2 * rows), *ms2 = kt_alloc(2 * rows), *a1 = kt_rand(&r, n, -1, 1);
    float *a2 = kt_rand(&r, n, -1, 1);
    for (size_t i = 0; i < rows; i++) {
        ms1[2 * i] = kt_unif(&r, -3, 3), ms1[2 * i + 1] = kt_unif(&r, 0.5f, 3);
        ms2[2 * i] = kt_unif(&r, -3, 3), ms2[2 * i + 1] = kt_unif(&r, 0.5f, 3);
    }
    ms2[0] = -INFINITY, ms2[1] = 0; /* an empty source row */
    float *d1 = kt_to_dev(ms1, 2 * rows), *d2 = kt_to_dev(ms2, 2 * rows);
    float *e1 = kt_to_dev(a1, n), *e2 = kt_to_dev(a2, n);
    KT_CUDA_OK(tsr_cuda_attn_merge(st, d, tq, nb, d2, e2, d1, e1));
    tsr_cpu_attn_merge(d, tq, nb, ms2, a2, ms1, a1);
    float *g = kt_from_dev(d1, 2 * rows);
    kt_assert_close_f("cuda attn_merge ms", g, ms1, 2 * rows, 1e-6, 1e-5);
    free(g);
    g = kt_from_dev(e1, n);
    kt_assert_close_f("cuda attn_merge acc", g, a1, n, 1e-6, 1e-5);
    free(g);
    KT_CUDA_OK(tsr_cuda_attn_init(st, d, tq, nb, d1, e1));
    tsr_cpu_attn_init(d, tq, nb, ms1, a1);
    g = kt_from_dev(d1, 2 * rows);
    kt_assert_close_f("cuda attn_init ms", g, ms1, 2 * rows, 0, 0);
    free(g);
    g = kt_from_dev(e1, n);
    kt_assert_close_f("cuda attn_init acc", g, a1, n, 0, 0);
    free(g);
    cudaFree(d1), cudaFree(d2), cudaFree(e1), cudaFree(e2);
    free(ms1), free(ms2), free(a1), free(a2);
    cudaStreamDestroy((cudaStream_t)st);
}

/* One merge of (ms_src, acc_src) into (ms_dst, acc_dst) on both sides.
 * The rows mix every case: both states finite (either max larger), an empty
 * source, an empty destination, both empty.  A lane that read the row's
 * state after lane 0 had already overwritten it (a missing warp barrier)
 * scales its columns of acc with the wrong factors. */
static void merge_case(void *st, int d, int tq, int nb, int rounds, uint64_t salt)
{
    kt_rng r = kt_seed(salt);
    size_t rows = (size_t)tq * nb, n = (size_t)d * rows;
    float *ms1 = kt_alloc(2 * rows), *ms2 = kt_alloc(2 * rows);
    float *a1 = kt_rand(&r, n, -1, 1), *a2 = kt_rand(&r, n, -1, 1);
    for (size_t i = 0; i < rows; i++) {
        ms1[2 * i] = kt_unif(&r, -3, 3), ms1[2 * i + 1] = kt_unif(&r, 0.5f, 3);
        ms2[2 * i] = kt_unif(&r, -3, 3), ms2[2 * i + 1] = kt_unif(&r, 0.5f, 3);
        int kind = (int)(i % 7);
        if (kind == 3 || kind == 5) /* empty source */
            ms2[2 * i] = -INFINITY, ms2[2 * i + 1] = 0;
        if (kind == 4 || kind == 5) { /* empty destination, as attn_init leaves it */
            ms1[2 * i] = -INFINITY, ms1[2 * i + 1] = 0;
            for (int c = 0; c < d; c++)
                a1[i * d + c] = 0;
        }
    }
    float *d1 = kt_to_dev(ms1, 2 * rows), *d2 = kt_to_dev(ms2, 2 * rows);
    float *e1 = kt_to_dev(a1, n), *e2 = kt_to_dev(a2, n);
    for (int k = 0; k < rounds; k++) { /* the source merged again: new factors each round */
        KT_CUDA_OK(tsr_cuda_attn_merge(st, d, tq, nb, d2, e2, d1, e1));
        tsr_cpu_attn_merge(d, tq, nb, ms2, a2, ms1, a1);
    }
    char what[96];
    snprintf(what, sizeof what, "cuda attn_merge ms d=%d tq=%d nb=%d", d, tq, nb);
    float *g = kt_from_dev(d1, 2 * rows);
    kt_assert_close_f(what, g, ms1, 2 * rows, 1e-6, 1e-5);
    free(g);
    snprintf(what, sizeof what, "cuda attn_merge acc d=%d tq=%d nb=%d", d, tq, nb);
    g = kt_from_dev(e1, n);
    kt_assert_close_f(what, g, a1, n, 1e-6, 1e-5);
    free(g);
    cudaFree(d1), cudaFree(d2), cudaFree(e1), cudaFree(e2);
    free(ms1), free(ms2), free(a1), free(a2);
}

/* Head dimensions below, at and above a warp, rows not a multiple of the
 * block's 8 warps. */
Test(cuda_attention, merge_every_row_kind_and_head_dim)
{
    KT_REQUIRE_GPU();
    void *st = kt_stream();
    const int dims[][3] = {{1, 5, 1}, {7, 13, 2}, {31, 9, 3}, {32, 64, 1}, {33, 11, 5},
                           {64, 37, 2}, {100, 3, 7}, {256, 17, 1}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        merge_case(st, dims[i][0], dims[i][1], dims[i][2], 3, 460 + i);
    cudaStreamDestroy((cudaStream_t)st);
}

Test(cuda_softmax, maxsumexp_merge_logsumexp)
{
    KT_REQUIRE_GPU();
    void *st = kt_stream();
    kt_rng r = kt_seed(430);
    /* {m, n}: columns shorter than a warp, one past it, n off the block's 8 warps */
    const int shapes[][2] = {{1, 1}, {37, 5}, {5000, 9}, {33, 17}, {2, 3}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int m = shapes[s][0], n = shapes[s][1], ld = m + 3;
        float *x = kt_rand(&r, (size_t)ld * n, -30, 30);
        if (m > 2)
            x[1] = -INFINITY;
        float *ms = kt_alloc(2 * n), *ms2 = kt_alloc(2 * n), *lse = kt_alloc(n);
        float *d_x = kt_to_dev(x, (size_t)ld * n), *d_ms = kt_dev(2 * n), *d_ms2 = kt_dev(2 * n);
        float *d_lse = kt_dev(n);
        int half = m / 2;
        /* rows [0, half) then [half, m) accumulated; the whole column again merged */
        if (half > 0) {
            KT_CUDA_OK(tsr_cuda_maxsumexp(st, half, n, d_x, ld, d_ms, 0));
            tsr_cpu_maxsumexp(half, n, x, ld, ms, 0);
        }
        KT_CUDA_OK(tsr_cuda_maxsumexp(st, m - half, n, d_x + half, ld, d_ms, half > 0));
        tsr_cpu_maxsumexp(m - half, n, x + half, ld, ms, half > 0);
        KT_CUDA_OK(tsr_cuda_maxsumexp(st, m, n, d_x, ld, d_ms2, 0));
        tsr_cpu_maxsumexp(m, n, x, ld, ms2, 0);
        KT_CUDA_OK(tsr_cuda_maxsumexp_merge(st, n, d_ms2, d_ms));
        tsr_cpu_maxsumexp_merge(n, ms2, ms);
        KT_CUDA_OK(tsr_cuda_logsumexp(st, n, d_ms, d_lse));
        tsr_cpu_logsumexp(n, ms, lse);
        float *g = kt_from_dev(d_ms, 2 * n);
        kt_assert_close_f("cuda maxsumexp", g, ms, 2 * n, 1e-6, 1e-5);
        free(g);
        g = kt_from_dev(d_lse, n);
        kt_assert_close_f("cuda logsumexp", g, lse, n, 1e-5, 1e-6);
        free(g);
        cudaFree(d_x), cudaFree(d_ms), cudaFree(d_ms2), cudaFree(d_lse);
        free(x), free(ms), free(ms2), free(lse);
    }
    cudaStreamDestroy((cudaStream_t)st);
}

/* {nv, T, v0, ld - nv} */
static void ce_case(void *st, int nv, int T, int v0, int pad, uint64_t salt)
{
    kt_rng r = kt_seed(salt);
    int ld = nv + pad;
    float *x = kt_rand(&r, (size_t)ld * T, -5, 5), *lse = kt_rand(&r, T, 5, 8);
    int32_t *tg = malloc(sizeof(int32_t) * T);
    for (int t = 0; t < T; t++)
        tg[t] = kt_randint(&r, 0, v0 + 2 * nv); /* some of them outside the tile */
    tg[T / 2] = -1;                              /* an ignored position */
    float *loss = kt_rand(&r, T, 0, 1), *grad = kt_alloc((size_t)ld * T);
    float *d_x = kt_to_dev(x, (size_t)ld * T), *d_lse = kt_to_dev(lse, T), *d_loss = kt_to_dev(loss, T);
    int32_t *d_tg = kt_to_dev_bytes(tg, sizeof(int32_t) * T);
    float *d_grad = kt_dev((size_t)ld * T);
    KT_CUDA_OK(tsr_cuda_crossentropy_fwd(st, nv, T, v0, d_x, ld, d_lse, d_tg, d_loss));
    tsr_cpu_crossentropy_fwd(nv, T, v0, x, ld, lse, tg, loss);
    KT_CUDA_OK(tsr_cuda_crossentropy_bwd(st, nv, T, v0, d_x, ld, d_lse, d_tg, 0.1f, d_grad, ld));
    tsr_cpu_crossentropy_bwd(nv, T, v0, x, ld, lse, tg, 0.1f, grad, ld);
    float *g = kt_from_dev(d_loss, T);
    kt_assert_close_f("cuda crossentropy loss", g, loss, T, 1e-6, 1e-6);
    free(g);
    g = kt_from_dev(d_grad, (size_t)ld * T);
    for (int t = 0; t < T; t++) /* compare the tile, not the ld padding */
        kt_assert_close_f("cuda crossentropy dlogits", g + (size_t)t * ld, grad + (size_t)t * ld,
                          (size_t)nv, 1e-8, 1e-5);
    free(g);
    cudaFree(d_x), cudaFree(d_lse), cudaFree(d_loss), cudaFree(d_tg), cudaFree(d_grad);
    free(x), free(lse), free(loss), free(grad), free(tg);
}

Test(cuda_crossentropy, loss_and_gradient_on_a_vocab_tile)
{
    KT_REQUIRE_GPU();
    void *st = kt_stream();
    /* a one-row tile; more tokens than one block of the loss kernel */
    const int cases[][4] = {{1000, 13, 500, 4}, {1, 3, 0, 0}, {37, 300, 10, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ce_case(st, cases[i][0], cases[i][1], cases[i][2], cases[i][3], 440 + i);
    cudaStreamDestroy((cudaStream_t)st);
}

/* {C, T, nv, v0}: repeated tokens and ids outside [v0, v0 + nv) */
static void emb_case(void *st, int C, int T, int nv, int v0, uint64_t salt, int det)
{
    kt_rng r = kt_seed(salt);
    int32_t *tok = malloc(sizeof(int32_t) * T);
    for (int t = 0; t < T; t++)
        tok[t] = kt_randint(&r, 0, v0 + 2 * nv);
    float *w = kt_rand(&r, (size_t)C * nv, -1, 1), *out = kt_rand(&r, (size_t)C * T, -1, 1);
    float *dout = kt_rand(&r, (size_t)C * T, -1, 1), *dw = kt_rand(&r, (size_t)C * nv, -1, 1);
    float *d_w = kt_to_dev(w, (size_t)C * nv), *d_out = kt_to_dev(out, (size_t)C * T);
    float *d_dout = kt_to_dev(dout, (size_t)C * T), *d_dw = kt_to_dev(dw, (size_t)C * nv);
    int32_t *d_tok = kt_to_dev_bytes(tok, sizeof(int32_t) * T);
    KT_CUDA_OK(tsr_cuda_embedding_fwd(st, C, T, nv, v0, d_tok, d_w, d_out));
    KT_CUDA_OK(tsr_cuda_embedding_bwd(st, C, T, nv, v0, d_tok, d_dout, d_dw, det));
    tsr_cpu_embedding_fwd(C, T, nv, v0, tok, w, out);
    tsr_cpu_embedding_bwd(C, T, nv, v0, tok, dout, dw);
    float *g = kt_from_dev(d_out, (size_t)C * T);
    kt_assert_close_f("cuda embedding fwd", g, out, (size_t)C * T, 0, 0);
    free(g);
    g = kt_from_dev(d_dw, (size_t)C * nv);
    kt_assert_close_f("cuda embedding bwd", g, dw, (size_t)C * nv, 1e-6, 1e-6);
    free(g);
    cudaFree(d_w), cudaFree(d_out), cudaFree(d_dout), cudaFree(d_dw), cudaFree(d_tok);
    free(w), free(out), free(dout), free(dw), free(tok);
}

Test(cuda_embedding, gather_and_scatter_add)
{
    KT_REQUIRE_GPU();
    void *st = kt_stream();
    const int cases[][4] = {{300, 50, 20, 10}, {1, 7, 5, 0}, {257, 3, 2, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int det = 0; det < 2; det++)
            emb_case(st, cases[i][0], cases[i][1], cases[i][2], cases[i][3], 450 + i, det);
    cudaStreamDestroy((cudaStream_t)st);
}
