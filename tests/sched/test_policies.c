/* The model-based policies place tasks as worked out by hand, given fixed
 * execution times fed to the performance models and kernels that take
 * exactly that long:
 *  - dmda on a CPU worker and a simulated accelerator behind a slow link
 *    weighs queue, transfer and execution time;
 *  - heft takes the ready task on the longest path first, where dmda
 *    would take them in the order they became ready.
 * Costs are tens of milliseconds, so scheduling noise (microseconds) and
 * bus-model error (a few percent) cannot change the answer. */
#include <criterion/criterion.h>
#include <tessera/sched.h>
#include <tessera/tessera.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    int id;
    double seconds;
} job_t;

#define MAXJOBS 16
static int ran_on[MAXJOBS];
static double started[MAXJOBS];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int sleep_kernel(void **b, const void *args, const tsr_exec_t *e)
{
    (void)b;
    const job_t *j = args;
    ran_on[j->id] = e->worker;
    started[j->id] = now_s();
    struct timespec ts = {0, (long)(j->seconds * 1e9)};
    nanosleep(&ts, NULL);
    return 0;
}

/* in: a buffer it reads; out: a small buffer it writes */
static tsr_codelet_t job2 = {
    .name = "test.policy.job2",
    .impl = {sleep_kernel},
    .nbuffers = 2,
};
static tsr_codelet_t job1 = {
    .name = "test.policy.job1",
    .impl = {sleep_kernel},
    .nbuffers = 1,
};

static void teach(const tsr_codelet_t *cl, size_t *sizes, double seconds)
{
    for (int i = 0; i < 12; i++)
        cr_assert_eq(tsr_perfmodel_record(cl, TSR_DEVICE_CPU, sizes, cl->nbuffers, NULL,
                                          seconds),
                     TSR_OK, "%s", tsr_error_message());
}

static void submit(const tsr_codelet_t *cl, tsr_access_t *acc, int id, double seconds)
{
    job_t j = {id, seconds};
    tsr_task_desc_t d = {.codelet = cl, .nbuffers = cl->nbuffers, .buffers = acc,
                         .args = &j, .args_size = sizeof j};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
}

/* One CPU worker (0) and one simulated accelerator (worker 1) whose link
 * moves a task's 2 MiB input in 30 ms; each task runs 20 ms and reads its
 * own input from host memory. Pushed at t = 0, dmda computes
 *   T0: CPU 20            | sim 30+20 = 50  → CPU
 *   T1: CPU 40            | sim 50          → CPU
 *   T2: CPU 60            | sim 50          → sim (link busy until 30)
 *   T3: CPU 60            | sim max(50, 30+30) + 20 = 80 → CPU
 * (eager would start T1 on the idle accelerator). */
Test(policies, dmda_weighs_queue_transfer_and_length, .timeout = 120)
{
    enum { IN = 2 << 20, NT = 4 };
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 1;
    cfg.nsim = 1;
    cfg.sim_bandwidth = (double)IN / 0.030;
    cfg.sim_latency = 0;
    cfg.sched = "dmda";
    cfg.bind = 0;
    cfg.ncuda = 0;
    cfg.perfmodel_dir = "";
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_sched_worker_node(NULL, 1), 1, "worker 1 drives the accelerator");

    size_t sizes[2] = {IN, 64};
    teach(&job2, sizes, 0.020);
    static char in[NT][IN];
    static char out[NT][64];
    tsr_handle_t hin[NT], hout[NT];
    for (int i = 0; i < NT; i++) {
        cr_assert_eq(tsr_handle_register(&hin[i], in[i], IN), TSR_OK);
        cr_assert_eq(tsr_handle_register(&hout[i], out[i], 64), TSR_OK);
    }
    for (int i = 0; i < NT; i++) {
        tsr_access_t acc[2] = {{hin[i], TSR_R}, {hout[i], TSR_W}};
        submit(&job2, acc, i, 0.020);
    }
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    const int expect[NT] = {0, 0, 1, 0};
    for (int i = 0; i < NT; i++)
        cr_expect_eq(ran_on[i], expect[i], "T%d ran on worker %d, expected %d", i, ran_on[i],
                     expect[i]);
    for (int i = 0; i < NT; i++) {
        tsr_handle_unregister(hin[i]);
        tsr_handle_unregister(hout[i]);
    }
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
}

/* Two CPU workers. B0, B1 (30 ms) occupy both; then S0…S9 (10 ms, no
 * successors) and last X (10 ms), whose successor Y runs 60 ms, become
 * ready in that order. heft plans at most 2 tasks per worker ahead, so
 * S4…S9 and X wait; X has rank 10 + 60, the others 10: when the blockers
 * end, X is placed first, at about 50 ms, and at least S6…S9 start after
 * it. dmda places tasks as they come: X runs last on its worker (80 ms),
 * after every S has started. */
enum { NS = 10, ID_X = 2 + NS, ID_Y = ID_X + 1 };

static int starts_after_x(void)
{
    int n = 0;
    for (int i = 2; i < 2 + NS; i++)
        n += started[i] > started[ID_X];
    return n;
}

static void rank_case(const char *sched)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 2;
    cfg.sched = sched;
    cfg.bind = 0;
    cfg.ncuda = 0;
    cfg.perfmodel_dir = "";
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "%s", tsr_error_message());
    /* Footprints: one 24-byte buffer = blocker, 8 = short; Y: (16, 8). */
    static tsr_codelet_t job_y = {.name = "test.policy.jobY", .impl = {sleep_kernel},
                                  .nbuffers = 2};
    size_t sb = 24, ss = 8, sy[2] = {16, 8};
    teach(&job1, &sb, 0.030);
    teach(&job1, &ss, 0.010);
    teach(&job_y, sy, 0.060);
    static char mem[ID_Y + 1][24];
    tsr_handle_t h[ID_Y + 1];
    for (int i = 0; i <= ID_Y; i++)
        cr_assert_eq(tsr_handle_register(&h[i], mem[i], i < 2 ? 24 : i == ID_Y ? 16 : 8),
                     TSR_OK);
    for (int i = 0; i <= ID_X; i++) {
        tsr_access_t a = {h[i], TSR_W};
        submit(&job1, &a, i, i < 2 ? 0.030 : 0.010);
    }
    tsr_access_t acc[2] = {{h[ID_Y], TSR_W}, {h[ID_X], TSR_R}}; /* Y reads X's output */
    submit(&job_y, acc, ID_Y, 0.060);
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    for (int i = 0; i <= ID_Y; i++)
        tsr_handle_unregister(h[i]);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
}

Test(policies, heft_takes_the_longest_path_first, .timeout = 120)
{
    rank_case("heft");
    cr_expect_geq(starts_after_x(), 3, "heft: X started at %+.1f ms; %d of %d short tasks "
                  "after it", 1e3 * (started[ID_X] - started[0]), starts_after_x(), NS);
}

Test(policies, dmda_takes_ready_order, .timeout = 120)
{
    rank_case("dmda");
    cr_expect_leq(starts_after_x(), 1, "dmda: X started at %+.1f ms; %d of %d short tasks "
                  "after it", 1e3 * (started[ID_X] - started[0]), starts_after_x(), NS);
}

/* Every built-in policy is listed, initializes, and runs a task. */
Test(policies, builtins_listed)
{
    const char *want[] = {"eager", "prio", "random", "ws", "dmda", "heft"};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        const tsr_sched_policy_t *p = tsr_sched_builtin(want[k]);
        cr_assert_not_null(p, "%s", want[k]);
        cr_assert_str_eq(p->name, want[k]);
        cr_assert_not_null(p->description);
    }
    cr_assert_null(tsr_sched_builtin("nope"));
}
