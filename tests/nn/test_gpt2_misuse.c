/* tests/nn/test_gpt2_misuse.c — the GPT-2 model API under misuse: NULL,
 * freed and never-created models, double free, a model kept across
 * tsr_shutdown / tsr_init, logits before any forward, and configurations
 * whose sizes overflow (every field up to INT_MAX), a bad precision. Each
 * case must give an error code and a message, never a crash, a leak or an
 * out-of-bounds access (the suite runs under ASan + UBSan too). */
#include <criterion/criterion.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/gpt2.h>

#define OK(call) cr_assert_eq((call), TSR_OK, "%s: %s", #call, tsr_error_message())
/* call returns status and the message names `needle` */
#define FAILS(call, status, needle)                                                      \
    do {                                                                                 \
        int rc_ = (call);                                                                \
        cr_assert_eq(rc_, (status), "%s: %d, not %d (%s)", #call, rc_, (status),         \
                     tsr_error_message());                                               \
        cr_assert_not_null(strstr(tsr_error_message(), (needle)), "%s: \"%s\" lacks \"%s\"", \
                           #call, tsr_error_message(), (needle));                        \
    } while (0)

enum { V = 50, CTX = 16, B = 2, T = 8 };

static void rt_start(void)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 2;
    cfg.bind = 0;
    OK(tsr_init(&cfg));
}

static tsr_gpt2_config_t tiny(void)
{
    tsr_gpt2_config_t c = {.vocab_size = V, .context = CTX, .layers = 1, .heads = 2,
                           .channels = 16};
    return c;
}

static void tokens(int32_t *tok, int32_t *tgt)
{
    for (int i = 0; i < B * T; i++) {
        tok[i] = (7 * i + 3) % V;
        tgt[i] = (7 * i + 10) % V;
    }
}

/* A forward with targets on a fresh model from seed 1: its loss. */
static float fresh_loss(void)
{
    tsr_gpt2_config_t c = tiny();
    tsr_gpt2_t *m;
    int32_t tok[B * T], tgt[B * T];
    float loss;
    tokens(tok, tgt);
    OK(tsr_gpt2_create(&m, &c, B, T));
    OK(tsr_gpt2_init_weights(m, 1));
    OK(tsr_gpt2_forward(m, tok, tgt, &loss));
    OK(tsr_gpt2_free(m));
    return loss;
}

/* Every call that takes a model, given `m`, returns `status` naming `needle`;
 * the getters answer 0 / NULL. */
static void every_call_fails(tsr_gpt2_t *m, int status, const char *needle)
{
    int32_t tok[B * T], tgt[B * T];
    float x[V], loss, norm;
    size_t n = 0;
    tokens(tok, tgt);
    FAILS(tsr_gpt2_init_weights(m, 1), status, needle);
    FAILS(tsr_gpt2_forward(m, tok, tgt, &loss), status, needle);
    FAILS(tsr_gpt2_loss(m, &loss), status, needle);
    FAILS(tsr_gpt2_logits(m, 0, 0, x), status, needle);
    FAILS(tsr_gpt2_backward(m, 1.0f), status, needle);
    FAILS(tsr_gpt2_zero_grad(m), status, needle);
    FAILS(tsr_gpt2_step(m, NULL, 1e-3f, &norm), status, needle);
    FAILS(tsr_gpt2_get(m, "ln_f.bias", TSR_GPT2_PARAM, NULL, &n), status, needle);
    FAILS(tsr_gpt2_set(m, "ln_f.bias", TSR_GPT2_PARAM, x, 16), status, needle);
}

/* The checkpoint calls refuse a model that is not live before reading it
 * (the path need not exist: the model is checked first). */
static void io_calls_fail(tsr_gpt2_t *m, const char *needle)
{
    const char *path = "/nonexistent/gpt2_misuse.safetensors";
    char extra[16];
    FAILS(tsr_gpt2_save(m, path), TSR_EINVAL, needle);
    FAILS(tsr_gpt2_save_state(m, path, ""), TSR_EINVAL, needle);
    FAILS(tsr_gpt2_load(m, path), TSR_EINVAL, needle);
    FAILS(tsr_gpt2_load_state(m, path, extra, sizeof extra), TSR_EINVAL, needle);
}

Test(gpt2_misuse, null_model_is_einval_everywhere)
{
    rt_start();
    every_call_fails(NULL, TSR_EINVAL, "NULL");
    io_calls_fail(NULL, "NULL");
    cr_assert_null(tsr_gpt2_config(NULL));
    cr_assert_eq(tsr_gpt2_num_params(NULL), 0);
    cr_assert_eq(tsr_gpt2_param_count(NULL), 0);
    cr_assert_null(tsr_gpt2_param_name(NULL, 0));
    cr_assert_eq(tsr_gpt2_steps_done(NULL), 0);
    OK(tsr_gpt2_free(NULL));
    tsr_gpt2_config_default(NULL);
    tsr_adamw_config_default(NULL);
    tsr_gpt2_config_t c = tiny();
    tsr_gpt2_t *m = (tsr_gpt2_t *)&c;
    FAILS(tsr_gpt2_create(NULL, &c, B, T), TSR_EINVAL, "NULL");
    FAILS(tsr_gpt2_create(&m, NULL, B, T), TSR_EINVAL, "NULL");
    cr_assert_null(m, "a failed create leaves *out NULL");
    OK(tsr_shutdown());
}

Test(gpt2_misuse, double_free_and_foreign_pointers_are_einval)
{
    rt_start();
    tsr_gpt2_config_t c = tiny();
    tsr_gpt2_t *m, *other;
    OK(tsr_gpt2_create(&m, &c, B, T));
    OK(tsr_gpt2_create(&other, &c, B, T));
    OK(tsr_gpt2_free(m));
    FAILS(tsr_gpt2_free(m), TSR_EINVAL, "not a live model");
    /* a freed model: refused before its memory is read */
    every_call_fails(m, TSR_EINVAL, "not a live model");
    io_calls_fail(m, "not a live model");
    cr_assert_null(tsr_gpt2_config(m));
    cr_assert_eq(tsr_gpt2_num_params(m), 0);
    cr_assert_eq(tsr_gpt2_param_count(m), 0);
    cr_assert_null(tsr_gpt2_param_name(m, 0));
    cr_assert_eq(tsr_gpt2_steps_done(m), 0);
    /* a pointer that never was a model */
    tsr_gpt2_t *foreign = (tsr_gpt2_t *)&c;
    FAILS(tsr_gpt2_free(foreign), TSR_EINVAL, "not a live model");
    every_call_fails(foreign, TSR_EINVAL, "not a live model");
    io_calls_fail(foreign, "not a live model");
    /* the other model is untouched by all of this */
    cr_assert_eq(tsr_gpt2_param_count(other), 4 + 12 * c.layers);
    OK(tsr_gpt2_init_weights(other, 1));
    int32_t tok[B * T], tgt[B * T];
    float loss;
    tokens(tok, tgt);
    OK(tsr_gpt2_forward(other, tok, tgt, &loss));
    cr_assert(fabsf(loss - logf(V)) < 0.5f, "initial loss %g should be near ln V", loss);
    OK(tsr_gpt2_free(other));
    FAILS(tsr_gpt2_free(other), TSR_EINVAL, "not a live model");
    OK(tsr_shutdown());
}

Test(gpt2_misuse, logits_need_a_forward)
{
    rt_start();
    tsr_gpt2_config_t c = tiny();
    tsr_gpt2_t *m;
    int32_t tok[B * T], tgt[B * T];
    float z[V], loss;
    tokens(tok, tgt);
    OK(tsr_gpt2_create(&m, &c, B, T));
    OK(tsr_gpt2_init_weights(m, 1));
    FAILS(tsr_gpt2_logits(m, 0, 0, z), TSR_ESTATE, "no forward has run");
    OK(tsr_gpt2_forward(m, tok, tgt, &loss));
    OK(tsr_gpt2_logits(m, 1, T - 1, z));
    /* the logits are those of the loss: -log softmax(z)[target], recomputed
     * in double from them, lies within the batch's range of losses */
    double mx = -INFINITY, s = 0.0;
    for (int v = 0; v < V; v++)
        mx = fmax(mx, z[v]);
    for (int v = 0; v < V; v++)
        s += exp(z[v] - mx);
    double tok_loss = log(s) + mx - z[tgt[B * T - 1]];
    cr_assert(fabs(tok_loss - loss) < 0.5, "token loss %g far from the mean %g", tok_loss,
              (double)loss);
    FAILS(tsr_gpt2_logits(m, B, 0, z), TSR_EINVAL, "outside");
    FAILS(tsr_gpt2_logits(m, 0, 0, NULL), TSR_EINVAL, "NULL");
    OK(tsr_gpt2_backward(m, 1.0f));
    FAILS(tsr_gpt2_logits(m, 0, 0, z), TSR_ESTATE, "backward");
    OK(tsr_gpt2_free(m));
    OK(tsr_shutdown());
}

Test(gpt2_misuse, a_model_kept_across_shutdown_and_init_fails_cleanly)
{
    rt_start();
    float before = fresh_loss();
    tsr_gpt2_config_t c = tiny();
    tsr_gpt2_t *m, *later;
    OK(tsr_gpt2_create(&m, &c, B, T));
    OK(tsr_gpt2_init_weights(m, 1));
    OK(tsr_shutdown());
    /* no runtime at all */
    every_call_fails(m, TSR_ESTATE, "shut down");
    rt_start();
    /* another runtime: m's tiles are stale handles of the first one */
    every_call_fails(m, TSR_ESTATE, "shut down");
    /* host-side facts still answer */
    cr_assert_not_null(tsr_gpt2_config(m));
    cr_assert_eq(tsr_gpt2_config(m)->layers, c.layers);
    cr_assert_eq(tsr_gpt2_param_count(m), 4 + 12 * c.layers);
    cr_assert_str_eq(tsr_gpt2_param_name(m, 0), "wte.weight");
    /* a model of the new runtime works and computes what the first one did */
    OK(tsr_gpt2_create(&later, &c, B, T));
    OK(tsr_gpt2_free(m)); /* frees host memory only, among live handles */
    FAILS(tsr_gpt2_free(m), TSR_EINVAL, "not a live model");
    OK(tsr_gpt2_init_weights(later, 1));
    int32_t tok[B * T], tgt[B * T];
    float loss;
    tokens(tok, tgt);
    OK(tsr_gpt2_forward(later, tok, tgt, &loss));
    cr_assert_eq(loss, before, "loss %.9g under the second runtime, %.9g under the first", loss,
                 before);
    OK(tsr_gpt2_free(later));
    OK(tsr_shutdown());
}

Test(gpt2_misuse, a_model_freed_after_shutdown_frees_its_host_memory)
{
    rt_start();
    tsr_gpt2_config_t c = tiny();
    tsr_gpt2_t *m;
    OK(tsr_gpt2_create(&m, &c, B, T));
    OK(tsr_shutdown());
    OK(tsr_gpt2_free(m)); /* LeakSanitizer: nothing of it remains */
    FAILS(tsr_gpt2_create(&m, &c, B, T), TSR_ESTATE, "tsr_init");
    cr_assert_null(m);
}

/* create(cfg, batch, seq) fails with TSR_EINVAL naming `field`, at once. */
static void huge(tsr_gpt2_config_t c, int batch, int seq, const char *field)
{
    tsr_gpt2_t *m = (tsr_gpt2_t *)&c;
    int rc = tsr_gpt2_create(&m, &c, batch, seq);
    cr_assert_eq(rc, TSR_EINVAL, "%s: %d (%s)", field, rc, tsr_error_message());
    cr_assert_not_null(strstr(tsr_error_message(), field), "\"%s\" lacks \"%s\"",
                       tsr_error_message(), field);
    cr_assert_null(m);
    cr_log_info("%s: %s", field, tsr_error_message());
}

Test(gpt2_misuse, sizes_up_to_int_max_fail_cleanly)
{
    rt_start();
    tsr_gpt2_config_t c;
    c = tiny(), c.vocab_size = INT_MAX;
    huge(c, B, T, "vocab_size");
    c = tiny(), c.vocab_size = INT_MAX, c.tile_vocab = INT_MAX;
    huge(c, B, T, "tile_vocab");
    c = tiny(), c.context = INT_MAX;
    huge(c, B, T, "context");
    c = tiny(), c.layers = INT_MAX;
    huge(c, B, T, "layers");
    c = tiny(), c.channels = INT_MAX, c.heads = INT_MAX;
    huge(c, B, T, "channels");
    c = tiny(), c.channels = INT_MAX, c.heads = 1;
    huge(c, B, T, "channels");
    c = tiny(), c.channels = 1 << 29, c.heads = 1 << 21; /* 4 x channels = 2^31 */
    huge(c, 1, 1, "channels");
    c = tiny(), c.heads = INT_MAX;
    huge(c, B, T, "heads");
    c = tiny();
    huge(c, INT_MAX, T, "batch");
    c = tiny(), c.context = INT_MAX;
    huge(c, 1, INT_MAX, "seq_len");
    huge(c, INT_MAX, INT_MAX, "batch");
    c = tiny(), c.tile_tokens = INT_MAX;
    huge(c, B, T, "tile_tokens");
    c = (tsr_gpt2_config_t){INT_MAX, INT_MAX, INT_MAX, INT_MAX, INT_MAX, INT_MAX, INT_MAX,
                            INT_MAX, 0, 0, 0, 0, 0, 0};
    huge(c, 1, 1, "tile_tokens");
    c.tile_tokens = 0;
    huge(c, 1, 1, "channels");
    c = (tsr_gpt2_config_t){INT_MIN, INT_MIN, INT_MIN, INT_MIN, INT_MIN, 0, 0, 0, 0, 0, 0, 0, 0,
                            0};
    huge(c, INT_MIN, INT_MIN, "positive");
    /* channel tiles: whole heads (of 8) dividing the 16 channels */
    static const int bad_tc[] = {-1, 4, 12, 17, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof bad_tc / sizeof *bad_tc; i++) {
        c = tiny(), c.tile_channels = bad_tc[i];
        huge(c, B, T, "tile_channels");
    }
    /* a hidden tile larger than the 4C rows is one tile of them: a valid model */
    tsr_gpt2_t *m;
    c = tiny(), c.tile_hidden = INT_MAX, c.tile_vocab = INT_MAX;
    OK(tsr_gpt2_create(&m, &c, B, T));
    float loss;
    int32_t tok[B * T], tgt[B * T];
    tokens(tok, tgt);
    OK(tsr_gpt2_init_weights(m, 1));
    OK(tsr_gpt2_forward(m, tok, tgt, &loss));
    cr_assert(fabsf(loss - logf(V)) < 0.5f, "initial loss %g should be near ln V", loss);
    OK(tsr_gpt2_free(m));
    OK(tsr_shutdown());
}

/* The precision switch takes TSR_GPT2_FP32 or TSR_GPT2_BF16 only; a bf16
 * model with sizes that overflow fails as cleanly as an fp32 one. */
Test(gpt2_misuse, a_bad_precision_is_einval)
{
    rt_start();
    tsr_gpt2_t *m = (tsr_gpt2_t *)&m;
    const int bad[] = {2, -1, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tsr_gpt2_config_t c = tiny();
        c.precision = bad[i];
        FAILS(tsr_gpt2_create(&m, &c, B, T), TSR_EINVAL, "precision");
        cr_assert_null(m, "no model for precision %d", bad[i]);
    }
    tsr_gpt2_config_t c = tiny();
    c.precision = TSR_GPT2_BF16, c.vocab_size = INT_MAX;
    huge(c, B, T, "vocab_size");
    c = tiny(), c.precision = TSR_GPT2_BF16;
    OK(tsr_gpt2_create(&m, &c, B, T));
    float loss;
    int32_t tok[B * T], tgt[B * T];
    tokens(tok, tgt);
    OK(tsr_gpt2_init_weights(m, 1));
    OK(tsr_gpt2_forward(m, tok, tgt, &loss));
    cr_assert(fabsf(loss - logf(V)) < 0.5f, "initial bf16 loss %g should be near ln V", loss);
    OK(tsr_gpt2_free(m));
    OK(tsr_shutdown());
}
