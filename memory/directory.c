/* memory/directory.c — the coherence directory: replicas of every entry on
 * every node, their MSI state, allocation with eviction, asynchronous
 * fetches, and the per-node FIFO of requests waiting for memory. Which
 * idle copy an eviction takes first is memory/evict.h's order, fed here
 * with each entry's next use (tsr__mem_set_next_use).
 *
 * Locks, in the order they may be taken:
 *   entry lock  →  node lock (a device node before the host node, the host
 *                  before the disk tier)  →  engine queue
 * An evictor holds a node lock and only *tries* entry locks, so it never
 * waits against the order. Copy completions run on engine threads; a
 * completion never holds a lock while it calls a waiter.
 *
 * Why requests are all-or-nothing and FIFO: a request that pinned part of
 * its buffers and waited for the rest could hold what another waiting
 * request needs, and two such requests either deadlock or, if they evict
 * each other's buffers, livelock. A request reserves every byte it needs
 * at once, and a later request never overtakes a waiting one.
 */
#include "memory/memory.h"

#include <tessera/tessera.h>

#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ST_I = 0, ST_S = 1, ST_M = 2 };

/* A fetch ended without making its replica valid: a write elsewhere made
 * what it copied stale. A waiter that needs the data fetches again. */
#define FETCH_STALE 1
/* fetch_route made the host replica valid itself (zeros: no engine). */
#define FETCH_FILLED 2
/* rep_alloc_unrequested: the host is overdrawn to its bound and its own
 * copies are on their way to disk; the copy waits for them (see
 * "Overdraft" below rep_alloc_unrequested). */
#define OVERDRAWN 3

typedef struct waiter {
    void (*fn)(void *arg, int k, int status, const char *err);
    void *arg;
    int k;        /* the waiter's own index (a request's entry) */
} waiter_t;

/* A copy into one replica in flight; other requests for the same replica
 * join its waiters. A fetch that must go through the host first waits for
 * the host replica (via_host) before its own copy is queued. */
typedef struct fetch {
    tsr_copy_t copy;
    tsr_entry_t *e;
    int dst, src;          /* src -1: zero fill */
    bool src_pinned;       /* the copy was queued: the source is pinned */
    bool deferred;         /* waits for copies still reading the target
                              (stale ones) before its own copy starts */
    bool deferred_once;    /* was deferred (fetch_resume routes it) */
    bool demand;           /* a request waits for it (not a hint, a hop or
                              a write-back) */
    uint64_t version;      /* the entry's version when the fetch started */
    waiter_t *w;
    int nw, capw;
    waiter_t winline[2];
    struct fetch *park_next; /* parked: a hop waiting for room on the host
                                (od.parked, under the host's node lock) */
} fetch_t;

struct tsr_replica {
    void *ptr;
    tsr_entry_t *entry;
    fetch_t *fetch;              /* copy into this replica in flight */
    tsr_evict_item_t ord;        /* node->order, under the node lock */
    int busy;                    /* pins: requests and copies */
    int readers;                 /* of which copies reading it */
    int wbusy;                   /* of which by requests that write it */
    uint16_t node;
    uint8_t state;
    bool alloc;       /* ptr is node memory counted in node->used */
    bool user;        /* ptr is the application's buffer (host) */
    bool prefetched;  /* fetched ahead: kept unless a request needs room */
    bool evicting;    /* a write-back is in flight before freeing */
    bool wont_use;
};

struct tsr_entry {
    pthread_mutex_t lock;
    size_t size;
    uint64_t version;   /* bumped at every write */
    /* tsr__mem_set_next_use's word (TSR_NEXT_USE_NONE), written without
     * the entry lock; nordered: replicas in a node's order (under the
     * entry lock). A setter stores the word then reads nordered, a copy
     * entering an order counts itself then reads the word (both sequentially
     * consistent): one of them sees the other, so no copy keeps a stale
     * word, and an entry held by no ordering node costs its setter no lock. */
    _Atomic uint64_t next_use;
    atomic_int nordered;
    bool zero;          /* never written: every node may zero-fill */
    bool dead;          /* freed by the owner; replicas go when copies end */
    atomic_int refs;    /* the owner + fetches in flight */
    /* tsr__entry_nodes's answer, cached: bit 32 set and the mask below
     * it, or 0 (to compute, under the entry lock). Every change of a
     * replica's state or fetch or of `zero` clears it under the entry
     * lock. Policies ask it for every worker of every task they place: a
     * lock and a walk of the replicas each time was a twentieth of a
     * simulated dmda run. */
    _Atomic uint64_t nodes;
    /* A copy started ahead of need (a prefetch, or its hop) failed with
     * nobody waiting: its message, told to the next request that must
     * fetch e (which fails, as if it had read itself), dropped by a write
     * or a fetch that succeeds. A device error is never swallowed, and
     * whether a task sees it does not hang on who started the read. */
    char *ahead_err;
    int ahead_rc;       /* its status: TSR_EIO or TSR_EDEVICE */
    int nnodes;
    tsr_replica_t rep[];
};

static int nnodes(void) { return tsr__mem_node_count(); }
static tsr_node_t *node(int i) { return tsr__mem_node(i); }

static void seterr(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void seterr(char *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, TSR_MEM_ERR, fmt, ap);
    va_end(ap);
}

static bool valid(const tsr_replica_t *r) { return r->state != ST_I; }

static int count_valid(const tsr_entry_t *e)
{
    int n = 0;
    for (int j = 0; j < e->nnodes; j++)
        n += valid(&e->rep[j]);
    return n;
}

/* e's replicas or `zero` changed: its node mask is to compute again.
 * Entry lock held (or e not yet shared). */
/* The disk generation: moves at every change that could let a disk copy
 * be evicted where none could — a copy of an entry with a disk copy
 * becoming valid or invalid, a disk copy becoming idle or entering or
 * leaving the disk's order — so that an eviction on the disk that found nothing to
 * take is not done again, copy by copy, while the generation stands (the
 * disk, full of copies that exist nowhere else, was asked for room at
 * every write-back the host tried: thousands of copies each time). It may
 * move more often than needed, never less. */
static _Atomic uint64_t disk_gen;

static void disk_changed(void) { atomic_fetch_add(&disk_gen, 1); }

static void nodes_changed(tsr_entry_t *e)
{
    atomic_store_explicit(&e->nodes, 0, memory_order_release);
    int disk = tsr__mem_disk_node();
    if (disk >= 0 && disk < e->nnodes && e->rep[disk].alloc)
        disk_changed();
}

/* When one valid copy is left, it is the modified one (MSI). */
static void relabel(tsr_entry_t *e)
{
    if (count_valid(e) != 1)
        return;
    for (int j = 0; j < e->nnodes; j++)
        if (valid(&e->rep[j]))
            e->rep[j].state = ST_M;
    nodes_changed(e);
}

static void kick(tsr_node_t *n);

/* ---- pins -------------------------------------------------------------- */

static void pin(tsr_replica_t *r)
{
    if (r->busy++ == 0)
        atomic_fetch_add(&node(r->node)->npinned, 1);
}

/* Returns whether the replica became idle. */
static bool unpin(tsr_replica_t *r)
{
    if (--r->busy == 0) {
        atomic_fetch_sub(&node(r->node)->npinned, 1);
        if (r->node == tsr__mem_disk_node())
            disk_changed(); /* (idle: it may be evicted now) */
        return true;
    }
    return false;
}

/* A request's pin; one that writes also keeps other fetches out. */
static void pin_req(tsr_replica_t *r, int mode)
{
    pin(r);
    if (mode & TSR_MEM_W)
        r->wbusy++;
}

/* Returns whether the replica became idle. A write pin dropped on the
 * host may unblock write-backs that other nodes wait for: the caller then
 * kicks them (see kick_all). */
static bool unpin_req(tsr_replica_t *r, int mode, bool *unblocked)
{
    if ((mode & TSR_MEM_W) && --r->wbusy == 0 && r->node == 0)
        *unblocked = true;
    return unpin(r);
}

static void kick_all(void);

/* ---- replica memory ---------------------------------------------------- */

static void used_add(tsr_node_t *n, size_t bytes)
{
    n->used += bytes;
    if (n->used > n->peak)
        n->peak = n->used;
}

/* What an eviction saw besides what it freed (see evict_walk). */
struct evict_result {
    int skipped;  /* copies not looked at: their entry was locked */
    int blocked;  /* dirty copies whose write-back cannot start now */
    int busy;     /* copies in use (not counting `self`'s own pins) */
};
typedef struct evict_result evict_result_t;
static size_t evict_locked(tsr_node_t *n, size_t want, bool demand, struct evict_result *res,
                           const tsr_mem_req_t *self);

/* Why a request's allocation failed for now (node_alloc_evicting's *later):
 * ALLOC_WAIT: memory will come back (write-backs in flight, copies in use
 * that will be released, grants under way): the request waits in the
 * node's queue and is tried again when something is freed. ALLOC_AGAIN:
 * copies could not be looked at (their entries were locked for a moment):
 * look again soon. */
enum { ALLOC_WAIT = 1, ALLOC_AGAIN = 2 };

/* The node's memory for e, or NULL. The directory's byte count can say
 * "fits" where the node's allocator cannot (a GPU's pool holds chunks, and
 * their free ranges may all be too small; the device's memory may be taken
 * by others): then, for a `demand`, idle copies are evicted (least useful
 * first: clean ones freed at once, dirty ones written back to the host)
 * and the allocation tried again until it succeeds or nothing more can be
 * freed at once. With `later` (a request's allocation, `self`; `own`: the
 * bytes of n->reserving that are the caller's), a failure while memory
 * will come back is not final: *later says so (ALLOC_…) and the request
 * waits instead of failing; the request must never block here, since this
 * may run on the engine thread that completes the write-backs. Entry lock
 * held (evict_locked only tries other entries' locks); node lock not held. */
static void *node_alloc_evicting(tsr_node_t *n, tsr_entry_t *e, bool demand,
                                 const tsr_mem_req_t *self, size_t own, int *later, char *err)
{
    void *p = n->ops->alloc(n, e->size);
    int wait = 0;
    char wb[TSR_MEM_ERR] = "";
    while (!p && demand && n->id != 0) {
        evict_result_t ev;
        pthread_mutex_lock(&n->lock);
        size_t freed = evict_locked(n, n->evicting_bytes + e->size, true, &ev, self);
        if (freed == 0 && n->wb_status != 0) {
            /* A write-back from here failed: the room it was to make will
             * not come. */
            snprintf(wb, sizeof wb, "%s", n->wb_err);
            n->wb_status = 0;
        } else if (freed == 0) {
            if (n->evicting_bytes > 0 || ev.busy > 0 || ev.blocked > 0 || n->reserving > own)
                wait = ALLOC_WAIT;
            else if (ev.skipped > 0)
                wait = ALLOC_AGAIN;
        }
        pthread_mutex_unlock(&n->lock);
        if (freed == 0)
            break;
        atomic_fetch_add(&n->alloc_retries, 1);
        p = n->ops->alloc(n, e->size);
    }
    if (!p) {
        const char *why = n->ops->alloc_error ? n->ops->alloc_error(n) : NULL;
        seterr(err, "%s: cannot allocate %zu bytes%s%s%s%s", n->name, e->size,
               why && why[0] ? ": " : "", why ? why : "", wb[0] ? "; a write-back failed: " : "",
               wb);
        if (later)
            *later = wait;
    }
    return p;
}

/* ---- eviction order ------------------------------------------------------ */

/* n->order keeps the node's copies in the order eviction takes them
 * (memory/evict.h), so that an eviction visits from the top and stops once
 * it has freed enough, instead of sorting every copy of the node: a copy
 * is stamped when it is used (least recently used first) or when its
 * contents stop mattering (invalid, won't use: before everything else),
 * and under the window rule it moves when its entry's next use does. A
 * node of unlimited capacity (the host, usually) never evicts: its copies
 * are not ordered at all, and using one costs no lock. */
static bool ordered(const tsr_node_t *n) { return n->capacity != SIZE_MAX; }

/* Node lock held. */
static void order_unlink(tsr_node_t *n, tsr_replica_t *r)
{
    if (r->ord.idx != TSR_EVICT_NOWHERE) {
        if (n->id == tsr__mem_disk_node())
            disk_changed(); /* (n->barren_locked may name it) */
        tsr__evict_remove(&n->order, &r->ord);
        atomic_fetch_sub(&r->entry->nordered, 1);
    }
}

/* Node lock held. Without memory to grow the order, the copy stays out of
 * it: it is never evicted, only freed with its entry or when invalidated. */
static void order_link(tsr_node_t *n, tsr_replica_t *r, bool matters)
{
    if (!ordered(n))
        return;
    atomic_fetch_add(&r->entry->nordered, 1);
    if (n->id == tsr__mem_disk_node())
        disk_changed();
    r->ord.next_use = atomic_load(&r->entry->next_use);
    if (!tsr__evict_insert(&n->order, &r->ord, matters))
        atomic_fetch_sub(&r->entry->nordered, 1);
}

/* r (of node nd) was just used (matters) or no longer matters. Entry lock
 * held, node lock not held. */
static void order_move(int nd, tsr_replica_t *r, bool matters)
{
    tsr_node_t *n = node(nd);
    if (!ordered(n))
        return;
    pthread_mutex_lock(&n->lock);
    if (r->alloc && r->ord.idx != TSR_EVICT_NOWHERE)
        tsr__evict_touch(&n->order, &r->ord, matters);
    pthread_mutex_unlock(&n->lock);
}

/* r (of node nd) was fetched ahead (prefetched: kept unless a request
 * needs room) or is no longer. The order keeps prefetched copies in its
 * kept-aside heap (memory/evict.h), which the evictions that may not take
 * them never visit: the flag and the heap change together, under both
 * locks. A fresh prefetch is also a use (a new stamp). Entry lock held,
 * node lock not held. */
static void order_prefetched(int nd, tsr_replica_t *r, bool prefetched)
{
    tsr_node_t *n = node(nd);
    if (!ordered(n)) {
        r->prefetched = prefetched;
        return;
    }
    pthread_mutex_lock(&n->lock);
    r->prefetched = prefetched;
    if (!prefetched && nd == tsr__mem_disk_node())
        disk_changed();
    if (r->alloc && r->ord.idx != TSR_EVICT_NOWHERE) {
        if (prefetched)
            tsr__evict_touch(&n->order, &r->ord, true);
        /* (a kept heap that cannot grow leaves the copy with the others:
         * the walks check the flag as well) */
        (void)tsr__evict_set_kept(&n->order, &r->ord, prefetched);
    }
    pthread_mutex_unlock(&n->lock);
}

/* Allocate e's replica on node nd. Entry lock held. `reserved`: the bytes
 * are already counted in node->used (and, until the replica is linked, in
 * node->reserving, by the caller); else they are counted here and the
 * allocation fails (no waiting) past the node's capacity. Either way a
 * failure leaves node->used as it was before the reservation. `demand`: a
 * failure of the node's allocator evicts and retries; `self`, `own` and
 * `later`: see node_alloc_evicting (NULL later: every failure is final). */
static int rep_alloc(tsr_entry_t *e, int nd, bool reserved, bool demand,
                     const tsr_mem_req_t *self, size_t own, int *later, char *err)
{
    tsr_node_t *n = node(nd);
    tsr_replica_t *r = &e->rep[nd];
    if (!reserved) {
        pthread_mutex_lock(&n->lock);
        if (n->used + e->size > n->capacity) {
            size_t used = n->used;
            pthread_mutex_unlock(&n->lock);
            atomic_fetch_add(&n->alloc_failures, 1);
            seterr(err, "%s: %zu bytes needed, %zu of %zu in use and nothing "
                   "can be written back", n->name, e->size, used, n->capacity);
            return TSR_ENOMEM;
        }
        used_add(n, e->size);
        n->reserving += e->size; /* counted, not yet in n->order */
        pthread_mutex_unlock(&n->lock);
        own += e->size;
    }
    void *p = node_alloc_evicting(n, e, demand, self, own, later, err);
    pthread_mutex_lock(&n->lock);
    if (!reserved)
        n->reserving -= e->size;
    if (!p) {
        n->used -= e->size;
        pthread_mutex_unlock(&n->lock);
        atomic_fetch_add(&n->alloc_failures, 1);
        return TSR_ENOMEM;
    }
    r->ptr = p;
    r->alloc = true;
    r->state = ST_I;
    nodes_changed(e);
    order_link(n, r, true);
    pthread_mutex_unlock(&n->lock);
    return TSR_OK;
}

/* Free a replica's memory. Entry lock and node lock held. */
static void rep_free_locked(tsr_node_t *n, tsr_replica_t *r, size_t size)
{
    order_unlink(n, r);
    n->used -= size;
    n->ops->free(n, r->ptr, size);
    r->ptr = NULL;
    r->alloc = false;
    r->state = ST_I;
    r->prefetched = r->wont_use = false;
    nodes_changed(r->entry);
}

/* Entry lock held. */
static void rep_free(tsr_entry_t *e, int nd)
{
    tsr_node_t *n = node(nd);
    pthread_mutex_lock(&n->lock);
    rep_free_locked(n, &e->rep[nd], e->size);
    pthread_mutex_unlock(&n->lock);
}

/* An idle, invalid, runtime-owned replica holds memory for nothing. */
static bool rep_freeable(const tsr_replica_t *r)
{
    return r->alloc && r->busy == 0 && !r->fetch && !r->evicting;
}

/* ---- the backing node ---------------------------------------------------- */

/* Where the only valid copy on node nd goes when it is evicted: the host
 * for an accelerator, the disk tier for the host when there is one; -1:
 * nowhere (it stays). */
static int backing(int nd)
{
    int disk = tsr__mem_disk_node();
    if (nd == disk)
        return -1;
    return nd != 0 ? 0 : disk;
}

/* ---- the host's overdraft ------------------------------------------------ */

/* With a disk tier, an accelerator's write-back, and the hop through the
 * host of data going from the disk to an accelerator, may land on the host
 * beyond its capacity (an "overdraft"): the host starts writing its own
 * least useful idle copies to disk at once, and is back under its cap when
 * they land. Without a bound the overdraft grows as long as accelerators
 * evict faster than the disk writes (a simulated 121.6 B GPT-2 on one H200
 * went 120 GiB over a 1.5 TB host). So such a copy of s bytes goes over
 * the cap only while the host stays within OVERDRAFT_TILES × s of it:
 *
 *     used + s <= capacity + OVERDRAFT_TILES × s
 *
 * and the host's peak is at most capacity + OVERDRAFT_TILES × the largest
 * such copy (two: one landing while the disk writes the copy that made
 * room for the previous, so the disk never idles for want of a queued
 * write). Past that, while the host has copies on their way to disk
 * (evicting_bytes > 0), the copy waits (OVERDRAWN):
 *
 * - a write-back is refused; the eviction on the accelerator counts its
 *   copy as blocked (memory that will come back), so the request that
 *   needed the room waits in its node's queue holding nothing, like any
 *   request that finds its node full (all-or-nothing, FIFO); od.blocked
 *   asks the host's next write-back completion to kick every node;
 * - a hop of a request (demand) is parked on od.parked, still the target
 *   replica's fetch, and routed again at the host's next write-back
 *   completion; a hop of a prefetch is dropped (a prefetch never waits).
 *
 * Why this cannot deadlock. A waiting copy waits for one event: the end
 * of one of the host's writes to disk that were in flight when it was
 * refused (checked under the host's node lock, where the flag is set and
 * the fetch parked, and where evict_done takes them: no wake-up is lost).
 * A disk write needs nothing from anyone: it is queued on the disk's
 * engine, which completes it (or fails it: that ends it too) without a
 * lock, a pin or memory from another node, so it ends. Its end
 * (evict_done) kicks every node and resumes the parked hops, and each
 * looks again: the host frees the written copy unless a request pinned it
 * meanwhile (then it is clean, and the next eviction drops it at once);
 * either the copy fits the bound now, or the host evicts again, and either
 * more copies are on their way to disk (wait for those: still a disk
 * write, still bound to end), or none is — every host copy is in use
 * (pinned by a CPU task or a granted request, the source or target of a
 * transfer in flight), being written, prefetched, or the disk is full —
 * and then the copy is not made to wait: it overdraws as before this
 * bound. So a wait never depends on a copy in use, on a CPU worker's
 * request (those wait under the cap in the host's own queue, as before,
 * and hold nothing there), on an accelerator's progress or on another
 * waiting copy: only on disk writes, which always end, so the waits form
 * no cycle. The accelerator request that waits holds nothing; a parked hop
 * holds its granted request's pins, which only that request's task needs.
 * Under a simulation (phantom nodes, virtual time) a disk write in flight
 * is a pending event, so a run whose requests wait here never finds the
 * event queue dry, the condition under which tsr__mem_wait_until and the
 * simulate driver report a deadlock.
 *
 * The exception, where waiting would not be safe: nothing of the host on
 * its way to disk after it tried to evict. The copy then overdraws without
 * a bound, as before: a disk that is full frees nothing, and a host copy
 * in use gives no event to wait for: its release wakes only the host's
 * own queue, and a released copy may be pinned again before an eviction
 * sees it idle, so nothing says when room would come from it. */
#define OVERDRAFT_TILES 2

atomic_uint_fast64_t tsr__mem_overdraft_unbounded;

/* Under the host's node lock. */
static struct {
    bool blocked;      /* a write-back was refused: kick every node */
    fetch_t *parked;   /* requests' hops waiting for room */
} od;

static void evict_done(void *arg, int k, int status, const char *err);
static void fetch_host_ready(void *arg, int k, int status, const char *err);
static void fetch_resume(fetch_t *f);

/* A copy on node nd that no request allocated: the target of a
 * write-back (w: evict_done) or of a hop through the host (w:
 * fetch_host_ready). Nothing waits for room on the disk: it fits now (the
 * disk first drops copies that are also valid elsewhere) or fails. The
 * host with a disk tier overdraws within its bound, or returns OVERDRAWN
 * (see above). Entry lock held. */
static int rep_alloc_unrequested(tsr_entry_t *e, int nd, waiter_t w, char *err)
{
    tsr_node_t *n = node(nd);
    int disk = tsr__mem_disk_node();
    if (nd == disk) {
        pthread_mutex_lock(&n->lock);
        if (n->used + e->size > n->capacity)
            evict_locked(n, n->used + e->size - n->capacity, false, NULL, NULL);
        pthread_mutex_unlock(&n->lock);
        int rc = rep_alloc(e, nd, false, true, NULL, 0, NULL, err);
        if (rc == TSR_ENOMEM) {
            pthread_mutex_lock(&n->lock);
            size_t used = n->used;
            pthread_mutex_unlock(&n->lock);
            seterr(err, "disk full: %zu bytes needed, %zu of %zu in use by copies that "
                   "exist nowhere else", e->size, used, n->capacity);
        }
        return rc;
    }
    if (nd != 0)
        return TSR_EINVAL;
    int rc = rep_alloc(e, 0, false, true, NULL, 0, NULL, err);
    if (rc != TSR_ENOMEM || disk < 0)
        return rc;
    pthread_mutex_lock(&n->lock);
    /* Start the host's own copies toward the disk first: a copy that must
     * wait waits for those. */
    evict_locked(n, n->used + e->size - n->capacity, false, NULL, NULL);
    size_t bound = e->size > (SIZE_MAX - n->capacity) / OVERDRAFT_TILES
                       ? SIZE_MAX
                       : n->capacity + OVERDRAFT_TILES * e->size;
    if (n->used + e->size > bound && n->evicting_bytes > 0) {
        if (w.fn == evict_done) {
            od.blocked = true;
            pthread_mutex_unlock(&n->lock);
            seterr(err, "host: over its capacity while its copies go to disk");
            return OVERDRAWN;
        }
        if (w.fn == fetch_host_ready) {
            /* (f is e's: its demand flag is under e's lock, held) */
            fetch_t *f = w.arg;
            if (f->demand) {
                /* parked under the lock that decided: see above */
                f->park_next = od.parked;
                od.parked = f;
            }
            pthread_mutex_unlock(&n->lock);
            seterr(err, "host: over its capacity while its copies go to disk");
            return OVERDRAWN;
        }
    }
    if (n->used + e->size > bound)
        atomic_fetch_add(&tsr__mem_overdraft_unbounded, 1);
    used_add(n, e->size);
    n->reserving += e->size;
    pthread_mutex_unlock(&n->lock);
    rc = rep_alloc(e, 0, true, true, NULL, 0, NULL, err);
    pthread_mutex_lock(&n->lock);
    n->reserving -= e->size;
    if (rc == TSR_OK && n->used > n->capacity)
        evict_locked(n, n->used - n->capacity, false, NULL, NULL);
    pthread_mutex_unlock(&n->lock);
    return rc;
}

/* ---- entries ----------------------------------------------------------- */

tsr_entry_t *tsr__entry_new(void *host_ptr, size_t size)
{
    int nn = nnodes();
    tsr_entry_t *e = calloc(1, sizeof *e + (size_t)nn * sizeof e->rep[0]);
    if (!e)
        return NULL;
    pthread_mutex_init(&e->lock, NULL);
    e->size = size;
    e->nnodes = nn;
    e->zero = host_ptr == NULL;
    atomic_init(&e->refs, 1);
    atomic_init(&e->next_use, TSR_NEXT_USE_NONE);
    atomic_init(&e->nordered, 0);
    for (int j = 0; j < nn; j++) {
        e->rep[j].entry = e;
        e->rep[j].node = (uint16_t)j;
        e->rep[j].ord.idx = TSR_EVICT_NOWHERE;
    }
    if (host_ptr) {
        e->rep[0].ptr = host_ptr;
        e->rep[0].user = true;
        e->rep[0].state = ST_M;
    }
    nodes_changed(e);
    return e;
}

size_t tsr__entry_size(const tsr_entry_t *e) { return e->size; }

void tsr__entry_hold_for_test(tsr_entry_t *e, bool hold)
{
    if (hold)
        pthread_mutex_lock(&e->lock);
    else
        pthread_mutex_unlock(&e->lock);
}

void tsr__entry_inspect(tsr_entry_t *e, int nd, tsr_replica_info_t *out)
{
    pthread_mutex_lock(&e->lock);
    const tsr_replica_t *R = &e->rep[nd];
    *out = (tsr_replica_info_t){R->state, R->alloc, R->busy, R->fetch != NULL, R->ptr};
    pthread_mutex_unlock(&e->lock);
}

/* The nodes holding e's data or about to (a fetch in flight); every node
 * while it was never written and nothing is valid. */
uint32_t tsr__entry_nodes(tsr_entry_t *e)
{
    uint64_t v = atomic_load_explicit(&e->nodes, memory_order_acquire);
    if (v >> 32)
        return (uint32_t)v;
    uint32_t m = 0;
    pthread_mutex_lock(&e->lock);
    if (e->zero && count_valid(e) == 0) {
        m = e->nnodes >= 32 ? ~0u : (1u << e->nnodes) - 1;
    } else {
        for (int j = 0; j < e->nnodes && j < 32; j++)
            if (valid(&e->rep[j]) || e->rep[j].fetch)
                m |= 1u << j;
    }
    atomic_store_explicit(&e->nodes, (uint64_t)1 << 32 | m, memory_order_release);
    pthread_mutex_unlock(&e->lock);
    return m;
}

/* The last reference went (no lock held): free what is left and let
 * requests waiting on those nodes look again. */
static void entry_destroy(tsr_entry_t *e)
{
    bool kicks[TSR_MAX_NODES] = {false};
    int nn = e->nnodes;
    for (int j = 0; j < nn; j++)
        if (e->rep[j].alloc) {
            rep_free(e, j);
            kicks[j] = true;
        }
    pthread_mutex_destroy(&e->lock);
    free(e->ahead_err);
    free(e);
    for (int j = 0; j < nn; j++)
        if (kicks[j])
            kick(node(j));
}

static void entry_unref(tsr_entry_t *e)
{
    if (atomic_fetch_sub(&e->refs, 1) == 1)
        entry_destroy(e);
}

void tsr__entry_free(tsr_entry_t *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->lock);
    e->dead = true;
    for (int j = 0; j < e->nnodes; j++)
        if (rep_freeable(&e->rep[j]))
            rep_free(e, j);
    pthread_mutex_unlock(&e->lock);
    for (int j = 0; j < e->nnodes; j++)
        kick(node(j));
    entry_unref(e);
}

/* ---- fetches ----------------------------------------------------------- */

static int add_waiter(fetch_t *f, waiter_t w)
{
    if (!w.fn)
        return TSR_OK;
    if (f->nw == f->capw) {
        int cap = f->capw * 2;
        waiter_t *v = f->w == f->winline ? malloc((size_t)cap * sizeof *v)
                                         : realloc(f->w, (size_t)cap * sizeof *v);
        if (!v)
            return TSR_ENOMEM;
        if (f->w == f->winline)
            memcpy(v, f->winline, sizeof f->winline);
        f->w = v;
        f->capw = cap;
    }
    f->w[f->nw++] = w;
    return TSR_OK;
}

static void fetch_copy_done(void *arg, int status);
static void fetch_host_ready(void *arg, int k, int status, const char *err);
static int fetch_start(tsr_entry_t *e, int dst, waiter_t w, bool demand, char *err);
static int fetch_route(fetch_t *f, char *err);
static void fetch_finish(fetch_t *f, int status, const char *err);

/* A deferred fetch whose target no copy reads any more: route it now.
 * (Its data may have become zeros meanwhile: a host target is then filled
 * here, FETCH_FILLED, and the fetch ends at once.) */
static void fetch_resume(fetch_t *f)
{
    tsr_entry_t *e = f->e;
    char err[TSR_MEM_ERR];
    pthread_mutex_lock(&e->lock);
    int rc = fetch_route(f, err);
    if (rc == FETCH_FILLED)
        e->rep[f->dst].state = ST_S;
    if (rc != TSR_OK) {
        e->rep[f->dst].fetch = NULL;
        nodes_changed(e);
    }
    pthread_mutex_unlock(&e->lock);
    if (rc == FETCH_FILLED) {
        fetch_finish(f, TSR_OK, "");
    } else if (rc != TSR_OK) {
        snprintf(f->copy.err, sizeof f->copy.err, "%s", err);
        fetch_finish(f, rc, f->copy.err);
    }
}

/* The source to copy e from onto dst: the host if valid, else a valid
 * replica the copy engines connect to dst directly; -2 when the data must
 * go through the host; -1 when nothing is valid. Entry lock held. */
static int pick_source(tsr_entry_t *e, int dst)
{
    if (dst != 0 && valid(&e->rep[0]))
        return 0;
    int any = -1;
    for (int j = 0; j < e->nnodes; j++) {
        if (j == dst || !valid(&e->rep[j]))
            continue;
        if (dst == 0 || node(dst)->ops->peer(node(dst), node(j)))
            return j;
        any = j;
    }
    return any >= 0 ? -2 : -1;
}

/* Queue f's copy on the engine of the node that is not the host. Entry
 * lock held; the source replica is pinned until the copy ends. */
static int queue_copy(fetch_t *f, char *err)
{
    tsr_entry_t *e = f->e;
    int engine = f->dst != 0 ? f->dst : f->src;
    if (f->src >= 0) {
        pin(&e->rep[f->src]);
        e->rep[f->src].readers++;
    }
    f->src_pinned = f->src >= 0;
    f->copy = (tsr_copy_t){
        .src_node = f->src >= 0 ? f->src : f->dst,
        .dst_node = f->dst,
        .src = f->src >= 0 ? e->rep[f->src].ptr : NULL,
        .dst = e->rep[f->dst].ptr,
        .size = e->size,
        .done = fetch_copy_done,
        .arg = f,
        .t_queued = tsr__mem_now_ns(),
    };
    tsr_node_t *n = node(engine);
    int rc = n->ops->copy(n, &f->copy);
    if (rc != TSR_OK) {
        if (f->src >= 0) {
            e->rep[f->src].readers--;
            unpin(&e->rep[f->src]);
        }
        f->src_pinned = false;
        seterr(err, "%s", f->copy.err[0] ? f->copy.err : "cannot queue a copy");
        return rc;
    }
    return TSR_OK;
}

/* Choose where f copies from, as the data is now, and queue the copy (or
 * the hop into the host first). Zeros for the host need no engine (no
 * copy engine performs a host-only copy): they are filled here and
 * FETCH_FILLED returned, which only a deferred fetch can meet (a request
 * or prefetch fills the host itself; a deferred fetch's data may have been
 * invalidated, zero again, while it waited). Entry lock held. */
static int fetch_route(fetch_t *f, char *err)
{
    tsr_entry_t *e = f->e;
    f->version = e->version;
    if (e->zero) {
        f->src = -1;
        if (f->dst == 0) {
            tsr_node_t *h = node(0);
            if (!f->deferred_once) {
                seterr(err, "internal: a fetch of zeros into the host");
                return TSR_EINVAL;
            }
            if (!h->ops->alloc_zeroed)
                memset(e->rep[0].ptr, 0, e->size);
            atomic_fetch_add(&h->zero_fills, 1);
            return FETCH_FILLED;
        }
        return queue_copy(f, err);
    }
    int src = pick_source(e, f->dst);
    if (src == -1) {
        seterr(err, "no valid copy of a %zu-byte buffer to fetch from", e->size);
        return TSR_EINVAL;
    }
    if (src >= 0 && f->dst != 0 && src == tsr__mem_disk_node() && e->rep[0].fetch) {
        /* The disk reaches dst directly (GPUDirect Storage), but the host
         * is already reading this copy from it: join that read rather
         * than read the drives twice. */
        src = -2;
    }
    if (src >= 0) {
        /* Only a request may read a copy that a task is writing (and no
         * task order allows it): anything else would copy data in flux. */
        if (!f->demand && e->rep[src].wbusy > 0) {
            seterr(err, "the %s copy is being written", node(src)->name);
            return TSR_EBUSY;
        }
        f->src = src;
        return queue_copy(f, err);
    }
    /* Through the host: make the host replica valid first. A request's
     * hop that finds the host overdrawn is parked (od.parked) and routed
     * again by fetch_resume when a host copy reaches the disk. */
    f->src = 0;
    int rc = fetch_start(e, 0, (waiter_t){fetch_host_ready, f, 0}, f->demand, err);
    return rc == OVERDRAWN && f->demand ? TSR_OK : rc;
}

/* Start making e's replica on dst valid (it is allocated); w is told when
 * it is. Entry lock held. The fetch pins its target and holds a reference
 * on the entry. `demand`: the caller pinned the target to use it; any
 * other fetch (write-back, prefetch, a hop through the host) must not land
 * in a replica someone holds, who may be writing it. */
static int fetch_start(tsr_entry_t *e, int dst, waiter_t w, bool demand, char *err)
{
    tsr_replica_t *R = &e->rep[dst];
    if (R->fetch) {
        /* A request joining a hint makes it a demand: it must not give up. */
        R->fetch->demand |= demand;
        return add_waiter(R->fetch, w) == TSR_OK
                   ? TSR_OK
                   : (seterr(err, "out of memory for a fetch waiter"), TSR_ENOMEM);
    }
    if (!demand && R->wbusy > 0) {
        seterr(err, "%s copy is being written", node(dst)->name);
        return TSR_EBUSY;
    }
    if (demand && e->ahead_err) {
        seterr(err, "%s", e->ahead_err);
        free(e->ahead_err);
        e->ahead_err = NULL;
        return e->ahead_rc;
    }
    if (!R->alloc && !R->user) {
        /* Only a write-back (into the host or the disk) or a hop lands
         * without a request having allocated the replica; nothing waits. */
        int rc = rep_alloc_unrequested(e, dst, w, err);
        if (rc != TSR_OK) {
            if (rc == TSR_EINVAL)
                seterr(err, "internal: fetch into an unallocated %s copy", node(dst)->name);
            return rc;
        }
    }
    fetch_t *f = calloc(1, sizeof *f);
    if (!f) {
        seterr(err, "out of memory for a fetch");
        return TSR_ENOMEM;
    }
    f->e = e;
    f->dst = dst;
    f->demand = demand;
    f->version = e->version;
    f->w = f->winline;
    f->capw = 2;
    add_waiter(f, w);
    /* A copy still reading the (invalid) target is stale, but it must end
     * before anything lands there. */
    int rc = R->readers > 0 ? (f->deferred = f->deferred_once = true, TSR_OK)
                            : fetch_route(f, err);
    if (rc != TSR_OK) {
        if (f->w != f->winline)
            free(f->w);
        free(f);
        return rc;
    }
    R->fetch = f;
    nodes_changed(e);
    pin(R);
    atomic_fetch_add(&e->refs, 1);
    atomic_fetch_add(&node(dst)->fetches, 1);
    return TSR_OK;
}

/* End a fetch: drop its pins (a copy that turned out invalid gives its
 * memory back at once), then tell its waiters. A waiter that continues
 * from the target (a hop through the host) pins what it needs itself. */
static void fetch_finish(fetch_t *f, int status, const char *err)
{
    tsr_entry_t *e = f->e;
    pthread_mutex_lock(&e->lock);
    tsr_replica_t *R = &e->rep[f->dst];
    bool kick_dst = unpin(R), kick_src = false;
    fetch_t *resume = NULL;
    if (f->src_pinned) {
        tsr_replica_t *S = &e->rep[f->src];
        if (--S->readers == 0 && S->fetch && S->fetch->deferred) {
            resume = S->fetch;
            resume->deferred = false;
        }
        kick_src = unpin(S);
        if (kick_src && rep_freeable(S) && (e->dead || !valid(S)))
            rep_free(e, f->src);
    }
    if (kick_dst && rep_freeable(R) && (e->dead || !valid(R)) && f->nw == 0)
        rep_free(e, f->dst);
    if (status == TSR_OK) {
        free(e->ahead_err);
        e->ahead_err = NULL;
    } else if ((status == TSR_EIO || status == TSR_EDEVICE) && f->nw == 0 && !e->dead &&
               !e->ahead_err) {
        e->ahead_err = strdup(err && *err ? err : "a copy ahead of need failed");
        e->ahead_rc = status;
    }
    pthread_mutex_unlock(&e->lock);
    if (resume)
        fetch_resume(resume);
    for (int i = 0; i < f->nw; i++)
        f->w[i].fn(f->w[i].arg, f->w[i].k, status, err);
    if (kick_dst)
        kick(node(f->dst));
    if (kick_src)
        kick(node(f->src));
    if (f->w != f->winline)
        free(f->w);
    free(f);
    entry_unref(e);
}

/* Engine thread: the copy into f's replica ended. */
static void fetch_copy_done(void *arg, int status)
{
    fetch_t *f = arg;
    tsr_entry_t *e = f->e;
    pthread_mutex_lock(&e->lock);
    tsr_replica_t *R = &e->rep[f->dst];
    /* A write since the start makes what was copied stale. */
    bool src_ok = f->src < 0 ? e->zero : valid(&e->rep[f->src]);
    if (status == TSR_OK && f->version == e->version && src_ok && !e->dead) {
        R->state = ST_S;
        if (f->src >= 0 && e->rep[f->src].state == ST_M)
            e->rep[f->src].state = ST_S;
    } else if (status == TSR_OK) {
        status = FETCH_STALE;
    }
    R->fetch = NULL;
    nodes_changed(e);
    pthread_mutex_unlock(&e->lock);
    fetch_finish(f, status, f->copy.err);
}

/* The host replica of a two-hop fetch is valid (or failed): queue hop 2,
 * from wherever the data is now (if what reached the host is stale, that
 * may be another hop). */
static void fetch_host_ready(void *arg, int k, int status, const char *err)
{
    (void)k;
    fetch_t *f = arg;
    tsr_entry_t *e = f->e;
    char msg[TSR_MEM_ERR];
    pthread_mutex_lock(&e->lock);
    if (status == TSR_OK || status == FETCH_STALE) {
        status = fetch_route(f, msg);
        err = msg;
    }
    if (status != TSR_OK) {
        e->rep[f->dst].fetch = NULL;
        nodes_changed(e);
    }
    pthread_mutex_unlock(&e->lock);
    if (status != TSR_OK) {
        if (err != f->copy.err)
            snprintf(f->copy.err, sizeof f->copy.err, "%s", err);
        fetch_finish(f, status, f->copy.err);
    }
}

/* ---- eviction ---------------------------------------------------------- */

static void evict_done(void *arg, int k, int status, const char *err);

static bool req_has(const tsr_mem_req_t *r, const tsr_entry_t *e)
{
    for (int k = 0; r && k < r->n; k++)
        if (r->e[k] == e && r->pinned[k])
            return true;
    return false;
}

/* Free at least `want` bytes of node n, now or when write-backs end.
 * Node lock held. Order: invalid copies, copies marked wont-use, then
 * least recently used; copies prefetched for queued work only for a
 * `demand` (a granted request would otherwise wait forever). Returns the
 * bytes freed at once. `res` (optional): what else it saw, for a caller
 * deciding whether to wait or fail; `self`: the request it evicts for.
 * `bounded`: a prefetch under the window rule, which may only take copies
 * whose next use is later than `later_than` (the prefetched entry's): it
 * then never evicts what will be needed before what it brings (Belady).
 * Copies whose contents no longer matter go regardless. */
#define TSR_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* n->barren holds (the generation checked by the caller): whether the
 * copies the barren walk could not look at would still give nothing to a
 * walk — each still locked (skipped again), or not one that pass 0 of a
 * walk without backing takes (idle, not prefetched, its contents valid
 * elsewhere or not mattering). Node lock held. */
static bool barren_still(tsr_node_t *n)
{
    for (int i = 0; i < n->nbarren_locked; i++) {
        tsr_replica_t *r = n->barren_locked[i];
        tsr_entry_t *e = r->entry;
        if (pthread_mutex_trylock(&e->lock) != 0)
            continue;
        bool idle = r->alloc && r->busy == 0 && !r->fetch && !r->evicting && !e->dead;
        bool takes = idle && !r->prefetched && (!valid(r) || e->zero || count_valid(e) > 1);
        pthread_mutex_unlock(&e->lock);
        if (takes)
            return false;
    }
    return true;
}

static size_t evict_walk(tsr_node_t *n, size_t want, bool demand, struct evict_result *res,
                         const tsr_mem_req_t *self, bool bounded, uint64_t later_than)
{
    evict_result_t dummy;
    if (!res)
        res = &dummy;
    res->skipped = res->blocked = res->busy = 0;
    size_t freed = 0, pending = n->evicting_bytes;
    /* The smallest write-back the host refused as overdrawn in this walk:
     * one as large that needs a host copy allocated is refused too (the
     * host's state is what it was a moment ago), so it is counted blocked
     * without asking the host again — a walk over a full accelerator would
     * otherwise ask, and make the host evict, for every dirty copy it
     * holds. */
    size_t overdrawn = SIZE_MAX;
    /* Likewise the smallest write-back the disk refused as full in this
     * walk (the host's walk; a disk copy to allocate): the disk has found
     * nothing to evict, and nothing this walk does gives it room or a copy
     * to evict (it frees host copies, which makes disk copies the only
     * ones, and starts write-backs, which take disk room), so one as large
     * is refused too, with the same counts and message, without asking the
     * disk to look at every copy it holds again. */
    int disk = tsr__mem_disk_node();
    size_t disk_full = SIZE_MAX;
    /* The last such refusal's message, written into n->wb_err once the
     * walk is over (nothing reads it meanwhile), not at each refusal. */
    bool full_msg = false;
    size_t full_size = 0, full_used = 0;
    bounded = bounded && n->order.rule == TSR_MEM_EVICT_WINDOW;
    /* The disk tier (no backing: its only copies stay) found nothing to
     * take last time, and nothing that could change that has happened
     * since (disk_gen): this walk would look at every copy again and take
     * none. Walks that count what they see (res) or are bounded are always
     * done. */
    bool memo = res == &dummy && !demand && !bounded && n->id == tsr__mem_disk_node() &&
                backing(n->id) < 0;
    uint64_t gen = memo ? atomic_load(&disk_gen) : 0;
    if (memo && n->barren && n->barren_gen == gen && barren_still(n))
        return 0;
    int nlocked = 0; /* copies skipped, locked (memo: into n->barren_locked) */
    /* n->order visits in eviction order: pass 0 takes every idle copy but
     * those prefetched for queued work, pass 1 (a demand only: a granted
     * request would otherwise wait forever) every idle copy, those too. A
     * copy freed changes the order: the visit starts again from the top
     * (what it skipped there is little: copies in use are the recently
     * used or soon needed ones, at the bottom).
     * Entry locks are let go between the passes, so a copy may change
     * meanwhile: a prefetched copy idle in pass 0 (not taken, not counted)
     * may be locked for a moment, pinned or fetched into by pass 1. Both
     * passes therefore count what they cannot take (`res`), and pass 1
     * takes whatever is idle by then: a copy neither taken nor counted
     * would make a waiting request think nothing can ever be freed (the
     * "nothing can be evicted" failure of runtime_stress under TSan).
     * Pass 0 does not even look at the prefetched copies (the order keeps
     * them aside): what it would have counted of them, pass 1 counts, and
     * the callers read `res` only where pass 1 ran (a pass 0 that freed or
     * started enough makes its request fit, or wait for the write-backs,
     * whatever `res` says). */
    tsr_evict_visit_t vis = {0};
    bool exhausted = false; /* a pass saw every copy */
    size_t pending0 = pending;
    for (int pass = 0; pass < (demand ? 2 : 1) && freed + pending < want; pass++) {
        if (pass == 1 && tsr__mem_evict_test_hook)
            tsr__mem_evict_test_hook(n, 1);
        /* (pass 0 never looks at the prefetched copies: the order keeps
         * them aside) */
        if (pass == 0)
            tsr__evict_visit_start_unkept(&n->order, &vis);
        else
            tsr__evict_visit_start(&n->order, &vis);
        tsr_evict_item_t *it = NULL;
        while (freed + pending < want && (it = tsr__evict_visit_next(&n->order, &vis))) {
            tsr_replica_t *r = (tsr_replica_t *)((char *)it - offsetof(tsr_replica_t, ord));
            if (bounded && it->tier == 1 && it->next_use <= later_than)
                break; /* every copy from here on is needed as soon */
            tsr_entry_t *e = r->entry;
            if (pthread_mutex_trylock(&e->lock) != 0) {
                res->skipped++;
                if (memo && nlocked < (int)TSR_ARRAY_LEN(n->barren_locked))
                    n->barren_locked[nlocked] = r;
                nlocked++;
                continue;
            }
            bool idle = r->alloc && r->busy == 0 && !r->fetch && !r->evicting && !e->dead;
            if (!idle || (pass == 0 && r->prefetched)) {
                /* (a dead entry's copy goes with its last copy in flight,
                 * or its entry: both kick the node) */
                if (!idle && (r->fetch || r->evicting || e->dead ||
                              r->busy > (req_has(self, e) ? 1 : 0)))
                    res->busy++;
                pthread_mutex_unlock(&e->lock);
                continue;
            }
            bool clean = !valid(r) || e->zero || count_valid(e) > 1;
            if (clean) {
                bool was_valid = valid(r);
                rep_free_locked(n, r, e->size);
                tsr__evict_visit_removed(&n->order, &vis);
                freed += e->size;
                atomic_fetch_add(was_valid ? &n->evictions : &n->dropped, 1);
                relabel(e);
            } else if (backing(n->id) == 0 && e->size >= overdrawn && !e->rep[0].alloc &&
                       !e->rep[0].user && !e->rep[0].fetch) {
                res->blocked++; /* (a host copy to allocate: refused too) */
            } else if (disk >= 0 && backing(n->id) == disk && e->size >= disk_full &&
                       !e->rep[disk].alloc && !e->rep[disk].user && !e->rep[disk].fetch &&
                       e->rep[disk].wbusy == 0) {
                /* (fetch_start's failure, as it would be: rep_alloc's count,
                 * rep_alloc_unrequested's message) */
                tsr_node_t *dn = node(disk);
                atomic_fetch_add(&dn->alloc_failures, 1);
                pthread_mutex_lock(&dn->lock);
                size_t used = dn->used;
                pthread_mutex_unlock(&dn->lock);
                if (n->wb_status == 0) {
                    full_msg = true;
                    full_size = e->size;
                    full_used = used;
                }
            } else if (backing(n->id) >= 0) {
                /* The only valid copy: write it back to the backing node
                 * (an accelerator's to the host, the host's to disk). */
                char err[TSR_MEM_ERR];
                r->evicting = true;
                pin(r);
                /* (a refusal as full counts one more failure there) */
                uint64_t failures = disk >= 0 && backing(n->id) == disk
                                        ? atomic_load(&node(disk)->alloc_failures)
                                        : 0;
                int rc = fetch_start(e, backing(n->id), (waiter_t){evict_done, r, 0}, false,
                                     err);
                if (rc == TSR_OK) {
                    n->evicting_bytes += e->size;
                    pending += e->size;
                    atomic_fetch_add(&n->writebacks, 1);
                } else {
                    /* The host copy is being written (the copy here is
                     * about to be stale), or the backing node is full:
                     * why, for a request that finds nothing to evict. */
                    /* (OVERDRAWN: the host's copies on their way to
                     * disk will make room; their end kicks this node) */
                    res->blocked += rc == TSR_EBUSY || rc == OVERDRAWN;
                    if (rc == OVERDRAWN && e->size < overdrawn)
                        overdrawn = e->size;
                    if (rc == TSR_ENOMEM && disk >= 0 && backing(n->id) == disk &&
                        atomic_load(&node(disk)->alloc_failures) != failures &&
                        !e->rep[disk].alloc && e->size < disk_full)
                        disk_full = e->size;
                    if (rc != TSR_EBUSY && rc != OVERDRAWN && n->wb_status == 0) {
                        snprintf(n->wb_err, sizeof n->wb_err, "%s", err);
                        full_msg = false;
                    }
                    r->evicting = false;
                    unpin(r);
                }
            }
            pthread_mutex_unlock(&e->lock);
        }
        res->skipped += vis.truncated;
        exhausted = !it && freed + pending < want && !vis.truncated;
    }
    tsr__evict_visit_end(&vis);
    if (full_msg)
        seterr(n->wb_err, "disk full: %zu bytes needed, %zu of %zu in use by copies that "
               "exist nowhere else", full_size, full_used, node(disk)->capacity);
    if (memo && exhausted) {
        n->barren = freed == 0 && pending == pending0 && res->skipped == nlocked &&
                    nlocked <= (int)TSR_ARRAY_LEN(n->barren_locked) &&
                    atomic_load(&disk_gen) == gen;
        n->nbarren_locked = nlocked;
        n->barren_gen = gen;
    }
    if (demand && tsr__mem_evict_test_hook)
        tsr__mem_evict_test_hook(n, 2);
    return freed;
}

void (*tsr__mem_evict_test_hook)(tsr_node_t *n, int point);

static size_t evict_locked(tsr_node_t *n, size_t want, bool demand, struct evict_result *res,
                           const tsr_mem_req_t *self)
{
    return evict_walk(n, want, demand, res, self, false, 0);
}

/* A write-back for an eviction ended: free the replica unless it was
 * pinned again meanwhile or the write-back failed. */
static void evict_done(void *arg, int k, int status, const char *err)
{
    (void)k;
    if (status == FETCH_STALE)
        status = TSR_OK; /* written elsewhere: this copy is invalid, free it */
    tsr_replica_t *r = arg;
    tsr_entry_t *e = r->entry;
    tsr_node_t *n = node(r->node);
    pthread_mutex_lock(&e->lock);
    pthread_mutex_lock(&n->lock);
    if ((status == TSR_EIO || status == TSR_EDEVICE) && !e->dead) {
        /* The copy engine failed (not a write-back that gave way to a
         * writer): the copy here stays the valid one, and the room it was
         * to make will not come; the next request that needs room fails
         * with why. */
        n->wb_status = status;
        snprintf(n->wb_err, sizeof n->wb_err, "%s", err && err[0] ? err : "write-back failed");
    }
    n->evicting_bytes -= e->size;
    r->evicting = false;
    unpin(r);
    /* (a freed entry's copy goes now: nothing will read it, and a request
     * may be waiting for exactly this room) */
    if (status == TSR_OK && r->alloc && r->busy == 0 && !r->fetch &&
        (e->dead || !valid(r) || count_valid(e) > 1)) {
        rep_free_locked(n, r, e->size);
        atomic_fetch_add(&n->evictions, 1);
        relabel(e);
    }
    /* A host copy reached the disk (or failed to): what waited for the
     * host's overdraft looks again (see rep_alloc_unrequested). */
    bool blocked = false;
    fetch_t *parked = NULL;
    if (n->id == 0) {
        blocked = od.blocked;
        parked = od.parked;
        od.blocked = false;
        od.parked = NULL;
    }
    pthread_mutex_unlock(&n->lock);
    pthread_mutex_unlock(&e->lock);
    kick(n);
    if (blocked)
        kick_all();
    /* (oldest first is not promised: each is routed again, and parks
     * again while the host is still overdrawn) */
    while (parked) {
        fetch_t *f = parked;
        parked = f->park_next;
        f->park_next = NULL;
        fetch_resume(f);
    }
}

/* ---- requests ---------------------------------------------------------- */

static void req_fail(tsr_mem_req_t *r, int status, const char *err)
{
    int zero = 0;
    if (atomic_compare_exchange_strong(&r->status, &zero, status))
        snprintf(r->err, sizeof r->err, "%s", err ? err : "");
}

/* Drop r's pins. `wake`: let waiting requests of the node look again (not
 * when r itself is the head that failed to fit: its pins do not help it). */
static void unpin_all(tsr_mem_req_t *r, bool wake)
{
    bool idle = false, unblocked = false;
    for (int k = 0; k < r->n; k++) {
        if (!r->pinned[k])
            continue;
        tsr_entry_t *e = r->e[k];
        pthread_mutex_lock(&e->lock);
        idle |= unpin_req(&e->rep[r->node], r->mode[k], &unblocked);
        pthread_mutex_unlock(&e->lock);
        r->pinned[k] = false;
    }
    if (wake && idle)
        kick(node(r->node));
    if (unblocked)
        kick_all();
}

/* Drop the guard (or a copy's count) of r. When it was the last: a failed
 * request lets go of its pins; `call_done` tells the owner. Returns 1
 * (complete and valid), 0 (copies still outstanding) or the error. */
static int req_settle(tsr_mem_req_t *r, bool call_done)
{
    if (atomic_fetch_sub(&r->pending, 1) != 1)
        return 0;
    int st = atomic_load(&r->status);
    if (st != TSR_OK)
        unpin_all(r, true);
    else
        atomic_fetch_add(&node(r->node)->granted, 1);
    if (call_done)
        r->done(r);
    return st != TSR_OK ? st : 1;
}

static void req_fetch_done(void *arg, int k, int status, const char *err)
{
    tsr_mem_req_t *r = arg;
    if (status == FETCH_STALE) {
        /* The fetch we joined copied stale data: fetch the current one.
         * A writer only waited for the copy to land. */
        tsr_entry_t *e = r->e[k];
        char msg[TSR_MEM_ERR];
        status = TSR_OK;
        pthread_mutex_lock(&e->lock);
        tsr_replica_t *R = &e->rep[r->node];
        if ((r->mode[k] & TSR_MEM_R) && !valid(R)) {
            status = fetch_start(e, r->node, (waiter_t){req_fetch_done, r, k}, true, msg);
            err = msg;
            if (status == TSR_OK) {
                pthread_mutex_unlock(&e->lock);
                return; /* still pending, on the new fetch */
            }
        }
        pthread_mutex_unlock(&e->lock);
    }
    if (status != TSR_OK)
        req_fail(r, status, err);
    req_settle(r, true);
}

/* A copy that read a replica r writes has ended (whatever became of it). */
static void req_reader_done(void *arg, int k, int status, const char *err)
{
    (void)k;
    (void)status;
    (void)err;
    req_settle(arg, true);
}

/* Phase 1: pin the replicas already on the node (so that nothing evicts
 * them while we reserve the rest). Returns the bytes still missing. */
static size_t pin_present(tsr_mem_req_t *r)
{
    size_t need = 0;
    for (int k = 0; k < r->n; k++) {
        tsr_entry_t *e = r->e[k];
        pthread_mutex_lock(&e->lock);
        tsr_replica_t *R = &e->rep[r->node];
        if (R->alloc || R->user) {
            pin_req(R, r->mode[k]);
            r->pinned[k] = true;
        } else {
            need += e->size;
        }
        pthread_mutex_unlock(&e->lock);
    }
    return need;
}

/* Phase 2a: allocate the missing replicas from `*reserved` bytes (what is
 * used is taken off) and pin them; mine[k]: entry k's replica was
 * allocated here. Returns TSR_OK, ALLOC_WAIT or ALLOC_AGAIN (the node's
 * allocator failed, but memory will come back: the caller gives everything
 * back and waits), or a TSR_E… code with a message in err. Pins stay
 * flagged in r->pinned either way. */
static int alloc_missing(tsr_mem_req_t *r, size_t *reserved, size_t own, bool *mine, char *err)
{
    int nd = r->node;
    for (int k = 0; k < r->n; k++) {
        if (r->pinned[k])
            continue;
        tsr_entry_t *e = r->e[k];
        int rc = TSR_OK, later = 0;
        pthread_mutex_lock(&e->lock);
        tsr_replica_t *R = &e->rep[nd];
        if (!R->alloc && !R->user) {
            /* Someone else may have allocated it meanwhile: then the
             * reservation is returned by the caller. */
            bool res = *reserved >= e->size;
            rc = rep_alloc(e, nd, res, true, r, own, &later, err);
            if (res)
                *reserved -= e->size; /* used, or given back by rep_alloc */
            mine[k] = rc == TSR_OK;
        }
        if (rc == TSR_OK) {
            pin_req(R, r->mode[k]);
            r->pinned[k] = true;
        }
        pthread_mutex_unlock(&e->lock);
        if (rc != TSR_OK)
            return later ? later : rc;
    }
    return TSR_OK;
}

/* Undo phase 2a (and pin_present): drop r's pins and free the replicas it
 * allocated that nothing else took meanwhile. `wake`: let waiting requests
 * of the node look again if that freed anything. */
static void give_back(tsr_mem_req_t *r, const bool *mine, bool wake)
{
    int nd = r->node;
    bool freed = false, unblocked = false;
    for (int k = 0; k < r->n; k++) {
        if (!r->pinned[k])
            continue;
        tsr_entry_t *e = r->e[k];
        pthread_mutex_lock(&e->lock);
        tsr_replica_t *R = &e->rep[nd];
        bool idle = unpin_req(R, r->mode[k], &unblocked);
        if (mine[k] && rep_freeable(R) && !valid(R)) {
            rep_free(e, nd);
            freed = true;
        }
        freed |= idle;
        pthread_mutex_unlock(&e->lock);
        r->pinned[k] = false;
    }
    if (wake && freed)
        kick(node(nd));
    if (unblocked)
        kick_all();
}

/* Phase 2b: every entry is allocated and pinned: start every fetch. Errors
 * go to r->status; pins stay flagged in r->pinned for req_settle to drop. */
static void start_fetches(tsr_mem_req_t *r)
{
    int nd = r->node;
    tsr_node_t *n = node(nd);
    char err[TSR_MEM_ERR] = "";
    for (int k = 0; k < r->n; k++) {
        tsr_entry_t *e = r->e[k];
        int rc = TSR_OK;
        pthread_mutex_lock(&e->lock);
        tsr_replica_t *R = &e->rep[nd];
        if (R->prefetched)
            order_prefetched(nd, R, false);
        R->wont_use = false;
        r->ptr[k] = R->ptr;
        /* A copy into the replica in flight must land before the task
         * touches it, whatever the mode; a writer also waits for the
         * copies reading it (a write-back it cut short, a prefetch for
         * a task another worker took): what they copy is stale, but
         * nothing may write under them. */
        bool need_fetch = R->fetch || ((r->mode[k] & TSR_MEM_R) && !valid(R));
        for (int j = 0; rc == TSR_OK && (r->mode[k] & TSR_MEM_W) && R->readers > 0 &&
                        j < e->nnodes; j++) {
            fetch_t *F = e->rep[j].fetch;
            if (j == nd || !F || !F->src_pinned || F->src != nd)
                continue;
            atomic_fetch_add(&r->pending, 1);
            rc = add_waiter(F, (waiter_t){req_reader_done, r, k});
            if (rc != TSR_OK) {
                atomic_fetch_sub(&r->pending, 1);
                seterr(err, "out of memory for a fetch waiter");
            }
        }
        if (rc == TSR_OK && need_fetch && !R->fetch && e->zero && nd == 0) {
            if (!n->ops->alloc_zeroed) /* zeros on the host: no engine */
                memset(R->ptr, 0, e->size);
            R->state = ST_S;
            nodes_changed(e);
            atomic_fetch_add(&n->zero_fills, 1);
            need_fetch = false;
        }
        if (rc == TSR_OK && need_fetch) {
            atomic_fetch_add(&r->pending, 1);
            rc = fetch_start(e, nd, (waiter_t){req_fetch_done, r, k}, true, err);
            if (rc != TSR_OK)
                atomic_fetch_sub(&r->pending, 1);
        }
        pthread_mutex_unlock(&e->lock);
        if (rc != TSR_OK) {
            req_fail(r, rc, err);
            break;
        }
    }
}

static void wait_push(tsr_node_t *n, tsr_mem_req_t *r)
{
    r->wnext = NULL;
    if (n->wait_tail)
        n->wait_tail->wnext = r;
    else
        n->wait_head = r;
    n->wait_tail = r;
    atomic_fetch_add(&n->nwaiting, 1);
    atomic_fetch_add(&n->waits, 1);
}

static void wait_pop(tsr_node_t *n)
{
    tsr_mem_req_t *r = n->wait_head;
    n->wait_head = r->wnext;
    if (!n->wait_head)
        n->wait_tail = NULL;
    atomic_fetch_sub(&n->nwaiting, 1);
}

/* Reserve r's memory (evicting as needed), pin and start the fetches.
 * Returns 1 when granted (errors of the fetches are in r->status), 0 when
 * r waits in the node's queue holding nothing, or an error (nothing held).
 * A request from the queue is its head (only the kicking thread touches
 * it), and leaves the queue unless it waits on. */
static int try_grant(tsr_mem_req_t *r, bool from_queue)
{
    tsr_node_t *n = node(r->node);
    size_t need = pin_present(r);
    pthread_mutex_lock(&n->lock);
    bool my_turn = from_queue || !n->wait_head;
    bool fits = n->used + need <= n->capacity;
    evict_result_t ev = {0, 0, 0};
    if (my_turn && !fits && n->wb_status != 0) {
        /* A write-back that was to make room failed: this request, which
         * needs room, reports it (the data stays valid where it was). */
        int st = n->wb_status;
        n->wb_status = 0;
        if (from_queue)
            wait_pop(n);
        seterr(r->err, "%s: cannot make room: %s", n->name, n->wb_err);
        atomic_store(&r->status, st);
        pthread_mutex_unlock(&n->lock);
        unpin_all(r, false);
        return st;
    }
    if (my_turn && !fits) {
        n->wb_err[0] = 0;
        evict_locked(n, n->used + need - n->capacity, true, &ev, r);
        fits = n->used + need <= n->capacity;
    }
    if (my_turn && fits) {
        /* The head stays in the queue until it is granted: a kick meanwhile
         * (room freed while we allocate) makes the kicker look again. */
        used_add(n, need);
        n->reserving += need;
        pthread_mutex_unlock(&n->lock);
        size_t reserved = need;
        bool mine[TSR_MEM_MAX_BUFFERS] = {false};
        char err[TSR_MEM_ERR] = "";
        int rc = alloc_missing(r, &reserved, need, mine, err);
        if (rc != TSR_OK)
            give_back(r, mine, !from_queue);
        pthread_mutex_lock(&n->lock);
        n->used -= reserved; /* replicas someone else allocated meanwhile */
        n->reserving -= need;
        if (rc == ALLOC_WAIT || rc == ALLOC_AGAIN) {
            /* The node's allocator failed while memory will come back
             * (write-backs of dirty copies under way, copies in use): wait
             * for it holding nothing, first in line, instead of failing.
             * Never block here: this may be the engine thread that must
             * complete those write-backs. */
            if (!from_queue)
                wait_push(n, r);
            pthread_mutex_unlock(&n->lock);
            if (!from_queue) {
                kick(n); /* room made meanwhile is not missed */
                return 0;
            }
            return rc == ALLOC_AGAIN ? 2 : 0;
        }
        if (from_queue)
            wait_pop(n);
        pthread_mutex_unlock(&n->lock);
        if (rc != TSR_OK)
            req_fail(r, rc, err);
        else
            start_fetches(r);
        return 1;
    }
    if (from_queue) {
        /* Every copy looked at, none in use but by us, no write-back or
         * grant under way: no release or eviction will ever make room. (A
         * copy in use when we looked will kick us when it is released.) A
         * copy we could not look at (its entry was locked for a moment)
         * means: look again soon. */
        bool idle = ev.busy == 0 && n->evicting_bytes == 0 && n->reserving == 0 &&
                    ev.blocked == 0;
        bool hopeless = idle && ev.skipped == 0;
        if (idle && ev.skipped) {
            pthread_mutex_unlock(&n->lock);
            unpin_all(r, false);
            return 2;
        }
        if (hopeless) {
            wait_pop(n);
            seterr(r->err, "%s: %zu bytes needed, %zu of %zu in use, nothing "
                   "can be evicted%s%s", n->name, need, n->used, n->capacity,
                   n->wb_err[0] ? ": " : "", n->wb_err);
            atomic_store(&r->status, TSR_ENOMEM);
        }
        pthread_mutex_unlock(&n->lock);
        unpin_all(r, false);
        return hopeless ? TSR_ENOMEM : 0;
    }
    /* Wait in line, holding nothing: drop the pins before the request is
     * visible to a kicker, then kick, so that room made meanwhile (or an
     * empty line) is not missed. */
    pthread_mutex_unlock(&n->lock);
    unpin_all(r, false);
    pthread_mutex_lock(&n->lock);
    wait_push(n, r);
    pthread_mutex_unlock(&n->lock);
    kick(n);
    return 0;
}

/* Grant waiting requests of n, in order, while memory allows. One thread
 * at a time; another caller meanwhile asks it to look again. */
static void kick(tsr_node_t *n)
{
    if (atomic_load(&n->nwaiting) == 0)
        return;
    pthread_mutex_lock(&n->lock);
    if (n->kicking) {
        n->kick_again = true;
        pthread_mutex_unlock(&n->lock);
        return;
    }
    n->kicking = true;
    for (;;) {
        tsr_mem_req_t *r = n->wait_head;
        if (!r)
            break;
        n->kick_again = false;
        pthread_mutex_unlock(&n->lock);
        int rc = try_grant(r, true);
        if (rc == 2)
            sched_yield(); /* an entry was locked for a moment: look again */
        else if (rc != 0)
            req_settle(r, true); /* granted, or failed holding nothing */
        pthread_mutex_lock(&n->lock);
        if (rc == 0 && !n->kick_again)
            break;
    }
    n->kicking = false;
    pthread_mutex_unlock(&n->lock);
}

int tsr__mem_acquire(tsr_mem_req_t *r)
{
    tsr_node_t *n = node(r->node);
    r->err[0] = 0;
    /* the request is this thread's until an entry's lock publishes it */
    atomic_store_explicit(&r->status, TSR_OK, memory_order_relaxed);
    atomic_store_explicit(&r->pending, 1, memory_order_relaxed);
    r->published = false;
    size_t total = 0;
    for (int k = 0; k < r->n; k++) {
        /* saturating: a sum past SIZE_MAX fits no node either */
        size_t sz = r->e[k]->size;
        total = sz > SIZE_MAX - total ? SIZE_MAX : total + sz;
        r->pinned[k] = false;
        r->ptr[k] = NULL;
    }
    if (total > n->capacity) {
        seterr(r->err, "buffers of %zu bytes do not fit in %s, whose capacity is %zu "
               "bytes", total, n->name, n->capacity);
        atomic_store(&r->status, TSR_ENOMEM);
        return TSR_ENOMEM;
    }
    int rc = try_grant(r, false);
    if (rc <= 0)
        return rc; /* waiting (done() comes later), or failed holding nothing */
    return req_settle(r, false);
}

/* Entry e was written on node nd: the version moves and nd's replica is
 * the only valid one (others dropped when idle). Entry lock held. */
static void publish_write(tsr_entry_t *e, int nd, bool *kick_node)
{
    e->version++;
    e->zero = false;
    free(e->ahead_err); /* what failed to read is overwritten */
    e->ahead_err = NULL;
    for (int j = 0; j < e->nnodes; j++) {
        if (j == nd)
            continue;
        tsr_replica_t *o = &e->rep[j];
        o->state = ST_I;
        if (rep_freeable(o)) {
            rep_free(e, j);
            kick_node[j] = true;
        } else if (o->alloc) {
            order_move(j, o, false); /* stale: the first to go */
        }
    }
    e->rep[nd].state = ST_M;
    nodes_changed(e);
}

void tsr__mem_publish(tsr_mem_req_t *r)
{
    int nd = r->node;
    bool kick_node[TSR_MAX_NODES] = {false};
    for (int k = 0; k < r->n; k++) {
        if (!(r->mode[k] & TSR_MEM_W))
            continue;
        tsr_entry_t *e = r->e[k];
        pthread_mutex_lock(&e->lock);
        publish_write(e, nd, kick_node);
        pthread_mutex_unlock(&e->lock);
    }
    r->published = true;
    for (int j = 0; j < nnodes(); j++)
        if (kick_node[j])
            kick(node(j));
}

void tsr__mem_release(tsr_mem_req_t *r)
{
    int nd = r->node;
    bool kick_node[TSR_MAX_NODES] = {false};
    bool unblocked = false;
    for (int k = 0; k < r->n; k++) {
        tsr_entry_t *e = r->e[k];
        pthread_mutex_lock(&e->lock);
        tsr_replica_t *R = &e->rep[nd];
        if ((r->mode[k] & TSR_MEM_W) && !r->published)
            publish_write(e, nd, kick_node);
        order_move(nd, R, true);
        if (unpin_req(R, r->mode[k], &unblocked))
            kick_node[nd] = true;
        pthread_mutex_unlock(&e->lock);
    }
    r->published = false;
    for (int j = 0; j < nnodes(); j++)
        if (kick_node[j] || unblocked)
            kick(node(j));
}

static void kick_all(void)
{
    for (int j = 1; j < nnodes(); j++)
        kick(node(j));
}

typedef struct sync_wait {
    pthread_mutex_t m;
    pthread_cond_t cv;
    bool done;
} sync_wait_t;

static void sync_done(tsr_mem_req_t *r)
{
    sync_wait_t *s = r->arg;
    pthread_mutex_lock(&s->m);
    s->done = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->m);
}

static bool sync_is_done(void *arg) { return ((sync_wait_t *)arg)->done; }

/* The done() of a request abandoned by a simulation that cannot complete it. */
static void sync_abandoned(tsr_mem_req_t *r) { (void)r; }

/* Waits with tsr__mem_wait_until: under the virtual clock, this thread
 * runs the events that complete the request. */
int tsr__mem_acquire_sync(tsr_mem_req_t *r)
{
    sync_wait_t s = {.m = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    r->done = sync_done;
    r->arg = &s;
    int rc = tsr__mem_acquire(r);
    if (rc == 0) {
        if (!tsr__mem_wait_until(sync_is_done, &s, &s.m, &s.cv)) {
            /* No event left can complete it: the request stays queued,
             * and its done() must not touch this frame any more. */
            r->done = sync_abandoned;
            r->arg = NULL;
            seterr(r->err, "%s: the simulation has no event left that could complete "
                   "this request (every copy holding memory there is waited for)",
                   node(r->node)->name);
            rc = TSR_ESTATE;
        } else {
            rc = atomic_load(&r->status) == TSR_OK ? 1 : atomic_load(&r->status);
        }
    }
    pthread_mutex_destroy(&s.m);
    pthread_cond_destroy(&s.cv);
    return rc < 0 ? rc : TSR_OK;
}

/* ---- hints ------------------------------------------------------------- */

void tsr__mem_prefetch(tsr_entry_t *e, int nd)
{
    tsr_node_t *n = node(nd);
    char err[TSR_MEM_ERR];
    bool reserved_here = false;
    pthread_mutex_lock(&e->lock);
    tsr_replica_t *R = &e->rep[nd];
    if (R->fetch || valid(R) || e->dead || (!e->zero && count_valid(e) == 0)) {
        pthread_mutex_unlock(&e->lock);
        return;
    }
    if (!R->alloc && !R->user) {
        /* Room now or never: a prefetch neither waits nor writes back. */
        pthread_mutex_lock(&n->lock);
        bool room = !n->wait_head && n->used + e->size <= n->capacity;
        if (!room && !n->wait_head) {
            evict_walk(n, n->used + e->size - n->capacity, false, NULL, NULL, true,
                       atomic_load(&e->next_use));
            room = n->used + e->size <= n->capacity;
        }
        if (room) {
            /* Counted in used before the replica is in n->order: a waiting
             * request's evictor must not take these bytes for memory that
             * nothing will ever give back (see try_grant's "hopeless"). */
            used_add(n, e->size);
            n->reserving += e->size;
        }
        pthread_mutex_unlock(&n->lock);
        int rc = room ? rep_alloc(e, nd, true, false, NULL, 0, NULL, err) : TSR_ENOMEM;
        if (room) {
            pthread_mutex_lock(&n->lock);
            n->reserving -= e->size;
            pthread_mutex_unlock(&n->lock);
        }
        if (rc != TSR_OK) {
            pthread_mutex_unlock(&e->lock);
            if (room)
                kick(n); /* a request that saw our reservation looks again */
            return;
        }
        reserved_here = true;
    }
    order_prefetched(nd, R, true);
    if (e->zero && nd == 0) {
        if (!n->ops->alloc_zeroed)
            memset(R->ptr, 0, e->size);
        R->state = ST_S;
        nodes_changed(e);
    } else {
        (void)fetch_start(e, nd, (waiter_t){NULL, NULL, 0}, false, err);
    }
    pthread_mutex_unlock(&e->lock);
    if (reserved_here)
        kick(n); /* a request that saw our reservation looks again */
}

void tsr__mem_invalidate(tsr_entry_t *e)
{
    bool kicks[TSR_MAX_NODES] = {false};
    pthread_mutex_lock(&e->lock);
    e->version++;
    free(e->ahead_err); /* nothing is left to read */
    e->ahead_err = NULL;
    e->zero = !e->rep[0].user;
    for (int j = 0; j < e->nnodes; j++) {
        tsr_replica_t *R = &e->rep[j];
        R->state = R->user ? ST_M : ST_I;
        if (rep_freeable(R)) {
            rep_free(e, j);
            kicks[j] = true;
        } else if (R->alloc && !R->user) {
            order_move(j, R, false); /* stale: the first to go */
        }
    }
    nodes_changed(e);
    pthread_mutex_unlock(&e->lock);
    for (int j = 0; j < nnodes(); j++)
        if (kicks[j])
            kick(node(j));
}

void tsr__mem_wont_use(tsr_entry_t *e)
{
    pthread_mutex_lock(&e->lock);
    for (int j = 0; j < e->nnodes; j++)
        if (e->rep[j].alloc && (j > 0 || backing(0) >= 0)) {
            e->rep[j].wont_use = true;
            order_move(j, &e->rep[j], false);
        }
    pthread_mutex_unlock(&e->lock);
}

/* Only the window rule orders by next use; under LRU the word is kept
 * (a copy allocated later copies it) but moves nothing. */
void tsr__mem_set_next_use(tsr_entry_t *e, uint64_t seq)
{
    /* One caller at a time per entry (the runtime's handle lock for pending
     * uses): the word is ours to compare and store. */
    if (atomic_load_explicit(&e->next_use, memory_order_relaxed) == seq)
        return;
    atomic_store(&e->next_use, seq);
    if (atomic_load(&e->nordered) == 0)
        return; /* no copy in an order: one entering reads the word */
    pthread_mutex_lock(&e->lock);
    seq = atomic_load_explicit(&e->next_use, memory_order_relaxed);
    for (int j = 0; j < e->nnodes; j++) {
        tsr_replica_t *R = &e->rep[j];
        tsr_node_t *n = node(j);
        if (!R->alloc || !ordered(n))
            continue;
        pthread_mutex_lock(&n->lock);
        if (R->ord.idx != TSR_EVICT_NOWHERE)
            tsr__evict_set_next_use(&n->order, &R->ord, seq);
        pthread_mutex_unlock(&n->lock);
    }
    pthread_mutex_unlock(&e->lock);
}
