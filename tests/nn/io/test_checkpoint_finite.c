/* Non-finite values in checkpoints and state files of a tiny GPT-2
 * (vocabulary 300, context 64, 2 layers, 4 heads, 64 channels): a NaN or an
 * infinity anywhere — the first tensor, the last, one element in the middle,
 * an AdamW moment — makes the load fail with TSR_EINVAL naming the tensor,
 * and leaves every parameter and moment exactly as it was (compared value
 * by value with a copy taken before). */
#include <math.h>

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

static tsr_gpt2_t *tiny(uint64_t seed)
{
    tsr_gpt2_config_t c = {.vocab_size = V, .context = CTX, .layers = L, .heads = H,
                           .channels = C};
    tsr_gpt2_t *m;
    cr_assert_eq(tsr_gpt2_create(&m, &c, 1, 16), TSR_OK, "create: %s", tsr_error_message());
    cr_assert_eq(tsr_gpt2_init_weights(m, seed), TSR_OK);
    return m;
}

/* Every value of part `which` of the model, concatenated in parameter order. */
static float *values(tsr_gpt2_t *m, int which, size_t *total)
{
    *total = 0;
    for (int i = 0; i < tsr_gpt2_param_count(m); i++) {
        size_t n = 0;
        cr_assert_eq(tsr_gpt2_get(m, tsr_gpt2_param_name(m, i), which, NULL, &n), TSR_OK);
        *total += n;
    }
    float *v = malloc(*total * sizeof *v);
    cr_assert_not_null(v);
    size_t at = 0;
    for (int i = 0; i < tsr_gpt2_param_count(m); i++) {
        size_t n = *total - at;
        cr_assert_eq(tsr_gpt2_get(m, tsr_gpt2_param_name(m, i), which, v + at, &n), TSR_OK);
        at += n;
    }
    return v;
}

/* Sets element `at` of parameter part `which` of `name` to x. */
static void poke(tsr_gpt2_t *m, const char *name, int which, size_t at, float x)
{
    size_t n = 0;
    cr_assert_eq(tsr_gpt2_get(m, name, which, NULL, &n), TSR_OK, "%s", name);
    cr_assert_lt(at, n);
    float *v = malloc(n * sizeof *v);
    cr_assert_eq(tsr_gpt2_get(m, name, which, v, &n), TSR_OK);
    v[at] = x;
    cr_assert_eq(tsr_gpt2_set(m, name, which, v, n), TSR_OK);
    free(v);
}

/* The premise of each case: the file really holds the bad value there
 * (read back through the format's reader, not through the model). */
static void expect_in_file(const char *path, const char *tensor, size_t at, int want_nan)
{
    tsr__st_reader_t *r;
    cr_assert_eq(tsr__st_open(&r, path), TSR_OK, "%s", tsr_error_message());
    const tsr__st_tensor_t *t = tsr__st_find(r, tensor);
    cr_assert_not_null(t, "%s in %s", tensor, path);
    float *v = malloc((size_t)t->numel * sizeof *v);
    cr_assert_eq(tsr__st_read_f32(r, t, v, (size_t)t->numel), TSR_OK);
    cr_assert(want_nan ? isnan(v[at]) : isinf(v[at]), "%s[%zu] is %g", tensor, at,
              (double)v[at]);
    free(v);
    tsr__st_close(r);
}

/* The load fails with TSR_EINVAL, the message names the tensor, and parts
 * PARAM, ADAM_M and ADAM_V of m hold exactly what they held before. */
static void expect_rejected(tsr_gpt2_t *m, const char *path, int state, const char *tensor)
{
    size_t n[3], n2;
    static const int parts[3] = {TSR_GPT2_PARAM, TSR_GPT2_ADAM_M, TSR_GPT2_ADAM_V};
    float *before[3];
    for (int p = 0; p < 3; p++)
        before[p] = values(m, parts[p], &n[p]);
    int steps = tsr_gpt2_steps_done(m);
    int rc = state ? tsr_gpt2_load_state(m, path, NULL, 0) : tsr_gpt2_load(m, path);
    cr_assert_eq(rc, TSR_EINVAL, "%s: rc %d (%s)", tensor, rc, tsr_error_message());
    char needle[128];
    snprintf(needle, sizeof needle, "tensor %s holds", tensor);
    cr_assert_not_null(strstr(tsr_error_message(), needle), "\"%s\" lacks \"%s\"",
                       tsr_error_message(), needle);
    cr_log_info("%s", tsr_error_message());
    for (int p = 0; p < 3; p++) {
        float *after = values(m, parts[p], &n2);
        cr_assert_eq(n2, n[p]);
        cr_assert_eq(memcmp(after, before[p], n[p] * sizeof(float)), 0,
                     "part %d changed by a rejected load of %s", parts[p], tensor);
        free(after), free(before[p]);
    }
    cr_assert_eq(tsr_gpt2_steps_done(m), steps);
}

Test(checkpoint_finite, non_finite_weights_are_rejected_by_name)
{
    start();
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "model.safetensors");
    tsr_gpt2_t *src = tiny(1), *dst = tiny(2);
    static const struct {
        const char *tensor;
        size_t at;
        float x;
    } cases[] = {
        {"wte.weight", 0, NAN},            /* the first tensor, first element */
        {"h.1.mlp.c_fc.bias", 77, INFINITY}, /* one element in the middle */
        {"h.0.attn.c_attn.weight", 64 * 192 - 1, -INFINITY},
        {"ln_f.bias", C - 1, NAN},         /* the last tensor, last element */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t n = 0;
        float *good = values(src, TSR_GPT2_PARAM, &n);
        poke(src, cases[k].tensor, TSR_GPT2_PARAM, cases[k].at, cases[k].x);
        cr_assert_eq(tsr_gpt2_save(src, path), TSR_OK, "%s", tsr_error_message());
        expect_in_file(path, cases[k].tensor, cases[k].at, isnan(cases[k].x));
        expect_rejected(dst, path, 0, cases[k].tensor);
        /* restore src, and check that the same file without the bad value loads */
        size_t at = 0;
        for (int i = 0; i < tsr_gpt2_param_count(src); i++) {
            size_t pn = n - at;
            const char *name = tsr_gpt2_param_name(src, i);
            cr_assert_eq(tsr_gpt2_get(src, name, TSR_GPT2_PARAM, NULL, &pn), TSR_OK);
            cr_assert_eq(tsr_gpt2_set(src, name, TSR_GPT2_PARAM, good + at, pn), TSR_OK);
            at += pn;
        }
        cr_assert_eq(tsr_gpt2_save(src, path), TSR_OK);
        cr_assert_eq(tsr_gpt2_load(dst, path), TSR_OK, "%s", tsr_error_message());
        size_t n2;
        float *got = values(dst, TSR_GPT2_PARAM, &n2);
        cr_assert_eq(n2, n);
        cr_assert_eq(memcmp(got, good, n * sizeof(float)), 0, "the good file loads exactly");
        free(got), free(good);
        /* dst now equals src: make it differ again for the next case */
        tsr_gpt2_free(dst);
        dst = tiny(2 + k);
    }
    tsr_gpt2_free(src), tsr_gpt2_free(dst);
    io_rmtree(dir);
    cr_assert_eq(tsr_shutdown(), TSR_OK);
}

Test(checkpoint_finite, non_finite_moments_are_rejected_by_name)
{
    start();
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "train.state");
    tsr_gpt2_t *src = tiny(1), *dst = tiny(2);
    /* moments that differ between the two models, so "unchanged" means something */
    poke(dst, "wpe.weight", TSR_GPT2_ADAM_M, 5, 0.25f);
    poke(dst, "h.1.ln_2.weight", TSR_GPT2_ADAM_V, 3, 0.5f);
    poke(src, "h.1.ln_2.weight", TSR_GPT2_ADAM_V, 3, INFINITY);
    cr_assert_eq(tsr_gpt2_save_state(src, path, "x"), TSR_OK, "%s", tsr_error_message());
    expect_in_file(path, "v.h.1.ln_2.weight", 3, 0);
    expect_rejected(dst, path, 1, "v.h.1.ln_2.weight");

    poke(src, "h.1.ln_2.weight", TSR_GPT2_ADAM_V, 3, 0.0f);
    poke(src, "wpe.weight", TSR_GPT2_ADAM_M, 10, NAN);
    cr_assert_eq(tsr_gpt2_save_state(src, path, "x"), TSR_OK);
    expect_in_file(path, "m.wpe.weight", 10, 1);
    expect_rejected(dst, path, 1, "m.wpe.weight");
    tsr_gpt2_free(src), tsr_gpt2_free(dst);
    io_rmtree(dir);
    cr_assert_eq(tsr_shutdown(), TSR_OK);
}
