/* bench/train_steps.h — the timed loop of a training-step benchmark, the
 * same for every model family: untimed warm-up steps, then timed ones, the
 * loss of the first and last, the shortest step, the host memory peak, the
 * process's CPU time and the share of the machine other processes took.
 * A family gives one step (zero_grad, forward, backward, AdamW, loss).
 *
 * Header-only, like bench_util.h; must never know a model.
 */
#ifndef TSR_BENCH_TRAIN_STEPS_H
#define TSR_BENCH_TRAIN_STEPS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include <tessera/tessera.h>

#include "bench/bench_util.h"

/* One training step of `model` on the batch with learning rate lr, *loss
 * its loss; TSR_OK, or the failing call's status, after printing which. */
typedef int (*bench_step_fn)(void *model, const int32_t *inputs, const int32_t *targets,
                             float lr, float *loss);

typedef struct bench_steps {
    double total, min_step, others;
    double cpu; /* the process's CPU seconds while timed (every worker's work) */
    float first_loss, last_loss;
    size_t host_peak;
} bench_steps_t;

/* `warmup` untimed steps, then `steps` timed ones; 0, or -1 after a
 * failure (printed with `prog`). */
static inline int bench_train_steps(const char *prog, void *model, bench_step_fn step,
                                    int warmup, int steps, float lr, const int32_t *inputs,
                                    const int32_t *targets, bench_steps_t *r)
{
    float loss = NAN;
    double t0 = 0, t1 = 0;
    unsigned long long busy0 = 0, own0 = 0, busy1 = 0, own1 = 0;
    int rc;
    r->first_loss = NAN;
    r->min_step = INFINITY;
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup) {
            if ((rc = tsr_wait_all()) != TSR_OK)
                goto fail;
            bench_cpu_ticks(&busy0, &own0, 0);
            t0 = t1 = tsr_time();
        }
        if (step(model, inputs, targets, lr, &loss) != TSR_OK)
            return -1;
        if (s == 0)
            r->first_loss = loss;
        if (s >= warmup) {
            /* from the previous step's return: tasks of a step may still run
             * when the next one is submitted, so this is approximate */
            double t = tsr_time();
            if (t - t1 < r->min_step)
                r->min_step = t - t1;
            t1 = t;
        }
    }
    if ((rc = tsr_wait_all()) != TSR_OK)
        goto fail;
    r->total = tsr_time() - t0;
    bench_cpu_ticks(&busy1, &own1, 0);
    r->last_loss = loss;
    tsr_node_stats_t host;
    if ((rc = tsr_memory_node_stats(0, &host)) != TSR_OK)
        goto fail;
    r->host_peak = host.peak;
    /* the share of the machine's CPU time that other processes took; clock
     * ticks are too coarse for it under half a second */
    long ncores = sysconf(_SC_NPROCESSORS_ONLN);
    long hz = sysconf(_SC_CLK_TCK);
    r->others = -1;
    r->cpu = hz > 0 ? (double)(own1 - own0) / (double)hz : -1;
    if (busy1 > busy0 && ncores > 0 && hz > 0 && r->total >= 0.5) {
        double foreign = (double)(busy1 - busy0) - (double)(own1 - own0);
        r->others = (foreign > 0 ? foreign : 0) / ((double)hz * r->total * (double)ncores);
        if (r->others > 1)
            r->others = 1;
    }
    return 0;
fail:
    fprintf(stderr, "%s: %s (%s)\n", prog, tsr_strerror(rc), tsr_error_message());
    return -1;
}

#endif
