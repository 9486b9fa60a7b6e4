/* gpt2.h — the public API of Tessera's GPT-2: the model (parameters,
 * forward, backward, AdamW), HF safetensors checkpoints, the GPT-2 byte-level
 * BPE tokenizer and llm.c-compatible token shards.
 *
 * Every tensor of the model is cut into tiles and every operation is
 * submitted as tile tasks to the runtime (tessera.h), so the runtime decides
 * where each tile lives; tsr_init() must have been called first.
 *
 * This header must never expose tiles or handles: an application sees whole
 * tensors by name, host arrays, and status codes (TSR_OK or TSR_E…, with
 * tsr_error_message() telling what was wrong). Nothing here aborts on bad
 * input (wrong shapes, unknown names, corrupt files).
 */
#ifndef TESSERA_GPT2_H
#define TESSERA_GPT2_H

#include <stddef.h>
#include <stdint.h>

#include <tessera/tessera.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- model ------------------------------------------------------------- */

typedef struct tsr_gpt2_config {
    int vocab_size;   /* 50257 for GPT-2's tokenizer */
    int context;      /* positions of the position embedding (n_ctx), 1024 */
    int layers;       /* n_layer, 12 for the 124M model */
    int heads;        /* n_head, 12; channels must be a multiple */
    int channels;     /* n_embd, 768 */
    /* Tile sizes; 0 = derived from the shapes (docs/gpt2.md). */
    int tile_tokens;  /* tokens per activation tile: divides seq_len, or is a
                         multiple of it holding whole sequences of a batch */
    int tile_vocab;   /* vocabulary rows per tile of wte and the logits */
    int tile_hidden;  /* rows per tile of the MLP's 4C hidden activations */
    /* Activation recomputation: 1 keeps only each block's input through
     * the forward pass and recomputes the block's activations in backward
     * (less memory, about one more forward); 0 (default) keeps them all. */
    int recompute;
    /* Arithmetic of the matrix products (TSR_GPT2_FP32 or TSR_GPT2_BF16).
     * bf16: mixed precision — the GEMMs take bf16 inputs and accumulate in
     * fp32; master weights, gradients, AdamW moments and the statistics of
     * LayerNorm, softmax and the loss stay fp32 (docs/gpt2.md). */
    int precision;
    /* Data parallelism over the ranks of an MPI job (tessera/mpi.h,
     * docs/data-parallel.md): 1 makes every rank's model one replica that
     * runs forward and backward on its own micro-batch; tsr_gpt2_step
     * all-reduces the gradients, so that every rank applies the gradient of
     * the mean loss over the combined batch, and tsr_gpt2_loss returns that
     * mean. Every rank must then make the same calls in the same order (they
     * submit collectives). With one rank (or a build without MPI) it changes
     * nothing. 0 (default): the model is this process's alone. */
    int data_parallel;
    /* ZeRO stage 1 (needs data_parallel = 1): each rank keeps the AdamW
     * moments of its share of the parameter tiles only (balanced by bytes),
     * updates those tiles and broadcasts them; the others' moment tiles are
     * never touched, so they never get memory. Same results as 0. */
    int zero;
    /* Micro-batches per wave of tsr_gpt2_forward_backward (docs/gpt2.md,
     * "Waves"): with k > 1 each block runs for k micro-batches before the
     * next block starts (the backward likewise, in reverse), so a model
     * whose weights do not stay on its GPUs streams each block's weights
     * once per wave rather than once per micro-batch; the model then keeps
     * k sets of the tensors that cross blocks (each block's input with
     * recompute, every activation without). 1: one micro-batch at a time.
     * 0 (default): chosen at tsr_gpt2_create (tsr_gpt2_config tells): 1
     * where the weights fit 70 % of the GPUs' memory (or there are none),
     * else as many as 3/4 of the memory beside the training state holds
     * (host, GPUs and disk; at most half the host's), at most 16. At most
     * 4096. */
    int wave;
    /* Rows per channel tile (docs/gpt2.md, "Channel tiles"): the residual
     * stream's C rows cut into tiles of tile_channels, so a (C, C) weight
     * is (tile_channels, tile_channels) tiles, an activation (C, N) is
     * (tile_channels, tokens) tiles, and LayerNorm and the attention run
     * per tile (fixed-order sums over the tiles: the results do not depend
     * on who runs them). A multiple of the head width that divides
     * channels. 0 (default): derived (tsr_gpt2_config tells): channels
     * itself while a (C, C) fp32 tile is at most 1 GiB (and a 64th of the
     * smallest GPU's memory), else the largest such divisor that fits; at
     * most C / 2 where the runtime homes the training state on the GPUs
     * (tsr_placement_homes) and tiles of 2048 rows or more remain. */
    int tile_channels;
} tsr_gpt2_config_t;

/* tsr_gpt2_config_t.precision */
enum { TSR_GPT2_FP32 = 0, TSR_GPT2_BF16 = 1 };

/* The 124M GPT-2 shape (12 layers, 12 heads, 768 channels, 1024 positions,
 * vocabulary 50257), tiles derived. NULL: nothing. */
TSR_API void tsr_gpt2_config_default(tsr_gpt2_config_t *cfg);

typedef struct tsr_gpt2 tsr_gpt2_t;

/* The model's contract with its caller:
 * - A model is live from tsr_gpt2_create until tsr_gpt2_free. Every call
 *   below given NULL, a freed model or a pointer that never was one returns
 *   TSR_EINVAL (the getters that return a value return 0 or NULL); a model
 *   freed twice is TSR_EINVAL, not a crash. (A later model may reuse a freed
 *   one's memory: a stale pointer then names that model.)
 * - A model belongs to the runtime instance running at its creation. After
 *   tsr_shutdown its tiles are gone, even if tsr_init runs again: every call
 *   that uses them returns TSR_ESTATE; the getters of host-side facts
 *   (config, counts, names) still answer, and tsr_gpt2_free frees the host
 *   memory without touching the runtime.
 * - One thread at a time per model. */

/* A model with zero parameters, for micro-batches of `batch` sequences of
 * `seq_len` tokens (seq_len <= context, batch * seq_len <= 2^30), under the
 * running runtime (TSR_ESTATE without one). TSR_EINVAL, naming the fields,
 * for inconsistent shapes or tile sizes, for shapes whose sizes overflow int
 * (e.g. 4 * channels), for tiles of more than INT_MAX elements, and for a
 * model of more than 2^22 tiles; nothing is allocated before these checks.
 * The tiles' memory is allocated where they are first used. */
TSR_API int tsr_gpt2_create(tsr_gpt2_t **out, const tsr_gpt2_config_t *cfg, int batch, int seq_len);
/* Wait for the model's tasks and free it. NULL is TSR_OK (nothing to do); a
 * pointer that is not a live model is TSR_EINVAL. */
TSR_API int tsr_gpt2_free(tsr_gpt2_t *m);

/* The configuration in effect (tile sizes resolved); NULL for no model. */
TSR_API const tsr_gpt2_config_t *tsr_gpt2_config(const tsr_gpt2_t *m);
/* Parameter count (0 for no model). */
TSR_API size_t tsr_gpt2_num_params(const tsr_gpt2_t *m);

/* GPT-2's initialisation: weights ~ N(0, 0.02), the residual projections
 * (attn.c_proj, mlp.c_proj) ~ N(0, 0.02 / sqrt(2 * layers)), biases 0,
 * LayerNorm gains 1; deterministic for a seed. */
TSR_API int tsr_gpt2_init_weights(tsr_gpt2_t *m, uint64_t seed);

/* Forward pass over tokens (batch * seq_len ids, row-major [batch][seq_len]).
 * With targets (same shape; a negative target is ignored) it also computes
 * the mean cross-entropy into *loss (may be NULL) and keeps what backward
 * needs. tokens out of [0, vocab) give TSR_EINVAL. */
TSR_API int tsr_gpt2_forward(tsr_gpt2_t *m, const int32_t *tokens, const int32_t *targets,
                     float *loss);

/* The mean loss of the last forward that had targets (waits for it); data
 * parallel: the mean over every replica's targets (every rank must call it:
 * it is a collective, as is a forward given a loss pointer). A
 * training loop that passes loss = NULL to forward and asks here after
 * submitting backward and the step never stalls the task pipeline. */
TSR_API int tsr_gpt2_loss(tsr_gpt2_t *m, float *loss);

/* Logits of the last forward at sequence b, position t: vocab floats.
 * TSR_ESTATE before the first forward and after a backward (which turns the
 * logits into their gradient in place). */
TSR_API int tsr_gpt2_logits(tsr_gpt2_t *m, int b, int t, float *out);

/* Backward of the last forward (which must have had targets): adds
 * scale * d(mean loss)/d(parameter) to every gradient. Micro-batching calls
 * forward + backward k times with scale = 1/k between two steps. Releases
 * the activations as soon as they are no longer needed. */
TSR_API int tsr_gpt2_backward(tsr_gpt2_t *m, float scale);

/* Forward and backward of `micro` micro-batches (tokens and targets: micro
 * x batch x seq_len ids, micro-batch after micro-batch): the same as micro
 * rounds of tsr_gpt2_forward(tokens_i, targets_i) and
 * tsr_gpt2_backward(scale), submitted in waves of cfg.wave micro-batches
 * (the config in effect). The tasks and their inputs are the same, so the
 * gradients are the same; in deterministic mode (tsr_config_t) they are
 * bitwise the same, but for wte's, whose two sums (the tied head's and the
 * embedding's) a wave interleaves differently. losses (may be NULL): each
 * micro-batch's mean loss (micro floats), read at the end of each wave;
 * NULL: nothing waits. Every id is checked before anything is submitted
 * (TSR_EINVAL). tsr_gpt2_loss afterwards is the last micro-batch's. */
TSR_API int tsr_gpt2_forward_backward(tsr_gpt2_t *m, int micro, const int32_t *tokens,
                                      const int32_t *targets, float scale, float *losses);

/* Set every gradient to zero (before the first micro-batch of a step).
 * Submits nothing when they are zero already: on a new model, and after
 * tsr_gpt2_step, which consumes them. */
TSR_API int tsr_gpt2_zero_grad(tsr_gpt2_t *m);

typedef struct tsr_adamw_config {
    float beta1, beta2, eps;  /* 0.9, 0.95, 1e-8 */
    float weight_decay;       /* 0.1, applied to matrices (wte, wpe and the
                                 Linear weights), not to biases or LayerNorm */
    float grad_clip;          /* global L2 norm clipping; <= 0: none. 1.0 */
} tsr_adamw_config_t;

/* NULL: nothing. */
TSR_API void tsr_adamw_config_default(tsr_adamw_config_t *opt);

/* One AdamW update with learning rate lr, after clipping the gradients'
 * global norm; *grad_norm (may be NULL) receives the norm before clipping.
 * The step counter starts at 1 and is kept by the model.
 * The norm needs every gradient: with it, the update is submitted once the
 * backward pass has completed, and a non-finite norm is TSR_EINVAL (nothing
 * updated). Without clipping (grad_clip <= 0) and with grad_norm NULL no
 * norm is computed: each tile's update is submitted at once and runs as
 * soon as its gradient is complete, during the rest of the backward pass,
 * while the gradient is still in memory (a model larger than memory reads
 * and writes about a third less); a non-finite gradient is then not
 * caught here.
 * The update consumes the gradients: once it has run they read as zero,
 * as after tsr_gpt2_zero_grad (each update zeroes its gradient tile in the
 * same pass over memory, or, where the state and the activations do not
 * fit a capped host without accelerators or the moments live on the host,
 * drops the tile's copies so that no zeros are written back). Read them
 * before the step to keep them.
 * Data parallel (cfg.data_parallel): the step first sums every gradient
 * tile over the replicas (one all-reduce task per tile, which runs as soon
 * as that tile's backward is done), and the norm is the same on every
 * rank; with cfg.zero each rank updates its own tiles and receives the
 * others' from their owners. */
TSR_API int tsr_gpt2_step(tsr_gpt2_t *m, const tsr_adamw_config_t *opt, float lr, float *grad_norm);

/* Linear warmup over `warmup` steps to max_lr, then cosine decay to min_lr
 * at step total - 1 (step counts from 0). */
TSR_API float tsr_lr_schedule(int step, int warmup, int total, float max_lr, float min_lr);

/* Optimizer steps taken so far (0 for no model). */
TSR_API int tsr_gpt2_steps_done(const tsr_gpt2_t *m);

/* Copy a parameter, its gradient, or an optimizer moment to or from a host
 * array in PyTorch's layout for that name (HF names: "wte.weight",
 * "h.3.attn.c_attn.weight" [in, out] row-major, "ln_f.bias", …).
 * which: 0 parameter, 1 gradient, 2 AdamW m, 3 AdamW v.
 * *numel receives the element count (ptr may be NULL to ask for it).
 * TSR_ENOTFOUND for an unknown name.
 * Data parallel: a gradient read before tsr_gpt2_step is this replica's own
 * (the step sums them). With ZeRO a moment is this rank's share: the tiles
 * of other ranks read as zeros and are not written (so the optimizer state
 * is saved and loaded per rank, tsr_gpt2_save_state / load_state). */
enum { TSR_GPT2_PARAM = 0, TSR_GPT2_GRAD = 1, TSR_GPT2_ADAM_M = 2, TSR_GPT2_ADAM_V = 3 };
TSR_API int tsr_gpt2_get(tsr_gpt2_t *m, const char *name, int which, float *ptr, size_t *numel);
TSR_API int tsr_gpt2_set(tsr_gpt2_t *m, const char *name, int which, const float *ptr, size_t numel);
/* Names of the parameters in checkpoint order; i in [0, count). The count is
 * 0 and the name NULL for no model; the name NULL for i out of range. */
TSR_API int tsr_gpt2_param_count(const tsr_gpt2_t *m);
TSR_API const char *tsr_gpt2_param_name(const tsr_gpt2_t *m, int i);

/* ---- generation with a KV cache ---------------------------------------- */

/* A generation state: `batch` slots, each a sequence of up to max_len
 * positions with its own length, and per layer the keys and values of every
 * cached position (one tile per head). It runs on a model's weights (a
 * model made for training, of any batch and seq_len) and reads them at each
 * call: load or train the model first; the model must outlive the state.
 *
 * A slot is filled by a prefill (its prompt, one pass with causal
 * attention) and grows by one position per decode step; slots of different
 * lengths step together, one token column each.
 *
 * Contract: as the model's. NULL, a freed state, or a state whose model was
 * freed is TSR_EINVAL; after tsr_shutdown, TSR_ESTATE. One thread at a time
 * per state and model. */
typedef struct tsr_gpt2_gen tsr_gpt2_gen_t;

/* A state of `batch` slots (1 <= batch <= 4096) of up to max_len positions
 * (1 <= max_len <= the model's context), every slot empty. The cache holds
 * 2 x layers x channels x batch x max_len floats. */
TSR_API int tsr_gpt2_gen_create(tsr_gpt2_gen_t **out, tsr_gpt2_t *model, int batch,
                                int max_len);
/* Wait for its tasks and free it. NULL is TSR_OK; anything else that is not
 * a live state is TSR_EINVAL. */
TSR_API int tsr_gpt2_gen_free(tsr_gpt2_gen_t *g);

/* Empty slot `slot` and run its prompt (n >= 1 ids in [0, vocab), n <=
 * max_len) through the model, caching every position's keys and values.
 * logits (may be NULL) receives the vocab logits of the last position,
 * which pick the first generated token. */
TSR_API int tsr_gpt2_gen_prefill(tsr_gpt2_gen_t *g, int slot, const int32_t *tokens, int n,
                                 float *logits);

/* One decode step for all slots at once: tokens[b] (batch entries) is slot
 * b's next token, appended at position length(b), or negative to leave the
 * slot out (finished, or empty). logits (may be NULL) is (batch, vocab)
 * row-major: row b receives the logits after slot b's new token; rows of
 * slots left out are not written. TSR_EINVAL (nothing done) for an id out
 * of range, a slot already at max_len, or no slot stepping. One host wait
 * per call, for the logits. */
TSR_API int tsr_gpt2_gen_step(tsr_gpt2_gen_t *g, const int32_t *tokens, float *logits);

/* The weights a state decodes from: TSR_GPT2_FP32 (default) reads the
 * model's own; TSR_GPT2_BF16 makes bf16 copies of the matrices (the Linear
 * weights and wte, rounded to nearest even) now, from the model's current
 * weights, and reads those: half the bytes of a step that is bound by
 * reading the weights; activations, sums, LayerNorm, softmax and the cache
 * stay fp32. Call it again after the model's weights change. TSR_EINVAL
 * for another value or an odd channel count. */
TSR_API int tsr_gpt2_gen_precision(tsr_gpt2_gen_t *g, int precision);

/* Positions cached in a slot (-1 for no state or a slot out of range). */
TSR_API int tsr_gpt2_gen_length(const tsr_gpt2_gen_t *g, int slot);
/* Empty a slot (its cached positions are forgotten). */
TSR_API int tsr_gpt2_gen_reset(tsr_gpt2_gen_t *g, int slot);

/* How the next token is picked from logits, in this order: temperature
 * (<= 0: greedy, the likeliest id, the lowest on ties; the rest is then
 * ignored), top_k (keep the k likeliest; 0: all), top_p (keep the smallest
 * set of the likeliest whose probabilities sum to at least top_p, in
 * (0, 1]; 1: all), then a draw from what is left. */
typedef struct tsr_sampler {
    float temperature; /* 1.0 */
    int top_k;         /* 0 */
    float top_p;       /* 1.0 */
} tsr_sampler_t;

/* Defaults: temperature 1, top_k 0, top_p 1 (plain sampling). NULL: nothing. */
TSR_API void tsr_sampler_default(tsr_sampler_t *s);

/* Pick an id in [0, n) from n logits. *rng is the generator's state (any
 * value to start; a seed), advanced by one draw per sampled token (none
 * when greedy): a run with the same seed and logits picks the same ids.
 * TSR_EINVAL for NULL, n <= 0, a NaN logit, a negative or non-finite
 * temperature, top_k < 0, top_p outside (0, 1]. */
TSR_API int tsr_gpt2_sample(const float *logits, int n, const tsr_sampler_t *s, uint64_t *rng,
                            int32_t *out);

/* ---- checkpoints (HF GPT-2 safetensors) -------------------------------- */

/* Save the parameters as an HF GPT-2 safetensors file (fp32; no lm_head,
 * no attn.bias buffers; the configuration in the metadata), atomically:
 * written to a temporary file in the same folder, synced, renamed. */
TSR_API int tsr_gpt2_save(tsr_gpt2_t *m, const char *path);

/* Read the configuration of a checkpoint: shapes from its tensors, heads
 * from our metadata, else from config.json beside it, else channels / 64
 * (every GPT-2 size has 64-wide heads). Names may carry a "transformer."
 * prefix. Tile sizes are left 0. */
TSR_API int tsr_gpt2_read_config(const char *path, tsr_gpt2_config_t *cfg);

/* Load parameters from a checkpoint into a model of the same shape (F32,
 * F16 or BF16 tensors). Missing or mis-shaped tensors give TSR_EINVAL and
 * leave the model unchanged; unreadable or corrupt files TSR_EIO/TSR_EINVAL. */
TSR_API int tsr_gpt2_load(tsr_gpt2_t *m, const char *path);

/* Optimizer state (AdamW moments, step counter) beside a checkpoint, for
 * resuming; `extra` is free-form text kept with it (e.g. the data position). */
TSR_API int tsr_gpt2_save_state(tsr_gpt2_t *m, const char *path, const char *extra);
TSR_API int tsr_gpt2_load_state(tsr_gpt2_t *m, const char *path, char *extra, size_t extra_size);

/* ---- tokenizer --------------------------------------------------------- */

typedef struct tsr_tokenizer tsr_tokenizer_t;

/* GPT-2's byte-level BPE from encoder.json (or vocab.json) and vocab.bpe (or
 * merges.txt). With both paths NULL: the plain byte-level tokenizer (ids
 * 0..255 are bytes, 256 is end-of-text; vocabulary 257). The split into
 * words follows GPT-2's pattern with one approximation: every non-ASCII code
 * point counts as a letter, so text where non-ASCII punctuation, digits or
 * spaces touch letters may split differently (decode(encode(x)) == x always). */
TSR_API int tsr_tokenizer_open(tsr_tokenizer_t **out, const char *encoder_json, const char *vocab_bpe);
/* A Hugging Face tokenizer.json: byte-level BPE (model.type "BPE", merges as
 * "a b" strings or ["a", "b"] pairs, model.ignore_merges honoured), with
 * Llama 3's pre-tokenizer (Sequence [Split on its regex, Isolated; ByteLevel
 * with use_regex false]: scanned exactly, \p{L} \p{N} from Unicode tables)
 * or GPT-2's (ByteLevel with use_regex true: the approximation above),
 * normalizer null, decoder ByteLevel or null; post_processor is ignored
 * (no BOS is added: prepend tsr_tokenizer_token_id(tok, "<|begin_of_text|>")
 * yourself). added_tokens are ids of their literal text, matched only with
 * TSR_TOKENIZE_SPECIAL. Anything else is refused naming the field. The same
 * handle as tsr_tokenizer_open's: every function below takes either. */
TSR_API int tsr_tokenizer_open_json(tsr_tokenizer_t **out, const char *tokenizer_json);
TSR_API void tsr_tokenizer_free(tsr_tokenizer_t *tok);
TSR_API int tsr_tokenizer_vocab_size(const tsr_tokenizer_t *tok);
/* The end-of-text id: <|endoftext|> (50256 for GPT-2, 256 for bytes);
 * tokenizer.json: the added token <|end_of_text|> (128001 for Llama 3), else
 * <|endoftext|>, else -1. */
TSR_API int tsr_tokenizer_eot(const tsr_tokenizer_t *tok);
/* The id whose bytes are exactly text[0, len) (an added token's content, or
 * a vocabulary token's raw bytes), or -1. A linear search: look ids up once. */
TSR_API int tsr_tokenizer_token_id(const tsr_tokenizer_t *tok, const char *text, size_t len);
/* Encode len bytes of UTF-8 text; *ids is malloc'ed (free() it). */
TSR_API int tsr_tokenizer_encode(const tsr_tokenizer_t *tok, const char *text, size_t len,
                         int32_t **ids, size_t *n);
/* flags for tsr_tokenizer_encode_ex and tsr_tokenizer_split */
#define TSR_TOKENIZE_SPECIAL 1u /* tokenizer.json: the added tokens' text (e.g.
                                   "<|begin_of_text|>") is matched, leftmost and
                                   then longest first, before pre-tokenisation.
                                   Without it all text is ordinary text. GPT-2's
                                   files and bytes match <|endoftext|> always. */
/* tsr_tokenizer_encode is tsr_tokenizer_encode_ex with flags 0. */
TSR_API int tsr_tokenizer_encode_ex(const tsr_tokenizer_t *tok, const char *text, size_t len,
                            unsigned flags, int32_t **ids, size_t *n);
/* The pre-tokeniser's split of the text: (*ends)[i] is the end offset of
 * piece i (pieces are contiguous from 0; an added token, or <|endoftext|>,
 * is one piece; the byte-level tokenizer's pieces are bytes); *ends is
 * malloc'ed. Texts up to 2 GiB. */
TSR_API int tsr_tokenizer_split(const tsr_tokenizer_t *tok, const char *text, size_t len,
                        unsigned flags, size_t **ends, size_t *n);
/* Decode ids into bytes; *text is malloc'ed and NUL-terminated. Unknown ids
 * give TSR_EINVAL. */
TSR_API int tsr_tokenizer_decode(const tsr_tokenizer_t *tok, const int32_t *ids, size_t n,
                         char **text, size_t *len);

/* ---- token shards (llm.c format) --------------------------------------- */

/* A header of 256 int32 (magic, version, token count, zeros), then the
 * tokens, little-endian, in one of llm.c's two kinds: magic 20240520,
 * version 1, uint16 tokens (GPT-2's data; width 2) or magic 20240801,
 * version 7, uint32 tokens (Llama 3's data, vocabulary 128256; width 4).
 * Written atomically (a temporary renamed over path); ids are checked first,
 * so a refused write leaves any old file as it was. width 2 or 4 picks the
 * kind, ids >= 65536 with width 2 are refused naming the id and its
 * position; width 0 takes the narrowest that holds every id. Negative ids
 * are refused. */
TSR_API int tsr_shard_write_width(const char *path, const int32_t *tokens, size_t n, int width);
/* tsr_shard_write_width with width 0: a GPT-2 (uint16) shard when every id
 * is < 65536, else a uint32 one. */
TSR_API int tsr_shard_write(const char *path, const int32_t *tokens, size_t n);

typedef struct tsr_shard tsr_shard_t;
/* Open and validate either kind: magic and version one of the two pairs
 * above, the file size exactly 1024 + count x width bytes, and (uint32
 * shards) every id <= INT32_MAX, as ids are handed out as int32. */
TSR_API int tsr_shard_open(tsr_shard_t **out, const char *path);
/* The token count (0 for NULL). */
TSR_API size_t tsr_shard_size(const tsr_shard_t *s);
/* Bytes per token in the file: 2 (uint16) or 4 (uint32); 0 for NULL. */
TSR_API int tsr_shard_width(const tsr_shard_t *s);
/* Token i as an int32 id, whatever the width; -1 with an error set when s is
 * NULL or i >= tsr_shard_size(s). */
TSR_API int32_t tsr_shard_token(const tsr_shard_t *s, size_t i);
/* The tokens in place, valid until tsr_shard_close: tsr_shard_tokens for a
 * width-2 shard, tsr_shard_tokens32 for a width-4 one. The other width (or
 * NULL) gives NULL, with an error set for the wrong width. */
TSR_API const uint16_t *tsr_shard_tokens(const tsr_shard_t *s);
TSR_API const uint32_t *tsr_shard_tokens32(const tsr_shard_t *s);
/* Free the shard (NULL is a no-op). */
TSR_API void tsr_shard_close(tsr_shard_t *s);

/* Sequential batches over a shard of either width: batch sequences of
 * seq_len inputs and their seq_len next-token targets (int32 ids),
 * consecutive windows, wrapping to the start when the shard is exhausted.
 * The position (in tokens) can be saved and set. */
typedef struct tsr_loader tsr_loader_t;
/* Open the shard at path (tsr_shard_open's checks) for windows of batch x
 * seq_len; it must hold at least one window + 1 tokens. */
TSR_API int tsr_loader_open(tsr_loader_t **out, const char *path, int batch, int seq_len);
/* The next window: batch x seq_len ids into inputs and into targets. */
TSR_API int tsr_loader_next(tsr_loader_t *l, int32_t *inputs, int32_t *targets);
/* The first token of the next window. */
TSR_API size_t tsr_loader_position(const tsr_loader_t *l);
/* Set that position (<= the shard's size; a late one wraps at the next call). */
TSR_API int tsr_loader_seek(tsr_loader_t *l, size_t position);
/* Batches in one pass over the shard (at least 1). */
TSR_API size_t tsr_loader_batches(const tsr_loader_t *l);
/* Free the loader and its shard (NULL is a no-op). */
TSR_API void tsr_loader_close(tsr_loader_t *l);

#ifdef __cplusplus
}
#endif
#endif
