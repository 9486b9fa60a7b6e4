/* The CUDA kernels' failure messages (kernels/cuda_status.h): one per
 * thread, written only by a failing call, in the words of the CUDA runtime
 * and cuBLAS (the error's name and its string). */
#include <stdarg.h>
#include <stdio.h>

#include <cublas_v2.h>
#include <tessera/tessera.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda_status.h"

enum { MSG_MAX = 512 };

static thread_local char last_msg[MSG_MAX];

extern "C" const char *tsr_cuda_last_error(void)
{
    return last_msg;
}

static void set_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
}

int tsr_cuda_failed(const char *where, cudaError_t e)
{
    set_msg("%s: %s (%s)", where, cudaGetErrorName(e), cudaGetErrorString(e));
    /* The caller is told; leave the next call on this thread a clean slate.
     * A sticky error (a faulted context) is not cleared by this: every
     * later call, the stream's synchronisation included, reports it. */
    (void)cudaGetLastError();
    return TSR_EDEVICE;
}

int tsr_cuda_launched(const char *kernel)
{
    /* Peek, not get: a successful launch leaves the thread's error state
     * exactly as it was. */
    cudaError_t e = cudaPeekAtLastError();
    if (e == cudaSuccess)
        return 0;
    set_msg("%s: launch failed: %s (%s)", kernel, cudaGetErrorName(e), cudaGetErrorString(e));
    (void)cudaGetLastError(); /* as in tsr_cuda_failed */
    return TSR_EDEVICE;
}

int tsr_cuda_launched_t(const char *kernel, int targ)
{
    char name[96];
    snprintf(name, sizeof name, "%s<%d>", kernel, targ);
    return tsr_cuda_launched(name);
}

int tsr_cuda_blas_failed(const char *call, int status)
{
    set_msg("%s: %s (%s)", call, cublasGetStatusName((cublasStatus_t)status),
            cublasGetStatusString((cublasStatus_t)status));
    /* a kernel cuBLAS launched may have failed and left the thread's last
     * error set: consume it as a failed launch of ours would be */
    (void)cudaGetLastError();
    return TSR_EDEVICE;
}

int tsr_cuda_invalid(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    return TSR_EINVAL;
}
