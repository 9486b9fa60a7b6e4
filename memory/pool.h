/* memory/pool.h — a caching sub-allocator: it carves blocks out of large
 * chunks obtained from a backend (cudaMalloc for a GPU node, anything for a
 * test), so that device memory is reserved once per chunk rather than once
 * per tile, and a freed block is reused without a round trip to the
 * backend. Free ranges are kept coalesced; a request takes the best-fitting
 * free range (the smallest one that is large enough, lowest address among
 * equals) and splits it.
 *
 * Must never: read or write the memory it manages (it may be device
 * memory: every record lives in host memory of its own), call the backend
 * while holding its mutex, abort on any input, or hand out a block that
 * overlaps a live one.
 *
 * Thread safety: every function except init and destroy may be called from
 * any thread at any time; the pool has its own mutex. The backend callbacks
 * are called without it held, possibly from several threads at once.
 */
#ifndef TSR_MEMORY_POOL_H
#define TSR_MEMORY_POOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every block starts at a multiple of this and its size is rounded up to
 * one (what the GPU kernels and cudaMalloc assume). */
#define TSR_POOL_ALIGN ((size_t)256)
/* Chunk size when init is given 0. */
#define TSR_POOL_DEFAULT_CHUNK ((size_t)64 << 20)

/* The backend. chunk_alloc returns `bytes` of memory aligned to
 * TSR_POOL_ALIGN, or NULL; chunk_free gives back a chunk with the size it
 * was allocated with. A misaligned chunk is given back at once and counted
 * as a failure. */
typedef void *(*tsr_pool_chunk_alloc_fn)(void *ctx, size_t bytes);
typedef void (*tsr_pool_chunk_free_fn)(void *ctx, void *p, size_t bytes);

typedef struct tsr_pool_stats {
    size_t in_use;          /* bytes in live blocks (sizes rounded up) */
    size_t requested;       /* bytes the live blocks were asked for */
    size_t reserved;        /* bytes held from the backend (every chunk) */
    size_t peak_in_use, peak_reserved;
    size_t blocks;          /* live blocks */
    size_t chunks;          /* chunks held */
    size_t free_ranges;     /* maximal free ranges (coalesced) */
    size_t largest_free;    /* bytes in the largest free range */
    size_t chunk_size;      /* the default chunk size in use */
    uint64_t backend_allocs, backend_frees, backend_failures;
    uint64_t bad_frees;     /* frees of a pointer that is not a live block */
} tsr_pool_stats_t;

/* Private records (pool.c). */
typedef struct tsr_pool_seg tsr_pool_seg_t;
typedef struct tsr_pool_chunk tsr_pool_chunk_t;

/* The pool itself; the caller owns the storage (embed it), pool.c owns
 * every field. */
typedef struct tsr_pool {
    pthread_mutex_t lock;
    bool ready;
    size_t chunk_size;
    tsr_pool_chunk_alloc_fn chunk_alloc;
    tsr_pool_chunk_free_fn chunk_free;
    void *ctx;
    tsr_pool_chunk_t *chunks;   /* every chunk held, most recent first */
    tsr_pool_seg_t *free_root;  /* free ranges: treap keyed by (size, addr) */
    tsr_pool_seg_t **buckets;   /* live blocks: hash by address */
    unsigned hbits;             /* log2 of the bucket count */
    uint64_t rng;               /* treap priorities */
    tsr_pool_stats_t st;
} tsr_pool_t;

/* Make *p an empty pool that grows by chunks of chunk_size bytes (0:
 * TSR_POOL_DEFAULT_CHUNK; rounded up to TSR_POOL_ALIGN), or by one chunk of
 * exactly the rounded request when that is larger. Reserves nothing from
 * the backend yet. Returns 0, TSR_EINVAL (NULL pool or callback, absurd
 * chunk size) or TSR_ENOMEM (no host memory for the records). */
int tsr_pool_init(tsr_pool_t *p, size_t chunk_size, tsr_pool_chunk_alloc_fn chunk_alloc,
                  tsr_pool_chunk_free_fn chunk_free, void *ctx);

/* A block of at least `size` bytes (0 counts as 1), TSR_POOL_ALIGN-aligned,
 * that overlaps no live block; NULL when the backend cannot give a chunk
 * for it, when host memory for the records runs out, or when p is not an
 * initialized pool. Grows the pool when no free range fits: first a chunk
 * of the usual size; if the backend fails, trim and try once more; if it
 * fails again and the usual chunk is larger than the request, one chunk of
 * exactly the request (the last room on a nearly full device). A failure
 * changes nothing but the backend_failures counter. */
void *tsr_pool_alloc(tsr_pool_t *p, size_t size);

/* Give back a block returned by tsr_pool_alloc; it merges with free
 * neighbours in its chunk. NULL is ignored; any other pointer that is not
 * a live block (a double free, a foreign pointer) changes nothing but the
 * bad_frees counter. The chunk is kept for reuse until tsr_pool_trim. */
void tsr_pool_free(tsr_pool_t *p, void *ptr);

/* Whether ptr is the start of a live block of p (for a caller that mixes
 * the pool's blocks with memory from elsewhere). */
bool tsr_pool_owns(tsr_pool_t *p, const void *ptr);

/* Give every chunk that holds no live block back to the backend. Returns
 * the bytes given back. */
size_t tsr_pool_trim(tsr_pool_t *p);

/* A consistent snapshot of the counters (zeros for a NULL pool). */
void tsr_pool_stats(tsr_pool_t *p, tsr_pool_stats_t *out);

/* Check every internal invariant (ranges tile each chunk, no two free
 * neighbours, the free tree and the live table agree with the ranges and
 * the counters). Returns 0, or -1 with a description in msg. For tests. */
int tsr_pool_check(tsr_pool_t *p, char *msg, size_t msglen);

/* Give every chunk back, live blocks included, and free the records; *p
 * may then be initialized again. Not concurrent with any other call on p.
 * Returns the bytes that were still in live blocks (0 when the caller
 * freed everything). */
size_t tsr_pool_destroy(tsr_pool_t *p);

#ifdef __cplusplus
}
#endif
#endif
