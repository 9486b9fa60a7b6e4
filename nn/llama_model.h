/* nn/llama_model.h — the inside of a Llama model (nn/llama.c) for the other
 * units of nn/ that submit tasks on its tiles (generation with a KV cache):
 * the parameter table, the activations, the RoPE table.
 *
 * Must never: be included outside nn/ (the public face is tessera/llama.h),
 * or be used to change a model's shape or tiling after tsr_llama_create.
 */
#ifndef TSR_NN_LLAMA_MODEL_H
#define TSR_NN_LLAMA_MODEL_H

#include <tessera/llama.h>

#include "nn/io/llama_config.h"
#include "nn/params.h"
#include "nn/tensor.h"
#include "nn/trainer.h"

/* A layer's parameters. q_proj, k_proj and v_proj are one parameter, qkv:
 * (C, Q) with Q = (heads + 2 kv_heads) D, whose column-major bytes are the
 * three HF [out, in] tensors one after the other (transformers' Linear
 * weight [out, in] row-major is our (in, out) column-major: y = W^T x). */
typedef struct llama_layer_params {
    param_t *ln1, *qkv, *o, *ln2, *gate, *up, *down;
} llama_layer_params_t;

/* What backward needs from one layer's forward, per micro-batch slot of a
 * wave (as GPT-2's layer_acts_t: with cfg.recompute only x is per layer and
 * slot, the others are la[0]'s). With bf16 precision ln1, yb, ln2 and h are
 * bf16 (only GEMMs read them). */
typedef struct llama_layer_acts {
    tsr_tensor_t x;                 /* (C, N) tiles (C, tt): the block's input */
    tsr_tensor_t ln1, rstd1;        /* (C, N); (1, N) */
    tsr_tensor_t qkv;               /* (Q, N) tiles (Q, tt): q and k rotated */
    tsr_tensor_t atty, att_lse;     /* (Hq, N) fp32, bf16 precision only; (H, N) */
    tsr_tensor_t yb;                /* attention output (Hq, N), o_proj's input */
    tsr_tensor_t res1;              /* x + attention */
    tsr_tensor_t ln2, rstd2;
    tsr_tensor_t gate, up;          /* (F, N) tiles (tf, tt) */
    tsr_tensor_t h;                 /* silu(gate) * up, down's input */
} llama_layer_acts_t;

/* What one micro-batch keeps from its forward to its backward beside its
 * llama_layer_acts_t: slot s of the cfg.wave micro-batches of a wave
 * (nn/wave.h), as GPT-2's gpt2_slot_t. tsr_llama_forward and _backward use
 * slot 0. */
typedef struct llama_slot {
    tsr_tensor_t xL;                /* (C, N) the last layer's output */
    tsr_tensor_t tokens, targets;   /* (1, N) int32 */
    tsr_tensor_t ce_loss;           /* (1, N) per-token losses */
    tsr_tensor_t d;                 /* (C, N) the residual stream's gradient */
    tsr_tensor_t d16;               /* its bf16 copy (bf16 precision only) */
    /* a layer's backward, from one step to the next (FOR_SLOTS in
     * nn/llama.c): (C, N), (F, N), (Q, N), (Hq, N); bf16 precision: the
     * bf16 copies the backward GEMMs read (dgate, dup fp32 only) */
    tsr_tensor_t dln, dh, dgate, dup, dqkv, dyb;
    tsr_tensor_t dgate16, dup16, dqkv16;
    double count;                   /* its targets, over every replica */
} llama_slot_t;

/* One Hugging Face tensor: a parameter, or (q, k, v) a column range of the
 * fused qkv. */
typedef struct llama_name {
    char name[96];
    int param;          /* index into params.p */
    size_t offset, numel; /* elements into the parameter's dense array */
    int rows, cols;     /* HF shape [rows, cols] (cols 0: a vector) */
} llama_name_t;

struct tsr_llama {
    uint64_t runtime;
    tsr__build_t build;
    tsr_llama_config_t cfg;     /* tiles resolved */
    tsr__llama_config_t hf;     /* the config.json a save writes */
    int B, T, N;
    int C, D, Hq, Hkv, Q, F;   /* hidden, head_dim, heads D, kv_heads D, Hq + 2 Hkv, intermediate */
    tsr__params_t params;
    tsr__trainer_t train;
    llama_name_t *names;
    int nnames;
    param_t *embed, *norm, *head; /* head == embed when tied */
    llama_layer_params_t *lp;
    int slots;                  /* cfg.wave: micro-batches per wave */
    size_t wave_window;         /* the waves' submission window (nn/wave.h) */
    llama_layer_acts_t *la;     /* slots x layers: slot s, layer l at la[s * layers + l] */
    llama_slot_t *slot;         /* slots */
    tsr_tensor_t lnf, rstdf, logits;
    tsr_tensor_t ce_ms, ce_lse;
    tsr_tensor_t att_ms, att_acc, att_D;   /* attention scratch (one task's) */
    tsr_tensor_t dln;                      /* the head's backward */
    tsr_tensor_t dlogits16;                /* bf16 precision: the head's gradient */
    tsr_handle_t scratch;
    tsr_handle_t rope;          /* D/2 doubles: the inverse frequencies */
    int have_logits, have_targets, have_loss;
    int loss_slot;              /* the slot of the last loss */
};

int tsr__llama_check(const tsr_llama_t *m, const char *fn);

#endif
