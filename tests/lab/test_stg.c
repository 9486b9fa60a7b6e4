/* tests/lab/test_stg.c — the reader of Standard Task Graph files
 * (lab/read_stg.c): the dummy entry and exit kept as zero-time tasks, times
 * in ms, preds as explicit dependencies; the variant with communication
 * costs (an edge with a cost becomes a data item); malformed files refused
 * with the line. */
#include "util.h"

/* t1 (10) and t2 (20) after the entry; t3 (5) after t1; t4 (7) after t2
 * and t3; the exit after t4. */
static const char *const plain = "      4\n"
                                 "      0      0      0\n"
                                 "      1     10      1      0\n"
                                 "      2     20      1      0\n"
                                 "      3      5      1      1\n"
                                 "      4      7      2      2      3\n"
                                 "      5      0      1      4\n"
                                 "#------------------------------\n"
                                 "# a note, as the set ends its files\n";

Test(lab_stg, plain)
{
    tsr_lab_graph_t *g = read_ok(plain, "stg");
    cr_assert_eq(g->ntasks, 6, "4 tasks, the entry and the exit");
    cr_assert_eq(g->ndata, 0);
    cr_assert_float_eq(g->time_unit_s, 1e-3, 1e-15);
    const double ms[] = {0, 10, 20, 5, 7, 0};
    for (int i = 0; i < 6; i++) {
        char name[8];
        snprintf(name, sizeof name, "t%d", i);
        cr_assert_str_eq(g->task[i].name, name);
        cr_assert_eq(g->task[i].id, (uint64_t)i);
        cr_assert_float_eq(g->task[i].seconds[TSR_DEVICE_CPU], ms[i] * 1e-3, 1e-12);
        cr_assert_lt(g->task[i].seconds[TSR_DEVICE_CUDA], 0);
        cr_assert_eq(g->task[i].naccess, 0);
    }
    ASSERT_DEPS(g, 0, "");
    ASSERT_DEPS(g, 1, "0");
    ASSERT_DEPS(g, 3, "1");
    ASSERT_DEPS(g, 4, "2,3");
    ASSERT_DEPS(g, 5, "4");
    tsr_lab_free(g);
}

/* The longest path is entry, t2 (20), t4 (7), exit: 27 ms; the other one,
 * t1, t3, t4, is 22 ms. The work is 10 + 20 + 5 + 7 = 42 ms. */
Test(lab_stg, critical_path_and_work)
{
    tsr_lab_graph_t *g = read_ok(plain, "stg");
    cr_assert_float_eq(tsr_lab_critical_path(g, TSR_DEVICE_CPU), 0.027, 1e-12);
    cr_assert_float_eq(tsr_lab_total_work(g, TSR_DEVICE_CPU), 0.042, 1e-12);
    cr_assert_float_eq(tsr_lab_critical_path(g, TSR_DEVICE_CUDA), 0, 0);
    cr_assert_float_eq(tsr_lab_total_work(g, TSR_DEVICE_CUDA), 0, 0);
    tsr_lab_free(g);
}

/* With costs: t1 after the entry (cost 0: a dependency), t2 after t1 with
 * 100 bytes (an item t1 writes and t2 reads), the exit after both. */
static const char *const comm = "2\n"
                                 "0 0 0\n"
                                 "1 4 1\n"
                                 "  0 0\n"
                                 "2 6 1\n"
                                 "  1 100\n"
                                 "3 0 2\n"
                                 "  1 0\n"
                                 "  2 0\n"
                                 "# note\n";

Test(lab_stg, communication_costs)
{
    tsr_lab_graph_t *g = read_ok(comm, "stg");
    cr_assert_eq(g->ntasks, 4);
    cr_assert_eq(g->ndata, 1);
    ASSERT_DEPS(g, 1, "0");
    ASSERT_DEPS(g, 2, "");
    ASSERT_DEPS(g, 3, "1,2");
    ASSERT_ACCESSES(g, 1, "1->2:W:100");
    ASSERT_ACCESSES(g, 2, "1->2:R:100");
    ASSERT_ALL_DEPS(g, 2, "1");
    cr_assert_float_eq(tsr_lab_critical_path(g, TSR_DEVICE_CPU), 0.010, 1e-12);
    tsr_lab_free(g);
}

Test(lab_stg, malformed)
{
    read_bad("", "stg", 1, "empty");
    read_bad("x\n", "stg", 1, "integer");
    read_bad("2 3\n", "stg", 1, "more numbers");
    read_bad("1\n0 0 0\n1 5 2 0\n2 0 1 1\n", "stg", 3, "2 preds announced, 1 given");
    read_bad("1\n0 0 0\n2 5 1 0\n1 0 1 1\n", "stg", 3, "where task 1 should be");
    read_bad("1\n0 0 0\n1 5 1 7\n2 0 1 1\n", "stg", 3, "pred 7 is no task");
    read_bad("1\n0 0 0\n1 fast 1 0\n2 0 1 1\n", "stg", 3, "time");
    read_bad("1\n0 0 0\n1 5 1\n", "stg", 3, "ends in the preds");
    read_bad("1\n0 0 0\n1 5 1 0\n", "stg", 3, "the file ends");
    read_bad("1\n0 0 0\n1 5 1 0\n2 0 1 1\n3 0 0\n", "stg", 5, "more than");
    read_bad("1\n0 0 0\n1 5 1 0\n2 0 1 x\n", "stg", 4, "x");
    /* a count the file cannot hold: refused at its end, nothing allocated */
    read_bad("9999999\n0 0 0\n", "stg", 2, "the file ends");
    read_bad("999999999999\n0 0 0\n", "stg", 1, "more than");
    read_bad("1\n0 0 0\n1 5 99999999999 0\n", "stg", 3, "preds");
    read_bad("2\n0 0 0\n1 1 1 2\n2 1 1 1\n3 0 2 1 2\n", "stg", 3, "cycle");
    /* a duration the tessera format could not say (over 1e9 s: a cost of
     * 2.2e36 ms): refused at the reading, as every format's, so that what
     * was read always writes and reads back (a fuzzer's find) */
    read_bad("1\n0 2222222222222222222222222222222222225 0\n1 5 1 0\n2 0 1 1\n", "stg", 2,
             "a duration is 0 to 1e+09 s");
}

Test(lab_stg, every_prefix)
{
    read_prefixes(plain, "stg");
    read_prefixes(comm, "stg");
}
