/* bench-llama-step — time Tessera's Llama training step, through the public
 * API only (tessera.h, llama.h). bench/llama/torch_llama.py is the same
 * step in PyTorch, and bench/llama/run.sh runs both side by side.
 *
 * One step = tsr_llama_zero_grad, tsr_llama_forward with targets,
 * tsr_llama_backward(1.0), tsr_llama_step, then tsr_llama_loss (reading the
 * loss after the step is submitted, as bench-gpt2-step does) (AdamW with
 * the default configuration: global grad-norm clip 1.0, weight decay 0.1 on
 * the matrices, none on the norm weights). --warmup untimed steps, then
 * --steps timed ones, the clock stopped after tsr_wait_all(); the clock is
 * the runtime's (tsr_time). Weights: tsr_llama_init_weights(--seed)
 * (transformers' initialisation; the peer draws the same distribution from
 * torch's generator, so the first losses agree to about ln V, not to the
 * digit). Tokens: the LCG of tools/gpt2_reference.py, as the peer's.
 *
 * Output: a line for people and one JSON line
 *   {"bench":"llama-step","case":TAG,"impl":"tessera","workers":N,...,
 *    "s_per_step":S,"tok_per_s":R,...,"recompute":0|1,"precision":"fp32"|"bf16",
 *    "host_peak":BYTES}
 * with tok_per_s = batch * seq / s_per_step; "cpu_others" is the share of
 * the machine's CPU time that other processes took while it was timed
 * (null when that was under half a second); host_peak the most bytes the
 * runtime had allocated in host memory (node 0) during the run. The fields
 * are bench-gpt2-step's, with the Llama shape's names.
 */
#include <tessera/llama.h>
#include <tessera/tessera.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "bench/train_steps.h"

typedef struct options {
    int layers, heads, kv_heads, hidden, intermediate, vocab, ctx, head_dim, tie;
    double rope_theta, norm_eps;
    int llama3; /* rope_llama3, with the four values below */
    double rope_factor, rope_low, rope_high;
    int rope_orig;
    int batch, seq, steps, warmup, threads;
    int tile_tokens, tile_vocab, tile_hidden;
    long seed;
    double lr;
    const char *sched;
    const char *tag;
    int recompute;
    int precision; /* TSR_GPT2_FP32 or TSR_GPT2_BF16 */
} options_t;

static void usage(void)
{
    fprintf(stderr,
            "usage: bench-llama-step [options]\n"
            "  --layers N --heads N --kv-heads N --hidden N --intermediate N --vocab N\n"
            "  --ctx N (max positions) --head-dim N (0: hidden / heads) --tie 0|1\n"
            "                      model shape (default the 125M shape of run.sh:\n"
            "                      12 12 4 768 2048 32000 2048, untied)\n"
            "  --rope-theta X      RoPE base (default 10000)\n"
            "  --llama3-scaling F,LOW,HIGH,ORIG | none   Llama 3 RoPE scaling (default none)\n"
            "  --norm-eps X        RMSNorm epsilon (default 1e-5)\n"
            "  --batch N --seq N   micro-batch (default 4 x 64)\n"
            "  --steps N           timed steps (default 3)\n"
            "  --warmup N          untimed steps first (default 1)\n"
            "  --threads N         CPU workers (tsr_config.ncpu; default: one per core)\n"
            "  --sched NAME        scheduling policy (default the runtime's)\n"
            "  --json-tag TAG      the JSON line's case (default LxHxC/V)\n"
            "  --tile-tokens N --tile-vocab N --tile-hidden N   tile sizes (0: derived)\n"
            "  --recompute 0|1     recompute the activations in backward (default 0)\n"
            "  --precision fp32|bf16  the GEMMs' arithmetic (default fp32; bf16: mixed\n"
            "                      precision, as GPT-2's)\n"
            "  --lr X --seed N     learning rate (3e-4), token and weight seed (1)\n");
}

static int failed(int rc, const char *what)
{
    if (rc == TSR_OK)
        return 0;
    fprintf(stderr, "bench-llama-step: %s: %s (%s)\n", what, tsr_strerror(rc),
            tsr_error_message());
    return 1;
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_double(const char *s, double *out)
{
    char *end = NULL;
    double v = strtod(s, &end);
    if (!*s || *end || !(v >= 0) || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, options_t *o)
{
    struct {
        const char *name;
        int *dst;
        long lo;
    } ints[] = {
        {"--layers", &o->layers, 1},
        {"--heads", &o->heads, 1},
        {"--kv-heads", &o->kv_heads, 1},
        {"--hidden", &o->hidden, 1},
        {"--intermediate", &o->intermediate, 1},
        {"--vocab", &o->vocab, 1},
        {"--ctx", &o->ctx, 1},
        {"--head-dim", &o->head_dim, 0},
        {"--batch", &o->batch, 1},
        {"--seq", &o->seq, 1},
        {"--steps", &o->steps, 1},
        {"--warmup", &o->warmup, 0},
        {"--threads", &o->threads, 0},
        {"--tile-tokens", &o->tile_tokens, 0},
        {"--tile-vocab", &o->tile_vocab, 0},
        {"--tile-hidden", &o->tile_hidden, 0},
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            exit(0);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "bench-llama-step: %s: missing value or unknown option\n", a);
            return -1;
        }
        const char *v = argv[++i];
        int done = 0;
        for (size_t k = 0; k < sizeof ints / sizeof ints[0] && !done; k++) {
            if (strcmp(a, ints[k].name))
                continue;
            long x;
            if (parse_int(v, ints[k].lo, 1L << 30, &x)) {
                fprintf(stderr, "bench-llama-step: %s: bad value '%s'\n", a, v);
                return -1;
            }
            *ints[k].dst = (int)x;
            done = 1;
        }
        if (done)
            continue;
        if (!strcmp(a, "--sched")) {
            o->sched = v;
        } else if (!strcmp(a, "--tie") || !strcmp(a, "--recompute")) {
            if (strcmp(v, "0") && strcmp(v, "1")) {
                fprintf(stderr, "bench-llama-step: %s: 0 or 1, not '%s'\n", a, v);
                return -1;
            }
            *(!strcmp(a, "--tie") ? &o->tie : &o->recompute) = v[0] - '0';
        } else if (!strcmp(a, "--precision")) {
            if (!strcmp(v, "fp32") || !strcmp(v, "bf16"))
                o->precision = !strcmp(v, "bf16") ? TSR_GPT2_BF16 : TSR_GPT2_FP32;
            else {
                fprintf(stderr, "bench-llama-step: --precision: fp32 or bf16, not '%s'\n", v);
                return -1;
            }
        } else if (!strcmp(a, "--llama3-scaling")) {
            if (!strcmp(v, "none")) {
                o->llama3 = 0;
            } else if (sscanf(v, "%lf,%lf,%lf,%d", &o->rope_factor, &o->rope_low,
                              &o->rope_high, &o->rope_orig) == 4 &&
                       o->rope_factor > 0 && o->rope_high > o->rope_low && o->rope_orig > 0) {
                o->llama3 = 1;
            } else {
                fprintf(stderr, "bench-llama-step: --llama3-scaling: FACTOR,LOW,HIGH,ORIG "
                                "or none, not '%s'\n", v);
                return -1;
            }
        } else if (!strcmp(a, "--rope-theta") || !strcmp(a, "--norm-eps") ||
                   !strcmp(a, "--lr")) {
            double *dst = !strcmp(a, "--rope-theta") ? &o->rope_theta
                          : !strcmp(a, "--norm-eps") ? &o->norm_eps
                                                     : &o->lr;
            if (parse_double(v, dst)) {
                fprintf(stderr, "bench-llama-step: %s: bad value '%s'\n", a, v);
                return -1;
            }
        } else if (!strcmp(a, "--json-tag")) {
            o->tag = v;
        } else if (!strcmp(a, "--seed")) {
            if (parse_int(v, 0, 1L << 30, &o->seed)) {
                fprintf(stderr, "bench-llama-step: --seed: bad value '%s'\n", v);
                return -1;
            }
        } else {
            fprintf(stderr, "bench-llama-step: unknown option %s\n", a);
            return -1;
        }
    }
    if (o->heads % o->kv_heads) {
        fprintf(stderr, "bench-llama-step: --kv-heads must divide --heads\n");
        return -1;
    }
    if (!o->head_dim && o->hidden % o->heads) {
        fprintf(stderr, "bench-llama-step: --hidden must be a multiple of --heads "
                        "(or give --head-dim)\n");
        return -1;
    }
    if (o->seq > o->ctx) {
        fprintf(stderr, "bench-llama-step: --seq must be <= --ctx\n");
        return -1;
    }
    return 0;
}

/* The token generator of tools/gpt2_reference.py: a 64-bit LCG from
 * x = seed, id = (x >> 33) mod vocab, batch rows of seq + 1 ids. */
static void make_tokens(const options_t *o, int32_t *inputs, int32_t *targets)
{
    uint64_t x = (uint64_t)o->seed;
    for (int b = 0; b < o->batch; b++) {
        for (int t = 0; t <= o->seq; t++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            int32_t id = (int32_t)((x >> 33) % (uint64_t)o->vocab);
            if (t < o->seq)
                inputs[(size_t)b * o->seq + t] = id;
            if (t > 0)
                targets[(size_t)b * o->seq + t - 1] = id;
        }
    }
}

typedef bench_steps_t result_t;

/* One step for bench_train_steps (bench/train_steps.h). */
static int one_step(void *model, const int32_t *inputs, const int32_t *targets, float lr,
                    float *loss)
{
    tsr_llama_t *m = model;
    tsr_adamw_config_t opt;
    tsr_adamw_config_default(&opt);
    float norm = 0;
    if (failed(tsr_llama_zero_grad(m), "tsr_llama_zero_grad") ||
        failed(tsr_llama_forward(m, inputs, targets, NULL), "tsr_llama_forward") ||
        failed(tsr_llama_backward(m, 1.0f), "tsr_llama_backward") ||
        failed(tsr_llama_step(m, &opt, lr, &norm), "tsr_llama_step") ||
        failed(tsr_llama_loss(m, loss), "tsr_llama_loss"))
        return TSR_EINVAL;
    return TSR_OK;
}

/* --warmup untimed steps, then --steps timed ones. */
static int run_steps(tsr_llama_t *m, const options_t *o, const int32_t *inputs,
                     const int32_t *targets, result_t *r)
{
    return bench_train_steps("bench-llama-step", m, one_step, o->warmup, o->steps, (float)o->lr,
                             inputs, targets, r);
}

static const char *precision_name(int precision)
{
    return precision == TSR_GPT2_BF16 ? "bf16" : "fp32";
}

static void report(tsr_llama_t *m, const options_t *o, const char *tag, const result_t *r)
{
    const tsr_llama_config_t *eff = tsr_llama_config(m);
    const char *sched = o->sched ? o->sched : getenv("TESSERA_SCHED");
    bench_step_run_t d = {tag, tsr_llama_num_params(m), o->batch, o->seq, o->warmup, o->steps,
                          {eff->tile_tokens, eff->tile_vocab, eff->tile_hidden}, eff->recompute,
                          precision_name(eff->precision), bench_loadavg()};
    bench_step_print_line(&d, r);
    printf("{\"bench\":\"llama-step\",\"case\":\"%s\",\"impl\":\"tessera\",\"workers\":%d,"
           "\"sched\":%s%s%s,\"layers\":%d,\"heads\":%d,\"kv_heads\":%d,\"hidden\":%d,"
           "\"intermediate\":%d,\"vocab\":%d,\"ctx\":%d,\"tied\":%d,",
           tag, tsr_worker_count(), sched ? "\"" : "", sched ? sched : "null", sched ? "\"" : "",
           eff->layers, eff->heads, eff->kv_heads, eff->hidden, eff->intermediate,
           eff->vocab_size, eff->max_positions, eff->tie_embeddings);
    bench_step_print_json_tail(&d, r);
}

int main(int argc, char **argv)
{
    options_t o = {.layers = 12, .heads = 12, .kv_heads = 4, .hidden = 768,
                   .intermediate = 2048, .vocab = 32000, .ctx = 2048, .rope_theta = 10000.0,
                   .norm_eps = 1e-5, .batch = 4, .seq = 64, .steps = 3, .warmup = 1,
                   .seed = 1, .lr = 3e-4};
    if (parse_args(argc, argv, &o)) {
        usage();
        return 2;
    }
    char tag[64];
    if (o.tag)
        snprintf(tag, sizeof tag, "%s", o.tag);
    else
        snprintf(tag, sizeof tag, "%dx%dx%d/%d", o.layers, o.heads, o.hidden, o.vocab);

    size_t ntok = (size_t)o.batch * o.seq;
    int32_t *inputs = malloc(ntok * sizeof *inputs);
    int32_t *targets = malloc(ntok * sizeof *targets);
    if (!inputs || !targets) {
        fprintf(stderr, "bench-llama-step: out of memory\n");
        free(inputs);
        free(targets);
        return 1;
    }
    make_tokens(&o, inputs, targets);

    tsr_config_t rc;
    tsr_config_init(&rc);
    rc.ncpu = o.threads;
    if (o.sched)
        rc.sched = o.sched;
    if (failed(tsr_init(&rc), "tsr_init")) {
        free(inputs);
        free(targets);
        return 1;
    }

    tsr_llama_config_t mc;
    tsr_llama_config_default(&mc);
    mc.vocab_size = o.vocab;
    mc.hidden = o.hidden;
    mc.intermediate = o.intermediate;
    mc.layers = o.layers;
    mc.heads = o.heads;
    mc.kv_heads = o.kv_heads;
    mc.head_dim = o.head_dim;
    mc.max_positions = o.ctx;
    mc.rms_norm_eps = o.norm_eps;
    mc.rope_theta = o.rope_theta;
    mc.rope_llama3 = o.llama3;
    if (o.llama3) {
        mc.rope_factor = o.rope_factor;
        mc.rope_low_freq_factor = o.rope_low;
        mc.rope_high_freq_factor = o.rope_high;
        mc.rope_original_max_positions = o.rope_orig;
    }
    mc.tie_embeddings = o.tie;
    mc.tile_tokens = o.tile_tokens;
    mc.tile_vocab = o.tile_vocab;
    mc.tile_hidden = o.tile_hidden;
    mc.recompute = o.recompute;
    mc.precision = o.precision;

    int status = 1;
    result_t r;
    tsr_llama_t *m = NULL;
    if (!failed(tsr_llama_create(&m, &mc, o.batch, o.seq), "tsr_llama_create") &&
        !failed(tsr_llama_init_weights(m, (uint64_t)o.seed), "tsr_llama_init_weights") &&
        run_steps(m, &o, inputs, targets, &r) == 0) {
        report(m, &o, tag, &r);
        status = 0;
    }
    if (m)
        tsr_llama_free(m);
    if (failed(tsr_shutdown(), "tsr_shutdown"))
        status = 1;
    free(inputs);
    free(targets);
    return status;
}
