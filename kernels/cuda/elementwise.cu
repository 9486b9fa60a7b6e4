/* CUDA elementwise and broadcast kernels.  Flat kernels move float4 (16-byte)
 * vectors when every pointer is 16-byte aligned, with a scalar tail. */
#include "kernels/elementwise.h"
#include "kernels/cuda/common.cuh"

enum { BLOCK = 256 };

/* x: (n) */
__global__ void k_fill(size_t n, float value, float *x, int vec)
{
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    size_t n4 = vec ? n / 4 : 0;
    float4 v4 = make_float4(value, value, value, value);
    for (size_t i = tid; i < n4; i += stride)
        reinterpret_cast<float4 *>(x)[i] = v4;
    for (size_t i = n4 * 4 + tid; i < n; i += stride)
        x[i] = value;
}

/* x, y: (n): y = alpha x, or y += alpha x when accumulate */
__global__ void k_axpby(size_t n, float alpha, const float *x, float *y, int accumulate, int vec)
{
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    size_t n4 = vec ? n / 4 : 0;
    for (size_t i = tid; i < n4; i += stride) {
        float4 a = reinterpret_cast<const float4 *>(x)[i];
        float4 r = make_float4(alpha * a.x, alpha * a.y, alpha * a.z, alpha * a.w);
        if (accumulate) {
            float4 b = reinterpret_cast<const float4 *>(y)[i];
            r.x += b.x, r.y += b.y, r.z += b.z, r.w += b.w;
        }
        reinterpret_cast<float4 *>(y)[i] = r;
    }
    for (size_t i = n4 * 4 + tid; i < n; i += stride)
        y[i] = accumulate ? y[i] + alpha * x[i] : alpha * x[i];
}

/* x, y, z: (n) */
__global__ void k_add(size_t n, const float *x, const float *y, float *z, int vec)
{
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    size_t n4 = vec ? n / 4 : 0;
    for (size_t i = tid; i < n4; i += stride) {
        float4 a = reinterpret_cast<const float4 *>(x)[i];
        float4 b = reinterpret_cast<const float4 *>(y)[i];
        reinterpret_cast<float4 *>(z)[i] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
    }
    for (size_t i = n4 * 4 + tid; i < n; i += stride)
        z[i] = x[i] + y[i];
}

int tsr_cuda_fill(void *stream, size_t n, float value, float *x)
{
    if (n == 0)
        return 0;
    TSR_LAUNCH(k_fill, tsr_blocks(n / 4 + 1, BLOCK), BLOCK, 0, TSR_STREAM(stream), n, value, x,
               tsr_aligned16(x));
    return tsr_cuda_launched("k_fill");
}

int tsr_cuda_copy(void *stream, size_t n, const float *x, float *y)
{
    if (n == 0)
        return 0;
    cudaError_t e = cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice,
                                    TSR_STREAM(stream));
    return e == cudaSuccess ? 0 : tsr_cuda_failed("tsr_cuda_copy: cudaMemcpyAsync", e);
}

int tsr_cuda_scale(void *stream, size_t n, float alpha, const float *x, float *y)
{
    if (n == 0)
        return 0;
    int vec = tsr_aligned16(x) && tsr_aligned16(y);
    TSR_LAUNCH(k_axpby, tsr_blocks(n / 4 + 1, BLOCK), BLOCK, 0, TSR_STREAM(stream), n, alpha, x, y,
               0, vec);
    return tsr_cuda_launched("k_axpby");
}

int tsr_cuda_axpy(void *stream, size_t n, float alpha, const float *x, float *y)
{
    if (n == 0)
        return 0;
    int vec = tsr_aligned16(x) && tsr_aligned16(y);
    TSR_LAUNCH(k_axpby, tsr_blocks(n / 4 + 1, BLOCK), BLOCK, 0, TSR_STREAM(stream), n, alpha, x, y,
               1, vec);
    return tsr_cuda_launched("k_axpby");
}

int tsr_cuda_add(void *stream, size_t n, const float *x, const float *y, float *z)
{
    if (n == 0)
        return 0;
    int vec = tsr_aligned16(x) && tsr_aligned16(y) && tsr_aligned16(z);
    TSR_LAUNCH(k_add, tsr_blocks(n / 4 + 1, BLOCK), BLOCK, 0, TSR_STREAM(stream), n, x, y, z, vec);
    return tsr_cuda_launched("k_add");
}

/* x: (m, n) with ldx; threads over rows (coalesced), blocks over columns */
__global__ void k_bias_add(int axis, int m, int n, const float *b, float *x, int ldx)
{
    for (int j = blockIdx.y; j < n; j += gridDim.y) {
        float *xj = x + (size_t)j * ldx;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < m; i += gridDim.x * blockDim.x)
            xj[i] += axis == 0 ? b[i] : b[j];
    }
}

int tsr_cuda_bias_add(void *stream, int axis, int m, int n, const float *b, float *x, int ldx)
{
    if (m <= 0 || n <= 0)
        return 0;
    dim3 grid((m + BLOCK - 1) / BLOCK < 64 ? (m + BLOCK - 1) / BLOCK : 64, n < 65535 ? n : 65535);
    TSR_LAUNCH(k_bias_add, grid, BLOCK, 0, TSR_STREAM(stream), axis, m, n, b, x, ldx);
    return tsr_cuda_launched("k_bias_add");
}

/* axis 1: y[j] = alpha sum_i x(i, j) + beta y[j]; one warp per column */
__global__ void k_sum_cols(int m, int n, float alpha, const float *x, int ldx, float beta, float *y)
{
    int lane = threadIdx.x & 31;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int nwarps = (gridDim.x * blockDim.x) >> 5;
    for (int j = warp; j < n; j += nwarps) {
        const float *xj = x + (size_t)j * ldx;
        float s = 0.0f;
        for (int i = lane; i < m; i += 32)
            s += xj[i];
        s = tsr_warp_sum(s);
        if (lane == 0)
            y[j] = beta == 0.0f ? alpha * s : alpha * s + beta * y[j];
    }
}

/* axis 0: y[i] = alpha sum_j x(i, j) + beta y[i]; a block covers 32 rows,
 * its 8 warps split the columns and meet in shared memory */
__global__ void k_sum_rows(int m, int n, float alpha, const float *x, int ldx, float beta, float *y)
{
    __shared__ float part[8][33];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    int i = blockIdx.x * 32 + lane;
    float s = 0.0f;
    if (i < m)
        for (int j = w; j < n; j += 8)
            s += x[i + (size_t)j * ldx];
    part[w][lane] = s;
    __syncthreads();
    if (w == 0 && i < m) {
        float t = 0.0f;
        for (int k = 0; k < 8; k++)
            t += part[k][lane];
        y[i] = beta == 0.0f ? alpha * t : alpha * t + beta * y[i];
    }
}

int tsr_cuda_sum_axis(void *stream, int axis, int m, int n, float alpha, const float *x, int ldx,
                      float beta, float *y)
{
    if (m <= 0 && n <= 0)
        return 0;
    if (axis == 1) {
        if (n <= 0)
            return 0;
        if (m <= 0) /* empty sums: y = beta y, and beta == 0 must not read y */
            return beta == 0.0f ? tsr_cuda_fill(stream, (size_t)n, 0.0f, y)
                                : tsr_cuda_scale(stream, (size_t)n, beta, y, y);
        TSR_LAUNCH(k_sum_cols, tsr_blocks((size_t)n * 32, BLOCK), BLOCK, 0, TSR_STREAM(stream),
                   m, n, alpha, x, ldx, beta, y);
        return tsr_cuda_launched("k_sum_cols");
    }
    if (m <= 0)
        return 0;
    TSR_LAUNCH(k_sum_rows, (m + 31) / 32, 256, 0, TSR_STREAM(stream), m, n, alpha, x, ldx, beta, y);
    return tsr_cuda_launched("k_sum_rows");
}
