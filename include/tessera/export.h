/* export.h — TSR_API marks what the shared library exports.
 *
 * The library is built with hidden symbol visibility: only declarations
 * marked TSR_API in include/tessera/ are visible to applications and
 * plug-ins; everything else (tsr__… functions, kernels, tensor operations)
 * stays inside it. This header must never mark anything but the public API.
 *
 * The attribute is GCC/clang's (nvcc passes it to its host compiler); on
 * other compilers the macro is empty and everything is exported as before.
 */
#ifndef TESSERA_EXPORT_H
#define TESSERA_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define TSR_API __attribute__((visibility("default")))
#else
#define TSR_API
#endif

#endif
