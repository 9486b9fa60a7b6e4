/* tests/nn/test_llama_generate.c — Llama generation with a KV cache: the
 * greedy ids of three prompts of different lengths (5, 11 and 1 tokens)
 * decoded side by side equal the float64 reference's
 * (tests/nn/fixtures/llama_tiny_gqa_generate.safetensors, written by
 * tools/llama_reference.py --generate, which checks its own KV cache
 * against full forwards), and every step's logits equal a full forward
 * pass of the model over the sequence so far. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/llama.h>

#include "nn/io/safetensors.h"

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

static const char *src(void)
{
    const char *v = getenv("TESSERA_SOURCE_ROOT");
    return v && *v ? v : ".";
}

static int argmax(const float *z, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (z[i] > z[b])
            b = i;
    return b;
}

/* The logits after the last of n tokens by a full forward pass */
static void full_forward(tsr_llama_t *m, const int32_t *ids, int n, float *out)
{
    OK(tsr_llama_forward(m, ids, NULL, NULL));
    OK(tsr_llama_logits(m, 0, n - 1, out));
}

Test(llama_generate, greedy_ids_equal_the_reference_and_full_forwards)
{
    rt_start();
    char init[1024], path[1024];
    snprintf(init, sizeof init, "%s/tests/nn/fixtures/llama_tiny_gqa_init", src());
    snprintf(path, sizeof path, "%s/tests/nn/fixtures/llama_tiny_gqa_generate.safetensors",
             src());
    tsr__st_reader_t *r;
    OK(tsr__st_open(&r, path));
    const tsr__st_tensor_t *tp = tsr__st_find(r, "prompts"), *tg = tsr__st_find(r, "generated");
    cr_assert(tp && tg);
    int B = (int)tp->shape[0], P = (int)tp->shape[1], NEW = (int)tg->shape[1];
    int32_t *prompts = malloc((size_t)B * P * sizeof *prompts), lens[8];
    int32_t *want = malloc((size_t)B * NEW * sizeof *want);
    cr_assert(B <= 8);
    OK(tsr__st_read_i32(r, tp, prompts, (size_t)B * P));
    OK(tsr__st_read_i32(r, tsr__st_find(r, "prompt_lens"), lens, (size_t)B));
    OK(tsr__st_read_i32(r, tg, want, (size_t)B * NEW));
    float *margins = malloc((size_t)B * NEW * sizeof *margins);
    OK(tsr__st_read_f32(r, tsr__st_find(r, "margins"), margins, (size_t)B * NEW));
    tsr__st_close(r);

    tsr_llama_config_t cfg;
    OK(tsr_llama_read_config(init, &cfg));
    int maxlen = P + NEW, V = cfg.vocab_size;
    tsr_llama_t *m;
    OK(tsr_llama_create(&m, &cfg, 1, 1));
    OK(tsr_llama_load(m, init));
    tsr_llama_gen_t *g;
    OK(tsr_llama_gen_create(&g, m, B, maxlen));
    float *z = malloc((size_t)B * V * sizeof *z), *full = malloc((size_t)V * sizeof *full);
    int32_t next[8], *seq = malloc((size_t)B * maxlen * sizeof *seq);
    for (int b = 0; b < B; b++) {
        OK(tsr_llama_gen_prefill(g, b, prompts + (size_t)b * P, lens[b], z + (size_t)b * V));
        cr_expect_eq(tsr_llama_gen_length(g, b), lens[b]);
        memcpy(seq + (size_t)b * maxlen, prompts + (size_t)b * P, (size_t)lens[b] * 4);
        next[b] = argmax(z + (size_t)b * V, V);
    }
    /* full forwards over each sequence so far, in models of that length */
    double worst = 0;
    for (int s = 0; s < NEW; s++) {
        for (int b = 0; b < B; b++) {
            int len = tsr_llama_gen_length(g, b);
            cr_expect_eq(next[b], want[(size_t)b * NEW + s],
                         "slot %d step %d: id %d, the reference's %d (its margin %g)", b, s,
                         next[b], want[(size_t)b * NEW + s], margins[(size_t)b * NEW + s]);
            seq[(size_t)b * maxlen + len] = next[b];
        }
        OK(tsr_llama_gen_step(g, next, z));
        for (int b = 0; b < B; b++) {
            if (s % 5 == 0) { /* every 5th step: the cache against a full pass */
                double mx = 0, d = 0;
                tsr_llama_t *f;
                int len = tsr_llama_gen_length(g, b);
                OK(tsr_llama_create(&f, &cfg, 1, len));
                OK(tsr_llama_load(f, init));
                full_forward(f, seq + (size_t)b * maxlen, len, full);
                OK(tsr_llama_free(f));
                for (int v = 0; v < V; v++) {
                    mx = fmax(mx, fabs(full[v]));
                    d = fmax(d, fabs((double)full[v] - z[(size_t)b * V + v]));
                }
                worst = fmax(worst, d / mx);
                cr_expect(d <= 1e-5 * mx, "slot %d step %d: cached logits %g off a full pass",
                          b, s, d / mx);
            }
            next[b] = argmax(z + (size_t)b * V, V);
        }
    }
    cr_log_info("KV cache against full forwards: worst relative difference %.3g", worst);
    /* misuse: a full slot, a bad id, a freed state */
    int32_t bad[8] = {V, -1, -1, -1, -1, -1, -1, -1};
    cr_expect_eq(tsr_llama_gen_step(g, bad, NULL), TSR_EINVAL);
    OK(tsr_llama_gen_reset(g, 0));
    cr_expect_eq(tsr_llama_gen_length(g, 0), 0);
    OK(tsr_llama_gen_free(g));
    cr_expect_eq(tsr_llama_gen_step(g, next, z), TSR_EINVAL);
    OK(tsr_llama_free(m));
    free(prompts), free(want), free(margins), free(z), free(full), free(seq);
    rt_stop();
}
