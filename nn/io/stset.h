/* nn/io/stset.h — a checkpoint folder in Hugging Face's layout: one
 * `model.safetensors`, or shards named by `model.safetensors.index.json`
 * ({"metadata": {"total_size": N}, "weight_map": {tensor: shard file}}).
 *
 * Reading validates the whole set at open: every shard the index names
 * exists and is a valid safetensors file, holds exactly the tensors the map
 * gives it, and no tensor is in two shards. As transformers does, a
 * `model.safetensors` takes precedence over an index beside it.
 *
 * Writing replaces the set in a folder so that a process killed (or a write
 * failing) at any point leaves the previous set or the new one readable,
 * never an index naming a missing or partial shard, and never a mix:
 *   1. every shard and the index are written in full under temporary names
 *      (`<name>.part.<pid>`), each fsynced — a full disk fails here, with
 *      nothing replaced;
 *   2. the shards are renamed to their names, which are never names the
 *      set in place uses (the new set takes `model-NNNNN-of-NNNNN.b.safetensors`
 *      where the old one has `model-NNNNN-of-NNNNN.safetensors`, and back);
 *      the folder is fsynced;
 *   3. the index is renamed in (the switch; for a single file, the rename of
 *      `model.safetensors` is the switch), the folder fsynced;
 *   4. a `model.safetensors` left from an earlier single-file set is removed
 *      (while it exists it is what readers take, so this is the switch when
 *      the old set was a single file);
 *   5. the old set's index, then its shards, are removed.
 * A shard file that no index names and temporaries of processes no longer
 * running are leftovers of a killed write; the next write removes them.
 * Must never abort or print; errors are TSR_E… with a message.
 */
#ifndef TSR_NN_IO_STSET_H
#define TSR_NN_IO_STSET_H

#include <stddef.h>
#include <stdint.h>

#include "nn/io/safetensors.h"

#define TSR__STSET_SINGLE "model.safetensors"
#define TSR__STSET_INDEX "model.safetensors.index.json"
#define TSR__STSET_MAX_INDEX ((size_t)64 << 20)

/* ---- the index file ----------------------------------------------------- */

typedef struct tsr__stset_index {
    size_t nfiles;
    char **files;       /* distinct shard names, in order of first use */
    size_t nmap;
    char **names;       /* tensor names, sorted */
    size_t *file;       /* names[i] is in files[file[i]] */
    int has_total;
    uint64_t total_size; /* metadata.total_size when has_total */
} tsr__stset_index_t;

/* Parse an index held in buf; `what` names it in messages. TSR_EINVAL for a
 * malformed index (a shard name with '/' or that is "." or "..", a tensor
 * name that is empty, a weight_map that is empty, …), TSR_ENOMEM. */
int tsr__stset_index_parse(const char *buf, size_t len, const char *what,
                           tsr__stset_index_t *idx);
void tsr__stset_index_free(tsr__stset_index_t *idx);

/* ---- reader ------------------------------------------------------------- */

typedef struct tsr__stset tsr__stset_t;

typedef struct tsr__stset_entry {
    const char *name;
    const tsr__st_tensor_t *t; /* dtype, shape, numel */
    size_t shard;              /* index into the shards */
} tsr__stset_entry_t;

/* path: a folder (model.safetensors, else model.safetensors.index.json in
 * it), an index file, or a single safetensors file. TSR_EIO when a file
 * cannot be opened or read, TSR_EINVAL for an invalid file or a set that
 * does not agree with its index (the message names the file and tensor). */
int tsr__stset_open(tsr__stset_t **out, const char *path);
void tsr__stset_close(tsr__stset_t *s);

size_t tsr__stset_count(const tsr__stset_t *s);
/* Entries sorted by name; NULL out of range. */
const tsr__stset_entry_t *tsr__stset_at(const tsr__stset_t *s, size_t i);
/* NULL when absent. */
const tsr__stset_entry_t *tsr__stset_find(const tsr__stset_t *s, const char *name);
size_t tsr__stset_shards(const tsr__stset_t *s);
const char *tsr__stset_shard_path(const tsr__stset_t *s, size_t i);
/* Whether the set was read through an index. */
int tsr__stset_sharded(const tsr__stset_t *s);

/* As tsr__st_read_f32 (F32, BF16, F16, F64 converted to float) and
 * tsr__st_read_raw (the stored bytes). */
int tsr__stset_read_f32(tsr__stset_t *s, const tsr__stset_entry_t *e, float *out, size_t numel);
int tsr__stset_read_raw(tsr__stset_t *s, const tsr__stset_entry_t *e, void *out, size_t bytes);
/* numel bfloat16 bit patterns: BF16 as stored, F32 rounded to nearest even
 * (a NaN stays a quiet NaN); other dtypes TSR_EINVAL. */
int tsr__stset_read_bf16(tsr__stset_t *s, const tsr__stset_entry_t *e, uint16_t *out,
                         size_t numel);

/* ---- writer ------------------------------------------------------------- */

typedef struct tsr__stset_writer tsr__stset_writer_t;

int tsr__stset_writer_create(tsr__stset_writer_t **out);
void tsr__stset_writer_free(tsr__stset_writer_t *w);
/* A tensor whose stored bytes are at data (not copied: valid until write). */
int tsr__stset_writer_add(tsr__stset_writer_t *w, const char *name, tsr__st_dtype_t dtype,
                          int ndim, const uint64_t *shape, const void *data);
/* A tensor given as float32, stored as F32 or BF16 (rounded to nearest even,
 * NaN kept NaN) at write time. */
int tsr__stset_writer_add_f32(tsr__stset_writer_t *w, const char *name, tsr__st_dtype_t store,
                              int ndim, const uint64_t *shape, const float *data);
/* A "__metadata__" entry of every shard ("format": "pt" is always there). */
int tsr__stset_writer_meta(tsr__stset_writer_t *w, const char *key, const char *value);
/* Write the set into folder dir (created if missing) in the order above.
 * Shards hold tensors in order of addition, a new shard starting when the
 * next tensor's data would take the current one past max_shard_bytes (a
 * tensor larger than that gets a shard of its own); 0 means no limit. One
 * shard is written as model.safetensors without an index. */
int tsr__stset_writer_write(tsr__stset_writer_t *w, const char *dir, uint64_t max_shard_bytes);

/* Test hook, NULL in use: called before each step of a write that changes
 * the folder (each temporary written, each rename and removal) with the
 * step's name and the path; a non-zero return fails the write there as an
 * I/O error would (a test may also end the process in it, like a kill). */
extern int (*tsr__stset_fault_hook)(const char *step, const char *path);

#endif
