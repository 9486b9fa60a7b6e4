/* runtime/execute.c — what every driver's workers do the same way: the
 * worker table, asking the directory for a task's data, scratch buffers,
 * and finishing a task (models, counters, trace, release, completion).
 *
 * The drivers (worker.c: threads; simulate.c: virtual time) decide when
 * these run; this file decides nothing about time. Must never: block,
 * start a thread, or read the clock other than through tsr__mem_now_ns().
 */
#include "runtime/internal.h"
#include "runtime/perfmodel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the worker table ------------------------------------------------------ */

/* tsr__rt.workers: ncpu CPU workers, then one per accelerator node. */
int tsr__workers_table(int ncpu, int ncores)
{
    /* ncpu CPU workers, then one worker per accelerator node (a GPU's
     * driver, or a simulated accelerator running CPU implementations).
     * No worker runs on the disk tier. */
    int acc[TSR_MAX_NODES], nacc = 0;
    for (int j = 1; j < tsr__mem_node_count(); j++)
        if (tsr__mem_node(j)->kind != TSR_NODE_KIND_DISK)
            acc[nacc++] = j;
    int n = ncpu + nacc;
    if (n == 0)
        return tsr__fail(TSR_EINVAL, "init: no CPU workers and no accelerators");
    tsr__rt.workers = calloc((size_t)n, sizeof *tsr__rt.workers);
    if (!tsr__rt.workers)
        return tsr__fail(TSR_ENOMEM, "init: cannot allocate %d workers", n);
    tsr__rt.nworkers = n;
    int depth = tsr__rt.cfg.pipeline > 0 ? tsr__rt.cfg.pipeline : 4;
    if (depth > TSR_PIPE_MAX)
        depth = TSR_PIPE_MAX;
    for (int i = 0; i < n; i++) {
        tsr_worker_t *w = &tsr__rt.workers[i];
        w->id = i;
        w->node = i < ncpu ? 0 : acc[i - ncpu];
        tsr_node_t *node = tsr__mem_node(w->node);
        w->device_kind = node->kind == TSR_NODE_KIND_CUDA ? TSR_DEVICE_CUDA : TSR_DEVICE_CPU;
        /* A CPU worker's data is already in host memory: nothing to
         * overlap, and holding tasks would only keep them from others. */
        w->depth = w->node == 0 ? 1 : depth;
        tsr__rt.nworkers_of_kind[w->device_kind]++;
        /* More workers than cores share cores (oversubscription is the
         * user's choice); binding then wraps around. */
        w->cpu = tsr__rt.cfg.bind && ncores > 0 ? i % ncores : -1;
        pthread_mutex_init(&w->m, NULL);
        pthread_cond_init(&w->cv, NULL);
    }
    return TSR_OK;
}

/* Free the table, its scratch buffers and trace events. */
void tsr__workers_table_free(void)
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
}

/* ---- data ------------------------------------------------------------------ */

/* The directory's mode of a task access mode. */
static int mem_mode(int mode)
{
    switch (mode) {
    case TSR_R: return TSR_MEM_R;
    case TSR_W: return TSR_MEM_W;
    default: return TSR_MEM_RW; /* RW, COMMUTE, REDUX accumulators */
    }
}

/* t failed before its implementation ran: complete it as failed. */
void tsr__worker_fail(tsr_worker_t *w, tsr_task_t t, int code)
{
    t->error_code = code;
    tsr__task_complete(t, TSR_RESULT_FAILED, w->id);
}

/* Tasks released to w's device (tsr__task_launched) come before the
 * policy's: they keep the device busy behind their predecessors. */
void tsr__worker_devq_push(tsr_worker_t *w, tsr_task_t t)
{
    t->dev_next = NULL;
    t->via_devq = true;
    pthread_mutex_lock(&w->m);
    if (w->devq_tail)
        w->devq_tail->dev_next = t;
    else
        w->devq_head = t;
    w->devq_tail = t;
    atomic_fetch_add(&w->ndevq, 1);
    pthread_mutex_unlock(&w->m);
    if (tsr__tl_worker != w->id)
        tsr__workers_notify(w->id);
}

static tsr_task_t devq_pop(tsr_worker_t *w)
{
    pthread_mutex_lock(&w->m);
    tsr_task_t t = w->devq_head;
    if (t) {
        w->devq_head = t->dev_next;
        if (!w->devq_head)
            w->devq_tail = NULL;
        atomic_fetch_sub(&w->ndevq, 1);
    }
    pthread_mutex_unlock(&w->m);
    return t;
}

tsr_task_t tsr__worker_next(tsr_worker_t *w, long *queued_left)
{
    *queued_left = 0;
    if (atomic_load(&w->ndevq) > 0) {
        tsr_task_t d = devq_pop(w);
        if (d)
            return d;
    }
    tsr_task_t t = w->next;
    if (t) {
        w->next = NULL;
        return t;
    }
    if (tsr__rt.accel_first && w->node == 0 &&
        atomic_load_explicit(&tsr__rt.nqueued_host, memory_order_acquire) == 0)
        return NULL; /* nothing queued that a host worker may run */
    t = tsr__rt.sched.policy->pop(&tsr__rt.sched, w->id);
    if (t) {
        *queued_left = atomic_fetch_sub(&tsr__rt.nqueued, 1) - 1;
        if (t->queued_host)
            atomic_fetch_sub(&tsr__rt.nqueued_host, 1);
    }
    return t;
}

/* One directory entry per distinct handle with the union of its modes;
 * REDUX buffers become w's accumulators. */
bool tsr__worker_take(tsr_worker_t *w, tsr_task_t t, void (*ready)(tsr_mem_req_t *r))
{
    tsr_mem_req_t *r = &t->mreq;
    r->node = w->node;
    r->n = 0;
    r->done = ready;
    r->arg = t;
    t->run_worker = w->id;
    atomic_store_explicit(&t->data_state, DATA_FETCHING, memory_order_relaxed);
    for (int i = 0; i < t->nbuffers; i++) {
        t->slot[i] = -1;
        int mode = t->acc[i].mode;
        if (mode == TSR_SCRATCH)
            continue;
        if (mode == TSR_REDUX && tsr__redux_take(t, i, w->id) != TSR_OK) {
            tsr__worker_fail(w, t, TSR_ENOMEM); /* the reason is in r->err */
            return false;
        }
        tsr_data_t *h = t->data[i];
        int k = 0;
        while (k < r->n && r->e[k] != h->entry)
            k++;
        if (k == r->n) {
            r->e[k] = h->entry;
            r->mode[k] = 0;
            r->n++;
        }
        r->mode[k] |= (uint8_t)mem_mode(t->acc[i].mode);
        t->slot[i] = (int8_t)k;
    }
    int rc = tsr__mem_acquire(r);
    if (rc < 0) {
        tsr__worker_fail(w, t, rc);
        return false;
    }
    if (rc == 1)
        atomic_store_explicit(&t->data_state, DATA_READY, memory_order_release);
    return true;
}

/* Pipeline order: the oldest task whose data is there. */
int tsr__worker_first_ready(const tsr_worker_t *w)
{
    for (int i = 0; i < w->ninflight; i++)
        if (atomic_load(&w->inflight[i]->data_state) == DATA_READY)
            return i;
    return -1;
}

/* Take entry i out of the pipeline, keeping the others in order. */
tsr_task_t tsr__worker_remove(tsr_worker_t *w, int i)
{
    tsr_task_t t = w->inflight[i];
    for (int k = i + 1; k < w->ninflight; k++)
        w->inflight[k - 1] = w->inflight[k];
    w->ninflight--;
    return t;
}

/* ---- scratch ----------------------------------------------------------------- */

/* Device memory only where kernels run on the device (a GPU node with
 * exec_begin); a simulated GPU's implementation runs on the host. */
void *tsr__worker_scratch(tsr_worker_t *w, tsr_node_t *node, int i, size_t size, char *err,
                          size_t errlen)
{
    bool device = w->device_kind == TSR_DEVICE_CUDA && node->kind == TSR_NODE_KIND_CUDA &&
                  node->ops->exec_begin;
    if (w->scratch_size[i] < size || !w->scratch[i]) {
        size_t sz = (size + 255) & ~(size_t)255;
        if (sz == 0)
            sz = 256;
        if (device) {
            if (w->scratch[i])
                node->ops->free(node, w->scratch[i], w->scratch_size[i]);
            w->scratch[i] = node->ops->alloc(node, sz);
        } else {
            free(w->scratch[i]);
            w->scratch[i] = aligned_alloc(64, sz);
        }
        w->scratch_size[i] = w->scratch[i] ? sz : 0;
        if (!w->scratch[i])
            snprintf(err, errlen, "no %s memory for SCRATCH buffer %d (%zu bytes) on %s",
                     device ? "device" : "host", i, size, node->name);
    }
    return w->scratch[i];
}

/* Device scratch back to its node's pool (host scratch: with the table). */
void tsr__worker_scratch_release(tsr_worker_t *w)
{
    tsr_node_t *node = tsr__mem_node(w->node);
    if (w->device_kind != TSR_DEVICE_CUDA || !node->ops->exec_begin)
        return;
    for (int k = 0; k < TSR_MAX_BUFFERS; k++) {
        if (w->scratch[k])
            node->ops->free(node, w->scratch[k], w->scratch_size[k]);
        w->scratch[k] = NULL;
        w->scratch_size[k] = 0;
    }
}

/* bufs[i]: buffer i's replica on w's node, or w's scratch buffer i. */
int tsr__worker_buffers(tsr_worker_t *w, tsr_task_t t, void **bufs)
{
    tsr_node_t *node = tsr__mem_node(w->node);
    for (int i = 0; i < t->nbuffers; i++) {
        char why[TSR_MEM_ERR] = "";
        bufs[i] = t->slot[i] >= 0 ? t->mreq.ptr[t->slot[i]]
                                  : tsr__worker_scratch(w, node, i, t->sizes[i], why, sizeof why);
        if (!bufs[i]) {
            tsr__mem_release(&t->mreq);
            snprintf(t->mreq.err, sizeof t->mreq.err, "%s", why);
            tsr__worker_fail(w, t, TSR_ENOMEM);
            return TSR_ENOMEM;
        }
    }
    return TSR_OK;
}

/* ---- finishing ----------------------------------------------------------------- */

/* From `start` to now on the driver's clock: sample (when measured),
 * count, trace, release, complete; w may get t's first ready successor
 * without a wake-up (tsr__tl_self_slot). */
void tsr__worker_finish(tsr_worker_t *w, tsr_task_t t, int rc, uint64_t start)
{
    uint64_t end = tsr__mem_now_ns();
    if (rc == 0 && tsr__rt.sampling && !t->dev_behind)
        tsr__perfmodel_sample(t->cl, w->device_kind, t->sizes, t->nbuffers, t->args,
                              (double)(end - start) * 1e-9);
    /* a GPU worker's tasks launched behind others on its stream overlap
     * them from launch to end: count the union of the intervals, not their
     * sum (which made a GPU more than 100 % busy) */
    uint64_t from = start > w->busy_end_ns ? start : w->busy_end_ns;
    w->busy_ns += end > from ? end - from : 0;
    if (end > w->busy_end_ns)
        w->busy_end_ns = end;
    w->ntasks++;
    if (tsr__rt.tracing)
        tsr__trace_record(w, t->name, start, end);
    if (t->rec_id)
        tsr__record_ran(w, t, start, end, rc);
    t->error_code = rc;
    tsr__mem_release(&t->mreq);
    /* Released to a device, launched, then a predecessor it read from
     * failed (device-ordered: its kernels ran on that failure's output). */
    int result = rc != 0                      ? TSR_RESULT_FAILED
                 : atomic_load(&t->cancelled) ? TSR_RESULT_CANCELLED
                                              : TSR_RESULT_OK;
    tsr__tl_self_slot = true;
    tsr__task_complete(t, result, w->id);
    tsr__tl_self_slot = false;
}

/* Depth of codelet calls on this thread: a blocking call made from inside
 * one would wait for the task that runs it (tsr__in_codelet). */
static _Thread_local int tl_codelet_depth;

bool tsr__in_codelet(void) { return tl_codelet_depth > 0; }

int tsr__worker_run_impl(tsr_task_t t, tsr_kernel_fn impl, void **bufs, const tsr_exec_t *exec)
{
    tl_codelet_depth++;
    int rc = tsr__redux_init_accumulators(t, bufs, exec);
    if (rc == 0)
        rc = impl(bufs, t->args, exec);
    tl_codelet_depth--;
    return rc;
}
