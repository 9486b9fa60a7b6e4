/* nn/io/llama_config.c — reading, validating and writing a Llama config.json
 * (see llama_config.h). Must never accept a field it does not understand
 * when that field changes the computation, nor abort on any input. */
#include "nn/io/llama_config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/io/safetensors.h"
#include "runtime/error.h"
#include "runtime/file.h"
#include "runtime/json.h"

void tsr__llama_config_defaults(tsr__llama_config_t *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->model_type, sizeof c->model_type, "llama");
    c->max_position_embeddings = 2048;
    c->rms_norm_eps = 1e-6;
    c->rope_theta = 10000.0;
    c->torch_dtype = TSR__LLAMA_F32;
    c->bos_token_id = 1;
    c->n_eos = 1;
    c->eos_token_id[0] = 2;
}

const char *tsr__llama_dtype_name(tsr__llama_dtype_t d)
{
    switch (d) {
    case TSR__LLAMA_F32: return "float32";
    case TSR__LLAMA_BF16: return "bfloat16";
    case TSR__LLAMA_F16: return "float16";
    }
    return "?";
}

/* ---- field readers ------------------------------------------------------ */

static int field_int(const tsr__json_t *root, const char *what, const char *key, int required,
                     long lo, long hi, int *out)
{
    const tsr__json_t *v = tsr__json_get(root, key);
    if (!v || (!required && v->type == TSR__JSON_NULL)) {
        if (required)
            return tsr__fail(TSR_EINVAL, "%s: \"%s\" is missing", what, key);
        return TSR_OK;
    }
    int64_t x;
    if (v->type != TSR__JSON_NUMBER || tsr__json_i64(v, &x) != 0)
        return tsr__fail(TSR_EINVAL, "%s: \"%s\" must be an integer, not %s", what, key,
                         v->type == TSR__JSON_NUMBER ? "a fraction or a huge number"
                                                     : tsr__json_type_name(v->type));
    if (x < lo || x > hi)
        return tsr__fail(TSR_EINVAL, "%s: \"%s\" is %lld, outside [%ld, %ld]", what, key,
                         (long long)x, lo, hi);
    *out = (int)x;
    return TSR_OK;
}

static int field_num(const tsr__json_t *root, const char *what, const char *key, double *out)
{
    const tsr__json_t *v = tsr__json_get(root, key);
    if (!v)
        return TSR_OK;
    if (v->type != TSR__JSON_NUMBER || !isfinite(v->num))
        return tsr__fail(TSR_EINVAL, "%s: \"%s\" must be a finite number, not %s", what, key,
                         v->type == TSR__JSON_NUMBER ? "one out of range"
                                                     : tsr__json_type_name(v->type));
    *out = v->num;
    return TSR_OK;
}

static int field_bool(const tsr__json_t *root, const char *what, const char *key, int *out)
{
    const tsr__json_t *v = tsr__json_get(root, key);
    if (!v)
        return TSR_OK;
    if (v->type != TSR__JSON_TRUE && v->type != TSR__JSON_FALSE)
        return tsr__fail(TSR_EINVAL, "%s: \"%s\" must be true or false, not %s", what, key,
                         tsr__json_type_name(v->type));
    *out = v->type == TSR__JSON_TRUE;
    return TSR_OK;
}

/* Must be absent, null or false: a Llama decoder has no such biases. */
static int field_false(const tsr__json_t *root, const char *what, const char *key)
{
    const tsr__json_t *v = tsr__json_get(root, key);
    if (!v || v->type == TSR__JSON_FALSE || v->type == TSR__JSON_NULL)
        return TSR_OK;
    return tsr__fail(TSR_EINVAL, "%s: \"%s\" is %s: a Llama decoder has no biases in its %s "
                     "(only false is accepted)", what, key,
                     v->type == TSR__JSON_TRUE ? "true" : tsr__json_type_name(v->type),
                     strcmp(key, "mlp_bias") ? "attention projections" : "MLP");
}

static int token_id(const tsr__json_t *v, const char *what, const char *key, int64_t *out)
{
    if (v->type != TSR__JSON_NUMBER || tsr__json_i64(v, out) != 0 || *out < 0 ||
        *out > INT32_MAX)
        return tsr__fail(TSR_EINVAL, "%s: \"%s\" must hold non-negative integer token ids",
                         what, key);
    return TSR_OK;
}

static int field_bos(const tsr__json_t *root, const char *what, tsr__llama_config_t *c)
{
    const tsr__json_t *v = tsr__json_get(root, "bos_token_id");
    if (!v)
        return TSR_OK;
    if (v->type == TSR__JSON_NULL) {
        c->bos_token_id = -1;
        return TSR_OK;
    }
    return token_id(v, what, "bos_token_id", &c->bos_token_id);
}

static int field_eos(const tsr__json_t *root, const char *what, tsr__llama_config_t *c)
{
    const tsr__json_t *v = tsr__json_get(root, "eos_token_id");
    if (!v)
        return TSR_OK;
    c->n_eos = 0;
    if (v->type == TSR__JSON_NULL)
        return TSR_OK;
    if (v->type != TSR__JSON_ARRAY) {
        c->n_eos = 1;
        return token_id(v, what, "eos_token_id", &c->eos_token_id[0]);
    }
    if (v->len > TSR__LLAMA_MAX_EOS)
        return tsr__fail(TSR_EINVAL, "%s: \"eos_token_id\" lists %zu ids, at most %d accepted",
                         what, v->len, TSR__LLAMA_MAX_EOS);
    for (size_t i = 0; i < v->len; i++) {
        int rc = token_id(&v->items[i], what, "eos_token_id", &c->eos_token_id[i]);
        if (rc)
            return rc;
    }
    c->n_eos = (int)v->len;
    return TSR_OK;
}

static int parse_dtype(const tsr__json_t *root, const char *what, tsr__llama_config_t *c)
{
    /* transformers wrote "torch_dtype", newer versions write "dtype" */
    const tsr__json_t *a = tsr__json_get(root, "torch_dtype"), *b = tsr__json_get(root, "dtype");
    if (a && b && (a->type != TSR__JSON_STRING || b->type != TSR__JSON_STRING ||
                   strcmp(a->str, b->str) != 0))
        return tsr__fail(TSR_EINVAL, "%s: \"torch_dtype\" and \"dtype\" disagree", what);
    const tsr__json_t *v = a ? a : b;
    const char *key = a ? "torch_dtype" : "dtype";
    if (!v || v->type == TSR__JSON_NULL)
        return TSR_OK;
    if (v->type != TSR__JSON_STRING)
        return tsr__fail(TSR_EINVAL, "%s: \"%s\" must be a string, not %s", what, key,
                         tsr__json_type_name(v->type));
    if (!strcmp(v->str, "float32"))
        c->torch_dtype = TSR__LLAMA_F32;
    else if (!strcmp(v->str, "bfloat16"))
        c->torch_dtype = TSR__LLAMA_BF16;
    else if (!strcmp(v->str, "float16"))
        c->torch_dtype = TSR__LLAMA_F16;
    else
        return tsr__fail(TSR_EINVAL, "%s: \"%s\" \"%.40s\" is none of float32, bfloat16, "
                         "float16", what, key, v->str);
    return TSR_OK;
}

static int parse_rope_scaling(const tsr__json_t *root, const char *what, tsr__llama_config_t *c)
{
    const tsr__json_t *v = tsr__json_get(root, "rope_scaling");
    if (!v || v->type == TSR__JSON_NULL)
        return TSR_OK;
    if (v->type != TSR__JSON_OBJECT)
        return tsr__fail(TSR_EINVAL, "%s: \"rope_scaling\" must be null or an object, not %s",
                         what, tsr__json_type_name(v->type));
    /* "rope_type" (current) or "type" (older files); both must agree */
    const tsr__json_t *t = tsr__json_get(v, "rope_type"), *t2 = tsr__json_get(v, "type");
    if (t && t2 && (t->type != TSR__JSON_STRING || t2->type != TSR__JSON_STRING ||
                    strcmp(t->str, t2->str) != 0))
        return tsr__fail(TSR_EINVAL, "%s: rope_scaling \"rope_type\" and \"type\" disagree",
                         what);
    if (!t)
        t = t2;
    if (!t || t->type != TSR__JSON_STRING)
        return tsr__fail(TSR_EINVAL, "%s: rope_scaling needs a string \"rope_type\"", what);
    if (!strcmp(t->str, "default"))
        return TSR_OK;
    if (strcmp(t->str, "llama3") != 0)
        return tsr__fail(TSR_EINVAL, "%s: rope_scaling type \"%.40s\" is not supported (only "
                         "\"llama3\" or null)", what, t->str);
    static const char *const keys[] = {"factor", "low_freq_factor", "high_freq_factor"};
    double *vals[] = {&c->rope_factor, &c->rope_low_freq_factor, &c->rope_high_freq_factor};
    for (int i = 0; i < 3; i++) {
        const tsr__json_t *x = tsr__json_get(v, keys[i]);
        if (!x)
            return tsr__fail(TSR_EINVAL, "%s: rope_scaling \"%s\" is missing", what, keys[i]);
        int rc = field_num(v, what, keys[i], vals[i]);
        if (rc)
            return rc;
    }
    if (!tsr__json_get(v, "original_max_position_embeddings"))
        return tsr__fail(TSR_EINVAL, "%s: rope_scaling \"original_max_position_embeddings\" is "
                         "missing", what);
    c->rope_llama3 = 1;
    return field_int(v, what, "original_max_position_embeddings", 1, 1,
                     TSR__LLAMA_MAX_POSITIONS, &c->rope_original_max_position_embeddings);
}

/* mistral computes as llama when no sliding window cuts attention short;
 * qwen2 always has biases on q, k and v. */
static int parse_model_type(const tsr__json_t *root, const char *what, tsr__llama_config_t *c)
{
    const tsr__json_t *v = tsr__json_get(root, "model_type");
    if (!v)
        return TSR_OK;
    if (v->type != TSR__JSON_STRING)
        return tsr__fail(TSR_EINVAL, "%s: \"model_type\" must be a string", what);
    if (!strcmp(v->str, "llama") || !strcmp(v->str, "mistral")) {
        snprintf(c->model_type, sizeof c->model_type, "%s", v->str);
        return TSR_OK;
    }
    if (!strcmp(v->str, "qwen2"))
        return tsr__fail(TSR_EINVAL, "%s: model_type \"qwen2\" is refused: its q, k and v "
                         "projections carry biases, which a Llama decoder does not have", what);
    return tsr__fail(TSR_EINVAL, "%s: model_type \"%.40s\" is not a Llama model (accepted: "
                     "\"llama\", \"mistral\" without sliding window)", what, v->str);
}

static int parse_sliding_window(const tsr__json_t *root, const char *what,
                                const tsr__llama_config_t *c)
{
    const tsr__json_t *v = tsr__json_get(root, "sliding_window");
    if (!v || v->type == TSR__JSON_NULL)
        return TSR_OK;
    int64_t w;
    if (v->type != TSR__JSON_NUMBER || tsr__json_i64(v, &w) != 0)
        return tsr__fail(TSR_EINVAL, "%s: \"sliding_window\" must be null or an integer", what);
    if (w < c->max_position_embeddings)
        return tsr__fail(TSR_EINVAL, "%s: \"sliding_window\" %lld is shorter than "
                         "max_position_embeddings %d: sliding-window attention is not Llama's",
                         what, (long long)w, c->max_position_embeddings);
    return TSR_OK;
}

static int parse_root(const tsr__json_t *root, const char *what, tsr__llama_config_t *c)
{
    if (root->type != TSR__JSON_OBJECT)
        return tsr__fail(TSR_EINVAL, "%s: a config is an object, not %s", what,
                         tsr__json_type_name(root->type));
    int rc = parse_model_type(root, what, c);
    const tsr__json_t *act = tsr__json_get(root, "hidden_act");
    if (!rc && act && (act->type != TSR__JSON_STRING || strcmp(act->str, "silu") != 0))
        rc = tsr__fail(TSR_EINVAL, "%s: \"hidden_act\" is %s%.40s%s: a Llama decoder uses "
                       "\"silu\" only", what, act->type == TSR__JSON_STRING ? "\"" : "",
                       act->type == TSR__JSON_STRING ? act->str : tsr__json_type_name(act->type),
                       act->type == TSR__JSON_STRING ? "\"" : "");
    if (!rc)
        rc = field_false(root, what, "attention_bias");
    if (!rc)
        rc = field_false(root, what, "mlp_bias");
    if (!rc)
        rc = field_int(root, what, "hidden_size", 1, 1, TSR__LLAMA_MAX_DIM, &c->hidden_size);
    if (!rc)
        rc = field_int(root, what, "intermediate_size", 1, 1, TSR__LLAMA_MAX_DIM,
                       &c->intermediate_size);
    if (!rc)
        rc = field_int(root, what, "num_hidden_layers", 1, 1, TSR__LLAMA_MAX_LAYERS,
                       &c->num_hidden_layers);
    if (!rc)
        rc = field_int(root, what, "num_attention_heads", 1, 1, TSR__LLAMA_MAX_HEADS,
                       &c->num_attention_heads);
    if (!rc) {
        c->num_key_value_heads = c->num_attention_heads;
        rc = field_int(root, what, "num_key_value_heads", 0, 1, TSR__LLAMA_MAX_HEADS,
                       &c->num_key_value_heads);
    }
    if (!rc) {
        c->head_dim = c->hidden_size / c->num_attention_heads;
        const tsr__json_t *hd = tsr__json_get(root, "head_dim");
        if (hd && hd->type != TSR__JSON_NULL)
            rc = field_int(root, what, "head_dim", 0, 1, TSR__LLAMA_MAX_DIM, &c->head_dim);
        else if (c->hidden_size % c->num_attention_heads)
            rc = tsr__fail(TSR_EINVAL, "%s: hidden_size %d is not divisible by "
                           "num_attention_heads %d", what, c->hidden_size,
                           c->num_attention_heads);
    }
    if (!rc)
        rc = field_int(root, what, "vocab_size", 1, 1, TSR__LLAMA_MAX_VOCAB, &c->vocab_size);
    if (!rc)
        rc = field_int(root, what, "max_position_embeddings", 0, 1, TSR__LLAMA_MAX_POSITIONS,
                       &c->max_position_embeddings);
    if (!rc)
        rc = field_num(root, what, "rms_norm_eps", &c->rms_norm_eps);
    if (!rc)
        rc = field_num(root, what, "rope_theta", &c->rope_theta);
    if (!rc)
        rc = parse_rope_scaling(root, what, c);
    if (!rc)
        rc = field_bool(root, what, "tie_word_embeddings", &c->tie_word_embeddings);
    if (!rc)
        rc = parse_dtype(root, what, c);
    if (!rc)
        rc = field_bos(root, what, c);
    if (!rc)
        rc = field_eos(root, what, c);
    if (!rc)
        rc = parse_sliding_window(root, what, c);
    return rc ? rc : tsr__llama_config_validate(c, what);
}

int tsr__llama_config_validate(const tsr__llama_config_t *c, const char *what)
{
    if (!c)
        return tsr__fail(TSR_EINVAL, "%s: NULL config", what);
    if (strcmp(c->model_type, "llama") && strcmp(c->model_type, "mistral"))
        return tsr__fail(TSR_EINVAL, "%s: model_type \"%.16s\" is not a Llama model", what,
                         c->model_type);
#define RANGE(f, lo, hi)                                                                    \
    if (c->f < (lo) || c->f > (hi))                                                         \
        return tsr__fail(TSR_EINVAL, "%s: " #f " is %d, outside [%d, %d]", what, (int)c->f, \
                         (int)(lo), (int)(hi));
    RANGE(hidden_size, 1, TSR__LLAMA_MAX_DIM)
    RANGE(intermediate_size, 1, TSR__LLAMA_MAX_DIM)
    RANGE(num_hidden_layers, 1, TSR__LLAMA_MAX_LAYERS)
    RANGE(num_attention_heads, 1, TSR__LLAMA_MAX_HEADS)
    RANGE(num_key_value_heads, 1, TSR__LLAMA_MAX_HEADS)
    RANGE(head_dim, 1, TSR__LLAMA_MAX_DIM)
    RANGE(vocab_size, 1, TSR__LLAMA_MAX_VOCAB)
    RANGE(max_position_embeddings, 1, TSR__LLAMA_MAX_POSITIONS)
#undef RANGE
    if (c->num_attention_heads % c->num_key_value_heads)
        return tsr__fail(TSR_EINVAL, "%s: num_attention_heads %d is not divisible by "
                         "num_key_value_heads %d", what, c->num_attention_heads,
                         c->num_key_value_heads);
    if (c->head_dim % 2)
        return tsr__fail(TSR_EINVAL, "%s: head_dim %d is odd: rotary embeddings rotate pairs "
                         "of channels", what, c->head_dim);
    if ((int64_t)c->head_dim * c->num_attention_heads > TSR__LLAMA_MAX_DIM)
        return tsr__fail(TSR_EINVAL, "%s: num_attention_heads × head_dim = %lld exceeds %d",
                         what, (long long)c->head_dim * c->num_attention_heads,
                         TSR__LLAMA_MAX_DIM);
    if (!(c->rms_norm_eps > 0 && c->rms_norm_eps < 1))
        return tsr__fail(TSR_EINVAL, "%s: rms_norm_eps %g is not in (0, 1)", what,
                         c->rms_norm_eps);
    if (!(c->rope_theta > 0 && isfinite(c->rope_theta)))
        return tsr__fail(TSR_EINVAL, "%s: rope_theta %g is not a positive number", what,
                         c->rope_theta);
    if (c->rope_llama3) {
        if (!(c->rope_factor >= 1 && isfinite(c->rope_factor)))
            return tsr__fail(TSR_EINVAL, "%s: rope_scaling factor %g is below 1", what,
                             c->rope_factor);
        if (!(c->rope_low_freq_factor > 0 && isfinite(c->rope_low_freq_factor)))
            return tsr__fail(TSR_EINVAL, "%s: rope_scaling low_freq_factor %g is not positive",
                             what, c->rope_low_freq_factor);
        if (!(c->rope_high_freq_factor > c->rope_low_freq_factor &&
              isfinite(c->rope_high_freq_factor)))
            return tsr__fail(TSR_EINVAL, "%s: rope_scaling high_freq_factor %g must exceed "
                             "low_freq_factor %g", what, c->rope_high_freq_factor,
                             c->rope_low_freq_factor);
        if (c->rope_original_max_position_embeddings < 1 ||
            c->rope_original_max_position_embeddings > c->max_position_embeddings)
            return tsr__fail(TSR_EINVAL, "%s: rope_scaling original_max_position_embeddings %d "
                             "is not in [1, max_position_embeddings %d]", what,
                             c->rope_original_max_position_embeddings,
                             c->max_position_embeddings);
    }
    if (c->bos_token_id >= c->vocab_size)
        return tsr__fail(TSR_EINVAL, "%s: bos_token_id %lld is not below vocab_size %d", what,
                         (long long)c->bos_token_id, c->vocab_size);
    if (c->n_eos < 0 || c->n_eos > TSR__LLAMA_MAX_EOS)
        return tsr__fail(TSR_EINVAL, "%s: %d eos ids", what, c->n_eos);
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_token_id[i] < 0 || c->eos_token_id[i] >= c->vocab_size)
            return tsr__fail(TSR_EINVAL, "%s: eos_token_id %lld is not in [0, vocab_size %d)",
                             what, (long long)c->eos_token_id[i], c->vocab_size);
    if ((unsigned)c->torch_dtype > TSR__LLAMA_F16)
        return tsr__fail(TSR_EINVAL, "%s: unknown torch_dtype", what);
    return TSR_OK;
}

int tsr__llama_config_parse(const char *buf, size_t len, const char *what,
                            tsr__llama_config_t *out)
{
    if (!buf || !what || !out)
        return tsr__fail(TSR_EINVAL, "llama config: NULL argument");
    tsr__json_doc_t *doc = NULL;
    int rc = tsr__json_parse(buf, len, what, &doc);
    if (rc)
        return rc;
    tsr__llama_config_t c;
    tsr__llama_config_defaults(&c);
    rc = parse_root(tsr__json_root(doc), what, &c);
    tsr__json_free(doc);
    if (!rc)
        *out = c;
    return rc;
}

int tsr__llama_config_read(const char *path, tsr__llama_config_t *c)
{
    char why[128];
    if (!path || !c)
        return tsr__fail(TSR_EINVAL, "llama config: NULL argument");
    FILE *f = tsr__fopen_regular(path, why, sizeof why);
    if (!f)
        return tsr__fail(TSR_EIO, "llama config %s: cannot open: %s", path, why);
    size_t cap = (size_t)1 << 20, n;
    char *buf = malloc(cap);
    int rc = buf ? TSR_OK : tsr__fail(TSR_ENOMEM, "llama config %s: out of memory", path);
    if (!rc) {
        n = fread(buf, 1, cap, f);
        if (ferror(f))
            rc = tsr__fail(TSR_EIO, "llama config %s: read failed", path);
        else if (n == cap)
            rc = tsr__fail(TSR_EINVAL, "llama config %s: larger than 1 MiB", path);
    }
    fclose(f);
    if (!rc)
        rc = tsr__llama_config_parse(buf, n, path, c);
    free(buf);
    return rc;
}

/* ---- writing ------------------------------------------------------------ */

/* The shortest %.Ng that reads back as the same double, with a ".0" added
 * to integral values so that Python reads a float. */
static void put_double(char *out, size_t n, double v)
{
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(out, n, "%.1f", v);
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(out, n, "%.*g", p, v);
        if (strtod(out, NULL) == v)
            break;
    }
    if (!strpbrk(out, ".eEn"))
        strncat(out, ".0", n - strlen(out) - 1);
}

int tsr__llama_config_json(const tsr__llama_config_t *c, char **out, size_t *len)
{
    int rc = tsr__llama_config_validate(c, "llama config");
    if (rc)
        return rc;
    char eps[40], theta[40], ids[16 * TSR__LLAMA_MAX_EOS + 8], bos[24], rope[400];
    put_double(eps, sizeof eps, c->rms_norm_eps);
    put_double(theta, sizeof theta, c->rope_theta);
    if (c->bos_token_id < 0)
        snprintf(bos, sizeof bos, "null");
    else
        snprintf(bos, sizeof bos, "%lld", (long long)c->bos_token_id);
    if (c->n_eos == 0)
        snprintf(ids, sizeof ids, "null");
    else if (c->n_eos == 1)
        snprintf(ids, sizeof ids, "%lld", (long long)c->eos_token_id[0]);
    else {
        size_t w = (size_t)snprintf(ids, sizeof ids, "[");
        for (int i = 0; i < c->n_eos; i++)
            w += (size_t)snprintf(ids + w, sizeof ids - w, "%s%lld", i ? ", " : "",
                                  (long long)c->eos_token_id[i]);
        snprintf(ids + w, sizeof ids - w, "]");
    }
    if (!c->rope_llama3)
        snprintf(rope, sizeof rope, "null");
    else {
        char f[40], lo[40], hi[40];
        put_double(f, sizeof f, c->rope_factor);
        put_double(lo, sizeof lo, c->rope_low_freq_factor);
        put_double(hi, sizeof hi, c->rope_high_freq_factor);
        snprintf(rope, sizeof rope,
                 "{\n    \"factor\": %s,\n    \"high_freq_factor\": %s,\n"
                 "    \"low_freq_factor\": %s,\n    \"original_max_position_embeddings\": %d,\n"
                 "    \"rope_type\": \"llama3\"\n  }",
                 f, hi, lo, c->rope_original_max_position_embeddings);
    }
    const char *fmt =
        "{\n"
        "  \"architectures\": [\n    \"%s\"\n  ],\n"
        "  \"attention_bias\": false,\n"
        "  \"attention_dropout\": 0.0,\n"
        "  \"bos_token_id\": %s,\n"
        "  \"eos_token_id\": %s,\n"
        "  \"head_dim\": %d,\n"
        "  \"hidden_act\": \"silu\",\n"
        "  \"hidden_size\": %d,\n"
        "  \"initializer_range\": 0.02,\n"
        "  \"intermediate_size\": %d,\n"
        "  \"max_position_embeddings\": %d,\n"
        "  \"mlp_bias\": false,\n"
        "  \"model_type\": \"%s\",\n"
        "  \"num_attention_heads\": %d,\n"
        "  \"num_hidden_layers\": %d,\n"
        "  \"num_key_value_heads\": %d,\n"
        "  \"pretraining_tp\": 1,\n"
        "  \"rms_norm_eps\": %s,\n"
        "  \"rope_scaling\": %s,\n"
        "  \"rope_theta\": %s,\n"
        "  \"tie_word_embeddings\": %s,\n"
        "  \"torch_dtype\": \"%s\",\n"
        "  \"use_cache\": true,\n"
        "  \"vocab_size\": %d\n"
        "}\n";
#define ARGS                                                                                   \
    strcmp(c->model_type, "mistral") ? "LlamaForCausalLM" : "MistralForCausalLM", bos, ids,    \
        c->head_dim, c->hidden_size, c->intermediate_size, c->max_position_embeddings,         \
        c->model_type, c->num_attention_heads, c->num_hidden_layers, c->num_key_value_heads,   \
        eps, rope, theta, c->tie_word_embeddings ? "true" : "false",                           \
        tsr__llama_dtype_name(c->torch_dtype), c->vocab_size
    int n = snprintf(NULL, 0, fmt, ARGS);
    char *s = n > 0 ? malloc((size_t)n + 1) : NULL;
    if (!s)
        return tsr__fail(TSR_ENOMEM, "llama config: out of memory");
    snprintf(s, (size_t)n + 1, fmt, ARGS);
#undef ARGS
    *out = s;
    if (len)
        *len = (size_t)n;
    return TSR_OK;
}

int tsr__llama_config_write(const tsr__llama_config_t *c, const char *path)
{
    char *s = NULL;
    size_t n = 0;
    int rc = tsr__llama_config_json(c, &s, &n);
    tsr__afile_t af;
    if (!rc)
        rc = tsr__afile_open(&af, path, "llama config");
    if (!rc)
        rc = tsr__afile_write(&af, s, n);
    if (!rc)
        rc = tsr__afile_commit(&af);
    free(s);
    return rc;
}
