/* bench_runtime.h — what one runtime under test provides to the runtime
 * benchmark driver (main.c). The Tessera side (side_tessera.c) and each peer
 * (peer_starpu.c) fill one bench_side_t with the same functions, so the
 * driver runs every figure on both, one after the other, in one process.
 *
 * A side must never print, never exit, and never time anything but the
 * submission-to-completion span it reports; checking results is the
 * driver's job.
 */
#ifndef TESSERA_BENCH_RUNTIME_H
#define TESSERA_BENCH_RUNTIME_H

#include "bench/bench_util.h"
#include "tiles.h"

/* task_overhead cases */
typedef enum ovh_case {
    OVH_INDEPENDENT, /* empty tasks with no data */
    OVH_RW_CHAIN,    /* every task RW on one handle: a chain */
    OVH_R_SHARED,    /* every task R on one handle: all independent */
    OVH_NCASES
} ovh_case_t;

typedef struct bench_side {
    const char *name;
    /* Start the runtime with `workers` CPU workers and scheduling policy
     * `sched`; 0 or an error. Only one side runs at a time. */
    int (*start)(int workers, const char *sched);
    /* Stop it, freeing everything; 0 or an error. */
    int (*stop)(void);
    /* Submit ntasks empty tasks of case c and wait for all of them;
     * *seconds = first submission to end of wait. */
    int (*overhead)(ovh_case_t c, int ntasks, double *seconds);
    /* ntasks independent tasks, each spinning `us` microseconds. */
    int (*spin)(double us, int ntasks, double *seconds);
    /* c += a * b, one task per (i, j, k) tile product, each one
     * single-threaded BLAS call (elem 4: sgemm, 8: dgemm). */
    int (*gemm)(const tiled_matrix_t *a, const tiled_matrix_t *b,
                tiled_matrix_t *c, double *seconds);
    /* Tiled Cholesky of a (lower, in place) with the tasks and priorities
     * of examples/cholesky_tiles.h. */
    int (*potrf)(tiled_matrix_t *a, double *seconds);
    /* A line about the last failure. */
    const char *(*error)(void);
} bench_side_t;

extern const bench_side_t bench_tessera;
#ifdef BENCH_HAVE_STARPU
extern const bench_side_t bench_starpu;
#endif

/* The granularity floor (floor.c): ntasks independent tasks spinning `us`
 * microseconds handed by the calling thread to `workers` bare polling
 * threads, no runtime; *seconds = first hand-off to the last completion.
 * 0, or -1 when the threads or memory cannot be had. */
int bench_floor_spin(int workers, double us, int ntasks, double *seconds);

/* ---- shared by the sides (bench_common.c) ------------------------------- */

/* Busy-wait `us` microseconds on the monotonic clock. */
void bench_spin(double us);

/* c += a * b on one tile: a is m x k, b k x n, c m x n, column-major with
 * leading dimensions m, k, m; elem 4 (float) or 8 (double). */
void bench_tile_gemm(size_t elem, int m, int n, int k, const void *a,
                     const void *b, void *c);

#endif
