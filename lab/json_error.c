/* lab/json_error.c — the error reporting runtime/json.c calls (tsr__fail),
 * for the lab's own copy of the JSON parser: the lab links the public API
 * only (or nothing), where the library's tsr__fail is hidden, so the
 * message is kept here for the WfCommons reader to put in its err.
 *
 * Must never: print or abort; define anything the public API exports (a
 * second tsr_error_message would hide the library's).
 */
#include <stdarg.h>
#include <stdio.h>

#include "lab/build.h"
#include "runtime/error.h"

static _Thread_local char lab_json_msg[512];

int tsr__fail(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(lab_json_msg, sizeof lab_json_msg, fmt, ap);
    va_end(ap);
    return status;
}

const char *lab_json_message(void)
{
    return lab_json_msg;
}
