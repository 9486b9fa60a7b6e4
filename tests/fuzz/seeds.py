#!/usr/bin/env python3
"""Writes the hand-made seed inputs of tests/fuzz/corpus/<target>/seed-*.

Small valid files of each format (and a few near misses) for the fuzzers to
start from; the rest of each corpus is what longer runs found (see
docs/fuzzing.md). Run from anywhere: python3 tests/fuzz/seeds.py
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# ---- JSON ------------------------------------------------------------------
docs = {
    "empty-object": "{}",
    "empty-array": " [ ] ",
    "literals": '[true, false, null]',
    "numbers": "[0, -0, 1.5, -2e-3, 1E+2, 18446744073709551615, 18446744073709551616, "
               "-9223372036854775808, 1e308, 1e999, 0.1e-400]",
    "strings": r'["", "a\"b\\c\/\b\f\n\r\t", "\u00e9\u4e00", "\ud83d\ude00", "caf\u00e9 ☕", "\u0000x"]',
    "nested": '{"a": {"b": [[[{"c": [1, {"d": null}]}]]]}, "e": []}',
    "config": json.dumps({"vocab_size": 50257, "n_positions": 1024, "n_embd": 768,
                          "n_layer": 12, "n_head": 12, "layer_norm_epsilon": 1e-05,
                          "architectures": ["GPT2LMHeadModel"]}, indent=2),
    "st-header": '{"__metadata__":{"format":"pt"},"wte":{"dtype":"F32","shape":[4,2],'
                 '"data_offsets":[0,32]}}',
    "dup-key": '{"a": 1, "a": 2}',
    "deep": "[" * 70 + "]" * 70,
    "bad-utf8": b'["\xc0\xaf", "\xed\xa0\x80"]',
}
for k, v in docs.items():
    put("json", k, v)


# ---- safetensors -------------------------------------------------------------
SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2,
         "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}


def st(tensors, meta=None, pad=True):
    """tensors: [(name, dtype, shape, bytes)]"""
    hdr, data = {}, b""
    if meta is not None:
        hdr["__metadata__"] = meta
    for name, dt, shape, raw in tensors:
        hdr[name] = {"dtype": dt, "shape": shape,
                     "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(hdr, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


put("safetensors", "f32", st([("w", "F32", [2, 2], struct.pack("<4f", 1, -2, 0.5, 3e38))],
                             {"format": "pt"}))
put("safetensors", "halves", st([("h", "F16", [3], struct.pack("<3H", 0x3c00, 0x0001, 0x7c00)),
                                 ("b", "BF16", [2], struct.pack("<2H", 0x3f80, 0xff80))]))
put("safetensors", "f64", st([("d", "F64", [2], struct.pack("<2d", 1e300, -1.25))]))
put("safetensors", "ints", st([("i8", "I8", [2], b"\x80\x7f"),
                               ("u16", "U16", [1], b"\xff\xff"),
                               ("i64", "I64", [2], struct.pack("<2q", -5, 2**40)),
                               ("u64", "U64", [1], struct.pack("<Q", 7)),
                               ("bool", "BOOL", [2], b"\x00\x01")]))
put("safetensors", "scalar-empty", st([("s", "I32", [], struct.pack("<i", 9)),
                                       ("e", "F32", [0, 5], b""),
                                       ("f8", "F8_E4M3", [1], b"\x38")]))
put("safetensors", "meta-only", st([], {"a": "b", "": "c"}))
put("safetensors", "overlap", struct.pack("<Q", 96) + (
    b'{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},'
    b'"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}').ljust(96) + b"abc")
put("safetensors", "short", b"\x08\x00\x00\x00\x00\x00\x00\x00{}")


# ---- shards -----------------------------------------------------------------
def shard(tokens, batch=1, seq=4, seek=0, count=None):
    head = struct.pack("<3i", 20240520, 1, len(tokens) if count is None else count)
    head += b"\x00" * (1024 - len(head))
    params = bytes([batch - 1, seq - 1]) + struct.pack("<I", seek)
    return params + head + struct.pack("<%dH" % len(tokens), *tokens)


put("shard", "small", shard(list(range(100, 140)), batch=2, seq=4, seek=7))
put("shard", "one-window", shard([1, 2, 3, 4, 5], batch=1, seq=4, seek=5))
put("shard", "too-short", shard([1, 2, 3], batch=1, seq=4, seek=0))
put("shard", "empty", shard([], batch=1, seq=1, seek=0))
put("shard", "count-lies", shard([1, 2, 3, 4], count=9))
put("shard", "big-ids", shard([65535, 0, 50256, 1] * 8, batch=4, seq=3, seek=31))


# ---- tokenizer --------------------------------------------------------------
def unicode_of(b):
    n = 0
    for x in range(256):
        printable = 33 <= x <= 126 or 161 <= x <= 172 or x >= 174
        if x == b:
            return x if printable else 256 + n
        n += not printable


def sym(bs):
    return "".join(chr(unicode_of(b)) for b in bs)


def vocab(merges):
    """merges: [(bytes, bytes)] -> (encoder.json, vocab.bpe) as bytes"""
    tokens = [bytes([b]) for b in range(256)]
    for a, b in merges:
        if a + b not in tokens:
            tokens.append(a + b)
    enc = {sym(t): i for i, t in enumerate(tokens)}
    enc["<|endoftext|>"] = len(tokens)
    bpe = "#version: 0.2\n" + "".join("%s %s\n" % (sym(a), sym(b)) for a, b in merges)
    return json.dumps(enc, ensure_ascii=False).encode(), bpe.encode()


# the same merges as fuzz_tokenizer.c's fixed vocabulary (mode 1 mutates these)
FIXED = [(" ", "t"), ("h", "e"), (" t", "he"), ("i", "n"), ("e", "r"), ("a", "n"), (" ", "a"),
         ("o", "n"), ("r", "e"), ("i", "s"), (" ", "s"), ("e", "n"), ("l", "l"), ("o", "r"),
         (" ", "w"), ("in", "g"), (" ", "c"), ("e", "s"), ("a", "t"), ("o", "u"), ("\n", "\n"),
         (" ", " "), ("  ", "  "), ("1", "2"), ("12", "3"), ("c", "a"), ("ca", "f"),
         (b"\xc3", b"\xa9"), ("caf", b"\xc3\xa9"), ("'", "s"), ("'", "t"), (b"\xe2", b"\x98"),
         (b"\xe2\x98", b"\x95"), ("he", "ll"), ("hell", "o"), ("l", "d"), (" w", "or"),
         (" wor", "ld"), ("a", "a"), ("aa", "aa"), (" c", "at"), ("\t", "\t"),
         (b"\xff", b"\xff")]
FIXED = [(a.encode("latin-1") if isinstance(a, str) else a,
          b.encode("latin-1") if isinstance(b, str) else b) for a, b in FIXED]

enc, bpe = vocab(FIXED)
put("tokenizer", "files-fixed", b"\x00" + enc + b"\x00" + bpe)
enc, bpe = vocab([(b"a", b"b"), (b"b", b"c"), (b"a", b"bc"), (b" ", b"a")])
put("tokenizer", "files-small", b"\x04" + enc + b"\x00" + bpe)
put("tokenizer", "files-no-eot", b"\x08" + b'{"a": 0}' + b"\x00" + b"#version: 0.2\n")
put("tokenizer", "bpe-fixed", b"\x01" + vocab(FIXED)[1])
put("tokenizer", "bpe-no-version", b"\x05" + b"h e\n")
put("tokenizer", "bpe-truncated", b"\x09" + vocab(FIXED)[1][:-3])
put("tokenizer", "bpe-overlong", b"\x01" + b"#version: 0.2\n\xc1\xa1 \xe0\x81\xa2\n")
put("tokenizer", "bpe-blank-line", b"\x01" + b"#version: 0.2\nh e\n\nl l\n")
put("tokenizer", "bpe-three", b"\x0d" + "#version: 0.2\nh e {}\n".format(sym(b" ")).encode())
texts = ["hello world, the cat's caf\u00e9 \u2615", "  \n\n\t\tx  y   ", "123456 7a8b",
         "don't we'll I'd they've you're", "a<|endoftext|>b<|endoftext|>", "aaaaaaaaaaaaaaaaa",
         "\u00e9\u00e9\u00e9 \u4e00\u4e8c \U0001f600!!", " " * 40 + "the"]
for i, t in enumerate(texts):
    put("tokenizer", "text-%d" % i, b"\x02" + t.encode())
put("tokenizer", "text-bytes", b"\x06" + bytes(range(256)))
put("tokenizer", "bpe-diff-0", b"\x03" + bytes([6, 0, 1, 5, 2, 0, 0, 7, 7, 3, 4, 1, 1]) +
    bytes([0, 1, 2, 0, 1, 2, 0, 0, 0, 0, 3, 4, 1, 2]))
put("tokenizer", "bpe-diff-1", b"\x07" + bytes([12]) + bytes(range(24)) + bytes(200))


# ---- tokenizer.json ---------------------------------------------------------
LLAMA3_RE = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
             " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def tokenizer_json(merges, added=(), pre=None, ignore_merges=False, pairs=False, **top):
    tokens = [bytes([b]) for b in range(256)]
    for a, b in merges:
        if a + b not in tokens:
            tokens.append(a + b)
    if pre is None:
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_RE}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False}]}
    doc = {"version": "1.0", "added_tokens": [
        {"id": len(tokens) + i, "content": c, "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": True} for i, c in enumerate(added)],
        "normalizer": None, "pre_tokenizer": pre, "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": ignore_merges,
                  "vocab": {sym(t): i for i, t in enumerate(tokens)},
                  "merges": [[sym(a), sym(b)] if pairs else "%s %s" % (sym(a), sym(b))
                             for a, b in merges]}}
    doc.update(top)
    return json.dumps(doc, ensure_ascii=False).encode()


LLAMA_ADDED = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
put("tokenizer_json", "json-llama3", b"\x00" + tokenizer_json(FIXED, LLAMA_ADDED))
put("tokenizer_json", "json-llama3-pairs",
    b"\x03" + tokenizer_json(FIXED, LLAMA_ADDED, ignore_merges=True, pairs=True))
put("tokenizer_json", "json-gpt2", b"\x00" + tokenizer_json(
    FIXED, ["<|endoftext|>"], pre={"type": "ByteLevel", "add_prefix_space": False,
                                   "trim_offsets": True, "use_regex": True}))
put("tokenizer_json", "json-wordpiece", b"\x00" + tokenizer_json(FIXED)
    .replace(b'"type": "BPE"', b'"type": "WordPiece"'))
put("tokenizer_json", "json-normalizer", b"\x00" + tokenizer_json(
    FIXED, normalizer={"type": "NFC"}))
llama_texts = ["Hello, world! It's a test.", "I'VE you'Re he'LL 'x ''s it'\u017f",
               "1234567 89 0 12a3b4567c", "hello!!!\n\n\nworld...\r\n?!\n",
               "a  \n\n  b   c   \n\td", "trailing   ", "na\u00efve \u0663\u0664\u0665\u0666 "
               "\u00b2\u00b3 \u6771\u4eac\u00a0\u30bf \u3000x",
               "<|a|>b<|a|><|end_of_text|> the", "$hello _x\tab \u2014\u03c4\u03b5",
               "xyxy xyx xyxyx xyz"]
for i, t in enumerate(llama_texts):
    put("tokenizer_json", "text-%d" % i, b"\x01" + t.encode())
    put("tokenizer_json", "text-im-%d" % i, b"\x0a" + t.encode())  # ignore_merges
put("tokenizer_json", "text-bytes", b"\x04" + bytes(range(256)) + b"ab\xffcd \xe6\x9d")
put("tokenizer_json", "merges-splice", b"\x02" + b'"\\u0120 \\u0120", ["l", "ll"]')
put("tokenizer_json", "merges-splice-bad", b"\x05" + b'"a"')


# ---- lab: task graphs ----------------------------------------------------------
# The first byte picks the format (mod 6): 0 tessera, 1 rec, 2 dot, 3 stg,
# 4 wfcommons, 5 told from the bytes.
LAB = {
    "tessera": (0, "tessera-graph 1\n"
                   "task 1 init prio=0 flops=-1 bytes=64 access=7:W:64 deps=\n"
                   "task 2 gemm prio=5 flops=2e6 bytes=96 access=7:R:64,8:RW:32 deps=1\n"
                   "wont_use 7\n"
                   "task 3 acc prio=0 flops=10 bytes=32 access=8:COMMUTE:32 deps=2\n"
                   "task 4 red prio=0 flops=10 bytes=32 access=8:REDUX:32,9:SCRATCH:0 deps=2\n"
                   "invalidate 8\n"
                   "ran 2 worker=3 device=cuda start_ns=1000 end_ns=4000 status=0\n"
                   "ran 1 worker=0 device=cpu start_ns=0 end_ns=500 status=0\n"),
    "rec": (1, "Name: potrf\nModel: potrf\nJobId: 10\nSubmitOrder: 2\nPriority: 3\n"
               "Handles: 7f00a0 7f00b0\nModes: RW R\nSizes: 800 0\nStartTime: 1.5\n"
               "EndTime: 4.0\nGFlop: 0.25\nWorkerId: 2\nMemoryNode: 0\nFootprint: abc\n\n"
               "Name: init\nJobId: 9\nSubmitOrder: 1\nHandles: 7f00a0\nModes: W\nSizes: 800\n\n"
               "Control: WontUse\nJobId: 12\nSubmitOrder: 3\nHandles: 7f00b0\n\n"
               "Name: trsm\nJobId: 11\nSubmitOrder: 4\nDependsOn: 10 9\n"
               "Handles: 7f00a0 7f00c0\nModes: R RW|COMMUTE\nSizes: 800 16\n"),
    "dot": (2, "// daggen\ndigraph G {\n  root [size=\"0\"];\n  a [size=\"1e9\", alpha=\"0.1\"]\n"
               "  /* c */ b [size=2000000000]\n  root -> a\n  a -> b [size=\"1e6\"];\n"
               "  a -> c -> d [size=0]\n  \"b\" -> end [size=\"8\"]\n  d -> end\n"
               "  node [shape=box]; rankdir = LR\n}\n"),
    "stg": (3, "      4\n      0      0      0\n      1     10      1      0\n"
               "      2     20      1      0\n      3      5      1      1\n"
               "      4      7      2      2      3\n      5      0      1      4\n# note\n"),
    "stg-comm": (3, "2\n0 0 0\n1 4 1\n  0 0\n2 6 1\n  1 100\n3 0 2\n  1 0\n  2 0\n"),
    "wfcommons-1.4": (4, json.dumps({"name": "w", "schemaVersion": "1.4", "workflow": {"tasks": [
        {"name": "merge_1", "id": "t3", "category": "merge", "runtimeInSeconds": 3.5,
         "parents": ["t1", "work_1"],
         "files": [{"link": "input", "name": "a.dat", "sizeInBytes": 100},
                   {"link": "output", "name": "out", "sizeInBytes": 0}]},
        {"name": "split_1", "id": "t1", "runtime": 1.25,
         "files": [{"link": "input", "name": "raw", "size": 1000},
                   {"link": "output", "name": "a.dat", "size": 100}]},
        {"name": "work_1", "runtimeInSeconds": 2, "parents": []}]}}, indent=1)),
    "wfcommons-1.5": (4, json.dumps({"name": "w", "schemaVersion": "1.5", "workflow": {
        "specification": {
            "tasks": [{"name": "gen", "id": "g1", "parents": [], "inputFiles": [],
                       "outputFiles": ["f1"]},
                      {"name": "use", "id": "u1", "parents": ["g1"],
                       "inputFiles": ["f1", "f0"], "outputFiles": []}],
            "files": [{"id": "f0", "sizeInBytes": 5}, {"id": "f1", "sizeInBytes": 4096}]},
        "execution": {"tasks": [{"id": "u1", "runtimeInSeconds": 2},
                                {"id": "g1", "runtimeInSeconds": 1}]}}})),
    "detect-dot": (5, "digraph { b -> c; x; a -> b; }"),
    "detect-rec": (5, "JobId: 5\nName: b\n\nJobId: 3\nName: a\nHandles: 1\nModes: W\n"),
    "cycle": (2, "digraph {\n a -> b\n b -> a\n}\n"),
}
for k, (fmt, text) in LAB.items():
    put("lab", k, bytes([fmt]) + text.encode())


# ---- Llama config.json (selector 0) and model.safetensors.index.json (1) ----
LLAMA_BASE = {"hidden_size": 36, "intermediate_size": 37, "num_hidden_layers": 2,
              "num_attention_heads": 6, "num_key_value_heads": 2, "vocab_size": 11}
LLAMA_CONFIGS = {
    "minimal": LLAMA_BASE,
    "llama3": dict(LLAMA_BASE, model_type="llama", hidden_act="silu", attention_bias=False,
                   mlp_bias=False, max_position_embeddings=4096, rms_norm_eps=1e-05,
                   rope_theta=500000.0, tie_word_embeddings=True, torch_dtype="bfloat16",
                   bos_token_id=1, eos_token_id=[2, 3, 4],
                   rope_scaling={"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                 "original_max_position_embeddings": 1024,
                                 "rope_type": "llama3"}),
    "mistral": dict(LLAMA_BASE, model_type="mistral", sliding_window=None, head_dim=8,
                    eos_token_id=None, bos_token_id=None, dtype="float16"),
    "old-type": dict(LLAMA_BASE, rope_scaling={"type": "llama3", "factor": 8,
                     "low_freq_factor": 1, "high_freq_factor": 4,
                     "original_max_position_embeddings": 1024}),
    "bias": dict(LLAMA_BASE, attention_bias=True),
    "gelu": dict(LLAMA_BASE, hidden_act="gelu"),
    "qwen2": dict(LLAMA_BASE, model_type="qwen2"),
    "kv-not-dividing": dict(LLAMA_BASE, num_key_value_heads=4),
}
for k, v in LLAMA_CONFIGS.items():
    put("llama", "config-" + k, b"\x00" + json.dumps(v, indent=2).encode())
LLAMA_INDEXES = {
    "two-shards": {"metadata": {"total_size": 1234},
                   "weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                                  "model.norm.weight": "model-00002-of-00002.safetensors",
                                  "lm_head.weight": "model-00002-of-00002.safetensors"}},
    "no-metadata": {"weight_map": {"a": "x.safetensors"}},
    "dotdot": {"weight_map": {"a": "../x.safetensors"}},
    "empty-map": {"metadata": {"total_size": 0}, "weight_map": {}},
}
for k, v in LLAMA_INDEXES.items():
    put("llama", "index-" + k, b"\x01" + json.dumps(v, indent=2).encode())
