/* runtime/json.h — a small strict JSON parser (RFC 8259) for the files
 * Tessera reads: safetensors headers, encoder.json/vocab.json, config.json
 * and platform descriptions (runtime/platform.c).
 *
 * The whole document is parsed into a read-only tree owned by one
 * tsr__json_doc_t; strings are decoded (every escape, \uXXXX surrogate pairs
 * to UTF-8) and NUL-terminated, object members keep their file order.
 * Stricter than the RFC in three ways: duplicate keys in an object, nesting
 * deeper than TSR__JSON_MAX_DEPTH and invalid UTF-8 are errors.
 *
 * It must never read past the buffer it is given (which needs no NUL
 * terminator), never abort, and never keep a pointer into that buffer.
 */
#ifndef TSR_RUNTIME_JSON_H
#define TSR_RUNTIME_JSON_H

#include <stddef.h>
#include <stdint.h>

#define TSR__JSON_MAX_DEPTH 64
#define TSR__JSON_MAX_SIZE ((size_t)1 << 30)

typedef enum tsr__json_type {
    TSR__JSON_NULL,
    TSR__JSON_FALSE,
    TSR__JSON_TRUE,
    TSR__JSON_NUMBER,
    TSR__JSON_STRING,
    TSR__JSON_ARRAY,
    TSR__JSON_OBJECT,
} tsr__json_type_t;

typedef struct tsr__json {
    tsr__json_type_t type;
    size_t len;                     /* string: bytes; array/object: items */
    const char *str;                /* string: decoded UTF-8, NUL-terminated
                                       (may hold NULs before len) */
    const char *key;                /* object member: its decoded key */
    size_t key_len;
    const struct tsr__json *items;  /* array elements / object members */
    double num;                     /* number: nearest double */
    uint64_t mag;                   /* number: |value| when is_int */
    unsigned char is_int;           /* an integer literal that fits 64 bits */
    unsigned char neg;              /* the literal starts with '-' */
} tsr__json_t;

typedef struct tsr__json_doc tsr__json_doc_t;

/* Parse len bytes. `what` names the input in error messages ("safetensors
 * x.st"). TSR_EINVAL for malformed input (with line and column),
 * TSR_ENOMEM. */
int tsr__json_parse(const char *buf, size_t len, const char *what, tsr__json_doc_t **out);
const tsr__json_t *tsr__json_root(const tsr__json_doc_t *doc);
void tsr__json_free(tsr__json_doc_t *doc);

/* The member `key` of an object; NULL when absent or obj is no object. */
const tsr__json_t *tsr__json_get(const tsr__json_t *obj, const char *key);

/* 0 and the value when v is an integer literal in range, else -1. */
int tsr__json_u64(const tsr__json_t *v, uint64_t *out);
int tsr__json_i64(const tsr__json_t *v, int64_t *out);

/* "string", "object", … for error messages. */
const char *tsr__json_type_name(tsr__json_type_t t);

#endif
