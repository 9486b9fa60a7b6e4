/* cuda_emu/include/cuda_runtime.h — the emulated CUDA runtime (-Dcuda=emu):
 * the host API (cuda_runtime_api.h) and, in C++, the device side the
 * project's kernels use: __global__ and friends, threadIdx/blockIdx/blockDim/
 * gridDim, block and warp barriers, shuffles, votes, atomics, math, vector
 * helpers, and tsr_emu_launch (what TSR_LAUNCH expands to).
 *
 * A block's threads run as fibers on the stream's thread (cuda_emu/device.cc):
 * `__shared__` is therefore per-OS-thread storage, reused by one block after
 * another. Must never: give a kernel anything a GPU would not (no ordering
 * between threads outside barriers, no host memory unless pinned), or hang on
 * a barrier some threads never reach (that is a launch failure).
 */
#ifndef TSR_EMU_CUDA_RUNTIME_H
#define TSR_EMU_CUDA_RUNTIME_H

#include "cuda_runtime_api.h"

#ifdef __cplusplus
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cmath>
#include <tuple>
#include <type_traits>
#include <utility>

/* ---- qualifiers ---- */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static thread_local
#define __constant__ static
#define __align__(n) __attribute__((aligned(n)))

/* ---- the running thread and block (set by the fiber scheduler) ---- */
struct tsr_emu_block_ctx {
    uint3 idx;
    dim3 dim;
    dim3 grid;
    void *dyn_shared;
};
struct tsr_emu_thread_ctx {
    uint3 idx;
    unsigned linear; /* x + y*dim.x + z*dim.x*dim.y: lane = linear % 32 */
};
extern "C" {
TSR_EMU_API extern __thread const tsr_emu_block_ctx *tsr_emu_cur_block;
TSR_EMU_API extern __thread const tsr_emu_thread_ctx *tsr_emu_cur_thread;
/* Block barrier: returns when every thread of the block has reached one. */
TSR_EMU_API void tsr_emu_syncthreads(const char *file, int line);
/* Warp exchange: `op` (TSR_EMU_WARP_*), the lanes named in `mask` meet; each
 * gives `value` and the lane it reads from; returns that lane's value (or
 * the vote's result). */
TSR_EMU_API unsigned long long tsr_emu_warp(int op, unsigned mask, unsigned long long value,
                                            int src_lane, const char *file, int line);
/* Launch steps (tsr_emu_launch): 0, or the launch failed (last error set). */
TSR_EMU_API int tsr_emu_launch_check(const char *name, dim3 grid, dim3 block, size_t shared_bytes,
                                     cudaStream_t stream);
TSR_EMU_API int tsr_emu_launch_arg(const char *name, cudaStream_t stream, int index,
                                   const void *ptr);
TSR_EMU_API void tsr_emu_launch_submit(const char *name, dim3 grid, dim3 block,
                                       size_t shared_bytes, cudaStream_t stream,
                                       void (*run)(void *), void (*drop)(void *),
                                       void *closure);
}
#define TSR_EMU_WARP_SYNC 0
#define TSR_EMU_WARP_SHFL 1
#define TSR_EMU_WARP_BALLOT 2
#define TSR_EMU_WARP_ANY 3
#define TSR_EMU_WARP_ALL 4
#define TSR_EMU_WARP_GATHER 5

#define threadIdx (tsr_emu_cur_thread->idx)
#define blockIdx (tsr_emu_cur_block->idx)
#define blockDim (tsr_emu_cur_block->dim)
#define gridDim (tsr_emu_cur_block->grid)
static constexpr int warpSize = 32;

static inline void *tsr_emu_dynamic_shared(void) { return tsr_emu_cur_block->dyn_shared; }

/* ---- barriers ---- */
static inline void __syncthreads(const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    __asm__ __volatile__("" ::: "memory");
    tsr_emu_syncthreads(file, line);
    __asm__ __volatile__("" ::: "memory");
}
static inline void __syncwarp(unsigned mask = 0xffffffffu, const char *file = __builtin_FILE(),
                              int line = __builtin_LINE())
{
    __asm__ __volatile__("" ::: "memory");
    (void)tsr_emu_warp(TSR_EMU_WARP_SYNC, mask, 0, -1, file, line);
    __asm__ __volatile__("" ::: "memory");
}
static inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline unsigned __activemask(void) { return 0xffffffffu; }
static inline unsigned __lanemask_lt(void) { return (1u << (tsr_emu_cur_thread->linear & 31)) - 1u; }

/* ---- shuffles and votes ---- */
template <class T>
static inline T tsr_emu_shfl(unsigned mask, T v, int src, const char *file, int line)
{
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                  "shuffle of a type wider than 8 bytes");
    unsigned long long bits = 0;
    memcpy(&bits, &v, sizeof v);
    bits = tsr_emu_warp(TSR_EMU_WARP_SHFL, mask, bits, src, file, line);
    T out;
    memcpy(&out, &bits, sizeof out);
    return out;
}
static inline int tsr_emu_lane(void) { return (int)(tsr_emu_cur_thread->linear & 31u); }
template <class T>
static inline T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32,
                            const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    int lane = tsr_emu_lane(), base = lane & ~(width - 1);
    return tsr_emu_shfl(mask, v, base + (src_lane & (width - 1)), file, line);
}
template <class T>
static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32,
                               const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    int lane = tsr_emu_lane(), base = lane & ~(width - 1), src = lane - (int)delta;
    return tsr_emu_shfl(mask, v, src < base ? lane : src, file, line);
}
template <class T>
static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32,
                                 const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    int lane = tsr_emu_lane(), base = lane & ~(width - 1), src = lane + (int)delta;
    return tsr_emu_shfl(mask, v, src >= base + width ? lane : src, file, line);
}
template <class T>
static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32,
                                const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    int lane = tsr_emu_lane(), base = lane & ~(width - 1), src = lane ^ lane_mask;
    return tsr_emu_shfl(mask, v, src >= base + width ? lane : src, file, line);
}
/* Every lane of the full warp deposits `bytes` bytes at `in`; each gets all
 * 32 deposits, lane k's at all + k*bytes (the emulated PTX instructions that
 * read other lanes' registers, cuda_emu/include/ptx_emu.h, are built on it). */
struct tsr_emu_gather_args {
    const void *in;
    void *all;
    unsigned bytes;
};
static inline void tsr_emu_warp_gather(const void *in, void *all, unsigned bytes,
                                       const char *file = __builtin_FILE(),
                                       int line = __builtin_LINE())
{
    tsr_emu_gather_args g = {in, all, bytes};
    (void)tsr_emu_warp(TSR_EMU_WARP_GATHER, 0xffffffffu, (unsigned long long)(uintptr_t)&g, -1,
                       file, line);
}
static inline unsigned __ballot_sync(unsigned mask, int pred, const char *file = __builtin_FILE(),
                                     int line = __builtin_LINE())
{
    return (unsigned)tsr_emu_warp(TSR_EMU_WARP_BALLOT, mask, pred != 0, -1, file, line);
}
static inline int __any_sync(unsigned mask, int pred, const char *file = __builtin_FILE(),
                             int line = __builtin_LINE())
{
    return (int)tsr_emu_warp(TSR_EMU_WARP_ANY, mask, pred != 0, -1, file, line);
}
static inline int __all_sync(unsigned mask, int pred, const char *file = __builtin_FILE(),
                             int line = __builtin_LINE())
{
    return (int)tsr_emu_warp(TSR_EMU_WARP_ALL, mask, pred != 0, -1, file, line);
}

/* ---- bit casts and math ---- */
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }
static inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
/* glibc declares __expf and friends itself: map CUDA's onto the plain ones */
#define __expf(x) expf(x)
#define __logf(x) logf(x)
#define __powf(x, y) powf(x, y)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanhf(x) tanhf(x)
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
static inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
template <class T> static inline T __ldg(const T *p) { return *p; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }

/* ---- vector helpers ---- */
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
static inline float3 make_float3(float x, float y, float z) { return float3{x, y, z}; }
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline int2 make_int2(int x, int y) { return int2{x, y}; }
static inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
static inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
static inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }

/* ---- atomics: real ones (other streams run on other OS threads) ---- */
template <class T> static inline T tsr_emu_atomic_add(T *a, T v) { return __atomic_fetch_add(a, v, __ATOMIC_RELAXED); }
static inline int atomicAdd(int *a, int v) { return tsr_emu_atomic_add(a, v); }
static inline unsigned atomicAdd(unsigned *a, unsigned v) { return tsr_emu_atomic_add(a, v); }
static inline unsigned long long atomicAdd(unsigned long long *a, unsigned long long v) { return tsr_emu_atomic_add(a, v); }
template <class F, class U>
static inline F tsr_emu_atomic_float(F *a, F v, F (*op)(F, F))
{
    U *p = (U *)(void *)a, old = __atomic_load_n(p, __ATOMIC_RELAXED), next;
    F f;
    do {
        memcpy(&f, &old, sizeof f);
        F r = op(f, v);
        memcpy(&next, &r, sizeof next);
    } while (!__atomic_compare_exchange_n(p, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return f;
}
static inline float tsr_emu_addf(float a, float b) { return a + b; }
static inline double tsr_emu_addd(double a, double b) { return a + b; }
static inline float tsr_emu_maxf(float a, float b) { return fmaxf(a, b); }
static inline float tsr_emu_minf(float a, float b) { return fminf(a, b); }
static inline float atomicAdd(float *a, float v) { return tsr_emu_atomic_float<float, uint32_t>(a, v, tsr_emu_addf); }
static inline double atomicAdd(double *a, double v) { return tsr_emu_atomic_float<double, uint64_t>(a, v, tsr_emu_addd); }
static inline int atomicSub(int *a, int v) { return __atomic_fetch_sub(a, v, __ATOMIC_RELAXED); }
static inline unsigned atomicSub(unsigned *a, unsigned v) { return __atomic_fetch_sub(a, v, __ATOMIC_RELAXED); }
template <class T> static inline T tsr_emu_atomic_max(T *a, T v)
{
    T old = __atomic_load_n(a, __ATOMIC_RELAXED);
    while (old < v && !__atomic_compare_exchange_n(a, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
    return old;
}
template <class T> static inline T tsr_emu_atomic_min(T *a, T v)
{
    T old = __atomic_load_n(a, __ATOMIC_RELAXED);
    while (old > v && !__atomic_compare_exchange_n(a, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
    return old;
}
static inline int atomicMax(int *a, int v) { return tsr_emu_atomic_max(a, v); }
static inline unsigned atomicMax(unsigned *a, unsigned v) { return tsr_emu_atomic_max(a, v); }
static inline unsigned long long atomicMax(unsigned long long *a, unsigned long long v) { return tsr_emu_atomic_max(a, v); }
static inline int atomicMin(int *a, int v) { return tsr_emu_atomic_min(a, v); }
static inline unsigned atomicMin(unsigned *a, unsigned v) { return tsr_emu_atomic_min(a, v); }
template <class T> static inline T tsr_emu_atomic_cas(T *a, T cmp, T v)
{
    __atomic_compare_exchange_n(a, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return cmp;
}
static inline int atomicCAS(int *a, int c, int v) { return tsr_emu_atomic_cas(a, c, v); }
static inline unsigned atomicCAS(unsigned *a, unsigned c, unsigned v) { return tsr_emu_atomic_cas(a, c, v); }
static inline unsigned long long atomicCAS(unsigned long long *a, unsigned long long c, unsigned long long v) { return tsr_emu_atomic_cas(a, c, v); }
static inline int atomicExch(int *a, int v) { return __atomic_exchange_n(a, v, __ATOMIC_RELAXED); }
static inline unsigned atomicExch(unsigned *a, unsigned v) { return __atomic_exchange_n(a, v, __ATOMIC_RELAXED); }
static inline float atomicExch(float *a, float v)
{
    uint32_t u = __atomic_exchange_n((uint32_t *)(void *)a, __float_as_uint(v), __ATOMIC_RELAXED);
    return __uint_as_float(u);
}
static inline int atomicOr(int *a, int v) { return __atomic_fetch_or(a, v, __ATOMIC_RELAXED); }
static inline unsigned atomicOr(unsigned *a, unsigned v) { return __atomic_fetch_or(a, v, __ATOMIC_RELAXED); }
static inline int atomicAnd(int *a, int v) { return __atomic_fetch_and(a, v, __ATOMIC_RELAXED); }
static inline unsigned atomicAnd(unsigned *a, unsigned v) { return __atomic_fetch_and(a, v, __ATOMIC_RELAXED); }

/* ---- typed allocation overloads (as CUDA's cuda_runtime.h) ---- */
template <class T> static inline cudaError_t cudaMalloc(T **p, size_t bytes) { return ::cudaMalloc((void **)p, bytes); }
template <class T> static inline cudaError_t cudaHostAlloc(T **p, size_t bytes, unsigned flags) { return ::cudaHostAlloc((void **)p, bytes, flags); }
template <class T> static inline cudaError_t cudaMallocHost(T **p, size_t bytes) { return ::cudaMallocHost((void **)p, bytes); }

/* ---- the launch (TSR_LAUNCH under TSR_CUDA_EMU) ----
 * Checks the configuration and every pointer argument (it must lie in
 * memory the stream's device may use), then queues the grid on the stream;
 * a failure is the thread's last error, as a failed <<<>>> launch. */
template <class Tuple> struct tsr_emu_closure {
    void *kernel;
    Tuple args;
};
template <class F, class Tuple> static void tsr_emu_closure_run(void *c)
{
    auto *cl = (tsr_emu_closure<Tuple> *)c;
    std::apply((F)cl->kernel, cl->args);
}
template <class Tuple> static void tsr_emu_closure_drop(void *c)
{
    delete (tsr_emu_closure<Tuple> *)c;
}
template <class T> static inline const void *tsr_emu_pointer_of(const T &v)
{
    if constexpr (std::is_pointer<T>::value)
        return (const void *)v;
    else
        return nullptr;
}

template <class... P, class... A>
static inline void tsr_emu_launch(const char *name, void (*kernel)(P...), dim3 grid, dim3 block,
                                  size_t shared_bytes, cudaStream_t stream, A &&...args)
{
    static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong argument count");
    typedef std::tuple<typename std::decay<P>::type...> Tuple;
    typedef void (*F)(P...);
    if (tsr_emu_launch_check(name, grid, block, shared_bytes, stream) != 0)
        return;
    auto *cl = new tsr_emu_closure<Tuple>{(void *)kernel, Tuple(std::forward<A>(args)...)};
    int index = 0, bad = 0;
    std::apply([&](const auto &...a) {
        ((bad |= tsr_emu_launch_arg(name, stream, index++, tsr_emu_pointer_of(a))), ...);
    }, cl->args);
    if (bad) {
        delete cl;
        return;
    }
    tsr_emu_launch_submit(name, grid, block, shared_bytes, stream, tsr_emu_closure_run<F, Tuple>,
                          tsr_emu_closure_drop<Tuple>, cl);
}

#endif /* __cplusplus */

#endif
