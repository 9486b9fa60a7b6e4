/* tests/fuzz/fuzz_json.c — the JSON parser on arbitrary bytes.
 *
 * Input: the bytes of a document (no NUL terminator: the buffer ends where
 * the input does, so ASan sees any read past it; it is freed before the tree
 * is read, so any pointer kept into it is seen too). A parsed document is
 * checked, then written back as JSON by an independent printer here, parsed
 * again and compared node by node: the parser must read its own output as
 * the same tree (strings byte for byte, numbers to the same double).
 */
#include <math.h>

#include "fuzz_util.h"
#include "runtime/json.h"

typedef struct {
    char *s;
    size_t n, cap;
} out_t;

static void put(out_t *o, const void *p, size_t n)
{
    if (o->n + n > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (cap < o->n + n)
            cap *= 2;
        o->s = realloc(o->s, cap);
        FUZZ_CHECK(o->s, "out of memory");
        o->cap = cap;
    }
    memcpy(o->s + o->n, p, n);
    o->n += n;
}

static void put_str(out_t *o, const char *s, size_t n)
{
    put(o, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[8];
        if (c == '"' || c == '\\') {
            e[0] = '\\', e[1] = (char)c;
            put(o, e, 2);
        } else if (c < 0x20) {
            snprintf(e, sizeof e, "\\u%04x", c);
            put(o, e, 6);
        } else
            put(o, &s[i], 1);
    }
    put(o, "\"", 1);
}

static void print(out_t *o, const tsr__json_t *v)
{
    char num[64];
    switch (v->type) {
    case TSR__JSON_NULL: put(o, "null", 4); break;
    case TSR__JSON_FALSE: put(o, "false", 5); break;
    case TSR__JSON_TRUE: put(o, "true", 4); break;
    case TSR__JSON_NUMBER:
        if (v->is_int)
            snprintf(num, sizeof num, "%s%llu", v->neg ? "-" : "", (unsigned long long)v->mag);
        else if (isfinite(v->num))
            snprintf(num, sizeof num, "%.17g", v->num);
        else
            snprintf(num, sizeof num, "%s1e999", v->num < 0 ? "-" : "");
        put(o, num, strlen(num));
        break;
    case TSR__JSON_STRING: put_str(o, v->str, v->len); break;
    case TSR__JSON_ARRAY:
    case TSR__JSON_OBJECT:
        put(o, v->type == TSR__JSON_ARRAY ? "[" : "{", 1);
        for (size_t i = 0; i < v->len; i++) {
            if (i)
                put(o, ",", 1);
            if (v->type == TSR__JSON_OBJECT) {
                put_str(o, v->items[i].key, v->items[i].key_len);
                put(o, ":", 1);
            }
            print(o, &v->items[i]);
        }
        put(o, v->type == TSR__JSON_ARRAY ? "]" : "}", 1);
        break;
    }
}

/* What every node must satisfy, whatever the input. */
static void check(const tsr__json_t *v, int depth)
{
    FUZZ_CHECK(depth <= TSR__JSON_MAX_DEPTH + 1, "depth %d", depth);
    FUZZ_CHECK(strcmp(tsr__json_type_name(v->type), "?") != 0, "type %d", (int)v->type);
    if (v->type == TSR__JSON_STRING)
        FUZZ_CHECK(v->str && v->str[v->len] == 0, "string not NUL-terminated at len %zu", v->len);
    if (v->type == TSR__JSON_NUMBER) {
        uint64_t u;
        int64_t i;
        if (tsr__json_u64(v, &u) == 0)
            FUZZ_CHECK(v->is_int && u == v->mag && (double)u == v->num, "u64 %llu vs %.17g",
                       (unsigned long long)u, v->num);
        if (tsr__json_i64(v, &i) == 0)
            FUZZ_CHECK(v->is_int && (double)i == v->num, "i64 %lld vs %.17g", (long long)i,
                       v->num);
        FUZZ_CHECK(!isnan(v->num), "NaN from a literal");
    }
    if (v->type != TSR__JSON_ARRAY && v->type != TSR__JSON_OBJECT)
        return;
    FUZZ_CHECK(v->len == 0 || v->items, "%zu items, no array", v->len);
    for (size_t i = 0; i < v->len; i++) {
        const tsr__json_t *c = &v->items[i];
        if (v->type == TSR__JSON_OBJECT) {
            FUZZ_CHECK(c->key && c->key[c->key_len] == 0, "key not NUL-terminated");
            /* keys are unique, so a key without a NUL inside finds its own member */
            if (strlen(c->key) == c->key_len)
                FUZZ_CHECK(tsr__json_get(v, c->key) == c, "get(\"%s\") is another member",
                           c->key);
        }
        check(c, depth + 1);
    }
}

static void same(const tsr__json_t *a, const tsr__json_t *b)
{
    FUZZ_CHECK(a->type == b->type, "type %d reparsed as %d", (int)a->type, (int)b->type);
    FUZZ_CHECK(a->len == b->len || a->type == TSR__JSON_NUMBER, "len %zu reparsed as %zu",
               a->len, b->len);
    switch (a->type) {
    case TSR__JSON_NUMBER:
        FUZZ_CHECK(a->num == b->num, "%.17g reparsed as %.17g", a->num, b->num);
        FUZZ_CHECK(!a->is_int || (b->is_int && a->mag == b->mag && a->neg == b->neg),
                   "integer %llu reparsed differently", (unsigned long long)a->mag);
        break;
    case TSR__JSON_STRING:
        FUZZ_CHECK(memcmp(a->str, b->str, a->len) == 0, "string changed");
        break;
    case TSR__JSON_ARRAY:
    case TSR__JSON_OBJECT:
        for (size_t i = 0; i < a->len; i++) {
            if (a->type == TSR__JSON_OBJECT)
                FUZZ_CHECK(a->items[i].key_len == b->items[i].key_len &&
                               memcmp(a->items[i].key, b->items[i].key, a->items[i].key_len) == 0,
                           "key %zu changed", i);
            same(&a->items[i], &b->items[i]);
        }
        break;
    default: break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* parsed from a copy freed right after: a node that still points into
     * the input is a use-after-free under ASan */
    char *copy = malloc(size ? size : 1);
    FUZZ_CHECK(copy, "out of memory");
    memcpy(copy, data, size);
    tsr__json_doc_t *doc = (tsr__json_doc_t *)1;
    fuzz_clear_error();
    int rc = tsr__json_parse(copy, size, "fuzz", &doc);
    free(copy);
    if (rc != TSR_OK) {
        FUZZ_CHECK_REFUSAL(rc);
        FUZZ_CHECK(doc == NULL, "a failed parse left a document");
        return 0;
    }
    const tsr__json_t *root = tsr__json_root(doc);
    check(root, 0);

    out_t o = {0};
    print(&o, root);
    tsr__json_doc_t *again;
    rc = tsr__json_parse(o.s, o.n, "fuzz (printed)", &again);
    FUZZ_CHECK(rc == TSR_OK, "the printed document does not parse: %s", tsr_error_message());
    same(root, tsr__json_root(again));
    tsr__json_free(again);
    free(o.s);
    tsr__json_free(doc);
    return 0;
}
