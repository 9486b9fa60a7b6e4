/* The CPU kernels for x86-64-v4 (AVX-512), as kt_clones.h describes. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define TSR_CPU_CLONES __attribute__((target("arch=x86-64-v4")))
#endif
#define KT_CLONE kt_clones_v4
#define KT_NAME "v4"
#include "kt_clones_body.h"
