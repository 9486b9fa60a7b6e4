/* tests/lab/test_tessera.c — the reader of "tessera-graph 1" (lab/
 * read_tessera.c): a file written by hand read to the exact tasks, items,
 * accesses, dependencies, runs and events worked out here; malformed lines
 * refused with their line number; every prefix read without a read past
 * the buffer. */
#include "util.h"

static const char *const sample =
    "tessera-graph 1\n"
    "task 1 init prio=0 flops=-1 bytes=64 access=7:W:64 deps=\n"
    "task 2 gemm prio=5 flops=2e6 bytes=96 access=7:R:64,8:RW:32 deps=1\n"
    "wont_use 7\n"
    "task 3 acc prio=0 flops=10 bytes=32 access=8:COMMUTE:32 future=x deps=2\n"
    "# a comment\n"
    "\n"
    "task 4 acc prio=0 flops=10 bytes=32 access=8:COMMUTE:32 deps=2\r\n"
    "task 5 read prio=-1 flops=0 bytes=32 access=8:R:32,9:SCRATCH:0 deps=3,4\n"
    "invalidate 8\n"
    "ran 2 worker=3 device=cuda start_ns=1000 end_ns=4000 status=0\n"
    "ran 1 worker=0 device=cpu start_ns=0 end_ns=500 status=0\n"
    "ran 3 worker=1 device=sim start_ns=10 end_ns=20 status=0\n"
    "ran 4 worker=0 device=cpu start_ns=5000 end_ns=6000 status=1\n"
    "later_kind a b c\n";

Test(lab_tessera, sample_tasks_items_and_accesses)
{
    tsr_lab_graph_t *g = read_ok(sample, "tessera");
    cr_assert_str_eq(g->format, "tessera");
    cr_assert_eq(g->ntasks, 5);
    cr_assert_eq(g->ndata, 3);
    cr_assert_float_eq(g->time_unit_s, 1e-9, 1e-20);
    const char *names[] = {"init", "gemm", "acc", "acc", "read"};
    for (int i = 0; i < 5; i++) {
        cr_assert_str_eq(g->task[i].name, names[i]);
        cr_assert_eq(g->task[i].id, (uint64_t)i + 1);
    }
    cr_assert_eq(g->task[1].priority, 5);
    cr_assert_eq(g->task[4].priority, -1);
    cr_assert_float_eq(g->task[1].flops, 2e6, 0);
    cr_assert_float_eq(g->task[0].flops, -1, 0);
    ASSERT_ACCESSES(g, 0, "7:W:64");
    ASSERT_ACCESSES(g, 1, "7:R:64,8:RW:32");
    ASSERT_ACCESSES(g, 2, "8:COMMUTE:32");
    /* the SCRATCH item of size 0 is given 1 byte */
    ASSERT_ACCESSES(g, 4, "8:R:32,9:SCRATCH:1");
    cr_assert_eq(g->data[data_named(g, "9")].size, 1);
    ASSERT_DEPS(g, 0, "");
    ASSERT_DEPS(g, 1, "1");
    ASSERT_DEPS(g, 2, "2");
    ASSERT_DEPS(g, 4, "3,4");
    tsr_lab_free(g);
}

Test(lab_tessera, sample_runs_and_events)
{
    tsr_lab_graph_t *g = read_ok(sample, "tessera");
    /* gemm ran on a GPU for 3000 ns */
    cr_assert_eq(g->task[1].worker, 3);
    cr_assert_eq(g->task[1].device_kind, TSR_DEVICE_CUDA);
    cr_assert_float_eq(g->task[1].start_s, 1e-6, 1e-15);
    cr_assert_float_eq(g->task[1].end_s, 4e-6, 1e-15);
    cr_assert_float_eq(g->task[1].seconds[TSR_DEVICE_CUDA], 3e-6, 1e-15);
    cr_assert_lt(g->task[1].seconds[TSR_DEVICE_CPU], 0);
    cr_assert_float_eq(g->task[0].seconds[TSR_DEVICE_CPU], 5e-7, 1e-15);
    /* "sim": the kind is unknown, the times kept */
    cr_assert_eq(g->task[2].device_kind, -1);
    cr_assert_float_eq(g->task[2].start_s, 1e-8, 1e-15);
    cr_assert_lt(g->task[2].seconds[TSR_DEVICE_CPU], 0);
    cr_assert_lt(g->task[2].seconds[TSR_DEVICE_CUDA], 0);
    /* a failed run (status 1) gives no duration */
    cr_assert_eq(g->task[3].device_kind, TSR_DEVICE_CPU);
    cr_assert_lt(g->task[3].seconds[TSR_DEVICE_CPU], 0);
    cr_assert_float_eq(g->task[3].end_s, 6e-6, 1e-15);
    /* read never ran */
    cr_assert_eq(g->task[4].worker, -1);
    cr_assert_lt(g->task[4].start_s, 0);

    cr_assert_eq(g->nevents, 2);
    cr_assert_eq(g->event[0].kind, TSR_LAB_WONT_USE);
    cr_assert_eq(g->event[0].before, 2, "wont_use 7 comes before task 3 (index 2)");
    cr_assert_eq(g->event[0].data, data_named(g, "7"));
    cr_assert_eq(g->event[1].kind, TSR_LAB_INVALIDATE);
    cr_assert_eq(g->event[1].before, 5, "after the last task");
    cr_assert_eq(g->event[1].data, data_named(g, "8"));
    tsr_lab_free(g);
}

/* The STF rules of docs/lab.md worked out by hand for the sample: the
 * commuting tasks 3 and 4 follow the writer 2, not each other; the reader 5
 * follows the writer and the whole commuting group. */
Test(lab_tessera, implied_dependencies)
{
    tsr_lab_graph_t *g = read_ok(sample, "tessera");
    ASSERT_ALL_DEPS(g, 0, "");
    ASSERT_ALL_DEPS(g, 1, "1");
    ASSERT_ALL_DEPS(g, 2, "2");
    ASSERT_ALL_DEPS(g, 3, "2");
    ASSERT_ALL_DEPS(g, 4, "2,3,4");
    /* critical path on CPUs: only init has a CPU duration; on GPUs gemm */
    cr_assert_float_eq(tsr_lab_critical_path(g, TSR_DEVICE_CPU), 5e-7, 1e-15);
    cr_assert_float_eq(tsr_lab_critical_path(g, TSR_DEVICE_CUDA), 3e-6, 1e-15);
    cr_assert_float_eq(tsr_lab_total_work(g, TSR_DEVICE_CPU), 5e-7, 1e-15);
    tsr_lab_free(g);
}

Test(lab_tessera, readers_writers_and_writers_after_readers)
{
    tsr_lab_graph_t *g = read_ok("tessera-graph 1\n"
                                 "task 1 w access=1:W:8 deps=\n"
                                 "task 2 r access=1:R:8 deps=\n"
                                 "task 3 r access=1:R:8 deps=\n"
                                 "task 4 w access=1:RW:8 deps=\n"
                                 "task 5 s access=1:SCRATCH:8 deps=\n",
                                 "tessera");
    ASSERT_ALL_DEPS(g, 1, "1");
    ASSERT_ALL_DEPS(g, 2, "1");
    ASSERT_ALL_DEPS(g, 3, "1,2,3");
    ASSERT_ALL_DEPS(g, 4, "");
    tsr_lab_free(g);
}

Test(lab_tessera, malformed)
{
    read_bad("", "tessera", 1, "empty");
    read_bad("tessera-graph 2\n", "tessera", 1, "version");
    read_bad("digraph {}\n", "tessera", 1, "not a tessera graph");
    read_bad("tessera-graph 1\ntask 1 a access=7:R\n", "tessera", 2, "HANDLE:MODE:SIZE");
    read_bad("tessera-graph 1\ntask 1 a access=7:RX:8\n", "tessera", 2, "unknown mode");
    read_bad("tessera-graph 1\ntask 1 a access=7:R:abc\n", "tessera", 2, "size");
    read_bad("tessera-graph 1\ntask 1 a access=x:R:8\n", "tessera", 2, "handle");
    read_bad("tessera-graph 1\ntask 1 a access=7:R:99999999999999999999\n", "tessera", 2,
             "size");
    read_bad("tessera-graph 1\n\ntask 1 a deps=2\ntask 2 b deps=\n", "tessera", 3,
             "not defined before");
    read_bad("tessera-graph 1\ntask 1 a deps=1\n", "tessera", 2, "itself");
    read_bad("tessera-graph 1\ntask 1 a\ntask 2 b deps=1,\n", "tessera", 3, "no task id");
    read_bad("tessera-graph 1\ntask 1 a\ntask 1 b\n", "tessera", 3, "twice");
    read_bad("tessera-graph 1\ntask 99999999999999999999999 a\n", "tessera", 2, "ID");
    read_bad("tessera-graph 1\ntask 1\n", "tessera", 2, "without a name");
    read_bad("tessera-graph 1\ntask 1 a prio=high\n", "tessera", 2, "prio");
    read_bad("tessera-graph 1\ntask 1 a flops=nan\n", "tessera", 2, "flops");
    read_bad("tessera-graph 1\ntask 1 a oops\n", "tessera", 2, "key=value");
    read_bad("tessera-graph 1\nran 1 worker=0\n", "tessera", 2, "no task 1");
    read_bad("tessera-graph 1\ntask 1 a\nran 1 start_ns=9 end_ns=3\n", "tessera", 3, "before");
    read_bad("tessera-graph 1\nwont_use x3\n", "tessera", 2, "numeric handle");
    read_bad("tessera-graph 1\nTASK 1 a\n", "tessera", 2, "line kind");
    read_bad("tessera-graph 1\ntask 1 a\nran 1 worker=0 start_ns=5 end_ns=9\nran 1 end_ns=3\n",
             "tessera", 4, "ran twice");
}

Test(lab_tessera, every_prefix)
{
    read_prefixes(sample, "tessera");
}
