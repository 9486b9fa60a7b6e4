/* The tokenizer: the byte-level fallback; BPE on a small hand-made
 * vocabulary (merge order by rank, not position); malformed vocabulary
 * files; and GPT-2's real files (from TESSERA_GPT2_VOCAB_DIR) against ids
 * produced by the independent npm package gpt-3-encoder under node. */
#include "io_util.h"

static void encode_ok(const tsr_tokenizer_t *tok, const char *s, size_t len, int32_t **ids,
                      size_t *n)
{
    int rc = tsr_tokenizer_encode(tok, s, len, ids, n);
    cr_assert_eq(rc, TSR_OK, "encode: %s", tsr_error_message());
    cr_assert_not_null(*ids);
}

static void expect_round_trip(const tsr_tokenizer_t *tok, const char *s, size_t len)
{
    int32_t *ids;
    size_t n;
    encode_ok(tok, s, len, &ids, &n);
    char *back;
    size_t blen;
    cr_assert_eq(tsr_tokenizer_decode(tok, ids, n, &back, &blen), TSR_OK, "%s",
                 tsr_error_message());
    cr_assert_eq(blen, len, "round trip of %zu bytes gave %zu", len, blen);
    cr_assert_eq(memcmp(back, s, len), 0, "round trip of \"%.*s\"", (int)len, s);
    cr_assert_eq(back[blen], 0, "NUL-terminated");
    free(back), free(ids);
}

static void expect_ids(const tsr_tokenizer_t *tok, const char *s, const int32_t *want, size_t nw)
{
    int32_t *ids;
    size_t n;
    encode_ok(tok, s, strlen(s), &ids, &n);
    int same = n == nw;
    for (size_t i = 0; same && i < n; i++)
        same = ids[i] == want[i];
    if (!same) {
        char got[1024];
        size_t w = 0;
        for (size_t i = 0; i < n && w + 16 < sizeof got; i++)
            w += (size_t)snprintf(got + w, sizeof got - w, "%d,", (int)ids[i]);
        got[w] = 0;
        cr_assert(0, "encode(\"%s\") = [%s] (%zu ids, want %zu)", s, got, n, nw);
    }
    free(ids);
    expect_round_trip(tok, s, strlen(s));
}
#define IDS(tok, s, ...)                                                                      \
    do {                                                                                      \
        const int32_t want_[] = {__VA_ARGS__};                                                \
        expect_ids(tok, s, want_, sizeof want_ / sizeof want_[0]);                            \
    } while (0)

/* ---- byte level --------------------------------------------------------- */

Test(tokenizer, byte_level)
{
    tsr_tokenizer_t *tok;
    cr_assert_eq(tsr_tokenizer_open(&tok, NULL, NULL), TSR_OK);
    cr_assert_eq(tsr_tokenizer_vocab_size(tok), 257);
    cr_assert_eq(tsr_tokenizer_eot(tok), 256);
    unsigned char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (unsigned char)i;
    int32_t *ids;
    size_t n;
    encode_ok(tok, (const char *)all, 256, &ids, &n);
    cr_assert_eq(n, 256);
    for (int i = 0; i < 256; i++)
        cr_assert_eq(ids[i], i, "id = byte");
    free(ids);
    expect_round_trip(tok, (const char *)all, 256);
    IDS(tok, "a<|endoftext|>b", 'a', 256, 'b');
    IDS(tok, "<|endoftext|><|endoftext|>", 256, 256);
    encode_ok(tok, "", 0, &ids, &n);
    cr_assert_eq(n, 0);
    free(ids);

    char *text;
    size_t len;
    const int32_t bad1[] = {1, 257}, bad2[] = {-1};
    cr_assert_eq(tsr_tokenizer_decode(tok, bad1, 2, &text, &len), TSR_EINVAL);
    cr_assert_not_null(strstr(tsr_error_message(), "257"), "%s", tsr_error_message());
    cr_assert_eq(tsr_tokenizer_decode(tok, bad2, 1, &text, &len), TSR_EINVAL);
    cr_assert_eq(tsr_tokenizer_decode(tok, NULL, 0, &text, &len), TSR_OK);
    cr_assert_eq(len, 0);
    cr_assert_str_eq(text, "");
    free(text);
    tsr_tokenizer_free(tok);

    cr_assert_eq(tsr_tokenizer_open(&tok, "x.json", NULL), TSR_EINVAL, "one path alone");
    cr_assert_null(tok);
}

/* ---- a small vocabulary ------------------------------------------------- */

/* GPT-2's bytes_to_unicode(), written independently of the library */
static unsigned unicode_of(unsigned b)
{
    int n = 0;
    for (unsigned x = 0; x < 256; x++) {
        int printable = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174;
        if (x == b)
            return printable ? x : 256 + (unsigned)n;
        n += !printable;
    }
    return 0;
}

/* the token for raw bytes s as a JSON string of \u escapes */
static size_t json_token(char *out, const char *s)
{
    size_t w = 0;
    out[w++] = '"';
    for (; *s; s++)
        w += (size_t)sprintf(out + w, "\\u%04x", unicode_of((unsigned char)*s));
    out[w++] = '"';
    return w;
}

/* the token for raw bytes s as UTF-8 (for vocab.bpe) */
static size_t utf8_token(char *out, const char *s)
{
    size_t w = 0;
    for (; *s; s++) {
        unsigned cp = unicode_of((unsigned char)*s);
        if (cp < 0x80)
            out[w++] = (char)cp;
        else
            out[w++] = (char)(0xc0 | cp >> 6), out[w++] = (char)(0x80 | (cp & 0x3f));
    }
    out[w] = 0;
    return w;
}

static const char *const extra_tokens[] = {"bc", "ab", "abc", "aa", "aaaa", " a"};
static const char *const merges[][2] = {{"b", "c"}, {"a", "b"}, {"a", "bc"},
                                        {"a", "a"}, {"aa", "aa"}, {" ", "a"}};
enum { BC = 256, AB, ABC, AA, AAAA, SP_A, EOT };

/* encoder.json with bytes 0..255 as ids 0..255 (optionally one byte left
 * out), the extra tokens and <|endoftext|>; vocab.bpe with the merges. */
static void small_vocab(const char *dir, int skip_byte, int with_eot, const char *merge_text)
{
    char path[512], *buf = malloc(1 << 16);
    size_t w = 0;
    buf[w++] = '{';
    for (int b = 0; b < 256; b++) {
        if (b == skip_byte)
            continue;
        char s[2] = {(char)b, 0};
        if (b == 0)
            w += (size_t)sprintf(buf + w, "\"\\u%04x\"", unicode_of(0));
        else
            w += json_token(buf + w, s);
        w += (size_t)sprintf(buf + w, ": %d, ", b);
    }
    for (int i = 0; i < 6; i++) {
        w += json_token(buf + w, extra_tokens[i]);
        w += (size_t)sprintf(buf + w, ": %d%s", 256 + i, i < 5 || with_eot ? ", " : "");
    }
    if (with_eot)
        w += (size_t)sprintf(buf + w, "\"<|endoftext|>\": %d", EOT);
    buf[w++] = '}';
    io_join(path, sizeof path, dir, "encoder.json");
    io_write(path, buf, w);

    w = 0;
    if (merge_text) {
        w = strlen(merge_text);
        memcpy(buf, merge_text, w);
    } else {
        w += (size_t)sprintf(buf, "#version: 0.2\n");
        for (int i = 0; i < 6; i++) {
            w += utf8_token(buf + w, merges[i][0]);
            buf[w++] = ' ';
            w += utf8_token(buf + w, merges[i][1]);
            buf[w++] = '\n';
        }
    }
    io_join(path, sizeof path, dir, "vocab.bpe");
    io_write(path, buf, w);
    free(buf);
}

static int open_in(const char *dir, tsr_tokenizer_t **tok)
{
    char e[512], v[512];
    io_join(e, sizeof e, dir, "encoder.json");
    io_join(v, sizeof v, dir, "vocab.bpe");
    *tok = (tsr_tokenizer_t *)1;
    return tsr_tokenizer_open(tok, e, v);
}

Test(tokenizer, small_vocabulary_merges_by_rank)
{
    char dir[256];
    io_tmpdir(dir, sizeof dir);
    small_vocab(dir, -1, 1, NULL);
    tsr_tokenizer_t *tok;
    cr_assert_eq(open_in(dir, &tok), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_tokenizer_vocab_size(tok), 263);
    cr_assert_eq(tsr_tokenizer_eot(tok), EOT);
    IDS(tok, "abc", ABC);            /* b c (rank 0) before a b (rank 1), then a bc */
    IDS(tok, "ab", AB);
    IDS(tok, "aaa", AA, 'a');        /* leftmost pair first */
    IDS(tok, "aaaaa", AAAA, 'a');    /* all of a rank, then the pairs that creates */
    IDS(tok, "aaaaaaaa", AAAA, AAAA);
    IDS(tok, " abc", ' ', ABC);      /* a bc (rank 2) before space a (rank 5) */
    IDS(tok, " ab", ' ', AB);        /* a b (rank 1) before space a (rank 5) */
    IDS(tok, "ab ab", AB, ' ', AB);
    IDS(tok, " a", SP_A);
    IDS(tok, "x<|endoftext|>y", 'x', EOT, 'y');
    IDS(tok, "\xff\x01z", 0xff, 1, 'z');
    tsr_tokenizer_free(tok);
    io_rmtree(dir);
}

/* encoder.py's bpe() on the small vocabulary, as plainly as it reads: merge
 * every occurrence of the lowest-ranked adjacent pair, left to right. */
static size_t ref_bpe(const char *word, int32_t *ids)
{
    char sym[64][16];
    size_t n = strlen(word);
    for (size_t i = 0; i < n; i++)
        sym[i][0] = word[i], sym[i][1] = 0;
    for (;;) {
        int best = -1;
        for (size_t i = 0; i + 1 < n; i++)
            for (int r = 0; r < 6; r++)
                if (strcmp(sym[i], merges[r][0]) == 0 && strcmp(sym[i + 1], merges[r][1]) == 0 &&
                    (best < 0 || r < best))
                    best = r;
        if (best < 0)
            break;
        size_t k = 0;
        for (size_t i = 0; i < n; k++) {
            if (i + 1 < n && strcmp(sym[i], merges[best][0]) == 0 &&
                strcmp(sym[i + 1], merges[best][1]) == 0) {
                snprintf(sym[k], sizeof sym[k], "%s%s", merges[best][0], merges[best][1]);
                i += 2;
            } else {
                memmove(sym[k], sym[i], sizeof sym[k]);
                i++;
            }
        }
        n = k;
    }
    for (size_t i = 0; i < n; i++) {
        ids[i] = (unsigned char)sym[i][0];
        for (int t = 0; t < 6 && sym[i][1]; t++)
            if (strcmp(sym[i], extra_tokens[t]) == 0)
                ids[i] = 256 + t;
    }
    return n;
}

/* Thousands of distinct words: the word cache grows several times; the ids
 * of the first encode and of the second (read from the cache) both equal
 * the plain BPE of each word. */
Test(tokenizer, word_cache_grows_and_stays_exact)
{
    enum { WORDS = 3000 };
    char dir[256];
    io_tmpdir(dir, sizeof dir);
    small_vocab(dir, -1, 1, NULL);
    tsr_tokenizer_t *tok;
    cr_assert_eq(open_in(dir, &tok), TSR_OK, "%s", tsr_error_message());
    char *text = malloc(WORDS * 16);
    int32_t *want = malloc(WORDS * 16 * sizeof *want);
    size_t len = 0, nwant = 0;
    for (int i = 0; i < WORDS; i++) {
        char word[16] = " ";
        size_t w = 1;
        for (int x = i + 3; x; x /= 3) /* distinct: i + 3 in base 3 over a, b, c */
            word[w++] = (char)('a' + x % 3);
        word[w] = 0;
        memcpy(text + len, word, w);
        len += w;
        nwant += ref_bpe(word, want + nwant);
    }
    for (int pass = 0; pass < 2; pass++) {
        int32_t *ids;
        size_t n;
        encode_ok(tok, text, len, &ids, &n);
        cr_assert_eq(n, nwant, "pass %d: %zu ids, want %zu", pass, n, nwant);
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(ids[i], want[i], "pass %d: id %zu is %d, want %d", pass, i, (int)ids[i],
                         (int)want[i]);
        free(ids);
    }
    free(text), free(want);
    tsr_tokenizer_free(tok);
    io_rmtree(dir);
}

Test(tokenizer, merges_txt_with_crlf_line_ends)
{
    char dir[256];
    io_tmpdir(dir, sizeof dir);
    small_vocab(dir, -1, 1, "#version: 0.2\r\nb c\r\na b\r\n");
    tsr_tokenizer_t *tok;
    cr_assert_eq(open_in(dir, &tok), TSR_OK, "%s", tsr_error_message());
    IDS(tok, "abc", 'a', BC);
    tsr_tokenizer_free(tok);
    io_rmtree(dir);
}

static void expect_open_fails(const char *dir, int want, const char *needle)
{
    tsr_tokenizer_t *tok;
    int rc = open_in(dir, &tok);
    cr_assert_eq(rc, want, "%s: rc %d (%s)", needle, rc, tsr_error_message());
    cr_assert_null(tok);
    cr_assert_not_null(strstr(tsr_error_message(), needle), "\"%s\" lacks \"%s\"",
                       tsr_error_message(), needle);
}

Test(tokenizer, malformed_vocabularies)
{
    char dir[256], path[512];
    io_tmpdir(dir, sizeof dir);
    expect_open_fails(dir, TSR_EIO, "cannot open");
    small_vocab(dir, 'q', 1, NULL);
    expect_open_fails(dir, TSR_EINVAL, "no token for the byte 0x71");
    small_vocab(dir, -1, 0, NULL);
    expect_open_fails(dir, TSR_EINVAL, "<|endoftext|>");
    small_vocab(dir, -1, 1, "#version: 0.2\na b\nb c d\n");
    expect_open_fails(dir, TSR_EINVAL, "line 3");
    small_vocab(dir, -1, 1, "#version: 0.2\nx y\n");
    expect_open_fails(dir, TSR_EINVAL, "not in the vocabulary");
    small_vocab(dir, -1, 1, "#version: 0.2\n\xe4\xb8\x80 a\n");
    expect_open_fails(dir, TSR_EINVAL, "alphabet");
    small_vocab(dir, -1, 1, "#version: 0.2\n\xff a\n");
    expect_open_fails(dir, TSR_EINVAL, "alphabet");
    /* 'a' spelled overlong in two bytes (C1 A1) and in three (E0 81 A1) */
    small_vocab(dir, -1, 1, "#version: 0.2\n\xc1\xa1 b\n");
    expect_open_fails(dir, TSR_EINVAL, "alphabet");
    small_vocab(dir, -1, 1, "#version: 0.2\n\xe0\x81\xa1 b\n");
    expect_open_fails(dir, TSR_EINVAL, "alphabet");
    /* U+0100 (byte 0x00) in three bytes */
    small_vocab(dir, -1, 1, "#version: 0.2\n\xe0\x84\x80 b\n");
    expect_open_fails(dir, TSR_EINVAL, "alphabet");

    small_vocab(dir, -1, 1, NULL);
    io_join(path, sizeof path, dir, "encoder.json");
    io_write(path, "{\"a\": 1,", 8);
    expect_open_fails(dir, TSR_EINVAL, "invalid JSON");
    io_write(path, "[1, 2]", 6);
    expect_open_fails(dir, TSR_EINVAL, "not a JSON object");
    io_write(path, "{\"a\": 1, \"b\": 1}", 16);
    expect_open_fails(dir, TSR_EINVAL, "id 1 used twice");
    io_write(path, "{\"a\": -1}", 9);
    expect_open_fails(dir, TSR_EINVAL, "no id");
    io_write(path, "{\"a\": 1.5}", 10);
    expect_open_fails(dir, TSR_EINVAL, "no id");
    io_write(path, "{\"\\u4e00\": 1}", 13);
    expect_open_fails(dir, TSR_EINVAL, "alphabet");
    io_rmtree(dir);
}

/* vocab.bpe must have the shape of GPT-2's: "#version" on line 1, one merge
 * of two symbols per line, each line ending in a newline. Files cut short or
 * of another format are refused, naming the line. */
Test(tokenizer, vocab_bpe_of_another_shape)
{
    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"", "empty file"},
        {"b c\na b\n", "line 1: no \"#version\" header"},
        {"version: 0.2\nb c\n", "line 1: no \"#version\" header"},
        {"#vers", "line 1: no \"#version\" header"},
        {"#version: 0.2\n", "no merges"},
        {"#version: 0.2", "line 1: the last line ends without a newline"},
        {"#version: 0.2\nb c\na", "line 3: the last line ends without a newline"},
        {"#version: 0.2\nb c\na b", "line 3: the last line ends without a newline"},
        {"#version: 0.2\nb c\n\na b\n", "line 3: expected two symbols, found 0"},
        {"#version: 0.2\nb c\na b\n\n", "line 4: expected two symbols, found 0"},
        {"#version: 0.2\nb\n", "line 2: expected two symbols, found 1"},
        {"#version: 0.2\nb c\na b c\n", "line 3: expected two symbols, found 3"},
        {"#version: 0.2\nb c\nx y\n", "line 3: \"x y\" or its merge is not in the vocabulary"},
        {"#version: 0.2\nb a\n", "line 2: \"b a\" or its merge is not in the vocabulary"},
    };
    char dir[256];
    io_tmpdir(dir, sizeof dir);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        small_vocab(dir, -1, 1, bad[i].text);
        expect_open_fails(dir, TSR_EINVAL, bad[i].needle);
        cr_assert_not_null(strstr(tsr_error_message(), "vocab.bpe"), "names the file: %s",
                           tsr_error_message());
    }
    /* the same merges with the header and a final newline load */
    small_vocab(dir, -1, 1, "#version: 0.2\nb c\na b\n");
    tsr_tokenizer_t *tok;
    cr_assert_eq(open_in(dir, &tok), TSR_OK, "%s", tsr_error_message());
    IDS(tok, "abc", 'a', BC);
    tsr_tokenizer_free(tok);
    io_rmtree(dir);
}

/* ---- GPT-2's vocabulary ------------------------------------------------- */

static tsr_tokenizer_t *gpt2_or_skip(void)
{
    const char *dir = getenv("TESSERA_GPT2_VOCAB_DIR");
    if (!dir || !*dir)
        cr_skip_test("TESSERA_GPT2_VOCAB_DIR is not set: no GPT-2 encoder.json/vocab.bpe to test "
                     "against");
    char e[1024], v[1024];
    io_join(e, sizeof e, dir, "encoder.json");
    io_join(v, sizeof v, dir, "vocab.bpe");
    if (!io_exists(e) || !io_exists(v))
        cr_skip_test("no encoder.json and vocab.bpe in TESSERA_GPT2_VOCAB_DIR=%s", dir);
    tsr_tokenizer_t *tok;
    cr_assert_eq(tsr_tokenizer_open(&tok, e, v), TSR_OK, "%s", tsr_error_message());
    return tok;
}

/* Expected ids: node -e "require('gpt-3-encoder').encode(s)" (version 1.1.4). */
Test(tokenizer, gpt2_known_encodings)
{
    tsr_tokenizer_t *tok = gpt2_or_skip();
    cr_assert_eq(tsr_tokenizer_vocab_size(tok), 50257);
    cr_assert_eq(tsr_tokenizer_eot(tok), 50256);
    IDS(tok, "Hello world", 15496, 995);
    IDS(tok, " the", 262);
    IDS(tok, "I'm sure they've said it's what we'll do, and I'd've known you're right. They'RE 'S",
        40, 1101, 1654, 484, 1053, 531, 340, 338, 644, 356, 1183, 466, 11, 290, 314, 1549, 1053,
        1900, 345, 821, 826, 13, 1119, 6, 2200, 705, 50);
    IDS(tok, "In 2024, 1234567 people paid $3.50 each; abc123def 4.5e10", 818, 48609, 11, 17031,
        2231, 3134, 661, 3432, 720, 18, 13, 1120, 1123, 26, 450, 66, 10163, 4299, 604, 13, 20, 68,
        940);
    IDS(tok, "Wait!!! ... ?!?! (ok) [yes] {no} <tag> --- *** 'quoted' \"dq\"", 21321, 10185,
        2644, 5633, 0, 12248, 357, 482, 8, 685, 8505, 60, 1391, 3919, 92, 1279, 12985, 29, 11420,
        17202, 705, 421, 5191, 6, 366, 49506, 1);
    IDS(tok, "a  b   c\n\nd \n e\t\tf   ", 64, 220, 275, 220, 220, 269, 198, 198, 67, 220, 198, 304,
        197, 197, 69, 220, 220, 220);
    IDS(tok, "line1\r\nline2\r\n\n\n  indented\n", 1370, 16, 201, 198, 1370, 17, 201, 628, 198,
        220, 773, 4714, 198);
    IDS(tok, "caf\xc3\xa9 \xe2\x98\x95 na\xc3\xafve r\xc3\xa9sum\xc3\xa9 "
             "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9"
             "\xe3\x83\x88 \xf0\x9f\x98\x80 emoji",
        66, 1878, 2634, 34719, 243, 41492, 40560, 16345, 2634, 10545, 245, 98, 17312, 105, 45739,
        252, 5641, 24336, 25084, 43302, 30325, 222, 44805);
    IDS(tok, "supercalifragilisticexpialidocious", 16668, 9948, 361, 22562, 346, 396, 501, 42372,
        498, 312, 32346);
    IDS(tok, " ", 220);
    IDS(tok, "   ", 220, 220, 220);
    /* the special string (gpt-3-encoder would spell it out; encoder.py's
     * allowed_special does this) */
    IDS(tok, "Hello world<|endoftext|> the", 15496, 995, 50256, 262);

    char a200[201];
    memset(a200, 'a', 200);
    a200[200] = 0;
    int32_t *ids;
    size_t n;
    encode_ok(tok, a200, 200, &ids, &n); /* longer than any cached word */
    cr_assert_eq(n, 50);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(ids[i], 24794, "\"aaaa\" x 50");
    free(ids);

    char *text;
    size_t len;
    const int32_t eot = 50256, bad = 50257;
    cr_assert_eq(tsr_tokenizer_decode(tok, &eot, 1, &text, &len), TSR_OK);
    cr_assert_str_eq(text, "<|endoftext|>");
    free(text);
    cr_assert_eq(tsr_tokenizer_decode(tok, &bad, 1, &text, &len), TSR_EINVAL);
    tsr_tokenizer_free(tok);
}

/* The same generator as the node script that produced the expected values. */
static const char *const pieces[] = {
    "the", "The", " ", "  ", "\n", "\n\n", "\t", "'s", "'ll", "'", "'RE", "123", "4", ",",
    ".", "!!", "?", "\xc3\xa9", "\xd0\xb6", "\xe6\x97\xa5\xe6\x9c\xac", "na\xc3\xafve", "x",
    "qu", "-", "(", ")", "\"", "$", "%", "__", "a", "aaaa", "zzz", "0", "  \n ", " 's", "'ve",
    "\r\n", "ing", "tion", " hello", "World"};

static char *generate(uint32_t seed, int n, int letters_only, size_t *len)
{
    size_t cap = (size_t)n * 8 + 1, w = 0;
    char *s = malloc(cap);
    size_t np = sizeof pieces / sizeof pieces[0];
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        uint32_t k = seed >> 16;
        if (letters_only)
            s[w++] = (char)('a' + k % 26);
        else {
            size_t pl = strlen(pieces[k % np]);
            memcpy(s + w, pieces[k % np], pl);
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

Test(tokenizer, gpt2_generated_texts)
{
    tsr_tokenizer_t *tok = gpt2_or_skip();
    static const struct {
        uint32_t seed;
        int n, letters;
        size_t bytes, ids;
        uint32_t hash;
        int32_t first[8];
    } cases[] = {
        {1, 20000, 0, 46190, 24707, 3253421958u, {23748, 1183, 220, 220, 198, 220, 201, 198}},
        {2, 300, 1, 300, 178, 2838348902u, {89, 14636, 34369, 16762, 79, 86, 948, 538}},
        {3, 5000, 1, 5000, 2963, 2213804701u, {89, 1350, 73, 431, 69, 4593, 27865, 3692}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t len, n;
        char *s = generate(cases[c].seed, cases[c].n, cases[c].letters, &len);
        cr_assert_eq(len, cases[c].bytes, "generator differs from the node script");
        int32_t *ids;
        for (int pass = 0; pass < 2; pass++) { /* the second pass hits the word cache */
            encode_ok(tok, s, len, &ids, &n);
            cr_assert_eq(n, cases[c].ids, "case %zu pass %d: %zu ids", c, pass, n);
            cr_assert_eq(memcmp(ids, cases[c].first, sizeof cases[c].first), 0, "case %zu", c);
            cr_assert_eq(fnv(ids, n), cases[c].hash, "case %zu pass %d: hash", c, pass);
            free(ids);
        }
        expect_round_trip(tok, s, len);
        free(s);
    }
    tsr_tokenizer_free(tok);
}

Test(tokenizer, gpt2_round_trips_arbitrary_bytes)
{
    tsr_tokenizer_t *tok = gpt2_or_skip();
    uint32_t seed = 99;
    for (int round = 0; round < 200; round++) {
        unsigned char buf[257];
        size_t n = (size_t)round % 257;
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1664525u + 1013904223u;
            buf[i] = (unsigned char)(seed >> 24);
        }
        expect_round_trip(tok, (const char *)buf, n); /* invalid UTF-8 included */
    }
    /* one long word: BPE stays fast (no quadratic rescans) */
    size_t big = 1 << 20;
    char *s = malloc(big);
    for (size_t i = 0; i < big; i++) {
        seed = seed * 1664525u + 1013904223u;
        s[i] = (char)('a' + (seed >> 16) % 26);
    }
    expect_round_trip(tok, s, big);
    free(s);
    tsr_tokenizer_free(tok);
}
