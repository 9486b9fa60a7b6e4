/* nn/io/checkpoint.c — HF GPT-2 safetensors checkpoints and AdamW state
 * files, through the public model accessors of gpt2.h (and the step hook of
 * nn/io/checkpoint.h) only.
 *
 * Loading validates every tensor's presence, shape, dtype and values (all
 * finite) before the first tsr_gpt2_set, so a wrong file leaves the model as
 * it was; only an I/O error in the middle of the second reading of the data
 * can leave it partly loaded.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/gpt2.h>

#include "nn/io/checkpoint.h"
#include "runtime/json.h"
#include "nn/io/safetensors.h"
#include "runtime/error.h"
#include "runtime/file.h"

#define PREFIX "transformer."
#define PREFIX_LEN (sizeof PREFIX - 1)
#define NAME_MAX_LEN 256

/* ---- HF names and shapes ------------------------------------------------ */

/* Shapes of a layer's tensors as multiples of the channel count C. */
static const struct {
    const char *suffix;
    int ndim, mult[2];
} layer_tensors[] = {
    {"ln_1.weight", 1, {1}},           {"ln_1.bias", 1, {1}},
    {"attn.c_attn.weight", 2, {1, 3}}, {"attn.c_attn.bias", 1, {3}},
    {"attn.c_proj.weight", 2, {1, 1}}, {"attn.c_proj.bias", 1, {1}},
    {"ln_2.weight", 1, {1}},           {"ln_2.bias", 1, {1}},
    {"mlp.c_fc.weight", 2, {1, 4}},    {"mlp.c_fc.bias", 1, {4}},
    {"mlp.c_proj.weight", 2, {4, 1}},  {"mlp.c_proj.bias", 1, {1}},
};
enum { PER_LAYER = sizeof layer_tensors / sizeof layer_tensors[0] };

typedef struct {
    int ndim;
    uint64_t d[2];
} shape_t;

/* "h.<n>." with a canonical decimal n: its length, and n; 0 if not. */
static size_t layer_prefix(const char *name, long *n)
{
    if (strncmp(name, "h.", 2) != 0 || name[2] < '0' || name[2] > '9')
        return 0;
    char *end;
    errno = 0;
    *n = strtol(name + 2, &end, 10);
    if (errno || *end != '.' || (name[2] == '0' && end != name + 3))
        return 0;
    return (size_t)(end + 1 - name);
}

static int hf_shape(const tsr_gpt2_config_t *c, const char *name, shape_t *s)
{
    uint64_t C = (uint64_t)c->channels;
    long n;
    size_t k = layer_prefix(name, &n);
    if (!strcmp(name, "wte.weight"))
        *s = (shape_t){2, {(uint64_t)c->vocab_size, C}};
    else if (!strcmp(name, "wpe.weight"))
        *s = (shape_t){2, {(uint64_t)c->context, C}};
    else if (!strcmp(name, "ln_f.weight") || !strcmp(name, "ln_f.bias"))
        *s = (shape_t){1, {C}};
    else if (k && n < c->layers) {
        for (int i = 0; i < PER_LAYER; i++)
            if (!strcmp(name + k, layer_tensors[i].suffix)) {
                *s = (shape_t){layer_tensors[i].ndim,
                               {C * (uint64_t)layer_tensors[i].mult[0],
                                C * (uint64_t)layer_tensors[i].mult[1]}};
                return 0;
            }
        return -1;
    } else
        return -1;
    return 0;
}

/* The i-th tensor of a checkpoint in HF order (4 + 12 * layers of them). */
static void expected_name(int i, int layers, char *buf, size_t n)
{
    static const char *const head[] = {"wte.weight", "wpe.weight"};
    static const char *const tail[] = {"ln_f.weight", "ln_f.bias"};
    int body = PER_LAYER * layers;
    if (i < 2)
        snprintf(buf, n, "%s", head[i]);
    else if (i < 2 + body)
        snprintf(buf, n, "h.%d.%s", (i - 2) / PER_LAYER, layer_tensors[(i - 2) % PER_LAYER].suffix);
    else
        snprintf(buf, n, "%s", tail[i - 2 - body]);
}

/* HF files carry the causal mask buffers and the tied lm_head: not parameters. */
static int ignored(const char *name)
{
    long n;
    size_t k = layer_prefix(name, &n);
    if (k)
        return !strcmp(name + k, "attn.bias") || !strcmp(name + k, "attn.masked_bias");
    return !strcmp(name, "lm_head.weight");
}

static const char *strip_prefix(const char *name)
{
    return strncmp(name, PREFIX, PREFIX_LEN) ? name : name + PREFIX_LEN;
}

static void shape_str(char *buf, size_t n, int ndim, const uint64_t *d)
{
    int w = snprintf(buf, n, "[");
    for (int i = 0; i < ndim && w > 0 && (size_t)w < n; i++)
        w += snprintf(buf + w, n - (size_t)w, i ? ", %llu" : "%llu", (unsigned long long)d[i]);
    if (w > 0 && (size_t)w < n)
        snprintf(buf + w, n - (size_t)w, "]");
}

static int is_float(tsr__st_dtype_t d)
{
    return d == TSR__ST_F32 || d == TSR__ST_F16 || d == TSR__ST_BF16 || d == TSR__ST_F64;
}

static int check_tensor(const char *what, const char *path, const tsr__st_tensor_t *t,
                        const char *name, const shape_t *want)
{
    int same = t->ndim == want->ndim;
    for (int i = 0; same && i < want->ndim; i++)
        same = t->shape[i] == want->d[i];
    if (!same) {
        char got[128], exp[64];
        shape_str(got, sizeof got, t->ndim, t->shape);
        shape_str(exp, sizeof exp, want->ndim, want->d);
        return tsr__fail(TSR_EINVAL, "%s %s: tensor %s has shape %s, expected %s", what, path,
                         name, got, exp);
    }
    if (!is_float(t->dtype))
        return tsr__fail(TSR_EINVAL, "%s %s: tensor %s has dtype %s, not F32/F16/BF16", what,
                         path, name, tsr__st_dtype_name(t->dtype));
    return TSR_OK;
}

/* Strict decimal for the metadata we write: digits only, fits an int. */
static int parse_count(const char *s, int *out)
{
    if (!s || !*s)
        return -1;
    long long v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > INT_MAX / 10)
            return -1;
        v = v * 10 + (*s - '0');
    }
    if (v > INT_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

/* ---- saving ------------------------------------------------------------- */

typedef struct {
    tsr_gpt2_t *m;
    const char **names; /* model parameter name of each added tensor */
    int *which;
} fill_ctx_t;

static int fill_param(void *ctx, size_t i, void *buf, size_t bytes)
{
    fill_ctx_t *c = ctx;
    size_t numel = 0;
    int rc = tsr_gpt2_get(c->m, c->names[i], c->which[i], NULL, &numel);
    if (rc == TSR_OK && numel * sizeof(float) != bytes)
        return tsr__fail(TSR_EINVAL, "checkpoint: %s has %zu elements, its HF shape %zu",
                         c->names[i], numel, bytes / sizeof(float));
    return rc ? rc : tsr_gpt2_get(c->m, c->names[i], c->which[i], buf, &numel);
}

/* Adds every parameter (part `which`) as "<prefix><name>" with its HF shape. */
static int add_params(tsr__st_writer_t *w, fill_ctx_t *ctx, size_t *n, const char *prefix,
                      int which)
{
    const tsr_gpt2_config_t *cfg = tsr_gpt2_config(ctx->m);
    for (int i = 0; i < tsr_gpt2_param_count(ctx->m); i++) {
        const char *name = tsr_gpt2_param_name(ctx->m, i);
        char full[NAME_MAX_LEN];
        shape_t s;
        if (!name || hf_shape(cfg, name, &s) != 0)
            return tsr__fail(TSR_EINVAL, "checkpoint: model parameter %s has no HF GPT-2 shape",
                             name ? name : "(null)");
        snprintf(full, sizeof full, "%s%s", prefix, name);
        ctx->names[*n] = name, ctx->which[*n] = which;
        int rc = tsr__st_writer_add_fill(w, full, TSR__ST_F32, s.ndim, s.d, fill_param, ctx);
        if (rc != TSR_OK)
            return rc;
        (*n)++;
    }
    return TSR_OK;
}

static int meta_int(tsr__st_writer_t *w, const char *key, int v)
{
    char buf[16];
    snprintf(buf, sizeof buf, "%d", v);
    return tsr__st_writer_meta(w, key, buf);
}

static int config_meta(tsr__st_writer_t *w, const tsr_gpt2_config_t *c)
{
    int rc = tsr__st_writer_meta(w, "format", "pt");
    if (!rc)
        rc = meta_int(w, "n_layer", c->layers);
    if (!rc)
        rc = meta_int(w, "n_head", c->heads);
    if (!rc)
        rc = meta_int(w, "n_embd", c->channels);
    if (!rc)
        rc = meta_int(w, "n_ctx", c->context);
    if (!rc)
        rc = meta_int(w, "vocab_size", c->vocab_size);
    return rc;
}

/* A checkpoint holds the parameters and the configuration; a state file the
 * two AdamW moments, the step counter and the caller's extra text. */
static int add_content(tsr__st_writer_t *w, fill_ctx_t *ctx, int state, const char *extra)
{
    size_t n = 0;
    int rc;
    if (!state) {
        rc = add_params(w, ctx, &n, "", TSR_GPT2_PARAM);
        return rc ? rc : config_meta(w, tsr_gpt2_config(ctx->m));
    }
    rc = add_params(w, ctx, &n, "m.", TSR_GPT2_ADAM_M);
    if (!rc)
        rc = add_params(w, ctx, &n, "v.", TSR_GPT2_ADAM_V);
    if (!rc)
        rc = meta_int(w, "step", tsr_gpt2_steps_done(ctx->m));
    return rc ? rc : tsr__st_writer_meta(w, "extra", extra ? extra : "");
}

static int save(tsr_gpt2_t *m, const char *path, int state, const char *extra)
{
    if (!m || !path)
        return tsr__fail(TSR_EINVAL, "gpt2 save: NULL model or path");
    if (!tsr_gpt2_config(m)) /* not a live model: the message is set */
        return TSR_EINVAL;
    size_t slots = (size_t)(2 * tsr_gpt2_param_count(m) + 1);
    fill_ctx_t ctx = {m, malloc(slots * sizeof(char *)), malloc(slots * sizeof(int))};
    tsr__st_writer_t *w = NULL;
    int rc = ctx.names && ctx.which ? tsr__st_writer_create(&w)
                                    : tsr__fail(TSR_ENOMEM, "gpt2 save %s: out of memory", path);
    if (!rc)
        rc = add_content(w, &ctx, state, extra);
    if (!rc)
        rc = tsr__st_writer_write(w, path);
    tsr__st_writer_free(w);
    free(ctx.names), free(ctx.which);
    return rc;
}

int tsr_gpt2_save(tsr_gpt2_t *m, const char *path)
{
    return save(m, path, 0, NULL);
}

int tsr_gpt2_save_state(tsr_gpt2_t *m, const char *path, const char *extra)
{
    return save(m, path, 1, extra);
}

/* ---- reading the configuration ------------------------------------------ */

/* name, else "transformer."name */
static const tsr__st_tensor_t *find(const tsr__st_reader_t *r, const char *name)
{
    const tsr__st_tensor_t *t = tsr__st_find(r, name);
    if (!t) {
        char full[PREFIX_LEN + NAME_MAX_LEN];
        snprintf(full, sizeof full, PREFIX "%.*s", NAME_MAX_LEN - 1, name);
        t = tsr__st_find(r, full);
    }
    return t;
}

static int missing(const char *path, const char *name)
{
    return tsr__fail(TSR_EINVAL, "checkpoint %s: missing tensor %s", path, name);
}

static int dim_int(const char *path, const char *name, uint64_t d, int *out)
{
    if (d == 0 || d > INT_MAX)
        return tsr__fail(TSR_EINVAL, "checkpoint %s: tensor %s has a dimension of %llu", path,
                         name, (unsigned long long)d);
    *out = (int)d;
    return TSR_OK;
}

static int count_layers(const tsr__st_reader_t *r, const char *path, int *layers)
{
    char name[NAME_MAX_LEN];
    int L = 0;
    for (;; L++) {
        snprintf(name, sizeof name, "h.%d.ln_1.weight", L);
        if (!find(r, name))
            break;
    }
    if (L == 0)
        return missing(path, "h.0.ln_1.weight");
    for (size_t i = 0; i < tsr__st_count(r); i++) {
        const char *tn = strip_prefix(tsr__st_at(r, i)->name);
        long n;
        if (layer_prefix(tn, &n) && n >= L)
            return tsr__fail(TSR_EINVAL, "checkpoint %s: tensor %s belongs to layer %ld but "
                             "h.%d.ln_1.weight is missing", path, tsr__st_at(r, i)->name, n, L);
    }
    *layers = L;
    return TSR_OK;
}

static int config_shapes(const tsr__st_reader_t *r, const char *path, tsr_gpt2_config_t *cfg)
{
    const tsr__st_tensor_t *wte = find(r, "wte.weight"), *wpe = find(r, "wpe.weight");
    if (!wte)
        return missing(path, "wte.weight");
    if (!wpe)
        return missing(path, "wpe.weight");
    if (wte->ndim != 2)
        return tsr__fail(TSR_EINVAL, "checkpoint %s: wte.weight has %d dimensions, expected 2",
                         path, wte->ndim);
    if (wpe->ndim != 2)
        return tsr__fail(TSR_EINVAL, "checkpoint %s: wpe.weight has %d dimensions, expected 2",
                         path, wpe->ndim);
    int rc = dim_int(path, "wte.weight", wte->shape[0], &cfg->vocab_size);
    if (!rc)
        rc = dim_int(path, "wte.weight", wte->shape[1], &cfg->channels);
    if (!rc)
        rc = dim_int(path, "wpe.weight", wpe->shape[0], &cfg->context);
    if (!rc)
        rc = count_layers(r, path, &cfg->layers);
    /* every tensor, wpe's width included, against the shapes these imply */
    char name[NAME_MAX_LEN];
    for (int i = 0; !rc && i < 4 + PER_LAYER * cfg->layers; i++) {
        expected_name(i, cfg->layers, name, sizeof name);
        const tsr__st_tensor_t *t = find(r, name);
        shape_t s;
        hf_shape(cfg, name, &s);
        rc = t ? check_tensor("checkpoint", path, t, name, &s) : missing(path, name);
    }
    return rc;
}

static int read_small_file(const char *path, char **buf, size_t *len)
{
    char why[128];
    FILE *f = tsr__fopen_regular(path, why, sizeof why);
    if (!f)
        return errno == ENOENT ? TSR_ENOTFOUND
                               : tsr__fail(TSR_EIO, "%s: cannot open: %s", path, why);
    size_t cap = 1 << 20;
    *buf = malloc(cap);
    int rc = *buf ? TSR_OK : tsr__fail(TSR_ENOMEM, "%s: out of memory", path);
    if (!rc) {
        *len = fread(*buf, 1, cap, f);
        if (ferror(f))
            rc = tsr__fail(TSR_EIO, "%s: read failed", path);
        else if (*len == cap)
            rc = tsr__fail(TSR_EINVAL, "%s: larger than 1 MiB", path);
    }
    fclose(f);
    if (rc) {
        free(*buf);
        *buf = NULL;
    }
    return rc;
}

/* n_head of the config.json beside path; *heads stays 0 when there is none. */
static int heads_from_config_json(const char *path, int *heads)
{
    const char *slash = strrchr(path, '/');
    size_t dlen = slash ? (size_t)(slash - path) + 1 : 0;
    char *cj = malloc(dlen + sizeof "config.json");
    if (!cj)
        return tsr__fail(TSR_ENOMEM, "checkpoint %s: out of memory", path);
    memcpy(cj, path, dlen);
    memcpy(cj + dlen, "config.json", sizeof "config.json");
    char *buf = NULL;
    size_t len = 0;
    tsr__json_doc_t *doc = NULL;
    int rc = read_small_file(cj, &buf, &len);
    if (rc == TSR_ENOTFOUND)
        rc = TSR_OK;
    else if (rc == TSR_OK)
        rc = tsr__json_parse(buf, len, cj, &doc);
    const tsr__json_t *nh = doc ? tsr__json_get(tsr__json_root(doc), "n_head") : NULL;
    int64_t v;
    if (!rc && nh && (tsr__json_i64(nh, &v) != 0 || v <= 0 || v > INT_MAX))
        rc = tsr__fail(TSR_EINVAL, "%s: n_head is not a positive integer", cj);
    else if (!rc && nh)
        *heads = (int)v;
    tsr__json_free(doc);
    free(buf), free(cj);
    return rc;
}

static int config_heads(const tsr__st_reader_t *r, const char *path, tsr_gpt2_config_t *cfg)
{
    const char *meta = tsr__st_metadata(r, "n_head");
    int rc = TSR_OK;
    cfg->heads = 0;
    if (meta && (parse_count(meta, &cfg->heads) != 0 || cfg->heads == 0))
        return tsr__fail(TSR_EINVAL, "checkpoint %s: metadata n_head \"%.40s\" is not a positive "
                         "integer", path, meta);
    if (!meta)
        rc = heads_from_config_json(path, &cfg->heads);
    if (!rc && !cfg->heads)
        cfg->heads = cfg->channels / 64; /* every GPT-2 size has 64-wide heads */
    if (!rc && (cfg->heads == 0 || cfg->channels % cfg->heads))
        rc = tsr__fail(TSR_EINVAL, "checkpoint %s: %d channels are not divisible by %d heads",
                       path, cfg->channels, cfg->heads);
    return rc;
}

int tsr_gpt2_read_config(const char *path, tsr_gpt2_config_t *cfg)
{
    if (!path || !cfg)
        return tsr__fail(TSR_EINVAL, "tsr_gpt2_read_config: NULL argument");
    memset(cfg, 0, sizeof *cfg);
    tsr__st_reader_t *r;
    int rc = tsr__st_open(&r, path);
    if (rc)
        return rc;
    tsr_gpt2_config_t c = {0};
    rc = config_shapes(r, path, &c);
    if (!rc)
        rc = config_heads(r, path, &c);
    tsr__st_close(r);
    if (!rc)
        *cfg = c;
    return rc;
}

/* ---- loading ------------------------------------------------------------ */

/* The file's tensors matched to the model's parameters: found[g * P + i] is
 * parameter i of group g (the one group of a checkpoint; "m." and "v." of a
 * state file). */
typedef struct {
    tsr_gpt2_t *m;
    const char *what, *path;
    int P, ngroups, checkpoint;
    const char *const *prefix;
    const tsr__st_tensor_t **found;
} match_t;

static int param_index(const match_t *mt, const char *name)
{
    for (int i = 0; i < mt->P; i++)
        if (!strcmp(tsr_gpt2_param_name(mt->m, i), name))
            return i;
    return -1;
}

static int match_one(match_t *mt, const tsr__st_tensor_t *t)
{
    const char *name = mt->checkpoint ? strip_prefix(t->name) : t->name;
    if (mt->checkpoint && ignored(name))
        return TSR_OK;
    for (int g = 0; g < mt->ngroups; g++) {
        size_t k = strlen(mt->prefix[g]);
        int i = strncmp(name, mt->prefix[g], k) ? -1 : param_index(mt, name + k);
        if (i < 0)
            continue;
        if (mt->found[g * mt->P + i])
            return tsr__fail(TSR_EINVAL, "%s %s: tensors %s and %s are the same parameter",
                             mt->what, mt->path, mt->found[g * mt->P + i]->name, t->name);
        mt->found[g * mt->P + i] = t;
        return TSR_OK;
    }
    return tsr__fail(TSR_EINVAL, "%s %s: unexpected tensor %s (not a parameter of this model)",
                     mt->what, mt->path, t->name);
}

static int match_all(match_t *mt, const tsr__st_reader_t *r)
{
    const tsr_gpt2_config_t *cfg = tsr_gpt2_config(mt->m);
    for (size_t j = 0; j < tsr__st_count(r); j++) {
        int rc = match_one(mt, tsr__st_at(r, j));
        if (rc)
            return rc;
    }
    for (int g = 0; g < mt->ngroups; g++)
        for (int i = 0; i < mt->P; i++) {
            const char *name = tsr_gpt2_param_name(mt->m, i);
            char full[NAME_MAX_LEN];
            shape_t s;
            snprintf(full, sizeof full, "%s%s", mt->prefix[g], name);
            if (hf_shape(cfg, name, &s) != 0)
                return tsr__fail(TSR_EINVAL, "%s: model parameter %s has no HF GPT-2 shape",
                                 mt->what, name);
            const tsr__st_tensor_t *t = mt->found[g * mt->P + i];
            if (!t)
                return tsr__fail(TSR_EINVAL, "%s %s: missing tensor %s", mt->what, mt->path,
                                 full);
            int rc = check_tensor(mt->what, mt->path, t, full, &s);
            if (rc)
                return rc;
        }
    return TSR_OK;
}

/* TSR_EINVAL naming the tensor when one of its n values is NaN or infinite:
 * such a model would evaluate to a NaN loss and sample garbage. */
static int check_finite(const match_t *mt, const tsr__st_tensor_t *t, const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return tsr__fail(TSR_EINVAL, "%s %s: tensor %s holds %s at element %zu", mt->what,
                             mt->path, t->name, isnan(v[i]) ? "NaN" : "an infinity", i);
    return TSR_OK;
}

/* Copies every matched tensor into the model (part which[g] of group g).
 * A first pass reads every tensor and checks that it is finite, so that a
 * bad value anywhere leaves the model as it was; the data is read twice
 * rather than held twice (a checkpoint may not fit in memory twice). */
static int set_all(match_t *mt, tsr__st_reader_t *r, const int *which)
{
    uint64_t max = 0;
    for (int k = 0; k < mt->ngroups * mt->P; k++)
        max = mt->found[k]->numel > max ? mt->found[k]->numel : max;
    float *buf = max <= SIZE_MAX / sizeof(float) ? malloc((size_t)max * sizeof(float) + 1) : NULL;
    if (!buf)
        return tsr__fail(TSR_ENOMEM, "%s %s: out of memory", mt->what, mt->path);
    int rc = TSR_OK;
    for (int k = 0; !rc && k < mt->ngroups * mt->P; k++) {
        const tsr__st_tensor_t *t = mt->found[k];
        rc = tsr__st_read_f32(r, t, buf, (size_t)t->numel);
        if (!rc)
            rc = check_finite(mt, t, buf, (size_t)t->numel);
    }
    for (int k = 0; !rc && k < mt->ngroups * mt->P; k++) {
        const tsr__st_tensor_t *t = mt->found[k];
        rc = tsr__st_read_f32(r, t, buf, (size_t)t->numel);
        if (!rc)
            rc = tsr_gpt2_set(mt->m, tsr_gpt2_param_name(mt->m, k % mt->P), which[k / mt->P], buf,
                              (size_t)t->numel);
    }
    free(buf);
    return rc;
}

static int open_matched(match_t *mt, tsr__st_reader_t **r)
{
    *r = NULL;
    mt->found = calloc((size_t)(mt->ngroups * mt->P + 1), sizeof *mt->found);
    if (!mt->found)
        return tsr__fail(TSR_ENOMEM, "%s %s: out of memory", mt->what, mt->path);
    int rc = tsr__st_open(r, mt->path);
    if (!rc)
        rc = match_all(mt, *r);
    return rc;
}

int tsr_gpt2_load(tsr_gpt2_t *m, const char *path)
{
    if (!m || !path)
        return tsr__fail(TSR_EINVAL, "tsr_gpt2_load: NULL model or path");
    if (!tsr_gpt2_config(m))
        return TSR_EINVAL;
    static const char *const groups[] = {""};
    static const int which[] = {TSR_GPT2_PARAM};
    match_t mt = {m, "checkpoint", path, tsr_gpt2_param_count(m), 1, 1, groups, NULL};
    tsr__st_reader_t *r;
    int rc = open_matched(&mt, &r);
    if (!rc)
        rc = set_all(&mt, r, which);
    tsr__st_close(r);
    free(mt.found);
    return rc;
}

static int state_meta(const tsr__st_reader_t *r, const char *path, char *extra,
                      size_t extra_size, int *step)
{
    const char *s = tsr__st_metadata(r, "step"), *x = tsr__st_metadata(r, "extra");
    if (!s || parse_count(s, step) != 0)
        return tsr__fail(TSR_EINVAL, "state %s: metadata \"step\" missing or not a count", path);
    if (!x)
        x = "";
    if (extra && strlen(x) + 1 > extra_size)
        return tsr__fail(TSR_EINVAL, "state %s: extra text of %zu bytes does not fit %zu", path,
                         strlen(x), extra_size);
    return TSR_OK;
}

int tsr_gpt2_load_state(tsr_gpt2_t *m, const char *path, char *extra, size_t extra_size)
{
    if (!m || !path)
        return tsr__fail(TSR_EINVAL, "tsr_gpt2_load_state: NULL model or path");
    if (!tsr_gpt2_config(m))
        return TSR_EINVAL;
    static const char *const groups[] = {"m.", "v."};
    static const int which[] = {TSR_GPT2_ADAM_M, TSR_GPT2_ADAM_V};
    match_t mt = {m, "state", path, tsr_gpt2_param_count(m), 2, 0, groups, NULL};
    tsr__st_reader_t *r;
    int step = 0;
    int rc = open_matched(&mt, &r);
    if (!rc)
        rc = state_meta(r, path, extra, extra_size, &step);
    if (!rc)
        rc = set_all(&mt, r, which);
    if (!rc)
        rc = tsr__gpt2_set_steps(m, step);
    if (!rc && extra) {
        const char *x = tsr__st_metadata(r, "extra");
        snprintf(extra, extra_size, "%s", x ? x : "");
    }
    tsr__st_close(r);
    free(mt.found);
    return rc;
}
