#!/usr/bin/env bash
# tools/demo.sh BUILD_DIR — the GPT-2 demo that `make demo` runs after
# building: a few MB of dictionary text (Debian's dict-gcide), tokenized
# into bytes, a small GPT-2 trained on the CPU for about three minutes,
# its validation loss, and a sample of text from it. Everything it writes
# goes under BUILD_DIR/demo/.
#
# Needs no network. With TESSERA_GPT2_VOCAB=DIR (a folder holding GPT-2's
# encoder.json and vocab.bpe) the text is tokenized with GPT-2's BPE instead.
# TESSERA_DEMO_THREADS (default 2) sets the CPU workers, TESSERA_DEMO_SCHED
# (default eager) the policy; the demo runs on the CPU only (TESSERA_NCUDA=0)
# unless TESSERA_NCUDA is set.
set -euo pipefail

if [ $# -ne 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
    echo "usage: tools/demo.sh BUILD_DIR" >&2
    exit 2
fi
BUILD=$1
BIN=$BUILD/tools
OUT=$BUILD/demo
THREADS=${TESSERA_DEMO_THREADS:-2}
TESSERA_NCUDA=${TESSERA_NCUDA:-0}
export TESSERA_NCUDA

for p in tessera-tokenize tessera-train tessera-eval tessera-generate; do
    if [ ! -x "$BIN/$p" ]; then
        echo "demo: $BIN/$p is missing: build first (ninja -C $BUILD)" >&2
        exit 1
    fi
done

# ---- the corpus: dictionary entries of GCIDE (Webster's 1913 and more) ----
DICT=/usr/share/dictd/gcide.dict.dz
if [ ! -r "$DICT" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "demo: installing dict-gcide for its text"
        apt-get update -qq &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
                dict-gcide >/dev/null
    fi
    if [ ! -r "$DICT" ]; then
        echo "demo: needs $DICT: install the Debian package dict-gcide" \
             "(sudo apt-get install dict-gcide)" >&2
        exit 1
    fi
fi
mkdir -p "$OUT"
# A few MB from past the front matter; crude markup stripping: source lines
# ("[1913 Webster]"), pronunciations (\Ac*ro"lith\), bracketed etymologies
# on one line, braces, indentation; runs of blank lines squeezed. (head
# stops zcat early: no pipefail for this pipeline.)
set +o pipefail
zcat "$DICT" | tail -c +2000001 | head -c 6000000 |
    sed -e '/^[[:space:]]*\[[^]]*\][[:space:]]*$/d' \
        -e 's/\\[^\\]*\\//g' -e 's/\[[^]]*\]//g' -e 's/[{}]//g' \
        -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' -e 's/ ,/,/g' |
    cat -s >"$OUT/gcide.txt"
set -o pipefail
[ -s "$OUT/gcide.txt" ] || { echo "demo: no text from $DICT" >&2; exit 1; }
echo "demo: corpus $OUT/gcide.txt, $(wc -c <"$OUT/gcide.txt") bytes"

# ---- tokens -----------------------------------------------------------------
VOCAB_DIR=${TESSERA_GPT2_VOCAB:-}
if [ -n "$VOCAB_DIR" ]; then
    # GPT-2's BPE: ~3 bytes a token, but a 50257-row embedding and head make
    # every token ~4x dearer; a sample of 70 tokens is ~200 bytes.
    TOK=(--vocab "$VOCAB_DIR")
    VOCAB=50257
    MODEL=(--layers 4 --heads 4 --channels 128 --context 128)
    RUN=(--seq 128 --batch 8 --steps 450 --lr 3e-3 --warmup 30)
    SAMPLE_TOKENS=70
else
    # Bytes: ids 0..255 and end-of-text 256. A context of 256 holds the prompt
    # and a sample of 200 bytes.
    TOK=()
    VOCAB=257
    MODEL=(--layers 4 --heads 4 --channels 128 --context 256)
    RUN=(--seq 256 --batch 8 --steps 700 --lr 3e-3 --warmup 50)
    SAMPLE_TOKENS=200
fi
"$BIN/tessera-tokenize" "${TOK[@]}" --val-fraction 0.05 "$OUT/gcide.txt" -o "$OUT/gcide"

# ---- training -----------------------------------------------------------------
SCHED=${TESSERA_DEMO_SCHED:-eager}
echo "demo: training a small GPT-2 on $THREADS CPU workers (about 3 minutes)"
"$BIN/tessera-train" --data "$OUT/gcide_train.bin" --val "$OUT/gcide_val.bin" \
    --vocab $VOCAB "${MODEL[@]}" "${RUN[@]}" --eval-every 100 --eval-batches 8 \
    --log-every 25 --out "$OUT/model" --checkpoint-every 350 \
    --threads "$THREADS" --sched "$SCHED" |
    tee "$OUT/train.log"

# ---- evaluation and a sample --------------------------------------------------
echo "demo: validation loss of the checkpoint"
"$BIN/tessera-eval" --checkpoint "$OUT/model" --data "$OUT/gcide_val.bin" \
    --batch 8 --threads "$THREADS" --sched "$SCHED" | tee "$OUT/eval.log"

echo "demo: a sample (temperature 0.7, top-k 40)"
echo "----"
"$BIN/tessera-generate" --checkpoint "$OUT/model" "${TOK[@]}" \
    --prompt "Tessera, n." --tokens $SAMPLE_TOKENS --temperature 0.7 --top-k 40 \
    --threads "$THREADS" --sched "$SCHED" | tee "$OUT/sample.txt"
echo "----"
echo "demo: everything is in $OUT"
