/* CUDA RMSNorm, SwiGLU and RoPE against the double references of their CPU
 * tests (kt_llama_ref.h) on odd shapes; device outputs poisoned with NaN
 * bytes (or, for accumulated outputs, random starting values).  Tolerances
 * as the CPU tests (their files say why), except RoPE's: cosf/sinf of the
 * fp32-rounded reduced angle (2 ulp each, the rounding of the angle 2^-24
 * pi) give about 2e-7 per factor, x2 for the two terms and |x| <= 2: 3e-6
 * absolute.  Skipped visibly without a GPU. */
#include <limits.h>

#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "kt_cuda.h"
#include "kt_llama_ref.h"

Test(cuda_rmsnorm, forward_backward_against_double)
{
    KT_REQUIRE_GPU();
    void *st = kt_stream();
    kt_rng r = kt_seed(450);
    /* C off a warp (1, 7, 33), T = 1, T off the block's 8 warps and more
     * tokens than the backward's 256 blocks of 8 warps cover (2100 x 1 ...) */
    const int shapes[][2] = {{1, 1}, {7, 5}, {33, 1}, {768, 3}, {130, 17}, {8, 2100}};
    const float eps = 1e-5f;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int C = shapes[s][0], T = shapes[s][1];
        size_t n = (size_t)C * T;
        float *x = kt_rand(&r, n, -2, 3), *w = kt_rand(&r, C, 0.5, 1.5);
        float *dout = kt_rand(&r, n, -1, 1), *dx = kt_rand(&r, n, -1, 1), *dw = kt_rand(&r, C, -1, 1);
        double *xd = kt_to_d(x, n), *wd = kt_to_d(w, C), *dd = kt_to_d(dout, n);
        double *wo = kt_dalloc(n), *wr = kt_dalloc(T), *wdx = kt_to_d(dx, n), *wdw = kt_to_d(dw, C);
        kt_ref_rms_fwd(C, T, xd, wd, eps, wo, wr);
        kt_ref_rms_bwd(C, T, dd, xd, wd, eps, wdx, wdw);
        float *d_x = kt_to_dev(x, n), *d_w = kt_to_dev(w, C), *d_out = kt_dev(n), *d_rs = kt_dev(T);
        float *d_dout = kt_to_dev(dout, n), *d_dx = kt_to_dev(dx, n), *d_dw = kt_to_dev(dw, C);
        KT_CUDA_OK(tsr_cuda_rmsnorm_fwd(st, C, T, d_x, d_w, eps, d_out, d_rs));
        KT_CUDA_OK(tsr_cuda_rmsnorm_bwd(st, C, T, d_dout, d_x, d_w, d_rs, d_dx, d_dw));
        float *g = kt_from_dev(d_out, n);
        kt_assert_close("cuda rmsnorm out", g, wo, n, 1e-6, 1e-5);
        free(g);
        g = kt_from_dev(d_rs, T);
        kt_assert_close("cuda rmsnorm rstd", g, wr, T, 0, 1e-5);
        free(g);
        g = kt_from_dev(d_dx, n);
        kt_assert_close("cuda rmsnorm dx", g, wdx, n, 2e-5, 1e-4);
        free(g);
        g = kt_from_dev(d_dw, C);
        kt_assert_close("cuda rmsnorm dw", g, wdw, C, 1e-5 * T, 1e-4);
        /* dw: a sum in a fixed order, the same bits on a second run */
        kt_upload(d_dw, dw, C);
        KT_CUDA_OK(tsr_cuda_rmsnorm_bwd(st, C, T, d_dout, d_x, d_w, d_rs, d_dx, d_dw));
        float *g2 = kt_from_dev(d_dw, C);
        cr_assert_eq(memcmp(g, g2, C * sizeof *g), 0, "dw differs between two runs");
        free(g), free(g2);
        cudaFree(d_x), cudaFree(d_w), cudaFree(d_out), cudaFree(d_rs), cudaFree(d_dout);
        cudaFree(d_dx), cudaFree(d_dw);
        free(x), free(w), free(dout), free(dx), free(dw), free(xd), free(wd), free(dd), free(wo);
        free(wr), free(wdx), free(wdw);
    }
    cudaStreamDestroy((cudaStream_t)st);
}

Test(cuda_swiglu, fused_layout_and_large_gate_values)
{
    KT_REQUIRE_GPU();
    void *st = kt_stream();
    kt_rng r = kt_seed(451);
    /* F, T; fused: one (2F, T) gate|up tile (ld 2F) and its gradient likewise */
    const int shapes[][2] = {{1, 1}, {7, 5}, {33, 1}, {130, 17}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int F = shapes[s][0], T = shapes[s][1], ld = 2 * F;
        size_t nb = (size_t)ld * T, n = (size_t)F * T;
        float *gu = kt_rand(&r, nb, -2, 2), *dh = kt_rand(&r, n, -1, 1);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < F; i++) /* gates over a wide range, both tails */
                gu[i + (size_t)t * ld] = (s == 3 && i < 16) ? (i % 2 ? -1.0f : 1.0f) *
                                                                   powf(10.0f, (float)(i / 2) * 0.5f + 1.0f)
                                                            : kt_unif(&r, -8, 8);
        double *wh = kt_dalloc(n), *wdg = kt_dalloc(n), *wdu = kt_dalloc(n);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < F; i++) {
                size_t k = i + (size_t)t * F;
                double g = gu[i + (size_t)t * ld], u = gu[F + i + (size_t)t * ld], d = dh[k];
                wh[k] = kt_ref_swiglu(g, u);
                wdg[k] = d * u * kt_ref_dsilu(g);
                wdu[k] = d * g * kt_ref_sigmoid(g);
            }
        float *d_gu = kt_to_dev(gu, nb), *d_dh = kt_to_dev(dh, n), *d_h = kt_dev(n);
        float *d_dgu = kt_dev(nb);
        KT_CUDA_OK(tsr_cuda_swiglu_fwd(st, F, T, d_gu, ld, d_gu + F, ld, d_h, F));
        KT_CUDA_OK(tsr_cuda_swiglu_bwd(st, F, T, d_gu, ld, d_gu + F, ld, d_dh, F, d_dgu, ld,
                                       d_dgu + F, ld));
        float *h = kt_from_dev(d_h, n), *dgu = kt_from_dev(d_dgu, nb);
        float *dg = kt_alloc(n), *du = kt_alloc(n);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < F; i++)
                dg[i + (size_t)t * F] = dgu[i + (size_t)t * ld],
                du[i + (size_t)t * F] = dgu[F + i + (size_t)t * ld];
        kt_assert_close("cuda swiglu h", h, wh, n, 1e-30, 1e-6);
        kt_assert_close("cuda swiglu dg", dg, wdg, n, 2e-6, 4e-6);
        kt_assert_close("cuda swiglu du", du, wdu, n, 1e-30, 1e-6);
        cudaFree(d_gu), cudaFree(d_dh), cudaFree(d_h), cudaFree(d_dgu);
        free(gu), free(dh), free(wh), free(wdg), free(wdu), free(h), free(dgu), free(dg), free(du);
    }
    cudaStreamDestroy((cudaStream_t)st);
}

Test(cuda_rope, forward_backward_against_double)
{
    KT_REQUIRE_GPU();
    void *st = kt_stream();
    kt_rng r = kt_seed(452);
    /* d, H, T, ld - H*d, pos0, Llama 3 scaling */
    const int cases[][6] = {{2, 1, 1, 0, 0, 0},         {6, 3, 5, 0, 7, 0},
                            {10, 5, 4, 3, 100, 0},      {128, 3, 2, 0, 131000, 1},
                            {64, 1, 2, 0, INT_MAX - 1, 1}, {96, 7, 1, 0, 4096, 1}};
    tsr_rope_llama3_t sc = {8.0, 1.0, 4.0, 8192.0};
    for (size_t s = 0; s < sizeof cases / sizeof cases[0]; s++) {
        int d = cases[s][0], H = cases[s][1], T = cases[s][2], ld = H * d + cases[s][3];
        int pos0 = cases[s][4], Hd = H * d;
        double *f = kt_dalloc(d / 2);
        cr_assert_eq(tsr_rope_inv_freq(d, cases[s][5] ? 500000.0 : 10000.0,
                                       cases[s][5] ? &sc : NULL, f), 0);
        size_t nb = (size_t)ld * T, n = (size_t)Hd * T;
        float *x = kt_rand(&r, nb, -2, 2);
        double *xd = kt_to_d(x, nb), *wo = kt_dalloc(nb), *wb = kt_dalloc(nb);
        kt_ref_rope(d, H, T, ld, pos0, f, xd, wo, 1.0);
        kt_ref_rope(d, H, T, ld, pos0, f, xd, wb, -1.0);
        double *wod = kt_dalloc(n), *wbd = kt_dalloc(n);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < Hd; i++)
                wod[i + (size_t)t * Hd] = wo[i + (size_t)t * ld],
                wbd[i + (size_t)t * Hd] = wb[i + (size_t)t * ld];
        double *d_f = NULL;
        KT_CUDA_OK(cudaMalloc((void **)&d_f, (size_t)(d / 2) * sizeof(double)));
        KT_CUDA_OK(cudaMemcpy(d_f, f, (size_t)(d / 2) * sizeof(double), cudaMemcpyHostToDevice));
        float *d_x = kt_to_dev(x, nb), *d_o = kt_dev(nb), *d_b = kt_dev(nb);
        KT_CUDA_OK(tsr_cuda_rope_fwd(st, d, H, T, ld, pos0, d_f, d_x, d_o));
        KT_CUDA_OK(tsr_cuda_rope_bwd(st, d, H, T, ld, pos0, d_f, d_x, d_b));
        float *o = kt_from_dev(d_o, nb), *b = kt_from_dev(d_b, nb), *dense = kt_alloc(n);
        for (int t = 0; t < T; t++)
            memcpy(dense + (size_t)t * Hd, o + (size_t)t * ld, Hd * sizeof(float));
        kt_assert_close("cuda rope fwd", dense, wod, n, 3e-6, 1e-6);
        for (int t = 0; t < T; t++)
            memcpy(dense + (size_t)t * Hd, b + (size_t)t * ld, Hd * sizeof(float));
        kt_assert_close("cuda rope bwd", dense, wbd, n, 3e-6, 1e-6);
        /* in place */
        KT_CUDA_OK(tsr_cuda_rope_fwd(st, d, H, T, ld, pos0, d_f, d_x, d_x));
        free(o);
        o = kt_from_dev(d_x, nb);
        for (int t = 0; t < T; t++)
            memcpy(dense + (size_t)t * Hd, o + (size_t)t * ld, Hd * sizeof(float));
        kt_assert_close("cuda rope fwd in place", dense, wod, n, 3e-6, 1e-6);
        cudaFree(d_f), cudaFree(d_x), cudaFree(d_o), cudaFree(d_b);
        free(f), free(x), free(xd), free(wo), free(wb), free(wod), free(wbd), free(o), free(b);
        free(dense);
    }
    cudaStreamDestroy((cudaStream_t)st);
}
