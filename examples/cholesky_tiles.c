/* cholesky_tiles.c — see cholesky_tiles.h. */
#include "cholesky_tiles.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include <tessera/tessera.h>

/* ---- tile kernels ------------------------------------------------------- */

int chol_tile_potrf(double *akk, int n)
{
    /* the _work variant skips LAPACKE's O(n^2) NaN scan of the input */
    return (int)LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'L', n, akk, n);
}

void chol_tile_trsm(const double *lkk, int n, double *aik, int m)
{
    cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans,
                CblasNonUnit, m, n, 1.0, lkk, n, aik, m);
}

void chol_tile_syrk(const double *ajk, int m, int k, double *ajj)
{
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, m, k, -1.0, ajk, m,
                1.0, ajj, m);
}

void chol_tile_gemm(const double *aik, int m, const double *ajk, int n, int k,
                    double *aij)
{
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, m, n, k, -1.0, aik,
                m, ajk, n, 1.0, aij, m);
}

double chol_flops(int n)
{
    double d = (double)n;
    return d * d * d / 3.0;
}

/* ---- test matrix and check ---------------------------------------------- */

/* splitmix64: a value per (i, j) so the matrix does not depend on the order
 * it is filled in. */
static double entry(uint64_t i, uint64_t j, unsigned seed)
{
    uint64_t z = (i << 32 | j) + 0x9e3779b97f4a7c15ULL * ((uint64_t)seed + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53 - 0.5;
}

void chol_spd_matrix(double *a, int n, unsigned seed)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++) {
            int lo = i < j ? i : j, hi = i < j ? j : i;
            double v = entry((uint64_t)lo, (uint64_t)hi, seed);
            if (i == j)
                v += (double)n;
            a[(size_t)i + (size_t)j * (size_t)n] = v;
        }
}

double chol_rel_error(const tiled_matrix_t *l, const double *l_ref)
{
    double diff = 0.0, ref = 0.0;
    size_t n = (size_t)l->n;
    for (int tj = 0; tj < l->nt; tj++)
        for (int ti = tj; ti < l->nt; ti++) {
            const double *t = tm_tile(l, ti, tj);
            int rows = tm_dim(l, ti), cols = tm_dim(l, tj);
            for (int c = 0; c < cols; c++)
                for (int r = 0; r < rows; r++) {
                    size_t gi = (size_t)ti * (size_t)l->b + (size_t)r;
                    size_t gj = (size_t)tj * (size_t)l->b + (size_t)c;
                    if (gi < gj)
                        continue; /* above the diagonal of a diagonal tile */
                    double x = t[(size_t)r + (size_t)c * (size_t)rows];
                    double y = l_ref[gi + gj * n];
                    diff += (x - y) * (x - y);
                    ref += y * y;
                }
        }
    return ref > 0.0 ? sqrt(diff / ref) : sqrt(diff);
}

/* ---- Tessera codelets ---------------------------------------------------- */

/* The argument block of every Cholesky tile task: the tile dimensions. */
typedef struct chol_args {
    int m, n, k;
} chol_args_t;

static int potrf_cpu(void **buf, const void *args, const tsr_exec_t *exec)
{
    (void)exec;
    const chol_args_t *a = args;
    /* a nonzero info (not positive definite) fails the task */
    return chol_tile_potrf(buf[0], a->n);
}

static int trsm_cpu(void **buf, const void *args, const tsr_exec_t *exec)
{
    (void)exec;
    const chol_args_t *a = args;
    chol_tile_trsm(buf[0], a->n, buf[1], a->m);
    return 0;
}

static int syrk_cpu(void **buf, const void *args, const tsr_exec_t *exec)
{
    (void)exec;
    const chol_args_t *a = args;
    chol_tile_syrk(buf[0], a->m, a->k, buf[1]);
    return 0;
}

static int gemm_cpu(void **buf, const void *args, const tsr_exec_t *exec)
{
    (void)exec;
    const chol_args_t *a = args;
    chol_tile_gemm(buf[0], a->m, buf[1], a->n, a->k, buf[2]);
    return 0;
}

static double potrf_flops(const void *args, const size_t *sizes)
{
    (void)sizes;
    const chol_args_t *a = args;
    return chol_flops(a->n);
}

static double trsm_flops(const void *args, const size_t *sizes)
{
    (void)sizes;
    const chol_args_t *a = args;
    return (double)a->m * a->n * a->n;
}

static double syrk_flops(const void *args, const size_t *sizes)
{
    (void)sizes;
    const chol_args_t *a = args;
    return (double)a->m * a->m * a->k;
}

static double gemm_flops(const void *args, const size_t *sizes)
{
    (void)sizes;
    const chol_args_t *a = args;
    return 2.0 * a->m * a->n * a->k;
}

static const tsr_codelet_t potrf_cl = {
    .name = "dpotrf", .impl = {[TSR_DEVICE_CPU] = potrf_cpu},
    .nbuffers = 1, .flops = potrf_flops};
static const tsr_codelet_t trsm_cl = {
    .name = "dtrsm", .impl = {[TSR_DEVICE_CPU] = trsm_cpu},
    .nbuffers = 2, .flops = trsm_flops};
static const tsr_codelet_t syrk_cl = {
    .name = "dsyrk", .impl = {[TSR_DEVICE_CPU] = syrk_cpu},
    .nbuffers = 2, .flops = syrk_flops};
static const tsr_codelet_t gemm_cl = {
    .name = "dgemm", .impl = {[TSR_DEVICE_CPU] = gemm_cpu},
    .nbuffers = 3, .flops = gemm_flops};

/* Submit one task; its accesses and arguments are copied by tsr_submit. */
static int submit(const tsr_codelet_t *cl, const tsr_access_t *acc,
                  chol_args_t args, int prio)
{
    tsr_task_desc_t d = {
        .codelet = cl,
        .nbuffers = cl->nbuffers,
        .buffers = acc,
        .args = &args,
        .args_size = sizeof args,
        .priority = prio,
    };
    return tsr_submit(&d, NULL);
}

/* The right-looking tiled algorithm, written as if sequential: the runtime
 * derives the DAG from the access modes. */
static int submit_all(const tiled_matrix_t *a, tsr_handle_t *h)
{
    int nt = a->nt;
#define H(i, j) h[(size_t)(i) + (size_t)(j) * (size_t)nt]
    for (int k = 0; k < nt; k++) {
        int nk = tm_dim(a, k);
        int rc = submit(&potrf_cl, (tsr_access_t[]){{H(k, k), TSR_RW}},
                        (chol_args_t){nk, nk, nk}, chol_prio_potrf(nt, k));
        if (rc != TSR_OK)
            return rc;
        for (int i = k + 1; i < nt; i++) {
            rc = submit(&trsm_cl,
                        (tsr_access_t[]){{H(k, k), TSR_R}, {H(i, k), TSR_RW}},
                        (chol_args_t){tm_dim(a, i), nk, nk},
                        chol_prio_trsm(nt, k, i));
            if (rc != TSR_OK)
                return rc;
        }
        for (int j = k + 1; j < nt; j++) {
            int nj = tm_dim(a, j);
            rc = submit(&syrk_cl,
                        (tsr_access_t[]){{H(j, k), TSR_R}, {H(j, j), TSR_RW}},
                        (chol_args_t){nj, nj, nk}, chol_prio_syrk(nt, k, j));
            if (rc != TSR_OK)
                return rc;
            for (int i = j + 1; i < nt; i++) {
                rc = submit(&gemm_cl,
                            (tsr_access_t[]){{H(i, k), TSR_R},
                                             {H(j, k), TSR_R},
                                             {H(i, j), TSR_RW}},
                            (chol_args_t){tm_dim(a, i), nj, nk},
                            chol_prio_gemm(nt, k, i, j));
                if (rc != TSR_OK)
                    return rc;
            }
        }
    }
#undef H
    return TSR_OK;
}

int chol_factor_tessera(tiled_matrix_t *a, double *seconds)
{
    if (!a || a->elem != sizeof(double))
        return TSR_EINVAL;
    int nt = a->nt;
    tsr_handle_t *h = calloc((size_t)nt * (size_t)nt, sizeof *h);
    if (!h)
        return TSR_ENOMEM;
    int rc = TSR_OK;
    for (int j = 0; j < nt && rc == TSR_OK; j++)
        for (int i = j; i < nt && rc == TSR_OK; i++)
            rc = tsr_handle_register(&h[(size_t)i + (size_t)j * (size_t)nt],
                                     tm_tile(a, i, j), tm_tile_bytes(a, i, j));
    double t0 = tm_now();
    if (rc == TSR_OK)
        rc = submit_all(a, h);
    /* wait even after a failed submission: tasks already submitted run */
    int wrc = tsr_wait_all();
    if (seconds)
        *seconds = tm_now() - t0;
    if (rc == TSR_OK)
        rc = wrc;
    for (size_t t = 0; t < (size_t)nt * (size_t)nt; t++)
        if (h[t]) {
            int urc = tsr_handle_unregister(h[t]);
            if (rc == TSR_OK)
                rc = urc;
        }
    free(h);
    return rc;
}
