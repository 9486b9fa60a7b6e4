/* tests/mpi/dp_train.c — data-parallel GPT-2 under mpirun -np N (a plain
 * program: Criterion forks, MPI does not survive it). Every rank trains
 *   - a reference: a model without data parallelism on the combined batch
 *     of N x B sequences (the same on every rank: no communication),
 *   - a replica with data_parallel = 1 on its slice of B sequences
 *     (sequences r*B .. r*B+B-1 of the combined batch), zero = 0,
 *   - the same with zero = 1 (ZeRO-1),
 * with clipping and ignored targets spread unevenly over the ranks (their
 * target counts differ), and checks that the losses, the gradient norms and
 * every parameter of both replicas equal the reference's within float
 * rounding of sums in another order (losses and norms: 1e-5 relative;
 * parameters: see compare), and the two replicas each other's. Exit status 0 on every rank
 * when all holds; the first difference is printed with its rank.
 *
 * `dp_train --llama` runs the same checks on a small Llama (grouped-query
 * attention, RoPE, SwiGLU, untied head): both families train through one
 * trainer (nn/trainer.c), so data parallelism and ZeRO must hold for both.
 *
 * `dp_train --memory ZERO` instead trains a larger model two steps with
 * zero = ZERO and prints each rank's host memory peak (docs/data-parallel.md
 * has the figures). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/gpt2.h>
#include <tessera/llama.h>
#include <tessera/mpi.h>

enum { V = 300, CTX = 32, B = 2, T = 16, STEPS = 4 };
#define LR 3e-3f

static int rank_;

#define CHECK(call)                                                                     \
    do {                                                                                \
        int rc_ = (call);                                                               \
        if (rc_ != TSR_OK) {                                                            \
            fprintf(stderr, "rank %d: %s: %s\n", rank_, #call, tsr_error_message());    \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

static int close_enough(float x, float y)
{
    return fabsf(x - y) <= 1e-5f * (fabsf(x) + fabsf(y)) + 1e-6f;
}

static tsr_gpt2_config_t tiny(int dp, int zero)
{
    tsr_gpt2_config_t c = {.vocab_size = V, .context = CTX, .layers = 2, .heads = 2,
                           .channels = 32, .tile_vocab = 128, .data_parallel = dp,
                           .zero = zero};
    return c;
}

/* The model under test: GPT-2, or with --llama a Llama of like size; the
 * calls below are the two APIs' common ones. */
static int llama_;

typedef struct model {
    tsr_gpt2_t *g;
    tsr_llama_t *l;
} model_t;

static model_t make(int dp, int zero, int batch, int bf16)
{
    model_t m = {NULL, NULL};
    if (!llama_) {
        tsr_gpt2_config_t c = tiny(dp, zero);
        c.precision = bf16 ? TSR_GPT2_BF16 : TSR_GPT2_FP32;
        CHECK(tsr_gpt2_create(&m.g, &c, batch, T));
        CHECK(tsr_gpt2_init_weights(m.g, 42));
        return m;
    }
    tsr_llama_config_t c;
    tsr_llama_config_default(&c);
    c.vocab_size = V;
    c.hidden = 32;
    c.intermediate = 48;
    c.layers = 2;
    c.heads = 4;
    c.kv_heads = 2;
    c.max_positions = CTX;
    c.tile_vocab = 128;
    c.data_parallel = dp;
    c.zero = zero;
    c.precision = bf16 ? TSR_GPT2_BF16 : TSR_GPT2_FP32;
    CHECK(tsr_llama_create(&m.l, &c, batch, T));
    CHECK(tsr_llama_init_weights(m.l, 42));
    return m;
}

static void train_step(model_t *m, const int32_t *tok, const int32_t *tgt,
                       const tsr_adamw_config_t *opt, float *norm, float *loss)
{
    if (m->g) {
        CHECK(tsr_gpt2_zero_grad(m->g));
        CHECK(tsr_gpt2_forward(m->g, tok, tgt, NULL));
        CHECK(tsr_gpt2_backward(m->g, 1.0f));
        CHECK(tsr_gpt2_step(m->g, opt, LR, norm));
        CHECK(tsr_gpt2_loss(m->g, loss));
        return;
    }
    CHECK(tsr_llama_zero_grad(m->l));
    CHECK(tsr_llama_forward(m->l, tok, tgt, NULL));
    CHECK(tsr_llama_backward(m->l, 1.0f));
    CHECK(tsr_llama_step(m->l, opt, LR, norm));
    CHECK(tsr_llama_loss(m->l, loss));
}

static void release(model_t *m)
{
    if (m->g)
        CHECK(tsr_gpt2_free(m->g));
    else
        CHECK(tsr_llama_free(m->l));
}

/* The combined batch of step s: n sequences; targets ignored at every
 * (3 + rank of the sequence's slice)-th position, so counts differ. */
static void combined(int s, int n, int32_t *tok, int32_t *tgt)
{
    unsigned x = 1234u + 77u * (unsigned)s;
    for (int i = 0; i <= n * T; i++) {
        x = x * 1103515245u + 12345u;
        int id = (int)((x >> 8) % V);
        if (i < n * T)
            tok[i] = id;
        if (i > 0)
            tgt[i - 1] = id;
    }
    for (int i = 0; i < n * T; i++)
        if (i % (3 + i / (B * T)) == 0)
            tgt[i] = -1;
}

static float *params_of(const model_t *m, size_t *total)
{
    size_t n = m->g ? tsr_gpt2_num_params(m->g) : tsr_llama_num_params(m->l), at = 0;
    float *all = malloc(n * sizeof *all);
    if (!all)
        exit(1);
    int count = m->g ? tsr_gpt2_param_count(m->g) : tsr_llama_param_count(m->l);
    for (int i = 0; i < count; i++) {
        size_t k;
        if (m->g)
            CHECK(tsr_gpt2_get(m->g, tsr_gpt2_param_name(m->g, i), TSR_GPT2_PARAM, all + at,
                               &k));
        else
            CHECK(tsr_llama_get(m->l, tsr_llama_param_name(m->l, i), TSR_GPT2_PARAM,
                                all + at, &k));
        at += k;
    }
    *total = n;
    return all;
}

/* Parameters after STEPS AdamW updates. AdamW divides by sqrt(v): for a
 * weight whose gradient is near zero in a step (wte rows of tokens not in
 * the batch, a GELU unit almost off) the rounding of the sums in another
 * order changes that update by up to about lr, while every other weight
 * moves by float rounding. Seen on 2 ranks: up to 41 of 36 096 beyond, at
 * most 2.2e-5. So: all but 0.5 % within 1e-5 relative + 1e-6, and none
 * beyond 2 lr per step. The gradients' scale itself (1/N, the combined
 * target count) is checked by the loss and the norm, which AdamW's
 * invariance to scale would hide here. */
static int compare(const char *what, const float *x, const float *y, size_t n, float lr)
{
    size_t off = 0, worst = 0;
    for (size_t i = 0; i < n; i++) {
        float d = fabsf(x[i] - y[i]);
        off += d > 1e-5f * (fabsf(x[i]) + fabsf(y[i])) + 1e-6f;
        if (d > fabsf(x[worst] - y[worst]))
            worst = i;
    }
    float dmax = fabsf(x[worst] - y[worst]);
    if (rank_ == 0)
        printf("%s: %zu of %zu beyond rounding, the largest %.3g at %zu\n", what, off, n,
               (double)dmax, worst);
    if (off * 200 > n || dmax > 2.0f * lr * STEPS) {
        fprintf(stderr, "rank %d: %s: %zu of %zu differ, element %zu: %.9g vs %.9g\n", rank_,
                what, off, n, worst, x[worst], y[worst]);
        return 1;
    }
    return 0;
}

static int equality(int size)
{
    model_t ms[3] = {make(0, 0, size * B, 0), make(1, 0, B, 0), make(1, 1, B, 0)};
    tsr_adamw_config_t opt;
    tsr_adamw_config_default(&opt);
    opt.grad_clip = 0.5f; /* clips: the norms are about 1 to 3 */
    int32_t *tok = malloc((size_t)size * B * T * sizeof *tok);
    int32_t *tgt = malloc((size_t)size * B * T * sizeof *tgt);
    int bad = 0;
    for (int s = 0; s < STEPS && !bad; s++) {
        combined(s, size * B, tok, tgt);
        float loss[3], norm[3];
        for (int k = 0; k < 3; k++) {
            size_t off = k ? (size_t)rank_ * B * T : 0; /* replicas: their slice */
            train_step(&ms[k], tok + off, tgt + off, &opt, &norm[k], &loss[k]);
        }
        for (int k = 1; k < 3; k++)
            if (!close_enough(loss[k], loss[0]) || !close_enough(norm[k], norm[0])) {
                fprintf(stderr, "rank %d: step %d, zero %d: loss %.9g norm %.9g, reference "
                        "loss %.9g norm %.9g\n", rank_, s, k - 1, loss[k], norm[k], loss[0],
                        norm[0]);
                bad = 1;
            }
        if (rank_ == 0)
            printf("step %d: loss %.6f (reference %.6f), norm %.6f (reference %.6f)\n", s,
                   loss[1], loss[0], norm[1], norm[0]);
    }
    size_t n;
    float *pr = params_of(&ms[0], &n), *p0 = params_of(&ms[1], &n), *p1 = params_of(&ms[2], &n);
    bad |= compare("zero 0 against the reference", p0, pr, n, LR);
    bad |= compare("zero 1 against the reference", p1, pr, n, LR);
    bad |= compare("zero 1 against zero 0", p1, p0, n, LR);
    free(pr);
    free(p0);
    free(p1);
    free(tok);
    free(tgt);
    for (int k = 0; k < 3; k++)
        release(&ms[k]);
    return bad;
}

/* bf16 mixed precision: ZeRO's ranks make the bf16 copies of the tiles they
 * receive themselves, the owners in their AdamW task; zero 1 must train as
 * zero 0 (both data parallel, so the same bf16 roundings of the same
 * weights). */
static int bf16_zero(void)
{
    model_t ms[2] = {make(1, 0, B, 1), make(1, 1, B, 1)};
    int size = tsr_mpi_size(), bad = 0;
    /* no clipping: the norms of zero 0 and 1 are sums in other orders, and
     * a last-bit difference of the clip scale flips bf16 roundings */
    tsr_adamw_config_t opt;
    tsr_adamw_config_default(&opt);
    opt.grad_clip = 0.0f;
    int32_t *tok = malloc((size_t)size * B * T * sizeof *tok);
    int32_t *tgt = malloc((size_t)size * B * T * sizeof *tgt);
    for (int s = 0; s < STEPS && !bad; s++) {
        combined(s, size * B, tok, tgt);
        float loss[2], norm[2];
        for (int k = 0; k < 2; k++) {
            size_t off = (size_t)rank_ * B * T;
            train_step(&ms[k], tok + off, tgt + off, &opt, NULL, &loss[k]);
            norm[k] = 0.0f;
        }
        if (!close_enough(loss[1], loss[0]) || !close_enough(norm[1], norm[0])) {
            fprintf(stderr, "rank %d: bf16 step %d: zero 1 loss %.9g norm %.9g, zero 0 loss "
                    "%.9g norm %.9g\n", rank_, s, loss[1], norm[1], loss[0], norm[0]);
            bad = 1;
        }
    }
    size_t n;
    float *p0 = params_of(&ms[0], &n), *p1 = params_of(&ms[1], &n);
    bad |= compare("bf16: zero 1 against zero 0", p1, p0, n, LR);
    free(p0);
    free(p1);
    free(tok);
    free(tgt);
    for (int k = 0; k < 2; k++)
        release(&ms[k]);
    return bad;
}

/* Host memory peak of two steps of a larger model with ZeRO on or off. */
static int memory(int size, int zero)
{
    tsr_gpt2_config_t c = {.vocab_size = 4096, .context = 64, .layers = 4, .heads = 4,
                           .channels = 256, .data_parallel = 1, .zero = zero};
    tsr_gpt2_t *m;
    CHECK(tsr_gpt2_create(&m, &c, 2, 64));
    CHECK(tsr_gpt2_init_weights(m, 1));
    int32_t tok[2 * 64], tgt[2 * 64];
    for (int s = 0; s < 2; s++) {
        combined(s + 100 * rank_, 8, tok, tgt); /* any tokens: only memory counts */
        CHECK(tsr_gpt2_forward(m, tok, tgt, NULL));
        CHECK(tsr_gpt2_backward(m, 1.0f));
        CHECK(tsr_gpt2_step(m, NULL, 1e-3f, NULL));
    }
    float loss;
    CHECK(tsr_gpt2_loss(m, &loss));
    tsr_node_stats_t st;
    CHECK(tsr_memory_node_stats(0, &st));
    size_t params = tsr_gpt2_num_params(m);
    printf("{\"figure\": \"dp_host_peak\", \"ranks\": %d, \"rank\": %d, \"zero\": %d, "
           "\"params\": %zu, \"peak_bytes\": %zu, \"loss\": %.6f}\n", size, rank_, zero, params,
           st.peak, loss);
    CHECK(tsr_gpt2_free(m));
    return 0;
}

int main(int argc, char **argv)
{
    CHECK(tsr_mpi_init(&argc, &argv));
    /* TESSERA_DP_ORDERED=1: rank-order sums (bitwise reproducible) */
    const char *ord = getenv("TESSERA_DP_ORDERED");
    CHECK(tsr_mpi_set_ordered(ord && !strcmp(ord, "1")));
    rank_ = tsr_mpi_rank();
    int size = tsr_mpi_size();
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 1;
    cfg.bind = 0;
    CHECK(tsr_init(&cfg));
    llama_ = argc == 2 && !strcmp(argv[1], "--llama");
    int bad = argc == 3 && !strcmp(argv[1], "--memory") ? memory(size, atoi(argv[2]))
                                                         : equality(size) | bf16_zero();
    tsr_shutdown();
    CHECK(tsr_mpi_finalize());
    if (!bad && rank_ == 0)
        printf("%d ranks: data-parallel %s training equals the combined batch's\n", size,
               llama_ ? "Llama" : "GPT-2");
    return bad;
}
