/* runtime/taskref.c — the application's references to tasks.
 *
 * tsr_submit(desc, &t) gives the application a reference that one
 * tsr_task_wait(t) consumes. Task records are pooled and reused, so the
 * pointer alone cannot tell a live reference from a consumed one whose
 * record now serves another task: waiting twice on one task used to hang
 * or consume someone else's reference. A reference is therefore the
 * record's address with a 16-bit generation in its top bits (x86-64 and
 * AArch64 user addresses leave them zero), and the live references are kept
 * in a hash set threaded through the records themselves: a wait looks the
 * value up among them and only then touches the record. A stale, repeated,
 * foreign or garbage value is TSR_EINVAL and never dereferenced; a stale
 * one is mistaken for a live one only if its record was reissued with the
 * same generation (one chance in 65,535 per reuse).
 *
 * Must never: dereference a value before finding it in the set, fail after
 * the task was submitted (inserting allocates nothing), or hand a tagged
 * value to code that dereferences it (the runtime and policies see records).
 */
#include "runtime/internal.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#define GEN_SHIFT 48
#define ADDR_MASK ((UINT64_C(1) << GEN_SHIFT) - 1)

static tsr_task_t one_bucket; /* the table when none could be allocated */

static struct {
    pthread_mutex_t m;
    tsr_task_t *bucket;        /* chains through tsr_task.uref_next */
    size_t nbuckets, count;
    uint16_t last_gen;
} R = {.m = PTHREAD_MUTEX_INITIALIZER};

static size_t bucket_of(uintptr_t addr, size_t n)
{
    return (size_t)(((uint64_t)addr >> 6) * 0x9E3779B97F4A7C15ull >> 20) & (n - 1);
}

/* Double the buckets when chains grow long; without memory, keep the
 * longer chains (correct, slower). R.m held. */
static void maybe_grow(void)
{
    if (R.nbuckets && R.count < 2 * R.nbuckets)
        return;
    size_t n = R.nbuckets ? 2 * R.nbuckets : 1024;
    tsr_task_t *b = calloc(n, sizeof *b);
    if (!b)
        return;
    for (size_t i = 0; i < R.nbuckets; i++)
        for (tsr_task_t t = R.bucket[i], next; t; t = next) {
            next = t->uref_next;
            size_t k = bucket_of((uintptr_t)t, n);
            t->uref_next = b[k];
            b[k] = t;
        }
    if (R.bucket != &one_bucket)
        free(R.bucket);
    R.bucket = b;
    R.nbuckets = n;
}

static void insert(tsr_task_t t)
{
    if (!R.nbuckets) { /* no table at all and no memory: a one-bucket list */
        one_bucket = NULL;
        R.bucket = &one_bucket;
        R.nbuckets = 1;
    }
    size_t k = bucket_of((uintptr_t)t, R.nbuckets);
    t->uref_next = R.bucket[k];
    R.bucket[k] = t;
    R.count++;
}

static tsr_task_t value_of(tsr_task_t t)
{
    return (tsr_task_t)((uintptr_t)t | (uintptr_t)((uint64_t)t->uref_gen << GEN_SHIFT));
}

tsr_task_t tsr__taskref_issue(tsr_task_t t)
{
    pthread_mutex_lock(&R.m);
    if (((uint64_t)(uintptr_t)t & ~ADDR_MASK) == 0) {
        if (++R.last_gen == 0)
            R.last_gen = 1;
        t->uref_gen = R.last_gen;
    } else {
        t->uref_gen = 0; /* an address using the top bits: no generation */
    }
    maybe_grow();
    insert(t);
    pthread_mutex_unlock(&R.m);
    return value_of(t);
}

/* The live record of value v, unlinked from the set (take) or left in it
 * with one more reference (borrow); NULL if v is not live. */
static tsr_task_t find(tsr_task_t v, bool unlink)
{
    uint64_t x = (uint64_t)(uintptr_t)v;
    uintptr_t addr = x >> GEN_SHIFT ? (uintptr_t)(x & ADDR_MASK) : (uintptr_t)x;
    tsr_task_t found = NULL;
    pthread_mutex_lock(&R.m);
    if (R.nbuckets) {
        tsr_task_t *p = &R.bucket[bucket_of(addr, R.nbuckets)];
        for (; *p; p = &(*p)->uref_next)
            if ((uintptr_t)*p == addr && value_of(*p) == v) {
                found = *p;
                if (unlink) {
                    *p = found->uref_next;
                    R.count--;
                } else {
                    tsr__task_ref(found); /* before another thread can take it */
                }
                break;
            }
    }
    pthread_mutex_unlock(&R.m);
    return found;
}

tsr_task_t tsr__taskref_take(tsr_task_t v) { return find(v, true); }
tsr_task_t tsr__taskref_borrow(tsr_task_t v) { return find(v, false); }

void tsr__taskref_put_back(tsr_task_t t)
{
    pthread_mutex_lock(&R.m);
    insert(t);
    pthread_mutex_unlock(&R.m);
}

tsr_task_t tsr__task_untag(tsr_task_t v)
{
    uint64_t x = (uint64_t)(uintptr_t)v;
    return x >> GEN_SHIFT && (x & ADDR_MASK) ? (tsr_task_t)(uintptr_t)(x & ADDR_MASK) : v;
}

void tsr__taskref_fini(void)
{
    pthread_mutex_lock(&R.m);
    if (R.bucket != &one_bucket)
        free(R.bucket);
    R.bucket = NULL;
    R.nbuckets = R.count = 0;
    pthread_mutex_unlock(&R.m);
}
