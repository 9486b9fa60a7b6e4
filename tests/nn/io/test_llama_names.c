/* Llama tensor names and shapes on a small config (6 heads, 2 kv heads,
 * head_dim 6, an odd intermediate size): the table, then the checker on a
 * set written with exactly these (accepted), and with one tensor missing,
 * misshapen, of an integer dtype, extra, or lm_head beside tied embeddings
 * (each refused naming the tensor); old rotary buffers are passed over. */
#include "io_util.h"
#include "nn/io/llama_names.h"
#include "runtime/error.h"

static tsr__llama_config_t small(int tied)
{
    tsr__llama_config_t c;
    tsr__llama_config_defaults(&c);
    c.hidden_size = 36, c.intermediate_size = 37, c.num_hidden_layers = 2;
    c.num_attention_heads = 6, c.num_key_value_heads = 2, c.head_dim = 6;
    c.vocab_size = 11, c.tie_word_embeddings = tied;
    c.eos_token_id[0] = 2;
    return c;
}

Test(llama_names, table_of_names_and_shapes)
{
    tsr__llama_config_t c = small(0);
    cr_assert_eq(tsr__llama_config_validate(&c, "t"), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr__llama_tensor_count(&c), 21);
    static const struct {
        const char *name;
        int ndim;
        uint64_t d0, d1;
    } want[] = {
        {"model.embed_tokens.weight", 2, 11, 36},
        {"model.layers.0.self_attn.q_proj.weight", 2, 36, 36},
        {"model.layers.0.self_attn.k_proj.weight", 2, 12, 36},
        {"model.layers.0.self_attn.v_proj.weight", 2, 12, 36},
        {"model.layers.0.self_attn.o_proj.weight", 2, 36, 36},
        {"model.layers.0.mlp.gate_proj.weight", 2, 37, 36},
        {"model.layers.0.mlp.up_proj.weight", 2, 37, 36},
        {"model.layers.0.mlp.down_proj.weight", 2, 36, 37},
        {"model.layers.0.input_layernorm.weight", 1, 36, 0},
        {"model.layers.0.post_attention_layernorm.weight", 1, 36, 0},
        {"model.layers.1.self_attn.q_proj.weight", 2, 36, 36},
    };
    tsr__llama_tensor_t t;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        cr_assert_eq(tsr__llama_tensor(&c, i, &t), TSR_OK);
        cr_assert_str_eq(t.name, want[i].name);
        cr_assert_eq(t.ndim, want[i].ndim, "%s", t.name);
        cr_assert_eq(t.shape[0], want[i].d0, "%s", t.name);
        cr_assert_eq(t.shape[1], want[i].d1, "%s", t.name);
    }
    cr_assert_eq(tsr__llama_tensor(&c, 19, &t), TSR_OK);
    cr_assert_str_eq(t.name, "model.norm.weight");
    cr_assert_eq(tsr__llama_tensor(&c, 20, &t), TSR_OK);
    cr_assert_str_eq(t.name, "lm_head.weight");
    cr_assert_eq(t.shape[0], 11);
    cr_assert_eq(tsr__llama_tensor(&c, 21, &t), TSR_EINVAL);
    c = small(1);
    cr_assert_eq(tsr__llama_tensor_count(&c), 20);
    cr_assert_eq(tsr__llama_tensor(&c, 20, &t), TSR_EINVAL);
}

/* A set with c's tensors, except `skip`; `reshape` gets [1]; `extra` added;
 * `int_one` stored as I32. */
static void write_set(const char *dir, const tsr__llama_config_t *c, const char *skip,
                      const char *reshape, const char *extra, const char *int_one)
{
    static float zeros[36 * 37 * 2];
    tsr__stset_writer_t *w;
    cr_assert_eq(tsr__stset_writer_create(&w), TSR_OK);
    tsr__llama_tensor_t t;
    uint64_t one[1] = {1};
    for (size_t i = 0; i < tsr__llama_tensor_count(c); i++) {
        tsr__llama_tensor(c, i, &t);
        if (skip && !strcmp(t.name, skip))
            continue;
        int rs = reshape && !strcmp(t.name, reshape);
        int in = int_one && !strcmp(t.name, int_one);
        cr_assert_eq(tsr__stset_writer_add(w, t.name, in ? TSR__ST_I32 : TSR__ST_BF16,
                                           rs ? 1 : t.ndim, rs ? one : t.shape, zeros), TSR_OK);
    }
    if (extra)
        cr_assert_eq(tsr__stset_writer_add(w, extra, TSR__ST_F32, 1, one, zeros), TSR_OK);
    cr_assert_eq(tsr__stset_writer_write(w, dir, 1000), TSR_OK, "%s", tsr_error_message());
    tsr__stset_writer_free(w);
}

static int check(const char *dir, const tsr__llama_config_t *c)
{
    tsr__stset_t *s;
    cr_assert_eq(tsr__stset_open(&s, dir), TSR_OK, "%s", tsr_error_message());
    int rc = tsr__llama_check_set(c, s);
    tsr__stset_close(s);
    return rc;
}

static void refused(const char *dir, const tsr__llama_config_t *c, const char *needle)
{
    cr_assert_eq(check(dir, c), TSR_EINVAL, "%s", needle);
    cr_assert_not_null(strstr(tsr_error_message(), needle), "message \"%s\" lacks \"%s\"",
                       tsr_error_message(), needle);
}

Test(llama_names, checker)
{
    char dir[256];
    io_tmpdir(dir, sizeof dir);
    tsr__llama_config_t c = small(0), tied = small(1);
    write_set(dir, &c, NULL, NULL, NULL, NULL);
    cr_assert_eq(check(dir, &c), TSR_OK, "%s", tsr_error_message());
    refused(dir, &tied, "tensor lm_head.weight is present, but tie_word_embeddings is true");
    write_set(dir, &c, "lm_head.weight", NULL, NULL, NULL);
    refused(dir, &c, "tensor lm_head.weight is missing (tie_word_embeddings is false)");
    cr_assert_eq(check(dir, &tied), TSR_OK, "%s", tsr_error_message());
    write_set(dir, &c, "model.layers.1.mlp.up_proj.weight", "model.layers.0.mlp.up_proj.weight",
              NULL, NULL);
    refused(dir, &c, "tensor model.layers.1.mlp.up_proj.weight is missing");
    write_set(dir, &c, NULL, "model.layers.1.self_attn.k_proj.weight", NULL, NULL);
    refused(dir, &c, "tensor model.layers.1.self_attn.k_proj.weight has shape [1], the config "
                     "implies [12, 36]");
    write_set(dir, &c, NULL, NULL, NULL, "model.norm.weight");
    refused(dir, &c, "tensor model.norm.weight has dtype I32");
    write_set(dir, &c, NULL, NULL, "model.layers.2.input_layernorm.weight", NULL);
    refused(dir, &c, "unexpected tensor model.layers.2.input_layernorm.weight (the config has "
                     "2 layers)");
    write_set(dir, &c, NULL, NULL, "model.layers.1.self_attn.rotary_emb.inv_freq", NULL);
    cr_assert_eq(check(dir, &c), TSR_OK, "%s", tsr_error_message());
    /* the kv shapes follow num_key_value_heads */
    tsr__llama_config_t mha = small(0);
    mha.num_key_value_heads = 6;
    refused(dir, &mha, "tensor model.layers.0.self_attn.k_proj.weight has shape [12, 36], the "
                       "config implies [36, 36]");
    io_rmtree(dir);
}

/* The checkpoints the independent Python reference wrote
 * (tests/nn/fixtures/llama_tiny_*_init, tools/llama_reference.py, its own
 * safetensors writer): their config reads and validates, and their weights
 * pass the checker, for GQA, MQA and MHA; a weight read back equals the
 * expected fixture's copy of it (the reference stored the same init). */
Test(llama_names, the_reference_checkpoints_read_and_check)
{
    const char *root = getenv("TESSERA_SOURCE_ROOT");
    cr_assert(root, "TESSERA_SOURCE_ROOT is set by meson");
    const char *kinds[3] = {"gqa", "mqa", "mha"};
    const int kv[3] = {2, 1, 6};
    for (int k = 0; k < 3; k++) {
        char dir[4096], cfgp[4200];
        snprintf(dir, sizeof dir, "%s/tests/nn/fixtures/llama_tiny_%s_init", root, kinds[k]);
        snprintf(cfgp, sizeof cfgp, "%s/config.json", dir);
        tsr__llama_config_t c;
        cr_assert_eq(tsr__llama_config_read(cfgp, &c), TSR_OK, "%s: %s", cfgp,
                     tsr_error_message());
        cr_assert_eq(c.num_attention_heads, 6);
        cr_assert_eq(c.num_key_value_heads, kv[k], "%s", kinds[k]);
        tsr__stset_t *s = NULL;
        cr_assert_eq(tsr__stset_open(&s, dir), TSR_OK, "%s: %s", dir, tsr_error_message());
        cr_assert_eq(tsr__llama_check_set(&c, s), TSR_OK, "%s: %s", kinds[k],
                     tsr_error_message());
        const tsr__stset_entry_t *e = tsr__stset_find(s, "model.norm.weight");
        cr_assert(e);
        float w[96];
        cr_assert_eq(tsr__stset_read_f32(s, e, w, 96), TSR_OK, "%s", tsr_error_message());
        for (int i = 0; i < 96; i++)
            cr_assert(w[i] > 0.5f && w[i] < 1.5f, "norm weights near 1: %g", w[i]);
        tsr__stset_close(s);
    }
}
