#!/usr/bin/python3
"""torch_step.py -- the GPT-2 training step of bench/gpt2/gpt2_step.c in
PyTorch, the peer of bench-gpt2-step: the same model (the GPT2 class of
tools/gpt2_reference.py), configuration, tokens, thread count and timing.

One step = zero_grad, forward with targets, backward, clip the global grad
norm to 1.0, AdamW (betas 0.9/0.95, eps 1e-8, weight decay 0.1 on the
matrices). --warmup untimed steps, then --steps timed ones; prints a line for
people and one JSON line:

  {"bench":"gpt2-step","case":TAG,"impl":"torch","workers":N,...,
   "s_per_step":S,"tok_per_s":R,...,"precision":"fp32"|"bf16"}

--precision bf16 runs the forward and the loss under autocast to bfloat16
(torch.autocast(device, dtype=torch.bfloat16)): the matrix products in bf16,
fp32 master weights, gradients and optimizer state, the peer of
bench-gpt2-step --precision bf16.

--device cuda runs the step on the first GPU (fp32 products in TF32 on the
tensor cores, as Tessera's default TESSERA_CUDA_FP32=tf32; --strict-fp32
keeps them in FP32); the clock stops after the loss is read, which waits for
the GPU. --attention sdpa uses F.scaled_dot_product_attention (PyTorch's
fused attention) instead of the explicit masked softmax; --fused-adamw
AdamW's fused implementation. The JSON line then carries "device",
"attention", "fused_adamw" and "mfu" (6 * params * tokens/s over --peak-tflops,
null when none is given).

tok_per_s = batch * seq / s_per_step; cpu_others is the share of the
machine's CPU time other processes took while it was timed (null under half
a second). --sched is accepted for symmetry with
gpt2_step.c and ignored.
"""

import argparse
import math
import os
import sys
import time


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


def parse(argv=None):
    ap = argparse.ArgumentParser(description="GPT-2 training step in PyTorch (bench-gpt2-step's peer)")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--channels", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--sched", default=None, help="ignored (Tessera's policy)")
    ap.add_argument("--json-tag", default=None, help="the JSON line's case (default LxHxC/V)")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                    help="bf16: autocast to bfloat16 (mixed precision)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--attention", choices=("naive", "sdpa"), default="naive")
    ap.add_argument("--fused-adamw", action="store_true")
    ap.add_argument("--strict-fp32", action="store_true",
                    help="cuda: fp32 products in FP32, not TF32")
    ap.add_argument("--peak-tflops", type=float, default=0.0,
                    help="the device's peak for the precision, for the MFU figure")
    a = ap.parse_args(argv)
    for k in ("layers", "heads", "channels", "vocab", "ctx", "batch", "seq", "steps", "threads"):
        if getattr(a, k) <= 0:
            ap.error("--%s must be positive" % k)
    if a.warmup < 0:
        ap.error("--warmup must be >= 0")
    if a.channels % a.heads:
        ap.error("--channels must be a multiple of --heads")
    if a.seq > a.ctx:
        ap.error("--seq must be <= --ctx")
    return a


def main(argv=None):
    a = parse(argv)
    # before torch is imported: its OpenMP pool is sized at load time
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
    sys.path.insert(0, os.path.join(here, "..", "..", "tools"))
    import torch
    import gpt2_reference as ref

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    if a.device == "cuda":
        if not torch.cuda.is_available():
            print("torch_step.py: --device cuda but torch sees no GPU", file=sys.stderr)
            return 1
        tf32 = not a.strict_fp32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    tag = a.json_tag or "%dx%dx%d/%d" % (a.layers, a.heads, a.channels, a.vocab)

    cfg = ref.Config(a.vocab, a.ctx, a.layers, a.heads, a.channels)
    model = ref.GPT2(cfg)
    model.init_gpt2(a.seed)
    model.sdpa = a.attention == "sdpa"
    model.to(dev)
    nparams = sum(p.numel() for p in model.parameters())
    ids = torch.tensor(ref.tokens(a.batch, a.seq, a.vocab, a.seed), dtype=torch.int64)
    inputs, targets = ids[:, :a.seq].contiguous().to(dev), ids[:, 1:].contiguous().to(dev)
    extra = {"fused": True} if a.fused_adamw else {}
    opt = torch.optim.AdamW(model.param_groups(0.1), lr=a.lr, betas=(0.9, 0.95), eps=1e-8,
                            **extra)

    import contextlib
    autocast = (lambda: torch.autocast(a.device, dtype=torch.bfloat16)) \
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
    mfu = 6.0 * nparams * tps / (a.peak_tflops * 1e12) if a.peak_tflops > 0 else None
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = -1.0

    def num(v):
        return "%.4g" % v if isinstance(v, (int, float)) and math.isfinite(v) else "null"

    print("torch    %-14s %2d threads  %11d params  batch %d x %d  %d+%d steps  "
          "%.4f s/step (min %.4f)  %.1f tok/s  loss %.4f -> %.4f  load %.2f  others %.0f%%  %s"
          % (tag, a.threads, nparams, a.batch, a.seq, a.warmup, a.steps, sps, min(times),
             tps, losses[0], losses[-1], load, 100 * (others or 0), a.precision))
    print('{"bench":"gpt2-step","case":"%s","impl":"torch","workers":%d,"sched":null,'
          '"layers":%d,"heads":%d,"channels":%d,"vocab":%d,"ctx":%d,"params":%d,'
          '"batch":%d,"seq":%d,"warmup":%d,"steps":%d,"s_per_step":%s,"s_per_step_min":%s,'
          '"tok_per_s":%s,"loss_first":%s,"loss_last":%s,"load":%s,"cpu_others":%s,'
          '"precision":"%s","device":"%s","attention":"%s","fused_adamw":%s,"mfu":%s}'
          % (tag, a.threads, a.layers, a.heads, a.channels, a.vocab, a.ctx, nparams,
             a.batch, a.seq, a.warmup, a.steps, num(sps), num(min(times)), num(tps),
             num(losses[0]), num(losses[-1]), num(load) if load >= 0 else "null",
             num(others), a.precision, a.device, a.attention,
             "true" if a.fused_adamw else "false", num(mfu)))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
