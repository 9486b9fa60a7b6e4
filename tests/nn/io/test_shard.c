/* Token shards (llm.c format): write/open round trip and the exact bytes,
 * rejected ids, bad magic/version/size; the loader's windows and wrap-around
 * against a closed-form position, and seeking. */
#include "io_util.h"
#include "nn/io/safetensors.h"

enum { MAGIC = 20240520 };

static int32_t *ramp(size_t n, uint32_t seed)
{
    int32_t *t = malloc(n * sizeof *t + 4);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        t[i] = (int32_t)(seed >> 16);
    }
    return t;
}

static void write_raw_shard(const char *path, int32_t magic, int32_t version, int32_t count,
                            size_t ntok)
{
    size_t n = 1024 + 2 * ntok;
    unsigned char *b = calloc(1, n);
    int32_t h[3] = {magic, version, count};
    memcpy(b, h, sizeof h);
    io_write(path, b, n);
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
    const uint16_t *tok = tsr_shard_tokens(s);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(tok[i], t[i]);
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
    cr_assert_eq(tsr_shard_write(path, t, 4), TSR_EINVAL);
    cr_assert_not_null(strstr(tsr_error_message(), "65536"), "%s", tsr_error_message());
    cr_assert_not(io_exists(path), "nothing written");
    t[2] = -1;
    cr_assert_eq(tsr_shard_write(path, t, 4), TSR_EINVAL);
    cr_assert_not(io_exists(path));

    /* an existing shard survives a rejected rewrite */
    t[2] = 7;
    cr_assert_eq(tsr_shard_write(path, t, 4), TSR_OK);
    t[2] = 70000;
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

/* Windows start at k * BT for k = 0, 1, … while k * BT + BT + 1 <= n, then
 * the loader starts over: call c reads the window at (c mod batches) * BT. */
static void check_loader(size_t n, int B, int T, int calls)
{
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "l.bin");
    int32_t *t = ramp(n, 7);
    for (size_t i = 0; i < n; i++)
        t[i] &= 0xffff;
    cr_assert_eq(tsr_shard_write(path, t, n), TSR_OK);
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
