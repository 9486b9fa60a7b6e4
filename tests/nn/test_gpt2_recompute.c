/* tests/nn/test_gpt2_recompute.c — activation recomputation
 * (tsr_gpt2_config_t.recompute) against the same training that keeps every
 * activation: the same losses and parameters, less host memory, on the CPU
 * and on one small simulated accelerator that must evict while the blocks
 * are recomputed, and a clear error for a bad value.
 *
 * Why the comparison is bitwise. The recomputed activations come from the
 * forward's own tasks on the same tiles in the same order, and no forward
 * task accumulates in COMMUTE or REDUX, so they are bitwise the forward's.
 * What remains order-dependent is the backward's COMMUTE accumulation; the
 * configuration below makes each such sum order-free: one token tile
 * (B x T = 32 tokens, derived tile) and one vocabulary tile, so every weight,
 * bias and LayerNorm gradient tile receives one product; wpe's tile receives
 * the two sequences' rows and wte's columns the head's product and at most
 * one embedding row (the batch's tokens are distinct), i.e. at most two
 * additions onto zero, which commute exactly; the clipping norm (a sum over
 * every tile in any order) is left out of the update (grad_clip 0). A
 * second test with several token tiles (order-dependent sums) compares the
 * gradients of one step within a relative 1e-5 instead. */
#include "grad_diff.h"
#include "tiny_gpt2.h"

#include <math.h>

static void rt_start(int ncpu, int nsim, size_t sim_mem)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = ncpu;
    cfg.bind = 0;
    cfg.nsim = nsim;
    cfg.sim_mem = sim_mem;
    OK(tsr_init(&cfg));
}

/* What a training run leaves: its losses, every parameter (concatenated in
 * checkpoint order), the host's peak and the accelerators' evictions. */
typedef struct run {
    float loss[STEPS];
    float *params;
    size_t nparams;
    size_t host_peak;
    uint64_t evictions;
} run_t;

static void train(run_t *r, int recompute, int ncpu, int nsim, size_t sim_mem)
{
    memset(r, 0, sizeof *r);
    rt_start(ncpu, nsim, sim_mem);
    tsr_gpt2_t *m = tiny_model(recompute);
    tiny_train(m, r->loss);
    tsr_node_stats_t st;
    OK(tsr_memory_node_stats(0, &st));
    r->host_peak = st.peak;
    for (int n = 1; n < tsr_memory_node_count(); n++) {
        OK(tsr_memory_node_stats(n, &st));
        r->evictions += st.evictions;
    }
    r->params = read_params(m, &r->nparams);
    OK(tsr_gpt2_free(m));
    OK(tsr_shutdown());
}

static void assert_bitwise_equal(const run_t *a, const run_t *b, const char *what)
{
    assert_same_training(a->loss, a->params, a->nparams, b->loss, b->params, b->nparams, what);
}

Test(gpt2_recompute, same_losses_and_parameters_and_less_host_memory)
{
    run_t keep, re;
    train(&keep, 0, 2, 0, 0);
    train(&re, 1, 2, 0, 0);
    cr_log_info("host peak: %zu bytes keeping the activations, %zu recomputing them",
                keep.host_peak, re.host_peak);
    assert_bitwise_equal(&keep, &re, "CPU, recompute vs keep");
    cr_assert_lt(keep.loss[STEPS - 1], keep.loss[0], "the loss falls");
    /* keeping: both blocks' activations are alive when backward starts;
     * recomputing: the inputs of both and the activations of about one */
    cr_assert_lt(re.host_peak, keep.host_peak, "recomputation must lower the host's peak");
    free(keep.params);
    free(re.params);
}

Test(gpt2_recompute, under_eviction_on_a_small_accelerator)
{
    run_t keep, re;
    train(&keep, 0, 2, 0, 0);
    /* one simulated accelerator of 512 KiB and no CPU worker: every task,
     * the recomputations included, runs there (on the CPU kernels) while
     * the ~2 MB training state moves in and out */
    train(&re, 1, -1, 1, 512 << 10);
    cr_log_info("accelerator evictions while recomputing: %llu",
                (unsigned long long)re.evictions);
    cr_assert_gt(re.evictions, 0, "the accelerator never had to evict");
    assert_bitwise_equal(&keep, &re, "simulated accelerator recomputing vs CPU keeping");
    free(keep.params);
    free(re.params);
}

Test(gpt2_recompute, several_token_tiles_give_the_same_gradients)
{
    /* token tiles of 4: attention over several key tiles, weight gradients
     * summed over 8 tiles in any order (so within 1e-5, not bitwise) */
    rt_start(2, 0, 0);
    tsr_gpt2_config_t ck = tiny(0, 4), cr = tiny(1, 4);
    tsr_gpt2_t *keep, *re;
    OK(tsr_gpt2_create(&keep, &ck, B, T));
    OK(tsr_gpt2_create(&re, &cr, B, T));
    OK(tsr_gpt2_init_weights(keep, 5));
    OK(tsr_gpt2_init_weights(re, 5));
    int32_t tok[N], tgt[N];
    batch(tok, tgt);
    float lk, lr;
    for (int pass = 0; pass < 2; pass++) { /* twice: the second reuses the shared tiles */
        OK(tsr_gpt2_zero_grad(keep));
        OK(tsr_gpt2_zero_grad(re));
        OK(tsr_gpt2_forward(keep, tok, tgt, &lk));
        OK(tsr_gpt2_forward(re, tok, tgt, &lr));
        cr_assert_eq(lk, lr, "pass %d: the forward is the same tasks: loss %.9g vs %.9g", pass,
                     lk, lr);
        OK(tsr_gpt2_backward(keep, 1.0f));
        OK(tsr_gpt2_backward(re, 1.0f));
        double d = grad_rel_diff(re, keep);
        cr_assert(d < 1e-5, "pass %d: gradients differ by %g", pass, d);
    }
    OK(tsr_gpt2_free(keep));
    OK(tsr_gpt2_free(re));
    OK(tsr_shutdown());
}

Test(gpt2_recompute, a_bad_value_is_refused)
{
    rt_start(1, 0, 0);
    tsr_gpt2_t *m = (tsr_gpt2_t *)&m;
    int bad[] = {2, -1, 1 << 30};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tsr_gpt2_config_t c = tiny(bad[i], 0);
        cr_assert_eq(tsr_gpt2_create(&m, &c, B, T), TSR_EINVAL, "recompute %d", bad[i]);
        cr_assert_null(m, "no model for recompute %d", bad[i]);
        cr_assert(strstr(tsr_error_message(), "recompute"), "%s", tsr_error_message());
    }
    tsr_gpt2_config_t c = tiny(1, 0);
    OK(tsr_gpt2_create(&m, &c, B, T));
    OK(tsr_gpt2_free(m));
    OK(tsr_shutdown());
}
