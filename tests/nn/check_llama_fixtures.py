#!/usr/bin/python3
"""check_llama_fixtures.py -- validates the committed Llama reference fixtures
(tests/nn/fixtures/llama_tiny_*, written by tools/llama_reference.py) without
torch: numpy and tools/safetensors_py.py only.

For each variant (gqa, mqa, mha): the checkpoint's config.json agrees with
the source config; model.safetensors holds exactly the HF Llama names with
the shapes the config gives, F32 and finite, RMSNorm weights around 1 (not
all 1); the expected file holds the LCG's tokens (inputs, targets shifted by
one), logits [B,T,V], loss, grad.<name> for every parameter with its shape,
and the AdamW run's step_losses, grad_norms, lrs, final_loss; the loss equals
the cross-entropy of the stored logits; and the logits equal a float64 numpy
forward pass written here from the formulas of docs/llama.md (a third
implementation, beside the reference's two). For gqa, the generation file's
prompts come from the LCG and its ids lie in the vocabulary.

Usage: check_llama_fixtures.py [SOURCE_ROOT]. Exit status 0: all good; 1: a
check failed; 77 (meson's "skipped"): numpy is missing.
"""

import json
import math
import os
import sys

sys.dont_write_bytecode = True
ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
try:
    import numpy as np
except ImportError:
    print("skipped: /usr/bin/python3 has no numpy (python3-numpy), the Llama fixtures are not checked")
    sys.exit(77)
import safetensors_py as st  # noqa: E402

FIX = os.path.join(ROOT, "tests", "nn", "fixtures")
VARIANTS = ("gqa", "mqa", "mha")
FAILURES = []


def check(ok, what):
    if not ok:
        FAILURES.append(what)
        print("FAIL  " + what)
    return ok


def lcg_rows(batch, seq, vocab, seed):
    """tools/gpt2_reference.py's tokens(): B rows of seq + 1 ids."""
    x = seed & 0xFFFFFFFFFFFFFFFF
    rows = []
    for _ in range(batch):
        row = []
        for _ in range(seq + 1):
            x = (x * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
            row.append((x >> 33) % vocab)
        rows.append(row)
    return np.array(rows, dtype=np.int64)


def shapes(c):
    V, C, I = c["vocab_size"], c["hidden_size"], c["intermediate_size"]
    H, KV, D = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    out = {"model.embed_tokens.weight": (V, C), "model.norm.weight": (C,)}
    for i in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % i
        out.update({p + "input_layernorm.weight": (C,), p + "post_attention_layernorm.weight": (C,),
                    p + "self_attn.q_proj.weight": (H * D, C),
                    p + "self_attn.k_proj.weight": (KV * D, C),
                    p + "self_attn.v_proj.weight": (KV * D, C),
                    p + "self_attn.o_proj.weight": (C, H * D),
                    p + "mlp.gate_proj.weight": (I, C), p + "mlp.up_proj.weight": (I, C),
                    p + "mlp.down_proj.weight": (C, I)})
    if not c.get("tie_word_embeddings", False):
        out["lm_head.weight"] = (V, C)
    return out


def inv_freq(c):
    D = c["head_dim"]
    f = 1.0 / c["rope_theta"] ** (np.arange(0, D, 2, dtype=np.float64) / D)
    rs = c.get("rope_scaling")
    if not rs:
        return f
    lo, hi, fac = rs["low_freq_factor"], rs["high_freq_factor"], rs["factor"]
    orig = rs["original_max_position_embeddings"]
    out = []
    for v in f:
        wl = 2 * math.pi / v
        if wl < orig / hi:
            out.append(v)
        elif wl > orig / lo:
            out.append(v / fac)
        else:
            s = (orig / wl - lo) / (hi - lo)
            out.append((1 - s) * v / fac + s * v)
    return np.array(out)


def numpy_forward(c, W, ids):
    """ids [B, T] -> logits [B, T, V], float64."""
    B, T = ids.shape
    H, KV, D = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    eps = c["rms_norm_eps"]
    ang = np.arange(T)[:, None] * inv_freq(c)[None, :]          # [T, D/2]
    cos, sin = np.cos(ang), np.sin(ang)

    def rope(x):  # [B, T, heads, D]: pairs (j, j + D/2)
        a, b = x[..., :D // 2], x[..., D // 2:]
        cc, ss = cos[None, :, None, :], sin[None, :, None, :]
        return np.concatenate([a * cc - b * ss, b * cc + a * ss], axis=-1)

    def norm(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w

    x = W["model.embed_tokens.weight"][ids]
    causal = np.tril(np.ones((T, T), dtype=bool))
    for i in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % i
        a = norm(x, W[p + "input_layernorm.weight"])
        q = rope((a @ W[p + "self_attn.q_proj.weight"].T).reshape(B, T, H, D))
        k = rope((a @ W[p + "self_attn.k_proj.weight"].T).reshape(B, T, KV, D))
        v = (a @ W[p + "self_attn.v_proj.weight"].T).reshape(B, T, KV, D)
        y = np.empty((B, T, H, D))
        for h in range(H):
            g = h // (H // KV)
            s = np.einsum("btd,bud->btu", q[:, :, h], k[:, :, g]) / math.sqrt(D)
            s = np.where(causal, s, -np.inf)
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            y[:, :, h] = np.einsum("btu,bud->btd", s, v[:, :, g])
        x = x + y.reshape(B, T, H * D) @ W[p + "self_attn.o_proj.weight"].T
        m = norm(x, W[p + "post_attention_layernorm.weight"])
        gt = m @ W[p + "mlp.gate_proj.weight"].T
        x = x + (gt / (1 + np.exp(-gt)) * (m @ W[p + "mlp.up_proj.weight"].T)) \
            @ W[p + "mlp.down_proj.weight"].T
    head = W["model.embed_tokens.weight"] if c.get("tie_word_embeddings") else W["lm_head.weight"]
    return norm(x, W["model.norm.weight"]) @ head.T


def cross_entropy(logits, targets):
    z = logits - logits.max(-1, keepdims=True)
    lse = np.log(np.exp(z).sum(-1))
    picked = np.take_along_axis(z, targets[..., None], -1)[..., 0]
    return float((lse - picked).mean())


def check_variant(v):
    src = json.load(open(os.path.join(FIX, "llama_tiny_%s_config.json" % v)))
    ck = os.path.join(FIX, "llama_tiny_%s_init" % v)
    c = json.load(open(os.path.join(ck, "config.json")))
    for k, val in src.items():
        check(c.get(k) == val, "%s: config.json %s = %r, the source config says %r"
              % (v, k, c.get(k), val))
    want = shapes(c)
    header, md, _ = st.read_header(os.path.join(ck, "model.safetensors"))
    check(set(header) == set(want), "%s: checkpoint names differ: extra %s, missing %s"
          % (v, sorted(set(header) - set(want)), sorted(set(want) - set(header))))
    for n, info in header.items():
        check(info["dtype"] == "F32" and tuple(info["shape"]) == want.get(n),
              "%s: %s is %s %s, expected F32 %s" % (v, n, info["dtype"], info["shape"], want.get(n)))
    W32, _ = st.load(os.path.join(ck, "model.safetensors"))
    W = {n: a.astype(np.float64) for n, a in W32.items()}
    for n, a in W.items():
        check(np.isfinite(a).all(), "%s: %s has non-finite values" % (v, n))
        if n.endswith("norm.weight"):
            check(0.5 < a.mean() < 1.5 and a.std() > 0.01,
                  "%s: %s should be random around 1 (mean %.3f, std %.3f)" % (v, n, a.mean(), a.std()))

    t, emd = st.load(os.path.join(FIX, "llama_tiny_%s_expected.safetensors" % v))
    hdr, _, _ = st.read_header(os.path.join(FIX, "llama_tiny_%s_expected.safetensors" % v))
    B, T, S = int(emd["batch"]), int(emd["seq"]), int(emd["steps"])
    V = c["vocab_size"]
    expect = {"inputs": ("I32", (B, T)), "targets": ("I32", (B, T)), "logits": ("F32", (B, T, V)),
              "loss": ("F32", (1,)), "step_losses": ("F32", (S,)), "grad_norms": ("F32", (S,)),
              "lrs": ("F32", (S,)), "final_loss": ("F32", (1,))}
    expect.update({"grad." + n: ("F32", s) for n, s in want.items()})
    check(set(hdr) == set(expect), "%s: expected-file names differ: extra %s, missing %s"
          % (v, sorted(set(hdr) - set(expect)), sorted(set(expect) - set(hdr))))
    for n, (dt, s) in expect.items():
        if n in hdr:
            check(hdr[n]["dtype"] == dt and tuple(hdr[n]["shape"]) == s,
                  "%s: %s is %s %s, expected %s %s" % (v, n, hdr[n]["dtype"], hdr[n]["shape"], dt, s))
            check(np.isfinite(t[n]).all(), "%s: %s has non-finite values" % (v, n))
    if FAILURES:
        return
    rows = lcg_rows(B, T, V, int(emd["seed"]))
    check((t["inputs"] == rows[:, :T]).all() and (t["targets"] == rows[:, 1:]).all(),
          "%s: inputs/targets are not the LCG's rows (seed %s)" % (v, emd["seed"]))
    ce = cross_entropy(t["logits"].astype(np.float64), t["targets"].astype(np.int64))
    check(abs(ce - float(t["loss"][0])) < 1e-5, "%s: loss %.7f, cross-entropy of the logits %.7f"
          % (v, t["loss"][0], ce))
    check(abs(float(t["step_losses"][0]) - float(t["loss"][0])) < 1e-6,
          "%s: the first step's loss is the loss at init" % v)
    check(float(t["final_loss"][0]) < float(t["loss"][0]), "%s: training lowered the loss" % v)
    ours = numpy_forward(c, W, t["inputs"].astype(np.int64))
    err = float(np.abs(ours - t["logits"]).max())
    check(err < 1e-4, "%s: numpy forward vs stored logits: max |diff| %.2e" % (v, err))
    print("%s: %d tensors in the checkpoint, %d in the expected file, loss %.6f, "
          "numpy forward max |diff| %.1e" % (v, len(header), len(hdr), t["loss"][0], err))


def check_generate():
    path = os.path.join(FIX, "llama_tiny_gqa_generate.safetensors")
    t, md = st.load(path)
    c = json.load(open(os.path.join(FIX, "llama_tiny_gqa_init", "config.json")))
    lens = [int(n) for n in md["prompt_lens"].split(",")]
    new = int(md["new"])
    check(list(t["prompt_lens"]) == lens, "generate: prompt_lens")
    check(t["generated"].shape == (len(lens), new) and t["generated"].dtype == np.int32,
          "generate: generated is %s %s" % (t["generated"].dtype, t["generated"].shape))
    check(((t["generated"] >= 0) & (t["generated"] < c["vocab_size"])).all(), "generate: ids in range")
    check((t["margins"] >= 0).all(), "generate: margins are non-negative")
    rows = lcg_rows(len(lens), max(lens) - 1, c["vocab_size"], int(md["seed"]))
    for i, n in enumerate(lens):
        check((t["prompts"][i, :n] == rows[i, :n]).all() and (t["prompts"][i, n:] == -1).all(),
              "generate: prompt %d is not the LCG's row" % i)
    print("generate: %d prompts, %d ids each, smallest margin %.3g"
          % (len(lens), new, float(t["margins"].min())))


def main():
    for v in VARIANTS:
        try:
            check_variant(v)
        except (OSError, ValueError, KeyError, st.SafetensorsError) as e:
            check(False, "%s: %s: %s" % (v, type(e).__name__, e))
    try:
        check_generate()
    except (OSError, ValueError, KeyError, st.SafetensorsError) as e:
        check(False, "generate: %s: %s" % (type(e).__name__, e))
    print("llama fixtures: %d failure(s)" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
