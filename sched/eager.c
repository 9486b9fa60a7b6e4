/* sched/eager.c — one central FIFO queue that every worker pops from.
 *
 * The simplest policy and the baseline for the others. It must stay cheap
 * when idle: pop reads an atomic count before touching the lock.
 */
#include "sched/policies.h"
#include "sched/queue.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

typedef struct eager {
    pthread_mutex_t m;
    tsr_tq_t q;              /* under m */
    atomic_long count;       /* q.n, readable without the lock */
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
    pthread_mutex_lock(&q->m);
    tsr_tq_push_back(&q->q, t);
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
    tsr_task_t t = tsr_tq_take(&q->q, s, worker, 0);
    if (t)
        atomic_fetch_sub(&q->count, 1);
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
    .flags = TSR_SCHED_RUN_SUCCESSOR,
};
