/* tests/nn/test_gpt2_dp.c — data parallelism and ZeRO-1 in one process:
 * the configuration's validation, and that a replica of a job of one rank
 * (this process, with or without MPI) trains exactly as a model without
 * data parallelism. The multi-rank equalities are tests/mpi/dp_*.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/gpt2.h>
#include <tessera/mpi.h>

#define OK(call) cr_assert_eq((call), TSR_OK, "%s: %s", #call, tsr_error_message())

enum { V = 300, CTX = 64, B = 2, T = 32, STEPS = 3 };

static void rt_start(void)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 1; /* one worker: the same task order in both models, bitwise results */
    cfg.bind = 0;
    OK(tsr_init(&cfg));
}

static tsr_gpt2_config_t tiny(int dp, int zero)
{
    tsr_gpt2_config_t c = {.vocab_size = V, .context = CTX, .layers = 2, .heads = 4,
                           .channels = 64, .data_parallel = dp, .zero = zero};
    return c;
}

static void batch(int32_t *tok, int32_t *tgt, int n, unsigned seed)
{
    unsigned s = seed;
    for (int i = 0; i <= n; i++) {
        s = s * 1103515245u + 12345u;
        int id = (int)((s >> 8) % V);
        if (i < n)
            tok[i] = id;
        if (i > 0)
            tgt[i - 1] = id;
    }
}

static void rejected(tsr_gpt2_config_t c, const char *words)
{
    tsr_gpt2_t *m = (tsr_gpt2_t *)1;
    cr_assert_eq(tsr_gpt2_create(&m, &c, B, T), TSR_EINVAL);
    cr_assert_null(m);
    cr_assert(strstr(tsr_error_message(), words), "message '%s' lacks '%s'",
              tsr_error_message(), words);
    cr_log_info("refused: %s", tsr_error_message());
}

Test(gpt2_dp, bad_settings_are_refused_with_their_names)
{
    rt_start();
    rejected(tiny(2, 0), "data_parallel");
    rejected(tiny(-1, 0), "data_parallel");
    rejected(tiny(1, 2), "zero");
    rejected(tiny(0, 1), "needs data_parallel = 1");
    tsr_shutdown();
}

/* Three steps with clipping and some ignored targets, the model trained
 * alone; its losses, norms, and every parameter and moment. With one rank
 * the data-parallel code submits exactly the tasks of the plain model; the
 * runtime still may run commuting accumulations in another order, so the
 * comparison allows their rounding (and AdamW's amplification of it). */
typedef struct run {
    float loss[STEPS], norm[STEPS];
    float *state;
    size_t n;
} run_t;

static void train(tsr_gpt2_config_t c, run_t *r)
{
    rt_start();
    cr_assert_eq(tsr_mpi_size(), 1, "one process is a job of one rank");
    tsr_gpt2_t *a;
    OK(tsr_gpt2_create(&a, &c, B, T));
    OK(tsr_gpt2_init_weights(a, 5));
    tsr_adamw_config_t opt;
    tsr_adamw_config_default(&opt);
    opt.grad_clip = 0.5f;
    int32_t tok[B * T], tgt[B * T];
    for (int s = 0; s < STEPS; s++) {
        batch(tok, tgt, B * T, 7u + (unsigned)s);
        for (int i = 0; i < B * T; i += 5)
            tgt[i] = -1; /* ignored */
        OK(tsr_gpt2_zero_grad(a));
        OK(tsr_gpt2_forward(a, tok, tgt, NULL));
        OK(tsr_gpt2_backward(a, 1.0f));
        OK(tsr_gpt2_step(a, &opt, 1e-3f, &r->norm[s]));
        OK(tsr_gpt2_loss(a, &r->loss[s]));
    }
    r->n = 4 * tsr_gpt2_num_params(a);
    r->state = malloc(r->n * sizeof *r->state);
    size_t at = 0;
    for (int i = 0; i < tsr_gpt2_param_count(a); i++)
        for (int which = TSR_GPT2_PARAM; which <= TSR_GPT2_ADAM_V; which++) {
            size_t n;
            OK(tsr_gpt2_get(a, tsr_gpt2_param_name(a, i), which, r->state + at, &n));
            at += n;
        }
    cr_assert_eq(at, r->n);
    OK(tsr_gpt2_free(a));
    tsr_shutdown();
}

/* Equal up to the rounding of sums in another order (fp32: 1e-5 relative,
 * 1e-6 absolute for values near zero: first moments of cancelling
 * gradients). */
static int close(float x, float y)
{
    return fabsf(x - y) <= 1e-5f * (fabsf(x) + fabsf(y)) + 1e-6f;
}

static void train_alike(tsr_gpt2_config_t ca, tsr_gpt2_config_t cb)
{
    run_t a, b;
    train(ca, &a);
    train(cb, &b);
    for (int s = 0; s < STEPS; s++) {
        cr_assert(close(a.loss[s], b.loss[s]), "step %d: loss %.9g vs %.9g", s, a.loss[s],
                  b.loss[s]);
        cr_assert(close(a.norm[s], b.norm[s]), "step %d: norm %.9g vs %.9g", s, a.norm[s],
                  b.norm[s]);
        cr_log_info("step %d: loss %.6f, norm %.6f", s, a.loss[s], a.norm[s]);
    }
    cr_assert_eq(a.n, b.n);
    for (size_t i = 0; i < a.n; i++)
        cr_assert(close(a.state[i], b.state[i]), "element %zu: %.9g vs %.9g", i, a.state[i],
                  b.state[i]);
    free(a.state);
    free(b.state);
}

Test(gpt2_dp, one_rank_data_parallel_trains_as_without)
{
    train_alike(tiny(0, 0), tiny(1, 0));
}

Test(gpt2_dp, one_rank_zero_trains_as_without)
{
    train_alike(tiny(0, 0), tiny(1, 1));
}
