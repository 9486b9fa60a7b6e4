/* kernels/rope.h — rotary position embeddings (RoPE) for Q and K tiles, in
 * the Hugging Face Llama convention ("rotate_half": within each head of
 * dimension d, feature i pairs with feature i + d/2), with the frequency
 * table of plain RoPE or of Llama 3's rope_scaling.
 *
 *   for a head x of d features, at position p, for i < d/2, a = p * inv_freq[i]:
 *     x'[i]       = x[i] cos a - x[i + d/2] sin a
 *     x'[i + d/2] = x[i + d/2] cos a + x[i] sin a
 *   (x' = x*cos + rotate_half(x)*sin, rotate_half(x) = (-x[d/2:], x[:d/2]))
 *
 * The backward is the inverse rotation (sin -> -sin): the rotation is
 * orthogonal, so dx = R(p)^T dout.
 *
 * Must never: allocate or know about tasks.
 *
 * Memory order: x is (H*d, T) feature-major with leading dimension ld >= H*d:
 * token t's H heads at x + t*ld, head h's d features contiguous at
 * x + t*ld + h*d; token t is at position pos0 + t.  ld > H*d lets a kernel
 * rotate the Q or K rows of a fused projection in place.
 *
 * Precision: the frequency table is double and each angle p * inv_freq[i] is
 * formed and reduced modulo 2 pi in double before its cos and sin: an fp32
 * angle at p = 128k is off by up to 4e-3 rad (its ulp is 7.8e-3), which
 * the outputs would show at that size; here the outputs keep fp32 accuracy at
 * every position an int holds.
 */
#ifndef TSR_KERNELS_ROPE_H
#define TSR_KERNELS_ROPE_H

#include <math.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Llama 3's rope_scaling (config.json's "rope_type": "llama3"), e.g. Llama
 * 3.1: factor 8, low_freq_factor 1, high_freq_factor 4,
 * original_max_position_embeddings 8192. */
typedef struct {
    double factor;
    double low_freq_factor;
    double high_freq_factor;
    double original_max_position_embeddings;
} tsr_rope_llama3_t;

/* The frequency table, computed once on the host: inv_freq[i] for i < d/2,
 *   inv_freq[i] = theta^(-2i/d)
 * then, where `scaling` is not NULL, Llama 3's rule on each frequency, with
 * wavelen = 2 pi / inv_freq, low_wl = orig_max / low_freq_factor,
 * high_wl = orig_max / high_freq_factor:
 *   wavelen < high_wl          kept (high frequencies)
 *   wavelen > low_wl           inv_freq / factor (low frequencies)
 *   otherwise                  (1 - s) inv_freq / factor + s inv_freq,
 *                              s = (orig_max / wavelen - low_freq_factor)
 *                                  / (high_freq_factor - low_freq_factor)
 * Returns 0, or -1 (nothing written) for d odd or < 2, theta <= 1, or a
 * scaling with factor <= 0, orig_max <= 0 or high_freq_factor <=
 * low_freq_factor. */
static inline int tsr_rope_inv_freq(int d, double theta, const tsr_rope_llama3_t *scaling,
                                    double *inv_freq)
{
    if (d < 2 || d % 2 || !(theta > 1.0))
        return -1;
    if (scaling && !(scaling->factor > 0.0 && scaling->original_max_position_embeddings > 0.0 &&
                     scaling->high_freq_factor > scaling->low_freq_factor))
        return -1;
    const double two_pi = 6.283185307179586476925286766559;
    for (int i = 0; i < d / 2; i++) {
        double f = pow(theta, -2.0 * i / d);
        if (scaling) {
            double om = scaling->original_max_position_embeddings;
            double lo = scaling->low_freq_factor, hi = scaling->high_freq_factor;
            double wavelen = two_pi / f;
            if (wavelen > om / lo)
                f = f / scaling->factor;
            else if (!(wavelen < om / hi)) {
                double s = (om / wavelen - lo) / (hi - lo);
                f = (1.0 - s) * f / scaling->factor + s * f;
            }
        }
        inv_freq[i] = f;
    }
    return 0;
}

/* out = x rotated to positions pos0 .. pos0+T-1 (forward).
 *   x, out: (H*d, T), leading dimension ld (both); out may be x (in place).
 *   inv_freq: (d/2) from tsr_rope_inv_freq.  d even, pos0 >= 0. */
void tsr_cpu_rope_fwd(int d, int H, int T, int ld, int pos0, const double *inv_freq,
                      const float *x, float *out);
/* dx = dout rotated back (backward, WRITTEN): the inverse rotation.
 *   dout, dx: (H*d, T), leading dimension ld; dx may be dout. */
void tsr_cpu_rope_bwd(int d, int H, int T, int ld, int pos0, const double *inv_freq,
                      const float *dout, float *dx);

/* CUDA versions, device pointers (inv_freq too: the table uploaded once),
 * asynchronous on `stream`; 0 or TSR_EDEVICE (kernels/cuda_status.h names
 * the failure).  One thread per (frequency, token): the angle in double,
 * reduced to [-pi, pi] in double, then cosf/sinf, applied to the H heads. */
int tsr_cuda_rope_fwd(void *stream, int d, int H, int T, int ld, int pos0,
                      const double *inv_freq, const float *x, float *out);
int tsr_cuda_rope_bwd(void *stream, int d, int H, int T, int ld, int pos0,
                      const double *inv_freq, const float *dout, float *dx);

/* Cost estimates (the convention of nn/ops.c; cos and sin one each).  Per
 * token and frequency, as the CPU kernel: the angle (1), cos and sin (2), the
 * sign of the direction (1); per feature: two products and an add (3).  x read, out written
 * (the table is small and stays in cache: its d/2 doubles counted once). */
static inline double tsr_rope_flops(int d, int H, int T)
{
    return (double)T * (2.0 * d + 3.0 * (double)H * d);
}
static inline double tsr_rope_bytes(int d, int H, int T)
{
    return 8.0 * (double)H * d * T + 4.0 * d;
}

#ifdef __cplusplus
}
#endif
#endif
