/* bench-gpt2-step — time Tessera's GPT-2 training step, through the public
 * API only (tessera.h, gpt2.h). bench/gpt2/torch_step.py is the same step in
 * PyTorch, and bench/gpt2/run.sh runs both side by side.
 *
 * One step = tsr_gpt2_zero_grad, tsr_gpt2_forward with targets,
 * tsr_gpt2_backward(1.0), tsr_gpt2_step, then tsr_gpt2_loss (reading the loss
 * after the step is submitted, as tessera-train does)
 * (AdamW with the default configuration: global grad-norm clip 1.0, weight
 * decay 0.1 on the matrices). --warmup untimed steps, then --steps timed
 * ones, the clock stopped after tsr_wait_all(); the clock is the runtime's
 * (tsr_time), so under TESSERA_SIMULATE the figures are simulated time. Tokens: the LCG of
 * tools/gpt2_reference.py, so the first loss matches the peer's.
 *
 * Output: a line for people and one JSON line
 *   {"bench":"gpt2-step","case":TAG,"impl":"tessera","workers":N,...,
 *    "s_per_step":S,"tok_per_s":R,...,"recompute":0|1,"precision":"fp32"|"bf16",
 *    "host_peak":BYTES}
 * with tok_per_s = batch * seq / s_per_step; "cpu_others" is the share of
 * the machine's CPU time that other processes took while it was timed (null
 * when that was under half a second); host_peak the most bytes the runtime
 * had allocated in host memory (node 0) during the run, every tile of the
 * model included (activations are runtime-allocated handles). --precision
 * bf16 times the mixed-precision step (tsr_gpt2_config_t.precision).
 *
 * --recompute both runs the steps twice, each under a fresh runtime (so
 * that each has its own peak): keeping the activations, then recomputing
 * them in backward (tsr_gpt2_config_t.recompute), and adds a table and one
 * JSON line per figure comparing the two:
 *   {"bench":"gpt2-recompute","case":TAG,"metric":"host_peak"|"s_per_step"|…,
 *    "keep":K,"recompute":R,"ratio":R/K,...}
 * with, for the memory, the activation bytes that recomputation should
 * save by the count in activation_bytes() ("estimate"); "cpu_s_per_step"
 * is the process's CPU seconds per step: the work done, less disturbed
 * than the wall time by other processes on the machine.
 */
#include <tessera/gpt2.h>
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
    int layers, heads, channels, vocab, ctx;
    int batch, seq, steps, warmup, threads;
    int tile_tokens, tile_vocab, tile_hidden, tile_channels;
    long seed;
    double lr;
    const char *sched;
    const char *tag;
    int recompute; /* 0, 1, or 2: both, compared */
    int precision; /* TSR_GPT2_FP32 or TSR_GPT2_BF16 */
    int micro;     /* micro-batches per step (1: forward + backward) */
    int wave;      /* tsr_gpt2_config_t.wave (0: the model's choice) */
} options_t;

static void usage(void)
{
    fprintf(stderr,
            "usage: bench-gpt2-step [options]\n"
            "  --layers N --heads N --channels N --vocab N --ctx N\n"
            "                      model shape (default the 124M GPT-2: 12 12 768 50257 1024)\n"
            "  --batch N --seq N   micro-batch (default 4 x 64)\n"
            "  --steps N           timed steps (default 5)\n"
            "  --warmup N          untimed steps first (default 1)\n"
            "  --threads N         CPU workers (tsr_config.ncpu; default: one per core)\n"
            "  --sched NAME        scheduling policy (default the runtime's)\n"
            "  --json-tag TAG      the JSON line's case (default LxHxC/V)\n"
            "  --tile-tokens N --tile-vocab N --tile-hidden N --tile-channels N\n"
            "                       tile sizes (0: derived)\n"
            "  --recompute 0|1|both  recompute the activations in backward (default 0);\n"
            "                      both: each mode under its own runtime, compared\n"
            "  --precision fp32|bf16  the GEMMs' arithmetic (default fp32; bf16: mixed\n"
            "                      precision, docs/gpt2.md)\n"
            "  --micro K           micro-batches per step, run by tsr_gpt2_forward_backward\n"
            "                      (default 1: tsr_gpt2_forward + _backward)\n"
            "  --wave W            micro-batches per wave (default 0: the model's choice;\n"
            "                      docs/gpt2.md, \"Waves\")\n"
            "  --lr X --seed N     learning rate (3e-4), token and weight seed (1)\n");
}

static int failed(int rc, const char *what)
{
    if (rc == TSR_OK)
        return 0;
    fprintf(stderr, "bench-gpt2-step: %s: %s (%s)\n", what, tsr_strerror(rc),
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

static int parse_args(int argc, char **argv, options_t *o)
{
    struct {
        const char *name;
        int *dst;
        long lo;
    } ints[] = {
        {"--layers", &o->layers, 1},      {"--heads", &o->heads, 1},
        {"--channels", &o->channels, 1},  {"--vocab", &o->vocab, 1},
        {"--ctx", &o->ctx, 1},            {"--batch", &o->batch, 1},
        {"--seq", &o->seq, 1},            {"--steps", &o->steps, 1},
        {"--warmup", &o->warmup, 0},      {"--threads", &o->threads, 0},
        {"--tile-tokens", &o->tile_tokens, 0}, {"--tile-vocab", &o->tile_vocab, 0},
        {"--tile-hidden", &o->tile_hidden, 0}, {"--micro", &o->micro, 1},
        {"--wave", &o->wave, 0},          {"--tile-channels", &o->tile_channels, 0},
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            exit(0);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "bench-gpt2-step: %s: missing value or unknown option\n", a);
            return -1;
        }
        const char *v = argv[++i];
        int done = 0;
        for (size_t k = 0; k < sizeof ints / sizeof ints[0] && !done; k++) {
            if (strcmp(a, ints[k].name))
                continue;
            long x;
            if (parse_int(v, ints[k].lo, 1L << 30, &x)) {
                fprintf(stderr, "bench-gpt2-step: %s: bad value '%s'\n", a, v);
                return -1;
            }
            *ints[k].dst = (int)x;
            done = 1;
        }
        if (done)
            continue;
        if (!strcmp(a, "--sched")) {
            o->sched = v;
        } else if (!strcmp(a, "--recompute")) {
            if (!strcmp(v, "0") || !strcmp(v, "1"))
                o->recompute = v[0] - '0';
            else if (!strcmp(v, "both"))
                o->recompute = 2;
            else {
                fprintf(stderr, "bench-gpt2-step: --recompute: 0, 1 or both, not '%s'\n", v);
                return -1;
            }
        } else if (!strcmp(a, "--precision")) {
            if (!strcmp(v, "fp32") || !strcmp(v, "bf16"))
                o->precision = !strcmp(v, "bf16") ? TSR_GPT2_BF16 : TSR_GPT2_FP32;
            else {
                fprintf(stderr, "bench-gpt2-step: --precision: fp32 or bf16, not '%s'\n", v);
                return -1;
            }
        } else if (!strcmp(a, "--json-tag")) {
            o->tag = v;
        } else if (!strcmp(a, "--seed")) {
            if (parse_int(v, 0, 1L << 30, &o->seed)) {
                fprintf(stderr, "bench-gpt2-step: --seed: bad value '%s'\n", v);
                return -1;
            }
        } else if (!strcmp(a, "--lr")) {
            char *end = NULL;
            o->lr = strtod(v, &end);
            if (!*v || *end || !(o->lr >= 0)) {
                fprintf(stderr, "bench-gpt2-step: --lr: bad value '%s'\n", v);
                return -1;
            }
        } else {
            fprintf(stderr, "bench-gpt2-step: unknown option %s\n", a);
            return -1;
        }
    }
    if (o->channels % o->heads) {
        fprintf(stderr, "bench-gpt2-step: --channels must be a multiple of --heads\n");
        return -1;
    }
    if (o->seq > o->ctx) {
        fprintf(stderr, "bench-gpt2-step: --seq must be <= --ctx\n");
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

/* What one step runs: the model and its micro-batches per step. */
typedef struct step_ctx {
    tsr_gpt2_t *m;
    int micro;
} step_ctx_t;

/* One step for bench_train_steps (bench/train_steps.h); inputs, targets:
 * micro micro-batches side by side. */
static int one_step(void *ctx, const int32_t *inputs, const int32_t *targets, float lr,
                    float *loss)
{
    const step_ctx_t *c = ctx;
    tsr_gpt2_t *m = c->m;
    tsr_adamw_config_t opt;
    tsr_adamw_config_default(&opt);
    float norm = 0;
    if (failed(tsr_gpt2_zero_grad(m), "tsr_gpt2_zero_grad"))
        return TSR_EINVAL;
    if (c->micro == 1 ? failed(tsr_gpt2_forward(m, inputs, targets, NULL), "tsr_gpt2_forward") ||
                            failed(tsr_gpt2_backward(m, 1.0f), "tsr_gpt2_backward")
                      : failed(tsr_gpt2_forward_backward(m, c->micro, inputs, targets,
                                                         1.0f / (float)c->micro, NULL),
                               "tsr_gpt2_forward_backward"))
        return TSR_EINVAL;
    if (failed(tsr_gpt2_step(m, &opt, lr, &norm), "tsr_gpt2_step") ||
        failed(tsr_gpt2_loss(m, loss), "tsr_gpt2_loss"))
        return TSR_EINVAL;
    return TSR_OK;
}

/* --warmup untimed steps, then --steps timed ones. */
static int run_steps(tsr_gpt2_t *m, const options_t *o, const int32_t *inputs,
                     const int32_t *targets, result_t *r)
{
    step_ctx_t c = {m, o->micro};
    return bench_train_steps("bench-gpt2-step", &c, one_step, o->warmup, o->steps, (float)o->lr,
                             inputs, targets, r);
}

static const char *precision_name(int precision)
{
    return precision == TSR_GPT2_BF16 ? "bf16" : "fp32";
}

static void report(tsr_gpt2_t *m, const options_t *o, const char *tag, const result_t *r)
{
    const tsr_gpt2_config_t *eff = tsr_gpt2_config(m);
    const char *sched = o->sched ? o->sched : getenv("TESSERA_SCHED");
    /* a step's sequences: micro micro-batches of batch */
    bench_step_run_t d = {tag, tsr_gpt2_num_params(m), o->batch * o->micro, o->seq, o->warmup,
                          o->steps,
                          {eff->tile_tokens, eff->tile_vocab, eff->tile_hidden}, eff->recompute,
                          precision_name(eff->precision), bench_loadavg()};
    bench_step_print_line(&d, r);
    printf("{\"bench\":\"gpt2-step\",\"case\":\"%s\",\"impl\":\"tessera\",\"workers\":%d,"
           "\"sched\":%s%s%s,\"layers\":%d,\"heads\":%d,\"channels\":%d,\"vocab\":%d,"
           "\"ctx\":%d,\"micro\":%d,\"wave\":%d,",
           tag, tsr_worker_count(), sched ? "\"" : "", sched ? sched : "null", sched ? "\"" : "",
           o->layers, o->heads, o->channels, o->vocab, o->ctx, o->micro, eff->wave);
    bench_step_print_json_tail(&d, r);
}

/* The bytes of one block's activations that recomputation drops between
 * the forward and the block's backward, counted from the tensors of
 * nn/gpt2.c (N = batch x seq tokens, C channels, H heads, 4 bytes each):
 *   ln1 (C, N)      ln1_mean, ln1_rstd (1, N) each
 *   qkv (3C, N)     att_lse (H, N)  yb (C, N): the attention's output
 *   res1 (C, N)     ln2 (C, N)      ln2_mean, ln2_rstd (1, N) each
 *   fch, fcg (4C, N) each
 * = 4 N (15 C + H + 4) (fp32: the attention writes yb in place; bf16 adds
 * its fp32 original atty and halves others). The block's input x (C, N) is
 * kept in both modes.
 * Keeping, every block's set is alive when backward starts; recomputing,
 * one set (shared by the blocks) at a time: the peak should fall by
 * (layers - 1) sets. */
static double activation_bytes(const options_t *o)
{
    return 4.0 * o->batch * o->seq * (15.0 * o->channels + o->heads + 4.0);
}

/* One mode under its own runtime (its own peak): create, train, report. */
static int run_mode(const options_t *o, int recompute, const char *tag, const int32_t *inputs,
                    const int32_t *targets, result_t *r)
{
    tsr_config_t rc;
    tsr_config_init(&rc);
    rc.ncpu = o->threads;
    if (o->sched)
        rc.sched = o->sched;
    if (failed(tsr_init(&rc), "tsr_init"))
        return 1;

    tsr_gpt2_config_t mc;
    tsr_gpt2_config_default(&mc);
    mc.layers = o->layers;
    mc.heads = o->heads;
    mc.channels = o->channels;
    mc.vocab_size = o->vocab;
    mc.context = o->ctx;
    mc.tile_tokens = o->tile_tokens;
    mc.tile_vocab = o->tile_vocab;
    mc.tile_hidden = o->tile_hidden;
    mc.tile_channels = o->tile_channels;
    mc.recompute = recompute;
    mc.precision = o->precision;
    mc.wave = o->wave;

    int status = 1;
    tsr_gpt2_t *m = NULL;
    if (!failed(tsr_gpt2_create(&m, &mc, o->batch, o->seq), "tsr_gpt2_create") &&
        !failed(tsr_gpt2_init_weights(m, (uint64_t)o->seed), "tsr_gpt2_init_weights") &&
        run_steps(m, o, inputs, targets, r) == 0) {
        report(m, o, tag, r);
        status = 0;
    }
    if (m)
        tsr_gpt2_free(m);
    if (failed(tsr_shutdown(), "tsr_shutdown"))
        status = 1;
    return status;
}

/* --recompute both: the two runs side by side. */
static void compare(const options_t *o, const char *tag, const result_t *keep,
                    const result_t *re)
{
    double sk = keep->total / o->steps, sr = re->total / o->steps;
    double pk = (double)keep->host_peak, pr = (double)re->host_peak;
    double est = (o->layers - 1) * activation_bytes(o);
    printf("\n%-14s %16s %16s %10s\n", tag, "keep", "recompute", "ratio");
    printf("%-14s %16.4f %16.4f %10.3f\n", "s/step", sk, sr, sr / sk);
    printf("%-14s %16.4f %16.4f %10.3f\n", "min s/step", keep->min_step, re->min_step,
           re->min_step / keep->min_step);
    printf("%-14s %16.4f %16.4f %10.3f   (all workers' CPU time)\n", "cpu s/step",
           keep->cpu / o->steps, re->cpu / o->steps, re->cpu / keep->cpu);
    printf("%-14s %15.0f%% %15.0f%%   (CPU time other processes took)\n", "others",
           keep->others >= 0 ? 100 * keep->others : 0.0,
           re->others >= 0 ? 100 * re->others : 0.0);
    printf("%-14s %16.2f %16.2f %10.3f\n", "host peak MiB", pk / 1048576.0, pr / 1048576.0,
           pr / pk);
    printf("%-14s %16.2f (estimate %.2f: %d blocks x %.2f MiB of activations)\n",
           "saved MiB", (pk - pr) / 1048576.0, est / 1048576.0, o->layers - 1,
           activation_bytes(o) / 1048576.0);
    printf("{\"bench\":\"gpt2-recompute\",\"case\":\"%s\",\"metric\":\"s_per_step\","
           "\"keep\":%.6g,\"recompute\":%.6g,\"ratio\":%.4f,\"keep_min\":%.6g,"
           "\"recompute_min\":%.6g}\n",
           tag, sk, sr, sr / sk, keep->min_step, re->min_step);
    printf("{\"bench\":\"gpt2-recompute\",\"case\":\"%s\",\"metric\":\"cpu_s_per_step\","
           "\"keep\":%.6g,\"recompute\":%.6g,\"ratio\":%.4f}\n",
           tag, keep->cpu / o->steps, re->cpu / o->steps, re->cpu / keep->cpu);
    printf("{\"bench\":\"gpt2-recompute\",\"case\":\"%s\",\"metric\":\"host_peak\","
           "\"keep\":%.0f,\"recompute\":%.0f,\"ratio\":%.4f,\"saved\":%.0f,"
           "\"estimate\":%.0f}\n",
           tag, pk, pr, pr / pk, pk - pr, est);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    options_t o = {.layers = 12, .heads = 12, .channels = 768, .vocab = 50257,
                   .ctx = 1024, .batch = 4, .seq = 64, .steps = 5, .warmup = 1,
                   .threads = 0, .seed = 1, .lr = 3e-4, .micro = 1};
    if (parse_args(argc, argv, &o)) {
        usage();
        return 2;
    }
    char tag[64];
    if (o.tag)
        snprintf(tag, sizeof tag, "%s", o.tag);
    else
        snprintf(tag, sizeof tag, "%dx%dx%d/%d", o.layers, o.heads, o.channels, o.vocab);

    size_t ntok = (size_t)o.batch * o.seq;
    int32_t *inputs = malloc(ntok * (size_t)o.micro * sizeof *inputs);
    int32_t *targets = malloc(ntok * (size_t)o.micro * sizeof *targets);
    if (!inputs || !targets) {
        fprintf(stderr, "bench-gpt2-step: out of memory\n");
        free(inputs);
        free(targets);
        return 1;
    }
    make_tokens(&o, inputs, targets);
    for (int k = 1; k < o.micro; k++) { /* the same micro-batch again: the timing's the point */
        memcpy(inputs + (size_t)k * ntok, inputs, ntok * sizeof *inputs);
        memcpy(targets + (size_t)k * ntok, targets, ntok * sizeof *targets);
    }

    int status = 0;
    result_t keep, re;
    if (o.recompute == 2) {
        status = run_mode(&o, 0, tag, inputs, targets, &keep) ||
                 run_mode(&o, 1, tag, inputs, targets, &re);
        if (!status)
            compare(&o, tag, &keep, &re);
    } else {
        status = run_mode(&o, o.recompute, tag, inputs, targets, &keep);
    }
    free(inputs);
    free(targets);
    return status;
}
