/* The task-graph record (TESSERA_RECORD, runtime/record.c): a program whose
 * dependencies are written out by hand below records exactly those edges,
 * in submission order, with one "ran" line per task whose times honour
 * every edge; a file that cannot be written fails init, a full disk fails
 * shutdown, both with a message. */
#include "util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* reads its buffers (several readers of one handle may run at once) */
static int touch(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    volatile double s = 0;
    for (int i = 0; i < e->nbuffers; i++)
        s += ((const double *)b[i])[0];
    usleep(200);
    return s != s; /* a NaN read fails the task; the sum is used (clang checks) */
}

/* x += 1 on its one (RW) buffer */
static int inc(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args, (void)e;
    ((double *)b[0])[0] += 1;
    return 0;
}

static double two_flops(const void *args, const size_t *sizes)
{
    (void)args, (void)sizes;
    return 2;
}

static const tsr_codelet_t cl1 = {.name = "one buffer", .impl = {touch}, .nbuffers = 1,
                                  .flops = two_flops};
static const tsr_codelet_t cl2 = {.name = "two", .impl = {touch}, .nbuffers = 2};
static const tsr_codelet_t cl_inc = {.name = "inc", .impl = {inc}, .nbuffers = 1};

static void submit(const tsr_codelet_t *cl, tsr_handle_t a, tsr_mode_t ma, tsr_handle_t b,
                   tsr_mode_t mb)
{
    tsr_access_t acc[2] = {{a, ma}, {b, mb}};
    tsr_task_desc_t d = {.codelet = cl, .buffers = acc, .nbuffers = cl->nbuffers};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
}

static void start_recording(const char *path, int ncpu)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = ncpu;
    cfg.bind = 0;
    cfg.record_path = path;
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "tsr_init: %s", tsr_error_message());
}

Test(record, stf_edges_and_run_times)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/tsr-record-%d.graph", (int)getpid());
    start_recording(path, 2);
    double x[2] = {0, 0};
    tsr_handle_t A, B;
    cr_assert_eq(tsr_handle_register(&A, &x[0], sizeof x[0]), TSR_OK);
    cr_assert_eq(tsr_handle_register(&B, &x[1], sizeof x[1]), TSR_OK);
    submit(&cl1, A, TSR_W, NULL, 0);         /* 1 */
    submit(&cl2, A, TSR_R, B, TSR_W);        /* 2: after 1 */
    submit(&cl1, A, TSR_R, NULL, 0);         /* 3: after 1 */
    submit(&cl1, A, TSR_RW, NULL, 0);        /* 4: after 1, 2, 3 */
    submit(&cl1, B, TSR_COMMUTE, NULL, 0);   /* 5: after 2 */
    submit(&cl1, B, TSR_COMMUTE, NULL, 0);   /* 6: after 2, not 5 */
    submit(&cl1, B, TSR_R, NULL, 0);         /* 7: after 2, 5, 6 */
    submit(&cl1, B, TSR_W, NULL, 0);         /* 8: after 2, 5, 6, 7 */
    cr_assert_eq(tsr_wait_all(), TSR_OK);
    cr_assert_eq(tsr_handle_unregister(A), TSR_OK);
    cr_assert_eq(tsr_handle_unregister(B), TSR_OK);
    stop_runtime();

    /* by hand: each task's predecessors as a bit set of task ids */
    const unsigned want[9] = {0, 0, 1u << 1, 1u << 1, 1u << 1 | 1u << 2 | 1u << 3, 1u << 2,
                              1u << 2, 1u << 2 | 1u << 5 | 1u << 6,
                              1u << 2 | 1u << 5 | 1u << 6 | 1u << 7};
    FILE *f = fopen(path, "r");
    cr_assert(f);
    char line[512];
    cr_assert(fgets(line, sizeof line, f));
    cr_assert_str_eq(line, "tessera-graph 1\n");
    unsigned got[9] = {0};
    int ntask = 0, nran = 0;
    long long start[9] = {0}, end[9] = {0};
    while (fgets(line, sizeof line, f)) {
        unsigned long long id;
        if (sscanf(line, "task %llu ", &id) == 1) {
            cr_assert_eq(id, (unsigned long long)ntask + 1, "ids in submission order: %s", line);
            ntask++;
            cr_assert(strstr(line, id == 2 ? " two " : " one_buffer "), "name: %s", line);
            if (id != 2)
                cr_assert(strstr(line, " flops=2 "), "flops: %s", line);
            char *d = strstr(line, " deps=");
            cr_assert(d, "no deps: %s", line);
            for (char *p = d + 6; *p && *p != '\n';) {
                unsigned long long dep = strtoull(p, &p, 10);
                cr_assert(dep >= 1 && dep < id, "dep %llu of %llu", dep, id);
                got[id] |= 1u << dep;
                if (*p == ',')
                    p++;
            }
            cr_assert(strstr(line, id == 2 ? ":R:8," : ":8 deps"), "access: %s", line);
        } else {
            int w, st;
            long long s, e;
            char dev[8];
            cr_assert_eq(sscanf(line, "ran %llu worker=%d device=%7s start_ns=%lld end_ns=%lld "
                                      "status=%d", &id, &w, dev, &s, &e, &st), 6, "%s", line);
            cr_assert(id >= 1 && id <= 8 && w >= 0 && w < 2 && st == 0 && e >= s);
            cr_assert_str_eq(dev, "cpu");
            start[id] = s, end[id] = e;
            nran++;
        }
    }
    fclose(f);
    unlink(path);
    cr_assert_eq(ntask, 8);
    cr_assert_eq(nran, 8);
    for (int i = 1; i <= 8; i++) {
        cr_assert_eq(got[i], want[i], "task %d: deps 0x%x, want 0x%x", i, got[i], want[i]);
        for (int j = 1; j < i; j++)
            if (want[i] >> j & 1u)
                cr_assert(start[i] >= end[j], "task %d started before its predecessor %d ended",
                          i, j);
    }
}

Test(record, unwritable_file_fails_init)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 1;
    cfg.bind = 0;
    cfg.record_path = "/nonexistent-dir/graph";
    cr_assert_eq(tsr_init(&cfg), TSR_EIO);
    cr_assert(strstr(tsr_error_message(), "/nonexistent-dir/graph"), "%s", tsr_error_message());
    /* nothing was left half-started */
    cfg.record_path = NULL;
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "%s", tsr_error_message());
    stop_runtime();
}

Test(record, full_disk_fails_shutdown)
{
    if (access("/dev/full", W_OK) != 0)
        cr_skip_test("no /dev/full");
    start_recording("/dev/full", 1);
    double x = 0;
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_register(&h, &x, sizeof x), TSR_OK);
    for (int i = 0; i < 200; i++)
        submit(&cl_inc, h, TSR_RW, NULL, 0);
    cr_assert_eq(tsr_wait_all(), TSR_OK);
    cr_assert_eq(x, 200.0, "the record never changes what runs");
    cr_assert_eq(tsr_handle_unregister(h), TSR_OK);
    cr_assert_eq(tsr_shutdown(), TSR_EIO);
    cr_assert(strstr(tsr_error_message(), "incomplete"), "%s", tsr_error_message());
}

/* Explicit dependencies are recorded with the implied ones; wont_use and
 * invalidate come out as events between the tasks they follow. */
Test(record, explicit_deps_and_handle_events)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/tsr-record-x-%d.graph", (int)getpid());
    start_recording(path, 2);
    double x[3] = {0, 0, 0};
    tsr_handle_t h[3];
    for (int i = 0; i < 3; i++)
        cr_assert_eq(tsr_handle_register(&h[i], &x[i], sizeof x[i]), TSR_OK);
    tsr_task_t t1, t2;
    tsr_access_t a0 = {h[0], TSR_RW}, a1 = {h[1], TSR_RW}, a2 = {h[2], TSR_RW};
    tsr_task_desc_t d = {.codelet = &cl_inc, .nbuffers = 1, .buffers = &a0};
    cr_assert_eq(tsr_submit(&d, &t1), TSR_OK);            /* 1 */
    d.buffers = &a1, d.deps = &t1, d.ndeps = 1;
    cr_assert_eq(tsr_submit(&d, &t2), TSR_OK);            /* 2: after 1 (explicit) */
    cr_assert_eq(tsr_handle_wont_use(h[0]), TSR_OK);
    tsr_task_t both[2] = {t2, t1};
    d.buffers = &a2, d.deps = both, d.ndeps = 2;
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK);           /* 3: after 1, 2 */
    cr_assert_eq(tsr_handle_invalidate(h[2]), TSR_OK);
    cr_assert_eq(tsr_task_release(t1), TSR_OK);
    cr_assert_eq(tsr_task_release(t2), TSR_OK);
    cr_assert_eq(tsr_wait_all(), TSR_OK);
    char id0[32], id2[32];
    for (int i = 0; i < 3; i++)
        cr_assert_eq(tsr_handle_unregister(h[i]), TSR_OK);
    stop_runtime();

    FILE *f = fopen(path, "r");
    cr_assert(f);
    char line[512], order[8] = {0};
    int n = 0;
    id0[0] = id2[0] = 0;
    while (fgets(line, sizeof line, f) && n < 7) {
        unsigned long long id;
        if (sscanf(line, "task %llu ", &id) == 1) {
            const char *want[4] = {"", " deps=\n", " deps=1\n", " deps=1,2\n"};
            cr_assert(id <= 3 && strstr(line, want[id]), "task %llu: %s", id, line);
            if (id == 1)
                sscanf(strstr(line, "access=") + 7, "%31[0-9]", id0);
            if (id == 3)
                sscanf(strstr(line, "access=") + 7, "%31[0-9]", id2);
            order[n++] = (char)('0' + id);
        } else if (!strncmp(line, "wont_use ", 9)) {
            cr_assert_str_eq(line + 9, strcat(strcpy((char[40]){0}, id0), "\n"));
            order[n++] = 'w';
        } else if (!strncmp(line, "invalidate ", 11)) {
            cr_assert_str_eq(line + 11, strcat(strcpy((char[40]){0}, id2), "\n"));
            order[n++] = 'i';
        }
    }
    fclose(f);
    unlink(path);
    cr_assert_str_eq(order, "12w3i");
}
