/* tests/nn/ops_util.h — what the tile-operation tests (the nn_ops suite)
 * share: a status assertion and fp32 and bf16 tensors from and to dense host
 * arrays.
 *
 * Never hide a failure here: every call is asserted.
 */
#ifndef TSR_TESTS_NN_OPS_UTIL_H
#define TSR_TESTS_NN_OPS_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

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

/* a bf16 tensor holding kt_bf16_round(src) (src NULL: zeros) */
static inline void bf16_tensor(tsr_tensor_t *t, int rows, int cols, int tr, int tc, const float *src)
{
    OK(tsr__tensor_init_bf16(t, rows, cols, tr, tc));
    cr_assert_eq(t->elem_bytes, 2);
    if (!src)
        return;
    size_t n = (size_t)rows * cols;
    uint16_t *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = kt_bf16_round(src[i]);
    OK(tsr__tensor_write(t, h, (size_t)rows));
    free(h);
}

/* a bf16 tensor's values, widened */
static inline float *bf16_get(const tsr_tensor_t *t)
{
    size_t n = tsr__tensor_numel(t);
    uint16_t *h = malloc(n * sizeof *h);
    OK(tsr__tensor_read(t, h, (size_t)t->rows));
    float *x = kt_alloc(n);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)kt_bf16_value(h[i]);
    free(h);
    return x;
}

/* The attention ops' tensors over N tokens in token tiles of tt: qkv
 * (rows, N) holding `qkv` in tiles of qr rows; y, acc and dy (C, N) in
 * tiles of cr rows, dy holding `dy`; lse and D (H, N) in tiles of hr rows,
 * ms (2H, N) of 2 hr; dqkv tiled like qkv. y, the state and dqkv start
 * from `dirty` (at least rows x N values): the ops overwrite them. */
typedef struct attn_set {
    tsr_tensor_t q, y, lse, ms, acc, D, dy, dq;
} attn_set_t;

static inline void attn_set_make(attn_set_t *s, int rows, int qr, int C, int cr, int H, int hr,
                                 int N, int tt, const float *qkv, const float *dy,
                                 const float *dirty)
{
    tensor_from(&s->q, rows, N, qr, tt, qkv);
    tensor_from(&s->y, C, N, cr, tt, dirty);
    tensor_from(&s->lse, H, N, hr, tt, NULL);
    tensor_from(&s->ms, 2 * H, N, 2 * hr, tt, dirty);
    tensor_from(&s->acc, C, N, cr, tt, dirty);
    tensor_from(&s->D, H, N, hr, tt, NULL);
    tensor_from(&s->dy, C, N, cr, tt, dy);
    tensor_from(&s->dq, rows, N, qr, tt, dirty);
}

static inline void attn_set_free(attn_set_t *s)
{
    tsr_tensor_t *all[] = {&s->q, &s->y, &s->lse, &s->ms, &s->acc, &s->D, &s->dy, &s->dq};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tsr__tensor_free(all[i]);
}

/* every got[i] is want[i] rounded to bf16 by a correct rounding of a value
 * within rtol of it: |got - want| <= (2^-8 + rtol) |want| + atol */
static inline void assert_bf16_of(const char *what, const float *got, const double *want,
                                  size_t n, double rtol, double atol)
{
    for (size_t i = 0; i < n; i++) {
        double bound = (ldexp(1.0, -8) + rtol) * fabs(want[i]) + atol;
        cr_assert(fabs(got[i] - want[i]) <= bound, "%s[%zu]: %.9g, want %.9g (bound %.3g)",
                  what, i, (double)got[i], want[i], bound);
    }
}

#endif
