/* core.c — the task graph of core.h: patterns, input validation, kernels.
 * Written for Tessera from the model's description (see core.h). */
#include "core.h"

#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const dep_names[TB_NDEPENDENCE] = {
    "trivial", "no_comm", "stencil_1d", "stencil_1d_periodic", "dom", "tree",
    "fft", "all_to_all", "nearest", "spread", "random_nearest",
};
static const char *const kernel_names[TB_NKERNEL] = {
    "empty", "busy_wait", "compute_bound", "memory_bound",
};

const char *tb_dependence_name(tb_dependence_t d)
{
    return d >= 0 && d < TB_NDEPENDENCE ? dep_names[d] : "?";
}

const char *tb_kernel_name(tb_kernel_type_t k)
{
    return k >= 0 && k < TB_NKERNEL ? kernel_names[k] : "?";
}

int tb_dependence_parse(const char *name)
{
    for (int i = 0; i < TB_NDEPENDENCE; i++)
        if (!strcmp(name, dep_names[i]))
            return i;
    return -1;
}

int tb_kernel_parse(const char *name)
{
    for (int i = 0; i < TB_NKERNEL; i++)
        if (!strcmp(name, kernel_names[i]))
            return i;
    return -1;
}

static int needs_period(tb_dependence_t d)
{
    return d == TB_SPREAD || d == TB_RANDOM_NEAREST;
}

void tb_graph_init(task_graph_t *g)
{
    memset(g, 0, sizeof *g);
    g->graph_index = 0;
    g->timesteps = 4;
    g->max_width = 4;
    g->dependence = TB_TRIVIAL;
    g->radix = 3;
    g->period = 3; /* read by spread and random_nearest only */
    g->fraction_connected = 0.25;
    g->kernel.type = TB_EMPTY;
    g->kernel.iterations = 0;
    g->kernel.samples = 1;
    g->output_bytes_per_task = sizeof(tb_record_t);
    g->scratch_bytes_per_task = 0;
}

static int errf(char *err, size_t n, const char *fmt, ...)
{
    if (err && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int tb_graph_check(const task_graph_t *g, char *err, size_t n)
{
    if (g->timesteps <= 0 || g->max_width <= 0)
        return errf(err, n, "steps (%ld) and width (%ld) must be > 0", g->timesteps,
                    g->max_width);
    if (g->dependence < 0 || g->dependence >= TB_NDEPENDENCE)
        return errf(err, n, "unknown dependence type %d", (int)g->dependence);
    if (g->kernel.type < 0 || g->kernel.type >= TB_NKERNEL)
        return errf(err, n, "unknown kernel type %d", (int)g->kernel.type);
    if (g->kernel.iterations < 0)
        return errf(err, n, "iterations (%ld) must be >= 0", g->kernel.iterations);
    if (g->output_bytes_per_task < sizeof(tb_record_t))
        return errf(err, n, "output bytes (%zu) must be >= %zu", g->output_bytes_per_task,
                    sizeof(tb_record_t));
    if (g->fraction_connected < 0 || g->fraction_connected > 1)
        return errf(err, n, "fraction (%g) must be in [0, 1]", g->fraction_connected);
    if (g->radix < 0)
        return errf(err, n, "radix (%ld) must be >= 0", g->radix);
    if (g->dependence == TB_SPREAD) {
        if (g->radix < 1 || g->radix > g->max_width)
            return errf(err, n, "spread needs 1 <= radix (%ld) <= width (%ld)", g->radix,
                        g->max_width);
        long spread = (g->max_width + g->radix - 1) / g->radix;
        if (g->period < 1 || g->period > spread)
            return errf(err, n,
                        "spread needs 1 <= period (%ld) <= ceil(width/radix) = %ld "
                        "(no dependency may wrap onto another)",
                        g->period, spread);
    }
    if (needs_period(g->dependence) && g->period < 1)
        return errf(err, n, "%s needs a period >= 1", tb_dependence_name(g->dependence));
    if (g->kernel.type == TB_MEMORY_BOUND) {
        if (g->kernel.samples < 1)
            return errf(err, n, "memory_bound needs samples >= 1");
        if (g->scratch_bytes_per_task / (size_t)g->kernel.samples < 2)
            return errf(err, n, "memory_bound needs scratch bytes >= 2 x samples");
    }
    return 0;
}

/* ---- the graph's shape ------------------------------------------------- */

static long lmin(long a, long b)
{
    return a < b ? a : b;
}

static long lmax(long a, long b)
{
    return a > b ? a : b;
}

long task_graph_offset_at_timestep(const task_graph_t *g, long t)
{
    if (t < 0)
        return 0;
    if (g->dependence == TB_DOM)
        return lmax(0, t + g->max_width - g->timesteps);
    return 0;
}

long task_graph_width_at_timestep(const task_graph_t *g, long t)
{
    if (t < 0)
        return 0;
    switch (g->dependence) {
    case TB_DOM:
        return lmin(g->max_width, lmin(t + 1, g->timesteps - t));
    case TB_TREE:
        return lmin(g->max_width, 1L << lmin(t, 62));
    default:
        return g->max_width;
    }
}

long task_graph_max_dependence_sets(const task_graph_t *g)
{
    switch (g->dependence) {
    case TB_FFT: {
        long n = 0; /* ceil(log2(width)), at least 1 */
        while ((1L << n) < g->max_width)
            n++;
        return n > 0 ? n : 1;
    }
    case TB_SPREAD:
    case TB_RANDOM_NEAREST:
        return g->period;
    default:
        return 1;
    }
}

long task_graph_timestep_period(const task_graph_t *g)
{
    return task_graph_max_dependence_sets(g);
}

long task_graph_dependence_set_at_timestep(const task_graph_t *g, long t)
{
    long n = task_graph_max_dependence_sets(g);
    switch (g->dependence) {
    case TB_FFT:
        return (t + n - 1) % n;
    case TB_SPREAD:
    case TB_RANDOM_NEAREST:
        return t % n;
    default:
        return 0;
    }
}

long task_graph_max_intervals(const task_graph_t *g)
{
    return 4 + g->radix;
}

/* random_nearest's coin: a uniform double in [0, 1) from five integers
 * (splitmix64 steps; Task Bench hashes the same five with SipHash, so the
 * random graphs differ from its, deterministically). */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static double uniform5(long a, long b, long c, long d, long e)
{
    uint64_t h = mix64((uint64_t)a);
    h = mix64(h ^ (uint64_t)b);
    h = mix64(h ^ (uint64_t)c);
    h = mix64(h ^ (uint64_t)d);
    h = mix64(h ^ (uint64_t)e);
    return (double)(h >> 11) * 0x1.0p-53;
}

/* The edge dep (timestep t-1) -> consumer (timestep t) of random_nearest. */
static int random_edge(const task_graph_t *g, long dset, long dep, long consumer)
{
    if (dep == consumer)
        return 1;
    return uniform5(g->graph_index, g->radix, dset, dep, consumer) < g->fraction_connected;
}

/* Runs of kept points of [lo, hi] as intervals. `as_dep`: p is the
 * consumer and the points are its dependencies; else p is the dependency. */
static long random_runs(const task_graph_t *g, long dset, long p, long lo, long hi,
                        int as_dep, tb_interval_t *out)
{
    long n = 0, run = -1, i;
    for (i = lo; i <= hi; i++) {
        int keep = as_dep ? random_edge(g, dset, i, p) : random_edge(g, dset, p, i);
        if (keep && run < 0)
            run = i;
        if (!keep && run >= 0) {
            out[n++] = (tb_interval_t){run, i - 1};
            run = -1;
        }
    }
    if (run >= 0)
        out[n++] = (tb_interval_t){run, i - 1};
    return n;
}

static void one(tb_interval_t *out, long *n, long a, long b)
{
    out[(*n)++] = (tb_interval_t){a, b};
}

long task_graph_dependencies(const task_graph_t *g, long dset, long p, tb_interval_t *out)
{
    const long W = g->max_width, r = g->radix;
    long n = 0;
    switch (g->dependence) {
    case TB_TRIVIAL:
        break;
    case TB_NO_COMM:
        one(out, &n, p, p);
        break;
    case TB_STENCIL_1D:
        one(out, &n, lmax(0, p - 1), lmin(p + 1, W - 1));
        break;
    case TB_STENCIL_1D_PERIODIC:
        one(out, &n, lmax(0, p - 1), lmin(p + 1, W - 1));
        /* the wrapped neighbours, unless already in the interval (W < 3) */
        if (p - 1 < 0 && W - 1 > lmin(p + 1, W - 1))
            one(out, &n, W - 1, W - 1);
        if (p + 1 >= W && 0 < lmax(0, p - 1))
            one(out, &n, 0, 0);
        break;
    case TB_DOM:
        one(out, &n, lmax(0, p - 1), p);
        break;
    case TB_TREE:
        one(out, &n, p / 2, p / 2);
        break;
    case TB_FFT:
        if (p - (1L << dset) >= 0)
            one(out, &n, p - (1L << dset), p - (1L << dset));
        one(out, &n, p, p);
        if (p + (1L << dset) < W)
            one(out, &n, p + (1L << dset), p + (1L << dset));
        break;
    case TB_ALL_TO_ALL:
        one(out, &n, 0, W - 1);
        break;
    case TB_NEAREST:
        if (r > 0)
            one(out, &n, lmax(0, p - r / 2), lmin(p + (r - 1) / 2, W - 1));
        break;
    case TB_SPREAD:
        for (long i = 0; i < r; i++) {
            long d = (p + i * W / r + (i > 0 ? dset : 0)) % W;
            one(out, &n, d, d);
        }
        break;
    case TB_RANDOM_NEAREST:
        if (r > 0)
            n = random_runs(g, dset, p, lmax(0, p - r / 2), lmin(p + (r - 1) / 2, W - 1), 1,
                            out);
        break;
    default:
        break;
    }
    return n;
}

long task_graph_reverse_dependencies(const task_graph_t *g, long dset, long p,
                                     tb_interval_t *out)
{
    const long W = g->max_width, r = g->radix;
    long n = 0;
    switch (g->dependence) {
    case TB_TRIVIAL:
        break;
    case TB_NO_COMM:
    case TB_STENCIL_1D:
    case TB_STENCIL_1D_PERIODIC:
    case TB_FFT:
    case TB_ALL_TO_ALL:
        return task_graph_dependencies(g, dset, p, out); /* symmetric */
    case TB_DOM:
        one(out, &n, p, lmin(W - 1, p + 1));
        break;
    case TB_TREE:
        if (2 * p + 1 < W)
            one(out, &n, 2 * p, 2 * p + 1);
        else if (2 * p < W)
            one(out, &n, 2 * p, 2 * p);
        break;
    case TB_NEAREST:
        if (r > 0)
            one(out, &n, lmax(0, p - (r - 1) / 2), lmin(p + r / 2, W - 1));
        break;
    case TB_SPREAD:
        for (long i = 0; i < r; i++) {
            long d = (p - i * W / r - (i > 0 ? dset : 0)) % W;
            if (d < 0)
                d += W;
            one(out, &n, d, d);
        }
        break;
    case TB_RANDOM_NEAREST:
        if (r > 0)
            n = random_runs(g, dset, p, lmax(0, p - (r - 1) / 2), lmin(p + r / 2, W - 1), 0,
                            out);
        break;
    default:
        break;
    }
    return n;
}

/* ---- a task's inputs -------------------------------------------------- */

static tb_interval_t *intervals_buf(const task_graph_t *g, tb_interval_t *small, size_t nsmall)
{
    size_t need = (size_t)task_graph_max_intervals(g);
    return need <= nsmall ? small : malloc(need * sizeof(tb_interval_t));
}

long tb_task_inputs(const task_graph_t *g, long t, long p, long *out)
{
    tb_interval_t small[32];
    tb_interval_t *iv = intervals_buf(g, small, 32);
    if (!iv)
        return -1;
    long lo = task_graph_offset_at_timestep(g, t - 1);
    long hi = lo + task_graph_width_at_timestep(g, t - 1); /* exclusive */
    long dset = task_graph_dependence_set_at_timestep(g, t);
    long k = task_graph_dependencies(g, dset, p, iv), n = 0;
    for (long s = 0; s < k; s++)
        for (long d = iv[s].start; d <= iv[s].end; d++)
            if (d >= lo && d < hi)
                out[n++] = d;
    if (iv != small)
        free(iv);
    return n;
}

long tb_max_inputs(const task_graph_t *g)
{
    long *buf = malloc((size_t)g->max_width * sizeof(long));
    long best = 0;
    if (!buf)
        return -1;
    /* the pattern repeats with its period (dom and tree change width: every
     * timestep is looked at, the graphs tested here are small) */
    long steps = g->timesteps;
    if (g->dependence != TB_DOM && g->dependence != TB_TREE)
        steps = lmin(steps, 1 + task_graph_timestep_period(g));
    for (long t = 0; t < steps; t++) {
        long off = task_graph_offset_at_timestep(g, t), w = task_graph_width_at_timestep(g, t);
        for (long p = off; p < off + w; p++)
            best = lmax(best, tb_task_inputs(g, t, p, buf));
    }
    free(buf);
    return best;
}

void tb_graph_counts(const task_graph_t *g, long *tasks, long *edges)
{
    long *buf = malloc((size_t)g->max_width * sizeof(long));
    long nt = 0, ne = 0;
    for (long t = 0; buf && t < g->timesteps; t++) {
        long off = task_graph_offset_at_timestep(g, t), w = task_graph_width_at_timestep(g, t);
        nt += w;
        for (long p = off; p < off + w; p++)
            ne += tb_task_inputs(g, t, p, buf);
    }
    free(buf);
    *tasks = nt;
    *edges = ne;
}

/* ---- execution -------------------------------------------------------- */

static atomic_long n_tasks, n_inputs, n_failures;

void tb_counters_reset(void)
{
    atomic_store(&n_tasks, 0);
    atomic_store(&n_inputs, 0);
    atomic_store(&n_failures, 0);
}

long tb_counter_tasks(void)
{
    return atomic_load(&n_tasks);
}

long tb_counter_inputs(void)
{
    return atomic_load(&n_inputs);
}

long tb_counter_failures(void)
{
    return atomic_load(&n_failures);
}

static int fail_task(const task_graph_t *g, long t, long p, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "taskbench: VALIDATION FAILED: graph %ld task (timestep %ld, point %ld): %s\n",
            g->graph_index, t, p, msg);
    atomic_fetch_add(&n_failures, 1);
    return -1;
}

#define SCRATCH_MAGIC UINT64_C(0x5343524154434842) /* "SCRATCHB" */

void tb_scratch_prepare(char *scratch, size_t bytes)
{
    for (size_t i = 0; i + sizeof(uint64_t) <= bytes; i += sizeof(uint64_t))
        memcpy(scratch + i, &(uint64_t){SCRATCH_MAGIC}, sizeof(uint64_t));
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e9 * (double)ts.tv_sec + (double)ts.tv_nsec;
}

double tb_kernel_run(const tb_kernel_t *k, long timestep, char *scratch, size_t scratch_bytes)
{
    switch (k->type) {
    case TB_EMPTY:
        return 0;
    case TB_BUSY_WAIT: {
        double t0 = now_ns(), t = t0;
        while (t - t0 < (double)k->iterations)
            t = now_ns();
        return t - t0;
    }
    case TB_COMPUTE_BOUND: {
        /* 64 independent chains, each a dependent multiply-add per
         * iteration (2 flops): TB_COMPUTE_FLOPS_PER_ITER. The factors keep
         * every lane finite and normal (it converges to c / (1 - m)). */
        double a[64];
        const double m = 0.999999, c = 1e-6;
        for (int i = 0; i < 64; i++)
            a[i] = 1.0 + 1e-3 * i;
        for (long it = 0; it < k->iterations; it++)
            for (int i = 0; i < 64; i++)
                a[i] = a[i] * m + c;
        double s = 0;
        for (int i = 0; i < 64; i++)
            s += a[i];
        return s;
    }
    case TB_MEMORY_BOUND: {
        /* iteration i copies the first half of slice (timestep*iterations
         * + i) % samples onto its second half: sample/2 bytes read and as
         * many written, where sample = scratch_bytes / samples */
        size_t sample = scratch_bytes / (size_t)k->samples, half = sample / 2;
        for (long it = 0; it < k->iterations; it++) {
            long s = (timestep * k->iterations + it) % k->samples;
            char *base = scratch + (size_t)s * sample;
            memcpy(base + half, base, half);
        }
        return scratch_bytes ? (double)(unsigned char)scratch[0] : 0;
    }
    default:
        return 0;
    }
}

static uint64_t digest_start(const task_graph_t *g, long t, long p)
{
    return mix64(mix64(mix64((uint64_t)g->graph_index) ^ (uint64_t)t) ^ (uint64_t)p);
}

static volatile double kernel_sink;

int task_graph_execute_point(const task_graph_t *g, long t, long p, char *output,
                             size_t output_bytes, const char *const *inputs,
                             const size_t *input_bytes, size_t n_in, char *scratch,
                             size_t scratch_bytes)
{
    atomic_fetch_add(&n_tasks, 1);
    if (t < 0 || t >= g->timesteps)
        return fail_task(g, t, p, "timestep out of [0, %ld)", g->timesteps);
    long off = task_graph_offset_at_timestep(g, t), w = task_graph_width_at_timestep(g, t);
    if (p < off || p >= off + w)
        return fail_task(g, t, p, "point out of the active [%ld, %ld)", off, off + w);

    /* the inputs: exactly the expected dependencies, in order */
    tb_interval_t small[32];
    tb_interval_t *iv = intervals_buf(g, small, 32);
    if (!iv)
        return fail_task(g, t, p, "out of memory");
    long lo = task_graph_offset_at_timestep(g, t - 1);
    long hi = lo + task_graph_width_at_timestep(g, t - 1);
    long dset = task_graph_dependence_set_at_timestep(g, t);
    long k = task_graph_dependencies(g, dset, p, iv);
    uint64_t digest = digest_start(g, t, p);
    size_t idx = 0;
    int rc = 0;
    for (long s = 0; s < k && rc == 0; s++)
        for (long d = iv[s].start; d <= iv[s].end && rc == 0; d++) {
            if (d < lo || d >= hi)
                continue;
            if (idx >= n_in) {
                rc = fail_task(g, t, p, "%zu inputs given, more expected", n_in);
                break;
            }
            if (input_bytes[idx] != g->output_bytes_per_task || !inputs[idx]) {
                rc = fail_task(g, t, p, "input %zu: %zu bytes, expected %zu", idx,
                               input_bytes[idx], g->output_bytes_per_task);
                break;
            }
            size_t nrec = input_bytes[idx] / sizeof(tb_record_t);
            tb_record_t r0 = {0, 0, 0, 0};
            for (size_t i = 0; i < nrec; i++) {
                tb_record_t r;
                memcpy(&r, inputs[idx] + i * sizeof r, sizeof r);
                if (i == 0)
                    r0 = r;
                if (r.graph != g->graph_index || r.timestep != t - 1 || r.point != d ||
                    r.digest != r0.digest) {
                    rc = fail_task(g, t, p,
                                   "input %zu record %zu: expected (graph %ld, timestep %ld, "
                                   "point %ld), got (graph %lld, timestep %lld, point %lld%s)",
                                   idx, i, g->graph_index, t - 1, d, (long long)r.graph,
                                   (long long)r.timestep, (long long)r.point,
                                   r.digest != r0.digest ? ", a torn record" : "");
                    break;
                }
            }
            if (rc == 0) {
                digest = mix64(digest ^ r0.digest);
                idx++;
            }
        }
    if (iv != small)
        free(iv);
    if (rc)
        return rc;
    if (idx != n_in)
        return fail_task(g, t, p, "%zu inputs given, %zu expected", n_in, idx);
    atomic_fetch_add(&n_inputs, (long)idx);

    if (output_bytes != g->output_bytes_per_task || !output)
        return fail_task(g, t, p, "output of %zu bytes, expected %zu", output_bytes,
                         g->output_bytes_per_task);
    tb_record_t rec = {g->graph_index, t, p, digest};
    for (size_t i = 0; i < output_bytes / sizeof rec; i++)
        memcpy(output + i * sizeof rec, &rec, sizeof rec);

    if (g->kernel.type == TB_MEMORY_BOUND) {
        uint64_t magic;
        if (!scratch || scratch_bytes != g->scratch_bytes_per_task ||
            (memcpy(&magic, scratch, sizeof magic), magic != SCRATCH_MAGIC))
            return fail_task(g, t, p, "scratch buffer missing or not prepared");
    }
    double v = tb_kernel_run(&g->kernel, t, scratch, scratch_bytes);
    if (v == -1.0) /* never: keeps the kernel's result alive */
        kernel_sink = v;
    return 0;
}
