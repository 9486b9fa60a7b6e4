/* tests/cuda_emu/emu_kernels.cu — test kernels of the emulation's own suite
 * (compiled like the project's .cu files, -Dcuda=emu only) and C launchers
 * that return the launch's error (cudaGetLastError). */
#include <cuda_runtime.h>

#include "emu_kernels.h"
#include "kernels/cuda/ptx.cuh"

/* Block sum through shared memory and __syncthreads (tree, any block size). */
__global__ void k_block_sum(const float *x, int n, float *out)
{
    __shared__ float s[1024];
    int t = (int)threadIdx.x, i = (int)(blockIdx.x * blockDim.x) + t;
    s[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int w = 1; w < (int)blockDim.x; w *= 2) {
        float v = (t % (2 * w) == 0 && t + w < (int)blockDim.x) ? s[t + w] : 0.0f;
        __syncthreads();
        s[t] += v;
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = s[0];
}

/* Per lane: xor-sum of the warp, down-shift by 1, inclusive scan by up-shifts,
 * broadcast of lane 5, ballot of odd values. */
__global__ void k_warp_ops(const int *x, int *sum, int *down, int *scan, int *bcast, unsigned *ballot)
{
    int t = (int)threadIdx.x, v = x[t];
    int s = v;
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    sum[t] = s;
    down[t] = __shfl_down_sync(0xffffffffu, v, 1);
    int c = v;
    for (int o = 1; o < 32; o <<= 1) {
        int u = __shfl_up_sync(0xffffffffu, c, (unsigned)o);
        if ((t & 31) >= o)
            c += u;
    }
    scan[t] = c;
    bcast[t] = __shfl_sync(0xffffffffu, v, 5);
    ballot[t] = __ballot_sync(0xffffffffu, v & 1);
}

/* Lane 0 publishes a value in shared memory, the others read it; `fenced`
 * puts the __syncwarp the pattern needs between the write and the reads. */
__global__ void k_publish(int fenced, int *out)
{
    __shared__ int slot;
    int t = (int)threadIdx.x;
    slot = -1;
    __syncwarp();
    if (t == 0)
        slot = 42;
    if (fenced)
        __syncwarp();
    out[t] = slot;
}

/* Threads above `live` leave before the barrier the others wait at. */
__global__ void k_partial_barrier(int live, float *out)
{
    int t = (int)threadIdx.x;
    if (t >= live)
        return;
    out[t] = 1.0f;
    __syncthreads();
    out[t] += 1.0f;
}

__global__ void k_scale(float *x, int n, float a)
{
    for (int i = (int)(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += (int)(blockDim.x * gridDim.x))
        x[i] *= a;
}

__global__ void k_dyn_reverse(const float *x, float *y)
{
    float *s = (float *)tsr_emu_dynamic_shared();
    int t = (int)threadIdx.x, n = (int)blockDim.x;
    s[t] = x[t];
    __syncthreads();
    y[t] = s[n - 1 - t];
}

__global__ void k_atomic_count(int *counter, float *fsum)
{
    atomicAdd(counter, 1);
    atomicAdd(fsum, 0.5f);
}

extern "C" {

cudaError_t emu_block_sum(const float *x, int n, int block, float *out, cudaStream_t s)
{
    tsr_emu_launch("k_block_sum", k_block_sum, dim3((unsigned)((n + block - 1) / block)),
                   dim3((unsigned)block), 0, s, x, n, out);
    return cudaGetLastError();
}

cudaError_t emu_warp_ops(const int *x, int n, int *sum, int *down, int *scan, int *bcast,
                         unsigned *ballot, cudaStream_t s)
{
    tsr_emu_launch("k_warp_ops", k_warp_ops, dim3(1), dim3((unsigned)n), 0, s, x, sum, down, scan,
                   bcast, ballot);
    return cudaGetLastError();
}

cudaError_t emu_publish(int fenced, int *out, cudaStream_t s)
{
    tsr_emu_launch("k_publish", k_publish, dim3(1), dim3(32), 0, s, fenced, out);
    return cudaGetLastError();
}

cudaError_t emu_partial_barrier(int threads, int live, float *out, cudaStream_t s)
{
    tsr_emu_launch("k_partial_barrier", k_partial_barrier, dim3(2), dim3((unsigned)threads), 0, s,
                   live, out);
    return cudaGetLastError();
}

cudaError_t emu_scale(float *x, int n, float a, cudaStream_t s)
{
    tsr_emu_launch("k_scale", k_scale, dim3(4), dim3(64), 0, s, x, n, a);
    return cudaGetLastError();
}

cudaError_t emu_dyn_reverse(const float *x, float *y, int n, cudaStream_t s)
{
    tsr_emu_launch("k_dyn_reverse", k_dyn_reverse, dim3(1), dim3((unsigned)n),
                   (size_t)n * sizeof(float), s, x, y);
    return cudaGetLastError();
}

cudaError_t emu_atomic_count(int blocks, int threads, int *counter, float *fsum, cudaStream_t s)
{
    tsr_emu_launch("k_atomic_count", k_atomic_count, dim3((unsigned)blocks), dim3((unsigned)threads),
                   0, s, counter, fsum);
    return cudaGetLastError();
}

cudaError_t emu_bad_config(cudaStream_t s)
{
    float *p = nullptr;
    tsr_emu_launch("k_scale", k_scale, dim3(1), dim3(2048), 0, s, p, 0, 1.0f);
    return cudaGetLastError();
}

}

/* One warp: d (16x8) = c + a (16x8, row-major) b (8x8, row-major (k, n))
 * through tsr_mma_tf32, each lane loading and storing the elements the PTX
 * ISA assigns it (g = lane / 4, t = lane % 4), written out here
 * independently of kernels/cuda/ptx.cuh's own comment. */
__global__ void k_mma_tf32(const float *a, const float *b, const float *c, float *d)
{
    int lane = (int)threadIdx.x, g = lane / 4, t = lane % 4;
    uint32_t af[4] = {tsr_tf32(a[g * 8 + t]), tsr_tf32(a[(g + 8) * 8 + t]),
                      tsr_tf32(a[g * 8 + t + 4]), tsr_tf32(a[(g + 8) * 8 + t + 4])};
    uint32_t bf[2] = {tsr_tf32(b[t * 8 + g]), tsr_tf32(b[(t + 4) * 8 + g])};
    float acc[4] = {c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1], c[(g + 8) * 8 + 2 * t],
                    c[(g + 8) * 8 + 2 * t + 1]};
    tsr_mma_tf32(acc, af, bf);
    d[g * 8 + 2 * t] = acc[0];
    d[g * 8 + 2 * t + 1] = acc[1];
    d[(g + 8) * 8 + 2 * t] = acc[2];
    d[(g + 8) * 8 + 2 * t + 1] = acc[3];
}

cudaError_t emu_mma_tf32(const float *a, const float *b, const float *c, float *d, cudaStream_t s)
{
    tsr_emu_launch("k_mma_tf32", k_mma_tf32, dim3(1), dim3(32), 0, s, a, b, c, d);
    return cudaGetLastError();
}

/* One warp: d (16x8) = c + a (16x16, row-major) b (16x8, row-major (k, n))
 * through tsr_mma_bf16, each lane loading the pairs the PTX ISA assigns it
 * (two elements per register, the lower index in the low half). */
__global__ void k_mma_bf16(const float *a, const float *b, const float *c, float *d)
{
    int lane = (int)threadIdx.x, g = lane / 4, t = lane % 4;
    uint32_t af[4], bf[2];
    for (int e = 0; e < 4; e++) {
        int r = g + 8 * (e & 1), k = 2 * t + 8 * (e >> 1);
        af[e] = tsr_bf16x2(a[r * 16 + k], a[r * 16 + k + 1]);
    }
    for (int e = 0; e < 2; e++) {
        int k = 2 * t + 8 * e;
        bf[e] = tsr_bf16x2(b[k * 8 + g], b[(k + 1) * 8 + g]);
    }
    float acc[4] = {c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1], c[(g + 8) * 8 + 2 * t],
                    c[(g + 8) * 8 + 2 * t + 1]};
    tsr_mma_bf16(acc, af, bf);
    d[g * 8 + 2 * t] = acc[0];
    d[g * 8 + 2 * t + 1] = acc[1];
    d[(g + 8) * 8 + 2 * t] = acc[2];
    d[(g + 8) * 8 + 2 * t + 1] = acc[3];
}

cudaError_t emu_mma_bf16(const float *a, const float *b, const float *c, float *d, cudaStream_t s)
{
    tsr_emu_launch("k_mma_bf16", k_mma_bf16, dim3(1), dim3(32), 0, s, a, b, c, d);
    return cudaGetLastError();
}
