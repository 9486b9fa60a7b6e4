/* tests/lab/test_wfcommons.c — the reader of WfCommons workflows
 * (lab/read_wfcommons.c), schemas 1.4 and 1.5: files as data items (output
 * W, input R, an input nobody writes read only), parents as dependencies,
 * runtimes as CPU seconds, a stable topological order; malformed workflows
 * refused (JSON errors with their line, content errors naming the task). */
#include "util.h"

/* merge (t3) is listed first but follows split (t1, by id) and work_1 (t2,
 * by name); raw is an initial input of split and work_1. */
static const char *const v14 =
    "{\"name\": \"w\", \"schemaVersion\": \"1.4\", \"workflow\": {\"tasks\": [\n"
    " {\"name\": \"merge_1\", \"id\": \"t3\", \"category\": \"merge\", \"runtimeInSeconds\": 3.5,\n"
    "  \"parents\": [\"t1\", \"work_1\"],\n"
    "  \"files\": [{\"link\": \"input\", \"name\": \"a.dat\", \"sizeInBytes\": 100},\n"
    "            {\"link\": \"input\", \"name\": \"b.dat\", \"sizeInBytes\": 200},\n"
    "            {\"link\": \"output\", \"name\": \"out\", \"sizeInBytes\": 0}]},\n"
    " {\"name\": \"split_1\", \"id\": \"t1\", \"category\": \"split\", \"runtime\": 1.25,\n"
    "  \"files\": [{\"link\": \"input\", \"name\": \"raw\", \"size\": 1000},\n"
    "            {\"link\": \"output\", \"name\": \"a.dat\", \"size\": 100}]},\n"
    " {\"name\": \"work_1\", \"id\": \"t2\", \"runtimeInSeconds\": 2, \"parents\": [],\n"
    "  \"files\": [{\"link\": \"input\", \"name\": \"raw\", \"sizeInBytes\": 1000},\n"
    "            {\"link\": \"output\", \"name\": \"b.dat\", \"sizeInBytes\": 200}]}\n"
    "]}}\n";

Test(lab_wfcommons, schema_1_4)
{
    tsr_lab_graph_t *g = read_ok(v14, "wfcommons");
    cr_assert_eq(g->ntasks, 3);
    cr_assert_eq(g->ndata, 4);
    cr_assert_str_eq(g->task[0].name, "split", "the category names the task's kind");
    cr_assert_str_eq(g->task[1].name, "work_1", "no category: its name");
    cr_assert_str_eq(g->task[2].name, "merge");
    cr_assert_eq(g->task[2].id, 0, "ids are the places in the file");
    cr_assert_float_eq(g->task[0].seconds[TSR_DEVICE_CPU], 1.25, 0);
    cr_assert_float_eq(g->task[1].seconds[TSR_DEVICE_CPU], 2, 0);
    cr_assert_float_eq(g->task[2].seconds[TSR_DEVICE_CPU], 3.5, 0);
    cr_assert_lt(g->task[2].seconds[TSR_DEVICE_CUDA], 0);
    ASSERT_ACCESSES(g, 0, "raw:R:1000,a.dat:W:100");
    ASSERT_ACCESSES(g, 1, "raw:R:1000,b.dat:W:200");
    ASSERT_ACCESSES(g, 2, "a.dat:R:100,b.dat:R:200,out:W:1");
    ASSERT_DEPS(g, 2, "1,2");
    ASSERT_DEPS(g, 0, "");
    /* 2 (work_1) + 3.5 (merge); work 1.25 + 2 + 3.5 */
    cr_assert_float_eq(tsr_lab_critical_path(g, TSR_DEVICE_CPU), 5.5, 1e-12);
    cr_assert_float_eq(tsr_lab_total_work(g, TSR_DEVICE_CPU), 6.75, 1e-12);
    tsr_lab_free(g);
}

static const char *const v15 =
    "{\"name\": \"w\", \"schemaVersion\": \"1.5\", \"workflow\": {\n"
    " \"specification\": {\n"
    "  \"tasks\": [{\"name\": \"gen\", \"id\": \"g1\", \"parents\": [], \"children\": [\"u1\"],\n"
    "             \"inputFiles\": [], \"outputFiles\": [\"f1\"]},\n"
    "            {\"name\": \"use\", \"id\": \"u1\", \"parents\": [\"g1\"],\n"
    "             \"inputFiles\": [\"f1\", \"f0\"], \"outputFiles\": []}],\n"
    "  \"files\": [{\"id\": \"f0\", \"sizeInBytes\": 5}, {\"id\": \"f1\", \"sizeInBytes\": 4096}]},\n"
    " \"execution\": {\"makespanInSeconds\": 3,\n"
    "  \"tasks\": [{\"id\": \"u1\", \"runtimeInSeconds\": 2}, {\"id\": \"g1\", \"runtimeInSeconds\": 1}]}\n"
    "}}\n";

Test(lab_wfcommons, schema_1_5)
{
    tsr_lab_graph_t *g = read_ok(v15, NULL);
    cr_assert_str_eq(g->format, "wfcommons", "told by its first byte");
    cr_assert_eq(g->ntasks, 2);
    cr_assert_str_eq(g->task[0].name, "gen");
    cr_assert_str_eq(g->task[1].name, "use");
    ASSERT_ACCESSES(g, 0, "f1:W:4096");
    ASSERT_ACCESSES(g, 1, "f1:R:4096,f0:R:5");
    ASSERT_DEPS(g, 1, "0");
    cr_assert_float_eq(g->task[0].seconds[TSR_DEVICE_CPU], 1, 0);
    cr_assert_float_eq(g->task[1].seconds[TSR_DEVICE_CPU], 2, 0);
    tsr_lab_free(g);
}

/* Without parents, a reader still comes after the writer of its file. */
Test(lab_wfcommons, file_order_without_parents)
{
    tsr_lab_graph_t *g = read_ok(
        "{\"workflow\": {\"tasks\": [\n"
        " {\"name\": \"b\", \"files\": [{\"link\": \"input\", \"name\": \"x\", \"size\": 3}]},\n"
        " {\"name\": \"a\", \"files\": [{\"link\": \"output\", \"name\": \"x\", \"size\": 3}]}]}}",
        "wfcommons");
    cr_assert_str_eq(g->task[0].name, "a");
    cr_assert_str_eq(g->task[1].name, "b");
    ASSERT_DEPS(g, 1, "");
    ASSERT_ALL_DEPS(g, 1, "1");
    tsr_lab_free(g);
}

Test(lab_wfcommons, malformed)
{
    read_bad("{\"workflow\": {\"tasks\": [\n{\"name\": \"a\",\n \"parents\": [zz]}]}}",
             "wfcommons", 0, "line 3");
    read_bad("{\"workflow\": {\"tasks\": [{\"name\": \"a\", \"parents\": [\"zz\"]}]}}",
             "wfcommons", 0, "parent 'zz' is no task");
    read_bad("{\"workflow\": {\"tasks\": [{\"name\": \"a\", \"parents\": [\"b\"]},"
             " {\"name\": \"b\", \"parents\": [\"a\"]}]}}",
             "wfcommons", 0, "cycle");
    read_bad("{\"workflow\": {\"tasks\": [{\"name\": \"a\", \"files\": [{\"link\": \"input\","
             " \"name\": \"x\", \"size\": -4}]}]}}",
             "wfcommons", 0, "size");
    read_bad("{\"workflow\": {\"tasks\": [{\"name\": \"a\", \"files\": [{\"link\": \"both\","
             " \"name\": \"x\"}]}]}}",
             "wfcommons", 0, "neither input nor output");
    read_bad("{\"workflow\": {\"tasks\": [{\"name\": \"a\", \"runtime\": \"long\"}]}}",
             "wfcommons", 0, "runtime");
    read_bad("{\"workflow\": {\"tasks\": [{\"name\": \"a\"}, {\"name\": \"a\"}]}}",
             "wfcommons", 0, "twice");
    read_bad("{\"tasks\": []}", "wfcommons", 0, "workflow");
    read_bad("{\"workflow\": {\"specification\": {\"tasks\": [{\"id\": \"a\","
             " \"inputFiles\": [\"nope\"]}]}}}",
             "wfcommons", 0, "not in specification.files");
    read_bad("{\"workflow\": {\"specification\": {\"tasks\": []}, \"execution\":"
             " {\"tasks\": [{\"id\": \"ghost\", \"runtimeInSeconds\": 1}]}}}",
             "wfcommons", 0, "ghost");
}

Test(lab_wfcommons, every_prefix)
{
    read_prefixes(v15, "wfcommons");
}
