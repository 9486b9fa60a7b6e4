/* CUDA cross-entropy on a vocabulary tile given the full-vocabulary lse. */
#include <math.h>

#include "kernels/crossentropy.h"
#include "kernels/cuda/common.cuh"

/* logits: (nv, T) with ld; lse, targets, loss: (T) */
__global__ void k_ce_fwd(int nv, int T, int v0, const float *logits, int ld, const float *lse,
                         const int32_t *targets, float *loss)
{
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < T; t += gridDim.x * blockDim.x) {
        int64_t r = (int64_t)targets[t] - v0;
        if (targets[t] >= 0 && r >= 0 && r < nv)
            loss[t] += lse[t] - logits[(size_t)r + (size_t)t * ld];
    }
}

/* logits, dlogits: (nv, T) with ld, ldd; threads over the vocabulary
 * (coalesced), blocks over tokens */
__global__ void k_ce_bwd(int nv, int T, int v0, const float *logits, int ld, const float *lse,
                         const int32_t *targets, float scale, float *dlogits, int ldd)
{
    for (int t = blockIdx.y; t < T; t += gridDim.y) {
        const float *xt = logits + (size_t)t * ld;
        float *dt = dlogits + (size_t)t * ldd;
        int tg = targets[t];
        float l = lse[t];
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < nv; i += gridDim.x * blockDim.x) {
            float g = tg < 0 ? 0.0f : scale * (expf(xt[i] - l) - (v0 + i == tg ? 1.0f : 0.0f));
            dt[i] = g;
        }
    }
}

int tsr_cuda_crossentropy_fwd(void *stream, int nv, int T, int v0, const float *logits, int ld,
                              const float *lse, const int32_t *targets, float *loss)
{
    if (T <= 0 || nv <= 0)
        return 0;
    TSR_LAUNCH(k_ce_fwd, tsr_blocks((size_t)T, 256), 256, 0, TSR_STREAM(stream), nv, T, v0, logits,
               ld, lse, targets, loss);
    return tsr_cuda_launched("k_ce_fwd");
}

int tsr_cuda_crossentropy_bwd(void *stream, int nv, int T, int v0, const float *logits, int ld,
                              const float *lse, const int32_t *targets, float scale,
                              float *dlogits, int ldd)
{
    if (T <= 0 || nv <= 0)
        return 0;
    int bx = (nv + 255) / 256;
    dim3 grid(bx < 32 ? bx : 32, T < 65535 ? T : 65535);
    TSR_LAUNCH(k_ce_bwd, grid, 256, 0, TSR_STREAM(stream), nv, T, v0, logits, ld, lse, targets,
               scale, dlogits, ldd);
    return tsr_cuda_launched("k_ce_bwd");
}
