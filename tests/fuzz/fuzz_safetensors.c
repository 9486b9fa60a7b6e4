/* tests/fuzz/fuzz_safetensors.c — the safetensors reader on arbitrary files.
 *
 * Input: the whole file (8-byte header length, JSON header, data area),
 * opened through an in-memory file. An accepted file is checked against the
 * input itself: every tensor found by name, sorted, inside the data area,
 * its byte count matching dtype and shape, no two overlapping; then each
 * tensor is read (as float32 or int32, as its dtype allows) and compared
 * with the input's bytes converted here independently. Finally the library's
 * writer writes it again (a file in /dev/shm) and the reader must get the
 * same tensors, bytes and metadata back.
 */
#include <math.h>

#include "fuzz_util.h"
#include "runtime/json.h"
#include "nn/io/safetensors.h"

static fuzz_file_t file;
static char rewrite_path[256]; /* where check_rewrite writes */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_file_init(&file, "fuzz.safetensors");
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(rewrite_path, sizeof rewrite_path, "%s/tsr-fuzz-%ld.safetensors", dir,
             (long)getpid());
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

/* The accepted file written again by the library's writer (tensors in name
 * order, metadata without NUL-holding strings) must read back as the same
 * tensors with the same bytes and the same metadata: the writer's escaping of
 * names against its own reader. */
static void check_rewrite(tsr__st_reader_t *r, const uint8_t *area, const uint8_t *hdr,
                          size_t nhdr)
{
    size_t count = tsr__st_count(r);
    /* the reader takes a tensor named "" (the format allows it), the writer
     * refuses to make one */
    if (count && tsr__st_at(r, 0)->name[0] == 0)
        return;
    tsr__st_writer_t *w;
    FUZZ_CHECK(tsr__st_writer_create(&w) == TSR_OK, "writer");
    for (size_t i = 0; i < count; i++) {
        const tsr__st_tensor_t *t = tsr__st_at(r, i);
        int rc = tsr__st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, area + t->begin);
        FUZZ_CHECK(rc == TSR_OK, "add %s: %s", t->name, tsr_error_message());
    }
    tsr__json_doc_t *doc;
    FUZZ_CHECK(tsr__json_parse((const char *)hdr, nhdr, "fuzz", &doc) == TSR_OK, "header");
    const tsr__json_t *meta = tsr__json_get(tsr__json_root(doc), "__metadata__");
    for (size_t i = 0; meta && i < meta->len; i++) {
        const tsr__json_t *m = &meta->items[i];
        if (strlen(m->key) == m->key_len && strlen(m->str) == m->len)
            FUZZ_CHECK(tsr__st_writer_meta(w, m->key, m->str) == TSR_OK, "meta");
    }
    int rc = tsr__st_writer_write(w, rewrite_path);
    FUZZ_CHECK(rc == TSR_OK, "write: %s", tsr_error_message());
    tsr__st_writer_free(w);

    tsr__st_reader_t *back;
    rc = tsr__st_open(&back, rewrite_path);
    FUZZ_CHECK(rc == TSR_OK, "the rewritten file does not open: %s", tsr_error_message());
    FILE *f = fopen(rewrite_path, "rb");
    FUZZ_CHECK(f, "reopen");
    uint8_t le[8];
    FUZZ_CHECK(fread(le, 1, 8, f) == 8, "read");
    uint64_t hlen = le64(le);
    FUZZ_CHECK(fseek(f, (long)(8 + hlen), SEEK_SET) == 0, "seek");
    FUZZ_CHECK(tsr__st_count(back) == count, "%zu tensors back, %zu written",
               tsr__st_count(back), count);
    for (size_t i = 0; i < count; i++) {
        const tsr__st_tensor_t *a = tsr__st_at(r, i), *b = tsr__st_at(back, i);
        FUZZ_CHECK(strcmp(a->name, b->name) == 0 && a->dtype == b->dtype &&
                       a->ndim == b->ndim &&
                       memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape) == 0,
                   "tensor %s came back as %s", a->name, b->name);
        size_t n = (size_t)(b->end - b->begin);
        uint8_t *bytes = malloc(n + 1);
        FUZZ_CHECK(bytes, "out of memory");
        FUZZ_CHECK(fseek(f, (long)(8 + hlen + b->begin), SEEK_SET) == 0 &&
                       fread(bytes, 1, n, f) == n,
                   "read %s", b->name);
        FUZZ_CHECK(memcmp(bytes, area + a->begin, n) == 0, "data of %s changed", a->name);
        free(bytes);
    }
    for (size_t i = 0; meta && i < meta->len; i++) {
        const tsr__json_t *m = &meta->items[i];
        if (strlen(m->key) != m->key_len || strlen(m->str) != m->len)
            continue;
        const char *v = tsr__st_metadata(back, m->key);
        FUZZ_CHECK(v && strcmp(v, m->str) == 0, "metadata \"%s\" came back changed", m->key);
    }
    fclose(f);
    tsr__json_free(doc);
    tsr__st_close(back);
    unlink(rewrite_path);
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
    check_rewrite(r, area, data + 8, (size_t)hlen);
    tsr__st_close(r);
    return 0;
}
