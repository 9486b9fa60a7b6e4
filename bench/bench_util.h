/* bench/bench_util.h — the small pieces every benchmark program prints
 * with: the load average (other processes make figures noisy) and the JSON
 * number format of the figure lines.
 *
 * Header-only on purpose: each benchmark is one executable, and this must
 * never grow into a framework.
 */
#ifndef TSR_BENCH_UTIL_H
#define TSR_BENCH_UTIL_H

#include <math.h>
#include <stdio.h>

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

#endif
