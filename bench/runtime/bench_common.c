/* bench_common.c — kernels shared by every side of the runtime benchmark. */
#include "bench_runtime.h"

#include <cblas.h>

void bench_spin(double us)
{
    double end = bench_now() + us * 1e-6;
    while (bench_now() < end)
        ;
}

void bench_tile_gemm(size_t elem, int m, int n, int k, const void *a,
                     const void *b, void *c)
{
    if (elem == sizeof(double))
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0,
                    a, m, b, k, 1.0, c, m);
    else
        cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f,
                    a, m, b, k, 1.0f, c, m);
}
