/* Checkpoints and optimizer state of a tiny GPT-2 (vocabulary 300, context
 * 64, 2 layers, 4 heads, 64 channels): save/load round trip parameter by
 * parameter; HF-style files (prefix, BF16, attention buffers, lm_head,
 * config.json); every kind of bad file gives an error and leaves the model
 * exactly as it was; AdamW moments, step counter and extra text round-trip. */
#include "io_util.h"
#include "nn/io/checkpoint.h"
#include "nn/io/safetensors.h"

enum { V = 300, CTX = 64, L = 2, H = 4, C = 64 };

static void start(void)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 1;
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "tsr_init: %s", tsr_error_message());
}

static void stop(void)
{
    cr_assert_eq(tsr_shutdown(), TSR_OK);
}

static tsr_gpt2_t *tiny_layers(int layers, uint64_t seed)
{
    tsr_gpt2_config_t c = {.vocab_size = V, .context = CTX, .layers = layers, .heads = H,
                           .channels = C};
    tsr_gpt2_t *m;
    cr_assert_eq(tsr_gpt2_create(&m, &c, 1, 16), TSR_OK, "create: %s", tsr_error_message());
    if (seed)
        cr_assert_eq(tsr_gpt2_init_weights(m, seed), TSR_OK);
    return m;
}

static tsr_gpt2_t *tiny(uint64_t seed)
{
    return tiny_layers(L, seed);
}

/* Every parameter (or moment) of a model, by index. */
typedef struct {
    int n;
    const char *names[64];
    float *v[64];
    size_t numel[64];
} snap_t;

static snap_t *snapshot(tsr_gpt2_t *m, int which)
{
    snap_t *s = calloc(1, sizeof *s);
    s->n = tsr_gpt2_param_count(m);
    cr_assert_eq(s->n, 4 + 12 * tsr_gpt2_config(m)->layers);
    for (int i = 0; i < s->n; i++) {
        s->names[i] = tsr_gpt2_param_name(m, i);
        cr_assert_eq(tsr_gpt2_get(m, s->names[i], which, NULL, &s->numel[i]), TSR_OK);
        s->v[i] = malloc(s->numel[i] * sizeof(float));
        cr_assert_eq(tsr_gpt2_get(m, s->names[i], which, s->v[i], &s->numel[i]), TSR_OK);
    }
    return s;
}

static void snap_free(snap_t *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s);
}

static void expect_model(tsr_gpt2_t *m, int which, const snap_t *want, const char *what)
{
    snap_t *got = snapshot(m, which);
    cr_assert_eq(got->n, want->n);
    for (int i = 0; i < want->n; i++) {
        cr_assert_str_eq(got->names[i], want->names[i]);
        cr_assert_eq(got->numel[i], want->numel[i]);
        cr_assert_eq(memcmp(got->v[i], want->v[i], want->numel[i] * sizeof(float)), 0,
                     "%s: %s differs", what, want->names[i]);
    }
    snap_free(got);
}

static void hf_shape(const char *name, uint64_t *shape, int *ndim)
{
    const char *s = strncmp(name, "h.", 2) ? name : strchr(name + 2, '.') + 1;
    *ndim = 1;
    if (!strcmp(s, "wte.weight"))
        *ndim = 2, shape[0] = V, shape[1] = C;
    else if (!strcmp(s, "wpe.weight"))
        *ndim = 2, shape[0] = CTX, shape[1] = C;
    else if (!strcmp(s, "attn.c_attn.weight"))
        *ndim = 2, shape[0] = C, shape[1] = 3 * C;
    else if (!strcmp(s, "attn.c_attn.bias"))
        shape[0] = 3 * C;
    else if (!strcmp(s, "attn.c_proj.weight"))
        *ndim = 2, shape[0] = C, shape[1] = C;
    else if (!strcmp(s, "mlp.c_fc.weight"))
        *ndim = 2, shape[0] = C, shape[1] = 4 * C;
    else if (!strcmp(s, "mlp.c_fc.bias"))
        shape[0] = 4 * C;
    else if (!strcmp(s, "mlp.c_proj.weight"))
        *ndim = 2, shape[0] = 4 * C, shape[1] = C;
    else
        shape[0] = C;
}

/* ---- save and load ------------------------------------------------------ */

Test(checkpoint, save_load_round_trip)
{
    start();
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "model.safetensors");
    tsr_gpt2_t *a = tiny(1), *b = tiny(2);
    cr_assert_eq(tsr_gpt2_save(a, path), TSR_OK, "save: %s", tsr_error_message());

    tsr_gpt2_config_t cfg;
    cr_assert_eq(tsr_gpt2_read_config(path, &cfg), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(cfg.vocab_size, V);
    cr_assert_eq(cfg.context, CTX);
    cr_assert_eq(cfg.layers, L);
    cr_assert_eq(cfg.heads, H, "heads from our metadata");
    cr_assert_eq(cfg.channels, C);
    cr_assert(cfg.tile_tokens == 0 && cfg.tile_vocab == 0 && cfg.tile_hidden == 0);

    snap_t *sa = snapshot(a, TSR_GPT2_PARAM), *sb = snapshot(b, TSR_GPT2_PARAM);
    cr_assert_neq(memcmp(sa->v[0], sb->v[0], sa->numel[0] * 4), 0, "different seeds differ");
    cr_assert_eq(tsr_gpt2_load(b, path), TSR_OK, "load: %s", tsr_error_message());
    expect_model(b, TSR_GPT2_PARAM, sa, "after load");

    /* the file itself: HF names and shapes, F32, the configuration as metadata */
    tsr__st_reader_t *r;
    cr_assert_eq(tsr__st_open(&r, path), TSR_OK);
    cr_assert_eq(tsr__st_count(r), (size_t)(4 + 12 * L));
    for (int i = 0; i < sa->n; i++) {
        const tsr__st_tensor_t *t = tsr__st_find(r, sa->names[i]);
        cr_assert_not_null(t, "%s in the file", sa->names[i]);
        cr_assert_eq(t->dtype, TSR__ST_F32);
        uint64_t shape[2];
        int ndim;
        hf_shape(sa->names[i], shape, &ndim);
        cr_assert_eq(t->ndim, ndim, "%s", sa->names[i]);
        for (int d = 0; d < ndim; d++)
            cr_assert_eq(t->shape[d], shape[d], "%s dim %d", sa->names[i], d);
    }
    cr_assert_null(tsr__st_find(r, "lm_head.weight"));
    cr_assert_str_eq(tsr__st_metadata(r, "format"), "pt");
    cr_assert_str_eq(tsr__st_metadata(r, "n_layer"), "2");
    cr_assert_str_eq(tsr__st_metadata(r, "n_head"), "4");
    cr_assert_str_eq(tsr__st_metadata(r, "n_embd"), "64");
    cr_assert_str_eq(tsr__st_metadata(r, "n_ctx"), "64");
    cr_assert_str_eq(tsr__st_metadata(r, "vocab_size"), "300");
    tsr__st_close(r);

    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    cr_assert_not(io_exists(tmp));
    io_join(path, sizeof path, dir, "missing/model.safetensors");
    cr_assert_eq(tsr_gpt2_save(a, path), TSR_EIO);

    snap_free(sa), snap_free(sb);
    tsr_gpt2_free(a), tsr_gpt2_free(b);
    io_rmtree(dir);
    stop();
}

/* ---- hand-made files ---------------------------------------------------- */

typedef struct {
    const char *skip;      /* leave this tensor out */
    const char *transpose; /* write this matrix with its dims swapped */
    const char *as_i32;    /* write this tensor as I32 */
    const char *extra;     /* add a tensor of this name (C floats) */
    int prefix;            /* "transformer." before every name */
    int both;              /* wte.weight twice: with and without prefix */
    int bf16;              /* store BF16 (truncated) */
    int hf_buffers;        /* attn.bias, attn.masked_bias, lm_head.weight */
    const char *n_head;    /* metadata n_head */
} variant_t;

static uint16_t *to_bf16(const float *x, size_t n)
{
    uint16_t *y = malloc(n * 2 + 2);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        y[i] = (uint16_t)(u >> 16);
    }
    return y;
}

static void write_variant(const char *path, const snap_t *s, const variant_t *o)
{
    tsr__st_writer_t *w;
    cr_assert_eq(tsr__st_writer_create(&w), TSR_OK);
    void *keep[128];
    int nkeep = 0;
    static float zeros[4 * C * C];
    for (int i = 0; i < s->n; i++) {
        const char *name = s->names[i];
        if (o->skip && !strcmp(name, o->skip))
            continue;
        char full[128];
        snprintf(full, sizeof full, "%s%s", o->prefix ? "transformer." : "", name);
        uint64_t shape[2];
        int ndim;
        hf_shape(name, shape, &ndim);
        if (o->transpose && !strcmp(name, o->transpose)) {
            uint64_t t = shape[0];
            shape[0] = shape[1], shape[1] = t;
        }
        tsr__st_dtype_t dt = TSR__ST_F32;
        const void *data = s->v[i];
        if (o->bf16) {
            data = keep[nkeep++] = to_bf16(s->v[i], s->numel[i]);
            dt = TSR__ST_BF16;
        }
        if (o->as_i32 && !strcmp(name, o->as_i32))
            dt = TSR__ST_I32;
        cr_assert_eq(tsr__st_writer_add(w, full, dt, ndim, shape, data), TSR_OK, "%s",
                     tsr_error_message());
        if (o->both && !strcmp(name, "wte.weight"))
            cr_assert_eq(tsr__st_writer_add(w, "transformer.wte.weight", dt, ndim, shape, data),
                         TSR_OK);
    }
    if (o->extra)
        cr_assert_eq(tsr__st_writer_add(w, o->extra, TSR__ST_F32, 1, (uint64_t[]){C}, zeros),
                     TSR_OK);
    if (o->hf_buffers) {
        for (int l = 0; l < L; l++) {
            char n1[64], n2[64];
            snprintf(n1, sizeof n1, "h.%d.attn.bias", l);
            snprintf(n2, sizeof n2, "transformer.h.%d.attn.masked_bias", l);
            cr_assert_eq(tsr__st_writer_add(w, n1, TSR__ST_F32, 4, (uint64_t[]){1, 1, 64, 64},
                                            zeros), TSR_OK);
            cr_assert_eq(tsr__st_writer_add(w, n2, TSR__ST_F32, 0, NULL, zeros), TSR_OK);
        }
        cr_assert_eq(tsr__st_writer_add(w, "lm_head.weight", TSR__ST_F32, 2,
                                        (uint64_t[]){V, C}, s->v[0]), TSR_OK);
    }
    if (o->n_head)
        cr_assert_eq(tsr__st_writer_meta(w, "n_head", o->n_head), TSR_OK);
    cr_assert_eq(tsr__st_writer_write(w, path), TSR_OK, "%s", tsr_error_message());
    tsr__st_writer_free(w);
    for (int i = 0; i < nkeep; i++)
        free(keep[i]);
}

Test(checkpoint, hf_style_file)
{
    start();
    char dir[256], path[512], cj[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "model.safetensors");
    io_join(cj, sizeof cj, dir, "config.json");
    tsr_gpt2_t *a = tiny(1), *b = tiny(2);
    snap_t *sa = snapshot(a, TSR_GPT2_PARAM);
    write_variant(path, sa, &(variant_t){.prefix = 1, .bf16 = 1, .hf_buffers = 1});

    tsr_gpt2_config_t cfg;
    cr_assert_eq(tsr_gpt2_read_config(path, &cfg), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(cfg.layers, L);
    cr_assert_eq(cfg.heads, 1, "no metadata, no config.json: 64-wide heads");
    const char *json = "{\"activation_function\": \"gelu_new\", \"n_head\": 4, \"n_layer\": 2, "
                       "\"layer_norm_epsilon\": 1e-05, \"task_specific_params\": {\"x\": [1]}}";
    io_write(cj, json, strlen(json));
    cr_assert_eq(tsr_gpt2_read_config(path, &cfg), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(cfg.heads, H, "heads from config.json");
    cr_assert_eq(cfg.vocab_size, V);

    cr_assert_eq(tsr_gpt2_load(b, path), TSR_OK, "%s", tsr_error_message());
    for (int i = 0; i < sa->n; i++) /* what BF16 kept of each value */
        for (size_t k = 0; k < sa->numel[i]; k++) {
            uint32_t u;
            memcpy(&u, &sa->v[i][k], 4);
            u &= 0xffff0000u;
            memcpy(&sa->v[i][k], &u, 4);
        }
    expect_model(b, TSR_GPT2_PARAM, sa, "after a BF16 load");

    io_write(cj, "{\"n_head\": 4,}", 14);
    cr_assert_eq(tsr_gpt2_read_config(path, &cfg), TSR_EINVAL, "a broken config.json");
    cr_assert_not_null(strstr(tsr_error_message(), "config.json"), "%s", tsr_error_message());
    io_write(cj, "{\"n_head\": \"4\"}", 15);
    cr_assert_eq(tsr_gpt2_read_config(path, &cfg), TSR_EINVAL);
    io_write(cj, "{\"n_head\": 3}", 13);
    cr_assert_eq(tsr_gpt2_read_config(path, &cfg), TSR_EINVAL, "64 channels, 3 heads");
    cr_assert_not_null(strstr(tsr_error_message(), "not divisible"), "%s", tsr_error_message());

    snap_free(sa);
    tsr_gpt2_free(a), tsr_gpt2_free(b);
    io_rmtree(dir);
    stop();
}

static void expect_load_fails(tsr_gpt2_t *m, const snap_t *before, const char *path, int want,
                              const char *needle)
{
    int rc = tsr_gpt2_load(m, path);
    cr_assert_eq(rc, want, "%s: rc %d (%s)", needle, rc, tsr_error_message());
    cr_assert_not_null(strstr(tsr_error_message(), needle), "\"%s\" lacks \"%s\"",
                       tsr_error_message(), needle);
    expect_model(m, TSR_GPT2_PARAM, before, needle);
}

Test(checkpoint, bad_files_leave_the_model_unchanged)
{
    start();
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "bad.safetensors");
    tsr_gpt2_t *a = tiny(1), *b = tiny(2);
    snap_t *sa = snapshot(a, TSR_GPT2_PARAM), *sb = snapshot(b, TSR_GPT2_PARAM);

    expect_load_fails(b, sb, path, TSR_EIO, "cannot open");
    write_variant(path, sa, &(variant_t){.skip = "h.1.mlp.c_fc.bias"});
    expect_load_fails(b, sb, path, TSR_EINVAL, "missing tensor h.1.mlp.c_fc.bias");
    write_variant(path, sa, &(variant_t){.transpose = "h.0.attn.c_attn.weight"});
    expect_load_fails(b, sb, path, TSR_EINVAL,
                      "h.0.attn.c_attn.weight has shape [192, 64], expected [64, 192]");
    write_variant(path, sa, &(variant_t){.extra = "h.2.ln_1.weight"});
    expect_load_fails(b, sb, path, TSR_EINVAL, "unexpected tensor h.2.ln_1.weight");
    write_variant(path, sa, &(variant_t){.as_i32 = "ln_f.bias"});
    expect_load_fails(b, sb, path, TSR_EINVAL, "ln_f.bias has dtype I32");
    write_variant(path, sa, &(variant_t){.both = 1});
    expect_load_fails(b, sb, path, TSR_EINVAL, "same parameter");

    /* cut inside the last tensor's data */
    write_variant(path, sa, &(variant_t){0});
    size_t n = 0;
    free(io_read(path, &n));
    cr_assert_eq(truncate(path, (off_t)(n - 10)), 0);
    expect_load_fails(b, sb, path, TSR_EINVAL, "beyond the data area");
    cr_assert_eq(tsr_gpt2_read_config(path, &(tsr_gpt2_config_t){0}), TSR_EINVAL);

    /* a 2-layer checkpoint into a 1-layer model, and the other way round */
    tsr_gpt2_t *one = tiny_layers(1, 3);
    snap_t *s1 = snapshot(one, TSR_GPT2_PARAM);
    write_variant(path, sa, &(variant_t){0});
    expect_load_fails(one, s1, path, TSR_EINVAL, "unexpected tensor h.1.");
    write_variant(path, s1, &(variant_t){0});
    expect_load_fails(b, sb, path, TSR_EINVAL, "missing tensor h.1.");
    snap_free(s1);
    tsr_gpt2_free(one);

    snap_free(sa), snap_free(sb);
    tsr_gpt2_free(a), tsr_gpt2_free(b);
    io_rmtree(dir);
    stop();
}

static void expect_config_fails(const char *path, const char *needle)
{
    tsr_gpt2_config_t cfg = {.layers = 99};
    int rc = tsr_gpt2_read_config(path, &cfg);
    cr_assert_eq(rc, TSR_EINVAL, "%s: rc %d (%s)", needle, rc, tsr_error_message());
    cr_assert_not_null(strstr(tsr_error_message(), needle), "\"%s\" lacks \"%s\"",
                       tsr_error_message(), needle);
    cr_assert_eq(cfg.layers, 0, "cleared on error");
}

Test(checkpoint, read_config_errors)
{
    start();
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "c.safetensors");
    tsr_gpt2_t *a = tiny(1);
    snap_t *sa = snapshot(a, TSR_GPT2_PARAM);
    write_variant(path, sa, &(variant_t){.skip = "wte.weight"});
    expect_config_fails(path, "missing tensor wte.weight");
    write_variant(path, sa, &(variant_t){.skip = "wpe.weight"});
    expect_config_fails(path, "missing tensor wpe.weight");
    write_variant(path, sa, &(variant_t){.skip = "h.1.ln_1.weight"});
    expect_config_fails(path, "layer 1 but h.1.ln_1.weight is missing");
    write_variant(path, sa, &(variant_t){.skip = "h.0.ln_1.weight"});
    expect_config_fails(path, "missing tensor h.0.ln_1.weight");
    write_variant(path, sa, &(variant_t){.skip = "ln_f.bias"});
    expect_config_fails(path, "missing tensor ln_f.bias");
    write_variant(path, sa, &(variant_t){.transpose = "h.1.mlp.c_proj.weight"});
    expect_config_fails(path, "h.1.mlp.c_proj.weight has shape [64, 256], expected [256, 64]");
    write_variant(path, sa, &(variant_t){.n_head = "5"});
    expect_config_fails(path, "64 channels are not divisible by 5 heads");
    write_variant(path, sa, &(variant_t){.n_head = "four"});
    expect_config_fails(path, "n_head");
    write_variant(path, sa, &(variant_t){.n_head = "8"});
    tsr_gpt2_config_t cfg;
    cr_assert_eq(tsr_gpt2_read_config(path, &cfg), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(cfg.heads, 8);
    snap_free(sa);
    tsr_gpt2_free(a);
    io_rmtree(dir);
    stop();
}

/* ---- optimizer state ---------------------------------------------------- */

static void random_moments(tsr_gpt2_t *m, uint32_t seed)
{
    for (int i = 0; i < tsr_gpt2_param_count(m); i++) {
        const char *name = tsr_gpt2_param_name(m, i);
        size_t n;
        cr_assert_eq(tsr_gpt2_get(m, name, TSR_GPT2_ADAM_M, NULL, &n), TSR_OK);
        float *x = malloc(n * sizeof *x);
        for (int which = TSR_GPT2_ADAM_M; which <= TSR_GPT2_ADAM_V; which++) {
            for (size_t k = 0; k < n; k++) {
                seed = seed * 1664525u + 1013904223u;
                x[k] = (float)(seed >> 8) / 16777216.0f - (which == TSR_GPT2_ADAM_M ? 0.5f : 0);
            }
            cr_assert_eq(tsr_gpt2_set(m, name, which, x, n), TSR_OK);
        }
        free(x);
    }
}

Test(checkpoint, state_round_trip)
{
    start();
    char dir[256], path[512], ck[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "state.safetensors");
    io_join(ck, sizeof ck, dir, "model.safetensors");
    tsr_gpt2_t *a = tiny(1), *b = tiny(2);
    random_moments(a, 5);
    random_moments(b, 6);
    cr_assert_eq(tsr__gpt2_set_steps(a, 7), TSR_OK);
    cr_assert_eq(tsr_gpt2_save_state(a, path, "shard=3 pos=12345 \"quoted\"\n"), TSR_OK, "%s",
                 tsr_error_message());
    snap_t *ma = snapshot(a, TSR_GPT2_ADAM_M), *va = snapshot(a, TSR_GPT2_ADAM_V);
    snap_t *mb = snapshot(b, TSR_GPT2_ADAM_M), *vb = snapshot(b, TSR_GPT2_ADAM_V);
    snap_t *pb = snapshot(b, TSR_GPT2_PARAM);

    /* too small for the extra text: nothing changes */
    char small[8];
    cr_assert_eq(tsr_gpt2_load_state(b, path, small, sizeof small), TSR_EINVAL);
    cr_assert_not_null(strstr(tsr_error_message(), "does not fit"), "%s", tsr_error_message());
    cr_assert_eq(tsr_gpt2_steps_done(b), 0);
    expect_model(b, TSR_GPT2_ADAM_M, mb, "m after a refused load");
    expect_model(b, TSR_GPT2_ADAM_V, vb, "v after a refused load");

    char extra[128];
    cr_assert_eq(tsr_gpt2_load_state(b, path, extra, sizeof extra), TSR_OK, "%s",
                 tsr_error_message());
    cr_assert_str_eq(extra, "shard=3 pos=12345 \"quoted\"\n");
    cr_assert_eq(tsr_gpt2_steps_done(b), 7);
    expect_model(b, TSR_GPT2_ADAM_M, ma, "m");
    expect_model(b, TSR_GPT2_ADAM_V, va, "v");
    expect_model(b, TSR_GPT2_PARAM, pb, "parameters untouched by load_state");

    /* NULL extra is fine, on both sides */
    cr_assert_eq(tsr_gpt2_save_state(a, path, NULL), TSR_OK);
    cr_assert_eq(tsr_gpt2_load_state(b, path, NULL, 0), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_gpt2_load_state(b, path, extra, sizeof extra), TSR_OK);
    cr_assert_str_eq(extra, "");

    /* a checkpoint is no state file */
    cr_assert_eq(tsr_gpt2_save(a, ck), TSR_OK);
    cr_assert_eq(tsr_gpt2_load_state(b, ck, NULL, 0), TSR_EINVAL);
    cr_assert_not_null(strstr(tsr_error_message(), "unexpected tensor"), "%s",
                       tsr_error_message());
    io_join(ck, sizeof ck, dir, "absent.safetensors");
    cr_assert_eq(tsr_gpt2_load_state(b, ck, NULL, 0), TSR_EIO);

    snap_free(ma), snap_free(va), snap_free(mb), snap_free(vb), snap_free(pb);
    tsr_gpt2_free(a), tsr_gpt2_free(b);
    io_rmtree(dir);
    stop();
}

Test(checkpoint, state_missing_moment_or_step)
{
    start();
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "s.safetensors");
    tsr_gpt2_t *a = tiny(1);
    random_moments(a, 9);
    snap_t *ma = snapshot(a, TSR_GPT2_ADAM_M);
    /* m.* for every parameter but no v.*, and no step */
    tsr__st_writer_t *w;
    cr_assert_eq(tsr__st_writer_create(&w), TSR_OK);
    for (int i = 0; i < ma->n; i++) {
        char name[128];
        uint64_t shape[2];
        int ndim;
        snprintf(name, sizeof name, "m.%s", ma->names[i]);
        hf_shape(ma->names[i], shape, &ndim);
        cr_assert_eq(tsr__st_writer_add(w, name, TSR__ST_F32, ndim, shape, ma->v[i]), TSR_OK);
    }
    cr_assert_eq(tsr__st_writer_write(w, path), TSR_OK);
    tsr__st_writer_free(w);
    tsr_gpt2_t *b = tiny(2);
    cr_assert_eq(tsr_gpt2_load_state(b, path, NULL, 0), TSR_EINVAL);
    cr_assert_not_null(strstr(tsr_error_message(), "missing tensor v.wte.weight"), "%s",
                       tsr_error_message());
    cr_assert_eq(tsr_gpt2_save_state(a, path, "x"), TSR_OK);
    snap_free(ma);
    tsr_gpt2_free(a), tsr_gpt2_free(b);
    io_rmtree(dir);
    stop();
}
