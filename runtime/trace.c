/* runtime/trace.c — task events per worker and copy events per memory
 * node's engine, written at shutdown as Chrome trace-event JSON
 * (chrome://tracing, Perfetto).
 *
 * Recording must stay cheap and lock-free: each worker appends to its own
 * array; only shutdown reads them all.
 */
#include "runtime/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tsr__trace_record(tsr_worker_t *w, const char *name, uint64_t start,
                       uint64_t end)
{
    if (w->nev == w->capev) {
        size_t cap = w->capev ? w->capev * 2 : 4096;
        struct tsr_trace_event *ev = realloc(w->ev, cap * sizeof *ev);
        if (!ev)
            return; /* a trace with holes beats a failed run */
        w->ev = ev;
        w->capev = cap;
    }
    struct tsr_trace_event *e = &w->ev[w->nev++];
    e->start_ns = start - tsr__rt.t0_ns;
    e->end_ns = end - tsr__rt.t0_ns;
    snprintf(e->name, sizeof e->name, "%s", name ? name : "");
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

int tsr__trace_write(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return tsr__fail(TSR_EIO, "trace: cannot open '%s' for writing", path);
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    bool first = true;
    for (int i = 0; i < tsr__rt.nworkers; i++) {
        tsr_worker_t *w = &tsr__rt.workers[i];
        fprintf(f, "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,"
                   "\"args\":{\"name\":\"%s worker %d\"}}",
                first ? "" : ",\n", i,
                tsr__mem_node(w->node)->name, i);
        first = false;
        for (size_t k = 0; k < w->nev; k++) {
            const struct tsr_trace_event *e = &w->ev[k];
            fprintf(f, ",\n{\"name\":");
            json_string(f, e->name);
            fprintf(f, ",\"ph\":\"X\",\"pid\":0,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}",
                    i, e->start_ns / 1e3, (e->end_ns - e->start_ns) / 1e3);
        }
    }
    /* One track per copy engine, after the workers' tracks. */
    for (int n = 1; n < tsr__rt.nnodes; n++) {
        tsr_node_t *node = tsr__mem_node(n);
        int tid = tsr__rt.nworkers + n;
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,"
                   "\"args\":{\"name\":\"%s copy engine\"}}",
                tid, node->name);
        for (size_t k = 0; k < node->nev; k++) {
            const tsr_copy_event_t *e = &node->ev[k];
            fprintf(f, ",\n{\"name\":\"%s %s->%s\",\"ph\":\"X\",\"pid\":0,\"tid\":%d,"
                       "\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"bytes\":%zu}}",
                    e->src == e->dst ? "zero" : "copy", tsr__mem_node(e->src)->name,
                    tsr__mem_node(e->dst)->name, tid, (e->start_ns - tsr__rt.t0_ns) / 1e3,
                    (e->end_ns - e->start_ns) / 1e3, e->bytes);
        }
    }
    /* The communication thread's transfers (tessera/mpi.h), last. */
    const struct tsr_trace_event *cev;
    size_t ncev = tsr__comm_trace(&cev);
    if (ncev) {
        int tid = tsr__rt.nworkers + tsr__rt.nnodes;
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,"
                   "\"args\":{\"name\":\"mpi comm\"}}", tid);
        for (size_t k = 0; k < ncev; k++) {
            fprintf(f, ",\n{\"name\":");
            json_string(f, cev[k].name);
            fprintf(f, ",\"ph\":\"X\",\"pid\":0,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}", tid,
                    cev[k].start_ns / 1e3, (cev[k].end_ns - cev[k].start_ns) / 1e3);
        }
    }
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0)
        return tsr__fail(TSR_EIO, "trace: error writing '%s'", path);
    return TSR_OK;
}
