#!/usr/bin/env bash
# tests/tools/test_checkpoint_faults.sh TOOLS_DIR — tessera-train's
# checkpoints under faults, on a tiny model saving after each of 3 steps:
#  - kill: for every action N of the saves (each write, fsync, rename,
#    removal; TESSERA_FAULT_AT=kill:N ends the process there as kill -9
#    would), the run dies, `latest` names the previous complete checkpoint or
#    the new one, and --resume continues from it (and from no other) to the
#    same model as a run never interrupted (the same validation loss to 4
#    decimals, as tests/tools/test_cli.sh compares), leaving no temporary;
#  - full disk: for every file write N (TESSERA_FAULT_AT=enospc:N) the run
#    fails with exit 1 and "No space left on device", the previous checkpoint
#    is the one `latest` names, untouched, and resumes to the same model;
#    and, where a tmpfs can be mounted (root), a real full disk does the same;
#  - a failing write to the disk tier (TESSERA_DISK_FAIL=write:K, the host
#    capped at a fraction of the training state): at points through the
#    steps and the saves, the run fails with exit 1 and a message naming
#    the tier's file and pwrite, leaves no temporary and an empty disk
#    folder, and the checkpoint `latest` names resumes to the model of a
#    run never interrupted; without a fault the run through the disk gives
#    that model too;
#  - mismatched pairs: a state or a model of another save, a changed byte, a
#    missing file, a bad pointer, the old side-by-side layout: --resume
#    refuses with exit 1 and says why.
# Prints a Criterion-style synthesis line for tests/run-suite.sh.
set -u
BIN=$1
TMP=$(mktemp -d)
MNT=
cleanup() {
    [ -n "$MNT" ] && umount "$MNT" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
export TESSERA_BIND=0
unset TESSERA_FAULT_AT
SUITE=checkpoint_faults
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/corpus.sh"
tiny_corpus_tokenized || exit 1
TRAIN=(--data "$TMP/c_train.bin" --vocab 257 --layers 2 --heads 2 --channels 32 --context 32
       --seq 32 --batch 4 --micro-batch 2 --lr 3e-3 --warmup 2 --threads 1 --steps 3
       --checkpoint-every 1)

# The validation loss of a run folder's latest checkpoint.
evaluate() {
    "$BIN/tessera-eval" --checkpoint "$1" --data "$TMP/c_val.bin" --batch 2 --seq 32 \
        --threads 1 | grep '^loss'
}
"$BIN/tessera-train" "${TRAIN[@]}" --out "$TMP/ref" >"$TMP/ref.log" 2>&1 || {
    cat "$TMP/ref.log"
    exit 1
}
REF=$(evaluate "$TMP/ref")
echo "uninterrupted run: $REF"

# "step-00000002" -> 2; the step of the last "checkpoint saved" line of a log
# (0 when none: the first save is that of step 1).
step_of() { echo $((10#${1#step-})); }
last_saved() {
    local s
    s=$(grep 'checkpoint saved to' "$1" | tail -1 | sed 's/.*step-0*\([0-9]\+\)$/\1/')
    echo "${s:-0}"
}
# What is in a run folder besides `latest` and the one checkpoint it names.
leftovers() {
    (cd "$1" && ls -A | grep -v -x -e latest -e "$(cat latest 2>/dev/null)")
}

# --resume of $1 must continue from step $2 and end at the reference model,
# leaving only `latest` and its checkpoint.
resume_matches() {
    local out=$1 from=$2 got
    "$BIN/tessera-train" --out "$out" --resume --threads 1 >"$TMP/resume.log" 2>&1 || {
        echo "resume failed:"
        cat "$TMP/resume.log"
        return 1
    }
    grep -q "^resuming $out at step $from " "$TMP/resume.log" || {
        echo "did not resume at step $from:"
        grep resuming "$TMP/resume.log"
        return 1
    }
    got=$(evaluate "$out") || return 1
    [ "$got" = "$REF" ] || { echo "resumed: $got, uninterrupted: $REF"; return 1; }
    [ -z "$(leftovers "$out")" ] || { echo "left over: $(leftovers "$out")"; return 1; }
}

# ---- kill -9 at every action of every save ----------------------------------
kill_case() {
    local n=$1 out=$TMP/kill$1 rc prev now
    TESSERA_FAULT_AT=kill:$n "$BIN/tessera-train" "${TRAIN[@]}" --out "$out" \
        >"$TMP/run.log" 2>&1
    rc=$?
    echo "$rc" >"$TMP/kill.rc"
    [ "$rc" = 0 ] && return 0 # past the last action: the loop ends
    [ "$rc" = 137 ] || { echo "exit $rc, expected 137"; cat "$TMP/run.log"; return 1; }
    prev=$(last_saved "$TMP/run.log")
    ls -A "$out" | grep -q '\.tmp\.' && echo tmp >>"$TMP/kill.seen"
    if [ ! -f "$out/latest" ]; then
        # killed in the first save before the pointer: nothing to resume
        [ "$prev" = 0 ] || { echo "no latest, but step $prev was saved"; return 1; }
        "$BIN/tessera-train" --out "$out" --resume >"$TMP/resume.log" 2>&1
        rc=$?
        [ "$rc" = 1 ] && grep -q "no checkpoint to resume" "$TMP/resume.log" || {
            echo "resume without a checkpoint: exit $rc"
            cat "$TMP/resume.log"
            return 1
        }
        echo none >>"$TMP/kill.seen"
        return 0
    fi
    now=$(step_of "$(cat "$out/latest")")
    if [ "$now" = "$prev" ]; then
        echo old >>"$TMP/kill.seen"
    elif [ "$now" = $((prev + 1)) ]; then
        echo new >>"$TMP/kill.seen"
    else
        echo "latest is step $now; the last complete save was step $prev"
        return 1
    fi
    resume_matches "$out" "$now"
}
: >"$TMP/kill.seen"
n=1
while [ $n -le 100 ]; do
    check "kill_at_action_$n" kill_case $n
    [ "$(cat "$TMP/kill.rc")" = 0 ] && break
    n=$((n + 1))
done
# every action was reached, and the kills hit all three situations
check every_action_was_killed test "$(cat "$TMP/kill.rc")" = 0 -a $n -gt 20
check kills_left_temporaries grep -q tmp "$TMP/kill.seen"
check kills_before_any_checkpoint grep -q none "$TMP/kill.seen"
check kills_kept_the_old_checkpoint grep -q old "$TMP/kill.seen"
check kills_after_the_new_checkpoint grep -q new "$TMP/kill.seen"
echo "$((n - 1)) kill points"

# ---- a full disk at every file write ----------------------------------------
enospc_case() {
    local n=$1 out=$TMP/full$1 rc prev
    TESSERA_FAULT_AT=enospc:$n "$BIN/tessera-train" "${TRAIN[@]}" --out "$out" \
        >"$TMP/run.log" 2>&1
    rc=$?
    echo "$rc" >"$TMP/full.rc"
    [ "$rc" = 0 ] && return 0
    [ "$rc" = 1 ] || { echo "exit $rc, expected 1"; cat "$TMP/run.log"; return 1; }
    grep -q "^tessera-train: cannot .*No space left on device" "$TMP/run.log" || {
        echo "no clear message:"
        cat "$TMP/run.log"
        return 1
    }
    prev=$(last_saved "$TMP/run.log")
    [ -z "$(leftovers "$out")" ] || { echo "left over: $(leftovers "$out")"; return 1; }
    if [ "$prev" = 0 ]; then
        [ ! -e "$out/latest" ] || { echo "latest without a save"; return 1; }
        return 0
    fi
    [ "$(step_of "$(cat "$out/latest")")" = "$prev" ] || {
        echo "latest is $(cat "$out/latest"), the last save was step $prev"
        return 1
    }
    resume_matches "$out" "$prev"
}
n=1
while [ $n -le 30 ]; do
    check "enospc_at_write_$n" enospc_case $n
    [ "$(cat "$TMP/full.rc")" = 0 ] && break
    n=$((n + 1))
done
check every_write_failed_once test "$(cat "$TMP/full.rc")" = 0 -a $n -gt 6
echo "$((n - 1)) write points"

# ---- a real full disk (a small tmpfs; needs root) ---------------------------
real_full_disk() {
    local out=$MNT/run rc
    "$BIN/tessera-train" "${TRAIN[@]}" --out "$out" >"$TMP/run.log" 2>&1
    rc=$?
    [ "$rc" = 1 ] && grep -q "No space left on device" "$TMP/run.log" || {
        echo "exit $rc on a full disk:"
        cat "$TMP/run.log"
        return 1
    }
    [ "$(cat "$out/latest")" = step-00000001 ] || { echo "latest: $(cat "$out/latest")"; return 1; }
    [ -z "$(leftovers "$out")" ] || { echo "left over: $(leftovers "$out")"; return 1; }
    mount -o remount,size=4m "$MNT" || return 1
    resume_matches "$out" 1
}
mkdir "$TMP/mnt"
# one checkpoint (about 430 KB) fits, a second beside it does not
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=640k tmpfs "$TMP/mnt" 2>/dev/null; then
    MNT=$TMP/mnt
    check real_full_disk_keeps_the_checkpoint real_full_disk
    umount "$MNT" && MNT=
else
    echo "[SKIP] checkpoint_faults::real_full_disk_keeps_the_checkpoint (cannot mount a tmpfs)"
fi

# ---- a failing write to the disk tier ----------------------------------------
# 0.43M parameters: about 7 MB of parameters, gradients and moments through
# a host of 2 MiB, so every step writes tiles to disk and reads them back.
DTRAIN=(--data "$TMP/c_train.bin" --vocab 257 --layers 2 --heads 2 --channels 128 --context 32
        --seq 32 --batch 4 --micro-batch 2 --lr 3e-3 --warmup 2 --threads 1 --steps 3
        --checkpoint-every 1)
mkdir "$TMP/disk"
through_disk() { # the tessera-train arguments
    TESSERA_DISK_DIR=$TMP/disk TESSERA_LIMIT_HOST_MEM=2 TESSERA_LIMIT_DISK_MEM=64 \
        "$BIN/tessera-train" "$@"
}
"$BIN/tessera-train" "${DTRAIN[@]}" --out "$TMP/dref" >"$TMP/dref.log" 2>&1 || {
    cat "$TMP/dref.log"
    exit 1
}
DREF=$(evaluate "$TMP/dref")
echo "in memory: $DREF"
disk_run_matches() {
    through_disk "${DTRAIN[@]}" --out "$TMP/dclean" || return 1
    [ "$(evaluate "$TMP/dclean")" = "$DREF" ] || {
        echo "through the disk: $(evaluate "$TMP/dclean"), in memory: $DREF"
        return 1
    }
    [ -z "$(ls -A "$TMP/disk")" ] || { echo "left in the disk folder: $(ls -A "$TMP/disk")"; return 1; }
}
check run_through_the_disk_matches_memory disk_run_matches
disk_fail_case() {
    local k=$1 out=$TMP/dfail$1 rc prev REF=$DREF
    TESSERA_DISK_FAIL=write:$k through_disk "${DTRAIN[@]}" --out "$out" >"$TMP/run.log" 2>&1
    rc=$?
    echo "$rc" >"$TMP/dfail.rc"
    [ -z "$(ls -A "$TMP/disk")" ] || { echo "left in the disk folder: $(ls -A "$TMP/disk")"; return 1; }
    [ "$rc" = 0 ] && return 0 # past the last write: the run ends
    [ "$rc" = 1 ] || { echo "exit $rc, expected 1"; cat "$TMP/run.log"; return 1; }
    grep -q "^tessera-train: .*$TMP/disk/.*\.disk: pwrite(.*Input/output error" "$TMP/run.log" || {
        echo "no clear message:"
        cat "$TMP/run.log"
        return 1
    }
    grep -o "^tessera-train: [a-z ]*" "$TMP/run.log" | head -1 >>"$TMP/dfail.seen"
    prev=$(last_saved "$TMP/run.log")
    [ -z "$(leftovers "$out")" ] || { echo "left over: $(leftovers "$out")"; return 1; }
    if [ "$prev" = 0 ]; then
        [ ! -e "$out/latest" ] || { echo "latest without a save"; return 1; }
        return 0
    fi
    echo after >>"$TMP/dfail.seen"
    [ "$(step_of "$(cat "$out/latest")")" = "$prev" ] || {
        echo "latest is $(cat "$out/latest"), the last save was step $prev"
        return 1
    }
    resume_matches "$out" "$prev"
}
: >"$TMP/dfail.seen"
k=100
while [ $k -le 5000 ]; do
    check "disk_write_$k""_fails" disk_fail_case $k
    [ "$(cat "$TMP/dfail.rc")" = 0 ] && break
    k=$((k + 150))
done
check every_disk_write_point_reached test "$(cat "$TMP/dfail.rc")" = 0
check a_disk_failure_kept_a_checkpoint grep -q after "$TMP/dfail.seen"
check a_disk_failure_failed_a_step grep -q -E "optimizer step|at step" "$TMP/dfail.seen"
echo "disk write points: $(sort "$TMP/dfail.seen" | uniq -c | tr '\n' ';')"

# ---- pairs that do not match ------------------------------------------------
refuses() { # folder, what the message must say
    local rc
    "$BIN/tessera-train" --out "$1" --resume >"$TMP/resume.log" 2>&1
    rc=$?
    cat "$TMP/resume.log"
    [ "$rc" = 1 ] || { echo "exit $rc, expected 1"; return 1; }
    grep -q "$2" "$TMP/resume.log"
}
R=$TMP/pair
"$BIN/tessera-train" "${TRAIN[@]}" --out "$R" --stop-at 1 >/dev/null 2>&1
cp "$R/step-00000001/model.safetensors" "$TMP/model1"
cp "$R/step-00000001/train.state" "$TMP/state1"
"$BIN/tessera-train" --out "$R" --resume --stop-at 2 >/dev/null 2>&1
S2=$R/step-00000002
cp "$S2/model.safetensors" "$TMP/model2"
cp "$S2/train.state" "$TMP/state2"
restore() { cp "$TMP/model2" "$S2/model.safetensors" && cp "$TMP/state2" "$S2/train.state"; }

cp "$TMP/state1" "$S2/train.state"
check state_of_another_save_is_refused refuses "$R" "state of step 1, but its folder.*step 2"
restore
cp "$TMP/model1" "$S2/model.safetensors"
check model_of_another_save_is_refused refuses "$R" "does not match.*different saves"
restore
# one byte of the last tensor's data changed (the file stays valid)
size=$(stat -c %s "$S2/model.safetensors")
printf '\x01' | dd of="$S2/model.safetensors" bs=1 seek=$((size - 3)) conv=notrunc 2>/dev/null
check changed_model_is_refused refuses "$R" "does not match"
restore
rm "$S2/train.state"
check missing_state_is_refused refuses "$R" "train.state' does not exist"
restore
echo "step-00000007" >"$R/latest"
check dangling_pointer_is_refused refuses "$R" "names '.*step-00000007', which is missing"
echo "../elsewhere" >"$R/latest"
check bad_pointer_is_refused refuses "$R" "not a checkpoint folder"
echo "step-00000002" >"$R/latest"
check repaired_pair_resumes resume_matches "$R" 2
O=$TMP/old
mkdir "$O"
cp "$TMP/model2" "$O/model.safetensors"
cp "$TMP/state2" "$O/train.state"
check old_layout_is_refused refuses "$O" "no 'latest' pointer"

# ---- deterministic mode: a resumed run is the uninterrupted one, bit for bit --
# Two workers (the sums' order could vary), 6 steps straight against 3, a
# stop and 3 resumed: the model and the optimizer state equal byte for byte
# (the state's run id aside: a run draws its own).
bitwise_resume() {
    local det=(env TESSERA_DETERMINISTIC=1)
    "${det[@]}" "$BIN/tessera-train" "${TRAIN[@]}" --threads 2 --steps 6 --checkpoint-every 0 \
        --out "$TMP/det_a" >/dev/null 2>&1 || { echo "uninterrupted run failed"; return 1; }
    "${det[@]}" "$BIN/tessera-train" "${TRAIN[@]}" --threads 2 --steps 6 --checkpoint-every 0 \
        --stop-at 3 --out "$TMP/det_b" >/dev/null 2>&1 || { echo "first half failed"; return 1; }
    "${det[@]}" "$BIN/tessera-train" --out "$TMP/det_b" --resume --threads 2 >/dev/null 2>&1 ||
        { echo "resume failed"; return 1; }
    local a=$TMP/det_a/$(cat "$TMP/det_a/latest") b=$TMP/det_b/$(cat "$TMP/det_b/latest")
    cmp "$a/model.safetensors" "$b/model.safetensors" || return 1
    cmp <(sed 's/run [0-9a-f]*/run/' "$a/train.state") <(sed 's/run [0-9a-f]*/run/' "$b/train.state")
}
check deterministic_resume_is_bitwise bitwise_resume

finish
