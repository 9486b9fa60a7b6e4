/* nn/llama.c — a Llama-family decoder as tiled tensors and tile tasks:
 * RMSNorm, rotary position embeddings (Llama 3 scaling), grouped-query
 * attention, SwiGLU, no biases, an untied (or tied) head; the parameters
 * by Hugging Face name in a parameter table (nn/params.h) that the shared
 * trainer (nn/trainer.h) steps, as GPT-2's. With cfg.recompute each block's
 * activations are recomputed in its backward; with cfg.precision bf16 the
 * GEMMs read bf16 copies of the weights and bf16 activations and gradients
 * (docs/llama.md). tsr_llama_forward_backward runs several micro-batches
 * layer by layer in waves (nn/wave.h), each in a slot of its own tensors.
 *
 * Layout (column-major, nn/tensor.h), N = batch * seq_len tokens, C =
 * hidden, D = head_dim, Hq = heads D, Hkv = kv_heads D, Q = Hq + 2 Hkv,
 * F = intermediate, tt/tv/tf the token, vocabulary and intermediate tiles.
 * A transformers Linear weight [out, in] row-major is our (in, out)
 * column-major W, and y = W^T x:
 *   embed_tokens, lm_head (C, V) tiles (C, tv)
 *   qkv = q_proj | k_proj | v_proj (C, Q) in one tile (C, Q)
 *   o_proj (Hq, C) one tile; gate_proj, up_proj (C, F) tiles (C, tf);
 *   down_proj (F, C) tiles (tf, C); the norms (C, 1)
 *   activations (C, N) tiles (C, tt); qkv (Q, N) tiles (Q, tt), the rows of
 *   a token: its Hq query rows (head h at h D), then K, then V; attention
 *   output (Hq, N) tiles (Hq, tt); gate, up, h (F, N) tiles (tf, tt);
 *   logits (V, N) tiles (tv, tt).
 */
#include <tessera/llama.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/rope.h"
#include "nn/io/llama_config.h"
#include "nn/io/llama_names.h"
#include "nn/io/stset.h"
#include "nn/llama_model.h"
#include "nn/ops.h"
#include "nn/params.h"
#include "nn/registry.h"
#include "nn/tensor.h"
#include "nn/tiling.h"
#include "nn/trainer.h"
#include "nn/wave.h"
#include "runtime/error.h"
#include "runtime/instance.h"

/* ---- configuration -------------------------------------------------------- */

void tsr_llama_config_default(tsr_llama_config_t *c)
{
    if (!c)
        return;
    memset(c, 0, sizeof *c);
    c->vocab_size = 128256;
    c->hidden = 512;
    c->intermediate = 1408;
    c->layers = 6;
    c->heads = 8;
    c->kv_heads = 2;
    c->max_positions = 2048;
    c->rms_norm_eps = 1e-5;
    c->rope_theta = 10000.0;
    c->precision = TSR_GPT2_FP32;
}

/* The public shape as config.json's struct (transformers' defaults for the
 * special ids, float32). */
static void to_hf(const tsr_llama_config_t *c, tsr__llama_config_t *h)
{
    tsr__llama_config_defaults(h);
    h->hidden_size = c->hidden;
    h->intermediate_size = c->intermediate;
    h->num_hidden_layers = c->layers;
    h->num_attention_heads = c->heads;
    h->num_key_value_heads = c->kv_heads;
    h->head_dim = c->head_dim > 0 ? c->head_dim : (c->heads > 0 ? c->hidden / c->heads : 0);
    h->vocab_size = c->vocab_size;
    h->max_position_embeddings = c->max_positions;
    h->rms_norm_eps = c->rms_norm_eps;
    h->rope_theta = c->rope_theta;
    h->rope_llama3 = c->rope_llama3;
    h->rope_factor = c->rope_factor;
    h->rope_low_freq_factor = c->rope_low_freq_factor;
    h->rope_high_freq_factor = c->rope_high_freq_factor;
    h->rope_original_max_position_embeddings = c->rope_original_max_positions;
    h->tie_word_embeddings = c->tie_embeddings;
}

int tsr_llama_read_config(const char *path, tsr_llama_config_t *cfg)
{
    if (!path || !cfg)
        return tsr__fail(TSR_EINVAL, "llama_read_config: NULL argument");
    char file[4096];
    size_t n = strlen(path);
    int is_json = n >= 5 && !strcmp(path + n - 5, ".json");
    if (snprintf(file, sizeof file, is_json ? "%s" : "%s/config.json", path) >=
        (int)sizeof file)
        return tsr__fail(TSR_EINVAL, "llama_read_config: path too long");
    tsr__llama_config_t h;
    TSR_TRY(tsr__llama_config_read(file, &h));
    tsr_llama_config_default(cfg);
    cfg->vocab_size = h.vocab_size;
    cfg->hidden = h.hidden_size;
    cfg->intermediate = h.intermediate_size;
    cfg->layers = h.num_hidden_layers;
    cfg->heads = h.num_attention_heads;
    cfg->kv_heads = h.num_key_value_heads;
    cfg->head_dim = h.head_dim;
    cfg->max_positions = h.max_position_embeddings;
    cfg->rms_norm_eps = h.rms_norm_eps;
    cfg->rope_theta = h.rope_theta;
    cfg->rope_llama3 = h.rope_llama3;
    cfg->rope_factor = h.rope_factor;
    cfg->rope_low_freq_factor = h.rope_low_freq_factor;
    cfg->rope_high_freq_factor = h.rope_high_freq_factor;
    cfg->rope_original_max_positions = h.rope_original_max_position_embeddings;
    cfg->tie_embeddings = h.tie_word_embeddings;
    return TSR_OK;
}

static int check_config(const tsr_llama_config_t *c, int batch, int seq_len)
{
    if (c->vocab_size <= 0 || c->hidden <= 0 || c->intermediate <= 0 || c->layers <= 0 ||
        c->heads <= 0 || c->kv_heads <= 0 || c->head_dim < 0 || c->max_positions <= 0 ||
        batch <= 0 || seq_len <= 0)
        return tsr__fail(TSR_EINVAL, "llama: every size must be positive (vocab %d, hidden %d, "
                                     "intermediate %d, layers %d, heads %d, kv_heads %d, "
                                     "head_dim %d, max_positions %d, batch %d, seq %d)",
                         c->vocab_size, c->hidden, c->intermediate, c->layers, c->heads,
                         c->kv_heads, c->head_dim, c->max_positions, batch, seq_len);
    if (!c->head_dim && c->hidden % c->heads)
        return tsr__fail(TSR_EINVAL, "llama: hidden %d does not split into %d heads (set "
                                     "head_dim)", c->hidden, c->heads);
    tsr__llama_config_t h;
    to_hf(c, &h);
    TSR_TRY(tsr__llama_config_validate(&h, "llama"));
    if (h.head_dim > 256)
        return tsr__fail(TSR_EINVAL, "llama: head_dim %d exceeds 256", h.head_dim);
    if (seq_len > c->max_positions)
        return tsr__fail(TSR_EINVAL, "llama: seq_len %d exceeds max_positions %d", seq_len,
                         c->max_positions);
    if (c->recompute != 0 && c->recompute != 1)
        return tsr__fail(TSR_EINVAL, "llama: recompute must be 0 or 1, not %d", c->recompute);
    if (c->precision != TSR_GPT2_FP32 && c->precision != TSR_GPT2_BF16)
        return tsr__fail(TSR_EINVAL, "llama: precision must be TSR_GPT2_FP32 (%d) or "
                                     "TSR_GPT2_BF16 (%d), not %d", TSR_GPT2_FP32, TSR_GPT2_BF16,
                         c->precision);
    if ((c->data_parallel != 0 && c->data_parallel != 1) || (c->zero != 0 && c->zero != 1))
        return tsr__fail(TSR_EINVAL, "llama: data_parallel and zero must be 0 or 1 (%d, %d)",
                         c->data_parallel, c->zero);
    if (c->zero && !c->data_parallel)
        return tsr__fail(TSR_EINVAL, "llama: zero = 1 needs data_parallel = 1");
    if (c->wave < 0 || c->wave > 4096)
        return tsr__fail(TSR_EINVAL, "llama: wave must be 0 (chosen at create), 1 (one "
                                     "micro-batch at a time) or up to 4096, not %d", c->wave);
    if ((long long)batch * seq_len > (1LL << 30))
        return tsr__fail(TSR_EINVAL, "llama: batch %d x seq_len %d tokens per micro-batch is "
                                     "more than 2^30", batch, seq_len);
    return TSR_OK;
}

/* ---- live models ---------------------------------------------------------- */

static tsr__registry_t live = TSR__REGISTRY_INIT;

static int model_check(const tsr_llama_t *m, const char *fn)
{
    return tsr__registry_check(&live, m, m ? &m->runtime : NULL, "model", fn);
}

int tsr__llama_check(const tsr_llama_t *m, const char *fn)
{
    return model_check(m, fn);
}

static int model_live(const tsr_llama_t *m, const char *fn)
{
    if (m && tsr__registry_find(&live, m, 0))
        return 1;
    tsr__fail(TSR_EINVAL, "%s: %p is not a live model", fn, (const void *)m);
    return 0;
}

/* ---- construction --------------------------------------------------------- */

static int bf16(const tsr_llama_t *m)
{
    return m->cfg.precision == TSR_GPT2_BF16;
}

static int tensor_of(tsr_llama_t *m, tsr_tensor_t *t, const char *name, const char *field,
                     long long rows, long long cols, long long tr, long long tc, int b16)
{
    return tsr__build_tensor(&m->build, t, name, field, rows, cols, tr, tc, b16);
}

/* HF name entries: every parameter is one, but qkv is three (q, k, v) */
static int add_name(tsr_llama_t *m, const char *name, int param, size_t offset, int rows,
                    int cols)
{
    if (m->build.dry)
        return TSR_OK;
    llama_name_t *n = &m->names[m->nnames++];
    snprintf(n->name, sizeof n->name, "%s", name);
    n->param = param;
    n->offset = offset;
    n->rows = rows;
    n->cols = cols;
    n->numel = (size_t)rows * (size_t)(cols ? cols : 1);
    return TSR_OK;
}

/* A parameter (in, out) named as transformers names its [out, in] weight;
 * out_rows 0: a vector of `in` elements */
static int add_param(tsr_llama_t *m, param_t **out, const char *name, const char *field,
                     long long in, long long outn, long long tin, long long tout, int matrix)
{
    int index = m->params.n;
    TSR_TRY(tsr__params_add(&m->params, &m->build, out, name, field, in, outn ? outn : 1, tin,
                        outn ? tout : 1, matrix, matrix));
    if (outn)
        return add_name(m, name, index, 0, (int)outn, (int)in);
    return add_name(m, name, index, 0, (int)in, 0);
}

static int make_params(tsr_llama_t *m)
{
    const tsr_llama_config_t *c = &m->cfg;
    long long C = m->C, V = c->vocab_size, tv = c->tile_vocab, tf = c->tile_hidden;
    int L = c->layers;
    if (!m->build.dry) {
        TSR_TRY(tsr__params_reserve(&m->params, 3 + 7 * L));
        m->lp = calloc((size_t)L, sizeof *m->lp);
        m->names = calloc(3 + 9 * (size_t)L, sizeof *m->names);
        if (!m->lp || !m->names)
            return tsr__fail(TSR_ENOMEM, "llama: no memory for the parameter table");
    }
    TSR_TRY(add_param(m, &m->embed, "model.embed_tokens.weight", "vocab_size, hidden, tile_vocab",
                      C, V, C, tv, 1));
    const char *f = "layers, hidden, heads, intermediate, tile_hidden";
    char n[96];
    for (int l = 0; l < L; l++) {
        llama_layer_params_t dry_lp, *lp = m->build.dry ? &dry_lp : &m->lp[l];
        snprintf(n, sizeof n, "model.layers.%d.input_layernorm.weight", l);
        TSR_TRY(add_param(m, &lp->ln1, n, f, C, 0, C, 0, 0));
        /* q, k, v: one parameter, three names over its columns */
        int index = m->params.n;
        snprintf(n, sizeof n, "model.layers.%d.self_attn.qkv_proj.weight", l);
        TSR_TRY(tsr__params_add(&m->params, &m->build, &lp->qkv, n, f, C, m->Q, C, m->Q, 1, 1));
        const char *part[3] = {"q_proj", "k_proj", "v_proj"};
        int rows[3] = {m->Hq, m->Hkv, m->Hkv};
        size_t off = 0;
        for (int k = 0; k < 3; k++) {
            snprintf(n, sizeof n, "model.layers.%d.self_attn.%s.weight", l, part[k]);
            TSR_TRY(add_name(m, n, index, off, rows[k], m->C));
            off += (size_t)rows[k] * (size_t)m->C;
        }
        snprintf(n, sizeof n, "model.layers.%d.self_attn.o_proj.weight", l);
        TSR_TRY(add_param(m, &lp->o, n, f, m->Hq, C, m->Hq, C, 1));
        snprintf(n, sizeof n, "model.layers.%d.post_attention_layernorm.weight", l);
        TSR_TRY(add_param(m, &lp->ln2, n, f, C, 0, C, 0, 0));
        snprintf(n, sizeof n, "model.layers.%d.mlp.gate_proj.weight", l);
        TSR_TRY(add_param(m, &lp->gate, n, f, C, m->F, C, tf, 1));
        snprintf(n, sizeof n, "model.layers.%d.mlp.up_proj.weight", l);
        TSR_TRY(add_param(m, &lp->up, n, f, C, m->F, C, tf, 1));
        snprintf(n, sizeof n, "model.layers.%d.mlp.down_proj.weight", l);
        TSR_TRY(add_param(m, &lp->down, n, f, m->F, C, tf, C, 1));
    }
    TSR_TRY(add_param(m, &m->norm, "model.norm.weight", f, C, 0, C, 0, 0));
    if (c->tie_embeddings) {
        m->head = m->embed;
        return TSR_OK;
    }
    return add_param(m, &m->head, "lm_head.weight", "vocab_size, hidden, tile_vocab", C, V, C,
                     tv, 1);
}

static int make_acts(tsr_llama_t *m)
{
    const tsr_llama_config_t *c = &m->cfg;
    long long C = m->C, H = c->heads, Q = m->Q, Hq = m->Hq, F = m->F, tf = c->tile_hidden;
    long long N = m->N, tt = c->tile_tokens;
    int S = m->slots, L = c->layers;
    if (!m->build.dry) {
        m->la = calloc((size_t)S * (size_t)L, sizeof *m->la);
        m->slot = calloc((size_t)S, sizeof *m->slot);
        if (!m->la || !m->slot)
            return tsr__fail(TSR_ENOMEM, "llama: no memory for the activation table");
    }
    const char *f = "layers, hidden, heads, intermediate, batch x seq_len, tile_tokens, wave";
#define A(t, rows, trows) TSR_TRY(tensor_of(m, &(t), #t, f, rows, N, trows, tt, 0));
#define G(t, rows, trows) TSR_TRY(tensor_of(m, &(t), #t, f, rows, N, trows, tt, bf16(m)));
#define B16(t, rows, trows) TSR_TRY(tensor_of(m, &(t), #t, f, rows, N, trows, tt, 1));
    for (int i = 0; i < S * L; i++) { /* slot i / L, layer i % L */
        llama_layer_acts_t dry_la, *a = m->build.dry ? &dry_la : &m->la[i];
        A(a->x, C, C)
        if (c->recompute && i % L > 0)
            continue; /* the block's other activations are its slot's layer 0's */
        G(a->ln1, C, C) A(a->rstd1, 1, 1)
        A(a->qkv, Q, Q) A(a->att_lse, H, H) G(a->yb, Hq, Hq)
        if (bf16(m))
            A(a->atty, Hq, Hq)
        A(a->res1, C, C)
        G(a->ln2, C, C) A(a->rstd2, 1, 1)
        A(a->gate, F, tf) A(a->up, F, tf) G(a->h, F, tf)
    }
    for (int i = 0; i < S; i++) {
        llama_slot_t dry_slot, *sl = m->build.dry ? &dry_slot : &m->slot[i];
        A(sl->xL, C, C) A(sl->tokens, 1, 1) A(sl->targets, 1, 1) A(sl->ce_loss, 1, 1)
        A(sl->d, C, C) A(sl->dln, C, C) A(sl->dh, F, tf) A(sl->dqkv, Q, Q) A(sl->dyb, Hq, Hq)
        if (!bf16(m)) { /* bf16: the SwiGLU backward writes dgate16, dup16 directly */
            A(sl->dgate, F, tf) A(sl->dup, F, tf)
        }
        if (bf16(m)) {
            B16(sl->d16, C, C) B16(sl->dgate16, F, tf) B16(sl->dup16, F, tf)
            B16(sl->dqkv16, Q, Q)
        }
    }
    f = "hidden, heads, intermediate, batch x seq_len, tile_tokens";
    G(m->lnf, C, C) A(m->rstdf, 1, 1) A(m->ce_ms, 2, 2) A(m->ce_lse, 1, 1)
    A(m->att_ms, 2 * H, 2 * H) A(m->att_acc, Hq, Hq) A(m->att_D, H, H) A(m->dln, C, C)
    f = "vocab_size, batch x seq_len, tile_vocab, tile_tokens";
    A(m->logits, c->vocab_size, c->tile_vocab)
    if (bf16(m))
        B16(m->dlogits16, c->vocab_size, c->tile_vocab)
#undef A
#undef G
#undef B16
    if (m->build.dry || !bf16(m))
        return TSR_OK;
    /* the bf16 producers' fp32 scratch: their largest output (the SwiGLU
     * backward's two tiles) */
    long long rows = m->logits.tile_rows;
    long long others[] = {C, Q, 2 * tf};
    for (int i = 0; i < 3; i++)
        if (others[i] > rows)
            rows = others[i];
    return tsr_handle_alloc(&m->scratch, (size_t)(rows * m->la[0].x.tile_cols) * sizeof(float));
}

static int make_rope(tsr_llama_t *m)
{
    double *inv = malloc((size_t)(m->D / 2) * sizeof *inv);
    if (!inv)
        return tsr__fail(TSR_ENOMEM, "llama: no memory for the RoPE table");
    tsr_rope_llama3_t s = {m->cfg.rope_factor, m->cfg.rope_low_freq_factor,
                           m->cfg.rope_high_freq_factor,
                           (double)m->cfg.rope_original_max_positions};
    int rc = tsr_rope_inv_freq(m->D, m->cfg.rope_theta, m->cfg.rope_llama3 ? &s : NULL, inv)
                 ? tsr__fail(TSR_EINVAL, "llama: no RoPE table for head_dim %d, theta %g",
                             m->D, m->cfg.rope_theta)
                 : tsr__rope_table(&m->rope, m->D, inv);
    free(inv);
    return rc;
}

/* Call fn on every tensor of the model (those not made yet are zeroed). */
static void for_each_tensor(tsr_llama_t *m, void (*fn)(tsr_tensor_t *))
{
    tsr__params_each_tensor(&m->params, fn);
    for (int i = 0; m->la && i < m->slots * m->cfg.layers; i++) {
        llama_layer_acts_t *a = &m->la[i];
        tsr_tensor_t *all[] = {&a->x,   &a->ln1,  &a->rstd1, &a->qkv,   &a->atty, &a->att_lse,
                               &a->yb,  &a->res1, &a->ln2,   &a->rstd2, &a->gate, &a->up,
                               &a->h};
        for (size_t k = 0; k < sizeof all / sizeof *all; k++)
            fn(all[k]);
    }
    for (int i = 0; m->slot && i < m->slots; i++) {
        llama_slot_t *sl = &m->slot[i];
        tsr_tensor_t *all[] = {&sl->xL,    &sl->tokens, &sl->targets, &sl->ce_loss,
                               &sl->d,     &sl->d16,    &sl->dln,     &sl->dh,
                               &sl->dgate, &sl->dup,    &sl->dqkv,    &sl->dyb,
                               &sl->dgate16, &sl->dup16, &sl->dqkv16};
        for (size_t k = 0; k < sizeof all / sizeof *all; k++)
            fn(all[k]);
    }
    tsr_tensor_t *rest[] = {&m->lnf,    &m->rstdf,   &m->logits, &m->ce_ms, &m->ce_lse,
                            &m->att_ms, &m->att_acc, &m->att_D,  &m->dln,   &m->dlogits16};
    for (size_t i = 0; i < sizeof rest / sizeof *rest; i++)
        fn(rest[i]);
}

static void destroy(tsr_llama_t *m)
{
    int same = m->runtime == tsr__runtime_instance();
    for_each_tensor(m, same ? tsr__tensor_free : tsr__tensor_forget);
    if (m->scratch && same)
        tsr_handle_unregister(m->scratch);
    if (m->rope && same)
        tsr_handle_unregister(m->rope);
    tsr__trainer_free(&m->train, same);
    tsr__params_free(&m->params);
    free(m->names);
    free(m->lp);
    free(m->la);
    free(m->slot);
    free(m);
}

int tsr_llama_free(tsr_llama_t *m)
{
    if (!m)
        return TSR_OK;
    if (!tsr__registry_find(&live, m, 1))
        return tsr__fail(TSR_EINVAL, "llama_free: %p is not a live model (freed already, or "
                                     "never created)", (void *)m);
    destroy(m);
    return TSR_OK;
}

static int resolve_tiles(tsr_llama_t *m)
{
    tsr_llama_config_t *c = &m->cfg;
    /* one channel tile: Llama's RMSNorm and fused grouped-query attention
     * read whole columns (docs/llama.md) */
    tsr__tiling_t t = {c->tile_tokens, c->tile_vocab, c->tile_hidden, m->C};
    TSR_TRY(tsr__tiling_resolve(&t, "llama", m->C, m->C / c->heads, m->F, c->vocab_size, m->B,
                                m->T, 0.0));
    c->tile_tokens = t.tokens;
    c->tile_vocab = t.vocab;
    c->tile_hidden = t.hidden;
    return TSR_OK;
}

/* The parameters' element count, from the shape alone: the embedding and
 * (untied) the head V C each; per layer q, k, v (C Q), o_proj (Hq C), the
 * SwiGLU MLP (3 C F) and two RMSNorm weights (2 C); the final norm C. */
static double numel_of(const tsr_llama_t *m)
{
    double C = m->C, V = m->cfg.vocab_size, L = m->cfg.layers;
    double per_layer = C * m->Q + (double)m->Hq * C + 3.0 * C * m->F + 2.0 * C;
    return V * C * (m->cfg.tie_embeddings ? 1.0 : 2.0) + L * per_layer + C;
}

/* cfg.wave 0: the wave size for this model under the running runtime
 * (nn/wave.h), as GPT-2's: the weights are p and g (and the bf16 copy), the
 * state adds the moments, and a slot holds (in (rows, N) floats):
 * - each layer's input and the last one's output, and d: (L + 2) C;
 * - one layer's activations with recompute (ln1, res1, ln2: 3 C; qkv Q; the
 *   attention output twice, 2 Hq; gate, up, h: 3 F), every layer's
 *   without;
 * - its backward's gradients: dln C, dh, dgate, dup 3 F, dqkv Q, dyb Hq.
 * Returns the bytes of the state and a wave's slots (for the trainer). */
static double resolve_wave(tsr_llama_t *m)
{
    tsr_llama_config_t *c = &m->cfg;
    double C = m->C, L = c->layers, N = m->N, numel = numel_of(m);
    double weight = numel * (bf16(m) ? 10.0 : 8.0), state = weight + 8.0 * numel;
    double block = 3.0 * C + m->Q + 2.0 * m->Hq + 3.0 * m->F;
    double back = C + 3.0 * m->F + m->Q + m->Hq;
    double slot = 4.0 * N * ((L + 2.0) * C + (c->recompute ? 1.0 : L) * block + back);
    if (c->wave == 0)
        c->wave = tsr__wave_auto(weight, state, slot);
    m->slots = c->wave;
    m->wave_window = tsr__wave_window(weight);
    return state + m->slots * slot;
}

/* Resolve the tiles and the wave, check every tensor (dry run), then make
 * them. */
static int build(tsr_llama_t *m)
{
    TSR_TRY(resolve_tiles(m));
    double footprint = resolve_wave(m);
    m->build = (tsr__build_t){.model = "llama", .dry = 1};
    TSR_TRY(make_params(m));
    TSR_TRY(make_acts(m));
    m->build = (tsr__build_t){.model = "llama", .dry = 0};
    TSR_TRY(make_params(m));
    TSR_TRY(make_acts(m));
    TSR_TRY(make_rope(m));
    m->params.grads_zero = 1;
    m->params.bf16_stale = bf16(m);
    TSR_TRY(tsr__trainer_init(&m->train, &m->params, "llama", m->cfg.data_parallel, m->cfg.zero,
                              footprint));
    return tsr__registry_add(&live, m)
               ? tsr__fail(TSR_ENOMEM, "llama_create: no memory for the model registry")
               : TSR_OK;
}

int tsr_llama_create(tsr_llama_t **out, const tsr_llama_config_t *cfg, int batch, int seq_len)
{
    if (out)
        *out = NULL;
    if (!out || !cfg)
        return tsr__fail(TSR_EINVAL, "llama_create: NULL argument");
    TSR_TRY(check_config(cfg, batch, seq_len));
    if (!tsr__runtime_instance())
        return tsr__fail(TSR_ESTATE, "llama_create: the runtime is not initialized (tsr_init)");
    tsr_llama_t *m = calloc(1, sizeof *m);
    if (!m)
        return tsr__fail(TSR_ENOMEM, "llama_create: out of memory");
    m->runtime = tsr__runtime_instance();
    m->cfg = *cfg;
    to_hf(cfg, &m->hf);
    m->cfg.head_dim = m->hf.head_dim;
    m->params.model = "llama";
    m->params.bf16 = cfg->precision == TSR_GPT2_BF16;
    m->B = batch;
    m->T = seq_len;
    m->N = batch * seq_len;
    m->C = cfg->hidden;
    m->D = m->cfg.head_dim;
    m->Hq = cfg->heads * m->D;
    m->Hkv = cfg->kv_heads * m->D;
    m->Q = m->Hq + 2 * m->Hkv;
    m->F = cfg->intermediate;
    int rc = build(m);
    if (rc) {
        destroy(m);
        return rc;
    }
    *out = m;
    return TSR_OK;
}

/* ---- getters, parameters by name ----------------------------------------- */

const tsr_llama_config_t *tsr_llama_config(const tsr_llama_t *m)
{
    return model_live(m, "llama_config") ? &m->cfg : NULL;
}

size_t tsr_llama_num_params(const tsr_llama_t *m)
{
    return model_live(m, "llama_num_params") ? tsr__params_numel(&m->params) : 0;
}

int tsr_llama_steps_done(const tsr_llama_t *m)
{
    return model_live(m, "llama_steps_done") ? m->train.steps : 0;
}

int tsr_llama_param_count(const tsr_llama_t *m)
{
    return model_live(m, "llama_param_count") ? m->nnames : 0;
}

const char *tsr_llama_param_name(const tsr_llama_t *m, int i)
{
    if (!model_live(m, "llama_param_name"))
        return NULL;
    return i >= 0 && i < m->nnames ? m->names[i].name : NULL;
}

static const llama_name_t *find_name(const tsr_llama_t *m, const char *name)
{
    for (int i = 0; name && i < m->nnames; i++)
        if (!strcmp(m->names[i].name, name))
            return &m->names[i];
    return NULL;
}

/* A named tensor: the whole parameter, or (q, k, v) a range of the fused
 * qkv's dense array, read whole and (writing) written back whole. */
static int param_access(tsr_llama_t *m, const char *name, int which, float *ptr, size_t *numel,
                        size_t given, int write)
{
    const char *fn = write ? "llama_set" : "llama_get";
    TSR_TRY(model_check(m, fn));
    const llama_name_t *n = find_name(m, name);
    if (!n)
        return tsr__fail(TSR_ENOTFOUND, "llama: no parameter named '%s'",
                         name ? name : "(null)");
    param_t *p = &m->params.p[n->param];
    size_t whole = tsr__tensor_numel(&p->p);
    if (n->numel == whole)
        return tsr__params_access(&m->params, fn, p->name, which, ptr, numel, given, write);
    if (which < TSR_GPT2_PARAM || which > TSR_GPT2_ADAM_V)
        return tsr__fail(TSR_EINVAL, "llama: unknown parameter part %d", which);
    if (numel)
        *numel = n->numel;
    if (!ptr)
        return write ? tsr__fail(TSR_EINVAL, "%s: NULL data for %s", fn, name) : TSR_OK;
    if (write && given != n->numel)
        return tsr__fail(TSR_EINVAL, "%s: %s has %zu elements, %zu given", fn, name, n->numel,
                         given);
    float *all = malloc(whole * sizeof *all);
    if (!all)
        return tsr__fail(TSR_ENOMEM, "%s: no memory for %s", fn, p->name);
    int rc = tsr__params_access(&m->params, fn, p->name, which, all, NULL, 0, 0);
    if (!rc && !write)
        memcpy(ptr, all + n->offset, n->numel * sizeof *ptr);
    if (!rc && write) {
        memcpy(all + n->offset, ptr, n->numel * sizeof *ptr);
        rc = tsr__params_access(&m->params, fn, p->name, which, all, NULL, whole, 1);
    }
    free(all);
    return rc;
}

int tsr_llama_get(tsr_llama_t *m, const char *name, int which, float *ptr, size_t *numel)
{
    return param_access(m, name, which, ptr, numel, 0, 0);
}

int tsr_llama_set(tsr_llama_t *m, const char *name, int which, const float *ptr, size_t numel)
{
    return param_access(m, name, which, (float *)ptr, NULL, numel, 1);
}

/* transformers' initialisation: matrices ~ N(0, 0.02^2), norm weights 1 */
int tsr_llama_init_weights(tsr_llama_t *m, uint64_t seed)
{
    TSR_TRY(model_check(m, "llama_init_weights"));
    m->params.bf16_stale = bf16(m);
    for (int i = 0; i < m->params.n; i++) {
        param_t *p = &m->params.p[i];
        size_t n = tsr__tensor_numel(&p->p);
        float *buf = malloc(n * sizeof *buf);
        if (!buf)
            return tsr__fail(TSR_ENOMEM, "llama_init: no memory for %s", p->name);
        uint64_t s = seed ^ (0x51ed270b27ull * (uint64_t)(i + 1));
        for (size_t k = 0; k < n; k++)
            buf[k] = p->decay ? (float)(tsr__params_normal(&s) * 0.02) : 1.0f;
        int rc = tsr__tensor_write(&p->p, buf, (size_t)p->p.rows);
        free(buf);
        if (rc)
            return rc;
    }
    return TSR_OK;
}

/* ---- the passes ----------------------------------------------------------- */

/* The activations of layer l of slot s (its input x aside): its own, or
 * with cfg.recompute the one set every layer of the slot shares. */
static llama_layer_acts_t *block_acts(tsr_llama_t *m, int l, int s)
{
    return &m->la[s * m->cfg.layers + (m->cfg.recompute ? 0 : l)];
}

/* The input (C, N) of layer l of slot s; l = layers: the last layer's output. */
static tsr_tensor_t *block_in(tsr_llama_t *m, int l, int s)
{
    return l < m->cfg.layers ? &m->la[s * m->cfg.layers + l].x : &m->slot[s].xL;
}

/* y = W^T x (beta 0) or y += W^T x (beta 1): a projection, W (in, out) */
static int proj_fwd(const param_t *w, const tsr_tensor_t *x, float beta, tsr_tensor_t *y)
{
    return tsr__op_gemm(OP_T, OP_N, 1.0f, tsr__params_wmat(w), x, 0.0f + beta, y, TSR_RW);
}

/* Its backward: dx = W dy (beta 0) or dx += W dy (beta 1), and dW += x dy^T
 * (COMMUTE over token tiles); dy is the bf16 copy in bf16 precision. */
static int proj_bwd(param_t *w, const tsr_tensor_t *x, const tsr_tensor_t *dy, float beta,
                    tsr_tensor_t *dx)
{
    TSR_TRY(tsr__op_gemm(OP_N, OP_N, 1.0f, tsr__params_wmat(w), dy, beta, dx, TSR_RW));
    return tsr__op_gemm(OP_N, OP_T, 1.0f, x, dy, 1.0f, &w->g, TSR_COMMUTE);
}

/* out = RMSNorm(x) w (bf16 in bf16 precision, through the scratch) */
static int norm_fwd(tsr_llama_t *m, const tsr_tensor_t *x, const param_t *w, tsr_tensor_t *out,
                    tsr_tensor_t *rstd)
{
    float eps = (float)m->cfg.rms_norm_eps;
    return bf16(m) ? tsr__op_rmsnorm_fwd_bf16(x, &w->p, eps, out, rstd, m->scratch)
                   : tsr__op_rmsnorm_fwd(x, &w->p, eps, out, rstd);
}

/* d += RMSNorm'(dln) and dw += ...; bf16 precision with to16: d16 =
 * bf16(d) (d16 NULL: none) */
static int norm_bwd(tsr_llama_t *m, const tsr_tensor_t *dln, const tsr_tensor_t *x, param_t *w,
                    const tsr_tensor_t *rstd, tsr_tensor_t *d, tsr_tensor_t *d16)
{
    if (bf16(m) && d16)
        return tsr__op_rmsnorm_bwd_bf16(dln, x, &w->p, rstd, d, d16, &w->g);
    return tsr__op_rmsnorm_bwd(dln, x, &w->p, rstd, d, &w->g);
}

/* The attention's fp32 output: yb itself in fp32, atty in bf16 */
static tsr_tensor_t *att_out(tsr_llama_t *m, llama_layer_acts_t *a)
{
    return bf16(m) ? &a->atty : &a->yb;
}

/* Each step of a layer below runs for slots 0 .. k-1 before the next step:
 * in a wave, one weight matrix's tasks for every micro-batch in a row, while
 * its tiles are where they are used (k = 1: one micro-batch). */
#define FOR_SLOTS(k) for (int s = 0; s < (k); s++)

/* One decoder layer of slots 0 .. k-1, transformers' order:
 *   res1  = x + o_proj(attention(rope(qkv_proj(rmsnorm_1(x)))))
 *   x_out = res1 + down(silu(gate(rmsnorm_2(res1))) * up(rmsnorm_2(res1)))   (layer l+1's x)
 * keep: the activations stay for backward (else each is dropped after its
 * last reader here). rerun: the re-run at the start of the layer's
 * backward, without the output (no forward task accumulates in any order,
 * so the activations are bitwise those of the forward). */
static int block_forward(tsr_llama_t *m, int l, int k, int keep, int rerun)
{
    llama_layer_params_t *p = &m->lp[l];
    int H = m->cfg.heads, KV = m->cfg.kv_heads, T = m->T, discard = !keep;
    /* attention */
    FOR_SLOTS(k) {
        llama_layer_acts_t *a = block_acts(m, l, s);
        TSR_TRY(norm_fwd(m, block_in(m, l, s), p->ln1, &a->ln1, &a->rstd1));      /* (C, N) */
        TSR_TRY(TSR_DROP_IF(discard, &a->rstd1));
    }
    FOR_SLOTS(k) {
        llama_layer_acts_t *a = block_acts(m, l, s);
        TSR_TRY(proj_fwd(p->qkv, &a->ln1, 0.0f, &a->qkv));                         /* (Q, N) */
        TSR_TRY(TSR_DROP_IF(discard, &a->ln1));
    }
    FOR_SLOTS(k) {
        llama_layer_acts_t *a = block_acts(m, l, s);
        TSR_TRY(tsr__op_rope_qk_fwd(&a->qkv, H, KV, m->D, T, 0, m->rope));        /* q, k rotated */
        TSR_TRY(tsr__op_attention_gqa_fwd(&a->qkv, H, KV, T, bf16(m), &m->att_ms, &m->att_acc,
                                          att_out(m, a), &a->att_lse)); /* (Hq, N); (H, N) */
        TSR_TRY(TSR_DROP_IF(discard, &a->qkv, &a->att_lse));
        if (bf16(m)) {
            TSR_TRY(tsr__op_convert(&a->atty, &a->yb));
            TSR_TRY(TSR_DROP_IF(discard, &a->atty));
        }
        TSR_TRY(tsr__op_copy(block_in(m, l, s), &a->res1));                        /* (C, N) */
    }
    FOR_SLOTS(k) {
        llama_layer_acts_t *a = block_acts(m, l, s);
        TSR_TRY(proj_fwd(p->o, &a->yb, 1.0f, &a->res1));                           /* += Wo^T y */
        TSR_TRY(TSR_DROP_IF(discard, &a->yb));
    }
    /* MLP */
    FOR_SLOTS(k) {
        llama_layer_acts_t *a = block_acts(m, l, s);
        TSR_TRY(norm_fwd(m, &a->res1, p->ln2, &a->ln2, &a->rstd2));                /* (C, N) */
        TSR_TRY(TSR_DROP_IF(discard, &a->rstd2));
    }
    FOR_SLOTS(k) {
        llama_layer_acts_t *a = block_acts(m, l, s);
        TSR_TRY(proj_fwd(p->gate, &a->ln2, 0.0f, &a->gate));                       /* (F, N) */
    }
    FOR_SLOTS(k) {
        llama_layer_acts_t *a = block_acts(m, l, s);
        TSR_TRY(proj_fwd(p->up, &a->ln2, 0.0f, &a->up));                           /* (F, N) */
        TSR_TRY(TSR_DROP_IF(discard, &a->ln2));
        TSR_TRY(bf16(m) ? tsr__op_swiglu_fwd_bf16(&a->gate, &a->up, &a->h, m->scratch)
                        : tsr__op_swiglu_fwd(&a->gate, &a->up, &a->h));            /* (F, N) */
        TSR_TRY(TSR_DROP_IF(discard, &a->gate, &a->up));
    }
    if (rerun)
        return TSR_OK;
    FOR_SLOTS(k) {
        llama_layer_acts_t *a = block_acts(m, l, s);
        tsr_tensor_t *x_out = block_in(m, l + 1, s);
        TSR_TRY(tsr__op_copy(&a->res1, x_out));                                    /* (C, N) */
        TSR_TRY(TSR_DROP_IF(discard, &a->res1));
        TSR_TRY(proj_fwd(p->down, &a->h, 1.0f, x_out));                            /* += Wd^T h */
        TSR_TRY(TSR_DROP_IF(discard, &a->h));
    }
    return TSR_OK;
}

/* The phases of one micro-batch in slot s (nn/wave.h). tokens and targets
 * have been checked (tsr__trainer_check_batch). */

/* slot s's tokens (1, N) -> layer 0's input (C, N) */
static int phase_embed(void *mp, int s, const int32_t *tokens)
{
    tsr_llama_t *m = mp;
    TSR_TRY(tsr__params_refresh_stale(&m->params));
    TSR_TRY(tsr__tensor_write(&m->slot[s].tokens, tokens, 1));                     /* (1, N) */
    return tsr__op_embed_fwd(&m->slot[s].tokens, &m->embed->p, NULL, m->T,
                             block_in(m, 0, s));                                  /* (C, N) */
}

/* layer l of slots 0 .. k-1: each input -> the next layer's input (C, N);
 * with recomputation only each layer's input stays */
static int phase_block_fwd(void *mp, int l, int k)
{
    tsr_llama_t *m = mp;
    return block_forward(m, l, k, !m->cfg.recompute, 0);
}

/* The head of slot s: the final norm, the logits and, with targets
 * (ntargets of them), the per-token losses (1, N) and the replicas' target
 * count. */
static int phase_head_fwd(tsr_llama_t *m, int s, const int32_t *targets, int ntargets)
{
    llama_slot_t *sl = &m->slot[s];
    m->have_logits = m->have_targets = m->have_loss = 0;
    TSR_TRY(norm_fwd(m, &sl->xL, m->norm, &m->lnf, &m->rstdf));                    /* (C, N) */
    TSR_TRY(proj_fwd(m->head, &m->lnf, 0.0f, &m->logits));                         /* (V, N) */
    m->have_logits = 1;
    if (!targets)
        return TSR_OK;
    TSR_TRY(tsr__tensor_write(&sl->targets, targets, 1));                          /* (1, N) */
    TSR_TRY(tsr__op_xent_fwd(&m->logits, &sl->targets, &m->ce_ms, &m->ce_lse, &sl->ce_loss));
                                                                                   /* (1, N) */
    m->have_targets = m->have_loss = 1;
    m->loss_slot = s;
    return tsr__trainer_targets(&m->train, ntargets);
}

/* The head's backward of slot s (after its phase_head_fwd with targets):
 * the loss's gradient, scaled, through the logits and the final norm into
 * slot s's d (C, N). */
static int phase_head_bwd(tsr_llama_t *m, int s, float scale)
{
    llama_slot_t *sl = &m->slot[s];
    m->have_targets = 0;
    m->params.grads_zero = 0;
    m->have_logits = 0; /* the logits become their gradient */
    float dscale;
    TSR_TRY(tsr__trainer_grad_scale(&m->train, scale, &dscale));
    int b16 = bf16(m);
    tsr_tensor_t *dlogits = b16 ? &m->dlogits16 : &m->logits;
    TSR_TRY(b16 ? tsr__op_xent_bwd_bf16(&m->logits, &sl->targets, &m->ce_lse, dscale,
                                    &m->dlogits16, m->scratch)
            : tsr__op_xent_bwd(&m->logits, &sl->targets, &m->ce_lse, dscale));  /* (V, N) */
    if (b16)
        TSR_TRY(TSR_DROP(&m->logits));
    TSR_TRY(proj_bwd(m->head, &m->lnf, dlogits, 0.0f, &m->dln));                   /* (C, N) */
    TSR_TRY(TSR_DROP(dlogits, &m->lnf, &m->ce_ms, &m->ce_lse));
    TSR_TRY(tsr__op_fill(&sl->d, 0.0f));                                           /* (C, N) */
    TSR_TRY(norm_bwd(m, &m->dln, &sl->xL, m->norm, &m->rstdf, &sl->d, &sl->d16));  /* d += */
    return TSR_DROP(&sl->xL, &m->rstdf, &m->dln);
}

/* Layer l's backward of slots 0 .. k-1; each slot's d holds dL/dx_out on
 * entry (and d16 its bf16 copy in bf16 precision), dL/dx on return. With
 * recomputation the layer's forward first runs again from the kept inputs. */
static int phase_block_bwd(void *mp, int l, int k)
{
    tsr_llama_t *m = mp;
    llama_layer_params_t *p = &m->lp[l];
    int H = m->cfg.heads, KV = m->cfg.kv_heads, T = m->T, b16 = bf16(m);
    if (m->cfg.recompute)
        TSR_TRY(block_forward(m, l, k, 1, 1)); /* ln1 … h of layer l, (C..F, N) */
    /* MLP: x_out = res1 + Wd^T h, h = silu(Wg^T ln2) * (Wu^T ln2) */
    FOR_SLOTS(k) {
        llama_layer_acts_t *a = block_acts(m, l, s);
        llama_slot_t *sl = &m->slot[s];
        TSR_TRY(proj_bwd(p->down, &a->h, b16 ? &sl->d16 : &sl->d, 0.0f, &sl->dh)); /* (F, N) */
        TSR_TRY(TSR_DROP(&a->h));
        TSR_TRY(b16 ? tsr__op_swiglu_bwd_bf16(&a->gate, &a->up, &sl->dh, &sl->dgate16,
                                              &sl->dup16, m->scratch)
                    : tsr__op_swiglu_bwd(&a->gate, &a->up, &sl->dh, &sl->dgate, &sl->dup));
                                                                                   /* (F, N) */
        TSR_TRY(TSR_DROP(&a->gate, &a->up, &sl->dh));
    }
    FOR_SLOTS(k) {
        llama_layer_acts_t *a = block_acts(m, l, s);
        llama_slot_t *sl = &m->slot[s];
        const tsr_tensor_t *dg = b16 ? &sl->dgate16 : &sl->dgate;
        TSR_TRY(proj_bwd(p->gate, &a->ln2, dg, 0.0f, &sl->dln));                   /* (C, N) */
        TSR_TRY(TSR_DROP(dg));
    }
    FOR_SLOTS(k) {
        llama_layer_acts_t *a = block_acts(m, l, s);
        llama_slot_t *sl = &m->slot[s];
        const tsr_tensor_t *du = b16 ? &sl->dup16 : &sl->dup;
        TSR_TRY(proj_bwd(p->up, &a->ln2, du, 1.0f, &sl->dln));                     /* += */
        TSR_TRY(TSR_DROP(&a->ln2, du));
        TSR_TRY(norm_bwd(m, &sl->dln, &a->res1, p->ln2, &a->rstd2, &sl->d, &sl->d16)); /* d += */
        TSR_TRY(TSR_DROP(&a->res1, &a->rstd2, &sl->dln));
    }
    /* attention: res1 = x + Wo^T attention(rope(Wqkv^T ln1)) */
    FOR_SLOTS(k) {
        llama_layer_acts_t *a = block_acts(m, l, s);
        llama_slot_t *sl = &m->slot[s];
        TSR_TRY(proj_bwd(p->o, &a->yb, b16 ? &sl->d16 : &sl->d, 0.0f, &sl->dyb));  /* (Hq, N) */
        if (b16) /* in fp32, yb is the attention output its backward reads */
            TSR_TRY(TSR_DROP(&a->yb, &sl->d16));
    }
    FOR_SLOTS(k) {
        llama_layer_acts_t *a = block_acts(m, l, s);
        llama_slot_t *sl = &m->slot[s];
        TSR_TRY(tsr__op_attention_gqa_bwd(&a->qkv, H, KV, T, b16, att_out(m, a), &sl->dyb,
                                          &a->att_lse, &m->att_D, &sl->dqkv));   /* (Q, N) */
        TSR_TRY(TSR_DROP(att_out(m, a), &a->att_lse, &a->qkv, &sl->dyb, &m->att_D));
        TSR_TRY(tsr__op_rope_qk_bwd(&sl->dqkv, H, KV, m->D, T, 0, m->rope)); /* before RoPE */
        if (b16) {
            TSR_TRY(tsr__op_convert(&sl->dqkv, &sl->dqkv16));
            TSR_TRY(TSR_DROP(&sl->dqkv));
        }
    }
    FOR_SLOTS(k) {
        llama_layer_acts_t *a = block_acts(m, l, s);
        llama_slot_t *sl = &m->slot[s];
        const tsr_tensor_t *dq = b16 ? &sl->dqkv16 : &sl->dqkv;
        TSR_TRY(proj_bwd(p->qkv, &a->ln1, dq, 0.0f, &sl->dln));                    /* (C, N) */
        TSR_TRY(TSR_DROP(&a->ln1, dq));
    }
    /* d16 for layer l-1's first projection backward; layer 0's d goes to
     * the embedding only */
    FOR_SLOTS(k) {
        llama_layer_acts_t *a = block_acts(m, l, s);
        llama_slot_t *sl = &m->slot[s];
        tsr_tensor_t *x = block_in(m, l, s);
        TSR_TRY(norm_bwd(m, &sl->dln, x, p->ln1, &a->rstd1, &sl->d,
                         l > 0 ? &sl->d16 : NULL));                                /* d += */
        TSR_TRY(TSR_DROP(x, &a->rstd1, &sl->dln));
    }
    return TSR_OK;
}

/* The embedding's backward of slot s: (C, V) += the scatter of d */
static int phase_embed_bwd(void *mp, int s)
{
    tsr_llama_t *m = mp;
    llama_slot_t *sl = &m->slot[s];
    TSR_TRY(tsr__op_embed_bwd(&sl->tokens, &sl->d, m->T, &m->embed->g, NULL));     /* (C, V) */
    return TSR_DROP(&sl->d, &sl->targets);
}

int tsr_llama_forward(tsr_llama_t *m, const int32_t *tokens, const int32_t *targets,
                      float *loss)
{
    TSR_TRY(model_check(m, "llama_forward"));
    int ntargets;
    TSR_TRY(tsr__trainer_check_batch("llama_forward", tokens, targets, m->N,
                                     m->cfg.vocab_size, &ntargets));
    m->have_logits = m->have_targets = m->have_loss = 0;
    TSR_TRY(phase_embed(m, 0, tokens));
    for (int l = 0; l < m->cfg.layers; l++)
        TSR_TRY(phase_block_fwd(m, l, 1));
    TSR_TRY(phase_head_fwd(m, 0, targets, ntargets));
    return loss && targets ? tsr_llama_loss(m, loss) : TSR_OK;
}

int tsr_llama_loss(tsr_llama_t *m, float *loss)
{
    TSR_TRY(model_check(m, "llama_loss"));
    return tsr__trainer_loss(&m->train, "llama_loss", m->have_loss,
                             &m->slot[m->loss_slot].ce_loss, loss);
}

int tsr_llama_logits(tsr_llama_t *m, int b, int t, float *out)
{
    TSR_TRY(model_check(m, "llama_logits"));
    return tsr__trainer_logits("llama_logits", &m->logits, m->have_logits, m->B, m->T, b, t,
                               out);
}

int tsr_llama_backward(tsr_llama_t *m, float scale)
{
    TSR_TRY(model_check(m, "llama_backward"));
    if (!m->have_targets)
        return tsr__fail(TSR_ESTATE, "llama_backward: the last forward had no targets");
    TSR_TRY(phase_head_bwd(m, 0, scale));
    for (int l = m->cfg.layers - 1; l >= 0; l--)
        TSR_TRY(phase_block_bwd(m, l, 1));
    return phase_embed_bwd(m, 0);
}

/* The head and the loss as nn/wave.h calls them (the other phases take
 * the model as void *) */
static int wave_head(void *mp, int s, const int32_t *targets, int ntargets, float scale)
{
    tsr_llama_t *m = mp;
    TSR_TRY(phase_head_fwd(m, s, targets, ntargets));
    TSR_TRY(tsr__trainer_count(&m->train, &m->slot[s].count)); /* for wave_loss */
    return phase_head_bwd(m, s, scale);
}
static int wave_loss(void *mp, int s, float *loss)
{
    tsr_llama_t *m = mp;
    return tsr__trainer_loss_of(&m->train, "llama_forward_backward", &m->slot[s].ce_loss,
                                m->slot[s].count, loss);
}

int tsr_llama_forward_backward(tsr_llama_t *m, int micro, const int32_t *tokens,
                               const int32_t *targets, float scale, float *losses)
{
    TSR_TRY(model_check(m, "llama_forward_backward"));
    tsr__wave_model_t w = {m, m->cfg.layers, m->slots, m->N, m->wave_window, phase_embed,
                           phase_block_fwd, wave_head, phase_block_bwd, phase_embed_bwd,
                           wave_loss};
    return tsr__wave_run(&w, "llama_forward_backward", m->cfg.vocab_size, micro, tokens,
                         targets, scale, losses);
}

int tsr_llama_zero_grad(tsr_llama_t *m)
{
    TSR_TRY(model_check(m, "llama_zero_grad"));
    return tsr__params_zero_grad(&m->params);
}

int tsr_llama_step(tsr_llama_t *m, const tsr_adamw_config_t *opt, float lr, float *grad_norm)
{
    TSR_TRY(model_check(m, "llama_step"));
    return tsr__trainer_step(&m->train, "llama_step", opt, lr, grad_norm);
}

/* ---- Hugging Face checkpoints --------------------------------------------- */

static int same_shape(const tsr__llama_config_t *a, const tsr__llama_config_t *b)
{
    return a->hidden_size == b->hidden_size && a->intermediate_size == b->intermediate_size &&
           a->num_hidden_layers == b->num_hidden_layers &&
           a->num_attention_heads == b->num_attention_heads &&
           a->num_key_value_heads == b->num_key_value_heads && a->head_dim == b->head_dim &&
           a->vocab_size == b->vocab_size && a->tie_word_embeddings == b->tie_word_embeddings;
}

int tsr_llama_load(tsr_llama_t *m, const char *dir)
{
    TSR_TRY(model_check(m, "llama_load"));
    if (!dir)
        return tsr__fail(TSR_EINVAL, "llama_load: NULL path");
    char file[4096];
    if (snprintf(file, sizeof file, "%s/config.json", dir) >= (int)sizeof file)
        return tsr__fail(TSR_EINVAL, "llama_load: path too long");
    tsr__llama_config_t h;
    TSR_TRY(tsr__llama_config_read(file, &h));
    if (!same_shape(&h, &m->hf))
        return tsr__fail(TSR_EINVAL, "llama_load: %s describes another shape (hidden %d, "
                                     "layers %d, heads %d/%d, head_dim %d, vocab %d, tied %d) "
                                     "than the model's (%d, %d, %d/%d, %d, %d, %d)", file,
                         h.hidden_size, h.num_hidden_layers, h.num_attention_heads,
                         h.num_key_value_heads, h.head_dim, h.vocab_size, h.tie_word_embeddings,
                         m->hf.hidden_size, m->hf.num_hidden_layers,
                         m->hf.num_attention_heads, m->hf.num_key_value_heads, m->hf.head_dim,
                         m->hf.vocab_size, m->hf.tie_word_embeddings);
    tsr__stset_t *s;
    TSR_TRY(tsr__stset_open(&s, dir));
    int rc = tsr__llama_check_set(&m->hf, s);
    /* every tensor is read before any is written: a read that fails leaves
     * the model as it was */
    float **data = calloc((size_t)m->nnames, sizeof *data);
    if (!rc && !data)
        rc = tsr__fail(TSR_ENOMEM, "llama_load: out of memory");
    for (int i = 0; !rc && i < m->nnames; i++) {
        const llama_name_t *n = &m->names[i];
        const tsr__stset_entry_t *e = tsr__stset_find(s, n->name);
        if (!(data[i] = malloc(n->numel * sizeof(float))))
            rc = tsr__fail(TSR_ENOMEM, "llama_load: no memory for %s", n->name);
        else
            rc = tsr__stset_read_f32(s, e, data[i], n->numel);
    }
    for (int i = 0; !rc && i < m->nnames; i++)
        rc = tsr_llama_set(m, m->names[i].name, TSR_GPT2_PARAM, data[i], m->names[i].numel);
    for (int i = 0; data && i < m->nnames; i++)
        free(data[i]);
    free(data);
    tsr__stset_close(s);
    if (!rc) { /* what a save writes back: the file's ids and dtype */
        m->hf.bos_token_id = h.bos_token_id;
        m->hf.n_eos = h.n_eos;
        memcpy(m->hf.eos_token_id, h.eos_token_id, sizeof h.eos_token_id);
        m->hf.torch_dtype = h.torch_dtype;
        memcpy(m->hf.model_type, h.model_type, sizeof h.model_type);
    }
    return rc;
}

int tsr_llama_save(tsr_llama_t *m, const char *dir, int dtype, size_t shard_bytes)
{
    TSR_TRY(model_check(m, "llama_save"));
    if (!dir)
        return tsr__fail(TSR_EINVAL, "llama_save: NULL path");
    if (dtype != TSR_GPT2_FP32 && dtype != TSR_GPT2_BF16)
        return tsr__fail(TSR_EINVAL, "llama_save: dtype must be TSR_GPT2_FP32 or "
                                     "TSR_GPT2_BF16, not %d", dtype);
    tsr__stset_writer_t *w;
    TSR_TRY(tsr__stset_writer_create(&w));
    float **data = calloc((size_t)m->nnames, sizeof *data);
    int rc = data ? TSR_OK : tsr__fail(TSR_ENOMEM, "llama_save: out of memory");
    for (int i = 0; !rc && i < m->nnames; i++) {
        const llama_name_t *n = &m->names[i];
        uint64_t shape[2] = {(uint64_t)n->rows, (uint64_t)n->cols};
        if (!(data[i] = malloc(n->numel * sizeof(float))))
            rc = tsr__fail(TSR_ENOMEM, "llama_save: no memory for %s", n->name);
        if (!rc)
            rc = tsr_llama_get(m, n->name, TSR_GPT2_PARAM, data[i], NULL);
        if (!rc)
            rc = tsr__stset_writer_add_f32(w, n->name,
                                           dtype == TSR_GPT2_BF16 ? TSR__ST_BF16 : TSR__ST_F32,
                                           n->cols ? 2 : 1, shape, data[i]);
    }
    if (!rc)
        rc = tsr__stset_writer_write(w, dir, shard_bytes);
    if (!rc) {
        tsr__llama_config_t h = m->hf;
        h.torch_dtype = dtype == TSR_GPT2_BF16 ? TSR__LLAMA_BF16 : TSR__LLAMA_F32;
        char file[4096];
        rc = snprintf(file, sizeof file, "%s/config.json", dir) >= (int)sizeof file
                 ? tsr__fail(TSR_EINVAL, "llama_save: path too long")
                 : tsr__llama_config_write(&h, file);
    }
    for (int i = 0; data && i < m->nnames; i++)
        free(data[i]);
    free(data);
    tsr__stset_writer_free(w);
    return rc;
}
