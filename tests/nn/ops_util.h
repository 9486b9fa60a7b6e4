/* tests/nn/ops_util.h — what the tile-operation tests (the nn_ops suite)
 * share: a status assertion and fp32 tensors from and to dense host arrays.
 *
 * Never hide a failure here: every call is asserted.
 */
#ifndef TSR_TESTS_NN_OPS_UTIL_H
#define TSR_TESTS_NN_OPS_UTIL_H

#include <criterion/criterion.h>

#include "nn/tensor.h"
#include "tests/kernels/kt_util.h"

#define OK(call) cr_assert_eq((call), TSR_OK, "%s: %s", #call, tsr_error_message())

/* t = a (rows, cols) fp32 tensor in tiles (tr, tc) holding src (column-major,
 * ld rows; NULL: zeros) */
static inline void tensor_from(tsr_tensor_t *t, int rows, int cols, int tr, int tc,
                               const void *src)
{
    OK(tsr__tensor_init(t, rows, cols, tr, tc));
    if (src)
        OK(tsr__tensor_write(t, src, (size_t)rows));
}

/* t's values in a new host array (column-major, ld rows) */
static inline float *tensor_get(const tsr_tensor_t *t)
{
    float *x = kt_alloc(tsr__tensor_numel(t));
    OK(tsr__tensor_read(t, x, (size_t)t->rows));
    return x;
}

#endif
