#!/usr/bin/env bash
# tests/tools/test_sim.sh TOOLS_DIR PLATFORMS_DIR [PLUGIN.so] — tessera-sim end
# to end: a GPT-2 step on the simulated DGX A100 gives the same figures at
# every run (virtual time is deterministic), a 50 B-parameter step runs with
# phantom data in well under 1 GiB of the simulator's own memory, a policy
# plug-in runs, a node too small for the model is reported as out of memory
# (exit 3), the DGX A100's disk tier (NVMe) changes nothing in a step that
# fits without it and trains a 104 B-parameter step beyond host + GPU memory
# (out of memory with --no-disk), and bad flags or platform files fail
# clearly (exit 2 / 1).
# Prints a Criterion-style synthesis line for tests/run-suite.sh.
set -u
BIN=$1
PLAT=$2
PLUGIN=${3:-}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
SUITE=sim
. "$(dirname "$0")/lib.sh"

SIM="$BIN/tessera-sim"
SMALL=(gpt2 --layers 2 --channels 1024 --batch 4 --micro 2 --steps 2)

# the JSON line's value of a field
field() { sed -n 's/.*"'"$1"'":\([^,}]*\).*/\1/p'; }

run_small() { "$SIM" --platform "$PLAT/dgx-a100.json" --sched dmda "${SMALL[@]}"; }
deterministic() {
    local a b
    a=$(run_small | grep '^{') && b=$(run_small | grep '^{') || return 1
    echo "$a" | grep -q '"fits":true' || return 1
    local sa sb ta tb
    sa=$(echo "$a" | field step_s) sb=$(echo "$b" | field step_s)
    ta=$(echo "$a" | field tasks) tb=$(echo "$b" | field tasks)
    echo "step_s $sa / $sb, tasks $ta / $tb"
    [ -n "$sa" ] && [ "$sa" = "$sb" ] && [ "$ta" = "$tb" ] && [ "$ta" -gt 0 ]
}
check deterministic deterministic

# 50 B parameters: 800 GB of parameters, gradients and AdamW moments, none of
# it backed by memory of this machine
phantom_50b() {
    local j rss
    j=$("$SIM" --platform "$PLAT/dgx-a100.json" gpt2 --layers 4 --channels 31744 \
        --batch 8 --micro 1 --steps 1 --tile-tokens 1024 | grep '^{') || return 1
    echo "$j"
    echo "$j" | grep -q '"fits":true' || return 1
    echo "$j" | grep -q '"params":49998291968' || return 1
    rss=$(echo "$j" | field rss_mib)
    [ -n "$rss" ] && [ "$rss" -lt 1024 ]
}
check phantom_50b phantom_50b

if [ -n "$PLUGIN" ]; then
    plugin() {
        "$SIM" --platform "$PLAT/dgx-a100.json" --sched "$PLUGIN" "${SMALL[@]}" |
            grep -q '"fits":true'
    }
    check plugin plugin
fi

# the disk is below the host: a step that fits host and GPUs never uses it
disk_changes_nothing() {
    local a b
    a=$(run_small | grep '^{') &&
        b=$("$SIM" --platform "$PLAT/dgx-a100.json" --sched dmda --no-disk "${SMALL[@]}" |
            grep '^{') || return 1
    echo "$a"
    echo "$b"
    echo "$a" | grep -q '"disk":true,"disk_bytes":0,' && echo "$b" | grep -q '"disk":false' &&
        [ "$(echo "$a" | field step_s)" = "$(echo "$b" | field step_s)" ] &&
        [ "$(echo "$a" | field tasks)" = "$(echo "$b" | field tasks)" ]
}
check disk_changes_nothing disk_changes_nothing

# 104 B parameters (1.7 TB of model state) on 300 GiB of host and 8 x 80 GiB
# of GPUs: the disk tier holds the rest; without it, out of memory. (A
# deferred host fetch whose data became zeros meanwhile crashed this run.)
BIG=(gpt2 --layers 4 --channels 46080 --heads 360 --batch 8 --micro 3 --steps 2)
beyond_host_and_gpus() {
    local j
    j=$("$SIM" --platform "$PLAT/dgx-a100.json" --host-mem 300 "${BIG[@]}" | grep '^{') ||
        return 1
    echo "$j"
    echo "$j" | grep -q '"fits":true' && echo "$j" | grep -q '"params":104287104000' &&
        echo "$j" | grep -Eq '"disk_bytes":[1-9]'
}
check beyond_host_and_gpus beyond_host_and_gpus
check beyond_host_and_gpus_without_the_disk exits 3 "$SIM" --platform "$PLAT/dgx-a100.json" \
    --host-mem 300 --no-disk "${BIG[@]}"

# a node too small for the model: 1 GiB of host, one GPU of 0.5 GiB
cat >"$TMP/tiny.json" <<'JSON'
{"name": "tiny", "models": "rates", "task_overhead_us": 2,
 "host": {"memory_gib": 1, "memory_bandwidth_gbs": 100, "cpu_workers": 0},
 "devices": {"cpu": {"fp32_tflops": 1, "memory_bandwidth_gbs": 10, "launch_us": 0,
                     "flops_efficiency": 0.5, "bytes_efficiency": 0.8},
             "cuda": {"fp32_tflops": 60, "tf32_tflops": 400, "memory_bandwidth_gbs": 3000,
                      "launch_us": 5, "flops_efficiency": 0.7, "bytes_efficiency": 0.8}},
 "accelerators": [{"kind": "cuda", "count": 1, "memory_gib": 0.5,
                   "link": {"bandwidth_gbs": 50, "latency_us": 10}}]}
JSON
out_of_memory() {
    "$SIM" --platform "$TMP/tiny.json" gpt2 --layers 2 --channels 2048 --batch 4 --micro 1 \
        --steps 1 >"$TMP/oom.out" 2>&1
    local got=$?
    cat "$TMP/oom.out"
    [ "$got" = 3 ] && grep -q 'OUT OF MEMORY' "$TMP/oom.out" &&
        grep -q '"fits":false,"oom":true' "$TMP/oom.out"
}
check out_of_memory out_of_memory

echo '{"name": "x", "models": "rates"' >"$TMP/broken.json"
check no_platform exits 2 "$SIM" "${SMALL[@]}"
check nothing_to_simulate exits 2 "$SIM" --platform "$PLAT/dgx-a100.json" cholesky
check missing_platform_file says "cannot start" "$SIM" --platform "$TMP/none.json" "${SMALL[@]}"
check broken_platform_file says "platform" "$SIM" --platform "$TMP/broken.json" "${SMALL[@]}"
check unknown_policy says "cannot start" "$SIM" --platform "$PLAT/dgx-a100.json" \
    --sched no-such-policy "${SMALL[@]}"
finish
