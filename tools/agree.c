/* tools/agree.c — the ranks' agreement on a data-parallel run before it
 * trains (see agree.h): an all-reduce (MAX over bytes) of a buffer of one
 * record per rank, each rank writing its own slot and zeros elsewhere, is
 * an all-gather in one collective of the existing communication layer;
 * then the same checks on every rank.
 */
#include "agree.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/mpi.h>
#include <tessera/tessera.h>

#include "cli.h"

#define AGREE_MAGIC 0x54535241u /* "TSRA" */

/* The fields that must be equal on every rank, in the order they are
 * compared: the first that differs is the one named. */
enum { F_I32, F_F64, F_U64, F_RUN };
static const struct field {
    const char *name;
    size_t offset;
    int kind;
} fields[] = {
    {"--vocab", offsetof(agree_rec_t, vocab), F_I32},
    {"--context", offsetof(agree_rec_t, context), F_I32},
    {"--layers", offsetof(agree_rec_t, layers), F_I32},
    {"--heads", offsetof(agree_rec_t, heads), F_I32},
    {"--channels", offsetof(agree_rec_t, channels), F_I32},
    {"--kv-heads", offsetof(agree_rec_t, kv_heads), F_I32},
    {"--head-dim", offsetof(agree_rec_t, head_dim), F_I32},
    {"--intermediate", offsetof(agree_rec_t, intermediate), F_I32},
    {"the token tile (--tile-tokens)", offsetof(agree_rec_t, tile_tokens), F_I32},
    {"the vocabulary tile (--tile-vocab)", offsetof(agree_rec_t, tile_vocab), F_I32},
    {"the hidden tile (--tile-hidden)", offsetof(agree_rec_t, tile_hidden), F_I32},
    {"the channel tile (--tile-channels)", offsetof(agree_rec_t, tile_channels), F_I32},
    {"the precision (--precision; 0 fp32, 1 bf16)", offsetof(agree_rec_t, precision), F_I32},
    {"--recompute", offsetof(agree_rec_t, recompute), F_I32},
    {"--zero", offsetof(agree_rec_t, zero), F_I32},
    {"--steps", offsetof(agree_rec_t, steps), F_I32},
    {"the last step (--stop-at)", offsetof(agree_rec_t, last), F_I32},
    {"--batch", offsetof(agree_rec_t, batch), F_I32},
    {"--micro-batch", offsetof(agree_rec_t, micro), F_I32},
    {"--seq", offsetof(agree_rec_t, seq), F_I32},
    {"--warmup", offsetof(agree_rec_t, warmup), F_I32},
    {"--eval-every", offsetof(agree_rec_t, eval_every), F_I32},
    {"--eval-batches", offsetof(agree_rec_t, eval_batches), F_I32},
    {"--checkpoint-every", offsetof(agree_rec_t, ckpt_every), F_I32},
    {"--lr", offsetof(agree_rec_t, lr), F_F64},
    {"--min-lr", offsetof(agree_rec_t, min_lr), F_F64},
    {"--weight-decay", offsetof(agree_rec_t, wd), F_F64},
    {"--grad-clip", offsetof(agree_rec_t, clip), F_F64},
    {"--seed", offsetof(agree_rec_t, seed), F_U64},
    {"the training data's tokens", offsetof(agree_rec_t, ntrain), F_U64},
    {"the validation data's tokens", offsetof(agree_rec_t, nval), F_U64},
    {"--resume", offsetof(agree_rec_t, resume), F_I32},
    {"the resume step", offsetof(agree_rec_t, step), F_I32},
    {"the data position", offsetof(agree_rec_t, position), F_U64},
    {"the run id", offsetof(agree_rec_t, run), F_RUN},
};
#define NFIELDS ((int)(sizeof fields / sizeof *fields))

static size_t field_size(int kind)
{
    return kind == F_I32 ? sizeof(int32_t) : 8;
}

/* digits: of a double (6, or 17 where 6 do not tell two values apart) */
static void field_format(const agree_rec_t *rec, const struct field *f, int digits, char *buf,
                         size_t size)
{
    const char *p = (const char *)rec + f->offset;
    int32_t i;
    double d;
    uint64_t u;
    switch (f->kind) {
    case F_I32: memcpy(&i, p, sizeof i), snprintf(buf, size, "%" PRId32, i); break;
    case F_F64: memcpy(&d, p, sizeof d), snprintf(buf, size, "%.*g", digits, d); break;
    case F_U64: memcpy(&u, p, sizeof u), snprintf(buf, size, "%" PRIu64, u); break;
    default: memcpy(&u, p, sizeof u), snprintf(buf, size, "%016" PRIx64, u); break;
    }
}

/* FNV-1a 64 of the fields' bytes, in table order. */
static uint64_t fields_hash(const agree_rec_t *rec)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int k = 0; k < NFIELDS; k++) {
        const unsigned char *p = (const unsigned char *)rec + fields[k].offset;
        for (size_t b = 0; b < field_size(fields[k].kind); b++)
            h = (h ^ p[b]) * 0x100000001b3ull;
    }
    return h;
}

void agree_init(agree_rec_t *rec)
{
    memset(rec, 0, sizeof *rec);
    rec->shard_rank = rec->shard_step = -1;
}

/* every rank's record into all[nranks]: one all-reduce. Returns 0, or 1
 * after reporting. */
static int exchange(const agree_rec_t *mine, agree_rec_t *all, int rank, int nranks)
{
    size_t bytes = (size_t)nranks * sizeof *all;
    tsr_handle_t h = NULL;
    void *p;
    int rc = tsr_handle_alloc(&h, bytes);
    if (rc == TSR_OK && (rc = tsr_handle_acquire(h, TSR_W, &p)) == TSR_OK) {
        memset(p, 0, bytes);
        memcpy((char *)p + (size_t)rank * sizeof *all, mine, sizeof *mine);
        rc = tsr_handle_release(h);
    }
    /* each byte of the result is its slot owner's: the others' are 0 */
    if (rc == TSR_OK)
        rc = tsr_mpi_allreduce(h, TSR_MPI_BYTE, TSR_MPI_MAX);
    if (rc == TSR_OK && (rc = tsr_handle_acquire(h, TSR_R, &p)) == TSR_OK) {
        memcpy(all, p, bytes);
        rc = tsr_handle_release(h);
    }
    if (h != NULL)
        tsr_handle_unregister(h);
    return rc != TSR_OK ? cli_lib_fail(rc, "rank %d of %d: the ranks cannot agree on the run "
                                           "(a rank died or stopped?)", rank, nranks)
                        : 0;
}

/* The verdict on every record; the same on every rank. Returns 0 or 1
 * after reporting (as rank `me`). */
static int check(const agree_rec_t *all, int nranks, int me)
{
    const char *stop = "every rank stops before training";
    for (int r = 0; r < nranks; r++) {
        const agree_rec_t *a = &all[r];
        if (a->magic != AGREE_MAGIC || a->rank != r)
            return cli_fail("rank %d of %d: rank %d's record did not arrive whole (another "
                            "build of tessera-train?): %s", me, nranks, r, stop);
        if (a->status == AGREE_MISSING_SHARD)
            return cli_fail("rank %d of %d: rank %d has a missing shard (%s): %s", me, nranks,
                            r, a->note, stop);
        if (a->status != AGREE_READY)
            return cli_fail("rank %d of %d: rank %d cannot start (%s): %s", me, nranks, r,
                            a->note, stop);
    }
    for (int r = 1; r < nranks; r++) {
        if (all[r].hash == all[0].hash)
            continue;
        for (int k = 0; k < NFIELDS; k++) {
            const struct field *f = &fields[k];
            if (memcmp((const char *)&all[r] + f->offset, (const char *)&all[0] + f->offset,
                       field_size(f->kind)) == 0)
                continue;
            char mine[64], theirs[64];
            for (int digits = 6; digits <= 17; digits += 11) {
                field_format(&all[r], f, digits, theirs, sizeof theirs);
                field_format(&all[0], f, digits, mine, sizeof mine);
                if (strcmp(mine, theirs) != 0)
                    break;
            }
            return cli_fail("rank %d of %d: the ranks disagree: rank %d has %s %s, rank 0 has "
                            "%s (every rank must train the same model with the same flags): %s",
                            me, nranks, r, f->name, theirs, mine, stop);
        }
    }
    if (!all[0].resume)
        return 0;
    for (int r = 0; r < nranks; r++) {
        const agree_rec_t *a = &all[r];
        int want = a->zero ? r : 0;
        if (a->shard_rank != want)
            return cli_fail("rank %d of %d: rank %d's optimizer state '%s' is shard %d, "
                            "written by rank %d, not %s (shard %d): %s", me, nranks, r, a->note,
                            a->shard_rank, a->shard_rank,
                            a->zero ? "its own" : "rank 0's, which every rank loads without "
                                                  "--zero",
                            want, stop);
        if (a->shard_step != a->step)
            return cli_fail("rank %d of %d: rank %d's optimizer state '%s' is of step %d, not "
                            "of the checkpoint's step %d: %s", me, nranks, r, a->note,
                            a->shard_step, a->step, stop);
        if (a->shard_run != a->run)
            return cli_fail("rank %d of %d: rank %d's optimizer state '%s' belongs to run "
                            "%016" PRIx64 ", not to this run (%016" PRIx64 "): %s", me, nranks,
                            r, a->note, a->shard_run, a->run, stop);
    }
    return 0;
}

int agree_run(agree_rec_t *rec, uint64_t *run_id)
{
    int me = tsr_mpi_rank(), nranks = tsr_mpi_size();
    rec->magic = AGREE_MAGIC;
    rec->rank = me;
    rec->note[sizeof rec->note - 1] = '\0';
    rec->hash = fields_hash(rec);
    agree_rec_t one, *all = nranks > 1 ? calloc((size_t)nranks, sizeof *all) : &one;
    if (all == NULL)
        return cli_fail("out of memory");
    int status = 0;
    if (nranks > 1)
        status = exchange(rec, all, me, nranks);
    else
        one = *rec;
    if (status == 0)
        status = check(all, nranks, me);
    if (status == 0)
        *run_id = all[0].run != 0 ? all[0].run : all[0].proposal;
    if (all != &one)
        free(all);
    return status;
}
