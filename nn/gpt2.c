/* nn/gpt2.c — GPT-2 as tiled tensors and tile tasks: parameters, gradients
 * and AdamW moments per HF parameter name, activations per layer, the
 * forward and backward passes as sequences of tensor operations (nn/ops.h),
 * and the optimizer step.
 *
 * Layout (column-major, see nn/tensor.h), N = batch * seq_len tokens,
 * d = channels / heads, tt/tv/tf the token, vocabulary and hidden tiles:
 *   wte (C, V) tiles (C, tv)       wpe (C, ctx) tiles (C, tt)
 *   c_attn.w (3C, C) tiles (C, C)  c_proj.w (C, C) tiles (C, C)
 *   c_fc.w (4C, C) tiles (tf, C)   mlp.c_proj.w (C, 4C) tiles (C, tf)
 *   a weight W (out, in) is HF's [in, out] row-major bytes; y = W x.
 *   activations (C, N) tiles (C, tt); the attention's q, k, v and output are
 *   computed by the Linear layers in tiles (C, tt) and regrouped into one
 *   tile row per head, (d, tt), for the attention tasks (and back);
 *   logits (V, N) tiles (tv, tt).
 */
#include <tessera/gpt2.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/io/checkpoint.h"
#include "nn/ops.h"
#include "nn/tensor.h"
#include "runtime/error.h"

/* One parameter: its value, gradient and AdamW moments, tiled alike. */
typedef struct param {
    char name[64];
    tsr_tensor_t p, g, m, v;
    int decay; /* weight decay applies (matrices) */
} param_t;

typedef struct layer_params {
    param_t *ln1_w, *ln1_b, *attn_w, *attn_b, *proj_w, *proj_b;
    param_t *ln2_w, *ln2_b, *fc_w, *fc_b, *fcproj_w, *fcproj_b;
} layer_params_t;

/* What backward needs from the forward of one layer. */
typedef struct layer_acts {
    tsr_tensor_t x;                  /* (C, N) input of the block */
    tsr_tensor_t ln1, ln1_mean, ln1_rstd;
    tsr_tensor_t qkv;                /* (3C, N) tiles (d, tt): per head */
    tsr_tensor_t atty, att_lse;      /* (C, N) tiles (d, tt); (H, N) */
    tsr_tensor_t yb;                 /* atty in tiles (C, tt), for c_proj */
    tsr_tensor_t res1;               /* x + attention */
    tsr_tensor_t ln2, ln2_mean, ln2_rstd;
    tsr_tensor_t fch, fcg;           /* (4C, N): before and after GELU */
} layer_acts_t;

struct tsr_gpt2 {
    tsr_gpt2_config_t cfg;
    int B, T, N, hd; /* hd: head width */
    int nparams;
    param_t *params;
    param_t *wte, *wpe, *lnf_w, *lnf_b;
    layer_params_t *lp;
    layer_acts_t *la;
    tsr_tensor_t xL, lnf, lnf_mean, lnf_rstd, logits;
    tsr_tensor_t tokens, targets, ce_ms, ce_lse, ce_loss;
    tsr_tensor_t att_ms, att_D;                   /* scratch */
    tsr_tensor_t qkvb;                             /* (3C, N) tiles (C, tt), scratch */
    tsr_tensor_t d, dln, dqkv, daty, dfc;         /* backward */
    tsr_tensor_t dqkvb, dyb;                       /* … in tiles (C, tt) */
    tsr_handle_t norm;                             /* sum of squares of the gradients */
    int have_targets;                              /* backward may follow */
    int have_loss;                                 /* ce_loss holds a loss */
    int ntargets;                                  /* non-ignored targets of it */
    int steps;
};

void tsr_gpt2_config_default(tsr_gpt2_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->vocab_size = 50257;
    cfg->context = 1024;
    cfg->layers = 12;
    cfg->heads = 12;
    cfg->channels = 768;
}

void tsr_adamw_config_default(tsr_adamw_config_t *opt)
{
    opt->beta1 = 0.9f;
    opt->beta2 = 0.95f;
    opt->eps = 1e-8f;
    opt->weight_decay = 0.1f;
    opt->grad_clip = 1.0f;
}

float tsr_lr_schedule(int step, int warmup, int total, float max_lr, float min_lr)
{
    if (step < warmup)
        return max_lr * (float)(step + 1) / (float)warmup;
    int span = total - 1 - warmup;
    double ratio = (double)(step - warmup) / (double)(span > 1 ? span : 1);
    if (ratio > 1.0)
        ratio = 1.0;
    return (float)(min_lr + 0.5 * (1.0 + cos(M_PI * ratio)) * (max_lr - min_lr));
}

/* Tile sizes derived from the shapes: token tiles of about 256 tokens (the
 * largest divisor of the sequence up to 256, or as many whole sequences of
 * the micro-batch as fit in 256), so that the weight-gradient products sum
 * over hundreds of tokens per task; vocabulary tiles of 1024 rows; MLP tiles
 * of C rows (4 tiles). */
static int resolve_tiles(tsr_gpt2_config_t *c, int batch, int seq_len)
{
    enum { TOKENS = 256 };
    if (c->tile_tokens <= 0) {
        c->tile_tokens = seq_len;
        if (seq_len > TOKENS) {
            for (int t = TOKENS; t >= 1; t--)
                if (seq_len % t == 0) {
                    c->tile_tokens = t;
                    break;
                }
        } else {
            for (int k = TOKENS / seq_len; k >= 1; k--)
                if (batch % k == 0) {
                    c->tile_tokens = k * seq_len;
                    break;
                }
        }
    }
    if (c->tile_vocab <= 0)
        c->tile_vocab = c->vocab_size < 1024 ? c->vocab_size : 1024;
    if (c->tile_hidden <= 0)
        c->tile_hidden = c->channels;
    if (!tsr__tokens_tile_ok(c->tile_tokens, seq_len, batch))
        return tsr__fail(TSR_EINVAL, "gpt2: a token tile of %d neither divides the sequence "
                                     "length %d nor holds whole sequences of the batch of %d",
                         c->tile_tokens, seq_len, batch);
    return TSR_OK;
}

static int check_config(const tsr_gpt2_config_t *c, int batch, int seq_len)
{
    if (c->vocab_size <= 0 || c->context <= 0 || c->layers <= 0 || c->heads <= 0 ||
        c->channels <= 0 || batch <= 0 || seq_len <= 0)
        return tsr__fail(TSR_EINVAL, "gpt2: every size must be positive (vocab %d, context %d, "
                                     "layers %d, heads %d, channels %d, batch %d, seq %d)",
                         c->vocab_size, c->context, c->layers, c->heads, c->channels, batch,
                         seq_len);
    if (c->channels % c->heads)
        return tsr__fail(TSR_EINVAL, "gpt2: %d channels do not split into %d heads",
                         c->channels, c->heads);
    if (c->channels / c->heads > 256)
        return tsr__fail(TSR_EINVAL, "gpt2: head width %d exceeds 256", c->channels / c->heads);
    if (seq_len > c->context)
        return tsr__fail(TSR_EINVAL, "gpt2: sequence length %d exceeds the context %d", seq_len,
                         c->context);
    if ((long long)batch * seq_len > (1LL << 30))
        return tsr__fail(TSR_EINVAL, "gpt2: %d x %d tokens per micro-batch is too many", batch,
                         seq_len);
    return TSR_OK;
}

static int add_param(tsr_gpt2_t *m, param_t **out, const char *name, int rows, int cols,
                     int trows, int tcols, int decay)
{
    param_t *p = &m->params[m->nparams++];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->decay = decay;
    *out = p;
    int rc = tsr__tensor_init(&p->p, rows, cols, trows, tcols);
    if (!rc)
        rc = tsr__tensor_init(&p->g, rows, cols, trows, tcols);
    if (!rc)
        rc = tsr__tensor_init(&p->m, rows, cols, trows, tcols);
    if (!rc)
        rc = tsr__tensor_init(&p->v, rows, cols, trows, tcols);
    return rc;
}

static int make_params(tsr_gpt2_t *m)
{
    const tsr_gpt2_config_t *c = &m->cfg;
    int C = c->channels, tf = c->tile_hidden;
    m->params = calloc((size_t)(4 + 12 * c->layers), sizeof *m->params);
    m->lp = calloc((size_t)c->layers, sizeof *m->lp);
    if (!m->params || !m->lp)
        return tsr__fail(TSR_ENOMEM, "gpt2: no memory for the parameter table");
    int rc = add_param(m, &m->wte, "wte.weight", C, c->vocab_size, C, c->tile_vocab, 1);
    if (!rc)
        rc = add_param(m, &m->wpe, "wpe.weight", C, c->context, C,
                       c->tile_tokens < m->T ? c->tile_tokens : m->T, 1);
    char n[64];
#define P(field, suffix, rows, cols, tr, tc, decay)                                  \
    if (!rc) {                                                                       \
        snprintf(n, sizeof n, "h.%d.%s", l, suffix);                                 \
        rc = add_param(m, &lp->field, n, rows, cols, tr, tc, decay);                 \
    }
    for (int l = 0; l < c->layers; l++) {
        layer_params_t *lp = &m->lp[l];
        P(ln1_w, "ln_1.weight", C, 1, C, 1, 0)
        P(ln1_b, "ln_1.bias", C, 1, C, 1, 0)
        P(attn_w, "attn.c_attn.weight", 3 * C, C, C, C, 1)
        P(attn_b, "attn.c_attn.bias", 3 * C, 1, C, 1, 0)
        P(proj_w, "attn.c_proj.weight", C, C, C, C, 1)
        P(proj_b, "attn.c_proj.bias", C, 1, C, 1, 0)
        P(ln2_w, "ln_2.weight", C, 1, C, 1, 0)
        P(ln2_b, "ln_2.bias", C, 1, C, 1, 0)
        P(fc_w, "mlp.c_fc.weight", 4 * C, C, tf, C, 1)
        P(fc_b, "mlp.c_fc.bias", 4 * C, 1, tf, 1, 0)
        P(fcproj_w, "mlp.c_proj.weight", C, 4 * C, C, tf, 1)
        P(fcproj_b, "mlp.c_proj.bias", C, 1, C, 1, 0)
    }
#undef P
    if (!rc)
        rc = add_param(m, &m->lnf_w, "ln_f.weight", C, 1, C, 1, 0);
    if (!rc)
        rc = add_param(m, &m->lnf_b, "ln_f.bias", C, 1, C, 1, 0);
    return rc;
}

static int make_acts(tsr_gpt2_t *m)
{
    const tsr_gpt2_config_t *c = &m->cfg;
    int C = c->channels, H = c->heads, d = m->hd, N = m->N, tt = c->tile_tokens;
    int tf = c->tile_hidden;
    m->la = calloc((size_t)c->layers, sizeof *m->la);
    if (!m->la)
        return tsr__fail(TSR_ENOMEM, "gpt2: no memory for the activation table");
    int rc = TSR_OK;
#define T(t, rows, trows)                                                            \
    if (!rc)                                                                         \
        rc = tsr__tensor_init(&(t), rows, N, trows, tt);
    for (int l = 0; l < c->layers; l++) {
        layer_acts_t *a = &m->la[l];
        T(a->x, C, C) T(a->ln1, C, C) T(a->ln1_mean, 1, 1) T(a->ln1_rstd, 1, 1)
        T(a->qkv, 3 * C, d) T(a->atty, C, d) T(a->att_lse, H, 1) T(a->yb, C, C)
        T(a->res1, C, C)
        T(a->ln2, C, C) T(a->ln2_mean, 1, 1) T(a->ln2_rstd, 1, 1)
        T(a->fch, 4 * C, tf) T(a->fcg, 4 * C, tf)
    }
    T(m->xL, C, C) T(m->lnf, C, C) T(m->lnf_mean, 1, 1) T(m->lnf_rstd, 1, 1)
    T(m->logits, c->vocab_size, c->tile_vocab)
    T(m->tokens, 1, 1) T(m->targets, 1, 1) T(m->ce_ms, 2, 2) T(m->ce_lse, 1, 1)
    T(m->ce_loss, 1, 1) T(m->att_ms, 2 * H, 2) T(m->att_D, H, 1)
    T(m->qkvb, 3 * C, C) T(m->dqkvb, 3 * C, C) T(m->dyb, C, C)
    T(m->d, C, C) T(m->dln, C, C) T(m->dqkv, 3 * C, d) T(m->daty, C, d) T(m->dfc, 4 * C, tf)
#undef T
    if (!rc)
        rc = tsr_handle_alloc(&m->norm, sizeof(float));
    return rc;
}

static void free_param(param_t *p)
{
    tsr__tensor_free(&p->p);
    tsr__tensor_free(&p->g);
    tsr__tensor_free(&p->m);
    tsr__tensor_free(&p->v);
}

void tsr_gpt2_free(tsr_gpt2_t *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->nparams; i++)
        free_param(&m->params[i]);
    if (m->la)
        for (int l = 0; l < m->cfg.layers; l++) {
            layer_acts_t *a = &m->la[l];
            tsr_tensor_t *all[] = {&a->x, &a->ln1, &a->ln1_mean, &a->ln1_rstd, &a->qkv,
                                   &a->atty, &a->att_lse, &a->yb, &a->res1, &a->ln2, &a->ln2_mean,
                                   &a->ln2_rstd, &a->fch, &a->fcg};
            for (size_t i = 0; i < sizeof all / sizeof *all; i++)
                tsr__tensor_free(all[i]);
        }
    tsr_tensor_t *rest[] = {&m->xL, &m->lnf, &m->lnf_mean, &m->lnf_rstd, &m->logits,
                            &m->tokens, &m->targets, &m->ce_ms, &m->ce_lse, &m->ce_loss,
                            &m->att_ms, &m->att_D, &m->qkvb, &m->dqkvb, &m->dyb,
                            &m->d, &m->dln, &m->dqkv, &m->daty,
                            &m->dfc};
    for (size_t i = 0; i < sizeof rest / sizeof *rest; i++)
        tsr__tensor_free(rest[i]);
    if (m->norm)
        tsr_handle_unregister(m->norm);
    free(m->params);
    free(m->lp);
    free(m->la);
    free(m);
}

int tsr_gpt2_create(tsr_gpt2_t **out, const tsr_gpt2_config_t *cfg, int batch, int seq_len)
{
    if (!out || !cfg)
        return tsr__fail(TSR_EINVAL, "gpt2_create: NULL argument");
    *out = NULL;
    int rc = check_config(cfg, batch, seq_len);
    if (rc)
        return rc;
    tsr_gpt2_t *m = calloc(1, sizeof *m);
    if (!m)
        return tsr__fail(TSR_ENOMEM, "gpt2_create: out of memory");
    m->cfg = *cfg;
    m->B = batch;
    m->T = seq_len;
    m->N = batch * seq_len;
    m->hd = cfg->channels / cfg->heads;
    rc = resolve_tiles(&m->cfg, batch, seq_len);
    if (!rc)
        rc = make_params(m);
    if (!rc)
        rc = make_acts(m);
    if (rc) {
        tsr_gpt2_free(m);
        return rc;
    }
    *out = m;
    return TSR_OK;
}

const tsr_gpt2_config_t *tsr_gpt2_config(const tsr_gpt2_t *m)
{
    return &m->cfg;
}

size_t tsr_gpt2_num_params(const tsr_gpt2_t *m)
{
    size_t n = 0;
    for (int i = 0; i < m->nparams; i++)
        n += tsr__tensor_numel(&m->params[i].p);
    return n;
}

int tsr_gpt2_steps_done(const tsr_gpt2_t *m)
{
    return m->steps;
}

int tsr__gpt2_set_steps(tsr_gpt2_t *m, int steps)
{
    if (steps < 0)
        return tsr__fail(TSR_EINVAL, "gpt2: negative step count %d", steps);
    m->steps = steps;
    return TSR_OK;
}

int tsr_gpt2_param_count(const tsr_gpt2_t *m)
{
    return m->nparams;
}

const char *tsr_gpt2_param_name(const tsr_gpt2_t *m, int i)
{
    return i >= 0 && i < m->nparams ? m->params[i].name : NULL;
}

static param_t *find_param(tsr_gpt2_t *m, const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0; i < m->nparams; i++)
        if (!strcmp(m->params[i].name, name))
            return &m->params[i];
    return NULL;
}

static tsr_tensor_t *param_part(param_t *p, int which)
{
    switch (which) {
    case TSR_GPT2_PARAM: return &p->p;
    case TSR_GPT2_GRAD: return &p->g;
    case TSR_GPT2_ADAM_M: return &p->m;
    case TSR_GPT2_ADAM_V: return &p->v;
    default: return NULL;
    }
}

/* Both directions: the tensor's column-major (out, in) bytes are the HF
 * row-major [in, out] bytes, so a dense copy is the whole conversion. */
static int param_access(tsr_gpt2_t *m, const char *name, int which, float *ptr, size_t *numel,
                        size_t given, int write)
{
    param_t *p = m ? find_param(m, name) : NULL;
    if (!p)
        return tsr__fail(TSR_ENOTFOUND, "gpt2: no parameter named '%s'", name ? name : "(null)");
    tsr_tensor_t *t = param_part(p, which);
    if (!t)
        return tsr__fail(TSR_EINVAL, "gpt2: unknown parameter part %d", which);
    size_t n = tsr__tensor_numel(t);
    if (numel)
        *numel = n;
    if (!ptr)
        return write ? tsr__fail(TSR_EINVAL, "gpt2_set: NULL data for %s", name) : TSR_OK;
    if (write && given != n)
        return tsr__fail(TSR_EINVAL, "gpt2_set: %s has %zu elements, %zu given", name, n, given);
    return write ? tsr__tensor_write(t, ptr, (size_t)t->rows)
                 : tsr__tensor_read(t, ptr, (size_t)t->rows);
}

int tsr_gpt2_get(tsr_gpt2_t *m, const char *name, int which, float *ptr, size_t *numel)
{
    return param_access(m, name, which, ptr, numel, 0, 0);
}

int tsr_gpt2_set(tsr_gpt2_t *m, const char *name, int which, const float *ptr, size_t numel)
{
    return param_access(m, name, which, (float *)ptr, NULL, numel, 1);
}

/* ---- initialisation ------------------------------------------------------- */

/* splitmix64: a small, well-mixed generator that is the same on every machine */
static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double next_normal(uint64_t *s)
{
    double u1 = ((double)(next_u64(s) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = (double)(next_u64(s) >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

int tsr_gpt2_init_weights(tsr_gpt2_t *m, uint64_t seed)
{
    float resid_std = 0.02f / sqrtf(2.0f * (float)m->cfg.layers);
    for (int i = 0; i < m->nparams; i++) {
        param_t *p = &m->params[i];
        size_t n = tsr__tensor_numel(&p->p);
        float *buf = malloc(n * sizeof *buf);
        if (!buf)
            return tsr__fail(TSR_ENOMEM, "gpt2_init: no memory for %s", p->name);
        const char *name = p->name;
        size_t len = strlen(name);
        int is_bias = len > 5 && !strcmp(name + len - 5, ".bias");
        int is_ln = strstr(name, "ln_") != NULL;
        int is_resid = strstr(name, "c_proj.weight") != NULL;
        /* one stream per parameter so that the values do not depend on the order */
        uint64_t s = seed ^ (0x51ed270b27ull * (uint64_t)(i + 1));
        for (size_t k = 0; k < n; k++)
            buf[k] = is_bias ? 0.0f
                     : is_ln ? 1.0f
                             : (float)(next_normal(&s) * (is_resid ? resid_std : 0.02f));
        int rc = tsr__tensor_write(&p->p, buf, (size_t)p->p.rows);
        free(buf);
        if (rc)
            return rc;
    }
    return TSR_OK;
}

/* Invalidate tensors whose contents no task submitted later will read. */
static int drop(const tsr_tensor_t *const *ts, int n)
{
    for (int i = 0; i < n; i++) {
        int rc = tsr__tensor_invalidate(ts[i]);
        if (rc)
            return rc;
    }
    return TSR_OK;
}
#define DROP(...)                                                                       \
    drop((const tsr_tensor_t *const[]){__VA_ARGS__},                                    \
         (int)(sizeof((const tsr_tensor_t *const[]){__VA_ARGS__}) / sizeof(void *)))

/* ---- forward -------------------------------------------------------------- */

static int block_forward(tsr_gpt2_t *m, int l, const tsr_tensor_t *x_in, tsr_tensor_t *x_out)
{
    layer_params_t *p = &m->lp[l];
    layer_acts_t *a = &m->la[l];
    int rc;
    if ((rc = tsr__op_layernorm_fwd(x_in, &p->ln1_w->p, &p->ln1_b->p, &a->ln1, &a->ln1_mean,
                                    &a->ln1_rstd)) ||
        (rc = tsr__op_gemm(0, 0, 1.0f, &p->attn_w->p, &a->ln1, 0.0f, &m->qkvb, TSR_RW)) ||
        (rc = tsr__op_bias_add(&p->attn_b->p, &m->qkvb)) ||
        (rc = tsr__op_regroup(&m->qkvb, &a->qkv)) || (rc = DROP(&m->qkvb)) ||
        (rc = tsr__op_attention_fwd(&a->qkv, m->cfg.heads, m->T, &m->att_ms, &a->atty,
                                    &a->att_lse)) ||
        (rc = tsr__op_regroup(&a->atty, &a->yb)) ||
        (rc = tsr__op_copy(x_in, &a->res1)) ||
        (rc = tsr__op_bias_add(&p->proj_b->p, &a->res1)) ||
        (rc = tsr__op_gemm(0, 0, 1.0f, &p->proj_w->p, &a->yb, 1.0f, &a->res1, TSR_RW)) ||
        (rc = tsr__op_layernorm_fwd(&a->res1, &p->ln2_w->p, &p->ln2_b->p, &a->ln2,
                                    &a->ln2_mean, &a->ln2_rstd)) ||
        (rc = tsr__op_gemm(0, 0, 1.0f, &p->fc_w->p, &a->ln2, 0.0f, &a->fch, TSR_RW)) ||
        (rc = tsr__op_bias_add(&p->fc_b->p, &a->fch)) ||
        (rc = tsr__op_gelu_fwd(&a->fch, &a->fcg)) ||
        (rc = tsr__op_copy(&a->res1, x_out)) ||
        (rc = tsr__op_bias_add(&p->fcproj_b->p, x_out)))
        return rc;
    return tsr__op_gemm(0, 0, 1.0f, &p->fcproj_w->p, &a->fcg, 1.0f, x_out, TSR_RW);
}

/* Sum of the per-token losses, read from the host. */
static int read_loss(tsr_gpt2_t *m, double *sum)
{
    float *buf = malloc((size_t)m->N * sizeof *buf);
    if (!buf)
        return tsr__fail(TSR_ENOMEM, "gpt2: no memory to read the loss");
    int rc = tsr__tensor_read(&m->ce_loss, buf, 1);
    *sum = 0.0;
    for (int i = 0; !rc && i < m->N; i++)
        *sum += buf[i];
    free(buf);
    return rc;
}

int tsr_gpt2_forward(tsr_gpt2_t *m, const int32_t *tokens, const int32_t *targets, float *loss)
{
    if (!m || !tokens)
        return tsr__fail(TSR_EINVAL, "gpt2_forward: NULL argument");
    int V = m->cfg.vocab_size, ntargets = 0;
    for (int i = 0; i < m->N; i++) {
        if (tokens[i] < 0 || tokens[i] >= V)
            return tsr__fail(TSR_EINVAL, "gpt2_forward: token %d at %d is outside [0, %d)",
                             tokens[i], i, V);
        if (targets && targets[i] >= V)
            return tsr__fail(TSR_EINVAL, "gpt2_forward: target %d at %d is outside [0, %d)",
                             targets[i], i, V);
        ntargets += targets && targets[i] >= 0;
    }
    int rc = tsr__tensor_write(&m->tokens, tokens, 1);
    if (!rc)
        rc = tsr__op_embed_fwd(&m->tokens, &m->wte->p, &m->wpe->p, m->T, &m->la[0].x);
    for (int l = 0; !rc && l < m->cfg.layers; l++)
        rc = block_forward(m, l, &m->la[l].x, l + 1 < m->cfg.layers ? &m->la[l + 1].x : &m->xL);
    if (!rc)
        rc = tsr__op_layernorm_fwd(&m->xL, &m->lnf_w->p, &m->lnf_b->p, &m->lnf, &m->lnf_mean,
                                   &m->lnf_rstd);
    if (!rc) /* logits = wte^T lnf: the head tied to the token embedding */
        rc = tsr__op_gemm(1, 0, 1.0f, &m->wte->p, &m->lnf, 0.0f, &m->logits, TSR_RW);
    m->have_targets = 0;
    m->have_loss = 0;
    if (rc || !targets)
        return rc;
    if ((rc = tsr__tensor_write(&m->targets, targets, 1)) ||
        (rc = tsr__op_xent_fwd(&m->logits, &m->targets, &m->ce_ms, &m->ce_lse, &m->ce_loss)))
        return rc;
    m->have_targets = 1;
    m->have_loss = 1;
    m->ntargets = ntargets;
    return loss ? tsr_gpt2_loss(m, loss) : TSR_OK;
}

int tsr_gpt2_loss(tsr_gpt2_t *m, float *loss)
{
    if (!m || !loss)
        return tsr__fail(TSR_EINVAL, "gpt2_loss: NULL argument");
    if (!m->have_loss)
        return tsr__fail(TSR_ESTATE, "gpt2_loss: no forward with targets yet");
    double sum = 0.0;
    int rc = read_loss(m, &sum);
    if (!rc)
        *loss = m->ntargets ? (float)(sum / m->ntargets) : 0.0f;
    return rc;
}

int tsr_gpt2_logits(tsr_gpt2_t *m, int b, int t, float *out)
{
    if (!m || !out || b < 0 || b >= m->B || t < 0 || t >= m->T)
        return tsr__fail(TSR_EINVAL, "gpt2_logits: position (%d, %d) outside (%d, %d)", b, t,
                         m ? m->B : 0, m ? m->T : 0);
    const tsr_tensor_t *L = &m->logits;
    int col = b * m->T + t, j = col / L->tile_cols, c = col % L->tile_cols;
    for (int v = 0; v < L->grid_rows; v++) {
        void *tile;
        tsr_handle_t h = tsr__tile(L, v, j);
        int rc = tsr_handle_acquire(h, TSR_R, &tile);
        if (rc)
            return rc;
        int nv = tsr__tile_m(L, v);
        memcpy(out + (size_t)v * L->tile_rows, (float *)tile + (size_t)c * nv,
               (size_t)nv * sizeof(float));
        if ((rc = tsr_handle_release(h)))
            return rc;
    }
    return TSR_OK;
}

/* ---- backward ------------------------------------------------------------- */

/* d holds dL/dx_out on entry and dL/dx_in on return. */
static int block_backward(tsr_gpt2_t *m, int l, const tsr_tensor_t *x_in)
{
    layer_params_t *p = &m->lp[l];
    layer_acts_t *a = &m->la[l];
    tsr_tensor_t *d = &m->d;
    int rc;
    /* MLP: x_out = res1 + W_fp gelu(W_fc ln2(res1) + b_fc) + b_fp */
    if ((rc = tsr__op_gemm(1, 0, 1.0f, &p->fcproj_w->p, d, 0.0f, &m->dfc, TSR_RW)) ||
        (rc = tsr__op_gemm(0, 1, 1.0f, d, &a->fcg, 1.0f, &p->fcproj_w->g, TSR_COMMUTE)) ||
        (rc = tsr__op_bias_grad(d, &p->fcproj_b->g)) || (rc = DROP(&a->fcg)) ||
        (rc = tsr__op_gelu_bwd(&a->fch, &m->dfc)) || (rc = DROP(&a->fch)) ||
        (rc = tsr__op_gemm(1, 0, 1.0f, &p->fc_w->p, &m->dfc, 0.0f, &m->dln, TSR_RW)) ||
        (rc = tsr__op_gemm(0, 1, 1.0f, &m->dfc, &a->ln2, 1.0f, &p->fc_w->g, TSR_COMMUTE)) ||
        (rc = tsr__op_bias_grad(&m->dfc, &p->fc_b->g)) || (rc = DROP(&a->ln2, &m->dfc)) ||
        (rc = tsr__op_layernorm_bwd(&m->dln, &a->res1, &p->ln2_w->p, &a->ln2_mean,
                                    &a->ln2_rstd, d, &p->ln2_w->g, &p->ln2_b->g)) ||
        (rc = DROP(&a->res1, &a->ln2_mean, &a->ln2_rstd)))
        return rc;
    /* attention: res1 = x + W_p attn(W_attn ln1(x) + b_attn) + b_p */
    if ((rc = tsr__op_gemm(1, 0, 1.0f, &p->proj_w->p, d, 0.0f, &m->dyb, TSR_RW)) ||
        (rc = tsr__op_gemm(0, 1, 1.0f, d, &a->yb, 1.0f, &p->proj_w->g, TSR_COMMUTE)) ||
        (rc = tsr__op_bias_grad(d, &p->proj_b->g)) || (rc = DROP(&a->yb)) ||
        (rc = tsr__op_regroup(&m->dyb, &m->daty)) || (rc = DROP(&m->dyb)) ||
        (rc = tsr__op_attention_bwd(&a->qkv, m->cfg.heads, m->T, &a->atty, &m->daty,
                                    &a->att_lse, &m->att_D, &m->dqkv)) ||
        (rc = DROP(&a->atty, &a->att_lse, &a->qkv, &m->daty, &m->att_D)) ||
        (rc = tsr__op_regroup(&m->dqkv, &m->dqkvb)) || (rc = DROP(&m->dqkv)) ||
        (rc = tsr__op_gemm(1, 0, 1.0f, &p->attn_w->p, &m->dqkvb, 0.0f, &m->dln, TSR_RW)) ||
        (rc = tsr__op_gemm(0, 1, 1.0f, &m->dqkvb, &a->ln1, 1.0f, &p->attn_w->g, TSR_COMMUTE)) ||
        (rc = tsr__op_bias_grad(&m->dqkvb, &p->attn_b->g)) || (rc = DROP(&a->ln1, &m->dqkvb)) ||
        (rc = tsr__op_layernorm_bwd(&m->dln, x_in, &p->ln1_w->p, &a->ln1_mean, &a->ln1_rstd,
                                    d, &p->ln1_w->g, &p->ln1_b->g)))
        return rc;
    return DROP(x_in, &a->ln1_mean, &a->ln1_rstd, &m->dln);
}

int tsr_gpt2_backward(tsr_gpt2_t *m, float scale)
{
    if (!m || !m->have_targets)
        return tsr__fail(TSR_ESTATE, "gpt2_backward: the last forward had no targets");
    m->have_targets = 0;
    float dscale = m->ntargets ? scale / (float)m->ntargets : 0.0f;
    int rc;
    /* loss → logits → ln_f: the logits tiles become their gradient in place */
    if ((rc = tsr__op_xent_bwd(&m->logits, &m->targets, &m->ce_lse, dscale)) ||
        (rc = tsr__op_gemm(0, 0, 1.0f, &m->wte->p, &m->logits, 0.0f, &m->dln, TSR_RW)) ||
        (rc = tsr__op_gemm(0, 1, 1.0f, &m->lnf, &m->logits, 1.0f, &m->wte->g, TSR_COMMUTE)) ||
        (rc = DROP(&m->logits, &m->lnf, &m->ce_ms, &m->ce_lse)) ||
        (rc = tsr__op_fill(&m->d, 0.0f)) ||
        (rc = tsr__op_layernorm_bwd(&m->dln, &m->xL, &m->lnf_w->p, &m->lnf_mean, &m->lnf_rstd,
                                    &m->d, &m->lnf_w->g, &m->lnf_b->g)) ||
        (rc = DROP(&m->xL, &m->lnf_mean, &m->lnf_rstd)))
        return rc;
    for (int l = m->cfg.layers - 1; l >= 0; l--)
        if ((rc = block_backward(m, l, &m->la[l].x)))
            return rc;
    if ((rc = tsr__op_embed_bwd(&m->tokens, &m->d, m->T, &m->wte->g, &m->wpe->g)))
        return rc;
    return DROP(&m->d, &m->targets);
}

int tsr_gpt2_zero_grad(tsr_gpt2_t *m)
{
    for (int i = 0; i < m->nparams; i++) {
        int rc = tsr__op_fill(&m->params[i].g, 0.0f);
        if (rc)
            return rc;
    }
    return TSR_OK;
}

/* ---- optimizer ------------------------------------------------------------ */

int tsr_gpt2_step(tsr_gpt2_t *m, const tsr_adamw_config_t *opt, float lr, float *grad_norm)
{
    tsr_adamw_config_t dflt;
    if (!opt) {
        tsr_adamw_config_default(&dflt);
        opt = &dflt;
    }
    if (!m || !(lr >= 0.0f) || !(opt->eps > 0.0f) || !(opt->beta1 >= 0.0f && opt->beta1 < 1.0f) ||
        !(opt->beta2 >= 0.0f && opt->beta2 < 1.0f))
        return tsr__fail(TSR_EINVAL, "gpt2_step: bad optimizer settings");
    /* global norm: every gradient tile adds its sum of squares, in any order */
    int rc = tsr__op_fill_handle(m->norm, 0.0f);
    for (int i = 0; !rc && i < m->nparams; i++)
        rc = tsr__op_sumsq(&m->params[i].g, m->norm);
    float *sumsq;
    if (rc || (rc = tsr_handle_acquire(m->norm, TSR_R, (void **)&sumsq)))
        return rc;
    double norm = sqrt((double)*sumsq);
    if ((rc = tsr_handle_release(m->norm)))
        return rc;
    if (grad_norm)
        *grad_norm = (float)norm;
    if (!isfinite(norm))
        return tsr__fail(TSR_EINVAL, "gpt2_step: the gradient norm is not finite");
    float scale = 1.0f;
    if (opt->grad_clip > 0.0f) {
        double coef = opt->grad_clip / (norm + 1e-6);
        scale = coef < 1.0 ? (float)coef : 1.0f;
    }
    m->steps++;
    for (int i = 0; !rc && i < m->nparams; i++) {
        param_t *p = &m->params[i];
        tsr_adamw_args_t a = {m->steps, lr, opt->beta1, opt->beta2, opt->eps,
                              p->decay ? opt->weight_decay : 0.0f, scale};
        rc = tsr__op_adamw(&a, &p->g, &p->p, &p->m, &p->v);
    }
    return rc;
}
