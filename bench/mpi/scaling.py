#!/usr/bin/python3
"""bench/mpi/scaling.py -- on paper: a data-parallel GPT-2 step on 1..64
nodes, with a stated alpha-beta model of the gradient all-reduce, to show
where the all-reduce stops hiding behind backward.

Model (per step, every node the same):
  compute   T_c = 6 P t / F          P parameters, t tokens per node, F the
                                     node's sustained flop/s
  backward  T_b = (2/3) T_c          (4 of the 6 flops per parameter and token)
  all-reduce of the fp32 gradients, ring: each node sends and receives
            2 (N-1)/N * 4 P bytes over its links of beta bytes/s, in
            2 (N-1) steps of latency alpha:
            T_ar = 2 (N-1)/N * 4P / beta + 2 (N-1) alpha
  overlap   a tile is all-reduced as soon as backward has finished it, so
            the all-reduce runs beside backward; what backward cannot
            hide is the excess over it, and at least the all-reduce of the
            gradients completed last: the token embedding wte (tied to the
            head: its gradient's last term, the embedding backward, comes
            at the very end of backward), V C of the P parameters:
            T_exposed = max(T_ar - T_b, T_ar * (V C / P))
  ZeRO-1    adds the broadcast of the updated parameters from their owners
            (an all-gather: (N-1)/N * 4P / beta + (N-1) alpha), exposed
            unless the next forward waits only for the tiles it needs
            (counted exposed here: the bound).
  step      T = T_c + T_exposed (+ T_zero)   efficiency = T_c / T

Defaults: GPT-2 1.5 B shape (48 layers, 1600 channels, V 50257), 8 x 1024
tokens per node, F = 720 TFLOPS (NNTile's best over one 8 x A100 node,
arXiv 2504.13236), beta = 200 GB/s (a DGX A100's eight 200 Gb/s HDR
InfiniBand ports), alpha = 5 us. Every figure is a model, not a
measurement; bench/mpi/run.sh measures N = 1, 2 on this machine.

Prints a table, then one JSON line per node count:
  {"bench":"mpi-scaling","nodes":N,"step_s":T,"compute_s":T_c,
   "allreduce_s":T_ar,"exposed_s":X,"efficiency":E,"tok_per_s":R,...}
"""

import argparse
import json


def params(layers, channels, vocab, ctx):
    """GPT-2 parameter count (tied head)."""
    c = channels
    per_layer = 12 * c * c + 13 * c
    return layers * per_layer + vocab * c + ctx * c + 2 * c


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=48)
    ap.add_argument("--channels", type=int, default=1600)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--tokens", type=int, default=8 * 1024, help="tokens per node per step")
    ap.add_argument("--node-tflops", type=float, default=720.0)
    ap.add_argument("--beta-gbs", type=float, default=200.0, help="per-node network GB/s")
    ap.add_argument("--alpha-us", type=float, default=5.0)
    ap.add_argument("--zero", type=int, default=0, choices=(0, 1))
    ap.add_argument("--nodes", default="1,2,4,8,16,32,64")
    a = ap.parse_args()

    P = params(a.layers, a.channels, a.vocab, a.ctx)
    last = a.vocab * a.channels / P
    F = a.node_tflops * 1e12
    beta = a.beta_gbs * 1e9
    alpha = a.alpha_us * 1e-6
    tc = 6.0 * P * a.tokens / F
    tb = 2.0 / 3.0 * tc
    print("GPT-2 %d layers x %d channels: %.3g B parameters, %d tokens per node, "
          "%.0f TFLOPS per node, %.0f GB/s and %.1f us per node link, ZeRO-1 %s"
          % (a.layers, a.channels, P / 1e9, a.tokens, a.node_tflops, a.beta_gbs,
             a.alpha_us, "on" if a.zero else "off"))
    print("%6s %10s %10s %12s %10s %10s %11s %12s" % ("nodes", "step s", "compute s",
          "allreduce s", "backward s", "exposed s", "efficiency", "tokens/s"))
    rows = []
    for n in [int(x) for x in a.nodes.split(",")]:
        if n < 1:
            raise SystemExit("--nodes: counts must be >= 1")
        ar = 0.0 if n == 1 else 2.0 * (n - 1) / n * 4.0 * P / beta + 2.0 * (n - 1) * alpha
        exposed = 0.0 if n == 1 else max(ar - tb, ar * last)
        zero = 0.0
        if a.zero and n > 1:
            zero = (n - 1) / n * 4.0 * P / beta + (n - 1) * alpha
        step = tc + exposed + zero
        eff = tc / step
        tps = n * a.tokens / step
        rows.append(dict(bench="mpi-scaling", nodes=n, step_s=step, compute_s=tc,
                         allreduce_s=ar, backward_s=tb, exposed_s=exposed + zero,
                         efficiency=eff, tok_per_s=tps, params=P, zero=a.zero))
        print("%6d %10.4f %10.4f %12.4f %10.4f %10.4f %10.1f%% %12.0f"
              % (n, step, tc, ar, tb, exposed + zero, 100 * eff, tps))
    multi = [r for r in rows if r["nodes"] > 1]
    fits = [r["nodes"] for r in multi if r["allreduce_s"] <= r["backward_s"]]
    if multi and len(fits) == len(multi):
        where = "at every node count here (up to %d)" % multi[-1]["nodes"]
    elif fits:
        where = "up to %d nodes, not beyond" % max(fits)
    else:
        where = "at no node count here"
    print("(the all-reduce fits within backward %s; the all-reduce of the gradient completed "
          "last, wte's, is exposed in any case)" % where)
    for r in rows:
        print(json.dumps({k: (round(v, 6) if isinstance(v, float) else v) for k, v in r.items()}))


if __name__ == "__main__":
    main()
