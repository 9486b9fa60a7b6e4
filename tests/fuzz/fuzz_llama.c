/* tests/fuzz/fuzz_llama.c — the Llama checkpoint's JSON readers on arbitrary
 * bytes: config.json (nn/io/llama_config.c) and model.safetensors.index.json
 * (nn/io/stset.c).
 *
 * Input: one selector byte (even: config.json, odd: index), then the file.
 * An accepted config must pass validation, and what the writer makes of it
 * must parse back to the same values. An accepted index must have sorted,
 * distinct tensor names, each mapped to one of its distinct shard files,
 * whose names are plain file names; every shard listed must be used.
 * A refusal must carry a status and a message.
 */
#include "fuzz_util.h"
#include "nn/io/llama_config.h"
#include "nn/io/stset.h"

static void same_config(const tsr__llama_config_t *a, const tsr__llama_config_t *b)
{
    FUZZ_CHECK(!strcmp(a->model_type, b->model_type), "model_type");
#define SAME(f) FUZZ_CHECK(a->f == b->f, #f " differs after writing")
    SAME(hidden_size); SAME(intermediate_size); SAME(num_hidden_layers);
    SAME(num_attention_heads); SAME(num_key_value_heads); SAME(head_dim); SAME(vocab_size);
    SAME(max_position_embeddings); SAME(rms_norm_eps); SAME(rope_theta); SAME(rope_llama3);
    SAME(tie_word_embeddings); SAME(torch_dtype); SAME(bos_token_id); SAME(n_eos);
    if (a->rope_llama3) {
        SAME(rope_factor); SAME(rope_low_freq_factor); SAME(rope_high_freq_factor);
        SAME(rope_original_max_position_embeddings);
    }
    for (int i = 0; i < a->n_eos; i++)
        SAME(eos_token_id[i]);
#undef SAME
}

static void config(const char *buf, size_t n)
{
    tsr__llama_config_t c, d;
    fuzz_clear_error();
    int rc = tsr__llama_config_parse(buf, n, "config.json", &c);
    if (rc != TSR_OK) {
        FUZZ_CHECK_REFUSAL(rc);
        return;
    }
    FUZZ_CHECK(tsr__llama_config_validate(&c, "config") == TSR_OK, "%s", tsr_error_message());
    FUZZ_CHECK(c.hidden_size > 0 && c.num_attention_heads % c.num_key_value_heads == 0 &&
                   c.head_dim % 2 == 0, "sizes");
    char *text = NULL;
    size_t len = 0;
    rc = tsr__llama_config_json(&c, &text, &len);
    if (rc == TSR_ENOMEM)
        return;
    FUZZ_CHECK(rc == TSR_OK, "writing an accepted config: %s", tsr_error_message());
    rc = tsr__llama_config_parse(text, len, "written", &d);
    FUZZ_CHECK(rc == TSR_OK, "reading the written config: %s\n%s", tsr_error_message(), text);
    free(text);
    same_config(&c, &d);
}

static void index_json(const char *buf, size_t n)
{
    tsr__stset_index_t idx;
    fuzz_clear_error();
    int rc = tsr__stset_index_parse(buf, n, "index", &idx);
    if (rc != TSR_OK) {
        FUZZ_CHECK_REFUSAL(rc);
        return;
    }
    FUZZ_CHECK(idx.nmap > 0 && idx.nfiles > 0 && idx.nfiles <= idx.nmap, "counts");
    for (size_t i = 0; i < idx.nmap; i++) {
        FUZZ_CHECK(idx.names[i][0] != 0, "an empty name");
        FUZZ_CHECK(i == 0 || strcmp(idx.names[i - 1], idx.names[i]) < 0, "names not sorted");
        FUZZ_CHECK(idx.file[i] < idx.nfiles, "file index");
    }
    for (size_t f = 0; f < idx.nfiles; f++) {
        const char *s = idx.files[f];
        FUZZ_CHECK(*s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, ".."), "file name");
        for (size_t g = 0; g < f; g++)
            FUZZ_CHECK(strcmp(idx.files[g], s) != 0, "a shard listed twice");
        int used = 0;
        for (size_t i = 0; i < idx.nmap && !used; i++)
            used = idx.file[i] == f;
        FUZZ_CHECK(used, "an unused shard");
    }
    tsr__stset_index_free(&idx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1)
        index_json((const char *)data + 1, size - 1);
    else
        config((const char *)data + 1, size - 1);
    return 0;
}
