#!/usr/bin/env bash
# tests/tools/test_cli.sh TOOLS_DIR — the GPT-2 programs end to end on a tiny
# model: tokenize, train, an interrupted run resumed to the same model as an
# uninterrupted one, and a run that recomputes its activations (--recompute)
# to the same model as one that keeps them (the same validation loss to 4
# decimals: gradient sums in COMMUTE groups run in completion order, so the
# bytes may differ in the last place), and one in waves (--wave) to the same
# model as one micro-batch at a time, eval and generate on the checkpoint
# (a run folder, a step folder, a file; generation reproducible for a seed,
# stop strings, a batch of prompts), and clear failures (exit 2 for
# usage, 1 otherwise) on bad input, folders, FIFOs and NUL bytes among them;
# and, where GPUs are (one emulated), the GPUs alone unless --threads.
# Prints a Criterion-style synthesis line for tests/run-suite.sh.
set -u
BIN=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export TESSERA_BIND=0
SUITE=cli
. "$(dirname "$0")/lib.sh"

for i in $(seq 1 400); do
    echo "line $i: the quick brown fox jumps over the lazy dog, $((i * 7919 % 1000)) times."
done >"$TMP/corpus.txt"
MODEL=(--vocab 257 --layers 2 --heads 2 --channels 32 --context 32 --seq 32 --batch 4
       --micro-batch 2 --lr 3e-3 --warmup 2 --threads 1 --log-every 1)

check tokenize "$BIN/tessera-tokenize" --val-fraction 0.1 "$TMP/corpus.txt" -o "$TMP/c"
# The header words (int32 at 0 and 4) and size of a shard: "magic version bytes".
shard_kind() {
    echo "$(od -An -t d4 -N 8 "$1" | tr -s ' ' | sed 's/^ //') $(stat -c %s "$1")"
}
# tokens of the byte-level tokenizer (vocabulary 257): llm.c's GPT-2 kind
gpt2_kind() {
    local n; n=$(sed -n 's/^train [^ ]* \([0-9]*\) .*/\1/p' "$TMP/c.manifest")
    echo "train shard: $(shard_kind "$TMP/c_train.bin"), $n tokens"
    [ "$(shard_kind "$TMP/c_train.bin")" = "20240520 1 $((1024 + 2 * n))" ]
}
check tokenize_writes_uint16_shards gpt2_kind
# A tokenizer.json whose vocabulary passes 65536 ids (the 256 byte tokens
# under GPT-2's byte alphabet and Llama 3's <|end_of_text|>, 128001): uint32
# shards, llm.c's Llama 3 kind, which a model of 257 ids refuses by the id.
big_tokenizer_json() {
    local b c n=0 sep=
    printf '{"version": "1.0", "truncation": null, "padding": null, "added_tokens": '
    printf '[{"id": 128001, "content": "<|end_of_text|>", "single_word": false, '
    printf '"lstrip": false, "rstrip": false, "normalized": false, "special": true}], '
    printf '"normalizer": null, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": '
    printf 'false, "trim_offsets": true, "use_regex": true}, "post_processor": null, '
    printf '"decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, '
    printf '"use_regex": true}, "model": {"type": "BPE", "dropout": null, "unk_token": null, '
    printf '"continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": false, '
    printf '"byte_fallback": false, "ignore_merges": false, "vocab": {'
    for b in $(seq 0 255); do
        if { [ "$b" -ge 33 ] && [ "$b" -le 126 ]; } || { [ "$b" -ge 161 ] && [ "$b" -ne 173 ]; }; then
            c=$b
        else
            c=$((256 + n)) n=$((n + 1))
        fi
        printf '%s"\\u%04x": %d' "$sep" "$c" "$b"
        sep=', '
    done
    printf '}, "merges": []}}\n'
}
big_tokenizer_json >"$TMP/tokenizer.json"
llama_kind() {
    "$BIN/tessera-tokenize" --vocab "$TMP/tokenizer.json" "$TMP/corpus.txt" -o "$TMP/l" || return 1
    local n; n=$(sed -n 's/^train [^ ]* \([0-9]*\) .*/\1/p' "$TMP/l.manifest")
    echo "train shard: $(shard_kind "$TMP/l_train.bin"), $n tokens"
    [ "$n" = $(($(stat -c %s "$TMP/corpus.txt") + 1)) ] &&
        [ "$(shard_kind "$TMP/l_train.bin")" = "20240801 7 $((1024 + 4 * n))" ]
}
check tokenize_writes_uint32_shards_for_a_large_vocabulary llama_kind
check uint32_shard_ids_checked_against_the_model says "has token id 128001 (at token 0)" \
    "$BIN/tessera-train" --data "$TMP/l_train.bin" "${MODEL[@]}" --steps 1 --out "$TMP/l_run"
check train_uninterrupted "$BIN/tessera-train" --data "$TMP/c_train.bin" "${MODEL[@]}" \
    --steps 8 --out "$TMP/a"
check train_first_half "$BIN/tessera-train" --data "$TMP/c_train.bin" "${MODEL[@]}" \
    --steps 8 --stop-at 4 --out "$TMP/b"
check train_resumed "$BIN/tessera-train" --out "$TMP/b" --resume
evaluate() {
    "$BIN/tessera-eval" --checkpoint "$1" --data "$TMP/c_val.bin" --batch 2 \
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
check train_recompute "$BIN/tessera-train" --data "$TMP/c_train.bin" "${MODEL[@]}" \
    --steps 8 --recompute --out "$TMP/r"
same_eval_recompute() {
    local a r
    a=$(evaluate "$TMP/a") && r=$(evaluate "$TMP/r") || return 1
    echo "keeping the activations: $a"
    echo "recomputing them:        $r"
    [ -n "$a" ] && [ "$a" = "$r" ]
}
check recompute_trains_the_same_model same_eval_recompute
# waves (docs/gpt2.md, "Waves"): 4 micro-batches of 1 per step in waves of 3
# (3 + 1) train the same model as 1 at a time (--recompute's run): on one
# CPU worker the sums run in the loop's order, but for wte's (a rounding
# apart: the evaluation's 4 decimals are the same)
train_waves() {
    "$BIN/tessera-train" --data "$TMP/c_train.bin" "${MODEL[@]}" --steps 8 --recompute \
        --micro-batch 1 --wave 3 --out "$TMP/w" >"$TMP/w.log" 2>&1 || { cat "$TMP/w.log"; return 1; }
    grep 'waves of 3 micro-batches' "$TMP/w.log"
}
check train_waves train_waves
check train_one_at_a_time "$BIN/tessera-train" --data "$TMP/c_train.bin" "${MODEL[@]}" \
    --steps 8 --recompute --micro-batch 1 --wave 1 --out "$TMP/w1"
same_eval_waves() {
    local a w
    a=$(evaluate "$TMP/w1") && w=$(evaluate "$TMP/w") || return 1
    echo "one at a time: $a"
    echo "in waves of 3: $w"
    [ -n "$a" ] && [ "$a" = "$w" ]
}
check waves_train_the_same_model same_eval_waves
check eval_prints_the_loss bash -c "'$BIN/tessera-eval' --checkpoint '$TMP/a/step-00000008' \
    --data '$TMP/c_val.bin' --batch 2 --seq 32 --threads 1 | grep -q '^loss [0-9.]* over'"
check generate_samples bash -c "'$BIN/tessera-generate' --checkpoint '$TMP/a/step-00000008/model.safetensors' \
    --prompt 'line ' --tokens 20 --top-k 5 --seed 3 --threads 1 | grep -q 'line '"
GEN=("$BIN/tessera-generate" --checkpoint "$TMP/a" --threads 1)
same_samples() {
    local a b
    a=$("${GEN[@]}" --prompt 'line ' --tokens 24 --top-p 0.9 --seed 5 2>/dev/null) &&
        b=$("${GEN[@]}" --prompt 'line ' --tokens 24 --top-p 0.9 --seed 5 2>/dev/null) || return 1
    echo "$a"
    [ -n "$a" ] && [ "$a" = "$b" ]
}
check generate_is_reproducible_for_a_seed same_samples
stops_at_string() {
    local out
    out=$("${GEN[@]}" --prompt 'line ' --tokens 30 --temperature 0 --stop ' ' 2>&1) || return 1
    echo "$out"
    printf '%s\n' "$out" | grep -q "stopped: stop string" &&
        printf '%s\n' "$out" | head -1 | grep -q '^line [^ ]* $'
}
check generate_stops_at_a_stop_string stops_at_string
batch_prints_each() {
    printf 'the quick\nline 3' >"$TMP/prompts.txt"
    local out
    out=$("${GEN[@]}" --prompt 'line ' --prompts "$TMP/prompts.txt" --tokens 6 \
        --temperature 0) || return 1
    echo "$out"
    [ "$(printf '%s\n' "$out" | grep -c '^\[[0-2]\]$')" = 3 ] &&
        printf '%s\n' "$out" | grep -q '^the quick' && printf '%s\n' "$out" | grep -q '^line 3'
}
check generate_batch_prints_every_sequence batch_prints_each
check generate_bf16_samples bash -c "'$BIN/tessera-generate' --checkpoint '$TMP/a' --threads 1 \
    --bf16 --prompt 'line ' --tokens 10 --temperature 0 | grep -q '^line '"
check generate_prompt_without_value_is_a_usage_error exits 2 "${GEN[@]}" --prompt
check unknown_flag_is_a_usage_error exits 2 "$BIN/tessera-train" --data x --no-such-flag
check missing_data_file_fails exits 1 "$BIN/tessera-train" --data "$TMP/none.bin" "${MODEL[@]}"
printf 'not a checkpoint' >"$TMP/junk.safetensors"
check corrupt_checkpoint_fails exits 1 "$BIN/tessera-eval" --checkpoint "$TMP/junk.safetensors" \
    --data "$TMP/c_val.bin"
check text_is_not_a_shard exits 1 "$BIN/tessera-eval" --checkpoint "$TMP/a" \
    --data "$TMP/corpus.txt"
# A NaN in the weights (the last 4 bytes of the file: the last element of
# the last tensor) is refused at load, naming the tensor, not evaluated.
cp "$TMP/a/step-00000008/model.safetensors" "$TMP/nan.safetensors"
size=$(stat -c %s "$TMP/nan.safetensors")
printf '\xff\xff\xff\x7f' | dd of="$TMP/nan.safetensors" bs=1 seek=$((size - 4)) conv=notrunc \
    2>/dev/null
check nan_checkpoint_is_refused says "tensor [a-z0-9_.]* holds NaN at element" \
    "$BIN/tessera-eval" --checkpoint "$TMP/nan.safetensors" --data "$TMP/c_val.bin" --threads 1
# A folder or a FIFO where a file is expected says so (not "does not exist").
mkdir "$TMP/folder"
mkfifo "$TMP/fifo"
check folder_as_data_is_a_directory says "training data '$TMP/folder' is a directory" \
    "$BIN/tessera-train" --data "$TMP/folder" "${MODEL[@]}"
check fifo_as_data_is_not_regular says "data '$TMP/fifo' is not a regular file (a FIFO)" \
    "$BIN/tessera-eval" --checkpoint "$TMP/a" --data "$TMP/fifo"
check fifo_as_checkpoint_is_not_regular says "checkpoint '$TMP/fifo' is not a regular file" \
    "$BIN/tessera-eval" --checkpoint "$TMP/fifo" --data "$TMP/c_val.bin"
check folder_as_init_is_a_directory says "checkpoint '$TMP/folder' is a directory" \
    "$BIN/tessera-train" --data "$TMP/c_train.bin" --init "$TMP/folder" "${MODEL[@]}"
check folder_without_checkpoint says "is a folder with neither a 'latest' pointer" \
    "$BIN/tessera-eval" --checkpoint "$TMP/folder" --data "$TMP/c_val.bin"
check missing_checkpoint_does_not_exist says "checkpoint '$TMP/none' does not exist" \
    "$BIN/tessera-generate" --checkpoint "$TMP/none"
check folder_as_text_is_a_directory says "'$TMP/folder' is a directory" \
    "$BIN/tessera-tokenize" "$TMP/folder" -o "$TMP/x"
# A FIFO named as a text input blocked open() for ever when nothing wrote to
# it: refused at once ('-' reads standard input).
check fifo_as_prompts_is_refused says "'$TMP/fifo' is not a regular file (a FIFO)" \
    timeout 20 "$BIN/tessera-generate" --checkpoint "$TMP/a" --prompts "$TMP/fifo"
check fifo_as_text_is_refused says "'$TMP/fifo' is not a regular file (a FIFO)" \
    timeout 20 "$BIN/tessera-tokenize" "$TMP/fifo" -o "$TMP/x"
# A NUL byte in a prompts file silently cut its line (and every later one)
# short: refused, naming the line.
printf 'first prompt\nsec\0ond\nthird\n' >"$TMP/nul.txt"
check nul_in_prompts_names_the_line says "'$TMP/nul.txt' line 2 holds a NUL byte" \
    "$BIN/tessera-generate" --checkpoint "$TMP/a" --prompts "$TMP/nul.txt"

# Where GPUs are, the programs run on them alone unless --threads asks for
# CPU workers (beside GPU-sized tiles they slowed a step past a minute under
# eager); one emulated GPU stands for them where the build has the
# emulation. The runtime's worker table (TESSERA_STATS) says which ran.
workers_of() { # the node of every worker row of a one-step run; extra flags
    TESSERA_CUDA_EMU_DEVICES=1 TESSERA_STATS=1 "$BIN/tessera-train" --data "$TMP/c_train.bin" \
        --vocab 257 --layers 2 --heads 2 --channels 32 --context 32 --seq 32 --batch 4 \
        --steps 1 --out "$TMP/gpu$#" "$@" 2>&1 | awk '$1 ~ /^[0-9]+$/ && NF == 8 { print $2 }'
}
gpus_alone() {
    local nodes; nodes=$(workers_of | sort -u | tr '\n' ' ')
    echo "worker nodes: $nodes"
    [ "$nodes" = "cuda0 " ]
}
cpus_on_request() {
    local nodes; nodes=$(workers_of --threads 1 | sort -u | tr '\n' ' ')
    echo "worker nodes: $nodes"
    [ "$nodes" = "cuda0 host " ]
}
if TESSERA_CUDA_EMU_DEVICES=1 "$BIN/tessera-info" 2>/dev/null | grep -q '^cuda devices: 1'; then
    check gpus_alone_by_default gpus_alone
    check cpu_workers_with_threads cpus_on_request
else
    echo "[SKIP] $SUITE::gpus_alone_by_default: this build has no CUDA emulation"
fi

finish
