/* llama config.json: a real-shaped config is read with every field; absent
 * optional fields take transformers' defaults; llama3 rope_scaling is read
 * (under "rope_type" or the older "type"); each refusal names its field;
 * what we write reads back the same and is valid JSON for transformers. */
#include <math.h>

#include "io_util.h"
#include "nn/io/llama_config.h"
#include "runtime/error.h"

static void same_config(const tsr__llama_config_t *a, const tsr__llama_config_t *b)
{
    cr_assert_str_eq(a->model_type, b->model_type);
#define SAME(f) cr_assert(a->f == b->f, #f " differs")
    SAME(hidden_size); SAME(intermediate_size); SAME(num_hidden_layers);
    SAME(num_attention_heads); SAME(num_key_value_heads); SAME(head_dim); SAME(vocab_size);
    SAME(max_position_embeddings); SAME(rms_norm_eps); SAME(rope_theta); SAME(rope_llama3);
    SAME(rope_factor); SAME(rope_low_freq_factor); SAME(rope_high_freq_factor);
    SAME(rope_original_max_position_embeddings); SAME(tie_word_embeddings); SAME(torch_dtype);
    SAME(bos_token_id); SAME(n_eos);
    for (int i = 0; i < a->n_eos; i++)
        SAME(eos_token_id[i]);
#undef SAME
}

static int parse(const char *json, tsr__llama_config_t *c)
{
    return tsr__llama_config_parse(json, strlen(json), "config.json", c);
}

/* A config with the five sizes given and `extra` members appended. */
static const char *sized(int h, int i, int l, int heads, int v, const char *extra)
{
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"hidden_size\": %d, \"intermediate_size\": %d, \"num_hidden_layers\": %d, "
             "\"num_attention_heads\": %d, \"vocab_size\": %d%s}", h, i, l, heads, v, extra);
    return buf;
}

static void refused(const char *json, const char *needle)
{
    tsr__llama_config_t c;
    memset(&c, 0x5a, sizeof c);
    unsigned char before[sizeof c];
    memcpy(before, &c, sizeof c);
    int rc = parse(json, &c);
    cr_assert_eq(rc, TSR_EINVAL, "%s: rc %d (%s)", needle, rc, tsr_error_message());
    cr_assert_not_null(strstr(tsr_error_message(), needle), "message \"%s\" lacks \"%s\"",
                       tsr_error_message(), needle);
    cr_assert_eq(memcmp(before, &c, sizeof c), 0, "config written on failure");
}

#define BASE "\"hidden_size\": 384, \"intermediate_size\": 1000, \"num_hidden_layers\": 2, " \
             "\"num_attention_heads\": 6, \"vocab_size\": 512"

/* Llama 3.2 1B's config.json, as published. */
static const char llama32[] =
    "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"attention_bias\": false,\n"
    "  \"attention_dropout\": 0.0,\n  \"bos_token_id\": 128000,\n"
    "  \"eos_token_id\": [128001, 128008, 128009],\n  \"head_dim\": 64,\n"
    "  \"hidden_act\": \"silu\",\n  \"hidden_size\": 2048,\n  \"initializer_range\": 0.02,\n"
    "  \"intermediate_size\": 8192,\n  \"max_position_embeddings\": 131072,\n"
    "  \"mlp_bias\": false,\n  \"model_type\": \"llama\",\n  \"num_attention_heads\": 32,\n"
    "  \"num_hidden_layers\": 16,\n  \"num_key_value_heads\": 8,\n  \"pretraining_tp\": 1,\n"
    "  \"rms_norm_eps\": 1e-05,\n  \"rope_scaling\": {\n    \"factor\": 32.0,\n"
    "    \"high_freq_factor\": 4.0,\n    \"low_freq_factor\": 1.0,\n"
    "    \"original_max_position_embeddings\": 8192,\n    \"rope_type\": \"llama3\"\n  },\n"
    "  \"rope_theta\": 500000.0,\n  \"tie_word_embeddings\": true,\n"
    "  \"torch_dtype\": \"bfloat16\",\n  \"transformers_version\": \"4.45.0.dev0\",\n"
    "  \"use_cache\": true,\n  \"vocab_size\": 128256\n}\n";

Test(llama_config, llama_3_2_with_llama3_rope_scaling)
{
    tsr__llama_config_t c;
    cr_assert_eq(parse(llama32, &c), TSR_OK, "%s", tsr_error_message());
    cr_assert_str_eq(c.model_type, "llama");
    cr_assert_eq(c.hidden_size, 2048);
    cr_assert_eq(c.intermediate_size, 8192);
    cr_assert_eq(c.num_hidden_layers, 16);
    cr_assert_eq(c.num_attention_heads, 32);
    cr_assert_eq(c.num_key_value_heads, 8);
    cr_assert_eq(c.head_dim, 64);
    cr_assert_eq(c.vocab_size, 128256);
    cr_assert_eq(c.max_position_embeddings, 131072);
    cr_assert_eq(c.rms_norm_eps, 1e-5);
    cr_assert_eq(c.rope_theta, 500000.0);
    cr_assert_eq(c.rope_llama3, 1);
    cr_assert_eq(c.rope_factor, 32.0);
    cr_assert_eq(c.rope_low_freq_factor, 1.0);
    cr_assert_eq(c.rope_high_freq_factor, 4.0);
    cr_assert_eq(c.rope_original_max_position_embeddings, 8192);
    cr_assert_eq(c.tie_word_embeddings, 1);
    cr_assert_eq(c.torch_dtype, TSR__LLAMA_BF16);
    cr_assert_eq(c.bos_token_id, 128000);
    cr_assert_eq(c.n_eos, 3);
    cr_assert_eq(c.eos_token_id[2], 128009);
}

Test(llama_config, defaults_of_transformers)
{
    tsr__llama_config_t c;
    cr_assert_eq(parse("{" BASE "}", &c), TSR_OK, "%s", tsr_error_message());
    cr_assert_str_eq(c.model_type, "llama");
    cr_assert_eq(c.num_key_value_heads, 6, "kv heads default to heads");
    cr_assert_eq(c.head_dim, 64);
    cr_assert_eq(c.max_position_embeddings, 2048);
    cr_assert_eq(c.rms_norm_eps, 1e-6);
    cr_assert_eq(c.rope_theta, 10000.0);
    cr_assert_eq(c.rope_llama3, 0);
    cr_assert_eq(c.tie_word_embeddings, 0);
    cr_assert_eq(c.torch_dtype, TSR__LLAMA_F32);
    cr_assert_eq(c.bos_token_id, 1);
    cr_assert_eq(c.n_eos, 1);
    cr_assert_eq(c.eos_token_id[0], 2);
    /* nulls, an int eos, the older "type" key, "dtype" for torch_dtype */
    cr_assert_eq(parse("{" BASE ", \"bos_token_id\": null, \"eos_token_id\": 7, "
                       "\"rope_scaling\": null, \"num_key_value_heads\": null, "
                       "\"dtype\": \"float16\"}", &c), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(c.bos_token_id, -1);
    cr_assert_eq(c.n_eos, 1);
    cr_assert_eq(c.eos_token_id[0], 7);
    cr_assert_eq(c.num_key_value_heads, 6);
    cr_assert_eq(c.torch_dtype, TSR__LLAMA_F16);
    cr_assert_eq(parse("{" BASE ", \"max_position_embeddings\": 4096, \"rope_scaling\": "
                       "{\"type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1, "
                       "\"high_freq_factor\": 4, \"original_max_position_embeddings\": 1024}}",
                       &c), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(c.rope_llama3, 1);
    cr_assert_eq(c.rope_factor, 8.0);
    /* an explicit head_dim need not be hidden / heads (as transformers allows) */
    cr_assert_eq(parse("{\"hidden_size\": 100, \"intermediate_size\": 7, \"num_hidden_layers\": 1, "
                       "\"num_attention_heads\": 6, \"vocab_size\": 9, \"head_dim\": 16}", &c),
                 TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(c.head_dim, 16);
    /* mistral without a sliding window computes as llama */
    cr_assert_eq(parse("{" BASE ", \"model_type\": \"mistral\", \"sliding_window\": null}", &c),
                 TSR_OK, "%s", tsr_error_message());
    cr_assert_str_eq(c.model_type, "mistral");
}

Test(llama_config, refusals_name_the_field)
{
    refused("[]", "not array");
    refused("{\"intermediate_size\": 1000, \"num_hidden_layers\": 2, \"num_attention_heads\": 6, "
            "\"vocab_size\": 512}", "\"hidden_size\" is missing");
    refused("{" BASE ", \"hidden_act\": \"gelu\"}", "\"hidden_act\" is \"gelu\"");
    refused("{" BASE ", \"attention_bias\": true}", "\"attention_bias\" is true");
    refused("{" BASE ", \"mlp_bias\": true}", "\"mlp_bias\" is true");
    refused("{" BASE ", \"model_type\": \"qwen2\"}", "model_type \"qwen2\"");
    refused("{" BASE ", \"model_type\": \"gpt2\"}", "model_type \"gpt2\" is not a Llama");
    refused("{" BASE ", \"model_type\": \"mistral\", \"sliding_window\": 1024}",
            "\"sliding_window\" 1024");
    refused(sized(385, 1000, 2, 6, 512, ""),
            "hidden_size 385 is not divisible by num_attention_heads 6");
    refused("{" BASE ", \"num_key_value_heads\": 4}",
            "num_attention_heads 6 is not divisible by num_key_value_heads 4");
    refused(sized(378, 1000, 2, 6, 512, ""), "head_dim 63 is odd");
    refused(sized(385, 1000, 2, 6, 512, ", \"head_dim\": null"), "not divisible");
    refused(sized(384, 1000, 2, 6, 512, ", \"head_dim\": 7"), "head_dim 7 is odd");
    refused(sized(384, 1000, 0, 6, 512, ""), "\"num_hidden_layers\" is 0, outside");
    refused(sized(384, 1000, 2, 6, 0, ""), "\"vocab_size\" is 0, outside");
    refused(sized(384, -3, 2, 6, 512, ""), "\"intermediate_size\" is -3, outside");
    refused(sized(384, 1000, 2, 6, 512, ", \"num_key_value_heads\": 0"),
            "\"num_key_value_heads\" is 0");
    refused(sized(384, 1000, 2, 6, 512, ", \"hidden_size\": 1"), "duplicate");
    refused("{\"hidden_size\": 384.5, \"intermediate_size\": 1000, \"num_hidden_layers\": 2, "
            "\"num_attention_heads\": 6, \"vocab_size\": 512}", "\"hidden_size\" must be an integer");
    refused("{" BASE ", \"rms_norm_eps\": \"1e-5\"}", "\"rms_norm_eps\" must be a finite number");
    refused("{" BASE ", \"rms_norm_eps\": 0}", "rms_norm_eps 0 is not in (0, 1)");
    refused("{" BASE ", \"rope_theta\": -1}", "rope_theta -1 is not a positive");
    refused("{" BASE ", \"tie_word_embeddings\": 1}", "\"tie_word_embeddings\" must be true or false");
    refused("{" BASE ", \"torch_dtype\": \"int8\"}", "\"torch_dtype\" \"int8\"");
    refused("{" BASE ", \"torch_dtype\": \"float32\", \"dtype\": \"bfloat16\"}", "disagree");
    refused("{" BASE ", \"eos_token_id\": [1, -2]}", "\"eos_token_id\" must hold");
    refused("{" BASE ", \"eos_token_id\": 512}", "eos_token_id 512 is not in [0, vocab_size 512)");
    refused("{" BASE ", \"bos_token_id\": 600}", "bos_token_id 600 is not below");
    refused("{" BASE ", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}}",
            "rope_scaling type \"yarn\" is not supported");
    refused("{" BASE ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, "
            "\"low_freq_factor\": 1, \"high_freq_factor\": 4}}",
            "\"original_max_position_embeddings\" is missing");
    refused("{" BASE ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, "
            "\"low_freq_factor\": 4, \"high_freq_factor\": 1, "
            "\"original_max_position_embeddings\": 1024}}", "high_freq_factor 1 must exceed");
    refused("{" BASE ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 0.5, "
            "\"low_freq_factor\": 1, \"high_freq_factor\": 4, "
            "\"original_max_position_embeddings\": 1024}}", "factor 0.5 is below 1");
    refused("{" BASE ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, "
            "\"low_freq_factor\": 1, \"high_freq_factor\": 4, "
            "\"original_max_position_embeddings\": 8192}}",
            "original_max_position_embeddings 8192 is not in [1, max_position_embeddings 2048]");
    refused("{" BASE ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"type\": \"linear\"}}",
            "disagree");
    refused("{" BASE ", \"rope_scaling\": 3}", "\"rope_scaling\" must be null or an object");
}

Test(llama_config, written_config_reads_back_the_same)
{
    tsr__llama_config_t c, d;
    cr_assert_eq(parse(llama32, &c), TSR_OK, "%s", tsr_error_message());
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    io_join(path, sizeof path, dir, "config.json");
    cr_assert_eq(tsr__llama_config_write(&c, path), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr__llama_config_read(path, &d), TSR_OK, "%s", tsr_error_message());
    same_config(&c, &d);
    char *text = io_read(path, NULL);
    cr_assert_not_null(strstr(text, "\"architectures\": [\n    \"LlamaForCausalLM\"\n  ]"));
    cr_assert_not_null(strstr(text, "\"rms_norm_eps\": 1e-05"), "%s", text);
    cr_assert_not_null(strstr(text, "\"rope_theta\": 500000.0"), "%s", text);
    cr_assert_not_null(strstr(text, "\"eos_token_id\": [128001, 128008, 128009]"), "%s", text);
    free(text);
    /* defaults and nulls round-trip too */
    cr_assert_eq(parse("{" BASE ", \"bos_token_id\": null, \"eos_token_id\": null}", &c),
                 TSR_OK);
    cr_assert_eq(tsr__llama_config_write(&c, path), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr__llama_config_read(path, &d), TSR_OK, "%s", tsr_error_message());
    same_config(&c, &d);
    /* an invalid struct is not written, and the file stays */
    c.num_key_value_heads = 4;
    cr_assert_eq(tsr__llama_config_write(&c, path), TSR_EINVAL);
    cr_assert_eq(tsr__llama_config_read(path, &d), TSR_OK);
    /* missing file, a folder */
    io_join(path, sizeof path, dir, "nope.json");
    cr_assert_eq(tsr__llama_config_read(path, &d), TSR_EIO);
    cr_assert_eq(tsr__llama_config_read(dir, &d), TSR_EIO);
    cr_assert_not_null(strstr(tsr_error_message(), "directory"), "%s", tsr_error_message());
    io_rmtree(dir);
}
