/* tests/kernels/kt_cuda.h — helpers of the CUDA kernel tests: the device
 * probe that skips a test visibly when no GPU is present, device buffers
 * (poisoned with NaN bytes), copies, one stream and one cuBLAS handle.
 * The same tests run on a real GPU and on the emulated ones of a
 * `-Dcuda=emu` build (TSR_CUDA_EMU defined): only tests that check the
 * emulation's own knobs are marked emu-only (KT_REQUIRE_EMU).
 *
 * Must never: be included by a CPU-only test (it needs the CUDA headers).
 */
#ifndef TSR_TESTS_KERNELS_KT_CUDA_H
#define TSR_TESTS_KERNELS_KT_CUDA_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "kernels/cuda_status.h"
#include "kt_util.h"

static inline int kt_gpu_count(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    return e == cudaSuccess ? n : 0;
}

/* Skip (visibly, with the reason) when there is no usable GPU. */
#define KT_REQUIRE_GPU()                                                                  \
    do {                                                                                  \
        int kt_n_ = 0;                                                                    \
        cudaError_t kt_e_ = cudaGetDeviceCount(&kt_n_);                                   \
        if (kt_e_ != cudaSuccess || kt_n_ == 0)                                           \
            cr_skip_test("no CUDA device (%s): GPU kernel test skipped",                  \
                         kt_e_ != cudaSuccess ? cudaGetErrorString(kt_e_) : "0 devices"); \
    } while (0)

/* A kernel launcher or CUDA call that must succeed; a launcher's failure
 * shows its message (kernels/cuda_status.h). */
#define KT_CUDA_OK(call)                                                                  \
    do {                                                                                  \
        int kt_rc_ = (int)(call);                                                         \
        cr_assert_eq(kt_rc_, 0, "%s returned %d (%s)", #call, kt_rc_,                     \
                     tsr_cuda_last_error());                                              \
    } while (0)

/* Whether this build runs the CUDA code on emulated devices. */
static inline int kt_emulated(void)
{
#ifdef TSR_CUDA_EMU
    return 1;
#else
    return 0;
#endif
}

/* Skip (visibly) a test of the emulation's own behaviour on a real GPU. */
#define KT_REQUIRE_EMU()                                                                  \
    do {                                                                                  \
        if (!kt_emulated())                                                               \
            cr_skip_test("not an emulation build: emulation-only test skipped");          \
    } while (0)

/* Whether the thread's kernel failure message contains `part`. */
static inline int kt_msg_has(const char *part)
{
    return strstr(tsr_cuda_last_error(), part) != NULL;
}

/* device buffer of n floats (or n*elt bytes), every byte 0xff (a NaN) */
static inline void *kt_dev_bytes(size_t bytes)
{
    void *p = NULL;
    KT_CUDA_OK(cudaMalloc(&p, bytes ? bytes : 4));
    KT_CUDA_OK(cudaMemset(p, 0xff, bytes ? bytes : 4));
    return p;
}

static inline float *kt_dev(size_t n)
{
    return (float *)kt_dev_bytes(n * sizeof(float));
}

static inline float *kt_to_dev(const float *h, size_t n)
{
    float *d = kt_dev(n);
    KT_CUDA_OK(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}

static inline void *kt_to_dev_bytes(const void *h, size_t bytes)
{
    void *d = kt_dev_bytes(bytes);
    KT_CUDA_OK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}

/* device -> new host buffer, after the stream's work is done */
static inline float *kt_from_dev(const float *d, size_t n)
{
    KT_CUDA_OK(cudaDeviceSynchronize());
    float *h = kt_alloc(n);
    KT_CUDA_OK(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}

static inline void kt_upload(float *d, const float *h, size_t n)
{
    KT_CUDA_OK(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
}

static inline void *kt_stream(void)
{
    cudaStream_t s = NULL;
    KT_CUDA_OK(cudaStreamCreate(&s));
    return (void *)s;
}

#endif
