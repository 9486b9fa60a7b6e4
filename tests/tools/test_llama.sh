#!/usr/bin/env bash
# tests/tools/test_llama.sh TOOLS_DIR MAKE_SHARD FIXTURE PLATFORMS_DIR HAVE_CUDA —
# the programs with a Llama (--arch llama; tessera-sim llama) end to end on
# the tiny GQA fixture (2 layers, 6 heads, 2 K/V heads, vocabulary 97):
# training from the fixture's weights lowers the loss, from a config.json
# or shape flags (with recompute, bf16) it runs; a run stopped half-way and
# resumed gives the same model as one never interrupted (the same
# evaluation), also when killed at any action of its saves; a changed
# model is refused on resume; tessera-eval's loss is the training run's final validation
# loss on the same windows; tessera-generate --arch llama decodes the
# reference's greedy ids from the fixture's prompts (tests/nn/fixtures/
# llama_tiny_gqa_generate.safetensors), samples reproducibly, stops at
# config.json's eos ids; tessera-train --save-dtype bf16 saves the rounding
# of the trained weights and resumes, --shard-bytes writes shards and an
# index; tessera-sim llama runs a tiny shape on every
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

# ---- tessera-generate --arch llama ----------------------------------------
# Greedy decoding of the fixture's prompts (given as ids) gives the ids of
# tools/llama_reference.py --generate (the fixture file: prompts, prompt
# lengths, the 16 generated ids of each), as a batch and one by one.
SRC=$(cd "$(dirname "$0")/../.." && pwd)
GENFIX=$SRC/tests/nn/fixtures/llama_tiny_gqa_generate.safetensors
PY=/usr/bin/python3
GEN=("$BIN/tessera-generate" --arch llama --threads 1)
# "ARGS|EXPECTED" per prompt: the --ids list, then the line tessera-generate
# prints; eos ids (optional, comma-separated) cut the expected ids before
# the first of them
reference() {
    "$PY" - "$SRC/tools" "$GENFIX" "${1:-}" <<'PYEOF'
import sys
sys.path.insert(0, sys.argv[1])
import safetensors_py
t, _ = safetensors_py.load(sys.argv[2])
eos = [int(x) for x in sys.argv[3].split(",") if x]
for i, (row, n, gen) in enumerate(zip(t["prompts"], t["prompt_lens"], t["generated"])):
    out = []
    for g in gen.tolist():
        if g in eos:
            break
        out.append(g)
    ids = ",".join(str(int(x)) for x in row[:n])
    print("%s|[%d]%s" % (ids, i, "".join(" %d" % g for g in out)))
PYEOF
}
reference >"$TMP/ref.txt"
NEW=$("$PY" -c "import sys; sys.path.insert(0, '$SRC/tools'); import safetensors_py; \
print(safetensors_py.load('$GENFIX')[0]['generated'].shape[1])")
ids_args() { sed 's/|.*//; s/^/--ids /' "$1" | tr '\n' ' '; }
greedy_batch() {
    # shellcheck disable=SC2046
    "${GEN[@]}" --checkpoint "$FIX" $(ids_args "$TMP/ref.txt") --tokens "$NEW" \
        --temperature 0 >"$TMP/got.txt" || return 1
    sed 's/^[^|]*|//' "$TMP/ref.txt" >"$TMP/want.txt"
    # a batch prints each sequence when it is done: in any order
    sort "$TMP/got.txt" | diff - <(sort "$TMP/want.txt")
}
check generate_greedy_batch_equals_the_reference greedy_batch
greedy_each() {
    local line ids want got
    while IFS='|' read -r ids want; do
        got=$("${GEN[@]}" --checkpoint "$FIX" --ids "$ids" --max-new "$NEW" --temperature 0) ||
            return 1
        want="[0]${want#\[*\]}"
        echo "got:  $got"
        echo "want: $want"
        [ "$got" = "$want" ] || return 1
    done <"$TMP/ref.txt"
}
check generate_greedy_one_prompt_equals_the_reference greedy_each
# sampling: the same seed, the same ids; another seed, other ids
FIRST=$(head -1 "$TMP/ref.txt" | sed 's/|.*//')
sampled() {
    "${GEN[@]}" --checkpoint "$FIX" --ids "$FIRST" --ids "$FIRST" --tokens 16 --top-k 20 \
        --top-p 0.95 --temperature 1.2 --seed "$1" | sort
}
same_seed_same_ids() {
    local a b c
    a=$(sampled 7) && b=$(sampled 7) && c=$(sampled 8) || return 1
    printf 'seed 7:\n%s\nagain:\n%s\nseed 8:\n%s\n' "$a" "$b" "$c"
    [ "$(echo "$a" | wc -l)" = 2 ] && [ "$a" = "$b" ] && [ "$a" != "$c" ] &&
        # the two sequences of a batch draw from their own generators
        [ "$(echo "$a" | sed -n 1p | cut -d' ' -f2-)" != "$(echo "$a" | sed -n 2p | cut -d' ' -f2-)" ]
}
check generate_sampling_is_reproducible_for_a_seed same_seed_same_ids
# eos_token_id of config.json, a list or one id: a sequence stops before it
with_eos() { # folder, eos JSON value
    cp -r "$FIX" "$1" &&
        "$PY" -c "import json, sys; p = sys.argv[1] + '/config.json'; c = json.load(open(p)); \
c['eos_token_id'] = json.loads(sys.argv[2]); json.dump(c, open(p, 'w'), indent=2)" "$1" "$2"
}
eos_stops() { # eos JSON value, the ids it lists (comma-separated)
    rm -rf "$TMP/eos"
    with_eos "$TMP/eos" "$1" || return 1
    reference "$2" | sed 's/^[^|]*|//' | sort >"$TMP/want.txt"
    # shellcheck disable=SC2046
    "${GEN[@]}" --checkpoint "$TMP/eos" $(ids_args "$TMP/ref.txt") --tokens "$NEW" \
        --temperature 0 2>"$TMP/eos.err" | sort >"$TMP/got.txt" || return 1
    cat "$TMP/got.txt"
    diff "$TMP/got.txt" "$TMP/want.txt" && ! cmp -s "$TMP/want.txt" <(sed 's/^[^|]*|//' "$TMP/ref.txt" | sort)
}
# ids the reference generates: row 0's 4th and row 2's 3rd
EOS_A=$(sed -n 1p "$TMP/ref.txt" | cut -d'|' -f2 | cut -d' ' -f5)
EOS_B=$(sed -n 3p "$TMP/ref.txt" | cut -d'|' -f2 | cut -d' ' -f4)
check generate_stops_at_an_eos_list eos_stops "[$EOS_A, $EOS_B]" "$EOS_A,$EOS_B"
check generate_stops_at_one_eos_id eos_stops "$EOS_B" "$EOS_B"
eos_reason() {
    "${GEN[@]}" --checkpoint "$TMP/eos" --ids "$(sed -n 3p "$TMP/ref.txt" | cut -d'|' -f1)" \
        --tokens "$NEW" --temperature 0 2>&1 | grep -q "stopped: end of text"
}
check generate_says_it_stopped_at_eos eos_reason
# a run folder of tessera-train (its latest checkpoint) and a step folder
check generate_from_a_run_folder bash -c "'$BIN/tessera-generate' --arch llama --threads 1 \
    --checkpoint '$TMP/a' --ids 1,2,3 --tokens 4 | grep -q '^\[0\]\( [0-9]*\)\{4\}$'"
check generate_from_a_step_folder bash -c "'$BIN/tessera-generate' --arch llama --threads 1 \
    --checkpoint '$TMP/a/step-00000010' --ids 5 --tokens 3 --temperature 0 | grep -q '^\[0\]'"
# text through a tokenizer.json (the fuzz corpus' small Llama 3 one, 302
# ids, after the fuzzer's leading flags byte): a model of its vocabulary, a
# prompt beginning with its BOS
JSON_TOK=$TMP/tokenizer.json
text_prompt() {
    tail -c +2 "$SRC/tests/fuzz/corpus/tokenizer_json/seed-json-llama3" >"$JSON_TOK" || return 1
    "$MAKE_SHARD" "$TMP/t302.bin" 3000 302 3 &&
        "$BIN/tessera-train" --arch llama --vocab 302 --layers 1 --hidden 32 --heads 4 \
            --kv-heads 2 --intermediate 64 --max-positions 32 --data "$TMP/t302.bin" --seq 16 \
            --batch 2 --steps 1 --threads 1 --out "$TMP/t302" >/dev/null || return 1
    local out
    out=$("$BIN/tessera-generate" --arch llama --threads 1 --checkpoint "$TMP/t302" \
        --vocab "$JSON_TOK" --prompt '<|begin_of_text|>hello' --tokens 5 --temperature 0) ||
        return 1
    echo "$out"
    printf '%s\n' "$out" | head -1 | grep -q '^<|begin_of_text|>hello'
}
check generate_a_text_prompt_with_a_tokenizer_json text_prompt
# bad flags: usage errors (exit 2) naming the problem
check generate_llama_bf16_refused usage "a Llama decodes from its fp32 weights only" \
    "${GEN[@]}" --checkpoint "$FIX" --ids 1,2 --bf16
check generate_text_without_tokenizer usage "a text prompt needs the Llama's tokenizer" \
    "${GEN[@]}" --checkpoint "$FIX" --prompt hello
check generate_bad_ids usage "not a list of token ids" \
    "${GEN[@]}" --checkpoint "$FIX" --ids 1,x,3
check generate_ids_and_prompt usage "--ids and --prompt exclude each other" \
    "${GEN[@]}" --checkpoint "$FIX" --ids 1 --prompt a
check generate_stop_without_tokenizer usage "--stop needs the Llama's tokenizer" \
    "${GEN[@]}" --checkpoint "$FIX" --ids 1 --stop x
check generate_unknown_arch usage "--arch: gpt2 or llama" \
    "$BIN/tessera-generate" --arch mamba --checkpoint "$FIX" --ids 1
check generate_id_outside_the_vocabulary says "token 97 is outside the checkpoint's vocabulary" \
    "${GEN[@]}" --checkpoint "$FIX" --ids 1,97

# ---- tessera-train --save-dtype, --shard-bytes (a Llama's folder) ----------
SAVE=("${RUN[@]}" --init "$FIX" --data "$TMP/train.bin" --steps 3)
# the bf16 folder holds the fp32 run's weights rounded to nearest even
bf16_is_the_rounding() {
    "$BIN/tessera-train" "${SAVE[@]}" --out "$TMP/s32" >/dev/null &&
        "$BIN/tessera-train" "${SAVE[@]}" --save-dtype bf16 --out "$TMP/s16" >/dev/null ||
        return 1
    "$PY" - "$SRC/tools" "$TMP/s32/step-00000003/model" "$TMP/s16/step-00000003/model" <<'PYEOF'
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import safetensors_py
a, _ = safetensors_py.load(sys.argv[2] + "/model.safetensors")
b, _ = safetensors_py.load(sys.argv[3] + "/model.safetensors")
hdr = safetensors_py.read_header(sys.argv[3] + "/model.safetensors")
hdr = hdr[0] if isinstance(hdr, tuple) else hdr
dtypes = {v["dtype"] for k, v in hdr.items() if k != "__metadata__"}
assert dtypes == {"BF16"}, dtypes
assert sorted(a) == sorted(b), "other tensors"
for k in a:
    x = np.ascontiguousarray(a[k], dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = (((x + 0x7FFF + ((x >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
    assert a[k].shape == b[k].shape, k
    assert np.array_equal(r, b[k]), "%s: not the bf16 rounding" % k
    assert not np.array_equal(a[k], b[k]), "%s: not rounded at all" % k
print("%d tensors: BF16, the rounding of the fp32 run's" % len(a))
PYEOF
}
check save_dtype_bf16_is_the_rounding_of_the_trained_weights bf16_is_the_rounding
# a run saved in bf16 resumes from it (from the rounded weights: its losses
# are not the uninterrupted run's), and its later saves stay bf16
bf16_resumes() {
    "$BIN/tessera-train" "${SAVE[@]}" --steps 6 --stop-at 3 --save-dtype bf16 \
        --out "$TMP/r16" >/dev/null || return 1
    "$BIN/tessera-train" --out "$TMP/r16" --resume --threads 1 >"$TMP/r16.log" 2>&1 ||
        { cat "$TMP/r16.log"; return 1; }
    cat "$TMP/r16.log"
    grep -q "step *6/6 | loss [0-9]" "$TMP/r16.log" &&
        grep -q '"dtype": *"BF16"' <(head -c 4096 "$TMP/r16/step-00000006/model/model.safetensors" | tr -d '\0')
}
check save_dtype_bf16_resumes bf16_resumes
# small shards: the folder holds shards and their index, and the model is
# the one of a single-file save (the same evaluation); it resumes
sharded() {
    "$BIN/tessera-train" "${SAVE[@]}" --shard-bytes 40000 --out "$TMP/sh" >/dev/null || return 1
    local d=$TMP/sh/step-00000003/model n
    ls "$d"
    n=$(ls "$d" | grep -c '^model-[0-9]*-of-[0-9]*\.safetensors$')
    [ -f "$d/model.safetensors.index.json" ] && [ ! -f "$d/model.safetensors" ] && [ "$n" -ge 2 ] ||
        return 1
    local a b
    a=$(evaluate "$TMP/s32") && b=$(evaluate "$TMP/sh") || return 1
    echo "one file: $a"
    echo "sharded:  $b"
    [ -n "$a" ] && [ "$a" = "$b" ]
}
check shard_bytes_writes_shards_and_an_index sharded
sharded_resumes() {
    "$BIN/tessera-train" "${SAVE[@]}" --steps 4 --stop-at 2 --shard-bytes 40000 \
        --out "$TMP/shr" >/dev/null &&
        "$BIN/tessera-train" --out "$TMP/shr" --resume --threads 1 >/dev/null || return 1
    [ -f "$TMP/shr/step-00000004/model/model.safetensors.index.json" ]
}
check shard_bytes_resumes_and_keeps_sharding sharded_resumes
check save_dtype_unknown usage "--save-dtype: fp32 or bf16, not 'fp16'" \
    "$BIN/tessera-train" "${SAVE[@]}" --save-dtype fp16
check save_dtype_bf16_with_gpt2 usage "--save-dtype is for a Llama's checkpoint folder" \
    "$BIN/tessera-train" --vocab 97 --layers 1 --heads 2 --channels 32 --context 16 \
    --data "$TMP/train.bin" --save-dtype bf16
check shard_bytes_with_gpt2 usage "--shard-bytes is for a Llama's checkpoint folder" \
    "$BIN/tessera-train" --vocab 97 --layers 1 --heads 2 --channels 32 --context 16 \
    --data "$TMP/train.bin" --shard-bytes 1000

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
