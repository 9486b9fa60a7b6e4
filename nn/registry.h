/* nn/registry.h — a set of the live objects of one kind (models, generation
 * states), so that a call given a pointer that is none (freed already,
 * never created) is refused instead of used after free. A later object may
 * reuse a freed one's memory: such a stale pointer is then that object,
 * which no registry can tell apart.
 *
 * Must never: dereference what it holds (it compares addresses only), or
 * keep memory once it is empty (nothing outlives the last object).
 */
#ifndef TSR_NN_REGISTRY_H
#define TSR_NN_REGISTRY_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tsr__registry {
    pthread_mutex_t m;
    const void **items;
    size_t n, cap;
} tsr__registry_t;

#define TSR__REGISTRY_INIT {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0}

/* Add p; 0, or -1 when no memory could hold it (the caller says what). */
int tsr__registry_add(tsr__registry_t *r, const void *p);
/* Whether p is in r; `remove` also takes it out. */
int tsr__registry_find(tsr__registry_t *r, const void *p, int remove);

/* An object argument of a call that uses its tiles: NULL or not in r is
 * TSR_EINVAL; an object made under a runtime since shut down (*runtime, its
 * instance, read only once p is known live, is not the running one) is
 * TSR_ESTATE. `what` names the kind ("model", "generation state"), fn the
 * caller, in the message. */
int tsr__registry_check(tsr__registry_t *r, const void *p, const uint64_t *runtime,
                        const char *what, const char *fn);

#endif
