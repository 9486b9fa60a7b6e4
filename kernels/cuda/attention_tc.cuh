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

/* true when the tensor-core kernels take head dimension d (1..64) */
bool tsr__cuda_attn_tc_takes(int d);

/* as tsr_cuda_attn_fwd / tsr_cuda_attn_bwd (kernels/attention.h), on tensor cores */
int tsr__cuda_attn_fwd_tc(cudaStream_t s, int d, int tq, int tk, int nb, int q0, int k0,
                          float scale, int ld, long long hs, const float *q, const float *k,
                          const float *v, float *ms, float *acc);
int tsr__cuda_attn_bwd_tc(cudaStream_t s, int d, int tq, int tk, int nb, int q0, int k0,
                          float scale, int ld, long long hs, const float *q, const float *k,
                          const float *v, int ldo, long long hso, const float *dout,
                          const float *lse, const float *D, float *dq, float *dk, float *dv);

#endif
