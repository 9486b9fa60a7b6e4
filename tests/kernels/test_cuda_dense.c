/* CUDA GEMM (fp32, tf32, bf16), elementwise, GELU, LayerNorm, AdamW and
 * conversion kernels against the CPU kernels (themselves tested against
 * double references) on the same random inputs; device outputs poisoned with
 * NaN bytes; misaligned pointers exercise the scalar paths.  Skipped visibly
 * without a GPU. */
#include "kernels/adamw.h"
#include "kernels/convert.h"
#include "kernels/elementwise.h"
#include "kernels/gelu.h"
#include "kernels/gemm.h"
#include "kernels/layernorm.h"
#include "kt_cuda.h"

static void gemm_case(cublasHandle_t h, void *st, int mode, int ta, int tb, int m, int n, int k,
                      int batch, float alpha, float beta, double atol, uint64_t salt)
{
    kt_rng r = kt_seed(salt);
    int lda = (ta ? k : m) + 1, ldb = (tb ? n : k) + 2, ldc = m + 1;
    int64_t sa = (int64_t)lda * (ta ? m : k), sb = (int64_t)ldb * (tb ? k : n), sc = (int64_t)ldc * n;
    size_t na = sa * batch, nb = sb * batch, nc = sc * batch;
    float *a = kt_rand(&r, na, -1, 1), *b = kt_rand(&r, nb, -1, 1), *c = kt_rand(&r, nc, -1, 1);
    if (beta == 0.0f)
        kt_poison(c, nc);
    float *da = kt_to_dev(a, na), *db = kt_to_dev(b, nb), *dc = kt_to_dev(c, nc);
    tsr_cpu_gemm(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
    KT_CUDA_OK(tsr_cuda_gemm(st, h, mode, ta, tb, m, n, k, alpha, da, lda, sa, db, ldb, sb, beta,
                             dc, ldc, sc, batch));
    float *got = kt_from_dev(dc, nc);
    for (int bi = 0; bi < batch; bi++)
        for (int j = 0; j < n; j++) {
            size_t off = bi * sc + (size_t)j * ldc;
            kt_assert_close_f("cuda gemm", got + off, c + off, (size_t)m, atol, 1e-4);
        }
    cudaFree(da), cudaFree(db), cudaFree(dc), free(a), free(b), free(c), free(got);
}

Test(cuda_gemm, fp32_and_tf32)
{
    KT_REQUIRE_GPU();
    cublasHandle_t h;
    KT_CUDA_OK(cublasCreate(&h));
    void *st = kt_stream();
    /* k = 0: C = beta C; sizes off every multiple of 4, 8 and 32 */
    const int shapes[][3] = {{1, 1, 1}, {13, 17, 11}, {64, 48, 96}, {1, 33, 7}, {5, 3, 0},
                             {33, 65, 1}};
    uint64_t salt = 300;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                double katol = 1e-5 * (k + 1);
                gemm_case(h, st, TSR_GEMM_FP32, ta, tb, m, n, k, 2, 1.0f, 0.0f, katol, salt++);
                gemm_case(h, st, TSR_GEMM_FP32, ta, tb, m, n, k, 1, 0.5f, 1.0f, katol, salt++);
                /* tf32 keeps 10 mantissa bits of each input */
                gemm_case(h, st, TSR_GEMM_TF32, ta, tb, m, n, k, 2, 1.0f, 0.5f,
                          2e-3 * sqrt(k + 1), salt++);
                gemm_case(h, st, TSR_GEMM_TF32, ta, tb, m, n, k, 1, -1.0f, 0.0f,
                          2e-3 * sqrt(k + 1), salt++);
            }
    cublasDestroy(h);
    cudaStreamDestroy((cudaStream_t)st);
}

/* bf16 A and B (and C when c16), fp32 accumulation, against the CPU GEMM
 * on the bf16-rounded inputs, so that only accumulation and C's rounding
 * differ.  Stored shapes follow the transpositions; lda etc. are padded. */
static void gemm_bf16_case(cublasHandle_t h, void *st, int ta, int tb, int m, int n, int k,
                           int batch, int c16, uint64_t salt)
{
    kt_rng r = kt_seed(salt);
    int lda = (ta ? k : m) + 3, ldb = (tb ? n : k) + 1, ldc = m + 2;
    int64_t sa = (int64_t)lda * (ta ? m : k), sb = (int64_t)ldb * (tb ? k : n), sc = (int64_t)ldc * n;
    size_t na = sa * batch, nb = sb * batch, nc = sc * batch;
    float *a = kt_rand(&r, na, -1, 1), *b = kt_rand(&r, nb, -1, 1), *c = kt_rand(&r, nc, -1, 1);
    uint16_t *a16 = malloc(2 * na), *b16 = malloc(2 * nb), *c16v = malloc(2 * nc);
    tsr_cpu_f32_to_bf16(na, a, a16), tsr_cpu_bf16_to_f32(na, a16, a);
    tsr_cpu_f32_to_bf16(nb, b, b16), tsr_cpu_bf16_to_f32(nb, b16, b);
    tsr_cpu_f32_to_bf16(nc, c, c16v), tsr_cpu_bf16_to_f32(nc, c16v, c);
    void *da = kt_to_dev_bytes(a16, 2 * na), *db = kt_to_dev_bytes(b16, 2 * nb);
    void *dc = c16 ? kt_to_dev_bytes(c16v, 2 * nc) : (void *)kt_to_dev(c, nc);
    KT_CUDA_OK(tsr_cuda_gemm_bf16(st, h, ta, tb, m, n, k, 1.0f, da, lda, sa, db, ldb, sb, 0.5f,
                                  dc, c16, ldc, sc, batch));
    tsr_cpu_gemm(ta, tb, m, n, k, 1.0f, a, lda, sa, b, ldb, sb, 0.5f, c, ldc, sc, batch);
    float *got = kt_alloc(nc);
    KT_CUDA_OK(cudaDeviceSynchronize());
    if (c16) {
        KT_CUDA_OK(cudaMemcpy(c16v, dc, 2 * nc, cudaMemcpyDeviceToHost));
        tsr_cpu_bf16_to_f32(nc, c16v, got);
    } else {
        KT_CUDA_OK(cudaMemcpy(got, dc, 4 * nc, cudaMemcpyDeviceToHost));
    }
    for (int bi = 0; bi < batch; bi++)
        for (int j = 0; j < n; j++) {
            size_t off = bi * sc + (size_t)j * ldc;
            if (c16)
                kt_assert_close_f("bf16 gemm, bf16 C", got + off, c + off, (size_t)m, 1e-3,
                                  1.0 / 128);
            else
                kt_assert_close_f("bf16 gemm, fp32 C", got + off, c + off, (size_t)m,
                                  1e-5 * (k + 1), 1e-4);
        }
    cudaFree(da), cudaFree(db), cudaFree(dc);
    free(a), free(b), free(c), free(a16), free(b16), free(c16v), free(got);
}

Test(cuda_gemm, bf16_storage_fp32_accumulation)
{
    KT_REQUIRE_GPU();
    cublasHandle_t h;
    KT_CUDA_OK(cublasCreate(&h));
    void *st = kt_stream();
    uint64_t salt = 310;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int c16 = 0; c16 < 2; c16++) {
                gemm_bf16_case(h, st, ta, tb, 37, 29, 70, 3, c16, salt++); /* batched */
                gemm_bf16_case(h, st, ta, tb, 9, 1, 33, 1, c16, salt++);   /* one product */
            }
    cublasDestroy(h);
    cudaStreamDestroy((cudaStream_t)st);
}

Test(cuda_elementwise, flat_ops_aligned_and_misaligned)
{
    KT_REQUIRE_GPU();
    void *st = kt_stream();
    kt_rng r = kt_seed(320);
    const size_t sizes[] = {1, 7, 4096, 100003};
    for (int s = 0; s < 4; s++)
        for (int off = 0; off < 2; off++) { /* off = 1: pointers 4 bytes past 16-aligned */
            size_t n = sizes[s];
            float *x = kt_rand(&r, n, -1, 1), *y = kt_rand(&r, n, -1, 1), *z = kt_alloc(n);
            float *bx = kt_dev(n + 1), *by = kt_dev(n + 1), *bz = kt_dev(n + 1);
            float *dx = bx + off, *dy = by + off, *dz = bz + off;
            kt_upload(dx, x, n), kt_upload(dy, y, n);
            KT_CUDA_OK(tsr_cuda_fill(st, n, 3.5f, dz));
            float *g = kt_from_dev(dz, n);
            tsr_cpu_fill(n, 3.5f, z);
            kt_assert_close_f("fill", g, z, n, 0, 0);
            free(g);
            KT_CUDA_OK(tsr_cuda_copy(st, n, dx, dz));
            g = kt_from_dev(dz, n);
            kt_assert_close_f("copy", g, x, n, 0, 0);
            free(g);
            KT_CUDA_OK(tsr_cuda_scale(st, n, -1.5f, dx, dz));
            g = kt_from_dev(dz, n);
            tsr_cpu_scale(n, -1.5f, x, z);
            kt_assert_close_f("scale", g, z, n, 0, 1e-7);
            free(g);
            KT_CUDA_OK(tsr_cuda_axpy(st, n, 0.25f, dx, dz));
            g = kt_from_dev(dz, n);
            tsr_cpu_axpy(n, 0.25f, x, z);
            kt_assert_close_f("axpy", g, z, n, 1e-7, 1e-6);
            free(g);
            KT_CUDA_OK(tsr_cuda_add(st, n, dx, dy, dz));
            g = kt_from_dev(dz, n);
            tsr_cpu_add(n, x, y, z);
            kt_assert_close_f("add", g, z, n, 0, 1e-7);
            free(g);
            cudaFree(bx), cudaFree(by), cudaFree(bz), free(x), free(y), free(z);
        }
    cudaStreamDestroy((cudaStream_t)st);
}

Test(cuda_elementwise, bias_add_and_sum_axis)
{
    KT_REQUIRE_GPU();
    void *st = kt_stream();
    kt_rng r = kt_seed(330);
    /* {m, n, ld - m}: empty sums (m = 0: y = beta y; n = 0), m off a warp */
    const int shapes[][3] = {{1, 1, 0}, {7, 3, 1}, {768, 40, 0}, {33, 1000, 2}, {0, 5, 1},
                             {5, 0, 0}, {65, 9, 3}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int axis = 0; axis < 2; axis++) {
            int m = shapes[s][0], n = shapes[s][1], ld = m + shapes[s][2], nv = axis ? n : m;
            size_t nx = (size_t)ld * n;
            float *x = kt_rand(&r, nx, -1, 1), *b = kt_rand(&r, nv, -1, 1), *y = kt_rand(&r, nv, -1, 1);
            float *dx = kt_to_dev(x, nx), *db = kt_to_dev(b, nv), *dy = kt_to_dev(y, nv);
            KT_CUDA_OK(tsr_cuda_bias_add(st, axis, m, n, db, dx, ld));
            tsr_cpu_bias_add(axis, m, n, b, x, ld);
            float *g = kt_from_dev(dx, nx);
            kt_assert_close_f("bias_add", g, x, nx, 1e-7, 1e-7);
            free(g);
            KT_CUDA_OK(tsr_cuda_sum_axis(st, axis, m, n, 2.0f, dx, ld, 1.0f, dy));
            tsr_cpu_sum_axis(axis, m, n, 2.0f, x, ld, 1.0f, y);
            g = kt_from_dev(dy, nv);
            kt_assert_close_f("sum_axis beta=1", g, y, nv, 1e-5 * (n > m ? n : m), 1e-5);
            free(g);
            KT_CUDA_OK(cudaMemset(dy, 0xff, nv * sizeof(float)));
            KT_CUDA_OK(tsr_cuda_sum_axis(st, axis, m, n, 1.0f, dx, ld, 0.0f, dy));
            tsr_cpu_sum_axis(axis, m, n, 1.0f, x, ld, 0.0f, y);
            g = kt_from_dev(dy, nv);
            kt_assert_close_f("sum_axis beta=0", g, y, nv, 1e-5 * (n > m ? n : m), 1e-5);
            free(g);
            cudaFree(dx), cudaFree(db), cudaFree(dy), free(x), free(b), free(y);
        }
    cudaStreamDestroy((cudaStream_t)st);
}

Test(cuda_gelu, forward_backward)
{
    KT_REQUIRE_GPU();
    void *st = kt_stream();
    kt_rng r = kt_seed(340);
    const size_t sizes[] = {1, 13, 65536 + 3};
    for (int s = 0; s < 6; s++) {
        /* odd s: every pointer 4 bytes past 16-aligned (the scalar path) */
        size_t n = sizes[s / 2], off = (size_t)(s & 1);
        float *x = kt_rand(&r, n, -8, 8), *g = kt_rand(&r, n, -1, 1), *y = kt_alloc(n);
        float *bx = kt_dev(n + 1), *bg = kt_dev(n + 1), *by = kt_dev(n + 1);
        float *dx = bx + off, *dg = bg + off, *dy = by + off;
        kt_upload(dx, x, n), kt_upload(dg, g, n);
        KT_CUDA_OK(tsr_cuda_gelu_fwd(st, n, dx, dy));
        tsr_cpu_gelu_fwd(n, x, y);
        float *got = kt_from_dev(dy, n);
        kt_assert_close_f("cuda gelu_fwd", got, y, n, 1e-6, 1e-5);
        free(got);
        KT_CUDA_OK(cudaMemset(dy, 0xff, n * sizeof(float)));
        KT_CUDA_OK(tsr_cuda_gelu_bwd(st, n, dx, dg, dy));
        tsr_cpu_gelu_bwd(n, x, g, y);
        got = kt_from_dev(dy, n);
        kt_assert_close_f("cuda gelu_bwd", got, y, n, 1e-6, 1e-5);
        free(got);
        cudaFree(bx), cudaFree(bg), cudaFree(by), free(x), free(g), free(y);
    }
    cudaStreamDestroy((cudaStream_t)st);
}

Test(cuda_layernorm, forward_backward_float4_and_scalar_paths)
{
    KT_REQUIRE_GPU();
    void *st = kt_stream();
    kt_rng r = kt_seed(350);
    /* 8000: dgamma not in smem; 33 x 70: C off a warp, T off the block's 8 warps
     * and more tokens than one block's warps cover */
    /* float4 path: 768 x 37, 64 x 9, 1024 x 5 (a lane's whole share), 128 x
     * 2100 (more tokens than the blocks' warps: several per warp); scalar:
     * the rest, and 768 x 37 again with x one float off 16 bytes */
    const int shapes[][3] = {{1, 1, 0},    {7, 5, 0},    {768, 37, 0}, {8000, 3, 0},
                             {33, 70, 0},  {64, 9, 0},   {1024, 5, 0}, {128, 2100, 0},
                             {768, 37, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int C = shapes[s][0], T = shapes[s][1], off = shapes[s][2];
        size_t n = (size_t)C * T;
        float *x = kt_rand(&r, n, -2, 2), *ga = kt_rand(&r, C, 0.5, 1.5), *be = kt_rand(&r, C, -1, 1);
        float *dout = kt_rand(&r, n, -1, 1), *dx = kt_rand(&r, n, -1, 1);
        float *dga = kt_rand(&r, C, -1, 1), *dbe = kt_rand(&r, C, -1, 1);
        float *out = kt_alloc(n), *mean = kt_alloc(T), *rstd = kt_alloc(T);
        float *d_xbuf = kt_dev(n + 1), *d_x = d_xbuf + off;
        kt_upload(d_x, x, n);
        float *d_ga = kt_to_dev(ga, C), *d_be = kt_to_dev(be, C);
        float *d_out = kt_dev(n), *d_mean = kt_dev(T), *d_rstd = kt_dev(T);
        float *d_dout = kt_to_dev(dout, n), *d_dx = kt_to_dev(dx, n);
        float *d_dga = kt_to_dev(dga, C), *d_dbe = kt_to_dev(dbe, C);
        KT_CUDA_OK(tsr_cuda_layernorm_fwd(st, C, T, d_x, d_ga, d_be, 1e-5f, d_out, d_mean, d_rstd));
        tsr_cpu_layernorm_fwd(C, T, x, ga, be, 1e-5f, out, mean, rstd);
        float *g = kt_from_dev(d_out, n);
        kt_assert_close_f("cuda layernorm out", g, out, n, 1e-5, 1e-5);
        free(g);
        g = kt_from_dev(d_rstd, T);
        kt_assert_close_f("cuda layernorm rstd", g, rstd, T, 1e-6, 1e-5);
        free(g);
        float *dx0 = kt_alloc(n), *dga0 = kt_alloc(C), *dbe0 = kt_alloc(C);
        memcpy(dx0, dx, n * sizeof *dx), memcpy(dga0, dga, C * sizeof *dga);
        memcpy(dbe0, dbe, C * sizeof *dbe);
        tsr_cpu_layernorm_bwd(C, T, dout, x, ga, mean, rstd, dx, dga, dbe);
        /* three runs (deterministic flag off, then on twice): the same bits */
        float *det_dga = NULL;
        for (int det = 0; det < 3; det++) {
            kt_upload(d_dx, dx0, n), kt_upload(d_dga, dga0, C), kt_upload(d_dbe, dbe0, C);
            KT_CUDA_OK(tsr_cuda_layernorm_bwd(st, C, T, d_dout, d_x, d_ga, d_mean, d_rstd, d_dx,
                                              d_dga, d_dbe, det > 0));
            g = kt_from_dev(d_dx, n);
            kt_assert_close_f("cuda layernorm dx", g, dx, n, 1e-5, 1e-4);
            free(g);
            g = kt_from_dev(d_dga, C);
            kt_assert_close_f("cuda layernorm dgamma", g, dga, C, 1e-5 * T, 1e-4);
            if (det == 0)
                det_dga = g;
            else {
                cr_assert_eq(memcmp(g, det_dga, C * sizeof *g), 0,
                             "deterministic dgamma differs between two runs (C %d, T %d)", C, T);
                free(g);
            }
            g = kt_from_dev(d_dbe, C);
            kt_assert_close_f("cuda layernorm dbeta", g, dbe, C, 1e-5 * T, 1e-4);
            free(g);
        }
        free(det_dga);
        free(dx0), free(dga0), free(dbe0);
        cudaFree(d_xbuf), cudaFree(d_ga), cudaFree(d_be), cudaFree(d_out), cudaFree(d_mean);
        cudaFree(d_rstd), cudaFree(d_dout), cudaFree(d_dx), cudaFree(d_dga), cudaFree(d_dbe);
        free(x), free(ga), free(be), free(dout), free(dx), free(dga), free(dbe), free(out);
        free(mean), free(rstd);
    }
    cudaStreamDestroy((cudaStream_t)st);
}

Test(cuda_adamw, step_and_sumsq)
{
    KT_REQUIRE_GPU();
    void *st = kt_stream();
    kt_rng r = kt_seed(360);
    const size_t sizes[] = {1, 11, 100000};
    for (int s = 0; s < 6; s++) {
        /* odd s: one pointer 4 bytes past 16-aligned (the scalar path) */
        size_t n = sizes[s / 2], off = (size_t)(s & 1);
        float *p = kt_rand(&r, n, -1, 1), *m = kt_rand(&r, n, -0.1f, 0.1f), *v = kt_rand(&r, n, 0, 0.01f);
        float *g = kt_rand(&r, n, -1, 1);
        float *bg = kt_dev(n + 1), *dg = bg + off;
        kt_upload(dg, g, n);
        float *dp = kt_to_dev(p, n), *dm = kt_to_dev(m, n), *dv = kt_to_dev(v, n);
        /* the bf16 copy on s = 0, 1, 4, 5: aligned and 2 bytes past (scalar path) */
        uint16_t *bpb = NULL, *dpb = NULL;
        if (s != 2 && s != 3) {
            cr_assert_eq(cudaMalloc((void **)&bpb, sizeof(uint16_t) * (n + 1)), cudaSuccess);
            dpb = bpb + off;
        }
        /* the gradient consumed (zeroed) on odd s, on both alignment paths */
        int consume = s % 2;
        KT_CUDA_OK(tsr_cuda_adamw(st, n, 7, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, dg, dp, dm, dv,
                                  dpb, consume));
        tsr_cpu_adamw(n, 7, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, g, p, m, v, NULL, 0);
        float *hg = kt_from_dev(dg, n);
        for (size_t i = 0; i < n; i++)
            cr_assert(consume ? hg[i] == 0.0f : hg[i] == g[i],
                      "cuda adamw g[%zu] = %g after a step that %s it", i, (double)hg[i],
                      consume ? "consumes" : "keeps");
        free(hg);
        float *hp = kt_from_dev(dp, n), *hm = kt_from_dev(dm, n), *hv = kt_from_dev(dv, n);
        kt_assert_close_f("cuda adamw p", hp, p, n, 1e-7, 1e-6);
        if (dpb) {
            /* each bf16 is the round to nearest even of the device's own fp32 p:
             * the nearer of truncation and truncation + 1 ulp (hp is finite) */
            uint16_t *hb = malloc(sizeof(uint16_t) * n);
            cr_assert_not_null(hb);
            cr_assert_eq(cudaMemcpy(hb, dpb, sizeof(uint16_t) * n, cudaMemcpyDeviceToHost),
                         cudaSuccess);
            for (size_t i = 0; i < n; i++) {
                uint32_t u;
                memcpy(&u, &hp[i], 4);
                uint32_t lo = u >> 16, hi = lo + 1, ulo = lo << 16, uhi = hi << 16;
                float flo, fhi;
                memcpy(&flo, &ulo, 4), memcpy(&fhi, &uhi, 4);
                double dl = fabs((double)hp[i] - flo), dh = fabs((double)hp[i] - fhi);
                uint32_t want = dl < dh ? lo : dh < dl ? hi : (lo & 1) ? hi : lo;
                cr_assert_eq(hb[i], want, "cuda adamw p_bf16[%zu] = 0x%04x, p %.9g rounds to 0x%04x",
                             i, hb[i], (double)hp[i], want);
            }
            free(hb);
            cudaFree(bpb);
        }
        kt_assert_close_f("cuda adamw m", hm, m, n, 1e-8, 1e-6);
        kt_assert_close_f("cuda adamw v", hv, v, n, 1e-9, 1e-6);
        float acc = 1.0f, *dacc = kt_to_dev(&acc, 1);
        kt_upload(dg, g, n); /* again: a consuming step zeroed it */
        tsr_cpu_sumsq(n, g, &acc);
        float *hacc = NULL;
        for (int det = 0; det < 2; det++) { /* atomics across blocks, then one block */
            float one = 1.0f;
            kt_upload(dacc, &one, 1);
            KT_CUDA_OK(tsr_cuda_sumsq(st, n, dg, dacc, det));
            free(hacc);
            hacc = kt_from_dev(dacc, 1);
            kt_assert_close_f(det ? "cuda sumsq, deterministic" : "cuda sumsq", hacc, &acc, 1, 0,
                              1e-5);
        }
        cudaFree(dp), cudaFree(dm), cudaFree(dv), cudaFree(bg), cudaFree(dacc);
        free(p), free(m), free(v), free(g), free(hp), free(hm), free(hv), free(hacc);
    }
    cudaStreamDestroy((cudaStream_t)st);
}

Test(cuda_convert, bit_identical_to_cpu)
{
    KT_REQUIRE_GPU();
    void *st = kt_stream();
    kt_rng r = kt_seed(370);
    const size_t sizes[] = {1, 3, 5, 65536 + 5};
    for (int s = 0; s < 8; s++) {
        /* odd s: fp32 pointer 4 bytes, bf16 pointer 2 bytes off alignment */
        size_t n = sizes[s / 2], off = (size_t)(s & 1);
        float *x = kt_alloc(n);
        for (size_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)kt_next(&r);
            memcpy(&x[i], &u, 4); /* every pattern class, NaNs included */
        }
        uint16_t *want = malloc(2 * n), *got = malloc(2 * n);
        tsr_cpu_f32_to_bf16(n, x, want);
        float *bx = kt_dev(n + 1), *dx = bx + off;
        uint16_t *by = kt_dev_bytes(2 * (n + 1)), *dy = by + off;
        kt_upload(dx, x, n);
        KT_CUDA_OK(tsr_cuda_f32_to_bf16(st, n, dx, dy));
        KT_CUDA_OK(cudaDeviceSynchronize());
        KT_CUDA_OK(cudaMemcpy(got, dy, 2 * n, cudaMemcpyDeviceToHost));
        cr_assert_eq(memcmp(got, want, 2 * n), 0, "f32_to_bf16 (n %zu, off %zu) differs from the CPU kernel", n, off);
        KT_CUDA_OK(cudaMemset(dx, 0xff, n * 4));
        KT_CUDA_OK(tsr_cuda_bf16_to_f32(st, n, dy, dx));
        float *back = kt_from_dev(dx, n), *wb = kt_alloc(n);
        tsr_cpu_bf16_to_f32(n, want, wb);
        cr_assert_eq(memcmp(back, wb, 4 * n), 0, "bf16_to_f32 (n %zu, off %zu) differs from the CPU kernel", n, off);
        cudaFree(bx), cudaFree(by), free(x), free(want), free(got), free(back), free(wb);
    }
    cudaStreamDestroy((cudaStream_t)st);
}

/* Criterion's main plus one thing: with no GPU every test above skips, and
 * the process exits 77 so that `meson test` lists the suite as SKIP. */
int main(int argc, char *argv[])
{
    struct criterion_test_set *tests = criterion_initialize();
    int result = 0;
    if (criterion_handle_args(argc, argv, true))
        result = !criterion_run_all_tests(tests);
    criterion_finalize(tests);
    if (result == 0 && kt_gpu_count() == 0) {
        fprintf(stderr, "kernels_cuda: no CUDA device, GPU kernel tests skipped\n");
        return 77;
    }
    return result;
}
