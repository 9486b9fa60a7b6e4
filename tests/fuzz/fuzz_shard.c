/* tests/fuzz/fuzz_shard.c — llm.c token shards and the batch loader on
 * arbitrary files.
 *
 * Input: byte 0 picks the batch (1..4), byte 1 the sequence length (1..16),
 * bytes 2..5 a position to seek to; the rest is the shard file. An accepted
 * shard must hold exactly the file's tokens; a loader over it must hand out
 * the windows a plain walk over those tokens gives (wrapping to the start
 * when a window would run past the end), before and after seeking.
 */
#include <tessera/gpt2.h>

#include "fuzz_util.h"

enum { PARAMS = 6, HEADER_BYTES = 1024 };

static fuzz_file_t file;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_file_init(&file, "fuzz.bin");
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
