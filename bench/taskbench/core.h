/* core.h — our own C implementation of the Task Bench model (Slaughter et
 * al., SC20): a task graph of max_width points by `timesteps` timesteps,
 * where the task at (timestep t, point i) reads the outputs of its
 * dependencies at timestep t-1 (a pattern) and runs a kernel.
 *
 * The names follow Task Bench's C API (task_graph_t, offset/width at a
 * timestep, dependence sets, dependencies as inclusive intervals, reverse
 * dependencies, execute_point) so that a backend reads like one written for
 * Task Bench; the code is ours. Differences from Task Bench are named where
 * they are (random_nearest's hash, the kernels' exact loops, the scratch
 * buffer being per worker, the digest in every output record).
 *
 * Every output is a run of records {graph, timestep, point, digest}. The
 * digest hashes (timestep, point) with the digests of the task's inputs in
 * dependency order, so a final output depends on the whole history that led
 * to it: equal final outputs mean equal graphs, run in a valid order.
 * tb_execute_point checks that each input came from exactly the expected
 * (graph, timestep-1, dependency) and fails loudly (stderr, nonzero return,
 * a failure counter) otherwise.
 */
#ifndef TB_CORE_H
#define TB_CORE_H

#include <stddef.h>
#include <stdint.h>

typedef enum tb_dependence {
    TB_TRIVIAL,             /* no dependencies */
    TB_NO_COMM,             /* i <- i */
    TB_STENCIL_1D,          /* i <- i-1, i, i+1 (clipped at the edges) */
    TB_STENCIL_1D_PERIODIC, /* i <- i-1, i, i+1 (wrapping around) */
    TB_DOM,                 /* wavefront: i <- i-1, i; width grows then shrinks */
    TB_TREE,                /* i <- i/2; width doubles each timestep */
    TB_FFT,                 /* butterfly: i <- i - 2^d, i, i + 2^d */
    TB_ALL_TO_ALL,          /* i <- every point */
    TB_NEAREST,             /* i <- the `radix` points around i */
    TB_SPREAD,              /* i <- `radix` points spread over the width */
    TB_RANDOM_NEAREST,      /* nearest, each edge kept with probability
                               fraction_connected (deterministic hash) */
    TB_NDEPENDENCE
} tb_dependence_t;

typedef enum tb_kernel_type {
    TB_EMPTY,         /* nothing */
    TB_BUSY_WAIT,     /* spin `iterations` ns on CLOCK_MONOTONIC */
    TB_COMPUTE_BOUND, /* `iterations` x 64 dependent FMA chains: 128 flops */
    TB_MEMORY_BOUND,  /* `iterations` copies of one sample of the scratch
                         buffer's first half onto its second half */
    TB_NKERNEL
} tb_kernel_type_t;

/* Floating-point operations per iteration of TB_COMPUTE_BOUND: 64 lanes,
 * each one multiply-add (a = a * m + c: 2 flops) per iteration. */
#define TB_COMPUTE_FLOPS_PER_ITER 128.0

typedef struct tb_kernel {
    tb_kernel_type_t type;
    long iterations;
    int samples;           /* TB_MEMORY_BOUND: slices of the scratch buffer;
                              one iteration copies scratch_bytes/samples/2
                              bytes (reads as many as it writes) */
} tb_kernel_t;

/* An inclusive interval of points [start, end]. */
typedef struct tb_interval {
    long start, end;
} tb_interval_t;

typedef struct task_graph {
    long graph_index;
    long timesteps;
    long max_width;
    tb_dependence_t dependence;
    long radix;                 /* nearest, spread, random_nearest */
    long period;                /* dependence sets of spread, random_nearest */
    double fraction_connected;  /* random_nearest */
    tb_kernel_t kernel;
    size_t output_bytes_per_task;  /* >= sizeof(tb_record_t) */
    size_t scratch_bytes_per_task; /* TB_MEMORY_BOUND (per worker here) */
} task_graph_t;

/* One record of an output buffer (the buffer holds as many whole records
 * as fit; every one is the same). */
typedef struct tb_record {
    int64_t graph, timestep, point;
    uint64_t digest;
} tb_record_t;

/* Task Bench's defaults: 4 x 4, trivial, radix 3, period 3 where needed,
 * fraction 0.25, empty kernel, one record per output. */
void tb_graph_init(task_graph_t *g);
/* 0 when well formed; else -1 and a message in err. */
int tb_graph_check(const task_graph_t *g, char *err, size_t errlen);

const char *tb_dependence_name(tb_dependence_t d);
const char *tb_kernel_name(tb_kernel_type_t k);
/* -1 for an unknown name */
int tb_dependence_parse(const char *name);
int tb_kernel_parse(const char *name);

long task_graph_offset_at_timestep(const task_graph_t *g, long timestep);
long task_graph_width_at_timestep(const task_graph_t *g, long timestep);
long task_graph_max_dependence_sets(const task_graph_t *g);
long task_graph_timestep_period(const task_graph_t *g);
long task_graph_dependence_set_at_timestep(const task_graph_t *g, long timestep);
/* At most this many intervals come back from the two functions below. */
long task_graph_max_intervals(const task_graph_t *g);
/* The points of timestep t-1 that point reads at a timestep of dependence
 * set dset, as intervals (before clipping to timestep t-1's active
 * points); returns their count. out holds task_graph_max_intervals(). */
long task_graph_dependencies(const task_graph_t *g, long dset, long point,
                             tb_interval_t *out);
/* The points of timestep t+1 that read point (the mirror image). */
long task_graph_reverse_dependencies(const task_graph_t *g, long dset, long point,
                                     tb_interval_t *out);

/* The inputs of the task (t, point) in order: the dependencies that are
 * active at timestep t-1. out holds max_width entries; returns the count. */
long tb_task_inputs(const task_graph_t *g, long timestep, long point, long *out);
/* The largest input count of any task of the graph. */
long tb_max_inputs(const task_graph_t *g);
/* Tasks and input edges of the whole graph. */
void tb_graph_counts(const task_graph_t *g, long *tasks, long *edges);

/* Run the task (timestep, point): validate every input, write the output
 * records, run the kernel (scratch: scratch_bytes_per_task bytes, NULL for
 * the kernels that need none). Returns 0, or -1 after printing why. */
int task_graph_execute_point(const task_graph_t *g, long timestep, long point,
                             char *output, size_t output_bytes,
                             const char *const *inputs, const size_t *input_bytes,
                             size_t n_inputs, char *scratch, size_t scratch_bytes);

/* Counters over every tb_execute_point call of the process. */
void tb_counters_reset(void);
long tb_counter_tasks(void);       /* tasks executed */
long tb_counter_inputs(void);      /* inputs validated */
long tb_counter_failures(void);    /* tasks whose validation failed */

/* The kernel alone (for calibrating); the result keeps it from being
 * optimised away. */
double tb_kernel_run(const tb_kernel_t *k, long timestep, char *scratch,
                     size_t scratch_bytes);

/* Fill a scratch buffer before its first use. */
void tb_scratch_prepare(char *scratch, size_t bytes);

#endif
