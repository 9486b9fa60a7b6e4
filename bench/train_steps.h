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

/* What a training-step benchmark reports about its run beside the timings:
 * the same for every family (its shape goes in its own JSON fields). */
typedef struct bench_step_run {
    const char *tag;
    size_t params;
    int batch, seq, warmup, steps;
    int tiles[3]; /* tokens, vocabulary, hidden */
    int recompute;
    const char *precision; /* "fp32", "bf16" */
    double load;           /* bench_loadavg() once, for both lines */
} bench_step_run_t;

/* The human line: s/step, tok/s, losses, tiles, the machine's load. */
static inline void bench_step_print_line(const bench_step_run_t *d, const bench_steps_t *r)
{
    double sps = r->total / d->steps;
    printf("tessera  %-14s %2d workers  %11zu params  batch %d x %d  %d+%d steps  "
           "%.4f s/step (min %.4f)  %.1f tok/s  loss %.4f -> %.4f  tiles %d/%d/%d  load %.2f  "
           "others %.0f%%  %s  %s  host peak %.1f MiB\n",
           d->tag, tsr_worker_count(), d->params, d->batch, d->seq, d->warmup, d->steps, sps,
           r->min_step, (double)d->batch * d->seq / sps, (double)r->first_loss,
           (double)r->last_loss, d->tiles[0], d->tiles[1], d->tiles[2], d->load,
           r->others >= 0 ? 100 * r->others : 0.0, d->recompute ? "recompute" : "keep",
           d->precision, (double)r->host_peak / 1048576.0);
}

/* The JSON line's shared end, from "params" on (the caller printed its
 * head up to the family's shape fields and a comma); ends the line. */
static inline void bench_step_print_json_tail(const bench_step_run_t *d, const bench_steps_t *r)
{
    double sps = r->total / d->steps, load = d->load;
    char s_sps[32], s_min[32], s_tps[32], s_l0[32], s_l1[32], s_load[32], s_oth[32];
    bench_json_num(s_sps, sizeof s_sps, 1, sps);
    bench_json_num(s_min, sizeof s_min, 1, r->min_step);
    bench_json_num(s_tps, sizeof s_tps, 1, (double)d->batch * d->seq / sps);
    bench_json_num(s_l0, sizeof s_l0, 1, r->first_loss);
    bench_json_num(s_l1, sizeof s_l1, 1, r->last_loss);
    bench_json_num(s_load, sizeof s_load, load >= 0, load);
    bench_json_num(s_oth, sizeof s_oth, r->others >= 0, r->others);
    printf("\"params\":%zu,\"batch\":%d,\"seq\":%d,\"warmup\":%d,\"steps\":%d,"
           "\"tiles\":[%d,%d,%d],\"s_per_step\":%s,\"s_per_step_min\":%s,\"tok_per_s\":%s,"
           "\"loss_first\":%s,\"loss_last\":%s,\"load\":%s,\"cpu_others\":%s,"
           "\"recompute\":%d,\"precision\":\"%s\",\"host_peak\":%zu}\n",
           d->params, d->batch, d->seq, d->warmup, d->steps, d->tiles[0], d->tiles[1],
           d->tiles[2], s_sps, s_min, s_tps, s_l0, s_l1, s_load, s_oth, d->recompute,
           d->precision, r->host_peak);
    fflush(stdout);
}

#endif
