/* main.c — tessera-bench-sched: scheduling policies on four task graphs
 * (tiled GEMM, tiled Cholesky, random layered DAG, fork-join), two
 * platforms (CPU workers; CPU workers + 2 simulated accelerators), every
 * built-in Tessera policy and StarPU's policies on the same graphs.
 *
 * Each graph is generated once (bench_sched.h) and replayed into every
 * runtime and policy; every run is checked against a sequential replay.
 * Each (graph, platform, policy, runtime) cell runs in a child process, so
 * a policy that crashes or hangs fails its row and the benchmark goes on.
 *
 * Makespans are taken on the runtime's clock (tsr_time): with
 * TESSERA_SIMULATE=<platform.json> in the environment the same cells report
 * simulated time (JSON "simulated": true).
 *
 * Prints a table and one JSON line per figure (docs/benchmarks.md), and
 * writes <out>/results.json for bench/sched/plot.py. It fails (exit 1) only
 * when a run fails or a result is wrong; bad options exit 2.
 */
#include "bench/bench_util.h"
#include "bench_sched.h"

#include <tessera/sched.h>
#include <tessera/tessera.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROG "tessera-bench-sched"

/* ---- options -------------------------------------------------------------- */

static const char *const all_graphs[] = {"gemm", "cholesky", "random", "forkjoin"};
enum { NGRAPHS = sizeof all_graphs / sizeof all_graphs[0] };
static const char *const all_platforms[] = {"cpu", "cpu+sim"};
enum { NPLATFORMS = 2 };
/* StarPU's policies run by default: those with a Tessera namesake, and ws
 * and dmda as the work-stealing and model-based references. */
static const char *const starpu_default[] = {"eager", "prio", "random", "ws", "dmda"};

#define MAX_LIST 32

typedef struct name_list {
    int n;
    char name[MAX_LIST][64];
} name_list_t;

static struct {
    int quick;
    int reps;
    int workers;
    int fork;
    int starpu;
    int calibrate;     /* --calibrate: TESSERA_CALIBRATE=1, STARPU_CALIBRATE=1 */
    int simulated;     /* TESSERA_SIMULATE is set: Tessera runs in virtual time */
    int exec;          /* ... and TESSERA_SIMULATE_EXEC=1: kernels run too */
    unsigned long seed;
    name_list_t graphs, platforms, policies; /* policies.n == 0: default */
    char out[PATH_MAX];
} opt = {.reps = 5, .fork = 1, .starpu = 1, .seed = 1};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " [--quick] [--graphs=LIST] [--policies=LIST]\n"
            "       [--platforms=LIST] [--reps=N] [--workers=N] [--out=DIR]\n"
            "       [--seed=N] [--calibrate] [--no-starpu] [--no-fork]\n"
            "  --quick            small graphs (a smoke run, < 30 s)\n"
            "  --graphs=LIST      gemm,cholesky,random,forkjoin (default: all)\n"
            "  --policies=LIST    policy names, tried on both runtimes (default:\n"
            "                     every Tessera built-in; StarPU eager,prio,random,"
            "ws,dmda)\n"
            "  --platforms=LIST   cpu,cpu+sim (default: both)\n"
            "  --reps=N           timed runs per cell: median, min and max "
            "(default 5)\n"
            "  --workers=N        threads that compute: cpu has N CPU workers,\n"
            "                     cpu+sim max(1,N-2) CPU workers + 2 simulated\n"
            "                     accelerators (default: the CPUs this process "
            "may use)\n"
            "  --out=DIR          results.json and performance models go there\n"
            "                     (default: the executable's directory)\n"
            "  --seed=N           seed of the random graphs and matrices "
            "(default 1)\n"
            "  --calibrate        record performance models of every cell, whatever\n"
            "                     the policy (TESSERA_CALIBRATE=1, STARPU_CALIBRATE=1)\n"
            "  --no-starpu        Tessera only\n"
            "  --no-fork          run every cell in this process (debugging)\n");
}

static int parse_list(const char *v, name_list_t *l, const char *const *known,
                      int nknown, const char *what)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", v);
    l->n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        int ok = !known;
        for (int i = 0; known && i < nknown; i++)
            ok |= !strcmp(tok, known[i]);
        if (!ok) {
            fprintf(stderr, PROG ": unknown %s '%s'\n", what, tok);
            return -1;
        }
        if (l->n == MAX_LIST || strlen(tok) >= sizeof l->name[0]) {
            fprintf(stderr, PROG ": too many %s names, or too long a name\n", what);
            return -1;
        }
        snprintf(l->name[l->n++], sizeof l->name[0], "%s", tok);
    }
    if (l->n == 0) {
        fprintf(stderr, PROG ": empty list of %s names\n", what);
        return -1;
    }
    return 0;
}

static int parse_long(const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi)
        return -1;
    *out = x;
    return 0;
}

/* "--name=value" or "--name value": the value, or NULL if a is not --name. */
static const char *optval(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n))
        return NULL;
    if (a[n] == '=')
        return a + n + 1;
    if (a[n] == 0 && *i + 1 < argc)
        return argv[++*i];
    return NULL;
}

static int cpus_allowed(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static int parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        long x;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--quick")) {
            opt.quick = 1;
        } else if (!strcmp(a, "--calibrate")) {
            opt.calibrate = 1;
        } else if (!strcmp(a, "--no-starpu")) {
            opt.starpu = 0;
        } else if (!strcmp(a, "--no-fork")) {
            opt.fork = 0;
        } else if ((v = optval(argc, argv, &i, "--graphs"))) {
            if (parse_list(v, &opt.graphs, all_graphs, NGRAPHS, "graph"))
                return -1;
        } else if ((v = optval(argc, argv, &i, "--platforms"))) {
            if (parse_list(v, &opt.platforms, all_platforms, NPLATFORMS,
                           "platform"))
                return -1;
        } else if ((v = optval(argc, argv, &i, "--policies"))) {
            if (parse_list(v, &opt.policies, NULL, 0, "policy"))
                return -1;
        } else if ((v = optval(argc, argv, &i, "--reps"))) {
            if (parse_long(v, 1, 15, &x)) {
                fprintf(stderr, PROG ": --reps wants 1 to 15\n");
                return -1;
            }
            opt.reps = (int)x;
        } else if ((v = optval(argc, argv, &i, "--workers"))) {
            if (parse_long(v, 1, SG_MAX_WORKERS - 2, &x)) {
                fprintf(stderr, PROG ": --workers wants 1 to %d\n",
                        SG_MAX_WORKERS - 2);
                return -1;
            }
            opt.workers = (int)x;
        } else if ((v = optval(argc, argv, &i, "--seed"))) {
            if (parse_long(v, 0, LONG_MAX, &x)) {
                fprintf(stderr, PROG ": --seed wants a whole number >= 0\n");
                return -1;
            }
            opt.seed = (unsigned long)x;
        } else if ((v = optval(argc, argv, &i, "--out"))) {
            if (!*v || strlen(v) >= sizeof opt.out - 64) {
                fprintf(stderr, PROG ": bad --out\n");
                return -1;
            }
            snprintf(opt.out, sizeof opt.out, "%s", v);
        } else {
            fprintf(stderr, PROG ": unknown or incomplete option '%s'\n", a);
            return -1;
        }
    }
    if (!opt.graphs.n)
        parse_list("gemm,cholesky,random,forkjoin", &opt.graphs, NULL, 0, "graph");
    if (!opt.platforms.n)
        parse_list("cpu,cpu+sim", &opt.platforms, NULL, 0, "platform");
    if (!opt.workers)
        opt.workers = cpus_allowed();
    if (opt.workers > SG_MAX_WORKERS - 2)
        opt.workers = SG_MAX_WORKERS - 2;
    if (!opt.out[0]) {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n > 0) {
            exe[n] = 0;
            char *slash = strrchr(exe, '/');
            if (slash)
                *slash = 0;
            snprintf(opt.out, sizeof opt.out, "%s", exe);
        } else {
            snprintf(opt.out, sizeof opt.out, ".");
        }
    }
    return 0;
}

/* ---- rows ------------------------------------------------------------------ */

enum { M_MAKESPAN, M_IDLE, M_MOVED, M_SCHED, M_COPIES, NMETRICS };

typedef struct row {
    char graph[16];
    char platform[16];
    char policy[64];
    char runtime[16];
    int ran;           /* every run finished */
    int check;         /* 1 PASS, 0 FAIL (some run wrong), -1 not checked */
    double maxerr;
    int nworkers;
    double makespan_ms, idle_s, moved_mib, sched_us; /* medians */
    double lo[NMETRICS], hi[NMETRICS]; /* min and max over the reps */
    double runs_ms[16];  /* each rep's makespan, in run order */
    int simulated;     /* Tessera in virtual time (TESSERA_SIMULATE) */
    double sched_copies; /* empty replays: copies per task (median) */
    double sched_wait_us; /* empty replays: workers' time waiting for data,
                             per task (median; 0 where unknown) */
    double foreign;    /* share of the CPUs other processes used meanwhile */
    int noisy;         /* foreign > 5%, even after a retry */
    char error[240];
} row_t;

static row_t *rows;
static int nrows, caprows;
static int failures;

static row_t *new_row(void)
{
    if (nrows == caprows) {
        caprows = caprows ? 2 * caprows : 64;
        row_t *n = realloc(rows, (size_t)caprows * sizeof *rows);
        if (!n) {
            fprintf(stderr, PROG ": out of memory\n");
            exit(1);
        }
        rows = n;
    }
    memset(&rows[nrows], 0, sizeof *rows);
    return &rows[nrows++];
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n-1] (sorts v); *lo, *hi: its smallest and largest. */
static double median(double *v, int n, double *lo, double *hi)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    *lo = v[0];
    *hi = v[n - 1];
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- one cell: a graph on one platform, policy and runtime ---------------- */

static void platform_of(const char *name, sg_platform_t *p)
{
    memset(p, 0, sizeof *p);
    p->name = name;
    if (!strcmp(name, "cpu")) {
        p->ncpu = opt.workers;
    } else {
        p->nsim = 2;
        p->ncpu = opt.workers > 3 ? opt.workers - 2 : 1;
        p->sim_bandwidth = 2e9;
        p->sim_latency = 10e-6;
        p->sim_mem = (size_t)64 << 20;
    }
}

/* dir/name into buf (opt.out is short enough: checked by the parser) */
static void path_join(char *buf, size_t n, const char *dir, const char *name)
{
    if (snprintf(buf, n, "%s/%s", dir, name) >= (int)n)
        buf[0] = 0;
}

/* Tessera's models go to TESSERA_PERFMODEL_DIR when it is set (so that a
 * simulation can read what a calibration run recorded), else under --out. */
static void model_dir(const sg_side_t *s, char *buf, size_t n)
{
    const char *env = getenv("TESSERA_PERFMODEL_DIR");
    if (s == &sg_tessera && env) {
        snprintf(buf, n, "%s", env);
        return;
    }
    char sub[64];
    snprintf(sub, sizeof sub, "models/%s", s->name);
    path_join(buf, n, opt.out, sub);
}

/* Warm-up (one real and one empty run: threads started, pages touched,
 * models fed), then opt.reps real runs, each checked, then opt.reps empty
 * runs. Fills r; returns with r->ran = 0 and r->error on a failure. */
static void run_cell(const sg_side_t *s, graph_t *g, const sg_platform_t *p,
                     row_t *r)
{
    char dir[PATH_MAX];
    model_dir(s, dir, sizeof dir);
    if (s->start(p, r->policy, dir) != 0) {
        snprintf(r->error, sizeof r->error, "%s", s->error());
        return;
    }
    double mk[16], idle[16], moved[16], empty[16], ecopies[16], ewait[16];
    sg_result_t res;
    int ok = 1;
    r->check = 1;
    for (int i = -1; i < opt.reps && ok; i++) {
        graph_reset(g);
        ok = s->run(g, 0, &res) == 0;
        if (!ok)
            break;
        r->simulated = res.simulated;
        /* Simulated without TESSERA_SIMULATE_EXEC: no kernel ran, the data
         * are phantom, there is nothing to check. */
        if (res.simulated && !opt.exec) {
            r->check = -1;
        } else {
            double err;
            if (!graph_check(g, &err))
                r->check = 0;
            if (!(err <= r->maxerr))
                r->maxerr = err;
        }
        if (i < 0)
            continue; /* warm-up */
        mk[i] = res.makespan_s;
        r->runs_ms[i] = res.makespan_s * 1e3;
        idle[i] = res.nworkers * res.makespan_s - res.busy_s;
        moved[i] = (double)res.moved / (1 << 20);
        r->nworkers = res.nworkers;
    }
    for (int i = -1; i < opt.reps && ok; i++) {
        ok = s->run(g, 1, &res) == 0;
        if (ok && i >= 0) {
            empty[i] = res.makespan_s / g->ntasks * 1e6;
            ecopies[i] = (double)res.copies / g->ntasks;
            ewait[i] = res.wait_data_s / g->ntasks * 1e6;
        }
    }
    if (!ok)
        snprintf(r->error, sizeof r->error, "%s", s->error());
    if (s->stop() != 0 && ok) {
        ok = 0;
        snprintf(r->error, sizeof r->error, "%s", s->error());
    }
    if (!ok)
        return;
    r->ran = 1;
    r->makespan_ms = median(mk, opt.reps, &r->lo[M_MAKESPAN], &r->hi[M_MAKESPAN]);
    r->idle_s = median(idle, opt.reps, &r->lo[M_IDLE], &r->hi[M_IDLE]);
    r->moved_mib = median(moved, opt.reps, &r->lo[M_MOVED], &r->hi[M_MOVED]);
    r->sched_us = median(empty, opt.reps, &r->lo[M_SCHED], &r->hi[M_SCHED]);
    double lo, hi;
    r->sched_copies = median(ecopies, opt.reps, &r->lo[M_COPIES], &r->hi[M_COPIES]);
    r->sched_wait_us = median(ewait, opt.reps, &lo, &hi);
    r->makespan_ms *= 1e3;
    r->lo[M_MAKESPAN] *= 1e3;
    r->hi[M_MAKESPAN] *= 1e3;
}

static const char *signame(int sig)
{
    const char *d = strsignal(sig);
    return d ? d : "signal";
}

/* The cell in a child process: a crash or a hang fails the row only. */
static void run_cell_isolated(const sg_side_t *s, graph_t *g,
                              const sg_platform_t *p, row_t *r)
{
    if (!opt.fork) {
        run_cell(s, g, p, r);
        return;
    }
    fflush(NULL);
    int fd[2];
    if (pipe(fd) != 0) {
        snprintf(r->error, sizeof r->error, "pipe: %s", strerror(errno));
        return;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(r->error, sizeof r->error, "fork: %s", strerror(errno));
        close(fd[0]);
        close(fd[1]);
        return;
    }
    if (pid == 0) {
        close(fd[0]);
        run_cell(s, g, p, r);
        const char *b = (const char *)r;
        size_t left = sizeof *r;
        while (left) {
            ssize_t w = write(fd[1], b, left);
            if (w <= 0)
                _exit(3);
            b += w;
            left -= (size_t)w;
        }
        _exit(0);
    }
    close(fd[1]);
    /* A generous bound: warm-up + 2 x reps runs, each at most 20x the
     * sequential time (plus starting the runtime). */
    double limit = 60 + 20 * g->seq_s * (opt.reps + 1);
    double t_end = bench_now() + limit;
    row_t got;
    size_t have = 0;
    int timed_out = 0;
    while (have < sizeof got) {
        double left = t_end - bench_now();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd pfd = {.fd = fd[0], .events = POLLIN};
        int pr = poll(&pfd, 1, (int)(left * 1000) + 1);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
        ssize_t n = read(fd[0], (char *)&got + have, sizeof got - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* the child died */
        have += (size_t)n;
    }
    close(fd[0]);
    if (timed_out)
        kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (have == sizeof got) {
        *r = got;
    } else if (timed_out) {
        snprintf(r->error, sizeof r->error, "no result after %.0f s (hung?); "
                 "killed", limit);
    } else if (WIFSIGNALED(status)) {
        snprintf(r->error, sizeof r->error, "crashed: %s", signame(WTERMSIG(status)));
    } else {
        snprintf(r->error, sizeof r->error, "died with status %d",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
}

/* ---- other processes -------------------------------------------------------
 * As in bench/runtime: around a cell, the CPU time the whole machine spent
 * busy (/proc/stat) minus what this process and its children spent
 * (/proc/self/stat) is what other processes took. Above 5% of the CPUs the
 * cell runs again (a few times per invocation at most, so that a machine
 * that is busy all along does not double the run) and is marked noisy if it
 * never was quiet.
 */

static int retries_left = 6;

/* Run a cell, again while other processes used more than 5% of the CPUs. */
static void run_cell_guarded(const sg_side_t *s, graph_t *g,
                             const sg_platform_t *p, row_t *r)
{
    row_t start = *r;
    double hz = (double)sysconf(_SC_CLK_TCK);
    double ncpu = (double)sysconf(_SC_NPROCESSORS_ONLN);
    for (;;) {
        unsigned long long b0, o0, b1, o1;
        bench_cpu_ticks(&b0, &o0, 1);
        double t0 = bench_now();
        run_cell_isolated(s, g, p, r);
        double wall = bench_now() - t0;
        bench_cpu_ticks(&b1, &o1, 1);
        if (b0 == 0 || b1 == 0 || wall <= 0)
            return; /* no /proc: cannot tell */
        long long foreign = (long long)(b1 - b0) - (long long)(o1 - o0);
        r->foreign = foreign > 0 ? (double)foreign / hz / (wall * ncpu) : 0;
        /* +2 ticks: the accounting is coarse */
        /* virtual time does not depend on the load */
        if (!r->ran || r->simulated || (double)foreign <= 0.05 * wall * ncpu * hz + 2)
            return;
        if (retries_left <= 0) {
            r->noisy = 1;
            return;
        }
        retries_left--;
        fprintf(stderr, "  (%s %s %s %s: other processes used %.0f%% of the "
                        "CPUs; running it again)\n",
                r->graph, r->platform, r->policy, r->runtime, 100 * r->foreign);
        sleep(1);
        *r = start;
    }
}

/* ---- policies ------------------------------------------------------------- */

static int tessera_builtin(const char *name)
{
    for (int i = 0; tsr_sched_builtin_at(i); i++)
        if (!strcmp(tsr_sched_builtin_at(i)->name, name))
            return 1;
    return 0;
}

static int in_starpu_default(const char *name)
{
    for (size_t i = 0; i < sizeof starpu_default / sizeof starpu_default[0]; i++)
        if (!strcmp(starpu_default[i], name))
            return 1;
    return 0;
}

/* The names to run: --policies, or Tessera's built-ins then StarPU's
 * defaults that Tessera lacks. */
static void policy_names(name_list_t *l)
{
    if (opt.policies.n) {
        *l = opt.policies;
        return;
    }
    l->n = 0;
    for (int i = 0; tsr_sched_builtin_at(i) && l->n < MAX_LIST; i++)
        snprintf(l->name[l->n++], sizeof l->name[0], "%s",
                 tsr_sched_builtin_at(i)->name);
    for (size_t i = 0; i < sizeof starpu_default / sizeof starpu_default[0]; i++)
        if (!tessera_builtin(starpu_default[i]) && l->n < MAX_LIST)
            snprintf(l->name[l->n++], sizeof l->name[0], "%s", starpu_default[i]);
}

static int run_tessera(const char *policy)
{
    return opt.policies.n ? 1 : tessera_builtin(policy);
}

static int run_starpu(const char *policy, const sg_platform_t *p)
{
    if (!opt.starpu || p->nsim || strchr(policy, '/'))
        return 0;
#ifdef BENCH_HAVE_STARPU
    return opt.policies.n ? 1 : in_starpu_default(policy);
#else
    (void)in_starpu_default;
    return 0;
#endif
}

/* ---- output ---------------------------------------------------------------- */

/* Rows a and b are the same (graph, platform, policy) cell, of any runtime.
 * Not inlined: GCC 12 with -fsanitize=address at -O3 sees the rows array
 * as possibly empty there and rejects the compares (-Wstringop-overread). */
__attribute__((noinline)) static int same_cell(const row_t *a, const row_t *b)
{
    return !strcmp(a->graph, b->graph) && !strcmp(a->platform, b->platform) &&
           !strcmp(a->policy, b->policy);
}

static const row_t *peer_row(const row_t *r)
{
    for (int i = 0; i < nrows; i++)
        if (!strcmp(rows[i].runtime, "starpu") && same_cell(&rows[i], r))
            return &rows[i];
    return NULL;
}

/* Ran, and right (or not checkable: simulated, phantom data). */
static int good(const row_t *r)
{
    return r && r->ran && r->check != 0;
}



static double load_start;
static graph_t graphs[NGRAPHS];
static int ngraphs_built;

static void print_table(void)
{
    sg_platform_t ps;
    platform_of("cpu+sim", &ps);
    printf("\n");
    printf("Scheduling policies: cpu = %d CPU workers; cpu+sim = %d CPU "
           "worker%s + %d simulated accelerators (%zu MiB, %.0f MB/s, %.0f us "
           "per copy)%s\n",
           opt.workers, ps.ncpu, ps.ncpu > 1 ? "s" : "", ps.nsim, ps.sim_mem >> 20,
           ps.sim_bandwidth * 1e-6, ps.sim_latency * 1e6, opt.quick ? "; quick" : "");
    printf("median (and min-max) of %d runs after a warm-up; %s; load average "
           "%.2f at start, %.2f at end\n",
           opt.reps,
           opt.simulated ? "Tessera SIMULATED (TESSERA_SIMULATE): virtual time"
                         : "wall time",
           load_start, bench_loadavg());
    for (int i = 0; i < ngraphs_built; i++) {
        const graph_t *g = &graphs[i];
        printf("  %-9s %s: %d tasks, %d edges; sequential %.1f ms, critical "
               "path %.1f ms\n",
               g->name, g->params, g->ntasks, g->nedges, g->seq_s * 1e3,
               g->cp_s * 1e3);
    }
    printf("sp/ts = StarPU makespan / Tessera makespan, same policy name "
           "(> 1: Tessera faster)\n\n");
    printf("%-9s %-8s %-8s %-8s %11s %15s %9s %9s %13s %11s %6s  %s\n", "graph",
           "platform", "policy", "runtime", "makespan_ms", "(min-max)", "idle_s",
           "moved_mib", "sched_us/task", "copies/task", "sp/ts", "check");
    const char *last = NULL;
    for (int i = 0; i < nrows; i++) {
        const row_t *r = &rows[i];
        if (last && strcmp(last, r->graph))
            printf("\n");
        last = r->graph;
        if (!r->ran) {
            printf("%-9s %-8s %-8s %-8s FAILED: %s\n", r->graph, r->platform,
                   r->policy, r->runtime, r->error);
            continue;
        }
        char ratio[16] = "-";
        const row_t *pr = strcmp(r->runtime, "tessera") ? NULL : peer_row(r);
        if (good(r) && good(pr) && r->makespan_ms > 0)
            snprintf(ratio, sizeof ratio, "%.2f", pr->makespan_ms / r->makespan_ms);
        char chk[48];
        if (r->check == 1)
            snprintf(chk, sizeof chk, "PASS");
        else if (r->check < 0)
            snprintf(chk, sizeof chk, "- (simulated)");
        else
            snprintf(chk, sizeof chk, "FAIL (err %.3g)", r->maxerr);
        char range[32];
        snprintf(range, sizeof range, "%.4g-%.4g", r->lo[M_MAKESPAN],
                 r->hi[M_MAKESPAN]);
        printf("%-9s %-8s %-8s %-8s %10.4g%c %15s %9.4g %9.4g %13.4g %11.3g %6s  %s\n",
               r->graph, r->platform, r->policy, r->runtime, r->makespan_ms,
               r->noisy ? '?' : ' ', range, r->idle_s, r->moved_mib, r->sched_us,
               r->sched_copies, ratio, chk);
    }
    int nnoisy = 0;
    double worst = 0;
    for (int i = 0; i < nrows; i++)
        if (rows[i].noisy) {
            nnoisy++;
            worst = rows[i].foreign > worst ? rows[i].foreign : worst;
        }
    if (nnoisy)
        printf("?: other processes used more than 5%% of the CPUs while this "
               "cell ran, even after a retry (up to %.0f%%): distrust it\n",
               100 * worst);
    int sim = 0;
    for (int i = 0; i < opt.platforms.n; i++)
        sim |= !strcmp(opt.platforms.name[i], "cpu+sim");
    if (sim && opt.starpu)
        printf("StarPU runs on cpu only: it has no simulated accelerators.\n");
#ifndef BENCH_HAVE_STARPU
    printf("starpu: not built (no starpu-1.3 found by meson)\n");
#endif
    printf("\n");
}

/* One JSON line per figure: Tessera's value, StarPU's as the peer. */
static void print_json(void)
{
    static const char *metrics[NMETRICS] = {"makespan_ms", "idle_s", "moved_mib",
                                            "sched_us_per_task",
                                            "sched_copies_per_task"};
    static const char *units[NMETRICS] = {"ms", "s", "MiB", "us", "copies"};
    for (int i = 0; i < nrows; i++) {
        const row_t *r = &rows[i];
        const row_t *p = NULL;
        if (!strcmp(r->runtime, "tessera")) {
            p = peer_row(r);
        } else {
            /* a StarPU row without a Tessera one gets its own lines */
            int has_ts = 0;
            for (int j = 0; j < nrows; j++)
                has_ts |= !strcmp(rows[j].runtime, "tessera") && same_cell(&rows[j], r);
            if (has_ts)
                continue;
            p = r;
            r = NULL;
        }
        /* the row whose names and spread the lines carry: never NULL */
        const row_t *any = &rows[i];
        for (int m = 0; m < NMETRICS; m++) {
            double v = 0, pv = 0;
            const row_t *x[2] = {r, p};
            double *dst[2] = {&v, &pv};
            for (int k = 0; k < 2; k++)
                if (x[k])
                    *dst[k] = m == 0   ? x[k]->makespan_ms
                              : m == 1 ? x[k]->idle_s
                              : m == 2 ? x[k]->moved_mib
                              : m == 3 ? x[k]->sched_us
                                       : x[k]->sched_copies;
            int hv = good(r), hp = good(p);
            char vs[32], ps[32], rs[32], lo[32], hi[32];
            bench_json_num(vs, sizeof vs, hv, v);
            bench_json_num(ps, sizeof ps, hp, pv);
            /* every metric here: lower is better */
            bench_json_num(rs, sizeof rs, hv && hp && v > 0 && pv > 0, pv / v);
            /* the spread of the value: Tessera's (or StarPU's alone) */
            bench_json_num(lo, sizeof lo, good(any), any->lo[m]);
            bench_json_num(hi, sizeof hi, good(any), any->hi[m]);
            /* the makespan's line also lists every rep's, in run order */
            char runs[16 * 24 + 16] = "";
            if (m == M_MAKESPAN && good(any)) {
                size_t len = (size_t)snprintf(runs, sizeof runs, ",\"runs\":[");
                for (int k = 0; k < opt.reps && len < sizeof runs; k++)
                    len += (size_t)snprintf(runs + len, sizeof runs - len, "%s%.6g",
                                            k ? "," : "", any->runs_ms[k]);
                if (len < sizeof runs)
                    snprintf(runs + len, sizeof runs - len, "]");
            }
            printf("{\"bench\":\"sched\",\"case\":\"%s/%s/%s\",\"workers\":%d,"
                   "\"metric\":\"%s\",\"value\":%s,\"unit\":\"%s\","
                   "\"min\":%s,\"max\":%s,\"reps\":%d%s,\"simulated\":%s,"
                   "\"peer\":\"starpu\",\"peer_value\":%s,\"ratio\":%s}\n",
                   any->graph, any->platform, any->policy,
                   r && r->ran ? r->nworkers : any->nworkers, metrics[m], vs,
                   units[m], lo, hi, opt.reps, runs, any->simulated ? "true" : "false",
                   ps, rs);
        }
    }
    fflush(stdout);
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, int has, double v)
{
    if (has && isfinite(v))
        fprintf(f, "%.6g", v);
    else
        fprintf(f, "null");
}

static int write_results(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, PROG ": cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    sg_platform_t ps;
    platform_of("cpu+sim", &ps);
    fprintf(f, "{\"bench\":\"sched\",\"quick\":%s,\"simulated\":%s,\"reps\":%d,"
               "\"workers\":%d,"
               "\"sim\":{\"ncpu\":%d,\"nsim\":%d,\"mem_mib\":%zu,"
               "\"bandwidth\":%g,\"latency\":%g},\n \"graphs\":[",
            opt.quick ? "true" : "false", opt.simulated ? "true" : "false",
            opt.reps, opt.workers, ps.ncpu, ps.nsim,
            ps.sim_mem >> 20, ps.sim_bandwidth, ps.sim_latency);
    for (int i = 0; i < ngraphs_built; i++) {
        const graph_t *g = &graphs[i];
        fprintf(f, "%s\n  {\"name\":", i ? "," : "");
        json_str(f, g->name);
        fprintf(f, ",\"params\":");
        json_str(f, g->params);
        fprintf(f, ",\"tasks\":%d,\"edges\":%d,\"sequential_ms\":%.6g,"
                   "\"critical_path_ms\":%.6g}",
                g->ntasks, g->nedges, g->seq_s * 1e3, g->cp_s * 1e3);
    }
    fprintf(f, "],\n \"rows\":[");
    for (int i = 0; i < nrows; i++) {
        const row_t *r = &rows[i];
        fprintf(f, "%s\n  {\"graph\":", i ? "," : "");
        json_str(f, r->graph);
        fprintf(f, ",\"platform\":");
        json_str(f, r->platform);
        fprintf(f, ",\"policy\":");
        json_str(f, r->policy);
        fprintf(f, ",\"runtime\":");
        json_str(f, r->runtime);
        fprintf(f, ",\"ok\":%s,\"check\":%s,\"max_err\":", r->ran ? "true" : "false",
                !r->ran || r->check < 0 ? "null"
                : r->check == 1         ? "\"PASS\""
                                        : "\"FAIL\"");
        json_num(f, r->ran, r->maxerr);
        fprintf(f, ",\"workers\":%d,\"makespan_ms\":", r->nworkers);
        json_num(f, r->ran, r->makespan_ms);
        fprintf(f, ",\"idle_s\":");
        json_num(f, r->ran, r->idle_s);
        fprintf(f, ",\"moved_mib\":");
        json_num(f, r->ran, r->moved_mib);
        fprintf(f, ",\"sched_us_per_task\":");
        json_num(f, r->ran, r->sched_us);
        static const char *mnames[NMETRICS] = {"makespan_ms", "idle_s",
                                               "moved_mib", "sched_us_per_task",
                                               "sched_copies_per_task"};
        for (int m = 0; m < NMETRICS; m++) {
            fprintf(f, ",\"%s_min\":", mnames[m]);
            json_num(f, r->ran, r->lo[m]);
            fprintf(f, ",\"%s_max\":", mnames[m]);
            json_num(f, r->ran, r->hi[m]);
        }
        fprintf(f, ",\"sched_copies_per_task\":");
        json_num(f, r->ran, r->sched_copies);
        fprintf(f, ",\"sched_wait_data_us_per_task\":");
        json_num(f, r->ran, r->sched_wait_us);
        fprintf(f, ",\"makespan_ms_runs\":[");
        for (int k = 0; r->ran && k < opt.reps; k++)
            fprintf(f, "%s%.6g", k ? "," : "", r->runs_ms[k]);
        fprintf(f, "]");
        fprintf(f, ",\"simulated\":%s", r->simulated ? "true" : "false");
        fprintf(f, ",\"noisy\":%s,\"foreign_cpu\":%.3f,\"error\":",
                r->noisy ? "true" : "false", r->foreign);
        if (r->ran)
            fprintf(f, "null");
        else
            json_str(f, r->error);
        fprintf(f, "}");
    }
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0) {
        fprintf(stderr, PROG ": cannot write %s\n", path);
        return -1;
    }
    return 0;
}

static int mkdirs(const char *path)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(buf, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

/* ---- main ------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    if (parse_args(argc, argv) != 0) {
        usage(stderr);
        return 2;
    }
    /* The configuration comes from the options: variables that would
     * override it are dropped. TESSERA_SIMULATE, TESSERA_SIMULATE_EXEC,
     * TESSERA_PERFMODEL_DIR and TESSERA_CALIBRATE pass through to the
     * cells: they choose the clock and where models come from, not the
     * cell's platform or policy. */
    static const char *const override[] = {
        "TESSERA_NCPU", "TESSERA_SCHED", "TESSERA_NSIM", "TESSERA_SIM_BW",
        "TESSERA_SIM_LATENCY", "TESSERA_LIMIT_SIM_MEM", "TESSERA_NCUDA"};
    for (size_t i = 0; i < sizeof override / sizeof override[0]; i++)
        if (getenv(override[i])) {
            fprintf(stderr, PROG ": ignoring %s (the options decide)\n",
                    override[i]);
            unsetenv(override[i]);
        }
    const char *sim = getenv("TESSERA_SIMULATE");
    opt.simulated = sim && *sim;
    const char *ex = getenv("TESSERA_SIMULATE_EXEC");
    opt.exec = opt.simulated && ex && atoi(ex) != 0;
    if (opt.simulated)
        fprintf(stderr, PROG ": TESSERA_SIMULATE=%s: Tessera's makespans are "
                        "simulated time%s\n",
                sim, opt.exec ? " (kernels run: results checked)" : "");
    if (opt.calibrate) {
        setenv("TESSERA_CALIBRATE", "1", 1);
        setenv("STARPU_CALIBRATE", "1", 1);
    }
    char dir[PATH_MAX];
    path_join(dir, sizeof dir, opt.out, "models");
    if (mkdirs(opt.out) != 0 || mkdirs(dir) != 0) {
        fprintf(stderr, PROG ": cannot create %s: %s\n", dir, strerror(errno));
        return 2;
    }
    for (int s = 0; s < 2; s++) {
        const sg_side_t *side = &sg_tessera;
#ifdef BENCH_HAVE_STARPU
        if (s)
            side = &sg_starpu;
#else
        if (s)
            continue;
#endif
        model_dir(side, dir, sizeof dir);
        mkdirs(dir);
    }
#ifndef BENCH_HAVE_STARPU
    fprintf(stderr, "starpu: not built\n");
#endif
    load_start = bench_loadavg();
    name_list_t pol;
    policy_names(&pol);
    graph_params_t gp;
    graph_params_default(&gp, opt.quick);
    gp.seed = opt.seed;
    fprintf(stderr, PROG ": %d workers%s, %d reps; results under %s\n",
            opt.workers, opt.quick ? ", quick" : "", opt.reps, opt.out);
    model_dir(&sg_tessera, dir, sizeof dir);
    fprintf(stderr, PROG ": Tessera's performance models in %s%s\n", dir,
            getenv("TESSERA_CALIBRATE") ? " (TESSERA_CALIBRATE set)" : "");

    for (int gi = 0; gi < opt.graphs.n; gi++) {
        graph_t *g = &graphs[ngraphs_built];
        char err[256];
        if (graph_build(g, opt.graphs.name[gi], &gp, err, sizeof err) != 0 ||
            graph_reference(g, err, sizeof err) != 0) {
            fprintf(stderr, PROG ": %s\n", err);
            failures++;
            graph_free(g);
            continue;
        }
        ngraphs_built++;
        fprintf(stderr, "%s: %s: %d tasks, %d edges, sequential %.1f ms, "
                        "critical path %.1f ms\n",
                g->name, g->params, g->ntasks, g->nedges, g->seq_s * 1e3,
                g->cp_s * 1e3);
        for (int pi = 0; pi < opt.platforms.n; pi++) {
            sg_platform_t p;
            platform_of(opt.platforms.name[pi], &p);
            for (int k = 0; k < pol.n; k++) {
                for (int s = 0; s < 2; s++) {
                    const sg_side_t *side = &sg_tessera;
                    if (s == 0 && !run_tessera(pol.name[k]))
                        continue;
                    if (s == 1) {
                        if (!run_starpu(pol.name[k], &p))
                            continue;
#ifdef BENCH_HAVE_STARPU
                        side = &sg_starpu;
#endif
                    }
                    row_t *r = new_row();
                    snprintf(r->graph, sizeof r->graph, "%s", g->name);
                    snprintf(r->platform, sizeof r->platform, "%s", p.name);
                    snprintf(r->policy, sizeof r->policy, "%s", pol.name[k]);
                    snprintf(r->runtime, sizeof r->runtime, "%s", side->name);
                    row_t tmp = *r;
                    run_cell_guarded(side, g, &p, &tmp);
                    *r = tmp;
                    if (!r->ran) {
                        failures++;
                        fprintf(stderr, "  %-8s %-8s %-8s %-8s FAILED: %s\n",
                                r->graph, r->platform, r->policy, r->runtime,
                                r->error);
                        continue;
                    }
                    if (r->check == 0)
                        failures++;
                    fprintf(stderr, "  %-8s %-8s %-8s %-8s makespan %8.2f ms  "
                                    "idle %7.4f s  moved %7.1f MiB  sched "
                                    "%6.2f us/task (%.2f copies, %.1f us "
                                    "waiting for data)  %s%s\n",
                            r->graph, r->platform, r->policy, r->runtime,
                            r->makespan_ms, r->idle_s, r->moved_mib, r->sched_us,
                            r->sched_copies, r->sched_wait_us,
                            r->check == 1 ? "PASS" : r->check < 0 ? "-" : "FAIL",
                            r->noisy ? "  (noisy)" : "");
                }
            }
        }
    }

    print_table();
    print_json();
    char path[PATH_MAX];
    path_join(path, sizeof path, opt.out, "results.json");
    if (write_results(path) == 0)
        fprintf(stderr, PROG ": wrote %s\n", path);
    else
        failures++;
    for (int i = 0; i < ngraphs_built; i++)
        graph_free(&graphs[i]);
    free(rows);
    if (failures)
        fprintf(stderr, PROG ": %d run(s) failed or gave a wrong result\n",
                failures);
    return failures ? 1 : 0;
}
