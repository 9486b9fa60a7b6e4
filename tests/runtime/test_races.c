/* The concurrency contract of docs/runtime.md, tried by racing threads:
 * unregistering a handle while other threads submit on it and acquire it
 * either waits for their calls or refuses them (TSR_EINVAL stale, TSR_EBUSY
 * being unregistered or acquired) — no task that was accepted is lost, no
 * call hangs, nothing is freed under a call; a task reference is consumed
 * by one wait, and a second wait, a concurrent one or a forged value is
 * TSR_EINVAL; a codelet that calls what would wait for itself gets
 * TSR_ESTATE. Runs under ASan and TSan (a thread suite). */
#include "util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int add_one(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    (void)e;
    *(long *)b[0] += 1;
    return 0;
}

static const tsr_codelet_t cl_add = {.name = "add_one", .impl = {add_one}, .nbuffers = 1};

static int submit_add(tsr_handle_t h, tsr_task_t *out)
{
    tsr_access_t a = {h, TSR_RW};
    tsr_task_desc_t d = {.codelet = &cl_add, .nbuffers = 1, .buffers = &a};
    return tsr_submit(&d, out);
}

/* ---- unregister racing submit and acquire --------------------------------- */

enum { RACERS = 4, ROUNDS = 40 };

struct racer {
    tsr_handle_t h;
    int acquirer;             /* acquires and releases instead of submitting */
    atomic_bool *stop;
    long accepted;            /* submissions that returned TSR_OK */
    int unexpected;           /* return codes outside the contract */
    char why[160];
};

static void *racer_main(void *arg)
{
    struct racer *r = arg;
    while (!atomic_load(r->stop)) {
        int rc;
        if (r->acquirer) {
            void *p = NULL;
            rc = tsr_handle_acquire(r->h, TSR_R, &p);
            if (rc == TSR_OK) {
                volatile long v = *(long *)p;
                (void)v;
                rc = tsr_handle_release(r->h);
                if (rc != TSR_OK && !r->unexpected++)
                    snprintf(r->why, sizeof r->why, "release after a granted acquire: %d %s",
                             rc, tsr_error_message());
                continue;
            }
        } else {
            rc = submit_add(r->h, NULL);
            if (rc == TSR_OK) {
                r->accepted++;
                continue;
            }
        }
        if (rc == TSR_EINVAL) /* unregistered: stale from now on */
            break;
        if (rc != TSR_EBUSY && !r->unexpected++)
            snprintf(r->why, sizeof r->why, "%s: %d %s", r->acquirer ? "acquire" : "submit", rc,
                     tsr_error_message());
    }
    return NULL;
}

static void race_round(int round)
{
    static long mem;
    mem = 0;
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_register(&h, &mem, sizeof mem), TSR_OK, "%s", tsr_error_message());
    atomic_bool stop = false;
    pthread_t th[RACERS];
    struct racer r[RACERS];
    for (int i = 0; i < RACERS; i++) {
        r[i] = (struct racer){.h = h, .acquirer = i == 0, .stop = &stop};
        cr_assert_eq(pthread_create(&th[i], NULL, racer_main, &r[i]), 0);
    }
    nanosleep(&(struct timespec){0, (round % 5) * 200000}, NULL);
    int rc;
    int busy = 0;
    while ((rc = tsr_handle_unregister(h)) == TSR_EBUSY) /* acquired right now */
        busy++;
    cr_assert_eq(rc, TSR_OK, "round %d: unregister: %d %s", round, rc, tsr_error_message());
    atomic_store(&stop, true);
    long accepted = 0;
    for (int i = 0; i < RACERS; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(r[i].unexpected, 0, "round %d, thread %d: %s", round, i, r[i].why);
        accepted += r[i].accepted;
    }
    /* Every submission accepted ran before the unregistration returned, and
     * only those: the buffer counts them. */
    cr_assert_eq(mem, accepted, "round %d: %ld tasks accepted, %ld ran (%d EBUSY)", round,
                 accepted, mem, busy);
}

Test(races, unregister_while_others_submit_and_acquire, .timeout = 120)
{
    start_runtime(2, NULL, 0);
    for (int round = 0; round < ROUNDS; round++)
        race_round(round);
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    stop_runtime();
}

/* Two threads unregister one handle: one succeeds, the other is refused. */
struct unreg {
    tsr_handle_t h;
    int rc;
};

static void *unreg_main(void *arg)
{
    struct unreg *u = arg;
    u->rc = tsr_handle_unregister(u->h);
    return NULL;
}

Test(races, concurrent_unregisters_one_wins, .timeout = 120)
{
    start_runtime(2, NULL, 0);
    for (int round = 0; round < 200; round++) {
        long mem = 0;
        tsr_handle_t h;
        cr_assert_eq(tsr_handle_register(&h, &mem, sizeof mem), TSR_OK);
        cr_assert_eq(submit_add(h, NULL), TSR_OK, "%s", tsr_error_message());
        pthread_t th[2];
        struct unreg u[2] = {{h, -1}, {h, -1}};
        for (int i = 0; i < 2; i++)
            cr_assert_eq(pthread_create(&th[i], NULL, unreg_main, &u[i]), 0);
        for (int i = 0; i < 2; i++)
            pthread_join(th[i], NULL);
        int ok = (u[0].rc == TSR_OK) + (u[1].rc == TSR_OK);
        cr_assert_eq(ok, 1, "round %d: unregister returned %d and %d", round, u[0].rc, u[1].rc);
        for (int i = 0; i < 2; i++)
            cr_assert(u[i].rc == TSR_OK || u[i].rc == TSR_EINVAL || u[i].rc == TSR_EBUSY,
                      "round %d: unregister returned %d", round, u[i].rc);
        cr_assert_eq(mem, 1, "round %d: the task before the unregistration ran %ld times",
                     round, mem);
    }
    stop_runtime();
}

/* ---- task references -------------------------------------------------- */

Test(races, task_wait_twice_is_einval_and_nothing_hangs, .timeout = 60)
{
    start_runtime(2, NULL, 0);
    long mem = 0;
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_register(&h, &mem, sizeof mem), TSR_OK);
    tsr_task_t t;
    cr_assert_eq(submit_add(h, &t), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_task_wait(t), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_task_wait(t), TSR_EINVAL, "a second wait on one reference");
    cr_assert(strstr(tsr_error_message(), "not a live task reference"), "%s",
              tsr_error_message());
    /* The record is reused by later tasks: the old reference stays stale,
     * and the new ones are theirs. */
    enum { N = 500 };
    static tsr_task_t more[N];
    for (int i = 0; i < N; i++)
        cr_assert_eq(submit_add(h, &more[i]), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_task_wait(t), TSR_EINVAL, "a stale reference after reuse");
    for (int i = 0; i < N; i++)
        cr_assert_eq(tsr_task_wait(more[i]), TSR_OK, "task %d: %s", i, tsr_error_message());
    /* Forged values are refused without being touched. */
    cr_assert_eq(tsr_task_wait((tsr_task_t)(uintptr_t)0x1000), TSR_EINVAL);
    cr_assert_eq(tsr_task_wait((tsr_task_t)(uintptr_t)0xdead00000000beefull), TSR_EINVAL);
    cr_assert_eq(tsr_wait_all(), TSR_OK, "wait_all after the refused waits: %s",
                 tsr_error_message());
    cr_assert_eq(mem, 1 + N);
    cr_assert_eq(tsr_handle_unregister(h), TSR_OK, "%s", tsr_error_message());
    stop_runtime();
}

struct waiter {
    tsr_task_t t;
    int rc;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    w->rc = tsr_task_wait(w->t);
    return NULL;
}

Test(races, concurrent_waits_on_one_reference_one_consumes_it, .timeout = 60)
{
    start_runtime(2, NULL, 0);
    long mem = 0;
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_register(&h, &mem, sizeof mem), TSR_OK);
    for (int round = 0; round < 200; round++) {
        tsr_task_t t;
        cr_assert_eq(submit_add(h, &t), TSR_OK, "%s", tsr_error_message());
        struct waiter w[2] = {{t, -1}, {t, -1}};
        pthread_t th[2];
        for (int i = 0; i < 2; i++)
            cr_assert_eq(pthread_create(&th[i], NULL, waiter_main, &w[i]), 0);
        for (int i = 0; i < 2; i++)
            pthread_join(th[i], NULL);
        cr_assert((w[0].rc == TSR_OK && w[1].rc == TSR_EINVAL) ||
                      (w[0].rc == TSR_EINVAL && w[1].rc == TSR_OK),
                  "round %d: the waits returned %d and %d", round, w[0].rc, w[1].rc);
    }
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(mem, 200);
    cr_assert_eq(tsr_handle_unregister(h), TSR_OK, "%s", tsr_error_message());
    stop_runtime();
}

/* ---- calls that would wait for the codelet that makes them ---------------- */

static tsr_handle_t own_handle;
static tsr_task_t own_ref;
static int got[7];
static char got_msg[7][160];

static int note(int i, int rc)
{
    got[i] = rc;
    snprintf(got_msg[i], sizeof got_msg[i], "%s", tsr_error_message());
    return rc;
}

static int calls_back(void **b, const void *args, const tsr_exec_t *e)
{
    (void)b;
    (void)args;
    (void)e;
    void *p;
    note(0, tsr_wait_all());
    note(1, tsr_task_wait(own_ref));
    note(2, tsr_handle_acquire(own_handle, TSR_R, &p));
    note(3, tsr_handle_unregister(own_handle));
    note(4, tsr_shutdown());
    note(5, tsr_wait_tag(42));
    note(6, 0);
    return 0;
}

static const tsr_codelet_t cl_calls_back = {.name = "calls_back", .impl = {calls_back},
                                            .nbuffers = 1};

static void codelet_case(int ncpu, int nsim)
{
    start_runtime_sim(ncpu, NULL, 0, nsim, nsim ? 1 << 20 : 0);
    long mem = 0;
    memset(got, -1, sizeof got);
    cr_assert_eq(tsr_handle_register(&own_handle, &mem, sizeof mem), TSR_OK);
    tsr_access_t a = {own_handle, TSR_RW};
    /* The reference the codelet waits on is published before it can run:
     * a task behind an acquisition (released once own_ref is set). */
    void *p;
    cr_assert_eq(tsr_handle_acquire(own_handle, TSR_RW, &p), TSR_OK);
    tsr_task_desc_t d = {.codelet = &cl_calls_back, .nbuffers = 1, .buffers = &a, .tag = 42};
    cr_assert_eq(tsr_submit(&d, &own_ref), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_handle_release(own_handle), TSR_OK);
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    const char *what[] = {"wait_all", "task_wait", "handle_acquire", "handle_unregister",
                          "shutdown", "wait_tag"};
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(got[i], TSR_ESTATE, "%s from a codelet returned %d (%s)", what[i], got[i],
                     got_msg[i]);
        cr_assert(strstr(got_msg[i], "inside a codelet"), "%s: %s", what[i], got_msg[i]);
    }
    cr_assert_eq(got[6], 0, "the codelet ran to its end");
    /* The reference is still the application's, the handle still works. */
    cr_assert_eq(tsr_task_wait(own_ref), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_handle_unregister(own_handle), TSR_OK, "%s", tsr_error_message());
    stop_runtime();
}

Test(races, blocking_calls_from_a_codelet_are_estate_on_cpu_workers, .timeout = 60)
{
    codelet_case(2, 0);
}

Test(races, blocking_calls_from_a_codelet_are_estate_on_an_accelerator, .timeout = 60)
{
    codelet_case(-1, 1);
}
