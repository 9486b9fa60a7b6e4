/* kernels/cuda/scratch.cuh — device buffers that a CUDA kernel launcher
 * needs beside its tiles (the cuBLASLt workspace, the bias gradient a fused
 * GEMM accumulates through, LayerNorm's per-block partial sums): one per
 * (device, stream, slot), made at first use, grown when a call needs more,
 * kept for the life of the process.
 *
 * Must never: be used for tile data, hand a buffer of one stream to work on
 * another (work in stream order is what makes the reuse safe), or free a
 * buffer that queued work may still read (growing waits for the stream
 * first).
 */
#ifndef TSR_KERNELS_CUDA_SCRATCH_CUH
#define TSR_KERNELS_CUDA_SCRATCH_CUH

#include <cuda_runtime.h>
#include <stddef.h>

enum {
    TSR_SCRATCH_LT_WORKSPACE = 0, /* kernels/cuda/gemm.cu: cuBLASLt's workspace */
    TSR_SCRATCH_BGRAD = 1,        /* kernels/cuda/gemm.cu: a bias gradient to add */
    TSR_SCRATCH_LN_PARTIAL = 2,   /* kernels/cuda/layernorm.cu: dgamma/dbeta per block */
    TSR_SCRATCH_SLOTS = 3
};

/* *out = a device buffer of at least `bytes` for slot on the current device
 * and `stream` (bytes 0: whatever the slot holds, possibly NULL). Returns 0,
 * or TSR_EDEVICE / TSR_EINVAL with the thread's message (kernels/
 * cuda_status.h) when it cannot be had. */
int tsr_cuda_stream_scratch(cudaStream_t stream, int slot, size_t bytes, void **out);

#endif
