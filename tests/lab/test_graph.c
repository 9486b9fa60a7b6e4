/* tests/lab/test_graph.c — what lab/graph.c does for every reader: telling
 * a file's format from its first bytes or its name, reading from a path
 * (TSR_EIO when it cannot), refusing unknown formats, the critical path and
 * total work through the dependencies the accesses imply. */
#include <unistd.h>

#include "util.h"

Test(lab_graph, detects_formats)
{
    struct {
        const char *text, *format;
    } cases[] = {
        {"tessera-graph 1\n", "tessera"},
        {"\n  {\"workflow\": {\"tasks\": []}}", "wfcommons"},
        {"// c\ndigraph { a }", "dot"},
        {"/* c */ digraph { a }", "dot"},
        {"strict digraph { a }", "dot"},
        {"# a comment\n1\n0 0 0\n1 3 1 0\n2 0 1 1\n", "stg"},
        {"Name: a\nJobId: 1\n", "rec"},
        {"# c\nJobId: 1\n", "rec"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tsr_lab_graph_t *g = read_ok(cases[i].text, NULL);
        cr_assert_str_eq(g->format, cases[i].format, "case %zu", i);
        tsr_lab_free(g);
    }
    char err[256];
    tsr_lab_graph_t *g;
    cr_assert_eq(tsr_lab_read_buffer("???", 3, NULL, "x", &g, err, sizeof err), TSR_EINVAL);
    cr_assert_not_null(strstr(err, "cannot tell the format"), "%s", err);
    cr_assert_eq(tsr_lab_read_buffer("a", 1, "png", "x", &g, err, sizeof err), TSR_EINVAL);
    cr_assert_not_null(strstr(err, "unknown format 'png'"), "%s", err);
}

Test(lab_graph, reads_a_path)
{
    char path[] = "/tmp/lab-graph-XXXXXX.stg";
    int fd = mkstemps(path, 4);
    cr_assert_geq(fd, 0);
    const char *text = "1\n0 0 0\n1 3 1 0\n2 0 1 1\n";
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    char err[256];
    tsr_lab_graph_t *g = NULL;
    cr_assert_eq(tsr_lab_read(path, NULL, &g, err, sizeof err), TSR_OK, "%s", err);
    cr_assert_str_eq(g->format, "stg");
    cr_assert_eq(g->ntasks, 3);
    tsr_lab_free(g);
    /* an error names the path and the line */
    FILE *f = fopen(path, "w");
    fputs("1\n0 0 0\n1 3 1 9\n", f);
    fclose(f);
    cr_assert_eq(tsr_lab_read(path, "stg", &g, err, sizeof err), TSR_EINVAL);
    char want[64];
    snprintf(want, sizeof want, "%s:3:", path);
    cr_assert_not_null(strstr(err, want), "%s", err);
    unlink(path);
    cr_assert_eq(tsr_lab_read(path, NULL, &g, err, sizeof err), TSR_EIO);
    cr_assert_null(g);
    cr_assert_eq(tsr_lab_read("/tmp", NULL, &g, err, sizeof err), TSR_EIO, "a directory");
    cr_assert_not_null(strstr(err, "/tmp"), "%s", err);
}

/* A diamond through data alone (no explicit dependency): w writes x and y
 * (2 s), r1 reads x (3 s), r2 reads y (5 s), j reads x and writes y (1 s):
 * j follows w by x and r2 by y (a writer after a reader), not r1 (readers
 * do not order readers). Longest: w, r2, j = 8 s. */
Test(lab_graph, critical_path_through_implied_dependencies)
{
    tsr_lab_graph_t *g = read_ok("tessera-graph 1\n"
                                 "task 1 w access=1:W:8,2:W:8\n"
                                 "task 2 r1 access=1:R:8\n"
                                 "task 3 r2 access=2:R:8\n"
                                 "task 4 j access=1:R:8,2:RW:8\n"
                                 "ran 1 worker=0 device=cpu start_ns=0 end_ns=2000000000 status=0\n"
                                 "ran 2 worker=0 device=cpu start_ns=0 end_ns=3000000000 status=0\n"
                                 "ran 3 worker=0 device=cpu start_ns=0 end_ns=5000000000 status=0\n"
                                 "ran 4 worker=0 device=cpu start_ns=0 end_ns=1000000000 status=0\n",
                                 "tessera");
    ASSERT_ALL_DEPS(g, 3, "1,3");
    cr_assert_float_eq(tsr_lab_critical_path(g, TSR_DEVICE_CPU), 8, 1e-9);
    cr_assert_float_eq(tsr_lab_total_work(g, TSR_DEVICE_CPU), 11, 1e-9);
    tsr_lab_free(g);
}

Test(lab_graph, empty_graphs)
{
    tsr_lab_graph_t *g = read_ok("tessera-graph 1\n", "tessera");
    cr_assert_eq(g->ntasks, 0);
    cr_assert_float_eq(tsr_lab_critical_path(g, TSR_DEVICE_CPU), 0, 0);
    cr_assert_float_eq(tsr_lab_total_work(g, TSR_DEVICE_CPU), 0, 0);
    tsr_lab_free(g);
    g = read_ok("digraph {}", "dot");
    cr_assert_eq(g->ntasks, 0);
    tsr_lab_free(g);
    tsr_lab_free(NULL);
}
