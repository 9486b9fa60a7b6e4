/* The CPU kernels for x86-64-v3 (AVX2, FMA), as kt_clones.h describes. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define TSR_CPU_CLONES __attribute__((target("arch=x86-64-v3")))
#endif
#define KT_CLONE kt_clones_v3
#define KT_NAME "v3"
#include "kt_clones_body.h"
