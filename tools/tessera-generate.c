/* tools/tessera-generate.c — sample text from a GPT-2 or a Llama (--arch
 * llama) checkpoint, with a KV cache (tessera/gpt2.h and tessera/llama.h,
 * "generation"; both behind model.h's model_gen_* calls).
 *
 *   tessera-generate [--arch gpt2|llama] --checkpoint MODEL|RUN_DIR
 *                    [--vocab DIR|tokenizer.json] [--prompt TEXT]...
 *                    [--prompts FILE] [--ids 1,2,3]... [--tokens N]
 *                    [--temperature T] [--top-k K] [--top-p P] [--seed S]
 *                    [--stop STRING]... [--bf16] [--print-ids]
 *
 * Every prompt is a sequence of one batch: each is prefilled once (its
 * keys and values cached), then all sequences step together, one token
 * each per step. A sequence stops at the end-of-text token (a Llama: any
 * eos_token_id of its config.json), when its text ends with a --stop string
 * (kept in the output), after N tokens, or when the cache is full. One
 * prompt: its text is printed as it grows; several: each sequence is
 * printed when it is done, under a "[i]" header line. With token ids out
 * (--ids, --print-ids, or a Llama without a tokenizer) each sequence's new
 * ids are printed when it is done, as one line "[i] ID ID ...".
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "cli.h"
#include "model.h"

/* eos ids of a Llama's config.json kept at most */
#define MAX_EOS 16

static const char usage[] =
    "usage: tessera-generate --checkpoint FILE [--vocab DIR] [--prompt TEXT]... [flags]\n"
    "Sample text from a GPT-2 (or Llama) checkpoint (a KV cache: one pass per new\n"
    "token).\n"
    "  --arch A             gpt2 (default) or llama: then --checkpoint is an HF\n"
    "                       checkpoint folder (config.json, safetensors), a run\n"
    "                       folder of tessera-train --arch llama or one of its\n"
    "                       checkpoint folders; generation stops at the\n"
    "                       eos_token_id (an id or a list) of its config.json\n"
    "  --checkpoint FILE    HF GPT-2 safetensors checkpoint (required); or a run\n"
    "                       folder of tessera-train (its latest checkpoint), or\n"
    "                       one of its checkpoint folders (DIR/step-N)\n"
    "  --vocab DIR|FILE     GPT-2 BPE from DIR/encoder.json and DIR/vocab.bpe, or a\n"
    "                       tokenizer.json (FILE, or DIR holding only that)\n"
    "                       (default: byte-level tokenizer, for a vocabulary of 257;\n"
    "                       a Llama: none, prompts are --ids)\n"
    "  --prompt TEXT        text to continue; repeat for a batch of sequences\n"
    "                       (default: one sequence started after an end-of-text;\n"
    "                       a Llama: after its bos_token_id). A Llama's prompt\n"
    "                       is encoded with its special tokens matched and no\n"
    "                       BOS added: begin it with <|begin_of_text|> (Llama 3)\n"
    "  --prompts FILE       one prompt per line (added after the --prompt ones;\n"
    "                       an empty line starts after an end-of-text; '-' reads\n"
    "                       standard input; no NUL bytes)\n"
    "  --ids LIST           a prompt of token ids, comma-separated (\"1,2,3\");\n"
    "                       repeat for a batch; not with --prompt or --prompts.\n"
    "                       The new ids are printed (--print-ids)\n"
    "  --print-ids          print each sequence's new token ids, \"[i] ID ID ...\"\n"
    "                       (the stopping eos not included), when it is done\n"
    "  --tokens N           tokens to generate per sequence at most (default 256);\n"
    "                       --max-new N is the same\n"
    "  --temperature T      softmax temperature; 0: always the likeliest (default 1.0)\n"
    "  --top-k K            sample among the K likeliest tokens; 0: all (default 40)\n"
    "  --top-p P            sample among the likeliest whose probabilities sum\n"
    "                       to P (nucleus); 1: all (default 1.0)\n"
    "  --seed S             sampling seed (default 1337); each sequence draws\n"
    "                       from its own generator (seed + its index)\n"
    "  --stop STRING        stop a sequence when its text ends with STRING\n"
    "                       (repeatable; the string stays in the output)\n"
    "  --bf16               decode from bf16 copies of the weights (half the bytes\n"
    "                       read per token; fp32 sums); GPT-2 only\n"
    "  --seq N              positions per sequence, prompt included (default:\n"
    "                       the longest prompt + tokens, at most the context)\n"
    "  --threads N          CPU workers (default: one per core; none where GPUs are:\n"
    "                       the GPUs alone)\n"
    "  --sched NAME         scheduling policy (default: eager)\n"
    "Refuses to run under TESSERA_SIMULATE (exit 2): a simulated run has no real\n"
    "data; tessera-sim simulates a model's steps.\n";

/* The repeatable flags, taken out of argv before the table parser sees it. */
typedef struct multi {
    const char **v;
    int n;
} multi_t;

static int multi_add(multi_t *m, const char *s)
{
    const char **grown = realloc(m->v, (size_t)(m->n + 1) * sizeof *grown);
    if (!grown)
        return 1;
    m->v = grown;
    m->v[m->n++] = s;
    return 0;
}

/* Move "--NAME VALUE" and "--NAME=VALUE" of `name` out of argv (up to a
 * "--"), into m. Returns the new argc, or -1 (usage error, reported). */
static int take_multi(int argc, char **argv, const char *name, multi_t *m)
{
    size_t len = strlen(name);
    int out = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            while (i < argc)
                argv[out++] = argv[i++];
            break;
        }
        if (!strncmp(a, "--", 2) && !strncmp(a + 2, name, len) &&
            (a[2 + len] == 0 || a[2 + len] == '=')) {
            const char *v = a[2 + len] == '=' ? a + 3 + len : NULL;
            if (!v) {
                if (i + 1 >= argc) {
                    cli_usage_error("--%s needs a value", name);
                    return -1;
                }
                v = argv[++i];
            }
            if (multi_add(m, v)) {
                cli_fail("out of memory");
                return -1;
            }
            continue;
        }
        argv[out++] = argv[i];
    }
    return out;
}

/* One sequence of the batch. */
typedef struct seq {
    const char *prompt; /* NULL: started after an end-of-text (or given as ids) */
    int32_t *ids;
    size_t nprompt;
    char *text; /* what it generated, decoded */
    size_t len, cap;
    int32_t *out; /* what it generated, as ids */
    size_t nout, outcap;
    int made, done;
    const char *why;
    uint64_t rng;
} seq_t;

static int seq_append(seq_t *s, const char *t, size_t n)
{
    if (s->len + n + 1 > s->cap) {
        size_t cap = (s->len + n + 1) * 2;
        char *g = realloc(s->text, cap);
        if (!g)
            return 1;
        s->text = g;
        s->cap = cap;
    }
    memcpy(s->text + s->len, t, n);
    s->len += n;
    s->text[s->len] = 0;
    return 0;
}

static int seq_append_id(seq_t *s, int32_t id)
{
    if (s->nout == s->outcap) {
        size_t cap = s->outcap ? s->outcap * 2 : 64;
        int32_t *g = realloc(s->out, cap * sizeof *g);
        if (!g)
            return 1;
        s->out = g;
        s->outcap = cap;
    }
    s->out[s->nout++] = id;
    return 0;
}

static const char *ends_with_stop(const seq_t *s, const multi_t *stops)
{
    for (int i = 0; i < stops->n; i++) {
        size_t n = strlen(stops->v[i]);
        if (n > 0 && s->len >= n && !memcmp(s->text + s->len - n, stops->v[i], n))
            return stops->v[i];
    }
    return NULL;
}

static void print_done(const seq_t *s, int i, int batch, int ids_out)
{
    if (ids_out) {
        printf("[%d]", i);
        for (size_t t = 0; t < s->nout; t++)
            printf(" %d", (int)s->out[t]);
        printf("\n");
        fflush(stdout);
        return;
    }
    if (batch == 1)
        return; /* streamed already */
    printf("[%d]\n%s%s\n", i, s->prompt ? s->prompt : "", s->text ? s->text : "");
    fflush(stdout);
}

/* The ids of --ids "1,2,3" (commas or spaces between them) into a
 * malloc'ed array. Returns 0, or 2 after a usage error. */
static int parse_ids(const char *list, int index, int32_t **ids, size_t *n)
{
    size_t cap = strlen(list) / 2 + 1;
    *ids = malloc(cap * sizeof **ids);
    *n = 0;
    if (!*ids)
        return cli_fail("out of memory");
    const char *p = list;
    for (;;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == 0)
            return 0;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno != 0 || v < 0 || v > INT32_MAX ||
            (*end != 0 && *end != ',' && *end != ' '))
            return cli_usage_error("--ids '%s' (prompt %d): not a list of token ids like "
                                   "1,2,3", list, index);
        (*ids)[(*n)++] = (int32_t)v;
        p = end;
    }
}

int main(int argc, char **argv)
{
    const char *ckpt_arg = NULL, *vocab_dir = NULL, *prompts_file = NULL, *sched = NULL,
               *arch_name = NULL;
    int ntokens = 256, top_k = 40, seqlen = 0, threads = 0, bf16 = 0, print_ids = 0;
    double temperature = 1.0, top_p = 1.0;
    uint64_t seed = 1337;
    multi_t prompts = {0}, stops = {0}, idlists = {0};
    cli_prog = "tessera-generate";
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        }
    argc = take_multi(argc, argv, "prompt", &prompts);
    if (argc > 0)
        argc = take_multi(argc, argv, "stop", &stops);
    if (argc > 0)
        argc = take_multi(argc, argv, "ids", &idlists);
    if (argc < 0) {
        free(prompts.v);
        free(stops.v);
        free(idlists.v);
        return 2;
    }
    cli_opt_t opts[] = {
        {"checkpoint", 0, CLI_STR, &ckpt_arg, 0, 0, 0},
        {"vocab", 0, CLI_STR, &vocab_dir, 0, 0, 0},
        {"prompts", 0, CLI_STR, &prompts_file, 0, 0, 0},
        {"tokens", 0, CLI_INT, &ntokens, 1, 1e7, 0},
        {"max-new", 0, CLI_INT, &ntokens, 1, 1e7, 0},
        {"temperature", 0, CLI_FLOAT, &temperature, 0.0, 100.0, 0},
        {"top-k", 0, CLI_INT, &top_k, 0, 1e7, 0},
        {"top-p", 0, CLI_FLOAT, &top_p, 1e-6, 1.0, 0},
        {"seed", 0, CLI_U64, &seed, 0, 0, 0},
        {"seq", 0, CLI_INT, &seqlen, 1, 1e6, 0},
        {"bf16", 0, CLI_BOOL, &bf16, 0, 0, 0},
        {"threads", 0, CLI_INT, &threads, 0, 4096, 0},
        {"sched", 0, CLI_STR, &sched, 0, 0, 0},
        {"arch", 0, CLI_STR, &arch_name, 0, 0, 0},
        {"print-ids", 0, CLI_BOOL, &print_ids, 0, 0, 0},
    };
    const int nopts = (int)(sizeof opts / sizeof *opts);
    int npos = 0, status = 0;
    int rc = cli_parse("tessera-generate", usage, opts, nopts, argc, argv, NULL, 0, &npos);
    char *file_text = NULL;
    seq_t *seqs = NULL;
    int nseq = 0, eot = 0, nsample = 0, ids_out = 0, neos = 0, vocab = 0, context = 0;
    int32_t bos = -1, eos[MAX_EOS];
    model_arch_t arch = MODEL_GPT2;
    tsr_tokenizer_t *tok = NULL;
    model_t m = {.arch = MODEL_GPT2};
    model_gen_t g = {.arch = MODEL_GPT2};
    float *logits = NULL;
    int32_t *next = NULL;
    int runtime = 0;
    if (rc >= 0) {
        status = rc;
        goto out;
    }
    if (ckpt_arg == NULL) {
        status = cli_usage_error("missing --checkpoint FILE");
        goto out;
    }
    if (arch_name != NULL && (status = model_arch_parse(arch_name, &arch)) != 0)
        goto out;
    m.arch = g.arch = arch;
    if (idlists.n > 0 && (prompts.n > 0 || prompts_file)) {
        status = cli_usage_error("--ids and --prompt%s exclude each other (a batch's prompts are "
                                 "all text or all ids)", prompts.n > 0 ? "" : "s");
        goto out;
    }
    if (arch == MODEL_LLAMA && bf16) {
        status = cli_usage_error("--bf16 is GPT-2's: a Llama decodes from its fp32 weights only "
                                 "(no bf16 decode)");
        goto out;
    }
    if (arch == MODEL_LLAMA && vocab_dir == NULL && (prompts.n > 0 || prompts_file)) {
        status = cli_usage_error("a text prompt needs the Llama's tokenizer (--vocab "
                                 "tokenizer.json); or give the prompt as --ids");
        goto out;
    }
    if (arch == MODEL_LLAMA && vocab_dir == NULL && stops.n > 0) {
        status = cli_usage_error("--stop needs the Llama's tokenizer (--vocab tokenizer.json)");
        goto out;
    }
    /* before any file is read: a simulated model's weights are zeros */
    if ((status = cli_refuse_simulation("its text would be sampled from a model of zeros")) != 0)
        goto out;
    if (prompts_file) {
        size_t flen;
        if (cli_read_file(prompts_file, &file_text, &flen) != 0) {
            status = 1;
            goto out;
        }
        /* A prompt is a C string: everything after a NUL byte would be
         * dropped without a word. */
        const char *nul = memchr(file_text, '\0', flen);
        if (nul) {
            size_t line = 1;
            for (const char *c = file_text; c < nul; c++)
                line += *c == '\n';
            status = cli_fail("'%s' line %zu holds a NUL byte (byte %zu): a prompt is text",
                              prompts_file, line, (size_t)(nul - file_text) + 1);
            goto out;
        }
        for (char *line = file_text; line && *line;) {
            char *nl = strchr(line, '\n');
            if (nl)
                *nl = 0;
            if (multi_add(&prompts, line)) {
                status = cli_fail("out of memory");
                goto out;
            }
            line = nl ? nl + 1 : NULL;
        }
    }

    /* a file, a checkpoint folder or a run folder of tessera-train (a
     * Llama: an HF folder, or a run or step folder of one) */
    char ckpt[4096];
    model_config_t cfg;
    if (ckpt_model_path_arch(arch, ckpt_arg, ckpt, sizeof ckpt) != 0 ||
        model_read_config(arch, ckpt, &cfg) != 0 ||
        (arch == MODEL_LLAMA && model_llama_special_ids(ckpt, &bos, eos, &neos, MAX_EOS) != 0) ||
        ((arch == MODEL_GPT2 || vocab_dir != NULL) && cli_tokenizer_open(vocab_dir, &tok) != 0)) {
        status = 1;
        goto out;
    }
    vocab = model_config_vocab(&cfg);
    context = model_config_context(&cfg);
    int tok_vocab = tok ? tsr_tokenizer_vocab_size(tok) : vocab;
    eot = tok ? tsr_tokenizer_eot(tok) : -1;
    /* A BPE model's vocabulary may be padded past the tokenizer's (llm.c
     * pads 50257 to 50304); a byte-level one has exactly 257 ids. */
    if (arch == MODEL_GPT2 && vocab_dir == NULL && vocab != tok_vocab) {
        status = cli_fail("the checkpoint's vocabulary has %d ids, not the %d of the byte-level "
                          "tokenizer: pass --vocab DIR with the model's encoder.json and "
                          "vocab.bpe", vocab, tok_vocab);
        goto out;
    }
    if (tok_vocab > vocab) {
        status = cli_fail("the checkpoint's vocabulary has %d ids but the tokenizer in '%s' has "
                          "%d: a checkpoint for another tokenizer?",
                          vocab, vocab_dir, tok_vocab);
        goto out;
    }
    /* Sample only ids the tokenizer can print (a padded vocabulary has more). */
    nsample = tok_vocab < vocab ? tok_vocab : vocab;
    ids_out = idlists.n > 0 || print_ids || tok == NULL;
    /* where a sequence without a prompt starts: GPT-2 after an end-of-text,
     * a Llama at its BOS */
    int32_t start = arch == MODEL_LLAMA ? bos : eot;

    /* The prompts' tokens (the start token for an empty or absent prompt). */
    nseq = prompts.n > 0 ? prompts.n : idlists.n > 0 ? idlists.n : 1;
    seqs = calloc((size_t)nseq, sizeof *seqs);
    if (!seqs) {
        status = cli_fail("out of memory");
        goto out;
    }
    size_t longest = 0;
    for (int i = 0; i < nseq; i++) {
        seq_t *s = &seqs[i];
        s->prompt = prompts.n > 0 && prompts.v[i][0] ? prompts.v[i] : NULL;
        s->rng = seed + (uint64_t)i;
        if (idlists.n > 0) {
            if ((status = parse_ids(idlists.v[i], i, &s->ids, &s->nprompt)) != 0)
                goto out;
        } else if (s->prompt) {
            /* a Llama's special tokens (<|begin_of_text|>) are its prompts'
             * own ids; GPT-2's files match <|endoftext|> either way */
            rc = arch == MODEL_LLAMA
                     ? tsr_tokenizer_encode_ex(tok, s->prompt, strlen(s->prompt),
                                               TSR_TOKENIZE_SPECIAL, &s->ids, &s->nprompt)
                     : tsr_tokenizer_encode(tok, s->prompt, strlen(s->prompt), &s->ids,
                                            &s->nprompt);
            if (rc != TSR_OK) {
                status = cli_lib_fail(rc, "cannot tokenize prompt %d", i);
                goto out;
            }
        }
        if (s->nprompt == 0) {
            if (start < 0) {
                status = cli_fail("prompt %d is empty and '%s' names no bos_token_id to start "
                                  "from: give a prompt", i, ckpt);
                goto out;
            }
            free(s->ids);
            s->ids = malloc(sizeof *s->ids);
            if (!s->ids) {
                status = cli_fail("out of memory");
                goto out;
            }
            s->ids[0] = start;
            s->nprompt = 1;
        }
        for (size_t t = 0; t < s->nprompt; t++)
            if (s->ids[t] < 0 || s->ids[t] >= vocab) {
                status = cli_fail("prompt %d: token %d is outside the checkpoint's vocabulary of "
                                  "%d", i, (int)s->ids[t], vocab);
                goto out;
            }
        longest = s->nprompt > longest ? s->nprompt : longest;
    }
    if (seqlen == 0) {
        size_t want = longest + (size_t)ntokens;
        seqlen = want < (size_t)context ? (int)want : context;
    }
    if (seqlen > context) {
        status = cli_usage_error("--seq %d exceeds the checkpoint's context of %d", seqlen,
                                 context);
        goto out;
    }
    if (longest >= (size_t)seqlen) {
        status = cli_fail("a prompt of %zu tokens leaves no room in a sequence of %d", longest,
                          seqlen);
        goto out;
    }
    logits = malloc((size_t)nseq * (size_t)vocab * sizeof *logits);
    next = malloc((size_t)nseq * sizeof *next);
    if (!logits || !next) {
        status = cli_fail("out of memory");
        goto out;
    }

    if ((status = cli_runtime_init(threads, sched)) != 0)
        goto out;
    runtime = 1;
    char desc[256];
    model_config_describe(&cfg, desc, sizeof desc);
    /* the model's own activations are not used: the smallest shape */
    rc = model_create(&m, &cfg, 1, 1);
    if (rc == TSR_OK)
        rc = model_load(&m, ckpt);
    if (rc != TSR_OK) {
        status = cli_lib_fail(rc, "cannot load '%s' (%s)", ckpt, desc);
        goto out;
    }
    rc = model_gen_create(&g, &m, nseq, seqlen);
    if (rc == TSR_OK && bf16)
        rc = model_gen_precision(&g, TSR_GPT2_BF16);
    if (rc != TSR_OK) {
        status = cli_lib_fail(rc, "cannot make a KV cache of %d x %d positions", nseq, seqlen);
        goto out;
    }
    tsr_sampler_t sampler = {(float)temperature, top_k, (float)top_p};

    if (nseq == 1 && !ids_out && seqs[0].prompt)
        fputs(seqs[0].prompt, stdout);
    fflush(stdout);
    double t0 = cli_now();
    for (int i = 0; i < nseq; i++) {
        rc = model_gen_prefill(&g, i, seqs[i].ids, (int)seqs[i].nprompt,
                               logits + (size_t)i * vocab);
        if (rc != TSR_OK) {
            status = cli_lib_fail(rc, "prefill of prompt %d failed", i);
            goto out;
        }
    }
    int live = nseq, made = 0;
    while (live > 0) {
        /* pick each live sequence's next token from its last logits */
        for (int i = 0; i < nseq; i++) {
            seq_t *s = &seqs[i];
            next[i] = -1;
            if (s->done)
                continue;
            int32_t id;
            rc = tsr_gpt2_sample(logits + (size_t)i * vocab, nsample, &sampler, &s->rng, &id);
            if (rc != TSR_OK) {
                status = cli_lib_fail(rc, "sampling failed");
                goto out;
            }
            const char *stop = NULL;
            int at_eos = arch == MODEL_LLAMA ? 0 : id == eot;
            for (int e = 0; arch == MODEL_LLAMA && e < neos; e++)
                at_eos |= id == eos[e];
            if (at_eos) {
                s->why = "end of text";
            } else {
                if (seq_append_id(s, id)) {
                    status = cli_fail("out of memory");
                    goto out;
                }
                if (tok) {
                    char *text = NULL;
                    size_t tlen = 0;
                    rc = tsr_tokenizer_decode(tok, &id, 1, &text, &tlen);
                    if (rc != TSR_OK || seq_append(s, text, tlen)) {
                        free(text);
                        status = cli_lib_fail(rc, "cannot decode token %d", (int)id);
                        goto out;
                    }
                    if (nseq == 1 && !ids_out) {
                        fwrite(text, 1, tlen, stdout);
                        fflush(stdout);
                    }
                    free(text);
                }
                s->made++;
                made++;
                stop = ends_with_stop(s, &stops);
                if (stop)
                    s->why = "stop string";
                else if (s->made >= ntokens)
                    s->why = "token limit";
                else if (model_gen_length(&g, i) >= seqlen)
                    s->why = "sequence full";
                else
                    next[i] = id;
            }
            if (next[i] < 0) {
                s->done = 1;
                live--;
                print_done(s, i, nseq, ids_out);
            }
        }
        if (live == 0)
            break;
        rc = model_gen_step(&g, next, logits);
        if (rc != TSR_OK) {
            status = cli_lib_fail(rc, "decode step failed after %d tokens", made);
            goto out;
        }
    }
    double dt = cli_now() - t0;
    if (nseq == 1 && !ids_out)
        printf("\n");
    fflush(stdout);
    if (nseq == 1)
        fprintf(stderr, "%s: %d tokens in %.1f s (%.1f tok/s), stopped: %s\n", cli_prog, made,
                dt, dt > 0 ? made / dt : 0.0, seqs[0].why);
    else
        fprintf(stderr, "%s: %d sequences, %d tokens in %.1f s (%.1f tok/s)\n", cli_prog, nseq,
                made, dt, dt > 0 ? made / dt : 0.0);

out:
    model_gen_free(&g);
    model_free(&m);
    for (int i = 0; seqs && i < nseq; i++) {
        free(seqs[i].ids);
        free(seqs[i].text);
        free(seqs[i].out);
    }
    free(seqs);
    free(logits);
    free(next);
    free(file_text);
    free(prompts.v);
    free(stops.v);
    free(idlists.v);
    tsr_tokenizer_free(tok);
    if (runtime) {
        rc = tsr_shutdown();
        if (rc != TSR_OK && status == 0)
            status = cli_lib_fail(rc, "runtime shutdown");
    }
    return status;
}
