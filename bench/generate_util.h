/* bench/generate_util.h — what the generation benchmarks of both model
 * families share: the peer's decode speed read from its output, the
 * reference's LCG prompt tokens, and greedy choice.
 *
 * Header-only, like bench_util.h; must never know a model.
 */
#ifndef TSR_BENCH_GENERATE_UTIL_H
#define TSR_BENCH_GENERATE_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Run the peer's command line `cmd` (its stderr joined to stdout): its
 * lines are echoed but for its JSON ones, and the decode tokens/s of its
 * "tokens_per_s" field returned; -1 when it fails or prints none. */
static inline double bench_peer_tokens_per_s(const char *cmd)
{
    fflush(stdout);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    char line[4096];
    double tps = -1;
    while (fgets(line, sizeof line, f)) {
        const char *k = strstr(line, "\"tokens_per_s\": ");
        if (k)
            tps = strtod(k + 16, NULL);
        else if (!strstr(line, "\"bench\""))
            fputs(line, stdout);
        fflush(stdout);
    }
    if (pclose(f) != 0)
        return -1;
    return tps;
}

/* LCG ids as the references' tokens(): B rows of `len` ids. */
static inline void bench_lcg_tokens(int B, int len, int vocab, uint64_t seed, int32_t *out)
{
    uint64_t x = seed;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < len + 1; t++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            if (t < len)
                out[(size_t)b * len + t] = (int32_t)((x >> 33) % (uint64_t)vocab);
        }
}

/* The greedy choice: the first largest of n logits. */
static inline int bench_argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

#endif
