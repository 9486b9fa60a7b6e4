/* AdamW over several steps against a double reference of the PyTorch/llm.c
 * update (bias correction, decoupled weight decay, gradient scaling), with
 * and without the bf16 copy of the weights (checked against the double
 * reference within half a bf16 ulp, and bit for bit against round to nearest
 * even of the fp32 result by a reference that picks the nearer neighbour in
 * double; ties, overflow, NaN and infinities through lr = 0), and the squared
 * norm accumulated over tiles against double. */
#include "kernels/adamw.h"
#include "kt_util.h"

/* every bf16 value is the rounding of the fp32 value beside it, and within
 * half a bf16 ulp (at most 2^-8 relative) plus the fp32 tolerance of the double one */
static void check_bf16(const uint16_t *pb, const float *p, const double *pd, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(pb[i], kt_bf16_round(p[i]), "p_bf16[%zu] = 0x%04x, p = %.9g rounds to 0x%04x", i,
                     pb[i], (double)p[i], kt_bf16_round(p[i]));
        double b = kt_f32_of((uint32_t)pb[i] << 16);
        cr_assert(fabs(b - pd[i]) <= 0x1p-8 * fabs(pd[i]) + 1e-6 + 1e-5 * fabs(pd[i]),
                  "p_bf16[%zu] = %.9g, double reference %.9g", i, b, pd[i]);
    }
}

Test(adamw, several_steps_match_double)
{
    kt_rng r = kt_seed(71);
    /* sizes around the vector widths (4, 8, 16 lanes) and their tails */
    const size_t sizes[] = {1, 7, 16, 33, 1031};
    for (int s = 0; s < 5; s++) {
        size_t n = sizes[s];
        float *p = kt_rand(&r, n, -1, 1), *m = kt_alloc(n), *v = kt_alloc(n);
        uint16_t *pb = malloc(sizeof(uint16_t) * n);
        cr_assert_not_null(pb);
        for (size_t i = 0; i < n; i++)
            m[i] = 0, v[i] = 0;
        double *pd = kt_dalloc(n), *md = kt_dalloc(n), *vd = kt_dalloc(n);
        for (size_t i = 0; i < n; i++)
            pd[i] = p[i];
        const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
        for (int step = 1; step <= 5; step++) {
            float gs = step == 3 ? 0.5f : 1.0f; /* one clipped step */
            float *g = kt_rand(&r, n, -1, 1);
            /* the bf16 copy on even steps; its pattern poisoned before */
            int with_bf16 = step % 2 == 0;
            memset(pb, 0xff, sizeof(uint16_t) * n);
            /* the gradient consumed (zeroed) on steps 1 and 4, kept on the others */
            int consume = step % 3 == 1;
            float *g0 = kt_dup(g, n);
            tsr_cpu_adamw(n, step, lr, b1, b2, eps, wd, gs, g, p, m, v, with_bf16 ? pb : NULL,
                          consume);
            for (size_t i = 0; i < n; i++)
                cr_assert(consume ? g[i] == 0.0f && !signbit(g[i]) : g[i] == g0[i],
                          "g[%zu] = %g after a step that %s it (was %g)", i, (double)g[i],
                          consume ? "consumes" : "keeps", (double)g0[i]);
            for (size_t i = 0; i < n; i++) {
                double gi = (double)gs * g0[i];
                md[i] = (double)b1 * md[i] + (1 - (double)b1) * gi;
                vd[i] = (double)b2 * vd[i] + (1 - (double)b2) * gi * gi;
                double mh = md[i] / (1 - pow(b1, step)), vh = vd[i] / (1 - pow(b2, step));
                pd[i] -= lr * (mh / (sqrt(vh) + eps) + (double)wd * pd[i]);
            }
            if (with_bf16)
                check_bf16(pb, p, pd, n);
            else
                for (size_t i = 0; i < n; i++)
                    cr_assert_eq(pb[i], 0xffff, "p_bf16 written with p_bf16 = NULL");
            free(g), free(g0);
        }
        free(pb);
        kt_assert_close("adamw p", p, pd, n, 1e-6, 1e-5);
        kt_assert_close("adamw m", m, md, n, 1e-7, 1e-5);
        kt_assert_close("adamw v", v, vd, n, 1e-8, 1e-5);
        free(p), free(m), free(v), free(pd), free(md), free(vd);
    }
}

/* a zero gradient on a zero state: only the decoupled decay moves p, and
 * nothing divides 0 by 0 */
Test(adamw, zero_gradient_and_state)
{
    float p[5] = {1, -2, 0, 3, 0.5f}, m[5] = {0}, v[5] = {0}, g[5] = {0};
    double want[5];
    for (int i = 0; i < 5; i++)
        want[i] = p[i] - 1e-2 * 0.1 * p[i];
    tsr_cpu_adamw(5, 1, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, 1.0f, g, p, m, v, NULL, 0);
    kt_assert_close("adamw p, zero gradient", p, want, 5, 1e-7, 1e-6);
}

/* The bf16 and fp32 outputs of the same step agree with a step without the
 * bf16 copy and without consuming the gradient: the same fp32 values (the
 * copy and the zeroing change nothing else). */
Test(adamw, bf16_copy_changes_nothing_else)
{
    kt_rng r = kt_seed(73);
    size_t n = 517;
    float *p = kt_rand(&r, n, -1, 1), *m = kt_rand(&r, n, -0.1f, 0.1f);
    float *v = kt_rand(&r, n, 0, 0.01f), *g = kt_rand(&r, n, -1, 1);
    float *p2 = kt_dup(p, n), *m2 = kt_dup(m, n), *v2 = kt_dup(v, n);
    uint16_t *pb = malloc(sizeof(uint16_t) * n);
    cr_assert_not_null(pb);
    float *g2 = kt_dup(g, n);
    tsr_cpu_adamw(n, 3, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.7f, g2, p, m, v, pb, 1);
    tsr_cpu_adamw(n, 3, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.7f, g, p2, m2, v2, NULL, 0);
    free(g2);
    cr_assert_eq(memcmp(p, p2, n * 4), 0, "p differs with the bf16 copy");
    cr_assert_eq(memcmp(m, m2, n * 4), 0, "m differs with the bf16 copy");
    cr_assert_eq(memcmp(v, v2, n * 4), 0, "v differs with the bf16 copy");
    free(p), free(m), free(v), free(g), free(p2), free(m2), free(v2), free(pb);
}

/* lr = 0 and no decay leave p as it is (p - 0 * finite), so the bf16 copy of
 * chosen patterns is their rounding: ties to even (0x3f808000 -> 0x3f80,
 * 0x3f818000 -> 0x3f82), just off ties, the largest float overflowing to
 * inf, subnormals (0x80008000 is a tie too: -0x8000 * 2^-149 between -0 and
 * -0x10000 * 2^-149, even -0), signed zeros, and NaN kept quiet with its sign
 * (an infinite p is not kept by the step: 0 * inf is NaN). */
Test(adamw, bf16_rounding_of_chosen_patterns)
{
    const uint32_t pat[] = {0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f807fffu, 0x7f7fffffu,
                            0xff7fffffu, 0x00000001u, 0x80008000u, 0x00018000u, 0x0u,
                            0x80000000u, 0x7fa00001u, 0xffc00000u,
                            0x40490fdbu, 0xc0490fdbu};
    enum { N = sizeof pat / sizeof pat[0] };
    const uint16_t want[N] = {0x3f80, 0x3f82, 0x3f81, 0x3f80, 0x7f80, 0xff80, 0x0000, 0x8000,
                              0x0002, 0x0000, 0x8000, 0x7fe0, 0xffc0, 0x4049, 0xc049};
    float p[N], m[N], v[N], g[N];
    uint16_t pb[N];
    for (int i = 0; i < N; i++)
        p[i] = kt_f32_of(pat[i]), m[i] = 0, v[i] = 0, g[i] = 0.5f;
    tsr_cpu_adamw(N, 1, 0.0f, 0.9f, 0.999f, 1e-8f, 0.0f, 1.0f, g, p, m, v, pb, 0);
    for (int i = 0; i < N; i++) {
        uint32_t u;
        memcpy(&u, &p[i], 4);
        /* a signalling NaN comes out of arithmetic quiet: 0x7fa00001 -> 0x7fe00001 */
        uint32_t kept = isnan(p[i]) ? pat[i] | 0x00400000u : pat[i];
        cr_assert_eq(u, kept, "p[%d] moved with lr = 0: 0x%08x", i, u);
        /* hand-rounded: e.g. 0x3f808000 is halfway between 0x3f80 and 0x3f81 */
        cr_assert_eq(pb[i], want[i], "bf16 of 0x%08x: 0x%04x, want 0x%04x", pat[i], pb[i],
                     want[i]);
        if (!isnan(p[i]))
            cr_assert_eq(pb[i], kt_bf16_round(p[i]), "bf16 of 0x%08x against the reference", pat[i]);
    }
}

Test(adamw, sumsq_accumulates_over_tiles)
{
    kt_rng r = kt_seed(72);
    size_t n = 10007;
    float *x = kt_rand(&r, n, -3, 3);
    float acc[1] = {2.5f};
    double want = 2.5;
    for (size_t i = 0; i < n; i++)
        want += (double)x[i] * x[i];
    const size_t cuts[] = {0, 1, 8, 777, 10007};
    for (int c = 0; c < 4; c++)
        tsr_cpu_sumsq(cuts[c + 1] - cuts[c], x + cuts[c], acc);
    kt_assert_close("sumsq", acc, &want, 1, 0, 1e-6);
    free(x);
}
