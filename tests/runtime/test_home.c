/* Homes (runtime/home.c): a task runs on the node that homes most of its
 * bytes, under every policy; groups share one home; owner placement gives
 * large handles homes by least bytes owned within a budget; auto placement
 * only once the declared state outgrows three quarters of an accelerator.
 * References: the rules of docs/placement.md worked by hand on small
 * cases, and the values an order-sensitive chain must produce. */
#include "util.h"

#include <tessera/sched.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define OK(x) cr_assert_eq((x), TSR_OK, "%s: %s", #x, tsr_error_message())

/* x = 3x + k, and the node the task ran on written to *args' slot. */
typedef struct { uint64_t k; int *node; } step_args_t;

static int step(void **b, const void *args, const tsr_exec_t *e)
{
    const step_args_t *a = args;
    uint64_t *x = b[0];
    *x = 3 * *x + a->k;
    *a->node = e->memory_node;
    return 0;
}
static const tsr_codelet_t cl_step = {.name = "step", .impl = {step}, .nbuffers = 1};

/* Reads two buffers, records its node. */
static int read2(void **b, const void *args, const tsr_exec_t *e)
{
    (void)b;
    **(int *const *)args = e->memory_node;
    return 0;
}
static const tsr_codelet_t cl_read2 = {.name = "read2", .impl = {read2}, .nbuffers = 2};

static void submit_step(tsr_handle_t h, uint64_t k, int *node)
{
    step_args_t a = {k, node};
    tsr_access_t acc = {h, TSR_RW};
    tsr_task_desc_t d = {.codelet = &cl_step, .nbuffers = 1, .buffers = &acc, .args = &a,
                         .args_size = sizeof a};
    OK(tsr_submit(&d, NULL));
}

static void submit_read2(tsr_handle_t a, tsr_handle_t b, int *node)
{
    tsr_access_t acc[2] = {{a, TSR_R}, {b, TSR_R}};
    tsr_task_desc_t d = {.codelet = &cl_read2, .nbuffers = 2, .buffers = acc, .args = &node,
                         .args_size = sizeof node};
    OK(tsr_submit(&d, NULL));
}

static void start(int ncpu, const char *sched, int placement, size_t home_min)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = ncpu;
    cfg.sched = sched;
    cfg.bind = 0;
    cfg.nsim = 2;
    cfg.sim_mem = 1 << 20;
    cfg.ncuda = 0;
    cfg.placement = placement;
    cfg.home_min = home_min;
    OK(tsr_init(&cfg));
}

/* The chain x -> 3x + k, k = 1 … n, from x = 1, in double-checked integers. */
static uint64_t chain(int n)
{
    uint64_t x = 1;
    for (int k = 1; k <= n; k++)
        x = 3 * x + (uint64_t)k;
    return x;
}

enum { N = 40 };

Test(home, tasks_run_at_their_buffers_home_under_every_policy, .timeout = 60)
{
    for (int p = 0; tsr_sched_builtin_at(p); p++) {
        const char *pol = tsr_sched_builtin_at(p)->name;
        start(2, pol, TSR_PLACEMENT_REPLICATE, 0);
        /* nodes: 0 the host, 1 and 2 the simulated accelerators */
        uint64_t *xa = calloc(1, 4096), *xb = calloc(1, 1024);
        cr_assert(xa && xb);
        xa[0] = xb[0] = 1;
        tsr_handle_t a, b, c;
        OK(tsr_handle_register(&a, xa, 4096));
        OK(tsr_handle_register(&b, xb, 1024));
        OK(tsr_handle_alloc(&c, 64));
        OK(tsr_handle_set_home(a, 2));
        OK(tsr_handle_set_home(b, 0));
        cr_assert_eq(tsr_handle_home(a), 2);
        cr_assert_eq(tsr_handle_home(b), 0);
        cr_assert_eq(tsr_handle_home(c), -1);
        int na[N], nb[N], nab[N];
        for (int k = 0; k < N; k++) {
            submit_step(a, (uint64_t)k + 1, &na[k]);
            submit_step(b, (uint64_t)k + 1, &nb[k]);
            submit_read2(b, a, &nab[k]); /* a: 4096 of its 5120 homed bytes */
        }
        OK(tsr_wait_all());
        for (int k = 0; k < N; k++) {
            cr_assert_eq(na[k], 2, "%s: a task on a (home 2) ran on node %d", pol, na[k]);
            cr_assert_eq(nb[k], 0, "%s: a task on b (home: the host) ran on node %d", pol,
                         nb[k]);
            cr_assert_eq(nab[k], 2, "%s: a task reading b and a ran on node %d", pol, nab[k]);
        }
        OK(tsr_handle_unregister(a));
        OK(tsr_handle_unregister(b));
        OK(tsr_handle_unregister(c));
        cr_assert_eq(xa[0], chain(N), "%s: a's chain", pol);
        cr_assert_eq(xb[0], chain(N), "%s: b's chain", pol);
        free(xa);
        free(xb);
        stop_runtime();
    }
}

Test(home, a_group_follows_one_home)
{
    start(2, "eager", TSR_PLACEMENT_REPLICATE, 0);
    tsr_handle_t p, g, m, other;
    OK(tsr_handle_alloc(&p, 256));
    OK(tsr_handle_alloc(&g, 256));
    OK(tsr_handle_alloc(&m, 256));
    OK(tsr_handle_alloc(&other, 256));
    OK(tsr_handle_share_home(g, p));
    OK(tsr_handle_share_home(m, g)); /* joins p's group through g */
    OK(tsr_handle_set_home(g, 1));   /* setting one sets all */
    cr_assert_eq(tsr_handle_home(p), 1);
    cr_assert_eq(tsr_handle_home(m), 1);
    cr_assert_eq(tsr_handle_home(other), -1);
    int n[3];
    submit_step(p, 1, &n[0]);
    submit_step(g, 1, &n[1]);
    submit_step(m, 1, &n[2]);
    OK(tsr_wait_all());
    for (int i = 0; i < 3; i++)
        cr_assert_eq(n[i], 1, "member %d ran on node %d", i, n[i]);
    /* misuse: errors, never a crash */
    cr_assert_eq(tsr_handle_share_home(other, p), TSR_OK);
    cr_assert_eq(tsr_handle_share_home(p, m), TSR_ESTATE, "p was used: its home is set");
    tsr_handle_t q;
    OK(tsr_handle_alloc(&q, 8));
    tsr_handle_t r;
    OK(tsr_handle_alloc(&r, 8));
    OK(tsr_handle_share_home(r, q));
    cr_assert_eq(tsr_handle_share_home(r, p), TSR_EINVAL, "r already shares q's home");
    cr_assert_eq(tsr_handle_set_home(p, 3), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "node 3"), "%s", tsr_error_message());
    cr_assert_eq(tsr_handle_set_home(p, -2), TSR_EINVAL);
    cr_assert_neq(tsr_handle_set_home(NULL, 1), TSR_OK);
    cr_assert_eq(tsr_handle_home(NULL), -1);
    cr_assert_neq(tsr_handle_share_home(p, NULL), TSR_OK);
    OK(tsr_handle_set_home(p, -1)); /* none: the policy places its tasks again */
    cr_assert_eq(tsr_handle_home(g), -1);
    tsr_handle_t hs[] = {p, g, m, other, q, r};
    for (size_t i = 0; i < sizeof hs / sizeof *hs; i++)
        OK(tsr_handle_unregister(hs[i]));
    stop_runtime();
    /* stale handles after shutdown */
    cr_assert_eq(tsr_handle_home(p), -1);
    cr_assert_neq(tsr_handle_set_home(p, 0), TSR_OK);
}

/* Owner placement: budget = 70 % of 1 MiB per accelerator (716.8 KiB).
 * First uses, in order, and the homes by least bytes owned (ties: the
 * lower node):
 *   h0 300 KiB -> node 1 (1: 300, 2: 0)
 *   h1 200 KiB -> node 2 (1: 300, 2: 200)
 *   h2 100 KiB -> node 2 (1: 300, 2: 300)
 *   h3 150 KiB -> node 1, the tie (1: 450, 2: 300)
 *   h4 450 KiB -> none: 450 + 450 and 300 + 450 exceed 716.8
 *   h5   2 KiB -> none: below home_min (4 KiB)
 *   h6 200 KiB -> node 2 (1: 450, 2: 500) */
Test(home, owner_placement_balances_homes_by_bytes_within_a_budget)
{
    start(1, "eager", TSR_PLACEMENT_OWNER, 4 << 10);
    const size_t kib[] = {300, 200, 100, 150, 450, 2, 200};
    const int want[] = {1, 2, 2, 1, -1, -1, 2};
    enum { H = sizeof kib / sizeof *kib };
    tsr_handle_t h[H];
    int node[H];
    for (int i = 0; i < H; i++) {
        OK(tsr_handle_alloc(&h[i], kib[i] << 10));
        submit_step(h[i], 1, &node[i]);
        OK(tsr_wait_all());
        cr_assert_eq(tsr_handle_home(h[i]), want[i], "h%d: home %d, want %d", i,
                     tsr_handle_home(h[i]), want[i]);
        if (want[i] > 0)
            cr_assert_eq(node[i], want[i], "h%d's task ran on node %d", i, node[i]);
    }
    /* a group is placed whole: p (8 KiB) with its unused g (300 KiB)
     * needs 308 KiB; node 1 has 450 + 308 > 716.8, node 2 500 + 308: none;
     * a 4 KiB pair (8 KiB) fits node 1 (450 + 8) */
    tsr_handle_t p, g, q, r;
    OK(tsr_handle_alloc(&p, 8 << 10));
    OK(tsr_handle_alloc(&g, 300 << 10));
    OK(tsr_handle_share_home(g, p));
    OK(tsr_handle_alloc(&q, 4 << 10));
    OK(tsr_handle_alloc(&r, 4 << 10));
    OK(tsr_handle_share_home(r, q));
    int np, nq;
    submit_step(p, 1, &np);
    submit_step(q, 1, &nq);
    OK(tsr_wait_all());
    cr_assert_eq(tsr_handle_home(p), -1, "308 KiB of group fits no budget");
    cr_assert_eq(tsr_handle_home(q), 1);
    cr_assert_eq(tsr_handle_home(r), 1, "r follows q before its own first use");
    tsr_node_stats_t st;
    OK(tsr_memory_node_stats(1, &st));
    cr_assert_eq(st.homed, (size_t)(450 + 8) << 10, "node 1 homes %zu bytes", st.homed);
    OK(tsr_memory_node_stats(2, &st));
    cr_assert_eq(st.homed, (size_t)500 << 10, "node 2 homes %zu bytes", st.homed);
    tsr_handle_t more[] = {p, g, q, r};
    for (size_t i = 0; i < 4; i++)
        OK(tsr_handle_unregister(more[i]));
    for (int i = 0; i < H; i++)
        OK(tsr_handle_unregister(h[i]));
    for (int n = 1; n <= 2; n++) { /* freed handles leave the counts */
        OK(tsr_memory_node_stats(n, &st));
        cr_assert_eq(st.homed, 0, "node %d still homes %zu bytes", n, st.homed);
    }
    stop_runtime();
}

/* Auto placement homes only declared state (handles in home groups), and
 * only once it exceeds three quarters of the smallest accelerator (768 KiB
 * of 1 MiB): a 300 KiB pair stays unhomed; after a 500 KiB pair is
 * declared (800 KiB grouped), grouped handles of at least a sixteenth of
 * home_min (256 bytes of 4 KiB) used from then on get homes (the pair's
 * 500 KiB within node 1's budget of 716.8, then a 1 KiB pair), a smaller
 * grouped one and an ungrouped one never do. tsr_placement_homes answers
 * the same rule before anything is grouped. */
Test(home, auto_placement_starts_when_the_declared_state_outgrows_an_accelerator)
{
    cr_assert_eq(tsr_placement_homes(1), TSR_ESTATE, "no runtime");
    start(1, "eager", TSR_PLACEMENT_AUTO, 4 << 10);
    cr_assert_eq(tsr_placement_homes(768 << 10), 0, "3/4 of 1 MiB fits replicated");
    cr_assert_eq(tsr_placement_homes((768 << 10) + 1), 1, "beyond: homes");
    tsr_handle_t p0, g0, p1, g1, loose;
    int n[3]; /* each task its own slot: they may run at once */
    OK(tsr_handle_alloc(&p0, 150 << 10));
    OK(tsr_handle_alloc(&g0, 150 << 10));
    OK(tsr_handle_share_home(g0, p0));
    submit_step(p0, 1, &n[0]);
    OK(tsr_wait_all());
    cr_assert_eq(tsr_handle_home(p0), -1, "300 KiB of state fits: replicated");
    OK(tsr_handle_alloc(&p1, 250 << 10));
    OK(tsr_handle_alloc(&g1, 250 << 10));
    OK(tsr_handle_alloc(&loose, 250 << 10));
    OK(tsr_handle_share_home(g1, p1));
    submit_step(p1, 1, &n[1]);
    submit_step(loose, 1, &n[2]);
    OK(tsr_wait_all());
    cr_assert_eq(tsr_handle_home(p1), 1, "800 KiB of state: p1 gets a home");
    cr_assert_eq(tsr_handle_home(g1), 1, "and its gradient with it");
    cr_assert_eq(tsr_handle_home(loose), -1, "not declared state: no home");
    cr_assert_eq(tsr_handle_home(p0), -1, "a home is given at first use only");
    tsr_handle_t p2, g2, tiny, tiny_g;
    int m[2];
    OK(tsr_handle_alloc(&p2, 1 << 10));
    OK(tsr_handle_alloc(&g2, 1 << 10));
    OK(tsr_handle_share_home(g2, p2));
    OK(tsr_handle_alloc(&tiny, 128));
    OK(tsr_handle_alloc(&tiny_g, 128));
    OK(tsr_handle_share_home(tiny_g, tiny));
    submit_step(p2, 1, &m[0]);
    submit_step(tiny, 1, &m[1]);
    OK(tsr_wait_all());
    cr_assert_neq(tsr_handle_home(p2), -1, "1 KiB of declared state: a home (home_min 4 KiB)");
    cr_assert_eq(tsr_handle_home(tiny), -1, "128 bytes: under a sixteenth of home_min");
    tsr_handle_t hs[] = {p0, g0, p1, g1, loose, p2, g2, tiny, tiny_g};
    for (size_t i = 0; i < sizeof hs / sizeof *hs; i++)
        OK(tsr_handle_unregister(hs[i]));
    stop_runtime();
}

/* Threads that declare groups, set homes and submit chains on their own
 * handles and on shared ones at once, under owner placement: every chain
 * ends at its value, every task at its handle's home. */
enum { THREADS = 4, PER = 8, LEN = 30 };
static tsr_handle_t shared_h[PER];

static void *racer(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint64_t *x = calloc(PER, sizeof(uint64_t) * 512);
    tsr_handle_t h[PER];
    int *nodes = calloc((size_t)PER * LEN, sizeof *nodes);
    int *rnodes = calloc((size_t)PER * LEN, sizeof *rnodes); /* the readers' */
    cr_assert(x && nodes && rnodes);
    for (int i = 0; i < PER; i++) {
        x[i * 512] = 1;
        cr_assert_eq(tsr_handle_register(&h[i], &x[i * 512], 4096), TSR_OK);
        if (i % 2)
            cr_assert_eq(tsr_handle_share_home(h[i], h[i - 1]), TSR_OK);
        if (i % 4 == 3)
            cr_assert_eq(tsr_handle_set_home(h[i], 1 + id % 2), TSR_OK);
    }
    for (int k = 1; k <= LEN; k++)
        for (int i = 0; i < PER; i++) {
            submit_step(h[i], (uint64_t)k, &nodes[i * LEN + k - 1]);
            submit_read2(shared_h[i], h[i], &rnodes[i * LEN + k - 1]);
            (void)tsr_handle_home(shared_h[(i + id) % PER]);
            /* every thread moves the shared handles' homes while others
             * read them: later tasks follow, none is lost */
            if (k % 7 == 0)
                cr_assert_eq(tsr_handle_set_home(shared_h[(i + k) % PER], 1 + (id + k) % 2),
                             TSR_OK);
        }
    cr_assert_eq(tsr_wait_all(), TSR_OK);
    for (int i = 0; i < PER; i++) {
        int home = tsr_handle_home(h[i]);
        for (int k = 0; k < LEN; k++)
            if (home >= 0)
                cr_assert_eq(nodes[i * LEN + k], home, "thread %d handle %d: node %d, home %d",
                             id, i, nodes[i * LEN + k], home);
        cr_assert_eq(tsr_handle_unregister(h[i]), TSR_OK);
        cr_assert_eq(x[i * 512], chain(LEN), "thread %d handle %d", id, i);
    }
    free(x);
    free(nodes);
    free(rnodes);
    return NULL;
}

Test(home, racing_threads_keep_homes_and_values, .timeout = 60)
{
    start(2, "ws", TSR_PLACEMENT_OWNER, 1024);
    for (int i = 0; i < PER; i++)
        OK(tsr_handle_alloc(&shared_h[i], 2048));
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        cr_assert_eq(pthread_create(&th[t], NULL, racer, (void *)(intptr_t)t), 0);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    size_t homed = 0;
    for (int n = 0; n < tsr_memory_node_count(); n++) {
        tsr_node_stats_t st;
        OK(tsr_memory_node_stats(n, &st));
        homed += st.homed;
    }
    cr_assert_eq(homed, (size_t)PER * 2048, "only the shared handles are left, each homed "
                 "once: %zu bytes counted", homed);
    for (int i = 0; i < PER; i++) {
        int home = tsr_handle_home(shared_h[i]);
        cr_assert(home == 1 || home == 2, "shared handle %d: home %d", i, home);
        OK(tsr_handle_unregister(shared_h[i]));
    }
    stop_runtime();
}

Test(home, a_placement_the_runtime_does_not_know_is_refused)
{
    setenv("TESSERA_PLACEMENT", "everywhere", 1);
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 1;
    cfg.bind = 0;
    int rc = tsr_init(&cfg);
    unsetenv("TESSERA_PLACEMENT");
    cr_assert_eq(rc, TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "TESSERA_PLACEMENT=everywhere: expected auto, "
                                          "replicate or owner"),
              "%s", tsr_error_message());
    cfg.placement = 7;
    cr_assert_eq(tsr_init(&cfg), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "placement=7"), "%s", tsr_error_message());
    cfg.placement = TSR_PLACEMENT_OWNER; /* a CPU-only node: nothing to home, it runs */
    OK(tsr_init(&cfg));
    int node;
    tsr_handle_t h;
    OK(tsr_handle_alloc(&h, 1 << 20));
    submit_step(h, 1, &node);
    OK(tsr_wait_all());
    cr_assert_eq(tsr_handle_home(h), -1);
    cr_assert_eq(node, 0);
    OK(tsr_handle_unregister(h));
    stop_runtime();
}

/* Once owner placement has homed a handle, a task none of whose buffers
 * has a home runs on an accelerator (the flowing tiles live there), and a
 * task homed on the host on a CPU worker; under every built-in policy. */
Test(home, under_owner_placement_unhomed_tasks_run_on_accelerators, .timeout = 60)
{
    for (int p = 0; tsr_sched_builtin_at(p); p++) {
        const char *pol = tsr_sched_builtin_at(p)->name;
        start(2, pol, TSR_PLACEMENT_OWNER, 64 << 10);
        tsr_handle_t big, small, host;
        int nb, ns[N], nh[N];
        OK(tsr_handle_alloc(&big, 100 << 10));
        submit_step(big, 1, &nb); /* engages owner placement */
        OK(tsr_handle_alloc(&small, 64));
        OK(tsr_handle_alloc(&host, 64));
        OK(tsr_handle_set_home(host, 0));
        for (int k = 0; k < N; k++) {
            submit_step(small, 1, &ns[k]);
            submit_step(host, 1, &nh[k]);
        }
        OK(tsr_wait_all());
        cr_assert_geq(tsr_handle_home(big), 1, "%s", pol);
        cr_assert_eq(tsr_handle_home(small), -1, "%s: below home_min", pol);
        for (int k = 0; k < N; k++) {
            cr_assert(ns[k] == 1 || ns[k] == 2, "%s: an unhomed task ran on node %d", pol,
                      ns[k]);
            cr_assert_eq(nh[k], 0, "%s: a host-homed task ran on node %d", pol, nh[k]);
        }
        OK(tsr_handle_unregister(big));
        OK(tsr_handle_unregister(small));
        OK(tsr_handle_unregister(host));
        stop_runtime();
    }
}

/* tsr_placement_homes per placement: replicate never, owner always, and
 * nothing without an accelerator to be a home. */
Test(home, placement_homes_follows_the_configuration)
{
    start(1, "eager", TSR_PLACEMENT_REPLICATE, 0);
    cr_assert_eq(tsr_placement_homes(SIZE_MAX), 0, "replicate");
    stop_runtime();
    start(1, "eager", TSR_PLACEMENT_OWNER, 0);
    cr_assert_eq(tsr_placement_homes(1), 1, "owner");
    stop_runtime();
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 1;
    cfg.bind = 0;
    cfg.ncuda = 0;
    cfg.placement = TSR_PLACEMENT_OWNER;
    OK(tsr_init(&cfg));
    cr_assert_eq(tsr_placement_homes(SIZE_MAX), 0, "no accelerator");
    stop_runtime();
}

/* Where it ran: the worker's device kind, written by either implementation
 * (the GPU one touches no buffer). */
static int note_kind(void **b, const void *args, const tsr_exec_t *e)
{
    (void)b;
    **(int *const *)args = e->device_kind;
    return 0;
}
static const tsr_codelet_t cl_note = {.name = "note_kind", .impl = {note_kind, note_kind},
                                      .nbuffers = 1};

/* Under a policy that weighs no speeds (no TSR_SCHED_USES_MODELS), on a
 * node with CPU and GPU workers, a task a GPU can run never runs on a CPU
 * worker, unless its buffer is homed on the host; policies with models
 * choose themselves, and without a GPU (simulated accelerators run CPU
 * code at a CPU's speed) nothing changes. Runs without a GPU (runtime_home)
 * and with two emulated ones beside two CPU workers (runtime_home_cuda2). */
Test(home, policies_without_models_keep_gpu_work_off_cpu_workers, .timeout = 60)
{
    cr_assert_eq(tsr_placement_accelerators_first(), TSR_ESTATE, "no runtime");
    enum { M = 64 };
    for (int p = 0; tsr_sched_builtin_at(p); p++) {
        const tsr_sched_policy_t *pol = tsr_sched_builtin_at(p);
        tsr_config_t cfg;
        tsr_config_init(&cfg);
        cfg.ncpu = 2;
        cfg.sched = pol->name;
        cfg.bind = 0;
        OK(tsr_init(&cfg));
        int gpus = 0;
        for (int w = 0; w < tsr_worker_count(); w++) {
            tsr_worker_stats_t st;
            OK(tsr_worker_stats(w, &st));
            gpus += st.device_kind == TSR_DEVICE_CUDA;
        }
        int want = gpus > 0 && !(pol->flags & TSR_SCHED_USES_MODELS);
        cr_assert_eq(tsr_placement_accelerators_first(), want, "%s, %d GPUs", pol->name, gpus);
        tsr_handle_t h[M], host;
        int kind[M], hkind[M];
        OK(tsr_handle_alloc(&host, 64));
        OK(tsr_handle_set_home(host, 0));
        for (int k = 0; k < M; k++) {
            OK(tsr_handle_alloc(&h[k], 64));
            int *slot = &kind[k], *hslot = &hkind[k];
            tsr_access_t a = {h[k], TSR_RW}, ah = {host, TSR_RW};
            tsr_task_desc_t d = {.codelet = &cl_note, .nbuffers = 1, .buffers = &a,
                                 .args = &slot, .args_size = sizeof slot};
            OK(tsr_submit(&d, NULL));
            tsr_task_desc_t dh = {.codelet = &cl_note, .nbuffers = 1, .buffers = &ah,
                                  .args = &hslot, .args_size = sizeof hslot};
            OK(tsr_submit(&dh, NULL));
        }
        OK(tsr_wait_all());
        for (int k = 0; k < M; k++) {
            if (want)
                cr_assert_eq(kind[k], TSR_DEVICE_CUDA, "%s: task %d ran on a CPU worker",
                             pol->name, k);
            cr_assert_eq(hkind[k], TSR_DEVICE_CPU, "%s: a host-homed task ran on a GPU",
                         pol->name);
            OK(tsr_handle_unregister(h[k]));
        }
        OK(tsr_handle_unregister(host));
        stop_runtime();
    }
}

