/* tools/ckpt.h — the run folder of tessera-train: checkpoints that are
 * complete or absent, never half of one.
 *
 * Layout of a run folder OUT:
 *   OUT/step-00000050/model.safetensors   the weights (an HF GPT-2 file)
 *   OUT/step-00000050/model/              instead, a Llama's weights: an HF
 *                                         checkpoint folder (config.json,
 *                                         model.safetensors; model.h)
 *   OUT/step-00000050/train.state         AdamW moments, the step, and the
 *                                         tool's text, which names the step
 *                                         and the FNV-1a 64 of model.safetensors
 *                                         (of a Llama's folder: of its files, by name)
 *   OUT/step-00000050/train.state.R       with ZeRO over N ranks: rank R's share
 *                                         of the moments (R = 1 .. N-1; rank 0's
 *                                         is train.state)
 * Every state file's text names the shard it is ("shard R": the rank that
 * wrote it, 0 for train.state), the step of its checkpoint
 * ("checkpoint-step S") and the run it belongs to ("run ID", 16 hex digits,
 * drawn when the run starts and kept by --resume), so that a rank can tell
 * its own shard from another rank's or another save's (ckpt_shard_id).
 *   OUT/latest                            "step-00000050\n": the checkpoint
 * A save writes both files into OUT/.step-00000050.tmp.<pid>/, syncs them and
 * the folder, renames the folder into place (one rename: the pair appears
 * whole), then replaces OUT/latest atomically (temporary, fsync, rename,
 * folder fsync), and only then removes the checkpoint it replaced. `latest`
 * is the one truth: a step folder it does not name is a leftover.
 *
 * Every action of a save (a write, an fsync, a rename, a removal) is a point
 * of the TESSERA_FAULT_AT test hook (fault.h): tests kill the save at each.
 *
 * Must never: leave OUT/latest naming an incomplete or missing checkpoint,
 * delete the checkpoint `latest` names before its successor is complete, or
 * let a model and a state of different saves be resumed together.
 */
#ifndef TESSERA_TOOLS_CKPT_H
#define TESSERA_TOOLS_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include <tessera/gpt2.h>

#include "model.h"

/* A complete checkpoint of a run folder. */
typedef struct ckpt {
    int step;
    model_arch_t arch; /* whose model: GPT-2's file or Llama's folder */
    char dir[4096];   /* OUT/step-… */
    char model[4096]; /* OUT/step-…/model.safetensors (GPT-2), or the HF
                         folder OUT/step-…/model/ (Llama) */
    char state[4096]; /* OUT/step-…/train.state */
} ckpt_t;

/* Remove what a killed save left in the run folder `out`: temporaries of
 * processes no longer running. Returns 0, or 1 after reporting. */
int ckpt_clean(const char *out);

/* Save m's weights and optimizer state as checkpoint `step` of `out`, with
 * `extra` (the tool's text) followed by the model's checksum line and the
 * shard's identity (shard 0 of `run`) in the state. *saved receives the checkpoint. On failure (reported; status 1)
 * the previous checkpoint is still the one `latest` names. */
int ckpt_save(const char *out, int step, uint64_t run, model_t *m, const char *extra,
              ckpt_t *saved);

/* Data parallel with ZeRO (docs/data-parallel.md): every rank's share of
 * the optimizer state. Rank r > 0 first writes its share with
 * ckpt_save_shard (OUT/.shard-STEP.rank-R.state, itself written
 * atomically); once every rank has, rank 0's ckpt_save_sharded moves the
 * shards 1 .. nshards-1 into the checkpoint's temporary folder as
 * train.state.R before the folder's one rename, so that the checkpoint
 * appears with every shard or not at all. Returns 0, or 1 after reporting. */
int ckpt_save_shard(const char *out, int step, int rank, uint64_t run, model_t *m);
int ckpt_save_sharded(const char *out, int step, int nshards, uint64_t run, model_t *m,
                      const char *extra, ckpt_t *saved);
/* The state file of rank `rank` in checkpoint c (c->state for rank 0). */
int ckpt_shard_path(const ckpt_t *c, int rank, char *path, size_t size);

/* What a state file's text says it is. */
typedef struct ckpt_shard_id {
    int rank;     /* the rank that wrote it: "shard R" (0 when absent: the
                     train.state of a save before the line existed) */
    int step;     /* "checkpoint-step S", or -1 when absent */
    uint64_t run; /* "run ID", or 0 when absent (a run saved before ids) */
} ckpt_shard_id_t;
/* Read the identity from the text `extra` of a state file. */
void ckpt_shard_id(const char *extra, ckpt_shard_id_t *id);

/* The checkpoint `latest` names in `out`, with both files present.
 * Returns 0, or 1 after reporting (no checkpoint, a dangling pointer, a
 * missing file). */
int ckpt_latest(const char *out, ckpt_t *c);

/* Whether the state text `extra` (read from c->state) belongs to c's model:
 * its step is c->step and its checksum is that of c->model. Returns 0, or
 * 1 after reporting the mismatch. */
int ckpt_verify(const ckpt_t *c, const char *extra);

/* The model file of what --checkpoint names: a safetensors file, a
 * checkpoint folder (OUT/step-…), or a run folder (its latest checkpoint).
 * Returns 0, or 1 after reporting. */
int ckpt_model_path(const char *arg, char *buf, size_t size);
/* The same for either family: for a Llama, what --checkpoint names is an
 * HF checkpoint folder (config.json), a checkpoint folder of a run
 * (OUT/step-…, its model/) or a run folder; buf receives the HF folder. */
int ckpt_model_path_arch(model_arch_t arch, const char *arg, char *buf, size_t size);

/* FNV-1a 64 of a model file, or of a model folder: every regular file's
 * name and bytes, in name order. Returns 0, or 1 after reporting. */
int ckpt_model_sum(const char *path, uint64_t *sum);

#endif
