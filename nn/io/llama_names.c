/* nn/io/llama_names.c — Llama tensor names and shapes, and the set checker
 * (see llama_names.h). Must never read tensor data: names, shapes and
 * dtypes only. */
#include "nn/io/llama_names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"

static const char *const layer_suffix[TSR__LLAMA_PER_LAYER] = {
    "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
    "self_attn.o_proj.weight", "mlp.gate_proj.weight",    "mlp.up_proj.weight",
    "mlp.down_proj.weight",    "input_layernorm.weight",  "post_attention_layernorm.weight",
};

size_t tsr__llama_tensor_count(const tsr__llama_config_t *c)
{
    return 2 + (size_t)TSR__LLAMA_PER_LAYER * (size_t)c->num_hidden_layers +
           (c->tie_word_embeddings ? 0 : 1);
}

int tsr__llama_tensor(const tsr__llama_config_t *c, size_t i, tsr__llama_tensor_t *t)
{
    uint64_t H = (uint64_t)c->hidden_size, I = (uint64_t)c->intermediate_size,
             V = (uint64_t)c->vocab_size, D = (uint64_t)c->head_dim,
             Q = D * (uint64_t)c->num_attention_heads, K = D * (uint64_t)c->num_key_value_heads;
    size_t body = (size_t)TSR__LLAMA_PER_LAYER * (size_t)c->num_hidden_layers;
    if (i >= tsr__llama_tensor_count(c))
        return tsr__fail(TSR_EINVAL, "llama tensor %zu: out of range", i);
    memset(t, 0, sizeof *t);
    if (i == 0) {
        *t = (tsr__llama_tensor_t){.ndim = 2, .shape = {V, H}, .name = "model.embed_tokens.weight"};
    } else if (i <= body) {
        size_t layer = (i - 1) / TSR__LLAMA_PER_LAYER, k = (i - 1) % TSR__LLAMA_PER_LAYER;
        static const int rows[TSR__LLAMA_PER_LAYER] = {'Q', 'K', 'K', 'H', 'I', 'I', 'H', 'H', 'H'};
        static const int cols[TSR__LLAMA_PER_LAYER] = {'H', 'H', 'H', 'Q', 'H', 'H', 'I', 0, 0};
        uint64_t dims[2];
        const int *which[2] = {rows, cols};
        for (int d = 0; d < 2; d++)
            switch (which[d][k]) {
            case 'Q': dims[d] = Q; break;
            case 'K': dims[d] = K; break;
            case 'I': dims[d] = I; break;
            default: dims[d] = H;
            }
        t->ndim = cols[k] ? 2 : 1;
        t->shape[0] = dims[0];
        t->shape[1] = cols[k] ? dims[1] : 0;
        snprintf(t->name, sizeof t->name, "model.layers.%zu.%s", layer, layer_suffix[k]);
    } else if (i == body + 1) {
        *t = (tsr__llama_tensor_t){.ndim = 1, .shape = {H}, .name = "model.norm.weight"};
    } else {
        *t = (tsr__llama_tensor_t){.ndim = 2, .shape = {V, H}, .name = "lm_head.weight"};
    }
    return TSR_OK;
}

static void shape_str(char *buf, size_t n, int ndim, const uint64_t *d)
{
    int w = snprintf(buf, n, "[");
    for (int i = 0; i < ndim && w > 0 && (size_t)w < n; i++)
        w += snprintf(buf + w, n - (size_t)w, i ? ", %llu" : "%llu", (unsigned long long)d[i]);
    if (w > 0 && (size_t)w < n)
        snprintf(buf + w, n - (size_t)w, "]");
}

/* "model.layers.<N>.self_attn.rotary_emb.inv_freq" */
static int is_inv_freq(const char *name)
{
    static const char pre[] = "model.layers.", suf[] = ".self_attn.rotary_emb.inv_freq";
    if (strncmp(name, pre, sizeof pre - 1) != 0)
        return 0;
    const char *p = name + sizeof pre - 1, *d = p;
    while (*p >= '0' && *p <= '9')
        p++;
    return p != d && !strcmp(p, suf);
}

static int by_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int tsr__llama_check_set(const tsr__llama_config_t *c, const tsr__stset_t *s)
{
    int rc = tsr__llama_config_validate(c, "llama checkpoint");
    if (rc)
        return rc;
    size_t n = tsr__llama_tensor_count(c);
    tsr__llama_tensor_t t;
    /* missing, then misshapen, in transformers' order */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i++) {
            tsr__llama_tensor(c, i, &t);
            const tsr__stset_entry_t *e = tsr__stset_find(s, t.name);
            if (pass == 0 && !e)
                return tsr__fail(TSR_EINVAL, "llama checkpoint: tensor %s is missing%s", t.name,
                                 strcmp(t.name, "lm_head.weight")
                                     ? ""
                                     : " (tie_word_embeddings is false)");
            if (pass == 0)
                continue;
            int same = e->t->ndim == t.ndim;
            for (int d = 0; same && d < t.ndim; d++)
                same = e->t->shape[d] == t.shape[d];
            if (!same) {
                char got[160], want[64];
                shape_str(got, sizeof got, e->t->ndim, e->t->shape);
                shape_str(want, sizeof want, t.ndim, t.shape);
                return tsr__fail(TSR_EINVAL, "llama checkpoint: tensor %s has shape %s, the "
                                 "config implies %s", t.name, got, want);
            }
            tsr__st_dtype_t dt = e->t->dtype;
            if (dt != TSR__ST_F32 && dt != TSR__ST_BF16 && dt != TSR__ST_F16 &&
                dt != TSR__ST_F64)
                return tsr__fail(TSR_EINVAL, "llama checkpoint: tensor %s has dtype %s, not "
                                 "F32/BF16/F16/F64", t.name, tsr__st_dtype_name(dt));
        }
    /* extras: the first (by name) that the config does not imply */
    char **names = malloc((n + 1) * sizeof *names);
    char *store = malloc((n + 1) * TSR__LLAMA_NAME_MAX);
    if (!names || !store) {
        free(names), free(store);
        return tsr__fail(TSR_ENOMEM, "llama checkpoint: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        tsr__llama_tensor(c, i, &t);
        names[i] = store + i * TSR__LLAMA_NAME_MAX;
        memcpy(names[i], t.name, TSR__LLAMA_NAME_MAX);
    }
    qsort(names, n, sizeof *names, by_str);
    for (size_t i = 0; !rc && i < tsr__stset_count(s); i++) {
        const char *name = tsr__stset_at(s, i)->name;
        if (is_inv_freq(name) || bsearch(&name, names, n, sizeof *names, by_str))
            continue;
        if (!strcmp(name, "lm_head.weight"))
            rc = tsr__fail(TSR_EINVAL, "llama checkpoint: tensor lm_head.weight is present, but "
                           "tie_word_embeddings is true");
        else
            rc = tsr__fail(TSR_EINVAL, "llama checkpoint: unexpected tensor %.200s (the config "
                           "has %d layers)", name, c->num_hidden_layers);
    }
    free(names), free(store);
    return rc;
}
