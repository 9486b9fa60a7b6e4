#!/usr/bin/env bash
# bench/gpt2/run.sh BUILD_DIR — Tessera's GPT-2 training step against the
# same step in PyTorch, side by side, on a few model shapes, in fp32 and in
# bf16 mixed precision, measured against the machine's GEMM ceilings.
#
# First the ceilings on the same threads (BUILD_DIR/bench/gpt2/
# bench-gemm-ceiling): one OpenBLAS SGEMM 4096^3, and Tessera's fp32 and bf16
# tile kernels, one slice per thread. The fp32 ceiling is the higher of the
# two fp32 figures.
#
# Then for each configuration and precision: RUNS alternating runs of each
# program (BUILD_DIR/bench/gpt2/bench-gpt2-step and bench/gpt2/torch_step.py,
# the one that goes first swapping every run; bf16 is PyTorch's CPU autocast
# to bfloat16), each a few untimed steps then several timed ones, threads =
# nproc; the median s/step of the runs is the figure. Prints every run's
# line, a table, then JSON lines:
#   {"bench":"gpt2","case":C,"precision":P,"workers":N,
#    "metric":"tok_per_s"|"s_per_step","value":TESSERA,"unit":U,
#    "peer":"torch","peer_value":TORCH,"ratio":R}
#   {..."metric":"model_gflops","value":G,"peer":"fp32_gemm_ceiling"|
#    "bf16_gemm_ceiling","peer_value":CEIL,"ratio":G/CEIL}
#   {..."precision":"bf16","metric":"s_per_step","peer":"tessera_fp32",...}
# ratio > 1: Tessera is faster (tok/s: value/peer; s/step: peer/value).
# Model GFLOP/s = 6 * params * tokens per step / s per step.
#
# The PyTorch peer needs /usr/bin/python3 with torch (Debian's python3-torch):
# installed with apt-get when run as root, otherwise only Tessera runs and the
# peer figures are null. Exit status 1 if a Tessera run failed.
#
# Environment: GPT2_BENCH_RUNS (3), GPT2_BENCH_THREADS (nproc),
# GPT2_BENCH_CONFIGS (names among 124M 124M-256 30M tiny; default all),
# GPT2_BENCH_PRECISIONS (default "fp32 bf16"), GPT2_BENCH_GENERATE (1; 0
# skips the generation part: BUILD_DIR/bench/gpt2/tessera-bench-generate, the
# 124M model decoding 256 tokens after a 64-token prompt at batch 1 and 8,
# against PyTorch with a KV cache; its own table and JSON lines).
# About 25 minutes on a 2-core machine.
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
CEIL=$BUILD/bench/gpt2/bench-gemm-ceiling
GEN=$BUILD/bench/gpt2/tessera-bench-generate
RUNS=${GPT2_BENCH_RUNS:-3}
THREADS=${GPT2_BENCH_THREADS:-$(nproc)}
WANT=${GPT2_BENCH_CONFIGS:-"124M 124M-256 30M tiny"}
PRECISIONS=${GPT2_BENCH_PRECISIONS:-"fp32 bf16"}
TIMEOUT=400

# name layers heads channels vocab ctx batch seq warmup steps
CONFIGS="
124M 12 12 768 50257 1024 4 64 1 3
124M-256 12 12 768 50257 1024 4 256 1 2
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

echo "GPT-2 training step: tessera vs torch, $THREADS threads, median of $RUNS runs" \
     "($(date -u +%Y-%m-%dT%H:%M:%SZ), load $(cut -d' ' -f1 /proc/loadavg))"

# The ceilings, measured in this run on the same threads: OpenBLAS SGEMM
# n^3 (its own threads), and Tessera's fp32 and bf16 tile kernels on one
# slice per thread (bench/gpt2/gemm_ceiling.c). A step's fraction is of
# the highest fp32 ceiling (and, for bf16, of the bf16 one too).
ceil_fp32=null ceil_bf16=null ceil_blas=null
if [ -x "$CEIL" ]; then
    cout=$("$CEIL" --threads "$THREADS" 2>&1) || cout=
    printf '%s\n' "$cout" | grep -v '^{' | sed 's/^/  /'
    pick() { printf '%s\n' "$cout" | grep "\"case\":\"$1\"" | sed -n 's/.*"value":\([^,}]*\).*/\1/p'; }
    ceil_blas=$(pick openblas_fp32); ceil_fp32=$(pick tile_fp32); ceil_bf16=$(pick tile_bf16)
    ceil_fp32=$(awk -v a="${ceil_blas:-0}" -v b="${ceil_fp32:-0}" 'BEGIN { m = a > b ? a : b;
        if (m > 0) print m; else print "null" }')
    [ -n "$ceil_bf16" ] || ceil_bf16=null
    [ -n "$ceil_blas" ] || ceil_blas=null
else
    echo "  $CEIL not found: no ceiling, no fractions" >&2
fi

rows=()
while read -r name L H C V P B T W S; do
    [ -n "$name" ] || continue
    case " $WANT " in *" $name "*) ;; *) continue ;; esac
    for prec in $PRECISIONS; do
        args=(--layers "$L" --heads "$H" --channels "$C" --vocab "$V" --ctx "$P"
              --batch "$B" --seq "$T" --warmup "$W" --steps "$S" --threads "$THREADS"
              --json-tag "$name" --precision "$prec")
        echo "$name $prec: ${L} layers, ${H} heads, ${C} channels, vocab $V, ctx $P," \
             "batch $B x $T, $W+$S steps"
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
        rows+=("$name $prec $params $((B * T)) $tmed $pmed")
    done
done <<< "$CONFIGS"

# the table, then the JSON lines. Model FLOPs per step: 6 * params * tokens
# (forward 2, backward 4 per parameter and token; attention's own products
# are not counted), the usual definition of a training step's work.
printf '%s\n' "${rows[@]+"${rows[@]}"}" | awk -v w="$THREADS" -v cf="$ceil_fp32" \
    -v cb="$ceil_bf16" -v cblas="$ceil_blas" '
function num(x) { return x == "null" ? "null" : sprintf("%.4g", x) }
function cell(x, f) { return x == "null" ? "-" : sprintf(f, x) }
function div(a, b) { return a == "null" || b == "null" || b <= 0 ? "null" : a / b }
{
    name[NR] = $1; prec[NR] = $2; par[NR] = $3; tok = $4; ts[NR] = $5; ps[NR] = $6
    tt[NR] = div(tok, ts[NR]); pt[NR] = div(tok, ps[NR]); ra[NR] = div(tt[NR], pt[NR])
    gf[NR] = par[NR] == "null" ? "null" : div(6 * par[NR] * tok / 1e9, ts[NR])
    pgf[NR] = par[NR] == "null" ? "null" : div(6 * par[NR] * tok / 1e9, ps[NR])
    fr[NR] = div(gf[NR], cf)
    frb[NR] = prec[NR] == "bf16" ? div(gf[NR], cb) : "null"
    key[$1 "/" $2] = NR
}
END {
    printf "\nceilings (GFLOP/s, %d threads): fp32 %s (OpenBLAS SGEMM %s), bf16 %s\n", w,
           cell(cf, "%.1f"), cell(cblas, "%.1f"), cell(cb, "%.1f")
    printf "%-9s %-5s %9s %9s %9s %9s %9s %8s %9s %8s %8s %9s\n", "config", "prec", "params",
           "tessera", "torch", "tes tok/s", "tch tok/s", "tes/tch", "tes GF/s", "of fp32",
           "of bf16", "bf16/fp32"
    for (i = 1; i <= NR; i++) {
        j = key[name[i] "/fp32"]
        sp[i] = prec[i] == "bf16" && j ? div(ts[j], ts[i]) : "null"
        printf "%-9s %-5s %9s %9s %9s %9s %9s %8s %9s %8s %8s %9s\n", name[i], prec[i],
               par[i] == "null" ? "-" : sprintf("%.1fM", par[i] / 1e6),
               cell(ts[i], "%.4f"), cell(ps[i], "%.4f"), cell(tt[i], "%.1f"),
               cell(pt[i], "%.1f"), cell(ra[i], "%.3f"), cell(gf[i], "%.1f"),
               cell(fr[i] == "null" ? "null" : 100 * fr[i], "%.1f%%"),
               cell(frb[i] == "null" ? "null" : 100 * frb[i], "%.1f%%"), cell(sp[i], "%.3f")
    }
    printf "(s/step; tes/tch = tessera tok/s / torch tok/s, > 1: Tessera is faster;\n" \
           " GF/s = 6 * params * tokens / s; of fp32 / of bf16: of the ceiling above;\n" \
           " bf16/fp32 = Tessera fp32 s/step / its bf16 s/step)\n\n"
    for (i = 1; i <= NR; i++) {
        c = name[i] "/" prec[i]
        printf "{\"bench\":\"gpt2\",\"case\":\"%s\",\"precision\":\"%s\",\"workers\":%d," \
               "\"metric\":\"tok_per_s\",\"value\":%s,\"unit\":\"tok/s\",\"peer\":\"torch\"," \
               "\"peer_value\":%s,\"ratio\":%s}\n", name[i], prec[i], w, num(tt[i]),
               num(pt[i]), num(ra[i])
        printf "{\"bench\":\"gpt2\",\"case\":\"%s\",\"precision\":\"%s\",\"workers\":%d," \
               "\"metric\":\"s_per_step\",\"value\":%s,\"unit\":\"s\",\"peer\":\"torch\"," \
               "\"peer_value\":%s,\"ratio\":%s}\n", name[i], prec[i], w, num(ts[i]),
               num(ps[i]), num(div(ps[i], ts[i]))
        printf "{\"bench\":\"gpt2\",\"case\":\"%s\",\"precision\":\"%s\",\"workers\":%d," \
               "\"metric\":\"model_gflops\",\"value\":%s,\"unit\":\"GFLOP/s\"," \
               "\"peer\":\"fp32_gemm_ceiling\",\"peer_value\":%s,\"ratio\":%s}\n", name[i],
               prec[i], w, num(gf[i]), num(cf), num(fr[i])
        if (prec[i] == "bf16") {
            printf "{\"bench\":\"gpt2\",\"case\":\"%s\",\"precision\":\"bf16\",\"workers\":%d," \
                   "\"metric\":\"model_gflops\",\"value\":%s,\"unit\":\"GFLOP/s\"," \
                   "\"peer\":\"bf16_gemm_ceiling\",\"peer_value\":%s,\"ratio\":%s}\n", name[i],
                   w, num(gf[i]), num(cb), num(frb[i])
            printf "{\"bench\":\"gpt2\",\"case\":\"%s\",\"precision\":\"bf16\",\"workers\":%d," \
                   "\"metric\":\"s_per_step\",\"value\":%s,\"unit\":\"s\"," \
                   "\"peer\":\"tessera_fp32\",\"peer_value\":%s,\"ratio\":%s}\n", name[i], w,
                   num(ts[i]), num(key[name[i] "/fp32"] ? ts[key[name[i] "/fp32"]] : "null"),
                   num(sp[i])
        }
    }
}'

# Generation with a KV cache: the 124M shape, prompt 64, 256 new tokens,
# batch 1 and 8, fp32 and bf16 weights, against PyTorch's KV-cache decoder
# and the machine's read bandwidth (bench/gpt2/gpt2_generate.c prints its
# own table and JSON lines). GPT2_BENCH_GENERATE=0 skips it.
if [ "${GPT2_BENCH_GENERATE:-1}" != 0 ] && [ $have_tessera -eq 1 ]; then
    echo
    echo "GPT-2 generation: tessera vs torch, $THREADS threads"
    peer=()
    [ $have_torch -eq 1 ] || peer=(--no-peer)
    timeout 1800 "$GEN" --threads "$THREADS" "${peer[@]+"${peer[@]}"}" || status=1
fi
exit $status
