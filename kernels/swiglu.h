/* kernels/swiglu.h — SwiGLU, the gated activation of the Llama family's MLP:
 *   h = silu(g) * u,   silu(g) = g * sigmoid(g)
 * with g and u the gate and up projections' outputs, forward and backward.
 *
 * Must never: allocate or know about tasks.
 *
 * Memory order: g, u, h are (F, T) feature-major, each with its own leading
 * dimension (the distance between two tokens' columns, >= F): g(i, t) at
 * g[i + t*ldg].  That serves both layouts a decoder builds: two separate
 * (F, T) projections (ld = F), or one fused gate|up projection (2F, T) whose
 * token column holds the F gate features then the F up features (g = gu,
 * u = gu + F, ldg = ldu = 2F), and the backward writes dg, du into the same
 * fused layout so that one GEMM takes the gradient back through both.
 *
 * sigmoid(g) = 1 / (1 + exp(-g)): for g very negative exp(-g) overflows to
 * +inf and sigmoid is exactly 0 (silu -0), for g very positive exp(-g) is 0
 * and sigmoid exactly 1 (silu g): no overflow, no NaN, for every finite g.
 */
#ifndef TSR_KERNELS_SWIGLU_H
#define TSR_KERNELS_SWIGLU_H

#ifdef __cplusplus
extern "C" {
#endif

/* h(i, t) = silu(g(i, t)) * u(i, t)      i < F, t < T; h may be g or u
 * (same ld) */
void tsr_cpu_swiglu_fwd(int F, int T, const float *g, int ldg, const float *u, int ldu,
                        float *h, int ldh);
/* Gradients, WRITTEN (not accumulated):
 *   dg = dh * u * silu'(g),  silu'(g) = s (1 + g (1 - s)),  s = sigmoid(g)
 *   du = dh * silu(g)
 * dg and du must not alias g, u or dh; they may be the two halves of one
 * fused (2F, T) buffer. */
void tsr_cpu_swiglu_bwd(int F, int T, const float *g, int ldg, const float *u, int ldu,
                        const float *dh, int ldh, float *dg, int lddg, float *du, int lddu);

/* CUDA versions, device pointers, asynchronous on `stream`;
 * 0 or TSR_EDEVICE (kernels/cuda_status.h names the failure). */
int tsr_cuda_swiglu_fwd(void *stream, int F, int T, const float *g, int ldg, const float *u,
                        int ldu, float *h, int ldh);
int tsr_cuda_swiglu_bwd(void *stream, int F, int T, const float *g, int ldg, const float *u,
                        int ldu, const float *dh, int ldh, float *dg, int lddg, float *du,
                        int lddu);

/* Cost estimates (the convention of nn/ops.c; exp and division one each).
 * Forward per element: sigmoid 3 (negation, exp, add; the division 1), two
 * products: 6; g, u read, h written.
 * Backward per element: sigmoid 4, silu 1, silu' 4, three products: 12;
 * g, u, dh read, dg, du written. */
static inline double tsr_swiglu_fwd_flops(int F, int T)
{
    return 6.0 * F * (double)T;
}
static inline double tsr_swiglu_fwd_bytes(int F, int T)
{
    return 4.0 * 3.0 * F * (double)T;
}
static inline double tsr_swiglu_bwd_flops(int F, int T)
{
    return 12.0 * F * (double)T;
}
static inline double tsr_swiglu_bwd_bytes(int F, int T)
{
    return 4.0 * 5.0 * F * (double)T;
}

#ifdef __cplusplus
}
#endif
#endif
