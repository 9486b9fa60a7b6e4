/* tsr_cpu_gemm against naive double loops: all transpositions, awkward and
 * padded shapes, batches with strides, beta == 0 over a NaN-poisoned C. */
#include "kernels/gemm.h"
#include "kt_util.h"

/* C (m, n) = alpha op(A) op(B) + beta C for one batch, in double */
static void ref_gemm(int ta, int tb, int m, int n, int k, double alpha, const float *a, int lda,
                     const float *b, int ldb, double beta, const float *c0, int ldc, double *out)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0.0;
            for (int p = 0; p < k; p++) {
                double av = ta ? a[p + (size_t)i * lda] : a[i + (size_t)p * lda];
                double bv = tb ? b[j + (size_t)p * ldb] : b[p + (size_t)j * ldb];
                s += av * bv;
            }
            double cv = beta == 0.0 ? 0.0 : beta * c0[i + (size_t)j * ldc];
            out[i + (size_t)j * ldc] = alpha * s + cv;
        }
}

static void check_case(int ta, int tb, int m, int n, int k, int pad, int batch, float alpha,
                       float beta, uint64_t salt)
{
    kt_rng r = kt_seed(salt);
    int ar = ta ? k : m, ac = ta ? m : k; /* A as stored */
    int br = tb ? n : k, bc = tb ? k : n;
    int lda = ar + pad, ldb = br + pad, ldc = m + pad;
    int64_t sa = (int64_t)lda * ac + 3, sb = (int64_t)ldb * bc + 1, sc = (int64_t)ldc * n + 2;
    size_t na = (size_t)sa * batch, nb = (size_t)sb * batch, nc = (size_t)sc * batch;
    float *a = kt_rand(&r, na, -1, 1), *b = kt_rand(&r, nb, -1, 1);
    float *c = kt_rand(&r, nc, -1, 1);
    if (beta == 0.0f)
        kt_poison(c, nc);
    float *c0 = kt_dup(c, nc);
    double *want = kt_dalloc(nc);
    for (size_t i = 0; i < nc; i++)
        want[i] = c0[i]; /* gaps between and inside batches must stay untouched */
    for (int bi = 0; bi < batch; bi++)
        ref_gemm(ta, tb, m, n, k, alpha, a + bi * sa, lda, b + bi * sb, ldb, beta, c0 + bi * sc,
                 ldc, want + bi * sc);
    /* rows i >= m inside ldc padding are not part of C: expect them untouched */
    tsr_cpu_gemm(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
    /* poisoned padding stays NaN in both: compare only C's elements */
    size_t bad = 0;
    for (int bi = 0; bi < batch; bi++)
        for (int j = 0; j < n; j++) {
            char what[96];
            snprintf(what, sizeof what, "gemm ta=%d tb=%d %dx%dx%d batch %d col %d", ta, tb, m,
                     n, k, bi, j);
            size_t off = bi * sc + (size_t)j * ldc;
            bad += kt_count_bad(what, c + off, want + off, (size_t)m, 1e-5 * (k + 1), 1e-5);
        }
    cr_assert_eq(bad, 0);
    free(a), free(b), free(c), free(c0), free(want);
}

Test(gemm, all_transpositions_awkward_shapes)
{
    const int shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {13, 17, 11}, {1, 9, 4}, {9, 1, 31}, {64, 48, 33}};
    uint64_t salt = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                check_case(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], 0, 1, 1.0f, 0.0f,
                           salt++);
}

Test(gemm, alpha_beta_padding_batches)
{
    check_case(TSR_NOTRANS, TSR_TRANS, 11, 7, 5, 3, 3, 0.5f, 1.0f, 101);
    check_case(TSR_TRANS, TSR_NOTRANS, 6, 13, 9, 2, 4, -2.0f, 0.25f, 102);
    check_case(TSR_TRANS, TSR_TRANS, 5, 5, 5, 1, 2, 1.0f, 0.0f, 103);
}

Test(gemm, k_zero_scales_c)
{
    check_case(TSR_NOTRANS, TSR_NOTRANS, 4, 3, 0, 0, 2, 1.0f, 0.0f, 201);
    check_case(TSR_NOTRANS, TSR_NOTRANS, 4, 3, 0, 1, 1, 1.0f, 0.5f, 202);
}
