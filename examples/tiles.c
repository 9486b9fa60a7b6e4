/* tiles.c — see tiles.h. */
#include "tiles.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int tm_alloc(tiled_matrix_t *m, int n, int b, size_t elem)
{
    memset(m, 0, sizeof *m);
    if (n <= 0 || b <= 0 || (elem != 4 && elem != 8))
        return -1;
    if (b > n)
        b = n;
    m->n = n;
    m->b = b;
    m->nt = (n + b - 1) / b;
    m->elem = elem;
    size_t count = (size_t)m->nt * (size_t)m->nt;
    m->tile = calloc(count, sizeof *m->tile);
    if (!m->tile)
        return -1;
    for (int j = 0; j < m->nt; j++)
        for (int i = 0; i < m->nt; i++) {
            size_t bytes = tm_tile_bytes(m, i, j);
            /* aligned_alloc wants a multiple of the alignment */
            bytes = (bytes + 63) & ~(size_t)63;
            void *p = aligned_alloc(64, bytes);
            if (!p) {
                tm_free(m);
                return -1;
            }
            m->tile[(size_t)i + (size_t)j * (size_t)m->nt] = p;
        }
    return 0;
}

void tm_free(tiled_matrix_t *m)
{
    if (m->tile) {
        size_t count = (size_t)m->nt * (size_t)m->nt;
        for (size_t t = 0; t < count; t++)
            free(m->tile[t]);
        free(m->tile);
    }
    memset(m, 0, sizeof *m);
}

/* Copy one tile's columns; to_tile chooses the direction. */
static void copy_tile(const tiled_matrix_t *m, int i, int j, char *full,
                      int to_tile)
{
    int rows = tm_dim(m, i), cols = tm_dim(m, j);
    size_t e = m->elem;
    char *t = tm_tile(m, i, j);
    for (int c = 0; c < cols; c++) {
        size_t col = (size_t)j * (size_t)m->b + (size_t)c;
        char *f = full + (col * (size_t)m->n + (size_t)i * (size_t)m->b) * e;
        char *tc = t + (size_t)c * (size_t)rows * e;
        if (to_tile)
            memcpy(tc, f, (size_t)rows * e);
        else
            memcpy(f, tc, (size_t)rows * e);
    }
}

void tm_from_full(tiled_matrix_t *m, const void *full)
{
    for (int j = 0; j < m->nt; j++)
        for (int i = 0; i < m->nt; i++)
            copy_tile(m, i, j, (char *)(uintptr_t)full, 1);
}

void tm_to_full(const tiled_matrix_t *m, void *full)
{
    for (int j = 0; j < m->nt; j++)
        for (int i = 0; i < m->nt; i++)
            copy_tile(m, i, j, full, 0);
}

void tm_zero(tiled_matrix_t *m)
{
    for (int j = 0; j < m->nt; j++)
        for (int i = 0; i < m->nt; i++)
            memset(tm_tile(m, i, j), 0, tm_tile_bytes(m, i, j));
}

/* The examples keep their own clock so that each stays copyable on its
 * own; the benchmarks use bench_now (bench/bench_util.h), the same clock. */
double tm_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
