/* tools/tessera-generate.c — sample text from a GPT-2 checkpoint.
 *
 *   tessera-generate --checkpoint MODEL.safetensors|RUN_DIR [--vocab DIR]
 *                    [--prompt TEXT] [--tokens N] [--temperature T]
 *                    [--top-k K] [--seed S]
 *
 * The model runs on one sequence of a fixed length; positions past the
 * current text hold id 0, which changes nothing before them (attention is
 * causal), so each new token is a forward pass and a look at the logits of
 * the last real position. The text is printed as it grows. Stops at the
 * end-of-text token, after N tokens, or when the sequence is full.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "cli.h"

static const char usage[] =
    "usage: tessera-generate --checkpoint FILE [--vocab DIR] [--prompt TEXT] [flags]\n"
    "Sample text from a GPT-2 checkpoint.\n"
    "  --checkpoint FILE    HF GPT-2 safetensors checkpoint (required); or a run\n"
    "                       folder of tessera-train (its latest checkpoint), or\n"
    "                       one of its checkpoint folders (DIR/step-N)\n"
    "  --vocab DIR          GPT-2 BPE from DIR/encoder.json and DIR/vocab.bpe\n"
    "                       (default: byte-level tokenizer, for a vocabulary of 257)\n"
    "  --prompt TEXT        text to continue (default: start after an end-of-text)\n"
    "  --tokens N           tokens to generate at most (default 256)\n"
    "  --temperature T      softmax temperature; 0: always the likeliest (default 1.0)\n"
    "  --top-k K            sample among the K likeliest tokens; 0: all (default 40)\n"
    "  --seed S             sampling seed (default 1337)\n"
    "  --seq N              sequence length of the model (default: prompt + tokens\n"
    "                       rounded up to 64, at most the context)\n"
    "  --threads N          CPU workers (default: one per core)\n"
    "  --sched NAME         scheduling policy (default: eager)\n";

static int cmp_desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* Pick the next id from the first n logits (temperature 0: the likeliest). */
static int sample(float *logits, int n, double temperature, int top_k, float *scratch,
                  cli_rng_t *rng)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best])
            best = i;
    if (temperature <= 0.0)
        return best;
    float threshold = -INFINITY;
    if (top_k > 0 && top_k < n) {
        memcpy(scratch, logits, (size_t)n * sizeof *scratch);
        qsort(scratch, (size_t)n, sizeof *scratch, cmp_desc);
        threshold = scratch[top_k - 1];
    }
    double max = logits[best], sum = 0.0;
    for (int i = 0; i < n; i++) {
        double p = logits[i] >= threshold ? exp((logits[i] - max) / temperature) : 0.0;
        scratch[i] = (float)p;
        sum += p;
    }
    double u = cli_rng_uniform(rng) * sum, acc = 0.0;
    for (int i = 0; i < n; i++) {
        acc += scratch[i];
        if (scratch[i] > 0.0f && u < acc)
            return i;
    }
    return best;
}

int main(int argc, char **argv)
{
    const char *ckpt_arg = NULL, *vocab_dir = NULL, *prompt = NULL, *sched = NULL;
    int ntokens = 256, top_k = 40, seq = 0, threads = 0;
    double temperature = 1.0;
    uint64_t seed = 1337;
    cli_opt_t opts[] = {
        {"checkpoint", 0, CLI_STR, &ckpt_arg, 0, 0, 0},
        {"vocab", 0, CLI_STR, &vocab_dir, 0, 0, 0},
        {"prompt", 0, CLI_STR, &prompt, 0, 0, 0},
        {"tokens", 0, CLI_INT, &ntokens, 1, 1e7, 0},
        {"temperature", 0, CLI_FLOAT, &temperature, 0.0, 100.0, 0},
        {"top-k", 0, CLI_INT, &top_k, 0, 1e7, 0},
        {"seed", 0, CLI_U64, &seed, 0, 0, 0},
        {"seq", 0, CLI_INT, &seq, 1, 1e6, 0},
        {"threads", 0, CLI_INT, &threads, 0, 4096, 0},
        {"sched", 0, CLI_STR, &sched, 0, 0, 0},
    };
    const int nopts = (int)(sizeof opts / sizeof *opts);
    int npos = 0;
    int rc = cli_parse("tessera-generate", usage, opts, nopts, argc, argv, NULL, 0, &npos);
    if (rc >= 0)
        return rc;
    if (ckpt_arg == NULL)
        return cli_usage_error("missing --checkpoint FILE");

    /* a file, a checkpoint folder or a run folder of tessera-train */
    char ckpt[4096];
    if (ckpt_model_path(ckpt_arg, ckpt, sizeof ckpt) != 0)
        return 1;
    tsr_gpt2_config_t cfg;
    if (cli_read_config(ckpt, &cfg) != 0)
        return 1;
    tsr_tokenizer_t *tok = NULL;
    if (cli_tokenizer_open(vocab_dir, &tok) != 0)
        return 1;
    int tok_vocab = tsr_tokenizer_vocab_size(tok);
    int eot = tsr_tokenizer_eot(tok);
    /* A BPE model's vocabulary may be padded past the tokenizer's (llm.c
     * pads 50257 to 50304); a byte-level one has exactly 257 ids. */
    if (vocab_dir == NULL && cfg.vocab_size != tok_vocab) {
        tsr_tokenizer_free(tok);
        return cli_fail("the checkpoint's vocabulary has %d ids, not the %d of the byte-level "
                        "tokenizer: pass --vocab DIR with the model's encoder.json and vocab.bpe",
                        cfg.vocab_size, tok_vocab);
    }
    if (tok_vocab > cfg.vocab_size) {
        tsr_tokenizer_free(tok);
        return cli_fail("the checkpoint's vocabulary has %d ids but the tokenizer in '%s' has "
                        "%d: a checkpoint for another tokenizer?",
                        cfg.vocab_size, vocab_dir, tok_vocab);
    }

    /* The prompt's tokens, or an end-of-text to start from nothing. */
    int32_t *ids = NULL;
    size_t nprompt = 0;
    if (prompt != NULL) {
        rc = tsr_tokenizer_encode(tok, prompt, strlen(prompt), &ids, &nprompt);
        if (rc != TSR_OK) {
            tsr_tokenizer_free(tok);
            return cli_lib_fail(rc, "cannot tokenize the prompt");
        }
    }
    if (nprompt == 0) {
        free(ids);
        ids = malloc(sizeof *ids);
        if (ids == NULL) {
            tsr_tokenizer_free(tok);
            return cli_fail("out of memory");
        }
        ids[0] = eot;
        nprompt = 1;
    }
    if (seq == 0) {
        /* Only as long as needed, in steps of 64 tokens (the token tiles
         * divide the sequence: a length with large divisors keeps them big). */
        size_t want = (nprompt + (size_t)ntokens + 63) / 64 * 64;
        seq = want < (size_t)cfg.context ? (int)want : cfg.context;
    }
    int status = 0;
    if (seq > cfg.context)
        status = cli_usage_error("--seq %d exceeds the checkpoint's context of %d", seq,
                                 cfg.context);
    else if (nprompt >= (size_t)seq)
        status = cli_fail("the prompt's %zu tokens leave no room in a sequence of %d", nprompt,
                          seq);
    int32_t *tokens = status ? NULL : calloc((size_t)seq, sizeof *tokens);
    float *logits = status ? NULL : malloc((size_t)cfg.vocab_size * sizeof *logits);
    float *scratch = status ? NULL : malloc((size_t)cfg.vocab_size * sizeof *scratch);
    if (status == 0 && (tokens == NULL || logits == NULL || scratch == NULL))
        status = cli_fail("out of memory");
    if (status != 0) {
        free(ids);
        free(tokens);
        free(logits);
        free(scratch);
        tsr_tokenizer_free(tok);
        return status;
    }
    for (size_t i = 0; i < nprompt; i++) {
        if (ids[i] < 0 || ids[i] >= cfg.vocab_size) {
            status = cli_fail("prompt token %d is outside the checkpoint's vocabulary of %d",
                              (int)ids[i], cfg.vocab_size);
            break;
        }
        tokens[i] = ids[i];
    }
    free(ids);
    if (status != 0 || cli_runtime_init(threads, sched) != 0) {
        free(tokens);
        free(logits);
        free(scratch);
        tsr_tokenizer_free(tok);
        return 1;
    }

    tsr_gpt2_t *m = NULL;
    char desc[256];
    cli_config_describe(&cfg, desc, sizeof desc);
    rc = tsr_gpt2_create(&m, &cfg, 1, seq);
    if (rc != TSR_OK) {
        status = cli_lib_fail(rc, "cannot create a model of %s for %d tokens", desc, seq);
        goto done;
    }
    rc = tsr_gpt2_load(m, ckpt);
    if (rc != TSR_OK) {
        status = cli_lib_fail(rc, "cannot load '%s'", ckpt);
        goto done;
    }
    cli_rng_t rng;
    cli_rng_seed(&rng, seed);
    /* Sample only ids the tokenizer can print (a padded vocabulary has more). */
    int nsample = tok_vocab < cfg.vocab_size ? tok_vocab : cfg.vocab_size;

    if (prompt != NULL)
        fputs(prompt, stdout);
    fflush(stdout);
    double t0 = cli_now();
    int len = (int)nprompt, made = 0;
    const char *why = "token limit";
    while (made < ntokens) {
        if (len >= seq) {
            why = "sequence full";
            break;
        }
        rc = tsr_gpt2_forward(m, tokens, NULL, NULL);
        if (rc == TSR_OK)
            rc = tsr_gpt2_logits(m, 0, len - 1, logits);
        if (rc != TSR_OK) {
            status = cli_lib_fail(rc, "forward pass failed after %d tokens", made);
            goto done;
        }
        int next = sample(logits, nsample, temperature, top_k, scratch, &rng);
        if (next == eot) {
            why = "end of text";
            break;
        }
        made++;
        tokens[len++] = next;
        char *text = NULL;
        size_t tlen = 0;
        rc = tsr_tokenizer_decode(tok, &tokens[len - 1], 1, &text, &tlen);
        if (rc != TSR_OK) {
            status = cli_lib_fail(rc, "cannot decode token %d", next);
            goto done;
        }
        fwrite(text, 1, tlen, stdout);
        fflush(stdout);
        free(text);
    }
    double dt = cli_now() - t0;
    printf("\n");
    fflush(stdout);
    fprintf(stderr, "%s: %d tokens in %.1f s (%.1f tok/s), stopped: %s\n", cli_prog, made, dt,
            dt > 0 ? made / dt : 0.0, why);

done:
    tsr_gpt2_free(m);
    free(tokens);
    free(logits);
    free(scratch);
    tsr_tokenizer_free(tok);
    rc = tsr_shutdown();
    if (rc != TSR_OK && status == 0)
        status = cli_lib_fail(rc, "runtime shutdown");
    return status;
}
