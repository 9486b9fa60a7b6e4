/* runtime/home.c — homes: the memory node that owns a handle, and the node
 * where a task that uses it runs (owner-computes placement).
 *
 * A handle may have a home: a memory node (an accelerator's, or the host).
 * A task whose buffers have homes runs on the workers of the node that
 * homes most of its bytes (ties: the lower node; the host is node 0), so a
 * large tile is read where it lives instead of being copied to every GPU
 * that a policy spreads its users over. Every policy sees homes through
 * tsr_task_runs_on; the runtime's own shortcuts (a completing worker taking
 * the next task, a release to a GPU behind launched predecessors) ask the
 * same question (tsr__task_can_run).
 *
 * Homes come from three places:
 *   - the application: tsr_handle_set_home (explicit, any node);
 *   - groups: tsr_handle_share_home makes handles follow one home (a
 *     parameter tile and its gradient);
 *   - the runtime, under owner placement (tsr_config_t.placement, or chosen
 *     by auto, see wants_home): at its first submission, a handle of
 *     at least home_min bytes without a home gets the accelerator node that
 *     owns the fewest bytes so far, while the accelerators' homed bytes stay
 *     under their budget (70 % of their capacity: the rest is for the
 *     tiles that flow through them; docs/placement.md says why); beyond,
 *     it gets no home and the policy places its tasks as without homes. A
 *     group is placed whole: all its members' bytes, used yet or not.
 * Once the runtime has homed a handle, a task none of whose buffers has a
 * home runs on an accelerator (HOME_ACCELERATORS) where a CPU worker could
 * also run it: the tiles that flow between tasks live there. So does every
 * such task under a policy that weighs no speeds (no TSR_SCHED_USES_MODELS:
 * eager, ws, prio, random) on a node with CPU and accelerator workers: a
 * FIFO hands the next task to whichever worker asks, and a CPU core that
 * takes a GEMM tile an A100 would run in a millisecond holds the step for
 * a second (GPT-2 1.5 B on a simulated DGX A100 with its 120 CPU workers:
 * 1 TFLOPS under eager, 757 on the GPUs alone). CPU workers keep the
 * host's homed work (the optimizer beside moments homed there) and what
 * only they can run.
 * Assignments happen in the submitting thread, in submission order, so a
 * program that submits from one thread gets the same homes at every run.
 *
 * This unit must never move data, choose among the workers of one node, or
 * take a lock on the path of a task whose handles all have their homes
 * already (the first sight of a handle takes home_m, once).
 */
#include "runtime/instance.h"
#include "runtime/internal.h"

#include <stdlib.h>
#include <string.h>

/* Home groups: group g is slot g % GROUP_CHUNK of chunk g / GROUP_CHUNK:
 * its home + 1 (0: none; read without a lock), and under home_m the bytes
 * of its members and the node they are counted on + 1. Chunks never move
 * once made; they are made and groups numbered under home_m. Group 0 is
 * "no group". */
#define GROUP_CHUNK 4096u
#define GROUP_CHUNKS 1024u
typedef struct group {
    atomic_uint home1;
    int counted1;
    size_t bytes;
} group_t;
static _Atomic(group_t *) group_chunk[GROUP_CHUNKS];
static uint32_t ngroups;

static group_t *group_at(uint32_t g)
{
    return &atomic_load_explicit(&group_chunk[g / GROUP_CHUNK],
                                 memory_order_acquire)[g % GROUP_CHUNK];
}

/* A handle's home + 1, or 0. The group's when it has one. */
static int home1_of(const tsr_data_t *h)
{
    uint32_t g = atomic_load_explicit(&h->home_group, memory_order_acquire);
    if (g)
        return (int)atomic_load_explicit(&group_at(g)->home1, memory_order_acquire);
    return atomic_load_explicit(&h->home1, memory_order_acquire);
}

/* Set h's home (its group's when it has one); home_m held. */
static void set_home1(tsr_data_t *h, int home1)
{
    uint32_t g = h->home_group;
    if (g)
        atomic_store_explicit(&group_at(g)->home1, (unsigned)home1, memory_order_release);
    else
        atomic_store_explicit(&h->home1, home1, memory_order_release);
}

/* A new group, its home `home1` (home_m held); 0 when out of memory or
 * groups. */
static uint32_t group_new(int home1)
{
    uint32_t g = ngroups;
    if (g / GROUP_CHUNK >= GROUP_CHUNKS)
        return 0;
    if (!atomic_load(&group_chunk[g / GROUP_CHUNK])) {
        group_t *c = calloc(GROUP_CHUNK, sizeof *c);
        if (!c)
            return 0;
        atomic_store_explicit(&group_chunk[g / GROUP_CHUNK], c, memory_order_release);
    }
    ngroups++;
    group_t *gr = group_at(g);
    gr->bytes = 0;
    gr->counted1 = 0;
    atomic_store_explicit(&gr->home1, (unsigned)home1, memory_order_release);
    return g;
}

/* The accelerator nodes homes may go to: those with a worker, not the host. */
static bool home_candidate(int node)
{
    for (int i = 0; i < tsr__rt.nworkers; i++)
        if (tsr__rt.workers[i].node == node)
            return node != 0;
    return false;
}

int tsr__home_init(void)
{
    pthread_mutex_init(&tsr__rt.home_m, NULL);
    tsr__rt.home_bytes = calloc((size_t)tsr__rt.nnodes, sizeof *tsr__rt.home_bytes);
    if (!tsr__rt.home_bytes)
        return tsr__fail(TSR_ENOMEM, "init: out of memory (homes)");
    tsr__rt.home_budget = calloc((size_t)tsr__rt.nnodes, sizeof *tsr__rt.home_budget);
    if (!tsr__rt.home_budget)
        return tsr__fail(TSR_ENOMEM, "init: out of memory (homes)");
    tsr__rt.grouped_bytes = 0;
    tsr__rt.home_auto_bytes = SIZE_MAX;
    tsr__rt.homes_auto = false;
    atomic_store(&tsr__rt.owner_engaged, false);
    /* which device kinds work where, read per task by keep_on_accelerators;
     * accel_first wants GPUs, not simulated accelerators (CPU code at a
     * core's speed) */
    bool host = false, gpu = false;
    for (int k = 0; k < TSR_DEVICE_KINDS; k++)
        tsr__rt.kind_on_host[k] = tsr__rt.kind_on_accel[k] = false;
    for (int w = 0; w < tsr__rt.nworkers; w++) {
        const tsr_worker_t *wk = &tsr__rt.workers[w];
        host |= wk->node == 0;
        gpu |= wk->device_kind != TSR_DEVICE_CPU;
        if (wk->node == 0)
            tsr__rt.kind_on_host[wk->device_kind] = true;
        else
            tsr__rt.kind_on_accel[wk->device_kind] = true;
    }
    tsr__rt.accel_first = host && gpu && !(tsr__rt.sched.policy->flags & TSR_SCHED_USES_MODELS);
    for (int n = 0; n < tsr__rt.nnodes; n++) {
        size_t cap = tsr__mem_node(n)->capacity;
        tsr__rt.home_budget[n] = home_candidate(n) ? (cap == SIZE_MAX ? cap : cap / 10 * 7) : 0;
        if (home_candidate(n) && cap < tsr__rt.home_auto_bytes / 3 * 4)
            tsr__rt.home_auto_bytes = cap / 4 * 3;
        if (home_candidate(n))
            tsr__rt.homes_auto = tsr__rt.cfg.placement != TSR_PLACEMENT_REPLICATE;
    }
    ngroups = 1;
    return TSR_OK;
}

void tsr__home_fini(void)
{
    free(tsr__rt.home_bytes);
    free(tsr__rt.home_budget);
    tsr__rt.home_bytes = tsr__rt.home_budget = NULL;
    for (uint32_t c = 0; c < GROUP_CHUNKS; c++) {
        free(atomic_load(&group_chunk[c]));
        atomic_store(&group_chunk[c], NULL);
    }
    ngroups = 0;
    pthread_mutex_destroy(&tsr__rt.home_m);
}

size_t tsr__home_bytes(int node)
{
    pthread_mutex_lock(&tsr__rt.home_m);
    size_t b = tsr__rt.home_bytes[node];
    pthread_mutex_unlock(&tsr__rt.home_m);
    return b;
}

/* Homed bytes are counted per unit: a group (all its members' bytes,
 * reserved where the group goes, whether they were used yet or not), or a
 * handle without one. Move `bytes` counted on *counted1 to home1 (home_m
 * held). */
static void recount(int *counted1, size_t bytes, int home1)
{
    if (*counted1 == home1)
        return;
    if (*counted1)
        tsr__rt.home_bytes[*counted1 - 1] -= bytes;
    if (home1)
        tsr__rt.home_bytes[home1 - 1] += bytes;
    *counted1 = home1;
}

/* Count h's unit where its home is now (home_m held). */
static void count_home(tsr_data_t *h)
{
    uint32_t g = h->home_group;
    if (g)
        recount(&group_at(g)->counted1, group_at(g)->bytes, home1_of(h));
    else
        recount(&h->home_counted1, h->size, home1_of(h));
}

void tsr__home_forget(tsr_data_t *h)
{
    if (!tsr__rt.home_bytes || (!h->home_grouped && !h->home_counted1))
        return;
    pthread_mutex_lock(&tsr__rt.home_m);
    uint32_t g = h->home_group;
    if (g && h->home_grouped) {
        group_t *gr = group_at(g);
        gr->bytes -= h->size;
        if (gr->counted1)
            tsr__rt.home_bytes[gr->counted1 - 1] -= h->size;
        tsr__rt.grouped_bytes -= h->size;
    } else {
        recount(&h->home_counted1, h->size, 0);
    }
    pthread_mutex_unlock(&tsr__rt.home_m);
}

/* The bytes of h's unit (home_m held). */
static size_t unit_bytes(const tsr_data_t *h)
{
    return h->home_group ? group_at(h->home_group)->bytes : h->size;
}

/* The accelerator node owning the fewest homed bytes that can take `bytes`
 * more within its budget, + 1; 0 if none (home_m held). */
static int least_owned1(size_t bytes)
{
    int best = 0;
    for (int n = 1; n < tsr__rt.nnodes; n++) {
        size_t b = tsr__rt.home_bytes[n], cap = tsr__rt.home_budget[n];
        if (!cap || b > cap || bytes > cap - b)
            continue;
        if (!best || b < tsr__rt.home_bytes[best - 1])
            best = n + 1;
    }
    return best;
}

/* Whether state of `bytes` gets homes (tsr_placement_homes): always under
 * owner placement, under auto once it is more than three quarters of the
 * smallest accelerator's memory (replicas of it on every accelerator would
 * crowd out the tiles that flow through; below that, replication measured
 * faster: docs/placement.md); never without an accelerator to be a home. */
static bool homes_state(size_t bytes)
{
    if (tsr__rt.home_auto_bytes == SIZE_MAX)
        return false; /* no home candidate */
    if (tsr__rt.cfg.placement == TSR_PLACEMENT_OWNER)
        return true;
    return tsr__rt.cfg.placement == TSR_PLACEMENT_AUTO && bytes > tsr__rt.home_auto_bytes;
}

int tsr_placement_homes(size_t state_bytes)
{
    if (!tsr__runtime_instance())
        return tsr__fail(TSR_ESTATE, "placement_homes: the runtime is not initialized");
    return homes_state(state_bytes) ? 1 : 0;
}

int tsr_placement_accelerators_first(void)
{
    if (!tsr__runtime_instance())
        return tsr__fail(TSR_ESTATE,
                         "placement_accelerators_first: the runtime is not initialized");
    return tsr__rt.accel_first ? 1 : 0;
}

/* Whether h, without a home at its first submission, gets one (home_m
 * held): under owner placement, when it is large (home_min); under auto,
 * when it is part of the state the application declared (a home group:
 * parameters, gradients, moments) and of at least a sixteenth of home_min,
 * once that state gets homes (homes_state). Auto's lower bound lets a
 * model cut into channel tiles be placed like one in large tiles (GPT-2 at
 * 4.5 B parameters on 8 simulated A100s: 583 TFLOPS with 256 MiB, 859
 * with 16 MiB, docs/placement.md), while the small handles (biases,
 * LayerNorm weights) stay unhomed. */
static bool wants_home(const tsr_data_t *h)
{
    if (tsr__rt.cfg.placement == TSR_PLACEMENT_OWNER)
        return h->size >= tsr__rt.home_min;
    return h->size >= tsr__rt.home_min / 16 && h->home_group &&
           homes_state(tsr__rt.grouped_bytes);
}

/* h at its first submission (home_m held): count it where its home is;
 * a handle that wants a home (wants_home) gets one. */
static void first_sight(tsr_data_t *h)
{
    int home1 = home1_of(h);
    if (!home1 && wants_home(h)) {
        /* its group's other members (a gradient's parameter) are counted
         * where the group goes: they will be used there too */
        home1 = least_owned1(unit_bytes(h));
        if (home1) {
            set_home1(h, home1);
            atomic_store(&tsr__rt.owner_engaged, true);
        }
    }
    count_home(h);
    atomic_store_explicit(&h->home_seen, true, memory_order_release);
}

/* t, which no home places, on the accelerators where both they and CPU
 * workers could run it */
static void keep_on_accelerators(tsr_task_t t)
{
    if (!t->cl)
        return;
    bool host = false, accel = false; /* workers able to run it */
    for (int k = 0; k < TSR_DEVICE_KINDS; k++)
        if (t->cl->impl[k]) {
            host |= tsr__rt.kind_on_host[k];
            accel |= tsr__rt.kind_on_accel[k];
        }
    if (host && accel)
        t->home1 = HOME_ACCELERATORS;
}

void tsr__home_task(tsr_task_t t)
{
    t->home1 = 0;
    /* nothing to place while no handle has a home and placement cannot
     * give one (replicate, or no accelerator to be a home): the buffers are
     * only marked used (tsr_handle_share_home refuses them), without a
     * lock; set_home counts what it homes itself */
    if (!atomic_load_explicit(&tsr__rt.homes_used, memory_order_relaxed) && !tsr__rt.homes_auto) {
        for (int i = 0; i < t->nbuffers; i++) {
            tsr_data_t *h = t->data[i];
            if (h && !atomic_load_explicit(&h->home_seen, memory_order_relaxed))
                atomic_store_explicit(&h->home_seen, true, memory_order_relaxed);
        }
        if (tsr__rt.accel_first)
            keep_on_accelerators(t);
        return;
    }
    size_t on[TSR_MAX_BUFFERS];
    int node1[TSR_MAX_BUFFERS], n = 0;
    for (int i = 0; i < t->nbuffers; i++) {
        tsr_data_t *h = t->data[i];
        if (!h || h->internal || t->acc[i].mode == TSR_SCRATCH)
            continue;
        if (!atomic_load_explicit(&h->home_seen, memory_order_acquire)) {
            pthread_mutex_lock(&tsr__rt.home_m);
            if (!h->home_seen)
                first_sight(h);
            pthread_mutex_unlock(&tsr__rt.home_m);
        }
        int h1 = home1_of(h);
        if (!h1)
            continue;
        bool dup = false;
        for (int k = 0; k < i; k++)
            dup |= t->data[k] == h;
        if (dup)
            continue;
        int k = 0;
        while (k < n && node1[k] != h1)
            k++;
        if (k == n) {
            node1[n] = h1;
            on[n++] = 0;
        }
        on[k] += h->size;
    }
    int best = -1;
    for (int k = 0; k < n; k++)
        if (best < 0 || on[k] > on[best] || (on[k] == on[best] && node1[k] < node1[best]))
            best = k;
    if (best < 0) {
        /* Under owner placement the tiles that flow between tasks live on
         * the accelerators: a task without a home runs on one of them (any),
         * not on a CPU worker that would pull its tiles to the host */
        if (tsr__rt.accel_first || atomic_load_explicit(&tsr__rt.owner_engaged,
                                                        memory_order_relaxed))
            keep_on_accelerators(t);
        return;
    }
    /* a home no worker there can run the task on is no place for it */
    int node = node1[best] - 1;
    for (int w = 0; w < tsr__rt.nworkers; w++)
        if (tsr__rt.workers[w].node == node && t->cl &&
            t->cl->impl[tsr__rt.workers[w].device_kind]) {
            t->home1 = node1[best];
            return;
        }
}

bool tsr__task_can_run(tsr_task_t t, int worker)
{
    const tsr_worker_t *w = &tsr__rt.workers[worker];
    if (!t->cl || !t->cl->impl[w->device_kind])
        return false;
    return tsr__home_allows(t, w->node);
}

/* ---- the public calls ------------------------------------------------------ */

static int check_node(int node, const char *what)
{
    if (node < -1 || node >= tsr__rt.nnodes)
        return tsr__fail(TSR_EINVAL, "%s: node %d is not a memory node (0 to %d, or -1 for "
                         "none)", what, node, tsr__rt.nnodes - 1);
    if (node >= 0 && tsr__mem_node(node)->kind == TSR_NODE_KIND_DISK)
        return tsr__fail(TSR_EINVAL, "%s: node %d is the disk tier: tasks do not run there",
                         what, node);
    return TSR_OK;
}

int tsr_handle_set_home(tsr_handle_t id, int node)
{
    tsr_data_t *h;
    int rc = tsr__handle_pin(id, "handle_set_home", &h);
    if (rc)
        return rc;
    rc = check_node(node, "handle_set_home");
    if (rc == TSR_OK) {
        pthread_mutex_lock(&tsr__rt.home_m);
        set_home1(h, node + 1);
        count_home(h);
        atomic_store(&tsr__rt.homes_used, true);
        pthread_mutex_unlock(&tsr__rt.home_m);
    }
    tsr__handle_unpin(h);
    return rc;
}

int tsr_handle_home(tsr_handle_t id)
{
    tsr_data_t *h;
    if (tsr__handle_pin(id, "handle_home", &h))
        return -1;
    int home1 = home1_of(h);
    tsr__handle_unpin(h);
    return home1 - 1;
}

/* h joins group g (home_m held): it follows the group's home, and its bytes
 * move from its own count to the group's, counted where the group's home
 * is. */
static void join_group(tsr_data_t *h, uint32_t g)
{
    atomic_store_explicit(&h->home_group, g, memory_order_release);
    if (!h->home_grouped) {
        h->home_grouped = true;
        tsr__rt.grouped_bytes += h->size;
        recount(&h->home_counted1, h->size, 0);
        group_t *gr = group_at(g);
        gr->bytes += h->size;
        if (gr->counted1)
            tsr__rt.home_bytes[gr->counted1 - 1] += h->size;
    }
    count_home(h);
}

int tsr_handle_share_home(tsr_handle_t id, tsr_handle_t with)
{
    tsr_data_t *h, *w;
    int rc = tsr__handle_pin(id, "handle_share_home", &h);
    if (rc)
        return rc;
    rc = tsr__handle_pin(with, "handle_share_home", &w);
    if (rc) {
        tsr__handle_unpin(h);
        return rc;
    }
    pthread_mutex_lock(&tsr__rt.home_m);
    if (h->home_group && h->home_group != w->home_group) {
        rc = tsr__fail(TSR_EINVAL, "handle_share_home: the handle already shares a home "
                       "with others");
    } else if (h->home_seen && h != w) {
        rc = tsr__fail(TSR_ESTATE, "handle_share_home: the handle was already used by a "
                       "task: its home is set");
    } else if (!w->home_group) {
        uint32_t g = group_new(atomic_load(&w->home1));
        if (!g)
            rc = tsr__fail(TSR_ENOMEM, "handle_share_home: out of memory or of groups (%u)",
                           GROUP_CHUNK * GROUP_CHUNKS - 1);
        else
            join_group(w, g);
    }
    if (rc == TSR_OK && h != w) {
        join_group(h, w->home_group);
        if (home1_of(w))
            atomic_store(&tsr__rt.homes_used, true);
    }
    pthread_mutex_unlock(&tsr__rt.home_m);
    tsr__handle_unpin(w);
    tsr__handle_unpin(h);
    return rc;
}
