/* nn/io/strbuf.h — a growing string for the JSON the file writers compose
 * (a safetensors header, a sharded set's index): appends never fail
 * outright; running out of memory sets `oom`, and the writer checks it once
 * at the end.
 *
 * Must never: write past its buffer, or leave s without its terminating
 * NUL once anything was appended.
 */
#ifndef TSR_NN_IO_STRBUF_H
#define TSR_NN_IO_STRBUF_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tsr__sb {
    char *s;         /* NUL-terminated; the caller frees it */
    size_t len, cap;
    int oom;         /* an append could not grow the buffer */
} tsr__sb_t;

static inline void tsr__sb_put(tsr__sb_t *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->s = p, b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

static inline void tsr__sb_cstr(tsr__sb_t *b, const char *s) { tsr__sb_put(b, s, strlen(s)); }

/* s as a JSON string: quotes, backslashes and control characters escaped */
static inline void tsr__sb_json_str(tsr__sb_t *b, const char *s)
{
    tsr__sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char e[8];
        if (c == '"' || c == '\\') {
            e[0] = '\\', e[1] = (char)c;
            tsr__sb_put(b, e, 2);
        } else if (c < 0x20) {
            snprintf(e, sizeof e, "\\u%04x", c);
            tsr__sb_put(b, e, 6);
        } else {
            tsr__sb_put(b, s, 1);
        }
    }
    tsr__sb_put(b, "\"", 1);
}

#endif
