/* memory/copy_fifo.c — the engine queue (contract: memory/copy_fifo.h). */
#include "memory/copy_fifo.h"

void tsr__copy_fifo_init(tsr_copy_fifo_t *q)
{
    pthread_mutex_init(&q->m, NULL);
    pthread_cond_init(&q->cv, NULL);
    q->head = q->tail = NULL;
    q->stop = false;
}

void tsr__copy_fifo_destroy(tsr_copy_fifo_t *q)
{
    pthread_mutex_destroy(&q->m);
    pthread_cond_destroy(&q->cv);
}

void tsr__copy_fifo_push(tsr_copy_fifo_t *q, tsr_copy_t *c)
{
    c->next = NULL;
    pthread_mutex_lock(&q->m);
    if (q->tail)
        q->tail->next = c;
    else
        q->head = c;
    q->tail = c;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->m);
}

tsr_copy_t *tsr__copy_fifo_pop(tsr_copy_fifo_t *q)
{
    pthread_mutex_lock(&q->m);
    while (!q->head && !q->stop)
        pthread_cond_wait(&q->cv, &q->m);
    tsr_copy_t *c = q->head;
    if (c) {
        q->head = c->next;
        if (!q->head)
            q->tail = NULL;
    }
    pthread_mutex_unlock(&q->m);
    return c;
}

void tsr__copy_fifo_stop(tsr_copy_fifo_t *q)
{
    pthread_mutex_lock(&q->m);
    q->stop = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->m);
}
