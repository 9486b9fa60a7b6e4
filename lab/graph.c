/* lab/graph.c — the lab's graph itself: the builder every reader fills
 * (lab/build.h), ordering and checking it (topological order, cycles,
 * dependencies on tasks that do not exist), the sequential-task-flow
 * dependencies its accesses imply, its critical path and total work,
 * telling a file's format and calling its reader, and freeing it.
 *
 * Must never: abort or read past a buffer on any input; accept a cycle;
 * leave a half-built graph to the caller (a failed read frees all it made);
 * let a count, index or size computation overflow (LAB_MAX_COUNT).
 */
#include "lab/build.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/file.h"

/* ---- the hash table ----------------------------------------------------- */

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

int lab_map_get(const lab_map_t *m, const char *key, size_t klen, uint32_t *val)
{
    if (!m->cap)
        return -1;
    uint64_t h = hash_bytes(key, klen);
    for (size_t i = (size_t)h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        const lab_map_ent_t *e = &m->ent[i];
        if (!e->key)
            return -1;
        if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0) {
            *val = e->val;
            return 0;
        }
    }
}

static void map_insert(lab_map_ent_t *ent, size_t cap, lab_map_ent_t e)
{
    size_t i = (size_t)e.hash & (cap - 1);
    while (ent[i].key)
        i = (i + 1) & (cap - 1);
    ent[i] = e;
}

int lab_map_put(lab_map_t *m, const char *key, size_t klen, uint32_t val)
{
    if (klen > UINT32_MAX)
        return TSR_ENOMEM;
    if (2 * (m->n + 1) > m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64;
        lab_map_ent_t *ent = calloc(cap, sizeof *ent);
        if (!ent)
            return TSR_ENOMEM;
        for (size_t i = 0; i < m->cap; i++)
            if (m->ent[i].key)
                map_insert(ent, cap, m->ent[i]);
        free(m->ent);
        m->ent = ent, m->cap = cap;
    }
    lab_map_ent_t e = {.hash = hash_bytes(key, klen), .klen = (uint32_t)klen, .val = val};
    e.key = malloc(klen ? klen : 1);
    if (!e.key)
        return TSR_ENOMEM;
    if (klen)
        memcpy(e.key, key, klen);
    map_insert(m->ent, m->cap, e);
    m->n++;
    return TSR_OK;
}

void lab_map_free(lab_map_t *m)
{
    for (size_t i = 0; i < m->cap; i++)
        free(m->ent[i].key);
    free(m->ent);
    m->ent = NULL, m->cap = m->n = 0;
}

/* ---- messages ----------------------------------------------------------- */

static void vmessage(lab_builder_t *b, size_t line, const char *fmt, va_list ap)
{
    if (!b->err || !b->errlen)
        return;
    int k = line ? snprintf(b->err, b->errlen, "%s:%zu: ", b->what, line)
                 : snprintf(b->err, b->errlen, "%s: ", b->what);
    if (k >= 0 && (size_t)k < b->errlen)
        vsnprintf(b->err + k, b->errlen - (size_t)k, fmt, ap);
}

int lab_fail(lab_builder_t *b, size_t line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(b, line, fmt, ap);
    va_end(ap);
    return TSR_EINVAL;
}

static int say(lab_builder_t *b, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int say(lab_builder_t *b, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(b, 0, fmt, ap);
    va_end(ap);
    return rc;
}

int lab_nomem(lab_builder_t *b)
{
    return say(b, TSR_ENOMEM, "out of memory");
}

/* ---- growing arrays ------------------------------------------------------ */

/* Room for one more element in *arr (n used of *cap). */
static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return TSR_OK;
    if (n >= LAB_MAX_COUNT)
        return TSR_EINVAL;
    size_t c = *cap ? 2 * *cap : 16;
    if (c > LAB_MAX_COUNT)
        c = LAB_MAX_COUNT;
    void *p = realloc(*arr, c * elem);
    if (!p)
        return TSR_ENOMEM;
    *arr = p, *cap = c;
    return TSR_OK;
}

static int grown(lab_builder_t *b, int rc, const char *what)
{
    if (rc == TSR_ENOMEM)
        return lab_nomem(b);
    return say(b, rc, "more than %zu %s", LAB_MAX_COUNT, what);
}

/* ---- the builder ---------------------------------------------------------- */

int lab_b_init(lab_builder_t *b, const char *format, const char *what, char *err,
               size_t errlen)
{
    memset(b, 0, sizeof *b);
    b->what = what ? what : "input";
    b->err = err, b->errlen = errlen;
    if (err && errlen)
        err[0] = 0;
    b->g = calloc(1, sizeof *b->g);
    if (!b->g)
        return lab_nomem(b);
    snprintf(b->g->format, sizeof b->g->format, "%s", format);
    b->g->time_unit_s = 1;
    return TSR_OK;
}

static char *dup_bytes(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p)
        return NULL;
    if (n)
        memcpy(p, s, n);
    p[n] = 0;
    return p;
}

int lab_b_find_task(const lab_builder_t *b, const char *key, size_t klen, uint32_t *out)
{
    return lab_map_get(&b->tasks, key, klen, out);
}

int lab_b_find_task_id(const lab_builder_t *b, uint64_t id, uint32_t *out)
{
    char key[24];
    int n = snprintf(key, sizeof key, "%llu", (unsigned long long)id);
    return lab_map_get(&b->tasks, key, (size_t)n, out);
}

int lab_b_task(lab_builder_t *b, const char *key, size_t klen, uint64_t id, const char *name,
               size_t nlen, size_t line, uint32_t *out)
{
    tsr_lab_graph_t *g = b->g;
    uint32_t old;
    if (lab_map_get(&b->tasks, key, klen, &old) == 0)
        return lab_fail(b, line, "task '%.*s' defined twice (first at line %zu)",
                        (int)(klen > 64 ? 64 : klen), key, b->line[old]);
    if (g->ntasks == b->cap_task) {
        size_t cap = b->cap_task;
        int rc = grow((void **)&g->task, &cap, g->ntasks, sizeof *g->task);
        if (rc != TSR_OK)
            return rc == TSR_ENOMEM ? lab_nomem(b)
                                    : lab_fail(b, line, "more than %zu tasks", LAB_MAX_COUNT);
        size_t *l = realloc(b->line, cap * sizeof *l);
        if (!l)
            return lab_nomem(b); /* the task array is only larger than needed */
        b->line = l, b->cap_task = cap;
    }
    tsr_lab_task_t *t = &g->task[g->ntasks];
    memset(t, 0, sizeof *t);
    t->name = nlen ? dup_bytes(name, nlen) : dup_bytes("task", 4);
    if (!t->name)
        return lab_nomem(b);
    t->id = id;
    t->flops = -1;
    for (int k = 0; k < TSR_DEVICE_KINDS; k++)
        t->seconds[k] = -1;
    t->worker = -1, t->device_kind = -1;
    t->start_s = t->end_s = -1;
    if (lab_map_put(&b->tasks, key, klen, (uint32_t)g->ntasks) != TSR_OK) {
        free(t->name);
        return lab_nomem(b);
    }
    b->line[g->ntasks] = line;
    *out = (uint32_t)g->ntasks++;
    return TSR_OK;
}

int lab_b_task_id(lab_builder_t *b, uint64_t id, const char *name, size_t nlen, size_t line,
                  uint32_t *out)
{
    char key[24];
    int n = snprintf(key, sizeof key, "%llu", (unsigned long long)id);
    return lab_b_task(b, key, (size_t)n, id, name, nlen, line, out);
}

int lab_b_find_data(const lab_builder_t *b, const char *name, size_t nlen, uint32_t *out)
{
    return lab_map_get(&b->data, name, nlen, out);
}

int lab_b_data(lab_builder_t *b, const char *name, size_t nlen, uint64_t size, uint32_t *out)
{
    tsr_lab_graph_t *g = b->g;
    if (size == 0)
        size = 1;
    uint32_t d;
    if (lab_map_get(&b->data, name, nlen, &d) == 0) {
        if (g->data[d].size < size)
            g->data[d].size = size;
        *out = d;
        return TSR_OK;
    }
    int rc = grow((void **)&g->data, &b->cap_data, g->ndata, sizeof *g->data);
    if (rc != TSR_OK)
        return grown(b, rc, "data items");
    tsr_lab_data_t *x = &g->data[g->ndata];
    x->size = size;
    x->name = dup_bytes(name, nlen);
    if (!x->name)
        return lab_nomem(b);
    if (lab_map_put(&b->data, name, nlen, (uint32_t)g->ndata) != TSR_OK) {
        free(x->name);
        return lab_nomem(b);
    }
    *out = (uint32_t)g->ndata++;
    return TSR_OK;
}

int lab_b_access(lab_builder_t *b, uint32_t task, uint32_t data, int mode)
{
    int rc = grow((void **)&b->acc, &b->cap_acc, b->nacc, sizeof *b->acc);
    if (rc != TSR_OK)
        return grown(b, rc, "accesses");
    b->acc[b->nacc++] = (lab_pending_access_t){task, data, mode};
    return TSR_OK;
}

static int add_edge(lab_builder_t *b, uint32_t task, uint32_t pred, int keep)
{
    int rc = grow((void **)&b->edge, &b->cap_edge, b->nedge, sizeof *b->edge);
    if (rc != TSR_OK)
        return grown(b, rc, "dependencies");
    b->edge[b->nedge++] = (lab_edge_t){task, pred, keep};
    return TSR_OK;
}

int lab_b_dep(lab_builder_t *b, uint32_t task, uint32_t pred)
{
    return add_edge(b, task, pred, 1);
}

int lab_b_order(lab_builder_t *b, uint32_t task, uint32_t pred)
{
    return add_edge(b, task, pred, 0);
}

int lab_b_event(lab_builder_t *b, uint32_t before, uint32_t data, int kind)
{
    int rc = grow((void **)&b->ev, &b->cap_ev, b->nev, sizeof *b->ev);
    if (rc != TSR_OK)
        return grown(b, rc, "events");
    b->ev[b->nev++] = (tsr_lab_event_t){before, data, kind};
    return TSR_OK;
}

void lab_b_discard(lab_builder_t *b)
{
    tsr_lab_free(b->g);
    free(b->line);
    free(b->acc);
    free(b->edge);
    free(b->ev);
    lab_map_free(&b->tasks);
    lab_map_free(&b->data);
    memset(b, 0, sizeof *b);
}

/* ---- ordering ------------------------------------------------------------- */

/* A binary min-heap of task indices (the earliest ready task first). */
static void heap_push(uint32_t *h, size_t *n, uint32_t v)
{
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

static uint32_t heap_pop(uint32_t *h, size_t *n)
{
    uint32_t top = h[0], v = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1] < h[c])
            c++;
        if (h[c] >= v)
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n)
        h[i] = v;
    return top;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* perm[old] = new: Kahn's order taking the earliest ready task first. A
 * cycle: TSR_EINVAL naming a task on it. */
static int order(lab_builder_t *b, uint32_t *perm)
{
    size_t n = b->g->ntasks;
    int rc = TSR_ENOMEM;
    uint32_t *indeg = calloc(n + 1, sizeof *indeg);
    uint32_t *soff = calloc(n + 1, sizeof *soff);
    uint32_t *succ = malloc((b->nedge + 1) * sizeof *succ);
    uint32_t *heap = malloc((n + 1) * sizeof *heap);
    uint32_t *pred = NULL;
    if (!indeg || !soff || !succ || !heap)
        goto out;
    int sorted = 1;
    for (size_t i = 0; i < b->nedge; i++) {
        indeg[b->edge[i].task]++;
        soff[b->edge[i].pred]++;
        sorted = sorted && b->edge[i].pred < b->edge[i].task;
    }
    if (sorted) {
        for (size_t i = 0; i < n; i++)
            perm[i] = (uint32_t)i;
        rc = TSR_OK;
        goto out;
    }
    for (size_t i = 0, s = 0; i <= n; i++) {
        uint32_t c = soff[i];
        soff[i] = (uint32_t)s;
        s += c;
    }
    for (size_t i = 0; i < b->nedge; i++)
        succ[soff[b->edge[i].pred]++] = b->edge[i].task;
    for (size_t i = n; i > 0; i--)
        soff[i] = soff[i - 1];
    soff[0] = 0;
    size_t nh = 0, done = 0;
    for (size_t i = 0; i < n; i++)
        if (!indeg[i])
            heap_push(heap, &nh, (uint32_t)i);
    while (nh) {
        uint32_t t = heap_pop(heap, &nh);
        perm[t] = (uint32_t)done++;
        for (uint32_t k = soff[t]; k < soff[t + 1]; k++)
            if (--indeg[succ[k]] == 0)
                heap_push(heap, &nh, succ[k]);
    }
    if (done == n) {
        rc = TSR_OK;
        goto out;
    }
    /* a cycle: walk back from a task left over along predecessors left over;
     * after n steps the walk is on a cycle */
    pred = malloc(n * sizeof *pred);
    if (!pred)
        goto out;
    for (size_t i = 0; i < n; i++)
        pred[i] = UINT32_MAX;
    for (size_t i = 0; i < b->nedge; i++)
        if (indeg[b->edge[i].task] && indeg[b->edge[i].pred])
            pred[b->edge[i].task] = b->edge[i].pred;
    uint32_t t = 0;
    while (!indeg[t])
        t++;
    for (size_t k = 0; k < n && pred[t] != UINT32_MAX; k++)
        t = pred[t];
    rc = lab_fail(b, b->line[t], "task '%.64s' is on a dependency cycle", b->g->task[t].name);
out:
    if (rc == TSR_ENOMEM)
        lab_nomem(b);
    free(indeg);
    free(soff);
    free(succ);
    free(heap);
    free(pred);
    return rc;
}

int lab_b_finish(lab_builder_t *b, tsr_lab_graph_t **out)
{
    tsr_lab_graph_t *g = b->g;
    size_t n = g->ntasks;
    uint32_t *perm = malloc((n + 1) * sizeof *perm);
    uint32_t *cnt = calloc(n + 1, sizeof *cnt);
    tsr_lab_task_t *tasks = malloc((n + 1) * sizeof *tasks);
    int rc = TSR_ENOMEM;
    if (!perm || !cnt || !tasks)
        goto fail;
    for (size_t i = 0; i < b->nacc; i++)
        if (b->acc[i].task >= n || b->acc[i].data >= g->ndata) {
            rc = say(b, TSR_EINVAL, "an access of a task or item that does not exist");
            goto fail_quiet;
        }
    for (size_t i = 0; i < b->nedge; i++)
        if (b->edge[i].task >= n || b->edge[i].pred >= n) {
            rc = say(b, TSR_EINVAL, "a dependency on a task that does not exist");
            goto fail_quiet;
        }
    for (size_t t = 0; t < n; t++)
        for (int k = 0; k < TSR_DEVICE_KINDS; k++) {
            double s = g->task[t].seconds[k];
            if (s != -1 && !(s >= 0 && s <= LAB_MAX_SECONDS)) {
                rc = lab_fail(b, b->line[t], "task '%.64s' lasts %g s on %s: a duration is 0 "
                              "to %g s", g->task[t].name, s, k ? "cuda" : "cpu",
                              LAB_MAX_SECONDS);
                goto fail_quiet;
            }
        }
    for (size_t i = 0; i < b->nedge; i++)
        if (b->edge[i].task == b->edge[i].pred) {
            rc = lab_fail(b, b->line[b->edge[i].task], "task '%.64s' depends on itself",
                          g->task[b->edge[i].task].name);
            goto fail_quiet;
        }
    rc = order(b, perm);
    if (rc != TSR_OK)
        goto fail_quiet;
    rc = TSR_ENOMEM;
    for (size_t i = 0; i < n; i++)
        tasks[perm[i]] = g->task[i];
    if (n)
        memcpy(g->task, tasks, n * sizeof *tasks);

    /* accesses, in their order of addition within a task */
    g->access = malloc((b->nacc + 1) * sizeof *g->access);
    if (!g->access)
        goto fail;
    for (size_t i = 0; i < b->nacc; i++)
        cnt[perm[b->acc[i].task]]++;
    for (size_t t = 0, s = 0; t < n; t++) {
        g->task[t].access_off = (uint32_t)s;
        g->task[t].naccess = 0;
        s += cnt[t];
    }
    for (size_t i = 0; i < b->nacc; i++) {
        tsr_lab_task_t *t = &g->task[perm[b->acc[i].task]];
        g->access[t->access_off + t->naccess++] =
            (tsr_lab_access_t){.data = b->acc[i].data, .mode = b->acc[i].mode};
    }
    g->naccess = b->nacc;

    /* dependencies: ascending, without duplicates */
    memset(cnt, 0, (n + 1) * sizeof *cnt);
    g->dep = malloc((b->nedge + 1) * sizeof *g->dep);
    if (!g->dep)
        goto fail;
    for (size_t i = 0; i < b->nedge; i++)
        if (b->edge[i].keep)
            cnt[perm[b->edge[i].task]]++;
    for (size_t t = 0, s = 0; t < n; t++) {
        g->task[t].dep_off = (uint32_t)s;
        g->task[t].ndeps = 0;
        s += cnt[t];
    }
    for (size_t i = 0; i < b->nedge; i++) {
        if (!b->edge[i].keep)
            continue;
        tsr_lab_task_t *t = &g->task[perm[b->edge[i].task]];
        g->dep[t->dep_off + t->ndeps++] = perm[b->edge[i].pred];
    }
    size_t w = 0;
    for (size_t t = 0; t < n; t++) {
        tsr_lab_task_t *x = &g->task[t];
        uint32_t *d = g->dep + x->dep_off;
        if (x->ndeps > 1)
            qsort(d, x->ndeps, sizeof *d, cmp_u32);
        uint32_t off = (uint32_t)w;
        for (uint32_t k = 0; k < x->ndeps; k++)
            if (k == 0 || d[k] != d[k - 1])
                g->dep[w++] = d[k];
        x->dep_off = off;
        x->ndeps = (uint32_t)w - off;
    }
    g->ndeps = w;

    /* events, stable by the (renumbered) task they come before */
    g->event = malloc((b->nev + 1) * sizeof *g->event);
    if (!g->event)
        goto fail;
    for (size_t i = 0; i < b->nev; i++) {
        tsr_lab_event_t e = b->ev[i];
        e.before = e.before < n ? perm[e.before] : (uint32_t)n;
        size_t k = i;
        while (k > 0 && g->event[k - 1].before > e.before) {
            g->event[k] = g->event[k - 1];
            k--;
        }
        g->event[k] = e;
    }
    g->nevents = b->nev;

    free(perm);
    free(cnt);
    free(tasks);
    b->g = NULL;
    lab_b_discard(b);
    *out = g;
    return TSR_OK;
fail:
    lab_nomem(b);
fail_quiet:
    free(perm);
    free(cnt);
    free(tasks);
    lab_b_discard(b);
    return rc;
}

/* ---- lines and numbers ---------------------------------------------------- */

void lab_lines_init(lab_lines_t *l, const char *buf, size_t len)
{
    l->p = buf, l->end = buf + len;
    l->line = 0, l->s = NULL, l->n = 0;
}

int lab_next_line(lab_lines_t *l)
{
    if (l->p >= l->end)
        return 0;
    const char *nl = memchr(l->p, '\n', (size_t)(l->end - l->p));
    const char *e = nl ? nl : l->end;
    l->s = l->p;
    l->n = (size_t)(e - l->p);
    if (l->n && l->s[l->n - 1] == '\r')
        l->n--;
    l->p = nl ? nl + 1 : l->end;
    l->line++;
    return 1;
}

int lab_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

int lab_token(const char *s, size_t n, size_t *pos, const char **tok, size_t *tlen)
{
    size_t i = *pos;
    while (i < n && lab_space(s[i]))
        i++;
    if (i >= n) {
        *pos = n;
        return 0;
    }
    size_t j = i;
    while (j < n && !lab_space(s[j]))
        j++;
    *tok = s + i, *tlen = j - i, *pos = j;
    return 1;
}

int lab_eq(const char *s, size_t n, const char *word)
{
    return strlen(word) == n && memcmp(s, word, n) == 0;
}

int lab_key_value(const char *s, size_t n, size_t *pos, const char **key, size_t *klen,
                  const char **val, size_t *vlen)
{
    const char *tok;
    size_t tl;
    if (!lab_token(s, n, pos, &tok, &tl))
        return 0;
    const char *eq = memchr(tok, '=', tl);
    *key = tok;
    *klen = eq ? (size_t)(eq - tok) : tl;
    *val = eq ? eq + 1 : tok + tl;
    *vlen = eq ? tl - *klen - 1 : 0;
    return eq ? 1 : -1;
}

int lab_kind_from_name(const char *s, size_t n)
{
    return lab_eq(s, n, "cpu") ? TSR_DEVICE_CPU : lab_eq(s, n, "cuda") ? TSR_DEVICE_CUDA : -1;
}

int lab_u64(const char *s, size_t n, uint64_t *v)
{
    if (n == 0 || n > 20)
        return -1;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        unsigned d = (unsigned)(s[i] - '0');
        if (x > (UINT64_MAX - d) / 10)
            return -1;
        x = 10 * x + d;
    }
    *v = x;
    return 0;
}

int lab_u64_hex(const char *s, size_t n, uint64_t *v)
{
    if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        s += 2, n -= 2;
    if (n == 0 || n > 16)
        return -1;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            d = (unsigned)(c - 'A' + 10);
        else
            return -1;
        x = 16 * x + d;
    }
    *v = x;
    return 0;
}

int lab_int(const char *s, size_t n, int *v)
{
    int neg = n && s[0] == '-';
    if (n && (s[0] == '-' || s[0] == '+'))
        s++, n--;
    uint64_t u;
    if (lab_u64(s, n, &u) != 0 || u > (uint64_t)INT32_MAX + (uint64_t)neg)
        return -1;
    *v = neg ? (int)(0 - (int64_t)u) : (int)u;
    return 0;
}

/* strtod follows the locale's decimal point; the files' is always '.' */
static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void c_locale_init(void)
{
    c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

int lab_double(const char *s, size_t n, double *v)
{
    char buf[80];
    if (n == 0 || n >= sizeof buf)
        return -1;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        /* digits, sign, point, exponent only: no "inf", "nan" or hex */
        if (!((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' ||
              c == 'E'))
            return -1;
    }
    memcpy(buf, s, n);
    buf[n] = 0;
    pthread_once(&c_locale_once, c_locale_init);
    char *end;
    errno = 0;
    double d = c_locale ? strtod_l(buf, &end, c_locale) : strtod(buf, &end);
    if (end != buf + n || !isfinite(d))
        return -1;
    *v = d;
    return 0;
}

/* ---- the graph's meaning -------------------------------------------------- */

typedef struct {
    uint32_t *v;
    size_t n, cap;
} vec_t;

static int vec_push(vec_t *x, uint32_t v)
{
    if (x->n == x->cap) {
        size_t c = x->cap ? 2 * x->cap : 8;
        uint32_t *p = realloc(x->v, c * sizeof *p);
        if (!p)
            return TSR_ENOMEM;
        x->v = p, x->cap = c;
    }
    x->v[x->n++] = v;
    return TSR_OK;
}

typedef struct {
    int64_t writer;             /* -1: none */
    vec_t readers, comm;
} item_state_t;

int lab_all_deps(const tsr_lab_graph_t *g, uint32_t **off_out, uint32_t **list_out)
{
    size_t n = g->ntasks;
    uint32_t *off = calloc(n + 1, sizeof *off);
    item_state_t *st = calloc(g->ndata + 1, sizeof *st);
    vec_t all = {0}, cur = {0};
    int rc = TSR_ENOMEM;
    if (!off || !st)
        goto out;
    for (size_t d = 0; d < g->ndata; d++)
        st[d].writer = -1;
    for (size_t t = 0; t < n; t++) {
        const tsr_lab_task_t *x = &g->task[t];
        cur.n = 0;
        for (uint32_t k = 0; k < x->ndeps; k++)
            if (vec_push(&cur, g->dep[x->dep_off + k]))
                goto out;
        for (uint32_t a = 0; a < x->naccess; a++) {
            const tsr_lab_access_t *ac = &g->access[x->access_off + a];
            int m = ac->mode;
            if (m == TSR_SCRATCH || ac->data >= g->ndata)
                continue;
            item_state_t *s = &st[ac->data];
            if (s->writer >= 0 && vec_push(&cur, (uint32_t)s->writer))
                goto out;
            const vec_t *also = m == TSR_R ? &s->comm : &s->readers;
            for (size_t k = 0; k < also->n; k++)
                if (vec_push(&cur, also->v[k]))
                    goto out;
            if (m == TSR_W || m == TSR_RW)
                for (size_t k = 0; k < s->comm.n; k++)
                    if (vec_push(&cur, s->comm.v[k]))
                        goto out;
        }
        /* the state after t: all its accesses read before any is changed */
        for (uint32_t a = 0; a < x->naccess; a++) {
            const tsr_lab_access_t *ac = &g->access[x->access_off + a];
            int m = ac->mode;
            if (m == TSR_SCRATCH || ac->data >= g->ndata)
                continue;
            item_state_t *s = &st[ac->data];
            if (m == TSR_R) {
                if (vec_push(&s->readers, (uint32_t)t))
                    goto out;
            } else if (m == TSR_COMMUTE || m == TSR_REDUX) {
                if (vec_push(&s->comm, (uint32_t)t))
                    goto out;
            } else {
                s->writer = (int64_t)t;
                s->readers.n = s->comm.n = 0;
            }
        }
        if (cur.n > 1)
            qsort(cur.v, cur.n, sizeof *cur.v, cmp_u32);
        off[t] = (uint32_t)all.n;
        for (size_t k = 0; k < cur.n; k++)
            if ((k == 0 || cur.v[k] != cur.v[k - 1]) && cur.v[k] != t)
                if (vec_push(&all, cur.v[k]))
                    goto out;
        if (all.n >= UINT32_MAX)
            goto out;
    }
    off[n] = (uint32_t)all.n;
    rc = TSR_OK;
out:
    if (st)
        for (size_t d = 0; d < g->ndata; d++)
            free(st[d].readers.v), free(st[d].comm.v);
    free(st);
    free(cur.v);
    if (rc != TSR_OK) {
        free(off);
        free(all.v);
        return rc;
    }
    *off_out = off;
    *list_out = all.v ? all.v : calloc(1, sizeof(uint32_t));
    if (!*list_out) {
        free(off);
        return TSR_ENOMEM;
    }
    return TSR_OK;
}

/* Its duration on `kind`; kind < 0: the shortest it has on any kind. 0
 * where it has none. */
static double duration(const tsr_lab_task_t *t, int kind)
{
    if (kind < 0) {
        double best = 0;
        for (int k = 0; k < TSR_DEVICE_KINDS; k++)
            if (t->seconds[k] > 0 && (best == 0 || t->seconds[k] < best))
                best = t->seconds[k];
        return best;
    }
    if (kind >= TSR_DEVICE_KINDS || !(t->seconds[kind] > 0))
        return 0;
    return t->seconds[kind];
}

double tsr_lab_critical_path(const tsr_lab_graph_t *g, int kind)
{
    if (!g || !g->ntasks)
        return 0;
    uint32_t *off, *list;
    if (lab_all_deps(g, &off, &list) != TSR_OK)
        return -1;
    double *fin = malloc(g->ntasks * sizeof *fin), best = 0;
    if (!fin) {
        free(off);
        free(list);
        return -1;
    }
    for (size_t t = 0; t < g->ntasks; t++) {
        double s = 0;
        for (uint32_t k = off[t]; k < off[t + 1]; k++)
            if (fin[list[k]] > s)
                s = fin[list[k]];
        fin[t] = s + duration(&g->task[t], kind);
        if (fin[t] > best)
            best = fin[t];
    }
    free(fin);
    free(off);
    free(list);
    return best;
}

double tsr_lab_total_work(const tsr_lab_graph_t *g, int kind)
{
    double s = 0;
    for (size_t t = 0; g && t < g->ntasks; t++)
        s += duration(&g->task[t], kind);
    return s;
}

/* ---- formats ---------------------------------------------------------------- */

typedef int (*reader_fn)(lab_builder_t *, const char *, size_t);
static const struct {
    const char *name;
    reader_fn read;
} readers[] = {
    {"tessera", lab_read_tessera}, {"rec", lab_read_rec},
    {"dot", lab_read_dot},         {"stg", lab_read_stg},
    {"wfcommons", lab_read_wfcommons},
};

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The format of buf, from its first bytes, else from the name's extension;
 * NULL when neither tells. */
static const char *detect(const char *buf, size_t len, const char *what)
{
    size_t i = 0;
    /* skip blanks and comments of the formats that have them */
    for (;;) {
        while (i < len && (lab_space(buf[i]) || buf[i] == '\n'))
            i++;
        if (i + 1 < len && buf[i] == '/' && (buf[i + 1] == '/' || buf[i + 1] == '*'))
            return "dot";
        if (i < len && buf[i] == '#') {
            while (i < len && buf[i] != '\n')
                i++;
            continue;
        }
        break;
    }
    const char *s = buf + i;
    size_t n = len - i;
#define STARTS(w) (n >= sizeof(w) - 1 && memcmp(s, w, sizeof(w) - 1) == 0)
    if (STARTS("tessera-graph"))
        return "tessera";
    if (STARTS("{"))
        return "wfcommons";
    if (STARTS("digraph") || STARTS("strict"))
        return "dot";
    if (n && s[0] >= '0' && s[0] <= '9')
        return "stg";
    if (n && ((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z'))) {
        size_t k = 0;
        while (k < n && ((s[k] >= 'A' && s[k] <= 'Z') || (s[k] >= 'a' && s[k] <= 'z') ||
                         (s[k] >= '0' && s[k] <= '9') || s[k] == '_'))
            k++;
        if (k < n && s[k] == ':')
            return "rec";
    }
#undef STARTS
    if (what) {
        if (ends_with(what, ".rec"))
            return "rec";
        if (ends_with(what, ".dot") || ends_with(what, ".gv"))
            return "dot";
        if (ends_with(what, ".stg"))
            return "stg";
        if (ends_with(what, ".json"))
            return "wfcommons";
    }
    return NULL;
}

int tsr_lab_read_buffer(const char *buf, size_t len, const char *format, const char *what,
                        tsr_lab_graph_t **out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    if (!what)
        what = "input";
    if (!out || (!buf && len)) {
        if (err && errlen)
            snprintf(err, errlen, "%s: no buffer or no place for the graph", what);
        return TSR_EINVAL;
    }
    *out = NULL;
    if (!buf)
        buf = "";
    if (!format) {
        format = detect(buf, len, what);
        if (!format) {
            if (err && errlen)
                snprintf(err, errlen,
                         "%s: cannot tell the format (tessera, rec, dot, stg, wfcommons)", what);
            return TSR_EINVAL;
        }
    }
    for (size_t i = 0; i < sizeof readers / sizeof readers[0]; i++) {
        if (strcmp(format, readers[i].name) != 0)
            continue;
        lab_builder_t b;
        int rc = lab_b_init(&b, format, what, err, errlen);
        if (rc == TSR_OK)
            rc = readers[i].read(&b, buf, len);
        if (rc != TSR_OK) {
            lab_b_discard(&b);
            return rc;
        }
        return lab_b_finish(&b, out);
    }
    if (err && errlen)
        snprintf(err, errlen, "%s: unknown format '%.32s' (tessera, rec, dot, stg, wfcommons)",
                 what, format);
    return TSR_EINVAL;
}

int tsr_lab_read(const char *path, const char *format, tsr_lab_graph_t **out, char *err,
                 size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    if (!path || !out) {
        if (err && errlen)
            snprintf(err, errlen, "no path or no place for the graph");
        return TSR_EINVAL;
    }
    *out = NULL;
    char why[128];
    FILE *f = tsr__fopen_regular(path, why, sizeof why);
    if (!f) {
        if (err && errlen)
            snprintf(err, errlen, "%s: cannot open: %s", path, why);
        return TSR_EIO;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    int rc = buf ? TSR_OK : TSR_ENOMEM;
    while (rc == TSR_OK) {
        if (n == cap) {
            char *p = cap < ((size_t)1 << 40) ? realloc(buf, 2 * cap) : NULL;
            if (!p) {
                rc = TSR_ENOMEM;
                break;
            }
            buf = p, cap *= 2;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0) {
            if (ferror(f))
                rc = TSR_EIO;
            break;
        }
    }
    fclose(f);
    if (rc != TSR_OK) {
        free(buf);
        if (err && errlen)
            snprintf(err, errlen, "%s: %s", path,
                     rc == TSR_EIO ? "read failed" : "out of memory");
        return rc;
    }
    rc = tsr_lab_read_buffer(buf, n, format, path, out, err, errlen);
    free(buf);
    return rc;
}

void tsr_lab_free(tsr_lab_graph_t *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->ntasks; i++)
        free(g->task[i].name);
    for (size_t i = 0; i < g->ndata; i++)
        free(g->data[i].name);
    free(g->task);
    free(g->data);
    free(g->access);
    free(g->dep);
    free(g->event);
    free(g);
}
