/* peer_starpu.c — the StarPU side of the runtime benchmark: the same task
 * graphs as side_tessera.c, written the way a StarPU user would (implicit
 * data dependencies, matrix/variable data interfaces, the low-level
 * starpu_task_create + starpu_task_submit path, which is StarPU's cheapest).
 *
 * Built only when meson finds starpu-1.3; it must never call Tessera.
 */
#include "bench_runtime.h"
#include "cholesky_tiles.h"

#include <starpu.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char errbuf[256];

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

static int sp_start(int workers, const char *sched)
{
    /* Calibration and statistics would add work and noise that Tessera does
     * not do; none of the policies used needs a performance model. */
    setenv("STARPU_SILENT", "1", 1);
    setenv("STARPU_CALIBRATE", "0", 1);
    setenv("STARPU_BUS_CALIBRATE", "0", 1);

    struct starpu_conf conf;
    starpu_conf_init(&conf);
    conf.precedence_over_environment_variables = 1;
    conf.sched_policy_name = sched;
    conf.ncpus = workers;
    conf.ncuda = 0;
    conf.nopencl = 0;
    conf.nmic = 0;
    conf.nmpi_ms = 0;
    conf.calibrate = 0;
    conf.bus_calibrate = 0;
    conf.catch_signals = 0;
    int rc = starpu_init(&conf);
    if (rc != 0)
        return fail("starpu_init", rc);
    int n = (int)starpu_cpu_worker_get_count();
    if (n != workers) {
        snprintf(errbuf, sizeof errbuf,
                 "starpu: asked for %d CPU workers, got %d", workers, n);
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

/* ---- task_overhead ------------------------------------------------------- */

static void noop(void *buffers[], void *arg)
{
    (void)buffers;
    (void)arg;
}

static struct starpu_codelet noop0_cl = {
    .cpu_funcs = {noop}, .nbuffers = 0, .name = "noop"};
static struct starpu_codelet noop_rw_cl = {
    .cpu_funcs = {noop}, .nbuffers = 1, .modes = {STARPU_RW}, .name = "noop_rw"};
static struct starpu_codelet noop_r_cl = {
    .cpu_funcs = {noop}, .nbuffers = 1, .modes = {STARPU_R}, .name = "noop_r"};

static int sp_overhead(ovh_case_t c, int ntasks, double *seconds)
{
    static double var[8];
    starpu_data_handle_t h = NULL;
    struct starpu_codelet *cl = c == OVH_RW_CHAIN ? &noop_rw_cl
                                : c == OVH_R_SHARED ? &noop_r_cl
                                                    : &noop0_cl;
    if (cl->nbuffers)
        starpu_variable_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)var,
                                      sizeof var);
    int rc = 0;
    double t0 = bench_now();
    for (int i = 0; i < ntasks && rc == 0; i++) {
        struct starpu_task *t = starpu_task_create();
        t->cl = cl;
        if (h)
            t->handles[0] = h;
        rc = starpu_task_submit(t);
    }
    starpu_task_wait_for_all();
    *seconds = bench_now() - t0;
    if (h)
        starpu_data_unregister(h);
    return rc ? fail("starpu_task_submit", rc) : 0;
}

/* ---- granularity --------------------------------------------------------- */

static void spin_cpu(void *buffers[], void *arg)
{
    (void)buffers;
    bench_spin(*(const double *)arg);
}

static struct starpu_codelet spin_cl = {
    .cpu_funcs = {spin_cpu}, .nbuffers = 0, .name = "spin"};

static int sp_spin(double us, int ntasks, double *seconds)
{
    static double arg;
    arg = us;
    int rc = 0;
    double t0 = bench_now();
    for (int i = 0; i < ntasks && rc == 0; i++) {
        struct starpu_task *t = starpu_task_create();
        t->cl = &spin_cl;
        t->cl_arg = &arg; /* shared, read-only: no copy per task */
        t->cl_arg_size = sizeof arg;
        rc = starpu_task_submit(t);
    }
    starpu_task_wait_for_all();
    *seconds = bench_now() - t0;
    return rc ? fail("starpu_task_submit", rc) : 0;
}

/* ---- data helpers ------------------------------------------------------- */

/* Register tiles (i, j) of m with i >= j when lower, else all. */
static starpu_data_handle_t *register_tiles(const tiled_matrix_t *m, int lower)
{
    int nt = m->nt;
    starpu_data_handle_t *h = calloc((size_t)nt * (size_t)nt, sizeof *h);
    if (!h)
        return NULL;
    for (int j = 0; j < nt; j++)
        for (int i = lower ? j : 0; i < nt; i++) {
            int rows = tm_dim(m, i), cols = tm_dim(m, j);
            starpu_matrix_data_register(&h[(size_t)i + (size_t)j * (size_t)nt],
                                        STARPU_MAIN_RAM,
                                        (uintptr_t)tm_tile(m, i, j),
                                        (uint32_t)rows, (uint32_t)rows,
                                        (uint32_t)cols, m->elem);
        }
    return h;
}

static void unregister_tiles(starpu_data_handle_t *h, int nt)
{
    for (size_t t = 0; t < (size_t)nt * (size_t)nt; t++)
        if (h[t])
            starpu_data_unregister(h[t]);
    free(h);
}

#define MPTR(b) ((void *)STARPU_MATRIX_GET_PTR(b))
#define MROWS(b) ((int)STARPU_MATRIX_GET_NX(b))
#define MCOLS(b) ((int)STARPU_MATRIX_GET_NY(b))

static int submit3(struct starpu_codelet *cl, starpu_data_handle_t h0,
                   starpu_data_handle_t h1, starpu_data_handle_t h2, int prio)
{
    struct starpu_task *t = starpu_task_create();
    t->cl = cl;
    t->handles[0] = h0;
    if (cl->nbuffers > 1)
        t->handles[1] = h1;
    if (cl->nbuffers > 2)
        t->handles[2] = h2;
    t->priority = prio;
    return starpu_task_submit(t);
}

/* ---- gemm_tiled ---------------------------------------------------------- */

static void gemm_cpu(void *buffers[], void *arg)
{
    (void)arg;
    bench_tile_gemm(STARPU_MATRIX_GET_ELEMSIZE(buffers[2]), MROWS(buffers[2]),
                    MCOLS(buffers[2]), MCOLS(buffers[0]), MPTR(buffers[0]),
                    MPTR(buffers[1]), MPTR(buffers[2]));
}

static struct starpu_codelet gemm_cl = {
    .cpu_funcs = {gemm_cpu}, .nbuffers = 3,
    .modes = {STARPU_R, STARPU_R, STARPU_RW}, .name = "gemm"};

static int sp_gemm(const tiled_matrix_t *a, const tiled_matrix_t *b,
                   tiled_matrix_t *c, double *seconds)
{
    int nt = c->nt;
    starpu_data_handle_t *ha = register_tiles(a, 0), *hb = register_tiles(b, 0),
                         *hc = register_tiles(c, 0);
    int rc = (ha && hb && hc) ? 0 : -1;
#define IDX(i, j) ((size_t)(i) + (size_t)(j) * (size_t)nt)
    double t0 = bench_now();
    for (int i = 0; i < nt && rc == 0; i++)
        for (int j = 0; j < nt && rc == 0; j++)
            for (int k = 0; k < nt && rc == 0; k++)
                rc = submit3(&gemm_cl, ha[IDX(i, k)], hb[IDX(k, j)],
                             hc[IDX(i, j)], 0);
#undef IDX
    starpu_task_wait_for_all();
    *seconds = bench_now() - t0;
    if (ha)
        unregister_tiles(ha, nt);
    if (hb)
        unregister_tiles(hb, nt);
    if (hc)
        unregister_tiles(hc, nt);
    return rc ? fail("gemm submission", rc) : 0;
}

/* ---- potrf_tiled --------------------------------------------------------- */

static atomic_int potrf_failed;

static void potrf_cpu(void *buffers[], void *arg)
{
    (void)arg;
    if (chol_tile_potrf(MPTR(buffers[0]), MROWS(buffers[0])) != 0)
        atomic_store(&potrf_failed, 1);
}

static void trsm_cpu(void *buffers[], void *arg)
{
    (void)arg;
    chol_tile_trsm(MPTR(buffers[0]), MROWS(buffers[0]), MPTR(buffers[1]),
                   MROWS(buffers[1]));
}

static void syrk_cpu(void *buffers[], void *arg)
{
    (void)arg;
    chol_tile_syrk(MPTR(buffers[0]), MROWS(buffers[0]), MCOLS(buffers[0]),
                   MPTR(buffers[1]));
}

static void cgemm_cpu(void *buffers[], void *arg)
{
    (void)arg;
    chol_tile_gemm(MPTR(buffers[0]), MROWS(buffers[0]), MPTR(buffers[1]),
                   MROWS(buffers[1]), MCOLS(buffers[0]), MPTR(buffers[2]));
}

static struct starpu_codelet potrf_cl = {
    .cpu_funcs = {potrf_cpu}, .nbuffers = 1, .modes = {STARPU_RW},
    .name = "dpotrf"};
static struct starpu_codelet trsm_cl = {
    .cpu_funcs = {trsm_cpu}, .nbuffers = 2, .modes = {STARPU_R, STARPU_RW},
    .name = "dtrsm"};
static struct starpu_codelet syrk_cl = {
    .cpu_funcs = {syrk_cpu}, .nbuffers = 2, .modes = {STARPU_R, STARPU_RW},
    .name = "dsyrk"};
static struct starpu_codelet cgemm_cl = {
    .cpu_funcs = {cgemm_cpu}, .nbuffers = 3,
    .modes = {STARPU_R, STARPU_R, STARPU_RW}, .name = "dgemm"};

static int sp_potrf(tiled_matrix_t *a, double *seconds)
{
    int nt = a->nt;
    starpu_data_handle_t *h = register_tiles(a, 1);
    if (!h)
        return fail("out of memory", -1);
#define H(i, j) h[(size_t)(i) + (size_t)(j) * (size_t)nt]
    atomic_store(&potrf_failed, 0);
    int rc = 0;
    double t0 = bench_now();
    for (int k = 0; k < nt && rc == 0; k++) {
        rc = submit3(&potrf_cl, H(k, k), NULL, NULL, chol_prio_potrf(nt, k));
        for (int i = k + 1; i < nt && rc == 0; i++)
            rc = submit3(&trsm_cl, H(k, k), H(i, k), NULL,
                         chol_prio_trsm(nt, k, i));
        for (int j = k + 1; j < nt && rc == 0; j++) {
            rc = submit3(&syrk_cl, H(j, k), H(j, j), NULL,
                         chol_prio_syrk(nt, k, j));
            for (int i = j + 1; i < nt && rc == 0; i++)
                rc = submit3(&cgemm_cl, H(i, k), H(j, k), H(i, j),
                             chol_prio_gemm(nt, k, i, j));
        }
    }
#undef H
    starpu_task_wait_for_all();
    *seconds = bench_now() - t0;
    unregister_tiles(h, nt);
    if (rc)
        return fail("potrf submission", rc);
    if (atomic_load(&potrf_failed)) {
        snprintf(errbuf, sizeof errbuf, "starpu: a diagonal tile is not "
                                        "positive definite");
        return -1;
    }
    return 0;
}

const bench_side_t bench_starpu = {
    .name = "starpu",
    .start = sp_start,
    .stop = sp_stop,
    .overhead = sp_overhead,
    .spin = sp_spin,
    .gemm = sp_gemm,
    .potrf = sp_potrf,
    .error = sp_error,
};
