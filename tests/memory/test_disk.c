/* The disk tier: tiles travel host → disk → host (→ accelerator) under a
 * host cap a quarter of the data, and the results equal a sequential
 * computation on the test's own copy; injected I/O errors fail the run
 * with a message naming the file and the call, and lose no data; the
 * file is never visible and never outlives the process (shutdown or
 * SIGKILL); bad directories and capacities are refused cleanly. */
#include "../runtime/util.h"
#include "memory/memory.h"

#include <tessera/sched.h>

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NT 32                   /* tiles */
#define TE 8192                 /* uint64 elements per tile: 64 KiB */
#define TILE (TE * sizeof(uint64_t))
#define ROUNDS 3

/* ---- a scratch directory --------------------------------------------------- */

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/tessera-disk-test-XXXXXX");
    cr_assert(mkdtemp(dir), "mkdtemp");
}

/* Entries in dir other than . and .. */
static int dir_entries(void)
{
    DIR *d = opendir(dir);
    cr_assert(d, "opendir %s", dir);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

static void remove_dir(void)
{
    cr_assert_eq(dir_entries(), 0, "nothing is left in %s", dir);
    rmdir(dir);
}

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    while (d && readdir(d))
        n++;
    if (d)
        closedir(d);
    return n;
}

static void start_sched(const char *sched, int ncpu, int nsim, size_t sim_mem,
                        size_t host_mem)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = ncpu;
    cfg.sched = sched;
    cfg.bind = 0;
    cfg.ncuda = 0;
    cfg.nsim = nsim;
    cfg.sim_mem = sim_mem;
    cfg.host_mem = host_mem;
    cfg.disk_dir = dir;
    cfg.disk_mem = (size_t)64 << 20;
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "tsr_init: %s", tsr_error_message());
}

static void start_disk(int ncpu, int nsim, size_t sim_mem, size_t host_mem)
{
    start_sched("eager", ncpu, nsim, sim_mem, host_mem);
}

static int disk_node(void)
{
    for (int i = 0; i < tsr_memory_node_count(); i++) {
        tsr_node_stats_t s;
        cr_assert_eq(tsr_memory_node_stats(i, &s), TSR_OK);
        if (s.kind == TSR_NODE_DISK)
            return i;
    }
    cr_assert(false, "no disk node");
    return -1;
}

/* ---- the computation: x_i = 3 x_i + x_{i+1} + round + k, in program order -- */

typedef struct { uint64_t v; } fill_args_t;

static int fill_kernel(void **b, const void *args, const tsr_exec_t *e)
{
    (void)e;
    uint64_t *x = b[0];
    for (int k = 0; k < TE; k++)
        x[k] = ((const fill_args_t *)args)->v * 1000003u + (uint64_t)k;
    return 0;
}

static int step_kernel(void **b, const void *args, const tsr_exec_t *e)
{
    (void)e;
    uint64_t *x = b[0];
    const uint64_t *y = b[1];
    uint64_t r = ((const fill_args_t *)args)->v;
    for (int k = 0; k < TE; k++)
        x[k] = 3 * x[k] + y[k] + r + (uint64_t)k;
    return 0;
}

static const tsr_codelet_t fill_cl = {.name = "fill", .impl = {fill_kernel}, .nbuffers = 1};
static const tsr_codelet_t step_cl = {.name = "step", .impl = {step_kernel}, .nbuffers = 2};

static void submit_fill(tsr_handle_t h, uint64_t v)
{
    fill_args_t a = {v};
    tsr_access_t acc = {h, TSR_W};
    tsr_task_desc_t d = {.codelet = &fill_cl, .nbuffers = 1, .buffers = &acc, .args = &a,
                         .args_size = sizeof a, .name = "fill"};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
}

static void submit_step(tsr_handle_t x, tsr_handle_t y, uint64_t r)
{
    fill_args_t a = {r};
    tsr_access_t acc[2] = {{x, TSR_RW}, {y, TSR_R}};
    tsr_task_desc_t d = {.codelet = &step_cl, .nbuffers = 2, .buffers = acc, .args = &a,
                         .args_size = sizeof a, .name = "step"};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
}

/* The same computation, sequentially, on the test's own arrays. */
static uint64_t *reference(void)
{
    uint64_t *x = malloc((size_t)NT * TILE);
    cr_assert(x);
    for (int i = 0; i < NT; i++)
        for (int k = 0; k < TE; k++)
            x[(size_t)i * TE + k] = (uint64_t)i * 1000003u + (uint64_t)k;
    for (int r = 0; r < ROUNDS; r++)
        for (int i = 0; i < NT; i++) {
            uint64_t *a = x + (size_t)i * TE, *b = x + (size_t)((i + 1) % NT) * TE;
            for (int k = 0; k < TE; k++)
                a[k] = 3 * a[k] + b[k] + (uint64_t)r + (uint64_t)k;
        }
    return x;
}

static void check_tile(tsr_handle_t h, const uint64_t *ref, int i)
{
    uint64_t *p;
    cr_assert_eq(tsr_handle_acquire(h, TSR_R, (void **)&p), TSR_OK, "tile %d: %s", i,
                 tsr_error_message());
    for (int k = 0; k < TE; k++)
        cr_assert_eq(p[k], ref[k], "tile %d element %d: %llu, sequential %llu", i, k,
                     (unsigned long long)p[k], (unsigned long long)ref[k]);
    cr_assert_eq(tsr_handle_release(h), TSR_OK);
}

/* NT tiles filled, then ROUNDS rounds of steps over all of them; the
 * tiles against the sequential reference. */
static void run_rounds(tsr_handle_t h[NT])
{
    for (int i = 0; i < NT; i++) {
        cr_assert_eq(tsr_handle_alloc(&h[i], TILE), TSR_OK);
        submit_fill(h[i], (uint64_t)i);
    }
    for (int r = 0; r < ROUNDS; r++)
        for (int i = 0; i < NT; i++)
            submit_step(h[i], h[(i + 1) % NT], (uint64_t)r);
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    uint64_t *ref = reference();
    for (int i = 0; i < NT; i++)
        check_tile(h[i], ref + (size_t)i * TE, i);
    free(ref);
}

/* run_rounds(h), and how many copies went past the host's overdraft bound
 * meanwhile (tsr__mem_overdraft_unbounded: nothing was on its way to disk) */
static uint64_t rounds_past_the_bound(tsr_handle_t *h)
{
    uint64_t before = atomic_load(&tsr__mem_overdraft_unbounded);
    run_rounds(h);
    return atomic_load(&tsr__mem_overdraft_unbounded) - before;
}

/* 32 tiles of 64 KiB through a host capped at 8: every round every tile
 * is written to disk and read back. */
static void travel_with(const char *sched, int ncpu, int nsim)
{
    make_dir();
    start_sched(sched, ncpu, nsim, 4 * TILE, 8 * TILE);
    cr_assert_eq(dir_entries(), 0, "the file is unlinked at once");
    int dk = disk_node();
    tsr_handle_t h[NT];
    uint64_t unbounded = rounds_past_the_bound(h);

    tsr_node_stats_t host, disk;
    cr_assert_eq(tsr_memory_node_stats(0, &host), TSR_OK);
    cr_assert_eq(tsr_memory_node_stats(dk, &disk), TSR_OK);
    cr_log_info("host: %llu write-backs, peak %zu of %zu; disk: in %llu, out %llu bytes",
                (unsigned long long)host.writebacks, host.peak, host.capacity,
                (unsigned long long)disk.bytes_in, (unsigned long long)disk.bytes_out);
    cr_assert_gt(host.writebacks, 0, "the host wrote copies back to disk");
    /* The overdraft's bound (docs/memory.md, "Overdraft"): the host goes
     * over its cap of 8 tiles by at most 2, whatever the accelerators
     * write back (it was 11 to 23 tiles in all before the bound), unless
     * it had to overdraw with nothing of its own on the way to disk
     * (each such copy adds at most a tile). */
    if (unbounded)
        cr_log_info("%llu copies past the bound", (unsigned long long)unbounded);
    cr_assert_leq(host.peak, host.capacity + 2 * TILE + unbounded * TILE,
                  "host peak %zu: over its capacity %zu by more than 2 tiles of %zu "
                  "(%llu copies past the bound)",
                  host.peak, host.capacity, (size_t)TILE, (unsigned long long)unbounded);
    cr_assert_geq(tsr_memory_link_bytes(0, dk), (uint64_t)NT * TILE,
                  "at least the data's size went to disk");
    cr_assert_gt(tsr_memory_link_bytes(dk, 0), 0, "and came back");
    /* (nodes: the host, the simulated accelerators, the disk last) */
    uint64_t to_sims = 0;
    for (int s = 1; s <= nsim; s++) {
        cr_assert_eq(tsr_memory_link_bytes(dk, s), 0, "the disk reaches the host only");
        to_sims += tsr_memory_link_bytes(0, s);
    }
    if (ncpu < 0) /* every task ran on an accelerator: its data came through the host */
        cr_assert_geq(to_sims, (uint64_t)NT * TILE, "the accelerators got their data");
    cr_assert_eq(dir_entries(), 0, "nothing visible during the run");
    if (strcmp(sched, "dmda") == 0) {
        double lat, bw;
        cr_assert_eq(tsr_bus_model(dk, 0, &lat, &bw), TSR_OK, "%s", tsr_error_message());
        cr_log_info("disk -> host: latency %g s, %g bytes/s", lat, bw);
        cr_assert(bw > 0 && bw < 1e15, "the disk link was measured: %g bytes/s", bw);
    }
    /* The counters' printout has the disk's line and column. */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert(f);
    cr_assert_eq(tsr_stats_print(f), TSR_OK);
    fclose(f);
    cr_assert(strstr(text, "\ndisk "), "%s", text);
    free(text);
    for (int i = 0; i < NT; i++)
        cr_assert_eq(tsr_handle_unregister(h[i]), TSR_OK);
    stop_runtime();
    remove_dir();
}

static void travel(int ncpu, int nsim) { travel_with("eager", ncpu, nsim); }

Test(disk, every_tile_travels_cpu) { travel(2, 0); }
Test(disk, every_tile_travels_through_two_sims) { travel(-1, 2); }
Test(disk, cpu_and_one_sim) { travel(1, 1); }

/* Policies that read where data is (ws) and the bus model (dmda, which
 * calibrates the disk's link too) with handles valid only on disk. */
Test(disk, work_stealing) { travel_with("ws", 1, 1); }
Test(disk, dmda_models_the_disk_link)
{
    travel_with("dmda", 1, 1);
}

/* ---- the overdraft's bound, in simulation ------------------------------------ */

/* A platform for tessera-sim's runtime (virtual time, phantom nodes): one
 * simulated accelerator of 4 tiles behind a 1 GB/s link (a tile in 66 us),
 * drives that write 0.01 GB/s in all (a tile in 6.6 ms: a hundred times
 * slower), a host of 64 GiB (capped by host_mem). Returns the path. */
static const char *slow_disk_platform(void)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/tsr-disk-test-%d.json", (int)getpid());
    FILE *f = fopen(path, "w");
    cr_assert(f, "cannot write %s", path);
    fprintf(f,
            "{\"name\": \"test-slow-disk\", \"models\": \"rates\", \"task_overhead_us\": 0,\n"
            " \"host\": {\"memory_gib\": 64, \"memory_bandwidth_gbs\": 1000000,\n"
            "          \"memory_latency_us\": 0, \"cpu_workers\": 1},\n"
            " \"devices\": {\"cpu\": {\"fp32_tflops\": 0.001, \"memory_bandwidth_gbs\": 1000000,\n"
            "   \"launch_us\": 0, \"flops_efficiency\": 1, \"bytes_efficiency\": 1}},\n"
            " \"accelerators\": [{\"kind\": \"sim\", \"count\": 1, \"memory_gib\": %.17g,\n"
            "   \"link\": {\"bandwidth_gbs\": 1, \"latency_us\": 1}}],\n"
            " \"disk\": {\"count\": 2, \"capacity_gb\": 1, \"read_bandwidth_gbs\": 0.01,\n"
            "          \"write_bandwidth_gbs\": 0.005, \"latency_us\": 100}}\n",
            (double)(4 * TILE) / (double)(1u << 30));
    fclose(f);
    return path;
}

/* The accelerator writes 32 tiles and steps through them (run_rounds, no
 * CPU worker) far faster than the drives take them: every tile it evicts
 * is written back to a host capped at 8 tiles, whose own copies go to
 * disk a hundred times more slowly. Before the bound the host's peak grew
 * with the backlog (31 tiles, 23 over, in the same 0.721 s: the drives
 * set the pace either way);
 * now its write-backs wait while the host is 2 tiles over and its own
 * copies are on their way to disk, and their hops from the disk wait the
 * same way: the peak is at most the cap + 2 tiles (docs/memory.md,
 * "Overdraft"), the simulation ends (no deadlock: a waiting copy always
 * has a disk write pending as an event), and the data, computed for real
 * (simulate_exec), equals the sequential reference. */
Test(disk, simulated_overdraft_stays_within_its_bound)
{
    const char *plat = slow_disk_platform();
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = -1;
    cfg.bind = 0;
    cfg.simulate = plat;
    cfg.simulate_exec = 1;
    cfg.perfmodel_dir = "";
    cfg.host_mem = 8 * TILE;
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "tsr_init: %s", tsr_error_message());
    unlink(plat);
    int dk = disk_node();
    tsr_handle_t h[NT];
    uint64_t unbounded = rounds_past_the_bound(h);
    tsr_node_stats_t host, acc;
    cr_assert_eq(tsr_memory_node_stats(0, &host), TSR_OK);
    cr_assert_eq(tsr_memory_node_stats(1, &acc), TSR_OK);
    cr_log_info("host peak %zu of %zu (%.1f tiles over); accelerator: %llu write-backs; "
                "disk: %llu bytes in; %llu copies past the bound; %.3f s simulated",
                host.peak, host.capacity,
                ((double)host.peak - (double)host.capacity) / (double)TILE,
                (unsigned long long)acc.writebacks, (unsigned long long)tsr_memory_link_bytes(0, dk),
                (unsigned long long)unbounded, tsr_time());
    cr_assert_eq(host.capacity, 8 * TILE);
    cr_assert_geq(acc.writebacks, NT - 4, "the accelerator wrote its tiles back");
    cr_assert_geq(tsr_memory_link_bytes(0, dk), (uint64_t)(NT - 10) * TILE,
                  "the host sent the rest to disk");
    cr_assert_eq(unbounded, 0, "the host always had copies on their way to disk");
    cr_assert_leq(host.peak, host.capacity + 2 * TILE,
                  "host peak %zu: over its capacity %zu by more than 2 tiles of %zu", host.peak,
                  host.capacity, (size_t)TILE);
    for (int i = 0; i < NT; i++)
        cr_assert_eq(tsr_handle_unregister(h[i]), TSR_OK);
    cr_assert_eq(tsr_shutdown(), TSR_OK, "%s", tsr_error_message());
}

/* The environment's names for the disk tier, and the trace: the disk's
 * engine has a track with the copies both ways. */
Test(disk, environment_and_trace)
{
    make_dir();
    char trace[128];
    snprintf(trace, sizeof trace, "%s.trace.json", dir);
    setenv("TESSERA_DISK_DIR", dir, 1);
    setenv("TESSERA_LIMIT_DISK_MEM", "16", 1);  /* MiB */
    setenv("TESSERA_LIMIT_HOST_MEM", "1", 1);   /* 16 tiles of 64 KiB */
    setenv("TESSERA_TRACE", trace, 1);
    start_runtime(2, "eager", 0);
    unsetenv("TESSERA_DISK_DIR");
    unsetenv("TESSERA_LIMIT_DISK_MEM");
    unsetenv("TESSERA_LIMIT_HOST_MEM");
    unsetenv("TESSERA_TRACE");
    int dk = disk_node();
    tsr_node_stats_t s;
    cr_assert_eq(tsr_memory_node_stats(dk, &s), TSR_OK);
    cr_assert_eq(s.capacity, (size_t)16 << 20);
    cr_assert_eq(tsr_memory_node_stats(0, &s), TSR_OK);
    cr_assert_eq(s.capacity, (size_t)1 << 20);
    tsr_handle_t h[NT];
    run_rounds(h);
    for (int i = 0; i < NT; i++)
        cr_assert_eq(tsr_handle_unregister(h[i]), TSR_OK);
    stop_runtime();
    FILE *f = fopen(trace, "r");
    cr_assert(f, "the trace was written");
    static char text[1 << 22];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    unlink(trace);
    cr_assert(strstr(text, "disk copy engine") && strstr(text, "copy host->disk") &&
                  strstr(text, "copy disk->host"),
              "the disk's track has copies both ways");
    remove_dir();
}

/* Data never written makes no disk traffic; a write drops the disk copy. */
Test(disk, zeros_stay_off_disk_and_writes_free_it)
{
    make_dir();
    start_disk(1, 0, 0, 2 * TILE);
    int dk = disk_node();
    tsr_handle_t h[8];
    for (int i = 0; i < 8; i++) {
        cr_assert_eq(tsr_handle_alloc(&h[i], TILE), TSR_OK);
        uint64_t *p;
        cr_assert_eq(tsr_handle_acquire(h[i], TSR_R, (void **)&p), TSR_OK, "%s",
                     tsr_error_message());
        cr_assert_eq(p[TE - 1], 0);
        cr_assert_eq(tsr_handle_release(h[i]), TSR_OK);
    }
    cr_assert_eq(tsr_memory_link_bytes(0, dk), 0, "zeros are not written to disk");
    /* Written tiles go to disk when the host is full ... */
    for (int i = 0; i < 8; i++)
        submit_fill(h[i], (uint64_t)i + 1);
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    tsr_node_stats_t s;
    cr_assert_eq(tsr_memory_node_stats(dk, &s), TSR_OK);
    cr_assert_gt(s.used, 0, "copies on disk");
    /* ... a write elsewhere makes a disk copy invalid ... */
    int j = -1;
    for (int i = 0; i < 8 && j < 0; i++)
        if (tsr_handle_nodes(h[i]) == 1u << dk)
            j = i;
    cr_assert_geq(j, 0, "some tile is on disk only");
    uint64_t *p;
    cr_assert_eq(tsr_handle_acquire(h[j], TSR_W, (void **)&p), TSR_OK, "%s",
                 tsr_error_message());
    p[0] = 7;
    cr_assert_eq(tsr_handle_release(h[j]), TSR_OK);
    cr_assert_eq(tsr_handle_nodes(h[j]) & (1u << dk), 0, "tile %d's disk copy is dropped", j);
    /* ... and dropping the contents gives every byte of the file back. */
    for (int i = 0; i < 8; i++)
        cr_assert_eq(tsr_handle_invalidate(h[i]), TSR_OK);
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_memory_node_stats(dk, &s), TSR_OK);
    cr_assert_eq(s.used, 0, "every disk copy was freed: %zu bytes used", s.used);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(tsr_handle_unregister(h[i]), TSR_OK);
    stop_runtime();
    remove_dir();
}

/* tsr_handle_wont_use on the host above a disk tier: its copy goes to disk
 * first. A host with room for 4 tiles holds 0..3, written in that order
 * (nothing submitted uses them again: least recently used first, so tile
 * 0 would go first); tile 3 is declared cold; a fifth tile written evicts
 * it and keeps 0, 1 and 2 on the host. Every tile then reads back what
 * was written. */
Test(disk, wont_use_sends_a_host_copy_to_disk_first)
{
    make_dir();
    start_disk(1, 0, 0, 4 * TILE);
    int dk = disk_node();
    tsr_handle_t h[5];
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(tsr_handle_alloc(&h[i], TILE), TSR_OK);
        submit_fill(h[i], (uint64_t)i + 1);
        cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    }
    for (int i = 0; i < 4; i++)
        cr_assert_eq(tsr_handle_nodes(h[i]), 1u, "tile %d on the host only", i);
    cr_assert_eq(tsr_handle_wont_use(h[3]), TSR_OK);
    cr_assert_eq(tsr_handle_alloc(&h[4], TILE), TSR_OK);
    submit_fill(h[4], 5);
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_handle_nodes(h[3]), 1u << dk, "the cold tile went to disk");
    for (int i = 0; i < 3; i++)
        cr_assert_eq(tsr_handle_nodes(h[i]), 1u, "tile %d stayed on the host", i);
    for (int i = 0; i < 5; i++) {
        uint64_t *p;
        cr_assert_eq(tsr_handle_acquire(h[i], TSR_R, (void **)&p), TSR_OK, "%s",
                     tsr_error_message());
        for (int k = 0; k < TE; k++)
            cr_assert_eq(p[k], (uint64_t)(i + 1) * 1000003u + (uint64_t)k, "tile %d [%d]", i,
                         k);
        cr_assert_eq(tsr_handle_release(h[i]), TSR_OK);
    }
    for (int i = 0; i < 5; i++)
        cr_assert_eq(tsr_handle_unregister(h[i]), TSR_OK);
    stop_runtime();
    remove_dir();
}

/* ---- injected errors ------------------------------------------------------ */

/* One CPU worker, a host with room for 4 tiles, the disk tier with the
 * test switch `fault` (TESSERA_DISK_FAIL) set at init; 16 tiles, each
 * filled by a task. */
static void start_faulty(const char *fault, tsr_handle_t h[16])
{
    make_dir();
    setenv("TESSERA_DISK_FAIL", fault, 1);
    start_disk(1, 0, 0, 4 * TILE);
    unsetenv("TESSERA_DISK_FAIL");
    for (int i = 0; i < 16; i++) {
        cr_assert_eq(tsr_handle_alloc(&h[i], TILE), TSR_OK);
        submit_fill(h[i], (uint64_t)i + 1);
    }
}

/* The last error names the disk tier's file and the failed call. */
static void expect_io_message(const char *call)
{
    const char *m = tsr_error_message();
    cr_log_info("%s", m);
    cr_assert(strstr(m, call) && strstr(m, dir) && strstr(m, ".disk"),
              "the message names the file and %s: %s", call, m);
}

/* start_faulty's 16 tiles read back and unregistered: how many a failed
 * task left failed (TSR_ETASK); every other holds its fill (x_i = (i + 1)
 * 1000003 + k), or after one step of x = y (`stepped`) 4 x_i + k. */
static int failed_tiles(tsr_handle_t h[16], bool stepped)
{
    int failed = 0;
    for (int i = 0; i < 16; i++) {
        uint64_t *p;
        int rc = tsr_handle_acquire(h[i], TSR_R, (void **)&p);
        if (rc == TSR_ETASK) {
            failed++;
            continue;
        }
        cr_assert_eq(rc, TSR_OK, "tile %d: %s", i, tsr_error_message());
        for (int k = 0; k < TE; k++) {
            uint64_t x = (uint64_t)(i + 1) * 1000003u + (uint64_t)k;
            cr_assert_eq(p[k], stepped ? 4 * x + (uint64_t)k : x, "tile %d [%d]", i, k);
        }
        cr_assert_eq(tsr_handle_release(h[i]), TSR_OK);
    }
    for (int i = 0; i < 16; i++)
        cr_assert_eq(tsr_handle_unregister(h[i]), TSR_OK);
    return failed;
}

/* The third write to disk fails: one task fails, naming the file and
 * pwrite; every other tile holds what its fill task wrote (the copy whose
 * write-back failed stayed valid on the host). */
Test(disk, failed_write_loses_nothing)
{
    tsr_handle_t h[16];
    start_faulty("write:3", h);
    cr_assert_eq(tsr_wait_all(), TSR_ETASK, "the failed write-back fails a task");
    expect_io_message("pwrite");
    cr_assert_eq(failed_tiles(h, false), 1, "exactly the task that needed the room failed");
    tsr_shutdown();
    remove_dir();
}

/* The first read from disk fails, whether a task's request or a read
 * started ahead of it (a prefetch at readiness) ran it: exactly one task
 * fails, naming pread, and every other tile holds its step's result
 * (step with x = y: 4 x + k). */
Test(disk, failed_read_fails_the_task)
{
    tsr_handle_t h[16];
    start_faulty("read:1", h);
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    for (int i = 0; i < 16; i++)
        submit_step(h[i], h[i], 0);
    cr_assert_eq(tsr_wait_all(), TSR_ETASK, "a failed read fails a task");
    expect_io_message("pread");
    cr_assert_eq(failed_tiles(h, true), 1, "exactly the task that needed the failed read "
                 "failed");
    tsr_shutdown();
    remove_dir();
}

/* A disk with room for 4 tiles under a host with room for 2: the 7th tile
 * written finds the host full of copies that can go nowhere; its task
 * fails saying the disk is full (no hang), and the 6 tiles held are
 * intact. */
Test(disk, full_disk_fails_clearly)
{
    make_dir();
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 1;
    cfg.bind = 0;
    cfg.ncuda = 0;
    cfg.host_mem = 2 * TILE;
    cfg.disk_dir = dir;
    cfg.disk_mem = 4 * TILE;
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "%s", tsr_error_message());
    tsr_handle_t h[7];
    for (int i = 0; i < 7; i++) {
        cr_assert_eq(tsr_handle_alloc(&h[i], TILE), TSR_OK);
        submit_fill(h[i], (uint64_t)i + 1);
        if (i == 5)
            cr_assert_eq(tsr_wait_all(), TSR_OK, "6 tiles fit: %s", tsr_error_message());
    }
    cr_assert_eq(tsr_wait_all(), TSR_ETASK);
    const char *m = tsr_error_message();
    cr_log_info("%s", m);
    cr_assert(strstr(m, "disk full"), "the message says why: %s", m);
    /* The host holds 2 tiles and the disk 4: reading one from disk needs
     * room on the host, which is full of copies the disk cannot take.
     * Read the two on the host, then give them up to read the others. */
    int read = 0;
    bool dropped[6] = {false};
    for (int i = 0; i < 6; i++) {
        uint32_t on = tsr_handle_nodes(h[i]);
        if (on != 1u)
            continue; /* not on the host only */
        uint64_t *p;
        cr_assert_eq(tsr_handle_acquire(h[i], TSR_R, (void **)&p), TSR_OK, "%s",
                     tsr_error_message());
        for (int k = 0; k < TE; k++)
            cr_assert_eq(p[k], (uint64_t)(i + 1) * 1000003u + (uint64_t)k);
        cr_assert_eq(tsr_handle_release(h[i]), TSR_OK);
        cr_assert_eq(tsr_handle_invalidate(h[i]), TSR_OK);
        cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
        dropped[i] = true;
        read++;
    }
    cr_assert_eq(read, 2, "two tiles were on the host only");
    for (int i = 0; i < 6; i++) {
        if (dropped[i])
            continue; /* read and invalidated above */
        uint64_t *p;
        cr_assert_eq(tsr_handle_acquire(h[i], TSR_R, (void **)&p), TSR_OK, "tile %d: %s", i,
                     tsr_error_message());
        for (int k = 0; k < TE; k++)
            cr_assert_eq(p[k], (uint64_t)(i + 1) * 1000003u + (uint64_t)k);
        cr_assert_eq(tsr_handle_release(h[i]), TSR_OK);
        read++;
    }
    cr_assert_eq(read, 6, "every tile written was read back intact");
    for (int i = 0; i < 7; i++)
        cr_assert_eq(tsr_handle_unregister(h[i]), TSR_OK);
    tsr_shutdown();
    remove_dir();
}

/* ---- the file -------------------------------------------------------------- */

/* A child using the disk tier is killed with SIGKILL: nothing is left in
 * the directory (the file was unlinked when created), a file of a dead
 * process left under the tier's name pattern is removed at the next open,
 * and the next init succeeds. */
Test(disk, nothing_left_after_sigkill)
{
    make_dir();
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        tsr_config_t cfg;
        tsr_config_init(&cfg);
        cfg.ncpu = 1;
        cfg.bind = 0;
        cfg.host_mem = 2 * TILE;
        cfg.disk_dir = dir;
        cfg.disk_mem = (size_t)8 << 20;
        char ok = tsr_init(&cfg) == TSR_OK ? 'y' : 'n';
        tsr_handle_t h[8];
        for (int i = 0; ok == 'y' && i < 8; i++) {
            uint64_t *x;
            if (tsr_handle_alloc(&h[i], TILE) != TSR_OK ||
                tsr_handle_acquire(h[i], TSR_W, (void **)&x) != TSR_OK)
                ok = 'n';
            else {
                x[0] = 1;
                tsr_handle_release(h[i]);
            }
        }
        if (write(p[1], &ok, 1) != 1)
            _exit(2);
        for (;;)
            pause();
    }
    close(p[1]);
    char ok = 0;
    cr_assert_eq(read(p[0], &ok, 1), 1);
    close(p[0]);
    cr_assert_eq(ok, 'y', "the child ran with its data on disk");
    kill(pid, SIGKILL);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFSIGNALED(st));
    cr_assert_eq(dir_entries(), 0, "nothing is left after SIGKILL");

    /* What a crash between creating and unlinking would leave. */
    char stale[128];
    snprintf(stale, sizeof stale, "%s/tessera-%d-abcdef.disk", dir, (int)pid);
    FILE *f = fopen(stale, "w");
    cr_assert(f);
    fclose(f);
    cr_assert_eq(dir_entries(), 1);
    start_disk(1, 0, 0, 2 * TILE);
    cr_assert_eq(dir_entries(), 0, "the dead process's file is removed at open");
    stop_runtime();
    remove_dir();
}

/* ---- bad input -------------------------------------------------------------- */

static void refused(const char *d, size_t mem, int want, const char *what)
{
    int fds = open_fds();
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 1;
    cfg.bind = 0;
    cfg.disk_dir = d;
    cfg.disk_mem = mem;
    int rc = tsr_init(&cfg);
    cr_assert_eq(rc, want, "%s: %d (%s)", d, rc, tsr_error_message());
    const char *m = tsr_error_message();
    cr_log_info("%s", m);
    cr_assert(strstr(m, what), "the message says '%s': %s", what, m);
    cr_assert_eq(open_fds(), fds, "nothing left open");
    /* and the runtime starts afterwards */
    cfg.disk_dir = NULL;
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "%s", tsr_error_message());
    stop_runtime();
}

Test(disk, missing_directory) { refused("/nonexistent/tessera", 0, TSR_EINVAL, "/nonexistent"); }

Test(disk, not_a_directory)
{
    make_dir();
    char file[128];
    snprintf(file, sizeof file, "%s/plain", dir);
    FILE *f = fopen(file, "w");
    cr_assert(f);
    fclose(f);
    refused(file, 0, TSR_EINVAL, "not a writable directory");
    unlink(file);
    remove_dir();
}

Test(disk, capacity_beyond_free_space)
{
    make_dir();
    refused(dir, (size_t)1 << 62, TSR_ENOMEM, "free");
    remove_dir();
}

Test(disk, bad_fault_switch)
{
    make_dir();
    setenv("TESSERA_DISK_FAIL", "write:zero", 1);
    refused(dir, (size_t)1 << 20, TSR_EINVAL, "TESSERA_DISK_FAIL");
    unsetenv("TESSERA_DISK_FAIL");
    remove_dir();
}
