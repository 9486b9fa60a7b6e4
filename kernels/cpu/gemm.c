/* CPU GEMM: oneDNN matmul primitives where the build has oneDNN (fp32 and
 * bf16, AMX where the CPU has it: docs/kernels.md), else a strided-batched
 * loop over OpenBLAS cblas_sgemm, and for bf16 the plain path (widen to
 * fp32, then SGEMM). The OpenBLAS and plain paths also take over any call
 * oneDNN cannot make (an error, an unsupported case). */
#include "kernels/gemm.h"

#include <cblas.h>
#include <stdlib.h>

#include "kernels/convert.h"
#ifdef TSR_HAVE_DNNL
#include "kernels/cpu/gemm_dnnl.h"
#endif

/* k == 0: C[b] = beta C[b] (C not read when beta == 0). */
static void scale_c(int m, int n, float beta, void *c, int c_is_bf16, int ldc, int64_t stride_c,
                    int batch)
{
    for (int bi = 0; bi < batch; bi++)
        for (int j = 0; j < n; j++) {
            size_t off = (size_t)((int64_t)bi * stride_c) + (size_t)j * ldc;
            if (c_is_bf16) {
                uint16_t *col = (uint16_t *)c + off;
                for (int i = 0; i < m; i++) {
                    float v = 0.0f;
                    if (beta != 0.0f) {
                        tsr_cpu_bf16_to_f32(1, col + i, &v);
                        v *= beta;
                    }
                    tsr_cpu_f32_to_bf16(1, &v, col + i);
                }
            } else {
                float *col = (float *)c + off;
                for (int i = 0; i < m; i++)
                    col[i] = beta == 0.0f ? 0.0f : beta * col[i];
            }
        }
}

/* C[b] (m, n) = alpha op(A[b]) (m, k) op(B[b]) (k, n) + beta C[b] by OpenBLAS */
static void openblas_gemm(int transa, int transb, int m, int n, int k, float alpha,
                          const float *a, int lda, int64_t stride_a, const float *b, int ldb,
                          int64_t stride_b, float beta, float *c, int ldc, int64_t stride_c,
                          int batch)
{
    for (int bi = 0; bi < batch; bi++)
        cblas_sgemm(CblasColMajor, transa == TSR_TRANS ? CblasTrans : CblasNoTrans,
                    transb == TSR_TRANS ? CblasTrans : CblasNoTrans, m, n, k, alpha,
                    a + (int64_t)bi * stride_a, lda, b + (int64_t)bi * stride_b, ldb, beta,
                    c + (int64_t)bi * stride_c, ldc);
}

void tsr_cpu_gemm(int transa, int transb, int m, int n, int k, float alpha,
                  const float *a, int lda, int64_t stride_a,
                  const float *b, int ldb, int64_t stride_b, float beta,
                  float *c, int ldc, int64_t stride_c, int batch)
{
    if (m <= 0 || n <= 0 || batch <= 0)
        return;
    if (k <= 0) { /* BLAS would do this too, but make beta == 0 overwrite explicitly */
        scale_c(m, n, beta, c, 0, ldc, stride_c, batch);
        return;
    }
    int done = 0;
#ifdef TSR_HAVE_DNNL
    done = tsr__dnnl_gemm(0, 0, transa == TSR_TRANS, transb == TSR_TRANS, m, n, k, alpha, a, lda,
                          stride_a, b, ldb, stride_b, beta, c, ldc, stride_c, batch);
#endif
    if (done < batch)
        openblas_gemm(transa, transb, m, n, k, alpha, a + (int64_t)done * stride_a, lda, stride_a,
                      b + (int64_t)done * stride_b, ldb, stride_b, beta,
                      c + (int64_t)done * stride_c, ldc, stride_c, batch - done);
}

/* The plain form: widen A and B to fp32 (exact), then SGEMM. The products of
 * bf16 values are exact in fp32, so this differs from a fused bf16 kernel
 * only in the order of the fp32 sums. Only the matrices' own elements are
 * read: the last column of a matrix with ld > rows ends at its rows. */
static void plain_gemm_bf16(int transa, int transb, int m, int n, int k, float alpha,
                            const uint16_t *a, int lda, int64_t stride_a,
                            const uint16_t *b, int ldb, int64_t stride_b, float beta,
                            void *c, int c_is_bf16, int ldc, int64_t stride_c, int batch)
{
    /* op(A) is (m, k): stored (m, k) with lda, or (k, m) */
    size_t arows = (size_t)(transa == TSR_TRANS ? k : m), acols = (size_t)(transa == TSR_TRANS ? m : k);
    size_t brows = (size_t)(transb == TSR_TRANS ? n : k), bcols = (size_t)(transb == TSR_TRANS ? k : n);
    size_t na = (size_t)lda * (acols - 1) + arows, nb = (size_t)ldb * (bcols - 1) + brows;
    size_t nc = (size_t)ldc * (size_t)(n - 1) + (size_t)m;
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
        openblas_gemm(transa, transb, m, n, k, alpha, fa, lda, 0, fb, ldb, 0, beta, cb, ldc, 0, 1);
        if (c_is_bf16) /* rows between m and ldc go back unchanged (bf16 -> f32 -> bf16 is exact) */
            tsr_cpu_f32_to_bf16(nc, fc, hb);
    }
    free(fa);
    free(fb);
    free(fc);
}

void tsr_cpu_gemm_bf16(int transa, int transb, int m, int n, int k, float alpha,
                       const uint16_t *a, int lda, int64_t stride_a,
                       const uint16_t *b, int ldb, int64_t stride_b, float beta,
                       void *c, int c_is_bf16, int ldc, int64_t stride_c, int batch)
{
    if (m <= 0 || n <= 0 || batch <= 0)
        return;
    if (k <= 0) {
        scale_c(m, n, beta, c, c_is_bf16, ldc, stride_c, batch);
        return;
    }
    int done = 0;
#ifdef TSR_HAVE_DNNL
    done = tsr__dnnl_gemm(1, c_is_bf16 != 0, transa == TSR_TRANS, transb == TSR_TRANS, m, n, k,
                          alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c,
                          batch);
#endif
    if (done < batch) {
        size_t csize = c_is_bf16 ? 2 : 4;
        plain_gemm_bf16(transa, transb, m, n, k, alpha, a + (int64_t)done * stride_a, lda,
                        stride_a, b + (int64_t)done * stride_b, ldb, stride_b, beta,
                        (char *)c + (size_t)((int64_t)done * stride_c) * csize, c_is_bf16, ldc,
                        stride_c, batch - done);
    }
}

const char *tsr_cpu_gemm_library(void)
{
#ifdef TSR_HAVE_DNNL
    return "onednn";
#else
    return "openblas";
#endif
}

int tsr_cpu_gemm_set_thread_count(int n)
{
#ifdef TSR_HAVE_DNNL
    return tsr__dnnl_set_threads(n);
#else
    (void)n;
    return 0;
#endif
}
