/* CUDA softmax pieces: per-column (max, sumexp) states in one pass (online
 * rescaling per lane, merged across the warp), their merge, logsumexp. */
#include <math.h>

#include "kernels/softmax.h"
#include "kernels/cuda/common.cuh"

enum { WARPS = 8 };

/* (m1, s1) <- merge((m1, s1), (m2, s2)); -inf max = empty state */
__device__ __forceinline__ void merge_state(float &m1, float &s1, float m2, float s2)
{
    if (m2 == -INFINITY)
        return;
    if (m1 == -INFINITY) {
        m1 = m2, s1 = s2;
    } else if (m2 > m1) {
        s1 = s1 * expf(m1 - m2) + s2;
        m1 = m2;
    } else {
        s1 += s2 * expf(m2 - m1);
    }
}

/* x: (m, n) with ldx; ms: (2, n); one warp per column */
__global__ void k_maxsumexp(int m, int n, const float *x, int ldx, float *ms, int accumulate)
{
    int lane = threadIdx.x & 31;
    int j = blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (j >= n)
        return;
    const float *xj = x + (size_t)j * ldx;
    float mx = -INFINITY, s = 0.0f;
    for (int i = lane; i < m; i += 32) {
        float v = xj[i];
        if (v > mx) {
            s = (mx == -INFINITY ? 0.0f : s * expf(mx - v)) + 1.0f;
            mx = v;
        } else if (v != -INFINITY) {
            s += expf(v - mx);
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, mx, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        merge_state(mx, s, m2, s2);
    }
    if (lane == 0) {
        if (accumulate) {
            float m1 = ms[2 * (size_t)j], s1 = ms[2 * (size_t)j + 1];
            merge_state(m1, s1, mx, s);
            mx = m1, s = s1;
        }
        ms[2 * (size_t)j] = mx;
        ms[2 * (size_t)j + 1] = s;
    }
}

/* src, dst: (2, n) */
__global__ void k_ms_merge(int n, const float *src, float *dst)
{
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {
        float m1 = dst[2 * (size_t)j], s1 = dst[2 * (size_t)j + 1];
        merge_state(m1, s1, src[2 * (size_t)j], src[2 * (size_t)j + 1]);
        dst[2 * (size_t)j] = m1;
        dst[2 * (size_t)j + 1] = s1;
    }
}

/* ms: (2, n), lse: (n) */
__global__ void k_logsumexp(int n, const float *ms, float *lse)
{
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {
        float m = ms[2 * (size_t)j], s = ms[2 * (size_t)j + 1];
        lse[j] = m == -INFINITY ? -INFINITY : m + logf(s);
    }
}

int tsr_cuda_maxsumexp(void *stream, int m, int n, const float *x, int ldx, float *ms,
                       int accumulate)
{
    if (n <= 0)
        return 0;
    TSR_LAUNCH(k_maxsumexp, (n + WARPS - 1) / WARPS, WARPS * 32, 0, TSR_STREAM(stream), m, n, x,
               ldx, ms, accumulate);
    return tsr_cuda_launched("k_maxsumexp");
}

int tsr_cuda_maxsumexp_merge(void *stream, int n, const float *src, float *dst)
{
    if (n <= 0)
        return 0;
    TSR_LAUNCH(k_ms_merge, tsr_blocks((size_t)n, 256), 256, 0, TSR_STREAM(stream), n, src, dst);
    return tsr_cuda_launched("k_ms_merge");
}

int tsr_cuda_logsumexp(void *stream, int n, const float *ms, float *lse)
{
    if (n <= 0)
        return 0;
    TSR_LAUNCH(k_logsumexp, tsr_blocks((size_t)n, 256), 256, 0, TSR_STREAM(stream), n, ms, lse);
    return tsr_cuda_launched("k_logsumexp");
}
