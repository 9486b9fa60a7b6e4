/* lab/graph.h — a task graph read from a file: the scheduling lab's one
 * in-memory form (docs/lab.md), whatever the file's format.
 *
 * A graph is its tasks in a valid sequential order (every predecessor of a
 * task comes before it), each with its accesses to data items (item, mode,
 * and through the item a size in bytes) and the predecessors it has beyond
 * what the accesses imply by the sequential-task-flow rules (explicit
 * dependencies: an STG edge, a StarPU DependsOn, a DOT edge without bytes).
 * Durations, flops and the recorded placement are kept where the source
 * gives them; a published or proven schedule bound where it has one.
 *
 * Readers: "tessera" (tessera-graph 1, runtime/record.c), "rec" (StarPU
 * tasks.rec), "dot" (DAGGEN / SimGrid attributes), "stg" (the Standard Task
 * Graph set), "wfcommons" (WfFormat JSON). Writers: "tessera", "rec".
 *
 * Must never: abort, or read past its input, on any bytes (a malformed file
 * is TSR_EINVAL with the file's name and line in the message); accept a
 * dependency cycle or a dependency on a task that does not exist; keep a
 * pointer into the caller's buffer. Uses the public API's codes only.
 */
#ifndef TSR_LAB_GRAPH_H
#define TSR_LAB_GRAPH_H

#include <tessera/tessera.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct tsr_lab_access {
    uint32_t data;              /* index into graph->data */
    int mode;                   /* TSR_R, TSR_W, TSR_RW, TSR_COMMUTE, TSR_REDUX, TSR_SCRATCH */
} tsr_lab_access_t;

typedef struct tsr_lab_data {
    uint64_t size;              /* bytes, >= 1 */
    char *name;                 /* the source's name for it (a StarPU handle
                                   address, a WfCommons file, "u->v" for a
                                   DOT edge); never NULL */
} tsr_lab_data_t;

/* What happens to a data item between tasks (a record's wont_use and
 * invalidate events): before task `before` is submitted. */
typedef struct tsr_lab_event {
    uint32_t before;            /* task index (ntasks: after the last) */
    uint32_t data;
    int kind;                   /* TSR_LAB_WONT_USE, TSR_LAB_INVALIDATE */
} tsr_lab_event_t;
enum { TSR_LAB_WONT_USE = 1, TSR_LAB_INVALIDATE = 2 };

typedef struct tsr_lab_task {
    char *name;                 /* its kind (codelet): tasks of one name share a
                                   performance model; never NULL */
    uint64_t id;                /* its id in the source file */
    double flops;               /* < 0: unknown */
    double seconds[TSR_DEVICE_KINDS]; /* duration on a device of each kind, in
                                   seconds (file units × time_unit_s); < 0:
                                   unknown (the kind cannot run it unless a
                                   rate model is used) */
    int priority;
    uint32_t access_off, naccess;  /* graph->access[access_off .. +naccess) */
    uint32_t dep_off, ndeps;       /* graph->dep[dep_off .. +ndeps): indices of
                                      earlier tasks it follows */
    /* its recorded run, where the source has one */
    int worker;                 /* -1: unknown */
    int device_kind;            /* TSR_DEVICE_…, -1: unknown */
    double start_s, end_s;      /* seconds on the source's clock; < 0 unknown */
} tsr_lab_task_t;

typedef struct tsr_lab_graph {
    char format[16];            /* the reader that made it */
    tsr_lab_task_t *task;
    size_t ntasks;
    tsr_lab_data_t *data;
    size_t ndata;
    tsr_lab_access_t *access;
    size_t naccess;
    uint32_t *dep;
    size_t ndeps;
    tsr_lab_event_t *event;     /* in order of `before` */
    size_t nevents;
    /* a schedule bound the source gives (STG's optimal schedules): the best
     * makespan on `bound_procs` identical processors, in the graph's time
     * unit; bound_procs 0: none */
    int bound_procs;
    double bound_makespan;
    double time_unit_s;         /* seconds per unit of the file's durations
                                   (STG: 1e-3, a unit is a millisecond;
                                   rec: its times are in ms, 1e-3) */
} tsr_lab_graph_t;

/* Read a graph. format: one of the names above, or NULL to tell it from the
 * file's first bytes and name. TSR_EINVAL (malformed: the message names
 * the file and line), TSR_EIO (unreadable), TSR_ENOMEM; the message goes to
 * err. */
int tsr_lab_read(const char *path, const char *format, tsr_lab_graph_t **out, char *err,
                 size_t errlen);
/* The same from memory (len bytes, no NUL needed); `what` names it in
 * messages. */
int tsr_lab_read_buffer(const char *buf, size_t len, const char *format, const char *what,
                        tsr_lab_graph_t **out, char *err, size_t errlen);
/* Write g in a writer's format ("tessera" or "rec"). TSR_EIO when a write
 * fails. */
int tsr_lab_write(const tsr_lab_graph_t *g, const char *format, FILE *f);
void tsr_lab_free(tsr_lab_graph_t *g);

/* The critical path (longest path, durations of device kind `kind`, tasks
 * without one counting 0) and the total work of g, in seconds. kind < 0:
 * each task's shortest duration on any kind (bounds for any placement). */
double tsr_lab_critical_path(const tsr_lab_graph_t *g, int kind);
double tsr_lab_total_work(const tsr_lab_graph_t *g, int kind);

#endif
