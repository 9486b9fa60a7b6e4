/* The caching sub-allocator (memory/pool.c) against a naive model: random
 * alloc/free sequences over many seeds with sizes from 1 byte to several
 * MiB, on a backend over host memory that records every chunk. Checked
 * after each step: alignment, each block inside a chunk the backend handed
 * out, no overlap with any other live block (an independent sorted
 * interval list), bytes in use and reserved equal to the model's sums,
 * block contents untouched by other allocations; then coalescing, trim,
 * the trim-and-retry and exact-size fallbacks, backend failures, bad input
 * and two threads sharing a pool. TSR_TEST_SEED varies the seeds. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory/pool.h"
#include "tessera/tessera.h"

#define MIB ((size_t)1 << 20)
#define RUP(n) (((n) + TSR_POOL_ALIGN - 1) / TSR_POOL_ALIGN * TSR_POOL_ALIGN)

/* ---- random numbers: splitmix64 ---------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rng_seed(uint64_t salt)
{
    const char *env = getenv("TSR_TEST_SEED");
    uint64_t base = env ? strtoull(env, NULL, 0) : 0x9001ull;
    return base * 0x9e3779b97f4a7c15ull + salt;
}

/* 1 byte … max_bytes, spread evenly over the powers of two */
static size_t rand_size(uint64_t *r, size_t max_bytes)
{
    unsigned bits = 0;
    while (((size_t)2 << bits) <= max_bytes)
        bits++;
    size_t lim = (size_t)1 << (rng_next(r) % (bits + 1));
    size_t s = 1 + (size_t)(rng_next(r) % lim);
    return s > max_bytes ? max_bytes : s;
}

/* ---- the backend: host memory, every chunk recorded --------------------- */

#define TB_MAX 4096

typedef struct {
    pthread_mutex_t m;
    struct {
        char *p;
        size_t bytes;
    } ch[TB_MAX];
    int n;                  /* recorded chunks (live ones) */
    size_t live_bytes;
    size_t limit;           /* refuse a chunk beyond this many live bytes; 0: none */
    bool fail;              /* refuse everything */
    bool misalign;          /* hand out misaligned chunks */
    uint64_t allocs, frees, refusals, errors;
} tb_t;

static void tb_init(tb_t *b)
{
    memset(b, 0, sizeof *b);
    pthread_mutex_init(&b->m, NULL);
}

static void *tb_alloc(void *ctx, size_t bytes)
{
    tb_t *b = ctx;
    pthread_mutex_lock(&b->m);
    char *p = NULL;
    if (b->fail || b->n == TB_MAX || (b->limit && b->live_bytes + bytes > b->limit) ||
        bytes % TSR_POOL_ALIGN) {
        b->refusals++;
    } else {
        p = aligned_alloc(TSR_POOL_ALIGN, bytes + (b->misalign ? TSR_POOL_ALIGN : 0));
        if (p) {
            if (b->misalign)
                p += 64;
            b->ch[b->n].p = p;
            b->ch[b->n].bytes = bytes;
            b->n++;
            b->live_bytes += bytes;
            b->allocs++;
        }
    }
    pthread_mutex_unlock(&b->m);
    return p;
}

static void tb_free(void *ctx, void *p, size_t bytes)
{
    tb_t *b = ctx;
    pthread_mutex_lock(&b->m);
    int i = 0;
    while (i < b->n && b->ch[i].p != p)
        i++;
    if (i == b->n || b->ch[i].bytes != bytes) {
        b->errors++; /* not a chunk of ours, or the wrong size */
    } else {
        free(b->misalign ? (char *)p - 64 : p);
        b->live_bytes -= bytes;
        b->ch[i] = b->ch[--b->n];
        b->frees++;
    }
    pthread_mutex_unlock(&b->m);
}

/* whether [p, p+n) lies inside one recorded chunk */
static bool tb_contains(tb_t *b, const char *p, size_t n)
{
    bool in = false;
    pthread_mutex_lock(&b->m);
    for (int i = 0; i < b->n && !in; i++)
        in = p >= b->ch[i].p && p + n <= b->ch[i].p + b->ch[i].bytes;
    pthread_mutex_unlock(&b->m);
    return in;
}

/* ---- the model: live blocks sorted by address --------------------------- */

typedef struct {
    char *p;
    size_t size;
    uint8_t tag;
} blk_t;

typedef struct {
    blk_t *v;
    size_t n, cap;
    size_t sum_size, sum_rounded;
} model_t;

static size_t model_pos(const model_t *m, const char *p)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->v[mid].p < p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Insert a new live block, asserting it overlaps none (rounded sizes). */
static void model_add(model_t *m, char *p, size_t size, uint8_t tag)
{
    size_t i = model_pos(m, p);
    if (i > 0)
        cr_assert_leq(m->v[i - 1].p + RUP(m->v[i - 1].size), p,
                      "block %p (%zu B) overlaps the live block %p (%zu B)", (void *)p, size,
                      (void *)m->v[i - 1].p, m->v[i - 1].size);
    if (i < m->n)
        cr_assert_leq(p + RUP(size ? size : 1), m->v[i].p,
                      "block %p (%zu B) overlaps the live block %p (%zu B)", (void *)p, size,
                      (void *)m->v[i].p, m->v[i].size);
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 256;
        m->v = realloc(m->v, m->cap * sizeof *m->v);
        cr_assert_not_null(m->v);
    }
    memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof *m->v);
    m->v[i] = (blk_t){p, size, tag};
    m->n++;
    m->sum_size += size;
    m->sum_rounded += RUP(size ? size : 1);
}

static blk_t model_take(model_t *m, size_t i)
{
    blk_t b = m->v[i];
    memmove(&m->v[i], &m->v[i + 1], (m->n - i - 1) * sizeof *m->v);
    m->n--;
    m->sum_size -= b.size;
    m->sum_rounded -= RUP(b.size ? b.size : 1);
    return b;
}

/* The first and last 64 bytes of a block carry a pattern from its tag:
 * another block written over it shows up when it is freed. */
static void stamp(char *p, size_t size, uint8_t tag)
{
    size_t k = size < 64 ? size : 64;
    for (size_t i = 0; i < k; i++)
        p[i] = (char)(tag + i);
    for (size_t i = 0; i < k; i++)
        p[size - 1 - i] = (char)(tag ^ i);
}

static bool stamp_ok(const char *p, size_t size, uint8_t tag)
{
    size_t k = size < 64 ? size : 64;
    for (size_t i = 0; i < k; i++) {
        if (p[size - 1 - i] != (char)(tag ^ i))
            return false;
        if (i < size - k && p[i] != (char)(tag + i)) /* not overwritten by the end */
            return false;
    }
    return true;
}

static void check_pool(tsr_pool_t *p, const char *when)
{
    char msg[256];
    int rc = tsr_pool_check(p, msg, sizeof msg);
    cr_assert_eq(rc, 0, "%s: pool inconsistent: %s", when, msg);
}

/* Stats against the model and the backend's own records. */
static void check_stats(tsr_pool_t *p, const model_t *m, tb_t *b)
{
    tsr_pool_stats_t st;
    tsr_pool_stats(p, &st);
    cr_assert_eq(st.blocks, m->n, "blocks %zu, model %zu", st.blocks, m->n);
    cr_assert_eq(st.in_use, m->sum_rounded, "in use %zu, model %zu", st.in_use,
                 m->sum_rounded);
    cr_assert_eq(st.requested, m->sum_size, "requested %zu, model %zu", st.requested,
                 m->sum_size);
    cr_assert_eq(st.reserved, b->live_bytes, "reserved %zu, backend %zu", st.reserved,
                 b->live_bytes);
    cr_assert_eq(st.chunks, (size_t)b->n, "chunks %zu, backend %d", st.chunks, b->n);
    cr_assert_leq(st.in_use, st.reserved);
    cr_assert_eq(b->errors, 0, "the pool gave back a chunk it did not get");
}

static void model_alloc(tsr_pool_t *p, model_t *m, tb_t *b, size_t size, uint8_t tag)
{
    char *q = tsr_pool_alloc(p, size);
    cr_assert_not_null(q, "alloc of %zu B failed", size);
    cr_assert_eq((uintptr_t)q % TSR_POOL_ALIGN, 0, "block %p is not aligned", (void *)q);
    cr_assert(tb_contains(b, q, RUP(size ? size : 1)), "block %p (%zu B) is outside every chunk",
              (void *)q, size);
    model_add(m, q, size, tag);
    stamp(q, size, tag);
}

static void model_free(tsr_pool_t *p, model_t *m, size_t i)
{
    blk_t k = model_take(m, i);
    cr_assert(stamp_ok(k.p, k.size, k.tag), "block %p (%zu B) was overwritten", (void *)k.p,
              k.size);
    tsr_pool_free(p, k.p);
}

/* ---- tests --------------------------------------------------------------- */

/* stamp_ok must see what stamp wrote, and a change at either end */
Test(pool, stamp_helper)
{
    char buf[300];
    for (size_t n = 1; n <= sizeof buf; n += 37) {
        stamp(buf, n, 9);
        cr_assert(stamp_ok(buf, n, 9));
        buf[n - 1] ^= 1;
        cr_assert_not(stamp_ok(buf, n, 9));
        buf[n - 1] ^= 1;
        buf[0] ^= 1;
        cr_assert_not(stamp_ok(buf, n, 9), "size %zu", n);
        buf[0] ^= 1;
    }
}

/* Random sequences: many seeds, several chunk sizes, sizes up to 6 MiB. */
Test(pool, random_against_model)
{
    const size_t chunk_sizes[] = {MIB, 4 * MIB, 0};
    for (uint64_t seed = 0; seed < 64; seed++) {
        uint64_t r = rng_seed(seed);
        size_t cs = chunk_sizes[seed % 3];
        size_t maxsz = seed % 4 == 0 ? 4096 : 6 * MIB;
        tb_t *b = malloc(sizeof *b);
        cr_assert_not_null(b);
        tb_init(b);
        tsr_pool_t p;
        cr_assert_eq(tsr_pool_init(&p, cs, tb_alloc, tb_free, b), 0);
        model_t m = {0};
        int steps = 3000;
        for (int s = 0; s < steps; s++) {
            /* phases: grow, shrink, then mixed, so chunks fill and empty */
            int phase = (s / 250) % 3;
            int alloc_pct = phase == 0 ? 75 : phase == 1 ? 25 : 50;
            if (m.n == 0 || (int)(rng_next(&r) % 100) < alloc_pct)
                model_alloc(&p, &m, b, rand_size(&r, maxsz), (uint8_t)rng_next(&r));
            else
                model_free(&p, &m, (size_t)(rng_next(&r) % m.n));
            check_stats(&p, &m, b);
            if (s % 97 == 0)
                check_pool(&p, "random step");
            if (s % 500 == 499) {
                tsr_pool_trim(&p);
                check_stats(&p, &m, b);
                check_pool(&p, "after trim");
            }
        }
        while (m.n)
            model_free(&p, &m, (size_t)(rng_next(&r) % m.n));
        check_stats(&p, &m, b);
        check_pool(&p, "all freed");

        /* Coalesced: every chunk is one free range again, so a block of a
         * whole default chunk fits without asking the backend. */
        tsr_pool_stats_t st;
        tsr_pool_stats(&p, &st);
        cr_assert_eq(st.in_use, 0);
        cr_assert_eq(st.free_ranges, st.chunks, "%zu free ranges in %zu chunks",
                     st.free_ranges, st.chunks);
        if (st.chunks > 0 && st.largest_free >= st.chunk_size) {
            uint64_t before = b->allocs;
            void *whole = tsr_pool_alloc(&p, st.chunk_size);
            cr_assert_not_null(whole);
            cr_assert_eq(b->allocs, before, "a whole chunk needed a new chunk");
            tsr_pool_free(&p, whole);
        }
        size_t held = st.reserved;
        cr_assert_eq(tsr_pool_trim(&p), held);
        cr_assert_eq(b->n, 0, "%d chunks left after trim", b->n);
        cr_assert_eq(b->allocs, b->frees);
        tsr_pool_stats(&p, &st);
        cr_assert_eq(st.reserved, 0);
        cr_assert_eq(st.chunks, 0);
        cr_assert_eq(st.free_ranges, 0);
        cr_assert_eq(st.bad_frees, 0);
        cr_assert_eq(tsr_pool_destroy(&p), 0);
        cr_assert_eq(b->errors, 0);
        free(m.v);
        free(b);
    }
}

/* Best fit picks the smallest hole that fits; frees merge both ways. */
Test(pool, best_fit_split_and_coalesce)
{
    tb_t b;
    tb_init(&b);
    tsr_pool_t p;
    cr_assert_eq(tsr_pool_init(&p, MIB, tb_alloc, tb_free, &b), 0);
    char *a = tsr_pool_alloc(&p, 256 << 10);
    char *sep1 = tsr_pool_alloc(&p, 1000);
    char *c = tsr_pool_alloc(&p, 128 << 10);
    char *sep2 = tsr_pool_alloc(&p, 1);
    cr_assert(a && sep1 && c && sep2);
    cr_assert_eq(b.allocs, 1, "four small blocks took %llu chunks",
                 (unsigned long long)b.allocs);
    /* carved in address order from the chunk's start */
    cr_assert_eq(sep1, a + (256 << 10));
    cr_assert_eq(c, sep1 + 1024);
    cr_assert_eq(sep2, c + (128 << 10));
    tsr_pool_free(&p, a);
    tsr_pool_free(&p, c);
    tsr_pool_stats_t st;
    tsr_pool_stats(&p, &st);
    cr_assert_eq(st.free_ranges, 3); /* a's hole, c's hole, the tail */
    /* 100 KiB fits both holes: the smaller (c's) is the best fit */
    char *d = tsr_pool_alloc(&p, 100 << 10);
    cr_assert_eq(d, c, "best fit chose %p, not the 128 KiB hole %p", (void *)d, (void *)c);
    /* exactly a's size: a's hole, nothing split off */
    char *e = tsr_pool_alloc(&p, 256 << 10);
    cr_assert_eq(e, a);
    tsr_pool_stats(&p, &st);
    cr_assert_eq(st.free_ranges, 2); /* d's remainder and the tail */
    check_pool(&p, "after best fit");
    /* free middle, then left, then right: one range again */
    tsr_pool_free(&p, sep1);
    tsr_pool_free(&p, e);
    tsr_pool_free(&p, d);
    tsr_pool_stats(&p, &st);
    cr_assert_eq(st.free_ranges, 2, "%zu free ranges", st.free_ranges);
    tsr_pool_free(&p, sep2);
    tsr_pool_stats(&p, &st);
    cr_assert_eq(st.free_ranges, 1);
    cr_assert_eq(st.largest_free, MIB);
    cr_assert_eq(st.in_use, 0);
    check_pool(&p, "all merged");
    /* the whole chunk in one block, from the same chunk */
    char *w = tsr_pool_alloc(&p, MIB);
    cr_assert_eq(w, a);
    cr_assert_eq(b.allocs, 1);
    tsr_pool_free(&p, w);
    cr_assert_eq(tsr_pool_destroy(&p), 0);
    cr_assert_eq(b.n, 0);
    cr_assert_eq(b.errors, 0);
}

/* A request above the chunk size gets a chunk of exactly its size. */
Test(pool, large_request_own_chunk)
{
    tb_t b;
    tb_init(&b);
    tsr_pool_t p;
    cr_assert_eq(tsr_pool_init(&p, MIB, tb_alloc, tb_free, &b), 0);
    char *big = tsr_pool_alloc(&p, 3 * MIB + 5);
    cr_assert_not_null(big);
    cr_assert_eq(b.n, 1);
    cr_assert_eq(b.ch[0].bytes, RUP(3 * MIB + 5));
    tsr_pool_stats_t st;
    tsr_pool_stats(&p, &st);
    cr_assert_eq(st.reserved, RUP(3 * MIB + 5));
    cr_assert_eq(st.free_ranges, 0);
    char *small = tsr_pool_alloc(&p, 10);
    cr_assert_eq(b.n, 2);
    cr_assert_eq(b.ch[1].bytes, MIB);
    tsr_pool_free(&p, big);
    tsr_pool_free(&p, small);
    cr_assert_eq(tsr_pool_trim(&p), RUP(3 * MIB + 5) + MIB);
    cr_assert_eq(tsr_pool_destroy(&p), 0);
    cr_assert_eq(b.n, 0);
}

/* Trim gives back exactly the chunks without live blocks. */
Test(pool, trim_keeps_busy_chunks)
{
    tb_t b;
    tb_init(&b);
    tsr_pool_t p;
    cr_assert_eq(tsr_pool_init(&p, MIB, tb_alloc, tb_free, &b), 0);
    void *x[4];
    for (int i = 0; i < 4; i++)
        x[i] = tsr_pool_alloc(&p, MIB); /* one chunk each */
    cr_assert_eq(b.n, 4);
    tsr_pool_free(&p, x[1]);
    tsr_pool_free(&p, x[3]);
    cr_assert_eq(tsr_pool_trim(&p), 2 * MIB);
    cr_assert_eq(b.n, 2);
    cr_assert(tb_contains(&b, x[0], MIB) && tb_contains(&b, x[2], MIB));
    check_pool(&p, "after partial trim");
    cr_assert_eq(tsr_pool_trim(&p), 0);
    /* destroy reports and releases what is still live */
    cr_assert_eq(tsr_pool_destroy(&p), 2 * MIB);
    cr_assert_eq(b.n, 0);
    cr_assert_eq(b.errors, 0);
}

/* The backend refuses: NULL, and the pool is exactly as before. */
Test(pool, backend_failure_leaves_state_intact)
{
    tb_t b;
    tb_init(&b);
    tsr_pool_t p;
    cr_assert_eq(tsr_pool_init(&p, MIB, tb_alloc, tb_free, &b), 0);
    model_t m = {0};
    uint64_t r = rng_seed(777);
    for (int i = 0; i < 40; i++)
        model_alloc(&p, &m, &b, rand_size(&r, 300 << 10), (uint8_t)i);
    for (size_t i = 0; i < m.n; i += 2)
        model_free(&p, &m, i);
    tsr_pool_stats_t before, after;
    tsr_pool_stats(&p, &before);
    b.fail = true;
    cr_assert_null(tsr_pool_alloc(&p, 2 * MIB), "alloc succeeded with a failing backend");
    cr_assert_null(tsr_pool_alloc(&p, before.largest_free + 1));
    tsr_pool_stats(&p, &after);
    cr_assert_gt(after.backend_failures, before.backend_failures);
    cr_assert_eq(after.in_use, before.in_use);
    cr_assert_eq(after.requested, before.requested);
    cr_assert_eq(after.blocks, before.blocks);
    cr_assert_eq(after.free_ranges, before.free_ranges);
    /* the failed tries trimmed nothing: every chunk has live blocks */
    cr_assert_eq(after.reserved, before.reserved);
    check_stats(&p, &m, &b);
    check_pool(&p, "after backend failure");
    /* what fits the free ranges still works without the backend */
    model_alloc(&p, &m, &b, before.largest_free, 1);
    check_stats(&p, &m, &b);
    b.fail = false;
    model_alloc(&p, &m, &b, 2 * MIB, 2);
    while (m.n)
        model_free(&p, &m, m.n - 1);
    check_stats(&p, &m, &b);
    check_pool(&p, "recovered");
    cr_assert_eq(tsr_pool_destroy(&p), 0);
    cr_assert_eq(b.n, 0);
    free(m.v);
}

/* The backend is full of idle chunks: trim, and the retry succeeds. */
Test(pool, trim_and_retry)
{
    tb_t b;
    tb_init(&b);
    b.limit = 2 * MIB;
    tsr_pool_t p;
    cr_assert_eq(tsr_pool_init(&p, MIB, tb_alloc, tb_free, &b), 0);
    void *x = tsr_pool_alloc(&p, MIB), *y = tsr_pool_alloc(&p, MIB);
    cr_assert(x && y);
    tsr_pool_free(&p, x);
    tsr_pool_free(&p, y);
    /* 2 MiB idle in two chunks, and the backend has no more room */
    void *z = tsr_pool_alloc(&p, 2 * MIB);
    cr_assert_not_null(z, "no trim-and-retry");
    tsr_pool_stats_t st;
    tsr_pool_stats(&p, &st);
    cr_assert_eq(st.backend_failures, 1);
    cr_assert_eq(st.backend_frees, 2);
    cr_assert_eq(st.chunks, 1);
    cr_assert_eq(b.refusals, 1);
    tsr_pool_free(&p, z);
    cr_assert_eq(tsr_pool_destroy(&p), 0);
    cr_assert_eq(b.n, 0);
    cr_assert_eq(b.errors, 0);
}

/* No room for a whole chunk: the last request gets a chunk of its size. */
Test(pool, exact_chunk_when_nearly_full)
{
    tb_t b;
    tb_init(&b);
    b.limit = 5 * MIB;
    tsr_pool_t p;
    cr_assert_eq(tsr_pool_init(&p, 4 * MIB, tb_alloc, tb_free, &b), 0);
    void *a = tsr_pool_alloc(&p, 3 * MIB);
    void *c = tsr_pool_alloc(&p, MIB);   /* the rest of the first chunk */
    void *d = tsr_pool_alloc(&p, MIB);   /* 4 MiB refused: 1 MiB chunk */
    cr_assert(a && c && d);
    cr_assert_eq(b.n, 2);
    cr_assert_eq(b.live_bytes, 5 * MIB);
    cr_assert_null(tsr_pool_alloc(&p, 1), "allocated beyond the backend's room");
    check_pool(&p, "nearly full");
    tsr_pool_free(&p, a);
    tsr_pool_free(&p, c);
    tsr_pool_free(&p, d);
    cr_assert_eq(tsr_pool_trim(&p), 5 * MIB);
    cr_assert_eq(tsr_pool_destroy(&p), 0);
    cr_assert_eq(b.errors, 0);
}

/* Bad input: no abort, NULL or nothing done. */
Test(pool, bad_input)
{
    tb_t b;
    tb_init(&b);
    tsr_pool_t p;
    cr_assert_eq(tsr_pool_init(NULL, 0, tb_alloc, tb_free, &b), TSR_EINVAL);
    cr_assert_eq(tsr_pool_init(&p, 0, NULL, tb_free, &b), TSR_EINVAL);
    cr_assert_eq(tsr_pool_init(&p, 0, tb_alloc, NULL, &b), TSR_EINVAL);
    cr_assert_eq(tsr_pool_init(&p, SIZE_MAX, tb_alloc, tb_free, &b), TSR_EINVAL);
    cr_assert_null(tsr_pool_alloc(NULL, 10));
    tsr_pool_free(NULL, &b);
    cr_assert_eq(tsr_pool_trim(NULL), 0);
    cr_assert_eq(tsr_pool_destroy(NULL), 0);
    tsr_pool_stats_t st;
    tsr_pool_stats(NULL, &st);
    cr_assert_eq(st.reserved, 0);
    tsr_pool_stats(NULL, NULL);

    cr_assert_eq(tsr_pool_init(&p, 0, tb_alloc, tb_free, &b), 0);
    tsr_pool_stats(&p, &st);
    cr_assert_eq(st.chunk_size, TSR_POOL_DEFAULT_CHUNK);
    cr_assert_eq(st.reserved, 0, "init reserved memory");
    cr_assert_null(tsr_pool_alloc(&p, SIZE_MAX));
    cr_assert_null(tsr_pool_alloc(&p, SIZE_MAX - 100));
    cr_assert_eq(b.allocs, 0);
    char *z = tsr_pool_alloc(&p, 0);
    cr_assert_not_null(z, "a zero-byte request is a valid one-byte block");
    cr_assert_eq((uintptr_t)z % TSR_POOL_ALIGN, 0);
    char *o = tsr_pool_alloc(&p, 1);
    cr_assert_eq(o, z + TSR_POOL_ALIGN);
    tsr_pool_free(&p, NULL);
    tsr_pool_free(&p, z + 1);   /* inside a block */
    tsr_pool_free(&p, &b);      /* not pool memory */
    tsr_pool_free(&p, z);
    tsr_pool_free(&p, z);       /* double free */
    tsr_pool_stats(&p, &st);
    cr_assert_eq(st.bad_frees, 3);
    cr_assert_eq(st.blocks, 1);
    cr_assert_eq(st.in_use, TSR_POOL_ALIGN);
    check_pool(&p, "after bad frees");
    tsr_pool_free(&p, o);
    cr_assert_eq(tsr_pool_destroy(&p), 0);
    /* a destroyed pool refuses everything, quietly */
    cr_assert_null(tsr_pool_alloc(&p, 10));
    tsr_pool_free(&p, o);
    cr_assert_eq(tsr_pool_trim(&p), 0);
    char msg[64];
    cr_assert_eq(tsr_pool_check(&p, msg, sizeof msg), -1);
    cr_assert_eq(b.n, 0);
    cr_assert_eq(b.errors, 0);
}

/* A backend that breaks the alignment contract is a failing backend. */
Test(pool, misaligned_backend_is_a_failure)
{
    tb_t b;
    tb_init(&b);
    b.misalign = true;
    tsr_pool_t p;
    cr_assert_eq(tsr_pool_init(&p, MIB, tb_alloc, tb_free, &b), 0);
    cr_assert_null(tsr_pool_alloc(&p, 100));
    tsr_pool_stats_t st;
    tsr_pool_stats(&p, &st);
    cr_assert_eq(st.reserved, 0);
    cr_assert_geq(st.backend_failures, 1);
    cr_assert_eq(b.n, 0, "the misaligned chunk was kept");
    cr_assert_eq(b.errors, 0);
    cr_assert_eq(tsr_pool_destroy(&p), 0);
}

/* ---- two threads on one pool -------------------------------------------- */

typedef struct {
    tsr_pool_t *p;
    uint64_t seed;
    int errors;
} worker_t;

static void *worker(void *arg)
{
    worker_t *w = arg;
    uint64_t r = rng_seed(w->seed);
    enum { LIVE = 64 };
    char *blk[LIVE] = {0};
    size_t sz[LIVE] = {0};
    uint8_t tag[LIVE] = {0};
    for (int s = 0; s < 20000; s++) {
        int i = (int)(rng_next(&r) % LIVE);
        if (blk[i]) {
            if (!stamp_ok(blk[i], sz[i], tag[i]))
                w->errors++;
            tsr_pool_free(w->p, blk[i]);
            blk[i] = NULL;
        } else {
            sz[i] = rand_size(&r, 512 << 10);
            tag[i] = (uint8_t)rng_next(&r);
            blk[i] = tsr_pool_alloc(w->p, sz[i]);
            if (!blk[i] || (uintptr_t)blk[i] % TSR_POOL_ALIGN) {
                w->errors++;
                blk[i] = NULL;
                continue;
            }
            stamp(blk[i], sz[i], tag[i]);
        }
        if (s % 5000 == 4999)
            tsr_pool_trim(w->p);
    }
    for (int i = 0; i < LIVE; i++)
        if (blk[i]) {
            if (!stamp_ok(blk[i], sz[i], tag[i]))
                w->errors++;
            tsr_pool_free(w->p, blk[i]);
        }
    return NULL;
}

Test(pool, two_threads)
{
    tb_t b;
    tb_init(&b);
    tsr_pool_t p;
    cr_assert_eq(tsr_pool_init(&p, 2 * MIB, tb_alloc, tb_free, &b), 0);
    worker_t w[2] = {{&p, 1, 0}, {&p, 2, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, worker, &w[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    cr_assert_eq(w[0].errors + w[1].errors, 0, "%d failed or overwritten blocks",
                 w[0].errors + w[1].errors);
    check_pool(&p, "after two threads");
    tsr_pool_stats_t st;
    tsr_pool_stats(&p, &st);
    cr_assert_eq(st.in_use, 0);
    cr_assert_eq(st.blocks, 0);
    cr_assert_eq(st.free_ranges, st.chunks);
    cr_assert_eq(st.bad_frees, 0);
    cr_assert_eq(st.reserved, b.live_bytes);
    tsr_pool_trim(&p);
    cr_assert_eq(b.n, 0);
    cr_assert_eq(tsr_pool_destroy(&p), 0);
    cr_assert_eq(b.errors, 0);
}
