/* tests/nn/reference.h — what the model suites that compare with a PyTorch
 * reference share: which reference (a fresh run where torch is, else the
 * committed outputs: TESSERA_REFERENCE), reading the reference's
 * safetensors outputs, and the tolerance count.
 *
 * Never hide a failure here: every read is asserted.
 */
#ifndef TSR_TESTS_NN_REFERENCE_H
#define TSR_TESTS_NN_REFERENCE_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "nn/io/safetensors.h"
#include "tests/kernels/kt_util.h"

static inline const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

/* Which reference to compare with. TESSERA_REFERENCE=committed: the
 * committed outputs; =torch: run PyTorch (the test fails without it);
 * unset or =auto: PyTorch where /usr/bin/python3 has it, else the committed
 * outputs (a new machine has no torch, and that is not a failure). */
static inline int have_torch(void)
{
    const char *mode = getenv("TESSERA_REFERENCE");
    if (mode && !strcmp(mode, "committed"))
        return 0;
    int found = system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
    if (mode && !strcmp(mode, "torch"))
        cr_assert(found, "TESSERA_REFERENCE=torch, but /usr/bin/python3 cannot import torch");
    else if (mode && *mode && strcmp(mode, "auto"))
        cr_assert(0, "TESSERA_REFERENCE=%s: expected committed, torch or auto", mode);
    return found;
}

static inline float *read_f32(tsr__st_reader_t *r, const char *name, size_t *n)
{
    const tsr__st_tensor_t *t = tsr__st_find(r, name);
    cr_assert_not_null(t, "reference file lacks %s", name);
    *n = (size_t)t->numel;
    float *x = malloc((*n ? *n : 1) * sizeof *x);
    cr_assert_not_null(x);
    cr_assert_eq(tsr__st_read_f32(r, t, x, *n), TSR_OK, "%s: %s", name, tsr_error_message());
    return x;
}

static inline double meta_num(tsr__st_reader_t *r, const char *key)
{
    const char *v = tsr__st_metadata(r, key);
    cr_assert_not_null(v, "reference metadata lacks %s", key);
    return strtod(v, NULL);
}

/* Elements outside atol_frac * max(max|want|, floor_abs / atol_frac) + rtol |want|:
 * an absolute tolerance scaled to the tensor, with an absolute floor. */
static inline size_t count_bad(const char *what, const float *got, const float *want, size_t n,
                        double atol_frac, double rtol, double floor_abs)
{
    double mx = floor_abs / atol_frac;
    for (size_t i = 0; i < n; i++)
        mx = fmax(mx, fabs(want[i]));
    return kt_count_bad_f(what, got, want, n, atol_frac * mx, rtol);
}

#endif
