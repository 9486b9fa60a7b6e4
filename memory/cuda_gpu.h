/* memory/cuda_gpu.h — the plain-C boundary between one GPU's CUDA code
 * (memory/cuda.cu: the pool over cudaMalloc chunks, the copy engine thread
 * and its streams, the compute stream and cuBLAS handle, pinned host
 * chunks) and the memory node built on it (memory/cuda_node.c, C11, which
 * alone sees memory.h's directory structures).
 *
 * Must never: expose a structure with C11 atomics or any other layout that
 * C and C++ may disagree on (only tsr_copy_t of memory/copy.h, plain
 * pointers and integers cross it); abort on a CUDA error (each is a
 * TSR_EDEVICE with a message naming the call, the error's name and string).
 */
#ifndef TSR_MEMORY_CUDA_GPU_H
#define TSR_MEMORY_CUDA_GPU_H

#include <stdbool.h>
#include <stddef.h>

#include "memory/copy.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tsr_gpu tsr_gpu_t;

/* Called on the engine thread for every successful copy, before its
 * completion (the node's counters and trace). */
typedef void (*tsr_gpu_copy_event_fn)(void *ctx, const tsr_copy_t *c);

/* Usable GPUs: 0 without a device or a driver. */
int tsr__gpu_count(void);

/* Open GPU `device` for memory node `node_id` (copies with dst_node ==
 * node_id come in, the others go out). *capacity 0 becomes what is free
 * less a margin. Returns 0 and *out, or a TSR_E… code with a message in
 * err and nothing left open. */
int tsr__gpu_open(int device, int node_id, int lanes, size_t *capacity,
                  tsr_gpu_copy_event_fn on_copy, void *on_copy_ctx, tsr_gpu_t **out, char *err,
                  size_t errlen);
/* Drain the engine, then free everything. */
void tsr__gpu_close(tsr_gpu_t *g);

/* Device memory from the pool (256-byte aligned), or NULL when cudaMalloc
 * cannot give a chunk for it (err, if given, names the call). */
void *tsr__gpu_alloc(tsr_gpu_t *g, size_t size, char *err, size_t errlen);
void tsr__gpu_free(tsr_gpu_t *g, void *p);
/* Give the pool's empty chunks back to the device; returns the bytes. */
size_t tsr__gpu_trim(tsr_gpu_t *g);

/* Queue a copy on the engine (see tsr_node_ops_t.copy). */
int tsr__gpu_copy(tsr_gpu_t *g, tsr_copy_t *c);
/* Whether peer access to GPU `device` is enabled both ways. */
bool tsr__gpu_peer(const tsr_gpu_t *g, int device);

/* The compute lanes open made (lanes clamped to 1..8): a stream and a
 * cuBLAS handle each. */
int tsr__gpu_lanes(const tsr_gpu_t *g);
/* Around a kernel on the calling thread, on compute lane `lane` (see
 * tsr_node_ops_t). */
int tsr__gpu_exec_begin(tsr_gpu_t *g, int lane, void **stream, void **blas, char *err,
                        size_t errlen);
int tsr__gpu_exec_end(tsr_gpu_t *g, int lane, char *err, size_t errlen);
int tsr__gpu_exec_record(tsr_gpu_t *g, int lane, int *mark, char *err, size_t errlen);
int tsr__gpu_exec_poll(tsr_gpu_t *g, int mark, bool wait, char *err, size_t errlen);
/* Lane `lane` waits on the device for the kernels behind `mark`
 * (cudaStreamWaitEvent): device-ordered dependencies. */
int tsr__gpu_exec_wait(tsr_gpu_t *g, int lane, int mark, char *err, size_t errlen);

/* Page-locked host memory usable by every GPU (cudaHostAlloc, portable),
 * for the pinned pool of host replicas; NULL on failure. */
void *tsr__gpu_host_alloc(size_t bytes);
void tsr__gpu_host_free(void *p);

#ifdef __cplusplus
}
#endif
#endif
