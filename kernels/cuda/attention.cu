/* CUDA flash-style causal attention on one (query tile, key/value tile) pair.
 *
 * A row (query or key) is owned by a group of G = DMAX/32 consecutive lanes;
 * lane g of the group holds dimensions c = g + G*u, u < 32, in registers, so
 * that reading a staged key/query row from shared memory hits G distinct banks
 * (lanes of different groups read the same address: broadcast).  Dot products
 * are reduced over the group with shuffles.  DMAX is the head dimension
 * rounded up to 32, 64, 128 or 256; padded dimensions are zero.
 *
 * Forward: blocks of BR queries stream the visible keys in chunks of BK
 * through shared memory with an online softmax.  Backward: one kernel owns
 * keys (dk, dv in registers, streams queries), one owns queries (dq, streams
 * keys), both recompute p from lse, so nothing is accumulated atomically.
 * Grouped-query attention (kvg query heads per K/V head): the query-side
 * kernels read K/V head b / kvg; the key-side one runs per K/V head and
 * streams its kvg query heads in turn, in order, into its registers.
 *
 * q, k, v, o, dout, dq, dk, dv are strided views (kernels/attention.h: row
 * r of head b at x + b*hs + r*ld; stage() and the row loads take ld, the
 * block's head offset b*hs); the state ms, acc, lse, D is contiguous.
 *
 * These are the FP32 CUDA-core kernels: the strict mode (prec =
 * TSR_ATTN_FP32) and the readable reference.  prec = TSR_ATTN_TF32 runs the
 * tensor-core kernels of attention_tc.cu where they take the head dimension
 * (d <= 128), these ones otherwise.
 *
 * Must never: allocate, synchronize, or use float atomics (the backward is
 * deterministic). */
#include <math.h>

#include "kernels/attention.h"
#include "kernels/cuda/attention_tc.cuh"
#include "kernels/cuda/common.cuh"

template <int DMAX> struct geo {
    static constexpr int G = DMAX / 32;              /* lanes per row */
    static constexpr int BK = DMAX <= 128 ? 32 : 16; /* staged rows per chunk */
    static constexpr int BR = DMAX <= 128 ? 64 : 32; /* rows owned per block */
    static constexpr int THREADS = BR * G;
};

/* sum over the G lanes of a row group (groups are aligned within a warp) */
template <int G> __device__ __forceinline__ float group_sum(float v)
{
    for (int o = G / 2; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ int visible(int tk, int q0, int k0, int i)
{
    long long n = (long long)q0 + i - k0 + 1;
    return n < 0 ? 0 : (n > tk ? tk : (int)n);
}

/* Stage rows [r0, r0 + BR) of one head's (d, nrows) view (row r at src + r*ld)
 * into sh[BR][DMAX], zero padded. */
template <int DMAX, int BR>
__device__ __forceinline__ void stage(float (*sh)[DMAX], const float *src, int d, int ld,
                                      int nrows, int r0)
{
    for (int e = threadIdx.x; e < BR * DMAX; e += blockDim.x) {
        int rr = e / DMAX, c = e % DMAX, r = r0 + rr;
        sh[rr][c] = (r < nrows && c < d) ? src[(size_t)r * ld + c] : 0.0f;
    }
}

/* q: (d, tq, nb), k, v: (d, tk, nb / kvg), all in (ld, hs) (kernels/attention.h);
 * ms: (2, tq, nb), acc: (d, tq, nb) contiguous.  Block (x, b): BR queries of
 * head b, which reads K/V head b / kvg. */
template <int DMAX>
__global__ void __launch_bounds__(geo<DMAX>::THREADS) k_attn_fwd(int d, int tq, int tk, int kvg, int q0, int k0, float scale, int ld, long long hs, const float *q,
                           const float *k, const float *v, float *ms, float *acc)
{
    constexpr int G = geo<DMAX>::G, BK = geo<DMAX>::BK, BQ = geo<DMAX>::BR;
    __shared__ float ks[BK][DMAX], vs[BK][DMAX];
    const int b = blockIdx.y, g = threadIdx.x % G;
    const int i = blockIdx.x * BQ + threadIdx.x / G;
    const int ilast = min(tq, (int)(blockIdx.x + 1) * BQ) - 1;
    const int nblock = visible(tk, q0, k0, ilast); /* keys any query of the block sees */
    /* A block whose queries see no key changes nothing.  (It would read a
     * row's state in every lane of its group and write it back from lane 0
     * with no barrier between: the same values, but a race all the same.) */
    if (nblock == 0)
        return;
    const bool active = i < tq;
    const size_t row = (size_t)b * tq + i;
    const float *kb = k + (size_t)(b / kvg) * hs, *vb = v + (size_t)(b / kvg) * hs;
    const float *qi = q + (size_t)b * hs + (size_t)i * ld;
    float qr[32], ar[32];
#pragma unroll
    for (int u = 0; u < 32; u++) {
        int c = g + G * u;
        bool in = active && c < d;
        qr[u] = in ? qi[c] * scale : 0.0f; /* scores come out scaled */
        ar[u] = in ? acc[row * d + c] : 0.0f;
    }
    float m = active ? ms[2 * row] : -INFINITY, l = active ? ms[2 * row + 1] : 0.0f;
    const int nvis = active ? visible(tk, q0, k0, i) : 0;
    for (int j0 = 0; j0 < nblock; j0 += BK) {
        __syncthreads();
        stage<DMAX, BK>(ks, kb, d, ld, tk, j0);
        stage<DMAX, BK>(vs, vb, d, ld, tk, j0);
        __syncthreads();
        float s[BK], cmax = -INFINITY;
#pragma unroll
        for (int jj = 0; jj < BK; jj++) {
            float part = 0.0f;
#pragma unroll
            for (int u = 0; u < 32; u++)
                part += qr[u] * ks[jj][g + G * u];
            part = group_sum<G>(part);
            s[jj] = j0 + jj < nvis ? part : -INFINITY;
            cmax = fmaxf(cmax, s[jj]);
        }
        if (cmax != -INFINITY) {
            float mnew = fmaxf(m, cmax);
            float corr = expf(m - mnew); /* 0 when m = -inf */
            l *= corr;
#pragma unroll
            for (int u = 0; u < 32; u++)
                ar[u] *= corr;
#pragma unroll
            for (int jj = 0; jj < BK; jj++) {
                float p = expf(s[jj] - mnew);
                l += p;
#pragma unroll
                for (int u = 0; u < 32; u++)
                    ar[u] += p * vs[jj][g + G * u];
            }
            m = mnew;
        }
    }
    if (!active)
        return;
#pragma unroll
    for (int u = 0; u < 32; u++) {
        int c = g + G * u;
        if (c < d)
            acc[row * d + c] = ar[u];
    }
    if (g == 0) {
        ms[2 * row] = m;
        ms[2 * row + 1] = l;
    }
}

/* Backward, key side: dk, dv for BR keys per block, streaming queries.
 * q: (d, tq, nb), k, v, dk, dv: (d, tk, nb / kvg), all in (ld, hs); dout:
 * (d, tq, nb) in (ldo, hso); lse, D: (tq, nb) contiguous.  Block (x, h): BR
 * keys of K/V head h, whose query heads h*kvg .. h*kvg + kvg - 1 it streams
 * in turn, summing in registers (a fixed order, no atomics). */
template <int DMAX>
__global__ void __launch_bounds__(geo<DMAX>::THREADS) k_attn_bwd_kv(int d, int tq, int tk, int kvg, int q0, int k0, float scale, int ld, long long hs, const float *q,
                              const float *k, const float *v, int ldo, long long hso, const float *dout, const float *lse,
                              const float *D, float *dk, float *dv)
{
    constexpr int G = geo<DMAX>::G, BR = geo<DMAX>::BK, BQ = geo<DMAX>::BR;
    __shared__ float qs[BR][DMAX], dos[BR][DMAX], ls[BR], Ds[BR];
    const int h = blockIdx.y, g = threadIdx.x % G;
    const int j = blockIdx.x * BQ + threadIdx.x / G;
    const bool active = j < tk;
    const size_t koff = (size_t)h * hs + (size_t)j * ld;
    float kr[32], vr[32], dkr[32], dvr[32];
#pragma unroll
    for (int u = 0; u < 32; u++) {
        int c = g + G * u;
        bool in = active && c < d;
        kr[u] = in ? k[koff + c] * scale : 0.0f;
        vr[u] = in ? v[koff + c] : 0.0f;
        dkr[u] = 0.0f, dvr[u] = 0.0f;
    }
    /* query i sees key j iff q0 + i >= k0 + j: the block's first key decides */
    const int jfirst = blockIdx.x * BQ;
    long long ist = (long long)k0 + jfirst - q0;
    const int istart = ist < 0 ? 0 : (ist > tq ? tq : (int)ist);
    for (int b = h * kvg; b < (h + 1) * kvg; b++) { /* the group's query heads, in order */
        const float *qb = q + (size_t)b * hs, *dob = dout + (size_t)b * hso;
        const float *lb = lse + (size_t)b * tq, *Db = D + (size_t)b * tq;
        for (int i0 = istart; i0 < tq; i0 += BR) {
            __syncthreads();
            stage<DMAX, BR>(qs, qb, d, ld, tq, i0);
            stage<DMAX, BR>(dos, dob, d, ldo, tq, i0);
            for (int e = threadIdx.x; e < BR; e += blockDim.x) {
                int i = i0 + e;
                ls[e] = i < tq ? lb[i] : -INFINITY;
                Ds[e] = i < tq ? Db[i] : 0.0f;
            }
            __syncthreads();
#pragma unroll 4
            for (int ii = 0; ii < BR; ii++) {
                float s = 0.0f, dp = 0.0f;
#pragma unroll
                for (int u = 0; u < 32; u++) {
                    s += kr[u] * qs[ii][g + G * u];
                    dp += vr[u] * dos[ii][g + G * u];
                }
                s = group_sum<G>(s);
                dp = group_sum<G>(dp);
                bool vis = active && (long long)q0 + i0 + ii >= (long long)k0 + j && ls[ii] != -INFINITY;
                float p = vis ? expf(s - ls[ii]) : 0.0f;
                float ds = p * (dp - Ds[ii]) * scale;
#pragma unroll
                for (int u = 0; u < 32; u++) {
                    dvr[u] += p * dos[ii][g + G * u];
                    dkr[u] += ds * qs[ii][g + G * u];
                }
            }
        }
    }
    if (!active)
        return;
#pragma unroll
    for (int u = 0; u < 32; u++) {
        int c = g + G * u;
        if (c < d) {
            dk[koff + c] += dkr[u];
            dv[koff + c] += dvr[u];
        }
    }
}

/* Backward, query side: dq for BR queries per block, streaming keys.
 * Layouts as k_attn_bwd_kv's; dq in (ld, hs).  Block (x, b): query head b,
 * K/V head b / kvg. */
template <int DMAX>
__global__ void __launch_bounds__(geo<DMAX>::THREADS) k_attn_bwd_q(int d, int tq, int tk, int kvg, int q0, int k0, float scale, int ld, long long hs, const float *q,
                             const float *k, const float *v, int ldo, long long hso, const float *dout, const float *lse,
                             const float *D, float *dq)
{
    constexpr int G = geo<DMAX>::G, BK = geo<DMAX>::BK, BQ = geo<DMAX>::BR;
    __shared__ float ks[BK][DMAX], vs[BK][DMAX];
    const int b = blockIdx.y, g = threadIdx.x % G;
    const int i = blockIdx.x * BQ + threadIdx.x / G;
    const bool active = i < tq;
    const size_t row = (size_t)b * tq + i;
    const size_t qoff = (size_t)b * hs + (size_t)i * ld, dooff = (size_t)b * hso + (size_t)i * ldo;
    const float *kb = k + (size_t)(b / kvg) * hs, *vb = v + (size_t)(b / kvg) * hs;
    float qr[32], dor[32], dqr[32];
#pragma unroll
    for (int u = 0; u < 32; u++) {
        int c = g + G * u;
        bool in = active && c < d;
        qr[u] = in ? q[qoff + c] * scale : 0.0f;
        dor[u] = in ? dout[dooff + c] : 0.0f;
        dqr[u] = 0.0f;
    }
    const float li = active ? lse[row] : -INFINITY, Di = active ? D[row] : 0.0f;
    const int nvis = (active && li != -INFINITY) ? visible(tk, q0, k0, i) : 0;
    const int ilast = min(tq, (int)(blockIdx.x + 1) * BQ) - 1;
    const int nblock = visible(tk, q0, k0, ilast);
    for (int j0 = 0; j0 < nblock; j0 += BK) {
        __syncthreads();
        stage<DMAX, BK>(ks, kb, d, ld, tk, j0);
        stage<DMAX, BK>(vs, vb, d, ld, tk, j0);
        __syncthreads();
#pragma unroll 4
        for (int jj = 0; jj < BK; jj++) {
            float s = 0.0f, dp = 0.0f;
#pragma unroll
            for (int u = 0; u < 32; u++) {
                s += qr[u] * ks[jj][g + G * u];
                dp += dor[u] * vs[jj][g + G * u];
            }
            s = group_sum<G>(s);
            dp = group_sum<G>(dp);
            float p = j0 + jj < nvis ? expf(s - li) : 0.0f;
            float ds = p * (dp - Di) * scale;
#pragma unroll
            for (int u = 0; u < 32; u++)
                dqr[u] += ds * ks[jj][g + G * u];
        }
    }
    if (!active)
        return;
#pragma unroll
    for (int u = 0; u < 32; u++) {
        int c = g + G * u;
        if (c < d)
            dq[qoff + c] += dqr[u];
    }
}

/* ms: (2, rows), acc: (d, rows) */
__global__ void k_attn_init(int d, size_t rows, float *ms, float *acc)
{
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t r = tid; r < rows; r += stride) {
        ms[2 * r] = -INFINITY;
        ms[2 * r + 1] = 0.0f;
    }
    for (size_t e = tid; e < rows * d; e += stride)
        acc[e] = 0.0f;
}

/* one warp per row (grid-stride): ms_*: (2, rows), acc_*: (d, rows).
 * Lane 0 alone reads and writes the row's state; the other lanes get it by
 * shuffle.  (Every lane reading ms_dst while lane 0 overwrites it in the same
 * iteration is a race: lanes of a warp do not run in lockstep, and a lane
 * reading the merged state scales its columns of acc with wrong factors.)
 * The row, hence the loop, is the same for the whole warp. */
__global__ void k_attn_merge(int d, size_t rows, const float *ms_src, const float *acc_src,
                             float *ms_dst, float *acc_dst)
{
    int lane = threadIdx.x & 31;
    size_t nwarps = ((size_t)gridDim.x * blockDim.x) >> 5;
    for (size_t r = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5; r < rows; r += nwarps) {
        float m1 = 0.0f, l1 = 0.0f;
        if (lane == 0)
            m1 = ms_dst[2 * r], l1 = ms_dst[2 * r + 1];
        m1 = __shfl_sync(0xffffffffu, m1, 0);
        l1 = __shfl_sync(0xffffffffu, l1, 0);
        float m2 = ms_src[2 * r], l2 = ms_src[2 * r + 1];
        float m = fmaxf(m1, m2);
        if (m == -INFINITY)
            continue; /* both empty: dst stays empty */
        float c1 = expf(m1 - m), c2 = expf(m2 - m);
        for (int c = lane; c < d; c += 32)
            acc_dst[r * d + c] = acc_dst[r * d + c] * c1 + acc_src[r * d + c] * c2;
        if (lane == 0) {
            ms_dst[2 * r] = m;
            ms_dst[2 * r + 1] = l1 * c1 + l2 * c2;
        }
    }
}

/* the offset of row r = b*tq + i of a (d, tq, nb) view in (ld, hs) */
__device__ __forceinline__ size_t view_off(size_t r, int tq, int ld, long long hs)
{
    return (r / tq) * (size_t)hs + (r % tq) * (size_t)ld;
}

/* one warp per row r = b*tq + i (grid-stride): ms: (2, rows), acc: (d, rows),
 * lse: (rows) contiguous; o: (d, tq, nb) in (ldo, hso) */
__global__ void k_attn_finalize(int d, int tq, size_t rows, const float *ms, const float *acc,
                                int ldo, long long hso, float *o, float *lse)
{
    int lane = threadIdx.x & 31;
    size_t nwarps = ((size_t)gridDim.x * blockDim.x) >> 5;
    for (size_t r = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5; r < rows; r += nwarps) {
        float m = ms[2 * r], l = ms[2 * r + 1];
        float inv = l > 0.0f ? 1.0f / l : 0.0f;
        float *orow = o + view_off(r, tq, ldo, hso);
        for (int c = lane; c < d; c += 32)
            orow[c] = acc[r * d + c] * inv;
        if (lane == 0)
            lse[r] = l > 0.0f ? m + logf(l) : -INFINITY;
    }
}

/* one warp per row r = b*tq + i (grid-stride): o, dout: (d, tq, nb) in
 * (ldo, hso), D: (rows) contiguous */
__global__ void k_attn_bwd_dot(int d, int tq, size_t rows, int ldo, long long hso, const float *o,
                               const float *dout, float *D)
{
    int lane = threadIdx.x & 31;
    size_t nwarps = ((size_t)gridDim.x * blockDim.x) >> 5;
    for (size_t r = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5; r < rows; r += nwarps) {
        size_t off = view_off(r, tq, ldo, hso);
        float s = 0.0f;
        for (int c = lane; c < d; c += 32)
            s += o[off + c] * dout[off + c];
        s = tsr_warp_sum(s);
        if (lane == 0)
            D[r] = s;
    }
}

static int dmax_of(int d)
{
    return d <= 32 ? 32 : d <= 64 ? 64 : d <= 128 ? 128 : d <= 256 ? 256 : 0;
}

/* The kernels keep a row in registers up to d = 256.  (nb, the grid's y
 * dimension, is left to the launch: above 65535 it fails as an invalid
 * configuration naming the kernel.) */
static int unsupported_d(const char *fn, int d)
{
    return tsr_cuda_invalid("%s: head dimension %d is above 256, the largest the CUDA attention "
                            "kernels support",
                            fn, d);
}

static int unknown_prec(const char *fn, int prec)
{
    return tsr_cuda_invalid("%s: precision %d is none of TSR_ATTN_FP32, _TF32, _BF16", fn,
                            prec);
}

/* query heads per K/V head: at least 1, dividing nb (checked before an
 * empty pair returns, so that a wrong call fails whatever the tile) */
static bool bad_kv_group(int nb, int kv_group)
{
    return kv_group < 1 || (nb > 0 && nb % kv_group != 0);
}

static int kv_group_invalid(const char *fn, int nb, int kv_group)
{
    return tsr_cuda_invalid("%s: kv_group %d does not divide the %d query heads", fn, kv_group,
                            nb);
}

/* pairs entirely above the diagonal, and empty tiles, do nothing */
static bool pair_empty(int d, int tq, int tk, int nb, int q0, int k0)
{
    return d <= 0 || tq <= 0 || tk <= 0 || nb <= 0 || (long long)k0 > (long long)q0 + tq - 1;
}

int tsr_cuda_attn_init(void *stream, int d, int tq, int nb, float *ms, float *acc)
{
    size_t rows = (size_t)tq * nb;
    if (rows == 0)
        return 0;
    TSR_LAUNCH(k_attn_init, tsr_blocks(rows * d, 256), 256, 0, TSR_STREAM(stream), d, rows, ms,
               acc);
    return tsr_cuda_launched("k_attn_init");
}

template <int DMAX>
static int launch_fwd(cudaStream_t s, int d, int tq, int tk, int nb, int kvg, int q0, int k0, float scale,
                      int ld, long long hs, const float *q, const float *k, const float *v,
                      float *ms, float *acc)
{
    constexpr int BQ = geo<DMAX>::BR;
    dim3 grid((tq + BQ - 1) / BQ, nb);
    TSR_LAUNCH(k_attn_fwd<DMAX>, grid, geo<DMAX>::THREADS, 0, s, d, tq, tk, kvg, q0, k0, scale, ld, hs,
               q, k, v, ms, acc);
    return tsr_cuda_launched_t("k_attn_fwd", DMAX);
}

/* the FP32 forward of one sequence; fn: the public function called */
static int fwd_fp32(const char *fn, cudaStream_t s, int d, int tq, int tk, int nb, int kvg, int q0, int k0, float scale,
                    int ld, long long hs, const float *q, const float *k, const float *v,
                    float *ms, float *acc)
{
    switch (dmax_of(d)) {
    case 32: return launch_fwd<32>(s, d, tq, tk, nb, kvg, q0, k0, scale, ld, hs, q, k, v, ms, acc);
    case 64: return launch_fwd<64>(s, d, tq, tk, nb, kvg, q0, k0, scale, ld, hs, q, k, v, ms, acc);
    case 128: return launch_fwd<128>(s, d, tq, tk, nb, kvg, q0, k0, scale, ld, hs, q, k, v, ms, acc);
    case 256: return launch_fwd<256>(s, d, tq, tk, nb, kvg, q0, k0, scale, ld, hs, q, k, v, ms, acc);
    default: return unsupported_d(fn, d);
    }
}

/* tsr_cuda_attn_fwd_gqa, its errors naming fn (the public function called) */
static int attn_fwd(const char *fn, void *stream, int prec, int d, int tq, int tk, int nb,
                    int kv_group, int nseq, int q0, int k0, float scale, int ld, long long hs,
                    const float *q, const float *k, const float *v, float *ms, float *acc)
{
    if (prec != TSR_ATTN_FP32 && prec != TSR_ATTN_TF32 && prec != TSR_ATTN_BF16)
        return unknown_prec(fn, prec);
    if (bad_kv_group(nb, kv_group))
        return kv_group_invalid(fn, nb, kv_group);
    if (nseq <= 0 || pair_empty(d, tq, tk, nb, q0, k0))
        return 0;
    cudaStream_t s = TSR_STREAM(stream);
    if (prec != TSR_ATTN_FP32 && tsr__cuda_attn_tc_takes(d))
        return tsr__cuda_attn_fwd_tc(s, prec == TSR_ATTN_BF16, d, tq, tk, nb, kv_group, nseq, q0,
                                     k0, scale, {ld, ld, ld, hs, hs, hs}, q, k, v, ms, acc);
    int rc = 0;
    size_t qs = (size_t)tq * ld, ks = (size_t)tk * ld, st = (size_t)tq * nb;
    for (int i = 0; !rc && i < nseq; i++)
        rc = fwd_fp32(fn, s, d, tq, tk, nb, kv_group, q0, k0, scale, ld, hs, q + i * qs, k + i * ks,
                      v + i * ks, ms + i * 2 * st, acc + i * st * d);
    return rc;
}

int tsr_cuda_attn_fwd(void *stream, int prec, int d, int tq, int tk, int nb, int nseq, int q0,
                      int k0, float scale, int ld, long long hs, const float *q, const float *k,
                      const float *v, float *ms, float *acc)
{
    return attn_fwd(__func__, stream, prec, d, tq, tk, nb, 1, nseq, q0, k0, scale, ld, hs, q, k, v,
                    ms, acc);
}

int tsr_cuda_attn_fwd_gqa(void *stream, int prec, int d, int tq, int tk, int nb, int kv_group,
                          int nseq, int q0, int k0, float scale, int ld, long long hs,
                          const float *q, const float *k, const float *v, float *ms, float *acc)
{
    return attn_fwd(__func__, stream, prec, d, tq, tk, nb, kv_group, nseq, q0, k0, scale, ld, hs, q,
                    k, v, ms, acc);
}

int tsr_cuda_attn_merge(void *stream, int d, int tq, int nb, const float *ms_src,
                        const float *acc_src, float *ms_dst, float *acc_dst)
{
    size_t rows = (size_t)tq * nb;
    if (rows == 0)
        return 0;
    TSR_LAUNCH(k_attn_merge, tsr_blocks(rows * 32, 256), 256, 0, TSR_STREAM(stream), d, rows,
               ms_src, acc_src, ms_dst, acc_dst);
    return tsr_cuda_launched("k_attn_merge");
}

int tsr_cuda_attn_finalize(void *stream, int d, int tq, int nb, const float *ms, const float *acc,
                           int ldo, long long hso, float *o, float *lse)
{
    size_t rows = (size_t)tq * nb;
    if (rows == 0)
        return 0;
    TSR_LAUNCH(k_attn_finalize, tsr_blocks(rows * 32, 256), 256, 0, TSR_STREAM(stream), d, tq,
               rows, ms, acc, ldo, hso, o, lse);
    return tsr_cuda_launched("k_attn_finalize");
}

int tsr_cuda_attn_bwd_dot(void *stream, int d, int tq, int nb, int ldo, long long hso,
                          const float *o, const float *dout, float *D)
{
    size_t rows = (size_t)tq * nb;
    if (rows == 0)
        return 0;
    TSR_LAUNCH(k_attn_bwd_dot, tsr_blocks(rows * 32, 256), 256, 0, TSR_STREAM(stream), d, tq, rows,
               ldo, hso, o, dout, D);
    return tsr_cuda_launched("k_attn_bwd_dot");
}

template <int DMAX>
static int launch_bwd(cudaStream_t s, int d, int tq, int tk, int nb, int kvg, int q0, int k0, float scale,
                      int ld, long long hs, const float *q, const float *k, const float *v,
                      int ldo, long long hso, const float *dout, const float *lse, const float *D,
                      float *dq, float *dk, float *dv)
{
    constexpr int threads = geo<DMAX>::THREADS, BQ = geo<DMAX>::BR;
    dim3 gkv((tk + BQ - 1) / BQ, nb / kvg), gq((tq + BQ - 1) / BQ, nb);
    TSR_LAUNCH(k_attn_bwd_kv<DMAX>, gkv, threads, 0, s, d, tq, tk, kvg, q0, k0, scale, ld, hs, q, k, v,
               ldo, hso, dout, lse, D, dk, dv);
    int st = tsr_cuda_launched_t("k_attn_bwd_kv", DMAX);
    if (st)
        return st;
    TSR_LAUNCH(k_attn_bwd_q<DMAX>, gq, threads, 0, s, d, tq, tk, kvg, q0, k0, scale, ld, hs, q, k, v,
               ldo, hso, dout, lse, D, dq);
    return tsr_cuda_launched_t("k_attn_bwd_q", DMAX);
}

/* the FP32 backward of one sequence; fn: the public function called */
static int bwd_fp32(const char *fn, cudaStream_t s, int d, int tq, int tk, int nb, int kvg, int q0, int k0, float scale,
                    int ld, long long hs, const float *q, const float *k, const float *v, int ldo,
                    long long hso, const float *dout, const float *lse, const float *D, float *dq,
                    float *dk, float *dv)
{
#define TSR_BWD_ARGS s, d, tq, tk, nb, kvg, q0, k0, scale, ld, hs, q, k, v, ldo, hso, dout, lse, D, dq, dk, dv
    switch (dmax_of(d)) {
    case 32: return launch_bwd<32>(TSR_BWD_ARGS);
    case 64: return launch_bwd<64>(TSR_BWD_ARGS);
    case 128: return launch_bwd<128>(TSR_BWD_ARGS);
    case 256: return launch_bwd<256>(TSR_BWD_ARGS);
    default: return unsupported_d(fn, d);
    }
#undef TSR_BWD_ARGS
}

/* tsr_cuda_attn_bwd_gqa, its errors naming fn (the public function called) */
static int attn_bwd(const char *fn, void *stream, int prec, int d, int tq, int tk, int nb,
                    int kv_group, int nseq, int q0, int k0, float scale, int ld, long long hs,
                    const float *q, const float *k, const float *v, int ldo, long long hso,
                    const float *dout, const float *lse, const float *D, float *dq, float *dk,
                    float *dv)
{
    if (prec != TSR_ATTN_FP32 && prec != TSR_ATTN_TF32 && prec != TSR_ATTN_BF16)
        return unknown_prec(fn, prec);
    if (bad_kv_group(nb, kv_group))
        return kv_group_invalid(fn, nb, kv_group);
    if (nseq <= 0 || pair_empty(d, tq, tk, nb, q0, k0))
        return 0;
    cudaStream_t s = TSR_STREAM(stream);
    if (prec != TSR_ATTN_FP32 && tsr__cuda_attn_tc_takes(d))
        return tsr__cuda_attn_bwd_tc(s, prec == TSR_ATTN_BF16, d, tq, tk, nb, kv_group, nseq, q0,
                                     k0, scale, {ld, ld, ldo, hs, hs, hso}, q, k, v, dout, lse, D,
                                     dq, dk, dv);
    int rc = 0;
    size_t qs = (size_t)tq * ld, ks = (size_t)tk * ld, os = (size_t)tq * ldo;
    size_t st = (size_t)tq * nb;
    for (int i = 0; !rc && i < nseq; i++)
        rc = bwd_fp32(fn, s, d, tq, tk, nb, kv_group, q0, k0, scale, ld, hs, q + i * qs, k + i * ks,
                      v + i * ks, ldo, hso, dout + i * os, lse + i * st, D + i * st, dq + i * qs,
                      dk + i * ks, dv + i * ks);
    return rc;
}

int tsr_cuda_attn_bwd(void *stream, int prec, int d, int tq, int tk, int nb, int nseq, int q0,
                      int k0, float scale, int ld, long long hs, const float *q, const float *k,
                      const float *v, int ldo, long long hso, const float *dout,
                      const float *lse, const float *D, float *dq, float *dk, float *dv)
{
    return attn_bwd(__func__, stream, prec, d, tq, tk, nb, 1, nseq, q0, k0, scale, ld, hs, q, k, v,
                    ldo, hso, dout, lse, D, dq, dk, dv);
}

int tsr_cuda_attn_bwd_gqa(void *stream, int prec, int d, int tq, int tk, int nb, int kv_group,
                          int nseq, int q0, int k0, float scale, int ld, long long hs,
                          const float *q, const float *k, const float *v, int ldo,
                          long long hso, const float *dout, const float *lse, const float *D,
                          float *dq, float *dk, float *dv)
{
    return attn_bwd(__func__, stream, prec, d, tq, tk, nb, kv_group, nseq, q0, k0, scale, ld, hs, q,
                    k, v, ldo, hso, dout, lse, D, dq, dk, dv);
}
