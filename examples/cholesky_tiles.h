/* cholesky_tiles.h — a tiled Cholesky factorization A = L L^T (lower
 * triangular, double precision) over a tiled_matrix_t: the four tile kernels
 * (each one single-threaded OpenBLAS/LAPACKE call), the task priorities, an
 * SPD test matrix, the check against LAPACKE, and the Tessera submission loop.
 *
 * Shared by examples/cholesky.c and the runtime benchmarks (whose StarPU side
 * calls the same kernels and priorities). Only the lower tiles (i >= j) are
 * read or written. The kernels must never start threads of their own: the
 * caller sets openblas_set_num_threads(1) before submitting.
 */
#ifndef TESSERA_EXAMPLES_CHOLESKY_TILES_H
#define TESSERA_EXAMPLES_CHOLESKY_TILES_H

#include "tiles.h"

/* ---- tile kernels (column-major, leading dimension = rows) ------------- */

/* A_kk = chol(A_kk), n x n. Returns LAPACK's info (0: success). */
int chol_tile_potrf(double *akk, int n);
/* A_ik = A_ik * L_kk^-T; A_ik is m x n, L_kk n x n. */
void chol_tile_trsm(const double *lkk, int n, double *aik, int m);
/* A_jj -= A_jk * A_jk^T (lower part); A_jk is m x k. */
void chol_tile_syrk(const double *ajk, int m, int k, double *ajj);
/* A_ij -= A_ik * A_jk^T; A_ik is m x k, A_jk is n x k, A_ij m x n. */
void chol_tile_gemm(const double *aik, int m, const double *ajk, int n, int k,
                    double *aij);

/* ---- priorities (larger runs first): the critical path first ----------- */

static inline int chol_prio_potrf(int nt, int k) { return 2 * nt - 2 * k; }
static inline int chol_prio_trsm(int nt, int k, int i) { return 2 * nt - 2 * k - i; }
static inline int chol_prio_syrk(int nt, int k, int j) { return 2 * nt - 2 * k - 2 * j; }
static inline int chol_prio_gemm(int nt, int k, int i, int j) { return 2 * nt - 2 * k - i - j; }

/* Floating-point operations of a Cholesky of order n (n^3/3). */
double chol_flops(int n);

/* ---- test matrix and check --------------------------------------------- */

/* Fill a full column-major n x n matrix (ld n) with a symmetric, diagonally
 * dominant (so positive definite) matrix; the same seed gives the same
 * matrix. */
void chol_spd_matrix(double *a, int n, unsigned seed);

/* ||L - L_ref||_F / ||L_ref||_F over the lower triangle, where L is the
 * tiled factor and l_ref a full column-major factor (ld n). */
double chol_rel_error(const tiled_matrix_t *l, const double *l_ref);

/* A relative error above this means the factorization is wrong. */
#define CHOL_TOLERANCE 1e-10

/* ---- Tessera ------------------------------------------------------------ */

/* Factor a (elem 8) in place with the running Tessera runtime: registers the
 * lower tiles, submits every tile task in program order (with the
 * priorities above), waits and unregisters. *seconds (may be NULL) gets the
 * time from the first submission to the end of the wait. Returns TSR_OK or
 * the failing call's status (TSR_ETASK if a tile was not positive
 * definite). */
int chol_factor_tessera(tiled_matrix_t *a, double *seconds);

#endif
