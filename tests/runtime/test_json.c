/* tests/runtime/test_json.c — the JSON parser (runtime/json.c): every
 * value type, string escapes to UTF-8, integers kept exact, and rejection
 * (TSR_EINVAL, nothing leaked) of malformed input; every prefix of a
 * document parsed from a buffer of exactly that size, so ASan catches any
 * read past the end. */
#include <criterion/criterion.h>

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "runtime/json.h"

static tsr__json_doc_t *parse_ok(const char *s)
{
    tsr__json_doc_t *d = NULL;
    int rc = tsr__json_parse(s, strlen(s), "test", &d);
    cr_assert_eq(rc, TSR_OK, "parse %s: %s", s, tsr_error_message());
    cr_assert_not_null(d);
    return d;
}

static void parse_bad(const char *s, size_t n, const char *why)
{
    tsr__json_doc_t *d = (tsr__json_doc_t *)1;
    int rc = tsr__json_parse(s, n, "test", &d);
    cr_assert_eq(rc, TSR_EINVAL, "%s: %.*s parsed (rc %d)", why, (int)n, s, rc);
    cr_assert_null(d);
    cr_assert_not_null(strstr(tsr_error_message(), "test"), "message names the input: %s",
                       tsr_error_message());
}
#define BAD(s, why) parse_bad(s, sizeof(s) - 1, why)

Test(json, scalars_and_containers)
{
    tsr__json_doc_t *d = parse_ok(" {\"a\": [1, -2, 3.5, true, false, null, \"x\"],\n"
                                  "  \"b\": {}, \"c\": [], \"d\": {\"e\": {\"f\": 7}}}\t\r\n");
    const tsr__json_t *r = tsr__json_root(d);
    cr_assert_eq(r->type, TSR__JSON_OBJECT);
    cr_assert_eq(r->len, 4);
    cr_assert_str_eq(r->items[0].key, "a");
    cr_assert_str_eq(r->items[3].key, "d", "members keep file order");
    const tsr__json_t *a = tsr__json_get(r, "a");
    cr_assert_eq(a->type, TSR__JSON_ARRAY);
    cr_assert_eq(a->len, 7);
    int64_t i;
    uint64_t u;
    cr_assert_eq(tsr__json_i64(&a->items[0], &i), 0);
    cr_assert_eq(i, 1);
    cr_assert_eq(tsr__json_i64(&a->items[1], &i), 0);
    cr_assert_eq(i, -2);
    cr_assert_eq(tsr__json_u64(&a->items[1], &u), -1, "negative is no u64");
    cr_assert_eq(tsr__json_i64(&a->items[2], &i), -1, "3.5 is no integer");
    cr_assert_float_eq(a->items[2].num, 3.5, 0);
    cr_assert_eq(a->items[3].type, TSR__JSON_TRUE);
    cr_assert_eq(a->items[4].type, TSR__JSON_FALSE);
    cr_assert_eq(a->items[5].type, TSR__JSON_NULL);
    cr_assert_str_eq(a->items[6].str, "x");
    cr_assert_eq(tsr__json_get(r, "b")->len, 0);
    cr_assert_eq(tsr__json_get(r, "c")->type, TSR__JSON_ARRAY);
    const tsr__json_t *f = tsr__json_get(tsr__json_get(tsr__json_get(r, "d"), "e"), "f");
    cr_assert_not_null(f);
    cr_assert_eq(f->num, 7.0);
    cr_assert_null(tsr__json_get(r, "zz"));
    cr_assert_null(tsr__json_get(a, "a"), "get on an array");
    cr_assert_str_eq(tsr__json_type_name(a->type), "array");
    tsr__json_free(d);

    d = parse_ok("42");
    cr_assert_eq(tsr__json_root(d)->type, TSR__JSON_NUMBER);
    tsr__json_free(d);
    d = parse_ok("\"top\"");
    cr_assert_str_eq(tsr__json_root(d)->str, "top");
    tsr__json_free(d);
}

Test(json, numbers)
{
    tsr__json_doc_t *d = parse_ok("[0, -0, 18446744073709551615, 18446744073709551616, "
                                  "9223372036854775807, -9223372036854775808, 1e3, 1.5E-2, "
                                  "-0.25e+1, 9007199254740993]");
    const tsr__json_t *a = tsr__json_root(d);
    uint64_t u;
    int64_t i;
    cr_assert_eq(tsr__json_u64(&a->items[0], &u), 0);
    cr_assert_eq(u, 0);
    cr_assert_eq(tsr__json_u64(&a->items[1], &u), 0, "-0 is zero");
    cr_assert_eq(tsr__json_u64(&a->items[2], &u), 0);
    cr_assert_eq(u, UINT64_MAX);
    cr_assert_eq(tsr__json_i64(&a->items[2], &i), -1, "above INT64_MAX");
    cr_assert_eq(tsr__json_u64(&a->items[3], &u), -1, "2^64 does not fit");
    cr_assert_float_eq(a->items[3].num, 18446744073709551616.0, 1e4);
    cr_assert_eq(tsr__json_i64(&a->items[4], &i), 0);
    cr_assert_eq(i, INT64_MAX);
    cr_assert_eq(tsr__json_i64(&a->items[5], &i), 0);
    cr_assert_eq(i, INT64_MIN);
    cr_assert_eq(tsr__json_u64(&a->items[6], &u), -1, "1e3 is written as a float");
    cr_assert_eq(a->items[6].num, 1000.0);
    cr_assert_eq(a->items[7].num, 0.015);
    cr_assert_eq(a->items[8].num, -2.5);
    cr_assert_eq(tsr__json_u64(&a->items[9], &u), 0);
    cr_assert_eq(u, 9007199254740993ull, "integers stay exact beyond 2^53");
    tsr__json_free(d);
}

Test(json, decimal_point_ignores_locale)
{
    const char *loc = setlocale(LC_NUMERIC, "de_DE.UTF-8");
    if (!loc)
        loc = setlocale(LC_NUMERIC, "fr_FR.UTF-8");
    if (!loc)
        cr_log_info("no comma-decimal locale installed; checking the C locale only");
    tsr__json_doc_t *d = parse_ok("[2.75]");
    cr_assert_eq(tsr__json_root(d)->items[0].num, 2.75);
    tsr__json_free(d);
    setlocale(LC_NUMERIC, "C");
}

Test(json, string_escapes)
{
    tsr__json_doc_t *d = parse_ok("[\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\", "
                                  "\"\\u0041\\u00e9\\u20ac\", \"\\ud83d\\ude00\", \"a\\u0000b\", "
                                  "\"caf\xc3\xa9 \xe2\x98\x95\", \"\\uDBFF\\uDFFF\"]");
    const tsr__json_t *a = tsr__json_root(d);
    cr_assert_str_eq(a->items[0].str, "\" \\ / \b \f \n \r \t");
    cr_assert_str_eq(a->items[1].str, "A\xc3\xa9\xe2\x82\xac");
    cr_assert_str_eq(a->items[2].str, "\xf0\x9f\x98\x80", "surrogate pair to one code point");
    cr_assert_eq(a->items[3].len, 3, "an escaped NUL is kept");
    cr_assert_eq(memcmp(a->items[3].str, "a\0b", 4), 0);
    cr_assert_str_eq(a->items[4].str, "caf\xc3\xa9 \xe2\x98\x95", "raw UTF-8 passes through");
    cr_assert_str_eq(a->items[5].str, "\xf4\x8f\xbf\xbf", "U+10FFFF");
    tsr__json_free(d);

    d = parse_ok("{\"k\\u00e9y\": 1}");
    cr_assert_not_null(tsr__json_get(tsr__json_root(d), "k\xc3\xa9y"), "keys are decoded too");
    tsr__json_free(d);
}

Test(json, malformed)
{
    BAD("", "empty input");
    BAD("   ", "only whitespace");
    BAD("{", "unclosed object");
    BAD("[1, 2", "unclosed array");
    BAD("[1, 2,]", "trailing comma in an array");
    BAD("{\"a\": 1,}", "trailing comma in an object");
    BAD("{\"a\" 1}", "missing colon");
    BAD("{a: 1}", "unquoted key");
    BAD("{1: 1}", "number key");
    BAD("[1 2]", "missing comma");
    BAD("01", "leading zero");
    BAD("-", "lone minus");
    BAD("1.", "no digit after the point");
    BAD(".5", "no integer part");
    BAD("1e", "empty exponent");
    BAD("+1", "plus sign");
    BAD("tru", "truncated literal");
    BAD("nul", "truncated literal");
    BAD("True", "capitalised literal");
    BAD("NaN", "NaN");
    BAD("\"abc", "unterminated string");
    BAD("\"abc\\", "backslash at the end");
    BAD("\"\\x\"", "unknown escape");
    BAD("\"\\u12\"", "short \\u");
    BAD("\"\\u12g4\"", "bad hex");
    BAD("\"\\ud800\"", "lone high surrogate");
    BAD("\"\\ud800\\u0041\"", "high surrogate with a non-low escape");
    BAD("\"\\udc00\"", "lone low surrogate");
    BAD("\"a\tb\"", "raw tab in a string");
    BAD("\"a\nb\"", "raw newline in a string");
    BAD("\"\xc0\x80\"", "overlong NUL");
    BAD("\"\xed\xa0\x80\"", "UTF-8 surrogate");
    BAD("\"\xf5\x80\x80\x80\"", "above U+10FFFF");
    BAD("\"\xe2\x82\"", "truncated UTF-8");
    BAD("\"\x80\"", "stray continuation byte");
    BAD("1 2", "two values");
    BAD("{} x", "trailing garbage");
    BAD("\xef\xbb\xbf{}", "byte order mark");
    BAD("{\"a\": 1, \"b\": 2, \"a\": 3}", "duplicate key");
    BAD("[\"a\\u0000\"] \0", "NUL after the value");
}

static size_t many_keys(char *buf, size_t cap, const char *last)
{
    size_t w = (size_t)snprintf(buf, cap, "{");
    for (int i = 0; i < 100; i++)
        w += (size_t)snprintf(buf + w, cap - w, "\"k%d\": %d, ", i, i);
    return w + (size_t)snprintf(buf + w, cap - w, "\"%s\": 0}", last);
}

Test(json, duplicate_keys_in_large_objects)
{
    /* past the small-object path: the sort-based check */
    char buf[4096];
    size_t w = many_keys(buf, sizeof buf, "k57");
    parse_bad(buf, w, "duplicate among 101 keys");
    w = many_keys(buf, sizeof buf, "k100");
    tsr__json_doc_t *d = NULL;
    cr_assert_eq(tsr__json_parse(buf, w, "test", &d), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr__json_root(d)->len, 101);
    tsr__json_free(d);
}

Test(json, depth_limit)
{
    char buf[2 * TSR__JSON_MAX_DEPTH + 4];
    for (int depth = TSR__JSON_MAX_DEPTH; depth <= TSR__JSON_MAX_DEPTH + 1; depth++) {
        size_t n = 0;
        for (int i = 0; i < depth; i++)
            buf[n++] = '[';
        for (int i = 0; i < depth; i++)
            buf[n++] = ']';
        tsr__json_doc_t *d = NULL;
        int rc = tsr__json_parse(buf, n, "test", &d);
        if (depth <= TSR__JSON_MAX_DEPTH) {
            cr_assert_eq(rc, TSR_OK, "depth %d: %s", depth, tsr_error_message());
            tsr__json_free(d);
        } else {
            cr_assert_eq(rc, TSR_EINVAL, "depth %d accepted", depth);
            cr_assert_not_null(strstr(tsr_error_message(), "deep"));
        }
    }
}

Test(json, error_position)
{
    tsr__json_doc_t *d;
    cr_assert_eq(tsr__json_parse("{\n  \"a\": x}", 11, "cfg.json", &d), TSR_EINVAL);
    cr_assert_not_null(strstr(tsr_error_message(), "cfg.json"), "%s", tsr_error_message());
    cr_assert_not_null(strstr(tsr_error_message(), "line 2, column 8"), "%s",
                       tsr_error_message());
}

/* Each prefix lives in a heap block of exactly its size: a read past the
 * end is an ASan error, and most prefixes must be rejected. */
Test(json, never_reads_past_the_buffer)
{
    const char *doc = "{\"__metadata__\": {\"format\": \"pt\"}, \"w\\u00e9\": {\"dtype\": \"F32\", "
                      "\"shape\": [2, 3], \"data_offsets\": [0, 24]}, \"s\": \"\\ud83d\\ude00\","
                      " \"n\": -1.25e-3, \"t\": true, \"f\": false, \"z\": null}";
    size_t n = strlen(doc);
    for (size_t len = 0; len <= n; len++) {
        char *b = malloc(len ? len : 1);
        memcpy(b, doc, len);
        tsr__json_doc_t *d = NULL;
        int rc = tsr__json_parse(b, len, "prefix", &d);
        cr_assert_eq(rc, len == n ? TSR_OK : TSR_EINVAL, "prefix of %zu bytes: rc %d", len, rc);
        tsr__json_free(d);
        free(b);
    }
    tsr__json_doc_t *d = NULL;
    cr_assert_eq(tsr__json_parse(NULL, 0, "null", &d), TSR_EINVAL);
}
