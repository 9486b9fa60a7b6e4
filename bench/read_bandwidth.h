/* bench/read_bandwidth.h — the machine's read bandwidth from memory: what
 * a decode step, bound by reading the weights, can reach at most (the
 * ceiling the generation benchmarks of both model families report against).
 *
 * Header-only, like bench_util.h; must never time anything else.
 */
#ifndef TSR_BENCH_READ_BANDWIDTH_H
#define TSR_BENCH_READ_BANDWIDTH_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "bench/bench_util.h"

typedef struct bench_bw_part {
    const uint64_t *x;
    size_t n;
    uint64_t sum;
} bench_bw_part_t;

/* Integer sums: the compiler vectorizes them (floating-point sums it may
 * not reorder would be bound by the adds' latency, not by memory). */
static inline void *bench_bw_read(void *arg)
{
    bench_bw_part_t *p = arg;
    uint64_t s = 0;
    for (size_t i = 0; i < p->n; i++)
        s += p->x[i];
    p->sum = s;
    return NULL;
}

/* GB/s of `threads` threads each summing its part of a buffer much larger
 * than the caches (512 MiB), the best of 5 passes; -1 without memory. */
static inline double bench_read_bandwidth(int threads)
{
    size_t n = (size_t)512 << 20 >> 3;
    uint64_t *x = malloc(n * sizeof *x);
    if (!x)
        return -1;
    for (size_t i = 0; i < n; i++)
        x[i] = i & 7;
    double best = 0;
    bench_bw_part_t parts[64];
    pthread_t th[64];
    if (threads > 64)
        threads = 64;
    if (threads < 1)
        threads = 1;
    for (int pass = 0; pass < 5; pass++) {
        double t0 = bench_now();
        for (int t = 0; t < threads; t++) {
            parts[t] = (bench_bw_part_t){x + n / threads * t, n / threads, 0};
            pthread_create(&th[t], NULL, bench_bw_read, &parts[t]);
        }
        for (int t = 0; t < threads; t++)
            pthread_join(th[t], NULL); /* each thread stored its sum: the reads happen */
        double gbs = (double)(n / threads * threads) * sizeof *x / (bench_now() - t0) / 1e9;
        best = gbs > best ? gbs : best;
    }
    free(x);
    return best;
}

#endif
