/* memory/cuda_none.c — the GPU memory node of a build without CUDA: there
 * are no GPUs, and asking to open one says so.
 *
 * Must never: fail anything but an attempt to open a GPU.
 */
#include "memory/memory.h"

#include <tessera/tessera.h>

#include <stdio.h>

int tsr__cuda_node_count(void) { return 0; }

int tsr__cuda_node_open(tsr_node_t *n, int device, size_t capacity, char *err, size_t errlen)
{
    (void)n;
    (void)capacity;
    if (err && errlen)
        snprintf(err, errlen, "cuda%d: this build of tessera has no CUDA support", device);
    return TSR_ENODEV;
}
