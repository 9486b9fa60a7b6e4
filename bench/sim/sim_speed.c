/* bench/sim/sim_speed.c — how fast the simulator itself runs: tasks
 * simulated per second of wall time, for N independent tasks, a tiled GEMM
 * graph and a GPT-2 training step (the model of nn/, through its public
 * API, as tools/tessera-sim.c drives it), under the eager and dmda
 * policies, on a phantom 8-GPU node (written here, or a platform file given
 * as the first argument).
 *
 * Prints a table and one JSON line per case. Never asserts a speed: it
 * measures (docs/benchmarks.md).
 */
#include <tessera/gpt2.h>
#include <tessera/tessera.h>

#include "bench_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A tile task that reads buffer 0 (independent) or does C += A·B (gemm);
 * never executed here: simulation without simulate_exec runs no kernel. */
static int never_runs(void **b, const void *args, const tsr_exec_t *e)
{
    (void)b;
    (void)args;
    (void)e;
    return 0;
}

static double tile_flops(const void *args, const size_t *sizes)
{
    (void)args;
    double n = sqrt((double)sizes[0] / sizeof(float));
    return 2.0 * n * n * n;
}

static const tsr_codelet_t read_cl = {.name = "read_tile", .impl = {never_runs, never_runs},
                                      .nbuffers = 1};
static const tsr_codelet_t gemm_cl = {.name = "gemm", .impl = {never_runs, never_runs},
                                      .nbuffers = 3, .flops = tile_flops};

/* A DGX-like node: 8 GPUs of 80 GiB, PCIe 4.0 x16 in pairs behind
 * switches, NVSwitch between them; 2 CPU workers. */
static const char *write_platform(char *path, size_t n)
{
    snprintf(path, n, "/tmp/tsr-sim-speed-%d.json", (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f)
        return NULL;
    fputs("{\"name\": \"bench-8gpu\", \"models\": \"rates\", \"task_overhead_us\": 1,\n"
          " \"host\": {\"memory_gib\": 900, \"memory_bandwidth_gbs\": 200,\n"
          "          \"memory_latency_us\": 0, \"cpu_workers\": 2},\n"
          " \"devices\": {\"cpu\": {\"fp32_tflops\": 1, \"memory_bandwidth_gbs\": 50,\n"
          "   \"launch_us\": 0, \"flops_efficiency\": 0.8, \"bytes_efficiency\": 0.8},\n"
          "  \"cuda\": {\"fp32_tflops\": 19.5, \"tf32_tflops\": 156, \"memory_bandwidth_gbs\": 2039,\n"
          "   \"launch_us\": 5, \"flops_efficiency\": 0.7, \"bytes_efficiency\": 0.8}},\n"
          " \"accelerators\": [{\"kind\": \"cuda\", \"count\": 8, \"memory_gib\": 80,\n"
          "   \"link\": {\"bandwidth_gbs\": 25, \"latency_us\": 2},\n"
          "   \"pcie_switch\": {\"bandwidth_gbs\": 25, \"latency_us\": 1, \"accelerators_per_switch\": 2},\n"
          "   \"nvlink\": {\"bandwidth_gbs\": 300, \"latency_us\": 2}}]}\n",
          f);
    fclose(f);
    return path;
}

typedef struct result {
    const char *graph, *sched;
    long tasks;
    double wall_s, cpu_s, sim_s;
    int rc;
} result_t;

static int start(const char *platform, const char *sched)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.simulate = platform;
    cfg.sched = sched;
    cfg.perfmodel_dir = "";
    int rc = tsr_init(&cfg);
    if (rc != TSR_OK)
        fprintf(stderr, "tsr_init: %s\n", tsr_error_message());
    return rc;
}

/* n independent tasks, each reading one of 4096 tiles of 1 MiB. */
static int independent(long n)
{
    enum { NH = 4096 };
    static tsr_handle_t h[NH];
    for (int i = 0; i < NH; i++)
        if (tsr_handle_alloc(&h[i], (size_t)1 << 20) != TSR_OK)
            return TSR_ENOMEM;
    for (long k = 0; k < n; k++) {
        tsr_access_t acc = {h[k % NH], TSR_R};
        tsr_task_desc_t d = {.codelet = &read_cl, .buffers = &acc, .nbuffers = 1};
        int rc = tsr_submit(&d, NULL);
        if (rc != TSR_OK)
            return rc;
    }
    int rc = tsr_wait_all();
    for (int i = 0; i < NH; i++)
        tsr_handle_unregister(h[i]);
    return rc;
}

/* C += A·B on nt×nt tiles of 1024² floats: nt³ tasks. */
static int gemm(int nt)
{
    size_t tile = (size_t)1024 * 1024 * sizeof(float);
    int n2 = nt * nt;
    tsr_handle_t *h = calloc((size_t)3 * n2, sizeof *h);
    if (!h)
        return TSR_ENOMEM;
    for (int i = 0; i < 3 * n2; i++)
        if (tsr_handle_alloc(&h[i], tile) != TSR_OK)
            return TSR_ENOMEM;
    tsr_handle_t *A = h, *B = h + n2, *C = h + 2 * n2;
    int rc = TSR_OK;
    for (int k = 0; k < nt && rc == TSR_OK; k++)
        for (int i = 0; i < nt && rc == TSR_OK; i++)
            for (int j = 0; j < nt && rc == TSR_OK; j++) {
                tsr_access_t acc[3] = {{C[i * nt + j], TSR_RW}, {A[i * nt + k], TSR_R},
                                       {B[k * nt + j], TSR_R}};
                tsr_task_desc_t d = {.codelet = &gemm_cl, .buffers = acc, .nbuffers = 3};
                rc = tsr_submit(&d, NULL);
            }
    if (rc == TSR_OK)
        rc = tsr_wait_all();
    for (int i = 0; i < 3 * n2; i++)
        tsr_handle_unregister(h[i]);
    free(h);
    return rc;
}

/* This thread's CPU time: the simulation runs on the caller's thread, and
 * under load its CPU time moves less than the wall time does. */
static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Tasks every worker has run so far. */
static long tasks_run(void)
{
    long n = 0;
    for (int w = 0; w < tsr_worker_count(); w++) {
        tsr_worker_stats_t s;
        if (tsr_worker_stats(w, &s) == TSR_OK)
            n += (long)s.tasks;
    }
    return n;
}

/* One GPT-2 training step of the 124M shape (12 layers of 768 channels, 8
 * sequences of 1024 tokens) on small tiles (256 tokens, 1024 vocabulary
 * entries, 768 hidden: the CPU rule, docs/gpt2.md), so that the graph has
 * many tasks: zero the gradients, `micro` micro-batches of forward and
 * backward, AdamW. The model's creation is not timed (*t0 is set after
 * it); *tasks is what the step ran. */
static int gpt2_step(int micro, double *t0, double *c0, long *tasks)
{
    tsr_gpt2_config_t cfg;
    tsr_gpt2_config_default(&cfg);
    cfg.layers = 12;
    cfg.channels = 768;
    cfg.heads = 12;
    cfg.tile_tokens = 256;
    cfg.tile_vocab = 1024;
    cfg.tile_hidden = 768;
    enum { B = 8, T = 1024 };
    tsr_gpt2_t *m = NULL;
    int rc = tsr_gpt2_create(&m, &cfg, B, T);
    if (rc != TSR_OK)
        return rc;
    int32_t *tok = calloc((size_t)B * T, sizeof *tok); /* token 0: data is phantom */
    if (!tok) {
        tsr_gpt2_free(m);
        return TSR_ENOMEM;
    }
    rc = tsr_wait_all();
    long before = tasks_run();
    *t0 = bench_now();
    *c0 = thread_cpu();
    if (rc == TSR_OK)
        rc = tsr_gpt2_zero_grad(m);
    for (int k = 0; rc == TSR_OK && k < micro; k++) {
        rc = tsr_gpt2_forward(m, tok, tok, NULL);
        if (rc == TSR_OK)
            rc = tsr_gpt2_backward(m, 1.0f / (float)micro);
    }
    tsr_adamw_config_t opt;
    tsr_adamw_config_default(&opt);
    if (rc == TSR_OK)
        rc = tsr_gpt2_step(m, &opt, 1e-4f, NULL);
    if (rc == TSR_OK)
        rc = tsr_wait_all();
    *tasks = tasks_run() - before;
    free(tok);
    tsr_gpt2_free(m);
    return rc;
}

int main(int argc, char **argv)
{
    char path[128];
    const char *platform = argc > 1 ? argv[1] : write_platform(path, sizeof path);
    if (!platform) {
        fprintf(stderr, "cannot write a platform file\n");
        return 1;
    }
    long nindep = getenv("SIM_SPEED_TASKS") ? atol(getenv("SIM_SPEED_TASKS")) : 200000;
    int nt = getenv("SIM_SPEED_NT") ? atoi(getenv("SIM_SPEED_NT")) : 40;
    int micro = getenv("SIM_SPEED_MICRO") ? atoi(getenv("SIM_SPEED_MICRO")) : 2;
    const char *scheds[] = {"eager", "dmda"};
    const char *graphs[] = {"independent", "gemm", "gpt2"};
    result_t res[6];
    int nres = 0;
    /* SIM_SPEED_ONLY=graph or graph/sched: one case (for a profiler) */
    const char *only = getenv("SIM_SPEED_ONLY");
    for (int g = 0; g < 3; g++)
        for (int s = 0; s < 2; s++) {
            char name[32];
            snprintf(name, sizeof name, "%s/%s", graphs[g], scheds[s]);
            if (only && *only && strncmp(name, only, strlen(only)) != 0)
                continue;
            result_t *r = &res[nres++];
            r->graph = graphs[g];
            r->sched = scheds[s];
            r->tasks = g == 0 ? nindep : (long)nt * nt * nt;
            r->rc = start(platform, scheds[s]);
            if (r->rc != TSR_OK)
                return 1;
            double t0 = bench_now(), c0 = thread_cpu();
            if (g == 2)
                r->rc = gpt2_step(micro, &t0, &c0, &r->tasks);
            else
                r->rc = g == 0 ? independent(nindep) : gemm(nt);
            r->sim_s = tsr_time();
            r->wall_s = bench_now() - t0;
            r->cpu_s = thread_cpu() - c0;
            if (r->rc != TSR_OK)
                fprintf(stderr, "%s/%s: %s\n", r->graph, r->sched, tsr_error_message());
            tsr_shutdown();
        }
    printf("simulator speed on %s (load %.2f)\n", platform, bench_loadavg());
    printf("%-12s %-6s %9s %9s %12s %9s %12s %14s\n", "graph", "sched", "tasks", "wall_s",
           "tasks/s", "cpu_s", "tasks/cpu_s", "simulated_s");
    for (int i = 0; i < nres; i++)
        printf("%-12s %-6s %9ld %9.3f %12.0f %9.3f %12.0f %14.9f\n", res[i].graph, res[i].sched,
               res[i].tasks, res[i].wall_s, res[i].tasks / res[i].wall_s, res[i].cpu_s,
               res[i].tasks / res[i].cpu_s, res[i].sim_s);
    for (int i = 0; i < nres; i++) {
        char rate[32], crate[32], sim[32];
        bench_json_num(rate, sizeof rate, res[i].rc == TSR_OK, res[i].tasks / res[i].wall_s);
        bench_json_num(crate, sizeof crate, res[i].rc == TSR_OK, res[i].tasks / res[i].cpu_s);
        bench_json_num(sim, sizeof sim, res[i].rc == TSR_OK, res[i].sim_s);
        printf("{\"bench\": \"sim_speed\", \"graph\": \"%s\", \"sched\": \"%s\", \"tasks\": %ld, "
               "\"tasks_per_s\": %s, \"tasks_per_cpu_s\": %s, \"simulated_s\": %s}\n",
               res[i].graph, res[i].sched, res[i].tasks, rate, crate, sim);
    }
    if (argc <= 1)
        unlink(path);
    for (int i = 0; i < nres; i++)
        if (res[i].rc != TSR_OK)
            return 1;
    return 0;
}
