/* peer_starpu.c — the StarPU side of the scheduling benchmark: the same
 * graph_t replayed with starpu_task_insert (implicit data dependencies,
 * the same access modes, priorities and kernels), CPU workers only.
 *
 * Built only when meson finds starpu-1.3; it must never call Tessera.
 */
#include "bench_sched.h"

#include <starpu.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char errbuf[512];

static const char *sp_error(void)
{
    return errbuf;
}

static int fail(const char *what, int rc)
{
    snprintf(errbuf, sizeof errbuf, "starpu: %s: %s", what,
             rc < 0 ? strerror(-rc) : "failed");
    return rc ? rc : -1;
}

/* ---- codelets ------------------------------------------------------------ */

static const graph_t *cur; /* the graph being run */
static atomic_int kernel_failed;

static void impl_real(void *buffers[], void *arg)
{
    const sg_task_t *t = arg;
    void *b[SG_MAX_BUFFERS];
    for (int i = 0; i < t->nbuf; i++)
        b[i] = (void *)STARPU_VARIABLE_GET_PTR(buffers[i]);
    if (sg_exec(cur, t, b, starpu_worker_get_id()) != 0)
        atomic_store(&kernel_failed, 1);
}

static void impl_empty(void *buffers[], void *arg)
{
    (void)buffers;
    (void)arg;
}

static struct starpu_codelet cls[2][K_NKERNELS];
static struct starpu_perfmodel models[2][K_NKERNELS];
static char names[2][K_NKERNELS][48];

/* StarPU policies that read performance models (dm, dmda, dmdar, dmdas,
 * dmdap, heft-like): their codelets get history-based models, calibrated
 * as they run, like Tessera's model-based policies. */
static int uses_models(const char *policy)
{
    return !strncmp(policy, "dm", 2) || strstr(policy, "heft") != NULL;
}

static void setup_codelets(int with_models)
{
    for (int e = 0; e < 2; e++)
        for (int k = 0; k < K_NKERNELS; k++) {
            struct starpu_codelet *c = &cls[e][k];
            struct starpu_perfmodel *m = &models[e][k];
            snprintf(names[e][k], sizeof names[e][k], "tessera_bench_sched_%s%s",
                     sg_kernel_names[k], e ? "_empty" : "");
            memset(c, 0, sizeof *c);
            c->cpu_funcs[0] = e ? impl_empty : impl_real;
            c->nbuffers = STARPU_VARIABLE_NBUFFERS;
            c->name = names[e][k];
            if (with_models) {
                memset(m, 0, sizeof *m);
                m->type = STARPU_HISTORY_BASED;
                m->symbol = names[e][k];
                c->model = m;
            }
        }
}

/* ---- start / stop --------------------------------------------------------- */

static int nworkers;

static int sp_start(const sg_platform_t *p, const char *policy,
                    const char *model_dir)
{
    if (p->nsim) {
        snprintf(errbuf, sizeof errbuf,
                 "starpu: no simulated accelerators; cpu platform only");
        return -1;
    }
    /* is it a StarPU policy? (starpu_init would fall back to eager) */
    int known = 0;
    for (struct starpu_sched_policy **sp = starpu_sched_get_predefined_policies();
         sp && *sp; sp++)
        known |= !strcmp((*sp)->policy_name, policy);
    if (!known) {
        snprintf(errbuf, sizeof errbuf, "starpu: unknown policy '%s'", policy);
        return -1;
    }
    setenv("STARPU_SILENT", "1", 1);
    setenv("STARPU_BUS_CALIBRATE", "0", 1);
    if (model_dir && *model_dir)
        setenv("STARPU_HOME", model_dir, 1); /* models under it, not in ~ */
    int models = uses_models(policy);
    setup_codelets(models);

    struct starpu_conf conf;
    starpu_conf_init(&conf);
    conf.precedence_over_environment_variables = 1;
    conf.sched_policy_name = policy;
    conf.ncpus = p->ncpu;
    conf.ncuda = 0;
    conf.nopencl = 0;
    conf.nmic = 0;
    conf.nmpi_ms = 0;
    conf.calibrate = models; /* update the history as tasks run */
    conf.bus_calibrate = 0;
    conf.catch_signals = 0;
    int rc = starpu_init(&conf);
    if (rc != 0)
        return fail("starpu_init", rc);
    nworkers = (int)starpu_worker_get_count();
    if (nworkers != p->ncpu || nworkers > SG_MAX_WORKERS) {
        snprintf(errbuf, sizeof errbuf,
                 "starpu: asked for %d CPU workers, got %d", p->ncpu, nworkers);
        starpu_shutdown();
        return -1;
    }
    return 0;
}

static int sp_stop(void)
{
    starpu_shutdown();
    return 0;
}

/* ---- one run ------------------------------------------------------------- */

static int sp_run(const graph_t *g, int empty, sg_result_t *out)
{
    starpu_data_handle_t *h = calloc((size_t)g->nhandles, sizeof *h);
    if (!h) {
        snprintf(errbuf, sizeof errbuf, "starpu: out of memory");
        return -1;
    }
    for (int i = 0; i < g->nhandles; i++)
        starpu_variable_data_register(&h[i], STARPU_MAIN_RAM,
                                      (uintptr_t)graph_buf(g, i),
                                      empty && g->hsize[i] > SG_DATAFREE_BYTES
                                          ? SG_DATAFREE_BYTES
                                          : g->hsize[i]);
    cur = g;
    atomic_store(&kernel_failed, 0);
    int rc = 0;
    sg_busy_reset();
    double t0 = bench_now();
    for (int t = 0; t < g->ntasks && rc == 0; t++) {
        const sg_task_t *tk = &g->tasks[t];
        struct starpu_data_descr d[SG_MAX_BUFFERS];
        for (int i = 0; i < tk->nbuf; i++) {
            const sg_access_t *a = &g->acc[tk->acc0 + i];
            d[i].handle = h[a->handle];
            d[i].mode = a->mode == SG_R   ? STARPU_R
                        : a->mode == SG_W ? STARPU_W
                                          : STARPU_RW;
        }
        rc = starpu_task_insert(&cls[empty][tk->kernel], STARPU_DATA_MODE_ARRAY,
                                d, tk->nbuf, STARPU_PRIORITY, tk->prio,
                                STARPU_CL_ARGS_NFREE, (void *)(uintptr_t)tk,
                                sizeof *tk, 0);
    }
    starpu_task_wait_for_all();
    out->makespan_s = bench_now() - t0;
    for (int i = 0; i < g->nhandles; i++)
        starpu_data_unregister(h[i]);
    free(h);
    out->busy_s = sg_busy_sum();
    out->nworkers = nworkers;
    out->moved = 0; /* one memory node */
    out->simulated = 0;
    out->copies = 0;
    out->wait_data_s = 0;
    if (rc)
        return fail("starpu_task_insert", rc);
    if (atomic_load(&kernel_failed)) {
        snprintf(errbuf, sizeof errbuf, "starpu: a kernel failed (a tile that "
                                        "is not positive definite)");
        return -1;
    }
    return 0;
}

const sg_side_t sg_starpu = {
    .name = "starpu",
    .start = sp_start,
    .run = sp_run,
    .stop = sp_stop,
    .error = sp_error,
};
