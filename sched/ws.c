/* sched/ws.c — work stealing with data affinity.
 *
 * One deque per worker. A ready task goes to the worker whose memory node
 * already holds most of its inputs (on one node: the worker that made it
 * ready, so producer and consumer share a cache); the owner takes from the
 * back (depth first), an idle worker steals from the front of another
 * deque — first from workers on its own memory node — and among the first
 * few tasks there picks the one whose inputs are already on its node.
 *
 * Must never: let a worker take a task it cannot run; lock two deques at
 * once.
 */
#include "sched/policies.h"
#include "sched/queue.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

/* Tasks a thief looks at in a victim's deque to find local data. */
#define STEAL_SCAN 8

typedef struct wsq {
    pthread_mutex_t m;
    tsr_tq_t q;
    atomic_long n;
    int node;
    char pad[64];
} wsq_t;

typedef struct ws {
    int nw, nnodes;
    atomic_long total;
    wsq_t w[];
} ws_t;

static int ws_init(tsr_sched_t *s)
{
    int nw = tsr_sched_worker_count(s);
    ws_t *p = calloc(1, sizeof *p + (size_t)nw * sizeof p->w[0]);
    if (!p)
        return TSR_ENOMEM;
    p->nw = nw;
    p->nnodes = tsr_sched_node_count(s);
    for (int i = 0; i < nw; i++) {
        pthread_mutex_init(&p->w[i].m, NULL);
        p->w[i].node = tsr_sched_worker_node(s, i);
    }
    tsr_sched_set_data(s, p);
    return TSR_OK;
}

static void ws_deinit(tsr_sched_t *s)
{
    ws_t *p = tsr_sched_data(s);
    for (int i = 0; i < p->nw; i++)
        pthread_mutex_destroy(&p->w[i].m);
    free(p);
}

/* Whether worker a is a better home than b for a task (b may be -1). */
static bool better(ws_t *p, int a, size_t bytes_a, int b, size_t bytes_b, int cur)
{
    if (b < 0)
        return true;
    if (bytes_a != bytes_b)
        return bytes_a > bytes_b;
    if (a == cur || b == cur)
        return a == cur;
    return atomic_load_explicit(&p->w[a].n, memory_order_relaxed) <
           atomic_load_explicit(&p->w[b].n, memory_order_relaxed);
}

static int ws_push(tsr_sched_t *s, tsr_task_t t)
{
    ws_t *p = tsr_sched_data(s);
    int cur = tsr_sched_current_worker(s);
    size_t on_node[32] = {0};
    if (p->nnodes > 1)
        for (int n = 0; n < p->nnodes && n < 32; n++)
            on_node[n] = tsr_task_bytes_on(t, n, NULL);
    int best = -1;
    size_t best_bytes = 0;
    for (int i = 0; i < p->nw; i++) {
        if (!tsr_task_runs_on(t, s, i))
            continue;
        size_t b = p->w[i].node < 32 ? on_node[p->w[i].node] : 0;
        if (better(p, i, b, best, best_bytes, cur)) {
            best = i;
            best_bytes = b;
        }
    }
    if (best < 0)
        best = 0; /* the runtime only pushes tasks some worker can run */
    tsr_sched_prefetch(s, t, best);
    wsq_t *q = &p->w[best];
    pthread_mutex_lock(&q->m);
    tsr_tq_push_back(&q->q, t);
    long before = atomic_fetch_add(&q->n, 1);
    pthread_mutex_unlock(&q->m);
    atomic_fetch_add(&p->total, 1);
    if (best == cur)
        return -1; /* the owner takes it next; wake a thief for the rest */
    /* A busy owner: let an idle worker come and steal. */
    if (before > 0)
        tsr_sched_notify(s, -1);
    return best;
}

/* Take a task from q for `worker`: from the back if it is the owner; as a
 * thief from the front, preferring, among the first STEAL_SCAN tasks it
 * can run, the one with most input bytes on its node. */
static tsr_task_t take(ws_t *p, tsr_sched_t *s, wsq_t *q, int worker, bool owner)
{
    if (atomic_load_explicit(&q->n, memory_order_relaxed) == 0)
        return NULL;
    pthread_mutex_lock(&q->m);
    tsr_task_t t;
    if (owner || p->nnodes == 1) {
        t = tsr_tq_take(&q->q, s, worker, owner);
    } else {
        int node = p->w[worker].node, seen = 0;
        size_t best_bytes = 0;
        t = NULL;
        for (tsr_task_t c = q->q.head; c && seen < STEAL_SCAN;
             c = tsr_task_sched_fields(c)->next) {
            if (!tsr_task_runs_on(c, s, worker))
                continue;
            size_t b = tsr_task_bytes_on(c, node, NULL);
            if (!t || b > best_bytes) {
                t = c;
                best_bytes = b;
            }
            seen++;
        }
        if (t)
            tsr_tq_remove(&q->q, t);
    }
    if (t) {
        atomic_fetch_sub(&q->n, 1);
        atomic_fetch_sub(&p->total, 1);
    }
    pthread_mutex_unlock(&q->m);
    return t;
}

static tsr_task_t ws_pop(tsr_sched_t *s, int worker)
{
    ws_t *p = tsr_sched_data(s);
    if (atomic_load_explicit(&p->total, memory_order_relaxed) == 0)
        return NULL;
    tsr_task_t t = take(p, s, &p->w[worker], worker, true);
    /* Steal: victims on the same node first, then the others. */
    int node = p->w[worker].node;
    for (int pass = 0; pass < 2 && !t; pass++)
        for (int k = 1; k < p->nw && !t; k++) {
            int v = (worker + k) % p->nw;
            if ((p->w[v].node == node) == (pass == 0))
                t = take(p, s, &p->w[v], worker, false);
        }
    return t;
}

const tsr_sched_policy_t tsr__policy_ws = {
    .name = "ws",
    .description = "per-worker deques, stealing, tasks placed where their data is",
    .init = ws_init,
    .deinit = ws_deinit,
    .push = ws_push,
    .pop = ws_pop,
};
