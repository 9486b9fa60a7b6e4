/* kernels.c — the tile kernels every side of the scheduling benchmark runs,
 * and the per-worker busy counters (time inside kernels). */
#include "bench_sched.h"
#include "cholesky_tiles.h"

#include <cblas.h>

const char *const sg_kernel_names[K_NKERNELS] = {
    [K_SGEMM] = "sgemm", [K_DPOTRF] = "dpotrf", [K_DTRSM] = "dtrsm",
    [K_DSYRK] = "dsyrk", [K_DGEMM] = "dgemm",   [K_SPIN] = "spin",
};

/* One cache line per worker: each worker writes only its own. */
static struct {
    double s;
    char pad[64 - sizeof(double)];
} busy[SG_MAX_WORKERS];

void sg_busy_reset(void)
{
    for (int w = 0; w < SG_MAX_WORKERS; w++)
        busy[w].s = 0;
}

double sg_busy_sum(void)
{
    double s = 0;
    for (int w = 0; w < SG_MAX_WORKERS; w++)
        s += busy[w].s;
    return s;
}

double sg_task_flops(const sg_task_t *t)
{
    double m = t->m, n = t->n, k = t->k;
    switch (t->kernel) {
    case K_SGEMM:
    case K_DGEMM:
        return 2 * m * n * k;
    case K_DPOTRF:
        return n * n * n / 3;
    case K_DTRSM:
        return m * n * n;
    case K_DSYRK:
        return m * m * k;
    default:
        return 0;
    }
}

static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void spin(const graph_t *g, const sg_task_t *t, void **b)
{
    double end = bench_now() + t->cost_us * 1e-6;
    while (bench_now() < end)
        ;
    uint64_t h = mix((uint64_t)t->id);
    for (int i = 0; i < t->nbuf; i++)
        if (g->acc[t->acc0 + i].mode & SG_R)
            h = mix(h ^ *(const uint64_t *)b[i]);
    for (int i = 0; i < t->nbuf; i++)
        if (g->acc[t->acc0 + i].mode & SG_W)
            *(uint64_t *)b[i] = mix(h + (uint64_t)i);
}

int sg_exec(const graph_t *g, const sg_task_t *t, void **b, int worker)
{
    double t0 = bench_now();
    int rc = 0;
    switch (t->kernel) {
    case K_SGEMM:
        cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, t->m, t->n,
                    t->k, 1.0f, b[0], t->m, b[1], t->k, 1.0f, b[2], t->m);
        break;
    case K_DPOTRF:
        rc = chol_tile_potrf(b[0], t->n);
        break;
    case K_DTRSM:
        chol_tile_trsm(b[0], t->n, b[1], t->m);
        break;
    case K_DSYRK:
        chol_tile_syrk(b[0], t->m, t->k, b[1]);
        break;
    case K_DGEMM:
        chol_tile_gemm(b[0], t->m, b[1], t->n, t->k, b[2]);
        break;
    case K_SPIN:
        spin(g, t, b);
        break;
    default:
        rc = -1;
    }
    if (worker >= 0 && worker < SG_MAX_WORKERS)
        busy[worker].s += bench_now() - t0;
    return rc;
}
