/* buffers.c — the output buffers, the per-worker scratch and the final
 * records every backend shares (backend.h). */
#include "backend.h"

#include <stdlib.h>
#include <string.h>

long tb_fields(const task_graph_t *g, const tb_opts_t *o)
{
    long f = o && o->fields > 0 ? o->fields : g->timesteps;
    return f < g->timesteps ? f : g->timesteps;
}

int tb_buffers_alloc(tb_buffers_t *b, const task_graph_t *g, long fields)
{
    b->fields = fields;
    b->width = g->max_width;
    b->bytes = g->output_bytes_per_task;
    /* 64-byte aligned (a cache line per small output: no false sharing
     * between the tasks writing neighbouring points) */
    size_t stride = (b->bytes + 63) / 64 * 64;
    b->stride = stride;
    size_t total = (size_t)fields * (size_t)g->max_width * stride;
    b->data = aligned_alloc(64, (total + 63) / 64 * 64);
    if (!b->data)
        return -1;
    memset(b->data, 0, total);
    return 0;
}

void tb_buffers_free(tb_buffers_t *b)
{
    free(b->data);
    b->data = NULL;
}

long tb_last_timestep(const task_graph_t *g, long p)
{
    for (long t = g->timesteps - 1; t >= 0; t--) {
        long off = task_graph_offset_at_timestep(g, t);
        if (p >= off && p < off + task_graph_width_at_timestep(g, t))
            return t;
    }
    return -1;
}

void tb_collect_final(const task_graph_t *g, const tb_buffers_t *b, tb_record_t *final)
{
    if (!final)
        return;
    for (long p = 0; p < g->max_width; p++) {
        long t = tb_last_timestep(g, p);
        if (t < 0)
            memset(&final[p], 0, sizeof final[p]);
        else
            memcpy(&final[p], tb_buffer(b, t, p), sizeof final[p]);
    }
}

static char **scratch;
static int nscratch;

int tb_scratch_alloc(const task_graph_t *g, int nworkers)
{
    tb_scratch_free();
    if (g->kernel.type != TB_MEMORY_BOUND || g->scratch_bytes_per_task == 0)
        return 0;
    scratch = calloc((size_t)nworkers, sizeof *scratch);
    if (!scratch)
        return -1;
    nscratch = nworkers;
    size_t n = (g->scratch_bytes_per_task + 63) / 64 * 64;
    for (int i = 0; i < nworkers; i++) {
        scratch[i] = aligned_alloc(64, n);
        if (!scratch[i])
            return -1;
        tb_scratch_prepare(scratch[i], g->scratch_bytes_per_task);
    }
    return 0;
}

char *tb_scratch_of(int worker)
{
    return scratch && worker >= 0 && worker < nscratch ? scratch[worker] : NULL;
}

void tb_scratch_free(void)
{
    for (int i = 0; i < nscratch; i++)
        free(scratch[i]);
    free(scratch);
    scratch = NULL;
    nscratch = 0;
}
