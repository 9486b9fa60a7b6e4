/* CUDA LayerNorm: one warp per token (column of a (C, T) tile).  The backward
 * keeps dgamma/dbeta partial sums of all tokens of a block in shared memory
 * and adds them to global memory once per block. */
#include "kernels/layernorm.h"
#include "kernels/cuda/common.cuh"

enum { WARPS = 8 };

/* x, out: (C, T); gamma, beta: (C); mean, rstd: (T) */
__global__ void k_ln_fwd(int C, int T, const float *x, const float *gamma, const float *beta,
                         float eps, float *out, float *mean, float *rstd)
{
    int lane = threadIdx.x & 31;
    int t = blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (t >= T)
        return;
    const float *xt = x + (size_t)t * C;
    float *ot = out + (size_t)t * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32)
        s += xt[c];
    float mu = tsr_warp_sum(s) / (float)C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float dv = xt[c] - mu;
        v += dv * dv;
    }
    float rs = rsqrtf(tsr_warp_sum(v) / (float)C + eps);
    for (int c = lane; c < C; c += 32)
        ot[c] = (xt[c] - mu) * rs * gamma[c] + beta[c];
    if (lane == 0) {
        mean[t] = mu;
        rstd[t] = rs;
    }
}

/* dout, x, dx: (C, T); gamma, dgamma, dbeta: (C); mean, rstd: (T).
 * use_smem: accumulate dgamma/dbeta in 2*C floats of dynamic shared memory. */
__global__ void k_ln_bwd(int C, int T, const float *dout, const float *x, const float *gamma,
                         const float *mean, const float *rstd, float *dx, float *dgamma,
                         float *dbeta, int use_smem, int params)
{
    TSR_DYNAMIC_SHARED(float, sh);
    /* without shared memory the block may have none: no offset from it */
    float *sg = sh, *sb = sh + (use_smem ? C : 0);
    if (use_smem) {
        for (int c = threadIdx.x; c < C; c += blockDim.x)
            sg[c] = 0.0f, sb[c] = 0.0f;
        __syncthreads();
    }
    int lane = threadIdx.x & 31;
    for (int t = blockIdx.x * WARPS + (threadIdx.x >> 5); t < T; t += gridDim.x * WARPS) {
        const float *dt = dout + (size_t)t * C, *xt = x + (size_t)t * C;
        float *dxt = dx + (size_t)t * C;
        float mu = mean[t], rs = rstd[t];
        float a = 0.0f, b = 0.0f;
        for (int c = lane; c < C; c += 32) {
            float g = gamma[c] * dt[c];
            a += g;
            b += g * (xt[c] - mu) * rs;
        }
        float ma = tsr_warp_sum(a) / (float)C, mb = tsr_warp_sum(b) / (float)C;
        for (int c = lane; c < C; c += 32) {
            float xhat = (xt[c] - mu) * rs;
            float d = dt[c];
            dxt[c] += rs * (gamma[c] * d - ma - xhat * mb);
            if (params && use_smem) {
                atomicAdd(&sg[c], d * xhat);
                atomicAdd(&sb[c], d);
            } else if (params) {
                atomicAdd(&dgamma[c], d * xhat);
                atomicAdd(&dbeta[c], d);
            }
        }
    }
    if (use_smem && params) {
        __syncthreads();
        for (int c = threadIdx.x; c < C; c += blockDim.x) {
            atomicAdd(&dgamma[c], sg[c]);
            atomicAdd(&dbeta[c], sb[c]);
        }
    }
}

/* The deterministic dgamma, dbeta: one thread per channel sums the rows in
 * order.   dout, x: (C, T), mean, rstd: (T), dgamma, dbeta: (C) */
__global__ void k_ln_bwd_params(int C, int T, const float *dout, const float *x,
                                const float *mean, const float *rstd, float *dgamma, float *dbeta)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    float g = 0.0f, b = 0.0f;
    for (int t = 0; t < T; t++) {
        float d = dout[(size_t)t * C + c];
        g += d * (x[(size_t)t * C + c] - mean[t]) * rstd[t];
        b += d;
    }
    dgamma[c] += g;
    dbeta[c] += b;
}

int tsr_cuda_layernorm_fwd(void *stream, int C, int T, const float *x, const float *gamma,
                           const float *beta, float eps, float *out, float *mean, float *rstd)
{
    if (C <= 0 || T <= 0)
        return 0;
    TSR_LAUNCH(k_ln_fwd, (T + WARPS - 1) / WARPS, WARPS * 32, 0, TSR_STREAM(stream), C, T, x, gamma,
               beta, eps, out, mean, rstd);
    return tsr_cuda_launched("k_ln_fwd");
}

int tsr_cuda_layernorm_bwd(void *stream, int C, int T, const float *dout, const float *x,
                           const float *gamma, const float *mean, const float *rstd, float *dx,
                           float *dgamma, float *dbeta, int deterministic)
{
    if (C <= 0 || T <= 0)
        return 0;
    size_t smem = 2 * (size_t)C * sizeof(float);
    int use_smem = smem <= 48 * 1024;
    /* blocks share the flush of dgamma/dbeta: fewer, fuller blocks for big C */
    int blocks = (T + WARPS - 1) / WARPS;
    blocks = blocks > 512 ? 512 : blocks;
    if (deterministic)
        use_smem = 0;
    TSR_LAUNCH(k_ln_bwd, blocks, WARPS * 32, use_smem ? smem : 0, TSR_STREAM(stream), C, T, dout, x,
               gamma, mean, rstd, dx, dgamma, dbeta, use_smem, !deterministic);
    int rc = tsr_cuda_launched("k_ln_bwd");
    if (rc || !deterministic)
        return rc;
    TSR_LAUNCH(k_ln_bwd_params, (C + 127) / 128, 128, 0, TSR_STREAM(stream), C, T, dout, x, mean,
               rstd, dgamma, dbeta);
    return tsr_cuda_launched("k_ln_bwd_params");
}
