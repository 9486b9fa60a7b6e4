/* cuda_emu/include/mma.h — the emulated warp matrix functions (nvcuda::wmma)
 * for -Dcuda=emu: fragments, load_matrix_sync, store_matrix_sync, mma_sync,
 * fill_fragment and __float_to_tf32 (in nvcuda::wmma, as CUDA's), for the
 * shapes the project's kernels use: m16n16k8 with precision::tf32 operands
 * and float accumulators (float operands of m16n16k8 are treated as tf32, as
 * the hardware does).
 *
 * The element mapping differs from the hardware's, which is opaque anyway:
 * here every lane's fragment holds the WHOLE tile, row-major (a: 16x8,
 * b: 8x16, accumulator: 16x16), and every lane computes the identical full
 * result, so num_elements is the tile's size, not the hardware's per-lane
 * share.  Code may only touch x[] uniformly (the same operation on every
 * element, e.g. x[t] = __float_to_tf32(x[t])); it must never infer a row or
 * column from an element's index.
 *
 * store_matrix_sync writes only the elements a lane owns (element e by lane
 * e % 32), so a lane that reads stored values written by other lanes without
 * a __syncwarp (or __syncthreads) in between reads stale memory, as it could
 * on a GPU.  None of these operations is a barrier.
 *
 * Must never: be included by a native build (nvcc uses CUDA's own <mma.h>),
 * or round differently from the hardware's conversions: __float_to_tf32
 * rounds to nearest with ties away from zero (cvt.rna.tf32.f32) and mma_sync
 * ignores the 13 low mantissa bits of its operands, as tensor cores do.
 */
#ifndef TSR_EMU_MMA_H
#define TSR_EMU_MMA_H

#include "cuda_runtime.h"

#ifdef __cplusplus
#include <stdint.h>
#include <string.h>

namespace nvcuda {
namespace wmma {

struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
namespace precision {
struct tf32 {};
} // namespace precision
enum layout_t { mem_row_major, mem_col_major };

/* TF32: 8 exponent bits, 10 mantissa bits.  Round to nearest, ties away from
 * zero, on the magnitude; infinities and NaNs pass unchanged. */
static inline float __float_to_tf32(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) != 0x7f800000u)
        u = (u + 0x1000u) & 0xffffe000u;
    memcpy(&f, &u, 4);
    return f;
}

/* (rows, cols) of a tile of `Use` in an MxNxK product */
template <class Use, int M, int N, int K> struct tsr_emu_dims;
template <int M, int N, int K> struct tsr_emu_dims<matrix_a, M, N, K> {
    static constexpr int rows = M, cols = K;
};
template <int M, int N, int K> struct tsr_emu_dims<matrix_b, M, N, K> {
    static constexpr int rows = K, cols = N;
};
template <int M, int N, int K> struct tsr_emu_dims<accumulator, M, N, K> {
    static constexpr int rows = M, cols = N;
};

/* x: the whole (rows, cols) tile, row-major, in every lane */
template <class Use, int M, int N, int K, class T, class Layout = void> struct fragment {
    static_assert(M == 16 && N == 16 && K == 8, "the emulation has m16n16k8 only");
    static_assert(std::is_same<T, precision::tf32>::value || std::is_same<T, float>::value,
                  "the emulation has tf32 and float fragments only");
    typedef float element_type;
    typedef float storage_element_type;
    static constexpr int rows = tsr_emu_dims<Use, M, N, K>::rows;
    static constexpr int cols = tsr_emu_dims<Use, M, N, K>::cols;
    static constexpr int num_elements = rows * cols;
    float x[num_elements];
};

template <class Use, int M, int N, int K, class T, class L>
static inline void fill_fragment(fragment<Use, M, N, K, T, L> &f, float v)
{
    for (int e = 0; e < f.num_elements; e++)
        f.x[e] = v;
}

/* where element (r, c) of a tile stands in memory: row-major r*ldm + c,
 * column-major c*ldm + r */
static inline size_t elem_at(row_major, int r, int c, unsigned ldm)
{
    return (size_t)r * ldm + c;
}
static inline size_t elem_at(col_major, int r, int c, unsigned ldm)
{
    return (size_t)c * ldm + r;
}
static inline size_t elem_at(layout_t layout, int r, int c, unsigned ldm)
{
    return layout == mem_row_major ? elem_at(row_major(), r, c, ldm)
                                   : elem_at(col_major(), r, c, ldm);
}

/* a matrix_a / matrix_b tile from p, in the fragment's layout */
template <class Use, int M, int N, int K, class T, class Layout>
static inline void load_matrix_sync(fragment<Use, M, N, K, T, Layout> &f, const float *p,
                                    unsigned ldm)
{
    typedef fragment<Use, M, N, K, T, Layout> F;
    for (int r = 0; r < F::rows; r++)
        for (int c = 0; c < F::cols; c++)
            f.x[r * F::cols + c] = p[elem_at(Layout(), r, c, ldm)];
}
template <int M, int N, int K>
static inline void load_matrix_sync(fragment<accumulator, M, N, K, float> &f, const float *p,
                                    unsigned ldm, layout_t layout)
{
    typedef fragment<accumulator, M, N, K, float> F;
    for (int r = 0; r < F::rows; r++)
        for (int c = 0; c < F::cols; c++)
            f.x[r * F::cols + c] = p[elem_at(layout, r, c, ldm)];
}

/* Each lane writes the elements it owns: e % 32 == lane. */
template <int M, int N, int K>
static inline void store_matrix_sync(float *p, const fragment<accumulator, M, N, K, float> &f,
                                     unsigned ldm, layout_t layout)
{
    typedef fragment<accumulator, M, N, K, float> F;
    int lane = tsr_emu_lane();
    for (int e = lane; e < F::num_elements; e += 32) {
        p[elem_at(layout, e / F::cols, e % F::cols, ldm)] = f.x[e];
    }
}

/* the tensor cores read the 19 high bits of a tf32 operand */
static inline float tsr_emu_tf32_operand(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u &= 0xffffe000u;
    memcpy(&f, &u, 4);
    return f;
}

/* d = a b + c: d(r, n) = c(r, n) + sum_k a(r, k) b(k, n), products exact,
 * sums in fp32 in k order.  d may be c. */
template <int M, int N, int K, class T, class LA, class LB>
static inline void mma_sync(fragment<accumulator, M, N, K, float> &d,
                            const fragment<matrix_a, M, N, K, T, LA> &a,
                            const fragment<matrix_b, M, N, K, T, LB> &b,
                            const fragment<accumulator, M, N, K, float> &c)
{
    float at[M * K], bt[K * N];
    for (int e = 0; e < M * K; e++)
        at[e] = tsr_emu_tf32_operand(a.x[e]);
    for (int e = 0; e < K * N; e++)
        bt[e] = tsr_emu_tf32_operand(b.x[e]);
    for (int r = 0; r < M; r++)
        for (int n = 0; n < N; n++) {
            float s = c.x[r * N + n];
            for (int k = 0; k < K; k++)
                s += at[r * K + k] * bt[k * N + n];
            d.x[r * N + n] = s;
        }
}

} // namespace wmma
} // namespace nvcuda

#endif /* __cplusplus */

#endif
