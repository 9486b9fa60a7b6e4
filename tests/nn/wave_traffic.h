/* tests/nn/wave_traffic.h — what both model families' wave tests assert of
 * the traffic waves exist for: bytes copied into an accelerator too small
 * for the weights with their gradients, for 8 micro-batches in waves of 1,
 * 2, 4 and 8 (nn/wave.h).
 *
 * Never hide a failure here: every comparison is asserted.
 */
#ifndef TSR_TESTS_NN_WAVE_TRAFFIC_H
#define TSR_TESTS_NN_WAVE_TRAFFIC_H

#include <criterion/criterion.h>
#include <stddef.h>
#include <stdint.h>

/* bytes_in(wave, mem): a model's bytes into one accelerator of mem bytes.
 * One at a time moves more than 4x the weights (weight_bytes); each wider
 * wave less than the one before; waves of 8 under a quarter of one at a
 * time. */
static inline void assert_waves_move_less(uint64_t (*bytes_in)(int wave, size_t mem),
                                          size_t mem, size_t weight_bytes)
{
    uint64_t in[4];
    for (int i = 0; i < 4; i++)
        in[i] = bytes_in(1 << i, mem);
    cr_assert_gt(in[0], 4 * weight_bytes, "one at a time: %llu bytes in, weights %zu",
                 (unsigned long long)in[0], weight_bytes);
    for (int i = 1; i < 4; i++)
        cr_assert_lt(in[i], in[i - 1], "waves of %d: %llu bytes in, of %d: %llu", 1 << i,
                     (unsigned long long)in[i], 1 << (i - 1), (unsigned long long)in[i - 1]);
    cr_assert_lt(4 * in[3], in[0], "waves of 8: %llu bytes in, one at a time %llu",
                 (unsigned long long)in[3], (unsigned long long)in[0]);
}

#endif
