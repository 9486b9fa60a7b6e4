/* bench/disk/bench_disk.c — sequential write and read bandwidth of a
 * directory's file system, buffered (page cache) against O_DIRECT through
 * an aligned bounce buffer, for the block sizes the disk tier moves (one
 * tile per copy): the figures behind the disk tier's choice of O_DIRECT
 * (docs/memory.md#the-disk-tier).
 *
 * Buffered writes end with fdatasync (what is timed is the disk, not the
 * cache); buffered reads start after posix_fadvise(DONTNEED) (a cold
 * cache). Every O_DIRECT block is copied through a 4096-aligned bounce
 * buffer from a deliberately misaligned source, as the engine does for a
 * host buffer it cannot hand to the kernel directly.
 *
 * A second table runs the engine's pattern: 1 to 4 threads taking 4 MiB
 * blocks from a shared counter (O_DIRECT, bounce buffers), to choose how
 * many engine threads the disk tier starts.
 *
 * Usage: tessera-bench-disk [DIR] [MiB per run] — prints a table and one
 * JSON line per figure. Must never leave its file behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int full_io(int fd, bool wr, char *buf, size_t n, off_t off)
{
    while (n) {
        ssize_t k = wr ? pwrite(fd, buf, n, off) : pread(fd, buf, n, off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        buf += k;
        n -= (size_t)k;
        off += k;
    }
    return 0;
}

/* MB/s of one pass over total bytes in blocks of bs. */
static double run(const char *path, bool direct, bool wr, size_t bs, size_t total,
                  char *src, char *bounce)
{
    int fd = open(path, (wr ? O_WRONLY : O_RDONLY) | (direct ? O_DIRECT : 0));
    if (fd < 0)
        return -1;
    if (!wr && !direct)
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    double t0 = now();
    int rc = 0;
    for (size_t off = 0; off < total && rc == 0; off += bs) {
        if (direct) {
            if (wr)
                memcpy(bounce, src, bs);
            rc = full_io(fd, wr, bounce, bs, (off_t)off);
            if (!wr)
                memcpy(src, bounce, bs);
        } else {
            rc = full_io(fd, wr, src, bs, (off_t)off);
        }
    }
    if (wr && rc == 0)
        rc = fdatasync(fd);
    double t = now() - t0;
    close(fd);
    return rc == 0 ? (double)total / t / 1e6 : -1;
}

typedef struct par {
    const char *path;
    bool wr;
    size_t bs, total;
    atomic_size_t next;
    atomic_int fails;
} par_t;

static void *par_worker(void *arg)
{
    par_t *p = arg;
    int fd = open(p->path, (p->wr ? O_WRONLY : O_RDONLY) | O_DIRECT);
    char *src = malloc(p->bs + 64), *bounce = aligned_alloc(4096, p->bs);
    if (fd < 0 || !src || !bounce) {
        atomic_fetch_add(&p->fails, 1);
    } else {
        memset(src, 0x33, p->bs + 64);
        for (;;) {
            size_t off = atomic_fetch_add(&p->next, p->bs);
            if (off >= p->total)
                break;
            if (p->wr)
                memcpy(bounce, src + 16, p->bs);
            if (full_io(fd, p->wr, bounce, p->bs, (off_t)off) != 0)
                atomic_fetch_add(&p->fails, 1);
            if (!p->wr)
                memcpy(src + 16, bounce, p->bs);
        }
    }
    if (fd >= 0)
        close(fd);
    free(src);
    free(bounce);
    return NULL;
}

/* MB/s of nth threads sharing one pass (O_DIRECT; a write pass ends with
 * fdatasync). */
static double run_par(const char *path, bool wr, int nth, size_t bs, size_t total)
{
    par_t p = {.path = path, .wr = wr, .bs = bs, .total = total};
    pthread_t th[8];
    double t0 = now();
    for (int i = 0; i < nth; i++)
        pthread_create(&th[i], NULL, par_worker, &p);
    for (int i = 0; i < nth; i++)
        pthread_join(th[i], NULL);
    if (wr) {
        int fd = open(path, O_WRONLY);
        if (fd < 0 || fdatasync(fd) != 0)
            atomic_fetch_add(&p.fails, 1);
        if (fd >= 0)
            close(fd);
    }
    double t = now() - t0;
    return atomic_load(&p.fails) ? -1 : (double)total / t / 1e6;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    size_t total = (size_t)(argc > 2 ? atol(argv[2]) : 1024) << 20;
    char path[4096];
    snprintf(path, sizeof path, "%s/tessera-bench-disk-XXXXXX", dir);
    int fd = mkstemp(path);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    if (posix_fallocate(fd, 0, (off_t)total) != 0) {
        fprintf(stderr, "%s: cannot preallocate %zu bytes\n", path, total);
        unlink(path);
        return 1;
    }
    close(fd);
    size_t maxbs = (size_t)16 << 20;
    char *raw = malloc(maxbs + 64), *bounce = aligned_alloc(4096, maxbs);
    char *src = raw + 16; /* misaligned, as a host buffer may be */
    memset(raw, 0x5a, maxbs + 64);
    memset(bounce, 0, maxbs);
    size_t sizes[] = {1u << 20, 4u << 20, 16u << 20};
    printf("%-10s %-9s %14s %14s\n", "block_MiB", "mode", "write_MB_s", "read_MB_s");
    for (int i = 0; i < 3; i++)
        for (int d = 0; d < 2; d++) {
            double w = run(path, d, true, sizes[i], total, src, bounce);
            double r = run(path, d, false, sizes[i], total, src, bounce);
            const char *mode = d ? "O_DIRECT" : "buffered";
            printf("%-10zu %-9s %14.0f %14.0f\n", sizes[i] >> 20, mode, w, r);
            printf("{\"bench\":\"disk\",\"block_mib\":%zu,\"mode\":\"%s\",\"write_mb_s\":%.0f,"
                   "\"read_mb_s\":%.0f}\n",
                   sizes[i] >> 20, mode, w, r);
        }
    printf("\n%-8s %-10s %14s %14s\n", "threads", "block_MiB", "write_MB_s", "read_MB_s");
    for (int nth = 1; nth <= 4; nth++) {
        double w = run_par(path, true, nth, sizes[1], total);
        double r = run_par(path, false, nth, sizes[1], total);
        printf("%-8d %-10zu %14.0f %14.0f\n", nth, sizes[1] >> 20, w, r);
        printf("{\"bench\":\"disk_threads\",\"threads\":%d,\"block_mib\":%zu,"
               "\"write_mb_s\":%.0f,\"read_mb_s\":%.0f}\n",
               nth, sizes[1] >> 20, w, r);
    }
    unlink(path);
    free(raw);
    free(bounce);
    return 0;
}
