/* tests/fuzz/fuzz_util.h — what the fuzz targets share: in-memory files the
 * path-taking readers can open, and a check that stops the run.
 *
 * Must never: hide a failure. A broken invariant aborts (libFuzzer then saves
 * the input as a crash); anything the readers are allowed to refuse is just
 * an error code and the next input.
 */
#ifndef TSR_TESTS_FUZZ_UTIL_H
#define TSR_TESTS_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <tessera/tessera.h>

#include "runtime/error.h"

/* An invariant the reader must keep: print it and abort (a libFuzzer crash). */
#define FUZZ_CHECK(cond, ...)                                                   \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fprintf(stderr, "\n");                                              \
            abort();                                                            \
        }                                                                       \
    } while (0)

/* A failing reader must say why with a status libraries return for bad
 * input, never TSR_OK-with-nothing or an unrelated status. */
#define FUZZ_CHECK_REFUSAL(rc)                                                   \
    do {                                                                         \
        FUZZ_CHECK((rc) == TSR_EINVAL || (rc) == TSR_EIO || (rc) == TSR_ENOMEM,  \
                   "status %d", (rc));                                           \
        FUZZ_CHECK(tsr_error_message()[0] != 0, "a refusal without a message");  \
    } while (0)

/* Empty the thread's message, so that a refusal is seen to set one. */
static inline void fuzz_clear_error(void)
{
    (void)tsr__fail(TSR_OK, "%s", "");
}

/* A file in memory with a path the readers open like any other:
 * /proc/self/fd/N of a memfd, rewritten for each input. */
typedef struct {
    int fd;
    char path[64];
} fuzz_file_t;

static inline void fuzz_file_init(fuzz_file_t *f, const char *name)
{
    f->fd = memfd_create(name, MFD_CLOEXEC);
    FUZZ_CHECK(f->fd >= 0, "memfd_create");
    snprintf(f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
}

static inline void fuzz_file_set(fuzz_file_t *f, const void *data, size_t n)
{
    FUZZ_CHECK(ftruncate(f->fd, 0) == 0, "ftruncate");
    const char *p = data;
    for (size_t off = 0; off < n;) {
        ssize_t w = pwrite(f->fd, p + off, n - off, (off_t)off);
        FUZZ_CHECK(w > 0, "pwrite");
        off += (size_t)w;
    }
}

#endif
