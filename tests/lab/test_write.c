/* tests/lab/test_write.c — the writers (lab/write.c): tessera read back to
 * the same graph; tessera to rec read back with every predecessor (the STF
 * ones made explicit, as StarPU's DependsOn lists them); the rec text's
 * fields checked against values worked out by hand; graphs of other
 * readers written and read again; a failing stream is TSR_EIO. */
#include "util.h"

static const char *const sample =
    "tessera-graph 1\n"
    "task 1 init prio=0 flops=-1 bytes=64 access=7:W:64 deps=\n"
    "task 2 gemm prio=5 flops=2e6 bytes=96 access=7:R:64,8:RW:32 deps=1\n"
    "wont_use 7\n"
    "task 3 acc prio=0 flops=10 bytes=32 access=8:COMMUTE:32 deps=2\n"
    "task 4 acc prio=0 flops=10 bytes=32 access=8:COMMUTE:32 deps=2\n"
    "task 5 read prio=-1 flops=0 bytes=33 access=8:R:32,9:SCRATCH:1 deps=3,4\n"
    "invalidate 8\n"
    "ran 2 worker=3 device=cuda start_ns=1000 end_ns=4000 status=0\n"
    "ran 1 worker=0 device=cpu start_ns=0 end_ns=500 status=0\n";

/* g written in `format` into memory and read back. */
static tsr_lab_graph_t *again(const tsr_lab_graph_t *g, const char *format, char **text)
{
    size_t n = 0;
    char *buf = NULL;
    FILE *f = open_memstream(&buf, &n);
    cr_assert_not_null(f);
    cr_assert_eq(tsr_lab_write(g, format, f), TSR_OK);
    fclose(f);
    tsr_lab_graph_t *h = read_ok(buf, format);
    if (text)
        *text = buf;
    else
        free(buf);
    return h;
}

static void same_tasks(const tsr_lab_graph_t *a, const tsr_lab_graph_t *b)
{
    cr_assert_eq(a->ntasks, b->ntasks);
    cr_assert_eq(a->ndata, b->ndata);
    for (uint32_t t = 0; t < a->ntasks; t++) {
        const tsr_lab_task_t *x = &a->task[t], *y = &b->task[t];
        cr_assert_str_eq(x->name, y->name);
        cr_assert_eq(x->id, y->id);
        cr_assert_eq(x->priority, y->priority);
        cr_assert_float_eq(x->flops, y->flops, 1e-9 * (x->flops > 0 ? x->flops : 1));
        char ga[1024], gb[1024];
        accesses_of(a, t, ga, sizeof ga);
        accesses_of(b, t, gb, sizeof gb);
        cr_assert_str_eq(ga, gb, "task %u", t);
        all_deps_of(a, t, ga, sizeof ga);
        all_deps_of(b, t, gb, sizeof gb);
        cr_assert_str_eq(ga, gb, "task %u", t);
        cr_assert_eq(x->worker, y->worker);
        cr_assert_float_eq(x->start_s, y->start_s, 1e-12);
        cr_assert_float_eq(x->end_s, y->end_s, 1e-12);
    }
}

Test(lab_write, tessera_round_trip)
{
    tsr_lab_graph_t *g = read_ok(sample, "tessera"), *h = again(g, "tessera", NULL);
    same_tasks(g, h);
    for (uint32_t t = 0; t < g->ntasks; t++) {
        char ga[256], gb[256];
        deps_of(g, t, ga, sizeof ga);
        deps_of(h, t, gb, sizeof gb);
        cr_assert_str_eq(ga, gb, "explicit deps of task %u", t);
        cr_assert_eq(g->task[t].device_kind, h->task[t].device_kind);
        for (int k = 0; k < TSR_DEVICE_KINDS; k++)
            cr_assert_float_eq(g->task[t].seconds[k], h->task[t].seconds[k], 1e-15);
    }
    cr_assert_eq(h->nevents, 2);
    for (size_t e = 0; e < 2; e++) {
        cr_assert_eq(g->event[e].before, h->event[e].before);
        cr_assert_eq(g->event[e].kind, h->event[e].kind);
        cr_assert_str_eq(g->data[g->event[e].data].name, h->data[h->event[e].data].name);
    }
    tsr_lab_free(g);
    tsr_lab_free(h);
}

Test(lab_write, rec_round_trip)
{
    char *text;
    tsr_lab_graph_t *g = read_ok(sample, "tessera"), *h = again(g, "rec", &text);
    same_tasks(g, h);
    /* DependsOn holds all: read is after 2 (the writer of 8) and 3, 4 (the
     * commuting group); the accumulators after gemm only */
    ASSERT_DEPS(h, 4, "2,3,4");
    ASSERT_DEPS(h, 3, "2");
    cr_assert_not_null(strstr(text, "JobId: 5\nSubmitOrder: 6\n"), "%s", text);
    cr_assert_not_null(strstr(text, "DependsOn: 2 3 4\n"), "%s", text);
    cr_assert_not_null(strstr(text, "Modes: R RW\nSizes: 64 32\n"), "%s", text);
    cr_assert_not_null(strstr(text, "Modes: RW|COMMUTE\n"), "%s", text);
    cr_assert_not_null(strstr(text, "Handles: 8 9\nModes: R SCRATCH\nSizes: 32 1\n"), "%s", text);
    cr_assert_not_null(strstr(text, "Control: WontUse\nJobId: 6\nSubmitOrder: 3\nHandles: 7\n"),
                       "%s", text);
    cr_assert_not_null(strstr(text, "GFlop: 0.002\n"), "%s", text);
    /* 1000 to 4000 ns in ms, to the ns as StarPU writes them */
    cr_assert_not_null(strstr(text, "StartTime: 0.001000\nEndTime: 0.004000\n"), "%s", text);
    cr_assert_null(strstr(text, "invalidate"), "invalidate has no rec form");
    /* FNV-1a of the 64-bit sizes 64 (task 1): worked out by hand from the
     * byte 0x40 then seven zeros */
    uint32_t h32 = 2166136261u;
    uint8_t bytes[8] = {64, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < 8; i++)
        h32 = (h32 ^ bytes[i]) * 16777619u;
    char fp[32];
    snprintf(fp, sizeof fp, "Footprint: %08x\n", h32);
    cr_assert_not_null(strstr(text, fp), "%s in %s", fp, text);
    /* the wont_use is kept, the invalidate is not */
    cr_assert_eq(h->nevents, 1);
    cr_assert_eq(h->event[0].before, 2);
    cr_assert_eq(h->event[0].kind, TSR_LAB_WONT_USE);
    cr_assert_eq(h->task[0].device_kind, TSR_DEVICE_CPU, "MemoryNode 0");
    cr_assert_float_eq(h->task[0].seconds[TSR_DEVICE_CPU], 5e-7, 1e-15);
    free(text);
    tsr_lab_free(g);
    tsr_lab_free(h);
}

/* Names that are no numbers (DOT's "a->b") are written as index + 1. */
Test(lab_write, other_readers_graphs)
{
    tsr_lab_graph_t *g = read_ok("digraph { a -> b [size=10]; b -> c; a [size=7] }", "dot");
    tsr_lab_graph_t *h = again(g, "tessera", NULL);
    cr_assert_eq(h->ntasks, 3);
    ASSERT_ACCESSES(h, 0, "1:W:10");
    ASSERT_ACCESSES(h, 1, "1:R:10");
    ASSERT_DEPS(h, 2, "1");
    cr_assert_float_eq(h->task[0].flops, 7, 0);
    tsr_lab_free(h);
    h = again(g, "rec", NULL);
    ASSERT_ACCESSES(h, 0, "1:W:10");
    ASSERT_DEPS(h, 1, "0");
    ASSERT_DEPS(h, 2, "1");
    tsr_lab_free(h);
    tsr_lab_free(g);
    /* STG ids start at 0 and are kept */
    g = read_ok("1\n0 0 0\n1 3 1 0\n2 0 1 1\n", "stg");
    h = again(g, "rec", NULL);
    cr_assert_eq(h->task[0].id, 0);
    ASSERT_DEPS(h, 2, "1");
    tsr_lab_free(h);
    tsr_lab_free(g);
}

Test(lab_write, failing_stream_and_bad_format)
{
    tsr_lab_graph_t *g = read_ok(sample, "tessera");
    FILE *f = fopen("/dev/full", "w");
    cr_assert_not_null(f);
    cr_assert_eq(tsr_lab_write(g, "rec", f), TSR_EIO);
    fclose(f);
    cr_assert_eq(tsr_lab_write(g, "dot", stdout), TSR_EINVAL);
    tsr_lab_free(g);
}
