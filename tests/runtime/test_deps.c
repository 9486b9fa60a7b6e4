/* Explicit task dependencies (tsr_task_desc_t.deps) and tsr_task_release:
 * random graphs whose edges are drawn here run in an order that honours
 * every edge (checked against the drawn edges, from a global sequence of
 * start and end stamps); a failed predecessor cancels its successors; a
 * dependency that is not a live reference is refused with nothing
 * submitted; a reference raced between a waiting thread and a submitting
 * one is either used or refused, never corrupts. */
#include "util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static atomic_long clock_seq;
static atomic_int ran;

typedef struct stamp {
    long start, end;
} stamp_t;

/* stamps its start and end on a global sequence (buffer 0: a stamp_t) */
static int stamp(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args, (void)e;
    stamp_t *s = b[0];
    s->start = atomic_fetch_add(&clock_seq, 1);
    for (volatile int i = 0; i < 2000; i++)
        ;
    s->end = atomic_fetch_add(&clock_seq, 1);
    atomic_fetch_add(&ran, 1);
    return 0;
}

static int fail(void **b, const void *args, const tsr_exec_t *e)
{
    (void)b, (void)args, (void)e;
    return 7;
}

static const tsr_codelet_t stamp_cl = {.name = "stamp", .impl = {stamp}, .nbuffers = 1};
static const tsr_codelet_t fail_cl = {.name = "fail", .impl = {fail}, .nbuffers = 1};

static int submit_after(const tsr_codelet_t *cl, tsr_handle_t h, const tsr_task_t *deps,
                        int ndeps, tsr_task_t *out)
{
    tsr_access_t a = {h, TSR_W};
    tsr_task_desc_t d = {.codelet = cl, .nbuffers = 1, .buffers = &a, .deps = deps,
                         .ndeps = ndeps};
    return tsr_submit(&d, out);
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static unsigned draw(unsigned n)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (unsigned)(rng % n);
}

#define N 300
#define MAXD 6

/* N tasks on N separate handles (the accesses imply nothing): task i
 * follows up to MAXD earlier tasks drawn at random; references are
 * released once no later task will name them. */
static void random_graph(int ncpu, const char *sched)
{
    start_runtime(ncpu, sched, 0);
    static stamp_t st[N];
    static int pred[N][MAXD], npred[N], last_use[N];
    tsr_handle_t h[N];
    tsr_task_t ref[N];
    memset(st, 0, sizeof st);
    for (int i = 0; i < N; i++) {
        npred[i] = i ? (int)draw(MAXD + 1) : 0;
        for (int k = 0; k < npred[i]; k++)
            pred[i][k] = (int)draw((unsigned)i);
        last_use[i] = i;
        for (int k = 0; k < npred[i]; k++)
            last_use[pred[i][k]] = i;
    }
    for (int i = 0; i < N; i++) {
        cr_assert_eq(tsr_handle_register(&h[i], &st[i], sizeof st[i]), TSR_OK);
        tsr_task_t deps[MAXD];
        for (int k = 0; k < npred[i]; k++)
            deps[k] = ref[pred[i][k]];
        cr_assert_eq(submit_after(&stamp_cl, h[i], deps, npred[i], &ref[i]), TSR_OK, "%s",
                     tsr_error_message());
        /* a reference no later task names is dropped now */
        for (int k = 0; k < npred[i]; k++) {
            int p = pred[i][k];
            if (last_use[p] == i && ref[p]) {
                cr_assert_eq(tsr_task_release(ref[p]), TSR_OK, "%s", tsr_error_message());
                ref[p] = NULL;
            }
        }
        if (last_use[i] == i) {
            cr_assert_eq(tsr_task_release(ref[i]), TSR_OK);
            ref[i] = NULL;
        }
    }
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    for (int i = 0; i < N; i++) {
        cr_assert_null(ref[i], "task %d's reference was kept", i);
        cr_assert_eq(tsr_handle_unregister(h[i]), TSR_OK);
    }
    stop_runtime();
    for (int i = 0; i < N; i++)
        for (int k = 0; k < npred[i]; k++)
            cr_assert_gt(st[i].start, st[pred[i][k]].end,
                         "task %d started (%ld) before its predecessor %d ended (%ld)", i,
                         st[i].start, pred[i][k], st[pred[i][k]].end);
}

Test(deps, random_graphs_honour_every_edge_eager) { random_graph(2, "eager"); }
Test(deps, random_graphs_honour_every_edge_ws) { random_graph(2, "ws"); }
Test(deps, random_graphs_honour_every_edge_dmda) { random_graph(2, "dmda"); }

Test(deps, a_failed_predecessor_cancels_its_successors)
{
    start_runtime(2, NULL, 0);
    stamp_t s[3] = {{0, 0}, {0, 0}, {0, 0}};
    tsr_handle_t h[3];
    for (int i = 0; i < 3; i++)
        cr_assert_eq(tsr_handle_register(&h[i], &s[i], sizeof s[i]), TSR_OK);
    atomic_store(&ran, 0);
    tsr_task_t p, q;
    cr_assert_eq(submit_after(&fail_cl, h[0], NULL, 0, &p), TSR_OK);
    cr_assert_eq(submit_after(&stamp_cl, h[1], &p, 1, &q), TSR_OK);
    cr_assert_eq(submit_after(&stamp_cl, h[2], &q, 1, NULL), TSR_OK); /* transitively */
    cr_assert_eq(tsr_task_release(p), TSR_OK);
    cr_assert_eq(tsr_task_wait(q), TSR_ETASK);
    cr_assert(strstr(tsr_error_message(), "cancelled"), "%s", tsr_error_message());
    cr_assert_eq(tsr_wait_all(), TSR_ETASK);
    cr_assert_eq(atomic_load(&ran), 0, "a cancelled task ran");
    for (int i = 0; i < 3; i++)
        cr_assert_eq(tsr_handle_unregister(h[i]), TSR_OK);
    stop_runtime();
}

Test(deps, a_finished_predecessor_is_no_wait)
{
    start_runtime(1, NULL, 0);
    stamp_t s[2] = {{0, 0}, {0, 0}};
    tsr_handle_t h[2];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(tsr_handle_register(&h[i], &s[i], sizeof s[i]), TSR_OK);
    tsr_task_t p;
    cr_assert_eq(submit_after(&stamp_cl, h[0], NULL, 0, &p), TSR_OK);
    cr_assert_eq(tsr_wait_all(), TSR_OK); /* p is done, its reference still live */
    cr_assert_eq(submit_after(&stamp_cl, h[1], &p, 1, NULL), TSR_OK, "%s",
                 tsr_error_message());
    cr_assert_eq(tsr_task_wait(p), TSR_OK); /* the reference is still the caller's */
    cr_assert_eq(tsr_wait_all(), TSR_OK);
    cr_assert_gt(s[1].start, s[0].end);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(tsr_handle_unregister(h[i]), TSR_OK);
    stop_runtime();
}

Test(deps, what_is_not_a_live_reference_is_refused_and_nothing_runs)
{
    start_runtime(2, NULL, 0);
    stamp_t s[2] = {{0, 0}, {0, 0}};
    tsr_handle_t h[2];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(tsr_handle_register(&h[i], &s[i], sizeof s[i]), TSR_OK);
    tsr_task_t p, live;
    cr_assert_eq(submit_after(&stamp_cl, h[0], NULL, 0, &p), TSR_OK);
    cr_assert_eq(submit_after(&stamp_cl, h[0], NULL, 0, &live), TSR_OK);
    cr_assert_eq(tsr_task_wait(p), TSR_OK); /* consumed */
    cr_assert_eq(tsr_wait_all(), TSR_OK);
    atomic_store(&ran, 0);

    tsr_task_t stale_then_live[2] = {p, live};
    cr_assert_eq(submit_after(&stamp_cl, h[1], stale_then_live, 2, NULL), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "dependency 0"), "%s", tsr_error_message());
    tsr_task_t live_then_null[2] = {live, NULL};
    cr_assert_eq(submit_after(&stamp_cl, h[1], live_then_null, 2, NULL), TSR_EINVAL);
    tsr_task_t garbage = (tsr_task_t)(uintptr_t)0x1234560;
    cr_assert_eq(submit_after(&stamp_cl, h[1], &garbage, 1, NULL), TSR_EINVAL);
    cr_assert_eq(submit_after(&stamp_cl, h[1], NULL, 1, NULL), TSR_EINVAL);
    cr_assert_eq(submit_after(&stamp_cl, h[1], &live, -1, NULL), TSR_EINVAL);
    cr_assert_eq(submit_after(&stamp_cl, h[1], &live, TSR_MAX_DEPS + 1, NULL), TSR_EINVAL);
    cr_assert_eq(tsr_wait_all(), TSR_OK);
    cr_assert_eq(atomic_load(&ran), 0, "a refused task ran");

    /* the live one was borrowed, never consumed, by the refused submissions */
    cr_assert_eq(tsr_task_release(live), TSR_OK);
    cr_assert_eq(tsr_task_release(live), TSR_EINVAL);
    cr_assert_eq(tsr_task_wait(live), TSR_EINVAL);
    cr_assert_eq(tsr_task_release(NULL), TSR_EINVAL);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(tsr_handle_unregister(h[i]), TSR_OK);
    stop_runtime();
    cr_assert_eq(tsr_task_release(live), TSR_ESTATE);
}

/* ---- a reference raced between a waiter and submitters -------------------------- */

static tsr_task_t shared_ref;
static tsr_handle_t race_h[4];
static atomic_int race_ok, race_refused, race_other;

static void *submitter(void *arg)
{
    int k = (int)(intptr_t)arg;
    for (int i = 0; i < 200; i++) {
        tsr_task_t r = shared_ref;
        int rc = submit_after(&stamp_cl, race_h[k], &r, 1, NULL);
        if (rc == TSR_OK)
            atomic_fetch_add(&race_ok, 1);
        else if (rc == TSR_EINVAL)
            atomic_fetch_add(&race_refused, 1);
        else
            atomic_fetch_add(&race_other, 1);
    }
    return NULL;
}

Test(deps, a_reference_waited_for_while_others_depend_on_it)
{
    start_runtime(2, NULL, 0);
    static stamp_t s[5];
    tsr_handle_t h0;
    cr_assert_eq(tsr_handle_register(&h0, &s[4], sizeof s[4]), TSR_OK);
    for (int k = 0; k < 4; k++)
        cr_assert_eq(tsr_handle_register(&race_h[k], &s[k], sizeof s[k]), TSR_OK);
    for (int round = 0; round < 20; round++) {
        cr_assert_eq(submit_after(&stamp_cl, h0, NULL, 0, &shared_ref), TSR_OK);
        atomic_store(&race_ok, 0);
        atomic_store(&race_refused, 0);
        pthread_t th[3];
        for (int k = 0; k < 3; k++)
            pthread_create(&th[k], NULL, submitter, (void *)(intptr_t)k);
        cr_assert_eq(tsr_task_wait(shared_ref), TSR_OK); /* races the submitters */
        for (int k = 0; k < 3; k++)
            pthread_join(th[k], NULL);
        cr_assert_eq(atomic_load(&race_other), 0, "a submission failed otherwise");
        cr_assert_eq(atomic_load(&race_ok) + atomic_load(&race_refused), 600);
        cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    }
    cr_assert_eq(tsr_handle_unregister(h0), TSR_OK);
    for (int k = 0; k < 4; k++)
        cr_assert_eq(tsr_handle_unregister(race_h[k]), TSR_OK);
    stop_runtime();
}
