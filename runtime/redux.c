/* runtime/redux.c — order-free reduction (TSR_REDUX), all of it: the
 * handle's reduction codelets, the checks at submission, the group of
 * REDUX tasks between two other accesses, each worker's private
 * accumulator (chosen when the worker takes a task, set to the neutral
 * element before its first use), and the tree of tasks that combines the
 * accumulators into the handle when the group closes. The other files call
 * in at one point each: handle.c opens, joins and closes a group as part of
 * the dependency rules, task.c starts and finishes the REDUCE task, and a
 * worker takes and initializes accumulators.
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

/* ---- the handle's codelets, and the checks at submission ----------------- */

static int set_reduction(tsr_data_t *h, const tsr_codelet_t *init,
                         const tsr_codelet_t *reduce);

int tsr_handle_set_reduction(tsr_handle_t id, const tsr_codelet_t *init,
                             const tsr_codelet_t *reduce)
{
    tsr_data_t *h;
    int rc = tsr__handle_pin(id, "handle_set_reduction", &h);
    if (rc)
        return rc;
    rc = set_reduction(h, init, reduce);
    tsr__handle_unpin(h);
    return rc;
}

static int set_reduction(tsr_data_t *h, const tsr_codelet_t *init,
                         const tsr_codelet_t *reduce)
{
    if (!init || !reduce)
        return tsr__fail(TSR_EINVAL, "handle_set_reduction: a codelet is NULL");
    if (init->nbuffers != 1 || reduce->nbuffers != 2)
        return tsr__fail(TSR_EINVAL,
                         "handle_set_reduction: init takes 1 buffer (it has %d), "
                         "reduce takes 2 (it has %d)",
                         init->nbuffers, reduce->nbuffers);
    pthread_mutex_lock(&h->lock);
    bool open = h->redux != NULL;
    if (!open) {
        h->redux_init = init;
        h->redux_reduce = reduce;
    }
    pthread_mutex_unlock(&h->lock);
    if (open)
        return tsr__fail(TSR_EBUSY, "handle_set_reduction: REDUX tasks on the "
                         "handle are pending; access it another way first");
    return TSR_OK;
}

int tsr__redux_check(tsr_data_t *const *hs, int nbuffers, const tsr_codelet_t *cl,
                     const char *name, int i)
{
    tsr_data_t *h = hs[i];
    pthread_mutex_lock(&h->lock);
    const tsr_codelet_t *init = h->redux_init, *red = h->redux_reduce;
    pthread_mutex_unlock(&h->lock);
    if (!init || !red)
        return tsr__fail(TSR_EINVAL, "submit '%s': buffer %d is REDUX but the handle "
                         "has no reduction codelets (tsr_handle_set_reduction)", name, i);
    for (int k = 0; k < TSR_DEVICE_KINDS; k++)
        if (cl->impl[k] && tsr__rt.nworkers_of_kind[k] > 0 && !init->impl[k])
            return tsr__fail(TSR_EINVAL, "submit '%s': REDUX init codelet '%s' has no "
                             "implementation for device kind %d, where the task may run",
                             name, init->name ? init->name : "", k);
    for (int j = 0; j < nbuffers; j++)
        if (j != i && hs[j] == h)
            return tsr__fail(TSR_EINVAL, "submit '%s': buffer %d is REDUX and buffer %d "
                             "accesses the same handle", name, i, j);
    return TSR_OK;
}

/* ---- groups ---------------------------------------------------------------- */

int tsr__redux_open(tsr_data_t *h)
{
    int n = tsr__rt.nworkers;
    tsr_redux_group_t *g = calloc(1, sizeof *g + (size_t)n * sizeof g->acc[0]);
    if (!g)
        return TSR_ENOMEM;
    g->h = h;
    g->n = n;
    pthread_mutex_init(&g->lock, NULL);
    h->redux = g;
    return TSR_OK;
}

void tsr__redux_join(tsr_data_t *h, tsr_task_t t, int slot)
{
    t->group_of[slot] = h->redux; /* NULL if the group could not be made */
}

tsr_task_t tsr__redux_close(tsr_data_t *h)
{
    tsr_task_t r = tsr__task_new_internal(TSR_KIND_REDUCE, "redux");
    if (!r)
        return NULL;
    r->group = h->redux;
    h->redux = NULL;
    return r;
}

static void group_free(tsr_redux_group_t *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n; i++)
        if (g->acc[i])
            tsr__handle_free(g->acc[i]);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

/* ---- accumulators ------------------------------------------------------------ */

int tsr__redux_take(tsr_task_t t, int i, int w)
{
    tsr_redux_group_t *g = t->group_of[i];
    tsr_data_t *a = NULL;
    if (g) {
        pthread_mutex_lock(&g->lock);
        if (!g->acc[w])
            g->acc[w] = tsr__handle_new_internal(NULL, g->h->size);
        a = g->acc[w];
        pthread_mutex_unlock(&g->lock);
    }
    if (!a) {
        snprintf(t->mreq.err, sizeof t->mreq.err, "no memory for a REDUX %s",
                 g ? "accumulator" : "group");
        return TSR_ENOMEM;
    }
    t->data[i] = a; /* the task works on it; policies still see h's id */
    t->acc_of[i] = true;
    return TSR_OK;
}

int tsr__redux_init_accumulators(tsr_task_t t, void **bufs, const tsr_exec_t *exec)
{
    for (int i = 0; i < t->nbuffers; i++) {
        tsr_data_t *a = t->acc_of[i] ? t->data[i] : NULL;
        if (!a || a->acc_initialized)
            continue;
        /* Only this worker uses a: no lock for acc_initialized. */
        const tsr_codelet_t *init = t->group_of[i]->h->redux_init;
        tsr_exec_t ie = *exec;
        ie.nbuffers = 1;
        ie.sizes = &t->sizes[i];
        int rc = init->impl[exec->device_kind](&bufs[i], NULL, &ie);
        if (rc != 0)
            return rc;
        a->acc_initialized = true;
    }
    return 0;
}

/* ---- the combining tree ------------------------------------------------------ */

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
        /* Tasks already submitted finish on their own and may still read
         * the accumulators: on this out-of-memory path the group is left
         * allocated rather than freed under them. The handle's value is
         * lost, so its readers are cancelled. */
        if (n > 1)
            reduce->group = NULL;
        snprintf(reduce->mreq.err, sizeof reduce->mreq.err,
                 "no memory to submit the combining tasks");
        tsr__task_complete(reduce, TSR_RESULT_FAILED, -1);
        return;
    }
    /* `last` completes `reduce` (see tsr__task_complete). */
    tsr__task_chain(last, reduce);
}

void tsr__redux_finish(tsr_task_t reduce)
{
    /* Every combination has completed (or none was submitted). */
    group_free(reduce->group);
    reduce->group = NULL;
}
