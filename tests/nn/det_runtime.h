/* tests/nn/det_runtime.h — the runtime the model tests that compare bits
 * start: deterministic mode (order-free sums in submission order), no
 * binding, no GPU, the given CPU workers, simulated accelerators and host
 * cap.
 *
 * Never hide a failure here: tsr_init is asserted.
 */
#ifndef TSR_TESTS_NN_DET_RUNTIME_H
#define TSR_TESTS_NN_DET_RUNTIME_H

#include <criterion/criterion.h>
#include <stddef.h>

#include <tessera/tessera.h>

/* ncpu CPU workers (< 0: none), nsim simulated accelerators of sim_mem
 * bytes, a host cap of host_mem bytes (0: none) */
static inline void det_runtime_init(int ncpu, int nsim, size_t sim_mem, size_t host_mem)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = ncpu;
    cfg.bind = 0;
    cfg.nsim = nsim;
    cfg.sim_mem = sim_mem;
    cfg.host_mem = host_mem;
    cfg.ncuda = 0;
    cfg.deterministic = 1;
    int rc = tsr_init(&cfg);
    cr_assert_eq(rc, TSR_OK, "tsr_init: %s", tsr_error_message());
}

#endif
