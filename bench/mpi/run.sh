#!/usr/bin/env bash
# bench/mpi/run.sh BUILD_DIR — the data-parallel GPT-2 step on this machine
# with N = 1 and 2 ranks (the 30M configuration: 6 layers, 8 heads, 512
# channels, vocabulary 16384, 4 x 128 tokens per rank, one worker per rank),
# then the same step modelled on 1-64 nodes (bench/mpi/scaling.py).
#
# For each run: tokens/s over all ranks (tessera-bench-dp), and from each
# rank's trace the time its communication thread had transfers in flight
# per step ("comm s/step", the union of the transfers' intervals) and the
# share of that time during which the rank's worker was running a task
# ("overlapped": communication hidden behind compute). Prints a table, then
# one JSON line per figure:
#   {"bench":"mpi","case":"np2-zero0","metric":"tok_per_s"|"comm_s_per_step"|
#    "overlap","value":V,"unit":U,"peer":"np1","peer_value":P,"ratio":R}
# Needs mpirun (Open MPI); as root it sets OMPI_ALLOW_RUN_AS_ROOT. Exit 1 if
# a run failed. MPI_BENCH_STEPS (4) sets the timed steps.
set -u
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
    echo "usage: $0 BUILD_DIR" >&2
    exit 2
fi
BUILD=$1
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$BUILD/bench/mpi/tessera-bench-dp
STEPS=${MPI_BENCH_STEPS:-4}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export TESSERA_PERFMODEL_DIR=${TESSERA_PERFMODEL_DIR:-$(mktemp -d)}
if [ ! -x "$BIN" ] || ! command -v mpirun >/dev/null 2>&1; then
    echo "bench-mpi: needs $BIN (a build with MPI) and mpirun" >&2
    exit 1
fi
out=$(mktemp -d)
status=0
echo "GPT-2 30M data parallel: 1 worker per rank, 4 x 128 tokens per rank," \
     "$STEPS steps ($(date -u +%Y-%m-%dT%H:%M:%SZ), load $(cut -d' ' -f1 /proc/loadavg))"
for c in "1 0" "2 0" "2 1"; do
    set -- $c
    np=$1 zero=$2 tag=np$1-zero$2
    mkdir -p "$out/$tag"
    line=$(timeout 900 mpirun -np "$np" --oversubscribe --bind-to none "$BIN" \
        --steps "$STEPS" --zero "$zero" --trace-dir "$out/$tag" 2>&1)
    rc=$?
    printf '%s\n' "$line" | grep -v '^{' | sed 's/^/  /'
    [ $rc -eq 0 ] || { echo "  $tag failed (exit $rc)"; status=1; continue; }
    printf '%s\n' "$line" | grep '^{"bench":"gpt2-dp"' > "$out/$tag/result.json"
done

# The traces: per rank, the union of the communication track's intervals
# and the part of it during which a worker ran a task, over the timed steps
# (the last STEPS of the step count: taken as the trace's second half and
# more, by the steps' share of the run).
/usr/bin/python3 - "$out" "$STEPS" <<'EOF'
import glob, json, os, sys

out, steps = sys.argv[1], int(sys.argv[2])

def union(iv):
    iv = sorted(iv)
    merged = []
    for a, b in iv:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged

def overlap(a, b):
    """total length of the intersection of two unions of intervals"""
    i = j = 0
    tot = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            tot += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tot

rows = {}
for case in ("np1-zero0", "np2-zero0", "np2-zero1"):
    d = os.path.join(out, case)
    res = os.path.join(d, "result.json")
    if not os.path.exists(res):
        continue
    r = json.loads(open(res).read().strip().splitlines()[-1])
    comm_s, ovl = [], []
    for f in sorted(glob.glob(os.path.join(d, "rank-*.json"))):
        ev = json.load(open(f))["traceEvents"]
        names = {e["tid"]: e["args"]["name"] for e in ev if e.get("ph") == "M"}
        comm_tids = {t for t, n in names.items() if "comm" in n}
        xs = [e for e in ev if e.get("ph") == "X"]
        if not xs:
            continue
        t_end = max(e["ts"] + e["dur"] for e in xs)
        # the timed steps: the last steps / (steps + 1 warm-up) of the span
        t_beg = min(e["ts"] for e in xs)
        t0 = t_end - (t_end - t_beg) * steps / (steps + 1.0)
        comm = union([[max(e["ts"], t0), e["ts"] + e["dur"]] for e in xs
                      if e["tid"] in comm_tids and e["ts"] + e["dur"] > t0])
        work = union([[e["ts"], e["ts"] + e["dur"]] for e in xs
                      if e["tid"] not in comm_tids and e["ts"] + e["dur"] > t0])
        c = sum(b - a for a, b in comm)
        comm_s.append(c / 1e6 / steps)
        ovl.append(overlap(comm, work) / c if c > 0 else None)
    r["comm_s_per_step"] = max(comm_s) if comm_s else None
    vals = [x for x in ovl if x is not None]
    r["overlap"] = min(vals) if vals else None
    rows[case] = r

def fmt(v, f):
    return "-" if v is None else f % v

base = rows.get("np1-zero0", {}).get("tok_per_s")
print("\n%-10s %6s %10s %10s %10s %12s %11s" % ("case", "ranks", "s/step", "tok/s",
      "vs np1", "comm s/step", "overlapped"))
for case, r in rows.items():
    ratio = r["tok_per_s"] / base if base else None
    print("%-10s %6d %10.4f %10.1f %10s %12s %11s" % (case, r["ranks"], r["s_per_step"],
          r["tok_per_s"], fmt(ratio, "%.3f"), fmt(r["comm_s_per_step"], "%.4f"),
          fmt(None if r["overlap"] is None else 100 * r["overlap"], "%.1f%%")))
print("(tok/s over all ranks; comm: the busiest rank's transfers in flight per step;"
      " overlapped: the least-overlapped rank's share of it while its worker computed)\n")
for case, r in rows.items():
    for metric, unit, v, peer in (("tok_per_s", "tok/s", r["tok_per_s"], base),
                                  ("comm_s_per_step", "s", r["comm_s_per_step"], None),
                                  ("overlap", "fraction", r["overlap"], None)):
        print(json.dumps({"bench": "mpi", "case": case, "metric": metric, "value": v,
                          "unit": unit, "peer": "np1-zero0" if peer else None,
                          "peer_value": peer,
                          "ratio": (v / peer) if (peer and v) else None}))
EOF
echo
/usr/bin/python3 "$HERE/scaling.py" || status=1
rm -rf "$out"
exit $status
