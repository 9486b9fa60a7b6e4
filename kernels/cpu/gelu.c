/* CPU GELU (tanh approximation), forward and backward. */
#include "kernels/gelu.h"

#include "kernels/cpu/vecmath.h"

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

/* 0.5 (1 + tanh(u)) = sigmoid(2u) = 1 / (1 + exp(-2u)): no cancellation
 * where tanh(u) is close to -1 (x below about -3), vectorizable, and within
 * 2 ulp of it (the exp's 1.4 ulp, one rounding of the sum and one of the
 * division).  The exp's argument is clamped to +-87: beyond, sigmoid is 1
 * exactly in fp32 or below 1.6e-38, and a NaN x comes through the products
 * with x of the callers. */
static inline float half_one_plus_tanh(float u)
{
    return 1.0f / (1.0f + tsr_vexpf_clamped(-2.0f * u));
}

/* x, out: (n) */
TSR_CPU_CLONES void tsr_cpu_gelu_fwd(size_t n, const float *x, float *out)
{
    for (size_t i = 0; i < n; i++) {
        float xi = x[i];
        float u = GELU_K * (xi + 0.044715f * xi * xi * xi);
        out[i] = xi * half_one_plus_tanh(u);
    }
}

/* x, dout, dx: (n).  With s = sigmoid(2u): 1 - tanh(u)^2 = 4 s (1 - s). */
TSR_CPU_CLONES void tsr_cpu_gelu_bwd(size_t n, const float *x, const float *dout, float *dx)
{
    for (size_t i = 0; i < n; i++) {
        float xi = x[i];
        float u = GELU_K * (xi + 0.044715f * xi * xi * xi);
        float sg = half_one_plus_tanh(u);
        float grad = sg + 2.0f * xi * sg * (1.0f - sg) * GELU_K * (1.0f + 3.0f * 0.044715f * xi * xi);
        dx[i] = grad * dout[i];
    }
}
