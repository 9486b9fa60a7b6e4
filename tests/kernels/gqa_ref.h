/* tests/kernels/gqa_ref.h — grouped-query causal attention in double, the
 * reference of the GQA tests of the CPU and CUDA attention kernels
 * (kernels/attention.h): nb query heads, nb / kvg K/V heads, query head b
 * reading K/V head b / kvg; one tile pair (q0, k0: absolute positions of the
 * first query and key; query i sees key j iff k0 + j <= q0 + i) from a fresh
 * state, written out naively (scores, softmax, products) with nothing shared
 * with the kernels.
 *
 * Arrays are contiguous: q, dout, o, dq (d, tq, nb): element c of query i of
 * head b at (b*tq + i)*d + c; k, v, dk, dv (d, tk, nb / kvg); lse, D (tq, nb)
 * at b*tq + i.  Several sequences of nh heads each are nb = nseq*nh heads:
 * head h of sequence s is s*nh + h, its K/V head s*(nh/kvg) + h/kvg = (s*nh +
 * h)/kvg, so the same functions serve. */
#ifndef TSR_TESTS_KERNELS_GQA_REF_H
#define TSR_TESTS_KERNELS_GQA_REF_H

#include <math.h>
#include <stdlib.h>

typedef struct {
    int d, tq, tk, nb, kvg, q0, k0;
} gqa_shape;

static inline int gqa_sees(const gqa_shape *s, int i, int j)
{
    return (long long)s->k0 + j <= (long long)s->q0 + i;
}

/* o = softmax(scale q k^T + causal mask) v, lse, D = rowsum(dout * o); a
 * query that sees no key: o = 0, lse = -inf.  smax (if not NULL): the largest
 * |visible score|. */
static void gqa_ref_fwd(const gqa_shape *s, double scale, const float *q, const float *k,
                        const float *v, const float *dout, double *o, double *lse, double *D,
                        double *smax)
{
    int d = s->d;
    double *sc = calloc((size_t)s->tk + 1, sizeof(double)), mabs = 0;
    for (int b = 0; b < s->nb; b++)
        for (int i = 0; i < s->tq; i++) {
            size_t row = (size_t)b * s->tq + i;
            const float *qi = q + row * d;
            const float *kb = k + (size_t)(b / s->kvg) * s->tk * d;
            const float *vb = v + (size_t)(b / s->kvg) * s->tk * d;
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j < s->tk; j++) {
                if (!gqa_sees(s, i, j))
                    continue;
                double dot = 0;
                for (int c = 0; c < d; c++)
                    dot += (double)qi[c] * kb[(size_t)j * d + c];
                sc[j] = scale * dot;
                mx = sc[j] > mx ? sc[j] : mx;
                mabs = fabs(sc[j]) > mabs ? fabs(sc[j]) : mabs;
            }
            for (int j = 0; j < s->tk; j++)
                if (gqa_sees(s, i, j))
                    sum += exp(sc[j] - mx);
            D[row] = 0;
            for (int c = 0; c < d; c++) {
                double acc = 0;
                for (int j = 0; j < s->tk; j++)
                    if (gqa_sees(s, i, j))
                        acc += exp(sc[j] - mx) / sum * vb[(size_t)j * d + c];
                o[row * d + c] = sum > 0 ? acc : 0.0;
                D[row] += (double)dout[row * d + c] * o[row * d + c];
            }
            lse[row] = sum > 0 ? mx + log(sum) : -INFINITY;
        }
    if (smax)
        *smax = mabs;
    free(sc);
}

/* dq, dk, dv += the gradients of sum dout .* o, from the given lse and D:
 * p = e^(scale q.k - lse), ds = p (dout.v - D), dv_j += p dout_i,
 * dq_i += scale ds k_j, dk_j += scale ds q_i; dk and dv of a K/V head sum
 * all its query heads */
static void gqa_ref_bwd(const gqa_shape *s, double scale, const float *q, const float *k,
                        const float *v, const float *dout, const double *lse, const double *D,
                        double *dq, double *dk, double *dv)
{
    int d = s->d;
    for (int b = 0; b < s->nb; b++)
        for (int i = 0; i < s->tq; i++) {
            size_t row = (size_t)b * s->tq + i;
            if (lse[row] == -INFINITY)
                continue;
            const float *qi = q + row * d, *doi = dout + row * d;
            for (int j = 0; j < s->tk; j++) {
                if (!gqa_sees(s, i, j))
                    continue;
                size_t kr = (size_t)(b / s->kvg) * s->tk + j;
                const float *kj = k + kr * d, *vj = v + kr * d;
                double dot = 0, dp = 0;
                for (int c = 0; c < d; c++)
                    dot += (double)qi[c] * kj[c], dp += (double)doi[c] * vj[c];
                double p = exp(scale * dot - lse[row]), ds = p * (dp - D[row]);
                for (int c = 0; c < d; c++) {
                    dv[kr * d + c] += p * doi[c];
                    dq[row * d + c] += scale * ds * kj[c];
                    dk[kr * d + c] += scale * ds * qi[c];
                }
            }
        }
}

#endif
