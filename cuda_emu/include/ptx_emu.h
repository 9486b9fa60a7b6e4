/* cuda_emu/include/ptx_emu.h — the emulated PTX instructions behind the
 * inline-assembly wrappers of kernels/cuda/ptx.cuh, for -Dcuda=emu:
 *   cvt.rna.tf32.f32                       tsr_emu_cvt_rna_tf32
 *   cvt.rn.bf16x2.f32                      tsr_emu_cvt_rn_bf16x2
 *   mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
 *                                          tsr_emu_mma_m16n8k8_tf32
 *   mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
 *                                          tsr_emu_mma_m16n8k16_bf16
 *   cp.async.cg.shared.global (16 bytes, zero fill), commit_group, wait_group
 *                                          tsr_emu_cp_async16 (a plain copy)
 *
 * mma.sync is warp-wide: each lane holds a fixed share of the operands (the
 * fragment layouts of the PTX ISA, written out below), so the emulation
 * gathers the 32 lanes' registers (tsr_emu_warp_gather, a warp barrier)
 * and every lane computes its own four results from them.  A kernel that
 * assumed another layout computes wrong numbers here as on a GPU.
 *
 * Must never: be included by a native build, or round differently from the
 * hardware: cvt.rna rounds to nearest with ties away from zero, and the
 * tensor cores read only the 19 high bits of a tf32 operand.
 */
#ifndef TSR_EMU_PTX_EMU_H
#define TSR_EMU_PTX_EMU_H

#include "cuda_runtime.h"

#ifdef __cplusplus
#include <stdint.h>
#include <string.h>

/* TF32: 8 exponent bits, 10 mantissa bits; infinities and NaNs unchanged */
static inline uint32_t tsr_emu_cvt_rna_tf32(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) != 0x7f800000u)
        u = (u + 0x1000u) & 0xffffe000u;
    return u;
}

/* bf16 of x, round to nearest even; NaN stays NaN (quiet) */
static inline uint32_t tsr_emu_bf16_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (u >> 16) | 0x40u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

static inline uint32_t tsr_emu_cvt_rn_bf16x2(float lo, float hi)
{
    return tsr_emu_bf16_bits(lo) | tsr_emu_bf16_bits(hi) << 16;
}

static inline float tsr_emu_bf16_value(uint32_t half)
{
    uint32_t u = (half & 0xffffu) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The operand registers of the warp's 32 lanes (a warp barrier). */
struct tsr_emu_mma_regs {
    uint32_t a[4], b[2];
};
static inline void tsr_emu_mma_gather(const uint32_t a[4], const uint32_t b[2],
                                      tsr_emu_mma_regs all[32], const char *file, int line)
{
    tsr_emu_mma_regs mine;
    memcpy(mine.a, a, sizeof mine.a);
    memcpy(mine.b, b, sizeof mine.b);
    tsr_emu_warp_gather(&mine, all, sizeof mine, file, line);
}

/* this lane's four results: d[e] += sum_k A(r, k) B(k, n), r = g + 8 (e / 2),
 * n = 2t + e % 2, in fp32 in k order */
template <int K>
static inline void tsr_emu_mma_sum(float d[4], const float (*A)[K], const float (*B)[8])
{
    const int lane = tsr_emu_lane(), g = lane / 4, t = lane % 4;
    for (int e = 0; e < 4; e++) {
        int r = g + 8 * (e >= 2), n = 2 * t + (e & 1);
        float s = d[e];
        for (int k = 0; k < K; k++)
            s += A[r][k] * B[k][n];
        d[e] = s;
    }
}

/* d (16x8 fp32) += a (16x16 bf16) b (16x8 bf16), per lane (g = lane / 4,
 * t = lane % 4), each register two elements, the lower index low:
 *   a[0] = A(g, 2t..2t+1)  a[1] = A(g+8, 2t..2t+1)  a[2] = A(g, 2t+8..)  a[3] = A(g+8, 2t+8..)
 *   b[0] = B(2t..2t+1, g)  b[1] = B(2t+8..2t+9, g)
 *   d as in tsr_emu_mma_m16n8k8_tf32.  Products exact, sums in fp32 in k order. */
static inline void tsr_emu_mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2],
                                             const char *file = __builtin_FILE(),
                                             int line = __builtin_LINE())
{
    tsr_emu_mma_regs all[32];
    tsr_emu_mma_gather(a, b, all, file, line);
    float A[16][16], B[16][8];
    for (int r = 0; r < 16; r++)
        for (int k = 0; k < 16; k++) {
            uint32_t reg = all[(r % 8) * 4 + (k % 8) / 2].a[(r >= 8) + 2 * (k >= 8)];
            A[r][k] = tsr_emu_bf16_value(k % 2 ? reg >> 16 : reg);
        }
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 8; n++) {
            uint32_t reg = all[n * 4 + (k % 8) / 2].b[k >= 8];
            B[k][n] = tsr_emu_bf16_value(k % 2 ? reg >> 16 : reg);
        }
    tsr_emu_mma_sum<16>(d, A, B);
}

/* d (16x8 fp32) += a (16x8 tf32) b (8x8 tf32), per lane (g = lane / 4,
 * t = lane % 4):
 *   a[0] = A(g, t)   a[1] = A(g+8, t)   a[2] = A(g, t+4)   a[3] = A(g+8, t+4)
 *   b[0] = B(t, g)   b[1] = B(t+4, g)
 *   d[0] = D(g, 2t)  d[1] = D(g, 2t+1)  d[2] = D(g+8, 2t)  d[3] = D(g+8, 2t+1)
 * Products exact, sums in fp32 in k order. */
static inline void tsr_emu_mma_m16n8k8_tf32(float d[4], const uint32_t a[4], const uint32_t b[2],
                                            const char *file = __builtin_FILE(),
                                            int line = __builtin_LINE())
{
    tsr_emu_mma_regs all[32];
    tsr_emu_mma_gather(a, b, all, file, line);
    float A[16][8], B[8][8];
    for (int r = 0; r < 16; r++)
        for (int k = 0; k < 8; k++) {
            uint32_t u = all[(r % 8) * 4 + k % 4].a[(r >= 8) + 2 * (k >= 4)] & 0xffffe000u;
            memcpy(&A[r][k], &u, 4);
        }
    for (int k = 0; k < 8; k++)
        for (int n = 0; n < 8; n++) {
            uint32_t u = all[n * 4 + k % 4].b[k >= 4] & 0xffffe000u;
            memcpy(&B[k][n], &u, 4);
        }
    tsr_emu_mma_sum<8>(d, A, B);
}

/* 16 bytes global -> shared, the first src_bytes (0 or 16) copied and the
 * rest zero; done at once (the emulation has no asynchronous copies, so a
 * missing wait_group goes unseen here: docs/cuda-emulation.md) */
static inline void tsr_emu_cp_async16(void *dst, const void *src, int src_bytes)
{
    memset(dst, 0, 16);
    if (src_bytes > 0)
        memcpy(dst, src, (size_t)src_bytes);
}

#endif /* __cplusplus */
#endif
