/* runtime/mpi_none.c — tessera/mpi.h in a build without MPI: one process,
 * rank 0 of 1, and every call that would need MPI returns TSR_ENODEV with a
 * message (the build option that enables it: -Dmpi=enabled). */
#include <tessera/mpi.h>

#include <stdio.h>

#include "runtime/error.h"
#include "runtime/internal.h"

static int none(const char *fn)
{
    return tsr__fail(TSR_ENODEV, "%s: this build has no MPI (configure with -Dmpi=enabled and "
                                 "Open MPI's libopenmpi-dev)", fn);
}

int tsr_mpi_available(void)
{
    return 0;
}

int tsr_mpi_rank(void)
{
    return 0;
}

int tsr_mpi_size(void)
{
    return 1;
}

/* Arguments are checked before the missing MPI is reported, as with MPI:
 * a bad timeout is the same error in every build. */
int tsr_mpi_init(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    double t;
    int rc = tsr__mpi_timeout_env(&t);
    return rc < 0 ? rc : none("mpi_init");
}

int tsr_mpi_finalize(void)
{
    return none("mpi_finalize");
}

int tsr_mpi_set_timeout(double seconds)
{
    double t;
    int rc = tsr__mpi_timeout(seconds, "mpi_set_timeout", &t);
    return rc < 0 ? rc : none("mpi_set_timeout");
}

int tsr_mpi_set_ordered(int ordered)
{
    (void)ordered;
    return none("mpi_set_ordered");
}

int tsr_mpi_send(tsr_handle_t h, int dest, int tag)
{
    (void)h, (void)dest, (void)tag;
    return none("mpi_send");
}

int tsr_mpi_recv(tsr_handle_t h, int source, int tag)
{
    (void)h, (void)source, (void)tag;
    return none("mpi_recv");
}

int tsr_mpi_allreduce(tsr_handle_t h, int type, int op)
{
    (void)h, (void)type, (void)op;
    return none("mpi_allreduce");
}

int tsr_mpi_bcast(tsr_handle_t h, int root)
{
    (void)h, (void)root;
    return none("mpi_bcast");
}

/* No communication task can be submitted without MPI: nothing to run or
 * stop. */
void tsr__comm_ready(tsr_task_t t)
{
    snprintf(t->mreq.err, sizeof t->mreq.err, "this build has no MPI");
    tsr__task_complete(t, TSR_RESULT_FAILED, -1);
}

void tsr__comm_stop(void)
{
}

size_t tsr__comm_trace(const struct tsr_trace_event **ev)
{
    *ev = NULL;
    return 0;
}

void tsr__comm_trace_free(void)
{
}
