/* runtime/stats.c — the counters an application or a benchmark reads after
 * a run: per memory node (capacity, use, fetches, evictions, write-backs,
 * waits for memory), per link (bytes), per worker (tasks, busy time, time
 * waiting for data).
 *
 * Must never: change a counter, or take a lock a worker holds while it runs.
 */
#include "runtime/internal.h"

#include <stdio.h>
#include <string.h>

int tsr_memory_node_count(void)
{
    return tsr__running() ? tsr__rt.nnodes : 0;
}

int tsr_memory_node_stats(int id, tsr_node_stats_t *out)
{
    if (!tsr__running())
        return tsr__fail(TSR_ESTATE, "memory_node_stats: runtime not initialized");
    if (!out || id < 0 || id >= tsr__rt.nnodes)
        return tsr__fail(TSR_EINVAL, "memory_node_stats: node %d of %d (or out is NULL)",
                         id, tsr__rt.nnodes);
    tsr_node_t *n = tsr__mem_node(id);
    memset(out, 0, sizeof *out);
    out->kind = n->kind == TSR_NODE_KIND_HOST   ? TSR_NODE_HOST
                : n->kind == TSR_NODE_KIND_SIM  ? TSR_NODE_SIM
                : n->kind == TSR_NODE_KIND_DISK ? TSR_NODE_DISK
                                                : TSR_NODE_CUDA;
    snprintf(out->name, sizeof out->name, "%s", n->name);
    out->capacity = n->capacity;
    pthread_mutex_lock(&n->lock);
    out->used = n->used;
    out->peak = n->peak;
    pthread_mutex_unlock(&n->lock);
    out->fetches = atomic_load(&n->fetches) + atomic_load(&n->zero_fills);
    out->evictions = atomic_load(&n->evictions);
    out->writebacks = atomic_load(&n->writebacks);
    out->waits = atomic_load(&n->waits);
    out->homed = tsr__home_bytes(id);
    for (int j = 0; j < tsr__rt.nnodes; j++) {
        if (j == id)
            continue;
        out->bytes_in += tsr__mem_link_bytes(j, id);
        out->bytes_out += tsr__mem_link_bytes(id, j);
    }
    return TSR_OK;
}

uint64_t tsr_memory_link_bytes(int src, int dst)
{
    return tsr__running() ? tsr__mem_link_bytes(src, dst) : 0;
}

int tsr_worker_stats(int w, tsr_worker_stats_t *out)
{
    if (!tsr__running())
        return tsr__fail(TSR_ESTATE, "worker_stats: runtime not initialized");
    if (!out || w < 0 || w >= tsr__rt.nworkers)
        return tsr__fail(TSR_EINVAL, "worker_stats: worker %d of %d (or out is NULL)", w,
                         tsr__rt.nworkers);
    const tsr_worker_t *k = &tsr__rt.workers[w];
    out->device_kind = k->device_kind;
    out->memory_node = k->node;
    out->tasks = k->ntasks;
    out->busy_s = (double)k->busy_ns * 1e-9;
    out->wait_data_s = (double)k->wait_ns * 1e-9;
    out->drains = k->drains;
    out->host_waits = k->host_waits;
    out->device_ordered = k->device_ordered;
    return TSR_OK;
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

int tsr_stats_print(void *fp)
{
    FILE *f = fp;
    if (!f)
        return tsr__fail(TSR_EINVAL, "stats_print: file is NULL");
    if (!tsr__running())
        return tsr__fail(TSR_ESTATE, "stats_print: runtime not initialized");
    fprintf(f, "%-8s %12s %10s %10s %8s %9s %10s %7s %10s %10s\n", "node", "capacity_MiB",
            "used_MiB", "peak_MiB", "fetches", "evictions", "writebacks", "waits",
            "in_MiB", "out_MiB");
    for (int i = 0; i < tsr__rt.nnodes; i++) {
        tsr_node_stats_t s;
        tsr_memory_node_stats(i, &s);
        double cap = s.capacity == SIZE_MAX ? -1 : mib(s.capacity);
        fprintf(f, "%-8s %12.1f %10.1f %10.1f %8llu %9llu %10llu %7llu %10.1f %10.1f\n",
                s.name, cap, mib(s.used), mib(s.peak), (unsigned long long)s.fetches,
                (unsigned long long)s.evictions, (unsigned long long)s.writebacks,
                (unsigned long long)s.waits, mib(s.bytes_in), mib(s.bytes_out));
    }
    fprintf(f, "link MiB (row: from, column: to)\n%-8s", "");
    for (int d = 0; d < tsr__rt.nnodes; d++)
        fprintf(f, " %10s", tsr__mem_node(d)->name);
    fprintf(f, "\n");
    for (int s = 0; s < tsr__rt.nnodes; s++) {
        fprintf(f, "%-8s", tsr__mem_node(s)->name);
        for (int d = 0; d < tsr__rt.nnodes; d++)
            fprintf(f, " %10.1f", mib(tsr__mem_link_bytes(s, d)));
        fprintf(f, "\n");
    }
    fprintf(f, "%-7s %-6s %8s %10s %12s %8s %10s %11s\n", "worker", "node", "tasks", "busy_s",
            "wait_data_s", "drains", "host_waits", "dev_ordered");
    for (int w = 0; w < tsr__rt.nworkers; w++) {
        const tsr_worker_t *k = &tsr__rt.workers[w];
        fprintf(f, "%-7d %-6s %8llu %10.3f %12.3f %8llu %10llu %11llu\n", w,
                tsr__mem_node(k->node)->name, (unsigned long long)k->ntasks,
                (double)k->busy_ns * 1e-9, (double)k->wait_ns * 1e-9,
                (unsigned long long)k->drains, (unsigned long long)k->host_waits,
                (unsigned long long)k->device_ordered);
    }
    return TSR_OK;
}
