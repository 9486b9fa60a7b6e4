/* tests/fuzz/fuzz_tokenizer_json.c — Hugging Face tokenizer.json and Llama
 * 3's pre-tokenizer.
 *
 * Byte 0 of the input picks what the rest is (mod 3):
 *   0  a tokenizer.json from the fuzzer: refused with a message, or a
 *      tokenizer on which a sample text round-trips (with and without the
 *      added tokens matched) and any ids decode or are refused;
 *   1  text for a small valid tokenizer.json made here (Llama 3's
 *      pre-tokenizer, six merges, added tokens; ignore_merges from bit 3
 *      of byte 0): decode(encode(text)) == text under both flag settings,
 *      a second encode gives the same ids, the split into pieces equals
 *      that of a naive backtracking transcription of the pattern here, and
 *      the ids those of a naive transcription of HF's BPE (lowest-ranked
 *      pair first, leftmost among equals, one merge at a time);
 *   2  the input spliced into that small file's merges list, after its
 *      six merges (near-valid files); checked as in mode 0.
 * Files reach the loader through in-memory files (it takes paths).
 */
#include <tessera/gpt2.h>

#include "fuzz_util.h"
#include "nn/io/unicode_tables.h"

static fuzz_file_t json_file;

typedef struct {
    char *s;
    size_t n, cap;
} text_t;

static void put(text_t *t, const void *p, size_t n)
{
    if (t->n + n + 1 > t->cap) {
        t->cap = 2 * (t->n + n + 1);
        t->s = realloc(t->s, t->cap);
        FUZZ_CHECK(t->s != NULL, "out of memory");
    }
    memcpy(t->s + t->n, p, n);
    t->n += n;
    t->s[t->n] = 0;
}

static void puts_(text_t *t, const char *s)
{
    put(t, s, strlen(s));
}

static unsigned byte_char(unsigned b)
{
    static unsigned map[256], done;
    if (!done) {
        unsigned n = 0;
        for (unsigned c = 0; c < 256; c++) {
            int printable = (c >= '!' && c <= '~') || (c >= 0xa1 && c <= 0xac) || c >= 0xae;
            map[c] = printable ? c : 256 + n++;
        }
        done = 1;
    }
    return map[b];
}

static void put_chars(text_t *t, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char e[8];
        snprintf(e, sizeof e, "\\u%04x", byte_char(*p));
        puts_(t, e);
    }
}

static const char LLAMA3_RE[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| "
    "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+";
/* ids 256.. ; the added tokens follow (263..265) */
static const char *const tokens[] = {" t", "he", " the", "ll", "xyz", "xy", "xyx"};
enum { NTOK = sizeof tokens / sizeof *tokens };
/* (xy,x) ranks before (x,y), which builds its half (as merges made from
 * tiktoken ranks can): merging one pair at a time differs from encoder.py */
static const char *const merges[][2] = {{" ", "t"}, {"h", "e"}, {" t", "he"}, {"l", "l"},
                                        {"xy", "x"}, {"x", "y"}};
enum { NMERGE = sizeof merges / sizeof *merges };

/* The small tokenizer.json; `splice` (n bytes) goes inside its merges list. */
static void small_json(text_t *t, int ignore_merges, const uint8_t *splice, size_t n)
{
    t->n = 0;
    puts_(t, "{\"added_tokens\": [{\"id\": 263, \"content\": \"<|a|>\"}, {\"id\": 264, "
             "\"content\": \"<|a|>b\"}, {\"id\": 265, \"content\": \"<|end_of_text|>\"}], "
             "\"normalizer\": null, \"pre_tokenizer\": {\"type\": \"Sequence\", "
             "\"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"");
    puts_(t, LLAMA3_RE);
    puts_(t, "\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", "
             "\"add_prefix_space\": false, \"use_regex\": false}]}, \"decoder\": {\"type\": "
             "\"ByteLevel\"}, \"model\": {\"type\": \"BPE\", \"ignore_merges\": ");
    puts_(t, ignore_merges ? "true" : "false");
    puts_(t, ", \"vocab\": {");
    for (unsigned b = 0; b < 256; b++) {
        char e[32];
        snprintf(e, sizeof e, "%s\"\\u%04x\": %u", b ? ", " : "", byte_char(b), b);
        puts_(t, e);
    }
    for (int i = 0; i < NTOK; i++) {
        char e[32];
        puts_(t, ", \"");
        put_chars(t, tokens[i]);
        snprintf(e, sizeof e, "\": %d", 256 + i);
        puts_(t, e);
    }
    puts_(t, "}, \"merges\": [");
    for (int i = 0; i < NMERGE; i++) {
        puts_(t, i ? ", " : "");
        puts_(t, i % 2 ? "\"" : "[\"");
        put_chars(t, merges[i][0]);
        puts_(t, i % 2 ? " " : "\", \"");
        put_chars(t, merges[i][1]);
        puts_(t, i % 2 ? "\"" : "\"]");
    }
    if (n) {
        puts_(t, ", ");
        put(t, splice, n);
    }
    puts_(t, "]}}");
}

/* ---- a naive transcription of the pattern ---------------------------------- */

/* The text as characters: a valid UTF-8 sequence, or one byte of no class. */
typedef struct {
    int32_t cp; /* -1: a byte outside valid UTF-8 */
    size_t at;  /* byte offset */
} ch_t;

static size_t decode(const unsigned char *s, size_t n, ch_t *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t m = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
                 : (c & 0xf8) == 0xf0 ? 4 : 0;
        uint32_t cp = m == 1 ? c : m == 2 ? c & 0x1f : m == 3 ? c & 0x0f : c & 0x07;
        int ok = m > 0 && i + m <= n;
        for (size_t j = 1; ok && j < m; j++) {
            ok = (s[i + j] & 0xc0) == 0x80;
            cp = cp << 6 | (s[i + j] & 0x3f);
        }
        if (ok && m > 1) {
            static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
            ok = cp >= least[m] && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
        }
        out[k++] = (ch_t){ok ? (int32_t)cp : -1, i};
        i += ok ? m : 1;
    }
    return k;
}

/* The last range starting at or below cp, by bisection on the starts. */
static int in_table(const uint32_t (*r)[2], size_t n, int32_t cp)
{
    if (cp < 0 || (uint32_t)cp < r[0][0])
        return 0;
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = hi - (hi - lo) / 2;
        if (r[mid][0] <= (uint32_t)cp)
            lo = mid;
        else
            hi = mid - 1;
    }
    return (uint32_t)cp <= r[lo][1];
}
#define IS_L(c) in_table(tsr__uni_letter, sizeof tsr__uni_letter / sizeof *tsr__uni_letter, (c))
#define IS_N(c) in_table(tsr__uni_number, sizeof tsr__uni_number / sizeof *tsr__uni_number, (c))

static int is_s(int32_t c)
{
    static const int32_t ws[] = {9, 10, 11, 12, 13, 32, 0x85, 0xa0, 0x1680, 0x2028, 0x2029,
                                 0x202f, 0x205f, 0x3000};
    for (size_t i = 0; i < sizeof ws / sizeof *ws; i++)
        if (c == ws[i])
            return 1;
    return c >= 0x2000 && c <= 0x200a;
}

static int is_nl(int32_t c)
{
    return c == '\r' || c == '\n';
}

static int fold_eq(int32_t c, char want)
{
    return c == want || c == want - 32 || (want == 's' && c == 0x17f);
}

/* The end (in characters) of the match at i, alternative by alternative,
 * each with a regex engine's greedy-then-backtrack order. */
static size_t ref_match(const ch_t *c, size_t n, size_t i)
{
    static const char *const con[] = {"s", "t", "re", "ve", "m", "ll", "d"};
    for (int a = 0; a < 7; a++) {
        size_t l = strlen(con[a]), ok = c[i].cp == '\'' && i + l < n;
        for (size_t j = 0; ok && j < l; j++)
            ok = fold_eq(c[i + 1 + j].cp, con[a][j]);
        if (ok)
            return i + 1 + l;
    }
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    int opt = !is_nl(c[i].cp) && !IS_L(c[i].cp) && !IS_N(c[i].cp);
    for (int take = opt; take >= 0; take--) {
        size_t j = i + (size_t)take;
        while (j < n && IS_L(c[j].cp))
            j++;
        if (j > i + (size_t)take)
            return j;
    }
    /* \p{N}{1,3} */
    size_t j = i;
    while (j < n && j < i + 3 && IS_N(c[j].cp))
        j++;
    if (j > i)
        return j;
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    for (int take = c[i].cp == ' '; take >= 0; take--) {
        size_t k = i + (size_t)take;
        while (k < n && !is_s(c[k].cp) && !IS_L(c[k].cp) && !IS_N(c[k].cp))
            k++;
        if (k > i + (size_t)take) {
            while (k < n && is_nl(c[k].cp))
                k++;
            return k;
        }
    }
    size_t ws = 0;
    while (i + ws < n && is_s(c[i + ws].cp))
        ws++;
    /* \s*[\r\n]+ */
    for (size_t k = ws + 1; k-- > 0;) {
        size_t e = i + k;
        while (e < n && is_nl(c[e].cp))
            e++;
        if (e > i + k)
            return e;
    }
    /* \s+(?!\S) */
    for (size_t k = ws; k >= 1; k--)
        if (i + k == n || is_s(c[i + k].cp))
            return i + k;
    /* \s+ */
    FUZZ_CHECK(ws > 0, "no alternative matched at %zu", i);
    return i + ws;
}

/* The tokenizer's pieces against the transcription's. */
static void differential_split(const tsr_tokenizer_t *tok, const char *text, size_t len)
{
    size_t *ends, ne;
    int rc = tsr_tokenizer_split(tok, text, len, 0, &ends, &ne);
    FUZZ_CHECK(rc == TSR_OK, "split: %s", tsr_error_message());
    ch_t *c = malloc((len + 1) * sizeof *c);
    FUZZ_CHECK(c != NULL, "out of memory");
    size_t n = decode((const unsigned char *)text, len, c), k = 0;
    c[n].at = len;
    for (size_t i = 0; i < n; k++) {
        size_t j = ref_match(c, n, i);
        FUZZ_CHECK(k < ne && ends[k] == c[j].at, "piece %zu: ends at %zu, the pattern says %zu",
                   k, k < ne ? ends[k] : 0, c[j].at);
        i = j;
    }
    FUZZ_CHECK(k == ne, "%zu pieces, the pattern gives %zu", ne, k);
    free(c), free(ends);
}

/* ---- a naive transcription of HF's BPE ------------------------------------ */

static int token_id(const char *s, size_t n)
{
    if (n == 1)
        return (unsigned char)s[0];
    for (int i = 0; i < NTOK; i++)
        if (strlen(tokens[i]) == n && memcmp(tokens[i], s, n) == 0)
            return 256 + i;
    return -1;
}

/* One word: merge the adjacent pair of lowest rank (leftmost first) until
 * none has one; with ignore_merges a word that is a token is that token. */
static size_t ref_bpe(const char *s, size_t n, int ignore_merges, int32_t *out)
{
    if (ignore_merges && token_id(s, n) >= 0) {
        out[0] = token_id(s, n);
        return 1;
    }
    size_t *at = malloc((n + 1) * sizeof *at), k = n; /* symbol i is s[at[i], at[i+1]) */
    FUZZ_CHECK(at != NULL, "out of memory");
    for (size_t i = 0; i <= n; i++)
        at[i] = i;
    for (;;) {
        int best = NMERGE;
        size_t where = 0;
        for (size_t i = 0; i + 1 < k; i++)
            for (int r = 0; r < best; r++) {
                size_t la = strlen(merges[r][0]), lb = strlen(merges[r][1]);
                if (at[i + 1] - at[i] == la && at[i + 2] - at[i + 1] == lb &&
                    memcmp(s + at[i], merges[r][0], la) == 0 &&
                    memcmp(s + at[i + 1], merges[r][1], lb) == 0) {
                    best = r, where = i;
                    break;
                }
            }
        if (best == NMERGE)
            break;
        memmove(at + where + 1, at + where + 2, (k - where - 1) * sizeof *at);
        k--;
    }
    for (size_t i = 0; i < k; i++) {
        out[i] = token_id(s + at[i], at[i + 1] - at[i]);
        FUZZ_CHECK(out[i] >= 0, "a merge made no token");
    }
    free(at);
    return k;
}

/* encode(text) against the transcription over the tokenizer's pieces. */
static void differential_bpe(const tsr_tokenizer_t *tok, int ignore_merges, const char *text,
                             size_t len)
{
    size_t *ends, ne, n, k = 0;
    int32_t *ids, *want = malloc((len + 1) * sizeof *want);
    FUZZ_CHECK(want != NULL, "out of memory");
    FUZZ_CHECK(tsr_tokenizer_split(tok, text, len, 0, &ends, &ne) == TSR_OK, "split");
    for (size_t i = 0, at = 0; i < ne; at = ends[i++])
        k += ref_bpe(text + at, ends[i] - at, ignore_merges, want + k);
    FUZZ_CHECK(tsr_tokenizer_encode(tok, text, len, &ids, &n) == TSR_OK, "encode");
    FUZZ_CHECK(n == k && memcmp(ids, want, n * sizeof *ids) == 0,
               "%zu ids, the transcription gives %zu (or other ids)", n, k);
    free(ids), free(ends), free(want);
}

/* ---- checks --------------------------------------------------------------- */

static const char sample[] = "Hello world, the cat's CAF\xc3\x89 \xe2\x98\x95  \n\n 12345 "
                             "<|a|>b<|end_of_text|>x\t\t\x01\xff\xff aaaaa DON'T \xd9\xa3\xd9\xa4";

static void round_trip(const tsr_tokenizer_t *tok, const char *text, size_t len, unsigned flags)
{
    int32_t *ids, *again;
    size_t n, n2;
    int rc = tsr_tokenizer_encode_ex(tok, text, len, flags, &ids, &n);
    FUZZ_CHECK(rc == TSR_OK, "encode: %s", tsr_error_message());
    FUZZ_CHECK(ids != NULL && n <= len, "%zu ids for %zu bytes", n, len);
    char *back;
    size_t blen;
    rc = tsr_tokenizer_decode(tok, ids, n, &back, &blen);
    FUZZ_CHECK(rc == TSR_OK, "decode of encoded ids: %s", tsr_error_message());
    FUZZ_CHECK(blen == len && memcmp(back, text, len) == 0 && back[blen] == 0,
               "round trip of %zu bytes gave %zu", len, blen);
    free(back);
    rc = tsr_tokenizer_encode_ex(tok, text, len, flags, &again, &n2);
    FUZZ_CHECK(rc == TSR_OK && n2 == n && memcmp(again, ids, n * sizeof *ids) == 0,
               "a second encode differs");
    free(again), free(ids);
}

static void decode_any(const tsr_tokenizer_t *tok, const uint8_t *p, size_t n)
{
    size_t k = n / 2 < 256 ? n / 2 : 256;
    int32_t ids[256];
    int vocab = tsr_tokenizer_vocab_size(tok);
    for (size_t i = 0; i < k; i++)
        ids[i] = (int32_t)(p[2 * i] | p[2 * i + 1] << 8) % (vocab + 8);
    char *text = NULL;
    size_t len;
    int rc = tsr_tokenizer_decode(tok, ids, k, &text, &len);
    FUZZ_CHECK(rc == TSR_OK || rc == TSR_EINVAL, "decode: %d", rc);
    if (rc == TSR_OK) {
        round_trip(tok, text, len, 0);
        free(text);
    }
}

static tsr_tokenizer_t *open_json(const void *p, size_t n)
{
    fuzz_file_set(&json_file, p, n);
    tsr_tokenizer_t *tok = (tsr_tokenizer_t *)1;
    fuzz_clear_error();
    int rc = tsr_tokenizer_open_json(&tok, json_file.path);
    if (rc != TSR_OK) {
        FUZZ_CHECK_REFUSAL(rc);
        FUZZ_CHECK(tok == NULL, "a failed open left a tokenizer");
        return NULL;
    }
    int eot = tsr_tokenizer_eot(tok), vocab = tsr_tokenizer_vocab_size(tok);
    FUZZ_CHECK(eot >= -1 && eot < vocab, "eot %d of %d", eot, vocab);
    return tok;
}

static tsr_tokenizer_t *small[2]; /* ignore_merges false, true */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_file_init(&json_file, "tokenizer.json");
    text_t t = {0};
    for (int im = 0; im < 2; im++) {
        small_json(&t, im, NULL, 0);
        small[im] = open_json(t.s, t.n);
        FUZZ_CHECK(small[im], "the small tokenizer.json was refused: %s", tsr_error_message());
    }
    free(t.s);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    tsr_tokenizer_t *tok = NULL;
    text_t t = {0};
    switch (data[0] % 3) {
    case 0:
        tok = open_json(p, n);
        break;
    case 1: {
        const tsr_tokenizer_t *st = small[data[0] >> 3 & 1];
        round_trip(st, (const char *)p, n, 0);
        round_trip(st, (const char *)p, n, TSR_TOKENIZE_SPECIAL);
        differential_split(st, (const char *)p, n);
        differential_bpe(st, data[0] >> 3 & 1, (const char *)p, n);
        decode_any(st, p, n);
        break;
    }
    case 2:
        small_json(&t, data[0] >> 3 & 1, p, n);
        tok = open_json(t.s, t.n);
        break;
    }
    if (tok) {
        round_trip(tok, sample, sizeof sample - 1, 0);
        round_trip(tok, sample, sizeof sample - 1, TSR_TOKENIZE_SPECIAL);
    }
    tsr_tokenizer_free(tok);
    free(t.s);
    return 0;
}
