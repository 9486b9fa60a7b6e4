/* nn/io/llama_config.h — the config.json of a Hugging Face Llama model: read
 * (strictly, with one message per violation, naming the field), validated,
 * and written back so that a checkpoint we write loads in transformers.
 *
 * Only what a Llama decoder computes with is kept: sizes, norm epsilon, RoPE
 * (plain or "llama3" scaling), tied embeddings, dtype and special ids. A
 * field that would change the computation in a way a Llama decoder does not
 * (another activation, biases, a sliding window, another model type) is
 * refused, never ignored. Fields that do not change it (architectures,
 * initializer_range, use_cache, …) are ignored. Must never abort or print:
 * every failure is a TSR_E… status with a message.
 */
#ifndef TSR_NN_IO_LLAMA_CONFIG_H
#define TSR_NN_IO_LLAMA_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define TSR__LLAMA_MAX_EOS 8
/* Upper bounds of the sizes accepted (far above any released model, low
 * enough that products of two of them fit 64 bits with room to spare). */
#define TSR__LLAMA_MAX_DIM (1 << 20)      /* hidden, intermediate, head_dim */
#define TSR__LLAMA_MAX_LAYERS 4096
#define TSR__LLAMA_MAX_HEADS 4096
#define TSR__LLAMA_MAX_VOCAB (1 << 24)
#define TSR__LLAMA_MAX_POSITIONS (1 << 24)

typedef enum tsr__llama_dtype {
    TSR__LLAMA_F32, /* "float32" (also when absent) */
    TSR__LLAMA_BF16,
    TSR__LLAMA_F16,
} tsr__llama_dtype_t;

typedef struct tsr__llama_config {
    char model_type[16];      /* "llama" or "mistral" (same computation) */
    int hidden_size;
    int intermediate_size;
    int num_hidden_layers;
    int num_attention_heads;
    int num_key_value_heads;  /* default: num_attention_heads */
    int head_dim;             /* default: hidden_size / num_attention_heads */
    int vocab_size;
    int max_position_embeddings; /* default 2048 */
    double rms_norm_eps;      /* default 1e-6 */
    double rope_theta;        /* default 10000 */
    /* rope_scaling: 0 = null/absent, 1 = "llama3" with the four values */
    int rope_llama3;
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_original_max_position_embeddings;
    int tie_word_embeddings;  /* default false */
    tsr__llama_dtype_t torch_dtype;
    /* -1 when null; defaults 1 and [2] as in transformers */
    int64_t bos_token_id;
    int n_eos;                /* 0 when null */
    int64_t eos_token_id[TSR__LLAMA_MAX_EOS];
} tsr__llama_config_t;

/* transformers' LlamaConfig defaults for the optional fields, sizes zero. */
void tsr__llama_config_defaults(tsr__llama_config_t *c);

/* Parse a config.json held in buf (len bytes); `what` names it in messages.
 * TSR_EINVAL naming the field for anything refused or out of range,
 * TSR_ENOMEM. *c is written only on success. */
int tsr__llama_config_parse(const char *buf, size_t len, const char *what,
                            tsr__llama_config_t *c);
/* The same from a file (at most 1 MiB); TSR_EIO when it cannot be read. */
int tsr__llama_config_read(const char *path, tsr__llama_config_t *c);
/* The checks parse makes on the values: divisibility, ranges, RoPE. */
int tsr__llama_config_validate(const tsr__llama_config_t *c, const char *what);

/* The config as transformers writes it (LlamaForCausalLM), validated first.
 * *out is malloc'ed and NUL-terminated. */
int tsr__llama_config_json(const tsr__llama_config_t *c, char **out, size_t *len);
/* Written atomically (temporary, fsync, rename) to path. */
int tsr__llama_config_write(const tsr__llama_config_t *c, const char *path);

const char *tsr__llama_dtype_name(tsr__llama_dtype_t d);

#endif
