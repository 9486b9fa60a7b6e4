/* bench/mpi/dp_step.c — tessera-bench-dp: the data-parallel GPT-2 training
 * step, timed, on every rank of an MPI job (public API only: tessera.h,
 * gpt2.h, mpi.h). bench/mpi/run.sh runs it with N = 1 and 2 ranks and reads
 * the communication out of the per-rank traces.
 *
 *   mpirun -np N tessera-bench-dp [--layers 6 --heads 8 --channels 512
 *       --vocab 16384 --ctx 1024] [--batch 4 --seq 128] [--steps 4]
 *       [--warmup 1] [--threads 1] [--zero 0|1] [--trace-dir DIR]
 *
 * Every rank trains its own batch of --batch x --seq tokens (weak scaling:
 * the combined batch grows with N); one step = zero_grad, forward with
 * targets, backward, tsr_gpt2_step (the gradients' all-reduce, AdamW), then
 * the global loss (a collective). Started without a launcher it runs as one
 * process. With --trace-dir each rank writes DIR/rank-R.json (the runtime's
 * Chrome trace: tasks per worker, transfers on the communication track).
 * Rank 0 prints a line for people and one JSON line:
 *   {"bench":"gpt2-dp","ranks":N,"zero":Z,"workers_per_rank":W,
 *    "s_per_step":S,"tok_per_s":R,"loss_first":L0,"loss_last":L1,...}
 * with tok_per_s = N x batch x seq / s_per_step.
 */
#include <tessera/gpt2.h>
#include <tessera/mpi.h>
#include <tessera/tessera.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"

typedef struct options {
    int layers, heads, channels, vocab, ctx, batch, seq, steps, warmup, threads, zero;
    const char *trace_dir;
} options_t;

static int parse(int argc, char **argv, options_t *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--trace-dir") && v) {
            o->trace_dir = v;
            i++;
            continue;
        }
        int *dst = !strcmp(a, "--layers")     ? &o->layers
                   : !strcmp(a, "--heads")    ? &o->heads
                   : !strcmp(a, "--channels") ? &o->channels
                   : !strcmp(a, "--vocab")    ? &o->vocab
                   : !strcmp(a, "--ctx")      ? &o->ctx
                   : !strcmp(a, "--batch")    ? &o->batch
                   : !strcmp(a, "--seq")      ? &o->seq
                   : !strcmp(a, "--steps")    ? &o->steps
                   : !strcmp(a, "--warmup")   ? &o->warmup
                   : !strcmp(a, "--threads")  ? &o->threads
                   : !strcmp(a, "--zero")     ? &o->zero
                                              : NULL;
        char *end;
        long x = v ? strtol(v, &end, 10) : 0;
        if (!dst || !v || *end || x < 0 || x > 1 << 30) {
            fprintf(stderr, "tessera-bench-dp: bad option %s%s%s\n", a, v ? " " : "",
                    v ? v : "");
            return -1;
        }
        *dst = (int)x;
        i++;
    }
    if (o->steps < 1 || o->batch < 1 || o->seq < 1 || o->zero > 1) {
        fprintf(stderr, "tessera-bench-dp: need --steps, --batch, --seq >= 1, --zero 0|1\n");
        return -1;
    }
    return 0;
}

static int failed(int rc, const char *what)
{
    if (rc == TSR_OK)
        return 0;
    fprintf(stderr, "tessera-bench-dp (rank %d): %s: %s (%s)\n", tsr_mpi_rank(), what,
            tsr_strerror(rc), tsr_error_message());
    return 1;
}

/* The same LCG tokens as bench-gpt2-step, offset by the rank so that the
 * ranks train on different data. */
static void tokens(const options_t *o, int rank, int32_t *in, int32_t *tg)
{
    uint64_t s = 1 + 7919u * (uint64_t)rank;
    size_t n = (size_t)o->batch * o->seq;
    for (size_t i = 0; i <= n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int32_t t = (int32_t)((s >> 33) % (uint64_t)o->vocab);
        if (i < n)
            in[i] = t;
        if (i > 0)
            tg[i - 1] = t;
    }
}

int main(int argc, char **argv)
{
    options_t o = {.layers = 6, .heads = 8, .channels = 512, .vocab = 16384, .ctx = 1024,
                   .batch = 4, .seq = 128, .steps = 4, .warmup = 1, .threads = 1};
    if (parse(argc, argv, &o))
        return 2;
    int mpi = tsr_mpi_available() &&
              (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK"));
    if (mpi && failed(tsr_mpi_init(&argc, &argv), "mpi_init"))
        return 1;
    int rank = tsr_mpi_rank(), nranks = tsr_mpi_size();

    char trace[4096];
    tsr_config_t rc;
    tsr_config_init(&rc);
    rc.ncpu = o.threads;
    rc.bind = 0; /* ranks share the machine's cores: leave placement to the OS */
    if (o.trace_dir) {
        snprintf(trace, sizeof trace, "%s/rank-%d.json", o.trace_dir, rank);
        rc.trace_path = trace;
    }
    int status = 1;
    tsr_gpt2_t *m = NULL;
    size_t n = (size_t)o.batch * o.seq;
    int32_t *in = malloc(n * sizeof *in), *tg = malloc(n * sizeof *tg);
    if (!in || !tg) {
        fprintf(stderr, "tessera-bench-dp: out of memory\n");
        goto out;
    }
    tokens(&o, rank, in, tg);
    if (failed(tsr_init(&rc), "init"))
        goto out;
    tsr_gpt2_config_t c;
    tsr_gpt2_config_default(&c);
    c.layers = o.layers, c.heads = o.heads, c.channels = o.channels;
    c.vocab_size = o.vocab, c.context = o.ctx;
    c.data_parallel = nranks > 1;
    c.zero = nranks > 1 && o.zero;
    if (failed(tsr_gpt2_create(&m, &c, o.batch, o.seq), "gpt2_create") ||
        failed(tsr_gpt2_init_weights(m, 1), "init_weights"))
        goto shutdown;
    tsr_adamw_config_t opt;
    tsr_adamw_config_default(&opt);
    float first = 0, last = 0;
    double t0 = 0;
    for (int s = 0; s < o.warmup + o.steps; s++) {
        if (s == o.warmup) {
            if (failed(tsr_wait_all(), "wait"))
                goto shutdown;
            t0 = bench_now();
        }
        float loss;
        if (failed(tsr_gpt2_zero_grad(m), "zero_grad") ||
            failed(tsr_gpt2_forward(m, in, tg, NULL), "forward") ||
            failed(tsr_gpt2_backward(m, 1.0f), "backward") ||
            failed(tsr_gpt2_step(m, &opt, 3e-4f, NULL), "step") ||
            failed(tsr_gpt2_loss(m, &loss), "loss"))
            goto shutdown;
        if (s == 0)
            first = loss;
        last = loss;
    }
    if (failed(tsr_wait_all(), "wait"))
        goto shutdown;
    double sps = (bench_now() - t0) / o.steps;
    double tps = (double)nranks * (double)n / sps;
    if (rank == 0) {
        printf("tessera-bench-dp  %d rank%s x %d worker%s  %zu params  %d x %d tokens per rank"
               "  zero %d  %.4f s/step  %.1f tok/s  loss %.4f -> %.4f\n",
               nranks, nranks > 1 ? "s" : "", o.threads, o.threads > 1 ? "s" : "",
               tsr_gpt2_num_params(m), o.batch, o.seq, c.zero, sps, tps, first, last);
        printf("{\"bench\":\"gpt2-dp\",\"ranks\":%d,\"zero\":%d,\"workers_per_rank\":%d,"
               "\"params\":%zu,\"batch\":%d,\"seq\":%d,\"steps\":%d,\"s_per_step\":%.6g,"
               "\"tok_per_s\":%.6g,\"loss_first\":%.6g,\"loss_last\":%.6g}\n",
               nranks, c.zero, o.threads, tsr_gpt2_num_params(m), o.batch, o.seq, o.steps,
               sps, tps, first, last);
    }
    status = 0;
shutdown:
    tsr_gpt2_free(m);
    if (tsr_shutdown() != TSR_OK && status == 0)
        status = failed(TSR_ETASK, "shutdown");
out:
    free(in);
    free(tg);
    if (mpi)
        tsr_mpi_finalize();
    return status;
}
