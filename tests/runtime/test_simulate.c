/* Simulation mode (runtime/simulate.c): the runtime on a platform file, in
 * virtual time, with phantom data. References: makespans computed by hand
 * from the platform's rates (the disk tier's write-backs and read-backs
 * among them); the same program run twice (traces), or run
 * by the threads driver (results); the process's resident memory. */
#include "util.h"

#include <tessera/sched.h>

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- platforms written for the tests ------------------------------------------- */

/* A platform file with `ncpu` CPU workers of 1 GFLOPS (so a task of k·10^6
 * flops takes k ms), no launch or task overhead, memory far too fast to
 * matter, and `accs` (a JSON array, or NULL) of accelerators. Returns the
 * path (static storage, one per slot). */
static const char *platform_models = "rates";
/* With "machine": the "models_key" member, or "" for none. */
static const char *platform_models_key = "";
/* The model directory of start_sim ("": nothing on disk). */
static const char *sim_model_dir = "";

static const char *write_platform(int slot, int ncpu, const char *accs, double host_gib)
{
    static char paths[4][64];
    char *path = paths[slot];
    snprintf(path, sizeof paths[slot], "/tmp/tsr-sim-%d-%d.json", (int)getpid(), slot);
    FILE *f = fopen(path, "w");
    cr_assert(f, "cannot write %s", path);
    fprintf(f,
            "{\"name\": \"test-%d\", \"models\": \"%s\",%s%s%s \"task_overhead_us\": 0,\n"
            " \"host\": {\"memory_gib\": %g, \"memory_bandwidth_gbs\": 1000000,\n"
            "          \"memory_latency_us\": 0, \"cpu_workers\": %d},\n"
            " \"devices\": {\"cpu\": {\"fp32_tflops\": 0.001, \"memory_bandwidth_gbs\": 1000000,\n"
            "   \"launch_us\": 0, \"flops_efficiency\": 1, \"bytes_efficiency\": 1}%s}%s%s}\n",
            slot, platform_models, platform_models_key[0] ? " \"models_key\": \"" : "",
            platform_models_key, platform_models_key[0] ? "\"," : "", host_gib, ncpu,
            accs && strstr(accs, "\"cuda\"") ? ",\n \"cuda\": {\"fp32_tflops\": 0.004, \"memory_bandwidth_gbs\": 1000,"
                   " \"launch_us\": 5, \"flops_efficiency\": 1, \"bytes_efficiency\": 1}"
                 : "",
            accs ? ",\n \"accelerators\": " : "", accs ? accs : "");
    fclose(f);
    return path;
}

/* 4 accelerators of `gib` GiB each, PCIe 16 GB/s behind 2 switches;
 * GPUs (NVLink between them), or simulated accelerators (sims_json). */
static const char *accs_json(const char *kind, double gib)
{
    static char buf[512];
    bool cuda = strcmp(kind, "cuda") == 0;
    snprintf(buf, sizeof buf,
             "[{\"kind\": \"%s\", \"count\": 4, \"memory_gib\": %g,"
             " \"link\": {\"bandwidth_gbs\": 16, \"latency_us\": 2},"
             " \"pcie_switch\": {\"bandwidth_gbs\": 24, \"latency_us\": 1,"
             " \"accelerators_per_switch\": 2}%s}]",
             kind, gib, cuda ? ", \"nvlink\": {\"bandwidth_gbs\": 200, \"latency_us\": 2}" : "");
    return buf;
}

static const char *gpus_json(double gib) { return accs_json("cuda", gib); }
static const char *sims_json(double gib) { return accs_json("sim", gib); }

static void start_sim(const char *platform, int ncpu, const char *sched, int exec,
                      const char *trace)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = ncpu;
    cfg.sched = sched;
    cfg.bind = 0;
    cfg.simulate = platform;
    cfg.simulate_exec = exec;
    cfg.trace_path = trace;
    cfg.perfmodel_dir = sim_model_dir; /* "": nothing on disk */
    int rc = tsr_init(&cfg);
    cr_assert_eq(rc, TSR_OK, "tsr_init: %s", tsr_error_message());
}

/* ---- codelets -------------------------------------------------------------------- */

/* "work": RW on buffer 0, reads the rest; flops from the argument (an
 * int64 count of 10^6 flops, so k ms at 1 GFLOPS); no memory time. With
 * execution, adds every other buffer's value and 1 into buffer 0. */
static int work_kernel(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    double *x = b[0];
    for (int i = 1; i < e->nbuffers; i++)
        x[0] += ((const double *)b[i])[0];
    x[0] += 1;
    return 0;
}

static double work_flops(const void *args, const size_t *sizes)
{
    (void)sizes;
    return (double)*(const int64_t *)args * 1e6;
}

static double no_bytes(const void *args, const size_t *sizes)
{
    (void)args;
    (void)sizes;
    return 0;
}

static const tsr_codelet_t work1 = {.name = "work1", .impl = {work_kernel}, .nbuffers = 1,
                                    .flops = work_flops, .bytes = no_bytes};
static const tsr_codelet_t work2 = {.name = "work2", .impl = {work_kernel}, .nbuffers = 2,
                                    .flops = work_flops, .bytes = no_bytes};
static const tsr_codelet_t work5 = {.name = "work5", .impl = {work_kernel}, .nbuffers = 5,
                                    .flops = work_flops, .bytes = no_bytes};

static void submit_work(const tsr_codelet_t *cl, const tsr_handle_t *h, int64_t ms)
{
    tsr_access_t acc[5];
    for (int i = 0; i < cl->nbuffers; i++)
        acc[i] = (tsr_access_t){h[i], i == 0 ? TSR_RW : TSR_R};
    tsr_task_desc_t d = {.codelet = cl, .buffers = acc, .nbuffers = cl->nbuffers,
                         .args = &ms, .args_size = sizeof ms};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
}

/* ---- a hand-computed makespan ------------------------------------------------------ */

Test(simulate, makespan_chain_and_fork_join)
{
    const char *plat = write_platform(0, 2, NULL, 64);
    start_sim(plat, 0, "eager", 1, NULL);
    cr_assert_eq(tsr_worker_count(), 2);

    /* A chain of 1..5 ms on one handle: 15 ms whatever the workers. */
    double x = 0;
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_register(&h, &x, sizeof x), TSR_OK);
    for (int64_t k = 1; k <= 5; k++)
        submit_work(&work1, &h, k);
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    double t_chain = tsr_time();
    cr_assert_float_eq(t_chain, 15e-3, 1e-12, "chain: %.12f s", t_chain);

    /* Fork-join on 2 workers: A (2 ms); four B (3 ms) read A's output, two
     * at a time; C (1 ms) reads all four: 2 + 3 + 3 + 1 = 9 ms more. */
    double y[5] = {0};
    tsr_handle_t hy[5];
    for (int i = 0; i < 5; i++)
        cr_assert_eq(tsr_handle_register(&hy[i], &y[i], sizeof y[i]), TSR_OK);
    submit_work(&work1, &hy[0], 2);
    for (int i = 1; i <= 4; i++)
        submit_work(&work2, (tsr_handle_t[]){hy[i], hy[0]}, 3);
    submit_work(&work5, (tsr_handle_t[]){hy[0], hy[1], hy[2], hy[3], hy[4]}, 1);
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    double t_fj = tsr_time() - t_chain;
    cr_assert_float_eq(t_fj, 9e-3, 1e-12, "fork-join: %.12f s", t_fj);

    /* Busy time adds up to the work done: 15 + 2 + 12 + 1 ms. */
    double busy = 0;
    for (int w = 0; w < 2; w++) {
        tsr_worker_stats_t st;
        cr_assert_eq(tsr_worker_stats(w, &st), TSR_OK);
        busy += st.busy_s;
    }
    cr_assert_float_eq(busy, 30e-3, 1e-12, "busy %.12f s", busy);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(tsr_handle_unregister(hy[i]), TSR_OK);
    cr_assert_eq(tsr_handle_unregister(h), TSR_OK);
    stop_runtime();
    /* Executed: the chain added 1 five times; C added B's (A+1 each). */
    cr_assert_eq(x, 5.0);
    cr_assert_eq(y[0], 1.0 + 4 * 2.0 + 1.0);
    unlink(plat);
}

/* A codelet's own duration model (tsr_codelet_t.seconds, as a replayed
 * graph gives its tasks) is what the simulation charges and what the
 * models say, whatever the flops; explicit dependencies order tasks that
 * share no data. A diamond on 2 workers: a (3 ms) before b (5 ms) and
 * c (2 ms), both before d (1 ms): 3 + 5 + 1 = 9 ms by hand. */
static double own_seconds(const void *args, const size_t *sizes, int kind)
{
    (void)sizes;
    return kind == TSR_DEVICE_CPU ? *(const double *)args : -1;
}

Test(simulate, a_codelets_own_model_and_explicit_deps)
{
    const char *plat = write_platform(0, 2, NULL, 64);
    start_sim(plat, 0, "dmda", 0, NULL);
    static const tsr_codelet_t own = {.name = "own", .impl = {work_kernel}, .nbuffers = 1,
                                      .flops = work_flops, .seconds = own_seconds};
    double x[4] = {0};
    tsr_handle_t h[4];
    tsr_task_t t[4];
    const double ms[4] = {3, 5, 2, 1};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(tsr_handle_register(&h[i], &x[i], sizeof x[i]), TSR_OK);
        double secs = ms[i] * 1e-3;
        tsr_access_t a = {h[i], TSR_RW};
        tsr_task_t deps[2] = {t[0], i == 3 ? t[2] : t[0]};
        if (i == 3)
            deps[0] = t[1];
        tsr_task_desc_t d = {.codelet = &own, .nbuffers = 1, .buffers = &a, .args = &secs,
                             .args_size = sizeof secs, .deps = deps, .ndeps = i ? 2 : 0};
        cr_assert_eq(tsr_submit(&d, &t[i]), TSR_OK, "%s", tsr_error_message());
    }
    double secs = 7e-3;
    size_t size = sizeof(double);
    tsr_perfmodel_info_t info;
    cr_assert_eq(tsr_perfmodel_predict(&own, TSR_DEVICE_CPU, &size, 1, &secs, &info), TSR_OK);
    cr_assert_float_eq(info.seconds, 7e-3, 1e-15);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(tsr_task_wait(t[i]), TSR_OK, "%s", tsr_error_message());
    cr_assert_float_eq(tsr_time(), 9e-3, 1e-12, "diamond: %.12f s", tsr_time());
    for (int i = 0; i < 4; i++)
        cr_assert_eq(tsr_handle_unregister(h[i]), TSR_OK);
    stop_runtime();
    unlink(plat);
}

/* The models the policies read say what the simulation uses. */
Test(simulate, models_give_the_platform_rates)
{
    const char *plat = write_platform(0, 2, gpus_json(16), 64);
    start_sim(plat, 0, "dmda", 0, NULL);
    int64_t ms = 7;
    size_t sizes[1] = {8};
    tsr_perfmodel_info_t info;
    (void)ms;
    /* The argument block is what the flops function reads. */
    cr_assert_eq(tsr_perfmodel_predict(&work1, TSR_DEVICE_CPU, sizes, 1, &ms, &info), TSR_OK,
                 "%s", tsr_error_message());
    cr_assert_float_eq(info.seconds, 7e-3, 1e-15);
    /* CUDA: 4 GFLOPS, 5 µs launch. */
    cr_assert_eq(tsr_perfmodel_predict(&work1, TSR_DEVICE_CUDA, sizes, 1, &ms, &info), TSR_OK);
    cr_assert_float_eq(info.seconds, 7e-3 / 4 + 5e-6, 1e-15);
    /* The bus model reads the platform: host -> GPU 0 at the PCIe link's
     * 16 GB/s (its switch's 24 GB/s does not limit it alone). */
    double lat, bw;
    cr_assert_eq(tsr_bus_model(0, 1, &lat, &bw), TSR_OK, "%s", tsr_error_message());
    cr_assert_float_eq(bw, 16e9, 1.0);
    stop_runtime();
    unlink(plat);
}

/* "models": "machine": this machine's history answers where it has one
 * (a recorded 5 ms for work1 on the CPU), the rate model elsewhere (work2);
 * "models": "rates": the rate model always, whatever the history says. */
Test(simulate, history_or_rates_as_the_platform_says)
{
    for (int machine = 0; machine < 2; machine++) {
        platform_models = machine ? "machine" : "rates";
        const char *plat = write_platform(0, 1, NULL, 64);
        platform_models = "rates";
        start_sim(plat, 0, "eager", 0, NULL);
        int64_t ms = 2;
        size_t sizes[2] = {sizeof(double), sizeof(double)};
        for (int k = 0; k < 5; k++)
            cr_assert_eq(tsr_perfmodel_record(&work1, TSR_DEVICE_CPU, sizes, 1, &ms, 5e-3),
                         TSR_OK, "%s", tsr_error_message());
        double x[2] = {0, 0};
        tsr_handle_t h[2];
        for (int i = 0; i < 2; i++)
            cr_assert_eq(tsr_handle_register(&h[i], &x[i], sizeof x[i]), TSR_OK);
        submit_work(&work1, &h[0], ms);
        cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
        double t1 = tsr_time();
        submit_work(&work2, h, ms);
        cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
        double t2 = tsr_time() - t1;
        for (int i = 0; i < 2; i++)
            cr_assert_eq(tsr_handle_unregister(h[i]), TSR_OK);
        stop_runtime();
        cr_assert_float_eq(t1, machine ? 5e-3 : 2e-3, 1e-12, "%s: work1 took %.9f s",
                           machine ? "machine" : "rates", t1);
        cr_assert_float_eq(t2, 2e-3, 1e-12, "work2 took %.9f s", t2);
        unlink(plat);
    }
}

/* Models measured on another machine: a real run records work1 at 5 ms
 * into a model directory; its folder is renamed as if copied from a GPU
 * node; a "machine" platform naming that folder ("models_key") takes 5 ms
 * from it, and without the key (this machine's folder: none now) the
 * rate model's 2 ms. */
Test(simulate, models_imported_from_another_machine)
{
    /* The environment would override the model directory given here. */
    const char *env = getenv("TESSERA_PERFMODEL_DIR");
    char saved[4096] = "";
    if (env)
        snprintf(saved, sizeof saved, "%s", env);
    unsetenv("TESSERA_PERFMODEL_DIR");
    char dir[] = "/tmp/tsr-sim-models-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 1;
    cfg.bind = 0;
    cfg.perfmodel_dir = dir;
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "%s", tsr_error_message());
    int64_t ms = 2;
    size_t sizes[1] = {sizeof(double)};
    for (int k = 0; k < 5; k++)
        cr_assert_eq(tsr_perfmodel_record(&work1, TSR_DEVICE_CPU, sizes, 1, &ms, 5e-3), TSR_OK,
                     "%s", tsr_error_message());
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
    /* the one folder the run wrote: this machine's key */
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    char from[512] = "", to[512];
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.')
            snprintf(from, sizeof from, "%s/%s", dir, e->d_name);
    closedir(d);
    cr_assert(from[0], "no model folder written in %s", dir);
    snprintf(to, sizeof to, "%s/gpu-node-0001", dir);
    cr_assert_eq(rename(from, to), 0);

    sim_model_dir = dir;
    for (int imported = 1; imported >= 0; imported--) {
        platform_models = "machine";
        platform_models_key = imported ? "gpu-node-0001" : "";
        const char *plat = write_platform(0, 1, NULL, 64);
        platform_models = "rates";
        platform_models_key = "";
        start_sim(plat, 0, "eager", 0, NULL);
        double x = 0;
        tsr_handle_t h;
        cr_assert_eq(tsr_handle_register(&h, &x, sizeof x), TSR_OK);
        submit_work(&work1, &h, ms);
        cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
        double t = tsr_time();
        cr_assert_eq(tsr_handle_unregister(h), TSR_OK);
        stop_runtime();
        cr_assert_float_eq(t, imported ? 5e-3 : 2e-3, 1e-12, "imported %d: work1 took %.9f s",
                           imported, t);
        unlink(plat);
    }
    sim_model_dir = "";
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    if (saved[0])
        setenv("TESSERA_PERFMODEL_DIR", saved, 1);
}

/* ---- determinism ------------------------------------------------------------------ */

/* A random DAG (a fixed LCG) over 24 tiles, on 2 CPUs and 4 GPUs. */
static void random_dag(int ntasks)
{
    enum { NT = 24 };
    tsr_handle_t h[NT];
    for (int i = 0; i < NT; i++)
        cr_assert_eq(tsr_handle_alloc(&h[i], (size_t)1 << 20), TSR_OK);
    uint64_t s = 12345;
    for (int k = 0; k < ntasks; k++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int a = (int)((s >> 33) % NT), b = (int)((s >> 13) % NT);
        int64_t ms = 1 + (int64_t)((s >> 50) % 4);
        if (a == b)
            submit_work(&work1, &h[a], ms);
        else
            submit_work(&work2, (tsr_handle_t[]){h[a], h[b]}, ms);
    }
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    for (int i = 0; i < NT; i++)
        cr_assert_eq(tsr_handle_unregister(h[i]), TSR_OK);
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot read %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    cr_assert(buf);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = 0;
    fclose(f);
    return buf;
}

Test(simulate, same_program_same_trace)
{
    const char *plat = write_platform(1, 2, gpus_json(0.01), 64);
    const char *policies[] = {"dmda", "ws", "eager"};
    for (int p = 0; p < 3; p++) {
        char tr[2][64];
        double t[2];
        for (int run = 0; run < 2; run++) {
            snprintf(tr[run], sizeof tr[run], "/tmp/tsr-sim-%d-trace%d.json", (int)getpid(),
                     run);
            start_sim(plat, 0, policies[p], 0, tr[run]);
            random_dag(400);
            t[run] = tsr_time();
            stop_runtime();
        }
        cr_assert_eq(t[0], t[1], "%s: makespans %.9f and %.9f", policies[p], t[0], t[1]);
        char *a = read_all(tr[0]), *b = read_all(tr[1]);
        cr_assert(strlen(a) > 1000, "%s: a trace with tasks and copies", policies[p]);
        cr_assert(strstr(a, "work2"));
        cr_assert_str_eq(a, b, "%s: two runs, two traces", policies[p]);
        free(a);
        free(b);
        unlink(tr[0]);
        unlink(tr[1]);
    }
    unlink(plat);
}

/* ---- execution: the same results as the threads driver ------------------------- */

enum { TB = 16, NTILE = 4 };

/* C(tile) += A(tile) · B(tile), TB×TB row-major doubles, naive loops. */
static int gemm_kernel(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    (void)e;
    double *c = b[0];
    const double *a = b[1], *bb = b[2];
    for (int i = 0; i < TB; i++)
        for (int j = 0; j < TB; j++) {
            double s = c[i * TB + j];
            for (int k = 0; k < TB; k++)
                s += a[i * TB + k] * bb[k * TB + j];
            c[i * TB + j] = s;
        }
    return 0;
}

static double gemm_flops(const void *args, const size_t *sizes)
{
    (void)args;
    (void)sizes;
    return 2.0 * TB * TB * TB;
}

static const tsr_codelet_t gemm_cl = {.name = "tgemm", .impl = {gemm_kernel, gemm_kernel},
                                      .nbuffers = 3, .flops = gemm_flops};

/* A tiled GEMM of NTILE×NTILE tiles into c (registered buffers). */
static void tiled_gemm(double *a, double *b, double *c)
{
    size_t tile = (size_t)TB * TB;
    tsr_handle_t ha[NTILE * NTILE], hb[NTILE * NTILE], hc[NTILE * NTILE];
    for (int i = 0; i < NTILE * NTILE; i++) {
        cr_assert_eq(tsr_handle_register(&ha[i], a + i * tile, tile * sizeof(double)), TSR_OK);
        cr_assert_eq(tsr_handle_register(&hb[i], b + i * tile, tile * sizeof(double)), TSR_OK);
        cr_assert_eq(tsr_handle_register(&hc[i], c + i * tile, tile * sizeof(double)), TSR_OK);
    }
    for (int i = 0; i < NTILE; i++)
        for (int j = 0; j < NTILE; j++)
            for (int k = 0; k < NTILE; k++) {
                tsr_access_t acc[3] = {{hc[i * NTILE + j], TSR_RW},
                                       {ha[i * NTILE + k], TSR_R},
                                       {hb[k * NTILE + j], TSR_R}};
                tsr_task_desc_t d = {.codelet = &gemm_cl, .buffers = acc, .nbuffers = 3};
                cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
            }
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    for (int i = 0; i < NTILE * NTILE; i++) {
        cr_assert_eq(tsr_handle_unregister(ha[i]), TSR_OK);
        cr_assert_eq(tsr_handle_unregister(hb[i]), TSR_OK);
        cr_assert_eq(tsr_handle_unregister(hc[i]), TSR_OK);
    }
}

Test(simulate, exec_results_equal_a_threaded_run)
{
    size_t n = (size_t)NTILE * NTILE * TB * TB;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    double *c_thr = calloc(n, sizeof *c_thr), *c_sim = calloc(n, sizeof *c_sim);
    cr_assert(a && b && c_thr && c_sim);
    for (size_t i = 0; i < n; i++) {
        a[i] = (double)((i * 7) % 13) / 13.0 - 0.5;
        b[i] = (double)((i * 5) % 11) / 11.0 - 0.25;
    }
    start_runtime(2, "eager", 0);
    tiled_gemm(a, b, c_thr);
    stop_runtime();
    /* Accelerators of 12 KiB: six 2 KiB tiles each, two tasks' worth, so
     * tiles are evicted and written back while the product runs. On GPUs
     * (CUDA workers running the CPU implementation on phantom memory),
     * then on simulated accelerators (CPU workers). */
    const char *plat = NULL;
    for (int kind = 0; kind < 2; kind++) {
        plat = write_platform(2, 1, kind == 0 ? gpus_json(12288.0 / (1 << 30))
                                              : sims_json(12288.0 / (1 << 30)), 64);
        memset(c_sim, 0, n * sizeof *c_sim);
        start_sim(plat, 0, "dmda", 1, NULL);
        tiled_gemm(a, b, c_sim);
        uint64_t evictions = 0, acc_tasks = 0;
        for (int nd = 1; nd <= 4; nd++) {
            tsr_node_stats_t st;
            cr_assert_eq(tsr_memory_node_stats(nd, &st), TSR_OK);
            evictions += st.evictions;
        }
        for (int w = 0; w < tsr_worker_count(); w++) {
            tsr_worker_stats_t st;
            cr_assert_eq(tsr_worker_stats(w, &st), TSR_OK);
            cr_assert_eq(st.device_kind, w >= 1 && kind == 0 ? TSR_DEVICE_CUDA : TSR_DEVICE_CPU);
            if (st.memory_node > 0)
                acc_tasks += st.tasks;
        }
        stop_runtime();
        cr_assert(evictions > 0, "the accelerators' memory was too large to test eviction");
        cr_assert(acc_tasks > 0, "no task ran on a simulated accelerator");
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(c_sim[i], c_thr[i], "%s: element %zu: %.17g simulated, %.17g threaded",
                         kind == 0 ? "cuda" : "sim", i, c_sim[i], c_thr[i]);
    }
    /* And both are the product: element (r, q) of the whole matrix,
     * whose tile (i, j) is row-major inside, against a naive sum in the
     * order the tasks add (k tile by k tile). */
    size_t tile = (size_t)TB * TB;
    for (int r = 0; r < NTILE * TB; r += 7)
        for (int q = 0; q < NTILE * TB; q += 5) {
            int i = r / TB, ii = r % TB, j = q / TB, jj = q % TB;
            double ref = 0;
            for (int k = 0; k < NTILE; k++) {
                const double *at = a + (size_t)(i * NTILE + k) * tile;
                const double *bt = b + (size_t)(k * NTILE + j) * tile;
                double s = ref;
                for (int kk = 0; kk < TB; kk++)
                    s += at[ii * TB + kk] * bt[kk * TB + jj];
                ref = s;
            }
            cr_assert_eq(c_sim[(size_t)(i * NTILE + j) * tile + (size_t)(ii * TB + jj)], ref,
                         "(%d, %d)", r, q);
        }
    free(a);
    free(b);
    free(c_thr);
    free(c_sim);
    unlink(plat);
}

/* ---- phantom data ---------------------------------------------------------------- */

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    cr_assert(f);
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

Test(simulate, a_hundred_gib_of_tiles_take_no_memory)
{
    /* 400 tiles of 256 MiB (100 GiB) on a 1 TiB phantom host and 4 GPUs
     * of 16 GiB: every tile is written on a GPU, evicted to the host,
     * read again. */
    const char *plat = write_platform(3, 2, gpus_json(16), 1024);
    long before = rss_kib();
    start_sim(plat, 0, "dmda", 0, NULL);
    enum { NT = 400 };
    static tsr_handle_t h[NT];
    for (int i = 0; i < NT; i++)
        cr_assert_eq(tsr_handle_alloc(&h[i], (size_t)256 << 20), TSR_OK);
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < NT; i++)
            submit_work(&work1, &h[i], 1);
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    tsr_node_stats_t st;
    cr_assert_eq(tsr_memory_node_stats(0, &st), TSR_OK);
    long during = rss_kib();
    for (int i = 0; i < NT; i++)
        cr_assert_eq(tsr_handle_unregister(h[i]), TSR_OK);
    stop_runtime();
    cr_assert(during - before < 64 * 1024, "RSS grew by %ld KiB", during - before);
    /* The data did move: the host received evicted tiles. */
    cr_assert(st.bytes_in > 0 || st.peak > 0, "host: %zu bytes in, peak %zu", (size_t)st.bytes_in,
              st.peak);
    unlink(plat);
}

/* ---- a deadlock of the simulated program ------------------------------------------- */

Test(simulate, deadlock_fails_the_wait)
{
    const char *plat = write_platform(0, 2, NULL, 64);
    start_sim(plat, 0, "eager", 0, NULL);
    double x = 0;
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_register(&h, &x, sizeof x), TSR_OK);
    void *p;
    cr_assert_eq(tsr_handle_acquire(h, TSR_RW, &p), TSR_OK, "%s", tsr_error_message());
    /* A task on a handle the application holds can never run. */
    int64_t ms = 1;
    tsr_access_t acc = {h, TSR_RW};
    tsr_task_desc_t d = {.codelet = &work1, .buffers = &acc, .nbuffers = 1, .args = &ms,
                         .args_size = sizeof ms};
    tsr_task_t t;
    cr_assert_eq(tsr_submit(&d, &t), TSR_OK);
    cr_assert_eq(tsr_task_wait(t), TSR_ESTATE);
    /* Pending: the task, and the application's acquisition. */
    cr_assert(strstr(tsr_error_message(), "2 task(s) pending"), "%s", tsr_error_message());
    /* Released, the program goes on. */
    cr_assert_eq(tsr_handle_release(h), TSR_OK);
    cr_assert_eq(tsr_task_wait(t), TSR_OK, "%s", tsr_error_message());
    cr_assert_float_eq(tsr_time(), 1e-3, 1e-12);
    cr_assert_eq(tsr_handle_unregister(h), TSR_OK);
    stop_runtime();
    unlink(plat);
}

/* A task only a GPU can run, pushed for anyone while every worker is idle:
 * the CPU worker woken first passes the turn on (nobody polls). On a
 * platform without GPUs it is refused at submission, never left to hang. */
static const tsr_codelet_t cuda_only = {.name = "cuda_only", .impl = {NULL, work_kernel},
                                        .nbuffers = 1, .flops = work_flops, .bytes = no_bytes};

Test(simulate, a_task_for_one_kind_finds_its_worker)
{
    const char *plat = write_platform(0, 2, gpus_json(1), 64);
    start_sim(plat, 0, "eager", 0, NULL);
    tsr_handle_t h[6];
    for (int i = 0; i < 6; i++) {
        /* One at a time: each push wakes CPU worker 0 first. */
        cr_assert_eq(tsr_handle_alloc(&h[i], 64), TSR_OK);
        submit_work(&cuda_only, &h[i], 4);
        cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    }
    uint64_t cpu_tasks = 0, gpu_tasks = 0;
    for (int w = 0; w < tsr_worker_count(); w++) {
        tsr_worker_stats_t st;
        cr_assert_eq(tsr_worker_stats(w, &st), TSR_OK);
        *(st.device_kind == TSR_DEVICE_CUDA ? &gpu_tasks : &cpu_tasks) += st.tasks;
    }
    cr_assert_eq(cpu_tasks, 0);
    cr_assert_eq(gpu_tasks, 6);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(tsr_handle_unregister(h[i]), TSR_OK);
    stop_runtime();

    const char *cpus = write_platform(1, 2, NULL, 64);
    start_sim(cpus, 0, "eager", 0, NULL);
    tsr_handle_t x;
    cr_assert_eq(tsr_handle_alloc(&x, 64), TSR_OK);
    int64_t ms = 1;
    tsr_access_t acc = {x, TSR_RW};
    tsr_task_desc_t d = {.codelet = &cuda_only, .buffers = &acc, .nbuffers = 1, .args = &ms,
                         .args_size = sizeof ms};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_ENODEV);
    cr_assert_eq(tsr_wait_all(), TSR_OK);
    cr_assert_eq(tsr_handle_unregister(x), TSR_OK);
    stop_runtime();
    unlink(plat);
    unlink(cpus);
}

/* ---- every built-in policy --------------------------------------------------------- */

Test(simulate, every_policy_runs_a_graph)
{
    const char *plat = write_platform(0, 2, gpus_json(0.01), 64);
    for (int i = 0;; i++) {
        const tsr_sched_policy_t *pol = tsr_sched_builtin_at(i);
        if (!pol)
            break;
        start_sim(plat, 0, pol->name, 1, NULL);
        enum { NH = 8, CHAIN = 10 };
        double v[NH] = {0};
        tsr_handle_t h[NH];
        for (int k = 0; k < NH; k++)
            cr_assert_eq(tsr_handle_register(&h[k], &v[k], sizeof v[k]), TSR_OK);
        for (int s = 0; s < CHAIN; s++)
            for (int k = 0; k < NH; k++)
                submit_work(&work1, &h[k], 1 + k % 3);
        cr_assert_eq(tsr_wait_all(), TSR_OK, "%s: %s", pol->name, tsr_error_message());
        uint64_t tasks = 0;
        for (int w = 0; w < tsr_worker_count(); w++) {
            tsr_worker_stats_t st;
            cr_assert_eq(tsr_worker_stats(w, &st), TSR_OK);
            tasks += st.tasks;
        }
        double t = tsr_time();
        for (int k = 0; k < NH; k++)
            cr_assert_eq(tsr_handle_unregister(h[k]), TSR_OK);
        stop_runtime();
        cr_assert_eq(tasks, (uint64_t)NH * CHAIN, "%s", pol->name);
        for (int k = 0; k < NH; k++)
            cr_assert_eq(v[k], (double)CHAIN, "%s: handle %d", pol->name, k);
        /* No faster than the longest chain on the fastest device (a GPU:
         * 3 ms / 4 + 5 µs per task), no slower than everything in a row
         * on the slowest (a CPU). */
        cr_assert(t >= CHAIN * (3e-3 / 4 + 5e-6) - 1e-12, "%s: %.9f s", pol->name, t);
        cr_assert(t <= CHAIN * NH * 3e-3 + 1e-3, "%s: %.9f s", pol->name, t);
    }
    unlink(plat);
}

/* ---- order-free accumulation --------------------------------------------------- */

static int zero_kernel(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    memset(b[0], 0, e->sizes[0]);
    return 0;
}

static int add_kernel(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    (void)e;
    *(double *)b[0] += *(const double *)b[1];
    return 0;
}

/* Adds its argument (an int64) into buffer 0. */
static int addk_kernel(void **b, const void *args, const tsr_exec_t *e)
{
    (void)e;
    *(double *)b[0] += (double)*(const int64_t *)args;
    return 0;
}

static const tsr_codelet_t zero_cl = {.name = "zero", .impl = {zero_kernel}, .nbuffers = 1};
static const tsr_codelet_t add_cl = {.name = "add", .impl = {add_kernel}, .nbuffers = 2};
static const tsr_codelet_t addk_cl = {.name = "addk", .impl = {addk_kernel}, .nbuffers = 1,
                                      .flops = work_flops, .bytes = no_bytes};

/* REDUX and COMMUTE groups, executed: accumulators on several workers'
 * phantom memories combine into the sum of the contributions. */
Test(simulate, exec_redux_and_commute_sums)
{
    const char *plat = write_platform(0, 2, sims_json(1), 64);
    start_sim(plat, 0, "eager", 1, NULL);
    double g = 0, c = 0;
    tsr_handle_t hg, hc;
    cr_assert_eq(tsr_handle_register(&hg, &g, sizeof g), TSR_OK);
    cr_assert_eq(tsr_handle_register(&hc, &c, sizeof c), TSR_OK);
    cr_assert_eq(tsr_handle_set_reduction(hg, &zero_cl, &add_cl), TSR_OK);
    for (int64_t i = 1; i <= 40; i++) {
        tsr_access_t a = {hg, TSR_REDUX}, b = {hc, TSR_COMMUTE};
        tsr_task_desc_t d = {.codelet = &addk_cl, .buffers = &a, .nbuffers = 1, .args = &i,
                             .args_size = sizeof i};
        cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
        d.buffers = &b;
        cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
    }
    void *p;
    cr_assert_eq(tsr_handle_acquire(hg, TSR_R, &p), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(*(double *)p, 820.0);
    cr_assert_eq(tsr_handle_release(hg), TSR_OK);
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    int busy_workers = 0;
    for (int w = 0; w < tsr_worker_count(); w++) {
        tsr_worker_stats_t st;
        cr_assert_eq(tsr_worker_stats(w, &st), TSR_OK);
        busy_workers += st.tasks > 0;
    }
    cr_assert(busy_workers > 1, "the group ran on %d worker(s)", busy_workers);
    cr_assert_eq(tsr_handle_unregister(hg), TSR_OK);
    cr_assert_eq(tsr_handle_unregister(hc), TSR_OK);
    stop_runtime();
    cr_assert_eq(g, 820.0);
    cr_assert_eq(c, 820.0);
    unlink(plat);
}

/* ---- configuration ----------------------------------------------------------------- */

Test(simulate, bad_platform_file_is_refused)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.simulate = "/nonexistent/platform.json";
    int rc = tsr_init(&cfg);
    cr_assert(rc != TSR_OK);
    cr_assert(strstr(tsr_error_message(), "/nonexistent/platform.json"), "%s",
              tsr_error_message());
    char path[64];
    snprintf(path, sizeof path, "/tmp/tsr-sim-%d-bad.json", (int)getpid());
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("{\"name\": \"bad\", \"models\": \"guess\"}", f);
    fclose(f);
    cfg.simulate = path;
    cr_assert_eq(tsr_init(&cfg), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), path), "%s", tsr_error_message());
    unlink(path);
    /* Nothing stayed behind: a normal runtime starts, on the wall clock. */
    start_runtime(1, NULL, 0);
    stop_runtime();
}

/* ---- a GPU's compute lanes ------------------------------------------------------- */

static const tsr_codelet_t gwork1 = {.name = "gwork1", .impl = {work_kernel, work_kernel},
                                     .nbuffers = 1, .flops = work_flops, .bytes = no_bytes};

/* One GPU of 4 GFLOPS whose tasks each pay a 100 us launch (the host's
 * part: launch and the round trip that orders it), data links far too
 * fast to matter; n independent 0.25 ms kernels (10^6 flops each).
 * By hand: one lane runs launch + kernel in turn, n (100 + 250) us; four
 * lanes overlap each launch with the kernels queued before it, so the
 * device is busy from the first launch's end: 100 + n 250 us. */
static double lanes_makespan(int lanes, int n)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/tsr-sim-lanes-%d.json", (int)getpid());
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f, "{\"name\": \"test-lanes\", \"models\": \"rates\", \"task_overhead_us\": 0,\n"
               " \"host\": {\"memory_gib\": 64, \"memory_bandwidth_gbs\": 1000000,\n"
               "          \"memory_latency_us\": 0, \"cpu_workers\": 0},\n"
               " \"devices\": {\"cpu\": {\"fp32_tflops\": 0.001, \"memory_bandwidth_gbs\": 1000000,"
               " \"launch_us\": 0, \"flops_efficiency\": 1, \"bytes_efficiency\": 1},\n"
               "  \"cuda\": {\"fp32_tflops\": 0.004, \"memory_bandwidth_gbs\": 1000000,"
               " \"launch_us\": 100, \"flops_efficiency\": 1, \"bytes_efficiency\": 1}},\n"
               " \"accelerators\": [{\"kind\": \"cuda\", \"count\": 1, \"memory_gib\": 16,"
               " \"link\": {\"bandwidth_gbs\": 1000000, \"latency_us\": 0}}]}\n");
    fclose(f);
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = -1;
    cfg.bind = 0;
    cfg.sched = "eager";
    cfg.simulate = path;
    cfg.perfmodel_dir = "";
    cfg.cuda_streams = lanes;
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "tsr_init: %s", tsr_error_message());
    cr_assert_eq(tsr_worker_count(), 1);
    double x[16] = {0};
    tsr_handle_t h[16];
    cr_assert(n <= 16);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(tsr_handle_register(&h[i], &x[i], sizeof x[i]), TSR_OK);
        submit_work(&gwork1, &h[i], 1);
    }
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    double t = tsr_time();
    /* busy: the union of the tasks' intervals, so at most the makespan
     * however many are in flight on the stream, and at least the kernels'
     * 250 us each, which run one after another */
    tsr_worker_stats_t st;
    cr_assert_eq(tsr_worker_stats(0, &st), TSR_OK);
    cr_assert(st.busy_s <= t + 1e-9, "%d lanes: busy %.9f s in a makespan of %.9f s", lanes,
              st.busy_s, t);
    cr_assert(st.busy_s >= n * 250e-6 - 1e-9, "%d lanes: busy %.9f s", lanes, st.busy_s);
    for (int i = 0; i < n; i++)
        cr_assert_eq(tsr_handle_unregister(h[i]), TSR_OK);
    stop_runtime();
    unlink(path);
    return t;
}

Test(simulate, gpu_lanes_overlap_launches_not_kernels)
{
    const int n = 8;
    double one = lanes_makespan(1, n), four = lanes_makespan(4, n);
    cr_assert_float_eq(one, n * 350e-6, 2e-6, "one lane: %.9f s", one);
    cr_assert_float_eq(four, 100e-6 + n * 250e-6, 2e-6, "four lanes: %.9f s", four);
}

/* ---- the disk tier (NVMe) -------------------------------------------------------- */

/* One CPU worker of 1 GFLOPS (write_platform's), a host of 64 GiB and 2
 * drives of 1 GB, each 1 GB/s read and 0.5 GB/s write, 100 us a copy: 2
 * GB/s read and 1 GB/s write in all (RAID-0). */
static const char *disk_platform(void)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/tsr-sim-%d-disk.json", (int)getpid());
    FILE *f = fopen(path, "w");
    cr_assert(f, "cannot write %s", path);
    fputs("{\"name\": \"test-disk\", \"models\": \"rates\", \"task_overhead_us\": 0,\n"
          " \"host\": {\"memory_gib\": 64, \"memory_bandwidth_gbs\": 1000000,\n"
          "          \"memory_latency_us\": 0, \"cpu_workers\": 1},\n"
          " \"devices\": {\"cpu\": {\"fp32_tflops\": 0.001, \"memory_bandwidth_gbs\": 1000000,\n"
          "   \"launch_us\": 0, \"flops_efficiency\": 1, \"bytes_efficiency\": 1}},\n"
          " \"disk\": {\"count\": 2, \"capacity_gb\": 1, \"read_bandwidth_gbs\": 1,\n"
          "          \"write_bandwidth_gbs\": 0.5, \"latency_us\": 100}}\n",
          f);
    fclose(f);
    return path;
}

#define TILE ((size_t)64 << 20)

/* The platform's host capped to one tile (host_mem replaces its 64 GiB),
 * three phases, each waited for: A writes h0 (1 ms); B writes h1, for which
 * h0 is written back to the disk first (100 us + 64 MiB at 1 GB/s); C reads
 * and writes h0 again, for which h1 is written back and then h0 read back
 * (100 us + 64 MiB at 2 GB/s). Without the disk, B is out of memory. */
static void disk_phases(bool no_disk, double t[3], int rc[3])
{
    const char *plat = disk_platform();
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 1;
    cfg.bind = 0;
    cfg.simulate = plat;
    cfg.perfmodel_dir = "";
    cfg.host_mem = TILE;
    cfg.simulate_no_disk = no_disk;
    unsetenv("TESSERA_LIMIT_HOST_MEM");
    unsetenv("TESSERA_LIMIT_DISK_MEM");
    unsetenv("TESSERA_SIMULATE_NO_DISK");
    int r = tsr_init(&cfg);
    cr_assert_eq(r, TSR_OK, "tsr_init: %s", tsr_error_message());
    unlink(plat);
    tsr_handle_t h[2];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(tsr_handle_alloc(&h[i], TILE), TSR_OK);
    int order[3] = {0, 1, 0};
    for (int k = 0; k < 3; k++) {
        submit_work(&work1, &h[order[k]], 1);
        rc[k] = tsr_wait_all();
        t[k] = tsr_time();
    }
}

Test(simulate, disk_tier_times_equal_hand_arithmetic)
{
    double t[3];
    int rc[3];
    disk_phases(false, t, rc);
    for (int k = 0; k < 3; k++)
        cr_assert_eq(rc[k], TSR_OK, "phase %d: %s", k, tsr_error_message());
    const double S = (double)TILE, lat = 100e-6, write = lat + S / 1e9, read = lat + S / 2e9;
    cr_expect_float_eq(t[0], 1e-3, 1e-9, "A: %.9f s", t[0]);
    cr_expect_float_eq(t[1], t[0] + write + 1e-3, 1e-9, "B: %.9f s", t[1]);
    cr_expect_float_eq(t[2], t[1] + write + read + 1e-3, 1e-9, "C: %.9f s", t[2]);
    /* the disk node: last, below the host, two tiles in and one out */
    int n = tsr_memory_node_count();
    tsr_node_stats_t ds;
    cr_assert_eq(tsr_memory_node_stats(n - 1, &ds), TSR_OK);
    cr_expect_eq(ds.kind, TSR_NODE_DISK);
    cr_expect_str_eq(ds.name, "disk");
    cr_expect_eq(ds.capacity, (size_t)2000000000);
    cr_expect_eq(ds.bytes_in, 2 * TILE);
    cr_expect_eq(ds.bytes_out, TILE);
    cr_expect_eq(tsr_memory_link_bytes(0, n - 1), 2 * TILE);
    cr_expect_eq(tsr_memory_link_bytes(n - 1, 0), TILE);
    tsr_node_stats_t hs;
    cr_assert_eq(tsr_memory_node_stats(0, &hs), TSR_OK);
    cr_expect_eq(hs.capacity, TILE, "host_mem replaces the platform's 64 GiB");
    cr_assert_eq(tsr_shutdown(), TSR_OK);
}

Test(simulate, without_the_disk_the_host_is_out_of_memory)
{
    double t[3];
    int rc[3];
    disk_phases(true, t, rc);
    cr_assert_eq(rc[0], TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(rc[1], TSR_ETASK, "B fits without the disk?");
    cr_expect_eq(tsr_error_cause(), TSR_ENOMEM, "%s", tsr_error_message());
    int n = tsr_memory_node_count();
    for (int i = 0; i < n; i++) {
        tsr_node_stats_t s;
        cr_assert_eq(tsr_memory_node_stats(i, &s), TSR_OK);
        cr_expect_neq(s.kind, TSR_NODE_DISK, "node %d is a disk", i);
    }
    tsr_shutdown();
}

/* One CPU worker and one GPU (both 1 GFLOPS, no launch), the GPU's link 4
 * GB/s with 10 us, the drives as disk_platform's (2 GB/s read); GPUDirect
 * Storage or not. */
static const char *gds_platform(bool gpudirect)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/tsr-sim-%d-gds.json", (int)getpid());
    FILE *f = fopen(path, "w");
    cr_assert(f, "cannot write %s", path);
    fprintf(f,
            "{\"name\": \"test-gds\", \"models\": \"rates\", \"task_overhead_us\": 0,\n"
            " \"host\": {\"memory_gib\": 64, \"memory_bandwidth_gbs\": 1000000,\n"
            "          \"memory_latency_us\": 0, \"cpu_workers\": 1},\n"
            " \"devices\": {\"cpu\": {\"fp32_tflops\": 0.001, \"memory_bandwidth_gbs\": 1000000,\n"
            "   \"launch_us\": 0, \"flops_efficiency\": 1, \"bytes_efficiency\": 1},\n"
            "  \"cuda\": {\"fp32_tflops\": 0.001, \"memory_bandwidth_gbs\": 1000000,\n"
            "   \"launch_us\": 0, \"flops_efficiency\": 1, \"bytes_efficiency\": 1}},\n"
            " \"accelerators\": [{\"kind\": \"cuda\", \"count\": 1, \"memory_gib\": 1,\n"
            "   \"link\": {\"bandwidth_gbs\": 4, \"latency_us\": 10}}],\n"
            " \"disk\": {\"count\": 2, \"capacity_gb\": 1, \"read_bandwidth_gbs\": 1,\n"
            "          \"write_bandwidth_gbs\": 0.5, \"latency_us\": 100, \"gpudirect\": %s}}\n",
            gpudirect ? "true" : "false");
    fclose(f);
    return path;
}

/* The host capped to one tile: the CPU writes h0, then h1 (h0 goes to the
 * disk, h1 stays the host's only copy); then a GPU task updates h0. With
 * GPUDirect Storage h0 goes from the drives to the GPU at once (100 + 10
 * us of latency, 64 MiB at 2 GB/s); without, through the host (100 us + 64
 * MiB at 2 GB/s, then 10 us + 64 MiB at 4 GB/s). The time of that last phase, in virtual seconds. */
static double gds_last_phase(bool gpudirect)
{
    const char *plat = gds_platform(gpudirect);
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 1;
    cfg.bind = 0;
    cfg.simulate = plat;
    cfg.perfmodel_dir = "";
    cfg.host_mem = TILE;
    unsetenv("TESSERA_LIMIT_HOST_MEM");
    unsetenv("TESSERA_SIMULATE_NO_DISK");
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "tsr_init: %s", tsr_error_message());
    unlink(plat);
    tsr_handle_t h[2];
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(tsr_handle_alloc(&h[i], TILE), TSR_OK);
        submit_work(&work1, &h[i], 1);
        cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    }
    double t = tsr_time();
    int64_t ms = 1;
    tsr_access_t acc = {h[0], TSR_RW};
    tsr_task_desc_t d = {.codelet = &cuda_only, .buffers = &acc, .nbuffers = 1, .args = &ms,
                         .args_size = sizeof ms};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    double last = tsr_time() - t;
    int disk = tsr_memory_node_count() - 1;
    uint64_t to_gpu = tsr_memory_link_bytes(disk, 1), to_host = tsr_memory_link_bytes(disk, 0);
    cr_expect_eq(to_gpu, gpudirect ? TILE : 0, "disk -> GPU: %llu bytes",
                 (unsigned long long)to_gpu);
    cr_expect_eq(to_host, gpudirect ? 0 : TILE, "disk -> host: %llu bytes",
                 (unsigned long long)to_host);
    cr_assert_eq(tsr_shutdown(), TSR_OK);
    return last;
}

Test(simulate, gpudirect_storage_skips_the_host)
{
    const double S = (double)TILE, read = 100e-6 + S / 2e9, pcie = 10e-6 + S / 4e9;
    double direct = gds_last_phase(true), bounced = gds_last_phase(false);
    /* the route crosses the drives' read link and the GPU's link: both
     * latencies, the narrower bandwidth (the drives' 2 GB/s) */
    cr_expect_float_eq(direct, read + 10e-6 + 1e-3, 1e-9, "GPUDirect: %.9f s", direct);
    cr_expect_float_eq(bounced, read + pcie + 1e-3, 1e-9, "through the host: %.9f s",
                       bounced);
}
