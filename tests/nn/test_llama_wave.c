/* Llama's waves (tsr_llama_forward_backward, cfg.wave; nn/wave.h): several
 * micro-batches through the layers layer by layer, as GPT-2's
 * (tests/nn/test_gpt2_wave.c).
 *
 * The reference is the training loop's order on a model of its own: one
 * micro-batch at a time, tsr_llama_forward + tsr_llama_backward, on one CPU
 * worker. In deterministic mode every order-free sum runs in submission
 * order, and a wave submits each gradient's terms in the loop's order; with
 * an untied head no gradient gets the sums of two phases, and every
 * gradient and every loss must be the same bits (tied, embed_tokens' within
 * rounding). The wave size's automatic
 * choice is checked against hand arithmetic, which also checks the
 * parameter count it starts from (tied, untied, head_dim apart from hidden /
 * heads) against tsr_llama_num_params; the traffic waves exist for is
 * measured (a simulated accelerator too small for the weights reads them far
 * fewer times in waves); misuse is refused before anything runs. */
#include "det_runtime.h"
#include "wave_traffic.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/llama.h>
#include <tessera/tessera.h>

#define OK(call) cr_assert_eq((call), TSR_OK, "%s: %s", #call, tsr_error_message())

/* A tiny GQA model: 4 heads of 16 over 2 K/V heads, 2 layers; 32 tokens in
 * 4 token tiles, 200 ids in 4 vocabulary tiles (the last one short), 160
 * intermediate rows in 3 tiles (the last one short). */
enum { V = 200, C = 64, F = 160, L = 2, B = 2, T = 16, N = B * T, MICRO = 5 };

static tsr_llama_config_t tiny(int recompute, int precision, int wave)
{
    tsr_llama_config_t c;
    tsr_llama_config_default(&c);
    c.vocab_size = V;
    c.hidden = C;
    c.intermediate = F;
    c.layers = L;
    c.heads = 4;
    c.kv_heads = 2;
    c.max_positions = 32;
    c.tile_tokens = 8;
    c.tile_vocab = 64;
    c.tile_hidden = 64;
    c.recompute = recompute;
    c.precision = precision;
    c.wave = wave;
    return c;
}

/* micro-batch k's tokens and targets (N each), pseudo-random; the tokens
 * from 50 ids, so that the micro-batches share ids (and add into the same
 * embedding columns, whose sums' order then shows); one ignored target in
 * micro-batch 2, so the target counts differ by micro-batch */
static void micro_batches(int32_t *tok, int32_t *tgt, int micro)
{
    unsigned s = 17;
    for (int i = 0; i < micro * N; i++) {
        s = s * 1103515245u + 12345u;
        tok[i] = (int)((s >> 8) % 50);
        s = s * 1103515245u + 12345u;
        tgt[i] = (int)((s >> 8) % V);
    }
    if (micro > 2)
        tgt[2 * N + 3] = -1;
}

/* The tiny model with the given wave size (tie: the head is embed_tokens),
 * weights from seed 5. */
static tsr_llama_t *model(int recompute, int precision, int wave, int tie)
{
    tsr_llama_config_t c = tiny(recompute, precision, wave);
    c.tie_embeddings = tie;
    tsr_llama_t *m;
    OK(tsr_llama_create(&m, &c, B, T));
    cr_assert_eq(tsr_llama_config(m)->wave, wave);
    OK(tsr_llama_init_weights(m, 5));
    return m;
}

/* Every gradient of m, by Hugging Face name, in one new host array each. */
static float **gradients(tsr_llama_t *m, size_t *numel)
{
    int count = tsr_llama_param_count(m);
    float **g = calloc((size_t)count, sizeof *g);
    cr_assert_not_null(g);
    for (int i = 0; i < count; i++) {
        const char *name = tsr_llama_param_name(m, i);
        OK(tsr_llama_get(m, name, TSR_GPT2_GRAD, NULL, &numel[i]));
        g[i] = malloc(numel[i] * sizeof **g);
        cr_assert_not_null(g[i]);
        OK(tsr_llama_get(m, name, TSR_GPT2_GRAD, g[i], &numel[i]));
    }
    return g;
}

static void free_gradients(float **g, int count)
{
    for (int i = 0; i < count; i++)
        free(g[i]);
    free(g);
}

/* Whether every gradient of m reads zero (*where: the first that does not) */
static int grads_zero(tsr_llama_t *m, const char **where)
{
    enum { MAXP = 64 };
    size_t numel[MAXP];
    int count = tsr_llama_param_count(m);
    cr_assert_leq(count, MAXP);
    float **g = gradients(m, numel);
    int zero = 1;
    for (int i = 0; i < count && zero; i++)
        for (size_t k = 0; k < numel[i] && zero; k++)
            if (g[i][k] != 0.0f) {
                zero = 0;
                *where = tsr_llama_param_name(m, i);
            }
    free_gradients(g, count);
    return zero;
}

/* The loop on 1 CPU worker, waves of 2 (2 + 2 + 1) on (ncpu, nsim): the
 * same losses and gradients, bit for bit; with a tied head (tie) all but
 * embed_tokens', which the head and the embedding both add to, interleaved
 * differently by a wave (rounding apart only). */
static void same_as_the_loop(int recompute, int precision, int tie, int ncpu, int nsim,
                             const char *what)
{
    enum { MAXP = 64 };
    int32_t tok[MICRO * N], tgt[MICRO * N];
    micro_batches(tok, tgt, MICRO);
    float loop_loss[MICRO], wave_loss[MICRO];
    size_t n_loop[MAXP], n_wave[MAXP];

    det_runtime_init(1, 0, 0, 0);
    tsr_llama_t *a = model(recompute, precision, 1, tie);
    for (int k = 0; k < MICRO; k++) {
        OK(tsr_llama_forward(a, tok + k * N, tgt + k * N, &loop_loss[k]));
        OK(tsr_llama_backward(a, 1.0f / MICRO));
    }
    OK(tsr_wait_all());
    int count = tsr_llama_param_count(a);
    cr_assert_leq(count, MAXP);
    float **loop = gradients(a, n_loop); /* read before its runtime ends */
    OK(tsr_llama_free(a));
    OK(tsr_shutdown());

    det_runtime_init(ncpu, nsim, 256 << 10, 0);
    tsr_llama_t *w = model(recompute, precision, 2, tie);
    OK(tsr_llama_forward_backward(w, MICRO, tok, tgt, 1.0f / MICRO, wave_loss));
    float last;
    OK(tsr_llama_loss(w, &last));
    cr_assert(memcmp(&last, &loop_loss[MICRO - 1], sizeof last) == 0,
              "%s: tsr_llama_loss is the last micro-batch's", what);
    for (int k = 0; k < MICRO; k++)
        cr_assert(memcmp(&loop_loss[k], &wave_loss[k], sizeof(float)) == 0,
                  "%s: micro-batch %d loss %.9g vs %.9g", what, k, loop_loss[k], wave_loss[k]);
    cr_assert_neq(wave_loss[0], wave_loss[1], "%s: the micro-batches differ", what);
    cr_assert_eq(tsr_llama_param_count(w), count);
    float **wave = gradients(w, n_wave);
    for (int i = 0; i < count; i++) {
        const char *name = tsr_llama_param_name(w, i);
        cr_assert_eq(n_loop[i], n_wave[i]);
        double mx = 1e-30, diff = 0.0;
        int nonzero = 0;
        for (size_t k = 0; k < n_loop[i]; k++) {
            mx = fmax(mx, fabs(loop[i][k]));
            diff = fmax(diff, fabs((double)loop[i][k] - wave[i][k]));
            nonzero |= loop[i][k] != 0.0f;
        }
        cr_assert(nonzero, "%s: %s's gradient is zero", what, name);
        if (tie && strcmp(name, "model.embed_tokens.weight") == 0)
            cr_assert_lt(diff / mx, 1e-5, "%s: embed_tokens' gradient %g apart", what,
                         diff / mx);
        else
            cr_assert(memcmp(loop[i], wave[i], n_loop[i] * sizeof(float)) == 0,
                      "%s: %s's gradient differs by %g", what, name, diff);
    }
    free_gradients(loop, count);
    free_gradients(wave, count);
    OK(tsr_llama_free(w));
    OK(tsr_shutdown());
}

Test(llama_wave, the_same_gradients_as_the_loop, .timeout = 240)
{
    same_as_the_loop(0, TSR_GPT2_FP32, 0, 2, 0, "fp32, 2 CPU workers");
    same_as_the_loop(1, TSR_GPT2_FP32, 0, 2, 0, "fp32 with recompute, 2 CPU workers");
    same_as_the_loop(0, TSR_GPT2_BF16, 0, 2, 0, "bf16, 2 CPU workers");
    same_as_the_loop(1, TSR_GPT2_BF16, 0, 2, 0, "bf16 with recompute, 2 CPU workers");
    same_as_the_loop(0, TSR_GPT2_FP32, 1, 2, 0, "fp32, tied head, 2 CPU workers");
}

/* two accelerators of 256 KiB, no CPU worker: the weights (875 KiB with
 * their gradients) move in and out during every wave */
Test(llama_wave, the_same_gradients_on_small_accelerators, .timeout = 240)
{
    same_as_the_loop(0, TSR_GPT2_FP32, 0, -1, 2, "fp32, 2 simulated accelerators");
    same_as_the_loop(1, TSR_GPT2_FP32, 0, -1, 2, "fp32 with recompute, 2 simulated accelerators");
    same_as_the_loop(0, TSR_GPT2_BF16, 0, -1, 2, "bf16, 2 simulated accelerators");
    same_as_the_loop(1, TSR_GPT2_BF16, 0, -1, 2, "bf16 with recompute, 2 simulated accelerators");
}

/* Bytes copied into the one simulated accelerator (of `mem` bytes) by 8
 * micro-batches in waves of `wave`. */
/* A model whose weights outweigh its activations, as large models' do:
 * hidden 128, intermediate 320, micro-batches of 16 tokens; 395 904
 * parameters (1.58 MB of weights). */
enum { WC = 128, WF = 320, WT = 16 };

/* Bytes copied into the one simulated accelerator (of `mem` bytes) by 8
 * micro-batches in waves of `wave`. */
static uint64_t bytes_in(int wave, size_t mem)
{
    enum { K = 8 };
    int32_t tok[K * WT], tgt[K * WT];
    for (int i = 0; i < K * WT; i++)
        tok[i] = (7 * i + 3) % V, tgt[i] = (5 * i + 1) % V;
    det_runtime_init(-1, 1, mem, 0);
    tsr_llama_config_t c = tiny(1, TSR_GPT2_FP32, wave);
    c.hidden = WC;
    c.intermediate = WF;
    c.tile_tokens = WT;
    c.tile_hidden = WC;
    tsr_llama_t *m;
    OK(tsr_llama_create(&m, &c, 1, WT));
    cr_assert_eq(tsr_llama_num_params(m), 395904);
    OK(tsr_llama_init_weights(m, 5));
    OK(tsr_llama_forward_backward(m, K, tok, tgt, 1.0f / K, NULL));
    OK(tsr_wait_all());
    tsr_node_stats_t s;
    OK(tsr_memory_node_stats(1, &s));
    OK(tsr_llama_free(m));
    OK(tsr_shutdown());
    return s.bytes_in;
}

/* 2 MiB hold the weights (1.58 MB) but not with their gradients: one
 * micro-batch at a time streams most of them in every micro-batch's
 * forward and backward, a wave once per wave. Measured: 13.6, 10.1, 5.6,
 * 2.6 MB for waves of 1, 2, 4, 8. */
Test(llama_wave, reads_the_weights_once_per_wave, .timeout = 120)
{
    size_t weights = 4 * (size_t)395904;
    assert_waves_move_less(bytes_in, 2 << 20, weights);
}

/* cfg.wave = 0: the size chosen at create (nn/wave.h) for the tiny model
 * (tied or not, head_dim 0 or hd) in fp32 with `recompute`, under
 * (nsim, sim_mem, host_mem); its parameter count must be `numel`. */
static int chosen(int tie, int hd, int recompute, size_t numel, int nsim, size_t sim_mem,
                  size_t host_mem)
{
    det_runtime_init(nsim ? -1 : 1, nsim, sim_mem, host_mem);
    tsr_llama_config_t c = tiny(recompute, TSR_GPT2_FP32, 0);
    c.tie_embeddings = tie;
    c.head_dim = hd;
    tsr_llama_t *m;
    OK(tsr_llama_create(&m, &c, B, T));
    cr_assert_eq(tsr_llama_num_params(m), numel, "tie %d, head_dim %d: %zu parameters", tie,
                 hd, tsr_llama_num_params(m));
    int wave = tsr_llama_config(m)->wave;
    OK(tsr_llama_free(m));
    OK(tsr_shutdown());
    return wave;
}

/* A bounded host beside two accelerators of 256 KiB (524 288 bytes) where
 * 3/4 of what the state (16 bytes per parameter) leaves of the host and
 * the accelerators holds `k` slots of `slot` bytes and 1.5 bytes more
 * (more = 1) or less (more = -1); half the host is more here. */
static size_t host_for(size_t numel, size_t slot, int k, long more)
{
    size_t need = (4 * slot * (size_t)k + 2) / 3; /* ceil(4 k slot / 3) */
    return (size_t)((long)(16 * numel - 524288 + need) + 2 * more);
}

/* Worked by hand: Q = (4 + 2 x 2) 16 = 128 rows of q, k, v; per layer
 * C Q + Hq C + 3 C F + 2 C = 8192 + 4096 + 30720 + 128 = 43136; embedding
 * and head V C = 12800 each; the final norm 64: 111936 parameters, weights
 * 8 bytes each (895 488), the state 16 (1 790 976). A slot is 4 N times
 * (L + 2) C = 256, one layer's activations 3 C + Q + 2 Hq + 3 F = 928 (L
 * of them without recompute) and the backward's C + 3 F + Q + Hq = 736:
 * 4 x 32 x 1920 = 245 760 bytes with recompute, 4 x 32 x 2848 = 364 544
 * without. A host 2 bytes short of k slots gets k - 1: the choice counts
 * the parameters exactly as tsr_llama_num_params does. */
Test(llama_wave, its_size_is_chosen_by_the_weights_and_the_host)
{
    const size_t untied = 111936, slot = 245760, slot_kept = 364544;
    cr_assert_eq(chosen(0, 0, 1, untied, 0, 0, 0), 1, "no accelerator");
    /* 2 x 1 MiB: 70 % is 1 468 006 bytes, more than the weights */
    cr_assert_eq(chosen(0, 0, 1, untied, 2, 1 << 20, 0), 1, "the weights stay on them");
    /* 2 x 256 KiB: 367 002 bytes, less than the weights */
    cr_assert_eq(chosen(0, 0, 1, untied, 2, 256 << 10, 0), 16, "an unbounded host: the most");
    cr_assert_eq(chosen(0, 0, 1, untied, 2, 256 << 10, host_for(untied, slot, 0, 0)), 1,
                 "no room beside the state");
    cr_assert_eq(chosen(0, 0, 1, untied, 2, 256 << 10, host_for(untied, slot, 3, 1)), 3,
                 "3 slots");
    cr_assert_eq(chosen(0, 0, 1, untied, 2, 256 << 10, host_for(untied, slot, 3, -1)), 2,
                 "2 bytes short of 3 slots");
    cr_assert_eq(chosen(0, 0, 0, untied, 2, 256 << 10, host_for(untied, slot_kept, 2, 1)), 2,
                 "2 slots of every activation");
    cr_assert_eq(chosen(0, 0, 0, untied, 2, 256 << 10, host_for(untied, slot_kept, 2, -1)), 1,
                 "2 bytes short of 2 slots of every activation");
    /* tied: no lm_head, 111936 - 12800 parameters (weights 793 088 bytes,
     * still more than 70 % of the accelerators) */
    const size_t tied = untied - V * C;
    cr_assert_eq(chosen(1, 0, 1, tied, 2, 256 << 10, host_for(tied, slot, 3, 1)), 3,
                 "tied: 3 slots");
    cr_assert_eq(chosen(1, 0, 1, tied, 2, 256 << 10, host_for(tied, slot, 3, -1)), 2,
                 "tied: 2 bytes short of 3 slots");
    /* head_dim 8: Hq = 32, Q = 64; per layer 4096 + 2048 + 30720 + 128 =
     * 36992 parameters; a slot 4 x 32 x (256 + 800 + 640) = 217 088 */
    const size_t narrow = 2 * V * C + 2 * 36992 + C, slot8 = 217088;
    cr_assert_eq(chosen(0, 8, 1, narrow, 2, 256 << 10, host_for(narrow, slot8, 3, 1)), 3,
                 "head_dim 8: 3 slots");
    cr_assert_eq(chosen(0, 8, 1, narrow, 2, 256 << 10, host_for(narrow, slot8, 3, -1)), 2,
                 "head_dim 8: 2 bytes short of 3 slots");
}

Test(llama_wave, misuse_is_refused_before_anything_runs)
{
    det_runtime_init(1, 0, 0, 0);
    tsr_llama_config_t c = tiny(1, TSR_GPT2_FP32, -1);
    tsr_llama_t *m;
    cr_assert_eq(tsr_llama_create(&m, &c, B, T), TSR_EINVAL);
    cr_assert_null(m);
    cr_assert_not_null(strstr(tsr_error_message(), "wave"), "%s", tsr_error_message());
    c.wave = 4097;
    cr_assert_eq(tsr_llama_create(&m, &c, B, T), TSR_EINVAL);
    cr_assert_not_null(strstr(tsr_error_message(), "wave"), "%s", tsr_error_message());
    c.wave = 4096; /* the most: 4096 slots of a tiny model fit */
    OK(tsr_llama_create(&m, &c, B, T));
    OK(tsr_llama_free(m));
    c.wave = 2;
    OK(tsr_llama_create(&m, &c, B, T));
    OK(tsr_llama_init_weights(m, 5));
    int32_t tok[3 * N], tgt[3 * N];
    micro_batches(tok, tgt, 3);
    cr_assert_eq(tsr_llama_forward_backward(m, 0, tok, tgt, 1.0f, NULL), TSR_EINVAL);
    cr_assert_eq(tsr_llama_forward_backward(m, -1, tok, tgt, 1.0f, NULL), TSR_EINVAL);
    cr_assert_eq(tsr_llama_forward_backward(m, 3, tok, NULL, 1.0f, NULL), TSR_EINVAL);
    cr_assert_eq(tsr_llama_forward_backward(m, 3, NULL, tgt, 1.0f, NULL), TSR_EINVAL);
    cr_assert_eq(tsr_llama_forward_backward(NULL, 3, tok, tgt, 1.0f, NULL), TSR_EINVAL);
    tok[2 * N + 5] = V; /* out of the vocabulary, in the last micro-batch */
    cr_assert_eq(tsr_llama_forward_backward(m, 3, tok, tgt, 1.0f, NULL), TSR_EINVAL);
    tok[2 * N + 5] = 0;
    tgt[2 * N + 7] = V; /* a target out of the vocabulary, likewise */
    cr_assert_eq(tsr_llama_forward_backward(m, 3, tok, tgt, 1.0f, NULL), TSR_EINVAL);
    tgt[2 * N + 7] = 0;
    const char *where = NULL;
    cr_assert(grads_zero(m, &where), "a gradient changed: %s", where);
    float losses[3];
    OK(tsr_llama_forward_backward(m, 3, tok, tgt, 1.0f, losses));
    cr_assert(losses[0] > 0.0f && losses[1] > 0.0f && losses[2] > 0.0f);
    cr_assert(!grads_zero(m, &where), "the gradients are zero after a good call");
    float last;
    OK(tsr_llama_loss(m, &last));
    cr_assert(memcmp(&last, &losses[2], sizeof last) == 0, "the last micro-batch's loss");
    OK(tsr_llama_free(m));
    OK(tsr_shutdown());
}
