/* nn/ops.h — tensor operations as loops that submit tile tasks: GEMM over
 * tile grids, elementwise and broadcast operations, LayerNorm, GELU, the
 * Llama layers (RMSNorm, SwiGLU, RoPE), embeddings, flash attention over
 * (query tile, key tile) pairs, cross-entropy over vocabulary tiles, and the
 * optimizer's tile updates.
 *
 * Every function only submits tasks (in program order; the runtime infers
 * the dependencies) and returns the first submission error. None waits for
 * results, none touches tile memory from the host.
 *
 * Accumulating outputs come in two kinds: `TSR_RW` chains (a fixed order:
 * bitwise reproducible) and `TSR_COMMUTE` groups (any order, never at the same
 * time: used for gradients that many token tiles add into).
 *
 * Tilings must agree where tensors meet (e.g. the k tiles of op(A) and op(B)
 * in a GEMM); a mismatch is TSR_EINVAL with both tilings in the message.
 */
#ifndef TSR_NN_OPS_H
#define TSR_NN_OPS_H

#include <stdint.h>

#include "nn/tensor.h"

/* op(X) of a GEMM: X itself or its transpose. */
enum { OP_N = 0, OP_T = 1 };

/* C = alpha op(A) op(B) + beta C.  beta == 0: C is overwritten (not read).
 * acc_mode TSR_COMMUTE (beta must be 1): every tile product is added to its
 * C tile in any order — the weight-gradient form, summed over token tiles.
 * A and B bf16 (tsr__tensor_init_bf16): the bf16 GEMM, fp32 sums, C fp32 or
 * bf16; A and B of different types are TSR_EINVAL. tsr__op_linear_fwd and
 * _bwd inherit this: bf16 weights and inputs make bf16 products. */
int tsr__op_gemm(int transa, int transb, float alpha, const tsr_tensor_t *a,
                 const tsr_tensor_t *b, float beta, tsr_tensor_t *c, int acc_mode);

/* A Linear layer y = W x + b over token columns:
 *   w (out, in), b (out, 1) tiled like w's rows, x (in, N), y (out, N).
 * beta 0: y = W x + b (overwritten).  beta 1: the residual form y += W x + b.
 * The bias rides on each output tile's first product (a fused epilogue:
 * one task per tile where W's columns are one tile). */
int tsr__op_linear_fwd(const tsr_tensor_t *w, const tsr_tensor_t *b, const tsr_tensor_t *x,
                       float beta, tsr_tensor_t *y);
/* pre = W x + b, out = gelu(pre) (both overwritten, tiled alike): one task
 * per tile where W's columns are one tile and pre and out share a type,
 * else the Linear and then gelu_fwd. */
int tsr__op_linear_gelu_fwd(const tsr_tensor_t *w, const tsr_tensor_t *b, const tsr_tensor_t *x,
                            tsr_tensor_t *pre, tsr_tensor_t *out);
/* Its backward: dx = W^T dy (overwritten), dw += dy x^T and db += the row
 * sums of dy (both COMMUTE over token tiles; db NULL: no bias gradient).
 * The bias gradient comes from the weight-gradient products of dw's first
 * column of tiles (one per token tile). */
int tsr__op_linear_bwd(const tsr_tensor_t *w, const tsr_tensor_t *x, const tsr_tensor_t *dy,
                       tsr_tensor_t *dx, tsr_tensor_t *dw, tsr_tensor_t *db);
/* The backward of a Linear whose input x was gelu(pre): dx = gelu'(pre) *
 * (W^T dy), and dbpre += the row sums of that dx (the bias gradient of the
 * Linear that made pre; NULL: none), in the same task where W's rows are
 * one tile; dw, db as tsr__op_linear_bwd. */
int tsr__op_linear_gelu_bwd(const tsr_tensor_t *w, const tsr_tensor_t *x, const tsr_tensor_t *dy,
                            const tsr_tensor_t *pre, tsr_tensor_t *dx, tsr_tensor_t *dw,
                            tsr_tensor_t *db, tsr_tensor_t *dbpre);

/* x = value */
int tsr__op_fill(tsr_tensor_t *x, float value);
/* From now on the ops accumulate into t (weight and bias gradients, the
 * LayerNorm and embedding tables' gradients: every COMMUTE sum below) in
 * TSR_REDUX: each worker adds into its own accumulator of a tile, combined
 * once at the tile's next other access, instead of the tile moving between
 * the workers' memories at every contribution. fp32 t only. */
int tsr__op_set_redux(tsr_tensor_t *t);
/* y = x (same tiling) */
int tsr__op_copy(const tsr_tensor_t *x, tsr_tensor_t *y);
/* dst = src, where the two tensors differ only in their row tiling and one
 * tile row count is a multiple of the other's: split coarse tiles into fine
 * ones or merge back (generation's per-head attention output into (C, n)). */
int tsr__op_regroup(const tsr_tensor_t *src, tsr_tensor_t *dst);

/* x(i, j) += bias(i): bias is (rows, 1) tiled like x's rows */
int tsr__op_bias_add(const tsr_tensor_t *bias, tsr_tensor_t *x);
/* dbias(i) += sum_j dy(i, j), accumulated over column tiles (COMMUTE) */
int tsr__op_bias_grad(const tsr_tensor_t *dy, tsr_tensor_t *dbias);

/* LayerNorm over the rows of each column, eps 1e-5:
 *   out(:, t) = (x(:, t) - mean[t]) rstd[t] gamma + beta,
 *   rstd[t] = 1 / sqrt(var[t] + eps) (biased variance, two passes).
 * x (C, N), out tiled like x (written); gamma, beta (C, 1) in one tile per
 * tile row of x (else TSR_EINVAL with both tilings); mean, rstd (1, N)
 * tiled like x's columns (written).
 * One tile row (the whole feature dimension): the fused kernel, one task per
 * column tile. R > 1 tile rows (channel tiles, the last possibly smaller):
 * tsr__op_layernorm_fwd_rows with a scratch `part` (2R, N) fp32 tiled (2,
 * tt) for the partial sums (without one: TSR_EINVAL); per column tile 3R +
 * 2 ceil(R / 15) tasks (partial sums per tile, their combine in the fixed
 * order of the rows, the deviations' partials, their combine, the apply per
 * tile): the same bits whatever runs them. The scratch is invalidated once
 * the tasks are submitted (its memory goes back after them). */
int tsr__op_layernorm_fwd(const tsr_tensor_t *x, const tsr_tensor_t *gamma,
                          const tsr_tensor_t *beta, tsr_tensor_t *out, tsr_tensor_t *mean,
                          tsr_tensor_t *rstd);
int tsr__op_layernorm_fwd_rows(const tsr_tensor_t *x, const tsr_tensor_t *gamma,
                               const tsr_tensor_t *beta, tsr_tensor_t *out, tsr_tensor_t *mean,
                               tsr_tensor_t *rstd, tsr_tensor_t *part);
/* Its backward, with xhat = (x - mean) rstd and g = dout gamma, all three
 * ACCUMULATED:
 *   dx += rstd (g - mean_i(g) - xhat mean_i(g xhat))   (RW: a chain per tile)
 *   dgamma += sum_t dout xhat,  dbeta += sum_t dout      (COMMUTE over column tiles)
 * dout, dx tiled like x; gamma, dgamma, dbeta (C, 1) tiled like x's rows.
 * One tile row: one task per column tile. R > 1 tile rows:
 * tsr__op_layernorm_bwd_rows with the scratch as above; per column tile
 * 2R + ceil((R - 1) / 15) tasks (the two sums' partials per tile, their
 * combine in row order into part's tile (0, b), the update per tile). */
int tsr__op_layernorm_bwd(const tsr_tensor_t *dout, const tsr_tensor_t *x,
                          const tsr_tensor_t *gamma, const tsr_tensor_t *mean,
                          const tsr_tensor_t *rstd, tsr_tensor_t *dx, tsr_tensor_t *dgamma,
                          tsr_tensor_t *dbeta);
int tsr__op_layernorm_bwd_rows(const tsr_tensor_t *dout, const tsr_tensor_t *x,
                               const tsr_tensor_t *gamma, const tsr_tensor_t *mean,
                               const tsr_tensor_t *rstd, tsr_tensor_t *dx, tsr_tensor_t *dgamma,
                               tsr_tensor_t *dbeta, tsr_tensor_t *part);

/* out = gelu(x);  d = gelu'(x) * d (in place) */
int tsr__op_gelu_fwd(const tsr_tensor_t *x, tsr_tensor_t *out);
int tsr__op_gelu_bwd(const tsr_tensor_t *x, tsr_tensor_t *d);

/* ---- Llama layers (fp32) -------------------------------------------------- */

/* RMSNorm over the rows of each column (x has one tile row: the whole
 * feature dimension C), eps from the model's config (rms_norm_eps):
 *   out(:, t) = x(:, t) * rstd[t] * w,  rstd[t] = 1 / sqrt(mean_i x(i, t)^2 + eps)
 * w (C, 1) in one tile; rstd (1, cols) tiled like x's columns (written);
 * out tiled like x (written; may not be x). One task per column tile. */
int tsr__op_rmsnorm_fwd(const tsr_tensor_t *x, const tsr_tensor_t *w, float eps,
                        tsr_tensor_t *out, tsr_tensor_t *rstd);
/* dx += RMSNorm'(dout) (RW, as LayerNorm's: the kernel accumulates);
 * dw += sum_t dout * xhat (COMMUTE over column tiles). */
int tsr__op_rmsnorm_bwd(const tsr_tensor_t *dout, const tsr_tensor_t *x, const tsr_tensor_t *w,
                        const tsr_tensor_t *rstd, tsr_tensor_t *dx, tsr_tensor_t *dw);

/* SwiGLU on separate gate and up tensors (the two projections' outputs),
 * all (F, N) and tiled alike (any tiling: elementwise), one task per tile:
 *   h = silu(gate) * up                (h written; a tensor of its own)
 *   dgate = dh * up * silu'(gate), dup = dh * silu(gate)   (both written)
 * The kernel also serves a fused gate|up (2F, N) projection through leading
 * dimensions; these ops use separate tensors (a tile's ld is its rows). */
int tsr__op_swiglu_fwd(const tsr_tensor_t *gate, const tsr_tensor_t *up, tsr_tensor_t *h);
int tsr__op_swiglu_bwd(const tsr_tensor_t *gate, const tsr_tensor_t *up, const tsr_tensor_t *dh,
                       tsr_tensor_t *dgate, tsr_tensor_t *dup);

/* RoPE (kernels/rope.h, Hugging Face's rotate_half pairing) in place on the
 * Q or K rows x (heads * head_dim, N): tiles of any column count, row tiles
 * of whole heads (tile_rows a multiple of head_dim). Column t is at position
 *   pos0 + (t mod seq_len)
 * (N may hold several sequences of seq_len tokens side by side, as GPT-2's
 * activations do; generation passes its first new position as pos0 and
 * seq_len >= N). A tile that crosses a sequence boundary is rotated by one
 * task that calls the kernel once per sequence piece. inv_freq: a handle of
 * head_dim/2 doubles (tsr__rope_table), read by every task (the runtime
 * keeps a copy on each device that uses it; the CUDA kernel reads it there).
 * The backward rotates a gradient back in place (the inverse rotation). */
int tsr__op_rope_fwd(tsr_tensor_t *x, int heads, int head_dim, int seq_len, int pos0,
                     tsr_handle_t inv_freq);
int tsr__op_rope_bwd(tsr_tensor_t *dx, int heads, int head_dim, int seq_len, int pos0,
                     tsr_handle_t inv_freq);
/* The same on the q and k heads of a fused (C + 2 Ckv, N) qkv activation
 * in one tile row (tsr__op_attention_gqa_fwd's layout): the first heads +
 * kv_heads heads of each column are rotated, v is left as it is. */
int tsr__op_rope_qk_fwd(tsr_tensor_t *qkv, int heads, int kv_heads, int head_dim, int seq_len,
                        int pos0, tsr_handle_t inv_freq);
int tsr__op_rope_qk_bwd(tsr_tensor_t *dqkv, int heads, int kv_heads, int head_dim, int seq_len,
                        int pos0, tsr_handle_t inv_freq);
/* tsr__op_rope_qk_fwd for columns at arbitrary positions (generation: each
 * column its slot's next position): qkv (C + 2 Ckv, n) in one tile, column
 * j at position pos[j] (a host array of n), one task per column. */
int tsr__op_rope_qk_cols(tsr_tensor_t *qkv, int heads, int kv_heads, int head_dim,
                         const int32_t *pos, tsr_handle_t inv_freq);
/* The frequency table as a runtime handle: a copy of inv_freq (head_dim/2
 * doubles from tsr_rope_inv_freq, kernels/rope.h); the caller unregisters
 * it (tsr_handle_unregister) after the last task that reads it. */
int tsr__rope_table(tsr_handle_t *out, int head_dim, const double *inv_freq);

/* Whether token tiles of tt columns fit nseq sequences of seq_len tokens:
 * tt divides seq_len (tiles within a sequence), or tt is a multiple of
 * seq_len that divides nseq sequences (whole sequences side by side). */
int tsr__tokens_tile_ok(int tt, int seq_len, int nseq);

/* out(:, t) = wte(:, tokens[t]) + wpe(:, t mod seq_len).
 *   tokens (1, N) int32, wte (C, V) tiled (tc, tv), wpe (C, ctx) tiled
 *   (tc, min(tt, seq_len)), out (C, N) tiled (tc, tt); tt as above; tc = C
 *   or row tiles of the channels (the tables' rows tiled like out's). One
 *   task per (row tile, token tile, vocabulary tile).
 *   wpe NULL: no position embedding (Llama), out = the token rows alone. */
int tsr__op_embed_fwd(const tsr_tensor_t *tokens, const tsr_tensor_t *wte,
                      const tsr_tensor_t *wpe, int seq_len, tsr_tensor_t *out);
/* dwte, dwpe += the scatter of dout (COMMUTE); dwpe NULL: none */
int tsr__op_embed_bwd(const tsr_tensor_t *tokens, const tsr_tensor_t *dout, int seq_len,
                      tsr_tensor_t *dwte, tsr_tensor_t *dwpe);

/* Causal multi-head attention over sequences of seq_len tokens, C = H d,
 * all fp32, tt within a sequence or spanning whole sequences
 * (tsr__tokens_tile_ok):
 *   qkv (3C, N) tiled (C, tt), as the fused Linear writes it: tile row 0 is
 *   q (head h at rows h d .. h d + d - 1), 1 is k, 2 is v; the kernels read
 *   every head in place (strided views, kernels/attention.h);
 *   y (C, N) tiled (C, tt), head h at rows h d, written in place;
 *   lse (H, N) tiled (H, tt); ms: scratch (2H, N) tiled (2H, tt), acc:
 *   scratch (C, N) tiled (C, tt) (the online-softmax state). A tile of lse,
 *   ms, acc (and D below) is the kernels' contiguous state of its heads,
 *   sequence by sequence, not a column-major matrix.
 * One task per (query tile, key tile) pair covers all heads.  bf16: on a GPU
 * the products take bf16 operands (TSR_ATTN_BF16, a bf16 model's choice),
 * else TF32 (TSR_ATTN_TF32); FP32 where the configuration is strict, and
 * on CPUs. */
int tsr__op_attention_fwd(const tsr_tensor_t *qkv, int heads, int seq_len, int bf16,
                          tsr_tensor_t *ms, tsr_tensor_t *acc, tsr_tensor_t *y, tsr_tensor_t *lse);
/* dqkv (tiled like qkv) = the gradient through attention (overwritten),
 * dy tiled like y; D: scratch tiled like lse. */
int tsr__op_attention_bwd(const tsr_tensor_t *qkv, int heads, int seq_len, int bf16,
                          const tsr_tensor_t *y, const tsr_tensor_t *dy,
                          const tsr_tensor_t *lse, tsr_tensor_t *D, tsr_tensor_t *dqkv);
/* Grouped-query attention (Llama): kv_heads (dividing heads) K/V heads,
 * query head h reads K/V head h / (heads / kv_heads); C = heads d, Ckv =
 * kv_heads d. qkv (C + 2 Ckv, N): q (C rows), then k (Ckv), then v (Ckv),
 * tiled (C + 2 Ckv, tt) (one tile row: the kernels read q, k, v in place
 * with ld = C + 2 Ckv), or, where kv_heads = heads, (C, tt) as above (the
 * functions above are that case: the same tasks). y, lse, ms, acc, dy, D as
 * above (heads query heads); dqkv tiled like qkv, dk and dv of a K/V head
 * summed over its query heads (deterministically). */
int tsr__op_attention_gqa_fwd(const tsr_tensor_t *qkv, int heads, int kv_heads, int seq_len,
                              int bf16, tsr_tensor_t *ms, tsr_tensor_t *acc, tsr_tensor_t *y,
                              tsr_tensor_t *lse);
int tsr__op_attention_gqa_bwd(const tsr_tensor_t *qkv, int heads, int kv_heads, int seq_len,
                              int bf16, const tsr_tensor_t *y, const tsr_tensor_t *dy,
                              const tsr_tensor_t *lse, tsr_tensor_t *D, tsr_tensor_t *dqkv);

/* Cross-entropy of logits (V, N) tiled (tv, tt) against targets (1, N):
 * ms (2, N) and lse (1, N) scratch, loss (1, N) per token (0 where the target
 * is negative). */
int tsr__op_xent_fwd(const tsr_tensor_t *logits, const tsr_tensor_t *targets,
                     tsr_tensor_t *ms, tsr_tensor_t *lse, tsr_tensor_t *loss);
/* logits = scale * (softmax - onehot), in place (the logits are consumed) */
int tsr__op_xent_bwd(tsr_tensor_t *logits, const tsr_tensor_t *targets,
                     const tsr_tensor_t *lse, float scale);

/* acc (a 4-byte handle) += sum of squares of every element of x (COMMUTE) */
int tsr__op_sumsq(const tsr_tensor_t *x, tsr_handle_t acc);
/* acc[0] += sum of x^2 over n tiles of any tensors, up to 15 tiles per task
 * (a GPU pays a launch and a host round trip per task, and the tasks
 * accumulating into acc run one after another) */
int tsr__op_sumsq_tiles(const tsr_handle_t *tiles, size_t n, tsr_handle_t acc);
/* acc = 0 */
int tsr__op_fill_handle(tsr_handle_t h, float value);

typedef struct tsr_adamw_args {
    int step;
    float lr, beta1, beta2, eps, weight_decay, grad_scale;
    int zero_grad; /* the update consumes the gradient: g = 0 after it */
} tsr_adamw_args_t;
/* One AdamW step on every tile of p with gradient g and moments m, v;
 * pb (bf16, tiled like p) or NULL: also receives bf16(the updated p), in
 * the same task (the mixed-precision copy of the weights). */
int tsr__op_adamw(const tsr_adamw_args_t *args, const tsr_tensor_t *g, tsr_tensor_t *p,
                  tsr_tensor_t *m, tsr_tensor_t *v, tsr_tensor_t *pb);

/* ---- bf16 (mixed precision) ---------------------------------------------
 * The producers of the bf16 tensors that only GEMMs read. Each computes in
 * fp32 with the fp32 kernel and rounds what it stores (to nearest even), in
 * the same task; `scratch` is a handle of at least one fp32 tile of the
 * output (two for tsr__op_swiglu_bwd_bf16), used as TSR_SCRATCH (no
 * dependency). A too small scratch or wrong element types: TSR_EINVAL. */

/* y = x converted: fp32 → bf16 or bf16 → fp32 (same tiling) */
int tsr__op_convert(const tsr_tensor_t *x, tsr_tensor_t *y);
/* tsr__op_layernorm_fwd with out bf16 (mean, rstd fp32) through the fp32
 * scratch handle (a tile of x); x in row tiles: the row-tile path above
 * (its scratch `part`), its apply into bf16 */
int tsr__op_layernorm_fwd_bf16(const tsr_tensor_t *x, const tsr_tensor_t *gamma,
                               const tsr_tensor_t *beta, tsr_tensor_t *out, tsr_tensor_t *mean,
                               tsr_tensor_t *rstd, tsr_handle_t scratch, tsr_tensor_t *part);
/* tsr__op_layernorm_bwd, then dx16 = bf16(dx) (what the next GEMMs read); x
 * in row tiles: tsr__op_layernorm_bwd_rows (scratch `part`), then a
 * conversion per tile */
int tsr__op_layernorm_bwd_bf16(const tsr_tensor_t *dout, const tsr_tensor_t *x,
                               const tsr_tensor_t *gamma, const tsr_tensor_t *mean,
                               const tsr_tensor_t *rstd, tsr_tensor_t *dx, tsr_tensor_t *dx16,
                               tsr_tensor_t *dgamma, tsr_tensor_t *dbeta, tsr_tensor_t *part);
/* out = bf16(gelu(x)) */
int tsr__op_gelu_fwd_bf16(const tsr_tensor_t *x, tsr_tensor_t *out, tsr_handle_t scratch);
/* d = gelu'(x) * d (fp32, in place), then d16 = bf16(d) */
int tsr__op_gelu_bwd_bf16(const tsr_tensor_t *x, tsr_tensor_t *d, tsr_tensor_t *d16);
/* dlogits (bf16, tiled like logits) = bf16(scale * (softmax - onehot));
 * the logits are only read */
int tsr__op_xent_bwd_bf16(const tsr_tensor_t *logits, const tsr_tensor_t *targets,
                          const tsr_tensor_t *lse, float scale, tsr_tensor_t *dlogits,
                          tsr_handle_t scratch);
/* tsr__op_linear_bwd with bf16 w and x: the products read dy16 = bf16(dy),
 * and so does the bias gradient (their epilogue). */
int tsr__op_linear_bwd_bf16(const tsr_tensor_t *w, const tsr_tensor_t *x,
                            const tsr_tensor_t *dy, const tsr_tensor_t *dy16, tsr_tensor_t *dx,
                            tsr_tensor_t *dw, tsr_tensor_t *db);

/* The Llama layers' producers (a bf16 Llama's GEMMs read bf16 and write
 * fp32: q, k, v, gate, up and the attention output stay fp32). */
/* tsr__op_rmsnorm_fwd with out bf16: out (C, N) bf16 tiled like x (written),
 * rstd fp32 (written); x, w fp32. One task per column tile. */
int tsr__op_rmsnorm_fwd_bf16(const tsr_tensor_t *x, const tsr_tensor_t *w, float eps,
                             tsr_tensor_t *out, tsr_tensor_t *rstd, tsr_handle_t scratch);
/* tsr__op_rmsnorm_bwd (dx fp32 RW, dw COMMUTE), then dx16 = bf16(dx)
 * (bf16, tiled like x, written) in the same task: what the next GEMMs
 * read. One task per column tile; no scratch (dx is the fp32 tile). */
int tsr__op_rmsnorm_bwd_bf16(const tsr_tensor_t *dout, const tsr_tensor_t *x,
                             const tsr_tensor_t *w, const tsr_tensor_t *rstd, tsr_tensor_t *dx,
                             tsr_tensor_t *dx16, tsr_tensor_t *dw);
/* h = bf16(silu(gate) * up): gate, up fp32 (F, N), h bf16 tiled alike
 * (written). One task per tile. */
int tsr__op_swiglu_fwd_bf16(const tsr_tensor_t *gate, const tsr_tensor_t *up, tsr_tensor_t *h,
                            tsr_handle_t scratch);
/* dgate = bf16(dh * up * silu'(gate)), dup = bf16(dh * silu(gate)): gate,
 * up, dh fp32 (F, N), dgate and dup bf16 tiled alike (both written; no fp32
 * copy: Llama's gate and up projections have no bias to reduce them into).
 * The scratch holds at least TWO fp32 tiles (the kernel writes both
 * gradients before they are rounded). One task per tile. */
int tsr__op_swiglu_bwd_bf16(const tsr_tensor_t *gate, const tsr_tensor_t *up,
                            const tsr_tensor_t *dh, tsr_tensor_t *dgate, tsr_tensor_t *dup,
                            tsr_handle_t scratch);

/* ---- codelets: argument blocks and lookup (for tests and tools) ---------- */

/* C (m, n) = alpha op(A) (m, k) op(B) (k, n) + beta C */
typedef struct tsr__gemm_args {
    int ta, tb, m, n, k;
    float alpha, beta;
} tsr__gemm_args_t;
/* gemm_bf16: A and B bf16, C bf16 (c_bf16 1) or fp32 */
typedef struct tsr__gemm_bf16_args {
    tsr__gemm_args_t g;
    int c_bf16;
} tsr__gemm_bf16_args_t;
/* gemm_bias, gemm_bias_gelu, gemm_dgelu, gemm_dgelu_bgrad, gemm_bgrada: the
 * product g with the epilogue kind (TSR_EPI_*, kernels/gemm.h); A and B
 * bf16 (ab16), C bf16 (c16) */
typedef struct tsr__gemm_ep_args {
    tsr__gemm_args_t g;
    int kind, ab16, c16;
} tsr__gemm_ep_args_t;
/* y[yoff + i] += x[xoff + i], i < n */
typedef struct tsr__slice_args {
    size_t xoff, yoff, n;
} tsr__slice_args_t;
/* a tile of m rows and n columns (bias, LayerNorm: m features, n tokens) */
typedef struct tsr__mn_args {
    int m, n;
} tsr__mn_args_t;
/* layernorm_combine over row tiles: acc (n) = (init ? 0 : acc) + k partials
 * in order, finished by fin (TSR_LN_FIN_*, kernels/layernorm.h) over C
 * features with eps */
typedef struct tsr__ln_combine_args {
    int n, k, init, fin, C;
    float eps;
} tsr__ln_combine_args_t;
/* copy_rows: nrows rows of ncols columns from src to dst */
typedef struct tsr__rows_args {
    int src_rows, dst_rows, src_off, dst_off, nrows, ncols;
} tsr__rows_args_t;
/* regroup: k fine tiles (rows[i] rows each, at row off[i] of the coarse
 * tile of coarse_rows rows), ncols columns; split: coarse → fine, else
 * fine → coarse. Buffers: the coarse tile, then the k fine ones. */
#define TSR_REGROUP_MAX (TSR_MAX_BUFFERS - 1)
typedef struct tsr__regroup_args {
    int split, k, coarse_rows, ncols;
    int16_t rows[TSR_REGROUP_MAX];
    int32_t off[TSR_REGROUP_MAX];
} tsr__regroup_args_t;
/* embeddings: C features, T tokens, vocabulary tile [v0, v0 + nv) of V */
typedef struct tsr__embed_args {
    int C, T, nv, v0, V;
} tsr__embed_args_t;
/* attention on a (query tile, key tile) pair: head dimension d, tq queries
 * from q0 and tk keys from k0 (absolute positions in the sequence), nb heads,
 * nseq sequences side by side in one tile; q, k, v (dq, dk, dv) tiles with
 * ld rows per token, o and dout with ldo (head stride d in both) */
typedef struct tsr__attn_args {
    int d, tq, tk, nb, q0, k0;
    float scale;
    /* backward: the pair's dq tile (ATTN_FIRST_DQ), its dk and dv tiles
     * (ATTN_FIRST_DKV) get their first contribution: zeroed in the task
     * instead of by fill tasks before it (written, not read: TSR_W) */
    int first;
    int nseq, ld, ldo;
    int bf16; /* GPU products on bf16 operands (else TF32) unless strict */
    /* grouped-query attention: query head b reads K/V head b / kv_group (1:
     * plain multi-head); k, v (dk, dv) start koff, voff rows into their
     * tiles (0 where q, k, v are tiles of their own; C and C + Ckv in a
     * fused (C + 2 Ckv, tt) tile) */
    int kv_group, koff, voff;
} tsr__attn_args_t;
enum { TSR_ATTN_FIRST_DQ = 1, TSR_ATTN_FIRST_DKV = 2 };
/* RMSNorm forward: a tile of m features and n tokens, eps */
typedef struct tsr__rms_args {
    int m, n;
    float eps;
} tsr__rms_args_t;
/* RoPE on a tile of nh heads of d features (ld = nh d) and T tokens: the
 * first at position pos0 + s0, the positions wrapping back to pos0 after
 * seq_len - s0 tokens (a new sequence); inverse: the backward rotation */
typedef struct tsr__rope_args {
    int d, nh, T, s0, seq_len, pos0, inverse;
    int ld; /* a token's stride in the tile: nh d, or the fused qkv's rows */
    int c0; /* the first column of the tile rotated (T columns from it) */
} tsr__rope_args_t;
/* cross-entropy on a vocabulary tile [v0, v0 + nv) of T tokens */
typedef struct tsr__xent_args {
    int nv, T, v0, accumulate;
    float scale;
} tsr__xent_args_t;

/* (query, key) pairs the causal mask lets through in an attention task. */
double tsr__attn_pairs(int tq, int tk, int nb, int q0, int k0);

/* The codelet of that name (read-only; NULL if none), and the i-th of all
 * of them (NULL past the last). */
const tsr_codelet_t *tsr__op_codelet(const char *name);
const tsr_codelet_t *tsr__op_codelet_at(int i);

#endif
