/* nn/io/safetensors.h — reading and writing safetensors files, and the
 * atomic file writer every format of nn/io uses.
 *
 * File: an 8-byte little-endian header length N, N bytes of JSON
 * {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
 * {str: str}} (padded with spaces to 8-byte alignment), then the data area;
 * offsets are relative to its first byte.
 *
 * The reader validates the whole header at open (sizes, dtypes, offsets in
 * the data area, no overlaps) and reads tensor data with pread on demand, so
 * a checkpoint is never held in memory twice and a file truncated later gives
 * TSR_EIO, not SIGBUS. Writers never leave a partial file at the target path:
 * they write "<path>.tmp.<pid>", fsync and rename, and remove the temporary
 * on failure. Must never abort or print; data is little-endian (the build
 * refuses big-endian hosts).
 */
#ifndef TSR_NN_IO_SAFETENSORS_H
#define TSR_NN_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

/* ---- atomic files ------------------------------------------------------- */

typedef struct tsr__afile {
    int fd;
    char *path, *tmp;
    const char *what; /* names the format in messages ("safetensors") */
} tsr__afile_t;

/* Create the temporary file beside path. TSR_EIO if it cannot be created. */
int tsr__afile_open(tsr__afile_t *af, const char *path, const char *what);
/* Append n bytes; on failure the file is aborted (as by tsr__afile_abort). */
int tsr__afile_write(tsr__afile_t *af, const void *data, size_t n);
/* fsync, close, rename over path (and sync the folder). On failure the
 * temporary is removed and the file at path is left as it was. */
int tsr__afile_commit(tsr__afile_t *af);
/* Close and remove the temporary; safe to call twice. */
void tsr__afile_abort(tsr__afile_t *af);

/* ---- dtypes ------------------------------------------------------------- */

typedef enum tsr__st_dtype {
    TSR__ST_BOOL, TSR__ST_U8, TSR__ST_I8, TSR__ST_F8_E5M2, TSR__ST_F8_E4M3,
    TSR__ST_I16, TSR__ST_U16, TSR__ST_F16, TSR__ST_BF16,
    TSR__ST_I32, TSR__ST_U32, TSR__ST_F32,
    TSR__ST_I64, TSR__ST_U64, TSR__ST_F64,
    TSR__ST_NDTYPES
} tsr__st_dtype_t;

const char *tsr__st_dtype_name(tsr__st_dtype_t d);
size_t tsr__st_dtype_size(tsr__st_dtype_t d);
/* -1 for a name that is not a safetensors dtype. */
int tsr__st_dtype_parse(const char *name);

/* IEEE half / bfloat16 bit patterns to float (exact). */
float tsr__f16_to_f32(uint16_t h);
float tsr__bf16_to_f32(uint16_t h);

/* ---- reader ------------------------------------------------------------- */

#define TSR__ST_MAX_DIMS 8
/* The reference implementation refuses larger headers. */
#define TSR__ST_MAX_HEADER 100000000ull

typedef struct tsr__st_tensor {
    const char *name;
    tsr__st_dtype_t dtype;
    int ndim;
    uint64_t shape[TSR__ST_MAX_DIMS];
    uint64_t numel;
    uint64_t begin, end; /* bytes, relative to the data area */
} tsr__st_tensor_t;

typedef struct tsr__st_reader tsr__st_reader_t;

/* TSR_EIO when the file cannot be opened or read, TSR_EINVAL when it is no
 * valid safetensors file (the message says why), TSR_ENOMEM. */
int tsr__st_open(tsr__st_reader_t **out, const char *path);
void tsr__st_close(tsr__st_reader_t *r);
const char *tsr__st_path(const tsr__st_reader_t *r);

/* Tensors sorted by name; i in [0, count). */
size_t tsr__st_count(const tsr__st_reader_t *r);
const tsr__st_tensor_t *tsr__st_at(const tsr__st_reader_t *r, size_t i);
/* NULL when absent. */
const tsr__st_tensor_t *tsr__st_find(const tsr__st_reader_t *r, const char *name);
/* A "__metadata__" value; NULL when absent. */
const char *tsr__st_metadata(const tsr__st_reader_t *r, const char *key);

/* numel elements of t converted to float32 (from F32, F16, BF16, F64) or to
 * int32 (from any integer dtype, range-checked). TSR_EINVAL when numel
 * differs from the tensor's or the dtype does not convert, TSR_EIO when
 * the data cannot be read. */
int tsr__st_read_f32(tsr__st_reader_t *r, const tsr__st_tensor_t *t, float *out, size_t numel);
int tsr__st_read_i32(tsr__st_reader_t *r, const tsr__st_tensor_t *t, int32_t *out,
                     size_t numel);
/* t's bytes as stored (little-endian, no conversion). TSR_EINVAL when bytes
 * is not t's byte count, TSR_EIO when the data cannot be read. */
int tsr__st_read_raw(tsr__st_reader_t *r, const tsr__st_tensor_t *t, void *out, size_t bytes);

/* ---- writer ------------------------------------------------------------- */

typedef struct tsr__st_writer tsr__st_writer_t;

/* Produces the `bytes` bytes of tensor `index` (in order of addition) into
 * buf at write time, so that tensors need not all be in memory at once.
 * Returns TSR_OK or a status (with its message set) that aborts the write. */
typedef int (*tsr__st_fill_fn)(void *ctx, size_t index, void *buf, size_t bytes);

int tsr__st_writer_create(tsr__st_writer_t **out);
void tsr__st_writer_free(tsr__st_writer_t *w);
/* Add a tensor whose little-endian data is at `data` (not copied: it must
 * stay valid until tsr__st_writer_write). TSR_EINVAL for a duplicate or
 * empty name, "__metadata__", an unknown dtype or too many dims. */
int tsr__st_writer_add(tsr__st_writer_t *w, const char *name, tsr__st_dtype_t dtype, int ndim,
                       const uint64_t *shape, const void *data);
/* The same with the data produced by fill(ctx, index, …) at write time. */
int tsr__st_writer_add_fill(tsr__st_writer_t *w, const char *name, tsr__st_dtype_t dtype,
                            int ndim, const uint64_t *shape, tsr__st_fill_fn fill, void *ctx);
/* A "__metadata__" entry (copied; a repeated key replaces the value). */
int tsr__st_writer_meta(tsr__st_writer_t *w, const char *key, const char *value);
/* Write every tensor, in order of addition, atomically to path. */
int tsr__st_writer_write(tsr__st_writer_t *w, const char *path);

#endif
