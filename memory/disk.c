/* memory/disk.c — the disk tier (contract: memory/disk.h). */
#include "memory/disk.h"

#include <tessera/tessera.h>

#include <stdio.h>

int tsr__disk_node_open(tsr_node_t *n, const char *dir, size_t capacity, char *err,
                        size_t errlen)
{
    (void)n;
    (void)capacity;
    snprintf(err, errlen, "disk tier in '%s': not implemented yet", dir);
    return TSR_EINVAL;
}
