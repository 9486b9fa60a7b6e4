/* tests/nn/io/io_util.h — helpers shared by the nn/io tests: a temporary
 * folder per test, whole-file reads and writes, hand-built safetensors files.
 *
 * Must never: call the code under test (files are built byte by byte here so
 * the reader is checked against the format, not against our writer).
 */
#ifndef TSR_TESTS_NN_IO_UTIL_H
#define TSR_TESTS_NN_IO_UTIL_H

#include <criterion/criterion.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tessera/gpt2.h>

static inline void io_tmpdir(char *dir, size_t n)
{
    const char *base = getenv("TMPDIR");
    snprintf(dir, n, "%s/tsr-io-XXXXXX", base && *base ? base : "/tmp");
    cr_assert_not_null(mkdtemp(dir), "mkdtemp %s", dir);
}

static inline int io_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    chmod(p, 0700); /* a test may have made a folder read-only */
    return remove(p);
}

static inline void io_rmtree(const char *dir)
{
    chmod(dir, 0700);
    nftw(dir, io_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static inline void io_join(char *out, size_t n, const char *dir, const char *name)
{
    snprintf(out, n, "%s/%s", dir, name);
}

static inline void io_write(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot create %s", path);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
}

/* The whole file, NUL-terminated; NULL if it cannot be read. */
static inline char *io_read(const char *path, size_t *n)
{
    if (n)
        *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)sz + 1);
    cr_assert_not_null(b);
    cr_assert_eq(fread(b, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    b[sz] = 0;
    if (n)
        *n = (size_t)sz;
    return b;
}

static inline int io_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* A safetensors file: `hlen` (the 8-byte length as written, so tests can
 * lie), the header text, then the data. */
static inline void io_st_raw(const char *path, uint64_t hlen, const char *header, const void *data,
                             size_t n)
{
    size_t hn = strlen(header);
    unsigned char *b = malloc(8 + hn + n + 1);
    cr_assert_not_null(b);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(hlen >> (8 * i));
    memcpy(b + 8, header, hn);
    if (n)
        memcpy(b + 8 + hn, data, n);
    io_write(path, b, 8 + hn + n);
    free(b);
}

static inline void io_st_file(const char *path, const char *header, const void *data, size_t n)
{
    io_st_raw(path, strlen(header), header, data, n);
}

#endif
