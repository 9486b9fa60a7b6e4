/* nn/gen_state.h — the model-independent part of generation with a KV
 * cache: the slots and their lengths, the per-layer key and value caches,
 * the column sets of prefills and decode steps, argument checks, and the
 * column bookkeeping of tsr_*_gen_prefill / _step (docs/generation.md).
 * Each model family (nn/generate.c for GPT-2, nn/llama_generate.c for
 * Llama) gives the pass over the columns: how a column set is made, run
 * and where its logits are.
 *
 * Must never: know a model's layers or weights, or be used outside nn/.
 */
#ifndef TSR_NN_GEN_STATE_H
#define TSR_NN_GEN_STATE_H

#include <stdint.h>

#include "nn/tensor.h"

typedef struct tsr__gen tsr__gen_t;

/* What a model family gives. */
typedef struct tsr__gen_model {
    const char *prefix; /* "gpt2_gen", "llama_gen": the messages' prefix */
    size_t size;        /* the family's state: a struct whose first member is
                           the tsr__gen_t */
    /* frees what the family's state adds (NULL: nothing), before the
     * engine frees its own */
    void (*release)(tsr__gen_t *g, int same_runtime);
    /* the model argument is live under the running runtime */
    int (*check)(const void *model, const char *fn);
    /* the activations of a call over n columns, k of which reach the
     * logits (k = 1: only the last) */
    int (*make_set)(tsr__gen_t *g, int n, int k, void **set);
    void (*free_set)(void *set, int same_runtime);
    /* the model over the columns g->col_* of set; its logits (V, k) */
    int (*run)(tsr__gen_t *g, void *set);
    const tsr_tensor_t *(*logits)(const void *set);
} tsr__gen_model_t;

struct tsr__gen {
    const tsr__gen_model_t *ops;
    void *model;
    uint64_t runtime;
    int B, maxlen, layers, vocab;
    int *len;              /* cached positions per slot */
    tsr_tensor_t *kc, *vc; /* per layer (rows, B maxlen) in tiles (d, B maxlen):
                              one tile per K/V head, slot s position t at
                              column s maxlen + t */
    void **steps;          /* decode sets by column count (1..B), made when first needed */
    float *scratch;        /* (V, B) host logits of a step */
    int32_t *col_tok, *col_pos, *col_slot, *col_tab;
};

/* A live state of ops->size bytes (zeroed beyond the engine's part) on
 * `model` (checked by the caller): the caches (kv_rows rows, heads of d)
 * and host arrays of `batch` slots of max_len positions over `layers`
 * layers; max_ctx the model's longest sequence. On failure nothing is
 * left. */
int tsr__gen_create(const tsr__gen_model_t *ops, void *model, int batch, int max_len,
                    int max_ctx, int layers, int vocab, int kv_rows, int d, tsr__gen_t **out);
/* Wait for its tasks and free it (the tiles only under the runtime that
 * made them); NULL is TSR_OK, anything else not live TSR_EINVAL. */
int tsr__gen_free(const char *prefix, tsr__gen_t *g);
/* Whether g is a live state. */
int tsr__gen_live(const tsr__gen_t *g);
/* A state argument of a call that submits tasks: live, its model live and
 * under the running runtime. */
int tsr__gen_check(const tsr__gen_t *g, const char *fn);

/* (slot, position) of each column into cols (2, n) int32, one tile; the
 * cached keys the columns attend over (for the cost estimates) */
int tsr__gen_write_cols(tsr__gen_t *g, int n, tsr_tensor_t *cols, double *keys);

/* The public calls (prefix: "gpt2_gen", …, for the messages; g may be NULL
 * or not live: TSR_EINVAL) */
int tsr__gen_prefill(const char *prefix, tsr__gen_t *g, int slot, const int32_t *tokens, int n,
                     float *logits);
int tsr__gen_step(const char *prefix, tsr__gen_t *g, const int32_t *tokens, float *logits);
int tsr__gen_length(const tsr__gen_t *g, int slot);
int tsr__gen_reset(const char *prefix, tsr__gen_t *g, int slot);

#endif
