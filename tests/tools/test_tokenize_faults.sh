#!/usr/bin/env bash
# tests/tools/test_tokenize_faults.sh TOOLS_DIR — tessera-tokenize replacing
# a shard pair (OUT_train.bin, OUT_val.bin, OUT.manifest) with another:
#  - kill: for every action N of the publication (TESSERA_FAULT_AT=kill:N,
#    as kill -9), the shards left are the old pair or the new one, byte for
#    byte, which the other programs accept, or shards that the manifest in
#    place does not describe, which they refuse ("run it again"); never a
#    missing shard or an accepted mix; running tessera-tokenize again gives
#    the new pair and no leftover;
#  - full disk at every write (TESSERA_FAULT_AT=enospc:N): exit 1, "No space
#    left on device", the old pair and manifest untouched and accepted;
#  - a failing rename of the training shard after the validation shard was
#    replaced (the training shard's name taken by a folder): exit 1 and the
#    old validation shard back;
#  - a validation shard of another run beside a training shard is refused.
# Prints a Criterion-style synthesis line for tests/run-suite.sh.
set -u
BIN=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export TESSERA_BIND=0
unset TESSERA_FAULT_AT
SUITE=tokenize_faults
. "$(dirname "$0")/lib.sh"

for i in $(seq 1 200); do echo "old line $i: a lazy dog sleeps $((i * 31 % 97)) hours."; done \
    >"$TMP/old.txt"
for i in $(seq 1 300); do echo "new line $i: the quick brown fox, $((i * 7919 % 1000)) times."; done \
    >"$TMP/new.txt"
tokenize() { # text, prefix, then flags
    local text=$1 prefix=$2
    shift 2
    "$BIN/tessera-tokenize" --val-fraction 0.1 "$@" "$text" -o "$prefix"
}
# The references: each pair written alone.
tokenize "$TMP/old.txt" "$TMP/refold" >/dev/null && tokenize "$TMP/new.txt" "$TMP/refnew" \
    >/dev/null || exit 1
# A checkpoint to evaluate with (tessera-eval checks the shard it reads).
"$BIN/tessera-train" --data "$TMP/refnew_train.bin" --vocab 257 --layers 1 --heads 1 \
    --channels 8 --context 16 --batch 1 --steps 1 --threads 1 --out "$TMP/model" \
    >/dev/null 2>&1 || exit 1

# Whether programs accept shard $1 (exit 0) or refuse it as not matching its
# manifest (exit 1 with "run it again"); anything else is an error (2).
accepted() {
    "$BIN/tessera-eval" --checkpoint "$TMP/model" --data "$1" --seq 16 --batch 1 \
        --max-batches 1 --threads 1 >"$TMP/eval.log" 2>&1 && return 0
    grep -q "run it again" "$TMP/eval.log" && return 1
    cat "$TMP/eval.log"
    return 2
}
same() { cmp -s "$1" "$2"; }
# The pair at prefix $1: "old", "new" (bytes of a reference pair, accepted),
# or "refused" (a mix, or a pair the manifest in place does not describe:
# at least one shard refused with "run it again"); "bad" otherwise (a shard
# missing, a reference pair refused, a mix accepted).
classify() {
    local p=$1 t v
    accepted "${p}_train.bin"
    t=$?
    accepted "${p}_val.bin"
    v=$?
    if [ $t = 2 ] || [ $v = 2 ]; then
        echo "bad (a shard is not refused for a mismatch: $t$v)"
    elif [ $t$v != 00 ]; then
        echo refused
    elif same "${p}_train.bin" "$TMP/refold_train.bin" &&
        same "${p}_val.bin" "$TMP/refold_val.bin"; then
        echo old
    elif same "${p}_train.bin" "$TMP/refnew_train.bin" &&
        same "${p}_val.bin" "$TMP/refnew_val.bin"; then
        echo new
    else
        echo "bad (a mix accepted)"
    fi
}
only_the_pair() { # no temporary or backup left beside prefix $1
    local d b
    d=$(dirname "$1")
    b=$(basename "$1")
    [ -z "$(cd "$d" && ls -A | grep "^$b" | grep -v -x -e "${b}_train.bin" -e "${b}_val.bin" \
        -e "$b.manifest")" ] || { echo "left over:"; ls -A "$d"; return 1; }
}

# ---- kill -9 at every action -------------------------------------------------
kill_case() {
    local n=$1 p=$TMP/k$1/out rc state
    mkdir -p "$TMP/k$n"
    tokenize "$TMP/old.txt" "$p" >/dev/null || return 1
    TESSERA_FAULT_AT=kill:$n tokenize "$TMP/new.txt" "$p" >/dev/null 2>&1
    rc=$?
    echo "$rc" >"$TMP/kill.rc"
    [ "$rc" = 0 ] && return 0 # past the last action
    [ "$rc" = 137 ] || { echo "exit $rc, expected 137"; return 1; }
    state=$(classify "$p")
    echo "$state" >>"$TMP/kill.seen"
    case $state in old | new | refused) ;; *)
        echo "after the kill: $state"
        return 1
        ;;
    esac
    tokenize "$TMP/new.txt" "$p" >/dev/null || return 1
    [ "$(classify "$p")" = new ] || { echo "the rerun did not give the new pair"; return 1; }
    only_the_pair "$p"
}
: >"$TMP/kill.seen"
n=1
while [ $n -le 50 ]; do
    check "kill_at_action_$n" kill_case $n
    [ "$(cat "$TMP/kill.rc")" = 0 ] && break
    n=$((n + 1))
done
check every_action_was_killed test "$(cat "$TMP/kill.rc")" = 0 -a $n -gt 6
check kills_kept_the_old_pair grep -q -x old "$TMP/kill.seen"
check kills_left_a_refused_pair grep -q -x refused "$TMP/kill.seen"
check kills_after_the_new_pair grep -q -x new "$TMP/kill.seen"
echo "$((n - 1)) kill points"

# ---- a full disk at every write ---------------------------------------------
enospc_case() {
    local n=$1 p=$TMP/f$1/out rc
    mkdir -p "$TMP/f$n"
    tokenize "$TMP/old.txt" "$p" >/dev/null || return 1
    cp "$p.manifest" "$TMP/manifest.before"
    TESSERA_FAULT_AT=enospc:$n tokenize "$TMP/new.txt" "$p" >/dev/null 2>"$TMP/err.log"
    rc=$?
    echo "$rc" >"$TMP/full.rc"
    [ "$rc" = 0 ] && return 0
    [ "$rc" = 1 ] && grep -q "^tessera-tokenize: cannot .*No space left on device" \
        "$TMP/err.log" || {
        echo "exit $rc:"
        cat "$TMP/err.log"
        return 1
    }
    [ "$(classify "$p")" = old ] || { echo "the old pair is not intact"; return 1; }
    cmp "$p.manifest" "$TMP/manifest.before" && only_the_pair "$p"
}
n=1
while [ $n -le 10 ]; do
    check "enospc_at_write_$n" enospc_case $n
    [ "$(cat "$TMP/full.rc")" = 0 ] && break
    n=$((n + 1))
done
check every_write_failed_once test "$(cat "$TMP/full.rc")" = 0 -a $n -eq 4

# ---- the second rename fails ------------------------------------------------
second_rename_fails() {
    local p=$TMP/r/out rc
    mkdir -p "$TMP/r"
    tokenize "$TMP/old.txt" "$p" >/dev/null || return 1
    # the training shard's name is taken by a folder that is not empty
    rm "${p}_train.bin" && mkdir -p "${p}_train.bin/x" || return 1
    tokenize "$TMP/new.txt" "$p" >/dev/null 2>"$TMP/err.log"
    rc=$?
    cat "$TMP/err.log"
    [ "$rc" = 1 ] && grep -q "cannot rename .*the previous .*_val.bin' is back" "$TMP/err.log" ||
        return 1
    same "${p}_val.bin" "$TMP/refold_val.bin" || { echo "the old validation shard is gone"; return 1; }
    accepted "${p}_val.bin" && only_the_pair "$p"
}
check failed_rename_restores_the_validation_shard second_rename_fails

# ---- a pair put together by hand --------------------------------------------
mkdir "$TMP/h"
tokenize "$TMP/new.txt" "$TMP/h/out" >/dev/null
cp "$TMP/refold_val.bin" "$TMP/h/out_val.bin"
foreign_refused() {
    "$BIN/tessera-eval" --checkpoint "$TMP/model" --data "$1" --seq 16 --threads 1 \
        >"$TMP/eval.log" 2>&1
    local rc=$?
    cat "$TMP/eval.log"
    [ "$rc" = 1 ] && grep -q "does not match .*run it again" "$TMP/eval.log"
}
check foreign_validation_shard_is_refused foreign_refused "$TMP/h/out_val.bin"
check its_training_shard_is_accepted accepted "$TMP/h/out_train.bin"
# no validation shard any more: the old one goes, and the manifest lists one
tokenize "$TMP/new.txt" "$TMP/h/out" --val-fraction 0 >/dev/null
check no_validation_shard_removes_the_old_one test ! -e "$TMP/h/out_val.bin" -a \
    "$(grep -c . "$TMP/h/out.manifest")" = 2

finish
