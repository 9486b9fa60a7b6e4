/* kernels/cuda/attention_tc.cu — the TF32 tensor-core versions of the CUDA
 * attention forward and backward (kernels/attention.h, prec = TSR_ATTN_TF32)
 * for head dimensions d <= 128; kernels/cuda/attention.cu dispatches here and
 * keeps the FP32 CUDA-core kernels as the strict path and the reference.
 *
 * Mechanism: the PTX warp-wide product mma.sync m16n8k8 TF32 (kernels/cuda/
 * ptx.cuh), flash-attention style with everything per row in registers.
 * Its fragment layout is documented, so the score accumulators of S = Q K^T
 * are masked, exponentiated and summed where they are (a lane holds rows g
 * and g+8, keys 2t and 2t+1 of each 8-key block, g = lane/4, t = lane%4),
 * and reused directly as the A operand of the next product (P V, dS K):
 * the product sums over keys, so A's column t is taken to be key 2t and
 * column t+4 key 2t+1, and B's rows are read from shared memory in that
 * order.  Nothing goes through shared memory but the streamed chunks, which
 * arrive by cp.async into a double buffer while the previous chunk is being
 * multiplied.  Our own kernels rather than cuDNN (not a dependency): the same
 * source runs under the project's CUDA emulation (cuda_emu/include/
 * ptx_emu.h emulates the instructions with their real register layouts) and
 * in the deterministic mode.  An earlier WMMA version staged every score
 * tile through shared memory and reached 9-12 TFLOP/s on an H100 (the
 * layout of a WMMA fragment is opaque, so the softmax had to be done on
 * stored tiles).
 *
 * Operands are converted to TF32 (round to nearest) as they enter a
 * fragment; softmax and accumulation are FP32, in the log2 domain
 * (s2 = log2(e) scale q.k, exp2), the state ms stored in the natural one.
 * About 1e-3 relative error per score: tests/kernels/test_cuda_attention.c
 * derives the tolerance.
 *
 * Geometry (tc_geo): a block is 4 warps, each warp owns 16 rows (queries in
 * the forward and the dq kernel, keys in the dk/dv kernel), 64 rows per block,
 * and streams the other side in chunks of BC = 32 rows, 16 for DMAX = 128
 * (two stages of (BC, DMAX) pairs in 35 or 33 KiB of static shared memory).  For the GPT-2 call
 * (tq = tk = 1024, 12 heads) a launch is 16 x 12 blocks of 128 threads.
 * Causal work per block is uneven, so blocks are numbered heaviest first.
 * Head dimensions are padded with zeros to DMAX = 32, 64 or 128 (Llama's
 * head and the wide heads of the large GPT-2 projections); d = 129..256 runs
 * the FP32 kernels (attention.cu).  Registers (ptxas, CUDA 13, sm_80/sm_90):
 * the forward 192 at DMAX = 128; the dk/dv kernel, which holds k, v and
 * both sums per lane, reaches the 255 cap from DMAX = 64 on and spills
 * 248/304 bytes at 128 (TF32), 16/36 (bf16): local memory, cached in L1.  Rows may be strided (tsr__attn_strides):
 * q, k, v read in place from a fused (3C, T) tile.
 *
 * Backward: two kernels as in attention.cu (dk/dv over keys, dq over
 * queries), both recompute p from lse, no atomics, deterministic; results are
 * ADDED to dq, dk, dv.  Grouped-query attention (tc_shape.kvg query heads per
 * K/V head): the query-side kernels read K/V head (query head) / kvg; the
 * dk/dv kernel runs one block row per K/V head and streams its kvg query
 * heads in turn into the same register sums (a fixed order).
 *
 * Must never: use float atomics, let a warp diverge around a tsr_mma_tf32
 * (it is warp-wide), or run without the caller asking for TF32.
 */
#include <math.h>

#include "kernels/attention.h"
#include "kernels/cuda/attention_tc.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ptx.cuh"

#define TC_LOG2E 1.4426950408889634f
#define TC_LN2 0.6931471805599453f

template <int DMAX> struct tc_geo {
    static constexpr int WARPS = 4;
    static constexpr int THREADS = 32 * WARPS;
    static constexpr int BR = 16 * WARPS; /* rows owned per block, 16 per warp */
    /* streamed rows per chunk: 32, 16 for DMAX = 128 (two stages of (k, v)
     * chunks stay in 48 KiB of static shared memory: 33 KiB) */
    static constexpr int BC = DMAX > 64 ? 16 : 32;
    /* shared row stride (floats): +4 keeps the 16-byte cp.async alignment
     * and puts the 32 lanes of every fragment read on 32 distinct banks */
    static constexpr int LDS = DMAX + 4;
    static constexpr int KD = DMAX / 8; /* 8-wide steps over the head dimension */
    static constexpr int NC = BC / 8;   /* 8-wide steps over a chunk */
    static constexpr int STAGE = BC * LDS;
};

/* the shapes and strides every kernel takes */
struct tc_shape {
    int d, tq, tk, q0, k0;
    float scale;
    tsr__attn_strides st;
    int heads; /* query heads per sequence: blockIdx.y = sequence * heads + head */
    int kvg;   /* query heads per K/V head (kernels/attention.h: GQA) */
    int vec;   /* every staged row 16-byte aligned: cp.async */
};

/* where head b (blockIdx.y) of an operand starts: its sequence's start
 * (sequences back to back, t positions of stride ld each) plus its head's */
static __device__ __forceinline__ long long tc_head(const tc_shape &sp, int b, int t, int ld,
                                                    long long hs)
{
    return (long long)(b / sp.heads) * t * ld + (long long)(b % sp.heads) * hs;
}

/* where the K/V head of query head b (blockIdx.y of a query-side kernel)
 * starts in k, v: K/V head (b % heads) / kvg of b's sequence */
static __device__ __forceinline__ long long tc_kv_of_query(const tc_shape &sp, int b)
{
    return (long long)(b / sp.heads) * sp.tk * sp.st.ldk +
           (long long)(b % sp.heads / sp.kvg) * sp.st.hsk;
}

/* keys of a (tk) tile that query i sees: 0..tk */
static __device__ __forceinline__ int tc_visible(const tc_shape &sp, int i)
{
    long long n = (long long)sp.q0 + i - sp.k0 + 1;
    return n < 0 ? 0 : (n > sp.tk ? sp.tk : (int)n);
}

/* The query rows of block (x, b) of a query-side kernel and of this warp:
 * block rows [ib, ib + BR) (the heaviest block first), the warp's from iw;
 * the keys any query of the block, of the warp, sees (nblock, nwarp), and
 * the keys the warp's first query sees (nfirst: chunks below it need no
 * mask). */
struct tc_qrows {
    int ib, iw, nblock, nwarp, nfirst;
};

template <int DMAX>
static __device__ __forceinline__ tc_qrows tc_query_rows(const tc_shape &sp, int warp)
{
    constexpr int BR = tc_geo<DMAX>::BR;
    tc_qrows q;
    q.ib = (gridDim.x - 1 - blockIdx.x) * BR;
    q.iw = q.ib + 16 * warp;
    q.nblock = tc_visible(sp, min(sp.tq, q.ib + BR) - 1);
    q.nwarp = q.iw < sp.tq ? tc_visible(sp, min(sp.tq, q.iw + 16) - 1) : 0;
    q.nfirst = q.iw < sp.tq ? tc_visible(sp, q.iw) : 0;
    return q;
}

/* Issues the copy of chunk rows [r0, r0 + BC) of x (row stride ld, n rows,
 * d columns) into the (BC, DMAX) shared tile sh (stride LDS), zeros past n
 * and d: cp.async where vec, else plain loads.  Every thread calls it. */
template <int DMAX>
static __device__ __forceinline__ void tc_issue(float *sh, const float *x, int ld, int n, int d,
                                                int r0, int vec)
{
    typedef tc_geo<DMAX> G;
    constexpr int G4 = DMAX / 4; /* 16-byte granules per row */
    for (int e = threadIdx.x; e < G::BC * G4; e += G::THREADS) {
        int rr = e / G4, c = (e % G4) * 4, r = r0 + rr;
        float *dst = &sh[rr * G::LDS + c];
        if (vec) {
            bool in = r < n && c < d; /* d % 4 == 0: a granule is all in or all out */
            tsr_cp_async16(dst, in ? x + (size_t)r * ld + c : x, in ? 16 : 0);
        } else {
#pragma unroll
            for (int u = 0; u < 4; u++)
                dst[u] = (r < n && c + u < d) ? x[(size_t)r * ld + c + u] : 0.0f;
        }
    }
}

/* The double buffer's step: on return chunk ch (stage ch & 1) is in shared
 * memory for every thread, and the copies of chunk ch + 1 (into the other
 * stage: issue(stage, chunk), which commits its group) are in flight.
 * Every thread calls it. */
template <class Issue>
static __device__ __forceinline__ void tc_next_chunk(int ch, int nchunks, Issue issue)
{
    if (ch + 1 < nchunks) {
        issue((ch + 1) & 1, ch + 1);
        tsr_cp_async_wait<1>();
    } else {
        tsr_cp_async_wait<0>();
    }
    __syncthreads();
}

/* The operand precision: TF32 (m16n8k8, KS = 8 wide k-steps) or bf16
 * (m16n8k16, KS = 16). */
template <bool BF16> struct tc_prec {
    static constexpr int KS = BF16 ? 16 : 8;
};

/* x rounded to the operand precision, as a float */
template <bool BF16> static __device__ __forceinline__ float tc_round(float x)
{
    return BF16 ? tsr_round_bf16(x) : __uint_as_float(tsr_tf32(x));
}

template <bool BF16>
static __device__ __forceinline__ void tc_mma(float d[4], const uint32_t a[4], const uint32_t b[2])
{
    if (BF16)
        tsr_mma_bf16(d, a, b);
    else
        tsr_mma_tf32(d, a, b);
}

/* element (r, c) of x (stride ld, n rows, d columns) times mul; 0 outside */
static __device__ __forceinline__ float tc_at(const float *x, int ld, int n, int d, int r, int c,
                                              float mul)
{
    return r < n && c < d ? x[(size_t)r * ld + c] * mul : 0.0f;
}

/* This warp's 16 rows [r0, r0 + 16) of x (stride ld, n rows, d columns),
 * times mul, as DMAX / KS A fragments (16, KS), read from global memory once
 * (register layouts: kernels/cuda/ptx.cuh). */
template <int DMAX, bool BF16>
static __device__ __forceinline__ void tc_rows_a(uint32_t a[][4], const float *x, int ld, int n,
                                                 int d, int r0, float mul)
{
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int kk = 0; kk < DMAX / tc_prec<BF16>::KS; kk++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int r = r0 + g + 8 * (e & 1);
            if (BF16) {
                int c = 16 * kk + 2 * t + 8 * (e >> 1);
                a[kk][e] = tsr_bf16x2(tc_at(x, ld, n, d, r, c, mul),
                                      tc_at(x, ld, n, d, r, c + 1, mul));
            } else {
                int c = 8 * kk + t + 4 * (e >> 1);
                a[kk][e] = tsr_tf32(tc_at(x, ld, n, d, r, c, mul));
            }
        }
}

/* acc (16, 8 NT) += A (16, DMAX) X^T for this warp, X a (8 NT, DMAX) shared
 * tile (stride LDS) read as B (k = column of X, n = row of X): the score
 * products S = Q K^T, dP = dO V^T, S^T = K Q^T, dP^T = V dO^T. */
template <int DMAX, int NT, bool BF16>
static __device__ __forceinline__ void tc_product_xt(float acc[][4], const uint32_t a[][4],
                                                     const float *x)
{
    constexpr int LDS = tc_geo<DMAX>::LDS, KS = tc_prec<BF16>::KS;
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int kk = 0; kk < DMAX / KS; kk++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            uint32_t b[2];
            if (BF16) { /* B(2t..2t+1, g), B(2t+8..2t+9, g): X row g, columns in pairs */
                const float *row = &x[(8 * nt + g) * LDS + 16 * kk + 2 * t];
                b[0] = tsr_bf16x2(row[0], row[1]);
                b[1] = tsr_bf16x2(row[8], row[9]);
            } else { /* B(t, g), B(t+4, g) */
                const float *row = &x[(8 * nt + g) * LDS + 8 * kk + t];
                b[0] = tsr_tf32(row[0]);
                b[1] = tsr_tf32(row[4]);
            }
            tc_mma<BF16>(acc[nt], a[kk], b);
        }
}

/* acc (16, DMAX) += P (16, BC) Y for this warp, P the score-shaped
 * accumulators p[NC][4] (already rounded to the operand precision:
 * element e of 8-key block kk is row g + 8 (e / 2), key 8 kk + 2t + e % 2),
 * Y a (BC, DMAX) shared tile.  bf16: P's layout is A's (keys 2t, 2t+1 of
 * blocks 2kk and 2kk + 1 are A's columns 2t.., 2t+8..).  TF32: A's column t
 * is taken to be key 2t and t + 4 key 2t + 1 (the product sums over keys),
 * and Y's rows are read in that order. */
template <int DMAX, bool BF16>
static __device__ __forceinline__ void tc_product_py(float acc[][4], const float p[][4],
                                                     const float *y)
{
    typedef tc_geo<DMAX> G;
    constexpr int LDS = G::LDS, KS = tc_prec<BF16>::KS;
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int kk = 0; kk < G::BC / KS; kk++) {
        uint32_t a[4];
        const float *r0 = &y[(KS * kk + 2 * t) * LDS + g];
        if (BF16) {
            a[0] = tsr_bf16x2(p[2 * kk][0], p[2 * kk][1]);
            a[1] = tsr_bf16x2(p[2 * kk][2], p[2 * kk][3]);
            a[2] = tsr_bf16x2(p[2 * kk + 1][0], p[2 * kk + 1][1]);
            a[3] = tsr_bf16x2(p[2 * kk + 1][2], p[2 * kk + 1][3]);
        } else {
            a[0] = __float_as_uint(p[kk][0]);
            a[1] = __float_as_uint(p[kk][2]);
            a[2] = __float_as_uint(p[kk][1]);
            a[3] = __float_as_uint(p[kk][3]);
        }
#pragma unroll
        for (int nt = 0; nt < G::KD; nt++) {
            uint32_t b[2];
            if (BF16) { /* B(2t..2t+1, g), B(2t+8..2t+9, g): Y rows in pairs, column g */
                b[0] = tsr_bf16x2(r0[8 * nt], r0[LDS + 8 * nt]);
                b[1] = tsr_bf16x2(r0[8 * LDS + 8 * nt], r0[9 * LDS + 8 * nt]);
            } else { /* keys 2t, 2t + 1 */
                b[0] = tsr_tf32(r0[8 * nt]);
                b[1] = tsr_tf32(r0[LDS + 8 * nt]);
            }
            tc_mma<BF16>(acc[nt], a, b);
        }
    }
}

/* x (rows r0 + g + 8h, columns 8 nt + 2t + u, stride ld, n rows, d columns)
 * += acc: this warp's (16, DMAX) result added to global memory */
template <int DMAX>
static __device__ __forceinline__ void tc_add_acc(float *x, int ld, int n, int d, int r0,
                                                  const float acc[][4])
{
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int nt = 0; nt < DMAX / 8; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int r = r0 + g + 8 * (e >> 1), c = 8 * nt + 2 * t + (e & 1);
            if (r < n && c < d)
                x[(size_t)r * ld + c] += acc[nt][e];
        }
}

/* Forward: q (strided), k, v (strided), ms: (2, tq, nb), acc: (d, tq, nb).
 * Block (x, b): queries [ib, ib + 64) of head b, warp w queries iw + [0, 16).
 * Per key chunk of 32: S (16, 32) = Qs K^T (Qs = log2(e) scale q), the
 * online softmax of each row in the accumulators (m in the log2 domain, l
 * a per-lane partial sum until the end), then O (16, DMAX) += P V. */
template <int DMAX, bool BF16>
__global__ void __launch_bounds__(tc_geo<DMAX>::THREADS)
    k_attn_fwd_tc(tc_shape sp, const float *q, const float *k, const float *v, float *ms,
                  float *acc)
{
    typedef tc_geo<DMAX> G;
    constexpr int BC = G::BC, KD = G::KD, NC = G::NC, KA = DMAX / tc_prec<BF16>::KS;
    __shared__ __align__(16) float sh[2][2][G::STAGE]; /* [stage][k, v] */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int b = blockIdx.y, d = sp.d;
    const tc_qrows rows = tc_query_rows<DMAX>(sp, warp);
    if (rows.nblock == 0)
        return; /* block-uniform: no query of the block sees a key */
    const long long kofs = tc_kv_of_query(sp, b);
    const float *qb = q + tc_head(sp, b, sp.tq, sp.st.ldq, sp.st.hsq), *kb = k + kofs,
                *vb = v + kofs;
    const int nchunks = (rows.nblock + BC - 1) / BC;
    /* stage s <- key chunk ch: k, v rows */
    auto issue = [&](int s, int ch) {
        tc_issue<DMAX>(sh[s][0], kb, sp.st.ldk, sp.tk, d, ch * BC, sp.vec);
        tc_issue<DMAX>(sh[s][1], vb, sp.st.ldk, sp.tk, d, ch * BC, sp.vec);
        tsr_cp_async_commit();
    };
    issue(0, 0);

    uint32_t qa[KA][4];
    tc_rows_a<DMAX, BF16>(qa, qb, sp.st.ldq, sp.tq, d, rows.iw, sp.scale * TC_LOG2E);

    /* rows g (h = 0) and g + 8 (h = 1): state and visible keys */
    float m2[2], l[2], o[KD][4];
    int nvis[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int i = rows.iw + g + 8 * h;
        bool active = i < sp.tq;
        size_t row = (size_t)b * sp.tq + i;
        m2[h] = active ? ms[2 * row] * TC_LOG2E : -INFINITY;
        l[h] = active && t == 0 ? ms[2 * row + 1] : 0.0f;
        nvis[h] = active ? tc_visible(sp, i) : 0;
#pragma unroll
        for (int nt = 0; nt < KD; nt++)
#pragma unroll
            for (int u = 0; u < 2; u++) {
                int c = 8 * nt + 2 * t + u;
                o[nt][2 * h + u] = active && c < d ? acc[row * d + c] : 0.0f;
            }
    }

    for (int ch = 0; ch < nchunks; ch++) {
        const int s = ch & 1, j0 = ch * BC;
        tc_next_chunk(ch, nchunks, issue);
        if (j0 < rows.nwarp) { /* warp-uniform: some query of the warp sees the chunk */
            /* S (16, BC) = Qs K^T */
            float sc[NC][4] = {};
            tc_product_xt<DMAX, NC, BF16>(sc, qa, sh[s][0]);
            if (j0 + BC > rows.nfirst) /* the chunk crosses some row's last key */
#pragma unroll
                for (int nt = 0; nt < NC; nt++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        if (j0 + 8 * nt + 2 * t + (e & 1) >= nvis[e >> 1])
                            sc[nt][e] = -INFINITY;
            /* online softmax per row: m' = max(m, max_j s_j), p_j = round(2^(s_j - m'))
             * (to the operand precision), l' = l 2^(m - m') + sum_j p_j, o' = o 2^(m - m') */
            float p[NC][4];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float mx = -INFINITY;
#pragma unroll
                for (int nt = 0; nt < NC; nt++)
                    mx = fmaxf(mx, fmaxf(sc[nt][2 * h], sc[nt][2 * h + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float mnew = fmaxf(m2[h], mx);
                const float base = mnew == -INFINITY ? 0.0f : mnew; /* row sees nothing yet */
                const float corr = exp2f(m2[h] - base);
                m2[h] = mnew;
                float sum = 0.0f;
#pragma unroll
                for (int nt = 0; nt < NC; nt++)
#pragma unroll
                    for (int u = 0; u < 2; u++) {
                        float pr = tc_round<BF16>(exp2f(sc[nt][2 * h + u] - base));
                        p[nt][2 * h + u] = pr;
                        sum += pr;
                    }
                l[h] = l[h] * corr + sum;
#pragma unroll
                for (int nt = 0; nt < KD; nt++) {
                    o[nt][2 * h] *= corr;
                    o[nt][2 * h + 1] *= corr;
                }
            }
            /* O (16, DMAX) += P (16, BC) V (BC, DMAX) */
            tc_product_py<DMAX, BF16>(o, p, sh[s][1]);
        }
        __syncthreads(); /* the stage is read before the next issue overwrites it */
    }

#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
        int i = rows.iw + g + 8 * h;
        if (i >= sp.tq)
            continue;
        size_t row = (size_t)b * sp.tq + i;
#pragma unroll
        for (int nt = 0; nt < KD; nt++)
#pragma unroll
            for (int u = 0; u < 2; u++) {
                int c = 8 * nt + 2 * t + u;
                if (c < d)
                    acc[row * d + c] = o[nt][2 * h + u];
            }
        if (t == 0) {
            ms[2 * row] = m2[h] * TC_LN2;
            ms[2 * row + 1] = l[h];
        }
    }
}

/* Backward, query side: dq += scale sum_j ds_ij k_j.
 * Block (x, b): queries [ib, ib + 64), warp w queries iw + [0, 16).  Per key
 * chunk of 32: S = Qs K^T and dP = dO V^T (16, 32); per element
 * p = 2^(s - lse2) (0 where masked or lse = -inf), ds = p (dp - D) scale;
 * dQ (16, DMAX) += dS K, in registers until the end. */
template <int DMAX, bool BF16>
__global__ void __launch_bounds__(tc_geo<DMAX>::THREADS)
    k_attn_bwd_q_tc(tc_shape sp, const float *q, const float *k, const float *v,
                    const float *dout, const float *lse, const float *D, float *dq)
{
    typedef tc_geo<DMAX> G;
    constexpr int BC = G::BC, KD = G::KD, NC = G::NC, KA = DMAX / tc_prec<BF16>::KS;
    __shared__ __align__(16) float sh[2][2][G::STAGE]; /* [stage][k, v] */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int b = blockIdx.y, d = sp.d;
    const tc_qrows rows = tc_query_rows<DMAX>(sp, warp);
    if (rows.nblock == 0)
        return;
    const long long qofs = tc_head(sp, b, sp.tq, sp.st.ldq, sp.st.hsq);
    const long long kofs = tc_kv_of_query(sp, b);
    const float *qb = q + qofs, *dob = dout + tc_head(sp, b, sp.tq, sp.st.ldo, sp.st.hso);
    const float *kb = k + kofs, *vb = v + kofs;
    const int nchunks = (rows.nblock + BC - 1) / BC;
    /* stage s <- key chunk ch: k, v rows */
    auto issue = [&](int s, int ch) {
        tc_issue<DMAX>(sh[s][0], kb, sp.st.ldk, sp.tk, d, ch * BC, sp.vec);
        tc_issue<DMAX>(sh[s][1], vb, sp.st.ldk, sp.tk, d, ch * BC, sp.vec);
        tsr_cp_async_commit();
    };
    issue(0, 0);

    uint32_t qa[KA][4], da[KA][4];
    tc_rows_a<DMAX, BF16>(qa, qb, sp.st.ldq, sp.tq, d, rows.iw, sp.scale * TC_LOG2E);
    tc_rows_a<DMAX, BF16>(da, dob, sp.st.ldo, sp.tq, d, rows.iw, 1.0f);
    float lse2[2], Dr[2], dqa[KD][4] = {};
    int nvis[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int i = rows.iw + g + 8 * h;
        bool active = i < sp.tq;
        size_t row = (size_t)b * sp.tq + i;
        float li = active ? lse[row] : -INFINITY;
        lse2[h] = li * TC_LOG2E;
        Dr[h] = active ? D[row] : 0.0f;
        nvis[h] = li != -INFINITY ? tc_visible(sp, i) : 0;
    }

    for (int ch = 0; ch < nchunks; ch++) {
        const int s = ch & 1, j0 = ch * BC;
        tc_next_chunk(ch, nchunks, issue);
        if (j0 < rows.nwarp) {
            float sc[NC][4] = {}, dp[NC][4] = {};
            tc_product_xt<DMAX, NC, BF16>(sc, qa, sh[s][0]);
            tc_product_xt<DMAX, NC, BF16>(dp, da, sh[s][1]);
            float ds[NC][4];
#pragma unroll
            for (int nt = 0; nt < NC; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int h = e >> 1, j = j0 + 8 * nt + 2 * t + (e & 1);
                    float p = j < nvis[h] ? exp2f(sc[nt][e] - lse2[h]) : 0.0f;
                    ds[nt][e] = tc_round<BF16>(p * (dp[nt][e] - Dr[h]) * sp.scale);
                }
            /* dQ (16, DMAX) += dS (16, BC) K (BC, DMAX) */
            tc_product_py<DMAX, BF16>(dqa, ds, sh[s][0]);
        }
        __syncthreads();
    }
    tc_add_acc<DMAX>(dq + qofs, sp.st.ldq, sp.tq, d, rows.iw, dqa);
}

/* Backward, key side: dk += scale sum_i ds_ij q_i, dv += sum_i p_ij dout_i.
 * Block (x, hb): keys [jb, jb + 64) of K/V head hb (sequence hb / (heads /
 * kvg)), warp w keys jw + [0, 16); the kvg query heads of the K/V head are
 * streamed one after the other, in order, into the same registers (GQA: dk
 * and dv are the sum over the group, in a fixed order, added once).  Per query
 * chunk of 32 (from the first query that sees the block's first key): the
 * transposed S^T = Ks Q^T and dP^T = V dO^T (16, 32) (Ks = log2(e) scale k);
 * per element p^T and ds^T; dV += P^T dO and dK += dS^T Q, in registers
 * until the end. */
template <int DMAX, bool BF16>
__global__ void __launch_bounds__(tc_geo<DMAX>::THREADS)
    k_attn_bwd_kv_tc(tc_shape sp, const float *q, const float *k, const float *v,
                     const float *dout, const float *lse, const float *D, float *dk, float *dv)
{
    typedef tc_geo<DMAX> G;
    constexpr int BR = G::BR, BC = G::BC, KD = G::KD, NC = G::NC;
    constexpr int KA = DMAX / tc_prec<BF16>::KS;
    __shared__ __align__(16) float sh[2][2][G::STAGE]; /* [stage][q, dout] */
    __shared__ float ls2[2][BC], Ds[2][BC];            /* [stage] lse (log2 domain), D */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int hb = blockIdx.y, d = sp.d;
    const int hkv = sp.heads / sp.kvg; /* K/V heads per sequence */
    const int jb = blockIdx.x * BR; /* the first keys are seen by the most queries */
    const int jw = jb + 16 * warp;
    /* query i sees key j iff q0 + i >= k0 + j: the first query that sees the
     * block's (the warp's) first key */
    const long long ist = (long long)sp.k0 + jb - sp.q0, iwst = (long long)sp.k0 + jw - sp.q0;
    const int istart = ist < 0 ? 0 : (ist > sp.tq ? sp.tq : (int)ist);
    const int iwstart = iwst < 0 ? 0 : (iwst > sp.tq ? sp.tq : (int)iwst);
    if (istart >= sp.tq)
        return; /* block-uniform: no query sees a key of the block */
    const long long kofs =
        (long long)(hb / hkv) * sp.tk * sp.st.ldk + (long long)(hb % hkv) * sp.st.hsk;
    const float *kb = k + kofs, *vb = v + kofs;
    /* the query head being streamed: b = sequence * heads + (hb % hkv) * kvg + r */
    const int bfirst = hb / hkv * sp.heads + hb % hkv * sp.kvg;
    const float *qb, *dob, *lb, *Db;
    auto head = [&](int b) {
        qb = q + tc_head(sp, b, sp.tq, sp.st.ldq, sp.st.hsq);
        dob = dout + tc_head(sp, b, sp.tq, sp.st.ldo, sp.st.hso);
        lb = lse + (size_t)b * sp.tq, Db = D + (size_t)b * sp.tq;
    };
    head(bfirst);
    const int nchunks = (sp.tq - istart + BC - 1) / BC;

    /* stage s <- query chunk ch, [i0, i0 + BC) from istart: q, dout rows, lse, D */
    auto issue = [&](int s, int ch) {
        const int i0 = istart + ch * BC;
        tc_issue<DMAX>(sh[s][0], qb, sp.st.ldq, sp.tq, d, i0, sp.vec);
        tc_issue<DMAX>(sh[s][1], dob, sp.st.ldo, sp.tq, d, i0, sp.vec);
        for (int e = threadIdx.x; e < BC; e += G::THREADS) {
            int ii = i0 + e;
            ls2[s][e] = ii < sp.tq ? lb[ii] * TC_LOG2E : -INFINITY;
            Ds[s][e] = ii < sp.tq ? Db[ii] : 0.0f;
        }
        tsr_cp_async_commit();
    };
    issue(0, 0);

    uint32_t ka[KA][4], va[KA][4];
    tc_rows_a<DMAX, BF16>(ka, kb, sp.st.ldk, sp.tk, d, jw, sp.scale * TC_LOG2E);
    tc_rows_a<DMAX, BF16>(va, vb, sp.st.ldk, sp.tk, d, jw, 1.0f);
    float dka[KD][4] = {}, dva[KD][4] = {};

    for (int r = 0; r < sp.kvg; r++) { /* the K/V head's query heads, in order */
        if (r > 0) { /* the previous head's last chunk is consumed (__syncthreads) */
            head(bfirst + r);
            issue(0, 0);
        }
        for (int ch = 0; ch < nchunks; ch++) {
            const int s = ch & 1, i0 = istart + ch * BC;
            tc_next_chunk(ch, nchunks, issue);
            if (jw < sp.tk && i0 + BC > iwstart) { /* warp-uniform */
                float sc[NC][4] = {}, dp[NC][4] = {};
                tc_product_xt<DMAX, NC, BF16>(sc, ka, sh[s][0]);
                tc_product_xt<DMAX, NC, BF16>(dp, va, sh[s][1]);
                float pt[NC][4], dst[NC][4];
#pragma unroll
                for (int nt = 0; nt < NC; nt++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        int ii = 8 * nt + 2 * t + (e & 1), j = jw + g + 8 * (e >> 1);
                        bool vis = j < sp.tk &&
                                   (long long)sp.q0 + i0 + ii >= (long long)sp.k0 + j &&
                                   ls2[s][ii] != -INFINITY; /* also false past tq */
                        float p = vis ? exp2f(sc[nt][e] - ls2[s][ii]) : 0.0f;
                        pt[nt][e] = tc_round<BF16>(p);
                        dst[nt][e] = tc_round<BF16>(p * (dp[nt][e] - Ds[s][ii]) * sp.scale);
                    }
                /* dV (16, DMAX) += P^T (16, BC) dO (BC, DMAX), dK += dS^T Q */
                tc_product_py<DMAX, BF16>(dva, pt, sh[s][1]);
                tc_product_py<DMAX, BF16>(dka, dst, sh[s][0]);
            }
            __syncthreads();
        }
    }
    tc_add_acc<DMAX>(dk + kofs, sp.st.ldk, sp.tk, d, jw, dka);
    tc_add_acc<DMAX>(dv + kofs, sp.st.ldk, sp.tk, d, jw, dva);
}

bool tsr__cuda_attn_tc_takes(int d)
{
    return d >= 1 && d <= TSR_ATTN_TC_MAX_D;
}

/* the kernels' shape: cp.async when every staged row is 16-byte aligned */
static tc_shape tc_shape_of(int d, int tq, int tk, int nb, int kvg, int q0, int k0, float scale,
                            tsr__attn_strides st, const float *q, const float *k,
                            const float *v, const float *dout)
{
    bool vec = d % 4 == 0 && st.ldq % 4 == 0 && st.ldk % 4 == 0 && st.hsq % 4 == 0 &&
               st.hsk % 4 == 0 && tsr_aligned16(q) && tsr_aligned16(k) && tsr_aligned16(v) &&
               (!dout || (st.ldo % 4 == 0 && st.hso % 4 == 0 && tsr_aligned16(dout)));
    return tc_shape{d, tq, tk, q0, k0, scale, st, nb, kvg, vec ? 1 : 0};
}

template <int DMAX, bool BF16>
static int launch_fwd_tc(cudaStream_t s, int nb, tc_shape sp, const float *q, const float *k,
                         const float *v, float *ms, float *acc)
{
    typedef tc_geo<DMAX> G;
    dim3 grid((sp.tq + G::BR - 1) / G::BR, nb);
    TSR_LAUNCH((k_attn_fwd_tc<DMAX, BF16>), grid, G::THREADS, 0, s, sp, q, k, v, ms, acc);
    return tsr_cuda_launched_t(BF16 ? "k_attn_fwd_tc(bf16)" : "k_attn_fwd_tc", DMAX);
}

int tsr__cuda_attn_fwd_tc(cudaStream_t s, int bf16, int d, int tq, int tk, int nb, int kv_group,
                          int nseq, int q0, int k0, float scale, tsr__attn_strides st,
                          const float *q, const float *k, const float *v, float *ms, float *acc)
{
    tc_shape sp = tc_shape_of(d, tq, tk, nb, kv_group, q0, k0, scale, st, q, k, v, NULL);
    nb *= nseq; /* grid rows: every head of every sequence */
    if (d <= 32)
        return bf16 ? launch_fwd_tc<32, true>(s, nb, sp, q, k, v, ms, acc)
                    : launch_fwd_tc<32, false>(s, nb, sp, q, k, v, ms, acc);
    if (d <= 64)
        return bf16 ? launch_fwd_tc<64, true>(s, nb, sp, q, k, v, ms, acc)
                    : launch_fwd_tc<64, false>(s, nb, sp, q, k, v, ms, acc);
    return bf16 ? launch_fwd_tc<128, true>(s, nb, sp, q, k, v, ms, acc)
                : launch_fwd_tc<128, false>(s, nb, sp, q, k, v, ms, acc);
}

template <int DMAX, bool BF16>
static int launch_bwd_tc(cudaStream_t s, int nb, tc_shape sp, const float *q, const float *k,
                         const float *v, const float *dout, const float *lse, const float *D,
                         float *dq, float *dk, float *dv)
{
    typedef tc_geo<DMAX> G;
    /* dk/dv: one block row per K/V head; dq: one per query head */
    dim3 gkv((sp.tk + G::BR - 1) / G::BR, nb / sp.kvg), gq((sp.tq + G::BR - 1) / G::BR, nb);
    TSR_LAUNCH((k_attn_bwd_kv_tc<DMAX, BF16>), gkv, G::THREADS, 0, s, sp, q, k, v, dout, lse, D,
               dk, dv);
    int st = tsr_cuda_launched_t(BF16 ? "k_attn_bwd_kv_tc(bf16)" : "k_attn_bwd_kv_tc", DMAX);
    if (st)
        return st;
    TSR_LAUNCH((k_attn_bwd_q_tc<DMAX, BF16>), gq, G::THREADS, 0, s, sp, q, k, v, dout, lse, D, dq);
    return tsr_cuda_launched_t(BF16 ? "k_attn_bwd_q_tc(bf16)" : "k_attn_bwd_q_tc", DMAX);
}

int tsr__cuda_attn_bwd_tc(cudaStream_t s, int bf16, int d, int tq, int tk, int nb, int kv_group,
                          int nseq, int q0, int k0, float scale, tsr__attn_strides st,
                          const float *q, const float *k, const float *v, const float *dout,
                          const float *lse, const float *D, float *dq, float *dk, float *dv)
{
    tc_shape sp = tc_shape_of(d, tq, tk, nb, kv_group, q0, k0, scale, st, q, k, v, dout);
    nb *= nseq; /* grid rows: every head of every sequence */
    if (d <= 32)
        return bf16 ? launch_bwd_tc<32, true>(s, nb, sp, q, k, v, dout, lse, D, dq, dk, dv)
                    : launch_bwd_tc<32, false>(s, nb, sp, q, k, v, dout, lse, D, dq, dk, dv);
    if (d <= 64)
        return bf16 ? launch_bwd_tc<64, true>(s, nb, sp, q, k, v, dout, lse, D, dq, dk, dv)
                    : launch_bwd_tc<64, false>(s, nb, sp, q, k, v, dout, lse, D, dq, dk, dv);
    return bf16 ? launch_bwd_tc<128, true>(s, nb, sp, q, k, v, dout, lse, D, dq, dk, dv)
                : launch_bwd_tc<128, false>(s, nb, sp, q, k, v, dout, lse, D, dq, dk, dv);
}
