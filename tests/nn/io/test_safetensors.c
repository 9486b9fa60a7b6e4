/* safetensors: files built byte by byte are read back (F32, F16, BF16, F64,
 * integer dtypes, metadata); the writer round-trips and pads its header like
 * the reference; corrupt files each give the right status with nothing
 * leaked; atomic writes leave the old file when they fail. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>

#include "io_util.h"
#include "nn/io/safetensors.h"
#include "runtime/error.h"

#define ST_OPEN_OK(r, path)                                                                   \
    do {                                                                                      \
        int rc_ = tsr__st_open(&(r), (path));                                                 \
        cr_assert_eq(rc_, TSR_OK, "open %s: %s", (path), tsr_error_message());                \
    } while (0)

static void expect_open_fails(const char *path, int want, const char *needle)
{
    tsr__st_reader_t *r = (tsr__st_reader_t *)1;
    int rc = tsr__st_open(&r, path);
    cr_assert_eq(rc, want, "%s: rc %d, want %d (%s)", needle, rc, want, tsr_error_message());
    cr_assert_null(r);
    cr_assert_not_null(strstr(tsr_error_message(), needle), "message \"%s\" lacks \"%s\"",
                       tsr_error_message(), needle);
}

static void put_f32(unsigned char *b, float f)
{
    memcpy(b, &f, 4);
}

Test(safetensors, hand_built_file_with_every_float_dtype)
{
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "a.safetensors");
    /* data: w F32 [2,2] @0..16, h F16 [7] @16..30, b BF16 [3] @30..36, d F64 [1] @36..44 */
    unsigned char data[44];
    const float w[4] = {1.5f, -2.0f, 0.1f, 3e38f};
    for (int i = 0; i < 4; i++)
        put_f32(data + 4 * i, w[i]);
    const uint16_t h[7] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x7c00, 0x8000, 0x3555};
    const float hf[7] = {1.0f, -2.0f, 65504.0f, 0x1p-24f, INFINITY, -0.0f, 0.333251953125f};
    for (int i = 0; i < 7; i++)
        data[16 + 2 * i] = (unsigned char)h[i], data[17 + 2 * i] = (unsigned char)(h[i] >> 8);
    const uint16_t bf[3] = {0x3f80, 0xc0a0, 0xff80};
    const float bff[3] = {1.0f, -5.0f, -INFINITY};
    for (int i = 0; i < 3; i++)
        data[30 + 2 * i] = (unsigned char)bf[i], data[31 + 2 * i] = (unsigned char)(bf[i] >> 8);
    double dv = -0.375;
    memcpy(data + 36, &dv, 8);
    io_st_file(path,
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
               "\"h\":{\"dtype\":\"F16\",\"shape\":[7],\"data_offsets\":[16,30]},"
               "\"__metadata__\":{\"format\":\"pt\",\"note\":\"caf\\u00e9\"},"
               "\"b\":{\"dtype\":\"BF16\",\"shape\":[1,3],\"data_offsets\":[30,36]},"
               "\"d\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[36,44]}}   ",
               data, sizeof data);

    tsr__st_reader_t *r;
    ST_OPEN_OK(r, path);
    cr_assert_eq(tsr__st_count(r), 4);
    cr_assert_str_eq(tsr__st_at(r, 0)->name, "b", "sorted by name");
    cr_assert_str_eq(tsr__st_metadata(r, "format"), "pt");
    cr_assert_str_eq(tsr__st_metadata(r, "note"), "caf\xc3\xa9");
    cr_assert_null(tsr__st_metadata(r, "missing"));
    cr_assert_null(tsr__st_find(r, "nope"));

    const tsr__st_tensor_t *t = tsr__st_find(r, "w");
    cr_assert_not_null(t);
    cr_assert_eq(t->dtype, TSR__ST_F32);
    cr_assert_eq(t->ndim, 2);
    cr_assert_eq(t->shape[0], 2);
    cr_assert_eq(t->numel, 4);
    float out[8];
    cr_assert_eq(tsr__st_read_f32(r, t, out, 4), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(memcmp(out, w, sizeof w), 0);

    t = tsr__st_find(r, "h");
    cr_assert_eq(tsr__st_read_f32(r, t, out, 7), TSR_OK, "%s", tsr_error_message());
    for (int i = 0; i < 7; i++)
        cr_assert(out[i] == hf[i] && !signbit(out[i]) == !signbit(hf[i]),
                  "f16 0x%04x -> %a, want %a", h[i], (double)out[i], (double)hf[i]);
    uint16_t nan16 = 0x7e00;
    cr_assert(isnan(tsr__f16_to_f32(nan16)));

    t = tsr__st_find(r, "b");
    cr_assert_eq(tsr__st_read_f32(r, t, out, 3), TSR_OK, "%s", tsr_error_message());
    for (int i = 0; i < 3; i++)
        cr_assert_eq(out[i], bff[i], "bf16 0x%04x -> %a", bf[i], (double)out[i]);

    t = tsr__st_find(r, "d");
    cr_assert_eq(t->ndim, 0);
    cr_assert_eq(t->numel, 1, "a scalar has one element");
    cr_assert_eq(tsr__st_read_f32(r, t, out, 1), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(out[0], -0.375f);

    cr_assert_eq(tsr__st_read_f32(r, tsr__st_find(r, "w"), out, 3), TSR_EINVAL, "wrong numel");
    int32_t iv[4];
    cr_assert_eq(tsr__st_read_i32(r, tsr__st_find(r, "w"), iv, 4), TSR_EINVAL, "float as int");
    tsr__st_close(r);
    io_rmtree(dir);
}

Test(safetensors, every_f16_pattern_converts_exactly)
{
    /* f16 -> double is exact; compare with a reference built from the fields */
    for (uint32_t h = 0; h < 65536; h++) {
        int e = (h >> 10) & 31, m = h & 1023;
        double want = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY)
                                                         : ldexp(1024 + m, e - 25);
        if (h & 0x8000)
            want = -want;
        float got = tsr__f16_to_f32((uint16_t)h);
        if (isnan(want))
            cr_assert(isnan(got), "0x%04x", h);
        else
            cr_assert((double)got == want && !signbit(got) == !signbit(want), "0x%04x: %a vs %a",
                      h, (double)got, want);
    }
}

Test(safetensors, integer_dtypes)
{
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "i.safetensors");
    unsigned char data[8 * 4 + 4 * 3 + 8 + 2];
    const int64_t i64[4] = {0, -1, 2147483647, -2147483648LL};
    memcpy(data, i64, 32);
    const int32_t i32[3] = {7, -8, 65535};
    memcpy(data + 32, i32, 12);
    const int64_t big = 2147483648LL;
    memcpy(data + 44, &big, 8);
    data[52] = 200, data[53] = 1; /* U8 */
    io_st_file(path,
               "{\"a\":{\"dtype\":\"I64\",\"shape\":[4],\"data_offsets\":[0,32]},"
               "\"b\":{\"dtype\":\"I32\",\"shape\":[3],\"data_offsets\":[32,44]},"
               "\"c\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[44,52]},"
               "\"u\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[52,54]}}",
               data, sizeof data);
    tsr__st_reader_t *r;
    ST_OPEN_OK(r, path);
    int32_t out[4];
    cr_assert_eq(tsr__st_read_i32(r, tsr__st_find(r, "a"), out, 4), TSR_OK, "%s",
                 tsr_error_message());
    for (int i = 0; i < 4; i++)
        cr_assert_eq(out[i], (int32_t)i64[i]);
    cr_assert_eq(tsr__st_read_i32(r, tsr__st_find(r, "b"), out, 3), TSR_OK);
    cr_assert_eq(memcmp(out, i32, 12), 0);
    cr_assert_eq(tsr__st_read_i32(r, tsr__st_find(r, "c"), out, 1), TSR_EINVAL, "2^31 overflows");
    cr_assert_eq(tsr__st_read_i32(r, tsr__st_find(r, "u"), out, 2), TSR_OK);
    cr_assert_eq(out[0], 200);
    float f[4];
    cr_assert_eq(tsr__st_read_f32(r, tsr__st_find(r, "b"), f, 3), TSR_EINVAL, "int as float");
    tsr__st_close(r);
    io_rmtree(dir);
}

static int fill_ramp(void *ctx, size_t index, void *buf, size_t bytes)
{
    float *f = buf;
    for (size_t i = 0; i < bytes / 4; i++)
        f[i] = (float)(index * 1000 + i) + *(float *)ctx;
    return TSR_OK;
}

Test(safetensors, writer_round_trip)
{
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "w.safetensors");
    tsr__st_writer_t *w;
    cr_assert_eq(tsr__st_writer_create(&w), TSR_OK);
    const float a[6] = {1, 2, 3, 4, 5, 6};
    const int32_t b[3] = {-1, 0, 1 << 30};
    const uint16_t hb[2] = {0x3c00, 0x4000}; /* F16 1, 2 */
    float offset = 0.5f;
    cr_assert_eq(tsr__st_writer_add(w, "a", TSR__ST_F32, 2, (uint64_t[]){2, 3}, a), TSR_OK);
    cr_assert_eq(tsr__st_writer_add(w, "with \"quote\"\n", TSR__ST_I32, 1, (uint64_t[]){3}, b),
                 TSR_OK);
    cr_assert_eq(tsr__st_writer_add(w, "half", TSR__ST_F16, 1, (uint64_t[]){2}, hb), TSR_OK);
    cr_assert_eq(tsr__st_writer_add(w, "empty", TSR__ST_F32, 2, (uint64_t[]){0, 5}, NULL), TSR_OK);
    cr_assert_eq(tsr__st_writer_add_fill(w, "filled", TSR__ST_F32, 1, (uint64_t[]){5}, fill_ramp,
                                         &offset), TSR_OK);
    cr_assert_eq(tsr__st_writer_add(w, "a", TSR__ST_F32, 1, (uint64_t[]){1}, a), TSR_EINVAL,
                 "duplicate name");
    cr_assert_eq(tsr__st_writer_add(w, "__metadata__", TSR__ST_F32, 1, (uint64_t[]){1}, a),
                 TSR_EINVAL);
    cr_assert_eq(tsr__st_writer_add(w, "x", TSR__ST_F32, 1, (uint64_t[]){1}, NULL), TSR_EINVAL,
                 "no data");
    cr_assert_eq(tsr__st_writer_meta(w, "step", "1"), TSR_OK);
    cr_assert_eq(tsr__st_writer_meta(w, "text", "tab\there \"q\" \\ caf\xc3\xa9"), TSR_OK);
    cr_assert_eq(tsr__st_writer_meta(w, "step", "2"), TSR_OK, "a repeated key replaces");
    cr_assert_eq(tsr__st_writer_write(w, path), TSR_OK, "%s", tsr_error_message());
    tsr__st_writer_free(w);

    /* the reference's layout: header padded with spaces to a multiple of 8 */
    size_t n = 0;
    char *bytes = io_read(path, &n);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | (unsigned char)bytes[i];
    cr_assert_eq(hlen % 8, 0, "header length %llu", (unsigned long long)hlen);
    cr_assert_eq(n, 8 + hlen + 24 + 12 + 4 + 0 + 20);
    cr_assert_eq(bytes[8], '{');
    size_t end = 8 + hlen;
    while (bytes[end - 1] == ' ')
        end--;
    cr_assert_eq(bytes[end - 1], '}');
    cr_assert_eq(memcmp(bytes + 8 + hlen, a, 24), 0, "data follows in order of addition");
    free(bytes);

    tsr__st_reader_t *r;
    ST_OPEN_OK(r, path);
    cr_assert_eq(tsr__st_count(r), 5);
    cr_assert_str_eq(tsr__st_metadata(r, "step"), "2");
    cr_assert_str_eq(tsr__st_metadata(r, "text"), "tab\there \"q\" \\ caf\xc3\xa9");
    float f[6];
    cr_assert_eq(tsr__st_read_f32(r, tsr__st_find(r, "a"), f, 6), TSR_OK);
    cr_assert_eq(memcmp(f, a, 24), 0);
    int32_t iv[3];
    cr_assert_eq(tsr__st_read_i32(r, tsr__st_find(r, "with \"quote\"\n"), iv, 3), TSR_OK);
    cr_assert_eq(memcmp(iv, b, 12), 0);
    cr_assert_eq(tsr__st_read_f32(r, tsr__st_find(r, "half"), f, 2), TSR_OK);
    cr_assert(f[0] == 1.0f && f[1] == 2.0f);
    const tsr__st_tensor_t *e = tsr__st_find(r, "empty");
    cr_assert_eq(e->numel, 0);
    cr_assert_eq(e->shape[1], 5);
    cr_assert_eq(tsr__st_read_f32(r, e, f, 0), TSR_OK);
    cr_assert_eq(tsr__st_read_f32(r, tsr__st_find(r, "filled"), f, 5), TSR_OK);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(f[i], 4000.0f + (float)i + 0.5f, "fill of index 4");
    tsr__st_close(r);

    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    cr_assert_not(io_exists(tmp), "no temporary left behind");
    io_rmtree(dir);
}

Test(safetensors, writer_without_metadata_or_tensors)
{
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "e.safetensors");
    tsr__st_writer_t *w;
    cr_assert_eq(tsr__st_writer_create(&w), TSR_OK);
    cr_assert_eq(tsr__st_writer_write(w, path), TSR_OK, "%s", tsr_error_message());
    tsr__st_writer_free(w);
    size_t n = 0;
    char *b = io_read(path, &n);
    cr_assert_eq(n, 16, "8 bytes of length + \"{}\" padded to 8");
    cr_assert_eq(memcmp(b + 8, "{}      ", 8), 0);
    free(b);
    tsr__st_reader_t *r;
    ST_OPEN_OK(r, path);
    cr_assert_eq(tsr__st_count(r), 0);
    tsr__st_close(r);
    io_rmtree(dir);
}

/* ---- corrupt files ------------------------------------------------------ */

#define T1 "\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"

Test(safetensors, corrupt_files)
{
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "c.safetensors");
    const unsigned char zeros[64] = {0};

    expect_open_fails(path, TSR_EIO, "cannot open"); /* missing */
    expect_open_fails(dir, TSR_EIO, "not a regular file");

    io_write(path, "", 0);
    expect_open_fails(path, TSR_EINVAL, "too short");
    io_write(path, "\x10\0\0\0\0\0", 6);
    expect_open_fails(path, TSR_EINVAL, "too short");

    io_st_raw(path, 1000, "{" T1 "}", zeros, 8);
    expect_open_fails(path, TSR_EINVAL, "exceeds file size");
    io_st_raw(path, UINT64_MAX, "{" T1 "}", zeros, 8);
    expect_open_fails(path, TSR_EINVAL, "exceeds file size");

    io_st_file(path, "{" T1, zeros, 8);
    expect_open_fails(path, TSR_EINVAL, "invalid JSON");
    io_st_file(path, "{" T1 ",}", zeros, 8);
    expect_open_fails(path, TSR_EINVAL, "invalid JSON");
    io_st_file(path, "[1, 2]", zeros, 8);
    expect_open_fails(path, TSR_EINVAL, "not an object");
    io_st_file(path, "{" T1 "," T1 "}", zeros, 8);
    expect_open_fails(path, TSR_EINVAL, "duplicate");

    io_st_file(path, "{\"t\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", zeros, 8);
    expect_open_fails(path, TSR_EINVAL, "unknown dtype");
    io_st_file(path, "{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", zeros, 8);
    expect_open_fails(path, TSR_EINVAL, "8 bytes of data for 3 elements");
    io_st_file(path, "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,12]}}", zeros, 8);
    expect_open_fails(path, TSR_EINVAL, "beyond the data area");
    io_st_file(path, "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", zeros, 8);
    expect_open_fails(path, TSR_EINVAL, "begin after their end");
    io_st_file(path, "{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", zeros, 8);
    expect_open_fails(path, TSR_EINVAL, "non-negative");
    io_st_file(path, "{\"t\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", zeros,
               8);
    expect_open_fails(path, TSR_EINVAL, "non-negative");
    io_st_file(path, "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", zeros, 8);
    expect_open_fails(path, TSR_EINVAL, "data_offsets");
    io_st_file(path, "{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", zeros, 8);
    expect_open_fails(path, TSR_EINVAL, "shape");
    io_st_file(path, "{\"t\":{\"shape\":[2],\"data_offsets\":[0,8]}}", zeros, 8);
    expect_open_fails(path, TSR_EINVAL, "dtype");
    io_st_file(path, "{\"t\":[1]}", zeros, 8);
    expect_open_fails(path, TSR_EINVAL, "not an object");
    io_st_file(path,
               "{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
               "\"data_offsets\":[0,8]}}",
               zeros, 8);
    expect_open_fails(path, TSR_EINVAL, "overflows");
    io_st_file(path,
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
               zeros, 12);
    expect_open_fails(path, TSR_EINVAL, "overlap");
    io_st_file(path, "{\"__metadata__\":{\"n\":1}," T1 "}", zeros, 8);
    expect_open_fails(path, TSR_EINVAL, "not a string");
    io_st_file(path, "{\"__metadata__\":[]," T1 "}", zeros, 8);
    expect_open_fails(path, TSR_EINVAL, "__metadata__");
    io_st_file(path, "{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
               zeros, 8);
    expect_open_fails(path, TSR_EINVAL, "NUL");
    /* caught by fuzz_safetensors' metadata check: a key that is "__metadata__" up to a NUL was
     * read as the metadata, replacing the real one */
    io_st_file(path, "{\"__metadata__\":{\"a\":\"1\"},\"__metadata__\\u0000\":{\"a\":\"2\"}}",
               NULL, 0);
    expect_open_fails(path, TSR_EINVAL, "NUL");
    io_st_file(path, "{\"__metadata__\\u0000x\":{\"a\":\"2\"}}", NULL, 0);
    expect_open_fails(path, TSR_EINVAL, "NUL");

    /* still valid: empty tensors own no bytes; gaps and trailing bytes are tolerated */
    io_st_file(path,
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
               "\"b\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[12,14]}}",
               zeros, 20);
    tsr__st_reader_t *r;
    ST_OPEN_OK(r, path);
    tsr__st_close(r);
    io_rmtree(dir);
}

Test(safetensors, header_over_the_limit)
{
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "big.safetensors");
    /* a sparse file large enough that only the limit can refuse it */
    uint64_t n = TSR__ST_MAX_HEADER + 1;
    io_st_raw(path, n, "{", NULL, 0);
    cr_assert_eq(truncate(path, (off_t)(n + 8)), 0);
    expect_open_fails(path, TSR_EINVAL, "limit");
    io_rmtree(dir);
}

Test(safetensors, file_truncated_after_open)
{
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "t.safetensors");
    const float v[2] = {1, 2};
    io_st_file(path, "{" T1 "}", v, 8);
    tsr__st_reader_t *r;
    ST_OPEN_OK(r, path);
    size_t n = 0;
    free(io_read(path, &n));
    cr_assert_eq(truncate(path, (off_t)(n - 4)), 0);
    float out[2];
    cr_assert_eq(tsr__st_read_f32(r, tsr__st_find(r, "t"), out, 2), TSR_EIO);
    cr_assert_not_null(strstr(tsr_error_message(), "end of file"), "%s", tsr_error_message());
    tsr__st_close(r);
    io_rmtree(dir);
}

/* ---- atomic writes ------------------------------------------------------ */

static int write_one(const char *path, float value)
{
    tsr__st_writer_t *w;
    cr_assert_eq(tsr__st_writer_create(&w), TSR_OK);
    float v[2] = {value, value};
    cr_assert_eq(tsr__st_writer_add(w, "t", TSR__ST_F32, 1, (uint64_t[]){2}, v), TSR_OK);
    int rc = tsr__st_writer_write(w, path);
    tsr__st_writer_free(w);
    return rc;
}

static void expect_value(const char *path, float value)
{
    tsr__st_reader_t *r;
    ST_OPEN_OK(r, path);
    float out[2];
    cr_assert_eq(tsr__st_read_f32(r, tsr__st_find(r, "t"), out, 2), TSR_OK);
    cr_assert_eq(out[0], value, "the old file is intact");
    tsr__st_close(r);
}

static int fill_fails(void *ctx, size_t index, void *buf, size_t bytes)
{
    (void)ctx, (void)index;
    memset(buf, 0, bytes);
    return tsr__fail(TSR_ENOMEM, "fill failed on purpose");
}

Test(safetensors, failed_writes_leave_the_old_file)
{
    char dir[256], path[512], tmp[600];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "x.safetensors");
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    cr_assert_eq(write_one(path, 1.0f), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(write_one(path, 2.0f), TSR_OK, "replacing works");
    expect_value(path, 2.0f);

    /* the temporary cannot be created: a folder sits at its name */
    cr_assert_eq(mkdir(tmp, 0700), 0);
    cr_assert_eq(write_one(path, 3.0f), TSR_EIO);
    cr_assert_not_null(strstr(tsr_error_message(), "cannot create"), "%s", tsr_error_message());
    expect_value(path, 2.0f);
    cr_assert_eq(rmdir(tmp), 0);

    /* a tensor's data cannot be produced midway */
    tsr__st_writer_t *w;
    cr_assert_eq(tsr__st_writer_create(&w), TSR_OK);
    float v[2] = {9, 9};
    cr_assert_eq(tsr__st_writer_add(w, "t", TSR__ST_F32, 1, (uint64_t[]){2}, v), TSR_OK);
    cr_assert_eq(tsr__st_writer_add_fill(w, "u", TSR__ST_F32, 1, (uint64_t[]){2}, fill_fails,
                                         NULL), TSR_OK);
    cr_assert_eq(tsr__st_writer_write(w, path), TSR_ENOMEM);
    cr_assert_str_eq(tsr_error_message(), "fill failed on purpose");
    tsr__st_writer_free(w);
    expect_value(path, 2.0f);
    cr_assert_not(io_exists(tmp), "temporary removed");

    /* the rename cannot replace a folder */
    char sub[600];
    io_join(sub, sizeof sub, dir, "adir");
    cr_assert_eq(mkdir(sub, 0700), 0);
    cr_assert_eq(write_one(sub, 1.0f), TSR_EIO);
    char subtmp[700];
    snprintf(subtmp, sizeof subtmp, "%s.tmp.%ld", sub, (long)getpid());
    cr_assert_not(io_exists(subtmp), "temporary removed after a failed rename");

    /* the folder does not exist */
    io_join(sub, sizeof sub, dir, "nowhere/x.safetensors");
    cr_assert_eq(write_one(sub, 1.0f), TSR_EIO);
    io_rmtree(dir);
}

Test(safetensors, unwritable_folder)
{
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "x.safetensors");
    cr_assert_eq(write_one(path, 1.0f), TSR_OK);
    cr_assert_eq(chmod(dir, 0500), 0);
    /* root ignores folder permissions: probe whether the folder really is read-only */
    char probe[600];
    io_join(probe, sizeof probe, dir, "probe");
    int fd = open(probe, O_WRONLY | O_CREAT, 0600);
    if (fd >= 0) {
        close(fd);
        unlink(probe);
        io_rmtree(dir);
        cr_skip_test("running as root: a read-only folder is still writable (the blocked-"
                     "temporary case of failed_writes_leave_the_old_file covers this path)");
    }
    cr_assert_eq(write_one(path, 2.0f), TSR_EIO);
    expect_value(path, 1.0f);
    io_rmtree(dir);
}
