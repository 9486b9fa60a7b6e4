/* runtime/worker.c — the threads driver (runtime/driver.h): one thread per
 * worker takes a task from the policy, runs its implementation, completes
 * it, and sleeps when there is nothing to do; the application's thread
 * waits on a condition variable. What a worker does the same way under
 * every driver is in execute.c.
 *
 * Sleeping without lost wake-ups: every push bumps `epoch` before looking
 * for sleepers; a worker announces itself asleep before it re-reads the
 * epoch. With sequentially consistent atomics one of the two always sees the
 * other, so a pushed task is never left with every worker asleep.
 */
#include "runtime/driver.h"
#include "runtime/internal.h"
#include "kernels/gemm.h"
#ifdef TSR_HAVE_CUDA
#include "kernels/cuda_status.h"
#endif

#include <hwloc.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- data ---------------------------------------------------------------- */

/* Engine or kicking thread: every buffer of t is on its worker's node. */
static void data_ready(tsr_mem_req_t *r)
{
    tsr_task_t t = r->arg;
    tsr_worker_t *w = &tsr__rt.workers[t->run_worker];
    pthread_mutex_lock(&w->m);
    atomic_store(&t->data_state, DATA_READY);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->m);
}

/* An implementation returned rc != 0 with no message of the runtime's: on
 * a GPU, say what the CUDA kernels' status (kernels/cuda_status.h) says —
 * the message itself if this call set it, else as the thread's last one. */
static void describe_impl_failure(tsr_worker_t *w, tsr_task_t t, int rc, const char *before)
{
#ifdef TSR_HAVE_CUDA
    if (w->device_kind == TSR_DEVICE_CUDA && !t->mreq.err[0]) {
        const char *now = tsr_cuda_last_error();
        if (now[0] && strcmp(now, before) != 0)
            snprintf(t->mreq.err, sizeof t->mreq.err, "%s", now);
        else if (now[0])
            snprintf(t->mreq.err, sizeof t->mreq.err,
                     "its implementation returned %d (the thread's last CUDA error: %s)", rc,
                     now);
    }
#else
    (void)w;
    (void)t;
    (void)rc;
    (void)before;
#endif
}

/* Index in w->running of launch (mark, seq), or -1: complete already (a
 * mark is reused once its task completed; the launch number tells). */
static int running_index(const tsr_worker_t *w, int mark, uint64_t seq)
{
    for (int j = 0; j < w->nrunning; j++)
        if (w->run_mark[j] == mark && w->run_seq[j] == seq)
            return j;
    return -1;
}

static void complete_running(tsr_worker_t *w, int i, int r, const char *why);

/* running_index of the launch in t's wait slot k. */
static int dwait_index(const tsr_worker_t *w, tsr_task_t t, int k)
{
    return running_index(w, atomic_load_explicit(&t->dwait[k].mark, memory_order_relaxed),
                         atomic_load_explicit(&t->dwait[k].seq, memory_order_relaxed));
}

/* t follows every task launched before it on w's device (more launched
 * predecessors than slots; only for a task released to this device: one
 * made ready otherwise runs after its predecessors' completions). */
static bool follows_all(tsr_task_t t)
{
    return t->via_devq && atomic_load(&t->dwait_all);
}

/* The launches t follows on its device (tsr_task.dwait). */
static int dwait_count(tsr_task_t t)
{
    int n = atomic_load(&t->ndwait);
    return n < TSR_DWAIT_MAX ? n : TSR_DWAIT_MAX;
}

/* The launched predecessors of t (device-ordered: t's kernels waited for
 * theirs) that are still running ended before t: complete them first, so
 * that one that failed cancels t before t completes. `before`: t's launch
 * number (UINT64_MAX: t was not kept running): with dwait_all, every task
 * launched before t is one of them. */
static void complete_dev_preds(tsr_worker_t *w, tsr_task_t t, uint64_t before)
{
    tsr_node_t *node = tsr__mem_node(w->node);
    if (follows_all(t)) {
        for (int j = 0; j < w->nrunning;) {
            if (w->run_seq[j] >= before) {
                j++;
                continue;
            }
            char why[TSR_MEM_ERR] = "";
            int r = node->ops->exec_poll(node, w->run_mark[j], true, why, sizeof why);
            complete_running(w, j, r, why);
            j = 0; /* completions may have removed others */
        }
        return;
    }
    for (int k = 0, n = dwait_count(t); k < n; k++) {
        int j = dwait_index(w, t, k);
        if (j < 0)
            continue;
        char why[TSR_MEM_ERR] = "";
        int r = node->ops->exec_poll(node, w->run_mark[j], true, why, sizeof why);
        complete_running(w, j, r, why);
    }
}

/* Complete launched task i, whose mark poll said r (1, or a TSR_E… code
 * with the reason in why). */
static void complete_running(tsr_worker_t *w, int i, int r, const char *why)
{
    tsr_task_t t = w->running[i];
    if (r < 0 && !t->mreq.err[0])
        snprintf(t->mreq.err, sizeof t->mreq.err, "%s", why);
    uint64_t start = w->run_start[i];
    uint64_t seq = w->run_seq[i];
    for (int k = i + 1; k < w->nrunning; k++) {
        w->running[k - 1] = w->running[k];
        w->run_mark[k - 1] = w->run_mark[k];
        w->run_lane[k - 1] = w->run_lane[k];
        w->run_start[k - 1] = w->run_start[k];
        w->run_seq[k - 1] = w->run_seq[k];
    }
    w->nrunning--;
    complete_dev_preds(w, t, seq);
    tsr__worker_finish(w, t, r < 0 ? r : 0, start);
}

/* Complete w's launched tasks whose kernels have finished (lanes finish in
 * any order, each lane in launch order). wait: if none has, block until
 * the oldest has. Returns whether one completed. */
static bool reap_running(tsr_worker_t *w, bool wait)
{
    tsr_node_t *node = tsr__mem_node(w->node);
    bool progress = false;
    for (int i = 0; i < w->nrunning;) {
        char why[TSR_MEM_ERR] = "";
        int r = node->ops->exec_poll(node, w->run_mark[i], false, why, sizeof why);
        if (r == 0) {
            i++;
            continue;
        }
        complete_running(w, i, r, why);
        progress = true;
    }
    if (!progress && wait && w->nrunning > 0) {
        char why[TSR_MEM_ERR] = "";
        int r = node->ops->exec_poll(node, w->run_mark[0], true, why, sizeof why);
        complete_running(w, 0, r, why);
        progress = true;
    }
    return progress;
}

/* The compute lane for t: lane 0 for a task with scratch buffers (they
 * are reused in stream order), else the lane with the fewest of w's
 * launched tasks (the first such after the last one chosen): independent
 * ready tasks run side by side on the device. */
/* Whether t adds into a REDUX accumulator (this worker's, runtime/redux.c)
 * that running task r adds into too. */
static bool shares_accumulator(tsr_task_t r, tsr_task_t t)
{
    for (int i = 0; i < t->nbuffers; i++)
        for (int k = 0; t->acc_of[i] && k < r->nbuffers; k++)
            if (r->acc_of[k] && r->data[k] == t->data[i])
                return true;
    return false;
}

/* The lane of w's last running task that adds into an accumulator t adds
 * into; -1 if none. */
static int accumulator_lane(const tsr_worker_t *w, tsr_task_t t)
{
    for (int k = w->nrunning - 1; k >= 0; k--)
        if (shares_accumulator(w->running[k], t))
            return w->run_lane[k];
    return -1;
}

/* Whether running tasks add into t's accumulators on two lanes or more,
 * or on another lane than 0 where t has a scratch buffer (which puts it on
 * lane 0: pick_lane). */
static bool accumulators_on_lanes(const tsr_worker_t *w, tsr_task_t t)
{
    int lane = -1;
    for (int i = 0; i < t->nbuffers; i++)
        if (t->slot[i] < 0)
            lane = 0;
    for (int k = 0; k < w->nrunning; k++)
        if (shares_accumulator(w->running[k], t)) {
            if (lane >= 0 && w->run_lane[k] != lane)
                return true;
            lane = w->run_lane[k];
        }
    return false;
}

static int pick_lane(tsr_worker_t *w, tsr_task_t t, const tsr_node_t *node)
{
    if (node->exec_lanes <= 1)
        return 0;
    for (int i = 0; i < t->nbuffers; i++)
        if (t->slot[i] < 0)
            return 0;
    /* A REDUX member behind the running members that add into the same
     * accumulator (run_task leaves them on one lane): on their lane, so
     * that its read-modify-write follows theirs in stream order. */
    int acc_lane = accumulator_lane(w, t);
    if (acc_lane >= 0) {
        w->last_lane = acc_lane;
        return acc_lane;
    }
    /* Behind a running predecessor (device-ordered): on its lane, where
     * stream order alone keeps t after it. */
    if (follows_all(t) && w->nrunning > 0) {
        w->last_lane = w->run_lane[w->nrunning - 1];
        return w->last_lane;
    }
    for (int k = dwait_count(t) - 1; k >= 0; k--) {
        int j = dwait_index(w, t, k);
        if (j >= 0) {
            w->last_lane = w->run_lane[j];
            return w->run_lane[j];
        }
    }
    int count[TSR_PIPE_MAX] = {0};
    for (int k = 0; k < w->nrunning; k++)
        count[w->run_lane[k]]++;
    int lanes = node->exec_lanes < TSR_PIPE_MAX ? node->exec_lanes : TSR_PIPE_MAX;
    int best = -1;
    for (int j = 1; j <= lanes; j++) {
        int l = (w->last_lane + j) % lanes;
        if (best < 0 || count[l] < count[best])
            best = l;
    }
    w->last_lane = best;
    return best;
}

/* Make lane wait, on the device, for t's predecessors still running on
 * other lanes (those on lane itself are before t in stream order). */
static int device_waits(tsr_worker_t *w, tsr_task_t t, tsr_node_t *node, int lane)
{
    bool all = follows_all(t);
    for (int k = 0, n = all ? w->nrunning : dwait_count(t); k < n; k++) {
        int j = all ? k : dwait_index(w, t, k);
        if (j < 0 || w->run_lane[j] == lane)
            continue;
        int rc = node->ops->exec_wait(node, lane, w->run_mark[j], t->mreq.err,
                                      sizeof t->mreq.err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Whether t needs one of w's scratch buffers to grow. */
static bool scratch_grows(const tsr_worker_t *w, tsr_task_t t)
{
    for (int i = 0; i < t->nbuffers; i++)
        if (t->slot[i] < 0 && (!w->scratch[i] || w->scratch_size[i] < t->sizes[i]))
            return true;
    return false;
}

/* Run one task whose data is on w's node. On a node that marks the end of
 * a task's kernels (a GPU: exec_record), the task stays running while the
 * worker launches the next ones, and completes in reap_running; otherwise
 * (or when its implementation failed) it is waited for and completed here. */
static void run_task(tsr_worker_t *w, tsr_task_t t)
{
    tsr_node_t *node = tsr__mem_node(w->node);
    if (atomic_load(&t->cancelled)) {
        /* Released to the device, then a predecessor failed: nothing runs,
         * and what t would have written keeps its valid copies. */
        t->mreq.published = true;
        tsr__mem_release(&t->mreq);
        tsr__task_complete(t, TSR_RESULT_CANCELLED, -1);
        return;
    }
    /* A scratch buffer is reused by the tasks launched after it (in stream
     * order); it is freed to grow only once none uses it. */
    if (w->nrunning > 0 && scratch_grows(w, t))
        while (w->nrunning > 0)
            reap_running(w, true);
    /* The members of a REDUX group on one worker add into one accumulator
     * (read-modify-write): never two at once on two lanes. t goes on the
     * lane of the running ones (pick_lane); where they run on several,
     * they finish first. */
    while (w->nrunning > 0 && accumulators_on_lanes(w, t))
        reap_running(w, true);
    void *bufs[TSR_MAX_BUFFERS];
    if (tsr__worker_buffers(w, t, bufs) != TSR_OK)
        return;
    tsr_exec_t exec = {
        .worker = w->id,
        .device_kind = w->device_kind,
        .nbuffers = t->nbuffers,
        .sizes = t->sizes,
        .memory_node = w->node,
        .cuda_fp32 = tsr__rt.cfg.cuda_fp32,
        .deterministic = tsr__rt.cfg.deterministic,
    };
    /* The CUDA kernels' last message before the call, to tell a new
     * failure from an old one. */
    char before[TSR_MEM_ERR] = "";
#ifdef TSR_HAVE_CUDA
    if (w->device_kind == TSR_DEVICE_CUDA)
        snprintf(before, sizeof before, "%s", tsr_cuda_last_error());
#endif
    uint64_t start = tsr__mem_now_ns();
    int rc = 0, begun = 0;
    int lane = pick_lane(w, t, node);
    if (node->ops->exec_begin)
        rc = begun = node->ops->exec_begin(node, lane, &exec.cuda_stream, &exec.cublas_handle,
                                           t->mreq.err, sizeof t->mreq.err);
    /* Device-ordered: the lane waits for t's predecessors still running
     * on other lanes (a failure to make it wait is t's, like begin's). */
    if (rc == 0 && w->nrunning > 0 && (dwait_count(t) > 0 || follows_all(t))) {
        t->dev_behind = follows_all(t);
        for (int k = 0, n = dwait_count(t); k < n && !t->dev_behind; k++)
            t->dev_behind = dwait_index(w, t, k) >= 0;
        rc = begun = device_waits(w, t, node, lane);
    }
    /* A failed exec_begin (no device made current) is the task's failure:
     * the implementation is not called. */
    if (rc == 0) {
        rc = tsr__worker_run_impl(t, t->cl->impl[w->device_kind], bufs, &exec);
        if (rc != 0)
            describe_impl_failure(w, t, rc, before);
        else if (node->ops->exec_begin) {
            /* how its launch was ordered after its predecessors */
            w->host_waits += t->how == TSR_READY_HOST;
            w->device_ordered += t->how == TSR_READY_DEVICE;
        }
    }
    if (rc == 0 && begun == 0 && node->ops->exec_record && w->nrunning < TSR_PIPE_MAX) {
        /* Launched: complete it when its kernels are done. */
        int mark = -1;
        char why[TSR_MEM_ERR] = "";
        rc = node->ops->exec_record(node, lane, &mark, why, sizeof why);
        if (rc == 0) {
            /* launched behind nothing of this worker's: the stream ran dry
             * (after the first launch) */
            w->drains += w->nrunning == 0 && w->launches > 0;
            w->launches++;
            /* unique among every worker's launches (t->dwait may hold a
             * launch of a worker that does not run t) */
            uint64_t seq = (uint64_t)w->id << 48 | ++w->launch_seq;
            w->running[w->nrunning] = t;
            w->run_mark[w->nrunning] = mark;
            w->run_lane[w->nrunning] = lane;
            w->run_start[w->nrunning] = start;
            w->run_seq[w->nrunning] = seq;
            w->nrunning++;
            if (tsr__rt.device_deps && node->ops->exec_wait) {
                /* What t writes is the valid copy here from now on (for
                 * tasks ordered after t on this device; its pins keep it
                 * from everyone else until t completes), and t's
                 * successors that can follow it on the device may. */
                tsr__mem_publish(&t->mreq);
                tsr__task_launched(t, w->id, mark, seq);
            }
            return;
        }
        snprintf(t->mreq.err, sizeof t->mreq.err, "%s", why);
    }
    if (node->ops->exec_end && begun == 0) {
        /* Also after a failed implementation: its queued kernels finish
         * before its buffers are released. */
        char why[TSR_MEM_ERR] = "";
        int erc = node->ops->exec_end(node, lane, why, sizeof why);
        if (erc != 0 && !t->mreq.err[0])
            snprintf(t->mreq.err, sizeof t->mreq.err, "%s", why);
        if (rc == 0)
            rc = erc;
    }
    /* What ran before t on its lane has finished too; the other lanes may
     * have finished some; t's device predecessors complete before it. */
    if (w->nrunning > 0) {
        complete_dev_preds(w, t, UINT64_MAX);
        reap_running(w, false);
    }
    tsr__worker_finish(w, t, rc, start);
}

/* Run a task of the pipeline, waiting for its data if none is there.
 * Tasks run in any order once their data is: they are all ready, so none
 * depends on another, and a later one may hold memory an earlier one
 * waits for. */
static void run_next(tsr_worker_t *w)
{
    int i = tsr__worker_first_ready(w);
    if (i < 0 && w->nrunning > 0) {
        /* A running task may hold memory a waiting request needs: complete
         * it rather than wait for data. */
        reap_running(w, true);
        return;
    }
    if (i < 0) {
        uint64_t t0 = tsr__mem_now_ns();
        pthread_mutex_lock(&w->m);
        while ((i = tsr__worker_first_ready(w)) < 0)
            pthread_cond_wait(&w->cv, &w->m);
        pthread_mutex_unlock(&w->m);
        w->wait_ns += tsr__mem_now_ns() - t0;
    }
    tsr_task_t t = tsr__worker_remove(w, i);
    if (atomic_load(&t->mreq.status) != TSR_OK)
        tsr__worker_fail(w, t, atomic_load(&t->mreq.status));
    else
        run_task(w, t);
}

static void wake_one_sleeper(void);

static void *worker_main(void *arg)
{
    tsr_worker_t *w = arg;
    tsr__tl_worker = w->id;
    bind_worker(w);
    /* One core per worker: a tile GEMM must not start a team of its own.
     * OpenBLAS's count is process-wide (runtime.c sets it); oneDNN's OpenMP
     * count is per thread, so each worker sets its own. */
    tsr_cpu_gemm_set_thread_count(1);
    while (!atomic_load_explicit(&tsr__rt.stop, memory_order_acquire)) {
        uint64_t e = atomic_load(&tsr__rt.epoch);
        if (w->nrunning > 0)
            reap_running(w, false);
        /* Keep the pipeline full: the next tasks' inputs move while one
         * runs (launched tasks count: they hold their data). */
        bool took = false;
        while (w->ninflight + w->nrunning < w->depth) {
            long left;
            tsr_task_t t = tsr__worker_next(w, &left);
            if (!t)
                break;
            took = true;
            /* Tasks still queued while a worker sleeps (a polling worker
             * absorbs the wake-ups of a burst of pushes): pass one on. */
            if (left > 0 && atomic_load(&tsr__rt.nsleeping) > 0)
                wake_one_sleeper();
            if (tsr__worker_take(w, t, data_ready))
                w->inflight[w->ninflight++] = t;
        }
        if (w->ninflight > 0) {
            run_next(w);
            continue;
        }
        if (w->nrunning > 0) {
            reap_running(w, true);
            continue;
        }
        if (took)
            continue;
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
    while (w->nrunning > 0)
        reap_running(w, true);
    tsr__worker_scratch_release(w);
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

/* A push: wake the target, or one sleeper unless a worker polls. */
static void threads_notify(int target)
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

/* The worker table; one CPU worker per core not taken by an accelerator's
 * worker unless the configuration says how many. */
static int threads_start(void)
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
    int nacc = tsr__mem_node_count() - 1 - (tsr__mem_disk_node() >= 0); /* no worker on disk */
    int ncpu = tsr__rt.cfg.ncpu > 0   ? tsr__rt.cfg.ncpu
               : tsr__rt.cfg.ncpu < 0 ? 0
               : (ncores - nacc > 1 ? ncores - nacc : 1);
    return tsr__workers_table(ncpu, ncores);
}

/* One thread per worker; on failure the ones started are stopped. */
static int threads_launch(void)
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

/* Every task is complete: stop and join every worker thread. */
static void threads_stop(void)
{
    atomic_store(&tsr__rt.stop, 1);
    for (int i = 0; i < tsr__rt.nworkers; i++)
        wake(&tsr__rt.workers[i]);
    for (int i = 0; i < tsr__rt.nworkers; i++)
        pthread_join(tsr__rt.workers[i].thread, NULL);
}

/* The worker table and the topology. */
static void threads_free(void)
{
    tsr__workers_table_free();
    if (topo_loaded) {
        hwloc_topology_destroy(topo);
        topo_loaded = false;
    }
}

/* ---- the application's thread waits ------------------------------------------ */

/* Block until pred() holds; pred is evaluated under wait_m, and every
 * change a predicate reads is followed by threads_wake. */
static int threads_wait(bool (*pred)(void *), void *arg, const char *what)
{
    (void)what;
    pthread_mutex_lock(&tsr__rt.wait_m);
    atomic_fetch_add(&tsr__rt.nwaiters, 1);
    while (!pred(arg))
        pthread_cond_wait(&tsr__rt.wait_cv, &tsr__rt.wait_m);
    atomic_fetch_sub(&tsr__rt.nwaiters, 1);
    pthread_mutex_unlock(&tsr__rt.wait_m);
    return TSR_OK;
}

/* A predicate may hold now: every waiter re-checks its own. */
static void threads_wake(void)
{
    pthread_mutex_lock(&tsr__rt.wait_m);
    pthread_cond_broadcast(&tsr__rt.wait_cv);
    pthread_mutex_unlock(&tsr__rt.wait_m);
}

/* Nothing to start before the memory nodes: the configuration's devices. */
static int threads_open(tsr_mem_config_t *mc)
{
    (void)mc;
    return TSR_OK;
}

static void threads_close(void) {}

const tsr_driver_t tsr__driver_threads = {
    .name = "threads",
    .open = threads_open,
    .close = threads_close,
    .start = threads_start,
    .launch = threads_launch,
    .stop = threads_stop,
    .free = threads_free,
    .notify = threads_notify,
    .wait = threads_wait,
    .wake = threads_wake,
    .measures = true,
};
