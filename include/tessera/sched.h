/* sched.h — the scheduler interface: what a scheduling policy implements and
 * what it may call. Built-in policies and plug-ins use exactly this header.
 *
 * A policy must never call back into submission or waiting (tsr_submit,
 * tsr_wait_*), never block in push or pop, and never run a task itself: it
 * only decides which worker takes which ready task. The contract (which
 * callbacks run concurrently, when workers are woken) is in
 * docs/scheduler-interface.md.
 */
#ifndef TESSERA_SCHED_H
#define TESSERA_SCHED_H

#include <tessera/export.h>
#include <tessera/tessera.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The policy instance a callback works on. */
typedef struct tsr_sched tsr_sched_t;

/* Per-task fields reserved for the policy: an intrusive link pair, a pointer
 * and a number, so queues need no allocation per task. The runtime zeroes
 * them at submission and never reads them. */
typedef struct tsr_sched_fields {
    tsr_task_t next, prev;
    void *data;
    double key;
    int worker;
} tsr_sched_fields_t;

typedef struct tsr_sched_policy {
    const char *name;
    const char *description;
    /* Create the policy state (tsr_sched_set_data). Workers are not running
     * yet. Returns TSR_OK or an error code. */
    int (*init)(tsr_sched_t *s);
    /* Free the state. Every queue is empty; workers have stopped. */
    void (*deinit)(tsr_sched_t *s);
    /* Optional: a task was submitted (it may not be ready). Called from the
     * submitting thread, in submission order. */
    void (*submitted)(tsr_sched_t *s, tsr_task_t t);
    /* A task is ready. Called from any thread, concurrently. Return the
     * worker that should take it (it will be woken), or -1 if any may. */
    int (*push)(tsr_sched_t *s, tsr_task_t t);
    /* Worker `worker` asks for a task; NULL if none. Called concurrently by
     * all workers; must be cheap when there is nothing to do. */
    tsr_task_t (*pop)(tsr_sched_t *s, int worker);
    /* Optional: the task ran on `worker` and is complete. */
    void (*done)(tsr_sched_t *s, tsr_task_t t, int worker);
    /* TSR_SCHED_… flags. */
    unsigned flags;
} tsr_sched_policy_t;

enum {
    /* The policy reads performance models: workers time every task and
     * feed the models, and the bus is calibrated at init. */
    TSR_SCHED_USES_MODELS = 1u << 0,
    /* submitted() wants the task's predecessors (tsr_task_predecessors). */
    TSR_SCHED_WANTS_PREDECESSORS = 1u << 1,
    /* A worker completing a task while no pushed task waits in the policy
     * runs the first task that completion makes ready itself, next, if it
     * can run it: that task is never pushed nor popped (done() still
     * comes). For FIFO policies that place tasks by availability alone (the
     * task would be popped next anyway): a dependency chain then stays on
     * one core instead of passing through the shared queue to whichever
     * worker polls it. */
    TSR_SCHED_RUN_SUCCESSOR = 1u << 2,
};

/* Policy state. */
TSR_API void *tsr_sched_data(tsr_sched_t *s);
TSR_API void tsr_sched_set_data(tsr_sched_t *s, void *data);

/* Workers. */
TSR_API int tsr_sched_worker_count(tsr_sched_t *s);
TSR_API int tsr_sched_worker_device(tsr_sched_t *s, int worker); /* TSR_DEVICE_… */
/* The memory node whose data the worker's tasks use (0: host). */
TSR_API int tsr_sched_worker_node(tsr_sched_t *s, int worker);
TSR_API int tsr_sched_node_count(tsr_sched_t *s);
/* The worker running the calling thread, or -1 (the application's thread,
 * a copy engine). */
TSR_API int tsr_sched_current_worker(tsr_sched_t *s);
/* Seconds since tsr_init, on the clock the models use. */
TSR_API double tsr_sched_now(tsr_sched_t *s);
/* Make sure `worker` (-1: any one) looks at the policy soon: for tasks a
 * policy placed on a worker other than the one push() returned. */
TSR_API void tsr_sched_notify(tsr_sched_t *s, int worker);
/* Start moving t's inputs to the worker's node now (a hint). A policy that
 * places a task on a worker calls it inside push() (or wherever it places
 * it) before the task can be popped: a popped task may complete and be
 * recycled at once, so the runtime never touches a task after push. */
TSR_API void tsr_sched_prefetch(tsr_sched_t *s, tsr_task_t t, int worker);

/* What a policy may read of a task. */
TSR_API tsr_sched_fields_t *tsr_task_sched_fields(tsr_task_t t);
TSR_API int tsr_task_priority(tsr_task_t t);
TSR_API const char *tsr_task_name(tsr_task_t t);
TSR_API const tsr_codelet_t *tsr_task_codelet(tsr_task_t t);
TSR_API int tsr_task_nbuffers(tsr_task_t t);
/* The handle of buffer i, as the application named it (the runtime's
 * own handles, such as REDUX accumulators, have ids too): equal for two
 * buffers exactly when they are the same data. */
TSR_API tsr_handle_t tsr_task_handle(tsr_task_t t, int i);
TSR_API tsr_mode_t tsr_task_mode(tsr_task_t t, int i);
/* Whether the task has an implementation for the worker's device kind. */
TSR_API int tsr_task_runs_on(tsr_task_t t, tsr_sched_t *s, int worker);
/* Only inside submitted() of a policy with TSR_SCHED_WANTS_PREDECESSORS:
 * the tasks t waits for (not yet complete when t was submitted), at most
 * max of them into out; returns how many there are. They stay valid until
 * submitted() returns. */
TSR_API int tsr_task_predecessors(tsr_task_t t, tsr_task_t *out, int max);

/* ---- data locations ----------------------------------------------------- */

/* Bit i set: node i has a valid copy of h, or one is on its way (0 for a
 * NULL or stale handle). */
TSR_API uint32_t tsr_handle_nodes(tsr_handle_t h);
/* Bytes of t's inputs (buffers it reads) that are valid or arriving on
 * `node`, and the bytes it reads in all. */
TSR_API size_t tsr_task_bytes_on(tsr_task_t t, int node, size_t *total_read);

/* ---- performance models (docs/perfmodels.md) ---------------------------- */

/* Predicted seconds of t on the worker's device kind, or NAN when nothing is
 * known: the policy should then run it where it can calibrate the model. */
TSR_API double tsr_sched_expected_length(tsr_sched_t *s, tsr_task_t t, int worker);
/* Predicted seconds to bring t's inputs missing on the worker's node there,
 * each from the node that holds it (0 when everything is there). */
TSR_API double tsr_sched_expected_transfer(tsr_sched_t *s, tsr_task_t t, int worker);
/* Predicted seconds to copy `bytes` from node src to node dst (through the
 * host when the two cannot copy directly). */
TSR_API double tsr_sched_transfer_time(tsr_sched_t *s, int src, int dst, size_t bytes);

/* Built-in policies, by name ("eager", "prio"); NULL if unknown. */
TSR_API const tsr_sched_policy_t *tsr_sched_builtin(const char *name);
/* The i-th built-in policy; NULL past the last. */
TSR_API const tsr_sched_policy_t *tsr_sched_builtin_at(int i);

#ifdef __cplusplus
}
#endif
#endif
