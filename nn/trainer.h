/* nn/trainer.h — one optimizer step over a parameter table (nn/params.h),
 * and what data parallelism adds around a model's forward and backward: the
 * gradient all-reduce (or ZeRO-1 shares and broadcasts), the global
 * gradient norm and clipping, AdamW with the bf16 copies written by the
 * same tasks, and the loss and target count combined over the replicas
 * (docs/data-parallel.md).
 *
 * Every model of nn/ trains through it (GPT-2, Llama), so that data
 * parallelism, ZeRO, clipping and mixed precision behave alike. Must never:
 * know a model's layers or names, or submit anything a model's forward or
 * backward pass owns.
 */
#ifndef TSR_NN_TRAINER_H
#define TSR_NN_TRAINER_H

#include <tessera/gpt2.h>

#include "nn/params.h"

typedef struct tsr__trainer {
    const char *model;       /* "gpt2", "llama": the messages' prefix */
    tsr__params_t *params;
    int dp_size, dp_rank;    /* replicas (1 without data parallelism) */
    tsr_handle_t norm;       /* float: sum of squares of the gradients */
    tsr_handle_t dp_count;   /* double: the targets of every rank */
    tsr_handle_t dp_loss;    /* double: the loss sum of every rank */
    int ntargets;            /* non-ignored targets of this replica's last forward */
    int steps;               /* optimizer steps done */
    int zero;                /* ZeRO-1 shares */
    int moments_host;        /* the moments are homed on the host: AdamW runs
                                on CPU workers (docs/placement.md) */
    int drop_grads;          /* the update drops each gradient tile's copies
                                rather than zeroing it (grads_dropped) */
} tsr__trainer_t;

/* Set up for a made table (footprint: the bytes of the training state and
 * of a wave's activations, as the model estimates them): the norm's handle, and with data_parallel over
 * more than one MPI rank the replica's rank and, with zero, each parameter
 * tile's owner (checkpoint order, each tile to the rank with the fewest
 * bytes so far, the lowest on ties: every rank computes the same owners and
 * the shares differ by at most one tile). */
int tsr__trainer_init(tsr__trainer_t *tr, tsr__params_t *ps, const char *model,
                      int data_parallel, int zero, double footprint);
/* Unregister its handles (same_runtime: the runtime that made them runs). */
void tsr__trainer_free(tsr__trainer_t *tr, int same_runtime);

/* Whether the model is one replica of several. */
static inline int tsr__trainer_dp(const tsr__trainer_t *tr)
{
    return tr->dp_size > 1;
}

/* A batch's ids: n tokens in [0, vocab), targets (may be NULL) below vocab
 * (negative: ignored); *ntargets the non-ignored ones. `fn` names the
 * caller (its forward) in the message. */
int tsr__trainer_check_batch(const char *fn, const int32_t *tokens, const int32_t *targets,
                             int n, int vocab, int *ntargets);
/* After a forward with targets: this replica's count, summed over every
 * replica (a collective) for backward's scale and the loss's mean. */
int tsr__trainer_targets(tsr__trainer_t *tr, int ntargets);
/* The non-ignored targets of the last forward, over every replica (waits
 * for their all-reduce with data parallelism). */
int tsr__trainer_count(tsr__trainer_t *tr, double *count);
/* The mean loss from this replica's loss sum: over every replica's targets
 * (a collective with data parallelism). */
int tsr__trainer_mean_loss(tsr__trainer_t *tr, double sum, float *loss);
/* The mean loss of the last forward from its per-token losses ce_loss (1, N)
 * (read from the host: 0 in a simulated run, whose host reads are zeros);
 * have_loss: that forward had targets. `fn` names the caller. */
int tsr__trainer_loss(tsr__trainer_t *tr, const char *fn, int have_loss,
                      const tsr_tensor_t *ce_loss, float *loss);
/* The same for a forward whose count (tsr__trainer_count) was `count`: a
 * micro-batch of a wave, whose loss is read after later forwards. */
int tsr__trainer_loss_of(tsr__trainer_t *tr, const char *fn, const tsr_tensor_t *ce_loss,
                         double count, float *loss);
/* The last forward's logits of position t of sequence b into out: column
 * b T + t of logits (V, B T); have_logits: a forward made them and no
 * backward consumed them since. */
int tsr__trainer_logits(const char *fn, const tsr_tensor_t *logits, int have_logits, int B,
                        int T, int b, int t, float *out);
/* Backward's gradient scale: scale / the combined target count (0 without
 * targets). */
int tsr__trainer_grad_scale(tsr__trainer_t *tr, float scale, float *dscale);

/* One AdamW step (gpt2.h, tsr_gpt2_step): all-reduce, norm and clipping,
 * the updates (ZeRO: owned tiles, then broadcasts), the bf16 copies; the
 * gradients are consumed (zero after). `fn` names the caller. */
int tsr__trainer_step(tsr__trainer_t *tr, const char *fn, const tsr_adamw_config_t *opt,
                      float lr, float *grad_norm);

#endif
