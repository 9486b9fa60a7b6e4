/* nn/wave.c — micro-batches through a decoder's blocks, one at a time or
 * in waves (nn/wave.h). */
#include "nn/wave.h"

#include <stdint.h>
#include <stdlib.h>

#include <tessera/tessera.h>

#include "nn/tiling.h"
#include "nn/trainer.h"
#include "runtime/error.h"

/* One wave of k <= slots micro-batches: tokens and targets k x n ids.
 *   forward:  embed(s) for every s; block l of the k slots, l = 0 .. L-1
 *   head:     forward and backward of each s, in order
 *   backward: block l of the k slots, l = L-1 .. 0; embed_bwd(s)
 * With k = 1 this is exactly one forward and one backward. */
static int one_wave(const tsr__wave_model_t *w, int k, const int32_t *tokens,
                    const int32_t *targets, const int *ntargets, float scale)
{
    size_t n = (size_t)w->tokens;
    for (int s = 0; s < k; s++)
        TSR_TRY(w->embed(w->m, s, tokens + (size_t)s * n));
    for (int l = 0; l < w->layers; l++)
        TSR_TRY(w->block_fwd(w->m, l, k));
    for (int s = 0; s < k; s++)
        TSR_TRY(w->head(w->m, s, targets + (size_t)s * n, ntargets[s], scale));
    for (int l = w->layers - 1; l >= 0; l--)
        TSR_TRY(w->block_bwd(w->m, l, k));
    for (int s = 0; s < k; s++)
        TSR_TRY(w->embed_bwd(w->m, s));
    return TSR_OK;
}

int tsr__wave_run(const tsr__wave_model_t *w, const char *fn, int vocab, int micro,
                  const int32_t *tokens, const int32_t *targets, float scale, float *losses)
{
    size_t n = (size_t)w->tokens, prev = 0;
    if (micro < 1 || !targets)
        return tsr__fail(TSR_EINVAL, "%s: %d micro-batches%s", fn, micro,
                         targets ? " (at least 1)" : ", targets NULL");
    int *ntargets = malloc((size_t)micro * sizeof *ntargets);
    if (!ntargets)
        return tsr__fail(TSR_ENOMEM, "%s: out of memory", fn);
    for (int k = 0; k < micro; k++) { /* every id before anything is submitted */
        int rc = tsr__trainer_check_batch(fn, tokens ? tokens + (size_t)k * n : NULL,
                                          targets + (size_t)k * n, w->tokens, vocab,
                                          &ntargets[k]);
        if (rc) {
            free(ntargets);
            return rc;
        }
    }
    int narrow = w->window > 0 && w->slots > 1 && micro > 1, rc = TSR_OK;
    if (narrow) { /* the workers follow the waves' order (nn/wave.h) */
        rc = tsr_set_pending_bytes(w->window, &prev);
        if (rc == TSR_OK && prev && prev < w->window)
            rc = tsr_set_pending_bytes(prev, NULL); /* a narrower one stays */
    }
    for (int first = 0; rc == TSR_OK && first < micro; first += w->slots) {
        int k = micro - first < w->slots ? micro - first : w->slots;
        rc = one_wave(w, k, tokens + (size_t)first * n, targets + (size_t)first * n,
                      ntargets + first, scale);
        for (int s = 0; rc == TSR_OK && losses && s < k; s++) /* before the next wave reuses s */
            rc = w->loss(w->m, s, &losses[first + s]);
    }
    if (narrow)
        (void)tsr_set_pending_bytes(prev, NULL);
    free(ntargets);
    return rc;
}

/* Whether weights of this size stay on the accelerators: owner placement
 * homes up to 70 % of each (docs/placement.md). */
static int weights_stay(double accel, double weight_bytes)
{
    return accel <= 0.0 || weight_bytes <= 0.7 * accel;
}

int tsr__wave_auto(double weight_bytes, double state_bytes, double slot_bytes)
{
    tsr__machine_memory_t mm = tsr__machine_memory();
    double host = mm.host, disk = mm.disk, accel = mm.accel;
    if (weights_stay(accel, weight_bytes)) /* two where three slots fit beside the state */
        return accel > 0.0 && state_bytes + 3.0 * slot_bytes <= 0.6 * accel ? 2 : 1;
    if (host < 0.0) /* unbounded host memory */
        return TSR__WAVE_MAX;
    /* slots live on the host, beside what the accelerators and the disk
     * tier do not hold of the state */
    double free = host + accel + disk - state_bytes, spare = 0.75 * free;
    if (spare > 0.5 * host)
        spare = 0.5 * host;
    int k = slot_bytes > 0.0 && spare > slot_bytes ? (int)(spare / slot_bytes) : 1;
    return k < 1 ? 1 : k > TSR__WAVE_MAX ? TSR__WAVE_MAX : k;
}

size_t tsr__wave_window(double weight_bytes)
{
    double accel = tsr__machine_memory().accel;
    return weights_stay(accel, weight_bytes) ? 0 : (size_t)(TSR__WAVE_WINDOW * accel);
}
