/* tests/kernels/kt_llama_ref.h — naive double-precision references of the
 * Llama decoder's kernels (RMSNorm, SwiGLU, RoPE), forward and backward,
 * shared by their CPU tests and the CUDA tests: each a plain loop over the
 * formula, in double.
 *
 * Must never: call the code under test (references stay independent).
 */
#ifndef TSR_TESTS_KERNELS_KT_LLAMA_REF_H
#define TSR_TESTS_KERNELS_KT_LLAMA_REF_H

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

static inline double *kt_to_d(const float *x, size_t n)
{
    double *d = calloc(n ? n : 1, sizeof(double));
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

/* out = x / sqrt(mean(x^2) + eps) * w per token; rstd may be NULL */
static inline void kt_ref_rms_fwd(int C, int T, const double *x, const double *w, double eps,
                                  double *out, double *rstd)
{
    for (int t = 0; t < T; t++) {
        double ms = 0;
        for (int c = 0; c < C; c++)
            ms += x[c + (size_t)t * C] * x[c + (size_t)t * C];
        double rs = 1.0 / sqrt(ms / C + eps);
        for (int c = 0; c < C; c++)
            out[c + (size_t)t * C] = x[c + (size_t)t * C] * rs * w[c];
        if (rstd)
            rstd[t] = rs;
    }
}

/* The analytic gradient, ACCUMULATED into dx and dw (as the kernels):
 * with r = rstd, y_j = w_j x_j r, dr/dx_j = -r^3 x_j / C:
 *   dx_j += r w_j dy_j - x_j r^3 / C * sum_i dy_i w_i x_i
 *   dw_j += sum_t dy_j x_j r */
static inline void kt_ref_rms_bwd(int C, int T, const double *dy, const double *x,
                                  const double *w, double eps, double *dx, double *dw)
{
    for (int t = 0; t < T; t++) {
        const double *xt = x + (size_t)t * C, *dt = dy + (size_t)t * C;
        double ms = 0, s = 0;
        for (int c = 0; c < C; c++)
            ms += xt[c] * xt[c], s += dt[c] * w[c] * xt[c];
        double r = 1.0 / sqrt(ms / C + eps);
        for (int c = 0; c < C; c++) {
            dx[c + (size_t)t * C] += r * w[c] * dt[c] - xt[c] * r * r * r / C * s;
            dw[c] += dt[c] * xt[c] * r;
        }
    }
}

static inline double kt_ref_sigmoid(double g)
{
    return g >= 0 ? 1.0 / (1.0 + exp(-g)) : exp(g) / (1.0 + exp(g));
}

/* h = silu(g) u elementwise (dense (F, T): the tests handle leading dims) */
static inline double kt_ref_swiglu(double g, double u)
{
    return g * kt_ref_sigmoid(g) * u;
}

/* d silu(g) / dg = s + g s (1 - s) */
static inline double kt_ref_dsilu(double g)
{
    double s = kt_ref_sigmoid(g);
    return s + g * s * (1.0 - s);
}

/* RoPE of one (H*d, T) tile, leading dimension ld, at positions pos0 + t,
 * rotate_half pairing; sgn +1 forward, -1 inverse.  Entries of out outside
 * the heads are left alone. */
static inline void kt_ref_rope(int d, int H, int T, int ld, int pos0, const double *inv_freq,
                               const double *x, double *out, double sgn)
{
    int half = d / 2;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < d; i++) {
                double a = ((double)pos0 + t) * inv_freq[i % half];
                const double *xh = x + (size_t)t * ld + (size_t)h * d;
                /* rotate_half(x)[i] = -x[i + d/2] for i < d/2, x[i - d/2] above */
                double rot = i < half ? -xh[i + half] : xh[i - half];
                out[(size_t)t * ld + (size_t)h * d + i] = xh[i] * cos(a) + rot * sgn * sin(a);
            }
}

#endif
