/* side_tessera.c — the Tessera side of the scheduling benchmark: replays a
 * graph_t through the public API (tsr_submit with one codelet per kernel),
 * on CPU workers and optionally simulated accelerators. Times a run on the
 * runtime's clock (tsr_time), so that the same code under TESSERA_SIMULATE
 * reports virtual time. Must never time with a clock of its own. */
#include "bench_sched.h"

#include <tessera/tessera.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>

static char errbuf[512];

static const char *ts_error(void)
{
    return errbuf;
}

static int fail(const char *what, int rc)
{
    snprintf(errbuf, sizeof errbuf, "%s: %s (%s)", what, tsr_strerror(rc),
             tsr_error_message());
    return rc ? rc : -1;
}

/* ---- codelets: one per kernel and buffer count; the empty ones under
 * their own names, so that they never feed the real kernels' models ---- */

typedef struct task_args {
    const graph_t *g;
    int task;
} task_args_t;

static int impl_real(void **buf, const void *args, const tsr_exec_t *e)
{
    const task_args_t *a = args;
    return sg_exec(a->g, &a->g->tasks[a->task], buf, e->worker);
}

static int impl_empty(void **buf, const void *args, const tsr_exec_t *e)
{
    (void)buf;
    (void)args;
    (void)e;
    return 0;
}

static double flops(const void *args, const size_t *sizes)
{
    (void)sizes;
    const task_args_t *a = args;
    return sg_task_flops(&a->g->tasks[a->task]);
}

static tsr_codelet_t cls[2][K_NKERNELS][SG_MAX_BUFFERS + 1];
static char cl_names[2][K_NKERNELS][32];

static const tsr_codelet_t *codelet(int empty, int kernel, int nbuf)
{
    tsr_codelet_t *c = &cls[empty][kernel][nbuf];
    if (!c->name) {
        snprintf(cl_names[empty][kernel], sizeof cl_names[empty][kernel],
                 "sched_%s%s", sg_kernel_names[kernel], empty ? "_empty" : "");
        c->name = cl_names[empty][kernel];
        c->impl[TSR_DEVICE_CPU] = empty ? impl_empty : impl_real;
        c->nbuffers = nbuf;
        c->flops = kernel == K_SPIN ? NULL : flops;
    }
    return c;
}

/* ---- start / stop --------------------------------------------------------- */

static int nworkers;
static int simulated; /* TESSERA_SIMULATE names a platform: virtual time */

static int ts_start(const sg_platform_t *p, const char *policy,
                     const char *model_dir)
{
    /* The simulated accelerators' copy engines sleep out each copy's
     * latency (memory/sim.c); with Linux's default 50 us timer slack a
     * 10 us sleep lasts ~90 us here. Threads inherit the slack of the
     * thread that creates them, so the runtime's threads, started by
     * tsr_init below, keep their copies near the platform's latency. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = p->ncpu;
    cfg.nsim = p->nsim;
    cfg.sim_mem = p->sim_mem;
    cfg.sim_bandwidth = p->sim_bandwidth;
    cfg.sim_latency = p->sim_latency;
    cfg.ncuda = 0;
    cfg.sched = policy;
    cfg.perfmodel_dir = model_dir;
    int rc = tsr_init(&cfg);
    if (rc != TSR_OK)
        return fail("tsr_init", rc);
    nworkers = tsr_worker_count();
    const char *sim = getenv("TESSERA_SIMULATE");
    simulated = sim && *sim;
    /* Under simulation the platform file decides the workers. */
    if (!simulated && nworkers != p->ncpu + p->nsim) {
        snprintf(errbuf, sizeof errbuf,
                 "asked for %d CPU workers and %d simulated accelerators, got "
                 "%d workers",
                 p->ncpu, p->nsim, nworkers);
        tsr_shutdown();
        return -1;
    }
    return 0;
}

static int ts_stop(void)
{
    int rc = tsr_shutdown();
    return rc == TSR_OK ? 0 : fail("tsr_shutdown", rc);
}

/* Bytes copied between distinct memory nodes since tsr_init. */
static uint64_t moved_bytes(void)
{
    int n = tsr_memory_node_count();
    uint64_t b = 0;
    for (int s = 0; s < n; s++)
        for (int d = 0; d < n; d++)
            if (s != d)
                b += tsr_memory_link_bytes(s, d);
    return b;
}

/* Sums over workers of the time inside implementations, as the runtime
 * counts it (virtual under simulation, where no kernel of ours runs), and
 * of the time spent waiting for data with nothing else to run. */
static double runtime_busy(double *wait_data)
{
    double b = 0, w = 0;
    for (int i = 0; i < nworkers; i++) {
        tsr_worker_stats_t st;
        if (tsr_worker_stats(i, &st) == TSR_OK) {
            b += st.busy_s;
            w += st.wait_data_s;
        }
    }
    *wait_data = w;
    return b;
}

/* Copies (fetches) into every node since tsr_init. */
static uint64_t copies(void)
{
    uint64_t c = 0;
    int n = tsr_memory_node_count();
    for (int i = 0; i < n; i++) {
        tsr_node_stats_t st;
        if (tsr_memory_node_stats(i, &st) == TSR_OK)
            c += st.fetches;
    }
    return c;
}

/* ---- one run ------------------------------------------------------------- */

/* Bytes a handle is registered with: the graph's size, or, for the empty
 * replay, one word (SG_DATAFREE_BYTES): same handles, modes and
 * dependencies, but copies that cost only their latency, so that the
 * empty makespan measures the runtime and the policy, not the bytes. */
static size_t reg_size(const graph_t *g, int h, int empty)
{
    return empty && g->hsize[h] > SG_DATAFREE_BYTES ? SG_DATAFREE_BYTES : g->hsize[h];
}

static int ts_run(const graph_t *g, int empty, sg_result_t *out)
{
    tsr_handle_t *h = calloc((size_t)g->nhandles, sizeof *h);
    if (!h) {
        snprintf(errbuf, sizeof errbuf, "out of memory");
        return -1;
    }
    uint64_t moved0 = moved_bytes();
    int rc = TSR_OK;
    for (int i = 0; i < g->nhandles && rc == TSR_OK; i++)
        rc = tsr_handle_register(&h[i], graph_buf(g, i), reg_size(g, i, empty));
    if (rc != TSR_OK) {
        fail("tsr_handle_register", rc);
        for (int i = 0; i < g->nhandles; i++)
            if (h[i])
                tsr_handle_unregister(h[i]);
        free(h);
        return -1;
    }
    const char *failed = "tsr_submit";
    sg_busy_reset();
    double wait0, wait1;
    double rbusy0 = runtime_busy(&wait0);
    uint64_t copies0 = copies();
    double t0 = tsr_time();
    for (int t = 0; t < g->ntasks && rc == TSR_OK; t++) {
        const sg_task_t *tk = &g->tasks[t];
        tsr_access_t acc[SG_MAX_BUFFERS];
        for (int i = 0; i < tk->nbuf; i++) {
            const sg_access_t *a = &g->acc[tk->acc0 + i];
            acc[i].handle = h[a->handle];
            acc[i].mode = a->mode == SG_R ? TSR_R : a->mode == SG_W ? TSR_W : TSR_RW;
        }
        task_args_t args = {g, t};
        tsr_task_desc_t d = {.codelet = codelet(empty, tk->kernel, tk->nbuf),
                             .nbuffers = tk->nbuf,
                             .buffers = acc,
                             .args = &args,
                             .args_size = sizeof args,
                             .priority = tk->prio};
        rc = tsr_submit(&d, NULL);
    }
    int wrc = tsr_wait_all();
    out->makespan_s = tsr_time() - t0;
    if (rc == TSR_OK && wrc != TSR_OK) {
        rc = wrc;
        failed = "tsr_wait_all";
    }
    if (rc != TSR_OK)
        fail(failed, rc);
    for (int i = 0; i < g->nhandles; i++) {
        int urc = tsr_handle_unregister(h[i]);
        if (rc == TSR_OK && urc != TSR_OK)
            rc = fail("tsr_handle_unregister", urc);
    }
    free(h);
    /* Our kernels count their own time (as StarPU's side does); under
     * simulation they do not run: the runtime's virtual busy time. */
    double rbusy1 = runtime_busy(&wait1);
    out->busy_s = simulated ? rbusy1 - rbusy0 : sg_busy_sum();
    out->wait_data_s = wait1 - wait0;
    out->copies = copies() - copies0;
    out->simulated = simulated;
    out->nworkers = nworkers;
    out->moved = moved_bytes() - moved0;
    return rc == TSR_OK ? 0 : -1;
}

const sg_side_t sg_tessera = {
    .name = "tessera",
    .start = ts_start,
    .run = ts_run,
    .stop = ts_stop,
    .error = ts_error,
};
