/* tests/lab/test_dot.c — the reader of DOT task graphs (lab/read_dot.c):
 * node size as flops, an edge with a size as a data item, one without as
 * a dependency, tasks in a stable topological order; comments, quoting and
 * attributes over several lines; malformed graphs and cycles refused with
 * the line. */
#include "util.h"

static const char *const sample =
    "// as DAGGEN writes it, and more\n"            /* 1 */
    "digraph G {\n"
    "  root [size=\"0\"];\n"
    "  a [size=\"1e9\", alpha=\"0.1\"]\n"
    "  /* a comment over\n"
    "     two lines */\n"
    "  b [size=2000000000]\n"
    "  c\n"
    "  root -> a\n"
    "  a -> b [size=\"1e6\"];\n"                    /* 10 */
    "  a -> c -> d [size=0]\n"
    "  \"b\" -> end [size=\"8\"]\n"
    "  d -> end\n"
    "  end [size=\n"
    "       \"5\"]\n"
    "  node [shape=box]; rankdir = LR\n"
    "}\n";

Test(lab_dot, sample)
{
    tsr_lab_graph_t *g = read_ok(sample, "dot");
    cr_assert_eq(g->ntasks, 6);
    const char *names[] = {"root", "a", "b", "c", "d", "end"};
    for (int i = 0; i < 6; i++) {
        cr_assert_str_eq(g->task[i].name, names[i], "task %d", i);
        cr_assert_eq(g->task[i].id, (uint64_t)i, "ids in order of appearance");
        cr_assert_lt(g->task[i].seconds[TSR_DEVICE_CPU], 0, "DOT has no durations");
    }
    cr_assert_float_eq(g->task[0].flops, 0, 0);
    cr_assert_float_eq(g->task[1].flops, 1e9, 0);
    cr_assert_float_eq(g->task[2].flops, 2e9, 0);
    cr_assert_lt(g->task[3].flops, 0, "c has no size");
    cr_assert_float_eq(g->task[5].flops, 5, 0);
    cr_assert_eq(g->ndata, 2);
    ASSERT_ACCESSES(g, 1, "a->b:W:1000000");
    ASSERT_ACCESSES(g, 2, "a->b:R:1000000,b->end:W:8");
    ASSERT_ACCESSES(g, 5, "b->end:R:8");
    ASSERT_DEPS(g, 1, "0");
    ASSERT_DEPS(g, 2, "");
    ASSERT_DEPS(g, 3, "1");
    ASSERT_DEPS(g, 4, "3");
    ASSERT_DEPS(g, 5, "4");
    ASSERT_ALL_DEPS(g, 2, "1");
    ASSERT_ALL_DEPS(g, 5, "2,4");
    tsr_lab_free(g);
}

/* b and c appear before a, but a comes first: b follows it. */
Test(lab_dot, topological_order_stable_by_appearance)
{
    tsr_lab_graph_t *g = read_ok("digraph { b -> c; x; a -> b; }", "dot");
    cr_assert_eq(g->ntasks, 4);
    cr_assert_str_eq(g->task[0].name, "x", "x is ready first (appears before a)");
    cr_assert_str_eq(g->task[1].name, "a");
    cr_assert_str_eq(g->task[2].name, "b");
    cr_assert_str_eq(g->task[3].name, "c");
    ASSERT_DEPS(g, 2, "3");   /* b follows a, whose id (appearance: b c x a) is 3 */
    tsr_lab_free(g);
}

Test(lab_dot, malformed)
{
    read_bad("digraph {\n a -> b\n b -> a\n}\n", "dot", 2, "cycle");
    read_bad("digraph {\n a -> a\n}\n", "dot", 2, "itself");
    read_bad("graph {\n a -- b\n}\n", "dot", 1, "undirected");
    read_bad("digraph {\n a -- b\n}\n", "dot", 2, "undirected");
    read_bad("digraph {\n a -> b [size=\"x\"]\n}\n", "dot", 2, "size");
    read_bad("digraph {\n a -> b [size=-3]\n}\n", "dot", 2, "size");
    read_bad("digraph {\n a [label=\"open\n]\n}\n", "dot", 2, "does not end");
    read_bad("digraph {\n a -> b\n", "dot", 3, "'}' is missing");
    read_bad("digraph {\n /* never closed\n", "dot", 2, "comment");
    read_bad("digraph {\n subgraph s { a }\n}\n", "dot", 2, "subgraph");
    read_bad("digraph {\n a:p -> b\n}\n", "dot", 2, "':'");
    read_bad("digraph {\n a -> \n}\n", "dot", 3, "node expected");
    read_bad("digraph {\n a [size]\n}\n", "dot", 2, "'='");
    read_bad("digraph { a }\n} extra\n", "dot", 2, "after");
    read_bad("strict digraph x a {}", "dot", 1, "'{'");
}

Test(lab_dot, every_prefix)
{
    read_prefixes(sample, "dot");
}
