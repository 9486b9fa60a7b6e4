/* CPU GELU (tanh approximation), forward and backward. */
#include "kernels/gelu.h"

#include "kernels/cpu/vecmath.h"

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

/* 0.5 (1 + tanh(u)) = sigmoid(2u) = 1 / (1 + exp(-2u)): no cancellation
 * where tanh(u) is close to -1 (x below about -3), vectorizable through
 * tsr_vexpf, and exact limits 0 and 1. */
static inline float half_one_plus_tanh(float u)
{
    return 1.0f / (1.0f + tsr_vexpf(-2.0f * u));
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
