/* runtime/comm_timeout.c — the communication timeout as a setting: what
 * tsr_mpi_set_timeout and TESSERA_MPI_TIMEOUT accept, in the builds with
 * and without MPI alike (comm.c, mpi_none.c).
 *
 * The deadline of a transfer is "now + seconds" in nanoseconds (uint64_t):
 * inf, or 2e10 s and more, overflowed it and every transfer timed out at
 * once ("timed out after inf s"); nan compared false everywhere and was
 * taken. So a timeout is finite and >= 0 or infinite; beyond
 * TSR__MPI_MAX_TIMEOUT_S it means "no timeout", as inf does.
 */
#include "runtime/internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

int tsr__mpi_timeout(double seconds, const char *what, double *out)
{
    if (isnan(seconds) || seconds < 0)
        return tsr__fail(TSR_EINVAL, "%s: %g is not a timeout: seconds >= 0 (0 or inf: none)",
                         what, seconds);
    /* "no timeout" is stored as 0: a deadline is never computed for it */
    *out = seconds >= TSR__MPI_MAX_TIMEOUT_S ? 0 : seconds;
    return TSR_OK;
}

int tsr__mpi_timeout_env(double *out)
{
    const char *env = getenv("TESSERA_MPI_TIMEOUT");
    if (!env || !*env)
        return 0;
    char *end;
    errno = 0;
    double x = strtod(env, &end);
    /* ERANGE: an overflow is inf (no timeout), an underflow a tiny number;
     * both are numbers, so only the text's end decides. */
    if (end == env || *end)
        return tsr__fail(TSR_EINVAL, "mpi_init: TESSERA_MPI_TIMEOUT='%s' is not a number of "
                                     "seconds", env);
    if (isnan(x) || x < 0)
        return tsr__fail(TSR_EINVAL, "mpi_init: TESSERA_MPI_TIMEOUT='%s': seconds >= 0 "
                                     "(0 or inf: none)", env);
    int rc = tsr__mpi_timeout(x, "mpi_init: TESSERA_MPI_TIMEOUT", out);
    return rc == TSR_OK ? 1 : rc;
}
