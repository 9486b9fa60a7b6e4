/* The device side of the CUDA emulation: block barriers and warp exchanges
 * against sequential references, in every thread order; a race a shuffled
 * order exposes; a barrier some threads never reach is a launch failure
 * naming the kernel, the block and the barrier, not a hang. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "emu_kernels.h"

static const char *orders[] = {"forward", "reverse", "shuffle"};

static void *dev_copy(const void *h, size_t bytes)
{
    void *d = NULL;
    cr_assert_eq(cudaMalloc(&d, bytes), cudaSuccess);
    cr_assert_eq(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    return d;
}

Test(emu_device, block_barrier_sum_every_order_and_block_size)
{
    const int n = 1000, blocks[] = {32, 100, 256, 1024};
    float x[1000];
    for (int i = 0; i < n; i++)
        x[i] = (float)((i * 7) % 13) - 6.0f;
    float *dx = dev_copy(x, sizeof x), *dout;
    cr_assert_eq(cudaMalloc((void **)&dout, 64 * sizeof(float)), cudaSuccess);
    for (int o = 0; o < 3; o++)
        for (int b = 0; b < 4; b++) {
            setenv("TESSERA_CUDA_EMU_ORDER", orders[o], 1);
            int bs = blocks[b], nb = (n + bs - 1) / bs;
            cr_assert_eq(emu_block_sum(dx, n, bs, dout, 0), cudaSuccess);
            float got[64];
            cr_assert_eq(cudaMemcpy(got, dout, (size_t)nb * sizeof(float), cudaMemcpyDeviceToHost),
                         cudaSuccess);
            for (int k = 0; k < nb; k++) {
                float want = 0; /* small integers: exact in any order */
                for (int i = k * bs; i < n && i < (k + 1) * bs; i++)
                    want += x[i];
                cr_assert_eq(got[k], want, "order %s block %d: block %d sum %g, want %g",
                             orders[o], bs, k, got[k], want);
            }
        }
    cudaFree(dx), cudaFree(dout);
}

Test(emu_device, warp_shuffles_and_ballot_against_sequential)
{
    const int n = 64;
    int x[64];
    for (int i = 0; i < n; i++)
        x[i] = (i * 37 + 11) % 101;
    int *dx = dev_copy(x, sizeof x), *d[4];
    unsigned *dballot;
    for (int k = 0; k < 4; k++)
        cr_assert_eq(cudaMalloc((void **)&d[k], sizeof x), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&dballot, sizeof x), cudaSuccess);
    for (int o = 0; o < 3; o++) {
        setenv("TESSERA_CUDA_EMU_ORDER", orders[o], 1);
        cr_assert_eq(emu_warp_ops(dx, n, d[0], d[1], d[2], d[3], dballot, 0), cudaSuccess);
        int sum[64], down[64], scan[64], bcast[64];
        unsigned ballot[64];
        cudaMemcpy(sum, d[0], sizeof x, cudaMemcpyDeviceToHost);
        cudaMemcpy(down, d[1], sizeof x, cudaMemcpyDeviceToHost);
        cudaMemcpy(scan, d[2], sizeof x, cudaMemcpyDeviceToHost);
        cudaMemcpy(bcast, d[3], sizeof x, cudaMemcpyDeviceToHost);
        cr_assert_eq(cudaMemcpy(ballot, dballot, sizeof x, cudaMemcpyDeviceToHost), cudaSuccess);
        for (int w = 0; w < n / 32; w++) {
            int total = 0, run = 0;
            unsigned odd = 0;
            for (int l = 0; l < 32; l++) {
                total += x[w * 32 + l];
                odd |= (unsigned)(x[w * 32 + l] & 1) << l;
            }
            for (int l = 0; l < 32; l++) {
                int t = w * 32 + l;
                run += x[t];
                cr_assert_eq(sum[t], total, "%s: lane %d sum", orders[o], t);
                cr_assert_eq(down[t], l < 31 ? x[t + 1] : x[t], "%s: lane %d down", orders[o], t);
                cr_assert_eq(scan[t], run, "%s: lane %d scan", orders[o], t);
                cr_assert_eq(bcast[t], x[w * 32 + 5], "%s: lane %d broadcast", orders[o], t);
                cr_assert_eq(ballot[t], odd, "%s: lane %d ballot", orders[o], t);
            }
        }
    }
    cudaFree(dx), cudaFree(dballot);
    for (int k = 0; k < 4; k++)
        cudaFree(d[k]);
}

/* Lanes read lane 0's write without __syncwarp: in hardware order the race
 * hides (lane 0 goes first), a shuffled or reversed order shows it; with the
 * __syncwarp every order is right. */
Test(emu_device, racy_publish_is_caught_by_thread_order)
{
    int *d, got[32];
    cr_assert_eq(cudaMalloc((void **)&d, sizeof got), cudaSuccess);
    const char *catching[] = {"reverse", "shuffle"};
    for (int o = 0; o < 2; o++) {
        setenv("TESSERA_CUDA_EMU_ORDER", catching[o], 1);
        cr_assert_eq(emu_publish(0, d, 0), cudaSuccess);
        cr_assert_eq(cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost), cudaSuccess);
        int stale = 0;
        for (int l = 0; l < 32; l++)
            stale += got[l] != 42;
        cr_assert_gt(stale, 0, "order %s: the unfenced publish was not caught", catching[o]);
        cr_log_info("order %s: %d of 32 lanes read the slot before lane 0 wrote it", catching[o],
                    stale);
    }
    for (int o = 0; o < 3; o++) {
        setenv("TESSERA_CUDA_EMU_ORDER", orders[o], 1);
        cr_assert_eq(emu_publish(1, d, 0), cudaSuccess);
        cr_assert_eq(cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost), cudaSuccess);
        for (int l = 0; l < 32; l++)
            cr_assert_eq(got[l], 42, "order %s, fenced: lane %d read %d", orders[o], l, got[l]);
    }
    cudaFree(d);
}

Test(emu_device, partial_barrier_is_a_launch_failure_not_a_hang, .timeout = 20)
{
    setenv("TESSERA_CUDA_EMU_QUIET", "1", 1);
    float *d;
    cr_assert_eq(cudaMalloc((void **)&d, 64 * sizeof(float)), cudaSuccess);
    cudaStream_t s;
    cr_assert_eq(cudaStreamCreate(&s), cudaSuccess);
    cr_assert_eq(emu_partial_barrier(64, 40, d, s), cudaSuccess, "the launch itself is valid");
    cudaError_t e = cudaStreamSynchronize(s);
    cr_assert_eq(e, cudaErrorLaunchFailure, "synchronize returned %s", cudaGetErrorName(e));
    const char *m = tsr_emu_last_message();
    cr_assert(strstr(m, "k_partial_barrier") && strstr(m, "block (0,0,0)") &&
              strstr(m, "__syncthreads at") && strstr(m, "emu_kernels.cu") &&
              strstr(m, "40 of 64 threads") && strstr(m, "24 exited"),
              "message: %s", m);
    /* sticky, like a GPU context after a fault */
    cr_assert_eq(cudaGetLastError(), cudaErrorLaunchFailure);
    cr_assert_eq(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
    float buf[4];
    cr_assert_eq(cudaMemcpy(buf, d, sizeof buf, cudaMemcpyDeviceToHost), cudaErrorLaunchFailure);
}

Test(emu_device, dynamic_shared_memory_and_atomics)
{
    const int n = 96;
    float x[96], y[96];
    for (int i = 0; i < n; i++)
        x[i] = (float)i;
    float *dx = dev_copy(x, sizeof x), *dy;
    cr_assert_eq(cudaMalloc((void **)&dy, sizeof y), cudaSuccess);
    cr_assert_eq(emu_dyn_reverse(dx, dy, n, 0), cudaSuccess);
    cr_assert_eq(cudaMemcpy(y, dy, sizeof y, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < n; i++)
        cr_assert_eq(y[i], x[n - 1 - i]);
    int *cnt;
    float *fs;
    cr_assert_eq(cudaMalloc((void **)&cnt, sizeof(int)), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&fs, sizeof(float)), cudaSuccess);
    cr_assert_eq(cudaMemset(cnt, 0, sizeof(int)), cudaSuccess);
    cr_assert_eq(cudaMemset(fs, 0, sizeof(float)), cudaSuccess);
    cudaStream_t s[2];
    for (int k = 0; k < 2; k++)
        cr_assert_eq(cudaStreamCreateWithFlags(&s[k], cudaStreamNonBlocking), cudaSuccess);
    for (int k = 0; k < 2; k++)
        cr_assert_eq(emu_atomic_count(50, 128, cnt, fs, s[k]), cudaSuccess);
    cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
    int c;
    float f;
    cudaMemcpy(&c, cnt, sizeof c, cudaMemcpyDeviceToHost);
    cudaMemcpy(&f, fs, sizeof f, cudaMemcpyDeviceToHost);
    cr_assert_eq(c, 2 * 50 * 128);
    cr_assert_eq(f, 0.5f * 2 * 50 * 128);
    cr_assert_geq(tsr_emu_blocks_run(), 101);
    for (int k = 0; k < 2; k++)
        cudaStreamDestroy(s[k]);
}

Test(emu_device, invalid_configuration_is_the_launch_error)
{
    cr_assert_eq(emu_bad_config(0), cudaErrorInvalidConfiguration);
    cr_assert_eq(cudaGetLastError(), cudaSuccess, "a launch error is not sticky");
}

/* x rounded to TF32 as cvt.rna does (nearest, ties away from zero), in
 * double: the 10-bit mantissa grid */
static double tf32_rna(float x)
{
    int e;
    double m = frexp((double)x, &e); /* x = m 2^e, 0.5 <= |m| < 1 */
    double q = ldexp(m, 11);
    q = q < 0 ? -floor(-q + 0.5) : floor(q + 0.5);
    return ldexp(q, e - 11);
}

Test(emu_device, mma_tf32_fragment_layouts_against_double)
{
    float a[128], b[64], c[128], d[128];
    unsigned seed = 7;
    for (int i = 0; i < 128; i++) {
        seed = seed * 1103515245u + 12345u;
        a[i] = (float)((int)(seed >> 16 & 1023) - 512) / 97.0f;
        c[i] = (float)i / 16.0f;
    }
    for (int i = 0; i < 64; i++) {
        seed = seed * 1103515245u + 12345u;
        b[i] = (float)((int)(seed >> 16 & 1023) - 512) / 89.0f;
    }
    float *da = dev_copy(a, sizeof a), *db = dev_copy(b, sizeof b), *dc = dev_copy(c, sizeof c);
    float *dd;
    cr_assert_eq(cudaMalloc((void **)&dd, sizeof d), cudaSuccess);
    for (size_t o = 0; o < sizeof orders / sizeof orders[0]; o++) {
        setenv("TESSERA_CUDA_EMU_ORDER", orders[o], 1);
        cr_assert_eq(emu_mma_tf32(da, db, dc, dd, 0), cudaSuccess);
        cr_assert_eq(cudaMemcpy(d, dd, sizeof d, cudaMemcpyDeviceToHost), cudaSuccess);
        for (int r = 0; r < 16; r++)
            for (int n = 0; n < 8; n++) {
                double want = c[r * 8 + n], mag = fabs(want);
                for (int k = 0; k < 8; k++) {
                    want += tf32_rna(a[r * 8 + k]) * tf32_rna(b[k * 8 + n]);
                    mag += fabs(tf32_rna(a[r * 8 + k]) * tf32_rna(b[k * 8 + n]));
                }
                cr_assert(fabs(d[r * 8 + n] - want) <= 1e-6 * mag, "%s order: d(%d, %d) = %.9g, want %.9g",
                          orders[o], r, n, d[r * 8 + n], want);
            }
    }
    unsetenv("TESSERA_CUDA_EMU_ORDER");
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    cudaFree(dd);
}

/* x rounded to bf16 (nearest, ties to even), in double: 8 significant bits */
static double bf16_rne(float x)
{
    int e;
    double m = frexp((double)x, &e);
    double q = ldexp(m, 8), f = floor(q), r = q - f;
    q = r > 0.5 ? f + 1 : r < 0.5 ? f : (fmod(f, 2.0) == 0 ? f : f + 1);
    return ldexp(q, e - 8);
}

Test(emu_device, mma_bf16_fragment_layouts_against_double)
{
    float a[256], b[128], c[128], d[128];
    unsigned seed = 11;
    for (int i = 0; i < 256; i++) {
        seed = seed * 1103515245u + 12345u;
        a[i] = (float)((int)(seed >> 16 & 1023) - 512) / 97.0f;
    }
    for (int i = 0; i < 128; i++) {
        seed = seed * 1103515245u + 12345u;
        b[i] = (float)((int)(seed >> 16 & 1023) - 512) / 89.0f;
        c[i] = (float)i / 16.0f;
    }
    float *da = dev_copy(a, sizeof a), *db = dev_copy(b, sizeof b), *dc = dev_copy(c, sizeof c);
    float *dd;
    cr_assert_eq(cudaMalloc((void **)&dd, sizeof d), cudaSuccess);
    for (size_t o = 0; o < sizeof orders / sizeof orders[0]; o++) {
        setenv("TESSERA_CUDA_EMU_ORDER", orders[o], 1);
        cr_assert_eq(emu_mma_bf16(da, db, dc, dd, 0), cudaSuccess);
        cr_assert_eq(cudaMemcpy(d, dd, sizeof d, cudaMemcpyDeviceToHost), cudaSuccess);
        for (int r = 0; r < 16; r++)
            for (int n = 0; n < 8; n++) {
                double want = c[r * 8 + n], mag = fabs(want);
                for (int k = 0; k < 16; k++) {
                    double p = bf16_rne(a[r * 16 + k]) * bf16_rne(b[k * 8 + n]);
                    want += p;
                    mag += fabs(p);
                }
                cr_assert(fabs(d[r * 8 + n] - want) <= 1e-6 * mag,
                          "%s order: d(%d, %d) = %.9g, want %.9g", orders[o], r, n, d[r * 8 + n],
                          want);
            }
    }
    unsetenv("TESSERA_CUDA_EMU_ORDER");
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    cudaFree(dd);
}
