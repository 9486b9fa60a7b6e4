/* CUDA token embedding: gather forward; scatter-add backward with atomics
 * (repeated tokens in one tile add into the same row). */
#include "kernels/embedding.h"
#include "kernels/cuda/common.cuh"

/* tokens: (T), w: (C, nv), out: (C, T); blocks over tokens, threads over C */
__global__ void k_emb_fwd(int C, int T, int nv, int v0, const int32_t *tokens, const float *w,
                          float *out)
{
    for (int t = blockIdx.y; t < T; t += gridDim.y) {
        int64_t r = (int64_t)tokens[t] - v0;
        if (r < 0 || r >= nv)
            continue;
        const float *wr = w + (size_t)r * C;
        float *ot = out + (size_t)t * C;
        for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x)
            ot[c] += wr[c];
    }
}

/* tokens: (T), dout: (C, T), dw: (C, nv) */
__global__ void k_emb_bwd(int C, int T, int nv, int v0, const int32_t *tokens, const float *dout,
                          float *dw)
{
    for (int t = blockIdx.y; t < T; t += gridDim.y) {
        int64_t r = (int64_t)tokens[t] - v0;
        if (r < 0 || r >= nv)
            continue;
        float *wr = dw + (size_t)r * C;
        const float *dt = dout + (size_t)t * C;
        for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x)
            atomicAdd(&wr[c], dt[c]);
    }
}

static dim3 grid_of(int C, int T)
{
    int bx = (C + 255) / 256;
    return dim3(bx < 16 ? bx : 16, T < 65535 ? T : 65535);
}

int tsr_cuda_embedding_fwd(void *stream, int C, int T, int nv, int v0, const int32_t *tokens,
                           const float *w, float *out)
{
    if (C <= 0 || T <= 0 || nv <= 0)
        return 0;
    TSR_LAUNCH(k_emb_fwd, grid_of(C, T), 256, 0, TSR_STREAM(stream), C, T, nv, v0, tokens, w, out);
    return tsr_cuda_launched("k_emb_fwd");
}

int tsr_cuda_embedding_bwd(void *stream, int C, int T, int nv, int v0, const int32_t *tokens,
                           const float *dout, float *dw, int deterministic)
{
    if (C <= 0 || T <= 0 || nv <= 0)
        return 0;
    /* deterministic: one block row, so each (row, channel) of dw is summed by
     * one thread, token after token */
    dim3 g = grid_of(C, T);
    if (deterministic)
        g.y = 1;
    TSR_LAUNCH(k_emb_bwd, g, 256, 0, TSR_STREAM(stream), C, T, nv, v0, tokens, dout, dw);
    return tsr_cuda_launched("k_emb_bwd");
}
