/* runtime/record.c — the task-graph recorder (TESSERA_RECORD=FILE,
 * tsr_config_t.record_path): every task the application submits, with its
 * codelet, accesses, estimates and dependencies, and where and when it ran,
 * as the line-oriented format "tessera-graph 1" (docs/lab.md), written as
 * the program goes, so that a run of any program can be replayed, compared
 * or exported later.
 *
 * Dependencies are inferred here from the access modes by the sequential
 * task flow rules (a reader follows the last writer, a writer follows the
 * last writer and the readers since, commuting accesses follow those but
 * not one another), the graph the program means, independent of which
 * predecessors had already finished when a task was submitted.
 *
 * Must never: change what the runtime runs or when (it only watches),
 * abort on a full disk (the first write error is kept and reported at
 * shutdown), or hold its lock while calling into the runtime.
 */
#include "runtime/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A handle's flow state, keyed by its id (generation-tagged: unique). */
typedef struct {
    uint64_t key;             /* 0: free slot */
    uint64_t writer;          /* the last writer's record id, 0 for none */
    uint64_t *readers, *comm; /* readers since it, the open commuting group */
    int nr, cr, nc, cc;
} rec_handle_t;

static struct {
    pthread_mutex_t m;
    FILE *f;
    char path[4096];
    int err; /* first write error (errno), 0 */
    uint64_t next_id;
    uint64_t *deps; /* the task being written's dependencies */
    int nd, cd;
    rec_handle_t *tab;
    size_t cap, n;
} rec = {.m = PTHREAD_MUTEX_INITIALIZER};

static int push(uint64_t **v, int *n, int *cap, uint64_t x)
{
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 4;
        uint64_t *p = realloc(*v, (size_t)c * sizeof *p);
        if (!p)
            return -1;
        *v = p, *cap = c;
    }
    (*v)[(*n)++] = x;
    return 0;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

/* The state of handle `key`, created empty; NULL without memory. */
static rec_handle_t *handle_state(uint64_t key)
{
    if (2 * (rec.n + 1) > rec.cap) {
        size_t cap = rec.cap ? 2 * rec.cap : 256;
        rec_handle_t *t = calloc(cap, sizeof *t);
        if (!t)
            return NULL;
        for (size_t i = 0; i < rec.cap; i++) {
            if (!rec.tab[i].key)
                continue;
            size_t j = mix(rec.tab[i].key) & (cap - 1);
            while (t[j].key)
                j = (j + 1) & (cap - 1);
            t[j] = rec.tab[i];
        }
        free(rec.tab);
        rec.tab = t, rec.cap = cap;
    }
    size_t j = mix(key) & (rec.cap - 1);
    while (rec.tab[j].key && rec.tab[j].key != key)
        j = (j + 1) & (rec.cap - 1);
    if (!rec.tab[j].key) {
        rec.tab[j].key = key;
        rec.n++;
    }
    return &rec.tab[j];
}

static void note_error(void)
{
    if (!rec.err)
        rec.err = errno ? errno : EIO;
}

int tsr__record_open(const char *path)
{
    pthread_mutex_lock(&rec.m);
    snprintf(rec.path, sizeof rec.path, "%s", path);
    rec.f = fopen(path, "w");
    rec.err = 0;
    rec.next_id = 1;
    int e = errno;
    pthread_mutex_unlock(&rec.m);
    if (!rec.f)
        return tsr__fail(TSR_EIO, "init: cannot write the task graph record '%s': %s", path,
                         strerror(e));
    if (fprintf(rec.f, "tessera-graph 1\n") < 0)
        note_error();
    return TSR_OK;
}

static const char *mode_name(int m)
{
    switch (m) {
    case TSR_R: return "R";
    case TSR_W: return "W";
    case TSR_RW: return "RW";
    case TSR_COMMUTE: return "COMMUTE";
    case TSR_REDUX: return "REDUX";
    default: return "SCRATCH";
    }
}

/* deps += x (x > 0); duplicates are removed before writing */
static void add_dep(uint64_t x)
{
    if (x && push(&rec.deps, &rec.nd, &rec.cd, x))
        note_error();
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

void tsr__record_submit(tsr_task_t t, tsr_task_t const *preds, int npreds)
{
    double flops = t->cl && t->cl->flops ? t->cl->flops(t->args, t->sizes) : -1;
    pthread_mutex_lock(&rec.m);
    if (!rec.f) {
        pthread_mutex_unlock(&rec.m);
        return;
    }
    t->rec_id = rec.next_id++;
    rec.nd = 0;
    for (int i = 0; i < npreds; i++)
        add_dep(preds[i]->rec_id);
    for (int i = 0; i < t->nbuffers; i++) {
        int m = (int)t->acc[i].mode;
        if (m == TSR_SCRATCH || !t->data[i])
            continue;
        rec_handle_t *h = handle_state((uint64_t)(uintptr_t)t->data[i]->id);
        if (!h) {
            note_error();
            continue;
        }
        add_dep(h->writer);
        if (m == TSR_R) {
            for (int k = 0; k < h->nc; k++)
                add_dep(h->comm[k]);
        } else {
            for (int k = 0; k < h->nr; k++)
                add_dep(h->readers[k]);
        }
        if (m == TSR_W || m == TSR_RW) {
            for (int k = 0; k < h->nc; k++)
                add_dep(h->comm[k]);
        }
    }
    uint64_t *deps = rec.deps;
    int nd = 0;
    if (rec.nd) {
        qsort(deps, (size_t)rec.nd, sizeof *deps, cmp_u64);
        for (int i = 0; i < rec.nd; i++)
            if (!nd || deps[nd - 1] != deps[i])
                deps[nd++] = deps[i];
    }
    /* the state after t (all of t's accesses read before any is changed:
     * a task reading and writing one handle does not follow itself) */
    for (int i = 0; i < t->nbuffers; i++) {
        int m = (int)t->acc[i].mode;
        if (m == TSR_SCRATCH || !t->data[i])
            continue;
        rec_handle_t *h = handle_state((uint64_t)(uintptr_t)t->data[i]->id);
        if (!h)
            continue;
        if (m == TSR_R) {
            if (push(&h->readers, &h->nr, &h->cr, t->rec_id))
                note_error();
        } else if (m == TSR_COMMUTE || m == TSR_REDUX) {
            if (push(&h->comm, &h->nc, &h->cc, t->rec_id))
                note_error();
        } else {
            h->writer = t->rec_id;
            h->nr = h->nc = 0;
        }
    }
    FILE *f = rec.f;
    int ok = fprintf(f, "task %" PRIu64 " ", t->rec_id) >= 0;
    const char *name = t->name ? t->name : t->cl && t->cl->name ? t->cl->name : "task";
    for (const char *c = name; *c && ok; c++)
        ok = fputc(*c == ' ' || *c == '\t' || *c == '\n' ? '_' : *c, f) != EOF;
    ok = ok && fprintf(f, " prio=%d flops=%.17g bytes=%zu access=", t->priority, flops,
                       (size_t)t->bytes) >= 0;
    for (int i = 0, first = 1; i < t->nbuffers && ok; i++) {
        if (!t->data[i])
            continue;
        ok = fprintf(f, "%s%" PRIu64 ":%s:%zu", first ? "" : ",",
                     (uint64_t)(uintptr_t)t->data[i]->id, mode_name((int)t->acc[i].mode),
                     t->sizes[i]) >= 0;
        first = 0;
    }
    ok = ok && fputs(" deps=", f) != EOF;
    for (int i = 0; i < nd && ok; i++)
        ok = fprintf(f, "%s%" PRIu64, i ? "," : "", deps[i]) >= 0;
    ok = ok && fputc('\n', f) != EOF;
    if (!ok)
        note_error();
    pthread_mutex_unlock(&rec.m);
}

void tsr__record_ran(const tsr_worker_t *w, tsr_task_t t, uint64_t start, uint64_t end,
                     int rc)
{
    if (!t->rec_id)
        return;
    static const char *const kinds[] = {"cpu", "cuda", "sim"};
    const char *kind = w->device_kind >= 0 && w->device_kind < 3 ? kinds[w->device_kind] : "?";
    pthread_mutex_lock(&rec.m);
    if (rec.f && fprintf(rec.f,
                         "ran %" PRIu64 " worker=%d device=%s start_ns=%" PRIu64
                         " end_ns=%" PRIu64 " status=%d\n",
                         t->rec_id, w->id, kind, start - tsr__rt.t0_ns, end - tsr__rt.t0_ns,
                         rc) < 0)
        note_error();
    pthread_mutex_unlock(&rec.m);
}

void tsr__record_event(const char *what, tsr_data_t *h)
{
    pthread_mutex_lock(&rec.m);
    if (rec.f && fprintf(rec.f, "%s %" PRIu64 "\n", what, (uint64_t)(uintptr_t)h->id) < 0)
        note_error();
    pthread_mutex_unlock(&rec.m);
}

int tsr__record_close(void)
{
    pthread_mutex_lock(&rec.m);
    int err = rec.err;
    if (rec.f && fclose(rec.f) != 0 && !err)
        err = errno ? errno : EIO;
    rec.f = NULL;
    for (size_t i = 0; i < rec.cap; i++)
        free(rec.tab[i].readers), free(rec.tab[i].comm);
    free(rec.tab);
    rec.tab = NULL, rec.cap = rec.n = 0;
    free(rec.deps);
    rec.deps = NULL, rec.nd = rec.cd = 0;
    pthread_mutex_unlock(&rec.m);
    if (err)
        return tsr__fail(TSR_EIO, "shutdown: the task graph record '%s' is incomplete: %s",
                         rec.path, strerror(err));
    return TSR_OK;
}
