/* lab/replay.c — a graph from a file through the running runtime (see
 * lab/replay.h for what a replay does; docs/lab.md for how to use it).
 *
 * Two passes. The first groups tasks into one codelet per name, and turns
 * each task's accesses into at most TSR_MAX_BUFFERS buffers plus the
 * explicit dependencies the rest become; it counts, for every task, the
 * last later task that names it, so that the second pass (submission in
 * the graph's order) holds a task reference exactly as long as needed.
 *
 * Must never: abort, keep a reference or a handle past its return, or let
 * a folded access lose an ordering of a write before a read.
 */
#include "lab/replay.h"

#include "lab/build.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A replayed task's argument block. */
typedef struct rargs {
    double sec[TSR_DEVICE_KINDS]; /* its duration on each kind; < 0: unknown */
    double flops;                 /* < 0: unknown */
    double run_s;                 /* real runs: how long the synthetic kernel lasts */
    int kernel;                   /* TSR_LAB_KERNEL_… */
} rargs_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the codelets ------------------------------------------------------------- */

static double own_seconds(const void *args, const size_t *sizes, int kind)
{
    (void)sizes;
    const rargs_t *a = args;
    return kind >= 0 && kind < TSR_DEVICE_KINDS ? a->sec[kind] : -1;
}

static double own_flops(const void *args, const size_t *sizes)
{
    (void)sizes;
    return ((const rargs_t *)args)->flops;
}

/* Simulated runs: nothing to compute (under simulate_exec too: the data
 * are phantom copies of nothing). */
static int nothing(void **b, const void *args, const tsr_exec_t *e)
{
    (void)b, (void)args, (void)e;
    return 0;
}

/* Real runs: spin, or stream over the buffers (read and write every cache
 * line), until run_s has passed. */
static int synthetic(void **b, const void *args, const tsr_exec_t *e)
{
    const rargs_t *a = args;
    double end = now_s() + a->run_s;
    if (a->kernel != TSR_LAB_KERNEL_MEMORY || e->nbuffers == 0) {
        while (now_s() < end)
            ;
        return 0;
    }
    do {
        for (int i = 0; i < e->nbuffers; i++) {
            volatile unsigned char *p = b[i];
            for (size_t k = 0; k < e->sizes[i]; k += 64)
                p[k] = (unsigned char)(p[k] + 1);
        }
    } while (now_s() < end);
    return 0;
}

/* (name, buffer count) → codelet index, open addressing */
typedef struct names {
    const char **key;
    int *nb, *val;
    size_t cap;
} names_t;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The codelet index of (name, nb), adding it as `next` if new; -1 without
 * memory. */
static int name_index(names_t *n, const char *name, int nb, int next)
{
    if (2 * (size_t)(next + 1) > n->cap) {
        size_t cap = n->cap ? 2 * n->cap : 64;
        const char **k = calloc(cap, sizeof *k);
        int *b = malloc(cap * sizeof *b), *v = malloc(cap * sizeof *v);
        if (!k || !b || !v) {
            free(k), free(b), free(v);
            return -1;
        }
        for (size_t i = 0; i < n->cap; i++)
            if (n->key[i]) {
                size_t j = (hash_str(n->key[i]) + (size_t)n->nb[i]) & (cap - 1);
                while (k[j])
                    j = (j + 1) & (cap - 1);
                k[j] = n->key[i], b[j] = n->nb[i], v[j] = n->val[i];
            }
        free(n->key), free(n->nb), free(n->val);
        n->key = k, n->nb = b, n->val = v, n->cap = cap;
    }
    size_t j = (hash_str(name) + (size_t)nb) & (n->cap - 1);
    while (n->key[j] && (n->nb[j] != nb || strcmp(n->key[j], name)))
        j = (j + 1) & (n->cap - 1);
    if (!n->key[j])
        n->key[j] = name, n->nb[j] = nb, n->val[j] = next;
    return n->val[j];
}

/* ---- the plan ------------------------------------------------------------------ */

typedef struct plan {
    tsr_codelet_t *cl;      /* by codelet index */
    int ncl;
    int *cl_of;             /* by task */
    tsr_lab_access_t *acc;  /* the kept accesses, TSR_MAX_BUFFERS per task */
    int *nacc;
    uint32_t *dep;          /* every task's explicit dependencies */
    size_t *dep_off;        /* by task, ntasks + 1 */
    size_t ndep, capdep;
    uint32_t *last_named;   /* the last task naming it as a dependency; its own
                               index: none */
    size_t folded;
} plan_t;

static void plan_free(plan_t *p)
{
    free(p->cl), free(p->cl_of), free(p->acc), free(p->nacc), free(p->dep);
    free(p->dep_off), free(p->last_named);
}

static int push_dep(plan_t *p, uint32_t d)
{
    if (p->ndep == p->capdep) {
        size_t cap = p->capdep ? 2 * p->capdep : 1024;
        uint32_t *v = realloc(p->dep, cap * sizeof *v);
        if (!v)
            return -1;
        p->dep = v, p->capdep = cap;
    }
    p->dep[p->ndep++] = d;
    return 0;
}

static bool writes(int mode) { return mode != TSR_R && mode != TSR_SCRATCH; }

static int make_plan(const tsr_lab_graph_t *g, const tsr_lab_replay_opts_t *o, plan_t *p,
                     char *err, size_t errlen)
{
    size_t n = g->ntasks;
    memset(p, 0, sizeof *p);
    p->cl_of = malloc((n ? n : 1) * sizeof *p->cl_of);
    p->acc = malloc((n ? n : 1) * TSR_MAX_BUFFERS * sizeof *p->acc);
    p->nacc = malloc((n ? n : 1) * sizeof *p->nacc);
    p->dep_off = malloc((n + 1) * sizeof *p->dep_off);
    p->last_named = malloc((n ? n : 1) * sizeof *p->last_named);
    /* the last task that wrote an item, and the last one whose write the
     * runtime never saw (folded) since the last it saw: -1 for none */
    int64_t *last_w = malloc((g->ndata ? g->ndata : 1) * sizeof *last_w);
    int64_t *hidden_w = malloc((g->ndata ? g->ndata : 1) * sizeof *hidden_w);
    names_t names = {0};
    bool (*has)[TSR_DEVICE_KINDS + 1] = NULL;
    int rc = TSR_ENOMEM;
    if (!p->cl_of || !p->acc || !p->nacc || !p->dep_off || !p->last_named || !last_w ||
        !hidden_w)
        goto out;
    for (size_t d = 0; d < g->ndata; d++)
        last_w[d] = hidden_w[d] = -1;

    /* accesses and dependencies */
    for (size_t i = 0; i < n; i++) {
        const tsr_lab_task_t *t = &g->task[i];
        p->dep_off[i] = p->ndep;
        p->last_named[i] = (uint32_t)i;
        for (uint32_t k = 0; k < t->ndeps; k++)
            if (push_dep(p, g->dep[t->dep_off + k]))
                goto out;
        tsr_lab_access_t *kept = &p->acc[i * TSR_MAX_BUFFERS];
        int nk = 0;
        /* writes first, then reads; what does not fit is folded */
        for (int pass = 0; pass < 2; pass++)
            for (uint32_t k = 0; k < t->naccess; k++) {
                tsr_lab_access_t a = g->access[t->access_off + k];
                if (writes(a.mode) != (pass == 0))
                    continue;
                if (nk < TSR_MAX_BUFFERS) {
                    kept[nk++] = a;
                    if (hidden_w[a.data] >= 0 && push_dep(p, (uint32_t)hidden_w[a.data]))
                        goto out;
                    continue;
                }
                p->folded++;
                if (last_w[a.data] >= 0 && push_dep(p, (uint32_t)last_w[a.data]))
                    goto out;
            }
        for (int k = 0; k < nk; k++)
            if (writes(kept[k].mode))
                last_w[kept[k].data] = (int64_t)i, hidden_w[kept[k].data] = -1;
        for (uint32_t k = 0, w = 0; k < t->naccess; k++) {
            tsr_lab_access_t a = g->access[t->access_off + k];
            if (writes(a.mode) && w++ >= TSR_MAX_BUFFERS)
                last_w[a.data] = hidden_w[a.data] = (int64_t)i;
        }
        p->nacc[i] = nk;
        for (size_t k = p->dep_off[i]; k < p->ndep; k++) {
            if (p->dep[k] >= i) {
                snprintf(err, errlen, "replay: task %zu ('%s') depends on task %u, not before it",
                         i, t->name, p->dep[k]);
                rc = TSR_EINVAL;
                goto out;
            }
            p->last_named[p->dep[k]] = (uint32_t)i;
        }
        if (p->ndep - p->dep_off[i] > TSR_MAX_DEPS) {
            snprintf(err, errlen, "replay: task %zu ('%s') has %zu dependencies (max %d)", i,
                     t->name, p->ndep - p->dep_off[i], TSR_MAX_DEPS);
            rc = TSR_EINVAL;
            goto out;
        }
    }
    p->dep_off[n] = p->ndep;

    /* codelets: one per name and buffer count */
    for (size_t i = 0; i < n; i++) {
        int k = name_index(&names, g->task[i].name, p->nacc[i], p->ncl);
        if (k < 0)
            goto out;
        if (k == p->ncl)
            p->ncl++;
        p->cl_of[i] = k;
    }
    p->cl = calloc((size_t)(p->ncl ? p->ncl : 1), sizeof *p->cl);
    has = calloc((size_t)(p->ncl ? p->ncl : 1), sizeof *has);
    if (!p->cl || !has)
        goto out;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < TSR_DEVICE_KINDS; k++)
            if (g->task[i].seconds[k] >= 0)
                has[p->cl_of[i]][k] = has[p->cl_of[i]][TSR_DEVICE_KINDS] = true;
    for (size_t i = 0; i < n; i++) {
        tsr_codelet_t *c = &p->cl[p->cl_of[i]];
        if (c->name)
            continue;
        const bool *h = has[p->cl_of[i]];
        c->name = g->task[i].name;
        c->nbuffers = p->nacc[i];
        c->flops = own_flops;
        if (o->real) {
            c->impl[TSR_DEVICE_CPU] = synthetic;
            c->seconds = own_seconds;
        } else if (o->durations == TSR_LAB_DURATIONS_FILE && h[TSR_DEVICE_KINDS]) {
            for (int k = 0; k < TSR_DEVICE_KINDS; k++)
                c->impl[k] = h[k] ? nothing : NULL;
            c->seconds = own_seconds;
        } else {
            for (int k = 0; k < TSR_DEVICE_KINDS; k++)
                c->impl[k] = nothing;
        }
    }

    rc = TSR_OK;
out:
    if (rc == TSR_ENOMEM)
        snprintf(err, errlen, "replay: out of memory for a graph of %zu tasks", n);
    free(last_w), free(hidden_w), free(names.key), free(names.nb), free(names.val), free(has);
    return rc;
}

/* ---- bounds -------------------------------------------------------------------- */

/* r's longest path and work per worker, with the durations the running
 * runtime's models give (what a simulation charges). */
static void bounds(const tsr_lab_graph_t *g, const tsr_lab_replay_opts_t *o, const plan_t *p,
                   tsr_lab_replay_result_t *r)
{
    int nworkers[TSR_DEVICE_KINDS] = {0}, total = 0;
    for (int w = 0; w < tsr_worker_count(); w++) {
        tsr_worker_stats_t st;
        if (tsr_worker_stats(w, &st) == TSR_OK && st.device_kind >= 0 &&
            st.device_kind < TSR_DEVICE_KINDS)
            nworkers[st.device_kind]++, total++;
    }
    uint32_t *off = NULL, *list = NULL;
    double *fin = malloc((g->ntasks ? g->ntasks : 1) * sizeof *fin);
    if (!fin || lab_all_deps(g, &off, &list) != TSR_OK) {
        free(fin);
        r->critical_path_s = r->work_per_worker_s = -1;
        return;
    }
    double scale = o->scale > 0 ? o->scale : 1, work = 0, cp = 0;
    for (size_t i = 0; i < g->ntasks; i++) {
        const tsr_lab_task_t *t = &g->task[i];
        const tsr_codelet_t *cl = &p->cl[p->cl_of[i]];
        rargs_t a = {.flops = t->flops, .kernel = o->kernel};
        for (int k = 0; k < TSR_DEVICE_KINDS; k++)
            a.sec[k] = o->durations == TSR_LAB_DURATIONS_FILE && t->seconds[k] >= 0
                           ? t->seconds[k] * scale
                           : -1;
        size_t sizes[TSR_MAX_BUFFERS];
        for (int k = 0; k < p->nacc[i]; k++)
            sizes[k] = g->data[p->acc[i * TSR_MAX_BUFFERS + k].data].size;
        double d = -1;
        for (int k = 0; k < TSR_DEVICE_KINDS; k++) {
            tsr_perfmodel_info_t info;
            if (cl->impl[k] && nworkers[k] &&
                tsr_perfmodel_predict(cl, k, sizes, p->nacc[i], &a, &info) == TSR_OK &&
                (d < 0 || info.seconds < d))
                d = info.seconds;
        }
        d = d > 0 ? d : 0;
        double start = 0;
        for (uint32_t k = off[i]; k < off[i + 1]; k++)
            start = fin[list[k]] > start ? fin[list[k]] : start;
        fin[i] = start + d;
        cp = fin[i] > cp ? fin[i] : cp;
        work += d;
    }
    r->critical_path_s = cp;
    r->work_per_worker_s = total ? work / total : -1;
    free(fin), free(off), free(list);
}

/* ---- submission ---------------------------------------------------------------- */

static uint64_t link_bytes(void)
{
    uint64_t b = 0;
    int n = tsr_memory_node_count();
    for (int s = 0; s < n; s++)
        for (int d = 0; d < n; d++)
            if (s != d)
                b += tsr_memory_link_bytes(s, d);
    return b;
}

static void busy(double out[TSR_DEVICE_KINDS])
{
    for (int k = 0; k < TSR_DEVICE_KINDS; k++)
        out[k] = 0;
    for (int w = 0; w < tsr_worker_count(); w++) {
        tsr_worker_stats_t s;
        if (tsr_worker_stats(w, &s) == TSR_OK && s.device_kind >= 0 &&
            s.device_kind < TSR_DEVICE_KINDS)
            out[s.device_kind] += s.busy_s;
    }
}

static int replay_event(const tsr_lab_event_t *e, tsr_handle_t *h)
{
    return e->kind == TSR_LAB_INVALIDATE ? tsr_handle_invalidate(h[e->data])
                                          : tsr_handle_wont_use(h[e->data]);
}

int tsr_lab_replay(const tsr_lab_graph_t *g, const tsr_lab_replay_opts_t *o,
                   tsr_lab_replay_result_t *r, char *err, size_t errlen)
{
    static const tsr_lab_replay_opts_t defaults = {0};
    if (!o)
        o = &defaults;
    memset(r, 0, sizeof *r);
    if (tsr_worker_count() == 0) {
        snprintf(err, errlen, "replay: the runtime is not running");
        return TSR_ESTATE;
    }
    double scale = o->scale > 0 ? o->scale : 1;
    plan_t p;
    int rc = make_plan(g, o, &p, err, errlen);
    tsr_handle_t *h = calloc(g->ndata ? g->ndata : 1, sizeof *h);
    tsr_task_t *ref = calloc(g->ntasks ? g->ntasks : 1, sizeof *ref);
    tsr_task_t *deps = malloc((TSR_MAX_DEPS + 1) * sizeof *deps);
    size_t nh = 0;
    if (rc == TSR_OK && (!h || !ref || !deps)) {
        rc = TSR_ENOMEM;
        snprintf(err, errlen, "replay: out of memory");
    }
    for (; rc == TSR_OK && nh < g->ndata; nh++)
        if ((rc = tsr_handle_alloc(&h[nh], g->data[nh].size ? g->data[nh].size : 1)) != TSR_OK)
            snprintf(err, errlen, "replay: data item %zu ('%s', %llu bytes): %s", nh,
                     g->data[nh].name, (unsigned long long)g->data[nh].size,
                     tsr_error_message());

    double bytes0 = (double)link_bytes(), busy0[TSR_DEVICE_KINDS], busy1[TSR_DEVICE_KINDS];
    busy(busy0);
    double t0 = tsr_time(), w0 = now_s();
    size_t ev = 0;
    for (size_t i = 0; rc == TSR_OK && i < g->ntasks; i++) {
        for (; rc == TSR_OK && ev < g->nevents && g->event[ev].before <= i; ev++)
            rc = replay_event(&g->event[ev], h);
        if (rc != TSR_OK) {
            snprintf(err, errlen, "replay: event before task %zu: %s", i, tsr_error_message());
            break;
        }
        const tsr_lab_task_t *t = &g->task[i];
        tsr_access_t acc[TSR_MAX_BUFFERS];
        for (int k = 0; k < p.nacc[i]; k++) {
            const tsr_lab_access_t *a = &p.acc[i * TSR_MAX_BUFFERS + k];
            acc[k] = (tsr_access_t){h[a->data], (tsr_mode_t)a->mode};
        }
        int nd = 0;
        for (size_t k = p.dep_off[i]; k < p.dep_off[i + 1]; k++)
            deps[nd++] = ref[p.dep[k]];
        rargs_t a = {.flops = t->flops, .kernel = o->kernel, .run_s = 0};
        for (int k = 0; k < TSR_DEVICE_KINDS; k++)
            a.sec[k] = t->seconds[k] >= 0 ? t->seconds[k] * scale : -1;
        if (o->real) {
            /* one kind runs everything: the CPU time, else the one recorded */
            a.run_s = a.sec[TSR_DEVICE_CPU] >= 0 ? a.sec[TSR_DEVICE_CPU]
                                                  : a.sec[TSR_DEVICE_CUDA] >= 0
                                                        ? a.sec[TSR_DEVICE_CUDA]
                                                        : 0;
            a.sec[TSR_DEVICE_CPU] = a.run_s;
            a.sec[TSR_DEVICE_CUDA] = -1;
        } else if (o->durations != TSR_LAB_DURATIONS_FILE) {
            a.sec[TSR_DEVICE_CPU] = a.sec[TSR_DEVICE_CUDA] = -1;
        }
        tsr_task_desc_t d = {.codelet = &p.cl[p.cl_of[i]], .nbuffers = p.nacc[i],
                             .buffers = acc, .args = &a, .args_size = sizeof a,
                             .priority = t->priority, .deps = deps, .ndeps = nd};
        rc = tsr_submit(&d, p.last_named[i] > i ? &ref[i] : NULL);
        if (rc != TSR_OK) {
            snprintf(err, errlen, "replay: task %zu ('%s'): %s", i, t->name,
                     tsr_error_message());
            break;
        }
        for (size_t k = p.dep_off[i]; k < p.dep_off[i + 1]; k++) {
            uint32_t q = p.dep[k];
            if (p.last_named[q] == i && ref[q]) {
                (void)tsr_task_release(ref[q]);
                ref[q] = NULL;
            }
        }
    }
    for (; rc == TSR_OK && ev < g->nevents; ev++)
        if ((rc = replay_event(&g->event[ev], h)) != TSR_OK)
            snprintf(err, errlen, "replay: event after the last task: %s", tsr_error_message());
    /* after a refusal: the references still held, then the tasks submitted */
    for (size_t i = 0; ref && i < g->ntasks; i++)
        if (ref[i])
            (void)tsr_task_release(ref[i]);
    int wrc = tsr_wait_all();
    if (rc == TSR_OK && wrc != TSR_OK) {
        rc = wrc;
        snprintf(err, errlen, "replay: %s", tsr_error_message());
    }
    r->makespan_s = tsr_time() - t0;
    if (rc == TSR_OK && !o->real)
        bounds(g, o, &p, r);
    r->wall_s = now_s() - w0;
    r->tasks = g->ntasks;
    r->folded = p.folded;
    r->bytes_moved = (uint64_t)((double)link_bytes() - bytes0);
    busy(busy1);
    for (int k = 0; k < TSR_DEVICE_KINDS; k++)
        r->busy_s[k] = busy1[k] - busy0[k];
    for (size_t i = 0; i < nh; i++)
        (void)tsr_handle_unregister(h[i]);
    free(h), free(ref), free(deps);
    plan_free(&p);
    return rc;
}
