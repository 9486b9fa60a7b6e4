/* tsr_cpu_gemm and tsr_cpu_gemm_bf16, whichever library runs them (oneDNN
 * or OpenBLAS), against naive double loops: the four transpositions, odd
 * sizes, ld > rows, strided batches, alpha, beta == 0 over NaN, beta != 0,
 * k == 0, bf16 C; more shapes in a row than a primitive cache holds; two
 * threads at once; and the per-thread thread count.
 *
 * Tolerances (u = 2^-24, fp32's unit roundoff): a sum of k products in fp32
 * is within about k u sum|a b| of the exact one, whatever the order; the
 * inputs of the bf16 GEMM are bf16, so their products are exact in fp32 and
 * only the sums round. Bound used: (k + 4) 2u (|alpha| sum|a b| + |beta c|).
 * A bf16 C adds its rounding: at most half a bf16 ulp, 2^-8 |value|.
 */
#include <dirent.h>
#include <pthread.h>

#include "kernels/gemm.h"
#include "kt_util.h"

enum { BF16_NAN = 0x7fc0 };

/* One GEMM problem with its buffers; A and B hold fp32 values that are
 * bf16-exact when bf16 (so the same values feed the reference). */
typedef struct {
    int bf16, c_bf16, ta, tb, m, n, k, lda, ldb, ldc, batch;
    float alpha, beta;
    int64_t sa, sb, sc;
    size_t na, nb, nc;
    float *a, *b;         /* fp32 values of the inputs */
    uint16_t *ha, *hb;    /* their bf16 bits (bf16 only) */
    void *c;              /* the output buffer (fp32 or bf16) */
    double *c0;           /* C's values before the call (NaN where poisoned) */
    double *want, *tol;   /* reference and tolerance per element of C's buffer */
} problem;

static void problem_make(problem *p, int bf16, int c_bf16, int ta, int tb, int m, int n, int k,
                         int pad, int batch, float alpha, float beta, uint64_t salt)
{
    memset(p, 0, sizeof *p);
    *p = (problem){.bf16 = bf16, .c_bf16 = c_bf16, .ta = ta, .tb = tb, .m = m, .n = n, .k = k,
                   .batch = batch, .alpha = alpha, .beta = beta};
    kt_rng r = kt_seed(salt);
    int ar = ta ? k : m, ac = ta ? m : k; /* A as stored */
    int br = tb ? n : k, bc = tb ? k : n;
    p->lda = (ar > 0 ? ar : 1) + pad, p->ldb = (br > 0 ? br : 1) + pad, p->ldc = m + pad;
    /* gaps between batches, so that a write past one batch shows */
    p->sa = (int64_t)p->lda * ac + 3, p->sb = (int64_t)p->ldb * bc + 1;
    p->sc = (int64_t)p->ldc * n + 2;
    p->na = (size_t)p->sa * batch, p->nb = (size_t)p->sb * batch, p->nc = (size_t)p->sc * batch;
    p->a = kt_rand(&r, p->na, -1, 1), p->b = kt_rand(&r, p->nb, -1, 1);
    if (bf16) {
        p->ha = malloc((p->na + 1) * 2), p->hb = malloc((p->nb + 1) * 2);
        cr_assert(p->ha && p->hb);
        for (size_t i = 0; i < p->na; i++)
            p->ha[i] = kt_bf16_round(p->a[i]), p->a[i] = (float)kt_bf16_value(p->ha[i]);
        for (size_t i = 0; i < p->nb; i++)
            p->hb[i] = kt_bf16_round(p->b[i]), p->b[i] = (float)kt_bf16_value(p->hb[i]);
    }
    p->c0 = kt_dalloc(p->nc);
    p->want = kt_dalloc(p->nc), p->tol = kt_dalloc(p->nc);
    if (c_bf16) {
        uint16_t *c = malloc((p->nc + 1) * 2);
        cr_assert_not_null(c);
        for (size_t i = 0; i < p->nc; i++) {
            c[i] = beta == 0.0f ? BF16_NAN : kt_bf16_round(kt_unif(&r, -1, 1));
            p->c0[i] = beta == 0.0f ? NAN : kt_bf16_value(c[i]);
        }
        p->c = c;
    } else {
        float *c = kt_rand(&r, p->nc, -1, 1);
        if (beta == 0.0f)
            kt_poison(c, p->nc);
        for (size_t i = 0; i < p->nc; i++)
            p->c0[i] = c[i];
        p->c = c;
    }
    /* gaps and padding rows must stay as they were: exact, NaN included */
    for (size_t i = 0; i < p->nc; i++)
        p->want[i] = p->c0[i], p->tol[i] = 0;
    const double u = 0x1p-24;
    for (int bi = 0; bi < batch; bi++) {
        const float *a = p->a + bi * p->sa, *b = p->b + bi * p->sb;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double s = 0.0, sabs = 0.0;
                for (int q = 0; q < k; q++) {
                    double av = ta ? a[q + (size_t)i * p->lda] : a[i + (size_t)q * p->lda];
                    double bv = tb ? b[j + (size_t)q * p->ldb] : b[q + (size_t)j * p->ldb];
                    s += av * bv;
                    sabs += fabs(av * bv);
                }
                size_t o = bi * p->sc + i + (size_t)j * p->ldc;
                double cv = beta == 0.0f ? 0.0 : (double)beta * p->c0[o];
                double w = alpha * s + cv;
                double t = (k + 4) * 2 * u * (fabs(alpha) * sabs + fabs(cv));
                if (c_bf16)
                    t += 0x1p-8 * (fabs(w) + t);
                p->want[o] = w, p->tol[o] = t;
            }
    }
}

static void problem_free(problem *p)
{
    free(p->a), free(p->b), free(p->ha), free(p->hb), free(p->c);
    free(p->c0), free(p->want), free(p->tol);
}

static void problem_run(problem *p)
{
    if (p->bf16)
        tsr_cpu_gemm_bf16(p->ta, p->tb, p->m, p->n, p->k, p->alpha, p->ha, p->lda, p->sa, p->hb,
                          p->ldb, p->sb, p->beta, p->c, p->c_bf16, p->ldc, p->sc, p->batch);
    else
        tsr_cpu_gemm(p->ta, p->tb, p->m, p->n, p->k, p->alpha, p->a, p->lda, p->sa, p->b, p->ldb,
                     p->sb, p->beta, p->c, p->ldc, p->sc, p->batch);
}

/* Number of wrong elements (logging the first): C within tolerance, every
 * other element of the buffer unchanged bit for bit. Thread-safe (no
 * assertion inside). */
static size_t problem_bad(const problem *p)
{
    size_t bad = 0;
    for (size_t o = 0; o < p->nc; o++) {
        size_t in_batch = o % (size_t)p->sc;
        int in_c = in_batch < (size_t)p->ldc * p->n && (int)(in_batch % p->ldc) < p->m;
        double g = p->c_bf16 ? kt_bf16_value(((uint16_t *)p->c)[o]) : ((float *)p->c)[o];
        double w = p->want[o];
        int ok = in_c ? fabs(g - w) <= p->tol[o]
                      : (isnan(w) ? isnan(g) : g == w); /* untouched */
        if (!ok && bad++ == 0)
            cr_log_error("gemm %s%s ta=%d tb=%d %dx%dx%d ld %d,%d,%d batch %d alpha %g beta %g: "
                         "[%zu]%s got %.9g want %.9g tol %.3g",
                         p->bf16 ? "bf16" : "fp32", p->c_bf16 ? "->bf16" : "", p->ta, p->tb, p->m,
                         p->n, p->k, p->lda, p->ldb, p->ldc, p->batch, (double)p->alpha,
                         (double)p->beta, o, in_c ? "" : " (outside C)", g, w, p->tol[o]);
    }
    return bad;
}

static void check(int bf16, int c_bf16, int ta, int tb, int m, int n, int k, int pad, int batch,
                  float alpha, float beta, uint64_t salt)
{
    problem p;
    problem_make(&p, bf16, c_bf16, ta, tb, m, n, k, pad, batch, alpha, beta, salt);
    problem_run(&p);
    size_t bad = problem_bad(&p);
    problem_free(&p);
    cr_assert_eq(bad, 0);
}

/* odd sizes (1, 3, 17, 65, 257) in every position */
static const int odd_shapes[][3] = {{1, 1, 1},   {3, 17, 65},  {17, 3, 257}, {65, 257, 3},
                                    {257, 65, 17}, {257, 1, 65}, {1, 257, 17}};
enum { NODD = sizeof odd_shapes / sizeof odd_shapes[0] };

Test(gemm_cpu, fp32_transpositions_odd_sizes)
{
    cr_log_info("CPU GEMM library: %s", tsr_cpu_gemm_library());
    uint64_t salt = 1;
    for (int s = 0; s < NODD; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                check(0, 0, ta, tb, odd_shapes[s][0], odd_shapes[s][1], odd_shapes[s][2], 0, 1,
                      1.0f, 0.0f, salt++);
}

Test(gemm_cpu, bf16_transpositions_odd_sizes)
{
    uint64_t salt = 100;
    for (int s = 0; s < NODD; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int cb = 0; cb < 2; cb++)
                    check(1, cb, ta, tb, odd_shapes[s][0], odd_shapes[s][1], odd_shapes[s][2], 0,
                          1, 1.0f, 0.0f, salt++);
}

Test(gemm_cpu, padding_batches_alpha_beta)
{
    uint64_t salt = 200;
    const float ab[][2] = {{1.0f, 0.0f}, {0.5f, 1.0f}, {-2.0f, 0.25f}, {1.0f, 1.0f}};
    for (int bf16 = 0; bf16 < 2; bf16++)
        for (int cb = 0; cb <= bf16; cb++)
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++)
                    for (size_t i = 0; i < sizeof ab / sizeof ab[0]; i++)
                        check(bf16, cb, ta, tb, 17, 65, 33, 5, 3, ab[i][0], ab[i][1], salt++);
}

Test(gemm_cpu, large_tile_bf16_and_fp32)
{
    /* a tile shape of GPT-2's kind, shrunk: beta 1 accumulates into C */
    check(0, 0, TSR_NOTRANS, TSR_TRANS, 96, 64, 257, 0, 1, 1.0f, 1.0f, 300);
    check(1, 0, TSR_TRANS, TSR_NOTRANS, 96, 64, 257, 0, 1, 1.0f, 1.0f, 301);
    check(1, 1, TSR_NOTRANS, TSR_NOTRANS, 257, 65, 96, 0, 2, 1.0f, 0.0f, 302);
}

Test(gemm_cpu, k_zero_scales_or_writes_c)
{
    for (int bf16 = 0; bf16 < 2; bf16++)
        for (int cb = 0; cb <= bf16; cb++) {
            check(bf16, cb, TSR_NOTRANS, TSR_NOTRANS, 4, 3, 0, 1, 2, 1.0f, 0.0f, 400);
            check(bf16, cb, TSR_TRANS, TSR_NOTRANS, 4, 3, 0, 2, 2, 1.0f, 0.5f, 401);
        }
}

/* More distinct shapes than the per-thread primitive cache holds (32), then
 * the first ones again (rebuilt after eviction): all correct. */
Test(gemm_cpu, many_shapes_in_a_row)
{
    uint64_t salt = 500;
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < 48; i++) {
            int m = 3 + i % 7, n = 2 + i / 7, k = 1 + (i * 5) % 13;
            check(i % 2, 0, i % 3 == 0, i % 4 == 1, m, n, k, i % 3, 1 + i % 2,
                  i % 5 ? 1.0f : 0.75f, i % 6 ? 0.0f : 1.0f, salt + i);
        }
}

/* Two threads at once, each through its own shapes and a common one. */
typedef struct {
    problem p[12];
    size_t bad;
} tjob;

static void *run_job(void *arg)
{
    tjob *j = arg;
    tsr_cpu_gemm_set_thread_count(1);
    for (int rep = 0; rep < 3; rep++)
        for (int i = 0; i < 12; i++) {
            problem_run(&j->p[i]);
            /* beta != 0 accumulates: compare the first pass only */
            if (rep == 0)
                j->bad += problem_bad(&j->p[i]);
        }
    return NULL;
}

Test(gemm_cpu, two_threads_at_once)
{
    static tjob jobs[2];
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < 12; i++) {
            int common = i % 3 == 0; /* the same shape in both threads */
            int m = common ? 64 : 20 + 7 * t + i, n = common ? 48 : 9 + i, k = common ? 96 : 33;
            problem_make(&jobs[t].p[i], i % 2, i % 4 == 3, i % 3 == 1, i % 5 == 2, m, n, k, 0,
                         1, 1.0f, 0.0f, 600 + 100 * t + i);
        }
    pthread_t th[2];
    for (int t = 0; t < 2; t++)
        cr_assert_eq(pthread_create(&th[t], NULL, run_job, &jobs[t]), 0);
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < 2; t++) {
        cr_expect_eq(jobs[t].bad, 0, "thread %d", t);
        for (int i = 0; i < 12; i++)
            problem_free(&jobs[t].p[i]);
    }
}

/* ---- the thread count is the calling thread's ------------------------------ */

static int count_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

typedef struct {
    int before, after_one, after_two, prev;
} tcount;

/* In a fresh thread: with 1 thread, GEMMs start no thread; with 2 (the
 * control: the count sees a team when there is one), oneDNN's start one. */
static void *count_job(void *arg)
{
    tcount *r = arg;
    problem p, q;
    problem_make(&p, 0, 0, 0, 0, 384, 384, 384, 0, 1, 1.0f, 0.0f, 700);
    problem_make(&q, 1, 0, 0, 0, 384, 384, 384, 0, 1, 1.0f, 0.0f, 701);
    r->prev = tsr_cpu_gemm_set_thread_count(1);
    r->before = count_threads();
    problem_run(&p);
    problem_run(&q);
    r->after_one = count_threads();
    tsr_cpu_gemm_set_thread_count(2);
    problem_run(&p);
    problem_run(&q);
    r->after_two = count_threads();
    problem_free(&p);
    problem_free(&q);
    return NULL;
}

Test(gemm_cpu, thread_count_is_per_thread)
{
    int onednn = !strcmp(tsr_cpu_gemm_library(), "onednn");
    /* this thread's own setting: 3, then another thread sets 1 and 2 */
    int mine = tsr_cpu_gemm_set_thread_count(3);
    tcount r;
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, count_job, &r), 0);
    pthread_join(th, NULL);
    int back = tsr_cpu_gemm_set_thread_count(mine);
    cr_log_info("threads: %d before, %d after GEMMs on 1 thread, %d after GEMMs on 2", r.before,
                r.after_one, r.after_two);
    if (onednn) {
        cr_expect_eq(back, 3, "another thread's setting changed this thread's");
        cr_expect_geq(r.prev, 1);
        cr_expect_eq(r.after_one, r.before, "a GEMM on 1 thread started threads");
        cr_expect(r.after_two > r.after_one, "a GEMM on 2 threads started none (control)");
    } else { /* OpenBLAS: nothing per thread to set */
        cr_expect_eq(back, 0);
        cr_expect_eq(r.prev, 0);
    }
}
