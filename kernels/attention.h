/* kernels/attention.h — causal self-attention, flash style, on one
 * (query-tile, key/value-tile) pair at a time, so that a runtime can spread
 * one head's work over tasks and devices:
 *   forward:  init the running state of a query tile, update it with each
 *             key/value tile (online softmax), optionally merge states that
 *             were built on different devices, finalize into o and lse;
 *   backward: D = rowsum(dout * o) once per query tile, then for each tile
 *             pair recompute the probabilities from q, k and lse and
 *             accumulate dq, dk, dv.
 *
 * Must never: allocate, know about tasks, or materialise the full (T, T)
 * score matrix.
 *
 * Memory order.  q, k, v, o, dout, dq, dk, dv are strided views: element c
 * of position i of head b of x is at
 *     x + b*hs + (size_t)i*ld + c            (c < d)
 * with ld the elements between positions i and i+1 of one head and hs those
 * between heads b and b+1.  q, k, v, dq, dk, dv share (ld, hs); o and dout
 * share (ldo, hso).  Contiguous (d, t, nb) tiles are (ld = d, hs = t*d) (q
 * and k then need tq = tk, or hs = max(tq, tk)*d); GPT-2's fused qkv
 * activation (3C, T), column-major, is (ld = 3C, hs = d) with q of head b at
 * rows b*d, k at rows C + b*d, v at rows 2C + b*d, and its (C, T) attention
 * output (ld = C, hs = d).  The kernels touch only the d elements of each
 * (position, head): the rest of a view (the other rows of a fused tile) is
 * neither read nor written.  The running state is contiguous scratch:
 *   ms:             (2, tq, nb)   running (max, sumexp) per query, see softmax.h
 *   acc:            (d, tq, nb)   running unnormalised output
 *   lse, D:         (tq, nb)      query i of head b at b*tq + i
 * nb independent heads (or batch x heads) share the same positions.
 * q0 and k0 are the absolute sequence positions of the tiles' first query and
 * key; query q0+i sees key k0+j iff k0+j <= q0+i (the diagonal may cross the
 * tile anywhere).  Scores are scale * q.k (scale is usually 1/sqrt(d)); the
 * state's max and lse are in that scaled domain.  A pair entirely above the
 * diagonal (k0 > q0 + tq - 1) is a no-op; a runtime need not submit it.
 *
 * Grouped-query attention (the _gqa forms; Llama-family decoders): nb query
 * heads share nb / kv_group K/V heads, kv_group (>= 1) dividing nb, and
 * query head b reads K/V head b / kv_group of k and v, at k + (b/kv_group)*hs
 * (the same (ld, hs): a contiguous (d, tk, nb / kv_group) k tile, or a fused
 * (C + 2 Ckv, T) qkv tile with k of K/V head h at rows C + h*d, ld = C +
 * 2 Ckv, hs = d).  Nothing is copied per query head.  dk and dv of a K/V
 * head are the SUM over its kv_group query heads, accumulated in a fixed
 * order (query heads h*kv_group, h*kv_group + 1, ... in turn; no float
 * atomics), so the backward stays deterministic.  kv_group = 1 is the plain
 * form, bit for bit (the plain functions call the _gqa ones with kv_group =
 * 1).  A runtime that splits the heads of a backward over tasks must keep
 * each K/V head's kv_group query heads in one call.
 */
#ifndef TSR_KERNELS_ATTENTION_H
#define TSR_KERNELS_ATTENTION_H

#ifdef __cplusplus
extern "C" {
#endif

/* ms(:, i, b) = (-inf, 0), acc = 0 */
void tsr_cpu_attn_init(int d, int tq, int nb, float *ms, float *acc);

/* Online-softmax update of a query tile's state with one key/value tile:
 * for each query i with visible keys j:  m' = max(m, max_j s_ij),
 *   l' = l e^(m - m') + sum_j e^(s_ij - m'),  acc' = acc e^(m - m') + sum_j e^(s_ij - m') v_j */
void tsr_cpu_attn_fwd(int d, int tq, int tk, int nb, int q0, int k0, float scale, int ld,
                      long long hs, const float *q, const float *k, const float *v, float *ms,
                      float *acc);

/* tsr_cpu_attn_fwd with nb query heads over nb / kv_group K/V heads (above) */
void tsr_cpu_attn_fwd_gqa(int d, int tq, int tk, int nb, int kv_group, int q0, int k0,
                          float scale, int ld, long long hs, const float *q, const float *k,
                          const float *v, float *ms, float *acc);

/* (ms_dst, acc_dst) = merge of the two partial states (over disjoint key sets). */
void tsr_cpu_attn_merge(int d, int tq, int nb, const float *ms_src, const float *acc_src,
                        float *ms_dst, float *acc_dst);

/* o = acc / l, o in (ldo, hso); lse = m + log(l).  o may be acc only as a
 * contiguous view (ldo = d, hso = tq*d).  A query that saw no key gets o = 0
 * and lse = -inf. */
void tsr_cpu_attn_finalize(int d, int tq, int nb, const float *ms, const float *acc, int ldo,
                           long long hso, float *o, float *lse);

/* D(i, b) = sum_c dout(c, i, b) * o(c, i, b) */
void tsr_cpu_attn_bwd_dot(int d, int tq, int nb, int ldo, long long hso, const float *o,
                          const float *dout, float *D);

/* Backward of one tile pair, ACCUMULATED into dq, dk, dv:
 *   p_ij = e^(s_ij - lse_i) (0 where masked),  ds_ij = p_ij (dout_i . v_j - D_i)
 *   dv_j += sum_i p_ij dout_i,  dq_i += scale sum_j ds_ij k_j,  dk_j += scale sum_i ds_ij q_i
 * dq, dk, dv are in (ld, hs) like q, k, v, dout in (ldo, hso) like o; dq, dk
 * and dv must not overlap one another (in a fused tile their rows differ). */
void tsr_cpu_attn_bwd(int d, int tq, int tk, int nb, int q0, int k0, float scale, int ld,
                      long long hs, const float *q, const float *k, const float *v, int ldo,
                      long long hso, const float *dout, const float *lse, const float *D,
                      float *dq, float *dk, float *dv);

/* tsr_cpu_attn_bwd with nb query heads over nb / kv_group K/V heads: dk, dv
 * (of nb / kv_group heads) accumulate every query head of their group, in
 * order of query head */
void tsr_cpu_attn_bwd_gqa(int d, int tq, int tk, int nb, int kv_group, int q0, int k0,
                          float scale, int ld, long long hs, const float *q, const float *k,
                          const float *v, int ldo, long long hso, const float *dout,
                          const float *lse, const float *D, float *dq, float *dk, float *dv);

/* CUDA versions, device pointers, asynchronous on `stream`;
 * 0, TSR_EINVAL for d > 256 or an unknown prec, or TSR_EDEVICE
 * (kernels/cuda_status.h names the failure; nb above 65535 fails the
 * launch).  The CUDA backward runs two kernels (dk/dv over keys, dq over
 * queries), with no atomics: deterministic.
 *
 * prec chooses how the matrix products of fwd and bwd run:
 *   TSR_ATTN_FP32: FP32 on CUDA cores (the strict mode, TSR_CUDA_FP32_STRICT;
 *                  kernels/cuda/attention.cu);
 *   TSR_ATTN_TF32: TF32 tensor cores (mma.sync) with FP32 softmax and
 *                  accumulation, about 1e-3 relative error
 *                  (kernels/cuda/attention_tc.cu) for d <= 128; larger
 *                  head dimensions run the FP32 kernels;
 *   TSR_ATTN_BF16: the same kernels with the products' operands rounded to
 *                  bf16 (q, k, v, p, ds; fp32 storage, softmax and
 *                  accumulation), about 4e-3 relative error per score, twice
 *                  the tensor-core rate of TF32; d > 128 runs FP32.
 *
 * fwd and bwd take nseq sequences of nb heads each, back to back in the
 * views (a tile of several whole sequences): sequence s of q, dq starts
 * s*tq*ld after q, of k, v, dk, dv s*tk*ld after k, of dout s*tq*ldo after
 * dout; head b of sequence s is state row s*nb + b of ms, acc, lse, D.  The
 * tensor-core kernels run them in one launch (nseq*nb at most 65535).
 *
 * The _gqa forms take kv_group as the CPU ones do (TSR_EINVAL unless
 * kv_group >= 1 divides nb); sequence s of k, v, dk, dv still starts s*tk*ld
 * after k.  Their backward's dk/dv kernels run one block per (K/V head, key
 * block), which loops over the kv_group query heads in order with the sums
 * in registers and adds to dk and dv once: deterministic, without atomics,
 * whatever kv_group. */
/* the widest head the tensor-core kernels take (TSR_ATTN_TF32, _BF16);
 * wider ones run the FP32 kernels in every mode */
#define TSR_ATTN_TC_MAX_D 128
enum {
    TSR_ATTN_FP32 = 0,
    TSR_ATTN_TF32 = 1,
    TSR_ATTN_BF16 = 2
};
int tsr_cuda_attn_init(void *stream, int d, int tq, int nb, float *ms, float *acc);
int tsr_cuda_attn_fwd(void *stream, int prec, int d, int tq, int tk, int nb, int nseq, int q0,
                      int k0, float scale, int ld, long long hs, const float *q, const float *k,
                      const float *v, float *ms, float *acc);
int tsr_cuda_attn_fwd_gqa(void *stream, int prec, int d, int tq, int tk, int nb, int kv_group,
                          int nseq, int q0, int k0, float scale, int ld, long long hs,
                          const float *q, const float *k, const float *v, float *ms, float *acc);
int tsr_cuda_attn_merge(void *stream, int d, int tq, int nb, const float *ms_src,
                        const float *acc_src, float *ms_dst, float *acc_dst);
int tsr_cuda_attn_finalize(void *stream, int d, int tq, int nb, const float *ms,
                           const float *acc, int ldo, long long hso, float *o, float *lse);
int tsr_cuda_attn_bwd_dot(void *stream, int d, int tq, int nb, int ldo, long long hso,
                          const float *o, const float *dout, float *D);
int tsr_cuda_attn_bwd(void *stream, int prec, int d, int tq, int tk, int nb, int nseq, int q0,
                      int k0, float scale, int ld, long long hs, const float *q, const float *k,
                      const float *v, int ldo, long long hso, const float *dout,
                      const float *lse, const float *D, float *dq, float *dk, float *dv);
int tsr_cuda_attn_bwd_gqa(void *stream, int prec, int d, int tq, int tk, int nb, int kv_group,
                          int nseq, int q0, int k0, float scale, int ld, long long hs,
                          const float *q, const float *k, const float *v, int ldo,
                          long long hso, const float *dout, const float *lse, const float *D,
                          float *dq, float *dk, float *dv);

#ifdef __cplusplus
}
#endif
#endif
