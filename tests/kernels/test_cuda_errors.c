/* How the CUDA kernels fail: a failed launch is TSR_EDEVICE with a message
 * naming the kernel and the CUDA error, a failed cuBLAS call names the call
 * and its status, a shape the kernels do not support is TSR_EINVAL before
 * anything is launched, and a failure does not make the thread's next launch
 * fail.  The failures are real ones (an invalid launch configuration, an
 * invalid leading dimension), so these tests run on a GPU as on the
 * emulation; the injected failures of the emulation are emulation-only. */
#include <stdlib.h>

#include <tessera/tessera.h>

#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/gelu.h"
#include "kernels/gemm.h"
#include "kt_cuda.h"

/* The buffer the next launch fills must come out right: the thread's
 * previous failure is not blamed on it. */
static void fill_works(void *st)
{
    float *d = kt_dev(37);
    KT_CUDA_OK(tsr_cuda_fill(st, 37, 2.5f, d));
    float *g = kt_from_dev(d, 37), want[37];
    for (int i = 0; i < 37; i++)
        want[i] = 2.5f;
    kt_assert_close_f("fill after a failure", g, want, 37, 0, 0);
    free(g);
    cudaFree(d);
}

Test(cuda_errors, failed_launch_names_the_kernel_and_the_error)
{
    KT_REQUIRE_GPU();
    void *st = kt_stream();
    float *q = kt_dev(64), *k = kt_dev(64), *v = kt_dev(64), *ms = kt_dev(64), *acc = kt_dev(64);
    /* 70000 heads: a grid y dimension above CUDA's 65535 (a real H200 under
     * CUDA 13 names it cudaErrorInvalidValue; the emulation follows it) */
    int rc = tsr_cuda_attn_fwd(st, TSR_ATTN_FP32, 20, 1, 1, 70000, 1, 0, 0, 0.5f, 20, 20, q, k, v,
                               ms, acc);
    cr_assert_eq(rc, TSR_EDEVICE, "attn_fwd over 70000 heads returned %d", rc);
    cr_assert(kt_msg_has("k_attn_fwd<32>: launch failed"), "message: %s", tsr_cuda_last_error());
    cr_assert(kt_msg_has("cudaErrorInvalidValue"), "message: %s", tsr_cuda_last_error());
    fill_works(st);
    /* the same on tensor cores names the tensor-core kernel */
    rc = tsr_cuda_attn_fwd(st, TSR_ATTN_TF32, 20, 1, 1, 70000, 1, 0, 0, 0.5f, 20, 20, q, k, v, ms,
                           acc);
    cr_assert_eq(rc, TSR_EDEVICE, "tf32 attn_fwd over 70000 heads returned %d", rc);
    cr_assert(kt_msg_has("k_attn_fwd_tc<32>: launch failed"), "message: %s",
              tsr_cuda_last_error());
    fill_works(st);
    /* the backward's first kernel fails and the second is not launched */
    rc = tsr_cuda_attn_bwd(st, TSR_ATTN_FP32, 40, 1, 1, 70000, 1, 0, 0, 0.5f, 40, 40, q, k, v, 40,
                           40, q, ms, ms, acc, acc, acc);
    cr_assert_eq(rc, TSR_EDEVICE, "attn_bwd over 70000 heads returned %d", rc);
    cr_assert(kt_msg_has("k_attn_bwd_kv<64>: launch failed"), "message: %s", tsr_cuda_last_error());
    /* a success leaves the message of the last failure in place */
    fill_works(st);
    cr_assert(kt_msg_has("k_attn_bwd_kv<64>"), "message: %s", tsr_cuda_last_error());
    cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(ms), cudaFree(acc);
    cudaStreamDestroy((cudaStream_t)st);
}

Test(cuda_errors, unsupported_head_dim_is_einval_before_any_launch)
{
    KT_REQUIRE_GPU();
    void *st = kt_stream();
    float *b = kt_dev(16);
    int rc = tsr_cuda_attn_fwd(st, TSR_ATTN_TF32, 300, 1, 1, 1, 1, 0, 0, 0.5f, 300, 300, b, b, b, b,
                               b);
    cr_assert_eq(rc, TSR_EINVAL);
    cr_assert(kt_msg_has("tsr_cuda_attn_fwd: head dimension 300"), "message: %s",
              tsr_cuda_last_error());
    rc = tsr_cuda_attn_bwd(st, TSR_ATTN_TF32, 257, 1, 1, 1, 1, 0, 0, 0.5f, 257, 257, b, b, b, 257,
                           257, b, b, b, b, b, b);
    cr_assert_eq(rc, TSR_EINVAL);
    cr_assert(kt_msg_has("tsr_cuda_attn_bwd: head dimension 257"), "message: %s",
              tsr_cuda_last_error());
    rc = tsr_cuda_attn_fwd(st, 7, 64, 1, 1, 1, 1, 0, 0, 0.5f, 64, 64, b, b, b, b, b);
    cr_assert_eq(rc, TSR_EINVAL);
    cr_assert(kt_msg_has("tsr_cuda_attn_fwd: precision 7"), "message: %s", tsr_cuda_last_error());
    rc = tsr_cuda_attn_bwd(st, -1, 64, 1, 1, 1, 1, 0, 0, 0.5f, 64, 64, b, b, b, 64, 64, b, b, b, b, b,
                           b);
    cr_assert_eq(rc, TSR_EINVAL);
    cr_assert(kt_msg_has("tsr_cuda_attn_bwd: precision -1"), "message: %s", tsr_cuda_last_error());
    KT_CUDA_OK(cudaGetLastError()); /* nothing was launched, nothing pending */
    fill_works(st);
    cudaFree(b);
    cudaStreamDestroy((cudaStream_t)st);
}

Test(cuda_errors, failed_gemm_names_the_cublas_call)
{
    KT_REQUIRE_GPU();
    cublasHandle_t h;
    KT_CUDA_OK(cublasCreate(&h));
    void *st = kt_stream();
    float *a = kt_dev(256), *b = kt_dev(256), *c = kt_dev(256);
    /* lda 2 < m 8: cuBLAS refuses the leading dimension */
    int rc = tsr_cuda_gemm(st, h, TSR_GEMM_TF32, TSR_NOTRANS, TSR_NOTRANS, 8, 4, 4, 1.0f, a, 2, 0,
                           b, 4, 0, 0.0f, c, 8, 0, 1);
    cr_assert_eq(rc, TSR_EDEVICE, "gemm with lda < m returned %d", rc);
    cr_assert(kt_msg_has("cublasGemmEx: CUBLAS_STATUS_INVALID_VALUE"), "message: %s",
              tsr_cuda_last_error());
    rc = tsr_cuda_gemm(st, h, TSR_GEMM_FP32, TSR_NOTRANS, TSR_NOTRANS, 8, 4, 4, 1.0f, a, 2, 32,
                       b, 4, 16, 0.0f, c, 8, 32, 2);
    cr_assert_eq(rc, TSR_EDEVICE, "batched gemm with lda < m returned %d", rc);
    cr_assert(kt_msg_has("cublasGemmStridedBatchedEx: CUBLAS_STATUS_INVALID_VALUE"),
              "message: %s", tsr_cuda_last_error());
    rc = tsr_cuda_gemm_bf16(st, h, TSR_NOTRANS, TSR_NOTRANS, 8, 4, 4, 1.0f, (uint16_t *)a, 2, 0,
                            (uint16_t *)b, 4, 0, 0.0f, c, 0, 8, 0, 1);
    cr_assert_eq(rc, TSR_EDEVICE, "bf16 gemm with lda < m returned %d", rc);
    cr_assert(kt_msg_has("cublasGemmEx"), "message: %s", tsr_cuda_last_error());
    /* arguments refused before cuBLAS sees them */
    rc = tsr_cuda_gemm(st, h, 7, TSR_NOTRANS, TSR_NOTRANS, 8, 4, 4, 1.0f, a, 8, 0, b, 4, 0, 0.0f,
                       c, 8, 0, 1);
    cr_assert_eq(rc, TSR_EINVAL);
    cr_assert(kt_msg_has("precision mode 7"), "message: %s", tsr_cuda_last_error());
    rc = tsr_cuda_gemm(st, h, TSR_GEMM_FP32, TSR_NOTRANS, TSR_NOTRANS, 8, 4, -1, 1.0f, a, 8, 0, b,
                       4, 0, 0.0f, c, 8, 0, 1);
    cr_assert_eq(rc, TSR_EINVAL);
    cr_assert(kt_msg_has("negative size"), "message: %s", tsr_cuda_last_error());
    /* the handle still works: C (8, 4) = A (8, 4) I (4, 4) */
    float ha[32], hb[16];
    for (int i = 0; i < 32; i++)
        ha[i] = (float)i - 7.0f;
    for (int i = 0; i < 16; i++)
        hb[i] = i % 5 == 0 ? 1.0f : 0.0f;
    kt_upload(a, ha, 32), kt_upload(b, hb, 16);
    KT_CUDA_OK(tsr_cuda_gemm(st, h, TSR_GEMM_FP32, TSR_NOTRANS, TSR_NOTRANS, 8, 4, 4, 1.0f, a, 8,
                             0, b, 4, 0, 0.0f, c, 8, 0, 1));
    float *g = kt_from_dev(c, 32);
    kt_assert_close_f("gemm after failures", g, ha, 32, 0, 0);
    free(g);
    cudaFree(a), cudaFree(b), cudaFree(c);
    cublasDestroy(h);
    cudaStreamDestroy((cudaStream_t)st);
}

/* ---- the emulation's injected failures (TESSERA_CUDA_EMU_FAIL, read at
 * each call) and its pointer checks: emulation-only ---- */

static void inject(const char *spec)
{
    cr_assert_eq(setenv("TESSERA_CUDA_EMU_FAIL", spec, 1), 0);
}

static void inject_none(void)
{
    cr_assert_eq(unsetenv("TESSERA_CUDA_EMU_FAIL"), 0);
}

Test(cuda_errors, injected_launch_failure_names_the_kernel)
{
    KT_REQUIRE_GPU();
    KT_REQUIRE_EMU();
    void *st = kt_stream();
    float *x = kt_dev(100), *y = kt_dev(100);
    inject("launch:2");
    KT_CUDA_OK(tsr_cuda_fill(st, 100, 1.0f, x)); /* the first launch goes through */
    int rc = tsr_cuda_axpy(st, 100, 2.0f, x, y);
    inject_none();
    cr_assert_eq(rc, TSR_EDEVICE, "an injected launch failure returned %d", rc);
    cr_assert(kt_msg_has("k_axpby: launch failed: cudaErrorLaunchFailure"), "message: %s",
              tsr_cuda_last_error());
    fill_works(st);
    cudaFree(x), cudaFree(y);
    cudaStreamDestroy((cudaStream_t)st);
}

Test(cuda_errors, injected_gemm_failure_names_the_cublas_call)
{
    KT_REQUIRE_GPU();
    KT_REQUIRE_EMU();
    cublasHandle_t h;
    KT_CUDA_OK(cublasCreate(&h));
    void *st = kt_stream();
    float *a = kt_dev(64), *b = kt_dev(64), *c = kt_dev(64);
    inject("cublasGemmEx:1,cublasGemmStridedBatchedEx:1");
    int rc = tsr_cuda_gemm(st, h, TSR_GEMM_TF32, TSR_NOTRANS, TSR_NOTRANS, 4, 4, 4, 1.0f, a, 4, 0,
                           b, 4, 0, 0.0f, c, 4, 0, 1);
    cr_assert_eq(rc, TSR_EDEVICE);
    cr_assert(kt_msg_has("cublasGemmEx: CUBLAS_STATUS_EXECUTION_FAILED"), "message: %s",
              tsr_cuda_last_error());
    rc = tsr_cuda_gemm(st, h, TSR_GEMM_FP32, TSR_NOTRANS, TSR_NOTRANS, 4, 4, 2, 1.0f, a, 4, 8, b,
                       2, 8, 0.0f, c, 4, 16, 2);
    inject_none();
    cr_assert_eq(rc, TSR_EDEVICE);
    cr_assert(kt_msg_has("cublasGemmStridedBatchedEx: CUBLAS_STATUS_EXECUTION_FAILED"),
              "message: %s", tsr_cuda_last_error());
    fill_works(st); /* the failed GEMM left no error for the next launch */
    cudaFree(a), cudaFree(b), cudaFree(c);
    cublasDestroy(h);
    cudaStreamDestroy((cudaStream_t)st);
}

/* A kernel that faults while it runs breaks the device for good, as on a
 * GPU: the stream's synchronisation reports it even after a launcher
 * consumed the thread's error, and every later launch fails naming itself. */
Test(cuda_errors, kernel_fault_stays_sticky_after_a_launcher_reported_it)
{
    KT_REQUIRE_GPU();
    KT_REQUIRE_EMU();
    cr_assert_eq(setenv("TESSERA_CUDA_EMU_QUIET", "1", 1), 0);
    void *st = kt_stream();
    float *x = kt_dev(100);
    inject("kernel:1");
    KT_CUDA_OK(tsr_cuda_fill(st, 100, 1.0f, x)); /* asynchronous: the launch itself is fine */
    inject_none();
    cr_assert_neq(cudaStreamSynchronize((cudaStream_t)st), cudaSuccess);
    int rc = tsr_cuda_scale(st, 100, 2.0f, x, x);
    cr_assert_eq(rc, TSR_EDEVICE);
    cr_assert(kt_msg_has("k_axpby: launch failed"), "message: %s", tsr_cuda_last_error());
    cr_assert_neq(cudaStreamSynchronize((cudaStream_t)st), cudaSuccess,
                  "the fault was cleared by the launcher");
    cr_assert_neq(cudaPeekAtLastError(), cudaSuccess);
    cudaFree(x);
}

/* Host memory handed to a kernel or a device copy: the launch or the copy
 * fails, naming the kernel or the call (on a GPU this would be a fault). */
Test(cuda_errors, pageable_host_pointer_is_refused_naming_the_kernel)
{
    KT_REQUIRE_GPU();
    KT_REQUIRE_EMU();
    cr_assert_eq(setenv("TESSERA_CUDA_EMU_QUIET", "1", 1), 0);
    void *st = kt_stream();
    float *host = kt_alloc(64), *d = kt_dev(64);
    int rc = tsr_cuda_gelu_fwd(st, 64, d, host);
    cr_assert_eq(rc, TSR_EDEVICE);
    cr_assert(kt_msg_has("k_gelu_fwd: launch failed"), "message: %s", tsr_cuda_last_error());
    rc = tsr_cuda_copy(st, 64, host, d);
    cr_assert_eq(rc, TSR_EDEVICE);
    cr_assert(kt_msg_has("tsr_cuda_copy: cudaMemcpyAsync: "), "message: %s", tsr_cuda_last_error());
    fill_works(st);
    free(host), cudaFree(d);
    cudaStreamDestroy((cudaStream_t)st);
}
