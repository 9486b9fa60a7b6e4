#!/usr/bin/env bash
# tests/mpi/dp_agree.sh TOOLS_DIR CASE — tessera-train's ranks agree on the
# run before training (tools/agree.h), under mpirun on 2 ranks, a tiny model.
# In every case the job must end within 30 s (not at the MPI timeout of
# 300 s, not by an MPI abort), each rank with the exit status given (each
# rank runs through a wrapper that records its own), and each rank must
# print the line naming the first differing rank and field. CASE:
#  missing_shard  a ZeRO checkpoint without train.state.1, --resume: rank 1
#                 says its shard is missing, rank 0 that rank 1 has a missing
#                 shard; both exit 1; the run folder is unchanged
#  foreign_shard  train.state.1 replaced by rank 0's train.state: both
#                 exit 1, naming rank 1's state as shard 0, not its own
#  stale_shard    train.state.1 of the run's previous checkpoint (step 1)
#                 in the checkpoint of step 2: rank 1 cannot load it (its
#                 optimizer is of step 1); both exit 1, naming it
#  other_run      train.state.1 of another run's checkpoint of the same
#                 step: both exit 1, naming the other run's id
#  flags          an MPMD launch whose ranks differ in --seed, --lr,
#                 --channels or --layers (one launch each): both exit 1,
#                 naming rank 1 and the flag with both values
#  llama_flags    the same for a Llama (--arch llama) whose ranks differ in
#                 --kv-heads, --head-dim or --intermediate
#  resume_step    rank 0 resumes a run at step 2, rank 1 another at step 3:
#                 both exit 1, naming the resume step
#  usage          rank 1 given a bad flag: rank 1 exits 2 with its usage
#                 error, rank 0 exits 1 saying rank 1 cannot start, naming it
set -u
BIN=$1
CASE=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export TESSERA_BIND=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset TESSERA_SIMULATE TESSERA_MPI_TIMEOUT
fail() {
    echo "FAIL: $CASE: $*"
    exit 1
}

. "$(dirname "$0")/../tools/corpus.sh"
tiny_corpus_tokenized || exit 1
MODEL=(--data "$TMP/c_train.bin" --vocab 257 --layers 2 --heads 2 --channels 32 --context 32
       --seq 32 --lr 3e-3 --warmup 2 --threads 1 --steps 4 --batch 2 --micro-batch 1)
TRAIN=$BIN/tessera-train

# Each rank runs through this wrapper, which records the rank's exit status.
cat >"$TMP/rank.sh" <<'EOF'
#!/usr/bin/env bash
"$@"
rc=$?
echo $rc >"$RANK_DIR/rank-$OMPI_COMM_WORLD_RANK"
exit $rc
EOF
chmod +x "$TMP/rank.sh"
export RANK_DIR=$TMP/ranks

# A fixture run on 2 ranks (must succeed).
setup() { # OUT, then flags
    local out=$1
    shift
    mpirun --oversubscribe -np 2 "$TRAIN" "${MODEL[@]}" --out "$out" "$@" \
        >"$TMP/setup.log" 2>&1 || { cat "$TMP/setup.log"; fail "the fixture run failed"; }
}

# launch MPIRUN-ARGS...: the job, twice, each under a 50 s limit and
# required to end within 30 s. First with every rank ending on its own
# (mpirun would otherwise kill the others, wrapper and all, as soon as one
# exits non-zero, before they record their status; mpirun then exits 0):
# its log in $TMP/job.log, each rank's status in $TMP/ranks/rank-R. Then as
# a user runs it: mpirun's status in $JOB.
launch() {
    local t0 took abort
    for abort in 0 1; do
        rm -rf "$RANK_DIR"
        mkdir -p "$RANK_DIR"
        t0=$SECONDS
        OMPI_MCA_orte_abort_on_non_zero_status=$abort timeout 50 mpirun --oversubscribe "$@" \
            >"$TMP/job$abort.log" 2>&1
        JOB=$?
        took=$((SECONDS - t0))
        echo "--- $CASE: mpirun (abort on non-zero status: $abort) exit $JOB after ${took}s:"
        cat "$TMP/job$abort.log"
        [ "$JOB" != 124 ] || fail "the job did not end within 50 s (a rank waits for a peer)"
        [ "$took" -le 30 ] || fail "the job took ${took}s: the ranks did not fail fast"
        [ $abort = 1 ] || cp -r "$RANK_DIR" "$TMP/ranks0"
    done
    cp "$TMP/job0.log" "$TMP/job.log"
    rm -rf "$RANK_DIR"
    mv "$TMP/ranks0" "$RANK_DIR"
}
# rank_status R WANT: rank R exited with WANT
rank_status() {
    local got
    got=$(cat "$RANK_DIR/rank-$1" 2>/dev/null) || fail "rank $1 recorded no exit status"
    [ "$got" = "$2" ] || fail "rank $1 exited with $got, expected $2"
}
# both_say TEXT: the line of each rank (rank R of 2: ...) holds TEXT
both_say() {
    for r in 0 1; do
        grep -F "tessera-train: rank $r of 2: " "$TMP/job.log" | grep -qF -- "$1" ||
            fail "rank $r did not say: $1"
    done
}
# a folder's every entry (type, name, size, modification time) and checksums
snapshot() {
    (cd "$1" && find . -printf '%y %p %s %T@\n' | LC_ALL=C sort &&
        find . -type f -exec sha256sum {} + | LC_ALL=C sort -k2)
}
# resume_refused OUT TEXT: --resume on 2 ranks fails on both with exit 1,
# each saying TEXT, and leaves OUT as it was
resume_refused() {
    local before
    before=$(snapshot "$1")
    launch -np 2 "$TMP/rank.sh" "$TRAIN" --out "$1" --resume
    [ "$JOB" = 1 ] || fail "mpirun exited with $JOB, expected 1"
    rank_status 0 1
    rank_status 1 1
    both_say "$2"
    [ "$(snapshot "$1")" = "$before" ] || fail "the refused run changed '$1'"
}

case $CASE in
missing_shard)
    setup "$TMP/a" --zero 1 --stop-at 2
    rm "$TMP/a/step-00000002/train.state.1"
    resume_refused "$TMP/a" "rank 1 has a missing shard"
    grep -qF "rank 1's optimizer state '$TMP/a/step-00000002/train.state.1' is missing" \
        "$TMP/job.log" || fail "rank 1 did not name its missing file"
    ;;
foreign_shard)
    setup "$TMP/a" --zero 1 --stop-at 2
    cp "$TMP/a/step-00000002/train.state" "$TMP/a/step-00000002/train.state.1"
    resume_refused "$TMP/a" \
        "rank 1's optimizer state '$TMP/a/step-00000002/train.state.1' is shard 0, written by rank 0, not its own (shard 1)"
    ;;
stale_shard)
    setup "$TMP/a" --zero 1 --stop-at 1
    cp "$TMP/a/step-00000001/train.state.1" "$TMP/old.state"
    mpirun --oversubscribe -np 2 "$TRAIN" --out "$TMP/a" --resume --stop-at 2 \
        >"$TMP/setup.log" 2>&1 || { cat "$TMP/setup.log"; fail "the second fixture run failed"; }
    cp "$TMP/old.state" "$TMP/a/step-00000002/train.state.1"
    resume_refused "$TMP/a" "rank 1 cannot start ('$TMP/a/step-00000002/train.state.1' says step 2 but holds the optimizer of step 1"
    ;;
other_run)
    setup "$TMP/a" --zero 1 --stop-at 2
    setup "$TMP/b" --zero 1 --stop-at 2 --seed 7
    cp "$TMP/b/step-00000002/train.state.1" "$TMP/a/step-00000002/train.state.1"
    other=$(grep -a -o 'run [0-9a-f]\{16\}' "$TMP/b/step-00000002/train.state.1" | head -1)
    [ -n "$other" ] || fail "the shard of run b records no run id"
    resume_refused "$TMP/a" "rank 1's optimizer state '$TMP/a/step-00000002/train.state.1' belongs to ${other}, not to this run"
    ;;
flags)
    for d in "--seed 1|--seed 2|--seed 2, rank 0 has 1" \
             "--lr 3e-3|--lr 1e-3|--lr 0.001, rank 0 has 0.003" \
             "--channels 32|--channels 64|--channels 64, rank 0 has 32" \
             "--layers 2|--layers 3|--layers 3, rank 0 has 2"; do
        IFS='|' read -r zero one want <<<"$d"
        # shellcheck disable=SC2086
        launch -np 1 "$TMP/rank.sh" "$TRAIN" "${MODEL[@]}" $zero : \
               -np 1 "$TMP/rank.sh" "$TRAIN" "${MODEL[@]}" $one
        [ "$JOB" = 1 ] || fail "$one: mpirun exited with $JOB, expected 1"
        rank_status 0 1
        rank_status 1 1
        both_say "the ranks disagree: rank 1 has $want"
        grep -q "^step " "$TMP/job.log" && fail "$one: a step was trained"
    done
    ;;
llama_flags)
    LLAMA=(--data "$TMP/c_train.bin" --arch llama --vocab 257 --layers 2 --heads 4 --hidden 32
           --max-positions 32 --seq 32 --lr 3e-3 --warmup 2 --threads 1 --steps 4 --batch 2
           --micro-batch 1)
    for d in "--kv-heads 2|--kv-heads 1|--kv-heads 1, rank 0 has 2" \
             "--head-dim 8|--head-dim 16|--head-dim 16, rank 0 has 8" \
             "--intermediate 64|--intermediate 96|--intermediate 96, rank 0 has 64"; do
        IFS='|' read -r zero one want <<<"$d"
        # shellcheck disable=SC2086
        launch -np 1 "$TMP/rank.sh" "$TRAIN" "${LLAMA[@]}" $zero : \
               -np 1 "$TMP/rank.sh" "$TRAIN" "${LLAMA[@]}" $one
        [ "$JOB" = 1 ] || fail "$one: mpirun exited with $JOB, expected 1"
        rank_status 0 1
        rank_status 1 1
        both_say "the ranks disagree: rank 1 has $want"
        grep -q "^step " "$TMP/job.log" && fail "$one: a step was trained"
    done
    ;;
resume_step)
    setup "$TMP/a" --stop-at 2
    setup "$TMP/b" --stop-at 3
    launch -np 1 "$TMP/rank.sh" "$TRAIN" --out "$TMP/a" --resume : \
           -np 1 "$TMP/rank.sh" "$TRAIN" --out "$TMP/b" --resume
    [ "$JOB" = 1 ] || fail "mpirun exited with $JOB, expected 1"
    rank_status 0 1
    rank_status 1 1
    both_say "the ranks disagree: rank 1 has the resume step 3, rank 0 has 2"
    ;;
usage)
    launch -np 1 "$TMP/rank.sh" "$TRAIN" "${MODEL[@]}" : \
           -np 1 "$TMP/rank.sh" "$TRAIN" "${MODEL[@]}" --batch 0
    [ "$JOB" != 0 ] || fail "mpirun exited with 0"
    rank_status 0 1
    rank_status 1 2
    both_say "rank 1 cannot start (--batch needs an integer in [1, 1000000], not '0' (see --help))"
    ;;
*)
    fail "unknown case"
    ;;
esac
echo "$CASE: every rank stopped within seconds, naming the rank and the field"
echo "[====] Synthesis: Tested: 1 | Passing: 1 | Failing: 0 | Crashing: 0"
