/* tests/runtime/util.h — small helpers shared by the runtime tests: start
 * the runtime with a given worker count and policy, and trivial codelets.
 *
 * Never hide a failure here: every helper asserts what it relies on.
 */
#ifndef TSR_TESTS_UTIL_H
#define TSR_TESTS_UTIL_H

#include <criterion/criterion.h>
#include <tessera/tessera.h>

/* nsim simulated accelerators of sim_mem bytes each, ncuda GPUs of
 * cuda_mem bytes each (0: none). */
static inline void start_runtime_dev(int ncpu, const char *sched, size_t max_pending,
                                     int nsim, size_t sim_mem, int ncuda, size_t cuda_mem)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = ncpu;
    cfg.sched = sched;
    cfg.bind = 0;
    cfg.nsim = nsim;
    cfg.sim_mem = sim_mem;
    cfg.ncuda = ncuda;
    cfg.cuda_mem = cuda_mem;
    if (max_pending)
        cfg.max_pending_tasks = max_pending;
    int rc = tsr_init(&cfg);
    cr_assert_eq(rc, TSR_OK, "tsr_init: %s", tsr_error_message());
}

static inline void start_runtime_sim(int ncpu, const char *sched, size_t max_pending,
                                     int nsim, size_t sim_mem)
{
    start_runtime_dev(ncpu, sched, max_pending, nsim, sim_mem, 0, 0);
}

static inline void start_runtime(int ncpu, const char *sched, size_t max_pending)
{
    start_runtime_sim(ncpu, sched, max_pending, 0, 0);
}

static inline void stop_runtime(void)
{
    int rc = tsr_shutdown();
    cr_assert_eq(rc, TSR_OK, "tsr_shutdown: %s", tsr_error_message());
}

#endif
