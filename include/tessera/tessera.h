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
const char *tsr_strerror(int status);

/* The detailed message of the last failing call on this thread (for task
 * failures: the failing task's name and status). Never NULL. */
const char *tsr_error_message(void);

/* ---- initialization ---------------------------------------------------- */

typedef struct tsr_config {
    int ncpu;                  /* CPU workers; <= 0: one per core */
    const char *sched;         /* policy name; NULL: "eager" */
    size_t max_pending_tasks;  /* submission throttles above this; 0: default */
    size_t max_pending_bytes;  /* …and above this many bytes of buffers
                                  touched by pending tasks; 0: unlimited */
    int bind;                  /* bind workers to cores (hwloc); 1 default */
    const char *trace_path;    /* Chrome trace JSON written at shutdown */
} tsr_config_t;

/* Fill cfg with defaults (environment not yet applied). */
void tsr_config_init(tsr_config_t *cfg);

/* Start the runtime. cfg may be NULL (defaults). The environment overrides
 * cfg: TESSERA_NCPU, TESSERA_SCHED, TESSERA_MAX_PENDING,
 * TESSERA_MAX_PENDING_BYTES, TESSERA_BIND, TESSERA_TRACE (see
 * docs/configuration.md). */
int tsr_init(const tsr_config_t *cfg);

/* Wait for every task, stop the workers, write the trace, free everything.
 * Handles still registered are unregistered. Returns the status of the
 * final wait (TSR_ETASK if a task failed since the last wait). */
int tsr_shutdown(void);

/* Number of workers of the running runtime (0 if not initialized). */
int tsr_worker_count(void);

/* ---- data handles ------------------------------------------------------ */

typedef struct tsr_handle *tsr_handle_t;

/* Register an existing host buffer of `size` bytes. The runtime may read and
 * write it through tasks until tsr_handle_unregister(). */
int tsr_handle_register(tsr_handle_t *out, void *ptr, size_t size);

/* A handle of `size` bytes whose memory the runtime allocates where it is
 * first used. A task that reads it before any write sees zeros. */
int tsr_handle_alloc(tsr_handle_t *out, size_t size);

/* Wait for every task that uses the handle, then forget it. A registered
 * buffer holds the latest data afterwards. TSR_EBUSY if it is acquired. */
int tsr_handle_unregister(tsr_handle_t h);

/* Size in bytes (0 for a NULL handle). */
size_t tsr_handle_size(tsr_handle_t h);

/* Access modes. COMMUTE: read-write access by tasks that may run in any
 * order among themselves but never at the same time (an accumulation);
 * SCRATCH: the task gets a private, uninitialized buffer of the handle's
 * size, and no dependency is created. */
typedef enum tsr_mode {
    TSR_R = 1,
    TSR_W = 2,
    TSR_RW = 3,
    TSR_SCRATCH = 4,
    TSR_COMMUTE = 8,
} tsr_mode_t;

/* Host access in program order: waits until every task submitted before on
 * h that conflicts with `mode` is done, then returns the host pointer in
 * *ptr. Tasks submitted afterwards that conflict wait until
 * tsr_handle_release(). One acquisition per handle at a time. */
int tsr_handle_acquire(tsr_handle_t h, tsr_mode_t mode, void **ptr);
int tsr_handle_release(tsr_handle_t h);

/* The contents are no longer needed: ordered after the tasks submitted
 * before; memory the runtime allocated for the handle is freed, and the next
 * reader sees zeros. A registered buffer is left as it is. */
int tsr_handle_invalidate(tsr_handle_t h);

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
} tsr_task_desc_t;

/* Submit a task. Never waits for execution, but waits while more than the
 * configured number of tasks (or bytes) are pending. If out is not NULL it
 * receives a reference that tsr_task_wait() consumes. */
int tsr_submit(const tsr_task_desc_t *desc, tsr_task_t *out);

/* Wait for one task and drop the reference. TSR_ETASK if it failed or was
 * cancelled. */
int tsr_task_wait(tsr_task_t t);

/* Wait for every task submitted so far with this tag. */
int tsr_wait_tag(uint64_t tag);

/* Wait for every task submitted so far. Returns TSR_ETASK if any task failed
 * since the previous wait (tsr_error_message() names the first). */
int tsr_wait_all(void);

/* ---- devices ----------------------------------------------------------- */

typedef struct tsr_device_info {
    char name[256];
    size_t total_mem;          /* bytes */
    size_t free_mem;           /* bytes */
    int cc_major, cc_minor;    /* compute capability */
    int multiprocessors;
} tsr_device_info_t;

/* Number of usable CUDA devices: 0 if built without CUDA or no device. */
int tsr_cuda_device_count(void);
int tsr_cuda_device_info(int index, tsr_device_info_t *info);
/* Whether the library was built with CUDA support. */
int tsr_cuda_built(void);

#ifdef __cplusplus
}
#endif
#endif
