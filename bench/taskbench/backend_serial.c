/* backend_serial.c — no runtime: the tasks one by one, timestep by
 * timestep, on the calling thread. The correctness reference of the test
 * and the ideal of the efficiency (main.c). */
#include "backend.h"
#include "../bench_util.h"

#include <stdio.h>
#include <stdlib.h>

static int serial_start(const tb_opts_t *o, char *err, size_t errlen)
{
    (void)o;
    (void)err;
    (void)errlen;
    return 0;
}

static int serial_run(const task_graph_t *g, const tb_opts_t *o, tb_result_t *res,
                      tb_record_t *final)
{
    tb_buffers_t b;
    long W = g->max_width;
    long *deps = malloc((size_t)W * sizeof *deps);
    const char **in = malloc((size_t)W * sizeof *in);
    size_t *in_bytes = malloc((size_t)W * sizeof *in_bytes);
    res->err[0] = 0;
    if (!deps || !in || !in_bytes || tb_buffers_alloc(&b, g, tb_fields(g, o)) ||
        tb_scratch_alloc(g, 1)) {
        snprintf(res->err, sizeof res->err, "serial: out of memory");
        free(deps), free(in), free(in_bytes);
        return -1;
    }
    for (long i = 0; i < W; i++)
        in_bytes[i] = g->output_bytes_per_task;
    char *scratch = tb_scratch_of(0);
    int rc = 0;
    long tasks = 0, edges = 0;
    double t0 = bench_now();
    for (long t = 0; t < g->timesteps && rc == 0; t++) {
        long off = task_graph_offset_at_timestep(g, t), w = task_graph_width_at_timestep(g, t);
        for (long p = off; p < off + w && rc == 0; p++) {
            long n = tb_task_inputs(g, t, p, deps);
            for (long i = 0; i < n; i++)
                in[i] = tb_buffer(&b, t - 1, deps[i]);
            rc = task_graph_execute_point(g, t, p, tb_buffer(&b, t, p),
                                          g->output_bytes_per_task, in, in_bytes, (size_t)n,
                                          scratch, scratch ? g->scratch_bytes_per_task : 0);
            tasks++;
            edges += n;
        }
    }
    res->wall_s = bench_now() - t0;
    res->tasks = tasks;
    res->edges = edges;
    if (rc)
        snprintf(res->err, sizeof res->err, "serial: a task's validation failed");
    tb_collect_final(g, &b, final);
    tb_buffers_free(&b);
    tb_scratch_free();
    free(deps), free(in), free(in_bytes);
    return rc ? -1 : 0;
}

static void serial_stop(void)
{
}

static const char *serial_sched(void)
{
    return "-";
}

const tb_system_t tb_serial = {
    .name = "serial",
    .start = serial_start,
    .run = serial_run,
    .stop = serial_stop,
    .sched_name = serial_sched,
};
