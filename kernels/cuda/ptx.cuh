/* kernels/cuda/ptx.cuh — the few PTX instructions the tensor-core kernels
 * use beyond CUDA C, each behind one small function: TF32 conversion,
 * the warp-wide mma.sync m16n8k8 TF32 product, and cp.async (16-byte
 * global-to-shared copies with zero fill, in commit groups).  Under the
 * emulation (-Dcuda=emu) the same functions run cuda_emu/include/ptx_emu.h,
 * so that the kernels' source is the one nvcc compiles.
 *
 * Must never: be included outside kernels/cuda, or hide a layout: the
 * fragment layout of tsr_mma_tf32 is the PTX ISA's, written below, and
 * kernels index their registers by it.
 */
#ifndef TSR_KERNELS_CUDA_PTX_CUH
#define TSR_KERNELS_CUDA_PTX_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#ifdef TSR_CUDA_EMU
#include <ptx_emu.h>
#endif

/* x rounded to TF32 (nearest, ties away from zero), as the bits of a float */
static __device__ __forceinline__ uint32_t tsr_tf32(float x)
{
#ifdef TSR_CUDA_EMU
    return tsr_emu_cvt_rna_tf32(x);
#else
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
#endif
}

/* (lo, hi) rounded to bf16 (nearest even) and packed: lo in the low half */
static __device__ __forceinline__ uint32_t tsr_bf16x2(float lo, float hi)
{
#ifdef TSR_CUDA_EMU
    return tsr_emu_cvt_rn_bf16x2(lo, hi);
#else
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
#endif
}

/* x rounded to bf16 (nearest even), as a float */
static __device__ __forceinline__ float tsr_round_bf16(float x)
{
    return __uint_as_float(tsr_bf16x2(x, 0.0f) << 16);
}

/* d (16x8, fp32) += a (16x8, tf32) b (8x8, tf32) over the warp; per lane,
 * g = lane / 4 and t = lane % 4:
 *   a[0] = A(g, t)   a[1] = A(g+8, t)   a[2] = A(g, t+4)   a[3] = A(g+8, t+4)
 *   b[0] = B(t, g)   b[1] = B(t+4, g)
 *   d[0] = D(g, 2t)  d[1] = D(g, 2t+1)  d[2] = D(g+8, 2t)  d[3] = D(g+8, 2t+1)
 * Every lane of the warp calls it together (warp-uniform control flow). */
static __device__ __forceinline__ void tsr_mma_tf32(float d[4], const uint32_t a[4],
                                                    const uint32_t b[2])
{
#ifdef TSR_CUDA_EMU
    tsr_emu_mma_m16n8k8_tf32(d, a, b);
#else
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/* d (16x8, fp32) += a (16x16, bf16) b (16x8, bf16) over the warp; per
 * lane, g = lane / 4 and t = lane % 4, each register two elements, the
 * lower column (row of B) in the low half:
 *   a[0] = A(g, 2t..2t+1)    a[1] = A(g+8, 2t..2t+1)
 *   a[2] = A(g, 2t+8..2t+9)  a[3] = A(g+8, 2t+8..2t+9)
 *   b[0] = B(2t..2t+1, g)    b[1] = B(2t+8..2t+9, g)
 *   d as in tsr_mma_tf32 */
static __device__ __forceinline__ void tsr_mma_bf16(float d[4], const uint32_t a[4],
                                                    const uint32_t b[2])
{
#ifdef TSR_CUDA_EMU
    tsr_emu_mma_m16n8k16_bf16(d, a, b);
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/* 16 bytes from global src to shared dst (both 16-byte aligned), of which
 * the first src_bytes (0 or 16) are read and the rest are zero; the copy
 * lands after tsr_cp_async_wait covers its group */
static __device__ __forceinline__ void tsr_cp_async16(void *dst, const void *src, int src_bytes)
{
#ifdef TSR_CUDA_EMU
    tsr_emu_cp_async16(dst, src, src_bytes);
#else
    unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(src),
                 "r"(src_bytes)
                 : "memory");
#endif
}

/* closes the group of cp.async issued since the last commit */
static __device__ __forceinline__ void tsr_cp_async_commit(void)
{
#ifndef TSR_CUDA_EMU
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

/* waits until at most N committed groups are still in flight (this
 * thread's); a __syncthreads after it makes every thread's copies visible */
template <int N> static __device__ __forceinline__ void tsr_cp_async_wait(void)
{
#ifndef TSR_CUDA_EMU
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

#endif
