/* memory/evict.h — the order in which a node's idle copies are evicted.
 *
 * One indexed binary heap per node holds every copy allocated there (the
 * copy stores its heap position, so that a key change or a removal is
 * O(log n)), keyed so that the top is the copy to evict first:
 *   1. tier: copies whose contents no longer matter (invalid, won't use)
 *      before the others;
 *   2. under TSR_MEM_EVICT_WINDOW only: the next use, furthest first (no
 *      use in the submitted window at all before any use) — Belady's rule
 *      over the window the runtime knows;
 *   3. least recently used first (a per-node use counter).
 * Under TSR_MEM_EVICT_LRU rule 2 is ignored, and the order is exactly the
 * list the directory kept before: invalid copies first (the most recently
 * invalidated first), then least recently used.
 *
 * Evictions visit copies in key order without popping them (a small
 * frontier heap over the tree), skipping those in use, and stop once they
 * have freed enough.
 *
 * Copies the caller keeps aside (the directory's prefetched copies, which
 * only a demand may take) live in a second heap of the same key: a visit
 * of every copy merges the two heaps, in the one key order; a visit that
 * skips them never looks at them, where a walk over a host full of
 * prefetched copies used to step over each of them at every eviction.
 *
 * Must never: take a lock (the caller holds the node's), allocate on the
 * insert path beyond growing the heap, look at entries or replicas beyond
 * the item it is given, or order a kept-aside copy differently from the
 * others (a visit of every copy is the one key order, whichever heap holds
 * what).
 */
#ifndef TSR_MEMORY_EVICT_H
#define TSR_MEMORY_EVICT_H

#include <stdbool.h>
#include <stdint.h>

#define TSR_EVICT_NOWHERE UINT32_MAX
/* A visit's frontier marks the kept heap's positions with this bit: a heap
 * holds fewer items. */
#define TSR_EVICT_KEPT_BIT 0x80000000u

/* A copy's place in the order (embedded in the replica): its key as the
 * heap holds it, and the key it will have once the pending changes are
 * applied (while dirty). */
typedef struct tsr_evict_item {
    uint64_t next_use;  /* the entry's next use (TSR_NEXT_USE_NONE: none) */
    uint64_t stamp;     /* use counter at the last move (see tier) */
    uint64_t p_next_use, p_stamp; /* the pending key (dirty) */
    uint32_t idx;       /* heap position, TSR_EVICT_NOWHERE: not ordered */
    uint32_t dpos;      /* position in the order's dirty list (dirty) */
    uint8_t tier;       /* 0: contents no longer matter; 1: the others */
    uint8_t p_tier;
    bool dirty;         /* its pending key waits in the dirty list */
    bool kept;          /* in the kept-aside heap (idx is a position there) */
} tsr_evict_item_t;

/* Key changes (touches, next uses) reach the heap lazily: a copy's key
 * changes at every use and at every completion of a task that uses its
 * entry, and a heap fix per change (O(log n) cache misses) cost more than
 * anything else in a simulated run, while only evictions read the order.
 * A changed copy goes to the dirty list with its new key; a visit applies
 * every pending key first (a removal applies the copy's own). Keys are
 * unique (the stamps), so the order a visit sees does not depend on when
 * the heap was fixed. */
/* A heap's slot: an item and its key as the heap holds it, so that the
 * heap's and the visits' comparisons read the array, not the items
 * (scattered over the replicas: a cache miss each). hi is the window
 * rule's part of the key (~next_use in tier 1 under it, else 0). */
typedef struct tsr_evict_slot {
    uint64_t hi;
    uint64_t stamp;
    tsr_evict_item_t *it;
    uint32_t tier;
} tsr_evict_slot_t;

typedef struct tsr_evict_order {
    tsr_evict_slot_t *v; /* the heap of the copies not kept aside */
    uint32_t n, cap;      /* cap >= n + nk: an item coming back from the
                             kept heap never needs to grow v */
    tsr_evict_slot_t *kv; /* the kept-aside heap */
    uint32_t nk, capk;
    int rule;           /* TSR_MEM_EVICT_… */
    uint64_t clock;     /* the node's use counter */
    tsr_evict_item_t **dirty;
    uint32_t ndirty, capdirty;
} tsr_evict_order_t;

void tsr__evict_init(tsr_evict_order_t *o, int rule);
void tsr__evict_fini(tsr_evict_order_t *o);
/* Whether item a goes before item b (under o's rule). */
bool tsr__evict_before(const tsr_evict_order_t *o, const tsr_evict_item_t *a,
                       const tsr_evict_item_t *b);
/* Add it as just used (tier 1) or as not mattering (tier 0). Returns
 * false (nothing changed) when the heap cannot grow. */
bool tsr__evict_insert(tsr_evict_order_t *o, tsr_evict_item_t *it, bool matters);
void tsr__evict_remove(tsr_evict_order_t *o, tsr_evict_item_t *it);
/* It was used (matters) or its contents stopped mattering (!matters): a
 * fresh stamp; a copy that stopped mattering goes before every copy that
 * stopped mattering earlier (as a list's head insertion did). */
void tsr__evict_touch(tsr_evict_order_t *o, tsr_evict_item_t *it, bool matters);
/* Its entry's next use changed. */
void tsr__evict_set_next_use(tsr_evict_order_t *o, tsr_evict_item_t *it, uint64_t next_use);
/* Keep it aside (kept) or not: its key is unchanged, only the heap that
 * holds it. An item enters the order not kept. Returns false (nothing
 * changed) when the kept heap cannot grow: the item stays with the others,
 * and a visit that skips kept items visits it (the caller checks its own
 * flag too). Coming back never fails. */
bool tsr__evict_set_kept(tsr_evict_order_t *o, tsr_evict_item_t *it, bool kept);

/* A visit of the items in key order. The order must not change during a
 * visit except through tsr__evict_visit_removed (after removing the item
 * just visited), which starts the visit again from the top: items already
 * visited and still there are visited again. */
typedef struct tsr_evict_visit {
    uint32_t *f;        /* frontier: heap positions (TSR_EVICT_KEPT_BIT set:
                           in the kept heap), a min-heap by key */
    uint32_t n, cap;
    bool truncated;     /* the frontier could not grow: the visit ended early */
    bool skip_kept;     /* the kept-aside items are not visited */
    uint32_t inl[64];
} tsr_evict_visit_t;

/* Starting a visit applies the pending next uses. It visits every item;
 * _unkept every item not kept aside (a restart after a removal keeps to
 * the same items). */
void tsr__evict_visit_start(tsr_evict_order_t *o, tsr_evict_visit_t *v);
void tsr__evict_visit_start_unkept(tsr_evict_order_t *o, tsr_evict_visit_t *v);
/* The next item, or NULL at the end. */
tsr_evict_item_t *tsr__evict_visit_next(const tsr_evict_order_t *o, tsr_evict_visit_t *v);
void tsr__evict_visit_removed(tsr_evict_order_t *o, tsr_evict_visit_t *v);
void tsr__evict_visit_end(tsr_evict_visit_t *v);

#endif
