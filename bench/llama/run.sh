#!/usr/bin/env bash
# bench/llama/run.sh [--quick] BUILD_DIR — Tessera's Llama training step
# against the same step in PyTorch, side by side, on two model shapes, in
# fp32 and in bf16 mixed precision, measured against the machine's GEMM
# ceilings; then greedy generation with a KV cache at batch 1 and 8.
# bench/gpt2/run.sh's method for the Llama family (docs/benchmarks.md,
# "Llama").
#
# First the peer's check: bench/llama/torch_llama.py --check, that the
# PyTorch model computes tools/llama_reference.py's model (loss to 1e-5,
# logits, gradients, the KV-cache decoder, on the committed tiny fixtures).
# A peer that fails it is not run: its figures are null, exit status 1.
#
# Then the ceilings on the same threads (BUILD_DIR/bench/gpt2/
# bench-gemm-ceiling): one OpenBLAS SGEMM 4096^3, and Tessera's fp32 and
# bf16 tile kernels, one slice per thread. The fp32 ceiling is the higher
# of the two fp32 figures.
#
# Then for each shape and precision: RUNS alternating runs of each program
# (BUILD_DIR/bench/llama/bench-llama-step and bench/llama/torch_llama.py,
# the one that goes first swapping every run; bf16 is PyTorch's CPU
# autocast to bfloat16 with fp32 master weights), each a few untimed steps
# then several timed ones, threads = nproc; the median s/step of the runs
# is the figure. The shapes:
#   125M  hidden 768, 12 layers, 12 heads, 4 K/V heads (head_dim 64),
#         intermediate 2048, vocabulary 32000 (Llama 2's), untied head, RoPE
#         theta 10000 without scaling: GPT-2 124M's width and depth with
#         Llama's blocks (124.7M parameters; no published checkpoint has
#         exactly this shape). Batch 4 x 64, 1 + 3 steps, 3 runs.
#   1B    Llama-3.2-1B's config.json: hidden 2048, 16 layers, 32 heads, 8
#         K/V heads, intermediate 8192, vocabulary 128256, tied embeddings,
#         rope_theta 500000 with llama3 scaling (factor 32, low 1, high 4,
#         original 8192), max positions 131072 (1.24B parameters). Batch
#         1 x 64, 1 + 2 steps, 1 run (its AdamW state alone is 20 GB of the
#         machine's 24).
# Prints every run's line, a table, then JSON lines:
#   {"bench":"llama","case":C,"precision":P,"workers":N,
#    "metric":"tok_per_s"|"s_per_step","value":TESSERA,"unit":U,
#    "peer":"torch","peer_value":TORCH,"ratio":R,"cpu":MODEL}
#   {..."metric":"model_gflops","value":G,"peer":"fp32_gemm_ceiling"|
#    "bf16_gemm_ceiling","peer_value":CEIL,"ratio":G/CEIL,...}
#   {..."precision":"bf16","metric":"s_per_step","peer":"tessera_fp32",...}
# ratio > 1: Tessera is faster (tok/s: value/peer; s/step: peer/value).
# Model GFLOP/s = 6 * params * tokens per step / s per step.
#
# Then generation (BUILD_DIR/bench/llama/bench-llama-generate, its own
# table and JSON lines {"bench":"llama-generate",...}): each shape, a
# 64-token prompt, then 256 (125M) or 32 (1B) greedy tokens, batch 1 and 8,
# in fp32 (Llama's decoding reads the fp32 weights whatever the model's
# precision), against torch_llama.py --generate in float32.
#
# --quick (under 3 minutes on 2 cores): the check, the ceilings at 2048^3,
# the 125M shape only, one run of 1 + 2 steps per precision (not repeated
# when noisy), generation of 16 tokens.
#
# The PyTorch peer needs /usr/bin/python3 with torch (Debian's python3-torch):
# installed with apt-get when run as root, otherwise only Tessera runs and the
# peer figures are null. Exit status 1 if a Tessera run or the check failed.
#
# Environment: LLAMA_BENCH_RUNS (per shape: 3 for 125M, 1 for 1B),
# LLAMA_BENCH_THREADS (nproc), LLAMA_BENCH_CONFIGS (names among 125M 1B;
# default both), LLAMA_BENCH_PRECISIONS (default "fp32 bf16"),
# LLAMA_BENCH_GENERATE (1; 0 skips generation).
# About 25 minutes on a 2-core machine (most of it the 1B rows).
set -u

quick=0
if [ "${1:-}" = --quick ]; then
    quick=1
    shift
fi
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
    echo "usage: $0 [--quick] BUILD_DIR" >&2
    exit 2
fi
BUILD=$1
HERE=$(cd "$(dirname "$0")" && pwd)
export TESSERA_SOURCE_ROOT=${TESSERA_SOURCE_ROOT:-$(cd "$HERE/../.." && pwd)}
BIN=$BUILD/bench/llama/bench-llama-step
PY=/usr/bin/python3
PEER=$HERE/torch_llama.py
CEIL=$BUILD/bench/gpt2/bench-gemm-ceiling
GEN=$BUILD/bench/llama/bench-llama-generate
THREADS=${LLAMA_BENCH_THREADS:-$(nproc)}
WANT=${LLAMA_BENCH_CONFIGS:-"125M 1B"}
PRECISIONS=${LLAMA_BENCH_PRECISIONS:-"fp32 bf16"}
TIMEOUT=900
CEIL_ARGS=()
NOISY=0.10
CPU=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)
CPU=${CPU:-unknown}
CPU=${CPU//\"/}

# name layers heads kv_heads hidden intermediate vocab ctx tie theta
#      llama3_scaling batch seq warmup steps runs new_tokens
CONFIGS="
125M 12 12 4 768 2048 32000 2048 0 10000 none 4 64 1 3 3 256
1B 16 32 8 2048 8192 128256 131072 1 500000 32,1,4,8192 1 64 1 2 1 32
"
if [ $quick -eq 1 ]; then
    WANT=${LLAMA_BENCH_CONFIGS:-125M}
    CEIL_ARGS=(--n 2048)
    NOISY=2 # no second runs: the time limit first
    CONFIGS="
125M 12 12 4 768 2048 32000 2048 0 10000 none 4 64 1 2 1 16
1B 16 32 8 2048 8192 128256 131072 1 500000 32,1,4,8192 1 32 1 1 1 8
"
fi

# progress goes to fd 3 (stdout), out of the command substitutions
exec 3>&1
status=0
have_tessera=1
if [ ! -x "$BIN" ]; then
    echo "tessera: $BIN not found (build it: ninja -C $BUILD; it links once nn/llama.c" \
         "defines tsr_llama_*); only the peer runs" >&2
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

echo "Llama training step: tessera vs torch, $THREADS threads, CPU $CPU" \
     "($(date -u +%Y-%m-%dT%H:%M:%SZ), load $(cut -d' ' -f1 /proc/loadavg))"

# The peer computes the reference's model, or it is not a peer.
if [ $have_torch -eq 1 ]; then
    echo "the peer's check (torch_llama.py --check against tools/llama_reference.py):"
    "$PY" "$PEER" --check --threads "$THREADS" 2>&1 | sed 's/^/  /'
    if [ "${PIPESTATUS[0]}" -ne 0 ]; then
        echo "  the PyTorch peer does not compute the reference's model: not run" >&2
        have_torch=0
        status=1
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
        line=$(printf '%s\n' "$out" | grep '^{"bench":"llama-step"' | tail -n 1)
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

# The ceilings, measured in this run on the same threads: OpenBLAS SGEMM
# n^3 (its own threads), and Tessera's fp32 and bf16 tile kernels on one
# slice per thread (bench/gpt2/gemm_ceiling.c). A step's fraction is of
# the highest fp32 ceiling (and, for bf16, of the bf16 one too).
ceil_fp32=null ceil_bf16=null ceil_blas=null
if [ -x "$CEIL" ]; then
    cout=$("$CEIL" --threads "$THREADS" "${CEIL_ARGS[@]+"${CEIL_ARGS[@]}"}" 2>&1) || cout=
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
while read -r name L H KV C I V P TIE TH SC B T W S R NEW; do
    [ -n "$name" ] || continue
    case " $WANT " in *" $name "*) ;; *) continue ;; esac
    RUNS=${LLAMA_BENCH_RUNS:-$R}
    for prec in $PRECISIONS; do
        args=(--layers "$L" --heads "$H" --kv-heads "$KV" --hidden "$C" --intermediate "$I"
              --vocab "$V" --ctx "$P" --tie "$TIE" --rope-theta "$TH" --llama3-scaling "$SC"
              --batch "$B" --seq "$T" --warmup "$W" --steps "$S" --threads "$THREADS"
              --json-tag "$name" --precision "$prec")
        echo "$name $prec: ${L} layers, ${H} heads, ${KV} K/V heads, hidden $C," \
             "intermediate $I, vocab $V, $([ "$TIE" = 1 ] && echo tied || echo untied)," \
             "batch $B x $T, $W+$S steps, $RUNS run(s)"
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
# are not counted), bench-gpt2's definition.
printf '%s\n' "${rows[@]+"${rows[@]}"}" | awk -v w="$THREADS" -v cf="$ceil_fp32" \
    -v cb="$ceil_bf16" -v cblas="$ceil_blas" -v cpu="$CPU" '
function num(x) { return x == "null" ? "null" : sprintf("%.4g", x) }
function cell(x, f) { return x == "null" ? "-" : sprintf(f, x) }
function div(a, b) { return a == "null" || b == "null" || b <= 0 ? "null" : a / b }
function head(c, p) {
    return sprintf("{\"bench\":\"llama\",\"case\":\"%s\",\"precision\":\"%s\",\"workers\":%d,", c, p, w)
}
function tail_() { return sprintf(",\"cpu\":\"%s\"}", cpu) }
NF == 6 {
    n++
    name[n] = $1; prec[n] = $2; par[n] = $3; tok = $4; ts[n] = $5; ps[n] = $6
    tt[n] = div(tok, ts[n]); pt[n] = div(tok, ps[n]); ra[n] = div(tt[n], pt[n])
    gf[n] = par[n] == "null" ? "null" : div(6 * par[n] * tok / 1e9, ts[n])
    pgf[n] = par[n] == "null" ? "null" : div(6 * par[n] * tok / 1e9, ps[n])
    fr[n] = div(gf[n], cf); pfr[n] = div(pgf[n], cf)
    frb[n] = prec[n] == "bf16" ? div(gf[n], cb) : "null"
    key[$1 "/" $2] = n
}
END {
    printf "\nCPU: %s\n", cpu
    printf "ceilings (GFLOP/s, %d threads): fp32 %s (OpenBLAS SGEMM %s), bf16 %s\n", w,
           cell(cf, "%.1f"), cell(cblas, "%.1f"), cell(cb, "%.1f")
    printf "%-6s %-5s %9s %9s %9s %9s %9s %8s %9s %8s %8s %8s %9s\n", "config", "prec", "params",
           "tessera", "torch", "tes tok/s", "tch tok/s", "tes/tch", "tes GF/s", "of fp32",
           "of bf16", "tch fp32", "bf16/fp32"
    for (i = 1; i <= n; i++) {
        j = key[name[i] "/fp32"]
        sp[i] = prec[i] == "bf16" && j ? div(ts[j], ts[i]) : "null"
        printf "%-6s %-5s %9s %9s %9s %9s %9s %8s %9s %8s %8s %8s %9s\n", name[i], prec[i],
               par[i] == "null" ? "-" : sprintf("%.1fM", par[i] / 1e6),
               cell(ts[i], "%.4f"), cell(ps[i], "%.4f"), cell(tt[i], "%.1f"),
               cell(pt[i], "%.1f"), cell(ra[i], "%.3f"), cell(gf[i], "%.1f"),
               cell(fr[i] == "null" ? "null" : 100 * fr[i], "%.1f%%"),
               cell(frb[i] == "null" ? "null" : 100 * frb[i], "%.1f%%"),
               cell(pfr[i] == "null" ? "null" : 100 * pfr[i], "%.1f%%"), cell(sp[i], "%.3f")
    }
    printf "(s/step; tes/tch = tessera tok/s / torch tok/s, > 1: Tessera is faster;\n" \
           " GF/s = 6 * params * tokens / s; of fp32 / of bf16: Tessera of the ceiling above,\n" \
           " tch fp32: PyTorch of the fp32 one; bf16/fp32 = Tessera fp32 s/step / its bf16 s/step)\n\n"
    for (i = 1; i <= n; i++) {
        printf "%s\"metric\":\"tok_per_s\",\"value\":%s,\"unit\":\"tok/s\",\"peer\":\"torch\"," \
               "\"peer_value\":%s,\"ratio\":%s%s\n", head(name[i], prec[i]), num(tt[i]),
               num(pt[i]), num(ra[i]), tail_()
        printf "%s\"metric\":\"s_per_step\",\"value\":%s,\"unit\":\"s\",\"peer\":\"torch\"," \
               "\"peer_value\":%s,\"ratio\":%s%s\n", head(name[i], prec[i]), num(ts[i]),
               num(ps[i]), num(div(ps[i], ts[i])), tail_()
        printf "%s\"metric\":\"model_gflops\",\"value\":%s,\"unit\":\"GFLOP/s\"," \
               "\"peer\":\"fp32_gemm_ceiling\",\"peer_value\":%s,\"ratio\":%s," \
               "\"torch_value\":%s,\"torch_ratio\":%s%s\n", head(name[i], prec[i]), num(gf[i]),
               num(cf), num(fr[i]), num(pgf[i]), num(pfr[i]), tail_()
        if (prec[i] == "bf16") {
            printf "%s\"metric\":\"model_gflops\",\"value\":%s,\"unit\":\"GFLOP/s\"," \
                   "\"peer\":\"bf16_gemm_ceiling\",\"peer_value\":%s,\"ratio\":%s%s\n",
                   head(name[i], "bf16"), num(gf[i]), num(cb), num(frb[i]), tail_()
            printf "%s\"metric\":\"s_per_step\",\"value\":%s,\"unit\":\"s\"," \
                   "\"peer\":\"tessera_fp32\",\"peer_value\":%s,\"ratio\":%s%s\n",
                   head(name[i], "bf16"), num(ts[i]),
                   num(key[name[i] "/fp32"] ? ts[key[name[i] "/fp32"]] : "null"), num(sp[i]),
                   tail_()
        }
    }
}'

# Generation with a KV cache: each shape, prompt 64 (32 for 1B in --quick),
# NEW tokens, batch 1 and 8, fp32 and bf16, against PyTorch's KV-cache
# decoder and the machine's read bandwidth (bench/llama/llama_generate.c
# prints its own table and JSON lines, with the CPU named here).
# LLAMA_BENCH_GENERATE=0 skips it.
if [ "${LLAMA_BENCH_GENERATE:-1}" != 0 ] && [ $have_tessera -eq 1 ]; then
    while read -r name L H KV C I V P TIE TH SC B T W S R NEW; do
        [ -n "$name" ] || continue
        case " $WANT " in *" $name "*) ;; *) continue ;; esac
        echo
        echo "Llama $name generation: tessera vs torch, $THREADS threads, CPU $CPU"
        peer=()
        [ $have_torch -eq 1 ] || peer=(--no-peer)
        timeout 1800 "$GEN" --threads "$THREADS" --json-tag "$name" --layers "$L" --heads "$H" \
            --kv-heads "$KV" --hidden "$C" --intermediate "$I" --vocab "$V" --ctx "$P" \
            --tie "$TIE" --rope-theta "$TH" --llama3-scaling "$SC" --prompt "$T" --new "$NEW" \
            --batch 1,8 --precision fp32 "${peer[@]+"${peer[@]}"}" || status=1
    done <<< "$CONFIGS"
fi
exit $status
