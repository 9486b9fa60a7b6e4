/* llama.h — the public API of Tessera's Llama-family decoder (RMSNorm,
 * rotary position embeddings with optional Llama 3 frequency scaling,
 * SwiGLU MLP, grouped-query attention, no biases, untied or tied head):
 * the model (parameters, forward, backward, AdamW), Hugging Face Llama
 * checkpoints (config.json and one or sharded safetensors files, F32 or
 * BF16) and generation with a KV cache.
 *
 * It is GPT-2's API (gpt2.h) for the other model family, and shares its
 * parts that are not GPT-2's: the AdamW settings and learning-rate schedule,
 * the parameter parts (TSR_GPT2_PARAM, _GRAD, _ADAM_M, _ADAM_V), the
 * precisions (TSR_GPT2_FP32, _BF16), the tokenizer (a tokenizer.json:
 * tsr_tokenizer_open_json), token shards and the sampler. Both models run on
 * the same parameter table and trainer (docs/architecture.md): data
 * parallelism, ZeRO-1, clipping and bf16 copies behave alike.
 *
 * Like gpt2.h this header must never expose tiles or handles: an
 * application sees whole tensors by Hugging Face name (row-major bytes as
 * transformers stores them: an nn.Linear weight is [out, in]), host arrays
 * and status codes. Nothing here aborts on bad input.
 */
#ifndef TESSERA_LLAMA_H
#define TESSERA_LLAMA_H

#include <stddef.h>
#include <stdint.h>

#include <tessera/gpt2.h>
#include <tessera/tessera.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- model ------------------------------------------------------------- */

/* The shape (transformers' LlamaConfig names in the comments) and how the
 * model runs. */
typedef struct tsr_llama_config {
    int vocab_size;        /* vocab_size, 128256 for Llama 3 */
    int hidden;            /* hidden_size */
    int intermediate;      /* intermediate_size (SwiGLU width) */
    int layers;            /* num_hidden_layers */
    int heads;             /* num_attention_heads */
    int kv_heads;          /* num_key_value_heads: divides heads (1: MQA) */
    int head_dim;          /* head_dim, even; 0 = hidden / heads */
    int max_positions;     /* max_position_embeddings: the longest sequence */
    double rms_norm_eps;   /* rms_norm_eps, 1e-5 */
    double rope_theta;     /* rope_theta, 10000 (500000 for Llama 3) */
    /* rope_scaling {"rope_type": "llama3", ...}: 1 with the four values
     * below, 0 for none */
    int rope_llama3;
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_original_max_positions;
    int tie_embeddings;    /* tie_word_embeddings: the head is embed_tokens */
    /* Tile sizes; 0 = derived from the shapes (docs/llama.md). */
    int tile_tokens;       /* tokens per activation tile (as GPT-2's) */
    int tile_vocab;        /* vocabulary rows per tile of the embedding,
                              the head and the logits */
    int tile_hidden;       /* rows per tile of the intermediate activations */
    int recompute;         /* as tsr_gpt2_config_t */
    int precision;         /* TSR_GPT2_FP32 or TSR_GPT2_BF16, as GPT-2's */
    int data_parallel;     /* as tsr_gpt2_config_t */
    int zero;              /* as tsr_gpt2_config_t */
    int wave;              /* as tsr_gpt2_config_t: micro-batches per wave of
                              tsr_llama_forward_backward (0: chosen at
                              tsr_llama_create, tsr_llama_config tells) */
} tsr_llama_config_t;

/* A small default (the shapes of a 6-layer, 512-wide model with 8 heads, 2
 * K/V heads, vocabulary 128256, no scaling, tied embeddings off), fp32, no
 * recomputation, the wave size chosen at create; callers set the sizes they
 * want. */
TSR_API void tsr_llama_config_default(tsr_llama_config_t *cfg);

/* The shape in a Hugging Face config.json (`path`: the file, or the folder
 * holding it), checked as docs/llama.md says (unsupported fields are
 * refused by name). The run settings (tiles, recompute, precision, data
 * parallelism, wave) are left as tsr_llama_config_default sets them. */
TSR_API int tsr_llama_read_config(const char *path, tsr_llama_config_t *cfg);

typedef struct tsr_llama tsr_llama_t;

/* A model for batches of `batch` sequences of `seq_len` tokens (seq_len ≤
 * max_positions); parameters are zero until tsr_llama_init_weights or
 * tsr_llama_load. TSR_EINVAL names the first bad field. */
TSR_API int tsr_llama_create(tsr_llama_t **out, const tsr_llama_config_t *cfg, int batch,
                             int seq_len);
TSR_API int tsr_llama_free(tsr_llama_t *m);
/* The configuration with its tile sizes resolved; NULL for no model. */
TSR_API const tsr_llama_config_t *tsr_llama_config(const tsr_llama_t *m);
TSR_API size_t tsr_llama_num_params(const tsr_llama_t *m);
/* Matrices ~ N(0, 0.02^2), norm weights 1 (transformers' initialisation),
 * each parameter from its own stream of `seed`. */
TSR_API int tsr_llama_init_weights(tsr_llama_t *m, uint64_t seed);

/* tokens, targets: batch * seq_len ids, row-major [batch, seq_len];
 * targets NULL: logits only; a target < 0 is ignored. loss: the mean
 * cross-entropy over the non-ignored targets (NULL: not read, no wait). */
TSR_API int tsr_llama_forward(tsr_llama_t *m, const int32_t *tokens, const int32_t *targets,
                              float *loss);
TSR_API int tsr_llama_loss(tsr_llama_t *m, float *loss);
/* The vocab_size logits of position t of sequence b after the last forward. */
TSR_API int tsr_llama_logits(tsr_llama_t *m, int b, int t, float *out);
/* Gradients of scale * loss accumulate into the gradient tensors. */
TSR_API int tsr_llama_backward(tsr_llama_t *m, float scale);
/* Forward and backward of `micro` micro-batches (tokens and targets: micro
 * x batch x seq_len ids, micro-batch after micro-batch): the same as micro
 * rounds of tsr_llama_forward(tokens_i, targets_i) and
 * tsr_llama_backward(scale), submitted in waves of cfg.wave micro-batches
 * (the config in effect; docs/gpt2.md, "Waves"). The tasks and their inputs
 * are the same, so the gradients are the same; in deterministic mode
 * (tsr_config_t) every gradient is bitwise the same when the head is untied
 * (with tie_embeddings, embed_tokens' gradient gets the head's and the
 * embedding's sums, which a wave interleaves differently: rounding apart).
 * losses (may be NULL): each micro-batch's mean loss (micro floats), read
 * at the end of each wave; NULL: nothing waits. Every id is checked before
 * anything is submitted (TSR_EINVAL). tsr_llama_loss afterwards is the last
 * micro-batch's. */
TSR_API int tsr_llama_forward_backward(tsr_llama_t *m, int micro, const int32_t *tokens,
                                       const int32_t *targets, float scale, float *losses);
TSR_API int tsr_llama_zero_grad(tsr_llama_t *m);
/* One AdamW step over every parameter (weight decay on the matrices only,
 * not on the norm weights), global-norm clipping, as tsr_gpt2_step. */
TSR_API int tsr_llama_step(tsr_llama_t *m, const tsr_adamw_config_t *opt, float lr,
                           float *grad_norm);
TSR_API int tsr_llama_steps_done(const tsr_llama_t *m);

/* A parameter part by Hugging Face name ("model.layers.0.self_attn.q_proj.weight")
 * as transformers stores it, row-major; which: TSR_GPT2_PARAM, _GRAD,
 * _ADAM_M or _ADAM_V. numel receives the element count (ptr NULL: only it). */
TSR_API int tsr_llama_get(tsr_llama_t *m, const char *name, int which, float *ptr,
                          size_t *numel);
TSR_API int tsr_llama_set(tsr_llama_t *m, const char *name, int which, const float *ptr,
                          size_t numel);
/* Names in transformers' order; NULL out of range. */
TSR_API int tsr_llama_param_count(const tsr_llama_t *m);
TSR_API const char *tsr_llama_param_name(const tsr_llama_t *m, int i);

/* ---- Hugging Face checkpoints ------------------------------------------ */

/* Load the weights of a checkpoint folder (config.json beside
 * model.safetensors, or shards named by model.safetensors.index.json; F32,
 * BF16, F16 or F64 tensors) into a model of the same shape. The config's
 * shape must equal the model's; a missing, extra or mis-shaped tensor is
 * TSR_EINVAL naming it, and the model is unchanged. */
TSR_API int tsr_llama_load(tsr_llama_t *m, const char *dir);

/* Write the model as a checkpoint folder transformers loads: config.json
 * and the weights, as `dtype` TSR_GPT2_FP32 (F32) or TSR_GPT2_BF16 (BF16,
 * rounded to nearest even), in shards of at most shard_bytes data bytes
 * with an index (0: one model.safetensors). The set is replaced atomically
 * (docs/llama.md): a reader sees the old set or the new one. */
TSR_API int tsr_llama_save(tsr_llama_t *m, const char *dir, int dtype, size_t shard_bytes);

/* The optimizer state (AdamW moments "m.<name>" and "v.<name>" in
 * transformers' shapes, the step counter, and `extra`, free-form text kept
 * with it) in one safetensors file beside a checkpoint, for resuming; the
 * file is replaced atomically. load_state checks every tensor's presence
 * and shape before it changes anything; extra (if not NULL) receives the
 * text. With ZeRO each rank saves and loads its own share, as GPT-2's. */
TSR_API int tsr_llama_save_state(tsr_llama_t *m, const char *path, const char *extra);
TSR_API int tsr_llama_load_state(tsr_llama_t *m, const char *path, char *extra,
                                 size_t extra_size);

/* ---- generation with a KV cache (as tsr_gpt2_gen_*) --------------------- */

typedef struct tsr_llama_gen tsr_llama_gen_t;

TSR_API int tsr_llama_gen_create(tsr_llama_gen_t **out, tsr_llama_t *model, int batch,
                                 int max_len);
TSR_API int tsr_llama_gen_free(tsr_llama_gen_t *g);
TSR_API int tsr_llama_gen_prefill(tsr_llama_gen_t *g, int slot, const int32_t *tokens, int n,
                                  float *logits);
TSR_API int tsr_llama_gen_step(tsr_llama_gen_t *g, const int32_t *tokens, float *logits);
TSR_API int tsr_llama_gen_length(const tsr_llama_gen_t *g, int slot);
TSR_API int tsr_llama_gen_reset(tsr_llama_gen_t *g, int slot);

#ifdef __cplusplus
}
#endif

#endif
