/* runtime/driver.h — where a task's time comes from: the driver that makes
 * the workers run and the application's thread wait.
 *
 * Two drivers implement the same table: the threads driver (worker.c: one
 * thread per worker, real copy engines, the wall clock) and the simulation
 * driver (simulate.c: the workers are state machines on one deterministic
 * event loop, the virtual clock of memory/vclock.h, phantom memory). The
 * STF core, the directory and the policies call the table and never ask
 * which driver runs. tsr_init chooses one (tsr__rt.driver) before anything
 * else starts.
 *
 * Must never: be switched while a runtime runs; make a waiter miss the
 * condition it waits for (wake is called after every change a predicate
 * may see).
 */
#ifndef TSR_RUNTIME_DRIVER_H
#define TSR_RUNTIME_DRIVER_H

#include <stdbool.h>

#include "memory/memory.h"

typedef struct tsr_driver {
    const char *name;
    /* Before the memory nodes open: whatever the driver needs first (the
     * simulation: the platform, the virtual clock, the model key). Fills
     * the driver's part of the memory configuration. TSR_E… with a
     * message (tsr__fail). */
    int (*open)(tsr_mem_config_t *mc);
    void (*close)(void);
    /* The worker table (tsr__rt.workers), after the memory nodes open. */
    int (*start)(void);
    /* Set the workers going (threads), after the policy and models. */
    int (*launch)(void);
    /* Every task is complete: stop the workers (undoes launch). */
    void (*stop)(void);
    /* Free the worker table (undoes start). */
    void (*free)(void);
    /* A task was pushed for `target` (-1: anyone): make sure a worker
     * sees it. */
    void (*notify)(int target);
    /* The application's thread blocks until pred(arg) holds. TSR_OK, or
     * TSR_ESTATE with a message (tsr__fail) starting with `what` when it
     * can never hold (a simulated program that deadlocked). */
    int (*wait)(bool (*pred)(void *), void *arg, const char *what);
    /* Something a waiter's predicate reads may have changed. */
    void (*wake)(void);
    /* Workers' task durations are measurements that may feed the
     * performance models. */
    bool measures;
} tsr_driver_t;

extern const tsr_driver_t tsr__driver_threads;
extern const tsr_driver_t tsr__driver_simulate;

#endif
