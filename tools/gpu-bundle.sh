#!/usr/bin/env bash
# tools/gpu-bundle.sh BUILD_DIR OUT.tar.gz — pack a native CUDA build
# (-Dcuda=native, MPI and oneDNN off) into one tarball that runs on a GPU
# machine which has the NVIDIA driver, the CUDA 13 runtime and cuBLAS, and
# Python with PyTorch, but none of our Debian dev packages and no network.
#
# What it holds (tessera-gpu/):
#   bin/     the tools, the benchmarks the GPU check runs
#   tests/   the Criterion suites that use GPUs (run natively there)
#   lib/     libtessera and every shared library they need except glibc's,
#            libstdc++, libgcc_s and CUDA's (the GPU machine brings those:
#            the driver must match its own libcuda, and cuBLAS is 100s of MB)
#   share/   the source files the suites and benchmarks read (fixtures,
#            platform descriptions, the PyTorch reference and peer), laid
#            out as in the source tree: share/ is their TESSERA_SOURCE_ROOT
#   gpu-check.sh   the check kit (tools/gpu-check.sh)
#   MANIFEST       commit, build options, host glibc, file list
#
# Must never: pack a library of glibc, the compiler runtime or CUDA (the
# host's version would shadow the GPU machine's), or succeed while a packed
# program has a dependency that is neither packed nor one of those.
# Exit status: 0 packed, 1 a check failed, 2 usage.
set -euo pipefail

if [ $# -ne 2 ] || [ ! -f "$1/build.ninja" ]; then
    echo "usage: $0 BUILD_DIR OUT.tar.gz   (BUILD_DIR configured with -Dcuda=native)" >&2
    exit 2
fi
BUILD=$(cd "$1" && pwd)
OUTFILE=$2
SRC=$(cd "$(dirname "$0")/.." && pwd)

if ! meson introspect --buildoptions "$BUILD" | /usr/bin/python3 -c '
import json, sys
o = {x["name"]: x["value"] for x in json.load(sys.stdin)}
sys.exit(0 if o.get("cuda") in ("native", "enabled") else 1)'; then
    echo "gpu-bundle: $BUILD is not a native CUDA build (meson setup -Dcuda=native)" >&2
    exit 1
fi

# The programs packed: the tools, the GPU check's benchmarks, the GPU suites.
TOOLS="tessera-info tessera-sim tessera-train tessera-eval tessera-generate"
BENCH="bench/kernels/tessera-bench-kernels bench/offload/tessera-bench-offload
       bench/gpt2/bench-gpt2-step bench/gpt2/bench-gemm-ceiling bench/llama/bench-llama-step"
SUITES="kernels_cuda memory_cuda memory_cuda_runtime memory_cuda_devdeps nn_ops nn_gpt2 nn_gpt2_reference
        nn_gpt2_bf16 nn_gpt2_generate nn_llama nn_llama_generate runtime_stress"
SHARE="tests/nn/fixtures platforms tools/gpt2_reference.py tools/safetensors_py.py
       bench/gpt2/torch_step.py"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/tessera-gpu
mkdir -p "$root/bin" "$root/tests" "$root/lib" "$root/share"

for t in $TOOLS; do cp "$BUILD/tools/$t" "$root/bin/"; done
for b in $BENCH; do cp "$BUILD/$b" "$root/bin/"; done
for s in $SUITES; do
    if [ -x "$BUILD/tests/test_$s" ]; then cp "$BUILD/tests/test_$s" "$root/tests/"
    else echo "gpu-bundle: suite $s not built in $BUILD" >&2; exit 1; fi
done
for f in "$BUILD"/libtessera.so*; do [ -d "$f" ] || cp -P "$f" "$root/lib/"; done
for f in $SHARE; do
    mkdir -p "$root/share/$(dirname "$f")"
    cp -r "$SRC/$f" "$root/share/$f"
done
cp "$SRC/tools/gpu-check.sh" "$root/gpu-check.sh"
chmod +x "$root/gpu-check.sh"
strip --strip-unneeded "$root"/bin/* "$root"/tests/* 2>/dev/null || true

# What the GPU machine provides: glibc's libraries, the compiler runtime,
# CUDA's. Every other dependency is packed.
provided='^(ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnvidia-.*)\.so'
declare -A seen=()
# ldd of a binary, with the packed libraries first on the search path.
deps_of() { LD_LIBRARY_PATH="$root/lib" ldd "$1" 2>/dev/null | awk '/=>/ { print $1, $3 }'; }
queue=("$root"/bin/* "$root"/tests/* "$root"/lib/libtessera.so.*)
while [ ${#queue[@]} -gt 0 ]; do
    f=${queue[0]}; queue=("${queue[@]:1}")
    while read -r name path; do
        [ -n "$name" ] || continue
        [[ $name =~ $provided ]] && continue
        [ -n "${seen[$name]:-}" ] && continue
        seen[$name]=1
        if [ "$path" = "not" ] || [ ! -f "$path" ]; then
            echo "gpu-bundle: $f needs $name, which is not found here" >&2
            exit 1
        fi
        if [ ! -e "$root/lib/$name" ]; then
            cp -L "$path" "$root/lib/$name"
            queue+=("$root/lib/$name")
        fi
    done < <(deps_of "$f")
done

# The highest glibc symbol version any packed file needs: the GPU machine's
# glibc must be at least that.
glibc_need=$(for f in "$root"/bin/* "$root"/tests/* "$root"/lib/*; do
                 objdump -T "$f" 2>/dev/null | grep -o 'GLIBC_[0-9.]*'; done |
             sort -t. -k1,1 -k2,2n -k3,3n -u | tail -1)

{
    echo "tessera GPU bundle"
    echo "commit: $(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$SRC" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "built: $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -m), $(ldd --version | head -1)"
    echo "needs: glibc >= ${glibc_need#GLIBC_}, the CUDA 13 runtime and cuBLAS, an NVIDIA driver for CUDA 13"
    echo "nvcc: $(nvcc --version 2>/dev/null | tail -1)"
    echo "options: $(meson introspect --buildoptions "$BUILD" | /usr/bin/python3 -c '
import json,sys
o={x["name"]:x["value"] for x in json.load(sys.stdin)}
print(" ".join("%s=%s" % (k, o[k]) for k in ("cuda","mpi","dnnl","buildtype") if k in o))')"
    echo "files:"
    (cd "$root" && find . -type f -o -type l | sort | sed 's/^/  /')
} > "$root/MANIFEST"

mkdir -p "$(dirname "$OUTFILE")"
tar -C "$stage" -czf "$OUTFILE" tessera-gpu
raw=$(du -sb "$root" | cut -f1)
packed=$(stat -c %s "$OUTFILE")
awk -v f="$OUTFILE" -v p="$packed" -v r="$raw" -v n="$(ls "$root/lib" | wc -l)" \
    -v g="${glibc_need#GLIBC_}" 'BEGIN { printf "gpu-bundle: %s: %.1f MiB packed (%.1f MiB unpacked, %d libraries), needs glibc >= %s\n", f, p / 1048576, r / 1048576, n, g }'
if [ "$packed" -ge $((64 * 1048576)) ]; then
    echo "gpu-bundle: the tarball is over 64 MiB" >&2
    exit 1
fi
