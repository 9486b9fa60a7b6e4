/* kernels/rmsnorm.h — RMSNorm over the feature dimension of activation tiles
 * (the Llama family's normalisation: no mean subtracted, no bias), forward
 * (saving rstd for backward) and backward, each one fused pass over the tile.
 *
 * Must never: allocate, know about tasks, or normalise over a partial feature
 * range (a tile must hold the whole feature dimension C of its tokens).
 *
 * Memory order: x is (C, T) column-major with ld = C: token t's C features are
 * contiguous at x + t*C (the bytes of PyTorch's row-major (T, C)).
 */
#ifndef TSR_KERNELS_RMSNORM_H
#define TSR_KERNELS_RMSNORM_H

#ifdef __cplusplus
extern "C" {
#endif

/* out(:, t) = x(:, t) * rstd[t] * w
 *   x, out: (C, T), out may be x;  w: (C);  rstd: (T), written
 *   rstd[t] = 1 / sqrt(sum_i x(i, t)^2 / C + eps), the statistics in fp32 */
void tsr_cpu_rmsnorm_fwd(int C, int T, const float *x, const float *w, float eps, float *out,
                         float *rstd);

/* Backward of tsr_cpu_rmsnorm_fwd, both gradients ACCUMULATED (as LayerNorm's):
 *   dx(:, t) += rstd[t] * (w*dout(:, t) - xhat * mean_i(w*dout*xhat))
 *   dw       += sum_t dout(:, t) * xhat(:, t)
 * with xhat = x * rstd.
 *   dout, x, dx: (C, T);  w, dw: (C);  rstd: (T) from forward.
 * dx must not alias dout or x. */
void tsr_cpu_rmsnorm_bwd(int C, int T, const float *dout, const float *x, const float *w,
                         const float *rstd, float *dx, float *dw);

/* CUDA versions, device pointers, asynchronous on `stream`;
 * 0 or TSR_EDEVICE (kernels/cuda_status.h names the failure).
 * One warp per token. The backward's dw is a sum over the tokens in order,
 * one thread per channel, never float atomics: bitwise the same from run to
 * run. */
int tsr_cuda_rmsnorm_fwd(void *stream, int C, int T, const float *x, const float *w, float eps,
                         float *out, float *rstd);
int tsr_cuda_rmsnorm_bwd(void *stream, int C, int T, const float *dout, const float *x,
                         const float *w, const float *rstd, float *dx, float *dw);

/* Cost estimates for the task models (the convention of nn/ops.c: flops =
 * the floating-point operations the CPU kernel performs, sqrt and division
 * one each; bytes = what it reads plus what it writes, each tile once, a
 * tile read and written counting twice).
 * Forward per token: sum of squares (2C), mean, eps, sqrt, division (4),
 * output (2C); x read, out written, w read, rstd written. */
static inline double tsr_rmsnorm_fwd_flops(int C, int T)
{
    return (double)T * (4.0 * C + 4.0);
}
static inline double tsr_rmsnorm_fwd_bytes(int C, int T)
{
    return 4.0 * (2.0 * C * (double)T + C + T);
}
/* Backward per token: the reduction (4C: w*dout, xhat, product, add), its
 * mean (1), the update (8C: xhat 1, dw 2, dx 5); dout, x read, dx read and
 * written, w read, dw read and written, rstd read. */
static inline double tsr_rmsnorm_bwd_flops(int C, int T)
{
    return (double)T * (12.0 * C + 1.0);
}
static inline double tsr_rmsnorm_bwd_bytes(int C, int T)
{
    return 4.0 * (4.0 * C * (double)T + 3.0 * C + T);
}

#ifdef __cplusplus
}
#endif
#endif
