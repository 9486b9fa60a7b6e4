/* tests/fuzz/fuzz_tokenizer.c — the GPT-2 tokenizer's files and encoder.
 *
 * Byte 0 of the input picks what the rest is (mod 4):
 *   0  encoder.json, a NUL byte, vocab.bpe: both files from the fuzzer;
 *   1  vocab.bpe alone, against a small valid encoder.json made here;
 *   2  text to encode with that small vocabulary and with the byte-level
 *      tokenizer: decode(encode(text)) must give the text back, and a second
 *      encode (through the word cache) the same ids; then the bytes read as
 *      ids are decoded (unknown ids refused);
 *   3  a differential check of the BPE itself: byte 1 counts merges, each
 *      two bytes naming two tokens over the letters a..e; the rest is one
 *      word over those letters. The tokenizer's ids must equal those of a
 *      naive transcription of encoder.py's bpe() loop here.
 * Whenever the files are accepted, a sample text must round-trip too.
 * Files reach the loader through in-memory files (it takes paths).
 */
#include <tessera/gpt2.h>

#include "fuzz_util.h"

#define EOT_TEXT "<|endoftext|>"

static fuzz_file_t enc_file, bpe_file;

/* ---- vocabularies written here ------------------------------------------ */

enum { MAX_TOKENS = 512, MAX_TOKEN_LEN = 64 };

typedef struct {
    char s[MAX_TOKENS][MAX_TOKEN_LEN + 1];
    size_t len[MAX_TOKENS];
    int n; /* tokens 0..255 are the bytes */
    int merge[MAX_TOKENS][2];
    int nmerge;
} vocab_t;

static void vocab_init(vocab_t *v)
{
    memset(v, 0, sizeof *v);
    for (int b = 0; b < 256; b++)
        v->s[b][0] = (char)b, v->len[b] = 1;
    v->n = 256;
}

static int vocab_find(const vocab_t *v, const char *s, size_t n)
{
    for (int i = 0; i < v->n; i++)
        if (v->len[i] == n && memcmp(v->s[i], s, n) == 0)
            return i;
    return -1;
}

/* Add the merge of tokens a and b (and their concatenation as a token);
 * -1 when the table is full or the token too long. */
static int vocab_merge(vocab_t *v, int a, int b)
{
    size_t n = v->len[a] + v->len[b];
    if (n > MAX_TOKEN_LEN || v->nmerge == MAX_TOKENS)
        return -1;
    char s[2 * MAX_TOKEN_LEN];
    memcpy(s, v->s[a], v->len[a]);
    memcpy(s + v->len[a], v->s[b], v->len[b]);
    int ab = vocab_find(v, s, n);
    if (ab < 0) {
        if (v->n == MAX_TOKENS - 1) /* the last id is <|endoftext|>'s */
            return -1;
        ab = v->n++;
        memcpy(v->s[ab], s, n);
        v->len[ab] = n;
    }
    v->merge[v->nmerge][0] = a, v->merge[v->nmerge][1] = b;
    v->nmerge++;
    return ab;
}

/* GPT-2's bytes_to_unicode(), independent of the library's: printable
 * Latin-1 bytes stand for themselves, the others for 256, 257, … */
static unsigned unicode_table[256];

static void unicode_init(void)
{
    unsigned n = 0;
    for (unsigned x = 0; x < 256; x++) {
        int printable = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174;
        unicode_table[x] = printable ? x : 256 + n++;
    }
}

static unsigned unicode_of(unsigned b)
{
    return unicode_table[b];
}

typedef struct {
    char *s;
    size_t n, cap;
} text_t;

static void put(text_t *t, const void *p, size_t n)
{
    if (t->n + n > t->cap) {
        t->cap = t->cap ? t->cap : 1024;
        while (t->cap < t->n + n)
            t->cap *= 2;
        t->s = realloc(t->s, t->cap);
        FUZZ_CHECK(t->s, "out of memory");
    }
    memcpy(t->s + t->n, p, n);
    t->n += n;
}

/* A token in GPT-2's alphabet, as UTF-8 (JSON-escaped when json). */
static void put_token(text_t *t, const char *s, size_t n, int json)
{
    for (size_t i = 0; i < n; i++) {
        unsigned cp = unicode_of((unsigned char)s[i]);
        char u[2];
        if (json && (cp == '"' || cp == '\\'))
            put(t, "\\", 1);
        if (cp < 0x80) {
            u[0] = (char)cp;
            put(t, u, 1);
        } else {
            u[0] = (char)(0xc0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3f));
            put(t, u, 2);
        }
    }
}

static void write_encoder(const vocab_t *v, text_t *t)
{
    char num[32];
    put(t, "{", 1);
    for (int i = 0; i < v->n; i++) {
        put(t, "\"", 1);
        put_token(t, v->s[i], v->len[i], 1);
        snprintf(num, sizeof num, "\": %d, ", i);
        put(t, num, strlen(num));
    }
    snprintf(num, sizeof num, "\"" EOT_TEXT "\": %d}", v->n);
    put(t, num, strlen(num));
}

static void write_merges(const vocab_t *v, text_t *t)
{
    put(t, "#version: 0.2\n", 14);
    for (int i = 0; i < v->nmerge; i++) {
        int a = v->merge[i][0], b = v->merge[i][1];
        put_token(t, v->s[a], v->len[a], 0);
        put(t, " ", 1);
        put_token(t, v->s[b], v->len[b], 0);
        put(t, "\n", 1);
    }
}

/* A small English-like vocabulary with a few multi-byte characters. */
static const char *const fixed_merges[][2] = {
    {" ", "t"},   {"h", "e"},       {" t", "he"},  {"i", "n"},    {"e", "r"},
    {"a", "n"},   {" ", "a"},       {"o", "n"},    {"r", "e"},    {"i", "s"},
    {" ", "s"},   {"e", "n"},       {"l", "l"},    {"o", "r"},    {" ", "w"},
    {"in", "g"},  {" ", "c"},       {"e", "s"},    {"a", "t"},    {"o", "u"},
    {"\n", "\n"}, {" ", " "},       {"  ", "  "},  {"1", "2"},    {"12", "3"},
    {"c", "a"},   {"ca", "f"},      {"\xc3", "\xa9"}, {"caf", "\xc3\xa9"}, {"'", "s"},
    {"'", "t"},   {"\xe2", "\x98"}, {"\xe2\x98", "\x95"}, {"he", "ll"}, {"hell", "o"},
    {"l", "d"},   {" w", "or"},     {" wor", "ld"}, {"a", "a"},   {"aa", "aa"},
    {" c", "at"}, {"\t", "\t"},     {"\xff", "\xff"},
};
static vocab_t fixed;
static text_t fixed_encoder;
static text_t fixed_bpe;

static int token_of(const vocab_t *v, const char *s)
{
    int id = vocab_find(v, s, strlen(s));
    FUZZ_CHECK(id >= 0, "fixed merge names \"%s\" before it exists", s);
    return id;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    unicode_init();
    fuzz_file_init(&enc_file, "encoder.json");
    fuzz_file_init(&bpe_file, "vocab.bpe");
    vocab_init(&fixed);
    for (size_t i = 0; i < sizeof fixed_merges / sizeof fixed_merges[0]; i++)
        FUZZ_CHECK(vocab_merge(&fixed, token_of(&fixed, fixed_merges[i][0]),
                               token_of(&fixed, fixed_merges[i][1])) >= 0, "fixed merge");
    write_encoder(&fixed, &fixed_encoder);
    write_merges(&fixed, &fixed_bpe);
    return 0;
}

/* ---- checks --------------------------------------------------------------- */

static const char sample[] = "hello world, the cat's caf\xc3\xa9 \xe2\x98\x95  \n\n 123 "
                             EOT_TEXT "x\t\t\x01\xff\xff aaaaa don't";

/* decode(encode(text)) == text; a second encode gives the same ids. */
static void round_trip(const tsr_tokenizer_t *tok, const char *text, size_t len)
{
    int32_t *ids, *again;
    size_t n, n2;
    int rc = tsr_tokenizer_encode(tok, text, len, &ids, &n);
    FUZZ_CHECK(rc == TSR_OK, "encode: %s", tsr_error_message());
    FUZZ_CHECK(ids != NULL && n <= len, "%zu ids for %zu bytes", n, len);
    char *back;
    size_t blen;
    rc = tsr_tokenizer_decode(tok, ids, n, &back, &blen);
    FUZZ_CHECK(rc == TSR_OK, "decode of encoded ids: %s", tsr_error_message());
    FUZZ_CHECK(blen == len && memcmp(back, text, len) == 0 && back[blen] == 0,
               "round trip of %zu bytes gave %zu", len, blen);
    free(back);
    rc = tsr_tokenizer_encode(tok, text, len, &again, &n2);
    FUZZ_CHECK(rc == TSR_OK && n2 == n && memcmp(again, ids, n * sizeof *ids) == 0,
               "a second encode differs");
    free(again), free(ids);
}

/* The input's bytes as 16-bit ids: each known id decodes to its bytes
 * (checked through the encoder: re-encoding gives the same text back),
 * an unknown one is refused. */
static void decode_any(const tsr_tokenizer_t *tok, const uint8_t *p, size_t n)
{
    size_t k = n / 2 < 256 ? n / 2 : 256;
    int32_t ids[256];
    int vocab = tsr_tokenizer_vocab_size(tok), bad = 0;
    for (size_t i = 0; i < k; i++) {
        ids[i] = (int32_t)(p[2 * i] | p[2 * i + 1] << 8) % (vocab + 8);
        bad |= ids[i] >= vocab;
    }
    char *text = (char *)1;
    size_t len;
    fuzz_clear_error();
    int rc = tsr_tokenizer_decode(tok, ids, k, &text, &len);
    if (bad) {
        FUZZ_CHECK(rc == TSR_EINVAL && text == NULL, "an unknown id decoded: %d", rc);
        return;
    }
    FUZZ_CHECK(rc == TSR_OK || rc == TSR_EINVAL, "decode: %d", rc);
    if (rc == TSR_OK) {
        FUZZ_CHECK(text[len] == 0, "not NUL-terminated");
        round_trip(tok, text, len);
        free(text);
    }
}

static tsr_tokenizer_t *open_files(const void *enc, size_t nenc, const void *bpe, size_t nbpe)
{
    fuzz_file_set(&enc_file, enc, nenc);
    fuzz_file_set(&bpe_file, bpe, nbpe);
    tsr_tokenizer_t *tok = (tsr_tokenizer_t *)1;
    fuzz_clear_error();
    int rc = tsr_tokenizer_open(&tok, enc_file.path, bpe_file.path);
    if (rc != TSR_OK) {
        FUZZ_CHECK_REFUSAL(rc);
        FUZZ_CHECK(tok == NULL, "a failed open left a tokenizer");
        return NULL;
    }
    int eot = tsr_tokenizer_eot(tok), vocab = tsr_tokenizer_vocab_size(tok);
    FUZZ_CHECK(eot >= 0 && eot < vocab, "eot %d of %d", eot, vocab);
    return tok;
}

/* ---- the differential BPE check ------------------------------------------- */

/* encoder.py's bpe(): merge every occurrence of the lowest-ranked adjacent
 * pair (the later rank of a repeated pair), left to right, until no pair
 * has a rank. */
static size_t ref_bpe(const vocab_t *v, int *w, size_t n)
{
    for (;;) {
        int best = -1;
        for (size_t i = 0; i + 1 < n; i++)
            for (int r = v->nmerge - 1; r >= 0; r--)
                if (v->merge[r][0] == w[i] && v->merge[r][1] == w[i + 1]) {
                    if (best < 0 || r < best)
                        best = r;
                    break; /* r is this pair's rank: its last line */
                }
        if (best < 0)
            return n;
        int a = v->merge[best][0], b = v->merge[best][1];
        char s[2 * MAX_TOKEN_LEN];
        memcpy(s, v->s[a], v->len[a]);
        memcpy(s + v->len[a], v->s[b], v->len[b]);
        int ab = vocab_find(v, s, v->len[a] + v->len[b]);
        size_t k = 0;
        for (size_t i = 0; i < n;) {
            if (i + 1 < n && w[i] == a && w[i + 1] == b)
                w[k++] = ab, i += 2;
            else
                w[k++] = w[i++];
        }
        n = k;
    }
}

static void differential(const uint8_t *p, size_t n)
{
    if (n < 1)
        return;
    static vocab_t v;
    vocab_init(&v);
    int alpha[MAX_TOKENS], nalpha = 0;
    for (int c = 'a'; c <= 'e'; c++)
        alpha[nalpha++] = c;
    size_t k = p[0] % 32, i = 1;
    for (size_t m = 0; m < k && i + 1 < n; m++, i += 2) {
        int a = alpha[p[i] % nalpha], b = alpha[p[i + 1] % nalpha];
        int before = v.n, ab = vocab_merge(&v, a, b);
        if (ab >= before)
            alpha[nalpha++] = ab;
    }
    if (v.nmerge == 0) /* vocab.bpe needs at least one merge */
        vocab_merge(&v, 'a', 'b');
    char word[400];
    size_t len = 0;
    for (; i < n && len < sizeof word; i++)
        word[len++] = (char)('a' + p[i] % 5);

    text_t enc = {0}, bpe = {0};
    write_encoder(&v, &enc);
    write_merges(&v, &bpe);
    tsr_tokenizer_t *tok = open_files(enc.s, enc.n, bpe.s, bpe.n);
    FUZZ_CHECK(tok, "a vocabulary written here was refused: %s", tsr_error_message());
    int32_t *ids;
    size_t nids;
    FUZZ_CHECK(tsr_tokenizer_encode(tok, word, len, &ids, &nids) == TSR_OK, "encode: %s",
               tsr_error_message());
    int w[sizeof word];
    for (size_t j = 0; j < len; j++)
        w[j] = (unsigned char)word[j];
    size_t nw = ref_bpe(&v, w, len);
    FUZZ_CHECK(nw == nids, "\"%.*s\": %zu ids, the reference %zu", (int)len, word, nids, nw);
    for (size_t j = 0; j < nw; j++)
        FUZZ_CHECK(ids[j] == w[j], "\"%.*s\": id %zu is %d, the reference %d", (int)len, word,
                   j, (int)ids[j], w[j]);
    free(ids);
    round_trip(tok, word, len);
    tsr_tokenizer_free(tok);
    free(enc.s), free(bpe.s);
}

/* ---- entry ---------------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    tsr_tokenizer_t *tok = NULL;
    switch (data[0] % 4) {
    case 0: {
        const uint8_t *nul = memchr(p, 0, n);
        size_t nenc = nul ? (size_t)(nul - p) : n;
        size_t nbpe = nul ? n - nenc - 1 : 0;
        tok = open_files(p, nenc, nul ? nul + 1 : p, nbpe);
        if (tok)
            round_trip(tok, sample, sizeof sample - 1);
        break;
    }
    case 1:
        tok = open_files(fixed_encoder.s, fixed_encoder.n, p, n);
        if (tok)
            round_trip(tok, sample, sizeof sample - 1);
        break;
    case 2:
        tok = open_files(fixed_encoder.s, fixed_encoder.n, fixed_bpe.s, fixed_bpe.n);
        FUZZ_CHECK(tok, "the fixed vocabulary was refused: %s", tsr_error_message());
        round_trip(tok, (const char *)p, n);
        decode_any(tok, p, n);
        tsr_tokenizer_free(tok);
        FUZZ_CHECK(tsr_tokenizer_open(&tok, NULL, NULL) == TSR_OK, "byte-level tokenizer");
        round_trip(tok, (const char *)p, n);
        decode_any(tok, p, n);
        break;
    case 3: differential(p, n); break;
    }
    tsr_tokenizer_free(tok);
    return 0;
}
