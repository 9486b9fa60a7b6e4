/* nn/io/llama_names.h — the tensors of a Hugging Face Llama checkpoint: their
 * names and the shapes a config implies, and the check that a set holds
 * exactly these (checked before a model reads any of them).
 *
 * Names, in transformers' order: model.embed_tokens.weight (vocab, hidden);
 * per layer N: model.layers.N.self_attn.{q,k,v,o}_proj.weight (q: (heads ×
 * head_dim, hidden), k and v: (kv_heads × head_dim, hidden), o: (hidden,
 * heads × head_dim)), model.layers.N.mlp.{gate,up,down}_proj.weight
 * (gate, up: (intermediate, hidden), down: (hidden, intermediate)),
 * model.layers.N.{input,post_attention}_layernorm.weight (hidden);
 * model.norm.weight (hidden); lm_head.weight (vocab, hidden), absent when
 * tie_word_embeddings. Must never accept a set with a tensor missing, extra
 * or misshapen; never abort.
 */
#ifndef TSR_NN_IO_LLAMA_NAMES_H
#define TSR_NN_IO_LLAMA_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "nn/io/llama_config.h"
#include "nn/io/stset.h"

#define TSR__LLAMA_PER_LAYER 9
#define TSR__LLAMA_NAME_MAX 96

typedef struct tsr__llama_tensor {
    char name[TSR__LLAMA_NAME_MAX];
    int ndim;
    uint64_t shape[2];
} tsr__llama_tensor_t;

/* 2 + 9 × layers, plus lm_head.weight unless tied. */
size_t tsr__llama_tensor_count(const tsr__llama_config_t *c);
/* The i-th tensor in transformers' order; TSR_EINVAL for i out of range. */
int tsr__llama_tensor(const tsr__llama_config_t *c, size_t i, tsr__llama_tensor_t *out);

/* TSR_OK when s holds exactly the tensors of c with their shapes, each of a
 * float dtype (F32, BF16, F16, F64). Otherwise TSR_EINVAL naming the first
 * missing tensor (in the order above), else the first misshapen one, else
 * the first extra one (by name). The rotary inverse-frequency buffers that
 * older transformers saved (model.layers.N.self_attn.rotary_emb.inv_freq)
 * are not parameters and are passed over. */
int tsr__llama_check_set(const tsr__llama_config_t *c, const tsr__stset_t *s);

#endif
