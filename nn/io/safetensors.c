/* nn/io/safetensors.c — safetensors reader and writer, atomic files. */
#include "nn/io/safetensors.h"
#include "nn/io/strbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/json.h"
#include "runtime/error.h"
#include "runtime/file.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "safetensors data is little-endian and read without swapping");

static const char *errstr(int e, char *buf, size_t n)
{
    return strerror_r(e, buf, n);
}

/* ---- atomic files ------------------------------------------------------- */

static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static void afile_release(tsr__afile_t *af)
{
    free(af->path), free(af->tmp);
    af->path = af->tmp = NULL;
    af->fd = -1;
}

int tsr__afile_open(tsr__afile_t *af, const char *path, const char *what)
{
    char eb[128];
    af->fd = -1;
    af->what = what;
    af->path = strdup(path);
    size_t n = strlen(path) + 32;
    af->tmp = malloc(n);
    if (!af->path || !af->tmp) {
        afile_release(af);
        return tsr__fail(TSR_ENOMEM, "%s %s: out of memory", what, path);
    }
    snprintf(af->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    af->fd = open(af->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (af->fd < 0) {
        int e = errno;
        int rc = tsr__fail(TSR_EIO, "%s %s: cannot create %s: %s", what, path, af->tmp,
                           errstr(e, eb, sizeof eb));
        afile_release(af);
        return rc;
    }
    return TSR_OK;
}

int tsr__afile_write(tsr__afile_t *af, const void *data, size_t n)
{
    const char *p = data;
    while (n) {
        ssize_t w = write(af->fd, p, n > ((size_t)1 << 30) ? (size_t)1 << 30 : n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            char eb[128];
            int rc = tsr__fail(TSR_EIO, "%s %s: cannot write %s: %s", af->what, af->path,
                               af->tmp, w < 0 ? errstr(errno, eb, sizeof eb) : "no progress");
            tsr__afile_abort(af);
            return rc;
        }
        p += w, n -= (size_t)w;
    }
    return TSR_OK;
}

/* The rename is durable only once the folder's entry is synced; a folder
 * that cannot be synced (some file systems) still holds a complete file. */
static void sync_dir(const char *path)
{
    char *dir = dir_of(path);
    if (!dir)
        return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

int tsr__afile_commit(tsr__afile_t *af)
{
    char eb[128];
    const char *step = NULL;
    if (fsync(af->fd) != 0)
        step = "sync";
    else {
        /* the descriptor is gone even when close fails: never close it twice */
        int closed = close(af->fd);
        af->fd = -1;
        if (closed != 0)
            step = "close";
        else if (rename(af->tmp, af->path) != 0)
            step = "rename";
    }
    if (step) {
        int rc = tsr__fail(TSR_EIO, "%s %s: cannot %s %s: %s", af->what, af->path, step, af->tmp,
                           errstr(errno, eb, sizeof eb));
        tsr__afile_abort(af);
        return rc;
    }
    sync_dir(af->path);
    afile_release(af);
    return TSR_OK;
}

void tsr__afile_abort(tsr__afile_t *af)
{
    if (af->fd >= 0)
        close(af->fd);
    if (af->tmp)
        unlink(af->tmp);
    afile_release(af);
}

/* ---- dtypes ------------------------------------------------------------- */

static const struct {
    const char *name;
    size_t size;
} dtypes[TSR__ST_NDTYPES] = {
    [TSR__ST_BOOL] = {"BOOL", 1},       [TSR__ST_U8] = {"U8", 1},
    [TSR__ST_I8] = {"I8", 1},           [TSR__ST_F8_E5M2] = {"F8_E5M2", 1},
    [TSR__ST_F8_E4M3] = {"F8_E4M3", 1}, [TSR__ST_I16] = {"I16", 2},
    [TSR__ST_U16] = {"U16", 2},         [TSR__ST_F16] = {"F16", 2},
    [TSR__ST_BF16] = {"BF16", 2},       [TSR__ST_I32] = {"I32", 4},
    [TSR__ST_U32] = {"U32", 4},         [TSR__ST_F32] = {"F32", 4},
    [TSR__ST_I64] = {"I64", 8},         [TSR__ST_U64] = {"U64", 8},
    [TSR__ST_F64] = {"F64", 8},
};

const char *tsr__st_dtype_name(tsr__st_dtype_t d)
{
    return (unsigned)d < TSR__ST_NDTYPES ? dtypes[d].name : "?";
}

size_t tsr__st_dtype_size(tsr__st_dtype_t d)
{
    return (unsigned)d < TSR__ST_NDTYPES ? dtypes[d].size : 0;
}

int tsr__st_dtype_parse(const char *name)
{
    for (int d = 0; d < TSR__ST_NDTYPES; d++)
        if (strcmp(dtypes[d].name, name) == 0)
            return d;
    return -1;
}

float tsr__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t bits;
    float f;
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24, exact in float */
        f = (float)man * 0x1p-24f;
        return sign ? -f : f;
    }
    if (exp == 31)
        bits = sign | 0x7f800000u | man << 13;
    else
        bits = sign | (exp + 112) << 23 | man << 13;
    memcpy(&f, &bits, 4);
    return f;
}

float tsr__bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* ---- reader ------------------------------------------------------------- */

struct tsr__st_reader {
    char *path;
    int fd;
    uint64_t data_start, data_size;
    tsr__json_doc_t *doc; /* owns names and metadata strings */
    const tsr__json_t *meta;
    tsr__st_tensor_t *tensors;
    size_t count;
};

static int pread_full(int fd, void *buf, size_t n, uint64_t off, const char *path)
{
    char *p = buf, eb[128];
    while (n) {
        ssize_t got = pread(fd, p, n > ((size_t)1 << 30) ? (size_t)1 << 30 : n, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return tsr__fail(TSR_EIO, "safetensors %s: read failed: %s", path,
                             errstr(errno, eb, sizeof eb));
        if (got == 0)
            return tsr__fail(TSR_EIO, "safetensors %s: unexpected end of file at byte %" PRIu64,
                             path, off);
        p += got, n -= (size_t)got, off += (uint64_t)got;
    }
    return TSR_OK;
}

static int bad(const tsr__st_reader_t *r, const char *name, const char *msg)
{
    return tsr__fail(TSR_EINVAL, "safetensors %s: tensor %.200s: %s", r->path, name, msg);
}

static int parse_shape(tsr__st_reader_t *r, const char *name, const tsr__json_t *v,
                       tsr__st_tensor_t *t)
{
    if (!v || v->type != TSR__JSON_ARRAY)
        return bad(r, name, "\"shape\" missing or not an array");
    if (v->len > TSR__ST_MAX_DIMS)
        return bad(r, name, "too many dimensions");
    t->ndim = (int)v->len;
    t->numel = 1;
    for (size_t i = 0; i < v->len; i++) {
        if (tsr__json_u64(&v->items[i], &t->shape[i]) != 0)
            return bad(r, name, "\"shape\" must hold non-negative integers");
        if (t->shape[i] && t->numel > UINT64_MAX / t->shape[i])
            return bad(r, name, "element count overflows");
        t->numel *= t->shape[i];
    }
    return TSR_OK;
}

static int parse_offsets(tsr__st_reader_t *r, const char *name, const tsr__json_t *v,
                         tsr__st_tensor_t *t)
{
    if (!v || v->type != TSR__JSON_ARRAY || v->len != 2 ||
        tsr__json_u64(&v->items[0], &t->begin) != 0 || tsr__json_u64(&v->items[1], &t->end) != 0)
        return bad(r, name, "\"data_offsets\" must be [begin, end] (non-negative integers)");
    if (t->begin > t->end)
        return bad(r, name, "data_offsets begin after their end");
    if (t->end > r->data_size)
        return tsr__fail(TSR_EINVAL,
                         "safetensors %s: tensor %.200s: data_offsets [%" PRIu64 ", %" PRIu64
                         "] beyond the data area of %" PRIu64 " bytes",
                         r->path, name, t->begin, t->end, r->data_size);
    size_t es = tsr__st_dtype_size(t->dtype);
    if (t->numel > UINT64_MAX / es || t->end - t->begin != t->numel * es)
        return tsr__fail(TSR_EINVAL,
                         "safetensors %s: tensor %.200s: %" PRIu64 " bytes of data for %" PRIu64
                         " elements of %s",
                         r->path, name, t->end - t->begin, t->numel,
                         tsr__st_dtype_name(t->dtype));
    return TSR_OK;
}

static int parse_tensor(tsr__st_reader_t *r, const tsr__json_t *m, tsr__st_tensor_t *t)
{
    const char *name = m->key;
    if (strlen(name) != m->key_len)
        return tsr__fail(TSR_EINVAL, "safetensors %s: a tensor name holds a NUL", r->path);
    if (m->type != TSR__JSON_OBJECT)
        return bad(r, name, "entry is not an object");
    t->name = name;
    const tsr__json_t *dt = tsr__json_get(m, "dtype");
    if (!dt || dt->type != TSR__JSON_STRING)
        return bad(r, name, "\"dtype\" missing or not a string");
    int d = tsr__st_dtype_parse(dt->str);
    if (d < 0)
        return tsr__fail(TSR_EINVAL, "safetensors %s: tensor %.200s: unknown dtype \"%.40s\"",
                         r->path, name, dt->str);
    t->dtype = (tsr__st_dtype_t)d;
    int rc = parse_shape(r, name, tsr__json_get(m, "shape"), t);
    return rc ? rc : parse_offsets(r, name, tsr__json_get(m, "data_offsets"), t);
}

static int parse_metadata(tsr__st_reader_t *r, const tsr__json_t *m)
{
    if (m->type != TSR__JSON_OBJECT)
        return tsr__fail(TSR_EINVAL, "safetensors %s: __metadata__ is a %s, not an object",
                         r->path, tsr__json_type_name(m->type));
    for (size_t i = 0; i < m->len; i++)
        if (m->items[i].type != TSR__JSON_STRING)
            return tsr__fail(TSR_EINVAL,
                             "safetensors %s: __metadata__ value of \"%.200s\" is a %s, not a "
                             "string", r->path, m->items[i].key,
                             tsr__json_type_name(m->items[i].type));
    r->meta = m;
    return TSR_OK;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const tsr__st_tensor_t *)a)->name, ((const tsr__st_tensor_t *)b)->name);
}

static int by_offset(const void *a, const void *b)
{
    const tsr__st_tensor_t *x = *(const tsr__st_tensor_t *const *)a;
    const tsr__st_tensor_t *y = *(const tsr__st_tensor_t *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* Empty tensors own no bytes, so only non-empty ones can overlap. */
static int check_overlaps(tsr__st_reader_t *r)
{
    const tsr__st_tensor_t **idx = malloc((r->count + 1) * sizeof *idx);
    if (!idx)
        return tsr__fail(TSR_ENOMEM, "safetensors %s: out of memory", r->path);
    size_t n = 0;
    for (size_t i = 0; i < r->count; i++)
        if (r->tensors[i].end > r->tensors[i].begin)
            idx[n++] = &r->tensors[i];
    qsort(idx, n, sizeof *idx, by_offset);
    int rc = TSR_OK;
    for (size_t i = 1; i < n && rc == TSR_OK; i++)
        if (idx[i]->begin < idx[i - 1]->end)
            rc = tsr__fail(TSR_EINVAL, "safetensors %s: tensors %.200s and %.200s overlap",
                           r->path, idx[i - 1]->name, idx[i]->name);
    free(idx);
    return rc;
}

static int parse_header(tsr__st_reader_t *r)
{
    const tsr__json_t *root = tsr__json_root(r->doc);
    if (root->type != TSR__JSON_OBJECT)
        return tsr__fail(TSR_EINVAL, "safetensors %s: header is a %s, not an object", r->path,
                         tsr__json_type_name(root->type));
    r->tensors = calloc(root->len + 1, sizeof *r->tensors);
    if (!r->tensors)
        return tsr__fail(TSR_ENOMEM, "safetensors %s: out of memory", r->path);
    for (size_t i = 0; i < root->len; i++) {
        const tsr__json_t *m = &root->items[i];
        /* by length too: "__metadata__\u0000…" is a (refused) tensor name, not a
         * second metadata object that would replace the first */
        int is_meta = m->key_len == 12 && memcmp(m->key, "__metadata__", 12) == 0;
        int rc = is_meta ? parse_metadata(r, m) : parse_tensor(r, m, &r->tensors[r->count++]);
        if (rc != TSR_OK)
            return rc;
    }
    qsort(r->tensors, r->count, sizeof *r->tensors, by_name);
    return check_overlaps(r);
}

static int read_header(tsr__st_reader_t *r)
{
    char eb[128];
    struct stat st;
    if (fstat(r->fd, &st) != 0)
        return tsr__fail(TSR_EIO, "safetensors %s: cannot stat: %s", r->path,
                         errstr(errno, eb, sizeof eb));
    if (!S_ISREG(st.st_mode))
        return tsr__fail(TSR_EIO, "safetensors %s: not a regular file", r->path);
    uint64_t size = (uint64_t)st.st_size, n;
    if (size < 8)
        return tsr__fail(TSR_EINVAL, "safetensors %s: file of %" PRIu64
                         " bytes is too short for the header length", r->path, size);
    unsigned char le[8];
    int rc = pread_full(r->fd, le, 8, 0, r->path);
    if (rc != TSR_OK)
        return rc;
    n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | le[i];
    if (n > size - 8)
        return tsr__fail(TSR_EINVAL, "safetensors %s: header length %" PRIu64
                         " exceeds file size %" PRIu64, r->path, n, size);
    if (n > TSR__ST_MAX_HEADER)
        return tsr__fail(TSR_EINVAL, "safetensors %s: header length %" PRIu64
                         " exceeds the limit of %llu", r->path, n, TSR__ST_MAX_HEADER);
    r->data_start = 8 + n, r->data_size = size - 8 - n;
    char *hdr = malloc(n + 1), *what = malloc(strlen(r->path) + 16);
    if (!hdr || !what) {
        free(hdr), free(what);
        return tsr__fail(TSR_ENOMEM, "safetensors %s: out of memory for the header", r->path);
    }
    sprintf(what, "safetensors %s", r->path);
    rc = pread_full(r->fd, hdr, n, 8, r->path);
    if (rc == TSR_OK)
        rc = tsr__json_parse(hdr, n, what, &r->doc);
    free(hdr), free(what);
    return rc;
}

int tsr__st_open(tsr__st_reader_t **out, const char *path)
{
    char eb[128];
    *out = NULL;
    tsr__st_reader_t *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        free(r);
        return tsr__fail(TSR_ENOMEM, "safetensors %s: out of memory", path);
    }
    r->fd = tsr__open_regular(path, eb, sizeof eb);
    if (r->fd < 0) {
        int rc = tsr__fail(TSR_EIO, "safetensors %s: cannot open: %s", path, eb);
        tsr__st_close(r);
        return rc;
    }
    int rc = read_header(r);
    if (rc == TSR_OK)
        rc = parse_header(r);
    if (rc != TSR_OK) {
        tsr__st_close(r);
        return rc;
    }
    *out = r;
    return TSR_OK;
}

void tsr__st_close(tsr__st_reader_t *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    tsr__json_free(r->doc);
    free(r->tensors);
    free(r->path);
    free(r);
}

const char *tsr__st_path(const tsr__st_reader_t *r)
{
    return r->path;
}

size_t tsr__st_count(const tsr__st_reader_t *r)
{
    return r->count;
}

const tsr__st_tensor_t *tsr__st_at(const tsr__st_reader_t *r, size_t i)
{
    return i < r->count ? &r->tensors[i] : NULL;
}

const tsr__st_tensor_t *tsr__st_find(const tsr__st_reader_t *r, const char *name)
{
    tsr__st_tensor_t key = {.name = name};
    return bsearch(&key, r->tensors, r->count, sizeof key, by_name);
}

const char *tsr__st_metadata(const tsr__st_reader_t *r, const char *key)
{
    const tsr__json_t *v = tsr__json_get(r->meta, key);
    return v ? v->str : NULL;
}

/* ---- conversions -------------------------------------------------------- */

enum { STAGE_BYTES = 1 << 20 };

typedef int (*convert_fn)(const unsigned char *src, size_t n, void *dst, size_t first);

static int conv_f16(const unsigned char *s, size_t n, void *dst, size_t first)
{
    float *o = (float *)dst + first;
    for (size_t i = 0; i < n; i++)
        o[i] = tsr__f16_to_f32((uint16_t)(s[2 * i] | s[2 * i + 1] << 8));
    return 0;
}

static int conv_bf16(const unsigned char *s, size_t n, void *dst, size_t first)
{
    float *o = (float *)dst + first;
    for (size_t i = 0; i < n; i++)
        o[i] = tsr__bf16_to_f32((uint16_t)(s[2 * i] | s[2 * i + 1] << 8));
    return 0;
}

static int conv_f64(const unsigned char *s, size_t n, void *dst, size_t first)
{
    float *o = (float *)dst + first;
    for (size_t i = 0; i < n; i++) {
        double d;
        memcpy(&d, s + 8 * i, 8);
        o[i] = (float)d;
    }
    return 0;
}

/* Integers widen to int64 first; -1 when one does not fit int32. */
static int conv_int(tsr__st_dtype_t dt, const unsigned char *s, size_t n, int32_t *o)
{
    for (size_t i = 0; i < n; i++) {
        int64_t v;
        switch (dt) {
        case TSR__ST_BOOL:
        case TSR__ST_U8: v = s[i]; break;
        case TSR__ST_I8: v = (int8_t)s[i]; break;
        case TSR__ST_I16: { int16_t x; memcpy(&x, s + 2 * i, 2); v = x; } break;
        case TSR__ST_U16: { uint16_t x; memcpy(&x, s + 2 * i, 2); v = x; } break;
        case TSR__ST_I32: { int32_t x; memcpy(&x, s + 4 * i, 4); v = x; } break;
        case TSR__ST_U32: { uint32_t x; memcpy(&x, s + 4 * i, 4); v = x; } break;
        case TSR__ST_I64: memcpy(&v, s + 8 * i, 8); break;
        default: {
            uint64_t x;
            memcpy(&x, s + 8 * i, 8);
            v = x > INT32_MAX ? (int64_t)INT32_MAX + 1 : (int64_t)x;
        }
        }
        if (v < INT32_MIN || v > INT32_MAX)
            return -1;
        o[i] = (int32_t)v;
    }
    return 0;
}

#define INT_CONV(NAME, DT)                                                          \
    static int NAME(const unsigned char *s, size_t n, void *dst, size_t first)      \
    {                                                                               \
        return conv_int(DT, s, n, (int32_t *)dst + first);                          \
    }
INT_CONV(conv_bool, TSR__ST_BOOL)
INT_CONV(conv_u8, TSR__ST_U8)
INT_CONV(conv_i8, TSR__ST_I8)
INT_CONV(conv_i16, TSR__ST_I16)
INT_CONV(conv_u16, TSR__ST_U16)
INT_CONV(conv_i32, TSR__ST_I32)
INT_CONV(conv_u32, TSR__ST_U32)
INT_CONV(conv_i64, TSR__ST_I64)
INT_CONV(conv_u64, TSR__ST_U64)

/* Reads t's data through a staging buffer and converts it chunk by chunk. */
static int read_converted(tsr__st_reader_t *r, const tsr__st_tensor_t *t, void *out,
                          convert_fn conv)
{
    size_t es = tsr__st_dtype_size(t->dtype), per = STAGE_BYTES / es;
    unsigned char *stage = malloc(STAGE_BYTES);
    if (!stage)
        return tsr__fail(TSR_ENOMEM, "safetensors %s: out of memory", r->path);
    int rc = TSR_OK;
    for (uint64_t i = 0; i < t->numel && rc == TSR_OK; i += per) {
        size_t n = t->numel - i < per ? (size_t)(t->numel - i) : per;
        rc = pread_full(r->fd, stage, n * es, r->data_start + t->begin + i * es, r->path);
        if (rc == TSR_OK && conv(stage, n, out, (size_t)i) != 0)
            rc = bad(r, t->name, "an integer does not fit int32");
    }
    free(stage);
    return rc;
}

static int check_numel(const tsr__st_reader_t *r, const tsr__st_tensor_t *t, size_t numel)
{
    if (t->numel != numel)
        return tsr__fail(TSR_EINVAL,
                         "safetensors %s: tensor %.200s has %" PRIu64 " elements, %zu requested",
                         r->path, t->name, t->numel, numel);
    return TSR_OK;
}

int tsr__st_read_f32(tsr__st_reader_t *r, const tsr__st_tensor_t *t, float *out, size_t numel)
{
    int rc = check_numel(r, t, numel);
    if (rc != TSR_OK)
        return rc;
    switch (t->dtype) {
    case TSR__ST_F32:
        return pread_full(r->fd, out, numel * 4, r->data_start + t->begin, r->path);
    case TSR__ST_F16: return read_converted(r, t, out, conv_f16);
    case TSR__ST_BF16: return read_converted(r, t, out, conv_bf16);
    case TSR__ST_F64: return read_converted(r, t, out, conv_f64);
    default:
        return tsr__fail(TSR_EINVAL, "safetensors %s: tensor %.200s has dtype %s, not F32/F16/"
                         "BF16/F64", r->path, t->name, tsr__st_dtype_name(t->dtype));
    }
}

int tsr__st_read_i32(tsr__st_reader_t *r, const tsr__st_tensor_t *t, int32_t *out,
                     size_t numel)
{
    static const convert_fn conv[TSR__ST_NDTYPES] = {
        [TSR__ST_BOOL] = conv_bool, [TSR__ST_U8] = conv_u8,   [TSR__ST_I8] = conv_i8,
        [TSR__ST_I16] = conv_i16,   [TSR__ST_U16] = conv_u16, [TSR__ST_I32] = conv_i32,
        [TSR__ST_U32] = conv_u32,   [TSR__ST_I64] = conv_i64, [TSR__ST_U64] = conv_u64,
    };
    int rc = check_numel(r, t, numel);
    if (rc != TSR_OK)
        return rc;
    if (t->dtype == TSR__ST_I32)
        return pread_full(r->fd, out, numel * 4, r->data_start + t->begin, r->path);
    if (!conv[t->dtype])
        return tsr__fail(TSR_EINVAL, "safetensors %s: tensor %.200s has dtype %s, not an "
                         "integer type", r->path, t->name, tsr__st_dtype_name(t->dtype));
    return read_converted(r, t, out, conv[t->dtype]);
}

int tsr__st_read_raw(tsr__st_reader_t *r, const tsr__st_tensor_t *t, void *out, size_t bytes)
{
    if (t->end - t->begin != bytes)
        return tsr__fail(TSR_EINVAL,
                         "safetensors %s: tensor %.200s has %" PRIu64 " bytes, %zu requested",
                         r->path, t->name, t->end - t->begin, bytes);
    return pread_full(r->fd, out, bytes, r->data_start + t->begin, r->path);
}

/* ---- writer ------------------------------------------------------------- */

typedef struct {
    char *name;
    tsr__st_dtype_t dtype;
    int ndim;
    uint64_t shape[TSR__ST_MAX_DIMS];
    uint64_t bytes;
    const void *data;
    tsr__st_fill_fn fill;
    void *ctx;
} wentry_t;

struct tsr__st_writer {
    wentry_t *e;
    size_t n, cap;
    char **mkey, **mval;
    size_t nmeta, capmeta;
};

int tsr__st_writer_create(tsr__st_writer_t **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? TSR_OK : tsr__fail(TSR_ENOMEM, "safetensors writer: out of memory");
}

void tsr__st_writer_free(tsr__st_writer_t *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n; i++)
        free(w->e[i].name);
    for (size_t i = 0; i < w->nmeta; i++)
        free(w->mkey[i]), free(w->mval[i]);
    free(w->e), free(w->mkey), free(w->mval), free(w);
}

static int check_entry(const tsr__st_writer_t *w, const char *name, tsr__st_dtype_t dtype,
                       int ndim, const uint64_t *shape, uint64_t *bytes)
{
    if (!name || !*name || strcmp(name, "__metadata__") == 0)
        return tsr__fail(TSR_EINVAL, "safetensors writer: invalid tensor name \"%s\"",
                         name ? name : "(null)");
    if ((unsigned)dtype >= TSR__ST_NDTYPES || ndim < 0 || ndim > TSR__ST_MAX_DIMS ||
        (ndim && !shape))
        return tsr__fail(TSR_EINVAL, "safetensors writer: tensor %s: bad dtype or shape", name);
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->e[i].name, name) == 0)
            return tsr__fail(TSR_EINVAL, "safetensors writer: tensor %s added twice", name);
    uint64_t b = tsr__st_dtype_size(dtype);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] && b > UINT64_MAX / shape[i])
            return tsr__fail(TSR_EINVAL, "safetensors writer: tensor %s is too large", name);
        b *= shape[i];
    }
    *bytes = b;
    return TSR_OK;
}

static int add(tsr__st_writer_t *w, const char *name, tsr__st_dtype_t dtype, int ndim,
               const uint64_t *shape, const void *data, tsr__st_fill_fn fill, void *ctx)
{
    uint64_t bytes = 0;
    int rc = check_entry(w, name, dtype, ndim, shape, &bytes);
    if (rc != TSR_OK)
        return rc;
    if (bytes && !data && !fill)
        return tsr__fail(TSR_EINVAL, "safetensors writer: tensor %s has no data", name);
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        wentry_t *e = realloc(w->e, cap * sizeof *e);
        if (!e)
            return tsr__fail(TSR_ENOMEM, "safetensors writer: out of memory");
        w->e = e, w->cap = cap;
    }
    wentry_t *e = &w->e[w->n];
    *e = (wentry_t){.name = strdup(name), .dtype = dtype, .ndim = ndim, .bytes = bytes,
                    .data = data, .fill = fill, .ctx = ctx};
    if (!e->name)
        return tsr__fail(TSR_ENOMEM, "safetensors writer: out of memory");
    if (ndim)
        memcpy(e->shape, shape, (size_t)ndim * sizeof *shape);
    w->n++;
    return TSR_OK;
}

int tsr__st_writer_add(tsr__st_writer_t *w, const char *name, tsr__st_dtype_t dtype, int ndim,
                       const uint64_t *shape, const void *data)
{
    return add(w, name, dtype, ndim, shape, data, NULL, NULL);
}

int tsr__st_writer_add_fill(tsr__st_writer_t *w, const char *name, tsr__st_dtype_t dtype,
                            int ndim, const uint64_t *shape, tsr__st_fill_fn fill, void *ctx)
{
    if (!fill)
        return tsr__fail(TSR_EINVAL, "safetensors writer: tensor %s: NULL fill function",
                         name ? name : "(null)");
    return add(w, name, dtype, ndim, shape, NULL, fill, ctx);
}

int tsr__st_writer_meta(tsr__st_writer_t *w, const char *key, const char *value)
{
    if (!key || !value)
        return tsr__fail(TSR_EINVAL, "safetensors writer: NULL metadata key or value");
    char *v = strdup(value);
    if (!v)
        return tsr__fail(TSR_ENOMEM, "safetensors writer: out of memory");
    for (size_t i = 0; i < w->nmeta; i++)
        if (strcmp(w->mkey[i], key) == 0) {
            free(w->mval[i]);
            w->mval[i] = v;
            return TSR_OK;
        }
    if (w->nmeta == w->capmeta) {
        size_t cap = w->capmeta ? 2 * w->capmeta : 8;
        char **k = realloc(w->mkey, cap * sizeof *k);
        if (k)
            w->mkey = k;
        char **vv = k ? realloc(w->mval, cap * sizeof *vv) : NULL;
        if (!vv) {
            free(v);
            return tsr__fail(TSR_ENOMEM, "safetensors writer: out of memory");
        }
        w->mval = vv, w->capmeta = cap;
    }
    if (!(w->mkey[w->nmeta] = strdup(key))) {
        free(v);
        return tsr__fail(TSR_ENOMEM, "safetensors writer: out of memory");
    }
    w->mval[w->nmeta++] = v;
    return TSR_OK;
}

/* ---- header text -------------------------------------------------------- */


static void sb_printf(tsr__sb_t *b, const char *fmt, uint64_t x)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, fmt, x);
    tsr__sb_put(b, tmp, (size_t)n);
}

/* The JSON header, padded with spaces so that the data starts 8-aligned. */
static int header_text(const tsr__st_writer_t *w, tsr__sb_t *b)
{
    tsr__sb_put(b, "{", 1);
    if (w->nmeta) {
        tsr__sb_put(b, "\"__metadata__\":{", 16);
        for (size_t i = 0; i < w->nmeta; i++) {
            if (i)
                tsr__sb_put(b, ",", 1);
            tsr__sb_json_str(b, w->mkey[i]);
            tsr__sb_put(b, ":", 1);
            tsr__sb_json_str(b, w->mval[i]);
        }
        tsr__sb_put(b, "}", 1);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n; i++) {
        const wentry_t *e = &w->e[i];
        if (i || w->nmeta)
            tsr__sb_put(b, ",", 1);
        tsr__sb_json_str(b, e->name);
        tsr__sb_put(b, ":{\"dtype\":", 10);
        tsr__sb_json_str(b, tsr__st_dtype_name(e->dtype));
        tsr__sb_put(b, ",\"shape\":[", 10);
        for (int d = 0; d < e->ndim; d++)
            sb_printf(b, d ? ",%" PRIu64 : "%" PRIu64, e->shape[d]);
        sb_printf(b, "],\"data_offsets\":[%" PRIu64, off);
        off += e->bytes;
        sb_printf(b, ",%" PRIu64 "]}", off);
    }
    tsr__sb_put(b, "}", 1);
    while (!b->oom && b->len % 8)
        tsr__sb_put(b, " ", 1);
    return b->oom ? tsr__fail(TSR_ENOMEM, "safetensors writer: out of memory") : TSR_OK;
}

static int write_data(const tsr__st_writer_t *w, tsr__afile_t *af, void *buf)
{
    for (size_t i = 0; i < w->n; i++) {
        const wentry_t *e = &w->e[i];
        if (!e->bytes)
            continue;
        const void *src = e->data;
        if (e->fill) {
            int rc = e->fill(e->ctx, i, buf, (size_t)e->bytes);
            if (rc != TSR_OK) {
                tsr__afile_abort(af);
                return rc;
            }
            src = buf;
        }
        int rc = tsr__afile_write(af, src, (size_t)e->bytes);
        if (rc != TSR_OK)
            return rc;
    }
    return TSR_OK;
}

int tsr__st_writer_write(tsr__st_writer_t *w, const char *path)
{
    tsr__sb_t hdr = {0};
    int rc = header_text(w, &hdr);
    uint64_t fill_bytes = 0;
    for (size_t i = 0; i < w->n; i++)
        if (w->e[i].fill && w->e[i].bytes > fill_bytes)
            fill_bytes = w->e[i].bytes;
    void *buf = NULL;
    if (rc == TSR_OK && fill_bytes && (fill_bytes > SIZE_MAX || !(buf = malloc(fill_bytes))))
        rc = tsr__fail(TSR_ENOMEM, "safetensors %s: out of memory for a tensor of %" PRIu64
                       " bytes", path, fill_bytes);
    tsr__afile_t af;
    if (rc == TSR_OK)
        rc = tsr__afile_open(&af, path, "safetensors");
    if (rc == TSR_OK) {
        unsigned char le[8];
        for (int i = 0; i < 8; i++)
            le[i] = (unsigned char)((uint64_t)hdr.len >> (8 * i));
        rc = tsr__afile_write(&af, le, 8);
        if (rc == TSR_OK)
            rc = tsr__afile_write(&af, hdr.s, hdr.len);
        if (rc == TSR_OK)
            rc = write_data(w, &af, buf);
        if (rc == TSR_OK)
            rc = tsr__afile_commit(&af);
    }
    free(buf);
    free(hdr.s);
    return rc;
}
