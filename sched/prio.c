/* sched/prio.c — one central queue ordered by priority (larger first), FIFO
 * among equal priorities.
 *
 * A pairing heap (sched/pheap.h) threaded through the tasks' policy fields,
 * so push never allocates and never fails.
 */
#include "sched/pheap.h"
#include "sched/policies.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

typedef struct prio {
    pthread_mutex_t m;
    tsr_task_t root;
    double seq;
    atomic_long count;
} prio_t;

#define F(t) tsr_task_sched_fields(t)

/* Whether a must run before b. */
static bool before(tsr_task_t a, tsr_task_t b)
{
    int pa = tsr_task_priority(a), pb = tsr_task_priority(b);
    return pa > pb || (pa == pb && F(a)->key < F(b)->key);
}

static int prio_init(tsr_sched_t *s)
{
    prio_t *q = calloc(1, sizeof *q);
    if (!q)
        return TSR_ENOMEM;
    /* Adaptive: spin briefly before sleeping, since the critical sections
     * are a few instructions long and contended by submitter and workers. */
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&q->m, &attr);
    pthread_mutexattr_destroy(&attr);
    tsr_sched_set_data(s, q);
    return TSR_OK;
}

static void prio_deinit(tsr_sched_t *s)
{
    prio_t *q = tsr_sched_data(s);
    pthread_mutex_destroy(&q->m);
    free(q);
}

static int prio_push(tsr_sched_t *s, tsr_task_t t)
{
    prio_t *q = tsr_sched_data(s);
    pthread_mutex_lock(&q->m);
    F(t)->key = q->seq++;
    q->root = tsr_ph_push(q->root, t, before);
    atomic_fetch_add(&q->count, 1);
    pthread_mutex_unlock(&q->m);
    return -1;
}

static tsr_task_t prio_pop(tsr_sched_t *s, int worker)
{
    prio_t *q = tsr_sched_data(s);
    if (atomic_load_explicit(&q->count, memory_order_relaxed) == 0)
        return NULL;
    pthread_mutex_lock(&q->m);
    tsr_task_t t = q->root;
    /* The most urgent task only; a worker of another device kind (or of
     * another node than the task's home) leaves it to the workers that can
     * run it, and makes sure one of them looks: the task that woke this
     * worker may have been another one, behind it. */
    int other = -1;
    if (t && tsr_task_runs_on(t, s, worker)) {
        q->root = tsr_ph_pop(t, before);
        atomic_fetch_sub(&q->count, 1);
    } else {
        for (int w = 0; t && w < tsr_sched_worker_count(s) && other < 0; w++)
            if (tsr_task_runs_on(t, s, w))
                other = w;
        t = NULL;
    }
    pthread_mutex_unlock(&q->m);
    if (other >= 0)
        tsr_sched_notify(s, other);
    return t;
}

const tsr_sched_policy_t tsr__policy_prio = {
    .name = "prio",
    .description = "one central queue, highest priority first",
    .init = prio_init,
    .deinit = prio_deinit,
    .push = prio_push,
    .pop = prio_pop,
};
