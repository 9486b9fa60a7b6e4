/* tools/model.c — GPT-2 or Llama behind one set of calls (see model.h). */
#include "model.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int model_arch_parse(const char *name, model_arch_t *arch)
{
    if (strcmp(name, "gpt2") == 0)
        *arch = MODEL_GPT2;
    else if (strcmp(name, "llama") == 0)
        *arch = MODEL_LLAMA;
    else
        return cli_usage_error("--arch: gpt2 or llama, not '%s'", name);
    return 0;
}

const char *model_arch_name(model_arch_t arch)
{
    return arch == MODEL_LLAMA ? "llama" : "gpt2";
}

void model_config_default(model_config_t *c, model_arch_t arch)
{
    memset(c, 0, sizeof *c);
    c->arch = arch;
    tsr_gpt2_config_default(&c->gpt2);
    tsr_llama_config_default(&c->llama);
}

int model_config_context(const model_config_t *c)
{
    return c->arch == MODEL_LLAMA ? c->llama.max_positions : c->gpt2.context;
}

int model_config_vocab(const model_config_t *c)
{
    return c->arch == MODEL_LLAMA ? c->llama.vocab_size : c->gpt2.vocab_size;
}

void model_config_set_run(model_config_t *c, int recompute, int precision, int data_parallel,
                          int zero)
{
    c->gpt2.recompute = c->llama.recompute = recompute;
    c->gpt2.precision = c->llama.precision = precision;
    c->gpt2.data_parallel = c->llama.data_parallel = data_parallel;
    c->gpt2.zero = c->llama.zero = zero;
}

void model_config_describe(const model_config_t *c, char *buf, size_t size)
{
    if (c->arch != MODEL_LLAMA) {
        cli_config_describe(&c->gpt2, buf, size);
        return;
    }
    const tsr_llama_config_t *l = &c->llama;
    int hd = l->head_dim ? l->head_dim : (l->heads ? l->hidden / l->heads : 0);
    snprintf(buf, size,
             "Llama: %d layers, %d heads (%d K/V) of %d, hidden %d, intermediate %d, context "
             "%d, vocab %d%s",
             l->layers, l->heads, l->kv_heads, hd, l->hidden, l->intermediate, l->max_positions,
             l->vocab_size, l->tie_embeddings ? ", tied head" : "");
}

/* ---- flags --------------------------------------------------------------- */

void model_llama_opts(cli_opt_t *opts, tsr_llama_config_t *cfg)
{
    const cli_opt_t o[MODEL_LLAMA_NOPTS] = {
        {"hidden", 0, CLI_INT, &cfg->hidden, 1, 1e6, 0},
        {"intermediate", 0, CLI_INT, &cfg->intermediate, 1, 1e7, 0},
        {"kv-heads", 0, CLI_INT, &cfg->kv_heads, 1, 1e5, 0},
        {"head-dim", 0, CLI_INT, &cfg->head_dim, 0, 1e5, 0},
        {"max-positions", 0, CLI_INT, &cfg->max_positions, 1, 1e7, 0},
        {"rope-theta", 0, CLI_FLOAT, &cfg->rope_theta, 1.0, 1e12, 0},
        {"rms-norm-eps", 0, CLI_FLOAT, &cfg->rms_norm_eps, 1e-12, 1.0, 0},
        {"tie-embeddings", 0, CLI_BOOL, &cfg->tie_embeddings, 0, 0, 0},
    };
    memcpy(opts, o, sizeof o);
}

int model_check_llama_shape(const tsr_llama_config_t *c)
{
    if (c->kv_heads <= 0 || c->heads % c->kv_heads != 0)
        return cli_usage_error("--kv-heads %d does not divide --heads %d", c->kv_heads,
                               c->heads);
    if (c->head_dim == 0 && c->hidden % c->heads != 0)
        return cli_usage_error("--hidden %d is not a multiple of --heads %d (or give "
                               "--head-dim)", c->hidden, c->heads);
    int hd = c->head_dim ? c->head_dim : c->hidden / c->heads;
    if (hd % 2 != 0)
        return cli_usage_error("the head dimension %d is odd (rotary embeddings pair "
                               "channels)", hd);
    return 0;
}

int model_flags_resolve(model_arch_t arch, cli_opt_t *gopts, const tsr_gpt2_config_t *gflags,
                        cli_opt_t *lopts, const tsr_llama_config_t *lflags,
                        const tsr_llama_config_t *base, int recompute, int precision,
                        model_config_t *out)
{
    memset(out, 0, sizeof *out);
    out->arch = arch;
    out->gpt2 = *gflags;
    out->llama = *lflags;
    if (base != NULL) {
        /* the shape of the file or preset, with the flags given on top (in
         * model_llama_opts's order) */
        tsr_llama_config_t *l = &out->llama;
        *l = *base;
        if (lopts[0].seen)
            l->hidden = lflags->hidden;
        if (lopts[1].seen)
            l->intermediate = lflags->intermediate;
        if (lopts[2].seen)
            l->kv_heads = lflags->kv_heads;
        if (lopts[3].seen)
            l->head_dim = lflags->head_dim;
        if (lopts[4].seen)
            l->max_positions = lflags->max_positions;
        if (lopts[5].seen)
            l->rope_theta = lflags->rope_theta;
        if (lopts[6].seen)
            l->rms_norm_eps = lflags->rms_norm_eps;
        if (lopts[7].seen)
            l->tie_embeddings = lflags->tie_embeddings;
    }
    if (arch == MODEL_GPT2) {
        for (int i = 0; i < MODEL_LLAMA_NOPTS; i++)
            if (lopts[i].seen)
                return cli_usage_error("--%s is a Llama flag (with --arch llama)", lopts[i].name);
    } else {
        static const char *const gpt2_only[] = {"context", "channels"};
        static const char *const instead[] = {"max-positions", "hidden"};
        for (int i = 0; i < 2; i++)
            if (cli_seen(gopts, CLI_MODEL_NOPTS, gpt2_only[i]))
                return cli_usage_error("--%s is a GPT-2 flag; a Llama's is --%s", gpt2_only[i],
                                       instead[i]);
        if (cli_seen(gopts, CLI_MODEL_NOPTS, "tile-channels"))
            return cli_usage_error("--tile-channels is a GPT-2 flag (a Llama keeps its channels "
                                   "in one tile)");
        tsr_llama_config_t *l = &out->llama;
        if (cli_seen(gopts, CLI_MODEL_NOPTS, "vocab"))
            l->vocab_size = gflags->vocab_size;
        if (cli_seen(gopts, CLI_MODEL_NOPTS, "layers"))
            l->layers = gflags->layers;
        if (cli_seen(gopts, CLI_MODEL_NOPTS, "heads"))
            l->heads = gflags->heads;
        l->tile_tokens = gflags->tile_tokens;
        l->tile_vocab = gflags->tile_vocab;
        l->tile_hidden = gflags->tile_hidden;
        int rc = model_check_llama_shape(l);
        if (rc != 0)
            return rc;
    }
    model_config_set_run(out, recompute, precision, 0, 0);
    return 0;
}

int model_read_config(model_arch_t arch, const char *path, model_config_t *cfg)
{
    model_config_default(cfg, arch);
    if (arch == MODEL_GPT2)
        return cli_read_config(path, &cfg->gpt2);
    struct stat st;
    if (stat(path, &st) != 0)
        return cli_fail("checkpoint '%s' does not exist", path);
    int rc = tsr_llama_read_config(path, &cfg->llama);
    if (rc != TSR_OK)
        return cli_lib_fail(rc, "cannot read the Llama configuration of '%s'", path);
    return 0;
}

int model_config_from_checkpoint(const char *what, const model_config_t *ckpt,
                                 const model_config_t *flags, cli_opt_t *gopts,
                                 cli_opt_t *lopts, model_config_t *out)
{
    const model_config_t given = *flags; /* out may be flags */
    if (ckpt->arch == MODEL_GPT2) {
        *out = given;
        return cli_config_from_checkpoint(what, &ckpt->gpt2, &given.gpt2, gopts, &out->gpt2);
    }
    const tsr_llama_config_t *c = &ckpt->llama, *f = &given.llama;
    const char *names[] = {"vocab", "layers", "heads"};
    const int have[] = {c->vocab_size, c->layers, c->heads};
    const int want[] = {f->vocab_size, f->layers, f->heads};
    for (int i = 0; i < 3; i++)
        if (cli_seen(gopts, CLI_MODEL_NOPTS, names[i]) && have[i] != want[i])
            return cli_fail("--%s %d conflicts with '%s' (%s %d)", names[i], want[i], what,
                            names[i], have[i]);
    const char *lnames[] = {"hidden", "intermediate", "kv-heads", "head-dim", "max-positions"};
    const int lhave[] = {c->hidden, c->intermediate, c->kv_heads, c->head_dim,
                         c->max_positions};
    const int lwant[] = {f->hidden, f->intermediate, f->kv_heads, f->head_dim,
                         f->max_positions};
    for (int i = 0; i < 5; i++)
        if (cli_seen(lopts, MODEL_LLAMA_NOPTS, lnames[i]) && lhave[i] != lwant[i])
            return cli_fail("--%s %d conflicts with '%s' (%s %d)", lnames[i], lwant[i], what,
                            lnames[i], lhave[i]);
    if (cli_seen(lopts, MODEL_LLAMA_NOPTS, "rope-theta") && c->rope_theta != f->rope_theta)
        return cli_fail("--rope-theta %g conflicts with '%s' (rope-theta %g)", f->rope_theta,
                        what, c->rope_theta);
    *out = given;
    out->llama = *c;
    out->llama.tile_tokens = f->tile_tokens;
    out->llama.tile_vocab = f->tile_vocab;
    out->llama.tile_hidden = f->tile_hidden;
    out->llama.recompute = f->recompute;
    out->llama.precision = f->precision;
    out->llama.data_parallel = f->data_parallel;
    out->llama.zero = f->zero;
    return 0;
}

/* ---- the model ----------------------------------------------------------- */

#define DISPATCH(m, call_gpt2, call_llama) \
    ((m)->arch == MODEL_LLAMA ? (call_llama) : (call_gpt2))

int model_create(model_t *m, const model_config_t *cfg, int batch, int seq)
{
    memset(m, 0, sizeof *m);
    m->arch = cfg->arch;
    return DISPATCH(m, tsr_gpt2_create(&m->u.gpt2, &cfg->gpt2, batch, seq),
                    tsr_llama_create(&m->u.llama, &cfg->llama, batch, seq));
}

void model_free(model_t *m)
{
    if (m->arch == MODEL_LLAMA && m->u.llama)
        tsr_llama_free(m->u.llama);
    else if (m->arch == MODEL_GPT2 && m->u.gpt2)
        tsr_gpt2_free(m->u.gpt2);
    memset(&m->u, 0, sizeof m->u);
}

int model_is_open(const model_t *m)
{
    return m->arch == MODEL_LLAMA ? m->u.llama != NULL : m->u.gpt2 != NULL;
}

void model_config_of(const model_t *m, model_config_t *out)
{
    model_config_default(out, m->arch);
    if (m->arch == MODEL_LLAMA)
        out->llama = *tsr_llama_config(m->u.llama);
    else
        out->gpt2 = *tsr_gpt2_config(m->u.gpt2);
}

size_t model_num_params(const model_t *m)
{
    return DISPATCH(m, tsr_gpt2_num_params(m->u.gpt2), tsr_llama_num_params(m->u.llama));
}

int model_init_weights(model_t *m, uint64_t seed)
{
    return DISPATCH(m, tsr_gpt2_init_weights(m->u.gpt2, seed),
                    tsr_llama_init_weights(m->u.llama, seed));
}

int model_forward(model_t *m, const int32_t *tokens, const int32_t *targets, float *loss)
{
    return DISPATCH(m, tsr_gpt2_forward(m->u.gpt2, tokens, targets, loss),
                    tsr_llama_forward(m->u.llama, tokens, targets, loss));
}

int model_loss(model_t *m, float *loss)
{
    return DISPATCH(m, tsr_gpt2_loss(m->u.gpt2, loss), tsr_llama_loss(m->u.llama, loss));
}

int model_backward(model_t *m, float scale)
{
    return DISPATCH(m, tsr_gpt2_backward(m->u.gpt2, scale),
                    tsr_llama_backward(m->u.llama, scale));
}

int model_forward_backward(model_t *m, int micro, const int32_t *tokens,
                           const int32_t *targets, float scale, float *losses)
{
    return DISPATCH(m, tsr_gpt2_forward_backward(m->u.gpt2, micro, tokens, targets, scale, losses),
                    tsr_llama_forward_backward(m->u.llama, micro, tokens, targets, scale,
                                               losses));
}

int model_wave(const model_t *m)
{
    model_config_t c;
    model_config_of(m, &c);
    return m->arch == MODEL_LLAMA ? c.llama.wave : c.gpt2.wave;
}

int model_zero_grad(model_t *m)
{
    return DISPATCH(m, tsr_gpt2_zero_grad(m->u.gpt2), tsr_llama_zero_grad(m->u.llama));
}

int model_step(model_t *m, const tsr_adamw_config_t *opt, float lr, float *grad_norm)
{
    return DISPATCH(m, tsr_gpt2_step(m->u.gpt2, opt, lr, grad_norm),
                    tsr_llama_step(m->u.llama, opt, lr, grad_norm));
}

int model_steps_done(const model_t *m)
{
    return DISPATCH(m, tsr_gpt2_steps_done(m->u.gpt2), tsr_llama_steps_done(m->u.llama));
}

int model_load(model_t *m, const char *path)
{
    return DISPATCH(m, tsr_gpt2_load(m->u.gpt2, path), tsr_llama_load(m->u.llama, path));
}

int model_save(model_t *m, const char *path)
{
    if (m->arch == MODEL_GPT2 && (m->save_dtype != TSR_GPT2_FP32 || m->shard_bytes != 0))
        return TSR_EINVAL; /* one fp32 file (the tools refuse the flags first) */
    return DISPATCH(m, tsr_gpt2_save(m->u.gpt2, path),
                    tsr_llama_save(m->u.llama, path, m->save_dtype, m->shard_bytes));
}

int model_save_state(model_t *m, const char *path, const char *extra)
{
    return DISPATCH(m, tsr_gpt2_save_state(m->u.gpt2, path, extra),
                    tsr_llama_save_state(m->u.llama, path, extra));
}

int model_load_state(model_t *m, const char *path, char *extra, size_t extra_size)
{
    return DISPATCH(m, tsr_gpt2_load_state(m->u.gpt2, path, extra, extra_size),
                    tsr_llama_load_state(m->u.llama, path, extra, extra_size));
}

/* ---- generation with a KV cache ----------------------------------------- */

int model_gen_create(model_gen_t *g, model_t *m, int batch, int max_len)
{
    memset(g, 0, sizeof *g);
    g->arch = m->arch;
    return DISPATCH(m, tsr_gpt2_gen_create(&g->u.gpt2, m->u.gpt2, batch, max_len),
                    tsr_llama_gen_create(&g->u.llama, m->u.llama, batch, max_len));
}

void model_gen_free(model_gen_t *g)
{
    if (g->arch == MODEL_LLAMA && g->u.llama)
        tsr_llama_gen_free(g->u.llama);
    else if (g->arch == MODEL_GPT2 && g->u.gpt2)
        tsr_gpt2_gen_free(g->u.gpt2);
    memset(&g->u, 0, sizeof g->u);
}

int model_gen_precision(model_gen_t *g, int precision)
{
    return DISPATCH(g, tsr_gpt2_gen_precision(g->u.gpt2, precision),
                    precision == TSR_GPT2_FP32 ? TSR_OK : TSR_EINVAL);
}

int model_gen_prefill(model_gen_t *g, int slot, const int32_t *tokens, int n, float *logits)
{
    return DISPATCH(g, tsr_gpt2_gen_prefill(g->u.gpt2, slot, tokens, n, logits),
                    tsr_llama_gen_prefill(g->u.llama, slot, tokens, n, logits));
}

int model_gen_step(model_gen_t *g, const int32_t *tokens, float *logits)
{
    return DISPATCH(g, tsr_gpt2_gen_step(g->u.gpt2, tokens, logits),
                    tsr_llama_gen_step(g->u.llama, tokens, logits));
}

int model_gen_length(const model_gen_t *g, int slot)
{
    return DISPATCH(g, tsr_gpt2_gen_length(g->u.gpt2, slot),
                    tsr_llama_gen_length(g->u.llama, slot));
}

/* ---- the special ids of a config.json ------------------------------------ */

/* A small scanner of the JSON text: enough to find a top-level key and read
 * an integer, null, or a list of integers; anything else is skipped. */
static const char *json_ws(const char *p)
{
    while (*p && isspace((unsigned char)*p))
        p++;
    return p;
}

/* past the string at p ('"'), or NULL */
static const char *json_string_end(const char *p)
{
    for (p++; *p; p++) {
        if (*p == '\\' && p[1])
            p++;
        else if (*p == '"')
            return p + 1;
    }
    return NULL;
}

/* past the value at p, or NULL */
static const char *json_skip(const char *p)
{
    p = json_ws(p);
    if (*p == '"')
        return json_string_end(p);
    if (*p == '{' || *p == '[') {
        int depth = 0;
        while (*p) {
            if (*p == '"') {
                p = json_string_end(p);
                if (!p)
                    return NULL;
                continue;
            }
            if (*p == '{' || *p == '[')
                depth++;
            else if (*p == '}' || *p == ']') {
                if (--depth == 0)
                    return p + 1;
            }
            p++;
        }
        return NULL;
    }
    while (*p && *p != ',' && *p != '}' && *p != ']')
        p++;
    return p;
}

/* The value of top-level `key` in the object `text`, or NULL. */
static const char *json_top_value(const char *text, const char *key)
{
    const char *p = json_ws(text);
    if (*p != '{')
        return NULL;
    p = json_ws(p + 1);
    size_t klen = strlen(key);
    while (*p == '"') {
        const char *end = json_string_end(p);
        if (!end)
            return NULL;
        int match = (size_t)(end - p) == klen + 2 && !strncmp(p + 1, key, klen);
        p = json_ws(end);
        if (*p != ':')
            return NULL;
        p = json_ws(p + 1);
        if (match)
            return p;
        p = json_skip(p);
        if (!p)
            return NULL;
        p = json_ws(p);
        if (*p != ',')
            return NULL;
        p = json_ws(p + 1);
    }
    return NULL;
}

/* A token id at *p (advanced past it); 0, or -1 when it is not one. */
static int json_id(const char **p, int32_t *id)
{
    const char *s = json_ws(*p);
    if (!isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || v > INT32_MAX || *end == '.' || *end == 'e' || *end == 'E')
        return -1;
    *id = (int32_t)v;
    *p = end;
    return 0;
}

int model_llama_special_ids(const char *path, int32_t *bos, int32_t *eos, int *neos,
                            int max_eos)
{
    char file[4096];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        if (cli_path(file, sizeof file, path, "config.json") != 0)
            return 1;
    } else if ((size_t)snprintf(file, sizeof file, "%s", path) >= sizeof file) {
        return cli_fail("path too long: '%s'", path);
    }
    char *text = NULL;
    size_t len = 0;
    if (cli_read_file(file, &text, &len) != 0)
        return 1;
    int status = 0;
    *bos = 1;
    *neos = 1;
    eos[0] = 2;
    const char *v = json_top_value(text, "bos_token_id");
    if (v && !strncmp(v, "null", 4))
        *bos = -1;
    else if (v && json_id(&v, bos) != 0)
        status = cli_fail("'%s': \"bos_token_id\" is not a token id", file);
    v = json_top_value(text, "eos_token_id");
    if (status == 0 && v) {
        if (!strncmp(v, "null", 4)) {
            *neos = 0;
        } else if (*v == '[') {
            *neos = 0;
            v = json_ws(v + 1);
            while (status == 0 && *v != ']') {
                int32_t id;
                if (json_id(&v, &id) != 0)
                    status = cli_fail("'%s': \"eos_token_id\" lists something other than token "
                                      "ids", file);
                else if (*neos >= max_eos)
                    status = cli_fail("'%s': \"eos_token_id\" lists more than %d ids", file,
                                      max_eos);
                else
                    eos[(*neos)++] = id;
                v = json_ws(v);
                if (status == 0 && *v == ',')
                    v = json_ws(v + 1);
                else if (status == 0 && *v != ']')
                    status = cli_fail("'%s': \"eos_token_id\" is not a list of ids", file);
            }
        } else if (json_id(&v, &eos[0]) != 0) {
            status = cli_fail("'%s': \"eos_token_id\" is neither a token id nor a list of "
                              "them", file);
        }
    }
    free(text);
    return status;
}
