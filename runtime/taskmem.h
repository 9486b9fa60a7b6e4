/* runtime/taskmem.h — memory for task records: 2 MiB slabs carved into
 * blocks of one size.
 *
 * A graph of N tasks submitted before it runs holds N records at once
 * (2.2 KB each). Allocated one by one from the general allocator they
 * came with its per-allocation work and were spread over its size-class
 * runs; carved in submission order from slabs they lie where the
 * simulation walks them (a simulated GEMM graph: 165 k → 190 k tasks per
 * CPU second). Blocks come back through tsr__taskmem_free (the task
 * caches keep records across tasks; only their final frees come here);
 * when every block is back the slabs go back to the system.
 *
 * Thread-safe (one mutex: taken once per fresh record, not per task).
 */
#ifndef TSR_RUNTIME_TASKMEM_H
#define TSR_RUNTIME_TASKMEM_H

#include <stddef.h>

/* A 64-byte-aligned block of `size` bytes (the same size at every call
 * while any block is out), or NULL. Its contents are undefined. */
void *tsr__taskmem_alloc(size_t size);
void tsr__taskmem_free(void *p);

#endif
