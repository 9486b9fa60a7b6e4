/* nn/generate.c — generation with a KV cache on a GPT-2 model's weights
 * (tessera/gpt2.h, "generation"): prefill and decode steps as tile tasks,
 * and the sampler.
 *
 * A call runs the model over n token columns, each a (slot, position,
 * token): a prefill is one slot's prompt (n = its length, consecutive
 * positions), a decode step one column per stepping slot. Layout, with d =
 * channels / heads and every activation one tile of n columns:
 *   x, res, ln (C, n)              the residual stream, its LayerNorms
 *   qkv (3C, n) tiles (C, n)       c_attn's output: q, k, v of all heads
 *   yh (C, n) tiles (d, n)         the attention output per head
 *   yb (C, n)                      … merged for c_proj
 *   fch, fcg (4C, n) tiles (tf, n) the MLP's hidden activations
 *   cols (2, n) int32              (slot, position) of each column
 *   last (C, k), logits (V, k)     k = n columns (decode) or 1 (prefill:
 *                                  only the last position's logits matter)
 *   kc, vc per layer (C, B maxlen) tiles (d, B maxlen): one tile per head,
 *                                  slot s, position t at column s maxlen + t
 *   bf16 copies (TSR_GPT2_BF16)    c_attn, attn.c_proj, c_fc, mlp.c_proj per
 *                                  layer and wte, packed two per element
 *                                  (nn/gen_ops.h), tiled as the model's
 * The attention task of a head first stores the columns' keys and values,
 * then attends (kernels/decode.h); the cache never leaves its tiles.
 */
#include <tessera/gpt2.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/gen_ops.h"
#include "nn/gpt2_model.h"
#include "nn/ops.h"
#include "nn/gen_state.h"
#include "nn/tensor.h"
#include "runtime/error.h"
#include "runtime/instance.h"
#include "runtime/splitmix.h"

/* The activations of a call over n columns (k of them reach the logits). */
typedef struct colset {
    int n, k;
    tsr_tensor_t x, res, ln, mean, rstd, qkv, yh, yb, fch, fcg, cols;
    tsr_tensor_t last, lnf, lnf_mean, lnf_rstd, logits;
    tsr_tensor_t p0, p1; /* bf16: the partial products of a split Linear */
} colset_t;

/* GPT-2's generation state: the shared slots and caches (nn/gen_state.h,
 * first, so that the engine's state is the model's) and the bf16 copies. */
struct tsr_gpt2_gen {
    tsr__gen_t g;
    int bf16;         /* decode from the bf16 copies */
    tsr_tensor_t *wb; /* the copies: 4 per layer (attn, proj, fc, fcproj), then wte */
};

/* ---- column sets ------------------------------------------------------------ */

static void colset_each(colset_t *s, void (*fn)(tsr_tensor_t *))
{
    tsr_tensor_t *all[] = {&s->x,    &s->res,  &s->ln,   &s->mean,     &s->rstd,
                           &s->qkv,  &s->yh,   &s->yb,   &s->fch,      &s->fcg,
                           &s->cols, &s->last, &s->lnf,  &s->lnf_mean, &s->lnf_rstd,
                           &s->logits, &s->p0, &s->p1};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        fn(all[i]);
}

static void colset_free(void *set, int same_runtime)
{
    colset_t *s = set;
    if (!s)
        return;
    colset_each(s, same_runtime ? tsr__tensor_free : tsr__tensor_forget);
    free(s);
}

static int colset_make(tsr__gen_t *gen, int n, int k, void **out)
{
    const tsr_gpt2_t *m = gen->model;
    const tsr_gpt2_config_t *c = &m->cfg;
    int C = c->channels, d = m->hd, tf = c->tile_hidden, V = c->vocab_size;
    colset_t *s = calloc(1, sizeof *s);
    if (!s)
        return tsr__fail(TSR_ENOMEM, "gpt2_gen: no memory for %d columns", n);
    s->n = n;
    s->k = k;
    int rc;
    if ((rc = tsr__tensor_init(&s->x, C, n, C, n)) || (rc = tsr__tensor_init(&s->res, C, n, C, n)) ||
        (rc = tsr__tensor_init(&s->ln, C, n, C, n)) ||
        (rc = tsr__tensor_init(&s->mean, 1, n, 1, n)) ||
        (rc = tsr__tensor_init(&s->rstd, 1, n, 1, n)) ||
        (rc = tsr__tensor_init(&s->qkv, 3 * C, n, C, n)) ||
        (rc = tsr__tensor_init(&s->yh, C, n, d, n)) ||
        (rc = tsr__tensor_init(&s->yb, C, n, C, n)) ||
        (rc = tsr__tensor_init(&s->fch, 4 * C, n, tf, n)) ||
        (rc = tsr__tensor_init(&s->fcg, 4 * C, n, tf, n)) ||
        (rc = tsr__tensor_init(&s->cols, 2, n, 2, n)) ||
        (rc = tsr__tensor_init(&s->last, C, k, C, k)) ||
        (rc = tsr__tensor_init(&s->lnf, C, k, C, k)) ||
        (rc = tsr__tensor_init(&s->lnf_mean, 1, k, 1, k)) ||
        (rc = tsr__tensor_init(&s->lnf_rstd, 1, k, 1, k)) ||
        (rc = tsr__tensor_init(&s->logits, V, k, c->tile_vocab, k)) ||
        (rc = tsr__tensor_init(&s->p0, C, n, C, n)) || (rc = tsr__tensor_init(&s->p1, C, n, C, n))) {
        colset_free(s, 1);
        return rc;
    }
    *out = s;
    return TSR_OK;
}

static const tsr_tensor_t *colset_logits(const void *set)
{
    return &((const colset_t *)set)->logits;
}

static int gpt2_check(const void *model, const char *fn)
{
    return tsr__gpt2_check(model, fn);
}

static int run(tsr__gen_t *gen, void *set);

/* The bf16 copies: what GPT-2's state adds to the engine's */
static void release(tsr__gen_t *gen, int same_runtime)
{
    tsr_gpt2_gen_t *g = (tsr_gpt2_gen_t *)gen;
    for (int i = 0; g->wb && i < 4 * gen->layers + 1; i++)
        (same_runtime ? tsr__tensor_free : tsr__tensor_forget)(&g->wb[i]);
    free(g->wb);
}

static const tsr__gen_model_t gpt2_gen = {"gpt2_gen",  sizeof(tsr_gpt2_gen_t), release,
                                          gpt2_check,  colset_make, colset_free, run,
                                          colset_logits};

/* ---- create, free ------------------------------------------------------------ */

int tsr_gpt2_gen_create(tsr_gpt2_gen_t **out, tsr_gpt2_t *model, int batch, int max_len)
{
    if (out)
        *out = NULL;
    if (!out)
        return tsr__fail(TSR_EINVAL, "gpt2_gen_create: out is NULL");
    TSR_TRY(tsr__gpt2_check(model, "gpt2_gen_create"));
    const tsr_gpt2_config_t *c = &model->cfg;
    if (c->tile_channels < c->channels)
        return tsr__fail(TSR_EINVAL, "gpt2_gen_create: the KV-cache kernels read a model in one "
                                     "channel tile; this one is in tiles of %d of its %d "
                                     "channels (create it with tile_channels = channels)",
                         c->tile_channels, c->channels);
    tsr__gen_t *g;
    TSR_TRY(tsr__gen_create(&gpt2_gen, model, batch, max_len, c->context, c->layers,
                            c->vocab_size, c->channels, model->hd, &g));
    *out = (tsr_gpt2_gen_t *)g; /* the engine's state is its first member */
    return TSR_OK;
}

int tsr_gpt2_gen_free(tsr_gpt2_gen_t *g)
{
    return tsr__gen_free("gpt2_gen", g ? &g->g : NULL);
}

int tsr_gpt2_gen_length(const tsr_gpt2_gen_t *g, int slot)
{
    return tsr__gen_length(g ? &g->g : NULL, slot);
}

int tsr_gpt2_gen_reset(tsr_gpt2_gen_t *g, int slot)
{
    return tsr__gen_reset("gpt2_gen", g ? &g->g : NULL, slot);
}

/* ---- the pass over columns ------------------------------------------------------ */

/* Linear layer `which` (0 c_attn, 1 attn.c_proj, 2 c_fc, 3 mlp.c_proj) of
 * layer l, from the model's weights or their bf16 copy. */
static int linear(tsr_gpt2_gen_t *g, colset_t *s, int l, int which, const tsr_tensor_t *w,
                  const tsr_tensor_t *b, const tsr_tensor_t *x, float beta, tsr_tensor_t *y)
{
    /* the output projections (one tile row of W) in two halves side by
     * side (fp32 too: nn/ops.h's Linear would chain their tiles), the
     * others one task per W tile (c_fc too when GPU tiles make it one tile
     * row: the partials are (C, n)) */
    if ((which == 1 || which == 3) && w->grid_rows == 1 && w->cols >= 8)
        return tsr__op_linear_split(w, g->bf16 ? &g->wb[4 * l + which] : NULL, b, x, beta, y,
                                    &s->p0, &s->p1);
    if (g->bf16)
        return tsr__op_linear_bf16(w, &g->wb[4 * l + which], b, x, beta, y);
    return tsr__op_linear_fwd(w, b, x, beta, y);
}

/* The weight of bf16 copy i: 4 per layer (c_attn, attn.c_proj, c_fc,
 * mlp.c_proj), then wte. */
static const tsr_tensor_t *copied(const tsr_gpt2_t *m, int i)
{
    if (i == 4 * m->cfg.layers)
        return &m->wte->p;
    const layer_params_t *p = &m->lp[i / 4];
    const param_t *w[4] = {p->attn_w, p->proj_w, p->fc_w, p->fcproj_w};
    return &w[i % 4]->p;
}

int tsr_gpt2_gen_precision(tsr_gpt2_gen_t *g, int precision)
{
    TSR_TRY(tsr__gen_check(g ? &g->g : NULL, "gpt2_gen_precision"));
    if (precision != TSR_GPT2_FP32 && precision != TSR_GPT2_BF16)
        return tsr__fail(TSR_EINVAL, "gpt2_gen_precision: %d is neither TSR_GPT2_FP32 (%d) nor "
                                     "TSR_GPT2_BF16 (%d)", precision, TSR_GPT2_FP32,
                         TSR_GPT2_BF16);
    tsr_gpt2_t *m = g->g.model;
    int L = m->cfg.layers, n = 4 * L + 1;
    if (precision == TSR_GPT2_FP32) {
        for (int i = 0; g->wb && i < n; i++)
            tsr__tensor_free(&g->wb[i]);
        free(g->wb);
        g->wb = NULL;
        g->bf16 = 0;
        return TSR_OK;
    }
    if (m->cfg.channels % 2 || m->cfg.tile_hidden % 2)
        return tsr__fail(TSR_EINVAL, "gpt2_gen_precision: bf16 copies need an even channel "
                                     "count and MLP tile (%d, %d)", m->cfg.channels,
                         m->cfg.tile_hidden);
    if (!g->wb) {
        g->wb = calloc((size_t)n, sizeof *g->wb);
        if (!g->wb)
            return tsr__fail(TSR_ENOMEM, "gpt2_gen_precision: out of memory");
        for (int i = 0; i < n; i++) {
            int rc = tsr__packed_init(&g->wb[i], copied(m, i));
            if (rc) {
                for (int j = 0; j < i; j++)
                    tsr__tensor_free(&g->wb[j]);
                free(g->wb);
                g->wb = NULL;
                return rc;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        TSR_TRY(tsr__op_to_bf16(copied(m, i), &g->wb[i]));
    }
    g->bf16 = 1;
    return TSR_OK;
}

/* The model over the columns of s (g->col_tok, col_pos, col_slot), the
 * logits of the last column (s->k == 1) or of all (s->k == n). */
static int run(tsr__gen_t *gen, void *set)
{
    tsr_gpt2_gen_t *g = (tsr_gpt2_gen_t *)gen; /* the engine's state is first */
    colset_t *s = set;
    tsr_gpt2_t *m = gen->model;
    const tsr_gpt2_config_t *c = &m->cfg;
    int n = s->n;
    double keys;
    TSR_TRY(tsr__gen_write_cols(gen, n, &s->cols, &keys));
    TSR_TRY(tsr__op_decode_embed(&m->wte->p, &m->wpe->p, gen->col_tok, gen->col_pos, &s->x));
    for (int l = 0; l < c->layers; l++) {
        const layer_params_t *p = &m->lp[l];
        TSR_TRY(tsr__op_layernorm_fwd(&s->x, &p->ln1_w->p, &p->ln1_b->p, &s->ln, &s->mean,
                                  &s->rstd));
        TSR_TRY(linear(g, s, l, 0, &p->attn_w->p, &p->attn_b->p, &s->ln, 0.0f, &s->qkv));
        TSR_TRY(tsr__op_decode_attn(&s->qkv, &s->cols, c->heads, gen->maxlen, keys, &gen->kc[l],
                                &gen->vc[l], &s->yh));
        TSR_TRY(tsr__op_regroup(&s->yh, &s->yb));
        TSR_TRY(tsr__op_copy(&s->x, &s->res));                                   /* res = x */
        TSR_TRY(linear(g, s, l, 1, &p->proj_w->p, &p->proj_b->p, &s->yb, 1.0f, &s->res));
        TSR_TRY(tsr__op_layernorm_fwd(&s->res, &p->ln2_w->p, &p->ln2_b->p, &s->ln, &s->mean,
                                  &s->rstd));
        TSR_TRY(linear(g, s, l, 2, &p->fc_w->p, &p->fc_b->p, &s->ln, 0.0f, &s->fch));
        TSR_TRY(tsr__op_gelu_fwd(&s->fch, &s->fcg));
        TSR_TRY(tsr__op_copy(&s->res, &s->x));                                   /* x = res */
        TSR_TRY(linear(g, s, l, 3, &p->fcproj_w->p, &p->fcproj_b->p, &s->fcg, 1.0f, &s->x));
    }
    const tsr_tensor_t *xl = &s->x;
    if (s->k != n) {
        TSR_TRY(tsr__op_take_column(&s->x, n - 1, &s->last));
        xl = &s->last;
    }
    TSR_TRY(tsr__op_layernorm_fwd(xl, &m->lnf_w->p, &m->lnf_b->p, &s->lnf, &s->lnf_mean,
                              &s->lnf_rstd));
    /* the head is tied to the token embedding: logits = wte^T lnf */
    if (g->bf16)
        return tsr__op_gemv_t_bf16(&m->wte->p, &g->wb[4 * c->layers], &s->lnf, &s->logits);
    return tsr__op_gemm(OP_T, OP_N, 1.0f, &m->wte->p, &s->lnf, 0.0f, &s->logits, TSR_RW);
}

int tsr_gpt2_gen_prefill(tsr_gpt2_gen_t *g, int slot, const int32_t *tokens, int n,
                         float *logits)
{
    return tsr__gen_prefill("gpt2_gen", g ? &g->g : NULL, slot, tokens, n, logits);
}

int tsr_gpt2_gen_step(tsr_gpt2_gen_t *g, const int32_t *tokens, float *logits)
{
    return tsr__gen_step("gpt2_gen", g ? &g->g : NULL, tokens, logits);
}

/* ---- sampling --------------------------------------------------------------------- */

void tsr_sampler_default(tsr_sampler_t *s)
{
    if (!s)
        return;
    s->temperature = 1.0f;
    s->top_k = 0;
    s->top_p = 1.0f;
}

typedef struct cand {
    float logit;
    int id;
} cand_t;

/* descending logit, then ascending id: a total order, so the kept set and
 * the draw do not depend on qsort's stability */
static int cand_cmp(const void *pa, const void *pb)
{
    const cand_t *a = pa, *b = pb;
    if (a->logit != b->logit)
        return a->logit < b->logit ? 1 : -1;
    return (a->id > b->id) - (a->id < b->id);
}

int tsr_gpt2_sample(const float *logits, int n, const tsr_sampler_t *s, uint64_t *rng,
                    int32_t *out)
{
    if (!logits || !s || !rng || !out)
        return tsr__fail(TSR_EINVAL, "gpt2_sample: NULL argument");
    if (n <= 0)
        return tsr__fail(TSR_EINVAL, "gpt2_sample: %d logits", n);
    if (!(s->temperature >= 0.0f) || isinf(s->temperature))
        return tsr__fail(TSR_EINVAL, "gpt2_sample: temperature %g is not a finite value >= 0",
                         (double)s->temperature);
    if (s->top_k < 0)
        return tsr__fail(TSR_EINVAL, "gpt2_sample: top_k %d is negative", s->top_k);
    if (!(s->top_p > 0.0f && s->top_p <= 1.0f))
        return tsr__fail(TSR_EINVAL, "gpt2_sample: top_p %g is outside (0, 1]", (double)s->top_p);
    int best = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(logits[i]))
            return tsr__fail(TSR_EINVAL, "gpt2_sample: logit %d is NaN", i);
        if (logits[i] > logits[best])
            best = i;
    }
    if (s->temperature == 0.0f || s->top_k == 1 || logits[best] == -INFINITY) {
        *out = best;
        return TSR_OK;
    }
    /* the candidates, likeliest first: a sort only when top-k or top-p cut */
    int k = s->top_k > 0 && s->top_k < n ? s->top_k : n;
    int cut = k < n || s->top_p < 1.0f;
    cand_t *cd = malloc((size_t)n * sizeof *cd);
    if (!cd)
        return tsr__fail(TSR_ENOMEM, "gpt2_sample: out of memory");
    for (int i = 0; i < n; i++)
        cd[i] = (cand_t){logits[i], i};
    if (cut)
        qsort(cd, (size_t)n, sizeof *cd, cand_cmp);
    double max = logits[best], inv_t = 1.0 / s->temperature, sum = 0.0;
    /* probabilities (unnormalised) of the k kept, in the cd order */
    double *pr = malloc((size_t)k * sizeof *pr);
    if (!pr) {
        free(cd);
        return tsr__fail(TSR_ENOMEM, "gpt2_sample: out of memory");
    }
    for (int i = 0; i < k; i++) {
        pr[i] = exp(((double)cd[i].logit - max) * inv_t);
        sum += pr[i];
    }
    if (s->top_p < 1.0f) { /* the smallest prefix whose mass reaches top_p */
        double acc = 0.0, want = (double)s->top_p * sum;
        int keep = k;
        for (int i = 0; i < k; i++) {
            acc += pr[i];
            if (acc >= want) {
                keep = i + 1;
                break;
            }
        }
        k = keep;
        sum = acc < want ? sum : acc;
    }
    double u = tsr__splitmix_unit(rng) * sum, acc = 0.0;
    int pick = cd[0].id;
    for (int i = 0; i < k; i++) {
        acc += pr[i];
        if (u < acc && pr[i] > 0.0) {
            pick = cd[i].id;
            break;
        }
    }
    free(pr);
    free(cd);
    *out = pick;
    return TSR_OK;
}
