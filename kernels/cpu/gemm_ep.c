/* CPU GEMM with an epilogue (kernels/gemm.h): the plain product of gemm.c,
 * then the epilogue as a loop over the columns of the tile, so that the CPU
 * implementation of a fused codelet computes what cuBLASLt's epilogue does
 * on a GPU, unfused. */
#include <stdlib.h>

#include <tessera/tessera.h>

#include "kernels/convert.h"
#include "kernels/gelu.h"
#include "kernels/gemm.h"

/* op(X)(i, p) of a stored fp32 or bf16 matrix with leading dimension ld */
static double op_elem(const void *x, int bf16, int trans, int i, int p, int ld)
{
    size_t at = trans ? (size_t)i * (size_t)ld + (size_t)p : (size_t)p * (size_t)ld + (size_t)i;
    if (!bf16)
        return ((const float *)x)[at];
    float v;
    tsr_cpu_bf16_to_f32(1, (const uint16_t *)x + at, &v);
    return v;
}

/* sums(r) over p < k of op(X)(r, p), r < rows: the BGRADA/BGRADB vector */
static void op_row_sums(const void *x, int bf16, int trans, int rows, int k, int ld,
                        float *out, int accumulate)
{
    for (int r = 0; r < rows; r++) {
        double s = 0.0;
        for (int p = 0; p < k; p++)
            s += op_elem(x, bf16, trans, r, p, ld);
        out[r] = accumulate ? (float)(out[r] + s) : (float)s;
    }
}

static int kind_ok(const tsr_gemm_epilogue_t *epi)
{
    return epi->kind >= TSR_EPI_NONE && epi->kind <= TSR_EPI_BGRADB;
}

/* The epilogue on C (m, n), fp32 (cf) or bf16 (ch), once the product is in
 * C. col: m floats of scratch for a bf16 column. */
static int column_epilogue(int m, int n, float *cf, uint16_t *ch, int ldc,
                           const tsr_gemm_epilogue_t *epi, float *col, float *auxcol)
{
    int k = epi->kind;
    double *sums = NULL;
    if (k == TSR_EPI_DGELU_BGRAD && !(sums = calloc((size_t)m, sizeof *sums)))
        return TSR_ENOMEM;
    for (int j = 0; j < n; j++) {
        float *x = ch ? col : cf + (size_t)j * ldc;
        if (ch)
            tsr_cpu_bf16_to_f32((size_t)m, ch + (size_t)j * ldc, col);
        size_t aoff = (size_t)j * (size_t)epi->ld_aux;
        if (k == TSR_EPI_BIAS || k == TSR_EPI_BIAS_GELU)
            for (int i = 0; i < m; i++)
                x[i] += epi->bias[i];
        if (k == TSR_EPI_BIAS_GELU) {
            if (epi->aux && ch)
                tsr_cpu_f32_to_bf16((size_t)m, x, (uint16_t *)epi->aux + aoff);
            else if (epi->aux)
                for (int i = 0; i < m; i++)
                    ((float *)epi->aux)[aoff + i] = x[i];
            tsr_cpu_gelu_fwd((size_t)m, x, x);
        }
        if (k == TSR_EPI_DGELU || k == TSR_EPI_DGELU_BGRAD) {
            const float *g = (const float *)epi->aux + aoff;
            if (ch) {
                tsr_cpu_bf16_to_f32((size_t)m, (const uint16_t *)epi->aux + aoff, auxcol);
                g = auxcol;
            }
            tsr_cpu_gelu_bwd((size_t)m, g, x, x);
        }
        if (sums)
            for (int i = 0; i < m; i++)
                sums[i] += x[i];
        if (ch)
            tsr_cpu_f32_to_bf16((size_t)m, col, ch + (size_t)j * ldc);
    }
    if (sums)
        for (int i = 0; i < m; i++)
            epi->bgrad[i] = epi->bgrad_accumulate ? (float)(epi->bgrad[i] + sums[i])
                                                  : (float)sums[i];
    free(sums);
    return 0;
}

int tsr_cpu_gemm_ep(int transa, int transb, int m, int n, int k, float alpha, const float *a,
                    int lda, const float *b, int ldb, float beta, float *c, int ldc,
                    const tsr_gemm_epilogue_t *epi)
{
    if (epi && !kind_ok(epi))
        return TSR_EINVAL;
    tsr_cpu_gemm(transa, transb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
    if (!epi || epi->kind == TSR_EPI_NONE)
        return 0;
    if (epi->kind == TSR_EPI_BGRADA)
        op_row_sums(a, 0, transa, m, k, lda, epi->bgrad, epi->bgrad_accumulate);
    else if (epi->kind == TSR_EPI_BGRADB)
        op_row_sums(b, 0, !transb, n, k, ldb, epi->bgrad, epi->bgrad_accumulate);
    else if (m > 0)
        return column_epilogue(m, n, c, NULL, ldc, epi, NULL, NULL);
    return 0;
}

int tsr_cpu_gemm_bf16_ep(int transa, int transb, int m, int n, int k, float alpha,
                         const uint16_t *a, int lda, const uint16_t *b, int ldb, float beta,
                         void *c, int c_is_bf16, int ldc, const tsr_gemm_epilogue_t *epi)
{
    if (epi && !kind_ok(epi))
        return TSR_EINVAL;
    tsr_cpu_gemm_bf16(transa, transb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, c_is_bf16,
                      ldc, 0, 1);
    if (!epi || epi->kind == TSR_EPI_NONE)
        return 0;
    if (epi->kind == TSR_EPI_BGRADA)
        op_row_sums(a, 1, transa, m, k, lda, epi->bgrad, epi->bgrad_accumulate);
    else if (epi->kind == TSR_EPI_BGRADB)
        op_row_sums(b, 1, !transb, n, k, ldb, epi->bgrad, epi->bgrad_accumulate);
    else if (m > 0 && !c_is_bf16)
        return column_epilogue(m, n, c, NULL, ldc, epi, NULL, NULL);
    else if (m > 0) {
        float *col = malloc(2 * (size_t)m * sizeof *col);
        int rc = col ? column_epilogue(m, n, NULL, c, ldc, epi, col, col + m) : TSR_ENOMEM;
        free(col);
        return rc;
    }
    return 0;
}
