/* runtime/cuda_device.cu — what CUDA devices this node has (count, name,
 * memory, compute capability).
 *
 * It must never fail the library on a machine without a GPU or driver: no
 * device is an answer (0), not an error.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "runtime/error.h"

extern "C" {
int tsr_cuda_built(void) { return 1; }

int tsr_cuda_device_count(void)
{
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the sticky error */
        return 0;
    }
    return n;
}

int tsr_cuda_device_info(int index, tsr_device_info_t *info)
{
    if (!info)
        return tsr__fail(TSR_EINVAL, "cuda_device_info: info is NULL");
    int n = tsr_cuda_device_count();
    if (index < 0 || index >= n)
        return tsr__fail(TSR_ENODEV, "cuda_device_info: device %d of %d", index, n);
    cudaDeviceProp p;
    cudaError_t err = cudaGetDeviceProperties(&p, index);
    if (err != cudaSuccess)
        return tsr__fail(TSR_EDEVICE, "cudaGetDeviceProperties(%d): %s (%d)", index,
                         cudaGetErrorString(err), (int)err);
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->total_mem = p.totalGlobalMem;
    info->cc_major = p.major;
    info->cc_minor = p.minor;
    info->multiprocessors = p.multiProcessorCount;
    int prev = 0;
    cudaGetDevice(&prev);
    if (cudaSetDevice(index) == cudaSuccess) {
        size_t fr = 0, tot = 0;
        if (cudaMemGetInfo(&fr, &tot) == cudaSuccess)
            info->free_mem = fr;
        cudaSetDevice(prev);
    }
    (void)cudaGetLastError();
    return TSR_OK;
}
}
