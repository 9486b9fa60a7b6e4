/* nn/ops.c — tensor operations: one codelet per tile kernel (CPU and, when
 * built with CUDA, GPU implementations that call kernels/), and the loops
 * over tile grids that submit them; the bf16 operations of mixed precision
 * (bf16 GEMMs, and producers that compute in fp32 and store bf16) last. */
#include "nn/ops.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/convert.h"
#include "kernels/crossentropy.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/gelu.h"
#include "kernels/gemm.h"
#include "kernels/layernorm.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/softmax.h"
#include "kernels/swiglu.h"
#include "runtime/error.h"

#ifdef TSR_HAVE_CUDA
#include <cuda_runtime.h>
#define CUDA_IMPL(f) f
#else
#define CUDA_IMPL(f) NULL
#endif

/* Every codelet has a flops and a bytes estimate (models and the simulator's
 * rate model read them): flops = the floating-point operations its CPU
 * kernel performs (exp, log, sqrt and division counted as one each), bytes =
 * what it reads plus what it writes in the memory it runs on, each tile once
 * (a tile read and written counts twice). A kernel that only moves data
 * has no flops function (NULL: 0 flops, and the history models regress on
 * its bytes instead). */
#define CODELET(var, label, nbuf, cpu, cuda, flops_fn, bytes_fn)              \
    static const tsr_codelet_t var = {.name = label,                          \
                                      .impl = {cpu, CUDA_IMPL(cuda)},        \
                                      .nbuffers = nbuf,                       \
                                      .flops = flops_fn,                      \
                                      .bytes = bytes_fn}

/* A codelet whose CPU implementation runs the call `cpu` and whose CUDA
 * implementation returns the status of the call `cuda`; both see `a` (the
 * argument block as an args_t), `buf` (the tiles) and `e`. */
#define TILE_CODELET(var, label, nbuf, args_t, flops_fn, bytes_fn, cpu, cuda)     \
    static int var##_cpu(void **buf, const void *args, const tsr_exec_t *e)     \
    {                                                                           \
        const args_t *a = args;                                                 \
        (void)a, (void)buf, (void)e;                                            \
        cpu;                                                                    \
        return 0;                                                               \
    }                                                                           \
    CUDA_TWIN(var, args_t, cuda)                                                \
    CODELET(var, label, nbuf, var##_cpu, var##_cuda, flops_fn, bytes_fn)
#ifdef TSR_HAVE_CUDA
#define CUDA_TWIN(var, args_t, cuda)                                            \
    static int var##_cuda(void **buf, const void *args, const tsr_exec_t *e)    \
    {                                                                           \
        const args_t *a = args;                                                 \
        (void)a, (void)buf, (void)e;                                            \
        return cuda;                                                            \
    }
#else
#define CUDA_TWIN(var, args_t, cuda)
#endif

/* Elements of buffer i of a task (every buffer holds 4-byte elements). */
static size_t nelem(const tsr_exec_t *e, int i)
{
    return e->sizes[i] / 4;
}

/* Elements of buffer 0 of a task, for the estimates. */
static double n0(const size_t *sizes)
{
    return (double)(sizes[0] / 4);
}

/* Submit one task: accesses given as (handle, mode) pairs. */
static int submit(const tsr_codelet_t *cl, const void *args, size_t args_size, int n,
                  const tsr_access_t *acc)
{
    tsr_task_desc_t d = {.codelet = cl, .nbuffers = n, .buffers = acc,
                         .args = args, .args_size = args_size};
    return tsr_submit(&d, NULL);
}

#define SUBMIT(cl, args, ...)                                                   \
    submit(&(cl), &(args), sizeof(args),                                        \
           (int)(sizeof((tsr_access_t[]){__VA_ARGS__}) / sizeof(tsr_access_t)), \
           (tsr_access_t[]){__VA_ARGS__})
#define SUBMIT0(cl, ...)                                                        \
    submit(&(cl), NULL, 0,                                                      \
           (int)(sizeof((tsr_access_t[]){__VA_ARGS__}) / sizeof(tsr_access_t)), \
           (tsr_access_t[]){__VA_ARGS__})
#define ACC(h, mode) {(h), (mode)}

/* How the ops accumulate into t: TSR_REDUX where tsr__op_set_redux chose
 * it, else TSR_COMMUTE. */
static tsr_mode_t acc_of(const tsr_tensor_t *t)
{
    return t->redux ? TSR_REDUX : TSR_COMMUTE;
}

static int same_tiling(const tsr_tensor_t *x, const tsr_tensor_t *y, const char *op)
{
    if (x->rows != y->rows || x->cols != y->cols || x->tile_rows != y->tile_rows ||
        x->tile_cols != y->tile_cols)
        return tsr__fail(TSR_EINVAL, "%s: tensors (%d, %d)/(%d, %d) and (%d, %d)/(%d, %d) differ",
                         op, x->rows, x->cols, x->tile_rows, x->tile_cols, y->rows, y->cols,
                         y->tile_rows, y->tile_cols);
    return TSR_OK;
}

/* ---- GEMM ---------------------------------------------------------------- */

typedef tsr__gemm_args_t gemm_args_t;

/* a: op(A) (m, k) stored (m, k) or (k, m); b: op(B) (k, n); c: (m, n), all
 * tiles contiguous (ld = stored rows). */
static double gemm_flops(const void *args, const size_t *sizes)
{
    const gemm_args_t *a = args;
    (void)sizes;
    return 2.0 * a->m * a->n * a->k;
}
/* A and B read, C written (and read unless beta = 0) */
static double gemm_bytes(const void *args, const size_t *sizes)
{
    const gemm_args_t *a = args;
    (void)sizes;
    return 4.0 * ((double)a->m * a->k + (double)a->k * a->n +
                  (a->beta != 0.0f ? 2.0 : 1.0) * a->m * a->n);
}
TILE_CODELET(cl_gemm, "gemm", 3, gemm_args_t, gemm_flops, gemm_bytes,
             (tsr_cpu_gemm(a->ta, a->tb, a->m, a->n, a->k, a->alpha, buf[0],
               a->ta ? a->k : a->m, 0, buf[1], a->tb ? a->n : a->k, 0, a->beta, buf[2], a->m, 0,
               1)),
             (tsr_cuda_gemm(e->cuda_stream, e->cublas_handle,
               e->cuda_fp32 == TSR_CUDA_FP32_STRICT ? TSR_GEMM_FP32 : TSR_GEMM_TF32, a->ta,
               a->tb, a->m, a->n, a->k, a->alpha, buf[0], a->ta ? a->k : a->m, 0, buf[1],
               a->tb ? a->n : a->k, 0, a->beta, buf[2], a->m, 0, 1)));

typedef tsr__gemm_bf16_args_t gemm_bf16_args_t;

static double gemm_bf16_flops(const void *args, const size_t *sizes)
{
    return gemm_flops(&((const gemm_bf16_args_t *)args)->g, sizes);
}
/* A and B read (2 bytes), C written (and read unless beta = 0) in its size */
static double gemm_bf16_bytes(const void *args, const size_t *sizes)
{
    const gemm_bf16_args_t *a = args;
    (void)sizes;
    return 2.0 * ((double)a->g.m * a->g.k + (double)a->g.k * a->g.n) +
           (a->c_bf16 ? 2.0 : 4.0) * (a->g.beta != 0.0f ? 2.0 : 1.0) * a->g.m * a->g.n;
}
/* C (m, n) = alpha op(A) (m, k) op(B) (k, n) + beta C; A, B bf16, fp32 sums */
TILE_CODELET(cl_gemm_bf16, "gemm_bf16", 3, gemm_bf16_args_t, gemm_bf16_flops, gemm_bf16_bytes,
             (tsr_cpu_gemm_bf16(a->g.ta, a->g.tb, a->g.m, a->g.n, a->g.k, a->g.alpha, buf[0],
               a->g.ta ? a->g.k : a->g.m, 0, buf[1], a->g.tb ? a->g.n : a->g.k, 0, a->g.beta,
               buf[2], a->c_bf16, a->g.m, 0, 1)),
             (tsr_cuda_gemm_bf16(e->cuda_stream, e->cublas_handle, a->g.ta, a->g.tb, a->g.m,
               a->g.n, a->g.k, a->g.alpha, buf[0], a->g.ta ? a->g.k : a->g.m, 0, buf[1],
               a->g.tb ? a->g.n : a->g.k, 0, a->g.beta, buf[2], a->c_bf16, a->g.m, 0, 1)));

/* Tiling of op(X) along its rows (axis 0) or columns (axis 1). */
static void op_tiling(const tsr_tensor_t *x, int trans, int axis, int *len, int *tile,
                      int *grid)
{
    int rows_axis = (axis == 0) != (trans != 0);
    *len = rows_axis ? x->rows : x->cols;
    *tile = rows_axis ? x->tile_rows : x->tile_cols;
    *grid = rows_axis ? x->grid_rows : x->grid_cols;
}

static int tiling_match(const tsr_tensor_t *x, int tx, int ax, const tsr_tensor_t *y, int ty,
                        int ay, const char *what)
{
    int l1, t1, g1, l2, t2, g2;
    op_tiling(x, tx, ax, &l1, &t1, &g1);
    op_tiling(y, ty, ay, &l2, &t2, &g2);
    if (l1 != l2 || t1 != t2)
        return tsr__fail(TSR_EINVAL, "gemm: %s: length %d in tiles of %d against %d in tiles of %d",
                         what, l1, t1, l2, t2);
    return TSR_OK;
}

static int check_bias(const tsr_tensor_t *bias, const tsr_tensor_t *x, const char *op);

/* ---- GEMM with a fused epilogue ------------------------------------------
 * One task computes a tile product and what used to follow it as separate
 * tasks (kernels/gemm.h epilogues): the bias, the bias and GELU, the GELU
 * gradient with the bias gradient of its input, or the bias gradient of A
 * beside a weight gradient. The CUDA implementation is one cuBLASLt call;
 * the CPU implementation runs the product and then the epilogue's loop.
 * Buffers: A, B, C (the output D; the GELU output for gemm_bias_gelu), then
 *   gemm_bias:        bias (R)
 *   gemm_bias_gelu:   bias (R), the GELU input (W)
 *   gemm_dgelu:       the GELU input (R)
 *   gemm_dgelu_bgrad: the GELU input (R), the bias gradient (COMMUTE)
 *   gemm_bgrada:      the bias gradient (COMMUTE)
 * Bias gradients are added to (bgrad_accumulate): many tiles sum into one. */
typedef tsr__gemm_ep_args_t gemm_ep_args_t;

static void ep_vectors(const gemm_ep_args_t *a, void **buf, tsr_gemm_epilogue_t *e)
{
    int k = a->kind;
    e->kind = k;
    e->bias = k == TSR_EPI_BIAS || k == TSR_EPI_BIAS_GELU ? buf[3] : NULL;
    e->aux = k == TSR_EPI_BIAS_GELU                          ? buf[4]
             : k == TSR_EPI_DGELU || k == TSR_EPI_DGELU_BGRAD ? buf[3]
                                                              : NULL;
    e->ld_aux = a->g.m;
    e->bgrad = k == TSR_EPI_DGELU_BGRAD ? buf[4] : k == TSR_EPI_BGRADA ? buf[3] : NULL;
    e->bgrad_accumulate = 1;
}

static int gemm_ep_cpu(void **buf, const void *args, const tsr_exec_t *e)
{
    const gemm_ep_args_t *a = args;
    const gemm_args_t *g = &a->g;
    tsr_gemm_epilogue_t ep;
    (void)e;
    ep_vectors(a, buf, &ep);
    int lda = g->ta ? g->k : g->m, ldb = g->tb ? g->n : g->k;
    if (a->ab16)
        return tsr_cpu_gemm_bf16_ep(g->ta, g->tb, g->m, g->n, g->k, g->alpha, buf[0], lda,
                                    buf[1], ldb, g->beta, buf[2], a->c16, g->m, &ep);
    return tsr_cpu_gemm_ep(g->ta, g->tb, g->m, g->n, g->k, g->alpha, buf[0], lda, buf[1], ldb,
                           g->beta, buf[2], g->m, &ep);
}

#ifdef TSR_HAVE_CUDA
static int gemm_ep_cuda(void **buf, const void *args, const tsr_exec_t *e)
{
    const gemm_ep_args_t *a = args;
    const gemm_args_t *g = &a->g;
    tsr_gemm_epilogue_t ep;
    ep_vectors(a, buf, &ep);
    int lda = g->ta ? g->k : g->m, ldb = g->tb ? g->n : g->k;
    if (a->ab16)
        return tsr_cuda_gemm_bf16_ep(e->cuda_stream, e->cublas_handle, g->ta, g->tb, g->m, g->n,
                                     g->k, g->alpha, buf[0], lda, buf[1], ldb, g->beta, buf[2],
                                     a->c16, g->m, &ep);
    return tsr_cuda_gemm_ep(e->cuda_stream, e->cublas_handle,
                            e->cuda_fp32 == TSR_CUDA_FP32_STRICT ? TSR_GEMM_FP32 : TSR_GEMM_TF32,
                            g->ta, g->tb, g->m, g->n, g->k, g->alpha, buf[0], lda, buf[1], ldb,
                            g->beta, buf[2], g->m, &ep);
}
#endif

/* the product's 2mnk, and per element of the (m, n) tile: bias 1, bias and
 * GELU about 10, GELU gradient about 12 and its sum 1; the bias gradient of
 * A (m k additions) */
static double gemm_ep_flops(const void *args, const size_t *sizes)
{
    const gemm_ep_args_t *a = args;
    double mn = (double)a->g.m * a->g.n;
    double per = a->kind == TSR_EPI_BIAS          ? 1.0
                 : a->kind == TSR_EPI_BIAS_GELU   ? 11.0
                 : a->kind == TSR_EPI_DGELU       ? 12.0
                 : a->kind == TSR_EPI_DGELU_BGRAD ? 13.0
                                                  : 0.0;
    double extra = a->kind == TSR_EPI_BGRADA ? (double)a->g.m * a->g.k : 0.0;
    return gemm_flops(&a->g, sizes) + per * mn + extra;
}
/* A and B read; C written (and read unless beta = 0); the vectors read (a
 * bias gradient also written); the GELU input written or read */
static double gemm_ep_bytes(const void *args, const size_t *sizes)
{
    const gemm_ep_args_t *a = args;
    double ab = a->ab16 ? 2.0 : 4.0, cs = a->c16 ? 2.0 : 4.0, m = a->g.m;
    double mn = m * a->g.n;
    double bytes = ab * (m * a->g.k + (double)a->g.k * a->g.n) +
                   cs * (a->g.beta != 0.0f ? 2.0 : 1.0) * mn;
    switch (a->kind) {
    case TSR_EPI_BIAS: bytes += 4.0 * m; break;
    case TSR_EPI_BIAS_GELU: bytes += 4.0 * m + cs * mn; break;
    case TSR_EPI_DGELU: bytes += cs * mn; break;
    case TSR_EPI_DGELU_BGRAD: bytes += cs * mn + 8.0 * m; break;
    case TSR_EPI_BGRADA: bytes += 8.0 * m; break;
    }
    (void)sizes;
    return bytes;
}
CODELET(cl_gemm_bias, "gemm_bias", 4, gemm_ep_cpu, gemm_ep_cuda, gemm_ep_flops, gemm_ep_bytes);
CODELET(cl_gemm_bias_gelu, "gemm_bias_gelu", 5, gemm_ep_cpu, gemm_ep_cuda, gemm_ep_flops,
        gemm_ep_bytes);
CODELET(cl_gemm_dgelu, "gemm_dgelu", 4, gemm_ep_cpu, gemm_ep_cuda, gemm_ep_flops, gemm_ep_bytes);
CODELET(cl_gemm_dgelu_bgrad, "gemm_dgelu_bgrad", 5, gemm_ep_cpu, gemm_ep_cuda, gemm_ep_flops,
        gemm_ep_bytes);
CODELET(cl_gemm_bgrada, "gemm_bgrada", 4, gemm_ep_cpu, gemm_ep_cuda, gemm_ep_flops,
        gemm_ep_bytes);

/* What a tiled GEMM fuses (tsr_gemm_epilogue_t kinds, per task):
 *   TSR_EPI_NONE
 *   TSR_EPI_BIAS        vec: bias (rows of C, 1) tiled like C's rows, added
 *                       by each C tile's first product (p = 0)
 *   TSR_EPI_BIAS_GELU   vec: bias; aux: the GELU input, tiled like C (W);
 *                       C = gelu(aux). Beta 0; over several inner tiles
 *                       the products before the last sum into C and the
 *                       last one adds them (beta 1), the bias, and applies
 *                       the GELU, writing aux: one task less per tile and
 *                       no separate pass (channel tiles cut the inner
 *                       dimension of GPT-2's MLP)
 *   TSR_EPI_DGELU       aux: the GELU input (R); C = op(A) op(B) * gelu'(aux).
 *                       Beta 0; over several inner tiles, by the last
 *                       product as BIAS_GELU's
 *   TSR_EPI_DGELU_BGRAD as DGELU, and vec += the row sums of C (COMMUTE)
 *   TSR_EPI_BGRADA      vec += the row sums of op(A) over the inner
 *                       dimension (COMMUTE), by the tasks of C's first column
 *                       of tiles: each inner tile once. */
typedef struct gemm_fuse {
    int kind;
    const tsr_tensor_t *vec, *aux;
} gemm_fuse_t;

static int gemm_tiles(int transa, int transb, float alpha, const tsr_tensor_t *a,
                      const tsr_tensor_t *b, float beta, tsr_tensor_t *c, int acc_mode,
                      const gemm_fuse_t *fuse)
{
    int rc;
    if ((rc = tiling_match(a, transa, 0, c, 0, 0, "rows of op(A) and C")) ||
        (rc = tiling_match(b, transb, 1, c, 0, 1, "columns of op(B) and C")) ||
        (rc = tiling_match(a, transa, 1, b, transb, 0, "inner dimension")))
        return rc;
    if (acc_mode == TSR_COMMUTE && beta != 1.0f)
        return tsr__fail(TSR_EINVAL, "gemm: a COMMUTE accumulation needs beta = 1");
    /* bf16 A and B: the bf16 GEMM (fp32 sums), C in its own type */
    int ab16 = tsr__tensor_is_bf16(a), bb16 = tsr__tensor_is_bf16(b);
    if (ab16 != bb16 || (tsr__tensor_is_bf16(c) && !ab16))
        return tsr__fail(TSR_EINVAL, "gemm: A %s, B %s, C %s: A and B are both bf16 or both "
                                     "fp32, and C is bf16 only with bf16 A and B",
                         ab16 ? "bf16" : "fp32", bb16 ? "bf16" : "fp32",
                         tsr__tensor_is_bf16(c) ? "bf16" : "fp32");
    int kk, kt, kgrid, kind = fuse ? fuse->kind : TSR_EPI_NONE;
    op_tiling(a, transa, 1, &kk, &kt, &kgrid);
    int whole = kind == TSR_EPI_BIAS_GELU || kind == TSR_EPI_DGELU || kind == TSR_EPI_DGELU_BGRAD;
    if (whole && (beta != 0.0f || acc_mode != TSR_RW))
        return tsr__fail(TSR_EINVAL, "gemm: a GELU epilogue needs beta 0 (%g) and a plain "
                                     "output", (double)beta);
    if (whole && (rc = same_tiling(fuse->aux, c, "gemm epilogue")))
        return rc;
    if (kind != TSR_EPI_NONE && kind != TSR_EPI_DGELU &&
        (rc = check_bias(fuse->vec, c, "gemm epilogue")))
        return rc;
    for (int j = 0; j < c->grid_cols; j++)
        for (int i = 0; i < c->grid_rows; i++)
            for (int p = 0; p < kgrid; p++) {
                gemm_args_t g = {transa, transb, tsr__tile_m(c, i), tsr__tile_n(c, j),
                                 p < kgrid - 1 ? kt : kk - p * kt, alpha,
                                 p == 0 ? beta : 1.0f};
                tsr_handle_t ha = transa ? tsr__tile(a, p, i) : tsr__tile(a, i, p);
                tsr_handle_t hb = transb ? tsr__tile(b, j, p) : tsr__tile(b, p, j);
                tsr_handle_t hc = tsr__tile(c, i, j);
                tsr_mode_t mc = acc_mode == TSR_COMMUTE ? acc_of(c)
                                : g.beta == 0.0f        ? TSR_W
                                                        : TSR_RW;
                int k = kind;
                if ((k == TSR_EPI_BIAS && p != 0) || (k == TSR_EPI_BGRADA && j != 0) ||
                    (whole && p != kgrid - 1)) /* the GELU's: by the last product */
                    k = TSR_EPI_NONE;
                gemm_ep_args_t ge = {g, k, ab16, tsr__tensor_is_bf16(c)};
                switch (k) {
                case TSR_EPI_BIAS:
                    rc = SUBMIT(cl_gemm_bias, ge, ACC(ha, TSR_R), ACC(hb, TSR_R), ACC(hc, mc),
                                ACC(tsr__tile(fuse->vec, i, 0), TSR_R));
                    break;
                case TSR_EPI_BIAS_GELU:
                    rc = SUBMIT(cl_gemm_bias_gelu, ge, ACC(ha, TSR_R), ACC(hb, TSR_R),
                                ACC(hc, mc), ACC(tsr__tile(fuse->vec, i, 0), TSR_R),
                                ACC(tsr__tile(fuse->aux, i, j), TSR_W));
                    break;
                case TSR_EPI_DGELU:
                    rc = SUBMIT(cl_gemm_dgelu, ge, ACC(ha, TSR_R), ACC(hb, TSR_R),
                                ACC(hc, mc), ACC(tsr__tile(fuse->aux, i, j), TSR_R));
                    break;
                case TSR_EPI_DGELU_BGRAD:
                    rc = SUBMIT(cl_gemm_dgelu_bgrad, ge, ACC(ha, TSR_R), ACC(hb, TSR_R),
                                ACC(hc, mc), ACC(tsr__tile(fuse->aux, i, j), TSR_R),
                                ACC(tsr__tile(fuse->vec, i, 0), acc_of(fuse->vec)));
                    break;
                case TSR_EPI_BGRADA:
                    rc = SUBMIT(cl_gemm_bgrada, ge, ACC(ha, TSR_R), ACC(hb, TSR_R), ACC(hc, mc),
                                ACC(tsr__tile(fuse->vec, i, 0), acc_of(fuse->vec)));
                    break;
                default:
                    if (ab16) {
                        gemm_bf16_args_t g16 = {g, tsr__tensor_is_bf16(c)};
                        rc = SUBMIT(cl_gemm_bf16, g16, ACC(ha, TSR_R), ACC(hb, TSR_R),
                                    ACC(hc, mc));
                    } else {
                        rc = SUBMIT(cl_gemm, g, ACC(ha, TSR_R), ACC(hb, TSR_R), ACC(hc, mc));
                    }
                }
                if (rc)
                    return rc;
            }
    return TSR_OK;
}

int tsr__op_gemm(int transa, int transb, float alpha, const tsr_tensor_t *a,
                 const tsr_tensor_t *b, float beta, tsr_tensor_t *c, int acc_mode)
{
    return gemm_tiles(transa, transb, alpha, a, b, beta, c, acc_mode, NULL);
}

/* ---- elementwise ---------------------------------------------------------- */

/* Estimates of the streaming kernels over n = elements of buffer 0. The
 * kernels that only move data (fill, copy, copy_rows, attn_init) have no
 * flops function (NULL: 0 flops), so that their history models keep
 * regressing on bytes. */
#define zero_flops NULL
static double two_n(const void *args, const size_t *sizes) /* axpy, sumsq */
{
    (void)args;
    return 2 * n0(sizes);
}
static double write_n(const void *args, const size_t *sizes) /* fill */
{
    (void)args;
    return (double)sizes[0];
}
static double read_write_n(const void *args, const size_t *sizes) /* copy */
{
    (void)args;
    return 2.0 * (double)sizes[0];
}
static double axpy_bytes(const void *args, const size_t *sizes) /* x read, y read + written */
{
    (void)args;
    return 3.0 * (double)sizes[0];
}

/* x = value                                   x: (n) */
TILE_CODELET(cl_fill, "fill", 1, float, zero_flops, write_n,
             (tsr_cpu_fill(nelem(e, 0), *a, buf[0])),
             (tsr_cuda_fill(e->cuda_stream, nelem(e, 0), *a, buf[0])));

int tsr__op_fill_handle(tsr_handle_t h, float value)
{
    return SUBMIT(cl_fill, value, ACC(h, TSR_W));
}

int tsr__op_fill(tsr_tensor_t *x, float value)
{
    size_t ntiles = (size_t)x->grid_rows * x->grid_cols;
    for (size_t i = 0; i < ntiles; i++) {
        int rc = tsr__op_fill_handle(x->tiles[i], value);
        if (rc)
            return rc;
    }
    return TSR_OK;
}

/* y = x                                       x, y: (n) */
TILE_CODELET(cl_copy, "copy", 2, void, zero_flops, read_write_n,
             (tsr_cpu_copy(nelem(e, 0), buf[0], buf[1])),
             (tsr_cuda_copy(e->cuda_stream, nelem(e, 0), buf[0], buf[1])));

/* One task per tile pair of two tensors tiled alike: (x, y) buffers. */
static int tilewise(const tsr_codelet_t *cl, const tsr_tensor_t *x, tsr_mode_t x_mode,
                    const tsr_tensor_t *y, tsr_mode_t y_mode, const char *op)
{
    int rc = same_tiling(x, y, op);
    size_t ntiles = (size_t)x->grid_rows * x->grid_cols;
    for (size_t i = 0; !rc && i < ntiles; i++)
        rc = SUBMIT0(*cl, ACC(x->tiles[i], x_mode), ACC(y->tiles[i], y_mode));
    return rc;
}

int tsr__op_copy(const tsr_tensor_t *x, tsr_tensor_t *y)
{
    return tilewise(&cl_copy, x, TSR_R, y, TSR_W, "copy");
}

/* y += alpha x                                x, y: (n) */
TILE_CODELET(cl_axpy, "axpy", 2, float, two_n, axpy_bytes,
             (tsr_cpu_axpy(nelem(e, 0), *a, buf[0], buf[1])),
             (tsr_cuda_axpy(e->cuda_stream, nelem(e, 0), *a, buf[0], buf[1])));

/* The reduction of a REDUX tile (tsr__op_set_redux): a worker's
 * accumulator starts at 0; two are summed, dst += src. */
TILE_CODELET(cl_redux_zero, "redux_zero", 1, void, zero_flops, write_n,
             (tsr_cpu_fill(nelem(e, 0), 0.0f, buf[0])),
             (tsr_cuda_fill(e->cuda_stream, nelem(e, 0), 0.0f, buf[0])));
/* dst (n) += src (n): dst buffer 0, src buffer 1 */
static double redux_add_bytes(const void *args, const size_t *sizes)
{
    (void)args;
    return 3.0 * (double)sizes[0];
}
TILE_CODELET(cl_redux_add, "redux_add", 2, void, two_n, redux_add_bytes,
             (tsr_cpu_axpy(nelem(e, 0), 1.0f, buf[1], buf[0])),
             (tsr_cuda_axpy(e->cuda_stream, nelem(e, 0), 1.0f, buf[1], buf[0])));

int tsr__op_set_redux(tsr_tensor_t *t)
{
    if (tsr__tensor_is_bf16(t))
        return tsr__fail(TSR_EINVAL, "set_redux: a bf16 tensor (the sums are fp32)");
    size_t ntiles = (size_t)t->grid_rows * t->grid_cols;
    for (size_t i = 0; i < ntiles; i++)
        TSR_TRY(tsr_handle_set_reduction(t->tiles[i], &cl_redux_zero, &cl_redux_add));
    t->redux = 1;
    return TSR_OK;
}


typedef tsr__slice_args_t slice_args_t;

/* an axpy of a->n elements (not the whole tiles) */
static double slice_flops(const void *args, const size_t *sizes)
{
    (void)sizes;
    return 2.0 * (double)((const slice_args_t *)args)->n;
}
static double slice_bytes(const void *args, const size_t *sizes)
{
    (void)sizes;
    return 12.0 * (double)((const slice_args_t *)args)->n;
}

/* y[yoff + i] += x[xoff + i], i < n: one sequence's rows of a multi-sequence tile */
TILE_CODELET(cl_slice_add, "slice_add", 2, slice_args_t, slice_flops, slice_bytes,
             (tsr_cpu_axpy(a->n, 1.0f, (const float *)buf[0] + a->xoff,
               (float *)buf[1] + a->yoff)),
             (tsr_cuda_axpy(e->cuda_stream, a->n, 1.0f, (const float *)buf[0] + a->xoff,
               (float *)buf[1] + a->yoff)));

typedef tsr__mn_args_t mn_args_t;

/* bias_add: m n additions; b read, x read and written */
static double bias_add_flops(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return (double)a->m * a->n;
}
static double bias_add_bytes(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return 4.0 * (a->m + 2.0 * a->m * a->n);
}
/* bias_grad: m n additions into row sums, then db = db + sum; dy read, db
 * read and written */
static double bias_grad_flops(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return (double)a->m * a->n + 2.0 * a->m;
}
static double bias_grad_bytes(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return 4.0 * ((double)a->m * a->n + 2.0 * a->m);
}

/* x(i, j) += b(i)                             b: (m), x: (m, n) */
TILE_CODELET(cl_bias_add, "bias_add", 2, mn_args_t, bias_add_flops, bias_add_bytes,
             (tsr_cpu_bias_add(0, a->m, a->n, buf[0], buf[1], a->m)),
             (tsr_cuda_bias_add(e->cuda_stream, 0, a->m, a->n, buf[0], buf[1], a->m)));

/* db(i) += sum_j dy(i, j)                     db: (m), dy: (m, n) */
TILE_CODELET(cl_bias_grad, "bias_grad", 2, mn_args_t, bias_grad_flops, bias_grad_bytes,
             (tsr_cpu_sum_axis(0, a->m, a->n, 1.0f, buf[1], a->m, 1.0f, buf[0])),
             (tsr_cuda_sum_axis(e->cuda_stream, 0, a->m, a->n, 1.0f, buf[1], a->m, 1.0f,
               buf[0])));

static int check_bias(const tsr_tensor_t *bias, const tsr_tensor_t *x, const char *op)
{
    if (bias->rows != x->rows || bias->tile_rows != x->tile_rows || bias->cols != 1)
        return tsr__fail(TSR_EINVAL, "%s: bias (%d, %d) in tiles of %d rows for (%d, %d) in %d",
                         op, bias->rows, bias->cols, bias->tile_rows, x->rows, x->cols,
                         x->tile_rows);
    return TSR_OK;
}

/* One task per tile of x with the bias tile of its rows: (bias, x) buffers. */
static int bias_loop(const tsr_codelet_t *cl, const tsr_tensor_t *bias, tsr_mode_t bias_mode,
                     const tsr_tensor_t *x, tsr_mode_t x_mode, const char *op)
{
    int rc = check_bias(bias, x, op);
    for (int j = 0; !rc && j < x->grid_cols; j++)
        for (int i = 0; !rc && i < x->grid_rows; i++) {
            mn_args_t a = {tsr__tile_m(x, i), tsr__tile_n(x, j)};
            rc = SUBMIT(*cl, a, ACC(tsr__tile(bias, i, 0), bias_mode),
                        ACC(tsr__tile(x, i, j), x_mode));
        }
    return rc;
}

int tsr__op_bias_add(const tsr_tensor_t *bias, tsr_tensor_t *x)
{
    return bias_loop(&cl_bias_add, bias, TSR_R, x, TSR_RW, "bias_add");
}

int tsr__op_bias_grad(const tsr_tensor_t *dy, tsr_tensor_t *dbias)
{
    return bias_loop(&cl_bias_grad, dbias, acc_of(dbias), dy, TSR_R, "bias_grad");
}

/* ---- Linear layers --------------------------------------------------------
 * The bias and the GELU ride on the GEMM tasks (gemm_tiles' epilogues): one
 * task per output tile in the forward; in the backward the bias gradient
 * comes from the weight-gradient products of dw's first column of tiles
 * (BGRADA: the row sums of dy over each token tile, COMMUTE into db), and
 * the GELU gradient with its bias gradient from the input-gradient
 * products (the last of each output tile's, where the inner dimension is
 * cut). */

int tsr__op_linear_fwd(const tsr_tensor_t *w, const tsr_tensor_t *b, const tsr_tensor_t *x,
                       float beta, tsr_tensor_t *y)
{
    int rc;
    if (beta != 0.0f && beta != 1.0f)
        return tsr__fail(TSR_EINVAL, "linear_fwd: beta %g is neither 0 nor 1", (double)beta);
    if ((rc = check_bias(b, y, "linear_fwd"))) /* before any task is submitted */
        return rc;
    /* beta 1, the residual form: y + W x + b by each tile's first product */
    gemm_fuse_t f = {TSR_EPI_BIAS, b, NULL};
    return gemm_tiles(OP_N, OP_N, 1.0f, w, x, beta, y, TSR_RW, &f);
}

int tsr__op_linear_gelu_fwd(const tsr_tensor_t *w, const tsr_tensor_t *b, const tsr_tensor_t *x,
                            tsr_tensor_t *pre, tsr_tensor_t *out)
{
    int rc;
    if ((rc = check_bias(b, pre, "linear_gelu_fwd")) ||
        (rc = same_tiling(pre, out, "linear_gelu_fwd")))
        return rc;
    /* the GELU on the (last) product where its input and output share a
     * type */
    if (tsr__tensor_is_bf16(pre) == tsr__tensor_is_bf16(out)) {
        gemm_fuse_t f = {TSR_EPI_BIAS_GELU, b, pre};
        return gemm_tiles(OP_N, OP_N, 1.0f, w, x, 0.0f, out, TSR_RW, &f);
    }
    return (rc = tsr__op_linear_fwd(w, b, x, 0.0f, pre)) ? rc : tsr__op_gelu_fwd(pre, out);
}

/* dx = W^T dy, or with pre its GELU gradient and the bias gradient dbpre
 * of the layer before; dw += dy x^T and db += the row sums of dy (db NULL:
 * none). The products read dy_prod (dy, or its bf16 copy), the bias
 * gradient of the unfused path dy. */
static int linear_bwd(const tsr_tensor_t *w, const tsr_tensor_t *x, const tsr_tensor_t *dy,
                      const tsr_tensor_t *dy_prod, const tsr_tensor_t *pre, tsr_tensor_t *dx,
                      tsr_tensor_t *dw, tsr_tensor_t *db, tsr_tensor_t *dbpre, const char *op)
{
    int rc;
    if ((db && (rc = check_bias(db, dy, op))) || (dbpre && (rc = check_bias(dbpre, dx, op))) ||
        (pre && (rc = same_tiling(pre, dx, op))))
        return rc;
    if (pre) { /* (in, N): the GELU's gradient in the (last) product's task */
        gemm_fuse_t f = {dbpre ? TSR_EPI_DGELU_BGRAD : TSR_EPI_DGELU, dbpre, pre};
        rc = gemm_tiles(OP_T, OP_N, 1.0f, w, dy_prod, 0.0f, dx, TSR_RW, &f);
    } else {
        rc = gemm_tiles(OP_T, OP_N, 1.0f, w, dy_prod, 0.0f, dx, TSR_RW, NULL);
        if (!rc && pre)
            rc = tsr__op_gelu_bwd(pre, dx);
        if (!rc && dbpre)
            rc = tsr__op_bias_grad(dx, dbpre);
    }
    if (rc)
        return rc;
    /* (out, in); with db: the row sums of dy_prod by dw's first tile column */
    gemm_fuse_t f = {db ? TSR_EPI_BGRADA : TSR_EPI_NONE, db, NULL};
    return gemm_tiles(OP_N, OP_T, 1.0f, dy_prod, x, 1.0f, dw, TSR_COMMUTE, &f);
}

int tsr__op_linear_bwd(const tsr_tensor_t *w, const tsr_tensor_t *x, const tsr_tensor_t *dy,
                       tsr_tensor_t *dx, tsr_tensor_t *dw, tsr_tensor_t *db)
{
    return linear_bwd(w, x, dy, dy, NULL, dx, dw, db, NULL, "linear_bwd");
}

int tsr__op_linear_gelu_bwd(const tsr_tensor_t *w, const tsr_tensor_t *x, const tsr_tensor_t *dy,
                            const tsr_tensor_t *pre, tsr_tensor_t *dx, tsr_tensor_t *dw,
                            tsr_tensor_t *db, tsr_tensor_t *dbpre)
{
    return linear_bwd(w, x, dy, dy, pre, dx, dw, db, dbpre, "linear_gelu_bwd");
}

/* Rows [src_off, src_off + nrows) of each of the ncols columns of src (src_rows
 * rows) go to rows [dst_off, …) of dst (dst_rows rows). */
typedef tsr__rows_args_t rows_args_t;

/* nrows × ncols elements read and written */
static double rows_bytes(const void *args, const size_t *sizes)
{
    const rows_args_t *a = args;
    (void)sizes;
    return 8.0 * a->nrows * a->ncols;
}

static int rows_cpu(void **buf, const void *args, const tsr_exec_t *e)
{
    const rows_args_t *a = args;
    const float *src = buf[0];
    float *dst = buf[1];
    (void)e;
    for (int j = 0; j < a->ncols; j++)
        memcpy(dst + (size_t)j * a->dst_rows + a->dst_off,
               src + (size_t)j * a->src_rows + a->src_off, (size_t)a->nrows * sizeof(float));
    return 0;
}
#ifdef TSR_HAVE_CUDA
static int rows_cuda(void **buf, const void *args, const tsr_exec_t *e)
{
    const rows_args_t *a = args;
    return (int)cudaMemcpy2DAsync((float *)buf[1] + a->dst_off, (size_t)a->dst_rows * 4,
                                  (const float *)buf[0] + a->src_off, (size_t)a->src_rows * 4,
                                  (size_t)a->nrows * 4, (size_t)a->ncols,
                                  cudaMemcpyDeviceToDevice, (cudaStream_t)e->cuda_stream);
}
#endif
CODELET(cl_rows, "copy_rows", 2, rows_cpu, rows_cuda, zero_flops, rows_bytes);

/* Regrouping moves a coarse tile's rows to or from its fine tiles in one
 * task per coarse tile (and column), not one per fine tile: a GPU pays a
 * launch and a host round trip per task, and the fine tiles of one merge,
 * each writing part of the coarse tile, were a chain of RW tasks.
 * Buffer 0 is the coarse tile, buffers 1..k the fine ones. */
typedef tsr__regroup_args_t regroup_args_t;

static double regroup_bytes(const void *args, const size_t *sizes)
{
    const regroup_args_t *a = args;
    (void)sizes;
    double rows = 0;
    for (int i = 0; i < a->k; i++)
        rows += a->rows[i];
    return 8.0 * rows * a->ncols;
}

static int regroup_cpu(void **buf, const void *args, const tsr_exec_t *e)
{
    const regroup_args_t *a = args;
    (void)e;
    float *coarse = buf[0];
    for (int i = 0; i < a->k; i++) {
        float *fine = buf[1 + i];
        size_t n = (size_t)a->rows[i] * sizeof(float);
        for (int j = 0; j < a->ncols; j++) {
            float *c = coarse + (size_t)j * a->coarse_rows + a->off[i];
            float *f = fine + (size_t)j * a->rows[i];
            if (a->split)
                memcpy(f, c, n);
            else
                memcpy(c, f, n);
        }
    }
    return 0;
}
#ifdef TSR_HAVE_CUDA
static int regroup_cuda(void **buf, const void *args, const tsr_exec_t *e)
{
    const regroup_args_t *a = args;
    float *coarse = buf[0];
    size_t cpitch = (size_t)a->coarse_rows * 4;
    for (int i = 0; i < a->k; i++) {
        size_t fpitch = (size_t)a->rows[i] * 4;
        float *c = coarse + a->off[i], *f = buf[1 + i];
        cudaError_t rc = a->split
            ? cudaMemcpy2DAsync(f, fpitch, c, cpitch, fpitch, (size_t)a->ncols,
                                cudaMemcpyDeviceToDevice, (cudaStream_t)e->cuda_stream)
            : cudaMemcpy2DAsync(c, cpitch, f, fpitch, fpitch, (size_t)a->ncols,
                                cudaMemcpyDeviceToDevice, (cudaStream_t)e->cuda_stream);
        if (rc != cudaSuccess)
            return (int)rc;
    }
    return 0;
}
#endif
/* one codelet per buffer count: cl_regroup[k] moves k fine tiles */
#define REGROUP_CL(k) CODELET(cl_regroup_##k, "regroup", (k) + 1, regroup_cpu, regroup_cuda, \
                              zero_flops, regroup_bytes)
REGROUP_CL(1); REGROUP_CL(2); REGROUP_CL(3); REGROUP_CL(4); REGROUP_CL(5);
REGROUP_CL(6); REGROUP_CL(7); REGROUP_CL(8); REGROUP_CL(9); REGROUP_CL(10);
REGROUP_CL(11); REGROUP_CL(12); REGROUP_CL(13); REGROUP_CL(14); REGROUP_CL(15);
_Static_assert(TSR_REGROUP_MAX == 15, "one regroup codelet per fine-tile count");
static const tsr_codelet_t *const cl_regroup[TSR_REGROUP_MAX + 1] = {
    NULL,          &cl_regroup_1,  &cl_regroup_2,  &cl_regroup_3,  &cl_regroup_4,
    &cl_regroup_5, &cl_regroup_6,  &cl_regroup_7,  &cl_regroup_8,  &cl_regroup_9,
    &cl_regroup_10, &cl_regroup_11, &cl_regroup_12, &cl_regroup_13, &cl_regroup_14,
    &cl_regroup_15,
};

/* The tasks of a regroup between the fine row tiling f and the coarse one
 * c: one per coarse tile and column of tiles, for up to TSR_REGROUP_MAX of
 * its fine tiles. A split reads the coarse tile and writes the fine ones; a
 * merge writes the coarse tile (W when the task covers all of it, else RW:
 * the next task of the tile adds its rows). */
static int regroup_tasks(const tsr_tensor_t *f, const tsr_tensor_t *c, int split)
{
    int fine = f->tile_rows, coarse = c->tile_rows, rc = TSR_OK;
    for (int b = 0; !rc && b < f->grid_cols; b++)
        for (int ca = 0; !rc && ca < c->grid_rows; ca++) {
            int a0 = ca * coarse / fine, a1 = a0 + (tsr__tile_m(c, ca) + fine - 1) / fine;
            for (int g = a0; !rc && g < a1; g += TSR_REGROUP_MAX) {
                int k = a1 - g < TSR_REGROUP_MAX ? a1 - g : TSR_REGROUP_MAX;
                regroup_args_t r = {split, k, tsr__tile_m(c, ca), tsr__tile_n(f, b), {0}, {0}};
                tsr_access_t acc[TSR_MAX_BUFFERS];
                int whole = g == a0 && g + k == a1;
                acc[0] = (tsr_access_t){tsr__tile(c, ca, b),
                                        split ? TSR_R : whole ? TSR_W : TSR_RW};
                for (int i = 0; i < k; i++) {
                    r.rows[i] = (int16_t)tsr__tile_m(f, g + i);
                    r.off[i] = (g + i) * fine - ca * coarse;
                    acc[1 + i] = (tsr_access_t){tsr__tile(f, g + i, b), split ? TSR_W : TSR_R};
                }
                rc = submit(cl_regroup[k], &r, sizeof r, k + 1, acc);
            }
        }
    return rc;
}

int tsr__op_regroup(const tsr_tensor_t *src, tsr_tensor_t *dst)
{
    int fine = src->tile_rows < dst->tile_rows ? src->tile_rows : dst->tile_rows;
    int coarse = src->tile_rows < dst->tile_rows ? dst->tile_rows : src->tile_rows;
    if (src->rows != dst->rows || src->cols != dst->cols || src->tile_cols != dst->tile_cols ||
        coarse % fine || src->rows % fine)
        return tsr__fail(TSR_EINVAL, "regroup: (%d, %d) in tiles (%d, %d) and (%d, %d) in (%d, %d) "
                                     "are not two row tilings of one tensor",
                         src->rows, src->cols, src->tile_rows, src->tile_cols, dst->rows,
                         dst->cols, dst->tile_rows, dst->tile_cols);
    int split = src->tile_rows >= dst->tile_rows;
    return regroup_tasks(split ? dst : src, split ? src : dst, split);
}

/* ---- LayerNorm ------------------------------------------------------------ */

#define LN_EPS 1e-5f

/* Per token of C features: mean (C adds, 1 division), variance (3C), rstd
 * (add, sqrt, division, and the division by C), output (4C); x read once
 * (a column stays in L1), out written, gamma, beta read, mean, rstd written. */
static double ln_fwd_flops(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return (double)a->n * (8.0 * a->m + 5.0);
}
static double ln_fwd_bytes(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return 4.0 * (2.0 * a->m * a->n + 2.0 * a->m + 2.0 * a->n);
}
/* Per token: the two reductions (6C), their means (2), the update (11C:
 * xhat 2, dgamma 2, dbeta 1, dx 6); dout, x read, dx read and written,
 * gamma read, dgamma, dbeta read and written, mean, rstd read. */
static double ln_bwd_flops(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return (double)a->n * (17.0 * a->m + 2.0);
}
static double ln_bwd_bytes(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return 4.0 * (4.0 * a->m * a->n + 5.0 * a->m + 2.0 * a->n);
}

/* x (C, T) → out (C, T), mean, rstd (T)       gamma, beta: (C) */
TILE_CODELET(cl_ln_fwd, "layernorm_fwd", 6, mn_args_t, ln_fwd_flops, ln_fwd_bytes,
             (tsr_cpu_layernorm_fwd(a->m, a->n, buf[0], buf[1], buf[2], LN_EPS, buf[3], buf[4],
               buf[5])),
             (tsr_cuda_layernorm_fwd(e->cuda_stream, a->m, a->n, buf[0], buf[1], buf[2], LN_EPS,
               buf[3], buf[4], buf[5])));

/* dout, x (C, T), gamma (C), mean, rstd (T) → dx (C, T), dgamma, dbeta (C), accumulated */
TILE_CODELET(cl_ln_bwd, "layernorm_bwd", 8, mn_args_t, ln_bwd_flops, ln_bwd_bytes,
             (tsr_cpu_layernorm_bwd(a->m, a->n, buf[0], buf[1], buf[2], buf[3], buf[4], buf[5],
               buf[6], buf[7])),
             (tsr_cuda_layernorm_bwd(e->cuda_stream, a->m, a->n, buf[0], buf[1], buf[2], buf[3],
               buf[4], buf[5], buf[6], buf[7], e->deterministic)));

/* The statistics follow x's token tiles: (1, N) tiled (1, tt). */
static int check_ln(const tsr_tensor_t *x, const tsr_tensor_t *stat, const char *op)
{
    if (stat->rows != 1 || stat->cols != x->cols || stat->tile_cols != x->tile_cols)
        return tsr__fail(TSR_EINVAL, "%s: statistics tiling does not follow the tokens", op);
    return TSR_OK;
}

/* gamma, beta (and their gradients): (C, 1) in one tile per row tile of x. */
static int check_ln_param(const tsr_tensor_t *p, const char *what, const tsr_tensor_t *x,
                          const char *op)
{
    if (p->rows != x->rows || p->cols != 1 || p->grid_rows != x->grid_rows ||
        (x->grid_rows > 1 && p->tile_rows != x->tile_rows))
        return tsr__fail(TSR_EINVAL, "%s: %s (%d, %d) in tiles of %d rows for x (%d, %d) in "
                                     "tiles of %d rows",
                         op, what, p->rows, p->cols, p->tile_rows, x->rows, x->cols,
                         x->tile_rows);
    return TSR_OK;
}

/* ---- LayerNorm over row tiles (channel tiles) ------------------------------
 * x (C, N) in R > 1 row tiles (tc, tt), gamma and beta (C, 1) in tiles (tc,
 * 1), mean and rstd (1, N) in tiles (1, tt) as in one tile row. Per token
 * tile b, every sum over the features is R partial sums (one task per tile
 * (a, b)) that one task per b combines in the order a = 0 … R-1, so that the
 * result is the same bits whatever runs the tasks (kernels/layernorm.h):
 *   forward:  part(a, b) = sum x                     → mean(b)
 *             part(a, b) = sum (x - mean)^2          → rstd(b)
 *             out(a, b)  = (x - mean) rstd gamma_a + beta_a
 *   backward: part(a, b) = (sum g, sum g xhat)       → part(0, b) = their means
 *             dx(a, b) += …, dgamma_a, dbeta_a += …  (COMMUTE over b)
 * The partials live in the caller's scratch `part` (2R, N) tiled (2, tt):
 * tile (a, b) holds 2 tt floats (the forward uses the first tt). A combine
 * task reads up to TSR_LN_PARTS partials (more: a chain of tasks in the
 * same order, the first writing the sum, the next ones adding to it). */

typedef tsr__ln_combine_args_t ln_combine_args_t;

/* The partial sums: x (m, n) read, n sums written; m n additions (the
 * deviations: 3 m n, and the means read). */
static double ln_part_flops(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return (double)a->m * a->n;
}
static double ln_part_bytes(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return 4.0 * ((double)a->m * a->n + a->n);
}
static double ln_part_dev_flops(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return 3.0 * a->m * a->n;
}
static double ln_part_dev_bytes(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return 4.0 * ((double)a->m * a->n + 2.0 * a->n);
}
/* k n additions and the finish per value (mean 1, rstd 4); the partials
 * read, acc written (and read unless init) */
static double ln_combine_flops(const void *args, const size_t *sizes)
{
    const ln_combine_args_t *a = args;
    (void)sizes;
    double fin = a->fin == TSR_LN_FIN_MEAN ? 1.0 : a->fin == TSR_LN_FIN_RSTD ? 4.0 : 0.0;
    return (double)a->n * (a->k + fin);
}
static double ln_combine_bytes(const void *args, const size_t *sizes)
{
    const ln_combine_args_t *a = args;
    (void)sizes;
    return 4.0 * a->n * (a->k + (a->init ? 1.0 : 2.0));
}
/* out = (x - mean) rstd gamma + beta: 4 per element; x read, out written,
 * gamma, beta, mean, rstd read */
static double ln_apply_flops(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return 4.0 * a->m * a->n;
}
static double ln_apply_bytes(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return 4.0 * (2.0 * a->m * a->n + 2.0 * a->m + 2.0 * a->n);
}
/* the two sums: 6 per element (g 1, its sum 1, g xhat 3, its sum 1); dout,
 * x read, gamma, mean, rstd read, 2n sums written */
static double ln_part_grad_flops(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return 6.0 * a->m * a->n;
}
static double ln_part_grad_bytes(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return 4.0 * (2.0 * a->m * a->n + a->m + 4.0 * a->n);
}
/* the update, 11 per element as layernorm_bwd's (xhat 2, dgamma 2, dbeta 1,
 * dx 6); dout, x read, dx read and written, gamma read, dgamma, dbeta read
 * and written, mean, rstd and the two means read */
static double ln_apply_grad_flops(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return 11.0 * a->m * a->n;
}
static double ln_apply_grad_bytes(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return 4.0 * (4.0 * a->m * a->n + 5.0 * a->m + 4.0 * a->n);
}

/* x (M, T) → part (T) = sum_i x */
TILE_CODELET(cl_ln_part, "layernorm_part", 2, mn_args_t, ln_part_flops, ln_part_bytes,
             (tsr_cpu_layernorm_part(a->m, a->n, buf[0], NULL, buf[1])),
             (tsr_cuda_layernorm_part(e->cuda_stream, a->m, a->n, buf[0], NULL, buf[1])));
/* x (M, T), mean (T) → part (T) = sum_i (x - mean)^2 */
TILE_CODELET(cl_ln_part_dev, "layernorm_part_dev", 3, mn_args_t, ln_part_dev_flops,
             ln_part_dev_bytes, (tsr_cpu_layernorm_part(a->m, a->n, buf[0], buf[1], buf[2])),
             (tsr_cuda_layernorm_part(e->cuda_stream, a->m, a->n, buf[0], buf[1], buf[2])));
/* x (M, T), gamma, beta (M), mean, rstd (T) → out (M, T) */
TILE_CODELET(cl_ln_apply, "layernorm_apply", 6, mn_args_t, ln_apply_flops, ln_apply_bytes,
             (tsr_cpu_layernorm_apply(a->m, a->n, buf[0], buf[1], buf[2], buf[3], buf[4],
               buf[5])),
             (tsr_cuda_layernorm_apply(e->cuda_stream, a->m, a->n, buf[0], buf[1], buf[2],
               buf[3], buf[4], buf[5])));
/* dout, x (M, T), gamma (M), mean, rstd (T) → part (2T) */
TILE_CODELET(cl_ln_part_grad, "layernorm_part_grad", 6, mn_args_t, ln_part_grad_flops,
             ln_part_grad_bytes,
             (tsr_cpu_layernorm_part_grad(a->m, a->n, buf[0], buf[1], buf[2], buf[3], buf[4],
               buf[5])),
             (tsr_cuda_layernorm_part_grad(e->cuda_stream, a->m, a->n, buf[0], buf[1], buf[2],
               buf[3], buf[4], buf[5])));
/* dout, x (M, T), gamma (M), mean, rstd, m2 (T, 2T) → dx (M, T), dgamma, dbeta
 * (M), accumulated */
TILE_CODELET(cl_ln_apply_grad, "layernorm_apply_grad", 9, mn_args_t, ln_apply_grad_flops,
             ln_apply_grad_bytes,
             (tsr_cpu_layernorm_apply_grad(a->m, a->n, buf[0], buf[1], buf[2], buf[3], buf[4],
               buf[5], buf[6], buf[7], buf[8])),
             (tsr_cuda_layernorm_apply_grad(e->cuda_stream, a->m, a->n, buf[0], buf[1], buf[2],
               buf[3], buf[4], buf[5], buf[6], buf[7], buf[8])));

/* acc (n) (+)= parts 1 … k (n each), in order, then finished: buffers acc, then
 * the k partials */
static int ln_combine_cpu(void **buf, const void *args, const tsr_exec_t *e)
{
    const ln_combine_args_t *a = args;
    (void)e;
    tsr_cpu_layernorm_combine(a->n, a->k, (const float *const *)(buf + 1), a->init, a->fin,
                              a->C, a->eps, buf[0]);
    return 0;
}
#ifdef TSR_HAVE_CUDA
static int ln_combine_cuda(void **buf, const void *args, const tsr_exec_t *e)
{
    const ln_combine_args_t *a = args;
    return tsr_cuda_layernorm_combine(e->cuda_stream, a->n, a->k,
                                      (const float *const *)(buf + 1), a->init, a->fin, a->C,
                                      a->eps, buf[0]);
}
#endif
/* one codelet per buffer count: cl_ln_combine[k] adds k partials */
#define LN_COMBINE_CL(k) CODELET(cl_ln_combine_##k, "layernorm_combine", (k) + 1,            \
                                 ln_combine_cpu, ln_combine_cuda, ln_combine_flops,           \
                                 ln_combine_bytes)
LN_COMBINE_CL(1); LN_COMBINE_CL(2); LN_COMBINE_CL(3); LN_COMBINE_CL(4); LN_COMBINE_CL(5);
LN_COMBINE_CL(6); LN_COMBINE_CL(7); LN_COMBINE_CL(8); LN_COMBINE_CL(9); LN_COMBINE_CL(10);
LN_COMBINE_CL(11); LN_COMBINE_CL(12); LN_COMBINE_CL(13); LN_COMBINE_CL(14); LN_COMBINE_CL(15);
_Static_assert(TSR_LN_PARTS == 15 && TSR_LN_PARTS < TSR_MAX_BUFFERS,
               "one combine codelet per partial count");
static const tsr_codelet_t *const cl_ln_combine[TSR_LN_PARTS + 1] = {
    NULL,             &cl_ln_combine_1,  &cl_ln_combine_2,  &cl_ln_combine_3,
    &cl_ln_combine_4, &cl_ln_combine_5,  &cl_ln_combine_6,  &cl_ln_combine_7,
    &cl_ln_combine_8, &cl_ln_combine_9,  &cl_ln_combine_10, &cl_ln_combine_11,
    &cl_ln_combine_12, &cl_ln_combine_13, &cl_ln_combine_14, &cl_ln_combine_15,
};

/* acc (n floats) = the partials part(a0 … R-1, b), added in that order (to
 * acc's own value where !init), finished by fin: ceil((R - a0) / 15) tasks,
 * a chain on acc (W for the first where init, else RW). */
static int ln_combine(const tsr_tensor_t *part, int b, int a0, tsr_handle_t acc, int init,
                      int n, int fin, int C)
{
    int R = part->grid_rows, rc = TSR_OK;
    for (int g = a0; !rc && g < R; g += TSR_LN_PARTS) {
        int k = R - g < TSR_LN_PARTS ? R - g : TSR_LN_PARTS;
        ln_combine_args_t c = {n, k, g == a0 && init, g + k == R ? fin : TSR_LN_FIN_NONE, C,
                               LN_EPS};
        tsr_access_t acc_[TSR_MAX_BUFFERS];
        acc_[0] = (tsr_access_t){acc, c.init ? TSR_W : TSR_RW};
        for (int i = 0; i < k; i++)
            acc_[1 + i] = (tsr_access_t){tsr__tile(part, g + i, b), TSR_R};
        rc = submit(cl_ln_combine[k], &c, sizeof c, k + 1, acc_);
    }
    return rc;
}

/* The scratch of the row-tile path: (2R, N) fp32 tiled (2, tt). */
static int check_ln_part(const tsr_tensor_t *part, const tsr_tensor_t *x, const char *op)
{
    if (!part)
        return tsr__fail(TSR_EINVAL, "%s: x (%d, %d) in %d row tiles of %d needs a scratch for "
                                     "its partial sums (%s_rows)",
                         op, x->rows, x->cols, x->grid_rows, x->tile_rows, op);
    if (part->rows != 2 * x->grid_rows || part->tile_rows != 2 || part->cols != x->cols ||
        part->tile_cols != x->tile_cols || tsr__tensor_is_bf16(part))
        return tsr__fail(TSR_EINVAL, "%s: scratch (%d, %d) in tiles (%d, %d) for x (%d, %d) in "
                                     "tiles (%d, %d): it is (2 * %d, %d) fp32 in tiles (2, %d)",
                         op, part->rows, part->cols, part->tile_rows, part->tile_cols, x->rows,
                         x->cols, x->tile_rows, x->tile_cols, x->grid_rows, x->cols,
                         x->tile_cols);
    return TSR_OK;
}

static int check_f32(const tsr_tensor_t *t, const char *what, const char *op)
{
    if (tsr__tensor_is_bf16(t))
        return tsr__fail(TSR_EINVAL, "%s: %s is bf16 (the fp32 operation)", op, what);
    return TSR_OK;
}

/* layernorm_apply into bf16: out written in 2 bytes instead of 4, the
 * scratch written and read */
static double ln_apply_bf16_bytes(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    return ln_apply_bytes(args, sizes) + 6.0 * a->m * a->n;
}
/* x (M, T), gamma, beta (M), mean, rstd (T) → out (M, T) bf16 through the
 * fp32 scratch (M, T) */
static int ln_apply_bf16_cpu(void **buf, const void *args, const tsr_exec_t *e)
{
    const mn_args_t *a = args;
    (void)e;
    tsr_cpu_layernorm_apply(a->m, a->n, buf[0], buf[1], buf[2], buf[3], buf[4], buf[6]);
    tsr_cpu_f32_to_bf16((size_t)a->m * a->n, buf[6], buf[5]);
    return 0;
}
#ifdef TSR_HAVE_CUDA
static int ln_apply_bf16_cuda(void **buf, const void *args, const tsr_exec_t *e)
{
    const mn_args_t *a = args;
    int rc = tsr_cuda_layernorm_apply(e->cuda_stream, a->m, a->n, buf[0], buf[1], buf[2], buf[3],
                                      buf[4], buf[6]);
    return rc ? rc : tsr_cuda_f32_to_bf16(e->cuda_stream, (size_t)a->m * a->n, buf[6], buf[5]);
}
#endif
CODELET(cl_ln_apply_bf16, "layernorm_apply_bf16", 7, ln_apply_bf16_cpu, ln_apply_bf16_cuda,
        ln_apply_flops, ln_apply_bf16_bytes);

/* x (C, N) in R row tiles → out, mean, rstd: per token tile 3R + 2 ceil(R / 15)
 * tasks (partials, combine, deviations, combine, apply). */
static int ln_fwd_rows(const tsr_tensor_t *x, const tsr_tensor_t *gamma,
                       const tsr_tensor_t *beta, tsr_tensor_t *out, tsr_tensor_t *mean,
                       tsr_tensor_t *rstd, tsr_tensor_t *part, tsr_handle_t scratch)
{
    int R = x->grid_rows, C = x->rows, rc = TSR_OK;
    for (int b = 0; !rc && b < x->grid_cols; b++) {
        int T = tsr__tile_n(x, b);
        tsr_handle_t mu = tsr__tile(mean, 0, b), rs = tsr__tile(rstd, 0, b);
        /* pass 1: part(a, b) (T) = sum_i x(a, b) → mean(b) (T) */
        for (int a = 0; !rc && a < R; a++) {
            mn_args_t m = {tsr__tile_m(x, a), T};
            rc = SUBMIT(cl_ln_part, m, ACC(tsr__tile(x, a, b), TSR_R),
                        ACC(tsr__tile(part, a, b), TSR_W));
        }
        if (!rc)
            rc = ln_combine(part, b, 0, mu, 1, T, TSR_LN_FIN_MEAN, C);
        /* pass 2: part(a, b) (T) = sum_i (x(a, b) - mean)^2 → rstd(b) (T) */
        for (int a = 0; !rc && a < R; a++) {
            mn_args_t m = {tsr__tile_m(x, a), T};
            rc = SUBMIT(cl_ln_part_dev, m, ACC(tsr__tile(x, a, b), TSR_R), ACC(mu, TSR_R),
                        ACC(tsr__tile(part, a, b), TSR_W));
        }
        if (!rc)
            rc = ln_combine(part, b, 0, rs, 1, T, TSR_LN_FIN_RSTD, C);
        /* pass 3: out(a, b) (tc, T) = (x - mean) rstd gamma_a + beta_a */
        for (int a = 0; !rc && a < R; a++) {
            mn_args_t m = {tsr__tile_m(x, a), T};
            if (tsr__tensor_is_bf16(out)) /* through the scratch */
                rc = SUBMIT(cl_ln_apply_bf16, m, ACC(tsr__tile(x, a, b), TSR_R),
                            ACC(gamma->tiles[a], TSR_R), ACC(beta->tiles[a], TSR_R),
                            ACC(mu, TSR_R), ACC(rs, TSR_R), ACC(tsr__tile(out, a, b), TSR_W),
                            ACC(scratch, TSR_SCRATCH));
            else
                rc = SUBMIT(cl_ln_apply, m, ACC(tsr__tile(x, a, b), TSR_R),
                            ACC(gamma->tiles[a], TSR_R), ACC(beta->tiles[a], TSR_R),
                            ACC(mu, TSR_R), ACC(rs, TSR_R), ACC(tsr__tile(out, a, b), TSR_W));
        }
    }
    return rc ? rc : tsr__tensor_invalidate(part);
}

/* dout, x (C, N) in R row tiles → dx, dgamma, dbeta (accumulated): per token
 * tile 2R + ceil((R - 1) / 15) tasks (partials, combine into part(0, b),
 * apply). */
static int ln_bwd_rows(const tsr_tensor_t *dout, const tsr_tensor_t *x,
                       const tsr_tensor_t *gamma, const tsr_tensor_t *mean,
                       const tsr_tensor_t *rstd, tsr_tensor_t *dx, tsr_tensor_t *dgamma,
                       tsr_tensor_t *dbeta, tsr_tensor_t *part)
{
    int R = x->grid_rows, C = x->rows, rc = TSR_OK;
    for (int b = 0; !rc && b < x->grid_cols; b++) {
        int T = tsr__tile_n(x, b);
        tsr_handle_t mu = tsr__tile(mean, 0, b), rs = tsr__tile(rstd, 0, b);
        tsr_handle_t m2 = tsr__tile(part, 0, b);
        /* pass 1: part(a, b) (2T) = (sum_i g, sum_i g xhat), g = gamma_a dout */
        for (int a = 0; !rc && a < R; a++) {
            mn_args_t m = {tsr__tile_m(x, a), T};
            rc = SUBMIT(cl_ln_part_grad, m, ACC(tsr__tile(dout, a, b), TSR_R),
                        ACC(tsr__tile(x, a, b), TSR_R), ACC(gamma->tiles[a], TSR_R),
                        ACC(mu, TSR_R), ACC(rs, TSR_R), ACC(tsr__tile(part, a, b), TSR_W));
        }
        /* part(0, b) (2T) = (part(0, b) + … + part(R-1, b)) / C: (ma, mb) */
        if (!rc)
            rc = ln_combine(part, b, 1, m2, 0, 2 * T, TSR_LN_FIN_MEAN, C);
        /* pass 2: dx(a, b) += …, dgamma_a, dbeta_a += … */
        for (int a = 0; !rc && a < R; a++) {
            mn_args_t m = {tsr__tile_m(x, a), T};
            rc = SUBMIT(cl_ln_apply_grad, m, ACC(tsr__tile(dout, a, b), TSR_R),
                        ACC(tsr__tile(x, a, b), TSR_R), ACC(gamma->tiles[a], TSR_R),
                        ACC(mu, TSR_R), ACC(rs, TSR_R), ACC(m2, TSR_R),
                        ACC(tsr__tile(dx, a, b), TSR_RW), ACC(dgamma->tiles[a], acc_of(dgamma)),
                        ACC(dbeta->tiles[a], acc_of(dbeta)));
        }
    }
    return rc ? rc : tsr__tensor_invalidate(part);
}

int tsr__op_layernorm_fwd(const tsr_tensor_t *x, const tsr_tensor_t *gamma,
                          const tsr_tensor_t *beta, tsr_tensor_t *out, tsr_tensor_t *mean,
                          tsr_tensor_t *rstd)
{
    return tsr__op_layernorm_fwd_rows(x, gamma, beta, out, mean, rstd, NULL);
}

int tsr__op_layernorm_fwd_rows(const tsr_tensor_t *x, const tsr_tensor_t *gamma,
                               const tsr_tensor_t *beta, tsr_tensor_t *out, tsr_tensor_t *mean,
                               tsr_tensor_t *rstd, tsr_tensor_t *part)
{
    const char *op = "layernorm_fwd";
    int rc = check_ln(x, mean, op);
    if (!rc)
        rc = check_ln(x, rstd, op);
    if (!rc)
        rc = same_tiling(x, out, op);
    if (!rc)
        rc = check_ln_param(gamma, "gamma", x, op);
    if (!rc)
        rc = check_ln_param(beta, "beta", x, op);
    if (!rc && x->grid_rows > 1) {
        if ((rc = check_ln_part(part, x, op)) || (rc = check_f32(x, "x", op)) ||
            (rc = check_f32(out, "out", op)))
            return rc;
        return ln_fwd_rows(x, gamma, beta, out, mean, rstd, part, NULL);
    }
    /* one tile row: the fused kernel, one task per token tile */
    for (int j = 0; !rc && j < x->grid_cols; j++) {
        mn_args_t a = {x->rows, tsr__tile_n(x, j)};
        rc = SUBMIT(cl_ln_fwd, a, ACC(tsr__tile(x, 0, j), TSR_R), ACC(gamma->tiles[0], TSR_R),
                    ACC(beta->tiles[0], TSR_R), ACC(tsr__tile(out, 0, j), TSR_W),
                    ACC(tsr__tile(mean, 0, j), TSR_W), ACC(tsr__tile(rstd, 0, j), TSR_W));
    }
    return rc;
}

int tsr__op_layernorm_bwd(const tsr_tensor_t *dout, const tsr_tensor_t *x,
                          const tsr_tensor_t *gamma, const tsr_tensor_t *mean,
                          const tsr_tensor_t *rstd, tsr_tensor_t *dx, tsr_tensor_t *dgamma,
                          tsr_tensor_t *dbeta)
{
    return tsr__op_layernorm_bwd_rows(dout, x, gamma, mean, rstd, dx, dgamma, dbeta, NULL);
}

int tsr__op_layernorm_bwd_rows(const tsr_tensor_t *dout, const tsr_tensor_t *x,
                               const tsr_tensor_t *gamma, const tsr_tensor_t *mean,
                               const tsr_tensor_t *rstd, tsr_tensor_t *dx, tsr_tensor_t *dgamma,
                               tsr_tensor_t *dbeta, tsr_tensor_t *part)
{
    const char *op = "layernorm_bwd";
    int rc = check_ln(x, mean, op);
    if (!rc)
        rc = check_ln(x, rstd, op);
    if (!rc)
        rc = same_tiling(x, dout, op);
    if (!rc)
        rc = same_tiling(x, dx, op);
    if (!rc)
        rc = check_ln_param(gamma, "gamma", x, op);
    if (!rc)
        rc = check_ln_param(dgamma, "dgamma", x, op);
    if (!rc)
        rc = check_ln_param(dbeta, "dbeta", x, op);
    if (!rc && x->grid_rows > 1) {
        if ((rc = check_ln_part(part, x, op)) || (rc = check_f32(x, "x", op)) ||
            (rc = check_f32(dout, "dout", op)) || (rc = check_f32(dx, "dx", op)))
            return rc;
        return ln_bwd_rows(dout, x, gamma, mean, rstd, dx, dgamma, dbeta, part);
    }
    /* one tile row: the fused kernel, one task per token tile */
    for (int j = 0; !rc && j < x->grid_cols; j++) {
        mn_args_t a = {x->rows, tsr__tile_n(x, j)};
        rc = SUBMIT(cl_ln_bwd, a, ACC(tsr__tile(dout, 0, j), TSR_R),
                    ACC(tsr__tile(x, 0, j), TSR_R), ACC(gamma->tiles[0], TSR_R),
                    ACC(tsr__tile(mean, 0, j), TSR_R), ACC(tsr__tile(rstd, 0, j), TSR_R),
                    ACC(tsr__tile(dx, 0, j), TSR_RW), ACC(dgamma->tiles[0], acc_of(dgamma)),
                    ACC(dbeta->tiles[0], acc_of(dbeta)));
    }
    return rc;
}

/* ---- GELU ----------------------------------------------------------------- */

/* Per element: forward 10 (the cubic 5, sigmoid 4, product 1), x read, out
 * written; backward 20 (sigmoid's argument and itself 9, the derivative
 * 10, the product 1), x and d read, d written. */
static double gelu_fwd_flops(const void *args, const size_t *sizes)
{
    (void)args;
    return 10.0 * n0(sizes);
}
static double gelu_bwd_flops(const void *args, const size_t *sizes)
{
    (void)args;
    return 20.0 * n0(sizes);
}

/* out = gelu(x)                               x, out: (n) */
TILE_CODELET(cl_gelu_fwd, "gelu_fwd", 2, void, gelu_fwd_flops, read_write_n,
             (tsr_cpu_gelu_fwd(nelem(e, 0), buf[0], buf[1])),
             (tsr_cuda_gelu_fwd(e->cuda_stream, nelem(e, 0), buf[0], buf[1])));

/* d = gelu'(x) * d                            x, d: (n) */
TILE_CODELET(cl_gelu_bwd, "gelu_bwd", 2, void, gelu_bwd_flops, axpy_bytes,
             (tsr_cpu_gelu_bwd(nelem(e, 0), buf[0], buf[1], buf[1])),
             (tsr_cuda_gelu_bwd(e->cuda_stream, nelem(e, 0), buf[0], buf[1], buf[1])));

int tsr__op_gelu_fwd(const tsr_tensor_t *x, tsr_tensor_t *out)
{
    return tilewise(&cl_gelu_fwd, x, TSR_R, out, TSR_W, "gelu_fwd");
}

int tsr__op_gelu_bwd(const tsr_tensor_t *x, tsr_tensor_t *d)
{
    return tilewise(&cl_gelu_bwd, x, TSR_R, d, TSR_RW, "gelu_bwd");
}

/* ---- Llama layers: RMSNorm, SwiGLU, RoPE ---------------------------------- */

typedef tsr__rms_args_t rms_args_t;

static double rms_fwd_flops(const void *args, const size_t *sizes)
{
    const rms_args_t *a = args;
    (void)sizes;
    return tsr_rmsnorm_fwd_flops(a->m, a->n);
}
static double rms_fwd_bytes(const void *args, const size_t *sizes)
{
    const rms_args_t *a = args;
    (void)sizes;
    return tsr_rmsnorm_fwd_bytes(a->m, a->n);
}
static double rms_bwd_flops(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return tsr_rmsnorm_bwd_flops(a->m, a->n);
}
static double rms_bwd_bytes(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return tsr_rmsnorm_bwd_bytes(a->m, a->n);
}

/* x (C, T), w (C) → out (C, T), rstd (T) */
TILE_CODELET(cl_rms_fwd, "rmsnorm_fwd", 4, rms_args_t, rms_fwd_flops, rms_fwd_bytes,
             (tsr_cpu_rmsnorm_fwd(a->m, a->n, buf[0], buf[1], a->eps, buf[2], buf[3])),
             (tsr_cuda_rmsnorm_fwd(e->cuda_stream, a->m, a->n, buf[0], buf[1], a->eps, buf[2],
               buf[3])));

/* dout, x (C, T), w (C), rstd (T) → dx (C, T), dw (C), both accumulated */
TILE_CODELET(cl_rms_bwd, "rmsnorm_bwd", 6, mn_args_t, rms_bwd_flops, rms_bwd_bytes,
             (tsr_cpu_rmsnorm_bwd(a->m, a->n, buf[0], buf[1], buf[2], buf[3], buf[4], buf[5])),
             (tsr_cuda_rmsnorm_bwd(e->cuda_stream, a->m, a->n, buf[0], buf[1], buf[2], buf[3],
               buf[4], buf[5])));

/* x: fp32, one tile row; w: (C, 1) in one fp32 tile; rstd: (1, cols) tiled
 * like x's columns, fp32 */
static int check_rms(const tsr_tensor_t *x, const tsr_tensor_t *w, const tsr_tensor_t *rstd,
                     const char *op)
{
    if (tsr__tensor_is_bf16(x) || tsr__tensor_is_bf16(w) || tsr__tensor_is_bf16(rstd))
        return tsr__fail(TSR_EINVAL, "%s: fp32 tensors only", op);
    if (x->grid_rows != 1)
        return tsr__fail(TSR_EINVAL, "%s: features (%d) split into tiles of %d", op, x->rows,
                         x->tile_rows);
    if (w->rows != x->rows || w->cols != 1 || w->grid_rows != 1 || w->grid_cols != 1)
        return tsr__fail(TSR_EINVAL, "%s: weight (%d, %d) in tiles (%d, %d) is not (%d, 1) in "
                                     "one tile", op, w->rows, w->cols, w->tile_rows,
                         w->tile_cols, x->rows);
    if (rstd->rows != 1 || rstd->cols != x->cols || rstd->tile_cols != x->tile_cols)
        return tsr__fail(TSR_EINVAL, "%s: rstd (%d, %d) in tiles of %d columns does not follow "
                                     "the tokens (%d in tiles of %d)", op, rstd->rows,
                         rstd->cols, rstd->tile_cols, x->cols, x->tile_cols);
    return TSR_OK;
}

int tsr__op_rmsnorm_fwd(const tsr_tensor_t *x, const tsr_tensor_t *w, float eps,
                        tsr_tensor_t *out, tsr_tensor_t *rstd)
{
    int rc = check_rms(x, w, rstd, "rmsnorm_fwd");
    if (!rc && !(eps > 0.0f && isfinite(eps)))
        rc = tsr__fail(TSR_EINVAL, "rmsnorm_fwd: eps %g is not a positive number", (double)eps);
    if (!rc)
        rc = same_tiling(x, out, "rmsnorm_fwd");
    if (!rc && tsr__tensor_is_bf16(out))
        rc = tsr__fail(TSR_EINVAL, "rmsnorm_fwd: fp32 tensors only");
    for (int j = 0; !rc && j < x->grid_cols; j++) {
        rms_args_t a = {x->rows, tsr__tile_n(x, j), eps};
        rc = SUBMIT(cl_rms_fwd, a, ACC(tsr__tile(x, 0, j), TSR_R), ACC(w->tiles[0], TSR_R),
                    ACC(tsr__tile(out, 0, j), TSR_W), ACC(tsr__tile(rstd, 0, j), TSR_W));
    }
    return rc;
}

int tsr__op_rmsnorm_bwd(const tsr_tensor_t *dout, const tsr_tensor_t *x, const tsr_tensor_t *w,
                        const tsr_tensor_t *rstd, tsr_tensor_t *dx, tsr_tensor_t *dw)
{
    int rc = check_rms(x, w, rstd, "rmsnorm_bwd");
    if (!rc)
        rc = same_tiling(x, dout, "rmsnorm_bwd");
    if (!rc)
        rc = same_tiling(x, dx, "rmsnorm_bwd");
    if (!rc)
        rc = same_tiling(w, dw, "rmsnorm_bwd");
    if (!rc && (tsr__tensor_is_bf16(dout) || tsr__tensor_is_bf16(dx) || tsr__tensor_is_bf16(dw)))
        rc = tsr__fail(TSR_EINVAL, "rmsnorm_bwd: fp32 tensors only");
    for (int j = 0; !rc && j < x->grid_cols; j++) {
        mn_args_t a = {x->rows, tsr__tile_n(x, j)};
        rc = SUBMIT(cl_rms_bwd, a, ACC(tsr__tile(dout, 0, j), TSR_R),
                    ACC(tsr__tile(x, 0, j), TSR_R), ACC(w->tiles[0], TSR_R),
                    ACC(tsr__tile(rstd, 0, j), TSR_R), ACC(tsr__tile(dx, 0, j), TSR_RW),
                    ACC(dw->tiles[0], acc_of(dw)));
    }
    return rc;
}

static double swiglu_fwd_flops(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return tsr_swiglu_fwd_flops(a->m, a->n);
}
static double swiglu_fwd_bytes(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return tsr_swiglu_fwd_bytes(a->m, a->n);
}
static double swiglu_bwd_flops(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return tsr_swiglu_bwd_flops(a->m, a->n);
}
static double swiglu_bwd_bytes(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    (void)sizes;
    return tsr_swiglu_bwd_bytes(a->m, a->n);
}

/* g, u (F, T) → h = silu(g) u (F, T); each tile its own ld = F */
TILE_CODELET(cl_swiglu_fwd, "swiglu_fwd", 3, mn_args_t, swiglu_fwd_flops, swiglu_fwd_bytes,
             (tsr_cpu_swiglu_fwd(a->m, a->n, buf[0], a->m, buf[1], a->m, buf[2], a->m)),
             (tsr_cuda_swiglu_fwd(e->cuda_stream, a->m, a->n, buf[0], a->m, buf[1], a->m, buf[2],
               a->m)));

/* g, u, dh (F, T) → dg, du (F, T), written */
TILE_CODELET(cl_swiglu_bwd, "swiglu_bwd", 5, mn_args_t, swiglu_bwd_flops, swiglu_bwd_bytes,
             (tsr_cpu_swiglu_bwd(a->m, a->n, buf[0], a->m, buf[1], a->m, buf[2], a->m, buf[3],
               a->m, buf[4], a->m)),
             (tsr_cuda_swiglu_bwd(e->cuda_stream, a->m, a->n, buf[0], a->m, buf[1], a->m, buf[2],
               a->m, buf[3], a->m, buf[4], a->m)));

/* every tensor tiled like the first, all fp32 */
static int check_alike(const tsr_tensor_t *const *t, int n, const char *op)
{
    for (int i = 0; i < n; i++) {
        int rc = i ? same_tiling(t[0], t[i], op) : TSR_OK;
        if (rc)
            return rc;
        if (tsr__tensor_is_bf16(t[i]))
            return tsr__fail(TSR_EINVAL, "%s: fp32 tensors only", op);
    }
    return TSR_OK;
}

int tsr__op_swiglu_fwd(const tsr_tensor_t *gate, const tsr_tensor_t *up, tsr_tensor_t *h)
{
    const tsr_tensor_t *t[] = {gate, up, h};
    int rc = check_alike(t, 3, "swiglu_fwd");
    for (int j = 0; !rc && j < gate->grid_cols; j++)
        for (int i = 0; !rc && i < gate->grid_rows; i++) {
            mn_args_t a = {tsr__tile_m(gate, i), tsr__tile_n(gate, j)};
            rc = SUBMIT(cl_swiglu_fwd, a, ACC(tsr__tile(gate, i, j), TSR_R),
                        ACC(tsr__tile(up, i, j), TSR_R), ACC(tsr__tile(h, i, j), TSR_W));
        }
    return rc;
}

int tsr__op_swiglu_bwd(const tsr_tensor_t *gate, const tsr_tensor_t *up, const tsr_tensor_t *dh,
                       tsr_tensor_t *dgate, tsr_tensor_t *dup)
{
    const tsr_tensor_t *t[] = {gate, up, dh, dgate, dup};
    int rc = check_alike(t, 5, "swiglu_bwd");
    for (int j = 0; !rc && j < gate->grid_cols; j++)
        for (int i = 0; !rc && i < gate->grid_rows; i++) {
            mn_args_t a = {tsr__tile_m(gate, i), tsr__tile_n(gate, j)};
            rc = SUBMIT(cl_swiglu_bwd, a, ACC(tsr__tile(gate, i, j), TSR_R),
                        ACC(tsr__tile(up, i, j), TSR_R), ACC(tsr__tile(dh, i, j), TSR_R),
                        ACC(tsr__tile(dgate, i, j), TSR_W), ACC(tsr__tile(dup, i, j), TSR_W));
        }
    return rc;
}

/* RoPE: one task per tile, in place (RW), buffer 1 the frequency table.
 * The tile's tokens run from position pos0 + s0 and wrap to pos0 where a new
 * sequence starts: one kernel call per piece. */
typedef tsr__rope_args_t rope_args_t;

static double rope_flops(const void *args, const size_t *sizes)
{
    const rope_args_t *a = args;
    (void)sizes;
    return tsr_rope_flops(a->d, a->nh, a->T);
}
static double rope_bytes(const void *args, const size_t *sizes)
{
    const rope_args_t *a = args;
    (void)sizes;
    return tsr_rope_bytes(a->d, a->nh, a->T);
}

/* The first piece of tokens [t, T) of the tile: its length and position */
static int rope_piece(const rope_args_t *a, int t, int *pos)
{
    int s = (int)(((long long)a->s0 + t) % a->seq_len);
    int n = a->seq_len - s;
    *pos = a->pos0 + s;
    return n < a->T - t ? n : a->T - t;
}

static void rope_cpu(const rope_args_t *a, void **buf)
{
    const double *f = buf[1];
    int ld = a->ld ? a->ld : a->nh * a->d, pos, n;
    float *x = (float *)buf[0] + (size_t)a->c0 * (size_t)ld;
    for (int t = 0; t < a->T; t += n) {
        float *xt = x + (size_t)t * (size_t)ld;
        n = rope_piece(a, t, &pos);
        if (a->inverse)
            tsr_cpu_rope_bwd(a->d, a->nh, n, ld, pos, f, xt, xt);
        else
            tsr_cpu_rope_fwd(a->d, a->nh, n, ld, pos, f, xt, xt);
    }
}
#ifdef TSR_HAVE_CUDA
static int rope_cuda(const rope_args_t *a, void **buf, const tsr_exec_t *e)
{
    const double *f = buf[1]; /* the table's device copy */
    int ld = a->ld ? a->ld : a->nh * a->d, pos, n, rc = 0;
    float *x = (float *)buf[0] + (size_t)a->c0 * (size_t)ld;
    for (int t = 0; !rc && t < a->T; t += n) {
        float *xt = x + (size_t)t * (size_t)ld;
        n = rope_piece(a, t, &pos);
        rc = a->inverse ? tsr_cuda_rope_bwd(e->cuda_stream, a->d, a->nh, n, ld, pos, f, xt, xt)
                        : tsr_cuda_rope_fwd(e->cuda_stream, a->d, a->nh, n, ld, pos, f, xt, xt);
    }
    return rc;
}
#endif
/* x (nh d, T) rotated in place; table (d/2) doubles */
TILE_CODELET(cl_rope_fwd, "rope_fwd", 2, rope_args_t, rope_flops, rope_bytes, rope_cpu(a, buf),
             rope_cuda(a, buf, e));
TILE_CODELET(cl_rope_bwd, "rope_bwd", 2, rope_args_t, rope_flops, rope_bytes, rope_cpu(a, buf),
             rope_cuda(a, buf, e));

/* rot_heads 0: every head of x; else the first rot_heads heads of x's one
 * tile row (the q and k of a fused qkv) */
static int rope_tiles(tsr_tensor_t *x, int heads, int head_dim, int seq_len, int pos0,
                      tsr_handle_t inv_freq, int inverse, int rot_heads, const char *op)
{
    if (heads <= 0 || head_dim < 2 || head_dim % 2)
        return tsr__fail(TSR_EINVAL, "%s: %d heads of dimension %d (heads > 0, an even "
                                     "dimension >= 2)", op, heads, head_dim);
    if (rot_heads && (rot_heads > heads || x->grid_rows != 1))
        return tsr__fail(TSR_EINVAL, "%s: %d of %d heads rotated, or qkv (%d, %d) not in one "
                                     "tile row", op, rot_heads, heads, x->rows, x->cols);
    if (tsr__tensor_is_bf16(x) || (long long)heads * head_dim != x->rows ||
        x->tile_rows % head_dim)
        return tsr__fail(TSR_EINVAL, "%s: x (%d, %d) in tiles (%d, %d) is not fp32 %d heads of "
                                     "%d rows in tiles of whole heads", op, x->rows, x->cols,
                         x->tile_rows, x->tile_cols, heads, head_dim);
    if (seq_len <= 0 || pos0 < 0 || pos0 > INT_MAX - (seq_len - 1))
        return tsr__fail(TSR_EINVAL, "%s: positions %d + [0, %d) are not non-negative ints", op,
                         pos0, seq_len);
    size_t want = (size_t)(head_dim / 2) * sizeof(double);
    if (tsr_handle_size(inv_freq) != want)
        return tsr__fail(TSR_EINVAL, "%s: the frequency table has %zu bytes, not %zu (%d "
                                     "doubles)", op, tsr_handle_size(inv_freq), want,
                         head_dim / 2);
    const tsr_codelet_t *cl = inverse ? &cl_rope_bwd : &cl_rope_fwd;
    int rc = TSR_OK;
    for (int j = 0; !rc && j < x->grid_cols; j++) {
        int s0 = (int)((long long)j * x->tile_cols % seq_len);
        for (int i = 0; !rc && i < x->grid_rows; i++) {
            rope_args_t a = {head_dim, tsr__tile_m(x, i) / head_dim, tsr__tile_n(x, j), s0,
                             seq_len, pos0, inverse, 0, 0};
            if (rot_heads) /* the q and k heads of a fused qkv tile */
                a.nh = rot_heads, a.ld = x->rows;
            rc = SUBMIT(*cl, a, ACC(tsr__tile(x, i, j), TSR_RW), ACC(inv_freq, TSR_R));
        }
    }
    return rc;
}

int tsr__op_rope_fwd(tsr_tensor_t *x, int heads, int head_dim, int seq_len, int pos0,
                     tsr_handle_t inv_freq)
{
    return rope_tiles(x, heads, head_dim, seq_len, pos0, inv_freq, 0, 0, "rope_fwd");
}

int tsr__op_rope_bwd(tsr_tensor_t *dx, int heads, int head_dim, int seq_len, int pos0,
                     tsr_handle_t inv_freq)
{
    return rope_tiles(dx, heads, head_dim, seq_len, pos0, inv_freq, 1, 0, "rope_bwd");
}

/* qkv holds heads + 2 kv_heads heads of head_dim rows per column */
int tsr__op_rope_qk_fwd(tsr_tensor_t *qkv, int heads, int kv_heads, int head_dim, int seq_len,
                        int pos0, tsr_handle_t inv_freq)
{
    if (kv_heads <= 0 || heads <= 0 || heads % kv_heads)
        return tsr__fail(TSR_EINVAL, "rope_qk_fwd: %d K/V heads for %d heads", kv_heads, heads);
    return rope_tiles(qkv, heads + 2 * kv_heads, head_dim, seq_len, pos0, inv_freq, 0,
                      heads + kv_heads, "rope_qk_fwd");
}

int tsr__op_rope_qk_bwd(tsr_tensor_t *dqkv, int heads, int kv_heads, int head_dim, int seq_len,
                        int pos0, tsr_handle_t inv_freq)
{
    if (kv_heads <= 0 || heads <= 0 || heads % kv_heads)
        return tsr__fail(TSR_EINVAL, "rope_qk_bwd: %d K/V heads for %d heads", kv_heads, heads);
    return rope_tiles(dqkv, heads + 2 * kv_heads, head_dim, seq_len, pos0, inv_freq, 1,
                      heads + kv_heads, "rope_qk_bwd");
}

int tsr__op_rope_qk_cols(tsr_tensor_t *qkv, int heads, int kv_heads, int head_dim,
                         const int32_t *pos, tsr_handle_t inv_freq)
{
    if (kv_heads <= 0 || heads <= 0 || heads % kv_heads || head_dim < 2 || head_dim % 2 ||
        qkv->grid_rows != 1 || qkv->grid_cols != 1 || tsr__tensor_is_bf16(qkv) ||
        (long long)(heads + 2 * kv_heads) * head_dim != qkv->rows)
        return tsr__fail(TSR_EINVAL, "rope_qk_cols: qkv (%d, %d) in tiles (%d, %d) is not one "
                                     "fp32 tile of %d + 2 x %d heads of %d", qkv->rows,
                         qkv->cols, qkv->tile_rows, qkv->tile_cols, heads, kv_heads, head_dim);
    if (tsr_handle_size(inv_freq) != (size_t)(head_dim / 2) * sizeof(double))
        return tsr__fail(TSR_EINVAL, "rope_qk_cols: the frequency table is not %d doubles",
                         head_dim / 2);
    for (int j = 0; j < qkv->cols; j++) {
        if (pos[j] < 0)
            return tsr__fail(TSR_EINVAL, "rope_qk_cols: position %d of column %d", pos[j], j);
        rope_args_t a = {head_dim, heads + kv_heads, 1, 0, 1, pos[j], 0, qkv->rows, j};
        int rc = SUBMIT(cl_rope_fwd, a, ACC(qkv->tiles[0], TSR_RW), ACC(inv_freq, TSR_R));
        if (rc)
            return rc;
    }
    return TSR_OK;
}

int tsr__rope_table(tsr_handle_t *out, int head_dim, const double *inv_freq)
{
    if (!out || !inv_freq || head_dim < 2 || head_dim % 2)
        return tsr__fail(TSR_EINVAL, "rope_table: a table of an even head dimension >= 2 (%d)",
                         head_dim);
    size_t bytes = (size_t)(head_dim / 2) * sizeof(double);
    tsr_handle_t h;
    void *p;
    int rc = tsr_handle_alloc(&h, bytes);
    if (rc)
        return rc;
    if ((rc = tsr_handle_acquire(h, TSR_W, &p))) {
        tsr_handle_unregister(h);
        return rc;
    }
    memcpy(p, inv_freq, bytes);
    if ((rc = tsr_handle_release(h))) {
        tsr_handle_unregister(h);
        return rc;
    }
    *out = h;
    return TSR_OK;
}

/* ---- embeddings ----------------------------------------------------------- */

typedef tsr__embed_args_t embed_args_t;

/* Tokens of a tile that fall in this vocabulary tile: T nv / V, expected
 * over tokens spread evenly (the kernels skip the others). Each such token
 * adds a column of C: C flops; bytes: the tokens read, and per token a
 * column of w (or dout) read and one of out (or dw) read and written. */
static double embed_hits(const embed_args_t *a)
{
    return a->V > 0 ? (double)a->T * a->nv / a->V : a->T;
}
static double embed_flops(const void *args, const size_t *sizes)
{
    const embed_args_t *a = args;
    (void)sizes;
    return embed_hits(a) * a->C;
}
static double embed_bytes(const void *args, const size_t *sizes)
{
    const embed_args_t *a = args;
    (void)sizes;
    return 4.0 * a->T + 12.0 * embed_hits(a) * a->C;
}

/* out(:, t) += w(:, tokens[t] - v0) for tokens in [v0, v0 + nv)
 *   tokens: (T), w: (C, nv), out: (C, T) */
TILE_CODELET(cl_embed_fwd, "embedding_fwd", 3, embed_args_t, embed_flops, embed_bytes,
             (tsr_cpu_embedding_fwd(a->C, a->T, a->nv, a->v0, buf[0], buf[1], buf[2])),
             (tsr_cuda_embedding_fwd(e->cuda_stream, a->C, a->T, a->nv, a->v0, buf[0], buf[1],
               buf[2])));

/* dw(:, tokens[t] - v0) += dout(:, t)          tokens: (T), dout: (C, T), dw: (C, nv) */
TILE_CODELET(cl_embed_bwd, "embedding_bwd", 3, embed_args_t, embed_flops, embed_bytes,
             (tsr_cpu_embedding_bwd(a->C, a->T, a->nv, a->v0, buf[0], buf[1], buf[2])),
             (tsr_cuda_embedding_bwd(e->cuda_stream, a->C, a->T, a->nv, a->v0, buf[0], buf[1],
               buf[2], e->deterministic)));

int tsr__tokens_tile_ok(int tt, int seq_len, int nseq)
{
    if (tt <= 0 || seq_len <= 0 || nseq <= 0)
        return 0;
    return tt <= seq_len ? seq_len % tt == 0 : tt % seq_len == 0 && nseq % (tt / seq_len) == 0;
}

static int check_embed(const tsr_tensor_t *tokens, const tsr_tensor_t *wte,
                       const tsr_tensor_t *wpe, int seq_len, const tsr_tensor_t *x)
{
    int tt = x->tile_cols;
    if (tokens->rows != 1 || tokens->cols != x->cols || tokens->tile_cols != tt ||
        wte->rows != x->rows || wte->tile_rows != x->tile_rows ||
        (wpe && (wpe->rows != x->rows || wpe->tile_rows != x->tile_rows ||
                 wpe->tile_cols != (tt < seq_len ? tt : seq_len) || seq_len > wpe->cols)) ||
        x->cols % seq_len || !tsr__tokens_tile_ok(tt, seq_len, x->cols / seq_len))
        return tsr__fail(TSR_EINVAL, "embedding: tilings of tokens, tables and activations "
                                     "do not agree (activations (%d, %d) in tiles (%d, %d), "
                                     "table (%d, %d) in tiles (%d, %d))",
                         x->rows, x->cols, x->tile_rows, x->tile_cols, wte->rows, wte->cols,
                         wte->tile_rows, wte->tile_cols);
    return TSR_OK;
}

/* Position rows of token tile j in row tile a (nb whole sequences side by
 * side when the tile is longer than a sequence, else part of one sequence).
 *   forward:  x = wpe rows (W) — a multi-sequence tile is zeroed first, then
 *             wpe's first tile (one whole sequence) is added at each offset;
 *   backward: dwpe += the tile's rows (COMMUTE, or REDUX: acc_of). */
static int embed_positions(const tsr_tensor_t *wpe, int seq_len, int tt, int a, int j,
                           tsr_handle_t x, int backward)
{
    float one = 1.0f;
    if (tt <= seq_len) {
        tsr_handle_t p = tsr__tile(wpe, a, j % (seq_len / tt));
        return backward ? SUBMIT(cl_axpy, one, ACC(x, TSR_R), ACC(p, acc_of(wpe)))
                        : SUBMIT0(cl_copy, ACC(p, TSR_R), ACC(x, TSR_W));
    }
    tsr_handle_t p = tsr__tile(wpe, a, 0);
    size_t seq = (size_t)tsr__tile_m(wpe, a) * (size_t)seq_len;
    int rc = backward ? TSR_OK : tsr__op_fill_handle(x, 0.0f);
    for (int b = 0; !rc && b < tt / seq_len; b++) {
        slice_args_t s = {backward ? b * seq : 0, backward ? 0 : b * seq, seq};
        rc = backward ? SUBMIT(cl_slice_add, s, ACC(x, TSR_R), ACC(p, acc_of(wpe)))
                      : SUBMIT(cl_slice_add, s, ACC(p, TSR_R), ACC(x, TSR_RW));
    }
    return rc;
}

/* Row tile a (channels) of token tile j: one task per vocabulary tile,
 * each copying (adding) the columns of its ids; the tables' and the
 * activations' row tiles match (check_embed), a tile's rows are its ld. */
int tsr__op_embed_fwd(const tsr_tensor_t *tokens, const tsr_tensor_t *wte,
                      const tsr_tensor_t *wpe, int seq_len, tsr_tensor_t *out)
{
    int rc = check_embed(tokens, wte, wpe, seq_len, out);
    for (int a = 0; !rc && a < out->grid_rows; a++)
        for (int j = 0; !rc && j < out->grid_cols; j++) {
            tsr_handle_t o = tsr__tile(out, a, j);
            rc = wpe ? embed_positions(wpe, seq_len, out->tile_cols, a, j, o, 0)
                     : tsr__op_fill_handle(o, 0.0f);
            for (int v = 0; !rc && v < wte->grid_cols; v++) {
                embed_args_t e = {tsr__tile_m(out, a), tsr__tile_n(out, j), tsr__tile_n(wte, v),
                                  v * wte->tile_cols, wte->cols};
                rc = SUBMIT(cl_embed_fwd, e, ACC(tsr__tile(tokens, 0, j), TSR_R),
                            ACC(tsr__tile(wte, a, v), TSR_R), ACC(o, TSR_RW));
            }
        }
    return rc;
}

int tsr__op_embed_bwd(const tsr_tensor_t *tokens, const tsr_tensor_t *dout, int seq_len,
                      tsr_tensor_t *dwte, tsr_tensor_t *dwpe)
{
    int rc = check_embed(tokens, dwte, dwpe, seq_len, dout);
    for (int a = 0; !rc && a < dout->grid_rows; a++)
        for (int j = 0; !rc && j < dout->grid_cols; j++) {
            tsr_handle_t d = tsr__tile(dout, a, j);
            for (int v = 0; !rc && v < dwte->grid_cols; v++) {
                embed_args_t e = {tsr__tile_m(dout, a), tsr__tile_n(dout, j),
                                  tsr__tile_n(dwte, v), v * dwte->tile_cols, dwte->cols};
                rc = SUBMIT(cl_embed_bwd, e, ACC(tsr__tile(tokens, 0, j), TSR_R), ACC(d, TSR_R),
                            ACC(tsr__tile(dwte, a, v), acc_of(dwte)));
            }
            if (!rc && dwpe)
                rc = embed_positions(dwpe, seq_len, dout->tile_cols, a, j, d, 1);
        }
    return rc;
}

/* ---- attention ------------------------------------------------------------ */

typedef tsr__attn_args_t attn_args_t;

/* (query, key) pairs of a tile pair the causal mask lets through: query i
 * (absolute q0 + i) sees clamp(s + i, 0, tk) keys of the tile, s = q0 - k0
 * + 1 (kernels/cpu/attention.c's visible_keys), summed in closed form:
 * queries below a see none, from b on all tk, between them s + i. Times
 * nb sequences side by side. */
double tsr__attn_pairs(int tq, int tk, int nb, int q0, int k0)
{
    double s = (double)q0 - k0 + 1;
    double a = 1 - s, b = tk - s;
    a = a < 0 ? 0 : (a > tq ? tq : a);
    b = b < a ? a : (b > tq ? tq : b);
    double partial = (b - a) * s + (a + b - 1) * (b - a) / 2;
    return ((double)nb) * (partial + (tq - b) * (double)tk);
}

/* The attention tasks take every head of a token tile at once: q, k, v are
 * read in place from the (C, tt) tiles of the fused qkv activation (ld = C,
 * head stride d), o and dout are (C, tt) tiles, and dq, dk, dv are written
 * into the (C, tt) tiles of dqkv (kernels/attention.h's strided views). A
 * tile of nseq whole sequences side by side is nseq kernel calls, one per
 * sequence (the kernels' one head stride cannot also step over sequences);
 * the contiguous state of sequence s (ms, acc, lse, D: heads x tq rows each)
 * follows sequence s - 1's. */
static inline long long attn_hs(const attn_args_t *a)
{
    return a->d; /* heads side by side in a position's C rows */
}

/* query heads per K/V head (arguments written without the field: 1) */
static inline int attn_group(const attn_args_t *a)
{
    return a->kv_group > 0 ? a->kv_group : 1;
}

/* attn_init writes ms and acc */
static double attn_init_bytes(const void *args, const size_t *sizes)
{
    (void)args;
    return (double)sizes[0] + (double)sizes[1];
}

/* ms (2, tq, H, nseq) = (-inf, 0), acc (d, tq, H, nseq) = 0 */
TILE_CODELET(cl_attn_init, "attn_init", 2, attn_args_t, zero_flops, attn_init_bytes,
             (tsr_cpu_attn_init(a->d, a->tq, a->nb * a->nseq, buf[0], buf[1])),
             (tsr_cuda_attn_init(e->cuda_stream, a->d, a->tq, a->nb * a->nseq, buf[0], buf[1])));

/* Per visible pair: q.k (2d), p v into acc (2d), and the online softmax
 * (scale, max, subtraction, exp, sum: 5); the rescale of acc once per 64
 * keys (d per row and block, under 1%) is left out. q, k, v read (their
 * tiles: all heads); ms, acc read and written. */
#ifdef TSR_HAVE_CUDA
/* The attention's matrix products follow the model's: bf16 tensor cores
 * for a bf16 model, TF32 ones for fp32, unless the configuration asks for
 * strict FP32. */
static int attn_prec(const attn_args_t *a, const tsr_exec_t *e)
{
    return e->cuda_fp32 == TSR_CUDA_FP32_STRICT ? TSR_ATTN_FP32
           : a->bf16                            ? TSR_ATTN_BF16
                                                : TSR_ATTN_TF32;
}
#endif
static double attn_flops(const void *args, const size_t *sizes)
{
    const attn_args_t *a = args;
    (void)sizes;
    return tsr__attn_pairs(a->tq, a->tk, a->nb * a->nseq, a->q0, a->k0) * (4.0 * a->d + 5.0);
}
static double attn_fwd_bytes(const void *args, const size_t *sizes)
{
    (void)args;
    return (double)sizes[0] + sizes[1] + sizes[2] + 2.0 * ((double)sizes[3] + sizes[4]);
}
/* q, k, v tiles (C, tt), ms, acc: the pair's update, sequence by sequence */
static void attn_fwd_cpu(const attn_args_t *a, void **buf)
{
    size_t qs = (size_t)a->tq * a->ld, st = (size_t)a->tq * a->nb;
    for (int s = 0; s < a->nseq; s++)
        tsr_cpu_attn_fwd_gqa(a->d, a->tq, a->tk, a->nb, attn_group(a), a->q0, a->k0, a->scale,
                             a->ld, attn_hs(a), (const float *)buf[0] + s * qs,
                             (const float *)buf[1] + a->koff + s * qs,
                             (const float *)buf[2] + a->voff + s * qs,
                             (float *)buf[3] + s * 2 * st, (float *)buf[4] + s * st * a->d);
}
#ifdef TSR_HAVE_CUDA
static int attn_fwd_cuda(const attn_args_t *a, void **buf, const tsr_exec_t *e)
{
    /* every sequence of the tile in one launch */
    return tsr_cuda_attn_fwd_gqa(e->cuda_stream, attn_prec(a, e), a->d, a->tq, a->tk, a->nb,
                                 attn_group(a), a->nseq, a->q0, a->k0, a->scale, a->ld,
                                 attn_hs(a), buf[0], (const float *)buf[1] + a->koff,
                                 (const float *)buf[2] + a->voff, buf[3], buf[4]);
}
#endif
TILE_CODELET(cl_attn_fwd, "attn_fwd", 5, attn_args_t, attn_flops, attn_fwd_bytes,
             attn_fwd_cpu(a, buf), attn_fwd_cuda(a, buf, e));
/* the same for heads wider than the tensor-core kernels take (d above
 * TSR_ATTN_TC_MAX_D): its own name, so that its performance history and a
 * simulated platform's rate (platform.c prices "attn_fwd" on the tensor
 * cores) are those of the FP32 kernels it runs */
TILE_CODELET(cl_attn_fwd_wide, "attn_fwd_wide", 5, attn_args_t, attn_flops, attn_fwd_bytes,
             attn_fwd_cpu(a, buf), attn_fwd_cuda(a, buf, e));

/* Per row: 1/l, d products, m + log l (2); ms, acc read, o (a (C, tt) tile)
 * and lse written. */
static double attn_fin_flops(const void *args, const size_t *sizes)
{
    const attn_args_t *a = args;
    (void)sizes;
    return (double)a->tq * a->nb * a->nseq * (a->d + 3.0);
}
static double attn_fin_bytes(const void *args, const size_t *sizes)
{
    (void)args;
    return (double)sizes[0] + sizes[1] + sizes[2] + sizes[3];
}
/* ms, acc → o (C, tt), lse (H, tt) */
static void attn_fin_cpu(const attn_args_t *a, void **buf)
{
    size_t os = (size_t)a->tq * a->ldo, st = (size_t)a->tq * a->nb;
    for (int s = 0; s < a->nseq; s++)
        tsr_cpu_attn_finalize(a->d, a->tq, a->nb, (const float *)buf[0] + s * 2 * st,
                              (const float *)buf[1] + s * st * a->d, a->ldo, attn_hs(a),
                              (float *)buf[2] + s * os, (float *)buf[3] + s * st);
}
#ifdef TSR_HAVE_CUDA
static int attn_fin_cuda(const attn_args_t *a, void **buf, const tsr_exec_t *e)
{
    size_t os = (size_t)a->tq * a->ldo, st = (size_t)a->tq * a->nb;
    int rc = 0;
    for (int s = 0; !rc && s < a->nseq; s++)
        rc = tsr_cuda_attn_finalize(e->cuda_stream, a->d, a->tq, a->nb,
                                    (const float *)buf[0] + s * 2 * st,
                                    (const float *)buf[1] + s * st * a->d, a->ldo, attn_hs(a),
                                    (float *)buf[2] + s * os, (float *)buf[3] + s * st);
    return rc;
}
#endif
TILE_CODELET(cl_attn_fin, "attn_finalize", 4, attn_args_t, attn_fin_flops, attn_fin_bytes,
             attn_fin_cpu(a, buf), attn_fin_cuda(a, buf, e));

/* Per row a dot product of d (2d); o, dout read, D written. */
static double attn_dot_flops(const void *args, const size_t *sizes)
{
    const attn_args_t *a = args;
    (void)sizes;
    return 2.0 * a->tq * a->nb * a->nseq * a->d;
}
static double attn_dot_bytes(const void *args, const size_t *sizes)
{
    (void)args;
    return (double)sizes[0] + sizes[1] + sizes[2];
}

/* D (H, tt) = rowsum(dout * o) per head       o, dout: (C, tt) tiles */
static void attn_dot_cpu(const attn_args_t *a, void **buf)
{
    size_t os = (size_t)a->tq * a->ldo, st = (size_t)a->tq * a->nb;
    for (int s = 0; s < a->nseq; s++)
        tsr_cpu_attn_bwd_dot(a->d, a->tq, a->nb, a->ldo, attn_hs(a),
                             (const float *)buf[0] + s * os, (const float *)buf[1] + s * os,
                             (float *)buf[2] + s * st);
}
#ifdef TSR_HAVE_CUDA
static int attn_dot_cuda(const attn_args_t *a, void **buf, const tsr_exec_t *e)
{
    size_t os = (size_t)a->tq * a->ldo, st = (size_t)a->tq * a->nb;
    int rc = 0;
    for (int s = 0; !rc && s < a->nseq; s++)
        rc = tsr_cuda_attn_bwd_dot(e->cuda_stream, a->d, a->tq, a->nb, a->ldo, attn_hs(a),
                                   (const float *)buf[0] + s * os, (const float *)buf[1] + s * os,
                                   (float *)buf[2] + s * st);
    return rc;
}
#endif
TILE_CODELET(cl_attn_dot, "attn_bwd_dot", 3, attn_args_t, attn_dot_flops, attn_dot_bytes,
             attn_dot_cpu(a, buf), attn_dot_cuda(a, buf, e));

/* Per visible pair: q.k and dout.v (4d), dv, dk, dq updates (6d), and p, ds
 * (scale, subtraction, exp, subtraction, product, scale: 6). q, k, v, dout,
 * lse, D read; dq, dk, dv read and written (written only by a first
 * contribution). */
static double attn_bwd_flops(const void *args, const size_t *sizes)
{
    const attn_args_t *a = args;
    (void)sizes;
    return tsr__attn_pairs(a->tq, a->tk, a->nb * a->nseq, a->q0, a->k0) * (10.0 * a->d + 6.0);
}
static double attn_bwd_bytes(const void *args, const size_t *sizes)
{
    const attn_args_t *a = args;
    double b = 0;
    for (int i = 0; i < 6; i++)
        b += (double)sizes[i];
    /* a first contribution writes its tile without reading it */
    double q = a->first & TSR_ATTN_FIRST_DQ ? 1.0 : 2.0;
    double kv = a->first & TSR_ATTN_FIRST_DKV ? 1.0 : 2.0;
    return b + q * (double)sizes[6] + kv * ((double)sizes[7] + sizes[8]);
}
/* q, k, v, dout, lse, D → dq, dk, dv accumulated (zeroed first where the
 * pair is their first contribution, a->first: the task covers every head,
 * so the whole (C, tt) tile) */
static void attn_bwd_cpu(const attn_args_t *a, void **buf, const tsr_exec_t *e)
{
    if (a->first & TSR_ATTN_FIRST_DQ)
        tsr_cpu_fill(nelem(e, 6), 0.0f, buf[6]);
    if (a->first & TSR_ATTN_FIRST_DKV) {
        tsr_cpu_fill(nelem(e, 7), 0.0f, buf[7]);
        tsr_cpu_fill(nelem(e, 8), 0.0f, buf[8]);
    }
    size_t qs = (size_t)a->tq * a->ld, os = (size_t)a->tq * a->ldo, st = (size_t)a->tq * a->nb;
    for (int s = 0; s < a->nseq; s++)
        tsr_cpu_attn_bwd_gqa(a->d, a->tq, a->tk, a->nb, attn_group(a), a->q0, a->k0, a->scale,
                             a->ld, attn_hs(a), (const float *)buf[0] + s * qs,
                             (const float *)buf[1] + a->koff + s * qs,
                             (const float *)buf[2] + a->voff + s * qs, a->ldo, attn_hs(a),
                             (const float *)buf[3] + s * os, (const float *)buf[4] + s * st,
                             (const float *)buf[5] + s * st, (float *)buf[6] + s * qs,
                             (float *)buf[7] + a->koff + s * qs,
                             (float *)buf[8] + a->voff + s * qs);
}
#ifdef TSR_HAVE_CUDA
static int attn_bwd_cuda(const attn_args_t *a, void **buf, const tsr_exec_t *e)
{
    int rc = 0;
    if (a->first & TSR_ATTN_FIRST_DQ)
        rc = tsr_cuda_fill(e->cuda_stream, nelem(e, 6), 0.0f, buf[6]);
    if (!rc && (a->first & TSR_ATTN_FIRST_DKV))
        rc = tsr_cuda_fill(e->cuda_stream, nelem(e, 7), 0.0f, buf[7]);
    if (!rc && (a->first & TSR_ATTN_FIRST_DKV))
        rc = tsr_cuda_fill(e->cuda_stream, nelem(e, 8), 0.0f, buf[8]);
    if (!rc) /* every sequence of the tile in one launch */
        rc = tsr_cuda_attn_bwd_gqa(e->cuda_stream, attn_prec(a, e), a->d, a->tq, a->tk, a->nb,
                                   attn_group(a), a->nseq, a->q0, a->k0, a->scale, a->ld,
                                   attn_hs(a), buf[0], (const float *)buf[1] + a->koff,
                                   (const float *)buf[2] + a->voff, a->ldo, attn_hs(a), buf[3],
                                   buf[4], buf[5], buf[6], (float *)buf[7] + a->koff,
                                   (float *)buf[8] + a->voff);
    return rc;
}
#endif
TILE_CODELET(cl_attn_bwd, "attn_bwd", 9, attn_args_t, attn_bwd_flops, attn_bwd_bytes,
             attn_bwd_cpu(a, buf, e), attn_bwd_cuda(a, buf, e));
TILE_CODELET(cl_attn_bwd_wide, "attn_bwd_wide", 9, attn_args_t, attn_bwd_flops, attn_bwd_bytes,
             attn_bwd_cpu(a, buf, e), attn_bwd_cuda(a, buf, e));

/* How token tiles map onto sequences: a tile is either part of one sequence
 * (per_seq tiles of tq tokens each) or nseq whole sequences side by side.
 * C = heads d query rows, Ckv = kv_heads d rows each of k and v; fused: q,
 * k, v in one (C + 2 Ckv, tt) tile row; else q, k, v are R tile rows each
 * of tc = C / R rows (whole heads: tc a multiple of d, R = 1 the common
 * case), nb = heads / R heads per tile, and every tensor of the attention
 * (y, lse, ms, acc, D) is cut into R tile rows alike (channel tiles). */
typedef struct attn_layout {
    int d, tq, nseq, per_seq, groups;
    float scale;
    int C, Ckv, kv_group, fused;
    int R, nb; /* head row tiles, heads per tile */
} attn_layout_t;

static attn_layout_t attn_layout(const tsr_tensor_t *qkv, int heads, int kv_heads, int seq_len)
{
    attn_layout_t L;
    int tt = qkv->tile_cols;
    L.C = (int)((long long)qkv->rows * heads / (heads + 2LL * kv_heads));
    L.Ckv = L.C / heads * kv_heads;
    L.kv_group = heads / kv_heads;
    L.fused = qkv->tile_rows == qkv->rows;
    L.d = L.C / heads;
    L.R = L.fused || qkv->tile_rows <= 0 ? 1 : L.C / qkv->tile_rows;
    if (L.R < 1)
        L.R = 1;
    L.nb = heads / L.R;
    L.tq = tt < seq_len ? tt : seq_len;
    L.nseq = tt / L.tq;
    L.per_seq = seq_len / L.tq;
    L.groups = qkv->grid_cols / L.per_seq;
    L.scale = 1.0f / sqrtf((float)L.d);
    return L;
}

/* tensor t is (rows, qkv's columns) in tiles of (rows / R, qkv's token
 * tile): R tile rows, one per head row tile */
static int attn_tiles_ok(const tsr_tensor_t *t, int rows, int R, const tsr_tensor_t *qkv)
{
    return t->rows == rows && (long long)t->tile_rows * R == rows && t->cols == qkv->cols &&
           t->tile_cols == qkv->tile_cols && !tsr__tensor_is_bf16(t);
}

static int check_attn(const tsr_tensor_t *qkv, int heads, int kv_heads, int seq_len,
                      const tsr_tensor_t *y, const tsr_tensor_t *lse)
{
    if (heads <= 0 || kv_heads <= 0 || heads % kv_heads)
        return tsr__fail(TSR_EINVAL, "attention: %d K/V heads do not divide %d query heads",
                         kv_heads, heads);
    long long parts = heads + 2LL * kv_heads; /* qkv rows in units of d */
    if (qkv->rows % parts)
        return tsr__fail(TSR_EINVAL, "attention: qkv has %d rows, not C + 2 C %d / %d for "
                                     "any head size",
                         qkv->rows, kv_heads, heads);
    attn_layout_t L = attn_layout(qkv, heads, kv_heads, seq_len);
    int split = kv_heads == heads && qkv->tile_rows > 0 && L.C % qkv->tile_rows == 0 &&
                qkv->tile_rows % L.d == 0;
    if (!L.fused && !split)
        return tsr__fail(TSR_EINVAL, "attention: qkv (%d, %d) in tiles of %d rows: q, k, v "
                                     "must be one tile row of %d (or, with as many K/V heads "
                                     "as query heads, tiles of whole heads of %d rows that "
                                     "divide %d)",
                         qkv->rows, qkv->cols, qkv->tile_rows, qkv->rows, L.d, L.C);
    int C = L.C;
    if (tsr__tensor_is_bf16(qkv) || !attn_tiles_ok(y, C, L.R, qkv) ||
        !attn_tiles_ok(lse, heads, L.R, qkv) || seq_len <= 0 || qkv->cols % seq_len ||
        !tsr__tokens_tile_ok(qkv->tile_cols, seq_len, qkv->cols / seq_len))
        return tsr__fail(TSR_EINVAL, "attention: qkv (%d, %d) in tiles (%d, %d) does not fit "
                                     "%d heads over sequences of %d (y and lse in %d tile "
                                     "rows, one per head row tile of qkv)",
                         qkv->rows, qkv->cols, qkv->tile_rows, qkv->tile_cols, heads, seq_len,
                         L.R);
    return TSR_OK;
}

/* The arguments of the pair (query tile qi, key tile ki) of a head row
 * tile's nb heads */
static attn_args_t attn_args(const attn_layout_t *L, int qi, int ki, int bf16)
{
    int tc = L->C / L->R;
    int ld = L->fused ? L->C + 2 * L->Ckv : tc;
    attn_args_t a = {L->d,    L->tq,   L->tq,       L->nb,       qi * L->tq,
                     ki * L->tq, L->scale, 0,        L->nseq,     ld,
                     tc,      bf16 != 0, L->kv_group, L->fused ? L->C : 0,
                     L->fused ? L->C + L->Ckv : 0};
    return a;
}

/* The tiles of q (query tile j), k and v (key tile jk) of head row tile r */
static tsr_handle_t attn_q(const tsr_tensor_t *t, int r, int j)
{
    return tsr__tile(t, r, j);
}
static tsr_handle_t attn_k(const tsr_tensor_t *t, const attn_layout_t *L, int r, int jk)
{
    return tsr__tile(t, L->fused ? 0 : L->R + r, jk);
}
static tsr_handle_t attn_v(const tsr_tensor_t *t, const attn_layout_t *L, int r, int jk)
{
    return tsr__tile(t, L->fused ? 0 : 2 * L->R + r, jk);
}

int tsr__op_attention_gqa_fwd(const tsr_tensor_t *qkv, int heads, int kv_heads, int seq_len,
                              int bf16, tsr_tensor_t *ms, tsr_tensor_t *acc, tsr_tensor_t *y,
                              tsr_tensor_t *lse)
{
    int rc = check_attn(qkv, heads, kv_heads, seq_len, y, lse);
    if (rc)
        return rc;
    attn_layout_t L = attn_layout(qkv, heads, kv_heads, seq_len);
    const tsr_codelet_t *fwd = L.d <= TSR_ATTN_TC_MAX_D ? &cl_attn_fwd : &cl_attn_fwd_wide;
    int C = L.C;
    if (!attn_tiles_ok(ms, 2 * heads, L.R, qkv) || !attn_tiles_ok(acc, C, L.R, qkv))
        return tsr__fail(TSR_EINVAL, "attention: the state ms (%d, %d) in tiles (%d, %d) and acc "
                                     "(%d, %d) in tiles (%d, %d) do not fit qkv",
                         ms->rows, ms->cols, ms->tile_rows, ms->tile_cols, acc->rows, acc->cols,
                         acc->tile_rows, acc->tile_cols);
    for (int g = 0; g < L.groups; g++)
        for (int qi = 0; qi < L.per_seq; qi++)
            for (int r = 0; r < L.R; r++) { /* head row tile r, query tile j */
                int j = g * L.per_seq + qi;
                tsr_handle_t hms = tsr__tile(ms, r, j), hacc = tsr__tile(acc, r, j);
                attn_args_t a = attn_args(&L, qi, 0, bf16);
                if ((rc = SUBMIT(cl_attn_init, a, ACC(hms, TSR_W), ACC(hacc, TSR_W))))
                    return rc;
                for (int ki = 0; ki <= qi; ki++) {
                    int jk = g * L.per_seq + ki;
                    a.k0 = ki * L.tq;
                    if ((rc = SUBMIT(*fwd, a, ACC(attn_q(qkv, r, j), TSR_R),
                                     ACC(attn_k(qkv, &L, r, jk), TSR_R),
                                     ACC(attn_v(qkv, &L, r, jk), TSR_R), ACC(hms, TSR_RW),
                                     ACC(hacc, TSR_RW))))
                        return rc;
                }
                if ((rc = SUBMIT(cl_attn_fin, a, ACC(hms, TSR_R), ACC(hacc, TSR_R),
                                 ACC(tsr__tile(y, r, j), TSR_W),
                                 ACC(tsr__tile(lse, r, j), TSR_W))))
                    return rc;
            }
    return TSR_OK;
}

int tsr__op_attention_fwd(const tsr_tensor_t *qkv, int heads, int seq_len, int bf16,
                          tsr_tensor_t *ms, tsr_tensor_t *acc, tsr_tensor_t *y, tsr_tensor_t *lse)
{
    return tsr__op_attention_gqa_fwd(qkv, heads, heads, seq_len, bf16, ms, acc, y, lse);
}

int tsr__op_attention_gqa_bwd(const tsr_tensor_t *qkv, int heads, int kv_heads, int seq_len,
                              int bf16, const tsr_tensor_t *y, const tsr_tensor_t *dy,
                              const tsr_tensor_t *lse, tsr_tensor_t *D, tsr_tensor_t *dqkv)
{
    int rc = check_attn(qkv, heads, kv_heads, seq_len, y, lse);
    if (!rc)
        rc = same_tiling(y, dy, "attention_bwd");
    if (!rc)
        rc = same_tiling(qkv, dqkv, "attention_bwd");
    if (!rc)
        rc = same_tiling(lse, D, "attention_bwd");
    if (rc)
        return rc;
    attn_layout_t L = attn_layout(qkv, heads, kv_heads, seq_len);
    const tsr_codelet_t *bwd = L.d <= TSR_ATTN_TC_MAX_D ? &cl_attn_bwd : &cl_attn_bwd_wide;
    for (int g = 0; g < L.groups; g++)
        for (int qi = 0; qi < L.per_seq; qi++)
            for (int r = 0; r < L.R; r++) { /* head row tile r, query tile j */
                int j = g * L.per_seq + qi;
                attn_args_t a = attn_args(&L, qi, 0, bf16);
                if ((rc = SUBMIT(cl_attn_dot, a, ACC(tsr__tile(y, r, j), TSR_R),
                                 ACC(tsr__tile(dy, r, j), TSR_R),
                                 ACC(tsr__tile(D, r, j), TSR_W))))
                    return rc;
                /* In this order, query tile qi's dq first hears from key tile
                 * 0, and key tile ki's dk, dv from query tile ki: those pairs
                 * overwrite (zeroing first in the task), so dqkv needs no
                 * fill. Fused, dq, dk, dv share a tile, first touched by the
                 * pair (qi, 0), which zeroes all of it (dq's first
                 * contribution). */
                for (int ki = 0; ki <= qi; ki++) {
                    int jk = g * L.per_seq + ki;
                    a.k0 = ki * L.tq;
                    int fdq = ki == 0, fdkv = !L.fused && ki == qi;
                    a.first = (fdq ? TSR_ATTN_FIRST_DQ : 0) | (fdkv ? TSR_ATTN_FIRST_DKV : 0);
                    tsr_mode_t mq = fdq ? TSR_W : TSR_RW, mkv = fdkv ? TSR_W : TSR_RW;
                    if (L.fused && jk == j)
                        mkv = mq; /* one tile: dq's mode is the tile's */
                    if ((rc = SUBMIT(*bwd, a, ACC(attn_q(qkv, r, j), TSR_R),
                                     ACC(attn_k(qkv, &L, r, jk), TSR_R),
                                     ACC(attn_v(qkv, &L, r, jk), TSR_R),
                                     ACC(tsr__tile(dy, r, j), TSR_R),
                                     ACC(tsr__tile(lse, r, j), TSR_R),
                                     ACC(tsr__tile(D, r, j), TSR_R),
                                     ACC(attn_q(dqkv, r, j), mq),
                                     ACC(attn_k(dqkv, &L, r, jk), mkv),
                                     ACC(attn_v(dqkv, &L, r, jk), mkv))))
                        return rc;
                }
            }
    return TSR_OK;
}

int tsr__op_attention_bwd(const tsr_tensor_t *qkv, int heads, int seq_len, int bf16,
                          const tsr_tensor_t *y, const tsr_tensor_t *dy,
                          const tsr_tensor_t *lse, tsr_tensor_t *D, tsr_tensor_t *dqkv)
{
    return tsr__op_attention_gqa_bwd(qkv, heads, heads, seq_len, bf16, y, dy, lse, D, dqkv);
}

/* ---- cross-entropy -------------------------------------------------------- */

typedef tsr__xent_args_t xent_args_t;

/* maxsumexp per column of nv logits: max (nv), exp sum (3 nv), the merge
 * (5); logits read, ms written (read too when accumulating). */
static double mse_flops(const void *args, const size_t *sizes)
{
    const xent_args_t *a = args;
    (void)sizes;
    return (double)a->T * (4.0 * a->nv + (a->accumulate ? 5.0 : 0.0));
}
static double mse_bytes(const void *args, const size_t *sizes)
{
    const xent_args_t *a = args;
    (void)sizes;
    return 4.0 * a->nv * a->T + (a->accumulate ? 16.0 : 8.0) * a->T;
}
/* logsumexp per column: log and add; ms read, lse written */
static double lse_flops(const void *args, const size_t *sizes)
{
    (void)sizes;
    return 2.0 * ((const xent_args_t *)args)->T;
}
static double lse_bytes(const void *args, const size_t *sizes)
{
    (void)sizes;
    return 12.0 * ((const xent_args_t *)args)->T;
}
/* crossentropy_fwd: at most one target per column in the tile (an upper
 * bound: the kernel skips targets outside it): a subtraction and an add;
 * targets, lse read, the logit read, loss read and written. */
static double xent_fwd_flops(const void *args, const size_t *sizes)
{
    (void)sizes;
    return 2.0 * ((const xent_args_t *)args)->T;
}
static double xent_fwd_bytes(const void *args, const size_t *sizes)
{
    (void)sizes;
    return 20.0 * ((const xent_args_t *)args)->T;
}
/* crossentropy_bwd per logit: subtraction, exp, scale (3), per column the
 * target's subtraction; logits read and written in place, lse, targets read. */
static double xent_bwd_flops(const void *args, const size_t *sizes)
{
    const xent_args_t *a = args;
    (void)sizes;
    return (double)a->T * (3.0 * a->nv + 1.0);
}
static double xent_bwd_bytes(const void *args, const size_t *sizes)
{
    const xent_args_t *a = args;
    (void)sizes;
    return 8.0 * a->nv * a->T + 8.0 * a->T;
}

/* ms (2, T) = state of the columns of logits (nv, T), merged when accumulating */
TILE_CODELET(cl_maxsumexp, "maxsumexp", 2, xent_args_t, mse_flops, mse_bytes,
             (tsr_cpu_maxsumexp(a->nv, a->T, buf[0], a->nv, buf[1], a->accumulate)),
             (tsr_cuda_maxsumexp(e->cuda_stream, a->nv, a->T, buf[0], a->nv, buf[1],
               a->accumulate)));

/* lse (T) = logsumexp of ms (2, T) */
TILE_CODELET(cl_logsumexp, "logsumexp", 2, xent_args_t, lse_flops, lse_bytes,
             (tsr_cpu_logsumexp(a->T, buf[0], buf[1])),
             (tsr_cuda_logsumexp(e->cuda_stream, a->T, buf[0], buf[1])));

/* loss (T) += lse - logit of the target, for targets in this vocabulary tile */
TILE_CODELET(cl_xent_fwd, "crossentropy_fwd", 4, xent_args_t, xent_fwd_flops, xent_fwd_bytes,
             (tsr_cpu_crossentropy_fwd(a->nv, a->T, a->v0, buf[0], a->nv, buf[1], buf[2],
               buf[3])),
             (tsr_cuda_crossentropy_fwd(e->cuda_stream, a->nv, a->T, a->v0, buf[0], a->nv,
               buf[1], buf[2], buf[3])));

/* logits (nv, T) = scale * (softmax - onehot), in place */
TILE_CODELET(cl_xent_bwd, "crossentropy_bwd", 3, xent_args_t, xent_bwd_flops, xent_bwd_bytes,
             (tsr_cpu_crossentropy_bwd(a->nv, a->T, a->v0, buf[0], a->nv, buf[1], buf[2],
               a->scale, buf[0], a->nv)),
             (tsr_cuda_crossentropy_bwd(e->cuda_stream, a->nv, a->T, a->v0, buf[0], a->nv,
               buf[1], buf[2], a->scale, buf[0], a->nv)));

static int check_xent(const tsr_tensor_t *logits, const tsr_tensor_t *row)
{
    if (row->cols != logits->cols || row->tile_cols != logits->tile_cols)
        return tsr__fail(TSR_EINVAL, "crossentropy: per-token tensors do not follow the "
                                     "logits' token tiles");
    return TSR_OK;
}

int tsr__op_xent_fwd(const tsr_tensor_t *logits, const tsr_tensor_t *targets,
                     tsr_tensor_t *ms, tsr_tensor_t *lse, tsr_tensor_t *loss)
{
    int rc = check_xent(logits, targets);
    if (!rc)
        rc = check_xent(logits, ms);
    if (!rc)
        rc = check_xent(logits, lse);
    if (!rc)
        rc = check_xent(logits, loss);
    for (int j = 0; !rc && j < logits->grid_cols; j++) {
        xent_args_t a = {0, tsr__tile_n(logits, j), 0, 0, 0.0f};
        tsr_handle_t hms = tsr__tile(ms, 0, j), hl = tsr__tile(lse, 0, j);
        for (int v = 0; !rc && v < logits->grid_rows; v++) {
            a.nv = tsr__tile_m(logits, v);
            a.accumulate = v > 0;
            rc = SUBMIT(cl_maxsumexp, a, ACC(tsr__tile(logits, v, j), TSR_R),
                        ACC(hms, v ? TSR_RW : TSR_W));
        }
        if (!rc)
            rc = SUBMIT(cl_logsumexp, a, ACC(hms, TSR_R), ACC(hl, TSR_W));
        if (!rc)
            rc = tsr__op_fill_handle(tsr__tile(loss, 0, j), 0.0f);
        for (int v = 0; !rc && v < logits->grid_rows; v++) {
            a.nv = tsr__tile_m(logits, v);
            a.v0 = v * logits->tile_rows;
            rc = SUBMIT(cl_xent_fwd, a, ACC(tsr__tile(logits, v, j), TSR_R), ACC(hl, TSR_R),
                        ACC(tsr__tile(targets, 0, j), TSR_R),
                        ACC(tsr__tile(loss, 0, j), TSR_RW));
        }
    }
    return rc;
}

int tsr__op_xent_bwd(tsr_tensor_t *logits, const tsr_tensor_t *targets,
                     const tsr_tensor_t *lse, float scale)
{
    int rc = check_xent(logits, targets);
    if (!rc)
        rc = check_xent(logits, lse);
    for (int j = 0; !rc && j < logits->grid_cols; j++)
        for (int v = 0; !rc && v < logits->grid_rows; v++) {
            xent_args_t a = {tsr__tile_m(logits, v), tsr__tile_n(logits, j),
                             v * logits->tile_rows, 0, scale};
            rc = SUBMIT(cl_xent_bwd, a, ACC(tsr__tile(logits, v, j), TSR_RW),
                        ACC(tsr__tile(lse, 0, j), TSR_R), ACC(tsr__tile(targets, 0, j), TSR_R));
        }
    return rc;
}

/* ---- optimizer ------------------------------------------------------------ */

/* sumsq: x read, the accumulator read and written */
static double sumsq_bytes(const void *args, const size_t *sizes)
{
    (void)args;
    return (double)sizes[0] + 8.0;
}

/* acc[0] += sum x^2                           x: (n) */
TILE_CODELET(cl_sumsq, "sumsq", 2, void, two_n, sumsq_bytes,
             (tsr_cpu_sumsq(nelem(e, 0), buf[0], buf[1])),
             (tsr_cuda_sumsq(e->cuda_stream, nelem(e, 0), buf[0], buf[1], e->deterministic)));

int tsr__op_sumsq(const tsr_tensor_t *x, tsr_handle_t acc)
{
    return tsr__op_sumsq_tiles(x->tiles, (size_t)x->grid_rows * x->grid_cols, acc);
}

/* The grouped form: buffers x_0 … x_{k-1}, then the accumulator. */
static double sumsq_k_flops(const void *args, const size_t *sizes)
{
    double f = 0;
    for (int i = 0; i < *(const int *)args; i++)
        f += two_n(NULL, sizes + i);
    return f;
}
static double sumsq_k_bytes(const void *args, const size_t *sizes)
{
    double b = 8.0;
    for (int i = 0; i < *(const int *)args; i++)
        b += (double)sizes[i];
    return b;
}
static int sumsq_k_cpu(void **buf, const void *args, const tsr_exec_t *e)
{
    int k = *(const int *)args;
    for (int i = 0; i < k; i++)
        tsr_cpu_sumsq(nelem(e, i), buf[i], buf[k]);
    return 0;
}
#ifdef TSR_HAVE_CUDA
static int sumsq_k_cuda(void **buf, const void *args, const tsr_exec_t *e)
{
    int k = *(const int *)args, rc = 0;
    for (int i = 0; !rc && i < k; i++)
        rc = tsr_cuda_sumsq(e->cuda_stream, nelem(e, i), buf[i], buf[k], e->deterministic);
    return rc;
}
#endif
#define SUMSQ_MAX (TSR_MAX_BUFFERS - 1)
#define SUMSQ_CL(k) CODELET(cl_sumsq_##k, "sumsq_tiles", (k) + 1, sumsq_k_cpu, sumsq_k_cuda, \
                            sumsq_k_flops, sumsq_k_bytes)
SUMSQ_CL(2); SUMSQ_CL(3); SUMSQ_CL(4); SUMSQ_CL(5); SUMSQ_CL(6); SUMSQ_CL(7); SUMSQ_CL(8);
SUMSQ_CL(9); SUMSQ_CL(10); SUMSQ_CL(11); SUMSQ_CL(12); SUMSQ_CL(13); SUMSQ_CL(14); SUMSQ_CL(15);
_Static_assert(SUMSQ_MAX == 15, "one sumsq_tiles codelet per tile count");
/* k = 1 is the plain sumsq codelet (its argument block is empty) */
static const tsr_codelet_t *const cl_sumsq_k[SUMSQ_MAX + 1] = {
    NULL,          NULL,          &cl_sumsq_2,  &cl_sumsq_3,  &cl_sumsq_4,  &cl_sumsq_5,
    &cl_sumsq_6,   &cl_sumsq_7,   &cl_sumsq_8,  &cl_sumsq_9,  &cl_sumsq_10, &cl_sumsq_11,
    &cl_sumsq_12,  &cl_sumsq_13,  &cl_sumsq_14, &cl_sumsq_15,
};

int tsr__op_sumsq_tiles(const tsr_handle_t *tiles, size_t n, tsr_handle_t acc)
{
    int rc = TSR_OK;
    for (size_t i = 0; !rc && i < n; i += SUMSQ_MAX) {
        int k = n - i < SUMSQ_MAX ? (int)(n - i) : SUMSQ_MAX;
        if (k == 1) {
            rc = SUBMIT0(cl_sumsq, ACC(tiles[i], TSR_R), ACC(acc, TSR_COMMUTE));
            continue;
        }
        tsr_access_t a[SUMSQ_MAX + 1];
        for (int j = 0; j < k; j++)
            a[j] = (tsr_access_t){tiles[i + j], TSR_R};
        a[k] = (tsr_access_t){acc, TSR_COMMUTE};
        rc = submit(cl_sumsq_k[k], &k, sizeof k, k + 1, a);
    }
    return rc;
}

/* AdamW per element: the scaled gradient 1, m 3, v 4, bias corrections 2,
 * sqrt, eps, division 3, decay and step 4 (17); g read (and written, zeroed,
 * when the update consumes it), p, m, v read and written. */
static double adamw_flops(const void *args, const size_t *sizes)
{
    (void)args;
    return 17.0 * n0(sizes);
}
static double adamw_bytes(const void *args, const size_t *sizes)
{
    const tsr_adamw_args_t *a = args;
    return (a && a->zero_grad ? 8.0 : 7.0) * (double)sizes[0];
}

/* g, p, m, v: (n); p, m, v updated; g zeroed when args.zero_grad */
TILE_CODELET(cl_adamw, "adamw", 4, tsr_adamw_args_t, adamw_flops, adamw_bytes,
             (tsr_cpu_adamw(nelem(e, 0), a->step, a->lr, a->beta1, a->beta2, a->eps,
               a->weight_decay, a->grad_scale, buf[0], buf[1], buf[2], buf[3], NULL,
               a->zero_grad)),
             (tsr_cuda_adamw(e->cuda_stream, nelem(e, 0), a->step, a->lr, a->beta1, a->beta2,
               a->eps, a->weight_decay, a->grad_scale, buf[0], buf[1], buf[2], buf[3], NULL,
               a->zero_grad)));

/* The same, also writing the updated p's bf16 copy in the same pass. */
static double adamw_bf16_bytes(const void *args, const size_t *sizes)
{
    return adamw_bytes(args, sizes) + 0.5 * (double)sizes[0];
}
/* g, p, m, v: (n) fp32; pb: (n) bf16 = bf16(the updated p) */
TILE_CODELET(cl_adamw_bf16, "adamw_bf16", 5, tsr_adamw_args_t, adamw_flops, adamw_bf16_bytes,
             (tsr_cpu_adamw(nelem(e, 0), a->step, a->lr, a->beta1, a->beta2, a->eps,
               a->weight_decay, a->grad_scale, buf[0], buf[1], buf[2], buf[3], buf[4],
               a->zero_grad)),
             (tsr_cuda_adamw(e->cuda_stream, nelem(e, 0), a->step, a->lr, a->beta1, a->beta2,
               a->eps, a->weight_decay, a->grad_scale, buf[0], buf[1], buf[2], buf[3],
               buf[4], a->zero_grad)));

int tsr__op_adamw(const tsr_adamw_args_t *args, const tsr_tensor_t *g, tsr_tensor_t *p,
                  tsr_tensor_t *m, tsr_tensor_t *v, tsr_tensor_t *pb)
{
    int rc = same_tiling(g, p, "adamw");
    if (!rc && pb)
        rc = same_tiling(p, pb, "adamw");
    size_t ntiles = (size_t)p->grid_rows * p->grid_cols;
    tsr_mode_t gm = args->zero_grad ? TSR_RW : TSR_R;
    for (size_t i = 0; !rc && i < ntiles; i++)
        rc = pb ? SUBMIT(cl_adamw_bf16, *args, ACC(g->tiles[i], gm), ACC(p->tiles[i], TSR_RW),
                         ACC(m->tiles[i], TSR_RW), ACC(v->tiles[i], TSR_RW),
                         ACC(pb->tiles[i], TSR_W))
                : SUBMIT(cl_adamw, *args, ACC(g->tiles[i], gm), ACC(p->tiles[i], TSR_RW),
                         ACC(m->tiles[i], TSR_RW), ACC(v->tiles[i], TSR_RW));
    return rc;
}

/* ---- bf16 (mixed precision) ----------------------------------------------- */

/* Tiles of bf16 tensors hold 2-byte elements; every codelet below computes
 * in fp32 (the kernels above, unchanged) and only rounds what it stores.
 * A kernel that has no bf16 output of its own writes its fp32 result into a
 * TSR_SCRATCH buffer (private to the worker, no dependency) and converts it
 * into the bf16 tile in the same task: the fp32 tile never exists as data. */

/* Where one call's status decides, the first failure of two calls. */
#define CUDA_THEN(first, second)                                                \
    do {                                                                        \
        int rc_ = (first);                                                      \
        return rc_ ? rc_ : (second);                                            \
    } while (0)

/* Conversions of a whole tile: n elements, 4 + 2 bytes each. */
static double convert_bytes(const void *args, const size_t *sizes)
{
    (void)args;
    return 6.0 * (double)(sizes[1] > sizes[0] ? sizes[1] : sizes[0]) / 4.0;
}
/* y = bf16(x)                                 x: (n) fp32, y: (n) bf16 */
TILE_CODELET(cl_to_bf16, "f32_to_bf16", 2, void, zero_flops, convert_bytes,
             (tsr_cpu_f32_to_bf16(nelem(e, 0), buf[0], buf[1])),
             (tsr_cuda_f32_to_bf16(e->cuda_stream, nelem(e, 0), buf[0], buf[1])));
/* y = float(x)                                x: (n) bf16, y: (n) fp32 */
TILE_CODELET(cl_to_f32, "bf16_to_f32", 2, void, zero_flops, convert_bytes,
             (tsr_cpu_bf16_to_f32(nelem(e, 1), buf[0], buf[1])),
             (tsr_cuda_bf16_to_f32(e->cuda_stream, nelem(e, 1), buf[0], buf[1])));

int tsr__op_convert(const tsr_tensor_t *x, tsr_tensor_t *y)
{
    int xb = tsr__tensor_is_bf16(x), yb = tsr__tensor_is_bf16(y);
    if (xb == yb)
        return tsr__fail(TSR_EINVAL, "convert: both tensors are %s", xb ? "bf16" : "fp32");
    return tilewise(yb ? &cl_to_bf16 : &cl_to_f32, x, TSR_R, y, TSR_W, "convert");
}

/* Whether the scratch handle holds `bytes`. */
static int check_scratch(tsr_handle_t scratch, size_t bytes, const char *op)
{
    if (tsr_handle_size(scratch) < bytes)
        return tsr__fail(TSR_EINVAL, "%s: the scratch handle holds %zu bytes, a tile needs %zu",
                         op, tsr_handle_size(scratch), bytes);
    return TSR_OK;
}

/* The largest tile of x, in bytes of fp32. */
static size_t max_tile_f32(const tsr_tensor_t *x)
{
    return (size_t)x->tile_rows * (size_t)x->tile_cols * 4;
}

static int check_dtypes(const tsr_tensor_t *f32, const tsr_tensor_t *bf, const char *op)
{
    if (tsr__tensor_is_bf16(f32) || !tsr__tensor_is_bf16(bf))
        return tsr__fail(TSR_EINVAL, "%s: wants an fp32 input and a bf16 output", op);
    return TSR_OK;
}

/* LayerNorm forward into bf16: the fp32 kernel's estimates, the output
 * written in 2 bytes instead of 4 (and the scratch written and read). */
static double ln_fwd_bf16_bytes(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    return ln_fwd_bytes(args, sizes) + 6.0 * a->m * a->n;
}
/* x (C, T) → out (C, T) bf16, mean, rstd (T); gamma, beta (C); scratch (C, T) */
static int ln_fwd_bf16_cpu(void **buf, const void *args, const tsr_exec_t *e)
{
    const mn_args_t *a = args;
    (void)e;
    tsr_cpu_layernorm_fwd(a->m, a->n, buf[0], buf[1], buf[2], LN_EPS, buf[6], buf[4], buf[5]);
    tsr_cpu_f32_to_bf16((size_t)a->m * a->n, buf[6], buf[3]);
    return 0;
}
#ifdef TSR_HAVE_CUDA
static int ln_fwd_bf16_cuda(void **buf, const void *args, const tsr_exec_t *e)
{
    const mn_args_t *a = args;
    CUDA_THEN(tsr_cuda_layernorm_fwd(e->cuda_stream, a->m, a->n, buf[0], buf[1], buf[2], LN_EPS,
                                     buf[6], buf[4], buf[5]),
              tsr_cuda_f32_to_bf16(e->cuda_stream, (size_t)a->m * a->n, buf[6], buf[3]));
}
#endif
CODELET(cl_ln_fwd_bf16, "layernorm_fwd_bf16", 7, ln_fwd_bf16_cpu, ln_fwd_bf16_cuda,
        ln_fwd_flops, ln_fwd_bf16_bytes);

int tsr__op_layernorm_fwd_bf16(const tsr_tensor_t *x, const tsr_tensor_t *gamma,
                               const tsr_tensor_t *beta, tsr_tensor_t *out, tsr_tensor_t *mean,
                               tsr_tensor_t *rstd, tsr_handle_t scratch, tsr_tensor_t *part)
{
    const char *op = "layernorm_fwd_bf16";
    int rc = check_ln(x, mean, op);
    if (!rc)
        rc = check_ln(x, rstd, op);
    if (!rc)
        rc = same_tiling(x, out, op);
    if (!rc)
        rc = check_dtypes(x, out, op);
    if (!rc)
        rc = check_scratch(scratch, max_tile_f32(x), op);
    if (!rc)
        rc = check_ln_param(gamma, "gamma", x, op);
    if (!rc)
        rc = check_ln_param(beta, "beta", x, op);
    if (!rc && x->grid_rows > 1) /* over row tiles, the apply into bf16 */
        return (rc = check_ln_part(part, x, op)) ? rc
                                                 : ln_fwd_rows(x, gamma, beta, out, mean, rstd,
                                                               part, scratch);
    for (int j = 0; !rc && j < x->grid_cols; j++) {
        mn_args_t a = {x->rows, tsr__tile_n(x, j)};
        rc = SUBMIT(cl_ln_fwd_bf16, a, ACC(tsr__tile(x, 0, j), TSR_R),
                    ACC(gamma->tiles[0], TSR_R), ACC(beta->tiles[0], TSR_R),
                    ACC(tsr__tile(out, 0, j), TSR_W), ACC(tsr__tile(mean, 0, j), TSR_W),
                    ACC(tsr__tile(rstd, 0, j), TSR_W), ACC(scratch, TSR_SCRATCH));
    }
    return rc;
}

/* LayerNorm backward, then dx rounded into dx16 (the bf16 input of the
 * GEMMs that read the same gradient next): dx read once more, dx16 written. */
static double ln_bwd_bf16_bytes(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    return ln_bwd_bytes(args, sizes) + 6.0 * a->m * a->n;
}
/* as layernorm_bwd; buffer 8: dx16 (C, T) bf16 = bf16(dx) */
static int ln_bwd_bf16_cpu(void **buf, const void *args, const tsr_exec_t *e)
{
    const mn_args_t *a = args;
    (void)e;
    tsr_cpu_layernorm_bwd(a->m, a->n, buf[0], buf[1], buf[2], buf[3], buf[4], buf[5], buf[6],
                          buf[7]);
    tsr_cpu_f32_to_bf16((size_t)a->m * a->n, buf[5], buf[8]);
    return 0;
}
#ifdef TSR_HAVE_CUDA
static int ln_bwd_bf16_cuda(void **buf, const void *args, const tsr_exec_t *e)
{
    const mn_args_t *a = args;
    CUDA_THEN(tsr_cuda_layernorm_bwd(e->cuda_stream, a->m, a->n, buf[0], buf[1], buf[2], buf[3],
                                     buf[4], buf[5], buf[6], buf[7], e->deterministic),
              tsr_cuda_f32_to_bf16(e->cuda_stream, (size_t)a->m * a->n, buf[5], buf[8]));
}
#endif
CODELET(cl_ln_bwd_bf16, "layernorm_bwd_bf16", 9, ln_bwd_bf16_cpu, ln_bwd_bf16_cuda,
        ln_bwd_flops, ln_bwd_bf16_bytes);

int tsr__op_layernorm_bwd_bf16(const tsr_tensor_t *dout, const tsr_tensor_t *x,
                               const tsr_tensor_t *gamma, const tsr_tensor_t *mean,
                               const tsr_tensor_t *rstd, tsr_tensor_t *dx, tsr_tensor_t *dx16,
                               tsr_tensor_t *dgamma, tsr_tensor_t *dbeta, tsr_tensor_t *part)
{
    const char *op = "layernorm_bwd_bf16";
    int rc = same_tiling(x, dx16, op);
    if (!rc)
        rc = check_dtypes(dx, dx16, op);
    if (!rc && x->grid_rows > 1) { /* over row tiles, then dx16 = bf16(dx) */
        rc = tsr__op_layernorm_bwd_rows(dout, x, gamma, mean, rstd, dx, dgamma, dbeta, part);
        return rc ? rc : tsr__op_convert(dx, dx16);
    }
    if (!rc)
        rc = check_ln(x, mean, op);
    if (!rc)
        rc = check_ln(x, rstd, op);
    if (!rc)
        rc = same_tiling(x, dout, op);
    if (!rc)
        rc = same_tiling(x, dx, op);
    if (!rc)
        rc = check_ln_param(gamma, "gamma", x, op);
    for (int j = 0; !rc && j < x->grid_cols; j++) {
        mn_args_t a = {x->rows, tsr__tile_n(x, j)};
        rc = SUBMIT(cl_ln_bwd_bf16, a, ACC(tsr__tile(dout, 0, j), TSR_R),
                    ACC(tsr__tile(x, 0, j), TSR_R), ACC(gamma->tiles[0], TSR_R),
                    ACC(tsr__tile(mean, 0, j), TSR_R), ACC(tsr__tile(rstd, 0, j), TSR_R),
                    ACC(tsr__tile(dx, 0, j), TSR_RW), ACC(dgamma->tiles[0], acc_of(dgamma)),
                    ACC(dbeta->tiles[0], acc_of(dbeta)), ACC(tsr__tile(dx16, 0, j), TSR_W));
    }
    return rc;
}

/* GELU into bf16: x read (4), scratch written and read (8), out (2) */
static double gelu_fwd_bf16_bytes(const void *args, const size_t *sizes)
{
    (void)args;
    return 14.0 * n0(sizes);
}
/* out = bf16(gelu(x))                         x: (n), out: (n) bf16, scratch (n) */
static int gelu_fwd_bf16_cpu(void **buf, const void *args, const tsr_exec_t *e)
{
    (void)args;
    tsr_cpu_gelu_fwd(nelem(e, 0), buf[0], buf[2]);
    tsr_cpu_f32_to_bf16(nelem(e, 0), buf[2], buf[1]);
    return 0;
}
#ifdef TSR_HAVE_CUDA
static int gelu_fwd_bf16_cuda(void **buf, const void *args, const tsr_exec_t *e)
{
    (void)args;
    CUDA_THEN(tsr_cuda_gelu_fwd(e->cuda_stream, nelem(e, 0), buf[0], buf[2]),
              tsr_cuda_f32_to_bf16(e->cuda_stream, nelem(e, 0), buf[2], buf[1]));
}
#endif
CODELET(cl_gelu_fwd_bf16, "gelu_fwd_bf16", 3, gelu_fwd_bf16_cpu, gelu_fwd_bf16_cuda,
        gelu_fwd_flops, gelu_fwd_bf16_bytes);

int tsr__op_gelu_fwd_bf16(const tsr_tensor_t *x, tsr_tensor_t *out, tsr_handle_t scratch)
{
    int rc = same_tiling(x, out, "gelu_fwd_bf16");
    if (!rc)
        rc = check_dtypes(x, out, "gelu_fwd_bf16");
    if (!rc)
        rc = check_scratch(scratch, max_tile_f32(x), "gelu_fwd_bf16");
    size_t ntiles = (size_t)x->grid_rows * x->grid_cols;
    for (size_t i = 0; !rc && i < ntiles; i++)
        rc = SUBMIT0(cl_gelu_fwd_bf16, ACC(x->tiles[i], TSR_R), ACC(out->tiles[i], TSR_W),
                     ACC(scratch, TSR_SCRATCH));
    return rc;
}

/* GELU backward, then d rounded into d16: x, d read, d written and read
 * again (16), d16 written (2) */
static double gelu_bwd_bf16_bytes(const void *args, const size_t *sizes)
{
    (void)args;
    return 18.0 * n0(sizes);
}
/* d = gelu'(x) * d; d16 = bf16(d)             x, d: (n), d16: (n) bf16 */
static int gelu_bwd_bf16_cpu(void **buf, const void *args, const tsr_exec_t *e)
{
    (void)args;
    tsr_cpu_gelu_bwd(nelem(e, 0), buf[0], buf[1], buf[1]);
    tsr_cpu_f32_to_bf16(nelem(e, 0), buf[1], buf[2]);
    return 0;
}
#ifdef TSR_HAVE_CUDA
static int gelu_bwd_bf16_cuda(void **buf, const void *args, const tsr_exec_t *e)
{
    (void)args;
    CUDA_THEN(tsr_cuda_gelu_bwd(e->cuda_stream, nelem(e, 0), buf[0], buf[1], buf[1]),
              tsr_cuda_f32_to_bf16(e->cuda_stream, nelem(e, 0), buf[1], buf[2]));
}
#endif
CODELET(cl_gelu_bwd_bf16, "gelu_bwd_bf16", 3, gelu_bwd_bf16_cpu, gelu_bwd_bf16_cuda,
        gelu_bwd_flops, gelu_bwd_bf16_bytes);

int tsr__op_gelu_bwd_bf16(const tsr_tensor_t *x, tsr_tensor_t *d, tsr_tensor_t *d16)
{
    int rc = same_tiling(x, d, "gelu_bwd_bf16");
    if (!rc)
        rc = same_tiling(x, d16, "gelu_bwd_bf16");
    if (!rc)
        rc = check_dtypes(d, d16, "gelu_bwd_bf16");
    size_t ntiles = (size_t)x->grid_rows * x->grid_cols;
    for (size_t i = 0; !rc && i < ntiles; i++)
        rc = SUBMIT0(cl_gelu_bwd_bf16, ACC(x->tiles[i], TSR_R), ACC(d->tiles[i], TSR_RW),
                     ACC(d16->tiles[i], TSR_W));
    return rc;
}

/* crossentropy_bwd into bf16: logits, lse, targets read, the scratch written
 * and read, dlogits written in 2 bytes */
static double xent_bwd_bf16_bytes(const void *args, const size_t *sizes)
{
    const xent_args_t *a = args;
    (void)sizes;
    return 14.0 * a->nv * a->T + 8.0 * a->T;
}
/* dlogits (nv, T) bf16 = bf16(scale * (softmax(logits) - onehot));
 * buffers: logits, lse, targets, dlogits, scratch (nv, T) */
static int xent_bwd_bf16_cpu(void **buf, const void *args, const tsr_exec_t *e)
{
    const xent_args_t *a = args;
    (void)e;
    /* column by column through the scratch's first nv floats, which stay in
     * cache between the fp32 kernel and the rounding (one pass over memory;
     * the whole tile through the scratch took twice the fp32 task's time) */
    const float *logits = buf[0], *lse = buf[1];
    const int32_t *targets = buf[2];
    uint16_t *out = buf[3];
    float *col = buf[4];
    for (int j = 0; j < a->T; j++) {
        size_t off = (size_t)j * a->nv;
        tsr_cpu_crossentropy_bwd(a->nv, 1, a->v0, logits + off, a->nv, lse + j, targets + j,
                                 a->scale, col, a->nv);
        tsr_cpu_f32_to_bf16((size_t)a->nv, col, out + off);
    }
    return 0;
}
#ifdef TSR_HAVE_CUDA
static int xent_bwd_bf16_cuda(void **buf, const void *args, const tsr_exec_t *e)
{
    const xent_args_t *a = args;
    CUDA_THEN(tsr_cuda_crossentropy_bwd(e->cuda_stream, a->nv, a->T, a->v0, buf[0], a->nv,
                                        buf[1], buf[2], a->scale, buf[4], a->nv),
              tsr_cuda_f32_to_bf16(e->cuda_stream, (size_t)a->nv * a->T, buf[4], buf[3]));
}
#endif
CODELET(cl_xent_bwd_bf16, "crossentropy_bwd_bf16", 5, xent_bwd_bf16_cpu, xent_bwd_bf16_cuda,
        xent_bwd_flops, xent_bwd_bf16_bytes);

int tsr__op_xent_bwd_bf16(const tsr_tensor_t *logits, const tsr_tensor_t *targets,
                          const tsr_tensor_t *lse, float scale, tsr_tensor_t *dlogits,
                          tsr_handle_t scratch)
{
    int rc = check_xent(logits, targets);
    if (!rc)
        rc = check_xent(logits, lse);
    if (!rc)
        rc = same_tiling(logits, dlogits, "crossentropy_bwd_bf16");
    if (!rc)
        rc = check_dtypes(logits, dlogits, "crossentropy_bwd_bf16");
    if (!rc)
        rc = check_scratch(scratch, max_tile_f32(logits), "crossentropy_bwd_bf16");
    for (int j = 0; !rc && j < logits->grid_cols; j++)
        for (int v = 0; !rc && v < logits->grid_rows; v++) {
            xent_args_t a = {tsr__tile_m(logits, v), tsr__tile_n(logits, j),
                             v * logits->tile_rows, 0, scale};
            rc = SUBMIT(cl_xent_bwd_bf16, a, ACC(tsr__tile(logits, v, j), TSR_R),
                        ACC(tsr__tile(lse, 0, j), TSR_R), ACC(tsr__tile(targets, 0, j), TSR_R),
                        ACC(tsr__tile(dlogits, v, j), TSR_W), ACC(scratch, TSR_SCRATCH));
        }
    return rc;
}

int tsr__op_linear_bwd_bf16(const tsr_tensor_t *w, const tsr_tensor_t *x,
                            const tsr_tensor_t *dy, const tsr_tensor_t *dy16, tsr_tensor_t *dx,
                            tsr_tensor_t *dw, tsr_tensor_t *db)
{
    int rc;
    if ((rc = same_tiling(dy, dy16, "linear_bwd_bf16")) ||
        (rc = check_dtypes(dy, dy16, "linear_bwd_bf16")))
        return rc;
    return linear_bwd(w, x, dy, dy16, NULL, dx, dw, db, NULL, "linear_bwd_bf16");
}

/* ---- the Llama layers into bf16 -------------------------------------------- */

/* RMSNorm forward into bf16: the fp32 kernel's estimates, the output
 * written in 2 bytes instead of 4 (and the scratch written and read). */
static double rms_fwd_bf16_bytes(const void *args, const size_t *sizes)
{
    const rms_args_t *a = args;
    return rms_fwd_bytes(args, sizes) + 6.0 * a->m * a->n;
}
/* x (C, T), w (C) → out (C, T) bf16, rstd (T); scratch (C, T) */
static int rms_fwd_bf16_cpu(void **buf, const void *args, const tsr_exec_t *e)
{
    const rms_args_t *a = args;
    (void)e;
    tsr_cpu_rmsnorm_fwd(a->m, a->n, buf[0], buf[1], a->eps, buf[4], buf[3]);
    tsr_cpu_f32_to_bf16((size_t)a->m * a->n, buf[4], buf[2]);
    return 0;
}
#ifdef TSR_HAVE_CUDA
static int rms_fwd_bf16_cuda(void **buf, const void *args, const tsr_exec_t *e)
{
    const rms_args_t *a = args;
    CUDA_THEN(tsr_cuda_rmsnorm_fwd(e->cuda_stream, a->m, a->n, buf[0], buf[1], a->eps, buf[4],
                                   buf[3]),
              tsr_cuda_f32_to_bf16(e->cuda_stream, (size_t)a->m * a->n, buf[4], buf[2]));
}
#endif
CODELET(cl_rms_fwd_bf16, "rmsnorm_fwd_bf16", 5, rms_fwd_bf16_cpu, rms_fwd_bf16_cuda,
        rms_fwd_flops, rms_fwd_bf16_bytes);

int tsr__op_rmsnorm_fwd_bf16(const tsr_tensor_t *x, const tsr_tensor_t *w, float eps,
                             tsr_tensor_t *out, tsr_tensor_t *rstd, tsr_handle_t scratch)
{
    int rc = check_rms(x, w, rstd, "rmsnorm_fwd_bf16");
    if (!rc && !(eps > 0.0f && isfinite(eps)))
        rc = tsr__fail(TSR_EINVAL, "rmsnorm_fwd_bf16: eps %g is not a positive number",
                       (double)eps);
    if (!rc)
        rc = same_tiling(x, out, "rmsnorm_fwd_bf16");
    if (!rc)
        rc = check_dtypes(x, out, "rmsnorm_fwd_bf16");
    if (!rc)
        rc = check_scratch(scratch, max_tile_f32(x), "rmsnorm_fwd_bf16");
    for (int j = 0; !rc && j < x->grid_cols; j++) {
        rms_args_t a = {x->rows, tsr__tile_n(x, j), eps};
        rc = SUBMIT(cl_rms_fwd_bf16, a, ACC(tsr__tile(x, 0, j), TSR_R), ACC(w->tiles[0], TSR_R),
                    ACC(tsr__tile(out, 0, j), TSR_W), ACC(tsr__tile(rstd, 0, j), TSR_W),
                    ACC(scratch, TSR_SCRATCH));
    }
    return rc;
}

/* RMSNorm backward, then dx rounded into dx16 (the bf16 input of the GEMMs
 * that read the same gradient next): dx read once more, dx16 written. */
static double rms_bwd_bf16_bytes(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    return rms_bwd_bytes(args, sizes) + 6.0 * a->m * a->n;
}
/* as rmsnorm_bwd; buffer 6: dx16 (C, T) bf16 = bf16(dx) */
static int rms_bwd_bf16_cpu(void **buf, const void *args, const tsr_exec_t *e)
{
    const mn_args_t *a = args;
    (void)e;
    tsr_cpu_rmsnorm_bwd(a->m, a->n, buf[0], buf[1], buf[2], buf[3], buf[4], buf[5]);
    tsr_cpu_f32_to_bf16((size_t)a->m * a->n, buf[4], buf[6]);
    return 0;
}
#ifdef TSR_HAVE_CUDA
static int rms_bwd_bf16_cuda(void **buf, const void *args, const tsr_exec_t *e)
{
    const mn_args_t *a = args;
    CUDA_THEN(tsr_cuda_rmsnorm_bwd(e->cuda_stream, a->m, a->n, buf[0], buf[1], buf[2], buf[3],
                                   buf[4], buf[5]),
              tsr_cuda_f32_to_bf16(e->cuda_stream, (size_t)a->m * a->n, buf[4], buf[6]));
}
#endif
CODELET(cl_rms_bwd_bf16, "rmsnorm_bwd_bf16", 7, rms_bwd_bf16_cpu, rms_bwd_bf16_cuda,
        rms_bwd_flops, rms_bwd_bf16_bytes);

int tsr__op_rmsnorm_bwd_bf16(const tsr_tensor_t *dout, const tsr_tensor_t *x,
                             const tsr_tensor_t *w, const tsr_tensor_t *rstd, tsr_tensor_t *dx,
                             tsr_tensor_t *dx16, tsr_tensor_t *dw)
{
    int rc = check_rms(x, w, rstd, "rmsnorm_bwd_bf16");
    if (!rc)
        rc = same_tiling(x, dout, "rmsnorm_bwd_bf16");
    if (!rc)
        rc = same_tiling(x, dx, "rmsnorm_bwd_bf16");
    if (!rc)
        rc = same_tiling(x, dx16, "rmsnorm_bwd_bf16");
    if (!rc)
        rc = same_tiling(w, dw, "rmsnorm_bwd_bf16");
    if (!rc && (tsr__tensor_is_bf16(dout) || tsr__tensor_is_bf16(dw)))
        rc = tsr__fail(TSR_EINVAL, "rmsnorm_bwd_bf16: dout and dw are fp32");
    if (!rc)
        rc = check_dtypes(dx, dx16, "rmsnorm_bwd_bf16");
    for (int j = 0; !rc && j < x->grid_cols; j++) {
        mn_args_t a = {x->rows, tsr__tile_n(x, j)};
        rc = SUBMIT(cl_rms_bwd_bf16, a, ACC(tsr__tile(dout, 0, j), TSR_R),
                    ACC(tsr__tile(x, 0, j), TSR_R), ACC(w->tiles[0], TSR_R),
                    ACC(tsr__tile(rstd, 0, j), TSR_R), ACC(tsr__tile(dx, 0, j), TSR_RW),
                    ACC(dw->tiles[0], acc_of(dw)), ACC(tsr__tile(dx16, 0, j), TSR_W));
    }
    return rc;
}

/* SwiGLU into bf16: the fp32 kernel's estimates, h written in 2 bytes
 * instead of 4 (and the scratch written and read). */
static double swiglu_fwd_bf16_bytes(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    return swiglu_fwd_bytes(args, sizes) + 6.0 * a->m * a->n;
}
/* g, u (F, T) → h (F, T) bf16 = bf16(silu(g) u); scratch (F, T) */
static int swiglu_fwd_bf16_cpu(void **buf, const void *args, const tsr_exec_t *e)
{
    const mn_args_t *a = args;
    (void)e;
    tsr_cpu_swiglu_fwd(a->m, a->n, buf[0], a->m, buf[1], a->m, buf[3], a->m);
    tsr_cpu_f32_to_bf16((size_t)a->m * a->n, buf[3], buf[2]);
    return 0;
}
#ifdef TSR_HAVE_CUDA
static int swiglu_fwd_bf16_cuda(void **buf, const void *args, const tsr_exec_t *e)
{
    const mn_args_t *a = args;
    CUDA_THEN(tsr_cuda_swiglu_fwd(e->cuda_stream, a->m, a->n, buf[0], a->m, buf[1], a->m, buf[3],
                                  a->m),
              tsr_cuda_f32_to_bf16(e->cuda_stream, (size_t)a->m * a->n, buf[3], buf[2]));
}
#endif
CODELET(cl_swiglu_fwd_bf16, "swiglu_fwd_bf16", 4, swiglu_fwd_bf16_cpu, swiglu_fwd_bf16_cuda,
        swiglu_fwd_flops, swiglu_fwd_bf16_bytes);

int tsr__op_swiglu_fwd_bf16(const tsr_tensor_t *gate, const tsr_tensor_t *up, tsr_tensor_t *h,
                            tsr_handle_t scratch)
{
    const tsr_tensor_t *t[] = {gate, up};
    int rc = check_alike(t, 2, "swiglu_fwd_bf16");
    if (!rc)
        rc = same_tiling(gate, h, "swiglu_fwd_bf16");
    if (!rc)
        rc = check_dtypes(gate, h, "swiglu_fwd_bf16");
    if (!rc)
        rc = check_scratch(scratch, max_tile_f32(gate), "swiglu_fwd_bf16");
    for (int j = 0; !rc && j < gate->grid_cols; j++)
        for (int i = 0; !rc && i < gate->grid_rows; i++) {
            mn_args_t a = {tsr__tile_m(gate, i), tsr__tile_n(gate, j)};
            rc = SUBMIT(cl_swiglu_fwd_bf16, a, ACC(tsr__tile(gate, i, j), TSR_R),
                        ACC(tsr__tile(up, i, j), TSR_R), ACC(tsr__tile(h, i, j), TSR_W),
                        ACC(scratch, TSR_SCRATCH));
        }
    return rc;
}

/* SwiGLU backward into bf16: the fp32 kernel's estimates, dg and du written
 * in 2 bytes instead of 4 (and the scratch written and read, both halves). */
static double swiglu_bwd_bf16_bytes(const void *args, const size_t *sizes)
{
    const mn_args_t *a = args;
    return swiglu_bwd_bytes(args, sizes) + 12.0 * a->m * a->n;
}
/* g, u, dh (F, T) → dg, du (F, T) bf16, written; scratch (F, T) twice: the
 * fp32 dg, then the fp32 du */
static int swiglu_bwd_bf16_cpu(void **buf, const void *args, const tsr_exec_t *e)
{
    const mn_args_t *a = args;
    (void)e;
    size_t n = (size_t)a->m * a->n;
    float *dg = buf[5], *du = dg + n;
    tsr_cpu_swiglu_bwd(a->m, a->n, buf[0], a->m, buf[1], a->m, buf[2], a->m, dg, a->m, du, a->m);
    tsr_cpu_f32_to_bf16(n, dg, buf[3]);
    tsr_cpu_f32_to_bf16(n, du, buf[4]);
    return 0;
}
#ifdef TSR_HAVE_CUDA
static int swiglu_bwd_bf16_cuda(void **buf, const void *args, const tsr_exec_t *e)
{
    const mn_args_t *a = args;
    size_t n = (size_t)a->m * a->n;
    float *dg = buf[5], *du = dg + n;
    int rc = tsr_cuda_swiglu_bwd(e->cuda_stream, a->m, a->n, buf[0], a->m, buf[1], a->m, buf[2],
                                 a->m, dg, a->m, du, a->m);
    if (!rc)
        rc = tsr_cuda_f32_to_bf16(e->cuda_stream, n, dg, buf[3]);
    return rc ? rc : tsr_cuda_f32_to_bf16(e->cuda_stream, n, du, buf[4]);
}
#endif
CODELET(cl_swiglu_bwd_bf16, "swiglu_bwd_bf16", 6, swiglu_bwd_bf16_cpu, swiglu_bwd_bf16_cuda,
        swiglu_bwd_flops, swiglu_bwd_bf16_bytes);

int tsr__op_swiglu_bwd_bf16(const tsr_tensor_t *gate, const tsr_tensor_t *up,
                            const tsr_tensor_t *dh, tsr_tensor_t *dgate, tsr_tensor_t *dup,
                            tsr_handle_t scratch)
{
    const tsr_tensor_t *t[] = {gate, up, dh};
    int rc = check_alike(t, 3, "swiglu_bwd_bf16");
    if (!rc)
        rc = same_tiling(gate, dgate, "swiglu_bwd_bf16");
    if (!rc)
        rc = same_tiling(gate, dup, "swiglu_bwd_bf16");
    if (!rc)
        rc = check_dtypes(gate, dgate, "swiglu_bwd_bf16");
    if (!rc)
        rc = check_dtypes(gate, dup, "swiglu_bwd_bf16");
    if (!rc)
        rc = check_scratch(scratch, 2 * max_tile_f32(gate), "swiglu_bwd_bf16");
    for (int j = 0; !rc && j < gate->grid_cols; j++)
        for (int i = 0; !rc && i < gate->grid_rows; i++) {
            mn_args_t a = {tsr__tile_m(gate, i), tsr__tile_n(gate, j)};
            rc = SUBMIT(cl_swiglu_bwd_bf16, a, ACC(tsr__tile(gate, i, j), TSR_R),
                        ACC(tsr__tile(up, i, j), TSR_R), ACC(tsr__tile(dh, i, j), TSR_R),
                        ACC(tsr__tile(dgate, i, j), TSR_W), ACC(tsr__tile(dup, i, j), TSR_W),
                        ACC(scratch, TSR_SCRATCH));
        }
    return rc;
}

/* ---- the codelets, by name (for tests and tools) -------------------------- */

static const tsr_codelet_t *const all_codelets[] = {
    &cl_gemm,      &cl_fill,     &cl_copy,      &cl_axpy,         &cl_slice_add,
    &cl_bias_add,  &cl_bias_grad, &cl_rows,     &cl_regroup_1,    &cl_ln_fwd,   &cl_ln_bwd,
    &cl_gelu_fwd,  &cl_gelu_bwd, &cl_embed_fwd, &cl_embed_bwd,    &cl_attn_init,
    &cl_attn_fwd,  &cl_attn_fin, &cl_attn_dot,  &cl_attn_bwd,     &cl_maxsumexp,
    &cl_attn_fwd_wide, &cl_attn_bwd_wide,
    &cl_logsumexp, &cl_xent_fwd, &cl_xent_bwd,  &cl_sumsq,        &cl_sumsq_2,      &cl_adamw,        &cl_adamw_bf16,
    &cl_gemm_bf16, &cl_to_bf16,  &cl_to_f32,    &cl_ln_fwd_bf16,
    &cl_ln_bwd_bf16, &cl_gelu_fwd_bf16, &cl_gelu_bwd_bf16, &cl_xent_bwd_bf16,
    &cl_gemm_bias, &cl_gemm_bias_gelu, &cl_gemm_dgelu, &cl_gemm_dgelu_bgrad, &cl_gemm_bgrada,
    &cl_rms_fwd,   &cl_rms_bwd,  &cl_swiglu_fwd, &cl_swiglu_bwd, &cl_rope_fwd,   &cl_rope_bwd,
    &cl_rms_fwd_bf16, &cl_rms_bwd_bf16, &cl_swiglu_fwd_bf16, &cl_swiglu_bwd_bf16,
    &cl_ln_part,   &cl_ln_part_dev, &cl_ln_combine_1, &cl_ln_apply, &cl_ln_part_grad,
    &cl_ln_apply_grad,
};

const tsr_codelet_t *tsr__op_codelet(const char *name)
{
    for (size_t i = 0; name && i < sizeof all_codelets / sizeof *all_codelets; i++)
        if (!strcmp(all_codelets[i]->name, name))
            return all_codelets[i];
    return NULL;
}

const tsr_codelet_t *tsr__op_codelet_at(int i)
{
    int n = (int)(sizeof all_codelets / sizeof *all_codelets);
    return i >= 0 && i < n ? all_codelets[i] : NULL;
}
