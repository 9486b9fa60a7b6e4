/* runtime/instance.h — which runtime is running: every successful tsr_init
 * starts a new instance with a number never used before. Objects built above
 * the runtime (a GPT-2 model and its tensors) record it, so that after
 * tsr_shutdown and a new tsr_init they can tell that their handles are gone.
 *
 * Never a substitute for the handle ids' own generation check: it only lets
 * an upper layer refuse early with a message of its own.
 */
#ifndef TSR_RUNTIME_INSTANCE_H
#define TSR_RUNTIME_INSTANCE_H

#include <stdint.h>

/* The running instance's number (>= 1), or 0 when no runtime runs. */
uint64_t tsr__runtime_instance(void);

#endif
