/* runtime/error.h — how library code reports an error: set the calling
 * thread's message and return the status. Usable from C and CUDA C++.
 *
 * Never print or abort here: the caller decides what the user sees.
 */
#ifndef TSR_RUNTIME_ERROR_H
#define TSR_RUNTIME_ERROR_H

#include <tessera/tessera.h>

#ifdef __cplusplus
extern "C" {
#endif

int tsr__fail(int status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* tsr__fail whose tsr_error_cause() is `cause` (a task failure: TSR_ETASK
 * returned, the failed task's cause kept). */
int tsr__fail_cause(int status, int cause, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif
