/* CUDA RoPE (Hugging Face Llama's rotate_half pairing) over (H*d, T) tiles:
 * one thread per (frequency, token), the angle formed and reduced modulo
 * 2 pi in double, then cosf/sinf of the reduced fp32 angle (within 2 ulp),
 * applied to the pair (i, i + d/2) of each of the H heads. */
#include "kernels/rope.h"
#include "kernels/cuda/common.cuh"

/* x, out: (H*d, T), leading dimension ld; inv_freq: (d/2) doubles */
__global__ void k_rope(int d, int H, int T, int ld, int pos0, const double *inv_freq,
                       const float *x, float *out, float sgn)
{
    int half = d / 2;
    size_t n = (size_t)half * T, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += stride) {
        int t = (int)(k / (size_t)half), i = (int)(k % (size_t)half);
        double a = ((double)pos0 + t) * inv_freq[i];
        const double two_pi = 6.283185307179586476925286766559;
        a -= two_pi * rint(a * (1.0 / two_pi)); /* in [-pi, pi], error ~1e-16 * |a| */
        float r = (float)a, cs = cosf(r), sn = sgn * sinf(r);
        const float *xt = x + (size_t)t * ld + i;
        float *ot = out + (size_t)t * ld + i;
        for (int h = 0; h < H; h++) {
            float a1 = xt[(size_t)h * d], a2 = xt[(size_t)h * d + half];
            ot[(size_t)h * d] = a1 * cs - a2 * sn;
            ot[(size_t)h * d + half] = a2 * cs + a1 * sn;
        }
    }
}

static int launch(void *stream, int d, int H, int T, int ld, int pos0, const double *inv_freq,
                  const float *x, float *out, float sgn)
{
    if (d < 2 || H <= 0 || T <= 0)
        return 0;
    size_t n = (size_t)(d / 2) * T;
    TSR_LAUNCH(k_rope, tsr_blocks(n, 128), 128, 0, TSR_STREAM(stream), d, H, T, ld, pos0,
               inv_freq, x, out, sgn);
    return tsr_cuda_launched("k_rope");
}

int tsr_cuda_rope_fwd(void *stream, int d, int H, int T, int ld, int pos0,
                      const double *inv_freq, const float *x, float *out)
{
    return launch(stream, d, H, T, ld, pos0, inv_freq, x, out, 1.0f);
}

int tsr_cuda_rope_bwd(void *stream, int d, int H, int T, int ld, int pos0,
                      const double *inv_freq, const float *dout, float *dx)
{
    return launch(stream, d, H, T, ld, pos0, inv_freq, dout, dx, -1.0f);
}
