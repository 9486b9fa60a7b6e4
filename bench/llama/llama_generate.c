/* bench/llama/llama_generate.c — bench-llama-generate: greedy generation
 * with a KV cache (tessera/llama.h, "generation"), timed, against
 * PyTorch's (bench/llama/torch_llama.py --generate, on the same shape and
 * thread count) and against the machine's memory read bandwidth, measured
 * here (before and after the runs: the better). tessera-bench-generate's
 * method (bench/gpt2/gpt2_generate.c) for the Llama family.
 *
 * A decode step at batch 1 reads every weight once (the 1B model: about
 * 5 GB in fp32) for one token: the step is bound by memory bandwidth, and
 * the ceiling is bandwidth / bytes per step. The fraction of it reached is
 * reported beside the tokens/s.
 *
 *   bench-llama-generate [--batch 1,8] [--prompt 64] [--new 256]
 *        [--precision fp32,bf16] [--threads N] [--sched NAME] [--weights DIR]
 *        [--no-peer] [--peer-bf16] [--seed S] [--json-tag NAME]
 *        [--layers 12 --heads 12 --kv-heads 4 --hidden 768 --intermediate 2048
 *         --vocab 32000 --ctx 2048 --head-dim 0 --tie 0 --rope-theta 10000
 *         --llama3-scaling none --norm-eps 1e-5]
 *
 * The weights: the HF checkpoint folder DIR if it holds a config.json (its
 * shape wins), else tsr_llama_init_weights(--seed), written to DIR for the
 * peer when --weights is given (tsr_llama_save, F32). Without --weights the
 * peer initialises the same shape itself: decoding speed does not depend
 * on the values (only the greedy ids differ), and a 1B model is then not
 * written to disk. Per precision, a model created with
 * tsr_llama_config_t.precision = fp32 or bf16 (Llama's decoding reads the
 * fp32 master weights in both: docs/llama.md; run.sh runs fp32 only); per
 * batch size B: B prompts
 * of --prompt LCG tokens (seed 1234) prefilled, one slot at a time, then
 * --new greedy steps of all B slots (tsr_llama_gen_step, the argmax of
 * each slot's logits); the figure is decode tokens/s = B x new / the steps'
 * time. The peer runs after the Tessera models are freed, in float32 (the
 * figure compared with, for both precisions) and, with --peer-bf16, in
 * bfloat16 too (peer_bf16_value). Prints a table, then one JSON line per
 * figure:
 *   {"bench":"llama-generate","case":"1B-b1-fp32","metric":"tok_per_s",
 *    "value":T,"peer":"torch-fp32","peer_value":P,"ratio":T/P, …}
 *   {"bench":"llama-generate","case":"read-bandwidth","metric":"GB_per_s",…}
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tessera/llama.h>

#include "bench/bench_util.h"
#include "bench/generate_util.h"
#include "bench/read_bandwidth.h"

typedef struct options {
    const char *weights, *sched, *batches, *precisions, *tag;
    int prompt, nnew, threads, peer, peer_bf16;
    uint64_t seed;
    tsr_llama_config_t cfg;
} options_t;

static void usage(void)
{
    fprintf(stderr,
            "usage: bench-llama-generate [options]\n"
            "  --batch LIST     batch sizes, comma-separated (default 1,8)\n"
            "  --prompt N       prompt tokens per sequence (default 64)\n"
            "  --new N          tokens generated per sequence (default 256)\n"
            "  --precision LIST fp32, bf16 or both (default fp32,bf16)\n"
            "  --threads N      CPU workers, and the peer's torch threads (default nproc)\n"
            "  --sched NAME     scheduling policy\n"
            "  --weights DIR    an HF checkpoint folder (written first if it has no\n"
            "                   config.json; default none: random weights, the peer its own)\n"
            "  --no-peer        do not run the PyTorch peer\n"
            "  --peer-bf16      run the peer in bfloat16 too\n"
            "  --seed S         initialisation seed (default 1)\n"
            "  --json-tag NAME  the shape's name in the cases (default the parameters, 125M)\n"
            "  --layers/--heads/--kv-heads/--hidden/--intermediate/--vocab/--ctx/--head-dim\n"
            "  --tie 0|1 --rope-theta X --llama3-scaling F,LOW,HIGH,ORIG|none --norm-eps X\n"
            "                   the shape (default the 125M shape of run.sh)\n");
}

static int failed(int rc, const char *what)
{
    if (rc == TSR_OK)
        return 0;
    fprintf(stderr, "bench-llama-generate: %s: %s (%s)\n", what, tsr_strerror(rc),
            tsr_error_message());
    return 1;
}


/* The CPU's model name (/proc/cpuinfo, "model name"; lscpu's), for naming
 * it with every figure; "unknown" where unreadable. Quotes and backslashes
 * are dropped (it goes into JSON strings). */
static void cpu_model(char *out, size_t n)
{
    snprintf(out, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10))
            continue;
        const char *v = strchr(line, ':');
        if (!v)
            break;
        for (v++; *v == ' ' || *v == '\t'; v++)
            ;
        size_t k = 0;
        for (; *v && *v != '\n' && k + 1 < n; v++)
            if (*v != '"' && *v != '\\')
                out[k++] = *v;
        while (k > 0 && out[k - 1] == ' ')
            k--;
        out[k] = 0;
        break;
    }
    fclose(f);
}

/* ---- the peer --------------------------------------------------------------- */

/* PyTorch's decode tokens/s for batch b (torch_llama.py --generate) in
 * dtype "float32" or "bfloat16", or -1. */
static double peer_tps(const options_t *o, int b, const char *dtype, int have_weights)
{
    const char *root = getenv("TESSERA_SOURCE_ROOT");
    const tsr_llama_config_t *c = &o->cfg;
    char scaling[128] = "none", weights[1024] = "";
    if (c->rope_llama3)
        snprintf(scaling, sizeof scaling, "%.17g,%.17g,%.17g,%d", c->rope_factor,
                 c->rope_low_freq_factor, c->rope_high_freq_factor,
                 c->rope_original_max_positions);
    if (have_weights)
        snprintf(weights, sizeof weights, "--weights '%s'", o->weights);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 '%s/bench/llama/torch_llama.py' --generate --layers %d "
             "--heads %d --kv-heads %d --hidden %d --intermediate %d --vocab %d --ctx %d "
             "--head-dim %d --tie %d --rope-theta %.17g --llama3-scaling %s --norm-eps %.17g "
             "--seed %llu --gen-batch %d --prompt %d --new %d --threads %d --dtype %s %s 2>&1",
             root && *root ? root : ".", c->layers, c->heads, c->kv_heads, c->hidden,
             c->intermediate, c->vocab_size, c->max_positions, c->head_dim,
             c->tie_embeddings, c->rope_theta, scaling, c->rms_norm_eps,
             (unsigned long long)o->seed, b, o->prompt, o->nnew, o->threads, dtype, weights);
    return bench_peer_tokens_per_s(cmd);
}

/* ---- Tessera --------------------------------------------------------------------- */

typedef struct result {
    double prefill_s, decode_s, tps;
} result_t;

static int run_batch(tsr_llama_t *m, const options_t *o, int B, result_t *r)
{
    int V = tsr_llama_config(m)->vocab_size;
    tsr_llama_gen_t *g = NULL;
    int32_t *prompts = malloc((size_t)B * o->prompt * sizeof *prompts);
    int32_t *tok = malloc((size_t)B * sizeof *tok);
    float *logits = malloc((size_t)B * V * sizeof *logits);
    int status = 1;
    if (!prompts || !tok || !logits)
        goto out;
    bench_lcg_tokens(B, o->prompt, V, 1234, prompts);
    if (failed(tsr_llama_gen_create(&g, m, B, o->prompt + o->nnew + 1), "gen_create"))
        goto out;
    /* warm-up: a short prefill and a step (first-touch of the tiles), then
     * the slot emptied again */
    if (failed(tsr_llama_gen_prefill(g, 0, prompts, o->prompt < 8 ? o->prompt : 8, logits),
               "prefill"))
        goto out;
    tok[0] = 1;
    for (int b = 1; b < B; b++)
        tok[b] = -1;
    if (failed(tsr_llama_gen_step(g, tok, logits), "step") ||
        failed(tsr_llama_gen_reset(g, 0), "reset"))
        goto out;
    double t0 = bench_now();
    for (int b = 0; b < B; b++) {
        if (failed(tsr_llama_gen_prefill(g, b, prompts + (size_t)b * o->prompt, o->prompt,
                                         logits + (size_t)b * V), "prefill"))
            goto out;
        tok[b] = bench_argmax(logits + (size_t)b * V, V);
    }
    double t1 = bench_now();
    for (int s = 0; s < o->nnew; s++) {
        if (failed(tsr_llama_gen_step(g, tok, logits), "step"))
            goto out;
        for (int b = 0; b < B; b++)
            tok[b] = bench_argmax(logits + (size_t)b * V, V);
    }
    double t2 = bench_now();
    r->prefill_s = t1 - t0;
    r->decode_s = t2 - t1;
    r->tps = (double)B * o->nnew / (t2 - t1);
    status = 0;
out:
    tsr_llama_gen_free(g);
    free(prompts);
    free(tok);
    free(logits);
    return status;
}

static int parse(int argc, char **argv, options_t *o)
{
    tsr_llama_config_t *c = &o->cfg;
    tsr_llama_config_default(c);
    /* the 125M shape of run.sh */
    c->vocab_size = 32000;
    c->hidden = 768;
    c->intermediate = 2048;
    c->layers = 12;
    c->heads = 12;
    c->kv_heads = 4;
    c->head_dim = 0;
    c->max_positions = 2048;
    c->rms_norm_eps = 1e-5;
    c->rope_theta = 10000.0;
    c->rope_llama3 = 0;
    c->tie_embeddings = 0;
    o->batches = "1,8";
    o->precisions = "fp32,bf16";
    o->prompt = 64;
    o->nnew = 256;
    o->threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    o->peer = 1;
    o->seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--no-peer")) {
            o->peer = 0;
            continue;
        }
        if (!strcmp(a, "--peer-bf16")) {
            o->peer_bf16 = 1;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            exit(0);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "bench-llama-generate: %s: missing value or unknown option\n", a);
            return 1;
        }
        const char *v = argv[++i];
        char *end = NULL;
        long n = strtol(v, &end, 10);
        int num = end && *end == 0 && end != v;
        struct {
            const char *name;
            int *dst;
            long lo;
        } ints[] = {{"--prompt", &o->prompt, 1},
                    {"--new", &o->nnew, 1},
                    {"--threads", &o->threads, 1},
                    {"--layers", &c->layers, 1},
                    {"--heads", &c->heads, 1},
                    {"--kv-heads", &c->kv_heads, 1},
                    {"--hidden", &c->hidden, 1},
                    {"--intermediate", &c->intermediate, 1},
                    {"--vocab", &c->vocab_size, 1},
                    {"--ctx", &c->max_positions, 1},
                    {"--head-dim", &c->head_dim, 0},
                    {"--tie", &c->tie_embeddings, 0}};
        int done = 0;
        for (size_t k = 0; k < sizeof ints / sizeof *ints && !done; k++)
            if (!strcmp(a, ints[k].name)) {
                if (!num || n < ints[k].lo || n > 1 << 30 ||
                    (!strcmp(a, "--tie") && n > 1)) {
                    fprintf(stderr, "bench-llama-generate: %s: bad value '%s'\n", a, v);
                    return 1;
                }
                *ints[k].dst = (int)n;
                done = 1;
            }
        if (done)
            continue;
        if (!strcmp(a, "--weights")) {
            o->weights = v;
        } else if (!strcmp(a, "--batch")) {
            o->batches = v;
        } else if (!strcmp(a, "--precision")) {
            o->precisions = v;
        } else if (!strcmp(a, "--sched")) {
            o->sched = v;
        } else if (!strcmp(a, "--json-tag")) {
            o->tag = v;
        } else if (!strcmp(a, "--seed") && num && n >= 0) {
            o->seed = (uint64_t)n;
        } else if (!strcmp(a, "--rope-theta") || !strcmp(a, "--norm-eps")) {
            double x = strtod(v, &end);
            if (end == v || *end || !(x > 0) || !isfinite(x)) {
                fprintf(stderr, "bench-llama-generate: %s: bad value '%s'\n", a, v);
                return 1;
            }
            *(!strcmp(a, "--rope-theta") ? &c->rope_theta : &c->rms_norm_eps) = x;
        } else if (!strcmp(a, "--llama3-scaling")) {
            if (!strcmp(v, "none")) {
                c->rope_llama3 = 0;
            } else if (sscanf(v, "%lf,%lf,%lf,%d", &c->rope_factor, &c->rope_low_freq_factor,
                              &c->rope_high_freq_factor, &c->rope_original_max_positions) ==
                           4 &&
                       c->rope_factor > 0 && c->rope_high_freq_factor > c->rope_low_freq_factor &&
                       c->rope_original_max_positions > 0) {
                c->rope_llama3 = 1;
            } else {
                fprintf(stderr, "bench-llama-generate: --llama3-scaling: FACTOR,LOW,HIGH,ORIG "
                                "or none, not '%s'\n", v);
                return 1;
            }
        } else {
            fprintf(stderr, "bench-llama-generate: unknown option %s %s\n", a, v);
            usage();
            return 1;
        }
    }
    return 0;
}

/* The model of one precision, its weights initialised or loaded (and saved
 * to --weights for the peer when that holds no checkpoint yet). */
static int make_model(options_t *o, int precision, int *have_weights, tsr_llama_t **out)
{
    tsr_llama_config_t mc = o->cfg;
    mc.precision = precision;
    int seq = 64 < mc.max_positions ? 64 : mc.max_positions;
    if (failed(tsr_llama_create(out, &mc, 1, seq), "create"))
        return 1;
    if (*have_weights)
        return failed(tsr_llama_load(*out, o->weights), "load");
    if (failed(tsr_llama_init_weights(*out, o->seed), "init_weights"))
        return 1;
    if (o->weights) {
        if (failed(tsr_llama_save(*out, o->weights, TSR_GPT2_FP32, 0), "save"))
            return 1;
        *have_weights = 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    options_t o = {0};
    if (parse(argc, argv, &o))
        return 2;
    int batches[16], nb = 0;
    for (const char *p = o.batches; *p && nb < 16;) {
        char *end;
        long b = strtol(p, &end, 10);
        if (end == p || b <= 0 || b > 4096) {
            fprintf(stderr, "bench-llama-generate: --batch %s: expected sizes like 1,8\n",
                    o.batches);
            return 2;
        }
        batches[nb++] = (int)b;
        p = *end == ',' ? end + 1 : end;
    }
    int want[2] = {strstr(o.precisions, "fp32") != NULL, strstr(o.precisions, "bf16") != NULL};
    if (!want[0] && !want[1]) {
        fprintf(stderr, "bench-llama-generate: --precision %s: expected fp32, bf16 or both\n",
                o.precisions);
        return 2;
    }

    tsr_config_t rc;
    tsr_config_init(&rc);
    rc.ncpu = o.threads;
    if (o.sched)
        rc.sched = o.sched;
    if (failed(tsr_init(&rc), "tsr_init"))
        return 1;
    int status = 1;
    tsr_llama_t *m = NULL;
    int have_weights = 0;
    if (o.weights) {
        char path[1100];
        struct stat sb;
        snprintf(path, sizeof path, "%s/config.json", o.weights);
        have_weights = stat(path, &sb) == 0;
        if (have_weights && failed(tsr_llama_read_config(o.weights, &o.cfg), "read_config"))
            goto done;
    }
    if (o.prompt + o.nnew + 1 > o.cfg.max_positions) {
        fprintf(stderr, "bench-llama-generate: prompt + new exceed the max positions %d\n",
                o.cfg.max_positions);
        goto done;
    }
    size_t params = 0;
    char shape[64], cpu[256];
    cpu_model(cpu, sizeof cpu);
    /* the ceiling: the better of a measurement before and one after the
     * runs (other processes on the machine lower either) */
    double bw0 = bench_read_bandwidth(o.threads);
    /* per batch: [0] fp32, [1] bf16 */
    result_t res[16][2];
    for (int p = 0; p < 2; p++) {
        if (!want[p])
            continue;
        if (make_model(&o, p ? TSR_GPT2_BF16 : TSR_GPT2_FP32, &have_weights, &m))
            goto done;
        if (!params) {
            params = tsr_llama_num_params(m);
            o.cfg.head_dim = tsr_llama_config(m)->head_dim;
            if (o.tag)
                snprintf(shape, sizeof shape, "%s", o.tag);
            else
                snprintf(shape, sizeof shape, "%.0fM", (double)params / 1e6);
            printf("bench-llama-generate: %s (%zu parameters, %s), %d workers, prompt %d, "
                   "%d new, greedy\n", shape, params,
                   have_weights ? o.weights : "random weights", o.threads, o.prompt, o.nnew);
            printf("CPU: %s\nread bandwidth (%d threads, 512 MiB): %.2f GB/s before the "
                   "runs\n", cpu, o.threads, bw0);
            fflush(stdout);
        }
        for (int i = 0; i < nb; i++) {
            if (run_batch(m, &o, batches[i], &res[i][p]))
                goto done;
            printf("tessera %s batch %d: prefill %.3f s, decode %.3f s, %.2f tokens/s\n",
                   p ? "bf16" : "fp32", batches[i], res[i][p].prefill_s, res[i][p].decode_s,
                   res[i][p].tps);
            fflush(stdout);
        }
        tsr_llama_free(m);
        m = NULL;
    }
    /* the peer, with no Tessera model in memory */
    double peer[16], peer_bf16[16];
    for (int i = 0; i < nb; i++) {
        peer[i] = o.peer ? peer_tps(&o, batches[i], "float32", have_weights) : -1;
        peer_bf16[i] = o.peer && o.peer_bf16 ? peer_tps(&o, batches[i], "bfloat16", have_weights)
                                             : -1;
    }
    double bw1 = bench_read_bandwidth(o.threads), bw = bw0 > bw1 ? bw0 : bw1;
    printf("read bandwidth: %.2f GB/s after the runs; the ceiling: %.2f GB/s\n", bw1, bw);
    /* bytes a decode step reads: every weight once but the untied
     * embedding table (B rows of it only): 4 bytes each, or 2 for the bf16
     * copies of the matrices (all but the norm weights); plus the K/V cache
     * of every slot (4 bytes), on average half-way through the new tokens */
    const tsr_llama_config_t *c = &o.cfg;
    double read = (double)params - (c->tie_embeddings ? 0.0 : (double)c->vocab_size * c->hidden);
    double norms = (2.0 * c->layers + 1.0) * c->hidden;
    double kvw = (double)c->kv_heads * c->head_dim;
    printf("\n%-15s %12s %12s %8s %12s %10s %11s\n", "case", "tessera t/s", "torch f32",
           "ratio", "torch bf16", "GB/s read", "of ceiling");
    /* pass 0 the table, pass 1 the JSON lines */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < nb; i++)
            for (int p = 0; p < 2; p++) {
                if (!want[p])
                    continue;
                int B = batches[i];
                double wbytes = p ? 2.0 * (read - norms) + 4.0 * norms : 4.0 * read;
                double cache = 2.0 * 4.0 * c->layers * kvw * B * (o.prompt + o.nnew / 2.0);
                double tps = res[i][p].tps, gbs = tps / B * (wbytes + cache) / 1e9;
                double ratio = peer[i] > 0 ? tps / peer[i] : -1;
                char tag[96];
                snprintf(tag, sizeof tag, "%s-b%d-%s", shape, B, p ? "bf16" : "fp32");
                char v[32], pv[32], pb[32], r[32], g[32], f[32];
                bench_json_num(v, sizeof v, 1, tps);
                bench_json_num(pv, sizeof pv, peer[i] > 0, peer[i]);
                bench_json_num(pb, sizeof pb, peer_bf16[i] > 0, peer_bf16[i]);
                bench_json_num(r, sizeof r, ratio > 0, ratio);
                bench_json_num(g, sizeof g, 1, gbs);
                bench_json_num(f, sizeof f, bw > 0, gbs / bw);
                if (pass == 0) {
                    char cp[32] = "-", cr[32] = "-", cb[32] = "-", cf[32] = "-";
                    if (peer[i] > 0)
                        snprintf(cp, sizeof cp, "%.2f", peer[i]);
                    if (ratio > 0)
                        snprintf(cr, sizeof cr, "%.2f", ratio);
                    if (peer_bf16[i] > 0)
                        snprintf(cb, sizeof cb, "%.2f", peer_bf16[i]);
                    if (bw > 0)
                        snprintf(cf, sizeof cf, "%.0f%%", 100.0 * gbs / bw);
                    printf("%-15s %12.2f %12s %8s %12s %10.2f %11s\n", tag, tps, cp, cr, cb,
                           gbs, cf);
                    continue;
                }
                printf("{\"bench\":\"llama-generate\",\"case\":\"%s\",\"metric\":\"tok_per_s\","
                       "\"value\":%s,\"peer\":\"torch-fp32\",\"peer_value\":%s,\"ratio\":%s,"
                       "\"peer_bf16_value\":%s,\"batch\":%d,\"precision\":\"%s\",\"prompt\":%d,"
                       "\"new\":%d,\"workers\":%d,\"params\":%zu,\"read_GB_per_s\":%s,"
                       "\"bandwidth_fraction\":%s,\"cpu\":\"%s\"}\n",
                       tag, v, pv, r, pb, B, p ? "bf16" : "fp32", o.prompt, o.nnew, o.threads,
                       params, g, f, cpu);
            }
    char b[32];
    bench_json_num(b, sizeof b, bw > 0, bw);
    printf("{\"bench\":\"llama-generate\",\"case\":\"read-bandwidth\",\"metric\":\"GB_per_s\","
           "\"value\":%s,\"threads\":%d,\"cpu\":\"%s\"}\n", b, o.threads, cpu);
    status = 0;
done:
    tsr_llama_free(m);
    tsr_shutdown();
    return status;
}
