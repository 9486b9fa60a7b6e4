/* CUDA GELU (tanh approximation) forward and backward, float4 when aligned. */
#include "kernels/gelu.h"
#include "kernels/cuda/common.cuh"

/* x, out: (n) */
__global__ void k_gelu_fwd(size_t n, const float *x, float *out, int vec)
{
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    size_t n4 = vec ? n / 4 : 0;
    for (size_t i = tid; i < n4; i += stride) {
        float4 a = reinterpret_cast<const float4 *>(x)[i];
        reinterpret_cast<float4 *>(out)[i] = make_float4(tsr_gelu(a.x), tsr_gelu(a.y), tsr_gelu(a.z), tsr_gelu(a.w));
    }
    for (size_t i = n4 * 4 + tid; i < n; i += stride)
        out[i] = tsr_gelu(x[i]);
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
            make_float4(tsr_gelu_grad(a.x) * g.x, tsr_gelu_grad(a.y) * g.y, tsr_gelu_grad(a.z) * g.z, tsr_gelu_grad(a.w) * g.w);
    }
    for (size_t i = n4 * 4 + tid; i < n; i += stride)
        dx[i] = tsr_gelu_grad(x[i]) * dout[i];
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
