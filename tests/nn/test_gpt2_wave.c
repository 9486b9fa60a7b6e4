/* Waves (tsr_gpt2_forward_backward, cfg.wave; nn/wave.h): several
 * micro-batches through the blocks block by block.
 *
 * The reference is the training loop's order on a model of its own: one
 * micro-batch at a time, tsr_gpt2_forward + tsr_gpt2_backward. In
 * deterministic mode every order-free sum runs in submission order, and a
 * wave submits each gradient's terms in the loop's order, so every
 * gradient and every loss must be the same bits — all but wte's, which the
 * tied head and the embedding both add to, interleaved differently by a
 * wave (rounding apart only). The wave size's automatic choice is checked
 * against hand arithmetic, and the traffic it exists for is measured: a
 * simulated accelerator too small for the weights reads them far fewer
 * times in waves. */
#include "det_runtime.h"
#include "wave_traffic.h"
#include "grad_diff.h"
#include "tiny_gpt2.h"

#include <string.h>

#include <tessera/tessera.h>

enum { MICRO = 5 };

/* micro-batch k's tokens and targets (N each): batch()'s, shifted by k */
static void micro_batches(int32_t *tok, int32_t *tgt, int micro)
{
    int32_t t0[N], g0[N];
    batch(t0, g0);
    for (int k = 0; k < micro; k++)
        for (int i = 0; i < N; i++) {
            tok[k * N + i] = (t0[i] + 11 * k) % V;
            tgt[k * N + i] = (g0[i] + 5 * k) % V;
        }
    tgt[2 * N + 3] = -1; /* an ignored target: the counts differ by micro-batch */
}

/* A tiny model with several token, vocabulary and hidden tiles and the
 * given wave size, weights from seed 5. */
static tsr_gpt2_t *model(int recompute, int precision, int wave)
{
    tsr_gpt2_config_t c = tiny(recompute, N / 2);
    c.tile_vocab = 128;
    c.tile_hidden = 96;
    c.precision = precision;
    c.wave = wave;
    tsr_gpt2_t *m;
    OK(tsr_gpt2_create(&m, &c, B, T));
    cr_assert_eq(tsr_gpt2_config(m)->wave, wave);
    OK(tsr_gpt2_init_weights(m, 5));
    return m;
}

/* Every gradient of a and b: bitwise equal but wte's, within rounding. */
static void assert_same_gradients(tsr_gpt2_t *a, tsr_gpt2_t *b, const char *what)
{
    for (int i = 0; i < tsr_gpt2_param_count(a); i++) {
        const char *name = tsr_gpt2_param_name(a, i);
        size_t n, n2;
        float *ga = gpt2_part(a, name, TSR_GPT2_GRAD, &n);
        float *gb = gpt2_part(b, name, TSR_GPT2_GRAD, &n2);
        cr_assert_eq(n, n2);
        double mx = 1e-30, diff = 0;
        int nonzero = 0;
        for (size_t k = 0; k < n; k++) {
            mx = fmax(mx, fabs(ga[k]));
            diff = fmax(diff, fabs((double)ga[k] - gb[k]));
            nonzero |= ga[k] != 0.0f;
        }
        cr_assert(nonzero, "%s: %s's gradient is zero", what, name);
        if (strcmp(name, "wte.weight") == 0)
            cr_assert_lt(diff / mx, 1e-5, "%s: wte's gradient %g apart", what, diff / mx);
        else
            cr_assert(memcmp(ga, gb, n * sizeof *ga) == 0, "%s: %s's gradient differs by %g",
                      what, name, diff);
        free(ga);
        free(gb);
    }
}

/* The loop on 1 CPU worker, waves of 2 (2 + 2 + 1) on (ncpu, nsim). */
static void same_as_the_loop(int recompute, int precision, int ncpu, int nsim, const char *what)
{
    int32_t tok[MICRO * N], tgt[MICRO * N];
    micro_batches(tok, tgt, MICRO);
    float loop_loss[MICRO], wave_loss[MICRO];

    det_runtime_init(1, 0, 0, 0);
    tsr_gpt2_t *a = model(recompute, precision, 1);
    for (int k = 0; k < MICRO; k++) {
        OK(tsr_gpt2_forward(a, tok + k * N, tgt + k * N, &loop_loss[k]));
        OK(tsr_gpt2_backward(a, 1.0f / MICRO));
    }
    OK(tsr_wait_all());
    /* the loop's gradients, read before its runtime ends */
    size_t n = 0;
    float **grads = calloc((size_t)tsr_gpt2_param_count(a), sizeof *grads);
    cr_assert_not_null(grads);
    for (int i = 0; i < tsr_gpt2_param_count(a); i++)
        grads[i] = gpt2_part(a, tsr_gpt2_param_name(a, i), TSR_GPT2_GRAD, &n);
    int count = tsr_gpt2_param_count(a);
    tsr_gpt2_free(a);
    OK(tsr_shutdown());

    det_runtime_init(ncpu, nsim, 256 << 10, 0);
    tsr_gpt2_t *w = model(recompute, precision, 2);
    OK(tsr_gpt2_forward_backward(w, MICRO, tok, tgt, 1.0f / MICRO, wave_loss));
    float last;
    OK(tsr_gpt2_loss(w, &last));
    cr_assert(memcmp(&last, &loop_loss[MICRO - 1], sizeof last) == 0,
              "%s: tsr_gpt2_loss is the last micro-batch's", what);
    for (int k = 0; k < MICRO; k++)
        cr_assert(memcmp(&loop_loss[k], &wave_loss[k], sizeof(float)) == 0,
                  "%s: micro-batch %d loss %.9g vs %.9g", what, k, loop_loss[k], wave_loss[k]);
    cr_assert_neq(wave_loss[0], wave_loss[1], "%s: the micro-batches differ", what);
    /* the loop's gradients, written into a third model under this runtime */
    tsr_gpt2_t *ref = model(recompute, precision, 1);
    for (int i = 0; i < count; i++) {
        size_t len;
        OK(tsr_gpt2_get(ref, tsr_gpt2_param_name(ref, i), TSR_GPT2_GRAD, NULL, &len));
        OK(tsr_gpt2_set(ref, tsr_gpt2_param_name(ref, i), TSR_GPT2_GRAD, grads[i], len));
        free(grads[i]);
    }
    free(grads);
    assert_same_gradients(ref, w, what);
    tsr_gpt2_free(ref);
    tsr_gpt2_free(w);
    OK(tsr_shutdown());
}

Test(wave, the_same_gradients_as_the_loop, .timeout = 240)
{
    same_as_the_loop(0, TSR_GPT2_FP32, 2, 0, "fp32, 2 CPU workers");
    same_as_the_loop(1, TSR_GPT2_FP32, 2, 0, "fp32 with recompute, 2 CPU workers");
    same_as_the_loop(1, TSR_GPT2_BF16, 2, 0, "bf16 with recompute, 2 CPU workers");
    /* two accelerators of 256 KiB, no CPU worker: the weights move in and
     * out during every wave */
    same_as_the_loop(1, TSR_GPT2_FP32, -1, 2, "fp32 with recompute, 2 simulated accelerators");
}

/* A model whose weights outweigh its activations, as large models' do
 * (12 C^2 against about 25 C N per block and micro-batch): C = 128 and
 * micro-batches of 16 tokens; 2 layers, weights 1.71 MB. */
enum { WC = 128, WB = 1, WN = WB * T };

/* Bytes copied into the one simulated accelerator (of `mem` bytes) by 8
 * micro-batches in waves of `wave`. */
static uint64_t bytes_in(int wave, size_t mem)
{
    enum { K = 8 };
    int32_t tok[K * WN], tgt[K * WN];
    for (int i = 0; i < K * WN; i++)
        tok[i] = (7 * i + 3) % V, tgt[i] = (5 * i + 1) % V;
    det_runtime_init(-1, 1, mem, 0);
    tsr_gpt2_config_t c = tiny(1, 0);
    c.channels = WC;
    c.wave = wave;
    tsr_gpt2_t *m;
    OK(tsr_gpt2_create(&m, &c, WB, T));
    OK(tsr_gpt2_init_weights(m, 5));
    OK(tsr_gpt2_forward_backward(m, K, tok, tgt, 1.0f / K, NULL));
    OK(tsr_wait_all());
    tsr_node_stats_t s;
    OK(tsr_memory_node_stats(1, &s));
    tsr_gpt2_free(m);
    OK(tsr_shutdown());
    return s.bytes_in;
}

/* 2 MiB hold the weights (1.71 MB) but not with their gradients: one
 * micro-batch at a time streams most of them in every micro-batch's forward
 * and backward, a wave once per wave. Measured: 18.7, 12.3, 7.2, 3.5 MB for
 * waves of 1, 2, 4, 8. */
Test(wave, reads_the_weights_once_per_wave, .timeout = 120)
{
    size_t weights = 4 * (size_t)(V * WC + CTX * WC + L * (12 * WC * WC + 13 * WC) + 2 * WC);
    assert_waves_move_less(bytes_in, 2048 << 10, weights);
}

/* cfg.wave = 0: chosen at create (nn/wave.h), worked by hand for the tiny
 * model with recompute: 123 392 parameters, weights 8 bytes each (987 136),
 * state 16 (1 974 272); a slot 4 C N (L + 27) = 237 568 bytes. */
static int chosen(int nsim, size_t sim_mem, size_t host_mem)
{
    det_runtime_init(nsim ? -1 : 1, nsim, sim_mem, host_mem);
    tsr_gpt2_config_t c = tiny(1, 0);
    tsr_gpt2_t *m;
    OK(tsr_gpt2_create(&m, &c, B, T));
    cr_assert_eq(tsr_gpt2_num_params(m), 123392);
    int wave = tsr_gpt2_config(m)->wave;
    tsr_gpt2_free(m);
    OK(tsr_shutdown());
    return wave;
}

Test(wave, its_size_is_chosen_by_the_weights_and_the_host)
{
    cr_assert_eq(chosen(0, 0, 0), 1, "no accelerator");
    /* 2 x 1 MiB: 70 % is 1 468 006 bytes, more than the weights; the
     * state and three slots (2 686 976 bytes) are more than 60 % */
    cr_assert_eq(chosen(2, 1 << 20, 0), 1, "the weights stay on the accelerators");
    /* 2 x 2 MiB: 60 % is 2 516 582 bytes, still less than state + 3 slots */
    cr_assert_eq(chosen(2, 2 << 20, 0), 1, "the weights stay, no room for a second slot");
    /* 2 x 3 MiB: 60 % is 3 774 873 bytes: waves of two */
    cr_assert_eq(chosen(2, 3 << 20, 0), 2, "the weights stay, room for two slots");
    /* 2 x 256 KiB: 367 002 bytes, less than the weights */
    cr_assert_eq(chosen(2, 256 << 10, 0), 16, "an unbounded host: the most");
    /* 3/4 of (host + accelerators - state) = 3/4 (4 slots + 524 288) =
     * 4.66 slots, under half the host (6.15 slots) */
    size_t host = 1974272 + 237568 * 4;
    cr_assert_eq(chosen(2, 256 << 10, host), 4, "4 slots beside the state");
    /* 3/4 of the accelerators' 524 288 bytes: 1.66 slots */
    cr_assert_eq(chosen(2, 256 << 10, 1974272), 1, "no room beside the state");
    /* 3/4 of (host + accelerators - state) = 13.66 slots, half the host
     * 12.15: 12 */
    host = 1974272 + 237568 * 16;
    cr_assert_eq(chosen(2, 256 << 10, host), 12, "half the host");
}

Test(wave, misuse_is_refused_before_anything_runs)
{
    det_runtime_init(1, 0, 0, 0);
    tsr_gpt2_config_t c = tiny(1, 0);
    tsr_gpt2_t *m;
    c.wave = -1;
    cr_assert_eq(tsr_gpt2_create(&m, &c, B, T), TSR_EINVAL);
    cr_assert_null(m);
    cr_assert_not_null(strstr(tsr_error_message(), "wave"));
    c.wave = 4097;
    cr_assert_eq(tsr_gpt2_create(&m, &c, B, T), TSR_EINVAL);
    c.wave = 2;
    OK(tsr_gpt2_create(&m, &c, B, T));
    int32_t tok[3 * N], tgt[3 * N];
    micro_batches(tok, tgt, 3);
    cr_assert_eq(tsr_gpt2_forward_backward(m, 0, tok, tgt, 1.0f, NULL), TSR_EINVAL);
    cr_assert_eq(tsr_gpt2_forward_backward(m, 3, tok, NULL, 1.0f, NULL), TSR_EINVAL);
    cr_assert_eq(tsr_gpt2_forward_backward(m, 3, NULL, tgt, 1.0f, NULL), TSR_EINVAL);
    cr_assert_eq(tsr_gpt2_forward_backward(NULL, 3, tok, tgt, 1.0f, NULL), TSR_EINVAL);
    tok[2 * N + 5] = V; /* out of the vocabulary, in the last micro-batch */
    cr_assert_eq(tsr_gpt2_forward_backward(m, 3, tok, tgt, 1.0f, NULL), TSR_EINVAL);
    const char *where = NULL;
    cr_assert_eq(first_nonzero_grad(m, &where), -1, "a gradient changed: %s", where);
    tok[2 * N + 5] = 0;
    float losses[3];
    OK(tsr_gpt2_forward_backward(m, 3, tok, tgt, 1.0f, losses));
    cr_assert(losses[0] > 0.0f && losses[2] > 0.0f);
    tsr_gpt2_free(m);
    OK(tsr_shutdown());
}
