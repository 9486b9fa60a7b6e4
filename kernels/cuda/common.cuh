/* kernels/cuda/common.cuh — internal helpers of the CUDA kernels: launch
 * geometry, 16-byte alignment tests, warp reductions, the error convention.
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

/* The launcher's return value: 0 or the launch's cudaError_t. */
static inline int tsr_launch_status(void)
{
    return (int)cudaGetLastError();
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
