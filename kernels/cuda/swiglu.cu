/* CUDA SwiGLU forward and backward over (F, T) tiles with leading
 * dimensions: a grid-stride loop over the F*T elements. */
#include "kernels/swiglu.h"
#include "kernels/cuda/common.cuh"

/* 1 / (1 + exp(-g)): exp overflows to +inf below g = -88.7 and sigmoid is 0
 * exactly; it is 1 exactly above 17 */
__device__ __forceinline__ float k_sigmoid(float g)
{
    return 1.0f / (1.0f + expf(-g));
}

/* g, u, h: (F, T) with their leading dimensions */
__global__ void k_swiglu_fwd(int F, size_t n, const float *g, int ldg, const float *u, int ldu,
                             float *h, int ldh)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += stride) {
        size_t t = k / (size_t)F, i = k % (size_t)F;
        float gi = g[i + t * ldg];
        h[i + t * ldh] = gi * k_sigmoid(gi) * u[i + t * ldu];
    }
}

/* g, u, dh, dg, du: (F, T) with their leading dimensions */
__global__ void k_swiglu_bwd(int F, size_t n, const float *g, int ldg, const float *u, int ldu,
                             const float *dh, int ldh, float *dg, int lddg, float *du, int lddu)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += stride) {
        size_t t = k / (size_t)F, i = k % (size_t)F;
        float gi = g[i + t * ldg], s = k_sigmoid(gi), d = dh[i + t * ldh];
        dg[i + t * lddg] = d * u[i + t * ldu] * (s * (1.0f + gi * (1.0f - s)));
        du[i + t * lddu] = d * (gi * s);
    }
}

int tsr_cuda_swiglu_fwd(void *stream, int F, int T, const float *g, int ldg, const float *u,
                        int ldu, float *h, int ldh)
{
    if (F <= 0 || T <= 0)
        return 0;
    size_t n = (size_t)F * T;
    TSR_LAUNCH(k_swiglu_fwd, tsr_blocks(n, 256), 256, 0, TSR_STREAM(stream), F, n, g, ldg, u,
               ldu, h, ldh);
    return tsr_cuda_launched("k_swiglu_fwd");
}

int tsr_cuda_swiglu_bwd(void *stream, int F, int T, const float *g, int ldg, const float *u,
                        int ldu, const float *dh, int ldh, float *dg, int lddg, float *du,
                        int lddu)
{
    if (F <= 0 || T <= 0)
        return 0;
    size_t n = (size_t)F * T;
    TSR_LAUNCH(k_swiglu_bwd, tsr_blocks(n, 256), 256, 0, TSR_STREAM(stream), F, n, g, ldg, u,
               ldu, dh, ldh, dg, lddg, du, lddu);
    return tsr_cuda_launched("k_swiglu_bwd");
}
