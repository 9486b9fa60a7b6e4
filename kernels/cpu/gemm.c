/* CPU GEMM: a thin strided-batched loop over OpenBLAS cblas_sgemm. */
#include "kernels/gemm.h"

#include <cblas.h>

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
