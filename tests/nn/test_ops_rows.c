/* tests/nn/test_ops_rows.c — LayerNorm over channel tiles: x (C, N) cut into
 * several row tiles (the last possibly smaller), gamma and beta tiled like
 * x's rows, against a naive double-precision LayerNorm forward and backward
 * (the one of test_ops_bf16.c, over whole columns); one tile row as the
 * fused path's check. The row-tile sums are fixed-order: two runs on 1 and
 * 2 CPU workers in deterministic mode give the same bits. Misuse: a gamma
 * tiled unlike x, a missing or misshapen scratch. Under the CUDA emulation
 * the suite runs on emulated GPUs too (tests/nn/meson.build). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/ops.h"
#include "tests/kernels/kt_util.h"
#include "tests/nn/ops_util.h"

static void rt_start(int ncpu, int deterministic)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = ncpu;
    cfg.bind = 0;
    cfg.deterministic = deterministic;
    OK(tsr_init(&cfg));
}

/* The naive LayerNorm in double over whole columns, eps 1e-5:
 *   x, dout (C, N); g, b (C) → out (C, N), mean, rstd (N) (written);
 *   dx (C, N), dg, db (C) += the gradients (accumulated onto their values) */
static void ln_ref(int C, int N, const float *x, const float *g, const float *b,
                   const float *dout, double *out, double *mean, double *rstd, double *dx,
                   double *dg, double *db)
{
    for (int t = 0; t < N; t++) {
        const float *xc = x + (size_t)t * C, *dc = dout + (size_t)t * C;
        double mu = 0, var = 0;
        for (int i = 0; i < C; i++)
            mu += xc[i];
        mu /= C;
        for (int i = 0; i < C; i++)
            var += (xc[i] - mu) * (xc[i] - mu);
        double rs = 1.0 / sqrt(var / C + 1e-5), mg = 0, mgx = 0;
        mean[t] = mu;
        rstd[t] = rs;
        for (int i = 0; i < C; i++) {
            double xh = (xc[i] - mu) * rs;
            out[i + (size_t)t * C] = xh * g[i] + b[i];
            dg[i] += dc[i] * xh;
            db[i] += dc[i];
            mg += dc[i] * g[i];
            mgx += dc[i] * g[i] * xh;
        }
        mg /= C, mgx /= C;
        for (int i = 0; i < C; i++) {
            double xh = (xc[i] - mu) * rs;
            dx[i + (size_t)t * C] += rs * (dc[i] * g[i] - mg - xh * mgx);
        }
    }
}

/* What one case produces, read back (floats, caller frees). */
typedef struct ln_got {
    float *out, *mean, *rstd, *dx, *dg, *db, *dx16; /* dx16: bf16 runs only */
} ln_got_t;

static void got_free(ln_got_t *g)
{
    free(g->out), free(g->mean), free(g->rstd), free(g->dx), free(g->dg), free(g->db);
    free(g->dx16);
}

/* x (C, N) in tiles (tc, tt): the forward, then the backward onto nonzero
 * dx, dgamma, dbeta, through the ops; the inputs from one seed. bf16: the
 * mixed-precision producers (out bf16, dx16 = bf16(dx) beside dx). */
static ln_got_t ln_run(int C, int N, int tc, int tt, uint64_t seed, int bf16)
{
    kt_rng r = kt_seed(seed);
    size_t cn = (size_t)C * N;
    float *x = kt_rand(&r, cn, -2, 2), *g = kt_rand(&r, (size_t)C, 0.5f, 1.5f);
    float *b = kt_rand(&r, (size_t)C, -0.5f, 0.5f), *dout = kt_rand(&r, cn, -1, 1);
    float *dx0 = kt_rand(&r, cn, -1, 1), *dg0 = kt_rand(&r, (size_t)C, -1, 1);
    float *db0 = kt_rand(&r, (size_t)C, -1, 1), *junk = kt_rand(&r, cn, -3, 3);
    int R = (C + tc - 1) / tc;
    tsr_tensor_t X, G, B, O, Mu, Rs, D, DX, DG, DB, P, DX16 = {0};
    tsr_handle_t scratch = NULL;
    tensor_from(&X, C, N, tc, tt, x);
    tensor_from(&G, C, 1, tc, 1, g);
    tensor_from(&B, C, 1, tc, 1, b);
    if (bf16) {
        bf16_tensor(&O, C, N, tc, tt, junk); /* overwritten */
        bf16_tensor(&DX16, C, N, tc, tt, junk);
        OK(tsr_handle_alloc(&scratch, (size_t)tc * tt * 4));
    } else {
        tensor_from(&O, C, N, tc, tt, junk);
    }
    tensor_from(&Mu, 1, N, 1, tt, NULL);
    tensor_from(&Rs, 1, N, 1, tt, NULL);
    tensor_from(&D, C, N, tc, tt, dout);
    tensor_from(&DX, C, N, tc, tt, dx0);
    tensor_from(&DG, C, 1, tc, 1, dg0);
    tensor_from(&DB, C, 1, tc, 1, db0);
    tensor_from(&P, 2 * R, N, 2, tt, NULL); /* the partial sums' scratch */
    cr_assert_eq(X.grid_rows, R);
    if (bf16) { /* one tile row: the fused kernels, which take no scratch */
        OK(tsr__op_layernorm_fwd_bf16(&X, &G, &B, &O, &Mu, &Rs, scratch, R > 1 ? &P : NULL));
        OK(tsr__op_layernorm_bwd_bf16(&D, &X, &G, &Mu, &Rs, &DX, &DX16, &DG, &DB,
                                      R > 1 ? &P : NULL));
    } else if (R == 1) { /* the fused path: no scratch */
        OK(tsr__op_layernorm_fwd(&X, &G, &B, &O, &Mu, &Rs));
        OK(tsr__op_layernorm_bwd(&D, &X, &G, &Mu, &Rs, &DX, &DG, &DB));
    } else {
        OK(tsr__op_layernorm_fwd_rows(&X, &G, &B, &O, &Mu, &Rs, &P));
        OK(tsr__op_layernorm_bwd_rows(&D, &X, &G, &Mu, &Rs, &DX, &DG, &DB, &P));
    }
    ln_got_t got = {bf16 ? bf16_get(&O) : tensor_get(&O), tensor_get(&Mu), tensor_get(&Rs),
                    tensor_get(&DX), tensor_get(&DG), tensor_get(&DB),
                    bf16 ? bf16_get(&DX16) : NULL};
    tsr_tensor_t *all[] = {&X, &G, &B, &O, &Mu, &Rs, &D, &DX, &DG, &DB, &P, &DX16};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tsr__tensor_free(all[i]);
    if (scratch)
        OK(tsr_handle_unregister(scratch));
    free(x), free(g), free(b), free(dout), free(dx0), free(dg0), free(db0), free(junk);
    return got;
}

/* ln_run against ln_ref on the same inputs; bf16: out and dx16 are the
 * reference's values rounded to bf16 */
static void ln_case_of(int C, int N, int tc, int tt, int bf16)
{
    uint64_t seed = (uint64_t)(tc * 100 + tt);
    ln_got_t got = ln_run(C, N, tc, tt, seed, bf16);
    kt_rng r = kt_seed(seed); /* the same draws as ln_run's */
    size_t cn = (size_t)C * N;
    float *x = kt_rand(&r, cn, -2, 2), *g = kt_rand(&r, (size_t)C, 0.5f, 1.5f);
    float *b = kt_rand(&r, (size_t)C, -0.5f, 0.5f), *dout = kt_rand(&r, cn, -1, 1);
    float *dx0 = kt_rand(&r, cn, -1, 1), *dg0 = kt_rand(&r, (size_t)C, -1, 1);
    float *db0 = kt_rand(&r, (size_t)C, -1, 1);
    double *out = kt_dalloc(cn), *mean = kt_dalloc((size_t)N), *rstd = kt_dalloc((size_t)N);
    double *dx = kt_dalloc(cn), *dg = kt_dalloc((size_t)C), *db = kt_dalloc((size_t)C);
    for (size_t i = 0; i < cn; i++)
        dx[i] = dx0[i];
    for (int i = 0; i < C; i++)
        dg[i] = dg0[i], db[i] = db0[i];
    ln_ref(C, N, x, g, b, dout, out, mean, rstd, dx, dg, db);
    cr_log_info("layernorm C %d N %d in tiles (%d, %d)%s", C, N, tc, tt, bf16 ? ", bf16" : "");
    if (bf16) {
        assert_bf16_of("layernorm out (bf16)", got.out, out, cn, 1e-5, 1e-5);
        assert_bf16_of("layernorm dx16", got.dx16, dx, cn, 1e-4, 1e-4);
    } else {
        kt_assert_close("layernorm out", got.out, out, cn, 1e-5, 1e-5);
    }
    kt_assert_close("layernorm mean", got.mean, mean, (size_t)N, 1e-5, 1e-5);
    kt_assert_close("layernorm rstd", got.rstd, rstd, (size_t)N, 1e-5, 1e-5);
    kt_assert_close("layernorm dx", got.dx, dx, cn, 1e-4, 1e-4);
    kt_assert_close("layernorm dgamma", got.dg, dg, (size_t)C, 1e-4, 1e-4);
    kt_assert_close("layernorm dbeta", got.db, db, (size_t)C, 1e-4, 1e-4);
    got_free(&got);
    free(x), free(g), free(b), free(dout), free(dx0), free(dg0), free(db0);
    free(out), free(mean), free(rstd), free(dx), free(dg), free(db);
}

static void ln_case(int C, int N, int tc, int tt)
{
    ln_case_of(C, N, tc, tt, 0);
}

/* C = 96 in row tiles of 32 (3), 40 (3, the last 16), 96 (1: the fused
 * path) and 5 (20, the last 1: the combine a chain of two tasks), token tiles
 * with and without an edge. */
Test(nn_ops_rows, layernorm_over_row_tiles_against_loops, .timeout = 120)
{
    rt_start(2, 0);
    static const int tcs[] = {32, 40, 96, 5}, tts[] = {8, 16, 37};
    for (size_t i = 0; i < sizeof tcs / sizeof *tcs; i++)
        for (size_t j = 0; j < sizeof tts / sizeof *tts; j++)
            ln_case(96, 37, tcs[i], tts[j]);
    for (size_t i = 0; i < sizeof tcs / sizeof *tcs; i++) /* the bf16 producers */
        ln_case_of(96, 37, tcs[i], 16, 1);
    tsr_shutdown();
}

/* Deterministic mode: the same bits on 1 and 2 CPU workers (the partials
 * combined in row order; dgamma, dbeta's COMMUTE in submission order). CPU
 * workers alone in every run of the suite: CPUs and (emulated) GPUs round
 * differently, so a task's device must not vary between the two runs
 * (docs/runtime.md, "Deterministic mode"); the emulated-GPU runs' own
 * setting is put back after. */
/* Set environment variable name to value (NULL: unset it); returns its
 * previous value (a copy, or NULL), for env_put again. */
static char *env_put(const char *name, const char *value)
{
    const char *old = getenv(name);
    char *copy = old ? strdup(old) : NULL;
    cr_assert(value ? setenv(name, value, 1) == 0 : unsetenv(name) == 0);
    return copy;
}

Test(nn_ops_rows, layernorm_over_row_tiles_is_bitwise_on_any_workers, .timeout = 120)
{
    char *ncuda = env_put("TESSERA_NCUDA", "0"), *ncpu = env_put("TESSERA_NCPU", NULL);
    enum { C = 96, N = 37, tc = 40, tt = 8 };
    rt_start(1, 1);
    ln_got_t a = ln_run(C, N, tc, tt, 7, 0);
    tsr_shutdown();
    rt_start(2, 1);
    ln_got_t b = ln_run(C, N, tc, tt, 7, 0);
    tsr_shutdown();
    size_t cn = (size_t)C * N;
    cr_expect_eq(memcmp(a.out, b.out, cn * 4), 0, "out");
    cr_expect_eq(memcmp(a.mean, b.mean, (size_t)N * 4), 0, "mean");
    cr_expect_eq(memcmp(a.rstd, b.rstd, (size_t)N * 4), 0, "rstd");
    cr_expect_eq(memcmp(a.dx, b.dx, cn * 4), 0, "dx");
    cr_expect_eq(memcmp(a.dg, b.dg, (size_t)C * 4), 0, "dgamma");
    cr_expect_eq(memcmp(a.db, b.db, (size_t)C * 4), 0, "dbeta");
    got_free(&a);
    got_free(&b);
    free(env_put("TESSERA_NCUDA", ncuda));
    free(env_put("TESSERA_NCPU", ncpu));
    free(ncuda);
    free(ncpu);
}

/* gamma tiled unlike x's rows, no scratch, a scratch of the wrong shape:
 * TSR_EINVAL naming both tilings, before any task. */
Test(nn_ops_rows, layernorm_over_row_tiles_refuses_mismatches)
{
    rt_start(2, 0);
    enum { C = 96, N = 10, tc = 32, tt = 4 };
    tsr_tensor_t X, G, G16, B, O, Mu, Rs, DX, DG, P, P1;
    tensor_from(&X, C, N, tc, tt, NULL);
    tensor_from(&G, C, 1, tc, 1, NULL);
    tensor_from(&G16, C, 1, 16, 1, NULL);
    tensor_from(&B, C, 1, tc, 1, NULL);
    tensor_from(&O, C, N, tc, tt, NULL);
    tensor_from(&Mu, 1, N, 1, tt, NULL);
    tensor_from(&Rs, 1, N, 1, tt, NULL);
    tensor_from(&DX, C, N, tc, tt, NULL);
    tensor_from(&DG, C, 1, tc, 1, NULL);
    tensor_from(&P, 6, N, 2, tt, NULL);
    tensor_from(&P1, 4, N, 2, tt, NULL); /* two row tiles' partials, x has three */
    cr_assert_eq(tsr__op_layernorm_fwd_rows(&X, &G16, &B, &O, &Mu, &Rs, &P), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "gamma (96, 1) in tiles of 16 rows for x (96, 10) "
                                          "in tiles of 32 rows"),
              "%s", tsr_error_message());
    cr_assert_eq(tsr__op_layernorm_fwd_rows(&X, &G, &G16, &O, &Mu, &Rs, &P), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "beta"), "%s", tsr_error_message());
    cr_assert_eq(tsr__op_layernorm_bwd_rows(&O, &X, &G, &Mu, &Rs, &DX, &G16, &DG, &P),
                 TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "dgamma (96, 1) in tiles of 16"), "%s",
              tsr_error_message());
    cr_assert_eq(tsr__op_layernorm_fwd(&X, &G, &B, &O, &Mu, &Rs), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "needs a scratch"), "%s", tsr_error_message());
    cr_assert_eq(tsr__op_layernorm_bwd(&O, &X, &G, &Mu, &Rs, &DX, &DG, &B), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "needs a scratch"), "%s", tsr_error_message());
    cr_assert_eq(tsr__op_layernorm_fwd_rows(&X, &G, &B, &O, &Mu, &Rs, &P1), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "scratch (4, 10)"), "%s", tsr_error_message());
    /* the bf16 producers over row tiles need the scratch too */
    tsr_handle_t scratch;
    tsr_tensor_t O16, DX16;
    bf16_tensor(&O16, C, N, tc, tt, NULL);
    bf16_tensor(&DX16, C, N, tc, tt, NULL);
    OK(tsr_handle_alloc(&scratch, (size_t)tc * tt * 4));
    cr_assert_eq(tsr__op_layernorm_fwd_bf16(&X, &G, &B, &O16, &Mu, &Rs, scratch, NULL),
                 TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "needs a scratch"), "%s", tsr_error_message());
    cr_assert_eq(tsr__op_layernorm_bwd_bf16(&O, &X, &G, &Mu, &Rs, &DX, &DX16, &DG, &B, NULL),
                 TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "needs a scratch"), "%s", tsr_error_message());
    cr_assert_eq(tsr__op_layernorm_fwd_bf16(&X, &G, &B, &O, &Mu, &Rs, scratch, &P), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "bf16 output"), "%s", tsr_error_message());
    OK(tsr_handle_unregister(scratch));
    tsr__tensor_free(&O16);
    tsr__tensor_free(&DX16);
    tsr_tensor_t *all[] = {&X, &G, &G16, &B, &O, &Mu, &Rs, &DX, &DG, &P, &P1};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tsr__tensor_free(all[i]);
    tsr_shutdown();
}
