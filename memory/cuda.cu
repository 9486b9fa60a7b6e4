/* memory/cuda.cu — one GPU as a memory node: its memory (a caching pool
 * over large cudaMalloc chunks), its copy engine (one thread per GPU that
 * moves data between the host, this GPU and its peers on two DMA streams,
 * through pinned staging buffers when the host memory is pageable), and
 * the stream and cuBLAS handle that kernels on this GPU run with.
 *
 * Only plain C crosses its interface (memory/cuda_gpu.h): the memory node
 * itself, with the directory's C11 structures, is memory/cuda_node.c.
 *
 * Must never: call a copy's completion from the thread that queued it or
 * from a CUDA host callback (completions queue more copies, that is, call
 * CUDA), nor while holding the queue lock; cudaMalloc once per tile; leave
 * a calling thread with a different current device than it had (alloc,
 * free, open and close run on any thread); abort the process on a CUDA
 * error (every one becomes TSR_EDEVICE with the call and the error named).
 *
 * The engine thread, in a loop: takes the jobs queued by copy(); starts
 * them in order on the inbound lane (host or peer -> this GPU, zero fills)
 * or the outbound lane (this GPU -> host or peer), each lane with its own
 * non-blocking stream; moves staged copies on by one chunk per lane per
 * turn; and completes jobs whose last operation's event has fired. When
 * nothing moved it waits: on a staging buffer's event if a staged copy
 * needs that buffer next (a short DMA), otherwise on the queue's condition
 * variable for a short, growing time (a new job wakes it at once).
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memory/cuda_gpu.h"
#include "memory/pool.h"
#include "tessera/tessera.h"

#define STAGE_BUFS 4                      /* pinned buffers per direction */
#define STAGE_BYTES ((size_t)8 << 20)     /* bytes per pinned buffer */
#define FLIGHT_MAX 32                     /* jobs in flight per direction */
#define MARGIN_MIN ((size_t)512 << 20)    /* left free when capacity is 0 */
#define MAX_DEVICES 64
#define RUN_MARKS 16                      /* tasks in flight on the compute streams */
#define LANES_MAX 8                       /* compute streams per GPU */
#define WAIT_MIN_NS 2000                  /* idle wait: 2 us, doubling … */
#define WAIT_MAX_NS 20000                 /* … up to 20 us: only while copies are in
                                             flight (else the engine sleeps on its
                                             condition variable), so the cost is one
                                             cudaEventQuery per 20 us of a transfer;
                                             200 us left a finished copy unseen for up
                                             to a fifth of a millisecond */

enum { LANE_IN = 0, LANE_OUT = 1 };

/* One pinned staging buffer and the event that marks the end of the DMA
 * that last used it. */
typedef struct stage {
    char *buf;
    cudaEvent_t ev;
    bool busy;              /* ev recorded, not yet seen complete */
    size_t off, len;        /* outbound: which part of the job it holds */
} stage_t;

/* A job whose operations are all issued: done when ev has fired. */
typedef struct flight {
    tsr_copy_t *c;
    cudaEvent_t ev;         /* created at open, one per slot */
    bool has_ev;            /* ev was recorded after the job */
    int status;             /* TSR_OK, or the error met while issuing */
    char what[64];          /* the job's main call, for an error message */
} flight_t;

/* One direction of the engine: its stream, its staging ring, the jobs
 * waiting for it, the staged job being moved, and the jobs in flight. */
typedef struct lane {
    cudaStream_t stream;
    stage_t st[STAGE_BUFS];
    int head;               /* next buffer to fill (in) or to DMA into (out) */
    int tail, nbusy;        /* out: oldest buffer still to copy to the host */
    tsr_copy_t *q_head, *q_tail;
    tsr_copy_t *cur;        /* staged job in progress */
    size_t off;             /* bytes of cur issued */
    int status;             /* cur's first error */
    char what[64];
    flight_t fl[FLIGHT_MAX];
    int fl_head, fl_n;
} lane_t;

struct tsr_gpu {
    int node_id;            /* the memory node: copies to it come in */
    char name[16];          /* "cuda<dev>", for messages */
    tsr_gpu_copy_event_fn on_copy;
    void *on_copy_ctx;
    int dev;
    tsr_pool_t pool;
    bool pool_ready;

    pthread_mutex_t m;      /* head, tail, stop */
    pthread_cond_t cv;
    bool sync_ready;
    tsr_copy_t *head, *tail;
    bool stop;
    pthread_t thread;
    bool thread_started;

    lane_t lane[2];         /* engine thread only */
    cudaEvent_t wait_ev;    /* engine: the staging event it is blocked on */

    /* the compute lanes: a stream each, with a cuBLAS handle bound to it
     * (kernels of tasks on different lanes may run at once) */
    int nlanes;
    cudaStream_t compute[LANES_MAX];
    cublasHandle_t blas[LANES_MAX];
    /* marks at the end of launched tasks (the driver thread only) */
    cudaEvent_t run_ev[RUN_MARKS];
    bool run_used[RUN_MARKS];
    bool peer_ok[MAX_DEVICES];
};
typedef tsr_gpu_t cuda_node_t;

/* ---- small helpers ------------------------------------------------------ */

/* "<what> on <gpu>: <error name>: <error string>" */
static void describe(char *buf, size_t len, const char *gpu, const char *what, cudaError_t e)
{
    if (buf && len)
        snprintf(buf, len, "%s on %s: %s: %s", what, gpu, cudaGetErrorName(e),
                 cudaGetErrorString(e));
}

/* Fill c->err with the failed call, clear the thread's last CUDA error,
 * and return TSR_EDEVICE. */
static int copy_fail(const cuda_node_t *g, tsr_copy_t *c, const char *what, cudaError_t e)
{
    describe(c->err, sizeof c->err, g->name, what, e);
    (void)cudaGetLastError();
    return TSR_EDEVICE;
}

/* Same for open's error buffer. */
static int open_fail(char *err, size_t errlen, int device, const char *what, cudaError_t e)
{
    char gpu[16];
    snprintf(gpu, sizeof gpu, "cuda%d", device);
    describe(err, errlen, gpu, what, e);
    (void)cudaGetLastError();
    return TSR_EDEVICE;
}

/* Run on g's device from any thread: remember the caller's device so it
 * can be put back. */
static int device_enter(const cuda_node_t *g)
{
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) {
        (void)cudaGetLastError();
        prev = -1;
    }
    if (prev != g->dev && cudaSetDevice(g->dev) != cudaSuccess)
        (void)cudaGetLastError();
    return prev;
}

static void device_leave(const cuda_node_t *g, int prev)
{
    if (prev >= 0 && prev != g->dev && cudaSetDevice(prev) != cudaSuccess)
        (void)cudaGetLastError();
}

/* Whether a host pointer is page-locked (or managed) memory that the DMA
 * engines can read or write directly; pageable memory goes through staging. */
static bool host_is_pinned(const void *p)
{
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return a.type == cudaMemoryTypeHost || a.type == cudaMemoryTypeManaged;
}

/* The device a pointer's memory lives on, or -1 if it is host memory. */
static int device_of(const void *p)
{
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return a.type == cudaMemoryTypeDevice ? a.device : -1;
}

/* ---- memory: a pool over cudaMalloc chunks ------------------------------ */

/* Why the calling thread's last chunk allocation failed (for the
 * directory's message). */
static thread_local char alloc_err[TSR_MEM_ERR];

/* The pool's backend: one cudaMalloc per chunk, on this GPU. */
static void *chunk_alloc(void *ctx, size_t bytes)
{
    cuda_node_t *g = (cuda_node_t *)ctx;
    int prev = device_enter(g);
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        char what[64];
        snprintf(what, sizeof what, "cudaMalloc(%zu bytes)", bytes);
        describe(alloc_err, sizeof alloc_err, g->name, what, e);
        (void)cudaGetLastError(); /* out of memory is not sticky: clear it */
        p = NULL;
    }
    device_leave(g, prev);
    return p;
}

static void chunk_free(void *ctx, void *p, size_t bytes)
{
    (void)bytes;
    cuda_node_t *g = (cuda_node_t *)ctx;
    int prev = device_enter(g);
    if (cudaFree(p) != cudaSuccess)
        (void)cudaGetLastError();
    device_leave(g, prev);
}

extern "C" {

/* Node memory: the pool trims and retries once when cudaMalloc fails. */
void *tsr__gpu_alloc(tsr_gpu_t *g, size_t size, char *err, size_t errlen)
{
    if (!g)
        return NULL;
    alloc_err[0] = 0;
    void *p = tsr_pool_alloc(&g->pool, size);
    if (!p && err && errlen)
        snprintf(err, errlen, "%s", alloc_err[0] ? alloc_err : "out of pool records");
    return p;
}

/* Back to the pool, which knows the block's size. */
void tsr__gpu_free(tsr_gpu_t *g, void *p)
{
    if (g)
        tsr_pool_free(&g->pool, p);
}

size_t tsr__gpu_trim(tsr_gpu_t *g) { return g ? tsr_pool_trim(&g->pool) : 0; }

/* Pinned host chunks: portable, so that every GPU's DMA engines use them. */
void *tsr__gpu_host_alloc(size_t bytes)
{
    void *p = NULL;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return p;
}

void tsr__gpu_host_free(void *p)
{
    if (p && cudaFreeHost(p) != cudaSuccess)
        (void)cudaGetLastError();
}

} /* extern "C" */

/* ---- copies: queueing ---------------------------------------------------- */

/* Queue c for the engine (any thread). Only checks that one side is this
 * GPU; everything else is found out, and reported, by the engine. */
extern "C" int tsr__gpu_copy(tsr_gpu_t *g, tsr_copy_t *c)
{
    if (!c)
        return TSR_EINVAL;
    if (!g || !c->done || !c->dst) {
        snprintf(c->err, sizeof c->err, "%s: copy without %s", g ? g->name : "cuda",
                 !g ? "an open node" : !c->done ? "a completion" : "a destination");
        return TSR_EINVAL;
    }
    if (!c->src && c->dst_node != g->node_id) {
        snprintf(c->err, sizeof c->err, "%s: zero fill of node %d queued here", g->name,
                 c->dst_node);
        return TSR_EINVAL;
    }
    if (c->dst_node != g->node_id && c->src_node != g->node_id) {
        snprintf(c->err, sizeof c->err, "%s: copy from node %d to node %d queued here",
                 g->name, c->src_node, c->dst_node);
        return TSR_EINVAL;
    }
    c->next = NULL;
    c->t_start = c->t_end = 0;
    if (!c->t_queued)
        c->t_queued = tsr__mem_now_ns();
    pthread_mutex_lock(&g->m);
    if (g->stop) {
        pthread_mutex_unlock(&g->m);
        snprintf(c->err, sizeof c->err, "%s: the copy engine is stopping", g->name);
        return TSR_ESTATE;
    }
    if (g->tail)
        g->tail->next = c;
    else
        g->head = c;
    g->tail = c;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->m);
    return TSR_OK;
}

/* ---- copies: the engine --------------------------------------------------- */

/* The end of a job, on the engine thread: time stamps, the node's counters
 * (successful copies only: a failed one moved nothing), then the
 * completion, which may queue more copies. */
static void complete(cuda_node_t *g, tsr_copy_t *c, int status)
{
    c->t_end = tsr__mem_now_ns();
    if (!c->t_start)
        c->t_start = c->t_end;
    if (status == TSR_OK)
        g->on_copy(g->on_copy_ctx, c);
    c->done(c->arg, status);
}

/* A job whose operations are issued on L's stream: record its event and
 * put it in flight (a slot is free: the caller checked). */
static void flight_push(cuda_node_t *g, lane_t *L, tsr_copy_t *c, int status, const char *what)
{
    flight_t *f = &L->fl[(L->fl_head + L->fl_n) % FLIGHT_MAX];
    f->c = c;
    f->status = status;
    snprintf(f->what, sizeof f->what, "%s", what);
    cudaError_t e = cudaEventRecord(f->ev, L->stream);
    f->has_ev = e == cudaSuccess;
    if (e != cudaSuccess && f->status == TSR_OK)
        f->status = copy_fail(g, c, "cudaEventRecord(copy done)", e);
    L->fl_n++;
}

/* Complete L's flights whose events have fired, oldest first (a stream
 * runs in order, so a later one cannot be done before an earlier one). */
static bool lane_reap(cuda_node_t *g, lane_t *L)
{
    bool progress = false;
    while (L->fl_n > 0) {
        flight_t *f = &L->fl[L->fl_head];
        int status = f->status;
        if (f->has_ev) {
            cudaError_t e = cudaEventQuery(f->ev);
            if (e == cudaErrorNotReady)
                break;
            if (e != cudaSuccess && status == TSR_OK)
                status = copy_fail(g, f->c, f->what, e); /* the copy itself failed */
        }
        tsr_copy_t *c = f->c;
        f->c = NULL;
        L->fl_head = (L->fl_head + 1) % FLIGHT_MAX;
        L->fl_n--;
        complete(g, c, status);
        progress = true;
    }
    return progress;
}

/* Start L's waiting jobs in order: a copy the DMA engines can do alone is
 * issued and put in flight; a staged one (pageable host memory) becomes
 * L->cur and the next ones wait until it is all issued. */
static bool lane_start(cuda_node_t *g, lane_t *L, bool in)
{
    bool progress = false;
    while (L->q_head && !L->cur && L->fl_n < FLIGHT_MAX) {
        tsr_copy_t *c = L->q_head;
        L->q_head = c->next;
        if (!L->q_head)
            L->q_tail = NULL;
        c->next = NULL;
        c->t_start = tsr__mem_now_ns();
        progress = true;

        const int me = g->node_id;
        char what[64];
        cudaError_t e = cudaSuccess;
        if (in && !c->src) {
            snprintf(what, sizeof what, "cudaMemsetAsync(%zu bytes)", c->size);
            e = cudaMemsetAsync(c->dst, 0, c->size, L->stream);
        } else if (in) {
            int sdev = c->src_node == me ? g->dev : device_of(c->src);
            if (sdev == g->dev) {
                snprintf(what, sizeof what, "cudaMemcpyAsync(D2D, %zu bytes)", c->size);
                e = cudaMemcpyAsync(c->dst, c->src, c->size, cudaMemcpyDeviceToDevice,
                                    L->stream);
            } else if (sdev >= 0) {
                snprintf(what, sizeof what, "cudaMemcpyPeerAsync(cuda%d->cuda%d, %zu bytes)",
                         sdev, g->dev, c->size);
                e = cudaMemcpyPeerAsync(c->dst, g->dev, c->src, sdev, c->size, L->stream);
            } else if (host_is_pinned(c->src)) {
                snprintf(what, sizeof what, "cudaMemcpyAsync(H2D, %zu bytes)", c->size);
                e = cudaMemcpyAsync(c->dst, c->src, c->size, cudaMemcpyDefault, L->stream);
            } else {
                L->cur = c; /* pageable: staged by lane_in_step */
                L->off = 0;
                L->status = TSR_OK;
                snprintf(L->what, sizeof L->what, "staged H2D copy of %zu bytes", c->size);
                break;
            }
        } else {
            int ddev = device_of(c->dst);
            if (ddev >= 0 && ddev != g->dev) {
                snprintf(what, sizeof what, "cudaMemcpyPeerAsync(cuda%d->cuda%d, %zu bytes)",
                         g->dev, ddev, c->size);
                e = cudaMemcpyPeerAsync(c->dst, ddev, c->src, g->dev, c->size, L->stream);
            } else if (ddev == g->dev) {
                snprintf(what, sizeof what, "cudaMemcpyAsync(D2D, %zu bytes)", c->size);
                e = cudaMemcpyAsync(c->dst, c->src, c->size, cudaMemcpyDeviceToDevice,
                                    L->stream);
            } else if (host_is_pinned(c->dst)) {
                snprintf(what, sizeof what, "cudaMemcpyAsync(D2H, %zu bytes)", c->size);
                e = cudaMemcpyAsync(c->dst, c->src, c->size, cudaMemcpyDefault, L->stream);
            } else {
                L->cur = c; /* pageable: staged by lane_out_step */
                L->off = 0;
                L->status = TSR_OK;
                snprintf(L->what, sizeof L->what, "staged D2H copy of %zu bytes", c->size);
                break;
            }
        }
        flight_push(g, L, c, e == cudaSuccess ? TSR_OK : copy_fail(g, c, what, e), what);
    }
    return progress;
}

/* Host -> device through staging, one chunk per call: copy the next chunk
 * of pageable memory into the next pinned buffer (once the DMA that last
 * used it is done) and DMA it to the GPU; the memcpy of a chunk overlaps
 * the DMAs of the chunks before it. When the whole job is issued, it goes
 * in flight. */
static bool lane_in_step(cuda_node_t *g, lane_t *L)
{
    tsr_copy_t *c = L->cur;
    if (!c)
        return false;
    if (L->status != TSR_OK || L->off == c->size) {
        if (L->fl_n == FLIGHT_MAX)
            return false; /* wait for a flight to end */
        L->cur = NULL;
        flight_push(g, L, c, L->status, L->what);
        return true;
    }
    stage_t *b = &L->st[L->head];
    if (b->busy) {
        cudaError_t e = cudaEventQuery(b->ev);
        if (e == cudaErrorNotReady) {
            g->wait_ev = b->ev;
            return false;
        }
        b->busy = false;
        if (e != cudaSuccess) {
            L->status = copy_fail(g, c, "cudaEventQuery(H2D staging buffer)", e);
            return true;
        }
    }
    size_t len = c->size - L->off < STAGE_BYTES ? c->size - L->off : STAGE_BYTES;
    memcpy(b->buf, (const char *)c->src + L->off, len);
    cudaError_t e = cudaMemcpyAsync((char *)c->dst + L->off, b->buf, len,
                                    cudaMemcpyHostToDevice, L->stream);
    if (e != cudaSuccess) {
        char what[64];
        snprintf(what, sizeof what, "cudaMemcpyAsync(H2D, %zu bytes)", len);
        L->status = copy_fail(g, c, what, e);
        return true;
    }
    e = cudaEventRecord(b->ev, L->stream);
    if (e != cudaSuccess) {
        L->status = copy_fail(g, c, "cudaEventRecord(H2D staging buffer)", e);
        return true;
    }
    b->busy = true;
    L->head = (L->head + 1) % STAGE_BUFS;
    L->off += len;
    return true;
}

/* Device -> host through staging: DMA the next chunk into a free pinned
 * buffer (up to STAGE_BUFS chunks ahead) and copy the oldest finished one
 * out to the pageable destination. The job is complete when every chunk
 * is copied out (or, after an error, when the chunks issued have landed). */
static bool lane_out_step(cuda_node_t *g, lane_t *L)
{
    tsr_copy_t *c = L->cur;
    if (!c)
        return false;
    bool progress = false;
    if (L->status == TSR_OK && L->off < c->size && L->nbusy < STAGE_BUFS) {
        stage_t *b = &L->st[L->head];
        size_t len = c->size - L->off < STAGE_BYTES ? c->size - L->off : STAGE_BYTES;
        cudaError_t e = cudaMemcpyAsync(b->buf, (const char *)c->src + L->off, len,
                                        cudaMemcpyDeviceToHost, L->stream);
        if (e == cudaSuccess)
            e = cudaEventRecord(b->ev, L->stream);
        if (e != cudaSuccess) {
            char what[64];
            snprintf(what, sizeof what, "cudaMemcpyAsync(D2H, %zu bytes)", len);
            L->status = copy_fail(g, c, what, e);
        } else {
            b->off = L->off;
            b->len = len;
            b->busy = true;
            L->head = (L->head + 1) % STAGE_BUFS;
            L->nbusy++;
            L->off += len;
        }
        progress = true;
    }
    if (L->nbusy > 0) {
        stage_t *b = &L->st[L->tail];
        cudaError_t e = cudaEventQuery(b->ev);
        if (e == cudaErrorNotReady) {
            if (!progress)
                g->wait_ev = b->ev;
        } else {
            if (e != cudaSuccess && L->status == TSR_OK) {
                char what[64];
                snprintf(what, sizeof what, "cudaMemcpyAsync(D2H, %zu bytes)", b->len);
                L->status = copy_fail(g, c, what, e);
            }
            if (L->status == TSR_OK)
                memcpy((char *)c->dst + b->off, b->buf, b->len);
            b->busy = false;
            L->tail = (L->tail + 1) % STAGE_BUFS;
            L->nbusy--;
            progress = true;
        }
    }
    if (L->nbusy == 0 && (L->status != TSR_OK || L->off == c->size)) {
        L->cur = NULL;
        complete(g, c, L->status);
        progress = true;
    }
    return progress;
}

/* Whether the engine has anything queued, started or in flight. */
static bool engine_busy(const cuda_node_t *g)
{
    for (int i = 0; i < 2; i++) {
        const lane_t *L = &g->lane[i];
        if (L->q_head || L->cur || L->fl_n || L->nbusy)
            return true;
    }
    return false;
}

/* Move the jobs queued by copy() to their lanes. g->m held. */
static void engine_take(cuda_node_t *g)
{
    const int me = g->node_id;
    while (g->head) {
        tsr_copy_t *c = g->head;
        g->head = c->next;
        c->next = NULL;
        lane_t *L = &g->lane[c->dst_node == me ? LANE_IN : LANE_OUT];
        if (L->q_tail)
            L->q_tail->next = c;
        else
            L->q_head = c;
        L->q_tail = c;
    }
    g->tail = NULL;
}

/* The engine thread (see the top of the file): take, start, step, reap;
 * wait when nothing moved; leave once stopped with nothing left. */
static void *engine_main(void *arg)
{
    cuda_node_t *g = (cuda_node_t *)arg;
    /* A failure here shows up as the error of every copy's first call. */
    if (cudaSetDevice(g->dev) != cudaSuccess)
        (void)cudaGetLastError();
    long wait_ns = WAIT_MIN_NS;
    for (;;) {
        pthread_mutex_lock(&g->m);
        while (!g->head && !engine_busy(g) && !g->stop)
            pthread_cond_wait(&g->cv, &g->m);
        engine_take(g);
        bool quit = g->stop && !engine_busy(g);
        pthread_mutex_unlock(&g->m);
        if (quit)
            break;

        g->wait_ev = NULL;
        bool progress = lane_start(g, &g->lane[LANE_IN], true);
        progress |= lane_start(g, &g->lane[LANE_OUT], false);
        progress |= lane_in_step(g, &g->lane[LANE_IN]);
        progress |= lane_out_step(g, &g->lane[LANE_OUT]);
        progress |= lane_reap(g, &g->lane[LANE_IN]);
        progress |= lane_reap(g, &g->lane[LANE_OUT]);
        if (progress) {
            wait_ns = WAIT_MIN_NS;
        } else if (g->wait_ev) {
            /* a staged copy needs this buffer next: at most one chunk's DMA */
            if (cudaEventSynchronize(g->wait_ev) != cudaSuccess)
                (void)cudaGetLastError(); /* seen again by the query */
        } else {
            /* only flights: sleep briefly, or until copy() queues a job */
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            long ns = ts.tv_nsec + wait_ns;
            ts.tv_sec += ns / 1000000000L;
            ts.tv_nsec = ns % 1000000000L;
            pthread_mutex_lock(&g->m);
            if (!g->head)
                pthread_cond_timedwait(&g->cv, &g->m, &ts);
            pthread_mutex_unlock(&g->m);
            wait_ns = wait_ns * 2 > WAIT_MAX_NS ? WAIT_MAX_NS : wait_ns * 2;
        }
    }
    return NULL;
}

/* ---- peers ---------------------------------------------------------------- */

/* Peer access to `device` was enabled both ways at open. */
extern "C" bool tsr__gpu_peer(const tsr_gpu_t *g, int device)
{
    return g && device >= 0 && device < MAX_DEVICES && device != g->dev && g->peer_ok[device];
}

/* ---- kernels --------------------------------------------------------------- */

/* A lane out of range: TSR_EINVAL naming it. */
static int bad_lane(tsr_gpu_t *g, int lane, char *err, size_t errlen)
{
    if (lane >= 0 && lane < g->nlanes)
        return TSR_OK;
    if (err && errlen)
        snprintf(err, errlen, "%s: no compute lane %d (%d lanes)", g->name, lane, g->nlanes);
    return TSR_EINVAL;
}

extern "C" int tsr__gpu_lanes(const tsr_gpu_t *g)
{
    return g->nlanes;
}

/* On the GPU's driver thread before a kernel: make this GPU current and
 * hand out the lane's compute stream and the cuBLAS handle bound to it. A
 * failed cudaSetDevice is the task's failure: the implementation must not
 * run on whatever device the thread had. */
extern "C" int tsr__gpu_exec_begin(tsr_gpu_t *g, int lane, void **stream, void **blas,
                                   char *err, size_t errlen)
{
    if (stream)
        *stream = NULL;
    if (blas)
        *blas = NULL;
    if (bad_lane(g, lane, err, errlen))
        return TSR_EINVAL;
    cudaError_t e = cudaSetDevice(g->dev);
    if (e != cudaSuccess) {
        char what[48];
        snprintf(what, sizeof what, "cudaSetDevice(%d)", g->dev);
        describe(err, errlen, g->name, what, e);
        (void)cudaGetLastError();
        return TSR_EDEVICE;
    }
    if (stream)
        *stream = (void *)g->compute[lane];
    if (blas)
        *blas = (void *)g->blas[lane];
    return TSR_OK;
}

/* After the kernel: wait for the lane's stream, and turn an error of the
 * kernel (asynchronous, or from its launch) into TSR_EDEVICE. */
extern "C" int tsr__gpu_exec_end(tsr_gpu_t *g, int lane, char *err, size_t errlen)
{
    if (bad_lane(g, lane, err, errlen))
        return TSR_EINVAL;
    cudaError_t e = cudaStreamSynchronize(g->compute[lane]);
    const char *what = "cudaStreamSynchronize(compute)";
    cudaError_t last = cudaGetLastError(); /* also clears a launch error */
    if (e == cudaSuccess && last != cudaSuccess) {
        e = last;
        what = "kernel launch (cudaGetLastError)";
    }
    if (e == cudaSuccess)
        return TSR_OK;
    describe(err, errlen, g->name, what, e);
    return TSR_EDEVICE;
}

/* Mark the end of the kernels a task queued on the compute stream, so
 * that the worker can launch the next task at once and complete this one
 * when the mark is reached. A launch error left by the task's kernels is
 * reported now. */
extern "C" int tsr__gpu_exec_record(tsr_gpu_t *g, int lane, int *mark, char *err,
                                    size_t errlen)
{
    *mark = -1;
    if (bad_lane(g, lane, err, errlen))
        return TSR_EINVAL;
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        describe(err, errlen, g->name, "kernel launch (cudaGetLastError)", e);
        return TSR_EDEVICE;
    }
    int k = 0;
    while (k < RUN_MARKS && g->run_used[k])
        k++;
    if (k == RUN_MARKS) {
        if (err && errlen)
            snprintf(err, errlen, "%s: more than %d tasks in flight", g->name, RUN_MARKS);
        return TSR_EBUSY;
    }
    e = cudaEventRecord(g->run_ev[k], g->compute[lane]);
    if (e != cudaSuccess) {
        describe(err, errlen, g->name, "cudaEventRecord(task done)", e);
        (void)cudaGetLastError();
        return TSR_EDEVICE;
    }
    g->run_used[k] = true;
    *mark = k;
    return TSR_OK;
}

/* 1 when the task's kernels are done (the mark is free again), 0 if not
 * yet, or TSR_EDEVICE when they failed. */
extern "C" int tsr__gpu_exec_poll(tsr_gpu_t *g, int mark, bool wait, char *err, size_t errlen)
{
    if (mark < 0 || mark >= RUN_MARKS || !g->run_used[mark]) {
        if (err && errlen)
            snprintf(err, errlen, "%s: no task in flight with mark %d", g->name, mark);
        return TSR_EINVAL;
    }
    cudaError_t e = wait ? cudaEventSynchronize(g->run_ev[mark]) : cudaEventQuery(g->run_ev[mark]);
    if (e == cudaErrorNotReady)
        return 0;
    g->run_used[mark] = false;
    if (e == cudaSuccess)
        return 1;
    describe(err, errlen, g->name,
             wait ? "the task's kernels (cudaEventSynchronize)" : "the task's kernels (cudaEventQuery)",
             e);
    (void)cudaGetLastError();
    return TSR_EDEVICE;
}

/* What is queued on `lane` from now on runs after the kernels behind
 * `mark` (recorded on another lane, not yet polled to its end): the
 * device orders the two tasks, the host does not wait. The mark's event
 * is re-recorded only after its task completed, so the wait always names
 * the task the worker meant. */
extern "C" int tsr__gpu_exec_wait(tsr_gpu_t *g, int lane, int mark, char *err, size_t errlen)
{
    if (bad_lane(g, lane, err, errlen))
        return TSR_EINVAL;
    if (mark < 0 || mark >= RUN_MARKS || !g->run_used[mark]) {
        if (err && errlen)
            snprintf(err, errlen, "%s: no task in flight with mark %d", g->name, mark);
        return TSR_EINVAL;
    }
    cudaError_t e = cudaStreamWaitEvent(g->compute[lane], g->run_ev[mark], 0);
    if (e == cudaSuccess)
        return TSR_OK;
    describe(err, errlen, g->name, "cudaStreamWaitEvent(predecessor's kernels)", e);
    (void)cudaGetLastError();
    return TSR_EDEVICE;
}

/* ---- open and close ---------------------------------------------------------- */

/* Free whatever open created, in reverse (g may be half built). The engine
 * thread has stopped. */
static void node_destroy(cuda_node_t *g)
{
    int prev = device_enter(g);
    for (int l = 0; l < LANES_MAX; l++) {
        if (g->blas[l])
            cublasDestroy(g->blas[l]);
        if (g->compute[l])
            cudaStreamSynchronize(g->compute[l]);
    }
    for (int k = 0; k < RUN_MARKS; k++)
        if (g->run_ev[k])
            cudaEventDestroy(g->run_ev[k]);
    for (int l = 0; l < LANES_MAX; l++)
        if (g->compute[l])
            cudaStreamDestroy(g->compute[l]);
    for (int i = 0; i < 2; i++) {
        lane_t *L = &g->lane[i];
        if (L->stream)
            cudaStreamSynchronize(L->stream);
        for (int k = 0; k < FLIGHT_MAX; k++)
            if (L->fl[k].ev)
                cudaEventDestroy(L->fl[k].ev);
        for (int k = 0; k < STAGE_BUFS; k++) {
            if (L->st[k].ev)
                cudaEventDestroy(L->st[k].ev);
            if (L->st[k].buf)
                cudaFreeHost(L->st[k].buf);
        }
        if (L->stream)
            cudaStreamDestroy(L->stream);
    }
    if (g->pool_ready)
        tsr_pool_destroy(&g->pool); /* the chunks: cudaFree */
    (void)cudaGetLastError();
    device_leave(g, prev);
    if (g->sync_ready) {
        pthread_mutex_destroy(&g->m);
        pthread_cond_destroy(&g->cv);
    }
    free(g);
}

extern "C" {

/* Stop the engine once every queued copy is complete, then free it all. */
void tsr__gpu_close(tsr_gpu_t *g)
{
    if (!g)
        return;
    if (g->thread_started) {
        pthread_mutex_lock(&g->m);
        g->stop = true;
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->m);
        pthread_join(g->thread, NULL);
    }
    node_destroy(g);
}

/* GPUs the runtime can open: 0 without a device or a driver (not an error;
 * the sticky error that leaves behind is cleared). */
int tsr__gpu_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

/* Open GPU `device` for node `node_id`. Creates, on that device, the streams, the
 * staging buffers and events, the cuBLAS handle, peer access to the other
 * GPUs that allow it both ways, the memory pool (empty: chunks come on
 * demand) and the engine thread. On failure nothing stays open. */
int tsr__gpu_open(int device, int node_id, int lanes, size_t *capacity_io,
                  tsr_gpu_copy_event_fn on_copy, void *on_copy_ctx, tsr_gpu_t **out, char *err,
                  size_t errlen)
{
    int count = tsr__gpu_count();
    if (!out || !capacity_io || !on_copy) {
        if (err && errlen)
            snprintf(err, errlen, "cuda%d: open without %s", device,
                     !out ? "a result" : !capacity_io ? "a capacity" : "a copy callback");
        return TSR_EINVAL;
    }
    *out = NULL;
    if (device < 0 || device >= count || device >= MAX_DEVICES) {
        if (err && errlen)
            snprintf(err, errlen, "cuda%d: no such device (%d usable)", device, count);
        return TSR_ENODEV;
    }
    size_t capacity = *capacity_io;
    cuda_node_t *g = (cuda_node_t *)calloc(1, sizeof *g);
    if (!g) {
        if (err && errlen)
            snprintf(err, errlen, "cuda%d: out of host memory", device);
        return TSR_ENOMEM;
    }
    g->node_id = node_id;
    snprintf(g->name, sizeof g->name, "cuda%d", device);
    g->on_copy = on_copy;
    g->on_copy_ctx = on_copy_ctx;
    g->dev = device;
    g->nlanes = lanes < 1 ? 1 : lanes > LANES_MAX ? LANES_MAX : lanes;
    int rc = TSR_OK;
    int prev = device_enter(g);
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) {
        rc = open_fail(err, errlen, device, "cudaSetDevice", e);
        goto fail;
    }

    if (capacity == 0) {
        size_t fr = 0, tot = 0;
        e = cudaMemGetInfo(&fr, &tot);
        if (e != cudaSuccess) {
            rc = open_fail(err, errlen, device, "cudaMemGetInfo", e);
            goto fail;
        }
        size_t margin = tot / 20 > MARGIN_MIN ? tot / 20 : MARGIN_MIN;
        if (fr <= margin) {
            if (err && errlen)
                snprintf(err, errlen, "cuda%d: %zu MiB free, no more than the %zu MiB kept free",
                         device, fr >> 20, margin >> 20);
            rc = TSR_ENOMEM;
            goto fail;
        }
        capacity = fr - margin;
    }

    {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        int r1 = pthread_mutex_init(&g->m, NULL);
        int r2 = pthread_cond_init(&g->cv, &ca);
        pthread_condattr_destroy(&ca);
        if (r1 != 0 || r2 != 0) {
            if (r1 == 0)
                pthread_mutex_destroy(&g->m);
            if (r2 == 0)
                pthread_cond_destroy(&g->cv);
            if (err && errlen)
                snprintf(err, errlen, "cuda%d: cannot create the engine's lock", device);
            rc = TSR_ENOMEM;
            goto fail;
        }
        g->sync_ready = true;
    }

    for (int l = 0; l < g->nlanes; l++)
        if ((e = cudaStreamCreateWithFlags(&g->compute[l], cudaStreamNonBlocking)) !=
            cudaSuccess) {
            g->compute[l] = NULL;
            rc = open_fail(err, errlen, device, "cudaStreamCreateWithFlags(compute)", e);
            goto fail;
        }
    for (int k = 0; k < RUN_MARKS; k++)
        if ((e = cudaEventCreateWithFlags(&g->run_ev[k], cudaEventDisableTiming)) !=
            cudaSuccess) {
            rc = open_fail(err, errlen, device, "cudaEventCreateWithFlags(task done)", e);
            goto fail;
        }
    for (int i = 0; i < 2; i++) {
        lane_t *L = &g->lane[i];
        if ((e = cudaStreamCreateWithFlags(&L->stream, cudaStreamNonBlocking)) != cudaSuccess) {
            rc = open_fail(err, errlen, device, "cudaStreamCreateWithFlags(copy)", e);
            goto fail;
        }
        for (int k = 0; k < STAGE_BUFS; k++) {
            if ((e = cudaHostAlloc((void **)&L->st[k].buf, STAGE_BYTES, cudaHostAllocDefault)) !=
                cudaSuccess) {
                L->st[k].buf = NULL;
                rc = open_fail(err, errlen, device, "cudaHostAlloc(staging)", e);
                goto fail;
            }
            if ((e = cudaEventCreateWithFlags(&L->st[k].ev, cudaEventDisableTiming)) !=
                cudaSuccess) {
                rc = open_fail(err, errlen, device, "cudaEventCreateWithFlags", e);
                goto fail;
            }
        }
        for (int k = 0; k < FLIGHT_MAX; k++)
            if ((e = cudaEventCreateWithFlags(&L->fl[k].ev, cudaEventDisableTiming)) !=
                cudaSuccess) {
                rc = open_fail(err, errlen, device, "cudaEventCreateWithFlags", e);
                goto fail;
            }
    }

    for (int l = 0; l < g->nlanes; l++) {
        cublasStatus_t s = cublasCreate(&g->blas[l]);
        if (s != CUBLAS_STATUS_SUCCESS) {
            g->blas[l] = NULL;
            if (err && errlen)
                snprintf(err, errlen, "cublasCreate on cuda%d: %s (%d)", device,
                         cublasGetStatusString(s), (int)s);
            rc = TSR_EDEVICE;
            goto fail;
        }
        s = cublasSetStream(g->blas[l], g->compute[l]);
        if (s != CUBLAS_STATUS_SUCCESS) {
            if (err && errlen)
                snprintf(err, errlen, "cublasSetStream on cuda%d: %s (%d)", device,
                         cublasGetStatusString(s), (int)s);
            rc = TSR_EDEVICE;
            goto fail;
        }
    }

    /* Peer access, both ways or not at all; the other GPU enables its own
     * side when it opens. Already enabled (a second open) is fine. */
    for (int o = 0; o < count && o < MAX_DEVICES; o++) {
        if (o == device)
            continue;
        int ab = 0, ba = 0;
        if (cudaDeviceCanAccessPeer(&ab, device, o) != cudaSuccess ||
            cudaDeviceCanAccessPeer(&ba, o, device) != cudaSuccess || !ab || !ba) {
            (void)cudaGetLastError();
            continue;
        }
        e = cudaDeviceEnablePeerAccess(o, 0);
        g->peer_ok[o] = e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled;
        (void)cudaGetLastError();
    }

    if ((rc = tsr_pool_init(&g->pool, 0, chunk_alloc, chunk_free, g)) != TSR_OK) {
        if (err && errlen)
            snprintf(err, errlen, "cuda%d: cannot create the memory pool", device);
        goto fail;
    }
    g->pool_ready = true;

    if (pthread_create(&g->thread, NULL, engine_main, g) != 0) {
        if (err && errlen)
            snprintf(err, errlen, "cuda%d: cannot start the copy engine thread", device);
        rc = TSR_ENOMEM;
        goto fail;
    }
    g->thread_started = true;
    device_leave(g, prev);
    *capacity_io = capacity;
    *out = g;
    return TSR_OK;

fail:
    device_leave(g, prev);
    node_destroy(g);
    return rc;
}

} /* extern "C" */
