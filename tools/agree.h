/* tools/agree.h — the ranks of a data-parallel tessera-train agree on the
 * run before training starts, in one collective: every rank contributes a
 * fixed-size record (whether it is ready or why it stopped, the model's
 * shape and the training flags that must be equal on every rank with a hash
 * of them, the step it resumes, and the identity of the optimizer state it
 * loaded), every rank receives every record and applies the same checks in
 * the same order, so that every rank reaches the same verdict and names the
 * same first differing rank and field.
 *
 * Why: the ranks' training steps are collectives; a rank that stopped, or
 * that runs another shape (other tiles: other all-reduces), other flags, or
 * another rank's optimizer state, otherwise leaves its peers waiting for
 * the MPI timeout, makes MPI abort the job without a word, or trains a
 * silently different model.
 *
 * Must never: let one rank train while another stopped or disagrees; be
 * skipped by a rank that failed before it (each rank takes part exactly
 * once, ready or not, so that no rank waits for one that will not come);
 * decide anything from this rank's view alone.
 */
#ifndef TESSERA_TOOLS_AGREE_H
#define TESSERA_TOOLS_AGREE_H

#include <stdint.h>

/* Why a rank cannot train (agree_rec_t.status). */
enum {
    AGREE_READY = 0,
    AGREE_FAILED = 1,        /* an earlier step failed; the reason is in note */
    AGREE_MISSING_SHARD = 2, /* its optimizer state shard could not be opened */
};

/* One rank's record. Fixed size and plain data: it travels as bytes (the
 * same build on every rank). Fields from `vocab` to `run` must be equal on
 * every rank and are covered by `hash`. */
typedef struct agree_rec {
    uint32_t magic;   /* AGREE_MAGIC: the slot was filled */
    int32_t rank;     /* the rank that filled it */
    int32_t status;   /* AGREE_… */
    char note[400];   /* not ready: why (the rank's own error); ready and
                         resumed: the path of the state it loaded */
    uint64_t hash;    /* FNV-1a 64 of the fields below, to `run` */
    /* the model's shape (tiles as resolved: they cut the all-reduces) */
    int32_t vocab, context, layers, heads, channels, tile_tokens, tile_vocab, tile_hidden;
    int32_t tile_channels; /* a Llama's: its channels (one tile) */
    /* a Llama's K/V heads, head width and SwiGLU width (0 for a GPT-2) */
    int32_t kv_heads, head_dim, intermediate;
    int32_t precision, recompute;
    /* the training flags */
    int32_t zero, steps, last, batch, micro, seq, warmup, eval_every, eval_batches, ckpt_every;
    double lr, min_lr, wd, clip;
    uint64_t seed;
    uint64_t ntrain, nval; /* tokens of the training and validation data */
    /* where the run starts */
    int32_t resume, step;
    uint64_t position; /* of the training data */
    uint64_t run;      /* resumed: the run id of the checkpoint; else 0 */
    /* this rank's own, checked per rank: the optimizer state it loaded
     * (resumed runs), as that file's text names it (ckpt_shard_id) */
    int32_t shard_rank, shard_step;
    uint64_t shard_run;
    uint64_t proposal; /* a fresh run id; a new run takes rank 0's */
} agree_rec_t;

/* Zero rec (so that the bytes of padding are equal on every rank). */
void agree_init(agree_rec_t *rec);

/* Every rank's record exchanged (one all-reduce; with one rank, none), then
 * the checks, in this order: the first rank not ready; the first rank whose
 * fields differ from rank 0's, at its first differing field; the first rank
 * (resumed runs) whose state is not its own shard (`zero`: rank r loads
 * shard r; else every rank shard 0), of the checkpoint's step and run.
 * rec->rank and rec->hash are filled here. On agreement returns 0 and the
 * job's run id in *run_id (the checkpoint's; else rank 0's proposal).
 * Else returns 1 after reporting, on this rank, the rank and the field; a
 * collective that fails (a rank died) is reported too. */
int agree_run(agree_rec_t *rec, uint64_t *run_id);

#endif
