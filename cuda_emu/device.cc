/* cuda_emu/device.cc — the device side of the emulation: a grid's blocks run
 * one after another on the stream's thread, a block's threads as fibers.
 *
 * A block runs in passes. In the first pass a "runner" fiber starts the
 * threads one after another in the pass's order: a thread that meets no
 * barrier runs to its end on the runner without a switch, one that meets a
 * barrier keeps the runner's stack and a new runner takes over. Between
 * passes the barriers whose participants have all arrived are released (warp
 * exchanges first, then the block barrier); a barrier that can never be
 * released (threads exited, or wait elsewhere) ends the block with a message
 * naming the kernel, the block and the barrier. The order of a pass is
 * forward, reverse or shuffled (TESSERA_CUDA_EMU_ORDER, seeded per launch), so
 * that code relying on the hardware's lane order fails.
 *
 * Must never: hang on a barrier, or let one block's threads see another
 * block's dynamic shared memory contents as if set by the kernel.
 */
#include "emu.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" {
__thread const tsr_emu_block_ctx *tsr_emu_cur_block;
__thread const tsr_emu_thread_ctx *tsr_emu_cur_thread;
}

namespace emu {

namespace {

enum State { FRESH, READY, WAIT_BLOCK, WAIT_WARP, DONE };

struct Thread {
    tsr_emu_thread_ctx ctx;
    State state = FRESH;
    Fiber *fiber = nullptr;
    /* the barrier it waits at */
    int op = 0;
    unsigned mask = 0;
    unsigned long long value = 0, result = 0;
    int src = -1;
    const char *file = "";
    int line = 0;
};

struct Block {
    Op *op = nullptr;
    tsr_emu_block_ctx ctx;
    std::vector<Thread> threads;
    std::vector<int> order;
    size_t next_fresh = 0; /* first pass: the next thread a runner starts */
    Thread *cur = nullptr;
    Fiber *runner = nullptr;
    uint64_t rng = 0;
};
thread_local Block *t_block = nullptr;

uint64_t next_rand(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void make_order(Block *b)
{
    int n = (int)b->threads.size();
    b->order.resize(n);
    for (int i = 0; i < n; i++)
        b->order[i] = b->op->order == 1 ? n - 1 - i : i;
    if (b->op->order == 2)
        for (int i = n - 1; i > 0; i--) {
            int j = (int)(next_rand(&b->rng) % (uint64_t)(i + 1));
            std::swap(b->order[i], b->order[j]);
        }
}

/* A runner fiber: starts fresh threads in the first pass's order until one
 * blocks (it then owns this stack) or none is left. */
void runner_main(void *arg)
{
    Fiber *self = (Fiber *)arg;
    fiber_started(self);
    Block *b = t_block;
    while (b->next_fresh < b->threads.size()) {
        Thread *t = &b->threads[b->order[b->next_fresh++]];
        t->fiber = self;
        t->state = READY;
        b->cur = t;
        tsr_emu_cur_thread = &t->ctx;
        b->op->run(b->op->closure);
        t->state = DONE;
        t->fiber = nullptr;
        b = t_block;
    }
    b->runner = nullptr;
    fiber_leave(self, true);
    abort(); /* never resumed */
}

/* The calling thread waits at a barrier: back to the scheduler until it is
 * released. */
void wait_here(State st, int op, unsigned mask, unsigned long long value, int src,
               const char *file, int line)
{
    Block *b = t_block;
    Thread *t = b->cur;
    t->state = st;
    t->op = op;
    t->mask = mask;
    t->value = value;
    t->src = src;
    t->file = file;
    t->line = line;
    if (b->runner == t->fiber)
        b->runner = nullptr; /* this thread keeps the runner's stack */
    fiber_leave(t->fiber, false);
    /* resumed: the scheduler set cur and tsr_emu_cur_thread */
}

const char *op_name(int op)
{
    switch (op) {
    case TSR_EMU_WARP_SYNC: return "__syncwarp";
    case TSR_EMU_WARP_SHFL: return "__shfl_*_sync";
    case TSR_EMU_WARP_BALLOT: return "__ballot_sync";
    case TSR_EMU_WARP_ANY: return "__any_sync";
    case TSR_EMU_WARP_GATHER: return "a warp-wide PTX instruction (mma.sync)";
    default: return "__all_sync";
    }
}

std::string block_name(const Block *b)
{
    char buf[160];
    snprintf(buf, sizeof buf, "kernel %s, block (%u,%u,%u) of (%u,%u,%u), %u threads",
             b->op->name, b->ctx.idx.x, b->ctx.idx.y, b->ctx.idx.z, b->ctx.grid.x,
             b->ctx.grid.y, b->ctx.grid.z, (unsigned)b->threads.size());
    return buf;
}

/* Releases every warp group whose lanes have all arrived. Returns the number
 * released, or -1 with *msg when a group can never complete (a lane in its
 * mask exited, or lanes in it wait at a different warp operation). */
int release_warps(Block *b, std::string *msg)
{
    int n = (int)b->threads.size(), released = 0;
    for (int w0 = 0; w0 < n; w0 += 32) {
        int lanes = n - w0 < 32 ? n - w0 : 32;
        unsigned exist = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1u);
        for (int l = 0; l < lanes; l++) {
            Thread *t = &b->threads[w0 + l];
            if (t->state != WAIT_WARP)
                continue;
            unsigned part = t->mask & exist;
            bool all = true;
            for (int k = 0; k < lanes && all; k++) {
                if (!(part >> k & 1u))
                    continue;
                Thread *o = &b->threads[w0 + k];
                if (o->state == DONE) {
                    char buf[320];
                    snprintf(buf, sizeof buf,
                             "%s: %s at %s:%d (warp %d, mask 0x%08x) waits for lane %d, which "
                             "has exited",
                             block_name(b).c_str(), op_name(t->op), t->file, t->line, w0 / 32,
                             t->mask, k);
                    *msg = buf;
                    return -1;
                }
                if (o->state == WAIT_WARP && o->op != t->op) {
                    char buf[400];
                    snprintf(buf, sizeof buf,
                             "%s: warp %d: lane %d waits at %s (%s:%d), lane %d at %s (%s:%d)",
                             block_name(b).c_str(), w0 / 32, l, op_name(t->op), t->file,
                             t->line, k, op_name(o->op), o->file, o->line);
                    *msg = buf;
                    return -1;
                }
                if (o->state != WAIT_WARP || o->mask != t->mask)
                    all = false;
            }
            if (!all)
                continue;
            /* every lane of the group is here: exchange */
            unsigned long long vote = 0;
            for (int k = 0; k < lanes; k++)
                if (part >> k & 1u)
                    vote |= (unsigned long long)(b->threads[w0 + k].value != 0) << k;
            for (int k = 0; k < lanes; k++) {
                if (!(part >> k & 1u))
                    continue;
                Thread *o = &b->threads[w0 + k];
                switch (o->op) {
                case TSR_EMU_WARP_SHFL: {
                    int s = o->src;
                    o->result = (s >= 0 && s < lanes && (part >> s & 1u))
                                    ? b->threads[w0 + s].value
                                    : o->value;
                    break;
                }
                case TSR_EMU_WARP_BALLOT: o->result = vote; break;
                case TSR_EMU_WARP_ANY: o->result = vote != 0; break;
                case TSR_EMU_WARP_ALL: o->result = vote == (unsigned long long)part; break;
                case TSR_EMU_WARP_GATHER: {
                    /* lane k's deposit at all + k*bytes; absent lanes give zeros */
                    const tsr_emu_gather_args *g = (const tsr_emu_gather_args *)(uintptr_t)o->value;
                    for (int s = 0; s < 32; s++) {
                        char *dst = (char *)g->all + (size_t)s * g->bytes;
                        const tsr_emu_gather_args *gs =
                            s < lanes && (part >> s & 1u)
                                ? (const tsr_emu_gather_args *)(uintptr_t)b->threads[w0 + s].value
                                : nullptr;
                        if (gs && gs->bytes == g->bytes)
                            memcpy(dst, gs->in, g->bytes);
                        else
                            memset(dst, 0, g->bytes);
                    }
                    o->result = 0;
                    break;
                }
                default: o->result = 0; break;
                }
            }
            for (int k = 0; k < lanes; k++)
                if (part >> k & 1u)
                    b->threads[w0 + k].state = READY;
            released++;
        }
    }
    return released;
}

/* One block from start to end. */
bool run_block(Block *b, std::string *msg)
{
    int n = (int)b->threads.size();
    unsigned bx = b->ctx.dim.x, by = b->ctx.dim.y;
    for (int i = 0; i < n; i++) {
        Thread &t = b->threads[i];
        t.ctx.idx = uint3{(unsigned)i % bx, ((unsigned)i / bx) % by, (unsigned)i / (bx * by)};
        t.ctx.linear = (unsigned)i;
        t.state = FRESH;
        t.fiber = nullptr;
    }
    b->next_fresh = 0;
    b->cur = nullptr;
    make_order(b);
    /* first pass: runners start every thread */
    while (b->next_fresh < (size_t)n) {
        b->runner = fiber_take(runner_main, nullptr);
        /* the runner's argument is itself */
        ((uint64_t *)b->runner->sp)[4] = (uint64_t)(uintptr_t)b->runner;
        Fiber *r = b->runner;
        fiber_enter(r);
        /* either a thread blocked and keeps r, or r started every thread */
        if (!(b->cur && b->cur->fiber == r && b->cur->state != DONE))
            fiber_give(r, false);
    }
    bool ok = true;
    for (;;) {
        /* release what can be released */
        int rel = release_warps(b, msg);
        if (rel < 0) {
            ok = false;
            break;
        }
        int live = 0, at_block = 0, exited = 0, at_warp = 0;
        const Thread *first_block = nullptr, *first_warp = nullptr;
        for (Thread &t : b->threads) {
            if (t.state == DONE) {
                exited++;
                continue;
            }
            live++;
            if (t.state == WAIT_BLOCK) {
                at_block++;
                if (!first_block)
                    first_block = &t;
            } else if (t.state == WAIT_WARP) {
                at_warp++;
                if (!first_warp)
                    first_warp = &t;
            }
        }
        if (live == 0)
            break;
        if (rel == 0) {
            if (at_block == live && exited == 0) {
                for (Thread &t : b->threads)
                    t.state = READY;
            } else {
                char buf[512];
                if (first_block)
                    snprintf(buf, sizeof buf,
                             "%s: __syncthreads at %s:%d reached by %d of %d threads (%d exited, "
                             "%d wait at a warp operation%s%s%s)",
                             block_name(b).c_str(), first_block->file, first_block->line,
                             at_block, n, exited, at_warp, first_warp ? " such as " : "",
                             first_warp ? op_name(first_warp->op) : "",
                             first_warp ? " " : "");
                else
                    snprintf(buf, sizeof buf,
                             "%s: %s at %s:%d (mask 0x%08x) never completes: %d threads wait at "
                             "warp operations whose lanes are not all there",
                             block_name(b).c_str(), op_name(first_warp->op), first_warp->file,
                             first_warp->line, first_warp->mask, at_warp);
                *msg = buf;
                ok = false;
                break;
            }
        }
        /* a pass over the released threads, in this pass's order */
        if (b->op->order == 2)
            make_order(b);
        for (int i : b->order) {
            Thread *t = &b->threads[i];
            if (t->state != READY)
                continue;
            b->cur = t;
            tsr_emu_cur_thread = &t->ctx;
            Fiber *f = t->fiber;
            fiber_enter(f);
            if (t->state == DONE)
                fiber_give(f, false);
        }
    }
    if (!ok)
        for (Thread &t : b->threads)
            if (t.state != DONE && t.fiber) {
                fiber_give(t.fiber, true);
                t.fiber = nullptr;
            }
    tsr_emu_cur_thread = nullptr;
    return ok;
}

unsigned long long g_blocks = 0;

} // namespace

bool run_grid(Op *op, std::string *msg)
{
    static thread_local std::vector<unsigned char> dyn;
    Block b;
    b.op = op;
    b.rng = op->seed;
    b.ctx.dim = op->block;
    b.ctx.grid = op->grid;
    size_t nthreads = (size_t)op->block.x * op->block.y * op->block.z;
    b.threads.resize(nthreads);
    /* dynamic shared memory: garbage (all ones: NaN floats) like a GPU's */
    if (dyn.size() < op->shared_bytes + 16)
        dyn.resize(op->shared_bytes + 16);
    uintptr_t a = ((uintptr_t)dyn.data() + 15) & ~(uintptr_t)15;
    b.ctx.dyn_shared = op->shared_bytes ? (void *)a : nullptr;
    if (op->shared_bytes)
        memset(b.ctx.dyn_shared, 0xff, op->shared_bytes);
    Block *saved = t_block;
    const tsr_emu_block_ctx *saved_ctx = tsr_emu_cur_block;
    t_block = &b;
    tsr_emu_cur_block = &b.ctx;
    bool ok = true;
    for (unsigned z = 0; z < op->grid.z && ok; z++)
        for (unsigned y = 0; y < op->grid.y && ok; y++)
            for (unsigned x = 0; x < op->grid.x && ok; x++) {
                b.ctx.idx = uint3{x, y, z};
                ok = run_block(&b, msg);
                __atomic_fetch_add(&g_blocks, 1, __ATOMIC_RELAXED);
            }
    t_block = saved;
    tsr_emu_cur_block = saved_ctx;
    return ok;
}

} // namespace emu

using namespace emu;

extern "C" void tsr_emu_syncthreads(const char *file, int line)
{
    if (!t_block || !t_block->cur) {
        fprintf(stderr, "cuda-emu: __syncthreads outside a kernel (%s:%d)\n", file, line);
        abort();
    }
    wait_here(WAIT_BLOCK, -1, 0, 0, -1, file, line);
}

extern "C" unsigned long long tsr_emu_warp(int op, unsigned mask, unsigned long long value,
                                           int src_lane, const char *file, int line)
{
    if (!t_block || !t_block->cur) {
        fprintf(stderr, "cuda-emu: warp operation outside a kernel (%s:%d)\n", file, line);
        abort();
    }
    Thread *t = t_block->cur;
    wait_here(WAIT_WARP, op, mask, value, src_lane, file, line);
    return t->result;
}

extern "C" unsigned long long tsr_emu_blocks_run(void)
{
    return __atomic_load_n(&g_blocks, __ATOMIC_RELAXED);
}
