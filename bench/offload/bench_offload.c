/* tessera-bench-offload — tiled SGEMM (C += A B) whose working set is 1×,
 * 2×, 4× and 8× the memory of the accelerator that runs it: a simulated
 * accelerator throttled to a PCIe-like bandwidth (and a real GPU when one
 * is present). For each size: GFLOP/s (and its ratio to the same product
 * on an accelerator large enough to hold everything, run in the same
 * process), bytes moved against the lower bound (every tile in once, C out
 * once), and time the worker waited for data, under the window eviction
 * rule (Belady over the submitted tasks, the default); the peer, run side
 * by side, is the same configuration under LRU eviction. On a GPU, also
 * the bandwidth of a plain cudaMemcpy from pinned
 * memory, measured in the same run. On emulated GPUs (a -Dcuda=emu build)
 * the timings are those of the CPU emulation, not of a GPU: the GPU section
 * then checks the product against a CPU reference instead (correctness
 * only), and says so.
 *
 * Output: a table, then one JSON line per figure.
 */
#include <tessera/tessera.h>

#include <cblas.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "kernels/gemm.h"
#ifdef TSR_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

typedef struct { int nb; } gemm_args_t;

/* C (nb, nb) += A (nb, nb) * B (nb, nb), column-major tiles. */
static int gemm_cpu(void **b, const void *args, const tsr_exec_t *e)
{
    (void)e;
    int nb = ((const gemm_args_t *)args)->nb;
    tsr_cpu_gemm(TSR_NOTRANS, TSR_NOTRANS, nb, nb, nb, 1.0f, b[0], nb, 0, b[1], nb, 0, 1.0f,
                 b[2], nb, 0, 1);
    return 0;
}

#ifdef TSR_HAVE_CUDA
static int gemm_cuda(void **b, const void *args, const tsr_exec_t *e)
{
    int nb = ((const gemm_args_t *)args)->nb;
    int mode = e->cuda_fp32 == TSR_CUDA_FP32_STRICT ? TSR_GEMM_FP32 : TSR_GEMM_TF32;
    return tsr_cuda_gemm(e->cuda_stream, e->cublas_handle, mode, TSR_NOTRANS, TSR_NOTRANS,
                         nb, nb, nb, 1.0f, b[0], nb, 0, b[1], nb, 0, 1.0f, b[2], nb, 0, 1);
}
#define GEMM_CUDA gemm_cuda
#else
#define GEMM_CUDA NULL
#endif

static double gemm_flops(const void *args, const size_t *sizes)
{
    (void)sizes;
    double nb = ((const gemm_args_t *)args)->nb;
    return 2 * nb * nb * nb;
}

static const tsr_codelet_t gemm_cl = {.name = "gemm", .impl = {gemm_cpu, GEMM_CUDA}, .nbuffers = 3, .flops = gemm_flops};

#ifdef TSR_CUDA_EMU
#define EMULATED_GPU 1
#else
#define EMULATED_GPU 0
#endif

/* Largest |C - (C0 + A B)| over the tiled matrices (column-major tiles of
 * nb×nb, tile (i, j) at index i + j nt of each matrix): the reference is
 * computed here, tile by tile, in double precision. */
static double max_error(const float *mem, const float *c0, int nt, int nb)
{
    size_t tile = (size_t)nb * nb;
    const float *A = mem, *B = mem + (size_t)nt * nt * tile, *C = B + (size_t)nt * nt * tile;
    double worst = 0;
    double *acc = malloc(tile * sizeof *acc);
    if (!acc)
        return INFINITY;
    for (int i = 0; i < nt; i++)
        for (int j = 0; j < nt; j++) {
            const float *c0t = c0 + (size_t)(i + j * nt) * tile;
            for (size_t x = 0; x < tile; x++)
                acc[x] = c0t[x];
            for (int k = 0; k < nt; k++) {
                const float *a = A + (size_t)(i + k * nt) * tile;
                const float *b = B + (size_t)(k + j * nt) * tile;
                for (int col = 0; col < nb; col++)
                    for (int l = 0; l < nb; l++) {
                        double blc = b[l + (size_t)col * nb];
                        for (int row = 0; row < nb; row++)
                            acc[row + (size_t)col * nb] += a[row + (size_t)l * nb] * blc;
                    }
            }
            const float *ct = C + (size_t)(i + j * nt) * tile;
            for (size_t x = 0; x < tile; x++) {
                double d = fabs(ct[x] - acc[x]);
                if (!(d <= worst)) /* NaN counts as worst */
                    worst = isnan(d) ? INFINITY : d;
            }
        }
    free(acc);
    return worst;
}

typedef struct result {
    double max_err;     /* against the CPU reference, when checked */
    int ok;
    double gflops, moved, wait_s, seconds;
    char err[256];
} result_t;

/* One run: nt×nt tiles of nb×nb per matrix, on one accelerator of
 * `capacity` bytes (sim, or GPU if gpu), pipeline depth `depth`, eviction
 * rule `evict` (TSR_EVICT_…). */
static result_t run(int nt, int nb, size_t capacity, int depth, int evict, bool in_order,
                    int gpu, double bw, double lat)
{
    result_t res = {0};
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = -1; /* only the accelerator computes */
    cfg.bind = 0;
    cfg.pipeline = depth;
    cfg.evict = evict;
    /* in_order: ready tasks run in the order they were submitted (prio,
     * priority = minus the submission index), the order the window rule
     * reads; else eager: in the order they became ready */
    cfg.sched = in_order ? "prio" : "eager";
    if (gpu) {
        cfg.ncuda = 1;
        cfg.cuda_mem = capacity;
    } else {
        cfg.ncuda = 0;
        cfg.nsim = 1;
        cfg.sim_mem = capacity;
        cfg.sim_bandwidth = bw;
        cfg.sim_latency = lat;
    }
    if (tsr_init(&cfg) != TSR_OK) {
        snprintf(res.err, sizeof res.err, "init: %s", tsr_error_message());
        return res;
    }
    size_t tile = (size_t)nb * nb;
    int n3 = 3 * nt * nt;
    float *mem = malloc((size_t)n3 * tile * sizeof(float));
    tsr_handle_t *h = malloc((size_t)n3 * sizeof *h);
    if (!mem || !h) {
        snprintf(res.err, sizeof res.err, "out of host memory");
        free(mem);
        free(h);
        tsr_shutdown();
        return res;
    }
    srand(1);
    for (size_t i = 0; i < (size_t)n3 * tile; i++)
        mem[i] = (float)rand() / RAND_MAX - 0.5f;
    for (int i = 0; i < n3; i++)
        tsr_handle_register(&h[i], mem + (size_t)i * tile, tile * sizeof(float));
    tsr_handle_t *A = h, *B = h + nt * nt, *C = h + 2 * nt * nt;
    /* On emulated GPUs the product is checked: keep C's initial values. */
    float *c0 = NULL;
    if (gpu && EMULATED_GPU) {
        c0 = malloc((size_t)nt * nt * tile * sizeof(float));
        if (c0)
            memcpy(c0, mem + (size_t)2 * nt * nt * tile, (size_t)nt * nt * tile * sizeof(float));
    }
    gemm_args_t args = {nb};
    double t0 = bench_now();
    for (int i = 0; i < nt; i++)
        for (int j = 0; j < nt; j++)
            for (int k = 0; k < nt; k++) {
                tsr_access_t acc[3] = {{A[i + k * nt], TSR_R}, {B[k + j * nt], TSR_R},
                                       {C[i + j * nt], TSR_RW}};
                tsr_task_desc_t d = {.codelet = &gemm_cl, .nbuffers = 3, .buffers = acc,
                                     .args = &args, .args_size = sizeof args,
                                     .priority = in_order ? -((i * nt + j) * nt + k) : 0};
                tsr_submit(&d, NULL);
            }
    /* The result counts once it is back in the application's buffers. */
    int rc = tsr_wait_all();
    for (int i = 0; i < nt * nt && rc == TSR_OK; i++) {
        void *p;
        rc = tsr_handle_acquire(C[i], TSR_R, &p);
        if (rc == TSR_OK)
            rc = tsr_handle_release(C[i]);
    }
    res.seconds = bench_now() - t0;
    res.max_err = rc == TSR_OK && c0 ? max_error(mem, c0, nt, nb) : 0;
    free(c0);
    if (rc != TSR_OK) {
        snprintf(res.err, sizeof res.err, "%s", tsr_error_message());
    } else {
        res.ok = 1;
        res.gflops = 2.0 * nb * nb * (double)nb * nt * nt * nt / res.seconds * 1e-9;
        res.moved = (double)(tsr_memory_link_bytes(0, 1) + tsr_memory_link_bytes(1, 0));
        for (int w = 0; w < tsr_worker_count(); w++) {
            tsr_worker_stats_t ws;
            if (tsr_worker_stats(w, &ws) == TSR_OK)
                res.wait_s += ws.wait_data_s;
        }
    }
    tsr_shutdown();
    free(mem);
    free(h);
    return res;
}

#ifdef TSR_HAVE_CUDA
/* Host-to-device bandwidth of cudaMemcpy from pinned memory (GB/s). */
static double pinned_h2d(size_t bytes)
{
    void *host = NULL, *dev = NULL;
    double gbs = 0;
    if (cudaMallocHost(&host, bytes) == cudaSuccess && cudaMalloc(&dev, bytes) == cudaSuccess) {
        memset(host, 1, bytes);
        cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice);
        double t0 = bench_now();
        for (int i = 0; i < 10; i++)
            cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice);
        gbs = 10.0 * bytes / (bench_now() - t0) * 1e-9;
    }
    cudaFree(dev);
    cudaFreeHost(host);
    (void)cudaGetLastError();
    return gbs;
}
#endif

/* Tiles moved by an offline Belady (MIN) run of the same i-j-k loop with
 * room for `slots` tiles, one task at a time (no pipeline): before each
 * task its three tiles are brought in, evicting the tile whose next use
 * is furthest (never: furthest of all; ties: least recently used); an
 * evicted C tile written since it came in is written back; at the end
 * every written C tile goes out. No eviction rule can move less for this
 * order: it is the floor under the window rule's figure. -1 without
 * memory. */
static double belady_tiles(int nt, int slots)
{
    int ntiles = 3 * nt * nt, ntask = nt * nt * nt;
    int *tile = malloc((size_t)ntask * 3 * sizeof *tile);
    int *next = malloc((size_t)ntask * 3 * sizeof *next);
    int *seen = malloc((size_t)ntiles * sizeof *seen);
    int *res_next = malloc((size_t)ntiles * sizeof *res_next);
    int *last = malloc((size_t)ntiles * sizeof *last);
    char *in = calloc((size_t)ntiles, 1), *dirty = calloc((size_t)ntiles, 1);
    double moved = -1;
    if (!tile || !next || !seen || !res_next || !last || !in || !dirty)
        goto out;
    int t = 0;
    for (int i = 0; i < nt; i++)
        for (int j = 0; j < nt; j++)
            for (int k = 0; k < nt; k++, t++) {
                tile[3 * t] = i + k * nt;
                tile[3 * t + 1] = nt * nt + k + j * nt;
                tile[3 * t + 2] = 2 * nt * nt + i + j * nt;
            }
    for (int x = 0; x < ntiles; x++)
        seen[x] = ntask; /* never */
    for (t = ntask - 1; t >= 0; t--)
        for (int b = 0; b < 3; b++) {
            next[3 * t + b] = seen[tile[3 * t + b]];
            seen[tile[3 * t + b]] = t;
        }
    int nin = 0;
    moved = 0;
    for (t = 0; t < ntask; t++) {
        for (int b = 0; b < 3; b++) {
            int x = tile[3 * t + b];
            if (in[x])
                continue;
            if (nin == slots) {
                int v = -1;
                for (int y = 0; y < ntiles; y++) {
                    if (!in[y] || y == tile[3 * t] || y == tile[3 * t + 1] ||
                        y == tile[3 * t + 2])
                        continue;
                    if (v < 0 || res_next[y] > res_next[v] ||
                        (res_next[y] == res_next[v] && last[y] < last[v]))
                        v = y;
                }
                in[v] = 0;
                nin--;
                moved += dirty[v];
                dirty[v] = 0;
            }
            in[x] = 1;
            nin++;
            moved++;
        }
        for (int b = 0; b < 3; b++) {
            res_next[tile[3 * t + b]] = next[3 * t + b];
            last[tile[3 * t + b]] = t;
        }
        dirty[tile[3 * t + 2]] = 1;
    }
    for (int x = 0; x < ntiles; x++)
        moved += dirty[x];
out:
    free(tile);
    free(next);
    free(seen);
    free(res_next);
    free(last);
    free(in);
    free(dirty);
    return moved;
}

typedef struct figure {
    char kase[64], metric[32], unit[16], peer[32];
    double value, peer_value;
    int has_peer;
} figure_t;

static figure_t figs[96];
static int nfigs;

static void add(const char *kase, const char *metric, const char *unit, double v,
                const char *peer, double pv, int has_peer)
{
    figure_t *f = &figs[nfigs++];
    snprintf(f->kase, sizeof f->kase, "%s", kase);
    snprintf(f->metric, sizeof f->metric, "%s", metric);
    snprintf(f->unit, sizeof f->unit, "%s", unit);
    snprintf(f->peer, sizeof f->peer, "%s", peer);
    f->value = v;
    f->peer_value = pv;
    f->has_peer = has_peer;
}

/* > 1: the window rule is better (for bytes and waiting, lower is). */
static double ratio_of(const figure_t *f)
{
    if (!f->has_peer || f->value <= 0 || f->peer_value <= 0)
        return NAN;
    bool lower_better = !strstr(f->metric, "gflops");
    return lower_better ? f->peer_value / f->value : f->value / f->peer_value;
}

static void usage(void)
{
    fprintf(stderr, "usage: tessera-bench-offload [--quick] [--nb N] [--capacity-mib M]\n"
                    "         [--bw-mbs B] [--latency-us L]\n");
}

int main(int argc, char **argv)
{
    int nb = 256, quick = 0;
    double cap_mib = 12, bw = 2000e6, lat = 10e-6;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--nb") && i + 1 < argc)
            nb = (int)strtol(argv[++i], &end, 10);
        else if (!strcmp(argv[i], "--capacity-mib") && i + 1 < argc)
            cap_mib = strtod(argv[++i], &end);
        else if (!strcmp(argv[i], "--bw-mbs") && i + 1 < argc)
            bw = strtod(argv[++i], &end) * 1e6;
        else if (!strcmp(argv[i], "--latency-us") && i + 1 < argc)
            lat = strtod(argv[++i], &end) * 1e-6;
        else {
            usage();
            return 2;
        }
        if (end && *end) {
            fprintf(stderr, "bad number '%s'\n", argv[i]);
            return 2;
        }
    }
    if (nb < 8 || cap_mib <= 0 || bw <= 0 || lat < 0) {
        usage();
        return 2;
    }
    if (quick) {
        nb = 128;
        cap_mib = 2;
    }
    openblas_set_num_threads(1);
    size_t tile_bytes = (size_t)nb * nb * sizeof(float);
    size_t capacity = (size_t)(cap_mib * 1048576.0);
    int gpu = tsr_cuda_device_count() > 0;
    printf("tiled SGEMM C += A B, %dx%d tiles, accelerator memory %.1f MiB, %s\n", nb, nb,
           cap_mib,
           gpu ? (EMULATED_GPU ? "GPU 0 (emulated)" : "GPU 0") : "simulated accelerator");
    if (gpu && EMULATED_GPU)
        printf("EMULATED GPU: the timings below are those of the CPU emulation, not GPU "
               "timings; this run checks correctness only (every product against a CPU "
               "reference)\n");
    if (!gpu)
        printf("simulated copy engine: %.0f MB/s, %.0f us per copy; 1 worker computing\n",
               bw / 1e6, lat * 1e6);
    static const int ratios[] = {1, 2, 4, 8};
    for (int r = 0; r < 4; r++) {
        /* 3 nt^2 tiles = ratio x capacity (1x: the largest that fits). */
        int nt = (int)floor(sqrt((double)ratios[r] * capacity / (3.0 * tile_bytes)));
        if (nt < 2)
            nt = 2;
        double ws = 3.0 * nt * nt * tile_bytes;
        char kase[64];
        snprintf(kase, sizeof kase, "ws%dx_%dtiles", ratios[r], nt);
        result_t a = run(nt, nb, capacity, 4, TSR_EVICT_WINDOW, true, gpu, bw, lat);
        result_t b = run(nt, nb, capacity, 4, TSR_EVICT_LRU, true, gpu, bw, lat);
        /* in memory: the same product on an accelerator that holds it all */
        size_t all = (size_t)ws + 4 * tile_bytes;
        result_t m = run(nt, nb, all > capacity ? all : capacity, 4, TSR_EVICT_WINDOW, true,
                         gpu, bw, lat);
        /* the same two rules when ready tasks run in the order they became
         * ready (eager), which is not the order of the window */
        result_t ea = run(nt, nb, capacity, 4, TSR_EVICT_WINDOW, false, gpu, bw, lat);
        result_t eb = run(nt, nb, capacity, 4, TSR_EVICT_LRU, false, gpu, bw, lat);
        result_t *all_runs[] = {&a, &b, &m, &ea, &eb};
        for (int x = 0; x < 5; x++)
            if (!all_runs[x]->ok) {
                printf("%s: FAILED: %s\n", kase, all_runs[x]->err);
                return 1;
            }
        if (gpu && EMULATED_GPU) {
            /* fp32 sums of nt*nb products of values in [-0.5, 0.5], TF32 inputs */
            double tol = 2e-3 * sqrt((double)nt * nb);
            double err = 0;
            for (int x = 0; x < 5; x++)
                err = fmax(err, all_runs[x]->max_err);
            printf("%s: max |C - reference| = %.3g (tolerance %.3g): %s\n", kase, err, tol,
                   err <= tol ? "correct" : "WRONG");
            if (!(err <= tol))
                return 1;
        }
        double lower = ws + nt * nt * (double)tile_bytes; /* all in, C out */
        add(kase, "gflops", "GFLOP/s", a.gflops, "lru", b.gflops, 1);
        add(kase, "of_in_memory_gflops", "x", a.gflops / m.gflops, "lru",
            b.gflops / m.gflops, 1);
        add(kase, "moved_over_lower_bound", "x", a.moved / lower, "lru", b.moved / lower, 1);
        add(kase, "wait_data_fraction", "of time", a.wait_s / a.seconds, "lru",
            b.wait_s / b.seconds, 1);
        add(kase, "in_memory_gflops", "GFLOP/s", m.gflops, "-", 0, 0);
        add(kase, "moved_mib", "MiB", a.moved / 1048576.0, "lower_bound", lower / 1048576.0,
            1);
        double bel = belady_tiles(nt, (int)(capacity / tile_bytes));
        add(kase, "belady_over_lower", "x", bel * tile_bytes / lower, "-", 0, 0);
        add(kase, "eager_moved_over_lower", "x", ea.moved / lower, "lru", eb.moved / lower, 1);
        add(kase, "eager_gflops", "GFLOP/s", ea.gflops, "lru", eb.gflops, 1);
    }
#ifdef TSR_HAVE_CUDA
    if (gpu) {
        /* Achieved H2D: the 4x run moved `moved` bytes; compare the plain copy. */
        double ref = pinned_h2d(tile_bytes * 16);
        add("h2d_pinned_memcpy", "bandwidth", "GB/s", ref, "-", 0, 0);
    }
#endif
    printf("\n%-22s %-24s %12s %-12s %12s %8s\n", "case", "metric", "tessera", "peer",
           "peer", "ratio");
    for (int i = 0; i < nfigs; i++) {
        figure_t *f = &figs[i];
        double ratio = ratio_of(f);
        printf("%-22s %-24s %12.4g %-12s %12.4g %8.3g\n", f->kase, f->metric, f->value,
               f->peer, f->peer_value, ratio);
    }
    printf("(tessera: window eviction rule; ratio > 1: the window rule is better; for "
           "moved_mib, lower bound / moved)\n\n");
    for (int i = 0; i < nfigs; i++) {
        figure_t *f = &figs[i];
        double ratio = ratio_of(f);
        char rs[32];
        if (isnan(ratio))
            snprintf(rs, sizeof rs, "null");
        else
            snprintf(rs, sizeof rs, "%.4g", ratio);
        printf("{\"bench\":\"offload\",\"case\":\"%s\",\"workers\":1,\"metric\":\"%s\","
               "\"value\":%.6g,\"unit\":\"%s\",\"peer\":\"%s\",\"peer_value\":%.6g,"
               "\"ratio\":%s}\n",
               f->kase, f->metric, f->value, f->unit, f->peer, f->peer_value, rs);
    }
    return 0;
}
