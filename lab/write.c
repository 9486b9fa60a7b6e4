/* lab/write.c — the lab's writers: "tessera" (tessera-graph 1, what
 * lab/read_tessera.c reads back to the same graph) and "rec" (StarPU's
 * tasks.rec, what lab/read_rec.c and StarPU's tools read).
 *
 * tessera: a task line per task (its id where the ids are unique, else its
 * index + 1; blanks and control characters of its name as '_'), its
 * accesses (the data item's name where every name is a distinct decimal
 * number, else its index + 1), its explicit dependencies; a ran line where
 * the task has a start and an end below 2^64 ns (device cpu, cuda, or sim
 * for an unknown kind); wont_use and invalidate lines before the task they
 * precede. Durations other than a recorded run's are not in the format.
 *
 * rec: a record per task with Name and Model (the task's name), JobId (as
 * above), SubmitOrder, Priority, DependsOn (every predecessor: the explicit
 * ones and those the accesses imply by the STF rules, as StarPU lists them),
 * WorkerId, MemoryNode 0 for a task that ran on a CPU, StartTime/EndTime in
 * ms to the ns (%.6f, as StarPU writes them), Footprint (FNV-1a, 32 bits,
 * over the sizes as little-endian 64-bit words, in hexadecimal), GFlop,
 * Handles (the item's name where every name is a distinct hexadecimal
 * number, else its index + 1 in hexadecimal), Modes (R, W, RW, RW|COMMUTE,
 * REDUX, SCRATCH) and Sizes; a record "Control: WontUse" per wont_use event
 * (invalidate events have no tasks.rec form and are left out).
 *
 * Must never: write a name that breaks a line or a field; report success
 * when a write failed (TSR_EIO).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab/build.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* 1 when the n values are distinct. */
static int distinct(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_u64);
    for (size_t i = 1; i < n; i++)
        if (v[i] == v[i - 1])
            return 0;
    return 1;
}

/* The ids to write: the tasks' own where distinct, else index + 1. NULL:
 * out of memory. */
static uint64_t *task_ids(const tsr_lab_graph_t *g)
{
    uint64_t *id = malloc((g->ntasks + 1) * sizeof *id), *tmp = malloc((g->ntasks + 1) * sizeof *tmp);
    if (!id || !tmp) {
        free(id);
        free(tmp);
        return NULL;
    }
    for (size_t i = 0; i < g->ntasks; i++)
        id[i] = tmp[i] = g->task[i].id;
    if (!distinct(tmp, g->ntasks))
        for (size_t i = 0; i < g->ntasks; i++)
            id[i] = i + 1;
    free(tmp);
    return id;
}

/* Whether every data name is a distinct number (hex: hexadecimal, else
 * decimal); *ok 0 when not. -1: out of memory. */
static int names_are_numbers(const tsr_lab_graph_t *g, int hex, int *ok)
{
    uint64_t *v = malloc((g->ndata + 1) * sizeof *v);
    if (!v)
        return -1;
    *ok = 1;
    for (size_t i = 0; i < g->ndata && *ok; i++) {
        const char *s = g->data[i].name;
        size_t n = strlen(s);
        *ok = (hex ? lab_u64_hex(s, n, &v[i]) : lab_u64(s, n, &v[i])) == 0;
        /* one spelling per value: the name must be what printing gives */
        if (*ok) {
            char buf[24];
            snprintf(buf, sizeof buf, hex ? "%" PRIx64 : "%" PRIu64, v[i]);
            *ok = strcmp(buf, s) == 0;
        }
    }
    if (*ok)
        *ok = distinct(v, g->ndata);
    free(v);
    return 0;
}

static void put_name(FILE *f, const char *s)
{
    if (!*s)
        fputs("task", f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        fputc(c <= ' ' || c == 0x7f ? '_' : c, f);
    }
}

static const char *device_name(int kind)
{
    return kind == TSR_DEVICE_CPU ? "cpu" : kind == TSR_DEVICE_CUDA ? "cuda" : "sim";
}

static void put_events(FILE *f, const tsr_lab_graph_t *g, size_t *e, size_t before,
                       int numeric)
{
    for (; *e < g->nevents && g->event[*e].before <= before; (*e)++) {
        const tsr_lab_event_t *ev = &g->event[*e];
        fputs(ev->kind == TSR_LAB_WONT_USE ? "wont_use " : "invalidate ", f);
        if (numeric)
            fputs(g->data[ev->data].name, f);
        else
            fprintf(f, "%" PRIu32, ev->data + 1);
        fputc('\n', f);
    }
}

static int write_tessera(const tsr_lab_graph_t *g, FILE *f)
{
    uint64_t *id = task_ids(g);
    int numeric;
    if (!id || names_are_numbers(g, 0, &numeric) != 0) {
        free(id);
        return TSR_ENOMEM;
    }
    fputs("tessera-graph 1\n", f);
    size_t e = 0;
    for (size_t t = 0; t < g->ntasks; t++) {
        const tsr_lab_task_t *x = &g->task[t];
        put_events(f, g, &e, t, numeric);
        fprintf(f, "task %" PRIu64 " ", id[t]);
        put_name(f, x->name);
        uint64_t bytes = 0;
        for (uint32_t a = 0; a < x->naccess; a++)
            bytes += g->data[g->access[x->access_off + a].data].size;
        fprintf(f, " prio=%d flops=%.17g bytes=%" PRIu64 " access=", x->priority,
                x->flops < 0 ? -1.0 : x->flops, bytes);
        for (uint32_t a = 0; a < x->naccess; a++) {
            const tsr_lab_access_t *ac = &g->access[x->access_off + a];
            if (a)
                fputc(',', f);
            if (numeric)
                fputs(g->data[ac->data].name, f);
            else
                fprintf(f, "%" PRIu32, ac->data + 1);
            fprintf(f, ":%s:%" PRIu64, lab_mode_name(ac->mode), g->data[ac->data].size);
        }
        fputs(" deps=", f);
        for (uint32_t k = 0; k < x->ndeps; k++)
            fprintf(f, "%s%" PRIu64, k ? "," : "", id[g->dep[x->dep_off + k]]);
        for (int k = 0, first = 1; k < TSR_DEVICE_KINDS; k++)
            if (x->seconds[k] >= 0) {
                fprintf(f, "%s%s:%.17g", first ? " seconds=" : ",", device_name(k),
                        x->seconds[k]);
                first = 0;
            }
        fputc('\n', f);
    }
    put_events(f, g, &e, g->ntasks, numeric);
    for (size_t t = 0; t < g->ntasks; t++) {
        const tsr_lab_task_t *x = &g->task[t];
        /* in ns as a u64, or not at all */
        if (x->start_s < 0 || x->end_s < 0 || x->end_s * 1e9 >= 1.8e19)
            continue;
        fprintf(f, "ran %" PRIu64 " worker=%d device=%s start_ns=%.0f end_ns=%.0f status=0\n",
                id[t], x->worker, device_name(x->device_kind), x->start_s * 1e9,
                x->end_s * 1e9);
    }
    free(id);
    return TSR_OK;
}

static uint32_t footprint(const tsr_lab_graph_t *g, const tsr_lab_task_t *x)
{
    uint32_t h = 2166136261u;
    for (uint32_t a = 0; a < x->naccess; a++) {
        uint64_t s = g->data[g->access[x->access_off + a].data].size;
        for (int k = 0; k < 8; k++)
            h = (h ^ (uint8_t)(s >> (8 * k))) * 16777619u;
    }
    return h;
}

static const char *rec_mode(int mode)
{
    return mode == TSR_COMMUTE ? "RW|COMMUTE" : lab_mode_name(mode);
}

static void put_handle(FILE *f, const tsr_lab_graph_t *g, uint32_t d, int hex)
{
    if (hex)
        fputs(g->data[d].name, f);
    else
        fprintf(f, "%" PRIx32, d + 1);
}

static int write_rec(const tsr_lab_graph_t *g, FILE *f)
{
    uint64_t *id = task_ids(g);
    uint32_t *off = NULL, *list = NULL;
    int hex;
    if (!id || names_are_numbers(g, 1, &hex) != 0 || lab_all_deps(g, &off, &list) != TSR_OK) {
        free(id);
        return TSR_ENOMEM;
    }
    uint64_t order = 1, next_job = 1;
    for (size_t t = 0; t < g->ntasks; t++)
        if (id[t] >= next_job)
            next_job = id[t] + 1;
    size_t e = 0;
    for (size_t t = 0; t <= g->ntasks; t++) {
        for (; e < g->nevents && g->event[e].before <= t; e++) {
            if (g->event[e].kind != TSR_LAB_WONT_USE)
                continue;
            fprintf(f, "Control: WontUse\nJobId: %" PRIu64 "\nSubmitOrder: %" PRIu64
                       "\nHandles: ", next_job++, order++);
            put_handle(f, g, g->event[e].data, hex);
            fputs("\n\n", f);
        }
        if (t == g->ntasks)
            break;
        const tsr_lab_task_t *x = &g->task[t];
        fputs("Name: ", f);
        put_name(f, x->name);
        fputs("\nModel: ", f);
        put_name(f, x->name);
        fprintf(f, "\nJobId: %" PRIu64 "\nSubmitOrder: %" PRIu64 "\nPriority: %d\n", id[t],
                order++, x->priority);
        if (off[t + 1] > off[t]) {
            fputs("DependsOn:", f);
            for (uint32_t k = off[t]; k < off[t + 1]; k++)
                fprintf(f, " %" PRIu64, id[list[k]]);
            fputc('\n', f);
        }
        if (x->worker >= 0)
            fprintf(f, "WorkerId: %d\n", x->worker);
        if (x->device_kind == TSR_DEVICE_CPU)
            fputs("MemoryNode: 0\n", f);
        if (x->start_s >= 0)
            fprintf(f, "StartTime: %.6f\n", x->start_s * 1e3);
        if (x->end_s >= 0)
            fprintf(f, "EndTime: %.6f\n", x->end_s * 1e3);
        fprintf(f, "Footprint: %08" PRIx32 "\n", footprint(g, x));
        if (x->flops >= 0)
            fprintf(f, "GFlop: %.17g\n", x->flops * 1e-9);
        if (x->seconds[TSR_DEVICE_CPU] >= 0 || x->seconds[TSR_DEVICE_CUDA] >= 0) {
            /* ours (StarPU's readers skip fields they do not know): the
             * durations of a task that has no run, in ms */
            fputs("TesseraDurations:", f);
            for (int k = 0; k < TSR_DEVICE_KINDS; k++)
                if (x->seconds[k] >= 0)
                    fprintf(f, " %s=%.17g", device_name(k), x->seconds[k] * 1e3);
            fputc('\n', f);
        }
        if (x->naccess) {
            /* one token per buffer: StarPU's replay counts them */
            fputs("Parameters:", f);
            for (uint32_t a = 0; a < x->naccess; a++)
                fputs(" vector", f);
            fputs("\nHandles:", f);
            for (uint32_t a = 0; a < x->naccess; a++) {
                fputc(' ', f);
                put_handle(f, g, g->access[x->access_off + a].data, hex);
            }
            fputs("\nModes:", f);
            for (uint32_t a = 0; a < x->naccess; a++)
                fprintf(f, " %s", rec_mode(g->access[x->access_off + a].mode));
            fputs("\nSizes:", f);
            for (uint32_t a = 0; a < x->naccess; a++)
                fprintf(f, " %" PRIu64, g->data[g->access[x->access_off + a].data].size);
            fputc('\n', f);
        }
        fputc('\n', f);
    }
    free(id);
    free(off);
    free(list);
    return TSR_OK;
}

int tsr_lab_write(const tsr_lab_graph_t *g, const char *format, FILE *f)
{
    if (!g || !format || !f)
        return TSR_EINVAL;
    int rc;
    if (strcmp(format, "tessera") == 0)
        rc = write_tessera(g, f);
    else if (strcmp(format, "rec") == 0)
        rc = write_rec(g, f);
    else
        return TSR_EINVAL;
    if (rc != TSR_OK)
        return rc;
    if (fflush(f) != 0 || ferror(f))
        return TSR_EIO;
    return TSR_OK;
}
