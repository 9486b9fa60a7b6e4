#!/usr/bin/env bash
# tests/tools/test_sim_replay.sh TOOLS_DIR CORPUS_DIR — tessera-sim's lab
# commands end to end: every shipped STG graph replayed on its proven
# optimum's processor count never beats that optimum (the index's proofs
# and the replay check each other), and on enough processors reaches its
# longest path, computed here by a separate awk over the file; a graph
# converted to StarPU's tasks.rec replays to the same makespan; a malformed
# file, a missing one and bad flags are refused with the line or the flag.
# Prints a Criterion-style synthesis line for tests/run-suite.sh.
set -u
BIN=$1
CORPUS=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
SUITE=sim_replay
. "$(dirname "$0")/lib.sh"
SIM="$BIN/tessera-sim"

identical() { # P: P identical CPU workers, no overheads, instant memory
    cat <<JSON
{"name": "identical-$1", "models": "rates", "task_overhead_us": 0,
 "host": {"memory_gib": 64, "memory_bandwidth_gbs": 1000000, "memory_latency_us": 0,
          "cpu_workers": $1},
 "devices": {"cpu": {"fp32_tflops": 0.001, "memory_bandwidth_gbs": 1000000, "launch_us": 0,
                     "flops_efficiency": 1, "bytes_efficiency": 1}}}
JSON
}
for p in 2 4 8 64; do identical $p >"$TMP/id$p.json"; done
field() { sed -n "s/.*\"$1\":\([-0-9.e+]*\).*/\1/p"; }

# The longest path of an STG file in its units (ms): times and preds by awk.
stg_path() {
    awk '/^#/ {next} NF == 0 {next}
         !seen {seen = 1; next}
         { id = $1; t = $2; n = $3; s = 0
           for (k = 0; k < n; k++) { p = $(4 + k); if (f[p] > s) s = f[p] }
           f[id] = s + t; if (f[id] > best) best = f[id] }
         END { print best }' "$1"
}

never_below_the_proven_optimum() {
    local bad=0 n=0
    while read -r file procs best; do
        for pol in eager heft dmda ws; do
            local ms
            ms=$("$SIM" replay "$CORPUS/$file" --platform "$TMP/id$procs.json" --sched $pol |
                 tail -1 | field makespan_s)
            n=$((n + 1))
            # makespan in s, optimum in ms
            awk -v m="$ms" -v b="$best" 'BEGIN { exit !(m * 1000 >= b - 1e-6) }' ||
                { echo "$file P=$procs $pol: $ms s < optimum $best ms"; bad=1; }
        done
    done < <(/usr/bin/env python3 -c '
import json, sys
for g in json.load(open(sys.argv[1]))["graphs"]:
    for p, b in g["bounds"].items():
        if b["proven"]:
            print(g["file"], p, b["best"])' "$CORPUS/index.json")
    echo "$n replays"
    [ "$n" -gt 0 ] && [ "$bad" = 0 ]
}
check never_below_the_proven_optimum never_below_the_proven_optimum

reaches_the_longest_path_with_enough_workers() {
    for f in "$CORPUS"/*.stg; do
        local want ms
        want=$(stg_path "$f")
        ms=$("$SIM" replay "$f" --platform "$TMP/id64.json" --sched eager | tail -1 |
             field makespan_s)
        awk -v m="$ms" -v w="$want" 'BEGIN { exit !(m * 1000 > w - 1e-6 && m * 1000 < w + 1e-6) }' ||
            { echo "$f: $ms s, longest path $want ms"; return 1; }
    done
}
check reaches_the_longest_path_with_enough_workers reaches_the_longest_path_with_enough_workers

rec_round_trip_replays_the_same() {
    local f="$CORPUS/layrpred-n100-s5.stg" a b
    "$SIM" convert "$f" --to tessera --out "$TMP/g.graph" || return 1
    "$SIM" convert "$TMP/g.graph" --to rec --out "$TMP/g.rec" || return 1
    grep -q '^JobId: ' "$TMP/g.rec" && grep -q '^DependsOn: ' "$TMP/g.rec" || return 1
    a=$("$SIM" replay "$f" --platform "$TMP/id4.json" --sched heft | tail -1 | field makespan_s)
    b=$("$SIM" replay "$TMP/g.rec" --platform "$TMP/id4.json" --sched heft | tail -1 |
        field makespan_s)
    echo "stg $a, rec $b"
    [ -n "$a" ] && [ "$a" = "$b" ]
}
check rec_round_trip_replays_the_same rec_round_trip_replays_the_same

printf '3\n0 0 0\n1 5 1 0\n2 x 1 1\n' >"$TMP/bad.stg"
check malformed_file_names_its_line says "bad.stg:4" \
    "$SIM" replay "$TMP/bad.stg" --platform "$TMP/id2.json"
check missing_file says "nothing-here.stg" \
    "$SIM" replay "$TMP/nothing-here.stg" --platform "$TMP/id2.json"
check platform_and_real_at_once exits 2 \
    "$SIM" replay "$CORPUS/sameprob-n50-s1.stg" --platform "$TMP/id2.json" --real
check unknown_durations exits 2 \
    "$SIM" replay "$CORPUS/sameprob-n50-s1.stg" --platform "$TMP/id2.json" --durations maybe
check convert_to_unknown_format exits 2 \
    "$SIM" convert "$CORPUS/sameprob-n50-s1.stg" --to dax

real_run_takes_at_least_the_longest_path() {
    local f="$CORPUS/sameprob-n50-s1.stg" ms want
    want=$(stg_path "$f")
    ms=$("$SIM" replay "$f" --real --threads 2 --scale 0.1 | tail -1 | field makespan_s)
    echo "real $ms s, longest path $want ms x 0.1"
    awk -v m="$ms" -v w="$want" 'BEGIN { exit !(m * 1000 >= w * 0.1 - 1e-6) }'
}
check real_run_takes_at_least_the_longest_path real_run_takes_at_least_the_longest_path
finish
