/* memory/cuda_node.c — one GPU as a memory node of the directory: the node
 * operations over the GPU's CUDA code (memory/cuda_gpu.h), and the pinned
 * pool that host replicas come from once a GPU is open.
 *
 * This file is C11 because it is the only part of the GPU node that sees
 * memory.h's structures (C11 atomics); memory/cuda.cu, compiled as CUDA
 * C++, sees only plain C through memory/cuda_gpu.h.
 *
 * Must never: call CUDA itself (everything goes through cuda_gpu.h), or
 * free host memory that the pinned pool did not hand out.
 */
#include "memory/cuda_gpu.h"
#include "memory/memory.h"
#include "memory/pool.h"

#include <tessera/tessera.h>

#include <stdio.h>
#include <stdlib.h>

/* ---- the pinned pool of host replicas ---------------------------------- */

/* Chunks of this size from cudaHostAlloc (one call per chunk: the call is
 * slow, and registering every replica would be slower still). */
#define PINNED_CHUNK ((size_t)64 << 20)

static tsr_pool_t pinned_pool;

static void *pinned_chunk_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    return tsr__gpu_host_alloc(bytes);
}

static void pinned_chunk_free(void *ctx, void *p, size_t bytes)
{
    (void)ctx;
    (void)bytes;
    tsr__gpu_host_free(p);
}

static void *pinned_alloc(void *ctx, size_t size) { return tsr_pool_alloc(ctx, size); }

static bool pinned_free(void *ctx, void *p)
{
    if (!tsr_pool_owns(ctx, p))
        return false;
    tsr_pool_free(ctx, p);
    return true;
}

static void pinned_close(void *ctx) { tsr_pool_destroy(ctx); }

/* Once, at the first GPU's open: host replicas come from pinned memory. */
static void pinned_install(void)
{
    if (tsr__host_pinned())
        return;
    if (tsr_pool_init(&pinned_pool, PINNED_CHUNK, pinned_chunk_alloc, pinned_chunk_free,
                      NULL) != TSR_OK)
        return; /* pageable host replicas: copies are staged, still correct */
    tsr_host_pinned_t pin = {
        .alloc = pinned_alloc, .free = pinned_free, .close = pinned_close, .ctx = &pinned_pool};
    if (!tsr__host_set_pinned(&pin))
        tsr_pool_destroy(&pinned_pool);
}

/* ---- node operations ---------------------------------------------------- */

/* Why this thread's last allocation failed (cudaMalloc's error). */
static _Thread_local char alloc_err[TSR_MEM_ERR];

static void *cuda_alloc(tsr_node_t *n, size_t size)
{
    alloc_err[0] = 0;
    return tsr__gpu_alloc(n->impl, size, alloc_err, sizeof alloc_err);
}

static const char *cuda_alloc_error(tsr_node_t *n)
{
    (void)n;
    return alloc_err;
}

static void cuda_free(tsr_node_t *n, void *p, size_t size)
{
    (void)size;
    tsr__gpu_free(n->impl, p);
}

static int cuda_copy(tsr_node_t *n, tsr_copy_t *c)
{
    if (!c)
        return TSR_EINVAL;
    if (!n->impl) {
        snprintf(c->err, sizeof c->err, "%s: copy without an open node", n->name);
        return TSR_EINVAL;
    }
    return tsr__gpu_copy(n->impl, c);
}

/* The engine reaches the host, and the GPUs it has peer access to both
 * ways (enabled at open). */
static bool cuda_peer(tsr_node_t *n, const tsr_node_t *other)
{
    if (!n->impl || !other || other == n)
        return false;
    if (other->kind == TSR_NODE_KIND_HOST)
        return true;
    return other->kind == TSR_NODE_KIND_CUDA && tsr__gpu_peer(n->impl, other->index);
}

static int cuda_exec_begin(tsr_node_t *n, int lane, void **stream, void **blas, char *err,
                           size_t errlen)
{
    return tsr__gpu_exec_begin(n->impl, lane, stream, blas, err, errlen);
}

static int cuda_exec_end(tsr_node_t *n, int lane, char *err, size_t errlen)
{
    return tsr__gpu_exec_end(n->impl, lane, err, errlen);
}

static int cuda_exec_record(tsr_node_t *n, int lane, int *mark, char *err, size_t errlen)
{
    return tsr__gpu_exec_record(n->impl, lane, mark, err, errlen);
}

static int cuda_exec_poll(tsr_node_t *n, int mark, bool wait, char *err, size_t errlen)
{
    return tsr__gpu_exec_poll(n->impl, mark, wait, err, errlen);
}

static int cuda_exec_wait(tsr_node_t *n, int lane, int mark, char *err, size_t errlen)
{
    return tsr__gpu_exec_wait(n->impl, lane, mark, err, errlen);
}

static void cuda_close(tsr_node_t *n)
{
    tsr__gpu_close(n->impl);
    n->impl = NULL;
}

static const tsr_node_ops_t cuda_ops = {
    .alloc = cuda_alloc,
    .free = cuda_free,
    .alloc_error = cuda_alloc_error,
    .copy = cuda_copy,
    .peer = cuda_peer,
    .exec_begin = cuda_exec_begin,
    .exec_end = cuda_exec_end,
    .exec_record = cuda_exec_record,
    .exec_poll = cuda_exec_poll,
    .exec_wait = cuda_exec_wait,
    .close = cuda_close,
};

/* Every successful copy: the node's counters and trace. */
static void on_copy(void *ctx, const tsr_copy_t *c) { tsr__node_copy_event(ctx, c); }

int tsr__cuda_node_count(void) { return tsr__gpu_count(); }

/* Open GPU `device` as node n; on failure n's ops are left unset. */
int tsr__cuda_node_open(tsr_node_t *n, int device, size_t capacity, char *err, size_t errlen)
{
    if (!n) {
        if (err && errlen)
            snprintf(err, errlen, "cuda%d: open without a node", device);
        return TSR_EINVAL;
    }
    tsr_gpu_t *g = NULL;
    int rc = tsr__gpu_open(device, n->id, n->exec_lanes, &capacity, on_copy, n, &g, err,
                           errlen);
    if (rc != TSR_OK)
        return rc;
    n->exec_lanes = tsr__gpu_lanes(g);
    n->kind = TSR_NODE_KIND_CUDA;
    n->index = device;
    snprintf(n->name, sizeof n->name, "cuda%d", device);
    n->capacity = capacity;
    n->impl = g;
    n->ops = &cuda_ops;
    pinned_install();
    return TSR_OK;
}
