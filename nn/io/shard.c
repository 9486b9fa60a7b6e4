/* nn/io/shard.c — llm.c token shards (256 int32 header; GPT-2's uint16
 * tokens or Llama 3's uint32 tokens) and the sequential batch loader over one
 * shard. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tessera/gpt2.h>

#include "nn/io/safetensors.h"
#include "runtime/error.h"
#include "runtime/file.h"

/* strerror() may share one buffer between threads */
static const char *errstr(int e)
{
    static _Thread_local char buf[128];
    return strerror_r(e, buf, sizeof buf);
}

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "shards are little-endian and read without swapping");

/* The two kinds llm.c writes (dev/data/data_common.py, HEADERS_INFO): each
 * magic goes with exactly one version and one token width. */
enum {
    MAGIC16 = 20240520, VERSION16 = 1, /* GPT-2: uint16 tokens */
    MAGIC32 = 20240801, VERSION32 = 7, /* Llama 3: uint32 tokens */
    HEADER_INTS = 256
};
#define HEADER_BYTES (HEADER_INTS * 4)

/* ---- writing ------------------------------------------------------------ */

static int write_tokens(tsr__afile_t *af, const int32_t *tokens, size_t n, int width)
{
    union {
        uint16_t t16[4096];
        uint32_t t32[4096];
    } chunk;
    for (size_t i = 0; i < n; i += 4096) {
        size_t k = n - i < 4096 ? n - i : 4096;
        for (size_t j = 0; j < k; j++) {
            if (width == 2)
                chunk.t16[j] = (uint16_t)tokens[i + j];
            else
                chunk.t32[j] = (uint32_t)tokens[i + j];
        }
        int rc = tsr__afile_write(af, &chunk, k * (size_t)width);
        if (rc != TSR_OK)
            return rc;
    }
    return TSR_OK;
}

int tsr_shard_write_width(const char *path, const int32_t *tokens, size_t n, int width)
{
    if (!path || (n && !tokens))
        return tsr__fail(TSR_EINVAL, "tsr_shard_write: NULL path or tokens");
    if (width != 0 && width != 2 && width != 4)
        return tsr__fail(TSR_EINVAL, "shard %s: token width %d is not 0 (the narrowest), 2 or 4 "
                         "bytes", path, width);
    if (n > INT32_MAX)
        return tsr__fail(TSR_EINVAL, "shard %s: %zu tokens exceed the format's int32 count", path,
                         n);
    /* validated before the temporary exists, so a bad id never touches disk */
    int32_t max = 0;
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] < 0)
            return tsr__fail(TSR_EINVAL, "shard %s: token %zu is %d, a negative id", path, i,
                             (int)tokens[i]);
        if (width == 2 && tokens[i] > 65535)
            return tsr__fail(TSR_EINVAL, "shard %s: token %zu is %d, outside [0, 65535] of "
                             "2-byte tokens", path, i, (int)tokens[i]);
        if (tokens[i] > max)
            max = tokens[i];
    }
    if (width == 0)
        width = max > 65535 ? 4 : 2;
    int32_t header[HEADER_INTS] = {width == 2 ? MAGIC16 : MAGIC32,
                                   width == 2 ? VERSION16 : VERSION32, (int32_t)n};
    tsr__afile_t af;
    int rc = tsr__afile_open(&af, path, "shard");
    if (rc == TSR_OK)
        rc = tsr__afile_write(&af, header, sizeof header);
    if (rc == TSR_OK)
        rc = write_tokens(&af, tokens, n, width);
    if (rc == TSR_OK)
        rc = tsr__afile_commit(&af);
    return rc;
}

int tsr_shard_write(const char *path, const int32_t *tokens, size_t n)
{
    return tsr_shard_write_width(path, tokens, n, 0);
}

/* ---- reading ------------------------------------------------------------ */

struct tsr_shard {
    void *tokens; /* count uint16 (width 2) or uint32 (width 4) */
    size_t count;
    int width;
};

static int read_full(int fd, void *buf, size_t n, const char *path)
{
    char *p = buf;
    while (n) {
        ssize_t got = read(fd, p, n > ((size_t)1 << 30) ? (size_t)1 << 30 : n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return tsr__fail(TSR_EIO, "shard %s: read failed: %s", path,
                             got < 0 ? errstr(errno) : "unexpected end of file");
        p += got, n -= (size_t)got;
    }
    return TSR_OK;
}

/* The token width the header's magic and version name, or an error. */
static int check_header(const int32_t *h, uint64_t size, const char *path, int *width)
{
    int32_t version;
    if (h[0] == MAGIC16)
        *width = 2, version = VERSION16;
    else if (h[0] == MAGIC32)
        *width = 4, version = VERSION32;
    else
        return tsr__fail(TSR_EINVAL, "shard %s: bad magic %d (expected %d for uint16 tokens or "
                         "%d for uint32 tokens)", path, (int)h[0], MAGIC16, MAGIC32);
    if (h[1] != version)
        return tsr__fail(TSR_EINVAL, "shard %s: unsupported version %d for magic %d (expected "
                         "%d)", path, (int)h[1], (int)h[0], (int)version);
    uint64_t want = HEADER_BYTES + (uint64_t)*width * (uint64_t)(uint32_t)h[2];
    if (h[2] < 0 || size != want)
        return tsr__fail(TSR_EINVAL, "shard %s: header says %d tokens of %d bytes (%" PRIu64
                         " bytes) but the file has %" PRIu64 " bytes",
                         path, (int)h[2], *width, want, size);
    return TSR_OK;
}

static int load(tsr_shard_t *s, int fd, const char *path)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return tsr__fail(TSR_EIO, "shard %s: cannot stat: %s", path, errstr(errno));
    uint64_t size = (uint64_t)st.st_size;
    if (size < HEADER_BYTES)
        return tsr__fail(TSR_EINVAL, "shard %s: file of %" PRIu64 " bytes is shorter than the "
                         "%d-byte header", path, size, HEADER_BYTES);
    int32_t h[HEADER_INTS];
    int rc = read_full(fd, h, sizeof h, path);
    if (rc == TSR_OK)
        rc = check_header(h, size, path, &s->width);
    if (rc != TSR_OK)
        return rc;
    s->count = (size_t)h[2];
    size_t bytes = s->count * (size_t)s->width;
    s->tokens = malloc(bytes + 4);
    if (!s->tokens)
        return tsr__fail(TSR_ENOMEM, "shard %s: out of memory for %zu tokens", path, s->count);
    rc = read_full(fd, s->tokens, bytes, path);
    if (rc != TSR_OK || s->width == 2)
        return rc;
    /* ids are handed out as int32 */
    const uint32_t *t = s->tokens;
    for (size_t i = 0; i < s->count; i++)
        if (t[i] > INT32_MAX)
            return tsr__fail(TSR_EINVAL, "shard %s: token %zu is %" PRIu32 ", beyond the "
                             "largest id %d", path, i, t[i], INT32_MAX);
    return TSR_OK;
}

int tsr_shard_open(tsr_shard_t **out, const char *path)
{
    if (!out || !path)
        return tsr__fail(TSR_EINVAL, "tsr_shard_open: NULL argument");
    *out = NULL;
    tsr_shard_t *s = calloc(1, sizeof *s);
    if (!s)
        return tsr__fail(TSR_ENOMEM, "shard %s: out of memory", path);
    char why[128];
    int fd = tsr__open_regular(path, why, sizeof why);
    if (fd < 0) {
        free(s);
        return tsr__fail(TSR_EIO, "shard %s: cannot open: %s", path, why);
    }
    int rc = load(s, fd, path);
    close(fd);
    if (rc != TSR_OK) {
        tsr_shard_close(s);
        return rc;
    }
    *out = s;
    return TSR_OK;
}

size_t tsr_shard_size(const tsr_shard_t *s)
{
    return s ? s->count : 0;
}

int tsr_shard_width(const tsr_shard_t *s)
{
    return s ? s->width : 0;
}

int32_t tsr_shard_token(const tsr_shard_t *s, size_t i)
{
    if (!s || i >= s->count) {
        tsr__fail(TSR_EINVAL, "tsr_shard_token: token %zu of a shard of %zu", i,
                  s ? s->count : 0);
        return -1;
    }
    if (s->width == 2)
        return ((const uint16_t *)s->tokens)[i];
    return (int32_t)((const uint32_t *)s->tokens)[i];
}

const uint16_t *tsr_shard_tokens(const tsr_shard_t *s)
{
    if (!s)
        return NULL;
    if (s->width != 2) {
        tsr__fail(TSR_EINVAL, "tsr_shard_tokens: the shard's tokens are %d bytes wide, not 2 "
                  "(tsr_shard_tokens32 or tsr_shard_token)", s->width);
        return NULL;
    }
    return s->tokens;
}

const uint32_t *tsr_shard_tokens32(const tsr_shard_t *s)
{
    if (!s)
        return NULL;
    if (s->width != 4) {
        tsr__fail(TSR_EINVAL, "tsr_shard_tokens32: the shard's tokens are %d bytes wide, not 4 "
                  "(tsr_shard_tokens or tsr_shard_token)", s->width);
        return NULL;
    }
    return s->tokens;
}

void tsr_shard_close(tsr_shard_t *s)
{
    if (!s)
        return;
    free(s->tokens);
    free(s);
}

/* ---- loader ------------------------------------------------------------- */

struct tsr_loader {
    tsr_shard_t *shard;
    size_t bt;  /* tokens per batch: batch * seq_len */
    size_t pos; /* first token of the next window */
};

int tsr_loader_open(tsr_loader_t **out, const char *path, int batch, int seq_len)
{
    if (!out || !path)
        return tsr__fail(TSR_EINVAL, "tsr_loader_open: NULL argument");
    *out = NULL;
    if (batch <= 0 || seq_len <= 0 || (int64_t)batch * seq_len > INT32_MAX)
        return tsr__fail(TSR_EINVAL, "loader %s: bad batch %d x seq_len %d", path, batch,
                         seq_len);
    tsr_loader_t *l = calloc(1, sizeof *l);
    if (!l)
        return tsr__fail(TSR_ENOMEM, "loader %s: out of memory", path);
    l->bt = (size_t)batch * (size_t)seq_len;
    int rc = tsr_shard_open(&l->shard, path);
    if (rc == TSR_OK && l->shard->count < l->bt + 1)
        rc = tsr__fail(TSR_EINVAL, "loader %s: %zu tokens are fewer than one window of %d x %d "
                       "+ 1", path, l->shard->count, batch, seq_len);
    if (rc != TSR_OK) {
        tsr_loader_close(l);
        return rc;
    }
    *out = l;
    return TSR_OK;
}

int tsr_loader_next(tsr_loader_t *l, int32_t *inputs, int32_t *targets)
{
    if (!l || !inputs || !targets)
        return tsr__fail(TSR_EINVAL, "tsr_loader_next: NULL argument");
    if (l->pos + l->bt + 1 > l->shard->count)
        l->pos = 0;
    if (l->shard->width == 2) {
        const uint16_t *w = (const uint16_t *)l->shard->tokens + l->pos;
        for (size_t i = 0; i < l->bt; i++) {
            inputs[i] = w[i];
            targets[i] = w[i + 1];
        }
    } else { /* every id <= INT32_MAX, checked at open */
        const uint32_t *w = (const uint32_t *)l->shard->tokens + l->pos;
        for (size_t i = 0; i < l->bt; i++) {
            inputs[i] = (int32_t)w[i];
            targets[i] = (int32_t)w[i + 1];
        }
    }
    l->pos += l->bt;
    return TSR_OK;
}

size_t tsr_loader_position(const tsr_loader_t *l)
{
    return l ? l->pos : 0;
}

int tsr_loader_seek(tsr_loader_t *l, size_t position)
{
    if (!l)
        return tsr__fail(TSR_EINVAL, "tsr_loader_seek: NULL loader");
    if (position > l->shard->count)
        return tsr__fail(TSR_EINVAL, "loader: position %zu beyond the shard's %zu tokens",
                         position, l->shard->count);
    l->pos = position;
    return TSR_OK;
}

size_t tsr_loader_batches(const tsr_loader_t *l)
{
    if (!l)
        return 0;
    size_t n = (l->shard->count - 1) / l->bt;
    return n ? n : 1;
}

void tsr_loader_close(tsr_loader_t *l)
{
    if (!l)
        return;
    tsr_shard_close(l->shard);
    free(l);
}
