/* RoPE: the frequency table (plain and Llama 3 scaled) against values worked
 * out by hand; forward and backward (the inverse rotation) against a double
 * loop over the rotate_half formula (kt_llama_ref.h), at positions offset
 * up to 128k and near INT_MAX, d even but not a power of two, heads not a
 * power of two, T = 1, padded leading dimensions, in place; the backward
 * against central finite differences of the double forward; fwd then bwd
 * gives x back.
 *
 * Tolerances (fp32): each output is x1 cos - x2 sin with cos and sin of a
 * double angle rounded to fp32 (half an ulp each) and three roundings: at
 * most about 3 ulp of max(|x1|, |x2|) <= 2: 1e-6 absolute + 1e-6 relative.
 * An fp32 angle at p = 131000 would be off by up to 4e-3 rad: the tests at
 * large p would fail by three orders of magnitude. */
#include <limits.h>

#include "kernels/rope.h"
#include "kt_llama_ref.h"
#include "kt_util.h"

static void assert_table(const char *what, const double *got, const double *want, int n)
{
    for (int i = 0; i < n; i++)
        cr_assert(fabs(got[i] - want[i]) <= 1e-15 * want[i], "%s[%d]: %.17g, want %.17g", what,
                  i, got[i], want[i]);
}

/* theta = 10000, d = 6: 10000^(-0/6) = 1, 10000^(-2/6) = 10^(-4/3),
 * 10000^(-4/6) = 10^(-8/3) */
Test(rope, inv_freq_plain)
{
    double f[3];
    cr_assert_eq(tsr_rope_inv_freq(6, 10000.0, NULL, f), 0);
    const double want[3] = {1.0, 0.046415888336127789, 0.0021544346900318838};
    assert_table("inv_freq", f, want, 3);
}

/* Llama 3.1: theta 500000, d 128, factor 8, low 1, high 4, orig 8192:
 * low_wl = 8192, high_wl = 2048.  Worked out by hand per frequency i:
 *   f_i = 500000^(-i/64), wavelen = 2 pi / f_i
 *   i = 0:  f 1, wavelen 6.28 < 2048: kept, 1
 *   i = 28: f 3.2114459947525910e-3, wavelen 1956.5 < 2048: kept
 *   i = 29: f 2.6160992529250353e-3, wavelen 2401.74: medium,
 *           s = (8192/2401.74 - 1)/3 = 0.80362104209963403,
 *           (1 - s) f/8 + s f = 2.166570763503359e-3
 *   i = 30: f 2.1311195369119653e-3, wavelen 2948.30, s = 0.5928492950029659,
 *           1.3718935677611381e-3
 *   i = 34: f 9.384738703573802e-4, wavelen 6695.11, s = 0.074526564160743033,
 *           1.785078127679964e-4
 *   i = 35: f 7.644969883171747e-4, wavelen 8218.72 > 8192: f/8 =
 *           9.556212353964683e-5
 *   i = 63: f 2.455140791131609e-6, wavelen 2.56e6: f/8 = 3.068925988914511e-7 */
Test(rope, inv_freq_llama3_scaling)
{
    double f[64];
    tsr_rope_llama3_t sc = {8.0, 1.0, 4.0, 8192.0};
    cr_assert_eq(tsr_rope_inv_freq(128, 500000.0, &sc, f), 0);
    const int idx[] = {0, 28, 29, 30, 34, 35, 63};
    const double want[] = {1.0,
                           3.2114459947525910e-3,
                           2.166570763503359e-3,
                           1.3718935677611381e-3,
                           1.785078127679964e-4,
                           9.556212353964683e-5,
                           3.068925988914511e-7};
    for (int k = 0; k < 7; k++)
        cr_assert(fabs(f[idx[k]] - want[k]) <= 1e-14 * want[k], "llama3 inv_freq[%d]: %.17g, "
                  "want %.17g", idx[k], f[idx[k]], want[k]);
    /* and unscaled, the same table keeps 500000^(-i/64) */
    double p[64];
    cr_assert_eq(tsr_rope_inv_freq(128, 500000.0, NULL, p), 0);
    cr_assert(fabs(p[35] - 7.644969883171747e-4) <= 1e-14 * p[35]);
    /* the bad configurations */
    tsr_rope_llama3_t bad = {8.0, 4.0, 4.0, 8192.0};
    cr_assert_eq(tsr_rope_inv_freq(128, 500000.0, &bad, f), -1);
    cr_assert_eq(tsr_rope_inv_freq(7, 10000.0, NULL, f), -1);
    cr_assert_eq(tsr_rope_inv_freq(0, 10000.0, NULL, f), -1);
}

/* d, H, T, ld - H*d, pos0, Llama 3 scaling */
static const int cases[][6] = {
    {2, 1, 1, 0, 0, 0},           {6, 3, 5, 0, 7, 0},     {10, 5, 4, 3, 100, 0},
    {128, 3, 2, 0, 131000, 1},    {160, 2, 3, 5, 8191, 0} /* d/2 over one frequency block */,
    {64, 1, 2, 0, INT_MAX - 1, 1}, {96, 7, 1, 0, 4096, 1}};

static void table(int d, int scaled, double *f)
{
    tsr_rope_llama3_t sc = {8.0, 1.0, 4.0, 8192.0};
    cr_assert_eq(tsr_rope_inv_freq(d, scaled ? 500000.0 : 10000.0, scaled ? &sc : NULL, f), 0);
}

/* The heads' entries of a (H*d, T) tile with leading dimension ld, dense. */
static void gather(int Hd, int T, int ld, const float *x, float *dense)
{
    for (int t = 0; t < T; t++)
        memcpy(dense + (size_t)t * Hd, x + (size_t)t * ld, Hd * sizeof(float));
}

Test(rope, forward_backward_against_double)
{
    kt_rng r = kt_seed(81);
    for (size_t s = 0; s < sizeof cases / sizeof cases[0]; s++) {
        int d = cases[s][0], H = cases[s][1], T = cases[s][2], ld = H * d + cases[s][3];
        int pos0 = cases[s][4];
        double *f = kt_dalloc(d / 2);
        table(d, cases[s][5], f);
        size_t nb = (size_t)ld * T, n = (size_t)H * d * T;
        float *x = kt_rand(&r, nb, -2, 2), *out = kt_rand(&r, nb, -2, 2), *back = kt_alloc(nb);
        float *pad = kt_dup(out, nb);
        double *xd = kt_to_d(x, nb), *wo = kt_dalloc(nb), *wb = kt_dalloc(nb);
        kt_ref_rope(d, H, T, ld, pos0, f, xd, wo, 1.0);
        kt_ref_rope(d, H, T, ld, pos0, f, xd, wb, -1.0);
        double *wod = kt_dalloc(n), *wbd = kt_dalloc(n);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < H * d; i++)
                wod[i + (size_t)t * H * d] = wo[i + (size_t)t * ld],
                wbd[i + (size_t)t * H * d] = wb[i + (size_t)t * ld];
        float *dense = kt_alloc(n);
        tsr_cpu_rope_fwd(d, H, T, ld, pos0, f, x, out);
        gather(H * d, T, ld, out, dense);
        kt_assert_close("rope fwd", dense, wod, n, 1e-6, 1e-6);
        for (int t = 0; t < T; t++) /* the padding between tokens untouched */
            for (int i = H * d; i < ld; i++)
                cr_assert_eq(out[i + (size_t)t * ld], pad[i + (size_t)t * ld]);
        tsr_cpu_rope_bwd(d, H, T, ld, pos0, f, x, back);
        gather(H * d, T, ld, back, dense);
        kt_assert_close("rope bwd", dense, wbd, n, 1e-6, 1e-6);
        /* round trip: bwd(fwd(x)) = x */
        tsr_cpu_rope_bwd(d, H, T, ld, pos0, f, out, back);
        gather(H * d, T, ld, back, dense);
        double *xdd = kt_dalloc(n);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < H * d; i++)
                xdd[i + (size_t)t * H * d] = x[i + (size_t)t * ld];
        kt_assert_close("rope bwd(fwd(x))", dense, xdd, n, 2e-6, 2e-6);
        /* in place */
        tsr_cpu_rope_fwd(d, H, T, ld, pos0, f, x, x);
        gather(H * d, T, ld, x, dense);
        kt_assert_close("rope fwd in place", dense, wod, n, 1e-6, 1e-6);
        free(f), free(x), free(out), free(back), free(pad), free(xd), free(wo), free(wb);
        free(wod), free(wbd), free(dense), free(xdd);
    }
}

/* L = sum wt .* rope(x): its central differences (h = 1e-6, double) against
 * the kernel's backward of wt. */
Test(rope, backward_matches_finite_differences)
{
    kt_rng r = kt_seed(82);
    const int d = 6, H = 3, T = 2, pos0 = 5;
    size_t n = (size_t)H * d * T;
    double f[3];
    table(d, 0, f);
    float *x = kt_rand(&r, n, -2, 2), *wt = kt_rand(&r, n, -1, 1), *dx = kt_alloc(n);
    tsr_cpu_rope_bwd(d, H, T, H * d, pos0, f, wt, dx);
    double *xd = kt_to_d(x, n), *wd = kt_to_d(wt, n), *scr = kt_dalloc(n), *fd = kt_dalloc(n);
    const double h = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double x0 = xd[i], l[2];
        for (int k = 0; k < 2; k++) {
            xd[i] = x0 + (k ? -h : h);
            kt_ref_rope(d, H, T, H * d, pos0, f, xd, scr, 1.0);
            l[k] = 0;
            for (size_t j = 0; j < n; j++)
                l[k] += wd[j] * scr[j];
        }
        xd[i] = x0;
        fd[i] = (l[0] - l[1]) / (2 * h);
    }
    kt_assert_close("rope dx (finite differences)", dx, fd, n, 2e-6, 1e-6);
    free(x), free(wt), free(dx), free(xd), free(wd), free(scr), free(fd);
}

Test(rope, estimates)
{
    cr_assert_eq(tsr_rope_flops(128, 4, 10), 10.0 * (2 * 128 + 3 * 4 * 128));
    cr_assert_eq(tsr_rope_bytes(128, 4, 10), 8.0 * 4 * 128 * 10 + 4.0 * 128);
}
