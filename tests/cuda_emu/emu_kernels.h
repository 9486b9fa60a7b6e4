/* tests/cuda_emu/emu_kernels.h — launchers of the emulation suite's test
 * kernels (emu_kernels.cu); each returns the launch's cudaGetLastError(). */
#ifndef TSR_TEST_EMU_KERNELS_H
#define TSR_TEST_EMU_KERNELS_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif
cudaError_t emu_block_sum(const float *x, int n, int block, float *out, cudaStream_t s);
cudaError_t emu_warp_ops(const int *x, int n, int *sum, int *down, int *scan, int *bcast,
                         unsigned *ballot, cudaStream_t s);
cudaError_t emu_publish(int fenced, int *out, cudaStream_t s);
cudaError_t emu_partial_barrier(int threads, int live, float *out, cudaStream_t s);
cudaError_t emu_scale(float *x, int n, float a, cudaStream_t s);
cudaError_t emu_dyn_reverse(const float *x, float *y, int n, cudaStream_t s);
cudaError_t emu_atomic_count(int blocks, int threads, int *counter, float *fsum, cudaStream_t s);
cudaError_t emu_bad_config(cudaStream_t s);
cudaError_t emu_mma_tf32(const float *a, const float *b, const float *c, float *d, cudaStream_t s);
cudaError_t emu_mma_bf16(const float *a, const float *b, const float *c, float *d, cudaStream_t s);
#ifdef __cplusplus
}
#endif

#endif
