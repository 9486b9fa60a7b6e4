#!/usr/bin/python3
"""Plots of tessera-bench-sched's results.json (docs/benchmarks.md).

usage: /usr/bin/python3 bench/sched/plot.py [RESULTS_JSON [OUT_DIR]]

RESULTS_JSON defaults to build/bench/sched/results.json; the PNGs go next to
it unless OUT_DIR is given:
  makespan.png        makespan per policy, one panel per (platform, graph),
                      Tessera and StarPU side by side
  idle.png            total idle time of the workers, same layout
  sched_overhead.png  scheduling time per task (empty kernels), same layout
  moved.png           MiB moved between memory nodes on cpu+sim
Uses Debian's python3-matplotlib; without it, says so and draws nothing.
"""
import json
import os
import sys

RUNTIMES = [("tessera", "#1f77b4"), ("starpu", "#ff7f0e")]


def load(path):
    with open(path) as f:
        return json.load(f)


def ordered(values):
    seen = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return seen


def panel(ax, rows, graph, platform, metric, policies, log=False):
    width = 0.8 / len(RUNTIMES)
    drawn = False
    for k, (rt, color) in enumerate(RUNTIMES):
        xs, ys, lo, hi, failed = [], [], [], [], []
        for i, pol in enumerate(policies):
            r = next((r for r in rows if r["graph"] == graph and r["platform"] == platform
                      and r["policy"] == pol and r["runtime"] == rt), None)
            if r is None:
                continue
            x = i + (k - (len(RUNTIMES) - 1) / 2) * width
            # check is null when the run was simulated (phantom data)
            right = r["check"] == "PASS" or (r["check"] is None and r.get("simulated"))
            if r["ok"] and right and r[metric] is not None:
                xs.append(x)
                ys.append(r[metric])
                # error bar: min-max over the repetitions
                lo.append(r[metric] - r.get(metric + "_min", r[metric]))
                hi.append(r.get(metric + "_max", r[metric]) - r[metric])
            else:
                failed.append(x)
        if xs:
            ax.bar(xs, ys, width, label=rt, color=color, yerr=[lo, hi],
                   error_kw={"elinewidth": 0.8, "capsize": 2})
            drawn = True
        for x in failed:
            ax.text(x, 0, "failed", rotation=90, ha="center", va="bottom",
                    fontsize=7, color="red")
    ax.set_xticks(range(len(policies)))
    ax.set_xticklabels(policies, rotation=45, ha="right", fontsize=8)
    ax.set_title(f"{graph} / {platform}", fontsize=9)
    ax.tick_params(axis="y", labelsize=8)
    if log and drawn:
        ax.set_yscale("log")
    return drawn


def grid(plt, data, metric, ylabel, platforms, path, log=False):
    rows = data["rows"]
    graphs = ordered(r["graph"] for r in rows)
    if not graphs or not platforms:
        return None
    fig, axes = plt.subplots(len(platforms), len(graphs),
                             figsize=(3.6 * len(graphs), 3.2 * len(platforms)),
                             squeeze=False)
    for pi, plat in enumerate(platforms):
        for gi, g in enumerate(graphs):
            pols = ordered(r["policy"] for r in rows
                           if r["graph"] == g and r["platform"] == plat)
            ax = axes[pi][gi]
            if not pols:
                ax.set_visible(False)
                continue
            panel(ax, rows, g, plat, metric, pols, log)
            if gi == 0:
                ax.set_ylabel(ylabel, fontsize=9)
    handles, labels = [], []
    for ax in axes.flat:
        h, lab = ax.get_legend_handles_labels()
        for hh, ll in zip(h, lab):
            if ll not in labels:
                handles.append(hh)
                labels.append(ll)
    if handles:
        fig.legend(handles, labels, loc="upper right", fontsize=9)
    quick = " (quick)" if data.get("quick") else ""
    fig.suptitle(f"tessera-bench-sched: {ylabel}{quick}, median of {data.get('reps')} runs",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0, 0.94, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv):
    src = argv[1] if len(argv) > 1 else "build/bench/sched/results.json"
    if not os.path.exists(src):
        print(f"plot.py: {src} not found (run tessera-bench-sched first)", file=sys.stderr)
        return 1
    out = argv[2] if len(argv) > 2 else os.path.dirname(os.path.abspath(src))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot.py: matplotlib is not installed (Debian: apt-get install "
              "python3-matplotlib); no plots drawn. The figures are in " + src)
        return 0
    data = load(src)
    os.makedirs(out, exist_ok=True)
    platforms = ordered(r["platform"] for r in data["rows"])
    written = [
        grid(plt, data, "makespan_ms", "makespan (ms)", platforms,
             os.path.join(out, "makespan.png")),
        grid(plt, data, "idle_s", "idle time of workers (s)", platforms,
             os.path.join(out, "idle.png")),
        grid(plt, data, "sched_us_per_task", "scheduling time per task (us)", platforms,
             os.path.join(out, "sched_overhead.png"), log=True),
    ]
    if "cpu+sim" in platforms:
        written.append(grid(plt, data, "moved_mib", "MiB moved between nodes", ["cpu+sim"],
                            os.path.join(out, "moved.png")))
    written = [w for w in written if w]
    if not written:
        print("plot.py: no rows to plot in " + src)
        return 0
    print("plots:")
    for w in written:
        print("  " + w)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
