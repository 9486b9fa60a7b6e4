/* CPU GEMM: a thin strided-batched loop over OpenBLAS cblas_sgemm. */
#include "kernels/gemm.h"

#include <cblas.h>
#include <stdlib.h>

#include "kernels/convert.h"

/* C[b] (m, n) = alpha op(A[b]) (m, k) op(B[b]) (k, n) + beta C[b] */
void tsr_cpu_gemm(int transa, int transb, int m, int n, int k, float alpha,
                  const float *a, int lda, int64_t stride_a,
                  const float *b, int ldb, int64_t stride_b, float beta,
                  float *c, int ldc, int64_t stride_c, int batch)
{
    if (m <= 0 || n <= 0)
        return;
    for (int bi = 0; bi < batch; bi++) {
        float *cb = c + (int64_t)bi * stride_c;
        if (k <= 0) {
            /* BLAS would do this too, but make beta == 0 overwrite explicitly */
            for (int j = 0; j < n; j++)
                for (int i = 0; i < m; i++)
                    cb[i + (size_t)j * ldc] = beta == 0.0f ? 0.0f : beta * cb[i + (size_t)j * ldc];
            continue;
        }
        cblas_sgemm(CblasColMajor, transa == TSR_TRANS ? CblasTrans : CblasNoTrans,
                    transb == TSR_TRANS ? CblasTrans : CblasNoTrans, m, n, k, alpha,
                    a + (int64_t)bi * stride_a, lda, b + (int64_t)bi * stride_b, ldb, beta,
                    cb, ldc);
    }
}

/* The plain form: widen A and B to fp32 (exact), then tsr_cpu_gemm. The
 * products of bf16 values are exact in fp32, so this differs from a fused
 * bf16 kernel only in the order of the fp32 sums. */
void tsr_cpu_gemm_bf16(int transa, int transb, int m, int n, int k, float alpha,
                       const uint16_t *a, int lda, int64_t stride_a,
                       const uint16_t *b, int ldb, int64_t stride_b, float beta,
                       void *c, int c_is_bf16, int ldc, int64_t stride_c, int batch)
{
    if (m <= 0 || n <= 0 || batch <= 0)
        return;
    /* op(A) is (m, k): stored (m, k) with lda, or (k, m) */
    size_t acols = (size_t)(transa == TSR_TRANS ? m : k), bcols = (size_t)(transb == TSR_TRANS ? k : n);
    size_t na = (size_t)lda * (acols ? acols : 1), nb = (size_t)ldb * (bcols ? bcols : 1);
    size_t nc = (size_t)ldc * (size_t)n;
    float *fa = malloc(na * sizeof *fa), *fb = malloc(nb * sizeof *fb);
    float *fc = c_is_bf16 ? malloc(nc * sizeof *fc) : NULL;
    if (!fa || !fb || (c_is_bf16 && !fc)) {
        free(fa);
        free(fb);
        free(fc);
        return; /* the reference path only: the fused kernel needs no memory */
    }
    for (int bi = 0; bi < batch; bi++) {
        tsr_cpu_bf16_to_f32(na, a + (int64_t)bi * stride_a, fa);
        tsr_cpu_bf16_to_f32(nb, b + (int64_t)bi * stride_b, fb);
        float *cb = c_is_bf16 ? fc : (float *)c + (int64_t)bi * stride_c;
        uint16_t *hb = c_is_bf16 ? (uint16_t *)c + (int64_t)bi * stride_c : NULL;
        if (c_is_bf16)
            tsr_cpu_bf16_to_f32(nc, hb, fc);
        tsr_cpu_gemm(transa, transb, m, n, k, alpha, fa, lda, 0, fb, ldb, 0, beta, cb, ldc, 0, 1);
        if (c_is_bf16)
            tsr_cpu_f32_to_bf16(nc, fc, hb);
    }
    free(fa);
    free(fb);
    free(fc);
}
