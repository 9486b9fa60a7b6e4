/* memory/disk.h — the disk tier: a memory node below the host, backed by
 * one preallocated file, with an asynchronous I/O engine.
 *
 * The directory treats it like any node: a host copy evicted when the
 * host is full is written back here, and read back (into the host) on
 * demand; data for an accelerator goes disk → host → accelerator. A disk
 * replica's "pointer" is an address in the node's own range (an offset
 * into the file plus a base), handed out by the project's best-fit pool
 * (memory/pool.h); nothing dereferences it but the engine.
 *
 * The file is created in the given directory and unlinked at once (the
 * kernel frees its blocks when the process ends, killed or not); any file
 * a crashed older version left behind under the same name pattern is
 * removed at the next open.
 *
 * Must never: create a file per tile; let a failed or short read or write
 * pass as a success (the copy fails with a message naming the file, the
 * call, the offset and the error); touch host memory outside a copy's
 * buffer; block the thread that queues a copy.
 */
#ifndef TSR_MEMORY_DISK_H
#define TSR_MEMORY_DISK_H

#include <stddef.h>

#include "memory/memory.h"

/* Open node n as the disk tier in directory `dir` with `capacity` bytes
 * (0: half the file system's free space), preallocating the file. Errors:
 * TSR_EINVAL (dir missing or not a writable directory), TSR_ENOMEM (not
 * enough free space for the capacity: the message gives both), TSR_EDEVICE
 * (an I/O call failed), each with a message in err naming the path and the
 * call. */
int tsr__disk_node_open(tsr_node_t *n, const char *dir, size_t capacity, char *err,
                        size_t errlen);

#endif
