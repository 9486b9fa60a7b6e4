/* tests/kernels/kt_clones.h — the CPU kernels compiled once per x86-64 level
 * (baseline, v3, v4) under their own names, so that a test can run every
 * clone that gcc's target_clones would pick on some CPU and compare them bit
 * for bit (kernels/cpu/vecmath.h: all clones compute the same values).
 *
 * Must never: be included by anything but tests/kernels/clones_*.c (which
 * define KT_CLONE and TSR_CPU_CLONES, then include kt_clones_body.h) and
 * tests/kernels/test_clones.c (which only declares).
 */
#ifndef TSR_TESTS_KERNELS_KT_CLONES_H
#define TSR_TESTS_KERNELS_KT_CLONES_H

#include <stddef.h>
#include <stdint.h>

/* The kernels of one level, by pointer (test_clones.c indexes them). */
typedef struct {
    const char *name;
    void (*gelu_fwd)(size_t, const float *, float *);
    void (*gelu_bwd)(size_t, const float *, const float *, float *);
    void (*maxsumexp)(int, int, const float *, int, float *, int);
    void (*crossentropy_bwd)(int, int, int, const float *, int, const float *, const int32_t *,
                             float, float *, int);
    void (*attn_fwd)(int, int, int, int, int, int, float, int, long long, const float *,
                     const float *, const float *, float *, float *);
    void (*attn_bwd)(int, int, int, int, int, int, float, int, long long, const float *,
                     const float *, const float *, int, long long, const float *, const float *,
                     const float *, float *, float *, float *);
    void (*layernorm_fwd)(int, int, const float *, const float *, const float *, float, float *,
                          float *, float *);
    void (*layernorm_bwd)(int, int, const float *, const float *, const float *, const float *,
                          const float *, float *, float *, float *);
    void (*adamw)(size_t, int, float, float, float, float, float, float, float *, float *,
                  float *, float *, uint16_t *, int);
    void (*sumsq)(size_t, const float *, float *);
    void (*rmsnorm_fwd)(int, int, const float *, const float *, float, float *, float *);
    void (*rmsnorm_bwd)(int, int, const float *, const float *, const float *, const float *,
                        float *, float *);
    void (*swiglu_fwd)(int, int, const float *, int, const float *, int, float *, int);
    void (*swiglu_bwd)(int, int, const float *, int, const float *, int, const float *, int,
                       float *, int, float *, int);
} kt_clone_set;

extern const kt_clone_set kt_clones_default, kt_clones_v3, kt_clones_v4;

#endif
