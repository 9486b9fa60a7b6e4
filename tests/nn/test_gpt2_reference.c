/* tests/nn/test_gpt2_reference.c — Tessera's GPT-2 against the PyTorch
 * reference (tools/gpt2_reference.py): logits, loss and every gradient at
 * the initial weights, then the losses, gradient norms and parameters of 10
 * AdamW steps, and the logits of a checkpoint we saved as the reference
 * reads it.
 *
 * The fixture (tests/nn/fixtures) holds our initial weights and the
 * reference's outputs. Where /usr/bin/python3 has torch, the reference is
 * run again now and its fresh outputs are used instead (so the committed
 * file cannot drift from the script); elsewhere the committed outputs are.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/gpt2.h>

#include "nn/io/safetensors.h"
#include "tests/kernels/kt_util.h"
#include "tests/nn/reference.h"

#define OK(call) cr_assert_eq((call), TSR_OK, "%s: %s", #call, tsr_error_message())

static void rt_start(void)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 2;
    cfg.bind = 0;
    OK(tsr_init(&cfg));
}

static void rt_stop(void)
{
    tsr_shutdown();
}

TestSuite(gpt2_reference, .init = rt_start, .fini = rt_stop, .timeout = 600);

/* Our logits of the last forward as [B, T, V]. */
static float *our_logits(tsr_gpt2_t *m, int B, int T, int V)
{
    float *z = malloc((size_t)B * T * V * sizeof *z);
    cr_assert_not_null(z);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            OK(tsr_gpt2_logits(m, b, t, z + ((size_t)b * T + t) * V));
    return z;
}

static size_t compare_params(tsr_gpt2_t *m, tsr__st_reader_t *ref, int which, const char *prefix,
                             double atol_frac, double rtol, double floor_abs)
{
    size_t bad = 0;
    for (int i = 0; i < tsr_gpt2_param_count(m); i++) {
        const char *name = tsr_gpt2_param_name(m, i);
        char key[128];
        snprintf(key, sizeof key, "%s%s", prefix, name);
        size_t n, nr;
        OK(tsr_gpt2_get(m, name, which, NULL, &n));
        float *ours = malloc(n * sizeof *ours), *want = read_f32(ref, key, &nr);
        cr_assert_eq(n, nr, "%s: %zu elements, reference %zu", key, n, nr);
        OK(tsr_gpt2_get(m, name, which, ours, &n));
        bad += count_bad(key, ours, want, n, atol_frac, rtol, floor_abs);
        free(ours);
        free(want);
    }
    return bad;
}

/* The model from `init` in tiles with edges on every axis they can have
 * them, tile_channels rows per channel tile (0: derived, one tile here),
 * against the reference's outputs in `expected` (torch: the reference can
 * run again, on our checkpoint). */
static void match_reference(const char *init, const char *expected, int torch, int tile_channels)
{
    const char *src = env_or("TESSERA_SOURCE_ROOT", ".");
    const char *tmp = env_or("TESSERA_BUILD_DIR", "/tmp");
    char ckpt[1024], relog[1024], cmd[4096];
    cr_log_info("channel tiles of %d rows", tile_channels);
    tsr__st_reader_t *ref;
    OK(tsr__st_open(&ref, expected));
    const tsr__st_tensor_t *in = tsr__st_find(ref, "inputs");
    cr_assert_not_null(in);
    int B = (int)in->shape[0], T = (int)in->shape[1];
    int32_t *tok = malloc((size_t)B * T * sizeof *tok), *tgt = malloc((size_t)B * T * sizeof *tgt);
    OK(tsr__st_read_i32(ref, in, tok, (size_t)B * T));
    OK(tsr__st_read_i32(ref, tsr__st_find(ref, "targets"), tgt, (size_t)B * T));

    /* tiles with edges on every axis they can have them */
    tsr_gpt2_config_t cfg;
    OK(tsr_gpt2_read_config(init, &cfg));
    cfg.tile_tokens = T / 2;
    cfg.tile_vocab = 128;
    cfg.tile_hidden = 96;
    cfg.tile_channels = tile_channels;
    tsr_gpt2_t *m;
    OK(tsr_gpt2_create(&m, &cfg, B, T));
    OK(tsr_gpt2_load(m, init));
    int V = cfg.vocab_size;

    /* forward and backward at the initial weights: ~1e-4 relative */
    float loss;
    OK(tsr_gpt2_zero_grad(m));
    OK(tsr_gpt2_forward(m, tok, tgt, &loss));
    size_t n;
    float *want = read_f32(ref, "loss", &n);
    cr_expect(fabsf(loss - want[0]) <= 1e-4f * fabsf(want[0]), "loss %.7f vs reference %.7f",
              loss, want[0]);
    free(want);
    float *z = our_logits(m, B, T, V);
    want = read_f32(ref, "logits", &n);
    cr_assert_eq(n, (size_t)B * T * V);
    cr_expect_eq(count_bad("logits", z, want, n, 1e-4, 1e-4, 0), 0, "logits differ");
    free(z);
    free(want);
    OK(tsr_gpt2_backward(m, 1.0f));
    cr_expect_eq(compare_params(m, ref, TSR_GPT2_GRAD, "grad.", 1e-4, 1e-4, 0), 0,
                 "gradients differ");

    /* AdamW steps with the reference's hyperparameters: losses within 1e-3 */
    int steps = (int)meta_num(ref, "steps"), warmup = (int)meta_num(ref, "warmup");
    int total = (int)meta_num(ref, "total");
    float max_lr = (float)meta_num(ref, "max_lr"), min_lr = (float)meta_num(ref, "min_lr");
    tsr_adamw_config_t opt = {(float)meta_num(ref, "beta1"), (float)meta_num(ref, "beta2"),
                              (float)meta_num(ref, "eps"), (float)meta_num(ref, "weight_decay"),
                              (float)meta_num(ref, "grad_clip")};
    float *ref_losses = read_f32(ref, "step_losses", &n);
    cr_assert_eq(n, (size_t)steps);
    float *ref_norms = read_f32(ref, "grad_norms", &n);
    float *ref_lrs = read_f32(ref, "lrs", &n);
    for (int s = 0; s < steps; s++) {
        float norm, lr = tsr_lr_schedule(s, warmup, total, max_lr, min_lr);
        cr_expect(fabsf(lr - ref_lrs[s]) <= 1e-6f * ref_lrs[s], "lr %g vs %g at %d", lr,
                  ref_lrs[s], s);
        OK(tsr_gpt2_zero_grad(m));
        OK(tsr_gpt2_forward(m, tok, tgt, &loss));
        OK(tsr_gpt2_backward(m, 1.0f));
        OK(tsr_gpt2_step(m, &opt, lr, &norm));
        cr_log_info("step %d: loss %.6f (reference %.6f), norm %.5f (%.5f)", s, loss,
                    ref_losses[s], norm, ref_norms[s]);
        cr_expect(fabsf(loss - ref_losses[s]) <= 1e-3f * fabsf(ref_losses[s]),
                  "step %d loss %.6f vs reference %.6f", s, loss, ref_losses[s]);
        cr_expect(fabsf(norm - ref_norms[s]) <= 1e-3f * ref_norms[s],
                  "step %d gradient norm %.6f vs reference %.6f", s, norm, ref_norms[s]);
    }
    cr_assert_lt(ref_losses[steps - 1], ref_losses[0], "the reference's loss falls");
    /* The key bias has an exactly zero gradient (softmax is invariant to it);
     * AdamW turns the rounding noise of both sides (~1e-11) into steps of
     * ~lr * 1e-3, so those parameters wander by ~1e-5: an absolute floor. */
    cr_expect_eq(compare_params(m, ref, TSR_GPT2_PARAM, "final.", 1e-3, 1e-3, 2e-5), 0,
                 "parameters after %d steps differ", steps);

    /* a checkpoint we save loads in the reference and gives our logits */
    OK(tsr_gpt2_forward(m, tok, NULL, NULL));
    z = our_logits(m, B, T, V);
    snprintf(ckpt, sizeof ckpt, "%s/gpt2_tiny_trained_%d.safetensors", tmp, tile_channels);
    OK(tsr_gpt2_save(m, ckpt));
    if (torch) {
        snprintf(relog, sizeof relog, "%s/gpt2_tiny_trained_%d.logits.safetensors", tmp,
                 tile_channels);
        snprintf(cmd, sizeof cmd,
                 "/usr/bin/python3 '%s/tools/gpt2_reference.py' --logits '%s' --inputs '%s' "
                 "--out '%s' >/dev/null",
                 src, ckpt, expected, relog);
        cr_assert_eq(system(cmd), 0, "the reference could not read our checkpoint: %s", cmd);
        tsr__st_reader_t *lr;
        OK(tsr__st_open(&lr, relog));
        want = read_f32(lr, "logits", &n);
        cr_expect_eq(count_bad("logits of our checkpoint", z, want, n, 1e-4, 1e-4, 0), 0,
                     "the reference computes other logits from our checkpoint");
        tsr__st_close(lr);
    } else {
        want = read_f32(ref, "final_logits", &n);
        cr_expect_eq(count_bad("final logits", z, want, n, 1e-3, 1e-3, 0), 0,
                     "logits after training differ");
    }
    free(want);
    free(z);
    free(ref_losses);
    free(ref_norms);
    free(ref_lrs);
    free(tok);
    free(tgt);
    tsr__st_close(ref);
    tsr_gpt2_free(m);
}

Test(gpt2_reference, forward_backward_and_adamw_steps_match_pytorch)
{
    const char *src = env_or("TESSERA_SOURCE_ROOT", ".");
    const char *tmp = env_or("TESSERA_BUILD_DIR", "/tmp");
    char init[1024], expected[1024], cmd[4096];
    snprintf(init, sizeof init, "%s/tests/nn/fixtures/gpt2_tiny_init.safetensors", src);
    snprintf(expected, sizeof expected, "%s/tests/nn/fixtures/gpt2_tiny_expected.safetensors",
             src);
    int torch = have_torch();
    if (torch) {
        snprintf(expected, sizeof expected, "%s/gpt2_tiny_expected.fresh.safetensors", tmp);
        snprintf(cmd, sizeof cmd,
                 "/usr/bin/python3 '%s/tools/gpt2_reference.py' --init '%s' --out '%s' "
                 "--threads 2 >/dev/null",
                 src, init, expected);
        cr_assert_eq(system(cmd), 0, "the PyTorch reference failed: %s", cmd);
        cr_log_info("PyTorch found: the reference was run again (%s)", expected);
    } else {
        cr_log_info("no torch for /usr/bin/python3: comparing with the committed outputs");
    }

    /* C = 64 in heads of 16: one channel tile, two, and one per head (the
     * LayerNorms' sums over tiles, the attention per head row tile) */
    match_reference(init, expected, torch, 0);
    match_reference(init, expected, torch, 32);
    match_reference(init, expected, torch, 16);
}
