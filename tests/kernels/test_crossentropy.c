/* Cross-entropy over several vocabulary tiles (maxsumexp -> merge ->
 * logsumexp -> loss / gradient per tile) against the naive full-vocabulary
 * softmax in double; gradient also against finite differences of the double
 * loss; ignored targets; in-place gradient. */
#include "kernels/crossentropy.h"
#include "kernels/softmax.h"
#include "kt_util.h"

/* sum_t scale * (lse_t - x(target_t, t)) over non-ignored tokens, in double */
static double ref_loss(int V, int T, const double *x, const int32_t *tg, double scale, double *per_tok)
{
    double total = 0;
    for (int t = 0; t < T; t++) {
        const double *xt = x + (size_t)t * V;
        double mx = -INFINITY, s = 0;
        for (int v = 0; v < V; v++)
            mx = xt[v] > mx ? xt[v] : mx;
        for (int v = 0; v < V; v++)
            s += exp(xt[v] - mx);
        double l = tg[t] < 0 ? 0.0 : mx + log(s) - xt[tg[t]];
        if (per_tok)
            per_tok[t] = l;
        total += scale * l;
    }
    return total;
}

static void run(int V, int T, const int *cuts, int ncuts, int inplace, uint64_t salt)
{
    kt_rng r = kt_seed(salt);
    float *x = kt_rand(&r, (size_t)V * T, -4, 4);
    int32_t *tg = malloc(sizeof(int32_t) * T);
    for (int t = 0; t < T; t++)
        tg[t] = kt_randint(&r, 0, V);
    if (T > 2)
        tg[1] = -1; /* ignored token */
    const float scale = 1.0f / T;
    /* vocabulary tiles [cuts[c], cuts[c+1]) as separate buffers with ld = nv + 1 */
    float *state = kt_alloc(2 * (size_t)T), *part = kt_alloc(2 * (size_t)T);
    float *lse = kt_alloc(T), *loss = kt_alloc(T), *grad = kt_alloc((size_t)V * T);
    float **tiles = malloc(sizeof(float *) * ncuts);
    for (int c = 0; c + 1 < ncuts; c++) {
        int v0 = cuts[c], nv = cuts[c + 1] - v0, ld = nv + 1;
        tiles[c] = kt_alloc((size_t)ld * T);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < nv; i++)
                tiles[c][i + (size_t)t * ld] = x[v0 + i + (size_t)t * V];
        /* tile 0 starts the state; others make their own and merge */
        tsr_cpu_maxsumexp(nv, T, tiles[c], ld, c == 0 ? state : part, 0);
        if (c > 0)
            tsr_cpu_maxsumexp_merge(T, part, state);
    }
    tsr_cpu_logsumexp(T, state, lse);
    for (int t = 0; t < T; t++)
        loss[t] = 0.0f;
    for (int c = 0; c + 1 < ncuts; c++) {
        int v0 = cuts[c], nv = cuts[c + 1] - v0, ld = nv + 1;
        tsr_cpu_crossentropy_fwd(nv, T, v0, tiles[c], ld, lse, tg, loss);
        if (inplace) {
            tsr_cpu_crossentropy_bwd(nv, T, v0, tiles[c], ld, lse, tg, scale, tiles[c], ld);
            for (int t = 0; t < T; t++)
                for (int i = 0; i < nv; i++)
                    grad[v0 + i + (size_t)t * V] = tiles[c][i + (size_t)t * ld];
        } else {
            float *g = kt_alloc((size_t)nv * T);
            tsr_cpu_crossentropy_bwd(nv, T, v0, tiles[c], ld, lse, tg, scale, g, nv);
            for (int t = 0; t < T; t++)
                for (int i = 0; i < nv; i++)
                    grad[v0 + i + (size_t)t * V] = g[i + (size_t)t * nv];
            free(g);
        }
    }
    double *xd = kt_dalloc((size_t)V * T), *wl = kt_dalloc(T), *fd = kt_dalloc((size_t)V * T);
    for (size_t i = 0; i < (size_t)V * T; i++)
        xd[i] = x[i];
    ref_loss(V, T, xd, tg, scale, wl);
    kt_assert_close("per-token loss", loss, wl, T, 2e-6, 2e-6);
    for (size_t i = 0; i < (size_t)V * T; i++) {
        double x0 = xd[i], h = 1e-6;
        xd[i] = x0 + h;
        double lp = ref_loss(V, T, xd, tg, scale, NULL);
        xd[i] = x0 - h;
        double lm = ref_loss(V, T, xd, tg, scale, NULL);
        xd[i] = x0;
        fd[i] = (lp - lm) / (2 * h);
    }
    kt_assert_close("dlogits vs finite differences", grad, fd, (size_t)V * T, 1e-7, 1e-4);
    for (int c = 0; c + 1 < ncuts; c++)
        free(tiles[c]);
    free(tiles), free(x), free(tg), free(state), free(part), free(lse), free(loss), free(grad);
    free(xd), free(wl), free(fd);
}

Test(crossentropy, single_tile)
{
    const int cuts[] = {0, 11};
    run(11, 4, cuts, 2, 0, 51);
    const int one[] = {0, 1};
    run(1, 1, one, 2, 0, 52);
}

Test(crossentropy, several_vocab_tiles)
{
    const int cuts[] = {0, 1, 10, 23, 37};
    run(37, 5, cuts, 5, 0, 53);
    run(37, 5, cuts, 5, 1, 54);
    const int cuts2[] = {0, 64, 128, 131};
    run(131, 3, cuts2, 4, 0, 55);
}
