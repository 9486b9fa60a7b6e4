/* sched/pheap.h — a pairing heap of tasks threaded through their policy
 * fields (next = sibling, prev = first child), ordered by a policy's
 * `before` relation, so a policy's central queue never allocates.
 *
 * Never locks: the policy holds its own lock around every call.
 */
#ifndef TSR_SCHED_PHEAP_H
#define TSR_SCHED_PHEAP_H

#include <stdbool.h>
#include <tessera/sched.h>

typedef bool (*tsr_ph_before_fn)(tsr_task_t a, tsr_task_t b);

#define PH_F(t) tsr_task_sched_fields(t)

/* Meld two heaps whose roots have no siblings. */
static inline tsr_task_t tsr_ph_meld(tsr_task_t a, tsr_task_t b, tsr_ph_before_fn before)
{
    if (!a)
        return b;
    if (!b)
        return a;
    if (before(b, a)) {
        tsr_task_t x = a;
        a = b;
        b = x;
    }
    PH_F(b)->next = PH_F(a)->prev;
    PH_F(a)->prev = b;
    return a;
}

static inline tsr_task_t tsr_ph_push(tsr_task_t root, tsr_task_t t, tsr_ph_before_fn before)
{
    PH_F(t)->next = PH_F(t)->prev = NULL;
    return tsr_ph_meld(root, t, before);
}

/* Remove the root; returns the new root. Two-pass pairing, iteratively. */
static inline tsr_task_t tsr_ph_pop(tsr_task_t root, tsr_ph_before_fn before)
{
    tsr_task_t c = PH_F(root)->prev, pairs = NULL;
    PH_F(root)->prev = NULL;
    while (c) {
        tsr_task_t a = c, b = PH_F(a)->next;
        if (!b) {
            PH_F(a)->next = pairs;
            pairs = a;
            break;
        }
        c = PH_F(b)->next;
        PH_F(a)->next = PH_F(b)->next = NULL;
        tsr_task_t m = tsr_ph_meld(a, b, before);
        PH_F(m)->next = pairs;
        pairs = m;
    }
    tsr_task_t res = NULL;
    while (pairs) {
        tsr_task_t n = PH_F(pairs)->next;
        PH_F(pairs)->next = NULL;
        res = tsr_ph_meld(res, pairs, before);
        pairs = n;
    }
    return res;
}

#undef PH_F
#endif
