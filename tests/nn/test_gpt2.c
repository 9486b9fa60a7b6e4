/* tests/nn/test_gpt2.c — the GPT-2 model's own consistency: results that
 * must not depend on tile sizes, on micro-batching, or on where the tiles
 * live (simulated accelerators smaller than the training state against a
 * CPU-only run), and clear errors for bad input. The comparison with
 * PyTorch is tests/nn/test_gpt2_reference.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/gpt2.h>

#include "grad_diff.h"

#define OK(call) cr_assert_eq((call), TSR_OK, "%s: %s", #call, tsr_error_message())

enum { V = 300, CTX = 64, B = 2, T = 32 };

static void rt_start_opts(int ncpu, int nsim, size_t sim_mem)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = ncpu;
    cfg.bind = 0;
    cfg.nsim = nsim;
    cfg.sim_mem = sim_mem;
    OK(tsr_init(&cfg));
}

static void rt_start(void)
{
    rt_start_opts(2, 0, 0);
}

static void rt_stop(void)
{
    tsr_shutdown();
}


static tsr_gpt2_config_t tiny(int tt, int tv, int tf)
{
    tsr_gpt2_config_t c = {.vocab_size = V, .context = CTX, .layers = 2, .heads = 4,
                           .channels = 64, .tile_tokens = tt, .tile_vocab = tv,
                           .tile_hidden = tf};
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

Test(gpt2, tile_sizes_do_not_change_the_results)
{
    rt_start();
    /* edge tiles everywhere: 300 = 2*128 + 44 vocabulary rows, 256 = 2*96 + 64 hidden rows */
    tsr_gpt2_config_t c1 = tiny(16, 128, 96), c2 = tiny(0, 0, 0);
    tsr_gpt2_t *m1, *m2;
    OK(tsr_gpt2_create(&m1, &c1, B, T));
    OK(tsr_gpt2_create(&m2, &c2, B, T));
    /* derived (docs/gpt2.md): on CPUs both sequences in one token tile and
     * hidden tiles of C rows; with GPUs (the suite's emulated-GPU runs) the
     * micro-batch (in two token tiles per GPU where there are several) and
     * the 4C hidden rows shared among them, both capped by the GPU's memory (the GPU check kit caps it at 1 MiB).
     * Against tiles of half a sequence. */
    int gpus = 0;
    size_t smallest = SIZE_MAX;
    for (int w = 0; w < tsr_worker_count(); w++) {
        tsr_worker_stats_t st;
        tsr_node_stats_t ns;
        OK(tsr_worker_stats(w, &st));
        if (st.device_kind != TSR_DEVICE_CUDA)
            continue;
        gpus++;
        OK(tsr_memory_node_stats(st.memory_node, &ns));
        if (ns.capacity < smallest)
            smallest = ns.capacity;
    }
    /* the GPU rule's cap: a (C, tokens) fp32 tile of at most TILE_BYTES / 4,
     * TILE_BYTES = min(256 MiB, a 32nd of the GPU); here the valid tiles
     * are whole micro-batches (64) or divisors of the sequence (32, 16, ...) */
    size_t tile_bytes = smallest / 32 < (256u << 20) ? smallest / 32 : (256u << 20);
    int want = B * T;
    if (gpus) {
        want = gpus > 1 ? B * T / (2 * gpus) : B * T; /* two token tiles per GPU on several */
        while ((size_t)want * 64 * 4 > tile_bytes / 4 && want > 1)
            want /= 2;
    }
    cr_assert_eq(tsr_gpt2_config(m2)->tile_tokens, want,
                 "derived token tile, %d GPU workers of %zu bytes", gpus, smallest);
    /* the 4C = 256 hidden rows shared among the GPUs, at least C = 64 each */
    int share = gpus ? (4 * 64 + gpus - 1) / gpus : 64;
    if (share < 64)
        share = 64;
    int hidden = gpus && (size_t)share * want * 4 <= tile_bytes ? share : 64;
    cr_assert_eq(tsr_gpt2_config(m2)->tile_hidden, hidden,
                 "derived hidden tile, %d GPU workers", gpus);
    OK(tsr_gpt2_init_weights(m1, 3));
    OK(tsr_gpt2_init_weights(m2, 3));
    int32_t tok[B * T], tgt[B * T];
    batch(tok, tgt, B * T, 11);
    float l1, l2;
    OK(tsr_gpt2_zero_grad(m1));
    OK(tsr_gpt2_zero_grad(m2));
    OK(tsr_gpt2_forward(m1, tok, tgt, &l1));
    OK(tsr_gpt2_forward(m2, tok, tgt, &l2));
    cr_assert(fabsf(l1 - l2) <= 1e-5f * fabsf(l2), "loss %g vs %g", l1, l2);
    cr_assert(fabsf(l1 - logf(V)) < 0.1f, "initial loss %g should be near ln V", l1);
    float z1[V], z2[V];
    OK(tsr_gpt2_logits(m1, 1, T - 1, z1));
    OK(tsr_gpt2_logits(m2, 1, T - 1, z2));
    for (int v = 0; v < V; v++)
        cr_assert(fabsf(z1[v] - z2[v]) <= 1e-5f + 1e-4f * fabsf(z2[v]), "logit %d", v);
    OK(tsr_gpt2_backward(m1, 1.0f));
    OK(tsr_gpt2_backward(m2, 1.0f));
    float later;
    OK(tsr_gpt2_loss(m1, &later));
    cr_assert_eq(later, l1, "the loss read after backward is the forward's");
    double d = grad_rel_diff(m1, m2);
    cr_assert(d < 1e-4, "gradients differ by %g between tilings", d);
    tsr_gpt2_free(m1);
    tsr_gpt2_free(m2);
    rt_stop();
}

Test(gpt2, micro_batches_accumulate_to_the_full_batch_gradient)
{
    rt_start();
    tsr_gpt2_config_t c = tiny(16, 128, 0);
    tsr_gpt2_t *full, *half;
    OK(tsr_gpt2_create(&full, &c, B, T));
    OK(tsr_gpt2_create(&half, &c, 1, T));
    OK(tsr_gpt2_init_weights(full, 5));
    OK(tsr_gpt2_init_weights(half, 5));
    int32_t tok[B * T], tgt[B * T];
    batch(tok, tgt, B * T, 21);
    OK(tsr_gpt2_zero_grad(full));
    OK(tsr_gpt2_forward(full, tok, tgt, NULL));
    OK(tsr_gpt2_backward(full, 1.0f));
    OK(tsr_gpt2_zero_grad(half));
    for (int k = 0; k < B; k++) {
        OK(tsr_gpt2_forward(half, tok + k * T, tgt + k * T, NULL));
        OK(tsr_gpt2_backward(half, 1.0f / B));
    }
    double d = grad_rel_diff(half, full);
    cr_assert(d < 1e-4, "micro-batched gradients differ by %g", d);
    tsr_gpt2_free(full);
    tsr_gpt2_free(half);
    rt_stop();
}

/* tsr_gpt2_step consumes the gradients (each AdamW task zeroes its tile):
 * they read as zero after it, and a next step without tsr_gpt2_zero_grad
 * trains exactly like one with it (the reference: a second model, the
 * same steps, with tsr_gpt2_set writing zeros before each backward). */
Test(gpt2, the_step_consumes_the_gradients)
{
    rt_start();
    /* one token tile: each order-free gradient sum gets at most two terms
     * onto zero, which commute exactly, so on CPU workers the two models
     * agree bitwise. An (emulated) GPU's GEMM folds the gradient already
     * there into its sums, so where the tasks ran decides the last bits,
     * and AdamW's m / sqrt(v) turns last-bit differences of near-zero
     * gradients into updates of up to lr: 1e-3 relative for the gradients
     * and 1e-4 for the loss after the first step. Before it, the products
     * of one sum on a CPU worker and on a GPU differ in their last bits
     * (1.1e-6 with CPU workers beside an H200): 1e-5. A gradient not consumed
     * would be the sum of two steps' gradients: a difference near 1. */
    tsr_gpt2_config_t c = tiny(B * T, 128, 0);
    tsr_gpt2_t *a, *b;
    OK(tsr_gpt2_create(&a, &c, B, T));
    OK(tsr_gpt2_create(&b, &c, B, T));
    OK(tsr_gpt2_init_weights(a, 5));
    OK(tsr_gpt2_init_weights(b, 5));
    int32_t tok[B * T], tgt[B * T];
    batch(tok, tgt, B * T, 23);
    int np = tsr_gpt2_param_count(a);
    for (int step = 0; step < 3; step++) {
        /* b: every gradient set to zero by hand, as a user would */
        for (int i = 0; i < np; i++) {
            size_t n;
            OK(tsr_gpt2_get(b, tsr_gpt2_param_name(b, i), TSR_GPT2_GRAD, NULL, &n));
            float *z = calloc(n, sizeof *z);
            cr_assert_not_null(z);
            OK(tsr_gpt2_set(b, tsr_gpt2_param_name(b, i), TSR_GPT2_GRAD, z, n));
            free(z);
        }
        /* a: zero_grad only on the first step (a new model's are zero too) */
        if (step == 0)
            OK(tsr_gpt2_zero_grad(a));
        float la, lb;
        OK(tsr_gpt2_forward(a, tok, tgt, &la));
        OK(tsr_gpt2_forward(b, tok, tgt, &lb));
        cr_assert(fabsf(la - lb) <= (step ? 1e-4f : 1e-6f) * fabsf(lb),
                  "step %d: loss %.9g without zero_grad, %.9g with zeros set", step, la, lb);
        OK(tsr_gpt2_backward(a, 1.0f));
        OK(tsr_gpt2_backward(b, 1.0f));
        double d = grad_rel_diff(a, b);
        cr_assert(d <= (step ? 1e-3 : 1e-5), "step %d: gradients differ by %g", step, d);
        OK(tsr_gpt2_step(a, NULL, 1e-3f, NULL));
        OK(tsr_gpt2_step(b, NULL, 1e-3f, NULL));
        const char *where = "";
        long nz = first_nonzero_grad(a, &where);
        cr_assert_eq(nz, -1, "step %d: %s gradient [%ld] is not 0 after the step", step, where,
                     nz);
    }
    tsr_gpt2_free(a);
    tsr_gpt2_free(b);
    rt_stop();
}

Test(gpt2, bad_input_gives_clear_errors)
{
    rt_start();
    tsr_gpt2_config_t c = tiny(0, 0, 0);
    tsr_gpt2_t *m;
    c.heads = 5;
    cr_assert_eq(tsr_gpt2_create(&m, &c, B, T), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "heads"), "%s", tsr_error_message());
    c = tiny(5, 0, 0);
    cr_assert_eq(tsr_gpt2_create(&m, &c, B, T), TSR_EINVAL);
    c = tiny(0, 0, 0);
    cr_assert_eq(tsr_gpt2_create(&m, &c, B, CTX + 1), TSR_EINVAL);
    OK(tsr_gpt2_create(&m, &c, B, T));
    int32_t tok[B * T], tgt[B * T];
    batch(tok, tgt, B * T, 1);
    cr_assert_eq(tsr_gpt2_backward(m, 1.0f), TSR_ESTATE);
    float loss;
    cr_assert_eq(tsr_gpt2_loss(m, &loss), TSR_ESTATE);
    tok[7] = V;
    cr_assert_eq(tsr_gpt2_forward(m, tok, tgt, NULL), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "token"), "%s", tsr_error_message());
    tok[7] = 0;
    cr_assert_eq(tsr_gpt2_get(m, "h.9.ln_1.weight", TSR_GPT2_PARAM, NULL, NULL), TSR_ENOTFOUND);
    float x[3] = {0};
    cr_assert_eq(tsr_gpt2_set(m, "ln_f.bias", TSR_GPT2_PARAM, x, 3), TSR_EINVAL);
    OK(tsr_gpt2_forward(m, tok, NULL, NULL));
    cr_assert_eq(tsr_gpt2_backward(m, 1.0f), TSR_ESTATE, "no targets, no backward");
    tsr_gpt2_free(m);
    rt_stop();
}

/* Losses of `steps` AdamW steps on a fixed batch under the given runtime. */
static void train_losses(int ncpu, int nsim, size_t sim_mem, float *losses, int steps,
                         uint64_t *evictions)
{
    rt_start_opts(ncpu, nsim, sim_mem);
    tsr_gpt2_config_t c = tiny(16, 128, 96);
    tsr_gpt2_t *m;
    OK(tsr_gpt2_create(&m, &c, B, T));
    OK(tsr_gpt2_init_weights(m, 9));
    int32_t tok[B * T], tgt[B * T];
    batch(tok, tgt, B * T, 31);
    tsr_adamw_config_t opt;
    tsr_adamw_config_default(&opt);
    for (int s = 0; s < steps; s++) {
        OK(tsr_gpt2_zero_grad(m));
        OK(tsr_gpt2_forward(m, tok, tgt, &losses[s]));
        OK(tsr_gpt2_backward(m, 1.0f));
        OK(tsr_gpt2_step(m, &opt, tsr_lr_schedule(s, 2, steps, 1e-3f, 1e-4f), NULL));
    }
    OK(tsr_wait_all());
    /* every accelerator's evictions: a run may add GPUs (TESSERA_NCUDA), and
     * then the tasks need not all land on one simulated node */
    for (int n = 1; evictions && n < tsr_memory_node_count(); n++) {
        tsr_node_stats_t st;
        OK(tsr_memory_node_stats(n, &st));
        *evictions += st.evictions;
    }
    cr_assert_gt(tsr_gpt2_num_params(m) * 16, nsim ? sim_mem * (size_t)nsim : 0,
                 "the training state must exceed the accelerators' memory");
    tsr_gpt2_free(m);
    OK(tsr_shutdown());
}

Test(gpt2_offload, accelerators_smaller_than_the_training_state_reproduce_cpu_losses)
{
    enum { STEPS = 6 };
    float cpu[STEPS], sim[STEPS];
    uint64_t evictions = 0;
    train_losses(2, 0, 0, cpu, STEPS, NULL);
    /* two simulated accelerators of 512 KiB and no CPU worker: every task
     * runs on an accelerator; the ~2 MB training state is evicted and
     * fetched back as the step goes */
    train_losses(-1, 2, 512 << 10, sim, STEPS, &evictions);
    cr_assert_gt(evictions, 0, "the accelerators never had to evict");
    for (int s = 0; s < STEPS; s++)
        cr_assert(fabsf(cpu[s] - sim[s]) <= 1e-5f * fabsf(cpu[s]),
                  "step %d: loss %.7f on accelerators vs %.7f on CPU", s, sim[s], cpu[s]);
    cr_assert_lt(cpu[STEPS - 1], cpu[0] - 0.3f, "the loss falls");
}
