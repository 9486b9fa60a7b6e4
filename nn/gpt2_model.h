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

#include "nn/params.h"
#include "nn/tensor.h"
#include "nn/trainer.h"

typedef struct layer_params {
    param_t *ln1_w, *ln1_b, *attn_w, *attn_b, *proj_w, *proj_b;
    param_t *ln2_w, *ln2_b, *fc_w, *fc_b, *fcproj_w, *fcproj_b;
} layer_params_t;

/* What backward needs from the forward of one layer (per micro-batch slot
 * of a wave). With cfg.recompute only x is per layer: the others exist once
 * per slot, in its block 0's entry (block_acts), are
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
    tsr_tensor_t qkv;                /* (3C, N) tiles (tc, tt): q, k, v rows */
    tsr_tensor_t atty, att_lse;      /* (C, N) tiles (tc, tt), bf16 precision
                                        only (else yb is it); (H, N) tiles
                                        (H tc / C, tt) */
    tsr_tensor_t yb;                 /* attention output (C, N) tiles (tc, tt), for c_proj */
    tsr_tensor_t res1;               /* x + attention */
    tsr_tensor_t ln2, ln2_mean, ln2_rstd;
    tsr_tensor_t fch, fcg;           /* (4C, N): before and after GELU */
} layer_acts_t;

/* What one micro-batch keeps from its forward to its backward beside its
 * layer_acts: slot s of the cfg.wave micro-batches of a wave (nn/wave.h).
 * tsr_gpt2_forward and _backward use slot 0. */
typedef struct gpt2_slot {
    tsr_tensor_t xL;                 /* (C, N) the last block's output */
    tsr_tensor_t tokens, targets;    /* (1, N) int32 */
    tsr_tensor_t ce_loss;            /* (1, N) per-token losses */
    tsr_tensor_t d;                  /* (C, N) the residual stream's gradient */
    /* a block's backward, from one step to the next (nn/gpt2.c, FOR_SLOTS) */
    tsr_tensor_t dln, dfc;           /* (C, N), (4C, N) */
    tsr_tensor_t dqkvb, dyb;         /* (3C, N), (C, N) in tiles (tc, tt) */
    /* channel tiles only (R = C / tc > 1; zeroed otherwise): LayerNorm's
     * partial sums over the R tiles, (2R, N) tiles (2, tt) */
    tsr_tensor_t ln_part;
    /* bf16 precision only (zeroed otherwise): the bf16 gradients the GEMMs
     * of the backward pass read */
    tsr_tensor_t d16, dfc16, dqkvb16;
    double count;                    /* its targets, over every replica */
} gpt2_slot_t;

struct tsr_gpt2 {
    uint64_t runtime;   /* the runtime instance that holds the tiles */
    tsr__build_t build; /* create's two passes (nn/params.h) */
    tsr_gpt2_config_t cfg;
    int B, T, N, hd; /* hd: head width */
    int tc;          /* cfg.tile_channels: rows per channel tile */
    tsr__params_t params;  /* in checkpoint order */
    tsr__trainer_t train;  /* the optimizer step, data parallelism */
    param_t *wte, *wpe, *lnf_w, *lnf_b;
    layer_params_t *lp;
    int slots;             /* cfg.wave: micro-batches per wave */
    size_t wave_window;    /* the waves' submission window (nn/wave.h) */
    layer_acts_t *la;      /* slots x layers: slot s, block l at la[s * layers + l] */
    gpt2_slot_t *slot;     /* slots */
    tsr_tensor_t lnf, lnf_mean, lnf_rstd, logits;
    tsr_tensor_t ce_ms, ce_lse;
    tsr_tensor_t att_ms, att_acc, att_D;          /* attention scratch (one task's) */
    /* bf16 precision only (zeroed otherwise): the head's bf16 gradient, and
     * the fp32 scratch of the bf16 producers */
    tsr_tensor_t dlogits16;
    tsr_handle_t scratch;
    int have_logits;                               /* logits hold the last forward's */
    int have_targets;                              /* backward may follow */
    int have_loss;                                 /* a slot's ce_loss holds a loss */
    int loss_slot;                                 /* the slot of the last loss */
};

/* A model argument of a call that uses its tiles: NULL or not a live model
 * is TSR_EINVAL; a model whose runtime was shut down is TSR_ESTATE. `fn`
 * names the caller in the message. */
int tsr__gpt2_check(const tsr_gpt2_t *m, const char *fn);

#endif
