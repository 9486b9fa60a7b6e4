/* runtime/internal.h — the runtime's private structures: tasks, handles,
 * workers and the global state shared by the runtime's files.
 *
 * Nothing outside runtime/ and sched/ may include this header; the public
 * API and the scheduler interface are the only ways in.
 */
#ifndef TSR_RUNTIME_INTERNAL_H
#define TSR_RUNTIME_INTERNAL_H

#include <tessera/sched.h>
#include <tessera/tessera.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "memory/memory.h"
#include "runtime/error.h"

/* The runtime's record of one handle (handle.c). Nothing outside the
 * runtime holds a pointer to it: applications and policies hold its id, a
 * tsr_handle_t that tsr__handle_lookup()/tsr__handle_get() check and turn
 * into this pointer. Everything inside the runtime uses the pointer. */
typedef struct tsr_handle tsr_data_t;

/* ---- small task lists -------------------------------------------------- */

typedef struct tsr_tasklist {
    tsr_task_t *v;
    int n, cap;
} tsr_tasklist_t;

/* Each list entry holds a reference on its task. */
int tsr__tasklist_push(tsr_tasklist_t *l, tsr_task_t t);
void tsr__tasklist_clear(tsr_tasklist_t *l);
/* Drop entries whose task is complete. */
void tsr__tasklist_prune(tsr_tasklist_t *l);
int tsr__tasklist_copy(tsr_tasklist_t *dst, const tsr_tasklist_t *src);

/* ---- tasks (task.c) ---------------------------------------------------- */

enum tsr_task_kind {
    TSR_KIND_USER = 0,    /* runs a codelet on a worker */
    TSR_KIND_ACQUIRE,     /* host access: ready wakes the acquirer */
    TSR_KIND_INVALIDATE,  /* frees runtime-owned memory when ready */
    TSR_KIND_BARRIER,     /* completes as soon as it is ready */
    TSR_KIND_WONTUSE,     /* marks the handle's copies for eviction */
    TSR_KIND_REDUCE,      /* combines a handle's REDUX accumulators */
    TSR_KIND_COMM,        /* an MPI transfer: ready hands it to comm.c */
};

enum tsr_task_state {
    TSR_TASK_SUBMITTED = 0,
    TSR_TASK_READY,
    TSR_TASK_DONE,
};

enum tsr_task_result {
    TSR_RESULT_OK = 0,
    TSR_RESULT_FAILED,     /* the implementation returned nonzero */
    TSR_RESULT_CANCELLED,  /* a predecessor failed; never ran */
};

#define TSR_SUCC_INLINE 4

/* How a task became ready (tsr_task.how), for the GPU workers' counters:
 * at submission (no predecessor left), by a completion the host observed,
 * or released to a device behind launched predecessors. */
enum { TSR_READY_SUBMIT = 0, TSR_READY_HOST = 1, TSR_READY_DEVICE = 2 };
#define TSR_DWAIT_MAX 8

struct tsr_task {
    /* what to run */
    const tsr_codelet_t *cl;
    const char *name;
    uint64_t tag;
    int priority;
    int kind;
    int nbuffers;          /* the per-buffer arrays are after args */
    size_t bytes;          /* sum of buffer sizes, for throttling */
    uint16_t ncommute;     /* number of distinct COMMUTE handles */

    /* dependencies */
    atomic_int ndeps;      /* unfinished predecessors, +1 while submitting */
    atomic_int refs;
    atomic_int cancelled;  /* a predecessor whose data it reads failed */
    int state;             /* state, result, waited, succ: under lock */
    int result;
    int error_code;        /* what the implementation returned */
    int cause;             /* the failure's status for tsr_error_cause():
                              the runtime's code (TSR_ENOMEM, TSR_EIO, …)
                              when it failed the task, TSR_ETASK when the
                              implementation did; a cancelled task's is the
                              failure's that cancelled it */
    /* why it failed: mreq.err below (the directory's or device's reason,
     * then "task 'x' on worker w (node): reason"; for a cancelled task,
     * the reason of the failure that cancelled it) */
    bool waited;           /* someone sleeps in tsr_task_wait() on it */
    /* successors; the low bit of an entry says it reads data we write */
    uintptr_t *succ;
    int nsucc, capsucc;
    uintptr_t succ_inline[TSR_SUCC_INLINE];

    /* for policies */
    tsr_sched_fields_t sched;

    /* data on the worker's memory node (mreq itself is after args) */
    int8_t slot[TSR_MAX_BUFFERS];  /* buffer i is mreq entry slot[i]; -1: scratch */
    atomic_int data_state;         /* DATA_FETCHING, DATA_READY */
    int run_worker;                /* the worker that holds it */
    uint16_t nodep;            /* buffers recorded in no handle's STF state */
    bool internal;             /* submitted by the runtime: never throttled */
    /* REDUCE: the group it combines; a task completing `then` with it */
    struct tsr_redux_group *group;
    tsr_task_t then;
    /* the next-use feed (task.c): the submission number, and how many
     * of use_h/use_pos below are set */
    uint64_t seq;
    uint8_t nuses;
    uint64_t rec_id;       /* its id in the task-graph record (record.c), 0: none */

    tsr_task_t free_next;  /* free list link */
    /* while the application holds a reference (taskref.c): its generation
     * and the hash chain of live references */
    uint16_t uref_gen;
    tsr_task_t uref_next;
    size_t args_size;
    /* Device-ordered dependencies (tsr__task_launched; docs/memory.md):
     * predecessors launched on a GPU and not yet seen to end that counted
     * this task (each holds a reference to it until its completion), the
     * node they were launched on (+1; 0: none yet, -1: several nodes: no
     * device release), and whether the task was made ready (by the host or
     * released to a device: whoever claims it first). */
    atomic_int ndev;
    atomic_int dev_node;
    atomic_int claimed;
    atomic_bool guard_dropped; /* no edge is added any more */
    uint8_t how;               /* TSR_READY_…: how it became ready */
    atomic_int ndwait;         /* dwait slots taken (may pass the max) */
    /* launched on a device and not complete: its node + 1, mark and
     * launch number, for edges added after the launch (under lock) */
    int launch_node1, launch_mark;
    uint64_t launch_seq;
    /* the same for COMMUTE exclusion (under tsr__rt.commute_m): a task
     * owning COMMUTE handles, launched on a device, hands them to a task
     * that may follow it there */
    int cm_node1, cm_mark;
    uint64_t cm_seq;
    /* released to a device (its node + 1): it runs there, whatever else
     * it waits for (a COMMUTE handle); via_devq: it went through a
     * worker's device queue, not through the policy */
    int bound_node1;
    bool via_devq;
    bool queued_host; /* counted in nqueued_host (accel_first: a host worker may run it) */
    /* launched behind running predecessors: its launch-to-end time is
     * theirs too, not a sample for the performance models */
    bool dev_behind;
    /* where its buffers' homes say it runs: node + 1, 0 anywhere, or
     * HOME_ACCELERATORS (runtime/home.c, set at submission) */
    int home1;
    /* the launches it follows on its device: the worker's mark and launch
     * number of each (a mark is reused once its task completed) */
    /* (relaxed atomics: a worker launching a predecessor may still write
     * a slot of a task another thread just made ready; such a slot names
     * a launch made before, so a torn read can only add a needless wait) */
    struct { atomic_int mark; _Atomic uint64_t seq; } dwait[TSR_DWAIT_MAX];
    /* more launches to follow than slots: it follows every task its
     * worker launched before it (a superset: they are all launched) */
    atomic_bool dwait_all;
    tsr_task_t dev_next;       /* a worker's device queue */
    /* The request for the task's data on the worker's node: right after
     * what the reset clears, but not cleared (500 bytes: a cache line of
     * another core each, when a worker freed the record); task_alloc sets
     * n = 0 and err[0] = 0, the worker's take the rest. Its scalars and
     * err's start share a line with the end of the reset. */
    tsr_mem_req_t mreq;
    _Alignas(16) unsigned char args[TSR_MAX_ARGS];
    /* Per buffer, after the argument block so that a task's reset skips
     * them (about 900 of its bytes): entries [0, nbuffers) are written at
     * submission (group_of and acc_of zeroed by submit_common), commute[]
     * up to ncommute; nothing reads past those counts. */
    tsr_access_t acc[TSR_MAX_BUFFERS];  /* as submitted: handle ids, modes */
    tsr_data_t *data[TSR_MAX_BUFFERS];  /* the runtime's handle of each buffer
                                           (a REDUX buffer's: the worker's
                                           accumulator once taken) */
    size_t sizes[TSR_MAX_BUFFERS];
    tsr_data_t *commute[TSR_MAX_BUFFERS]; /* sorted by slot */
    /* REDUX buffers: the group at submission, the worker's accumulator
     * once the task is taken (NULL elsewhere) */
    struct tsr_redux_group *group_of[TSR_MAX_BUFFERS];
    bool acc_of[TSR_MAX_BUFFERS];   /* data[i] is an accumulator */
    /* the buffers whose handles' pending uses this task is at (data[] of
     * a recorded buffer stays the handle: REDUX buffers are not recorded),
     * and its positions in their rings (low 32 bits: fewer uses than that
     * are ever pending at once); after the argument block, so that a
     * task's reset does not clear them (nuses says how many are set) */
    uint8_t use_buf[TSR_MAX_BUFFERS];
    uint32_t use_pos[TSR_MAX_BUFFERS];
    pthread_mutex_t lock;  /* kept across reuse from the pool */
};

/* A task's home1 under owner placement when none of its buffers has a
 * home: any accelerator's worker (runtime/home.c). */
#define HOME_ACCELERATORS (-1)
/* Homes (runtime/home.c). init: after the memory nodes and workers. */
int tsr__home_init(void);
void tsr__home_fini(void);
/* h is freed: its bytes leave its home's count (and its group's). */
void tsr__home_forget(tsr_data_t *h);
/* Bytes of the handles homed on `node`. */
size_t tsr__home_bytes(int node);
/* t's home node from its buffers' (assigning homes at first sight under
 * owner placement); at submission, before t can be ready. */
void tsr__home_task(tsr_task_t t);
/* Whether worker `worker` may run t: an implementation for its device
 * kind, and t's home (if any) is the worker's node. */
bool tsr__task_can_run(tsr_task_t t, int worker);
/* Whether t's home lets it run on memory node `node`. */
static inline bool tsr__home_allows(tsr_task_t t, int node)
{
    return !t->home1 || (t->home1 == HOME_ACCELERATORS ? node != 0 : t->home1 == node + 1);
}

void tsr__task_ref(tsr_task_t t);
void tsr__task_unref(tsr_task_t t);
/* All predecessors are done: hand the task on (policy, acquirer, …). */
void tsr__task_ready(tsr_task_t t);
/* t was launched on worker `worker`'s device (its kernels queued behind
 * `mark`, launch number `seq`): successors whose unfinished predecessors
 * are all launched there are released to that worker (its device queue).
 * Only with tsr__rt.device_deps. */
void tsr__task_launched(tsr_task_t t, int worker, int mark, uint64_t seq);
/* p (lock held, launched: p->launch_node1) gets successor s: count p among
 * s's launched predecessors if s may follow it on that device. Returns
 * whether it did (the edge then gets bit 2; p holds a reference to s). */
bool tsr__task_dev_count(tsr_task_t p, tsr_task_t s);
/* The task finished with `result`: release successors and waiters. */
void tsr__task_complete(tsr_task_t t, int result, int worker);
/* `then` completes with `first`'s result when `first` completes; consumes
 * a reference on `first`. */
void tsr__task_chain(tsr_task_t first, tsr_task_t then);
/* s will not run: p, whose data it reads, failed or was cancelled; s
 * inherits p's reason (mreq.err), which names the first failed task. */
void tsr__task_cancel(tsr_task_t s, tsr_task_t p);
/* An internal task of `kind` counted as pending, not yet submitted (its
 * guard is held); NULL without memory. */
tsr_task_t tsr__task_new_internal(int kind, const char *name);
/* Submit an internal two-buffer task (dst RW, src R) that is never
 * throttled; dst_dep: record it in dst's STF state (REDUX combinations). */
int tsr__submit_pair(const tsr_codelet_t *cl, const char *name, tsr_data_t *dst,
                     bool dst_dep, tsr_data_t *src, tsr_task_t *out);
/* Submit an internal task of `kind` on one handle. */
int tsr__submit_internal(int kind, tsr_data_t *h, tsr_mode_t mode,
                         tsr_task_t *out);
/* The same with a name and an argument block (args_size <= TSR_MAX_ARGS),
 * copied into the task (communication tasks: what to transfer). */
int tsr__submit_internal_args(int kind, tsr_data_t *h, tsr_mode_t mode, const char *name,
                              const void *args, size_t args_size, tsr_task_t *out);
void tsr__tasks_free_pool(void);
void tsr__tasks_flush_cache(void);
/* The worker index of the calling thread (-1 elsewhere), and whether the
 * task it is completing may still hand it the next task without a wake-up. */
extern _Thread_local int tsr__tl_worker;
extern _Thread_local bool tsr__tl_self_slot;
/* While a task is submitted for a policy that wants predecessors: the task,
 * and the predecessors its dependencies found (each list entry a ref). */
extern _Thread_local tsr_task_t tsr__tl_preds_of;
extern _Thread_local tsr_tasklist_t tsr__tl_preds;
/* Whether the runtime tells the directory each handle's next use (the
 * window rule on a node of finite capacity), and the submission counter. */
void tsr__next_use_setup(void);
/* The handle's pending uses are gone (it is being freed). */
void tsr__handle_uses_free(tsr_data_t *h);
/* Start moving t's inputs to the memory node of worker `target`. */
void tsr__task_prefetch(tsr_task_t t, int target);

/* ---- handles (handle.c) ------------------------------------------------ */

struct tsr_handle {
    tsr_entry_t *entry;    /* its copies, in the memory directory */
    tsr_handle_t id;       /* its name outside the runtime (see handle.c) */
    uint32_t slot;         /* its slot in the id table */
    size_t size;
    bool registered;       /* the application's buffer is the host copy */
    bool internal;         /* a REDUX accumulator: not in the registry */
    bool acc_initialized;  /* accumulator: the init codelet has run */
    pthread_mutex_t lock;  /* protects everything below */
    /* sequential task flow state */
    tsr_tasklist_t writers;      /* the last writer, or the commute group */
    tsr_tasklist_t readers;      /* readers since the writers */
    tsr_tasklist_t commute_pred; /* what the open commute group waits for */
    bool commute_open;
    /* commute exclusion (guarded by tsr__rt.commute_m) */
    tsr_task_t commute_owner;
    tsr_tasklist_t commute_waiting;
    /* host access */
    tsr_task_t acquired;
    tsr_mem_req_t *acq_req;
    /* order-free reduction: codelets, and the open group's accumulators
     * (one per worker, created by the first REDUX task a worker runs) */
    const tsr_codelet_t *redux_init, *redux_reduce;
    struct tsr_redux_group *redux;
    /* registry of live handles */
    struct tsr_handle *reg_prev, *reg_next;
    /* pending uses, in submission order (task.c, under use_m): a ring of
     * absolute positions [use_head, use_tail); `when` is the task's
     * submission number, then its readiness stamp once it is ready; the
     * soonest of the first few is the handle's next use, which the
     * directory hears of (use_fed: the last word it heard) */
    pthread_mutex_t use_m;
    struct tsr_use { uint64_t when; bool done, ready; } *uses; /* use_inline, or malloc'd */
    uint64_t use_head, use_tail, use_fed;
    uint32_t use_cap;
    struct tsr_use use_inline[4]; /* most handles: no allocation */
    /* its home (runtime/home.c): node + 1 or 0, its home group (0: none),
     * whether a task has used it, and the home its bytes are counted on
     * (under tsr__rt.home_m) */
    atomic_int home1;
    atomic_uint home_group;
    atomic_bool home_seen;
    bool home_grouped;            /* counted in tsr__rt.grouped_bytes */
    int home_counted1;
};

/* Add the dependencies of task t accessing h with mode (not SCRATCH) as
 * its buffer `slot`, and record t in h's state. An access that closes a
 * REDUX group returns the group's REDUCE task in *reduce, whose
 * submission guard the caller drops. Returns TSR_OK or TSR_ENOMEM. */
/* t follows p (an explicit dependency): waits for it unless it is done,
 * and is cancelled by its failure. */
void tsr__task_depend(tsr_task_t t, tsr_task_t p);
int tsr__handle_depend(tsr_data_t *h, tsr_task_t t, tsr_mode_t mode, int slot,
                       tsr_task_t *reduce);
/* The live handle an application id names, or NULL (NULL id, never an
 * id, unregistered, or from an earlier runtime). Takes no lock. */
tsr_data_t *tsr__handle_lookup(tsr_handle_t id);
/* The same for a public call, pinned (handle.c, "Pins"): h is not freed
 * until tsr__handle_unpin. TSR_ESTATE before tsr_init, TSR_EINVAL for a
 * NULL or stale id, TSR_EBUSY while it is being unregistered, each with a
 * message that starts with `what`. */
int tsr__handle_pin(tsr_handle_t id, const char *what, tsr_data_t **out);
void tsr__handle_unpin(tsr_data_t *h);
/* A handle with an id but outside the registry (REDUX accumulators, and
 * the body of tsr_handle_register/alloc); NULL without memory. ptr: the
 * host buffer, or NULL. */
tsr_data_t *tsr__handle_new_internal(void *ptr, size_t size);
void tsr__handle_free(tsr_data_t *h);
/* Host access to h's bytes, as an acquisition gets it (from any
 * accelerator or the disk; waits): r->ptr[0] until tsr__mem_release(r).
 * TSR_OK, or a status with the reason in r->err. The caller's task holds
 * h in `mode` (TSR_MEM_R/W/RW), so that nothing else writes it meanwhile. */
int tsr__handle_host_access(tsr_data_t *h, tsr_mem_req_t *r, int mode);
/* Write a registered buffer's latest data back to it (waits). */
int tsr__handle_flush(tsr_data_t *h);
/* At shutdown: end every acquisition; then free every handle as
 * tsr_handle_unregister does (an open REDUX group is combined into it, a
 * registered buffer gets the latest data). */
void tsr__handles_release_acquired(void);
int tsr__handles_unregister_all(void);
/* After every handle is freed (shutdown): forget the id table. Ids handed
 * out so far stay stale forever: generations are never reused. */
void tsr__handles_fini(void);

/* ---- order-free reduction (redux.c) ------------------------------------ */

/* The accumulators of one REDUX group of a handle: one per worker, made
 * by the first REDUX task that worker takes. */
typedef struct tsr_redux_group {
    struct tsr_handle *h;
    pthread_mutex_t lock;
    int n;
    struct tsr_handle *acc[];
} tsr_redux_group_t;

/* Submission: whether buffer i of a task (handles hs) may be REDUX; a
 * status with a message naming task `name`. */
int tsr__redux_check(tsr_data_t *const *hs, int nbuffers, const tsr_codelet_t *cl,
                     const char *name, int i);
/* Dependency rules (handle.c, handle lock held): open h's group; t joins
 * it as its buffer `slot`; close it: the REDUCE task that will combine it
 * (not yet submitted: its guard is held), or NULL without memory. */
int tsr__redux_open(tsr_data_t *h);
void tsr__redux_join(tsr_data_t *h, tsr_task_t t, int slot);
tsr_task_t tsr__redux_close(tsr_data_t *h);
/* A worker takes t: REDUX buffer i becomes worker w's accumulator (made
 * on first use). TSR_ENOMEM with the reason in t->mreq.err. */
int tsr__redux_take(tsr_task_t t, int i, int w);
/* Before t's implementation runs: set each accumulator that t is the
 * first to use to the neutral element. 0 or the init codelet's code. */
int tsr__redux_init_accumulators(tsr_task_t t, void **bufs, const tsr_exec_t *exec);
/* The REDUCE task is ready: submit the combining tree; it completes when
 * the last combination does. */
void tsr__redux_start(tsr_task_t reduce);
/* The REDUCE task completed: free the group and its accumulators. */
void tsr__redux_finish(tsr_task_t reduce);

/* ---- workers (worker.c) ------------------------------------------------ */

#define TSR_PIPE_MAX 8
enum { DATA_FETCHING = 0, DATA_READY = 1 };

typedef struct tsr_worker {
    int id;
    int device_kind;
    int node;                  /* memory node its tasks' data must be on */
    int depth;                 /* tasks it holds at once (fetching or running) */
    tsr_task_t inflight[TSR_PIPE_MAX]; /* in pop order */
    int ninflight;
    /* a successor its last completion made ready, to take before asking
     * the policy (TSR_SCHED_RUN_SUCCESSOR); its own thread's only */
    tsr_task_t next;
    /* launched on the device, completed when their mark is reached (GPU
     * workers: several tasks' kernels queued on the node's compute lanes
     * at once) */
    tsr_task_t running[TSR_PIPE_MAX]; /* in launch order */
    int run_mark[TSR_PIPE_MAX];
    int run_lane[TSR_PIPE_MAX];
    uint64_t run_start[TSR_PIPE_MAX];
    uint64_t run_seq[TSR_PIPE_MAX];   /* launch numbers (tsr_task.dwait) */
    uint64_t launch_seq;
    int last_lane;             /* the lane its last launch went to */
    int nrunning;
    /* tasks released to this worker's device (tsr__task_launched), under
     * m; ndevq is read without it */
    tsr_task_t devq_head, devq_tail;
    atomic_int ndevq;
    /* counters, written by the worker; atomic because tsr_worker_stats
     * may read them from any thread while tasks run (the trainer asks for
     * a worker's kind and node while an earlier model's tasks run) */
    _Atomic uint64_t ntasks, busy_ns, wait_ns;
    uint64_t busy_end_ns; /* the latest task end counted into busy_ns */
    /* an accelerator's worker: tasks launched, and launched while none of
     * its earlier ones was still running (tsr_worker_stats_t.drains) */
    uint64_t launches;
    _Atomic uint64_t drains;
    /* launches of tasks made ready by a completion the host observed, and
     * of tasks released to the device (tsr_worker_stats_t) */
    _Atomic uint64_t host_waits, device_ordered;
    int cpu;                   /* core index it is bound to, or -1 */
    pthread_t thread;
    pthread_mutex_t m;
    pthread_cond_t cv;
    atomic_int sleeping;
    /* scratch buffers, one per buffer slot */
    void *scratch[TSR_MAX_BUFFERS];
    size_t scratch_size[TSR_MAX_BUFFERS];
    /* trace events */
    struct tsr_trace_event *ev;
    size_t nev, capev;
    char pad[64];
} tsr_worker_t;

/* The application's task references (taskref.c): issue one for a
 * submitted task (never fails), take a value back (the record, removed
 * from the live set, or NULL for a stale, repeated or foreign value), put
 * a taken one back (its wait did not consume it), strip a value's tag for
 * the policy-side accessors, and forget every reference at shutdown. */
tsr_task_t tsr__taskref_issue(tsr_task_t t);
tsr_task_t tsr__taskref_take(tsr_task_t value);
void tsr__taskref_put_back(tsr_task_t t);
/* The record of a live value with one more reference on it (for the
 * caller to drop with tsr__task_unref), the value staying live; NULL for a
 * value that is not. */
tsr_task_t tsr__taskref_borrow(tsr_task_t value);
tsr_task_t tsr__task_untag(tsr_task_t value);
void tsr__taskref_fini(void);
/* tsr_task_wait on a record (internal tasks' references are records). */
int tsr__task_wait(tsr_task_t t);

/* What every driver's workers do the same way (execute.c). */
/* Run t's implementation `impl` on bufs (its REDUX accumulators initialized
 * first), marked as inside a codelet for this thread. */
int tsr__worker_run_impl(tsr_task_t t, tsr_kernel_fn impl, void **bufs, const tsr_exec_t *exec);
/* This thread runs a codelet now: the calls that wait for tasks (wait_all,
 * task_wait, wait_tag, acquire, unregister, shutdown) refuse with
 * TSR_ESTATE instead of deadlocking on the task that runs them. */
bool tsr__in_codelet(void);
/* The worker table: ncpu CPU workers, then one per accelerator node;
 * ncores > 0: workers are bound to cores i % ncores (when binding). */
int tsr__workers_table(int ncpu, int ncores);
void tsr__workers_table_free(void);
/* The next task for w: its successor slot (TSR_SCHED_RUN_SUCCESSOR), else
 * the policy's pop, which decrements nqueued (not asked of a host worker
 * while nqueued_host is 0 under accel_first); *queued_left: the tasks
 * still queued after that pop (0 for the slot's). NULL: none. */
tsr_task_t tsr__worker_next(tsr_worker_t *w, long *queued_left);
/* Queue t, released to w's device, for w (any thread), and wake w. */
void tsr__worker_devq_push(tsr_worker_t *w, tsr_task_t t);
/* Ask the directory for t's buffers on w's node (REDUX buffers become w's
 * accumulators); ready(r) is called when they are there, unless they are
 * at once (data_state DATA_READY). false: t failed and is complete. */
bool tsr__worker_take(tsr_worker_t *w, tsr_task_t t, void (*ready)(tsr_mem_req_t *r));
/* t failed before running, with `code`: complete it. */
void tsr__worker_fail(tsr_worker_t *w, tsr_task_t t, int code);
/* The first task of w's pipeline whose data is there, or -1; remove
 * entry i of the pipeline. */
int tsr__worker_first_ready(const tsr_worker_t *w);
tsr_task_t tsr__worker_remove(tsr_worker_t *w, int i);
/* The pointers t's implementation gets: its data on w's node, scratch
 * from w's buffers. TSR_ENOMEM: t failed (released and completed). */
int tsr__worker_buffers(tsr_worker_t *w, tsr_task_t t, void **bufs);
/* Scratch buffer i of w, at least `size` bytes, grown on demand: host
 * memory, or device memory from the node's pool for a GPU's worker (a
 * kernel cannot use a host pointer). The previous task of w has finished
 * with it. Device scratch is not counted in the directory's capacity. NULL
 * with a message in err when no memory can be had. */
void *tsr__worker_scratch(tsr_worker_t *w, tsr_node_t *node, int i, size_t size, char *err,
                          size_t errlen);
/* As w stops (before the nodes close): device scratch goes back to its
 * node's pool; host scratch is freed with the table. */
void tsr__worker_scratch_release(tsr_worker_t *w);
/* After t ran from `start` to now (rc: its status): models (when the
 * driver measures), counters, trace; release its data (written buffers
 * become the valid copy) and complete it. */
void tsr__worker_finish(tsr_worker_t *w, tsr_task_t t, int rc, uint64_t start);

/* The running driver's calls (runtime/driver.h). */
void tsr__workers_notify(int target);

/* ---- scheduler instance (sched/sched.c) -------------------------------- */

struct tsr_sched {
    const tsr_sched_policy_t *policy;
    void *data;
    void *dl;                  /* plug-in library, if any */
};

/* Resolve a policy by name; TSR_ENOTFOUND with a message if unknown. */
int tsr__sched_open(tsr_sched_t *s, const char *name);
/* A policy from a shared object (sched/plugin.c): TSR_ENOTFOUND if `name`
 * names no plug-in, another code with a message if one is found but
 * unusable. */
int tsr__sched_plugin_load(const char *name, const tsr_sched_policy_t **out,
                           void **dl);
void tsr__sched_plugin_unload(void *dl);
void tsr__sched_close(tsr_sched_t *s);

/* ---- communication tasks (comm.c; mpi_none.c without MPI) ------------- */

/* A TSR_KIND_COMM task is ready: the communication thread takes it, gets
 * host access to its handle, posts non-blocking MPI and completes it. */
void tsr__comm_ready(tsr_task_t t);
/* At shutdown, every task complete: stop the communication thread. */
void tsr__comm_stop(void);
/* The transfers' spans for the trace's communication track (after
 * tsr__comm_stop; none without MPI or tracing), and their release. */
struct tsr_trace_event;
size_t tsr__comm_trace(const struct tsr_trace_event **ev);
void tsr__comm_trace_free(void);
/* A communication timeout (comm_timeout.c): seconds >= 0 or inf into *out,
 * 0 ("none") for 0, inf and anything from TSR__MPI_MAX_TIMEOUT_S on (a
 * deadline in ns would overflow); nan or negative: TSR_EINVAL, the message
 * starting with `what`. */
#define TSR__MPI_MAX_TIMEOUT_S 1e9 /* 31 years */
int tsr__mpi_timeout(double seconds, const char *what, double *out);
/* TESSERA_MPI_TIMEOUT checked as above into *out: 1 when set, 0 when unset
 * or empty (*out untouched), TSR_EINVAL naming the variable otherwise. */
int tsr__mpi_timeout_env(double *out);

/* ---- the task-graph record (record.c) ---------------------------------- */

int tsr__record_open(const char *path);
/* a task the application submitted: its id, accesses, dependencies (those
 * its accesses imply, and its explicit ones: preds) */
void tsr__record_submit(tsr_task_t t, tsr_task_t const *preds, int npreds);
/* an event on a handle between tasks: "wont_use", "invalidate" */
void tsr__record_event(const char *what, tsr_data_t *h);
/* where and when a recorded task ran (the driver's clock) */
void tsr__record_ran(const tsr_worker_t *w, tsr_task_t t, uint64_t start, uint64_t end,
                     int rc);
/* closes the file; TSR_EIO (with the message) if any write failed */
int tsr__record_close(void);

/* ---- tracing (trace.c) ------------------------------------------------- */

struct tsr_trace_event {
    uint64_t start_ns, end_ns;
    char name[48];
};

void tsr__trace_record(tsr_worker_t *w, const char *name, uint64_t start,
                       uint64_t end);
int tsr__trace_write(const char *path);
/* The library's one monotonic clock is the memory layer's
 * (tsr__mem_now_ns, memory/node.c): copy events and task events share
 * its time base. This name stays for the scheduler's files. */
static inline uint64_t tsr__now_ns(void) { return tsr__mem_now_ns(); }

/* ---- global state (runtime.c) ------------------------------------------ */

typedef struct tsr_runtime {
    atomic_int initialized;
    tsr_config_t cfg;
    const struct tsr_driver *driver; /* threads or simulation (driver.h) */
    char sched_name[256];
    char trace_path[4096];
    char perfmodel_dir[4096];
    char simulate_path[4096];
    char disk_dir[4096];
    bool tracing;
    bool recording;               /* TESSERA_RECORD: the task-graph record */
    char record_path[4096];
    bool sampling;                /* workers feed the performance models */
    uint64_t t0_ns;

    int nworkers;
    int nworkers_of_kind[TSR_DEVICE_KINDS];
    int nnodes;                   /* memory nodes */
    tsr_worker_t *workers;
    atomic_int stop;
    atomic_uint_fast64_t epoch;   /* bumped at every push */
    atomic_int nspinning;
    atomic_int nsleeping;
    atomic_long nqueued;          /* pushed to the policy, not yet popped */
    atomic_long nqueued_host;     /* under accel_first, those a host worker
                                     may run: while none, host workers do
                                     not ask the policy (its queue may hold
                                     thousands of GPU tasks to walk past) */

    tsr_sched_t sched;

    /* pending work and waiting */
    atomic_long pending;          /* submitted, not complete */
    atomic_long pending_bytes;
    bool feed_next_use;           /* tsr__next_use_setup */
    /* tasks may be released to a GPU behind launched predecessors
     * (cfg.cuda_device_deps, a GPU whose node can order lanes by events,
     * a policy without a `submitted` hook) */
    bool device_deps;
    int disk_node;                /* the disk tier's memory node, or -1 */
    atomic_uint_fast64_t next_seq; /* submission numbers */
    atomic_int nwaiters;
    atomic_int nacquired;         /* handles currently acquired */
    atomic_int nthrottled;        /* submitters waiting for low water */
    pthread_mutex_t wait_m;
    pthread_cond_t wait_cv;
    long low_water;
    /* the window in bytes (tsr_set_pending_bytes; LONG_MAX: unlimited) and
     * its low water, 3/4 of it */
    atomic_long max_pending_bytes;
    atomic_long low_water_bytes;

    /* first failure since the last wait */
    pthread_mutex_t err_m;
    int nfailed, ncancelled;
    char first_error[512];
    int first_cause; /* its tsr_task.cause */

    /* tags: open-addressing table of (tag, pending count), under tag_m */
    pthread_mutex_t tag_m;
    uint64_t *tag_keys;
    long *tag_counts;
    size_t tag_cap, tag_used;

    /* commute exclusion */
    pthread_mutex_t commute_m;

    /* live handles */
    pthread_mutex_t reg_m;
    struct tsr_handle *reg_head;

    /* task pool */
    pthread_mutex_t pool_m;
    tsr_task_t pool, pool_tail;

    /* homes (runtime/home.c): the size threshold, the bytes of the handles
     * in home groups and the amount beyond which auto placement homes them,
     * bytes homed per node and each node's budget for them (under home_m) */
    size_t home_min;
    size_t grouped_bytes, home_auto_bytes;
    atomic_bool homes_used;       /* some handle has a home */
    bool homes_auto;              /* placement may give homes (an accelerator
                                     to be one, placement not replicate) */
    atomic_bool owner_engaged;    /* placement gave a handle a home: tasks
                                     without one run on accelerators */
    bool accel_first;             /* the policy weighs no speeds and there are
                                     CPU and accelerator workers: tasks
                                     without a home run on accelerators */
    bool kind_on_host[TSR_DEVICE_KINDS];  /* a host worker of that device kind */
    bool kind_on_accel[TSR_DEVICE_KINDS]; /* an accelerator's worker of it */
    pthread_mutex_t home_m;
    size_t *home_bytes, *home_budget;
} tsr_runtime_t;

extern tsr_runtime_t tsr__rt;

/* The submission window in bytes from now on (0: unlimited): the limit
 * and its low water (runtime/task.c, tsr_set_pending_bytes). */
void tsr__set_window_bytes(size_t bytes);

static inline bool tsr__running(void)
{
    return atomic_load_explicit(&tsr__rt.initialized, memory_order_acquire);
}

/* Returns whether the tag's pending count is now zero. */
bool tsr__tag_add(uint64_t tag, long delta);

#endif
