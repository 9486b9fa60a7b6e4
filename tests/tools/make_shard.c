/* tests/tools/make_shard.c OUT.bin N VOCAB [SEED] — a token shard of N ids
 * below VOCAB (tsr_shard_write: uint16, or uint32 past 65535) with a
 * pattern a model learns in a few steps (a cycle of 24 ids, one id in 16 a
 * random one instead), for the programs' tests of models with small vocabularies
 * (the Llama fixture's 97 ids), which the byte-level tokenizer's 257 ids
 * would not fit. */
#include <stdio.h>
#include <stdlib.h>

#include <tessera/gpt2.h>

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: make_shard OUT.bin N VOCAB [SEED]\n");
        return 2;
    }
    long n = atol(argv[2]), vocab = atol(argv[3]);
    unsigned long long s = argc > 4 ? strtoull(argv[4], NULL, 10) : 1;
    if (n < 3 || vocab < 2) {
        fprintf(stderr, "make_shard: N >= 3 and VOCAB >= 2\n");
        return 2;
    }
    int32_t *t = malloc((size_t)n * sizeof *t);
    if (t == NULL)
        return 1;
    t[0] = 5, t[1] = 42;
    for (long i = 2; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        t[i] = (s >> 60) == 0 ? (int32_t)((s >> 33) % (unsigned long long)vocab)
                              : (int32_t)(((i % 24) * 37 + 5) % vocab);
    }
    int rc = tsr_shard_write(argv[1], t, (size_t)n);
    free(t);
    if (rc != TSR_OK) {
        fprintf(stderr, "make_shard: %s\n", tsr_error_message());
        return 1;
    }
    return 0;
}
