/* CUDA attention of new tokens over a KV cache (kernels/decode.h): one
 * kernel stores the new keys and values, a second gives each query column
 * one warp that streams its slot's cached keys with an online softmax;
 * lane g holds dimensions g + 32u (u < 8) of the accumulator. A decode step
 * has few columns and short rows: a warp per column is enough to keep the
 * cache reads streaming; tensor cores would not help at one query. */
#include <math.h>

#include "kernels/cuda/common.cuh"
#include "kernels/decode.h"

#define DEC_DMAX 256

/* kc, vc (d, slots*maxlen) <- k, v (d, n) at each column's (slot, pos) */
__global__ void k_decode_store(int d, int n, int maxlen, const int32_t *cols, const float *k,
                               const float *v, int ld, float *kc, float *vc)
{
    int j = blockIdx.x;
    if (j >= n)
        return;
    size_t col = (size_t)cols[2 * j] * (size_t)maxlen + (size_t)cols[2 * j + 1];
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        kc[col * d + c] = k[(size_t)j * ld + c];
        vc[col * d + c] = v[(size_t)j * ld + c];
    }
}

/* y(:, j) = softmax(scale q_j . kc) vc over the slot's positions [0, pos] */
__global__ void k_decode_attn(int d, int n, int maxlen, float scale, const int32_t *cols,
                              const float *q, int ld, const float *kc, const float *vc, float *y)
{
    int j = blockIdx.x, g = threadIdx.x;
    if (j >= n)
        return;
    int nkeys = cols[2 * j + 1] + 1;
    size_t base = (size_t)cols[2 * j] * (size_t)maxlen * d;
    float qr[DEC_DMAX / 32], ar[DEC_DMAX / 32];
#pragma unroll
    for (int u = 0; u < DEC_DMAX / 32; u++) {
        int c = g + 32 * u;
        qr[u] = c < d ? q[(size_t)j * ld + c] * scale : 0.0f;
        ar[u] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (int t = 0; t < nkeys; t++) {
        const float *kt = kc + base + (size_t)t * d, *vt = vc + base + (size_t)t * d;
        float s = 0.0f;
#pragma unroll
        for (int u = 0; u < DEC_DMAX / 32; u++) {
            int c = g + 32 * u;
            s += c < d ? qr[u] * kt[c] : 0.0f;
        }
        s = tsr_warp_sum(s);
        float mn = fmaxf(m, s);
        float r = m == -INFINITY ? 0.0f : expf(m - mn), p = expf(s - mn);
        l = l * r + p;
#pragma unroll
        for (int u = 0; u < DEC_DMAX / 32; u++) {
            int c = g + 32 * u;
            ar[u] = ar[u] * r + (c < d ? p * vt[c] : 0.0f);
        }
        m = mn;
    }
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
    for (int u = 0; u < DEC_DMAX / 32; u++) {
        int c = g + 32 * u;
        if (c < d)
            y[(size_t)j * d + c] = ar[u] * inv;
    }
}

int tsr_cuda_decode_attn(void *stream, int d, int n, int maxlen, float scale,
                         const int32_t *cols, const float *q, const float *k, const float *v,
                         int ld, float *kc, float *vc, float *y)
{
    if (d <= 0 || d > DEC_DMAX)
        return tsr_cuda_invalid("tsr_cuda_decode_attn: head width %d outside [1, %d]", d,
                                DEC_DMAX);
    if (n <= 0)
        return 0;
    TSR_LAUNCH(k_decode_store, (unsigned)n, 64, 0, TSR_STREAM(stream), d, n, maxlen, cols, k, v,
               ld, kc, vc);
    int rc = tsr_cuda_launched("k_decode_store");
    if (rc)
        return rc;
    TSR_LAUNCH(k_decode_attn, (unsigned)n, 32, 0, TSR_STREAM(stream), d, n, maxlen, scale, cols,
               q, ld, kc, vc, y);
    return tsr_cuda_launched("k_decode_attn");
}

__global__ void k_decode_embed(int C, const float *a, const float *b, float *out)
{
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x)
        out[c] = a[c] + b[c];
}

int tsr_cuda_decode_embed(void *stream, int C, const float *a, const float *b, float *out)
{
    if (C <= 0)
        return 0;
    TSR_LAUNCH(k_decode_embed, tsr_blocks((size_t)C, 256), 256, 0, TSR_STREAM(stream), C, a, b,
               out);
    return tsr_cuda_launched("k_decode_embed");
}

__device__ __forceinline__ float bf16f(uint16_t h)
{
    return __uint_as_float((unsigned)h << 16);
}

/* one thread per y element, consecutive threads on consecutive rows
 * (coalesced reads of W's columns) */
__global__ void k_gemv_bf16(int m, int n, int k, const uint16_t *w, const float *x, int ldx,
                            float beta, float *y)
{
    size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (e >= (size_t)m * n)
        return;
    int i = (int)(e % m), j = (int)(e / m);
    float s = 0.0f;
    for (int p = 0; p < k; p++)
        s += bf16f(w[(size_t)p * m + i]) * x[(size_t)j * ldx + p];
    y[e] = beta == 0.0f ? s : y[e] + s;
}

/* one warp per y element: a dot product of a W column with an x column */
__global__ void k_gemv_bf16_t(int m, int n, int k, const uint16_t *w, const float *x, float *y)
{
    size_t e = blockIdx.x * (size_t)(blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (e >= (size_t)m * n)
        return;
    int i = (int)(e % m), j = (int)(e / m);
    float s = 0.0f;
    for (int c = lane; c < k; c += 32)
        s += bf16f(w[(size_t)i * k + c]) * x[(size_t)j * k + c];
    s = tsr_warp_sum(s);
    if (lane == 0)
        y[e] = s;
}

int tsr_cuda_decode_gemv_bf16(void *stream, int m, int n, int k, const uint16_t *w,
                              const float *x, int ldx, float beta, float *y)
{
    if (m <= 0 || n <= 0)
        return 0;
    unsigned blocks = (unsigned)(((size_t)m * n + 255) / 256);
    TSR_LAUNCH(k_gemv_bf16, blocks, 256, 0, TSR_STREAM(stream), m, n,
               k, w, x, ldx, beta, y);
    return tsr_cuda_launched("k_gemv_bf16");
}

int tsr_cuda_decode_gemv_bf16_t(void *stream, int m, int n, int k, const uint16_t *w,
                                const float *x, float *y)
{
    if (m <= 0 || n <= 0)
        return 0;
    size_t warps = (size_t)m * n;
    unsigned blocks = (unsigned)((warps + 7) / 8);
    TSR_LAUNCH(k_gemv_bf16_t, blocks, 256, 0, TSR_STREAM(stream), m, n, k, w, x, y);
    return tsr_cuda_launched("k_gemv_bf16_t");
}

__global__ void k_sum2(int m, int n, float beta, const float *b, const float *p0, const float *p1,
                       float *y)
{
    size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (e >= (size_t)m * n)
        return;
    y[e] = (beta != 0.0f ? y[e] : 0.0f) + b[e % m] + p0[e] + p1[e];
}

int tsr_cuda_decode_sum2(void *stream, int m, int n, float beta, const float *b, const float *p0,
                         const float *p1, float *y)
{
    if (m <= 0 || n <= 0)
        return 0;
    unsigned blocks = (unsigned)(((size_t)m * n + 255) / 256);
    TSR_LAUNCH(k_sum2, blocks, 256, 0, TSR_STREAM(stream), m, n, beta, b, p0, p1, y);
    return tsr_cuda_launched("k_sum2");
}
