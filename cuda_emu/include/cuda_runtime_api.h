/* cuda_emu/include/cuda_runtime_api.h — the host side of the emulated CUDA
 * runtime (-Dcuda=emu): the types, constants and cuda* calls the project uses,
 * with CUDA's names and numeric values, callable from C and C++.
 *
 * Must never: be seen by an nvcc build (it lives only on the emulation's
 * include path), or declare a call the emulation does not implement
 * (docs/cuda-emulation.md lists them).
 */
#ifndef TSR_EMU_CUDA_RUNTIME_API_H
#define TSR_EMU_CUDA_RUNTIME_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUDART_VERSION 12000
#define TSR_EMU_API __attribute__((visibility("default")))

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorCudartUnloading = 4,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidPitchValue = 12,
    cudaErrorInvalidSymbol = 13,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidKernelImage = 200,
    cudaErrorPeerAccessUnsupported = 217,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorLaunchTimeout = 702,
    cudaErrorPeerAccessAlreadyEnabled = 704,
    cudaErrorPeerAccessNotEnabled = 705,
    cudaErrorHostMemoryAlreadyRegistered = 712,
    cudaErrorHostMemoryNotRegistered = 713,
    cudaErrorLaunchFailure = 719,
    cudaErrorNotSupported = 801,
    cudaErrorUnknown = 999
} cudaError_t;

typedef enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
} cudaMemcpyKind;

enum cudaMemoryType {
    cudaMemoryTypeUnregistered = 0,
    cudaMemoryTypeHost = 1,
    cudaMemoryTypeDevice = 2,
    cudaMemoryTypeManaged = 3
};

typedef struct cudaPointerAttributes {
    enum cudaMemoryType type;
    int device;
    void *devicePointer;
    void *hostPointer;
} cudaPointerAttributes;

#define cudaStreamDefault 0x00u
#define cudaStreamNonBlocking 0x01u
#define cudaEventDefault 0x00u
#define cudaEventBlockingSync 0x01u
#define cudaEventDisableTiming 0x02u
#define cudaHostAllocDefault 0x00u
#define cudaHostAllocPortable 0x01u
#define cudaHostAllocMapped 0x02u
#define cudaHostAllocWriteCombined 0x04u
#define cudaHostRegisterDefault 0x00u
#define cudaHostRegisterPortable 0x01u
#define cudaHostRegisterMapped 0x02u
#define cudaHostRegisterIoMemory 0x04u
#define cudaHostRegisterReadOnly 0x08u

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef void (*cudaHostFn_t)(void *user_data);

/* Only the fields a program reads; the layout is not CUDA's. */
typedef struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    size_t sharedMemPerBlockOptin;
    size_t sharedMemPerMultiprocessor;
    size_t totalConstMem;
    int regsPerBlock;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int maxThreadsPerMultiProcessor;
    int clockRate;
    int memoryClockRate;
    int memoryBusWidth;
    int l2CacheSize;
    int multiProcessorCount;
    int major;
    int minor;
    int unifiedAddressing;
    int canMapHostMemory;
    int asyncEngineCount;
    int concurrentKernels;
    int pciBusID;
    int pciDeviceID;
    int pciDomainID;
    int integrated;
} cudaDeviceProp;

/* ---- vector types (CUDA's alignment) ---- */
typedef struct __attribute__((aligned(8))) float2 { float x, y; } float2;
typedef struct float3 { float x, y, z; } float3;
typedef struct __attribute__((aligned(16))) float4 { float x, y, z, w; } float4;
typedef struct __attribute__((aligned(8))) int2 { int x, y; } int2;
typedef struct int3 { int x, y, z; } int3;
typedef struct __attribute__((aligned(16))) int4 { int x, y, z, w; } int4;
typedef struct __attribute__((aligned(8))) uint2 { unsigned x, y; } uint2;
typedef struct uint3 { unsigned x, y, z; } uint3;
typedef struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; } uint4;
typedef struct __attribute__((aligned(16))) double2 { double x, y; } double2;
typedef struct __attribute__((aligned(4))) ushort2 { unsigned short x, y; } ushort2;
typedef struct __attribute__((aligned(8))) ushort4 { unsigned short x, y, z, w; } ushort4;

typedef struct dim3 {
    unsigned x, y, z;
#ifdef __cplusplus
    constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
#endif
} dim3;

/* ---- memory ---- */
TSR_EMU_API cudaError_t cudaMalloc(void **ptr, size_t bytes);
TSR_EMU_API cudaError_t cudaFree(void *ptr);
TSR_EMU_API cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned flags);
TSR_EMU_API cudaError_t cudaMallocHost(void **ptr, size_t bytes);
TSR_EMU_API cudaError_t cudaFreeHost(void *ptr);
TSR_EMU_API cudaError_t cudaHostRegister(void *ptr, size_t bytes, unsigned flags);
TSR_EMU_API cudaError_t cudaHostUnregister(void *ptr);
TSR_EMU_API cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
TSR_EMU_API cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *attr, const void *ptr);

/* ---- copies and fills ---- */
TSR_EMU_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind);
TSR_EMU_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                                        enum cudaMemcpyKind kind, cudaStream_t stream);
TSR_EMU_API cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
                                     size_t width, size_t height, enum cudaMemcpyKind kind);
TSR_EMU_API cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                                          size_t width, size_t height, enum cudaMemcpyKind kind,
                                          cudaStream_t stream);
TSR_EMU_API cudaError_t cudaMemcpyPeer(void *dst, int dst_device, const void *src, int src_device,
                                       size_t bytes);
TSR_EMU_API cudaError_t cudaMemcpyPeerAsync(void *dst, int dst_device, const void *src,
                                            int src_device, size_t bytes, cudaStream_t stream);
TSR_EMU_API cudaError_t cudaMemset(void *ptr, int value, size_t bytes);
TSR_EMU_API cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream);

/* ---- streams and events ---- */
TSR_EMU_API cudaError_t cudaStreamCreate(cudaStream_t *stream);
TSR_EMU_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
TSR_EMU_API cudaError_t cudaStreamDestroy(cudaStream_t stream);
TSR_EMU_API cudaError_t cudaStreamSynchronize(cudaStream_t stream);
TSR_EMU_API cudaError_t cudaStreamQuery(cudaStream_t stream);
TSR_EMU_API cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags);
TSR_EMU_API cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *user_data);
TSR_EMU_API cudaError_t cudaEventCreate(cudaEvent_t *event);
TSR_EMU_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags);
TSR_EMU_API cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
TSR_EMU_API cudaError_t cudaEventQuery(cudaEvent_t event);
TSR_EMU_API cudaError_t cudaEventSynchronize(cudaEvent_t event);
TSR_EMU_API cudaError_t cudaEventDestroy(cudaEvent_t event);
TSR_EMU_API cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);

/* ---- devices ---- */
TSR_EMU_API cudaError_t cudaGetDeviceCount(int *count);
TSR_EMU_API cudaError_t cudaSetDevice(int device);
TSR_EMU_API cudaError_t cudaGetDevice(int *device);
TSR_EMU_API cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
TSR_EMU_API cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer);
TSR_EMU_API cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags);
TSR_EMU_API cudaError_t cudaDeviceDisablePeerAccess(int peer);
TSR_EMU_API cudaError_t cudaDeviceSynchronize(void);
TSR_EMU_API cudaError_t cudaDeviceReset(void);
TSR_EMU_API cudaError_t cudaDriverGetVersion(int *version);
TSR_EMU_API cudaError_t cudaRuntimeGetVersion(int *version);

/* ---- errors ---- */
TSR_EMU_API cudaError_t cudaGetLastError(void);
TSR_EMU_API cudaError_t cudaPeekAtLastError(void);
TSR_EMU_API const char *cudaGetErrorString(cudaError_t error);
TSR_EMU_API const char *cudaGetErrorName(cudaError_t error);

/* ---- emulation only (TSR_CUDA_EMU) ----
 * The message of the calling thread's last failure found by the emulation
 * (a rejected pointer, a barrier deadlock, an injected failure...), or "" —
 * every such failure is also printed to stderr when TESSERA_CUDA_EMU_DEBUG=1. */
TSR_EMU_API const char *tsr_emu_last_message(void);
/* Where `ptr` lies: "device N", "pinned host", "registered host",
 * "pageable host" or "null" (a static string). */
TSR_EMU_API const char *tsr_emu_where(const void *ptr);
/* The number of kernel blocks run so far in this process (for tests). */
TSR_EMU_API unsigned long long tsr_emu_blocks_run(void);

#ifdef __cplusplus
}
#endif

#endif
