/* tools/model.h — one model of either family (GPT-2, Llama) behind one set
 * of calls, so that the training loop, the checkpoints of a run folder
 * (ckpt.h), evaluation and simulation are written once.
 *
 * A model_t is a tagged union: `arch` says which of the library's models
 * it holds, and every model_* call dispatches on it to tsr_gpt2_* or
 * tsr_llama_*, returning the library's status (TSR_OK, TSR_EINVAL, …) as
 * they do. Calls that report to the user (model_read_config,
 * model_flags_resolve, model_config_from_checkpoint) follow cli.h's
 * conventions instead: 0, 1 (failure) or 2 (usage error), after reporting.
 *
 * Files: a GPT-2 is saved as one HF safetensors file; a Llama as an HF
 * checkpoint folder (config.json beside model.safetensors, F32 unless
 * save_dtype says BF16, or shards with their index), which transformers
 * loads as it is. model_save writes that file or folder.
 *
 * Generation: a model_gen_t is a KV cache over a model of either family
 * (model_gen_create, _prefill, _step, …), for tessera-generate's one loop.
 */
#ifndef TESSERA_TOOLS_MODEL_H
#define TESSERA_TOOLS_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include <tessera/gpt2.h>
#include <tessera/llama.h>

#include "cli.h"

typedef enum model_arch { MODEL_GPT2 = 0, MODEL_LLAMA = 1 } model_arch_t;

/* "gpt2" or "llama" into *arch; 0, or 2 after a usage error naming them. */
int model_arch_parse(const char *name, model_arch_t *arch);
const char *model_arch_name(model_arch_t arch);

/* The shape and run settings of a model of either family: `gpt2` or
 * `llama`, whichever `arch` says, is the one used. */
typedef struct model_config {
    model_arch_t arch;
    tsr_gpt2_config_t gpt2;
    tsr_llama_config_t llama;
} model_config_t;

/* Both families' defaults (tsr_gpt2_config_default, tsr_llama_config_default). */
void model_config_default(model_config_t *c, model_arch_t arch);
/* The longest sequence (GPT-2's context, Llama's max_positions). */
int model_config_context(const model_config_t *c);
int model_config_vocab(const model_config_t *c);
/* The run settings, whichever family. */
void model_config_set_run(model_config_t *c, int recompute, int precision, int data_parallel,
                          int zero);
/* "2 layers, 6 heads (2 K/V) of 16, hidden 96, intermediate 200, context
 * 48, vocab 97" (Llama) or cli_config_describe's line (GPT-2). */
void model_config_describe(const model_config_t *c, char *buf, size_t size);

/* ---- flags --------------------------------------------------------------- */

/* The Llama shape flags beyond cli_model_opts's (--hidden, --intermediate,
 * --kv-heads, --head-dim, --max-positions, --rope-theta, --rms-norm-eps,
 * --tie-embeddings), bound to cfg. */
#define MODEL_LLAMA_NOPTS 8
void model_llama_opts(cli_opt_t *opts, tsr_llama_config_t *cfg);

/* After cli_parse: the model of the flags. gflags, gopts: the GPT-2 flags
 * of cli_model_opts (--vocab, --layers, --heads and the tile sizes serve
 * both families); lflags, lopts: model_llama_opts's. base (NULL: the
 * defaults, as lflags holds them) is a Llama shape from --config or
 * --preset, which the flags given override. A flag of the other family is
 * a usage error, as is a Llama shape whose K/V heads do not divide its
 * heads. recompute and precision are the run settings. Returns 0, or 2
 * after reporting. */
int model_flags_resolve(model_arch_t arch, cli_opt_t *gopts, const tsr_gpt2_config_t *gflags,
                        cli_opt_t *lopts, const tsr_llama_config_t *lflags,
                        const tsr_llama_config_t *base, int recompute, int precision,
                        model_config_t *out);

/* The Llama shape checks the tools make before the library sees the
 * shape (so that they are usage errors, exit 2). Returns 0 or 2. */
int model_check_llama_shape(const tsr_llama_config_t *c);

/* The shape of a checkpoint: a GPT-2 safetensors file, or a Llama
 * checkpoint folder or its config.json. Returns 0, or 1 after reporting. */
int model_read_config(model_arch_t arch, const char *path, model_config_t *cfg);

/* The shape comes from a checkpoint `what`: every shape flag the user gave
 * (seen in gopts or lopts) must agree with ckpt; the tile sizes and run
 * settings of `flags` are kept. Returns 0, or 1 after reporting a conflict. */
int model_config_from_checkpoint(const char *what, const model_config_t *ckpt,
                                 const model_config_t *flags, cli_opt_t *gopts,
                                 cli_opt_t *lopts, model_config_t *out);

/* ---- the model ----------------------------------------------------------- */

typedef struct model {
    model_arch_t arch;
    union {
        tsr_gpt2_t *gpt2;
        tsr_llama_t *llama;
    } u;
    /* how model_save writes a Llama's folder (tsr_llama_save): the dtype
     * (TSR_GPT2_FP32, model_create's default, or TSR_GPT2_BF16) and the
     * data bytes per shard (0: one model.safetensors). A GPT-2's file is
     * always fp32 and whole: model_save refuses other values for it. */
    int save_dtype;
    size_t shard_bytes;
} model_t;

/* A model of cfg for batches of batch x seq tokens into *m. TSR status. */
int model_create(model_t *m, const model_config_t *cfg, int batch, int seq);
/* Frees the model (none: nothing) and clears m. */
void model_free(model_t *m);
int model_is_open(const model_t *m);
/* The model's configuration with the tile sizes resolved. */
void model_config_of(const model_t *m, model_config_t *out);
size_t model_num_params(const model_t *m);
int model_init_weights(model_t *m, uint64_t seed);
int model_forward(model_t *m, const int32_t *tokens, const int32_t *targets, float *loss);
int model_loss(model_t *m, float *loss);
int model_backward(model_t *m, float scale);
/* micro forward + backward(scale) rounds, in the model's waves (its
 * config's wave); losses: NULL or micro floats. */
int model_forward_backward(model_t *m, int micro, const int32_t *tokens,
                           const int32_t *targets, float scale, float *losses);
/* The model's micro-batches per wave (its config's, resolved). */
int model_wave(const model_t *m);
int model_zero_grad(model_t *m);
int model_step(model_t *m, const tsr_adamw_config_t *opt, float lr, float *grad_norm);
int model_steps_done(const model_t *m);
/* The weights from / to a checkpoint: a GPT-2 file, a Llama folder (as
 * m->save_dtype and m->shard_bytes say). */
int model_load(model_t *m, const char *path);
int model_save(model_t *m, const char *path);
/* The optimizer state beside a checkpoint (one file, either family). */
int model_save_state(model_t *m, const char *path, const char *extra);
int model_load_state(model_t *m, const char *path, char *extra, size_t extra_size);

/* ---- generation with a KV cache ----------------------------------------- */

/* A KV cache of either family (tsr_gpt2_gen_* or tsr_llama_gen_*): `batch`
 * slots of at most max_len positions each, over an open model. */
typedef struct model_gen {
    model_arch_t arch;
    union {
        tsr_gpt2_gen_t *gpt2;
        tsr_llama_gen_t *llama;
    } u;
} model_gen_t;

int model_gen_create(model_gen_t *g, model_t *m, int batch, int max_len);
/* Frees the cache (none: nothing) and clears g. */
void model_gen_free(model_gen_t *g);
/* The weights decoded from: TSR_GPT2_FP32, or TSR_GPT2_BF16 (GPT-2 only,
 * tsr_gpt2_gen_precision; a Llama decodes in fp32: TSR_EINVAL). */
int model_gen_precision(model_gen_t *g, int precision);
/* As tsr_gpt2_gen_prefill, _step and _length. */
int model_gen_prefill(model_gen_t *g, int slot, const int32_t *tokens, int n, float *logits);
int model_gen_step(model_gen_t *g, const int32_t *tokens, float *logits);
int model_gen_length(const model_gen_t *g, int slot);

/* The special ids of a Llama checkpoint's config.json (`path`: the file or
 * the folder holding it), as transformers reads them: bos_token_id (absent:
 * 1; null: -1) and eos_token_id, an id or a list of ids (absent: 2; null:
 * none) into eos[*neos] (at most max_eos). Returns 0, or 1 after reporting. */
int model_llama_special_ids(const char *path, int32_t *bos, int32_t *eos, int *neos,
                            int max_eos);

#endif
