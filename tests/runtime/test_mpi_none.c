/* tests/runtime/test_mpi_none.c — tessera/mpi.h in a build without MPI
 * (-Dmpi=disabled, the sanitizer builds): one process, rank 0 of 1, and
 * every call that needs MPI returns TSR_ENODEV with a message naming the
 * call and the build option. The build with MPI runs tests/mpi instead. */
#include <criterion/criterion.h>
#include <string.h>
#include <tessera/mpi.h>

#include "util.h"

Test(mpi_none, one_process_and_enodev)
{
    cr_assert_eq(tsr_mpi_available(), 0);
    cr_assert_eq(tsr_mpi_rank(), 0);
    cr_assert_eq(tsr_mpi_size(), 1);
    cr_assert_eq(tsr_mpi_init(NULL, NULL), TSR_ENODEV);
    cr_assert(strstr(tsr_error_message(), "mpi_init") != NULL, "%s", tsr_error_message());
    cr_assert(strstr(tsr_error_message(), "-Dmpi=enabled") != NULL, "%s", tsr_error_message());
    cr_assert_eq(tsr_mpi_set_timeout(2.0), TSR_ENODEV);
    cr_assert_eq(tsr_mpi_set_ordered(1), TSR_ENODEV);

    /* With a runtime and a live handle: still no transfer. */
    start_runtime(2, NULL, 0);
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_alloc(&h, 64), TSR_OK);
    cr_assert_eq(tsr_mpi_send(h, 0, 0), TSR_ENODEV);
    cr_assert_eq(tsr_mpi_recv(h, 0, 0), TSR_ENODEV);
    cr_assert_eq(tsr_mpi_allreduce(h, TSR_MPI_FLOAT, TSR_MPI_SUM), TSR_ENODEV);
    cr_assert_eq(tsr_mpi_bcast(h, 0), TSR_ENODEV);
    cr_assert(strstr(tsr_error_message(), "mpi_bcast") != NULL, "%s", tsr_error_message());
    cr_assert_eq(tsr_wait_all(), TSR_OK); /* nothing was submitted */
    cr_assert_eq(tsr_handle_unregister(h), TSR_OK);
    cr_assert_eq(tsr_shutdown(), TSR_OK);
    cr_assert_eq(tsr_mpi_finalize(), TSR_ENODEV);
}
