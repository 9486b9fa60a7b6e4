/* side_tessera.c — the Tessera side of the runtime benchmark: the same task
 * graphs as peer_starpu.c, through the public API only (tessera.h). */
#include "bench_runtime.h"
#include "cholesky_tiles.h"

#include <tessera/tessera.h>

#include <stdio.h>
#include <stdlib.h>

static char errbuf[512];

static const char *ts_error(void)
{
    return errbuf;
}

static int fail(const char *what, int rc)
{
    snprintf(errbuf, sizeof errbuf, "tessera: %s: %s (%s)", what,
             tsr_strerror(rc), tsr_error_message());
    return rc ? rc : -1;
}

static int ts_start(int workers, const char *sched)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = workers;
    cfg.sched = sched;
    int rc = tsr_init(&cfg);
    if (rc != TSR_OK)
        return fail("tsr_init", rc);
    int n = tsr_worker_count();
    if (n != workers) {
        snprintf(errbuf, sizeof errbuf,
                 "tessera: asked for %d workers, got %d (TESSERA_NCPU set?)",
                 workers, n);
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

/* ---- task_overhead ------------------------------------------------------- */

static int noop(void **buffers, const void *args, const tsr_exec_t *exec)
{
    (void)buffers;
    (void)args;
    (void)exec;
    return 0;
}

static const tsr_codelet_t noop0_cl = {
    .name = "noop", .impl = {[TSR_DEVICE_CPU] = noop}, .nbuffers = 0};
static const tsr_codelet_t noop1_cl = {
    .name = "noop1", .impl = {[TSR_DEVICE_CPU] = noop}, .nbuffers = 1};

static int ts_overhead(ovh_case_t c, int ntasks, double *seconds)
{
    static double var[8];
    tsr_handle_t h = NULL;
    tsr_access_t acc = {NULL, c == OVH_RW_CHAIN ? TSR_RW : TSR_R};
    tsr_task_desc_t d = {.codelet = &noop0_cl};
    if (c != OVH_INDEPENDENT) {
        int rc = tsr_handle_register(&h, var, sizeof var);
        if (rc != TSR_OK)
            return fail("tsr_handle_register", rc);
        acc.handle = h;
        d.codelet = &noop1_cl;
        d.nbuffers = 1;
        d.buffers = &acc;
    }
    int rc = TSR_OK;
    double t0 = bench_now();
    for (int i = 0; i < ntasks && rc == TSR_OK; i++)
        rc = tsr_submit(&d, NULL);
    int wrc = tsr_wait_all();
    *seconds = bench_now() - t0;
    if (h)
        tsr_handle_unregister(h);
    if (rc != TSR_OK)
        return fail("tsr_submit", rc);
    return wrc == TSR_OK ? 0 : fail("tsr_wait_all", wrc);
}

/* ---- granularity --------------------------------------------------------- */

static int spin_cpu(void **buffers, const void *args, const tsr_exec_t *exec)
{
    (void)buffers;
    (void)exec;
    bench_spin(*(const double *)args);
    return 0;
}

static const tsr_codelet_t spin_cl = {
    .name = "spin", .impl = {[TSR_DEVICE_CPU] = spin_cpu}, .nbuffers = 0};

static int ts_spin(double us, int ntasks, double *seconds)
{
    tsr_task_desc_t d = {.codelet = &spin_cl, .args = &us,
                         .args_size = sizeof us};
    int rc = TSR_OK;
    double t0 = bench_now();
    for (int i = 0; i < ntasks && rc == TSR_OK; i++)
        rc = tsr_submit(&d, NULL);
    int wrc = tsr_wait_all();
    *seconds = bench_now() - t0;
    if (rc != TSR_OK)
        return fail("tsr_submit", rc);
    return wrc == TSR_OK ? 0 : fail("tsr_wait_all", wrc);
}

/* ---- gemm_tiled ---------------------------------------------------------- */

typedef struct gemm_args {
    int m, n, k;
    int elem;
} gemm_args_t;

static int gemm_cpu(void **buf, const void *args, const tsr_exec_t *exec)
{
    (void)exec;
    const gemm_args_t *a = args;
    bench_tile_gemm((size_t)a->elem, a->m, a->n, a->k, buf[0], buf[1], buf[2]);
    return 0;
}

static double gemm_flops(const void *args, const size_t *sizes)
{
    (void)sizes;
    const gemm_args_t *a = args;
    return 2.0 * a->m * a->n * a->k;
}

static const tsr_codelet_t gemm_cl = {
    .name = "gemm", .impl = {[TSR_DEVICE_CPU] = gemm_cpu}, .nbuffers = 3,
    .flops = gemm_flops};

static tsr_handle_t *register_tiles(const tiled_matrix_t *m, int *rc)
{
    size_t count = (size_t)m->nt * (size_t)m->nt;
    tsr_handle_t *h = calloc(count, sizeof *h);
    if (!h) {
        *rc = TSR_ENOMEM;
        return NULL;
    }
    for (int j = 0; j < m->nt; j++)
        for (int i = 0; i < m->nt; i++) {
            int r = tsr_handle_register(&h[(size_t)i + (size_t)j * (size_t)m->nt],
                                        tm_tile(m, i, j), tm_tile_bytes(m, i, j));
            if (r != TSR_OK && *rc == TSR_OK)
                *rc = r;
        }
    return h;
}

static void unregister_tiles(tsr_handle_t *h, int nt)
{
    if (!h)
        return;
    for (size_t t = 0; t < (size_t)nt * (size_t)nt; t++)
        if (h[t])
            tsr_handle_unregister(h[t]);
    free(h);
}

static int ts_gemm(const tiled_matrix_t *a, const tiled_matrix_t *b,
                   tiled_matrix_t *c, double *seconds)
{
    int nt = c->nt, rc = TSR_OK;
    tsr_handle_t *ha = register_tiles(a, &rc), *hb = register_tiles(b, &rc),
                 *hc = register_tiles(c, &rc);
#define IDX(i, j) ((size_t)(i) + (size_t)(j) * (size_t)nt)
    double t0 = bench_now();
    for (int i = 0; i < nt && rc == TSR_OK; i++)
        for (int j = 0; j < nt && rc == TSR_OK; j++)
            for (int k = 0; k < nt && rc == TSR_OK; k++) {
                tsr_access_t acc[3] = {{ha[IDX(i, k)], TSR_R},
                                       {hb[IDX(k, j)], TSR_R},
                                       {hc[IDX(i, j)], TSR_RW}};
                gemm_args_t args = {tm_dim(c, i), tm_dim(c, j), tm_dim(a, k),
                                    (int)c->elem};
                tsr_task_desc_t d = {.codelet = &gemm_cl, .nbuffers = 3,
                                     .buffers = acc, .args = &args,
                                     .args_size = sizeof args};
                rc = tsr_submit(&d, NULL);
            }
#undef IDX
    int wrc = tsr_wait_all();
    *seconds = bench_now() - t0;
    unregister_tiles(ha, nt);
    unregister_tiles(hb, nt);
    unregister_tiles(hc, nt);
    if (rc != TSR_OK)
        return fail("gemm submission", rc);
    return wrc == TSR_OK ? 0 : fail("tsr_wait_all", wrc);
}

/* ---- potrf_tiled --------------------------------------------------------- */

static int ts_potrf(tiled_matrix_t *a, double *seconds)
{
    int rc = chol_factor_tessera(a, seconds);
    return rc == TSR_OK ? 0 : fail("tiled Cholesky", rc);
}

const bench_side_t bench_tessera = {
    .name = "tessera",
    .start = ts_start,
    .stop = ts_stop,
    .overhead = ts_overhead,
    .spin = ts_spin,
    .gemm = ts_gemm,
    .potrf = ts_potrf,
    .error = ts_error,
};
