/* bench/bench_util.h — the small pieces every benchmark program prints
 * with: the one clock every benchmark times with, the load average (other
 * processes make figures noisy) and the JSON number format of the figure
 * lines.
 *
 * Header-only on purpose: each benchmark is one executable, and this must
 * never grow into a framework.
 */
#ifndef TSR_BENCH_UTIL_H
#define TSR_BENCH_UTIL_H

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Seconds on the monotonic clock: every benchmark times with this one.
 * (examples/tiles.c keeps tm_now, the same clock, so that the examples stay
 * copyable on their own.) */
static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A figure for a JSON line: "%.4g", or null when absent or not finite. */
static inline void bench_json_num(char *buf, size_t n, int has, double v)
{
    if (has && isfinite(v))
        snprintf(buf, n, "%.4g", v);
    else
        snprintf(buf, n, "null");
}

/* The 1-minute load average, or -1 where /proc/loadavg cannot be read. */
static inline double bench_loadavg(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

/* Clock ticks: every CPU's busy time (*busy) and this process's own
 * (*own, with its waited-for children when `children`), for telling
 * whether other processes ran during a measurement. 0 where unreadable. */
static inline void bench_cpu_ticks(unsigned long long *busy, unsigned long long *own,
                                   int children)
{
    unsigned long long v[8] = {0};
    *busy = *own = 0;
    FILE *f = fopen("/proc/stat", "r");
    if (f) {
        if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
                   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) == 8)
            *busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
        fclose(f);
    }
    f = fopen("/proc/self/stat", "r");
    if (f) {
        char buf[1024];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        fclose(f);
        char *p = strrchr(buf, ')'); /* the command name may hold spaces */
        unsigned long long ut, st;
        long long cut, cst;
        if (p && sscanf(p + 2,
                        "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu "
                        "%lld %lld",
                        &ut, &st, &cut, &cst) == 4)
            *own = ut + st + (children ? (unsigned long long)(cut + cst) : 0);
    }
}

#endif
