/* CUDA LayerNorm: one warp per token (column of a (C, T) tile), its
 * features read and written as float4 where C is a multiple of 4 (at most
 * 1024: a lane keeps its share of the token in registers) and the pointers
 * are 16-byte aligned; scalar loops otherwise. No float atomics: the
 * backward's dgamma/dbeta are sums in a fixed order — per warp over its
 * tokens, per block over its warps in turn, then over the blocks in a
 * second kernel (the vector path: per-block partials in a per-stream
 * scratch buffer) or per channel over the tokens in order (scalar path). */
#include "kernels/layernorm.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/scratch.cuh"

enum { WARPS = 8, VEC = 8 /* float4 per lane: C <= 4 * 32 * VEC */, MAX_BLOCKS = 256 };

/* x, out: (C, T) as float4 (C4 = C / 4 per token); gamma, beta: (C4);
 * mean, rstd: (T). One warp per token; the token stays in registers. */
__global__ void k_ln_fwd4(int C, int T, const float4 *x, const float4 *gamma,
                          const float4 *beta, float eps, float4 *out, float *mean, float *rstd)
{
    int lane = threadIdx.x & 31;
    int t = blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (t >= T) /* the whole warp: t is the warp's */
        return;
    int C4 = C >> 2;
    const float4 *xt = x + (size_t)t * C4;
    float4 v[VEC];
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < VEC; i++) {
        int c = lane + 32 * i;
        v[i] = c < C4 ? xt[c] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    }
    float mu = tsr_warp_sum(s) / (float)C, q = 0.0f;
#pragma unroll
    for (int i = 0; i < VEC; i++)
        if (lane + 32 * i < C4) {
            float a = v[i].x - mu, b = v[i].y - mu, c = v[i].z - mu, d = v[i].w - mu;
            q += (a * a + b * b) + (c * c + d * d);
        }
    float rs = rsqrtf(tsr_warp_sum(q) / (float)C + eps);
    float4 *ot = out + (size_t)t * C4;
#pragma unroll
    for (int i = 0; i < VEC; i++) {
        int c = lane + 32 * i;
        if (c < C4) {
            float4 g = gamma[c], b = beta[c];
            ot[c] = make_float4((v[i].x - mu) * rs * g.x + b.x, (v[i].y - mu) * rs * g.y + b.y,
                                (v[i].z - mu) * rs * g.z + b.z, (v[i].w - mu) * rs * g.w + b.w);
        }
    }
    if (lane == 0) {
        mean[t] = mu;
        rstd[t] = rs;
    }
}

/* dout, x, dx: (C, T) as float4; gamma: (C4); mean, rstd: (T);
 * partial: (2C, gridDim.x): block b's dgamma (C) then dbeta (C) sums.
 * dx += ...; warps take tokens t = warp, warp + all warps, ...; the block's
 * sums in 2C floats of dynamic shared memory, added warp after warp. */
__global__ void k_ln_bwd4(int C, int T, const float4 *dout, const float4 *x, const float4 *gamma,
                          const float *mean, const float *rstd, float4 *dx, float *partial)
{
    TSR_DYNAMIC_SHARED(float, sh);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, C4 = C >> 2;
    float4 pg[VEC], pb[VEC];
#pragma unroll
    for (int i = 0; i < VEC; i++)
        pg[i] = pb[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int t = blockIdx.x * WARPS + warp; t < T; t += gridDim.x * WARPS) {
        const float4 *dt = dout + (size_t)t * C4, *xt = x + (size_t)t * C4;
        float mu = mean[t], rs = rstd[t], a = 0.0f, b = 0.0f;
#pragma unroll
        for (int i = 0; i < VEC; i++) {
            int c = lane + 32 * i;
            if (c < C4) {
                float4 d = dt[c], xv = xt[c], g = gamma[c];
                a += (g.x * d.x + g.y * d.y) + (g.z * d.z + g.w * d.w);
                b += (g.x * d.x * (xv.x - mu) + g.y * d.y * (xv.y - mu)) +
                     (g.z * d.z * (xv.z - mu) + g.w * d.w * (xv.w - mu));
            }
        }
        float ma = tsr_warp_sum(a) / (float)C, mb = tsr_warp_sum(b) * rs / (float)C;
        float4 *dxt = dx + (size_t)t * C4;
#pragma unroll
        for (int i = 0; i < VEC; i++) {
            int c = lane + 32 * i;
            if (c < C4) {
                float4 d = dt[c], xv = xt[c], g = gamma[c], o = dxt[c];
                float hx = (xv.x - mu) * rs, hy = (xv.y - mu) * rs;
                float hz = (xv.z - mu) * rs, hw = (xv.w - mu) * rs;
                o.x += rs * (g.x * d.x - ma - hx * mb);
                o.y += rs * (g.y * d.y - ma - hy * mb);
                o.z += rs * (g.z * d.z - ma - hz * mb);
                o.w += rs * (g.w * d.w - ma - hw * mb);
                dxt[c] = o;
                pg[i].x += d.x * hx, pg[i].y += d.y * hy, pg[i].z += d.z * hz, pg[i].w += d.w * hw;
                pb[i].x += d.x, pb[i].y += d.y, pb[i].z += d.z, pb[i].w += d.w;
            }
        }
    }
    for (int c = threadIdx.x; c < 2 * C; c += blockDim.x)
        sh[c] = 0.0f;
    for (int w = 0; w < WARPS; w++) { /* one warp at a time: a fixed order */
        __syncthreads();
        if (warp == w) {
#pragma unroll
            for (int i = 0; i < VEC; i++) {
                int c = lane + 32 * i;
                if (c < C4) {
                    float *g = sh + 4 * c, *b = sh + C + 4 * c;
                    g[0] += pg[i].x, g[1] += pg[i].y, g[2] += pg[i].z, g[3] += pg[i].w;
                    b[0] += pb[i].x, b[1] += pb[i].y, b[2] += pb[i].z, b[3] += pb[i].w;
                }
            }
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < 2 * C; c += blockDim.x)
        partial[(size_t)blockIdx.x * 2 * C + c] = sh[c];
}

/* dgamma (C), dbeta (C) += the sums of partial (2C, nparts) over its
 * columns, in order: one thread per value. */
__global__ void k_ln_params_sum(int C, int nparts, const float *partial, float *dgamma,
                                float *dbeta)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= 2 * C)
        return;
    float s = 0.0f;
    for (int p = 0; p < nparts; p++)
        s += partial[(size_t)p * 2 * C + c];
    if (c < C)
        dgamma[c] += s;
    else
        dbeta[c - C] += s;
}

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

/* dout, x, dx: (C, T); gamma: (C); mean, rstd: (T). dx += ... only: the
 * scalar path's dgamma/dbeta are k_ln_bwd_params'. */
__global__ void k_ln_bwd(int C, int T, const float *dout, const float *x, const float *gamma,
                         const float *mean, const float *rstd, float *dx)
{
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
            dxt[c] += rs * (gamma[c] * dt[c] - ma - xhat * mb);
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

/* The float4 path: C a multiple of 4, at most 4 * 32 * VEC, every pointer
 * 16-byte aligned. */
static bool vec_ok(int C, const void *const *p, int n)
{
    if (C % 4 || C > 4 * 32 * VEC)
        return false;
    for (int i = 0; i < n; i++)
        if (!tsr_aligned16(p[i]))
            return false;
    return true;
}

int tsr_cuda_layernorm_fwd(void *stream, int C, int T, const float *x, const float *gamma,
                           const float *beta, float eps, float *out, float *mean, float *rstd)
{
    if (C <= 0 || T <= 0)
        return 0;
    const void *p[] = {x, gamma, beta, out};
    if (vec_ok(C, p, 4)) {
        TSR_LAUNCH(k_ln_fwd4, (T + WARPS - 1) / WARPS, WARPS * 32, 0, TSR_STREAM(stream), C, T,
                   (const float4 *)x, (const float4 *)gamma, (const float4 *)beta, eps,
                   (float4 *)out, mean, rstd);
        return tsr_cuda_launched("k_ln_fwd4");
    }
    TSR_LAUNCH(k_ln_fwd, (T + WARPS - 1) / WARPS, WARPS * 32, 0, TSR_STREAM(stream), C, T, x, gamma,
               beta, eps, out, mean, rstd);
    return tsr_cuda_launched("k_ln_fwd");
}

int tsr_cuda_layernorm_bwd(void *stream, int C, int T, const float *dout, const float *x,
                           const float *gamma, const float *mean, const float *rstd, float *dx,
                           float *dgamma, float *dbeta, int deterministic)
{
    (void)deterministic; /* always: no float atomics */
    if (C <= 0 || T <= 0)
        return 0;
    cudaStream_t s = TSR_STREAM(stream);
    int blocks = (T + WARPS - 1) / WARPS;
    blocks = blocks > MAX_BLOCKS ? MAX_BLOCKS : blocks;
    const void *p[] = {dout, x, gamma, dx};
    int rc;
    if (vec_ok(C, p, 4)) {
        void *partial = nullptr;
        if ((rc = tsr_cuda_stream_scratch(s, TSR_SCRATCH_LN_PARTIAL,
                                          (size_t)blocks * 2 * (size_t)C * sizeof(float),
                                          &partial)))
            return rc;
        TSR_LAUNCH(k_ln_bwd4, blocks, WARPS * 32, 2 * (size_t)C * sizeof(float), s, C, T,
                   (const float4 *)dout, (const float4 *)x, (const float4 *)gamma, mean, rstd,
                   (float4 *)dx, (float *)partial);
        if ((rc = tsr_cuda_launched("k_ln_bwd4")))
            return rc;
        TSR_LAUNCH(k_ln_params_sum, (2 * C + 255) / 256, 256, 0, s, C, blocks,
                   (const float *)partial, dgamma, dbeta);
        return tsr_cuda_launched("k_ln_params_sum");
    }
    TSR_LAUNCH(k_ln_bwd, blocks, WARPS * 32, 0, s, C, T, dout, x, gamma, mean, rstd, dx);
    if ((rc = tsr_cuda_launched("k_ln_bwd")))
        return rc;
    TSR_LAUNCH(k_ln_bwd_params, (C + 127) / 128, 128, 0, s, C, T, dout, x, mean, rstd, dgamma,
               dbeta);
    return tsr_cuda_launched("k_ln_bwd_params");
}

/* ---- row tiles (channel tiles): kernels/layernorm.h ----------------------
 * Plain scalar kernels: each reads its tile once; the sums per token are a
 * warp's in a fixed shuffle order, the combine a thread's over the partials
 * in order, dgamma/dbeta a thread's per channel over the tokens in order. */

/* x: (M, T); mean: (T) or null; part: (T). One warp per token: the sum of
 * its M features (mean null) or of their squared deviations from mean. */
__global__ void k_ln_part(int M, int T, const float *x, const float *mean, float *part)
{
    int lane = threadIdx.x & 31;
    int t = blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (t >= T)
        return;
    const float *xt = x + (size_t)t * M;
    float s = 0.0f;
    if (!mean) {
        for (int i = lane; i < M; i += 32)
            s += xt[i];
    } else {
        float mu = mean[t];
        for (int i = lane; i < M; i += 32) {
            float dv = xt[i] - mu;
            s += dv * dv;
        }
    }
    s = tsr_warp_sum(s);
    if (lane == 0)
        part[t] = s;
}

/* dout, x: (M, T); gamma: (M); mean, rstd: (T); part: (2T). One warp per
 * token: part[t] = sum gamma dout, part[T + t] = sum gamma dout xhat. */
__global__ void k_ln_part_grad(int M, int T, const float *dout, const float *x,
                               const float *gamma, const float *mean, const float *rstd,
                               float *part)
{
    int lane = threadIdx.x & 31;
    int t = blockIdx.x * WARPS + (threadIdx.x >> 5);
    if (t >= T)
        return;
    const float *dt = dout + (size_t)t * M, *xt = x + (size_t)t * M;
    float mu = mean[t], rs = rstd[t], a = 0.0f, b = 0.0f;
    for (int i = lane; i < M; i += 32) {
        float g = gamma[i] * dt[i];
        a += g;
        b += g * (xt[i] - mu) * rs;
    }
    a = tsr_warp_sum(a);
    b = tsr_warp_sum(b);
    if (lane == 0) {
        part[t] = a;
        part[T + t] = b;
    }
}

/* the partials of one combine, passed by value (k of them used) */
struct ln_parts {
    const float *p[TSR_LN_PARTS];
};

/* acc: (n); parts: k arrays of (n). One thread per value, partials in order. */
__global__ void k_ln_combine(int n, int k, ln_parts parts, int init, int fin, int C, float eps,
                             float *acc)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float s = init ? 0.0f : acc[i];
        for (int p = 0; p < k; p++)
            s += parts.p[p][i];
        if (fin == TSR_LN_FIN_MEAN)
            s = s / (float)C;
        else if (fin == TSR_LN_FIN_RSTD)
            s = 1.0f / sqrtf(s / (float)C + eps);
        acc[i] = s;
    }
}

/* x, out: (M, T); gamma, beta: (M); mean, rstd: (T). Per element. */
__global__ void k_ln_apply(int M, int T, const float *x, const float *gamma, const float *beta,
                           const float *mean, const float *rstd, float *out)
{
    size_t n = (size_t)M * (size_t)T;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        int i = (int)(e % (size_t)M), t = (int)(e / (size_t)M);
        out[e] = (x[e] - mean[t]) * rstd[t] * gamma[i] + beta[i];
    }
}

/* dout, x, dx: (M, T); gamma: (M); mean, rstd: (T); m2: (2T). dx += … per
 * element. */
__global__ void k_ln_apply_grad(int M, int T, const float *dout, const float *x,
                                const float *gamma, const float *mean, const float *rstd,
                                const float *m2, float *dx)
{
    size_t n = (size_t)M * (size_t)T;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        int i = (int)(e % (size_t)M), t = (int)(e / (size_t)M);
        float rs = rstd[t], xhat = (x[e] - mean[t]) * rs;
        dx[e] += rs * (gamma[i] * dout[e] - m2[t] - xhat * m2[T + t]);
    }
}

int tsr_cuda_layernorm_part(void *stream, int M, int T, const float *x, const float *mean,
                            float *part)
{
    if (M <= 0 || T <= 0)
        return 0;
    TSR_LAUNCH(k_ln_part, (T + WARPS - 1) / WARPS, WARPS * 32, 0, TSR_STREAM(stream), M, T, x,
               mean, part);
    return tsr_cuda_launched("k_ln_part");
}

int tsr_cuda_layernorm_part_grad(void *stream, int M, int T, const float *dout, const float *x,
                                 const float *gamma, const float *mean, const float *rstd,
                                 float *part)
{
    if (M <= 0 || T <= 0)
        return 0;
    TSR_LAUNCH(k_ln_part_grad, (T + WARPS - 1) / WARPS, WARPS * 32, 0, TSR_STREAM(stream), M, T,
               dout, x, gamma, mean, rstd, part);
    return tsr_cuda_launched("k_ln_part_grad");
}

int tsr_cuda_layernorm_combine(void *stream, int n, int k, const float *const *parts, int init,
                               int fin, int C, float eps, float *acc)
{
    if (k < 1 || k > TSR_LN_PARTS)
        return tsr_cuda_invalid("layernorm_combine: %d partials (1 to %d)", k, TSR_LN_PARTS);
    if (n <= 0)
        return 0;
    ln_parts p = {};
    for (int i = 0; i < k; i++)
        p.p[i] = parts[i];
    TSR_LAUNCH(k_ln_combine, tsr_blocks((size_t)n, 256), 256, 0, TSR_STREAM(stream), n, k, p,
               init, fin, C, eps, acc);
    return tsr_cuda_launched("k_ln_combine");
}

int tsr_cuda_layernorm_apply(void *stream, int M, int T, const float *x, const float *gamma,
                             const float *beta, const float *mean, const float *rstd,
                             float *out)
{
    if (M <= 0 || T <= 0)
        return 0;
    TSR_LAUNCH(k_ln_apply, tsr_blocks((size_t)M * (size_t)T, 256), 256, 0, TSR_STREAM(stream),
               M, T, x, gamma, beta, mean, rstd, out);
    return tsr_cuda_launched("k_ln_apply");
}

int tsr_cuda_layernorm_apply_grad(void *stream, int M, int T, const float *dout, const float *x,
                                  const float *gamma, const float *mean, const float *rstd,
                                  const float *m2, float *dx, float *dgamma, float *dbeta)
{
    if (M <= 0 || T <= 0)
        return 0;
    cudaStream_t s = TSR_STREAM(stream);
    TSR_LAUNCH(k_ln_apply_grad, tsr_blocks((size_t)M * (size_t)T, 256), 256, 0, s, M, T, dout, x,
               gamma, mean, rstd, m2, dx);
    int rc = tsr_cuda_launched("k_ln_apply_grad");
    if (rc)
        return rc;
    /* dgamma, dbeta: the fused kernel's deterministic parameter sums */
    TSR_LAUNCH(k_ln_bwd_params, (M + 127) / 128, 128, 0, s, M, T, dout, x, mean, rstd, dgamma,
               dbeta);
    return tsr_cuda_launched("k_ln_bwd_params");
}
