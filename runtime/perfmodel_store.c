/* runtime/perfmodel_store.c — the model directory: the machine key, the
 * default location, and whole-file reads and atomic writes for the model
 * files (codelets.txt from perfmodel.c, bus.txt from bus.c). See
 * runtime/perfmodel_store.h and docs/perfmodels.md.
 *
 * Must never: write a file in place, follow what a file means (that is the
 * models' business), or fail open because the directory does not exist yet
 * (it is created at the first write).
 */
#include "runtime/file.h"
#include "runtime/perfmodel_store.h"

#include <tessera/tessera.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct {
    char dir[PATH_MAX];      /* <dir>/<machine key>, "" when nothing is kept */
    atomic_uint generation;  /* opens and closes */
} store;

/* ---- the machine key ------------------------------------------------------ */

uint64_t tsr__fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static char machine_key[128];

/* hostname-<8 hex digits of a hash of the CPU model, the online CPUs and
 * the CUDA devices' names>. */
static void make_machine_key(void)
{
    char host[64] = "";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0])
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = 0;
    for (char *p = host; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_'))
            *p = '_';
    if (host[0] == '.')
        host[0] = '_';

    uint64_t h = TSR_FNV0; /* the key only has to change when the machine does */
    char line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "model name", 10) == 0) {
                char *c = strchr(line, ':');
                if (c)
                    h = tsr__fnv1a(h, c + 1, strlen(c + 1));
                break;
            }
        fclose(f);
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(line, sizeof line, ";cpus=%ld", ncpu);
    h = tsr__fnv1a(h, line, strlen(line));
    int ngpu = tsr_cuda_device_count();
    for (int g = 0; g < ngpu; g++) {
        tsr_device_info_t di;
        if (tsr_cuda_device_info(g, &di) == TSR_OK) {
            snprintf(line, sizeof line, ";cuda%d=%s", g, di.name);
            h = tsr__fnv1a(h, line, strlen(line));
        }
    }
    snprintf(machine_key, sizeof machine_key, "%s-%08x", host,
             (unsigned)(h ^ (h >> 32)));
}

/* A key set in place of this machine's (a simulated platform's name), or
 * "" for this machine's. */
static char key_override[128];

void tsr__pmstore_set_machine(const char *key)
{
    key_override[0] = 0;
    if (!key || !key[0])
        return;
    snprintf(key_override, sizeof key_override, "%s", key);
    for (char *p = key_override; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_'))
            *p = '_';
    if (key_override[0] == '.')
        key_override[0] = '_';
}

/* ---- open and close ------------------------------------------------------- */

int tsr__pmstore_open(const char *dir, char *err, size_t errlen)
{
    char base[PATH_MAX - 256] = "";
    if (dir) {
        if (strlen(dir) >= sizeof base - 160) {
            snprintf(err, errlen, "model directory path too long");
            return TSR_EINVAL;
        }
        snprintf(base, sizeof base, "%s", dir);
    } else {
        const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (x && x[0] == '/' && strlen(x) < sizeof base - 200)
            snprintf(base, sizeof base, "%s/tessera/perfmodels", x);
        else if (home && home[0] && strlen(home) < sizeof base - 200)
            snprintf(base, sizeof base, "%s/.cache/tessera/perfmodels", home);
        /* neither: models live in memory only */
    }
    store.dir[0] = 0;
    if (base[0]) {
        pthread_once(&key_once, make_machine_key);
        snprintf(store.dir, sizeof store.dir, "%s/%s", base,
                 key_override[0] ? key_override : machine_key);
    }
    atomic_fetch_add(&store.generation, 1);
    return TSR_OK;
}

void tsr__pmstore_close(void)
{
    store.dir[0] = 0;
    atomic_fetch_add(&store.generation, 1);
}

const char *tsr__pmstore_dir(void) { return store.dir; }

unsigned tsr__pmstore_generation(void) { return atomic_load(&store.generation); }

/* ---- files ---------------------------------------------------------------- */

/* mkdir -p: every missing directory of path; 0, or -1 with a message. */
static int mkdir_p(const char *path, char *err, size_t errlen)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) {
        snprintf(err, errlen, "%s: path too long", path);
        return -1;
    }
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != 0)
            continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "cannot create %s: %s", p, strerror(errno));
            return -1;
        }
        *s = c;
        if (!c)
            break;
    }
    struct stat st;
    if (stat(p, &st) != 0) {
        snprintf(err, errlen, "cannot create %s: %s", p, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "cannot create %s: not a directory", p);
        return -1;
    }
    return 0;
}

/* Through a temporary file in the same directory and a rename: a reader
 * (another process too) sees the old file or the new one, never half. */
int tsr__pmstore_write(const char *name, const char *data, size_t len, char *err,
                       size_t errlen)
{
    if (mkdir_p(store.dir, err, errlen) != 0)
        return -1;
    char path[PATH_MAX + 64], tmp[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", store.dir, name);
    snprintf(tmp, sizeof tmp, "%s/.%s.XXXXXX", store.dir, name);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create a file in %s: %s", store.dir, strerror(errno));
        return -1;
    }
    (void)fchmod(fd, 0644);
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, data + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            snprintf(err, errlen, "cannot write %s: %s", tmp,
                     w < 0 ? strerror(errno) : "short write");
            close(fd);
            unlink(tmp);
            return -1;
        }
        done += (size_t)w;
    }
    if (close(fd) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Whole files only: models are small, and a truncated or oversized file is
 * refused here rather than half-parsed. */
char *tsr__pmstore_read(const char *name, bool *missing, char *err, size_t errlen)
{
    *missing = false;
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", store.dir, name);
    char why[128];
    FILE *f = tsr__fopen_regular(path, why, sizeof why);
    if (!f) {
        if (errno == ENOENT || errno == ENOTDIR)
            *missing = true;
        else
            snprintf(err, errlen, "%s", why);
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "not a regular file");
        fclose(f);
        return NULL;
    }
    if ((size_t)st.st_size > TSR_PMSTORE_MAX_FILE) {
        snprintf(err, errlen, "larger than %zu MiB", TSR_PMSTORE_MAX_FILE >> 20);
        fclose(f);
        return NULL;
    }
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        snprintf(err, errlen, "out of memory");
        fclose(f);
        return NULL;
    }
    size_t r;
    while (n + 1 < cap && (r = fread(buf + n, 1, cap - 1 - n, f)) > 0)
        n += r;
    if (ferror(f)) {
        snprintf(err, errlen, "%s", strerror(errno));
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    buf[n] = 0;
    if (strlen(buf) != n) {
        snprintf(err, errlen, "contains a NUL byte");
        free(buf);
        return NULL;
    }
    return buf;
}
