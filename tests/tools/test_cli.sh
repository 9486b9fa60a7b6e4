#!/usr/bin/env bash
# tests/tools/test_cli.sh TOOLS_DIR — the GPT-2 programs end to end on a tiny
# model: tokenize, train, an interrupted run resumed to the same model as an
# uninterrupted one (the same validation loss to 4 decimals: gradient sums in
# COMMUTE groups run in completion order, so the bytes may differ in the last
# place), eval and generate on the
# checkpoint, and clear failures (exit 2 for usage, 1 otherwise) on bad input.
# Prints a Criterion-style synthesis line for tests/run-suite.sh.
set -u
BIN=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export TESSERA_BIND=0
passed=0
failed=0
check() { # name, then the command; passes when it exits 0
    local name=$1
    shift
    if "$@" >"$TMP/out.log" 2>&1; then
        passed=$((passed + 1))
        echo "[PASS] cli::$name"
    else
        failed=$((failed + 1))
        echo "[FAIL] cli::$name"
        sed 's/^/    /' "$TMP/out.log"
    fi
}
exits() { # expected status, then the command
    local want=$1
    shift
    "$@"
    local got=$?
    [ "$got" = "$want" ] || { echo "exit status $got, expected $want"; return 1; }
}

for i in $(seq 1 400); do
    echo "line $i: the quick brown fox jumps over the lazy dog, $((i * 7919 % 1000)) times."
done >"$TMP/corpus.txt"
MODEL=(--vocab 257 --layers 2 --heads 2 --channels 32 --context 32 --seq 32 --batch 4
       --micro-batch 2 --lr 3e-3 --warmup 2 --threads 1 --log-every 1)

check tokenize "$BIN/tessera-tokenize" --val-fraction 0.1 "$TMP/corpus.txt" -o "$TMP/c"
check train_uninterrupted "$BIN/tessera-train" --data "$TMP/c_train.bin" "${MODEL[@]}" \
    --steps 8 --out "$TMP/a"
check train_first_half "$BIN/tessera-train" --data "$TMP/c_train.bin" "${MODEL[@]}" \
    --steps 8 --stop-at 4 --out "$TMP/b"
check train_resumed "$BIN/tessera-train" --out "$TMP/b" --resume
evaluate() {
    "$BIN/tessera-eval" --checkpoint "$1/model.safetensors" --data "$TMP/c_val.bin" --batch 2 \
        --seq 32 --threads 1 | grep '^loss'
}
same_eval() {
    local a b
    a=$(evaluate "$TMP/a") && b=$(evaluate "$TMP/b") || return 1
    echo "uninterrupted: $a"
    echo "resumed:       $b"
    [ -n "$a" ] && [ "$a" = "$b" ]
}
check resume_reproduces_the_run same_eval
check eval_prints_the_loss bash -c "'$BIN/tessera-eval' --checkpoint '$TMP/a/model.safetensors' \
    --data '$TMP/c_val.bin' --batch 2 --seq 32 --threads 1 | grep -q '^loss [0-9.]* over'"
check generate_samples bash -c "'$BIN/tessera-generate' --checkpoint '$TMP/a/model.safetensors' \
    --prompt 'line ' --tokens 20 --top-k 5 --seed 3 --threads 1 | grep -q 'line '"
check unknown_flag_is_a_usage_error exits 2 "$BIN/tessera-train" --data x --no-such-flag
check missing_data_file_fails exits 1 "$BIN/tessera-train" --data "$TMP/none.bin" "${MODEL[@]}"
printf 'not a checkpoint' >"$TMP/junk.safetensors"
check corrupt_checkpoint_fails exits 1 "$BIN/tessera-eval" --checkpoint "$TMP/junk.safetensors" \
    --data "$TMP/c_val.bin"
check text_is_not_a_shard exits 1 "$BIN/tessera-eval" --checkpoint "$TMP/a/model.safetensors" \
    --data "$TMP/corpus.txt"

echo "[====] Synthesis: Tested: $((passed + failed)) | Passing: $passed | Failing: $failed | Crashing: 0"
[ "$failed" = 0 ]
