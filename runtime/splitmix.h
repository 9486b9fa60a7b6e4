/* runtime/splitmix.h — splitmix64, the library's one small pseudo-random
 * generator: a counter advanced by the golden-ratio constant, then mixed.
 * The same numbers on every machine, so that what it draws (the random
 * policy's choices, the simulation's duration draws, GPT-2's initial
 * weights) is reproducible.
 *
 * Must never: read time, addresses or anything but its state; change its
 * sequence (stored results and tests depend on it).
 */
#ifndef TSR_RUNTIME_SPLITMIX_H
#define TSR_RUNTIME_SPLITMIX_H

#include <stdint.h>

#define TSR_SPLITMIX_GAMMA 0x9e3779b97f4a7c15ull

/* The output for a counter value z. */
static inline uint64_t tsr__splitmix_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The next number of the stream *state. */
static inline uint64_t tsr__splitmix(uint64_t *state)
{
    return tsr__splitmix_mix(*state += TSR_SPLITMIX_GAMMA);
}

/* A double uniform in [0, 1) from the stream. */
static inline double tsr__splitmix_unit(uint64_t *state)
{
    return (double)(tsr__splitmix(state) >> 11) * 0x1.0p-53;
}

#endif
