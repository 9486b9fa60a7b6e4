/* nn/gen_ops.h — the tile operations of generation with a KV cache
 * (nn/generate.c) that nn/ops.h lacks: the embedding of a few token
 * columns at arbitrary positions, attention of new columns over the cache,
 * and the copy of one column (the last prompt position) into its own
 * tensor.
 *
 * Like nn/ops.h, every function only submits tasks in program order and
 * returns the first submission error; none waits or touches tile memory.
 */
#ifndef TSR_NN_GEN_OPS_H
#define TSR_NN_GEN_OPS_H

#include <stdint.h>

#include "nn/tensor.h"

/* out(:, j) = wte(:, tokens[j]) + wpe(:, pos[j]) for the n columns of out
 * (C, n), one tile row; tokens and positions are host arrays (checked by
 * the caller). wte (C, V) and wpe (C, ctx) in any column tiling; wpe NULL:
 * the token's column alone (Llama). */
int tsr__op_decode_embed(const tsr_tensor_t *wte, const tsr_tensor_t *wpe,
                         const int32_t *tokens, const int32_t *pos, tsr_tensor_t *out);

/* Attention of n new columns over the cache, one task per head:
 *   qkv (3C, n) tiled (C, n): q, k, v of all heads (the c_attn output)
 *   cols (2, n) int32, one tile: (slot, position) per column
 *   kc, vc (C, nslots * maxlen) tiled (d, nslots * maxlen): one tile per head
 *   y (C, n) tiled (d, n): the heads' outputs
 * keys: the cached positions the columns attend over in all (the sum of
 * position + 1), for the cost estimates. */
int tsr__op_decode_attn(const tsr_tensor_t *qkv, const tsr_tensor_t *cols, int heads,
                        int maxlen, double keys, tsr_tensor_t *kc, tsr_tensor_t *vc,
                        tsr_tensor_t *y);

/* The same for grouped-query attention from a fused qkv (Llama):
 *   qkv (Hq + 2 Hkv, n) in one tile: q of head h at rows h d, k and v of
 *   K/V head g at Hq + g d and Hq + Hkv + g d (q and k already rotated)
 *   kc, vc (Hkv, nslots * maxlen) tiled (d, …): one tile per K/V head
 *   y (Hq, n) tiled (d, n); query head h reads K/V head h / (heads / kv_heads). */
int tsr__op_decode_attn_gqa(const tsr_tensor_t *qkv, const tsr_tensor_t *cols, int heads,
                            int kv_heads, int maxlen, double keys, tsr_tensor_t *kc,
                            tsr_tensor_t *vc, tsr_tensor_t *y);

/* dst(:, 0) = src(:, j): src (C, n) and dst (C, 1), each one tile. */
int tsr__op_take_column(const tsr_tensor_t *src, int j, tsr_tensor_t *dst);

/* bf16 copies of weights, for decoding from half the bytes. A packed
 * tensor holds bf16 values two per 4-byte element: the copy of w (rows,
 * cols) in tiles (tr, tc), rows and tr even, is (rows/2, cols) in tiles
 * (tr/2, tc), tile for tile. */
int tsr__packed_init(tsr_tensor_t *packed, const tsr_tensor_t *w);
/* packed = bf16(w), rounded to nearest even, one task per tile */
int tsr__op_to_bf16(const tsr_tensor_t *w, tsr_tensor_t *packed);
/* The Linear layer of nn/ops.h (y = W x + b, or y += W x + b with beta 1)
 * from W's bf16 copy wb; w gives the fp32 tiling it was made from. */
int tsr__op_linear_bf16(const tsr_tensor_t *w, const tsr_tensor_t *wb, const tsr_tensor_t *b,
                        const tsr_tensor_t *x, float beta, tsr_tensor_t *y);
/* A Linear layer (as tsr__op_linear_fwd) whose W has one tile row (the
 * attention's and the MLP's output projections, which would otherwise
 * accumulate tile after tile into one y tile: one worker): W's columns in
 * two halves, each a chain of tasks into its own partial p0, p1 ((rows, n),
 * one tile each), run side by side, then one task y = beta y + b + p0 + p1.
 * From W's bf16 copy wb, or from w itself (fp32) when wb is NULL. */
int tsr__op_linear_split(const tsr_tensor_t *w, const tsr_tensor_t *wb, const tsr_tensor_t *b,
                         const tsr_tensor_t *x, float beta, tsr_tensor_t *y, tsr_tensor_t *p0,
                         tsr_tensor_t *p1);
/* y (V, n) = W^T x from the bf16 copy of W (C, V) (the tied head's logits):
 *   x (C, n) one tile, y tiled like W's columns. */
int tsr__op_gemv_t_bf16(const tsr_tensor_t *w, const tsr_tensor_t *wb, const tsr_tensor_t *x,
                        tsr_tensor_t *y);

/* argument blocks (for tests) */
typedef struct tsr__gemv_args {
    int m, n, k, trans;
    float beta;
    int ldx;                /* N form: x's leading dimension */
    int f32;                /* N form: W is fp32 (not a bf16 copy) */
    size_t woff, xoff;      /* elements into the W (bf16) and x tiles */
} tsr__gemv_args_t;
typedef struct tsr__sum2_args {
    int m, n;
    float beta;
} tsr__sum2_args_t;
typedef struct tsr__decode_args {
    int d, n, maxlen, off, ld;
    float scale;
    double keys;
} tsr__decode_args_t;
typedef struct tsr__decode_gqa_args {
    int d, n, maxlen, qoff, koff, voff, ld;
    float scale;
    double keys;
} tsr__decode_gqa_args_t;
typedef struct tsr__decode_embed_args {
    int C;
    size_t a_off, b_off, out_off; /* elements into the three tiles */
} tsr__decode_embed_args_t;

/* The codelet of that name among these (NULL if none). */
const tsr_codelet_t *tsr__gen_op_codelet(const char *name);

#endif
