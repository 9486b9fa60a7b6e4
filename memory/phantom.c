/* memory/phantom.c — phantom memory nodes (memory/phantom.h): the host,
 * accelerators and disk of a simulated platform. Their memory is reserved address
 * space that nothing touches; their copies are transfers in virtual time
 * (memory/vclock.h) that share the platform's links max-min fairly.
 *
 * Memory: each node reserves a range of address space (MAP_NORESERVE) a
 * few times its capacity and hands out page-aligned pieces of it (a bump
 * pointer, and exact-size free lists: tiles have few sizes; once the range
 * is used up, a larger freed piece is split, for graphs whose data have
 * many sizes). A freed piece
 * is MADV_DONTNEED'ed, so it reads as zeros again and any page an
 * application wrote goes back to the system.
 *
 * Copies: a copy waits in FIFO order on one lane of its node's engine (a
 * CUDA-kind node has a lane into it and a lane out of it, a SIM-kind node
 * one lane), one copy at a time per lane. A started copy is a transfer: it
 * spends its route's latency, then moves its bytes at the rate max-min
 * fairness gives it among every transfer then in its data phase (computed
 * by progressive filling, again at every start and end of a data phase).
 * One "next change" event is kept on the virtual clock; older ones are
 * recognized by a generation number and ignored. At its completion a copy
 * copies (exec mode only), records its times, reports to the node's trace,
 * calls done(), and the lane starts its next copy.
 *
 * Must never: take a lock or start a thread (one thread runs the
 * simulation), read the wall clock, decide anything from an address,
 * complete a copy inside the call that queued it, or touch a replica's
 * bytes outside exec mode.
 */
#include "memory/phantom.h"
#include "memory/vclock.h"

#include <tessera/tessera.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Address space reserved for a node of unlimited capacity, and per byte
 * of capacity otherwise (room for pieces held in free lists of other
 * sizes). */
#define PH_UNLIMITED_RESERVE (4ull << 40)
#define PH_RESERVE_FACTOR 4
#define PH_MIN_RESERVE (64ull << 20)

/* The disk node reserves a quarter more address space than its capacity
 * (room for freed pieces of other sizes); its capacity is at most
 * TSR_PHANTOM_MAX_DISK, so that this fits the address space. */
#define PH_DISK_SLACK 4

/* Link table: host memory, then each switch's two directions, then each
 * accelerator's own link (two directions) and fabric port (out, in), then
 * the drives' read and write links. */
#define PH_NLINKS (1 + 2 * TSR_PHANTOM_MAX_ACC + 4 * TSR_PHANTOM_MAX_ACC + 2)
#define PH_MAX_ROUTE 3
enum { L_DOWN = 0, L_UP = 1, L_NV_OUT = 2, L_NV_IN = 3 };
enum { D_READ = 0, D_WRITE = 1 };

static int link_hostmem(void) { return 0; }
static int link_switch(int s, int up) { return 1 + 2 * s + up; }
static int link_acc(int i, int which) { return 1 + 2 * TSR_PHANTOM_MAX_ACC + 4 * i + which; }
static int link_disk(int which) { return 1 + 6 * TSR_PHANTOM_MAX_ACC + which; }

/* What a node id is to the platform (ph.acc_of): an accelerator's index
 * (>= 0), or one of these. */
enum { PH_HOST = -1, PH_DISK = TSR_PHANTOM_DISK, PH_NONE = -3 };

typedef struct ph_lane ph_lane_t;

/* One copy in flight on a lane. */
typedef struct ph_xfer {
    tsr_copy_t *c;
    ph_lane_t *lane;
    int nl;
    int link[PH_MAX_ROUTE];
    double fill_bw;    /* a zero fill (nl == 0): its rate; 0: instantaneous */
    uint64_t t_data;   /* virtual ns at which its latency ends */
    bool data;         /* in its data phase (sharing links) */
    bool frozen;       /* rate fixed in the current progressive filling */
    double remaining;  /* bytes, as of ph.t_last */
    double rate;       /* bytes/s; INFINITY: constrained by nothing */
} ph_xfer_t;

struct ph_lane {
    tsr_node_t *n;
    tsr_copy_t *head, *tail;  /* queued, not started */
    ph_xfer_t x;              /* the copy in flight, when busy */
    bool busy;
};

/* Free pieces of one (page-rounded) size, as offsets in the reservation. */
typedef struct ph_class {
    size_t size;
    size_t *off;
    size_t n, cap;
} ph_class_t;

typedef struct ph_node {
    int acc;              /* an accelerator, PH_HOST or PH_DISK */
    char *base;
    size_t reserve, bump;
    ph_class_t *cls;
    int ncls, capcls, last_cls;
    ph_lane_t lane[2];    /* CUDA, disk: [0] into the node, [1] out of it;
                             SIM: [0] */
    int nlanes;
    char why[160];        /* the last failed alloc */
} ph_node_t;

/* The platform and the transfers in flight, shared by every phantom node. */
static struct {
    tsr_phantom_config_t cfg;   /* a copy of the caller's */
    int nopen;
    int acc_of[TSR_MAX_NODES];  /* node id → accelerator, PH_HOST, PH_DISK,
                                   PH_NONE (not phantom) */
    double bw[PH_NLINKS], lat[PH_NLINKS];
    ph_xfer_t *act[2 * TSR_MAX_NODES]; /* in the order they started */
    int nact;
    uint64_t t_last;            /* virtual ns up to which `remaining` is current */
    uint64_t gen;               /* of the one valid pending event */
    bool pending;
    uint64_t pending_t;
    bool settling;              /* completions running: starts only queue */
    /* progressive filling's scratch, per link */
    double left[PH_NLINKS];
    int cnt[PH_NLINKS];
} ph;

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

/* ---- memory ------------------------------------------------------------ */

static size_t round_page(size_t size)
{
    size_t pg = page_size();
    return (size + pg - 1) / pg * pg;
}

/* The class of `size` bytes (page-rounded), or -1. */
static int class_find(ph_node_t *p, size_t size)
{
    if (p->last_cls >= 0 && p->last_cls < p->ncls && p->cls[p->last_cls].size == size)
        return p->last_cls;
    for (int i = 0; i < p->ncls; i++)
        if (p->cls[i].size == size)
            return p->last_cls = i;
    return -1;
}

/* Keep the free piece at `off` of `sz` bytes for an allocation of its size
 * (without memory for the list, the range is lost to reuse; nothing else
 * is). */
static void file_piece(ph_node_t *p, size_t off, size_t sz)
{
    int i = class_find(p, sz);
    if (i < 0) {
        if (p->ncls == p->capcls) {
            int cap = p->capcls ? 2 * p->capcls : 8;
            ph_class_t *v = realloc(p->cls, (size_t)cap * sizeof *v);
            if (!v)
                return;
            p->cls = v;
            p->capcls = cap;
        }
        i = p->ncls++;
        p->cls[i] = (ph_class_t){.size = sz};
    }
    ph_class_t *c = &p->cls[i];
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        size_t *v = realloc(c->off, cap * sizeof *v);
        if (!v)
            return;
        c->off = v;
        c->cap = cap;
    }
    c->off[c->n++] = off;
}


typedef struct { size_t off, size; } ph_extent_t;

static int by_offset(const void *a, const void *b)
{
    const ph_extent_t *x = a, *y = b;
    return (x->off > y->off) - (x->off < y->off);
}

/* Merge the freed pieces that touch into larger ones (those that reach the
 * unused range give it back), and file them again by size. Runs only when
 * the range is used up. false without memory (nothing changed). */
static bool coalesce(ph_node_t *p)
{
    size_t total = 0;
    for (int i = 0; i < p->ncls; i++)
        total += p->cls[i].n;
    if (total < 2)
        return false;
    ph_extent_t *e = malloc(total * sizeof *e);
    if (!e)
        return false;
    size_t k = 0;
    for (int i = 0; i < p->ncls; i++)
        for (size_t j = 0; j < p->cls[i].n; j++)
            e[k++] = (ph_extent_t){p->cls[i].off[j], p->cls[i].size};
    qsort(e, total, sizeof *e, by_offset);
    size_t m = 0;
    for (size_t j = 0; j < total; j++) {
        if (m && e[m - 1].off + e[m - 1].size == e[j].off)
            e[m - 1].size += e[j].size;
        else
            e[m++] = e[j];
    }
    if (m && e[m - 1].off + e[m - 1].size == p->bump)
        p->bump = e[--m].off;
    for (int i = 0; i < p->ncls; i++)
        p->cls[i].n = 0;
    /* re-filing needs no more memory than the lists held, except for a
     * merged size that has no class yet: those pieces stay lost to reuse
     * if a class cannot be had (ph_free's rule) */
    for (size_t j = 0; j < m; j++) {
        int i = class_find(p, e[j].size);
        if (i >= 0 && p->cls[i].n < p->cls[i].cap)
            p->cls[i].off[p->cls[i].n++] = e[j].off;
        else
            file_piece(p, e[j].off, e[j].size);
    }
    free(e);
    return true;
}

/* The unused range exhausted (a graph whose data have many distinct sizes,
 * each freed piece waiting for its own size): the smallest freed piece
 * larger than sz, split, the rest freed as a piece of its own size; NULL
 * if there is none. */
static void *split_larger(tsr_node_t *n, size_t sz)
{
    ph_node_t *p = n->impl;
    int best = -1;
    for (int i = 0; i < p->ncls; i++)
        if (p->cls[i].n > 0 && p->cls[i].size > sz &&
            (best < 0 || p->cls[i].size < p->cls[best].size))
            best = i;
    if (best < 0)
        return NULL;
    size_t whole = p->cls[best].size;
    char *q = p->base + p->cls[best].off[--p->cls[best].n];
    file_piece(p, (size_t)(q - p->base) + sz, whole - sz); /* page-rounded: the rest too */
    return q;
}

/* A page-aligned piece of at least `size` bytes of the reservation:
 * a freed piece of that size if any, else the next unused range, else a
 * larger freed piece split. */
static void *ph_alloc(tsr_node_t *n, size_t size)
{
    ph_node_t *p = n->impl;
    size_t sz = round_page(size ? size : 1);
    int i = class_find(p, sz);
    if (i >= 0 && p->cls[i].n > 0)
        return p->base + p->cls[i].off[--p->cls[i].n];
    if (sz > p->reserve - p->bump) {
        void *q = split_larger(n, sz);
        if (!q && coalesce(p))
            q = sz <= p->reserve - p->bump ? NULL : split_larger(n, sz);
        if (!q && sz <= p->reserve - p->bump) {
            q = p->base + p->bump;
            p->bump += sz;
        }
        if (q)
            return q;
        snprintf(p->why, sizeof p->why,
                 "the %zu-byte address range reserved for %s is exhausted "
                 "(%zu bytes handed out)", p->reserve, n->name, p->bump);
        return NULL;
    }
    void *q = p->base + p->bump;
    p->bump += sz;
    return q;
}

/* Give the pages back (the piece reads as zeros again) and keep the range
 * for the next allocation of its size. An accelerator's (or the disk's) piece
 * outside exec mode was never touched (no kernel runs, no copy copies, and only host
 * replicas are ever mapped for the application): it has no page to give
 * back, and the madvise call per freed replica was a tenth of a simulated
 * GPT-2 step. */
static void ph_free(tsr_node_t *n, void *ptr, size_t size)
{
    ph_node_t *p = n->impl;
    if (!ptr)
        return;
    size_t sz = round_page(size ? size : 1);
    if (ph.cfg.exec || p->acc == PH_HOST)
        (void)madvise(ptr, sz, MADV_DONTNEED);
    file_piece(p, (size_t)((char *)ptr - p->base), sz);
}

static const char *ph_alloc_error(tsr_node_t *n)
{
    ph_node_t *p = n->impl;
    return p ? p->why : "";
}

/* ---- routes ------------------------------------------------------------ */

/* The links a copy from node src to node dst crosses (see phantom.h).
 * Returns their number. */
static int route(int src, int dst, int link[PH_MAX_ROUTE])
{
    int a = ph.acc_of[src], b = ph.acc_of[dst];
    int nl = 0;
    if (a == PH_DISK || b == PH_DISK) {
        int other = a == PH_DISK ? b : a;
        if (other == PH_DISK || other == PH_NONE)
            return 0;
        bool down = a == PH_DISK; /* out of the drives */
        if (down)
            link[nl++] = link_disk(D_READ);
        if (other == PH_HOST) {
            link[nl++] = link_hostmem();
        } else if (down) {
            if (ph.cfg.acc[other].pcie_switch >= 0)
                link[nl++] = link_switch(ph.cfg.acc[other].pcie_switch, L_DOWN);
            link[nl++] = link_acc(other, L_DOWN);
        } else {
            link[nl++] = link_acc(other, L_UP);
            if (ph.cfg.acc[other].pcie_switch >= 0)
                link[nl++] = link_switch(ph.cfg.acc[other].pcie_switch, L_UP);
        }
        if (!down)
            link[nl++] = link_disk(D_WRITE);
        return nl;
    }
    if (a == PH_HOST && b >= 0) {
        link[nl++] = link_hostmem();
        if (ph.cfg.acc[b].pcie_switch >= 0)
            link[nl++] = link_switch(ph.cfg.acc[b].pcie_switch, L_DOWN);
        link[nl++] = link_acc(b, L_DOWN);
    } else if (a >= 0 && b == PH_HOST) {
        link[nl++] = link_acc(a, L_UP);
        if (ph.cfg.acc[a].pcie_switch >= 0)
            link[nl++] = link_switch(ph.cfg.acc[a].pcie_switch, L_UP);
        link[nl++] = link_hostmem();
    } else if (a >= 0 && b >= 0) {
        link[nl++] = link_acc(a, L_NV_OUT);
        link[nl++] = link_acc(b, L_NV_IN);
    } else if (a == PH_HOST && b == PH_HOST) {
        link[nl++] = link_hostmem();
    }
    return nl;
}

/* The rate of a zero fill on a node (`a` as in ph.acc_of). */
static double fill_bandwidth(int a)
{
    return a >= 0 ? ph.cfg.acc[a].fill_bandwidth
           : a == PH_DISK ? ph.cfg.disk.write.bandwidth
                          : ph.cfg.host_mem.bandwidth;
}

bool tsr__phantom_link(int src, int dst, double *latency_s, double *bytes_per_s)
{
    if (ph.nopen == 0 || src < 0 || dst < 0 || src >= TSR_MAX_NODES || dst >= TSR_MAX_NODES ||
        ph.acc_of[src] == PH_NONE || ph.acc_of[dst] == PH_NONE)
        return false;
    double lat = 0, bw = 0;
    if (src == dst) {
        /* a zero fill */
        bw = fill_bandwidth(ph.acc_of[src]);
    } else {
        int link[PH_MAX_ROUTE];
        int nl = route(src, dst, link);
        for (int i = 0; i < nl; i++) {
            lat += ph.lat[link[i]];
            if (ph.bw[link[i]] > 0 && (bw == 0 || ph.bw[link[i]] < bw))
                bw = ph.bw[link[i]];
        }
    }
    if (latency_s)
        *latency_s = lat;
    if (bytes_per_s)
        *bytes_per_s = bw;
    return true;
}

/* ---- bandwidth sharing --------------------------------------------------- */

/* Bring every data-phase transfer's remaining bytes to virtual time now,
 * at the rates they had since ph.t_last. */
static void advance(uint64_t now)
{
    if (now > ph.t_last) {
        double dt = (double)(now - ph.t_last) * 1e-9;
        for (int i = 0; i < ph.nact; i++) {
            ph_xfer_t *x = ph.act[i];
            if (x->data && isfinite(x->rate))
                x->remaining -= x->rate * dt;
        }
    }
    ph.t_last = now;
}

/* Max-min fair rates of the data-phase transfers, by progressive filling:
 * repeatedly take the most constrained link (bandwidth left / transfers on
 * it not yet fixed; lowest index on ties), fix its transfers at that
 * share, and take the share off every link they cross. Links of bandwidth
 * 0 are unlimited; a transfer on no limited link is constrained by
 * nothing; a zero fill has its node's fill rate. */
static void recompute(void)
{
    for (int i = 0; i < ph.nact; i++) {
        ph_xfer_t *x = ph.act[i];
        for (int k = 0; k < x->nl; k++) {
            ph.left[x->link[k]] = ph.bw[x->link[k]];
            ph.cnt[x->link[k]] = 0;
        }
    }
    int unfixed = 0;
    for (int i = 0; i < ph.nact; i++) {
        ph_xfer_t *x = ph.act[i];
        x->frozen = true;
        if (!x->data)
            continue;
        if (x->nl == 0) {
            x->rate = x->fill_bw > 0 ? x->fill_bw : INFINITY;
            continue;
        }
        bool limited = false;
        for (int k = 0; k < x->nl; k++)
            if (ph.bw[x->link[k]] > 0) {
                ph.cnt[x->link[k]]++;
                limited = true;
            }
        x->rate = INFINITY;
        x->frozen = !limited;
        unfixed += limited;
    }
    while (unfixed > 0) {
        int best = -1;
        double share = 0;
        for (int i = 0; i < ph.nact; i++) {
            ph_xfer_t *x = ph.act[i];
            if (x->frozen)
                continue;
            for (int k = 0; k < x->nl; k++) {
                int l = x->link[k];
                if (ph.bw[l] <= 0 || ph.cnt[l] == 0)
                    continue;
                double s = ph.left[l] / ph.cnt[l];
                if (best < 0 || s < share || (s == share && l < best)) {
                    best = l;
                    share = s;
                }
            }
        }
        if (best < 0)
            break; /* cannot happen: an unfixed transfer has a limited link */
        if (share < 1.0)
            share = 1.0; /* rounding left a link empty: crawl, never stall */
        for (int i = 0; i < ph.nact; i++) {
            ph_xfer_t *x = ph.act[i];
            bool on = false;
            for (int k = 0; !x->frozen && k < x->nl; k++)
                on |= x->link[k] == best;
            if (!on)
                continue;
            x->rate = share;
            x->frozen = true;
            unfixed--;
            for (int k = 0; k < x->nl; k++) {
                int l = x->link[k];
                if (ph.bw[l] <= 0)
                    continue;
                ph.left[l] = ph.left[l] > share ? ph.left[l] - share : 0;
                ph.cnt[l]--;
            }
        }
    }
}

/* Whether x's bytes have all moved (within the nanosecond its completion
 * event was rounded to). */
static bool xfer_done(const ph_xfer_t *x)
{
    return x->data && (!isfinite(x->rate) || x->remaining <= x->rate * 1e-9 * (1 + 1e-9));
}

static void on_event(void *arg);

/* Keep one event on the virtual clock at the next change: a latency
 * ending or a transfer completing at its current rate. */
static void schedule_next(void)
{
    uint64_t next = UINT64_MAX;
    for (int i = 0; i < ph.nact; i++) {
        ph_xfer_t *x = ph.act[i];
        uint64_t t;
        if (!x->data)
            t = x->t_data;
        else if (!isfinite(x->rate) || x->remaining <= 0)
            t = ph.t_last;
        else
            t = ph.t_last + (uint64_t)llround(x->remaining / x->rate * 1e9);
        if (t < next)
            next = t;
    }
    if (next == UINT64_MAX || (ph.pending && ph.pending_t == next))
        return;
    ph.gen++;
    ph.pending = tsr__vclock_at(next, on_event, (void *)(uintptr_t)ph.gen) == TSR_OK;
    ph.pending_t = next;
}

/* Start the lane's next queued copy: it becomes a transfer in its latency. */
static void lane_start(ph_lane_t *L)
{
    tsr_copy_t *c = L->head;
    L->head = c->next;
    if (!L->head)
        L->tail = NULL;
    ph_xfer_t *x = &L->x;
    *x = (ph_xfer_t){.c = c, .lane = L, .remaining = (double)c->size};
    uint64_t now = tsr__vclock_now();
    c->t_start = now;
    double lat = 0;
    if (!c->src) {
        x->fill_bw = fill_bandwidth(ph.acc_of[c->dst_node]);
    } else {
        x->nl = route(c->src_node, c->dst_node, x->link);
        for (int k = 0; k < x->nl; k++)
            lat += ph.lat[x->link[k]];
    }
    x->t_data = now + (uint64_t)llround(lat * 1e9);
    L->busy = true;
    ph.act[ph.nact++] = x;
}

/* The copy's bytes have moved: copy them (exec), record it, tell the
 * directory, and start the lane's next copy. */
static void complete(ph_xfer_t *x)
{
    tsr_copy_t *c = x->c;
    ph_lane_t *L = x->lane;
    if (ph.cfg.exec) {
        if (c->src)
            memcpy(c->dst, c->src, c->size);
        else
            memset(c->dst, 0, c->size);
    }
    c->t_end = tsr__vclock_now();
    L->busy = false;
    tsr__node_copy_event(L->n, c);
    c->done(c->arg, TSR_OK); /* may queue copies: they only queue (settling) */
    if (!L->busy && L->head)
        lane_start(L);
}

/* At an event: bring transfers to now, complete those whose bytes have
 * moved (in the order they started), let transfers whose latency ended
 * join the links, and schedule the next event. Completions that start new
 * copies only queue them here. */
static void settle(void)
{
    uint64_t now = tsr__vclock_now();
    ph.settling = true;
    advance(now);
    for (;;) {
        ph_xfer_t *done[2 * TSR_MAX_NODES];
        int nd = 0, keep = 0;
        for (int i = 0; i < ph.nact; i++) {
            if (xfer_done(ph.act[i]))
                done[nd++] = ph.act[i];
            else
                ph.act[keep++] = ph.act[i];
        }
        ph.nact = keep;
        if (nd > 0) {
            recompute();
            for (int i = 0; i < nd; i++)
                complete(done[i]);
            continue;
        }
        bool promoted = false;
        for (int i = 0; i < ph.nact; i++) {
            ph_xfer_t *x = ph.act[i];
            if (!x->data && x->t_data <= now) {
                x->data = true;
                promoted = true;
            }
        }
        if (!promoted)
            break;
        recompute();
    }
    ph.settling = false;
    schedule_next();
}

static void on_event(void *arg)
{
    if ((uint64_t)(uintptr_t)arg != ph.gen || !ph.pending)
        return; /* superseded by a later schedule */
    ph.pending = false;
    settle();
}

/* ---- node operations ----------------------------------------------------- */

/* Queue c on its lane; start it if the lane is idle. Never completes it:
 * even an instantaneous copy completes at an event. */
static int ph_copy(tsr_node_t *n, tsr_copy_t *c)
{
    ph_node_t *p = n->impl;
    if (!tsr__vclock_on()) {
        snprintf(c->err, sizeof c->err,
                 "%s: a phantom node copies only while the virtual clock runs", n->name);
        return TSR_ESTATE;
    }
    ph_lane_t *L = &p->lane[p->nlanes == 2 && c->dst_node != n->id ? 1 : 0];
    c->next = NULL;
    if (L->tail)
        L->tail->next = c;
    else
        L->head = c;
    L->tail = c;
    if (!L->busy) {
        if (!ph.settling)
            advance(tsr__vclock_now());
        lane_start(L);
        if (!ph.settling)
            schedule_next();
    }
    return TSR_OK;
}

static int host_copy(tsr_node_t *n, tsr_copy_t *c)
{
    snprintf(c->err, sizeof c->err, "%s: the host performs no copies", n->name);
    return TSR_EINVAL;
}

/* The host reaches every node; a CUDA-kind node with a fabric port
 * reaches the other phantom nodes that have one, and any CUDA-kind node
 * the disk with GPUDirect Storage; a SIM-kind node only the host. */
static bool ph_peer(tsr_node_t *n, const tsr_node_t *other)
{
    if (other->kind == TSR_NODE_KIND_HOST)
        return true;
    ph_node_t *p = n->impl;
    if (other->id >= 0 && other->id < TSR_MAX_NODES && ph.acc_of[other->id] == PH_DISK)
        return n->kind == TSR_NODE_KIND_CUDA && p->acc >= 0 && ph.cfg.disk.gpudirect;
    if (n->kind != TSR_NODE_KIND_CUDA || p->acc < 0 || !ph.cfg.acc[p->acc].peer)
        return false;
    if (other->id < 0 || other->id >= TSR_MAX_NODES || other == n)
        return false;
    int b = ph.acc_of[other->id];
    return b >= 0 && other->kind == TSR_NODE_KIND_CUDA && ph.cfg.acc[b].peer;
}

static bool host_peer(tsr_node_t *n, const tsr_node_t *other)
{
    (void)n;
    (void)other;
    return true;
}

/* The disk reaches the host (as memory/disk.c's), and CUDA-kind nodes
 * with GPUDirect Storage. */
static bool disk_peer(tsr_node_t *n, const tsr_node_t *other)
{
    (void)n;
    if (other->kind == TSR_NODE_KIND_HOST)
        return true;
    return ph.cfg.disk.gpudirect && other->kind == TSR_NODE_KIND_CUDA && other->id >= 0 &&
           other->id < TSR_MAX_NODES && ph.acc_of[other->id] >= 0;
}

static bool lanes_busy(ph_node_t *p)
{
    for (int i = 0; i < p->nlanes; i++)
        if (p->lane[i].busy || p->lane[i].head)
            return true;
    return false;
}

/* Queued copies complete first (their events run here, with whatever else
 * is due before them); without the virtual clock they cannot, and are
 * dropped. Then the reservation goes. */
static void ph_close(tsr_node_t *n)
{
    ph_node_t *p = n->impl;
    if (!p)
        return;
    while (lanes_busy(p) && tsr__vclock_on() && tsr__vclock_step())
        ;
    for (int i = 0; i < p->nlanes; i++) {
        ph_lane_t *L = &p->lane[i];
        if (L->busy) {
            int keep = 0;
            for (int j = 0; j < ph.nact; j++)
                if (ph.act[j] != &L->x)
                    ph.act[keep++] = ph.act[j];
            ph.nact = keep;
        }
        L->busy = false;
        L->head = L->tail = NULL;
    }
    munmap(p->base, p->reserve);
    for (int i = 0; i < p->ncls; i++)
        free(p->cls[i].off);
    free(p->cls);
    free(p);
    n->impl = NULL;
    ph.acc_of[n->id] = PH_NONE;
    if (--ph.nopen == 0) {
        ph.nact = 0;
        ph.pending = false;
        ph.gen++;
    }
}

static const tsr_node_ops_t ph_host_ops = {
    .alloc = ph_alloc,
    .free = ph_free,
    .alloc_error = ph_alloc_error,
    .copy = host_copy,
    .peer = host_peer,
    .close = ph_close,
    .alloc_zeroed = true,
};

static const tsr_node_ops_t ph_acc_ops = {
    .alloc = ph_alloc,
    .free = ph_free,
    .alloc_error = ph_alloc_error,
    .copy = ph_copy,
    .peer = ph_peer,
    .close = ph_close,
    .alloc_zeroed = true,
};

/* The disk: memory/disk.c's node, in virtual time. */
static const tsr_node_ops_t ph_disk_ops = {
    .alloc = ph_alloc,
    .free = ph_free,
    .alloc_error = ph_alloc_error,
    .copy = ph_copy,
    .peer = disk_peer,
    .close = ph_close,
};

/* ---- opening ------------------------------------------------------------- */

static bool link_ok(const tsr_phantom_link_t *l)
{
    return isfinite(l->latency) && l->latency >= 0 && isfinite(l->bandwidth) &&
           l->bandwidth >= 0;
}

/* The platform's values, checked: TSR_EINVAL naming the first bad one. */
static int check_config(const tsr_phantom_config_t *cfg, char *err, size_t errlen)
{
    if (cfg->nacc < 0 || cfg->nacc > TSR_PHANTOM_MAX_ACC) {
        snprintf(err, errlen, "phantom platform: %d accelerators (0 to %d)", cfg->nacc,
                 TSR_PHANTOM_MAX_ACC);
        return TSR_EINVAL;
    }
    if (cfg->nswitches < 0 || cfg->nswitches > TSR_PHANTOM_MAX_ACC) {
        snprintf(err, errlen, "phantom platform: %d PCIe switches (0 to %d)", cfg->nswitches,
                 TSR_PHANTOM_MAX_ACC);
        return TSR_EINVAL;
    }
    if (!link_ok(&cfg->host_mem)) {
        snprintf(err, errlen, "phantom platform: host memory link: negative or non-finite "
                 "latency or bandwidth");
        return TSR_EINVAL;
    }
    for (int s = 0; s < cfg->nswitches; s++)
        if (!link_ok(&cfg->switches[s])) {
            snprintf(err, errlen, "phantom platform: PCIe switch %d: negative or non-finite "
                     "latency or bandwidth", s);
            return TSR_EINVAL;
        }
    for (int i = 0; i < cfg->nacc; i++) {
        const tsr_phantom_acc_t *a = &cfg->acc[i];
        const char *bad = NULL;
        if (a->kind != TSR_NODE_KIND_CUDA && a->kind != TSR_NODE_KIND_SIM)
            bad = "kind is neither CUDA nor SIM";
        else if (a->capacity == 0)
            bad = "capacity 0";
        else if (!link_ok(&a->link))
            bad = "host link: negative or non-finite latency or bandwidth";
        else if (!link_ok(&a->nvlink))
            bad = "fabric port: negative or non-finite latency or bandwidth";
        else if (a->pcie_switch < -1 || a->pcie_switch >= cfg->nswitches)
            bad = "PCIe switch index out of range";
        else if (!isfinite(a->fill_bandwidth) || a->fill_bandwidth < 0)
            bad = "negative or non-finite fill bandwidth";
        if (bad) {
            snprintf(err, errlen, "phantom platform: accelerator %d: %s", i, bad);
            return TSR_EINVAL;
        }
    }
    const tsr_phantom_disk_t *d = &cfg->disk;
    if (d->capacity) {
        const char *bad = NULL;
        if (d->capacity > TSR_PHANTOM_MAX_DISK)
            bad = "capacity above 32 TiB";
        else if (cfg->nacc > TSR_PHANTOM_MAX_ACC - 1)
            bad = "no node left for it (too many accelerators)";
        else if (!link_ok(&d->read) || !(d->read.bandwidth > 0))
            bad = "read link: negative, zero or non-finite latency or bandwidth";
        else if (!link_ok(&d->write) || !(d->write.bandwidth > 0))
            bad = "write link: negative, zero or non-finite latency or bandwidth";
        if (bad) {
            snprintf(err, errlen, "phantom platform: disk: %s", bad);
            return TSR_EINVAL;
        }
    }
    return TSR_OK;
}

/* The first node opened takes a copy of the platform and builds the
 * link table. */
static void platform_set(const tsr_phantom_config_t *cfg)
{
    memset(&ph, 0, sizeof ph);
    ph.cfg = *cfg;
    for (int i = 0; i < TSR_MAX_NODES; i++)
        ph.acc_of[i] = PH_NONE;
    ph.bw[link_hostmem()] = cfg->host_mem.bandwidth;
    ph.lat[link_hostmem()] = cfg->host_mem.latency;
    for (int s = 0; s < cfg->nswitches; s++)
        for (int up = 0; up < 2; up++) {
            ph.bw[link_switch(s, up)] = cfg->switches[s].bandwidth;
            ph.lat[link_switch(s, up)] = cfg->switches[s].latency;
        }
    for (int i = 0; i < cfg->nacc; i++) {
        const tsr_phantom_acc_t *a = &cfg->acc[i];
        ph.bw[link_acc(i, L_DOWN)] = ph.bw[link_acc(i, L_UP)] = a->link.bandwidth;
        ph.lat[link_acc(i, L_DOWN)] = ph.lat[link_acc(i, L_UP)] = a->link.latency;
        ph.bw[link_acc(i, L_NV_OUT)] = ph.bw[link_acc(i, L_NV_IN)] = a->nvlink.bandwidth;
        ph.lat[link_acc(i, L_NV_OUT)] = ph.lat[link_acc(i, L_NV_IN)] = a->nvlink.latency;
    }
    ph.bw[link_disk(D_READ)] = cfg->disk.read.bandwidth;
    ph.lat[link_disk(D_READ)] = cfg->disk.read.latency;
    ph.bw[link_disk(D_WRITE)] = cfg->disk.write.bandwidth;
    ph.lat[link_disk(D_WRITE)] = cfg->disk.write.latency;
}

int tsr__phantom_node_open(tsr_node_t *n, const tsr_phantom_config_t *cfg, int acc,
                           char *err, size_t errlen)
{
    int rc = check_config(cfg, err, errlen);
    if (rc != TSR_OK)
        return rc;
    if (acc == PH_DISK && cfg->disk.capacity == 0) {
        snprintf(err, errlen, "phantom platform: no disk described");
        return TSR_EINVAL;
    }
    if (acc < PH_DISK || acc >= cfg->nacc || n->id < 0 || n->id >= TSR_MAX_NODES) {
        snprintf(err, errlen, "phantom platform: no accelerator %d (%d described)", acc,
                 cfg->nacc);
        return TSR_EINVAL;
    }
    size_t capacity = acc == PH_HOST ? cfg->host_capacity
                      : acc == PH_DISK ? cfg->disk.capacity
                                       : cfg->acc[acc].capacity;
    size_t reserve = PH_UNLIMITED_RESERVE;
    if (acc == PH_DISK)
        reserve = capacity + capacity / PH_DISK_SLACK;
    else if (capacity && capacity < PH_UNLIMITED_RESERVE / PH_RESERVE_FACTOR)
        reserve = capacity * PH_RESERVE_FACTOR;
    if (reserve < PH_MIN_RESERVE)
        reserve = PH_MIN_RESERVE;
    reserve = round_page(reserve);
    ph_node_t *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "phantom node: out of memory");
        return TSR_ENOMEM;
    }
    void *base = mmap(NULL, reserve, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        int e = errno;
        free(p);
        snprintf(err, errlen, "phantom node: cannot reserve %zu bytes of address space "
                 "(mmap: %s); the system refuses to overcommit, or the address space is "
                 "limited (ulimit -v)", reserve, strerror(e));
        return TSR_ENOMEM;
    }
    if (ph.nopen == 0)
        platform_set(cfg);
    ph.nopen++;
    ph.acc_of[n->id] = acc;
    p->acc = acc;
    p->base = base;
    p->reserve = reserve;
    p->last_cls = -1;
    n->impl = p;
    n->capacity = capacity ? capacity : SIZE_MAX;
    if (acc == PH_DISK) {
        n->kind = TSR_NODE_KIND_DISK;
        n->index = 0;
        snprintf(n->name, sizeof n->name, "disk");
        n->ops = &ph_disk_ops;
        p->nlanes = 2;
        for (int i = 0; i < p->nlanes; i++)
            p->lane[i].n = n;
        return TSR_OK;
    }
    if (acc == PH_HOST) {
        n->kind = TSR_NODE_KIND_HOST;
        n->index = 0;
        snprintf(n->name, sizeof n->name, "host");
        n->ops = &ph_host_ops;
        return TSR_OK;
    }
    n->kind = cfg->acc[acc].kind;
    n->index = 0;
    for (int i = 0; i < acc; i++)
        n->index += cfg->acc[i].kind == n->kind;
    snprintf(n->name, sizeof n->name, "%s%d", n->kind == TSR_NODE_KIND_CUDA ? "cuda" : "sim",
             n->index);
    n->ops = &ph_acc_ops;
    p->nlanes = n->kind == TSR_NODE_KIND_CUDA ? 2 : 1;
    for (int i = 0; i < p->nlanes; i++)
        p->lane[i].n = n;
    return TSR_OK;
}
