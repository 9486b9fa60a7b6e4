/* The runtime over simulated accelerators: order-free reduction (REDUX)
 * against a sequential sum, the out-of-memory errors, the eviction
 * livelock case, and configuration errors. */
#include "../runtime/util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define N 64

/* ---- REDUX ------------------------------------------------------------- */

typedef struct { int id; } contrib_args_t;

/* A contribution that is not exactly representable, so that summation
 * order shows in the last bits: the reference allows for rounding. */
static double contribution(int id, int i) { return sin(0.1 * id + 0.37 * i) / (1 + id % 7); }

static int contrib_kernel(void **b, const void *args, const tsr_exec_t *e)
{
    (void)e;
    const contrib_args_t *a = args;
    double *acc = b[0];
    for (int i = 0; i < N; i++)
        acc[i] += contribution(a->id, i);
    return 0;
}

static int zero_kernel(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    memset(b[0], 0, e->sizes[0]);
    return 0;
}

static int add_kernel(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    (void)e;
    double *d = b[0];
    const double *s = b[1];
    for (int i = 0; i < N; i++)
        d[i] += s[i];
    return 0;
}

static int scale_kernel(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    (void)e;
    double *d = b[0];
    for (int i = 0; i < N; i++)
        d[i] *= 0.5;
    return 0;
}

static const tsr_codelet_t contrib_cl = {.name = "contrib", .impl = {contrib_kernel}, .nbuffers = 1};
static const tsr_codelet_t zero_cl = {.name = "zero", .impl = {zero_kernel}, .nbuffers = 1};
static const tsr_codelet_t add_cl = {.name = "add", .impl = {add_kernel}, .nbuffers = 2};
static const tsr_codelet_t scale_cl = {.name = "scale", .impl = {scale_kernel}, .nbuffers = 1};

static void submit1(const tsr_codelet_t *cl, tsr_handle_t h, tsr_mode_t m, int id)
{
    contrib_args_t a = {id};
    tsr_access_t acc = {h, m};
    tsr_task_desc_t d = {.codelet = cl, .nbuffers = 1, .buffers = &acc, .args = &a,
                         .args_size = sizeof a};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
}

/* Gradient accumulation: two groups of REDUX contributions into a handle
 * that already holds a value, with an ordinary RW task between them and
 * host reads after each; the runtime's result equals the sequential sum
 * within rounding. */
static void redux_run(int ncpu, int nsim, const char *sched, int ntasks)
{
    start_runtime_sim(ncpu, sched, 0, nsim, 64 * N * sizeof(double));
    double h[N], ref[N];
    for (int i = 0; i < N; i++)
        h[i] = ref[i] = 1.0 + i;
    tsr_handle_t hh;
    cr_assert_eq(tsr_handle_register(&hh, h, sizeof h), TSR_OK);
    cr_assert_eq(tsr_handle_set_reduction(hh, &zero_cl, &add_cl), TSR_OK);
    for (int group = 0; group < 2; group++) {
        for (int t = 0; t < ntasks; t++) {
            int id = group * 1000 + t;
            submit1(&contrib_cl, hh, TSR_REDUX, id);
            for (int i = 0; i < N; i++)
                ref[i] += contribution(id, i);
        }
        double *p;
        cr_assert_eq(tsr_handle_acquire(hh, TSR_R, (void **)&p), TSR_OK, "%s",
                     tsr_error_message());
        for (int i = 0; i < N; i++)
            cr_assert(fabs(p[i] - ref[i]) <= 1e-12 * (1 + fabs(ref[i])),
                      "group %d element %d: %.17g, sequential %.17g", group, i, p[i], ref[i]);
        cr_assert_eq(tsr_handle_release(hh), TSR_OK);
        submit1(&scale_cl, hh, TSR_RW, 0);
        for (int i = 0; i < N; i++)
            ref[i] *= 0.5;
    }
    cr_assert_eq(tsr_handle_unregister(hh), TSR_OK);
    for (int i = 0; i < N; i++)
        cr_assert(fabs(h[i] - ref[i]) <= 1e-12 * (1 + fabs(ref[i])), "final element %d", i);
    stop_runtime();
}

Test(redux, cpu_only) { redux_run(2, 0, "eager", 200); }
Test(redux, cpu_and_two_sims) { redux_run(2, 2, "eager", 300); }
Test(redux, sims_only_prio) { redux_run(-1, 2, "prio", 300); }

Test(redux, without_reduction_codelets_is_refused)
{
    start_runtime(1, "eager", 0);
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_alloc(&h, 64), TSR_OK);
    contrib_args_t a = {0};
    tsr_access_t acc = {h, TSR_REDUX};
    tsr_task_desc_t d = {.codelet = &contrib_cl, .nbuffers = 1, .buffers = &acc,
                         .args = &a, .args_size = sizeof a};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "reduction"), "%s", tsr_error_message());
    cr_assert_eq(tsr_handle_set_reduction(h, &add_cl, &add_cl), TSR_EINVAL,
                 "init takes one buffer");
    stop_runtime();
}

/* ---- out of memory ----------------------------------------------------- */

static int touch_kernel(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    for (int i = 0; i < e->nbuffers; i++)
        ((uint8_t *)b[i])[0]++;
    return 0;
}

static const tsr_codelet_t touch2_cl = {.name = "touch2", .impl = {touch_kernel}, .nbuffers = 2};

Test(oom, task_larger_than_the_accelerator)
{
    start_runtime_sim(-1, "eager", 0, 1, 4096);
    tsr_handle_t a, b;
    cr_assert_eq(tsr_handle_alloc(&a, 4096), TSR_OK);
    cr_assert_eq(tsr_handle_alloc(&b, 4096), TSR_OK);
    tsr_access_t acc[2] = {{a, TSR_RW}, {b, TSR_RW}};
    tsr_task_desc_t d = {.codelet = &touch2_cl, .nbuffers = 2, .buffers = acc,
                         .name = "too-big"};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK);
    cr_assert_eq(tsr_wait_all(), TSR_ETASK);
    const char *m = tsr_error_message();
    cr_assert(strstr(m, "too-big") && strstr(m, "8192 bytes") && strstr(m, "4096"),
              "the error names the task and the sizes: %s", m);
    /* Reading what the failed task should have written is refused; the
     * handle is repaired by overwriting it, and then works as before. */
    uint8_t *p;
    cr_assert_eq(tsr_handle_acquire(a, TSR_R, (void **)&p), TSR_ETASK);
    cr_assert_eq(tsr_handle_acquire(a, TSR_W, (void **)&p), TSR_OK, "%s",
                 tsr_error_message());
    p[0] = 5;
    cr_assert_eq(tsr_handle_release(a), TSR_OK);
    cr_assert_eq(tsr_handle_acquire(a, TSR_R, (void **)&p), TSR_OK, "%s",
                 tsr_error_message());
    cr_assert_eq(p[0], 5);
    cr_assert_eq(tsr_handle_release(a), TSR_OK);
    stop_runtime();
}

Test(oom, host_limit)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 1;
    cfg.bind = 0;
    cfg.ncuda = 0;
    cfg.host_mem = 4096;
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "%s", tsr_error_message());
    tsr_handle_t a, b;
    cr_assert_eq(tsr_handle_alloc(&a, 4096), TSR_OK);
    cr_assert_eq(tsr_handle_alloc(&b, 4096), TSR_OK);
    uint8_t *p;
    cr_assert_eq(tsr_handle_acquire(a, TSR_W, (void **)&p), TSR_OK, "%s",
                 tsr_error_message());
    p[0] = 42;
    cr_assert_eq(tsr_handle_release(a), TSR_OK);
    int rc = tsr_handle_acquire(b, TSR_W, (void **)&p);
    cr_assert_eq(rc, TSR_ENOMEM, "the host limit is reached: %d", rc);
    cr_assert(strstr(tsr_error_message(), "host"), "%s", tsr_error_message());
    cr_assert_eq(tsr_handle_acquire(a, TSR_R, (void **)&p), TSR_OK);
    cr_assert_eq(p[0], 42, "the data held is intact");
    cr_assert_eq(tsr_handle_release(a), TSR_OK);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
}

Test(oom, bad_configuration)
{
    setenv("TESSERA_LIMIT_SIM_MEM", "0", 1);
    cr_assert_eq(tsr_init(NULL), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "TESSERA_LIMIT_SIM_MEM"), "%s",
              tsr_error_message());
    unsetenv("TESSERA_LIMIT_SIM_MEM");
    setenv("TESSERA_NSIM", "two", 1);
    cr_assert_eq(tsr_init(NULL), TSR_EINVAL);
    unsetenv("TESSERA_NSIM");
    if (tsr_cuda_device_count() == 0) {
        setenv("TESSERA_NCUDA", "1", 1);
        cr_assert_eq(tsr_init(NULL), TSR_ENODEV, "%s", tsr_error_message());
        unsetenv("TESSERA_NCUDA");
    }
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = -1;
    cfg.ncuda = 0;
    cr_assert_eq(tsr_init(&cfg), TSR_EINVAL, "no worker at all");
    cr_assert_eq(tsr_init(NULL), TSR_OK, "nothing was left behind: %s",
                 tsr_error_message());
    cr_assert_eq(tsr_shutdown(), TSR_OK);
}

/* ---- the eviction livelock ------------------------------------------- */

/* Accelerators with room for exactly one task's two buffers; tasks whose
 * buffer pairs overlap and alternate, several in flight per worker. If
 * requests pinned part of their buffers and evicted the others' (the
 * StarPU issue #38 pattern), two tasks would evict each other forever; the
 * all-or-nothing FIFO grant must finish them all, with the sequential
 * result. */
typedef struct { int id; } pair_args_t;

static int pair_kernel(void **b, const void *args, const tsr_exec_t *e)
{
    (void)e;
    const pair_args_t *a = args;
    uint64_t *x = b[0], *y = b[1];
    x[0] = x[0] * 31 + y[0] + (uint64_t)a->id;
    return 0;
}

static const tsr_codelet_t pair_cl = {.name = "pair", .impl = {pair_kernel}, .nbuffers = 2};

Test(livelock, two_buffer_tasks_on_tight_accelerators, .timeout = 120)
{
    enum { H = 8, T = 4000, TILE = 512 };
    for (int nsim = 1; nsim <= 2; nsim++) {
        start_runtime_sim(-1, "eager", 0, nsim, 2 * TILE);
        static uint64_t data[H][TILE / 8], ref[H][TILE / 8];
        tsr_handle_t h[H];
        for (int i = 0; i < H; i++) {
            data[i][0] = ref[i][0] = (uint64_t)i;
            cr_assert_eq(tsr_handle_register(&h[i], data[i], TILE), TSR_OK);
        }
        srand(7);
        for (int t = 0; t < T; t++) {
            int a = rand() % H, b = (a + 1 + rand() % (H - 1)) % H;
            pair_args_t args = {t};
            tsr_access_t acc[2] = {{h[a], TSR_RW}, {h[b], TSR_R}};
            tsr_task_desc_t d = {.codelet = &pair_cl, .nbuffers = 2, .buffers = acc,
                                 .args = &args, .args_size = sizeof args};
            cr_assert_eq(tsr_submit(&d, NULL), TSR_OK);
            ref[a][0] = ref[a][0] * 31 + ref[b][0] + (uint64_t)t;
        }
        cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
        /* Under load one simulated worker may take every task (eager has
         * no affinity): count evictions over all simulated nodes. */
        uint64_t evictions = 0;
        for (int n = 1; n <= nsim; n++) {
            tsr_node_stats_t st;
            cr_assert_eq(tsr_memory_node_stats(n, &st), TSR_OK);
            cr_assert_leq(st.peak, st.capacity, "sim%d: peak %zu of %zu", n - 1, st.peak,
                          st.capacity);
            evictions += st.evictions;
        }
        cr_assert_gt(evictions, 0, "memory was tight, yet nothing was evicted (nsim %d)", nsim);
        for (int i = 0; i < H; i++)
            cr_assert_eq(tsr_handle_unregister(h[i]), TSR_OK);
        stop_runtime();
        for (int i = 0; i < H; i++)
            cr_assert_eq(data[i][0], ref[i][0], "nsim %d handle %d", nsim, i);
    }
}
