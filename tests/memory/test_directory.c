/* Directory state transitions, driven through the memory layer's own
 * interface (no tasks): which replicas are valid after each read and
 * write, where data comes from, what eviction picks and writes back, and
 * the errors of requests that cannot fit. Two simulated accelerators. */
#include <criterion/criterion.h>
#include <tessera/tessera.h>

#include <stdint.h>
#include <string.h>
#include <time.h>

#include "memory/memory.h"

enum { I = 0, S = 1, M = 2 };
#define SZ 256
#define SIM0 1
#define SIM1 2

static void open_nodes(size_t sim_capacity)
{
    tsr_mem_config_t cfg = {.nsim = 2, .sim_capacity = sim_capacity, .ncuda = 0};
    char err[256];
    cr_assert_eq(tsr__mem_init(&cfg, err, sizeof err), TSR_OK, "%s", err);
    cr_assert_eq(tsr__mem_node_count(), 3);
}

static int state(tsr_entry_t *e, int node)
{
    tsr_replica_info_t info;
    tsr__entry_inspect(e, node, &info);
    return info.state;
}

static bool allocated(tsr_entry_t *e, int node)
{
    tsr_replica_info_t info;
    tsr__entry_inspect(e, node, &info);
    return info.allocated;
}

/* Acquire entries on node with modes (waiting), returning the request. */
static tsr_mem_req_t *acquire(int node, int n, tsr_entry_t **e, const int *mode)
{
    static tsr_mem_req_t r;
    memset(&r, 0, sizeof r);
    r.node = node;
    r.n = n;
    for (int k = 0; k < n; k++) {
        r.e[k] = e[k];
        r.mode[k] = (uint8_t)mode[k];
    }
    int rc = tsr__mem_acquire_sync(&r);
    cr_assert_eq(rc, TSR_OK, "acquire on node %d: %s", node, r.err);
    return &r;
}

static void *use1(int node, tsr_entry_t *e, int mode, tsr_mem_req_t **out)
{
    tsr_mem_req_t *r = acquire(node, 1, &e, &mode);
    *out = r;
    return r->ptr[0];
}

static void fill(uint8_t *p, uint8_t v)
{
    for (int i = 0; i < SZ; i++)
        p[i] = (uint8_t)(v + i);
}

static void check(const uint8_t *p, uint8_t v, const char *what)
{
    for (int i = 0; i < SZ; i++)
        cr_assert_eq(p[i], (uint8_t)(v + i), "%s: byte %d", what, i);
}

Test(directory, read_replicates_write_invalidates)
{
    open_nodes(1 << 20);
    uint8_t buf[SZ];
    fill(buf, 1);
    tsr_entry_t *e = tsr__entry_new(buf, SZ);
    cr_assert_eq(state(e, 0), M, "a registered buffer is the only valid copy");
    cr_assert(!allocated(e, 0), "a registered buffer is not runtime memory");

    tsr_mem_req_t *r;
    uint8_t *p = use1(SIM0, e, TSR_MEM_R, &r);
    check(p, 1, "sim0 after a read");
    cr_assert(p != buf);
    tsr__mem_release(r);
    cr_assert_eq(state(e, 0), S);
    cr_assert_eq(state(e, SIM0), S);
    cr_assert_eq(tsr__mem_link_bytes(0, SIM0), SZ);

    /* A write on sim0 leaves it the only valid copy. */
    p = use1(SIM0, e, TSR_MEM_RW, &r);
    fill(p, 7);
    tsr__mem_release(r);
    cr_assert_eq(state(e, SIM0), M);
    cr_assert_eq(state(e, 0), I);
    check(buf, 1, "the host buffer is not written back yet");

    /* A read on sim1: simulated accelerators reach each other through the
     * host, so the data goes sim0 -> host -> sim1 and three copies are valid. */
    p = use1(SIM1, e, TSR_MEM_R, &r);
    check(p, 7, "sim1 via the host");
    tsr__mem_release(r);
    cr_assert_eq(state(e, 0), S);
    cr_assert_eq(state(e, SIM0), S);
    cr_assert_eq(state(e, SIM1), S);
    check(buf, 7, "the host copy made on the way");
    cr_assert_eq(tsr__mem_link_bytes(SIM0, 0), SZ);
    cr_assert_eq(tsr__mem_link_bytes(0, SIM1), SZ);

    /* A write-only access on the host fetches nothing and frees the
     * now-invalid accelerator copies. */
    p = use1(0, e, TSR_MEM_W, &r);
    fill(p, 9);
    tsr__mem_release(r);
    cr_assert_eq(state(e, 0), M);
    cr_assert(!allocated(e, SIM0) && !allocated(e, SIM1));
    cr_assert_eq(tsr__mem_link_bytes(SIM0, 0), SZ, "W fetched nothing");

    tsr__entry_free(e);
    tsr__mem_shutdown();
}

Test(directory, zeros_and_invalidate)
{
    open_nodes(1 << 20);
    tsr_entry_t *e = tsr__entry_new(NULL, SZ);
    tsr_mem_req_t *r;
    uint8_t *p = use1(SIM1, e, TSR_MEM_R, &r);
    for (int i = 0; i < SZ; i++)
        cr_assert_eq(p[i], 0, "never written: zeros");
    tsr__mem_release(r);
    cr_assert(!allocated(e, 0), "zeros need no host copy");
    cr_assert_eq(tsr__mem_link_bytes(0, SIM1), 0, "zeros are made, not moved");

    p = use1(SIM1, e, TSR_MEM_RW, &r);
    fill(p, 3);
    tsr__mem_release(r);
    p = use1(0, e, TSR_MEM_R, &r);
    check(p, 3, "host after a write on sim1");
    tsr__mem_release(r);

    /* Invalidate drops every copy without write-back: zeros again. */
    tsr__mem_invalidate(e);
    cr_assert(!allocated(e, 0) && !allocated(e, SIM1));
    p = use1(SIM0, e, TSR_MEM_R, &r);
    for (int i = 0; i < SZ; i++)
        cr_assert_eq(p[i], 0, "after invalidate: zeros");
    tsr__mem_release(r);
    tsr__entry_free(e);
    tsr__mem_shutdown();
}

/* sim0 holds two entries. Writing a third evicts the least recently used
 * one, writing it back to the host first (it is the only valid copy); a
 * clean copy would just be dropped. */
Test(directory, lru_eviction_writes_back_the_only_copy)
{
    open_nodes(2 * SZ);
    uint8_t host[3][SZ];
    tsr_entry_t *e[3];
    for (int i = 0; i < 3; i++) {
        fill(host[i], 0);
        e[i] = tsr__entry_new(host[i], SZ);
    }
    tsr_mem_req_t *r;
    for (int i = 0; i < 2; i++) {
        uint8_t *p = use1(SIM0, e[i], TSR_MEM_W, &r);
        fill(p, (uint8_t)(10 + i));
        tsr__mem_release(r);
    }
    /* Touch e[0] again: e[1] becomes the least recently used. */
    uint8_t *p = use1(SIM0, e[0], TSR_MEM_R, &r);
    tsr__mem_release(r);
    p = use1(SIM0, e[2], TSR_MEM_W, &r);
    fill(p, 12);
    tsr__mem_release(r);

    tsr_node_t *n = tsr__mem_node(SIM0);
    cr_assert_eq(atomic_load(&n->writebacks), 1);
    cr_assert(!allocated(e[1], SIM0), "the LRU copy was evicted");
    cr_assert(allocated(e[0], SIM0) && allocated(e[2], SIM0));
    cr_assert_eq(state(e[1], 0), M, "its data now lives on the host only");
    check(host[1], 11, "written back");
    check(host[0], 0, "e[0] still only on sim0");
    cr_assert(n->peak <= n->capacity);

    /* Marked wont-use, e[2] goes before the older e[0]. */
    tsr__mem_wont_use(e[2]);
    p = use1(SIM0, e[1], TSR_MEM_R, &r);
    check(p, 11, "fetched back");
    tsr__mem_release(r);
    cr_assert(!allocated(e[2], SIM0) && allocated(e[0], SIM0));
    check(host[2], 12, "wont-use copy written back");
    for (int i = 0; i < 3; i++)
        tsr__entry_free(e[i]);
    tsr__mem_shutdown();
}

Test(directory, a_request_larger_than_the_node_fails_clearly)
{
    open_nodes(2 * SZ);
    tsr_entry_t *e[3];
    for (int i = 0; i < 3; i++)
        e[i] = tsr__entry_new(NULL, SZ);
    tsr_mem_req_t r = {.node = SIM0, .n = 3};
    for (int i = 0; i < 3; i++) {
        r.e[i] = e[i];
        r.mode[i] = TSR_MEM_R;
    }
    cr_assert_eq(tsr__mem_acquire_sync(&r), TSR_ENOMEM);
    cr_assert(strstr(r.err, "768 bytes") && strstr(r.err, "sim0") && strstr(r.err, "512"),
              "the message names the sizes and the node: %s", r.err);
    for (int i = 0; i < 3; i++) {
        tsr_replica_info_t info;
        tsr__entry_inspect(e[i], SIM0, &info);
        cr_assert_eq(info.busy, 0, "nothing stays pinned");
        tsr__entry_free(e[i]);
    }
    tsr__mem_shutdown();
}

static void on_done(tsr_mem_req_t *q)
{
    atomic_store((atomic_int *)q->arg, 1);
}

/* With every byte pinned, a request waits (it does not fail), and is
 * granted as soon as a release makes room. */
Test(directory, a_request_waits_for_memory)
{
    open_nodes(2 * SZ);
    tsr_entry_t *e[3];
    for (int i = 0; i < 3; i++)
        e[i] = tsr__entry_new(NULL, SZ);
    int modes[2] = {TSR_MEM_RW, TSR_MEM_RW};
    tsr_mem_req_t held;
    memcpy(&held, acquire(SIM0, 2, e, modes), sizeof held);

    static atomic_int done;
    atomic_store(&done, 0);
    tsr_mem_req_t r = {.node = SIM0, .n = 1};
    r.e[0] = e[2];
    r.mode[0] = TSR_MEM_R;
    r.done = on_done;
    r.arg = &done;
    int rc = tsr__mem_acquire(&r);
    cr_assert_eq(rc, 0, "the request waits");
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    cr_assert_eq(atomic_load(&done), 0, "not granted while memory is pinned");
    cr_assert_eq(atomic_load(&tsr__mem_node(SIM0)->nwaiting), 1);
    tsr__mem_release(&held);
    for (int i = 0; i < 1000 && !atomic_load(&done); i++)
        nanosleep(&ts, NULL);
    cr_assert_eq(atomic_load(&done), 1, "granted after the release");
    cr_assert_eq(atomic_load(&r.status), TSR_OK);
    tsr__mem_release(&r);
    for (int i = 0; i < 3; i++)
        tsr__entry_free(e[i]);
    tsr__mem_shutdown();
}

Test(directory, prefetch_moves_data_ahead)
{
    open_nodes(1 << 20);
    uint8_t buf[SZ];
    fill(buf, 5);
    tsr_entry_t *e = tsr__entry_new(buf, SZ);
    tsr__mem_prefetch(e, SIM1);
    struct timespec ts = {0, 1000 * 1000};
    for (int i = 0; i < 2000 && state(e, SIM1) != S; i++)
        nanosleep(&ts, NULL);
    cr_assert_eq(state(e, SIM1), S, "prefetched");
    tsr_mem_req_t *r;
    uint8_t *p = use1(SIM1, e, TSR_MEM_R, &r);
    check(p, 5, "prefetched data");
    tsr__mem_release(r);
    cr_assert_eq(tsr__mem_link_bytes(0, SIM1), SZ, "moved once");
    tsr__entry_free(e);
    tsr__mem_shutdown();
}
