/* Deterministic mode (tsr_config_t.deterministic, TESSERA_DETERMINISTIC):
 * GPT-2 trained a few AdamW steps ends with the same parameters, bit for
 * bit, on one CPU worker, on two, again on two, and on two small simulated
 * accelerators that evict and fetch back the training state — the
 * accumulations of the gradients (COMMUTE) and of the norm run in
 * submission order whatever runs them. The reference is the one-worker
 * run: a sequential execution of the same task graph.
 *
 * Unlike tiny_gpt2.h's own runs (one tile per tensor, no clipping: bitwise
 * without the mode), these use several token, vocabulary and hidden tiles
 * and clip by the global norm, so that many sums have several terms. */
#include "grad_diff.h"
#include "tiny_gpt2.h"

#include <tessera/tessera.h>

typedef struct {
    float loss[STEPS];
    float *params;
    size_t nparams;
    size_t host_homed;   /* bytes homed on the host at the end */
    int grads_zero;      /* every gradient read zero after the last step */
} run_t;

/* placement and home_min: tsr_config_t's (0, 0: the defaults). */
static void train_placed(int ncpu, int nsim, size_t sim_mem, int placement, size_t home_min,
                         run_t *out)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.placement = placement;
    cfg.home_min = home_min;
    cfg.ncpu = ncpu;
    cfg.bind = 0;
    cfg.nsim = nsim;
    cfg.sim_mem = sim_mem;
    cfg.ncuda = 0;
    cfg.deterministic = 1;
    OK(tsr_init(&cfg));
    /* fixed tiles (the derived ones depend on the worker count): two token
     * tiles, three vocabulary tiles, three hidden tiles */
    tsr_gpt2_config_t c = tiny(0, N / 2);
    c.tile_vocab = 128;
    c.tile_hidden = 96;
    tsr_gpt2_t *m;
    OK(tsr_gpt2_create(&m, &c, B, T));
    OK(tsr_gpt2_init_weights(m, 5));
    int32_t tok[N], tgt[N];
    batch(tok, tgt);
    tsr_adamw_config_t opt;
    tsr_adamw_config_default(&opt); /* global-norm clipping on */
    for (int k = 0; k < STEPS; k++) {
        OK(tsr_gpt2_zero_grad(m));
        OK(tsr_gpt2_forward(m, tok, tgt, &out->loss[k]));
        OK(tsr_gpt2_backward(m, 1.0f));
        OK(tsr_gpt2_step(m, &opt, 1e-3f, NULL));
    }
    OK(tsr_wait_all());
    out->params = read_params(m, &out->nparams);
    tsr_node_stats_t host;
    OK(tsr_memory_node_stats(0, &host));
    out->host_homed = host.homed;
    out->grads_zero = first_nonzero_grad(m, NULL) < 0;
    tsr_gpt2_free(m);
    OK(tsr_shutdown());
}

static void train(int ncpu, int nsim, size_t sim_mem, run_t *out)
{
    train_placed(ncpu, nsim, sim_mem, TSR_PLACEMENT_AUTO, 0, out);
}

Test(deterministic, the_same_bits_on_any_workers, .timeout = 240)
{
    run_t one, two, again, sim;
    train(1, 0, 0, &one);
    train(2, 0, 0, &two);
    train(2, 0, 0, &again);
    /* two accelerators of 256 KiB, no CPU worker: the training state
     * (~2 MB) moves in and out during every step */
    train(-1, 2, 256 << 10, &sim);
    const run_t *runs[] = {&two, &again, &sim};
    const char *names[] = {"2 CPU workers", "2 CPU workers again", "2 simulated accelerators"};
    for (int r = 0; r < 3; r++)
        assert_same_training(one.loss, one.params, one.nparams, runs[r]->loss,
                             runs[r]->params, runs[r]->nparams, names[r]);
    cr_assert_lt(one.loss[STEPS - 1], one.loss[0], "it trains");
    free(one.params), free(two.params), free(again.params), free(sim.params);
}

/* Owner-computes placement (docs/placement.md) moves tasks, not results:
 * with every tile of 4 KiB or more homed on one of two simulated
 * accelerators (and the CPU workers taking the rest), forced and chosen by
 * auto placement (the ~2 MB state is far beyond 3/4 of 256 KiB), the same
 * bits as one CPU worker. */
Test(deterministic, the_same_bits_under_owner_placement, .timeout = 240)
{
    run_t one, owner, autop;
    train(1, 0, 0, &one);
    train_placed(2, 2, 256 << 10, TSR_PLACEMENT_OWNER, 4 << 10, &owner);
    train_placed(1, 2, 256 << 10, TSR_PLACEMENT_AUTO, 4 << 10, &autop);
    assert_same_training(one.loss, one.params, one.nparams, owner.loss, owner.params,
                         owner.nparams, "owner placement");
    assert_same_training(one.loss, one.params, one.nparams, autop.loss, autop.params,
                         autop.nparams, "auto placement");
    /* the state (16 bytes per parameter) exceeds the two accelerators'
     * 512 KiB and CPU workers are there: the moments (m and v, 8 bytes per
     * parameter) are homed on the host, AdamW runs beside them, and the
     * gradients it consumed are dropped, reading zero */
    cr_assert_gt(16 * one.nparams, (size_t)512 << 10);
    cr_assert_eq(owner.host_homed, 8 * owner.nparams, "host homes %zu bytes, want %zu",
                 owner.host_homed, 8 * owner.nparams);
    cr_assert_eq(autop.host_homed, 8 * autop.nparams);
    cr_assert_eq(one.host_homed, 0, "no accelerator: nothing homed");
    cr_assert(one.grads_zero && owner.grads_zero && autop.grads_zero,
              "gradients not consumed by the step");
    free(one.params), free(owner.params), free(autop.params);
}
