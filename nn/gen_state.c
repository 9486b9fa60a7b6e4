/* nn/gen_state.c — slots, caches and the column bookkeeping of generation
 * with a KV cache, for any model family (nn/gen_state.h). */
#include "nn/gen_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/registry.h"
#include "runtime/error.h"
#include "runtime/instance.h"

/* ---- live states ----------------------------------------------------------- */

static tsr__registry_t live = TSR__REGISTRY_INIT;

int tsr__gen_live(const tsr__gen_t *g)
{
    return g && tsr__registry_find(&live, g, 0);
}

int tsr__gen_check(const tsr__gen_t *g, const char *fn)
{
    TSR_TRY(tsr__registry_check(&live, g, g ? &g->runtime : NULL, "generation state", fn));
    return g->ops->check(g->model, fn);
}

/* ---- create, free ------------------------------------------------------------ */

/* Free a state that is not (or no longer) in the registry. */
static void destroy(tsr__gen_t *g)
{
    int same = g->runtime == tsr__runtime_instance();
    if (g->ops->release)
        g->ops->release(g, same);
    void (*fn)(tsr_tensor_t *) = same ? tsr__tensor_free : tsr__tensor_forget;
    /* the model may be gone already: the layer count is the state's own */
    if (g->kc)
        for (int l = 0; l < g->layers; l++) {
            fn(&g->kc[l]);
            fn(&g->vc[l]);
        }
    for (int i = 0; g->steps && i < g->B; i++)
        if (g->steps[i])
            g->ops->free_set(g->steps[i], same);
    free(g->steps);
    free(g->kc);
    free(g->vc);
    free(g->len);
    free(g->scratch);
    free(g->col_tok);
    free(g->col_pos);
    free(g->col_slot);
    free(g->col_tab);
    free(g);
}

int tsr__gen_create(const tsr__gen_model_t *ops, void *model, int batch, int max_len,
                    int max_ctx, int layers, int vocab, int kv_rows, int d, tsr__gen_t **out)
{
    const char *p = ops->prefix;
    *out = NULL;
    if (batch < 1 || batch > 4096)
        return tsr__fail(TSR_EINVAL, "%s_create: batch %d outside [1, 4096]", p, batch);
    if (max_len < 1 || max_len > max_ctx)
        return tsr__fail(TSR_EINVAL, "%s_create: max_len %d outside [1, context %d]", p,
                         max_len, max_ctx);
    if ((long long)batch * max_len > (1LL << 30) ||
        (long long)d * batch * max_len > (1LL << 31) - 1)
        return tsr__fail(TSR_EINVAL, "%s_create: batch %d x max_len %d positions make a "
                                     "cache tile of more than 2^31 elements", p, batch, max_len);
    tsr__gen_t *g = calloc(1, ops->size);
    if (!g)
        return tsr__fail(TSR_ENOMEM, "%s_create: out of memory", p);
    g->ops = ops;
    g->model = model;
    g->runtime = tsr__runtime_instance();
    g->B = batch;
    g->maxlen = max_len;
    g->layers = layers;
    g->vocab = vocab;
    g->len = calloc((size_t)batch, sizeof *g->len);
    g->kc = calloc((size_t)layers, sizeof *g->kc);
    g->vc = calloc((size_t)layers, sizeof *g->vc);
    g->steps = calloc((size_t)batch, sizeof *g->steps);
    g->scratch = malloc((size_t)vocab * (size_t)batch * sizeof *g->scratch);
    size_t ncol = (size_t)(batch > max_len ? batch : max_len);
    g->col_tok = malloc(ncol * sizeof *g->col_tok);
    g->col_pos = malloc(ncol * sizeof *g->col_pos);
    g->col_slot = malloc(ncol * sizeof *g->col_slot);
    g->col_tab = malloc(2 * ncol * sizeof *g->col_tab);
    int rc = TSR_OK;
    if (!g->len || !g->kc || !g->vc || !g->steps || !g->scratch || !g->col_tok || !g->col_pos ||
        !g->col_slot || !g->col_tab)
        rc = tsr__fail(TSR_ENOMEM, "%s_create: out of memory", p);
    for (int l = 0; !rc && l < layers; l++) {
        int cols = batch * max_len;
        rc = tsr__tensor_init(&g->kc[l], kv_rows, cols, d, cols);
        if (!rc)
            rc = tsr__tensor_init(&g->vc[l], kv_rows, cols, d, cols);
    }
    if (!rc && tsr__registry_add(&live, g))
        rc = tsr__fail(TSR_ENOMEM, "%s_create: no memory for the registry", p);
    if (rc) {
        destroy(g);
        return rc;
    }
    *out = g;
    return TSR_OK;
}

int tsr__gen_free(const char *prefix, tsr__gen_t *g)
{
    if (!g)
        return TSR_OK;
    if (!tsr__registry_find(&live, g, 1))
        return tsr__fail(TSR_EINVAL, "%s_free: %p is not a live generation state (freed "
                                     "already, or never created)", prefix, (void *)g);
    destroy(g);
    return TSR_OK;
}

int tsr__gen_length(const tsr__gen_t *g, int slot)
{
    if (!tsr__gen_live(g) || slot < 0 || slot >= g->B)
        return -1;
    return g->len[slot];
}

int tsr__gen_reset(const char *prefix, tsr__gen_t *g, int slot)
{
    if (!tsr__gen_live(g))
        return tsr__fail(TSR_EINVAL, "%s_reset: %p is not a live generation state", prefix,
                         (void *)g);
    if (slot < 0 || slot >= g->B)
        return tsr__fail(TSR_EINVAL, "%s_reset: slot %d outside [0, %d)", prefix, slot, g->B);
    g->len[slot] = 0;
    return TSR_OK;
}

/* ---- the calls ------------------------------------------------------------------ */

int tsr__gen_write_cols(tsr__gen_t *g, int n, tsr_tensor_t *cols, double *keys)
{
    *keys = 0;
    for (int j = 0; j < n; j++) {
        g->col_tab[2 * j] = g->col_slot[j];
        g->col_tab[2 * j + 1] = g->col_pos[j];
        *keys += g->col_pos[j] + 1.0;
    }
    return tsr__tensor_write(cols, g->col_tab, 2);
}

static int check_ids(const tsr__gen_t *g, const int32_t *ids, int n, const char *fn)
{
    for (int i = 0; i < n; i++)
        if (ids[i] >= g->vocab || ids[i] < 0)
            return tsr__fail(TSR_EINVAL, "%s: token %d at %d is outside [0, %d)", fn, (int)ids[i],
                             i, g->vocab);
    return TSR_OK;
}

int tsr__gen_prefill(const char *prefix, tsr__gen_t *g, int slot, const int32_t *tokens, int n,
                     float *logits)
{
    char fn[64];
    snprintf(fn, sizeof fn, "%s_prefill", prefix);
    TSR_TRY(tsr__gen_check(g, fn));
    if (slot < 0 || slot >= g->B)
        return tsr__fail(TSR_EINVAL, "%s: slot %d outside [0, %d)", fn, slot, g->B);
    if (!tokens)
        return tsr__fail(TSR_EINVAL, "%s: tokens is NULL", fn);
    if (n < 1 || n > g->maxlen)
        return tsr__fail(TSR_EINVAL, "%s: a prompt of %d tokens; the state holds 1 to %d per "
                                     "slot", fn, n, g->maxlen);
    TSR_TRY(check_ids(g, tokens, n, fn));
    g->len[slot] = 0; /* the slot's old positions are gone, whatever follows */
    for (int j = 0; j < n; j++) {
        g->col_tok[j] = tokens[j];
        g->col_pos[j] = j;
        g->col_slot[j] = slot;
    }
    void *s = NULL;
    TSR_TRY(g->ops->make_set(g, n, 1, &s));
    int rc = g->ops->run(g, s);
    if (!rc && logits)
        rc = tsr__tensor_read(g->ops->logits(s), logits, (size_t)g->vocab);
    g->ops->free_set(s, 1); /* waits for its tasks */
    if (!rc)
        g->len[slot] = n;
    return rc;
}

int tsr__gen_step(const char *prefix, tsr__gen_t *g, const int32_t *tokens, float *logits)
{
    char fn[64];
    snprintf(fn, sizeof fn, "%s_step", prefix);
    TSR_TRY(tsr__gen_check(g, fn));
    if (!tokens)
        return tsr__fail(TSR_EINVAL, "%s: tokens is NULL", fn);
    int V = g->vocab, n = 0;
    for (int b = 0; b < g->B; b++) {
        if (tokens[b] < 0)
            continue;
        if (tokens[b] >= V)
            return tsr__fail(TSR_EINVAL, "%s: token %d of slot %d is outside [0, %d)", fn,
                             (int)tokens[b], b, V);
        if (g->len[b] >= g->maxlen)
            return tsr__fail(TSR_EINVAL, "%s: slot %d is full (%d positions)", fn, b,
                             g->maxlen);
        g->col_tok[n] = tokens[b];
        g->col_pos[n] = g->len[b];
        g->col_slot[n] = b;
        n++;
    }
    if (n == 0)
        return tsr__fail(TSR_EINVAL, "%s: no slot steps (every token is negative)", fn);
    if (!g->steps[n - 1])
        TSR_TRY(g->ops->make_set(g, n, n, &g->steps[n - 1]));
    void *s = g->steps[n - 1];
    TSR_TRY(g->ops->run(g, s));
    /* the logits' columns are the stepping slots in order: straight into
     * the caller's rows when every slot steps */
    float *dst = logits && n == g->B ? logits : g->scratch;
    TSR_TRY(tsr__tensor_read(g->ops->logits(s), dst, (size_t)V));
    if (logits && dst != logits)
        for (int j = 0; j < n; j++)
            memcpy(logits + (size_t)g->col_slot[j] * V, dst + (size_t)j * V,
                   (size_t)V * sizeof *logits);
    for (int j = 0; j < n; j++)
        g->len[g->col_slot[j]]++;
    return TSR_OK;
}
