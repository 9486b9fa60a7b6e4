/* tessera.h — the public API of the Tessera task runtime.
 *
 * An application registers its data as handles, describes operations as
 * codelets, and submits tasks (a codelet applied to handles with access
 * modes) in program order. The runtime infers the dependency graph from the
 * access modes (sequential task flow) and runs tasks on its workers; the
 * result equals running the tasks one by one in submission order.
 *
 * This header must never expose runtime internals: every object is an opaque
 * handle, every call returns a status (TSR_OK or a negative TSR_E… code) and
 * never aborts on bad input. Detail for the last error of the calling thread
 * is available from tsr_error_message().
 */
#ifndef TESSERA_TESSERA_H
#define TESSERA_TESSERA_H

#include <stddef.h>
#include <stdint.h>

#include <tessera/export.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TSR_VERSION_MAJOR 0
#define TSR_VERSION_MINOR 1

/* ---- status codes ------------------------------------------------------ */

enum {
    TSR_OK = 0,
    TSR_EINVAL = -1,    /* a bad argument: null handle, wrong buffer count, … */
    TSR_ENOMEM = -2,    /* an allocation failed */
    TSR_EBUSY = -3,     /* the object is in use (acquired handle, …) */
    TSR_ENOTFOUND = -4, /* an unknown name (scheduler policy, …) */
    TSR_ETASK = -5,     /* a task failed, or was cancelled because one it
                           depended on failed */
    TSR_ESTATE = -6,    /* the runtime is not initialized, or already is */
    TSR_ENODEV = -7,    /* no device of the requested kind */
    TSR_EDEVICE = -8,   /* a device (CUDA) call failed */
    TSR_EIO = -9,       /* a file could not be read or written */
};

/* A static string naming a status code ("TSR_EINVAL: invalid argument"). */
TSR_API const char *tsr_strerror(int status);

/* The detailed message of the last failing call on this thread (for task
 * failures: the failing task's name and status). Never NULL. */
TSR_API const char *tsr_error_message(void);

/* The status behind the last failing call on this thread. For a TSR_ETASK,
 * why the first failed task failed: TSR_ENOMEM when its buffers could not
 * be had on its memory node (more than the node holds, or no room even
 * after eviction), TSR_EIO or TSR_EDEVICE when a copy or device call
 * failed, TSR_ETASK when its implementation returned an error. A task
 * cancelled by a failure has that failure's cause. For every other status,
 * the status itself. */
TSR_API int tsr_error_cause(void);

/* ---- initialization ---------------------------------------------------- */

typedef struct tsr_config {
    int ncpu;                  /* CPU workers; 0: one per core not driving an
                                  accelerator; < 0: none (accelerators only) */
    const char *sched;         /* policy name; NULL: "eager" */
    size_t max_pending_tasks;  /* submission throttles above this; 0: default */
    size_t max_pending_bytes;  /* …and above this many bytes of buffers
                                  touched by pending tasks; 0: unlimited */
    int bind;                  /* bind workers to cores (hwloc); 1 default */
    const char *trace_path;    /* Chrome trace JSON written at shutdown */
    const char *record_path;   /* the task graph ("tessera-graph 1", docs/lab.md)
                                  written as the program runs; NULL: none
                                  (TESSERA_RECORD) */
    /* memory nodes (see docs/memory.md) */
    int nsim;                  /* simulated accelerators */
    size_t sim_mem;            /* bytes per simulated accelerator; 0: 256 MiB */
    double sim_bandwidth;      /* bytes/s of a simulated copy engine; 0: no limit */
    double sim_latency;        /* seconds added to every simulated copy */
    int ncuda;                 /* GPUs to drive; -1: every one */
    size_t cuda_mem;           /* bytes usable per GPU; 0: what is free */
    size_t host_mem;           /* bytes of runtime-allocated host copies; 0: no limit */
    int pipeline;              /* tasks an accelerator worker holds at once
                                  (inputs of the next copy while one runs); 0: 4 */
    int stats;                 /* print memory counters at shutdown */
    /* performance models (see docs/perfmodels.md) */
    const char *perfmodel_dir; /* where models persist between runs; NULL:
                                  $XDG_CACHE_HOME/tessera or ~/.cache/tessera;
                                  "" : nowhere (models live for this run) */
    int calibrate;             /* 0: use what is known; 1: sample every
                                  (codelet, device, sizes) until calibrated;
                                  2: forget stored models and calibrate anew */
    int cuda_fp32;             /* fp32 GEMMs on GPUs: TSR_CUDA_FP32_TF32 (0,
                                  default: TF32 tensor cores) or
                                  TSR_CUDA_FP32_STRICT (plain FP32) */
    /* simulation (see docs/simulation.md) */
    const char *simulate;      /* a platform file (JSON): run the node it
                                  describes in virtual time, with phantom data;
                                  NULL: the real machine */
    int simulate_exec;         /* under simulation, also run every kernel on
                                  real data (results equal a normal run) */
    /* beyond host memory (see docs/memory.md#the-disk-tier) */
    const char *disk_dir;      /* a directory for the disk tier's file: host
                                  copies are evicted there when host_mem is
                                  reached; NULL: no disk tier */
    size_t disk_mem;           /* bytes of the disk tier; 0: half the free
                                  space of disk_dir's file system */
    int evict;                 /* which idle copy goes first: TSR_EVICT_WINDOW
                                  (0, default: the one whose next use among
                                  the submitted tasks is furthest) or
                                  TSR_EVICT_LRU (least recently used) */
    int deterministic;         /* 1: bitwise-reproducible sums: order-free
                                  accumulations (TSR_COMMUTE, TSR_REDUX) run
                                  in submission order, as TSR_RW, and MPI
                                  all-reduces sum in rank order (docs/runtime.md,
                                  "Deterministic mode") */
    int cuda_streams;          /* compute streams per GPU (1 to 8): a GPU
                                  worker's ready tasks run on several at once;
                                  0: 4 */
    int cuda_device_deps;      /* 1 (tsr_config_init's default): a task whose
                                  unfinished predecessors were all launched
                                  on one GPU is launched there at once, after
                                  them in device order (cudaStreamWaitEvent),
                                  without waiting for the host to see them
                                  end; 0: only once the host has seen every
                                  predecessor end (docs/memory.md) */
    int placement;             /* where large tiles live and their tasks run
                                  (docs/placement.md): TSR_PLACEMENT_AUTO
                                  (0, default: the application or the model
                                  chooses), _REPLICATE (copies go wherever
                                  the policy runs the tasks) or _OWNER (each
                                  large handle gets an accelerator home, its
                                  tasks run there) */
    size_t home_min;           /* owner placement homes handles of at least
                                  this many bytes, auto the declared state's
                                  of at least a sixteenth; 0: 256 MiB */
    int simulate_no_disk;      /* under simulation, 1: leave out the disk tier
                                  the platform describes (host_mem and
                                  disk_mem, when set, replace the platform's
                                  host and disk capacities) */
} tsr_config_t;

/* Placement (tsr_config_t.placement). */
enum { TSR_PLACEMENT_AUTO = 0, TSR_PLACEMENT_REPLICATE = 1, TSR_PLACEMENT_OWNER = 2 };

/* Victim selection (tsr_config_t.evict). */
enum { TSR_EVICT_WINDOW = 0, TSR_EVICT_LRU = 1 };

/* How fp32 matrix products run on GPUs (tsr_config_t.cuda_fp32). */
enum { TSR_CUDA_FP32_TF32 = 0, TSR_CUDA_FP32_STRICT = 1 };

/* Fill cfg with defaults (environment not yet applied). */
TSR_API void tsr_config_init(tsr_config_t *cfg);

/* Start the runtime. cfg may be NULL (defaults). The environment overrides
 * cfg: TESSERA_NCPU, TESSERA_SCHED, TESSERA_MAX_PENDING,
 * TESSERA_MAX_PENDING_BYTES, TESSERA_BIND, TESSERA_TRACE, TESSERA_NSIM,
 * TESSERA_SIM_BW (MB/s), TESSERA_SIM_LATENCY (µs), TESSERA_NCUDA,
 * TESSERA_LIMIT_SIM_MEM, TESSERA_LIMIT_CUDA_MEM, TESSERA_LIMIT_HOST_MEM
 * (MiB), TESSERA_PIPELINE, TESSERA_CUDA_STREAMS, TESSERA_CUDA_DEVICE_DEPS,
 * TESSERA_STATS,
 * TESSERA_PERFMODEL_DIR,
 * TESSERA_CALIBRATE, TESSERA_CUDA_FP32 (tf32|strict), TESSERA_SIMULATE
 * (a platform file), TESSERA_SIMULATE_EXEC (0|1), TESSERA_SIMULATE_NO_DISK
 * (0|1), TESSERA_DISK_DIR,
 * TESSERA_LIMIT_DISK_MEM (MiB), TESSERA_EVICT (window|lru) (see
 * docs/configuration.md). */
TSR_API int tsr_init(const tsr_config_t *cfg);

/* Wait for every task, stop the workers, write the trace, free everything.
 * Handles still registered are unregistered. Returns the status of the
 * final wait (TSR_ETASK if a task failed since the last wait). */
TSR_API int tsr_shutdown(void);

/* Number of workers of the running runtime (0 if not initialized). */
TSR_API int tsr_worker_count(void);

/* Seconds since tsr_init on the runtime's one clock: the wall clock, or
 * under simulation the virtual clock (0 if not initialized). Applications
 * time their phases with it so that a simulated run reports simulated
 * time. */
TSR_API double tsr_time(void);

/* ---- data handles ------------------------------------------------------ */

/* A handle is an opaque id, not a pointer: once unregistered, or after
 * tsr_shutdown, the id is stale for good, and every call given it returns
 * TSR_EINVAL (a later handle never gets the same id). */
typedef struct tsr_handle *tsr_handle_t;

/* The largest handle, in bytes: 2^56 - 1 on 64-bit machines, the user
 * address space of the largest (57-bit) virtual addresses. A larger size is
 * TSR_EINVAL; below it, the sums the runtime makes over a task's buffers
 * (at most TSR_MAX_BUFFERS) and rounding to alignments cannot overflow. */
#define TSR_MAX_HANDLE_SIZE (SIZE_MAX >> 8)

/* Register an existing host buffer of `size` bytes (1 to TSR_MAX_HANDLE_SIZE).
 * The runtime may read and write it through tasks until
 * tsr_handle_unregister(). */
TSR_API int tsr_handle_register(tsr_handle_t *out, void *ptr, size_t size);

/* A handle of `size` bytes (1 to TSR_MAX_HANDLE_SIZE) whose memory the
 * runtime allocates where it is first used. A task that reads it before any
 * write sees zeros. Memory that cannot be had fails the first task that
 * needs it (TSR_ETASK; tsr_error_cause() is TSR_ENOMEM). */
TSR_API int tsr_handle_alloc(tsr_handle_t *out, size_t size);

/* Wait for every task that uses the handle, then forget it. A registered
 * buffer holds the latest data afterwards. TSR_EBUSY if it is acquired. */
TSR_API int tsr_handle_unregister(tsr_handle_t h);

/* Size in bytes (0 for a NULL or stale handle). */
TSR_API size_t tsr_handle_size(tsr_handle_t h);

/* Access modes. W: the task overwrites the whole buffer (its contents on
 * entry are undefined). COMMUTE: read-write access by tasks that may run in
 * any order among themselves but never at the same time (an accumulation);
 * REDUX: an accumulation into a private per-worker copy, combined into the
 * handle by its reduction codelet when the handle is next accessed (see
 * tsr_handle_set_reduction); SCRATCH: the task gets a private,
 * uninitialized buffer of the handle's size, and no dependency is created. */
typedef enum tsr_mode {
    TSR_R = 1,
    TSR_W = 2,
    TSR_RW = 3,
    TSR_SCRATCH = 4,
    TSR_COMMUTE = 8,
    TSR_REDUX = 16,
} tsr_mode_t;

/* Host access in program order: waits until every task submitted before on
 * h that conflicts with `mode` is done, then returns the host pointer in
 * *ptr. Tasks submitted afterwards that conflict wait until
 * tsr_handle_release(). One acquisition per handle at a time. */
TSR_API int tsr_handle_acquire(tsr_handle_t h, tsr_mode_t mode, void **ptr);
TSR_API int tsr_handle_release(tsr_handle_t h);

/* The contents are no longer needed: ordered after the tasks submitted
 * before; every copy is dropped without being written back, and the next
 * reader sees zeros — or, for a registered buffer, the buffer as it is. */
TSR_API int tsr_handle_invalidate(tsr_handle_t h);

/* A hint, ordered after the tasks submitted before: h will not be used
 * soon, so its copies on accelerators, and on the host where a disk tier
 * backs it, are the first to be evicted (written back first if they are
 * the only ones). */
TSR_API int tsr_handle_wont_use(tsr_handle_t h);

/* ---- homes (docs/placement.md) ----------------------------------------- */

/* The memory node that owns h (0: the host; -1: none): a task runs on the
 * workers of the node that homes most of its buffers' bytes, whatever the
 * policy (tsr_task_runs_on). Applies to tasks submitted afterwards; the
 * disk tier's node is refused. */
TSR_API int tsr_handle_set_home(tsr_handle_t h, int node);
/* h's home node, or -1 (none, or a NULL or stale handle). */
TSR_API int tsr_handle_home(tsr_handle_t h);
/* h follows the home of `with` (both in one group: setting either's home
 * sets both; owner placement gives the group one home). Before any task
 * used h (TSR_ESTATE after); TSR_EINVAL if h already shares another home. */
TSR_API int tsr_handle_share_home(tsr_handle_t h, tsr_handle_t with);
/* Whether the running runtime gives accelerator homes to declared state
 * (handles grouped by tsr_handle_share_home) of state_bytes in all: 1
 * under owner placement, and under auto where it exceeds three quarters of
 * the smallest accelerator's memory; 0 under replicate, below that, or
 * without an accelerator. Lets a library cut its state for the placement
 * it will get (GPT-2's channel tiles). TSR_ESTATE before tsr_init. */
TSR_API int tsr_placement_homes(size_t state_bytes);
/* Whether the running runtime keeps every task that an accelerator can run
 * off its CPU workers unless its buffers' homes are on the host: 1 on a
 * node with CPU and accelerator workers under a policy that weighs no
 * speeds (no TSR_SCHED_USES_MODELS: eager, ws, prio, random), 0 otherwise
 * (the policy chooses; owner placement still keeps the tasks of homed
 * state's flow on the accelerators). Lets a library size per-worker state
 * for the workers that will run its tasks. TSR_ESTATE before tsr_init. */
TSR_API int tsr_placement_accelerators_first(void);

/* ---- codelets ---------------------------------------------------------- */

enum { TSR_DEVICE_CPU = 0, TSR_DEVICE_CUDA = 1, TSR_DEVICE_KINDS = 2 };

#define TSR_MAX_BUFFERS 16

/* What an implementation learns about the task it runs. */
typedef struct tsr_exec {
    int worker;             /* worker index, 0 … tsr_worker_count()-1 */
    int device_kind;        /* TSR_DEVICE_… */
    int nbuffers;
    const size_t *sizes;    /* size in bytes of each buffer */
    void *cuda_stream;      /* cudaStream_t for CUDA implementations */
    void *cublas_handle;    /* cublasHandle_t bound to cuda_stream */
    int memory_node;        /* where the buffers are (0: host) */
    int cuda_fp32;          /* TSR_CUDA_FP32_…: the precision of fp32 GEMMs */
    int deterministic;      /* tsr_config_t.deterministic: sums in a fixed
                               order (no float atomics across threads) */
} tsr_exec_t;

/* An implementation: buffers[i] is the i-th buffer of the task on the
 * worker's memory, args the argument block copied at submission. Returns 0,
 * or a nonzero code that fails the task. */
typedef int (*tsr_kernel_fn)(void **buffers, const void *args,
                             const tsr_exec_t *exec);

typedef struct tsr_codelet {
    const char *name;
    tsr_kernel_fn impl[TSR_DEVICE_KINDS]; /* NULL where not implemented */
    int nbuffers;
    /* optional: floating-point operations of one task, for models */
    double (*flops)(const void *args, const size_t *sizes);
    /* optional: bytes one task reads and writes in the memory it runs on,
     * for models of devices never measured (memory-bound time); NULL: the
     * sum of its buffer sizes */
    double (*bytes)(const void *args, const size_t *sizes);
    /* optional: seconds one task takes on a device of `device_kind`, known
     * beforehand (a replayed task, a synthetic kernel of a given length):
     * where it answers (>= 0) it is the performance models' estimate for
     * the task, which every policy and the simulation read, and nothing is
     * learned from its runs; < 0: unknown there (the models answer) */
    double (*seconds)(const void *args, const size_t *sizes, int device_kind);
} tsr_codelet_t;

/* ---- tasks ------------------------------------------------------------- */

typedef struct tsr_task *tsr_task_t;

typedef struct tsr_access {
    tsr_handle_t handle;
    tsr_mode_t mode;
} tsr_access_t;

#define TSR_MAX_ARGS 256

typedef struct tsr_task_desc {
    const tsr_codelet_t *codelet;
    int nbuffers;                  /* must equal codelet->nbuffers */
    const tsr_access_t *buffers;
    const void *args;              /* copied at submission */
    size_t args_size;              /* <= TSR_MAX_ARGS */
    int priority;                  /* larger runs first (prio policies) */
    const char *name;              /* for traces and errors; NULL: the
                                      codelet's name. Must stay valid until
                                      the task completes. */
    uint64_t tag;                  /* 0: none; see tsr_wait_tag() */
    const tsr_task_t *deps;        /* tasks this one follows besides what its
                                      accesses imply (explicit dependencies,
                                      as a graph from a file has them):
                                      references from tsr_submit, still the
                                      caller's (to wait on or release); a
                                      failure of one cancels this task */
    int ndeps;                     /* 0 … TSR_MAX_DEPS */
} tsr_task_desc_t;

#define TSR_MAX_DEPS 4096

/* Submit a task. Never waits for execution, but waits while more than the
 * configured number of tasks (or bytes) are pending. If out is not NULL it
 * receives a reference that tsr_task_wait() consumes. */
TSR_API int tsr_submit(const tsr_task_desc_t *desc, tsr_task_t *out);

/* Wait for one task and drop the reference. TSR_ETASK if it failed or was
 * cancelled. */
TSR_API int tsr_task_wait(tsr_task_t t);

/* Drop the reference without waiting (the task runs on; its outcome shows
 * in tsr_wait_all). TSR_EINVAL if t is not a live reference. */
TSR_API int tsr_task_release(tsr_task_t t);

/* Wait for every task submitted so far with this tag. */
TSR_API int tsr_wait_tag(uint64_t tag);

/* Wait for every task submitted so far. Returns TSR_ETASK if any task failed
 * since the previous wait (tsr_error_message() names the first). */
TSR_API int tsr_wait_all(void);

/* The submission window in bytes from now on (tsr_config_t.
 * max_pending_bytes): a submission waits while the tasks submitted and not
 * yet done touch more than `bytes` bytes of buffers (a task's own count
 * once per buffer); 0: unlimited. *previous (may be NULL) receives the
 * window it replaces (0: unlimited). The wider the window, the further
 * the workers may run ahead of the submission order; a program whose
 * order matters because its working set exceeds memory narrows it while
 * it submits (GPT-2's waves, docs/gpt2.md). Any thread may call it.
 * TSR_ESTATE without a runtime. */
TSR_API int tsr_set_pending_bytes(size_t bytes, size_t *previous);

/* ---- order-free reduction ---------------------------------------------- */

/* Enable TSR_REDUX on h: `init` (1 buffer, W) sets a private accumulator to
 * the neutral element, `reduce` (2 buffers: RW destination, R source) adds
 * the source into the destination. Tasks accessing h in TSR_REDUX mode run
 * in any order, concurrently, each worker accumulating into its own copy;
 * the next other access to h first combines the copies into h, as a tree.
 * Both codelets need an implementation for every device kind that runs
 * the REDUX tasks. */
TSR_API int tsr_handle_set_reduction(tsr_handle_t h, const tsr_codelet_t *init,
                                     const tsr_codelet_t *reduce);

/* ---- memory nodes and counters ----------------------------------------- */

enum { TSR_NODE_HOST = 0, TSR_NODE_SIM = 1, TSR_NODE_CUDA = 2, TSR_NODE_DISK = 3 };

typedef struct tsr_node_stats {
    int kind;                  /* TSR_NODE_… */
    char name[32];             /* "host", "sim0", "cuda0", … */
    size_t capacity;           /* bytes the runtime may allocate there */
    size_t used, peak;         /* bytes allocated now, and at most */
    uint64_t fetches;          /* copies into this node (and zero fills) */
    uint64_t evictions;        /* valid copies evicted to make room */
    uint64_t writebacks;       /* of which written back to the host first */
    uint64_t waits;            /* requests that waited for memory */
    uint64_t bytes_in, bytes_out; /* moved into / out of this node */
    size_t homed;              /* bytes of the handles whose home it is
                                  (tsr_handle_set_home, placement) */
} tsr_node_stats_t;

TSR_API int tsr_memory_node_count(void);
TSR_API int tsr_memory_node_stats(int node, tsr_node_stats_t *out);
/* Bytes copied from node src to node dst since tsr_init. */
TSR_API uint64_t tsr_memory_link_bytes(int src, int dst);

typedef struct tsr_worker_stats {
    int device_kind;           /* TSR_DEVICE_… of its implementations */
    int memory_node;
    uint64_t tasks;            /* tasks run */
    double busy_s;             /* time in implementations (tasks in flight
                                  together on a GPU's stream counted once) */
    double wait_data_s;        /* time with nothing runnable, waiting for data */
    uint64_t drains;           /* a GPU's worker: launches after the first
                                  made while none of its launched tasks was
                                  still running: the stream had run dry.
                                  With cuda_device_deps = 0 a task that
                                  depends on a running one is launched only
                                  once the host saw that one end, so every
                                  link of a chain is one (a host round
                                  trip). 0 on other workers */
    uint64_t host_waits;       /* a GPU's worker: launches of tasks made ready
                                  by a predecessor's completion seen on the
                                  host (a host round trip before the launch) */
    uint64_t device_ordered;   /* a GPU's worker: launches of tasks released
                                  to the device while predecessors of theirs
                                  launched there were not yet seen to end
                                  (ordered by events, no round trip) */
} tsr_worker_stats_t;

TSR_API int tsr_worker_stats(int worker, tsr_worker_stats_t *out);

/* Print the counters above (one line per node, link matrix, per-worker
 * waiting), as TESSERA_STATS=1 does at shutdown. `f` is a FILE *. */
TSR_API int tsr_stats_print(void *f);

/* ---- performance models ------------------------------------------------ */

/* Execution time of a codelet on a device kind, learned per footprint (the
 * buffer sizes) from the runs of every policy that uses models, robust to
 * outliers (a median of the recent samples), with a regression over the
 * codelet's other footprints (on flops, else bytes) for sizes never seen.
 * Models persist under the model directory, keyed by machine; the bus
 * model holds the latency and bandwidth of every link between memory
 * nodes, measured once per machine and configuration and then read back.
 * Every call needs a running runtime (TSR_ESTATE otherwise). */

typedef struct tsr_perfmodel_info {
    double seconds;       /* the estimate */
    unsigned nsamples;    /* samples of this very footprint */
    int from_regression;  /* 1: no calibrated history of this footprint;
                             the estimate comes from other footprints */
} tsr_perfmodel_info_t;

/* Add one measured run (as the workers do after every task when models are
 * in use): seconds of `cl` on `device_kind` with these buffer sizes; args
 * as the task's (for the codelet's flops estimator; may be NULL). */
TSR_API int tsr_perfmodel_record(const tsr_codelet_t *cl, int device_kind,
                                 const size_t *sizes, int nbuffers, const void *args,
                                 double seconds);
/* The estimate for these sizes; TSR_ENOTFOUND if nothing is known (or, when
 * calibrating, this footprint has too few samples). */
TSR_API int tsr_perfmodel_predict(const tsr_codelet_t *cl, int device_kind,
                                  const size_t *sizes, int nbuffers, const void *args,
                                  tsr_perfmodel_info_t *out);
/* The bus model of the link src → dst (memory node ids). */
TSR_API int tsr_bus_model(int src, int dst, double *latency_s, double *bytes_per_s);
/* Write the models to the model directory now (tsr_shutdown does it too). */
TSR_API int tsr_perfmodel_save(void);

/* ---- devices ----------------------------------------------------------- */

typedef struct tsr_device_info {
    char name[256];
    size_t total_mem;          /* bytes */
    size_t free_mem;           /* bytes */
    int cc_major, cc_minor;    /* compute capability */
    int multiprocessors;
} tsr_device_info_t;

/* Number of usable CUDA devices: 0 if built without CUDA or no device. */
TSR_API int tsr_cuda_device_count(void);
TSR_API int tsr_cuda_device_info(int index, tsr_device_info_t *info);
/* Whether the library was built with CUDA support. */
TSR_API int tsr_cuda_built(void);

#ifdef __cplusplus
}
#endif
#endif
