/* CPU RoPE (Hugging Face Llama's rotate_half pairing) over (H*d, T) tiles:
 * per token, the cos and sin of a block of frequencies once, then every head
 * rotated with them. */
#include "kernels/rope.h"

#include <math.h>
#include <stddef.h>


enum { FBLOCK = 64 }; /* frequencies whose cos and sin are computed at once */

/* sgn = +1: forward rotation; -1: inverse */
static void rope(int d, int H, int T, int ld, int pos0, const double *inv_freq, const float *x,
                 float *out, float sgn)
{
    int half = d / 2;
    float cs[FBLOCK], sn[FBLOCK];
    for (int t = 0; t < T; t++) {
        double p = (double)pos0 + t;
        const float *xt = x + (size_t)t * ld;
        float *ot = out + (size_t)t * ld;
        for (int i0 = 0; i0 < half; i0 += FBLOCK) {
            int nb = half - i0 < FBLOCK ? half - i0 : FBLOCK;
            for (int k = 0; k < nb; k++) {
                /* double angle and double libm: exact to fp32 rounding at any p */
                double a = p * inv_freq[i0 + k];
                cs[k] = (float)cos(a);
                sn[k] = sgn * (float)sin(a);
            }
            for (int h = 0; h < H; h++) {
                const float *x1 = xt + (size_t)h * d + i0, *x2 = x1 + half;
                float *o1 = ot + (size_t)h * d + i0, *o2 = o1 + half;
                for (int k = 0; k < nb; k++) {
                    float a1 = x1[k], a2 = x2[k];
                    o1[k] = a1 * cs[k] - a2 * sn[k];
                    o2[k] = a2 * cs[k] + a1 * sn[k];
                }
            }
        }
    }
}

void tsr_cpu_rope_fwd(int d, int H, int T, int ld, int pos0, const double *inv_freq,
                      const float *x, float *out)
{
    rope(d, H, T, ld, pos0, inv_freq, x, out, 1.0f);
}

void tsr_cpu_rope_bwd(int d, int H, int T, int ld, int pos0, const double *inv_freq,
                      const float *dout, float *dx)
{
    rope(d, H, T, ld, pos0, inv_freq, dout, dx, -1.0f);
}
