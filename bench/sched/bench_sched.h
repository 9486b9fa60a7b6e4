/* bench_sched.h — the scheduling-policy benchmark (tessera-bench-sched).
 *
 * A task graph is generated once as a plain description (graph_t: tasks,
 * each a kernel, a cost or tile sizes, a priority and a list of handle
 * accesses) over one arena of host memory, then replayed, in the same
 * submission order, into each runtime under test (side_tessera.c,
 * peer_starpu.c). Both sides run the same kernels through sg_exec(), which
 * also measures the time each worker spent inside kernels. A sequential
 * replay of the same graph on the same tiles gives the reference every run
 * is checked against.
 *
 * Runtime-neutral: this header and graph.c / kernels.c must never call
 * Tessera or StarPU.
 */
#ifndef TESSERA_BENCH_SCHED_H
#define TESSERA_BENCH_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "bench/bench_util.h"

/* ---- graph description ----------------------------------------------- */

enum { SG_R = 1, SG_W = 2, SG_RW = 3 };           /* access modes */
enum { SG_F32, SG_F64, SG_U64 };                   /* element type of a handle */

/* Kernels. SPIN busy-waits the task's cost, then writes a hash of the task
 * id and of the first word of every buffer it reads into the first word of
 * every buffer it writes: a wrong order of execution changes the result. */
typedef enum sg_kernel {
    K_SGEMM,  /* C += A B, float tiles (R, R, RW) */
    K_DPOTRF, /* Cholesky tile kernels, double (examples/cholesky_tiles.h) */
    K_DTRSM,
    K_DSYRK,
    K_DGEMM,
    K_SPIN,
    K_NKERNELS
} sg_kernel_t;

extern const char *const sg_kernel_names[K_NKERNELS];

#define SG_MAX_BUFFERS 16 /* = TSR_MAX_BUFFERS */

typedef struct sg_access {
    int handle;
    int mode; /* SG_R, SG_W, SG_RW */
} sg_access_t;

typedef struct sg_task {
    int id;
    int kernel;     /* sg_kernel_t */
    int nbuf;
    int acc0;       /* first access in graph_t.acc */
    int prio;       /* larger runs first; 0 where the graph has none */
    int m, n, k;    /* tile dimensions (BLAS kernels) */
    double cost_us; /* SPIN: how long it spins */
} sg_task_t;

typedef struct graph {
    char name[16];    /* gemm, cholesky, random, forkjoin */
    char params[160];  /* its sizes, for the table header */
    int ntasks, nacc, nhandles;
    sg_task_t *tasks;
    sg_access_t *acc;
    size_t *hsize, *hoff; /* bytes and offset in the arena, per handle */
    int *htype;           /* SG_F32 / SG_F64 / SG_U64 */
    unsigned char *hwritten; /* 1: some task writes it (it is checked) */
    unsigned char *data;  /* the buffers the runtimes work on */
    unsigned char *init;  /* their contents before a run */
    unsigned char *ref;   /* after the sequential replay */
    size_t bytes;
    int nedges;           /* dependencies the access modes imply */
    int *pred_off, *preds; /* task t waits for preds[pred_off[t] …
                              pred_off[t+1]-1] (all lower ids) */
    double flops;         /* of the BLAS kernels; 0 for synthetic graphs */
    double seq_s;         /* sequential replay: sum of the kernel times */
    double cp_s;          /* critical path with the replay's kernel times */
    double tol;           /* largest error accepted, relative to max |ref| */
} graph_t;

typedef struct graph_params {
    int gemm_n, gemm_b;             /* order, tile */
    int chol_n, chol_b;
    int rnd_width, rnd_depth, rnd_edges;
    double rnd_cmin_us, rnd_spread; /* costs log-uniform in [c, c*spread] */
    size_t rnd_bytes;               /* bytes per handle */
    int fj_children, fj_iters;
    double fj_cmin_us, fj_spread;
    size_t fj_bytes;
    uint64_t seed;
} graph_params_t;

void graph_params_default(graph_params_t *p, int quick);

/* Build one graph by name; 0, or -1 with a message in err (unknown name,
 * out of memory). */
int graph_build(graph_t *g, const char *name, const graph_params_t *p,
                char *err, size_t errlen);
void graph_free(graph_t *g);

/* Restore the buffers to their initial contents. */
void graph_reset(graph_t *g);
/* Replay the graph sequentially on the calling thread (BLAS on one thread),
 * keep the result as the reference, and measure seq_s and cp_s. 0, or -1
 * if a kernel failed (message in err). */
int graph_reference(graph_t *g, char *err, size_t errlen);
/* Compare every written handle with the reference: *maxerr gets the
 * largest absolute difference (for SG_U64 handles: the count of wrong
 * first words). Returns 1 when the result is right. */
int graph_check(const graph_t *g, double *maxerr);

static inline void *graph_buf(const graph_t *g, int h)
{
    return g->data + g->hoff[h];
}

/* ---- kernels (kernels.c) ------------------------------------------------ */

#define SG_MAX_WORKERS 64

/* Run task t of g on these buffers (in its access order) as worker
 * `worker` (0 … SG_MAX_WORKERS-1): the time inside the kernel is added to
 * that worker's busy counter. Returns 0, or nonzero if the kernel failed
 * (a tile that is not positive definite). */
int sg_exec(const graph_t *g, const sg_task_t *t, void **bufs, int worker);
/* Busy counters: zero them before a run, sum them after. */
void sg_busy_reset(void);
double sg_busy_sum(void);
/* Floating-point operations of one task (0 for SPIN). */
double sg_task_flops(const sg_task_t *t);

/* ---- the runtimes under test -------------------------------------------- */

typedef struct sg_platform {
    const char *name; /* "cpu", "cpu+sim" */
    int ncpu;         /* CPU workers */
    int nsim;         /* simulated accelerators (Tessera only) */
    double sim_bandwidth, sim_latency; /* bytes/s, s */
    size_t sim_mem;   /* bytes */
} sg_platform_t;

/* Bytes each handle is registered with in the empty replays (at most):
 * the empty kernels touch no data, and so their runs' copies cost the
 * latency of a copy, not its bytes (docs/benchmarks.md, sched_us). */
#define SG_DATAFREE_BYTES 8

typedef struct sg_result {
    double makespan_s; /* first submission to the end of the wait, on the
                          runtime's clock (virtual under simulation) */
    double busy_s;     /* sum over workers of the time inside kernels */
    int nworkers;
    uint64_t moved;    /* bytes copied between different memory nodes,
                          write-backs at unregistration included */
    int simulated;     /* the runtime ran in virtual time */
    uint64_t copies;   /* copies into non-host nodes (fetches), 0 if unknown */
    double wait_data_s; /* sum over workers of the time with nothing
                           runnable, waiting for data (0 if unknown) */
} sg_result_t;

typedef struct sg_side {
    const char *name;
    /* Start with this platform and policy; model_dir: where performance
     * models persist. 0, or nonzero with a message (error()). */
    int (*start)(const sg_platform_t *p, const char *policy,
                 const char *model_dir);
    /* Register g's buffers, submit every task in order (empty: kernels that
     * do nothing, under other codelet names, on handles of at most
     * SG_DATAFREE_BYTES), wait, unregister. */
    int (*run)(const graph_t *g, int empty, sg_result_t *out);
    int (*stop)(void);
    const char *(*error)(void);
} sg_side_t;

extern const sg_side_t sg_tessera;
#ifdef BENCH_HAVE_STARPU
extern const sg_side_t sg_starpu;
#endif

#endif
