/* backend_starpu.c — the Task Bench graph on StarPU 1.3: one variable
 * handle per (field, point) output buffer, starpu_task_insert with
 * STARPU_R on the inputs (timestep t-1) and STARPU_W on the output,
 * implicit data dependencies (sequential task flow, as in Tessera), CPU
 * workers only (ncuda = nopencl = 0). Tasks of more than STARPU_NMAXBUFS
 * (8 here) buffers use StarPU's dynamically allocated handle arrays.
 *
 * Built only when meson finds starpu-1.3; it never calls Tessera.
 */
#include "backend.h"
#include "../bench_util.h"

#include <starpu.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct targs {
    const task_graph_t *g;
    long t, p;
    int nin;
} targs_t;

static atomic_int failed;

static void impl(void *buffers[], void *cl_arg)
{
    const targs_t *a = cl_arg;
    const task_graph_t *g = a->g;
    const char *small_in[16];
    size_t small_bytes[16];
    const char **in = small_in;
    size_t *bytes = small_bytes;
    if (a->nin > 16) {
        in = malloc((size_t)a->nin * sizeof *in);
        bytes = malloc((size_t)a->nin * sizeof *bytes);
        if (!in || !bytes) {
            atomic_store(&failed, 1);
            free(in), free(bytes);
            return;
        }
    }
    for (int i = 0; i < a->nin; i++) {
        in[i] = (const char *)STARPU_VARIABLE_GET_PTR(buffers[i]);
        bytes[i] = STARPU_VARIABLE_GET_ELEMSIZE(buffers[i]);
    }
    int w = starpu_worker_get_id();
    char *scratch = tb_scratch_of(w);
    if (task_graph_execute_point(g, a->t, a->p, (char *)STARPU_VARIABLE_GET_PTR(buffers[a->nin]),
                                 STARPU_VARIABLE_GET_ELEMSIZE(buffers[a->nin]), in, bytes,
                                 (size_t)a->nin, scratch,
                                 scratch ? g->scratch_bytes_per_task : 0))
        atomic_store(&failed, 1);
    if (in != small_in)
        free(in), free(bytes);
}

static struct starpu_codelet cl;
static char sched_used[64];
static int nworkers;

static int sp_start(const tb_opts_t *o, char *err, size_t errlen)
{
    char n[16];
    snprintf(n, sizeof n, "%d", o->ncpu);
    setenv("STARPU_SILENT", "1", 1);
    setenv("STARPU_NCPU", n, 1);
    setenv("STARPU_NCUDA", "0", 1);
    setenv("STARPU_NOPENCL", "0", 1);
    setenv("STARPU_BUS_CALIBRATE", "0", 1);
    memset(&cl, 0, sizeof cl);
    cl.cpu_funcs[0] = impl;
    cl.nbuffers = STARPU_VARIABLE_NBUFFERS;
    cl.name = "taskbench_point";
    struct starpu_conf conf;
    starpu_conf_init(&conf);
    conf.sched_policy_name = o->sched; /* NULL: StarPU's default */
    conf.ncpus = o->ncpu;
    conf.ncuda = 0;
    conf.nopencl = 0;
    conf.nmic = 0;
    conf.nmpi_ms = 0;
    conf.bus_calibrate = 0;
    conf.catch_signals = 0;
    int rc = starpu_init(&conf);
    if (rc != 0) {
        snprintf(err, errlen, "starpu: starpu_init: %s", strerror(-rc));
        return -1;
    }
    nworkers = (int)starpu_worker_get_count();
    struct starpu_sched_policy *pol = starpu_sched_ctx_get_sched_policy(0);
    snprintf(sched_used, sizeof sched_used, "%s%s", pol ? pol->policy_name : "?",
             o->sched ? "" : " (default)");
    if (o->ncpu > 0 && nworkers != o->ncpu) {
        snprintf(err, errlen, "starpu: asked for %d CPU workers, got %d", o->ncpu, nworkers);
        starpu_shutdown();
        return -1;
    }
    return 0;
}

static int sp_run(const task_graph_t *g, const tb_opts_t *o, tb_result_t *res,
                  tb_record_t *final)
{
    res->err[0] = 0;
    long fields = tb_fields(g, o), W = g->max_width, ntasks, nedges;
    tb_graph_counts(g, &ntasks, &nedges);
    tb_buffers_t b;
    starpu_data_handle_t *h = calloc((size_t)(fields * W), sizeof *h);
    long *deps = malloc((size_t)W * sizeof *deps);
    struct starpu_data_descr *d = malloc((size_t)(W + 1) * sizeof *d);
    targs_t *args = malloc((size_t)ntasks * sizeof *args); /* kept until the end */
    if (!h || !deps || !d || !args || tb_buffers_alloc(&b, g, fields) ||
        tb_scratch_alloc(g, nworkers)) {
        snprintf(res->err, sizeof res->err, "starpu: out of memory");
        free(h), free(deps), free(d), free(args);
        return -1;
    }
    for (long f = 0; f < fields; f++)
        for (long p = 0; p < W; p++)
            starpu_variable_data_register(&h[f * W + p], STARPU_MAIN_RAM,
                                          (uintptr_t)tb_buffer(&b, f, p),
                                          g->output_bytes_per_task);
    atomic_store(&failed, 0);
    int rc = 0;
    long tasks = 0, edges = 0;
    double t0 = bench_now();
    for (long t = 0; t < g->timesteps && rc == 0; t++) {
        long off = task_graph_offset_at_timestep(g, t), w = task_graph_width_at_timestep(g, t);
        for (long p = off; p < off + w && rc == 0; p++) {
            long n = tb_task_inputs(g, t, p, deps);
            for (long i = 0; i < n; i++) {
                d[i].handle = h[((t - 1) % fields) * W + deps[i]];
                d[i].mode = STARPU_R;
            }
            d[n].handle = h[(t % fields) * W + p];
            d[n].mode = STARPU_W;
            targs_t *a = &args[tasks];
            *a = (targs_t){g, t, p, (int)n};
            rc = starpu_task_insert(&cl, STARPU_DATA_MODE_ARRAY, d, (int)n + 1,
                                    STARPU_CL_ARGS_NFREE, a, sizeof *a, 0);
            tasks++;
            edges += n;
        }
    }
    starpu_task_wait_for_all();
    res->wall_s = bench_now() - t0;
    res->tasks = tasks;
    res->edges = edges;
    for (long i = 0; i < fields * W; i++)
        starpu_data_unregister(h[i]);
    if (rc)
        snprintf(res->err, sizeof res->err, "starpu: starpu_task_insert: %s", strerror(-rc));
    else if (atomic_load(&failed)) {
        snprintf(res->err, sizeof res->err, "starpu: a task's validation failed");
        rc = -1;
    }
    tb_collect_final(g, &b, final);
    tb_buffers_free(&b);
    tb_scratch_free();
    free(h), free(deps), free(d), free(args);
    return rc ? -1 : 0;
}

static void sp_stop(void)
{
    starpu_shutdown();
}

static const char *sp_sched(void)
{
    return sched_used;
}

const tb_system_t tb_starpu = {
    .name = "starpu",
    .start = sp_start,
    .run = sp_run,
    .stop = sp_stop,
    .sched_name = sp_sched,
};
