#!/usr/bin/python3
"""gpt2_reference.py -- the PyTorch reference that Tessera's GPT-2
(include/tessera/gpt2.h, nn/gpt2.c) is tested against.

GPT-2 in plain torch (no HF transformers), float32, HF parameter names and
layouts (Conv1D weights [in, out]), tied lm head, LayerNorm eps 1e-5, GELU
with the tanh approximation. Five modes:

  gpt2_reference.py --make-init OUT.safetensors [--vocab 300 --ctx 64
        --layers 2 --heads 4 --channels 64 --seed 1]
      A GPT-2-initialised checkpoint (weights N(0, 0.02), residual
      projections N(0, 0.02/sqrt(2L)), biases 0, LayerNorm gains 1) with the
      configuration in its metadata (for testing this script on its own).

  gpt2_reference.py --init INIT.safetensors --out EXPECTED.safetensors
        [--batch 2 --seq 32 --steps 10 --seed 1234 --warmup 2 --total STEPS
         --max-lr 1e-3 --min-lr 1e-4 --threads N]
      Deterministic tokens (a 64-bit LCG, see tokens()), the forward and
      backward at the init weights, then --steps AdamW steps on that same
      batch. Writes: inputs, targets [B,T] I32; logits [B,T,V]; loss [1];
      grad.<name> for every parameter; step_losses, grad_norms (before
      clipping), lrs [steps]; final_logits [B,T,V] and final.<name> (the
      parameters after the last step); every hyperparameter in the metadata.

  gpt2_reference.py --logits CKPT.safetensors --inputs EXPECTED.safetensors
        --out L.safetensors
      Loads a checkpoint written by Tessera (HF names, maybe "transformer."
      prefixed; lm_head and attn.bias/masked_bias entries ignored) and writes
      the "logits" of a forward over the "inputs" of the given file.

  gpt2_reference.py --generate CKPT.safetensors --out GEN.safetensors
        [--prompt-lens 5,11,1 --new 16 --seed 1234 --temperature 0
         --top-k 0 --top-p 1 --sample-seed 1 --scale 1]
      Generation with a KV cache (past keys and values per layer), one prompt
      at a time: prompts of the given lengths from the LCG of tokens() (row
      i: the first len_i ids of row i), then --new tokens each, greedy at
      temperature 0 (else sampled with torch's generator: not Tessera's
      draws). --scale multiplies the matrices (wte, wpe, the Linear
      weights) by a factor after loading, in float32: an init's small
      weights make greedy decoding repeat the last token. Writes "prompts" [B, max len] I32 (padded with -1),
      "prompt_lens" [B] I32 and "generated" [B, new] I32.

  gpt2_reference.py --time-generate CKPT.safetensors [--batch 1
        --prompt-len 64 --new 256 --threads 2 --seed 1234]
      Times greedy generation with a KV cache for a batch of prompts of one
      length: the prefill, then the decode steps; prints a line and a JSON
      object with the decode throughput in tokens/s (batch x new / time).
      The same arithmetic on the weight layouts torch multiplies fastest
      (FastDecoder), in --time-dtype float32 (default) or bfloat16.

A missing, unexpected or mis-shaped tensor ends the script with exit status 2
and a message naming it. The model class (GPT2) and the initialisation are
also imported by bench/gpt2/torch_step.py.
"""

import argparse
import json
import math
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import safetensors_py as st  # noqa: E402

LN_EPS = 1e-5
IGNORED_SUFFIXES = (".attn.bias", ".attn.masked_bias")
IGNORED_NAMES = ("lm_head.weight",)


class RefError(Exception):
    """A problem with the input files: printed, exit status 2."""


# ---- configuration ---------------------------------------------------------

class Config:
    def __init__(self, vocab_size, n_ctx, n_layer, n_head, n_embd):
        self.vocab_size = int(vocab_size)
        self.n_ctx = int(n_ctx)
        self.n_layer = int(n_layer)
        self.n_head = int(n_head)
        self.n_embd = int(n_embd)
        for k in ("vocab_size", "n_ctx", "n_layer", "n_head", "n_embd"):
            if getattr(self, k) <= 0:
                raise RefError("configuration: %s must be positive (got %d)" % (k, getattr(self, k)))
        if self.n_embd % self.n_head:
            raise RefError("configuration: n_embd %d is not a multiple of n_head %d"
                           % (self.n_embd, self.n_head))

    def metadata(self):
        return {"n_layer": str(self.n_layer), "n_head": str(self.n_head),
                "n_embd": str(self.n_embd), "n_ctx": str(self.n_ctx),
                "vocab_size": str(self.vocab_size)}

    def __repr__(self):
        return ("Config(vocab_size=%d, n_ctx=%d, n_layer=%d, n_head=%d, n_embd=%d)"
                % (self.vocab_size, self.n_ctx, self.n_layer, self.n_head, self.n_embd))


def param_shapes(cfg):
    """[(name, shape)] of every parameter, in checkpoint order."""
    V, P, C = cfg.vocab_size, cfg.n_ctx, cfg.n_embd
    out = [("wte.weight", (V, C)), ("wpe.weight", (P, C))]
    for i in range(cfg.n_layer):
        h = "h.%d." % i
        out += [(h + "ln_1.weight", (C,)), (h + "ln_1.bias", (C,)),
                (h + "attn.c_attn.weight", (C, 3 * C)), (h + "attn.c_attn.bias", (3 * C,)),
                (h + "attn.c_proj.weight", (C, C)), (h + "attn.c_proj.bias", (C,)),
                (h + "ln_2.weight", (C,)), (h + "ln_2.bias", (C,)),
                (h + "mlp.c_fc.weight", (C, 4 * C)), (h + "mlp.c_fc.bias", (4 * C,)),
                (h + "mlp.c_proj.weight", (4 * C, C)), (h + "mlp.c_proj.bias", (C,))]
    out += [("ln_f.weight", (C,)), ("ln_f.bias", (C,))]
    return out


def is_decayed(name):
    """Weight decay applies to the matrices: wte, wpe and the Linear weights."""
    return name in ("wte.weight", "wpe.weight") or (
        name.endswith(".weight") and (".c_attn." in name or ".c_proj." in name or ".c_fc." in name))


# ---- the model -------------------------------------------------------------

class GPT2(torch.nn.Module):
    """GPT-2 with HF parameter names; Conv1D weights are [in, out] (y = x W + b)."""

    def __init__(self, cfg, dtype=torch.float32):
        super().__init__()
        self.cfg = cfg
        self._names = []
        for name, shape in param_shapes(cfg):
            p = torch.nn.Parameter(torch.zeros(shape, dtype=dtype))
            self.register_parameter(name.replace(".", "__"), p)
            self._names.append(name)
        mask = torch.tril(torch.ones(cfg.n_ctx, cfg.n_ctx, dtype=torch.bool))
        self.register_buffer("causal", mask, persistent=False)
        # True: attention through F.scaled_dot_product_attention (the fused
        # kernels PyTorch picks per device), the same function as the
        # explicit masked softmax below.
        self.sdpa = False

    def names(self):
        return list(self._names)

    def p(self, name):
        return getattr(self, name.replace(".", "__"))

    def named(self):
        """[(HF name, parameter)] in checkpoint order."""
        return [(n, self.p(n)) for n in self._names]

    def _attn(self, x, i):
        B, T, C = x.shape
        H = self.cfg.n_head
        D = C // H
        pre = "h.%d.attn." % i
        qkv = torch.addmm(self.p(pre + "c_attn.bias"), x.reshape(B * T, C),
                          self.p(pre + "c_attn.weight")).view(B, T, 3 * C)
        q, k, v = qkv.split(C, dim=2)
        q = q.reshape(B, T, H, D).transpose(1, 2)
        k = k.reshape(B, T, H, D).transpose(1, 2)
        v = v.reshape(B, T, H, D).transpose(1, 2)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
            att = att.masked_fill(~self.causal[:T, :T], float("-inf"))
            att = torch.softmax(att, dim=-1)
            y = torch.matmul(att, v)
        y = y.transpose(1, 2).reshape(B * T, C)
        return torch.addmm(self.p(pre + "c_proj.bias"), y, self.p(pre + "c_proj.weight")).view(B, T, C)

    def _mlp(self, x, i):
        B, T, C = x.shape
        pre = "h.%d.mlp." % i
        h = torch.addmm(self.p(pre + "c_fc.bias"), x.reshape(B * T, C), self.p(pre + "c_fc.weight"))
        h = F.gelu(h, approximate="tanh")
        return torch.addmm(self.p(pre + "c_proj.bias"), h, self.p(pre + "c_proj.weight")).view(B, T, C)

    def forward(self, idx, targets=None):
        """idx [B, T] int64 -> (logits [B, T, V], mean cross-entropy or None)."""
        B, T = idx.shape
        C = self.cfg.n_embd
        if T > self.cfg.n_ctx:
            raise RefError("sequence length %d exceeds n_ctx %d" % (T, self.cfg.n_ctx))
        x = F.embedding(idx, self.p("wte.weight")) + self.p("wpe.weight")[:T].unsqueeze(0)
        for i in range(self.cfg.n_layer):
            h = "h.%d." % i
            x = x + self._attn(F.layer_norm(x, (C,), self.p(h + "ln_1.weight"),
                                            self.p(h + "ln_1.bias"), LN_EPS), i)
            x = x + self._mlp(F.layer_norm(x, (C,), self.p(h + "ln_2.weight"),
                                           self.p(h + "ln_2.bias"), LN_EPS), i)
        x = F.layer_norm(x, (C,), self.p("ln_f.weight"), self.p("ln_f.bias"), LN_EPS)
        logits = torch.matmul(x, self.p("wte.weight").t())
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T),
                                   ignore_index=-1)
        return logits, loss

    @torch.no_grad()
    def init_gpt2(self, seed):
        """GPT-2's initialisation, deterministic for a seed (torch's generator;
        not bit-identical to Tessera's, which is why tests pass weights in files)."""
        g = torch.Generator().manual_seed(int(seed))
        resid = 0.02 / math.sqrt(2 * self.cfg.n_layer)
        for name, p in self.named():
            if name.endswith("attn.c_proj.weight") or name.endswith("mlp.c_proj.weight"):
                p.normal_(0.0, resid, generator=g)
            elif name in ("wte.weight", "wpe.weight") or is_decayed(name):
                p.normal_(0.0, 0.02, generator=g)
            elif ".ln_" in name or name.startswith("ln_f."):
                p.fill_(1.0 if name.endswith(".weight") else 0.0)
            else:  # biases
                p.zero_()

    def param_groups(self, weight_decay):
        decay = [p for n, p in self.named() if is_decayed(n)]
        no_decay = [p for n, p in self.named() if not is_decayed(n)]
        return [{"params": decay, "weight_decay": weight_decay},
                {"params": no_decay, "weight_decay": 0.0}]


# ---- generation with a KV cache ---------------------------------------------

@torch.no_grad()
def forward_kv(model, idx, past):
    """idx [B, n] new ids at positions len(past)..; past: per layer (k, v)
    [B, H, t, D] or None. Returns (logits [B, n, V], the grown past)."""
    cfg = model.cfg
    B, n = idx.shape
    C, H = cfg.n_embd, cfg.n_head
    D = C // H
    t0 = 0 if past is None else past[0][0].shape[2]
    if t0 + n > cfg.n_ctx:
        raise RefError("position %d exceeds n_ctx %d" % (t0 + n, cfg.n_ctx))
    x = F.embedding(idx, model.p("wte.weight")) + model.p("wpe.weight")[t0:t0 + n].unsqueeze(0)
    # query i (position t0 + i) sees keys 0 .. t0 + i
    mask = torch.ones(n, t0 + n, dtype=torch.bool).tril(diagonal=t0)
    new_past = []
    for i in range(cfg.n_layer):
        h = "h.%d." % i
        a = F.layer_norm(x, (C,), model.p(h + "ln_1.weight"), model.p(h + "ln_1.bias"), LN_EPS)
        qkv = torch.addmm(model.p(h + "attn.c_attn.bias"), a.reshape(B * n, C),
                          model.p(h + "attn.c_attn.weight")).view(B, n, 3 * C)
        q, k, v = (z.reshape(B, n, H, D).transpose(1, 2) for z in qkv.split(C, dim=2))
        if past is not None:
            k = torch.cat([past[i][0], k], dim=2)
            v = torch.cat([past[i][1], v], dim=2)
        new_past.append((k, v))
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        att = torch.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(B * n, C)
        x = x + torch.addmm(model.p(h + "attn.c_proj.bias"), y,
                            model.p(h + "attn.c_proj.weight")).view(B, n, C)
        a = F.layer_norm(x, (C,), model.p(h + "ln_2.weight"), model.p(h + "ln_2.bias"), LN_EPS)
        x = x + model._mlp(a, i)
    x = F.layer_norm(x, (C,), model.p("ln_f.weight"), model.p("ln_f.bias"), LN_EPS)
    return torch.matmul(x, model.p("wte.weight").t()), new_past


def pick(logits, temperature, top_k, top_p, gen):
    """Next ids [B] from the last logits [B, V]: greedy at temperature 0."""
    if temperature <= 0:
        return torch.argmax(logits, dim=-1)
    z = logits / temperature
    if top_k > 0:
        kth = torch.topk(z, min(top_k, z.shape[-1]), dim=-1).values[:, -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    if top_p < 1.0:
        srt, order = torch.sort(z, dim=-1, descending=True)
        cum = torch.softmax(srt, dim=-1).cumsum(dim=-1)
        drop = (cum - torch.softmax(srt, dim=-1)) >= top_p  # mass before it already enough
        srt = srt.masked_fill(drop, float("-inf"))
        z = torch.full_like(z, float("-inf")).scatter(-1, order, srt)
    return torch.multinomial(torch.softmax(z, dim=-1), 1, generator=gen)[:, 0]


@torch.no_grad()
def generate_kv(model, prompt, new, temperature=0.0, top_k=0, top_p=1.0, gen=None):
    """prompt [B, P] int64 -> the new ids [B, new] (prefill, then one
    position per step on the cached keys and values)."""
    logits, past = forward_kv(model, prompt, None)
    out = []
    nxt = pick(logits[:, -1], temperature, top_k, top_p, gen)
    for step in range(new):
        out.append(nxt)
        if step + 1 == new:
            break
        logits, past = forward_kv(model, nxt.view(-1, 1), past)
        nxt = pick(logits[:, -1], temperature, top_k, top_p, gen)
    return torch.stack(out, dim=1)


# ---- checkpoints -----------------------------------------------------------

def _heads_from_config_json(path):
    cj = os.path.join(os.path.dirname(os.path.abspath(path)), "config.json")
    try:
        with open(cj) as f:
            return int(json.load(f)["n_head"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _meta_int(md, key, path):
    try:
        return int(md[key])
    except KeyError:
        return None
    except ValueError:
        raise RefError("%s: metadata %s=%r is not a decimal integer" % (path, key, md[key])) from None


def read_checkpoint(path):
    """(Config, {HF name: float32 numpy array}) of a GPT-2 safetensors file:
    names stripped of "transformer.", lm_head and attention-mask buffers
    dropped; the shape from the tensors, checked against the metadata."""
    try:
        tensors, md = st.load(path)
    except st.SafetensorsError as e:
        raise RefError(str(e)) from None
    params = {}
    for name, arr in tensors.items():
        n = name[len("transformer."):] if name.startswith("transformer.") else name
        if n in IGNORED_NAMES or n.endswith(IGNORED_SUFFIXES):
            continue
        if n in params:
            raise RefError("%s: tensor %s appears twice (with and without 'transformer.')" % (path, n))
        if arr.dtype.kind != "f":
            raise RefError("%s: tensor %s has integer dtype %s" % (path, name, arr.dtype))
        params[n] = arr.astype(np.float32)
    for n in ("wte.weight", "wpe.weight"):
        if n not in params:
            raise RefError("%s: missing tensor %s" % (path, n))
        if params[n].ndim != 2:
            raise RefError("%s: tensor %s has shape %s, expected 2-D" % (path, n, list(params[n].shape)))
    V, C = params["wte.weight"].shape
    P = params["wpe.weight"].shape[0]
    L = 0
    while ("h.%d.ln_1.weight" % L) in params or ("h.%d.attn.c_attn.weight" % L) in params:
        L += 1
    H = _meta_int(md, "n_head", path) or _heads_from_config_json(path) or max(1, C // 64)
    for key, have in (("n_layer", L), ("n_embd", C), ("n_ctx", P), ("vocab_size", V)):
        want = _meta_int(md, key, path)
        if want is not None and want != have:
            raise RefError("%s: metadata says %s=%d but the tensors give %d" % (path, key, want, have))
    cfg = Config(V, P, L, H, C)
    expected = dict(param_shapes(cfg))
    for n, shape in expected.items():
        if n not in params:
            raise RefError("%s: missing tensor %s (expected shape %s)" % (path, n, list(shape)))
        if tuple(params[n].shape) != shape:
            raise RefError("%s: tensor %s has shape %s, expected %s"
                           % (path, n, list(params[n].shape), list(shape)))
    extra = sorted(set(params) - set(expected))
    if extra:
        raise RefError("%s: unexpected tensor(s) for %r: %s" % (path, cfg, ", ".join(extra)))
    return cfg, params


def load_model(path, dtype=torch.float32):
    cfg, params = read_checkpoint(path)
    model = GPT2(cfg, dtype)
    with torch.no_grad():
        for n, p in model.named():
            p.copy_(torch.from_numpy(params[n]))
    return model


def f32(t):
    return t.detach().to(torch.float32).contiguous().numpy()


# ---- data and schedule -----------------------------------------------------

LCG_A = 6364136223846793005
LCG_C = 1442695040888963407
TOKEN_GENERATOR = ("lcg64: x = (x * %d + %d) mod 2^64 from x = seed, one step per id "
                   "before it, id = (x >> 33) mod vocab; B rows of T+1 ids, row-major"
                   % (LCG_A, LCG_C))


def tokens(batch, seq, vocab, seed):
    """B x (T+1) deterministic ids in [0, vocab): the LCG of TOKEN_GENERATOR."""
    x = int(seed) & 0xFFFFFFFFFFFFFFFF
    rows = []
    for _ in range(batch):
        row = []
        for _ in range(seq + 1):
            x = (x * LCG_A + LCG_C) & 0xFFFFFFFFFFFFFFFF
            row.append((x >> 33) % vocab)
        rows.append(row)
    return rows


def lr_schedule(step, warmup, total, max_lr, min_lr):
    """Identical to tsr_lr_schedule(): linear warmup, then cosine to min_lr
    at step total - 1 (step counts from 0)."""
    if step < warmup:
        return max_lr * (step + 1) / warmup
    ratio = (step - warmup) / max(1, total - 1 - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (max_lr - min_lr)


# ---- modes -----------------------------------------------------------------

def make_init(args):
    cfg = Config(args.vocab, args.ctx, args.layers, args.heads, args.channels)
    model = GPT2(cfg)
    model.init_gpt2(args.seed)
    md = cfg.metadata()
    md.update({"format": "pt", "init": "gpt2 N(0,0.02), residual projections N(0,0.02/sqrt(2L))",
               "init_seed": str(args.seed), "writer": "tools/gpt2_reference.py --make-init"})
    st.save(args.make_init, {n: f32(p) for n, p in model.named()}, md)
    print("wrote %s: %r, %d parameters" % (args.make_init, cfg,
                                          sum(p.numel() for p in model.parameters())))


def reference(args):
    model = load_model(args.init)
    cfg = model.cfg
    B, T, steps = args.batch, args.seq, args.steps
    if B <= 0 or T <= 0 or steps < 0:
        raise RefError("--batch and --seq must be positive, --steps non-negative")
    if T > cfg.n_ctx:
        raise RefError("--seq %d exceeds the checkpoint's n_ctx %d" % (T, cfg.n_ctx))
    total = args.total if args.total is not None else steps
    ids = torch.tensor(tokens(B, T, cfg.vocab_size, args.seed), dtype=torch.int64)
    inputs, targets = ids[:, :T].contiguous(), ids[:, 1:].contiguous()
    out = {"inputs": inputs.to(torch.int32).numpy(), "targets": targets.to(torch.int32).numpy()}

    # forward and backward at the init weights
    logits, loss = model(inputs, targets)
    loss.backward()
    out["logits"] = f32(logits)
    out["loss"] = np.array([loss.item()], dtype=np.float32)
    for n, p in model.named():
        out["grad." + n] = f32(p.grad)
    model.zero_grad(set_to_none=True)

    # AdamW steps on the same batch
    opt = torch.optim.AdamW(model.param_groups(args.weight_decay), lr=args.max_lr,
                            betas=(args.beta1, args.beta2), eps=args.eps)
    step_losses, grad_norms, lrs = [], [], []
    for step in range(steps):
        opt.zero_grad(set_to_none=True)
        _, loss = model(inputs, targets)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        lr = lr_schedule(step, args.warmup, total, args.max_lr, args.min_lr)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        step_losses.append(loss.item())
        grad_norms.append(float(norm))
        lrs.append(lr)
        if args.verbose:
            print("step %3d  loss %.6f  grad_norm %.6f  lr %.6g" % (step, loss.item(), float(norm), lr))
    with torch.no_grad():
        final_logits, final_loss = model(inputs, targets)
    out["step_losses"] = np.array(step_losses, dtype=np.float32)
    out["grad_norms"] = np.array(grad_norms, dtype=np.float32)
    out["lrs"] = np.array(lrs, dtype=np.float32)
    out["final_logits"] = f32(final_logits)
    out["final_loss"] = np.array([final_loss.item()], dtype=np.float32)
    for n, p in model.named():
        out["final." + n] = f32(p)

    md = cfg.metadata()
    md.update({
        "mode": "reference", "init_file": os.path.basename(args.init),
        "batch": str(B), "seq": str(T), "steps": str(steps), "seed": str(args.seed),
        "token_generator": TOKEN_GENERATOR,
        "warmup": str(args.warmup), "total": str(total),
        "max_lr": repr(args.max_lr), "min_lr": repr(args.min_lr),
        "schedule": "step<warmup: max_lr*(step+1)/warmup; else min_lr+0.5*(1+cos(pi*"
                    "(step-warmup)/max(1,total-1-warmup)))*(max_lr-min_lr)",
        "optimizer": "torch.optim.AdamW", "beta1": repr(args.beta1), "beta2": repr(args.beta2),
        "eps": repr(args.eps), "weight_decay": repr(args.weight_decay),
        "weight_decay_on": "wte, wpe, attn.c_attn/c_proj, mlp.c_fc/c_proj weights",
        "grad_clip": repr(args.grad_clip), "grad_norms": "global L2 norm before clipping",
        "ln_eps": repr(LN_EPS), "gelu": "tanh approximation", "dtype": "float32",
        "loss": "mean cross-entropy over B*T", "threads": str(torch.get_num_threads()),
        "torch": torch.__version__, "writer": "tools/gpt2_reference.py",
    })
    st.save(args.out, out, md)
    losses = ", ".join("%.4f" % v for v in step_losses)
    print("wrote %s: %r, batch %d x %d, loss at init %.6f (ln V = %.6f), step losses [%s], "
          "final loss %.6f" % (args.out, cfg, B, T, out["loss"][0], math.log(cfg.vocab_size),
                               losses, final_loss.item()))


def logits_of(args):
    model = load_model(args.logits)
    try:
        t, _ = st.load(args.inputs, names=["inputs"])
    except st.SafetensorsError as e:
        raise RefError(str(e)) from None
    inputs = t["inputs"]
    if inputs.ndim != 2 or inputs.dtype.kind not in "iu":
        raise RefError("%s: 'inputs' must be a 2-D integer tensor, got %s %s"
                       % (args.inputs, inputs.dtype, list(inputs.shape)))
    if inputs.size and (inputs.min() < 0 or inputs.max() >= model.cfg.vocab_size):
        raise RefError("%s: token ids outside [0, %d)" % (args.inputs, model.cfg.vocab_size))
    with torch.no_grad():
        logits, _ = model(torch.from_numpy(inputs.astype(np.int64)))
    md = model.cfg.metadata()
    md.update({"mode": "logits", "checkpoint": os.path.basename(args.logits),
               "inputs_file": os.path.basename(args.inputs), "torch": torch.__version__,
               "writer": "tools/gpt2_reference.py --logits"})
    st.save(args.out, {"inputs": inputs.astype(np.int32), "logits": f32(logits)}, md)
    print("wrote %s: logits %s of %r" % (args.out, list(logits.shape), model.cfg))


def parse_lens(text):
    try:
        lens = [int(v) for v in text.split(",")]
    except ValueError:
        raise RefError("--prompt-lens %r: expected comma-separated integers" % text) from None
    if not lens or min(lens) <= 0:
        raise RefError("--prompt-lens %r: every length must be positive" % text)
    return lens


def generate(args):
    model = load_model(args.generate)
    cfg = model.cfg
    if args.scale != 1.0:
        with torch.no_grad():
            for n, p in model.named():
                if is_decayed(n):
                    p.mul_(torch.tensor(args.scale, dtype=torch.float32))
    lens = parse_lens(args.prompt_lens)
    if args.new <= 0 or max(lens) + args.new > cfg.n_ctx:
        raise RefError("--new %d: prompts of up to %d tokens plus the new ones must fit n_ctx %d"
                       % (args.new, max(lens), cfg.n_ctx))
    rows = tokens(len(lens), max(lens) - 1, cfg.vocab_size, args.seed)
    prompts = np.full((len(lens), max(lens)), -1, dtype=np.int32)
    gen = torch.Generator().manual_seed(args.sample_seed)
    out = np.zeros((len(lens), args.new), dtype=np.int32)
    for i, n in enumerate(lens):
        prompts[i, :n] = rows[i][:n]
        p = torch.tensor([rows[i][:n]], dtype=torch.int64)
        out[i] = generate_kv(model, p, args.new, args.temperature, args.top_k, args.top_p,
                             gen)[0].numpy()
    md = cfg.metadata()
    md.update({"mode": "generate", "checkpoint": os.path.basename(args.generate),
               "seed": str(args.seed), "token_generator": TOKEN_GENERATOR,
               "prompt_lens": ",".join(str(n) for n in lens), "new": str(args.new),
               "temperature": repr(args.temperature), "top_k": str(args.top_k),
               "top_p": repr(args.top_p), "scale": repr(args.scale),
               "scaled": "wte, wpe, attn.c_attn/c_proj, mlp.c_fc/c_proj weights", "torch": torch.__version__,
               "writer": "tools/gpt2_reference.py --generate"})
    st.save(args.out, {"prompts": prompts, "prompt_lens": np.array(lens, dtype=np.int32),
                       "generated": out}, md)
    print("wrote %s: %d prompts (lengths %s), %d new tokens each" % (args.out, len(lens),
                                                                    args.prompt_lens, args.new))


class FastDecoder:
    """The timing mode's model: the same arithmetic as forward_kv, on the
    weight layouts this torch multiplies fastest (measured: F.linear on
    [out, in] weights, the head as x @ wte^T from a contiguous [C, V] copy,
    several times faster than addmm on HF's [in, out] Conv1D layout with
    the generic BLAS of a distribution build), in `dtype`; LayerNorm,
    softmax and the cache follow dtype too."""

    def __init__(self, model, dtype=torch.float32):
        self.cfg = model.cfg
        self.dtype = dtype
        with torch.no_grad():
            def lin(name):
                return model.p(name).t().contiguous().to(dtype)

            def vec(name):
                return model.p(name).detach().clone().to(dtype)
            self.wte = vec("wte.weight")
            self.head = model.p("wte.weight").t().contiguous().to(dtype)
            self.wpe = vec("wpe.weight")
            self.layers = []
            for i in range(self.cfg.n_layer):
                h = "h.%d." % i
                self.layers.append({k: (lin(h + n) if n.endswith("weight") and ".c_" in n else vec(h + n))
                                    for k, n in (("ln1w", "ln_1.weight"), ("ln1b", "ln_1.bias"),
                                                 ("aw", "attn.c_attn.weight"), ("ab", "attn.c_attn.bias"),
                                                 ("pw", "attn.c_proj.weight"), ("pb", "attn.c_proj.bias"),
                                                 ("ln2w", "ln_2.weight"), ("ln2b", "ln_2.bias"),
                                                 ("fw", "mlp.c_fc.weight"), ("fb", "mlp.c_fc.bias"),
                                                 ("mw", "mlp.c_proj.weight"), ("mb", "mlp.c_proj.bias"))})
            self.lnfw, self.lnfb = vec("ln_f.weight"), vec("ln_f.bias")

    @torch.no_grad()
    def __call__(self, idx, past):
        """past: None (a prefill), or (per layer (K, V) [B, H, ctx, D]
        buffers, cached length); the new keys and values are written in
        place (torch.cat of the whole past every step costs more than the
        step's matrix products here)."""
        cfg = self.cfg
        B, n = idx.shape
        C, H = cfg.n_embd, cfg.n_head
        D = C // H
        if past is None:
            past = ([(torch.empty(B, H, cfg.n_ctx, D, dtype=self.dtype),
                      torch.empty(B, H, cfg.n_ctx, D, dtype=self.dtype))
                     for _ in range(cfg.n_layer)], 0)
        bufs, t0 = past
        x = F.embedding(idx, self.wte) + self.wpe[t0:t0 + n].unsqueeze(0)
        mask = None if n == 1 else torch.ones(n, t0 + n, dtype=torch.bool).tril(diagonal=t0)
        for i, w in enumerate(self.layers):
            a = F.layer_norm(x, (C,), w["ln1w"], w["ln1b"], LN_EPS)
            q, k, v = (z.reshape(B, n, H, D).transpose(1, 2)
                       for z in F.linear(a, w["aw"], w["ab"]).split(C, dim=2))
            bufs[i][0][:, :, t0:t0 + n] = k
            bufs[i][1][:, :, t0:t0 + n] = v
            k, v = bufs[i][0][:, :, :t0 + n], bufs[i][1][:, :, :t0 + n]
            att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
            if mask is not None:
                att = att.masked_fill(~mask, float("-inf"))
            y = torch.matmul(torch.softmax(att, dim=-1), v).transpose(1, 2).reshape(B, n, C)
            x = x + F.linear(y, w["pw"], w["pb"])
            a = F.layer_norm(x, (C,), w["ln2w"], w["ln2b"], LN_EPS)
            x = x + F.linear(F.gelu(F.linear(a, w["fw"], w["fb"]), approximate="tanh"),
                             w["mw"], w["mb"])
        x = F.layer_norm(x[:, -1:], (C,), self.lnfw, self.lnfb, LN_EPS)
        return torch.matmul(x, self.head), (bufs, t0 + n)


def time_generate(args):
    import time
    model = load_model(args.time_generate)
    cfg = model.cfg
    B, P, new = args.batch, args.prompt_len, args.new
    if B <= 0 or P <= 0 or new <= 0 or P + new > cfg.n_ctx:
        raise RefError("--batch, --prompt-len, --new must be positive and fit n_ctx %d" % cfg.n_ctx)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.time_dtype]
    run = FastDecoder(model, dtype)
    prompt = torch.tensor(tokens(B, P - 1, cfg.vocab_size, args.seed), dtype=torch.int64)
    run(prompt[:, :8], None)  # warm up the allocator and the kernels
    t0 = time.perf_counter()
    logits, past = run(prompt, None)
    nxt = torch.argmax(logits[:, -1], dim=-1)
    t1 = time.perf_counter()
    for _ in range(new):
        logits, past = run(nxt.view(-1, 1), past)
        nxt = torch.argmax(logits[:, -1], dim=-1)
    t2 = time.perf_counter()
    tps = B * new / (t2 - t1)
    print("torch %s, %s, %d threads: batch %d, prompt %d, %d new: prefill %.3f s, decode %.3f s, "
          "%.2f tokens/s" % (torch.__version__, args.time_dtype, torch.get_num_threads(), B, P,
                             new, t1 - t0, t2 - t1, tps))
    print(json.dumps({"bench": "gpt2-generate-torch", "batch": B, "prompt": P, "new": new,
                      "dtype": args.time_dtype, "threads": torch.get_num_threads(),
                      "prefill_s": t1 - t0, "decode_s": t2 - t1, "tokens_per_s": tps}))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--make-init", metavar="OUT", help="write a GPT-2-initialised checkpoint")
    mode.add_argument("--init", metavar="INIT", help="reference run from this checkpoint")
    mode.add_argument("--logits", metavar="CKPT", help="logits of this checkpoint on --inputs")
    mode.add_argument("--generate", metavar="CKPT", help="generation with a KV cache")
    mode.add_argument("--time-generate", metavar="CKPT", help="time greedy generation")
    ap.add_argument("--prompt-lens", default="5,11,1", help="prompt lengths (--generate)")
    ap.add_argument("--prompt-len", type=int, default=64, help="prompt length (--time-generate)")
    ap.add_argument("--new", type=int, default=16, help="tokens to generate")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--sample-seed", type=int, default=1)
    ap.add_argument("--time-dtype", choices=("float32", "bfloat16"), default="float32",
                    help="weights and activations of --time-generate")
    ap.add_argument("--scale", type=float, default=1.0, help="weight matrices factor (--generate)")
    ap.add_argument("--out", help="output safetensors file (--init, --logits)")
    ap.add_argument("--inputs", help="a file with an 'inputs' [B,T] tensor (--logits)")
    ap.add_argument("--vocab", type=int, default=300)
    ap.add_argument("--ctx", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--channels", type=int, default=64)
    ap.add_argument("--seed", type=int, default=None,
                    help="init seed (--make-init, default 1) or token seed (--init, default 1234)")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--total", type=int, default=None, help="schedule length (default --steps)")
    ap.add_argument("--max-lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("-v", "--verbose", action="store_true", help="print every step")
    args = ap.parse_args(argv)
    if (args.init or args.logits or args.generate) and not args.out:
        ap.error("--out is required with --init, --logits and --generate")
    if args.logits and not args.inputs:
        ap.error("--inputs is required with --logits")
    if args.seed is None:
        args.seed = 1 if args.make_init else 1234
    torch.set_num_threads(max(1, args.threads))
    try:
        if args.make_init:
            make_init(args)
        elif args.init:
            reference(args)
        elif args.generate:
            generate(args)
        elif args.time_generate:
            time_generate(args)
        else:
            logits_of(args)
    except RefError as e:
        print("gpt2_reference.py: error: %s" % e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
