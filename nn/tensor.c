/* nn/tensor.c — tiled tensors: the grid of handles and host copies. */
#include "nn/tensor.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"

static int tensor_init(tsr_tensor_t *t, int rows, int cols, int tile_rows, int tile_cols,
                       int elem_bytes)
{
    memset(t, 0, sizeof *t);
    if (rows <= 0 || cols <= 0 || tile_rows <= 0 || tile_cols <= 0)
        return tsr__fail(TSR_EINVAL, "tensor: shape (%d, %d) with tiles (%d, %d)", rows, cols,
                         tile_rows, tile_cols);
    if (tile_rows > rows)
        tile_rows = rows;
    if (tile_cols > cols)
        tile_cols = cols;
    t->rows = rows;
    t->cols = cols;
    t->elem_bytes = elem_bytes;
    t->tile_rows = tile_rows;
    t->tile_cols = tile_cols;
    /* ceil(rows / tile_rows) without forming rows + tile_rows - 1 (> INT_MAX) */
    t->grid_rows = rows / tile_rows + (rows % tile_rows != 0);
    t->grid_cols = cols / tile_cols + (cols % tile_cols != 0);
    size_t ntiles = (size_t)t->grid_rows * (size_t)t->grid_cols;
    if (ntiles > TSR_TENSOR_MAX_TILES) {
        int grid_rows = t->grid_rows, grid_cols = t->grid_cols;
        memset(t, 0, sizeof *t);
        return tsr__fail(TSR_EINVAL, "tensor: (%d, %d) in tiles (%d, %d) is a grid of %d x %d "
                                     "tiles, more than %d", rows, cols, tile_rows, tile_cols,
                         grid_rows, grid_cols, TSR_TENSOR_MAX_TILES);
    }
    t->tiles = calloc(ntiles, sizeof *t->tiles);
    if (!t->tiles)
        return tsr__fail(TSR_ENOMEM, "tensor: no memory for %zu tile handles", ntiles);
    for (int b = 0; b < t->grid_cols; b++)
        for (int a = 0; a < t->grid_rows; a++) {
            size_t bytes = (size_t)tsr__tile_m(t, a) * (size_t)tsr__tile_n(t, b) * (size_t)elem_bytes;
            int rc = tsr_handle_alloc(&t->tiles[a + (size_t)b * t->grid_rows], bytes);
            if (rc) {
                tsr__tensor_free(t);
                return rc;
            }
        }
    return TSR_OK;
}

int tsr__tensor_init(tsr_tensor_t *t, int rows, int cols, int tile_rows, int tile_cols)
{
    return tensor_init(t, rows, cols, tile_rows, tile_cols, 4);
}

int tsr__tensor_init_bf16(tsr_tensor_t *t, int rows, int cols, int tile_rows, int tile_cols)
{
    return tensor_init(t, rows, cols, tile_rows, tile_cols, 2);
}

void tsr__tensor_free(tsr_tensor_t *t)
{
    if (!t->tiles)
        return;
    size_t ntiles = (size_t)t->grid_rows * (size_t)t->grid_cols;
    for (size_t i = 0; i < ntiles; i++)
        if (t->tiles[i])
            tsr_handle_unregister(t->tiles[i]);
    free(t->tiles);
    memset(t, 0, sizeof *t);
}

void tsr__tensor_forget(tsr_tensor_t *t)
{
    free(t->tiles);
    memset(t, 0, sizeof *t);
}

/* Copy one tile to or from the dense array; `to_tiles` picks the direction. */
static int tensor_copy(const tsr_tensor_t *t, void *dense, size_t ld, int to_tiles)
{
    size_t e = (size_t)t->elem_bytes;
    if (ld < (size_t)t->rows)
        return tsr__fail(TSR_EINVAL, "tensor: leading dimension %zu < %d rows", ld, t->rows);
    for (int b = 0; b < t->grid_cols; b++)
        for (int a = 0; a < t->grid_rows; a++) {
            int m = tsr__tile_m(t, a), n = tsr__tile_n(t, b);
            void *tile;
            int rc = tsr_handle_acquire(tsr__tile(t, a, b), to_tiles ? TSR_W : TSR_R, &tile);
            if (rc)
                return rc;
            char *base = (char *)dense + e * ((size_t)a * t->tile_rows
                                              + (size_t)b * t->tile_cols * ld);
            for (int j = 0; j < n; j++) {
                char *col = base + e * (size_t)j * ld;
                char *tcol = (char *)tile + e * (size_t)j * (size_t)m;
                if (to_tiles)
                    memcpy(tcol, col, e * (size_t)m);
                else
                    memcpy(col, tcol, e * (size_t)m);
            }
            rc = tsr_handle_release(tsr__tile(t, a, b));
            if (rc)
                return rc;
        }
    return TSR_OK;
}

int tsr__tensor_write(tsr_tensor_t *t, const void *src, size_t ld)
{
    return tensor_copy(t, (void *)src, ld, 1);
}

int tsr__tensor_read(const tsr_tensor_t *t, void *dst, size_t ld)
{
    return tensor_copy(t, dst, ld, 0);
}

int tsr__tensor_invalidate(const tsr_tensor_t *t)
{
    size_t ntiles = (size_t)t->grid_rows * (size_t)t->grid_cols;
    for (size_t i = 0; i < ntiles; i++) {
        int rc = tsr_handle_invalidate(t->tiles[i]);
        if (rc)
            return rc;
    }
    return TSR_OK;
}

int tsr__tensor_read_column(const tsr_tensor_t *t, int col, float *out)
{
    int j = col / t->tile_cols, c = col % t->tile_cols;
    for (int v = 0; v < t->grid_rows; v++) {
        void *tile;
        tsr_handle_t h = tsr__tile(t, v, j);
        int rc = tsr_handle_acquire(h, TSR_R, &tile);
        if (rc)
            return rc;
        int nv = tsr__tile_m(t, v);
        memcpy(out + (size_t)v * t->tile_rows, (float *)tile + (size_t)c * nv,
               (size_t)nv * sizeof(float));
        if ((rc = tsr_handle_release(h)))
            return rc;
    }
    return TSR_OK;
}

int tsr__tensor_drop(const tsr_tensor_t *const *ts, int n)
{
    for (int i = 0; i < n; i++) {
        int rc = tsr__tensor_invalidate(ts[i]);
        if (rc)
            return rc;
    }
    return TSR_OK;
}
