/* kernels/cuda/attention_tc.cuh — the TF32 tensor-core attention launchers
 * (kernels/cuda/attention_tc.cu), for the dispatch in kernels/cuda/attention.cu.
 *
 * Must never: be included outside kernels/cuda, or be called for a head
 * dimension tsr__cuda_attn_tc_takes refuses, or for an empty pair (the
 * public functions in attention.cu check both first).
 */
#ifndef TSR_KERNELS_CUDA_ATTENTION_TC_CUH
#define TSR_KERNELS_CUDA_ATTENTION_TC_CUH

#include <cuda_runtime.h>

/* Where the operands' rows are: element c of position i of head b of
 *   q, dq:      q + b*hsq + i*ldq + c
 *   k, v, dk, dv: k + b*hsk + i*ldk + c   (b: the K/V head, query head / kv_group)
 *   dout:       dout + b*hso + i*ldo + c
 * (contiguous (d, t, nb) tiles: ld = d, hs = t*d).  ms, acc, lse and D are
 * contiguous, as kernels/attention.h says. */
struct tsr__attn_strides {
    int ldq, ldk, ldo;
    long long hsq, hsk, hso;
};

/* true when the tensor-core kernels take head dimension d (1..128) */
bool tsr__cuda_attn_tc_takes(int d);

/* as tsr_cuda_attn_fwd_gqa / tsr_cuda_attn_bwd_gqa (kernels/attention.h), on
 * tensor cores: TF32 operands, or bf16 ones where bf16 is set; nb query heads
 * per sequence, kv_group (dividing nb) of them per K/V head */
int tsr__cuda_attn_fwd_tc(cudaStream_t s, int bf16, int d, int tq, int tk, int nb, int kv_group,
                          int nseq,
                          int q0, int k0,
                          float scale, tsr__attn_strides st, const float *q, const float *k,
                          const float *v, float *ms, float *acc);
int tsr__cuda_attn_bwd_tc(cudaStream_t s, int bf16, int d, int tq, int tk, int nb, int kv_group,
                          int nseq,
                          int q0, int k0,
                          float scale, tsr__attn_strides st, const float *q, const float *k,
                          const float *v, const float *dout, const float *lse, const float *D,
                          float *dq, float *dk, float *dv);

#endif
