/* tiles.h — a square matrix cut into square tiles, each tile stored
 * contiguously in column-major order (leading dimension = the tile's row
 * count), the layout the examples and the runtime benchmarks hand to tile
 * tasks. Edge tiles are smaller when the tile size does not divide the order.
 *
 * Plain memory helpers only: this unit must never know about a task runtime,
 * so that the Tessera and the StarPU side of a benchmark share it.
 */
#ifndef TESSERA_EXAMPLES_TILES_H
#define TESSERA_EXAMPLES_TILES_H

#include <stddef.h>

typedef struct tiled_matrix {
    int n;        /* order of the matrix */
    int b;        /* tile size (rows and columns of an interior tile) */
    int nt;       /* tiles per dimension: ceil(n / b) */
    size_t elem;  /* bytes per element (4: float, 8: double) */
    void **tile;  /* nt*nt pointers; tile (i,j) is tile[i + j*nt] */
} tiled_matrix_t;

/* Allocate the tiles (64-byte aligned, uninitialized). Returns 0, or -1 if
 * the arguments are bad or memory is short (nothing is left allocated). */
int tm_alloc(tiled_matrix_t *m, int n, int b, size_t elem);
void tm_free(tiled_matrix_t *m);

/* Rows of tile row i (= columns of tile column i). */
static inline int tm_dim(const tiled_matrix_t *m, int i)
{
    return i < m->nt - 1 ? m->b : m->n - (m->nt - 1) * m->b;
}

static inline void *tm_tile(const tiled_matrix_t *m, int i, int j)
{
    return m->tile[(size_t)i + (size_t)j * (size_t)m->nt];
}

static inline size_t tm_tile_bytes(const tiled_matrix_t *m, int i, int j)
{
    return (size_t)tm_dim(m, i) * (size_t)tm_dim(m, j) * m->elem;
}

/* Copy between the tiles and a full column-major n x n matrix with leading
 * dimension n (elements of size m->elem). */
void tm_from_full(tiled_matrix_t *m, const void *full);
void tm_to_full(const tiled_matrix_t *m, void *full);

/* Zero every tile. */
void tm_zero(tiled_matrix_t *m);

/* Seconds on a monotonic clock. */
double tm_now(void);

#endif
