/* sched/sched.c — finding a policy by name (built-in or plug-in) and the
 * calls a policy may make on its instance.
 *
 * This unit must never decide anything about tasks itself: it only connects
 * the runtime to the chosen policy.
 */
#include "runtime/internal.h"
#include "sched/policies.h"

#include <dlfcn.h>
#include <string.h>

static const tsr_sched_policy_t *const builtin[] = {
    &tsr__policy_eager,
    &tsr__policy_prio,
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
    if (!p && strchr(name, '/')) {
        /* A plug-in: a shared object exporting `tsr_sched_policy`. */
        void *dl = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (!dl)
            return tsr__fail(TSR_ENOTFOUND, "scheduler plug-in '%s': %s", name,
                             dlerror());
        p = dlsym(dl, "tsr_sched_policy");
        if (!p) {
            dlclose(dl);
            return tsr__fail(TSR_ENOTFOUND,
                             "scheduler plug-in '%s' exports no 'tsr_sched_policy'",
                             name);
        }
        s->dl = dl;
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
            dlclose(s->dl);
        memset(s, 0, sizeof *s);
    }
    return rc;
}

void tsr__sched_close(tsr_sched_t *s)
{
    if (s->policy && s->policy->deinit)
        s->policy->deinit(s);
    if (s->dl)
        dlclose(s->dl);
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
