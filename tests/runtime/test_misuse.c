/* Misuse of the public API: stale handles (unregistered twice, used after
 * unregistration, kept across tsr_shutdown/tsr_init, forged), NULL
 * arguments, calls outside a running runtime. Each returns its error code
 * with a message and the runtime keeps working; none crashes (this suite
 * runs under ASan+UBSan). And task failures that say what happened: the
 * task, its worker, the memory node and the reason reach the application,
 * at the wait and at a later acquisition of the data. */
#include "util.h"

#include <tessera/sched.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int add_one(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    (void)e;
    *(int *)b[0] += 1;
    return 0;
}

/* Writes the buffer's size in bytes into its first int. */
static int fill(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    *(int *)b[0] = (int)e->sizes[0];
    return 0;
}

static const tsr_codelet_t cl_add = {.name = "add_one", .impl = {add_one}, .nbuffers = 1};
static const tsr_codelet_t cl_fill = {.name = "fill", .impl = {fill}, .nbuffers = 1};

static int submit_add(tsr_handle_t h)
{
    tsr_access_t a = {h, TSR_RW};
    tsr_task_desc_t d = {.codelet = &cl_add, .nbuffers = 1, .buffers = &a};
    return tsr_submit(&d, NULL);
}

static int read_int(tsr_handle_t h)
{
    void *p = NULL;
    cr_assert_eq(tsr_handle_acquire(h, TSR_R, &p), TSR_OK, "%s", tsr_error_message());
    int v = *(int *)p;
    cr_assert_eq(tsr_handle_release(h), TSR_OK, "%s", tsr_error_message());
    return v;
}

static void assert_msg(const char *word)
{
    cr_assert(strstr(tsr_error_message(), word), "message '%s' lacks '%s'",
              tsr_error_message(), word);
}

/* Every handle call given h fails with `code` (size reads 0). */
static void assert_refused(tsr_handle_t h, int code)
{
    void *p = NULL;
    cr_assert_eq(tsr_handle_unregister(h), code);
    cr_assert_eq(tsr_handle_acquire(h, TSR_R, &p), code);
    cr_assert_null(p);
    cr_assert_eq(tsr_handle_release(h), code);
    cr_assert_eq(tsr_handle_invalidate(h), code);
    cr_assert_eq(tsr_handle_wont_use(h), code);
    cr_assert_eq(tsr_handle_set_reduction(h, &cl_fill, &cl_add), code);
    cr_assert_eq(tsr_handle_size(h), 0);
    cr_assert_eq(submit_add(h), code);
}

Test(misuse, double_unregister)
{
    start_runtime(2, NULL, 0);
    int x = 0;
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_register(&h, &x, sizeof x), TSR_OK);
    cr_assert_eq(submit_add(h), TSR_OK);
    cr_assert_eq(tsr_handle_unregister(h), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(x, 1);
    cr_assert_eq(tsr_handle_unregister(h), TSR_EINVAL);
    assert_msg("stale");
    assert_msg("handle_unregister");
    cr_assert_eq(x, 1, "a refused call must not touch the buffer");
    stop_runtime();
}

Test(misuse, submit_on_unregistered_handle)
{
    start_runtime(2, NULL, 0);
    int x = 0, y = 0;
    tsr_handle_t h, g;
    cr_assert_eq(tsr_handle_register(&h, &x, sizeof x), TSR_OK);
    cr_assert_eq(tsr_handle_register(&g, &y, sizeof y), TSR_OK);
    cr_assert_eq(tsr_handle_unregister(h), TSR_OK);
    cr_assert_eq(submit_add(h), TSR_EINVAL);
    assert_msg("stale");
    assert_msg("buffer 0");
    /* A stale handle among good ones: nothing of the task is recorded. */
    tsr_access_t a[2] = {{g, TSR_RW}, {h, TSR_R}};
    static const tsr_codelet_t cl2 = {.name = "two", .impl = {add_one}, .nbuffers = 2};
    tsr_task_desc_t d = {.codelet = &cl2, .nbuffers = 2, .buffers = a};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_EINVAL);
    assert_msg("buffer 1");
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(x, 0);
    cr_assert_eq(read_int(g), 0, "the refused task must not have run");
    assert_refused(h, TSR_EINVAL);
    cr_assert_eq(tsr_handle_unregister(g), TSR_OK);
    stop_runtime();
}

Test(misuse, reused_slot_keeps_old_handle_stale)
{
    start_runtime(2, NULL, 0);
    int x = 0, y = 10;
    tsr_handle_t a, b;
    cr_assert_eq(tsr_handle_register(&a, &x, sizeof x), TSR_OK);
    cr_assert_eq(tsr_handle_unregister(a), TSR_OK);
    /* b may take a's place in the runtime's tables: a still names nothing. */
    cr_assert_eq(tsr_handle_register(&b, &y, sizeof y), TSR_OK);
    cr_assert_neq(a, b, "a new handle must never get a dead handle's id");
    assert_refused(a, TSR_EINVAL);
    cr_assert_eq(submit_add(b), TSR_OK);
    cr_assert_eq(read_int(b), 11);
    cr_assert_eq(tsr_handle_size(b), sizeof y);
    cr_assert_eq(tsr_handle_unregister(b), TSR_OK);
    cr_assert_eq(x, 0);
    cr_assert_eq(y, 11);
    stop_runtime();
}

Test(misuse, handles_across_shutdown_and_init)
{
    int x = 0, y = 0, z = 100;
    tsr_handle_t kept, dropped, fresh;
    start_runtime(2, NULL, 0);
    cr_assert_eq(tsr_handle_register(&kept, &x, sizeof x), TSR_OK);
    cr_assert_eq(tsr_handle_register(&dropped, &y, sizeof y), TSR_OK);
    cr_assert_eq(submit_add(kept), TSR_OK);
    cr_assert_eq(tsr_handle_unregister(dropped), TSR_OK);
    stop_runtime(); /* unregisters `kept`: x holds its data */
    cr_assert_eq(x, 1);

    /* Between runtimes: not a crash, the runtime is not there. */
    assert_refused(kept, TSR_ESTATE);
    assert_msg("not initialized");

    start_runtime(2, NULL, 0);
    cr_assert_eq(tsr_handle_register(&fresh, &z, sizeof z), TSR_OK);
    assert_refused(kept, TSR_EINVAL);
    assert_msg("stale");
    assert_refused(dropped, TSR_EINVAL);
    cr_assert_eq(submit_add(fresh), TSR_OK);
    cr_assert_eq(read_int(fresh), 101, "old handles must not reach the new one");
    cr_assert_eq(x, 1);
    cr_assert_eq(y, 0);
    stop_runtime();
    cr_assert_eq(z, 101);
}

Test(misuse, forged_handles)
{
    start_runtime(1, NULL, 0);
    int x = 0;
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_register(&h, &x, sizeof x), TSR_OK);
    tsr_handle_t forged[] = {
        (tsr_handle_t)(uintptr_t)1,
        (tsr_handle_t)(uintptr_t)0x1234,
        (tsr_handle_t)(void *)&x,
        (tsr_handle_t)(void *)&forged,
        (tsr_handle_t)(uintptr_t)UINT64_MAX,
    };
    for (size_t i = 0; i < sizeof forged / sizeof forged[0]; i++) {
        if (forged[i] == h)
            continue; /* cannot happen, but a forged value must not be h */
        assert_refused(forged[i], TSR_EINVAL);
    }
    cr_assert_eq(submit_add(h), TSR_OK);
    cr_assert_eq(tsr_handle_unregister(h), TSR_OK);
    cr_assert_eq(x, 1);
    stop_runtime();
}

Test(misuse, calls_outside_the_runtime)
{
    int x = 0;
    tsr_handle_t h = NULL;
    void *p = NULL;
    tsr_worker_stats_t ws;
    tsr_node_stats_t ns;
    for (int round = 0; round < 2; round++) {
        /* round 0: before any init; round 1: after a shutdown */
        cr_assert_eq(tsr_handle_register(&h, &x, sizeof x), TSR_ESTATE);
        assert_msg("not initialized");
        cr_assert_null(h);
        cr_assert_eq(tsr_handle_alloc(&h, 64), TSR_ESTATE);
        cr_assert_eq(tsr_handle_unregister((tsr_handle_t)&x), TSR_ESTATE);
        cr_assert_eq(tsr_handle_acquire((tsr_handle_t)&x, TSR_R, &p), TSR_ESTATE);
        cr_assert_eq(tsr_handle_size((tsr_handle_t)&x), 0);
        tsr_task_desc_t d = {.codelet = &cl_add};
        cr_assert_eq(tsr_submit(&d, NULL), TSR_ESTATE);
        cr_assert_eq(tsr_submit(NULL, NULL), TSR_ESTATE);
        cr_assert_eq(tsr_wait_all(), TSR_ESTATE);
        cr_assert_eq(tsr_wait_tag(7), TSR_ESTATE);
        cr_assert_eq(tsr_task_wait(NULL), TSR_ESTATE);
        cr_assert_eq(tsr_worker_stats(0, &ws), TSR_ESTATE);
        cr_assert_eq(tsr_memory_node_stats(0, &ns), TSR_ESTATE);
        cr_assert_eq(tsr_stats_print(stderr), TSR_ESTATE);
        cr_assert_eq(tsr_worker_count(), 0);
        cr_assert_eq(tsr_memory_node_count(), 0);
        cr_assert_eq(tsr_shutdown(), TSR_ESTATE);
        if (round == 0) {
            start_runtime(1, NULL, 0);
            stop_runtime();
        }
    }
}

Test(misuse, null_arguments)
{
    start_runtime(1, NULL, 0);
    int x = 0;
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_register(NULL, &x, sizeof x), TSR_EINVAL);
    cr_assert_eq(tsr_handle_register(&h, NULL, sizeof x), TSR_EINVAL);
    cr_assert_eq(tsr_handle_register(&h, &x, 0), TSR_EINVAL);
    cr_assert_eq(tsr_handle_alloc(NULL, 8), TSR_EINVAL);
    assert_refused(NULL, TSR_EINVAL);
    assert_msg("NULL");

    void *p = NULL;
    cr_assert_eq(tsr_handle_register(&h, &x, sizeof x), TSR_OK);
    cr_assert_eq(tsr_handle_acquire(h, TSR_R, NULL), TSR_EINVAL);
    cr_assert_eq(tsr_handle_acquire(h, TSR_SCRATCH, &p), TSR_EINVAL);
    cr_assert_null(p);
    cr_assert_eq(tsr_handle_release(h), TSR_EINVAL, "release without acquire");
    cr_assert_eq(tsr_handle_set_reduction(h, NULL, &cl_add), TSR_EINVAL);
    cr_assert_eq(tsr_handle_set_reduction(h, &cl_fill, NULL), TSR_EINVAL);

    cr_assert_eq(tsr_submit(NULL, NULL), TSR_EINVAL);
    tsr_task_desc_t d = {.codelet = NULL, .nbuffers = 0};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_EINVAL);
    d = (tsr_task_desc_t){.codelet = &cl_add, .nbuffers = 1, .buffers = NULL};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_EINVAL);
    assert_msg("NULL");
    tsr_access_t a = {NULL, TSR_RW};
    d.buffers = &a;
    cr_assert_eq(tsr_submit(&d, NULL), TSR_EINVAL);
    a.handle = h;
    d.args_size = 8;
    d.args = NULL;
    cr_assert_eq(tsr_submit(&d, NULL), TSR_EINVAL);
    tsr_task_t t = (tsr_task_t)&x;
    d.args_size = 0;
    d.nbuffers = 2;
    cr_assert_eq(tsr_submit(&d, &t), TSR_EINVAL, "buffer count differs from the codelet's");
    cr_assert_null(t, "a refused submission returns no task");

    cr_assert_eq(tsr_task_wait(NULL), TSR_EINVAL);
    cr_assert_eq(tsr_stats_print(NULL), TSR_EINVAL);
    cr_assert_eq(tsr_worker_stats(0, NULL), TSR_EINVAL);
    cr_assert_eq(tsr_worker_stats(-1, NULL), TSR_EINVAL);
    cr_assert_eq(tsr_memory_node_stats(0, NULL), TSR_EINVAL);
    cr_assert_eq(tsr_cuda_device_info(0, NULL), TSR_EINVAL);

    /* Nothing refused was recorded: the handle still works. */
    cr_assert_eq(submit_add(h), TSR_OK);
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_handle_unregister(h), TSR_OK);
    cr_assert_eq(x, 1);
    stop_runtime();
}

/* Sizes within 63 of SIZE_MAX wrapped when rounded to the host's 64-byte
 * alignment: a task given such a handle crashed (RW) or got a tiny buffer
 * that claimed SIZE_MAX bytes (W). Every size above 2^56 - 1 (the
 * documented largest handle on 64-bit machines) is refused, naming it. */
Test(misuse, handle_sizes_near_size_max)
{
    start_runtime(1, NULL, 0);
    const size_t sizes[] = {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 63, SIZE_MAX - 64,
                            (size_t)1 << 63, (size_t)1 << 56};
    int x = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char want[32];
        snprintf(want, sizeof want, "%zu", sizes[i]);
        tsr_handle_t h = (tsr_handle_t)&x;
        cr_assert_eq(tsr_handle_alloc(&h, sizes[i]), TSR_EINVAL, "alloc(%s)", want);
        cr_assert_null(h, "a refused handle is NULL");
        assert_msg(want);
        cr_assert_eq(tsr_handle_register(&h, &x, sizes[i]), TSR_EINVAL, "register(%s)", want);
        assert_msg(want);
    }
    cr_assert_eq(TSR_MAX_HANDLE_SIZE, ((size_t)1 << 56) - 1);
    /* The runtime keeps working. */
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_register(&h, &x, sizeof x), TSR_OK);
    cr_assert_eq(submit_add(h), TSR_OK);
    cr_assert_eq(read_int(h), 1);
    cr_assert_eq(tsr_handle_unregister(h), TSR_OK);
    stop_runtime();
}

Test(misuse, acquisition_misuse)
{
    start_runtime(2, NULL, 0);
    int x = 5;
    tsr_handle_t h;
    void *p = NULL;
    cr_assert_eq(tsr_handle_register(&h, &x, sizeof x), TSR_OK);
    cr_assert_eq(tsr_handle_acquire(h, TSR_RW, &p), TSR_OK);
    cr_assert_eq(tsr_handle_acquire(h, TSR_R, &p), TSR_EBUSY);
    cr_assert_eq(tsr_handle_unregister(h), TSR_EBUSY);
    cr_assert_eq(tsr_handle_release(h), TSR_OK);
    cr_assert_eq(tsr_handle_release(h), TSR_EINVAL, "double release");
    /* The refused unregistration left the handle alive. */
    cr_assert_eq(submit_add(h), TSR_OK);
    cr_assert_eq(read_int(h), 6);
    cr_assert_eq(tsr_handle_unregister(h), TSR_OK);
    cr_assert_eq(tsr_handle_release(h), TSR_EINVAL);
    stop_runtime();
}

/* What a policy sees of a task's buffers is the application's handle: the
 * same id, usable with tsr_handle_nodes; a stale id has no copies. */
Test(misuse, policies_see_the_application_handles)
{
    start_runtime(1, NULL, 0);
    int x = 0, y = 0;
    tsr_handle_t h, g;
    cr_assert_eq(tsr_handle_register(&h, &x, sizeof x), TSR_OK);
    cr_assert_eq(tsr_handle_register(&g, &y, sizeof y), TSR_OK);
    tsr_access_t a[2] = {{g, TSR_RW}, {h, TSR_R}};
    static const tsr_codelet_t cl2 = {.name = "two", .impl = {add_one}, .nbuffers = 2};
    tsr_task_desc_t d = {.codelet = &cl2, .nbuffers = 2, .buffers = a};
    tsr_task_t t;
    cr_assert_eq(tsr_submit(&d, &t), TSR_OK);
    cr_assert_eq(tsr_task_handle(t, 0), g);
    cr_assert_eq(tsr_task_handle(t, 1), h);
    cr_assert_null(tsr_task_handle(t, 2));
    cr_assert_eq(tsr_task_mode(t, 1), TSR_R);
    cr_assert_eq(tsr_task_wait(t), TSR_OK);
    /* A registered buffer is valid on the host (node 0). */
    cr_assert(tsr_handle_nodes(h) & 1u);
    cr_assert_eq(tsr_handle_unregister(h), TSR_OK);
    cr_assert_eq(tsr_handle_nodes(h), 0u, "a stale handle has no copies");
    cr_assert_eq(tsr_handle_nodes(NULL), 0u);
    cr_assert_eq(tsr_handle_nodes((tsr_handle_t)(void *)&x), 0u);
    cr_assert_eq(tsr_handle_unregister(g), TSR_OK);
    cr_assert_eq(y, 1);
    stop_runtime();
}

/* Threads register, use and unregister their own handles at once while
 * trying stale ones: the id table stays consistent (TSan runs this). */
#define NTHREADS 4
#define ROUNDS 200

struct churn {
    int id;
    int errors;
};

static void *churn_main(void *arg)
{
    struct churn *c = arg;
    tsr_handle_t old = NULL;
    for (int r = 0; r < ROUNDS; r++) {
        int x = r;
        tsr_handle_t h;
        if (tsr_handle_register(&h, &x, sizeof x) != TSR_OK) {
            c->errors++;
            continue;
        }
        if (h == old)
            c->errors++; /* an id is never handed out twice */
        if (old && tsr_handle_size(old) != 0)
            c->errors++;
        if (old && submit_add(old) != TSR_EINVAL)
            c->errors++;
        if (submit_add(h) != TSR_OK || submit_add(h) != TSR_OK)
            c->errors++;
        if (tsr_handle_unregister(h) != TSR_OK)
            c->errors++;
        if (x != r + 2)
            c->errors++;
        old = h;
    }
    return NULL;
}

Test(misuse, concurrent_register_unregister)
{
    start_runtime(2, NULL, 0);
    pthread_t th[NTHREADS];
    struct churn c[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        c[i] = (struct churn){.id = i};
        cr_assert_eq(pthread_create(&th[i], NULL, churn_main, &c[i]), 0);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < NTHREADS; i++)
        cr_assert_eq(c[i].errors, 0, "thread %d: %d errors", i, c[i].errors);
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    stop_runtime();
}

/* ---- failures that say what happened ----------------------------------- */

static void submit_fill(tsr_handle_t h, const char *name)
{
    tsr_access_t a = {h, TSR_W};
    tsr_task_desc_t d = {.codelet = &cl_fill, .nbuffers = 1, .buffers = &a, .name = name};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
}

/* A 2 MiB handle the runtime must allocate on a host limited to 1 MiB:
 * the writer fails, the acquisition after it and the wait say which task,
 * on which worker and node, and why. */
Test(failure_messages, host_limit_names_task_and_node)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 1;
    cfg.bind = 0;
    cfg.ncuda = 0;
    cfg.host_mem = (size_t)1 << 20;
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "%s", tsr_error_message());
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_alloc(&h, (size_t)2 << 20), TSR_OK);
    submit_fill(h, "fill-big");
    void *p = NULL;
    cr_assert_eq(tsr_handle_acquire(h, TSR_R, &p), TSR_ETASK);
    cr_log_info("acquire: %s", tsr_error_message());
    assert_msg("handle_acquire");
    assert_msg("task 'fill-big'");
    assert_msg("worker 0");
    assert_msg("host");
    assert_msg("2097152"); /* the bytes that did not fit */
    cr_assert_eq(tsr_wait_all(), TSR_ETASK);
    cr_log_info("wait_all: %s", tsr_error_message());
    assert_msg("task 'fill-big' on worker 0 (host)");
    assert_msg("2097152");
    assert_msg("1 task(s) failed");
    /* The handle can be repaired: a small one works under the limit. */
    tsr_handle_t s;
    cr_assert_eq(tsr_handle_alloc(&s, 4096), TSR_OK);
    submit_fill(s, "fill-small");
    cr_assert_eq(read_int(s), 4096);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
}

/* The same on a simulated accelerator too small for the buffer, through a
 * chain: the reader of the failed writer is cancelled, and the task waited
 * for names the first failure. */
/* A 2 MiB writer 'fill-sim' on a 1 MiB simulated accelerator and its
 * reader 'bump': the reader's wait returns TSR_ETASK. */
static int big[(2 << 20) / sizeof(int)];

static tsr_handle_t failing_chain(void)
{
    start_runtime_sim(-1, NULL, 0, 1, (size_t)1 << 20);
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_register(&h, big, sizeof big), TSR_OK);
    submit_fill(h, "fill-sim");
    tsr_access_t a = {h, TSR_RW};
    tsr_task_desc_t d = {.codelet = &cl_add, .nbuffers = 1, .buffers = &a, .name = "bump"};
    tsr_task_t t;
    cr_assert_eq(tsr_submit(&d, &t), TSR_OK);
    cr_assert_eq(tsr_task_wait(t), TSR_ETASK);
    return h;
}

Test(failure_messages, small_sim_node_names_task_and_node)
{
    tsr_handle_t h = failing_chain();
    cr_log_info("task_wait: %s", tsr_error_message());
    assert_msg("task 'bump' was cancelled");
    assert_msg("task 'fill-sim' on worker 0 (sim0)");
    void *p = NULL;
    cr_assert_eq(tsr_handle_acquire(h, TSR_R, &p), TSR_ETASK);
    cr_log_info("acquire: %s", tsr_error_message());
    assert_msg("task 'fill-sim' on worker 0 (sim0)");
    assert_msg("2097152");
    cr_assert_eq(tsr_wait_all(), TSR_ETASK);
    assert_msg("task 'fill-sim' on worker 0 (sim0)");
    assert_msg("1 task(s) failed, 1 cancelled");
    cr_assert_eq(big[0], 0, "the failed writer never ran");
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
}

/* A kernel that returns nonzero: its code and the worker's node. */
static int refuse(void **b, const void *args, const tsr_exec_t *e)
{
    (void)b;
    (void)args;
    (void)e;
    return 42;
}

Test(failure_messages, kernel_status_named)
{
    start_runtime(1, NULL, 0);
    static const tsr_codelet_t cl_refuse = {.name = "refuse", .impl = {refuse}, .nbuffers = 1};
    int x = 0;
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_register(&h, &x, sizeof x), TSR_OK);
    tsr_access_t a = {h, TSR_RW};
    tsr_task_desc_t d = {.codelet = &cl_refuse, .nbuffers = 1, .buffers = &a};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK);
    cr_assert_eq(tsr_wait_all(), TSR_ETASK);
    assert_msg("task 'refuse' on worker 0 (host): its implementation returned 42");
    cr_assert_eq(tsr_wait_all(), TSR_OK, "a failure is reported once");
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
}

/* Why a task failed, as a status (tsr_error_cause), for programs that act
 * on it (tessera-sim reports out of memory as exit 3): TSR_ENOMEM when the
 * task's buffers do not fit its node, carried to the tasks it cancels, to
 * an acquisition of its data and to the waits; TSR_ETASK when the
 * implementation failed, even with a code that equals a status. */
static int refuse_minus_two(void **b, const void *args, const tsr_exec_t *e)
{
    (void)b;
    (void)args;
    (void)e;
    return -2;
}

Test(failure_messages, cause_of_a_task_failure)
{
    tsr_handle_t h = failing_chain();
    cr_assert_eq(tsr_error_cause(), TSR_ENOMEM, "cancelled task: %d", tsr_error_cause());
    void *p = NULL;
    cr_assert_eq(tsr_handle_acquire(h, TSR_R, &p), TSR_ETASK);
    cr_assert_eq(tsr_error_cause(), TSR_ENOMEM, "acquire: %d", tsr_error_cause());
    cr_assert_eq(tsr_wait_all(), TSR_ETASK);
    cr_assert_eq(tsr_error_cause(), TSR_ENOMEM, "wait_all: %d", tsr_error_cause());
    /* Another call's failure has its own status as cause. */
    cr_assert_eq(tsr_handle_alloc(&h, 0), TSR_EINVAL);
    cr_assert_eq(tsr_error_cause(), TSR_EINVAL);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());

    start_runtime(1, NULL, 0);
    static const tsr_codelet_t cl_m2 = {.name = "minus-two", .impl = {refuse_minus_two},
                                        .nbuffers = 1};
    int x = 0;
    cr_assert_eq(tsr_handle_register(&h, &x, sizeof x), TSR_OK);
    tsr_access_t a = {h, TSR_RW};
    tsr_task_desc_t d = {.codelet = &cl_m2, .nbuffers = 1, .buffers = &a};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK);
    cr_assert_eq(tsr_wait_all(), TSR_ETASK);
    assert_msg("its implementation returned -2");
    cr_assert_eq(tsr_error_cause(), TSR_ETASK, "implementation: %d", tsr_error_cause());
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
}
