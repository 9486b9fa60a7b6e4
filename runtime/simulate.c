/* runtime/simulate.c — the simulation driver (runtime/driver.h). */
#include "runtime/driver.h"
#include "runtime/internal.h"

static int sim_open(tsr_mem_config_t *mc)
{
    (void)mc;
    return tsr__fail(TSR_EINVAL, "init: simulation is not available in this build");
}
static void sim_close(void) {}

const tsr_driver_t tsr__driver_simulate = {
    .name = "simulate",
    .open = sim_open,
    .close = sim_close,
};
