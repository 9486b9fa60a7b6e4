/* memory/node.c — the table of memory nodes, the host node and its
 * allocator, and the transfer counters every engine reports to.
 *
 * Must never: hand out host memory that the directory did not count, or
 * keep a lock while an engine runs a copy.
 */
#include "memory/memory.h"
#include "memory/disk.h"
#include "memory/phantom.h"
#include "memory/vclock.h"

#include <tessera/tessera.h>

#include <numa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef TSR_HAVE_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

static struct {
    int n;
    tsr_node_t nodes[TSR_MAX_NODES];
    atomic_uint_fast64_t link[TSR_MAX_NODES][TSR_MAX_NODES];
    bool numa;  /* several NUMA nodes: place large buffers locally */
    int disk;   /* the disk tier's node id, or -1 */
    int evict;  /* TSR_MEM_EVICT_… */
} mem = {.disk = -1};

/* The monotonic clock, or virtual time while the virtual clock is on
 * (memory/vclock.h): every layer's timestamps then come from the
 * simulation. */
uint64_t tsr__mem_now_ns(void)
{
    if (tsr__vclock_on())
        return tsr__vclock_now();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

bool tsr__mem_wait_until(bool (*pred)(void *arg), void *arg, pthread_mutex_t *m,
                         pthread_cond_t *cv)
{
    for (;;) {
        if (m)
            pthread_mutex_lock(m);
        bool ok = pred(arg);
        if (!ok && !tsr__vclock_on() && cv) {
            while (!(ok = pred(arg)))
                pthread_cond_wait(cv, m);
        }
        if (m)
            pthread_mutex_unlock(m);
        if (ok)
            return true;
        if (!tsr__vclock_on() || !tsr__vclock_step())
            return false;
    }
}

int tsr__mem_node_count(void) { return mem.n; }
int tsr__mem_disk_node(void) { return mem.disk; }
int tsr__mem_evict_rule(void) { return mem.evict; }
tsr_node_t *tsr__mem_node(int id) { return &mem.nodes[id]; }

uint64_t tsr__mem_link_bytes(int s, int d)
{
    if (s < 0 || d < 0 || s >= mem.n || d >= mem.n)
        return 0;
    return atomic_load(&mem.link[s][d]);
}

/* ---- host memory ------------------------------------------------------- */

/* Large buffers on a multi-NUMA machine are mapped on the calling
 * thread's node: the worker that first needs a tile gets it locally. */
#define NUMA_MIN (2u << 20)

/* n rounded up to 64; n <= SIZE_MAX - 63 (tsr__host_alloc checks). */
static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Pinned memory for host replicas (tsr__host_set_pinned), from the first
 * GPU node's open to the host node's close. */
static tsr_host_pinned_t pinned;
static bool pinned_set;

bool tsr__host_set_pinned(const tsr_host_pinned_t *pin)
{
    if (pinned_set || !pin || !pin->alloc || !pin->free)
        return false;
    pinned = *pin;
    pinned_set = true;
    return true;
}

bool tsr__host_pinned(void) { return pinned_set; }

void *tsr__host_alloc(size_t size)
{
    /* Copies to a GPU from pinned memory are direct DMA: prefer it, and
     * fall back to pageable memory (staged copies) when it runs out. */
    if (pinned_set) {
        void *p = pinned.alloc(pinned.ctx, size);
        if (p)
            return p;
    }
    if (mem.numa && size >= NUMA_MIN)
        return numa_alloc_local(size);
    if (size > SIZE_MAX - 63)
        return NULL; /* rounding up would wrap to a tiny buffer */
#ifdef TSR_HAVE_JEMALLOC
    return mallocx(round64(size), MALLOCX_ALIGN(64));
#else
    return aligned_alloc(64, round64(size));
#endif
}

void tsr__host_free(void *p, size_t size)
{
    if (!p)
        return;
    if (pinned_set && pinned.free(pinned.ctx, p))
        return;
    if (mem.numa && size >= NUMA_MIN) {
        numa_free(p, size);
        return;
    }
#ifdef TSR_HAVE_JEMALLOC
    dallocx(p, 0);
#else
    free(p);
#endif
}

void *tsr__host_node_alloc(tsr_node_t *n, size_t size)
{
    (void)n;
    return tsr__host_alloc(size);
}

void tsr__host_node_free(tsr_node_t *n, void *p, size_t size)
{
    (void)n;
    tsr__host_free(p, size);
}

/* The host has no engine: the other side of every copy performs it. */
static int host_copy(tsr_node_t *n, tsr_copy_t *c)
{
    snprintf(c->err, sizeof c->err, "%s: the host performs no copies", n->name);
    return TSR_EINVAL;
}

static bool host_peer(tsr_node_t *n, const tsr_node_t *other)
{
    (void)n;
    (void)other;
    return true;
}

/* After every replica is freed: the pinned memory goes back. */
static void host_close(tsr_node_t *n)
{
    (void)n;
    if (pinned_set && pinned.close)
        pinned.close(pinned.ctx);
    pinned_set = false;
    memset(&pinned, 0, sizeof pinned);
}

static const tsr_node_ops_t host_ops = {
    .alloc = tsr__host_node_alloc,
    .free = tsr__host_node_free,
    .copy = host_copy,
    .peer = host_peer,
    .close = host_close,
};

int tsr__host_node_open(tsr_node_t *n, size_t capacity, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    n->kind = TSR_NODE_KIND_HOST;
    n->index = 0;
    snprintf(n->name, sizeof n->name, "host");
    n->ops = &host_ops;
    n->capacity = capacity ? capacity : SIZE_MAX;
    mem.numa = numa_available() >= 0 && numa_max_node() > 0;
    return TSR_OK;
}

/* ---- counters and trace ------------------------------------------------ */

void tsr__mem_reset_counters(void)
{
    for (int s = 0; s < TSR_MAX_NODES; s++)
        for (int d = 0; d < TSR_MAX_NODES; d++)
            atomic_store(&mem.link[s][d], 0);
    for (int i = 0; i < mem.n; i++)
        tsr__mem_node(i)->nev = 0;
}

void tsr__node_copy_event(tsr_node_t *n, const tsr_copy_t *c)
{
    if (c->src_node >= 0 && c->dst_node >= 0 && c->src_node < mem.n && c->dst_node < mem.n)
        atomic_fetch_add(&mem.link[c->src_node][c->dst_node], c->size);
    if (!n->tracing)
        return;
    if (n->nev == n->capev) {
        size_t cap = n->capev ? n->capev * 2 : 1024;
        tsr_copy_event_t *v = realloc(n->ev, cap * sizeof *v);
        if (!v)
            return; /* the trace loses an event, the run goes on */
        n->ev = v;
        n->capev = cap;
    }
    n->ev[n->nev++] = (tsr_copy_event_t){c->t_start, c->t_end, c->size, c->src_node,
                                         c->dst_node};
}

/* ---- the node table ---------------------------------------------------- */

static tsr_node_t *node_new(bool tracing)
{
    tsr_node_t *n = &mem.nodes[mem.n];
    memset(n, 0, sizeof *n);
    n->id = mem.n;
    pthread_mutex_init(&n->lock, NULL);
    tsr__evict_init(&n->order, mem.evict);
    n->tracing = tracing;
    return n;
}

static void node_close(tsr_node_t *n)
{
    if (n->ops && n->ops->close)
        n->ops->close(n);
    n->ops = NULL;
    free(n->ev);
    n->ev = NULL;
    n->nev = n->capev = 0;
    tsr__evict_fini(&n->order);
    pthread_mutex_destroy(&n->lock);
}

/* A simulated platform: the phantom host (node 0), then one phantom node
 * per accelerator described, in its order, then the disk tier: the
 * platform's phantom disk where it describes one (the same role as
 * memory/disk.c's node, in virtual time), else a real one at disk_dir. */
static int init_phantom(const tsr_mem_config_t *cfg, char *err, size_t errlen)
{
    const tsr_phantom_config_t *P = cfg->phantom;
    bool pdisk = P->disk.capacity > 0;
    if (pdisk && cfg->disk_dir) {
        snprintf(err, errlen, "a disk tier at '%s' and the platform's disk: one disk tier "
                 "at most", cfg->disk_dir);
        return TSR_EINVAL;
    }
    int ndisk = pdisk || cfg->disk_dir;
    if (P->nacc < 0 || 1 + P->nacc + ndisk > TSR_MAX_NODES) {
        snprintf(err, errlen, "%d simulated accelerators (at most %d)", P->nacc,
                 TSR_MAX_NODES - 1 - ndisk);
        return TSR_EINVAL;
    }
    int rc = TSR_OK;
    for (int i = -1; rc == TSR_OK && i < P->nacc; i++) {
        tsr_node_t *n = node_new(cfg->tracing);
        rc = tsr__phantom_node_open(n, P, i, err, errlen);
        if (rc == TSR_OK && n->kind == TSR_NODE_KIND_CUDA)
            n->exec_lanes = cfg->cuda_lanes; /* a simulated GPU has the real one's lanes */
        if (rc == TSR_OK)
            mem.n++;
    }
    if (rc == TSR_OK && pdisk) {
        rc = tsr__phantom_node_open(node_new(cfg->tracing), P, TSR_PHANTOM_DISK, err, errlen);
        if (rc == TSR_OK)
            mem.disk = mem.n++;
    } else if (rc == TSR_OK && cfg->disk_dir) {
        rc = tsr__disk_node_open(node_new(cfg->tracing), cfg->disk_dir, cfg->disk_capacity,
                                 err, errlen);
        if (rc == TSR_OK)
            mem.disk = mem.n++;
    }
    if (rc != TSR_OK) {
        pthread_mutex_destroy(&mem.nodes[mem.n].lock);
        tsr__mem_shutdown();
    }
    return rc;
}

int tsr__mem_init(const tsr_mem_config_t *cfg, char *err, size_t errlen)
{
    mem.n = 0;
    mem.disk = -1;
    mem.evict = cfg->evict;
    for (int s = 0; s < TSR_MAX_NODES; s++)
        for (int d = 0; d < TSR_MAX_NODES; d++)
            atomic_store(&mem.link[s][d], 0);
    if (cfg->phantom)
        return init_phantom(cfg, err, errlen);
    int ngpu = tsr__cuda_node_count();
    int use = cfg->ncuda < 0 ? ngpu : cfg->ncuda;
    if (use > ngpu) {
        snprintf(err, errlen, "%d GPU(s) requested, %d usable", use, ngpu);
        return TSR_ENODEV;
    }
    if (1 + use + cfg->nsim + (cfg->disk_dir != NULL) > TSR_MAX_NODES) {
        snprintf(err, errlen, "%d memory nodes requested (at most %d)",
                 1 + use + cfg->nsim + (cfg->disk_dir != NULL), TSR_MAX_NODES);
        return TSR_EINVAL;
    }
    int rc = tsr__host_node_open(node_new(cfg->tracing), cfg->host_capacity, err, errlen);
    if (rc == TSR_OK)
        mem.n++;
    for (int g = 0; rc == TSR_OK && g < use; g++) {
        tsr_node_t *n = node_new(cfg->tracing);
        n->exec_lanes = cfg->cuda_lanes;
        rc = tsr__cuda_node_open(n, g, cfg->cuda_capacity, err, errlen);
        if (rc == TSR_OK)
            mem.n++;
    }
    for (int s = 0; rc == TSR_OK && s < cfg->nsim; s++) {
        tsr_node_t *n = node_new(cfg->tracing);
        rc = tsr__sim_node_open(n, cfg->sim_capacity, cfg->sim_bandwidth,
                                cfg->sim_latency, err, errlen);
        if (rc == TSR_OK) {
            n->index = s;
            snprintf(n->name, sizeof n->name, "sim%d", s);
            mem.n++;
        }
    }
    if (rc == TSR_OK && cfg->disk_dir) {
        rc = tsr__disk_node_open(node_new(cfg->tracing), cfg->disk_dir, cfg->disk_capacity,
                                 err, errlen);
        if (rc == TSR_OK)
            mem.disk = mem.n++;
    }
    if (rc != TSR_OK) {
        pthread_mutex_destroy(&mem.nodes[mem.n].lock);
        tsr__mem_shutdown();
    }
    return rc;
}

void tsr__mem_stop(void)
{
    for (int i = mem.n - 1; i >= 0; i--) {
        tsr_node_t *n = &mem.nodes[i];
        if (n->ops && n->ops->close)
            n->ops->close(n);
        n->ops = NULL;
    }
}

void tsr__mem_shutdown(void)
{
    for (int i = mem.n - 1; i >= 0; i--)
        node_close(&mem.nodes[i]);
    mem.n = 0;
    mem.disk = -1;
}
