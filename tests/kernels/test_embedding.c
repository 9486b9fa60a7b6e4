/* Embedding gather / scatter-add over several vocabulary tiles against double
 * loops: every token is looked up by exactly one tile, repeated tokens add up
 * in the gradient, outputs accumulate into non-zero buffers; the backward is
 * checked by finite differences of the double forward. */
#include "kernels/embedding.h"
#include "kt_util.h"

static void run(int C, int V, int T, const int *cuts, int ncuts, uint64_t salt)
{
    kt_rng r = kt_seed(salt);
    float *w = kt_rand(&r, (size_t)C * V, -1, 1);
    int32_t *tok = malloc(sizeof(int32_t) * T);
    for (int t = 0; t < T; t++)
        tok[t] = kt_randint(&r, 0, V);
    if (T > 3)
        tok[3] = tok[0]; /* a repeated token */
    float *out = kt_rand(&r, (size_t)C * T, -1, 1), *out0 = kt_dup(out, (size_t)C * T);
    float *dout = kt_rand(&r, (size_t)C * T, -1, 1);
    float *dw = kt_rand(&r, (size_t)C * V, -1, 1), *dw0 = kt_dup(dw, (size_t)C * V);
    for (int c = 0; c + 1 < ncuts; c++) {
        int v0 = cuts[c], nv = cuts[c + 1] - v0;
        /* a tile is the contiguous block of rows [v0, v0+nv) of the (C, V) table */
        tsr_cpu_embedding_fwd(C, T, nv, v0, tok, w + (size_t)v0 * C, out);
        tsr_cpu_embedding_bwd(C, T, nv, v0, tok, dout, dw + (size_t)v0 * C);
    }
    double *wo = kt_dalloc((size_t)C * T), *wd = kt_dalloc((size_t)C * V);
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++)
            wo[c + (size_t)t * C] = (double)out0[c + (size_t)t * C] + w[c + (size_t)tok[t] * C];
    kt_assert_close("embedding fwd", out, wo, (size_t)C * T, 1e-6, 1e-6);
    /* dL/dw for L = sum dout .* (gather(w) + out0), by central differences */
    for (size_t e = 0; e < (size_t)C * V; e++) {
        double h = 1e-3, lp = 0, lm = 0;
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                size_t we = c + (size_t)tok[t] * C;
                double wv = w[we];
                lp += dout[c + (size_t)t * C] * (wv + (we == e ? h : 0));
                lm += dout[c + (size_t)t * C] * (wv - (we == e ? h : 0));
            }
        wd[e] = dw0[e] + (lp - lm) / (2 * h);
    }
    kt_assert_close("embedding bwd vs finite differences", dw, wd, (size_t)C * V, 1e-5, 1e-5);
    free(w), free(tok), free(out), free(out0), free(dout), free(dw), free(dw0), free(wo), free(wd);
}

Test(embedding, one_tile_and_awkward_shapes)
{
    const int c1[] = {0, 1};
    run(1, 1, 1, c1, 2, 61);
    const int c2[] = {0, 13};
    run(7, 13, 9, c2, 2, 62);
}

Test(embedding, several_vocab_tiles)
{
    const int cuts[] = {0, 7, 16, 23};
    run(5, 23, 19, cuts, 4, 63);
    const int cuts2[] = {0, 1, 2, 40};
    run(64, 40, 33, cuts2, 4, 64);
}
