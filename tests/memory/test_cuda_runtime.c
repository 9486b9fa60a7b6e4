/* GPU workers through the public API, on a real GPU or the emulated ones
 * (-Dcuda=emu), against values computed here on the host:
 * - a SCRATCH buffer of a task on a GPU worker is device memory of that
 *   GPU (it used to be a host pointer: an illegal address on a device);
 * - a task whose exec_begin fails (cudaSetDevice, injected) is failed
 *   without calling its implementation, with a message naming the call;
 * - a failed kernel launch (injected) fails the task with the kernels'
 *   message, naming the kernel;
 * - cudaMalloc failing below the directory's capacity (a device barely
 *   larger than the capacity, the pool's chunks fragmented) evicts and
 *   retries instead of failing the task; when nothing can be freed, the
 *   failure names cudaMalloc;
 * - fp32 GEMM precision reaches the implementation (tf32 unless strict);
 * - independent tasks run on every compute lane (stream) of a GPU, chains
 *   across lanes end as the host computes them.
 * Skipped visibly without a GPU; the injected failures need the emulation.
 */
#include <criterion/criterion.h>
#include <cuda_runtime_api.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda_status.h"
#include "kernels/elementwise.h"
#include "tessera/tessera.h"

#define MIB ((size_t)1 << 20)

#define REQUIRE_GPU()                                                                   \
    do {                                                                                \
        if (tsr_cuda_device_count() < 1)                                                \
            cr_skip_test("no CUDA device: GPU runtime test skipped");                   \
    } while (0)

#ifdef TSR_CUDA_EMU
#define EMULATED 1
#else
#define EMULATED 0
#endif

/* Failures injected into the emulated runtime, before its first call. */
#define REQUIRE_EMU_FAIL(spec)                                                          \
    do {                                                                                \
        if (!EMULATED)                                                                  \
            cr_skip_test("failure injection needs the CUDA emulation");                 \
        setenv("TESSERA_CUDA_EMU_FAIL", (spec), 1);                                     \
    } while (0)

static void start(int ncpu, int ncuda, size_t cuda_mem, int fp32)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = ncpu;
    cfg.bind = 0;
    cfg.ncuda = ncuda;
    cfg.cuda_mem = cuda_mem;
    cfg.cuda_fp32 = fp32;
    cfg.perfmodel_dir = "";
    int rc = tsr_init(&cfg);
    cr_assert_eq(rc, TSR_OK, "tsr_init: %s", tsr_error_message());
}

/* ---- SCRATCH on a GPU worker --------------------------------------------- */

enum { NF = 1000 };

typedef struct {
    float value;
} fill_args_t;

/* out = value, through the scratch buffer: fill scratch, copy it to out.
 * Also checks where scratch lives (device memory of the current GPU). */
static atomic_int scratch_not_device;

static int fill_via_scratch_cuda(void **b, const void *args, const tsr_exec_t *e)
{
    const fill_args_t *a = args;
    struct cudaPointerAttributes at;
    int dev = -1;
    if (cudaPointerGetAttributes(&at, b[1]) != cudaSuccess || cudaGetDevice(&dev) != cudaSuccess ||
        at.type != cudaMemoryTypeDevice || at.device != dev) {
        (void)cudaGetLastError();
        atomic_fetch_add(&scratch_not_device, 1);
    }
    int rc = tsr_cuda_fill(e->cuda_stream, NF, a->value, b[1]);
    if (rc == 0)
        rc = tsr_cuda_copy(e->cuda_stream, NF, b[1], b[0]);
    return rc;
}

static const tsr_codelet_t cl_fill_scratch = {
    .name = "fill_via_scratch", .impl = {NULL, fill_via_scratch_cuda}, .nbuffers = 2};

Test(cuda_runtime, scratch_is_device_memory)
{
    REQUIRE_GPU();
    start(-1, -1, 0, TSR_CUDA_FP32_TF32);
    enum { NT = 24 };
    static float out[NT][NF];
    tsr_handle_t ho[NT], hs;
    cr_assert_eq(tsr_handle_alloc(&hs, NF * sizeof(float)), TSR_OK);
    for (int t = 0; t < NT; t++) {
        cr_assert_eq(tsr_handle_register(&ho[t], out[t], sizeof out[t]), TSR_OK);
        fill_args_t a = {.value = 1.5f + (float)t};
        tsr_access_t acc[2] = {{ho[t], TSR_W}, {hs, TSR_SCRATCH}};
        tsr_task_desc_t d = {.codelet = &cl_fill_scratch, .nbuffers = 2, .buffers = acc,
                             .args = &a, .args_size = sizeof a};
        cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
    }
    int rc = tsr_wait_all();
    cr_assert_eq(rc, TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(atomic_load(&scratch_not_device), 0,
                 "%d tasks got a SCRATCH buffer that is not device memory",
                 atomic_load(&scratch_not_device));
    for (int t = 0; t < NT; t++)
        cr_assert_eq(tsr_handle_unregister(ho[t]), TSR_OK);
    cr_assert_eq(tsr_handle_unregister(hs), TSR_OK);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
    for (int t = 0; t < NT; t++)
        for (int i = 0; i < NF; i++)
            cr_assert_eq(out[t][i], 1.5f + (float)t, "task %d element %d: %g", t, i,
                         out[t][i]);
}

/* ---- exec_begin failure ---------------------------------------------------- */

static atomic_int impl_calls;

static int count_and_fill_cuda(void **b, const void *args, const tsr_exec_t *e)
{
    const fill_args_t *a = args;
    atomic_fetch_add(&impl_calls, 1);
    return tsr_cuda_fill(e->cuda_stream, NF, a->value, b[0]);
}

static const tsr_codelet_t cl_count_fill = {
    .name = "count_and_fill", .impl = {NULL, count_and_fill_cuda}, .nbuffers = 1};

/* ---- drains: host round trips between dependent GPU tasks ------------------ */

/* Without device-ordered dependencies (cuda_device_deps = 0), a chain of
 * dependent tasks on one GPU drains its stream at every link: the next
 * task is launched only once the host saw the previous one end. The count
 * is the worker's `drains`. (With them, tests/memory/test_cuda_devdeps.c.) */
static uint64_t drains_of(int chain)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = -1;
    cfg.bind = 0;
    cfg.ncuda = 1;
    cfg.perfmodel_dir = "";
    cfg.cuda_device_deps = 0;
    unsetenv("TESSERA_CUDA_DEVICE_DEPS");
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "tsr_init: %s", tsr_error_message());
    enum { NT = 40 };
    static float buf[NT][NF];
    tsr_handle_t h[NT];
    for (int t = 0; t < NT; t++)
        cr_assert_eq(tsr_handle_register(&h[t], buf[t], sizeof buf[t]), TSR_OK);
    for (int t = 0; t < NT; t++) {
        fill_args_t a = {.value = (float)t};
        /* chain: every task rewrites h[0] (RW after RW); else each its own */
        tsr_access_t acc[1] = {{h[chain ? 0 : t], TSR_RW}};
        tsr_task_desc_t d = {.codelet = &cl_count_fill, .nbuffers = 1, .buffers = acc,
                             .args = &a, .args_size = sizeof a};
        cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
    }
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    uint64_t drains = 0;
    for (int w = 0; w < tsr_worker_count(); w++) {
        tsr_worker_stats_t st;
        cr_assert_eq(tsr_worker_stats(w, &st), TSR_OK);
        if (st.device_kind == TSR_DEVICE_CUDA)
            drains += st.drains;
        else
            cr_assert_eq(st.drains, 0);
    }
    for (int t = 0; t < NT; t++)
        cr_assert_eq(tsr_handle_unregister(h[t]), TSR_OK);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
    return drains;
}

Test(cuda_runtime, a_dependency_chain_drains_the_stream_at_every_link)
{
    REQUIRE_GPU();
    uint64_t chain = drains_of(1), independent = drains_of(0);
    cr_assert_eq(chain, 39, "a chain of 40 tasks: %llu drains, not 39",
                 (unsigned long long)chain);
    cr_assert_leq(independent, 39, "%llu drains for 40 tasks", (unsigned long long)independent);
}


/* ---- compute lanes: independent tasks on several streams ------------------- */

/* Chains of tasks x = 2x + k (two kernels on the task's stream), several
 * chains at once on one GPU with `lanes` compute streams; the emulated
 * streams run with random delays, so lanes finish out of order. Each chain
 * must end exactly as the host's loop says (a successor launched before
 * its predecessor's kernels ended would read a stale x), and the tasks
 * must have used every lane (and only the one with one lane). */
enum { LCH = 6, LLEN = 8, LN = 1 << 16 };
static void *lane_streams[8];
static atomic_int lane_nstreams;

static int double_plus_cuda(void **b, const void *args, const tsr_exec_t *e)
{
    const fill_args_t *a = args;
    int n = atomic_load(&lane_nstreams), k = 0;
    while (k < n && lane_streams[k] != e->cuda_stream)
        k++;
    if (k == n && n < 8) { /* one GPU worker: one thread writes */
        lane_streams[n] = e->cuda_stream;
        atomic_store(&lane_nstreams, n + 1);
    }
    int rc = tsr_cuda_scale(e->cuda_stream, LN, 2.0f, b[0], b[0]);
    return rc ? rc : tsr_cuda_axpy(e->cuda_stream, LN, a->value, b[1], b[0]);
}

static const tsr_codelet_t cl_double_plus = {
    .name = "double_plus", .impl = {NULL, double_plus_cuda}, .nbuffers = 2};

static int lanes_run(int lanes)
{
    if (EMULATED)
        setenv("TESSERA_CUDA_EMU_JITTER", "1", 1);
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = -1;
    cfg.bind = 0;
    cfg.ncuda = 1;
    cfg.cuda_streams = lanes;
    cfg.perfmodel_dir = "";
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "tsr_init: %s", tsr_error_message());
    static float x[LCH][LN], ones[LN];
    for (int i = 0; i < LN; i++)
        ones[i] = 1.0f;
    memset(x, 0, sizeof x);
    tsr_handle_t hx[LCH], h1;
    cr_assert_eq(tsr_handle_register(&h1, ones, sizeof ones), TSR_OK);
    for (int c = 0; c < LCH; c++)
        cr_assert_eq(tsr_handle_register(&hx[c], x[c], sizeof x[c]), TSR_OK);
    atomic_store(&lane_nstreams, 0);
    /* step by step across the chains: every step, LCH independent tasks */
    for (int s = 0; s < LLEN; s++)
        for (int c = 0; c < LCH; c++) {
            fill_args_t a = {.value = (float)(c * LLEN + s)};
            tsr_access_t acc[2] = {{hx[c], TSR_RW}, {h1, TSR_R}};
            tsr_task_desc_t d = {.codelet = &cl_double_plus, .nbuffers = 2, .buffers = acc,
                                 .args = &a, .args_size = sizeof a};
            cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
        }
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    for (int c = 0; c < LCH; c++) {
        cr_assert_eq(tsr_handle_unregister(hx[c]), TSR_OK);
        double want = 0;
        for (int s = 0; s < LLEN; s++)
            want = 2 * want + (c * LLEN + s);
        for (int i = 0; i < LN; i++)
            cr_assert_eq(x[c][i], (float)want, "chain %d element %d: %g, not %g", c, i,
                         x[c][i], want);
    }
    cr_assert_eq(tsr_handle_unregister(h1), TSR_OK);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
    return atomic_load(&lane_nstreams);
}

Test(cuda_runtime, independent_tasks_use_every_compute_lane)
{
    REQUIRE_GPU();
    int used = lanes_run(4);
    cr_assert_eq(used, 4, "4 lanes: the tasks used %d streams", used);
}

Test(cuda_runtime, one_compute_lane_is_one_stream)
{
    REQUIRE_GPU();
    int used = lanes_run(1);
    cr_assert_eq(used, 1, "1 lane: the tasks used %d streams", used);
}

/* Tasks one after the other on one GPU (no CPU worker); the K-th
 * cudaSetDevice of the process fails. Init's own calls come first (fewer
 * than K), every exec_begin then makes one: exactly one task fails, its
 * implementation is never called, and the failure names the call. */
Test(cuda_runtime, exec_begin_failure_skips_the_implementation)
{
    REQUIRE_EMU_FAIL("cudaSetDevice:40");
    REQUIRE_GPU();
    start(-1, 1, 0, TSR_CUDA_FP32_TF32);
    enum { NT = 80 };
    static float out[NT][NF];
    tsr_handle_t ho[NT];
    for (int t = 0; t < NT; t++) {
        cr_assert_eq(tsr_handle_register(&ho[t], out[t], sizeof out[t]), TSR_OK);
        fill_args_t a = {.value = 2.0f + (float)t};
        tsr_access_t acc[1] = {{ho[t], TSR_W}};
        tsr_task_desc_t d = {.codelet = &cl_count_fill, .nbuffers = 1, .buffers = acc,
                             .args = &a, .args_size = sizeof a};
        cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
        /* one at a time: the K-th call falls in a task's exec_begin */
        cr_assert(tsr_wait_all() == TSR_OK || strstr(tsr_error_message(), "cudaSetDevice"),
                  "%s", tsr_error_message());
    }
    for (int t = 0; t < NT; t++)
        cr_assert_eq(tsr_handle_unregister(ho[t]), TSR_OK);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
    int written = 0;
    for (int t = 0; t < NT; t++)
        written += out[t][0] == 2.0f + (float)t;
    cr_assert_eq(written, NT - 1, "%d of %d tasks wrote their output", written, NT);
    cr_assert_eq(atomic_load(&impl_calls), NT - 1,
                 "%d implementation calls for %d tasks, one of which failed to begin",
                 atomic_load(&impl_calls), NT);
}

/* ---- a failed launch ----------------------------------------------------- */

/* The first kernel launch fails: the task's failure carries the kernels'
 * message (kernels/cuda_status.h), naming the kernel. */
Test(cuda_runtime, failed_launch_names_the_kernel)
{
    REQUIRE_EMU_FAIL("launch:1");
    REQUIRE_GPU();
    start(-1, 1, 0, TSR_CUDA_FP32_TF32);
    static float out[NF];
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_register(&h, out, sizeof out), TSR_OK);
    fill_args_t a = {.value = 3.0f};
    tsr_access_t acc[1] = {{h, TSR_W}};
    tsr_task_desc_t d = {.codelet = &cl_count_fill, .nbuffers = 1, .buffers = acc,
                         .args = &a, .args_size = sizeof a, .name = "the_failing_fill"};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_wait_all(), TSR_ETASK);
    const char *msg = tsr_error_message();
    cr_log_info("%s", msg);
    cr_assert(strstr(msg, "the_failing_fill") && strstr(msg, "k_") && strstr(msg, "launch"),
              "message names neither the task nor the kernel: %s", msg);
    /* The next task works. */
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_handle_unregister(h), TSR_OK);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(out[NF - 1], 3.0f);
}

/* ---- device allocation failures ------------------------------------------- */

/* Tiles of 24 MiB read on a GPU whose emulated memory (TESSERA_CUDA_EMU_MEM)
 * is 160 MiB with a capacity of 150 MiB: the pool's 64 MiB chunks hold two
 * tiles each, so cudaMalloc fails long before the directory thinks the
 * device is full. Each task copies the first NF floats of its tile out. */
#define TILE_BYTES (24 * MIB)
#define NTILES 12

static int head_copy_cuda(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    return cudaMemcpyAsync(b[1], b[0], NF * sizeof(float), cudaMemcpyDeviceToDevice,
                           (cudaStream_t)e->cuda_stream) == cudaSuccess
               ? 0
               : 1;
}

static const tsr_codelet_t cl_head = {
    .name = "head_copy", .impl = {NULL, head_copy_cuda}, .nbuffers = 2};

static void stream_tiles(void)
{
    float *tiles = malloc((size_t)NTILES * TILE_BYTES);
    cr_assert_not_null(tiles);
    static float out[NTILES][NF];
    tsr_handle_t ht[NTILES], ho[NTILES];
    for (int t = 0; t < NTILES; t++) {
        float *tile = tiles + (size_t)t * (TILE_BYTES / sizeof(float));
        for (size_t i = 0; i < NF; i++)
            tile[i] = (float)(t * 10000 + (int)i);
        cr_assert_eq(tsr_handle_register(&ht[t], tile, TILE_BYTES), TSR_OK);
        cr_assert_eq(tsr_handle_register(&ho[t], out[t], sizeof out[t]), TSR_OK);
    }
    for (int round = 0; round < 2; round++)
        for (int t = 0; t < NTILES; t++) {
            tsr_access_t acc[2] = {{ht[t], TSR_R}, {ho[t], TSR_W}};
            tsr_task_desc_t d = {.codelet = &cl_head, .nbuffers = 2, .buffers = acc};
            cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
        }
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    for (int t = 0; t < NTILES; t++) {
        cr_assert_eq(tsr_handle_unregister(ht[t]), TSR_OK);
        cr_assert_eq(tsr_handle_unregister(ho[t]), TSR_OK);
    }
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
    for (int t = 0; t < NTILES; t++)
        for (int i = 0; i < NF; i++)
            cr_assert_eq(out[t][i], (float)(t * 10000 + i), "tile %d element %d", t, i);
    free(tiles);
}

Test(cuda_runtime, device_allocation_failure_evicts_and_retries, .timeout = 300)
{
    if (!EMULATED)
        cr_skip_test("needs an emulated device of a chosen size");
    setenv("TESSERA_CUDA_EMU_MEM", "160", 1);
    REQUIRE_GPU();
    start(-1, 1, 150 * MIB, TSR_CUDA_FP32_TF32);
    stream_tiles();
}

/* Tasks that write: 16 tiles of 1 MiB, each task y[t] += 2 * y[t+1] (RW,
 * R), three rounds, on a GPU only. Every tile written there is dirty (its
 * only valid copy): room comes only from writing tiles back to the host.
 * Checked against the same updates in host order (small integers: exact in
 * float), with no task failing and at least one write-back counted. */
#define DIRTY_N ((size_t)256 * 1024)
#define DIRTY_TILES 16

static int axpy2_cuda(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    return tsr_cuda_axpy(e->cuda_stream, DIRTY_N, 2.0f, b[1], b[0]);
}

static const tsr_codelet_t cl_axpy2 = {
    .name = "axpy2", .impl = {NULL, axpy2_cuda}, .nbuffers = 2};

static void dirty_tiles(int gpu_node_of_stats)
{
    float *y = malloc(DIRTY_TILES * DIRTY_N * sizeof(float));
    float *ref = malloc(DIRTY_TILES * DIRTY_N * sizeof(float));
    cr_assert(y && ref);
    for (size_t t = 0; t < DIRTY_TILES; t++)
        for (size_t i = 0; i < DIRTY_N; i++)
            y[t * DIRTY_N + i] = ref[t * DIRTY_N + i] = (float)(t + i % 7);
    tsr_handle_t h[DIRTY_TILES];
    for (int t = 0; t < DIRTY_TILES; t++)
        cr_assert_eq(tsr_handle_register(&h[t], y + (size_t)t * DIRTY_N,
                                         DIRTY_N * sizeof(float)),
                     TSR_OK);
    for (int round = 0; round < 3; round++)
        for (int t = 0; t < DIRTY_TILES; t++) {
            int u = (t + 1) % DIRTY_TILES;
            tsr_access_t acc[2] = {{h[t], TSR_RW}, {h[u], TSR_R}};
            tsr_task_desc_t d = {.codelet = &cl_axpy2, .nbuffers = 2, .buffers = acc};
            cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
            for (size_t i = 0; i < DIRTY_N; i++)
                ref[(size_t)t * DIRTY_N + i] += 2.0f * ref[(size_t)u * DIRTY_N + i];
        }
    int rc = tsr_wait_all();
    cr_assert_eq(rc, TSR_OK, "a task failed: %s", tsr_error_message());
    tsr_node_stats_t st;
    cr_assert_eq(tsr_memory_node_stats(gpu_node_of_stats, &st), TSR_OK);
    cr_log_info("GPU node: %llu write-backs, %llu evictions, peak %zu of %zu bytes",
                (unsigned long long)st.writebacks, (unsigned long long)st.evictions, st.peak,
                st.capacity);
    cr_assert_gt(st.writebacks, 0, "no dirty tile was written back");
    for (int t = 0; t < DIRTY_TILES; t++)
        cr_assert_eq(tsr_handle_unregister(h[t]), TSR_OK);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
    for (size_t k = 0; k < DIRTY_TILES * DIRTY_N; k++)
        cr_assert_eq(y[k], ref[k], "tile %zu element %zu: %g, not %g", k / DIRTY_N,
                     k % DIRTY_N, y[k], ref[k]);
    free(y);
    free(ref);
}

/* cudaMalloc is what runs out: a 6 MiB emulated device (about five tiles)
 * under a 64 MiB capacity. The allocation failure must write dirty tiles
 * back and retry once they have landed, not fail the task with ENOMEM. */
Test(cuda_runtime, device_allocation_failure_writes_dirty_tiles_back, .timeout = 300)
{
    if (!EMULATED)
        cr_skip_test("needs an emulated device of a chosen size");
    setenv("TESSERA_CUDA_EMU_MEM", "6", 1);
    REQUIRE_GPU();
    start(-1, 1, 64 * MIB, TSR_CUDA_FP32_TF32);
    dirty_tiles(1);
}

/* The directory's capacity is what runs out (5 MiB, the device has plenty):
 * the same write-backs through the capacity path. */
Test(cuda_runtime, capacity_writes_dirty_tiles_back, .timeout = 300)
{
    REQUIRE_GPU();
    start(-1, 1, 5 * MIB, TSR_CUDA_FP32_TF32);
    dirty_tiles(1);
}

/* cudaMalloc fails every time: the task's failure names the call. */
Test(cuda_runtime, device_allocation_failure_names_cudamalloc)
{
    REQUIRE_EMU_FAIL("cudaMalloc:1,cudaMalloc:2,cudaMalloc:3,cudaMalloc:4,cudaMalloc:5,"
                     "cudaMalloc:6");
    REQUIRE_GPU();
    start(-1, 1, 0, TSR_CUDA_FP32_TF32);
    static float out[NF];
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_register(&h, out, sizeof out), TSR_OK);
    fill_args_t a = {.value = 4.0f};
    tsr_access_t acc[1] = {{h, TSR_W}};
    tsr_task_desc_t d = {.codelet = &cl_count_fill, .nbuffers = 1, .buffers = acc,
                         .args = &a, .args_size = sizeof a};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
    int rc = tsr_wait_all();
    const char *msg = tsr_error_message();
    cr_log_info("%s", msg);
    cr_assert_eq(rc, TSR_ETASK, "no failure with every cudaMalloc failing");
    cr_assert(strstr(msg, "count_and_fill") && strstr(msg, "cudaMalloc"),
              "message names neither the task nor the call: %s", msg);
    cr_assert_eq(tsr_handle_unregister(h), TSR_OK);
    tsr_shutdown();
}

/* ---- fp32 GEMM precision ---------------------------------------------------- */

static atomic_int seen_fp32 = -1;

static int record_fp32(void **b, const void *args, const tsr_exec_t *e)
{
    (void)b;
    (void)args;
    atomic_store(&seen_fp32, e->cuda_fp32);
    return 0;
}

static const tsr_codelet_t cl_fp32 = {
    .name = "record_fp32", .impl = {NULL, record_fp32}, .nbuffers = 0};

static void fp32_seen(int cfg_value, const char *env, int want)
{
    if (env)
        setenv("TESSERA_CUDA_FP32", env, 1);
    else
        unsetenv("TESSERA_CUDA_FP32"); /* the suite's runner may set it */
    start(-1, 1, 0, cfg_value);
    tsr_task_desc_t d = {.codelet = &cl_fp32, .nbuffers = 0};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_shutdown(), TSR_OK);
    cr_assert_eq(atomic_load(&seen_fp32), want, "cuda_fp32 %d env %s: the task saw %d",
                 cfg_value, env ? env : "-", atomic_load(&seen_fp32));
}

Test(cuda_runtime, fp32_default_is_tf32)
{
    REQUIRE_GPU();
    fp32_seen(TSR_CUDA_FP32_TF32, NULL, TSR_CUDA_FP32_TF32);
}

Test(cuda_runtime, fp32_strict_by_config)
{
    REQUIRE_GPU();
    fp32_seen(TSR_CUDA_FP32_STRICT, NULL, TSR_CUDA_FP32_STRICT);
}

Test(cuda_runtime, fp32_strict_by_environment)
{
    REQUIRE_GPU();
    fp32_seen(TSR_CUDA_FP32_TF32, "strict", TSR_CUDA_FP32_STRICT);
}

Test(cuda_runtime, fp32_bad_environment)
{
    setenv("TESSERA_CUDA_FP32", "fast", 1);
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncuda = 0;
    cr_assert_eq(tsr_init(&cfg), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "TESSERA_CUDA_FP32"), "%s", tsr_error_message());
}
