/* CUDA AdamW step (float4 when aligned), optionally writing the updated
 * weights in bf16 too, and squared norm (block reduction, one atomic per
 * block). */
#include <math.h>

#include "kernels/adamw.h"
#include "kernels/cuda/common.cuh"

struct adam_args {
    float lr, b1, b2, eps, wd, gs, rbc1, rbc2;
};

__device__ __forceinline__ void adam_one(const adam_args &a, float g, float &p, float &m, float &v)
{
    g *= a.gs;
    m = a.b1 * m + (1.0f - a.b1) * g;
    v = a.b2 * v + (1.0f - a.b2) * g * g;
    p -= a.lr * ((m * a.rbc1) / (sqrtf(v * a.rbc2) + a.eps) + a.wd * p);
}

/* bf16 of f, rounded to nearest even: the integer rounding of kernels/cpu
 * (and kernels/cuda/convert.cu), bit-identical to it. */
__device__ __forceinline__ uint16_t adam_bf16(float f)
{
    uint32_t u = __float_as_uint(f);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? ((u >> 16) | 0x40u) : rounded);
}

/* g, p, m, v: (n); pb: (n) or NULL; g zeroed when zero_g.  vec: the four
 * fp32 arrays are 16-byte aligned and pb (if any) 8-byte aligned. */
__global__ void k_adamw(size_t n, adam_args a, float *g, float *p, float *m, float *v,
                        uint16_t *pb, int zero_g, int vec)
{
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    size_t n4 = vec ? n / 4 : 0;
    for (size_t i = tid; i < n4; i += stride) {
        float4 g4 = reinterpret_cast<const float4 *>(g)[i];
        float4 p4 = reinterpret_cast<float4 *>(p)[i];
        float4 m4 = reinterpret_cast<float4 *>(m)[i];
        float4 v4 = reinterpret_cast<float4 *>(v)[i];
        adam_one(a, g4.x, p4.x, m4.x, v4.x);
        adam_one(a, g4.y, p4.y, m4.y, v4.y);
        adam_one(a, g4.z, p4.z, m4.z, v4.z);
        adam_one(a, g4.w, p4.w, m4.w, v4.w);
        reinterpret_cast<float4 *>(p)[i] = p4;
        reinterpret_cast<float4 *>(m)[i] = m4;
        reinterpret_cast<float4 *>(v)[i] = v4;
        if (zero_g)
            reinterpret_cast<float4 *>(g)[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (pb) {
            uint2 b;
            b.x = (uint32_t)adam_bf16(p4.x) | ((uint32_t)adam_bf16(p4.y) << 16);
            b.y = (uint32_t)adam_bf16(p4.z) | ((uint32_t)adam_bf16(p4.w) << 16);
            reinterpret_cast<uint2 *>(pb)[i] = b;
        }
    }
    for (size_t i = n4 * 4 + tid; i < n; i += stride) {
        adam_one(a, g[i], p[i], m[i], v[i]);
        if (pb)
            pb[i] = adam_bf16(p[i]);
        if (zero_g)
            g[i] = 0.0f;
    }
}

/* x: (n), acc: (1) */
__global__ void k_sumsq(size_t n, const float *x, float *acc, int vec)
{
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    size_t n4 = vec ? n / 4 : 0;
    float s = 0.0f;
    for (size_t i = tid; i < n4; i += stride) {
        float4 a = reinterpret_cast<const float4 *>(x)[i];
        s += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
    }
    for (size_t i = n4 * 4 + tid; i < n; i += stride)
        s += x[i] * x[i];
    s = tsr_block_sum(s);
    if (threadIdx.x == 0)
        atomicAdd(acc, s);
}

int tsr_cuda_adamw(void *stream, size_t n, int step, float lr, float beta1, float beta2, float eps,
                   float weight_decay, float grad_scale, float *g, float *p, float *m,
                   float *v, uint16_t *p_bf16, int zero_g)
{
    if (n == 0)
        return 0;
    adam_args a;
    a.lr = lr, a.b1 = beta1, a.b2 = beta2, a.eps = eps, a.wd = weight_decay, a.gs = grad_scale;
    a.rbc1 = (float)(1.0 / (1.0 - pow((double)beta1, (double)step)));
    a.rbc2 = (float)(1.0 / (1.0 - pow((double)beta2, (double)step)));
    int vec = tsr_aligned16(g) && tsr_aligned16(p) && tsr_aligned16(m) && tsr_aligned16(v) &&
              (!p_bf16 || ((uintptr_t)p_bf16 & 7u) == 0);
    TSR_LAUNCH(k_adamw, tsr_blocks(n / 4 + 1, 256), 256, 0, TSR_STREAM(stream), n, a, g, p, m, v,
               p_bf16, zero_g, vec);
    return tsr_cuda_launched("k_adamw");
}

int tsr_cuda_sumsq(void *stream, size_t n, const float *x, float *acc, int deterministic)
{
    if (n == 0)
        return 0;
    size_t blocks = tsr_blocks(n / 4 + 1, 256);
    blocks = blocks > 1024 ? 1024 : blocks;
    if (deterministic) /* each thread's elements and the block's tree are fixed */
        blocks = 1;
    TSR_LAUNCH(k_sumsq, (unsigned)blocks, 256, 0, TSR_STREAM(stream), n, x, acc, tsr_aligned16(x));
    return tsr_cuda_launched("k_sumsq");
}
