/* kernels/layernorm.h — LayerNorm over the feature dimension of activation
 * tiles, forward (saving mean and rstd for backward) and backward, each one
 * fused pass over the tile.
 *
 * Must never: allocate, know about tasks, or normalise over a partial feature
 * range (a tile must hold the whole feature dimension C of its tokens).
 *
 * Memory order: x is (C, T) column-major with ld = C: token t's C features are
 * contiguous at x + t*C (the bytes of PyTorch's row-major (T, C)).
 */
#ifndef TSR_KERNELS_LAYERNORM_H
#define TSR_KERNELS_LAYERNORM_H

#ifdef __cplusplus
extern "C" {
#endif

/* out(:, t) = (x(:, t) - mean[t]) * rstd[t] * gamma + beta
 *   x, out: (C, T), out may be x;  gamma, beta: (C);  mean, rstd: (T), written
 *   mean[t] = sum_i x(i, t) / C,  rstd[t] = 1 / sqrt(var[t] + eps)  (biased variance) */
void tsr_cpu_layernorm_fwd(int C, int T, const float *x, const float *gamma,
                           const float *beta, float eps, float *out, float *mean, float *rstd);

/* Backward of tsr_cpu_layernorm_fwd, all three gradients ACCUMULATED:
 *   dx(:, t) += rstd[t] * (gamma*dout(:, t) - mean_i(gamma*dout) - xhat * mean_i(gamma*dout*xhat))
 *   dgamma   += sum_t dout(:, t) * xhat(:, t)
 *   dbeta    += sum_t dout(:, t)
 * with xhat = (x - mean) * rstd.
 *   dout, x, dx: (C, T);  gamma, dgamma, dbeta: (C);  mean, rstd: (T) from forward.
 * dx must not alias dout or x. */
void tsr_cpu_layernorm_bwd(int C, int T, const float *dout, const float *x,
                           const float *gamma, const float *mean, const float *rstd,
                           float *dx, float *dgamma, float *dbeta);

/* CUDA versions, device pointers, asynchronous on `stream`;
 * 0 or TSR_EDEVICE (kernels/cuda_status.h names the failure).
 * One warp per token, float4 loads and stores where C is a multiple of 4 (at
 * most 1024) and every pointer is 16-byte aligned. The backward's dgamma and
 * dbeta are sums in a fixed order, never float atomics: bitwise the same from
 * run to run whatever `deterministic` says (kept for the callers; the float4
 * path needs a per-stream scratch buffer, kernels/cuda/scratch.cuh). */
int tsr_cuda_layernorm_fwd(void *stream, int C, int T, const float *x, const float *gamma,
                           const float *beta, float eps, float *out, float *mean, float *rstd);
int tsr_cuda_layernorm_bwd(void *stream, int C, int T, const float *dout, const float *x,
                           const float *gamma, const float *mean, const float *rstd,
                           float *dx, float *dgamma, float *dbeta, int deterministic);

#ifdef __cplusplus
}
#endif
#endif
