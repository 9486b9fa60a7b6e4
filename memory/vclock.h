/* memory/vclock.h — the virtual clock and its event queue, for simulation.
 *
 * Under simulation nothing waits for real time: copy completions, task
 * completions and workers' turns are events at virtual times, run one at a
 * time by the thread that waits (the application's), earliest first, and in
 * the order they were scheduled when their times are equal, so that the
 * same program on the same platform gives the same events bit for bit.
 * While the virtual clock is on, tsr__mem_now_ns() (memory/copy.h, the
 * library's one clock) returns virtual time.
 *
 * Must never: take a lock or start a thread (one thread runs every event);
 * move time backwards; reorder events of equal time; allocate per event
 * once the queue has grown to its working size.
 */
#ifndef TSR_MEMORY_VCLOCK_H
#define TSR_MEMORY_VCLOCK_H

#include <stdbool.h>
#include <stdint.h>

typedef void (*tsr_vclock_fn)(void *arg);

/* Turn the virtual clock on (time 0, empty queue) or off (the wall clock
 * again; pending events are dropped). Returns 0, or TSR_ENOMEM. */
int tsr__vclock_start(void);
void tsr__vclock_stop(void);
bool tsr__vclock_on(void);

/* Virtual nanoseconds since tsr__vclock_start. */
uint64_t tsr__vclock_now(void);

/* Run fn(arg) at virtual time t (a time before now means now). Returns 0,
 * or TSR_ENOMEM (nothing scheduled). */
int tsr__vclock_at(uint64_t t, tsr_vclock_fn fn, void *arg);

/* Run the earliest event, advancing the clock to its time. Returns false
 * if the queue is empty. */
bool tsr__vclock_step(void);

/* Events run since start, and events queued now (for the simulator's own
 * speed figures and tests). */
uint64_t tsr__vclock_events(void);
uint64_t tsr__vclock_queued(void);

#endif
