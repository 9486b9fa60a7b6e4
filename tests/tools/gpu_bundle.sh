#!/usr/bin/env bash
# tests/tools/gpu_bundle.sh BUNDLE.tar.gz — the GPU bundle's own test, run
# here (make gpu-bundle, CI): unpacked into an empty folder, its programs
# find every library inside it, except those a GPU machine brings (glibc's,
# the compiler runtime's, CUDA's); its tools run on the CPU from there (the
# device query, a simulated GPT-2 step, a real training step on CPU
# workers); and the kit refuses a machine without a GPU with exit 3.
set -u
if [ $# -ne 1 ] || [ ! -f "$1" ]; then
    echo "usage: $0 BUNDLE.tar.gz" >&2
    exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok:   $*"; }

tar xzf "$1" -C "$tmp" || { echo "FAIL: cannot unpack $1"; exit 1; }
root=$tmp/tessera-gpu
[ -x "$root/gpu-check.sh" ] && [ -f "$root/MANIFEST" ] || fail "gpu-check.sh or MANIFEST missing"

# Every dependency: inside the bundle, or one the GPU machine provides.
provided='^(linux-vdso|ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt)\.so'
bad=""
for f in "$root"/bin/* "$root"/tests/* "$root"/lib/*.so*; do
    while read -r name arrow path _; do
        [[ $name =~ $provided ]] && continue
        [[ $name == /* ]] && continue # the interpreter line
        case $path in
            "$root"/lib/*) ;;
            *) bad="$bad $(basename "$f"):$name=>${path:-?}" ;;
        esac
    done < <(env -i LD_LIBRARY_PATH="$root/lib" ldd "$f" 2>/dev/null | grep '=>')
done
if [ -z "$bad" ]; then pass "every packed program resolves its libraries inside the bundle"
else fail "libraries from outside the bundle:$bad"; fi

run() { env -i PATH=/usr/bin:/bin HOME="$tmp" LD_LIBRARY_PATH="$root/lib" TESSERA_BIND=0 \
            TESSERA_PERFMODEL_DIR= "$@"; }

out=$(run "$root/bin/tessera-info" 2>&1)
if grep -q '^cuda: built' <<< "$out"; then pass "tessera-info runs from the bundle (cuda: built)"
else fail "tessera-info: $out"; fi

out=$(run "$root/bin/tessera-sim" --platform "$root/share/platforms/h200.json" gpt2 --layers 2 \
          --channels 256 --heads 4 --vocab 1000 --context 256 --batch 2 --seq 256 --micro 1 2>&1)
if grep -q '"step_s":[0-9]' <<< "$out"; then pass "tessera-sim simulates a step on the bundle's h200.json"
else fail "tessera-sim: $(tail -3 <<< "$out")"; fi

out=$(run TESSERA_NCUDA=0 "$root/bin/bench-gpt2-step" --layers 2 --heads 2 --channels 64 --vocab 257 \
          --ctx 64 --batch 2 --seq 32 --warmup 0 --steps 1 --threads 2 2>&1)
if grep -q '"impl":"tessera"' <<< "$out" && grep -q '"loss_first":[0-9]' <<< "$out"; then
    pass "a training step runs on CPU workers from the bundle"
else fail "bench-gpt2-step: $(tail -3 <<< "$out")"; fi

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    echo "skip: this machine has a GPU; the kit's refusal without one is not checked here"
else
    out=$(run "$root/gpu-check.sh" --out "$tmp/out" 2>&1)
    rc=$?
    if [ $rc -eq 3 ] && grep -q 'no NVIDIA GPU' <<< "$out" &&
       grep -q '"step":"preflight","status":"refused"' "$tmp/out/summary.jsonl"; then
        pass "gpu-check.sh refuses a machine without a GPU (exit 3)"
    else fail "gpu-check.sh without a GPU: exit $rc: $(tail -3 <<< "$out")"; fi
fi

[ $fails -eq 0 ] && echo "gpu bundle: all checks passed" || echo "gpu bundle: $fails check(s) failed"
[ $fails -eq 0 ]
