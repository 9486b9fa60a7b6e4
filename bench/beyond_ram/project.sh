#!/usr/bin/env bash
# make bench-beyond-ram: the real run (tessera-bench-beyond-ram, flags passed
# through), then the same model shape as a projection on the simulated
# H100 and H200 (tessera-sim, docs/simulation.md), printed beside the
# measured figure and labelled as simulated.
#   bench/beyond_ram/project.sh BUILD [bench flags, e.g. --ram-gib 1]
# The projection runs whenever the bench printed its plan (even if the run
# itself failed or was refused); the script exits with the bench's status.
set -u -o pipefail
build=${1:?usage: project.sh BUILD [flags]}
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$build/bench/beyond_ram"
mkdir -p "$out"
"$build/bench/beyond_ram/tessera-bench-beyond-ram" "$@" | tee "$out/run.log"
status=${PIPESTATUS[0]}

plan=$(grep '"figure":"plan"' "$out/run.log" | tail -1)
if [ -z "$plan" ]; then
  echo "beyond-ram: no plan printed: no projection" >&2
  exit "$status"
fi
# The shape from the plan line: layers channels heads batch seq.
read -r layers channels heads batch seq < <(python3 -c '
import json, sys
p = json.loads(sys.argv[1])
print(p["layers"], p["channels"], p["heads"], p["batch"], p["seq"])' "$plan")
real=$(grep '"figure":"summary"' "$out/run.log" | tail -1)

echo
echo "projection: the same shape (${layers} layers x ${channels} channels, ${batch} x ${seq} tokens) on simulated platforms"
: > "$out/projection.jsonl"
for p in h100 h200; do
  "$build/tools/tessera-sim" --platform "$root/platforms/$p.json" --sched dmda gpt2 \
    --layers "$layers" --channels "$channels" --heads "$heads" --batch "$batch" \
    --seq "$seq" --micro 1 --steps 2 --json-tag beyond-ram >"$out/sim-$p.log" 2>&1 ||
    echo "tessera-sim on $p failed: see $out/sim-$p.log" >&2
  grep '"bench":"sim-gpt2"' "$out/sim-$p.log" | tail -1 >> "$out/projection.jsonl"
done
python3 - "$out/projection.jsonl" "$real" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
real = json.loads(sys.argv[2]) if sys.argv[2] else None
print(f"{'':38} {'s/step':>10} {'TFLOPS':>8}  state where")
if real:
    print(f"{'measured: this machine, disk tier':38} {real['s_per_step']:10.3f} "
          f"{real['tflops']:8.4f}  host {real['host_cap_gib']:.1f} GiB + disk")
else:
    print(f"{'measured: this machine, disk tier':38} {'(no run)':>10}")
for r in rows:
    name = r["platform"].rsplit("/", 1)[-1].removesuffix(".json")
    label = "SIMULATED: " + name + " (tessera-sim, dmda)"
    if not r.get("fits"):
        print(f"{label:38} {'out of memory':>10}")
        fig = {"s_per_step": None, "tflops": None}
    else:
        print(f"{label:38} {r['step_s']:10.3f} {r['tflops']:8.3f}  "
              f"GPU peak {r['peak_device_gib']:.1f} GiB")
        fig = {"s_per_step": r["step_s"], "tflops": r["tflops"],
               "peak_device_gib": r["peak_device_gib"]}
    print(json.dumps({"bench": "beyond-ram", "figure": "projection", "simulated": True,
                      "platform": name, "params": r.get("params"), **fig}))
PY
exit "$status"
