/* The CUDA memory node (memory/cuda_node.c over memory/cuda.cu) on a real
 * GPU or on the emulated ones (-Dcuda=emu): open and its fields, memory
 * from the pool (256-byte aligned, sub-allocated from one chunk), host ->
 * device -> host round trips of random bytes through pageable memory
 * (staged, 8 MiB + 3 B and 33 MiB + 5 B run through the staging ring
 * several times) and pinned memory (direct), the pinned pool host replicas
 * come from, zero fill, many copies in flight with completions that queue
 * the next copy, peer copies when two GPUs allow it, a cuBLAS call between
 * exec_begin and exec_end, a kernel fault turned into TSR_EDEVICE, close
 * draining its queue, and failures injected into the emulated calls
 * (TESSERA_CUDA_EMU_FAIL): cudaMalloc, a copy, cudaSetDevice in exec_begin
 * — each a TSR_EDEVICE/NULL whose message names the call, nothing hangs.
 * Skipped visibly without a GPU.
 *
 * The node is linked in directly with stand-ins for the functions it takes
 * from the rest of the memory layer (the clock, the copy trace, the host
 * allocator's pinned hook). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "../kernels/kt_cuda.h"
#include "memory/memory.h"
#include "tessera/tessera.h"

#define MIB ((size_t)1 << 20)

/* Skip (visibly, with the reason) when there is no usable GPU. */
#define REQUIRE_GPU()                                                                   \
    do {                                                                                \
        int n_ = 0;                                                                     \
        cudaError_t e_ = cudaGetDeviceCount(&n_);                                       \
        if (e_ != cudaSuccess || n_ == 0)                                               \
            cr_skip_test("no CUDA device (%s): GPU memory node test skipped",           \
                         e_ != cudaSuccess ? cudaGetErrorString(e_) : "0 devices");     \
    } while (0)

/* ---- stand-ins for memory/node.c ---------------------------------------- */

static atomic_ulong ev_count, ev_bytes, ev_bad_time;

uint64_t tsr__mem_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void tsr__node_copy_event(tsr_node_t *n, const tsr_copy_t *c)
{
    (void)n;
    atomic_fetch_add(&ev_count, 1);
    atomic_fetch_add(&ev_bytes, c->size);
    if (c->t_queued > c->t_start || c->t_start > c->t_end)
        atomic_fetch_add(&ev_bad_time, 1);
}

/* The pinned pool the first node opened installs (node.c's hook). */
static tsr_host_pinned_t pinned_hook;
static bool pinned_hook_set;

bool tsr__host_set_pinned(const tsr_host_pinned_t *pin)
{
    if (pinned_hook_set)
        return false;
    pinned_hook = *pin;
    pinned_hook_set = true;
    return true;
}

bool tsr__host_pinned(void) { return pinned_hook_set; }

/* Failures injected into the emulated CUDA runtime, set before its first
 * call in this test's process (a test that needs the emulation skips on a
 * real GPU, where nothing can be injected). */
#define REQUIRE_EMU_FAIL(spec)                                                          \
    do {                                                                                \
        if (!kt_emulated())                                                             \
            cr_skip_test("failure injection needs the CUDA emulation");                 \
        setenv("TESSERA_CUDA_EMU_FAIL", (spec), 1);                                     \
    } while (0)

/* ---- helpers ------------------------------------------------------------- */

enum { HOST = 0, GPU0 = 1, GPU1 = 2 };

static void open_node(tsr_node_t *n, int id, int device, size_t capacity)
{
    memset(n, 0, sizeof *n);
    n->id = id;
    char err[TSR_MEM_ERR] = "";
    int rc = tsr__cuda_node_open(n, device, capacity, err, sizeof err);
    cr_assert_eq(rc, TSR_OK, "open cuda%d: %s (%d)", device, err, rc);
    cr_assert_not_null(n->ops);
}

/* A set of copies waited for together. Completions run on an engine
 * thread; they record, the test thread asserts. */
typedef struct batch {
    pthread_mutex_t m;
    pthread_cond_t cv;
    int left, failed, wrong_thread;
    char err[TSR_MEM_ERR];
} batch_t;

typedef struct job {
    tsr_copy_t c;
    batch_t *b;
    int status;
    /* optional follow-up: queued from the completion (engine thread) */
    tsr_node_t *next_node;
    struct job *next_job;
} job_t;

static void batch_init(batch_t *b, int n)
{
    memset(b, 0, sizeof *b);
    pthread_mutex_init(&b->m, NULL);
    pthread_cond_init(&b->cv, NULL);
    b->left = n;
}

/* Set on the test's thread while it is inside ops->copy(). */
static _Thread_local bool in_copy;

static void job_done(void *arg, int status)
{
    job_t *j = arg;
    batch_t *b = j->b;
    j->status = status;
    bool wrong = in_copy; /* called from inside the call that queued it */
    int qrc = TSR_OK;
    if (status == TSR_OK && j->next_node)
        qrc = j->next_node->ops->copy(j->next_node, &j->next_job->c);
    pthread_mutex_lock(&b->m);
    if (wrong)
        b->wrong_thread++;
    if (status != TSR_OK || qrc != TSR_OK) {
        b->failed++;
        snprintf(b->err, sizeof b->err, "%s",
                 status != TSR_OK ? j->c.err : j->next_job->c.err);
    }
    /* this job, and its follow-up if that will never run */
    b->left -= j->next_node && (status != TSR_OK || qrc != TSR_OK) ? 2 : 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->m);
}

static void job_set(job_t *j, batch_t *b, int src_node, int dst_node, const void *src, void *dst,
                    size_t size)
{
    memset(j, 0, sizeof *j);
    j->b = b;
    j->c = (tsr_copy_t){.src_node = src_node, .dst_node = dst_node, .src = src, .dst = dst,
                        .size = size, .done = job_done, .arg = j,
                        .t_queued = tsr__mem_now_ns()};
}

static void job_queue(tsr_node_t *engine, job_t *j)
{
    in_copy = true;
    int rc = engine->ops->copy(engine, &j->c);
    in_copy = false;
    cr_assert_eq(rc, TSR_OK, "queue: %s", j->c.err);
}

static void batch_wait(batch_t *b)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 120;
    pthread_mutex_lock(&b->m);
    int rc = 0;
    while (b->left > 0 && rc == 0)
        rc = pthread_cond_timedwait(&b->cv, &b->m, &dl);
    int left = b->left;
    pthread_mutex_unlock(&b->m);
    cr_assert_eq(left, 0, "%d copies still pending after 120 s", left);
    cr_assert_eq(b->wrong_thread, 0, "a completion ran inside the call that queued it");
    cr_assert_eq(b->failed, 0, "copy failed: %s", b->err);
}

/* one copy, queued on `engine`, waited for */
static void copy_sync(tsr_node_t *engine, int src_node, int dst_node, const void *src, void *dst,
                      size_t size)
{
    batch_t b;
    job_t j;
    batch_init(&b, 1);
    job_set(&j, &b, src_node, dst_node, src, dst, size);
    job_queue(engine, &j);
    batch_wait(&b);
    cr_assert_eq(j.status, TSR_OK);
}

static unsigned char *rand_bytes(kt_rng *r, size_t n)
{
    unsigned char *p = malloc(n ? n : 1);
    cr_assert_not_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)kt_next(r);
    return p;
}

static void *node_alloc(tsr_node_t *n, size_t size)
{
    void *p = n->ops->alloc(n, size);
    cr_assert_not_null(p, "%s: alloc of %zu bytes failed", n->name, size);
    cr_assert_eq((uintptr_t)p % 256, 0, "%s: block %p not 256-byte aligned", n->name, p);
    return p;
}

static void assert_same(const unsigned char *got, const unsigned char *want, size_t n,
                        const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            cr_assert(false, "%s: byte %zu of %zu is %u, expected %u", what, i, n, got[i],
                      want[i]);
}

static const size_t sizes[] = {1, 255, 4096, 8 * MIB + 3, 33 * MIB + 5};
#define NSIZES (sizeof sizes / sizeof sizes[0])

/* ---- tests ----------------------------------------------------------------- */

Test(cuda_node, count_and_open)
{
    REQUIRE_GPU();
    cr_assert_eq(tsr__cuda_node_count(), kt_gpu_count());
    tsr_node_t n;
    open_node(&n, GPU0, 0, 0);
    cr_assert_eq(n.kind, TSR_NODE_KIND_CUDA);
    cr_assert_eq(n.index, 0);
    cr_assert_str_eq(n.name, "cuda0");
    size_t fr = 0, tot = 0;
    KT_CUDA_OK(cudaMemGetInfo(&fr, &tot));
    cr_assert_gt(n.capacity, 0);
    cr_assert_lt(n.capacity, tot, "capacity %zu of %zu bytes: no margin", n.capacity, tot);
    cr_assert_not_null(n.ops->exec_begin);
    cr_assert_not_null(n.ops->exec_end);
    n.ops->close(&n);
    cr_assert_null(n.impl);

    open_node(&n, GPU0, 0, 1024 * MIB);
    cr_assert_eq(n.capacity, 1024 * MIB);
    n.ops->close(&n);

    char err[TSR_MEM_ERR] = "";
    memset(&n, 0, sizeof n);
    cr_assert_eq(tsr__cuda_node_open(&n, kt_gpu_count(), 0, err, sizeof err), TSR_ENODEV);
    cr_assert_neq(err[0], 0, "no message");
    cr_assert_null(n.ops);
    cr_assert_eq(tsr__cuda_node_open(&n, -1, 0, err, sizeof err), TSR_ENODEV);
}

/* Blocks come from one chunk: consecutive ones are adjacent; an
 * impossible request is NULL and changes nothing. */
Test(cuda_node, pool_memory)
{
    REQUIRE_GPU();
    tsr_node_t n;
    open_node(&n, GPU0, 0, 0);
    char *a = node_alloc(&n, MIB);
    char *b = node_alloc(&n, MIB);
    char *c = node_alloc(&n, 100);
    cr_assert_eq(b, a + MIB, "not sub-allocated: %p then %p", (void *)a, (void *)b);
    cr_assert_eq(c, b + MIB);
    cr_assert_null(n.ops->alloc(&n, (size_t)1 << 50), "a petabyte was allocated");
    KT_CUDA_OK(cudaGetLastError());
    n.ops->free(&n, b, MIB);
    char *d = node_alloc(&n, 1000); /* best fit: b's hole */
    cr_assert_eq(d, b);
    n.ops->free(&n, a, MIB);
    n.ops->free(&n, c, 100);
    n.ops->free(&n, d, 1000);
    n.ops->close(&n);
}

static void round_trip(tsr_node_t *n, bool pinned, uint64_t salt)
{
    kt_rng r = kt_seed(salt);
    for (size_t k = 0; k < NSIZES; k++) {
        size_t sz = sizes[k];
        unsigned char *want = rand_bytes(&r, sz);
        unsigned char *src = want, *back;
        if (pinned) {
            KT_CUDA_OK(cudaHostAlloc((void **)&src, sz, cudaHostAllocDefault));
            memcpy(src, want, sz);
            KT_CUDA_OK(cudaHostAlloc((void **)&back, sz, cudaHostAllocDefault));
        } else {
            back = malloc(sz);
            cr_assert_not_null(back);
        }
        memset(back, 0xa5, sz);
        void *d = node_alloc(n, sz);
        unsigned long c0 = atomic_load(&ev_count), b0 = atomic_load(&ev_bytes);
        copy_sync(n, HOST, n->id, src, d, sz);
        copy_sync(n, n->id, HOST, d, back, sz);
        char what[64];
        snprintf(what, sizeof what, "%s round trip of %zu bytes", pinned ? "pinned" : "pageable",
                 sz);
        assert_same(back, want, sz, what);
        cr_assert_eq(atomic_load(&ev_count), c0 + 2);
        cr_assert_eq(atomic_load(&ev_bytes), b0 + 2 * sz);
        n->ops->free(n, d, sz);
        if (pinned) {
            cudaFreeHost(src);
            cudaFreeHost(back);
        } else {
            free(back);
        }
        free(want);
    }
    cr_assert_eq(atomic_load(&ev_bad_time), 0, "t_queued <= t_start <= t_end broken");
}

Test(cuda_node, round_trip_pageable)
{
    REQUIRE_GPU();
    tsr_node_t n;
    open_node(&n, GPU0, 0, 0);
    round_trip(&n, false, 1);
    n.ops->close(&n);
}

Test(cuda_node, round_trip_pinned)
{
    REQUIRE_GPU();
    tsr_node_t n;
    open_node(&n, GPU0, 0, 0);
    round_trip(&n, true, 2);
    n.ops->close(&n);
}

Test(cuda_node, zero_fill)
{
    REQUIRE_GPU();
    tsr_node_t n;
    open_node(&n, GPU0, 0, 0);
    kt_rng r = kt_seed(3);
    const size_t zs[] = {1, 255, 8 * MIB + 3};
    for (int k = 0; k < 3; k++) {
        size_t sz = zs[k];
        unsigned char *junk = rand_bytes(&r, sz), *back = malloc(sz), *zero = calloc(1, sz);
        cr_assert(back && zero);
        void *d = node_alloc(&n, sz);
        copy_sync(&n, HOST, n.id, junk, d, sz);
        copy_sync(&n, n.id, n.id, NULL, d, sz); /* src NULL: zeros */
        memset(back, 0xa5, sz);
        copy_sync(&n, n.id, HOST, d, back, sz);
        assert_same(back, zero, sz, "zero fill");
        n.ops->free(&n, d, sz);
        free(junk), free(back), free(zero);
    }
    n.ops->close(&n);
}

/* Many copies at once, both directions busy; each upload's completion
 * queues the download of the same block from the engine thread. */
Test(cuda_node, many_in_flight_and_chained)
{
    REQUIRE_GPU();
    tsr_node_t n;
    open_node(&n, GPU0, 0, 0);
    enum { K = 24 };
    kt_rng r = kt_seed(4);
    unsigned char *want[K], *src[K], *back[K];
    void *d[K];
    size_t sz[K];
    job_t up[K], down[K];
    batch_t b;
    batch_init(&b, 2 * K);
    for (int i = 0; i < K; i++) {
        sz[i] = i % 3 == 0 ? 3 * MIB + (size_t)i : (size_t)(kt_next(&r) % 200000) + 1;
        want[i] = rand_bytes(&r, sz[i]);
        bool pinned = i % 4 == 1;
        if (pinned) {
            KT_CUDA_OK(cudaHostAlloc((void **)&src[i], sz[i], cudaHostAllocDefault));
            memcpy(src[i], want[i], sz[i]);
        } else {
            src[i] = want[i];
        }
        back[i] = malloc(sz[i]);
        cr_assert_not_null(back[i]);
        memset(back[i], 0x5a, sz[i]);
        d[i] = node_alloc(&n, sz[i]);
        job_set(&up[i], &b, HOST, n.id, src[i], d[i], sz[i]);
        job_set(&down[i], &b, n.id, HOST, d[i], back[i], sz[i]);
        up[i].next_node = &n;
        up[i].next_job = &down[i];
    }
    for (int i = 0; i < K; i++)
        job_queue(&n, &up[i]);
    batch_wait(&b);
    for (int i = 0; i < K; i++) {
        assert_same(back[i], want[i], sz[i], "chained round trip");
        n.ops->free(&n, d[i], sz[i]);
        if (src[i] != want[i])
            cudaFreeHost(src[i]);
        free(want[i]), free(back[i]);
    }
    n.ops->close(&n);
}

/* close() lets every queued copy complete first. */
Test(cuda_node, close_drains_queue)
{
    REQUIRE_GPU();
    tsr_node_t n;
    open_node(&n, GPU0, 0, 0);
    enum { K = 8 };
    size_t sz = 5 * MIB + 1;
    unsigned char *h = calloc(1, sz);
    cr_assert_not_null(h);
    void *d[K];
    job_t j[K];
    batch_t b;
    batch_init(&b, K);
    for (int i = 0; i < K; i++) {
        d[i] = node_alloc(&n, sz);
        job_set(&j[i], &b, HOST, n.id, h, d[i], sz);
        job_queue(&n, &j[i]);
    }
    n.ops->close(&n); /* frees the pool: the blocks go with it */
    pthread_mutex_lock(&b.m);
    int left = b.left;
    pthread_mutex_unlock(&b.m);
    cr_assert_eq(left, 0, "%d completions missing after close", left);
    cr_assert_eq(b.failed, 0, "%s", b.err);
    free(h);
}

/* A copy that is not this node's is refused at once, done not called. */
Test(cuda_node, foreign_copy_refused)
{
    REQUIRE_GPU();
    tsr_node_t n;
    open_node(&n, GPU0, 0, 0);
    char h[16];
    batch_t b;
    job_t j;
    batch_init(&b, 1);
    job_set(&j, &b, HOST, 7, h, h, sizeof h);
    cr_assert_eq(n.ops->copy(&n, &j.c), TSR_EINVAL);
    cr_assert_neq(j.c.err[0], 0);
    job_set(&j, &b, 7, 7, NULL, h, sizeof h);
    cr_assert_eq(n.ops->copy(&n, &j.c), TSR_EINVAL);
    n.ops->close(&n);
    cr_assert_eq(b.left, 1, "done was called for a refused copy");
}

Test(cuda_node, peer_copy)
{
    REQUIRE_GPU();
    if (kt_gpu_count() < 2)
        cr_skip_test("peer copies need 2 GPUs, %d present", kt_gpu_count());
    tsr_node_t n0, n1, host;
    memset(&host, 0, sizeof host);
    host.kind = TSR_NODE_KIND_HOST;
    open_node(&n0, GPU0, 0, 0);
    open_node(&n1, GPU1, 1, 0);
    cr_assert(n0.ops->peer(&n0, &host));
    cr_assert_not(n0.ops->peer(&n0, &n0));
    bool p01 = n0.ops->peer(&n0, &n1), p10 = n1.ops->peer(&n1, &n0);
    cr_assert_eq(p01, p10, "peer access one way only");
    if (!p01) {
        n1.ops->close(&n1);
        n0.ops->close(&n0);
        cr_skip_test("cuda0 and cuda1 have no peer access");
    }
    kt_rng r = kt_seed(5);
    for (size_t k = 0; k < NSIZES; k++) {
        size_t sz = sizes[k];
        unsigned char *want = rand_bytes(&r, sz), *back = malloc(sz);
        cr_assert_not_null(back);
        memset(back, 0xa5, sz);
        void *a = node_alloc(&n0, sz), *b = node_alloc(&n1, sz);
        copy_sync(&n0, HOST, GPU0, want, a, sz);
        copy_sync(&n1, GPU0, GPU1, a, b, sz); /* on the destination's engine */
        copy_sync(&n1, GPU1, HOST, b, back, sz);
        assert_same(back, want, sz, "peer copy cuda0 -> cuda1");
        memset(back, 0xa5, sz);
        copy_sync(&n0, GPU1, GPU0, b, a, sz); /* and back, on cuda0's engine */
        copy_sync(&n0, GPU0, HOST, a, back, sz);
        assert_same(back, want, sz, "peer copy cuda1 -> cuda0");
        n0.ops->free(&n0, a, sz);
        n1.ops->free(&n1, b, sz);
        free(want), free(back);
    }
    n1.ops->close(&n1);
    n0.ops->close(&n0);
}

/* y = 2 x + y with the node's cuBLAS handle on its compute stream. */
Test(cuda_node, exec_with_cublas)
{
    REQUIRE_GPU();
    tsr_node_t n;
    open_node(&n, GPU0, 0, 0);
    enum { N = 1000 };
    float x[N], y[N], want[N], got[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)i * 0.5f;
        y[i] = (float)(N - i);
        want[i] = 2.0f * x[i] + y[i];
    }
    float *dx = node_alloc(&n, sizeof x), *dy = node_alloc(&n, sizeof y);
    copy_sync(&n, HOST, n.id, x, dx, sizeof x);
    copy_sync(&n, HOST, n.id, y, dy, sizeof y);
    void *stream = NULL, *blas = NULL;
    char berr[TSR_MEM_ERR] = "";
    cr_assert_eq(n.ops->exec_begin(&n, 0, &stream, &blas, berr, sizeof berr), TSR_OK, "%s", berr);
    cr_assert(stream && blas);
    cudaStream_t bound = NULL;
    cr_assert_eq(cublasGetStream((cublasHandle_t)blas, &bound), CUBLAS_STATUS_SUCCESS);
    cr_assert_eq((void *)bound, stream, "the handle is not bound to the compute stream");
    int cur = -1;
    KT_CUDA_OK(cudaGetDevice(&cur));
    cr_assert_eq(cur, 0);
    const float alpha = 2.0f;
    cr_assert_eq(cublasSaxpy((cublasHandle_t)blas, N, &alpha, dx, 1, dy, 1),
                 CUBLAS_STATUS_SUCCESS);
    char err[TSR_MEM_ERR] = "";
    cr_assert_eq(n.ops->exec_end(&n, 0, err, sizeof err), TSR_OK, "%s", err);
    copy_sync(&n, n.id, HOST, dy, got, sizeof got);
    for (int i = 0; i < N; i++)
        cr_assert_eq(got[i], want[i], "y[%d] = %g, expected %g", i, got[i], want[i]);
    n.ops->free(&n, dx, sizeof x);
    n.ops->free(&n, dy, sizeof y);
    n.ops->close(&n);
}

/* A kernel that faults: exec_end says TSR_EDEVICE and names the call; on a
 * real GPU the engine reports the broken context as TSR_EDEVICE too, and
 * close still returns. (The fault ruins this process's context: last test
 * here.) */
Test(cuda_node, kernel_fault_is_edevice)
{
    REQUIRE_GPU();
    tsr_node_t n;
    open_node(&n, GPU0, 0, 0);
    void *d = node_alloc(&n, 4096);
    void *stream = NULL, *blas = NULL;
    char berr[TSR_MEM_ERR] = "";
    cr_assert_eq(n.ops->exec_begin(&n, 0, &stream, &blas, berr, sizeof berr), TSR_OK, "%s", berr);
    const float alpha = 1.0f;
    float *bad = (float *)(uintptr_t)0x100; /* not device memory */
    cublasSaxpy((cublasHandle_t)blas, 1 << 20, &alpha, bad, 1, bad, 1);
    char err[TSR_MEM_ERR] = "";
    int rc = n.ops->exec_end(&n, 0, err, sizeof err);
    cr_assert_eq(rc, TSR_EDEVICE, "a faulting kernel returned %d", rc);
    cr_assert(strstr(err, "cuda0") != NULL, "message without the node: %s", err);
    cr_log_info("exec_end: %s", err);

    unsigned char h[4096] = {0};
    batch_t b;
    job_t j;
    batch_init(&b, 1);
    job_set(&j, &b, HOST, n.id, h, d, sizeof h);
    job_queue(&n, &j);
    pthread_mutex_lock(&b.m);
    while (b.left > 0)
        pthread_cond_wait(&b.cv, &b.m);
    pthread_mutex_unlock(&b.m);
    if (kt_emulated()) {
        /* The emulation refuses the launch before it runs: the context
         * stays usable, and so does the engine. */
        cr_assert_eq(j.status, TSR_OK, "copy after a refused launch: %s", j.c.err);
    } else {
        cr_assert_eq(j.status, TSR_EDEVICE, "copy after a fault: status %d", j.status);
        cr_assert(strstr(j.c.err, "on cuda0: ") != NULL, "message: %s", j.c.err);
        cr_log_info("copy: %s", j.c.err);
    }
    n.ops->close(&n);
}

/* Host replicas come from the pinned pool once a GPU is open: its blocks
 * are page-locked (direct DMA), round-trip through the node, and the pool
 * gives back only what it handed out. */
Test(cuda_node, pinned_host_pool)
{
    REQUIRE_GPU();
    tsr_node_t n;
    open_node(&n, GPU0, 0, 0);
    cr_assert(pinned_hook_set, "opening a GPU installed no pinned pool for host replicas");
    kt_rng r = kt_seed(7);
    for (size_t k = 0; k < NSIZES; k++) {
        size_t sz = sizes[k];
        unsigned char *want = rand_bytes(&r, sz);
        unsigned char *h = pinned_hook.alloc(pinned_hook.ctx, sz);
        cr_assert_not_null(h, "pinned pool: no %zu bytes", sz);
        struct cudaPointerAttributes a;
        KT_CUDA_OK(cudaPointerGetAttributes(&a, h));
        cr_assert_eq(a.type, cudaMemoryTypeHost, "a pinned-pool block is not page-locked");
        memcpy(h, want, sz);
        void *d = node_alloc(&n, sz);
        copy_sync(&n, HOST, n.id, h, d, sz);
        memset(h, 0xa5, sz);
        copy_sync(&n, n.id, HOST, d, h, sz);
        assert_same(h, want, sz, "round trip through a pinned-pool block");
        n.ops->free(&n, d, sz);
        cr_assert(pinned_hook.free(pinned_hook.ctx, h));
        free(want);
    }
    int foreign = 0;
    cr_assert_not(pinned_hook.free(pinned_hook.ctx, &foreign), "freed a pointer it never gave");
    n.ops->close(&n);
    pinned_hook.close(pinned_hook.ctx);
}

/* cudaMalloc fails (every try of the pool: the usual chunk, after a trim,
 * the exact size): alloc is NULL and the node says which call failed and
 * how; the next allocation works. */
Test(cuda_node, malloc_failure_names_the_call)
{
    REQUIRE_EMU_FAIL("cudaMalloc:1,cudaMalloc:2,cudaMalloc:3");
    REQUIRE_GPU();
    tsr_node_t n;
    open_node(&n, GPU0, 0, 0);
    cr_assert_null(n.ops->alloc(&n, MIB), "an allocation survived three cudaMalloc failures");
    cr_assert_not_null(n.ops->alloc_error);
    const char *why = n.ops->alloc_error(&n);
    cr_log_info("alloc: %s", why);
    cr_assert(strstr(why, "cudaMalloc") && strstr(why, "cudaErrorMemoryAllocation") &&
                  strstr(why, "cuda0"),
              "message: %s", why);
    void *p = node_alloc(&n, MIB);
    n.ops->free(&n, p, MIB);
    n.ops->close(&n);
}

/* A copy whose cudaMemcpyAsync fails completes with TSR_EDEVICE naming the
 * call; the engine goes on with the next one. */
Test(cuda_node, failed_copy_names_the_call)
{
    REQUIRE_EMU_FAIL("cudaMemcpyAsync:1");
    REQUIRE_GPU();
    tsr_node_t n;
    open_node(&n, GPU0, 0, 0);
    enum { SZ = 4096 };
    unsigned char *h = NULL, *back = NULL;
    KT_CUDA_OK(cudaHostAlloc((void **)&h, SZ, cudaHostAllocDefault));
    KT_CUDA_OK(cudaHostAlloc((void **)&back, SZ, cudaHostAllocDefault));
    for (int i = 0; i < SZ; i++)
        h[i] = (unsigned char)(i * 7 + 1);
    void *d = node_alloc(&n, SZ);
    batch_t b;
    job_t j;
    batch_init(&b, 1);
    job_set(&j, &b, HOST, n.id, h, d, SZ);
    job_queue(&n, &j);
    pthread_mutex_lock(&b.m);
    while (b.left > 0)
        pthread_cond_wait(&b.cv, &b.m);
    pthread_mutex_unlock(&b.m);
    cr_assert_eq(j.status, TSR_EDEVICE, "injected copy failure: status %d", j.status);
    cr_log_info("copy: %s", j.c.err);
    cr_assert(strstr(j.c.err, "cudaMemcpyAsync") && strstr(j.c.err, "on cuda0: "),
              "message: %s", j.c.err);
    copy_sync(&n, HOST, n.id, h, d, SZ);
    copy_sync(&n, n.id, HOST, d, back, SZ);
    assert_same(back, h, SZ, "copies after a failed one");
    n.ops->free(&n, d, SZ);
    cudaFreeHost(h);
    cudaFreeHost(back);
    n.ops->close(&n);
}

/* cudaSetDevice fails in exec_begin: TSR_EDEVICE naming the call, and no
 * stream or handle to launch on. The counted calls on this node: open's
 * (1st), the engine thread's (2nd, done once a copy has completed), then
 * exec_begin's (3rd). */
Test(cuda_node, exec_begin_failure_names_the_call)
{
    REQUIRE_EMU_FAIL("cudaSetDevice:3");
    REQUIRE_GPU();
    tsr_node_t n;
    open_node(&n, GPU0, 0, 0);
    unsigned char h[256] = {0};
    void *d = node_alloc(&n, sizeof h);
    copy_sync(&n, HOST, n.id, h, d, sizeof h);
    void *stream = (void *)1, *blas = (void *)1;
    char err[TSR_MEM_ERR] = "";
    int rc = n.ops->exec_begin(&n, 0, &stream, &blas, err, sizeof err);
    cr_log_info("exec_begin: %s", err);
    cr_assert_eq(rc, TSR_EDEVICE, "exec_begin after a failed cudaSetDevice: %d", rc);
    cr_assert(strstr(err, "cudaSetDevice") && strstr(err, "cuda0"), "message: %s", err);
    cr_assert(!stream && !blas, "a stream or handle was handed out after a failure");
    /* The next one works. */
    rc = n.ops->exec_begin(&n, 0, &stream, &blas, err, sizeof err);
    cr_assert_eq(rc, TSR_OK, "%s", err);
    cr_assert_eq(n.ops->exec_end(&n, 0, err, sizeof err), TSR_OK, "%s", err);
    n.ops->free(&n, d, sizeof h);
    n.ops->close(&n);
}
