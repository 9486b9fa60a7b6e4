/* tests/fuzz/fuzz_shard.c — llm.c token shards and the batch loader on
 * arbitrary files.
 *
 * Input: byte 0 picks the batch (1..4), byte 1 the sequence length (1..16),
 * bytes 2..5 a position to seek to; the rest is the shard file. An accepted
 * shard must hold exactly the file's tokens, and written again by
 * tsr_shard_write (a file in /dev/shm) give the same token bytes; a loader over it must hand out
 * the windows a plain walk over those tokens gives (wrapping to the start
 * when a window would run past the end), before and after seeking.
 */
#include <tessera/gpt2.h>

#include "fuzz_util.h"

enum { PARAMS = 6, HEADER_BYTES = 1024 };

static fuzz_file_t file;
static char rewrite_path[256]; /* where rewrite() writes */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_file_init(&file, "fuzz.bin");
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(rewrite_path, sizeof rewrite_path, "%s/tsr-fuzz-%ld.bin", dir, (long)getpid());
    return 0;
}

static uint16_t token_at(const uint8_t *file_bytes, size_t i)
{
    const uint8_t *p = file_bytes + HEADER_BYTES + 2 * i;
    return (uint16_t)(p[0] | p[1] << 8);
}

/* A few windows from position pos, each compared with the file's tokens. */
static void walk(tsr_loader_t *l, const uint8_t *f, size_t count, size_t bt, size_t pos,
                 int windows)
{
    int32_t *in = malloc(bt * sizeof *in), *tg = malloc(bt * sizeof *tg);
    FUZZ_CHECK(in && tg, "out of memory");
    for (int w = 0; w < windows; w++) {
        FUZZ_CHECK(tsr_loader_position(l) == pos, "position %zu, want %zu",
                   tsr_loader_position(l), pos);
        FUZZ_CHECK(tsr_loader_next(l, in, tg) == TSR_OK, "next: %s", tsr_error_message());
        if (pos + bt + 1 > count)
            pos = 0;
        for (size_t i = 0; i < bt; i++)
            FUZZ_CHECK(in[i] == token_at(f, pos + i) && tg[i] == token_at(f, pos + i + 1),
                       "window at %zu, element %zu", pos, i);
        pos += bt;
    }
    free(in), free(tg);
}

/* The tokens written again by tsr_shard_write: the file must be the
 * canonical header (magic, version, count, zeros) and the input's token
 * bytes, and open to the same tokens. */
static void rewrite(const uint16_t *tok, size_t count, const uint8_t *f)
{
    int32_t *ids = malloc((count + 1) * sizeof *ids);
    FUZZ_CHECK(ids, "out of memory");
    for (size_t i = 0; i < count; i++)
        ids[i] = tok[i];
    int rc = tsr_shard_write(rewrite_path, ids, count);
    FUZZ_CHECK(rc == TSR_OK, "write: %s", tsr_error_message());
    free(ids);
    FILE *in = fopen(rewrite_path, "rb");
    FUZZ_CHECK(in, "reopen");
    size_t n = HEADER_BYTES + 2 * count;
    uint8_t *b = malloc(n + 1);
    FUZZ_CHECK(b && fread(b, 1, n + 1, in) == n, "the rewritten shard is not %zu bytes", n);
    fclose(in);
    int32_t h[3] = {20240520, 1, (int32_t)count};
    FUZZ_CHECK(memcmp(b, h, sizeof h) == 0, "header");
    for (size_t i = sizeof h; i < HEADER_BYTES; i++)
        FUZZ_CHECK(b[i] == 0, "reserved header byte %zu", i);
    FUZZ_CHECK(memcmp(b + HEADER_BYTES, f + HEADER_BYTES, 2 * count) == 0, "tokens");
    free(b);
    tsr_shard_t *s;
    FUZZ_CHECK(tsr_shard_open(&s, rewrite_path) == TSR_OK && tsr_shard_size(s) == count,
               "the rewritten shard: %s", tsr_error_message());
    tsr_shard_close(s);
    unlink(rewrite_path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < PARAMS)
        return 0;
    int batch = 1 + data[0] % 4, seq_len = 1 + data[1] % 16;
    size_t seek = (size_t)(data[2] | data[3] << 8 | data[4] << 16 | (uint32_t)data[5] << 24);
    const uint8_t *f = data + PARAMS;
    size_t n = size - PARAMS;
    fuzz_file_set(&file, f, n);

    tsr_shard_t *s = (tsr_shard_t *)1;
    fuzz_clear_error();
    int rc = tsr_shard_open(&s, file.path);
    if (rc != TSR_OK) {
        FUZZ_CHECK_REFUSAL(rc);
        FUZZ_CHECK(s == NULL, "a failed open left a shard");
        tsr_loader_t *l = (tsr_loader_t *)1;
        FUZZ_CHECK(tsr_loader_open(&l, file.path, batch, seq_len) == rc && l == NULL,
                   "the loader accepted a shard the reader refused");
        return 0;
    }
    size_t count = tsr_shard_size(s);
    FUZZ_CHECK(n == HEADER_BYTES + 2 * count, "%zu tokens in a file of %zu bytes", count, n);
    const uint16_t *tok = tsr_shard_tokens(s);
    for (size_t i = 0; i < count; i++)
        FUZZ_CHECK(tok[i] == token_at(f, i), "token %zu", i);
    rewrite(tok, count, f);
    tsr_shard_close(s);

    size_t bt = (size_t)batch * (size_t)seq_len;
    tsr_loader_t *l = (tsr_loader_t *)1;
    fuzz_clear_error();
    rc = tsr_loader_open(&l, file.path, batch, seq_len);
    FUZZ_CHECK((rc == TSR_OK) == (count >= bt + 1), "loader over %zu tokens, window %zu: %d",
               count, bt, rc);
    if (rc != TSR_OK) {
        FUZZ_CHECK_REFUSAL(rc);
        FUZZ_CHECK(l == NULL, "a failed open left a loader");
        return 0;
    }
    size_t batches = tsr_loader_batches(l);
    FUZZ_CHECK(batches == (count - 1) / bt, "%zu batches of %zu in %zu tokens", batches, bt,
               count);
    walk(l, f, count, bt, 0, (int)(batches < 8 ? batches + 1 : 8));

    fuzz_clear_error();
    rc = tsr_loader_seek(l, seek);
    FUZZ_CHECK((rc == TSR_OK) == (seek <= count), "seek to %zu of %zu: %d", seek, count, rc);
    if (rc == TSR_OK)
        walk(l, f, count, bt, seek, 3);
    else
        FUZZ_CHECK_REFUSAL(rc);
    tsr_loader_close(l);
    return 0;
}
