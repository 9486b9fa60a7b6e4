/* backend_tessera.c — the Task Bench graph on Tessera, through the public
 * API only (tessera/tessera.h): one registered handle per (field, point)
 * output buffer; each task reads its inputs' handles (TSR_R, timestep t-1)
 * and writes its own (TSR_W); Tessera infers the edges (sequential task
 * flow). CPU workers only (ncuda = 0, no simulated accelerators).
 *
 * A task holds at most TSR_MAX_BUFFERS (16) buffers: a graph with a task of
 * more than 15 inputs (all_to_all, nearest or spread wider than 15) is
 * refused before anything is submitted, naming the pattern and the limit.
 */
#include "backend.h"
#include "../bench_util.h"

#include <tessera/tessera.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct targs {
    const task_graph_t *g;
    long t, p;
    int nin;
} targs_t;

static int impl(void **buf, const void *args, const tsr_exec_t *e)
{
    const targs_t *a = args;
    const char *in[TSR_MAX_BUFFERS];
    for (int i = 0; i < a->nin; i++)
        in[i] = buf[i];
    const task_graph_t *g = a->g;
    char *scratch = tb_scratch_of(e->worker);
    return task_graph_execute_point(g, a->t, a->p, buf[a->nin], e->sizes[a->nin], in,
                                    e->sizes, (size_t)a->nin, scratch,
                                    scratch ? g->scratch_bytes_per_task : 0);
}

/* one codelet per buffer count (a task's count must equal its codelet's) */
static tsr_codelet_t cls[TSR_MAX_BUFFERS + 1];
static char sched_used[64];
static int nworkers;

static int ts_start(const tb_opts_t *o, char *err, size_t errlen)
{
    for (int n = 1; n <= TSR_MAX_BUFFERS; n++) {
        cls[n].name = "taskbench_point";
        cls[n].impl[TSR_DEVICE_CPU] = impl;
        cls[n].nbuffers = n;
    }
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = o->ncpu;
    cfg.sched = o->sched;
    cfg.ncuda = 0;
    cfg.nsim = 0;
    int rc = tsr_init(&cfg);
    if (rc != TSR_OK) {
        snprintf(err, errlen, "tessera: tsr_init: %s (%s)", tsr_strerror(rc),
                 tsr_error_message());
        return -1;
    }
    nworkers = tsr_worker_count();
    const char *env = getenv("TESSERA_SCHED"); /* the environment overrides cfg */
    snprintf(sched_used, sizeof sched_used, "%s",
             env && *env ? env : o->sched ? o->sched : "eager (default)");
    if (o->ncpu > 0 && nworkers != o->ncpu) {
        snprintf(err, errlen, "tessera: asked for %d CPU workers, got %d", o->ncpu, nworkers);
        tsr_shutdown();
        return -1;
    }
    return 0;
}

static int ts_run(const task_graph_t *g, const tb_opts_t *o, tb_result_t *res,
                  tb_record_t *final)
{
    res->err[0] = 0;
    long maxin = tb_max_inputs(g);
    if (maxin + 1 > TSR_MAX_BUFFERS) {
        snprintf(res->err, sizeof res->err,
                 "tessera: %s at width %ld has tasks of %ld inputs + 1 output; a Tessera "
                 "task takes at most TSR_MAX_BUFFERS = %d buffers (at most %d inputs): "
                 "use a smaller width or radix",
                 tb_dependence_name(g->dependence), g->max_width, maxin, TSR_MAX_BUFFERS,
                 TSR_MAX_BUFFERS - 1);
        return -1;
    }
    long fields = tb_fields(g, o), W = g->max_width;
    tb_buffers_t b;
    tsr_handle_t *h = calloc((size_t)(fields * W), sizeof *h);
    long *deps = malloc((size_t)W * sizeof *deps);
    if (!h || !deps || tb_buffers_alloc(&b, g, fields) || tb_scratch_alloc(g, nworkers)) {
        snprintf(res->err, sizeof res->err, "tessera: out of memory");
        free(h), free(deps);
        return -1;
    }
    int rc = TSR_OK;
    for (long f = 0; f < fields && rc == TSR_OK; f++)
        for (long p = 0; p < W && rc == TSR_OK; p++)
            rc = tsr_handle_register(&h[f * W + p], tb_buffer(&b, f, p),
                                     g->output_bytes_per_task);
    long tasks = 0, edges = 0;
    double t0 = bench_now();
    for (long t = 0; t < g->timesteps && rc == TSR_OK; t++) {
        long off = task_graph_offset_at_timestep(g, t), w = task_graph_width_at_timestep(g, t);
        for (long p = off; p < off + w && rc == TSR_OK; p++) {
            long n = tb_task_inputs(g, t, p, deps);
            tsr_access_t acc[TSR_MAX_BUFFERS];
            for (long i = 0; i < n; i++)
                acc[i] = (tsr_access_t){h[((t - 1) % fields) * W + deps[i]], TSR_R};
            acc[n] = (tsr_access_t){h[(t % fields) * W + p], TSR_W};
            targs_t a = {g, t, p, (int)n};
            tsr_task_desc_t d = {
                .codelet = &cls[n + 1],
                .nbuffers = (int)n + 1,
                .buffers = acc,
                .args = &a,
                .args_size = sizeof a,
            };
            rc = tsr_submit(&d, NULL);
            tasks++;
            edges += n;
        }
    }
    int wrc = tsr_wait_all();
    res->wall_s = bench_now() - t0;
    res->tasks = tasks;
    res->edges = edges;
    if (rc == TSR_OK)
        rc = wrc;
    if (rc != TSR_OK)
        snprintf(res->err, sizeof res->err, "tessera: %s (%s)", tsr_strerror(rc),
                 tsr_error_message());
    for (long i = 0; i < fields * W; i++)
        if (h[i])
            tsr_handle_unregister(h[i]);
    tb_collect_final(g, &b, final);
    tb_buffers_free(&b);
    tb_scratch_free();
    free(h), free(deps);
    return rc == TSR_OK ? 0 : -1;
}

static void ts_stop(void)
{
    tsr_shutdown();
}

static const char *ts_sched(void)
{
    return sched_used;
}

const tb_system_t tb_tessera = {
    .name = "tessera",
    .start = ts_start,
    .run = ts_run,
    .stop = ts_stop,
    .sched_name = ts_sched,
};
