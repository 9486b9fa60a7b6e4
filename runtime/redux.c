/* runtime/redux.c — order-free reduction (TSR_REDUX): per-worker private
 * accumulators, and the tree of reduction tasks that combines them into
 * the handle when it is next accessed in another mode.
 *
 * Why not COMMUTE: COMMUTE serializes the accumulating tasks on the one
 * buffer (and, across memory nodes, moves it back and forth); REDUX lets
 * every worker accumulate into its own copy on its own memory node, and
 * pays one combination per worker at the end.
 *
 * Must never: combine before every task of the group has completed, or
 * free an accumulator that a combination still reads.
 */
#include "runtime/internal.h"

#include <stdio.h>
#include <stdlib.h>

tsr_redux_group_t *tsr__redux_group_new(tsr_data_t *h)
{
    int n = tsr__rt.nworkers;
    tsr_redux_group_t *g = calloc(1, sizeof *g + (size_t)n * sizeof g->acc[0]);
    if (!g)
        return NULL;
    g->h = h;
    g->n = n;
    pthread_mutex_init(&g->lock, NULL);
    return g;
}

tsr_data_t *tsr__redux_acc(tsr_redux_group_t *g, int w)
{
    pthread_mutex_lock(&g->lock);
    if (!g->acc[w])
        g->acc[w] = tsr__handle_new_internal(NULL, g->h->size);
    tsr_data_t *a = g->acc[w];
    pthread_mutex_unlock(&g->lock);
    return a;
}

void tsr__redux_group_free(tsr_redux_group_t *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n; i++)
        if (g->acc[i])
            tsr__handle_free(g->acc[i]);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

/* Combine the accumulators pairwise (log2 levels: each level's tasks are
 * independent), then add the survivor into the handle. The REDUCE task
 * completes when that last task does. */
void tsr__redux_start(tsr_task_t reduce)
{
    tsr_redux_group_t *g = reduce->group;
    tsr_data_t *h = g->h;
    tsr_data_t *live[g->n > 0 ? g->n : 1];
    int n = 0;
    for (int i = 0; i < g->n; i++)
        if (g->acc[i])
            live[n++] = g->acc[i];
    if (n == 0) {
        tsr__task_complete(reduce, TSR_RESULT_OK, -1);
        return;
    }
    int rc = TSR_OK;
    for (int step = 1; step < n && rc == TSR_OK; step *= 2)
        for (int i = 0; i + step < n && rc == TSR_OK; i += 2 * step)
            rc = tsr__submit_pair(h->redux_reduce, "redux-combine", live[i], true,
                                  live[i + step], NULL);
    tsr_task_t last = NULL;
    if (rc == TSR_OK)
        rc = tsr__submit_pair(h->redux_reduce, "redux-final", h, false, live[0], &last);
    if (rc != TSR_OK) {
        /* Tasks already submitted finish on their own; the handle's value
         * is lost, so its readers are cancelled. */
        snprintf(reduce->mreq.err, sizeof reduce->mreq.err,
                 "no memory to submit the combining tasks");
        tsr__task_complete(reduce, TSR_RESULT_FAILED, -1);
        return;
    }
    /* `last` completes `reduce` (see tsr__task_complete). */
    tsr__task_chain(last, reduce);
}
