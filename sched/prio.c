/* sched/prio.c — one central queue ordered by priority (larger first), FIFO
 * among equal priorities.
 *
 * A pairing heap threaded through the tasks' policy fields (next = sibling,
 * prev = first child), so push never allocates and never fails.
 */
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

/* Meld two heaps whose roots have no siblings. */
static tsr_task_t meld(tsr_task_t a, tsr_task_t b)
{
    if (!a)
        return b;
    if (!b)
        return a;
    if (before(b, a)) {
        tsr_task_t x = a;
        a = b;
        b = x;
    }
    F(b)->next = F(a)->prev;
    F(a)->prev = b;
    return a;
}

/* Two-pass pairing of a child list, iteratively. */
static tsr_task_t merge_children(tsr_task_t c)
{
    tsr_task_t pairs = NULL;
    while (c) {
        tsr_task_t a = c, b = F(a)->next;
        if (!b) {
            F(a)->next = pairs;
            pairs = a;
            break;
        }
        c = F(b)->next;
        F(a)->next = F(b)->next = NULL;
        tsr_task_t m = meld(a, b);
        F(m)->next = pairs;
        pairs = m;
    }
    tsr_task_t res = NULL;
    while (pairs) {
        tsr_task_t n = F(pairs)->next;
        F(pairs)->next = NULL;
        res = meld(res, pairs);
        pairs = n;
    }
    return res;
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
    F(t)->next = F(t)->prev = NULL;
    pthread_mutex_lock(&q->m);
    F(t)->key = q->seq++;
    q->root = meld(q->root, t);
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
    /* The most urgent task only; a worker of another device kind leaves it
     * to the workers that can run it. */
    if (t && tsr_task_runs_on(t, s, worker)) {
        q->root = merge_children(F(t)->prev);
        F(t)->prev = NULL;
        atomic_fetch_sub(&q->count, 1);
    } else {
        t = NULL;
    }
    pthread_mutex_unlock(&q->m);
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
