/* bench/gpt2/gpt2_generate.c — tessera-bench-generate: greedy generation
 * with a KV cache (tessera/gpt2.h, "generation"), timed, against PyTorch's
 * (tools/gpt2_reference.py --time-generate: the same weights, read from the
 * safetensors file this program writes) and against the machine's memory
 * read bandwidth, measured here (before and after the runs: the better).
 *
 * A decode step at batch 1 reads every weight once (the 124M model: about
 * 0.5 GB in fp32) for one token: the step is bound by memory bandwidth, and
 * the ceiling is bandwidth / bytes per step. The fraction of it reached is
 * reported beside the tokens/s.
 *
 *   tessera-bench-generate [--weights FILE] [--batch 1,8] [--prompt 64]
 *        [--new 256] [--precision fp32,bf16] [--threads N] [--sched NAME]
 *        [--no-peer] [--peer-bf16] [--seed S]
 *        [--layers 12 --heads 12 --channels 768 --vocab 50257 --ctx 1024]
 *
 * The weights: FILE if it exists (its shape wins), else GPT-2's random
 * initialisation for the shape and seed, saved to FILE for the peer (speed
 * does not depend on trained values). Per batch size: B prompts of --prompt
 * LCG tokens prefilled, then --new greedy steps of all B slots; the figure
 * is decode tokens/s = B x new / the steps' time. fp32 reads the model's
 * weights, bf16 the state's bf16 copies (tsr_gpt2_gen_precision). The peer
 * runs in float32 (the figure compared with, for both) and, with
 * --peer-bf16, in bfloat16 too (peer_bf16_value). Prints a table, then one
 * JSON line per figure:
 *   {"bench":"gpt2-generate","case":"124M-b1-fp32","metric":"tok_per_s",
 *    "value":T,"peer":"torch-fp32","peer_value":P,"ratio":T/P, …}
 *   {"bench":"gpt2-generate","case":"read-bandwidth","metric":"GB_per_s",…}
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tessera/gpt2.h>

#include "bench/bench_util.h"
#include "bench/generate_util.h"
#include "bench/read_bandwidth.h"

typedef struct options {
    const char *weights, *sched, *batches, *precisions;
    int prompt, nnew, threads, peer, peer_bf16;
    uint64_t seed;
    tsr_gpt2_config_t cfg;
} options_t;

static void usage(void)
{
    fprintf(stderr,
            "usage: tessera-bench-generate [options]\n"
            "  --weights FILE   safetensors weights (written first if missing;\n"
            "                   default /tmp/tessera-bench-generate-SHAPE.safetensors)\n"
            "  --batch LIST     batch sizes, comma-separated (default 1,8)\n"
            "  --prompt N       prompt tokens per sequence (default 64)\n"
            "  --new N          tokens generated per sequence (default 256)\n"
            "  --precision LIST fp32, bf16 or both (default fp32,bf16)\n"
            "  --threads N      CPU workers, and the peer's torch threads (default nproc)\n"
            "  --sched NAME     scheduling policy\n"
            "  --no-peer        do not run the PyTorch peer\n"
            "  --peer-bf16      run the peer in bfloat16 too (slow with a generic BLAS)\n"
            "  --seed S         initialisation seed (default 1)\n"
            "  --layers/--heads/--channels/--vocab/--ctx  the shape (default 124M)\n");
}

static int failed(int rc, const char *what)
{
    if (rc == TSR_OK)
        return 0;
    fprintf(stderr, "tessera-bench-generate: %s: %s (%s)\n", what, tsr_strerror(rc),
            tsr_error_message());
    return 1;
}


/* ---- the peer --------------------------------------------------------------- */

/* PyTorch's decode tokens/s for batch b (the reference's timing mode) in
 * dtype "float32" or "bfloat16", or -1. */
static double peer_tps(const options_t *o, int b, const char *dtype)
{
    const char *root = getenv("TESSERA_SOURCE_ROOT");
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 '%s/tools/gpt2_reference.py' --time-generate '%s' --batch %d "
             "--prompt-len %d --new %d --threads %d --time-dtype %s 2>&1",
             root && *root ? root : ".", o->weights, b, o->prompt, o->nnew, o->threads, dtype);
    return bench_peer_tokens_per_s(cmd);
}

/* ---- Tessera --------------------------------------------------------------------- */

typedef struct result {
    double prefill_s, decode_s, tps;
} result_t;

static int run_batch(tsr_gpt2_t *m, const options_t *o, int B, int precision, result_t *r)
{
    int V = tsr_gpt2_config(m)->vocab_size;
    tsr_gpt2_gen_t *g = NULL;
    int32_t *prompts = malloc((size_t)B * o->prompt * sizeof *prompts);
    int32_t *tok = malloc((size_t)B * sizeof *tok);
    float *logits = malloc((size_t)B * V * sizeof *logits);
    int status = 1;
    if (!prompts || !tok || !logits)
        goto out;
    bench_lcg_tokens(B, o->prompt, V, 1234, prompts);
    if (failed(tsr_gpt2_gen_create(&g, m, B, o->prompt + o->nnew + 1), "gen_create") ||
        failed(tsr_gpt2_gen_precision(g, precision), "gen_precision"))
        goto out;
    /* warm-up: a short prefill and a step (first-touch of the tiles) */
    if (failed(tsr_gpt2_gen_prefill(g, 0, prompts, 8, logits), "prefill"))
        goto out;
    tok[0] = 1;
    for (int b = 1; b < B; b++)
        tok[b] = -1;
    if (failed(tsr_gpt2_gen_step(g, tok, logits), "step"))
        goto out;
    double t0 = bench_now();
    for (int b = 0; b < B; b++) {
        if (failed(tsr_gpt2_gen_prefill(g, b, prompts + (size_t)b * o->prompt, o->prompt,
                                        logits + (size_t)b * V), "prefill"))
            goto out;
        tok[b] = bench_argmax(logits + (size_t)b * V, V);
    }
    double t1 = bench_now();
    for (int s = 0; s < o->nnew; s++) {
        if (failed(tsr_gpt2_gen_step(g, tok, logits), "step"))
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
    tsr_gpt2_gen_free(g);
    free(prompts);
    free(tok);
    free(logits);
    return status;
}

static int parse(int argc, char **argv, options_t *o)
{
    tsr_gpt2_config_default(&o->cfg);
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
            fprintf(stderr, "tessera-bench-generate: %s: missing value or unknown option\n", a);
            return 1;
        }
        const char *v = argv[++i];
        char *end = NULL;
        long n = strtol(v, &end, 10);
        int num = end && *end == 0 && end != v;
        struct {
            const char *name;
            int *dst;
        } ints[] = {{"--prompt", &o->prompt},        {"--new", &o->nnew},
                    {"--threads", &o->threads},      {"--layers", &o->cfg.layers},
                    {"--heads", &o->cfg.heads},      {"--channels", &o->cfg.channels},
                    {"--vocab", &o->cfg.vocab_size}, {"--ctx", &o->cfg.context}};
        int done = 0;
        for (size_t k = 0; k < sizeof ints / sizeof *ints && !done; k++)
            if (!strcmp(a, ints[k].name)) {
                if (!num || n <= 0 || n > 1 << 30) {
                    fprintf(stderr, "tessera-bench-generate: %s: bad value '%s'\n", a, v);
                    return 1;
                }
                *ints[k].dst = (int)n;
                done = 1;
            }
        if (done)
            continue;
        if (!strcmp(a, "--weights"))
            o->weights = v;
        else if (!strcmp(a, "--batch"))
            o->batches = v;
        else if (!strcmp(a, "--precision"))
            o->precisions = v;
        else if (!strcmp(a, "--sched"))
            o->sched = v;
        else if (!strcmp(a, "--seed") && num)
            o->seed = (uint64_t)n;
        else {
            fprintf(stderr, "tessera-bench-generate: unknown option %s %s\n", a, v);
            usage();
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    options_t o = {0};
    if (parse(argc, argv, &o))
        return 2;
    char wpath[512];
    if (!o.weights) {
        snprintf(wpath, sizeof wpath, "/tmp/tessera-bench-generate-%dx%dx%d-%d.safetensors",
                 o.cfg.layers, o.cfg.heads, o.cfg.channels, o.cfg.vocab_size);
        o.weights = wpath;
    }
    int batches[16], nb = 0;
    for (const char *p = o.batches; *p && nb < 16;) {
        char *end;
        long b = strtol(p, &end, 10);
        if (end == p || b <= 0 || b > 4096) {
            fprintf(stderr, "tessera-bench-generate: --batch %s: expected sizes like 1,8\n",
                    o.batches);
            return 2;
        }
        batches[nb++] = (int)b;
        p = *end == ',' ? end + 1 : end;
    }

    tsr_config_t rc;
    tsr_config_init(&rc);
    rc.ncpu = o.threads;
    if (o.sched)
        rc.sched = o.sched;
    if (failed(tsr_init(&rc), "tsr_init"))
        return 1;
    int status = 1;
    tsr_gpt2_t *m = NULL;
    struct stat sb;
    int have = stat(o.weights, &sb) == 0;
    if (have && failed(tsr_gpt2_read_config(o.weights, &o.cfg), "read_config"))
        goto done;
    if (o.prompt + o.nnew + 1 > o.cfg.context) {
        fprintf(stderr, "tessera-bench-generate: prompt + new exceed the context %d\n",
                o.cfg.context);
        goto done;
    }
    if (failed(tsr_gpt2_create(&m, &o.cfg, 1, 64 < o.cfg.context ? 64 : o.cfg.context),
               "create"))
        goto done;
    if (have) {
        if (failed(tsr_gpt2_load(m, o.weights), "load"))
            goto done;
    } else if (failed(tsr_gpt2_init_weights(m, o.seed), "init_weights") ||
               failed(tsr_gpt2_save(m, o.weights), "save")) {
        goto done;
    }
    size_t params = tsr_gpt2_num_params(m);
    char shape[64];
    snprintf(shape, sizeof shape, "%.0fM", (double)params / 1e6);
    /* the ceiling: the better of a measurement before and one after the
     * runs (other processes on the machine lower either) */
    double bw0 = bench_read_bandwidth(o.threads);
    printf("tessera-bench-generate: %s (%zu parameters, %s), %d workers, prompt %d, %d new, "
           "greedy\n", shape, params, o.weights, o.threads, o.prompt, o.nnew);
    printf("read bandwidth (%d threads, 512 MiB): %.2f GB/s before the runs\n", o.threads, bw0);
    fflush(stdout);

    int want_fp32 = strstr(o.precisions, "fp32") != NULL;
    int want_bf16 = strstr(o.precisions, "bf16") != NULL;
    if (!want_fp32 && !want_bf16) {
        fprintf(stderr, "tessera-bench-generate: --precision %s: expected fp32, bf16 or both\n",
                o.precisions);
        goto done;
    }
    /* per batch: [0] fp32, [1] bf16 */
    result_t res[16][2];
    double peer[16], peer_bf16[16];
    for (int i = 0; i < nb; i++) {
        for (int p = 0; p < 2; p++) {
            if (!(p ? want_bf16 : want_fp32))
                continue;
            if (run_batch(m, &o, batches[i], p ? TSR_GPT2_BF16 : TSR_GPT2_FP32, &res[i][p]))
                goto done;
            printf("tessera %s batch %d: prefill %.3f s, decode %.3f s, %.2f tokens/s\n",
                   p ? "bf16" : "fp32", batches[i], res[i][p].prefill_s, res[i][p].decode_s,
                   res[i][p].tps);
            fflush(stdout);
        }
        peer[i] = o.peer ? peer_tps(&o, batches[i], "float32") : -1;
        peer_bf16[i] = o.peer && o.peer_bf16 ? peer_tps(&o, batches[i], "bfloat16") : -1;
    }
    double bw1 = bench_read_bandwidth(o.threads), bw = bw0 > bw1 ? bw0 : bw1;
    printf("read bandwidth: %.2f GB/s after the runs; the ceiling: %.2f GB/s\n", bw1, bw);
    /* bytes a decode step reads: every weight once (4 bytes, or 2 for the
     * bf16 copies of the matrices: all but wpe, biases and gains), plus the
     * cache of every slot, on average half-way through the new tokens */
    double small = (double)o.cfg.context * o.cfg.channels +
                   (double)o.cfg.layers * 13.0 * o.cfg.channels + 2.0 * o.cfg.channels;
    printf("\n%-15s %12s %12s %8s %12s %10s %11s\n", "case", "tessera t/s", "torch f32",
           "ratio", "torch bf16", "GB/s read", "of ceiling");
    /* pass 0 the table, pass 1 the JSON lines */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < nb; i++)
            for (int p = 0; p < 2; p++) {
                if (!(p ? want_bf16 : want_fp32))
                    continue;
                int B = batches[i];
                double wbytes = p ? 2.0 * ((double)params - small) + 4.0 * small : 4.0 * params;
                double cache = 2.0 * 4.0 * o.cfg.layers * o.cfg.channels * B *
                               (o.prompt + o.nnew / 2.0);
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
                printf("{\"bench\":\"gpt2-generate\",\"case\":\"%s\",\"metric\":\"tok_per_s\","
                       "\"value\":%s,\"peer\":\"torch-fp32\",\"peer_value\":%s,\"ratio\":%s,"
                       "\"peer_bf16_value\":%s,\"batch\":%d,\"precision\":\"%s\",\"prompt\":%d,"
                       "\"new\":%d,\"workers\":%d,\"read_GB_per_s\":%s,"
                       "\"bandwidth_fraction\":%s}\n",
                       tag, v, pv, r, pb, B, p ? "bf16" : "fp32", o.prompt, o.nnew, o.threads,
                       g, f);
            }
    char b[32];
    bench_json_num(b, sizeof b, bw > 0, bw);
    printf("{\"bench\":\"gpt2-generate\",\"case\":\"read-bandwidth\",\"metric\":\"GB_per_s\","
           "\"value\":%s,\"threads\":%d}\n", b, o.threads);
    status = 0;
done:
    tsr_gpt2_free(m);
    tsr_shutdown();
    return status;
}
