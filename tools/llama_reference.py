#!/usr/bin/python3
"""llama_reference.py -- an independent PyTorch reference for a Llama-family
decoder, written from the published formulas (no HF transformers), for
testing Tessera's Llama against committed fixtures (docs/llama.md,
"Reference").

Model (Hugging Face LlamaForCausalLM semantics, HF parameter names and
layouts, nn.Linear weights [out, in], no biases):
  x = embed_tokens[ids]
  per layer:  a = RMSNorm(x) * input_layernorm
              q, k, v = a Wq^T, a Wk^T, a Wv^T        (H, KV, KV heads of D)
              q, k = RoPE(q), RoPE(k)                 (rotate_half, theta,
                                                       optional llama3 scaling)
              head h attends with K/V head h // (H / KV), causal softmax of
              q k^T / sqrt(D)
              x = x + concat_h(att_h v) Wo^T
              m = RMSNorm(x) * post_attention_layernorm
              x = x + down(silu(gate(m)) * up(m))
  logits = RMSNorm(x) * norm  lm_head^T   (embed_tokens^T when tied)
  loss = mean cross-entropy over the B*T positions.
  RMSNorm(x) = x / sqrt(mean(x^2) + eps).

Dtype policy: every computation here is float64 (weights are read from the
float32 checkpoint and widened; RMSNorm statistics, RoPE tables, softmax,
loss, gradients and the AdamW state are float64, so above HF's "statistics
in fp32" rule); outputs are stored as float32 (ids as int32).

Modes:
  llama_reference.py --init OUT_DIR --config CONFIG.json [--seed 1 --init-std 0.02]
      An HF Llama checkpoint: OUT_DIR/config.json (the given config,
      completed with HF's defaults) and OUT_DIR/model.safetensors (F32).
      Matrices ~ N(0, init_std^2) (torch's generator seeded with --seed),
      RMSNorm weights 1 + N(0, 0.1^2) (random around 1, so that a wrong or
      missing norm weight shows).

  llama_reference.py --expected CKPT_DIR --out FILE [--tokens lcg|IDS.safetensors
        --batch 2 --seq 20 --seed 1234 --steps 20 --warmup 2 --total STEPS
        --max-lr 1e-3 --min-lr 1e-4 --beta1 0.9 --beta2 0.95 --eps 1e-8
        --weight-decay 0.1 --grad-clip 1.0]
      Token rows from the 64-bit LCG of tools/gpt2_reference.py (or an "ids"
      [B, T+1] integer tensor of a file), inputs = ids[:, :T], targets =
      ids[:, 1:]. Writes inputs, targets [B,T] I32; logits [B,T,V]; loss [1];
      grad.<HF name> for every parameter; then --steps steps of
      torch.optim.AdamW exactly as gpt2_reference.py (decay on the matrices
      only, global-norm clipping, warmup + cosine schedule): step_losses,
      grad_norms (before clipping), lrs [steps], final_loss [1].

  llama_reference.py --generate CKPT_DIR --out FILE [--prompt-lens 5,11,1
        --new 16 --seed 1234]
      Greedy decoding, one prompt at a time, with a KV cache; the same ids
      from full forward passes over the growing sequence are asserted equal.
      Writes prompts [B, max len] I32 (padded with -1), prompt_lens [B],
      generated [B, new] I32 and margins [B, new] F32 (top-1 minus top-2
      logit at each step: how far each greedy choice is from a tie).

  llama_reference.py --self-test
      The checks of docs/llama.md: llama3 inv_freq against hand-derived
      values in its three regimes, GQA/MQA/MHA against a plain per-head loop
      implementation, gradients against float64 finite differences, KV-cache
      generation against full forwards. Exit status 1 on a failure.

A malformed config or checkpoint ends the script with exit status 2 and a
message naming the problem.
"""

import argparse
import json
import math
import os
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import safetensors_py as st  # noqa: E402
# The project's conventions, shared with the GPT-2 reference so that the C
# trainer uses one token generator and one schedule for both models.
from gpt2_reference import tokens, lr_schedule, TOKEN_GENERATOR  # noqa: E402

DT = torch.float64


class RefError(Exception):
    """A problem with the input files: printed, exit status 2."""


# ---- configuration ---------------------------------------------------------

class Config:
    """The fields of an HF LlamaConfig this model uses."""

    def __init__(self, d):
        def req(key):
            if key not in d:
                raise RefError("config: missing %s" % key)
            return d[key]
        try:
            self.vocab_size = int(req("vocab_size"))
            self.hidden_size = int(req("hidden_size"))
            self.intermediate_size = int(req("intermediate_size"))
            self.num_hidden_layers = int(req("num_hidden_layers"))
            self.num_attention_heads = int(req("num_attention_heads"))
            self.num_key_value_heads = int(d.get("num_key_value_heads") or self.num_attention_heads)
            self.head_dim = int(d.get("head_dim") or self.hidden_size // self.num_attention_heads)
            self.max_position_embeddings = int(req("max_position_embeddings"))
            self.rms_norm_eps = float(d.get("rms_norm_eps", 1e-6))
            self.rope_theta = float(d.get("rope_theta", 10000.0))
            self.tie_word_embeddings = bool(d.get("tie_word_embeddings", False))
        except (TypeError, ValueError) as e:
            raise RefError("config: %s" % e) from None
        self.rope_scaling = d.get("rope_scaling")
        for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                  "num_attention_heads", "num_key_value_heads", "head_dim",
                  "max_position_embeddings"):
            if getattr(self, k) <= 0:
                raise RefError("config: %s must be positive" % k)
        if self.num_attention_heads % self.num_key_value_heads:
            raise RefError("config: num_key_value_heads %d does not divide num_attention_heads %d"
                           % (self.num_key_value_heads, self.num_attention_heads))
        if self.head_dim % 2:
            raise RefError("config: head_dim %d must be even (RoPE)" % self.head_dim)
        if d.get("hidden_act", "silu") != "silu":
            raise RefError("config: hidden_act %r (only silu)" % d.get("hidden_act"))
        if d.get("attention_bias") or d.get("mlp_bias"):
            raise RefError("config: attention_bias / mlp_bias are not supported")
        rs = self.rope_scaling
        if rs is not None:
            kind = rs.get("rope_type", rs.get("type"))
            if kind == "default":
                self.rope_scaling = None
            elif kind != "llama3":
                raise RefError("config: rope_scaling type %r (only llama3)" % kind)
            else:
                for k in ("factor", "low_freq_factor", "high_freq_factor",
                          "original_max_position_embeddings"):
                    if k not in rs:
                        raise RefError("config: rope_scaling lacks %s" % k)
                if not rs["high_freq_factor"] > rs["low_freq_factor"]:
                    raise RefError("config: rope_scaling high_freq_factor must exceed low_freq_factor")

    def hf_dict(self):
        """The config.json of the checkpoint (HF LlamaConfig keys)."""
        return {
            "architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "vocab_size": self.vocab_size, "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads, "head_dim": self.head_dim,
            "max_position_embeddings": self.max_position_embeddings,
            "rms_norm_eps": self.rms_norm_eps, "rope_theta": self.rope_theta,
            "rope_scaling": self.rope_scaling, "tie_word_embeddings": self.tie_word_embeddings,
            "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
            "attention_dropout": 0.0, "torch_dtype": "float32",
        }

    def metadata(self):
        return {k: json.dumps(v) for k, v in self.hf_dict().items()
                if k not in ("architectures", "model_type", "torch_dtype")}


def param_shapes(cfg):
    """[(HF name, shape)] of every parameter, in checkpoint order."""
    V, C, I = cfg.vocab_size, cfg.hidden_size, cfg.intermediate_size
    H, KV, D = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    out = [("model.embed_tokens.weight", (V, C))]
    for i in range(cfg.num_hidden_layers):
        p = "model.layers.%d." % i
        out += [(p + "input_layernorm.weight", (C,)),
                (p + "self_attn.q_proj.weight", (H * D, C)),
                (p + "self_attn.k_proj.weight", (KV * D, C)),
                (p + "self_attn.v_proj.weight", (KV * D, C)),
                (p + "self_attn.o_proj.weight", (C, H * D)),
                (p + "post_attention_layernorm.weight", (C,)),
                (p + "mlp.gate_proj.weight", (I, C)),
                (p + "mlp.up_proj.weight", (I, C)),
                (p + "mlp.down_proj.weight", (C, I))]
    out.append(("model.norm.weight", (C,)))
    if not cfg.tie_word_embeddings:
        out.append(("lm_head.weight", (V, C)))
    return out


def is_norm(name):
    return name.endswith("layernorm.weight") or name == "model.norm.weight"


def is_decayed(name):
    """Weight decay on the matrices (embeddings, projections, lm_head), not the norms."""
    return not is_norm(name)


# ---- RoPE ------------------------------------------------------------------

def rope_inv_freq(cfg):
    """[D/2] float64 inverse frequencies theta^(-2j/D), with Llama 3's
    smooth interpolation when rope_scaling is llama3:
      wavelen = 2 pi / f
      wavelen < orig / high_freq_factor  (high frequencies): f
      wavelen > orig / low_freq_factor   (low frequencies):  f / factor
      otherwise, s = (orig / wavelen - low) / (high - low):  (1 - s) f / factor + s f
    """
    D = cfg.head_dim
    f = 1.0 / (cfg.rope_theta ** (torch.arange(0, D, 2, dtype=DT) / D))
    rs = cfg.rope_scaling
    if rs is None:
        return f
    factor, low, high = float(rs["factor"]), float(rs["low_freq_factor"]), float(rs["high_freq_factor"])
    orig = float(rs["original_max_position_embeddings"])
    wavelen = 2 * math.pi / f
    s = (orig / wavelen - low) / (high - low)
    smooth = (1 - s) * f / factor + s * f
    out = torch.where(wavelen > orig / low, f / factor, smooth)
    return torch.where(wavelen < orig / high, f, out)


def rope_regimes(cfg):
    """Per frequency: 'high' (kept), 'medium' (interpolated), 'low' (divided)."""
    D = cfg.head_dim
    rs = cfg.rope_scaling
    out = []
    for j in range(D // 2):
        wl = 2 * math.pi * cfg.rope_theta ** (2 * j / D)
        if rs is None:
            out.append("none")
        elif wl < rs["original_max_position_embeddings"] / rs["high_freq_factor"]:
            out.append("high")
        elif wl > rs["original_max_position_embeddings"] / rs["low_freq_factor"]:
            out.append("low")
        else:
            out.append("medium")
    return out


def rope_cos_sin(cfg, positions):
    """cos, sin [n, D] for integer positions [n]: angle p * f_j in column j
    and j + D/2 (HF's layout, the halves paired by rotate_half)."""
    ang = positions.to(DT)[:, None] * rope_inv_freq(cfg)[None, :]
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos(), ang.sin()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def apply_rope(x, cos, sin):
    """x [B, heads, n, D]; cos, sin [n, D]."""
    return x * cos + rotate_half(x) * sin


# ---- the model -------------------------------------------------------------

def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def forward(cfg, P, idx, targets=None, past=None):
    """idx [B, n] int64 at positions t0.. (t0 = cached length); P: {HF name:
    float64 tensor}; past: per layer (k, v) [B, KV, t0, D] (RoPE applied) or
    None. Returns (logits [B, n, V], loss or None, the grown past)."""
    B, n = idx.shape
    H, KV, D = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    rep = H // KV
    t0 = 0 if past is None else past[0][0].shape[2]
    if t0 + n > cfg.max_position_embeddings:
        raise RefError("position %d exceeds max_position_embeddings %d"
                       % (t0 + n, cfg.max_position_embeddings))
    cos, sin = rope_cos_sin(cfg, torch.arange(t0, t0 + n))
    # query i (position t0 + i) sees keys 0 .. t0 + i
    mask = torch.ones(n, t0 + n, dtype=torch.bool).tril(diagonal=t0)
    x = F.embedding(idx, P["model.embed_tokens.weight"])
    new_past = []
    for i in range(cfg.num_hidden_layers):
        p = "model.layers.%d." % i
        a = rms_norm(x, P[p + "input_layernorm.weight"], cfg.rms_norm_eps)
        q = F.linear(a, P[p + "self_attn.q_proj.weight"]).view(B, n, H, D).transpose(1, 2)
        k = F.linear(a, P[p + "self_attn.k_proj.weight"]).view(B, n, KV, D).transpose(1, 2)
        v = F.linear(a, P[p + "self_attn.v_proj.weight"]).view(B, n, KV, D).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if past is not None:
            k = torch.cat([past[i][0], k], dim=2)
            v = torch.cat([past[i][1], v], dim=2)
        new_past.append((k, v))
        # query head h reads K/V head h // rep
        kh = k.repeat_interleave(rep, dim=1)
        vh = v.repeat_interleave(rep, dim=1)
        att = torch.matmul(q, kh.transpose(-2, -1)) / math.sqrt(D)
        att = torch.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = torch.matmul(att, vh).transpose(1, 2).reshape(B, n, H * D)
        x = x + F.linear(y, P[p + "self_attn.o_proj.weight"])
        m = rms_norm(x, P[p + "post_attention_layernorm.weight"], cfg.rms_norm_eps)
        g = F.linear(m, P[p + "mlp.gate_proj.weight"])
        u = F.linear(m, P[p + "mlp.up_proj.weight"])
        x = x + F.linear(F.silu(g) * u, P[p + "mlp.down_proj.weight"])
    x = rms_norm(x, P["model.norm.weight"], cfg.rms_norm_eps)
    head = P["model.embed_tokens.weight"] if cfg.tie_word_embeddings else P["lm_head.weight"]
    logits = F.linear(x, head)
    loss = None
    if targets is not None:
        loss = F.cross_entropy(logits.reshape(B * n, -1), targets.reshape(B * n))
    return logits, loss, new_past


def forward_plain(cfg, P, ids):
    """The same model written as loops over heads, positions and frequency
    pairs (no repeat_interleave, no rotate_half, no batched matmuls in the
    attention): the independent check of forward(). ids: a list of ints.
    Returns logits [T, V]."""
    T = len(ids)
    H, KV, D = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    half = D // 2
    f = rope_inv_freq(cfg)
    eps = cfg.rms_norm_eps

    def norm(v, w):
        return v / math.sqrt(float((v * v).sum()) / v.numel() + eps) * w

    def rope(vec, pos):  # vec [D]: pairs (j, j + D/2) rotated by pos * f_j
        out = vec.clone()
        for j in range(half):
            c, s = math.cos(pos * float(f[j])), math.sin(pos * float(f[j]))
            out[j] = vec[j] * c - vec[j + half] * s
            out[j + half] = vec[j + half] * c + vec[j] * s
        return out

    xs = [P["model.embed_tokens.weight"][t].clone() for t in ids]
    for i in range(cfg.num_hidden_layers):
        p = "model.layers.%d." % i
        Wq, Wk = P[p + "self_attn.q_proj.weight"], P[p + "self_attn.k_proj.weight"]
        Wv, Wo = P[p + "self_attn.v_proj.weight"], P[p + "self_attn.o_proj.weight"]
        a = [norm(x, P[p + "input_layernorm.weight"]) for x in xs]
        qs = [[rope(Wq[h * D:(h + 1) * D] @ a[t], t) for h in range(H)] for t in range(T)]
        ks = [[rope(Wk[g * D:(g + 1) * D] @ a[t], t) for g in range(KV)] for t in range(T)]
        vs = [[Wv[g * D:(g + 1) * D] @ a[t] for g in range(KV)] for t in range(T)]
        group = H // KV
        new = []
        for t in range(T):
            heads = []
            for h in range(H):
                g = h // group
                sc = [float(qs[t][h] @ ks[u][g]) / math.sqrt(D) for u in range(t + 1)]
                mx = max(sc)
                e = [math.exp(s - mx) for s in sc]
                z = sum(e)
                heads.append(sum(e[u] / z * vs[u][g] for u in range(t + 1)))
            new.append(xs[t] + Wo @ torch.cat(heads))
        xs = new
        out = []
        for x in xs:
            m = norm(x, P[p + "post_attention_layernorm.weight"])
            gt = P[p + "mlp.gate_proj.weight"] @ m
            up = P[p + "mlp.up_proj.weight"] @ m
            out.append(x + P[p + "mlp.down_proj.weight"] @ (gt / (1 + torch.exp(-gt)) * up))
        xs = out
    head = P["model.embed_tokens.weight"] if cfg.tie_word_embeddings else P["lm_head.weight"]
    return torch.stack([head @ norm(x, P["model.norm.weight"]) for x in xs])


# ---- checkpoints -----------------------------------------------------------

def init_params(cfg, seed, std):
    g = torch.Generator().manual_seed(int(seed))
    P = {}
    for name, shape in param_shapes(cfg):
        if is_norm(name):
            P[name] = 1.0 + 0.1 * torch.randn(shape, generator=g, dtype=DT)
        else:
            P[name] = std * torch.randn(shape, generator=g, dtype=DT)
    return P


def write_checkpoint(out_dir, cfg, P, md):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg.hf_dict(), f, indent=2, sort_keys=True)
        f.write("\n")
    st.save(os.path.join(out_dir, "model.safetensors"),
            {n: f32(P[n]) for n, _ in param_shapes(cfg)}, md)


def read_checkpoint(ckpt_dir):
    """(Config, {HF name: float64 tensor}) of an HF Llama checkpoint folder."""
    try:
        with open(os.path.join(ckpt_dir, "config.json")) as f:
            cfg = Config(json.load(f))
    except OSError as e:
        raise RefError("%s: cannot read config.json: %s" % (ckpt_dir, e.strerror)) from None
    except ValueError as e:
        raise RefError("%s/config.json: %s" % (ckpt_dir, e)) from None
    try:
        tensors, _ = st.load(os.path.join(ckpt_dir, "model.safetensors"))
    except st.SafetensorsError as e:
        raise RefError(str(e)) from None
    P = {}
    for name, shape in param_shapes(cfg):
        if name not in tensors:
            raise RefError("%s: missing tensor %s (expected shape %s)" % (ckpt_dir, name, list(shape)))
        if tuple(tensors[name].shape) != shape:
            raise RefError("%s: tensor %s has shape %s, expected %s"
                           % (ckpt_dir, name, list(tensors[name].shape), list(shape)))
        if tensors[name].dtype.kind != "f":
            raise RefError("%s: tensor %s has dtype %s" % (ckpt_dir, name, tensors[name].dtype))
        P[name] = torch.from_numpy(tensors[name].astype(np.float64))
    extra = sorted(set(tensors) - set(P) - ({"lm_head.weight"} if cfg.tie_word_embeddings else set()))
    if extra:
        raise RefError("%s: unexpected tensor(s): %s" % (ckpt_dir, ", ".join(extra)))
    return cfg, P


def f32(t):
    return t.detach().to(torch.float32).contiguous().numpy()


# ---- modes -----------------------------------------------------------------

def init_mode(args):
    if not args.config:
        raise RefError("--init needs --config")
    try:
        with open(args.config) as f:
            cfg = Config(json.load(f))
    except OSError as e:
        raise RefError("%s: %s" % (args.config, e.strerror)) from None
    except ValueError as e:
        raise RefError("%s: %s" % (args.config, e)) from None
    P = init_params(cfg, args.seed, args.init_std)
    md = {"format": "pt", "init_seed": str(args.seed), "init_std": repr(args.init_std),
          "init": "matrices N(0, init_std^2), RMSNorm weights 1 + N(0, 0.01), torch.Generator "
                  "seeded, float64 rounded to float32",
          "writer": "tools/llama_reference.py --init"}
    write_checkpoint(args.init, cfg, P, md)
    print("wrote %s: %d parameters, rope regimes %s"
          % (args.init, sum(p.numel() for p in P.values()), ",".join(rope_regimes(cfg))))


def batch_ids(args, cfg):
    if args.tokens in (None, "lcg"):
        rows = np.array(tokens(args.batch, args.seq, cfg.vocab_size, args.seed), dtype=np.int64)
    else:
        try:
            t, _ = st.load(args.tokens, names=["ids"])
        except st.SafetensorsError as e:
            raise RefError(str(e)) from None
        rows = t["ids"].astype(np.int64)
        if rows.ndim != 2 or rows.shape[1] < 2:
            raise RefError("%s: 'ids' must be [B, T+1]" % args.tokens)
    if rows.min() < 0 or rows.max() >= cfg.vocab_size:
        raise RefError("token ids outside [0, %d)" % cfg.vocab_size)
    if rows.shape[1] - 1 > cfg.max_position_embeddings:
        raise RefError("sequence length exceeds max_position_embeddings")
    return torch.from_numpy(rows)


def expected_mode(args):
    cfg, P = read_checkpoint(args.expected)
    ids = batch_ids(args, cfg)
    T = ids.shape[1] - 1
    inputs, targets = ids[:, :T].contiguous(), ids[:, 1:].contiguous()
    names = [n for n, _ in param_shapes(cfg)]
    params = [torch.nn.Parameter(P[n].clone()) for n in names]
    Pp = dict(zip(names, params))
    out = {"inputs": inputs.to(torch.int32).numpy(), "targets": targets.to(torch.int32).numpy()}
    logits, loss, _ = forward(cfg, Pp, inputs, targets)
    loss.backward()
    out["logits"] = f32(logits)
    out["loss"] = np.array([loss.item()], dtype=np.float32)
    for n, p in zip(names, params):
        out["grad." + n] = f32(p.grad)
        p.grad = None

    steps = args.steps
    total = args.total if args.total is not None else steps
    groups = [{"params": [p for n, p in zip(names, params) if is_decayed(n)],
               "weight_decay": args.weight_decay},
              {"params": [p for n, p in zip(names, params) if not is_decayed(n)],
               "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=args.max_lr, betas=(args.beta1, args.beta2), eps=args.eps)
    step_losses, grad_norms, lrs = [], [], []
    for step in range(steps):
        opt.zero_grad(set_to_none=True)
        _, loss, _ = forward(cfg, Pp, inputs, targets)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, args.grad_clip)
        lr = lr_schedule(step, args.warmup, total, args.max_lr, args.min_lr)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        step_losses.append(loss.item())
        grad_norms.append(float(norm))
        lrs.append(lr)
    with torch.no_grad():
        _, final_loss, _ = forward(cfg, Pp, inputs, targets)
    out["step_losses"] = np.array(step_losses, dtype=np.float32)
    out["grad_norms"] = np.array(grad_norms, dtype=np.float32)
    out["lrs"] = np.array(lrs, dtype=np.float32)
    out["final_loss"] = np.array([final_loss.item()], dtype=np.float32)
    md = cfg.metadata()
    md.update({
        "mode": "expected", "checkpoint": os.path.basename(os.path.normpath(args.expected)),
        "batch": str(ids.shape[0]), "seq": str(T), "seed": str(args.seed),
        "tokens": "lcg" if args.tokens in (None, "lcg") else os.path.basename(args.tokens),
        "token_generator": TOKEN_GENERATOR, "steps": str(steps),
        "warmup": str(args.warmup), "total": str(total),
        "max_lr": repr(args.max_lr), "min_lr": repr(args.min_lr),
        "schedule": "step<warmup: max_lr*(step+1)/warmup; else min_lr+0.5*(1+cos(pi*"
                    "(step-warmup)/max(1,total-1-warmup)))*(max_lr-min_lr)",
        "optimizer": "torch.optim.AdamW", "beta1": repr(args.beta1), "beta2": repr(args.beta2),
        "eps": repr(args.eps), "weight_decay": repr(args.weight_decay),
        "weight_decay_on": "embed_tokens, q/k/v/o_proj, gate/up/down_proj, lm_head (not the norms)",
        "grad_clip": repr(args.grad_clip), "grad_norms": "global L2 norm before clipping",
        "rope_inv_freq": json.dumps([float(v) for v in rope_inv_freq(cfg)]),
        "rope_regimes": ",".join(rope_regimes(cfg)),
        "loss": "mean cross-entropy over B*T", "dtype": "computed in float64, stored as float32",
        "torch": torch.__version__, "writer": "tools/llama_reference.py --expected",
    })
    st.save(args.out, out, md)
    print("wrote %s: batch %d x %d, loss %.6f (ln V = %.6f), %d steps to %.6f"
          % (args.out, ids.shape[0], T, out["loss"][0], math.log(cfg.vocab_size), steps,
             final_loss.item()))


@torch.no_grad()
def greedy_kv(cfg, P, prompt, new):
    """prompt [P] ids -> ([new] ids, [new] margins): prefill, then one position
    per step on the cache."""
    logits, _, past = forward(cfg, P, torch.tensor([prompt]))
    out, margins = [], []
    for step in range(new):
        last = logits[0, -1]
        top2 = torch.topk(last, 2).values
        nxt = int(torch.argmax(last))
        out.append(nxt)
        margins.append(float(top2[0] - top2[1]))
        if step + 1 < new:
            logits, _, past = forward(cfg, P, torch.tensor([[nxt]]), past=past)
    return out, margins


@torch.no_grad()
def greedy_full(cfg, P, prompt, new):
    seq = list(prompt)
    for _ in range(new):
        logits, _, _ = forward(cfg, P, torch.tensor([seq]))
        seq.append(int(torch.argmax(logits[0, -1])))
    return seq[len(prompt):]


def parse_lens(text):
    try:
        lens = [int(v) for v in text.split(",")]
    except ValueError:
        raise RefError("--prompt-lens %r: expected comma-separated integers" % text) from None
    if not lens or min(lens) <= 0:
        raise RefError("--prompt-lens %r: every length must be positive" % text)
    return lens


def generate_mode(args):
    cfg, P = read_checkpoint(args.generate)
    lens = parse_lens(args.prompt_lens)
    if args.new <= 0 or max(lens) + args.new > cfg.max_position_embeddings:
        raise RefError("--new %d: prompts plus new tokens must fit max_position_embeddings %d"
                       % (args.new, cfg.max_position_embeddings))
    rows = tokens(len(lens), max(lens) - 1, cfg.vocab_size, args.seed)
    prompts = np.full((len(lens), max(lens)), -1, dtype=np.int32)
    gen = np.zeros((len(lens), args.new), dtype=np.int32)
    margins = np.zeros((len(lens), args.new), dtype=np.float32)
    for i, n in enumerate(lens):
        prompts[i, :n] = rows[i][:n]
        ids, m = greedy_kv(cfg, P, rows[i][:n], args.new)
        full = greedy_full(cfg, P, rows[i][:n], args.new)
        if ids != full:
            raise AssertionError("prompt %d: KV-cache ids %s differ from full-forward ids %s"
                                 % (i, ids, full))
        gen[i] = ids
        margins[i] = m
    md = cfg.metadata()
    md.update({"mode": "generate", "checkpoint": os.path.basename(os.path.normpath(args.generate)),
               "seed": str(args.seed), "token_generator": TOKEN_GENERATOR,
               "prompt_lens": ",".join(str(n) for n in lens), "new": str(args.new),
               "decoding": "greedy (argmax); KV cache and full forwards agree",
               "margins": "top-1 minus top-2 logit at each step (float64)",
               "torch": torch.__version__, "writer": "tools/llama_reference.py --generate"})
    st.save(args.out, {"prompts": prompts, "prompt_lens": np.array(lens, dtype=np.int32),
                       "generated": gen, "margins": margins}, md)
    print("wrote %s: %d prompts (lengths %s), %d new tokens each, KV cache == full forward, "
          "smallest margin %.3g" % (args.out, len(lens), args.prompt_lens, args.new,
                                    float(margins.min())))


# ---- self-test ---------------------------------------------------------------

TINY = {"vocab_size": 97, "hidden_size": 96, "intermediate_size": 200, "num_hidden_layers": 2,
        "num_attention_heads": 6, "num_key_value_heads": 2, "head_dim": 16,
        "max_position_embeddings": 48, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 32},
        "tie_word_embeddings": False}


def self_test(args):
    failures = []

    def check(ok, what):
        print("%s  %s" % ("ok  " if ok else "FAIL", what))
        if not ok:
            failures.append(what)

    # 1. llama3 inv_freq, by hand for head_dim 16, theta 1e4, factor 8,
    # low 1, high 4, original 32: wavelengths 2 pi 10^(j/2), boundaries
    # 32/4 = 8 and 32/1 = 32.
    cfg = Config(TINY)
    f = rope_inv_freq(cfg)
    # j = 0: f = 1, wavelength 6.28 < 8: high frequency, kept.
    want0 = 1.0
    # j = 1: f = 10^-0.5, wavelength 19.87 in [8, 32]: s = (32 f / (2 pi) - 1) / 3
    f1 = 10 ** -0.5
    s1 = (32 * f1 / (2 * math.pi) - 1) / 3
    want1 = (1 - s1) * f1 / 8 + s1 * f1
    # j >= 2: wavelength >= 62.8 > 32: low frequency, divided by 8.
    wants = [want0, want1] + [10 ** (-j / 2) / 8 for j in range(2, 8)]
    check(rope_regimes(cfg) == ["high", "medium"] + ["low"] * 6,
          "rope regimes for the tiny config: %s" % ",".join(rope_regimes(cfg)))
    check(max(abs(float(a) - b) / b for a, b in zip(f, wants)) < 1e-14,
          "llama3 inv_freq = hand-derived values (j=1: s=%.6f, f=%.9f; literal 0.09584)"
          % (s1, want1))
    check(abs(want1 - 0.09584) < 1e-6, "hand-derived j=1 value against its literal")
    # without scaling: plain theta^(-2j/D)
    plain = Config(dict(TINY, rope_scaling=None))
    check(torch.allclose(rope_inv_freq(plain),
                         torch.tensor([10 ** (-j / 2) for j in range(8)], dtype=DT), rtol=1e-14),
          "unscaled inv_freq = 10000^(-2j/16)")

    # 2. the batched model against the per-head loop implementation, for
    # GQA, MQA, MHA, and tied embeddings
    ids = tokens(1, 12, 97, 99)[0][:13]
    for kv, tied in ((2, False), (1, False), (6, False), (2, True)):
        c = Config(dict(TINY, num_key_value_heads=kv, tie_word_embeddings=tied))
        P = init_params(c, 7, 0.1)
        with torch.no_grad():
            a, _, _ = forward(c, P, torch.tensor([ids]))
            b = forward_plain(c, P, ids)
        err = float((a[0] - b).abs().max())
        check(err < 1e-10, "kv heads %d%s: batched forward = per-head loops (max |diff| %.2e)"
              % (kv, ", tied" if tied else "", err))

    # 3. gradients against central finite differences in float64
    c = Config(TINY)
    P = init_params(c, 3, 0.1)
    rows = torch.tensor(tokens(2, 9, 97, 5), dtype=torch.int64)
    inp, tgt = rows[:, :9], rows[:, 1:]
    names = [n for n, _ in param_shapes(c)]
    Pp = {n: torch.nn.Parameter(P[n].clone()) for n in names}
    _, loss, _ = forward(c, Pp, inp, tgt)
    loss.backward()
    probes = [("model.layers.0.self_attn.q_proj.weight", (5, 17)),
              ("model.layers.0.self_attn.k_proj.weight", (20, 3)),
              ("model.layers.1.self_attn.v_proj.weight", (31, 40)),
              ("model.layers.1.input_layernorm.weight", (11,)),
              ("model.layers.0.mlp.gate_proj.weight", (150, 60)),
              ("model.norm.weight", (7,)),
              ("model.embed_tokens.weight", (int(inp[0, 3]), 2)),
              ("lm_head.weight", (int(tgt[1, 4]), 9))]
    h = 1e-6
    for name, ix in probes:
        with torch.no_grad():
            Q = {n: P[n].clone() for n in names}
            Q[name][ix] += h
            lp = forward(c, Q, inp, tgt)[1].item()
            Q[name][ix] -= 2 * h
            lm = forward(c, Q, inp, tgt)[1].item()
        fd = (lp - lm) / (2 * h)
        g = float(Pp[name].grad[ix])
        rel = abs(fd - g) / max(abs(g), 1e-8)
        check(rel < 1e-5, "d loss / d %s%s: autograd %.9e, finite difference %.9e (rel %.1e)"
              % (name, list(ix), g, fd, rel))

    # 4. KV-cache greedy generation = full forwards
    for kv in (2, 1, 6):
        c = Config(dict(TINY, num_key_value_heads=kv))
        P = init_params(c, 11, 0.1)
        for n in (1, 5, 19):
            prompt = tokens(1, n - 1, 97, 21 + n)[0][:n]
            a, _ = greedy_kv(c, P, prompt, 16)
            b = greedy_full(c, P, prompt, 16)
            check(a == b, "kv heads %d, prompt %d: KV-cache greedy ids = full-forward ids" % (kv, n))

    # 5. a checkpoint round trip (write, read back) keeps every tensor
    with tempfile.TemporaryDirectory() as d:
        c = Config(TINY)
        P = init_params(c, 1, 0.1)
        write_checkpoint(d, c, P, {})
        c2, P2 = read_checkpoint(d)
        check(c2.hf_dict() == c.hf_dict() and all(torch.equal(P2[n], P[n].float().double())
                                                  for n in P), "checkpoint round trip")
    print("self-test: %d failure(s)" % len(failures))
    return 1 if failures else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--init", metavar="OUT_DIR", help="write an initial HF Llama checkpoint")
    mode.add_argument("--expected", metavar="CKPT_DIR", help="logits, loss, gradients, AdamW steps")
    mode.add_argument("--generate", metavar="CKPT_DIR", help="greedy generation with a KV cache")
    mode.add_argument("--self-test", action="store_true", help="run the reference's checks")
    ap.add_argument("--config", help="config.json to initialise from (--init)")
    ap.add_argument("--init-std", type=float, default=0.02, help="matrices' std (--init)")
    ap.add_argument("--out", help="output safetensors file (--expected, --generate)")
    ap.add_argument("--tokens", default="lcg", help="'lcg' or a file with 'ids' [B, T+1]")
    ap.add_argument("--seed", type=int, default=None,
                    help="init seed (--init, default 1) or token seed (default 1234)")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=20)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--total", type=int, default=None, help="schedule length (default --steps)")
    ap.add_argument("--max-lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--prompt-lens", default="5,11,1")
    ap.add_argument("--new", type=int, default=16)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)
    if (args.expected or args.generate) and not args.out:
        ap.error("--out is required with --expected and --generate")
    if args.seed is None:
        args.seed = 1 if args.init else 1234
    if args.batch <= 0 or args.seq <= 0 or args.steps < 0:
        ap.error("--batch and --seq must be positive, --steps non-negative")
    torch.set_num_threads(max(1, args.threads))
    try:
        if args.self_test:
            return self_test(args)
        if args.init:
            init_mode(args)
        elif args.expected:
            expected_mode(args)
        else:
            generate_mode(args)
    except RefError as e:
        print("llama_reference.py: error: %s" % e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
