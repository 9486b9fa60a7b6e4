/* bench-gemm-ceiling — the machine's matrix-product ceilings that the GPT-2
 * step is measured against (bench/gpt2/run.sh), on the same thread count:
 *
 *   openblas_fp32  one OpenBLAS SGEMM of n^3 on T threads (its own threading)
 *   tile_fp32      Tessera's CPU GEMM kernel (kernels/gemm.h, the one the
 *                  step's tasks call) on T threads, each an n x n/T slice of
 *                  the same product: what T workers can reach at best
 *   tile_bf16      the same with bf16 inputs and fp32 accumulation
 *                  (tsr_cpu_gemm_bf16)
 *
 * Each figure is the best of --reps runs, in GFLOP/s (2 n^3 flops).
 * Output: a table, then one JSON line per figure
 *   {"bench":"gemm-ceiling","case":"openblas_fp32"|...,"threads":T,"n":N,
 *    "value":GFLOPS,"unit":"GFLOP/s"}
 *
 * usage: bench-gemm-ceiling [--threads T] [--n N] [--reps R]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>

#include "bench/bench_util.h"
#include "kernels/convert.h"
#include "kernels/gemm.h"

void openblas_set_num_threads(int n);

typedef struct slice {
    int n, cols, bf16;
    const float *a, *b;
    const uint16_t *a16, *b16;
    float *c;
    pthread_barrier_t *go;
    double seconds;
} slice_t;

/* C[:, j0 : j0 + cols] = A B[:, j0 : j0 + cols]   A, B, C (n, n) column-major */
static void *run_slice(void *arg)
{
    slice_t *s = arg;
    pthread_barrier_wait(s->go);
    double t = bench_now();
    if (s->bf16)
        tsr_cpu_gemm_bf16(TSR_NOTRANS, TSR_NOTRANS, s->n, s->cols, s->n, 1.0f, s->a16, s->n, 0,
                          s->b16, s->n, 0, 0.0f, s->c, 0, s->n, 0, 1);
    else
        tsr_cpu_gemm(TSR_NOTRANS, TSR_NOTRANS, s->n, s->cols, s->n, 1.0f, s->a, s->n, 0, s->b,
                     s->n, 0, 0.0f, s->c, s->n, 0, 1);
    s->seconds = bench_now() - t;
    return NULL;
}

/* The T slices at once; the time is the slowest slice's. */
static double tiles(int threads, int n, int bf16, const float *a, const float *b,
                    const uint16_t *a16, const uint16_t *b16, float *c)
{
    slice_t s[64];
    pthread_t th[64];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)threads);
    int per = n / threads;
    for (int i = 0; i < threads; i++) {
        int j0 = i * per, cols = i + 1 == threads ? n - j0 : per;
        s[i] = (slice_t){n, cols, bf16, a, b + (size_t)j0 * n, a16, b16 + (size_t)j0 * n,
                         c + (size_t)j0 * n, &go, 0.0};
        if (pthread_create(&th[i], NULL, run_slice, &s[i])) {
            /* the started slices wait at the barrier for ever: give up */
            fprintf(stderr, "bench-gemm-ceiling: cannot start %d threads\n", threads);
            exit(1);
        }
    }
    double worst = 0.0;
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        if (s[i].seconds > worst)
            worst = s[i].seconds;
    }
    pthread_barrier_destroy(&go);
    return worst;
}

int main(int argc, char **argv)
{
    int threads = 0, n = 4096, reps = 3;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int *dst = !strcmp(argv[i], "--threads") ? &threads
                   : !strcmp(argv[i], "--n")     ? &n
                   : !strcmp(argv[i], "--reps")  ? &reps
                                                 : NULL;
        if (!dst || !v || (*dst = atoi(v)) < 0) {
            fprintf(stderr, "usage: bench-gemm-ceiling [--threads T] [--n N] [--reps R]\n");
            return 2;
        }
        i++;
    }
    if (threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        threads = c > 0 ? (int)c : 1;
    }
    if (threads > 64 || n < threads || reps < 1) {
        fprintf(stderr, "bench-gemm-ceiling: need 1 <= threads <= 64, n >= threads, reps >= 1\n");
        return 2;
    }
    size_t nn = (size_t)n * n;
    float *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c);
    uint16_t *a16 = malloc(nn * sizeof *a16), *b16 = malloc(nn * sizeof *b16);
    if (!a || !b || !c || !a16 || !b16) {
        fprintf(stderr, "bench-gemm-ceiling: out of memory for n = %d\n", n);
        return 1;
    }
    for (size_t i = 0; i < nn; i++) {
        a[i] = (float)((i * 7) % 13) * 0.01f - 0.06f;
        b[i] = (float)((i * 5) % 11) * 0.01f - 0.05f;
    }
    tsr_cpu_f32_to_bf16(nn, a, a16);
    tsr_cpu_f32_to_bf16(nn, b, b16);
    double flops = 2.0 * n * (double)n * n;

    const char *names[] = {"openblas_fp32", "tile_fp32", "tile_bf16"};
    double best[3] = {1e30, 1e30, 1e30};
    openblas_set_num_threads(threads);
    for (int r = 0; r <= reps; r++) { /* run 0 warms up */
        double t = bench_now();
        cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f,
                    c, n);
        t = bench_now() - t;
        if (r > 0 && t < best[0])
            best[0] = t;
    }
    openblas_set_num_threads(1); /* the tile kernels run one per thread */
    for (int k = 1; k <= 2; k++)
        for (int r = 0; r <= reps; r++) {
            double t = tiles(threads, n, k == 2, a, b, a16, b16, c);
            if (r > 0 && t < best[k])
                best[k] = t;
        }

    printf("GEMM ceilings, n = %d, %d threads (best of %d)\n", n, threads, reps);
    printf("%-16s %12s\n", "case", "GFLOP/s");
    for (int k = 0; k < 3; k++)
        printf("%-16s %12.1f\n", names[k], flops / best[k] / 1e9);
    for (int k = 0; k < 3; k++)
        printf("{\"bench\":\"gemm-ceiling\",\"case\":\"%s\",\"threads\":%d,\"n\":%d,"
               "\"value\":%.4g,\"unit\":\"GFLOP/s\"}\n",
               names[k], threads, n, flops / best[k] / 1e9);
    free(a);
    free(b);
    free(c);
    free(a16);
    free(b16);
    return 0;
}
