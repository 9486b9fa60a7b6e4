/* memory/disk.c — the disk tier (contract: memory/disk.h).
 *
 * One file per node, preallocated and unlinked at once; replicas are
 * ranges of it handed out by the best-fit pool over one chunk (the whole
 * file) and named by an address in a PROT_NONE reservation of the same
 * size, so that a stray dereference faults instead of reading host memory.
 * Copies run on a few engine threads (pread/pwrite loops from a FIFO
 * queue). The file is opened with O_DIRECT where the file system allows
 * it: on this machine it writes faster than the page cache (measured, see
 * docs/memory.md#the-disk-tier), and the page cache would otherwise grow
 * with every tile written, competing with the host's capped memory.
 */
#include "memory/disk.h"
#include "memory/copy_fifo.h"

#include "memory/pool.h"

#include <tessera/tessera.h>

#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* Engine threads: two keep a request at the device while the other copies
 * through its bounce buffer or runs a completion; measured here, two beat
 * one by about a third and three or four add nothing (docs/memory.md). */
#define DISK_THREADS 2
/* Every replica is a multiple of this (O_DIRECT's unit) at an offset that
 * is one. */
#define DISK_ALIGN ((size_t)4096)
/* An engine thread's aligned staging buffer for host buffers O_DIRECT
 * cannot take as they are (unaligned address or length). */
#define DISK_BOUNCE ((size_t)4 << 20)

typedef struct disk {
    int fd;
    bool direct;             /* fd is O_DIRECT */
    char path[4096];         /* the unlinked file's name, for messages */
    char *base;              /* the replicas' addresses: base + offset */
    size_t size;             /* the file's bytes */
    atomic_bool chunk_out;   /* the pool holds the one chunk */
    tsr_pool_t pool;

    tsr_copy_fifo_t q;
    pthread_mutex_t ev_lock; /* the node's copy trace has one writer at a time */
    pthread_t th[DISK_THREADS];
    int nth;

    /* TESSERA_DISK_FAIL: the fail_at-th write (or read) of this node fails */
    long fail_write, fail_read;
    atomic_long nwrite, nread;
} disk_t;

static _Thread_local char alloc_err[160];

static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

/* A message, cut to its buffer (a long directory name shortens it). */
static void msg(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void msg(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

/* ---- the pool's backend: the file as one chunk ------------------------------ */

static void *chunk_alloc(void *ctx, size_t bytes)
{
    disk_t *d = ctx;
    /* (called without the pool's lock, possibly from two threads) */
    if (bytes > d->size || atomic_exchange(&d->chunk_out, true))
        return NULL;
    return d->base;
}

static void chunk_free(void *ctx, void *p, size_t bytes)
{
    (void)p;
    (void)bytes;
    atomic_store(&((disk_t *)ctx)->chunk_out, false);
}

static void *disk_alloc(tsr_node_t *n, size_t size)
{
    disk_t *d = n->impl;
    void *p = tsr_pool_alloc(&d->pool, round_up(size ? size : 1, DISK_ALIGN));
    if (!p)
        msg(alloc_err, sizeof alloc_err, "%s: no free range of %zu bytes in the file",
            d->path, round_up(size, DISK_ALIGN));
    return p;
}

static void disk_free(tsr_node_t *n, void *p, size_t size)
{
    (void)size;
    tsr_pool_free(&((disk_t *)n->impl)->pool, p);
}

static const char *disk_alloc_error(tsr_node_t *n)
{
    (void)n;
    return alloc_err;
}

/* ---- the engine ---------------------------------------------------------------- */

static int disk_copy(tsr_node_t *n, tsr_copy_t *c)
{
    disk_t *d = n->impl;
    tsr__copy_fifo_push(&d->q, c);
    return TSR_OK;
}

/* The disk reaches the host only: an accelerator's data goes through it. */
static bool disk_peer(tsr_node_t *n, const tsr_node_t *other)
{
    (void)n;
    return other->kind == TSR_NODE_KIND_HOST;
}

/* The whole of [buf, buf+len) at off, or -1 with a message in c->err.
 * Short transfers continue; EINTR retries; 0 bytes is an error (a read
 * past the end of the file, or a device that accepts nothing). */
static int full_io(disk_t *d, tsr_copy_t *c, bool wr, char *buf, size_t len, off_t off)
{
    while (len) {
        ssize_t k = wr ? pwrite(d->fd, buf, len, off) : pread(d->fd, buf, len, off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            msg(c->err, sizeof c->err, "%s: %s(offset %lld, %zu bytes): %s", d->path,
                wr ? "pwrite" : "pread", (long long)off, len,
                k < 0 ? strerror(errno) : wr ? "nothing written" : "end of file");
            return -1;
        }
        buf += k;
        len -= (size_t)k;
        off += k;
    }
    return 0;
}

/* One copy between the file and host memory. */
static int run_copy(tsr_node_t *n, disk_t *d, tsr_copy_t *c, char **bounce)
{
    bool wr = c->dst_node == n->id;
    char *host = wr ? (char *)c->src : (char *)c->dst;
    off_t off = (off_t)((wr ? (char *)c->dst : (char *)c->src) - d->base);
    long fail_at = wr ? d->fail_write : d->fail_read;
    long nth = atomic_fetch_add(wr ? &d->nwrite : &d->nread, 1) + 1;
    if (fail_at > 0 && nth == fail_at) {
        msg(c->err, sizeof c->err, "%s: %s(offset %lld, %zu bytes): %s "
            "(TESSERA_DISK_FAIL)", d->path, wr ? "pwrite" : "pread", (long long)off,
            c->size, strerror(EIO));
        return TSR_EIO;
    }
    if (d->direct && !*bounce) {
        *bounce = aligned_alloc(DISK_ALIGN, DISK_BOUNCE);
        if (!*bounce) {
            msg(c->err, sizeof c->err, "%s: no memory for a %zu-byte staging buffer",
                d->path, DISK_BOUNCE);
            return TSR_ENOMEM;
        }
    }
    size_t done = 0;
    while (done < c->size) {
        size_t len = c->size - done;
        char *h = host ? host + done : NULL;
        off_t o = off + (off_t)done;
        if (!d->direct && h) {
            if (full_io(d, c, wr, h, len, o) != 0)
                return TSR_EIO;
            break;
        }
        if (len > DISK_BOUNCE)
            len = DISK_BOUNCE;
        /* O_DIRECT wants an aligned address and length: a host buffer
         * that has them goes as it is, anything else through the bounce
         * buffer (the replica's range is rounded up, so the padded tail
         * stays inside it). No host buffer: zeros. */
        bool as_is = h && ((uintptr_t)h % DISK_ALIGN) == 0 && len % DISK_ALIGN == 0;
        size_t io = as_is ? len : round_up(len, d->direct ? DISK_ALIGN : 1);
        char *b = as_is ? h : *bounce;
        if (!b) { /* zeros, buffered: a bounce buffer of our own */
            b = *bounce = calloc(1, DISK_BOUNCE);
            if (!b) {
                msg(c->err, sizeof c->err, "%s: no memory for a staging buffer",
                    d->path);
                return TSR_ENOMEM;
            }
        }
        if (wr && !as_is) {
            if (h)
                memcpy(b, h, len);
            else
                memset(b, 0, len);
            memset(b + len, 0, io - len);
        }
        if (full_io(d, c, wr, b, io, o) != 0)
            return TSR_EIO;
        if (!wr && !as_is && h)
            memcpy(h, b, len);
        done += len;
    }
    return TSR_OK;
}

static void *disk_engine(void *arg)
{
    tsr_node_t *n = arg;
    disk_t *d = n->impl;
    char *bounce = NULL;
    (void)prctl(PR_SET_NAME, "tsr-disk", 0, 0, 0);
    tsr_copy_t *c;
    while ((c = tsr__copy_fifo_pop(&d->q))) {
        c->err[0] = 0;
        c->t_start = tsr__mem_now_ns();
        int rc = run_copy(n, d, c, &bounce);
        c->t_end = tsr__mem_now_ns();
        if (rc == TSR_OK) {
            pthread_mutex_lock(&d->ev_lock);
            tsr__node_copy_event(n, c);
            pthread_mutex_unlock(&d->ev_lock);
        }
        c->done(c->arg, rc);
    }
    free(bounce);
    return NULL;
}

/* ---- lifetime ---------------------------------------------------------------- */

static void disk_free_all(disk_t *d)
{
    if (d->pool.ready)
        tsr_pool_destroy(&d->pool);
    if (d->base)
        munmap(d->base, d->size);
    if (d->fd >= 0)
        close(d->fd);
    tsr__copy_fifo_destroy(&d->q);
    pthread_mutex_destroy(&d->ev_lock);
    free(d);
}

/* Queued copies complete first: the threads leave only an empty queue. */
static void disk_close(tsr_node_t *n)
{
    disk_t *d = n->impl;
    if (!d)
        return;
    tsr__copy_fifo_stop(&d->q);
    for (int i = 0; i < d->nth; i++)
        pthread_join(d->th[i], NULL);
    disk_free_all(d);
    n->impl = NULL;
}

static const tsr_node_ops_t disk_ops = {
    .alloc = disk_alloc,
    .free = disk_free,
    .alloc_error = disk_alloc_error,
    .copy = disk_copy,
    .peer = disk_peer,
    .close = disk_close,
};

/* Files `tessera-<pid>-XXXXXX.disk` of processes that no longer exist: a
 * run killed between creating and unlinking its file left them. */
static void remove_stale(const char *dir)
{
    DIR *dh = opendir(dir);
    if (!dh)
        return;
    struct dirent *de;
    while ((de = readdir(dh))) {
        int pid = 0, len = 0;
        char tail[16];
        if (sscanf(de->d_name, "tessera-%d-%6[A-Za-z0-9].disk%n", &pid, tail, &len) != 2 ||
            len != (int)strlen(de->d_name) || pid <= 0 || pid == (int)getpid())
            continue;
        if (kill(pid, 0) == -1 && errno == ESRCH)
            (void)unlinkat(dirfd(dh), de->d_name, 0);
    }
    closedir(dh);
}

/* TESSERA_DISK_FAIL=write:K or read:K (a test switch). */
static int parse_fail(disk_t *d, char *err, size_t errlen)
{
    const char *s = getenv("TESSERA_DISK_FAIL");
    if (!s || !*s)
        return TSR_OK;
    char op[8];
    long k = 0;
    char extra;
    if (sscanf(s, "%7[a-z]:%ld%c", op, &k, &extra) != 2 || k < 1 ||
        (strcmp(op, "write") != 0 && strcmp(op, "read") != 0)) {
        msg(err, errlen, "TESSERA_DISK_FAIL=%s: expected write:K or read:K (K >= 1)", s);
        return TSR_EINVAL;
    }
    if (op[0] == 'w')
        d->fail_write = k;
    else
        d->fail_read = k;
    return TSR_OK;
}

int tsr__disk_node_open(tsr_node_t *n, const char *dir, size_t capacity, char *err,
                        size_t errlen)
{
    struct stat st;
    if (!dir || !*dir || stat(dir, &st) != 0) {
        msg(err, errlen, "disk tier: directory '%s': %s", dir ? dir : "",
            dir && *dir ? strerror(errno) : "empty name");
        return TSR_EINVAL;
    }
    if (!S_ISDIR(st.st_mode) || access(dir, W_OK | X_OK) != 0) {
        msg(err, errlen, "disk tier: '%s' is not a writable directory", dir);
        return TSR_EINVAL;
    }
    disk_t *d = calloc(1, sizeof *d);
    if (!d) {
        msg(err, errlen, "disk tier: out of memory");
        return TSR_ENOMEM;
    }
    d->fd = -1;
    tsr__copy_fifo_init(&d->q);
    pthread_mutex_init(&d->ev_lock, NULL);
    int rc = parse_fail(d, err, errlen);
    if (rc != TSR_OK) {
        disk_free_all(d);
        return rc;
    }
    remove_stale(dir);

    struct statvfs vfs;
    if (statvfs(dir, &vfs) != 0) {
        msg(err, errlen, "disk tier: statvfs('%s'): %s", dir, strerror(errno));
        disk_free_all(d);
        return TSR_EDEVICE;
    }
    size_t avail = (size_t)vfs.f_bavail * (size_t)vfs.f_frsize;
    size_t want = capacity ? capacity : avail / 2;
    want = want / DISK_ALIGN * DISK_ALIGN;
    if (capacity > avail || want == 0) {
        msg(err, errlen, "disk tier in '%s': %zu bytes asked for, %zu free", dir,
            capacity ? capacity : want, avail);
        disk_free_all(d);
        return TSR_ENOMEM;
    }

    /* Created under a name that says whose it is, unlinked at once: the
     * kernel frees the blocks when the last descriptor goes, even after
     * kill -9; a crash between the two calls leaves a name that the next
     * open removes (remove_stale). */
    snprintf(d->path, sizeof d->path, "%s/tessera-%d-XXXXXX.disk", dir, (int)getpid());
    d->fd = mkostemps(d->path, 5, O_CLOEXEC);
    if (d->fd < 0) {
        msg(err, errlen, "disk tier: mkostemps('%s'): %s", d->path, strerror(errno));
        disk_free_all(d);
        return TSR_EDEVICE;
    }
    (void)unlink(d->path);
    int fl = fcntl(d->fd, F_GETFL);
    d->direct = fl >= 0 && fcntl(d->fd, F_SETFL, fl | O_DIRECT) == 0;
    d->size = want;
    int e = posix_fallocate(d->fd, 0, (off_t)want);
    if (e != 0) {
        msg(err, errlen, "disk tier: posix_fallocate('%s', %zu bytes): %s", d->path,
            want, strerror(e));
        disk_free_all(d);
        return e == ENOSPC ? TSR_ENOMEM : TSR_EDEVICE;
    }
    void *base = mmap(NULL, want, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                      0);
    if (base == MAP_FAILED) {
        msg(err, errlen, "disk tier: mmap(%zu bytes of address space): %s", want,
            strerror(errno));
        disk_free_all(d);
        return TSR_ENOMEM;
    }
    d->base = base;
    rc = tsr_pool_init(&d->pool, want, chunk_alloc, chunk_free, d);
    if (rc != TSR_OK) {
        msg(err, errlen, "disk tier: cannot set up its allocator");
        disk_free_all(d);
        return rc;
    }

    n->kind = TSR_NODE_KIND_DISK;
    n->index = 0;
    snprintf(n->name, sizeof n->name, "disk");
    n->ops = &disk_ops;
    n->impl = d;
    n->capacity = want;
    for (int i = 0; i < DISK_THREADS; i++) {
        if (pthread_create(&d->th[i], NULL, disk_engine, n) != 0) {
            disk_close(n);
            n->ops = NULL;
            msg(err, errlen, "disk tier: cannot start its I/O threads");
            return TSR_ENOMEM;
        }
        d->nth++;
    }
    return TSR_OK;
}
