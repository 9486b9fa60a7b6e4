#!/usr/bin/env bash
# bench/gpt2/run.sh BUILD_DIR — Tessera's GPT-2 training step against the
# same step in PyTorch, side by side, on a few model shapes.
#
# For each configuration: RUNS alternating runs of each program
# (BUILD_DIR/bench/gpt2/bench-gpt2-step and bench/gpt2/torch_step.py, the
# one that goes first swapping every run), each a few untimed steps then
# several timed ones, threads = nproc; the median s/step of the runs is the
# figure. Prints every run's line, a table, then one JSON line per figure:
#   {"bench":"gpt2","case":C,"workers":N,"metric":"tok_per_s"|"s_per_step",
#    "value":TESSERA,"unit":U,"peer":"torch","peer_value":TORCH,"ratio":R}
# ratio > 1: Tessera is faster (tok/s: value/peer; s/step: peer/value).
#
# The PyTorch peer needs /usr/bin/python3 with torch (Debian's python3-torch):
# installed with apt-get when run as root, otherwise only Tessera runs and the
# peer figures are null. Exit status 1 if a Tessera run failed.
#
# Environment: GPT2_BENCH_RUNS (3), GPT2_BENCH_THREADS (nproc),
# GPT2_BENCH_CONFIGS (names among 124M 30M tiny; default all three),
# GPT2_BENCH_PRECISION (fp32 or bf16: both programs' --precision; fp32).
# About 5 minutes on a 2-core machine.
set -u

if [ $# -ne 1 ] || [ ! -d "$1" ]; then
    echo "usage: $0 BUILD_DIR" >&2
    exit 2
fi
BUILD=$1
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$BUILD/bench/gpt2/bench-gpt2-step
PY=/usr/bin/python3
PEER=$HERE/torch_step.py
RUNS=${GPT2_BENCH_RUNS:-3}
THREADS=${GPT2_BENCH_THREADS:-$(nproc)}
WANT=${GPT2_BENCH_CONFIGS:-"124M 30M tiny"}
PRECISION=${GPT2_BENCH_PRECISION:-fp32}
TIMEOUT=400

# name layers heads channels vocab ctx batch seq warmup steps
CONFIGS="
124M 12 12 768 50257 1024 4 64 1 3
30M 6 8 512 16384 1024 4 128 1 4
tiny 4 4 256 257 1024 4 128 2 10
"

# progress goes to fd 3 (stdout), out of the command substitutions
exec 3>&1
status=0
have_tessera=1
if [ ! -x "$BIN" ]; then
    echo "tessera: $BIN not found (build it: ninja -C $BUILD); only the peer runs" >&2
    have_tessera=0
    status=1
fi
have_torch=1
if ! "$PY" -c 'import torch' >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing python3-torch for the PyTorch peer" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-torch python3-numpy >&2 ||
            { apt-get update -q >&2 &&
              DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-torch python3-numpy >&2; }
    fi
    if ! "$PY" -c 'import torch' >/dev/null 2>&1; then
        echo "torch: $PY cannot import torch; the PyTorch peer is missing, only Tessera runs" >&2
        have_torch=0
    fi
fi

# field NAME JSONLINE: a number of the line, or "null"
field() {
    local v
    v=$(printf '%s\n' "$2" | sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p")
    printf '%s\n' "${v:-null}"
}

# median of the numbers on stdin ("null" when none)
median() {
    grep -E '^[-+0-9.eE]+$' | sort -g | awk '{ v[NR] = $1 }
        END { if (NR == 0) print "null";
              else if (NR % 2) print v[(NR + 1) / 2];
              else printf "%.6g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# run_one IMPL ARGS...: prints the run's JSON line (nothing on failure).
# A run during which other processes took more than NOISY of the machine's
# CPU time is run once more; the second one counts whatever its noise.
NOISY=0.10
run_one() {
    local impl=$1 out rc line others try
    shift
    for try in 1 2; do
        if [ "$impl" = tessera ]; then
            out=$(timeout "$TIMEOUT" "$BIN" "$@" 2>&1)
        else
            out=$(timeout "$TIMEOUT" "$PY" "$PEER" "$@" 2>&1)
        fi
        rc=$?
        printf '%s\n' "$out" | grep -v '^{' | sed 's/^/  /' >&3
        if [ $rc -ne 0 ]; then
            echo "  $impl failed (exit $rc)" >&3
            return 1
        fi
        line=$(printf '%s\n' "$out" | grep '^{"bench":"gpt2-step"' | tail -n 1)
        others=$(field cpu_others "$line")
        if [ $try -eq 1 ] && [ "$others" != null ] &&
           awk -v o="$others" -v n="$NOISY" 'BEGIN { exit !(o > n) }'; then
            echo "  (other processes took ${others} of the CPUs: once more)" >&3
            continue
        fi
        break
    done
    printf '%s\n' "$line"
}

echo "GPT-2 training step: tessera vs torch, $THREADS threads, $PRECISION, median of $RUNS runs" \
     "($(date -u +%Y-%m-%dT%H:%M:%SZ), load $(cut -d' ' -f1 /proc/loadavg))"
rows=()
while read -r name L H C V P B T W S; do
    [ -n "$name" ] || continue
    case " $WANT " in *" $name "*) ;; *) continue ;; esac
    args=(--layers "$L" --heads "$H" --channels "$C" --vocab "$V" --ctx "$P"
          --batch "$B" --seq "$T" --warmup "$W" --steps "$S" --threads "$THREADS"
          --precision "$PRECISION" --json-tag "$name")
    echo "$name: ${L} layers, ${H} heads, ${C} channels, vocab $V, ctx $P, batch $B x $T," \
         "$W+$S steps"
    ts=() ps=() params=null
    for ((r = 0; r < RUNS; r++)); do
        order="tessera torch"
        [ $((r % 2)) -eq 1 ] && order="torch tessera"
        for impl in $order; do
            if [ "$impl" = tessera ]; then
                [ $have_tessera -eq 1 ] || continue
                line=$(run_one tessera "${args[@]}") || status=1
                [ -n "$line" ] || { status=1; continue; }
                ts+=("$(field s_per_step "$line")")
            else
                [ $have_torch -eq 1 ] || continue
                line=$(run_one torch "${args[@]}") || continue
                [ -n "$line" ] || continue
                ps+=("$(field s_per_step "$line")")
            fi
            [ "$params" != null ] || params=$(field params "$line")
        done
    done
    tmed=$(printf '%s\n' "${ts[@]+"${ts[@]}"}" | median)
    pmed=$(printf '%s\n' "${ps[@]+"${ps[@]}"}" | median)
    rows+=("$name $params $((B * T)) $tmed $pmed")
done <<< "$CONFIGS"

# the table, then the JSON lines
printf '%s\n' "${rows[@]+"${rows[@]}"}" | awk -v w="$THREADS" '
function num(x) { return x == "null" ? "null" : sprintf("%.4g", x) }
function cell(x, f) { return x == "null" ? "-" : sprintf(f, x) }
{
    name[NR] = $1; par[NR] = $2; tok = $3; ts[NR] = $4; ps[NR] = $5
    tt[NR] = ts[NR] == "null" || ts[NR] <= 0 ? "null" : tok / ts[NR]
    pt[NR] = ps[NR] == "null" || ps[NR] <= 0 ? "null" : tok / ps[NR]
    ra[NR] = tt[NR] == "null" || pt[NR] == "null" ? "null" : tt[NR] / pt[NR]
}
END {
    printf "\n%-6s %12s %14s %12s %14s %12s %15s\n", "config", "params",
           "tessera s/step", "torch s/step", "tessera tok/s", "torch tok/s",
           "tessera/torch"
    for (i = 1; i <= NR; i++)
        printf "%-6s %12s %14s %12s %14s %12s %15s\n", name[i],
               par[i] == "null" ? "-" : sprintf("%.1fM", par[i] / 1e6),
               cell(ts[i], "%.4f"), cell(ps[i], "%.4f"), cell(tt[i], "%.1f"),
               cell(pt[i], "%.1f"), cell(ra[i], "%.3f")
    printf "(ratio = tessera tok/s / torch tok/s; > 1: Tessera is faster)\n\n"
    for (i = 1; i <= NR; i++) {
        printf "{\"bench\":\"gpt2\",\"case\":\"%s\",\"workers\":%d,\"metric\":\"tok_per_s\"," \
               "\"value\":%s,\"unit\":\"tok/s\",\"peer\":\"torch\",\"peer_value\":%s," \
               "\"ratio\":%s}\n", name[i], w, num(tt[i]), num(pt[i]), num(ra[i])
        printf "{\"bench\":\"gpt2\",\"case\":\"%s\",\"workers\":%d,\"metric\":\"s_per_step\"," \
               "\"value\":%s,\"unit\":\"s\",\"peer\":\"torch\",\"peer_value\":%s," \
               "\"ratio\":%s}\n", name[i], w, num(ts[i]), num(ps[i]),
               ts[i] == "null" || ps[i] == "null" ? "null" : num(ps[i] / ts[i])
    }
}'
exit $status
