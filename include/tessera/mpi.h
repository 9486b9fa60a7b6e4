/* mpi.h — Tessera beyond one node: a runtime per MPI rank, and tiles that
 * move between ranks through communication tasks in the task graph.
 *
 * A communication task names one handle with the usual access modes (a
 * send reads it, a receive writes it, an all-reduce or a broadcast reads
 * and writes it), so sequential task flow orders it with the compute tasks
 * around it and the scheduler overlaps it with them. One communication
 * thread per rank drives every transfer with non-blocking MPI calls; no
 * worker ever blocks in MPI. Buffers larger than MPI's int count are split.
 *
 * This header must never expose MPI's own types (an application does not
 * need <mpi.h> to use it), and nothing here aborts: an MPI error, or a
 * transfer that does not complete within the timeout (a rank that died or
 * stopped), fails the task with TSR_ETASK and a message naming the
 * operation, the handle's size and the peer rank where there is one.
 *
 * Order of calls: tsr_mpi_init, then tsr_init; tsr_shutdown, then
 * tsr_mpi_finalize. Every rank must submit the same collectives on the
 * same handles in the same order (as in MPI); the runtime posts them in
 * that order whatever order they become ready in. Under TESSERA_SIMULATE
 * the transfers return TSR_EINVAL (a simulated run has no peers). See
 * docs/mpi.md.
 *
 * Built with -Dmpi=auto (Open MPI, libopenmpi-dev). Without it every call
 * returns TSR_ENODEV with a message, tsr_mpi_size() is 1 and
 * tsr_mpi_rank() 0.
 */
#ifndef TESSERA_MPI_H
#define TESSERA_MPI_H

#include <tessera/tessera.h>

#ifdef __cplusplus
extern "C" {
#endif

/* MPI_Init_thread (argc, argv may be NULL). Also the job's size and rank.
 * TSR_ESTATE if called twice or after tsr_mpi_finalize. */
TSR_API int tsr_mpi_init(int *argc, char ***argv);
TSR_API int tsr_mpi_finalize(void);
/* Whether this build has MPI (1) or not (0). */
TSR_API int tsr_mpi_available(void);
/* This process's rank and the job's size (0 and 1 before tsr_mpi_init or
 * without MPI). */
TSR_API int tsr_mpi_rank(void);
TSR_API int tsr_mpi_size(void);

/* Seconds a communication task may wait for its peers before it fails
 * (default 300; TESSERA_MPI_TIMEOUT overrides at tsr_mpi_init). 0, INFINITY
 * or 1e9 and more: wait for ever. NaN or negative: TSR_EINVAL (checked
 * before TSR_ENODEV in a build without MPI). Tasks submitted afterwards get
 * it. */
TSR_API int tsr_mpi_set_timeout(double seconds);

/* Element types and reductions of the collectives. */
enum { TSR_MPI_FLOAT = 0, TSR_MPI_DOUBLE = 1, TSR_MPI_BYTE = 2 };
enum { TSR_MPI_SUM = 0, TSR_MPI_MAX = 1 };

/* Communication tasks, submitted like tsr_submit (asynchronous; they run
 * when the handle's earlier tasks are done). tag (0..32766) tells apart
 * several point-to-point transfers between the same two ranks. The
 * handle's size must be a whole number of elements (bytes for send, recv
 * and bcast). */
TSR_API int tsr_mpi_send(tsr_handle_t h, int dest, int tag);                /* R  */
TSR_API int tsr_mpi_recv(tsr_handle_t h, int source, int tag);              /* W  */
/* h (RW) = the elementwise reduction of h over every rank. The sum is in
 * a fixed order (rank 0 + rank 1 + ...) where bitwise reproducibility is
 * asked for (tsr_mpi_set_ordered), else MPI's own order. */
TSR_API int tsr_mpi_allreduce(tsr_handle_t h, int type, int op);           /* RW */
/* h (RW) = root's h on every rank. */
TSR_API int tsr_mpi_bcast(tsr_handle_t h, int root);                       /* RW */

/* 1: all-reduces add in rank order, so that results do not depend on MPI's
 * reduction tree (bitwise equal to a fixed-order sum: rank 0 gathers, adds
 * in rank order and broadcasts); 0 (default): MPI's own algorithm. Tasks
 * submitted afterwards get it. */
TSR_API int tsr_mpi_set_ordered(int ordered);

#ifdef __cplusplus
}
#endif
#endif
