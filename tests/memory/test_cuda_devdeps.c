/* Device-ordered dependencies (docs/memory.md, "Device-ordered
 * dependencies"): a task whose unfinished predecessors were all launched
 * on one GPU is launched there behind them (cudaStreamWaitEvent across
 * lanes), without waiting for the host to see them end. On the emulated
 * GPUs (-Dcuda=emu, TESSERA_CUDA_EMU_DEVICES=2 from the suite, streams
 * with random delays) or a real one, against the graph computed here on
 * the host in submission order:
 * - chains on one GPU, crossing lanes (a task reads another chain's
 *   value), end as the host computes them; the workers' counters show
 *   device-ordered launches and no host round trip; with the switch off,
 *   a round trip at every link and none device-ordered;
 * - a host acquisition in the middle of a device-ordered chain sees the
 *   value of the chain so far;
 * - a chain crossing GPU -> CPU -> GPU stays correct;
 * - a task failing in the middle of a chain (its implementation, or its
 *   kernel faulting on the device) fails or cancels every task after it;
 * - chains over more tiles than a capped GPU holds (eviction and
 *   write-back of device-ordered producers' tiles) stay correct;
 * - threads submitting chains at once, on one GPU and on two.
 * Skipped visibly without a GPU; the injected fault needs the emulation.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/elementwise.h"
#include "tessera/tessera.h"

#define REQUIRE_GPU()                                                                   \
    do {                                                                                \
        if (tsr_cuda_device_count() < 1)                                                \
            cr_skip_test("no CUDA device: device-ordering test skipped");               \
    } while (0)

#ifdef TSR_CUDA_EMU
#define EMULATED 1
#else
#define EMULATED 0
#endif

enum { N = 4096 }; /* floats per tile */

typedef struct {
    float a;
} args_t;

/* ---- codelets: x = 2x + a*y (y: a second tile), and x = x + a ----------- */

static int twice_plus_cuda(void **b, const void *args, const tsr_exec_t *e)
{
    const args_t *p = args;
    int rc = tsr_cuda_scale(e->cuda_stream, N, 2.0f, b[0], b[0]);
    return rc ? rc : tsr_cuda_axpy(e->cuda_stream, N, p->a, b[1], b[0]);
}

static int twice_plus_cpu(void **b, const void *args, const tsr_exec_t *e)
{
    (void)e;
    const args_t *p = args;
    float *x = b[0];
    const float *y = b[1];
    for (int i = 0; i < N; i++)
        x[i] = 2.0f * x[i] + p->a * y[i];
    return 0;
}

static const tsr_codelet_t cl_gpu = {
    .name = "twice_plus_gpu", .impl = {NULL, twice_plus_cuda}, .nbuffers = 2};
static const tsr_codelet_t cl_cpu = {
    .name = "twice_plus_cpu", .impl = {twice_plus_cpu, NULL}, .nbuffers = 2};

/* x = x + a; a = -1 fails the task (after queuing its kernel). */
static int add_cuda(void **b, const void *args, const tsr_exec_t *e)
{
    const args_t *p = args;
    int rc = tsr_cuda_scale(e->cuda_stream, N, 1.0f, b[0], b[0]);
    if (rc == 0 && p->a == -1.0f)
        return 7;
    return rc ? rc : tsr_cuda_axpy(e->cuda_stream, N, p->a, b[1], b[0]);
}

static const tsr_codelet_t cl_add = {
    .name = "add_gpu", .impl = {NULL, add_cuda}, .nbuffers = 2};

/* ---- runs ------------------------------------------------------------------- */

static void start(int ncpu, int ncuda, size_t cuda_mem, int deps)
{
    if (EMULATED)
        setenv("TESSERA_CUDA_EMU_JITTER", "1", 1);
    unsetenv("TESSERA_CUDA_DEVICE_DEPS"); /* the configuration decides */
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = ncpu;
    cfg.bind = 0;
    cfg.ncuda = ncuda;
    cfg.cuda_mem = cuda_mem;
    cfg.cuda_device_deps = deps;
    cfg.perfmodel_dir = "";
    int rc = tsr_init(&cfg);
    cr_assert_eq(rc, TSR_OK, "tsr_init: %s", tsr_error_message());
}

typedef struct {
    uint64_t host_waits, device_ordered, gpu_tasks;
} counts_t;

static counts_t counts(void)
{
    counts_t c = {0, 0, 0};
    for (int w = 0; w < tsr_worker_count(); w++) {
        tsr_worker_stats_t st;
        cr_assert_eq(tsr_worker_stats(w, &st), TSR_OK);
        if (st.device_kind == TSR_DEVICE_CUDA) {
            c.host_waits += st.host_waits;
            c.device_ordered += st.device_ordered;
            c.gpu_tasks += st.tasks;
        } else {
            cr_assert_eq(st.device_ordered, 0, "a CPU worker counted device-ordered launches");
        }
    }
    return c;
}

static void submit2(const tsr_codelet_t *cl, tsr_handle_t x, tsr_handle_t y, float a,
                    tsr_task_t *out)
{
    args_t p = {a};
    tsr_access_t acc[2] = {{x, TSR_RW}, {y, TSR_R}};
    tsr_task_desc_t d = {.codelet = cl, .nbuffers = 2, .buffers = acc, .args = &p,
                         .args_size = sizeof p};
    cr_assert_eq(tsr_submit(&d, out), TSR_OK, "%s", tsr_error_message());
}

/* The host's value of every tile, element 0 (all elements are equal). */
static void check_tiles(float (*x)[N], const double *want, int n, const char *what)
{
    for (int c = 0; c < n; c++)
        for (int i = 0; i < N; i += 511)
            cr_assert_eq(x[c][i], (float)want[c], "%s: tile %d element %d: %g, not %g", what,
                         c, i, x[c][i], want[c]);
}

/* ---- chains across lanes ------------------------------------------------------ */

/* C chains of L steps, submitted step by step; every third step chain c
 * also reads chain c-1 (x_c = 2 x_c + x_{c-1}), else the ones tile
 * (x_c = 2 x_c + k). Values stay integers below 2^24: exact in floats. */
enum { C = 6, L = 8 };
static float cx[C][N], ones[N];

/* h1 <- the ones, h[c] <- the zeroed chains cx[c] */
static void register_chains(tsr_handle_t h[C], tsr_handle_t *h1)
{
    for (int i = 0; i < N; i++)
        ones[i] = 1.0f;
    memset(cx, 0, sizeof cx);
    cr_assert_eq(tsr_handle_register(h1, ones, sizeof ones), TSR_OK);
    for (int c = 0; c < C; c++)
        cr_assert_eq(tsr_handle_register(&h[c], cx[c], sizeof cx[c]), TSR_OK);
}


static counts_t chains(int ncuda, int deps, const tsr_codelet_t *const *cls)
{
    start(-1, ncuda, 0, deps);
    tsr_handle_t h[C], h1;
    register_chains(h, &h1);
    double want[C] = {0};
    for (int s = 0; s < L; s++)
        for (int c = 0; c < C; c++) {
            const tsr_codelet_t *cl = cls ? cls[s] : &cl_gpu;
            if (s % 3 == 2 && c > 0) {
                submit2(cl, h[c], h[c - 1], 1.0f, NULL);
                want[c] = 2 * want[c] + want[c - 1];
            } else {
                float k = (float)(c + s);
                submit2(cl, h[c], h1, k, NULL);
                want[c] = 2 * want[c] + k;
            }
        }
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    counts_t n = counts();
    for (int c = 0; c < C; c++)
        cr_assert_eq(tsr_handle_unregister(h[c]), TSR_OK);
    cr_assert_eq(tsr_handle_unregister(h1), TSR_OK);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
    check_tiles(cx, want, C, "chains");
    return n;
}

Test(cuda_devdeps, chains_across_lanes_are_device_ordered)
{
    REQUIRE_GPU();
    counts_t on = chains(1, 1, NULL);
    cr_assert_eq(on.gpu_tasks, (uint64_t)C * L);
    cr_assert_gt(on.device_ordered, 0, "no device-ordered launch");
    cr_assert_eq(on.host_waits, 0, "%llu host round trips in a GPU-only graph",
                 (unsigned long long)on.host_waits);
}

Test(cuda_devdeps, switched_off_every_link_is_a_round_trip)
{
    REQUIRE_GPU();
    counts_t off = chains(1, 0, NULL);
    cr_assert_eq(off.device_ordered, 0);
    cr_assert_gt(off.host_waits, 0);
}

Test(cuda_devdeps, switch_from_the_environment)
{
    REQUIRE_GPU();
    if (EMULATED)
        setenv("TESSERA_CUDA_EMU_JITTER", "1", 1);
    setenv("TESSERA_CUDA_DEVICE_DEPS", "0", 1);
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cr_assert_eq(cfg.cuda_device_deps, 1, "on by default");
    cfg.ncpu = -1;
    cfg.bind = 0;
    cfg.ncuda = 1;
    cfg.perfmodel_dir = "";
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "%s", tsr_error_message());
    static float x[N], y[N];
    tsr_handle_t hx, hy;
    cr_assert_eq(tsr_handle_register(&hx, x, sizeof x), TSR_OK);
    cr_assert_eq(tsr_handle_register(&hy, y, sizeof y), TSR_OK);
    for (int s = 0; s < 10; s++)
        submit2(&cl_gpu, hx, hy, 1.0f, NULL);
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    counts_t n = counts();
    cr_assert_eq(n.device_ordered, 0);
    cr_assert_eq(tsr_handle_unregister(hx), TSR_OK);
    cr_assert_eq(tsr_handle_unregister(hy), TSR_OK);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
    unsetenv("TESSERA_CUDA_DEVICE_DEPS");
    setenv("TESSERA_CUDA_DEVICE_DEPS", "x", 1);
    cr_assert_eq(tsr_init(&cfg), TSR_EINVAL);
    unsetenv("TESSERA_CUDA_DEVICE_DEPS");
}

Test(cuda_devdeps, chains_on_two_gpus)
{
    REQUIRE_GPU();
    if (tsr_cuda_device_count() < 2)
        cr_skip_test("one GPU: two-GPU chains skipped");
    (void)chains(2, 1, NULL);
}

Test(cuda_devdeps, chain_through_gpu_cpu_gpu)
{
    REQUIRE_GPU();
    /* steps 0-2 and 5-7 on the GPU, 3-4 on the CPU (one CPU worker) */
    const tsr_codelet_t *cls[L] = {&cl_gpu, &cl_gpu, &cl_gpu, &cl_cpu,
                                   &cl_cpu, &cl_gpu, &cl_gpu, &cl_gpu};
    if (EMULATED)
        setenv("TESSERA_CUDA_EMU_JITTER", "1", 1);
    unsetenv("TESSERA_CUDA_DEVICE_DEPS");
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 1;
    cfg.bind = 0;
    cfg.ncuda = 1;
    cfg.perfmodel_dir = "";
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "%s", tsr_error_message());
    tsr_handle_t h[C], h1;
    register_chains(h, &h1);
    double want[C] = {0};
    for (int s = 0; s < L; s++)
        for (int c = 0; c < C; c++) {
            float k = (float)(c + s);
            submit2(cls[s], h[c], h1, k, NULL);
            want[c] = 2 * want[c] + k;
        }
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    counts_t n = counts();
    cr_assert_gt(n.device_ordered, 0);
    cr_assert_gt(n.host_waits, 0, "the launches after the CPU steps wait for the host");
    for (int c = 0; c < C; c++)
        cr_assert_eq(tsr_handle_unregister(h[c]), TSR_OK);
    cr_assert_eq(tsr_handle_unregister(h1), TSR_OK);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
    check_tiles(cx, want, C, "GPU -> CPU -> GPU");
}

/* ---- a host read in the middle -------------------------------------------------- */

Test(cuda_devdeps, host_acquire_in_the_middle_sees_the_chain_so_far)
{
    REQUIRE_GPU();
    start(-1, 1, 0, 1);
    static float x[N], y[N];
    for (int i = 0; i < N; i++) {
        x[i] = 0.0f;
        y[i] = 1.0f;
    }
    tsr_handle_t hx, hy;
    cr_assert_eq(tsr_handle_register(&hx, x, sizeof x), TSR_OK);
    cr_assert_eq(tsr_handle_register(&hy, y, sizeof y), TSR_OK);
    /* 4 rounds of 5 steps: below 2^23, exact in floats */
    double want = 0;
    for (int round = 0; round < 4; round++) {
        for (int s = 0; s < 5; s++) {
            submit2(&cl_gpu, hx, hy, (float)(s + 1), NULL);
            want = 2 * want + (s + 1);
        }
        /* no wait_all: the acquisition alone orders the read */
        void *p = NULL;
        cr_assert_eq(tsr_handle_acquire(hx, TSR_R, &p), TSR_OK, "%s", tsr_error_message());
        const float *v = p;
        for (int i = 0; i < N; i += 127)
            cr_assert_eq(v[i], (float)want, "round %d element %d: %g, not %g", round, i, v[i],
                         want);
        cr_assert_eq(tsr_handle_release(hx), TSR_OK);
    }
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    cr_assert_gt(counts().device_ordered, 0);
    cr_assert_eq(tsr_handle_unregister(hx), TSR_OK);
    cr_assert_eq(tsr_handle_unregister(hy), TSR_OK);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
}

/* ---- failures --------------------------------------------------------------------- */

/* A chain of 12 tasks x = x + 1 on one GPU, task `bad` failing: every task
 * from it on fails or is cancelled, those before it succeed; a second,
 * independent chain still ends as it should when the failure is the
 * implementation's (a faulted device fails everything after it). */
static void failing_chain(int bad, bool fault)
{
    REQUIRE_GPU();
    if (fault) {
        if (!EMULATED)
            cr_skip_test("an injected kernel fault needs the emulation");
    }
    start(-1, 1, 0, 1);
    enum { NT = 12 };
    static float x[N], y[N], z[N];
    for (int i = 0; i < N; i++) {
        x[i] = z[i] = 0.0f;
        y[i] = 1.0f;
    }
    tsr_handle_t hx, hy, hz;
    cr_assert_eq(tsr_handle_register(&hx, x, sizeof x), TSR_OK);
    cr_assert_eq(tsr_handle_register(&hy, y, sizeof y), TSR_OK);
    cr_assert_eq(tsr_handle_register(&hz, z, sizeof z), TSR_OK);
    tsr_task_t t[NT];
    if (fault) {
        /* every task launches two kernels (scale, axpy): the second
         * kernel of task `bad` faults */
        char spec[32];
        snprintf(spec, sizeof spec, "kernel:%d", 2 * bad + 2);
        setenv("TESSERA_CUDA_EMU_FAIL", spec, 1);
    }
    for (int k = 0; k < NT; k++) {
        submit2(&cl_add, hx, hy, !fault && k == bad ? -1.0f : 1.0f, &t[k]);
        if (!fault)
            submit2(&cl_add, hz, hy, 1.0f, NULL);
    }
    int rc = tsr_wait_all();
    if (fault)
        unsetenv("TESSERA_CUDA_EMU_FAIL");
    cr_assert_eq(rc, TSR_ETASK, "wait_all: %d (%s)", rc, tsr_error_message());
    for (int k = 0; k < NT; k++) {
        int r = tsr_task_wait(t[k]);
        /* A fault is sticky: a task before it whose end the host sees
         * only after the fault (device-ordered ones) is reported failed
         * too, as CUDA reports the fault to every later synchronisation. */
        if (k < bad && !(fault && r == TSR_ETASK))
            cr_assert_eq(r, TSR_OK, "task %d before the failure: %d (%s)", k, r,
                         tsr_error_message());
        else
            cr_assert_eq(r, TSR_ETASK, "task %d from the failure on: %d", k, r);
    }
    counts_t n = counts();
    if (!fault) {
        cr_assert_gt(n.device_ordered, 0);
        cr_assert_eq(tsr_handle_unregister(hz), TSR_OK, "%s", tsr_error_message());
        for (int i = 0; i < N; i += 255)
            cr_assert_eq(z[i], (float)NT, "the independent chain: %g", z[i]);
        cr_assert_eq(tsr_handle_unregister(hx), TSR_OK, "%s", tsr_error_message());
        cr_assert_eq(tsr_handle_unregister(hy), TSR_OK, "%s", tsr_error_message());
        (void)tsr_shutdown();
    } else {
        (void)tsr_handle_unregister(hz);
        (void)tsr_handle_unregister(hx);
        (void)tsr_handle_unregister(hy);
        (void)tsr_shutdown(); /* the device is gone: errors, never a hang */
    }
}

Test(cuda_devdeps, failing_implementation_fails_the_rest_of_the_chain)
{
    failing_chain(5, false);
}

Test(cuda_devdeps, kernel_fault_fails_the_rest_of_the_chain, .timeout = 120)
{
    failing_chain(5, true);
}

/* ---- eviction -------------------------------------------------------------------- */

/* 16 chains of one-tile tasks over a GPU that holds 6 tiles: tiles written
 * by device-ordered producers are evicted (written back) and fetched again
 * while chains go on. */
Test(cuda_devdeps, eviction_under_a_capped_gpu, .timeout = 300)
{
    REQUIRE_GPU();
    enum { EC = 16, EL = 6 };
    start(-1, 1, 6 * N * sizeof(float), 1);
    static float x[EC][N], y[N];
    for (int i = 0; i < N; i++)
        y[i] = 1.0f;
    memset(x, 0, sizeof x);
    tsr_handle_t h[EC], hy;
    cr_assert_eq(tsr_handle_register(&hy, y, sizeof y), TSR_OK);
    for (int c = 0; c < EC; c++)
        cr_assert_eq(tsr_handle_register(&h[c], x[c], sizeof x[c]), TSR_OK);
    double want[EC] = {0};
    /* a few steps of each chain at a time, chains in turn */
    for (int s0 = 0; s0 < EL; s0 += 3)
        for (int c = 0; c < EC; c++)
            for (int s = s0; s < s0 + 3; s++) {
                if (s == 2 && c > 0) {
                    submit2(&cl_gpu, h[c], h[c - 1], 1.0f, NULL);
                    want[c] = 2 * want[c] + want[c - 1];
                } else {
                    submit2(&cl_gpu, h[c], hy, (float)(c + s), NULL);
                    want[c] = 2 * want[c] + (c + s);
                }
            }
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    counts_t n = counts();
    tsr_node_stats_t ns;
    uint64_t evictions = 0;
    for (int i = 1; i < tsr_memory_node_count(); i++)
        if (tsr_memory_node_stats(i, &ns) == TSR_OK)
            evictions += ns.evictions + ns.writebacks;
    for (int c = 0; c < EC; c++)
        cr_assert_eq(tsr_handle_unregister(h[c]), TSR_OK);
    cr_assert_eq(tsr_handle_unregister(hy), TSR_OK);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
    for (int c = 0; c < EC; c++)
        for (int i = 0; i < N; i += 511)
            cr_assert_eq(x[c][i], (float)want[c], "chain %d element %d: %g, not %g", c, i,
                         x[c][i], want[c]);
    cr_assert_gt(evictions, 0, "the GPU never evicted");
    cr_assert_gt(n.device_ordered, 0);
}

/* ---- racing submitters -------------------------------------------------------- */

enum { RT = 4, RC = 3, RL = 10 };
static float rx[RT][RC][N], rshared[N], rones[N];
static tsr_handle_t rh[RT][RC], rhs, rh1;

static void *racer(void *arg)
{
    int me = (int)(intptr_t)arg;
    for (int s = 0; s < RL; s++) {
        for (int c = 0; c < RC; c++) {
            args_t p = {(float)(me + c + s)};
            tsr_access_t acc[2] = {{rh[me][c], TSR_RW}, {rh1, TSR_R}};
            tsr_task_desc_t d = {.codelet = &cl_gpu, .nbuffers = 2, .buffers = acc,
                                 .args = &p, .args_size = sizeof p};
            if (tsr_submit(&d, NULL) != TSR_OK)
                return (void *)1;
        }
        /* the shared tile: x = x + 1 from every thread, in any order */
        args_t one = {1.0f};
        tsr_access_t acc[2] = {{rhs, TSR_RW}, {rh1, TSR_R}};
        tsr_task_desc_t d = {.codelet = &cl_add, .nbuffers = 2, .buffers = acc, .args = &one,
                             .args_size = sizeof one};
        if (tsr_submit(&d, NULL) != TSR_OK)
            return (void *)1;
    }
    return NULL;
}

static void racing(int ncuda)
{
    start(-1, ncuda, 0, 1);
    for (int i = 0; i < N; i++) {
        rones[i] = 1.0f;
        rshared[i] = 0.0f;
    }
    memset(rx, 0, sizeof rx);
    cr_assert_eq(tsr_handle_register(&rh1, rones, sizeof rones), TSR_OK);
    cr_assert_eq(tsr_handle_register(&rhs, rshared, sizeof rshared), TSR_OK);
    for (int t = 0; t < RT; t++)
        for (int c = 0; c < RC; c++)
            cr_assert_eq(tsr_handle_register(&rh[t][c], rx[t][c], sizeof rx[t][c]), TSR_OK);
    pthread_t th[RT];
    for (int t = 0; t < RT; t++)
        cr_assert_eq(pthread_create(&th[t], NULL, racer, (void *)(intptr_t)t), 0);
    for (int t = 0; t < RT; t++) {
        void *r;
        pthread_join(th[t], &r);
        cr_assert_null(r, "thread %d failed to submit: %s", t, tsr_error_message());
    }
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    for (int t = 0; t < RT; t++)
        for (int c = 0; c < RC; c++)
            cr_assert_eq(tsr_handle_unregister(rh[t][c]), TSR_OK);
    cr_assert_eq(tsr_handle_unregister(rhs), TSR_OK);
    cr_assert_eq(tsr_handle_unregister(rh1), TSR_OK);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
    for (int t = 0; t < RT; t++)
        for (int c = 0; c < RC; c++) {
            double want = 0;
            for (int s = 0; s < RL; s++)
                want = 2 * want + (t + c + s);
            for (int i = 0; i < N; i += 511)
                cr_assert_eq(rx[t][c][i], (float)want, "thread %d chain %d: %g, not %g", t, c,
                             rx[t][c][i], want);
        }
    for (int i = 0; i < N; i += 511)
        cr_assert_eq(rshared[i], (float)(RT * RL), "shared tile: %g", rshared[i]);
}

Test(cuda_devdeps, racing_submitters_one_gpu, .timeout = 120)
{
    REQUIRE_GPU();
    racing(1);
}

Test(cuda_devdeps, racing_submitters_two_gpus, .timeout = 120)
{
    REQUIRE_GPU();
    if (tsr_cuda_device_count() < 2)
        cr_skip_test("one GPU: two-GPU race skipped");
    racing(2);
}

/* ---- COMMUTE accumulations ------------------------------------------------------ */

/* Every term is made by a GPU task (t_i = 2 t_i + i, from zeros), then
 * added into one accumulator with COMMUTE (acc = acc + t_i, in any
 * order; integers, so any order is exact): the terms' producers hand
 * their data on the device, the accumulation's owners hand the
 * accumulator on (each adding task after the previous one's kernels).
 * With CPU workers too (ncpu 1) the accumulation crosses devices. */
static int acc_cuda(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    return tsr_cuda_axpy(e->cuda_stream, N, 1.0f, b[1], b[0]);
}

static int acc_cpu(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    (void)e;
    float *x = b[0];
    const float *y = b[1];
    for (int i = 0; i < N; i++)
        x[i] += y[i];
    return 0;
}

static const tsr_codelet_t cl_acc = {
    .name = "accumulate", .impl = {acc_cpu, acc_cuda}, .nbuffers = 2};

static counts_t commute_sum(int ncpu, int ncuda)
{
    enum { NTERM = 24, NACC = 3 };
    start(ncpu, ncuda, 0, 1);
    static float terms[NTERM][N], accs[NACC][N], one[N];
    memset(terms, 0, sizeof terms);
    memset(accs, 0, sizeof accs);
    for (int i = 0; i < N; i++)
        one[i] = 1.0f;
    tsr_handle_t ht[NTERM], ha[NACC], h1;
    cr_assert_eq(tsr_handle_register(&h1, one, sizeof one), TSR_OK);
    for (int k = 0; k < NTERM; k++)
        cr_assert_eq(tsr_handle_register(&ht[k], terms[k], sizeof terms[k]), TSR_OK);
    for (int a = 0; a < NACC; a++)
        cr_assert_eq(tsr_handle_register(&ha[a], accs[a], sizeof accs[a]), TSR_OK);
    double want[NACC] = {0};
    for (int k = 0; k < NTERM; k++) {
        submit2(&cl_gpu, ht[k], h1, (float)k, NULL); /* t = k */
        submit2(&cl_gpu, ht[k], h1, 1.0f, NULL);     /* t = 2k + 1 */
        for (int a = 0; a < NACC; a++) {
            if ((k + a) % 2)
                continue;
            tsr_access_t acc[2] = {{ha[a], TSR_COMMUTE}, {ht[k], TSR_R}};
            tsr_task_desc_t d = {.codelet = &cl_acc, .nbuffers = 2, .buffers = acc};
            cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
            want[a] += 2 * k + 1;
        }
    }
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    counts_t n = counts();
    for (int k = 0; k < NTERM; k++)
        cr_assert_eq(tsr_handle_unregister(ht[k]), TSR_OK);
    for (int a = 0; a < NACC; a++)
        cr_assert_eq(tsr_handle_unregister(ha[a]), TSR_OK);
    cr_assert_eq(tsr_handle_unregister(h1), TSR_OK);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
    for (int a = 0; a < NACC; a++)
        for (int i = 0; i < N; i += 511)
            cr_assert_eq(accs[a][i], (float)want[a], "accumulator %d element %d: %g, not %g",
                         a, i, accs[a][i], want[a]);
    return n;
}

Test(cuda_devdeps, commute_accumulation_on_one_gpu)
{
    REQUIRE_GPU();
    counts_t n = commute_sum(-1, 1);
    cr_assert_gt(n.device_ordered, 0);
    /* a term's last producer and the accumulator's previous owner are both
     * launched on the GPU: hardly any launch waits for the host */
    cr_assert_leq(n.host_waits, n.gpu_tasks / 10, "%llu host waits of %llu launches",
                  (unsigned long long)n.host_waits, (unsigned long long)n.gpu_tasks);
}

Test(cuda_devdeps, commute_accumulation_across_cpu_and_gpus, .timeout = 120)
{
    REQUIRE_GPU();
    (void)commute_sum(1, -1);
}

/* ---- more launched predecessors than wait slots ------------------------------- */

static int fill_cuda(void **b, const void *args, const tsr_exec_t *e)
{
    const args_t *p = args;
    return tsr_cuda_fill(e->cuda_stream, N, p->a, b[0]);
}

static const tsr_codelet_t cl_fill = {
    .name = "fill_gpu", .impl = {NULL, fill_cuda}, .nbuffers = 1};

/* 20 readers of y (x_k = 2 x_k + y), then y overwritten (it waits for the
 * 20 readers: more than a task's 8 wait slots, so it follows every task
 * launched before it), then the 20 read y again: every reader must see y
 * as it was at its submission (x_k = 2 * 1 + 5 = 7), on the device. */
Test(cuda_devdeps, more_predecessors_than_wait_slots)
{
    REQUIRE_GPU();
    enum { NR = 20 };
    start(-1, 1, 0, 1);
    static float x[NR][N], y[N];
    memset(x, 0, sizeof x);
    for (int i = 0; i < N; i++)
        y[i] = 1.0f;
    tsr_handle_t hx[NR], hy;
    cr_assert_eq(tsr_handle_register(&hy, y, sizeof y), TSR_OK);
    for (int k = 0; k < NR; k++)
        cr_assert_eq(tsr_handle_register(&hx[k], x[k], sizeof x[k]), TSR_OK);
    for (int k = 0; k < NR; k++)
        submit2(&cl_gpu, hx[k], hy, 1.0f, NULL);
    args_t five = {5.0f};
    tsr_access_t acc[1] = {{hy, TSR_W}};
    tsr_task_desc_t d = {.codelet = &cl_fill, .nbuffers = 1, .buffers = acc, .args = &five,
                         .args_size = sizeof five};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
    for (int k = 0; k < NR; k++)
        submit2(&cl_gpu, hx[k], hy, 1.0f, NULL);
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    counts_t n = counts();
    for (int k = 0; k < NR; k++)
        cr_assert_eq(tsr_handle_unregister(hx[k]), TSR_OK);
    cr_assert_eq(tsr_handle_unregister(hy), TSR_OK);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
    for (int k = 0; k < NR; k++)
        for (int i = 0; i < N; i += 511)
            cr_assert_eq(x[k][i], 7.0f, "reader %d element %d: %g, not 7", k, i, x[k][i]);
    cr_assert_eq(y[0], 5.0f);
    cr_assert_gt(n.device_ordered, 0);
    cr_assert_eq(n.host_waits, 0, "%llu host waits", (unsigned long long)n.host_waits);
}
