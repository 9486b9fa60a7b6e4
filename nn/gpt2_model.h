/* nn/gpt2_model.h — the inside of a GPT-2 model (nn/gpt2.c) for the other
 * units of nn/ that submit tasks on its tiles (generation with a KV cache,
 * nn/generate.c): the parameter table, the activations, and the check that a
 * model argument is live under the running runtime.
 *
 * Must never: be included outside nn/ (the public face is tessera/gpt2.h),
 * or be used to change a model's shape or tiling after tsr_gpt2_create.
 */
#ifndef TSR_NN_GPT2_MODEL_H
#define TSR_NN_GPT2_MODEL_H

#include <tessera/gpt2.h>

#include "nn/tensor.h"

/* The most tiles (runtime handles) one model may have: about 36 000 for the
 * 124M model with 8 x 1024 tokens and the derived tiles; beyond this the
 * tiles are far too small for the shapes, or the shapes far too large for
 * one machine. */
enum { MODEL_MAX_TILES = 1 << 22 };

/* One parameter: its value, gradient and AdamW moments, tiled alike. With
 * cfg.precision bf16 the weight matrices that GEMMs read (wte and the
 * Linear layers' weights) also have pb, a bf16 copy of p tiled like it
 * (zeroed for the others and in fp32), which every GEMM reads instead. */
typedef struct param {
    char name[64];
    tsr_tensor_t p, g, m, v;
    int decay; /* weight decay applies (matrices) */
    tsr_tensor_t pb; /* bf16 copy of p, refreshed after every change of p */
    int *owner;      /* data parallel with ZeRO: the rank that updates each
                        tile (tiles[i] of p, g, m, v); NULL otherwise */
} param_t;

typedef struct layer_params {
    param_t *ln1_w, *ln1_b, *attn_w, *attn_b, *proj_w, *proj_b;
    param_t *ln2_w, *ln2_b, *fc_w, *fc_b, *fcproj_w, *fcproj_b;
} layer_params_t;

/* What backward needs from the forward of one layer. With cfg.recompute
 * only x is per layer: the others exist once, in la[0] (block_acts), are
 * dropped by the forward as soon as it has read them, and are written again
 * by the block's forward re-run at the start of its backward. Sharing them
 * also orders that re-run: block l-1's recompute overwrites what block l's
 * backward reads, so it cannot start before those reads, and at most about
 * one block's activations are alive at a time. */
/* With cfg.precision bf16, ln1, yb, ln2, fcg (and the model's lnf) are bf16
 * tensors (only GEMMs read them); the others stay fp32. */
typedef struct layer_acts {
    tsr_tensor_t x;                  /* (C, N) input of the block */
    tsr_tensor_t ln1, ln1_mean, ln1_rstd;
    tsr_tensor_t qkv;                /* (3C, N) tiles (C, tt): q, k, v rows */
    tsr_tensor_t atty, att_lse;      /* (C, N) tiles (C, tt), bf16 precision
                                        only (else yb is it); (H, N) tiles (H, tt) */
    tsr_tensor_t yb;                 /* attention output (C, N) tiles (C, tt), for c_proj */
    tsr_tensor_t res1;               /* x + attention */
    tsr_tensor_t ln2, ln2_mean, ln2_rstd;
    tsr_tensor_t fch, fcg;           /* (4C, N): before and after GELU */
} layer_acts_t;

struct tsr_gpt2 {
    uint64_t runtime;   /* the runtime instance that holds the tiles */
    int dry;            /* create's first pass: check and count, allocate nothing */
    long long ntiles;   /* tiles counted so far by that pass */
    tsr_gpt2_config_t cfg;
    int B, T, N, hd; /* hd: head width */
    int nparams;
    param_t *params;
    param_t *wte, *wpe, *lnf_w, *lnf_b;
    layer_params_t *lp;
    layer_acts_t *la;
    tsr_tensor_t xL, lnf, lnf_mean, lnf_rstd, logits;
    tsr_tensor_t tokens, targets, ce_ms, ce_lse, ce_loss;
    tsr_tensor_t att_ms, att_acc, att_D;          /* attention scratch */
    tsr_tensor_t d, dln, dfc;                     /* backward */
    tsr_tensor_t dqkvb, dyb;                       /* (3C, N), (C, N) in tiles (C, tt) */
    tsr_handle_t norm;                             /* sum of squares of the gradients */
    /* bf16 precision only (zeroed otherwise): the bf16 gradients the GEMMs
     * of the backward pass read, and the fp32 scratch of the bf16 producers */
    tsr_tensor_t d16, dfc16, dqkvb16, dlogits16;
    tsr_handle_t scratch;
    int bf16_stale;                                /* a pb is older than its p */
    int grads_zero;                                /* every gradient is known to be 0:
                                                      tsr_gpt2_zero_grad has nothing to do */
    int have_logits;                               /* logits hold the last forward's */
    int have_targets;                              /* backward may follow */
    int have_loss;                                 /* ce_loss holds a loss */
    int ntargets;                                  /* non-ignored targets of it */
    /* data parallelism (cfg.data_parallel with more than one rank; else
     * dp_size 1 and nothing below is used) */
    int dp_size, dp_rank;
    tsr_handle_t dp_count;                         /* double: the targets of every rank */
    tsr_handle_t dp_loss;                          /* double: the loss sum of every rank */
    int steps;
};

/* A model argument of a call that uses its tiles: NULL or not a live model
 * is TSR_EINVAL; a model whose runtime was shut down is TSR_ESTATE. `fn`
 * names the caller in the message. */
int tsr__gpt2_check(const tsr_gpt2_t *m, const char *fn);

#endif
