/* memory/copy_fifo.h — the queue between a node's copy() and its engine
 * threads: copies in the order they were queued, a blocking pop, and a stop
 * that lets the threads drain what is queued before they leave.
 *
 * Must never: drop a queued copy (a stopped queue still hands out what it
 * holds), or call a copy's done() (the engine does, after the copy).
 */
#ifndef TSR_MEMORY_COPY_FIFO_H
#define TSR_MEMORY_COPY_FIFO_H

#include <pthread.h>
#include <stdbool.h>

#include "memory/copy.h"

typedef struct tsr_copy_fifo {
    pthread_mutex_t m;
    pthread_cond_t cv;
    tsr_copy_t *head, *tail;
    bool stop;
} tsr_copy_fifo_t;

void tsr__copy_fifo_init(tsr_copy_fifo_t *q);
void tsr__copy_fifo_destroy(tsr_copy_fifo_t *q);
/* Append c and wake one thread. */
void tsr__copy_fifo_push(tsr_copy_fifo_t *q, tsr_copy_t *c);
/* The oldest copy, waiting for one; NULL once the queue is stopped and
 * empty. */
tsr_copy_t *tsr__copy_fifo_pop(tsr_copy_fifo_t *q);
/* Wake every thread: they drain the queue, then pop returns NULL. */
void tsr__copy_fifo_stop(tsr_copy_fifo_t *q);

#endif
