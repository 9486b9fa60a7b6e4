/* kernels/cuda/attention_tc.cu — the TF32 tensor-core versions of the CUDA
 * attention forward and backward (kernels/attention.h, prec = TSR_ATTN_TF32)
 * for head dimensions d <= 64; kernels/cuda/attention.cu dispatches here and
 * keeps the FP32 CUDA-core kernels as the strict path and the reference.
 *
 * Mechanism: CUDA WMMA (nvcuda::wmma, m16n16k8, precision::tf32), fragments
 * loaded from shared memory, inputs rounded with __float_to_tf32 when they are
 * staged.  Our own kernels rather than cuDNN (not a dependency): the same
 * source runs under the project's CUDA emulation (cuda_emu/include/mma.h) and
 * in the deterministic mode.  The element layout of a fragment is opaque, so
 * all per-row work (masking, online softmax, exp, the dS of the backward) is
 * done by ordinary threads on tiles stored to shared memory
 * (store_matrix_sync), and P / dS are loaded back as matrix_a fragments.
 * Accumulation and softmax are FP32; only the products' operands are TF32
 * (10 mantissa bits): about 1e-3 relative error per score, see
 * tests/kernels/test_cuda_attention.c for the derived tolerance.
 *
 * Geometry (tc_geo): a block is 4 warps, each warp owns 16 rows (queries in
 * the forward and the dq kernel, keys in the dk/dv kernel), 64 rows per block,
 * and streams the other side in chunks of BC = 32 rows through shared memory.
 * For the GPT-2 call (tq = tk = 1024, the nb = 12 heads of one sequence)
 * that is 16 x 12 = 192 blocks of 128 threads, while the four warps share
 * each staged key (query) chunk.  The causal work per block is
 * uneven (the last query block sees every key), so blocks are numbered
 * heaviest first.  Head dimensions are padded with zeros to DMAX = 32 or 64.
 * Everything fits the 48 KiB of static shared memory (no opt-in attribute,
 * which the emulation does not model); d = 65..256 needs more shared memory
 * or smaller blocks and runs the FP32 kernels (attention.cu).
 *
 * Operands are strided views (kernels/attention.h: row r of head b at
 * x + b*hs + r*ld): tc_stage reads rows of ld and tc_add_rows writes them,
 * so q, k, v come straight from GPT-2's fused qkv tile (ld = C or 3C,
 * hs = d) and dq, dk, dv go straight into its gradient; only d elements
 * per row are touched.
 *
 * Backward: two kernels as in attention.cu (dk/dv over keys, dq over
 * queries), both recompute p from lse, no atomics, deterministic; results are
 * ADDED to dq, dk, dv.
 *
 * Must never: use float atomics, depend on a fragment's element layout (only
 * uniform operations on x[]), or run without the caller asking for TF32.
 */
#include <math.h>
#include <mma.h>

#include "kernels/attention.h"
#include "kernels/cuda/attention_tc.cuh"
#include "kernels/cuda/common.cuh"

using namespace nvcuda;

/* a: (16, 8) row-major from shared memory; b: (8, 16), row-major or
 * column-major (a transposed row-major tile); accumulator: (16, 16) fp32 */
typedef wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> frag_a;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> frag_b_row;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> frag_b_col;
typedef wmma::fragment<wmma::accumulator, 16, 16, 8, float> frag_acc;

template <int DMAX> struct tc_geo {
    static constexpr int WARPS = 4;
    static constexpr int THREADS = 32 * WARPS;
    static constexpr int BR = 16 * WARPS; /* rows owned per block, 16 per warp */
    static constexpr int BC = 32;         /* streamed rows per chunk */
    /* Shared row strides (floats): padded by 4 against bank conflicts, a
     * multiple of 4 as WMMA requires; 8-row steps stay 32-byte aligned. */
    static constexpr int LDD = DMAX + 4; /* a (rows, DMAX) tile */
    static constexpr int LDC = BC + 4;   /* a (rows, BC) tile */
    static constexpr int KD = DMAX / 8;  /* k-steps over the head dimension */
    static constexpr int ND = DMAX / 16; /* 16-column tiles over the head dimension */
    static constexpr int KC = BC / 8;    /* k-steps over a chunk */
    static constexpr int NC = BC / 16;   /* 16-column tiles over a chunk */
    /* the (BR, DMAX) staging of a block's own rows reuses the two chunk tiles */
    static_assert(BR == 2 * BC, "own rows are staged in the two chunk tiles");
};

/* The backward's two score products for this warp's 16 rows over one
 * streamed chunk: S (16, BC) = A X^T and dP (16, BC) = B Y^T, with A, B
 * the warp's rows as matrix_a fragments over the head dimension and X, Y
 * the chunk's (BC, DMAX) rows in shared memory (stride LDD); stored
 * row-major at the warp's rows of sb and pb (stride LDC). */
template <int DMAX>
static __device__ __forceinline__ void tc_score_pair(const frag_a *a, const frag_a *b,
                                                     const float *x, const float *y,
                                                     float *sb, float *pb, int warp)
{
    typedef tc_geo<DMAX> G;
    constexpr int LDD = G::LDD, LDC = G::LDC;
    frag_acc s[G::NC], dp[G::NC];
#pragma unroll
    for (int nt = 0; nt < G::NC; nt++) {
        wmma::fill_fragment(s[nt], 0.0f);
        wmma::fill_fragment(dp[nt], 0.0f);
    }
#pragma unroll
    for (int kk = 0; kk < G::KD; kk++)
#pragma unroll
        for (int nt = 0; nt < G::NC; nt++) {
            frag_b_col xf, yf;
            wmma::load_matrix_sync(xf, &x[16 * nt * LDD + 8 * kk], LDD);
            wmma::mma_sync(s[nt], a[kk], xf, s[nt]);
            wmma::load_matrix_sync(yf, &y[16 * nt * LDD + 8 * kk], LDD);
            wmma::mma_sync(dp[nt], b[kk], yf, dp[nt]);
        }
#pragma unroll
    for (int nt = 0; nt < G::NC; nt++) {
        wmma::store_matrix_sync(&sb[16 * warp * LDC + 16 * nt], s[nt], LDC, wmma::mem_row_major);
        wmma::store_matrix_sync(&pb[16 * warp * LDC + 16 * nt], dp[nt], LDC, wmma::mem_row_major);
    }
}

/* acc (16, DMAX) += A (16, BC) B (BC, DMAX) for this warp: A its 16 rows of
 * a (BR, BC) shared tile (stride LDC), B a (BC, DMAX) shared chunk (stride
 * LDD), both already TF32. */
template <int DMAX>
static __device__ __forceinline__ void tc_chunk_product(frag_acc *acc, const float *a,
                                                        const float *b, int warp)
{
    typedef tc_geo<DMAX> G;
    constexpr int LDD = G::LDD, LDC = G::LDC;
#pragma unroll
    for (int kk = 0; kk < G::KC; kk++) {
        frag_a af;
        wmma::load_matrix_sync(af, &a[16 * warp * LDC + 8 * kk], LDC);
#pragma unroll
        for (int nt = 0; nt < G::ND; nt++) {
            frag_b_row bf;
            wmma::load_matrix_sync(bf, &b[8 * kk * LDD + 16 * nt], LDD);
            wmma::mma_sync(acc[nt], af, bf, acc[nt]);
        }
    }
}

/* keys of a (tk) tile that query i sees: 0..tk */
static __device__ __forceinline__ int tc_visible(int tk, int q0, int k0, int i)
{
    long long n = (long long)q0 + i - k0 + 1;
    return n < 0 ? 0 : (n > tk ? tk : (int)n);
}

/* The query rows of block (x, b) of a query-side kernel and of this warp:
 * block rows [ib, ib + BR) (the heaviest block first), the warp's from iw,
 * this lane's row i (lanes 2r and 2r+1 share row r); the keys any query of
 * the block, of the warp, sees (nblock, nwarp). */
struct tc_qrows {
    int ib, iw, i, nblock, nwarp;
};

template <int DMAX>
static __device__ __forceinline__ tc_qrows tc_query_rows(int tq, int tk, int q0, int k0,
                                                         int warp, int r)
{
    constexpr int BR = tc_geo<DMAX>::BR;
    tc_qrows q;
    q.ib = (gridDim.x - 1 - blockIdx.x) * BR;
    q.iw = q.ib + 16 * warp;
    q.i = q.iw + r;
    q.nblock = tc_visible(tk, q0, k0, min(tq, q.ib + BR) - 1);
    q.nwarp = q.iw < tq ? tc_visible(tk, q0, k0, min(tq, q.iw + 16) - 1) : 0;
    return q;
}

/* sh[rr][c] (row stride LD), rr < ROWS, c < DMAX  <-  tf32(src(c, r0 + rr) * mul)
 * from one head's (d, nrows) view, row r at src + r*ld; rows past nrows and
 * columns past d are 0. */
template <int ROWS, int DMAX, int LD>
static __device__ __forceinline__ void tc_stage(float *sh, const float *src, int d, int ld,
                                                int nrows, int r0, float mul)
{
    for (int e = threadIdx.x; e < ROWS * DMAX; e += blockDim.x) {
        int rr = e / DMAX, c = e % DMAX, r = r0 + rr;
        float x = (r < nrows && c < d) ? src[(size_t)r * ld + c] * mul : 0.0f;
        sh[rr * LD + c] = wmma::__float_to_tf32(x);
    }
}

/* dst(c, r0 + rr) += sh[rr][c] for the 16 rows of a warp: one head's
 * (d, nrows) view, row r at dst + r*ld, lanes along c (coalesced) */
template <int DMAX, int LD>
static __device__ __forceinline__ void tc_add_rows(float *dst, const float *sh, int d, int ld,
                                                   int nrows, int r0, int lane)
{
    for (int e = lane; e < 16 * DMAX; e += 32) {
        int rr = e / DMAX, c = e % DMAX, r = r0 + rr;
        if (r < nrows && c < d)
            dst[(size_t)r * ld + c] += sh[rr * LD + c];
    }
}

/* This warp's 16 rows of two (d, n) views (row stride ldx, ldy), rows
 * r0 + 16 warp on, as KD matrix_a fragments each (the first scaled by mul),
 * staged one after the other through sh, the block's (BR, DMAX) staging.
 * Every thread of the block calls it (block barriers). */
template <int DMAX>
static __device__ __forceinline__ void tc_own_rows(frag_a *xa, frag_a *ya, float *sh,
                                                   const float *x, int ldx, float mul,
                                                   const float *y, int ldy, int d, int n,
                                                   int r0, int warp)
{
    typedef tc_geo<DMAX> G;
    constexpr int LDD = G::LDD;
    tc_stage<G::BR, DMAX, LDD>(sh, x, d, ldx, n, r0, mul);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < G::KD; kk++)
        wmma::load_matrix_sync(xa[kk], &sh[16 * warp * LDD + 8 * kk], LDD);
    __syncthreads();
    tc_stage<G::BR, DMAX, LDD>(sh, y, d, ldy, n, r0, 1.0f);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < G::KD; kk++)
        wmma::load_matrix_sync(ya[kk], &sh[16 * warp * LDD + 8 * kk], LDD);
}

/* Forward: q: (d, tq, nb), k, v: (d, tk, nb), all in (ld, hs)
 * (kernels/attention.h); ms: (2, tq, nb), acc: (d, tq, nb) contiguous.
 * Block (x, b): queries [ib, ib + 64) of head b, warp w queries ib + 16w + r.
 * Per key chunk of 32: S (16, 32) = Qs K^T on tensor cores (Qs = scale q),
 * the online softmax per row in shared memory (lanes 2r and 2r+1 own row r,
 * columns of their parity), then PV (16, DMAX) = P V on tensor cores, added
 * to the running acc in registers after its rescaling. */
template <int DMAX>
__global__ void __launch_bounds__(tc_geo<DMAX>::THREADS)
    k_attn_fwd_tc(int d, int tq, int tk, int q0, int k0, float scale, int ld, long long hs,
                  const float *q, const float *k, const float *v, float *ms, float *acc)
{
    typedef tc_geo<DMAX> G;
    constexpr int BR = G::BR, BC = G::BC, LDD = G::LDD, LDC = G::LDC;
    /* ks, vs: (BC, DMAX) chunk of k, v; sp: (BR, BC) scores, then p;
     * ob: (BR, DMAX) staged q at the start, then each warp's PV rows */
    __shared__ __align__(128) float sh[2 * BC * LDD + BR * LDC + BR * LDD];
    float *ks = sh, *vs = sh + BC * LDD, *sp = vs + BC * LDD, *ob = sp + BR * LDC;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int r = lane / 2, h = lane % 2; /* softmax pass: row r, columns j = h + 2t */
    const int b = blockIdx.y;
    const tc_qrows rows = tc_query_rows<DMAX>(tq, tk, q0, k0, warp, r);
    const int ib = rows.ib, i = rows.i, nblock = rows.nblock, nwarp = rows.nwarp;
    if (nblock == 0)
        return; /* block-uniform: no query of the block sees a key */
    const bool active = i < tq;
    const int nvis = active ? tc_visible(tk, q0, k0, i) : 0;
    const size_t row = (size_t)b * tq + i;
    const float *qb = q + (size_t)b * hs, *kb = k + (size_t)b * hs;
    const float *vb = v + (size_t)b * hs;

    /* this warp's (16, DMAX) scaled queries as KD a-fragments */
    tc_stage<BR, DMAX, LDD>(ob, qb, d, ld, tq, ib, scale);
    __syncthreads();
    frag_a qa[G::KD];
#pragma unroll
    for (int kk = 0; kk < G::KD; kk++)
        wmma::load_matrix_sync(qa[kk], &ob[16 * warp * LDD + 8 * kk], LDD);

    /* row r's state: (m, l) in both lanes of the pair, acc columns h + 2u */
    float m = active ? ms[2 * row] : -INFINITY, l = active ? ms[2 * row + 1] : 0.0f;
    float ar[DMAX / 2];
#pragma unroll
    for (int u = 0; u < DMAX / 2; u++) {
        int c = h + 2 * u;
        ar[u] = (active && c < d) ? acc[row * d + c] : 0.0f;
    }
    float *srow = &sp[(16 * warp + r) * LDC];
    const float *orow = &ob[(16 * warp + r) * LDD];

    for (int j0 = 0; j0 < nblock; j0 += BC) {
        __syncthreads(); /* ks, vs, ob of the previous chunk (or the q staging) read */
        tc_stage<BC, DMAX, LDD>(ks, kb, d, ld, tk, j0, 1.0f);
        tc_stage<BC, DMAX, LDD>(vs, vb, d, ld, tk, j0, 1.0f);
        __syncthreads();
        if (j0 >= nwarp)
            continue; /* warp-uniform: no query of this warp sees a key of the chunk */

        /* S (16, BC) = Qw (16, DMAX) K^T (DMAX, BC); K^T is ks read column-major */
        frag_acc s[G::NC];
#pragma unroll
        for (int nt = 0; nt < G::NC; nt++)
            wmma::fill_fragment(s[nt], 0.0f);
#pragma unroll
        for (int kk = 0; kk < G::KD; kk++)
#pragma unroll
            for (int nt = 0; nt < G::NC; nt++) {
                frag_b_col kf;
                wmma::load_matrix_sync(kf, &ks[16 * nt * LDD + 8 * kk], LDD);
                wmma::mma_sync(s[nt], qa[kk], kf, s[nt]);
            }
#pragma unroll
        for (int nt = 0; nt < G::NC; nt++)
            wmma::store_matrix_sync(&sp[16 * warp * LDC + 16 * nt], s[nt], LDC, wmma::mem_row_major);
        __syncwarp();

        /* online softmax of row r over keys j0 + j: m' = max(m, max_j s_j),
         * p_j = tf32(e^(s_j - m')) (0 where masked), l' = l e^(m - m') + sum p_j */
        float cmax = -INFINITY;
#pragma unroll
        for (int t = 0; t < BC / 2; t++) {
            int j = h + 2 * t;
            cmax = fmaxf(cmax, j0 + j < nvis ? srow[j] : -INFINITY);
        }
        cmax = fmaxf(cmax, __shfl_xor_sync(0xffffffffu, cmax, 1));
        const float mnew = fmaxf(m, cmax);
        const float corr = mnew == -INFINITY ? 1.0f : expf(m - mnew); /* 0 when m = -inf */
        float psum = 0.0f;
#pragma unroll
        for (int t = 0; t < BC / 2; t++) {
            int j = h + 2 * t;
            float p = j0 + j < nvis ? wmma::__float_to_tf32(expf(srow[j] - mnew)) : 0.0f;
            srow[j] = p;
            psum += p;
        }
        psum += __shfl_xor_sync(0xffffffffu, psum, 1);
        l = l * corr + psum;
        m = mnew;
        __syncwarp();

        /* PV (16, DMAX) = P (16, BC) V (BC, DMAX), into this warp's rows of ob */
        frag_acc o[G::ND];
#pragma unroll
        for (int nt = 0; nt < G::ND; nt++)
            wmma::fill_fragment(o[nt], 0.0f);
        tc_chunk_product<DMAX>(o, sp, vs, warp);
#pragma unroll
        for (int nt = 0; nt < G::ND; nt++)
            wmma::store_matrix_sync(&ob[16 * warp * LDD + 16 * nt], o[nt], LDD,
                                    wmma::mem_row_major);
        __syncwarp();

        /* acc' = acc e^(m - m') + PV, row r, columns h + 2u */
#pragma unroll
        for (int u = 0; u < DMAX / 2; u++)
            ar[u] = ar[u] * corr + orow[h + 2 * u];
    }
    if (!active)
        return;
#pragma unroll
    for (int u = 0; u < DMAX / 2; u++) {
        int c = h + 2 * u;
        if (c < d)
            acc[row * d + c] = ar[u];
    }
    if (h == 0) {
        ms[2 * row] = m;
        ms[2 * row + 1] = l;
    }
}

/* Backward, query side: dq (d, tq, nb) += scale sum_j ds_ij k_j.
 * q, k, v, dq in (ld, hs), dout in (ldo, hso), lse, D contiguous.
 * Block (x, b): queries [ib, ib + 64), warp w queries ib + 16w + r.  Per key
 * chunk of 32: S = Qs K^T and dP = dO V^T (16, 32) on tensor cores; per row
 * ds = p (dp - D) scale with p = e^(s - lse) (0 where masked or lse = -inf);
 * dQ (16, DMAX) += dS K on tensor cores, in fragments until the end. */
template <int DMAX>
__global__ void __launch_bounds__(tc_geo<DMAX>::THREADS)
    k_attn_bwd_q_tc(int d, int tq, int tk, int q0, int k0, float scale, int ld, long long hs,
                    const float *q, const float *k, const float *v, int ldo, long long hso,
                    const float *dout, const float *lse, const float *D, float *dq)
{
    typedef tc_geo<DMAX> G;
    constexpr int BR = G::BR, BC = G::BC, LDD = G::LDD, LDC = G::LDC;
    /* ks, vs: (BC, DMAX) chunk of k, v (together: the (BR, DMAX) staging of
     * q, dout and the result); sb: (BR, BC) scores, then ds; pb: (BR, BC) dp */
    __shared__ __align__(128) float sh[2 * BC * LDD + 2 * BR * LDC];
    float *ks = sh, *vs = sh + BC * LDD, *sb = vs + BC * LDD, *pb = sb + BR * LDC;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int r = lane / 2, h = lane % 2;
    const int b = blockIdx.y;
    const tc_qrows rows = tc_query_rows<DMAX>(tq, tk, q0, k0, warp, r);
    const int ib = rows.ib, iw = rows.iw, i = rows.i;
    const int nblock = rows.nblock, nwarp = rows.nwarp;
    if (nblock == 0)
        return;
    const bool active = i < tq;
    const size_t row = (size_t)b * tq + i;
    const float li = active ? lse[row] : -INFINITY, Di = active ? D[row] : 0.0f;
    const int nvis = (active && li != -INFINITY) ? tc_visible(tk, q0, k0, i) : 0;
    const float *qb = q + (size_t)b * hs, *dob = dout + (size_t)b * hso;
    const float *kb = k + (size_t)b * hs, *vb = v + (size_t)b * hs;

    /* this warp's scaled queries and dout rows as KD a-fragments each */
    frag_a qa[G::KD], da[G::KD];
    tc_own_rows<DMAX>(qa, da, sh, qb, ld, scale, dob, ldo, d, tq, ib, warp);
    frag_acc dqf[G::ND];
#pragma unroll
    for (int nt = 0; nt < G::ND; nt++)
        wmma::fill_fragment(dqf[nt], 0.0f);
    float *srow = &sb[(16 * warp + r) * LDC], *prow = &pb[(16 * warp + r) * LDC];

    for (int j0 = 0; j0 < nblock; j0 += BC) {
        __syncthreads(); /* the previous chunk (or the staging) read */
        tc_stage<BC, DMAX, LDD>(ks, kb, d, ld, tk, j0, 1.0f);
        tc_stage<BC, DMAX, LDD>(vs, vb, d, ld, tk, j0, 1.0f);
        __syncthreads();
        if (j0 >= nwarp)
            continue; /* warp-uniform */

        /* S (16, BC) = Qw K^T, dP (16, BC) = dOw V^T */
        tc_score_pair<DMAX>(qa, da, ks, vs, sb, pb, warp);
        __syncwarp();

        /* row r, keys j0 + j: ds = tf32(p (dp - D) scale), in place of s */
#pragma unroll
        for (int t = 0; t < BC / 2; t++) {
            int j = h + 2 * t;
            float p = j0 + j < nvis ? expf(srow[j] - li) : 0.0f;
            srow[j] = wmma::__float_to_tf32(p * (prow[j] - Di) * scale);
        }
        __syncwarp();

        /* dQ (16, DMAX) += dS (16, BC) K (BC, DMAX) */
        tc_chunk_product<DMAX>(dqf, sb, ks, warp);
    }

    /* dq rows of this warp += dQ, through its rows of the staging tile */
    __syncthreads();
#pragma unroll
    for (int nt = 0; nt < G::ND; nt++)
        wmma::store_matrix_sync(&sh[16 * warp * LDD + 16 * nt], dqf[nt], LDD, wmma::mem_row_major);
    __syncwarp();
    tc_add_rows<DMAX, LDD>(dq + (size_t)b * hs, &sh[16 * warp * LDD], d, ld, tq, iw, lane);
}

/* Backward, key side: dk (d, tk, nb) += scale sum_i ds_ij q_i,
 * dv (d, tk, nb) += sum_i p_ij dout_i.  Layouts as k_attn_bwd_q_tc's; dk, dv
 * in (ld, hs).
 * Block (x, b): keys [jb, jb + 64), warp w keys jb + 16w + r.  Per query
 * chunk of 32 (from the first query that sees the block's first key): the
 * transposed S^T = Ks Q^T and dP^T = V dO^T (16, 32) on tensor cores
 * (Ks = scale k); per key row p and ds; dV += P^T dO and dK += dS^T Q on
 * tensor cores, in fragments until the end. */
template <int DMAX>
__global__ void __launch_bounds__(tc_geo<DMAX>::THREADS)
    k_attn_bwd_kv_tc(int d, int tq, int tk, int q0, int k0, float scale, int ld, long long hs,
                     const float *q, const float *k, const float *v, int ldo, long long hso,
                     const float *dout, const float *lse, const float *D, float *dk, float *dv)
{
    typedef tc_geo<DMAX> G;
    constexpr int BR = G::BR, BC = G::BC, LDD = G::LDD, LDC = G::LDC;
    /* qs, dos: (BC, DMAX) chunk of q, dout (together: the (BR, DMAX) staging
     * of k, v and the results); sb: (BR, BC) s^T, then p^T; pb: dp^T, then ds^T */
    __shared__ __align__(128) float sh[2 * BC * LDD + 2 * BR * LDC];
    __shared__ float ls[BC], Ds[BC];
    float *qs = sh, *dos = sh + BC * LDD, *sb = dos + BC * LDD, *pb = sb + BR * LDC;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int r = lane / 2, h = lane % 2; /* row r: key j; columns: queries i0 + h + 2t */
    const int b = blockIdx.y;
    const int jb = blockIdx.x * BR; /* the first keys are seen by the most queries */
    const int jw = jb + 16 * warp, j = jw + r;
    /* query i sees key j iff q0 + i >= k0 + j: the first query that sees the
     * block's (the warp's) first key */
    const long long ist = (long long)k0 + jb - q0, iwst = (long long)k0 + jw - q0;
    const int istart = ist < 0 ? 0 : (ist > tq ? tq : (int)ist);
    const int iwstart = iwst < 0 ? 0 : (iwst > tq ? tq : (int)iwst);
    const float *qb = q + (size_t)b * hs, *dob = dout + (size_t)b * hso;
    const float *lb = lse + (size_t)b * tq, *Db = D + (size_t)b * tq;
    const float *kb = k + (size_t)b * hs, *vb = v + (size_t)b * hs;

    /* this warp's scaled keys and values as KD a-fragments each */
    frag_a ka[G::KD], va[G::KD];
    tc_own_rows<DMAX>(ka, va, sh, kb, ld, scale, vb, ld, d, tk, jb, warp);
    frag_acc dkf[G::ND], dvf[G::ND];
#pragma unroll
    for (int nt = 0; nt < G::ND; nt++) {
        wmma::fill_fragment(dkf[nt], 0.0f);
        wmma::fill_fragment(dvf[nt], 0.0f);
    }
    float *srow = &sb[(16 * warp + r) * LDC], *prow = &pb[(16 * warp + r) * LDC];

    for (int i0 = istart; i0 < tq; i0 += BC) {
        __syncthreads(); /* the previous chunk (or the staging) read */
        tc_stage<BC, DMAX, LDD>(qs, qb, d, ld, tq, i0, 1.0f);
        tc_stage<BC, DMAX, LDD>(dos, dob, d, ldo, tq, i0, 1.0f);
        for (int e = threadIdx.x; e < BC; e += blockDim.x) {
            int ii = i0 + e;
            ls[e] = ii < tq ? lb[ii] : -INFINITY;
            Ds[e] = ii < tq ? Db[ii] : 0.0f;
        }
        __syncthreads();
        if (jw >= tk || i0 + BC <= iwstart)
            continue; /* warp-uniform: no key of this warp, or no query of the chunk sees one */

        /* S^T (16, BC) = Kw Q^T, dP^T (16, BC) = Vw dO^T */
        tc_score_pair<DMAX>(ka, va, qs, dos, sb, pb, warp);
        __syncwarp();

        /* key row r, queries i0 + ii: p^T = tf32(e^(s - lse_i)) where visible,
         * ds^T = tf32(p (dp - D_i) scale) */
#pragma unroll
        for (int t = 0; t < BC / 2; t++) {
            int ii = h + 2 * t;
            bool vis = j < tk && (long long)q0 + i0 + ii >= (long long)k0 + j &&
                       ls[ii] != -INFINITY; /* also false past tq: ls = -inf there */
            float p = vis ? expf(srow[ii] - ls[ii]) : 0.0f;
            float ds = p * (prow[ii] - Ds[ii]) * scale;
            srow[ii] = wmma::__float_to_tf32(p);
            prow[ii] = wmma::__float_to_tf32(ds);
        }
        __syncwarp();

        /* dV (16, DMAX) += P^T (16, BC) dO (BC, DMAX), dK += dS^T (16, BC) Q (BC, DMAX) */
        tc_chunk_product<DMAX>(dvf, sb, dos, warp);
        tc_chunk_product<DMAX>(dkf, pb, qs, warp);
    }

    /* dk, dv rows of this warp += dK, dV, through its rows of the staging tile */
    __syncthreads();
    float *mine = &sh[16 * warp * LDD];
#pragma unroll
    for (int nt = 0; nt < G::ND; nt++)
        wmma::store_matrix_sync(&mine[16 * nt], dkf[nt], LDD, wmma::mem_row_major);
    __syncwarp();
    tc_add_rows<DMAX, LDD>(dk + (size_t)b * hs, mine, d, ld, tk, jw, lane);
    __syncwarp();
#pragma unroll
    for (int nt = 0; nt < G::ND; nt++)
        wmma::store_matrix_sync(&mine[16 * nt], dvf[nt], LDD, wmma::mem_row_major);
    __syncwarp();
    tc_add_rows<DMAX, LDD>(dv + (size_t)b * hs, mine, d, ld, tk, jw, lane);
}

bool tsr__cuda_attn_tc_takes(int d)
{
    return d >= 1 && d <= 64;
}

template <int DMAX>
static int launch_fwd_tc(cudaStream_t s, int d, int tq, int tk, int nb, int q0, int k0,
                         float scale, int ld, long long hs, const float *q, const float *k,
                         const float *v, float *ms, float *acc)
{
    typedef tc_geo<DMAX> G;
    dim3 grid((tq + G::BR - 1) / G::BR, nb);
    TSR_LAUNCH(k_attn_fwd_tc<DMAX>, grid, G::THREADS, 0, s, d, tq, tk, q0, k0, scale, ld, hs, q,
               k, v, ms, acc);
    return tsr_cuda_launched_t("k_attn_fwd_tc", DMAX);
}

int tsr__cuda_attn_fwd_tc(cudaStream_t s, int d, int tq, int tk, int nb, int q0, int k0,
                          float scale, int ld, long long hs, const float *q, const float *k,
                          const float *v, float *ms, float *acc)
{
    if (d <= 32)
        return launch_fwd_tc<32>(s, d, tq, tk, nb, q0, k0, scale, ld, hs, q, k, v, ms, acc);
    return launch_fwd_tc<64>(s, d, tq, tk, nb, q0, k0, scale, ld, hs, q, k, v, ms, acc);
}

template <int DMAX>
static int launch_bwd_tc(cudaStream_t s, int d, int tq, int tk, int nb, int q0, int k0,
                         float scale, int ld, long long hs, const float *q, const float *k,
                         const float *v, int ldo, long long hso, const float *dout,
                         const float *lse, const float *D, float *dq, float *dk, float *dv)
{
    typedef tc_geo<DMAX> G;
    dim3 gkv((tk + G::BR - 1) / G::BR, nb), gq((tq + G::BR - 1) / G::BR, nb);
    TSR_LAUNCH(k_attn_bwd_kv_tc<DMAX>, gkv, G::THREADS, 0, s, d, tq, tk, q0, k0, scale, ld, hs, q,
               k, v, ldo, hso, dout, lse, D, dk, dv);
    int st = tsr_cuda_launched_t("k_attn_bwd_kv_tc", DMAX);
    if (st)
        return st;
    TSR_LAUNCH(k_attn_bwd_q_tc<DMAX>, gq, G::THREADS, 0, s, d, tq, tk, q0, k0, scale, ld, hs, q,
               k, v, ldo, hso, dout, lse, D, dq);
    return tsr_cuda_launched_t("k_attn_bwd_q_tc", DMAX);
}

int tsr__cuda_attn_bwd_tc(cudaStream_t s, int d, int tq, int tk, int nb, int q0, int k0,
                          float scale, int ld, long long hs, const float *q, const float *k,
                          const float *v, int ldo, long long hso, const float *dout,
                          const float *lse, const float *D, float *dq, float *dk, float *dv)
{
    if (d <= 32)
        return launch_bwd_tc<32>(s, d, tq, tk, nb, q0, k0, scale, ld, hs, q, k, v, ldo, hso, dout,
                                 lse, D, dq, dk, dv);
    return launch_bwd_tc<64>(s, d, tq, tk, nb, q0, k0, scale, ld, hs, q, k, v, ldo, hso, dout,
                             lse, D, dq, dk, dv);
}
