/* Deterministic mode (tsr_config_t.deterministic, TESSERA_DETERMINISTIC):
 * GPT-2 trained a few AdamW steps ends with the same parameters, bit for
 * bit, on one CPU worker, on two, again on two, and on two small simulated
 * accelerators that evict and fetch back the training state — the
 * accumulations of the gradients (COMMUTE) and of the norm run in
 * submission order whatever runs them. The reference is the one-worker
 * run: a sequential execution of the same task graph. */
#include <criterion/criterion.h>
#include <tessera/gpt2.h>
#include <tessera/tessera.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define OK(x) cr_assert_eq((x), TSR_OK, "%s: %s", #x, tsr_error_message())

enum { V = 300, CTX = 64, B = 2, T = 32, STEPS = 3 };

typedef struct {
    float *v;  /* every parameter, in checkpoint order */
    size_t n;
    float loss[STEPS];
} run_t;

static void train(int ncpu, int nsim, size_t sim_mem, int deterministic, run_t *out)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = ncpu;
    cfg.bind = 0;
    cfg.nsim = nsim;
    cfg.sim_mem = sim_mem;
    cfg.ncuda = 0;
    cfg.deterministic = deterministic;
    OK(tsr_init(&cfg));
    /* fixed tiles: the derived ones depend on the worker count */
    tsr_gpt2_config_t c = {.vocab_size = V, .context = CTX, .layers = 2, .heads = 4,
                           .channels = 64, .tile_tokens = 16, .tile_vocab = 128,
                           .tile_hidden = 96};
    tsr_gpt2_t *m;
    OK(tsr_gpt2_create(&m, &c, B, T));
    OK(tsr_gpt2_init_weights(m, 5));
    int32_t tok[B * T], tgt[B * T];
    unsigned s = 77;
    for (int i = 0; i < B * T; i++) {
        s = s * 1103515245u + 12345u;
        tok[i] = (int)((s >> 8) % V);
        tgt[i] = (int)((s >> 4) % V);
    }
    tsr_adamw_config_t opt;
    tsr_adamw_config_default(&opt);
    for (int k = 0; k < STEPS; k++) {
        OK(tsr_gpt2_zero_grad(m));
        OK(tsr_gpt2_forward(m, tok, tgt, &out->loss[k]));
        OK(tsr_gpt2_backward(m, 1.0f));
        OK(tsr_gpt2_step(m, &opt, 1e-3f, NULL));
    }
    OK(tsr_wait_all());
    out->n = 0;
    int np = tsr_gpt2_param_count(m);
    for (int i = 0; i < np; i++) {
        size_t n = 0;
        OK(tsr_gpt2_get(m, tsr_gpt2_param_name(m, i), TSR_GPT2_PARAM, NULL, &n));
        out->n += n;
    }
    out->v = malloc(out->n * sizeof *out->v);
    cr_assert(out->v);
    size_t at = 0;
    for (int i = 0; i < np; i++) {
        size_t n = out->n - at;
        OK(tsr_gpt2_get(m, tsr_gpt2_param_name(m, i), TSR_GPT2_PARAM, out->v + at, &n));
        at += n;
    }
    tsr_gpt2_free(m);
    OK(tsr_shutdown());
}

static size_t differing(const run_t *a, const run_t *b)
{
    cr_assert_eq(a->n, b->n);
    size_t d = 0;
    for (size_t i = 0; i < a->n; i++)
        d += memcmp(&a->v[i], &b->v[i], sizeof(float)) != 0;
    return d;
}

Test(deterministic, the_same_bits_on_any_workers, .timeout = 240)
{
    run_t one, two, again, sim;
    train(1, 0, 0, 1, &one);
    train(2, 0, 0, 1, &two);
    train(2, 0, 0, 1, &again);
    /* two accelerators of 256 KiB, no CPU worker: the training state
     * (~2 MB) moves in and out during every step */
    train(-1, 2, 256 << 10, 1, &sim);
    const run_t *runs[] = {&two, &again, &sim};
    const char *names[] = {"2 CPU workers", "2 CPU workers again", "2 simulated accelerators"};
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(differing(&one, runs[r]), 0, "%s: %zu of %zu parameters differ from the "
                     "one-worker run", names[r], differing(&one, runs[r]), one.n);
        for (int k = 0; k < STEPS; k++)
            cr_assert_eq(memcmp(&one.loss[k], &runs[r]->loss[k], sizeof(float)), 0,
                         "%s: step %d loss %.9g vs %.9g", names[r], k, runs[r]->loss[k],
                         one.loss[k]);
    }
    cr_assert_lt(one.loss[STEPS - 1], one.loss[0], "it trains");
    free(one.v), free(two.v), free(again.v), free(sim.v);
}
