/* Where the optimizer runs is the model-based policies' decision: AdamW tile
 * tasks whose parameters, gradients and moments are valid on the host run
 * on CPU workers, because an accelerator would first have to receive every
 * byte they read (16 bytes per parameter: g, p, m, v), and AdamW is far
 * cheaper than that copy (ZeRO-Offload's CPU Adam, here chosen by dmda and
 * heft from the transfer model instead of by hand). The control: the same
 * tasks whose data was produced on a simulated accelerator stay there, so
 * the choice follows the data and the link, not a rule about AdamW.
 *
 * The platform: 2 CPU workers and 2 simulated accelerators (which run the
 * CPU implementations, so a task takes the same time on either kind of
 * worker) behind a copy engine throttled to a bandwidth chosen from the
 * kernel's time measured here, so that moving one tile's inputs costs ten
 * times the CPU work of every tile together.
 *
 * The expected placement is computed here from the figures the models hold
 * (the measured AdamW time recorded into the model, the measured bus):
 * a task can finish on its data's node within (tiles there) × (predicted
 * time), while on any other node it cannot start before its inputs have
 * crossed the link, (inputs) × (latency + bytes / bandwidth); when the
 * latter is larger, every task must run where its data is. The test asserts
 * that premise from the figures, then the placement.
 */
#include <criterion/criterion.h>
#include <tessera/tessera.h>

#include "nn/ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NT 8                        /* AdamW tiles */
#define TILE_ELEMS ((size_t)1 << 18) /* 256 Ki floats: 1 MiB per buffer */
#define TILE_BYTES (TILE_ELEMS * sizeof(float))
#define NCPU 2
#define NSIM 2
/* The copy of one tile's inputs is at least this many times the CPU work
 * of all NT tiles (the throttle is chosen so). */
#define MARGIN 10.0

/* Where each tile's AdamW (and, in the control, its producer) ran: the
 * memory node of the worker (0: host). Written by workers, read after
 * tsr_wait_all. */
static int ran_node[NT], init_node[NT];

typedef struct tile_args {
    tsr_adamw_args_t a; /* first: the wrapped kernel reads its own block */
    int tile;
} tile_args_t;

static tsr_kernel_fn adamw_cpu; /* the library's AdamW implementation */

/* The library's AdamW tile, noting where it ran. */
static int adamw_noting(void **buf, const void *args, const tsr_exec_t *e)
{
    const tile_args_t *a = args;
    ran_node[a->tile] = e->memory_node;
    return adamw_cpu(buf, &a->a, e);
}

/* Producer of a tile's four buffers (g, p, m, v), W on all of them: puts
 * the tile's only valid copy wherever the policy runs it. */
static int fill_tile(void **buf, const void *args, const tsr_exec_t *e)
{
    const tile_args_t *a = args;
    init_node[a->tile] = e->memory_node;
    float *g = buf[0], *p = buf[1], *m = buf[2], *v = buf[3];
    for (size_t i = 0; i < TILE_ELEMS; i++) {
        g[i] = 0.01f * (float)(i % 7);
        p[i] = 1.0f;
        m[i] = 0;
        v[i] = 0;
    }
    return 0;
}

static tsr_codelet_t cl_adamw_noting, cl_fill = {
    .name = "placement_fill", .impl = {fill_tile, NULL}, .nbuffers = 4};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median seconds of `fn` on one tile of host buffers (no runtime). */
static double time_kernel(tsr_kernel_fn fn, void **buf, const void *args)
{
    size_t sizes[4] = {TILE_BYTES, TILE_BYTES, TILE_BYTES, TILE_BYTES};
    tsr_exec_t e = {.worker = 0, .device_kind = TSR_DEVICE_CPU, .nbuffers = 4,
                    .sizes = sizes};
    double t[7];
    for (int r = 0; r < 7; r++) {
        double t0 = now_s();
        cr_assert_eq(fn(buf, args, &e), 0);
        t[r] = now_s() - t0;
    }
    qsort(t, 7, sizeof t[0], cmp_d);
    return t[3];
}

typedef struct figures {
    double t_adamw, t_fill; /* measured here, seconds per tile */
    double bw_cfg;          /* the throttle */
} figures_t;

static const tsr_adamw_args_t hyper = {.step = 1, .lr = 1e-3f, .beta1 = 0.9f,
                                       .beta2 = 0.95f, .eps = 1e-8f,
                                       .weight_decay = 0.1f, .grad_scale = 1};

/* Measure the kernels on the host and pick the throttle. */
static figures_t measure(void)
{
    const tsr_codelet_t *lib = tsr__op_codelet("adamw");
    cr_assert_not_null(lib);
    adamw_cpu = lib->impl[TSR_DEVICE_CPU];
    cl_adamw_noting = *lib; /* same name, flops, bytes: the same model */
    cl_adamw_noting.impl[TSR_DEVICE_CPU] = adamw_noting;
    cl_adamw_noting.impl[TSR_DEVICE_CUDA] = NULL;

    void *buf[4];
    for (int k = 0; k < 4; k++)
        cr_assert_not_null(buf[k] = calloc(TILE_ELEMS, sizeof(float)));
    tile_args_t a = {hyper, 0};
    figures_t f;
    f.t_fill = time_kernel(fill_tile, buf, &a);
    f.t_adamw = time_kernel(adamw_noting, buf, &a);
    for (int k = 0; k < 4; k++)
        free(buf[k]);
    /* One tile's inputs (4 buffers) take MARGIN × all tiles' CPU time. */
    double bw = 4.0 * (double)TILE_BYTES / (MARGIN * NT * f.t_adamw);
    f.bw_cfg = fmin(fmax(bw, 20e6), 2e9);
    return f;
}

static void start(const char *policy, const figures_t *f)
{
    unsetenv("TESSERA_SCHED");
    unsetenv("TESSERA_NSIM");
    unsetenv("TESSERA_NCPU");
    unsetenv("TESSERA_SIM_BW");
    unsetenv("TESSERA_CALIBRATE");
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = NCPU;
    cfg.nsim = NSIM;
    cfg.ncuda = 0;
    cfg.bind = 0;
    cfg.sched = policy;
    cfg.sim_mem = (size_t)64 << 20;
    cfg.sim_bandwidth = f->bw_cfg;
    cfg.sim_latency = 20e-6;
    cfg.calibrate = 0;
    cfg.perfmodel_dir = ""; /* TESSERA_PERFMODEL_DIR, where set, wins */
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "tsr_init: %s", tsr_error_message());
    cr_assert_eq(tsr_memory_node_count(), 1 + NSIM);

    /* The models hold the figures measured above (more samples than the
     * trust threshold, so that the policies plan instead of exploring). */
    size_t sizes[4] = {TILE_BYTES, TILE_BYTES, TILE_BYTES, TILE_BYTES};
    tile_args_t a = {hyper, 0};
    for (int r = 0; r < 12; r++) {
        cr_assert_eq(tsr_perfmodel_record(&cl_adamw_noting, TSR_DEVICE_CPU, sizes, 4, &a,
                                          f->t_adamw), TSR_OK);
        cr_assert_eq(tsr_perfmodel_record(&cl_fill, TSR_DEVICE_CPU, sizes, 4, &a, f->t_fill),
                     TSR_OK);
    }
}

/* The model's AdamW time, and the cheapest copy of one tile's inputs (4
 * buffers, each latency + bytes / bandwidth) over the links src → dst
 * given (src, dst < 0: every pair of different nodes). */
static double predicted_adamw(void)
{
    size_t sizes[4] = {TILE_BYTES, TILE_BYTES, TILE_BYTES, TILE_BYTES};
    tile_args_t a = {hyper, 0};
    tsr_perfmodel_info_t info;
    cr_assert_eq(tsr_perfmodel_predict(&cl_adamw_noting, TSR_DEVICE_CPU, sizes, 4, &a, &info),
                 TSR_OK, "%s", tsr_error_message());
    return info.seconds;
}

static double inputs_copy(int src, int dst)
{
    double lat, bw;
    cr_assert_eq(tsr_bus_model(src, dst, &lat, &bw), TSR_OK, "%s", tsr_error_message());
    return 4 * (lat + (double)TILE_BYTES / bw);
}

static double cheapest_copy_between_nodes(void)
{
    double best = INFINITY;
    for (int s = 0; s <= NSIM; s++)
        for (int d = 0; d <= NSIM; d++)
            if (s != d)
                best = fmin(best, inputs_copy(s, d));
    return best;
}

static void submit_adamw(tsr_handle_t h[NT][4])
{
    for (int i = 0; i < NT; i++) {
        tile_args_t a = {hyper, i};
        tsr_access_t acc[4] = {{h[i][0], TSR_R}, {h[i][1], TSR_RW},
                               {h[i][2], TSR_RW}, {h[i][3], TSR_RW}};
        tsr_task_desc_t d = {.codelet = &cl_adamw_noting, .nbuffers = 4, .buffers = acc,
                             .args = &a, .args_size = sizeof a};
        cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
    }
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
}

/* Parameters, gradients and moments registered from host memory: every
 * AdamW tile runs on a CPU worker. */
static void host_state_runs_on_cpu(const char *policy)
{
    figures_t f = measure();
    start(policy, &f);
    double len = predicted_adamw();
    double xfer_in = inputs_copy(0, 1), lat, bw, wb_lat, wb_bw;
    cr_assert_eq(tsr_bus_model(0, 1, &lat, &bw), TSR_OK);
    cr_assert_eq(tsr_bus_model(1, 0, &wb_lat, &wb_bw), TSR_OK);
    double write_back = 3 * (wb_lat + (double)TILE_BYTES / wb_bw);
    /* Some CPU worker can finish any tile by the time the tiles shared out
     * over the NCPU workers have run, ceil(NT / NCPU) × len; an accelerator
     * cannot before its 4 inputs (16 bytes per parameter) have crossed the
     * link. */
    double cpu_latest = (NT + NCPU - 1) / NCPU * len, accel_earliest = xfer_in + len;
    cr_log_info("%s, host state: AdamW %.3f ms/tile (model %.3f ms), link %.1f MB/s "
                "(configured %.1f MB/s): inputs to an accelerator %.2f ms/tile "
                "(16 B/param), write-back %.2f ms (12 B/param, not needed for the "
                "choice); CPU latest finish %.2f ms < accelerator earliest %.2f ms",
                policy, 1e3 * f.t_adamw, 1e3 * len, bw / 1e6,
                f.bw_cfg / 1e6, 1e3 * xfer_in, 1e3 * write_back, 1e3 * cpu_latest,
                1e3 * accel_earliest);
    cr_assert_gt(accel_earliest, cpu_latest, "the premise: transfers dominate");

    static float host[NT][4][TILE_ELEMS];
    tsr_handle_t h[NT][4];
    for (int i = 0; i < NT; i++)
        for (int k = 0; k < 4; k++) {
            for (size_t e = 0; e < TILE_ELEMS; e++)
                host[i][k][e] = k == 0 ? 0.01f : k == 1 ? 1.0f : 0.0f;
            cr_assert_eq(tsr_handle_register(&h[i][k], host[i][k], TILE_BYTES), TSR_OK);
        }
    for (int i = 0; i < NT; i++)
        ran_node[i] = -1;
    submit_adamw(h);
    int on_cpu = 0;
    for (int i = 0; i < NT; i++)
        on_cpu += ran_node[i] == 0;
    cr_log_info("%s, host state: %d of %d AdamW tiles on CPU workers", policy, on_cpu, NT);
    for (int i = 0; i < NT; i++)
        cr_assert_eq(ran_node[i], 0, "%s: tile %d ran on node %d, not on the host", policy, i,
                     ran_node[i]);
    /* The step really ran: p = 1 - lr (1 / (1 + eps') + wd): below 1. */
    for (int i = 0; i < NT; i++)
        for (int k = 0; k < 4; k++)
            cr_assert_eq(tsr_handle_unregister(h[i][k]), TSR_OK);
    cr_assert_lt(host[0][1][1], 1.0f);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
}

/* The control: the state produced by tasks, wherever the policy ran them
 * (some on the accelerators): each AdamW tile runs on its data's node. */
static void accelerator_state_stays(const char *policy)
{
    figures_t f = measure();
    start(policy, &f);
    tsr_handle_t h[NT][4];
    for (int i = 0; i < NT; i++)
        for (int k = 0; k < 4; k++)
            cr_assert_eq(tsr_handle_alloc(&h[i][k], TILE_BYTES), TSR_OK);
    for (int i = 0; i < NT; i++) {
        tile_args_t a = {hyper, i};
        tsr_access_t acc[4] = {{h[i][0], TSR_W}, {h[i][1], TSR_W},
                               {h[i][2], TSR_W}, {h[i][3], TSR_W}};
        tsr_task_desc_t d = {.codelet = &cl_fill, .nbuffers = 4, .buffers = acc,
                             .args = &a, .args_size = sizeof a};
        init_node[i] = ran_node[i] = -1;
        cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
    }
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    int per_node[1 + NSIM] = {0}, on_accel = 0;
    for (int i = 0; i < NT; i++) {
        cr_assert(init_node[i] >= 0 && init_node[i] <= NSIM);
        per_node[init_node[i]]++;
        on_accel += init_node[i] != 0;
    }
    /* Producers need no input: they spread over every worker. */
    cr_assert_gt(on_accel, 0, "%s: no tile was produced on an accelerator", policy);

    double len = predicted_adamw(), xfer = cheapest_copy_between_nodes();
    /* Staying: at most every tile of the node one after the other (a node
     * with NCPU workers does better). Moving: the inputs' copy first. */
    int most = 0;
    for (int n = 0; n <= NSIM; n++)
        most = per_node[n] > most ? per_node[n] : most;
    double stay_latest = most * len, move_earliest = xfer + len;
    cr_log_info("%s, state on the nodes (host %d, sim0 %d, sim1 %d tiles): AdamW %.3f "
                "ms/tile; staying finishes by %.2f ms, moving not before %.2f ms",
                policy, per_node[0], per_node[1], per_node[2], 1e3 * len,
                1e3 * stay_latest, 1e3 * move_earliest);
    cr_assert_gt(move_earliest, stay_latest, "the premise: transfers dominate");

    submit_adamw(h);
    int stayed = 0;
    for (int i = 0; i < NT; i++)
        stayed += ran_node[i] == init_node[i];
    cr_log_info("%s: %d of %d AdamW tiles ran on their data's node (%d on accelerators)",
                policy, stayed, NT, on_accel);
    for (int i = 0; i < NT; i++)
        cr_assert_eq(ran_node[i], init_node[i], "%s: tile %d's data on node %d, ran on %d",
                     policy, i, init_node[i], ran_node[i]);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
}

Test(sched_placement, dmda_runs_adamw_of_host_state_on_cpu) { host_state_runs_on_cpu("dmda"); }
Test(sched_placement, heft_runs_adamw_of_host_state_on_cpu) { host_state_runs_on_cpu("heft"); }
Test(sched_placement, dmda_keeps_adamw_with_accelerator_state)
{
    accelerator_state_stays("dmda");
}
Test(sched_placement, heft_keeps_adamw_with_accelerator_state)
{
    accelerator_state_stays("heft");
}
