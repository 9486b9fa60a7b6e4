/* nn/wave.c — micro-batches through a decoder's blocks, one at a time or
 * in waves (nn/wave.h). */
#include "nn/wave.h"

#include <stdint.h>

#include <tessera/tessera.h>

#include "runtime/error.h"

/* One wave of k <= slots micro-batches: tokens and targets k x n ids.
 *   forward:  embed(s) for every s; block l (s = 0 .. k-1) for l = 0 .. L-1
 *   head:     forward and backward of each s, in order
 *   backward: block l (s = 0 .. k-1) for l = L-1 .. 0; embed_bwd(s)
 * With k = 1 this is exactly one forward and one backward. */
static int one_wave(const tsr__wave_model_t *w, int k, const int32_t *tokens,
                    const int32_t *targets, float scale)
{
    size_t n = (size_t)w->tokens;
    for (int s = 0; s < k; s++)
        TSR_TRY(w->embed(w->m, s, tokens + (size_t)s * n));
    for (int l = 0; l < w->layers; l++)
        for (int s = 0; s < k; s++)
            TSR_TRY(w->block_fwd(w->m, l, s));
    for (int s = 0; s < k; s++)
        TSR_TRY(w->head(w->m, s, targets + (size_t)s * n, scale));
    for (int l = w->layers - 1; l >= 0; l--)
        for (int s = 0; s < k; s++)
            TSR_TRY(w->block_bwd(w->m, l, s));
    for (int s = 0; s < k; s++)
        TSR_TRY(w->embed_bwd(w->m, s));
    return TSR_OK;
}

int tsr__wave_run(const tsr__wave_model_t *w, int micro, const int32_t *tokens,
                  const int32_t *targets, float scale, float *losses)
{
    size_t n = (size_t)w->tokens;
    for (int first = 0; first < micro; first += w->slots) {
        int k = micro - first < w->slots ? micro - first : w->slots;
        TSR_TRY(one_wave(w, k, tokens + (size_t)first * n, targets + (size_t)first * n, scale));
        for (int s = 0; losses && s < k; s++) /* before the next wave reuses slot s */
            TSR_TRY(w->loss(w->m, s, &losses[first + s]));
    }
    return TSR_OK;
}

int tsr__wave_auto(double weight_bytes, double state_bytes, double slot_bytes)
{
    double accel = 0.0, host = 0.0;
    int nodes = tsr_memory_node_count();
    for (int i = 0; i < nodes; i++) {
        tsr_node_stats_t ns;
        if (tsr_memory_node_stats(i, &ns) != TSR_OK || ns.kind == TSR_NODE_DISK)
            continue;
        double cap = ns.capacity == SIZE_MAX ? -1.0 : (double)ns.capacity;
        if (i == 0)
            host = cap;
        else if (cap > 0)
            accel += cap;
    }
    if (accel <= 0.0 || weight_bytes <= 0.7 * accel)
        return 1; /* no accelerator, or the weights stay on them */
    if (host < 0.0) /* unbounded host memory */
        return TSR__WAVE_MAX;
    double spare = 0.25 * (host - state_bytes);
    int k = slot_bytes > 0.0 && spare > slot_bytes ? (int)(spare / slot_bytes) : 1;
    return k < 1 ? 1 : k > TSR__WAVE_MAX ? TSR__WAVE_MAX : k;
}
