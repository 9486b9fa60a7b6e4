/* tests/fuzz/fuzz_shard.c — llm.c token shards (GPT-2's uint16 kind, magic
 * 20240520 version 1, and Llama 3's uint32 kind, magic 20240801 version 7)
 * and the batch loader on arbitrary files.
 *
 * Input: byte 0 picks the batch (1..4), byte 1 the sequence length (1..16),
 * bytes 2..5 a position to seek to; the rest is the shard file. An accepted
 * shard must have one of the two headers and the width it names, hold
 * exactly the file's tokens (through tsr_shard_token and the view of its
 * width; the other view refused), and written again by
 * tsr_shard_write_width (a file in /dev/shm) with its width give the same
 * bytes, and with width 0 the narrowest kind that holds its ids; a loader
 * over it must hand out the windows a plain walk over those tokens gives
 * (wrapping to the start when a window would run past the end), before and
 * after seeking.
 */
#include <tessera/gpt2.h>

#include "fuzz_util.h"

enum { PARAMS = 6, HEADER_BYTES = 1024 };
enum { MAGIC16 = 20240520, VERSION16 = 1, MAGIC32 = 20240801, VERSION32 = 7 };

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

static int width; /* of the shard under test: 2 or 4 bytes */

/* Token i of the file, little-endian, as an unsigned id. */
static uint32_t token_at(const uint8_t *file_bytes, size_t i)
{
    const uint8_t *p = file_bytes + HEADER_BYTES + (size_t)width * i;
    if (width == 2)
        return (uint32_t)(p[0] | p[1] << 8);
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int32_t header_word(const uint8_t *f, int k)
{
    int32_t v;
    memcpy(&v, f + 4 * k, 4);
    return v;
}

/* Whether the file is a shard, judged from its bytes alone: one of the two
 * headers, the size its count of tokens of that width makes, and (uint32)
 * every id within int32. Sets width. */
static int acceptable(const uint8_t *f, size_t n)
{
    if (n < HEADER_BYTES)
        return 0;
    int32_t magic = header_word(f, 0), version = header_word(f, 1), count = header_word(f, 2);
    if (magic == MAGIC16 && version == VERSION16)
        width = 2;
    else if (magic == MAGIC32 && version == VERSION32)
        width = 4;
    else
        return 0;
    if (count < 0 || n != HEADER_BYTES + (size_t)width * (size_t)count)
        return 0;
    for (size_t i = 0; width == 4 && i < (size_t)count; i++)
        if (token_at(f, i) > INT32_MAX)
            return 0;
    return 1;
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
            FUZZ_CHECK((uint32_t)in[i] == token_at(f, pos + i) &&
                           (uint32_t)tg[i] == token_at(f, pos + i + 1),
                       "window at %zu, element %zu", pos, i);
        pos += bt;
    }
    free(in), free(tg);
}

/* The file the tokens are written to with width w: its size, the canonical
 * header of the kind (magic, version, count, zeros), the input's tokens at
 * `want` bytes each, and it opens to the same tokens. */
static void rewrite(const int32_t *ids, size_t count, const uint8_t *f, int w, int want)
{
    int rc = tsr_shard_write_width(rewrite_path, ids, count, w);
    FUZZ_CHECK(rc == TSR_OK, "write width %d: %s", w, tsr_error_message());
    FILE *in = fopen(rewrite_path, "rb");
    FUZZ_CHECK(in, "reopen");
    size_t n = HEADER_BYTES + (size_t)want * count;
    uint8_t *b = malloc(n + 1);
    FUZZ_CHECK(b && fread(b, 1, n + 1, in) == n, "the rewritten shard is not %zu bytes", n);
    fclose(in);
    int32_t h[3] = {want == 2 ? MAGIC16 : MAGIC32, want == 2 ? VERSION16 : VERSION32,
                    (int32_t)count};
    FUZZ_CHECK(memcmp(b, h, sizeof h) == 0, "header of width %d", want);
    for (size_t i = sizeof h; i < HEADER_BYTES; i++)
        FUZZ_CHECK(b[i] == 0, "reserved header byte %zu", i);
    if (want == width) {
        FUZZ_CHECK(memcmp(b + HEADER_BYTES, f + HEADER_BYTES, (size_t)width * count) == 0,
                   "tokens");
    } else {
        for (size_t i = 0; i < count; i++) {
            const uint8_t *p = b + HEADER_BYTES + (size_t)want * i;
            uint32_t v = want == 2 ? (uint32_t)(p[0] | p[1] << 8)
                                   : (uint32_t)p[0] | (uint32_t)p[1] << 8 |
                                         (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
            FUZZ_CHECK(v == token_at(f, i), "token %zu at width %d", i, want);
        }
    }
    free(b);
    tsr_shard_t *s;
    FUZZ_CHECK(tsr_shard_open(&s, rewrite_path) == TSR_OK && tsr_shard_size(s) == count &&
                   tsr_shard_width(s) == want,
               "the rewritten shard: %s", tsr_error_message());
    tsr_shard_close(s);
    unlink(rewrite_path);
}

/* The accepted shard's tokens through every accessor, then written again:
 * at its own width (the same bytes), at width 0 (the narrowest kind), and a
 * uint32 shard's ids past 65535 refused at width 2. */
static void check_tokens(const tsr_shard_t *s, size_t count, const uint8_t *f)
{
    const uint16_t *t16 = tsr_shard_tokens(s);
    const uint32_t *t32 = tsr_shard_tokens32(s);
    FUZZ_CHECK((t16 != NULL) == (width == 2) && (t32 != NULL) == (width == 4),
               "the views of a width-%d shard", width);
    int32_t *ids = malloc((count + 1) * sizeof *ids);
    FUZZ_CHECK(ids, "out of memory");
    uint32_t max = 0;
    for (size_t i = 0; i < count; i++) {
        uint32_t want = token_at(f, i);
        uint32_t view = width == 2 ? t16[i] : t32[i];
        ids[i] = tsr_shard_token(s, i);
        FUZZ_CHECK(want <= INT32_MAX && view == want && (uint32_t)ids[i] == want, "token %zu",
                   i);
        max = want > max ? want : max;
    }
    FUZZ_CHECK(tsr_shard_token(s, count) == -1, "token past the end");
    rewrite(ids, count, f, width, width);
    rewrite(ids, count, f, 0, max > 65535 ? 4 : 2);
    if (max > 65535) {
        fuzz_clear_error();
        int rc = tsr_shard_write_width(rewrite_path, ids, count, 2);
        FUZZ_CHECK(rc == TSR_EINVAL && access(rewrite_path, F_OK) != 0,
                   "ids past 65535 at width 2: %d", rc);
    }
    free(ids);
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
    FUZZ_CHECK((rc == TSR_OK) == acceptable(f, n), "open gave %d: %s", rc,
               rc == TSR_OK ? "" : tsr_error_message());
    if (rc != TSR_OK) {
        FUZZ_CHECK_REFUSAL(rc);
        FUZZ_CHECK(s == NULL, "a failed open left a shard");
        tsr_loader_t *l = (tsr_loader_t *)1;
        FUZZ_CHECK(tsr_loader_open(&l, file.path, batch, seq_len) == rc && l == NULL,
                   "the loader accepted a shard the reader refused");
        return 0;
    }
    size_t count = tsr_shard_size(s);
    width = tsr_shard_width(s);
    int32_t magic = header_word(f, 0), version = header_word(f, 1);
    FUZZ_CHECK((magic == MAGIC16 && version == VERSION16 && width == 2) ||
                   (magic == MAGIC32 && version == VERSION32 && width == 4),
               "magic %d version %d accepted as width %d", (int)magic, (int)version, width);
    FUZZ_CHECK(header_word(f, 2) >= 0 && (size_t)header_word(f, 2) == count &&
                   n == HEADER_BYTES + (size_t)width * count,
               "%zu tokens of %d bytes in a file of %zu bytes", count, width, n);
    check_tokens(s, count, f);
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
