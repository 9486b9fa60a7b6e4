/* cuda_emu/runtime.cc — the host side of the emulated CUDA runtime: devices
 * with memory arenas, pinned and registered host memory, pointer checks,
 * streams run by their own threads, events, errors (last, sticky, injected).
 *
 * Every pointer given to a copy, a fill or a kernel is located (device N,
 * pinned host, registered host, pageable host) and checked against what a GPU
 * accepts; a wrong one fails the call with a message (tsr_emu_last_message,
 * and stderr) instead of corrupting memory.
 *
 * Must never: run an operation before the ones it follows on its stream (and
 * on the legacy default stream), hold g_mu while running one, or hang: a
 * failed kernel marks the device's sticky error and the queued work after it
 * is dropped, still counted as done.
 */
#include "emu.h"

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <unordered_set>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace emu {

std::mutex &g_mu = *new std::mutex;
std::condition_variable &g_cv = *new std::condition_variable;

namespace {

thread_local cudaError_t t_last = cudaSuccess;
/* Plain storage (no destructor): nothing of the emulation is freed at exit,
 * when another allocator (jemalloc) may already be torn down. */
__thread char t_msg[1024];
void set_msg(const char *m) { snprintf(t_msg, sizeof t_msg, "%s", m); }
thread_local int t_dev = 0;

const size_t kAlign = 256;

struct Registered {
    size_t bytes;
};

struct Global {
    std::vector<Device *> devs;
    Arena pinned;
    std::mutex reg_mu;
    std::map<uintptr_t, size_t> registered; /* start -> bytes */
    std::vector<Stream *> all_streams;      /* every stream ever made (never freed) */
    std::unordered_set<Stream *> live_streams;
    std::vector<Event *> free_events;
    std::atomic<uint64_t> launches{0};
    Global()
    {
        long n = env_long("TESSERA_CUDA_EMU_DEVICES", 0); /* none unless asked: see docs */
        if (n < 0)
            n = 0;
        if (n > 64)
            n = 64;
        size_t mem = (size_t)env_long("TESSERA_CUDA_EMU_MEM", 1024) << 20;
        for (long i = 0; i < n; i++) {
            Device *d = new Device;
            d->id = (int)i;
            d->arena.reserve(mem);
            devs.push_back(d);
        }
        pinned.reserve((size_t)env_long("TESSERA_CUDA_EMU_PINNED", 16384) << 20);
    }
};

Global &G()
{
    static Global *g = new Global; /* never destroyed: stream threads may outlive exit */
    return *g;
}

/* ---- error injection ---- */
std::mutex inj_mu;
std::string &inj_spec = *new std::string;
std::map<std::string, std::vector<long>> &inj_plan = *new std::map<std::string, std::vector<long>>;
std::map<std::string, long> &inj_count = *new std::map<std::string, long>;

} // namespace

/* ---- errors ---- */

static cudaError_t vfail(bool loud, cudaError_t e, const char *fmt, va_list ap)
{
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    t_last = e;
    set_msg(buf);
    if ((loud && !env_flag("TESSERA_CUDA_EMU_QUIET")) || env_flag("TESSERA_CUDA_EMU_DEBUG"))
        fprintf(stderr, "cuda-emu: %s (%s)\n", buf, cudaGetErrorName(e));
    return e;
}

cudaError_t fail(cudaError_t e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(false, e, fmt, ap);
    va_end(ap);
    return e;
}

cudaError_t fail_loud(cudaError_t e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(true, e, fmt, ap);
    va_end(ap);
    return e;
}

void set_message(const std::string &m) { set_msg(m.c_str()); }

bool env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    long x = strtol(v, &end, 10);
    return *end ? dflt : x;
}

bool inject(const char *call)
{
    const char *spec = getenv("TESSERA_CUDA_EMU_FAIL");
    std::lock_guard<std::mutex> lk(inj_mu);
    std::string s = spec ? spec : "";
    if (s != inj_spec) { /* a new plan: counts start again */
        inj_spec = s;
        inj_plan.clear();
        inj_count.clear();
        size_t i = 0;
        while (i < s.size()) {
            size_t j = s.find(',', i);
            if (j == std::string::npos)
                j = s.size();
            std::string item = s.substr(i, j - i);
            size_t c = item.rfind(':');
            if (c != std::string::npos)
                inj_plan[item.substr(0, c)].push_back(atol(item.c_str() + c + 1));
            i = j + 1;
        }
    }
    if (inj_plan.empty())
        return false;
    auto it = inj_plan.find(call);
    if (it == inj_plan.end())
        return false;
    long n = ++inj_count[call];
    for (long k : it->second)
        if (k == n)
            return true;
    return false;
}

double now_ms()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* ---- arenas ---- */

void Arena::reserve(size_t bytes)
{
    cap = bytes;
    if (bytes == 0)
        return;
    void *m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        fprintf(stderr, "cuda-emu: cannot reserve %zu MiB of address space\n", bytes >> 20);
        cap = 0;
        return;
    }
    base = (char *)m;
    holes[0] = bytes;
}

void *Arena::alloc(size_t bytes)
{
    size_t need = (bytes + kAlign - 1) / kAlign * kAlign;
    if (need == 0)
        need = kAlign;
    std::lock_guard<std::mutex> lk(mu);
    for (auto it = holes.begin(); it != holes.end(); ++it) {
        if (it->second < need)
            continue;
        size_t off = it->first, len = it->second;
        holes.erase(it);
        if (len > need)
            holes[off + need] = len - need;
        live[off] = need;
        asked[off] = bytes;
        used += need;
        return base + off;
    }
    return nullptr;
}

bool Arena::release(void *p, size_t *bytes)
{
    std::lock_guard<std::mutex> lk(mu);
    size_t off = (size_t)((char *)p - base);
    auto it = live.find(off);
    if (it == live.end())
        return false;
    size_t len = it->second;
    live.erase(it);
    asked.erase(off);
    used -= len;
    if (bytes)
        *bytes = len;
    /* give the pages back: a freed region reads as zeros, like fresh memory */
    size_t pg = 4096, a = (off + pg - 1) / pg * pg, e = (off + len) / pg * pg;
    if (e > a && e - a >= (1u << 20))
        madvise(base + a, e - a, MADV_DONTNEED);
    /* coalesce with the neighbours */
    auto next = holes.lower_bound(off);
    if (next != holes.end() && next->first == off + len) {
        len += next->second;
        holes.erase(next);
    }
    auto prev = holes.lower_bound(off);
    if (prev != holes.begin()) {
        --prev;
        if (prev->first + prev->second == off) {
            prev->second += len;
            return true;
        }
    }
    holes[off] = len;
    return true;
}

bool Arena::find(const void *p, char **start, size_t *bytes)
{
    std::lock_guard<std::mutex> lk(mu);
    size_t off = (size_t)((const char *)p - base);
    auto it = live.upper_bound(off);
    if (it == live.begin())
        return false;
    --it;
    size_t n = asked[it->first];
    if (off >= it->first + n)
        return false;
    *start = base + it->first;
    *bytes = n;
    return true;
}

Loc locate(const void *p)
{
    Loc l;
    if (!p)
        return l;
    Global &g = G();
    for (Device *d : g.devs)
        if (d->arena.contains(p)) {
            l.where = W_DEVICE;
            l.device = d->id;
            d->arena.find(p, &l.start, &l.bytes);
            return l;
        }
    if (g.pinned.contains(p)) {
        l.where = W_PINNED;
        g.pinned.find(p, &l.start, &l.bytes);
        return l;
    }
    {
        std::lock_guard<std::mutex> lk(g.reg_mu);
        auto it = g.registered.upper_bound((uintptr_t)p);
        if (it != g.registered.begin()) {
            --it;
            if ((uintptr_t)p < it->first + it->second) {
                l.where = W_REGISTERED;
                l.start = (char *)it->first;
                l.bytes = it->second;
                return l;
            }
        }
    }
    l.where = W_PAGEABLE;
    return l;
}

std::string describe(const void *p, const Loc &l)
{
    char buf[200];
    switch (l.where) {
    case W_NULL: return "a null pointer";
    case W_DEVICE:
        if (l.bytes)
            snprintf(buf, sizeof buf, "%p (device %d memory, %zu bytes into a %zu-byte allocation)",
                     p, l.device, (size_t)((const char *)p - l.start), l.bytes);
        else
            snprintf(buf, sizeof buf, "%p (device %d memory that is not allocated: freed?)", p,
                     l.device);
        return buf;
    case W_PINNED:
        if (l.bytes)
            snprintf(buf, sizeof buf, "%p (pinned host memory)", p);
        else
            snprintf(buf, sizeof buf, "%p (pinned host memory that is not allocated: freed?)", p);
        return buf;
    case W_REGISTERED: snprintf(buf, sizeof buf, "%p (registered host memory)", p); return buf;
    default: snprintf(buf, sizeof buf, "%p (pageable host memory)", p); return buf;
    }
}

/* ---- devices and streams ---- */

int device_count() { return (int)G().devs.size(); }

Device *device(int id)
{
    Global &g = G();
    return id >= 0 && id < (int)g.devs.size() ? g.devs[id] : nullptr;
}

int current_device() { return t_dev; }

static void stream_main(Stream *s);

static Stream *new_stream(Device *d, unsigned flags, bool legacy)
{
    Stream *s = new Stream;
    s->dev = d;
    s->flags = flags;
    s->legacy = legacy;
    {
        std::lock_guard<std::mutex> lk(g_mu);
        G().all_streams.push_back(s);
        G().live_streams.insert(s);
        if (!legacy)
            d->streams.push_back(s);
    }
    s->thread = std::thread(stream_main, s);
    return s;
}

static Stream *legacy_of(Device *d)
{
    std::lock_guard<std::mutex> lk(g_mu);
    if (!d->legacy) {
        Stream *s = new Stream;
        s->dev = d;
        s->legacy = true;
        G().all_streams.push_back(s);
        G().live_streams.insert(s);
        s->thread = std::thread(stream_main, s);
        s->thread.detach(); /* lives as long as the process */
        d->legacy = s;
    }
    return d->legacy;
}

static bool stream_known(Stream *s)
{
    return G().live_streams.count(s) != 0;
}

Stream *stream_of(cudaStream_t h, const char *call)
{
    if (h == nullptr || (uintptr_t)h == 1) {
        Device *d = device(t_dev);
        if (!d) {
            fail(cudaErrorNoDevice, "%s: no emulated device %d", call, t_dev);
            return nullptr;
        }
        return legacy_of(d);
    }
    Stream *s = (Stream *)h;
    std::lock_guard<std::mutex> lk(g_mu);
    if (!stream_known(s)) {
        fail_loud(cudaErrorInvalidResourceHandle, "%s: %p is not a live stream", call, (void *)h);
        return nullptr;
    }
    return s;
}

/* Queue op on s, g_mu held: its sequence number. */
static uint64_t submit_locked(Stream *s, Op *op)
{
    Device *d = s->dev;
    /* the legacy default stream waits for the blocking streams' earlier work,
     * and they wait for its */
    if (s->legacy) {
        for (Stream *o : d->streams)
            if (o->live && !(o->flags & cudaStreamNonBlocking) && o->submitted > o->done)
                op->deps.emplace_back(o, o->submitted);
    } else if (!(s->flags & cudaStreamNonBlocking) && d->legacy &&
               d->legacy->submitted > d->legacy->done) {
        op->deps.emplace_back(d->legacy, d->legacy->submitted);
    }
    op->seq = ++s->submitted;
    s->queue.push_back(op);
    g_cv.notify_all();
    return op->seq;
}

uint64_t submit(Stream *s, Op *op)
{
    std::lock_guard<std::mutex> lk(g_mu);
    return submit_locked(s, op);
}

cudaError_t wait_for(Stream *s, uint64_t seq)
{
    std::unique_lock<std::mutex> lk(g_mu);
    g_cv.wait(lk, [&] { return s->done >= seq; });
    if (s->dev->sticky != cudaSuccess)
        s->dev->sticky_seen = true;
    return s->dev->sticky;
}

static void run_op(Stream *s, Op *op)
{
    Device *d = s->dev;
    bool dead;
    {
        std::lock_guard<std::mutex> lk(g_mu);
        dead = d->sticky != cudaSuccess;
    }
    switch (op->kind) {
    case Op::KERNEL: {
        if (dead)
            break;
        std::string msg;
        bool ok;
        if (op->fault) {
            ok = false;
            msg = std::string("kernel ") + op->name + ": failure injected (TESSERA_CUDA_EMU_FAIL)";
        } else {
            ok = run_grid(op, &msg);
        }
        if (!ok) {
            if (!env_flag("TESSERA_CUDA_EMU_QUIET"))
                fprintf(stderr, "cuda-emu: device %d: %s\n", d->id, msg.c_str());
            std::lock_guard<std::mutex> lk(g_mu);
            if (d->sticky == cudaSuccess) {
                d->sticky = cudaErrorLaunchFailure;
                d->sticky_msg = msg;
            }
        }
        break;
    }
    case Op::COPY:
        if (!dead)
            memmove(op->dst, op->src, op->bytes);
        break;
    case Op::COPY2D:
        if (!dead)
            for (size_t r = 0; r < op->rows; r++)
                memmove((char *)op->dst + r * op->dpitch, (const char *)op->src + r * op->spitch,
                        op->bytes);
        break;
    case Op::SET:
        if (!dead)
            memset(op->dst, op->value, op->bytes);
        break;
    case Op::HOST:
    case Op::BLAS:
        if (!dead || op->kind == Op::HOST) {
            int saved = t_dev;
            t_dev = d->id;
            op->fn(op->user);
            t_dev = saved;
        }
        break;
    case Op::EVENT: {
        std::lock_guard<std::mutex> lk(g_mu);
        Event *e = op->event;
        if (e->stream == s && e->seq == op->seq)
            e->ms = now_ms();
        if (--e->pending == 0 && !e->live)
            G().free_events.push_back(e);
        break;
    }
    case Op::WAIT: break;
    }
    if (op->drop)
        op->drop(op->closure);
}

static void stream_main(Stream *s)
{
    uint64_t rng = (uint64_t)(uintptr_t)s ^ 0x5851f42d4c957f2dull;
    std::unique_lock<std::mutex> lk(g_mu);
    for (;;) {
        g_cv.wait(lk, [&] { return s->stop || !s->queue.empty(); });
        if (s->queue.empty())
            break; /* stopped and drained */
        Op *op = s->queue.front();
        g_cv.wait(lk, [&] {
            for (auto &dep : op->deps)
                if (dep.first->done < dep.second)
                    return false;
            return true;
        });
        lk.unlock();
        t_dev = s->dev->id;
        if (env_flag("TESSERA_CUDA_EMU_JITTER")) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            unsigned us = (unsigned)(rng >> 33) % 400u;
            if (us < 250)
                usleep(us);
        }
        run_op(s, op);
        delete op;
        lk.lock();
        s->queue.pop_front();
        s->done++;
        g_cv.notify_all();
    }
}

} // namespace emu

using namespace emu;

/* ---- errors ---- */

static Device *cur_dev() { return device(t_dev); }

static cudaError_t sticky_of(Device *d)
{
    if (!d)
        return cudaSuccess;
    std::lock_guard<std::mutex> lk(g_mu);
    if (d->sticky == cudaSuccess || !d->sticky_seen)
        return cudaSuccess;
    set_msg(d->sticky_msg.c_str());
    return d->sticky;
}

static cudaError_t ok() { return cudaSuccess; }

extern "C" cudaError_t cudaGetLastError(void)
{
    cudaError_t st = sticky_of(cur_dev());
    if (st != cudaSuccess)
        return st;
    cudaError_t e = t_last;
    t_last = cudaSuccess;
    return e;
}

extern "C" cudaError_t cudaPeekAtLastError(void)
{
    cudaError_t st = sticky_of(cur_dev());
    return st != cudaSuccess ? st : t_last;
}

extern "C" const char *tsr_emu_last_message(void) { return t_msg; }

extern "C" const char *tsr_emu_where(const void *p)
{
    static const char *dev_names[] = {"device 0", "device 1", "device 2", "device 3",
                                      "device 4", "device 5", "device 6", "device 7"};
    Loc l = locate(p);
    switch (l.where) {
    case W_NULL: return "null";
    case W_DEVICE: return l.device < 8 ? dev_names[l.device] : "device";
    case W_PINNED: return "pinned host";
    case W_REGISTERED: return "registered host";
    default: return "pageable host";
    }
}

extern "C" const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
#define N(x) \
    case x: return #x;
        N(cudaSuccess) N(cudaErrorInvalidValue) N(cudaErrorMemoryAllocation)
        N(cudaErrorInitializationError) N(cudaErrorCudartUnloading)
        N(cudaErrorInvalidConfiguration) N(cudaErrorInvalidPitchValue) N(cudaErrorInvalidSymbol)
        N(cudaErrorInvalidDevicePointer) N(cudaErrorInvalidMemcpyDirection) N(cudaErrorNoDevice)
        N(cudaErrorInvalidDevice) N(cudaErrorInvalidKernelImage) N(cudaErrorPeerAccessUnsupported)
        N(cudaErrorInvalidResourceHandle) N(cudaErrorNotReady) N(cudaErrorIllegalAddress)
        N(cudaErrorLaunchOutOfResources) N(cudaErrorLaunchTimeout)
        N(cudaErrorPeerAccessAlreadyEnabled) N(cudaErrorPeerAccessNotEnabled)
        N(cudaErrorHostMemoryAlreadyRegistered) N(cudaErrorHostMemoryNotRegistered)
        N(cudaErrorLaunchFailure) N(cudaErrorNotSupported) N(cudaErrorUnknown)
#undef N
    }
    return "cudaErrorUnknown";
}

extern "C" const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorCudartUnloading: return "driver shutting down";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidPitchValue: return "invalid pitch argument";
    case cudaErrorInvalidSymbol: return "invalid device symbol";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidKernelImage: return "device kernel image is invalid";
    case cudaErrorPeerAccessUnsupported: return "peer access is not supported between these two devices";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorLaunchTimeout: return "the launch timed out and was terminated";
    case cudaErrorPeerAccessAlreadyEnabled: return "peer access is already enabled";
    case cudaErrorPeerAccessNotEnabled: return "peer access has not been enabled";
    case cudaErrorHostMemoryAlreadyRegistered: return "part or all of the requested memory range is already mapped";
    case cudaErrorHostMemoryNotRegistered: return "pointer does not correspond to a registered memory region";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorUnknown: return "unknown error";
    }
    return "unrecognized error code";
}

/* ---- devices ---- */

extern "C" cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count)
        return fail(cudaErrorInvalidValue, "cudaGetDeviceCount: count is NULL");
    *count = device_count();
    if (*count == 0)
        return fail(cudaErrorNoDevice, "cudaGetDeviceCount: TESSERA_CUDA_EMU_DEVICES=0");
    return ok();
}

extern "C" cudaError_t cudaSetDevice(int dev)
{
    if (inject("cudaSetDevice"))
        return fail(cudaErrorInvalidDevice, "cudaSetDevice: failure injected");
    if (!device(dev))
        return fail(cudaErrorInvalidDevice, "cudaSetDevice(%d): %d emulated devices", dev,
                    device_count());
    t_dev = dev;
    return ok();
}

extern "C" cudaError_t cudaGetDevice(int *dev)
{
    if (!dev)
        return fail(cudaErrorInvalidValue, "cudaGetDevice: NULL");
    *dev = t_dev;
    return ok();
}

extern "C" cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev)
{
    Device *d = device(dev);
    if (!p)
        return fail(cudaErrorInvalidValue, "cudaGetDeviceProperties: prop is NULL");
    if (!d)
        return fail(cudaErrorInvalidDevice, "cudaGetDeviceProperties(%d): no such device", dev);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "Tessera emulated GPU %d (CPU, cuda_emu)", dev);
    p->totalGlobalMem = d->arena.cap;
    p->sharedMemPerBlock = 48 << 10;
    p->sharedMemPerBlockOptin = 48 << 10;
    p->sharedMemPerMultiprocessor = 64 << 10;
    p->totalConstMem = 64 << 10;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 0x7fffffff, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
    p->maxThreadsPerMultiProcessor = 2048;
    p->clockRate = 1000000;
    p->memoryClockRate = 1000000;
    p->memoryBusWidth = 256;
    p->l2CacheSize = 4 << 20;
    p->multiProcessorCount = 1;
    p->major = 8;
    p->minor = 0;
    p->unifiedAddressing = 1;
    p->canMapHostMemory = 1;
    p->asyncEngineCount = 2;
    p->concurrentKernels = 1;
    p->pciBusID = dev;
    return ok();
}

extern "C" cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    Device *d = cur_dev();
    if (!d)
        return fail(cudaErrorNoDevice, "cudaMemGetInfo: no device");
    if (!free_bytes || !total)
        return fail(cudaErrorInvalidValue, "cudaMemGetInfo: NULL argument");
    std::lock_guard<std::mutex> lk(d->arena.mu);
    *total = d->arena.cap;
    *free_bytes = d->arena.cap - d->arena.used;
    return ok();
}

extern "C" cudaError_t cudaDeviceCanAccessPeer(int *can, int dev, int peer)
{
    if (!can)
        return fail(cudaErrorInvalidValue, "cudaDeviceCanAccessPeer: NULL");
    if (!device(dev) || !device(peer))
        return fail(cudaErrorInvalidDevice, "cudaDeviceCanAccessPeer(%d, %d): no such device",
                    dev, peer);
    *can = dev != peer && !env_flag("TESSERA_CUDA_EMU_NO_PEER");
    return ok();
}

extern "C" cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags)
{
    Device *d = cur_dev();
    if (!d || !device(peer) || peer == t_dev)
        return fail(cudaErrorInvalidDevice, "cudaDeviceEnablePeerAccess(%d) from device %d", peer,
                    t_dev);
    if (flags)
        return fail(cudaErrorInvalidValue, "cudaDeviceEnablePeerAccess: flags must be 0");
    if (env_flag("TESSERA_CUDA_EMU_NO_PEER"))
        return fail(cudaErrorPeerAccessUnsupported, "cudaDeviceEnablePeerAccess: disabled");
    std::lock_guard<std::mutex> lk(g_mu);
    if (d->peer[peer])
        return fail(cudaErrorPeerAccessAlreadyEnabled,
                    "cudaDeviceEnablePeerAccess: device %d already reaches device %d", t_dev, peer);
    d->peer[peer] = true;
    return ok();
}

extern "C" cudaError_t cudaDeviceDisablePeerAccess(int peer)
{
    Device *d = cur_dev();
    if (!d || !device(peer))
        return fail(cudaErrorInvalidDevice, "cudaDeviceDisablePeerAccess(%d)", peer);
    std::lock_guard<std::mutex> lk(g_mu);
    if (!d->peer[peer])
        return fail(cudaErrorPeerAccessNotEnabled, "cudaDeviceDisablePeerAccess(%d): not enabled",
                    peer);
    d->peer[peer] = false;
    return ok();
}

static cudaError_t sync_device(Device *d)
{
    std::vector<std::pair<Stream *, uint64_t>> marks;
    {
        std::lock_guard<std::mutex> lk(g_mu);
        if (d->legacy)
            marks.emplace_back(d->legacy, d->legacy->submitted);
        for (Stream *s : d->streams)
            marks.emplace_back(s, s->submitted);
    }
    for (auto &m : marks)
        wait_for(m.first, m.second);
    std::lock_guard<std::mutex> lk(g_mu);
    if (d->sticky != cudaSuccess)
        d->sticky_seen = true;
    return d->sticky;
}

extern "C" cudaError_t cudaDeviceSynchronize(void)
{
    Device *d = cur_dev();
    if (!d)
        return fail(cudaErrorNoDevice, "cudaDeviceSynchronize: no device");
    cudaError_t e = sync_device(d);
    return e != cudaSuccess ? fail(e, "cudaDeviceSynchronize: %s", d->sticky_msg.c_str()) : e;
}

extern "C" cudaError_t cudaDeviceReset(void)
{
    Device *d = cur_dev();
    if (!d)
        return fail(cudaErrorNoDevice, "cudaDeviceReset: no device");
    sync_device(d);
    std::lock_guard<std::mutex> lk(g_mu);
    d->sticky = cudaSuccess;
    d->sticky_seen = false;
    d->sticky_msg.clear();
    return ok();
}

extern "C" cudaError_t cudaDriverGetVersion(int *v)
{
    if (v)
        *v = CUDART_VERSION;
    return ok();
}

extern "C" cudaError_t cudaRuntimeGetVersion(int *v)
{
    if (v)
        *v = CUDART_VERSION;
    return ok();
}

/* ---- memory ---- */

static void garbage_fill(void *p, size_t n)
{
    /* fresh device memory is not zeroed on a GPU: all ones (NaN floats) */
    if (n <= (16u << 20) && !env_flag("TESSERA_CUDA_EMU_ZERO"))
        memset(p, 0xff, n);
}

extern "C" cudaError_t cudaMalloc(void **p, size_t bytes)
{
    Device *d = cur_dev();
    if (!p)
        return fail(cudaErrorInvalidValue, "cudaMalloc: pointer is NULL");
    *p = nullptr;
    if (!d)
        return fail(cudaErrorNoDevice, "cudaMalloc: no device");
    cudaError_t st = sticky_of(d);
    if (st != cudaSuccess)
        return fail(st, "cudaMalloc: device %d: %s", d->id, d->sticky_msg.c_str());
    if (inject("cudaMalloc"))
        return fail(cudaErrorMemoryAllocation, "cudaMalloc(%zu): failure injected", bytes);
    void *m = d->arena.alloc(bytes);
    if (!m)
        return fail(cudaErrorMemoryAllocation, "cudaMalloc(%zu): device %d has %zu of %zu bytes free",
                    bytes, d->id, d->arena.cap - d->arena.used, d->arena.cap);
    garbage_fill(m, bytes);
    *p = m;
    return ok();
}

extern "C" cudaError_t cudaFree(void *p)
{
    if (!p)
        return ok();
    Loc l = locate(p);
    if (l.where != W_DEVICE || l.start != p)
        return fail_loud(cudaErrorInvalidValue, "cudaFree: %s is not the start of a device allocation",
                         describe(p, l).c_str());
    Device *d = device(l.device);
    /* like CUDA, cudaFree waits for the device's queued work */
    sync_device(d);
    d->arena.release(p, nullptr);
    return ok();
}

extern "C" cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags)
{
    if (!p)
        return fail(cudaErrorInvalidValue, "cudaHostAlloc: pointer is NULL");
    *p = nullptr;
    if (flags & ~0x7u)
        return fail(cudaErrorInvalidValue, "cudaHostAlloc: flags 0x%x", flags);
    if (inject("cudaHostAlloc"))
        return fail(cudaErrorMemoryAllocation, "cudaHostAlloc(%zu): failure injected", bytes);
    void *m = G().pinned.alloc(bytes);
    if (!m)
        return fail(cudaErrorMemoryAllocation, "cudaHostAlloc(%zu): the pinned arena is full",
                    bytes);
    *p = m;
    return ok();
}

extern "C" cudaError_t cudaMallocHost(void **p, size_t bytes)
{
    return cudaHostAlloc(p, bytes, cudaHostAllocDefault);
}

extern "C" cudaError_t cudaFreeHost(void *p)
{
    if (!p)
        return ok();
    Loc l = locate(p);
    if (l.where != W_PINNED || l.start != p)
        return fail_loud(cudaErrorInvalidValue, "cudaFreeHost: %s is not from cudaHostAlloc",
                         describe(p, l).c_str());
    for (Device *d : G().devs)
        sync_device(d);
    G().pinned.release(p, nullptr);
    return ok();
}

extern "C" cudaError_t cudaHostRegister(void *p, size_t bytes, unsigned flags)
{
    if (!p || bytes == 0)
        return fail(cudaErrorInvalidValue, "cudaHostRegister(%p, %zu): empty range", p, bytes);
    if (flags & ~0xfu)
        return fail(cudaErrorInvalidValue, "cudaHostRegister: flags 0x%x", flags);
    if (inject("cudaHostRegister"))
        return fail(cudaErrorMemoryAllocation, "cudaHostRegister(%zu): failure injected", bytes);
    Loc l = locate(p);
    if (l.where == W_DEVICE || l.where == W_PINNED)
        return fail_loud(cudaErrorInvalidValue, "cudaHostRegister: %s is not pageable host memory",
                         describe(p, l).c_str());
    Global &g = G();
    std::lock_guard<std::mutex> lk(g.reg_mu);
    uintptr_t a = (uintptr_t)p, e = a + bytes;
    auto it = g.registered.lower_bound(a);
    if (it != g.registered.end() && it->first < e)
        return fail(cudaErrorHostMemoryAlreadyRegistered, "cudaHostRegister(%p, %zu): overlaps %p",
                    p, bytes, (void *)it->first);
    if (it != g.registered.begin()) {
        --it;
        if (it->first + it->second > a)
            return fail(cudaErrorHostMemoryAlreadyRegistered,
                        "cudaHostRegister(%p, %zu): overlaps %p", p, bytes, (void *)it->first);
    }
    g.registered[a] = bytes;
    return ok();
}

extern "C" cudaError_t cudaHostUnregister(void *p)
{
    Global &g = G();
    {
        std::lock_guard<std::mutex> lk(g.reg_mu);
        if (g.registered.find((uintptr_t)p) == g.registered.end())
            return fail(cudaErrorHostMemoryNotRegistered, "cudaHostUnregister(%p): not registered",
                        p);
    }
    for (Device *d : g.devs)
        sync_device(d);
    std::lock_guard<std::mutex> lk(g.reg_mu);
    g.registered.erase((uintptr_t)p);
    return ok();
}

extern "C" cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a, const void *p)
{
    if (!a)
        return fail(cudaErrorInvalidValue, "cudaPointerGetAttributes: attributes NULL");
    Loc l = locate(p);
    memset(a, 0, sizeof *a);
    a->device = -2;
    switch (l.where) {
    case W_DEVICE:
        a->type = cudaMemoryTypeDevice;
        a->device = l.device;
        a->devicePointer = (void *)p;
        break;
    case W_PINNED:
    case W_REGISTERED:
        a->type = cudaMemoryTypeHost;
        a->device = 0;
        a->devicePointer = (void *)p;
        a->hostPointer = (void *)p;
        break;
    default: a->type = cudaMemoryTypeUnregistered; break;
    }
    return ok();
}

/* ---- copies ---- */

static const char *kind_name(cudaMemcpyKind k)
{
    switch (k) {
    case cudaMemcpyHostToHost: return "cudaMemcpyHostToHost";
    case cudaMemcpyHostToDevice: return "cudaMemcpyHostToDevice";
    case cudaMemcpyDeviceToHost: return "cudaMemcpyDeviceToHost";
    case cudaMemcpyDeviceToDevice: return "cudaMemcpyDeviceToDevice";
    default: return "cudaMemcpyDefault";
    }
}

/* [p, p+n) must be in one live allocation (device, pinned) or registered
 * range when it starts in one; `dev_side` says what the kind expects. */
static cudaError_t check_range(const char *call, const char *role, const void *p, size_t n,
                               int want /* 0 host, 1 device, -1 any */, Loc *out)
{
    Loc l = locate(p);
    *out = l;
    if (!p)
        return fail_loud(cudaErrorInvalidValue, "%s: %s is NULL", call, role);
    bool is_dev = l.where == W_DEVICE;
    if (want == 1 && !is_dev)
        return fail_loud(cudaErrorInvalidValue, "%s: %s must be device memory, but is %s", call,
                         role, describe(p, l).c_str());
    if (want == 0 && is_dev)
        return fail_loud(cudaErrorInvalidValue, "%s: %s must be host memory, but is %s", call,
                         role, describe(p, l).c_str());
    if (l.where == W_DEVICE || l.where == W_PINNED || l.where == W_REGISTERED) {
        if (l.bytes == 0)
            return fail_loud(cudaErrorInvalidValue, "%s: %s is %s", call, role,
                             describe(p, l).c_str());
        if ((const char *)p + n > l.start + l.bytes)
            return fail_loud(cudaErrorInvalidValue,
                             "%s: %s %s: %zu bytes overrun the allocation by %zu", call, role,
                             describe(p, l).c_str(), n,
                             (size_t)((const char *)p + n - (l.start + l.bytes)));
    }
    return cudaSuccess;
}

/* A copy of `rows` rows of n bytes (pitches dp, sp; rows 1: a plain copy). */
static cudaError_t copy2d(const char *call, void *dst, size_t dp, const void *src, size_t sp,
                          size_t n, size_t rows, cudaMemcpyKind kind, cudaStream_t h, bool async)
{
    if (inject(call))
        return fail(cudaErrorLaunchFailure, "%s(%zu bytes): failure injected", call, n * rows);
    if (rows > 1 && (dp < n || sp < n))
        return fail(cudaErrorInvalidPitchValue, "%s: pitches %zu, %zu below the width %zu", call,
                    dp, sp, n);
    if (n == 0 || rows == 0)
        return ok();
    size_t dspan = (rows - 1) * dp + n, sspan = (rows - 1) * sp + n;
    int wd = -1, ws = -1;
    switch (kind) {
    case cudaMemcpyHostToHost: wd = 0, ws = 0; break;
    case cudaMemcpyHostToDevice: wd = 1, ws = 0; break;
    case cudaMemcpyDeviceToHost: wd = 0, ws = 1; break;
    case cudaMemcpyDeviceToDevice: wd = 1, ws = 1; break;
    case cudaMemcpyDefault: break;
    default:
        return fail_loud(cudaErrorInvalidMemcpyDirection, "%s: kind %d", call, (int)kind);
    }
    char role[96];
    Loc ld, ls;
    snprintf(role, sizeof role, "the destination of %s", kind_name(kind));
    cudaError_t e = check_range(call, role, dst, dspan, wd, &ld);
    if (e != cudaSuccess)
        return e;
    snprintf(role, sizeof role, "the source of %s", kind_name(kind));
    if ((e = check_range(call, role, src, sspan, ws, &ls)) != cudaSuccess)
        return e;
    Stream *s = stream_of(h, call);
    if (!s)
        return t_last;
    cudaError_t st = sticky_of(s->dev);
    if (st != cudaSuccess)
        return fail(st, "%s: device %d: %s", call, s->dev->id, s->dev->sticky_msg.c_str());
    Op *op = new Op(rows > 1 ? Op::COPY2D : Op::COPY);
    op->dst = dst;
    op->src = src;
    op->bytes = n;
    op->rows = rows;
    op->dpitch = dp;
    op->spitch = sp;
    uint64_t seq = submit(s, op);
    /* pageable host memory: the call returns once the copy is done (CUDA
     * stages it; the caller may reuse the buffer at once) */
    if (!async || ld.where == W_PAGEABLE || ls.where == W_PAGEABLE) {
        e = wait_for(s, seq);
        if (e != cudaSuccess)
            return fail(e, "%s: device %d: %s", call, s->dev->id, s->dev->sticky_msg.c_str());
    }
    return ok();
}

static cudaError_t copy(const char *call, void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                        cudaStream_t h, bool async)
{
    return copy2d(call, dst, n, src, n, n, 1, kind, h, async);
}

extern "C" cudaError_t cudaMemcpy2D(void *dst, size_t dp, const void *src, size_t sp, size_t w,
                                    size_t rows, cudaMemcpyKind kind)
{
    return copy2d("cudaMemcpy2D", dst, dp, src, sp, w, rows, kind, nullptr, false);
}

extern "C" cudaError_t cudaMemcpy2DAsync(void *dst, size_t dp, const void *src, size_t sp,
                                         size_t w, size_t rows, cudaMemcpyKind kind,
                                         cudaStream_t s)
{
    return copy2d("cudaMemcpy2DAsync", dst, dp, src, sp, w, rows, kind, s, true);
}

extern "C" cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind)
{
    return copy("cudaMemcpy", dst, src, n, kind, nullptr, false);
}

extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                                       cudaStream_t s)
{
    return copy("cudaMemcpyAsync", dst, src, n, kind, s, true);
}

static cudaError_t peer_copy(const char *call, void *dst, int dd, const void *src, int sd, size_t n,
                             cudaStream_t h, bool async)
{
    if (!device(dd) || !device(sd))
        return fail(cudaErrorInvalidDevice, "%s: device %d or %d does not exist", call, dd, sd);
    Loc l = locate(dst);
    if (n && (l.where != W_DEVICE || l.device != dd))
        return fail_loud(cudaErrorInvalidValue, "%s: the destination %s is not on device %d", call,
                         describe(dst, l).c_str(), dd);
    l = locate(src);
    if (n && (l.where != W_DEVICE || l.device != sd))
        return fail_loud(cudaErrorInvalidValue, "%s: the source %s is not on device %d", call,
                         describe(src, l).c_str(), sd);
    return copy(call, dst, src, n, cudaMemcpyDeviceToDevice, h, async);
}

extern "C" cudaError_t cudaMemcpyPeer(void *dst, int dd, const void *src, int sd, size_t n)
{
    return peer_copy("cudaMemcpyPeer", dst, dd, src, sd, n, nullptr, false);
}

extern "C" cudaError_t cudaMemcpyPeerAsync(void *dst, int dd, const void *src, int sd, size_t n,
                                           cudaStream_t s)
{
    return peer_copy("cudaMemcpyPeerAsync", dst, dd, src, sd, n, s, true);
}

static cudaError_t fill(const char *call, void *p, int v, size_t n, cudaStream_t h, bool async)
{
    if (inject(call))
        return fail(cudaErrorLaunchFailure, "%s(%zu bytes): failure injected", call, n);
    if (n == 0)
        return ok();
    Loc l;
    cudaError_t e = check_range(call, "the destination", p, n, 1, &l);
    if (e != cudaSuccess)
        return e;
    Stream *s = stream_of(h, call);
    if (!s)
        return t_last;
    Op *op = new Op(Op::SET);
    op->dst = p;
    op->value = v;
    op->bytes = n;
    uint64_t seq = submit(s, op);
    if (!async && (e = wait_for(s, seq)) != cudaSuccess)
        return fail(e, "%s: device %d: %s", call, s->dev->id, s->dev->sticky_msg.c_str());
    return ok();
}

extern "C" cudaError_t cudaMemset(void *p, int v, size_t n)
{
    return fill("cudaMemset", p, v, n, nullptr, false);
}

extern "C" cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
    return fill("cudaMemsetAsync", p, v, n, s, true);
}

/* ---- streams ---- */

extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned flags)
{
    if (!out)
        return fail(cudaErrorInvalidValue, "cudaStreamCreate: stream is NULL");
    if (flags & ~cudaStreamNonBlocking)
        return fail(cudaErrorInvalidValue, "cudaStreamCreateWithFlags: flags 0x%x", flags);
    Device *d = cur_dev();
    if (!d)
        return fail(cudaErrorNoDevice, "cudaStreamCreate: no device");
    if (inject("cudaStreamCreate"))
        return fail(cudaErrorMemoryAllocation, "cudaStreamCreate: failure injected");
    *out = (cudaStream_t)new_stream(d, flags, false);
    return ok();
}

extern "C" cudaError_t cudaStreamCreate(cudaStream_t *out)
{
    return cudaStreamCreateWithFlags(out, cudaStreamDefault);
}

extern "C" cudaError_t cudaStreamDestroy(cudaStream_t h)
{
    if (h == nullptr)
        return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: the default stream");
    Stream *s = stream_of(h, "cudaStreamDestroy");
    if (!s)
        return t_last;
    {
        std::lock_guard<std::mutex> lk(g_mu);
        s->live = false;
        s->stop = true;
        G().live_streams.erase(s);
        auto &v = s->dev->streams;
        for (size_t i = 0; i < v.size(); i++)
            if (v[i] == s) {
                v.erase(v.begin() + (long)i);
                break;
            }
        g_cv.notify_all();
    }
    /* its queued work still runs (as CUDA's), then the thread ends */
    s->thread.join();
    return ok();
}

extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t h)
{
    Stream *s = stream_of(h, "cudaStreamSynchronize");
    if (!s)
        return t_last;
    if (inject("cudaStreamSynchronize"))
        return fail(cudaErrorLaunchFailure, "cudaStreamSynchronize: failure injected");
    uint64_t seq;
    {
        std::lock_guard<std::mutex> lk(g_mu);
        seq = s->submitted;
    }
    cudaError_t e = wait_for(s, seq);
    return e != cudaSuccess
               ? fail(e, "cudaStreamSynchronize: device %d: %s", s->dev->id, s->dev->sticky_msg.c_str())
               : e;
}

extern "C" cudaError_t cudaStreamQuery(cudaStream_t h)
{
    Stream *s = stream_of(h, "cudaStreamQuery");
    if (!s)
        return t_last;
    std::lock_guard<std::mutex> lk(g_mu);
    if (s->dev->sticky != cudaSuccess)
        s->dev->sticky_seen = true;
    if (s->dev->sticky != cudaSuccess)
        return fail(s->dev->sticky, "cudaStreamQuery: device %d: %s", s->dev->id,
                    s->dev->sticky_msg.c_str());
    return s->done >= s->submitted ? cudaSuccess : cudaErrorNotReady;
}

extern "C" cudaError_t cudaLaunchHostFunc(cudaStream_t h, cudaHostFn_t fn, void *user)
{
    if (!fn)
        return fail(cudaErrorInvalidValue, "cudaLaunchHostFunc: fn is NULL");
    Stream *s = stream_of(h, "cudaLaunchHostFunc");
    if (!s)
        return t_last;
    Op *op = new Op(Op::HOST);
    op->fn = fn;
    op->user = user;
    submit(s, op);
    return ok();
}

/* ---- events ---- */

static bool event_known(Event *e)
{
    return e && e->live; /* events are never unmapped: a stale handle reads live=false */
}

extern "C" cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned flags)
{
    if (!out)
        return fail(cudaErrorInvalidValue, "cudaEventCreate: event is NULL");
    if (flags & ~0x7u)
        return fail(cudaErrorInvalidValue, "cudaEventCreateWithFlags: flags 0x%x", flags);
    Event *e;
    {
        std::lock_guard<std::mutex> lk(g_mu);
        auto &fl = G().free_events;
        if (!fl.empty()) {
            e = fl.back();
            fl.pop_back();
            *e = Event();
        } else {
            e = new Event;
        }
        e->flags = flags;
    }
    *out = (cudaEvent_t)e;
    return ok();
}

extern "C" cudaError_t cudaEventCreate(cudaEvent_t *out)
{
    return cudaEventCreateWithFlags(out, cudaEventDefault);
}

extern "C" cudaError_t cudaEventDestroy(cudaEvent_t h)
{
    Event *e = (Event *)h;
    std::lock_guard<std::mutex> lk(g_mu);
    if (!event_known(e))
        return fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy: %p is not a live event",
                    (void *)h);
    e->live = false;
    if (e->pending == 0)
        G().free_events.push_back(e);
    return ok();
}

extern "C" cudaError_t cudaEventRecord(cudaEvent_t h, cudaStream_t sh)
{
    Event *e = (Event *)h;
    {
        std::lock_guard<std::mutex> lk(g_mu);
        if (!event_known(e))
            return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord: %p is not a live event",
                        (void *)h);
    }
    if (inject("cudaEventRecord"))
        return fail(cudaErrorLaunchFailure, "cudaEventRecord: failure injected");
    Stream *s = stream_of(sh, "cudaEventRecord");
    if (!s)
        return t_last;
    Op *op = new Op(Op::EVENT);
    op->event = e;
    /* the event names this op: set under the lock submit takes */
    std::lock_guard<std::mutex> lk(g_mu);
    e->stream = s;
    e->seq = submit_locked(s, op);
    e->pending++;
    return ok();
}

extern "C" cudaError_t cudaEventQuery(cudaEvent_t h)
{
    Event *e = (Event *)h;
    std::lock_guard<std::mutex> lk(g_mu);
    if (!event_known(e))
        return fail(cudaErrorInvalidResourceHandle, "cudaEventQuery: %p is not a live event",
                    (void *)h);
    if (!e->stream)
        return cudaSuccess;
    if (e->stream->dev->sticky != cudaSuccess)
        e->stream->dev->sticky_seen = true;
    if (e->stream->dev->sticky != cudaSuccess)
        return fail(e->stream->dev->sticky, "cudaEventQuery: device %d: %s", e->stream->dev->id,
                    e->stream->dev->sticky_msg.c_str());
    return e->stream->done >= e->seq ? cudaSuccess : cudaErrorNotReady;
}

extern "C" cudaError_t cudaEventSynchronize(cudaEvent_t h)
{
    Event *e = (Event *)h;
    Stream *s;
    uint64_t seq;
    {
        std::lock_guard<std::mutex> lk(g_mu);
        if (!event_known(e))
            return fail(cudaErrorInvalidResourceHandle,
                        "cudaEventSynchronize: %p is not a live event", (void *)h);
        s = e->stream;
        seq = e->seq;
    }
    if (!s)
        return ok();
    cudaError_t r = wait_for(s, seq);
    return r != cudaSuccess ? fail(r, "cudaEventSynchronize: device %d: %s", s->dev->id,
                                   s->dev->sticky_msg.c_str())
                            : r;
}

extern "C" cudaError_t cudaStreamWaitEvent(cudaStream_t sh, cudaEvent_t h, unsigned flags)
{
    Event *e = (Event *)h;
    Stream *s = stream_of(sh, "cudaStreamWaitEvent");
    if (!s)
        return t_last;
    if (flags)
        return fail(cudaErrorInvalidValue, "cudaStreamWaitEvent: flags 0x%x", flags);
    Op *op = new Op(Op::WAIT);
    {
        std::lock_guard<std::mutex> lk(g_mu);
        if (!event_known(e)) {
            delete op;
            return fail(cudaErrorInvalidResourceHandle,
                        "cudaStreamWaitEvent: %p is not a live event", (void *)h);
        }
        if (e->stream)
            op->deps.emplace_back(e->stream, e->seq);
    }
    submit(s, op);
    return ok();
}

extern "C" cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    Event *x = (Event *)a, *y = (Event *)b;
    if (!ms)
        return fail(cudaErrorInvalidValue, "cudaEventElapsedTime: ms is NULL");
    std::lock_guard<std::mutex> lk(g_mu);
    if (!event_known(x) || !event_known(y))
        return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: not live events");
    if ((x->flags | y->flags) & cudaEventDisableTiming)
        return fail(cudaErrorInvalidResourceHandle,
                    "cudaEventElapsedTime: an event was created with cudaEventDisableTiming");
    if (!x->stream || !y->stream || x->stream->done < x->seq || y->stream->done < y->seq)
        return fail(cudaErrorNotReady, "cudaEventElapsedTime: an event has not completed");
    *ms = (float)(y->ms - x->ms);
    return ok();
}

/* ---- kernel launches (tsr_emu_launch) ---- */

extern "C" int tsr_emu_launch_check(const char *name, dim3 grid, dim3 block, size_t shared_bytes,
                                    cudaStream_t h)
{
    Stream *s = stream_of(h, name);
    if (!s)
        return 1;
    if (s->dev->id != t_dev) {
        fail_loud(cudaErrorInvalidResourceHandle,
                  "launch of %s: the stream belongs to device %d but device %d is current", name,
                  s->dev->id, t_dev);
        return 1;
    }
    unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    /* A grid beyond the device's limits: an H200 with CUDA 13 (driver 580)
     * answers cudaErrorInvalidValue, not InvalidConfiguration (seen by the
     * GPU check kit); a block beyond them stays InvalidConfiguration. */
    if (grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
        fail(cudaErrorInvalidValue, "launch of %s: grid (%u,%u,%u) beyond the device's limits",
             name, grid.x, grid.y, grid.z);
        return 1;
    }
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 || threads > 1024 ||
        block.x > 1024 || block.y > 1024 || block.z > 64) {
        fail(cudaErrorInvalidConfiguration, "launch of %s: grid (%u,%u,%u), block (%u,%u,%u)",
             name, grid.x, grid.y, grid.z, block.x, block.y, block.z);
        return 1;
    }
    if (shared_bytes > (48u << 10)) {
        fail(cudaErrorInvalidValue, "launch of %s: %zu bytes of dynamic shared memory (48 KiB max)",
             name, shared_bytes);
        return 1;
    }
    if (inject("launch")) {
        fail(cudaErrorLaunchFailure, "launch of %s: failure injected", name);
        return 1;
    }
    cudaError_t st = sticky_of(s->dev);
    if (st != cudaSuccess) {
        t_last = st;
        return 1;
    }
    return 0;
}

extern "C" int tsr_emu_launch_arg(const char *name, cudaStream_t h, int index, const void *p)
{
    if (!p)
        return 0;
    Stream *s = stream_of(h, name);
    if (!s)
        return 1;
    Loc l = locate(p);
    bool good = false;
    switch (l.where) {
    case W_DEVICE:
        good = l.bytes != 0 && (l.device == s->dev->id || s->dev->peer[l.device]);
        break;
    case W_PINNED: good = l.bytes != 0; break;
    case W_REGISTERED: good = true; break;
    default: good = false; break;
    }
    if (good)
        return 0;
    const char *why = l.where == W_DEVICE && l.bytes && l.device != s->dev->id
                          ? " (another device's memory, and peer access is not enabled)"
                          : "";
    fail_loud(cudaErrorIllegalAddress,
              "launch of %s on device %d: argument %d is %s%s: the kernel cannot use it", name,
              s->dev->id, index, describe(p, l).c_str(), why);
    return 1;
}

extern "C" void tsr_emu_launch_submit(const char *name, dim3 grid, dim3 block, size_t shared_bytes,
                                      cudaStream_t h, void (*run)(void *), void (*drop)(void *),
                                      void *closure)
{
    Stream *s = stream_of(h, name);
    if (!s) {
        drop(closure);
        return;
    }
    Op *op = new Op(Op::KERNEL);
    op->name = name;
    op->grid = grid;
    op->block = block;
    op->shared_bytes = shared_bytes;
    op->run = run;
    op->drop = drop;
    op->closure = closure;
    const char *order = getenv("TESSERA_CUDA_EMU_ORDER");
    op->order = !order || !*order || !strcmp(order, "shuffle") ? 2 : !strcmp(order, "reverse") ? 1 : 0;
    uint64_t n = G().launches.fetch_add(1) + 1;
    op->seed = (uint64_t)env_long("TESSERA_CUDA_EMU_SEED", 1) * 0x9e3779b97f4a7c15ull + n;
    op->fault = inject("kernel");
    submit(s, op);
}
