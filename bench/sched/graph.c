/* graph.c — the task-graph generators of the scheduling benchmark, the
 * dependencies their access modes imply, the sequential reference and the
 * check. See bench_sched.h. */
#include "bench_sched.h"
#include "cholesky_tiles.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void graph_params_default(graph_params_t *p, int quick)
{
    memset(p, 0, sizeof *p);
    p->seed = 1;
    p->gemm_n = quick ? 512 : 2560;
    p->gemm_b = quick ? 128 : 256;
    p->chol_n = quick ? 1024 : 4096;
    p->chol_b = quick ? 128 : 256;
    p->rnd_width = quick ? 8 : 24;
    p->rnd_depth = quick ? 8 : 24;
    p->rnd_edges = 3;
    p->rnd_cmin_us = 40;
    p->rnd_spread = 10;
    p->rnd_bytes = (size_t)64 << 10;
    p->fj_children = 14;
    p->fj_iters = quick ? 4 : 24;
    p->fj_cmin_us = 50;
    p->fj_spread = 10;
    p->fj_bytes = (size_t)64 << 10;
}

/* ---- building ------------------------------------------------------------ */

typedef struct builder {
    graph_t *g;
    int cap_t, cap_a, cap_h;
    int failed;
} builder_t;

static int grow(void **p, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int n = *cap ? *cap : 64;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, (size_t)n * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

static int add_handle(builder_t *b, size_t bytes, int type)
{
    graph_t *g = b->g;
    if (g->nhandles == b->cap_h) {
        int n = b->cap_h ? 2 * b->cap_h : 64;
        size_t *hs = realloc(g->hsize, (size_t)n * sizeof *hs);
        if (hs)
            g->hsize = hs;
        size_t *ho = realloc(g->hoff, (size_t)n * sizeof *ho);
        if (ho)
            g->hoff = ho;
        int *ht = realloc(g->htype, (size_t)n * sizeof *ht);
        if (ht)
            g->htype = ht;
        unsigned char *hw = realloc(g->hwritten, (size_t)n);
        if (hw)
            g->hwritten = hw;
        if (!hs || !ho || !ht || !hw) {
            b->failed = 1;
            return 0;
        }
        b->cap_h = n;
    }
    int h = g->nhandles++;
    g->hsize[h] = bytes;
    g->htype[h] = type;
    g->hwritten[h] = 0;
    return h;
}

static void add_task(builder_t *b, int kernel, int prio, int m, int n, int k,
                     double cost_us, int nbuf, const sg_access_t *acc)
{
    graph_t *g = b->g;
    if (b->failed)
        return;
    if (grow((void **)&g->tasks, &b->cap_t, g->ntasks + 1, sizeof *g->tasks) ||
        grow((void **)&g->acc, &b->cap_a, g->nacc + nbuf, sizeof *g->acc)) {
        b->failed = 1;
        return;
    }
    sg_task_t *t = &g->tasks[g->ntasks];
    *t = (sg_task_t){.id = g->ntasks, .kernel = kernel, .nbuf = nbuf,
                     .acc0 = g->nacc, .prio = prio, .m = m, .n = n, .k = k,
                     .cost_us = cost_us};
    for (int i = 0; i < nbuf; i++) {
        g->acc[g->nacc + i] = acc[i];
        if (acc[i].mode & SG_W)
            g->hwritten[acc[i].handle] = 1;
    }
    g->nacc += nbuf;
    g->ntasks++;
    g->flops += sg_task_flops(t);
}

/* Lay the handles out in one arena (64-byte aligned each) and allocate the
 * three copies. */
static int layout(graph_t *g)
{
    size_t off = 0;
    for (int h = 0; h < g->nhandles; h++) {
        g->hoff[h] = off;
        off += (g->hsize[h] + 63) & ~(size_t)63;
    }
    g->bytes = off ? off : 64;
    g->data = aligned_alloc(64, g->bytes);
    g->init = aligned_alloc(64, g->bytes);
    g->ref = aligned_alloc(64, g->bytes);
    if (!g->data || !g->init || !g->ref)
        return -1;
    memset(g->init, 0, g->bytes);
    return 0;
}

/* splitmix64 */
static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s)
{
    return (double)(next(s) >> 11) * 0x1.0p-53;
}

/* ---- dependencies --------------------------------------------------------- */

/* The sequential-task-flow rules: a task waits for the last writer of every
 * handle it touches, and a writer also for the readers since that write. */
static int infer(graph_t *g)
{
    int nh = g->nhandles, nt = g->ntasks;
    int *last = malloc((size_t)nh * sizeof *last);
    int **rd = calloc((size_t)nh, sizeof *rd);
    int *nrd = calloc((size_t)nh, sizeof *nrd), *caprd = calloc((size_t)nh, sizeof *caprd);
    int *seen = malloc((size_t)nt * sizeof *seen);
    g->pred_off = malloc(((size_t)nt + 1) * sizeof *g->pred_off);
    int cap = 0, n = 0, rc = 0;
    if (!last || !rd || !nrd || !caprd || !seen || !g->pred_off) {
        rc = -1;
        goto out;
    }
    for (int h = 0; h < nh; h++)
        last[h] = -1;
    for (int t = 0; t < nt; t++)
        seen[t] = -1;
#define EDGE(p)                                                                \
    do {                                                                       \
        int p_ = (p);                                                          \
        if (p_ >= 0 && seen[p_] != t) {                                        \
            seen[p_] = t;                                                      \
            if (grow((void **)&g->preds, &cap, n + 1, sizeof *g->preds)) {     \
                rc = -1;                                                       \
                goto out;                                                      \
            }                                                                  \
            g->preds[n++] = p_;                                                \
        }                                                                      \
    } while (0)
    for (int t = 0; t < nt; t++) {
        const sg_task_t *tk = &g->tasks[t];
        g->pred_off[t] = n;
        for (int i = 0; i < tk->nbuf; i++) {
            const sg_access_t *a = &g->acc[tk->acc0 + i];
            EDGE(last[a->handle]);
            if (a->mode & SG_W)
                for (int r = 0; r < nrd[a->handle]; r++)
                    EDGE(rd[a->handle][r]);
        }
        for (int i = 0; i < tk->nbuf; i++) {
            const sg_access_t *a = &g->acc[tk->acc0 + i];
            if (a->mode & SG_W) {
                last[a->handle] = t;
                nrd[a->handle] = 0;
            } else {
                if (grow((void **)&rd[a->handle], &caprd[a->handle],
                         nrd[a->handle] + 1, sizeof **rd)) {
                    rc = -1;
                    goto out;
                }
                rd[a->handle][nrd[a->handle]++] = t;
            }
        }
    }
#undef EDGE
    g->pred_off[nt] = n;
    g->nedges = n;
out:
    if (rd)
        for (int h = 0; h < nh; h++)
            free(rd[h]);
    free(rd);
    free(nrd);
    free(caprd);
    free(last);
    free(seen);
    return rc;
}

/* Bottom levels (the task's cost plus the longest path after it) with
 * these task costs; returns the longest path of the graph. */
static double bottom_levels(const graph_t *g, const double *cost, double *bl)
{
    int nt = g->ntasks;
    double cp = 0;
    for (int t = 0; t < nt; t++)
        bl[t] = 0; /* the longest path after t, until t is reached */
    for (int t = nt - 1; t >= 0; t--) {
        bl[t] += cost[t];
        if (bl[t] > cp)
            cp = bl[t];
        for (int i = g->pred_off[t]; i < g->pred_off[t + 1]; i++) {
            int p = g->preds[i];
            if (bl[t] > bl[p])
                bl[p] = bl[t];
        }
    }
    return cp;
}

/* Priorities of a synthetic graph: its bottom level in µs of nominal cost
 * (the critical path first). */
static int set_bottom_level_prio(graph_t *g)
{
    double *cost = calloc((size_t)g->ntasks + 1, sizeof *cost);
    double *bl = calloc((size_t)g->ntasks + 1, sizeof *bl);
    if (!cost || !bl) {
        free(cost);
        free(bl);
        return -1;
    }
    for (int t = 0; t < g->ntasks; t++)
        cost[t] = g->tasks[t].cost_us;
    bottom_levels(g, cost, bl);
    for (int t = 0; t < g->ntasks; t++)
        g->tasks[t].prio = (int)lround(bl[t]);
    free(cost);
    free(bl);
    return 0;
}

/* ---- generators ------------------------------------------------------------ */

static int dim(int n, int b, int i)
{
    int nt = (n + b - 1) / b;
    return i < nt - 1 ? b : n - (nt - 1) * b;
}

/* C += A B over a T x T tile grid, one task per tile product, i-j-k order. */
static int gen_gemm(builder_t *b, const graph_params_t *p)
{
    graph_t *g = b->g;
    int n = p->gemm_n, bs = p->gemm_b, nt = (n + bs - 1) / bs;
    snprintf(g->params, sizeof g->params, "SGEMM N=%d tile %d (%dx%d tiles)",
             n, bs, nt, nt);
    g->tol = 1e-5;
    int *A = malloc(3 * (size_t)nt * (size_t)nt * sizeof *A);
    if (!A)
        return -1;
    int *B = A + nt * nt, *C = B + nt * nt;
    for (int m = 0; m < 3; m++)
        for (int j = 0; j < nt; j++)
            for (int i = 0; i < nt; i++)
                A[m * nt * nt + i + j * nt] = add_handle(
                    b, (size_t)dim(n, bs, i) * (size_t)dim(n, bs, j) * sizeof(float),
                    SG_F32);
    for (int i = 0; i < nt; i++)
        for (int j = 0; j < nt; j++)
            for (int k = 0; k < nt; k++)
                add_task(b, K_SGEMM, 0, dim(n, bs, i), dim(n, bs, j), dim(n, bs, k),
                         0, 3,
                         (sg_access_t[]){{A[i + k * nt], SG_R},
                                         {B[k + j * nt], SG_R},
                                         {C[i + j * nt], SG_RW}});
    if (b->failed || layout(g)) {
        free(A);
        return -1;
    }
    uint64_t s = p->seed;
    for (int h = 0; h < 2 * nt * nt; h++) {
        float *x = (float *)(void *)(g->init + g->hoff[A[h]]);
        for (size_t e = 0; e < g->hsize[A[h]] / sizeof *x; e++)
            x[e] = (float)(2 * uniform(&s) - 1);
    }
    free(A); /* C stays zero */
    return 0;
}

/* Right-looking tiled Cholesky (lower), the tasks and priorities of
 * examples/cholesky_tiles.h. */
static int gen_cholesky(builder_t *b, const graph_params_t *p)
{
    graph_t *g = b->g;
    int n = p->chol_n, bs = p->chol_b, nt = (n + bs - 1) / bs;
    snprintf(g->params, sizeof g->params, "DPOTRF N=%d tile %d (%d tile rows)",
             n, bs, nt);
    g->tol = 1e-10;
    int *H = malloc((size_t)nt * (size_t)nt * sizeof *H);
    if (!H)
        return -1;
#define T(i, j) H[(i) + (j) * nt]
    for (int j = 0; j < nt; j++)
        for (int i = j; i < nt; i++)
            T(i, j) = add_handle(b, (size_t)dim(n, bs, i) * (size_t)dim(n, bs, j) *
                                        sizeof(double),
                                 SG_F64);
    for (int k = 0; k < nt; k++) {
        int nk = dim(n, bs, k);
        add_task(b, K_DPOTRF, chol_prio_potrf(nt, k), nk, nk, nk, 0, 1,
                 (sg_access_t[]){{T(k, k), SG_RW}});
        for (int i = k + 1; i < nt; i++)
            add_task(b, K_DTRSM, chol_prio_trsm(nt, k, i), dim(n, bs, i), nk, nk,
                     0, 2, (sg_access_t[]){{T(k, k), SG_R}, {T(i, k), SG_RW}});
        for (int j = k + 1; j < nt; j++) {
            int mj = dim(n, bs, j);
            add_task(b, K_DSYRK, chol_prio_syrk(nt, k, j), mj, mj, nk, 0, 2,
                     (sg_access_t[]){{T(j, k), SG_R}, {T(j, j), SG_RW}});
            for (int i = j + 1; i < nt; i++)
                add_task(b, K_DGEMM, chol_prio_gemm(nt, k, i, j), dim(n, bs, i),
                         mj, nk, 0, 3,
                         (sg_access_t[]){{T(i, k), SG_R}, {T(j, k), SG_R},
                                         {T(i, j), SG_RW}});
        }
    }
    double *full = NULL;
    if (b->failed || layout(g) ||
        !(full = malloc((size_t)n * (size_t)n * sizeof *full))) {
        free(H);
        return -1;
    }
    chol_spd_matrix(full, n, (unsigned)p->seed);
    for (int j = 0; j < nt; j++)
        for (int i = j; i < nt; i++) {
            double *t = (double *)(void *)(g->init + g->hoff[T(i, j)]);
            int rows = dim(n, bs, i), cols = dim(n, bs, j);
            for (int c = 0; c < cols; c++)
                memcpy(t + (size_t)c * (size_t)rows,
                       full + (size_t)i * (size_t)bs +
                           ((size_t)j * (size_t)bs + (size_t)c) * (size_t)n,
                       (size_t)rows * sizeof *t);
        }
#undef T
    free(full);
    free(H);
    return 0;
}

static double cost_of(uint64_t *s, double cmin, double spread)
{
    return cmin * pow(spread, uniform(s));
}

/* depth layers of width tasks; a task of layer d > 0 reads the outputs of
 * `edges` distinct tasks of layer d-1 and writes its own output. */
static int gen_random(builder_t *b, const graph_params_t *p)
{
    graph_t *g = b->g;
    int w = p->rnd_width, d = p->rnd_depth;
    int e = p->rnd_edges < w ? p->rnd_edges : w;
    if (e > SG_MAX_BUFFERS - 1)
        e = SG_MAX_BUFFERS - 1;
    snprintf(g->params, sizeof g->params,
             "%dx%d tasks, %d inputs each, %g-%g us, %zu KiB/handle", w, d, e,
             p->rnd_cmin_us, p->rnd_cmin_us * p->rnd_spread, p->rnd_bytes >> 10);
    int *pick = malloc((size_t)w * sizeof *pick);
    if (!pick)
        return -1;
    for (int t = 0; t < w * d; t++)
        add_handle(b, p->rnd_bytes, SG_U64);
    uint64_t s = p->seed * 7919;
    for (int l = 0; l < d; l++)
        for (int i = 0; i < w; i++) {
            sg_access_t acc[SG_MAX_BUFFERS];
            int nb = 0;
            if (l > 0) {
                for (int j = 0; j < w; j++)
                    pick[j] = j;
                for (int j = 0; j < e; j++) { /* partial Fisher-Yates */
                    int r = j + (int)(next(&s) % (uint64_t)(w - j));
                    int x = pick[j];
                    pick[j] = pick[r];
                    pick[r] = x;
                    acc[nb++] = (sg_access_t){(l - 1) * w + pick[j], SG_R};
                }
            }
            acc[nb++] = (sg_access_t){l * w + i, SG_W};
            add_task(b, K_SPIN, 0, 0, 0, 0,
                     cost_of(&s, p->rnd_cmin_us, p->rnd_spread), nb, acc);
        }
    free(pick);
    if (b->failed || layout(g))
        return -1;
    return 0;
}

/* iters times: a root (RW x), children (R x, W y_i), a join (R every y_i,
 * RW x). */
static int gen_forkjoin(builder_t *b, const graph_params_t *p)
{
    graph_t *g = b->g;
    int nc = p->fj_children < SG_MAX_BUFFERS - 1 ? p->fj_children
                                                 : SG_MAX_BUFFERS - 1;
    snprintf(g->params, sizeof g->params,
             "%d x (root, %d children %g-%g us, join), %zu KiB/handle",
             p->fj_iters, nc, p->fj_cmin_us, p->fj_cmin_us * p->fj_spread,
             p->fj_bytes >> 10);
    int x = add_handle(b, p->fj_bytes, SG_U64);
    for (int i = 0; i < nc; i++)
        add_handle(b, p->fj_bytes, SG_U64);
    uint64_t s = p->seed * 104729;
    for (int r = 0; r < p->fj_iters; r++) {
        add_task(b, K_SPIN, 0, 0, 0, 0, p->fj_cmin_us, 1,
                 (sg_access_t[]){{x, SG_RW}});
        for (int i = 0; i < nc; i++)
            add_task(b, K_SPIN, 0, 0, 0, 0,
                     cost_of(&s, p->fj_cmin_us, p->fj_spread), 2,
                     (sg_access_t[]){{x, SG_R}, {x + 1 + i, SG_W}});
        sg_access_t acc[SG_MAX_BUFFERS];
        for (int i = 0; i < nc; i++)
            acc[i] = (sg_access_t){x + 1 + i, SG_R};
        acc[nc] = (sg_access_t){x, SG_RW};
        add_task(b, K_SPIN, 0, 0, 0, 0, p->fj_cmin_us, nc + 1, acc);
    }
    if (b->failed || layout(g))
        return -1;
    return 0;
}

static const struct {
    const char *name;
    int (*gen)(builder_t *, const graph_params_t *);
    int synthetic; /* priorities from bottom levels */
} generators[] = {
    {"gemm", gen_gemm, 0},
    {"cholesky", gen_cholesky, 0},
    {"random", gen_random, 1},
    {"forkjoin", gen_forkjoin, 1},
};

int graph_build(graph_t *g, const char *name, const graph_params_t *p,
                char *err, size_t errlen)
{
    memset(g, 0, sizeof *g);
    for (size_t i = 0; i < sizeof generators / sizeof generators[0]; i++) {
        if (strcmp(name, generators[i].name))
            continue;
        snprintf(g->name, sizeof g->name, "%s", name);
        builder_t b = {.g = g};
        if (generators[i].gen(&b, p) != 0 || infer(g) != 0 ||
            (generators[i].synthetic && set_bottom_level_prio(g) != 0)) {
            snprintf(err, errlen, "graph %s: out of memory", name);
            graph_free(g);
            return -1;
        }
        memcpy(g->data, g->init, g->bytes);
        return 0;
    }
    snprintf(err, errlen, "unknown graph '%s' (gemm, cholesky, random, forkjoin)",
             name);
    return -1;
}

void graph_free(graph_t *g)
{
    free(g->tasks);
    free(g->acc);
    free(g->hsize);
    free(g->hoff);
    free(g->htype);
    free(g->hwritten);
    free(g->data);
    free(g->init);
    free(g->ref);
    free(g->pred_off);
    free(g->preds);
    memset(g, 0, sizeof *g);
}

void graph_reset(graph_t *g)
{
    memcpy(g->data, g->init, g->bytes);
}

/* ---- reference and check ------------------------------------------------- */

int graph_reference(graph_t *g, char *err, size_t errlen)
{
    double *cost = calloc((size_t)g->ntasks + 1, sizeof *cost);
    double *bl = calloc((size_t)g->ntasks + 1, sizeof *bl);
    if (!cost || !bl) {
        free(cost);
        free(bl);
        snprintf(err, errlen, "graph %s: out of memory", g->name);
        return -1;
    }
    openblas_set_num_threads(1);
    /* Twice, keeping each task's shorter time: the first calls of a kernel
     * pay for page faults and BLAS's buffers. */
    int rc = 0;
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        graph_reset(g);
        for (int t = 0; t < g->ntasks && rc == 0; t++) {
            const sg_task_t *tk = &g->tasks[t];
            void *bufs[SG_MAX_BUFFERS];
            for (int i = 0; i < tk->nbuf; i++)
                bufs[i] = graph_buf(g, g->acc[tk->acc0 + i].handle);
            double t0 = bench_now();
            rc = sg_exec(g, tk, bufs, -1);
            double dt = bench_now() - t0;
            cost[t] = pass == 0 || dt < cost[t] ? dt : cost[t];
            if (rc)
                snprintf(err, errlen, "graph %s: sequential task %d (%s) failed",
                         g->name, t, sg_kernel_names[tk->kernel]);
        }
    }
    g->seq_s = 0;
    for (int t = 0; t < g->ntasks; t++)
        g->seq_s += cost[t];
    if (rc == 0) {
        g->cp_s = bottom_levels(g, cost, bl);
        memcpy(g->ref, g->data, g->bytes);
    }
    free(cost);
    free(bl);
    return rc ? -1 : 0;
}

int graph_check(const graph_t *g, double *maxerr)
{
    double err = 0, scale = 0;
    long wrong = 0;
    for (int h = 0; h < g->nhandles; h++) {
        if (!g->hwritten[h])
            continue;
        const unsigned char *x = g->data + g->hoff[h], *y = g->ref + g->hoff[h];
        switch (g->htype[h]) {
        case SG_F32:
            for (size_t i = 0; i < g->hsize[h] / sizeof(float); i++) {
                double a = ((const float *)(const void *)x)[i];
                double b = ((const float *)(const void *)y)[i];
                double d = fabs(a - b);
                if (!(d <= err)) /* NaN wins */
                    err = d;
                if (fabs(b) > scale)
                    scale = fabs(b);
            }
            break;
        case SG_F64:
            for (size_t i = 0; i < g->hsize[h] / sizeof(double); i++) {
                double a = ((const double *)(const void *)x)[i];
                double b = ((const double *)(const void *)y)[i];
                double d = fabs(a - b);
                if (!(d <= err))
                    err = d;
                if (fabs(b) > scale)
                    scale = fabs(b);
            }
            break;
        default: /* SG_U64: the hash in the first word */
            wrong += *(const uint64_t *)(const void *)x !=
                     *(const uint64_t *)(const void *)y;
        }
    }
    if (wrong) {
        *maxerr = (double)wrong;
        return 0;
    }
    *maxerr = err;
    return err <= g->tol * (scale > 1 ? scale : 1);
}
