/* kernels/cuda_status.h — how the CUDA kernels report a failure: every
 * tsr_cuda_* launcher and GEMM returns 0, TSR_EINVAL (a shape the kernels do
 * not support, decided before anything is launched) or TSR_EDEVICE (a launch,
 * a copy or a cuBLAS call failed), never a raw cudaError_t or cublasStatus_t
 * (their values collide).  On failure the calling thread keeps a message
 * naming the kernel or the CUDA/cuBLAS call, the error's name and its string,
 * e.g. "k_attn_merge: launch failed: cudaErrorInvalidConfiguration (invalid
 * configuration argument)".
 *
 * Must never: be cleared by a successful call (like errno, the message
 * describes the thread's last failure), allocate, or need a device.
 * C-callable; the message lives until the thread's next failing call.
 */
#ifndef TSR_KERNELS_CUDA_STATUS_H
#define TSR_KERNELS_CUDA_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* The message of the last failing tsr_cuda_* call on this thread; "" when
 * none has failed.  Never NULL. */
const char *tsr_cuda_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
