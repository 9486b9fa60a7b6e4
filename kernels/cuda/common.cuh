/* kernels/cuda/common.cuh — internal helpers of the CUDA kernels: the launch
 * and dynamic shared memory macros, launch geometry, 16-byte alignment tests,
 * warp reductions, the error convention (kernels/cuda_status.h).
 *
 * Must never: be included outside kernels/cuda, synchronize a stream or the
 * device, or allocate.
 */
#ifndef TSR_KERNELS_CUDA_COMMON_CUH
#define TSR_KERNELS_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#define TSR_STREAM(s) ((cudaStream_t)(s))

/* Every launch and every dynamic shared array goes through these, so that
 * the emulation build (-Dcuda=emu, cuda_emu/) runs the very same kernel
 * source on the CPU: there a launch is queued on the emulated stream, with
 * its configuration and pointer arguments checked, and a block's dynamic
 * shared memory is handed out per block. */
#ifdef TSR_CUDA_EMU
#define TSR_LAUNCH(kernel, grid, block, smem, stream, ...) \
    tsr_emu_launch(#kernel, kernel, grid, block, smem, stream, __VA_ARGS__)
#define TSR_DYNAMIC_SHARED(type, name) type *name = (type *)tsr_emu_dynamic_shared()
#else
#define TSR_LAUNCH(kernel, grid, block, smem, stream, ...) \
    kernel<<<grid, block, smem, stream>>>(__VA_ARGS__)
#define TSR_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

/* ---- the error convention (kernels/cuda_status.h; kernels/cuda/status.cu)
 * A launcher returns tsr_cuda_launched("k_name") right after its launch:
 * 0, or TSR_EDEVICE with the thread's message naming the kernel and the
 * error.  It peeks at the thread's last error (a successful launch changes
 * nothing) and, when the launch failed, consumes it so that the thread's
 * next launch is not blamed for this one; CUDA does not let that clear a
 * sticky error (a faulted context), which every later call, the stream's
 * synchronisation included, still reports. */
int tsr_cuda_launched(const char *kernel);
/* Same for a template kernel: the message names kernel<targ>. */
int tsr_cuda_launched_t(const char *kernel, int targ);
/* A failed CUDA runtime call `where` (e.g. "tsr_cuda_copy: cudaMemcpyAsync"):
 * the message, the thread's non-sticky error consumed, TSR_EDEVICE. */
int tsr_cuda_failed(const char *where, cudaError_t e);
/* A failed cuBLAS call: the message names it and the status; TSR_EDEVICE. */
int tsr_cuda_blas_failed(const char *call, int status);
/* A shape the kernels do not support (found before any launch): the
 * message, TSR_EINVAL. */
int tsr_cuda_invalid(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Blocks for a grid-stride loop over `work` items: enough to fill any
 * current GPU, never more than the work needs. */
static inline unsigned tsr_blocks(size_t work, int block)
{
    size_t b = (work + (size_t)block - 1) / (size_t)block;
    const size_t cap = 16384;
    return (unsigned)(b < 1 ? 1 : (b > cap ? cap : b));
}

static inline bool tsr_aligned16(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}

/* GELU, tanh approximation (kernels/gelu.h), and its derivative; 0.5 (1 +
 * tanh(u)) written as 1 / (1 + exp(-2u)): no cancellation near -1.  Shared
 * by the GELU kernels and the fused GEMM epilogues' fallback. */
#define TSR_GELU_K 0.7978845608028654f /* sqrt(2/pi) */
__device__ __forceinline__ float tsr_gelu(float x)
{
    float u = TSR_GELU_K * (x + 0.044715f * x * x * x);
    return x / (1.0f + expf(-2.0f * u));
}

__device__ __forceinline__ float tsr_gelu_grad(float x)
{
    float u = TSR_GELU_K * (x + 0.044715f * x * x * x);
    float s = 1.0f / (1.0f + expf(-2.0f * u));
    return s + 2.0f * x * s * (1.0f - s) * TSR_GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
}

__device__ __forceinline__ float tsr_warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float tsr_warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum over a block of blockDim.x threads (a multiple of 32, at most 1024);
 * the result is valid in every thread.  Uses 33 floats of shared memory. */
__device__ __forceinline__ float tsr_block_sum(float v)
{
    __shared__ float part[33];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = tsr_warp_sum(v);
    __syncthreads(); /* part may still be read by a previous call */
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    v = lane < nw ? part[lane] : 0.0f;
    v = tsr_warp_sum(v);
    return v;
}

#endif
