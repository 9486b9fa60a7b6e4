/* The emulated cuBLAS: GEMMs (N/T, leading dimensions above the rows,
 * strided batched, bf16) against double loops, TF32 input rounding when
 * asked for and only then, operands checked against their allocations. */
#include <criterion/criterion.h>
#include <cublas_v2.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static float *dev_from(const float *h, size_t n)
{
    float *d;
    cr_assert_eq(cudaMalloc((void **)&d, n * sizeof(float)), cudaSuccess);
    cr_assert_eq(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    return d;
}

static float val(int i) { return (float)((i * 2654435761u) % 1000u) / 500.0f - 1.0f; }

/* C[m x n] (ldc) = alpha op(A) op(B) + beta C, column-major, in double. */
static void ref_gemm(int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int p = 0; p < k; p++) {
                double a = ta ? A[(size_t)i * lda + p] : A[(size_t)p * lda + i];
                double b = tb ? B[(size_t)p * ldb + j] : B[(size_t)j * ldb + p];
                s += a * b;
            }
            C[(size_t)j * ldc + i] = (float)(alpha * s + beta * C[(size_t)j * ldc + i]);
        }
}

static void check_gemm(cublasHandle_t h, cublasComputeType_t ct, double tol)
{
    const int m = 37, n = 29, k = 45;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
            int lda = ar + 3, ldb = br + 5, ldc = m + 2;
            size_t na = (size_t)lda * ac, nb = (size_t)ldb * bc, nc = (size_t)ldc * n;
            float *A = malloc(na * 4), *B = malloc(nb * 4), *C = malloc(nc * 4), *R = malloc(nc * 4);
            for (size_t i = 0; i < na; i++)
                A[i] = val((int)i);
            for (size_t i = 0; i < nb; i++)
                B[i] = val((int)i + 7);
            for (size_t i = 0; i < nc; i++)
                C[i] = R[i] = val((int)i + 3);
            float *dA = dev_from(A, na), *dB = dev_from(B, nb), *dC = dev_from(C, nc);
            float alpha = 0.75f, beta = -0.5f;
            cr_assert_eq(cublasGemmEx(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                      m, n, k, &alpha, dA, CUDA_R_32F, lda, dB, CUDA_R_32F, ldb,
                                      &beta, dC, CUDA_R_32F, ldc, ct, CUBLAS_GEMM_DEFAULT),
                         CUBLAS_STATUS_SUCCESS);
            cr_assert_eq(cudaMemcpy(C, dC, nc * 4, cudaMemcpyDeviceToHost), cudaSuccess);
            ref_gemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, R, ldc);
            for (int j = 0; j < n; j++)
                for (int i = 0; i < m; i++) {
                    float g = C[(size_t)j * ldc + i], w = R[(size_t)j * ldc + i];
                    cr_assert(fabs((double)g - w) <= tol * (1.0 + fabs(w)),
                              "ta %d tb %d (%d,%d): %g want %g", ta, tb, i, j, g, w);
                }
            /* the padding rows of C are untouched */
            for (int j = 0; j < n; j++)
                cr_assert_eq(C[(size_t)j * ldc + m], val(j * ldc + m + 3));
            cudaFree(dA), cudaFree(dB), cudaFree(dC);
            free(A), free(B), free(C), free(R);
        }
}

Test(emu_blas, gemm_fp32_and_tf32_against_double_loops)
{
    cublasHandle_t h;
    cr_assert_eq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    check_gemm(h, CUBLAS_COMPUTE_32F, 1e-5);
    /* TF32: inputs carry 11 significant bits; k = 45 products of |x| <= 1 */
    check_gemm(h, CUBLAS_COMPUTE_32F_FAST_TF32, 45 * 2.0 * 0x1p-11);
    cublasDestroy(h);
}

Test(emu_blas, tf32_rounds_inputs_to_nearest_even)
{
    cublasHandle_t h;
    cr_assert_eq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    /* 1 + 2^-12 is below half a TF32 ulp (2^-10): rounds to 1; 1 + 3*2^-11 is
     * 1.5 ulp: rounds to even, 1 + 2^-9 */
    float a[2] = {1.0f + 0x1p-12f, 1.0f + 3 * 0x1p-11f}, b[1] = {1.0f}, c[2];
    float *dA = dev_from(a, 2), *dB = dev_from(b, 1), *dC;
    cr_assert_eq(cudaMalloc((void **)&dC, sizeof c), cudaSuccess);
    float one = 1.0f, zero = 0.0f;
    cr_assert_eq(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 1, 1, &one, dA, CUDA_R_32F, 2, dB,
                              CUDA_R_32F, 1, &zero, dC, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F_FAST_TF32,
                              CUBLAS_GEMM_DEFAULT), CUBLAS_STATUS_SUCCESS);
    cr_assert_eq(cudaMemcpy(c, dC, sizeof c, cudaMemcpyDeviceToHost), cudaSuccess);
    cr_assert_eq(c[0], 1.0f, "%a", c[0]);
    cr_assert_eq(c[1], 1.0f + 0x1p-9f, "%a", c[1]);
    cr_assert_eq(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 1, 1, &one, dA, CUDA_R_32F, 2, dB,
                              CUDA_R_32F, 1, &zero, dC, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT), CUBLAS_STATUS_SUCCESS);
    cr_assert_eq(cudaMemcpy(c, dC, sizeof c, cudaMemcpyDeviceToHost), cudaSuccess);
    cr_assert_eq(c[0], a[0], "plain fp32 keeps every bit: %a", c[0]);
    cr_assert_eq(c[1], a[1]);
    cublasDestroy(h);
}

static uint16_t bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static float unbf16(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

Test(emu_blas, strided_batched_and_bf16)
{
    cublasHandle_t h;
    cudaStream_t s;
    cr_assert_eq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    cr_assert_eq(cudaStreamCreate(&s), cudaSuccess);
    cr_assert_eq(cublasSetStream(h, s), CUBLAS_STATUS_SUCCESS);
    cudaStream_t got;
    cr_assert_eq(cublasGetStream(h, &got), CUBLAS_STATUS_SUCCESS);
    cr_assert_eq(got, s);
    const int m = 9, n = 11, k = 13, batch = 5;
    long long sa = m * k + 4, sb = k * n + 1, sc = m * n + 2;
    size_t na = (size_t)sa * batch, nb = (size_t)sb * batch, nc = (size_t)sc * batch;
    float *A = malloc(na * 4), *B = malloc(nb * 4), *C = calloc(nc, 4), *R = calloc(nc, 4);
    uint16_t *Ab = malloc(na * 2), *Bb = malloc(nb * 2);
    for (size_t i = 0; i < na; i++)
        Ab[i] = bf16(val((int)i)), A[i] = unbf16(Ab[i]);
    for (size_t i = 0; i < nb; i++)
        Bb[i] = bf16(val((int)i + 1)), B[i] = unbf16(Bb[i]);
    void *dA, *dB;
    float *dC;
    cr_assert_eq(cudaMalloc(&dA, na * 2), cudaSuccess);
    cr_assert_eq(cudaMalloc(&dB, nb * 2), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&dC, nc * 4), cudaSuccess);
    cudaMemcpy(dA, Ab, na * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dB, Bb, nb * 2, cudaMemcpyHostToDevice);
    cudaMemset(dC, 0, nc * 4);
    float one = 1.0f, zero = 0.0f;
    cr_assert_eq(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, dA,
                                            CUDA_R_16BF, m, sa, dB, CUDA_R_16BF, k, sb, &zero, dC,
                                            CUDA_R_32F, m, sc, batch, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT), CUBLAS_STATUS_SUCCESS);
    cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
    cr_assert_eq(cudaMemcpy(C, dC, nc * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int b = 0; b < batch; b++)
        ref_gemm(0, 0, m, n, k, 1.0f, A + b * sa, m, B + b * sb, k, 0.0f, R + b * sc, m);
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < m * n; i++)
            cr_assert(fabsf(C[b * sc + i] - R[b * sc + i]) <= 1e-5f * (1 + fabsf(R[b * sc + i])),
                      "batch %d [%d]: %g want %g", b, i, C[b * sc + i], R[b * sc + i]);
    /* the gap between batches of C is not written */
    for (int b = 0; b < batch; b++)
        cr_assert_eq(C[b * sc + m * n], 0.0f);
    /* an operand whose extent overruns its allocation */
    setenv("TESSERA_CUDA_EMU_QUIET", "1", 1);
    cr_assert_eq(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, dA,
                                            CUDA_R_16BF, m, sa, dB, CUDA_R_16BF, k, sb, &zero, dC,
                                            CUDA_R_32F, m, sc, batch + 1, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT), CUBLAS_STATUS_EXECUTION_FAILED);
    cr_assert(strstr(tsr_emu_last_message(), "overrun"), "%s", tsr_emu_last_message());
    /* a bad leading dimension */
    cr_assert_eq(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, dA, CUDA_R_16BF, m - 1, dB,
                              CUDA_R_16BF, k, &zero, dC, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT), CUBLAS_STATUS_INVALID_VALUE);
    /* saxpy */
    float x[8], y[8];
    for (int i = 0; i < 8; i++)
        x[i] = (float)i, y[i] = 1.0f;
    float *dx = dev_from(x, 8), *dy = dev_from(y, 8), a = 2.0f;
    cr_assert_eq(cublasSaxpy(h, 8, &a, dx, 1, dy, 1), CUBLAS_STATUS_SUCCESS);
    cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
    cudaMemcpy(y, dy, sizeof y, cudaMemcpyDeviceToHost);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(y[i], 1.0f + 2.0f * (float)i);
    cr_assert_eq(cublasSaxpy(h, 8, &a, x, 1, dy, 1), CUBLAS_STATUS_EXECUTION_FAILED,
                 "a pageable host x");
    cublasDestroy(h);
    cudaStreamDestroy(s);
    free(A), free(B), free(C), free(R), free(Ab), free(Bb);
}
