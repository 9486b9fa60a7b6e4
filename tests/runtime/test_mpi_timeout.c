/* tests/runtime/test_mpi_timeout.c — the communication timeout as a setting,
 * in the builds with and without MPI (the refusals come before MPI starts):
 * nan, negative and garbage are TSR_EINVAL from tsr_mpi_set_timeout and
 * from tsr_mpi_init (TESSERA_MPI_TIMEOUT, named); inf and values whose
 * deadline in nanoseconds would overflow mean "no timeout" (they made every
 * transfer time out at once: "timed out after inf s"). tests/mpi runs an
 * all-reduce with TESSERA_MPI_TIMEOUT=inf under mpirun. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <tessera/mpi.h>

#include "runtime/internal.h"

static void assert_msg(const char *word)
{
    cr_assert(strstr(tsr_error_message(), word), "message '%s' lacks '%s'",
              tsr_error_message(), word);
}

Test(mpi_timeout, set_timeout_refuses_nan_and_negative)
{
    const double bad[] = {NAN, -NAN, -1.0, -1e-9, -INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(tsr_mpi_set_timeout(bad[i]), TSR_EINVAL, "set_timeout(%g)", bad[i]);
        assert_msg("mpi_set_timeout");
    }
    /* accepted (without MPI: the build's own answer, not EINVAL) */
    int ok = tsr_mpi_available() ? TSR_OK : TSR_ENODEV;
    cr_assert_eq(tsr_mpi_set_timeout(INFINITY), ok);
    cr_assert_eq(tsr_mpi_set_timeout(0), ok);
    cr_assert_eq(tsr_mpi_set_timeout(2e10), ok);
    cr_assert_eq(tsr_mpi_set_timeout(300), ok);
}

Test(mpi_timeout, environment_refused_at_init)
{
    const char *bad[] = {"nan", "NaN", "-1", "-inf", "soon", "5s", "1e400x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("TESSERA_MPI_TIMEOUT", bad[i], 1);
        cr_assert_eq(tsr_mpi_init(NULL, NULL), TSR_EINVAL, "TESSERA_MPI_TIMEOUT=%s", bad[i]);
        assert_msg("TESSERA_MPI_TIMEOUT");
        assert_msg(bad[i]);
    }
    unsetenv("TESSERA_MPI_TIMEOUT");
}

/* What a timeout becomes: 0 ("none") for inf and for any number of seconds
 * whose nanoseconds would not fit a uint64_t deadline. */
Test(mpi_timeout, infinite_and_huge_mean_none)
{
    double t = -1;
    cr_assert_eq(tsr__mpi_timeout(INFINITY, "t", &t), TSR_OK);
    cr_assert_eq(t, 0.0);
    t = -1;
    cr_assert_eq(tsr__mpi_timeout(2e10, "t", &t), TSR_OK);
    cr_assert_eq(t, 0.0);
    t = -1;
    cr_assert_eq(tsr__mpi_timeout(1e300, "t", &t), TSR_OK);
    cr_assert_eq(t, 0.0);
    cr_assert_eq(tsr__mpi_timeout(2.5, "t", &t), TSR_OK);
    cr_assert_eq(t, 2.5);
    cr_assert_eq(tsr__mpi_timeout(0, "t", &t), TSR_OK);
    cr_assert_eq(t, 0.0);
    setenv("TESSERA_MPI_TIMEOUT", "inf", 1);
    t = -1;
    cr_assert_eq(tsr__mpi_timeout_env(&t), 1);
    cr_assert_eq(t, 0.0);
    setenv("TESSERA_MPI_TIMEOUT", "1e400", 1); /* past DBL_MAX: inf */
    t = -1;
    cr_assert_eq(tsr__mpi_timeout_env(&t), 1);
    cr_assert_eq(t, 0.0);
    setenv("TESSERA_MPI_TIMEOUT", "20", 1);
    cr_assert_eq(tsr__mpi_timeout_env(&t), 1);
    cr_assert_eq(t, 20.0);
    unsetenv("TESSERA_MPI_TIMEOUT");
    cr_assert_eq(tsr__mpi_timeout_env(&t), 0);
}
