/* CUDA GELU (tanh approximation) forward and backward, float4 when aligned. */
#include "kernels/gelu.h"
#include "kernels/cuda/common.cuh"

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

/* 0.5 (1 + tanh(u)) written as 1 / (1 + exp(-2u)): no cancellation near -1 */
__device__ __forceinline__ float gelu_f(float x)
{
    float u = GELU_K * (x + 0.044715f * x * x * x);
    return x / (1.0f + expf(-2.0f * u));
}

__device__ __forceinline__ float gelu_g(float x)
{
    float u = GELU_K * (x + 0.044715f * x * x * x);
    float s = 1.0f / (1.0f + expf(-2.0f * u));
    return s + 2.0f * x * s * (1.0f - s) * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
}

/* x, out: (n) */
__global__ void k_gelu_fwd(size_t n, const float *x, float *out, int vec)
{
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    size_t n4 = vec ? n / 4 : 0;
    for (size_t i = tid; i < n4; i += stride) {
        float4 a = reinterpret_cast<const float4 *>(x)[i];
        reinterpret_cast<float4 *>(out)[i] = make_float4(gelu_f(a.x), gelu_f(a.y), gelu_f(a.z), gelu_f(a.w));
    }
    for (size_t i = n4 * 4 + tid; i < n; i += stride)
        out[i] = gelu_f(x[i]);
}

/* x, dout, dx: (n) */
__global__ void k_gelu_bwd(size_t n, const float *x, const float *dout, float *dx, int vec)
{
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    size_t n4 = vec ? n / 4 : 0;
    for (size_t i = tid; i < n4; i += stride) {
        float4 a = reinterpret_cast<const float4 *>(x)[i];
        float4 g = reinterpret_cast<const float4 *>(dout)[i];
        reinterpret_cast<float4 *>(dx)[i] =
            make_float4(gelu_g(a.x) * g.x, gelu_g(a.y) * g.y, gelu_g(a.z) * g.z, gelu_g(a.w) * g.w);
    }
    for (size_t i = n4 * 4 + tid; i < n; i += stride)
        dx[i] = gelu_g(x[i]) * dout[i];
}

int tsr_cuda_gelu_fwd(void *stream, size_t n, const float *x, float *out)
{
    if (n == 0)
        return 0;
    int vec = tsr_aligned16(x) && tsr_aligned16(out);
    TSR_LAUNCH(k_gelu_fwd, tsr_blocks(n / 4 + 1, 256), 256, 0, TSR_STREAM(stream), n, x, out, vec);
    return tsr_cuda_launched("k_gelu_fwd");
}

int tsr_cuda_gelu_bwd(void *stream, size_t n, const float *x, const float *dout, float *dx)
{
    if (n == 0)
        return 0;
    int vec = tsr_aligned16(x) && tsr_aligned16(dout) && tsr_aligned16(dx);
    TSR_LAUNCH(k_gelu_bwd, tsr_blocks(n / 4 + 1, 256), 256, 0, TSR_STREAM(stream), n, x, dout, dx,
               vec);
    return tsr_cuda_launched("k_gelu_bwd");
}
