/* memory/vclock.c — the virtual clock: a queue of events (time, order of
 * scheduling, function, argument) kept as a binary min-heap in one growable
 * array, run earliest first by the one thread that drives a simulation.
 *
 * Ordering: by virtual time, then by a sequence number given at scheduling,
 * so that events of equal time run in the order they were scheduled and the
 * same calls give the same run bit for bit.
 *
 * Must never: take a lock or start a thread, move time backwards, allocate
 * per event once the array has grown to its working size, or look at the
 * wall clock.
 */
#include "memory/vclock.h"

#include <tessera/tessera.h>

#include <stdatomic.h>
#include <stdlib.h>

typedef struct vc_event {
    uint64_t t;       /* virtual ns */
    uint64_t seq;     /* scheduling order: ties on t run in this order */
    tsr_vclock_fn fn;
    void *arg;
} vc_event_t;

static struct {
    atomic_bool on;   /* read by tsr__mem_now_ns from any thread */
    uint64_t now;     /* virtual ns of the last event run */
    uint64_t seq;     /* next sequence number */
    uint64_t nrun;    /* events run since start */
    vc_event_t *heap; /* heap[0] is the earliest */
    size_t n, cap;
} vc;

#define VC_INITIAL_CAP 4096

/* a before b: earlier time, or the same time and scheduled first. */
static inline bool vc_before(const vc_event_t *a, const vc_event_t *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

int tsr__vclock_start(void)
{
    if (!vc.heap) {
        vc.heap = malloc(VC_INITIAL_CAP * sizeof *vc.heap);
        if (!vc.heap)
            return TSR_ENOMEM;
        vc.cap = VC_INITIAL_CAP;
    }
    vc.n = 0;
    vc.now = 0;
    vc.seq = 0;
    vc.nrun = 0;
    atomic_store_explicit(&vc.on, true, memory_order_release);
    return TSR_OK;
}

/* Back to the wall clock; the queue's events are dropped with its array. */
void tsr__vclock_stop(void)
{
    atomic_store_explicit(&vc.on, false, memory_order_release);
    free(vc.heap);
    vc.heap = NULL;
    vc.n = vc.cap = 0;
}

bool tsr__vclock_on(void) { return atomic_load_explicit(&vc.on, memory_order_relaxed); }

uint64_t tsr__vclock_now(void) { return vc.now; }

uint64_t tsr__vclock_events(void) { return vc.nrun; }

uint64_t tsr__vclock_queued(void) { return vc.n; }

/* Insert at the end of the heap and sift up: O(log n), no allocation
 * unless the array is full (then it doubles). */
int tsr__vclock_at(uint64_t t, tsr_vclock_fn fn, void *arg)
{
    if (vc.n == vc.cap) {
        size_t cap = vc.cap ? vc.cap * 2 : VC_INITIAL_CAP;
        vc_event_t *h = realloc(vc.heap, cap * sizeof *h);
        if (!h)
            return TSR_ENOMEM;
        vc.heap = h;
        vc.cap = cap;
    }
    vc_event_t ev = {t < vc.now ? vc.now : t, vc.seq++, fn, arg};
    size_t i = vc.n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!vc_before(&ev, &vc.heap[parent]))
            break;
        vc.heap[i] = vc.heap[parent];
        i = parent;
    }
    vc.heap[i] = ev;
    return TSR_OK;
}

/* Pop the root, move the last event down from the root into place, then
 * run the popped event (which may schedule or run others: the heap is
 * consistent before fn is called). */
bool tsr__vclock_step(void)
{
    if (vc.n == 0)
        return false;
    vc_event_t ev = vc.heap[0];
    vc_event_t last = vc.heap[--vc.n];
    size_t n = vc.n, i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n)
            break;
        if (child + 1 < n && vc_before(&vc.heap[child + 1], &vc.heap[child]))
            child++;
        if (!vc_before(&vc.heap[child], &last))
            break;
        vc.heap[i] = vc.heap[child];
        i = child;
    }
    if (n > 0)
        vc.heap[i] = last;
    if (ev.t > vc.now)
        vc.now = ev.t;
    vc.nrun++;
    ev.fn(ev.arg);
    return true;
}
