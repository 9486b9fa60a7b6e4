/* runtime/perfmodel_store.h — the model directory: where the performance
 * models (perfmodel.c) and the bus model (bus.c) are kept between runs,
 * <dir>/<machine key>/, and reading or writing one whole file there.
 *
 * The store knows files, not models: each model formats and parses its own
 * file. Both models depend on the store and not on each other.
 *
 * Must never: write a file in place (a temporary file in the same
 * directory, then a rename, so a reader sees the old file or the new one),
 * return a file larger than TSR_PMSTORE_MAX_FILE, or be opened or closed
 * while another thread reads or writes through it (open and close happen
 * in tsr_init and tsr_shutdown only).
 */
#ifndef TSR_RUNTIME_PERFMODEL_STORE_H
#define TSR_RUNTIME_PERFMODEL_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A model file larger than this is not a model file. */
#define TSR_PMSTORE_MAX_FILE ((size_t)256 << 20)

/* Choose the machine directory under dir (NULL: $XDG_CACHE_HOME/tessera/
 * perfmodels or ~/.cache/tessera/perfmodels; "": keep nothing on disk).
 * Nothing is created until the first write. TSR_EINVAL with a message in
 * err when the path is too long. Opening or closing starts a new
 * generation. */
int tsr__pmstore_open(const char *dir, char *err, size_t errlen);
/* Keep models under <dir>/<key> instead of this machine's key (a
 * simulated platform's name; characters outside [A-Za-z0-9._-] become
 * '_'); NULL or "": this machine's again. Takes effect at the next open. */
void tsr__pmstore_set_machine(const char *key);
/* Forget the directory (a new generation). */
void tsr__pmstore_close(void);
/* <dir>/<machine key>, or "" when nothing is kept on disk. */
const char *tsr__pmstore_dir(void);
/* Counts opens and closes, so that a model derived from one configuration
 * (the bus model's links) knows when it is stale without the store
 * calling it. */
unsigned tsr__pmstore_generation(void);

/* The contents of <machine dir>/name, NUL-terminated and malloc'ed, or
 * NULL: *missing set when there is no such file (not an error), else a
 * message in err. */
char *tsr__pmstore_read(const char *name, bool *missing, char *err, size_t errlen);
/* Write len bytes as <machine dir>/name atomically, creating the
 * directories. 0, or -1 with a message in err. */
int tsr__pmstore_write(const char *name, const char *data, size_t len, char *err,
                       size_t errlen);

/* FNV-1a 64 of n bytes, continuing from h (TSR_FNV0 to start): the machine
 * key here, the codelets' name and footprint hashes in perfmodel.c. */
#define TSR_FNV0 0xcbf29ce484222325ull
uint64_t tsr__fnv1a(uint64_t h, const void *p, size_t n);

#endif
