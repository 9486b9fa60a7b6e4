/* tests/lab/test_rec.c — the reader of StarPU's tasks.rec (lab/read_rec.c):
 * records taken in SubmitOrder, Handles/Modes/Sizes as items and accesses,
 * DependsOn as explicit dependencies, times in ms, WontUse records as
 * events; malformed records refused with the line. */
#include "util.h"

static const char *const sample =
    "# written by hand, in StarPU's field names\n"
    "Name: potrf_name\n"                 /* 2 */
    "Model: potrf\n"
    "JobId: 10\n"
    "SubmitOrder: 2\n"
    "Priority: 3\n"
    "Handles: 7f00a0 7f00b0\n"
    "Modes: RW R\n"
    "Sizes: 800 0\n"
    "StartTime: 1.5\n"
    "EndTime: 4.0\n"
    "GFlop: 0.25\n"
    "WorkerId: 2\n"
    "MemoryNode: 0\n"
    "Footprint: abc\n"
    "Tag: 0\n"
    "\n"
    "Name: init\n"                       /* 18 */
    "JobId: 9\n"
    "SubmitOrder: 1\n"
    "Handles: 7f00a0\n"
    "Modes: W\n"
    "Sizes: 800\n"
    "\n"
    "Control: WontUse\n"
    "JobId: 12\n"
    "SubmitOrder: 3\n"
    "Handles: 7f00b0\n"
    "\n"
    "\n"
    "Name: trsm\n"
    "Model: trsm\n"
    "JobId: 11\n"
    "SubmitOrder: 4\n"
    "DependsOn: 10 9\n"
    "Handles: 7f00a0 7f00c0\n"
    "Modes: R RW|COMMUTE\n"
    "Sizes: 800 16\n"
    "WorkerId: 5\n"
    "MemoryNode: 1\n"
    "StartTime: 5\n"
    "EndTime: 7\n";

Test(lab_rec, sample)
{
    tsr_lab_graph_t *g = read_ok(sample, "rec");
    cr_assert_eq(g->ntasks, 3);
    cr_assert_float_eq(g->time_unit_s, 1e-3, 1e-15);
    /* SubmitOrder: init (1), potrf (2), trsm (4) */
    cr_assert_str_eq(g->task[0].name, "init");
    cr_assert_str_eq(g->task[1].name, "potrf", "Model wins over Name");
    cr_assert_str_eq(g->task[2].name, "trsm");
    cr_assert_eq(g->task[0].id, 9);
    cr_assert_eq(g->task[1].id, 10);
    cr_assert_eq(g->task[2].id, 11);
    ASSERT_ACCESSES(g, 0, "7f00a0:W:800");
    ASSERT_ACCESSES(g, 1, "7f00a0:RW:800,7f00b0:R:1");
    ASSERT_ACCESSES(g, 2, "7f00a0:R:800,7f00c0:COMMUTE:16");
    cr_assert_eq(g->ndata, 3);
    ASSERT_DEPS(g, 0, "");
    ASSERT_DEPS(g, 1, "");
    ASSERT_DEPS(g, 2, "9,10");
    /* potrf: 0.25 GFlop, prio 3, worker 2 on main RAM (a CPU), 1.5 to 4 ms */
    const tsr_lab_task_t *p = &g->task[1];
    cr_assert_float_eq(p->flops, 2.5e8, 1e-3);
    cr_assert_eq(p->priority, 3);
    cr_assert_eq(p->worker, 2);
    cr_assert_eq(p->device_kind, TSR_DEVICE_CPU);
    cr_assert_float_eq(p->start_s, 1.5e-3, 1e-12);
    cr_assert_float_eq(p->end_s, 4e-3, 1e-12);
    cr_assert_float_eq(p->seconds[TSR_DEVICE_CPU], 2.5e-3, 1e-12);
    cr_assert_lt(p->seconds[TSR_DEVICE_CUDA], 0);
    /* trsm on memory node 1: kind unknown, times kept */
    const tsr_lab_task_t *t = &g->task[2];
    cr_assert_eq(t->device_kind, -1);
    cr_assert_eq(t->worker, 5);
    cr_assert_lt(t->seconds[TSR_DEVICE_CPU], 0);
    cr_assert_float_eq(t->start_s, 5e-3, 1e-12);
    cr_assert_lt(g->task[0].flops, 0, "no GFlop: unknown");
    /* the WontUse record (SubmitOrder 3) comes before trsm */
    cr_assert_eq(g->nevents, 1);
    cr_assert_eq(g->event[0].kind, TSR_LAB_WONT_USE);
    cr_assert_eq(g->event[0].before, 2);
    cr_assert_eq(g->event[0].data, data_named(g, "7f00b0"));
    tsr_lab_free(g);
}

Test(lab_rec, jobid_orders_without_submitorder)
{
    tsr_lab_graph_t *g = read_ok("JobId: 5\nName: b\n\nJobId: 3\nName: a\n"
                                 "Handles: 1\nModes: W\n",
                                 "rec");
    cr_assert_str_eq(g->task[0].name, "a");
    cr_assert_str_eq(g->task[1].name, "b");
    ASSERT_ACCESSES(g, 0, "1:W:1");
    tsr_lab_free(g);
}

Test(lab_rec, malformed)
{
    read_bad("JobId: 1\nName: a\n\nJobId: 2\nName: b\nDependsOn: 42\n", "rec", 6,
             "job '42'");
    /* job 2 is submitted after job 1: job 1 cannot depend on it */
    read_bad("JobId: 1\nSubmitOrder: 1\nDependsOn: 2\n\nJobId: 2\nSubmitOrder: 2\n", "rec", 3,
             "job '2'");
    read_bad("JobId: 1\nHandles: a0\nModes: RX\n", "rec", 3, "unknown mode");
    read_bad("JobId: 1\nHandles: a0\nModes: R|BOGUS\n", "rec", 3, "unknown mode");
    read_bad("JobId: 1\nHandles: a0 b0\nModes: R\n", "rec", 3, "1 Modes for 2 Handles");
    read_bad("JobId: 1\nHandles: a0\nModes: R\nSizes: 8 8\n", "rec", 4, "Sizes");
    read_bad("JobId: 1\nHandles: a0\nModes: R\nSizes: big\n", "rec", 4, "size");
    read_bad("JobId: 1\nHandles: zz\nModes: R\n", "rec", 2, "hexadecimal");
    read_bad("JobId: 1\nHandles: a0\n", "rec", 2, "without Modes");
    read_bad("\nName: a\nModel: a\n", "rec", 2, "without JobId");
    read_bad("JobId: 1\nthis line has no field\n", "rec", 2, "Field: value");
    read_bad("JobId: 1\nGFlop: lots\n", "rec", 2, "GFlop");
    read_bad("JobId: 1\nStartTime: 5\nEndTime: 2\n", "rec", 3, "before");
    read_bad("JobId: 1\nSubmitOrder: 99999999999999999999999\n", "rec", 2, "SubmitOrder");
    read_bad("JobId: 1\n\nJobId: 1\n", "rec", 3, "twice");
    read_bad("Control: WontUse\nJobId: 1\n", "rec", 1, "without Handles");
}

Test(lab_rec, every_prefix)
{
    read_prefixes(sample, "rec");
}
