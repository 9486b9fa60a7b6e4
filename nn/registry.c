/* nn/registry.c — see registry.h. */
#include "nn/registry.h"

#include <stdlib.h>

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
