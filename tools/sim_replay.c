/* tools/sim_replay.c — tessera-sim's lab commands (docs/lab.md): replay a
 * task graph from a file under a policy, on a simulated platform or on this
 * machine, and convert a graph between formats.
 *
 *   tessera-sim replay FILE (--platform P | --real) [--sched NAME|plugin.so]
 *               [--durations file|rates|models] [--scale X] [--kernel busy|memory]
 *   tessera-sim convert FILE --to rec|tessera [--out FILE]
 *
 * A replay prints the makespan beside the graph's bounds (the longest path
 * and the work over the workers, both with each task's shortest duration
 * as the runtime charges it — a GPU's compute lanes overlap launches, so a
 * makespan there can come in under them; the file's own optimum where it
 * has one for this many workers), the recorded makespan where the file has run times, the bytes
 * moved and the runtime's wall time per task; a table, then one JSON line.
 *
 * Must never: start a runtime before the graph has been read and checked,
 * or leave one running on an error.
 */
#include "sim_replay.h"

#include "cli.h"
#include "lab/graph.h"
#include "lab/replay.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char replay_usage[] =
    "usage: tessera-sim replay FILE (--platform P | --real) [flags]\n"
    "Replay a task graph (tessera-graph, StarPU tasks.rec, DOT, STG, WfCommons JSON)\n"
    "through the runtime's dependency inference, directory and policy.\n"
    "  --platform FILE      the node to simulate (platforms/*.json)\n"
    "  --real               run on this machine instead: synthetic kernels of the\n"
    "                       tasks' durations on the CPU workers\n"
    "  --format F           tessera, rec, dot, stg, wfcommons (default: from the file)\n"
    "  --sched NAME         policy or plug-in .so (default: eager)\n"
    "  --threads N          CPU workers (default: the platform's, or every core)\n"
    "  --durations D        file (default), rates (the platform's rate model on the\n"
    "                       flops) or models (the performance models' history)\n"
    "  --models DIR         the model directory --durations models reads (default:\n"
    "                       TESSERA_PERFMODEL_DIR, else the cache's)\n"
    "  --scale X            every duration from the file times X (default 1)\n"
    "  --kernel K           real runs: busy (default) or memory (a pass over the\n"
    "                       task's buffers, repeated for its duration)\n"
    "  --trace FILE         Chrome trace of the run\n"
    "  --json-tag TEXT      a label copied into the JSON line\n";

static const char convert_usage[] =
    "usage: tessera-sim convert FILE --to rec|tessera [--format F] [--out FILE]\n"
    "Write a task graph in another format (default: to stdout).\n";

/* The recorded makespan (last end - first start), or -1 if the file has none. */
static double recorded_makespan(const tsr_lab_graph_t *g)
{
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < g->ntasks; i++)
        if (g->task[i].start_s >= 0 && g->task[i].end_s >= g->task[i].start_s) {
            lo = fmin(lo, g->task[i].start_s);
            hi = fmax(hi, g->task[i].end_s);
        }
    return hi >= lo ? hi - lo : -1;
}

static int read_graph(const char *path, const char *format, tsr_lab_graph_t **g)
{
    char err[1024] = "";
    int rc = tsr_lab_read(path, format, g, err, sizeof err);
    if (rc != TSR_OK)
        return cli_fail("%s", err[0] ? err : tsr_strerror(rc));
    return 0;
}

int sim_replay(int argc, char **argv)
{
    const char *platform = NULL, *sched = NULL, *trace = NULL, *tag = "", *format = NULL;
    const char *durations = "file", *kernel = "busy", *models = NULL;
    int threads = 0, real = 0;
    double scale = 1;
    cli_opt_t opts[] = {
        {"platform", 0, CLI_STR, &platform, 0, 0, 0},
        {"real", 0, CLI_BOOL, &real, 0, 0, 0},
        {"format", 0, CLI_STR, &format, 0, 0, 0},
        {"sched", 0, CLI_STR, &sched, 0, 0, 0},
        {"threads", 0, CLI_INT, &threads, 1, 4096, 0},
        {"durations", 0, CLI_STR, &durations, 0, 0, 0},
        {"models", 0, CLI_STR, &models, 0, 0, 0},
        {"scale", 0, CLI_FLOAT, &scale, 1e-12, 1e12, 0},
        {"kernel", 0, CLI_STR, &kernel, 0, 0, 0},
        {"trace", 0, CLI_STR, &trace, 0, 0, 0},
        {"json-tag", 0, CLI_STR, &tag, 0, 0, 0},
    };
    const char *pos[1];
    int npos = 0;
    int rc = cli_parse("tessera-sim replay", replay_usage, opts, (int)(sizeof opts / sizeof *opts),
                       argc, argv, pos, 1, &npos);
    if (rc >= 0)
        return rc;
    if (npos != 1)
        return cli_usage_error("say which graph file to replay");
    if (!platform == !real)
        return cli_usage_error("give one of --platform FILE and --real");
    tsr_lab_replay_opts_t o = {.scale = scale, .real = real};
    if (!strcmp(durations, "file"))
        o.durations = TSR_LAB_DURATIONS_FILE;
    else if (!strcmp(durations, "rates"))
        o.durations = TSR_LAB_DURATIONS_RATES;
    else if (!strcmp(durations, "models"))
        o.durations = TSR_LAB_DURATIONS_MODELS;
    else
        return cli_usage_error("--durations: file, rates or models, not '%s'", durations);
    if (real && o.durations != TSR_LAB_DURATIONS_FILE)
        return cli_usage_error("--real runs the file's durations");
    if (!strcmp(kernel, "busy"))
        o.kernel = TSR_LAB_KERNEL_BUSY;
    else if (!strcmp(kernel, "memory"))
        o.kernel = TSR_LAB_KERNEL_MEMORY;
    else
        return cli_usage_error("--kernel: busy or memory, not '%s'", kernel);

    tsr_lab_graph_t *g = NULL;
    if ((rc = read_graph(pos[0], format, &g)) != 0)
        return rc;

    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.simulate = platform;
    if (real)
        cfg.ncuda = 0; /* synthetic kernels run on CPU workers */
    if (threads)
        cfg.ncpu = threads;
    if (sched)
        cfg.sched = sched;
    cfg.trace_path = trace;
    if (models)
        cfg.perfmodel_dir = models;
    double wall0 = cli_now();
    if ((rc = tsr_init(&cfg)) != TSR_OK) {
        tsr_lab_free(g);
        return cli_lib_fail(rc, "cannot start the runtime");
    }
    int nworkers = tsr_worker_count();
    char err[1024] = "";
    tsr_lab_replay_result_t r;
    int rrc = tsr_lab_replay(g, &o, &r, err, sizeof err);
    double wall = cli_now() - wall0;
    const char *policy = sched ? sched : "eager";
    int status = 0;

    /* the bounds of what the runtime charged; on the real machine, of the
     * file's durations */
    double cp = real ? tsr_lab_critical_path(g, -1) * scale : r.critical_path_s;
    double wpw = real ? tsr_lab_total_work(g, -1) * scale / nworkers : r.work_per_worker_s;
    double bound = fmax(cp, wpw), rec = recorded_makespan(g);
    double unit = g->time_unit_s > 0 ? g->time_unit_s : 1;
    double opt = g->bound_procs == nworkers && g->bound_makespan > 0
                     ? g->bound_makespan * unit * (scale > 0 ? scale : 1)
                     : -1;
    printf("graph %s (%s): %zu tasks, %zu data items, %zu explicit dependencies\n", pos[0],
           g->format, g->ntasks, g->ndata, g->ndeps);
    printf("%s %s, policy %s, %d workers\n", real ? "this machine" : "platform",
           real ? "(synthetic kernels)" : platform, policy, nworkers);
    if (rrc != TSR_OK) {
        printf("replay: FAILED: %s\n", err);
        status = 1;
    } else {
        printf("%-30s %14.6f s (%s)\n", "makespan", r.makespan_s, real ? "wall" : "virtual");
        printf("%-30s %14.6f s  (ratio %.3f)\n", "bound max(path, work/P)", bound,
               bound > 0 ? r.makespan_s / bound : 0);
        printf("%-30s %14.6f s\n", "  longest path", cp);
        printf("%-30s %14.6f s\n", "  work / workers", wpw);
        if (opt > 0)
            printf("%-30s %14.6f s  (ratio %.3f)\n", "the file's optimum", opt,
                   r.makespan_s / opt);
        if (rec > 0)
            printf("%-30s %14.6f s\n", "recorded makespan", rec);
        printf("%-30s %14.3f GB\n", "bytes moved", (double)r.bytes_moved * 1e-9);
        if (r.folded)
            printf("%-30s %14zu\n", "reads folded into deps", r.folded);
        printf("%-30s %14.3f s\n", "runtime wall time", r.wall_s);
        printf("%-30s %14.2f us\n", "wall time per task", 1e6 * r.wall_s / (double)r.tasks);
        printf("%-30s %14.0f\n", "tasks / wall s", (double)r.tasks / r.wall_s);
    }
    printf("{\"bench\":\"lab-replay\",\"tag\":");
    cli_json_str(tag);
    printf(",\"graph\":");
    cli_json_str(pos[0]);
    printf(",\"format\":\"%s\",\"platform\":", g->format);
    cli_json_str(real ? "real" : platform);
    printf(",\"policy\":");
    cli_json_str(policy);
    printf(",\"workers\":%d,\"tasks\":%zu,", nworkers, g->ntasks);
    if (rrc == TSR_OK)
        printf("\"makespan_s\":%.9g,\"bound_s\":%.9g,\"critical_path_s\":%.9g,"
               "\"optimum_s\":%.9g,\"recorded_s\":%.9g,\"bytes_moved\":%llu,\"folded\":%zu,"
               "\"wall_s\":%.6g,\"us_per_task\":%.4g,\"total_wall_s\":%.4g}\n",
               r.makespan_s, bound, cp, opt, rec, (unsigned long long)r.bytes_moved, r.folded,
               r.wall_s, 1e6 * r.wall_s / (double)r.tasks, wall);
    else {
        printf("\"error\":");
        cli_json_str(err);
        printf("}\n");
    }
    int src = tsr_shutdown();
    if (status == 0 && src != TSR_OK)
        status = cli_lib_fail(src, "shutdown");
    tsr_lab_free(g);
    return status;
}

int sim_convert(int argc, char **argv)
{
    const char *to = NULL, *out = NULL, *format = NULL;
    cli_opt_t opts[] = {
        {"to", 0, CLI_STR, &to, 0, 0, 0},
        {"out", 'o', CLI_STR, &out, 0, 0, 0},
        {"format", 0, CLI_STR, &format, 0, 0, 0},
    };
    const char *pos[1];
    int npos = 0;
    int rc = cli_parse("tessera-sim convert", convert_usage, opts,
                       (int)(sizeof opts / sizeof *opts), argc, argv, pos, 1, &npos);
    if (rc >= 0)
        return rc;
    if (npos != 1 || !to)
        return cli_usage_error("say which graph file to convert, and --to which format");
    if (strcmp(to, "rec") && strcmp(to, "tessera"))
        return cli_usage_error("--to: rec or tessera, not '%s'", to);
    tsr_lab_graph_t *g = NULL;
    if ((rc = read_graph(pos[0], format, &g)) != 0)
        return rc;
    FILE *f = out ? fopen(out, "w") : stdout;
    if (!f) {
        tsr_lab_free(g);
        return cli_fail("cannot write %s", out);
    }
    rc = tsr_lab_write(g, to, f);
    if (out && fclose(f) != 0 && rc == TSR_OK)
        rc = TSR_EIO;
    tsr_lab_free(g);
    if (rc != TSR_OK)
        return cli_fail("writing %s: %s", out ? out : "stdout", tsr_strerror(rc));
    return 0;
}
