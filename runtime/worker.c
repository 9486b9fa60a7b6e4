/* runtime/worker.c — worker threads: take a task from the policy, run its
 * implementation, complete it; sleep when there is nothing to do.
 *
 * Sleeping without lost wake-ups: every push bumps `epoch` before looking
 * for sleepers; a worker announces itself asleep before it re-reads the
 * epoch. With sequentially consistent atomics one of the two always sees the
 * other, so a pushed task is never left with every worker asleep.
 */
#include "runtime/internal.h"

#include <hwloc.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* Pause iterations a worker polls before sleeping (about 20-50 µs). */
#define SPIN_ROUNDS 2000

static hwloc_topology_t topo;
static bool topo_loaded;

uint64_t tsr__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void bind_worker(tsr_worker_t *w)
{
    if (!topo_loaded || w->cpu < 0)
        return;
    hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, (unsigned)w->cpu);
    if (!core)
        core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PU, (unsigned)w->cpu);
    if (!core || !core->cpuset)
        return;
    hwloc_cpuset_t set = hwloc_bitmap_dup(core->cpuset);
    hwloc_bitmap_singlify(set);
    /* Binding is an optimization: a refusal (containers) is not an error. */
    (void)hwloc_set_cpubind(topo, set, HWLOC_CPUBIND_THREAD);
    hwloc_bitmap_free(set);
}

/* Run one task on worker w. */
static void run_task(tsr_worker_t *w, tsr_task_t t)
{
    void *bufs[TSR_MAX_BUFFERS];
    for (int i = 0; i < t->nbuffers; i++) {
        if (t->acc[i].mode == TSR_SCRATCH) {
            if (w->scratch_size[i] < t->sizes[i]) {
                free(w->scratch[i]);
                size_t sz = (t->sizes[i] + 63) & ~(size_t)63;
                w->scratch[i] = aligned_alloc(64, sz);
                w->scratch_size[i] = w->scratch[i] ? sz : 0;
            }
            bufs[i] = w->scratch[i];
        } else {
            bufs[i] = tsr__handle_ptr(t->acc[i].handle);
        }
        if (!bufs[i]) {
            t->error_code = TSR_ENOMEM;
            tsr__task_complete(t, TSR_RESULT_FAILED, w->id);
            return;
        }
    }
    tsr_exec_t exec = {
        .worker = w->id,
        .device_kind = w->device_kind,
        .nbuffers = t->nbuffers,
        .sizes = t->sizes,
        .cuda_stream = NULL,
    };
    uint64_t start = tsr__rt.tracing ? tsr__now_ns() : 0;
    int rc = t->cl->impl[w->device_kind](bufs, t->args, &exec);
    if (tsr__rt.tracing)
        tsr__trace_record(w, t->name, start, tsr__now_ns());
    t->error_code = rc;
    tsr__tl_self_slot = true;
    tsr__task_complete(t, rc == 0 ? TSR_RESULT_OK : TSR_RESULT_FAILED, w->id);
    tsr__tl_self_slot = false;
}

static void wake_one_sleeper(void);

static void *worker_main(void *arg)
{
    tsr_worker_t *w = arg;
    tsr__tl_worker = w->id;
    bind_worker(w);
    const tsr_sched_policy_t *pol = tsr__rt.sched.policy;
    while (!atomic_load_explicit(&tsr__rt.stop, memory_order_acquire)) {
        uint64_t e = atomic_load(&tsr__rt.epoch);
        tsr_task_t t = pol->pop(&tsr__rt.sched, w->id);
        if (t) {
            /* Tasks still queued while a worker sleeps (a polling worker
             * absorbs the wake-ups of a burst of pushes): pass one on. */
            if (atomic_fetch_sub(&tsr__rt.nqueued, 1) > 1 &&
                atomic_load(&tsr__rt.nsleeping) > 0)
                wake_one_sleeper();
            run_task(w, t);
            continue;
        }
        /* Poll a while: a task often arrives within microseconds. */
        atomic_fetch_add(&tsr__rt.nspinning, 1);
        bool changed = false;
        for (int i = 0; i < SPIN_ROUNDS && !changed; i++) {
            /* Yield now and then: with more threads than cores (a submitter
             * beside every worker) the spinner may hold the core the
             * submitter needs. */
            if (i % 128 == 127)
                sched_yield();
            else
                cpu_relax();
            changed = atomic_load_explicit(&tsr__rt.epoch, memory_order_relaxed) != e;
        }
        if (changed) {
            atomic_fetch_sub(&tsr__rt.nspinning, 1);
            continue;
        }
        pthread_mutex_lock(&w->m);
        atomic_store(&w->sleeping, 1);
        atomic_fetch_add(&tsr__rt.nsleeping, 1);
        atomic_fetch_sub(&tsr__rt.nspinning, 1);
        /* A waker claims us by clearing `sleeping` (then signals under m):
         * once claimed we go back to the policy even if the epoch did not
         * move, so a claimed worker can never stay asleep. */
        while (atomic_load(&w->sleeping) && atomic_load(&tsr__rt.epoch) == e &&
               !atomic_load(&tsr__rt.stop))
            pthread_cond_wait(&w->cv, &w->m);
        atomic_store(&w->sleeping, 0);
        atomic_fetch_sub(&tsr__rt.nsleeping, 1);
        pthread_mutex_unlock(&w->m);
    }
    tsr__tasks_flush_cache();
    return NULL;
}

static void wake(tsr_worker_t *w)
{
    pthread_mutex_lock(&w->m);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->m);
}

/* Claim a sleeping worker (so that the next notify picks another one even
 * if this one has not run yet) and wake it. */
static bool claim_and_wake(tsr_worker_t *w)
{
    if (!atomic_load(&w->sleeping) || !atomic_exchange(&w->sleeping, 0))
        return false;
    wake(w);
    return true;
}

static void wake_one_sleeper(void)
{
    for (int i = 0; i < tsr__rt.nworkers; i++)
        if (claim_and_wake(&tsr__rt.workers[i]))
            return;
}

void tsr__workers_notify(int target)
{
    atomic_fetch_add(&tsr__rt.epoch, 1);
    if (target >= 0 && target < tsr__rt.nworkers) {
        claim_and_wake(&tsr__rt.workers[target]);
        return;
    }
    /* A polling worker sees the new epoch by itself. */
    if (atomic_load(&tsr__rt.nspinning) > 0)
        return;
    wake_one_sleeper();
}

int tsr__workers_start(void)
{
    int ncores = 1;
    if (hwloc_topology_init(&topo) == 0) {
        if (hwloc_topology_load(topo) == 0) {
            topo_loaded = true;
            ncores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
            if (ncores <= 0)
                ncores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
            if (ncores <= 0)
                ncores = 1;
        } else {
            hwloc_topology_destroy(topo);
        }
    }
    int n = tsr__rt.cfg.ncpu > 0 ? tsr__rt.cfg.ncpu : ncores;
    tsr__rt.workers = calloc((size_t)n, sizeof *tsr__rt.workers);
    if (!tsr__rt.workers)
        return tsr__fail(TSR_ENOMEM, "init: cannot allocate %d workers", n);
    tsr__rt.nworkers = n;
    for (int i = 0; i < n; i++) {
        tsr_worker_t *w = &tsr__rt.workers[i];
        w->id = i;
        w->device_kind = TSR_DEVICE_CPU;
        tsr__rt.nworkers_of_kind[TSR_DEVICE_CPU]++;
        /* More workers than cores share cores (oversubscription is the
         * user's choice); binding then wraps around. */
        w->cpu = tsr__rt.cfg.bind ? i % ncores : -1;
        pthread_mutex_init(&w->m, NULL);
        pthread_cond_init(&w->cv, NULL);
    }
    return TSR_OK;
}

int tsr__workers_launch(void)
{
    for (int i = 0; i < tsr__rt.nworkers; i++) {
        tsr_worker_t *w = &tsr__rt.workers[i];
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            /* Stop the ones already running. */
            atomic_store(&tsr__rt.stop, 1);
            for (int k = 0; k < i; k++) {
                wake(&tsr__rt.workers[k]);
                pthread_join(tsr__rt.workers[k].thread, NULL);
            }
            return tsr__fail(TSR_ENOMEM, "init: cannot start worker thread %d", i);
        }
    }
    return TSR_OK;
}

void tsr__workers_stop(void)
{
    atomic_store(&tsr__rt.stop, 1);
    for (int i = 0; i < tsr__rt.nworkers; i++)
        wake(&tsr__rt.workers[i]);
    for (int i = 0; i < tsr__rt.nworkers; i++)
        pthread_join(tsr__rt.workers[i].thread, NULL);
}

void tsr__workers_free(void)
{
    for (int i = 0; i < tsr__rt.nworkers; i++) {
        tsr_worker_t *w = &tsr__rt.workers[i];
        for (int k = 0; k < TSR_MAX_BUFFERS; k++)
            free(w->scratch[k]);
        free(w->ev);
        pthread_mutex_destroy(&w->m);
        pthread_cond_destroy(&w->cv);
    }
    free(tsr__rt.workers);
    tsr__rt.workers = NULL;
    tsr__rt.nworkers = 0;
    for (int k = 0; k < TSR_DEVICE_KINDS; k++)
        tsr__rt.nworkers_of_kind[k] = 0;
    if (topo_loaded) {
        hwloc_topology_destroy(topo);
        topo_loaded = false;
    }
}
