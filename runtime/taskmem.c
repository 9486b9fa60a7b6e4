/* runtime/taskmem.c — task records in slabs (taskmem.h). */
#include "runtime/taskmem.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define SLAB ((size_t)2 << 20)

typedef struct free_block {
    struct free_block *next;
} free_block_t;

static struct {
    pthread_mutex_t m;
    void **slabs;
    size_t nslabs, capslabs;
    size_t size;          /* the blocks' size (while any is out) */
    char *cur;            /* carving point in the last slab */
    size_t left;
    free_block_t *free;
    size_t out;           /* blocks handed out and not given back */
} tm = {.m = PTHREAD_MUTEX_INITIALIZER};

/* A slab, aligned to its size. (Asking for a transparent huge page,
 * MADV_HUGEPAGE, was tried: on this VM a fresh huge page's zeroing and
 * compaction cost more than the 4 KiB faults it saves, 118-124 k against
 * 188-199 k tasks per CPU second for the GEMM graph, and only a process
 * finding huge pages already free gained, 222 k.) */
static void *slab_map(void)
{
    char *p = mmap(NULL, 2 * SLAB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    uintptr_t a = ((uintptr_t)p + SLAB - 1) & ~(uintptr_t)(SLAB - 1);
    char *s = (char *)a;
    if (s > p)
        munmap(p, (size_t)(s - p));
    munmap(s + SLAB, (size_t)(p + 2 * SLAB - (s + SLAB)));
    return s;
}

static void *alloc_locked(size_t size)
{
    if (tm.free) {
        free_block_t *b = tm.free;
        tm.free = b->next;
        return b;
    }
    if (tm.left < size) {
        if (tm.nslabs == tm.capslabs) {
            size_t cap = tm.capslabs ? 2 * tm.capslabs : 16;
            void **v = realloc(tm.slabs, cap * sizeof *v);
            if (!v)
                return NULL;
            tm.slabs = v;
            tm.capslabs = cap;
        }
        char *s = slab_map();
        if (!s)
            return NULL;
        tm.slabs[tm.nslabs++] = s;
        tm.cur = s;
        tm.left = SLAB;
    }
    void *p = tm.cur;
    tm.cur += size;
    tm.left -= size;
    return p;
}

void *tsr__taskmem_alloc(size_t size)
{
    size = (size + 63) & ~(size_t)63;
    if (size > SLAB)
        return NULL;
    pthread_mutex_lock(&tm.m);
    void *p = NULL;
    if (tm.out == 0 || tm.size == size) {
        tm.size = size;
        p = alloc_locked(size);
        if (p)
            tm.out++;
    }
    pthread_mutex_unlock(&tm.m);
    return p;
}

void tsr__taskmem_free(void *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&tm.m);
    free_block_t *b = p;
    b->next = tm.free;
    tm.free = b;
    if (--tm.out == 0) {
        /* every record is back: the slabs go back to the system */
        for (size_t i = 0; i < tm.nslabs; i++)
            munmap(tm.slabs[i], SLAB);
        free(tm.slabs);
        tm.slabs = NULL;
        tm.nslabs = tm.capslabs = 0;
        tm.free = NULL;
        tm.cur = NULL;
        tm.left = 0;
    }
    pthread_mutex_unlock(&tm.m);
}
