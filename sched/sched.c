/* sched/sched.c — finding a policy by name (built-in or plug-in) and the
 * calls a policy may make on its instance.
 *
 * This unit must never decide anything about tasks itself: it only connects
 * the runtime to the chosen policy.
 */
#include "runtime/internal.h"
#include "runtime/perfmodel.h"
#include "sched/policies.h"

#include <math.h>

#include <string.h>

static const tsr_sched_policy_t *const builtin[] = {
    &tsr__policy_eager,
    &tsr__policy_prio,
    &tsr__policy_random,
    &tsr__policy_ws,
    &tsr__policy_dmda,
    &tsr__policy_heft,
};

const tsr_sched_policy_t *tsr_sched_builtin(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++)
        if (strcmp(builtin[i]->name, name) == 0)
            return builtin[i];
    return NULL;
}

const tsr_sched_policy_t *tsr_sched_builtin_at(int i)
{
    if (i < 0 || (size_t)i >= sizeof builtin / sizeof builtin[0])
        return NULL;
    return builtin[i];
}

static int check_policy(const tsr_sched_policy_t *p, const char *where)
{
    if (!p->name || !p->push || !p->pop)
        return tsr__fail(TSR_EINVAL,
                         "scheduler '%s': the policy lacks a name, push or pop",
                         where);
    return TSR_OK;
}

int tsr__sched_open(tsr_sched_t *s, const char *name)
{
    memset(s, 0, sizeof *s);
    const tsr_sched_policy_t *p = tsr_sched_builtin(name);
    if (!p) {
        int rc = tsr__sched_plugin_load(name, &p, &s->dl);
        if (rc != TSR_OK && rc != TSR_ENOTFOUND)
            return rc; /* found but broken: the message says why */
        if (rc == TSR_ENOTFOUND && strchr(name, '/'))
            return rc;
    }
    if (!p) {
        char known[256] = "";
        for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++) {
            strncat(known, i ? ", " : "", sizeof known - strlen(known) - 1);
            strncat(known, builtin[i]->name, sizeof known - strlen(known) - 1);
        }
        return tsr__fail(TSR_ENOTFOUND,
                         "unknown scheduler '%s' (built-in: %s; or a path to a "
                         "plug-in .so)",
                         name, known);
    }
    int rc = check_policy(p, name);
    if (rc == TSR_OK) {
        s->policy = p;
        rc = p->init ? p->init(s) : TSR_OK;
        if (rc != TSR_OK)
            tsr__fail(rc, "scheduler '%s': init failed (%s)", p->name,
                      tsr_strerror(rc));
    }
    if (rc != TSR_OK) {
        if (s->dl)
            tsr__sched_plugin_unload(s->dl);
        memset(s, 0, sizeof *s);
    }
    return rc;
}

void tsr__sched_close(tsr_sched_t *s)
{
    if (s->policy && s->policy->deinit)
        s->policy->deinit(s);
    if (s->dl)
        tsr__sched_plugin_unload(s->dl);
    memset(s, 0, sizeof *s);
}

void *tsr_sched_data(tsr_sched_t *s) { return s->data; }
void tsr_sched_set_data(tsr_sched_t *s, void *data) { s->data = data; }
int tsr_sched_worker_count(tsr_sched_t *s)
{
    (void)s;
    return tsr__rt.nworkers;
}

int tsr_sched_worker_device(tsr_sched_t *s, int worker)
{
    (void)s;
    if (worker < 0 || worker >= tsr__rt.nworkers)
        return -1;
    return tsr__rt.workers[worker].device_kind;
}

int tsr_sched_worker_node(tsr_sched_t *s, int worker)
{
    (void)s;
    if (worker < 0 || worker >= tsr__rt.nworkers)
        return -1;
    return tsr__rt.workers[worker].node;
}

int tsr_sched_node_count(tsr_sched_t *s)
{
    (void)s;
    return tsr__rt.nnodes;
}

int tsr_sched_current_worker(tsr_sched_t *s)
{
    (void)s;
    return tsr__tl_worker;
}

double tsr_sched_now(tsr_sched_t *s)
{
    (void)s;
    return (double)(tsr__now_ns() - tsr__rt.t0_ns) * 1e-9;
}

void tsr_sched_notify(tsr_sched_t *s, int worker)
{
    (void)s;
    tsr__workers_notify(worker < tsr__rt.nworkers ? worker : -1);
}

void tsr_sched_prefetch(tsr_sched_t *s, tsr_task_t t, int worker)
{
    (void)s;
    if (t && worker >= 0 && worker < tsr__rt.nworkers && tsr__rt.nnodes > 1)
        tsr__task_prefetch(t, worker);
}

/* ---- data locations -------------------------------------------------------- */

uint32_t tsr_handle_nodes(tsr_handle_t h)
{
    tsr_data_t *d = tsr__handle_lookup(h);
    return d ? tsr__entry_nodes(d->entry) : 0;
}

/* Whether buffer i of t is read (its contents matter on entry). */
static bool reads(tsr_task_t t, int i)
{
    int m = t->acc[i].mode;
    return m == TSR_R || m == TSR_RW || m == TSR_COMMUTE;
}

/* Whether buffer i is the first of t's buffers on its handle. */
static bool first_use(tsr_task_t t, int i)
{
    for (int k = 0; k < i; k++)
        if (t->acc[k].handle == t->acc[i].handle && t->acc[k].mode != TSR_SCRATCH)
            return false;
    return true;
}

/* tsr_handle_nodes of buffer i, which t reads: its handle is t->data[i]
 * (a task keeps the handles it uses registered), without the lookup. */
static uint32_t nodes_of(tsr_task_t t, int i)
{
    return t->data[i] ? tsr__entry_nodes(t->data[i]->entry) : 0;
}

size_t tsr_task_bytes_on(tsr_task_t t, int node, size_t *total_read)
{
    size_t on = 0, total = 0;
    for (int i = 0; t && i < t->nbuffers; i++) {
        if (!reads(t, i) || !first_use(t, i))
            continue;
        total += t->sizes[i];
        if (node >= 0 && node < 32 && (nodes_of(t, i) >> node & 1u))
            on += t->sizes[i];
    }
    if (total_read)
        *total_read = total;
    return on;
}

/* ---- performance models -------------------------------------------------- */

double tsr_sched_expected_length(tsr_sched_t *s, tsr_task_t t, int worker)
{
    (void)s;
    tsr_perfmodel_info_t info;
    if (!t || !t->cl || worker < 0 || worker >= tsr__rt.nworkers)
        return NAN;
    if (!tsr__perfmodel_estimate(t->cl, tsr__rt.workers[worker].device_kind, t->sizes,
                                 t->nbuffers, t->args, &info))
        return NAN;
    return info.seconds;
}

double tsr_sched_transfer_time(tsr_sched_t *s, int src, int dst, size_t bytes)
{
    (void)s;
    if (src < 0 || dst < 0 || src >= tsr__rt.nnodes || dst >= tsr__rt.nnodes)
        return 0;
    return tsr__bus_time(src, dst, bytes);
}

double tsr_sched_expected_transfer(tsr_sched_t *s, tsr_task_t t, int worker)
{
    (void)s;
    if (!t || worker < 0 || worker >= tsr__rt.nworkers)
        return 0;
    int dst = tsr__rt.workers[worker].node;
    double sum = 0;
    for (int i = 0; i < t->nbuffers; i++) {
        if (!reads(t, i) || !first_use(t, i))
            continue;
        uint32_t m = nodes_of(t, i);
        if (dst < 32 && (m >> dst & 1u))
            continue;
        /* From the cheapest node that has it. */
        double best = INFINITY;
        for (int src = 0; src < tsr__rt.nnodes && src < 32; src++)
            if (m >> src & 1u) {
                double c = tsr__bus_time(src, dst, t->sizes[i]);
                if (c < best)
                    best = c;
            }
        if (best < INFINITY)
            sum += best;
    }
    return sum;
}
