/* lab/replay.h — run a task graph read from a file (lab/graph.h) through
 * the runtime that is running: its real dependency inference, directory
 * and policy, on the simulated node of a platform file or on this machine.
 *
 * Every data item becomes a handle the runtime allocates (phantom under
 * simulation), every task a task of a codelet named as the file names it
 * (tasks of one name share a model), submitted in the graph's order with
 * its accesses, its priority and its explicit dependencies; wont_use and
 * invalidate events are replayed between the tasks they fall between.
 *
 * Durations: from the file (the codelet's own model, tsr_codelet_t.seconds,
 * so the policies read exactly what the simulation charges), from the
 * platform's rate model on the task's flops, or from the performance models
 * of the model directory. On this machine the tasks run synthetic kernels
 * of their durations, on CPU workers: a busy wait, or a memory-bound pass
 * over their buffers repeated for that long.
 *
 * A task with more accesses than TSR_MAX_BUFFERS keeps its writes first,
 * then as many reads as fit; each read left over becomes an explicit
 * dependency on that item's last writer (counted in the result: its bytes
 * do not move).
 *
 * Must never: start or stop the runtime (the caller does), leave a handle
 * registered or a task reference held when it returns, abort on a graph
 * (every failure is a TSR_E… code with a message).
 */
#ifndef TSR_LAB_REPLAY_H
#define TSR_LAB_REPLAY_H

#include "lab/graph.h"

/* Where durations come from. */
enum {
    TSR_LAB_DURATIONS_FILE = 0,   /* the file's, per device kind; a codelet none of
                                     whose tasks has one falls back to the rates */
    TSR_LAB_DURATIONS_RATES = 1,  /* the platform's rate model on the flops */
    TSR_LAB_DURATIONS_MODELS = 2, /* the performance models (history) */
};

/* What a task does on the real machine. */
enum { TSR_LAB_KERNEL_BUSY = 0, TSR_LAB_KERNEL_MEMORY = 1 };

typedef struct tsr_lab_replay_opts {
    int durations;   /* TSR_LAB_DURATIONS_… */
    double scale;    /* every duration × scale; 0: 1 */
    int real;        /* 1: the runtime runs this machine (synthetic kernels on
                        CPU workers); 0: it simulates a platform */
    int kernel;      /* TSR_LAB_KERNEL_…, real runs */
} tsr_lab_replay_opts_t;

typedef struct tsr_lab_replay_result {
    double makespan_s;       /* first submission to last completion, on the
                                runtime's clock (virtual under simulation) */
    double wall_s;           /* the same on the wall clock */
    size_t tasks;
    size_t folded;           /* reads beyond TSR_MAX_BUFFERS replayed as
                                dependencies */
    uint64_t bytes_moved;    /* copied between memory nodes */
    double busy_s[TSR_DEVICE_KINDS]; /* summed over the workers of each kind */
    /* bounds on any schedule, from the durations the runtime charged (each
     * task's shortest on a kind that has workers and can run it; no
     * transfers, no overheads): the longest path, and the work over the
     * workers */
    double critical_path_s, work_per_worker_s;
} tsr_lab_replay_result_t;

/* Replay g on the running runtime. TSR_ETASK if a task failed (a node too
 * small for a task's data), TSR_ENODEV if a task has no worker that can run
 * it, TSR_ENOMEM; the message in err. */
int tsr_lab_replay(const tsr_lab_graph_t *g, const tsr_lab_replay_opts_t *o,
                   tsr_lab_replay_result_t *r, char *err, size_t errlen);

#endif
