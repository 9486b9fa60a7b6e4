/* sched/random.c — each ready task goes to a worker drawn uniformly among
 * those that can run it; each worker runs its own queue in FIFO order.
 *
 * The baseline that knows nothing: no load, no data, no models. It must
 * stay that way (other policies are measured against it).
 */
#include "sched/policies.h"
#include "sched/queue.h"
#include "runtime/splitmix.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct rq {
    pthread_mutex_t m;
    tsr_tq_t q;
    atomic_long n;
    char pad[64];
} rq_t;

typedef struct rnd {
    int nw;
    atomic_uint_fast64_t seed;
    rq_t w[];
} rnd_t;

/* splitmix64 on a shared counter: a different draw for every call, with no
 * per-thread state. */
static uint64_t draw(rnd_t *r)
{
    return tsr__splitmix_mix(atomic_fetch_add(&r->seed, TSR_SPLITMIX_GAMMA) +
                             TSR_SPLITMIX_GAMMA);
}

static int random_init(tsr_sched_t *s)
{
    int nw = tsr_sched_worker_count(s);
    rnd_t *r = calloc(1, sizeof *r + (size_t)nw * sizeof r->w[0]);
    if (!r)
        return TSR_ENOMEM;
    r->nw = nw;
    atomic_init(&r->seed, 42);
    for (int i = 0; i < nw; i++)
        pthread_mutex_init(&r->w[i].m, NULL);
    tsr_sched_set_data(s, r);
    return TSR_OK;
}

static void random_deinit(tsr_sched_t *s)
{
    rnd_t *r = tsr_sched_data(s);
    for (int i = 0; i < r->nw; i++)
        pthread_mutex_destroy(&r->w[i].m);
    free(r);
}

static int random_push(tsr_sched_t *s, tsr_task_t t)
{
    rnd_t *r = tsr_sched_data(s);
    int able = 0;
    for (int i = 0; i < r->nw; i++)
        able += tsr_task_runs_on(t, s, i) != 0;
    /* The runtime only pushes tasks some worker can run. */
    int k = able ? (int)(draw(r) % (uint64_t)able) : 0, w = 0;
    for (int i = 0; i < r->nw; i++)
        if (tsr_task_runs_on(t, s, i) && k-- == 0) {
            w = i;
            break;
        }
    tsr_sched_prefetch(s, t, w);
    rq_t *q = &r->w[w];
    pthread_mutex_lock(&q->m);
    tsr_tq_push_back(&q->q, t);
    atomic_fetch_add(&q->n, 1);
    pthread_mutex_unlock(&q->m);
    return w;
}

static tsr_task_t random_pop(tsr_sched_t *s, int worker)
{
    rnd_t *r = tsr_sched_data(s);
    rq_t *q = &r->w[worker];
    if (atomic_load_explicit(&q->n, memory_order_relaxed) == 0)
        return NULL;
    pthread_mutex_lock(&q->m);
    tsr_task_t t = tsr_tq_take(&q->q, s, worker, 0);
    if (t)
        atomic_fetch_sub(&q->n, 1);
    pthread_mutex_unlock(&q->m);
    return t;
}

const tsr_sched_policy_t tsr__policy_random = {
    .name = "random",
    .description = "each task to a uniformly drawn worker that can run it",
    .init = random_init,
    .deinit = random_deinit,
    .push = random_push,
    .pop = random_pop,
};
