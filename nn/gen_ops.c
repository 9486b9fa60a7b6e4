/* nn/gen_ops.c — codelets and submission loops of generation's own tile
 * operations (nn/gen_ops.h), on the conventions of nn/ops.c: CPU and CUDA
 * implementations that call kernels/, flops and bytes estimates. */
#include "nn/gen_ops.h"

#include <math.h>
#include <string.h>

#include "kernels/convert.h"
#include "kernels/decode.h"
#include "kernels/gemm.h"
#include "nn/ops.h"
#include "runtime/error.h"

#ifdef TSR_HAVE_CUDA
#define CUDA_IMPL(f) f
#else
#define CUDA_IMPL(f) NULL
#endif

/* Flops: what the CPU kernel performs (exp counted as one); bytes: what it
 * reads plus what it writes, each buffer once (nn/ops.c's convention). */

typedef tsr__decode_args_t decode_args_t;
typedef tsr__decode_embed_args_t embed_args_t;

/* Per attended key: q.k (2d), p v into the accumulator (2d), scale, max,
 * subtraction, exp, sum (5). */
static double decode_flops(const void *args, const size_t *sizes)
{
    const decode_args_t *a = args;
    (void)sizes;
    return a->keys * (4.0 * a->d + 5.0);
}
/* q, k, v of the columns read, their keys and values written to the
 * cache, every attended key and value read, y written; the columns' table. */
static double decode_bytes(const void *args, const size_t *sizes)
{
    const decode_args_t *a = args;
    (void)sizes;
    return 4.0 * ((double)a->d * a->n * 6.0 + 2.0 * a->d * a->keys) + 8.0 * a->n;
}

/* cols (2, n), q, k, v tiles (C, n), kc, vc (d, slots*maxlen) → y (d, n) */
static int decode_cpu(void **buf, const void *args, const tsr_exec_t *e)
{
    const decode_args_t *a = args;
    (void)e;
    tsr_cpu_decode_attn(a->d, a->n, a->maxlen, a->scale, buf[0], (const float *)buf[1] + a->off,
                        (const float *)buf[2] + a->off, (const float *)buf[3] + a->off, a->ld,
                        buf[4], buf[5], buf[6]);
    return 0;
}
#ifdef TSR_HAVE_CUDA
static int decode_cuda(void **buf, const void *args, const tsr_exec_t *e)
{
    const decode_args_t *a = args;
    return tsr_cuda_decode_attn(e->cuda_stream, a->d, a->n, a->maxlen, a->scale, buf[0],
                                (const float *)buf[1] + a->off, (const float *)buf[2] + a->off,
                                (const float *)buf[3] + a->off, a->ld, buf[4], buf[5], buf[6]);
}
#endif
static const tsr_codelet_t cl_decode = {.name = "decode_attn",
                                        .impl = {decode_cpu, CUDA_IMPL(decode_cuda)},
                                        .nbuffers = 7,
                                        .flops = decode_flops,
                                        .bytes = decode_bytes};

/* The same from a fused qkv tile (Llama): q, k and v at their own row
 * offsets of one (Q, n) tile. cols, qkv, kc, vc → y. Its cost is the
 * unfused one's (the same args up to the offsets). */
typedef tsr__decode_gqa_args_t decode_gqa_args_t;
static double decode_gqa_flops(const void *args, const size_t *sizes)
{
    const decode_gqa_args_t *a = args;
    decode_args_t u = {a->d, a->n, a->maxlen, 0, a->ld, a->scale, a->keys};
    return decode_flops(&u, sizes);
}
static double decode_gqa_bytes(const void *args, const size_t *sizes)
{
    const decode_gqa_args_t *a = args;
    decode_args_t u = {a->d, a->n, a->maxlen, 0, a->ld, a->scale, a->keys};
    return decode_bytes(&u, sizes);
}
static int decode_gqa_cpu(void **buf, const void *args, const tsr_exec_t *e)
{
    const decode_gqa_args_t *a = args;
    const float *qkv = buf[1];
    (void)e;
    tsr_cpu_decode_attn(a->d, a->n, a->maxlen, a->scale, buf[0], qkv + a->qoff, qkv + a->koff,
                        qkv + a->voff, a->ld, buf[2], buf[3], buf[4]);
    return 0;
}
#ifdef TSR_HAVE_CUDA
static int decode_gqa_cuda(void **buf, const void *args, const tsr_exec_t *e)
{
    const decode_gqa_args_t *a = args;
    const float *qkv = buf[1];
    return tsr_cuda_decode_attn(e->cuda_stream, a->d, a->n, a->maxlen, a->scale, buf[0],
                                qkv + a->qoff, qkv + a->koff, qkv + a->voff, a->ld, buf[2],
                                buf[3], buf[4]);
}
#endif
static const tsr_codelet_t cl_decode_gqa = {.name = "decode_attn_gqa",
                                            .impl = {decode_gqa_cpu, CUDA_IMPL(decode_gqa_cuda)},
                                            .nbuffers = 5,
                                            .flops = decode_gqa_flops,
                                            .bytes = decode_gqa_bytes};

/* one addition per feature; two columns read, one written */
static double embed_flops(const void *args, const size_t *sizes)
{
    (void)sizes;
    return (double)((const embed_args_t *)args)->C;
}
static double embed_bytes(const void *args, const size_t *sizes)
{
    (void)sizes;
    return 12.0 * ((const embed_args_t *)args)->C;
}

/* wte tile, wpe tile → one column of out */
static int embed_cpu(void **buf, const void *args, const tsr_exec_t *e)
{
    const embed_args_t *a = args;
    (void)e;
    tsr_cpu_decode_embed(a->C, (const float *)buf[0] + a->a_off, (const float *)buf[1] + a->b_off,
                         (float *)buf[2] + a->out_off);
    return 0;
}
#ifdef TSR_HAVE_CUDA
static int embed_cuda(void **buf, const void *args, const tsr_exec_t *e)
{
    const embed_args_t *a = args;
    return tsr_cuda_decode_embed(e->cuda_stream, a->C, (const float *)buf[0] + a->a_off,
                                 (const float *)buf[1] + a->b_off, (float *)buf[2] + a->out_off);
}
#endif
static const tsr_codelet_t cl_embed = {.name = "decode_embed",
                                       .impl = {embed_cpu, CUDA_IMPL(embed_cuda)},
                                       .nbuffers = 3,
                                       .flops = embed_flops,
                                       .bytes = embed_bytes};

typedef tsr__gemv_args_t gemv_args_t;

/* 2 m n k; W read (2 bytes an element in bf16, 4 in fp32), x read, y
 * written (and read when accumulating) */
static double gemv_flops(const void *args, const size_t *sizes)
{
    const gemv_args_t *a = args;
    (void)sizes;
    return 2.0 * a->m * a->n * a->k;
}
static double gemv_bytes(const void *args, const size_t *sizes)
{
    const gemv_args_t *a = args;
    (void)sizes;
    return (a->f32 ? 4.0 : 2.0) * a->m * a->k + 4.0 * a->k * a->n +
           (a->beta != 0.0f ? 8.0 : 4.0) * a->m * a->n;
}

/* w (bf16, or fp32), x, y */
static int gemv_cpu(void **buf, const void *args, const tsr_exec_t *e)
{
    const gemv_args_t *a = args;
    (void)e;
    if (a->f32)
        tsr_cpu_decode_gemv_f32(a->m, a->n, a->k, (const float *)buf[0] + a->woff,
                                (const float *)buf[1] + a->xoff, a->ldx, a->beta, buf[2]);
    else if (a->trans)
        tsr_cpu_decode_gemv_bf16_t(a->m, a->n, a->k, buf[0], buf[1], buf[2]);
    else
        tsr_cpu_decode_gemv_bf16(a->m, a->n, a->k, (const uint16_t *)buf[0] + a->woff,
                                 (const float *)buf[1] + a->xoff, a->ldx, a->beta, buf[2]);
    return 0;
}
#ifdef TSR_HAVE_CUDA
static int gemv_cuda(void **buf, const void *args, const tsr_exec_t *e)
{
    const gemv_args_t *a = args;
    /* fp32 W: cuBLAS, in the precision of every other fp32 GEMM (the
     * forward's products, which a decode step must reproduce) */
    if (a->f32)
        return tsr_cuda_gemm(e->cuda_stream, e->cublas_handle,
                             e->cuda_fp32 == TSR_CUDA_FP32_STRICT ? TSR_GEMM_FP32 : TSR_GEMM_TF32,
                             TSR_NOTRANS, TSR_NOTRANS, a->m, a->n, a->k, 1.0f,
                             (const float *)buf[0] + a->woff, a->m, 0,
                             (const float *)buf[1] + a->xoff, a->ldx, 0, a->beta, buf[2], a->m,
                             0, 1);
    return a->trans ? tsr_cuda_decode_gemv_bf16_t(e->cuda_stream, a->m, a->n, a->k, buf[0],
                                                  buf[1], buf[2])
                    : tsr_cuda_decode_gemv_bf16(e->cuda_stream, a->m, a->n, a->k,
                                                (const uint16_t *)buf[0] + a->woff,
                                                (const float *)buf[1] + a->xoff, a->ldx,
                                                a->beta, buf[2]);
}
#endif
static const tsr_codelet_t cl_gemv = {.name = "decode_gemv",
                                      .impl = {gemv_cpu, CUDA_IMPL(gemv_cuda)},
                                      .nbuffers = 3,
                                      .flops = gemv_flops,
                                      .bytes = gemv_bytes};

typedef tsr__sum2_args_t sum2_args_t;

/* three additions per element; y (read when beta 1), p0, p1 read, b read,
 * y written */
static double sum2_flops(const void *args, const size_t *sizes)
{
    const sum2_args_t *a = args;
    (void)sizes;
    return 3.0 * a->m * a->n;
}
static double sum2_bytes(const void *args, const size_t *sizes)
{
    const sum2_args_t *a = args;
    (void)sizes;
    return 4.0 * ((a->beta != 0.0f ? 4.0 : 3.0) * a->m * a->n + a->m);
}
/* y, b, p0, p1 */
static int sum2_cpu(void **buf, const void *args, const tsr_exec_t *e)
{
    const sum2_args_t *a = args;
    (void)e;
    tsr_cpu_decode_sum2(a->m, a->n, a->beta, buf[1], buf[2], buf[3], buf[0]);
    return 0;
}
#ifdef TSR_HAVE_CUDA
static int sum2_cuda(void **buf, const void *args, const tsr_exec_t *e)
{
    const sum2_args_t *a = args;
    return tsr_cuda_decode_sum2(e->cuda_stream, a->m, a->n, a->beta, buf[1], buf[2], buf[3],
                                buf[0]);
}
#endif
static const tsr_codelet_t cl_sum2 = {.name = "decode_sum2",
                                      .impl = {sum2_cpu, CUDA_IMPL(sum2_cuda)},
                                      .nbuffers = 4,
                                      .flops = sum2_flops,
                                      .bytes = sum2_bytes};

/* fp32 tile read (4 bytes an element), bf16 written (2); no arithmetic
 * worth counting beyond the rounding (a few integer operations) */
static double to_bf16_bytes(const void *args, const size_t *sizes)
{
    (void)args;
    return 1.5 * (double)sizes[0];
}
static int to_bf16_cpu(void **buf, const void *args, const tsr_exec_t *e)
{
    (void)args;
    tsr_cpu_f32_to_bf16(e->sizes[0] / 4, buf[0], buf[1]);
    return 0;
}
#ifdef TSR_HAVE_CUDA
static int to_bf16_cuda(void **buf, const void *args, const tsr_exec_t *e)
{
    (void)args;
    return tsr_cuda_f32_to_bf16(e->cuda_stream, e->sizes[0] / 4, buf[0], buf[1]);
}
#endif
static const tsr_codelet_t cl_to_bf16 = {.name = "decode_to_bf16",
                                         .impl = {to_bf16_cpu, CUDA_IMPL(to_bf16_cuda)},
                                         .nbuffers = 2,
                                         .flops = NULL,
                                         .bytes = to_bf16_bytes};

static int submit(const tsr_codelet_t *cl, const void *args, size_t args_size, int n,
                  const tsr_access_t *acc)
{
    tsr_task_desc_t d = {.codelet = cl, .nbuffers = n, .buffers = acc,
                         .args = args, .args_size = args_size};
    return tsr_submit(&d, NULL);
}

int tsr__op_decode_embed(const tsr_tensor_t *wte, const tsr_tensor_t *wpe,
                         const int32_t *tokens, const int32_t *pos, tsr_tensor_t *out)
{
    if (out->grid_rows != 1 || wte->rows != out->rows || (wpe && wpe->rows != out->rows) ||
        wte->grid_rows != 1 || (wpe && wpe->grid_rows != 1))
        return tsr__fail(TSR_EINVAL, "decode_embed: tables (%d, %d), (%d, %d) and columns (%d, "
                                     "%d) do not agree", wte->rows, wte->cols,
                         wpe ? wpe->rows : 0, wpe ? wpe->cols : 0, out->rows, out->cols);
    size_t C = (size_t)out->rows;
    for (int j = 0; !wpe && j < out->cols; j++) { /* the token's column alone */
        int ta = tokens[j] / wte->tile_cols, tj = j / out->tile_cols;
        tsr__rows_args_t r = {wte->rows, out->rows, (size_t)(tokens[j] % wte->tile_cols) * C,
                              (size_t)(j % out->tile_cols) * C, out->rows, 1};
        tsr_access_t acc[] = {{tsr__tile(wte, 0, ta), TSR_R},
                              {tsr__tile(out, 0, tj), j % out->tile_cols ? TSR_RW : TSR_W}};
        int rc = submit(tsr__op_codelet("copy_rows"), &r, sizeof r, 2, acc);
        if (rc)
            return rc;
    }
    for (int j = 0; wpe && j < out->cols; j++) {
        int ta = tokens[j] / wte->tile_cols, tb = pos[j] / wpe->tile_cols;
        int tj = j / out->tile_cols;
        embed_args_t a = {out->rows, C * (size_t)(tokens[j] % wte->tile_cols),
                          C * (size_t)(pos[j] % wpe->tile_cols), C * (size_t)(j % out->tile_cols)};
        /* a column of the tile at a time: RW, in order; the first writes */
        tsr_access_t acc[] = {{tsr__tile(wte, 0, ta), TSR_R},
                              {tsr__tile(wpe, 0, tb), TSR_R},
                              {tsr__tile(out, 0, tj), j % out->tile_cols ? TSR_RW : TSR_W}};
        int rc = submit(&cl_embed, &a, sizeof a, 3, acc);
        if (rc)
            return rc;
    }
    return TSR_OK;
}

int tsr__op_decode_attn(const tsr_tensor_t *qkv, const tsr_tensor_t *cols, int heads,
                        int maxlen, double keys, tsr_tensor_t *kc, tsr_tensor_t *vc,
                        tsr_tensor_t *y)
{
    int C = y->rows, d = y->tile_rows, n = y->cols;
    if (heads <= 0 || C % heads || d != C / heads || d > 256 || qkv->rows != 3 * C ||
        qkv->tile_rows != C || qkv->cols != n || qkv->grid_cols != 1 || y->grid_cols != 1 ||
        cols->rows != 2 || cols->cols != n || cols->grid_cols != 1 || kc->rows != C ||
        kc->tile_rows != d || kc->grid_cols != 1 || kc->cols % maxlen || vc->rows != C ||
        vc->tile_rows != d || vc->cols != kc->cols || vc->grid_cols != 1)
        return tsr__fail(TSR_EINVAL, "decode_attn: qkv (%d, %d) in tiles (%d, %d), y (%d, %d) in "
                                     "(%d, %d) and a cache (%d, %d) in (%d, %d) do not fit %d "
                                     "heads", qkv->rows, qkv->cols, qkv->tile_rows,
                         qkv->tile_cols, C, n, d, y->tile_cols, kc->rows, kc->cols,
                         kc->tile_rows, kc->tile_cols, heads);
    for (int h = 0; h < heads; h++) {
        decode_args_t a = {d, n, maxlen, h * d, C, 1.0f / sqrtf((float)d), keys / heads};
        tsr_access_t acc[] = {{cols->tiles[0], TSR_R},         {tsr__tile(qkv, 0, 0), TSR_R},
                              {tsr__tile(qkv, 1, 0), TSR_R},   {tsr__tile(qkv, 2, 0), TSR_R},
                              {tsr__tile(kc, h, 0), TSR_RW},   {tsr__tile(vc, h, 0), TSR_RW},
                              {tsr__tile(y, h, 0), TSR_W}};
        int rc = submit(&cl_decode, &a, sizeof a, 7, acc);
        if (rc)
            return rc;
    }
    return TSR_OK;
}

int tsr__op_decode_attn_gqa(const tsr_tensor_t *qkv, const tsr_tensor_t *cols, int heads,
                            int kv_heads, int maxlen, double keys, tsr_tensor_t *kc,
                            tsr_tensor_t *vc, tsr_tensor_t *y)
{
    int d = y->tile_rows, n = y->cols, Hq = y->rows;
    if (heads <= 0 || kv_heads <= 0 || heads % kv_heads || Hq != heads * d || d > 256 ||
        d < 1 || qkv->rows != Hq + 2 * kv_heads * d || qkv->grid_rows != 1 ||
        qkv->cols != n || qkv->grid_cols != 1 || y->grid_cols != 1 || cols->rows != 2 ||
        cols->cols != n || cols->grid_cols != 1 || kc->rows != kv_heads * d ||
        kc->tile_rows != d || kc->grid_cols != 1 || kc->cols % maxlen ||
        vc->rows != kc->rows || vc->tile_rows != d || vc->cols != kc->cols ||
        vc->grid_cols != 1)
        return tsr__fail(TSR_EINVAL, "decode_attn_gqa: qkv (%d, %d) in tiles (%d, %d), y (%d, "
                                     "%d) in (%d, %d) and a cache (%d, %d) in (%d, %d) do not "
                                     "fit %d heads over %d K/V heads", qkv->rows, qkv->cols,
                         qkv->tile_rows, qkv->tile_cols, Hq, n, d, y->tile_cols, kc->rows,
                         kc->cols, kc->tile_rows, kc->tile_cols, heads, kv_heads);
    int group = heads / kv_heads, Hkv = kv_heads * d;
    /* one task per query head; those of a K/V head store the same keys and
     * values in its cache tile (RW), one after another */
    for (int h = 0; h < heads; h++) {
        int g = h / group;
        decode_gqa_args_t a = {d,          n,       maxlen, h * d, Hq + g * d, Hq + Hkv + g * d,
                               qkv->rows, 1.0f / sqrtf((float)d), keys / heads};
        tsr_access_t acc[] = {{cols->tiles[0], TSR_R},       {qkv->tiles[0], TSR_R},
                              {tsr__tile(kc, g, 0), TSR_RW}, {tsr__tile(vc, g, 0), TSR_RW},
                              {tsr__tile(y, h, 0), TSR_W}};
        int rc = submit(&cl_decode_gqa, &a, sizeof a, 5, acc);
        if (rc)
            return rc;
    }
    return TSR_OK;
}

int tsr__op_take_column(const tsr_tensor_t *src, int j, tsr_tensor_t *dst)
{
    if (src->grid_rows != 1 || src->grid_cols != 1 || dst->grid_rows != 1 ||
        dst->grid_cols != 1 || dst->rows != src->rows || dst->cols != 1 || j < 0 ||
        j >= src->cols)
        return tsr__fail(TSR_EINVAL, "take_column: column %d of (%d, %d) into (%d, %d)", j,
                         src->rows, src->cols, dst->rows, dst->cols);
    /* nn/ops.c's copy_rows: nrows rows of one column, starting j columns in */
    tsr__rows_args_t r = {src->rows, dst->rows, j * src->rows, 0, src->rows, 1};
    tsr_access_t acc[] = {{src->tiles[0], TSR_R}, {dst->tiles[0], TSR_W}};
    return submit(tsr__op_codelet("copy_rows"), &r, sizeof r, 2, acc);
}

int tsr__packed_init(tsr_tensor_t *packed, const tsr_tensor_t *w)
{
    if (w->rows % 2 || w->tile_rows % 2)
        return tsr__fail(TSR_EINVAL, "bf16 weights: (%d, %d) in tiles of %d rows: the rows must "
                                     "be even", w->rows, w->cols, w->tile_rows);
    return tsr__tensor_init(packed, w->rows / 2, w->cols, w->tile_rows / 2, w->tile_cols);
}

static int check_packed(const tsr_tensor_t *w, const tsr_tensor_t *wb, const char *op)
{
    if (wb->rows * 2 != w->rows || wb->cols != w->cols || wb->tile_rows * 2 != w->tile_rows ||
        wb->tile_cols != w->tile_cols)
        return tsr__fail(TSR_EINVAL, "%s: the bf16 copy (%d, %d) in (%d, %d) is not of (%d, %d) "
                                     "in (%d, %d)", op, wb->rows, wb->cols, wb->tile_rows,
                         wb->tile_cols, w->rows, w->cols, w->tile_rows, w->tile_cols);
    return TSR_OK;
}

int tsr__op_to_bf16(const tsr_tensor_t *w, tsr_tensor_t *packed)
{
    int rc = check_packed(w, packed, "to_bf16");
    size_t ntiles = (size_t)w->grid_rows * w->grid_cols;
    for (size_t i = 0; !rc && i < ntiles; i++) {
        tsr_access_t acc[] = {{w->tiles[i], TSR_R}, {packed->tiles[i], TSR_W}};
        rc = submit(&cl_to_bf16, NULL, 0, 2, acc);
    }
    return rc;
}

/* y (tile rows of w) = W x over w's column tiles: one task per tile of w,
 * accumulating in order into its row's y tile. */
static int gemv_n(const tsr_tensor_t *w, const tsr_tensor_t *wb, const tsr_tensor_t *x,
                  float beta, tsr_tensor_t *y)
{
    if (x->rows != w->cols || x->tile_rows != w->tile_cols || x->grid_cols != 1 ||
        y->rows != w->rows || y->tile_rows != w->tile_rows || y->cols != x->cols ||
        y->grid_cols != 1)
        return tsr__fail(TSR_EINVAL, "linear_bf16: W (%d, %d) in (%d, %d), x (%d, %d) in (%d, "
                                     "%d), y (%d, %d) in (%d, %d) do not agree", w->rows,
                         w->cols, w->tile_rows, w->tile_cols, x->rows, x->cols, x->tile_rows,
                         x->tile_cols, y->rows, y->cols, y->tile_rows, y->tile_cols);
    for (int i = 0; i < w->grid_rows; i++)
        for (int p = 0; p < w->grid_cols; p++) {
            gemv_args_t a = {tsr__tile_m(w, i), x->cols, tsr__tile_n(w, p), 0,
                             p == 0 ? beta : 1.0f, tsr__tile_m(x, p), 0, 0, 0};
            tsr_access_t acc[] = {{tsr__tile(wb, i, p), TSR_R},
                                  {tsr__tile(x, p, 0), TSR_R},
                                  {tsr__tile(y, i, 0), a.beta == 0.0f ? TSR_W : TSR_RW}};
            int rc = submit(&cl_gemv, &a, sizeof a, 3, acc);
            if (rc)
                return rc;
        }
    return TSR_OK;
}

int tsr__op_linear_bf16(const tsr_tensor_t *w, const tsr_tensor_t *wb, const tsr_tensor_t *b,
                        const tsr_tensor_t *x, float beta, tsr_tensor_t *y)
{
    int rc;
    if (beta != 0.0f && beta != 1.0f)
        return tsr__fail(TSR_EINVAL, "linear_bf16: beta %g is neither 0 nor 1", (double)beta);
    if ((rc = check_packed(w, wb, "linear_bf16")))
        return rc;
    if (beta == 0.0f) /* overwrite, then the bias */
        return (rc = gemv_n(w, wb, x, 0.0f, y)) ? rc : tsr__op_bias_add(b, y);
    return (rc = tsr__op_bias_add(b, y)) ? rc : gemv_n(w, wb, x, 1.0f, y);
}

int tsr__op_linear_split(const tsr_tensor_t *w, const tsr_tensor_t *wb, const tsr_tensor_t *b,
                         const tsr_tensor_t *x, float beta, tsr_tensor_t *y, tsr_tensor_t *p0,
                         tsr_tensor_t *p1)
{
    int rc = wb ? check_packed(w, wb, "linear_split") : TSR_OK;
    if (rc)
        return rc;
    const tsr_tensor_t *src = wb ? wb : w;
    int m = w->rows, n = x->cols, K = w->cols;
    if (w->grid_rows != 1 || K < 2 || x->rows != K || x->tile_rows != w->tile_cols ||
        x->grid_cols != 1 || y->rows != m || y->grid_rows != 1 || y->cols != n ||
        y->grid_cols != 1 || b->rows != m || b->grid_rows != 1 || p0->rows != m ||
        p0->cols != n || p0->grid_rows != 1 || p0->grid_cols != 1 || p1->rows != m ||
        p1->cols != n || p1->grid_rows != 1 || p1->grid_cols != 1 ||
        (beta != 0.0f && beta != 1.0f))
        return tsr__fail(TSR_EINVAL, "linear_split: W (%d, %d) in (%d, %d), x (%d, %d), y "
                                     "(%d, %d) and the partials do not agree (beta %g)", m, K,
                         w->tile_rows, w->tile_cols, x->rows, x->cols, y->rows, y->cols,
                         (double)beta);
    /* the halves split at a multiple of 4 columns (the kernel's step) */
    int mid = (K / 2 + 3) / 4 * 4 < K ? (K / 2 + 3) / 4 * 4 : K / 2;
    tsr_tensor_t *part[2] = {p0, p1};
    for (int h = 0; h < 2; h++) {
        int c0 = h ? mid : 0, c1 = h ? K : mid, first = 1;
        for (int p = 0; p < w->grid_cols; p++) {
            int t0 = p * w->tile_cols, tn = tsr__tile_n(w, p);
            int lo = c0 > t0 ? c0 : t0, hi = c1 < t0 + tn ? c1 : t0 + tn;
            if (lo >= hi)
                continue;
            gemv_args_t a = {m, n, hi - lo, 0, first ? 0.0f : 1.0f, tn, wb == NULL,
                             (size_t)(lo - t0) * (size_t)m, (size_t)(lo - t0)};
            tsr_access_t acc[] = {{tsr__tile(src, 0, p), TSR_R},
                                  {tsr__tile(x, p, 0), TSR_R},
                                  {part[h]->tiles[0], first ? TSR_W : TSR_RW}};
            if ((rc = submit(&cl_gemv, &a, sizeof a, 3, acc)))
                return rc;
            first = 0;
        }
    }
    sum2_args_t a = {m, n, beta};
    tsr_access_t acc[] = {{y->tiles[0], beta != 0.0f ? TSR_RW : TSR_W},
                          {b->tiles[0], TSR_R},
                          {p0->tiles[0], TSR_R},
                          {p1->tiles[0], TSR_R}};
    return submit(&cl_sum2, &a, sizeof a, 4, acc);
}

int tsr__op_gemv_t_bf16(const tsr_tensor_t *w, const tsr_tensor_t *wb, const tsr_tensor_t *x,
                        tsr_tensor_t *y)
{
    int rc = check_packed(w, wb, "gemv_t_bf16");
    if (rc)
        return rc;
    if (w->grid_rows != 1 || x->rows != w->rows || x->grid_rows != 1 || x->grid_cols != 1 ||
        y->rows != w->cols || y->tile_rows != w->tile_cols || y->cols != x->cols ||
        y->grid_cols != 1)
        return tsr__fail(TSR_EINVAL, "gemv_t_bf16: W (%d, %d) in (%d, %d), x (%d, %d), y (%d, "
                                     "%d) in (%d, %d) do not agree", w->rows, w->cols,
                         w->tile_rows, w->tile_cols, x->rows, x->cols, y->rows, y->cols,
                         y->tile_rows, y->tile_cols);
    for (int v = 0; v < w->grid_cols; v++) {
        gemv_args_t a = {tsr__tile_n(w, v), x->cols, w->rows, 1, 0.0f, w->rows, 0, 0, 0};
        tsr_access_t acc[] = {{tsr__tile(wb, 0, v), TSR_R},
                              {x->tiles[0], TSR_R},
                              {tsr__tile(y, v, 0), TSR_W}};
        if ((rc = submit(&cl_gemv, &a, sizeof a, 3, acc)))
            return rc;
    }
    return TSR_OK;
}

const tsr_codelet_t *tsr__gen_op_codelet(const char *name)
{
    const tsr_codelet_t *all[] = {&cl_decode, &cl_decode_gqa, &cl_embed, &cl_gemv, &cl_sum2,
                                  &cl_to_bf16};
    for (size_t i = 0; name && i < sizeof all / sizeof *all; i++)
        if (!strcmp(all[i]->name, name))
            return all[i];
    return NULL;
}
