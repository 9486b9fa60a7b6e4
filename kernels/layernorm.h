/* kernels/layernorm.h — LayerNorm over the feature dimension of activation
 * tiles, forward (saving mean and rstd for backward) and backward, each one
 * fused pass over the tile; and the pieces of a LayerNorm whose features are
 * cut into row tiles (channel tiles): per-tile partial sums, their combine
 * in a fixed order, and the per-tile apply steps.
 *
 * Must never: allocate, know about tasks, or normalise over a partial feature
 * range in one call (the fused kernels need the whole feature dimension C of
 * their tokens in one tile; the row-tile kernels take the statistics of all
 * C features from the combine, never from their own tile).
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

/* ---- row tiles (channel tiles) ------------------------------------------
 * x (C, N) cut into R row tiles of M features (the last possibly smaller);
 * the kernels below see one tile (M, T): its M features of T tokens, ld = M.
 * A LayerNorm over them, per token (all sums in a fixed order):
 *   forward:  part_a = sum_i x_a               → mean = combine(part_0..R-1) / C
 *             part_a = sum_i (x_a - mean)^2    → rstd = 1 / sqrt(combine / C + eps)
 *             out_a = (x_a - mean) rstd gamma_a + beta_a
 *   backward: part_a = (sum_i g, sum_i g xhat) with g = gamma_a dout_a,
 *             xhat = (x_a - mean) rstd         → (ma, mb) = combine / C
 *             dx_a += rstd (g - ma - xhat mb), dgamma_a += sum_t dout xhat,
 *             dbeta_a += sum_t dout
 * The combine adds up to TSR_LN_PARTS partials per call, after what acc
 * holds (a chain of calls over R > TSR_LN_PARTS partials sums in the same
 * order as one call would). */

#define TSR_LN_PARTS 15 /* partials per combine call: a task's other buffers */

/* What the combine's last call makes of the sums. */
enum {
    TSR_LN_FIN_NONE = 0, /* acc = the sum (more calls follow) */
    TSR_LN_FIN_MEAN = 1, /* acc = sum / C */
    TSR_LN_FIN_RSTD = 2, /* acc = 1 / sqrt(sum / C + eps) */
};

/* part[t] = sum_i x(i, t)                       (mean NULL)
 * part[t] = sum_i (x(i, t) - mean[t])^2         (mean given)
 *   x: (M, T);  mean: (T) or NULL;  part: (T), written */
void tsr_cpu_layernorm_part(int M, int T, const float *x, const float *mean, float *part);

/* part[t]     = sum_i gamma[i] dout(i, t)
 * part[T + t] = sum_i gamma[i] dout(i, t) (x(i, t) - mean[t]) rstd[t]
 *   dout, x: (M, T);  gamma: (M);  mean, rstd: (T);  part: (2T), written */
void tsr_cpu_layernorm_part_grad(int M, int T, const float *dout, const float *x,
                                 const float *gamma, const float *mean, const float *rstd,
                                 float *part);

/* acc[i] = (init ? 0 : acc[i]) + parts[0][i] + … + parts[k-1][i], in that
 * order, then finished by `fin` (TSR_LN_FIN_*, over C features, eps).
 *   acc: (n);  parts: k (1 to TSR_LN_PARTS) arrays of (n) */
void tsr_cpu_layernorm_combine(int n, int k, const float *const *parts, int init, int fin,
                               int C, float eps, float *acc);

/* out(i, t) = (x(i, t) - mean[t]) * rstd[t] * gamma[i] + beta[i]
 *   x, out: (M, T), out may be x;  gamma, beta: (M);  mean, rstd: (T) */
void tsr_cpu_layernorm_apply(int M, int T, const float *x, const float *gamma,
                             const float *beta, const float *mean, const float *rstd,
                             float *out);

/* With xhat = (x - mean) rstd, ma = m2[t], mb = m2[T + t] (the combined
 * means of tsr_cpu_layernorm_part_grad), all ACCUMULATED:
 *   dx(i, t) += rstd[t] (gamma[i] dout(i, t) - ma - xhat(i, t) mb)
 *   dgamma[i] += sum_t dout(i, t) xhat(i, t),  dbeta[i] += sum_t dout(i, t)
 *   dout, x, dx: (M, T);  gamma, dgamma, dbeta: (M);  mean, rstd: (T);
 *   m2: (2T).  dx must not alias dout or x. */
void tsr_cpu_layernorm_apply_grad(int M, int T, const float *dout, const float *x,
                                  const float *gamma, const float *mean, const float *rstd,
                                  const float *m2, float *dx, float *dgamma, float *dbeta);

/* CUDA versions of the row-tile kernels (device pointers, asynchronous on
 * `stream`; 0 or TSR_EDEVICE): one warp per token for the partial sums, one
 * thread per value for the combine, per element for the applies, and one
 * thread per channel over the tokens in order for dgamma and dbeta (no
 * float atomics: bitwise the same from run to run). */
int tsr_cuda_layernorm_part(void *stream, int M, int T, const float *x, const float *mean,
                            float *part);
int tsr_cuda_layernorm_part_grad(void *stream, int M, int T, const float *dout, const float *x,
                                 const float *gamma, const float *mean, const float *rstd,
                                 float *part);
int tsr_cuda_layernorm_combine(void *stream, int n, int k, const float *const *parts, int init,
                               int fin, int C, float eps, float *acc);
int tsr_cuda_layernorm_apply(void *stream, int M, int T, const float *x, const float *gamma,
                             const float *beta, const float *mean, const float *rstd,
                             float *out);
int tsr_cuda_layernorm_apply_grad(void *stream, int M, int T, const float *dout, const float *x,
                                  const float *gamma, const float *mean, const float *rstd,
                                  const float *m2, float *dx, float *dgamma, float *dbeta);

#ifdef __cplusplus
}
#endif
#endif
