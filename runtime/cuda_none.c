/* runtime/cuda_none.c — the device query of a build without CUDA: no
 * devices. It must answer like a CUDA build on a machine without a GPU. */
#include "runtime/internal.h"

int tsr_cuda_built(void) { return 0; }
int tsr_cuda_device_count(void) { return 0; }

int tsr_cuda_device_info(int index, tsr_device_info_t *info)
{
    if (!info)
        return tsr__fail(TSR_EINVAL, "cuda_device_info: info is NULL");
    return tsr__fail(TSR_ENODEV, "cuda_device_info: device %d: built without CUDA",
                     index);
}
