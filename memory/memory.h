/* memory/memory.h — memory nodes, the coherence directory and data movement.
 *
 * A memory node is host RAM, one GPU's memory, or a simulated accelerator's
 * memory. Every piece of data (a tile) has a directory entry with one
 * replica slot per node; the directory knows which replicas are valid,
 * allocates replicas (evicting idle ones: the one whose next use is
 * furthest, or the least recently used — memory/evict.h), and moves
 * data between nodes asynchronously on each node's copy engine.
 *
 * The runtime asks for data with a request: a set of (entry, mode) on one
 * node. A request is granted all-or-nothing and in FIFO order per node, so
 * two requests can never evict each other's buffers forever.
 *
 * Must never: know about tasks, dependencies or policies; block on a copy
 * while holding a lock; free or move an application's registered buffer;
 * evict a replica that is pinned by a request.
 */
#ifndef TSR_MEMORY_MEMORY_H
#define TSR_MEMORY_MEMORY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memory/copy.h"
#include "memory/evict.h"

#define TSR_MAX_NODES 32
#define TSR_MEM_MAX_BUFFERS 16

/* DISK: the disk tier below the host (memory/disk.h): no worker runs on
 * it; it holds host copies evicted there, and its engine copies between it
 * and the host only. */
enum tsr_node_kind {
    TSR_NODE_KIND_HOST = 0,
    TSR_NODE_KIND_SIM,
    TSR_NODE_KIND_CUDA,
    TSR_NODE_KIND_DISK
};

/* Victim selection (tsr_mem_config_t.evict): by next use in the submitted
 * window (tsr__mem_set_next_use), or least recently used. */
enum { TSR_MEM_EVICT_WINDOW = 0, TSR_MEM_EVICT_LRU = 1 };

/* An entry no submitted task will use (tsr__mem_set_next_use). */
#define TSR_NEXT_USE_NONE UINT64_MAX

/* Access modes as the directory sees them (the runtime maps its modes). */
enum { TSR_MEM_R = 1, TSR_MEM_W = 2, TSR_MEM_RW = 3 };

typedef struct tsr_node tsr_node_t;
typedef struct tsr_entry tsr_entry_t;

/* ---- copies: memory/copy.h (tsr_copy_t) ------------------------------ */

/* ---- memory nodes ------------------------------------------------------ */

/* What each kind of node implements. */
typedef struct tsr_node_ops {
    /* size bytes of node memory (64-byte aligned at least), or NULL. The
     * directory does the capacity accounting; alloc only fails when the
     * underlying memory is really exhausted. */
    void *(*alloc)(tsr_node_t *n, size_t size);
    void (*free)(tsr_node_t *n, void *p, size_t size);
    /* Why the calling thread's last failed alloc failed, naming the call
     * (optional; "" when unknown). */
    const char *(*alloc_error)(tsr_node_t *n);
    /* Queue a copy on this node's engine. One side of the copy is this
     * node; the other is the host or, when peer() says so, a node of the
     * same kind. Returns 0, or a TSR_E… code if it cannot even be queued. */
    int (*copy)(tsr_node_t *n, tsr_copy_t *c);
    /* Whether this node's engine can copy directly from/to `other`. */
    bool (*peer)(tsr_node_t *n, const tsr_node_t *other);
    /* Around one kernel run on this node by a worker (optional), on
     * compute lane `lane` (0 to exec_lanes - 1: a stream each; kernels of
     * different lanes may run at once): begin makes the device current and
     * fills the lane's stream / library handle the implementation needs, or
     * returns a TSR_E… code with a message naming the call (the
     * implementation must then not run); end waits for the lane's kernels
     * and turns a device error into a TSR_E… code with a message naming
     * the call. */
    int (*exec_begin)(tsr_node_t *n, int lane, void **stream, void **blas, char *err,
                      size_t errlen);
    int (*exec_end)(tsr_node_t *n, int lane, char *err, size_t errlen);
    /* Several tasks in flight (optional; with exec_poll): instead of
     * exec_end, mark the end of the kernels queued on the lane since
     * exec_begin (*mark), and later poll the mark: 1 reached, 0 not yet
     * (wait: block until it is), or a TSR_E… code with a message naming the
     * call. A mark is polled until it is not 0; the marks of one lane are
     * reached in the order they were made, those of different lanes in
     * any order. */
    int (*exec_record)(tsr_node_t *n, int lane, int *mark, char *err, size_t errlen);
    int (*exec_poll)(tsr_node_t *n, int mark, bool wait, char *err, size_t errlen);
    /* Device-ordered dependencies (optional; with exec_record): what is
     * queued on `lane` from now on runs after the kernels behind `mark`
     * (a mark not yet polled to its end), without the host waiting for
     * them. 0, or a TSR_E… code with a message naming the call. */
    int (*exec_wait)(tsr_node_t *n, int lane, int mark, char *err, size_t errlen);
    /* Stop the engine (queued copies complete first) and free everything. */
    void (*close)(tsr_node_t *n);
    /* alloc's memory reads as zeros (a phantom node's): the directory
     * does not zero-fill a host replica of never-written data by hand. */
    bool alloc_zeroed;
} tsr_node_ops_t;

typedef struct tsr_copy_event {
    uint64_t start_ns, end_ns;
    size_t bytes;
    int src, dst;
} tsr_copy_event_t;

typedef struct tsr_replica tsr_replica_t;
typedef struct tsr_mem_req tsr_mem_req_t;

struct tsr_node {
    int id;                 /* index in the node table; 0 is the host */
    int kind;               /* TSR_NODE_KIND_… */
    int index;              /* among nodes of its kind (device number) */
    char name[32];
    const tsr_node_ops_t *ops;
    void *impl;             /* the kind's private state */
    size_t capacity;        /* bytes the directory may allocate here */
    int exec_lanes;         /* compute lanes of exec_begin (asked for before
                               a GPU opens: 0 is one; what it made after) */

    pthread_mutex_t lock;   /* everything below, up to the counters */
    size_t used;            /* allocated + reserved bytes */
    size_t peak;
    /* every allocated replica, in eviction order (memory/evict.h): on a
     * node of finite capacity only (nothing is ever evicted elsewhere) */
    tsr_evict_order_t order;
    tsr_mem_req_t *wait_head, *wait_tail; /* requests waiting for memory */
    bool kicking, kick_again;
    size_t evicting_bytes;  /* write-backs in flight that will free memory */
    size_t reserving;       /* counted in used, not yet in order: grants not
                               yet pinned, allocations under way */
    /* A write-back from here failed (its copy stays valid): the next
     * request that needs room here fails with this status and message
     * instead of waiting for room that will not come. wb_err alone (status
     * 0) says why write-backs cannot start (the disk is full), for the
     * message of a request that finds nothing to evict. */
    int wb_status;
    char wb_err[TSR_MEM_ERR];
    /* The disk tier only (memory/directory.c, evict_walk): an eviction here
     * looked at every copy and none could go but those it could not look
     * at (their entries locked: barren_locked), and nothing that could
     * make one go has happened since (the directory's disk generation is
     * still barren_gen): the next eviction looks at those few only. */
    bool barren;
    int nbarren_locked;
    uint64_t barren_gen;
    tsr_replica_t *barren_locked[4];

    atomic_int nwaiting;    /* requests in the wait queue */
    atomic_long npinned;    /* replicas with busy > 0 */

    /* counters */
    atomic_uint_fast64_t evictions, writebacks, dropped, fetches, zero_fills;
    atomic_uint_fast64_t alloc_failures, granted, waits;
    atomic_uint_fast64_t alloc_retries; /* allocator failures healed by eviction */

    /* copy trace, written by the engine thread only */
    tsr_copy_event_t *ev;
    size_t nev, capev;
    bool tracing;
};

/* ---- requests ---------------------------------------------------------- */

/* A request for entries on one node. The caller fills node, n, e[], mode[],
 * done and arg; the directory fills ptr[] and status/err. */
struct tsr_mem_req {
    /* the scalars and the start of err first: one cache line for a request
     * of few buffers (a task's record is touched by two cores) */
    int node;
    int n;
    /* called once when every entry is valid and pinned on node (or the
     * request failed), from the thread that completed the last copy */
    void (*done)(tsr_mem_req_t *r);
    void *arg;

    /* directory state */
    atomic_int pending;       /* copies outstanding + 1 guard */
    atomic_int status;        /* 0 or the first TSR_E… code */
    bool published;           /* tsr__mem_publish ran: release only unpins */
    tsr_mem_req_t *wnext;
    char err[TSR_MEM_ERR];
    tsr_entry_t *e[TSR_MEM_MAX_BUFFERS];
    uint8_t mode[TSR_MEM_MAX_BUFFERS];    /* TSR_MEM_R/W/RW */
    bool pinned[TSR_MEM_MAX_BUFFERS];
    void *ptr[TSR_MEM_MAX_BUFFERS];
};

/* ---- configuration and lifetime ---------------------------------------- */

typedef struct tsr_mem_config {
    int nsim;               /* simulated accelerators */
    size_t sim_capacity;    /* bytes per simulated accelerator */
    double sim_bandwidth;   /* bytes per second per copy; 0: unthrottled */
    double sim_latency;     /* seconds per copy */
    int ncuda;              /* GPUs to use: -1 every one */
    int cuda_lanes;         /* compute streams per GPU (1 to 8) */
    size_t cuda_capacity;   /* 0: what the device has free, less a margin */
    size_t host_capacity;   /* runtime-allocated host bytes; 0: unlimited */
    /* The disk tier (memory/disk.h): a directory for its one file, or
     * NULL; its capacity in bytes (0: half the file system's free space).
     * It is the last node, below the host: the host's evictions write
     * back there instead of failing. */
    const char *disk_dir;
    size_t disk_capacity;
    int evict;              /* TSR_MEM_EVICT_… */
    bool tracing;           /* keep copy events */
    /* A simulated platform (memory/phantom.h): when set, the nodes are a
     * phantom host, one phantom node per accelerator described and the
     * phantom disk where it describes one (disk_dir is then refused), and
     * nsim, ncuda and the capacities above are not used. Copied at init. */
    const struct tsr_phantom_config *phantom;
} tsr_mem_config_t;

/* Open the host node, nsim simulated nodes and the GPUs. On failure
 * returns a TSR_E… code with a message in err and leaves nothing open. */
int tsr__mem_init(const tsr_mem_config_t *cfg, char *err, size_t errlen);
/* Stop every node's engine after its queued copies, and free its memory.
 * Every entry must have been freed. Counters and copy events stay readable
 * until tsr__mem_shutdown. */
void tsr__mem_stop(void);
/* Stop (if not yet) and forget every node. */
void tsr__mem_shutdown(void);

int tsr__mem_node_count(void);
tsr_node_t *tsr__mem_node(int id);
/* The disk tier's node id, or -1 when there is none. */
int tsr__mem_disk_node(void);
/* The victim selection rule of this run (TSR_MEM_EVICT_…). */
int tsr__mem_evict_rule(void);

/* ---- entries ----------------------------------------------------------- */

/* A directory entry of `size` bytes. host_ptr: the application's buffer,
 * which becomes the host replica (valid); NULL: the data is zeros until
 * first written, and memory is allocated where it is first used. */
tsr_entry_t *tsr__entry_new(void *host_ptr, size_t size);
size_t tsr__entry_size(const tsr_entry_t *e);
/* Forget the entry: replicas are freed once no copy is in flight. The
 * caller makes sure no request uses it any more. */
void tsr__entry_free(tsr_entry_t *e);

/* ---- data access ------------------------------------------------------- */

/* Make r's entries valid and pinned on r->node. Returns 1 if that is done
 * already (done() is not called), 0 if it will be (done() is called), or
 * a negative TSR_E… code with a message in r->err (nothing stays pinned).
 * A request that needs more memory than the node has free waits, in FIFO
 * order, for replicas to be evicted or released. */
int tsr__mem_acquire(tsr_mem_req_t *r);
/* After use: entries accessed with W become the only valid copy, on
 * r->node; every pin is dropped. Only for a request that was granted. */
void tsr__mem_release(tsr_mem_req_t *r);
/* Device-ordered release, first half (memory/directory.c): the entries r
 * writes become the only valid copy on r->node now — the version moves,
 * other copies are invalidated — while r keeps every pin. For a task
 * launched on a device whose kernels may still run: the copy is "valid
 * after the task's event", which only consumers ordered after that event
 * on the same device may use before the task completes; its pins keep it
 * from eviction, write-back and prefetch copies, and every other consumer
 * is a successor that waits for the completion. tsr__mem_release then only
 * unpins. Setting r->published by hand makes release skip the writes (a
 * task that did not run). */
void tsr__mem_publish(tsr_mem_req_t *r);
/* Acquire and wait: for host access by the application's thread. */
int tsr__mem_acquire_sync(tsr_mem_req_t *r);

/* Start moving e to node if there is room without waiting; the replica is
 * then kept unless a granted request needs the space. Room may be made by
 * dropping clean idle copies — under TSR_MEM_EVICT_WINDOW only those whose
 * next use is later than e's. A hint: never fails. */
void tsr__mem_prefetch(tsr_entry_t *e, int node);
/* The contents are no longer needed: drop every replica without
 * writing back; the next reader sees zeros (or, for a registered buffer,
 * the host buffer as it is). No request may use e meanwhile. */
void tsr__mem_invalidate(tsr_entry_t *e);
/* e will not be used soon: its idle copies off the host, and the host's
 * where a disk tier backs it, are evicted first. */
void tsr__mem_wont_use(tsr_entry_t *e);
/* The runtime's word on e's next use: the submission number of the first
 * submitted task that has not yet completed and accesses e, or
 * TSR_NEXT_USE_NONE. Under TSR_MEM_EVICT_WINDOW the idle copy whose next
 * use is furthest goes first (Belady's rule over the submitted window), and
 * a prefetch never evicts a copy needed sooner than the one it brings.
 * Cheap when nothing changes; called with no directory lock held. */
void tsr__mem_set_next_use(tsr_entry_t *e, uint64_t seq);

/* What the directory knows of e's replica on node (for tests and tools). */
typedef struct tsr_replica_info {
    int state;        /* 0 invalid, 1 shared, 2 modified (the only valid copy) */
    bool allocated;   /* holds node memory (a registered buffer does not count) */
    int busy;         /* pins */
    bool fetching;
    void *ptr;
} tsr_replica_info_t;

void tsr__entry_inspect(tsr_entry_t *e, int node, tsr_replica_info_t *out);

/* Bit j set: node j holds a valid replica of e or one is being fetched
 * there; every bit for data never written (zeros are made anywhere). For
 * policies: a snapshot that may change at once. */
uint32_t tsr__entry_nodes(tsr_entry_t *e);

/* Bytes moved from node s to node d since init (zero fills count as s=d). */
uint64_t tsr__mem_link_bytes(int s, int d);
/* Forget the link counters and copy events so far (the bus calibration's
 * copies are not the application's). Every engine must be idle. */
void tsr__mem_reset_counters(void);

/* ---- node kinds (node.c, sim.c, cuda.cu) ------------------------------- */

int tsr__host_node_open(tsr_node_t *n, size_t capacity, char *err, size_t errlen);
/* The disk tier: memory/disk.h. */
int tsr__sim_node_open(tsr_node_t *n, size_t capacity, double bandwidth,
                       double latency, char *err, size_t errlen);
/* Number of usable GPUs (0 without CUDA), and open GPU `device` as node n
 * with at most `capacity` bytes (0: what is free less a margin). */
int tsr__cuda_node_count(void);
int tsr__cuda_node_open(tsr_node_t *n, int device, size_t capacity, char *err,
                        size_t errlen);

/* Record a finished copy in its node's trace and counters (engines call it). */
void tsr__node_copy_event(tsr_node_t *n, const tsr_copy_t *c);

/* Host memory for replicas (NUMA-local to the calling thread when the
 * machine has several NUMA nodes, else from jemalloc where built with it). */
void *tsr__host_alloc(size_t size);
void tsr__host_free(void *p, size_t size);
/* Page-locked memory for the host's replicas, set by the first GPU node
 * opened: runtime-allocated host copies then come from it (falling back to
 * pageable memory when it is exhausted), so that copies to and from GPUs
 * are direct DMA. alloc returns NULL when it cannot; free returns false
 * for a pointer it did not hand out; close (at the host node's close, after
 * every replica is freed) gives everything back. */
typedef struct tsr_host_pinned {
    void *(*alloc)(void *ctx, size_t size);
    bool (*free)(void *ctx, void *p);
    void (*close)(void *ctx);
    void *ctx;
} tsr_host_pinned_t;
/* Install (the first call wins; returns false if one is installed). */
bool tsr__host_set_pinned(const tsr_host_pinned_t *pin);
/* Whether host replicas come from pinned memory now. */
bool tsr__host_pinned(void);

/* The same as node operations (the host's, and a simulated node's). */
void *tsr__host_node_alloc(tsr_node_t *n, size_t size);
void tsr__host_node_free(tsr_node_t *n, void *p, size_t size);

/* tsr__mem_now_ns(): memory/copy.h. */

/* The memory layer's one way to block a thread until work queued on copy
 * engines is done: until pred(arg) is true, evaluated under m. Whoever
 * completes the work makes pred true under m and signals cv. With the
 * virtual clock on (memory/vclock.h) nobody else will: the waiting thread
 * runs events itself, earliest first, until pred holds. Returns false if
 * the event queue ran dry first (nothing can ever make pred true: a
 * deadlock of the simulated program), true otherwise. m and cv may be
 * NULL when only the virtual clock can make pred true. */
bool tsr__mem_wait_until(bool (*pred)(void *arg), void *arg, pthread_mutex_t *m,
                         pthread_cond_t *cv);

/* Tests only (NULL otherwise): called by an eviction that may take copies
 * fetched ahead for queued work, with the node lock held, once its first
 * pass (every other idle copy) is done (point 1) and once at its end
 * (point 2). Between the two passes another thread may hold an entry's
 * lock, or pin or fetch a copy; a test uses this to make that happen at a
 * chosen moment. */
extern void (*tsr__mem_evict_test_hook)(tsr_node_t *n, int point);

/* Copies (accelerators' write-backs, hops through the host) that the
 * host allocated past its overdraft bound (capacity + 2 × the copy's
 * size; docs/memory.md, "Overdraft") because none of its own copies was
 * on its way to disk to wait for. Tests compare the host's peak with the
 * bound when this stays 0. */
extern atomic_uint_fast64_t tsr__mem_overdraft_unbounded;
/* Tests only: take (hold true) or drop e's lock, as another thread holds
 * it for a moment (a policy's tsr__entry_nodes, the next-use feed, a
 * request pinning e on another node). */
void tsr__entry_hold_for_test(tsr_entry_t *e, bool hold);

/* ---- link measurement (measure.c) -------------------------------------- */

/* Time `reps` copies of `bytes` from node src to node dst, one after the
 * other, on the engine of the node that is not the host (src and dst must
 * differ, and two non-host nodes must be peers), between buffers allocated
 * here with the nodes' alloc and freed before returning. *best_seconds:
 * the shortest, from queueing to completion. Returns 0, or a TSR_E… code
 * with a message in err. For the bus model, before or beside the
 * directory's own copies (which it does not disturb beyond sharing the
 * engine; its copies do count in the link counters and the copy trace). */
int tsr__mem_time_copy(int src, int dst, size_t bytes, int reps, double *best_seconds,
                       char *err, size_t errlen);

#endif
