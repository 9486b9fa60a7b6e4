/* nn/tiling.c — the default tile sizes of a decoder (nn/tiling.h). */
#include "nn/tiling.h"

#include <limits.h>
#include <stdint.h>

#include <tessera/tessera.h>

#include "nn/ops.h"
#include "runtime/error.h"

/* GPU workers of the running runtime (real, emulated or simulated), and the
 * smallest capacity of their memory nodes. */
static int gpu_workers(size_t *min_capacity)
{
    int n = 0, w = tsr_worker_count();
    *min_capacity = SIZE_MAX;
    for (int i = 0; i < w; i++) {
        tsr_worker_stats_t st;
        tsr_node_stats_t ns;
        if (tsr_worker_stats(i, &st) != TSR_OK || st.device_kind != TSR_DEVICE_CUDA)
            continue;
        n++;
        if (tsr_memory_node_stats(st.memory_node, &ns) == TSR_OK && ns.capacity < *min_capacity)
            *min_capacity = ns.capacity;
    }
    return n;
}

tsr__machine_memory_t tsr__machine_memory(void)
{
    tsr__machine_memory_t m = {-1.0, 0.0, 0.0};
    int nodes = tsr_memory_node_count();
    for (int i = 0; i < nodes; i++) {
        tsr_node_stats_t ns;
        if (tsr_memory_node_stats(i, &ns) != TSR_OK)
            continue;
        double cap = ns.capacity == SIZE_MAX ? -1.0 : (double)ns.capacity;
        if (ns.kind == TSR_NODE_DISK)
            m.disk += cap > 0 ? cap : 0.0;
        else if (i == 0)
            m.host = cap;
        else if (cap > 0)
            m.accel += cap;
    }
    return m;
}

/* The largest token tile that tsr__tokens_tile_ok accepts and that is at
 * most `most` tokens: a divisor of the sequence, or whole sequences dividing
 * the micro-batch; 0 if none. */
static int largest_token_tile(int most, int batch, int seq_len)
{
    for (int k = batch; k >= 1; k--)
        if (batch % k == 0 && (long long)k * seq_len <= most)
            return k * seq_len;
    for (int t = seq_len; t >= 1; t--)
        if (seq_len % t == 0 && t <= most)
            return t;
    return 0;
}

/* Tiles for GPUs, measured on an H200 (docs/gpt2.md, "Tiles on GPUs"): a
 * GPU task costs a launch and a host round trip, so the 124M step at 8 x
 * 1024 ran 6.3 s with the CPU tiles (127k tasks), 1.0 s with 2048-token
 * tiles, 0.31 s with the whole micro-batch in one token tile and 0.29 s
 * with 8192 vocabulary rows too. Token tiles: the whole micro-batch shared
 * among the GPUs (one token tile alone, two each on several), but no tile
 * of the (C, tokens)
 * activations over TILE_BYTES; the MLP's F hidden rows shared among the GPUs
 * in tiles of at least C rows (all F on one GPU) and vocabulary tiles of
 * 8192 rows while their activation tiles stay under TILE_BYTES too,
 * else the CPU rule's. TILE_BYTES is 256 MiB, or a 32nd of the smallest
 * GPU's memory where that is less: a task's buffers (up to a few tiles)
 * must fit beside the copies the next tasks' prefetches bring. */
static void resolve_gpu_tiles(tsr__tiling_t *c, long long C, long long F, int vocab, int batch,
                              int seq_len, int gpus, size_t capacity)
{
    enum { VOCAB_ROWS = 8192 };
    long long TILE_BYTES = 256ll << 20;
    if (capacity / 32 < (size_t)TILE_BYTES)
        TILE_BYTES = (long long)(capacity / 32);
    long long N = (long long)batch * seq_len;
    if (c->tokens <= 0) {
        /* one token tile on one GPU (fewest tasks: measured best alone);
         * two per GPU on several, so that each GPU's next layer can start
         * on one tile while the other is still being made elsewhere (8
         * simulated A100s: 4 to 17 % more TFLOPS up to 15 B parameters,
         * docs/gpt2.md) */
        long long most = gpus > 1 ? N / (2ll * gpus) : N;
        if (most * C * 4 > TILE_BYTES / 4) /* the (C, tokens) tiles: 64 MiB */
            most = TILE_BYTES / 4 / (C * 4);
        c->tokens = largest_token_tile((int)(most > 0 ? most : 1), batch, seq_len);
    }
    long long tt = c->tokens;
    /* the hidden rows shared among the GPUs, down to tiles of C rows: one
     * hidden tile on one GPU (F: fewest tasks, measured best alone), 4C / G
     * rows on G GPUs, C rows from four GPUs on (GPT-2's MLP in four (C, C)
     * weight tiles: under owner placement each lives on its own GPU; one
     * (4C, C) tile kept a 10.6 B model's MLP on one GPU of eight, 506
     * against 708 TFLOPS simulated, docs/gpt2.md). Its (F_tile, tt)
     * activations under TILE_BYTES, and the MLP weights' (F_tile, C) tiles
     * within int elements (a tile's limit) */
    long long fh = (F + gpus - 1) / gpus;
    if (fh < C)
        fh = C < F ? C : F;
    if (c->hidden <= 0 && fh <= INT_MAX && fh * tt * 4 <= TILE_BYTES && fh * C <= INT_MAX)
        c->hidden = (int)fh;
    if (c->vocab <= 0) {
        long long v = vocab < VOCAB_ROWS ? vocab : VOCAB_ROWS;
        if (v * tt * 4 <= TILE_BYTES)
            c->vocab = (int)v;
    }
}

/* The channel tile (tsr__tiling_resolve): C, or the largest multiple of d
 * dividing C whose (tc, tc) fp32 tile is within the bound; d where none.
 * homed (the weights get accelerator homes): at most C / 2 where that
 * leaves tiles of at least MIN_HOMED_TILE rows, so that each (C, C)
 * weight is four tiles or more that owner placement spreads over the GPUs
 * (8 simulated A100s: 5 to 10 % more TFLOPS from 4.5 B to 23 B parameters
 * than one tile, docs/gpt2.md "Channel tiles"). */
static int channel_tile(int C, int d, size_t gpu_capacity, int homed)
{
    enum { MIN_HOMED_TILE = 2048 };
    double bound = (double)(1ll << 30);
    if (gpu_capacity != SIZE_MAX && (double)gpu_capacity / 64 < bound)
        bound = (double)gpu_capacity / 64;
    if (d <= 0 || C % d)
        return C; /* the model's own check refuses the shape */
    int most = C;
    if (homed && C / 2 >= MIN_HOMED_TILE)
        most = C / 2;
    for (int k = most / d; k >= 1; k--) /* tc = k d, from the most down */
        if ((C / d) % k == 0 && 4.0 * k * d * (double)k * d <= bound &&
            (k * d >= MIN_HOMED_TILE || most == C))
            return k * d;
    return most == C ? d : C;
}

/* Tile sizes derived from the shapes: on GPUs, resolve_gpu_tiles; on CPUs,
 * token tiles of about 256 tokens (the
 * largest divisor of the sequence up to 256, or as many whole sequences of
 * the micro-batch as fit in 256), so that the weight-gradient products sum
 * over hundreds of tokens per task; but with at least one token tile per
 * worker where tiles of 64 tokens or more allow it: a micro-batch in one
 * token tile leaves every output-projection chain (c_proj, mlp.c_proj, the
 * head's dln) on one worker while the others wait. oneDNN's fp32 tile
 * products run as fast with 64 or 128 tokens as with 256 (docs/kernels.md),
 * so the narrower tiles cost no GEMM speed; below 64 the per-task cost and
 * the short sums of the weight gradients would. Vocabulary tiles of 1024
 * rows; MLP tiles of C rows (GPT-2's 4C in 4 tiles). */
int tsr__tiling_resolve(tsr__tiling_t *c, const char *model, int channels, int head_dim,
                        long long hidden_rows, int vocab, int batch, int seq_len,
                        double state_bytes)
{
    enum { TOKENS = 256, MIN_TOKENS = 64 };
    size_t capacity;
    int gpus = gpu_workers(&capacity);
    if (c->channels <= 0) {
        size_t sb = state_bytes < (double)SIZE_MAX ? (size_t)state_bytes : SIZE_MAX;
        c->channels = channel_tile(channels, head_dim, capacity, tsr_placement_homes(sb) == 1);
    }
    if (c->hidden <= 0 && c->channels < channels) /* square (tc, tc) MLP tiles */
        c->hidden = c->channels;
    if (gpus > 0)
        resolve_gpu_tiles(c, channels, hidden_rows, vocab, batch, seq_len, gpus, capacity);
    if (c->tokens <= 0) {
        int workers = tsr_worker_count();
        c->tokens = seq_len;
        if (seq_len > TOKENS) {
            for (int t = TOKENS; t >= 1; t--)
                if (seq_len % t == 0) {
                    c->tokens = t;
                    break;
                }
        } else {
            /* k whole sequences per tile, the most that fit in TOKENS, down
             * to the first k that gives every worker a tile, or the last
             * one of MIN_TOKENS tokens or more */
            int found = 0;
            for (int k = TOKENS / seq_len; k >= 1; k--) {
                if (batch % k)
                    continue;
                if (found && k * seq_len < MIN_TOKENS)
                    break;
                c->tokens = k * seq_len;
                found = 1;
                if (batch / k >= workers)
                    break;
            }
        }
    }
    if (c->vocab <= 0)
        c->vocab = vocab < 1024 ? vocab : 1024;
    if (c->hidden <= 0)
        c->hidden = channels;
    if (!tsr__tokens_tile_ok(c->tokens, seq_len, batch))
        return tsr__fail(TSR_EINVAL, "%s: tile_tokens %d neither divides seq_len %d nor "
                                     "holds whole sequences of the batch of %d", model,
                         c->tokens, seq_len, batch);
    return TSR_OK;
}

