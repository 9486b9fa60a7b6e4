#!/usr/bin/python3
"""bench/sim/validate.py BUILD OUT [--quick] [--parts=machine,nntile,project]

The simulation's validation and projections (docs/simulation.md):

1. machine — against this machine. Performance models are calibrated by
   real runs; then the same programs run under TESSERA_SIMULATE with those
   models, and the simulated makespans are compared with the measured ones:
   tessera-bench-sched's graphs on its two platforms (CPU workers; CPU
   workers + 2 throttled simulated accelerators) under every built-in policy,
   and a GPT-2 training step (bench-gpt2-step). Table: measured (median and
   spread of the repetitions), predicted, error; median |error|; whether the
   simulation ranks the policies in the measured order.
2. nntile — against NNTile's published curves (8x A100 80 GB SXM, tf32,
   900 GB host RAM; TFLOPS of the whole node read off NNTile's README
   figures): GPT-2 models of those sizes on platforms/dgx-a100.json with a
   NNTile-like setup (dmda, no lookahead: one task held per GPU worker), the
   platform's GEMM efficiency calibrated on ONE point, the rest predicted.
3. project — what that says about Tessera: the same sizes with Tessera's
   best policy and tiling, the largest GPT-2 that trains on the simulated
   DGX A100, per-layer throughput at 8 layers against 4, bytes moved over
   the lower bound; one 1x H200 + 1.5 TB host point.

Prints tables and one JSON line per figure; writes OUT/*.json and, with
matplotlib, OUT/nntile.png. Simulated times are virtual time of the
simulation, never GPU measurements.
"""
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PLATFORMS = os.path.join(ROOT, "platforms")
VOCAB = 50257
SEQ = 1024

# NNTile's README figures (TFLOPS of the node, tf32, 8x A100 80 GB SXM):
# (billions of parameters, TFLOPS or None for out of memory).
NNTILE = {
    4: [(1.5, 560), (4.5, 655), (10.6, 720), (15.4, 600), (19.2, 645), (25.5, 560),
        (30.2, 500), (38.1, 520), (43.8, 360), (50.0, 350), (53.2, None)],
    8: [(2.8, 530), (6.9, 580), (10.6, 500), (17.7, 550), (23.4, 385), (30.0, 415),
        (37.3, 350), (41.3, 315), (49.9, 320), (54.5, None)],
}
# PyTorch FSDP on the same node, for the table's context only.
FSDP = "FSDP tf32 ~720 TFLOPS up to 4.5 B, out of memory at 9.2 B (4 layers) and " \
       "12.8 B (8 layers); FSDP bf16 ~1500 TFLOPS up to ~9 B, out of memory at 17.3 B"
CALIBRATION_POINT = (4, 10.6)   # the one point the platform is fitted on


def channels_for(layers, billions):
    """The width C, a multiple of 512, with 12 L C^2 + V C closest to the size."""
    n = billions * 1e9
    c = (-VOCAB + math.sqrt(VOCAB * VOCAB + 48.0 * layers * n)) / (24.0 * layers)
    return max(512, int(round(c / 512.0)) * 512)


def params_of(layers, c):
    return 12 * layers * c * c + VOCAB * c


def log(*a):
    print(*a, flush=True)


def run(cmd, env=None, timeout=3600):
    e = dict(os.environ)
    if env:
        e.update(env)
    t0 = time.time()
    p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr, time.time() - t0


def json_lines(text):
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def parallel(fn, items):
    """fn over items on every core, results in order: simulated figures are
    virtual time, so concurrent runs do not change them (the real runs of
    part 1 never go through here)."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as ex:
        return list(ex.map(fn, items))


def emit(bench, case, metric, value, unit, **extra):
    d = {"bench": bench, "case": case, "metric": metric, "value": value, "unit": unit}
    d.update(extra)
    print(json.dumps(d), flush=True)


# ---- 1. against this machine ----------------------------------------------

def bench_sched(build, out, platform, graphs, policies, reps, quick, env):
    cmd = [os.path.join(build, "bench/sched/tessera-bench-sched"), "--no-starpu",
           "--graphs=" + ",".join(graphs), "--policies=" + ",".join(policies),
           "--platforms=" + platform, "--reps=%d" % reps, "--out=" + out]
    if quick:
        cmd.append("--quick")
    rc, so, se, wall = run(cmd, env)
    path = os.path.join(out, "results.json")
    if rc != 0 or not os.path.exists(path):
        log("bench-sched failed (%d): %s" % (rc, se[-2000:]))
        return None, wall
    with open(path) as f:
        res = json.load(f)
    rows = {}
    for r in res["rows"]:
        if r["runtime"] == "tessera" and r["ok"]:
            rows[(r["graph"], r["policy"])] = r
    return rows, wall


def kendall_agree(measured, predicted):
    """Fraction of policy pairs the simulation orders as the measurement
    does (pairs closer than 3% in the measurement count as agreeing)."""
    keys = sorted(measured)
    agree = total = 0
    for i in range(len(keys)):
        for j in range(i + 1, len(keys)):
            a, b = keys[i], keys[j]
            m = measured[a] - measured[b]
            p = predicted[a] - predicted[b]
            total += 1
            if abs(m) <= 0.03 * max(measured[a], measured[b]) or m * p > 0:
                agree += 1
    return agree / total if total else 1.0


def part_machine(build, out, quick):
    log("\n== 1. simulation against this machine ==")
    policies = ["eager", "prio", "random", "ws", "dmda", "heft"]
    graphs = ["gemm", "cholesky", "random", "forkjoin"]
    reps = 3 if quick else 5
    platforms = [("cpu", "cpu-this-machine.json"), ("cpu+sim", "cpu-sim-this-machine.json")]
    table, errors = [], []
    for plat, pfile in platforms:
        wdir = os.path.join(out, "machine-" + plat.replace("+", "-"))
        shutil.rmtree(wdir, ignore_errors=True)
        os.makedirs(wdir)
        # calibrate: every (codelet, device, footprint) sampled until known
        bench_sched(build, os.path.join(wdir, "real"), plat, graphs, policies, 1, quick,
                    {"TESSERA_CALIBRATE": "1"})
        real, wall_real = bench_sched(build, os.path.join(wdir, "real"), plat, graphs,
                                      policies, reps, quick, {})
        simdir = os.path.join(wdir, "sim")
        shutil.copytree(os.path.join(wdir, "real", "models"), os.path.join(simdir, "models"))
        sim, wall_sim = bench_sched(build, simdir, plat, graphs, policies, 1, quick,
                                    {"TESSERA_SIMULATE": os.path.join(PLATFORMS, pfile)})
        if real is None or sim is None:
            continue
        for g in graphs:
            meas, pred = {}, {}
            for pol in policies:
                r, s = real.get((g, pol)), sim.get((g, pol))
                if not r or not s:
                    continue
                m, p = r["makespan_ms"], s["makespan_ms"]
                err = (p - m) / m
                errors.append(abs(err))
                meas[pol], pred[pol] = m, p
                spread = "%.1f-%.1f" % (r.get("makespan_ms_min", m), r.get("makespan_ms_max", m))
                table.append((plat, g, pol, m, spread, p, err))
                emit("sim-validate", "%s/%s/%s" % (g, plat, pol), "makespan_ms", p, "ms",
                     measured=m, error=round(err, 4))
            if meas:
                agree = kendall_agree(meas, pred)
                table.append((plat, g, "(ranking)", None, None, None, agree))
                emit("sim-validate", "%s/%s" % (g, plat), "rank_agreement", agree, "fraction")
        log("  %s: real runs %.0f s, simulated runs %.1f s (wall)" % (plat, wall_real, wall_sim))

    gpt = gpt2_machine(build, out, quick)
    if gpt:
        table.append(gpt)
        errors.append(abs(gpt[-1]))
    log("\n%-8s %-9s %-10s %12s %16s %12s %8s" % ("platform", "graph", "policy",
                                                 "measured ms", "spread ms", "predicted",
                                                 "error"))
    for plat, g, pol, m, spread, p, err in table:
        if m is None:
            log("%-8s %-9s %-10s %12s %16s %12s %7.0f%%  pairs ordered as measured" %
                (plat, g, pol, "", "", "", 100 * err))
        else:
            log("%-8s %-9s %-10s %12.2f %16s %12.2f %+7.1f%%" % (plat, g, pol, m, spread, p,
                                                                100 * err))
    if errors:
        med = statistics.median(errors)
        log("median |error| = %.1f%% over %d cells" % (100 * med, len(errors)))
        emit("sim-validate", "all", "median_abs_error", med, "fraction", cells=len(errors))
    with open(os.path.join(out, "machine.json"), "w") as f:
        json.dump(table, f)


def gpt2_machine(build, out, quick):
    """A GPT-2 step on this machine's CPU workers, measured then simulated."""
    exe = os.path.join(build, "bench/gpt2/bench-gpt2-step")
    models = os.path.join(out, "gpt2-models")
    shutil.rmtree(models, ignore_errors=True)
    shape = ["--layers", "4", "--heads", "8", "--channels", "512", "--vocab", "8192",
             "--ctx", "256", "--batch", "4", "--seq", "256", "--sched", "dmda"]
    env = {"TESSERA_PERFMODEL_DIR": models}
    steps = ["--warmup", "1", "--steps", "3" if quick else "5"]
    run([exe] + shape + ["--warmup", "0", "--steps", "3"], dict(env, TESSERA_CALIBRATE="1"))
    rc, so, se, _ = run([exe] + shape + steps, env)
    real = [j for j in json_lines(so) if "s_per_step" in j]
    rc2, so2, se2, wall = run([exe] + shape + steps, dict(env, TESSERA_SIMULATE=os.path.join(
        PLATFORMS, "cpu-this-machine.json")))
    sim = [j for j in json_lines(so2) if "s_per_step" in j]
    if not real or not sim or real[0]["s_per_step"] is None or sim[0]["s_per_step"] is None:
        log("gpt2 step: measured or simulated run failed: %s %s" % (se[-500:], se2[-500:]))
        return None
    m, p = real[0]["s_per_step"] * 1e3, sim[0]["s_per_step"] * 1e3
    err = (p - m) / m
    emit("sim-validate", "gpt2-step/cpu/dmda", "step_ms", p, "ms", measured=m,
         error=round(err, 4))
    return ("cpu", "gpt2-step", "dmda", m, "", p, err)


# ---- 2. against NNTile ---------------------------------------------------------

def tessera_sim(build, platform, layers, c, policy, extra_env=None, args=()):
    exe = os.path.join(build, "tools/tessera-sim")
    cmd = [exe, "--platform", platform, "--sched", policy, "gpt2", "--layers", str(layers),
           "--channels", str(c), "--heads", str(max(1, c // 128)), "--context", str(SEQ)]
    cmd += list(args)
    rc, so, se, wall = run(cmd, extra_env, timeout=1800)
    js = [j for j in json_lines(so) if j.get("bench") == "sim-gpt2"]
    if not js:
        return {"fits": False, "oom": False, "error": (se or so)[-400:], "wall_s": wall}
    j = js[-1]
    j["wall"] = wall
    return j


def platform_with(base, out, name, gemm_eff):
    """A copy of a platform file with another GEMM efficiency on its GPUs."""
    with open(base) as f:
        p = json.load(f)
    cl = p["devices"]["cuda"].setdefault("codelets", {})
    cl.setdefault("gemm", {})["flops_efficiency"] = gemm_eff
    path = os.path.join(out, name)
    with open(path, "w") as f:
        json.dump(p, f, indent=1)
    return path


NNTILE_ENV = {"TESSERA_PIPELINE": "1",  # no lookahead: one task held per worker
              "TESSERA_PLACEMENT": "replicate",  # the copies go where the tasks run
              "TESSERA_NCPU": "-1"}  # the GPUs do all the work, as in NNTile's runs
# NNTile's documented setup: 1024 sequences of 1024 tokens per optimizer step
# (--batch=1024), one sequence per token tile (--seq-tile=1024); its minibatch
# for these runs is not published: 8 sequences is our assumption. Three
# micro-batches are simulated, the other 125 extrapolated from the later two.
STEP_ARGS = ["--batch", "8", "--micro", "3", "--accumulate", "1024", "--tile-tokens", "1024"]


def nntile_args(c):
    """The NNTile-like setup's flags at width c. Its MLP tiles are pinned to
    the rule the platform was calibrated with (one (4C, C) hidden tile where
    its (4C, 1024) activations fit 256 MiB, C rows beyond), its channels
    to one tile (Tessera's channel tiles are Tessera's, not NNTile's) and
    its micro-batches to one at a time (Tessera's waves are Tessera's), so
    that a change of Tessera's defaults does not move the calibration."""
    return STEP_ARGS + ["--tile-hidden", str(4 * c if 4 * c * 1024 * 4 <= 256 << 20 else c),
                        "--tile-channels", str(c), "--wave", "1"]


def part_nntile(build, out, quick):
    log("\n== 2. simulation against NNTile's curves (DGX A100, tf32) ==")
    base = os.path.join(PLATFORMS, "dgx-a100.json")
    L0, B0 = CALIBRATION_POINT
    target = dict(NNTILE[L0])[B0]
    c0 = channels_for(L0, B0)
    # calibrate the GPUs' GEMM efficiency on one point by bisection
    lo, hi = 0.2, 1.0
    cal = None
    for it in range(6 if quick else 9):
        eff = 0.5 * (lo + hi)
        path = platform_with(base, out, "dgx-a100-cal.json", eff)
        r = tessera_sim(build, path, L0, c0, "dmda", NNTILE_ENV, nntile_args(c0))
        if not r.get("fits"):
            log("calibration run failed: %s" % r.get("error"))
            return None
        log("  calibrating: GEMM efficiency %.3f -> %.1f TFLOPS (target %d)" %
            (eff, r["tflops"], target))
        cal = (eff, r["tflops"])
        if r["tflops"] < target:
            lo = eff
        else:
            hi = eff
    eff = cal[0]
    emit("sim-nntile", "calibration", "gemm_efficiency", eff, "fraction",
         point="%d layers %.1f B" % (L0, B0), tflops=cal[1], target=target)
    path = platform_with(base, out, "dgx-a100-calibrated.json", eff)
    rows, errors = [], []
    points = [(layers, b, nn) for layers in (4, 8) for b, nn in NNTILE[layers]
              if not quick or b in (1.5, 10.6, 50.0, 53.2, 2.8, 49.9, 54.5)]
    results = parallel(lambda p: tessera_sim(build, path, p[0], channels_for(p[0], p[1]), "dmda",
                                             NNTILE_ENV, nntile_args(channels_for(p[0], p[1]))),
                       points)
    for (layers, b, nn), r in zip(points, results):
        c = channels_for(layers, b)
        sim = r["tflops"] if r.get("fits") else None
        err = (sim - nn) / nn if (sim is not None and nn) else None
        if err is not None and (layers, b) != CALIBRATION_POINT:
            errors.append(abs(err))
        rows.append((layers, b, c, params_of(layers, c) / 1e9, nn, sim, err,
                     r.get("wall", 0.0), r.get("error", "")))
        emit("sim-nntile", "%dL/%.1fB" % (layers, b), "tflops", sim, "TFLOPS", nntile=nn,
             error=None if err is None else round(err, 4), channels=c)
    log("\n%-6s %-8s %-7s %-9s %-10s %-10s %-8s %-7s" % ("layers", "size B", "C", "params B",
                                                         "NNTile", "simulated", "error",
                                                         "wall s"))
    for layers, b, c, pb, nn, sim, err, wall, why in rows:
        log("%-6d %-8.1f %-7d %-9.2f %-10s %-10s %-8s %-7.1f%s" % (
            layers, b, c, pb, "OOM" if nn is None else "%d" % nn,
            "OOM" if sim is None else "%.0f" % sim,
            "" if err is None else "%+.0f%%" % (100 * err), wall,
            "" if sim is not None else "  (" + why.strip()[:60] + ")"))
    if errors:
        med = statistics.median(errors)
        log("median |error| over the predicted points: %.1f%% (%d points); calibrated on %d "
            "layers %.1f B" % (100 * med, len(errors), L0, B0))
        emit("sim-nntile", "all", "median_abs_error", med, "fraction", points=len(errors))
    log(FSDP)
    with open(os.path.join(out, "nntile.json"), "w") as f:
        json.dump({"gemm_efficiency": eff, "rows": rows}, f)
    plot(out, rows)
    return path


def plot_curves(out, name, rows, series):
    """TFLOPS against parameters, one panel per depth (4 and 8 layers): each
    series is (label, matplotlib style, the row's y or None); rows have the
    layers first and the size in billions second."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("(matplotlib missing: no plot)")
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, layers in zip(axes, (4, 8)):
        pts = [r for r in rows if r[0] == layers]
        for label, style, y in series:
            xy = [(r[1], y(r)) for r in pts if y(r)]
            ax.plot([p[0] for p in xy], [p[1] for p in xy], style, label=label,
                    **({"linewidth": 0.8} if style == "k--" else {}))
        ax.set_title("GPT-2, %d layers, 8x A100 (tf32)" % layers)
        ax.set_xlabel("parameters (billions)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("TFLOPS (node)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=110)
    log("plot: %s" % os.path.join(out, name))


def plot(out, rows):
    plot_curves(out, "nntile.png", rows, [
        ("NNTile (measured, README)", "o-", lambda r: r[4]),
        ("Tessera simulation, NNTile-like setup", "s--", lambda r: r[5])])


# ---- 3. projections ---------------------------------------------------------------

def plot_project(out, rows):
    """Part 3's table as a plot: NNTile, Tessera before homes (replicated)
    and Tessera's default configuration now, per size."""
    plot_curves(out, "project.png", rows, [
        ("NNTile (measured, README)", "o-", lambda r: r[4]),
        ("Tessera before homes (simulated)", "s:", lambda r: r[10]),
        ("Tessera default now (simulated)", "^-", lambda r: r[5]),
        ("1.3x NNTile (goal)", "k--", lambda r: 1.3 * r[4] if r[4] else None)])


def part_project(build, out, quick, platform):
    log("\n== 3. projections for Tessera (simulated) ==")
    if platform is None:
        platform = os.path.join(PLATFORMS, "dgx-a100.json")
    # The default configuration at every point: the default policy (eager),
    # the default tiles, auto placement and the node's CPU workers (the
    # platform's 120: its 128 cores less the 8 that drive GPUs, Tessera's
    # default count there); the same flags everywhere (the step: 128
    # micro-batches of 8 sequences, three simulated). Beside it, the same
    # with placement forced to replicate: Tessera before homes.
    step = ["--batch", "8", "--micro", "3", "--accumulate", "1024"]
    best_rows = []
    for layers in (4, 8):
        sizes = [b for b, _ in NNTILE[layers]]
        if quick:
            sizes = [sizes[0], 10.6, sizes[-3], sizes[-2]]
        for b in sizes:
            c = channels_for(layers, b)
            nntile = dict(NNTILE[layers])[b]
            runs = parallel(lambda env: tessera_sim(build, platform, layers, c, "eager", env, step),
                            [{}, {"TESSERA_PLACEMENT": "replicate"}])
            r, before = runs
            if not r.get("fits"):
                best_rows.append((layers, b, c, None, nntile, None, None, None, None, None,
                                  before.get("tflops"), None, None))
                continue
            ratio = r["step_bytes"] / r["lower_bound_bytes"] if r["lower_bound_bytes"] else None
            vs = r["tflops"] / nntile if isinstance(nntile, (int, float)) else None
            # where the state exceeds the GPUs: the same on the GPUs alone
            # (no CPU worker, as NNTile ran): AdamW then runs on the GPUs
            cpu = (tessera_sim(build, platform, layers, c, "eager", {"TESSERA_NCPU": "-1"}, step)
                   if ratio is not None else {})
            cpu_ratio = (cpu["step_bytes"] / cpu["lower_bound_bytes"]
                         if cpu.get("fits") and cpu["lower_bound_bytes"] else None)
            best_rows.append((layers, b, c, r["placement"], nntile, r["tflops"], vs, ratio,
                              r["peak_host_gib"], r["peak_device_gib"], before.get("tflops"),
                              cpu.get("tflops"), cpu_ratio))
            emit("sim-project", "%dL/%.1fB" % (layers, b), "tflops", r["tflops"], "TFLOPS",
                 policy="eager (default)", placement=r["placement"], nntile=nntile,
                 over_nntile=None if vs is None else round(vs, 3),
                 before=before.get("tflops"),
                 bytes_over_lower_bound=None if ratio is None else round(ratio, 2),
                 peak_host_gib=r["peak_host_gib"], peak_device_gib=r["peak_device_gib"],
                 gpus_only_tflops=cpu.get("tflops"),
                 gpus_only_bytes_over_lower_bound=None if cpu_ratio is None
                 else round(cpu_ratio, 2))
    log("\n%-6s %-7s %-6s %-10s %-7s %-8s %-7s %-11s %-8s %-8s %-7s %-9s %-9s" % (
        "layers", "size B", "C", "placement", "NNTile", "Tessera", "ratio", "bytes / LB",
        "host GiB", "GPU GiB", "before", "GPUs TF", "GPUs B/LB"))
    for layers, b, c, pl, nn, tf, vs, ratio, host, dev, before, ctf, cratio in best_rows:
        log("%-6d %-7.1f %-6d %-10s %-7s %-8s %-7s %-11s %-8s %-8s %-7s %-9s %-9s" % (
            layers, b, c, pl or "-", nn, "OOM" if tf is None else "%.0f" % tf,
            "-" if vs is None else "%.2f" % vs,
            "-" if ratio is None else ("%.1f" % ratio),
            "-" if host is None else "%.0f" % host, "-" if dev is None else "%.0f" % dev,
            "-" if before is None else "%.0f" % before,
            "-" if ctf is None else "%.0f" % ctf, "-" if cratio is None else "%.1f" % cratio))
    plot_project(out, best_rows)
    ok = [r for r in best_rows if r[6] is not None]
    if ok:
        worst = min(ok, key=lambda r: r[6])
        log("lowest ratio to NNTile: %.2f (%d layers, %.1f B); goal 1.3" % (worst[6], worst[0],
                                                                            worst[1]))
        emit("sim-project", "all", "min_over_nntile", round(worst[6], 3), "ratio", goal=1.3)
    per = {(r[0], r[1]): r[5] for r in best_rows if r[5]}
    if (4, 10.6) in per and (8, 10.6) in per:
        x = per[(8, 10.6)] / per[(4, 10.6)]
        log("10.6 B: 8 layers reach %.0f%% of the 4-layer TFLOPS (NNTile: %.0f%%)" %
            (100 * x, 100 * 500 / 720))
        emit("sim-project", "10.6B", "tflops_8L_over_4L", round(x, 3), "ratio", nntile=0.694)
    # The largest models: the default configuration with recompute (the
    # model then runs waves where its weights do not stay on the GPUs,
    # docs/gpt2.md "Waves"), first without the disk tier, then with it
    # (the platforms' NVMe drives), and one H200 + 1.5 TB host.
    largest_rows = []
    # (with the disk tier, 8 layers reach the search's upper end, C =
    # 46080: channel tiles lifted the (C, C) tile's 2^31 elements that
    # stopped it there; wider searches cost minutes a step, so deeper
    # models are simulated one by one: docs/simulation.md)
    widest = 46336 + 512
    cases = [("dgx-a100", platform, 8, 10.0, channels_for(8, 120.0), False),
             ("dgx-a100+nvme", platform, 8, 60.0, widest, True),
             ("h200+nvme", os.path.join(PLATFORMS, "h200.json"), 8, 60.0, widest, True)]
    if quick:  # the goal's case only: the NVMe searches take minutes a step
        cases = cases[:1]
    for name, plat, layers, lo_b, hi_c, disk in cases:
        lo, r = largest(build, plat, layers, channels_for(layers, lo_b), hi_c, disk)
        if not r:
            continue
        row = (name, layers, lo, params_of(layers, lo) / 1e9, r["tflops"], r.get("wave"),
               r["peak_host_gib"], r.get("host_overdraft_gib") or 0.0,
               r["step_bytes"] / r["lower_bound_bytes"] if r["lower_bound_bytes"] else None)
        largest_rows.append(row)
        emit("sim-project", "%s/%dL" % (name, layers), "largest_params",
             round(row[3], 2), "billions", tflops=r["tflops"], wave=r.get("wave"),
             policy="eager (default)", recompute=1, disk=disk,
             peak_host_gib=r["peak_host_gib"], host_overdraft_gib=row[7])
    log("\nlargest GPT-2 that trains (default policy, --recompute, waves chosen by the model):")
    log("%-15s %-6s %-6s %-8s %-8s %-5s %-9s %-10s %-8s" % (
        "platform", "layers", "C", "size B", "TFLOPS", "wave", "host GiB", "overdraft",
        "bytes/LB"))
    for name, layers, c, b, tf, wave, host, over, ratio in largest_rows:
        log("%-15s %-6d %-6d %-8.1f %-8.0f %-5s %-9.0f %-10.0f %-8s" % (
            name, layers, c, b, tf, wave, host, over, "-" if ratio is None else "%.1f" % ratio))
    with open(os.path.join(out, "project.json"), "w") as f:
        json.dump(best_rows, f)


def largest(build, platform, layers, lo, hi, disk=False):
    """The widest model (C a multiple of 512) whose step fits, by bisection
    between a width that fits (lo) and one that does not (hi): the default
    policy and tiles, with recompute (and so waves where the weights do not
    stay on the GPUs); disk: with the platform's disk tier."""
    args = ["--batch", "8", "--micro", "3", "--accumulate", "1024", "--recompute"]
    env = {"TESSERA_SIMULATE_NO_DISK": "0"} if disk else None
    r = tessera_sim(build, platform, layers, lo, "eager", env, args)
    if not r.get("fits"):
        log("  (%d channels does not fit: %s)" % (lo, r.get("error", "")))
        return lo, None
    best = r
    while hi - lo > 512:
        mid = (lo + hi) // 2 // 512 * 512
        if mid <= lo:
            break
        r = tessera_sim(build, platform, layers, mid, "eager", env, args)
        if r.get("fits"):
            lo, best = mid, r
        else:
            hi = mid
    return lo, best


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = [a for a in sys.argv[1:] if a.startswith("--")]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    build, out = args
    quick = "--quick" in flags
    parts = ["machine", "nntile", "project"]
    for f in flags:
        if f.startswith("--parts="):
            parts = f.split("=", 1)[1].split(",")
    os.makedirs(out, exist_ok=True)
    cal = None
    if "machine" in parts:
        part_machine(build, out, quick)
    if "nntile" in parts:
        cal = part_nntile(build, out, quick)
    if "project" in parts:
        part_project(build, out, quick, cal)
    return 0


if __name__ == "__main__":
    sys.exit(main())
