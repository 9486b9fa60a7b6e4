#!/usr/bin/env bash
# tests/tools/test_llama.sh TOOLS_DIR MAKE_SHARD FIXTURE PLATFORMS_DIR HAVE_CUDA —
# the programs with a Llama (--arch llama; tessera-sim llama) end to end on
# the tiny GQA fixture (2 layers, 6 heads, 2 K/V heads, vocabulary 97):
# training from the fixture's weights lowers the loss, from a config.json
# or shape flags (with recompute, bf16) it runs; a run stopped half-way and
# resumed gives the same model as one never interrupted (the same
# evaluation), also when killed at any action of its saves; a changed
# model is refused on resume; tessera-eval's loss is the training run's final validation
# loss on the same windows; tessera-sim llama runs a tiny shape on every
# platform file (the GPU ones where the build has CUDA sources) and the
# Llama 3 8B preset; bad flags are usage errors (exit 2) naming the flag.
# Prints a Criterion-style synthesis line for tests/run-suite.sh.
set -u
BIN=$1
MAKE_SHARD=$2
FIX=$3
PLAT=$4
HAVE_CUDA=${5:-0}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export TESSERA_BIND=0
SUITE=llama
. "$(dirname "$0")/lib.sh"

check make_shards bash -c "'$MAKE_SHARD' '$TMP/train.bin' 6000 97 1 &&
    '$MAKE_SHARD' '$TMP/val.bin' 1500 97 2"
RUN=(--arch llama --seq 16 --batch 4 --micro-batch 2 --lr 3e-3 --warmup 1 --threads 1
     --log-every 1)

# the loss of step N in a log
loss_at() { sed -n "s/^step *$1\/[0-9]* | loss \([0-9.]*\) .*/\1/p" "$2"; }
loss_falls() {
    "$BIN/tessera-train" "${RUN[@]}" --init "$FIX" --data "$TMP/train.bin" --steps 10 \
        --out "$TMP/a" >"$TMP/a.log" || { cat "$TMP/a.log"; return 1; }
    local first last
    first=$(loss_at 1 "$TMP/a.log") last=$(loss_at 10 "$TMP/a.log")
    echo "loss $first -> $last"
    [ -n "$first" ] && [ -n "$last" ] && awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.5) }'
}
check train_from_the_fixture_lowers_the_loss loss_falls
hf_folder() {
    [ -f "$TMP/a/step-00000010/model/config.json" ] &&
        [ -f "$TMP/a/step-00000010/model/model.safetensors" ] &&
        [ -f "$TMP/a/step-00000010/train.state" ] && [ "$(cat "$TMP/a/latest")" = step-00000010 ]
}
check checkpoint_is_an_hf_folder_beside_the_state hf_folder
# the checkpoint's folder starts another run (--init DIR of the run's own kind)
check init_from_a_saved_checkpoint "$BIN/tessera-train" "${RUN[@]}" \
    --init "$TMP/a/step-00000010/model" --data "$TMP/train.bin" --steps 2 --out "$TMP/i"
check train_from_config_json "$BIN/tessera-train" "${RUN[@]}" --config "$FIX/config.json" \
    --data "$TMP/train.bin" --steps 3 --recompute
check train_from_shape_flags_bf16 "$BIN/tessera-train" "${RUN[@]}" --vocab 97 --layers 2 \
    --hidden 32 --heads 4 --kv-heads 2 --intermediate 64 --max-positions 32 --rope-theta 500000 \
    --precision bf16 --data "$TMP/train.bin" --steps 3

# resumed = uninterrupted
check train_uninterrupted "$BIN/tessera-train" "${RUN[@]}" --init "$FIX" \
    --data "$TMP/train.bin" --steps 8 --out "$TMP/u"
check train_first_half "$BIN/tessera-train" "${RUN[@]}" --init "$FIX" \
    --data "$TMP/train.bin" --steps 8 --stop-at 4 --out "$TMP/h"
# no --arch: a resumed run is of its checkpoint's family
check train_resumed "$BIN/tessera-train" --out "$TMP/h" --resume --threads 1
evaluate() {
    "$BIN/tessera-eval" --arch llama --checkpoint "$1" --data "$TMP/val.bin" --batch 2 \
        --seq 16 --threads 1 | grep '^loss'
}
same_eval() {
    local a b
    a=$(evaluate "$TMP/u") && b=$(evaluate "$TMP/h") || return 1
    echo "uninterrupted: $a"
    echo "resumed:       $b"
    [ -n "$a" ] && [ "$a" = "$b" ]
}
check resume_reproduces_the_run same_eval

# kill -9 at every action of every save (TESSERA_FAULT_AT=kill:N, fault.h;
# as tests/tools/test_checkpoint_faults.sh for GPT-2): `latest` names a
# complete checkpoint (or none before the first save), and --resume
# continues from it to the model of a run never interrupted, leaving
# nothing but `latest` and its checkpoint
KILL=("${RUN[@]}" --init "$FIX" --data "$TMP/train.bin" --steps 3 --checkpoint-every 1)
check kill_reference "$BIN/tessera-train" "${KILL[@]}" --out "$TMP/kref"
KREF=$(evaluate "$TMP/kref")
kill_case() {
    local n=$1 out=$TMP/kill$1 rc got
    TESSERA_FAULT_AT=kill:$n "$BIN/tessera-train" "${KILL[@]}" --out "$out" >"$TMP/run.log" 2>&1
    rc=$?
    echo "$rc" >"$TMP/kill.rc"
    [ "$rc" = 0 ] && return 0 # past the last action
    [ "$rc" = 137 ] || { echo "exit $rc, expected 137"; cat "$TMP/run.log"; return 1; }
    if [ ! -f "$out/latest" ]; then
        ! grep -q 'checkpoint saved' "$TMP/run.log" || { echo "a save, but no latest"; return 1; }
        echo none >>"$TMP/kill.seen"
        return 0
    fi
    "$BIN/tessera-train" --out "$out" --resume --threads 1 >"$TMP/resume.log" 2>&1 ||
        { cat "$TMP/resume.log"; return 1; }
    got=$(evaluate "$out") || return 1
    [ "$got" = "$KREF" ] || { echo "resumed: $got, uninterrupted: $KREF"; return 1; }
    [ -z "$(cd "$out" && ls -A | grep -v -x -e latest -e "$(cat latest)")" ] ||
        { echo "left over: $(ls -A "$out")"; return 1; }
    echo resumed >>"$TMP/kill.seen"
}
: >"$TMP/kill.seen"
n=1
while [ $n -le 100 ]; do
    check "kill_at_save_action_$n" kill_case $n
    [ "$(cat "$TMP/kill.rc")" = 0 ] && break
    n=$((n + 1))
done
check every_save_action_was_killed test "$(cat "$TMP/kill.rc")" = 0 -a $n -gt 10
check kills_resumed grep -q resumed "$TMP/kill.seen"
# a changed byte in the model folder: the state's checksum refuses the pair
changed_model() {
    cp -r "$TMP/kref" "$TMP/changed" || return 1
    local f="$TMP/changed/$(cat "$TMP/changed/latest")/model/model.safetensors"
    printf '\x01' | dd of="$f" bs=1 seek=$(($(stat -c %s "$f") - 1)) conv=notrunc 2>/dev/null
    says "does not match" "$BIN/tessera-train" --out "$TMP/changed" --resume --threads 1
}
check resume_refuses_a_changed_model changed_model

# tessera-eval on the windows of training's validation (its micro-batch of
# 2 x 16, the first --eval-batches of them): the same loss
eval_matches_training() {
    "$BIN/tessera-train" "${RUN[@]}" --init "$FIX" --data "$TMP/train.bin" --val "$TMP/val.bin" \
        --eval-batches 5 --steps 4 --out "$TMP/v" >"$TMP/v.log" || { cat "$TMP/v.log"; return 1; }
    local t e
    t=$(sed -n 's/^step *4\/4 | val loss \([0-9.]*\) .*/\1/p' "$TMP/v.log")
    e=$("$BIN/tessera-eval" --arch llama --checkpoint "$TMP/v" --data "$TMP/val.bin" \
        --batch 2 --seq 16 --max-batches 5 --threads 1 | sed -n 's/^loss \([0-9.]*\) .*/\1/p')
    echo "training's validation: $t, tessera-eval: $e"
    [ -n "$t" ] && [ "$t" = "$e" ]
}
check eval_gives_training_validation_loss eval_matches_training
check eval_an_hf_folder bash -c "'$BIN/tessera-eval' --arch llama --checkpoint '$FIX' \
    --data '$TMP/val.bin' --batch 2 --seq 16 --threads 1 | grep -q '^loss [0-9.]* over'"

# bad flags: usage errors (exit 2) that name the problem, no crash
usage() { # expected text, then the command (which must exit 2)
    local want=$1
    shift
    "$@" >"$TMP/usage.log" 2>&1
    local got=$?
    cat "$TMP/usage.log"
    [ "$got" = 2 ] && grep -q -- "$want" "$TMP/usage.log"
}
check kv_heads_not_dividing_heads usage "--kv-heads 4 does not divide --heads 6" \
    "$BIN/tessera-train" "${RUN[@]}" --config "$FIX" --kv-heads 4 --data "$TMP/train.bin"
check unknown_arch usage "--arch: gpt2 or llama, not 'mamba'" \
    "$BIN/tessera-train" --arch mamba --data "$TMP/train.bin"
check eval_unknown_arch usage "--arch: gpt2 or llama" \
    "$BIN/tessera-eval" --arch mamba --checkpoint "$FIX" --data "$TMP/val.bin"
check gpt2_flag_with_llama usage "a Llama's is --hidden" \
    "$BIN/tessera-train" --arch llama --channels 64 --data "$TMP/train.bin"
check llama_flag_with_gpt2 usage "--kv-heads is a Llama flag" \
    "$BIN/tessera-train" --kv-heads 2 --data "$TMP/train.bin"
check config_with_gpt2 usage "--config is for a Llama" \
    "$BIN/tessera-train" --config "$FIX" --data "$TMP/train.bin"
check resume_llama_run_as_gpt2 says "is the run of a llama" \
    "$BIN/tessera-train" --arch gpt2 --out "$TMP/h" --resume --threads 1
check vocabulary_too_small says "token id" \
    "$BIN/tessera-train" "${RUN[@]}" --config "$FIX" --vocab 50 --data "$TMP/train.bin"

# tessera-sim llama: a tiny shape on every platform file, one JSON line each
SIM="$BIN/tessera-sim"
TINY=(llama --config "$FIX" --batch 2 --seq 16 --micro 2 --steps 2)
sim_every_platform() {
    local p n=0 out
    for p in "$PLAT"/*.json; do
        # GPU platforms run the CUDA codelets (native or emulated)
        if [ "$HAVE_CUDA" != 1 ] && grep -q '"cuda"' "$p"; then continue; fi
        out=$("$SIM" --platform "$p" "${TINY[@]}" 2>&1) || { echo "$p:"; echo "$out"; return 1; }
        echo "$out" | grep -q '^{"bench":"sim-llama".*"fits":true' ||
            { echo "$p:"; echo "$out"; return 1; }
        n=$((n + 1))
    done
    echo "$n platforms"
    [ "$n" -gt 0 ]
}
check sim_llama_on_every_platform sim_every_platform
field() { sed -n 's/.*"'"$1"'":\([^,}]*\).*/\1/p'; }
preset_8b() {
    local j
    j=$("$SIM" --platform "$PLAT/dgx-a100.json" --precision bf16 llama --preset llama3-8b \
        --batch 1 --seq 1024 --recompute | grep '^{') || return 1
    echo "$j"
    # 8.03 B parameters (the untied head counted)
    [ "$(echo "$j" | field params)" = 8030261248 ] && echo "$j" | grep -q '"fits":true'
}
if [ "$HAVE_CUDA" = 1 ]; then
    check sim_llama3_8b_preset preset_8b
fi
check sim_unknown_preset usage "--preset: llama3-8b or llama2-70b" \
    "$SIM" --platform "$PLAT/h100.json" llama --preset llama9
check sim_kv_heads_not_dividing_heads usage "does not divide" \
    "$SIM" --platform "$PLAT/h100.json" llama --heads 8 --kv-heads 3
check sim_llama_flag_with_gpt2 usage "--hidden is a Llama flag" \
    "$SIM" --platform "$PLAT/h100.json" gpt2 --hidden 64
check sim_unknown_model usage "gpt2 or llama" "$SIM" --platform "$PLAT/h100.json" mamba
finish
