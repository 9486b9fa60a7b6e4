#!/usr/bin/env bash
# tests/mpi/dp_resume.sh TOOLS_DIR — tessera-train under mpirun -np 2, with
# and without ZeRO-1 (--zero 1), on a tiny model:
#  - the data-parallel run's losses equal those of one process training on
#    the combined batch (--batch and --micro-batch times 2), to the 4
#    decimals of the log: the ranks' slices together are that batch;
#  - a run stopped at step 2 (--stop-at) and resumed with --resume on 2
#    ranks logs the same losses for steps 3 and 4 as the uninterrupted run
#    and ends at a model of the same validation loss (4 decimals, as
#    tests/tools/test_checkpoint_faults.sh compares);
#  - with ZeRO the checkpoint holds rank 1's share (train.state.1) and no
#    shard is left outside it;
#  - --resume on 3 ranks is refused (exit 1) and says how many it needs.
set -u
BIN=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export TESSERA_BIND=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --oversubscribe)
fail() {
    echo "FAIL: $*"
    exit 1
}

. "$(dirname "$0")/../tools/corpus.sh"
tiny_corpus_tokenized || exit 1
MODEL=(--data "$TMP/c_train.bin" --vocab 257 --layers 2 --heads 2 --channels 32 --context 32
       --seq 32 --lr 3e-3 --warmup 2 --threads 1 --steps 4)
# the step losses of a log, one per line: "3 5.1234"
losses() { sed -n 's/^step *\([0-9]*\)\/[0-9]* | loss \([0-9.]*\) .*/\1 \2/p' "$1"; }
evaluate() {
    "$BIN/tessera-eval" --checkpoint "$1" --data "$TMP/c_val.bin" --batch 2 --seq 32 \
        --threads 1 | grep '^loss'
}

"$BIN/tessera-train" "${MODEL[@]}" --batch 4 --micro-batch 2 --out "$TMP/one" \
    >"$TMP/one.log" 2>&1 || { cat "$TMP/one.log"; fail "one process"; }
for zero in 0 1; do
    run=(--batch 2 --micro-batch 1 --zero $zero)
    "${MPIRUN[@]}" -np 2 "$BIN/tessera-train" "${MODEL[@]}" "${run[@]}" --out "$TMP/a$zero" \
        >"$TMP/a$zero.log" 2>&1 || { cat "$TMP/a$zero.log"; fail "zero $zero: 2 ranks"; }
    grep -q "data parallel: 2 ranks" "$TMP/a$zero.log" || fail "zero $zero: no data-parallel line"
    [ "$(losses "$TMP/a$zero.log")" = "$(losses "$TMP/one.log")" ] ||
        fail "zero $zero: 2 ranks log $(losses "$TMP/a$zero.log" | tr '\n' ' '), one process" \
             "on the combined batch $(losses "$TMP/one.log" | tr '\n' ' ')"
    echo "zero $zero: 2 ranks train as one process on the combined batch:" \
         "$(losses "$TMP/a$zero.log" | tr '\n' ' ')"

    "${MPIRUN[@]}" -np 2 "$BIN/tessera-train" "${MODEL[@]}" "${run[@]}" --stop-at 2 \
        --out "$TMP/b$zero" >"$TMP/b$zero.log" 2>&1 || { cat "$TMP/b$zero.log"; fail "stop"; }
    latest=$(cat "$TMP/b$zero/latest")
    if [ $zero = 1 ]; then
        [ -f "$TMP/b$zero/$latest/train.state.1" ] || fail "no train.state.1 in $latest"
    fi
    if ls -A "$TMP/b$zero" | grep -q '^\.shard-'; then fail "a shard was left outside"; fi
    "${MPIRUN[@]}" -np 3 "$BIN/tessera-train" --out "$TMP/b$zero" --resume \
        >"$TMP/n3.log" 2>&1 && fail "zero $zero: --resume on 3 ranks was accepted"
    grep -q "saved by a job of 2 ranks; resume it with 2" "$TMP/n3.log" ||
        { cat "$TMP/n3.log"; fail "zero $zero: no clear refusal of 3 ranks"; }
    "${MPIRUN[@]}" -np 2 "$BIN/tessera-train" --out "$TMP/b$zero" --resume \
        >"$TMP/r$zero.log" 2>&1 || { cat "$TMP/r$zero.log"; fail "zero $zero: resume"; }
    want=$(losses "$TMP/a$zero.log" | tail -2)
    got=$(losses "$TMP/r$zero.log")
    [ "$got" = "$want" ] || fail "zero $zero: resumed steps $got, uninterrupted $want"
    [ "$(evaluate "$TMP/b$zero")" = "$(evaluate "$TMP/a$zero")" ] ||
        fail "zero $zero: resumed model $(evaluate "$TMP/b$zero"), uninterrupted" \
             "$(evaluate "$TMP/a$zero")"
    echo "zero $zero: resumed on 2 ranks as uninterrupted ($(evaluate "$TMP/a$zero"))," \
         "3 ranks refused"
done
echo "[====] Synthesis: Tested: 2 | Passing: 2 | Failing: 0 | Crashing: 0"
