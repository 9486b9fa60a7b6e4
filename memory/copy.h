/* memory/copy.h — one transfer between memory nodes, as the copy engines
 * see it. Plain C with no atomics, so that the CUDA engine (memory/cuda.cu,
 * compiled as C++) can use it without seeing the directory's C11 structures.
 *
 * Must never: grow a field whose layout differs between C and C++ (an
 * _Atomic, a bit-field, a flexible array): both languages read and write
 * the same struct.
 */
#ifndef TSR_MEMORY_COPY_H
#define TSR_MEMORY_COPY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TSR_MEM_ERR 200

typedef void (*tsr_copy_done_fn)(void *arg, int status);

/* One transfer, queued on the copy engine of the node that performs it.
 * src == NULL asks for `size` zero bytes at dst. The engine calls
 * done(arg, status) exactly once, on its own thread, never from inside
 * the call that queued the copy; status is 0 or a negative TSR_E… code
 * with a message in err. */
typedef struct tsr_copy {
    int src_node, dst_node;
    const void *src;
    void *dst;
    size_t size;
    tsr_copy_done_fn done;
    void *arg;
    char err[TSR_MEM_ERR];
    uint64_t t_queued, t_start, t_end;  /* ns, filled by the engine */
    struct tsr_copy *next;              /* engine queue link */
} tsr_copy_t;

/* The library's monotonic clock, in nanoseconds (CLOCK_MONOTONIC): every
 * layer above times copies, tasks and models with it, so their events share
 * one time base. */
uint64_t tsr__mem_now_ns(void);

#ifdef __cplusplus
}
#endif
#endif
