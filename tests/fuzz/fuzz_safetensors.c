/* tests/fuzz/fuzz_safetensors.c — the safetensors reader on arbitrary files.
 *
 * Input: the whole file (8-byte header length, JSON header, data area),
 * opened through an in-memory file. An accepted file is checked against the
 * input itself: every tensor found by name, sorted, inside the data area,
 * its byte count matching dtype and shape, no two overlapping; then each
 * tensor is read (as float32 or int32, as its dtype allows) and compared
 * with the input's bytes converted here independently.
 */
#include <math.h>

#include "fuzz_util.h"
#include "nn/io/json.h"
#include "nn/io/safetensors.h"

static fuzz_file_t file;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_file_init(&file, "fuzz.safetensors");
    return 0;
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* IEEE half by its definition (not by bit surgery as the reader does). */
static float ref_f16(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
    double v;
    if (exp == 0)
        v = ldexp(man, -24);
    else if (exp == 31)
        v = man ? NAN : INFINITY;
    else
        v = ldexp(1024 + man, exp - 25);
    return (float)(sign ? -v : v);
}

static int same_float(float a, float b)
{
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

/* Independent widening of element i of an integer dtype; 0 when it does not
 * fit int32. */
static int ref_int(tsr__st_dtype_t dt, const uint8_t *p, size_t i, int32_t *out)
{
    int64_t v;
    uint64_t u = 0;
    size_t es = tsr__st_dtype_size(dt);
    for (size_t k = 0; k < es; k++)
        u |= (uint64_t)p[i * es + k] << (8 * k);
    switch (dt) {
    case TSR__ST_BOOL: case TSR__ST_U8: case TSR__ST_U16: case TSR__ST_U32:
        v = (int64_t)u; break;
    case TSR__ST_I8: v = (int8_t)u; break;
    case TSR__ST_I16: v = (int16_t)u; break;
    case TSR__ST_I32: v = (int32_t)u; break;
    case TSR__ST_I64: v = (int64_t)u; break;
    case TSR__ST_U64:
        if (u > INT32_MAX)
            return 0;
        v = (int64_t)u;
        break;
    default: return 0;
    }
    if (v < INT32_MIN || v > INT32_MAX)
        return 0;
    *out = (int32_t)v;
    return 1;
}

static void check_data(tsr__st_reader_t *r, const tsr__st_tensor_t *t, const uint8_t *area)
{
    const uint8_t *p = area + t->begin;
    size_t n = (size_t)t->numel;
    void *buf = malloc((n + 1) * 4);
    FUZZ_CHECK(buf, "out of memory");
    float *f = buf;
    int32_t *x = buf;
    int is_float = t->dtype == TSR__ST_F32 || t->dtype == TSR__ST_F16 ||
                   t->dtype == TSR__ST_BF16 || t->dtype == TSR__ST_F64;
    int is_int = !is_float && t->dtype != TSR__ST_F8_E4M3 && t->dtype != TSR__ST_F8_E5M2;

    fuzz_clear_error();
    int rc = tsr__st_read_f32(r, t, f, n + 1);
    FUZZ_CHECK(rc == TSR_EINVAL, "read_f32 of %zu elements from %zu: %d", n + 1, n, rc);
    rc = tsr__st_read_f32(r, t, f, n);
    FUZZ_CHECK((rc == TSR_OK) == is_float, "read_f32 of %s: %d (%s)",
               tsr__st_dtype_name(t->dtype), rc, tsr_error_message());
    for (size_t i = 0; rc == TSR_OK && i < n; i++) {
        float want;
        uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
        uint32_t b = (uint32_t)h << 16;
        double d;
        switch (t->dtype) {
        case TSR__ST_F32: memcpy(&want, p + 4 * i, 4); break;
        case TSR__ST_F16: want = ref_f16(h); break;
        case TSR__ST_BF16: memcpy(&want, &b, 4); break;
        default: memcpy(&d, p + 8 * i, 8); want = (float)d; break;
        }
        FUZZ_CHECK(same_float(f[i], want), "%s element %zu: %a, want %a",
                   tsr__st_dtype_name(t->dtype), i, (double)f[i], (double)want);
    }

    int fits = 1;
    for (size_t i = 0; is_int && i < n; i++) {
        int32_t v;
        fits &= ref_int(t->dtype, p, i, &v);
    }
    rc = tsr__st_read_i32(r, t, x, n);
    FUZZ_CHECK((rc == TSR_OK) == (is_int && fits), "read_i32 of %s: %d (%s)",
               tsr__st_dtype_name(t->dtype), rc, tsr_error_message());
    if (rc != TSR_OK)
        FUZZ_CHECK_REFUSAL(rc);
    for (size_t i = 0; rc == TSR_OK && i < n; i++) {
        int32_t want = 0;
        ref_int(t->dtype, p, i, &want);
        FUZZ_CHECK(x[i] == want, "element %zu: %d, want %d", i, (int)x[i], (int)want);
    }
    free(buf);
}

/* __metadata__ as the reader reports it, against the header parsed here. */
static void check_metadata(tsr__st_reader_t *r, const uint8_t *hdr, size_t n)
{
    tsr__json_doc_t *doc;
    FUZZ_CHECK(tsr__json_parse((const char *)hdr, n, "fuzz", &doc) == TSR_OK,
               "an accepted header does not parse");
    const tsr__json_t *meta = tsr__json_get(tsr__json_root(doc), "__metadata__");
    for (size_t i = 0; meta && i < meta->len; i++) {
        const tsr__json_t *m = &meta->items[i];
        if (strlen(m->key) != m->key_len)
            continue;
        const char *v = tsr__st_metadata(r, m->key);
        FUZZ_CHECK(v && strcmp(v, m->str) == 0, "metadata \"%s\"", m->key);
    }
    FUZZ_CHECK(meta || !tsr__st_metadata(r, "format"), "metadata without __metadata__");
    tsr__json_free(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_file_set(&file, data, size);
    tsr__st_reader_t *r = (tsr__st_reader_t *)1;
    fuzz_clear_error();
    int rc = tsr__st_open(&r, file.path);
    if (rc != TSR_OK) {
        FUZZ_CHECK_REFUSAL(rc);
        FUZZ_CHECK(r == NULL, "a failed open left a reader");
        return 0;
    }
    FUZZ_CHECK(size >= 8 && le64(data) <= size - 8, "accepted a header longer than the file");
    uint64_t hlen = le64(data), area_size = size - 8 - hlen;
    const uint8_t *area = data + 8 + hlen;
    size_t count = tsr__st_count(r);
    for (size_t i = 0; i < count; i++) {
        const tsr__st_tensor_t *t = tsr__st_at(r, i);
        FUZZ_CHECK(t && tsr__st_find(r, t->name) == t, "tensor %zu not found by name", i);
        FUZZ_CHECK(i == 0 || strcmp(tsr__st_at(r, i - 1)->name, t->name) < 0, "not sorted");
        FUZZ_CHECK(t->ndim >= 0 && t->ndim <= TSR__ST_MAX_DIMS, "ndim %d", t->ndim);
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++)
            numel *= t->shape[d]; /* no overflow: the reader refuses it */
        FUZZ_CHECK(numel == t->numel, "numel %llu, shape says %llu",
                   (unsigned long long)t->numel, (unsigned long long)numel);
        FUZZ_CHECK(t->begin <= t->end && t->end <= area_size, "[%llu, %llu) outside %llu",
                   (unsigned long long)t->begin, (unsigned long long)t->end,
                   (unsigned long long)area_size);
        FUZZ_CHECK(t->end - t->begin == numel * tsr__st_dtype_size(t->dtype), "byte count");
        for (size_t j = 0; j < i && j < 64; j++) {
            const tsr__st_tensor_t *u = tsr__st_at(r, j);
            int empty = t->begin == t->end || u->begin == u->end;
            FUZZ_CHECK(empty || t->end <= u->begin || u->end <= t->begin, "%s and %s overlap",
                       t->name, u->name);
        }
        check_data(r, t, area);
    }
    FUZZ_CHECK(tsr__st_at(r, count) == NULL, "an entry past the count");
    FUZZ_CHECK(tsr__st_find(r, "") == NULL || count, "found a tensor in an empty file");
    check_metadata(r, data + 8, (size_t)hlen);
    tsr__st_close(r);
    return 0;
}
