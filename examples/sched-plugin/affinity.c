/* examples/sched-plugin/affinity.c — "affinity": node queues with data
 * affinity and stealing, a scheduling policy built as a plug-in.
 *
 * The idea. Workers share a memory node (the host's CPU workers) or have
 * one each (an accelerator's worker). Each memory node gets one FIFO queue
 * of ready tasks, shared by the node's workers. A ready task goes to the
 * node where it is expected to start soonest, weighing two things:
 *
 *   cost(node) = load(node) / workers(node) + WEIGHT * missing(node)
 *
 *   load     tasks queued for the node plus tasks its workers are running
 *   missing  the fraction of the task's input bytes not (yet) on the node:
 *            0 when everything it reads is there, 1 when nothing is
 *   WEIGHT   how many tasks of waiting per worker moving all of a task's
 *            inputs is worth (2 by default; AFFINITY_WEIGHT=x changes it)
 *
 * A worker takes the oldest task of its own node's queue. When that is
 * empty it steals the newest task of another node's queue: the one whose
 * inputs have had the least time to move there.
 *
 * It shows every part of the interface a policy usually needs: state made
 * in init, tasks threaded through their policy fields (no allocation per
 * task), the data-location queries, which worker push() names, when to
 * call tsr_sched_notify, pop() that is cheap when idle, done() for load
 * accounting. It uses nothing but <tessera/sched.h>; the guide is
 * docs/scheduler-plugins.md.
 *
 * Build and use (the project builds it as
 * build/examples/sched-plugin/libtessera-sched-affinity.so):
 *
 *   cc -O2 -shared -fPIC -o libtessera-sched-affinity.so affinity.c \
 *      $(pkg-config --cflags --libs tessera)
 *   TESSERA_SCHED=$PWD/libtessera-sched-affinity.so ./my-program
 *   TESSERA_SCHED_PATH=$PWD TESSERA_SCHED=affinity ./my-program
 *
 * AFFINITY_STATS=1 prints, at shutdown, how many tasks each node received,
 * ran itself and had stolen.
 *
 * Concurrency: push, pop and done run concurrently on many threads. Each
 * node queue has its own mutex, held only for a few pointer updates and
 * never together with another. The counts that decisions read without a
 * lock are atomics; they may be slightly stale, which only makes a choice
 * a little worse, never wrong. Once push() has queued a task it reads
 * nothing of it any more: another worker may already have popped and run
 * it, and the runtime may have reused it for a new task.
 */
#include <tessera/sched.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* tsr_handle_nodes() is a 32-bit mask: there are at most 32 memory nodes. */
#define MAX_NODES 32
#define DEFAULT_WEIGHT 2.0
/* Tasks a thief looks at in another node's queue for one it can run. The
 * owner's own scan is not bounded (in practice it stops at the first). */
#define STEAL_SCAN 16

typedef struct nodeq {
    pthread_mutex_t m;
    tsr_task_t head, tail;  /* FIFO: push at the tail, local pop at the head */
    atomic_long queued;     /* tasks in this queue */
    atomic_long running;    /* popped by this node's workers, done() not yet */
    atomic_uint next;       /* which of the node's workers push() names next */
    int nworkers;
    int *workers;           /* the workers whose data lives on this node */
    long pushed, local, stolen; /* statistics, under m */
    char pad[64];           /* keep neighbouring queues off this cache line */
} nodeq_t;

typedef struct affinity {
    int nworkers, nnodes;
    double weight;
    bool stats;
    atomic_long total;      /* tasks in all queues: the cheap idle test */
    int *node_of;           /* worker -> memory node */
    int *worker_ids;        /* storage for every nodeq_t's workers */
    nodeq_t q[MAX_NODES];
} affinity_t;

/* The policy's per-task fields: the queue links, and the node whose
 * worker popped the task (for done()). */
#define F(t) tsr_task_sched_fields(t)

/* ---- init / deinit: single-threaded, workers not running --------------- */

static int affinity_init(tsr_sched_t *s)
{
    affinity_t *a = calloc(1, sizeof *a);
    if (!a)
        return TSR_ENOMEM;
    a->nworkers = tsr_sched_worker_count(s);
    a->nnodes = tsr_sched_node_count(s);
    a->weight = DEFAULT_WEIGHT;
    const char *env = getenv("AFFINITY_WEIGHT");
    if (env && *env) {
        char *end;
        a->weight = strtod(env, &end);
        if (*end || !(a->weight >= 0 && a->weight <= 1e6)) {
            /* A policy cannot set the runtime's error message: say why on
             * stderr; tsr_init then fails with this code. */
            fprintf(stderr, "affinity: AFFINITY_WEIGHT='%s' is not a number in [0, 1e6]\n",
                    env);
            free(a);
            return TSR_EINVAL;
        }
    }
    env = getenv("AFFINITY_STATS");
    a->stats = env && *env && strcmp(env, "0") != 0;
    if (a->nnodes < 1 || a->nnodes > MAX_NODES || a->nworkers < 1) {
        fprintf(stderr, "affinity: %d memory nodes and %d workers (at most %d nodes)\n",
                a->nnodes, a->nworkers, MAX_NODES);
        free(a);
        return TSR_EINVAL;
    }
    a->node_of = calloc((size_t)a->nworkers, sizeof *a->node_of);
    a->worker_ids = calloc((size_t)a->nworkers, sizeof *a->worker_ids);
    if (!a->node_of || !a->worker_ids) {
        free(a->node_of);
        free(a->worker_ids);
        free(a);
        return TSR_ENOMEM;
    }
    /* Group the workers by node: q[n].workers points into worker_ids. */
    for (int w = 0; w < a->nworkers; w++) {
        int n = tsr_sched_worker_node(s, w);
        a->node_of[w] = n >= 0 && n < a->nnodes ? n : 0;
        a->q[a->node_of[w]].nworkers++;
    }
    int used = 0;
    for (int n = 0; n < a->nnodes; n++) {
        a->q[n].workers = a->worker_ids + used;
        used += a->q[n].nworkers;
        a->q[n].nworkers = 0;
        pthread_mutex_init(&a->q[n].m, NULL);
    }
    for (int w = 0; w < a->nworkers; w++) {
        nodeq_t *q = &a->q[a->node_of[w]];
        q->workers[q->nworkers++] = w;
    }
    tsr_sched_set_data(s, a);
    return TSR_OK;
}

static void affinity_deinit(tsr_sched_t *s)
{
    affinity_t *a = tsr_sched_data(s);
    if (!a)
        return;
    for (int n = 0; n < a->nnodes; n++) {
        nodeq_t *q = &a->q[n];
        if (a->stats && q->nworkers > 0)
            fprintf(stderr,
                    "affinity: node %d (%d worker%s): %ld pushed, %ld run there, "
                    "%ld stolen by other nodes\n",
                    n, q->nworkers, q->nworkers == 1 ? "" : "s", q->pushed, q->local,
                    q->stolen);
        pthread_mutex_destroy(&q->m);
    }
    free(a->node_of);
    free(a->worker_ids);
    free(a);
    tsr_sched_set_data(s, NULL);
}

/* ---- helpers ------------------------------------------------------------ */

/* A worker of node n that can run t, starting the search at `from` (so
 * successive calls spread over the node's workers); -1 if none can. */
static int node_worker_for(tsr_sched_t *s, const nodeq_t *q, tsr_task_t t, unsigned from)
{
    for (int i = 0; i < q->nworkers; i++) {
        int w = q->workers[(from + (unsigned)i) % (unsigned)q->nworkers];
        if (tsr_task_runs_on(t, s, w))
            return w;
    }
    return -1;
}

/* The node where t is expected to start soonest (see the top of the file);
 * ties go to the node of the calling worker (the data it just wrote is
 * there, and warm in its cache), then to the lower node. -1 if no worker
 * anywhere can run t (tsr_submit refuses such tasks, so never). */
static int choose_node(tsr_sched_t *s, affinity_t *a, tsr_task_t t, int cur)
{
    int cur_node = cur >= 0 ? a->node_of[cur] : -1;
    size_t on[MAX_NODES] = {0}, total_read = 0;
    /* With one node every byte is there: skip the directory look-ups. */
    if (a->nnodes > 1)
        for (int n = 0; n < a->nnodes; n++)
            on[n] = tsr_task_bytes_on(t, n, &total_read);
    int best = -1;
    double best_cost = 0;
    for (int n = 0; n < a->nnodes; n++) {
        nodeq_t *q = &a->q[n];
        if (q->nworkers == 0 || node_worker_for(s, q, t, 0) < 0)
            continue;
        double load = (double)(atomic_load_explicit(&q->queued, memory_order_relaxed) +
                               atomic_load_explicit(&q->running, memory_order_relaxed));
        double missing = total_read ? 1.0 - (double)on[n] / (double)total_read : 0.0;
        double cost = load / q->nworkers + a->weight * missing;
        if (best < 0 || cost < best_cost || (cost == best_cost && n == cur_node)) {
            best = n;
            best_cost = cost;
        }
    }
    return best;
}

/* Unlink t from q (q->m held). */
static void unlink_task(affinity_t *a, nodeq_t *q, tsr_task_t t)
{
    tsr_task_t prev = F(t)->prev, next = F(t)->next;
    if (prev)
        F(prev)->next = next;
    else
        q->head = next;
    if (next)
        F(next)->prev = prev;
    else
        q->tail = prev;
    F(t)->next = F(t)->prev = NULL;
    atomic_fetch_sub_explicit(&q->queued, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&a->total, 1, memory_order_relaxed);
}

/* Take from q a task worker w can run: the oldest from the head (own
 * node), or one of the STEAL_SCAN newest from the tail (a thief). */
static tsr_task_t take(tsr_sched_t *s, affinity_t *a, nodeq_t *q, int w, bool steal)
{
    /* Cheap test first: the idle loop calls pop constantly. */
    if (atomic_load_explicit(&q->queued, memory_order_relaxed) == 0)
        return NULL;
    pthread_mutex_lock(&q->m);
    tsr_task_t t = steal ? q->tail : q->head;
    for (int seen = 0; t && !tsr_task_runs_on(t, s, w); seen++) {
        if (steal && seen + 1 >= STEAL_SCAN) {
            t = NULL;
            break;
        }
        t = steal ? F(t)->prev : F(t)->next;
    }
    if (t) {
        unlink_task(a, q, t);
        if (steal)
            q->stolen++;
        else
            q->local++;
    }
    pthread_mutex_unlock(&q->m);
    return t;
}

/* ---- the callbacks ------------------------------------------------------ */

/* A task is ready (any thread, concurrently with everything). */
static int affinity_push(tsr_sched_t *s, tsr_task_t t)
{
    affinity_t *a = tsr_sched_data(s);
    /* The worker whose task just made t ready, or -1 (the application's
     * thread, a copy engine). */
    int cur = tsr_sched_current_worker(s);
    int n = choose_node(s, a, t, cur);
    if (n < 0)
        n = a->node_of[0]; /* unreachable: see choose_node */
    nodeq_t *q = &a->q[n];

    /* Which worker to name, decided before t is queued: once it is in a
     * queue another worker may pop it, run it, and the runtime may reuse
     * it for a new task, so nothing may read t after the unlock below.
     * The runtime wakes the named worker and starts moving t's inputs to
     * its node, so it must be a worker of node n that can run t (it pops
     * n's queue). If the calling worker is one, name it: it asks the
     * policy again as soon as its current task is finished, and nobody
     * needs waking. Otherwise take the node's workers in turn. */
    int target;
    if (cur >= 0 && a->node_of[cur] == n && tsr_task_runs_on(t, s, cur))
        target = cur;
    else
        target = node_worker_for(s, q, t, atomic_fetch_add_explicit(&q->next, 1,
                                                                   memory_order_relaxed));

    pthread_mutex_lock(&q->m);
    F(t)->next = NULL;
    F(t)->prev = q->tail;
    if (q->tail)
        F(q->tail)->next = t;
    else
        q->head = t;
    q->tail = t;
    q->pushed++;
    long queued = atomic_fetch_add_explicit(&q->queued, 1, memory_order_relaxed) + 1;
    atomic_fetch_add_explicit(&a->total, 1, memory_order_relaxed);
    pthread_mutex_unlock(&q->m);
    /* t is now the queue's: from here on, no tsr_task_… call on it. */

    /* More tasks queued on the node than it has workers: the named worker
     * is busy. Make sure some worker (perhaps of another node, which may
     * steal it) looks at the queues soon instead of sleeping. */
    if (queued > q->nworkers)
        tsr_sched_notify(s, -1);
    return target;
}

/* Worker w asks for a task (its own thread; all workers concurrently). */
static tsr_task_t affinity_pop(tsr_sched_t *s, int w)
{
    affinity_t *a = tsr_sched_data(s);
    if (atomic_load_explicit(&a->total, memory_order_relaxed) == 0)
        return NULL; /* nothing anywhere: the common idle case, no lock */
    int home = a->node_of[w];
    tsr_task_t t = take(s, a, &a->q[home], w, false);
    /* Steal, visiting the other nodes from the next one on (so thieves of
     * different nodes start at different victims). */
    for (int i = 1; !t && i < a->nnodes; i++)
        t = take(s, a, &a->q[(home + i) % a->nnodes], w, true);
    if (t) {
        F(t)->worker = home; /* the node whose load done() lowers */
        atomic_fetch_add_explicit(&a->q[home].running, 1, memory_order_relaxed);
    }
    return t;
}

/* t ran on worker w and its successors were released. */
static void affinity_done(tsr_sched_t *s, tsr_task_t t, int w)
{
    (void)w;
    affinity_t *a = tsr_sched_data(s);
    atomic_fetch_sub_explicit(&a->q[F(t)->worker].running, 1, memory_order_relaxed);
}

/* The one symbol the runtime looks for. */
const tsr_sched_policy_t tsr_sched_policy = {
    .name = "affinity",
    .description = "node queues: data affinity against load, stealing the newest",
    .init = affinity_init,
    .deinit = affinity_deinit,
    .push = affinity_push,
    .pop = affinity_pop,
    .done = affinity_done,
};
