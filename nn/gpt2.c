/* nn/gpt2.c — GPT-2 as tiled tensors and tile tasks: parameters, gradients
 * and AdamW moments per HF parameter name, activations per layer (or, with
 * cfg.recompute, each block's input and one set of block activations that
 * backward recomputes block by block), the forward and backward passes as
 * sequences of tensor operations (nn/ops.h), and the optimizer step. With
 * cfg.precision bf16 (mixed precision) the GEMMs read bf16 copies of the
 * weights and bf16 activations and gradients, everything else stays fp32
 * (docs/gpt2.md, "Mixed precision").
 *
 * Layout (column-major, see nn/tensor.h), N = batch * seq_len tokens,
 * d = channels / heads, tt/tv/tf the token, vocabulary and hidden tiles:
 *   wte (C, V) tiles (C, tv)       wpe (C, ctx) tiles (C, tt)
 *   c_attn.w (3C, C) tiles (C, C)  c_proj.w (C, C) tiles (C, C)
 *   c_fc.w (4C, C) tiles (tf, C)   mlp.c_proj.w (C, 4C) tiles (C, tf)
 *   a weight W (out, in) is HF's [in, out] row-major bytes; y = W x.
 *   activations (C, N) tiles (C, tt); the fused q, k, v (3C, N) in tiles
 *   (C, tt) as c_attn writes them, which the attention tasks read in place
 *   (every head of a token tile in one task, strided views: nn/ops.h), and
 *   whose output (C, N) tiles (C, tt) c_proj reads; the backward likewise
 *   (dy in, dq, dk, dv out); logits (V, N) tiles (tv, tt).
 */
#include <tessera/gpt2.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/gpt2_model.h"
#include "nn/io/checkpoint.h"
#include "nn/ops.h"
#include "nn/params.h"
#include "nn/registry.h"
#include "nn/tensor.h"
#include "nn/tiling.h"
#include "nn/trainer.h"
#include "nn/wave.h"
#include "runtime/error.h"
#include "runtime/instance.h"

void tsr_gpt2_config_default(tsr_gpt2_config_t *cfg)
{
    if (!cfg)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->vocab_size = 50257;
    cfg->context = 1024;
    cfg->layers = 12;
    cfg->heads = 12;
    cfg->channels = 768;
}

void tsr_adamw_config_default(tsr_adamw_config_t *opt)
{
    if (!opt)
        return;
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

/* The bytes of c's weights (p and g, and the bf16 copies in bf16
 * precision: 8 or 10 per parameter) and of its training state (the weights
 * and the AdamW moments: what the trainer groups for homes). */
static void model_bytes(const tsr_gpt2_config_t *c, double *weight, double *state)
{
    double C = c->channels, L = c->layers;
    double numel = C * ((double)c->vocab_size + c->context + 2.0) +
                   L * (12.0 * C * C + 13.0 * C);
    *weight = numel * (c->precision == TSR_GPT2_BF16 ? 10.0 : 8.0);
    *state = *weight + 8.0 * numel;
}

/* The tile sizes left 0 in c, derived from the shapes, the workers and the
 * placement the state will get (nn/tiling.h); the MLP's hidden
 * activations have 4C rows. */
static int resolve_tiles(tsr_gpt2_config_t *c, int batch, int seq_len)
{
    double weight, state;
    model_bytes(c, &weight, &state);
    tsr__tiling_t t = {c->tile_tokens, c->tile_vocab, c->tile_hidden, c->tile_channels};
    TSR_TRY(tsr__tiling_resolve(&t, "gpt2", c->channels, c->channels / c->heads,
                                4LL * c->channels, c->vocab_size, batch, seq_len, state));
    c->tile_tokens = t.tokens;
    c->tile_vocab = t.vocab;
    c->tile_hidden = t.hidden;
    c->tile_channels = t.channels;
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
        return tsr__fail(TSR_EINVAL, "gpt2: channels %d do not split into heads %d",
                         c->channels, c->heads);
    if (c->channels / c->heads > 256)
        return tsr__fail(TSR_EINVAL, "gpt2: channels %d / heads %d: a head width of %d "
                                     "exceeds 256", c->channels, c->heads, c->channels / c->heads);
    if (seq_len > c->context)
        return tsr__fail(TSR_EINVAL, "gpt2: seq_len %d exceeds the context %d", seq_len,
                         c->context);
    if (c->recompute != 0 && c->recompute != 1)
        return tsr__fail(TSR_EINVAL, "gpt2: recompute must be 0 (keep the activations) or 1 "
                                     "(recompute them in backward), not %d", c->recompute);
    if (c->precision != TSR_GPT2_FP32 && c->precision != TSR_GPT2_BF16)
        return tsr__fail(TSR_EINVAL, "gpt2: precision must be TSR_GPT2_FP32 (%d) or "
                                     "TSR_GPT2_BF16 (%d), not %d", TSR_GPT2_FP32, TSR_GPT2_BF16,
                         c->precision);
    if (c->data_parallel != 0 && c->data_parallel != 1)
        return tsr__fail(TSR_EINVAL, "gpt2: data_parallel must be 0 (this process's model) or "
                                     "1 (one replica per MPI rank), not %d", c->data_parallel);
    if (c->zero != 0 && c->zero != 1)
        return tsr__fail(TSR_EINVAL, "gpt2: zero must be 0 (every rank keeps every AdamW "
                                     "moment) or 1 (ZeRO-1: each rank its share), not %d",
                         c->zero);
    if (c->zero && !c->data_parallel)
        return tsr__fail(TSR_EINVAL, "gpt2: zero = 1 shards the optimizer state over the "
                                     "ranks of a data-parallel model: it needs data_parallel = 1");
    int d = c->channels / c->heads;
    if (c->tile_channels < 0 || c->tile_channels > c->channels ||
        (c->tile_channels > 0 && (c->channels % c->tile_channels || c->tile_channels % d)))
        return tsr__fail(TSR_EINVAL, "gpt2: tile_channels %d must be 0 (derived) or a multiple "
                                     "of the head width %d that divides channels %d",
                         c->tile_channels, d, c->channels);
    if (c->wave < 0 || c->wave > 4096)
        return tsr__fail(TSR_EINVAL, "gpt2: wave must be 0 (chosen at create), 1 (one "
                                     "micro-batch at a time) or up to 4096, not %d", c->wave);
    if ((long long)batch * seq_len > (1LL << 30))
        return tsr__fail(TSR_EINVAL, "gpt2: batch %d x seq_len %d tokens per micro-batch is "
                                     "more than 2^30", batch, seq_len);
    return TSR_OK;
}

/* ---- live models ---------------------------------------------------------- */

/* Every model between tsr_gpt2_create and tsr_gpt2_free (nn/registry.h). */
static tsr__registry_t live = TSR__REGISTRY_INIT;

static int live_add(const tsr_gpt2_t *m)
{
    return tsr__registry_add(&live, m)
               ? tsr__fail(TSR_ENOMEM, "gpt2_create: no memory for the model registry")
               : TSR_OK;
}

/* Whether m is live; `remove` also takes it out. */
static int live_find(const tsr_gpt2_t *m, int remove)
{
    return tsr__registry_find(&live, m, remove);
}

/* A model argument of a call that uses its tiles (nn/registry.h). */
static int model_check(const tsr_gpt2_t *m, const char *fn)
{
    return tsr__registry_check(&live, m, m ? &m->runtime : NULL, "model", fn);
}

int tsr__gpt2_check(const tsr_gpt2_t *m, const char *fn)
{
    return model_check(m, fn);
}

/* A model argument of a getter that only reads host memory: live is enough. */
static int model_live(const tsr_gpt2_t *m, const char *fn)
{
    if (m && live_find(m, 0))
        return 1;
    tsr__fail(TSR_EINVAL, "%s: %p is not a live model", fn, (const void *)m);
    return 0;
}

/* ---- construction --------------------------------------------------------- */

/* Every tensor of the model is made here, in two passes over the same code
 * (nn/params.h, tsr__build_t): the dry run checks every shape and counts the
 * tiles before anything is allocated. */
static int tensor_of(tsr_gpt2_t *m, tsr_tensor_t *t, const char *name, const char *field,
                     long long rows, long long cols, long long tile_rows, long long tile_cols,
                     int bf16)
{
    return tsr__build_tensor(&m->build, t, name, field, rows, cols, tile_rows, tile_cols, bf16);
}

static int tensor(tsr_gpt2_t *m, tsr_tensor_t *t, const char *name, const char *field,
                  long long rows, long long cols, long long tile_rows, long long tile_cols)
{
    return tensor_of(m, t, name, field, rows, cols, tile_rows, tile_cols, 0);
}

/* Whether the model computes its GEMMs in bf16. */
static int bf16(const tsr_gpt2_t *m)
{
    return m->cfg.precision == TSR_GPT2_BF16;
}

/* A tensor that only GEMMs read: bf16 in bf16 precision. */
static int gemm_input(tsr_gpt2_t *m, tsr_tensor_t *t, const char *name, const char *field,
                      long long rows, long long cols, long long tile_rows, long long tile_cols)
{
    return tensor_of(m, t, name, field, rows, cols, tile_rows, tile_cols, bf16(m));
}

/* A parameter and its gradient and moments, tiled alike; `gemm`: GEMMs
 * read it, so bf16 precision gives it a bf16 copy. */
static int add_param(tsr_gpt2_t *m, param_t **out, const char *name, const char *field,
                     long long rows, long long cols, long long trows, long long tcols, int decay,
                     int gemm)
{
    return tsr__params_add(&m->params, &m->build, out, name, field, rows, cols, trows, tcols,
                           decay, gemm);
}

static int make_params(tsr_gpt2_t *m)
{
    const tsr_gpt2_config_t *c = &m->cfg;
    long long C = c->channels, tf = c->tile_hidden, tc = c->tile_channels;
    if (!m->build.dry) {
        TSR_TRY(tsr__params_reserve(&m->params, 4 + 12 * c->layers));
        m->lp = calloc((size_t)c->layers, sizeof *m->lp);
        if (!m->lp)
            return tsr__fail(TSR_ENOMEM, "gpt2: no memory for the parameter table");
    }
    TSR_TRY(add_param(m, &m->wte, "wte.weight", "vocab_size, channels, tile_vocab", C,
                  c->vocab_size, tc, c->tile_vocab, 1, 1));
    TSR_TRY(add_param(m, &m->wpe, "wpe.weight", "context, channels, tile_tokens", C, c->context,
                  tc, c->tile_tokens < m->T ? c->tile_tokens : m->T, 1, 0));
    const char *f = "layers, channels, tile_hidden, tile_channels";
    char n[64];
#define P(member, suffix, rows, cols, tr, tc, decay)                                    \
    snprintf(n, sizeof n, "h.%d.%s", l, suffix);                                        \
    TSR_TRY(add_param(m, &lp->member, n, f, rows, cols, tr, tc, decay, decay));
    for (int l = 0; l < c->layers; l++) {
        layer_params_t dry_lp, *lp = m->build.dry ? &dry_lp : &m->lp[l];
        P(ln1_w, "ln_1.weight", C, 1, tc, 1, 0)
        P(ln1_b, "ln_1.bias", C, 1, tc, 1, 0)
        P(attn_w, "attn.c_attn.weight", 3 * C, C, tc, tc, 1)
        P(attn_b, "attn.c_attn.bias", 3 * C, 1, tc, 1, 0)
        P(proj_w, "attn.c_proj.weight", C, C, tc, tc, 1)
        P(proj_b, "attn.c_proj.bias", C, 1, tc, 1, 0)
        P(ln2_w, "ln_2.weight", C, 1, tc, 1, 0)
        P(ln2_b, "ln_2.bias", C, 1, tc, 1, 0)
        P(fc_w, "mlp.c_fc.weight", 4 * C, C, tf, tc, 1)
        P(fc_b, "mlp.c_fc.bias", 4 * C, 1, tf, 1, 0)
        P(fcproj_w, "mlp.c_proj.weight", C, 4 * C, tc, tf, 1)
        P(fcproj_b, "mlp.c_proj.bias", C, 1, tc, 1, 0)
    }
#undef P
    TSR_TRY(add_param(m, &m->lnf_w, "ln_f.weight", f, C, 1, tc, 1, 0, 0));
    return add_param(m, &m->lnf_b, "ln_f.bias", f, C, 1, tc, 1, 0, 0);
}

static int make_acts(tsr_gpt2_t *m)
{
    const tsr_gpt2_config_t *c = &m->cfg;
    long long C = c->channels, H = c->heads, tf = c->tile_hidden, tc = c->tile_channels;
    long long R = C / tc, hr = H / R; /* channel tiles, heads per tile */
    int S = m->slots, L = c->layers;
    if (!m->build.dry) {
        m->la = calloc((size_t)S * (size_t)L, sizeof *m->la);
        m->slot = calloc((size_t)S, sizeof *m->slot);
        if (!m->la || !m->slot)
            return tsr__fail(TSR_ENOMEM, "gpt2: no memory for the activation table");
    }
    /* every activation has N token columns in tiles of tt */
    const char *f = "layers, channels, batch x seq_len, tile_tokens, tile_channels, wave";
#define A(t, rows, trows) TSR_TRY(tensor(m, &(t), #t, f, rows, m->N, trows, c->tile_tokens));
#define G(t, rows, trows) TSR_TRY(gemm_input(m, &(t), #t, f, rows, m->N, trows, c->tile_tokens));
#define B16(t, rows, trows)                                                             \
    TSR_TRY(tensor_of(m, &(t), #t, f, rows, m->N, trows, c->tile_tokens, 1));
    for (int i = 0; i < S * L; i++) { /* slot i / L, block i % L */
        layer_acts_t dry_la, *a = m->build.dry ? &dry_la : &m->la[i];
        A(a->x, C, tc)
        if (c->recompute && i % L > 0)
            continue; /* the block's other activations are its slot's block 0's */
        G(a->ln1, C, tc) A(a->ln1_mean, 1, 1) A(a->ln1_rstd, 1, 1)
        A(a->qkv, 3 * C, tc) A(a->att_lse, H, hr) G(a->yb, C, tc)
        if (bf16(m)) /* the attention's fp32 output, yb its bf16 copy */
            A(a->atty, C, tc)
        A(a->res1, C, tc)
        G(a->ln2, C, tc) A(a->ln2_mean, 1, 1) A(a->ln2_rstd, 1, 1)
        A(a->fch, 4 * C, tf) G(a->fcg, 4 * C, tf)
    }
    for (int i = 0; i < S; i++) {
        gpt2_slot_t dry_slot, *sl = m->build.dry ? &dry_slot : &m->slot[i];
        A(sl->xL, C, tc) A(sl->tokens, 1, 1) A(sl->targets, 1, 1) A(sl->ce_loss, 1, 1)
        A(sl->d, C, tc) A(sl->dln, C, tc) A(sl->dfc, 4 * C, tf)
        A(sl->dqkvb, 3 * C, tc) A(sl->dyb, C, tc)
        if (bf16(m)) {
            B16(sl->d16, C, tc) B16(sl->dfc16, 4 * C, tf) B16(sl->dqkvb16, 3 * C, tc)
        }
        if (R > 1)
            A(sl->ln_part, 2 * R, 2)
    }
    f = "channels, batch x seq_len, tile_tokens, tile_channels";
    G(m->lnf, C, tc) A(m->lnf_mean, 1, 1) A(m->lnf_rstd, 1, 1)
    A(m->ce_ms, 2, 2) A(m->ce_lse, 1, 1)
    A(m->att_ms, 2 * H, 2 * hr) A(m->att_acc, C, tc) A(m->att_D, H, hr)
    f = "vocab_size, batch x seq_len, tile_vocab, tile_tokens";
    A(m->logits, c->vocab_size, c->tile_vocab)
    if (bf16(m))
        B16(m->dlogits16, c->vocab_size, c->tile_vocab)
#undef A
#undef G
#undef B16
    if (m->build.dry || !bf16(m))
        return TSR_OK;
    /* the bf16 producers' fp32 scratch: their largest output tile (a
     * (tc, tt) LayerNorm, (tf, tt) GELU or (tv, tt) logits tile) */
    long long tt = m->la[0].x.tile_cols, rows = tc;
    if (m->la[0].fch.tile_rows > rows)
        rows = m->la[0].fch.tile_rows;
    if (m->logits.tile_rows > rows)
        rows = m->logits.tile_rows;
    return tsr_handle_alloc(&m->scratch, (size_t)(rows * tt) * sizeof(float));
}

/* Call fn on every tensor of the model (those not made yet are zeroed). */
static void for_each_tensor(tsr_gpt2_t *m, void (*fn)(tsr_tensor_t *))
{
    tsr__params_each_tensor(&m->params, fn);
    for (int i = 0; m->la && i < m->slots * m->cfg.layers; i++) {
        layer_acts_t *a = &m->la[i];
        tsr_tensor_t *all[] = {&a->x, &a->ln1, &a->ln1_mean, &a->ln1_rstd, &a->qkv,
                               &a->atty, &a->att_lse, &a->yb, &a->res1, &a->ln2, &a->ln2_mean,
                               &a->ln2_rstd, &a->fch, &a->fcg};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            fn(all[i]);
    }
    for (int i = 0; m->slot && i < m->slots; i++) {
        gpt2_slot_t *sl = &m->slot[i];
        tsr_tensor_t *all[] = {&sl->xL,    &sl->tokens, &sl->targets, &sl->ce_loss,
                               &sl->d,     &sl->dln,    &sl->dfc,     &sl->dqkvb,
                               &sl->dyb,   &sl->d16,    &sl->dfc16,   &sl->dqkvb16,
                               &sl->ln_part};
        for (size_t k = 0; k < sizeof all / sizeof *all; k++)
            fn(all[k]);
    }
    tsr_tensor_t *rest[] = {&m->lnf, &m->lnf_mean, &m->lnf_rstd, &m->logits,
                            &m->ce_ms, &m->ce_lse,
                            &m->att_ms, &m->att_acc, &m->att_D, &m->dlogits16};
    for (size_t i = 0; i < sizeof rest / sizeof *rest; i++)
        fn(rest[i]);
}

/* Free a model that is not (or no longer) in the registry. Under the runtime
 * that made it the tiles are unregistered; after tsr_shutdown they are
 * stale, and only the host memory is freed. */
static void destroy(tsr_gpt2_t *m)
{
    int same_runtime = m->runtime == tsr__runtime_instance();
    for_each_tensor(m, same_runtime ? tsr__tensor_free : tsr__tensor_forget);
    if (m->scratch && same_runtime)
        tsr_handle_unregister(m->scratch);
    tsr__trainer_free(&m->train, same_runtime);
    tsr__params_free(&m->params);
    free(m->lp);
    free(m->la);
    free(m->slot);
    free(m);
}

int tsr_gpt2_free(tsr_gpt2_t *m)
{
    if (!m)
        return TSR_OK;
    if (!live_find(m, 1))
        return tsr__fail(TSR_EINVAL, "gpt2_free: %p is not a live model (freed already, or "
                                     "never created)", (void *)m);
    destroy(m);
    return TSR_OK;
}

/* cfg.wave 0: the wave size for this model under the running runtime
 * (nn/wave.h): the weights are p and g (and the bf16 copy), the state
 * adds the moments, and a slot holds each block's input, one block's
 * activations (about 15 (C, N) tensors) and its backward's (about 10) with
 * recompute, and about 17 (C, N) activations per block without. Returns
 * the bytes of the state and a wave's slots (for the trainer). */
static double resolve_wave(tsr_gpt2_t *m)
{
    tsr_gpt2_config_t *c = &m->cfg;
    double C = c->channels, L = c->layers, N = m->N, weight, state;
    model_bytes(c, &weight, &state);
    double slot = 4.0 * C * N * (c->recompute ? L + 27.0 : 17.0 * L + 12.0);
    if (c->wave == 0)
        c->wave = tsr__wave_auto(weight, state, slot);
    m->slots = c->wave;
    m->wave_window = tsr__wave_window(weight);
    return state + m->slots * slot;
}

/* Resolve the tiles, check every tensor (dry run), then make them. */
static int build(tsr_gpt2_t *m)
{
    TSR_TRY(resolve_tiles(&m->cfg, m->B, m->T));
    m->tc = m->cfg.tile_channels;
    double footprint = resolve_wave(m);
    m->build = (tsr__build_t){.model = "gpt2", .dry = 1};
    TSR_TRY(make_params(m));
    TSR_TRY(make_acts(m));
    m->build = (tsr__build_t){.model = "gpt2", .dry = 0};
    TSR_TRY(make_params(m));
    TSR_TRY(make_acts(m));
    m->params.grads_zero = 1; /* fresh tiles read as zeros */
    m->params.bf16_stale = bf16(m);
    TSR_TRY(tsr__trainer_init(&m->train, &m->params, "gpt2", m->cfg.data_parallel, m->cfg.zero,
                              footprint));
    return live_add(m);
}

int tsr_gpt2_create(tsr_gpt2_t **out, const tsr_gpt2_config_t *cfg, int batch, int seq_len)
{
    if (out)
        *out = NULL;
    if (!out || !cfg)
        return tsr__fail(TSR_EINVAL, "gpt2_create: NULL argument");
    TSR_TRY(check_config(cfg, batch, seq_len));
    if (!tsr__runtime_instance())
        return tsr__fail(TSR_ESTATE, "gpt2_create: the runtime is not initialized (tsr_init)");
    tsr_gpt2_t *m = calloc(1, sizeof *m);
    if (!m)
        return tsr__fail(TSR_ENOMEM, "gpt2_create: out of memory");
    m->runtime = tsr__runtime_instance();
    m->cfg = *cfg;
    m->params.model = "gpt2";
    m->params.bf16 = cfg->precision == TSR_GPT2_BF16;
    m->B = batch;
    m->T = seq_len;
    m->N = batch * seq_len;
    m->hd = cfg->channels / cfg->heads;
    int rc = build(m);
    if (rc) {
        destroy(m);
        return rc;
    }
    *out = m;
    return TSR_OK;
}

const tsr_gpt2_config_t *tsr_gpt2_config(const tsr_gpt2_t *m)
{
    return model_live(m, "gpt2_config") ? &m->cfg : NULL;
}

size_t tsr_gpt2_num_params(const tsr_gpt2_t *m)
{
    return model_live(m, "gpt2_num_params") ? tsr__params_numel(&m->params) : 0;
}

int tsr_gpt2_steps_done(const tsr_gpt2_t *m)
{
    return model_live(m, "gpt2_steps_done") ? m->train.steps : 0;
}

int tsr__gpt2_set_steps(tsr_gpt2_t *m, int steps)
{
    if (!model_live(m, "gpt2_set_steps"))
        return TSR_EINVAL;
    if (steps < 0)
        return tsr__fail(TSR_EINVAL, "gpt2: negative step count %d", steps);
    m->train.steps = steps;
    return TSR_OK;
}

int tsr_gpt2_param_count(const tsr_gpt2_t *m)
{
    return model_live(m, "gpt2_param_count") ? m->params.n : 0;
}

const char *tsr_gpt2_param_name(const tsr_gpt2_t *m, int i)
{
    if (!model_live(m, "gpt2_param_name"))
        return NULL;
    return i >= 0 && i < m->params.n ? m->params.p[i].name : NULL;
}

/* Both directions: the tensor's column-major (out, in) bytes are the HF
 * row-major [in, out] bytes, so a dense copy is the whole conversion. */
static int param_access(tsr_gpt2_t *m, const char *name, int which, float *ptr, size_t *numel,
                        size_t given, int write)
{
    const char *fn = write ? "gpt2_set" : "gpt2_get";
    TSR_TRY(model_check(m, fn));
    return tsr__params_access(&m->params, fn, name, which, ptr, numel, given, write);
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

int tsr_gpt2_init_weights(tsr_gpt2_t *m, uint64_t seed)
{
    TSR_TRY(model_check(m, "gpt2_init_weights"));
    float resid_std = 0.02f / sqrtf(2.0f * (float)m->cfg.layers);
    m->params.bf16_stale = bf16(m);
    for (int i = 0; i < m->params.n; i++) {
        param_t *p = &m->params.p[i];
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
                             : (float)(tsr__params_normal(&s) * (is_resid ? resid_std : 0.02f));
        int rc = tsr__tensor_write(&p->p, buf, (size_t)p->p.rows);
        free(buf);
        if (rc)
            return rc;
    }
    return TSR_OK;
}


/* What a GEMM reads of weight p: its bf16 copy in bf16 precision. */
static const tsr_tensor_t *wmat(const param_t *p)
{
    return tsr__params_wmat(p);
}

/* LayerNorm's scratch for its sums over the channel tiles of slot s (NULL
 * with one channel tile: the fused kernels) */
static tsr_tensor_t *ln_part(tsr_gpt2_t *m, int s)
{
    return m->tc < m->cfg.channels ? &m->slot[s].ln_part : NULL;
}

/* LayerNorm forward of slot s into out (bf16 in bf16 precision, through
 * the scratch) */
static int ln_fwd(tsr_gpt2_t *m, int s, const tsr_tensor_t *x, const param_t *w,
                  const param_t *b, tsr_tensor_t *out, tsr_tensor_t *mean, tsr_tensor_t *rstd)
{
    if (bf16(m))
        return tsr__op_layernorm_fwd_bf16(x, &w->p, &b->p, out, mean, rstd, m->scratch,
                                          ln_part(m, s));
    return tsr__op_layernorm_fwd_rows(x, &w->p, &b->p, out, mean, rstd, ln_part(m, s));
}

/* Linear backward (nn/ops.h) with dy's bf16 copy dy16 in bf16 precision;
 * b NULL: its bias gradient is already summed (by the GELU-gradient product
 * of the Linear after it). */
static int linear_bwd(tsr_gpt2_t *m, param_t *w, param_t *b, const tsr_tensor_t *x,
                      const tsr_tensor_t *dy, const tsr_tensor_t *dy16, tsr_tensor_t *dx)
{
    tsr_tensor_t *db = b ? &b->g : NULL;
    if (bf16(m))
        return tsr__op_linear_bwd_bf16(&w->pb, x, dy, dy16, dx, &w->g, db);
    return tsr__op_linear_bwd(&w->p, x, dy, dx, &w->g, db);
}

/* ---- forward -------------------------------------------------------------- */

/* The activations of block l of slot s (its input x aside): its own, or
 * with cfg.recompute the one set every block of the slot shares (struct
 * layer_acts). */
static layer_acts_t *block_acts(tsr_gpt2_t *m, int l, int s)
{
    return &m->la[s * m->cfg.layers + (m->cfg.recompute ? 0 : l)];
}

/* The input (C, N) of block l of slot s; l = layers: the last block's output. */
static tsr_tensor_t *block_in(tsr_gpt2_t *m, int l, int s)
{
    return l < m->cfg.layers ? &m->la[s * m->cfg.layers + l].x : &m->slot[s].xL;
}

/* The attention's fp32 output (C, N) tiles (C, tt): yb itself in fp32
 * precision; in bf16, atty, which a conversion copies into yb for c_proj. */
static tsr_tensor_t *att_out(tsr_gpt2_t *m, layer_acts_t *a)
{
    return bf16(m) ? &a->atty : &a->yb;
}

/* Each step of a block below runs for slots 0 .. k-1 before the next step:
 * in a wave, one weight matrix's tasks for every micro-batch in a row, while
 * its tiles are where they are used (k = 1: one micro-batch). */
#define FOR_SLOTS(k) for (int s = 0; s < (k); s++)

/* One transformer block for slots 0 .. k-1, llm.c's order; N tokens, d the
 * head width:
 *   res1  = x + c_proj(attention(c_attn(ln_1(x))))
 *   x_out = res1 + mlp.c_proj(gelu(mlp.c_fc(ln_2(res1))))     (block l+1's x)
 * keep: the activations stay for backward. Otherwise (recomputation) each
 * is dropped right after its last reader here. rerun: the re-run at the
 * start of the block's backward, which needs the activations but not the
 * output (the last Linear is skipped; every other task is the forward's,
 * on the same tiles in the same order, so the activations are bitwise those
 * the forward computed: no forward task accumulates in COMMUTE or REDUX). */
static int block_forward(tsr_gpt2_t *m, int l, int k, int keep, int rerun)
{
    layer_params_t *p = &m->lp[l];
    int H = m->cfg.heads, T = m->T, discard = !keep;
    /* attention */
    FOR_SLOTS(k) {
        layer_acts_t *a = block_acts(m, l, s);
        tsr_tensor_t *x = block_in(m, l, s);
        TSR_TRY(ln_fwd(m, s, x, p->ln1_w, p->ln1_b, &a->ln1, &a->ln1_mean, &a->ln1_rstd)); /* (C, N) */
        TSR_TRY(TSR_DROP_IF(discard, &a->ln1_mean, &a->ln1_rstd));          /* backward's only */
    }
    FOR_SLOTS(k) {
        layer_acts_t *a = block_acts(m, l, s);
        TSR_TRY(tsr__op_linear_fwd(wmat(p->attn_w), &p->attn_b->p, &a->ln1, 0.0f, &a->qkv));
                                                                 /* (3C, N) tiles (C, tt) */
        TSR_TRY(TSR_DROP_IF(discard, &a->ln1));
    }
    FOR_SLOTS(k) {
        layer_acts_t *a = block_acts(m, l, s);
        TSR_TRY(tsr__op_attention_fwd(&a->qkv, H, T, bf16(m), &m->att_ms, &m->att_acc,
                                      att_out(m, a), &a->att_lse));
                                                    /* (C, N) tiles (C, tt); lse (H, N) */
        TSR_TRY(TSR_DROP_IF(discard, &a->qkv, &a->att_lse));
        if (bf16(m)) {
            TSR_TRY(tsr__op_convert(&a->atty, &a->yb));             /* bf16 (C, N) for c_proj */
            TSR_TRY(TSR_DROP_IF(discard, &a->atty));
        }
        TSR_TRY(tsr__op_copy(block_in(m, l, s), &a->res1));                 /* (C, N) */
    }
    FOR_SLOTS(k) {
        layer_acts_t *a = block_acts(m, l, s);
        TSR_TRY(tsr__op_linear_fwd(wmat(p->proj_w), &p->proj_b->p, &a->yb, 1.0f, &a->res1));
                                                                  /* += W_p y + b_p */
        TSR_TRY(TSR_DROP_IF(discard, &a->yb));
    }
    /* MLP */
    FOR_SLOTS(k) {
        layer_acts_t *a = block_acts(m, l, s);
        TSR_TRY(ln_fwd(m, s, &a->res1, p->ln2_w, p->ln2_b, &a->ln2, &a->ln2_mean, &a->ln2_rstd));
                                                                  /* (C, N) */
        TSR_TRY(TSR_DROP_IF(discard, &a->ln2_mean, &a->ln2_rstd));
    }
    FOR_SLOTS(k) {
        layer_acts_t *a = block_acts(m, l, s);
        if (bf16(m)) { /* fch fp32, fcg bf16 */
            TSR_TRY(tsr__op_linear_fwd(wmat(p->fc_w), &p->fc_b->p, &a->ln2, 0.0f, &a->fch));
                                                                              /* (4C, N) */
            TSR_TRY(TSR_DROP_IF(discard, &a->ln2));
            TSR_TRY(tsr__op_gelu_fwd_bf16(&a->fch, &a->fcg, m->scratch));     /* (4C, N) */
        } else { /* fch = W_fc ln2 + b_fc and fcg = gelu(fch), one task per tile */
            TSR_TRY(tsr__op_linear_gelu_fwd(wmat(p->fc_w), &p->fc_b->p, &a->ln2, &a->fch,
                                            &a->fcg));
            TSR_TRY(TSR_DROP_IF(discard, &a->ln2));                           /* (4C, N) */
        }
        TSR_TRY(TSR_DROP_IF(discard, &a->fch));
    }
    if (rerun)
        return TSR_OK; /* recomputed: backward needs fcg, not x_out */
    FOR_SLOTS(k) {
        layer_acts_t *a = block_acts(m, l, s);
        tsr_tensor_t *x_out = block_in(m, l + 1, s);
        TSR_TRY(tsr__op_copy(&a->res1, x_out));                              /* (C, N) */
        TSR_TRY(TSR_DROP_IF(discard, &a->res1));
        TSR_TRY(tsr__op_linear_fwd(wmat(p->fcproj_w), &p->fcproj_b->p, &a->fcg, 1.0f, x_out));
                                                                  /* += W_fp h + b_fp */
        TSR_TRY(TSR_DROP_IF(discard, &a->fcg));
    }
    return TSR_OK;
}

/* The phases of the micro-batches in slots (nn/wave.h). tokens and targets
 * have been checked (tsr__trainer_check_batch). */

/* slot s's tokens (1, N) -> block 0's input (C, N) */
static int phase_embed(void *mp, int s, const int32_t *tokens)
{
    tsr_gpt2_t *m = mp;
    TSR_TRY(tsr__params_refresh_stale(&m->params));
    TSR_TRY(tsr__tensor_write(&m->slot[s].tokens, tokens, 1));                   /* (1, N) */
    return tsr__op_embed_fwd(&m->slot[s].tokens, &m->wte->p, &m->wpe->p, m->T,
                             block_in(m, 0, s));                                /* (C, N) */
}

/* block l of slots 0 .. k-1: each input -> the next block's input (C, N);
 * with recomputation only each block's input stays */
static int phase_block_fwd(void *mp, int l, int k)
{
    tsr_gpt2_t *m = mp;
    return block_forward(m, l, k, !m->cfg.recompute, 0);
}

/* The head of slot s: ln_f, the logits and, with targets (ntargets of
 * them), the per-token losses (1, N) and the replicas' target count. */
static int phase_head_fwd(tsr_gpt2_t *m, int s, const int32_t *targets, int ntargets)
{
    gpt2_slot_t *sl = &m->slot[s];
    m->have_logits = m->have_targets = m->have_loss = 0;
    TSR_TRY(ln_fwd(m, s, &sl->xL, m->lnf_w, m->lnf_b, &m->lnf, &m->lnf_mean, &m->lnf_rstd));
                                                                             /* (C, N) */
    /* the head is tied to the token embedding: logits = wte^T lnf (fp32) */
    TSR_TRY(tsr__op_gemm(OP_T, OP_N, 1.0f, wmat(m->wte), &m->lnf, 0.0f, &m->logits, TSR_RW));
                                                                             /* (V, N) */
    m->have_logits = 1;
    if (!targets)
        return TSR_OK;
    TSR_TRY(tsr__tensor_write(&sl->targets, targets, 1));                       /* (1, N) */
    TSR_TRY(tsr__op_xent_fwd(&m->logits, &sl->targets, &m->ce_ms, &m->ce_lse, &sl->ce_loss));
                                                                             /* (1, N) */
    m->have_targets = m->have_loss = 1;
    m->loss_slot = s;
    return tsr__trainer_targets(&m->train, ntargets);
}

/* ---- backward ------------------------------------------------------------- */

/* LayerNorm backward of slot s from its dln into its d; in bf16 precision
 * with `to16` also d16 = bf16(d), which the next Linear backward reads. */
static int ln_bwd(tsr_gpt2_t *m, int s, const tsr_tensor_t *x, param_t *w, param_t *b,
                  const tsr_tensor_t *mean, const tsr_tensor_t *rstd, int to16)
{
    gpt2_slot_t *sl = &m->slot[s];
    if (bf16(m) && to16)
        return tsr__op_layernorm_bwd_bf16(&sl->dln, x, &w->p, mean, rstd, &sl->d, &sl->d16,
                                          &w->g, &b->g, ln_part(m, s));
    return tsr__op_layernorm_bwd_rows(&sl->dln, x, &w->p, mean, rstd, &sl->d, &w->g, &b->g,
                                      ln_part(m, s));
}

/* The head's backward of slot s (after its phase_head_fwd with targets):
 * the loss's gradient, scaled, through the logits and ln_f into d (C, N). */
static int phase_head_bwd(tsr_gpt2_t *m, int s, float scale)
{
    gpt2_slot_t *sl = &m->slot[s];
    m->have_targets = 0;
    m->params.grads_zero = 0;
    m->have_logits = 0; /* the logits tiles become their gradient in place */
    float dscale;
    TSR_TRY(tsr__trainer_grad_scale(&m->train, scale, &dscale));
    /* loss → logits → ln_f */
    /* fp32: the logits become their gradient in place; bf16: it goes to
     * dlogits16 and the logits are dropped */
    tsr_tensor_t *dlogits = bf16(m) ? &m->dlogits16 : &m->logits;
    TSR_TRY(bf16(m) ? tsr__op_xent_bwd_bf16(&m->logits, &sl->targets, &m->ce_lse, dscale,
                                        &m->dlogits16, m->scratch)
                : tsr__op_xent_bwd(&m->logits, &sl->targets, &m->ce_lse, dscale)); /* (V, N) */
    if (bf16(m))
        TSR_TRY(TSR_DROP(&m->logits));
    TSR_TRY(tsr__op_gemm(OP_N, OP_N, 1.0f, wmat(m->wte), dlogits, 0.0f, &sl->dln, TSR_RW));
                                                                    /* dln = wte dlogits (C, N) */
    TSR_TRY(tsr__op_gemm(OP_N, OP_T, 1.0f, &m->lnf, dlogits, 1.0f, &m->wte->g, TSR_COMMUTE));
                                                               /* dwte += lnf dlogits^T (C, V) */
    TSR_TRY(TSR_DROP(dlogits, &m->lnf, &m->ce_ms, &m->ce_lse));
    TSR_TRY(tsr__op_fill(&sl->d, 0.0f));                                        /* (C, N) */
    TSR_TRY(ln_bwd(m, s, &sl->xL, m->lnf_w, m->lnf_b, &m->lnf_mean, &m->lnf_rstd, 1));
                                                                             /* d (C, N) += */
    return TSR_DROP(&sl->xL, &m->lnf_mean, &m->lnf_rstd, &sl->dln);
}

/* Block l's backward of slots 0 .. k-1; each slot's d holds dL/dx_out on
 * entry and dL/dx on return. With recomputation the block's forward first
 * runs again from the kept inputs (all but its output). Each activation is
 * dropped after its last reader. */
static int phase_block_bwd(void *mp, int l, int k)
{
    tsr_gpt2_t *m = mp;
    layer_params_t *p = &m->lp[l];
    int H = m->cfg.heads, T = m->T;
    if (m->cfg.recompute)
        TSR_TRY(block_forward(m, l, k, 1, 1)); /* ln1 … fcg of block l, (C..4C, N) */
    /* MLP: x_out = res1 + W_fp gelu(W_fc ln2(res1) + b_fc) + b_fp */
    /* (bf16: d16 = bf16(d), written by the LayerNorm backward that made d) */
    FOR_SLOTS(k) {
        layer_acts_t *a = block_acts(m, l, s);
        gpt2_slot_t *sl = &m->slot[s];
        if (bf16(m)) {
            TSR_TRY(linear_bwd(m, p->fcproj_w, p->fcproj_b, &a->fcg, &sl->d, &sl->d16,
                               &sl->dfc));                                     /* (4C, N) */
            TSR_TRY(TSR_DROP(&a->fcg, &sl->d16));
            TSR_TRY(tsr__op_gelu_bwd_bf16(&a->fch, &sl->dfc, &sl->dfc16));    /* (4C, N) */
        } else { /* dfc = gelu'(fch) W_fp^T d and the fc bias gradient, one task per tile */
            TSR_TRY(tsr__op_linear_gelu_bwd(&p->fcproj_w->p, &a->fcg, &sl->d, &a->fch, &sl->dfc,
                                            &p->fcproj_w->g, &p->fcproj_b->g, &p->fc_b->g));
            TSR_TRY(TSR_DROP(&a->fcg));                                        /* (4C, N) */
        }
        TSR_TRY(TSR_DROP(&a->fch));
    }
    FOR_SLOTS(k) {
        layer_acts_t *a = block_acts(m, l, s);
        gpt2_slot_t *sl = &m->slot[s];
        TSR_TRY(linear_bwd(m, p->fc_w, bf16(m) ? p->fc_b : NULL, &a->ln2, &sl->dfc, &sl->dfc16,
                           &sl->dln));                                      /* dln (C, N) */
        TSR_TRY(TSR_DROP(&a->ln2, &sl->dfc));
        if (bf16(m))
            TSR_TRY(TSR_DROP(&sl->dfc16));
    }
    FOR_SLOTS(k) {
        layer_acts_t *a = block_acts(m, l, s);
        TSR_TRY(ln_bwd(m, s, &a->res1, p->ln2_w, p->ln2_b, &a->ln2_mean, &a->ln2_rstd, 1));
                                                                          /* d += */
        TSR_TRY(TSR_DROP(&a->res1, &a->ln2_mean, &a->ln2_rstd, &m->slot[s].dln));
    }
    /* attention: res1 = x + W_p attn(W_attn ln1(x) + b_attn) + b_p */
    FOR_SLOTS(k) {
        layer_acts_t *a = block_acts(m, l, s);
        gpt2_slot_t *sl = &m->slot[s];
        TSR_TRY(linear_bwd(m, p->proj_w, p->proj_b, &a->yb, &sl->d, &sl->d16, &sl->dyb));
                                                               /* dyb (C, N) tiles (C, tt) */
        if (bf16(m)) /* in fp32, yb is the attention output the backward reads */
            TSR_TRY(TSR_DROP(&a->yb, &sl->d16));
    }
    FOR_SLOTS(k) {
        layer_acts_t *a = block_acts(m, l, s);
        gpt2_slot_t *sl = &m->slot[s];
        TSR_TRY(tsr__op_attention_bwd(&a->qkv, H, T, bf16(m), att_out(m, a), &sl->dyb,
                                      &a->att_lse, &m->att_D, &sl->dqkvb));
                                                               /* (3C, N) tiles (C, tt) */
        TSR_TRY(TSR_DROP(att_out(m, a), &a->att_lse, &a->qkv, &sl->dyb, &m->att_D));
        if (bf16(m)) /* the bias gradient reads dqkvb, the products its bf16 copy */
            TSR_TRY(tsr__op_convert(&sl->dqkvb, &sl->dqkvb16));
    }
    FOR_SLOTS(k) {
        layer_acts_t *a = block_acts(m, l, s);
        gpt2_slot_t *sl = &m->slot[s];
        TSR_TRY(linear_bwd(m, p->attn_w, p->attn_b, &a->ln1, &sl->dqkvb, &sl->dqkvb16,
                           &sl->dln));                                      /* dln (C, N) */
        TSR_TRY(TSR_DROP(&a->ln1, &sl->dqkvb));
        if (bf16(m))
            TSR_TRY(TSR_DROP(&sl->dqkvb16));
    }
    /* d16 for block l-1's first Linear backward; block 0's d goes to the
     * embeddings only */
    FOR_SLOTS(k) {
        layer_acts_t *a = block_acts(m, l, s);
        tsr_tensor_t *x = block_in(m, l, s);
        TSR_TRY(ln_bwd(m, s, x, p->ln1_w, p->ln1_b, &a->ln1_mean, &a->ln1_rstd, l > 0));
                                                                          /* d += */
        TSR_TRY(TSR_DROP(x, &a->ln1_mean, &a->ln1_rstd, &m->slot[s].dln));
    }
    return TSR_OK;
}

/* The embeddings' backward of slot s: (C, V), (C, ctx) += the scatter of d */
static int phase_embed_bwd(void *mp, int s)
{
    tsr_gpt2_t *m = mp;
    gpt2_slot_t *sl = &m->slot[s];
    TSR_TRY(tsr__op_embed_bwd(&sl->tokens, &sl->d, m->T, &m->wte->g, &m->wpe->g));
    return TSR_DROP(&sl->d, &sl->targets);
}

/* ---- the passes ----------------------------------------------------------- */

int tsr_gpt2_forward(tsr_gpt2_t *m, const int32_t *tokens, const int32_t *targets, float *loss)
{
    TSR_TRY(model_check(m, "gpt2_forward"));
    int ntargets;
    TSR_TRY(tsr__trainer_check_batch("gpt2_forward", tokens, targets, m->N, m->cfg.vocab_size,
                                     &ntargets));
    m->have_logits = m->have_targets = m->have_loss = 0;
    TSR_TRY(phase_embed(m, 0, tokens));
    for (int l = 0; l < m->cfg.layers; l++)
        TSR_TRY(phase_block_fwd(m, l, 1));
    TSR_TRY(phase_head_fwd(m, 0, targets, ntargets));
    return loss && targets ? tsr_gpt2_loss(m, loss) : TSR_OK;
}

int tsr_gpt2_loss(tsr_gpt2_t *m, float *loss)
{
    TSR_TRY(model_check(m, "gpt2_loss"));
    return tsr__trainer_loss(&m->train, "gpt2_loss", m->have_loss, &m->slot[m->loss_slot].ce_loss,
                             loss);
}

int tsr_gpt2_logits(tsr_gpt2_t *m, int b, int t, float *out)
{
    TSR_TRY(model_check(m, "gpt2_logits"));
    return tsr__trainer_logits("gpt2_logits", &m->logits, m->have_logits, m->B, m->T, b, t,
                               out);
}

int tsr_gpt2_backward(tsr_gpt2_t *m, float scale)
{
    TSR_TRY(model_check(m, "gpt2_backward"));
    if (!m->have_targets)
        return tsr__fail(TSR_ESTATE, "gpt2_backward: the last forward had no targets");
    TSR_TRY(phase_head_bwd(m, 0, scale));
    for (int l = m->cfg.layers - 1; l >= 0; l--)
        TSR_TRY(phase_block_bwd(m, l, 1));
    return phase_embed_bwd(m, 0);
}

/* The head and the loss as nn/wave.h calls them (the other phases take
 * the model as void *) */
static int wave_head(void *mp, int s, const int32_t *targets, int ntargets, float scale)
{
    tsr_gpt2_t *m = mp;
    TSR_TRY(phase_head_fwd(m, s, targets, ntargets));
    TSR_TRY(tsr__trainer_count(&m->train, &m->slot[s].count)); /* for wave_loss */
    return phase_head_bwd(m, s, scale);
}
static int wave_loss(void *mp, int s, float *loss)
{
    tsr_gpt2_t *m = mp;
    return tsr__trainer_loss_of(&m->train, "gpt2_forward_backward", &m->slot[s].ce_loss,
                                m->slot[s].count, loss);
}

int tsr_gpt2_forward_backward(tsr_gpt2_t *m, int micro, const int32_t *tokens,
                              const int32_t *targets, float scale, float *losses)
{
    TSR_TRY(model_check(m, "gpt2_forward_backward"));
    tsr__wave_model_t w = {m, m->cfg.layers, m->slots, m->N, m->wave_window, phase_embed,
                           phase_block_fwd, wave_head, phase_block_bwd, phase_embed_bwd,
                           wave_loss};
    return tsr__wave_run(&w, "gpt2_forward_backward", m->cfg.vocab_size, micro, tokens,
                         targets, scale, losses);
}

int tsr_gpt2_zero_grad(tsr_gpt2_t *m)
{
    TSR_TRY(model_check(m, "gpt2_zero_grad"));
    return tsr__params_zero_grad(&m->params);
}

/* ---- optimizer ------------------------------------------------------------ */

int tsr_gpt2_step(tsr_gpt2_t *m, const tsr_adamw_config_t *opt, float lr, float *grad_norm)
{
    TSR_TRY(model_check(m, "gpt2_step"));
    return tsr__trainer_step(&m->train, "gpt2_step", opt, lr, grad_norm);
}
