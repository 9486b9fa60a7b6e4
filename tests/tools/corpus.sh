# tests/tools/corpus.sh — the small text the programs' tests train on,
# shared by tests/tools and tests/mpi: 300 lines of byte-level text in
# $TMP/corpus.txt, tokenized (tiny_corpus_tokenized) into $TMP/c_train.bin
# and $TMP/c_val.bin (a tenth). Sourced after TMP (and BIN) are set.

tiny_corpus() {
    local i
    for i in $(seq 1 300); do
        echo "line $i: the quick brown fox jumps over the lazy dog, $((i * 7919 % 1000)) times."
    done >"$TMP/corpus.txt"
}

tiny_corpus_tokenized() {
    tiny_corpus &&
        "$BIN/tessera-tokenize" --val-fraction 0.1 "$TMP/corpus.txt" -o "$TMP/c" >/dev/null
}
