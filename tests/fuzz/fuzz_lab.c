/* tests/fuzz/fuzz_lab.c — the scheduling lab's readers (lab/) on arbitrary
 * bytes.
 *
 * Input: a first byte choosing the format (its value mod 6: tessera, rec,
 * dot, stg, wfcommons, or told from the bytes), then the file (no NUL: the
 * buffer ends where the input does, and it is freed before the graph is
 * looked at, so ASan sees a read past it or a pointer kept into it). A graph
 * read is checked (indices in range, dependencies on earlier tasks, sizes
 * >= 1, events in order), then written as tessera and as rec and read back:
 * the writers' output must be read to a graph of the same tasks, accesses
 * and dependencies.
 */
#include <math.h>

#include "fuzz_util.h"
#include "lab/build.h"
#include "lab/graph.h"

static const char *const formats[] = {"tessera", "rec", "dot", "stg", "wfcommons", NULL};

static void check(const tsr_lab_graph_t *g)
{
    FUZZ_CHECK(g->naccess <= LAB_MAX_COUNT && g->ndeps <= LAB_MAX_COUNT, "counts");
    for (size_t d = 0; d < g->ndata; d++)
        FUZZ_CHECK(g->data[d].size >= 1 && g->data[d].name, "item %zu", d);
    size_t acc = 0, dep = 0;
    for (size_t t = 0; t < g->ntasks; t++) {
        const tsr_lab_task_t *x = &g->task[t];
        FUZZ_CHECK(x->name, "task %zu without a name", t);
        FUZZ_CHECK(x->access_off == acc && x->dep_off == dep, "task %zu not contiguous", t);
        acc += x->naccess, dep += x->ndeps;
        for (uint32_t a = 0; a < x->naccess; a++) {
            const tsr_lab_access_t *ac = &g->access[x->access_off + a];
            FUZZ_CHECK(ac->data < g->ndata, "task %zu: item %u", t, ac->data);
            FUZZ_CHECK(strcmp(lab_mode_name(ac->mode), "?") != 0, "mode %d", ac->mode);
        }
        for (uint32_t k = 0; k < x->ndeps; k++) {
            FUZZ_CHECK(g->dep[x->dep_off + k] < t, "task %zu follows a later task", t);
            FUZZ_CHECK(k == 0 || g->dep[x->dep_off + k] > g->dep[x->dep_off + k - 1],
                       "deps of %zu not ascending", t);
        }
        for (int k = 0; k < TSR_DEVICE_KINDS; k++)
            FUZZ_CHECK(!isnan(x->seconds[k]), "NaN duration");
    }
    FUZZ_CHECK(acc == g->naccess && dep == g->ndeps, "totals");
    for (size_t e = 0; e < g->nevents; e++) {
        FUZZ_CHECK(g->event[e].before <= g->ntasks && g->event[e].data < g->ndata, "event");
        FUZZ_CHECK(e == 0 || g->event[e].before >= g->event[e - 1].before, "events order");
    }
    double cp = tsr_lab_critical_path(g, TSR_DEVICE_CPU);
    FUZZ_CHECK(cp >= 0 && cp <= tsr_lab_total_work(g, TSR_DEVICE_CPU) * (1 + 1e-9) + 1e-300,
               "critical path %g", cp);
}

static void round_trip(const tsr_lab_graph_t *g, const char *format)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    FUZZ_CHECK(f, "open_memstream");
    FUZZ_CHECK(tsr_lab_write(g, format, f) == TSR_OK, "write %s", format);
    fclose(f);
    tsr_lab_graph_t *h = NULL;
    char err[512];
    int rc = tsr_lab_read_buffer(buf, n, format, "written", &h, err, sizeof err);
    FUZZ_CHECK(rc == TSR_OK, "%s written, not read back: %s\n%.*s", format, err,
               (int)(n > 4000 ? 4000 : n), buf);
    FUZZ_CHECK(h->ntasks == g->ntasks && h->naccess == g->naccess, "%s: shape changed", format);
    uint32_t *o1, *l1, *o2, *l2;
    FUZZ_CHECK(lab_all_deps(g, &o1, &l1) == TSR_OK && lab_all_deps(h, &o2, &l2) == TSR_OK, "deps");
    for (size_t t = 0; t <= g->ntasks; t++)
        FUZZ_CHECK(o1[t] == o2[t], "%s: task %zu's predecessors changed", format, t);
    FUZZ_CHECK(memcmp(l1, l2, o1[g->ntasks] * sizeof *l1) == 0, "%s: predecessors changed",
               format);
    for (size_t a = 0; a < g->naccess; a++)
        FUZZ_CHECK(g->access[a].mode == h->access[a].mode &&
                       g->data[g->access[a].data].size == h->data[h->access[a].data].size,
                   "%s: access %zu changed", format, a);
    free(o1), free(l1), free(o2), free(l2);
    tsr_lab_free(h);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *format = formats[data[0] % 6];
    size--, data++;
    char *copy = malloc(size ? size : 1);
    FUZZ_CHECK(copy, "out of memory");
    memcpy(copy, data, size);
    char err[512];
    tsr_lab_graph_t *g = (tsr_lab_graph_t *)1;
    int rc = tsr_lab_read_buffer(copy, size, format, "fuzz", &g, err, sizeof err);
    free(copy);
    if (rc != TSR_OK) {
        FUZZ_CHECK(rc == TSR_EINVAL || rc == TSR_ENOMEM, "status %d", rc);
        FUZZ_CHECK(err[0] != 0, "a refusal without a message");
        FUZZ_CHECK(strncmp(err, "fuzz", 4) == 0, "the message does not name the input: %s", err);
        FUZZ_CHECK(g == NULL, "a failed read left a graph");
        return 0;
    }
    check(g);
    round_trip(g, "tessera");
    round_trip(g, "rec");
    tsr_lab_free(g);
    return 0;
}
