/* memory/sim.c — a simulated accelerator: memory in host RAM with its own
 * capacity, and a copy engine thread that can be throttled to a bandwidth
 * and a latency, so that a machine without a GPU exercises the directory,
 * eviction and prefetch the way a PCIe device would.
 *
 * Must never: run a copy on the caller's thread, or call a completion
 * while holding its queue lock (completions queue new copies).
 */
#include "memory/memory.h"
#include "memory/copy_fifo.h"

#include <tessera/tessera.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

typedef struct sim {
    pthread_t thread;
    tsr_copy_fifo_t q;
    double bandwidth;  /* bytes per second; 0: as fast as memcpy */
    double latency;    /* seconds per copy */
} sim_t;

static int sim_copy(tsr_node_t *n, tsr_copy_t *c)
{
    sim_t *s = n->impl;
    tsr__copy_fifo_push(&s->q, c);
    return TSR_OK;
}

/* Simulated accelerators reach each other only through the host. */
static bool sim_peer(tsr_node_t *n, const tsr_node_t *other)
{
    (void)n;
    return other->kind == TSR_NODE_KIND_HOST;
}

static void sleep_until(uint64_t t_ns)
{
    struct timespec ts = {(time_t)(t_ns / 1000000000ull), (long)(t_ns % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* The engine: one copy at a time, each taking at least latency +
 * size / bandwidth, like one DMA engine on a PCIe link. */
static void *sim_engine(void *arg)
{
    tsr_node_t *n = arg;
    sim_t *s = n->impl;
    /* The engine sleeps out each copy's latency: with Linux's default
     * 50 µs timer slack a 10 µs sleep takes ~90 µs, so the link would be
     * several times slower than configured. */
    (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    tsr_copy_t *c;
    while ((c = tsr__copy_fifo_pop(&s->q))) {
        c->t_start = tsr__mem_now_ns();
        if (c->src)
            memcpy(c->dst, c->src, c->size);
        else
            memset(c->dst, 0, c->size);
        if (s->bandwidth > 0 || s->latency > 0) {
            double secs = s->latency + (s->bandwidth > 0 ? (double)c->size / s->bandwidth : 0);
            sleep_until(c->t_start + (uint64_t)(secs * 1e9));
        }
        c->t_end = tsr__mem_now_ns();
        tsr__node_copy_event(n, c);
        c->done(c->arg, TSR_OK);
    }
    return NULL;
}

static void sim_close(tsr_node_t *n)
{
    sim_t *s = n->impl;
    if (!s)
        return;
    tsr__copy_fifo_stop(&s->q);
    pthread_join(s->thread, NULL);
    tsr__copy_fifo_destroy(&s->q);
    free(s);
    n->impl = NULL;
}

static const tsr_node_ops_t sim_ops = {
    .alloc = tsr__host_node_alloc, /* its memory is host RAM */
    .free = tsr__host_node_free,
    .copy = sim_copy,
    .peer = sim_peer,
    .close = sim_close,
};

int tsr__sim_node_open(tsr_node_t *n, size_t capacity, double bandwidth, double latency,
                       char *err, size_t errlen)
{
    sim_t *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "simulated accelerator: out of memory");
        return TSR_ENOMEM;
    }
    tsr__copy_fifo_init(&s->q);
    s->bandwidth = bandwidth;
    s->latency = latency;
    n->kind = TSR_NODE_KIND_SIM;
    n->ops = &sim_ops;
    n->impl = s;
    n->capacity = capacity;
    if (pthread_create(&s->thread, NULL, sim_engine, n) != 0) {
        tsr__copy_fifo_destroy(&s->q);
        free(s);
        n->impl = NULL;
        snprintf(err, errlen, "simulated accelerator: cannot start its copy engine");
        return TSR_ENOMEM;
    }
    return TSR_OK;
}
