/* runtime/runtime.c — configuration, start and stop of the runtime.
 *
 * The only global state of the library lives here (tsr__rt). Init must
 * leave nothing behind when it fails; shutdown must wait for every task.
 */
#include "runtime/driver.h"
#include "runtime/instance.h"
#include "runtime/internal.h"
#include "runtime/perfmodel.h"

#include <cblas.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tsr_runtime_t tsr__rt = {
    .wait_m = PTHREAD_MUTEX_INITIALIZER,
    .wait_cv = PTHREAD_COND_INITIALIZER,
    .err_m = PTHREAD_MUTEX_INITIALIZER,
    .tag_m = PTHREAD_MUTEX_INITIALIZER,
    .commute_m = PTHREAD_MUTEX_INITIALIZER,
    .reg_m = PTHREAD_MUTEX_INITIALIZER,
    .pool_m = PTHREAD_MUTEX_INITIALIZER,
};

static pthread_mutex_t init_m = PTHREAD_MUTEX_INITIALIZER;
static int saved_blas_threads;

#define DEFAULT_MAX_PENDING 65536
/* Owner placement homes handles of at least this many bytes (runtime/home.c). */
#define DEFAULT_HOME_MIN ((size_t)256 << 20)
#define DEFAULT_CUDA_STREAMS 4 /* compute lanes per GPU (tsr_config_t.cuda_streams) */

void tsr_config_init(tsr_config_t *cfg)
{
    if (!cfg)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->ncpu = 0;
    cfg->sched = NULL;
    cfg->max_pending_tasks = DEFAULT_MAX_PENDING;
    cfg->max_pending_bytes = 0;
    cfg->bind = 1;
    cfg->trace_path = NULL;
    cfg->record_path = NULL;
    cfg->ncuda = -1;
    cfg->cuda_device_deps = 1;
}

/* Parse an integer >= min (0, or -1 where the field gives -1 a meaning)
 * from the environment into *out. Returns 1 if the variable is set, 0 if
 * it is unset or empty (*out untouched), or TSR_EINVAL with a message if it
 * is not such an integer. */
static int env_long(const char *name, long min, long *out)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || x < min)
        return tsr__fail(TSR_EINVAL, "init: %s='%s' is not %s", name, v,
                         min < 0 ? "an integer >= -1" : "a non-negative integer");
    *out = x;
    return 1;
}

/* How a numeric variable lands in the configuration. */
enum env_kind {
    ENV_INT,    /* int field */
    ENV_SIZE,   /* size_t field */
    ENV_FLAG,   /* int field, any nonzero is 1 */
    ENV_MIB,    /* size_t field in bytes; the variable is in MiB, > 0 */
    ENV_SCALED, /* double field = value * scale */
};

/* The largest MiB count whose bytes fit in a size_t. */
#define MAX_MIB ((SIZE_MAX >> 20) > LONG_MAX ? LONG_MAX : (long)(SIZE_MAX >> 20))

/* [min, max]: what the field accepts, checked on the variable's value
 * before it is converted, so that a value beyond the field's type (an int
 * field given 2^32 + 2) is refused instead of wrapping into range. */
static const struct env_var {
    const char *name;
    size_t offset;
    enum env_kind kind;
    double scale;
    long min, max;
} env_vars[] = {
    {"TESSERA_NCPU", offsetof(tsr_config_t, ncpu), ENV_INT, 0, -1, 4096},
    {"TESSERA_MAX_PENDING", offsetof(tsr_config_t, max_pending_tasks), ENV_SIZE, 0, 0, LONG_MAX},
    {"TESSERA_MAX_PENDING_BYTES", offsetof(tsr_config_t, max_pending_bytes), ENV_SIZE, 0, 0,
     LONG_MAX},
    {"TESSERA_BIND", offsetof(tsr_config_t, bind), ENV_FLAG, 0, 0, LONG_MAX},
    {"TESSERA_NSIM", offsetof(tsr_config_t, nsim), ENV_INT, 0, 0, 16},
    {"TESSERA_NCUDA", offsetof(tsr_config_t, ncuda), ENV_INT, 0, -1, INT_MAX},
    {"TESSERA_SIM_BW", offsetof(tsr_config_t, sim_bandwidth), ENV_SCALED, 1e6, 0,
     LONG_MAX}, /* MB/s */
    {"TESSERA_SIM_LATENCY", offsetof(tsr_config_t, sim_latency), ENV_SCALED, 1e-6, 0,
     LONG_MAX}, /* µs */
    {"TESSERA_LIMIT_SIM_MEM", offsetof(tsr_config_t, sim_mem), ENV_MIB, 0, 1, MAX_MIB},
    {"TESSERA_LIMIT_CUDA_MEM", offsetof(tsr_config_t, cuda_mem), ENV_MIB, 0, 1, MAX_MIB},
    {"TESSERA_LIMIT_HOST_MEM", offsetof(tsr_config_t, host_mem), ENV_MIB, 0, 1, MAX_MIB},
    {"TESSERA_PIPELINE", offsetof(tsr_config_t, pipeline), ENV_INT, 0, 0, 8},
    {"TESSERA_CUDA_STREAMS", offsetof(tsr_config_t, cuda_streams), ENV_INT, 0, 0, 8},
    {"TESSERA_CUDA_DEVICE_DEPS", offsetof(tsr_config_t, cuda_device_deps), ENV_FLAG, 0, 0,
     LONG_MAX},
    {"TESSERA_STATS", offsetof(tsr_config_t, stats), ENV_FLAG, 0, 0, LONG_MAX},
    {"TESSERA_DETERMINISTIC", offsetof(tsr_config_t, deterministic), ENV_FLAG, 0, 0, LONG_MAX},
    {"TESSERA_CALIBRATE", offsetof(tsr_config_t, calibrate), ENV_INT, 0, 0, 2},
    {"TESSERA_SIMULATE_EXEC", offsetof(tsr_config_t, simulate_exec), ENV_FLAG, 0, 0, LONG_MAX},
    {"TESSERA_SIMULATE_NO_DISK", offsetof(tsr_config_t, simulate_no_disk), ENV_FLAG, 0, 0,
     LONG_MAX},
    {"TESSERA_LIMIT_DISK_MEM", offsetof(tsr_config_t, disk_mem), ENV_MIB, 0, 1, MAX_MIB},
    {"TESSERA_HOME_MIN", offsetof(tsr_config_t, home_min), ENV_MIB, 0, 1, MAX_MIB},
};

static int apply_env(tsr_config_t *cfg)
{
    for (size_t i = 0; i < sizeof env_vars / sizeof env_vars[0]; i++) {
        const struct env_var *v = &env_vars[i];
        long x = 0;
        int rc = env_long(v->name, v->min < 0 ? -1 : 0, &x);
        if (rc <= 0) {
            if (rc < 0)
                return rc;
            continue;
        }
        if (v->kind == ENV_MIB && x == 0)
            return tsr__fail(TSR_EINVAL, "init: %s=0: a memory limit is in MiB and "
                             "must be positive", v->name);
        if (v->kind == ENV_MIB && x > v->max)
            return tsr__fail(TSR_EINVAL, "init: %s=%ld MiB: more bytes than a size_t holds "
                             "(at most %ld MiB)", v->name, x, v->max);
        if (x < v->min || x > v->max)
            return tsr__fail(TSR_EINVAL, "init: %s=%ld is out of range (%ld to %ld)",
                             v->name, x, v->min, v->max);
        void *field = (char *)cfg + v->offset;
        switch (v->kind) {
        case ENV_INT: *(int *)field = (int)x; break;
        case ENV_SIZE: *(size_t *)field = (size_t)x; break;
        case ENV_FLAG: *(int *)field = x != 0; break;
        case ENV_SCALED: *(double *)field = (double)x * v->scale; break;
        case ENV_MIB: *(size_t *)field = (size_t)x << 20; break;
        }
    }
    const char *s = getenv("TESSERA_SCHED");
    if (s && *s)
        cfg->sched = s;
    s = getenv("TESSERA_TRACE");
    if (s && *s)
        cfg->trace_path = s;
    s = getenv("TESSERA_RECORD");
    if (s && *s)
        cfg->record_path = s;
    s = getenv("TESSERA_PERFMODEL_DIR");
    if (s)
        cfg->perfmodel_dir = s; /* "" keeps models in memory only */
    s = getenv("TESSERA_SIMULATE");
    if (s && *s)
        cfg->simulate = s;
    s = getenv("TESSERA_DISK_DIR");
    if (s && *s)
        cfg->disk_dir = s;
    /* the settings named by words: the word's index in `words` is its
     * value (TSR_EVICT_…, TSR_PLACEMENT_…, TSR_CUDA_FP32_… count from 0) */
    static const struct env_word {
        const char *name;
        size_t field;
        const char *words[3];
        const char *expected;
    } words[] = {
        {"TESSERA_EVICT", offsetof(tsr_config_t, evict), {"window", "lru"}, "window or lru"},
        {"TESSERA_PLACEMENT", offsetof(tsr_config_t, placement),
         {"auto", "replicate", "owner"}, "auto, replicate or owner"},
        {"TESSERA_CUDA_FP32", offsetof(tsr_config_t, cuda_fp32), {"tf32", "strict"},
         "tf32 or strict"},
    };
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        const struct env_word *v = &words[i];
        s = getenv(v->name);
        if (!s || !*s)
            continue;
        int k = 0;
        while (k < 3 && !(v->words[k] && strcmp(s, v->words[k]) == 0))
            k++;
        if (k == 3)
            return tsr__fail(TSR_EINVAL, "init: %s=%s: expected %s", v->name, s, v->expected);
        *(int *)((char *)cfg + v->field) = k;
    }
    return TSR_OK;
}

/* ---- start and stop, in named steps ------------------------------------- */

/* The configuration: the caller's (or the defaults), the environment on
 * top, checked, its strings copied (the caller's may not outlive init),
 * and the counters of a fresh run. Touches nothing that needs undoing. */
static int init_config(const tsr_config_t *user)
{
    tsr_config_t cfg;
    if (user)
        cfg = *user;
    else
        tsr_config_init(&cfg);
    int rc = apply_env(&cfg);
    if (rc)
        return rc;
    if (cfg.max_pending_tasks == 0)
        cfg.max_pending_tasks = DEFAULT_MAX_PENDING;
    if (cfg.ncpu > 4096 || cfg.nsim < 0 || cfg.nsim > 16 || cfg.pipeline < 0 ||
        cfg.pipeline > 8 || cfg.sim_bandwidth < 0 || cfg.sim_latency < 0 ||
        cfg.calibrate < 0 || cfg.calibrate > 2 || cfg.cuda_streams < 0 ||
        cfg.cuda_streams > 8 || cfg.placement < TSR_PLACEMENT_AUTO ||
        cfg.placement > TSR_PLACEMENT_OWNER ||
        (cfg.evict != TSR_EVICT_WINDOW && cfg.evict != TSR_EVICT_LRU))
        return tsr__fail(TSR_EINVAL,
                         "init: ncpu=%d, nsim=%d (0-16), pipeline=%d (0-8), sim "
                         "bandwidth %g, sim latency %g, calibrate=%d (0-2), evict=%d "
                         "(0-1), cuda_streams=%d (0-8), placement=%d (0-2): out of range",
                         cfg.ncpu, cfg.nsim, cfg.pipeline, cfg.sim_bandwidth,
                         cfg.sim_latency, cfg.calibrate, cfg.evict, cfg.cuda_streams,
                         cfg.placement);
    if (cfg.disk_dir && !cfg.disk_dir[0])
        cfg.disk_dir = NULL;
    if (cfg.disk_dir && cfg.simulate)
        return tsr__fail(TSR_EINVAL, "init: a disk tier (disk_dir '%s') is not "
                         "simulated: unset it, or the platform file", cfg.disk_dir);
    if (cfg.disk_dir) {
        snprintf(tsr__rt.disk_dir, sizeof tsr__rt.disk_dir, "%s", cfg.disk_dir);
        cfg.disk_dir = tsr__rt.disk_dir;
    }

    snprintf(tsr__rt.sched_name, sizeof tsr__rt.sched_name, "%s",
             cfg.sched ? cfg.sched : "eager");
    cfg.sched = tsr__rt.sched_name;
    tsr__rt.recording = cfg.record_path != NULL;
    if (cfg.record_path) {
        snprintf(tsr__rt.record_path, sizeof tsr__rt.record_path, "%s", cfg.record_path);
        cfg.record_path = tsr__rt.record_path;
    }
    tsr__rt.tracing = cfg.trace_path != NULL;
    if (cfg.trace_path) {
        snprintf(tsr__rt.trace_path, sizeof tsr__rt.trace_path, "%s",
                 cfg.trace_path);
        cfg.trace_path = tsr__rt.trace_path;
    }
    if (cfg.perfmodel_dir) {
        snprintf(tsr__rt.perfmodel_dir, sizeof tsr__rt.perfmodel_dir, "%s",
                 cfg.perfmodel_dir);
        cfg.perfmodel_dir = tsr__rt.perfmodel_dir;
    }
    if (cfg.simulate) {
        snprintf(tsr__rt.simulate_path, sizeof tsr__rt.simulate_path, "%s", cfg.simulate);
        cfg.simulate = tsr__rt.simulate_path;
    }
    cfg.simulate_exec = cfg.simulate_exec != 0;
    tsr__rt.driver = cfg.simulate ? &tsr__driver_simulate : &tsr__driver_threads;
    tsr__rt.cfg = cfg;
    tsr__rt.low_water = (long)(cfg.max_pending_tasks * 3 / 4);
    tsr__set_window_bytes(cfg.max_pending_bytes);
    atomic_store(&tsr__rt.stop, 0);
    atomic_store(&tsr__rt.pending, 0);
    atomic_store(&tsr__rt.pending_bytes, 0);
    atomic_store(&tsr__rt.nacquired, 0);
    atomic_store(&tsr__rt.nthrottled, 0);
    tsr__rt.nfailed = tsr__rt.ncancelled = 0;
    tsr__rt.first_error[0] = 0;
    tsr__rt.t0_ns = tsr__mem_now_ns();
    return TSR_OK;
}

/* Each step below leaves nothing behind when it fails, and has an undo
 * step; tsr_init undoes the steps that succeeded, in reverse, when a
 * later one fails, and tsr_shutdown undoes them all. */

/* The memory configuration init_driver fills and init_memory opens. */
static tsr_mem_config_t mem_config;

/* The driver's own start (the simulation: platform, virtual clock), and
 * its part of the memory configuration. */
static int init_driver(void)
{
    const tsr_config_t *cfg = &tsr__rt.cfg;
    mem_config = (tsr_mem_config_t){
        .nsim = cfg->nsim,
        .sim_capacity = cfg->sim_mem ? cfg->sim_mem : (size_t)256 << 20,
        .sim_bandwidth = cfg->sim_bandwidth,
        .sim_latency = cfg->sim_latency,
        .ncuda = cfg->ncuda,
        .cuda_capacity = cfg->cuda_mem,
        .cuda_lanes = cfg->cuda_streams ? cfg->cuda_streams : DEFAULT_CUDA_STREAMS,
        .host_capacity = cfg->host_mem,
        .disk_dir = cfg->disk_dir,
        .disk_capacity = cfg->disk_mem,
        .evict = cfg->evict,
        .tracing = tsr__rt.tracing,
    };
    return tsr__rt.driver->open(&mem_config);
}

static void fini_driver(void) { tsr__rt.driver->close(); }

/* The memory nodes: host, simulated accelerators, GPUs (or the phantom
 * nodes of a simulated platform). */
static int init_memory(void)
{
    char err[256];
    int rc = tsr__mem_init(&mem_config, err, sizeof err);
    if (rc != TSR_OK)
        return tsr__fail(rc, "init: memory nodes: %s", err);
    tsr__rt.nnodes = tsr__mem_node_count();
    tsr__next_use_setup();
    return TSR_OK;
}

/* The worker table (no threads yet). */
static int init_workers(void)
{
    int rc = tsr__rt.driver->start();
    if (rc != TSR_OK)
        tsr__rt.driver->free(); /* whatever was made before the failure */
    return rc;
}

static void fini_workers(void) { tsr__rt.driver->free(); }

/* Device-ordered dependencies need a GPU whose node orders lanes by
 * events, and a policy that does not plan every task it was told of (a
 * `submitted` hook: heft), since tasks released to a device bypass it. */
static bool device_deps_usable(void)
{
    if (!tsr__rt.cfg.cuda_device_deps || tsr__rt.sched.policy->submitted)
        return false;
    for (int i = 0; i < tsr__rt.nworkers; i++) {
        const tsr_node_t *n = tsr__mem_node(tsr__rt.workers[i].node);
        if (tsr__rt.workers[i].device_kind == TSR_DEVICE_CUDA && n->ops->exec_record &&
            n->ops->exec_wait)
            return true;
    }
    return false;
}

/* The scheduling policy. */
static int init_sched(void)
{
    int rc = tsr__sched_open(&tsr__rt.sched, tsr__rt.sched_name);
    if (rc == TSR_OK)
        tsr__rt.device_deps = device_deps_usable();
    return rc;
}
static void fini_sched(void) { tsr__sched_close(&tsr__rt.sched); }

/* Performance models: loaded for every run (an application may read or
 * feed them); workers sample every task and the bus is calibrated only
 * when the policy uses models or calibration was asked for. */
static int init_models(void)
{
    char err[256];
    int rc = tsr__perfmodel_open(tsr__rt.cfg.perfmodel_dir, tsr__rt.cfg.calibrate,
                                 err, sizeof err);
    if (rc != TSR_OK)
        return tsr__fail(rc, "init: performance models: %s", err);
    const tsr_sched_policy_t *p = tsr__rt.sched.policy;
    bool models = (p->flags & TSR_SCHED_USES_MODELS) || tsr__rt.cfg.calibrate;
    /* Only measured durations feed the models. */
    tsr__rt.sampling = models && tsr__rt.driver->measures;
    if (models) {
        rc = tsr__bus_calibrate(err, sizeof err);
        if (rc != TSR_OK) {
            tsr__perfmodel_close();
            return tsr__fail(rc, "init: bus model: %s", err);
        }
        tsr__mem_reset_counters();
    }
    return TSR_OK;
}

/* The worker threads. Tile tasks call BLAS: parallelism comes from tasks,
 * so BLAS runs single-threaded while they run. (oneDNN's OpenMP thread
 * count is per thread: each worker sets its own to 1, runtime/worker.c;
 * the application's threads keep theirs.) */
static int start_workers(void)
{
    saved_blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
    int rc = tsr__rt.driver->launch();
    if (rc != TSR_OK)
        openblas_set_num_threads(saved_blas_threads);
    return rc;
}

static void stop_workers(void)
{
    tsr__rt.driver->stop();
    openblas_set_num_threads(saved_blas_threads);
}

/* The task-graph record (record.c), when the configuration asks for one;
 * shutdown closes it itself (reporting a failed write) before the undo. */
static int init_record(void)
{
    if (!tsr__rt.recording)
        return TSR_OK;
    return tsr__record_open(tsr__rt.record_path);
}

static void fini_record(void)
{
    if (tsr__rt.recording)
        (void)tsr__record_close();
}

/* Homes (runtime/home.c): the placement the configuration asks for. */
static int init_homes(void)
{
    tsr__rt.home_min = tsr__rt.cfg.home_min ? tsr__rt.cfg.home_min : DEFAULT_HOME_MIN;
    atomic_store(&tsr__rt.homes_used, false);
    return tsr__home_init();
}

static const struct init_step {
    int (*start)(void);
    void (*undo)(void);
} steps[] = {
    {init_driver, fini_driver},
    {init_memory, tsr__mem_shutdown},
    {init_workers, fini_workers},
    {init_sched, fini_sched},
    {init_homes, tsr__home_fini}, /* reads the policy's flags */
    {init_models, tsr__perfmodel_close},
    {init_record, fini_record},
    {start_workers, stop_workers},
};
enum { NSTEPS = sizeof steps / sizeof steps[0] };

/* Undo steps[0 .. n-1], last first. */
static void undo_steps(int n)
{
    while (n-- > 0)
        steps[n].undo();
}

/* Instance numbers: `instances` counts every tsr_init that succeeded (under
 * init_m), `instance` is the running one's, 0 after shutdown. */
static uint64_t instances;
static _Atomic uint64_t instance;

uint64_t tsr__runtime_instance(void)
{
    return atomic_load_explicit(&instance, memory_order_relaxed);
}

int tsr_init(const tsr_config_t *user)
{
    pthread_mutex_lock(&init_m);
    int rc = TSR_OK;
    if (tsr__running()) {
        rc = tsr__fail(TSR_ESTATE, "init: runtime already initialized");
        goto out;
    }
    rc = init_config(user);
    for (int i = 0; i < NSTEPS && rc == TSR_OK; i++) {
        rc = steps[i].start();
        if (rc != TSR_OK)
            undo_steps(i);
    }
    if (rc == TSR_OK) {
        atomic_store_explicit(&instance, ++instances, memory_order_relaxed);
        atomic_store_explicit(&tsr__rt.initialized, 1, memory_order_release);
    }
out:
    pthread_mutex_unlock(&init_m);
    return rc;
}

/* Forget the tag table (every tag's count is zero). */
static void free_tags(void)
{
    pthread_mutex_lock(&tsr__rt.tag_m);
    free(tsr__rt.tag_keys);
    free(tsr__rt.tag_counts);
    tsr__rt.tag_keys = NULL;
    tsr__rt.tag_counts = NULL;
    tsr__rt.tag_cap = tsr__rt.tag_used = 0;
    pthread_mutex_unlock(&tsr__rt.tag_m);
}

/* Keep the first failure's status and message (later calls overwrite the
 * thread's message). */
static void keep_first(int *rc, char *msg, size_t len, int r)
{
    if (*rc == TSR_OK && r != TSR_OK) {
        *rc = r;
        snprintf(msg, len, "%s", tsr_error_message());
    }
}

int tsr_shutdown(void)
{
    if (tsr__in_codelet())
        return tsr__fail(TSR_ESTATE, "shutdown: called from inside a codelet (it would wait "
                         "for the task that runs it)");
    pthread_mutex_lock(&init_m);
    if (!tsr__running()) {
        pthread_mutex_unlock(&init_m);
        return tsr__fail(TSR_ESTATE, "shutdown: runtime not initialized");
    }
    /* Drain: acquired handles would block tasks forever, so release them
     * first; then every task, then every handle still registered. */
    tsr__handles_release_acquired();
    int rc = TSR_OK;
    char msg[1024] = "";
    keep_first(&rc, msg, sizeof msg, tsr_wait_all());
    keep_first(&rc, msg, sizeof msg, tsr__handles_unregister_all());
    /* Unregistering closed open REDUX groups: report their failures. */
    keep_first(&rc, msg, sizeof msg, tsr_wait_all());
    /* Every communication task is complete: its thread may go. */
    tsr__comm_stop();
    tsr__handles_fini();
    if (tsr__rt.cfg.stats)
        tsr_stats_print(stderr);
    /* Stop: threads and copy engines first, so that the trace is complete;
     * then undo the rest of init. */
    stop_workers();
    tsr__mem_stop();
    if (tsr__rt.tracing)
        keep_first(&rc, msg, sizeof msg, tsr__trace_write(tsr__rt.trace_path));
    if (tsr__rt.recording) {
        keep_first(&rc, msg, sizeof msg, tsr__record_close());
        tsr__rt.recording = false;
    }
    tsr__comm_trace_free();
    undo_steps(NSTEPS - 1); /* everything but start_workers, undone above */
    tsr__taskref_fini();
    tsr__tasks_free_pool();
    free_tags();
    atomic_store_explicit(&instance, 0, memory_order_relaxed);
    atomic_store_explicit(&tsr__rt.initialized, 0, memory_order_release);
    pthread_mutex_unlock(&init_m);
    if (rc != TSR_OK)
        tsr__fail(rc, "%s", msg);
    return rc;
}

double tsr_time(void)
{
    if (!tsr__running())
        return 0.0;
    return (double)(tsr__now_ns() - tsr__rt.t0_ns) * 1e-9;
}

void tsr__workers_notify(int target) { tsr__rt.driver->notify(target); }

int tsr_worker_count(void)
{
    return tsr__running() ? tsr__rt.nworkers : 0;
}
