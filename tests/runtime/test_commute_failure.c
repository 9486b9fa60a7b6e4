/* COMMUTE accesses (never overlapping, all run, ordered against the other
 * modes) and failure handling (reported with the task's name; tasks that
 * read its output never run; the rest go on). */
#include "util.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NH 4
static atomic_int inside[NH];
static atomic_int overlaps;
static atomic_int commute_runs;
static int64_t vals[NH];

typedef struct {
    int64_t add;
    int nh;
    int idx[NH];
} commute_args_t;

/* Adds `add` to every buffer; checks nobody else is inside its handles. */
static int accumulate(void **b, const void *args, const tsr_exec_t *e)
{
    (void)e;
    const commute_args_t *a = args;
    for (int i = 0; i < a->nh; i++)
        if (atomic_fetch_add(&inside[a->idx[i]], 1) != 0)
            atomic_fetch_add(&overlaps, 1);
    usleep(50);
    for (int i = 0; i < a->nh; i++)
        *(int64_t *)b[i] += a->add;
    for (int i = 0; i < a->nh; i++)
        atomic_fetch_sub(&inside[a->idx[i]], 1);
    atomic_fetch_add(&commute_runs, 1);
    return 0;
}
static const tsr_codelet_t cl_acc1 = {.name = "acc1", .impl = {accumulate}, .nbuffers = 1};
static const tsr_codelet_t cl_acc2 = {.name = "acc2", .impl = {accumulate}, .nbuffers = 2};

static int times_ten(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    (void)e;
    *(int64_t *)b[0] *= 10;
    return 0;
}
static const tsr_codelet_t cl_x10 = {.name = "x10", .impl = {times_ten}, .nbuffers = 1};

static void submit_x10(tsr_handle_t h)
{
    tsr_access_t a = {h, TSR_RW};
    tsr_task_desc_t d = {.codelet = &cl_x10, .nbuffers = 1, .buffers = &a};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK);
}

Test(commute, never_overlap_all_run_ordered_between_writers)
{
    start_runtime(3, NULL, 0);
    tsr_handle_t h[NH];
    int64_t ref[NH];
    for (int i = 0; i < NH; i++) {
        vals[i] = ref[i] = i + 1;
        cr_assert_eq(tsr_handle_register(&h[i], &vals[i], sizeof vals[i]), TSR_OK);
    }
    srand(7);
    int ntasks = 0;
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < NH; i++) { /* a writer opens the round */
            submit_x10(h[i]);
            ref[i] *= 10;
        }
        for (int k = 0; k < 60; k++) {
            commute_args_t a = {.add = rand() % 1000};
            int i = rand() % NH, j = rand() % NH;
            a.idx[0] = i;
            a.nh = 1;
            if (j != i && rand() % 2) {
                a.idx[1] = j;
                a.nh = 2;
            }
            tsr_access_t acc[2] = {{h[i], TSR_COMMUTE}, {h[j], TSR_COMMUTE}};
            tsr_task_desc_t d = {.codelet = a.nh == 1 ? &cl_acc1 : &cl_acc2,
                                 .nbuffers = a.nh, .buffers = acc,
                                 .args = &a, .args_size = sizeof a};
            cr_assert_eq(tsr_submit(&d, NULL), TSR_OK);
            for (int q = 0; q < a.nh; q++)
                ref[a.idx[q]] += a.add;
            ntasks++;
        }
    }
    for (int i = 0; i < NH; i++) { /* a writer after the last group */
        submit_x10(h[i]);
        ref[i] *= 10;
    }
    cr_assert_eq(tsr_wait_all(), TSR_OK);
    cr_assert_eq(atomic_load(&overlaps), 0, "COMMUTE tasks on one handle overlapped");
    cr_assert_eq(atomic_load(&commute_runs), ntasks);
    for (int i = 0; i < NH; i++)
        cr_assert_eq(vals[i], ref[i], "handle %d: %ld != %ld", i, (long)vals[i],
                     (long)ref[i]);
    stop_runtime();
}

/* ---- failures ---------------------------------------------------------- */

static atomic_int ran_after;

static int boom(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    (void)e;
    *(int64_t *)b[0] = -1; /* garbage */
    return 7;
}
static int copy_plus_one(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    (void)e;
    *(int64_t *)b[1] = *(int64_t *)b[0] + 1;
    atomic_fetch_add(&ran_after, 1);
    return 0;
}
static int set_42(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    (void)e;
    *(int64_t *)b[0] = 42;
    return 0;
}
static const tsr_codelet_t cl_boom = {.name = "boom", .impl = {boom}, .nbuffers = 1};
static const tsr_codelet_t cl_copy = {.name = "copy", .impl = {copy_plus_one}, .nbuffers = 2};
static const tsr_codelet_t cl_set = {.name = "set42", .impl = {set_42}, .nbuffers = 1};

Test(failure, reported_by_name_dependents_cancelled_others_run)
{
    start_runtime(2, NULL, 0);
    int64_t a = 1, b = 0, c = 0, d = 0, e = 0;
    tsr_handle_t ha, hb, hc, hd, he;
    cr_assert_eq(tsr_handle_register(&ha, &a, sizeof a), TSR_OK);
    cr_assert_eq(tsr_handle_register(&hb, &b, sizeof b), TSR_OK);
    cr_assert_eq(tsr_handle_register(&hc, &c, sizeof c), TSR_OK);
    cr_assert_eq(tsr_handle_register(&hd, &d, sizeof d), TSR_OK);
    cr_assert_eq(tsr_handle_register(&he, &e, sizeof e), TSR_OK);

    tsr_access_t wa = {ha, TSR_RW};
    tsr_task_desc_t fail = {.codelet = &cl_boom, .nbuffers = 1, .buffers = &wa,
                            .name = "boom_7"};
    tsr_task_t tf, tb;
    cr_assert_eq(tsr_submit(&fail, &tf), TSR_OK);
    tsr_access_t ab[2] = {{ha, TSR_R}, {hb, TSR_W}}; /* reads garbage: cancelled */
    tsr_task_desc_t db = {.codelet = &cl_copy, .nbuffers = 2, .buffers = ab};
    cr_assert_eq(tsr_submit(&db, &tb), TSR_OK);
    tsr_access_t ac[2] = {{hb, TSR_R}, {hc, TSR_W}}; /* transitively cancelled */
    tsr_task_desc_t dc = {.codelet = &cl_copy, .nbuffers = 2, .buffers = ac};
    cr_assert_eq(tsr_submit(&dc, NULL), TSR_OK);
    tsr_access_t ad[2] = {{he, TSR_R}, {hd, TSR_W}}; /* independent: runs */
    tsr_task_desc_t dd = {.codelet = &cl_copy, .nbuffers = 2, .buffers = ad};
    cr_assert_eq(tsr_submit(&dd, NULL), TSR_OK);

    cr_assert_eq(tsr_task_wait(tf), TSR_ETASK);
    cr_assert(strstr(tsr_error_message(), "boom_7") && strstr(tsr_error_message(), "7"),
              "%s", tsr_error_message());
    cr_assert_eq(tsr_task_wait(tb), TSR_ETASK);
    cr_assert(strstr(tsr_error_message(), "cancelled"), "%s", tsr_error_message());

    int rc = tsr_wait_all();
    cr_assert_eq(rc, TSR_ETASK);
    const char *msg = tsr_error_message();
    cr_assert(strstr(msg, "boom_7"), "message must name the task: %s", msg);
    cr_assert(strstr(msg, "2 cancelled"), "%s", msg);
    cr_assert_eq(atomic_load(&ran_after), 1, "only the independent task may run");
    cr_assert_eq(b, 0);
    cr_assert_eq(c, 0);
    cr_assert_eq(d, 1);
    /* Reported once: the next wait is clean. */
    cr_assert_eq(tsr_wait_all(), TSR_OK);

    /* Reading the failed handle is refused; overwriting it repairs it. */
    void *p;
    cr_assert_eq(tsr_handle_acquire(ha, TSR_R, &p), TSR_ETASK);
    cr_assert_eq(tsr_wait_all(), TSR_OK);
    tsr_task_desc_t ds = {.codelet = &cl_set, .nbuffers = 1,
                          .buffers = &(tsr_access_t){ha, TSR_W}};
    cr_assert_eq(tsr_submit(&ds, NULL), TSR_OK);
    cr_assert_eq(tsr_submit(&db, NULL), TSR_OK);
    cr_assert_eq(tsr_wait_all(), TSR_OK);
    cr_assert_eq(b, 43);
    stop_runtime();
}

Test(failure, shutdown_reports_unwaited_failure)
{
    start_runtime(1, NULL, 0);
    int64_t a = 0;
    tsr_handle_t ha;
    cr_assert_eq(tsr_handle_register(&ha, &a, sizeof a), TSR_OK);
    tsr_task_desc_t fail = {.codelet = &cl_boom, .nbuffers = 1,
                            .buffers = &(tsr_access_t){ha, TSR_RW}};
    cr_assert_eq(tsr_submit(&fail, NULL), TSR_OK);
    cr_assert_eq(tsr_shutdown(), TSR_ETASK);
    cr_assert(strstr(tsr_error_message(), "boom"), "%s", tsr_error_message());
}
