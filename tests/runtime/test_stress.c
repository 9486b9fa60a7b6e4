/* Randomized stress: thousands of random tasks over random handles with
 * random modes, each an order-sensitive update, checked against executing
 * the same sequence one task at a time. Also host acquisitions at random
 * points, compared with the sequential state at that point. With simulated
 * accelerators whose memory holds 1/8 of the working set, the same checks
 * cover the directory: fetches, write-backs, eviction and waiting. */
#include "util.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NHANDLES 48
#define WORDS 4
#define NTASKS 3000

typedef struct {
    uint64_t id;
    int nbuf;
    int mode[TSR_MAX_BUFFERS];
} stress_args_t;

static uint64_t mixlog[NTASKS], reflog[NTASKS];

static uint64_t hash64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* The update every task applies; the same function serves as reference. */
static void update(void **b, const stress_args_t *a, uint64_t *log)
{
    uint64_t mix = hash64(a->id + 1);
    for (int i = 0; i < a->nbuf; i++) {
        if (a->mode[i] == TSR_R || a->mode[i] == TSR_RW) {
            const uint64_t *v = b[i];
            for (int k = 0; k < WORDS; k++)
                mix = hash64(mix ^ v[k]);
        }
    }
    for (int i = 0; i < a->nbuf; i++) {
        uint64_t *v = b[i];
        for (int k = 0; k < WORDS; k++) {
            switch (a->mode[i]) {
            case TSR_W: v[k] = mix + (uint64_t)k; break;
            case TSR_RW: v[k] = v[k] * 6364136223846793005ull + mix + (uint64_t)k; break;
            case TSR_COMMUTE: v[k] += hash64(a->id * 31 + (uint64_t)k); break;
            case TSR_SCRATCH: v[k] = mix; break; /* private garbage */
            default: break;
            }
        }
    }
    log[a->id] = mix;
}

static int stress_kernel(void **b, const void *args, const tsr_exec_t *e)
{
    (void)e;
    update(b, args, mixlog);
    return 0;
}

#ifdef TSR_HAVE_CUDA
#include <cuda_runtime_api.h>

/* The same update on a GPU worker: the buffers (device memory, SCRATCH
 * included) come to the host on the task's stream, are updated there, and
 * go back. No kernel: what this checks is the GPU path of the runtime
 * (device memory, copies, eviction, write-back), not arithmetic. */
static int stress_kernel_cuda(void **b, const void *args, const tsr_exec_t *e)
{
    const stress_args_t *a = args;
    cudaStream_t s = (cudaStream_t)e->cuda_stream;
    uint64_t host[TSR_MAX_BUFFERS][WORDS];
    void *hb[TSR_MAX_BUFFERS];
    bool first[TSR_MAX_BUFFERS];
    for (int i = 0; i < a->nbuf; i++) {
        /* A handle given twice is one buffer: one host copy for both. */
        int j = 0;
        while (j < i && b[j] != b[i])
            j++;
        first[i] = j == i;
        hb[i] = hb[j] = host[j];
        if (first[i] &&
            cudaMemcpyAsync(host[i], b[i], sizeof host[i], cudaMemcpyDeviceToHost, s) !=
                cudaSuccess)
            return 1;
    }
    if (cudaStreamSynchronize(s) != cudaSuccess)
        return 2;
    update(hb, a, mixlog);
    for (int i = 0; i < a->nbuf; i++)
        if (first[i] && a->mode[i] != TSR_R &&
            cudaMemcpyAsync(b[i], host[i], sizeof host[i], cudaMemcpyHostToDevice, s) !=
                cudaSuccess)
            return 3;
    return cudaStreamSynchronize(s) == cudaSuccess ? 0 : 4;
}
#define STRESS_CUDA stress_kernel_cuda
#else
#define STRESS_CUDA NULL
#endif

static tsr_codelet_t codelets[TSR_MAX_BUFFERS + 1];

static void run_dev(unsigned seed, int ncpu, const char *sched, size_t max_pending,
                    int nsim, size_t sim_mem, int ncuda, size_t cuda_mem);

static void run_sim(unsigned seed, int ncpu, const char *sched, size_t max_pending,
                    int nsim, size_t sim_mem)
{
    run_dev(seed, ncpu, sched, max_pending, nsim, sim_mem, 0, 0);
}

/* nsim simulated accelerators and ncuda GPUs, of sim_mem / cuda_mem bytes. */
static void run_dev(unsigned seed, int ncpu, const char *sched, size_t max_pending,
                    int nsim, size_t sim_mem, int ncuda, size_t cuda_mem)
{
    static uint64_t data[NHANDLES][WORDS], ref[NHANDLES][WORDS];
    uint64_t scratch_ref[TSR_MAX_BUFFERS][WORDS];
    for (int n = 0; n <= TSR_MAX_BUFFERS; n++)
        codelets[n] = (tsr_codelet_t){.name = "stress",
                                      .impl = {stress_kernel, STRESS_CUDA}, .nbuffers = n};
    srand(seed);
    for (int h = 0; h < NHANDLES; h++)
        for (int k = 0; k < WORDS; k++)
            data[h][k] = ref[h][k] = hash64((uint64_t)(h * WORDS + k) ^ seed);
    memset(mixlog, 0, sizeof mixlog);

    start_runtime_dev(ncpu, sched, max_pending, nsim, sim_mem, ncuda, cuda_mem);
    tsr_handle_t hs[NHANDLES];
    for (int h = 0; h < NHANDLES; h++)
        cr_assert_eq(tsr_handle_register(&hs[h], data[h], sizeof data[h]), TSR_OK);

    static const tsr_mode_t modes[] = {TSR_R, TSR_R, TSR_R, TSR_W, TSR_RW, TSR_RW,
                                       TSR_COMMUTE, TSR_COMMUTE, TSR_SCRATCH};
    for (int t = 0; t < NTASKS; t++) {
        if (rand() % 200 == 0) {
            /* Host access in program order. */
            int h = rand() % NHANDLES;
            uint64_t *p;
            tsr_mode_t m = rand() % 2 ? TSR_R : TSR_RW;
            cr_assert_eq(tsr_handle_acquire(hs[h], m, (void **)&p), TSR_OK, "%s",
                         tsr_error_message());
            for (int k = 0; k < WORDS; k++)
                cr_assert_eq(p[k], ref[h][k], "seed %u: acquire of handle %d at task %d",
                             seed, h, t);
            if (m == TSR_RW) {
                p[0] ^= 0x5555;
                ref[h][0] ^= 0x5555;
            }
            cr_assert_eq(tsr_handle_release(hs[h]), TSR_OK);
        }
        stress_args_t a = {.id = (uint64_t)t, .nbuf = 1 + rand() % 5};
        /* Mostly a skewed choice of handles, so that chains form. */
        tsr_access_t acc[TSR_MAX_BUFFERS];
        void *refbufs[TSR_MAX_BUFFERS];
        int used[NHANDLES] = {0};
        for (int i = 0; i < a.nbuf; i++) {
            int h;
            do
                h = (rand() % 3 == 0) ? rand() % NHANDLES : rand() % 6;
            while (used[h] && rand() % 8);
            a.mode[i] = modes[rand() % (sizeof modes / sizeof modes[0])];
            if (used[h]) {
                /* A handle twice: both accesses read-only or both
                 * commutative keep the reference well defined. */
                a.mode[i] = used[h] == TSR_COMMUTE ? TSR_COMMUTE : TSR_R;
                if (used[h] != TSR_R && used[h] != TSR_COMMUTE)
                    a.mode[i] = TSR_R;
            }
            used[h] = a.mode[i];
            acc[i] = (tsr_access_t){hs[h], a.mode[i]};
            refbufs[i] = a.mode[i] == TSR_SCRATCH ? (void *)scratch_ref[i] : ref[h];
        }
        int prio = rand() % 5;
        tsr_task_desc_t d = {.codelet = &codelets[a.nbuf], .nbuffers = a.nbuf,
                             .buffers = acc, .args = &a, .args_size = sizeof a,
                             .priority = prio};
        cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
        update(refbufs, &a, reflog); /* the sequential reference */
    }
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    for (int h = 0; h < NHANDLES; h++)
        cr_assert_eq(tsr_handle_unregister(hs[h]), TSR_OK);
    stop_runtime();
    for (int t = 0; t < NTASKS; t++)
        cr_assert_eq(mixlog[t], reflog[t],
                     "seed %u ncpu %d %s: task %d read other data than in sequence",
                     seed, ncpu, sched, t);
    for (int h = 0; h < NHANDLES; h++)
        for (int k = 0; k < WORDS; k++)
            cr_assert_eq(data[h][k], ref[h][k], "seed %u: handle %d word %d", seed, h, k);
}

static void run_one(unsigned seed, int ncpu, const char *sched, size_t max_pending)
{
    run_sim(seed, ncpu, sched, max_pending, 0, 0);
}

Test(stress, eager_many_seeds)
{
    for (unsigned seed = 1; seed <= 12; seed++)
        run_one(seed, 1 + (int)(seed % 4), "eager", seed % 3 ? 0 : 8);
}

Test(stress, prio_many_seeds)
{
    for (unsigned seed = 100; seed < 112; seed++)
        run_one(seed, 1 + (int)(seed % 4), "prio", seed % 3 ? 0 : 8);
}

/* Two simulated accelerators, each holding 1/8 of the working set (6 of
 * 48 handles; a task touches at most 5): every task on them fetches,
 * evicts and writes back, and the CPU workers read what they wrote. */
#define SIM_MEM (sizeof(uint64_t) * WORDS * NHANDLES / 8)

Test(stress, sim_eager_small_memory, .timeout = 600)
{
    for (unsigned seed = 200; seed < 210; seed++)
        run_sim(seed, 1 + (int)(seed % 3), "eager", seed % 3 ? 0 : 8, 2, SIM_MEM);
}

Test(stress, sim_prio_small_memory, .timeout = 600)
{
    for (unsigned seed = 300; seed < 310; seed++)
        run_sim(seed, 1 + (int)(seed % 2), "prio", seed % 4 ? 0 : 8, 2, SIM_MEM);
}

/* Accelerators only: every task runs off the host, data returns to the
 * host only through acquisitions, write-backs and unregistration. */
Test(stress, sim_only, .timeout = 600)
{
    for (unsigned seed = 400; seed < 406; seed++)
        run_sim(seed, -1, seed % 2 ? "eager" : "prio", 0, 1 + (int)(seed % 2), SIM_MEM);
}

/* The policies added to eager and prio, each on CPU workers (with and
 * without a small submission window) and on CPU + 2 simulated accelerators
 * with 1/8 of the working set. The model-based ones start uncalibrated
 * (they explore) and learn during the run. */
static void every_case(const char *sched, unsigned seed0)
{
    for (unsigned seed = seed0; seed < seed0 + 4; seed++)
        run_one(seed, 1 + (int)(seed % 4), sched, seed % 2 ? 0 : 8);
    for (unsigned seed = seed0 + 10; seed < seed0 + 13; seed++)
        run_sim(seed, 1 + (int)(seed % 2), sched, seed % 3 ? 0 : 8, 2, SIM_MEM);
    run_sim(seed0 + 20, -1, sched, 0, 2, SIM_MEM);
}

Test(stress, policy_random, .timeout = 600) { every_case("random", 500); }
Test(stress, policy_ws, .timeout = 600) { every_case("ws", 600); }
Test(stress, policy_dmda, .timeout = 600) { every_case("dmda", 700); }
Test(stress, policy_heft, .timeout = 600) { every_case("heft", 800); }

/* Two GPUs (real, or emulated with -Dcuda=emu), each holding 1/8 of the
 * working set, with and without CPU workers: fetches, peer copies,
 * eviction and write-back of device copies, SCRATCH in device memory. */
Test(stress, cuda_small_memory, .timeout = 600)
{
    int ngpu = tsr_cuda_device_count();
    if (ngpu < 1)
        cr_skip_test("no CUDA device: GPU stress skipped");
    int use = ngpu < 2 ? ngpu : 2;
    for (unsigned seed = 900; seed < 904; seed++)
        run_dev(seed, seed % 2 ? -1 : 1 + (int)(seed % 3), seed % 3 ? "eager" : "prio",
                seed % 4 ? 0 : 8, 0, 0, use, SIM_MEM);
}
