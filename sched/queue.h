/* sched/queue.h — an intrusive double-ended task queue threaded through the
 * tasks' policy fields (next/prev), for every policy that queues tasks in
 * order (eager's central FIFO, ws's and random's queues per worker).
 *
 * Never allocates and never locks: the policy holds its own lock around
 * every call. A task is in at most one queue at a time.
 */
#ifndef TSR_SCHED_QUEUE_H
#define TSR_SCHED_QUEUE_H

#include <tessera/sched.h>

typedef struct tsr_tq {
    tsr_task_t head, tail;
    long n;
} tsr_tq_t;

#define TQ_F(t) tsr_task_sched_fields(t)

static inline void tsr_tq_push_back(tsr_tq_t *q, tsr_task_t t)
{
    TQ_F(t)->next = NULL;
    TQ_F(t)->prev = q->tail;
    if (q->tail)
        TQ_F(q->tail)->next = t;
    else
        q->head = t;
    q->tail = t;
    q->n++;
}

static inline void tsr_tq_push_front(tsr_tq_t *q, tsr_task_t t)
{
    TQ_F(t)->prev = NULL;
    TQ_F(t)->next = q->head;
    if (q->head)
        TQ_F(q->head)->prev = t;
    else
        q->tail = t;
    q->head = t;
    q->n++;
}

static inline void tsr_tq_remove(tsr_tq_t *q, tsr_task_t t)
{
    tsr_task_t p = TQ_F(t)->prev, n = TQ_F(t)->next;
    if (p)
        TQ_F(p)->next = n;
    else
        q->head = n;
    if (n)
        TQ_F(n)->prev = p;
    else
        q->tail = p;
    TQ_F(t)->next = TQ_F(t)->prev = NULL;
    q->n--;
}

/* The first task from the front (back: from the back) that `worker` can
 * run, removed; NULL if none. */
static inline tsr_task_t tsr_tq_take(tsr_tq_t *q, tsr_sched_t *s, int worker,
                                     int from_back)
{
    tsr_task_t t = from_back ? q->tail : q->head;
    while (t && !tsr_task_runs_on(t, s, worker))
        t = from_back ? TQ_F(t)->prev : TQ_F(t)->next;
    if (t)
        tsr_tq_remove(q, t);
    return t;
}

#undef TQ_F
#endif
