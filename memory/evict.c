/* memory/evict.c — the eviction order of a node's copies (evict.h). */
#include "memory/evict.h"

#include "memory/memory.h"

#include <assert.h>
#include <stdlib.h>

void tsr__evict_init(tsr_evict_order_t *o, int rule)
{
    *o = (tsr_evict_order_t){.rule = rule};
}

void tsr__evict_fini(tsr_evict_order_t *o)
{
    free(o->v);
    o->v = NULL;
    o->n = o->cap = 0;
    free(o->kv);
    o->kv = NULL;
    o->nk = o->capk = 0;
    free(o->dirty);
    o->dirty = NULL;
    o->ndirty = o->capdirty = 0;
}

bool tsr__evict_before(const tsr_evict_order_t *o, const tsr_evict_item_t *a,
                       const tsr_evict_item_t *b)
{
    if (a->tier != b->tier)
        return a->tier < b->tier;
    /* Copies that no longer matter go in stamp order alone: which one
     * frees memory for nothing first does not matter. */
    if (a->tier == 1 && o->rule == TSR_MEM_EVICT_WINDOW && a->next_use != b->next_use)
        return a->next_use > b->next_use; /* furthest (or none) first */
    return a->stamp < b->stamp;
}

/* The slot of it: its key as a heap holds it (evict.h). The window
 * rule's part is 0 wherever tsr__evict_before ignores the next use (tier
 * 0, the LRU rule), so that a next use changed in place there leaves the
 * slot as it is. */
static tsr_evict_slot_t slot_of(const tsr_evict_order_t *o, tsr_evict_item_t *it)
{
    bool by_use = it->tier == 1 && o->rule == TSR_MEM_EVICT_WINDOW;
    return (tsr_evict_slot_t){by_use ? ~it->next_use : 0, it->stamp, it, it->tier};
}

/* tsr__evict_before on slots. */
static inline bool slot_before(const tsr_evict_slot_t *a, const tsr_evict_slot_t *b)
{
    if (a->tier != b->tier)
        return a->tier < b->tier;
    if (a->hi != b->hi)
        return a->hi < b->hi;
    return a->stamp < b->stamp;
}

/* The heap that holds it (the kept one or the other) and its size. */
static tsr_evict_slot_t *heap_of(const tsr_evict_order_t *o, const tsr_evict_item_t *it)
{
    return it->kept ? o->kv : o->v;
}

static uint32_t size_of(const tsr_evict_order_t *o, const tsr_evict_item_t *it)
{
    return it->kept ? o->nk : o->n;
}

static void put(tsr_evict_slot_t *v, uint32_t i, const tsr_evict_slot_t *s)
{
    v[i] = *s;
    s->it->idx = i;
}

/* it, at position i, with its key changed (or new): up. */
static void sift_up(tsr_evict_order_t *o, uint32_t i, tsr_evict_item_t *it)
{
    tsr_evict_slot_t *v = heap_of(o, it);
    tsr_evict_slot_t s = slot_of(o, it);
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (!slot_before(&s, &v[p]))
            break;
        put(v, i, &v[p]);
        i = p;
    }
    put(v, i, &s);
}

static void sift_down(tsr_evict_order_t *o, uint32_t i, tsr_evict_item_t *it)
{
    tsr_evict_slot_t *v = heap_of(o, it);
    tsr_evict_slot_t s = slot_of(o, it);
    uint32_t n = size_of(o, it);
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && slot_before(&v[c + 1], &v[c]))
            c++;
        if (!slot_before(&v[c], &s))
            break;
        put(v, i, &v[c]);
        i = c;
    }
    put(v, i, &s);
}

/* After it's key changed in place. */
static void fix(tsr_evict_order_t *o, tsr_evict_item_t *it)
{
    uint32_t i = it->idx;
    sift_up(o, i, it);
    if (it->idx == i)
        sift_down(o, i, it);
}

/* Take it out of its heap (its key as it is), the last item of that heap
 * into its place. */
static void heap_remove(tsr_evict_order_t *o, tsr_evict_item_t *it)
{
    tsr_evict_slot_t *v = heap_of(o, it);
    uint32_t *n = it->kept ? &o->nk : &o->n;
    uint32_t i = it->idx;
    assert(i < *n && v[i].it == it);
    it->idx = TSR_EVICT_NOWHERE;
    tsr_evict_slot_t last = v[--*n];
    if (i == *n)
        return;
    put(v, i, &last);
    fix(o, last.it);
}

/* Take it off the dirty list with its pending key applied to the item
 * (not to the heap: the caller fixes it, or removes it). */
static void undirty(tsr_evict_order_t *o, tsr_evict_item_t *it)
{
    if (!it->dirty)
        return;
    it->next_use = it->p_next_use;
    it->stamp = it->p_stamp;
    it->tier = it->p_tier;
    it->dirty = false;
    tsr_evict_item_t *last = o->dirty[--o->ndirty];
    if (last != it) {
        o->dirty[it->dpos] = last;
        last->dpos = it->dpos;
    }
}

/* Every pending key into the heap. */
static void sync(tsr_evict_order_t *o)
{
    while (o->ndirty > 0) {
        tsr_evict_item_t *it = o->dirty[o->ndirty - 1];
        undirty(o, it);
        fix(o, it);
    }
}

/* Make it dirty (its pending key a copy of its key, for the caller to
 * change). Returns false when the dirty list cannot grow: the caller
 * changes the key in place and fixes the heap at once. */
static bool dirty(tsr_evict_order_t *o, tsr_evict_item_t *it)
{
    if (it->dirty)
        return true;
    if (o->ndirty == o->capdirty) {
        uint32_t cap = o->capdirty ? o->capdirty * 2 : 64;
        tsr_evict_item_t **d = realloc(o->dirty, (size_t)cap * sizeof *d);
        if (!d)
            return false;
        o->dirty = d;
        o->capdirty = cap;
    }
    it->p_next_use = it->next_use;
    it->p_stamp = it->stamp;
    it->p_tier = it->tier;
    it->dirty = true;
    it->dpos = o->ndirty;
    o->dirty[o->ndirty++] = it;
    return true;
}

/* A fresh stamp (tier 0: the latest first, the head of the list it
 * replaces). */
static void new_stamp(tsr_evict_order_t *o, bool matters, uint8_t *tier, uint64_t *stamp)
{
    uint64_t c = ++o->clock;
    *tier = matters ? 1 : 0;
    *stamp = matters ? c : UINT64_MAX - c;
}

/* Double a heap's array (64 slots first); false, unchanged, when out of
 * memory. */
static bool grow(tsr_evict_slot_t **v, uint32_t *cap)
{
    uint32_t c = *cap ? *cap * 2 : 64;
    tsr_evict_slot_t *nv = realloc(*v, (size_t)c * sizeof *nv);
    if (!nv)
        return false;
    *v = nv;
    *cap = c;
    return true;
}

bool tsr__evict_insert(tsr_evict_order_t *o, tsr_evict_item_t *it, bool matters)
{
    if (o->n + o->nk == o->cap) {
        if (o->cap >= TSR_EVICT_KEPT_BIT)
            return false; /* (positions must leave the frontier's bit free) */
        if (!grow(&o->v, &o->cap))
            return false;
    }
    it->dirty = false; /* not in the order: not in its dirty list */
    it->kept = false;
    new_stamp(o, matters, &it->tier, &it->stamp);
    sift_up(o, o->n++, it);
    return true;
}

void tsr__evict_remove(tsr_evict_order_t *o, tsr_evict_item_t *it)
{
    undirty(o, it);
    heap_remove(o, it);
    it->kept = false;
}

bool tsr__evict_set_kept(tsr_evict_order_t *o, tsr_evict_item_t *it, bool kept)
{
    if (it->idx == TSR_EVICT_NOWHERE || it->kept == kept)
        return it->kept == kept;
    if (kept && o->nk == o->capk && !grow(&o->kv, &o->capk))
        return false;
    /* Its pending key first: the heap it enters holds it by its key. */
    undirty(o, it);
    heap_remove(o, it);
    it->kept = kept;
    uint32_t *n = kept ? &o->nk : &o->n;
    assert(kept || o->n + o->nk < o->cap); /* its place in v was kept free */
    sift_up(o, (*n)++, it);
    return true;
}

void tsr__evict_touch(tsr_evict_order_t *o, tsr_evict_item_t *it, bool matters)
{
    if (dirty(o, it)) {
        new_stamp(o, matters, &it->p_tier, &it->p_stamp);
        return;
    }
    new_stamp(o, matters, &it->tier, &it->stamp);
    fix(o, it);
}

void tsr__evict_set_next_use(tsr_evict_order_t *o, tsr_evict_item_t *it, uint64_t next_use)
{
    if (it->dirty) {
        it->p_next_use = next_use;
        return;
    }
    if (it->next_use == next_use)
        return;
    /* not in the key: in place */
    if (o->rule != TSR_MEM_EVICT_WINDOW || it->tier != 1 || it->idx == TSR_EVICT_NOWHERE) {
        it->next_use = next_use;
        return;
    }
    if (dirty(o, it)) {
        it->p_next_use = next_use;
        return;
    }
    it->next_use = next_use;
    fix(o, it);
}

/* ---- visits ------------------------------------------------------------ */

/* The frontier holds the heap positions whose parent was visited and that
 * were not yet (the roots of both heaps to start with): its least item is
 * the next in key order, since every item not yet visited lies under one
 * of them and comes after it. */
static const tsr_evict_slot_t *f_slot(const tsr_evict_order_t *o, uint32_t pos)
{
    return pos & TSR_EVICT_KEPT_BIT ? &o->kv[pos & ~TSR_EVICT_KEPT_BIT] : &o->v[pos];
}

static bool f_less(const tsr_evict_order_t *o, const tsr_evict_visit_t *v, uint32_t a,
                   uint32_t b)
{
    return slot_before(f_slot(o, v->f[a]), f_slot(o, v->f[b]));
}

static void f_push(const tsr_evict_order_t *o, tsr_evict_visit_t *v, uint32_t pos)
{
    if (v->n == v->cap) {
        uint32_t cap = v->cap * 2;
        uint32_t *f = v->f == v->inl ? malloc((size_t)cap * sizeof *f)
                                     : realloc(v->f, (size_t)cap * sizeof *f);
        if (!f) {
            v->truncated = true;
            return;
        }
        if (v->f == v->inl)
            for (uint32_t i = 0; i < v->n; i++)
                f[i] = v->inl[i];
        v->f = f;
        v->cap = cap;
    }
    uint32_t i = v->n++;
    v->f[i] = pos;
    while (i > 0 && f_less(o, v, i, (i - 1) / 2)) {
        uint32_t p = (i - 1) / 2, t = v->f[p];
        v->f[p] = v->f[i];
        v->f[i] = t;
        i = p;
    }
}

static uint32_t f_pop(const tsr_evict_order_t *o, tsr_evict_visit_t *v)
{
    uint32_t top = v->f[0];
    v->f[0] = v->f[--v->n];
    uint32_t i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= v->n)
            break;
        if (c + 1 < v->n && f_less(o, v, c + 1, c))
            c++;
        if (!f_less(o, v, c, i))
            break;
        uint32_t t = v->f[c];
        v->f[c] = v->f[i];
        v->f[i] = t;
        i = c;
    }
    return top;
}

static void visit_start(tsr_evict_order_t *o, tsr_evict_visit_t *v, bool skip_kept)
{
    sync(o);
    if (!v->f) {
        v->f = v->inl;
        v->cap = sizeof v->inl / sizeof v->inl[0];
    }
    v->n = 0;
    v->truncated = false;
    v->skip_kept = skip_kept;
    if (o->n > 0)
        v->f[v->n++] = 0;
    if (!skip_kept && o->nk > 0)
        f_push(o, v, TSR_EVICT_KEPT_BIT);
}

void tsr__evict_visit_start(tsr_evict_order_t *o, tsr_evict_visit_t *v)
{
    visit_start(o, v, false);
}

void tsr__evict_visit_start_unkept(tsr_evict_order_t *o, tsr_evict_visit_t *v)
{
    visit_start(o, v, true);
}

tsr_evict_item_t *tsr__evict_visit_next(const tsr_evict_order_t *o, tsr_evict_visit_t *v)
{
    if (v->n == 0)
        return NULL;
    uint32_t pos = f_pop(o, v);
    uint32_t bit = pos & TSR_EVICT_KEPT_BIT, i = pos & ~TSR_EVICT_KEPT_BIT;
    uint32_t n = bit ? o->nk : o->n;
    for (uint32_t c = 2 * i + 1; c <= 2 * i + 2 && c < n; c++)
        f_push(o, v, c | bit);
    return f_slot(o, pos)->it;
}

void tsr__evict_visit_removed(tsr_evict_order_t *o, tsr_evict_visit_t *v)
{
    visit_start(o, v, v->skip_kept);
}

void tsr__evict_visit_end(tsr_evict_visit_t *v)
{
    if (v->f && v->f != v->inl)
        free(v->f);
    v->f = NULL;
    v->n = v->cap = 0;
}
