/* The host side of the CUDA emulation: pointer checks on kernels and copies,
 * stream and event ordering under random delays, the legacy default stream,
 * peer copies between emulated devices, memory accounting, injected
 * failures. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "emu_kernels.h"

static int msg_has(const char *s) { return strstr(tsr_emu_last_message(), s) != NULL; }

Test(emu_host, kernel_pointer_arguments_are_checked)
{
    setenv("TESSERA_CUDA_EMU_QUIET", "1", 1);
    float *host = calloc(64, sizeof(float)), *d0, *d1, *pinned;
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&d0, 64 * sizeof(float)), cudaSuccess);
    cr_assert_eq(cudaSetDevice(1), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&d1, 64 * sizeof(float)), cudaSuccess);
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    cr_assert_str_eq(tsr_emu_where(d1), "device 1");
    cr_assert_str_eq(tsr_emu_where(host), "pageable host");
    /* pageable host memory: what a SCRATCH buffer from malloc would be */
    cr_assert_eq(emu_scale(host, 64, 2.0f, 0), cudaErrorIllegalAddress);
    cr_assert(msg_has("k_scale") && msg_has("argument 0") && msg_has("pageable host"), "%s",
              tsr_emu_last_message());
    /* the other device's memory without peer access */
    cr_assert_eq(emu_scale(d1, 64, 2.0f, 0), cudaErrorIllegalAddress);
    cr_assert(msg_has("device 1 memory") && msg_has("peer access is not enabled"), "%s",
              tsr_emu_last_message());
    /* freed memory */
    cr_assert_eq(cudaFree(d0), cudaSuccess);
    cr_assert_eq(emu_scale(d0, 64, 2.0f, 0), cudaErrorIllegalAddress);
    cr_assert(msg_has("not allocated"), "%s", tsr_emu_last_message());
    /* pinned host memory and, with peer access, the peer's memory are fine */
    cr_assert_eq(cudaHostAlloc((void **)&pinned, 64 * sizeof(float), cudaHostAllocDefault),
                 cudaSuccess);
    for (int i = 0; i < 64; i++)
        pinned[i] = (float)i;
    cr_assert_eq(emu_scale(pinned, 64, 2.0f, 0), cudaSuccess);
    cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
    for (int i = 0; i < 64; i++)
        cr_assert_eq(pinned[i], 2.0f * (float)i);
    cr_assert_eq(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
    cr_assert_eq(emu_scale(d1, 64, 2.0f, 0), cudaSuccess);
    cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
    /* registered host memory */
    cr_assert_eq(cudaHostRegister(host, 64 * sizeof(float), cudaHostRegisterDefault), cudaSuccess);
    cr_assert_str_eq(tsr_emu_where(host + 3), "registered host");
    cr_assert_eq(emu_scale(host, 64, 2.0f, 0), cudaSuccess);
    cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
    cr_assert_eq(cudaHostUnregister(host), cudaSuccess);
    cr_assert_eq(cudaHostUnregister(host), cudaErrorHostMemoryNotRegistered);
    cudaFreeHost(pinned);
    free(host);
}

Test(emu_host, copies_check_kind_and_bounds)
{
    setenv("TESSERA_CUDA_EMU_QUIET", "1", 1);
    float h[32] = {0}, *d, *d2;
    cr_assert_eq(cudaMalloc((void **)&d, sizeof h), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&d2, sizeof h), cudaSuccess);
    cr_assert_eq(cudaMemcpy(h, d, sizeof h, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    cr_assert(msg_has("must be device memory"), "%s", tsr_emu_last_message());
    cr_assert_eq(cudaMemcpy(d, h, sizeof h, cudaMemcpyDeviceToDevice), cudaErrorInvalidValue);
    cr_assert_eq(cudaMemcpy(h, d, sizeof h, cudaMemcpyHostToHost), cudaErrorInvalidValue);
    cr_assert_eq(cudaMemcpy(d, h, 2 * sizeof h, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    cr_assert(msg_has("overrun"), "%s", tsr_emu_last_message());
    cr_assert_eq(cudaMemset(h, 0, sizeof h), cudaErrorInvalidValue);
    /* cudaMemcpyDefault infers the direction */
    for (int i = 0; i < 32; i++)
        h[i] = (float)i;
    cr_assert_eq(cudaMemcpy(d, h, sizeof h, cudaMemcpyDefault), cudaSuccess);
    cr_assert_eq(cudaMemcpy(d2, d, sizeof h, cudaMemcpyDefault), cudaSuccess);
    float back[32];
    cr_assert_eq(cudaMemcpy(back, d2, sizeof back, cudaMemcpyDefault), cudaSuccess);
    cr_assert_arr_eq(back, h, sizeof h);
    cr_assert_eq(cudaFree(h), cudaErrorInvalidValue);
    cr_assert_eq(cudaFree(d + 1), cudaErrorInvalidValue);
    cudaPointerAttributes a;
    cr_assert_eq(cudaPointerGetAttributes(&a, d2), cudaSuccess);
    cr_assert_eq(a.type, cudaMemoryTypeDevice);
    cr_assert_eq(a.device, 0);
    cr_assert_eq(cudaPointerGetAttributes(&a, h), cudaSuccess);
    cr_assert_eq(a.type, cudaMemoryTypeUnregistered);
}

/* s1 scales a pinned buffer and records an event; s2 waits for it and copies
 * the result to device 0 memory; the legacy stream copies it back. Random
 * delays in every stream thread: only the ordering makes the result right. */
Test(emu_host, streams_and_events_order_under_jitter)
{
    setenv("TESSERA_CUDA_EMU_JITTER", "1", 1);
    const int n = 256, rounds = 40;
    float *p, *d, *back;
    cr_assert_eq(cudaHostAlloc((void **)&p, n * sizeof(float), 0), cudaSuccess);
    cr_assert_eq(cudaHostAlloc((void **)&back, n * sizeof(float), 0), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&d, n * sizeof(float)), cudaSuccess);
    cudaStream_t s1, s2;
    cudaEvent_t ev;
    cr_assert_eq(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
    cr_assert_eq(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), cudaSuccess);
    cr_assert_eq(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), cudaSuccess);
    cr_assert_eq(cudaEventQuery(ev), cudaSuccess, "an event never recorded is complete");
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < n; i++)
            p[i] = (float)(i + r);
        cr_assert_eq(emu_scale(p, n, 3.0f, s1), cudaSuccess);
        cr_assert_eq(cudaEventRecord(ev, s1), cudaSuccess);
        cr_assert_eq(cudaStreamWaitEvent(s2, ev, 0), cudaSuccess);
        cr_assert_eq(cudaMemcpyAsync(d, p, n * sizeof(float), cudaMemcpyHostToDevice, s2),
                     cudaSuccess);
        cr_assert_eq(emu_scale(d, n, 0.5f, s2), cudaSuccess);
        cr_assert_eq(cudaMemcpyAsync(back, d, n * sizeof(float), cudaMemcpyDeviceToHost, s2),
                     cudaSuccess);
        cr_assert_eq(cudaStreamSynchronize(s2), cudaSuccess);
        cr_assert_eq(cudaStreamQuery(s2), cudaSuccess);
        for (int i = 0; i < n; i++)
            cr_assert_eq(back[i], 1.5f * (float)(i + r), "round %d [%d]: %g", r, i, back[i]);
    }
    /* a blocking stream's work is ordered before later legacy-stream work */
    cudaStream_t sb;
    cr_assert_eq(cudaStreamCreate(&sb), cudaSuccess);
    for (int i = 0; i < n; i++)
        p[i] = 1.0f;
    cr_assert_eq(cudaMemcpyAsync(d, p, n * sizeof(float), cudaMemcpyHostToDevice, sb), cudaSuccess);
    cr_assert_eq(emu_scale(d, n, 4.0f, sb), cudaSuccess);
    float h[256];
    cr_assert_eq(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < n; i++)
        cr_assert_eq(h[i], 4.0f);
    cudaEventDestroy(ev);
    cudaStreamDestroy(s1), cudaStreamDestroy(s2), cudaStreamDestroy(sb);
}

Test(emu_host, peer_copies_between_emulated_devices)
{
    int count = 0;
    cr_assert_eq(cudaGetDeviceCount(&count), cudaSuccess);
    cr_assert_geq(count, 2);
    int can = 0;
    cr_assert_eq(cudaDeviceCanAccessPeer(&can, 0, 1), cudaSuccess);
    cr_assert_eq(can, 1);
    const int n = 1000;
    float h[1000], back[1000], *d0, *d1;
    for (int i = 0; i < n; i++)
        h[i] = (float)i * 0.25f;
    cudaSetDevice(0);
    cr_assert_eq(cudaMalloc((void **)&d0, sizeof h), cudaSuccess);
    cudaStream_t s;
    cr_assert_eq(cudaStreamCreate(&s), cudaSuccess);
    cudaSetDevice(1);
    cr_assert_eq(cudaMalloc((void **)&d1, sizeof h), cudaSuccess);
    cudaSetDevice(0);
    cr_assert_eq(cudaMemcpy(d0, h, sizeof h, cudaMemcpyHostToDevice), cudaSuccess);
    cr_assert_eq(cudaMemcpyPeerAsync(d1, 1, d0, 0, sizeof h, s), cudaSuccess);
    cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
    cr_assert_eq(cudaMemcpy(back, d1, sizeof back, cudaMemcpyDeviceToHost), cudaSuccess);
    cr_assert_arr_eq(back, h, sizeof h);
    setenv("TESSERA_CUDA_EMU_QUIET", "1", 1);
    cr_assert_eq(cudaMemcpyPeerAsync(d1, 0, d0, 0, sizeof h, s), cudaErrorInvalidValue);
    cr_assert(msg_has("not on device 0"), "%s", tsr_emu_last_message());
    /* each device has its own arena and its own free bytes */
    size_t f0, t0, f1, t1;
    cudaSetDevice(0);
    cr_assert_eq(cudaMemGetInfo(&f0, &t0), cudaSuccess);
    cudaSetDevice(1);
    cr_assert_eq(cudaMemGetInfo(&f1, &t1), cudaSuccess);
    void *big;
    cr_assert_eq(cudaMalloc(&big, 8 << 20), cudaSuccess);
    size_t f1b;
    cr_assert_eq(cudaMemGetInfo(&f1b, &t1), cudaSuccess);
    cr_assert_eq(f1 - f1b, (size_t)8 << 20);
    cudaSetDevice(0);
    size_t f0b;
    cr_assert_eq(cudaMemGetInfo(&f0b, &t0), cudaSuccess);
    cr_assert_eq(f0b, f0);
    cudaStreamDestroy(s);
}

Test(emu_host, device_memory_is_bounded_by_the_arena)
{
    setenv("TESSERA_CUDA_EMU_MEM", "1", 1); /* read at the first call: 1 MiB devices */
    void *a, *b;
    cr_assert_eq(cudaMalloc(&a, 768 << 10), cudaSuccess);
    cr_assert_eq(cudaMalloc(&b, 512 << 10), cudaErrorMemoryAllocation);
    cr_assert(msg_has("cudaMalloc"), "%s", tsr_emu_last_message());
    cr_assert_eq(cudaFree(a), cudaSuccess);
    cr_assert_eq(cudaMalloc(&b, 1 << 20), cudaSuccess, "freed memory is reused");
}

Test(emu_host, injected_failures)
{
    setenv("TESSERA_CUDA_EMU_QUIET", "1", 1);
    setenv("TESSERA_CUDA_EMU_FAIL", "cudaMalloc:2,cudaMemcpyAsync:1,launch:2", 1);
    void *a, *b, *c;
    cr_assert_eq(cudaMalloc(&a, 1024), cudaSuccess);
    cr_assert_eq(cudaMalloc(&b, 1024), cudaErrorMemoryAllocation);
    cr_assert(msg_has("injected"), "%s", tsr_emu_last_message());
    cr_assert_eq(cudaMalloc(&c, 1024), cudaSuccess);
    float h[4] = {1, 2, 3, 4};
    cr_assert_eq(cudaMemcpyAsync(a, h, sizeof h, cudaMemcpyHostToDevice, 0), cudaErrorLaunchFailure);
    cr_assert_eq(cudaGetLastError(), cudaErrorLaunchFailure, "the failure is the last error");
    cr_assert_eq(cudaMemcpyAsync(a, h, sizeof h, cudaMemcpyHostToDevice, 0), cudaSuccess);
    cr_assert_eq(emu_scale(a, 4, 2.0f, 0), cudaSuccess);
    cr_assert_eq(emu_scale(a, 4, 2.0f, 0), cudaErrorLaunchFailure);
    cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess, "a failed launch is not sticky");
    /* an injected kernel fault is: the next synchronisation reports it */
    setenv("TESSERA_CUDA_EMU_FAIL", "kernel:1", 1);
    /* the launch does not see the fault: only a synchronisation does */
    cr_assert_eq(emu_scale(a, 4, 2.0f, 0), cudaSuccess);
    cr_assert_eq(emu_scale(a, 4, 2.0f, 0), cudaSuccess);
    cr_assert_eq(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
    cr_assert(msg_has("k_scale"), "%s", tsr_emu_last_message());
    /* from then on, every call reports it */
    cr_assert_eq(emu_scale(a, 4, 2.0f, 0), cudaErrorLaunchFailure);
    cr_assert_eq(cudaGetLastError(), cudaErrorLaunchFailure);
    cr_assert_eq(cudaMalloc(&b, 16), cudaErrorLaunchFailure);
}
