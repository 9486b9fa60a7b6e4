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
 * Usage: tessera-bench-disk [DIR] [MiB per run] — prints a table and one
 * JSON line per figure. Must never leave its file behind.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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
    unlink(path);
    free(raw);
    free(bounce);
    return 0;
}
