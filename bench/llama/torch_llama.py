#!/usr/bin/python3
"""torch_llama.py -- the Llama peer of bench/llama/llama_step.c and
bench/llama/llama_generate.c in PyTorch: the same model, configuration,
tokens, thread count and timing, without the transformers package.

The model is Hugging Face's LlamaForCausalLM as modeling_llama.py computes it
(eager attention), written out here with HF's parameter names and layouts
(nn.Linear weights [out, in], no biases): RMSNorm (statistics in fp32, the
weight applied in the input's dtype), rotary embeddings with rotate_half and
optional Llama 3 frequency scaling, grouped-query attention (repeat_kv, the
softmax in fp32), SwiGLU MLP, an untied or tied head, the loss the mean
cross-entropy over the batch's positions. Matrices ~ N(0, 0.02^2), norm
weights 1 (transformers' _init_weights), from torch.manual_seed(--seed).

Three modes:

  torch_llama.py [shape] [--batch 4 --seq 64 --warmup 1 --steps 3 ...]
      The training step of bench-llama-step. One step = zero_grad, forward
      with targets, backward, clip the global grad norm to 1.0, AdamW
      (betas 0.9/0.95, eps 1e-8, weight decay 0.1 on the matrices, none on
      the norm weights): bench/gpt2/torch_step.py's step. --warmup untimed
      steps, then --steps timed ones. Tokens: the LCG of
      tools/gpt2_reference.py (rows of seq + 1 ids, inputs and targets
      shifted by one). --precision bf16 runs the forward and the loss under
      torch.autocast('cpu', dtype=torch.bfloat16): the products in bf16,
      fp32 master weights, gradients and optimizer state (as torch_step.py).
      Prints a line for people and one JSON line
        {"bench":"llama-step","case":TAG,"impl":"torch","workers":N,...,
         "s_per_step":S,"tok_per_s":R,...,"precision":"fp32"|"bf16",
         "host_peak":BYTES}
      tok_per_s = batch * seq / s_per_step; cpu_others the share of the
      machine's CPU time other processes took while it was timed (null under
      half a second); host_peak the process's peak resident set.

  torch_llama.py --generate [shape] [--gen-batch 1 --prompt 64 --new 256
        --dtype float32|bfloat16 --weights DIR]
      Greedy decoding with a KV cache, timed as tools/gpt2_reference.py
      --time-generate times GPT-2's (the peer of tessera-bench-generate): a
      warm-up prefill of 8 tokens, then the batch's prompts (LCG ids, seed
      1234) prefilled in one call, then --new steps of one token per
      sequence, each the argmax of the last logits. The decoder keeps
      preallocated K/V buffers [B, kv_heads, prompt + new, head_dim] written
      in place, multiplies the query heads of a group against their shared
      K/V head without copying it (a broadcast matmul), runs q/k/v and
      gate/up as one product each, and the head as x @ W^T from a contiguous
      [hidden, vocab] copy; everything in --dtype (RMSNorm statistics and
      the softmax in fp32). Weights: the HF checkpoint folder --weights
      (config.json + model.safetensors, as tsr_llama_save writes) when
      given, else the initialisation above (speed does not depend on the
      values). Prints a line and a JSON line
        {"bench": "llama-generate-torch", "batch": B, ..., "tokens_per_s": T}
      tokens_per_s = B * new / the decode steps' time.

  torch_llama.py --check
      That this model is the model of tools/llama_reference.py (the float64
      reference the Tessera tests are held to): on the committed fixtures
      tests/nn/fixtures/llama_tiny_{gqa,mha,mqa}_init (and a tied variant of
      the GQA config), the fp32 loss on the reference's LCG batch (2 x 20,
      seed 1234) equals the reference's to 1e-5, and the committed
      llama_tiny_*_expected.safetensors loss too; the logits to 1e-4; every
      gradient to 1e-4 of its largest entry; the decoder's logits (prefill,
      then cached steps) equal full forwards' to 1e-4; the bf16 loss is
      within 0.05 of the fp32 one. Exit status 1 on a failure.

Shape options (defaults: the "125M" shape of bench/llama/run.sh): --layers
--heads --kv-heads --hidden --intermediate --vocab --ctx (max positions)
--head-dim (0: hidden / heads) --rope-theta --llama3-scaling
FACTOR,LOW,HIGH,ORIG (or none) --tie 0|1 --norm-eps. --sched is accepted for
symmetry with the C programs and ignored.
"""

import argparse
import contextlib
import json
import math
import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
sys.path.insert(0, os.path.join(ROOT, "tools"))


def cpu_ticks():
    """(busy ticks of every CPU, this process's own ticks): bench_cpu_ticks()
    of bench/bench_util.h, for the share other processes took."""
    busy = 0
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
    except (OSError, ValueError, IndexError):
        pass
    t = os.times()
    return busy, (t.user + t.system) * os.sysconf("SC_CLK_TCK")


def peak_rss():
    """The process's peak resident set in bytes (Linux: ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def num(v):
    return "%.4g" % v if isinstance(v, (int, float)) and math.isfinite(v) else "null"


# ---- the model (imports torch lazily: the thread count is set first) -------

def build(torch):
    """The model classes, defined once torch is imported."""
    nn = torch.nn
    F = torch.nn.functional

    class Shape:
        """The LlamaConfig fields the model uses (HF names)."""

        def __init__(self, d):
            self.vocab_size = int(d["vocab_size"])
            self.hidden_size = int(d["hidden_size"])
            self.intermediate_size = int(d["intermediate_size"])
            self.num_hidden_layers = int(d["num_hidden_layers"])
            self.num_attention_heads = int(d["num_attention_heads"])
            self.num_key_value_heads = int(d.get("num_key_value_heads") or self.num_attention_heads)
            self.head_dim = int(d.get("head_dim") or self.hidden_size // self.num_attention_heads)
            self.max_position_embeddings = int(d["max_position_embeddings"])
            self.rms_norm_eps = float(d.get("rms_norm_eps", 1e-6))
            self.rope_theta = float(d.get("rope_theta", 10000.0))
            rs = d.get("rope_scaling")
            if rs is not None and rs.get("rope_type", rs.get("type")) == "default":
                rs = None
            if rs is not None and rs.get("rope_type", rs.get("type")) != "llama3":
                raise ValueError("rope_scaling %r: only llama3" % rs)
            self.rope_scaling = rs
            self.tie_word_embeddings = bool(d.get("tie_word_embeddings", False))

    def inv_freq(cfg):
        """HF's _compute_default_rope_parameters / _compute_llama3_parameters,
        in float32 as transformers computes them."""
        D = cfg.head_dim
        f = 1.0 / (cfg.rope_theta ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
        rs = cfg.rope_scaling
        if rs is None:
            return f
        factor, low, high = float(rs["factor"]), float(rs["low_freq_factor"]), float(rs["high_freq_factor"])
        orig = float(rs["original_max_position_embeddings"])
        low_wl, high_wl = orig / low, orig / high
        wavelen = 2 * math.pi / f
        out = torch.where(wavelen > low_wl, f / factor, f)
        smooth = (orig / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * out / factor + smooth * out
        medium = ~(wavelen < high_wl) & ~(wavelen > low_wl)
        return torch.where(medium, smoothed, out)

    def cos_sin(cfg, positions):
        """cos, sin [n, D] in float32 (HF computes them with autocast off)."""
        ang = positions.float()[:, None] * inv_freq(cfg)[None, :]
        ang = torch.cat([ang, ang], dim=-1)
        return ang.cos(), ang.sin()

    def rotate_half(x):
        h = x.shape[-1] // 2
        return torch.cat([-x[..., h:], x[..., :h]], dim=-1)

    def rope(x, cos, sin):
        return x * cos + rotate_half(x) * sin

    class RMSNorm(nn.Module):
        def __init__(self, n, eps):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(n))
            self.eps = eps

        def forward(self, x):
            dt = x.dtype
            h = x.float()
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
            return self.weight * h.to(dt)

    class Attention(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            C, H, KV, D = (cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads,
                           cfg.head_dim)
            self.H, self.KV, self.D = H, KV, D
            self.q_proj = nn.Linear(C, H * D, bias=False)
            self.k_proj = nn.Linear(C, KV * D, bias=False)
            self.v_proj = nn.Linear(C, KV * D, bias=False)
            self.o_proj = nn.Linear(H * D, C, bias=False)

        def forward(self, x, cos, sin, mask):
            B, T, _ = x.shape
            H, KV, D = self.H, self.KV, self.D
            q = self.q_proj(x).view(B, T, H, D).transpose(1, 2)
            k = self.k_proj(x).view(B, T, KV, D).transpose(1, 2)
            v = self.v_proj(x).view(B, T, KV, D).transpose(1, 2)
            q, k = rope(q, cos.to(q.dtype), sin.to(q.dtype)), rope(k, cos.to(k.dtype), sin.to(k.dtype))
            rep = H // KV
            if rep > 1:  # HF's repeat_kv: K/V head g serves query heads g*rep ..
                k = k[:, :, None].expand(B, KV, rep, T, D).reshape(B, H, T, D)
                v = v[:, :, None].expand(B, KV, rep, T, D).reshape(B, H, T, D)
            att = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(D)
            att = att.masked_fill(mask, float("-inf"))
            att = F.softmax(att, dim=-1, dtype=torch.float32).to(q.dtype)
            y = torch.matmul(att, v).transpose(1, 2).reshape(B, T, H * D)
            return self.o_proj(y)

    class MLP(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            C, I = cfg.hidden_size, cfg.intermediate_size
            self.gate_proj = nn.Linear(C, I, bias=False)
            self.up_proj = nn.Linear(C, I, bias=False)
            self.down_proj = nn.Linear(I, C, bias=False)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class Layer(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
            self.self_attn = Attention(cfg)
            self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
            self.mlp = MLP(cfg)

        def forward(self, x, cos, sin, mask):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
            return x + self.mlp(self.post_attention_layernorm(x))

    class Body(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
            self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.num_hidden_layers))
            self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    class Llama(nn.Module):
        """LlamaForCausalLM: state_dict() names are HF's."""

        def __init__(self, cfg):
            super().__init__()
            self.cfg = cfg
            self.model = Body(cfg)
            self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
            if cfg.tie_word_embeddings:
                self.lm_head.weight = self.model.embed_tokens.weight

        def init_weights(self, seed):
            """transformers' _init_weights: N(0, 0.02^2) matrices, norms 1."""
            torch.manual_seed(seed)
            with torch.no_grad():
                for _, p in self.named_parameters():  # a tied head once
                    if p.dim() >= 2:
                        p.normal_(0.0, 0.02)
                    else:
                        p.fill_(1.0)

        def hf_names(self):
            """[(HF name, parameter)] in checkpoint order, the tied head left out."""
            return list(self.named_parameters())

        def param_groups(self, weight_decay):
            decay = [p for p in self.parameters() if p.dim() >= 2]
            no_decay = [p for p in self.parameters() if p.dim() < 2]
            return [{"params": decay, "weight_decay": weight_decay},
                    {"params": no_decay, "weight_decay": 0.0}]

        def forward(self, idx, targets=None):
            B, T = idx.shape
            cos, sin = cos_sin(self.cfg, torch.arange(T))
            mask = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)
            x = self.model.embed_tokens(idx)
            for layer in self.model.layers:
                x = layer(x, cos, sin, mask)
            logits = self.lm_head(self.model.norm(x))
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.float().reshape(B * T, -1), targets.reshape(B * T))
            return logits, loss

    class Decoder:
        """Greedy decoding with a preallocated KV cache (see the module's
        docstring), on a Llama's weights, in `dtype`."""

        def __init__(self, model, dtype, max_len):
            cfg = self.cfg = model.cfg
            self.dtype, self.max_len = dtype, max_len
            with torch.no_grad():
                def w(p):
                    return p.detach().to(dtype).contiguous()
                self.embed = w(model.model.embed_tokens.weight)
                self.head = model.lm_head.weight.detach().t().contiguous().to(dtype)
                self.norm = model.model.norm.weight.detach().float().clone()
                self.layers = []
                for L in model.model.layers:
                    a, m = L.self_attn, L.mlp
                    self.layers.append({
                        "ln1": L.input_layernorm.weight.detach().float().clone(),
                        "qkv": w(torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight])),
                        "o": w(a.o_proj.weight),
                        "ln2": L.post_attention_layernorm.weight.detach().float().clone(),
                        "gu": w(torch.cat([m.gate_proj.weight, m.up_proj.weight])),
                        "down": w(m.down_proj.weight)})
            cos, sin = cos_sin(cfg, torch.arange(max_len))
            self.cos, self.sin = cos.to(dtype), sin.to(dtype)

        def rms(self, x, wgt):
            h = x.float()
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.cfg.rms_norm_eps)
            return (wgt * h).to(self.dtype)

        @torch.no_grad()
        def __call__(self, idx, past, all_logits=False):
            """idx [B, n] ids at positions t0.. (t0 = the cached length);
            past None (a prefill) or (buffers, t0). Returns (logits [B, 1, V],
            or [B, n, V] with all_logits, the grown past)."""
            cfg = self.cfg
            B, n = idx.shape
            H, KV, D = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
            rep = H // KV
            if past is None:
                past = ([(torch.empty(B, KV, self.max_len, D, dtype=self.dtype),
                          torch.empty(B, KV, self.max_len, D, dtype=self.dtype))
                         for _ in range(cfg.num_hidden_layers)], 0)
            bufs, t0 = past
            t = t0 + n
            cos, sin = self.cos[t0:t], self.sin[t0:t]
            mask = None if n == 1 else torch.ones(n, t, dtype=torch.bool).triu(diagonal=t0 + 1)
            x = F.embedding(idx, self.embed)
            for i, L in enumerate(self.layers):
                qkv = F.linear(self.rms(x, L["ln1"]), L["qkv"])
                q, k, v = qkv.split([H * D, KV * D, KV * D], dim=2)
                q = rope(q.reshape(B, n, H, D).transpose(1, 2), cos, sin)
                bufs[i][0][:, :, t0:t] = rope(k.reshape(B, n, KV, D).transpose(1, 2), cos, sin)
                bufs[i][1][:, :, t0:t] = v.reshape(B, n, KV, D).transpose(1, 2)
                k, v = bufs[i][0][:, :, None, :t], bufs[i][1][:, :, None, :t]
                # the rep query heads of group g against K/V head g: [B, KV, rep, n, t]
                att = torch.matmul(q.reshape(B, KV, rep, n, D), k.transpose(-2, -1)) / math.sqrt(D)
                if mask is not None:
                    att = att.masked_fill(mask, float("-inf"))
                att = torch.softmax(att, dim=-1, dtype=torch.float32).to(self.dtype)
                y = torch.matmul(att, v).reshape(B, H, n, D).transpose(1, 2).reshape(B, n, H * D)
                x = x + F.linear(y, L["o"])
                g, u = F.linear(self.rms(x, L["ln2"]), L["gu"]).chunk(2, dim=2)
                x = x + F.linear(F.silu(g) * u, L["down"])
            x = self.rms(x if all_logits else x[:, -1:], self.norm)
            return torch.matmul(x, self.head), (bufs, t)

    return Shape, Llama, Decoder


# ---- command line ------------------------------------------------------------

def parse(argv=None):
    ap = argparse.ArgumentParser(description="Llama training step and generation in PyTorch "
                                 "(bench-llama's peer)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--generate", action="store_true", help="time greedy KV-cache decoding")
    mode.add_argument("--check", action="store_true", help="check against tools/llama_reference.py")
    ap.add_argument("--config", help="an HF config.json for the shape (overrides the shape options)")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--intermediate", type=int, default=2048)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--ctx", type=int, default=2048, help="max_position_embeddings")
    ap.add_argument("--head-dim", type=int, default=0, help="0: hidden / heads")
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--llama3-scaling", default="none", metavar="FACTOR,LOW,HIGH,ORIG",
                    help="Llama 3 RoPE scaling, or none")
    ap.add_argument("--tie", type=int, choices=(0, 1), default=0)
    ap.add_argument("--norm-eps", type=float, default=1e-5)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--sched", default=None, help="ignored (Tessera's policy)")
    ap.add_argument("--json-tag", default=None, help="the JSON line's case (default LxHxC/V)")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--gen-batch", type=int, default=1, help="sequences decoded together (--generate)")
    ap.add_argument("--prompt", type=int, default=64, help="prompt tokens (--generate)")
    ap.add_argument("--new", type=int, default=256, help="tokens generated (--generate)")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                    help="the decoder's weights and activations (--generate)")
    ap.add_argument("--weights", help="an HF checkpoint folder to decode with (--generate)")
    a = ap.parse_args(argv)
    for k in ("layers", "heads", "kv_heads", "hidden", "intermediate", "vocab", "ctx", "batch",
              "seq", "steps", "threads", "gen_batch", "prompt", "new"):
        if getattr(a, k) <= 0:
            ap.error("--%s must be positive" % k.replace("_", "-"))
    if a.warmup < 0 or a.head_dim < 0:
        ap.error("--warmup and --head-dim must be >= 0")
    if a.heads % a.kv_heads:
        ap.error("--kv-heads must divide --heads")
    if not a.head_dim and a.hidden % a.heads:
        ap.error("--hidden must be a multiple of --heads (or give --head-dim)")
    if (a.head_dim or a.hidden // a.heads) % 2:
        ap.error("the head dimension must be even (RoPE)")
    if not a.generate and not a.check and a.seq > a.ctx:
        ap.error("--seq must be <= --ctx")
    if a.generate and a.prompt + a.new > a.ctx:
        ap.error("--prompt + --new must be <= --ctx")
    a.scaling = None
    if a.llama3_scaling != "none":
        try:
            f, lo, hi, orig = (float(v) for v in a.llama3_scaling.split(","))
        except ValueError:
            ap.error("--llama3-scaling: FACTOR,LOW,HIGH,ORIG or none")
        if not hi > lo:
            ap.error("--llama3-scaling: HIGH must exceed LOW")
        a.scaling = {"rope_type": "llama3", "factor": f, "low_freq_factor": lo,
                     "high_freq_factor": hi, "original_max_position_embeddings": int(orig)}
    return a


def shape_dict(a):
    if a.config:
        with open(a.config) as f:
            return json.load(f)
    return {"vocab_size": a.vocab, "hidden_size": a.hidden, "intermediate_size": a.intermediate,
            "num_hidden_layers": a.layers, "num_attention_heads": a.heads,
            "num_key_value_heads": a.kv_heads, "head_dim": a.head_dim or a.hidden // a.heads,
            "max_position_embeddings": a.ctx, "rms_norm_eps": a.norm_eps,
            "rope_theta": a.rope_theta, "rope_scaling": a.scaling,
            "tie_word_embeddings": bool(a.tie)}


def load_weights(torch, model, tensors):
    """Copy {HF name: numpy array} into the model (every parameter required;
    a tied head comes from embed_tokens)."""
    with torch.no_grad():
        for name, p in model.hf_names():
            if name not in tensors:
                raise KeyError("missing tensor %s" % name)
            src = torch.from_numpy(tensors[name]).to(torch.float32)
            if tuple(src.shape) != tuple(p.shape):
                raise ValueError("tensor %s: shape %s, expected %s"
                                 % (name, list(src.shape), list(p.shape)))
            p.copy_(src)


def tag_of(a, cfg):
    return a.json_tag or "%dx%dx%d/%d" % (cfg.num_hidden_layers, cfg.num_attention_heads,
                                          cfg.hidden_size, cfg.vocab_size)


# ---- the training step ---------------------------------------------------------

def train_step_mode(a, torch, Shape, Llama):
    from gpt2_reference import tokens
    cfg = Shape(shape_dict(a))
    model = Llama(cfg)
    model.init_weights(a.seed)
    nparams = sum(p.numel() for p in model.parameters())
    ids = torch.tensor(tokens(a.batch, a.seq, cfg.vocab_size, a.seed), dtype=torch.int64)
    inputs, targets = ids[:, :a.seq].contiguous(), ids[:, 1:].contiguous()
    opt = torch.optim.AdamW(model.param_groups(0.1), lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) \
        if a.precision == "bf16" else contextlib.nullcontext

    def step():
        opt.zero_grad(set_to_none=True)
        with autocast():
            _, loss = model(inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    losses = []
    for _ in range(a.warmup):
        losses.append(step())
    times = []
    busy0, own0 = cpu_ticks()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        s = time.perf_counter()
        losses.append(step())
        times.append(time.perf_counter() - s)
    total = time.perf_counter() - t0
    busy1, own1 = cpu_ticks()
    others = None
    if busy1 > busy0 and total >= 0.5:  # clock ticks are too coarse below
        foreign = max(0.0, (busy1 - busy0) - (own1 - own0))
        others = min(1.0, foreign / (os.sysconf("SC_CLK_TCK") * total * (os.cpu_count() or 1)))
    sps = total / a.steps
    tps = a.batch * a.seq / sps
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = -1.0
    tag = tag_of(a, cfg)
    peak = peak_rss()
    print("torch    %-14s %2d threads  %11d params  batch %d x %d  %d+%d steps  "
          "%.4f s/step (min %.4f)  %.1f tok/s  loss %.4f -> %.4f  load %.2f  others %.0f%%  %s  "
          "peak RSS %.1f MiB"
          % (tag, a.threads, nparams, a.batch, a.seq, a.warmup, a.steps, sps, min(times), tps,
             losses[0], losses[-1], load, 100 * (others or 0), a.precision, peak / 1048576.0))
    print('{"bench":"llama-step","case":"%s","impl":"torch","workers":%d,"sched":null,'
          '"layers":%d,"heads":%d,"kv_heads":%d,"hidden":%d,"intermediate":%d,"vocab":%d,'
          '"ctx":%d,"tied":%d,"params":%d,"batch":%d,"seq":%d,"warmup":%d,"steps":%d,'
          '"s_per_step":%s,"s_per_step_min":%s,"tok_per_s":%s,"loss_first":%s,"loss_last":%s,'
          '"load":%s,"cpu_others":%s,"precision":"%s","host_peak":%d,"torch":"%s"}'
          % (tag, a.threads, cfg.num_hidden_layers, cfg.num_attention_heads,
             cfg.num_key_value_heads, cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size,
             cfg.max_position_embeddings, int(cfg.tie_word_embeddings), nparams, a.batch, a.seq,
             a.warmup, a.steps, num(sps), num(min(times)), num(tps), num(losses[0]),
             num(losses[-1]), num(load) if load >= 0 else "null", num(others), a.precision,
             peak, torch.__version__))
    sys.stdout.flush()
    return 0


# ---- generation ------------------------------------------------------------------

def generate_mode(a, torch, Shape, Llama, Decoder):
    from gpt2_reference import tokens
    if a.weights:
        import safetensors_py as st
        with open(os.path.join(a.weights, "config.json")) as f:
            cfg = Shape(json.load(f))
        model = Llama(cfg)
        tensors, _ = st.load(os.path.join(a.weights, "model.safetensors"))
        load_weights(torch, model, tensors)
        del tensors
    else:
        cfg = Shape(shape_dict(a))
        model = Llama(cfg)
        model.init_weights(a.seed)
    B, P, new = a.gen_batch, a.prompt, a.new
    if P + new > cfg.max_position_embeddings:
        print("torch_llama.py: prompt + new exceed max_position_embeddings %d"
              % cfg.max_position_embeddings, file=sys.stderr)
        return 2
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[a.dtype]
    run = Decoder(model, dtype, P + new)
    nparams = sum(p.numel() for p in model.parameters())
    del model
    prompt = torch.tensor(tokens(B, P - 1, cfg.vocab_size, 1234), dtype=torch.int64)
    run(prompt[:, :min(8, P)], None)  # warm up the allocator and the kernels
    t0 = time.perf_counter()
    logits, past = run(prompt, None)
    nxt = torch.argmax(logits[:, -1], dim=-1)
    t1 = time.perf_counter()
    for _ in range(new):
        logits, past = run(nxt.view(-1, 1), past)
        nxt = torch.argmax(logits[:, -1], dim=-1)
    t2 = time.perf_counter()
    tps = B * new / (t2 - t1)
    print("torch %s, %s, %d threads: %d params, batch %d, prompt %d, %d new: prefill %.3f s, "
          "decode %.3f s, %.2f tokens/s, peak RSS %.1f MiB"
          % (torch.__version__, a.dtype, torch.get_num_threads(), nparams, B, P, new, t1 - t0,
             t2 - t1, tps, peak_rss() / 1048576.0))
    print(json.dumps({"bench": "llama-generate-torch", "case": tag_of(a, cfg), "batch": B,
                      "prompt": P, "new": new, "dtype": a.dtype,
                      "threads": torch.get_num_threads(), "params": nparams,
                      "prefill_s": t1 - t0, "decode_s": t2 - t1, "tokens_per_s": tps,
                      "host_peak": peak_rss()}))
    sys.stdout.flush()
    return 0


# ---- the check against the reference -------------------------------------------

def check_mode(a, torch, Shape, Llama, Decoder):
    import llama_reference as ref
    import safetensors_py as st
    from gpt2_reference import tokens
    fixtures = os.path.join(ROOT, "tests", "nn", "fixtures")
    failures = []

    def check(ok, what):
        print("%s  %s" % ("ok  " if ok else "FAIL", what))
        if not ok:
            failures.append(what)

    cases = []
    for kind in ("gqa", "mha", "mqa"):
        d = os.path.join(fixtures, "llama_tiny_%s_init" % kind)
        if not os.path.isdir(d):
            check(False, "fixture %s missing" % d)
            continue
        rcfg, P = ref.read_checkpoint(d)
        exp = os.path.join(fixtures, "llama_tiny_%s_expected.safetensors" % kind)
        cases.append(("llama_tiny_%s_init" % kind, rcfg, P, exp if os.path.exists(exp) else None))
    # the tied head, on the GQA fixture's shape
    with open(os.path.join(fixtures, "llama_tiny_gqa_init", "config.json")) as f:
        tied = dict(json.load(f), tie_word_embeddings=True)
    rcfg = ref.Config(tied)
    cases.append(("gqa shape, tied head", rcfg, ref.init_params(rcfg, 7, 0.02), None))

    for name, rcfg, P, expected in cases:
        cfg = Shape(rcfg.hf_dict())
        model = Llama(cfg)
        load_weights(torch, model, {n: P[n].float().numpy() for n, _ in ref.param_shapes(rcfg)})
        ids = torch.tensor(tokens(2, 20, cfg.vocab_size, 1234), dtype=torch.int64)
        inp, tgt = ids[:, :20].contiguous(), ids[:, 1:].contiguous()
        # the reference: float64 forward and autograd
        Pp = {n: torch.nn.Parameter(P[n].clone()) for n, _ in ref.param_shapes(rcfg)}
        rlogits, rloss, _ = ref.forward(rcfg, Pp, inp, tgt)
        rloss.backward()
        logits, loss = model(inp, tgt)
        loss.backward()
        dl = abs(loss.item() - rloss.item())
        check(dl <= 1e-5, "%s: fp32 loss %.7f, reference (float64) %.7f, |diff| %.1e"
              % (name, loss.item(), rloss.item(), dl))
        if expected:
            want = float(st.load(expected)[0]["loss"][0])
            check(abs(loss.item() - want) <= 1e-5,
                  "%s: loss = %s's %.7f (|diff| %.1e)" % (name, os.path.basename(expected), want,
                                                          abs(loss.item() - want)))
        dlog = float((logits.double() - rlogits.detach()).abs().max())
        check(dlog <= 1e-4, "%s: logits, max |diff| %.1e" % (name, dlog))
        worst, worst_name = 0.0, ""
        for n, p in model.hf_names():
            g = Pp[n].grad
            e = float((p.grad.double() - g).abs().max() / g.abs().max().clamp_min(1e-30))
            if e > worst:
                worst, worst_name = e, n
        check(worst <= 1e-4, "%s: gradients, worst max |diff| / max |grad| %.1e (%s)"
              % (name, worst, worst_name))
        # the decoder: a prefill of 7, then cached steps, against full forwards
        with torch.no_grad():
            dec = Decoder(model, torch.float32, 20)
            full = model(inp)[0]
            lg, past = dec(inp[:, :7], None, all_logits=True)
            errs = [float((lg - full[:, :7]).abs().max())]
            for t in range(7, 20):
                lg, past = dec(inp[:, t:t + 1], past)
                errs.append(float((lg[:, 0] - full[:, t]).abs().max()))
        check(max(errs) <= 1e-4, "%s: KV-cache decoder logits = full forward's (max |diff| %.1e)"
              % (name, max(errs)))
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            bloss = model(inp, tgt)[1].item()
        check(abs(bloss - loss.item()) <= 0.05, "%s: bf16 autocast loss %.5f (fp32 %.5f)"
              % (name, bloss, loss.item()))
    print("check: torch %s, %d failure(s)" % (torch.__version__, len(failures)))
    return 1 if failures else 0


def main(argv=None):
    a = parse(argv)
    # before torch is imported: its OpenMP pool is sized at load time
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    import torch
    torch.set_num_threads(a.threads)
    Shape, Llama, Decoder = build(torch)
    if a.check:
        return check_mode(a, torch, Shape, Llama, Decoder)
    if a.generate:
        return generate_mode(a, torch, Shape, Llama, Decoder)
    return train_step_mode(a, torch, Shape, Llama)


if __name__ == "__main__":
    sys.exit(main())
