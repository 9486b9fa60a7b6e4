/* tests/nn/test_gpt2_bf16.c — bf16 mixed precision (tsr_gpt2_config_t.precision)
 * against the same model in fp32 from the same weights: the logits and every
 * parameter gradient of one step within bf16 tolerance, the loss over 50
 * AdamW steps within 1% at every step, the bf16 weight copies following
 * tsr_gpt2_set, recomputation giving the same training, and bad values of
 * the switch refused.
 *
 * The reference is the fp32 model (an independent computation: fp32 GEMMs on
 * fp32 activations). The tolerance is NNTile's for bf16: a relative norm
 * error ||x_bf16 - x_fp32|| / ||x_fp32|| <= 1.6e-2; bf16 keeps 8 mantissa
 * bits (a relative rounding of 2^-9 = 2e-3 per value), and a gradient passes
 * through a dozen rounded products. Under the CUDA emulation the suite runs
 * again on emulated GPUs alone (tests/nn/meson.build), whose cuBLAS rounds
 * bf16 inputs, so that the CUDA codelets compute both models. */
#include "grad_diff.h"
#include "tiny_gpt2.h"

#include <math.h>

enum { LONG_STEPS = 50 };

#define REL_TOL 1.6e-2

static void rt_start(void)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 2;
    cfg.bind = 0;
    OK(tsr_init(&cfg));
}

static tsr_gpt2_t *model_tiled(int precision, int recompute, uint64_t seed, int tile_channels)
{
    tsr_gpt2_config_t c = tiny(recompute, 0);
    c.precision = precision;
    c.tile_channels = tile_channels;
    tsr_gpt2_t *m;
    OK(tsr_gpt2_create(&m, &c, B, T));
    cr_assert_eq(tsr_gpt2_config(m)->precision, precision);
    OK(tsr_gpt2_init_weights(m, seed));
    return m;
}

static tsr_gpt2_t *model(int precision, int recompute, uint64_t seed)
{
    return model_tiled(precision, recompute, seed, 0);
}

/* ||a - b||_2 / ||b||_2 in double */
static double rel_norm(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t k = 0; k < n; k++) {
        double d = (double)a[k] - b[k];
        num += d * d;
        den += (double)b[k] * b[k];
    }
    return sqrt(num) / (sqrt(den) + 1e-30);
}

/* Every logit of the last forward, (V) per token, tokens in order. */
static float *all_logits(tsr_gpt2_t *m)
{
    float *z = malloc(sizeof(float) * V * N);
    cr_assert_not_null(z);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            OK(tsr_gpt2_logits(m, b, t, z + (size_t)(b * T + t) * V));
    return z;
}

/* The bf16 model in channel tiles of tc rows (0: one tile) against the fp32
 * model in one. */
static void bf16_case(int tc)
{
    cr_log_info("bf16 in channel tiles of %d rows", tc);
    tsr_gpt2_t *ref = model(TSR_GPT2_FP32, 0, 7), *bf = model_tiled(TSR_GPT2_BF16, 0, 7, tc);
    int32_t tok[N], tgt[N];
    batch(tok, tgt);
    float loss_ref, loss_bf;
    OK(tsr_gpt2_zero_grad(ref));
    OK(tsr_gpt2_zero_grad(bf));
    OK(tsr_gpt2_forward(ref, tok, tgt, &loss_ref));
    OK(tsr_gpt2_forward(bf, tok, tgt, &loss_bf));
    float *zr = all_logits(ref), *zb = all_logits(bf);
    double e = rel_norm(zb, zr, (size_t)V * N);
    cr_log_info("logits: relative norm error %.3g; loss %.6f (fp32) %.6f (bf16)", e,
                (double)loss_ref, (double)loss_bf);
    cr_assert(e <= REL_TOL, "logits differ by %g", e);
    cr_assert(e > 0, "bf16 logits equal fp32 ones bit for bit: no bf16 product ran");
    cr_assert(fabs(loss_bf - loss_ref) <= 0.01 * fabs(loss_ref), "loss %g vs %g",
              (double)loss_bf, (double)loss_ref);
    OK(tsr_gpt2_backward(ref, 1.0f));
    OK(tsr_gpt2_backward(bf, 1.0f));
    double worst = 0;
    for (int i = 0; i < tsr_gpt2_param_count(ref); i++) {
        const char *name = tsr_gpt2_param_name(ref, i);
        size_t n, n2;
        OK(tsr_gpt2_get(ref, name, TSR_GPT2_GRAD, NULL, &n));
        OK(tsr_gpt2_get(bf, name, TSR_GPT2_GRAD, NULL, &n2));
        cr_assert_eq(n, n2);
        float *gr = malloc(n * sizeof *gr), *gb = malloc(n * sizeof *gb);
        cr_assert(gr && gb);
        OK(tsr_gpt2_get(ref, name, TSR_GPT2_GRAD, gr, &n));
        OK(tsr_gpt2_get(bf, name, TSR_GPT2_GRAD, gb, &n));
        double g = rel_norm(gb, gr, n);
        worst = fmax(worst, g);
        cr_assert(g <= REL_TOL, "gradient of %s differs by %g", name, g);
        free(gr), free(gb);
    }
    cr_log_info("gradients: worst relative norm error %.3g", worst);
    free(zr), free(zb);
    OK(tsr_gpt2_free(ref));
    OK(tsr_gpt2_free(bf));
}

Test(gpt2_bf16, logits_and_gradients_within_bf16_tolerance)
{
    rt_start();
    bf16_case(0);
    bf16_case(C / 2); /* the LayerNorms' bf16 producers over channel tiles */
    OK(tsr_shutdown());
}

/* LONG_STEPS AdamW steps on `batch` (grad clipping on, the default), each
 * step's loss in loss[]. */
static void train_long(tsr_gpt2_t *m, float *loss)
{
    int32_t tok[N], tgt[N];
    batch(tok, tgt);
    for (int s = 0; s < LONG_STEPS; s++) {
        OK(tsr_gpt2_zero_grad(m));
        OK(tsr_gpt2_forward(m, tok, tgt, &loss[s]));
        OK(tsr_gpt2_backward(m, 1.0f));
        OK(tsr_gpt2_step(m, NULL, 1e-3f, NULL));
    }
    OK(tsr_wait_all());
}

Test(gpt2_bf16, loss_curve_within_one_percent_over_50_steps)
{
    rt_start();
    tsr_gpt2_t *ref = model(TSR_GPT2_FP32, 0, 7), *bf = model(TSR_GPT2_BF16, 0, 7);
    float lr[LONG_STEPS], lb[LONG_STEPS];
    train_long(ref, lr);
    train_long(bf, lb);
    double worst = 0;
    for (int s = 0; s < LONG_STEPS; s++) {
        double e = fabs((double)lb[s] - lr[s]) / fabs((double)lr[s]);
        worst = fmax(worst, e);
        cr_assert(e <= 0.01, "step %d: loss %.6f (bf16) vs %.6f (fp32)", s, (double)lb[s],
                  (double)lr[s]);
    }
    /* the curve must be one of training: the loss falls well below ln V */
    cr_assert(lr[LONG_STEPS - 1] < 0.5f * lr[0], "fp32 loss %g → %g", (double)lr[0],
              (double)lr[LONG_STEPS - 1]);
    cr_log_info("50 steps: loss %.4f → %.4f (fp32), %.4f → %.4f (bf16), worst gap %.3g%%",
                (double)lr[0], (double)lr[LONG_STEPS - 1], (double)lb[0],
                (double)lb[LONG_STEPS - 1], 100 * worst);
    /* the master weights stay fp32: after training they are not all bf16
     * values (a bf16 value has its low 16 bits zero) */
    size_t np;
    float *p = read_params(bf, &np);
    size_t off_grid = 0;
    for (size_t k = 0; k < np; k++) {
        uint32_t u;
        memcpy(&u, &p[k], 4);
        off_grid += (u & 0xffffu) != 0;
    }
    cr_assert(off_grid > np / 2, "only %zu of %zu master weights are not bf16 values",
              off_grid, np);
    free(p);
    OK(tsr_gpt2_free(ref));
    OK(tsr_gpt2_free(bf));
    OK(tsr_shutdown());
}

/* The bf16 copies follow tsr_gpt2_set: a model made from seed 7, run once,
 * then given seed 9's weights through tsr_gpt2_set computes bit for bit what
 * a model made from seed 9 computes (the same bf16 copies, the same tasks). */
Test(gpt2_bf16, copies_follow_set)
{
    rt_start();
    tsr_gpt2_t *a = model(TSR_GPT2_BF16, 0, 7), *b = model(TSR_GPT2_BF16, 0, 9);
    int32_t tok[N], tgt[N];
    batch(tok, tgt);
    float la, lb;
    OK(tsr_gpt2_forward(a, tok, tgt, &la)); /* a's copies made from seed 7 */
    for (int i = 0; i < tsr_gpt2_param_count(b); i++) {
        const char *name = tsr_gpt2_param_name(b, i);
        size_t n;
        float *x = gpt2_part(b, name, TSR_GPT2_PARAM, &n);
        OK(tsr_gpt2_set(a, name, TSR_GPT2_PARAM, x, n));
        free(x);
    }
    OK(tsr_gpt2_forward(a, tok, tgt, &la));
    OK(tsr_gpt2_forward(b, tok, tgt, &lb));
    cr_assert(memcmp(&la, &lb, sizeof la) == 0, "loss %.9g after set vs %.9g", (double)la,
              (double)lb);
    float *za = all_logits(a), *zb = all_logits(b);
    cr_assert(memcmp(za, zb, sizeof(float) * V * N) == 0, "logits differ after set");
    free(za), free(zb);
    OK(tsr_gpt2_free(a));
    OK(tsr_gpt2_free(b));
    OK(tsr_shutdown());
}

/* Recomputation re-runs the bf16 producers on the same tiles in the same
 * order: on CPU workers the same training bit for bit (tiny_gpt2.h says
 * why the sums are order-free). GPUs' GEMMs fold beta C into their sums, so
 * there the order of the two additions into a wte gradient column matters,
 * in fp32 as in bf16: one step's gradients then agree within 1e-5. */
Test(gpt2_bf16, recompute_gives_the_same_training)
{
    rt_start();
    tsr_gpt2_t *keep = model(TSR_GPT2_BF16, 0, 7), *re = model(TSR_GPT2_BF16, 1, 7);
    if (tsr_memory_node_count() == 1) {
        float lk[STEPS], lr[STEPS];
        tiny_train(keep, lk);
        tiny_train(re, lr);
        size_t nk, nr;
        float *pk = read_params(keep, &nk), *pr = read_params(re, &nr);
        assert_same_training(lk, pk, nk, lr, pr, nr, "bf16 recompute");
        free(pk), free(pr);
    } else {
        int32_t tok[N], tgt[N];
        batch(tok, tgt);
        tsr_gpt2_t *both[2] = {keep, re};
        for (int k = 0; k < 2; k++) {
            OK(tsr_gpt2_zero_grad(both[k]));
            OK(tsr_gpt2_forward(both[k], tok, tgt, NULL));
            OK(tsr_gpt2_backward(both[k], 1.0f));
        }
        double d = grad_rel_diff(re, keep);
        cr_log_info("accelerators: recompute's gradients differ by %.3g", d);
        cr_assert(d < 1e-5, "gradients differ by %g", d);
    }
    OK(tsr_gpt2_free(keep));
    OK(tsr_gpt2_free(re));
    OK(tsr_shutdown());
}

Test(gpt2_bf16, a_bad_precision_is_refused)
{
    rt_start();
    tsr_gpt2_t *m = (tsr_gpt2_t *)&m;
    int bad[] = {2, -1, 1 << 30};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tsr_gpt2_config_t c = tiny(0, 0);
        c.precision = bad[i];
        cr_assert_eq(tsr_gpt2_create(&m, &c, B, T), TSR_EINVAL, "precision %d", bad[i]);
        cr_assert_null(m, "no model for precision %d", bad[i]);
        cr_assert(strstr(tsr_error_message(), "precision"), "%s", tsr_error_message());
    }
    OK(tsr_shutdown());
}
