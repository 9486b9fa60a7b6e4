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

/* Return the first error of `op`: the unwinding idiom of code that only
 * submits tasks, or fills an object that is freed as a whole on failure, so
 * that nothing is left to undo step by step. */
#define TSR_TRY(op)                                                                     \
    do {                                                                                \
        int rc_ = (op);                                                                 \
        if (rc_)                                                                        \
            return rc_;                                                                 \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
