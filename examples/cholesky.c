/* cholesky.c — tessera-cholesky: factor an SPD matrix with tiled Cholesky
 * tasks on the Tessera runtime, check the factor against LAPACKE_dpotrf and
 * compare the times.
 *
 *   tessera-cholesky [-n N] [-b TILE] [-s SCHED] [-w WORKERS]
 *
 * Each tile task is one single-threaded OpenBLAS/LAPACKE call; the
 * parallelism comes from the runtime running independent tile tasks on its
 * workers. The reference is one LAPACKE_dpotrf call with OpenBLAS threads.
 * Exit status 0 only if the factor matches the reference.
 */
#include <cblas.h>
#include <lapacke.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "cholesky_tiles.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tessera-cholesky [-n N] [-b TILE] [-s SCHED] [-w WORKERS]\n"
            "  -n N        matrix order (default 4096)\n"
            "  -b TILE     tile size (default 256)\n"
            "  -s SCHED    Tessera scheduling policy (default prio)\n"
            "  -w WORKERS  CPU workers and reference threads (default 2)\n");
}

static int parse_int(const char *s, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v <= 0 || v > 1000000)
        return -1;
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    int n = 4096, b = 256, workers = 2;
    const char *sched = "prio";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        int bad = 0;
        if (!strcmp(a, "-n"))
            bad = parse_int(v, &n);
        else if (!strcmp(a, "-b"))
            bad = parse_int(v, &b);
        else if (!strcmp(a, "-w"))
            bad = parse_int(v, &workers);
        else if (!strcmp(a, "-s"))
            sched = v;
        else
            bad = 1;
        if (bad) {
            usage(stderr);
            return 2;
        }
    }

    size_t nn = (size_t)n * (size_t)n;
    double *full = malloc(nn * sizeof *full);
    double *ref = malloc(nn * sizeof *ref);
    tiled_matrix_t a;
    if (!full || !ref || tm_alloc(&a, n, b, sizeof(double)) != 0) {
        fprintf(stderr, "tessera-cholesky: out of memory for N=%d\n", n);
        return 1;
    }
    chol_spd_matrix(full, n, 1);
    memcpy(ref, full, nn * sizeof *ref);
    tm_from_full(&a, full);
    free(full);

    /* Tile tasks run concurrently on the workers: each BLAS call must stay
     * on its own thread. */
    openblas_set_num_threads(1);

    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = workers;
    cfg.sched = sched;
    int rc = tsr_init(&cfg);
    if (rc != TSR_OK) {
        fprintf(stderr, "tessera-cholesky: tsr_init: %s (%s)\n",
                tsr_strerror(rc), tsr_error_message());
        return 1;
    }
    int nworkers = tsr_worker_count();
    double t_tsr = 0.0;
    rc = chol_factor_tessera(&a, &t_tsr);
    if (rc != TSR_OK) {
        fprintf(stderr, "tessera-cholesky: factorization: %s (%s)\n",
                tsr_strerror(rc), tsr_error_message());
        tsr_shutdown();
        return 1;
    }
    rc = tsr_shutdown();
    if (rc != TSR_OK) {
        fprintf(stderr, "tessera-cholesky: tsr_shutdown: %s\n",
                tsr_strerror(rc));
        return 1;
    }

    /* The reference: one multithreaded LAPACK call on the same matrix. A
     * tiny warm-up call starts OpenBLAS's threads outside the timing. */
    openblas_set_num_threads(workers);
    double warm[4] = {4.0, 1.0, 1.0, 4.0};
    LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', 2, warm, 2);
    double t0 = tm_now();
    int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', n, ref, n);
    double t_ref = tm_now() - t0;
    if (info != 0) {
        fprintf(stderr, "tessera-cholesky: LAPACKE_dpotrf info=%d\n", info);
        return 1;
    }

    double err = chol_rel_error(&a, ref);
    int ok = err <= CHOL_TOLERANCE;
    double gf = chol_flops(n) * 1e-9;
    printf("tessera-cholesky: N=%d tile=%d (%dx%d tiles) sched=%s workers=%d\n",
           n, a.b, a.nt, a.nt, sched, nworkers);
    printf("  tessera tiled   %8.3f s  %7.1f GFLOP/s\n", t_tsr, gf / t_tsr);
    printf("  LAPACKE_dpotrf  %8.3f s  %7.1f GFLOP/s  (%d OpenBLAS threads)\n",
           t_ref, gf / t_ref, workers);
    printf("  relative error vs LAPACKE: %.3e (%s, tolerance %.0e)\n", err,
           ok ? "ok" : "WRONG", CHOL_TOLERANCE);

    tm_free(&a);
    free(ref);
    return ok ? 0 : 1;
}
