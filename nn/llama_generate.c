/* nn/llama_generate.c — generation with a KV cache on a Llama model's
 * weights (tessera/llama.h, tsr_llama_gen_*): Llama's pass over a prefill's
 * or a decode step's columns on the shared slots and caches of
 * nn/gen_state.h (GPT-2's is nn/generate.c).
 *
 * Layout, n columns (each a slot, position, token), every activation one
 * tile of n columns unless said:
 *   x, res, ln (C, n)             the residual stream, its RMSNorms
 *   qkv (Q, n)                    q | k | v of every head; q and k rotated
 *                                 at the columns' positions
 *   yh (Hq, n) tiles (D, n)       the attention output per query head
 *   yb (Hq, n)                    … merged for o_proj
 *   gate, up, h (F, n) tiles (tf, n)
 *   last (C, k), logits (V, k) tiles (tv, k); k = n (decode) or 1 (prefill)
 *   kc, vc per layer (Hkv, B maxlen) tiles (D, B maxlen): one tile per K/V
 *   head, shared by its query heads.
 */
#include <tessera/llama.h>

#include <stdlib.h>

#include "nn/gen_ops.h"
#include "nn/gen_state.h"
#include "nn/llama_model.h"
#include "nn/ops.h"
#include "runtime/error.h"
#include "runtime/instance.h"

struct tsr_llama_gen {
    tsr__gen_t g; /* first: the engine's state is the model's */
};

typedef struct lcols {
    int n, k;
    tsr_tensor_t x, res, ln, rstd, qkv, yh, yb, gate, up, h, cols;
    tsr_tensor_t last, lnf, rstdf, logits;
} lcols_t;

static void lcols_free(void *set, int same_runtime)
{
    lcols_t *s = set;
    if (!s)
        return;
    tsr_tensor_t *all[] = {&s->x,  &s->res, &s->ln,   &s->rstd, &s->qkv,  &s->yh,
                           &s->yb, &s->gate, &s->up,  &s->h,    &s->cols, &s->last,
                           &s->lnf, &s->rstdf, &s->logits};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        (same_runtime ? tsr__tensor_free : tsr__tensor_forget)(all[i]);
    free(s);
}

static int lcols_make(tsr__gen_t *gen, int n, int k, void **out)
{
    const tsr_llama_t *m = gen->model;
    int C = m->C, D = m->D, tf = m->cfg.tile_hidden;
    lcols_t *s = calloc(1, sizeof *s);
    if (!s)
        return tsr__fail(TSR_ENOMEM, "llama_gen: no memory for %d columns", n);
    s->n = n;
    s->k = k;
    struct {
        tsr_tensor_t *t;
        int rows, cols, tr;
    } all[] = {{&s->x, C, n, C},         {&s->res, C, n, C},       {&s->ln, C, n, C},
               {&s->rstd, 1, n, 1},      {&s->qkv, m->Q, n, m->Q}, {&s->yh, m->Hq, n, D},
               {&s->yb, m->Hq, n, m->Hq}, {&s->gate, m->F, n, tf}, {&s->up, m->F, n, tf},
               {&s->h, m->F, n, tf},     {&s->cols, 2, n, 2},      {&s->last, C, k, C},
               {&s->lnf, C, k, C},       {&s->rstdf, 1, k, 1},
               {&s->logits, m->cfg.vocab_size, k, m->cfg.tile_vocab}};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        int rc = tsr__tensor_init(all[i].t, all[i].rows, all[i].cols, all[i].tr, all[i].cols);
        if (rc) {
            lcols_free(s, 1);
            return rc;
        }
    }
    *out = s;
    return TSR_OK;
}

static const tsr_tensor_t *lcols_logits(const void *set)
{
    return &((const lcols_t *)set)->logits;
}

static int llama_check(const void *model, const char *fn)
{
    return tsr__llama_check(model, fn);
}

/* y = W^T x, or y += W^T x (beta 1): a projection, W (in, out) */
static int proj(const param_t *w, const tsr_tensor_t *x, float beta, tsr_tensor_t *y)
{
    return tsr__op_gemm(OP_T, OP_N, 1.0f, &w->p, x, beta, y, TSR_RW);
}

/* Whether the columns are one slot's positions 0, 1, … (a prefill) */
static int consecutive(const tsr__gen_t *g, int n)
{
    for (int j = 0; j < n; j++)
        if (g->col_pos[j] != j)
            return 0;
    return 1;
}

/* The decoder over the columns (as nn/llama.c's block_forward, one column
 * set), the logits of the last column (prefill) or of all (decode). */
static int run(tsr__gen_t *gen, void *set)
{
    lcols_t *s = set;
    tsr_llama_t *m = gen->model;
    const tsr_llama_config_t *c = &m->cfg;
    int n = s->n, H = c->heads, KV = c->kv_heads;
    float eps = (float)c->rms_norm_eps;
    double keys;
    TSR_TRY(tsr__gen_write_cols(gen, n, &s->cols, &keys));
    TSR_TRY(tsr__op_decode_embed(&m->embed->p, NULL, gen->col_tok, gen->col_pos, &s->x));
    int prefill = consecutive(gen, n);
    for (int l = 0; l < c->layers; l++) {
        const llama_layer_params_t *p = &m->lp[l];
        TSR_TRY(tsr__op_rmsnorm_fwd(&s->x, &p->ln1->p, eps, &s->ln, &s->rstd));      /* (C, n) */
        TSR_TRY(proj(p->qkv, &s->ln, 0.0f, &s->qkv));                                 /* (Q, n) */
        TSR_TRY(prefill ? tsr__op_rope_qk_fwd(&s->qkv, H, KV, m->D, n, 0, m->rope)
                    : tsr__op_rope_qk_cols(&s->qkv, H, KV, m->D, gen->col_pos, m->rope));
        TSR_TRY(tsr__op_decode_attn_gqa(&s->qkv, &s->cols, H, KV, gen->maxlen, keys, &gen->kc[l],
                                    &gen->vc[l], &s->yh));                       /* (Hq, n) */
        TSR_TRY(tsr__op_regroup(&s->yh, &s->yb));
        TSR_TRY(tsr__op_copy(&s->x, &s->res));                                        /* res = x */
        TSR_TRY(proj(p->o, &s->yb, 1.0f, &s->res));                                   /* += */
        TSR_TRY(tsr__op_rmsnorm_fwd(&s->res, &p->ln2->p, eps, &s->ln, &s->rstd));
        TSR_TRY(proj(p->gate, &s->ln, 0.0f, &s->gate));                               /* (F, n) */
        TSR_TRY(proj(p->up, &s->ln, 0.0f, &s->up));
        TSR_TRY(tsr__op_swiglu_fwd(&s->gate, &s->up, &s->h));
        TSR_TRY(tsr__op_copy(&s->res, &s->x));                                        /* x = res */
        TSR_TRY(proj(p->down, &s->h, 1.0f, &s->x));                                   /* += */
    }
    const tsr_tensor_t *xl = &s->x;
    if (s->k != n) {
        TSR_TRY(tsr__op_take_column(&s->x, n - 1, &s->last));
        xl = &s->last;
    }
    TSR_TRY(tsr__op_rmsnorm_fwd(xl, &m->norm->p, eps, &s->lnf, &s->rstdf));
    return proj(m->head, &s->lnf, 0.0f, &s->logits);                              /* (V, k) */
}

static const tsr__gen_model_t llama_gen = {"llama_gen", sizeof(tsr_llama_gen_t), NULL,
                                           llama_check, lcols_make, lcols_free, run,
                                           lcols_logits};

int tsr_llama_gen_create(tsr_llama_gen_t **out, tsr_llama_t *model, int batch, int max_len)
{
    if (out)
        *out = NULL;
    if (!out)
        return tsr__fail(TSR_EINVAL, "llama_gen_create: out is NULL");
    TSR_TRY(tsr__llama_check(model, "llama_gen_create"));
    const tsr_llama_config_t *c = &model->cfg;
    tsr__gen_t *g;
    TSR_TRY(tsr__gen_create(&llama_gen, model, batch, max_len, c->max_positions, c->layers,
                            c->vocab_size, model->Hkv, model->D, &g));
    *out = (tsr_llama_gen_t *)g; /* the engine's state is its first member */
    return TSR_OK;
}

int tsr_llama_gen_free(tsr_llama_gen_t *g)
{
    return tsr__gen_free("llama_gen", g ? &g->g : NULL);
}

int tsr_llama_gen_prefill(tsr_llama_gen_t *g, int slot, const int32_t *tokens, int n,
                          float *logits)
{
    return tsr__gen_prefill("llama_gen", g ? &g->g : NULL, slot, tokens, n, logits);
}

int tsr_llama_gen_step(tsr_llama_gen_t *g, const int32_t *tokens, float *logits)
{
    return tsr__gen_step("llama_gen", g ? &g->g : NULL, tokens, logits);
}

int tsr_llama_gen_length(const tsr_llama_gen_t *g, int slot)
{
    return tsr__gen_length(g ? &g->g : NULL, slot);
}

int tsr_llama_gen_reset(tsr_llama_gen_t *g, int slot)
{
    return tsr__gen_reset("llama_gen", g ? &g->g : NULL, slot);
}
