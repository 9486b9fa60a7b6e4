/* Token shards (llm.c format), both kinds (uint16: magic 20240520 version 1;
 * uint32: magic 20240801 version 7): write/open round trips and the exact
 * bytes, the narrowest width, rejected ids, bad magic/version/size; the
 * loader's windows and wrap-around against a closed-form position over both
 * widths, and seeking. */
#include "io_util.h"
#include "nn/io/safetensors.h"

enum { MAGIC = 20240520, MAGIC32 = 20240801, VERSION32 = 7 };

static int32_t *ramp(size_t n, uint32_t seed)
{
    int32_t *t = malloc(n * sizeof *t + 4);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        t[i] = (int32_t)(seed >> 16);
    }
    return t;
}

/* A header and ntok zero tokens of `width` bytes. */
static void write_raw_shard_w(const char *path, int32_t magic, int32_t version, int32_t count,
                              size_t ntok, size_t width)
{
    size_t n = 1024 + width * ntok;
    unsigned char *b = calloc(1, n);
    int32_t h[3] = {magic, version, count};
    memcpy(b, h, sizeof h);
    io_write(path, b, n);
    free(b);
}

static void write_raw_shard(const char *path, int32_t magic, int32_t version, int32_t count,
                            size_t ntok)
{
    write_raw_shard_w(path, magic, version, count, ntok, 2);
}

/* The file's header words and its size. */
static void expect_file(const char *path, int32_t magic, int32_t version, size_t n,
                        size_t width)
{
    size_t len;
    unsigned char *b = (unsigned char *)io_read(path, &len);
    cr_assert_eq(len, 1024 + width * n, "%s: %zu bytes", path, len);
    int32_t h[256];
    memcpy(h, b, sizeof h);
    cr_assert_eq(h[0], magic);
    cr_assert_eq(h[1], version);
    cr_assert_eq(h[2], (int32_t)n);
    for (int i = 3; i < 256; i++)
        cr_assert_eq(h[i], 0);
    free(b);
}

static void expect_open_fails(const char *path, int want, const char *needle)
{
    tsr_shard_t *s = (tsr_shard_t *)1;
    int rc = tsr_shard_open(&s, path);
    cr_assert_eq(rc, want, "%s: rc %d (%s)", needle, rc, tsr_error_message());
    cr_assert_null(s);
    cr_assert_not_null(strstr(tsr_error_message(), needle), "\"%s\" lacks \"%s\"",
                       tsr_error_message(), needle);
}

Test(shard, round_trip_and_bytes)
{
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "train.bin");
    size_t n = 10000;
    int32_t *t = ramp(n, 1);
    t[0] = 0, t[1] = 65535, t[2] = 50256;
    cr_assert_eq(tsr_shard_write(path, t, n), TSR_OK, "%s", tsr_error_message());

    size_t len;
    unsigned char *b = (unsigned char *)io_read(path, &len);
    cr_assert_eq(len, 1024 + 2 * n);
    int32_t h[256];
    memcpy(h, b, sizeof h);
    cr_assert_eq(h[0], MAGIC);
    cr_assert_eq(h[1], 1);
    cr_assert_eq(h[2], (int32_t)n);
    for (int i = 3; i < 256; i++)
        cr_assert_eq(h[i], 0);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(b[1024 + 2 * i] | b[1025 + 2 * i] << 8, t[i], "token %zu little-endian", i);
    free(b);

    tsr_shard_t *s;
    cr_assert_eq(tsr_shard_open(&s, path), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_shard_size(s), n);
    cr_assert_eq(tsr_shard_width(s), 2);
    const uint16_t *tok = tsr_shard_tokens(s);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(tok[i], t[i]);
        cr_assert_eq(tsr_shard_token(s, i), t[i]);
    }
    cr_assert_null(tsr_shard_tokens32(s), "no uint32 view of a uint16 shard");
    cr_assert_not_null(strstr(tsr_error_message(), "2 bytes wide"), "%s", tsr_error_message());
    cr_assert_eq(tsr_shard_token(s, n), -1);
    cr_assert_not_null(strstr(tsr_error_message(), "10000"), "%s", tsr_error_message());
    tsr_shard_close(s);

    cr_assert_eq(tsr_shard_write(path, t, 0), TSR_OK, "an empty shard");
    cr_assert_eq(tsr_shard_open(&s, path), TSR_OK);
    cr_assert_eq(tsr_shard_size(s), 0);
    tsr_shard_close(s);
    free(t);
    io_rmtree(dir);
}

Test(shard, ids_out_of_range)
{
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "bad.bin");
    int32_t t[4] = {1, 2, 65536, 3};
    cr_assert_eq(tsr_shard_write_width(path, t, 4, 2), TSR_EINVAL);
    cr_assert_not_null(strstr(tsr_error_message(), "token 2 is 65536"), "id and position: %s",
                       tsr_error_message());
    cr_assert_not(io_exists(path), "nothing written");
    t[2] = -1;
    for (int w = 0; w <= 4; w += 2) {
        cr_assert_eq(tsr_shard_write_width(path, t, 4, w), TSR_EINVAL, "width %d", w);
        cr_assert_not_null(strstr(tsr_error_message(), "token 2 is -1"), "%s",
                           tsr_error_message());
    }
    cr_assert_eq(tsr_shard_write(path, t, 4), TSR_EINVAL);
    cr_assert_not(io_exists(path));
    t[2] = 5;
    cr_assert_eq(tsr_shard_write_width(path, t, 4, 3), TSR_EINVAL);
    cr_assert_not_null(strstr(tsr_error_message(), "width 3"), "%s", tsr_error_message());
    cr_assert_eq(tsr_shard_write_width(path, t, 4, 1), TSR_EINVAL);
    cr_assert_eq(tsr_shard_write_width(path, t, 4, 8), TSR_EINVAL);
    cr_assert_not(io_exists(path));

    /* an existing shard survives a rejected rewrite */
    t[2] = 7;
    cr_assert_eq(tsr_shard_write(path, t, 4), TSR_OK);
    t[2] = 70000;
    cr_assert_eq(tsr_shard_write_width(path, t, 4, 2), TSR_EINVAL);
    t[2] = -70000;
    cr_assert_eq(tsr_shard_write(path, t, 4), TSR_EINVAL);
    tsr_shard_t *s;
    cr_assert_eq(tsr_shard_open(&s, path), TSR_OK);
    cr_assert_eq(tsr_shard_tokens(s)[2], 7);
    tsr_shard_close(s);
    io_rmtree(dir);
}

Test(shard, corrupt_files)
{
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "c.bin");
    expect_open_fails(path, TSR_EIO, "cannot open");
    io_write(path, "abc", 3);
    expect_open_fails(path, TSR_EINVAL, "shorter than");
    write_raw_shard(path, 20240521, 1, 10, 10);
    expect_open_fails(path, TSR_EINVAL, "bad magic 20240521");
    write_raw_shard(path, MAGIC, 2, 10, 10);
    expect_open_fails(path, TSR_EINVAL, "unsupported version 2");
    write_raw_shard(path, MAGIC, 1, 11, 10);
    expect_open_fails(path, TSR_EINVAL, "header says 11 tokens");
    write_raw_shard(path, MAGIC, 1, 9, 10);
    expect_open_fails(path, TSR_EINVAL, "header says 9 tokens");
    write_raw_shard(path, MAGIC, 1, -1, 10);
    expect_open_fails(path, TSR_EINVAL, "tokens");
    write_raw_shard(path, MAGIC, 1, 10, 10);
    tsr_shard_t *s;
    cr_assert_eq(tsr_shard_open(&s, path), TSR_OK, "%s", tsr_error_message());
    tsr_shard_close(s);
    io_rmtree(dir);
}

/* The uint32 kind: each magic with its own version only, the size from
 * 4-byte tokens, ids beyond int32 refused. */
Test(shard, corrupt_files_32)
{
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "c.bin");
    write_raw_shard_w(path, MAGIC32, 7, 10, 10, 4);
    tsr_shard_t *s;
    cr_assert_eq(tsr_shard_open(&s, path), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_shard_width(s), 4);
    cr_assert_eq(tsr_shard_size(s), 10);
    tsr_shard_close(s);

    write_raw_shard_w(path, MAGIC32, 1, 10, 10, 4);
    expect_open_fails(path, TSR_EINVAL, "unsupported version 1 for magic 20240801");
    write_raw_shard_w(path, MAGIC, 7, 10, 10, 2);
    expect_open_fails(path, TSR_EINVAL, "unsupported version 7 for magic 20240520");
    write_raw_shard_w(path, MAGIC32, 8, 10, 10, 4);
    expect_open_fails(path, TSR_EINVAL, "unsupported version 8");
    write_raw_shard_w(path, 20240802, 7, 10, 10, 4);
    expect_open_fails(path, TSR_EINVAL, "bad magic 20240802");
    /* truncated and oversized */
    write_raw_shard_w(path, MAGIC32, 7, 10, 9, 4);
    expect_open_fails(path, TSR_EINVAL, "header says 10 tokens of 4 bytes");
    write_raw_shard_w(path, MAGIC32, 7, 10, 11, 4);
    expect_open_fails(path, TSR_EINVAL, "header says 10 tokens of 4 bytes");
    write_raw_shard_w(path, MAGIC32, 7, 10, 10, 4);
    size_t len;
    char *b = io_read(path, &len);
    io_write(path, b, len - 1);
    expect_open_fails(path, TSR_EINVAL, "the file has 1063 bytes");
    free(b);
    /* a file sized for the other width, either way round */
    write_raw_shard_w(path, MAGIC, 1, 10, 10, 4);
    expect_open_fails(path, TSR_EINVAL, "header says 10 tokens of 2 bytes");
    write_raw_shard_w(path, MAGIC32, 7, 10, 10, 2);
    expect_open_fails(path, TSR_EINVAL, "header says 10 tokens of 4 bytes");
    write_raw_shard_w(path, MAGIC32, 7, -1, 10, 4);
    expect_open_fails(path, TSR_EINVAL, "header says -1 tokens");

    /* uint32 ids above INT32_MAX cannot be handed out as int32 */
    write_raw_shard_w(path, MAGIC32, 7, 3, 3, 4);
    b = io_read(path, &len);
    uint32_t big = 0x80000000u;
    memcpy(b + 1024 + 4, &big, 4);
    io_write(path, b, len);
    expect_open_fails(path, TSR_EINVAL, "token 1 is 2147483648");
    big = 0x7fffffffu; /* the largest that is accepted */
    memcpy(b + 1024 + 4, &big, 4);
    io_write(path, b, len);
    cr_assert_eq(tsr_shard_open(&s, path), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_shard_token(s, 1), INT32_MAX);
    tsr_shard_close(s);
    free(b);
    io_rmtree(dir);
}

/* Windows start at k * BT for k = 0, 1, … while k * BT + BT + 1 <= n, then
 * the loader starts over: call c reads the window at (c mod batches) * BT. */
static void check_loader_w(size_t n, int B, int T, int calls, int width)
{
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "l.bin");
    int32_t *t = ramp(n, 7);
    for (size_t i = 0; i < n; i++) /* width 4: Llama 3's ids, most above 65535 */
        t[i] = width == 2 ? t[i] & 0xffff : (int32_t)((uint32_t)t[i] % 128256u);
    cr_assert_eq(tsr_shard_write_width(path, t, n, width), TSR_OK);
    tsr_shard_t *s;
    cr_assert_eq(tsr_shard_open(&s, path), TSR_OK);
    cr_assert_eq(tsr_shard_width(s), width);
    tsr_shard_close(s);
    tsr_loader_t *l;
    cr_assert_eq(tsr_loader_open(&l, path, B, T), TSR_OK, "%s", tsr_error_message());
    size_t bt = (size_t)B * (size_t)T, nb = (n - 1) / bt;
    cr_assert_eq(tsr_loader_batches(l), nb ? nb : 1);
    int32_t *in = malloc(bt * sizeof *in), *tg = malloc(bt * sizeof *tg);
    for (int c = 0; c < calls; c++) {
        size_t start = ((size_t)c % tsr_loader_batches(l)) * bt;
        cr_assert_eq(tsr_loader_next(l, in, tg), TSR_OK);
        for (size_t i = 0; i < bt; i++) {
            cr_assert_eq(in[i], t[start + i], "n %zu B %d T %d call %d input %zu", n, B, T, c, i);
            cr_assert_eq(tg[i], t[start + i + 1], "call %d target %zu", c, i);
        }
    }
    free(in), free(tg), free(t);
    tsr_loader_close(l);
    io_rmtree(dir);
}

static void check_loader(size_t n, int B, int T, int calls)
{
    check_loader_w(n, B, T, calls, 2);
    check_loader_w(n, B, T, calls, 4);
}

Test(shard, loader_windows_and_wrap)
{
    check_loader(1000, 4, 8, 200);  /* 31 windows, 31 * 32 + 1 = 993 <= 1000 */
    check_loader(993, 4, 8, 70);    /* exactly 31 full windows */
    check_loader(992, 4, 8, 70);    /* the 31st window is one token short */
    check_loader(33, 4, 8, 5);      /* one window only */
    check_loader(10007, 3, 17, 500);
    check_loader(100, 1, 1, 250);
}

Test(shard, loader_position_and_seek)
{
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "s.bin");
    int32_t *t = ramp(500, 3);
    for (size_t i = 0; i < 500; i++)
        t[i] &= 0x7fff;
    cr_assert_eq(tsr_shard_write(path, t, 500), TSR_OK);
    tsr_loader_t *l;
    cr_assert_eq(tsr_loader_open(&l, path, 2, 10), TSR_OK);
    int32_t in[20], tg[20], in2[20], tg2[20];
    cr_assert_eq(tsr_loader_position(l), 0);
    for (int i = 0; i < 3; i++)
        tsr_loader_next(l, in, tg);
    size_t pos = tsr_loader_position(l);
    cr_assert_eq(pos, 60);
    int32_t saved[40][20];
    for (int i = 0; i < 40; i++) /* across the wrap at 24 windows */
        tsr_loader_next(l, saved[i], tg);
    cr_assert_eq(tsr_loader_seek(l, pos), TSR_OK);
    for (int i = 0; i < 40; i++) {
        tsr_loader_next(l, in2, tg2);
        cr_assert_eq(memcmp(in2, saved[i], sizeof in2), 0, "batch %d after seek", i);
    }
    cr_assert_eq(tsr_loader_seek(l, 501), TSR_EINVAL);
    cr_assert_eq(tsr_loader_seek(l, 495), TSR_OK, "a late position wraps at the next batch");
    tsr_loader_next(l, in, tg);
    cr_assert_eq(in[0], t[0]);
    tsr_loader_close(l);
    free(t);
    io_rmtree(dir);
}

Test(shard, loader_rejects)
{
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "small.bin");
    int32_t t[32] = {0};
    cr_assert_eq(tsr_shard_write(path, t, 32), TSR_OK);
    tsr_loader_t *l = (tsr_loader_t *)1;
    cr_assert_eq(tsr_loader_open(&l, path, 4, 8), TSR_EINVAL, "32 tokens < one window of 33");
    cr_assert_null(l);
    cr_assert_not_null(strstr(tsr_error_message(), "fewer than one window"), "%s",
                       tsr_error_message());
    cr_assert_eq(tsr_loader_open(&l, path, 0, 8), TSR_EINVAL);
    cr_assert_eq(tsr_loader_open(&l, path, 4, -1), TSR_EINVAL);
    cr_assert_eq(tsr_loader_open(&l, path, 65536, 65536), TSR_EINVAL);
    io_join(path, sizeof path, dir, "missing.bin");
    cr_assert_eq(tsr_loader_open(&l, path, 1, 1), TSR_EIO);
    io_rmtree(dir);
}

/* Every reader of nn/io refuses a FIFO by name at once (open() on a FIFO
 * without a writer never returned): shards, tokenizer files, safetensors. */
Test(shard, readers_refuse_fifos)
{
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "fifo");
    cr_assert_eq(mkfifo(path, 0600), 0);
    alarm(20); /* a blocking open ends the test as a crash, not a hang */
    expect_open_fails(path, TSR_EIO, "not a regular file (a FIFO)");
    tsr_tokenizer_t *tok = NULL;
    int rc = tsr_tokenizer_open(&tok, path, path);
    cr_assert_neq(rc, TSR_OK);
    cr_assert_null(tok);
    cr_assert(strstr(tsr_error_message(), "not a regular file (a FIFO)"), "%s",
              tsr_error_message());
    tsr__st_reader_t *r = NULL;
    rc = tsr__st_open(&r, path);
    cr_assert_eq(rc, TSR_EIO, "%s", tsr_error_message());
    cr_assert(strstr(tsr_error_message(), "not a regular file (a FIFO)"), "%s",
              tsr_error_message());
    alarm(0);
    io_rmtree(dir);
}

/* The uint32 kind: the exact bytes llm.c's Llama 3 data has (header magic
 * 20240801, version 7, count; little-endian uint32 tokens), ids above 65535
 * and up to INT32_MAX, read back through every accessor. */
Test(shard, round_trip_32)
{
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "llama.bin");
    size_t n = 5000;
    int32_t *t = ramp(n, 11);
    for (size_t i = 0; i < n; i++)
        t[i] = (int32_t)((uint32_t)t[i] * 3u % 128256u);
    t[0] = 0, t[1] = 65535, t[2] = 65536, t[3] = 128000, t[4] = 128255, t[5] = INT32_MAX;
    cr_assert_eq(tsr_shard_write_width(path, t, n, 4), TSR_OK, "%s", tsr_error_message());
    expect_file(path, MAGIC32, VERSION32, n, 4);
    size_t len;
    unsigned char *b = (unsigned char *)io_read(path, &len);
    for (size_t i = 0; i < n; i++) {
        const unsigned char *p = b + 1024 + 4 * i;
        uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24;
        cr_assert_eq(v, (uint32_t)t[i], "token %zu little-endian", i);
    }
    free(b);

    tsr_shard_t *s;
    cr_assert_eq(tsr_shard_open(&s, path), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_shard_size(s), n);
    cr_assert_eq(tsr_shard_width(s), 4);
    const uint32_t *tok = tsr_shard_tokens32(s);
    cr_assert_not_null(tok);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(tok[i], (uint32_t)t[i]);
        cr_assert_eq(tsr_shard_token(s, i), t[i], "token %zu", i);
    }
    cr_assert_null(tsr_shard_tokens(s), "no uint16 view of a uint32 shard");
    cr_assert_not_null(strstr(tsr_error_message(), "4 bytes wide"), "%s", tsr_error_message());
    cr_assert_eq(tsr_shard_token(s, n), -1);
    tsr_shard_close(s);

    /* the NULL shard */
    cr_assert_eq(tsr_shard_width(NULL), 0);
    cr_assert_eq(tsr_shard_size(NULL), 0);
    cr_assert_eq(tsr_shard_token(NULL, 0), -1);
    cr_assert_null(tsr_shard_tokens(NULL));
    cr_assert_null(tsr_shard_tokens32(NULL));

    cr_assert_eq(tsr_shard_write_width(path, t, 0, 4), TSR_OK, "an empty uint32 shard");
    expect_file(path, MAGIC32, VERSION32, 0, 4);
    cr_assert_eq(tsr_shard_open(&s, path), TSR_OK);
    cr_assert_eq(tsr_shard_size(s), 0);
    cr_assert_eq(tsr_shard_width(s), 4);
    tsr_shard_close(s);
    free(t);
    io_rmtree(dir);
}

/* Width 0 (and tsr_shard_write): uint16 while every id is < 65536, uint32
 * from the first larger id on; width 2 or 4 as asked. */
Test(shard, narrowest_width)
{
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "w.bin");
    int32_t t[6] = {5, 65535, 0, 100, 42, 7};
    for (int api = 0; api < 2; api++) {
        int rc = api ? tsr_shard_write(path, t, 6) : tsr_shard_write_width(path, t, 6, 0);
        cr_assert_eq(rc, TSR_OK);
        expect_file(path, MAGIC, 1, 6, 2);
        t[4] = 65536; /* one id past uint16 anywhere makes the whole shard uint32 */
        rc = api ? tsr_shard_write(path, t, 6) : tsr_shard_write_width(path, t, 6, 0);
        cr_assert_eq(rc, TSR_OK);
        expect_file(path, MAGIC32, VERSION32, 6, 4);
        tsr_shard_t *s;
        cr_assert_eq(tsr_shard_open(&s, path), TSR_OK);
        for (size_t i = 0; i < 6; i++)
            cr_assert_eq(tsr_shard_token(s, i), t[i]);
        tsr_shard_close(s);
        t[4] = 42;
    }
    /* small ids asked for as uint32 */
    cr_assert_eq(tsr_shard_write_width(path, t, 6, 4), TSR_OK);
    expect_file(path, MAGIC32, VERSION32, 6, 4);
    cr_assert_eq(tsr_shard_write_width(path, t, 6, 2), TSR_OK);
    expect_file(path, MAGIC, 1, 6, 2);
    cr_assert_eq(tsr_shard_write(path, t, 0), TSR_OK);
    expect_file(path, MAGIC, 1, 0, 2);
    io_rmtree(dir);
}

/* A loader over a uint32 shard of Llama 3-sized ids hands out exactly the
 * ids written, window after window, and seeks as over a uint16 one. */
Test(shard, loader_32)
{
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "l32.bin");
    enum { N = 4 * 16 * 3 + 1 }; /* exactly 3 windows of 4 x 16 */
    int32_t t[N];
    for (int i = 0; i < N; i++)
        t[i] = 128255 - 600 * i; /* falling from Llama 3's last id, some above 65535 */
    cr_assert_eq(tsr_shard_write(path, t, N), TSR_OK);
    tsr_loader_t *l;
    cr_assert_eq(tsr_loader_open(&l, path, 4, 16), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_loader_batches(l), 3);
    int32_t in[64], tg[64];
    for (int c = 0; c < 7; c++) {
        int start = (c % 3) * 64;
        cr_assert_eq(tsr_loader_next(l, in, tg), TSR_OK);
        for (int i = 0; i < 64; i++) {
            cr_assert_eq(in[i], t[start + i], "call %d input %d", c, i);
            cr_assert_eq(tg[i], t[start + i + 1], "call %d target %d", c, i);
        }
    }
    cr_assert_eq(tsr_loader_seek(l, 5), TSR_OK);
    cr_assert_eq(tsr_loader_next(l, in, tg), TSR_OK);
    cr_assert_eq(in[0], t[5]);
    cr_assert_eq(tg[63], t[69]);
    tsr_loader_close(l);
    io_rmtree(dir);
}
