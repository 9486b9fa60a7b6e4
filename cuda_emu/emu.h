/* cuda_emu/emu.h — internals shared by the emulation's units: devices and
 * their arenas, streams and their queued operations, the calling thread's
 * error state, the knobs (TESSERA_CUDA_EMU_*), fibers.
 *
 * Must never: be included by project code (cuda_runtime.h is the interface),
 * or hold the global lock while running an operation (kernels, copies and
 * host functions run unlocked on the stream's thread).
 */
#ifndef TSR_EMU_INTERNAL_H
#define TSR_EMU_INTERNAL_H

#include <cuda_runtime.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace emu {

/* ---- errors: the calling thread's last error and message ---- */
cudaError_t fail(cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints the message on stderr unless TESSERA_CUDA_EMU_QUIET=1 (the failures
 * a GPU would not report at the call: pointers, deadlocks). */
cudaError_t fail_loud(cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void set_message(const std::string &m);
/* TESSERA_CUDA_EMU_FAIL: true when this call of `call` is to fail. */
bool inject(const char *call);
bool env_flag(const char *name);
long env_long(const char *name, long dflt);

/* ---- memory: one arena per device, one for pinned host memory ---- */
struct Arena {
    char *base = nullptr;
    size_t cap = 0, used = 0;
    std::map<size_t, size_t> live;  /* offset -> bytes reserved (256-byte multiple) */
    std::map<size_t, size_t> asked; /* offset -> bytes asked for: what may be touched */
    std::map<size_t, size_t> holes; /* offset -> bytes, coalesced */
    std::mutex mu;
    void reserve(size_t bytes);
    void *alloc(size_t bytes);
    bool release(void *p, size_t *bytes);
    bool contains(const void *p) const
    {
        return (const char *)p >= base && (const char *)p < base + cap;
    }
    /* The live allocation holding p: its start and size; false if none. */
    bool find(const void *p, char **start, size_t *bytes);
};

enum Where { W_NULL, W_DEVICE, W_PINNED, W_REGISTERED, W_PAGEABLE };
struct Loc {
    Where where = W_NULL;
    int device = -1;
    char *start = nullptr; /* the allocation or registered range */
    size_t bytes = 0;      /* 0: inside an arena but in no live allocation */
};
Loc locate(const void *p);
std::string describe(const void *p, const Loc &l);

/* ---- streams ---- */
struct Stream;
struct Event;
struct Op {
    enum Kind { KERNEL, COPY, COPY2D, SET, HOST, EVENT, WAIT, BLAS } kind;
    explicit Op(Kind k) : kind(k) {}
    uint64_t seq = 0;
    std::vector<std::pair<Stream *, uint64_t>> deps;
    /* KERNEL */
    const char *name = nullptr;
    dim3 grid, block;
    size_t shared_bytes = 0;
    void (*run)(void *) = nullptr;
    void (*drop)(void *) = nullptr;
    void *closure = nullptr;
    int order = 0;
    uint64_t seed = 0;
    bool fault = false; /* injected kernel failure */
    /* COPY / SET */
    void *dst = nullptr;
    const void *src = nullptr;
    size_t bytes = 0; /* COPY2D: the row width */
    size_t rows = 0, dpitch = 0, spitch = 0;
    int value = 0;
    /* HOST / BLAS */
    void (*fn)(void *) = nullptr;
    void *user = nullptr;
    /* EVENT */
    Event *event = nullptr;
};

struct Device;
struct Stream {
    Device *dev = nullptr;
    unsigned flags = 0;
    bool legacy = false, live = true, stop = false;
    std::deque<Op *> queue;
    uint64_t submitted = 0, done = 0;
    std::thread thread;
};

struct Event {
    Stream *stream = nullptr;
    uint64_t seq = 0;
    unsigned flags = 0;
    int pending = 0;
    bool live = true;
    double ms = 0.0; /* when its record ran */
};

struct Device {
    int id = 0;
    Arena arena;
    Stream *legacy = nullptr;
    std::vector<Stream *> streams; /* created, live */
    bool peer[64] = {};
    cudaError_t sticky = cudaSuccess;
    std::string sticky_msg;
    /* A synchronising call (stream, event, device, query, a synchronous
     * copy) has reported the sticky error: from then on every call does. Until
     * then calls that do not wait (launches, cudaGetLastError) do not see it,
     * so when a fault shows does not depend on the stream thread's timing. */
    bool sticky_seen = false;
};

/* The one lock over streams, events and sticky errors; g_cv is notified
 * whenever an operation completes. Never destroyed: stream threads still
 * wait on them while the process exits. */
extern std::mutex &g_mu;
extern std::condition_variable &g_cv;

int device_count();
Device *device(int id);
int current_device();
/* The stream a handle names (0: the current device's legacy stream), or
 * nullptr (the last error is set). */
Stream *stream_of(cudaStream_t s, const char *call);
/* Queue op on s (legacy-stream ordering added); returns its sequence number. */
uint64_t submit(Stream *s, Op *op);
/* Waits until s has run everything up to seq; the device's sticky error. */
cudaError_t wait_for(Stream *s, uint64_t seq);
double now_ms();

/* ---- kernels (device.cc) ---- */
/* Runs every block of a grid on the calling thread; false and a message on
 * a barrier failure (the device's sticky error). */
bool run_grid(Op *op, std::string *msg);

/* ---- fibers (fiber.cc) ---- */
struct Fiber {
    void *sp = nullptr;
    char *lo = nullptr; /* usable stack, above the guard page */
    size_t size = 0;
    void *fake = nullptr; /* ASan's fake stack */
    void *tsan = nullptr; /* ThreadSanitizer's fiber (TSan builds) */
};
Fiber *fiber_take(void (*entry)(void *), void *arg);
void fiber_give(Fiber *f, bool abandoned);
/* From the scheduler into f; returns when f switches back. */
void fiber_enter(Fiber *f);
/* From the running fiber f back to the scheduler; finished: f never resumes. */
void fiber_leave(Fiber *f, bool finished);
/* First thing a fresh fiber does (ASan bookkeeping). */
void fiber_started(Fiber *f);

} // namespace emu

#endif
