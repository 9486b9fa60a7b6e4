/* The CPU kernels for baseline x86-64 (SSE2), as kt_clones.h describes. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define TSR_CPU_CLONES __attribute__((target("arch=x86-64")))
#endif
#define KT_CLONE kt_clones_default
#define KT_NAME "default"
#include "kt_clones_body.h"
