/* tools/tessera-tokenize.c — turn text files into llm.c token shards for
 * tessera-train and tessera-eval.
 *
 *   tessera-tokenize [--vocab DIR] [--val-fraction F] INPUT.txt... -o OUT
 *
 * Each input file is one document; every document is preceded by the
 * end-of-text id (as llm.c's data scripts do). The tokens of all documents
 * go to OUT_train.bin, except the last fraction F of them, which goes to
 * OUT_val.bin. GPT-2's BPE (DIR/encoder.json + DIR/vocab.bpe) or a Hugging
 * Face tokenizer.json (Llama 3's) with --vocab, else the byte-level tokenizer
 * (ids 0..255 are bytes, 256 end-of-text). The shards hold uint16 tokens
 * (llm.c's GPT-2 kind) when the tokenizer's vocabulary fits 65536 ids, else
 * uint32 tokens (llm.c's Llama 3 kind), whatever ids the text happens to use.
 * The two shards replace the old ones together, with a manifest OUT.manifest
 * of their sizes and checksums that the other programs check (shards.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "shards.h"

static const char usage[] =
    "usage: tessera-tokenize [--vocab DIR] [--val-fraction F] INPUT.txt... -o OUT\n"
    "Tokenize text files into llm.c token shards OUT_train.bin and OUT_val.bin\n"
    "(replaced together; OUT.manifest lists their sizes and checksums).\n"
    "  -o, --out OUT        output prefix (required): OUT_train.bin, OUT_val.bin\n"
    "  --vocab DIR|FILE     GPT-2 BPE from DIR/encoder.json and DIR/vocab.bpe, or a\n"
    "                       tokenizer.json (FILE, or DIR holding only that)\n"
    "                       (default: byte-level tokenizer, vocabulary 257)\n"
    "  --val-fraction F     last fraction of the tokens written to OUT_val.bin\n"
    "                       (default 0: no validation shard; an old one is removed)\n"
    "  INPUT.txt...         text files, one document each ('-' reads stdin)\n"
    "Each document is preceded by the end-of-text id. Tokens are uint16 (llm.c's\n"
    "GPT-2 shards) for a vocabulary of up to 65536 ids, else uint32 (Llama 3's).\n";

#define MAX_INPUTS 4096

int main(int argc, char **argv)
{
    const char *vocab_dir = NULL, *out = NULL;
    double val_fraction = 0.0;
    cli_opt_t opts[] = {
        {"out", 'o', CLI_STR, &out, 0, 0, 0},
        {"vocab", 0, CLI_STR, &vocab_dir, 0, 0, 0},
        {"val-fraction", 0, CLI_FLOAT, &val_fraction, 0.0, 0.99, 0},
    };
    static const char *inputs[MAX_INPUTS];
    int ninputs = 0;
    int rc = cli_parse("tessera-tokenize", usage, opts, (int)(sizeof opts / sizeof *opts), argc,
                       argv, inputs, MAX_INPUTS, &ninputs);
    if (rc >= 0)
        return rc;
    if (out == NULL)
        return cli_usage_error("missing -o OUT");
    if (ninputs == 0)
        return cli_usage_error("no input files");

    tsr_tokenizer_t *tok = NULL;
    if (cli_tokenizer_open(vocab_dir, &tok) != 0)
        return 1;
    int32_t eot = tsr_tokenizer_eot(tok);
    if (eot < 0) {
        tsr_tokenizer_free(tok);
        return cli_fail("the tokenizer has no end-of-text token to separate documents");
    }
    /* by the vocabulary, not the ids of this text: every shard of one
     * tokenizer has the same kind */
    int width = tsr_tokenizer_vocab_size(tok) > 65536 ? 4 : 2;

    int32_t *all = NULL;
    size_t n = 0, cap = 0;
    int status = 0;
    for (int i = 0; i < ninputs && status == 0; i++) {
        char *text = NULL;
        size_t len = 0;
        if (cli_read_file(inputs[i], &text, &len) != 0) {
            status = 1;
            break;
        }
        int32_t *ids = NULL;
        size_t nids = 0;
        rc = tsr_tokenizer_encode(tok, text, len, &ids, &nids);
        free(text);
        if (rc != TSR_OK) {
            status = cli_lib_fail(rc, "cannot tokenize '%s'", inputs[i]);
            break;
        }
        if (n + nids + 1 > cap) {
            size_t ncap = cap ? cap : 1 << 20;
            while (ncap < n + nids + 1)
                ncap *= 2;
            int32_t *na = realloc(all, ncap * sizeof *na);
            if (na == NULL) {
                free(ids);
                status = cli_fail("out of memory after %zu tokens", n);
                break;
            }
            all = na;
            cap = ncap;
        }
        all[n++] = eot;
        memcpy(all + n, ids, nids * sizeof *ids);
        n += nids;
        free(ids);
        printf("%s: %zu bytes, %zu tokens (%.2f bytes/token)\n", inputs[i], len, nids,
               nids ? (double)len / (double)nids : 0.0);
    }
    if (status == 0) {
        size_t nval = (size_t)((double)n * val_fraction);
        if (val_fraction > 0.0 && nval < 2)
            status = cli_fail("--val-fraction %g of %zu tokens leaves fewer than 2 "
                              "validation tokens",
                              val_fraction, n);
        size_t ntrain = n - nval;
        /* both shards (and the manifest) replaced together, or neither */
        if (status == 0 && (status = shards_publish(out, all, ntrain, nval, width)) == 0) {
            const char *kind = width == 2 ? "uint16" : "uint32";
            printf("%s_train.bin: %zu tokens (%s)\n", out, ntrain, kind);
            if (nval > 0)
                printf("%s_val.bin: %zu tokens (%s)\n", out, nval, kind);
            printf("%s.manifest: both shards' sizes and checksums\n", out);
        }
        if (status == 0)
            printf("vocabulary %d (end-of-text %d): train with --vocab %d\n",
                   tsr_tokenizer_vocab_size(tok), (int)eot, tsr_tokenizer_vocab_size(tok));
    }
    free(all);
    tsr_tokenizer_free(tok);
    return status;
}
