/* Sequential task flow: the order the runtime enforces for each access
 * mode, host acquisition, lazily allocated handles, scratch buffers, tags,
 * waiting on one task, priorities. */
#include "util.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* x = 3x + k: order-sensitive, so a reordered chain gives another value. */
static int affine(void **b, const void *args, const tsr_exec_t *e)
{
    (void)e;
    uint64_t *x = b[0];
    *x = 3 * *x + *(const uint64_t *)args;
    return 0;
}
static const tsr_codelet_t cl_affine = {.name = "affine", .impl = {affine}, .nbuffers = 1};

static atomic_int readers_inside, max_readers_inside;

/* A reader that lingers, so that concurrent readers overlap. */
static int slow_read(void **b, const void *args, const tsr_exec_t *e)
{
    (void)e;
    int in = atomic_fetch_add(&readers_inside, 1) + 1;
    int m = atomic_load(&max_readers_inside);
    while (in > m && !atomic_compare_exchange_weak(&max_readers_inside, &m, in))
        ;
    (void)args;
    /* Linger until some other reader has been inside at the same time (or
     * 2 s passed: then the runtime serialized readers and the test fails). */
    for (int i = 0; i < 2000 && atomic_load(&max_readers_inside) < 2; i++)
        usleep(1000);
    *(uint64_t *)b[1] = *(uint64_t *)b[0];
    atomic_fetch_sub(&readers_inside, 1);
    return 0;
}
static const tsr_codelet_t cl_read = {.name = "slow_read", .impl = {slow_read}, .nbuffers = 2};

Test(stf, rw_chain_is_sequential)
{
    start_runtime(2, NULL, 0);
    uint64_t x = 1, ref = 1;
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_register(&h, &x, sizeof x), TSR_OK);
    tsr_access_t a = {h, TSR_RW};
    for (uint64_t k = 0; k < 2000; k++) {
        tsr_task_desc_t d = {.codelet = &cl_affine, .nbuffers = 1, .buffers = &a,
                             .args = &k, .args_size = sizeof k};
        cr_assert_eq(tsr_submit(&d, NULL), TSR_OK);
        ref = 3 * ref + k;
    }
    cr_assert_eq(tsr_handle_unregister(h), TSR_OK);
    cr_assert_eq(x, ref);
    stop_runtime();
}

Test(stf, readers_overlap_and_see_the_last_write)
{
    start_runtime(2, NULL, 0);
    uint64_t x = 5, seen[8] = {0};
    tsr_handle_t h, hs[8];
    cr_assert_eq(tsr_handle_register(&h, &x, sizeof x), TSR_OK);
    uint64_t k = 7;
    tsr_access_t w = {h, TSR_RW};
    tsr_task_desc_t dw = {.codelet = &cl_affine, .nbuffers = 1, .buffers = &w,
                          .args = &k, .args_size = sizeof k};
    cr_assert_eq(tsr_submit(&dw, NULL), TSR_OK); /* x = 22 */
    for (int i = 0; i < 8; i++) {
        cr_assert_eq(tsr_handle_register(&hs[i], &seen[i], sizeof seen[i]), TSR_OK);
        tsr_access_t acc[2] = {{h, TSR_R}, {hs[i], TSR_W}};
        tsr_task_desc_t d = {.codelet = &cl_read, .nbuffers = 2, .buffers = acc};
        cr_assert_eq(tsr_submit(&d, NULL), TSR_OK);
    }
    cr_assert_eq(tsr_submit(&dw, NULL), TSR_OK); /* after all readers: 73 */
    cr_assert_eq(tsr_wait_all(), TSR_OK);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(seen[i], 22, "reader %d saw %ld", i, (long)seen[i]);
    cr_assert_eq(x, 73);
    cr_assert_eq(atomic_load(&max_readers_inside), 2,
                 "readers of one handle must run concurrently on 2 workers");
    stop_runtime();
}

Test(stf, acquire_orders_with_tasks)
{
    start_runtime(2, NULL, 0);
    uint64_t x = 0;
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_register(&h, &x, sizeof x), TSR_OK);
    tsr_access_t a = {h, TSR_RW};
    uint64_t one = 1;
    tsr_task_desc_t d = {.codelet = &cl_affine, .nbuffers = 1, .buffers = &a,
                         .args = &one, .args_size = sizeof one};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK); /* 1 */
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK); /* 4 */
    uint64_t *p;
    cr_assert_eq(tsr_handle_acquire(h, TSR_RW, (void **)&p), TSR_OK);
    cr_assert_eq(*p, 4, "acquire must wait for earlier tasks");
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK); /* must wait for release */
    usleep(20000);
    cr_assert_eq(*p, 4, "a later task ran while the handle was acquired");
    *p = 100;
    cr_assert_eq(tsr_handle_release(h), TSR_OK);
    cr_assert_eq(tsr_wait_all(), TSR_OK);
    cr_assert_eq(x, 301);
    cr_assert_eq(tsr_handle_unregister(h), TSR_OK);
    stop_runtime();
}

Test(stf, alloc_is_lazy_zeroed_and_invalidate_resets)
{
    start_runtime(2, NULL, 0);
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_alloc(&h, 4096), TSR_OK);
    cr_assert_eq(tsr_handle_size(h), 4096);
    uint64_t *p;
    cr_assert_eq(tsr_handle_acquire(h, TSR_R, (void **)&p), TSR_OK);
    for (int i = 0; i < 512; i++)
        cr_assert_eq(p[i], 0);
    cr_assert_eq(tsr_handle_release(h), TSR_OK);
    tsr_access_t a = {h, TSR_RW};
    uint64_t k = 9;
    tsr_task_desc_t d = {.codelet = &cl_affine, .nbuffers = 1, .buffers = &a,
                         .args = &k, .args_size = sizeof k};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK);
    cr_assert_eq(tsr_handle_acquire(h, TSR_R, (void **)&p), TSR_OK);
    cr_assert_eq(p[0], 9);
    cr_assert_eq(tsr_handle_release(h), TSR_OK);
    cr_assert_eq(tsr_handle_invalidate(h), TSR_OK);
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK); /* reads zeros again */
    cr_assert_eq(tsr_handle_acquire(h, TSR_R, (void **)&p), TSR_OK);
    cr_assert_eq(p[0], 9, "after invalidate the task must read 0 (got 3*x+9 = %ld)",
                 (long)p[0]);
    cr_assert_eq(tsr_handle_release(h), TSR_OK);
    cr_assert_eq(tsr_handle_unregister(h), TSR_OK);
    stop_runtime();
}

/* Scratch: a private buffer of the handle's size; fill it, sum it. */
static int use_scratch(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    uint64_t *s = b[1];
    size_t n = e->sizes[1] / sizeof *s;
    for (size_t i = 0; i < n; i++)
        s[i] = (uint64_t)i;
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += s[i];
    *(uint64_t *)b[0] += sum;
    return 0;
}
static const tsr_codelet_t cl_scratch = {.name = "scratch", .impl = {use_scratch}, .nbuffers = 2};

Test(stf, scratch_buffers_are_private_and_sized)
{
    start_runtime(2, NULL, 0);
    uint64_t out[64] = {0};
    tsr_handle_t hs, ho[64];
    cr_assert_eq(tsr_handle_alloc(&hs, 1000 * sizeof(uint64_t)), TSR_OK);
    for (int i = 0; i < 64; i++) {
        cr_assert_eq(tsr_handle_register(&ho[i], &out[i], sizeof out[i]), TSR_OK);
        tsr_access_t acc[2] = {{ho[i], TSR_RW}, {hs, TSR_SCRATCH}};
        tsr_task_desc_t d = {.codelet = &cl_scratch, .nbuffers = 2, .buffers = acc};
        cr_assert_eq(tsr_submit(&d, NULL), TSR_OK);
    }
    cr_assert_eq(tsr_wait_all(), TSR_OK);
    for (int i = 0; i < 64; i++)
        cr_assert_eq(out[i], 999 * 1000 / 2);
    stop_runtime();
}

static atomic_int gate;
static int wait_gate(void **b, const void *args, const tsr_exec_t *e)
{
    (void)b;
    (void)args;
    (void)e;
    while (!atomic_load(&gate))
        usleep(100);
    return 0;
}
static const tsr_codelet_t cl_gate = {.name = "gate", .impl = {wait_gate}, .nbuffers = 0};

static int order_log[64];
static atomic_int order_n;
static int log_order(void **b, const void *args, const tsr_exec_t *e)
{
    (void)b;
    (void)e;
    order_log[atomic_fetch_add(&order_n, 1)] = *(const int *)args;
    return 0;
}
static const tsr_codelet_t cl_log = {.name = "log", .impl = {log_order}, .nbuffers = 0};

Test(stf, prio_runs_highest_priority_first_fifo_among_equals)
{
    start_runtime(1, "prio", 0);
    tsr_task_desc_t g = {.codelet = &cl_gate, .priority = 1000};
    cr_assert_eq(tsr_submit(&g, NULL), TSR_OK);
    usleep(10000); /* the single worker is now inside the gate */
    int prios[12] = {1, 5, 3, 5, 0, 9, 3, 1, 9, 0, 5, 2};
    for (int i = 0; i < 12; i++) {
        int id = i;
        tsr_task_desc_t d = {.codelet = &cl_log, .priority = prios[i],
                             .args = &id, .args_size = sizeof id};
        cr_assert_eq(tsr_submit(&d, NULL), TSR_OK);
    }
    atomic_store(&gate, 1);
    cr_assert_eq(tsr_wait_all(), TSR_OK);
    cr_assert_eq(atomic_load(&order_n), 12);
    /* Reference: a stable sort by decreasing priority. */
    int ref[12], n = 0;
    for (int p = 9; p >= 0; p--)
        for (int i = 0; i < 12; i++)
            if (prios[i] == p)
                ref[n++] = i;
    for (int i = 0; i < 12; i++)
        cr_assert_eq(order_log[i], ref[i], "position %d: task %d, expected %d", i,
                     order_log[i], ref[i]);
    stop_runtime();
}

Test(stf, wait_for_one_task_and_for_a_tag)
{
    start_runtime(2, NULL, 0);
    uint64_t x = 0, y = 0;
    tsr_handle_t hx, hy;
    cr_assert_eq(tsr_handle_register(&hx, &x, sizeof x), TSR_OK);
    cr_assert_eq(tsr_handle_register(&hy, &y, sizeof y), TSR_OK);
    uint64_t one = 1;
    tsr_access_t ax = {hx, TSR_RW}, ay = {hy, TSR_RW};
    tsr_task_t last = NULL;
    for (int i = 0; i < 100; i++) {
        tsr_task_desc_t d = {.codelet = &cl_affine, .nbuffers = 1, .buffers = &ax,
                             .args = &one, .args_size = sizeof one, .tag = 42};
        cr_assert_eq(tsr_submit(&d, i == 99 ? &last : NULL), TSR_OK);
        tsr_task_desc_t e = {.codelet = &cl_affine, .nbuffers = 1, .buffers = &ay,
                             .args = &one, .args_size = sizeof one, .tag = 43};
        cr_assert_eq(tsr_submit(&e, NULL), TSR_OK);
    }
    cr_assert_eq(tsr_task_wait(last), TSR_OK);
    uint64_t ref = 0;
    for (int i = 0; i < 100; i++)
        ref = 3 * ref + 1;
    cr_assert_eq(x, ref);
    cr_assert_eq(tsr_wait_tag(43), TSR_OK);
    cr_assert_eq(y, ref);
    cr_assert_eq(tsr_wait_tag(777), TSR_OK, "an unknown tag has nothing pending");
    stop_runtime();
}

static atomic_long ran;
static int affine_count(void **b, const void *args, const tsr_exec_t *e)
{
    usleep(20);
    affine(b, args, e);
    atomic_fetch_add(&ran, 1);
    return 0;
}
static const tsr_codelet_t cl_affine_count = {.name = "affine_count",
                                              .impl = {affine_count}, .nbuffers = 1};

Test(stf, throttling_bounds_pending_tasks)
{
    start_runtime(2, NULL, 16);
    uint64_t x = 0, ref = 0;
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_register(&h, &x, sizeof x), TSR_OK);
    tsr_access_t a = {h, TSR_RW};
    for (uint64_t k = 0; k < 3000; k++) {
        tsr_task_desc_t d = {.codelet = &cl_affine_count, .nbuffers = 1,
                             .buffers = &a, .args = &k, .args_size = sizeof k};
        cr_assert_eq(tsr_submit(&d, NULL), TSR_OK);
        /* Tasks whose kernel has not finished are a subset of the pending. */
        cr_assert_leq(k + 1 - atomic_load(&ran), 16, "%ld tasks pending",
                      (long)(k + 1 - atomic_load(&ran)));
        ref = 3 * ref + k;
    }
    cr_assert_eq(tsr_wait_all(), TSR_OK);
    cr_assert_eq(x, ref);
    stop_runtime();
}

/* The byte window set at run time (tsr_set_pending_bytes): with 8-byte
 * tasks and a window of 10 tasks' bytes, at most 10 tasks are pending after
 * each submission; 0 lifts it (the task count's 65536 remains), and the
 * call returns the window it replaces. */
Test(stf, the_byte_window_bounds_pending_tasks)
{
    size_t prev = 1;
    cr_assert_eq(tsr_set_pending_bytes(80, &prev), TSR_ESTATE);
    cr_assert_eq(prev, 0);
    start_runtime(2, NULL, 0);
    atomic_store(&ran, 0);
    uint64_t x = 0, ref = 0;
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_register(&h, &x, sizeof x), TSR_OK);
    tsr_access_t a = {h, TSR_RW};
    cr_assert_eq(tsr_set_pending_bytes(10 * sizeof x, &prev), TSR_OK);
    cr_assert_eq(prev, 0, "unlimited before");
    long most = 0;
    for (uint64_t k = 0; k < 2000; k++) {
        if (k == 1000) { /* lifted: tasks pile up behind the 20 us kernels */
            cr_assert_eq(tsr_set_pending_bytes(0, &prev), TSR_OK);
            cr_assert_eq(prev, 10 * sizeof x);
            most = 0;
        }
        tsr_task_desc_t d = {.codelet = &cl_affine_count, .nbuffers = 1,
                             .buffers = &a, .args = &k, .args_size = sizeof k};
        cr_assert_eq(tsr_submit(&d, NULL), TSR_OK);
        long pending = (long)(k + 1) - atomic_load(&ran); /* at least the pending */
        if (k < 1000)
            cr_assert_leq(pending, 10, "%ld tasks pending in a window of 10", pending);
        most = pending > most ? pending : most;
        ref = 3 * ref + k;
    }
    cr_assert_gt(most, 10, "no window: %ld tasks pending at most", most);
    cr_assert_eq(tsr_wait_all(), TSR_OK);
    cr_assert_eq(x, ref);
    stop_runtime();
}

/* REDUX on a registered buffer: sum of contributions k = 1..n, with a group
 * left open at tsr_shutdown, which must combine it into the buffer before
 * handing it back (reference: the closed form n(n+1)/2, plus the value
 * read back between groups). */
static int redux_zero(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    (void)e;
    *(uint64_t *)b[0] = 0;
    return 0;
}
static int redux_add(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    (void)e;
    *(uint64_t *)b[0] += *(const uint64_t *)b[1];
    return 0;
}
static int redux_contrib(void **b, const void *args, const tsr_exec_t *e)
{
    (void)e;
    *(uint64_t *)b[0] += *(const uint64_t *)args;
    return 0;
}
static const tsr_codelet_t cl_rzero = {.name = "rzero", .impl = {redux_zero}, .nbuffers = 1};
static const tsr_codelet_t cl_radd = {.name = "radd", .impl = {redux_add}, .nbuffers = 2};
static const tsr_codelet_t cl_rcontrib = {.name = "rcontrib", .impl = {redux_contrib},
                                          .nbuffers = 1};

static void submit_contribs(tsr_handle_t h, uint64_t from, uint64_t to)
{
    for (uint64_t k = from; k <= to; k++) {
        tsr_access_t a = {h, TSR_REDUX};
        tsr_task_desc_t d = {.codelet = &cl_rcontrib, .nbuffers = 1, .buffers = &a,
                             .args = &k, .args_size = sizeof k};
        cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
    }
}

Test(stf, redux_group_closed_by_acquire_and_by_shutdown)
{
    start_runtime(4, NULL, 0);
    static uint64_t sum = 7; /* the handle's value before: kept, then added to */
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_register(&h, &sum, sizeof sum), TSR_OK);
    cr_assert_eq(tsr_handle_set_reduction(h, &cl_rzero, &cl_radd), TSR_OK);
    submit_contribs(h, 1, 100);
    cr_assert_eq(tsr_handle_set_reduction(h, &cl_rzero, &cl_radd), TSR_EBUSY,
                 "codelets cannot change while a group is open");
    void *p = NULL;
    cr_assert_eq(tsr_handle_acquire(h, TSR_R, &p), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(*(uint64_t *)p, 7 + 100 * 101 / 2);
    cr_assert_eq(tsr_handle_release(h), TSR_OK);
    submit_contribs(h, 101, 200);
    stop_runtime(); /* the group is still open: shutdown combines it */
    cr_assert_eq(sum, 7 + 200 * 201 / 2);
}
