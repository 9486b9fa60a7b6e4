/* tools/fault.c — the TESSERA_FAULT_AT test hook (see fault.h). */
#include "fault.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { FAULT_NONE, FAULT_KILL, FAULT_ENOSPC };
static struct {
    int parsed, mode;
    long at, count;
} fault;

static void fault_parse(void)
{
    if (fault.parsed)
        return;
    fault.parsed = 1;
    const char *s = getenv("TESSERA_FAULT_AT");
    if (s == NULL || *s == '\0')
        return;
    fault.mode = FAULT_KILL;
    if (strncmp(s, "kill:", 5) == 0)
        s += 5;
    else if (strncmp(s, "enospc:", 7) == 0)
        s += 7, fault.mode = FAULT_ENOSPC;
    char *end;
    fault.at = strtol(s, &end, 10);
    if (*end != '\0' || fault.at < 1)
        fault.mode = FAULT_NONE;
}

void fault_after(void)
{
    fault_parse();
    if (fault.mode == FAULT_KILL && ++fault.count == fault.at)
        _exit(137);
}

int fault_write(void)
{
    fault_parse();
    if (fault.mode == FAULT_ENOSPC && ++fault.count == fault.at) {
        errno = ENOSPC;
        return 1;
    }
    return 0;
}
