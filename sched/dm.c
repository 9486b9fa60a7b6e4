/* sched/dm.c — the model-based policies: dmda and heft.
 *
 * dmda ("deque model, data aware"): each ready task goes, when it is
 * pushed, to the worker where it is expected to finish first:
 *   finish = max(when the worker's queue drains, when its inputs arrive)
 *            + predicted execution time,
 * inputs arriving after the transfers already planned on the same link
 * (the copy engine is one queue) plus the transfer of the bytes the task
 * lacks there. The worker runs its queue in FIFO order.
 *
 * heft: the same estimate, with HEFT's two ideas (Topcuoglu, Hariri, Wu
 * 2002): ready tasks wait in one queue ordered by upward rank (the longest
 * predicted path to the end of what is submitted, kept up to date as tasks
 * arrive), and are placed only when a worker has fewer than LOOKAHEAD
 * planned tasks — highest rank first; a task is inserted into an idle gap
 * of a worker's plan (a gap that opens where a planned task waits for its
 * data) when it fits there.
 *
 * Both explore: while a task's model is unknown on some worker that can run
 * it, the task goes there (to calibrate) unless that worker is already
 * busy calibrating.
 *
 * Must never: hold the policy lock while waking a worker; give a worker a
 * task it cannot run; let a task's record outlive its last reader.
 */
#include "sched/plan.h"
#include "sched/policies.h"
#include "sched/queue.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Planned (placed, not yet taken) tasks per worker before heft stops
 * placing and lets ready tasks gather by rank. */
#define LOOKAHEAD 2
/* Ancestors whose rank one submission may raise. */
#define RANK_BUDGET 4096
/* Cost assumed for a task whose model is unknown everywhere (ranks). */
#define UNKNOWN_COST 1e-6
#define MAX_NODES 32

typedef struct dmw {
    tsr_tq_t q;            /* dmda: assigned tasks, FIFO */
    tsr_timeline_t tl;     /* heft: the plan, in start order */
    double exp_end;        /* dmda: when its queue should drain */
    double queued;         /* predicted seconds placed here, not done */
    double run_end;        /* heft: when what it took should be done */
    int ntaken;            /* heft: tasks taken, not done */
    atomic_long n;         /* tasks waiting for it */
    int node;
    int kind;              /* TSR_DEVICE_… */
    int exploring;         /* tasks placed here to calibrate, not done */
} dmw_t;

/* heft's record of a task, from submission to completion. */
typedef struct hrec {
    tsr_rank_node_t r;
    tsr_task_t t;
    int refs;              /* the task, and every successor's pred entry */
    bool in_heap;          /* waiting in the ready heap (index: F(t)->worker) */
    tsr_rank_node_t *pred_inline[4];
    double comm_inline[4];
} hrec_t;

typedef struct dm {
    bool heft;
    pthread_mutex_t m;
    int nw, nnodes;
    double link_free[MAX_NODES];  /* when the copies planned into a node end */
    /* heft: ready tasks by rank (then submission order), a binary heap
     * whose entries know their index, so a rank that rises moves up */
    tsr_task_t *heap;
    int nheap, capheap;
    atomic_int nready;
    double seq;
    long planned;
    bool comm_known;
    double mean_lat, mean_inv_bw; /* between workers on different nodes */
    dmw_t w[];
} dm_t;

#define F(t) tsr_task_sched_fields(t)

static double maxd(double a, double b) { return a > b ? a : b; }

/* ---- life ---------------------------------------------------------------- */

static int dm_open(tsr_sched_t *s, bool heft)
{
    int nw = tsr_sched_worker_count(s);
    dm_t *d = calloc(1, sizeof *d + (size_t)nw * sizeof d->w[0]);
    if (!d)
        return TSR_ENOMEM;
    d->heft = heft;
    d->nw = nw;
    d->nnodes = tsr_sched_node_count(s);
    pthread_mutex_init(&d->m, NULL);
    for (int i = 0; i < nw; i++) {
        d->w[i].node = tsr_sched_worker_node(s, i);
        d->w[i].kind = tsr_sched_worker_device(s, i);
        if (heft) {
            /* A worker's plan never holds more than every planned task. */
            d->w[i].tl.cap = nw * LOOKAHEAD + 1;
            d->w[i].tl.v = calloc((size_t)d->w[i].tl.cap, sizeof(tsr_slot_t));
            if (!d->w[i].tl.v) {
                for (int k = 0; k < i; k++)
                    free(d->w[k].tl.v);
                pthread_mutex_destroy(&d->m);
                free(d);
                return TSR_ENOMEM;
            }
        }
    }
    tsr_sched_set_data(s, d);
    return TSR_OK;
}

static int dmda_init(tsr_sched_t *s) { return dm_open(s, false); }
static int heft_init(tsr_sched_t *s) { return dm_open(s, true); }

static void dm_deinit(tsr_sched_t *s)
{
    dm_t *d = tsr_sched_data(s);
    free(d->heap);
    for (int i = 0; i < d->nw; i++)
        free(d->w[i].tl.v);
    pthread_mutex_destroy(&d->m);
    free(d);
}

/* ---- the estimate ---------------------------------------------------------- */

typedef struct place {
    int worker;
    double len;      /* predicted execution time (0 when exploring) */
    double ready;    /* when the inputs are there */
    double start;
    int pos;         /* heft: index in the worker's plan */
    bool moves;      /* inputs must be copied to the worker's node */
    bool explore;    /* placed to calibrate its model */
} place_t;

/* When worker i is free of what it already runs or has queued (dmda), or
 * of what it runs (heft, whose plan is separate). */
static double avail(const dm_t *d, int i, double now)
{
    const dmw_t *w = &d->w[i];
    return maxd(now, d->heft ? w->run_end : w->exp_end);
}

/* Where t finishes first. Policy lock held. */
/* One task's estimates for every worker: a task's length depends only on
 * the worker's device kind, and its transfer only on the worker's memory
 * node (both read the same models and directory within one placement), so
 * each is asked once per kind or node, not once per worker. */
typedef struct memo {
    double len[TSR_DEVICE_KINDS];
    bool has_len[TSR_DEVICE_KINDS];
    double xfer[MAX_NODES];
    bool has_xfer[MAX_NODES];
} memo_t;

static void memo_init(memo_t *m)
{
    memset(m->has_len, 0, sizeof m->has_len);
    memset(m->has_xfer, 0, sizeof m->has_xfer);
}

static double memo_length(memo_t *m, const dm_t *d, tsr_sched_t *s, tsr_task_t t, int i)
{
    int k = d->w[i].kind;
    if (k < 0 || k >= TSR_DEVICE_KINDS)
        return tsr_sched_expected_length(s, t, i);
    if (!m->has_len[k]) {
        m->len[k] = tsr_sched_expected_length(s, t, i);
        m->has_len[k] = true;
    }
    return m->len[k];
}

static double memo_transfer(memo_t *m, const dm_t *d, tsr_sched_t *s, tsr_task_t t, int i)
{
    int n = d->w[i].node;
    if (n < 0 || n >= MAX_NODES)
        return tsr_sched_expected_transfer(s, t, i);
    if (!m->has_xfer[n]) {
        m->xfer[n] = tsr_sched_expected_transfer(s, t, i);
        m->has_xfer[n] = true;
    }
    return m->xfer[n];
}

static place_t choose(dm_t *d, tsr_sched_t *s, tsr_task_t t, double now)
{
    place_t best = {.worker = -1}, explore = {.worker = -1};
    double best_fin = INFINITY;
    int least = -1; /* least loaded worker that can run t */
    memo_t memo;
    memo_init(&memo);
    for (int i = 0; i < d->nw; i++) {
        if (!tsr_task_runs_on(t, s, i))
            continue;
        dmw_t *w = &d->w[i];
        if (least < 0 || atomic_load(&w->n) < atomic_load(&d->w[least].n))
            least = i;
        double len = memo_length(&memo, d, s, t, i);
        if (isnan(len)) {
            /* Unknown here: calibrate, one task at a time per worker. */
            if (w->exploring == 0 &&
                (explore.worker < 0 ||
                 atomic_load(&w->n) < atomic_load(&d->w[explore.worker].n)))
                explore.worker = i;
            continue;
        }
        double xfer = d->nnodes > 1 ? memo_transfer(&memo, d, s, t, i) : 0;
        double ready = xfer > 0 && w->node < MAX_NODES
                           ? maxd(now, d->link_free[w->node]) + xfer
                           : now;
        int pos = 0;
        double a = avail(d, i, now), start;
        if (d->heft) {
            tsr__timeline_retime(&w->tl, a);
            start = tsr__timeline_fit(&w->tl, a, ready, len, true, &pos);
        } else {
            start = maxd(a, ready);
        }
        double fin = start + len;
        if (fin < best_fin ||
            (fin == best_fin && atomic_load(&w->n) < atomic_load(&d->w[best.worker].n))) {
            best_fin = fin;
            best = (place_t){i, len, ready, start, pos, xfer > 0, false};
        }
    }
    if (explore.worker < 0 && best.worker < 0)
        explore.worker = least; /* unknown everywhere, and all calibrating */
    if (explore.worker < 0)
        return best;
    /* Exploring: no length to plan with; at the end of the worker's plan. */
    explore = (place_t){.worker = explore.worker, .ready = now, .explore = true};
    if (explore.worker >= 0) {
        double a = avail(d, explore.worker, now);
        if (d->heft) {
            dmw_t *w = &d->w[explore.worker];
            tsr__timeline_retime(&w->tl, a);
            explore.start = tsr__timeline_fit(&w->tl, a, now, 0, false, &explore.pos);
        } else {
            explore.start = a;
        }
    }
    return explore;
}

/* Book the placement: the link's copies and the worker's load. */
static void book(dm_t *d, tsr_task_t t, const place_t *p)
{
    dmw_t *w = &d->w[p->worker];
    if (p->moves && w->node < MAX_NODES && p->ready > d->link_free[w->node])
        d->link_free[w->node] = p->ready;
    w->queued += p->len;
    w->exploring += p->explore;
    F(t)->key = p->len;
    F(t)->worker = p->worker | (p->explore ? 1 << 30 : 0);
}

/* The task is done on worker i (both policies). Policy lock held. */
static void unbook(dm_t *d, tsr_task_t t, int i, double now)
{
    dmw_t *w = &d->w[i];
    double len = F(t)->key;
    w->queued = maxd(0, w->queued - len);
    if (F(t)->worker & (1 << 30))
        w->exploring--;
    if (d->heft) {
        if (--w->ntaken == 0 || w->run_end < now)
            w->run_end = now;
    } else {
        w->exp_end = now + w->queued;
    }
}

/* ---- dmda ------------------------------------------------------------------ */

static int dmda_push(tsr_sched_t *s, tsr_task_t t)
{
    dm_t *d = tsr_sched_data(s);
    double now = tsr_sched_now(s);
    pthread_mutex_lock(&d->m);
    place_t p = choose(d, s, t, now);
    book(d, t, &p);
    dmw_t *w = &d->w[p.worker];
    w->exp_end = maxd(p.start, now) + p.len;
    tsr_sched_prefetch(s, t, p.worker); /* before any pop can take it */
    tsr_tq_push_back(&w->q, t);
    atomic_fetch_add(&w->n, 1);
    pthread_mutex_unlock(&d->m);
    return p.worker;
}

static tsr_task_t dmda_pop(tsr_sched_t *s, int worker)
{
    dm_t *d = tsr_sched_data(s);
    dmw_t *w = &d->w[worker];
    if (atomic_load_explicit(&w->n, memory_order_relaxed) == 0)
        return NULL;
    pthread_mutex_lock(&d->m);
    tsr_task_t t = tsr_tq_take(&w->q, s, worker, 0);
    if (t)
        atomic_fetch_sub(&w->n, 1);
    pthread_mutex_unlock(&d->m);
    return t;
}

static void dm_done(tsr_sched_t *s, tsr_task_t t, int worker)
{
    dm_t *d = tsr_sched_data(s);
    double now = tsr_sched_now(s);
    pthread_mutex_lock(&d->m);
    unbook(d, t, worker, now);
    pthread_mutex_unlock(&d->m);
}

const tsr_sched_policy_t tsr__policy_dmda = {
    .name = "dmda",
    .description = "each task to the worker where it should finish first "
                   "(queue, transfers, models)",
    .init = dmda_init,
    .deinit = dm_deinit,
    .push = dmda_push,
    .pop = dmda_pop,
    .done = dm_done,
    .flags = TSR_SCHED_USES_MODELS,
};

/* ---- heft ------------------------------------------------------------------ */

static hrec_t *rec_of(tsr_task_t t) { return F(t)->data; }

static double rank_of(tsr_task_t t)
{
    hrec_t *r = rec_of(t);
    return r ? r->r.rank : 0;
}

/* Ready order: higher rank first, then submission order (key). */
static bool heft_before(tsr_task_t a, tsr_task_t b)
{
    double ra = rank_of(a), rb = rank_of(b);
    return ra != rb ? ra > rb : F(a)->key < F(b)->key;
}

static void heap_set(dm_t *d, int i, tsr_task_t t)
{
    d->heap[i] = t;
    F(t)->worker = i;
}

static void sift_up(dm_t *d, int i)
{
    tsr_task_t t = d->heap[i];
    while (i > 0 && heft_before(t, d->heap[(i - 1) / 2])) {
        heap_set(d, i, d->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    heap_set(d, i, t);
}

static void sift_down(dm_t *d, int i)
{
    tsr_task_t t = d->heap[i];
    for (;;) {
        int c = 2 * i + 1;
        if (c >= d->nheap)
            break;
        if (c + 1 < d->nheap && heft_before(d->heap[c + 1], d->heap[c]))
            c++;
        if (!heft_before(d->heap[c], t))
            break;
        heap_set(d, i, d->heap[c]);
        i = c;
    }
    heap_set(d, i, t);
}

static bool heap_push(dm_t *d, tsr_task_t t)
{
    if (d->nheap == d->capheap) {
        int cap = d->capheap ? 2 * d->capheap : 256;
        tsr_task_t *v = realloc(d->heap, (size_t)cap * sizeof *v);
        if (!v)
            return false;
        d->heap = v;
        d->capheap = cap;
    }
    heap_set(d, d->nheap++, t);
    sift_up(d, d->nheap - 1);
    hrec_t *r = rec_of(t);
    if (r)
        r->in_heap = true;
    atomic_store(&d->nready, d->nheap);
    return true;
}

static tsr_task_t heap_pop(dm_t *d)
{
    tsr_task_t t = d->heap[0];
    if (--d->nheap > 0) {
        heap_set(d, 0, d->heap[d->nheap]);
        sift_down(d, 0);
    }
    hrec_t *r = rec_of(t);
    if (r)
        r->in_heap = false;
    atomic_store(&d->nready, d->nheap);
    return t;
}

/* A successor submitted after t became ready raised t's rank. */
static void rank_raised(tsr_rank_node_t *n, void *arg)
{
    hrec_t *r = (hrec_t *)n;
    if (r->in_heap)
        sift_up(arg, F(r->t)->worker);
}

static void rec_release(hrec_t *r)
{
    if (--r->refs > 0)
        return;
    if (r->r.pred != r->pred_inline) {
        free(r->r.pred);
        free(r->r.comm);
    }
    free(r);
}

/* The record's rank is settled (its task was taken or is done): its
 * predecessors are done and no walk passes through it again. */
static void rec_freeze(hrec_t *r)
{
    if (r->r.frozen)
        return;
    r->r.frozen = true;
    for (int i = 0; i < r->r.npred; i++)
        rec_release((hrec_t *)r->r.pred[i]);
    r->r.npred = 0;
}

/* Mean transfer time between workers, for `bytes` (ranks use means). */
static double mean_comm(dm_t *d, tsr_sched_t *s, size_t bytes)
{
    if (!d->comm_known) {
        double lat = 0, slope = 0;
        long pairs = 0;
        for (int a = 0; a < d->nw; a++)
            for (int b = 0; b < d->nw; b++) {
                if (a == b)
                    continue;
                pairs++;
                int na = d->w[a].node, nb = d->w[b].node;
                if (na == nb)
                    continue;
                double l = tsr_sched_transfer_time(s, na, nb, 0);
                lat += l;
                slope += (tsr_sched_transfer_time(s, na, nb, 1 << 20) - l) / (1 << 20);
            }
        d->mean_lat = pairs ? lat / (double)pairs : 0;
        d->mean_inv_bw = pairs ? slope / (double)pairs : 0;
        d->comm_known = true;
    }
    return bytes ? d->mean_lat + d->mean_inv_bw * (double)bytes : 0;
}

static bool writes(tsr_mode_t m) { return m != TSR_R && m != TSR_SCRATCH; }
static bool reads_mode(tsr_mode_t m)
{
    return m == TSR_R || m == TSR_RW || m == TSR_COMMUTE;
}

/* Bytes t reads that p writes. */
static size_t shared_bytes(tsr_task_t p, tsr_task_t t)
{
    size_t b = 0;
    for (int i = 0; i < tsr_task_nbuffers(t); i++) {
        if (!reads_mode(tsr_task_mode(t, i)))
            continue;
        tsr_handle_t h = tsr_task_handle(t, i);
        for (int k = 0; k < tsr_task_nbuffers(p); k++)
            if (tsr_task_handle(p, k) == h && writes(tsr_task_mode(p, k))) {
                b += tsr_handle_size(h);
                break;
            }
    }
    return b;
}

static void heft_submitted(tsr_sched_t *s, tsr_task_t t)
{
    dm_t *d = tsr_sched_data(s);
    hrec_t *r = calloc(1, sizeof *r);
    if (!r)
        return; /* ranked 0: taken in submission order among its peers */
    r->t = t;
    r->refs = 1;
    double sum = 0;
    int known = 0;
    memo_t memo;
    memo_init(&memo);
    for (int i = 0; i < d->nw; i++) {
        double len = tsr_task_runs_on(t, s, i) ? memo_length(&memo, d, s, t, i) : NAN;
        if (!isnan(len)) {
            sum += len;
            known++;
        }
    }
    r->r.cost = known ? sum / known : UNKNOWN_COST;
    tsr_task_t inl[8], *preds = inl;
    int np = tsr_task_predecessors(t, inl, 8);
    if (np > 8) {
        preds = malloc((size_t)np * sizeof *preds);
        np = preds ? tsr_task_predecessors(t, preds, np) : 8;
        if (!preds)
            preds = inl;
    }
    r->r.pred = r->pred_inline;
    r->r.comm = r->comm_inline;
    if (np > 4) {
        r->r.pred = malloc((size_t)np * sizeof *r->r.pred);
        r->r.comm = malloc((size_t)np * sizeof *r->r.comm);
        if (!r->r.pred || !r->r.comm) {
            free(r->r.pred);
            free(r->r.comm);
            r->r.pred = r->pred_inline;
            r->r.comm = r->comm_inline;
            np = 4; /* fewer edges: ranks a little low, never wrong order of runs */
        }
    }
    pthread_mutex_lock(&d->m);
    for (int i = 0; i < np; i++) {
        hrec_t *p = rec_of(preds[i]);
        if (!p || p->r.frozen)
            continue;
        p->refs++;
        r->r.pred[r->r.npred] = &p->r;
        r->r.comm[r->r.npred++] = d->nnodes > 1 ? mean_comm(d, s, shared_bytes(preds[i], t)) : 0;
    }
    tsr__rank_add(&r->r, RANK_BUDGET, rank_raised, d);
    F(t)->data = r;
    pthread_mutex_unlock(&d->m);
    if (preds != inl)
        free(preds);
}

/* Placements made by one dispatch, to prefetch and wake for. */
typedef struct placed {
    int n;
    int worker[64];
} placed_t;

/* Put t into its worker's plan (or, should the plan be full, its
 * overflow queue, taken after the plan). Policy lock held. */
static void plan(dm_t *d, tsr_sched_t *s, tsr_task_t t, double now)
{
    place_t p = choose(d, s, t, now);
    book(d, t, &p);
    dmw_t *w = &d->w[p.worker];
    tsr_slot_t slot = {p.start, p.start + p.len, p.ready, p.len, t};
    tsr_sched_prefetch(s, t, p.worker); /* before any pop can take it */
    if (!tsr__timeline_insert(&w->tl, p.pos, slot))
        tsr_tq_push_back(&w->q, t);
    atomic_fetch_add(&w->n, 1);
    d->planned++;
}

/* Place ready tasks, highest rank first, while workers have room in their
 * plans; the workers of tasks other than `pushed` are listed in out for
 * waking. Policy lock held. */
static void dispatch(dm_t *d, tsr_sched_t *s, double now, tsr_task_t pushed,
                     int *pushed_to, placed_t *out)
{
    while (d->nheap > 0 && d->planned < (long)d->nw * LOOKAHEAD) {
        tsr_task_t t = heap_pop(d);
        plan(d, s, t, now);
        int w = F(t)->worker & ~(1 << 30);
        if (t == pushed) {
            *pushed_to = w;
            continue;
        }
        if (out->n < 64)
            out->worker[out->n++] = w;
    }
}

static void wake_placed(tsr_sched_t *s, const placed_t *pl, int except)
{
    for (int i = 0; i < pl->n; i++)
        if (pl->worker[i] != except)
            tsr_sched_notify(s, pl->worker[i]);
}

static int heft_push(tsr_sched_t *s, tsr_task_t t)
{
    dm_t *d = tsr_sched_data(s);
    double now = tsr_sched_now(s);
    placed_t pl = {0};
    int to = -1;
    pthread_mutex_lock(&d->m);
    F(t)->key = d->seq++;
    if (heap_push(d, t)) {
        dispatch(d, s, now, t, &to, &pl);
    } else {
        plan(d, s, t, now); /* no memory to wait by rank: placed at once */
        to = F(t)->worker & ~(1 << 30);
    }
    pthread_mutex_unlock(&d->m);
    wake_placed(s, &pl, to);
    return to; /* -1: waiting by rank; a worker with room will place it */
}

static tsr_task_t heft_pop(tsr_sched_t *s, int worker)
{
    dm_t *d = tsr_sched_data(s);
    dmw_t *w = &d->w[worker];
    if (atomic_load_explicit(&w->n, memory_order_relaxed) == 0 &&
        atomic_load_explicit(&d->nready, memory_order_relaxed) == 0)
        return NULL;
    double now = tsr_sched_now(s);
    placed_t pl = {0};
    int to = -1;
    tsr_task_t t = NULL;
    pthread_mutex_lock(&d->m);
    dispatch(d, s, now, NULL, &to, &pl);
    if (w->tl.n > 0) {
        t = w->tl.v[0].item;
        tsr__timeline_remove(&w->tl, 0);
    } else if (w->q.n > 0) {
        t = tsr_tq_take(&w->q, s, worker, 0);
    }
    if (t) {
        atomic_fetch_sub(&w->n, 1);
        d->planned--;
        w->run_end = maxd(now, w->run_end) + F(t)->key;
        w->ntaken++;
        hrec_t *r = rec_of(t);
        if (r)
            rec_freeze(r);
    }
    pthread_mutex_unlock(&d->m);
    wake_placed(s, &pl, worker);
    return t;
}

static void heft_done(tsr_sched_t *s, tsr_task_t t, int worker)
{
    dm_t *d = tsr_sched_data(s);
    double now = tsr_sched_now(s);
    pthread_mutex_lock(&d->m);
    unbook(d, t, worker, now);
    hrec_t *r = rec_of(t);
    F(t)->data = NULL; /* later submissions see no edge to a done task */
    if (r) {
        rec_freeze(r);
        rec_release(r);
    }
    pthread_mutex_unlock(&d->m);
}

const tsr_sched_policy_t tsr__policy_heft = {
    .name = "heft",
    .description = "dmda with upward-rank order and insertion into idle gaps",
    .init = heft_init,
    .deinit = dm_deinit,
    .submitted = heft_submitted,
    .push = heft_push,
    .pop = heft_pop,
    .done = heft_done,
    .flags = TSR_SCHED_USES_MODELS | TSR_SCHED_WANTS_PREDECESSORS,
};
