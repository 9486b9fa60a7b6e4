/* CPU fp32 <-> bf16 conversion, round to nearest even, in integer arithmetic
 * (vectorizes; no dependence on the FPU rounding mode). */
#include "kernels/convert.h"
#include "kernels/cpu/vecmath.h"

#include <string.h>

/* x: (n) fp32, y: (n) bf16 */
TSR_CPU_CLONES void tsr_cpu_f32_to_bf16(size_t n, const float *x, uint16_t *y)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        /* add 0x7fff plus the lowest kept bit: ties go to the even result */
        uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
        /* NaN: keep sign and payload top, force the quiet bit */
        uint32_t nan = (u >> 16) | 0x40u;
        int is_nan = (u & 0x7fffffffu) > 0x7f800000u;
        y[i] = (uint16_t)(is_nan ? nan : rounded);
    }
}

/* x: (n) bf16, y: (n) fp32 */
void tsr_cpu_bf16_to_f32(size_t n, const uint16_t *x, float *y)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)x[i] << 16;
        memcpy(&y[i], &u, sizeof u);
    }
}
