/* runtime/task.c — task submission, readiness, completion and waiting.
 *
 * A task's life: submitted (dependencies recorded, ndeps counts unfinished
 * predecessors plus one guard held by the submitter) → ready (ndeps reached
 * zero: pushed to the policy, or handed to an acquirer) → done (successors
 * released, waiters woken). A failed task cancels its successors: they
 * complete without running, so nothing runs on garbage.
 */
#include "runtime/driver.h"
#include "runtime/internal.h"
#include "runtime/taskmem.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- allocation -------------------------------------------------------- */

/* Tasks are recycled through per-thread caches: a submitting thread takes
 * from its own, a completing worker frees into its own, and whole batches
 * move through the global pool, so the pool lock is taken once per batch. */
#define CACHE_BATCH 256
static _Thread_local tsr_task_t tl_cache;
/* Its last task, so that a flush is O(1) however long the cache (a thread
 * that submits and completes, as under simulation, takes back the whole
 * pool and frees into it). */
static _Thread_local tsr_task_t tl_cache_tail;
static _Thread_local int tl_cached;

/* An application thread that exits with cached tasks frees them: they are
 * its own, and the runtime may be gone by then (so not into the pool). */
static pthread_key_t cache_key;
static pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;

static void free_list(tsr_task_t t)
{
    while (t) {
        tsr_task_t n = t->free_next;
        pthread_mutex_destroy(&t->lock);
        tsr__taskmem_free(t);
        t = n;
    }
}

static void cache_at_exit(void *unused)
{
    (void)unused;
    free_list(tl_cache);
    tl_cache = NULL;
    tl_cache_tail = NULL;
    tl_cached = 0;
}

static void cache_key_make(void)
{
    (void)pthread_key_create(&cache_key, cache_at_exit);
}

/* Before this thread's cache first holds a task (taken from the pool or
 * freed here): arrange for its exit to free what is left. */
static _Thread_local bool tl_cache_keyed;
static void cache_keyed(void)
{
    if (tl_cache_keyed)
        return;
    pthread_once(&cache_key_once, cache_key_make);
    (void)pthread_setspecific(cache_key, &tl_cache);
    tl_cache_keyed = true;
}

static tsr_task_t task_alloc(void)
{
    tsr_task_t t = NULL;
    if (!tl_cache) {
        cache_keyed();
        pthread_mutex_lock(&tsr__rt.pool_m);
        tl_cache = tsr__rt.pool;
        tl_cache_tail = tsr__rt.pool_tail;
        tsr__rt.pool = NULL;
        tsr__rt.pool_tail = NULL;
        pthread_mutex_unlock(&tsr__rt.pool_m);
        tl_cached = 0; /* unknown length; only frees count towards a batch */
    }
    if (tl_cache) {
        t = tl_cache;
        tl_cache = t->free_next;
        if (!tl_cache)
            tl_cache_tail = NULL;
        if (tl_cached > 0)
            tl_cached--;
    }
    if (!t) {
        t = tsr__taskmem_alloc(sizeof *t);
        if (!t)
            return NULL;
        pthread_mutex_init(&t->lock, NULL);
    }
    /* Everything before the data request is plain data: reset it; of the
     * request, what is read before a worker takes the task (a failure's
     * reason, the entries a release walks). */
    memset(t, 0, offsetof(struct tsr_task, mreq));
    t->mreq.n = 0;
    t->mreq.err[0] = 0;
    t->succ = t->succ_inline;
    t->capsucc = TSR_SUCC_INLINE;
    return t;
}

/* Hand this thread's cached tasks to the global pool. */
void tsr__tasks_flush_cache(void)
{
    if (!tl_cache)
        return;
    pthread_mutex_lock(&tsr__rt.pool_m);
    tl_cache_tail->free_next = tsr__rt.pool;
    if (!tsr__rt.pool)
        tsr__rt.pool_tail = tl_cache_tail;
    tsr__rt.pool = tl_cache;
    pthread_mutex_unlock(&tsr__rt.pool_m);
    tl_cache = NULL;
    tl_cache_tail = NULL;
    tl_cached = 0;
}

static void task_free(tsr_task_t t)
{
    if (t->succ != t->succ_inline)
        free(t->succ);
    cache_keyed();
    t->free_next = tl_cache;
    if (!tl_cache)
        tl_cache_tail = t;
    tl_cache = t;
    if (++tl_cached >= CACHE_BATCH)
        tsr__tasks_flush_cache();
}

void tsr__tasks_free_pool(void)
{
    tsr__tasks_flush_cache();
    pthread_mutex_lock(&tsr__rt.pool_m);
    tsr_task_t t = tsr__rt.pool;
    tsr__rt.pool = NULL;
    tsr__rt.pool_tail = NULL;
    pthread_mutex_unlock(&tsr__rt.pool_m);
    free_list(t);
}

void tsr__task_ref(tsr_task_t t)
{
    atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
}

void tsr__task_unref(tsr_task_t t)
{
    if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1)
        task_free(t);
}

/* ---- waiting ----------------------------------------------------------- */

/* Waiting is the driver's (driver.h): a condition variable, or running
 * simulated events until the predicate holds. */
static void wake_waiters(void) { tsr__rt.driver->wake(); }

static int wait_until(bool (*pred)(void *), void *arg, const char *what)
{
    return tsr__rt.driver->wait(pred, arg, what);
}

static bool nothing_pending(void *arg)
{
    (void)arg;
    return atomic_load(&tsr__rt.pending) == 0;
}

static bool below_low_water(void *arg)
{
    (void)arg;
    return atomic_load(&tsr__rt.pending) <= tsr__rt.low_water &&
           atomic_load(&tsr__rt.pending_bytes) <= atomic_load(&tsr__rt.low_water_bytes);
}

static bool task_is_done(void *arg)
{
    tsr_task_t t = arg;
    pthread_mutex_lock(&t->lock);
    bool done = t->state == TSR_TASK_DONE;
    t->waited = !done;
    pthread_mutex_unlock(&t->lock);
    return done;
}

/* Report (and forget) the failures recorded since the last wait. */
static int take_failures(void)
{
    pthread_mutex_lock(&tsr__rt.err_m);
    int nf = tsr__rt.nfailed, nc = tsr__rt.ncancelled;
    char msg[512];
    memcpy(msg, tsr__rt.first_error, sizeof msg);
    int cause = tsr__rt.first_cause;
    tsr__rt.nfailed = tsr__rt.ncancelled = 0;
    tsr__rt.first_error[0] = 0;
    pthread_mutex_unlock(&tsr__rt.err_m);
    if (nf == 0 && nc == 0)
        return TSR_OK;
    return tsr__fail_cause(TSR_ETASK, cause, "%s (%d task(s) failed, %d cancelled)", msg, nf,
                           nc);
}

void tsr__set_window_bytes(size_t bytes)
{
    long maxb = bytes == 0 || bytes > (size_t)LONG_MAX ? LONG_MAX : (long)bytes;
    atomic_store(&tsr__rt.max_pending_bytes, maxb);
    atomic_store(&tsr__rt.low_water_bytes, maxb == LONG_MAX ? LONG_MAX : maxb / 4 * 3);
}

int tsr_set_pending_bytes(size_t bytes, size_t *previous)
{
    if (previous)
        *previous = 0;
    if (!tsr__running())
        return tsr__fail(TSR_ESTATE, "set_pending_bytes: runtime not initialized");
    long old = atomic_load(&tsr__rt.max_pending_bytes);
    if (previous)
        *previous = old == LONG_MAX ? 0 : (size_t)old;
    tsr__set_window_bytes(bytes);
    /* a wider window may let throttled submitters go on */
    if (atomic_load(&tsr__rt.nwaiters) > 0)
        wake_waiters();
    return TSR_OK;
}

int tsr_wait_all(void)
{
    if (!tsr__running())
        return tsr__fail(TSR_ESTATE, "wait_all: runtime not initialized");
    if (tsr__in_codelet())
        return tsr__fail(TSR_ESTATE, "wait_all: called from inside a codelet (it would wait "
                         "for the task that runs it)");
    if (atomic_load(&tsr__rt.nacquired) > 0)
        return tsr__fail(TSR_EBUSY,
                         "wait_all: a handle is acquired; tasks after it could "
                         "never finish; release it first");
    int rc = wait_until(nothing_pending, NULL, "wait_all");
    if (rc != TSR_OK)
        return rc;
    return take_failures();
}

int tsr_task_wait(tsr_task_t value)
{
    if (!tsr__running())
        return tsr__fail(TSR_ESTATE, "task_wait: runtime not initialized");
    if (!value)
        return tsr__fail(TSR_EINVAL, "task_wait: task is NULL");
    if (tsr__in_codelet())
        return tsr__fail(TSR_ESTATE, "task_wait: called from inside a codelet (waiting there "
                         "can deadlock the worker that runs it)");
    tsr_task_t t = tsr__taskref_take(value);
    if (!t)
        return tsr__fail(TSR_EINVAL, "task_wait: %p is not a live task reference (waited for "
                         "already, from before the last tsr_shutdown, or never returned "
                         "by tsr_submit)", (void *)value);
    int rc = tsr__task_wait(t);
    if (rc != TSR_OK && rc != TSR_ETASK)
        tsr__taskref_put_back(t); /* not done: the reference stays */
    return rc;
}

int tsr_task_release(tsr_task_t value)
{
    if (!tsr__running())
        return tsr__fail(TSR_ESTATE, "task_release: runtime not initialized");
    if (!value)
        return tsr__fail(TSR_EINVAL, "task_release: task is NULL");
    tsr_task_t t = tsr__taskref_take(value);
    if (!t)
        return tsr__fail(TSR_EINVAL, "task_release: %p is not a live task reference (waited "
                         "for or released already, or never returned by tsr_submit)",
                         (void *)value);
    tsr__task_unref(t);
    return TSR_OK;
}

int tsr__task_wait(tsr_task_t t)
{
    int rc = wait_until(task_is_done, t, "task_wait");
    if (rc != TSR_OK)
        return rc; /* the task is not done: its reference stays */
    int result = t->result, code = t->error_code;
    const char *name = t->name;
    if (result == TSR_RESULT_FAILED)
        rc = tsr__fail_cause(TSR_ETASK, t->cause, "%s (status %d)", t->mreq.err, code);
    else if (result == TSR_RESULT_CANCELLED)
        rc = tsr__fail_cause(TSR_ETASK, t->cause,
                       "task '%s' was cancelled, a task it depends on failed: %s",
                       name, t->mreq.err);
    tsr__task_unref(t);
    return rc;
}

/* ---- tags -------------------------------------------------------------- */

static size_t tag_slot(uint64_t tag, size_t cap)
{
    uint64_t x = tag * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(x >> 17) & (cap - 1);
    while (tsr__rt.tag_keys[i] && tsr__rt.tag_keys[i] != tag)
        i = (i + 1) & (cap - 1);
    return i;
}

static int tag_grow(void)
{
    size_t ncap = tsr__rt.tag_cap ? tsr__rt.tag_cap * 2 : 64;
    uint64_t *ok = tsr__rt.tag_keys;
    long *oc = tsr__rt.tag_counts;
    size_t ocap = tsr__rt.tag_cap;
    uint64_t *nk = calloc(ncap, sizeof *nk);
    long *nc = calloc(ncap, sizeof *nc);
    if (!nk || !nc) {
        free(nk);
        free(nc);
        return TSR_ENOMEM;
    }
    tsr__rt.tag_keys = nk;
    tsr__rt.tag_counts = nc;
    tsr__rt.tag_cap = ncap;
    tsr__rt.tag_used = 0;
    for (size_t i = 0; i < ocap; i++) {
        if (ok[i] && oc[i] > 0) {
            size_t j = tag_slot(ok[i], ncap);
            nk[j] = ok[i];
            nc[j] = oc[i];
            tsr__rt.tag_used++;
        }
    }
    free(ok);
    free(oc);
    return TSR_OK;
}

/* Caller holds tag_m. */
static int tag_add_locked(uint64_t tag, long delta)
{
    if (tsr__rt.tag_used * 2 >= tsr__rt.tag_cap && delta > 0)
        if (tag_grow() != TSR_OK)
            return TSR_ENOMEM;
    size_t i = tag_slot(tag, tsr__rt.tag_cap);
    if (!tsr__rt.tag_keys[i]) {
        tsr__rt.tag_keys[i] = tag;
        tsr__rt.tag_used++;
    }
    tsr__rt.tag_counts[i] += delta;
    return TSR_OK;
}

bool tsr__tag_add(uint64_t tag, long delta)
{
    pthread_mutex_lock(&tsr__rt.tag_m);
    tag_add_locked(tag, delta);
    size_t i = tag_slot(tag, tsr__rt.tag_cap);
    bool zero = tsr__rt.tag_counts[i] == 0;
    pthread_mutex_unlock(&tsr__rt.tag_m);
    return zero;
}

static bool tag_done(void *arg)
{
    uint64_t tag = *(uint64_t *)arg;
    pthread_mutex_lock(&tsr__rt.tag_m);
    bool done = true;
    if (tsr__rt.tag_cap) {
        size_t i = tag_slot(tag, tsr__rt.tag_cap);
        done = !tsr__rt.tag_keys[i] || tsr__rt.tag_counts[i] == 0;
    }
    pthread_mutex_unlock(&tsr__rt.tag_m);
    return done;
}

int tsr_wait_tag(uint64_t tag)
{
    if (!tsr__running())
        return tsr__fail(TSR_ESTATE, "wait_tag: runtime not initialized");
    if (tag == 0)
        return tsr__fail(TSR_EINVAL, "wait_tag: tag 0 means 'no tag'");
    if (tsr__in_codelet())
        return tsr__fail(TSR_ESTATE, "wait_tag: called from inside a codelet (it may wait "
                         "for the task that runs it)");
    int rc = wait_until(tag_done, &tag, "wait_tag");
    if (rc != TSR_OK)
        return rc;
    return take_failures();
}

/* ---- failures ---------------------------------------------------------- */

/* What failed, where, and why, for the application: "task 'gemm' on worker
 * 3 (sim0): sim0: 4194304 bytes needed, …". The directory's or the device's
 * message (mreq.err) says why when the runtime failed the task; otherwise
 * the implementation returned the nonzero code. */
static void describe_failure(tsr_task_t t, int worker, char *buf, size_t len)
{
    char why[TSR_MEM_ERR + 64];
    if (t->mreq.err[0])
        snprintf(why, sizeof why, "%s", t->mreq.err);
    else
        snprintf(why, sizeof why, "its implementation returned %d", t->error_code);
    if (worker >= 0 && worker < tsr__rt.nworkers)
        snprintf(buf, len, "task '%s' on worker %d (%s): %s", t->name, worker,
                 tsr__mem_node(tsr__rt.workers[worker].node)->name, why);
    else
        snprintf(buf, len, "task '%s': %s", t->name, why);
}

/* s will not run because p, whose data it reads, failed or was cancelled.
 * The first to cancel s hands it the cause, which s passes on in turn. */
void tsr__task_cancel(tsr_task_t s, tsr_task_t p)
{
    if (atomic_exchange(&s->cancelled, 1) == 0) {
        snprintf(s->mreq.err, sizeof s->mreq.err, "%s", p->mreq.err);
        s->cause = p->cause;
    }
}

/* Count t's failure (or cancellation) until the next wait; the first one
 * becomes the message that wait returns. `msg`: t's failure described. */
static void record_failure(tsr_task_t t, int result, const char *msg)
{
    if (t->kind != TSR_KIND_USER && t->kind != TSR_KIND_REDUCE && t->kind != TSR_KIND_COMM)
        return;
    pthread_mutex_lock(&tsr__rt.err_m);
    if (result == TSR_RESULT_FAILED) {
        if (tsr__rt.nfailed == 0) {
            snprintf(tsr__rt.first_error, sizeof tsr__rt.first_error, "%s", msg);
            tsr__rt.first_cause = t->cause;
        }
        tsr__rt.nfailed++;
    } else {
        /* Cancelled by a failure an earlier wait reported: say so. */
        if (tsr__rt.nfailed == 0 && tsr__rt.ncancelled == 0) {
            snprintf(tsr__rt.first_error, sizeof tsr__rt.first_error,
                     "task '%s' was cancelled, a task it depends on failed: %s",
                     t->name, t->mreq.err);
            tsr__rt.first_cause = t->cause;
        }
        tsr__rt.ncancelled++;
    }
    pthread_mutex_unlock(&tsr__rt.err_m);
}

/* ---- commute exclusion ------------------------------------------------- */

/* t may take COMMUTE handles behind owners launched on a device (device-
 * ordered, see tsr__task_launched): a user task with a CUDA
 * implementation and no REDUX accumulator. */
static bool commute_dev_eligible(tsr_task_t t)
{
    if (!tsr__rt.device_deps || t->kind != TSR_KIND_USER || !t->cl ||
        !t->cl->impl[TSR_DEVICE_CUDA] || atomic_load(&t->cancelled))
        return false;
    for (int i = 0; i < t->nbuffers; i++)
        if (t->acc[i].mode == TSR_REDUX)
            return false;
    return true;
}

/* Under commute_m: take every COMMUTE handle of t — free ones, and (with
 * device-ordered dependencies) ones whose owners were launched on one GPU,
 * t then following them there. Returns 1 (taken), 2 (taken behind
 * launched owners, on node *node1 - 1: t's dwait names them), 3 (taken,
 * all free, by a task released to node *node1 - 1), or 0 with *busy the
 * handle to park on. */
static int commute_take_locked(tsr_task_t t, int *node1, tsr_data_t **busy)
{
    int want = t->bound_node1; /* released to a device: owners there only */
    tsr_task_t owners[TSR_MAX_BUFFERS];
    int nown = 0, g = 0;
    int dev = -1; /* not yet asked */
    for (int i = 0; i < t->ncommute; i++) {
        tsr_data_t *h = t->commute[i];
        tsr_task_t o = h->commute_owner;
        if (!o)
            continue;
        if (dev < 0)
            dev = commute_dev_eligible(t);
        if (dev && o->cm_node1 > 0 && (g == 0 || g == o->cm_node1) &&
            (want == 0 || want == o->cm_node1) && tsr__home_allows(t, o->cm_node1 - 1)) {
            g = o->cm_node1;
            int k = 0;
            while (k < nown && owners[k] != o)
                k++;
            if (k == nown)
                owners[nown++] = o;
            continue;
        }
        *busy = h;
        return 0;
    }
    /* The owners' events in t's wait slots (a launching worker may take
     * slots of t at the same moment: the count is atomic); past the last
     * slot, t follows every task launched before it there (dwait_all). */
    for (int i = 0; i < t->ncommute; i++)
        t->commute[i]->commute_owner = t;
    for (int k = 0; k < nown; k++) {
        int slot = atomic_fetch_add(&t->ndwait, 1);
        if (slot >= TSR_DWAIT_MAX) {
            atomic_store(&t->dwait_all, true);
            continue;
        }
        atomic_store_explicit(&t->dwait[slot].mark, owners[k]->cm_mark, memory_order_relaxed);
        atomic_store_explicit(&t->dwait[slot].seq, owners[k]->cm_seq, memory_order_relaxed);
    }
    *node1 = g ? g : want;
    return nown > 0 ? 2 : want ? 3 : 1;
}

/* t follows the launched owners of its COMMUTE handles on their GPU, or
 * its launched predecessors on theirs (bound_node1). */
static void commute_to_device(tsr_task_t t, int node1)
{
    for (int i = 0; i < tsr__rt.nworkers; i++)
        if (tsr__rt.workers[i].node == node1 - 1 &&
            tsr__rt.workers[i].device_kind == TSR_DEVICE_CUDA) {
            tsr__worker_devq_push(&tsr__rt.workers[i], t);
            return;
        }
}

/* All-or-nothing: take every COMMUTE handle of t, or park t on the first
 * busy one. Taking them together under one lock cannot deadlock. Returns
 * whether t may be pushed to the policy (false: parked, or handed to a
 * GPU's worker: behind the launched owners, or because it was released
 * there). */
static bool commute_try_take(tsr_task_t t)
{
    pthread_mutex_lock(&tsr__rt.commute_m);
    int node1 = 0;
    tsr_data_t *busy = NULL;
    int r = commute_take_locked(t, &node1, &busy);
    if (r == 0 && tsr__tasklist_push(&busy->commute_waiting, t) != TSR_OK) {
        /* Cannot park without memory: retry by yielding. */
        pthread_mutex_unlock(&tsr__rt.commute_m);
        sched_yield();
        return commute_try_take(t);
    }
    pthread_mutex_unlock(&tsr__rt.commute_m);
    if (r == 2)
        t->how = TSR_READY_DEVICE; /* behind the launched owners */
    if (r >= 2)
        commute_to_device(t, node1);
    return r == 1;
}

/* A worker completing a task will ask the policy for work right after: the
 * first task it makes ready needs nobody woken if the worker may take it. */
_Thread_local int tsr__tl_worker = -1;
_Thread_local bool tsr__tl_self_slot;
_Thread_local tsr_task_t tsr__tl_preds_of;
_Thread_local tsr_tasklist_t tsr__tl_preds;

/* A policy that assigns the task to a worker starts its inputs moving to
 * that worker's memory node at once (tsr_sched_prefetch, from push). */
void tsr__task_prefetch(tsr_task_t t, int target)
{
    int node = tsr__rt.workers[target].node;
    for (int i = 0; i < t->nbuffers; i++) {
        int m = t->acc[i].mode;
        if (m != TSR_SCRATCH && m != TSR_W && m != TSR_REDUX)
            tsr__mem_prefetch(t->data[i]->entry, node);
    }
}

/* A worker to wake for t when the policy names none: -1 when every kind
 * of worker can run it (any sleeper will do); else one that can, asleep
 * if one is. Waking any sleeper could wake one that cannot run t, which
 * goes back to sleep and leaves t queued beside a sleeping worker that
 * could (GPU-only tasks pushed by the application's thread with CPU
 * workers asleep). Asked before the push: t may be gone after it. */
static int capable_target(tsr_task_t t)
{
    if (!t->cl)
        return -1;
    bool all = true;
    for (int k = 0; k < TSR_DEVICE_KINDS; k++)
        if (tsr__rt.nworkers_of_kind[k] > 0 && !t->cl->impl[k])
            all = false;
    if (all && !t->home1)
        return -1;
    int awake = -1;
    for (int i = 0; i < tsr__rt.nworkers; i++) {
        const tsr_worker_t *w = &tsr__rt.workers[i];
        if (!tsr__task_can_run(t, i))
            continue;
        if (atomic_load(&w->sleeping))
            return i;
        if (awake < 0)
            awake = i;
    }
    return awake;
}

static void push_to_policy(tsr_task_t t)
{
    /* Nothing queued: the policy would hand t out next anyway (its order
     * is kept); the worker completing its predecessor runs it. */
    if (tsr__tl_self_slot && (tsr__rt.sched.policy->flags & TSR_SCHED_RUN_SUCCESSOR) &&
        atomic_load_explicit(&tsr__rt.nqueued, memory_order_relaxed) == 0) {
        tsr_worker_t *w = &tsr__rt.workers[tsr__tl_worker];
        if (!w->next && tsr__task_can_run(t, tsr__tl_worker)) {
            tsr__tl_self_slot = false;
            w->next = t; /* the completing worker takes it next */
            return;
        }
    }
    /* The completing worker takes it itself only if it can run it (a CPU
     * worker completing the predecessor of a GPU-only task must wake the
     * GPU's worker, which may sleep); asked before the push. */
    bool runnable_here = tsr__tl_self_slot && tsr__task_can_run(t, tsr__tl_worker);
    int capable = capable_target(t);
    t->queued_host = tsr__rt.accel_first && t->cl && t->cl->impl[TSR_DEVICE_CPU] &&
                     tsr__home_allows(t, 0);
    if (t->queued_host)
        atomic_fetch_add_explicit(&tsr__rt.nqueued_host, 1, memory_order_release);
    atomic_fetch_add(&tsr__rt.nqueued, 1);
    /* Once pushed, t may run and complete at any moment: nothing here may
     * touch it again (policies prefetch inside push, see sched.h). */
    int target = tsr__rt.sched.policy->push(&tsr__rt.sched, t);
    if (runnable_here && (target == -1 || target == tsr__tl_worker)) {
        tsr__tl_self_slot = false;
        return;
    }
    tsr__workers_notify(target >= 0 ? target : capable);
}

/* t completes: the COMMUTE handles it still owns (not handed on to a task
 * that followed it on its device) are free again; their waiters retry. */
static void commute_release(tsr_task_t t)
{
    tsr_tasklist_t retry = {0};
    pthread_mutex_lock(&tsr__rt.commute_m);
    t->cm_node1 = 0;
    for (int i = 0; i < t->ncommute; i++) {
        tsr_data_t *h = t->commute[i];
        if (h->commute_owner != t)
            continue;
        h->commute_owner = NULL;
        for (int k = 0; k < h->commute_waiting.n; k++)
            tsr__tasklist_push(&retry, h->commute_waiting.v[k]);
        tsr__tasklist_clear(&h->commute_waiting);
    }
    pthread_mutex_unlock(&tsr__rt.commute_m);
    for (int k = 0; k < retry.n; k++) {
        retry.v[k]->how = TSR_READY_HOST; /* waited for t's completion */
        if (commute_try_take(retry.v[k]))
            push_to_policy(retry.v[k]);
    }
    tsr__tasklist_clear(&retry);
    free(retry.v);
}

/* ---- the next-use feed ------------------------------------------------- */

/* The directory evicts the idle copy whose next use is furthest (Belady's
 * rule over the submitted window, memory/evict.h): it needs, per handle,
 * an estimate of when the first pending task that uses it will run.
 * Policies run what is ready, in their own order, not in submission order
 * (eager runs the ready tasks of a tiled GEMM k-step by k-step; the AdamW
 * update of a layer is submitted after the whole backward pass but is
 * ready when that layer's gradient is). So: a task still waiting for
 * predecessors is estimated by its submission number; a ready task, sooner
 * than every waiting one, in the order tasks became ready (a stamp taken
 * at readiness) — most policies take ready work roughly in that order,
 * and where they take it by submission order (prio with decreasing
 * priorities) the two orders agree on what matters here.
 * Each handle keeps its pending uses in submission order (a ring of {when,
 * done, ready}); a task records its position in each; readiness marks its
 * uses ready and stamps them; a completion marks them done and moves the
 * head past the done ones. The handle's next use is the smallest key among
 * its first USE_SCAN pending uses (its uses are mostly ordered by their
 * dependencies, so a later one is rarely sooner). The directory hears only
 * of changes. use_m is a leaf above the directory's locks: the word is
 * passed under it, so that two threads cannot hand the directory their
 * words in the wrong order. All of it is skipped when nothing orders by
 * next use. */
#define USE_SCAN 16
#define USE_WAITING ((uint64_t)1 << 40) /* added to the key of a use not ready */

/* Readiness stamps: one counter, bumped when a user task becomes ready. */
static atomic_uint_fast64_t ready_clock;

static uint64_t use_key(const struct tsr_use *u)
{
    return u->ready ? u->when : u->when + USE_WAITING;
}

/* Tell the directory h's next use if it changed (use_m held). */
static void use_feed(tsr_data_t *h)
{
    uint64_t key = TSR_NEXT_USE_NONE;
    int seen = 0;
    for (uint64_t p = h->use_head; p < h->use_tail && seen < USE_SCAN; p++) {
        const struct tsr_use *u = &h->uses[p & (h->use_cap - 1)];
        if (u->done)
            continue;
        seen++;
        uint64_t k = use_key(u);
        key = k < key ? k : key;
    }
    if (key != h->use_fed) {
        h->use_fed = key;
        tsr__mem_set_next_use(h->entry, key);
    }
}

void tsr__next_use_setup(void)
{
    bool finite = false;
    for (int j = 0; j < tsr__mem_node_count(); j++)
        finite |= tsr__mem_node(j)->capacity != SIZE_MAX;
    tsr__rt.feed_next_use = finite && tsr__mem_evict_rule() == TSR_MEM_EVICT_WINDOW;
    tsr__rt.disk_node = tsr__mem_disk_node();
    atomic_store(&ready_clock, 0);
    atomic_store(&tsr__rt.next_seq, 0);
}

void tsr__handle_uses_free(tsr_data_t *h)
{
    if (h->uses != h->use_inline)
        free(h->uses);
    h->uses = NULL;
    h->use_cap = 0;
    pthread_mutex_destroy(&h->use_m);
}

/* Position of t's use of h in h's ring (use_m held); false without memory
 * (the use is then not fed: eviction only misjudges it). */
static bool use_push(tsr_data_t *h, uint64_t seq, uint64_t *pos)
{
    if (!h->uses) {
        h->uses = h->use_inline;
        h->use_cap = sizeof h->use_inline / sizeof h->use_inline[0];
    }
    if (h->use_tail - h->use_head == h->use_cap) {
        uint32_t cap = h->use_cap * 2;
        struct tsr_use *v = malloc((size_t)cap * sizeof *v);
        if (!v)
            return false;
        for (uint64_t p = h->use_head; p < h->use_tail; p++)
            v[p & (cap - 1)] = h->uses[p & (h->use_cap - 1)];
        if (h->uses != h->use_inline)
            free(h->uses);
        h->uses = v;
        h->use_cap = cap;
    }
    *pos = h->use_tail++;
    h->uses[*pos & (h->use_cap - 1)] = (struct tsr_use){seq, false, false};
    return true;
}

/* At submission: t uses buffer k's handle (REDUX buffers use the worker's
 * accumulator, not the handle, until the group is combined). */
static void uses_record(tsr_task_t t, int buf)
{
    tsr_data_t *h = t->data[buf];
    uint64_t pos;
    pthread_mutex_lock(&h->use_m);
    if (h->use_head == h->use_tail)
        h->use_fed = TSR_NEXT_USE_NONE;
    if (use_push(h, t->seq, &pos)) {
        t->use_buf[t->nuses] = (uint8_t)buf;
        t->use_pos[t->nuses++] = (uint32_t)pos;
        if (pos - h->use_head < USE_SCAN)
            use_feed(h);
    }
    pthread_mutex_unlock(&h->use_m);
}

/* t is ready: its uses rank before those of tasks still waiting, in the
 * order their tasks became ready. */
static void uses_ready(tsr_task_t t)
{
    uint64_t stamp = atomic_fetch_add_explicit(&ready_clock, 1, memory_order_relaxed);
    for (int k = 0; k < t->nuses; k++) {
        tsr_data_t *h = t->data[t->use_buf[k]];
        pthread_mutex_lock(&h->use_m);
        struct tsr_use *u = &h->uses[t->use_pos[k] & (h->use_cap - 1)];
        u->ready = true;
        u->when = stamp;
        use_feed(h);
        pthread_mutex_unlock(&h->use_m);
    }
}

/* At completion (before DONE is visible, so that a handle is not freed
 * under us: unregistering waits for every task using it). */
static void uses_done(tsr_task_t t)
{
    for (int k = 0; k < t->nuses; k++) {
        tsr_data_t *h = t->data[t->use_buf[k]];
        pthread_mutex_lock(&h->use_m);
        h->uses[t->use_pos[k] & (h->use_cap - 1)].done = true;
        while (h->use_head < h->use_tail && h->uses[h->use_head & (h->use_cap - 1)].done)
            h->use_head++;
        use_feed(h);
        pthread_mutex_unlock(&h->use_m);
    }
    t->nuses = 0;
}

/* A task is ready: with a disk tier below the host, start bringing the
 * data it reads and that is valid only on the disk to the host, ahead of
 * the worker's request (host ← disk; the push-time prefetch does
 * accelerator ← host). Data valid on an accelerator is left alone: the
 * task may well run there. */
static void prefetch_from_disk(tsr_task_t t)
{
    uint32_t disk = 1u << tsr__rt.disk_node;
    for (int i = 0; i < t->nbuffers; i++) {
        int m = t->acc[i].mode;
        if (m != TSR_R && m != TSR_RW && m != TSR_COMMUTE)
            continue;
        tsr_entry_t *e = t->data[i]->entry;
        if (tsr__entry_nodes(e) == disk)
            tsr__mem_prefetch(e, 0);
    }
}

/* ---- readiness and completion ------------------------------------------ */

void tsr__task_ready(tsr_task_t t)
{
    if (t->kind == TSR_KIND_ACQUIRE) {
        /* The acquirer sleeps until it sees READY. */
        pthread_mutex_lock(&t->lock);
        __atomic_store_n(&t->state, TSR_TASK_READY, __ATOMIC_RELEASE); /* task_done reads it unlocked */
        pthread_mutex_unlock(&t->lock);
        wake_waiters();
        return;
    }
    if (t->kind == TSR_KIND_COMM) {
        /* Even a cancelled one: a collective must still take part, or the
         * ranks' collectives stop matching (comm.c decides). */
        tsr__comm_ready(t);
        return;
    }
    if (atomic_load(&t->cancelled)) {
        tsr__task_complete(t, TSR_RESULT_CANCELLED, -1);
        return;
    }
    if (t->kind == TSR_KIND_BARRIER) {
        tsr__task_complete(t, TSR_RESULT_OK, -1);
        return;
    }
    if (t->kind == TSR_KIND_INVALIDATE) {
        tsr__mem_invalidate(t->data[0]->entry);
        tsr__task_complete(t, TSR_RESULT_OK, -1);
        return;
    }
    if (t->kind == TSR_KIND_WONTUSE) {
        tsr__mem_wont_use(t->data[0]->entry);
        tsr__task_complete(t, TSR_RESULT_OK, -1);
        return;
    }
    if (t->kind == TSR_KIND_REDUCE) {
        tsr__redux_start(t);
        return;
    }
    if (t->nuses)
        uses_ready(t);
    if (tsr__rt.disk_node > 0 && tsr__rt.disk_node < 32 && !t->internal)
        prefetch_from_disk(t);
    if (t->ncommute && !commute_try_take(t))
        return; /* parked; commute_release() pushes it */
    push_to_policy(t);
}

/* ---- device-ordered dependencies ----------------------------------------
 *
 * A GPU worker that launched a task P (its kernels queued on a lane, an
 * event recorded after them: mark, launch number seq) does not wait to
 * see P end before P's successors may run on the same GPU. Each successor
 * S that could run there counts P among its launched predecessors (ndev,
 * with P's mark in S->dwait and bit 2 on P's edge to S, P holding a
 * reference to S until P completes). When every unfinished predecessor of
 * S is launched on that one GPU (ndeps == ndev, all on dev_node), S is
 * released to the GPU's worker (its device queue): the worker launches it
 * on a lane after cudaStreamWaitEvent on those marks, without a host round
 * trip. Every other consumer (a CPU worker, another GPU, a host
 * acquisition, a task ready only later) still waits for P's completion,
 * which the worker reports when it sees P's mark reached: that is when
 * P's buffers are unpinned (so neither evicted, written back nor copied
 * off the GPU before), its successors' counts drop, and errors show.
 *
 * Races: ndeps only drops once the guard is dropped (no edge is added
 * after that), ndev counts a subset of the unfinished predecessors and
 * drops before ndeps at a completion, so reading ndeps then ndev and
 * finding them equal (and nonzero) means that at the second read every
 * unfinished predecessor was launched on dev_node. Whoever changes one of
 * the counts checks after its change, so the last change sees it; the
 * claim (claimed 0 -> 1) makes S ready once, on the device or by the host
 * (ndeps reaching 0). */

/* S may run on a device of `kind` behind launched tasks: a user task with
 * an implementation for it and no REDUX accumulator, not cancelled, not
 * ready. (Its COMMUTE handles are taken once it is released.) */
static bool dev_eligible(tsr_task_t s, int kind)
{
    if (s->kind != TSR_KIND_USER || !s->cl || !s->cl->impl[kind] ||
        atomic_load_explicit(&s->cancelled, memory_order_relaxed) || atomic_load(&s->claimed))
        return false;
    for (int i = 0; i < s->nbuffers; i++)
        if (s->acc[i].mode == TSR_REDUX)
            return false;
    return true;
}

bool tsr__task_dev_count(tsr_task_t p, tsr_task_t s)
{
    int node1 = p->launch_node1;
    if (!dev_eligible(s, TSR_DEVICE_CUDA) || !tsr__home_allows(s, node1 - 1))
        return false;
    int cur = 0;
    if (!atomic_compare_exchange_strong(&s->dev_node, &cur, node1) && cur != node1) {
        atomic_store(&s->dev_node, -1); /* predecessors on several nodes */
        return false;
    }
    /* Slots are taken atomically: the launching worker and a submitter
     * adding an edge to a launched task may count s at once. The slot is
     * written before ndev counts it, and s is released only once ndev
     * counts every unfinished predecessor. */
    int k = atomic_fetch_add(&s->ndwait, 1);
    if (k >= TSR_DWAIT_MAX) {
        /* no slot left: s will follow every task launched before it on
         * that device (p among them) */
        atomic_store(&s->dwait_all, true);
    } else {
        atomic_store_explicit(&s->dwait[k].mark, p->launch_mark, memory_order_relaxed);
        atomic_store_explicit(&s->dwait[k].seq, p->launch_seq, memory_order_relaxed);
    }
    tsr__task_ref(s); /* until p's completion drops it (dev_dep_done) */
    atomic_fetch_add(&s->ndev, 1);
    return true;
}

/* s's unfinished predecessors may all be launched on one GPU: release it
 * there. The caller holds a reference to s. */
static void dev_check(tsr_task_t s)
{
    if (!atomic_load(&s->guard_dropped))
        return;
    int nd = atomic_load(&s->ndeps);
    if (nd <= 0 || atomic_load(&s->ndev) != nd)
        return;
    int node1 = atomic_load(&s->dev_node);
    if (node1 <= 0)
        return;
    int unclaimed = 0;
    if (!atomic_compare_exchange_strong(&s->claimed, &unclaimed, 1))
        return;
    tsr_worker_t *w = NULL;
    for (int i = 0; i < tsr__rt.nworkers && !w; i++)
        if (tsr__rt.workers[i].node == node1 - 1 && tsr__rt.workers[i].device_kind == TSR_DEVICE_CUDA)
            w = &tsr__rt.workers[i];
    s->how = TSR_READY_DEVICE;
    s->bound_node1 = node1;
    if (s->nuses)
        uses_ready(s);
    /* its COMMUTE handles: taken (or behind their owners launched there),
     * else it waits for them, parked, and still runs there */
    if (!s->ncommute || commute_try_take(s))
        tsr__worker_devq_push(w, s);
}

/* One predecessor of s is complete (host: a completion the host observed)
 * or its submission guard dropped (host false). `counted`: a predecessor
 * that counted s as launched (it holds a reference to s); `held`: the
 * caller holds one. */
static void dev_dep_done(tsr_task_t s, bool counted, bool host, bool held)
{
    /* s is alive while we hold a predecessor's place in ndeps; after the
     * decrement only a reference keeps it. A launched predecessor counted
     * in ndev holds one; else take one only when some predecessor is
     * launched (a check missed because ndev moved meanwhile only costs the
     * device release: s then becomes ready when ndeps reaches 0). */
    bool ref = !counted && !held && atomic_load(&s->ndev) > 0;
    if (ref)
        tsr__task_ref(s);
    if (counted)
        atomic_fetch_sub(&s->ndev, 1);
    if (atomic_fetch_sub_explicit(&s->ndeps, 1, memory_order_acq_rel) == 1) {
        if (atomic_exchange(&s->claimed, 1) == 0) {
            if (host)
                s->how = TSR_READY_HOST;
            tsr__task_ready(s);
        }
    } else if (counted || ref || held) {
        dev_check(s);
    }
    if (counted || ref)
        tsr__task_unref(s);
}

/* t, owning COMMUTE handles, was launched on node node1 - 1: a task
 * parked on one of them may take them now and follow t there (its kernels
 * after t's); the others wait for t's completion as before. */
static void commute_launched(tsr_task_t t, int node1, int mark, uint64_t seq)
{
    /* handed on: each keeps the reference its waiting list held */
    tsr_task_t moved[64];
    int moved_node[64], nmoved = 0;
    pthread_mutex_lock(&tsr__rt.commute_m);
    t->cm_node1 = node1;
    t->cm_mark = mark;
    t->cm_seq = seq;
    for (int i = 0; i < t->ncommute; i++) {
        tsr_data_t *h = t->commute[i];
        tsr_tasklist_t *l = &h->commute_waiting;
        int keep = 0;
        for (int k = 0; k < l->n; k++) {
            tsr_task_t s = l->v[k];
            int g = 0;
            tsr_data_t *busy = NULL;
            if (nmoved < 64 && h->commute_owner == t &&
                commute_take_locked(s, &g, &busy) == 2) {
                moved[nmoved] = s;
                moved_node[nmoved++] = g;
                continue;
            }
            l->v[keep++] = s;
        }
        l->n = keep;
    }
    pthread_mutex_unlock(&tsr__rt.commute_m);
    for (int k = 0; k < nmoved; k++) {
        commute_to_device(moved[k], moved_node[k]);
        tsr__task_unref(moved[k]);
    }
}

void tsr__task_launched(tsr_task_t t, int worker, int mark, uint64_t seq)
{
    tsr_worker_t *w = &tsr__rt.workers[worker];
    /* the successors to check once t's lock is let go (those past the
     * first 64 are not released here: they wait for the host) */
    tsr_task_t check[64];
    int ncheck = 0;
    pthread_mutex_lock(&t->lock);
    t->launch_node1 = w->node + 1;
    t->launch_mark = mark;
    t->launch_seq = seq;
    for (int i = 0; i < t->nsucc && ncheck < 64; i++) {
        tsr_task_t s = (tsr_task_t)(t->succ[i] & ~(uintptr_t)3);
        if (tsr__task_dev_count(t, s)) {
            t->succ[i] |= 2;
            check[ncheck++] = s;
        }
    }
    pthread_mutex_unlock(&t->lock);
    /* t completes on this thread, later: its references keep them alive */
    for (int k = 0; k < ncheck; k++)
        dev_check(check[k]);
    if (t->ncommute)
        commute_launched(t, w->node + 1, mark, seq);
}

void tsr__task_complete(tsr_task_t t, int result, int worker)
{
    if (t->nuses)
        uses_done(t);
    /* (a task cancelled after it took its COMMUTE handles, released to a
     * device, gives them back too; one that never took them owns none) */
    if (t->ncommute)
        commute_release(t);
    /* A failure's description replaces the bare reason before DONE is
     * visible: a task submitted later and cancelled at once copies it. */
    char msg[sizeof tsr__rt.first_error];
    msg[0] = 0;
    if (result == TSR_RESULT_FAILED) {
        /* The runtime's own failures (memory, copies, devices) come with a
         * reason in mreq.err and a TSR_E… code; an implementation's code is
         * its own, not a status. */
        if (t->cause == TSR_OK) /* not handed down by the task it follows */
            t->cause = t->mreq.err[0] && t->error_code < 0 ? t->error_code : TSR_ETASK;
        describe_failure(t, worker, msg, sizeof msg);
        size_t n = strnlen(msg, sizeof t->mreq.err - 1); /* truncated */
        memcpy(t->mreq.err, msg, n);
        t->mreq.err[n] = 0;
    }

    pthread_mutex_lock(&t->lock);
    t->result = result;
    __atomic_store_n(&t->state, TSR_TASK_DONE, __ATOMIC_RELEASE);
    uintptr_t *succ = t->succ;
    int nsucc = t->nsucc;
    bool wake = t->waited;
    tsr_task_t then = t->then;
    t->nsucc = 0;
    t->then = NULL;
    pthread_mutex_unlock(&t->lock);
    if (t->kind == TSR_KIND_REDUCE)
        tsr__redux_finish(t);

    if (result != TSR_RESULT_OK)
        record_failure(t, result, msg);
    for (int i = 0; i < nsucc; i++) {
        tsr_task_t s = (tsr_task_t)(succ[i] & ~(uintptr_t)3);
        if (result != TSR_RESULT_OK && (succ[i] & 1))
            tsr__task_cancel(s, t);
        if (tsr__rt.device_deps) {
            dev_dep_done(s, (succ[i] & 2) != 0, true, false);
        } else if (atomic_fetch_sub_explicit(&s->ndeps, 1, memory_order_acq_rel) == 1) {
            s->how = TSR_READY_HOST;
            tsr__task_ready(s);
        }
    }
    /* (a task released to a device was never pushed to the policy) */
    if (worker >= 0 && tsr__rt.sched.policy->done && !t->via_devq)
        tsr__rt.sched.policy->done(&tsr__rt.sched, t, worker);
    if (t->tag && tsr__tag_add(t->tag, -1))
        wake = true;

    long bytes = atomic_fetch_sub(&tsr__rt.pending_bytes, (long)t->bytes) - (long)t->bytes;
    long left = atomic_fetch_sub(&tsr__rt.pending, 1) - 1;
    if (left == 0)
        wake = true;
    if (atomic_load(&tsr__rt.nthrottled) > 0 && left <= tsr__rt.low_water &&
        bytes <= atomic_load(&tsr__rt.low_water_bytes))
        wake = true;
    /* A broadcast only when a waiter's condition may have become true. */
    if (wake && atomic_load(&tsr__rt.nwaiters) > 0)
        wake_waiters();
    if (then) {
        if (result != TSR_RESULT_OK) {
            then->error_code = t->error_code;
            then->cause = t->cause;
            snprintf(then->mreq.err, sizeof then->mreq.err, "%s", t->mreq.err);
        }
        tsr__task_complete(then, result == TSR_RESULT_OK ? TSR_RESULT_OK
                                                         : TSR_RESULT_FAILED, -1);
    }
    tsr__task_unref(t);
}

void tsr__task_chain(tsr_task_t first, tsr_task_t then)
{
    pthread_mutex_lock(&first->lock);
    bool done = first->state == TSR_TASK_DONE;
    int result = first->result;
    if (!done)
        first->then = then;
    pthread_mutex_unlock(&first->lock);
    if (done)
        tsr__task_complete(then, result == TSR_RESULT_OK ? TSR_RESULT_OK
                                                         : TSR_RESULT_FAILED, -1);
    tsr__task_unref(first); /* the reference the submitter kept */
}

/* ---- submission -------------------------------------------------------- */

static void throttle(size_t bytes)
{
    if (atomic_load(&tsr__rt.nacquired) > 0)
        return; /* tasks may wait on an acquisition by this thread */
    long maxp = (long)tsr__rt.cfg.max_pending_tasks;
    long maxb = atomic_load(&tsr__rt.max_pending_bytes);
    bool over = atomic_load(&tsr__rt.pending) >= maxp;
    if (atomic_load(&tsr__rt.pending_bytes) + (long)bytes > maxb &&
        atomic_load(&tsr__rt.pending) > 0)
        over = true;
    if (over) {
        atomic_fetch_add(&tsr__rt.nthrottled, 1);
        /* A simulated program that cannot get below the mark has
         * deadlocked: the next wait reports it. */
        (void)wait_until(below_low_water, NULL, "submit");
        atomic_fetch_sub(&tsr__rt.nthrottled, 1);
    }
}

/* COMMUTE handles are taken in one order everywhere: their slots (an
 * order of the program's own, not of addresses, so that a simulated run
 * parks and retries tasks the same way every time). */
static int cmp_handle(const void *a, const void *b)
{
    uint32_t x = (*(const tsr_data_t *const *)a)->slot;
    uint32_t y = (*(const tsr_data_t *const *)b)->slot;
    return (x > y) - (x < y);
}

/* Drop a submission guard: the task may become ready. */
static void release_guard(tsr_task_t t)
{
    if (tsr__rt.device_deps) {
        /* no edge is added after this: dev_check may trust ndeps */
        atomic_store(&t->guard_dropped, true);
        /* held: a predecessor launched meanwhile must not go unchecked */
        tsr__task_ref(t);
        dev_dep_done(t, false, false, true);
        tsr__task_unref(t);
        return;
    }
    if (atomic_fetch_sub_explicit(&t->ndeps, 1, memory_order_acq_rel) == 1)
        tsr__task_ready(t);
}

/* Count a new task as pending (and in its tag). */
static void count_pending(tsr_task_t t)
{
    if (t->tag)
        tsr__tag_add(t->tag, 1);
    atomic_fetch_add(&tsr__rt.pending, 1);
    atomic_fetch_add(&tsr__rt.pending_bytes, (long)t->bytes);
}

/* Record dependencies and release the submission guard. */
/* preds: the task's explicit dependencies (records the caller holds a
 * reference on). */
static int submit_common(tsr_task_t t, tsr_task_t const *preds, int npreds, tsr_task_t *out)
{
    /* the per-buffer fields the reset skips (internal.h) */
    memset(t->group_of, 0, (size_t)t->nbuffers * sizeof t->group_of[0]);
    memset(t->acc_of, 0, (size_t)t->nbuffers * sizeof t->acc_of[0]);
    /* One dependency record per distinct handle, with the union of modes. */
    tsr_data_t *hs[TSR_MAX_BUFFERS];
    int modes[TSR_MAX_BUFFERS], first[TSR_MAX_BUFFERS];
    int nh = 0;
    for (int i = 0; i < t->nbuffers; i++) {
        if (t->acc[i].mode == TSR_SCRATCH || (t->nodep & (1u << i)))
            continue;
        int k = 0;
        while (k < nh && hs[k] != t->data[i])
            k++;
        if (k == nh) {
            hs[nh] = t->data[i];
            first[nh] = i;
            modes[nh++] = 0;
        }
        modes[k] |= (int)t->acc[i].mode;
    }
    for (int k = 0; k < nh; k++) {
        int m = modes[k];
        if (m & TSR_COMMUTE)
            m = (m == TSR_COMMUTE) ? TSR_COMMUTE : TSR_RW; /* mixed: plain RW */
        if (m == TSR_COMMUTE)
            t->commute[t->ncommute++] = hs[k];
        modes[k] = m;
    }
    if (t->ncommute > 1)
        qsort(t->commute, t->ncommute, sizeof t->commute[0], cmp_handle);

    if (t->kind == TSR_KIND_USER)
        tsr__home_task(t); /* before anything can make it ready */
    else
        t->home1 = 0;
    if (!t->internal)
        throttle(t->bytes);
    /* plain stores: the record is this thread's until a handle's lock or
     * release_guard publishes it */
    atomic_store_explicit(&t->ndeps, 1, memory_order_relaxed);
    atomic_store_explicit(&t->refs, out ? 2 : 1, memory_order_relaxed);
    count_pending(t);

    /* If a handle's lists cannot grow, later tasks would not see this one:
     * then run it synchronously, which keeps program order. */
    bool sync = false;
    const tsr_sched_policy_t *pol = tsr__rt.sched.policy;
    bool want_preds = t->kind == TSR_KIND_USER && pol->submitted &&
                      (pol->flags & TSR_SCHED_WANTS_PREDECESSORS);
    if (want_preds)
        tsr__tl_preds_of = t;
    bool feed = tsr__rt.feed_next_use && t->kind == TSR_KIND_USER;
    if (feed)
        t->seq = atomic_fetch_add_explicit(&tsr__rt.next_seq, 1, memory_order_relaxed);
    if (tsr__rt.recording && t->kind == TSR_KIND_USER && !t->internal)
        tsr__record_submit(t, preds, npreds); /* before any predecessor can complete it */
    for (int k = 0; k < nh; k++) {
        if (feed && modes[k] != TSR_REDUX)
            uses_record(t, first[k]);
        tsr_task_t reduce = NULL;
        if (tsr__handle_depend(hs[k], t, (tsr_mode_t)modes[k], first[k], &reduce) != TSR_OK)
            sync = t->kind != TSR_KIND_ACQUIRE;
        if (reduce)
            release_guard(reduce);
    }
    for (int i = 0; i < npreds; i++)
        tsr__task_depend(t, preds[i]);
    if (t->kind == TSR_KIND_USER && pol->submitted)
        pol->submitted(&tsr__rt.sched, t);
    if (want_preds) {
        tsr__tl_preds_of = NULL;
        tsr__tasklist_clear(&tsr__tl_preds);
        /* Nothing stays behind in a thread that may end. */
        free(tsr__tl_preds.v);
        tsr__tl_preds = (tsr_tasklist_t){0};
    }
    if (out)
        *out = t;
    if (sync)
        tsr__task_ref(t);
    release_guard(t);
    if (sync) {
        (void)wait_until(task_is_done, t, "submit");
        tsr__task_unref(t);
    }
    return TSR_OK;
}

tsr_task_t tsr__task_new_internal(int kind, const char *name)
{
    tsr_task_t t = task_alloc();
    if (!t)
        return NULL;
    t->kind = kind;
    t->name = name;
    t->internal = true;
    atomic_store_explicit(&t->ndeps, 1, memory_order_relaxed);
    atomic_store_explicit(&t->refs, 1, memory_order_relaxed);
    count_pending(t);
    return t;
}

int tsr__submit_pair(const tsr_codelet_t *cl, const char *name, tsr_data_t *dst,
                     bool dst_dep, tsr_data_t *src, tsr_task_t *out)
{
    tsr_task_t t = task_alloc();
    if (!t)
        return TSR_ENOMEM;
    t->cl = cl;
    t->name = name;
    t->kind = TSR_KIND_USER;
    t->internal = true;
    t->nbuffers = 2;
    t->acc[0] = (tsr_access_t){dst->id, TSR_RW};
    t->acc[1] = (tsr_access_t){src->id, TSR_R};
    t->data[0] = dst;
    t->data[1] = src;
    t->nodep = dst_dep ? 0 : 1;
    for (int i = 0; i < 2; i++) {
        t->sizes[i] = t->data[i]->size;
        t->bytes += t->sizes[i];
    }
    return submit_common(t, NULL, 0, out);
}

static int bad_mode(int m)
{
    return m != TSR_R && m != TSR_W && m != TSR_RW && m != TSR_SCRATCH &&
           m != TSR_COMMUTE && m != TSR_REDUX;
}

static int submit_user(const tsr_task_desc_t *d, const tsr_codelet_t *cl, const char *name,
                       tsr_data_t *const *hs, tsr_task_t *out);
static int submit_pinned(const tsr_task_desc_t *d, const tsr_codelet_t *cl, const char *name,
                         tsr_task_t *out);

int tsr_submit(const tsr_task_desc_t *d, tsr_task_t *out)
{
    if (out)
        *out = NULL;
    if (!tsr__running())
        return tsr__fail(TSR_ESTATE, "submit: runtime not initialized");
    if (!d || !d->codelet)
        return tsr__fail(TSR_EINVAL, "submit: task or codelet is NULL");
    const tsr_codelet_t *cl = d->codelet;
    const char *name = d->name ? d->name : (cl->name ? cl->name : "(unnamed)");
    if (d->nbuffers != cl->nbuffers)
        return tsr__fail(TSR_EINVAL,
                         "submit '%s': %d buffers given, codelet '%s' takes %d",
                         name, d->nbuffers, cl->name ? cl->name : "", cl->nbuffers);
    if (d->nbuffers < 0 || d->nbuffers > TSR_MAX_BUFFERS)
        return tsr__fail(TSR_EINVAL, "submit '%s': %d buffers (max %d)", name,
                         d->nbuffers, TSR_MAX_BUFFERS);
    if (d->nbuffers > 0 && !d->buffers)
        return tsr__fail(TSR_EINVAL, "submit '%s': buffers array is NULL", name);
    if (d->args_size > TSR_MAX_ARGS)
        return tsr__fail(TSR_EINVAL, "submit '%s': %zu argument bytes (max %d)",
                         name, d->args_size, TSR_MAX_ARGS);
    if (d->args_size && !d->args)
        return tsr__fail(TSR_EINVAL, "submit '%s': args is NULL", name);
    if (d->ndeps < 0 || d->ndeps > TSR_MAX_DEPS || (d->ndeps && !d->deps))
        return tsr__fail(TSR_EINVAL, "submit '%s': %d dependencies%s (0 to %d)", name,
                         d->ndeps, d->ndeps && !d->deps ? " in a NULL array" : "",
                         TSR_MAX_DEPS);
    bool runnable = false;
    for (int k = 0; k < TSR_DEVICE_KINDS; k++)
        if (cl->impl[k] && tsr__rt.nworkers_of_kind[k] > 0)
            runnable = true;
    if (!runnable)
        return tsr__fail(TSR_ENODEV,
                         "submit '%s': codelet '%s' has no implementation for "
                         "any worker's device",
                         name, cl->name ? cl->name : "");
    for (int i = 0; i < d->nbuffers; i++) {
        if (!d->buffers[i].handle)
            return tsr__fail(TSR_EINVAL, "submit '%s': buffer %d is a NULL handle",
                             name, i);
        if (bad_mode(d->buffers[i].mode))
            return tsr__fail(TSR_EINVAL, "submit '%s': buffer %d has mode %d",
                             name, i, (int)d->buffers[i].mode);
    }
    /* Deterministic mode: order-free accumulations in submission order.
     * An accumulating codelet adds into its buffer under REDUX and COMMUTE
     * as under RW (REDUX's accumulator starts at the identity), so the sum
     * is the same function, summed in one order. */
    tsr_access_t ordered[TSR_MAX_BUFFERS];
    if (tsr__rt.cfg.deterministic && d->nbuffers > 0) {
        memcpy(ordered, d->buffers, (size_t)d->nbuffers * sizeof *ordered);
        for (int i = 0; i < d->nbuffers; i++)
            if (ordered[i].mode == TSR_COMMUTE || ordered[i].mode == TSR_REDUX)
                ordered[i].mode = TSR_RW;
        tsr_task_desc_t od = *d;
        od.buffers = ordered;
        return submit_pinned(&od, cl, name, out);
    }
    return submit_pinned(d, cl, name, out);
}

/* Submission of a checked description: pin its handles, check REDUX
 * buffers, make the task. */
static int submit_pinned(const tsr_task_desc_t *d, const tsr_codelet_t *cl, const char *name,
                         tsr_task_t *out)
{
    /* The application's ids become the runtime's handles here, pinned until
     * the task is recorded in their dependency state (an unregistration on
     * another thread waits for that): a stale id, or one being
     * unregistered, is refused before anything is recorded. */
    tsr_data_t *hs[TSR_MAX_BUFFERS];
    int npinned = 0, rc = TSR_OK;
    for (int i = 0; i < d->nbuffers && rc == TSR_OK; i++) {
        if ((rc = tsr__handle_pin(d->buffers[i].handle, "submit", &hs[i])) == TSR_OK) {
            npinned++;
        } else { /* the message names the task and the buffer (formatted only here) */
            char why[512];
            snprintf(why, sizeof why, "%s", tsr_error_message());
            rc = tsr__fail(rc, "submit '%s': buffer %d: %s", name, i,
                           strncmp(why, "submit: ", 8) ? why : why + 8);
        }
    }
    for (int i = 0; i < d->nbuffers && rc == TSR_OK; i++)
        if (d->buffers[i].mode == TSR_REDUX)
            rc = tsr__redux_check(hs, d->nbuffers, cl, name, i);
    if (rc == TSR_OK)
        rc = submit_user(d, cl, name, hs, out);
    for (int i = 0; i < npinned; i++)
        tsr__handle_unpin(hs[i]);
    return rc;
}

/* The task of a checked description on pinned handles. */
static int submit_user(const tsr_task_desc_t *d, const tsr_codelet_t *cl, const char *name,
                       tsr_data_t *const *hs, tsr_task_t *out)
{
    tsr_task_t t = task_alloc();
    if (!t)
        return tsr__fail(TSR_ENOMEM, "submit '%s': out of memory", name);
    t->cl = cl;
    t->name = name;
    t->tag = d->tag;
    t->priority = d->priority;
    t->kind = TSR_KIND_USER;
    t->nbuffers = d->nbuffers;
    for (int i = 0; i < d->nbuffers; i++) {
        t->acc[i] = d->buffers[i];
        t->data[i] = hs[i];
        t->sizes[i] = hs[i]->size;
        t->bytes += t->sizes[i];
    }
    t->args_size = d->args_size;
    if (d->args_size)
        memcpy(t->args, d->args, d->args_size);
    /* The explicit dependencies: every reference live (one more reference
     * on each, so that another thread's wait cannot free a record while it
     * is linked), else nothing is submitted. */
    tsr_task_t local[32], *preds = local;
    if (d->ndeps > 32 && !(preds = malloc((size_t)d->ndeps * sizeof *preds))) {
        task_free(t);
        return tsr__fail(TSR_ENOMEM, "submit '%s': out of memory", name);
    }
    int np = 0;
    for (; np < d->ndeps; np++)
        if (!(preds[np] = tsr__taskref_borrow(d->deps[np])))
            break;
    int rc = TSR_OK;
    if (np < d->ndeps) {
        rc = tsr__fail(TSR_EINVAL, "submit '%s': dependency %d (%p) is not a live task "
                       "reference (waited for or released already, or never returned by "
                       "tsr_submit)", name, np, (void *)d->deps[np]);
        task_free(t);
    } else {
        rc = submit_common(t, preds, np, out);
        if (rc == TSR_OK && out && *out)
            *out = tsr__taskref_issue(*out);
    }
    for (int i = 0; i < np; i++)
        tsr__task_unref(preds[i]);
    if (preds != local)
        free(preds);
    return rc;
}

int tsr__submit_internal(int kind, tsr_data_t *h, tsr_mode_t mode,
                         tsr_task_t *out)
{
    return tsr__submit_internal_args(kind, h, mode, NULL, NULL, 0, out);
}

int tsr__submit_internal_args(int kind, tsr_data_t *h, tsr_mode_t mode, const char *name,
                              const void *args, size_t args_size, tsr_task_t *out)
{
    if (args_size > TSR_MAX_ARGS)
        return tsr__fail(TSR_EINVAL, "internal task: %zu argument bytes", args_size);
    tsr_task_t t = task_alloc();
    if (!t)
        return tsr__fail(TSR_ENOMEM, "out of memory");
    static const char *names[] = {
        [TSR_KIND_USER] = "user",         [TSR_KIND_ACQUIRE] = "acquire",
        [TSR_KIND_INVALIDATE] = "invalidate", [TSR_KIND_BARRIER] = "barrier",
        [TSR_KIND_WONTUSE] = "wont-use",  [TSR_KIND_REDUCE] = "redux",
        [TSR_KIND_COMM] = "mpi",
    };
    t->name = name ? name : names[kind];
    t->kind = kind;
    t->args_size = args_size;
    if (args_size)
        memcpy(t->args, args, args_size);
    t->nbuffers = 1;
    t->acc[0].handle = h->id;
    t->data[0] = h;
    t->acc[0].mode = mode;
    t->sizes[0] = h->size;
    return submit_common(t, NULL, 0, out);
}

/* ---- what policies may read -------------------------------------------- */

/* A NULL task reads as an empty one: these answer, they never fail. */
/* They take the application's references too (tsr__task_untag). */
tsr_sched_fields_t *tsr_task_sched_fields(tsr_task_t t)
{
    return t ? &tsr__task_untag(t)->sched : NULL;
}
int tsr_task_priority(tsr_task_t t) { return t ? tsr__task_untag(t)->priority : 0; }
const char *tsr_task_name(tsr_task_t t) { return t ? tsr__task_untag(t)->name : NULL; }
const tsr_codelet_t *tsr_task_codelet(tsr_task_t t) { return t ? tsr__task_untag(t)->cl : NULL; }
int tsr_task_nbuffers(tsr_task_t t) { return t ? tsr__task_untag(t)->nbuffers : 0; }

/* Buffer i's handle id, as the application named it (a REDUX buffer stays
 * the application's handle after a worker took it). */
tsr_handle_t tsr_task_handle(tsr_task_t t, int i)
{
    t = t ? tsr__task_untag(t) : NULL;
    return (t && i >= 0 && i < t->nbuffers) ? t->acc[i].handle : NULL;
}

tsr_mode_t tsr_task_mode(tsr_task_t t, int i)
{
    t = t ? tsr__task_untag(t) : NULL;
    return (t && i >= 0 && i < t->nbuffers) ? t->acc[i].mode : (tsr_mode_t)0;
}

int tsr_task_predecessors(tsr_task_t t, tsr_task_t *out, int max)
{
    if (!t || tsr__tl_preds_of != t)
        return 0;
    for (int i = 0; out && i < tsr__tl_preds.n && i < max; i++)
        out[i] = tsr__tl_preds.v[i];
    return tsr__tl_preds.n;
}

int tsr_task_runs_on(tsr_task_t t, tsr_sched_t *s, int worker)
{
    (void)s;
    if (!t || worker < 0 || worker >= tsr__rt.nworkers)
        return 0;
    return tsr__task_can_run(tsr__task_untag(t), worker);
}
