#!/usr/bin/env bash
# tests/tools/test_sim_inputs.sh TOOLS_DIR — tessera-sim on hostile or
# impossible input, in any build (simulated "sim" accelerators run the CPU
# implementations, so no CUDA is needed): a node smaller than one task's
# buffers is out of memory (exit 3, "oom":true); rates below their physical
# floor and latencies above 1 s are refused naming the field (they made the
# step time saturate at 2^63 ns and exit 0); a FIFO given as the platform
# file is refused at once instead of blocking open() for ever; a step whose
# model state is larger than host and accelerator memory together trains
# with the platform's disk tier (NVMe) and is out of memory without it
# (--no-disk); bad disk fields are refused naming the field; --placement
# chooses where large tiles live (auto engages owner placement once the
# state outgrows the accelerator).
# Prints a Criterion-style synthesis line for tests/run-suite.sh.
set -u
BIN=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
SUITE=sim_inputs
. "$(dirname "$0")/lib.sh"

SIM="$BIN/tessera-sim"
MODEL=(gpt2 --layers 2 --channels 2048 --batch 4 --micro 1 --steps 1)

# platform FP32 BW LINK_BW LATENCY ACC_GIB: one CPU device, no CPU worker,
# one simulated accelerator
platform() {
    cat <<JSON
{"name": "t", "models": "rates", "task_overhead_us": 2,
 "host": {"memory_gib": 64, "memory_bandwidth_gbs": 100, "cpu_workers": 0},
 "devices": {"cpu": {"fp32_tflops": $1, "memory_bandwidth_gbs": $2, "launch_us": 0,
                     "flops_efficiency": 0.5, "bytes_efficiency": 0.8}},
 "accelerators": [{"kind": "sim", "count": 1, "memory_gib": $5,
                   "link": {"bandwidth_gbs": $3, "latency_us": $4}}]}
JSON
}

# 10 MiB of accelerator; a GEMM of this model touches 20 MiB at once
platform 1 10 50 10 0.01 >"$TMP/small.json"
node_smaller_than_a_task() {
    "$SIM" --platform "$TMP/small.json" "${MODEL[@]}" >"$TMP/oom.out" 2>&1
    local got=$?
    cat "$TMP/oom.out"
    [ "$got" = 3 ] || { echo "exit status $got, expected 3"; return 1; }
    grep -q 'OUT OF MEMORY' "$TMP/oom.out" && grep -q '"fits":false,"oom":true' "$TMP/oom.out"
}
check node_smaller_than_a_task node_smaller_than_a_task

platform 1e-300 10 50 10 1 >"$TMP/flops.json"
platform 1 10 1e-300 10 1 >"$TMP/link.json"
platform 1 1e-300 50 10 1 >"$TMP/bw.json"
platform 1 10 50 1e300 1 >"$TMP/latency.json"
platform 1 10 50 10 1e-300 >"$TMP/mem.json"
check tiny_fp32_tflops says "devices.cpu.fp32_tflops: 1e-300 is out of range" \
    "$SIM" --platform "$TMP/flops.json" "${MODEL[@]}"
check tiny_link_bandwidth says "accelerators\[0\].link.bandwidth_gbs: 1e-300 is out of range" \
    "$SIM" --platform "$TMP/link.json" "${MODEL[@]}"
check tiny_memory_bandwidth says "devices.cpu.memory_bandwidth_gbs: 1e-300 is out of range" \
    "$SIM" --platform "$TMP/bw.json" "${MODEL[@]}"
check huge_latency says "accelerators\[0\].link.latency_us: 1e+300 is out of range" \
    "$SIM" --platform "$TMP/latency.json" "${MODEL[@]}"
check tiny_memory says "accelerators\[0\].memory_gib: 1e-300 is out of range" \
    "$SIM" --platform "$TMP/mem.json" "${MODEL[@]}"

mkfifo "$TMP/fifo"
# timeout: before the fix, open() blocked for ever (124 here)
check fifo_as_platform says "not a regular file (a FIFO)" \
    timeout 20 "$SIM" --platform "$TMP/fifo" "${MODEL[@]}"
# platform_disk READ_GBS CAPACITY_GB: 64 MiB of accelerator, a disk of 2
# drives below the 64 GiB host (which --host-mem caps)
platform_disk() {
    cat <<JSON
{"name": "t", "models": "rates", "task_overhead_us": 2,
 "host": {"memory_gib": 64, "memory_bandwidth_gbs": 100, "cpu_workers": 0},
 "devices": {"cpu": {"fp32_tflops": 1, "memory_bandwidth_gbs": 10, "launch_us": 0,
                     "flops_efficiency": 0.5, "bytes_efficiency": 0.8}},
 "accelerators": [{"kind": "sim", "count": 1, "memory_gib": 0.0625,
                   "link": {"bandwidth_gbs": 10, "latency_us": 10}}],
 "disk": {"count": 2, "capacity_gb": $2, "read_bandwidth_gbs": $1,
          "write_bandwidth_gbs": 1, "latency_us": 100}}
JSON
}
platform_disk 2 1 >"$TMP/disk.json"
# 10.6 M parameters: 170 MB of model state (16 bytes each), more than the
# 64 MiB host (--host-mem) and the 64 MiB accelerator hold together
DMODEL=(gpt2 --layers 2 --channels 512 --vocab 8192 --context 256 --batch 2 --micro 1 --steps 1)
beyond_host_with_the_disk() {
    "$SIM" --platform "$TMP/disk.json" --host-mem 0.0625 "${DMODEL[@]}" >"$TMP/disk.out" 2>&1
    local got=$?
    cat "$TMP/disk.out"
    [ "$got" = 0 ] || { echo "exit status $got, expected 0"; return 1; }
    local params
    params=$(sed -n 's/.*"params":\([0-9]*\).*/\1/p' "$TMP/disk.out")
    [ $((16 * params)) -gt $((128 << 20)) ] || { echo "the state fits host + accelerator"; return 1; }
    grep -q '"fits":true' "$TMP/disk.out" && grep -q '"disk":true' "$TMP/disk.out" &&
        grep -Eq '"disk_bytes":[1-9]' "$TMP/disk.out" && grep -Eq '^disk +' "$TMP/disk.out" &&
        grep -q '^host <-> disk' "$TMP/disk.out"
}
check beyond_host_with_the_disk beyond_host_with_the_disk
beyond_host_without_the_disk() {
    "$SIM" --platform "$TMP/disk.json" --host-mem 0.0625 --no-disk "${DMODEL[@]}" \
        >"$TMP/nodisk.out" 2>&1
    local got=$?
    cat "$TMP/nodisk.out"
    [ "$got" = 3 ] || { echo "exit status $got, expected 3"; return 1; }
    grep -q 'OUT OF MEMORY' "$TMP/nodisk.out" && grep -q '"fits":false,"oom":true' "$TMP/nodisk.out"
}
check beyond_host_without_the_disk beyond_host_without_the_disk
platform_disk 1e-300 1 >"$TMP/diskbw.json"
platform_disk 2 0 >"$TMP/diskcap.json"
check tiny_disk_bandwidth says "disk.read_bandwidth_gbs: 1e-300 is out of range" \
    "$SIM" --platform "$TMP/diskbw.json" "${DMODEL[@]}"
check empty_disk says "disk.capacity_gb: 0 is out of range" \
    "$SIM" --platform "$TMP/diskcap.json" "${DMODEL[@]}"
check host_mem_flag_range exits 2 "$SIM" --platform "$TMP/disk.json" --host-mem 0 "${DMODEL[@]}"

# --placement: the model's state (about 3 GB) outgrows 3/4 of the 1 GiB
# accelerator, so auto places its (2048, 2048) tiles (16 MiB, above a
# home_min of 1 MiB) as owner; replicate keeps them unhomed; a word the
# runtime does not know is a usage error
platform 1 10 50 10 1 >"$TMP/one.json"
placed() { # WANT, then the flags
    local want=$1
    shift
    TESSERA_HOME_MIN=1 "$SIM" --platform "$TMP/one.json" "$@" "${MODEL[@]}" >"$TMP/place.out" \
        2>&1 || { cat "$TMP/place.out"; return 1; }
    grep -q "\"placement\":\"$want\"" "$TMP/place.out" || { cat "$TMP/place.out"; return 1; }
}
check placement_auto_engages_owner placed owner
check placement_replicate placed replicate --placement replicate
check placement_unknown exits 2 "$SIM" --platform "$TMP/one.json" --placement everywhere \
    "${MODEL[@]}"
finish
