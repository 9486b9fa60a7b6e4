/* CUDA RMSNorm: one warp per token (column of a (C, T) tile), scalar loops
 * strided by the lanes.  No float atomics: the backward's dw is a sum over
 * the tokens in order, one thread per channel (k_rms_bwd_w). */
#include "kernels/rmsnorm.h"
#include "kernels/cuda/common.cuh"

enum { WARPS = 8, MAX_BLOCKS = 256 };

/* x, out: (C, T); w: (C); rstd: (T) */
__global__ void k_rms_fwd(int C, int T, const float *x, const float *w, float eps, float *out,
                          float *rstd)
{
    int lane = threadIdx.x & 31;
    int t = blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (t >= T) /* the whole warp: t is the warp's */
        return;
    const float *xt = x + (size_t)t * C;
    float *ot = out + (size_t)t * C;
    float q = 0.0f;
    for (int c = lane; c < C; c += 32)
        q += xt[c] * xt[c];
    float rs = rsqrtf(tsr_warp_sum(q) / (float)C + eps);
    for (int c = lane; c < C; c += 32)
        ot[c] = xt[c] * rs * w[c];
    if (lane == 0)
        rstd[t] = rs;
}

/* dout, x, dx: (C, T); w: (C); rstd: (T). dx += ... only: dw is
 * k_rms_bwd_w's. */
__global__ void k_rms_bwd(int C, int T, const float *dout, const float *x, const float *w,
                          const float *rstd, float *dx)
{
    int lane = threadIdx.x & 31;
    for (int t = blockIdx.x * WARPS + (threadIdx.x >> 5); t < T; t += gridDim.x * WARPS) {
        const float *dt = dout + (size_t)t * C, *xt = x + (size_t)t * C;
        float *dxt = dx + (size_t)t * C;
        float rs = rstd[t], b = 0.0f;
        for (int c = lane; c < C; c += 32)
            b += w[c] * dt[c] * (xt[c] * rs);
        float mb = tsr_warp_sum(b) / (float)C;
        for (int c = lane; c < C; c += 32)
            dxt[c] += rs * (w[c] * dt[c] - xt[c] * rs * mb);
    }
}

/* dw (C) += sum_t dout(c, t) * x(c, t) * rstd[t], the tokens in order: one
 * thread per channel (neighbouring threads read neighbouring features). */
__global__ void k_rms_bwd_w(int C, int T, const float *dout, const float *x, const float *rstd,
                            float *dw)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    float s = 0.0f;
    for (int t = 0; t < T; t++)
        s += dout[(size_t)t * C + c] * (x[(size_t)t * C + c] * rstd[t]);
    dw[c] += s;
}

int tsr_cuda_rmsnorm_fwd(void *stream, int C, int T, const float *x, const float *w, float eps,
                         float *out, float *rstd)
{
    if (C <= 0 || T <= 0)
        return 0;
    TSR_LAUNCH(k_rms_fwd, (T + WARPS - 1) / WARPS, WARPS * 32, 0, TSR_STREAM(stream), C, T, x, w,
               eps, out, rstd);
    return tsr_cuda_launched("k_rms_fwd");
}

int tsr_cuda_rmsnorm_bwd(void *stream, int C, int T, const float *dout, const float *x,
                         const float *w, const float *rstd, float *dx, float *dw)
{
    if (C <= 0 || T <= 0)
        return 0;
    cudaStream_t s = TSR_STREAM(stream);
    int blocks = (T + WARPS - 1) / WARPS;
    blocks = blocks > MAX_BLOCKS ? MAX_BLOCKS : blocks;
    int rc;
    TSR_LAUNCH(k_rms_bwd, blocks, WARPS * 32, 0, s, C, T, dout, x, w, rstd, dx);
    if ((rc = tsr_cuda_launched("k_rms_bwd")))
        return rc;
    TSR_LAUNCH(k_rms_bwd_w, (C + 127) / 128, 128, 0, s, C, T, dout, x, rstd, dw);
    return tsr_cuda_launched("k_rms_bwd_w");
}
