/* tessera-taskbench — Task Bench's model on Tessera, StarPU and a serial
 * reference (docs/benchmarks.md, "Task Bench: METG").
 *
 *   tessera-taskbench -steps N -width N -type PATTERN -kernel KIND -iter N
 *                     [-radix N -period N -fraction F -output B -scratch B
 *                      -sample N -fields N -ncpu N -sched NAME -verify]
 *                     -system tessera|starpu|serial
 *     runs one graph and prints its time, tasks and granularity (-verify:
 *     also runs the serial reference and compares the final outputs).
 *
 *   tessera-taskbench --metg [--quick] [--patterns a,b] [--systems s[:sched],…]
 *                     [-kernel KIND -steps N -width N -ncpu N -radix N]
 *     (defaults: compute_bound, width 2 x cores, 250 steps; --quick: 100)
 *     for each system (one process, each runtime started once), each
 *     pattern: iterations from large to small (x0.5), efficiency and
 *     METG(50 %). Prints a table and one JSON line per figure.
 *
 * efficiency = (task iterations per second of the run)
 *              / (the serial reference's task iterations per second at the
 *                 largest size x the cores used)
 * (the serial reference runs at the largest size before the sweep and again
 * before each of the first three sizes: the best rate of these is the peak,
 * so that a burst of other load on the machine cannot lower the ideal)
 * granularity = wall time x cores / tasks
 * METG(50 %) = the granularity where efficiency crosses 50 %: interpolated
 * linearly in log(granularity) between the last size at or above 50 % and
 * the first below (Task Bench interpolates between the two sizes around the
 * threshold); when every size stays above, the smallest measured
 * granularity (reported as an upper bound, "<=").
 */
#include "backend.h"
#include "../bench_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tessera-taskbench -steps N -width N -type PATTERN -kernel KIND -iter N\n"
            "         [-radix N] [-period N] [-fraction F] [-output BYTES] [-scratch BYTES]\n"
            "         [-sample N] [-fields N] [-ncpu N] [-sched NAME] [-verify]\n"
            "         -system tessera|starpu|serial\n"
            "       tessera-taskbench --metg [--quick] [--patterns P,P] "
            "[--systems S[:SCHED],...]\n"
            "         [-kernel KIND] [-steps N] [-width N] [-ncpu N] [-radix N]\n"
            "patterns:");
    for (int i = 0; i < TB_NDEPENDENCE; i++)
        fprintf(f, " %s", tb_dependence_name(i));
    fprintf(f, "\nkernels:");
    for (int i = 0; i < TB_NKERNEL; i++)
        fprintf(f, " %s", tb_kernel_name(i));
    fprintf(f, "\nsystems: serial tessera%s\n",
#ifdef TB_HAVE_STARPU
            " starpu"
#else
            " (starpu: not built)"
#endif
    );
}

static const tb_system_t *find_system(const char *name)
{
    if (!strcmp(name, "serial"))
        return &tb_serial;
    if (!strcmp(name, "tessera"))
        return &tb_tessera;
#ifdef TB_HAVE_STARPU
    if (!strcmp(name, "starpu"))
        return &tb_starpu;
#endif
    return NULL;
}

static void cpu_model(char *buf, size_t n)
{
    snprintf(buf, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ' || *c == '\t')
                    c++;
                c[strcspn(c, "\n")] = 0;
                snprintf(buf, n, "%s", c);
            }
            break;
        }
    fclose(f);
}

/* ---- one run ------------------------------------------------------------ */

static int run_one(const task_graph_t *g, const tb_opts_t *o, const char *sysname, int verify)
{
    const tb_system_t *s = find_system(sysname);
    if (!s) {
        fprintf(stderr, "tessera-taskbench: unknown or unbuilt system '%s'\n", sysname);
        return 2;
    }
    char err[512];
    if (s->start(o, err, sizeof err)) {
        fprintf(stderr, "tessera-taskbench: %s\n", err);
        return 1;
    }
    tb_record_t *fin = calloc((size_t)g->max_width, sizeof *fin);
    tb_result_t r;
    tb_counters_reset();
    int rc = s->run(g, o, &r, fin);
    const char *sched = s->sched_name();
    s->stop();
    if (rc) {
        fprintf(stderr, "tessera-taskbench: %s\n", r.err);
        free(fin);
        return 1;
    }
    double gran = r.wall_s * o->ncpu / (double)r.tasks;
    printf("system %s (scheduler %s, %d cores): %s, %s, width %ld, steps %ld, iterations %ld\n",
           sysname, sched, o->ncpu, tb_dependence_name(g->dependence),
           tb_kernel_name(g->kernel.type), g->max_width, g->timesteps, g->kernel.iterations);
    printf("  time %.6f s, tasks %ld, dependencies %ld, granularity %.3f us, "
           "validated inputs %ld, validation failures %ld\n",
           r.wall_s, r.tasks, r.edges, gran * 1e6, tb_counter_inputs(), tb_counter_failures());
    if (g->kernel.type == TB_COMPUTE_BOUND)
        printf("  %.3f GFLOP/s\n", (double)r.tasks * (double)g->kernel.iterations *
                                       TB_COMPUTE_FLOPS_PER_ITER / r.wall_s * 1e-9);
    int status = tb_counter_failures() ? 1 : 0;
    if (verify && strcmp(sysname, "serial")) {
        tb_record_t *ref = calloc((size_t)g->max_width, sizeof *ref);
        tb_result_t rr;
        if (tb_serial.run(g, o, &rr, ref)) {
            fprintf(stderr, "tessera-taskbench: %s\n", rr.err);
            status = 1;
        } else if (memcmp(ref, fin, (size_t)g->max_width * sizeof *ref)) {
            printf("  verify: final outputs DIFFER from the serial reference\n");
            status = 1;
        } else {
            printf("  verify: final outputs equal the serial reference's\n");
        }
        free(ref);
    }
    free(fin);
    return status;
}

/* ---- the METG sweep --------------------------------------------------- */

#define MAX_SIZES 40

typedef struct point {
    long iter, tasks;
    double wall, gran, eff;
} point_t;

typedef struct sweep {
    char system[32], sched[64];
    tb_dependence_t pattern;
    int n;
    point_t pt[MAX_SIZES];
    double metg;   /* seconds; NAN: none */
    int metg_bound; /* 1: every size stayed above 50 % */
} sweep_t;

/* the best wall of min_reps runs (3 under 0.2 s, 5 under 50 ms) */
static int timed_run(const tb_system_t *s, const task_graph_t *g, const tb_opts_t *o,
                     tb_result_t *best, int min_reps)
{
    int reps = min_reps;
    for (int i = 0; i < reps; i++) {
        tb_result_t r;
        tb_counters_reset();
        if (s->run(g, o, &r, NULL)) {
            *best = r;
            return -1;
        }
        if (tb_counter_failures()) {
            snprintf(best->err, sizeof best->err, "%s: a task's validation failed", s->name);
            return -1;
        }
        if (i == 0 || r.wall_s < best->wall_s)
            *best = r;
        if (i == 0 && r.wall_s < 0.2 && reps < 3)
            reps = 3;
        if (i == 0 && r.wall_s < 0.05 && reps < 5)
            reps = 5; /* short runs: the best of 5 (other load is bursty) */
    }
    return 0;
}

static void compute_metg(sweep_t *sw)
{
    /* the smallest granularity at or above 50 % (sizes run large to small;
     * noise can put a size above 50 % under one below it: the last one
     * above counts), interpolated towards the next smaller size */
    sw->metg = NAN;
    sw->metg_bound = 0;
    int last = -1;
    for (int k = 0; k < sw->n; k++)
        if (sw->pt[k].eff >= 0.5)
            last = k;
    if (last < 0)
        return; /* never at 50 % */
    if (last == sw->n - 1) {
        sw->metg = sw->pt[last].gran;
        sw->metg_bound = 1;
        return;
    }
    const point_t *a = &sw->pt[last], *b = &sw->pt[last + 1];
    double f = (a->eff - 0.5) / (a->eff - b->eff);
    sw->metg = exp(log(a->gran) + f * (log(b->gran) - log(a->gran)));
}

static double serial_rate(const task_graph_t *g, const tb_opts_t *o, char *err, size_t n)
{
    tb_result_t r;
    if (timed_run(&tb_serial, g, o, &r, 3)) { /* the best of 3: the ideal */
        snprintf(err, n, "%s", r.err);
        return -1;
    }
    return (double)r.tasks * (double)g->kernel.iterations / r.wall_s;
}

static int metg_mode(task_graph_t base, tb_opts_t o, const char *patterns, const char *systems,
                     int quick)
{
    if (base.kernel.type == TB_EMPTY) {
        fprintf(stderr, "tessera-taskbench: --metg needs a kernel with work (busy_wait, "
                        "compute_bound, memory_bound)\n");
        return 2;
    }
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    printf("Task Bench METG: CPU %s, %ld cores online, %d used by every system; kernel %s, "
           "width %ld, steps %ld; load average %.2f\n",
           cpu, online, o.ncpu, tb_kernel_name(base.kernel.type), base.max_width,
           base.timesteps, bench_loadavg());

    /* the largest task: about 1 ms (quick: 0.25 ms) of the serial kernel */
    double target = quick ? 2.5e-4 : 1e-3;
    tb_kernel_t cal = base.kernel;
    cal.iterations = base.kernel.type == TB_BUSY_WAIT ? 100000 : 1 << 14;
    char *scratch = NULL;
    if (cal.type == TB_MEMORY_BOUND) {
        scratch = aligned_alloc(64, (base.scratch_bytes_per_task + 63) / 64 * 64);
        tb_scratch_prepare(scratch, base.scratch_bytes_per_task);
    }
    tb_kernel_run(&cal, 0, scratch, base.scratch_bytes_per_task); /* warm up */
    double t0 = bench_now();
    tb_kernel_run(&cal, 0, scratch, base.scratch_bytes_per_task);
    double per_iter = (bench_now() - t0) / (double)cal.iterations;
    free(scratch);
    long max_iter = 1;
    while ((double)(max_iter * 2) * per_iter <= target)
        max_iter *= 2;
    printf("kernel: %.3g ns per iteration; largest task %ld iterations (%.3g ms)\n",
           per_iter * 1e9, max_iter, (double)max_iter * per_iter * 1e3);
    printf("schedulers: as named per system (Tessera's default, tsr_config_t.sched NULL, "
           "is eager)\n");

    /* the patterns */
    int pats[TB_NDEPENDENCE], npat = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", patterns);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int d = tb_dependence_parse(tok);
        if (d < 0 || npat == TB_NDEPENDENCE) {
            fprintf(stderr, "tessera-taskbench: unknown pattern '%s'\n", tok);
            return 2;
        }
        pats[npat++] = d;
    }

    /* the systems: NAME[:SCHED] */
    enum { MAX_SYS = 8 };
    const tb_system_t *sys[MAX_SYS];
    char sysname[MAX_SYS][32], syssched[MAX_SYS][64];
    int nsys = 0, status = 0;
    snprintf(buf, sizeof buf, "%s", systems);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok && nsys < MAX_SYS;
         tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        syssched[nsys][0] = 0;
        if (colon) {
            snprintf(sysname[nsys], sizeof sysname[nsys], "%.*s", (int)(colon - tok), tok);
            snprintf(syssched[nsys], sizeof syssched[nsys], "%s", colon + 1);
        } else {
            snprintf(sysname[nsys], sizeof sysname[nsys], "%s", tok);
        }
        sys[nsys] = find_system(sysname[nsys]);
        if (!sys[nsys]) {
            fprintf(stderr, "tessera-taskbench: unknown or unbuilt system '%s' (skipped)\n",
                    sysname[nsys]);
            status = 1;
            continue;
        }
        nsys++;
    }

    /* Per pattern: the ideal (the serial reference's rate at the largest
     * size, best of 3), then the sizes from large to small, the systems
     * taking turns at each size (each started for its run and stopped
     * after: other load on the machine then weighs on every system alike,
     * and an idle runtime never spins beside the one measured). */
    sweep_t *sw = calloc((size_t)(nsys * npat) + 1, sizeof *sw);
    int nsw = nsys * npat; /* sw[k * npat + i]: system k, pattern i */
    for (int i = 0; i < npat; i++) {
        task_graph_t g = base;
        g.dependence = pats[i];
        g.kernel.iterations = max_iter;
        char err[512];
        if (tb_graph_check(&g, err, sizeof err)) {
            fprintf(stderr, "tessera-taskbench: %s: %s\n", tb_dependence_name(pats[i]), err);
            free(sw);
            return 2;
        }
        double rate = serial_rate(&g, &o, err, sizeof err);
        if (rate <= 0) {
            fprintf(stderr, "tessera-taskbench: serial: %s\n", err);
            free(sw);
            return 1;
        }
        int below[MAX_SYS] = {0}, done[MAX_SYS] = {0};
        for (int k = 0; k < nsys; k++) {
            sweep_t *w = &sw[k * npat + i];
            snprintf(w->system, sizeof w->system, "%.31s", sysname[k]);
            w->pattern = pats[i];
        }
        for (long it = max_iter; it >= 1; it /= 2) {
            int active = 0;
            if (it >= max_iter / 4) { /* the ideal again, among the first turns */
                g.kernel.iterations = max_iter;
                double again = serial_rate(&g, &o, err, sizeof err);
                if (again > rate)
                    rate = again;
            }
            g.kernel.iterations = it;
            for (int k = 0; k < nsys; k++) {
                sweep_t *w = &sw[k * npat + i];
                if (done[k] || w->n >= MAX_SIZES)
                    continue;
                active = 1;
                tb_opts_t so = o;
                so.sched = syssched[k][0] ? syssched[k] : NULL;
                if (sys[k]->start(&so, err, sizeof err)) {
                    fprintf(stderr, "tessera-taskbench: %s\n", err);
                    status = 1;
                    done[k] = 1;
                    continue;
                }
                snprintf(w->sched, sizeof w->sched, "%s", sys[k]->sched_name());
                tb_result_t r;
                int rc = timed_run(sys[k], &g, &so, &r, 2);
                sys[k]->stop();
                if (rc) {
                    fprintf(stderr, "tessera-taskbench: %s %s: %s\n", sysname[k],
                            tb_dependence_name(pats[i]), r.err);
                    status = 1;
                    done[k] = 1;
                    continue;
                }
                point_t *p = &w->pt[w->n++];
                p->iter = it;
                p->tasks = r.tasks;
                p->wall = r.wall_s;
                p->gran = r.wall_s * o.ncpu / (double)r.tasks;
                p->eff = ((double)r.tasks * (double)it / r.wall_s) / (rate * o.ncpu);
                /* three sizes in a row under 25 %: the rest only gets worse */
                below[k] = p->eff < 0.25 ? below[k] + 1 : 0;
                if (below[k] == 3)
                    done[k] = 1;
            }
            if (!active)
                break;
        }
        for (int k = 0; k < nsys; k++) { /* against the best ideal measured */
            sweep_t *w = &sw[k * npat + i];
            for (int j = 0; j < w->n; j++)
                w->pt[j].eff = ((double)w->pt[j].tasks * (double)w->pt[j].iter /
                                w->pt[j].wall) / (rate * o.ncpu);
            compute_metg(w);
        }
    }

    /* the table */
    printf("\n%-8s %-16s %-20s %10s %7s %10s %12s %8s\n", "system", "scheduler", "pattern",
           "iterations", "tasks", "wall s", "gran. us", "eff.");
    for (int k = 0; k < nsw; k++) {
        const sweep_t *w = &sw[k];
        for (int j = 0; j < w->n; j++) {
            const point_t *p = &w->pt[j];
            printf("%-8s %-16s %-20s %10ld %7ld %10.5f %12.3f %7.1f%%\n", w->system, w->sched,
                   tb_dependence_name(w->pattern), p->iter, p->tasks, p->wall, p->gran * 1e6,
                   100 * p->eff);
            char e[32], gr[32], wl[32];
            bench_json_num(e, sizeof e, 1, p->eff);
            bench_json_num(gr, sizeof gr, 1, p->gran * 1e6);
            bench_json_num(wl, sizeof wl, 1, p->wall);
            printf("{\"bench\": \"taskbench\", \"figure\": \"efficiency\", \"system\": \"%s\", "
                   "\"scheduler\": \"%s\", \"pattern\": \"%s\", \"kernel\": \"%s\", "
                   "\"width\": %ld, \"steps\": %ld, \"cores\": %d, \"iterations\": %ld, "
                   "\"tasks\": %ld, \"wall_s\": %s, \"granularity_us\": %s, "
                   "\"efficiency\": %s}\n",
                   w->system, w->sched, tb_dependence_name(w->pattern),
                   tb_kernel_name(base.kernel.type), base.max_width, base.timesteps, o.ncpu,
                   p->iter, p->tasks, wl, gr, e);
        }
    }
    printf("\nMETG(50%%) (us; interpolated in log granularity between the sizes around 50%%; "
           "'<=' : every size stayed above)\n");
    printf("%-20s", "pattern");
    for (int k = 0; k < nsw; k += npat)
        printf(" %22s", sw[k].system);
    printf(" %14s\n", nsw >= 2 * npat ? "first/second" : "");
    for (int i = 0; i < npat; i++) {
        printf("%-20s", tb_dependence_name(pats[i]));
        double v[8] = {0};
        int nv = 0;
        for (int k = i; k < nsw; k += npat) {
            const sweep_t *w = &sw[k];
            char m[32];
            bench_json_num(m, sizeof m, !isnan(w->metg), w->metg * 1e6);
            printf(" %2s%20s", w->metg_bound ? "<=" : "", m);
            if (nv < 8)
                v[nv++] = w->metg;
        }
        if (nv >= 2 && !isnan(v[0]) && !isnan(v[1]))
            printf(" %14.2f", v[0] / v[1]);
        else if (nv >= 2)
            printf(" %14s", "-");
        printf("\n");
    }
    for (int k = 0; k < nsw; k++) {
        const sweep_t *w = &sw[k];
        char m[32];
        bench_json_num(m, sizeof m, !isnan(w->metg), w->metg * 1e6);
        printf("{\"bench\": \"taskbench\", \"figure\": \"metg\", \"system\": \"%s\", "
               "\"scheduler\": \"%s\", \"pattern\": \"%s\", \"kernel\": \"%s\", \"width\": %ld, "
               "\"steps\": %ld, \"cores\": %d, \"cpu\": \"%s\", \"metg_us\": %s, "
               "\"upper_bound\": %s}\n",
               w->system, w->sched, tb_dependence_name(w->pattern),
               tb_kernel_name(base.kernel.type), base.max_width, base.timesteps, o.ncpu, cpu, m,
               w->metg_bound ? "true" : "false");
    }
    printf("load average at the end: %.2f (other processes make the figures noisy)\n",
           bench_loadavg());
    free(sw);
    return status;
}

int main(int argc, char **argv)
{
    task_graph_t g;
    tb_graph_init(&g);
    tb_opts_t o = {.ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN), .sched = NULL, .fields = 0};
    const char *system = "tessera", *patterns = NULL, *systems = NULL;
    int metg = 0, quick = 0, verify = 0, width_set = 0, steps_set = 0, kernel_set = 0;
    long scratch_set = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define VAL()                                                                   \
    do {                                                                        \
        if (!v) {                                                               \
            fprintf(stderr, "tessera-taskbench: %s needs a value\n", a);        \
            return 2;                                                           \
        }                                                                       \
        i++;                                                                    \
    } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--metg")) {
            metg = 1;
        } else if (!strcmp(a, "--quick")) {
            quick = 1;
        } else if (!strcmp(a, "-verify")) {
            verify = 1;
        } else if (!strcmp(a, "--patterns")) {
            VAL();
            patterns = v;
        } else if (!strcmp(a, "--systems")) {
            VAL();
            systems = v;
        } else if (!strcmp(a, "-steps")) {
            VAL();
            g.timesteps = atol(v);
            steps_set = 1;
        } else if (!strcmp(a, "-width")) {
            VAL();
            g.max_width = atol(v);
            width_set = 1;
        } else if (!strcmp(a, "-type")) {
            VAL();
            int d = tb_dependence_parse(v);
            if (d < 0) {
                fprintf(stderr, "tessera-taskbench: unknown pattern '%s'\n", v);
                usage(stderr);
                return 2;
            }
            g.dependence = d;
        } else if (!strcmp(a, "-kernel")) {
            VAL();
            int k = tb_kernel_parse(v);
            if (k < 0) {
                fprintf(stderr, "tessera-taskbench: unknown kernel '%s'\n", v);
                usage(stderr);
                return 2;
            }
            g.kernel.type = k;
            kernel_set = 1;
        } else if (!strcmp(a, "-iter")) {
            VAL();
            g.kernel.iterations = atol(v);
        } else if (!strcmp(a, "-radix")) {
            VAL();
            g.radix = atol(v);
        } else if (!strcmp(a, "-period")) {
            VAL();
            g.period = atol(v);
        } else if (!strcmp(a, "-fraction")) {
            VAL();
            g.fraction_connected = atof(v);
        } else if (!strcmp(a, "-output")) {
            VAL();
            g.output_bytes_per_task = (size_t)atol(v);
        } else if (!strcmp(a, "-scratch")) {
            VAL();
            scratch_set = atol(v);
        } else if (!strcmp(a, "-sample")) {
            VAL();
            g.kernel.samples = atoi(v);
        } else if (!strcmp(a, "-fields")) {
            VAL();
            o.fields = atol(v);
        } else if (!strcmp(a, "-ncpu")) {
            VAL();
            o.ncpu = atoi(v);
        } else if (!strcmp(a, "-sched")) {
            VAL();
            o.sched = v;
        } else if (!strcmp(a, "-system")) {
            VAL();
            system = v;
        } else {
            fprintf(stderr, "tessera-taskbench: unknown argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (o.ncpu < 1) {
        fprintf(stderr, "tessera-taskbench: -ncpu must be >= 1\n");
        return 2;
    }
    if (g.kernel.type == TB_MEMORY_BOUND)
        g.scratch_bytes_per_task = scratch_set >= 0 ? (size_t)scratch_set : 64 * 1024;
    else if (scratch_set >= 0)
        g.scratch_bytes_per_task = (size_t)scratch_set;
    if (metg) {
        if (!kernel_set)
            g.kernel.type = TB_COMPUTE_BOUND;
        if (!width_set) /* two points per core: with one (Task Bench's METG
                           runs), two cores make every pattern alike */
            g.max_width = 2L * o.ncpu;
        if (!steps_set)
            g.timesteps = quick ? 100 : 250;
        if (!patterns)
            patterns = quick ? "stencil_1d" : "trivial,stencil_1d,fft,dom,all_to_all";
        if (!systems)
            systems =
#ifdef TB_HAVE_STARPU
                "tessera:eager,starpu:eager";
#else
                "tessera:eager";
#endif
        g.period = 3;
        return metg_mode(g, o, patterns, systems, quick);
    }
    char err[512];
    if (tb_graph_check(&g, err, sizeof err)) {
        fprintf(stderr, "tessera-taskbench: %s\n", err);
        return 2;
    }
    return run_one(&g, &o, system, verify);
}
