/* runtime/json.c — recursive-descent JSON parser into an arena-allocated tree. */
#include "runtime/json.h"

#include <locale.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"

/* ---- arena: every node and string of a document, freed at once ---------- */

typedef struct block {
    struct block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} block_t;

struct tsr__json_doc {
    tsr__json_t root;
    block_t *blocks;
};

static void *arena_alloc(tsr__json_doc_t *doc, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    block_t *b = doc->blocks;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        b = malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->used = 0, b->cap = cap, b->next = doc->blocks;
        doc->blocks = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

/* ---- parser state ------------------------------------------------------- */

typedef struct {
    const unsigned char *start, *p, *end;
    const char *what;
    tsr__json_doc_t *doc;
    /* children of the containers being parsed, moved into the arena when
     * their container closes so that items[] is contiguous */
    tsr__json_t *stack;
    size_t nstack, capstack;
    int depth;
} parser_t;

static int fail(parser_t *ps, const char *msg)
{
    int line = 1, col = 1;
    for (const unsigned char *q = ps->start; q < ps->p; q++) {
        if (*q == '\n')
            line++, col = 1;
        else
            col++;
    }
    return tsr__fail(TSR_EINVAL, "%s: invalid JSON at line %d, column %d: %s", ps->what, line,
                     col, msg);
}

static int oom(parser_t *ps)
{
    return tsr__fail(TSR_ENOMEM, "%s: out of memory parsing JSON", ps->what);
}

static void skip_ws(parser_t *ps)
{
    while (ps->p < ps->end &&
           (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static int push(parser_t *ps, const tsr__json_t *v)
{
    if (ps->nstack == ps->capstack) {
        size_t cap = ps->capstack ? 2 * ps->capstack : 64;
        tsr__json_t *s = realloc(ps->stack, cap * sizeof *s);
        if (!s)
            return oom(ps);
        ps->stack = s, ps->capstack = cap;
    }
    ps->stack[ps->nstack++] = *v;
    return TSR_OK;
}

/* ---- strings ------------------------------------------------------------ */

static int hex4(const unsigned char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = p[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = v << 4 | d;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(unsigned char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xc0 | cp >> 6);
        o[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xe0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        o[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (unsigned char)(0xf0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
    o[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 if invalid:
 * overlong forms, surrogates and code points above U+10FFFF are rejected. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    size_t len;
    unsigned lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else
        return 0;
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    return len;
}

/* A \u escape at ps->p (after the backslash and 'u'), joined with its low
 * surrogate when it is a high one. */
static int unicode_escape(parser_t *ps, unsigned *cp)
{
    if (ps->end - ps->p < 4 || hex4(ps->p, cp) != 0)
        return fail(ps, "\\u must be followed by four hex digits");
    ps->p += 4;
    if (*cp >= 0xdc00 && *cp <= 0xdfff)
        return fail(ps, "lone low surrogate in \\u escape");
    if (*cp < 0xd800 || *cp > 0xdbff)
        return TSR_OK;
    unsigned lo;
    if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u' ||
        hex4(ps->p + 2, &lo) != 0 || lo < 0xdc00 || lo > 0xdfff)
        return fail(ps, "high surrogate not followed by a low surrogate escape");
    ps->p += 6;
    *cp = 0x10000 + ((*cp - 0xd800) << 10) + (lo - 0xdc00);
    return TSR_OK;
}

static int escape(parser_t *ps, unsigned char *o, size_t *w)
{
    if (ps->p >= ps->end)
        return fail(ps, "unterminated string");
    unsigned char c = *ps->p++;
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *hit = c ? strchr(from, c) : NULL;
    if (hit) {
        o[(*w)++] = (unsigned char)to[hit - from];
        return TSR_OK;
    }
    if (c != 'u') {
        ps->p--;
        return fail(ps, "invalid escape in string");
    }
    unsigned cp = 0;
    int rc = unicode_escape(ps, &cp);
    if (rc == TSR_OK)
        *w += put_utf8(o + *w, cp);
    return rc;
}

/* The string at ps->p (just past the opening quote). Decoded output never
 * exceeds the raw span, so that is what gets allocated. */
static int string(parser_t *ps, const char **out, size_t *len)
{
    const unsigned char *q = ps->p;
    while (q < ps->end && *q != '"')
        q += (*q == '\\' && q + 1 < ps->end) ? 2 : 1;
    if (q >= ps->end)
        return fail(ps, "unterminated string");
    unsigned char *o = arena_alloc(ps->doc, (size_t)(q - ps->p) + 1);
    if (!o)
        return oom(ps);
    size_t w = 0;
    while (*ps->p != '"') {
        unsigned char c = *ps->p;
        if (c == '\\') {
            ps->p++;
            int rc = escape(ps, o, &w);
            if (rc != TSR_OK)
                return rc;
        } else if (c < 0x20) {
            return fail(ps, "control character in string");
        } else {
            size_t n = utf8_len(ps->p, (size_t)(ps->end - ps->p));
            if (n == 0)
                return fail(ps, "invalid UTF-8 in string");
            memcpy(o + w, ps->p, n);
            w += n, ps->p += n;
        }
    }
    ps->p++;
    o[w] = 0;
    *out = (const char *)o, *len = w;
    return TSR_OK;
}

/* ---- numbers ------------------------------------------------------------ */

/* strtod follows the current locale's decimal point; JSON's is always '.' */
static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void c_locale_init(void)
{
    c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

/* strtod needs a NUL-terminated copy: the input buffer may end right here */
static int to_double(parser_t *ps, const unsigned char *s, size_t n, double *d)
{
    char small[64], *buf = n < sizeof small ? small : malloc(n + 1);
    if (!buf)
        return oom(ps);
    memcpy(buf, s, n);
    buf[n] = 0;
    pthread_once(&c_locale_once, c_locale_init);
    *d = c_locale ? strtod_l(buf, NULL, c_locale) : strtod(buf, NULL);
    if (buf != small)
        free(buf);
    return TSR_OK;
}

static size_t digits(const unsigned char *p, const unsigned char *end)
{
    size_t n = 0;
    while (p + n < end && p[n] >= '0' && p[n] <= '9')
        n++;
    return n;
}

static int number(parser_t *ps, tsr__json_t *v)
{
    const unsigned char *s = ps->p, *end = ps->end;
    v->type = TSR__JSON_NUMBER;
    v->neg = *ps->p == '-';
    ps->p += v->neg;
    size_t nint = digits(ps->p, end);
    if (nint == 0)
        return fail(ps, "expected a digit");
    if (nint > 1 && *ps->p == '0')
        return fail(ps, "leading zero in number");
    const unsigned char *ip = ps->p;
    ps->p += nint;
    int frac = 0;
    if (ps->p < end && *ps->p == '.') {
        ps->p++;
        size_t n = digits(ps->p, end);
        if (n == 0)
            return fail(ps, "expected a digit after '.'");
        ps->p += n, frac = 1;
    }
    if (ps->p < end && (*ps->p == 'e' || *ps->p == 'E')) {
        ps->p++;
        if (ps->p < end && (*ps->p == '+' || *ps->p == '-'))
            ps->p++;
        size_t n = digits(ps->p, end);
        if (n == 0)
            return fail(ps, "expected a digit in the exponent");
        ps->p += n, frac = 1;
    }
    v->is_int = !frac;
    for (size_t i = 0; v->is_int && i < nint; i++) {
        uint64_t d = (uint64_t)(ip[i] - '0');
        if (v->mag > (UINT64_MAX - d) / 10)
            v->is_int = 0;
        else
            v->mag = v->mag * 10 + d;
    }
    if (!v->is_int)
        v->mag = 0;
    return to_double(ps, s, (size_t)(ps->p - s), &v->num);
}

/* ---- values ------------------------------------------------------------- */

static int value(parser_t *ps, tsr__json_t *v);

static int key_cmp(const void *a, const void *b)
{
    const tsr__json_t *x = *(const tsr__json_t *const *)a, *y = *(const tsr__json_t *const *)b;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    return c ? c : (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

/* Duplicate keys would make lookups ambiguous (two tensors of one name):
 * sorting pointers keeps the check O(n log n) for encoder.json's 50k keys. */
static int check_duplicates(parser_t *ps, const tsr__json_t *items, size_t n)
{
    if (n < 2)
        return TSR_OK;
    const tsr__json_t **idx = malloc(n * sizeof *idx);
    if (!idx)
        return oom(ps);
    for (size_t i = 0; i < n; i++)
        idx[i] = &items[i];
    qsort(idx, n, sizeof *idx, key_cmp);
    const tsr__json_t *dup = NULL;
    for (size_t i = 1; i < n && !dup; i++)
        if (key_cmp(&idx[i - 1], &idx[i]) == 0)
            dup = idx[i];
    free(idx);
    if (dup)
        return tsr__fail(TSR_EINVAL, "%s: invalid JSON: duplicate key \"%.200s\"", ps->what,
                         dup->key);
    return TSR_OK;
}

/* Move the children pushed since `base` into the arena as v->items. */
static int close_container(parser_t *ps, tsr__json_t *v, size_t base)
{
    v->len = ps->nstack - base;
    if (v->len) {
        tsr__json_t *items = arena_alloc(ps->doc, v->len * sizeof *items);
        if (!items)
            return oom(ps);
        memcpy(items, ps->stack + base, v->len * sizeof *items);
        v->items = items;
    }
    ps->nstack = base;
    return v->type == TSR__JSON_OBJECT ? check_duplicates(ps, v->items, v->len) : TSR_OK;
}

static int member(parser_t *ps, tsr__json_t *child)
{
    if (ps->p >= ps->end || *ps->p != '"')
        return fail(ps, "expected a string key");
    ps->p++;
    int rc = string(ps, &child->key, &child->key_len);
    if (rc != TSR_OK)
        return rc;
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != ':')
        return fail(ps, "expected ':' after an object key");
    ps->p++;
    const char *key = child->key;
    size_t key_len = child->key_len;
    rc = value(ps, child);
    child->key = key, child->key_len = key_len;
    return rc;
}

static int container(parser_t *ps, tsr__json_t *v, int is_object)
{
    char close = is_object ? '}' : ']';
    v->type = is_object ? TSR__JSON_OBJECT : TSR__JSON_ARRAY;
    if (++ps->depth > TSR__JSON_MAX_DEPTH)
        return fail(ps, "nesting too deep");
    size_t base = ps->nstack;
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return TSR_OK;
    }
    for (;;) {
        tsr__json_t child = {0};
        int rc = is_object ? member(ps, &child) : value(ps, &child);
        if (rc == TSR_OK)
            rc = push(ps, &child);
        if (rc != TSR_OK)
            return rc;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            skip_ws(ps);
            continue;
        }
        if (ps->p < ps->end && *ps->p == close)
            break;
        return fail(ps, is_object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    ps->p++;
    ps->depth--;
    return close_container(ps, v, base);
}

static int literal(parser_t *ps, tsr__json_t *v, const char *word, tsr__json_type_t type)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return fail(ps, "unexpected character");
    ps->p += n;
    v->type = type;
    return TSR_OK;
}

static int value(parser_t *ps, tsr__json_t *v)
{
    skip_ws(ps);
    if (ps->p >= ps->end)
        return fail(ps, "unexpected end of input");
    switch (*ps->p) {
    case '{': return container(ps, v, 1);
    case '[': return container(ps, v, 0);
    case '"':
        ps->p++;
        v->type = TSR__JSON_STRING;
        return string(ps, &v->str, &v->len);
    case 't': return literal(ps, v, "true", TSR__JSON_TRUE);
    case 'f': return literal(ps, v, "false", TSR__JSON_FALSE);
    case 'n': return literal(ps, v, "null", TSR__JSON_NULL);
    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9'))
            return number(ps, v);
        return fail(ps, "unexpected character");
    }
}

/* ---- public ------------------------------------------------------------- */

int tsr__json_parse(const char *buf, size_t len, const char *what, tsr__json_doc_t **out)
{
    *out = NULL;
    if (!what)
        what = "JSON";
    if (!buf && len)
        return tsr__fail(TSR_EINVAL, "%s: NULL buffer", what);
    if (len > TSR__JSON_MAX_SIZE)
        return tsr__fail(TSR_EINVAL, "%s: JSON of %zu bytes exceeds the limit of %zu", what, len,
                         TSR__JSON_MAX_SIZE);
    tsr__json_doc_t *doc = calloc(1, sizeof *doc);
    if (!doc)
        return tsr__fail(TSR_ENOMEM, "%s: out of memory parsing JSON", what);
    const unsigned char *b = (const unsigned char *)(buf ? buf : "");
    parser_t ps = {.start = b, .p = b, .end = b + len, .what = what, .doc = doc};
    int rc = value(&ps, &doc->root);
    if (rc == TSR_OK) {
        skip_ws(&ps);
        if (ps.p != ps.end)
            rc = fail(&ps, "trailing characters after the value");
    }
    free(ps.stack);
    if (rc != TSR_OK) {
        tsr__json_free(doc);
        return rc;
    }
    *out = doc;
    return TSR_OK;
}

const tsr__json_t *tsr__json_root(const tsr__json_doc_t *doc)
{
    return doc ? &doc->root : NULL;
}

void tsr__json_free(tsr__json_doc_t *doc)
{
    if (!doc)
        return;
    for (block_t *b = doc->blocks, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(doc);
}

const tsr__json_t *tsr__json_get(const tsr__json_t *obj, const char *key)
{
    if (!obj || obj->type != TSR__JSON_OBJECT || !key)
        return NULL;
    size_t n = strlen(key);
    for (size_t i = 0; i < obj->len; i++)
        if (obj->items[i].key_len == n && memcmp(obj->items[i].key, key, n) == 0)
            return &obj->items[i];
    return NULL;
}

int tsr__json_u64(const tsr__json_t *v, uint64_t *out)
{
    if (!v || v->type != TSR__JSON_NUMBER || !v->is_int || (v->neg && v->mag))
        return -1;
    *out = v->mag;
    return 0;
}

int tsr__json_i64(const tsr__json_t *v, int64_t *out)
{
    if (!v || v->type != TSR__JSON_NUMBER || !v->is_int)
        return -1;
    if (v->neg) {
        if (v->mag > (uint64_t)INT64_MAX + 1)
            return -1;
        *out = v->mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v->mag;
    } else {
        if (v->mag > (uint64_t)INT64_MAX)
            return -1;
        *out = (int64_t)v->mag;
    }
    return 0;
}

const char *tsr__json_type_name(tsr__json_type_t t)
{
    switch (t) {
    case TSR__JSON_NULL: return "null";
    case TSR__JSON_FALSE:
    case TSR__JSON_TRUE: return "boolean";
    case TSR__JSON_NUMBER: return "number";
    case TSR__JSON_STRING: return "string";
    case TSR__JSON_ARRAY: return "array";
    case TSR__JSON_OBJECT: return "object";
    }
    return "?";
}
