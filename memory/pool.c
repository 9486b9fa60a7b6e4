/* memory/pool.c — the caching sub-allocator of pool.h.
 *
 * Each chunk is tiled by ranges (tsr_pool_seg_t) kept in a doubly linked
 * list in address order; a range is either a live block or free, and two
 * free ranges are never neighbours (free() merges them). Free ranges are
 * also in a treap ordered by (size, address), so best fit, insert and
 * remove take O(log n) expected time; live blocks are in a hash table by
 * address, so free() finds its range in O(1).
 *
 * The backend is called with the mutex released: a new chunk is obtained
 * first, then registered and carved under the mutex; trim unlinks the idle
 * chunks under the mutex and gives them back after releasing it.
 */
#include "memory/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/tessera.h"

struct tsr_pool_seg {
    uintptr_t addr;
    size_t size;                   /* a multiple of TSR_POOL_ALIGN */
    size_t requested;              /* live block: what the caller asked for */
    tsr_pool_chunk_t *chunk;
    tsr_pool_seg_t *prev, *next;   /* neighbours in the chunk, by address */
    tsr_pool_seg_t *left, *right;  /* free range: treap children */
    tsr_pool_seg_t *hnext;         /* live block: hash chain */
    uint32_t prio;                 /* free range: treap heap priority */
    bool used;
};

struct tsr_pool_chunk {
    void *base;
    size_t bytes;
    size_t nused;                  /* live blocks in this chunk */
    tsr_pool_seg_t *first;         /* the lowest range */
    tsr_pool_chunk_t *prev, *next;
};

#define ALIGN TSR_POOL_ALIGN
#define HBITS_MIN 8u
#define HBITS_MAX 40u

static size_t round_up(size_t n) { return (n + ALIGN - 1) & ~(ALIGN - 1); }

/* ---- free ranges: a treap keyed by (size, addr) ------------------------ */

/* Key order: by size, then by address (addresses are unique, so keys are). */
static bool seg_less(const tsr_pool_seg_t *a, const tsr_pool_seg_t *b)
{
    return a->size < b->size || (a->size == b->size && a->addr < b->addr);
}

/* xorshift64: random heap priorities keep the treap balanced on average. */
static uint32_t next_prio(tsr_pool_t *p)
{
    uint64_t x = p->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p->rng = x;
    return (uint32_t)(x >> 32);
}

/* Join two treaps where every key of a is below every key of b. */
static tsr_pool_seg_t *treap_merge(tsr_pool_seg_t *a, tsr_pool_seg_t *b)
{
    if (!a)
        return b;
    if (!b)
        return a;
    if (a->prio > b->prio) {
        a->right = treap_merge(a->right, b);
        return a;
    }
    b->left = treap_merge(a, b->left);
    return b;
}

/* Split t into keys below key (*lo) and the rest (*hi). */
static void treap_split(tsr_pool_seg_t *t, const tsr_pool_seg_t *key, tsr_pool_seg_t **lo,
                        tsr_pool_seg_t **hi)
{
    if (!t) {
        *lo = *hi = NULL;
    } else if (seg_less(t, key)) {
        treap_split(t->right, key, &t->right, hi);
        *lo = t;
    } else {
        treap_split(t->left, key, lo, &t->left);
        *hi = t;
    }
}

/* Remove x (which is in t) from t; returns the new root. */
static tsr_pool_seg_t *treap_remove(tsr_pool_seg_t *t, const tsr_pool_seg_t *x)
{
    if (!t)
        return NULL;
    if (t == x)
        return treap_merge(t->left, t->right);
    if (seg_less(x, t))
        t->left = treap_remove(t->left, x);
    else
        t->right = treap_remove(t->right, x);
    return t;
}

/* Index a free range (its size and address are its key from now on). */
static void free_insert(tsr_pool_t *p, tsr_pool_seg_t *s)
{
    tsr_pool_seg_t *lo, *hi;
    s->used = false;
    s->left = s->right = NULL;
    s->prio = next_prio(p);
    treap_split(p->free_root, s, &lo, &hi);
    p->free_root = treap_merge(treap_merge(lo, s), hi);
    p->st.free_ranges++;
}

/* Unindex a free range, before its size changes or it becomes a block. */
static void free_remove(tsr_pool_t *p, tsr_pool_seg_t *s)
{
    p->free_root = treap_remove(p->free_root, s);
    s->left = s->right = NULL;
    p->st.free_ranges--;
}

/* The smallest free range of at least n bytes (lowest address among
 * equals), or NULL. */
static tsr_pool_seg_t *free_best_fit(const tsr_pool_t *p, size_t n)
{
    tsr_pool_seg_t *best = NULL;
    for (tsr_pool_seg_t *t = p->free_root; t;) {
        if (t->size >= n) {
            best = t;
            t = t->left;
        } else {
            t = t->right;
        }
    }
    return best;
}

/* ---- live blocks: a chained hash table by address ---------------------- */

static size_t hash_slot(unsigned bits, uintptr_t a)
{
    return (size_t)(((uint64_t)(a / ALIGN) * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

/* Double the table when chains grow long. If host memory is short the
 * table stays as it is: longer chains, still correct. */
static void hash_grow(tsr_pool_t *p)
{
    if (p->hbits >= HBITS_MAX)
        return;
    unsigned bits = p->hbits + 1;
    tsr_pool_seg_t **nb = calloc((size_t)1 << bits, sizeof *nb);
    if (!nb)
        return;
    for (size_t i = 0; i < ((size_t)1 << p->hbits); i++) {
        for (tsr_pool_seg_t *s = p->buckets[i], *nx; s; s = nx) {
            nx = s->hnext;
            size_t h = hash_slot(bits, s->addr);
            s->hnext = nb[h];
            nb[h] = s;
        }
    }
    free(p->buckets);
    p->buckets = nb;
    p->hbits = bits;
}

static void hash_insert(tsr_pool_t *p, tsr_pool_seg_t *s)
{
    if (p->st.blocks > ((size_t)2 << p->hbits))
        hash_grow(p);
    size_t h = hash_slot(p->hbits, s->addr);
    s->hnext = p->buckets[h];
    p->buckets[h] = s;
}

/* Unlink and return the live block at addr, or NULL if there is none. */
static tsr_pool_seg_t *hash_take(tsr_pool_t *p, uintptr_t addr)
{
    for (tsr_pool_seg_t **pp = &p->buckets[hash_slot(p->hbits, addr)]; *pp;
         pp = &(*pp)->hnext) {
        if ((*pp)->addr == addr) {
            tsr_pool_seg_t *s = *pp;
            *pp = s->hnext;
            s->hnext = NULL;
            return s;
        }
    }
    return NULL;
}

/* The live block at addr, or NULL if there is none. */
static const tsr_pool_seg_t *hash_find(const tsr_pool_t *p, uintptr_t addr)
{
    for (const tsr_pool_seg_t *s = p->buckets[hash_slot(p->hbits, addr)]; s; s = s->hnext)
        if (s->addr == addr)
            return s;
    return NULL;
}

/* ---- the pool ---------------------------------------------------------- */

int tsr_pool_init(tsr_pool_t *p, size_t chunk_size, tsr_pool_chunk_alloc_fn chunk_alloc,
                  tsr_pool_chunk_free_fn chunk_free, void *ctx)
{
    if (!p || !chunk_alloc || !chunk_free)
        return TSR_EINVAL;
    if (chunk_size == 0)
        chunk_size = TSR_POOL_DEFAULT_CHUNK;
    if (chunk_size > SIZE_MAX / 4)
        return TSR_EINVAL;
    memset(p, 0, sizeof *p);
    p->hbits = HBITS_MIN;
    p->buckets = calloc((size_t)1 << p->hbits, sizeof *p->buckets);
    if (!p->buckets)
        return TSR_ENOMEM;
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p->buckets);
        p->buckets = NULL;
        return TSR_ENOMEM;
    }
    p->chunk_size = round_up(chunk_size);
    p->chunk_alloc = chunk_alloc;
    p->chunk_free = chunk_free;
    p->ctx = ctx;
    p->rng = 0x853c49e6748fea9bull ^ (uint64_t)(uintptr_t)p;
    if (!p->rng)
        p->rng = 1;
    p->st.chunk_size = p->chunk_size;
    p->ready = true;
    return TSR_OK;
}

/* Make the range s (not in the free tree) a live block of n bytes for a
 * request of `size`: the rest of s, if any, becomes a free range recorded
 * in *rest (which is then consumed: *rest is set to NULL). Mutex held. */
static void carve(tsr_pool_t *p, tsr_pool_seg_t *s, size_t n, size_t size,
                  tsr_pool_seg_t **rest)
{
    if (s->size > n) {
        tsr_pool_seg_t *r = *rest;
        *rest = NULL;
        memset(r, 0, sizeof *r);
        r->addr = s->addr + n;
        r->size = s->size - n;
        r->chunk = s->chunk;
        r->prev = s;
        r->next = s->next;
        if (s->next)
            s->next->prev = r;
        s->next = r;
        s->size = n;
        free_insert(p, r);
    }
    s->used = true;
    s->requested = size;
    s->chunk->nused++;
    hash_insert(p, s);
    p->st.blocks++;
    p->st.in_use += n;
    p->st.requested += size;
    if (p->st.in_use > p->st.peak_in_use)
        p->st.peak_in_use = p->st.in_use;
}

/* One chunk from the backend, mutex released; NULL on failure (a
 * misaligned chunk is given straight back and is a failure too). */
static void *backend_try(tsr_pool_t *p, size_t bytes)
{
    void *b = p->chunk_alloc(p->ctx, bytes);
    if (b && ((uintptr_t)b % ALIGN) != 0) {
        p->chunk_free(p->ctx, b, bytes);
        b = NULL;
    }
    pthread_mutex_lock(&p->lock);
    if (b)
        p->st.backend_allocs++;
    else
        p->st.backend_failures++;
    pthread_mutex_unlock(&p->lock);
    return b;
}

/* A new chunk able to hold n bytes: *bytes is the preferred size on entry
 * and the size obtained on return. Trim and retry once when the backend
 * fails; then, if the preferred size is more than n, try n alone. */
static void *backend_get(tsr_pool_t *p, size_t *bytes, size_t n)
{
    void *b = backend_try(p, *bytes);
    if (b)
        return b;
    tsr_pool_trim(p);
    b = backend_try(p, *bytes);
    if (!b && *bytes > n) {
        b = backend_try(p, n);
        if (b)
            *bytes = n;
    }
    return b;
}

/* No free range fits n: get a chunk, register it and carve the block at
 * its start. `rest` is the caller's spare record (consumed or freed). */
static void *grow(tsr_pool_t *p, size_t n, size_t size, tsr_pool_seg_t *rest)
{
    tsr_pool_chunk_t *ch = calloc(1, sizeof *ch);
    tsr_pool_seg_t *s = calloc(1, sizeof *s);
    size_t bytes = n > p->chunk_size ? n : p->chunk_size;
    void *base = ch && s ? backend_get(p, &bytes, n) : NULL;
    if (!base) {
        free(ch);
        free(s);
        free(rest);
        return NULL;
    }
    ch->base = base;
    ch->bytes = bytes;
    ch->first = s;
    s->addr = (uintptr_t)base;
    s->size = bytes;
    s->chunk = ch;

    pthread_mutex_lock(&p->lock);
    ch->next = p->chunks;
    if (p->chunks)
        p->chunks->prev = ch;
    p->chunks = ch;
    p->st.chunks++;
    p->st.reserved += bytes;
    if (p->st.reserved > p->st.peak_reserved)
        p->st.peak_reserved = p->st.reserved;
    carve(p, s, n, size, &rest);
    pthread_mutex_unlock(&p->lock);
    free(rest);
    return base;
}

void *tsr_pool_alloc(tsr_pool_t *p, size_t size)
{
    if (!p || !p->ready || size > SIZE_MAX / 4)
        return NULL;
    size_t n = round_up(size ? size : 1);
    /* The record for the remainder of a split, allocated before locking so
     * that nothing can fail once the pool is being changed. */
    tsr_pool_seg_t *rest = malloc(sizeof *rest);
    if (!rest)
        return NULL;
    pthread_mutex_lock(&p->lock);
    tsr_pool_seg_t *s = free_best_fit(p, n);
    if (s) {
        free_remove(p, s);
        carve(p, s, n, size, &rest);
        void *block = (void *)s->addr;
        pthread_mutex_unlock(&p->lock);
        free(rest);
        return block;
    }
    pthread_mutex_unlock(&p->lock);
    return grow(p, n, size, rest);
}

void tsr_pool_free(tsr_pool_t *p, void *ptr)
{
    if (!p || !p->ready || !ptr)
        return;
    tsr_pool_seg_t *dead[2] = {NULL, NULL};
    pthread_mutex_lock(&p->lock);
    tsr_pool_seg_t *s = hash_take(p, (uintptr_t)ptr);
    if (!s) {
        p->st.bad_frees++;
        pthread_mutex_unlock(&p->lock);
        return;
    }
    p->st.blocks--;
    p->st.in_use -= s->size;
    p->st.requested -= s->requested;
    s->chunk->nused--;
    s->used = false;
    s->requested = 0;
    /* Merge with the free neighbours; the lower range survives. */
    tsr_pool_seg_t *q = s->prev;
    if (q && !q->used) {
        free_remove(p, q);
        q->size += s->size;
        q->next = s->next;
        if (s->next)
            s->next->prev = q;
        dead[0] = s;
        s = q;
    }
    q = s->next;
    if (q && !q->used) {
        free_remove(p, q);
        s->size += q->size;
        s->next = q->next;
        if (q->next)
            q->next->prev = s;
        dead[1] = q;
    }
    free_insert(p, s);
    pthread_mutex_unlock(&p->lock);
    free(dead[0]);
    free(dead[1]);
}

bool tsr_pool_owns(tsr_pool_t *p, const void *ptr)
{
    if (!p || !p->ready || !ptr)
        return false;
    pthread_mutex_lock(&p->lock);
    bool live = hash_find(p, (uintptr_t)ptr) != NULL;
    pthread_mutex_unlock(&p->lock);
    return live;
}

size_t tsr_pool_trim(tsr_pool_t *p)
{
    if (!p || !p->ready)
        return 0;
    tsr_pool_chunk_t *idle = NULL;
    size_t bytes = 0;
    pthread_mutex_lock(&p->lock);
    for (tsr_pool_chunk_t *c = p->chunks, *nx; c; c = nx) {
        nx = c->next;
        if (c->nused != 0)
            continue;
        /* No live block: the chunk is one free range. */
        free_remove(p, c->first);
        if (c->prev)
            c->prev->next = c->next;
        else
            p->chunks = c->next;
        if (c->next)
            c->next->prev = c->prev;
        c->next = idle;
        idle = c;
        p->st.chunks--;
        p->st.reserved -= c->bytes;
        p->st.backend_frees++;
        bytes += c->bytes;
    }
    pthread_mutex_unlock(&p->lock);
    for (tsr_pool_chunk_t *c = idle, *nx; c; c = nx) {
        nx = c->next;
        p->chunk_free(p->ctx, c->base, c->bytes);
        free(c->first);
        free(c);
    }
    return bytes;
}

/* The largest free range: the rightmost node of the treap. Mutex held. */
static size_t largest_free(const tsr_pool_t *p)
{
    const tsr_pool_seg_t *t = p->free_root;
    while (t && t->right)
        t = t->right;
    return t ? t->size : 0;
}

void tsr_pool_stats(tsr_pool_t *p, tsr_pool_stats_t *out)
{
    if (!out)
        return;
    if (!p || !p->ready) {
        memset(out, 0, sizeof *out);
        return;
    }
    pthread_mutex_lock(&p->lock);
    *out = p->st;
    out->largest_free = largest_free(p);
    pthread_mutex_unlock(&p->lock);
}

/* ---- consistency check (tests) ----------------------------------------- */

/* Walk the treap checking key order and heap order; counts the nodes and
 * checks that each one is a free range. */
static int check_treap(const tsr_pool_seg_t *t, const tsr_pool_seg_t *lo,
                       const tsr_pool_seg_t *hi, size_t *count, size_t depth)
{
    if (!t)
        return 0;
    if (t->used || depth > 4096)
        return -1;
    if ((lo && !seg_less(lo, t)) || (hi && !seg_less(t, hi)))
        return -1;
    if ((t->left && t->left->prio > t->prio) || (t->right && t->right->prio > t->prio))
        return -1;
    (*count)++;
    if (check_treap(t->left, lo, t, count, depth + 1) != 0)
        return -1;
    return check_treap(t->right, t, hi, count, depth + 1);
}

/* Whether s is reachable in the treap by its key. */
static bool treap_has(const tsr_pool_seg_t *t, const tsr_pool_seg_t *s)
{
    while (t && t != s)
        t = seg_less(s, t) ? t->left : t->right;
    return t == s;
}

#define FAIL(...)                                                                          \
    do {                                                                                   \
        if (msg && msglen)                                                                 \
            snprintf(msg, msglen, __VA_ARGS__);                                            \
        rc = -1;                                                                           \
        goto out;                                                                          \
    } while (0)

int tsr_pool_check(tsr_pool_t *p, char *msg, size_t msglen)
{
    if (!p || !p->ready) {
        if (msg && msglen)
            snprintf(msg, msglen, "not an initialized pool");
        return -1;
    }
    int rc = 0;
    pthread_mutex_lock(&p->lock);
    size_t nfree = 0, nused = 0, in_use = 0, requested = 0, reserved = 0, nchunks = 0;
    for (const tsr_pool_chunk_t *c = p->chunks; c; c = c->next) {
        nchunks++;
        reserved += c->bytes;
        if (c->next && c->next->prev != c)
            FAIL("chunk list links broken");
        if (!c->first || c->first->prev || c->first->addr != (uintptr_t)c->base)
            FAIL("chunk %p: first range wrong", c->base);
        uintptr_t at = (uintptr_t)c->base;
        size_t cused = 0;
        for (const tsr_pool_seg_t *s = c->first; s; s = s->next) {
            if (s->chunk != c || s->addr != at || s->size == 0 || s->size % ALIGN)
                FAIL("chunk %p: range at %#lx does not tile it", c->base,
                     (unsigned long)s->addr);
            if (s->next && s->next->prev != s)
                FAIL("chunk %p: range links broken", c->base);
            if (!s->used && s->next && !s->next->used)
                FAIL("chunk %p: two free neighbours at %#lx", c->base, (unsigned long)s->addr);
            if (s->used) {
                cused++;
                in_use += s->size;
                requested += s->requested;
                if (s->requested > s->size)
                    FAIL("block %#lx: larger request than size", (unsigned long)s->addr);
                const tsr_pool_seg_t *h = p->buckets[hash_slot(p->hbits, s->addr)];
                while (h && h != s)
                    h = h->hnext;
                if (!h)
                    FAIL("block %#lx missing from the live table", (unsigned long)s->addr);
            } else {
                nfree++;
                if (!treap_has(p->free_root, s))
                    FAIL("free range %#lx missing from the tree", (unsigned long)s->addr);
            }
            at += s->size;
        }
        if (at != (uintptr_t)c->base + c->bytes)
            FAIL("chunk %p: ranges cover %zu of %zu bytes", c->base,
                 (size_t)(at - (uintptr_t)c->base), c->bytes);
        if (cused != c->nused)
            FAIL("chunk %p: %zu live blocks counted as %zu", c->base, cused, c->nused);
        nused += cused;
    }
    size_t ntree = 0;
    if (check_treap(p->free_root, NULL, NULL, &ntree, 0) != 0)
        FAIL("free tree out of order");
    size_t nhash = 0;
    for (size_t i = 0; i < ((size_t)1 << p->hbits); i++)
        for (const tsr_pool_seg_t *h = p->buckets[i]; h; h = h->hnext) {
            nhash++;
            if (!h->used || hash_slot(p->hbits, h->addr) != i)
                FAIL("live table holds a wrong record");
        }
    if (ntree != nfree || ntree != p->st.free_ranges)
        FAIL("free ranges: %zu in chunks, %zu in tree, %zu counted", nfree, ntree,
             p->st.free_ranges);
    if (nhash != nused || nused != p->st.blocks)
        FAIL("blocks: %zu in chunks, %zu in table, %zu counted", nused, nhash, p->st.blocks);
    if (in_use != p->st.in_use || requested != p->st.requested)
        FAIL("bytes in use: %zu/%zu in chunks, %zu/%zu counted", in_use, requested,
             p->st.in_use, p->st.requested);
    if (reserved != p->st.reserved || nchunks != p->st.chunks)
        FAIL("reserved: %zu bytes in %zu chunks, %zu in %zu counted", reserved, nchunks,
             p->st.reserved, p->st.chunks);
out:
    pthread_mutex_unlock(&p->lock);
    return rc;
}

size_t tsr_pool_destroy(tsr_pool_t *p)
{
    if (!p || !p->ready)
        return 0;
    size_t live = p->st.in_use;
    for (tsr_pool_chunk_t *c = p->chunks, *nx; c; c = nx) {
        nx = c->next;
        for (tsr_pool_seg_t *s = c->first, *sn; s; s = sn) {
            sn = s->next;
            free(s);
        }
        p->chunk_free(p->ctx, c->base, c->bytes);
        free(c);
    }
    free(p->buckets);
    pthread_mutex_destroy(&p->lock);
    memset(p, 0, sizeof *p);
    return live;
}
