/* The replay (lab/replay.c) on graphs built here by hand: simulated
 * makespans equal the schedules worked out below (durations from the
 * graph, explicit and data dependencies, reads beyond TSR_MAX_BUFFERS
 * folded into dependencies, events); a real run's record shows every task
 * lasting at least its duration and starting after its predecessors end. */
#include <criterion/criterion.h>
#include <tessera/tessera.h>

#include "lab/replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- building graphs by hand ------------------------------------------------------ */

#define MAXT 64
#define MAXA 512

typedef struct hand {
    tsr_lab_graph_t g;
    tsr_lab_task_t task[MAXT];
    tsr_lab_data_t data[MAXT];
    tsr_lab_access_t access[MAXA];
    uint32_t dep[MAXA];
    tsr_lab_event_t event[8];
} hand_t;

static void hand_init(hand_t *h, size_t ndata, size_t size)
{
    memset(h, 0, sizeof *h);
    h->g.task = h->task;
    h->g.data = h->data;
    h->g.access = h->access;
    h->g.dep = h->dep;
    h->g.event = h->event;
    h->g.ndata = ndata;
    h->g.time_unit_s = 1e-3;
    for (size_t d = 0; d < ndata; d++)
        h->data[d] = (tsr_lab_data_t){.size = size, .name = "d"};
}

/* a task of `ms` milliseconds on CPUs (none on GPUs); returns its index */
static uint32_t add_task(hand_t *h, double ms)
{
    uint32_t i = (uint32_t)h->g.ntasks++;
    h->task[i] = (tsr_lab_task_t){.name = "t", .id = i, .flops = -1,
                                  .seconds = {ms * 1e-3, -1}, .access_off = (uint32_t)h->g.naccess,
                                  .dep_off = (uint32_t)h->g.ndeps, .worker = -1,
                                  .device_kind = -1, .start_s = -1, .end_s = -1};
    return i;
}

static void add_access(hand_t *h, uint32_t data, int mode)
{
    h->access[h->g.naccess++] = (tsr_lab_access_t){data, mode};
    h->task[h->g.ntasks - 1].naccess++;
}

static void add_dep(hand_t *h, uint32_t pred)
{
    h->dep[h->g.ndeps++] = pred;
    h->task[h->g.ntasks - 1].ndeps++;
}

/* ---- a simulated node: ncpu CPU workers, no overheads ------------------------------ */

static const char *platform(int ncpu)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/tsr-replay-%d.json", (int)getpid());
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f,
            "{\"name\": \"replay-test\", \"models\": \"rates\", \"task_overhead_us\": 0,\n"
            " \"host\": {\"memory_gib\": 64, \"memory_bandwidth_gbs\": 1000000,\n"
            "          \"memory_latency_us\": 0, \"cpu_workers\": %d},\n"
            " \"devices\": {\"cpu\": {\"fp32_tflops\": 0.001, \"memory_bandwidth_gbs\": 1000000,\n"
            "   \"launch_us\": 0, \"flops_efficiency\": 1, \"bytes_efficiency\": 1}}}\n",
            ncpu);
    fclose(f);
    return path;
}

static double simulate(const tsr_lab_graph_t *g, int ncpu, const char *sched,
                       tsr_lab_replay_result_t *r)
{
    const char *plat = platform(ncpu);
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.bind = 0;
    cfg.sched = sched;
    cfg.simulate = plat;
    cfg.perfmodel_dir = "";
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "%s", tsr_error_message());
    char err[512] = "";
    tsr_lab_replay_opts_t o = {.durations = TSR_LAB_DURATIONS_FILE};
    cr_assert_eq(tsr_lab_replay(g, &o, r, err, sizeof err), TSR_OK, "%s", err);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
    unlink(plat);
    return r->makespan_s;
}

/* A diamond by explicit dependencies (a 3 ms; b 7 ms and c 2 ms after a;
 * d 1 ms after both) beside a chain through data (e 4 ms writes x, f 4 ms
 * reads x and writes y, g 2 ms reads y). Longest path: a b d, 11 ms (the
 * chain is 10). On 3 workers, eager (first come, first served): a and e at
 * 0; b and c at 3; f at 4; d at 10 (after b), g at 8: 11 ms. Were the
 * explicit dependencies lost, the diamond would run at once and the chain
 * would set the makespan, 10 ms. On one worker: all the work, 23 ms. */
static void diamond_and_chain(hand_t *h)
{
    hand_init(h, 7, 8);
    uint32_t a = add_task(h, 3);
    add_access(h, 0, TSR_W);
    add_task(h, 7);
    add_access(h, 1, TSR_W);
    add_dep(h, a);
    add_task(h, 2);
    add_access(h, 2, TSR_W);
    add_dep(h, a);
    add_task(h, 1);
    add_access(h, 3, TSR_W);
    add_dep(h, 1);
    add_dep(h, 2);
    add_task(h, 4);
    add_access(h, 4, TSR_W);
    add_task(h, 4);
    add_access(h, 4, TSR_R);
    add_access(h, 5, TSR_W);
    add_task(h, 2);
    add_access(h, 5, TSR_R);
}

Test(replay, diamond_and_chain_makespans)
{
    static hand_t h;
    diamond_and_chain(&h);
    tsr_lab_replay_result_t r;
    cr_assert_float_eq(simulate(&h.g, 1, "eager", &r), 23e-3, 1e-12, "%.9f", r.makespan_s);
    cr_assert_eq(r.tasks, 7);
    cr_assert_float_eq(r.busy_s[TSR_DEVICE_CPU], 23e-3, 1e-12);
    cr_assert_float_eq(simulate(&h.g, 3, "eager", &r), 11e-3, 1e-12, "%.9f", r.makespan_s);
    /* every policy stays at or above the longest path */
    const char *pol[4] = {"ws", "dmda", "heft", "prio"};
    for (int k = 0; k < 4; k++)
        cr_assert_geq(simulate(&h.g, 3, pol[k], &r), 11e-3 - 1e-12, "%s: %.9f", pol[k],
                      r.makespan_s);
}

/* Writers of items 16..19 (10 ms each), then of items 0..15 (1 ms each),
 * then a reader of all 20 items in order (1 ms): its reads of items 16..19
 * do not fit in TSR_MAX_BUFFERS and become dependencies on their writers.
 * On 6 workers, eager: the long writers take 4 workers 0-10 ms, the short
 * ones the other 2, 0-8 ms; the reader runs 10-11 ms. Were the folded
 * dependencies lost, it would run at 8-9 ms and the makespan be 10 ms. */
Test(replay, reads_beyond_the_buffer_limit_become_dependencies)
{
    static hand_t h;
    hand_init(&h, 20, 8);
    for (uint32_t i = 16; i < 20; i++) {
        add_task(&h, 10);
        add_access(&h, i, TSR_W);
    }
    for (uint32_t i = 0; i < 16; i++) {
        add_task(&h, 1);
        add_access(&h, i, TSR_W);
    }
    add_task(&h, 1);
    for (uint32_t i = 0; i < 20; i++)
        add_access(&h, i, TSR_R);
    tsr_lab_replay_result_t r;
    cr_assert_float_eq(simulate(&h.g, 6, "eager", &r), 11e-3, 1e-12, "%.9f", r.makespan_s);
    cr_assert_eq(r.folded, 4);
}

/* Events replay where they fall; an invalidate of an item read later is
 * legal (the reader sees zeros) and changes no ordering. */
Test(replay, events_between_tasks)
{
    static hand_t h;
    diamond_and_chain(&h);
    h.event[0] = (tsr_lab_event_t){.before = 5, .data = 0, .kind = TSR_LAB_WONT_USE};
    h.event[1] = (tsr_lab_event_t){.before = 6, .data = 4, .kind = TSR_LAB_INVALIDATE};
    h.event[2] = (tsr_lab_event_t){.before = 7, .data = 5, .kind = TSR_LAB_INVALIDATE};
    h.g.nevents = 3;
    tsr_lab_replay_result_t r;
    cr_assert_float_eq(simulate(&h.g, 3, "eager", &r), 11e-3, 1e-12, "%.9f", r.makespan_s);
}

/* A task no worker can run (durations only for GPUs, none on the node) is
 * refused with a message; nothing is left registered. */
Test(replay, a_task_for_no_worker_is_refused)
{
    static hand_t h;
    hand_init(&h, 1, 8);
    add_task(&h, 1);
    add_access(&h, 0, TSR_W);
    h.task[0].seconds[TSR_DEVICE_CPU] = -1;
    h.task[0].seconds[TSR_DEVICE_CUDA] = 1e-3;
    const char *plat = platform(1);
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.bind = 0;
    cfg.simulate = plat;
    cfg.perfmodel_dir = "";
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "%s", tsr_error_message());
    char err[512] = "";
    tsr_lab_replay_result_t r;
    cr_assert_eq(tsr_lab_replay(&h.g, NULL, &r, err, sizeof err), TSR_ENODEV);
    cr_assert(strstr(err, "task 0"), "%s", err);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
    unlink(plat);
}

/* On this machine, recorded: every task lasts at least its duration and
 * starts after each predecessor (explicit or through data) has ended. */
Test(replay, real_run_honours_durations_and_edges)
{
    static hand_t h;
    diamond_and_chain(&h);
    char path[64];
    snprintf(path, sizeof path, "/tmp/tsr-replay-rec-%d.graph", (int)getpid());
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.bind = 0;
    cfg.ncpu = 2;
    cfg.ncuda = 0;
    cfg.perfmodel_dir = "";
    cfg.record_path = path;
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "%s", tsr_error_message());
    for (int kernel = 0; kernel < 2; kernel++) {
        char err[512] = "";
        tsr_lab_replay_opts_t o = {.real = 1, .kernel = kernel};
        tsr_lab_replay_result_t r;
        cr_assert_eq(tsr_lab_replay(&h.g, &o, &r, err, sizeof err), TSR_OK, "%s", err);
        cr_assert_geq(r.makespan_s, 11e-3, "%.6f", r.makespan_s);
    }
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());

    /* predecessors of each task, by hand (indices 0..6 of the graph) */
    const unsigned pred[7] = {0, 1u << 0, 1u << 0, 1u << 1 | 1u << 2, 0, 1u << 4, 1u << 5};
    long long start[14], end[14];
    int n = 0;
    FILE *f = fopen(path, "r");
    cr_assert(f);
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        unsigned long long id;
        long long s, e;
        if (sscanf(line, "ran %llu worker=%*d device=%*s start_ns=%lld end_ns=%lld", &id, &s,
                   &e) == 3) {
            cr_assert(id >= 1 && id <= 14);
            start[id - 1] = s, end[id - 1] = e;
            n++;
        }
    }
    fclose(f);
    unlink(path);
    cr_assert_eq(n, 14);
    for (int run = 0; run < 2; run++)
        for (int i = 0; i < 7; i++) {
            int k = run * 7 + i;
            double ms = h.task[i].seconds[TSR_DEVICE_CPU] * 1e3;
            cr_assert_geq((double)(end[k] - start[k]), ms * 1e6, "task %d ran %lld ns", i,
                          end[k] - start[k]);
            for (int j = 0; j < 7; j++)
                if (pred[i] >> j & 1u)
                    cr_assert_geq(start[k], end[run * 7 + j], "task %d before %d", i, j);
        }
}
