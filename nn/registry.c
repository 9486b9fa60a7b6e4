/* nn/registry.c — see registry.h. */
#include "nn/registry.h"

#include <stdlib.h>

#include "runtime/error.h"
#include "runtime/instance.h"

int tsr__registry_add(tsr__registry_t *r, const void *p)
{
    int rc = 0;
    pthread_mutex_lock(&r->m);
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 16;
        const void **grown = realloc(r->items, cap * sizeof *grown);
        if (grown) {
            r->items = grown;
            r->cap = cap;
        } else {
            rc = -1;
        }
    }
    if (!rc)
        r->items[r->n++] = p;
    pthread_mutex_unlock(&r->m);
    return rc;
}

int tsr__registry_find(tsr__registry_t *r, const void *p, int remove)
{
    int found = 0;
    pthread_mutex_lock(&r->m);
    for (size_t i = 0; i < r->n && !found; i++)
        if (r->items[i] == p) {
            found = 1;
            if (remove)
                r->items[i] = r->items[--r->n];
        }
    if (remove && found && r->n == 0) {
        free(r->items);
        r->items = NULL;
        r->cap = 0;
    }
    pthread_mutex_unlock(&r->m);
    return found;
}

int tsr__registry_check(tsr__registry_t *r, const void *p, const uint64_t *runtime,
                        const char *what, const char *fn)
{
    if (!p)
        return tsr__fail(TSR_EINVAL, "%s: the %s is NULL", fn, what);
    if (!tsr__registry_find(r, p, 0))
        return tsr__fail(TSR_EINVAL, "%s: %p is not a live %s (freed, or never created)", fn, p,
                         what);
    if (*runtime != tsr__runtime_instance())
        return tsr__fail(TSR_ESTATE, "%s: the %s's runtime was shut down; free it and create it "
                                     "again under the running one", fn, what);
    return TSR_OK;
}
