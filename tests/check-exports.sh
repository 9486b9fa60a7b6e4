#!/bin/sh
# tests/check-exports.sh LIB HEADER... — the shared library exports exactly
# the functions its public headers declare with TSR_API: none fewer (each is
# defined), none more (internal functions, kernels and compiler-made ifuncs
# stay hidden). The reference is the headers' text, not the build.
set -u
lib=$1
shift
want=$(sed -n 's/^TSR_API [^(]*[^A-Za-z0-9_]\(tsr_[a-z0-9_]*\)(.*/\1/p' "$@" | sort -u)
# Names that begin with "__" belong to the toolchain (sanitizer runtimes).
have=$(nm -D --defined-only "$lib" | awk '$3 !~ /^__/ {print $3}' | sort -u)
nwant=$(printf '%s\n' "$want" | grep -c .)
nhave=$(printf '%s\n' "$have" | grep -c .)
echo "declared TSR_API: $nwant; exported: $nhave"
status=0
if [ "$nwant" -lt 50 ]; then
    echo "too few TSR_API declarations found: is the pattern out of date?"
    status=1
fi
extra=$(printf '%s\n' "$have" | grep -vxF "$want")
missing=$(printf '%s\n' "$want" | grep -vxF "$have")
if [ -n "$extra" ]; then
    echo "exported but not declared TSR_API:"
    printf '  %s\n' $extra
    status=1
fi
if [ -n "$missing" ]; then
    echo "declared TSR_API but not exported:"
    printf '  %s\n' $missing
    status=1
fi
exit $status
