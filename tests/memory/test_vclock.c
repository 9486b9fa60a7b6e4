/* The virtual clock's event queue (memory/vclock.h): events run by time,
 * then in the order they were scheduled; events scheduled from inside
 * events; time never goes back; the library's clock is virtual while the
 * clock is on and the wall clock again after it stops. References are
 * hand-written sequences and a naive sort of the same events. */
#include <criterion/criterion.h>
#include <tessera/tessera.h>

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "memory/memory.h"
#include "memory/vclock.h"

/* A log of (event id, time it ran at). */
static int order[4096];
static uint64_t when[4096];
static int nlog;

static void log_fn(void *arg)
{
    order[nlog] = (int)(intptr_t)arg;
    when[nlog] = tsr__vclock_now();
    nlog++;
}

static void stop_clock(void) { tsr__vclock_stop(); }

TestSuite(vclock, .fini = stop_clock);

Test(vclock, orders_by_time_then_scheduling)
{
    nlog = 0;
    cr_assert_eq(tsr__vclock_start(), TSR_OK);
    cr_assert(tsr__vclock_on());
    cr_assert_eq(tsr__vclock_now(), 0);
    /* id: time — ids 1, 3, 5 share t=100 and must run in that order. */
    uint64_t t[] = {0, 100, 50, 100, 7, 100, 3};
    for (int i = 1; i <= 6; i++)
        cr_assert_eq(tsr__vclock_at(t[i], log_fn, (void *)(intptr_t)i), TSR_OK);
    cr_assert_eq(tsr__vclock_queued(), 6);
    while (tsr__vclock_step())
        ;
    int want[] = {6, 4, 2, 1, 3, 5};
    uint64_t want_t[] = {3, 7, 50, 100, 100, 100};
    cr_assert_eq(nlog, 6);
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(order[i], want[i], "event %d: ran %d, expected %d", i, order[i],
                     want[i]);
        cr_assert_eq(when[i], want_t[i]);
    }
    cr_assert_eq(tsr__vclock_events(), 6);
    cr_assert_eq(tsr__vclock_queued(), 0);
    cr_assert(!tsr__vclock_step());
}

/* Many events at pseudo-random times (few distinct values, many ties):
 * the run order equals a stable sort of (time, scheduling index). */
static int cmp_idx(const void *a, const void *b);
static uint64_t rtimes[4000];
static int cmp_idx(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    if (rtimes[x] != rtimes[y])
        return rtimes[x] < rtimes[y] ? -1 : 1;
    return (x > y) - (x < y);
}

Test(vclock, matches_a_stable_sort)
{
    nlog = 0;
    cr_assert_eq(tsr__vclock_start(), TSR_OK);
    uint32_t s = 12345;
    int idx[4000];
    for (int i = 0; i < 4000; i++) { /* more than the initial array: it grows */
        s = s * 1103515245u + 12345u;
        rtimes[i] = (s >> 16) % 37;
        idx[i] = i;
        cr_assert_eq(tsr__vclock_at(rtimes[i], log_fn, (void *)(intptr_t)i), TSR_OK);
    }
    qsort(idx, 4000, sizeof idx[0], cmp_idx);
    while (tsr__vclock_step())
        ;
    cr_assert_eq(nlog, 4000);
    for (int i = 0; i < 4000; i++)
        cr_assert_eq(order[i], idx[i], "position %d: %d, expected %d", i, order[i], idx[i]);
}

/* An event that schedules: one at its own time runs after those already
 * queued at that time; one in the past runs now, not back in time. */
static void spawner(void *arg)
{
    log_fn(arg);
    int id = (int)(intptr_t)arg;
    if (id == 1) {
        tsr__vclock_at(tsr__vclock_now(), log_fn, (void *)(intptr_t)10);
        tsr__vclock_at(5, log_fn, (void *)(intptr_t)11);          /* past: now */
        tsr__vclock_at(tsr__vclock_now() + 30, spawner, (void *)(intptr_t)12);
    }
}

Test(vclock, events_scheduled_from_events)
{
    nlog = 0;
    cr_assert_eq(tsr__vclock_start(), TSR_OK);
    tsr__vclock_at(20, spawner, (void *)(intptr_t)1);
    tsr__vclock_at(20, log_fn, (void *)(intptr_t)2);
    tsr__vclock_at(40, log_fn, (void *)(intptr_t)3);
    while (tsr__vclock_step())
        ;
    /* 1@20, 2@20 (queued before 1 ran), 10@20, 11@20, 3@40, 12@50 */
    int want[] = {1, 2, 10, 11, 3, 12};
    uint64_t want_t[] = {20, 20, 20, 20, 40, 50};
    cr_assert_eq(nlog, 6);
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(order[i], want[i], "event %d: ran %d, expected %d", i, order[i],
                     want[i]);
        cr_assert_eq(when[i], want_t[i]);
        if (i > 0)
            cr_assert_geq(when[i], when[i - 1]);
    }
}

Test(vclock, library_clock_follows)
{
    nlog = 0;
    cr_assert_eq(tsr__vclock_start(), TSR_OK);
    cr_assert_eq(tsr__mem_now_ns(), 0);
    tsr__vclock_at(1234567, log_fn, NULL);
    cr_assert(tsr__vclock_step());
    cr_assert_eq(tsr__mem_now_ns(), 1234567);
    /* Stopping drops what is queued and gives the wall clock back. */
    tsr__vclock_at(5000000, log_fn, NULL);
    tsr__vclock_stop();
    cr_assert(!tsr__vclock_on());
    cr_assert_eq(tsr__vclock_queued(), 0);
    cr_assert(!tsr__vclock_step());
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t wall = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    uint64_t now = tsr__mem_now_ns();
    cr_assert_geq(now, wall);
    cr_assert_lt(now - wall, 60ull * 1000000000ull);
    /* A fresh start is at time 0 again. */
    cr_assert_eq(tsr__vclock_start(), TSR_OK);
    cr_assert_eq(tsr__mem_now_ns(), 0);
    cr_assert_eq(tsr__vclock_events(), 0);
}
