/* sched/eager.c — one central FIFO queue that every worker pops from.
 *
 * The simplest policy and the baseline for the others. It must stay cheap
 * when idle: pop reads an atomic count before touching the lock.
 */
#include "sched/policies.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

typedef struct eager {
    pthread_mutex_t m;
    tsr_task_t head, tail;
    atomic_long count;
} eager_t;

static int eager_init(tsr_sched_t *s)
{
    eager_t *q = calloc(1, sizeof *q);
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

static void eager_deinit(tsr_sched_t *s)
{
    eager_t *q = tsr_sched_data(s);
    pthread_mutex_destroy(&q->m);
    free(q);
}

static int eager_push(tsr_sched_t *s, tsr_task_t t)
{
    eager_t *q = tsr_sched_data(s);
    tsr_task_sched_fields(t)->next = NULL;
    pthread_mutex_lock(&q->m);
    if (q->tail)
        tsr_task_sched_fields(q->tail)->next = t;
    else
        q->head = t;
    q->tail = t;
    atomic_fetch_add(&q->count, 1);
    pthread_mutex_unlock(&q->m);
    return -1;
}

static tsr_task_t eager_pop(tsr_sched_t *s, int worker)
{
    eager_t *q = tsr_sched_data(s);
    if (atomic_load_explicit(&q->count, memory_order_relaxed) == 0)
        return NULL;
    pthread_mutex_lock(&q->m);
    /* First task this worker can run (all of them, on a CPU-only node). */
    tsr_task_t prev = NULL, t = q->head;
    while (t && !tsr_task_runs_on(t, s, worker)) {
        prev = t;
        t = tsr_task_sched_fields(t)->next;
    }
    if (t) {
        tsr_task_t next = tsr_task_sched_fields(t)->next;
        if (prev)
            tsr_task_sched_fields(prev)->next = next;
        else
            q->head = next;
        if (q->tail == t)
            q->tail = prev;
        atomic_fetch_sub(&q->count, 1);
    }
    pthread_mutex_unlock(&q->m);
    return t;
}

const tsr_sched_policy_t tsr__policy_eager = {
    .name = "eager",
    .description = "one central FIFO queue",
    .init = eager_init,
    .deinit = eager_deinit,
    .push = eager_push,
    .pop = eager_pop,
};
