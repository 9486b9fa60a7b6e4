/* tools/tessera-sim.c — GPT-2 or Llama training steps on a simulated node: the real
 * runtime, policy (built-in or plug-in) and model code, in virtual time with
 * phantom data (docs/simulation.md).
 *
 *   tessera-sim --platform dgx-a100.json [--sched NAME|plugin.so] gpt2 \
 *               --layers 8 --channels 16384 [flags]
 *   tessera-sim --platform dgx-h100.json llama --preset llama3-8b [flags]
 *   tessera-sim replay FILE --platform P [--sched S]   (sim_replay.c)
 *
 * Prints what one simulated training step costs: its virtual time, the model
 * TFLOPS that makes, the simulator's own speed, per-node peak memory, bytes
 * per link and per-worker busy time; a table, then one JSON line. A step
 * that does not fit (a memory node too small for what a task needs, the
 * host, and the disk tier where the platform has one, too small for the
 * model) is reported as out of memory, exit 3. --host-mem and --no-disk
 * shrink the platform's node for a projection (tsr_config_t.host_mem,
 * simulate_no_disk).
 *
 * Calls the public API only: the simulation is tsr_config_t.simulate.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli.h"
#include "model.h"
#include "sim_replay.h"

static const char usage[] =
    "usage: tessera-sim --platform FILE [runtime flags] gpt2|llama [model flags]\n"
    "       tessera-sim replay FILE (--platform FILE | --real) [flags] (see replay --help)\n"
    "       tessera-sim convert FILE --to rec|tessera [--out FILE]\n"
    "Simulate GPT-2 or Llama training steps on the node a platform file describes, or\n"
    "replay a task graph from a file (docs/lab.md).\n"
    "runtime flags:\n"
    "  --platform FILE      platform description (platforms/*.json; required)\n"
    "  --sched NAME         scheduling policy or plug-in .so (default: eager)\n"
    "  --threads N          CPU workers (default: the platform's)\n"
    "  --exec               also run every kernel on real data (small models)\n"
    "  --host-mem GIB       host memory for the runtime's copies, in place of the\n"
    "                       platform's (the host's evicted copies go to the disk\n"
    "                       tier where the platform describes one)\n"
    "  --no-disk            leave out the platform's disk tier (NVMe)\n"
    "  --placement P        auto (default), replicate or owner: where large tiles\n"
    "                       live and their tasks run (docs/placement.md)\n"
    "  --wave K             micro-batches per wave (docs/gpt2.md, \"Waves\"): 1 one\n"
    "                       at a time; 0 (default) the model's choice\n"
    "  --trace FILE         Chrome trace of the run, in virtual time\n"
    "  --stats              print the runtime's counters at the end\n"
    "gpt2 flags:\n"
    "  --layers L --channels C --heads H --vocab V --context N\n"
    "                       the shape (default: 4 layers, 1024 channels, heads\n"
    "                       of 128 channels, vocabulary 50257, context 1024)\n"
    "  --tile-tokens N --tile-vocab N --tile-hidden N --tile-channels N\n"
    "                       tile sizes (default: derived, docs/gpt2.md)\n"
    "  --recompute          recompute the activations in backward (docs/gpt2.md)\n"
    "  --precision P        fp32 (default) or bf16: the GEMMs on bf16 inputs (docs/gpt2.md)\n"
    "llama flags (docs/llama.md; also --layers --heads --vocab and the tile flags):\n"
    "  --preset NAME        a published shape: llama3-8b (hidden 4096, 32 layers, 32\n"
    "                       heads, 8 K/V, intermediate 14336, vocab 128256, context\n"
    "                       8192, rope_theta 500000) or llama2-70b (hidden 8192, 80\n"
    "                       layers, 64 heads, 8 K/V, intermediate 28672, vocab 32000,\n"
    "                       context 4096); the flags given override it\n"
    "  --config FILE        the shape of an HF config.json (or its folder)\n"
    "  --hidden N --intermediate N --kv-heads N --head-dim N --max-positions N\n"
    "  --rope-theta X --rms-norm-eps X --tie-embeddings\n"
    "                       the shape (default: 6 layers, hidden 512, 8 heads, 2\n"
    "                       K/V heads, intermediate 1408, vocab 128256, context 2048)\n"
    "either model:\n"
    "  --batch B            sequences per micro-batch (default 8)\n"
    "  --seq T              tokens per sequence (default: the context)\n"
    "  --micro K            micro-batches simulated per step (default 2)\n"
    "  --accumulate N       sequences per optimizer step (default: batch x micro);\n"
    "                       more than simulated: the step's time is extrapolated\n"
    "                       from the simulated micro-batches (first + (N/B - 1) x\n"
    "                       the later ones' mean + AdamW)\n"
    "  --steps S            steps simulated; the last one is reported (default 2:\n"
    "                       the first also moves every parameter to the GPUs)\n"
    "  --json-tag TEXT      a label copied into the JSON line\n";

/* Model FLOPs of one step: 6 per parameter per token (forward 2, backward 4)
 * plus attention's two (T, T) products per layer (forward 4·T·C per token,
 * backward twice that), counted in full (no causal halving) as is usual.
 * A Llama's attention width is heads x head_dim (not hidden), and its
 * parameters count the untied head. */
static double model_flops(const model_config_t *c, size_t params, double tokens, int seq)
{
    double width = c->gpt2.channels, layers = c->gpt2.layers;
    if (c->arch == MODEL_LLAMA) {
        const tsr_llama_config_t *l = &c->llama;
        width = (double)l->heads * (l->head_dim ? l->head_dim : l->hidden / l->heads);
        layers = l->layers;
    }
    return 6.0 * (double)params * tokens + 12.0 * layers * (double)seq * width * tokens;
}

/* The published shapes of --preset; 0, or 2 after a usage error. */
static int llama_preset(const char *name, tsr_llama_config_t *c)
{
    tsr_llama_config_default(c);
    if (strcmp(name, "llama3-8b") == 0) {
        c->vocab_size = 128256, c->hidden = 4096, c->intermediate = 14336, c->layers = 32;
        c->heads = 32, c->kv_heads = 8, c->head_dim = 128, c->max_positions = 8192;
        c->rope_theta = 500000.0;
    } else if (strcmp(name, "llama2-70b") == 0) {
        c->vocab_size = 32000, c->hidden = 8192, c->intermediate = 28672, c->layers = 80;
        c->heads = 64, c->kv_heads = 8, c->head_dim = 128, c->max_positions = 4096;
        c->rope_theta = 10000.0;
    } else {
        return cli_usage_error("--preset: llama3-8b or llama2-70b, not '%s'", name);
    }
    return 0;
}

typedef struct run_totals {
    uint64_t tasks;
    double busy_s[TSR_DEVICE_KINDS];
    int nworkers[TSR_DEVICE_KINDS];
} run_totals_t;

static void totals(run_totals_t *t)
{
    memset(t, 0, sizeof *t);
    for (int w = 0; w < tsr_worker_count(); w++) {
        tsr_worker_stats_t s;
        if (tsr_worker_stats(w, &s) != TSR_OK)
            continue;
        t->tasks += s.tasks;
        if (s.device_kind >= 0 && s.device_kind < TSR_DEVICE_KINDS) {
            t->busy_s[s.device_kind] += s.busy_s;
            t->nworkers[s.device_kind]++;
        }
    }
}

/* Links whose bytes the step reports: host <-> accelerators, host <->
 * disk tier, disk tier <-> accelerators (GPUDirect Storage). */
enum { LINK_ACC, LINK_DISK, LINK_DISK_ACC, NLINKS };

/* Virtual times of one training step's phases. A unit is one micro-batch,
 * or one wave of micro-batches where the model runs waves (nn/wave.h). */
typedef struct step_times {
    double first_mb;  /* the first unit (forward + backward) */
    double mb;        /* the others, on average (0 with one) */
    double adamw;     /* the optimizer step after the last micro-batch */
    double total;
    /* bytes moved in each over the links of link_bytes(LINK_…) */
    double first_mb_bytes[NLINKS], mb_bytes[NLINKS], adamw_bytes[NLINKS];
} step_times_t;

/* Whether node n is the disk tier (no worker, below the host). */
static int is_disk(int n)
{
    tsr_node_stats_t ns;
    return tsr_memory_node_stats(n, &ns) == TSR_OK && ns.kind == TSR_NODE_DISK;
}

/* Bytes copied so far over the links `which` (LINK_…), both ways (peer
 * copies between accelerators are none of them). */
static double link_bytes(int which)
{
    int n = tsr_memory_node_count(), disk = -1;
    for (int j = 1; j < n; j++)
        if (is_disk(j))
            disk = j;
    double b = 0;
    for (int j = 1; j < n; j++)
        for (int i = 0; i < j; i++) {
            bool host = i == 0, dk = i == disk || j == disk;
            int kind = host && dk ? LINK_DISK : host ? LINK_ACC : dk ? LINK_DISK_ACC : -1;
            if (kind == which)
                b += (double)tsr_memory_link_bytes(i, j) + (double)tsr_memory_link_bytes(j, i);
        }
    return b;
}

static void links_now(double b[NLINKS])
{
    for (int k = 0; k < NLINKS; k++)
        b[k] = link_bytes(k);
}

/* One training step: zero the gradients, `units` units of `per`
 * micro-batches of forward and backward (one wave each), AdamW. The first
 * unit is waited for alone (it also brings the state where it lives); the
 * later ones are submitted back to back, as a training loop submits them
 * (tessera-train reads a micro-batch's loss, which its forward's last tasks
 * make, only once its backward is submitted: the next forward fills the
 * GPUs while the backward drains), and waited for once: their mean (which
 * still holds one drain of the pipeline per units - 1 units, where a step
 * of many units has one in all). AdamW is waited for alone. tok: per
 * micro-batches' ids. */
static int train_step(model_t *m, const int32_t *tok, int units, int per, step_times_t *st)
{
    double t0 = tsr_time(), t = t0, b[NLINKS], bnow[NLINKS];
    links_now(b);
    int rc = model_zero_grad(m);
    st->mb = 0.0;
    for (int l = 0; l < NLINKS; l++)
        st->mb_bytes[l] = 0.0;
    for (int k = 0; rc == TSR_OK && k < units; k++) {
        rc = model_forward_backward(m, per, tok, tok, 1.0f / (float)(units * per), NULL);
        if (rc != TSR_OK || (k > 0 && k < units - 1))
            continue; /* the later units run into each other */
        rc = tsr_wait_all();
        double now = tsr_time();
        links_now(bnow);
        if (k == 0)
            st->first_mb = now - t;
        else
            st->mb = (now - t) / (units - 1);
        for (int l = 0; l < NLINKS; l++) {
            if (k == 0)
                st->first_mb_bytes[l] = bnow[l] - b[l];
            else
                st->mb_bytes[l] = (bnow[l] - b[l]) / (units - 1);
            b[l] = bnow[l];
        }
        t = now;
    }
    tsr_adamw_config_t opt;
    tsr_adamw_config_default(&opt);
    if (rc == TSR_OK)
        rc = model_step(m, &opt, 1e-4f, NULL);
    if (rc == TSR_OK)
        rc = tsr_wait_all();
    st->adamw = tsr_time() - t;
    links_now(bnow);
    for (int l = 0; l < NLINKS; l++)
        st->adamw_bytes[l] = bnow[l] - b[l];
    st->total = tsr_time() - t0;
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "replay"))
        return sim_replay(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "convert"))
        return sim_convert(argc - 1, argv + 1);
    const char *platform = NULL, *sched = NULL, *trace = NULL, *tag = "", *precision = NULL;
    const char *placement = NULL;
    const char *preset = NULL, *config = NULL;
    tsr_llama_config_t lflags;
    tsr_llama_config_default(&lflags);
    int threads = 0, exec = 0, stats = 0, no_disk = 0;
    double host_gib = 0;
    tsr_gpt2_config_t cfg;
    tsr_gpt2_config_default(&cfg);
    cfg.layers = 4;
    cfg.channels = 1024;
    cfg.heads = 0;
    int batch = 8, seq = 0, micro = 2, steps = 2, accumulate = 0, wave = 0;
    cli_opt_t opts[8 + CLI_MODEL_NOPTS + 7 + MODEL_LLAMA_NOPTS + 6] = {
        {"platform", 0, CLI_STR, &platform, 0, 0, 0},
        {"sched", 0, CLI_STR, &sched, 0, 0, 0},
        {"threads", 0, CLI_INT, &threads, 0, 4096, 0},
        {"exec", 0, CLI_BOOL, &exec, 0, 0, 0},
        {"trace", 0, CLI_STR, &trace, 0, 0, 0},
        {"stats", 0, CLI_BOOL, &stats, 0, 0, 0},
        {"batch", 0, CLI_INT, &batch, 1, 1 << 20, 0},
        {"seq", 0, CLI_INT, &seq, 1, 1 << 20, 0},
    };
    int nopts = 8;
    cli_model_opts(opts + nopts, &cfg);
    nopts += CLI_MODEL_NOPTS;
    opts[nopts++] = (cli_opt_t){"micro", 0, CLI_INT, &micro, 1, 1 << 20, 0};
    opts[nopts++] = (cli_opt_t){"accumulate", 0, CLI_INT, &accumulate, 0, 1 << 30, 0};
    opts[nopts++] = (cli_opt_t){"steps", 0, CLI_INT, &steps, 1, 1000, 0};
    opts[nopts++] = (cli_opt_t){"json-tag", 0, CLI_STR, &tag, 0, 0, 0};
    opts[nopts++] = (cli_opt_t){"recompute", 0, CLI_BOOL, &cfg.recompute, 0, 0, 0};
    opts[nopts++] = (cli_opt_t){"precision", 0, CLI_STR, &precision, 0, 0, 0};
    cli_opt_t *gopts = opts + 8, *lopts = opts + nopts;
    model_llama_opts(lopts, &lflags);
    nopts += MODEL_LLAMA_NOPTS;
    opts[nopts++] = (cli_opt_t){"preset", 0, CLI_STR, &preset, 0, 0, 0};
    opts[nopts++] = (cli_opt_t){"config", 0, CLI_STR, &config, 0, 0, 0};
    opts[nopts++] = (cli_opt_t){"host-mem", 0, CLI_FLOAT, &host_gib, 1.0 / 1024, 1048576, 0};
    opts[nopts++] = (cli_opt_t){"no-disk", 0, CLI_BOOL, &no_disk, 0, 0, 0};
    opts[nopts++] = (cli_opt_t){"placement", 0, CLI_STR, &placement, 0, 0, 0};
    opts[nopts++] = (cli_opt_t){"wave", 0, CLI_INT, &wave, 0, 4096, 0};
    const char *pos[1];
    int npos = 0;
    int rc = cli_parse("tessera-sim", usage, opts, nopts, argc, argv, pos, 1, &npos);
    if (rc >= 0)
        return rc;
    if (!platform)
        return cli_usage_error("missing --platform FILE");
    if (precision && strcmp(precision, "fp32") && strcmp(precision, "bf16"))
        return cli_usage_error("--precision: fp32 or bf16, not '%s'", precision);
    static const char *const placements[] = {"auto", "replicate", "owner"}; /* TSR_PLACEMENT_… */
    int place = -1;
    for (int k = 0; placement && k < 3; k++)
        if (!strcmp(placement, placements[k]))
            place = k;
    if (placement && place < 0)
        return cli_usage_error("--placement: auto, replicate or owner, not '%s'", placement);
    cfg.precision = precision && !strcmp(precision, "bf16") ? TSR_GPT2_BF16 : TSR_GPT2_FP32;
    model_arch_t arch;
    if (npos != 1 || (strcmp(pos[0], "gpt2") != 0 && strcmp(pos[0], "llama") != 0))
        return cli_usage_error("say what to simulate: gpt2 or llama");
    arch = strcmp(pos[0], "llama") == 0 ? MODEL_LLAMA : MODEL_GPT2;
    if (arch == MODEL_GPT2 && (preset || config))
        return cli_usage_error("--%s is for llama", preset ? "preset" : "config");
    if (preset && config)
        return cli_usage_error("--preset and --config exclude each other");
    model_config_t base, mcfg;
    if (preset && (rc = llama_preset(preset, &base.llama)) != 0)
        return rc;
    if (config && model_read_config(MODEL_LLAMA, config, &base) != 0)
        return 1;
    if (arch == MODEL_GPT2 && cfg.heads == 0)
        cfg.heads = cfg.channels % 128 == 0 ? cfg.channels / 128 : 1;
    if ((rc = model_flags_resolve(arch, gopts, &cfg, lopts, &lflags,
                                  preset || config ? &base.llama : NULL, cfg.recompute,
                                  cfg.precision, &mcfg)) != 0)
        return rc;
    if (arch == MODEL_LLAMA)
        mcfg.llama.wave = wave;
    else
        mcfg.gpt2.wave = wave;
    if (seq == 0)
        seq = model_config_context(&mcfg);
    if (accumulate == 0)
        accumulate = batch * micro;
    if (accumulate % batch != 0 || accumulate < batch * micro)
        return cli_usage_error("--accumulate must be a multiple of --batch, at least batch x micro");

    tsr_config_t rcfg;
    tsr_config_init(&rcfg);
    rcfg.simulate = platform;
    rcfg.simulate_exec = exec;
    if (host_gib > 0)
        rcfg.host_mem = (size_t)(host_gib * 1073741824.0);
    rcfg.simulate_no_disk = no_disk;
    if (threads > 0)
        rcfg.ncpu = threads;
    if (sched)
        rcfg.sched = sched;
    if (place >= 0)
        rcfg.placement = place;
    if (trace)
        rcfg.trace_path = trace;
    rcfg.stats = stats;
    double wall0 = cli_now();
    rc = tsr_init(&rcfg);
    if (rc != TSR_OK)
        return cli_lib_fail(rc, "cannot start the simulated runtime");

    char shape[256];
    model_t m = {.arch = arch};
    int32_t *tok = NULL;
    int status = 0;
    rc = model_create(&m, &mcfg, batch, seq);
    if (rc != TSR_OK) {
        status = cli_lib_fail(rc, "cannot create the model");
        goto out;
    }
    model_config_t resolved;
    model_config_of(&m, &resolved);
    model_config_describe(&resolved, shape, sizeof shape);
    size_t params = model_num_params(&m);
    size_t ntok = (size_t)batch * (size_t)seq;
    /* the units simulated: `micro` micro-batches in whole waves (at least
     * two waves where the step has them, so that a later one is measured) */
    int nmb = accumulate / batch, per = model_wave(&m) < nmb ? model_wave(&m) : nmb;
    int units = (micro + per - 1) / per;
    if (units < 2 && nmb >= 2 * per)
        units = 2;
    if (units * per > nmb)
        units = nmb / per;
    tok = calloc(ntok * (size_t)per, sizeof *tok); /* token 0 everywhere: data is phantom */
    if (!tok) {
        status = cli_fail("out of memory");
        goto out;
    }

    step_times_t st = {0};
    uint64_t tasks_prev = 0;
    run_totals_t tot = {0};
    for (int s = 0; s < steps; s++) {
        rc = train_step(&m, tok, units, per, &st);
        if (rc != TSR_OK)
            break;
        totals(&tot);
        if (s + 1 < steps)
            tasks_prev = tot.tasks;
    }
    /* the optimizer step over `accumulate` sequences: the simulated one, or
     * extrapolated with the later units' mean */
    micro = units * per;
    double nunits = (double)nmb / per;
    double step_s = nmb == micro ? st.total
                                 : st.first_mb + (nunits - 1) * (units > 1 ? st.mb : st.first_mb) +
                                       st.adamw;
    double link_step[NLINKS];
    for (int l = 0; l < NLINKS; l++)
        link_step[l] = st.first_mb_bytes[l] +
                       (nunits - 1) * (units > 1 ? st.mb_bytes[l] : st.first_mb_bytes[l]) +
                       st.adamw_bytes[l];
    double step_bytes = link_step[LINK_ACC], disk_bytes = link_step[LINK_DISK];
    double disk_acc_bytes = link_step[LINK_DISK_ACC];
    int disk_node = -1;
    for (int n = 1; n < tsr_memory_node_count(); n++)
        if (is_disk(n))
            disk_node = n;
    /* The least any schedule moves over the host links in a step: the model
     * state (parameters, gradients, two AdamW moments: 16 bytes per
     * parameter) that the accelerators cannot hold goes down and back up
     * once. */
    double dev_mem = 0;
    for (int n = 1; n < tsr_memory_node_count(); n++) {
        tsr_node_stats_t ns;
        if (n != disk_node && tsr_memory_node_stats(n, &ns) == TSR_OK)
            dev_mem += (double)ns.capacity;
    }
    double spill = 16.0 * (double)params - dev_mem;
    double lower_bytes = spill > 0 ? 2.0 * spill : 0.0;
    double wall = cli_now() - wall0;
    /* the simulator's own memory: phantom data must cost none */
    struct rusage ru;
    double rss_mib = getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss / 1024.0 : 0.0;
    double tokens = (double)ntok * nmb;
    double flops = model_flops(&resolved, params, tokens, seq);
    /* Out of memory: a call refused for memory, or a task whose buffers its
     * memory node could not hold (the runtime's cause of the failure, not
     * the wording of its message). */
    int oom = rc == TSR_ENOMEM || (rc == TSR_ETASK && tsr_error_cause() == TSR_ENOMEM);

    printf("platform %s, policy %s\n", platform, sched ? sched : "eager");
    printf("%s%s: %.2f B parameters; step = %d x %d sequences of %d tokens "
           "(%d micro-batches simulated)\n",
           arch == MODEL_LLAMA ? "" : "GPT-2 ", shape, (double)params * 1e-9, nmb, batch, seq, micro);
    if (rc != TSR_OK) {
        printf("step: %s: %s\n", oom ? "OUT OF MEMORY" : "FAILED", tsr_error_message());
        status = oom ? 3 : 1;
    } else {
        printf("%-28s %14.4f s (virtual%s)\n", "step time", step_s,
               nmb == micro ? "" : ", extrapolated");
        char unit[64];
        snprintf(unit, sizeof unit, per > 1 ? "wave of %d micro-batches" : "micro-batch", per);
        printf("%-28s %14.4f s, then %.4f s each\n", unit, st.first_mb, st.mb);
        printf("%-28s %14.4f s\n", "AdamW", st.adamw);
        printf("%-28s %14.1f GB (lower bound %.1f GB)\n", "host <-> accelerators",
               step_bytes * 1e-9, lower_bytes * 1e-9);
        if (disk_node >= 0)
            printf("%-28s %14.1f GB\n", "host <-> disk", disk_bytes * 1e-9);
        if (disk_acc_bytes > 0)
            printf("%-28s %14.1f GB\n", "disk <-> accelerators", disk_acc_bytes * 1e-9);
        printf("%-28s %14.1f\n", "model TFLOPS", flops / step_s * 1e-12);
        printf("%-28s %14llu\n", "tasks in the step",
               (unsigned long long)(tot.tasks - tasks_prev));
        printf("%-28s %14.2f s\n", "simulator wall time", wall);
        printf("%-28s %14.0f\n", "simulated tasks / wall s", (double)tot.tasks / wall);
        printf("%-28s %14.0f MiB\n", "simulator peak RSS", rss_mib);
        for (int k = 0; k < TSR_DEVICE_KINDS; k++)
            if (tot.nworkers[k])
                printf("%-28s %13.1f%%\n", k == TSR_DEVICE_CUDA ? "GPU workers busy" : "CPU workers busy",
                       100.0 * tot.busy_s[k] / (tot.nworkers[k] * tsr_time()));
        printf("%-10s %12s %12s %14s %14s\n", "node", "capacity GiB", "peak GiB", "GB in", "GB out");
        for (int n = 0; n < tsr_memory_node_count(); n++) {
            tsr_node_stats_t ns;
            if (tsr_memory_node_stats(n, &ns) != TSR_OK)
                continue;
            printf("%-10s %12.1f %12.2f %14.2f %14.2f\n", ns.name, ns.capacity / 1073741824.0,
                   ns.peak / 1073741824.0, ns.bytes_in * 1e-9, ns.bytes_out * 1e-9);
        }
        tsr_node_stats_t hs;
        if (disk_node >= 0 && tsr_memory_node_stats(0, &hs) == TSR_OK && hs.peak > hs.capacity)
            printf("host peak %.1f GiB above its capacity: the disk tier's overdraft "
                   "(accelerators' write-backs land before the host's own reach the disk; "
                   "docs/memory.md#the-disk-tier)\n",
                   (double)(hs.peak - hs.capacity) / 1073741824.0);
    }
    /* one JSON line: the figure and what it was measured on */
    printf("{\"bench\":\"sim-%s\",\"tag\":", model_arch_name(arch));
    cli_json_str(tag);
    printf(",\"platform\":");
    cli_json_str(platform);
    printf(",\"policy\":");
    cli_json_str(sched ? sched : "eager");
    if (arch == MODEL_LLAMA) {
        const tsr_llama_config_t *c = &resolved.llama;
        printf(",\"layers\":%d,\"hidden\":%d,\"intermediate\":%d,\"heads\":%d,"
               "\"kv_heads\":%d,\"head_dim\":%d,\"vocab\":%d,\"seq\":%d,\"batch\":%d,"
               "\"micro\":%d,\"accumulate\":%d,\"tile_tokens\":%d,\"tile_hidden\":%d,"
               "\"tile_vocab\":%d,\"recompute\":%d,\"precision\":\"%s\",\"params\":%zu,",
               c->layers, c->hidden, c->intermediate, c->heads, c->kv_heads,
               c->head_dim ? c->head_dim : c->hidden / c->heads, c->vocab_size, seq, batch,
               micro, accumulate, c->tile_tokens, c->tile_hidden, c->tile_vocab, c->recompute,
               c->precision == TSR_GPT2_BF16 ? "bf16" : "fp32", params);
    } else {
        const tsr_gpt2_config_t *c = &resolved.gpt2;
        printf(",\"layers\":%d,\"channels\":%d,\"heads\":%d,\"vocab\":%d,\"seq\":%d,"
               "\"batch\":%d,\"micro\":%d,\"accumulate\":%d,\"tile_tokens\":%d,"
               "\"tile_hidden\":%d,\"tile_vocab\":%d,\"tile_channels\":%d,\"recompute\":%d,"
               "\"precision\":\"%s\",\"params\":%zu,",
               c->layers, c->channels, c->heads, c->vocab_size, seq, batch, micro, accumulate,
               c->tile_tokens, c->tile_hidden, c->tile_vocab, c->tile_channels, c->recompute,
               c->precision == TSR_GPT2_BF16 ? "bf16" : "fp32", params);
    }
    if (rc == TSR_OK) {
        double peak_host = 0, peak_dev = 0, peak_disk = 0, host_cap = 0, homed = 0;
        for (int n = 0; n < tsr_memory_node_count(); n++) {
            tsr_node_stats_t ns;
            if (tsr_memory_node_stats(n, &ns) == TSR_OK) {
                homed += (double)ns.homed;
                if (n == 0) {
                    peak_host = (double)ns.peak;
                    host_cap = (double)ns.capacity;
                } else if (n == disk_node)
                    peak_disk = (double)ns.peak;
                else if ((double)ns.peak > peak_dev)
                    peak_dev = (double)ns.peak;
            }
        }
        printf("\"fits\":true,\"mb_first_s\":%.6g,\"mb_s\":%.6g,\"adamw_s\":%.6g,"
               "\"mb_first_bytes\":%.6g,\"mb_bytes\":%.6g,\"adamw_bytes\":%.6g,"
               "\"step_s\":%.6g,\"step_bytes\":%.6g,\"lower_bound_bytes\":%.6g,"
               "\"tflops\":%.4g,\"tasks\":%llu,\"wall_s\":%.4g,"
               "\"sim_tasks_per_s\":%.4g,\"rss_mib\":%.0f,\"peak_host_gib\":%.4g,"
               "\"peak_device_gib\":%.4g,\"placement\":\"%s\",\"homed_gib\":%.4g,"
               "\"disk\":%s,\"disk_bytes\":%.6g,\"disk_accelerator_bytes\":%.6g,"
               "\"peak_disk_gib\":%.4g,\"host_overdraft_gib\":%.4g,\"wave\":%d}\n",
               st.first_mb, st.mb, st.adamw, st.first_mb_bytes[LINK_ACC],
               st.mb_bytes[LINK_ACC], st.adamw_bytes[LINK_ACC], step_s, step_bytes,
               lower_bytes, flops / step_s * 1e-12,
               (unsigned long long)(tot.tasks - tasks_prev),
               wall, (double)tot.tasks / wall, rss_mib, peak_host / 1073741824.0,
               peak_dev / 1073741824.0, homed > 0 ? "owner" : "replicate",
               homed / 1073741824.0, disk_node >= 0 ? "true" : "false", disk_bytes,
               disk_acc_bytes, peak_disk / 1073741824.0,
               disk_node >= 0 && peak_host > host_cap ? (peak_host - host_cap) / 1073741824.0
                                                      : 0.0,
               per);
    } else {
        printf("\"fits\":false,\"oom\":%s,\"error\":", oom ? "true" : "false");
        cli_json_str(tsr_error_message());
        printf("}\n");
    }
out:
    free(tok);
    model_free(&m);
    int src = tsr_shutdown();
    if (status == 0 && src != TSR_OK && src != TSR_ETASK)
        status = cli_lib_fail(src, "shutdown");
    return status;
}
