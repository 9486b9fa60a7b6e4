/* cuda_emu/fiber.cc — user-space fibers for the threads of an emulated block:
 * an x86-64 register switch (callee-saved registers, MXCSR and the x87
 * control word; no system call, unlike swapcontext), and mmap'd stacks with a
 * guard page, kept per OS thread and reused across blocks and launches.
 * Switches are announced to AddressSanitizer in the ASan build.
 *
 * Must never: free a stack a fiber still runs on, or return from a fiber's
 * entry function (it leaves through fiber_leave).
 */
#include "emu.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#if defined(__SANITIZE_ADDRESS__)
#define TSR_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TSR_EMU_ASAN 1
#endif
#endif
#ifdef TSR_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

/* ThreadSanitizer follows the switches as its fibers: each switch orders
 * what the fiber left did before what the one entered does (the fibers of
 * a block run one at a time on one thread), so a build with
 * -Db_sanitize=thread can run the emulation. */
#if defined(__SANITIZE_THREAD__)
#define TSR_EMU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TSR_EMU_TSAN 1
#endif
#endif
#ifdef TSR_EMU_TSAN
extern "C" {
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
}
#endif

#if !defined(__x86_64__)
#error "cuda_emu: the fiber switch is written for x86-64"
#endif

extern "C" {
__attribute__((visibility("hidden"))) void tsr_emu_switch(void **save_sp, void *to_sp);
__attribute__((visibility("hidden"))) void tsr_emu_fiber_start(void);
}

/* tsr_emu_switch(save, to): push the callee-saved state, store rsp in *save,
 * load `to`, pop its state, return into it. A fresh fiber's stack holds a
 * made-up frame whose return address is tsr_emu_fiber_start, which calls
 * r13(r12). */
__asm__(R"(
    .text
    .globl tsr_emu_switch
    .hidden tsr_emu_switch
    .type tsr_emu_switch,@function
tsr_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size tsr_emu_switch,.-tsr_emu_switch

    .globl tsr_emu_fiber_start
    .hidden tsr_emu_fiber_start
    .type tsr_emu_fiber_start,@function
tsr_emu_fiber_start:
    movq %r12, %rdi
    callq *%r13
    ud2
    .size tsr_emu_fiber_start,.-tsr_emu_fiber_start
)");

namespace emu {

namespace {

#if defined(TSR_EMU_ASAN) || defined(TSR_EMU_TSAN)
const size_t kStack = 1u << 20;
#else
const size_t kStack = 256u << 10;
#endif

/* Per OS thread: the scheduler's saved stack pointer, the free stacks. */
struct FiberPool {
    void *sched_sp = nullptr;
    void *sched_tsan = nullptr; /* the scheduler's TSan fiber (TSan builds) */
    const void *sched_bottom = nullptr;
    size_t sched_size = 0;
    std::vector<Fiber *> free_list;
    ~FiberPool()
    {
        for (Fiber *f : free_list) {
#ifdef TSR_EMU_TSAN
            if (f->tsan)
                __tsan_destroy_fiber(f->tsan);
#endif
            munmap(f->lo - page(), f->size + page());
            delete f;
        }
    }
    static size_t page() { return (size_t)sysconf(_SC_PAGESIZE); }
};
thread_local FiberPool t_pool;

} // namespace

Fiber *fiber_take(void (*entry)(void *), void *arg)
{
    Fiber *f;
    if (!t_pool.free_list.empty()) {
        f = t_pool.free_list.back();
        t_pool.free_list.pop_back();
    } else {
        size_t pg = FiberPool::page();
        char *m = (char *)mmap(nullptr, kStack + pg, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) {
            fprintf(stderr, "cuda-emu: cannot map a fiber stack\n");
            abort();
        }
        mprotect(m, pg, PROT_NONE); /* the guard page: an overflow faults */
        f = new Fiber;
        f->lo = m + pg;
        f->size = kStack;
    }
    /* A made-up frame: MXCSR/FPCW, r15, r14, r13 = entry, r12 = arg, rbx,
     * rbp, return address; rsp lands 16-byte aligned on the call. */
    uintptr_t top = ((uintptr_t)(f->lo + f->size) - 64) & ~(uintptr_t)15;
    uint64_t *w = (uint64_t *)(top - 64);
    uint32_t mxcsr = 0;
    uint16_t fpcw = 0;
    __asm__ __volatile__("stmxcsr %0" : "=m"(mxcsr));
    __asm__ __volatile__("fnstcw %0" : "=m"(fpcw));
    w[0] = (uint64_t)mxcsr | ((uint64_t)fpcw << 32);
    w[1] = 0;
    w[2] = 0;
    w[3] = (uint64_t)(uintptr_t)entry;
    w[4] = (uint64_t)(uintptr_t)arg;
    w[5] = 0;
    w[6] = 0;
    w[7] = (uint64_t)(uintptr_t)&tsr_emu_fiber_start;
    f->sp = w;
    f->fake = nullptr;
#ifdef TSR_EMU_TSAN
    if (!f->tsan)
        f->tsan = __tsan_create_fiber(0);
#endif
    return f;
}

void fiber_give(Fiber *f, bool abandoned)
{
#ifdef TSR_EMU_ASAN
    /* An abandoned fiber's frames leave poisoned redzones on its stack. */
    if (abandoned)
        __asan_unpoison_memory_region(f->lo, f->size);
#else
    (void)abandoned;
#endif
    t_pool.free_list.push_back(f);
}

void fiber_enter(Fiber *f)
{
#ifdef TSR_EMU_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, f->lo, f->size);
    tsr_emu_switch(&t_pool.sched_sp, f->sp);
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#elif defined(TSR_EMU_TSAN)
    t_pool.sched_tsan = __tsan_get_current_fiber();
    __tsan_switch_to_fiber(f->tsan, 0);
    tsr_emu_switch(&t_pool.sched_sp, f->sp);
#else
    tsr_emu_switch(&t_pool.sched_sp, f->sp);
#endif
}

void fiber_started(Fiber *f)
{
#ifdef TSR_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &t_pool.sched_bottom, &t_pool.sched_size);
#endif
    (void)f;
}

void fiber_leave(Fiber *f, bool finished)
{
#ifdef TSR_EMU_ASAN
    __sanitizer_start_switch_fiber(finished ? nullptr : &f->fake, t_pool.sched_bottom,
                                   t_pool.sched_size);
    tsr_emu_switch(&f->sp, t_pool.sched_sp);
    __sanitizer_finish_switch_fiber(f->fake, &t_pool.sched_bottom, &t_pool.sched_size);
#elif defined(TSR_EMU_TSAN)
    (void)finished;
    __tsan_switch_to_fiber(t_pool.sched_tsan, 0);
    tsr_emu_switch(&f->sp, t_pool.sched_sp);
#else
    (void)finished;
    tsr_emu_switch(&f->sp, t_pool.sched_sp);
#endif
}

} // namespace emu
