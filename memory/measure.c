/* memory/measure.c — timing real copies between two memory nodes through
 * the copy engine that performs them, for the scheduler's bus model.
 *
 * Must never: run a copy on the caller's thread (the node's engine does
 * it, as for the directory's copies), return before every queued copy has
 * completed (the engine still holds the copy otherwise), or touch memory
 * the directory accounts for (the buffers are allocated and freed here).
 * Its wait is tsr__mem_wait_until: under the virtual clock it runs events.
 */
#include "memory/memory.h"

#include <tessera/tessera.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct timed {
    pthread_mutex_t m;
    pthread_cond_t cv;
    bool done;
    int status;
    uint64_t t_done;
} timed_t;

/* Engine thread: one copy ended. */
static void copy_done(void *arg, int status)
{
    timed_t *w = arg;
    uint64_t t = tsr__mem_now_ns();
    pthread_mutex_lock(&w->m);
    w->t_done = t;
    w->status = status;
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->m);
}

static bool timed_done(void *arg) { return ((timed_t *)arg)->done; }

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* One copy on `engine`'s queue, waited for. Seconds from queueing to
 * completion in *secs. */
static int one_copy(tsr_node_t *engine, tsr_copy_t c, timed_t *w, double *secs, char *err,
                    size_t errlen)
{
    pthread_mutex_lock(&w->m);
    w->done = false;
    w->status = 0;
    pthread_mutex_unlock(&w->m);
    c.done = copy_done;
    c.arg = w;
    c.err[0] = 0;
    c.t_queued = tsr__mem_now_ns();
    int rc = engine->ops->copy(engine, &c);
    if (rc != TSR_OK)
        return fail(err, errlen, rc, "%s", c.err[0] ? c.err : "cannot queue a copy");
    if (!tsr__mem_wait_until(timed_done, w, &w->m, &w->cv))
        return fail(err, errlen, TSR_ESTATE, "time copy: the simulation has no event left "
                    "that completes the copy");
    pthread_mutex_lock(&w->m);
    int status = w->status;
    uint64_t t1 = w->t_done;
    pthread_mutex_unlock(&w->m);
    if (status != TSR_OK)
        return fail(err, errlen, status, "%s", c.err[0] ? c.err : "a copy failed");
    *secs = t1 > c.t_queued ? (double)(t1 - c.t_queued) * 1e-9 : 0;
    return TSR_OK;
}

int tsr__mem_time_copy(int src, int dst, size_t bytes, int reps, double *best_seconds,
                       char *err, size_t errlen)
{
    int n = tsr__mem_node_count();
    if (src < 0 || dst < 0 || src >= n || dst >= n || src == dst)
        return fail(err, errlen, TSR_EINVAL, "time copy: nodes %d -> %d of %d", src, dst, n);
    if (!bytes || reps < 1 || !best_seconds)
        return fail(err, errlen, TSR_EINVAL, "time copy: %zu bytes, %d repetitions", bytes,
                    reps);
    tsr_node_t *S = tsr__mem_node(src), *D = tsr__mem_node(dst);
    /* As the directory does: the engine of the node that is not the host. */
    tsr_node_t *engine = dst != 0 ? D : S, *other = dst != 0 ? S : D;
    if (!S->ops || !D->ops || engine->kind == TSR_NODE_KIND_HOST || !engine->ops->copy)
        return fail(err, errlen, TSR_EINVAL, "time copy %s -> %s: no copy engine", S->name,
                    D->name);
    if (other->kind != TSR_NODE_KIND_HOST && !engine->ops->peer(engine, other))
        return fail(err, errlen, TSR_EINVAL, "time copy %s -> %s: no direct path", S->name,
                    D->name);

    void *sb = S->ops->alloc(S, bytes), *db = D->ops->alloc(D, bytes);
    if (!sb || !db) {
        if (sb)
            S->ops->free(S, sb, bytes);
        if (db)
            D->ops->free(D, db, bytes);
        return fail(err, errlen, TSR_ENOMEM, "time copy %s -> %s: cannot allocate %zu bytes",
                    S->name, D->name, bytes);
    }
    /* Host and simulated memory is host RAM: give the source defined
     * contents and fault the pages in before timing (memory that reads as
     * zeros, a phantom node's, is left untouched; a disk replica's address
     * names a range of its file and is not memory). */
    bool ram_s = S->kind == TSR_NODE_KIND_HOST || S->kind == TSR_NODE_KIND_SIM;
    bool ram_d = D->kind == TSR_NODE_KIND_HOST || D->kind == TSR_NODE_KIND_SIM;
    if (ram_s && !S->ops->alloc_zeroed)
        memset(sb, 0x5a, bytes);
    if (ram_d && !D->ops->alloc_zeroed)
        memset(db, 0, bytes);

    timed_t w = {.done = false};
    pthread_mutex_init(&w.m, NULL);
    pthread_cond_init(&w.cv, NULL);
    tsr_copy_t c = {.src_node = src, .dst_node = dst, .src = sb, .dst = db, .size = bytes};
    double best = 0;
    int rc = TSR_OK;
    for (int r = 0; r < reps && rc == TSR_OK; r++) {
        double t = 0;
        rc = one_copy(engine, c, &w, &t, err, errlen);
        if (rc == TSR_OK && (r == 0 || t < best))
            best = t;
    }
    pthread_mutex_destroy(&w.m);
    pthread_cond_destroy(&w.cv);
    S->ops->free(S, sb, bytes);
    D->ops->free(D, db, bytes);
    if (rc == TSR_OK)
        *best_seconds = best;
    return rc;
}
