#!/usr/bin/env bash
# tests/tools/test_simulate_refused.sh TOOLS_DIR PLATFORMS_DIR — the programs
# that read or write real checkpoints and results refuse to run under
# TESSERA_SIMULATE: a simulated run has phantom data (zeros), so a simulated
# tessera-train would save zeros over a real run, and tessera-eval and
# tessera-generate would print losses and text of zeros. For each of
# tessera-train (--resume, and a fresh run), tessera-eval and
# tessera-generate under TESSERA_SIMULATE=PLATFORMS_DIR/h100.json (and the
# CPU platform, which this build can simulate):
#  - exit 2 (the invocation is not a valid use) and a message saying that a
#    simulated run has no real data and to use tessera-sim;
#  - no result printed on standard output;
#  - nothing on disk changed: every file of the run folder, `latest` among
#    them, byte for byte, and every name, size and modification time; a fresh
#    run's --out folder is not created.
# And TESSERA_SIMULATE set but empty is no simulation (as for the runtime):
# the programs run.
# Prints a Criterion-style synthesis line for tests/run-suite.sh.
set -u
BIN=$1
PLATFORMS=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export TESSERA_BIND=0
unset TESSERA_SIMULATE TESSERA_SIMULATE_EXEC
SUITE=simulate_refused
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/corpus.sh"
tiny_corpus_tokenized || exit 1
TRAIN=(--data "$TMP/c_train.bin" --vocab 257 --layers 2 --heads 2 --channels 32 --context 32
       --seq 32 --batch 2 --lr 3e-3 --warmup 1 --threads 1 --steps 4)
# a real run: stopped at step 2, so that --resume has work to do
"$BIN/tessera-train" "${TRAIN[@]}" --stop-at 2 --out "$TMP/run" >"$TMP/run.log" 2>&1 || {
    cat "$TMP/run.log"
    exit 1
}

# Every entry of a folder: type, name, size, modification time; then every
# file's SHA-256.
snapshot() {
    (cd "$1" && find . -printf '%y %p %s %T@\n' | LC_ALL=C sort &&
        find . -type f -exec sha256sum {} + | LC_ALL=C sort -k2)
}
BEFORE=$(snapshot "$TMP/run")

# refused CMD...: under $SIM, the command exits 2 with the refusal on
# stderr, prints nothing on stdout, and leaves the run folder as it was.
refused() {
    TESSERA_SIMULATE=$SIM "$@" >"$TMP/stdout" 2>"$TMP/stderr"
    local got=$?
    cat "$TMP/stdout" "$TMP/stderr"
    [ "$got" = 2 ] || { echo "exit status $got, expected 2"; return 1; }
    grep -q "simulated runs have no real data" "$TMP/stderr" ||
        { echo "no refusal on stderr"; return 1; }
    grep -q "use tessera-sim" "$TMP/stderr" || { echo "tessera-sim not named"; return 1; }
    [ ! -s "$TMP/stdout" ] || { echo "something was printed on stdout"; return 1; }
    [ "$(snapshot "$TMP/run")" = "$BEFORE" ] || {
        echo "the run folder changed:"
        diff <(echo "$BEFORE") <(snapshot "$TMP/run")
        return 1
    }
}
# a fresh run is refused before its --out folder is made
fresh_refused() {
    refused "$BIN/tessera-train" "${TRAIN[@]}" --out "$TMP/fresh" || return 1
    [ ! -e "$TMP/fresh" ] || { echo "'$TMP/fresh' was created"; return 1; }
}

for platform in h100 cpu-this-machine; do
    SIM=$PLATFORMS/$platform.json
    check "train_resume_refused_$platform" refused "$BIN/tessera-train" --out "$TMP/run" --resume
    check "train_fresh_refused_$platform" fresh_refused
    check "eval_refused_$platform" refused "$BIN/tessera-eval" --checkpoint "$TMP/run" \
        --data "$TMP/c_val.bin" --batch 2 --seq 32 --threads 1
    check "generate_refused_$platform" refused "$BIN/tessera-generate" --checkpoint "$TMP/run" \
        --prompt 'line ' --tokens 8 --threads 1
    check "generate_llama_refused_$platform" refused "$BIN/tessera-generate" --arch llama \
        --checkpoint "$TMP/run" --ids 1,2 --tokens 8 --threads 1
done

# TESSERA_SIMULATE= (empty) is the real machine, for these programs as for
# the runtime
empty_is_real() {
    TESSERA_SIMULATE= "$BIN/tessera-eval" --checkpoint "$TMP/run" --data "$TMP/c_val.bin" \
        --batch 2 --seq 32 --threads 1 | grep '^loss [0-9.]* over'
}
check empty_simulate_is_the_real_machine empty_is_real
finish
