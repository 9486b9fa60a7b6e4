/* test_taskbench.c — the Task Bench model of bench/taskbench: every pattern
 * on Tessera (and StarPU where built) against the serial reference, every
 * task's input validation, and the dependency functions against cases
 * worked out by hand. */
#include <criterion/criterion.h>

#include "backend.h"

#include <stdlib.h>
#include <string.h>

static task_graph_t graph(tb_dependence_t d, long width, long steps)
{
    task_graph_t g;
    tb_graph_init(&g);
    g.dependence = d;
    g.max_width = width;
    g.timesteps = steps;
    g.radix = 3;
    g.period = 2;
    g.fraction_connected = 0.5;
    g.kernel.type = TB_COMPUTE_BOUND;
    g.kernel.iterations = 20;
    g.output_bytes_per_task = 2 * sizeof(tb_record_t);
    return g;
}

/* ---- the runtimes against the serial reference ---------------------- */

static void check_system(const tb_system_t *s, long fields, tb_kernel_type_t kernel)
{
    tb_opts_t o = {.ncpu = 2, .sched = "eager", .fields = fields};
    char err[512];
    cr_assert_eq(s->start(&o, err, sizeof err), 0, "%s", err);
    for (int d = 0; d < TB_NDEPENDENCE; d++) {
        task_graph_t g = graph(d, 8, 12);
        g.kernel.type = kernel;
        if (kernel == TB_MEMORY_BOUND) {
            g.kernel.samples = 4;
            g.scratch_bytes_per_task = 4096;
        }
        cr_assert_eq(tb_graph_check(&g, err, sizeof err), 0, "%s: %s", tb_dependence_name(d),
                     err);
        long tasks, edges;
        tb_graph_counts(&g, &tasks, &edges);
        tb_record_t ref[8], got[8];
        tb_result_t r;
        tb_counters_reset();
        cr_assert_eq(tb_serial.run(&g, &o, &r, ref), 0, "%s", r.err);
        cr_assert_eq(tb_counter_failures(), 0);
        tb_counters_reset();
        memset(got, 0xa5, sizeof got);
        int rc = s->run(&g, &o, &r, got);
        cr_assert_eq(rc, 0, "%s %s: %s", s->name, tb_dependence_name(d), r.err);
        cr_assert_eq(tb_counter_failures(), 0, "%s %s: an input validation failed", s->name,
                     tb_dependence_name(d));
        cr_assert_eq(tb_counter_tasks(), tasks, "%s %s: %ld tasks ran, %ld expected", s->name,
                     tb_dependence_name(d), tb_counter_tasks(), tasks);
        cr_assert_eq(tb_counter_inputs(), edges, "%s %s: %ld inputs validated, %ld expected",
                     s->name, tb_dependence_name(d), tb_counter_inputs(), edges);
        cr_assert_eq(r.tasks, tasks);
        for (long p = 0; p < 8; p++) {
            long t = tb_last_timestep(&g, p);
            cr_assert_eq(got[p].timestep, t < 0 ? 0 : t);
            cr_assert_eq(memcmp(&got[p], &ref[p], sizeof ref[p]), 0,
                         "%s %s: point %ld's final output differs from the serial "
                         "reference's",
                         s->name, tb_dependence_name(d), p);
        }
    }
    s->stop();
}

Test(taskbench, tessera_every_pattern)
{
    check_system(&tb_tessera, 0, TB_COMPUTE_BOUND);
}

/* outputs reused by timestep parity: write-after-read edges as well */
Test(taskbench, tessera_every_pattern_two_fields)
{
    check_system(&tb_tessera, 2, TB_COMPUTE_BOUND);
}

Test(taskbench, tessera_every_pattern_memory_bound)
{
    check_system(&tb_tessera, 2, TB_MEMORY_BOUND);
}

#ifdef TB_HAVE_STARPU
Test(taskbench, starpu_every_pattern)
{
    check_system(&tb_starpu, 0, TB_COMPUTE_BOUND);
}

Test(taskbench, starpu_every_pattern_two_fields)
{
    check_system(&tb_starpu, 2, TB_COMPUTE_BOUND);
}
#endif

/* more inputs than a Tessera task holds: refused before any submission */
Test(taskbench, tessera_refuses_too_many_buffers)
{
    tb_opts_t o = {.ncpu = 2, .sched = "eager", .fields = 0};
    char err[512];
    cr_assert_eq(tb_tessera.start(&o, err, sizeof err), 0, "%s", err);
    task_graph_t g = graph(TB_ALL_TO_ALL, 16, 3);
    tb_result_t r;
    tb_counters_reset();
    cr_assert_neq(tb_tessera.run(&g, &o, &r, NULL), 0);
    cr_assert(strstr(r.err, "TSR_MAX_BUFFERS") != NULL, "%s", r.err);
    cr_assert_eq(tb_counter_tasks(), 0);
    g.max_width = 15; /* 15 inputs + 1 output: fits */
    cr_assert_eq(tb_tessera.run(&g, &o, &r, NULL), 0, "%s", r.err);
    cr_assert_eq(tb_counter_failures(), 0);
    tb_tessera.stop();
}

/* ---- input validation fails loudly ------------------------------------ */

Test(taskbench, wrong_input_fails)
{
    task_graph_t g = graph(TB_STENCIL_1D, 4, 3);
    tb_record_t a[2], b[2], out[2];
    for (int i = 0; i < 2; i++) {
        a[i] = (tb_record_t){0, 0, 0, 7};
        b[i] = (tb_record_t){0, 0, 1, 9};
    }
    const char *in[2] = {(const char *)a, (const char *)b};
    size_t bytes[2] = {sizeof a, sizeof b};
    tb_counters_reset();
    /* (1, 0) reads points 0 and 1 of timestep 0: right */
    cr_assert_eq(task_graph_execute_point(&g, 1, 0, (char *)out, sizeof out, in, bytes, 2,
                                          NULL, 0),
                 0);
    cr_assert_eq(out[0].timestep, 1);
    cr_assert_eq(out[1].point, 0);
    /* swapped inputs */
    const char *swapped[2] = {(const char *)b, (const char *)a};
    cr_assert_neq(task_graph_execute_point(&g, 1, 0, (char *)out, sizeof out, swapped, bytes,
                                           2, NULL, 0),
                  0);
    /* one input missing */
    cr_assert_neq(task_graph_execute_point(&g, 1, 0, (char *)out, sizeof out, in, bytes, 1,
                                           NULL, 0),
                  0);
    /* a stale timestep */
    b[1].timestep = 1;
    cr_assert_neq(task_graph_execute_point(&g, 1, 0, (char *)out, sizeof out, in, bytes, 2,
                                           NULL, 0),
                  0);
    cr_assert_eq(tb_counter_failures(), 3);
}

/* ---- the patterns against cases worked out by hand ------------------ */

static void expect_inputs(const task_graph_t *g, long t, long p, int n, const long *want)
{
    long got[64];
    long k = tb_task_inputs(g, t, p, got);
    cr_assert_eq(k, n, "%s (t %ld, p %ld): %ld inputs, expected %d",
                 tb_dependence_name(g->dependence), t, p, k, n);
    for (int i = 0; i < n; i++)
        cr_assert_eq(got[i], want[i], "%s (t %ld, p %ld): input %d is %ld, expected %ld",
                     tb_dependence_name(g->dependence), t, p, i, got[i], want[i]);
}

#define EXPECT(g, t, p, ...)                                                   \
    do {                                                                       \
        const long w_[] = {__VA_ARGS__};                                       \
        expect_inputs(&(g), t, p, (int)(sizeof w_ / sizeof w_[0]), w_);        \
    } while (0)
#define EXPECT_NONE(g, t, p) expect_inputs(&(g), t, p, 0, NULL)

Test(taskbench, patterns_by_hand)
{
    task_graph_t g;

    g = graph(TB_TRIVIAL, 8, 12);
    EXPECT_NONE(g, 5, 3);

    g = graph(TB_NO_COMM, 8, 12);
    EXPECT(g, 5, 5, 5);
    EXPECT_NONE(g, 0, 5); /* timestep 0 reads nothing */

    g = graph(TB_STENCIL_1D, 8, 12);
    EXPECT(g, 1, 0, 0, 1);
    EXPECT(g, 1, 3, 2, 3, 4);
    EXPECT(g, 4, 7, 6, 7);

    g = graph(TB_STENCIL_1D_PERIODIC, 8, 12);
    EXPECT(g, 1, 0, 0, 1, 7);
    EXPECT(g, 1, 7, 6, 7, 0);
    EXPECT(g, 1, 4, 3, 4, 5);

    /* dom, 8 x 12: timestep t runs [max(0, t-4), +min(8, t+1, 12-t)) */
    g = graph(TB_DOM, 8, 12);
    cr_assert_eq(task_graph_offset_at_timestep(&g, 5), 1);
    cr_assert_eq(task_graph_width_at_timestep(&g, 5), 6);
    cr_assert_eq(task_graph_offset_at_timestep(&g, 10), 6);
    cr_assert_eq(task_graph_width_at_timestep(&g, 10), 2);
    EXPECT(g, 3, 2, 1, 2);
    EXPECT(g, 3, 3, 2); /* point 3 was not active at timestep 2 */
    EXPECT(g, 10, 6, 5, 6);
    EXPECT(g, 10, 7, 6, 7);

    /* tree: widths 1, 2, 4, 8; i <- i/2 */
    g = graph(TB_TREE, 8, 12);
    cr_assert_eq(task_graph_width_at_timestep(&g, 2), 4);
    cr_assert_eq(task_graph_width_at_timestep(&g, 7), 8);
    EXPECT(g, 1, 1, 0);
    EXPECT(g, 2, 3, 1);
    EXPECT(g, 3, 6, 3);

    /* fft, width 8: 3 dependence sets, set (t+2) % 3; i <- i -/+ 2^set */
    g = graph(TB_FFT, 8, 12);
    cr_assert_eq(task_graph_max_dependence_sets(&g), 3);
    EXPECT(g, 1, 0, 0, 1);
    EXPECT(g, 1, 3, 2, 3, 4);
    EXPECT(g, 2, 3, 1, 3, 5);
    EXPECT(g, 2, 6, 4, 6);
    EXPECT(g, 3, 1, 1, 5);
    EXPECT(g, 3, 5, 1, 5);
    EXPECT(g, 4, 3, 2, 3, 4); /* the period: set 0 again */

    g = graph(TB_ALL_TO_ALL, 8, 12);
    EXPECT(g, 2, 4, 0, 1, 2, 3, 4, 5, 6, 7);

    /* nearest: [i - radix/2, i + (radix-1)/2], clipped */
    g = graph(TB_NEAREST, 8, 12);
    EXPECT(g, 1, 0, 0, 1);
    g.radix = 4;
    EXPECT(g, 1, 5, 3, 4, 5, 6);
    g.radix = 5;
    EXPECT(g, 1, 7, 5, 6, 7);
    g.radix = 0;
    EXPECT_NONE(g, 1, 4);

    /* spread, width 8, radix 3, period 2: i, (i + 2 + set) % 8, (i + 5 + set) % 8 */
    g = graph(TB_SPREAD, 8, 12);
    EXPECT(g, 2, 1, 1, 3, 6);
    EXPECT(g, 3, 1, 1, 4, 7);
    EXPECT(g, 3, 7, 7, 2, 5);

    /* random_nearest: fraction 0 keeps the point itself, 1 is nearest */
    g = graph(TB_RANDOM_NEAREST, 8, 12);
    g.fraction_connected = 0;
    EXPECT(g, 1, 4, 4);
    g.fraction_connected = 1;
    EXPECT(g, 1, 4, 3, 4, 5);
    EXPECT(g, 2, 0, 0, 1);
}

/* every pattern: no point twice among a point's dependencies, and the
 * reverse dependencies are the exact mirror image */
Test(taskbench, reverse_dependencies_mirror)
{
    for (int d = 0; d < TB_NDEPENDENCE; d++)
        for (long W = 1; W <= 13; W += 3) {
            task_graph_t g = graph(d, W, 12);
            if (d == TB_SPREAD) {
                g.radix = W < 3 ? W : 3;
                g.period = 1;
            }
            char err[256];
            cr_assert_eq(tb_graph_check(&g, err, sizeof err), 0, "%s W %ld: %s",
                         tb_dependence_name(d), W, err);
            tb_interval_t iv[64];
            for (long s = 0; s < task_graph_max_dependence_sets(&g); s++) {
                unsigned char fwd[13][13] = {{0}}, rev[13][13] = {{0}};
                for (long p = 0; p < W; p++) {
                    long n = task_graph_dependencies(&g, s, p, iv);
                    cr_assert_leq(n, task_graph_max_intervals(&g));
                    for (long k = 0; k < n; k++)
                        for (long q = iv[k].start; q <= iv[k].end; q++) {
                            cr_assert(q >= 0 && q < W);
                            cr_assert_eq(fwd[p][q], 0, "%s W %ld: %ld twice in %ld's deps",
                                         tb_dependence_name(d), W, q, p);
                            fwd[p][q] = 1;
                        }
                    n = task_graph_reverse_dependencies(&g, s, p, iv);
                    for (long k = 0; k < n; k++)
                        for (long q = iv[k].start; q <= iv[k].end; q++)
                            rev[q][p] = 1; /* q reads p */
                }
                cr_assert_eq(memcmp(fwd, rev, sizeof fwd), 0,
                             "%s W %ld set %ld: reverse dependencies are not the mirror",
                             tb_dependence_name(d), W, s);
            }
        }
}
