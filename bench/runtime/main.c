/* main.c — tessera-bench-runtime: Tessera's task runtime against StarPU,
 * side by side in one process (one runtime started at a time), on
 *   task_overhead  empty tasks, submit + wait, us per task
 *   granularity    efficiency of tasks spinning T us
 *   gemm_tiled     tiled SGEMM/DGEMM, one single-threaded BLAS call per task
 *   potrf_tiled    tiled Cholesky with priorities
 * and, for the last two, against one multithreaded OpenBLAS/LAPACKE call.
 *
 * Prints a human table, then one JSON line per figure (docs/benchmarks.md).
 * This is a benchmark, not a test: it never judges speed; it fails (exit 1)
 * only when a run fails or a result is wrong.
 */
#include "bench/bench_util.h"
#include "bench_runtime.h"
#include "cholesky_tiles.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- options -------------------------------------------------------------- */

enum { B_OVERHEAD, B_GRANULARITY, B_GEMM, B_POTRF, B_COUNT };
static const char *bench_names[B_COUNT] = {"task_overhead", "granularity",
                                           "gemm_tiled", "potrf_tiled"};

static struct {
    int quick;
    int workers;
    int only[B_COUNT]; /* all zero: run everything */
    const char *sched;        /* Tessera policy override */
    const char *starpu_sched; /* StarPU policy override */
    int reps;                 /* gemm_tiled / potrf_tiled repetitions */
} opt = {.workers = 2, .reps = 1};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tessera-bench-runtime [--quick] [--only NAME[,NAME…]] "
            "[--workers N]\n"
            "                             [--sched POLICY] "
            "[--starpu-sched POLICY]\n"
            "  --quick          smaller sizes and fewer tasks (a smoke run)\n"
            "  --only NAMES     task_overhead, granularity, gemm_tiled, "
            "potrf_tiled\n"
            "  --workers N      CPU workers and reference BLAS threads "
            "(default 2);\n"
            "                   task_overhead runs with 1 and N\n"
            "  --sched P        Tessera policy for every benchmark (default: "
            "prio for\n"
            "                   potrf_tiled, eager elsewhere)\n"
            "  --starpu-sched P the same for StarPU\n"
            "  --reps N         runs per gemm_tiled/potrf_tiled figure, "
            "median kept\n"
            "                   (default 1)\n");
}

static int parse_only(char *list)
{
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        int found = 0;
        for (int b = 0; b < B_COUNT; b++)
            if (!strcmp(tok, bench_names[b]))
                opt.only[b] = found = 1;
        if (!found) {
            fprintf(stderr, "tessera-bench-runtime: unknown benchmark '%s'\n",
                    tok);
            return -1;
        }
    }
    return 0;
}

static int selected(int b)
{
    for (int i = 0; i < B_COUNT; i++)
        if (opt.only[i])
            return opt.only[b];
    return 1;
}

/* ---- figures ---------------------------------------------------------------- */

typedef struct figure {
    const char *bench;
    char kase[48];
    int workers;
    const char *metric, *unit;
    int lower_better;
    int has_value, has_peer;
    int noisy; /* other processes used the CPUs during a run, even after
                  retries */
    double value, peer_value;
    const char *peer;
} figure_t;

static figure_t *figs;
static int nfigs, capfigs;
static int failures;

static figure_t *add_figure(const char *bench, const char *kase, int workers,
                            const char *metric, const char *unit,
                            int lower_better, const char *peer)
{
    if (nfigs == capfigs) {
        capfigs = capfigs ? 2 * capfigs : 64;
        figure_t *n = realloc(figs, (size_t)capfigs * sizeof *figs);
        if (!n) {
            fprintf(stderr, "tessera-bench-runtime: out of memory\n");
            exit(1);
        }
        figs = n;
    }
    figure_t *f = &figs[nfigs++];
    memset(f, 0, sizeof *f);
    f->bench = bench;
    snprintf(f->kase, sizeof f->kase, "%s", kase);
    f->workers = workers;
    f->metric = metric;
    f->unit = unit;
    f->lower_better = lower_better;
    f->peer = peer;
    return f;
}

static int ratio_of(const figure_t *f, double *r)
{
    if (!f->has_value || !f->has_peer || f->value <= 0 || f->peer_value <= 0)
        return 0;
    *r = f->lower_better ? f->peer_value / f->value : f->value / f->peer_value;
    return 1;
}



static double load_start;

static void print_results(const bench_side_t *peer)
{
    printf("\n");
    printf("Tessera runtime benchmarks: %d workers%s; peer: %s\n", opt.workers,
           opt.quick ? " (quick)" : "",
           peer ? peer->name : "starpu: not built");
    printf("load average: %.2f at start, %.2f at end (busy machines give "
           "noisy figures)\n", load_start, bench_loadavg());
    printf("ratio > 1 means Tessera is better (less time per task, higher "
           "efficiency or GFLOP/s)\n\n");
    printf("%-14s %-22s %3s %-12s %10s  %-8s %10s %8s\n", "bench", "case", "w",
           "metric", "tessera", "peer", "peer", "ratio");
    const char *last = NULL;
    for (int i = 0; i < nfigs; i++) {
        const figure_t *f = &figs[i];
        if (last && strcmp(last, f->bench))
            printf("\n");
        last = f->bench;
        char v[32], pv[32], r[32];
        double ratio;
        bench_json_num(v, sizeof v, f->has_value, f->value);
        bench_json_num(pv, sizeof pv, f->has_peer, f->peer_value);
        if (ratio_of(f, &ratio))
            snprintf(r, sizeof r, "%.2f%s", ratio, f->noisy ? "?" : "");
        else
            snprintf(r, sizeof r, "-");
        printf("%-14s %-22s %3d %-12s %10s  %-8s %10s %8s\n", f->bench,
               f->kase, f->workers, f->metric, f->has_value ? v : "FAILED",
               f->peer, f->has_peer ? pv : "-", r);
    }
    int nnoisy = 0;
    for (int i = 0; i < nfigs; i++)
        nnoisy += figs[i].noisy;
    if (nnoisy)
        printf("?: other processes used more than 5%% of the CPUs during a run "
               "of this figure, even after retries: distrust it\n");
    printf("\n");
    for (int i = 0; i < nfigs; i++) {
        const figure_t *f = &figs[i];
        char v[32], pv[32], r[32];
        double ratio;
        bench_json_num(v, sizeof v, f->has_value, f->value);
        bench_json_num(pv, sizeof pv, f->has_peer, f->peer_value);
        int hr = ratio_of(f, &ratio);
        bench_json_num(r, sizeof r, hr, ratio);
        printf("{\"bench\":\"%s\",\"case\":\"%s\",\"workers\":%d,"
               "\"metric\":\"%s\",\"value\":%s,\"unit\":\"%s\","
               "\"peer\":\"%s\",\"peer_value\":%s,\"ratio\":%s}\n",
               f->bench, f->kase, f->workers, f->metric, v, f->unit, f->peer,
               pv, r);
    }
    fflush(stdout);
}

/* ---- running a side ------------------------------------------------------- */

static const bench_side_t *sides[2];

static const char *policy(const bench_side_t *s, const char *dflt)
{
    const char *o = s == &bench_tessera ? opt.sched : opt.starpu_sched;
    return o ? o : dflt;
}

static int start(const bench_side_t *s, int workers, const char *dflt)
{
    /* The tile tasks run concurrently on the workers: every BLAS call must
     * stay on its worker's thread. */
    openblas_set_num_threads(1);
    if (s->start(workers, policy(s, dflt)) != 0) {
        fprintf(stderr, "tessera-bench-runtime: %s\n", s->error());
        failures++;
        return -1;
    }
    return 0;
}

static void stop(const bench_side_t *s)
{
    if (s->stop() != 0) {
        fprintf(stderr, "tessera-bench-runtime: %s\n", s->error());
        failures++;
    }
}

static void run_failed(const bench_side_t *s, const char *what)
{
    fprintf(stderr, "tessera-bench-runtime: %s %s: %s\n", s->name, what,
            s->error());
    failures++;
}

/* The submitting thread is pinned to the last allowed CPU while the
 * task_overhead and granularity runs go (after the side started its workers,
 * so they do not inherit the mask). Left free, Linux places it sometimes on
 * worker 0's core and sometimes not, and the cost per task changes by 2-4x
 * between runs of the same binary. */
static cpu_set_t saved_mask;
static int pinned;

static void pin_submitter(void)
{
    if (sched_getaffinity(0, sizeof saved_mask, &saved_mask) != 0)
        return;
    int last = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &saved_mask))
            last = c;
    if (last < 0)
        return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(last, &one);
    pinned = sched_setaffinity(0, sizeof one, &one) == 0;
}

static void unpin_submitter(void)
{
    if (pinned)
        sched_setaffinity(0, sizeof saved_mask, &saved_mask);
    pinned = 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- interference ----------------------------------------------------------
 * On a shared machine another process halves whichever side runs at that
 * moment. Around every timed run we read how much CPU time the whole machine
 * spent busy (/proc/stat) minus what this process spent (/proc/self/stat):
 * if others used more than 5% of the CPUs, the run is repeated (after a
 * pause) a few times, and the figure is marked noisy if it never was quiet.
 */
typedef struct guard {
    unsigned long long busy0, own0;
    int attempt, max, noisy;
} guard_t;


static void guard_init(guard_t *g, int max_retries)
{
    memset(g, 0, sizeof *g);
    g->max = max_retries;
}

static void guard_start(guard_t *g)
{
    bench_cpu_ticks(&g->busy0, &g->own0, 0);
}

/* After a run of `wall` seconds: 1 if it should run again. */
static int guard_again(guard_t *g, double wall, const char *what)
{
    unsigned long long busy, own;
    bench_cpu_ticks(&busy, &own, 0);
    if (busy == 0)
        return 0; /* no /proc: cannot tell */
    double hz = (double)sysconf(_SC_CLK_TCK);
    double ncpu = (double)sysconf(_SC_NPROCESSORS_ONLN);
    long long ticks = (long long)(busy - g->busy0) - (long long)(own - g->own0);
    double foreign = (double)ticks / hz;
    /* +2 ticks: the accounting is coarse */
    if (foreign <= 0.05 * wall * ncpu + 2.0 / hz)
        return 0;
    if (g->attempt < g->max) {
        g->attempt++;
        fprintf(stderr, "  (%s: other processes used %.0f%% of the CPUs; "
                        "running it again)\n",
                what, 100.0 * foreign / (wall * ncpu));
        sleep(1);
        return 1;
    }
    g->noisy = 1;
    return 0;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Store a side's value into the figure: the Tessera side is the value, the
 * peer the peer_value. */
static void put(figure_t *f, int side, double v)
{
    if (side == 0) {
        f->value = v;
        f->has_value = 1;
    } else {
        f->peer_value = v;
        f->has_peer = 1;
    }
}

/* ---- task_overhead ------------------------------------------------------- */

/* The median seconds of reps timed runs of n tasks, after a warm-up run of
 * n / 10; guarded as a whole against other processes (one run may be
 * shorter than the kernel's CPU accounting tick), *noisy set when no try was
 * quiet. -1 when a run failed. run(ctx, n, &seconds) is one run. */
typedef int (*count_run_fn)(const void *ctx, int n, double *seconds);

static double guarded_median(count_run_fn run, const void *ctx, int n, int reps,
                             const char *what, int *noisy)
{
    double t[16], sec;
    if (reps > 16)
        reps = 16;
    int ok = run(ctx, n / 10, &sec) == 0;
    guard_t g;
    guard_init(&g, 3);
    double wall;
    do {
        guard_start(&g);
        wall = bench_now();
        for (int r = 0; r < reps && ok; r++)
            ok = run(ctx, n, &t[r]) == 0;
        wall = bench_now() - wall;
    } while (ok && guard_again(&g, wall, what));
    *noisy |= g.noisy;
    return ok ? median(t, reps) : -1;
}

/* the runs: a side's empty tasks of one case, a side's spinning tasks, the
 * floor's spinning tasks */
typedef struct run_ctx {
    const bench_side_t *s;
    ovh_case_t c;
    double us;
    int workers;
} run_ctx_t;

static int run_overhead(const void *ctx, int n, double *seconds)
{
    const run_ctx_t *x = ctx;
    return x->s->overhead(x->c, n, seconds);
}

static int run_spin(const void *ctx, int n, double *seconds)
{
    const run_ctx_t *x = ctx;
    return x->s->spin(x->us, n, seconds);
}

static int run_floor(const void *ctx, int n, double *seconds)
{
    const run_ctx_t *x = ctx;
    return bench_floor_spin(x->workers, x->us, n, seconds);
}


static const char *ovh_names[OVH_NCASES] = {"independent", "rw_chain",
                                            "r_shared"};

static void bench_overhead(void)
{
    int ntasks = opt.quick ? 10000 : 100000;
    int reps = opt.quick ? 3 : 5;
    int wl[2] = {1, opt.workers};
    int nw = opt.workers > 1 ? 2 : 1;
    for (int wi = 0; wi < nw; wi++) {
        int w = wl[wi];
        figure_t *f[OVH_NCASES];
        for (int c = 0; c < OVH_NCASES; c++)
            f[c] = add_figure("task_overhead", ovh_names[c], w, "us_per_task",
                              "us", 1, "starpu");
        for (int si = 0; si < 2; si++) {
            const bench_side_t *s = sides[si];
            if (!s || start(s, w, "eager") != 0)
                continue;
            pin_submitter();
            for (int c = 0; c < OVH_NCASES; c++) {
                run_ctx_t x = {.s = s, .c = (ovh_case_t)c};
                double sec = guarded_median(run_overhead, &x, ntasks, reps, ovh_names[c],
                                            &f[c]->noisy);
                if (sec < 0) {
                    run_failed(s, ovh_names[c]);
                    continue;
                }
                double us = sec / ntasks * 1e6;
                put(f[c], si, us);
                fprintf(stderr, "  task_overhead %-8s w=%d %-12s %8.3f us/task\n",
                        s->name, w, ovh_names[c], us);
            }
            unpin_submitter();
            stop(s);
        }
    }
}

/* ---- granularity ------------------------------------------------------------ */

static void bench_granularity(void)
{
    static const double T[] = {1, 2, 5, 10, 20, 50, 100};
    enum { NT = sizeof T / sizeof T[0] };
    int w = opt.workers;
    double target = opt.quick ? 0.04 : 0.25; /* ideal seconds per run */
    int maxtasks = opt.quick ? 40000 : 200000, mintasks = 1000;
    int reps = 3;
    figure_t *f[NT], *fl[NT];
    int ntasks[NT];
    for (int i = 0; i < NT; i++) {
        char kase[32];
        snprintf(kase, sizeof kase, "spin_%gus", T[i]);
        f[i] = add_figure("granularity", kase, w, "efficiency", "fraction", 0,
                          "starpu");
        /* beside the peer, the floor: the same tasks with no runtime */
        fl[i] = add_figure("granularity", kase, w, "efficiency", "fraction", 0,
                           "floor");
        double n = target * w / (T[i] * 1e-6);
        ntasks[i] = n > maxtasks ? maxtasks : n < mintasks ? mintasks : (int)n;
    }
    for (int si = 0; si < 2; si++) {
        const bench_side_t *s = sides[si];
        if (!s || start(s, w, "eager") != 0)
            continue;
        pin_submitter();
        for (int i = 0; i < NT; i++) {
            run_ctx_t x = {.s = s, .us = T[i]};
            double sec = guarded_median(run_spin, &x, ntasks[i], reps, f[i]->kase,
                                        &f[i]->noisy);
            if (sec < 0) {
                run_failed(s, f[i]->kase);
                continue;
            }
            double eff = ntasks[i] * T[i] * 1e-6 / w / sec;
            put(f[i], si, eff);
            if (si == 0)
                put(fl[i], 0, eff);
            fprintf(stderr, "  granularity   %-8s w=%d T=%5gus %6d tasks  "
                            "efficiency %.3f\n",
                    s->name, w, T[i], ntasks[i], eff);
        }
        unpin_submitter();
        stop(s);
    }
    /* the floor, under the same pinning and guard */
    pin_submitter();
    for (int i = 0; i < NT; i++) {
        run_ctx_t x = {.us = T[i], .workers = w};
        double sec = guarded_median(run_floor, &x, ntasks[i], reps, fl[i]->kase, &fl[i]->noisy);
        double eff = sec < 0 ? -1 : ntasks[i] * T[i] * 1e-6 / w / sec;
        if (eff < 0) {
            fprintf(stderr, "  granularity   floor: no threads for %s\n", fl[i]->kase);
            failures++;
            continue;
        }
        put(fl[i], 1, eff);
        fprintf(stderr, "  granularity   floor    w=%d T=%5gus %6d tasks  efficiency %.3f\n", w,
                T[i], ntasks[i], eff);
    }
    unpin_submitter();
}

/* opt.reps timed runs of one figure, each rerun while another process
 * interfered (guard); t[r] the seconds of run r, *err the worst error
 * (NaN wins). Returns the first nonzero status of a run. */
typedef int (*rep_fn)(void *ctx, double *sec, double *err);

static int timed_reps(rep_fn fn, void *ctx, const char *kase, double *t,
                      double *err, bool *noisy)
{
    int rc = 0;
    guard_t g;
    guard_init(&g, 2);
    for (int r = 0; r < opt.reps && rc == 0; r++) {
        double e = 0;
        guard_start(&g);
        rc = fn(ctx, &t[r], &e);
        *err = e > *err || e != e ? e : *err;
        if (rc == 0 && guard_again(&g, t[r], kase))
            r--;
    }
    *noisy = g.noisy;
    return rc;
}

/* ---- gemm_tiled ------------------------------------------------------------- */

static void fill_random(void *p, size_t count, size_t elem, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
    for (size_t i = 0; i < count; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double v = (double)(x >> 11) * 0x1.0p-53 * 2.0 - 1.0;
        if (elem == 8)
            ((double *)p)[i] = v;
        else
            ((float *)p)[i] = (float)v;
    }
}

/* ||C - Cref||_F / ||Cref||_F with C tiled and Cref full (ld n). */
static double tiled_rel_error(const tiled_matrix_t *c, const void *ref)
{
    double diff = 0, nrm = 0;
    size_t n = (size_t)c->n;
    for (int tj = 0; tj < c->nt; tj++)
        for (int ti = 0; ti < c->nt; ti++) {
            int rows = tm_dim(c, ti), cols = tm_dim(c, tj);
            const char *t = tm_tile(c, ti, tj);
            for (int cc = 0; cc < cols; cc++)
                for (int r = 0; r < rows; r++) {
                    size_t li = (size_t)r + (size_t)cc * (size_t)rows;
                    size_t gi = (size_t)ti * (size_t)c->b + (size_t)r +
                                ((size_t)tj * (size_t)c->b + (size_t)cc) * n;
                    double x, y;
                    if (c->elem == 8) {
                        x = ((const double *)(const void *)t)[li];
                        y = ((const double *)ref)[gi];
                    } else {
                        x = ((const float *)(const void *)t)[li];
                        y = ((const float *)ref)[gi];
                    }
                    diff += (x - y) * (x - y);
                    nrm += y * y;
                }
        }
    return nrm > 0 ? sqrt(diff / nrm) : sqrt(diff);
}

static double ref_gemm(size_t elem, int n, const void *a, const void *b,
                       void *c, int *noisy)
{
    /* a small call first, so OpenBLAS starts its threads outside the timing */
    openblas_set_num_threads(opt.workers);
    bench_tile_gemm(elem, 64, 64, 64, a, b, c);
    double t[16];
    guard_t g;
    guard_init(&g, 2);
    for (int r = 0; r < opt.reps; r++) {
        memset(c, 0, (size_t)n * (size_t)n * elem);
        guard_start(&g);
        double t0 = bench_now();
        bench_tile_gemm(elem, n, n, n, a, b, c);
        t[r] = bench_now() - t0;
        if (guard_again(&g, t[r], "openblas reference"))
            r--;
    }
    *noisy = g.noisy;
    return median(t, opt.reps);
}

typedef struct gemm_rep {
    const bench_side_t *s;
    tiled_matrix_t *a, *b, *c;
    const void *cref;
} gemm_rep_t;

static int gemm_rep(void *ctx, double *sec, double *err)
{
    gemm_rep_t *g = ctx;
    tm_zero(g->c);
    int rc = g->s->gemm(g->a, g->b, g->c, sec);
    *err = rc ? 0 : tiled_rel_error(g->c, g->cref);
    return rc;
}

static void bench_gemm(void)
{
    static const int full_n[] = {4096, 8192}, quick_n[] = {2048};
    static const int tiles[] = {256, 512, 1024};
    const int *ns = opt.quick ? quick_n : full_n;
    int nn = opt.quick ? 1 : 2;
    int w = opt.workers;
    for (int p = 0; p < 2; p++) {
        size_t elem = p == 0 ? 4 : 8;
        const char *prec = p == 0 ? "sgemm" : "dgemm";
        double tol = elem == 8 ? 1e-12 : 1e-5;
        for (int ni = 0; ni < nn; ni++) {
            int n = ns[ni];
            size_t count = (size_t)n * (size_t)n;
            void *a = malloc(count * elem), *b = malloc(count * elem),
                 *cref = malloc(count * elem);
            if (!a || !b || !cref) {
                fprintf(stderr, "tessera-bench-runtime: no memory for "
                                "%s N=%d\n", prec, n);
                failures++;
                free(a), free(b), free(cref);
                continue;
            }
            fill_random(a, count, elem, 1);
            fill_random(b, count, elem, 2);
            double flops = 2.0 * n * (double)n * n;
            int ref_noisy = 0;
            double t_ref = ref_gemm(elem, n, a, b, cref, &ref_noisy);
            fprintf(stderr, "  gemm_tiled    openblas %s N=%d %d threads  "
                            "%7.1f GFLOP/s\n",
                    prec, n, w, flops / t_ref * 1e-9);
            for (size_t ti = 0; ti < sizeof tiles / sizeof tiles[0]; ti++) {
                char kase[48];
                snprintf(kase, sizeof kase, "%s_n%d_t%d", prec, n, tiles[ti]);
                figure_t *fs = add_figure("gemm_tiled", kase, w, "gflops",
                                          "GFLOP/s", 0, "starpu");
                figure_t *fo = add_figure("gemm_tiled", kase, w, "gflops",
                                          "GFLOP/s", 0, "openblas");
                put(fo, 1, flops / t_ref * 1e-9);
                fo->noisy = ref_noisy;
                tiled_matrix_t ta = {.n = 0}, tb = {.n = 0}, tc = {.n = 0};
                if (tm_alloc(&ta, n, tiles[ti], elem) ||
                    tm_alloc(&tb, n, tiles[ti], elem) ||
                    tm_alloc(&tc, n, tiles[ti], elem)) {
                    fprintf(stderr, "tessera-bench-runtime: no memory for "
                                    "%s\n", kase);
                    failures++;
                    tm_free(&ta), tm_free(&tb), tm_free(&tc);
                    continue;
                }
                tm_from_full(&ta, a);
                tm_from_full(&tb, b);
                for (int si = 0; si < 2; si++) {
                    const bench_side_t *s = sides[si];
                    if (!s)
                        continue;
                    if (start(s, w, "eager") != 0)
                        continue;
                    double t[16], err = 0;
                    gemm_rep_t ctx = {s, &ta, &tb, &tc, cref};
                    bool noisy = false;
                    int rc = timed_reps(gemm_rep, &ctx, kase, t, &err, &noisy);
                    fs->noisy |= noisy;
                    if (si == 0)
                        fo->noisy |= noisy;
                    stop(s);
                    if (rc != 0) {
                        run_failed(s, kase);
                        continue;
                    }
                    if (!(err <= tol)) {
                        fprintf(stderr, "tessera-bench-runtime: %s %s: "
                                        "WRONG result, relative error %.2e\n",
                                s->name, kase, err);
                        failures++;
                        continue;
                    }
                    double gf = flops / median(t, opt.reps) * 1e-9;
                    put(fs, si, gf);
                    if (si == 0) {
                        fo->value = gf;
                        fo->has_value = 1;
                    }
                    fprintf(stderr, "  gemm_tiled    %-8s %-18s %7.1f GFLOP/s"
                                    "  (error %.1e)\n",
                            s->name, kase, gf, err);
                }
                tm_free(&ta);
                tm_free(&tb);
                tm_free(&tc);
            }
            free(a);
            free(b);
            free(cref);
        }
    }
}

/* ---- potrf_tiled ---------------------------------------------------------- */

typedef struct potrf_rep {
    const bench_side_t *s;
    tiled_matrix_t *a;
    const double *orig, *ref;
} potrf_rep_t;

static int potrf_rep(void *ctx, double *sec, double *err)
{
    potrf_rep_t *p = ctx;
    tm_from_full(p->a, p->orig);
    int rc = p->s->potrf(p->a, sec);
    *err = rc ? 0 : chol_rel_error(p->a, p->ref);
    return rc;
}

static void bench_potrf(void)
{
    static const int tiles[] = {256, 512, 1024};
    int n = opt.quick ? 4096 : 8192;
    int w = opt.workers;
    size_t count = (size_t)n * (size_t)n;
    double *orig = malloc(count * sizeof *orig);
    double *ref = malloc(count * sizeof *ref);
    if (!orig || !ref) {
        fprintf(stderr, "tessera-bench-runtime: no memory for potrf N=%d\n", n);
        failures++;
        free(orig), free(ref);
        return;
    }
    chol_spd_matrix(orig, n, 1);
    openblas_set_num_threads(w);
    double warm[4] = {4.0, 1.0, 1.0, 4.0};
    LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', 2, warm, 2);
    double tr[16];
    int info = 0;
    guard_t gr;
    guard_init(&gr, 2);
    for (int r = 0; r < opt.reps && info == 0; r++) {
        memcpy(ref, orig, count * sizeof *ref);
        guard_start(&gr);
        double t0 = bench_now();
        info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', n, ref, n);
        tr[r] = bench_now() - t0;
        if (info == 0 && guard_again(&gr, tr[r], "lapacke reference"))
            r--;
    }
    double t_ref = median(tr, opt.reps);
    double flops = chol_flops(n);
    if (info != 0) {
        fprintf(stderr, "tessera-bench-runtime: LAPACKE_dpotrf info=%d\n",
                info);
        failures++;
        free(orig), free(ref);
        return;
    }
    fprintf(stderr, "  potrf_tiled   lapacke  N=%d %d threads  %7.1f GFLOP/s\n",
            n, w, flops / t_ref * 1e-9);
    for (size_t ti = 0; ti < sizeof tiles / sizeof tiles[0]; ti++) {
        char kase[48];
        snprintf(kase, sizeof kase, "dpotrf_n%d_t%d", n, tiles[ti]);
        figure_t *fs = add_figure("potrf_tiled", kase, w, "gflops", "GFLOP/s",
                                  0, "starpu");
        figure_t *fl = add_figure("potrf_tiled", kase, w, "gflops", "GFLOP/s",
                                  0, "lapacke");
        put(fl, 1, flops / t_ref * 1e-9);
        fl->noisy = gr.noisy;
        tiled_matrix_t ta;
        if (tm_alloc(&ta, n, tiles[ti], sizeof(double)) != 0) {
            fprintf(stderr, "tessera-bench-runtime: no memory for %s\n", kase);
            failures++;
            continue;
        }
        for (int si = 0; si < 2; si++) {
            const bench_side_t *s = sides[si];
            if (!s)
                continue;
            if (start(s, w, "prio") != 0)
                continue;
            double t[16], err = 0;
            potrf_rep_t ctx = {s, &ta, orig, ref};
            bool noisy = false;
            int rc = timed_reps(potrf_rep, &ctx, kase, t, &err, &noisy);
            fs->noisy |= noisy;
            if (si == 0)
                fl->noisy |= noisy;
            stop(s);
            if (rc != 0) {
                run_failed(s, kase);
                continue;
            }
            if (!(err <= CHOL_TOLERANCE)) {
                fprintf(stderr, "tessera-bench-runtime: %s %s: WRONG factor, "
                                "relative error %.2e\n",
                        s->name, kase, err);
                failures++;
                continue;
            }
            double gf = flops / median(t, opt.reps) * 1e-9;
            put(fs, si, gf);
            if (si == 0) {
                fl->value = gf;
                fl->has_value = 1;
            }
            fprintf(stderr, "  potrf_tiled   %-8s %-18s %7.1f GFLOP/s  "
                            "(error %.1e)\n",
                    s->name, kase, gf, err);
        }
        tm_free(&ta);
    }
    free(orig);
    free(ref);
}

/* ---- main ------------------------------------------------------------------- */

/* A whole number in [lo, hi]; -1 if v is anything else. */
static int parse_int(const char *v, long lo, long hi, int *out)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (end == v || *end || x < lo || x > hi)
        return -1;
    *out = (int)x;
    return 0;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--quick")) {
            opt.quick = 1;
        } else if (!strcmp(a, "--only") && v) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", v);
            if (parse_only(buf) != 0)
                return 2;
            i++;
        } else if (!strcmp(a, "--workers") && v) {
            if (parse_int(v, 1, 1024, &opt.workers) != 0) {
                usage(stderr);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--reps") && v) {
            if (parse_int(v, 1, 15, &opt.reps) != 0) {
                usage(stderr);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--sched") && v) {
            opt.sched = v;
            i++;
        } else if (!strcmp(a, "--starpu-sched") && v) {
            opt.starpu_sched = v;
            i++;
        } else {
            usage(stderr);
            return 2;
        }
    }

    sides[0] = &bench_tessera;
#ifdef BENCH_HAVE_STARPU
    sides[1] = &bench_starpu;
#else
    fprintf(stderr, "starpu: not built\n");
#endif
    load_start = bench_loadavg();
    fprintf(stderr, "tessera-bench-runtime: %d workers%s; OpenBLAS %s\n",
            opt.workers, opt.quick ? ", quick" : "", openblas_get_config());

    if (selected(B_OVERHEAD))
        bench_overhead();
    if (selected(B_GRANULARITY))
        bench_granularity();
    if (selected(B_GEMM))
        bench_gemm();
    if (selected(B_POTRF))
        bench_potrf();

    print_results(sides[1]);
    if (failures)
        fprintf(stderr, "tessera-bench-runtime: %d run(s) failed or gave a "
                        "wrong result\n", failures);
    return failures ? 1 : 0;
}
