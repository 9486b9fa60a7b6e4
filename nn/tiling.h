/* nn/tiling.h — the default tile sizes of a decoder's tensors, derived from
 * its shapes and the running runtime's workers (CPU cores, GPUs and their
 * memory): tokens per activation tile, vocabulary rows per embedding, head
 * and logits tile, rows per tile of the MLP's hidden activations. Both
 * model families use it (docs/gpt2.md, "Tiles", and "Tiles on GPUs"), and
 * so do the other defaults of nn/ that depend on the machine (the
 * trainer's moments, the wave size) through tsr__machine_memory.
 *
 * Must never: change a size the caller set (non-zero), or submit anything.
 */
#ifndef TSR_NN_TILING_H
#define TSR_NN_TILING_H

typedef struct tsr__tiling {
    int tokens; /* tokens per activation tile: divides seq_len, or whole
                   sequences of the micro-batch side by side */
    int vocab;  /* vocabulary rows per tile */
    int hidden; /* rows per tile of the (hidden_rows, N) MLP activations */
    int channels; /* rows per channel tile of the (C, N) residual stream
                     (whole heads; C itself: one tile row) */
} tsr__tiling_t;

/* Fill the zero fields of t for a model of `channels` (the residual
 * stream's rows) in heads of `head_dim`, `hidden_rows` (4C for GPT-2, the
 * intermediate size for Llama) and `vocab`, over micro-batches of batch x
 * seq_len tokens, whose weights (the state it groups for homes) are
 * state_bytes. The channel tile: the largest multiple of head_dim dividing
 * C whose (tc, tc) fp32 tile is within the bound (1 GiB, and a 64th of the
 * smallest GPU's memory; head_dim where none is), and
 * at most C / 2 where the runtime homes the weights (tsr_placement_homes)
 * and tiles of 2048 rows or more remain; then the hidden tile is the
 * channel tile too, unless set. TSR_EINVAL (prefixed by `model`) when the
 * token tile fits neither rule. */
int tsr__tiling_resolve(tsr__tiling_t *t, const char *model, int channels, int head_dim,
                        long long hidden_rows, int vocab, int batch, int seq_len,
                        double state_bytes);

/* The running runtime's memory by kind, in bytes: the host's (-1:
 * unbounded), the accelerators' together, the disk tier's (0: none). */
typedef struct tsr__machine_memory {
    double host, accel, disk;
} tsr__machine_memory_t;
tsr__machine_memory_t tsr__machine_memory(void);

#endif
