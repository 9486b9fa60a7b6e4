/* runtime/handle.c — data handles: their ids (what the application holds,
 * checked at every call), their lifetime and host access, and the
 * sequential-task-flow rules that turn each access into dependencies.
 *
 * Must never: dereference an id that is not a live handle's, or hand out
 * an id twice.
 *
 * Per handle we keep the last writer (or the open group of COMMUTE tasks)
 * and the readers since. A reader waits for the writers; a writer waits for
 * the readers since the last write, or for the last writers when there were
 * none; a COMMUTE task waits for what preceded its group, never for the
 * other members (their mutual exclusion is enforced when they run).
 */
#include "runtime/driver.h"
#include "runtime/internal.h"

#include <assert.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- task lists -------------------------------------------------------- */

int tsr__tasklist_push(tsr_tasklist_t *l, tsr_task_t t)
{
    if (l->n == l->cap) {
        tsr__tasklist_prune(l);
        if (l->n * 2 >= l->cap) { /* still half full: grow */
            int cap = l->cap ? l->cap * 2 : 4;
            tsr_task_t *v = realloc(l->v, (size_t)cap * sizeof *v);
            if (!v)
                return TSR_ENOMEM;
            l->v = v;
            l->cap = cap;
        }
    }
    tsr__task_ref(t);
    l->v[l->n++] = t;
    return TSR_OK;
}

void tsr__tasklist_clear(tsr_tasklist_t *l)
{
    for (int i = 0; i < l->n; i++)
        tsr__task_unref(l->v[i]);
    l->n = 0;
}

/* DONE is stored with release under the task's lock; once seen it stays. */
static bool task_done(tsr_task_t t)
{
    return __atomic_load_n(&t->state, __ATOMIC_ACQUIRE) == TSR_TASK_DONE;
}

void tsr__tasklist_prune(tsr_tasklist_t *l)
{
    int k = 0;
    for (int i = 0; i < l->n; i++) {
        if (task_done(l->v[i]))
            tsr__task_unref(l->v[i]);
        else
            l->v[k++] = l->v[i];
    }
    l->n = k;
}

int tsr__tasklist_copy(tsr_tasklist_t *dst, const tsr_tasklist_t *src)
{
    tsr__tasklist_clear(dst);
    for (int i = 0; i < src->n; i++)
        if (tsr__tasklist_push(dst, src->v[i]) != TSR_OK)
            return TSR_ENOMEM;
    return TSR_OK;
}

static void tasklist_free(tsr_tasklist_t *l)
{
    tsr__tasklist_clear(l);
    free(l->v);
    l->v = NULL;
    l->cap = 0;
}

/* ---- dependencies ------------------------------------------------------ */

/* t waits for p unless p is already complete. `reads`: t reads what p
 * wrote, so a failure of p cancels t (a pure writer is only ordered). */
static void depend_on(tsr_task_t t, tsr_task_t p, bool reads)
{
    if (p == t)
        return;
    pthread_mutex_lock(&p->lock);
    if (p->state == TSR_TASK_DONE) {
        bool failed = p->result != TSR_RESULT_OK;
        pthread_mutex_unlock(&p->lock);
        if (failed && reads)
            tsr__task_cancel(t, p);
        return;
    }
    if (p->nsucc == p->capsucc) {
        int cap = p->capsucc * 2;
        uintptr_t *v = p->succ == p->succ_inline
                           ? malloc((size_t)cap * sizeof *v)
                           : realloc(p->succ, (size_t)cap * sizeof *v);
        if (!v) {
            /* Without memory for the edge, order by waiting: correct, slow. */
            pthread_mutex_unlock(&p->lock);
            while (!task_done(p))
                sched_yield();
            pthread_mutex_lock(&p->lock);
            bool failed = p->result != TSR_RESULT_OK;
            pthread_mutex_unlock(&p->lock);
            if (failed && reads)
                tsr__task_cancel(t, p);
            return;
        }
        if (p->succ == p->succ_inline)
            memcpy(v, p->succ_inline, sizeof p->succ_inline);
        p->succ = v;
        p->capsucc = cap;
    }
    /* p launched on a device: t may follow it there (its guard's drop
     * checks) */
    bool counted = p->launch_node1 > 0 && tsr__task_dev_count(p, t);
    p->succ[p->nsucc++] = (uintptr_t)t | (reads ? 1u : 0u) | (counted ? 2u : 0u);
    atomic_fetch_add_explicit(&t->ndeps, 1, memory_order_relaxed);
    pthread_mutex_unlock(&p->lock);
    /* The policy wants t's predecessors in submitted(): keep p alive till
     * then (no memory for the list only costs the policy an edge). */
    if (tsr__tl_preds_of == t)
        (void)tsr__tasklist_push(&tsr__tl_preds, p);
}

void tsr__task_depend(tsr_task_t t, tsr_task_t p) { depend_on(t, p, true); }

static void depend_on_all(tsr_task_t t, const tsr_tasklist_t *l, bool reads)
{
    for (int i = 0; i < l->n; i++)
        depend_on(t, l->v[i], reads);
}

/* Close h's open REDUX group (redux.c makes its REDUCE task): the REDUCE
 * task waits for every member and becomes the last writer. Handle lock
 * held. Its submission guard is left for the caller to drop once the lock
 * is released. */
static int close_redux_group(tsr_data_t *h, tsr_task_t *reduce)
{
    tsr_task_t r = tsr__redux_close(h);
    if (!r)
        return TSR_ENOMEM;
    depend_on_all(r, &h->writers, true);
    tsr__tasklist_clear(&h->writers);
    tsr__tasklist_clear(&h->readers);
    tsr__tasklist_clear(&h->commute_pred);
    *reduce = r;
    return tsr__tasklist_push(&h->writers, r);
}

/* A new group (COMMUTE or REDUX) waits for what came before it. */
static int open_group(tsr_data_t *h)
{
    const tsr_tasklist_t *pred = h->readers.n ? &h->readers : &h->writers;
    int rc = tsr__tasklist_copy(&h->commute_pred, pred);
    tsr__tasklist_clear(&h->writers);
    tsr__tasklist_clear(&h->readers);
    return rc;
}

int tsr__handle_depend(tsr_data_t *h, tsr_task_t t, tsr_mode_t mode, int slot,
                       tsr_task_t *reduce)
{
    int rc = TSR_OK;
    bool reads = mode != TSR_W;
    *reduce = NULL;
    pthread_mutex_lock(&h->lock);
    if (mode == TSR_REDUX) {
        /* Members wait for what preceded the group, never for each other. */
        if (!h->redux) {
            h->commute_open = false;
            rc = open_group(h);
            if (tsr__redux_open(h) != TSR_OK)
                rc = TSR_ENOMEM;
        }
        depend_on_all(t, &h->commute_pred, true);
        tsr__redux_join(h, t, slot);
        if (rc == TSR_OK)
            rc = tsr__tasklist_push(&h->writers, t);
        pthread_mutex_unlock(&h->lock);
        return rc;
    }
    if (h->redux)
        rc = close_redux_group(h, reduce);
    if (mode == TSR_R) {
        depend_on_all(t, &h->writers, true);
        h->commute_open = false;
        if (rc == TSR_OK)
            rc = tsr__tasklist_push(&h->readers, t);
    } else if (mode == TSR_COMMUTE) {
        if (!h->commute_open) {
            int r2 = open_group(h);
            rc = rc ? rc : r2;
            h->commute_open = true;
        }
        depend_on_all(t, &h->commute_pred, true);
        if (rc == TSR_OK)
            rc = tsr__tasklist_push(&h->writers, t);
    } else { /* W, RW */
        /* A writer waits for the readers since the last write; the edges
         * to the last writers matter only to carry their failure to a
         * writer that also reads (RW). */
        tsr__tasklist_prune(&h->readers);
        depend_on_all(t, &h->readers, false);
        if (!h->readers.n || reads)
            depend_on_all(t, &h->writers, reads);
        tsr__tasklist_clear(&h->readers);
        tsr__tasklist_clear(&h->writers);
        tsr__tasklist_clear(&h->commute_pred);
        h->commute_open = false;
        int r2 = tsr__tasklist_push(&h->writers, t);
        rc = rc ? rc : r2;
    }
    pthread_mutex_unlock(&h->lock);
    return rc;
}

/* ---- handle ids ---------------------------------------------------------- */

/* The application never holds a pointer to a handle: its tsr_handle_t is
 * the id (generation << IDX_BITS) | (slot + 1), cast to the opaque pointer
 * type. The slot table maps a slot to its handle while the generation
 * matches. Unregistering retires the generation, and a freed slot serves a
 * new handle under a new generation. Generations come from one counter that
 * survives tsr_shutdown, so an unregistered handle, one from an earlier
 * runtime, or a value register/alloc never returned is refused with
 * TSR_EINVAL instead of being dereferenced.
 *
 * The table is chunked and chunks never move while the runtime runs, so a
 * lookup takes no lock: it reads the slot's generation, its handle, and the
 * generation again (a slot freed and reused in between reads as stale).
 * Assigning and freeing slots take the registry lock.
 *
 * Pins: a public call that uses a handle beyond the lookup (a submission
 * until its dependencies are recorded, an acquisition until it is granted)
 * pins it: the slot's word counts the calls in progress next to the
 * generation, raised by compare-and-swap only while the generation still
 * matches, so a handle is never freed under a call that found it. Its
 * unregistration first marks the slot closing (new pins are refused with
 * TSR_EBUSY, releases excepted), waits for the pins of calls in progress
 * to drain, and only then decides: an acquired handle stays (TSR_EBUSY),
 * any other is retired, its tasks waited for and freed. The word is
 * gen << 25 | closing << 24 | pins.
 *
 * Every handle has an id, REDUX accumulators too: tasks carry the ids of
 * their buffers for policies (tsr_task_handle, tsr_handle_nodes), and the
 * runtime's pointers beside them. */
#define IDX_BITS 26
#define CHUNK_BITS 12
#define CHUNK_SLOTS (1u << CHUNK_BITS)
#define NCHUNKS (1u << (IDX_BITS - CHUNK_BITS))
/* slot + 1 must fit in IDX_BITS */
#define MAX_SLOTS ((1u << IDX_BITS) - 1)

_Static_assert(sizeof(uintptr_t) >= 8, "handle ids need 64-bit pointers");

typedef struct slot {
    _Atomic uint64_t w;        /* gen << 25 | closing << 24 | pins; gen 0: free */
    tsr_data_t *_Atomic h;
} slot_t;

#define W_GEN_SHIFT 25
#define W_CLOSING (UINT64_C(1) << 24)
#define W_PINS (W_CLOSING - 1)
#define W_GEN(w) ((w) >> W_GEN_SHIFT)
_Static_assert(64 - IDX_BITS + W_GEN_SHIFT <= 64, "generation and pins share a word");

static struct {
    slot_t *_Atomic chunk[NCHUNKS];
    uint32_t nslots;           /* slots used since init (under reg_m) */
    uint32_t *free;            /* slots to reuse (under reg_m); room for */
    uint32_t nfree, capfree;   /* every slot, so freeing never allocates */
} ids;

/* 2^38 handles can be made before a generation repeats. */
static _Atomic uint64_t last_gen;

static slot_t *slot_at(uint32_t idx)
{
    slot_t *c = atomic_load_explicit(&ids.chunk[idx >> CHUNK_BITS],
                                     memory_order_acquire);
    return c ? &c[idx & (CHUNK_SLOTS - 1)] : NULL;
}

/* Give h a slot and a fresh generation. reg_m held. */
static int id_assign(tsr_data_t *h)
{
    if (ids.nfree == 0 && ids.nslots == MAX_SLOTS)
        return TSR_ENOMEM;
    if (ids.nfree == 0 && ids.nslots == ids.capfree) {
        uint32_t cap = ids.capfree ? ids.capfree * 2 : CHUNK_SLOTS;
        uint32_t *v = realloc(ids.free, (size_t)cap * sizeof *v);
        if (!v)
            return TSR_ENOMEM;
        ids.free = v;
        ids.capfree = cap;
    }
    uint32_t idx;
    if (ids.nfree > 0) {
        idx = ids.free[--ids.nfree];
    } else {
        idx = ids.nslots;
        slot_t *_Atomic *cp = &ids.chunk[idx >> CHUNK_BITS];
        if (!atomic_load_explicit(cp, memory_order_relaxed)) {
            slot_t *c = calloc(CHUNK_SLOTS, sizeof *c);
            if (!c)
                return TSR_ENOMEM;
            atomic_store_explicit(cp, c, memory_order_release);
        }
        ids.nslots++;
    }
    uint64_t gen = atomic_fetch_add(&last_gen, 1) + 1;
    gen &= (UINT64_C(1) << (64 - IDX_BITS)) - 1;
    if (gen == 0) /* wrapped: 0 means free */
        gen = atomic_fetch_add(&last_gen, 1) + 1;
    slot_t *s = slot_at(idx);
    atomic_store_explicit(&s->h, h, memory_order_relaxed);
    atomic_store_explicit(&s->w, gen << W_GEN_SHIFT, memory_order_release);
    h->slot = idx;
    h->id = (tsr_handle_t)(uintptr_t)(gen << IDX_BITS | (uint64_t)(idx + 1));
    return TSR_OK;
}

static uint64_t id_gen(tsr_handle_t id) { return (uint64_t)(uintptr_t)id >> IDX_BITS; }

/* Retire h's id (later lookups and pins fail), keeping the pins count. */
static void id_retire(tsr_data_t *h)
{
    _Atomic uint64_t *w = &slot_at(h->slot)->w;
    uint64_t v = atomic_load(w);
    while (!atomic_compare_exchange_weak(w, &v, v & W_PINS))
        ;
}

/* Undo id_retire (the unregistration could not go on). No pins: the
 * unregistering call dropped its own. */
static void id_restore(tsr_data_t *h)
{
    atomic_store_explicit(&slot_at(h->slot)->w, id_gen(h->id) << W_GEN_SHIFT,
                          memory_order_release);
}

/* The slot serves new handles. reg_m held. */
static void id_free(tsr_data_t *h)
{
    slot_t *s = slot_at(h->slot);
    atomic_store_explicit(&s->w, 0, memory_order_release);
    atomic_store_explicit(&s->h, NULL, memory_order_release);
    ids.free[ids.nfree++] = h->slot;
    h->id = NULL;
}

tsr_data_t *tsr__handle_lookup(tsr_handle_t id)
{
    uint64_t v = (uint64_t)(uintptr_t)id;
    uint64_t gen = v >> IDX_BITS;
    uint64_t idx1 = v & ((UINT64_C(1) << IDX_BITS) - 1);
    if (gen == 0 || idx1 == 0)
        return NULL;
    if (idx1 - 1 >= MAX_SLOTS)
        return NULL;
    slot_t *s = slot_at((uint32_t)(idx1 - 1));
    if (!s || W_GEN(atomic_load_explicit(&s->w, memory_order_acquire)) != gen)
        return NULL;
    tsr_data_t *h = atomic_load_explicit(&s->h, memory_order_acquire);
    if (W_GEN(atomic_load_explicit(&s->w, memory_order_acquire)) != gen)
        return NULL;
    return h;
}

/* Pin the handle id names: TSR_OK and *out, or why not (stale: EINVAL;
 * being unregistered: EBUSY unless `closing_ok`). */
static int pin(tsr_handle_t id, const char *what, bool closing_ok, tsr_data_t **out)
{
    *out = NULL;
    if (!tsr__running())
        return tsr__fail(TSR_ESTATE, "%s: runtime not initialized", what);
    if (!id)
        return tsr__fail(TSR_EINVAL, "%s: handle is NULL", what);
    uint64_t v = (uint64_t)(uintptr_t)id;
    uint64_t gen = v >> IDX_BITS, idx1 = v & ((UINT64_C(1) << IDX_BITS) - 1);
    slot_t *s = gen && idx1 && idx1 - 1 < MAX_SLOTS ? slot_at((uint32_t)(idx1 - 1)) : NULL;
    uint64_t w = s ? atomic_load_explicit(&s->w, memory_order_acquire) : 0;
    for (;;) {
        if (!s || W_GEN(w) != gen)
            return tsr__fail(TSR_EINVAL,
                             "%s: stale handle %p (unregistered, from before the last "
                             "tsr_shutdown, or never returned by register/alloc)",
                             what, (void *)id);
        if ((w & W_CLOSING) && !closing_ok)
            return tsr__fail(TSR_EBUSY, "%s: handle %p is being unregistered", what,
                             (void *)id);
        if ((w & W_PINS) == W_PINS)
            return tsr__fail(TSR_EBUSY, "%s: handle %p is in too many calls at once", what,
                             (void *)id);
        if (atomic_compare_exchange_weak_explicit(&s->w, &w, w + 1, memory_order_acq_rel,
                                                  memory_order_acquire))
            break;
    }
    *out = atomic_load_explicit(&s->h, memory_order_acquire);
    return TSR_OK;
}

int tsr__handle_pin(tsr_handle_t id, const char *what, tsr_data_t **out)
{
    return pin(id, what, false, out);
}

void tsr__handle_unpin(tsr_data_t *h)
{
    uint64_t was = atomic_fetch_sub_explicit(&slot_at(h->slot)->w, 1, memory_order_acq_rel);
    assert((was & W_PINS) > 0);
    (void)was;
}

void tsr__handles_fini(void)
{
    pthread_mutex_lock(&tsr__rt.reg_m);
    for (uint32_t c = 0; c < NCHUNKS; c++) {
        free(atomic_load(&ids.chunk[c]));
        atomic_store(&ids.chunk[c], NULL);
    }
    free(ids.free);
    ids.free = NULL;
    ids.nslots = ids.nfree = ids.capfree = 0;
    pthread_mutex_unlock(&tsr__rt.reg_m);
}

/* ---- handle lifetime --------------------------------------------------- */

static int handle_new(tsr_handle_t *out, void *ptr, size_t size, bool registered)
{
    if (!out)
        return tsr__fail(TSR_EINVAL, "handle: output pointer is NULL");
    *out = NULL;
    if (!tsr__running())
        return tsr__fail(TSR_ESTATE, "handle: runtime not initialized");
    if (size == 0)
        return tsr__fail(TSR_EINVAL, "handle: size is 0");
    /* Sizes near SIZE_MAX would wrap when rounded to an alignment or summed
     * over a task's buffers: a tiny buffer that claims to be huge. */
    if (size > TSR_MAX_HANDLE_SIZE)
        return tsr__fail(TSR_EINVAL, "handle: size %zu is more than the largest handle "
                         "(TSR_MAX_HANDLE_SIZE, %zu bytes)", size, (size_t)TSR_MAX_HANDLE_SIZE);
    if (registered && !ptr)
        return tsr__fail(TSR_EINVAL, "handle_register: buffer is NULL");
    tsr_data_t *h = tsr__handle_new_internal(ptr, size);
    if (!h)
        return tsr__fail(TSR_ENOMEM, "handle: out of memory, or no free handle id "
                         "(%u live at most)", MAX_SLOTS);
    pthread_mutex_lock(&tsr__rt.reg_m);
    h->internal = false; /* the application's: in the registry */
    h->reg_next = tsr__rt.reg_head;
    if (h->reg_next)
        h->reg_next->reg_prev = h;
    tsr__rt.reg_head = h;
    pthread_mutex_unlock(&tsr__rt.reg_m);
    *out = h->id;
    return TSR_OK;
}

tsr_data_t *tsr__handle_new_internal(void *ptr, size_t size)
{
    tsr_data_t *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->entry = tsr__entry_new(ptr, size);
    if (!h->entry) {
        free(h);
        return NULL;
    }
    /* Accumulators get ids too: policies see their combining tasks. */
    pthread_mutex_lock(&tsr__rt.reg_m);
    int rc = id_assign(h);
    pthread_mutex_unlock(&tsr__rt.reg_m);
    if (rc != TSR_OK) {
        tsr__entry_free(h->entry);
        free(h);
        return NULL;
    }
    h->size = size;
    h->registered = ptr != NULL;
    h->internal = true;
    pthread_mutex_init(&h->lock, NULL);
    pthread_mutex_init(&h->use_m, NULL);
    return h;
}

int tsr_handle_register(tsr_handle_t *out, void *ptr, size_t size)
{
    return handle_new(out, ptr, size, true);
}

int tsr_handle_alloc(tsr_handle_t *out, size_t size)
{
    return handle_new(out, NULL, size, false);
}

size_t tsr_handle_size(tsr_handle_t id)
{
    tsr_data_t *h;
    if (tsr__handle_pin(id, "handle_size", &h) != TSR_OK)
        return 0;
    size_t size = h->size;
    tsr__handle_unpin(h);
    return size;
}

/* A host access's data is there (or failed): on a copy engine, or on the
 * thread that runs simulated events. */
typedef struct host_wait {
    atomic_int done;
} host_wait_t;

static void host_ready(tsr_mem_req_t *r)
{
    host_wait_t *hw = r->arg;
    atomic_store(&hw->done, 1);
    tsr__rt.driver->wake();
}

static bool host_is_ready(void *arg)
{
    return atomic_load(&((host_wait_t *)arg)->done) != 0;
}

/* Host access through the directory: pin h's host copy with `mode`,
 * waiting (through the driver) for the copies that make it valid. */
int tsr__handle_host_access(tsr_data_t *h, tsr_mem_req_t *r, int mode)
{
    memset(r, 0, sizeof *r);
    host_wait_t hw;
    atomic_init(&hw.done, 0);
    r->node = 0;
    r->n = 1;
    r->e[0] = h->entry;
    r->mode[0] = (uint8_t)mode;
    r->done = host_ready;
    r->arg = &hw;
    int rc = tsr__mem_acquire(r);
    if (rc == 0) {
        rc = tsr__rt.driver->wait(host_is_ready, &hw, "host access");
        if (rc != TSR_OK) {
            snprintf(r->err, sizeof r->err, "%s", tsr_error_message());
            return rc;
        }
        rc = atomic_load(&r->status);
    }
    return rc < 0 ? rc : TSR_OK;
}

int tsr__handle_flush(tsr_data_t *h)
{
    if (!h->registered)
        return TSR_OK;
    tsr_mem_req_t r;
    int rc = tsr__handle_host_access(h, &r, TSR_MEM_R);
    if (rc == TSR_OK)
        tsr__mem_release(&r);
    return rc == TSR_OK ? TSR_OK
                        : tsr__fail(rc, "unregister: cannot write the data back: %s", r.err);
}

void tsr__handle_free(tsr_data_t *h)
{
    pthread_mutex_lock(&tsr__rt.reg_m);
    if (!h->internal) {
        if (h->reg_prev)
            h->reg_prev->reg_next = h->reg_next;
        else
            tsr__rt.reg_head = h->reg_next;
        if (h->reg_next)
            h->reg_next->reg_prev = h->reg_prev;
    }
    id_free(h);
    pthread_mutex_unlock(&tsr__rt.reg_m);
    tsr__home_forget(h);
    tasklist_free(&h->writers);
    tasklist_free(&h->readers);
    tasklist_free(&h->commute_pred);
    tasklist_free(&h->commute_waiting);
    tsr__entry_free(h->entry);
    tsr__handle_uses_free(h);
    pthread_mutex_destroy(&h->lock);
    free(h);
}

/* Wait until the calls that pinned h before it was closed are done (the
 * caller holds one pin). They are short, or wait for tasks that progress
 * without this thread: an acquisition waits for its conflicting tasks. */
static void drain_pins(tsr_data_t *h)
{
    _Atomic uint64_t *w = &slot_at(h->slot)->w;
    for (int spins = 0; (atomic_load_explicit(w, memory_order_acquire) & W_PINS) > 1; spins++) {
        if (spins < 100)
            sched_yield();
        else
            nanosleep(&(struct timespec){0, 50000}, NULL);
    }
}

int tsr_handle_unregister(tsr_handle_t id)
{
    if (tsr__in_codelet())
        return tsr__fail(TSR_ESTATE, "handle_unregister: called from inside a codelet (it "
                         "would wait for the task that runs it)");
    tsr_data_t *h;
    int rc = tsr__handle_pin(id, "handle_unregister", &h);
    if (rc)
        return rc;
    /* Close the slot: new calls are refused, and a second unregistration
     * (or a racing one on another thread) too, instead of freeing h twice. */
    _Atomic uint64_t *w = &slot_at(h->slot)->w;
    uint64_t v = atomic_load(w);
    do {
        if (v & W_CLOSING) {
            tsr__handle_unpin(h);
            return tsr__fail(TSR_EINVAL, "handle_unregister: handle %p is being "
                             "unregistered already", (void *)id);
        }
    } while (!atomic_compare_exchange_weak(w, &v, v | W_CLOSING));
    drain_pins(h);
    pthread_mutex_lock(&h->lock);
    bool busy = h->acquired != NULL;
    pthread_mutex_unlock(&h->lock);
    if (busy) {
        atomic_fetch_and(w, ~W_CLOSING);
        tsr__handle_unpin(h);
        return tsr__fail(TSR_EBUSY,
                         "handle_unregister: handle is acquired; release it first");
    }
    /* From here the id is dead. */
    id_retire(h);
    tsr__handle_unpin(h);
    tsr_task_t t;
    rc = tsr__submit_internal(TSR_KIND_BARRIER, h, TSR_W, &t);
    if (rc) {
        id_restore(h);
        return rc;
    }
    tsr__task_wait(t); /* a failure of earlier tasks is reported by wait_all */
    rc = tsr__handle_flush(h);
    tsr__handle_free(h);
    return rc;
}

static bool acquire_is_ready(void *arg)
{
    tsr_task_t t = arg;
    pthread_mutex_lock(&t->lock);
    int st = t->state;
    pthread_mutex_unlock(&t->lock);
    return st != TSR_TASK_SUBMITTED;
}

static int acquire(tsr_data_t *h, tsr_mode_t mode, void **ptr);

int tsr_handle_acquire(tsr_handle_t id, tsr_mode_t mode, void **ptr)
{
    if (tsr__in_codelet())
        return tsr__fail(TSR_ESTATE, "handle_acquire: called from inside a codelet (it "
                         "would wait for tasks, the running one among them)");
    if (!ptr)
        return tsr__fail(TSR_EINVAL, "handle_acquire: ptr is NULL");
    if (mode != TSR_R && mode != TSR_W && mode != TSR_RW)
        return tsr__fail(TSR_EINVAL, "handle_acquire: mode must be R, W or RW");
    tsr_data_t *h;
    int rc = tsr__handle_pin(id, "handle_acquire", &h);
    if (rc)
        return rc;
    rc = acquire(h, mode, ptr);
    tsr__handle_unpin(h);
    return rc;
}

/* The acquisition of pinned h. Two threads acquiring one handle at once:
 * the second to record itself gets TSR_EBUSY after its wait. */
static int acquire(tsr_data_t *h, tsr_mode_t mode, void **ptr)
{
    pthread_mutex_lock(&h->lock);
    bool busy = h->acquired != NULL;
    pthread_mutex_unlock(&h->lock);
    if (busy)
        return tsr__fail(TSR_EBUSY, "handle_acquire: handle already acquired");
    tsr_task_t t;
    int rc;
    rc = tsr__submit_internal(TSR_KIND_ACQUIRE, h, mode, &t);
    if (rc)
        return rc;
    /* Wait until the acquisition is ready (all conflicting tasks done). */
    rc = tsr__rt.driver->wait(acquire_is_ready, t, "handle_acquire");
    if (rc != TSR_OK)
        return rc;
    if (atomic_load(&t->cancelled)) {
        /* A task that wrote it failed: the data cannot be trusted. The
         * cause came down the cancellations: it names the failed task,
         * its worker and memory node, and why. */
        char why[sizeof t->mreq.err];
        snprintf(why, sizeof why, "%s", t->mreq.err);
        int cause = t->cause;
        tsr__task_complete(t, TSR_RESULT_CANCELLED, -1);
        tsr__task_unref(t);
        return tsr__fail_cause(TSR_ETASK, cause,
                               "handle_acquire: a task writing the handle failed: %s", why);
    }
    tsr_mem_req_t *req = malloc(sizeof *req);
    rc = req ? tsr__handle_host_access(h, req, mode == TSR_R ? TSR_MEM_R
                                   : mode == TSR_W ? TSR_MEM_W : TSR_MEM_RW)
             : TSR_ENOMEM;
    if (rc != TSR_OK) {
        tsr__task_complete(t, TSR_RESULT_OK, -1);
        tsr__task_unref(t);
        rc = tsr__fail(rc, "handle_acquire: %s", req ? req->err : "out of memory");
        free(req);
        return rc;
    }
    void *p = req->ptr[0];
    pthread_mutex_lock(&h->lock);
    busy = h->acquired != NULL;
    if (!busy) {
        h->acquired = t; /* keeps the submission reference */
        h->acq_req = req;
    }
    pthread_mutex_unlock(&h->lock);
    if (busy) { /* another thread's acquisition was granted first */
        tsr__mem_release(req);
        free(req);
        tsr__task_complete(t, TSR_RESULT_OK, -1);
        tsr__task_unref(t);
        return tsr__fail(TSR_EBUSY, "handle_acquire: handle already acquired");
    }
    atomic_fetch_add(&tsr__rt.nacquired, 1);
    *ptr = p;
    return TSR_OK;
}

int tsr_handle_release(tsr_handle_t id)
{
    tsr_data_t *h;
    int rc = pin(id, "handle_release", true, &h);
    if (rc)
        return rc;
    pthread_mutex_lock(&h->lock);
    tsr_task_t t = h->acquired;
    tsr_mem_req_t *req = h->acq_req;
    h->acquired = NULL;
    h->acq_req = NULL;
    pthread_mutex_unlock(&h->lock);
    tsr__handle_unpin(h);
    if (!t)
        return tsr__fail(TSR_EINVAL, "handle_release: handle is not acquired");
    tsr__mem_release(req);
    free(req);
    atomic_fetch_sub(&tsr__rt.nacquired, 1);
    tsr__task_complete(t, TSR_RESULT_OK, -1);
    tsr__task_unref(t);
    return TSR_OK;
}

int tsr_handle_invalidate(tsr_handle_t id)
{
    tsr_data_t *h;
    int rc = tsr__handle_pin(id, "handle_invalidate", &h);
    if (rc)
        return rc;
    rc = tsr__submit_internal(TSR_KIND_INVALIDATE, h, TSR_W, NULL);
    if (rc == TSR_OK && tsr__rt.recording)
        tsr__record_event("invalidate", h);
    tsr__handle_unpin(h);
    return rc;
}

int tsr_handle_wont_use(tsr_handle_t id)
{
    tsr_data_t *h;
    int rc = tsr__handle_pin(id, "handle_wont_use", &h);
    if (rc)
        return rc;
    rc = tsr__submit_internal(TSR_KIND_WONTUSE, h, TSR_R, NULL);
    if (rc == TSR_OK && tsr__rt.recording)
        tsr__record_event("wont_use", h);
    tsr__handle_unpin(h);
    return rc;
}

void tsr__handles_release_acquired(void)
{
    pthread_mutex_lock(&tsr__rt.reg_m);
    for (tsr_data_t *h = tsr__rt.reg_head; h; h = h->reg_next) {
        pthread_mutex_lock(&h->lock);
        tsr_task_t t = h->acquired;
        tsr_mem_req_t *req = h->acq_req;
        h->acquired = NULL;
        h->acq_req = NULL;
        pthread_mutex_unlock(&h->lock);
        if (req) {
            tsr__mem_release(req);
            free(req);
        }
        if (t) {
            atomic_fetch_sub(&tsr__rt.nacquired, 1);
            tsr__task_complete(t, TSR_RESULT_OK, -1);
            tsr__task_unref(t);
        }
    }
    pthread_mutex_unlock(&tsr__rt.reg_m);
}

int tsr__handles_unregister_all(void)
{
    int rc = TSR_OK;
    for (;;) {
        pthread_mutex_lock(&tsr__rt.reg_m);
        tsr_data_t *h = tsr__rt.reg_head;
        pthread_mutex_unlock(&tsr__rt.reg_m);
        if (!h)
            break;
        /* An open REDUX group is combined into the handle first, as by
         * tsr_handle_unregister: a barrier closes it. */
        pthread_mutex_lock(&h->lock);
        bool open = h->redux != NULL;
        pthread_mutex_unlock(&h->lock);
        tsr_task_t t;
        if (open && tsr__submit_internal(TSR_KIND_BARRIER, h, TSR_W, &t) == TSR_OK)
            tsr__task_wait(t);
        int r = tsr__handle_flush(h);
        rc = rc ? rc : r;
        tsr__handle_free(h);
    }
    return rc;
}
