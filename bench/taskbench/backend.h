/* backend.h — what a Task Bench system offers the driver (main.c) and the
 * test: start a runtime once, run graphs on it, stop it.
 *
 * A run registers one buffer per (field, point), field = timestep % fields
 * (fields = timesteps, the default, gives every task its own output, as
 * Task Bench's StarPU backend does; fields = 2 reuses buffers by timestep
 * parity, adding write-after-read edges), submits every task with R on its
 * inputs and W on its output, and waits. Only the submission and the wait
 * are timed (registration is not, as in Task Bench).
 */
#ifndef TB_BACKEND_H
#define TB_BACKEND_H

#include "core.h"

typedef struct tb_opts {
    int ncpu;          /* worker cores */
    const char *sched; /* scheduler name; NULL: the system's default */
    long fields;       /* output buffers per point; 0: timesteps */
} tb_opts_t;

typedef struct tb_result {
    double wall_s;     /* submission to the end of the last task */
    long tasks;
    long edges;
    char err[512];     /* why a run failed */
} tb_result_t;

typedef struct tb_system {
    const char *name;
    int (*start)(const tb_opts_t *o, char *err, size_t errlen);
    /* Run g; final (max_width records, may be NULL) receives, for each
     * point, the first record of its output at the last timestep where it
     * was active (zeros where never). 0, or -1 with res->err set. */
    int (*run)(const task_graph_t *g, const tb_opts_t *o, tb_result_t *res,
               tb_record_t *final);
    void (*stop)(void);
    const char *(*sched_name)(void); /* the scheduler actually in use */
} tb_system_t;

extern const tb_system_t tb_serial;
extern const tb_system_t tb_tessera;
#ifdef TB_HAVE_STARPU
extern const tb_system_t tb_starpu;
#endif

/* Shared by the backends: buffers, per-worker scratch, the final records. */
typedef struct tb_buffers {
    long fields, width;
    size_t bytes;      /* output_bytes_per_task */
    size_t stride;     /* bytes rounded up to a cache line */
    char *data;        /* fields x width x bytes */
} tb_buffers_t;

int tb_buffers_alloc(tb_buffers_t *b, const task_graph_t *g, long fields);
void tb_buffers_free(tb_buffers_t *b);
static inline char *tb_buffer(const tb_buffers_t *b, long t, long p)
{
    return b->data + ((size_t)(t % b->fields) * (size_t)b->width + (size_t)p) * b->stride;
}
/* The last active timestep of point p (-1: never active). */
long tb_last_timestep(const task_graph_t *g, long p);
void tb_collect_final(const task_graph_t *g, const tb_buffers_t *b, tb_record_t *final);

/* Per-worker scratch buffers of the memory-bound kernel (prepared). */
int tb_scratch_alloc(const task_graph_t *g, int nworkers);
char *tb_scratch_of(int worker);
void tb_scratch_free(void);

/* The fields a run uses. */
long tb_fields(const task_graph_t *g, const tb_opts_t *o);

#endif
