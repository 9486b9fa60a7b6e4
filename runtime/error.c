/* runtime/error.c — status strings and the per-thread error message. */
#include "runtime/internal.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char tsr_errmsg[1024];
static _Thread_local int tsr_errcause;

const char *tsr_strerror(int status)
{
    switch (status) {
    case TSR_OK: return "TSR_OK: success";
    case TSR_EINVAL: return "TSR_EINVAL: invalid argument";
    case TSR_ENOMEM: return "TSR_ENOMEM: out of memory";
    case TSR_EBUSY: return "TSR_EBUSY: object in use";
    case TSR_ENOTFOUND: return "TSR_ENOTFOUND: unknown name";
    case TSR_ETASK: return "TSR_ETASK: a task failed";
    case TSR_ESTATE: return "TSR_ESTATE: runtime not in the right state";
    case TSR_ENODEV: return "TSR_ENODEV: no such device";
    case TSR_EDEVICE: return "TSR_EDEVICE: device call failed";
    case TSR_EIO: return "TSR_EIO: input/output error";
    default: return "unknown status";
    }
}

const char *tsr_error_message(void)
{
    return tsr_errmsg;
}

int tsr_error_cause(void)
{
    return tsr_errcause;
}

int tsr__fail(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tsr_errmsg, sizeof tsr_errmsg, fmt, ap);
    va_end(ap);
    tsr_errcause = status;
    return status;
}

int tsr__fail_cause(int status, int cause, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tsr_errmsg, sizeof tsr_errmsg, fmt, ap);
    va_end(ap);
    tsr_errcause = cause;
    return status;
}
