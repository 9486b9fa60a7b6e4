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

#ifdef __cplusplus
}
#endif
#endif
