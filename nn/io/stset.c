/* nn/io/stset.c — sharded safetensors sets in Hugging Face's layout: the
 * index, the validated reader, and the writer that replaces a set in the
 * order documented in stset.h. Must never leave an index naming a missing
 * or partial shard, never read a shard the index does not name, never
 * abort. */
#include "nn/io/stset.h"
#include "nn/io/strbuf.h"

#include "kernels/convert.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/error.h"
#include "runtime/file.h"
#include "runtime/json.h"

int (*tsr__stset_fault_hook)(const char *step, const char *path);

static char *join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (p) {
        memcpy(p, dir, a);
        p[a] = '/';
        memcpy(p + a + 1, name, b + 1);
    }
    return p;
}

/* The message of the last failure, prefixed with `pre`. */
static int prefix_fail(int rc, const char *pre)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tsr_error_message());
    return tsr__fail(rc, "%s: %s", pre, msg);
}

/* ---- index -------------------------------------------------------------- */

static int shard_name_ok(const tsr__json_t *v)
{
    return v->type == TSR__JSON_STRING && v->len > 0 && v->len <= 255 &&
           strlen(v->str) == v->len && !strchr(v->str, '/') && strcmp(v->str, ".") != 0 &&
           strcmp(v->str, "..") != 0;
}

static int by_idx_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void tsr__stset_index_free(tsr__stset_index_t *idx)
{
    if (!idx)
        return;
    for (size_t i = 0; i < idx->nfiles; i++)
        free(idx->files[i]);
    for (size_t i = 0; i < idx->nmap; i++)
        free(idx->names[i]);
    free(idx->files), free(idx->names), free(idx->file);
    memset(idx, 0, sizeof *idx);
}

static int index_fill(const tsr__json_t *root, const char *what, tsr__stset_index_t *idx)
{
    if (root->type != TSR__JSON_OBJECT)
        return tsr__fail(TSR_EINVAL, "%s: an index is an object, not %s", what,
                         tsr__json_type_name(root->type));
    const tsr__json_t *meta = tsr__json_get(root, "metadata");
    if (meta && meta->type != TSR__JSON_OBJECT && meta->type != TSR__JSON_NULL)
        return tsr__fail(TSR_EINVAL, "%s: \"metadata\" is %s, not an object", what,
                         tsr__json_type_name(meta->type));
    const tsr__json_t *ts = meta ? tsr__json_get(meta, "total_size") : NULL;
    if (ts) {
        if (tsr__json_u64(ts, &idx->total_size) != 0)
            return tsr__fail(TSR_EINVAL, "%s: metadata \"total_size\" is not a non-negative "
                             "integer", what);
        idx->has_total = 1;
    }
    const tsr__json_t *map = tsr__json_get(root, "weight_map");
    if (!map || map->type != TSR__JSON_OBJECT)
        return tsr__fail(TSR_EINVAL, "%s: \"weight_map\" is %s, not an object", what,
                         map ? tsr__json_type_name(map->type) : "missing");
    if (map->len == 0)
        return tsr__fail(TSR_EINVAL, "%s: \"weight_map\" names no tensor", what);
    /* each name is stored with its file index after its NUL, sorted, then
     * split into names[] and file[] */
    size_t n = map->len;
    char **names = calloc(n, sizeof *names);
    idx->files = calloc(n, sizeof *idx->files);
    idx->names = calloc(n, sizeof *idx->names);
    idx->file = calloc(n, sizeof *idx->file);
    int rc = names && idx->files && idx->names && idx->file
                 ? TSR_OK
                 : tsr__fail(TSR_ENOMEM, "%s: out of memory", what);
    for (size_t i = 0; !rc && i < n; i++) {
        const tsr__json_t *m = &map->items[i];
        if (m->key_len == 0 || strlen(m->key) != m->key_len) {
            rc = tsr__fail(TSR_EINVAL, "%s: weight_map holds an empty tensor name or one with "
                           "a NUL", what);
            break;
        }
        if (!shard_name_ok(m)) {
            rc = tsr__fail(TSR_EINVAL, "%s: weight_map maps tensor %.200s to %s, not a file "
                           "name in the checkpoint's folder", what, m->key,
                           m->type == TSR__JSON_STRING ? "a bad name"
                                                       : tsr__json_type_name(m->type));
            break;
        }
        size_t f = 0;
        while (f < idx->nfiles && strcmp(idx->files[f], m->str) != 0)
            f++;
        if (f == idx->nfiles) {
            if (!(idx->files[f] = strdup(m->str))) {
                rc = tsr__fail(TSR_ENOMEM, "%s: out of memory", what);
                break;
            }
            idx->nfiles++;
        }
        /* name followed by its file index in the same allocation */
        size_t kl = m->key_len;
        names[i] = malloc(kl + 1 + sizeof(size_t));
        if (!names[i]) {
            rc = tsr__fail(TSR_ENOMEM, "%s: out of memory", what);
            break;
        }
        memcpy(names[i], m->key, kl + 1);
        memcpy(names[i] + kl + 1, &f, sizeof f);
    }
    if (!rc) {
        qsort(names, n, sizeof *names, by_idx_name);
        for (size_t i = 0; i < n; i++) {
            memcpy(&idx->file[i], names[i] + strlen(names[i]) + 1, sizeof(size_t));
            idx->names[i] = names[i];
            names[i] = NULL;
        }
        idx->nmap = n;
    }
    if (names)
        for (size_t i = 0; i < n; i++)
            free(names[i]);
    free(names);
    return rc;
}

int tsr__stset_index_parse(const char *buf, size_t len, const char *what,
                           tsr__stset_index_t *idx)
{
    memset(idx, 0, sizeof *idx);
    if (len > TSR__STSET_MAX_INDEX)
        return tsr__fail(TSR_EINVAL, "%s: an index of %zu bytes is larger than %zu", what, len,
                         TSR__STSET_MAX_INDEX);
    tsr__json_doc_t *doc = NULL;
    int rc = tsr__json_parse(buf, len, what, &doc);
    if (!rc)
        rc = index_fill(tsr__json_root(doc), what, idx);
    tsr__json_free(doc);
    if (rc)
        tsr__stset_index_free(idx);
    return rc;
}

/* The index tensor `name` is mapped to: its position, or -1. */
static long index_find(const tsr__stset_index_t *idx, const char *name)
{
    size_t lo = 0, hi = idx->nmap;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(idx->names[mid], name);
        if (c == 0)
            return (long)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static int read_file(const char *path, size_t max, char **buf, size_t *len, int *missing)
{
    char why[128];
    *buf = NULL;
    if (missing)
        *missing = 0;
    int fd = tsr__open_regular(path, why, sizeof why);
    if (fd < 0) {
        if (missing && errno == ENOENT)
            *missing = 1;
        return tsr__fail(TSR_EIO, "%s: cannot open: %s", path, why);
    }
    struct stat st;
    int rc = TSR_OK;
    if (fstat(fd, &st) != 0)
        rc = tsr__fail(TSR_EIO, "%s: cannot stat", path);
    else if ((uint64_t)st.st_size > max)
        rc = tsr__fail(TSR_EINVAL, "%s: larger than %zu bytes", path, max);
    else if (!(*buf = malloc((size_t)st.st_size + 1)))
        rc = tsr__fail(TSR_ENOMEM, "%s: out of memory", path);
    size_t got = 0;
    while (!rc && got < (size_t)st.st_size) {
        ssize_t r = read(fd, *buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            rc = tsr__fail(TSR_EIO, "%s: read failed", path);
        else
            got += (size_t)r;
    }
    close(fd);
    if (rc) {
        free(*buf);
        *buf = NULL;
    } else
        *len = got;
    return rc;
}

static int index_read(const char *path, tsr__stset_index_t *idx, int *missing)
{
    char *buf;
    size_t len = 0;
    int rc = read_file(path, TSR__STSET_MAX_INDEX, &buf, &len, missing);
    if (!rc)
        rc = tsr__stset_index_parse(buf, len, path, idx);
    free(buf);
    return rc;
}

/* ---- reader ------------------------------------------------------------- */

struct tsr__stset {
    char *where;               /* the path given, for messages */
    int sharded;
    size_t nshards;
    tsr__st_reader_t **readers;
    tsr__stset_entry_t *e;
    size_t count;
};

void tsr__stset_close(tsr__stset_t *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nshards; i++)
        tsr__st_close(s->readers[i]);
    free(s->readers), free(s->e), free(s->where), free(s);
}

static int by_entry(const void *a, const void *b)
{
    return strcmp(((const tsr__stset_entry_t *)a)->name, ((const tsr__stset_entry_t *)b)->name);
}

static int collect(tsr__stset_t *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->nshards; i++)
        n += tsr__st_count(s->readers[i]);
    s->e = calloc(n + 1, sizeof *s->e);
    if (!s->e)
        return tsr__fail(TSR_ENOMEM, "checkpoint %s: out of memory", s->where);
    for (size_t i = 0; i < s->nshards; i++)
        for (size_t k = 0; k < tsr__st_count(s->readers[i]); k++) {
            const tsr__st_tensor_t *t = tsr__st_at(s->readers[i], k);
            s->e[s->count++] = (tsr__stset_entry_t){t->name, t, i};
        }
    qsort(s->e, s->count, sizeof *s->e, by_entry);
    for (size_t i = 1; i < s->count; i++)
        if (!strcmp(s->e[i].name, s->e[i - 1].name))
            return tsr__fail(TSR_EINVAL, "checkpoint %s: tensor %.200s is in two shards, %s and "
                             "%s", s->where, s->e[i].name,
                             tsr__st_path(s->readers[s->e[i - 1].shard]),
                             tsr__st_path(s->readers[s->e[i].shard]));
    return TSR_OK;
}

/* Every tensor where the index says, and every mapped tensor present. */
static int check_against(tsr__stset_t *s, const tsr__stset_index_t *idx, const char *ipath)
{
    for (size_t i = 0; i < s->count; i++) {
        long k = index_find(idx, s->e[i].name);
        if (k < 0)
            return tsr__fail(TSR_EINVAL, "checkpoint %s: shard %s holds tensor %.200s, which "
                             "the index does not name", ipath,
                             idx->files[s->e[i].shard], s->e[i].name);
        if (idx->file[k] != s->e[i].shard)
            return tsr__fail(TSR_EINVAL, "checkpoint %s: tensor %.200s is in shard %s, but the "
                             "index maps it to %s", ipath, s->e[i].name,
                             idx->files[s->e[i].shard], idx->files[idx->file[k]]);
    }
    if (s->count != idx->nmap)
        for (size_t k = 0; k < idx->nmap; k++) {
            tsr__stset_entry_t key = {.name = idx->names[k]};
            if (!bsearch(&key, s->e, s->count, sizeof key, by_entry))
                return tsr__fail(TSR_EINVAL, "checkpoint %s: the index maps tensor %.200s to "
                                 "shard %s, which does not hold it", ipath, idx->names[k],
                                 idx->files[idx->file[k]]);
        }
    return TSR_OK;
}

static int open_index(tsr__stset_t *s, const char *ipath)
{
    tsr__stset_index_t idx;
    int rc = index_read(ipath, &idx, NULL);
    if (rc)
        return rc;
    char *dir = strdup(ipath), *slash = dir ? strrchr(dir, '/') : NULL;
    if (dir)
        slash ? (void)(*slash = 0) : (void)strcpy(dir, ".");
    s->sharded = 1;
    s->readers = calloc(idx.nfiles, sizeof *s->readers);
    rc = dir && s->readers ? TSR_OK : tsr__fail(TSR_ENOMEM, "checkpoint %s: out of memory", ipath);
    for (size_t i = 0; !rc && i < idx.nfiles; i++) {
        char *p = join(dir, idx.files[i]);
        if (!p) {
            rc = tsr__fail(TSR_ENOMEM, "checkpoint %s: out of memory", ipath);
            break;
        }
        rc = tsr__st_open(&s->readers[i], p);
        free(p);
        if (rc) {
            char pre[512];
            snprintf(pre, sizeof pre, "checkpoint %s: shard %s named by the index", ipath,
                     idx.files[i]);
            rc = prefix_fail(rc, pre);
        } else
            s->nshards++;
    }
    if (!rc)
        rc = collect(s);
    if (!rc)
        rc = check_against(s, &idx, ipath);
    free(dir);
    tsr__stset_index_free(&idx);
    return rc;
}

static int open_single(tsr__stset_t *s, const char *path)
{
    s->readers = calloc(1, sizeof *s->readers);
    if (!s->readers)
        return tsr__fail(TSR_ENOMEM, "checkpoint %s: out of memory", path);
    int rc = tsr__st_open(&s->readers[0], path);
    if (!rc)
        s->nshards = 1, rc = collect(s);
    return rc;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

int tsr__stset_open(tsr__stset_t **out, const char *path)
{
    if (!out || !path)
        return tsr__fail(TSR_EINVAL, "checkpoint: NULL argument");
    *out = NULL;
    tsr__stset_t *s = calloc(1, sizeof *s);
    if (!s || !(s->where = strdup(path))) {
        free(s);
        return tsr__fail(TSR_ENOMEM, "checkpoint %s: out of memory", path);
    }
    struct stat st;
    int rc;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        char *single = join(path, TSR__STSET_SINGLE), *index = join(path, TSR__STSET_INDEX);
        if (!single || !index)
            rc = tsr__fail(TSR_ENOMEM, "checkpoint %s: out of memory", path);
        else if (lstat(single, &st) == 0) /* it takes precedence, as in transformers */
            rc = open_single(s, single);
        else if (lstat(index, &st) == 0)
            rc = open_index(s, index);
        else
            rc = tsr__fail(TSR_EIO, "checkpoint %s: the folder holds neither "
                           TSR__STSET_SINGLE " nor " TSR__STSET_INDEX, path);
        free(single), free(index);
    } else if (ends_with(path, ".index.json"))
        rc = open_index(s, path);
    else
        rc = open_single(s, path);
    if (rc) {
        tsr__stset_close(s);
        return rc;
    }
    *out = s;
    return TSR_OK;
}

size_t tsr__stset_count(const tsr__stset_t *s)
{
    return s->count;
}

const tsr__stset_entry_t *tsr__stset_at(const tsr__stset_t *s, size_t i)
{
    return i < s->count ? &s->e[i] : NULL;
}

const tsr__stset_entry_t *tsr__stset_find(const tsr__stset_t *s, const char *name)
{
    tsr__stset_entry_t key = {.name = name};
    return name ? bsearch(&key, s->e, s->count, sizeof key, by_entry) : NULL;
}

size_t tsr__stset_shards(const tsr__stset_t *s)
{
    return s->nshards;
}

const char *tsr__stset_shard_path(const tsr__stset_t *s, size_t i)
{
    return i < s->nshards ? tsr__st_path(s->readers[i]) : NULL;
}

int tsr__stset_sharded(const tsr__stset_t *s)
{
    return s->sharded;
}

int tsr__stset_read_f32(tsr__stset_t *s, const tsr__stset_entry_t *e, float *out, size_t numel)
{
    if (!e || e->shard >= s->nshards)
        return tsr__fail(TSR_EINVAL, "checkpoint %s: no such tensor", s->where);
    return tsr__st_read_f32(s->readers[e->shard], e->t, out, numel);
}

int tsr__stset_read_raw(tsr__stset_t *s, const tsr__stset_entry_t *e, void *out, size_t bytes)
{
    if (!e || e->shard >= s->nshards)
        return tsr__fail(TSR_EINVAL, "checkpoint %s: no such tensor", s->where);
    return tsr__st_read_raw(s->readers[e->shard], e->t, out, bytes);
}

int tsr__stset_read_bf16(tsr__stset_t *s, const tsr__stset_entry_t *e, uint16_t *out,
                         size_t numel)
{
    if (!e || e->shard >= s->nshards)
        return tsr__fail(TSR_EINVAL, "checkpoint %s: no such tensor", s->where);
    if (e->t->numel != numel)
        return tsr__fail(TSR_EINVAL, "checkpoint %s: tensor %.200s has %" PRIu64 " elements, "
                         "%zu requested", s->where, e->name, e->t->numel, numel);
    if (e->t->dtype == TSR__ST_BF16)
        return tsr__st_read_raw(s->readers[e->shard], e->t, out, numel * 2);
    if (e->t->dtype != TSR__ST_F32)
        return tsr__fail(TSR_EINVAL, "checkpoint %s: tensor %.200s has dtype %s, not BF16 or "
                         "F32", s->where, e->name, tsr__st_dtype_name(e->t->dtype));
    /* float32 needs twice the caller's room: through a bounded buffer */
    enum { CHUNK = 1 << 16 };
    float *stage = malloc(CHUNK * sizeof *stage);
    if (!stage)
        return tsr__fail(TSR_ENOMEM, "checkpoint %s: out of memory", s->where);
    int rc = TSR_OK;
    tsr__st_tensor_t part = *e->t;
    for (size_t i = 0; !rc && i < numel; i += CHUNK) {
        size_t n = numel - i < CHUNK ? numel - i : CHUNK;
        part.begin = e->t->begin + 4 * (uint64_t)i;
        part.end = part.begin + 4 * (uint64_t)n;
        rc = tsr__st_read_raw(s->readers[e->shard], &part, stage, 4 * n);
        if (!rc)
            tsr_cpu_f32_to_bf16(n, stage, out + i);
    }
    free(stage);
    return rc;
}

/* ---- writer ------------------------------------------------------------- */

typedef struct {
    char *name;
    tsr__st_dtype_t dtype; /* as stored */
    int ndim;
    uint64_t shape[TSR__ST_MAX_DIMS];
    uint64_t bytes;
    const void *data;
    int from_f32; /* data is float32, converted to dtype at write time */
} went_t;

struct tsr__stset_writer {
    went_t *e;
    size_t n, cap;
    char **mkey, **mval;
    size_t nmeta;
};

int tsr__stset_writer_create(tsr__stset_writer_t **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? TSR_OK : tsr__fail(TSR_ENOMEM, "checkpoint writer: out of memory");
}

void tsr__stset_writer_free(tsr__stset_writer_t *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n; i++)
        free(w->e[i].name);
    for (size_t i = 0; i < w->nmeta; i++)
        free(w->mkey[i]), free(w->mval[i]);
    free(w->e), free(w->mkey), free(w->mval), free(w);
}

static int wadd(tsr__stset_writer_t *w, const char *name, tsr__st_dtype_t dtype, int ndim,
                const uint64_t *shape, const void *data, int from_f32)
{
    if (!w || !name || !*name || !strcmp(name, "__metadata__"))
        return tsr__fail(TSR_EINVAL, "checkpoint writer: invalid tensor name \"%s\"",
                         name ? name : "(null)");
    if ((unsigned)dtype >= TSR__ST_NDTYPES || ndim < 0 || ndim > TSR__ST_MAX_DIMS ||
        (ndim && !shape))
        return tsr__fail(TSR_EINVAL, "checkpoint writer: tensor %s: bad dtype or shape", name);
    for (size_t i = 0; i < w->n; i++)
        if (!strcmp(w->e[i].name, name))
            return tsr__fail(TSR_EINVAL, "checkpoint writer: tensor %s added twice", name);
    uint64_t b = tsr__st_dtype_size(dtype);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] && b > UINT64_MAX / 4 / shape[i])
            return tsr__fail(TSR_EINVAL, "checkpoint writer: tensor %s is too large", name);
        b *= shape[i];
    }
    if (b && !data)
        return tsr__fail(TSR_EINVAL, "checkpoint writer: tensor %s has no data", name);
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        went_t *e = realloc(w->e, cap * sizeof *e);
        if (!e)
            return tsr__fail(TSR_ENOMEM, "checkpoint writer: out of memory");
        w->e = e, w->cap = cap;
    }
    went_t *e = &w->e[w->n];
    *e = (went_t){.name = strdup(name), .dtype = dtype, .ndim = ndim, .bytes = b,
                  .data = data, .from_f32 = from_f32};
    if (!e->name)
        return tsr__fail(TSR_ENOMEM, "checkpoint writer: out of memory");
    if (ndim)
        memcpy(e->shape, shape, (size_t)ndim * sizeof *shape);
    w->n++;
    return TSR_OK;
}

int tsr__stset_writer_add(tsr__stset_writer_t *w, const char *name, tsr__st_dtype_t dtype,
                          int ndim, const uint64_t *shape, const void *data)
{
    return wadd(w, name, dtype, ndim, shape, data, 0);
}

int tsr__stset_writer_add_f32(tsr__stset_writer_t *w, const char *name, tsr__st_dtype_t store,
                              int ndim, const uint64_t *shape, const float *data)
{
    if (store != TSR__ST_F32 && store != TSR__ST_BF16)
        return tsr__fail(TSR_EINVAL, "checkpoint writer: tensor %s: float32 data is stored as "
                         "F32 or BF16, not %s", name ? name : "(null)",
                         tsr__st_dtype_name(store));
    return wadd(w, name, store, ndim, shape, data, store == TSR__ST_BF16);
}

int tsr__stset_writer_meta(tsr__stset_writer_t *w, const char *key, const char *value)
{
    if (!w || !key || !value)
        return tsr__fail(TSR_EINVAL, "checkpoint writer: NULL metadata key or value");
    char **k = realloc(w->mkey, (w->nmeta + 1) * sizeof *k);
    if (k)
        w->mkey = k;
    char **v = k ? realloc(w->mval, (w->nmeta + 1) * sizeof *v) : NULL;
    if (v)
        w->mval = v;
    if (!k || !v || !(w->mkey[w->nmeta] = strdup(key)))
        return tsr__fail(TSR_ENOMEM, "checkpoint writer: out of memory");
    if (!(w->mval[w->nmeta] = strdup(value))) {
        free(w->mkey[w->nmeta]);
        return tsr__fail(TSR_ENOMEM, "checkpoint writer: out of memory");
    }
    w->nmeta++;
    return TSR_OK;
}

static int fill_bf16(void *ctx, size_t index, void *buf, size_t bytes)
{
    const went_t *e = (const went_t *)ctx + index;
    const float *src = e->data;
    unsigned char *o = buf;
    uint16_t h[1024];
    for (size_t i = 0; i < bytes / 2; i += 1024) {
        size_t n = bytes / 2 - i < 1024 ? bytes / 2 - i : 1024;
        tsr_cpu_f32_to_bf16(n, src + i, h); /* round to nearest even, NaN kept quiet */
        for (size_t k = 0; k < n; k++) /* little-endian, whatever the host */
            o[2 * (i + k)] = (unsigned char)h[k], o[2 * (i + k) + 1] = (unsigned char)(h[k] >> 8);
    }
    return TSR_OK;
}

static int hook(const char *step, const char *path)
{
    if (tsr__stset_fault_hook && tsr__stset_fault_hook(step, path) != 0)
        return tsr__fail(TSR_EIO, "checkpoint %s: cannot %s (fault injected)", path, step);
    return TSR_OK;
}

static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* Shard k of the plan ([first, first + n) of the tensors) to path. */
static int write_shard(const tsr__stset_writer_t *w, size_t first, size_t n, const char *path)
{
    tsr__st_writer_t *sw = NULL;
    int rc = hook("write", path);
    if (!rc)
        rc = tsr__st_writer_create(&sw);
    if (!rc)
        rc = tsr__st_writer_meta(sw, "format", "pt");
    for (size_t i = 0; !rc && i < w->nmeta; i++)
        rc = tsr__st_writer_meta(sw, w->mkey[i], w->mval[i]);
    for (size_t i = first; !rc && i < first + n; i++) {
        const went_t *e = &w->e[i];
        if (e->from_f32)
            rc = tsr__st_writer_add_fill(sw, e->name, e->dtype, e->ndim, e->shape, fill_bf16,
                                         (void *)(w->e + first));
        else
            rc = tsr__st_writer_add(sw, e->name, e->dtype, e->ndim, e->shape, e->data);
    }
    if (!rc)
        rc = tsr__st_writer_write(sw, path);
    tsr__st_writer_free(sw);
    return rc;
}

/* ---- the index text ----------------------------------------------------- */


static int by_went_name(const void *a, const void *b)
{
    return strcmp((*(const went_t *const *)a)->name, (*(const went_t *const *)b)->name);
}

/* {"metadata": {"total_size": N}, "weight_map": {name: file, …}} with the
 * names sorted, as transformers writes it. */
static int index_text(const tsr__stset_writer_t *w, const size_t *shard_of, char *const *names,
                      tsr__sb_t *b)
{
    const went_t **order = malloc((w->n + 1) * sizeof *order);
    if (!order)
        return tsr__fail(TSR_ENOMEM, "checkpoint writer: out of memory");
    uint64_t total = 0;
    for (size_t i = 0; i < w->n; i++)
        order[i] = &w->e[i], total += w->e[i].bytes;
    qsort(order, w->n, sizeof *order, by_went_name);
    char num[64];
    snprintf(num, sizeof num, "%" PRIu64, total);
    tsr__sb_cstr(b, "{\n  \"metadata\": {\n    \"total_size\": ");
    tsr__sb_cstr(b, num);
    tsr__sb_cstr(b, "\n  },\n  \"weight_map\": {\n");
    for (size_t k = 0; k < w->n; k++) {
        size_t i = (size_t)(order[k] - w->e);
        tsr__sb_cstr(b, "    ");
        tsr__sb_json_str(b, w->e[i].name);
        tsr__sb_cstr(b, ": ");
        tsr__sb_json_str(b, names[shard_of[i]]);
        tsr__sb_cstr(b, k + 1 < w->n ? ",\n" : "\n");
    }
    tsr__sb_cstr(b, "  }\n}\n");
    free(order);
    return b->oom ? tsr__fail(TSR_ENOMEM, "checkpoint writer: out of memory") : TSR_OK;
}

/* ---- replacing a set ---------------------------------------------------- */

/* "model-NNNNN-of-NNNNN.safetensors" or "….b.safetensors": the names this
 * writer gives shards, which a leftover scan may remove. */
static int is_shard_name(const char *n)
{
    const char *p = n;
    if (strncmp(p, "model-", 6) != 0)
        return 0;
    p += 6;
    const char *d = p;
    while (*p >= '0' && *p <= '9')
        p++;
    if (p == d || strncmp(p, "-of-", 4) != 0)
        return 0;
    p += 4, d = p;
    while (*p >= '0' && *p <= '9')
        p++;
    return p != d && (!strcmp(p, ".safetensors") || !strcmp(p, ".b.safetensors"));
}

/* A temporary "model….part.<pid>[.tmp.<pid>]" of a process no longer running. */
static int is_dead_part(const char *n)
{
    const char *p = strstr(n, ".part.");
    if (strncmp(n, "model", 5) != 0 || !p)
        return 0;
    char *end;
    errno = 0;
    long pid = strtol(p + 6, &end, 10);
    if (errno || end == p + 6 || pid <= 0 || (*end && strncmp(end, ".tmp.", 5) != 0))
        return 0;
    return pid != (long)getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

static int named_by(const tsr__stset_index_t *idx, const char *name)
{
    for (size_t i = 0; idx && i < idx->nfiles; i++)
        if (!strcmp(idx->files[i], name))
            return 1;
    return 0;
}

/* Leftovers of killed writes: dead temporaries, and shard files that the
 * index in place does not name. */
static void remove_leftovers(const char *dir, const tsr__stset_index_t *old)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!is_dead_part(de->d_name) && !(is_shard_name(de->d_name) && !named_by(old, de->d_name)))
            continue;
        char *p = join(dir, de->d_name);
        if (p && hook("unlink", p) == TSR_OK)
            unlink(p);
        free(p);
    }
    closedir(d);
}

typedef struct {
    size_t nsh;
    size_t *first, *count; /* per shard */
    size_t *shard_of;      /* per tensor */
    char **names;          /* per shard: file name */
    char **final, **part;  /* per shard: paths */
    int *renamed;
} plan_t;

static void plan_free(plan_t *p)
{
    for (size_t k = 0; k < p->nsh; k++) {
        if (p->names)
            free(p->names[k]);
        if (p->final)
            free(p->final[k]);
        if (p->part)
            free(p->part[k]);
    }
    free(p->first), free(p->count), free(p->shard_of), free(p->names), free(p->final);
    free(p->part), free(p->renamed);
}

static int plan_make(const tsr__stset_writer_t *w, uint64_t max, plan_t *p)
{
    memset(p, 0, sizeof *p);
    size_t n = w->n;
    p->first = calloc(n, sizeof *p->first);
    p->count = calloc(n, sizeof *p->count);
    p->shard_of = calloc(n, sizeof *p->shard_of);
    p->names = calloc(n, sizeof *p->names);
    p->final = calloc(n, sizeof *p->final);
    p->part = calloc(n, sizeof *p->part);
    p->renamed = calloc(n, sizeof *p->renamed);
    if (!p->first || !p->count || !p->shard_of || !p->names || !p->final || !p->part ||
        !p->renamed)
        return tsr__fail(TSR_ENOMEM, "checkpoint writer: out of memory");
    uint64_t cur = 0;
    for (size_t i = 0; i < n; i++) {
        /* an empty tensor never starts a shard: it takes no room */
        if (p->nsh == 0 ||
            (max && p->count[p->nsh - 1] && w->e[i].bytes && cur + w->e[i].bytes > max)) {
            p->first[p->nsh++] = i;
            cur = 0;
        }
        p->count[p->nsh - 1]++;
        p->shard_of[i] = p->nsh - 1;
        cur += w->e[i].bytes;
    }
    return TSR_OK;
}

/* Shard names that no file of the set in place has. */
static int plan_names(plan_t *p, const char *dir, const tsr__stset_index_t *live)
{
    for (int alt = 0; alt < 2; alt++) {
        int clash = 0;
        for (size_t k = 0; k < p->nsh; k++) {
            char buf[96];
            if (p->nsh == 1)
                snprintf(buf, sizeof buf, TSR__STSET_SINGLE);
            else
                snprintf(buf, sizeof buf, "model-%05zu-of-%05zu%s.safetensors", k + 1, p->nsh,
                         alt ? ".b" : "");
            free(p->names[k]);
            if (!(p->names[k] = strdup(buf)))
                return tsr__fail(TSR_ENOMEM, "checkpoint writer: out of memory");
            clash |= p->nsh > 1 && named_by(live, buf);
        }
        if (!clash)
            break;
        if (alt)
            return tsr__fail(TSR_EINVAL, "checkpoint %s: the index in place names shards of "
                             "both naming schemes; remove the folder's set first", dir);
    }
    for (size_t k = 0; k < p->nsh; k++) {
        char suffix[48];
        snprintf(suffix, sizeof suffix, ".part.%ld", (long)getpid());
        p->final[k] = join(dir, p->names[k]);
        p->part[k] = p->final[k] ? malloc(strlen(p->final[k]) + sizeof suffix) : NULL;
        if (!p->part[k])
            return tsr__fail(TSR_ENOMEM, "checkpoint writer: out of memory");
        strcat(strcpy(p->part[k], p->final[k]), suffix);
    }
    return TSR_OK;
}

static int do_rename(const char *from, const char *to)
{
    int rc = hook("rename", to);
    if (!rc && rename(from, to) != 0) {
        char eb[128];
        rc = tsr__fail(TSR_EIO, "checkpoint %s: cannot rename %s over it: %s", to, from,
                       strerror_r(errno, eb, sizeof eb));
    }
    return rc;
}

static int write_index(const tsr__stset_writer_t *w, const plan_t *p, const char *ipart)
{
    tsr__sb_t b = {0};
    tsr__afile_t af;
    int rc = index_text(w, p->shard_of, p->names, &b);
    if (!rc)
        rc = hook("write", ipart);
    if (!rc)
        rc = tsr__afile_open(&af, ipart, "checkpoint index");
    if (!rc)
        rc = tsr__afile_write(&af, b.s, b.len);
    if (!rc)
        rc = tsr__afile_commit(&af);
    free(b.s);
    return rc;
}

/* Steps 4 and 5 of stset.h: what the old set leaves behind. Failures leave
 * leftovers for the next write, not an error: the new set is in place. */
static void remove_old(const char *dir, const plan_t *p, const tsr__stset_index_t *old,
                       const char *index_path)
{
    struct stat st;
    /* a single file replaces any index, even one nothing could read */
    if (p->nsh == 1 && lstat(index_path, &st) == 0 &&
        (hook("unlink", index_path) != TSR_OK || unlink(index_path) != 0))
        return;
    for (size_t i = 0; i < old->nfiles; i++) {
        int kept = 0;
        for (size_t k = 0; k < p->nsh; k++)
            kept |= !strcmp(p->names[k], old->files[i]);
        char *f = kept ? NULL : join(dir, old->files[i]);
        if (f && hook("unlink", f) != TSR_OK) {
            free(f);
            return;
        }
        if (f)
            unlink(f);
        free(f);
    }
    sync_dir(dir);
}

int tsr__stset_writer_write(tsr__stset_writer_t *w, const char *dir, uint64_t max_shard_bytes)
{
    if (!w || !dir)
        return tsr__fail(TSR_EINVAL, "checkpoint writer: NULL argument");
    if (w->n == 0)
        return tsr__fail(TSR_EINVAL, "checkpoint %s: no tensor to write", dir);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        char eb[128];
        return tsr__fail(TSR_EIO, "checkpoint %s: cannot create the folder: %s", dir,
                         strerror_r(errno, eb, sizeof eb));
    }
    char *single = join(dir, TSR__STSET_SINGLE), *index = join(dir, TSR__STSET_INDEX);
    size_t ipart_len = index ? strlen(index) + 32 : 0;
    char *ipart = index ? malloc(ipart_len) : NULL;
    plan_t p;
    tsr__stset_index_t old = {0};
    int rc = plan_make(w, max_shard_bytes, &p);
    if (!rc && (!single || !index || !ipart))
        rc = tsr__fail(TSR_ENOMEM, "checkpoint writer: out of memory");
    if (rc || !ipart)
        goto out;
    snprintf(ipart, ipart_len, "%s.part.%ld", index, (long)getpid());
    struct stat st;
    int old_single = lstat(single, &st) == 0, missing;
    if (index_read(index, &old, &missing) != TSR_OK)
        memset(&old, 0, sizeof old); /* no index, or one nothing can use */
    /* the set in place: model.safetensors when present, else the index's */
    rc = plan_names(&p, dir, old_single ? NULL : &old);
    if (rc)
        goto out;
    remove_leftovers(dir, &old);

    /* 1. everything under temporary names */
    for (size_t k = 0; !rc && k < p.nsh; k++)
        rc = write_shard(w, p.first[k], p.count[k], p.part[k]);
    if (!rc && p.nsh > 1)
        rc = write_index(w, &p, ipart);
    /* 2. the shards to their names, none of them in use */
    for (size_t k = 0; !rc && p.nsh > 1 && k < p.nsh; k++)
        if (!(rc = do_rename(p.part[k], p.final[k])))
            p.renamed[k] = 1;
    if (!rc)
        sync_dir(dir);
    /* 3. the switch */
    if (!rc)
        rc = p.nsh > 1 ? do_rename(ipart, index) : do_rename(p.part[0], single);
    if (rc)
        goto undo;
    sync_dir(dir);
    /* 4. an older single file would still be the one read */
    if (p.nsh > 1 && old_single) {
        rc = hook("unlink", single);
        if (!rc && unlink(single) != 0 && errno != ENOENT) {
            char eb[128];
            rc = tsr__fail(TSR_EIO, "checkpoint %s: cannot remove the previous %s: %s", dir,
                           TSR__STSET_SINGLE, strerror_r(errno, eb, sizeof eb));
        }
        if (rc) {
            /* the old file is still the set: take the new index back first */
            unlink(index);
            goto undo;
        }
        sync_dir(dir);
    }
    /* 5. */
    remove_old(dir, &p, &old, index);
    goto out;
undo:
    for (size_t k = 0; k < p.nsh; k++) {
        unlink(p.part[k]);
        if (p.renamed[k])
            unlink(p.final[k]);
    }
    unlink(ipart);
out:
    tsr__stset_index_free(&old);
    plan_free(&p);
    free(single), free(index), free(ipart);
    return rc;
}
