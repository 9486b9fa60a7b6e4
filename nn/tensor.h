/* nn/tensor.h — tiled 2-D tensors: a shape, a tile shape and the grid of
 * runtime handles that hold the tiles.
 *
 * Memory order is column-major everywhere (BLAS's): element (i, j) of a
 * tensor is row i, column j; tile (a, b) covers rows [a*tile_rows, …) and
 * columns [b*tile_cols, …), is stored contiguously with ld = its own row
 * count, and is smaller at the last tile row or column when the shape is not
 * a multiple of the tile shape. Activations are (features, tokens): token t's
 * features are contiguous, which is PyTorch's row-major (tokens, features).
 * Elements are 4 bytes (fp32, or int32 for token ids), or 2 bytes for the
 * bf16 tensors of mixed precision (tsr__tensor_init_bf16: uint16_t bit
 * patterns, kernels/convert.h), which only the bf16 operations of nn/ops.h
 * read or write.
 *
 * A tensor must never be touched by the host while tasks use it except
 * through tsr__tensor_read/write, which acquire each tile in program order.
 */
#ifndef TSR_NN_TENSOR_H
#define TSR_NN_TENSOR_H

#include <stddef.h>

#include <tessera/tessera.h>

typedef struct tsr_tensor {
    int rows, cols;            /* shape */
    int tile_rows, tile_cols;  /* tile shape (edge tiles may be smaller) */
    int grid_rows, grid_cols;  /* number of tiles along each axis */
    tsr_handle_t *tiles;       /* tile (a, b) at tiles[a + b * grid_rows] */
    int elem_bytes;            /* 4 (fp32, int32) or 2 (bf16) */
    int redux;                 /* 1: the ops accumulate into it in TSR_REDUX
                                  (tsr__op_set_redux), else TSR_COMMUTE */
} tsr_tensor_t;

/* The most tiles one tensor may have: each is a runtime handle with its
 * own host bookkeeping, so a grid beyond this is a tiling mistake. */
#define TSR_TENSOR_MAX_TILES (1 << 22)

/* Handles allocated by the runtime where first used (zeros until written).
 * TSR_EINVAL for non-positive sizes or more than TSR_TENSOR_MAX_TILES tiles. */
int tsr__tensor_init(tsr_tensor_t *t, int rows, int cols, int tile_rows, int tile_cols);
/* The same with bf16 (2-byte) elements. */
int tsr__tensor_init_bf16(tsr_tensor_t *t, int rows, int cols, int tile_rows, int tile_cols);
/* Unregister every tile (waits for their tasks); t may be zeroed memory. */
void tsr__tensor_free(tsr_tensor_t *t);
/* Free the grid without touching the tiles: for a tensor whose runtime was
 * shut down (tsr_shutdown unregistered every handle; they are stale). */
void tsr__tensor_forget(tsr_tensor_t *t);

static inline int tsr__tile_m(const tsr_tensor_t *t, int a)
{
    return a < t->grid_rows - 1 ? t->tile_rows : t->rows - a * t->tile_rows;
}
static inline int tsr__tile_n(const tsr_tensor_t *t, int b)
{
    return b < t->grid_cols - 1 ? t->tile_cols : t->cols - b * t->tile_cols;
}
static inline tsr_handle_t tsr__tile(const tsr_tensor_t *t, int a, int b)
{
    return t->tiles[a + (size_t)b * (size_t)t->grid_rows];
}
/* Whether the tensor holds bf16 elements. */
static inline int tsr__tensor_is_bf16(const tsr_tensor_t *t)
{
    return t->elem_bytes == 2;
}
static inline size_t tsr__tensor_numel(const tsr_tensor_t *t)
{
    return (size_t)t->rows * (size_t)t->cols;
}
/* Tile i (column-major over the grid) of t as a tensor of one tile, for the
 * operations of one tile. */
static inline tsr_tensor_t tsr__tensor_tile_view(const tsr_tensor_t *t, size_t i)
{
    tsr_tensor_t v = *t;
    int a = (int)(i % (size_t)t->grid_rows), b = (int)(i / (size_t)t->grid_rows);
    v.rows = v.tile_rows = tsr__tile_m(t, a);
    v.cols = v.tile_cols = tsr__tile_n(t, b);
    v.grid_rows = v.grid_cols = 1;
    v.tiles = &t->tiles[i];
    return v;
}

/* Copy between the tiles and a dense column-major host array of elements
 * of the tensor's size with leading dimension ld >= rows. Ordered after the tasks
 * submitted before (write: also before the tasks submitted after). */
int tsr__tensor_write(tsr_tensor_t *t, const void *src, size_t ld);
int tsr__tensor_read(const tsr_tensor_t *t, void *dst, size_t ld);

/* Column `col` of an fp32 tensor (its rows floats) into out, tile by tile,
 * each acquired for reading (waits for its writers). */
int tsr__tensor_read_column(const tsr_tensor_t *t, int col, float *out);

/* Drop every tile's contents (tsr_handle_invalidate): the memory can be
 * reused, the next reader sees zeros. */
int tsr__tensor_invalidate(const tsr_tensor_t *t);
/* The same for n tensors whose contents no task submitted later will read;
 * TSR_DROP(&a, &b, …) lists them, TSR_DROP_IF(cond, …) when cond holds (a
 * forward that keeps only its input). */
int tsr__tensor_drop(const tsr_tensor_t *const *ts, int n);
#define TSR_DROP(...)                                                                   \
    tsr__tensor_drop((const tsr_tensor_t *const[]){__VA_ARGS__},                        \
                     (int)(sizeof((const tsr_tensor_t *const[]){__VA_ARGS__}) /         \
                           sizeof(void *)))
#define TSR_DROP_IF(cond, ...) ((cond) ? TSR_DROP(__VA_ARGS__) : TSR_OK)

#endif
