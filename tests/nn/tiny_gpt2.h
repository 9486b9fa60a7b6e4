/* tests/nn/tiny_gpt2.h — the small GPT-2 whose training is bitwise
 * reproducible, shared by the tests that compare two ways of running the
 * same training (recomputation, the disk tier): its configuration, its
 * batch, its training loop, and the bitwise comparison of two runs.
 *
 * Why bitwise: one token tile and one vocabulary tile make every
 * order-free (COMMUTE) sum of the backward pass receive one product, or at
 * most two additions onto zero, which commute exactly; the clipping norm's
 * summation order is kept out of the update (grad_clip 0).
 *
 * Never hide a failure here: every helper asserts what it relies on.
 */
#ifndef TSR_TESTS_NN_TINY_GPT2_H
#define TSR_TESTS_NN_TINY_GPT2_H

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/gpt2.h>

#define OK(call) cr_assert_eq((call), TSR_OK, "%s: %s", #call, tsr_error_message())

enum { V = 300, CTX = 64, L = 2, C = 64, B = 2, T = 16, N = B * T, STEPS = 3 };

/* tile_tokens 0: derived (one token tile of N). */
static inline tsr_gpt2_config_t tiny(int recompute, int tile_tokens)
{
    tsr_gpt2_config_t c = {.vocab_size = V, .context = CTX, .layers = L, .heads = 4,
                           .channels = C, .tile_tokens = tile_tokens,
                           .recompute = recompute};
    return c;
}

/* N distinct tokens (7 is prime to V) and pseudo-random targets. */
static inline void batch(int32_t *tok, int32_t *tgt)
{
    unsigned s = 17;
    for (int i = 0; i < N; i++) {
        tok[i] = (7 * i + 3) % V;
        s = s * 1103515245u + 12345u;
        tgt[i] = (int)((s >> 8) % V);
    }
}

/* A model of `tiny` with the derived tiles, checked: one token tile, one
 * vocabulary tile; weights from seed 7. */
static inline tsr_gpt2_t *tiny_model(int recompute)
{
    tsr_gpt2_config_t c = tiny(recompute, 0);
    tsr_gpt2_t *m;
    OK(tsr_gpt2_create(&m, &c, B, T));
    cr_assert_eq(tsr_gpt2_config(m)->tile_tokens, N, "one token tile (derived)");
    cr_assert_eq(tsr_gpt2_config(m)->tile_vocab, V, "one vocabulary tile (derived)");
    cr_assert_eq(tsr_gpt2_config(m)->recompute, recompute);
    OK(tsr_gpt2_init_weights(m, 7));
    return m;
}

/* STEPS AdamW steps on `batch`, each loss in loss[]; norm: NULL, or where
 * each step's gradient norm goes (asking for it makes every update wait
 * for the whole backward pass: gpt2.h). */
static inline void tiny_train_norm(tsr_gpt2_t *m, float loss[STEPS], float *norm)
{
    int32_t tok[N], tgt[N];
    batch(tok, tgt);
    tsr_adamw_config_t opt;
    tsr_adamw_config_default(&opt);
    opt.grad_clip = 0.0f; /* the norm's summation order would enter the update */
    for (int s = 0; s < STEPS; s++) {
        OK(tsr_gpt2_zero_grad(m));
        OK(tsr_gpt2_forward(m, tok, tgt, NULL));
        OK(tsr_gpt2_backward(m, 1.0f));
        OK(tsr_gpt2_step(m, &opt, 1e-3f, norm ? &norm[s] : NULL));
        OK(tsr_gpt2_loss(m, &loss[s]));
    }
    OK(tsr_wait_all());
}

static inline void tiny_train(tsr_gpt2_t *m, float loss[STEPS])
{
    tiny_train_norm(m, loss, NULL);
}

/* Every parameter, concatenated in checkpoint order (read back to the
 * host); the first error, if any. */
static inline int read_params_rc(tsr_gpt2_t *m, float **out, size_t *count)
{
    size_t total = tsr_gpt2_num_params(m), at = 0;
    float *p = malloc(total * sizeof *p);
    cr_assert_not_null(p);
    int rc = TSR_OK;
    for (int i = 0; i < tsr_gpt2_param_count(m) && !rc; i++) {
        size_t n;
        const char *name = tsr_gpt2_param_name(m, i);
        rc = tsr_gpt2_get(m, name, TSR_GPT2_PARAM, NULL, &n);
        cr_assert(rc || at + n <= total);
        if (!rc)
            rc = tsr_gpt2_get(m, name, TSR_GPT2_PARAM, p + at, &n);
        at += n;
    }
    if (rc) {
        free(p);
        return rc;
    }
    cr_assert_eq(at, total);
    *out = p;
    *count = total;
    return TSR_OK;
}

static inline float *read_params(tsr_gpt2_t *m, size_t *count)
{
    float *p = NULL;
    OK(read_params_rc(m, &p, count));
    return p;
}

/* Two runs' losses and parameters, equal bit for bit. */
static inline void assert_same_training(const float *loss_a, const float *pa, size_t na,
                                        const float *loss_b, const float *pb, size_t nb,
                                        const char *what)
{
    for (int s = 0; s < STEPS; s++)
        cr_assert(memcmp(&loss_a[s], &loss_b[s], sizeof(float)) == 0,
                  "%s: step %d loss %.9g vs %.9g", what, s, loss_a[s], loss_b[s]);
    cr_assert_eq(na, nb);
    for (size_t k = 0; k < na; k++)
        cr_assert(memcmp(&pa[k], &pb[k], sizeof(float)) == 0,
                  "%s: parameter element %zu: %.9g vs %.9g", what, k, pa[k], pb[k]);
}

#endif
