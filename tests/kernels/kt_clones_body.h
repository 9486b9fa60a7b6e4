/* One level's copy of the CPU kernels (see kt_clones.h): the sources
 * themselves, their public names prefixed by KT_CLONE, every function
 * compiled for the target in TSR_CPU_CLONES.  Included once per clones_*.c. */
#include "kt_clones.h"

#define KT_CAT2(a, b) a##_##b
#define KT_CAT(a, b) KT_CAT2(a, b)
#define KT_N(f) KT_CAT(KT_CLONE, f)

#define tsr_cpu_gelu_fwd KT_N(gelu_fwd)
#define tsr_cpu_gelu_bwd KT_N(gelu_bwd)
#define tsr_cpu_maxsumexp KT_N(maxsumexp)
#define tsr_cpu_maxsumexp_merge KT_N(maxsumexp_merge)
#define tsr_cpu_logsumexp KT_N(logsumexp)
#define tsr_cpu_crossentropy_fwd KT_N(crossentropy_fwd)
#define tsr_cpu_crossentropy_bwd KT_N(crossentropy_bwd)
#define tsr_cpu_attn_init KT_N(attn_init)
#define tsr_cpu_attn_fwd KT_N(attn_fwd)
#define tsr_cpu_attn_merge KT_N(attn_merge)
#define tsr_cpu_attn_finalize KT_N(attn_finalize)
#define tsr_cpu_attn_bwd_dot KT_N(attn_bwd_dot)
#define tsr_cpu_attn_bwd KT_N(attn_bwd)
#define tsr_cpu_attn_fwd_gqa KT_N(attn_fwd_gqa)
#define tsr_cpu_attn_bwd_gqa KT_N(attn_bwd_gqa)
#define tsr_cpu_layernorm_fwd KT_N(layernorm_fwd)
#define tsr_cpu_layernorm_bwd KT_N(layernorm_bwd)
#define tsr_cpu_layernorm_part KT_N(layernorm_part)
#define tsr_cpu_layernorm_part_grad KT_N(layernorm_part_grad)
#define tsr_cpu_layernorm_combine KT_N(layernorm_combine)
#define tsr_cpu_layernorm_apply KT_N(layernorm_apply)
#define tsr_cpu_layernorm_apply_grad KT_N(layernorm_apply_grad)
#define tsr_cpu_adamw KT_N(adamw)
#define tsr_cpu_sumsq KT_N(sumsq)
#define tsr_cpu_rmsnorm_fwd KT_N(rmsnorm_fwd)
#define tsr_cpu_rmsnorm_bwd KT_N(rmsnorm_bwd)
#define tsr_cpu_swiglu_fwd KT_N(swiglu_fwd)
#define tsr_cpu_swiglu_bwd KT_N(swiglu_bwd)

#include "kernels/cpu/adamw.c"
#include "kernels/cpu/attention.c"
#include "kernels/cpu/crossentropy.c"
#include "kernels/cpu/gelu.c"
#include "kernels/cpu/layernorm.c"
#include "kernels/cpu/rmsnorm.c"
#include "kernels/cpu/softmax.c"
#include "kernels/cpu/swiglu.c"

const kt_clone_set KT_CLONE = {
    .name = KT_NAME,
    .gelu_fwd = tsr_cpu_gelu_fwd,
    .gelu_bwd = tsr_cpu_gelu_bwd,
    .maxsumexp = tsr_cpu_maxsumexp,
    .crossentropy_bwd = tsr_cpu_crossentropy_bwd,
    .attn_fwd = tsr_cpu_attn_fwd,
    .attn_bwd = tsr_cpu_attn_bwd,
    .layernorm_fwd = tsr_cpu_layernorm_fwd,
    .layernorm_bwd = tsr_cpu_layernorm_bwd,
    .adamw = tsr_cpu_adamw,
    .sumsq = tsr_cpu_sumsq,
    .rmsnorm_fwd = tsr_cpu_rmsnorm_fwd,
    .rmsnorm_bwd = tsr_cpu_rmsnorm_bwd,
    .swiglu_fwd = tsr_cpu_swiglu_fwd,
    .swiglu_bwd = tsr_cpu_swiglu_bwd,
};
