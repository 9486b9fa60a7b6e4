/* sched/plan.h — the planning arithmetic of the model-based policies (dmda,
 * heft) and a static HEFT planner built from the same pieces.
 *
 * A timeline is a worker's plan: slots in start order, each starting when
 * both the worker is free and its data has arrived, so idle gaps appear
 * where data arrives late; HEFT inserts a task into the first gap that
 * holds it. Upward ranks (the longest predicted path from a task to the end
 * of what was submitted) are kept up to date as tasks arrive: a new task is
 * a sink, and raising its ancestors' ranks is a walk up its predecessors.
 *
 * Pure computation: no locks, no runtime calls, never allocates except in
 * tsr__rank_add's walk (bounded by its budget) and the static planner.
 */
#ifndef TSR_SCHED_PLAN_H
#define TSR_SCHED_PLAN_H

#include <stdbool.h>

typedef struct tsr_slot {
    double start, end;  /* planned */
    double ready;       /* when its data is on the worker's node */
    double len;         /* predicted execution time */
    void *item;
} tsr_slot_t;

typedef struct tsr_timeline {
    tsr_slot_t *v;
    int n, cap;
} tsr_timeline_t;

/* Re-plan every slot in order from `avail` (when the worker is done with
 * what it already runs): a slot starts at max(previous end, its ready). */
void tsr__timeline_retime(tsr_timeline_t *tl, double avail);
/* Start of a task with data ready at `ready` and length `len`: with insert,
 * in the first idle gap before a planned slot that holds it, else after the
 * last slot; *pos receives its index. The timeline must be retimed. */
double tsr__timeline_fit(const tsr_timeline_t *tl, double avail, double ready,
                         double len, bool insert, int *pos);
/* Put a slot at index pos (shifting later ones); false if full. */
bool tsr__timeline_insert(tsr_timeline_t *tl, int pos, tsr_slot_t slot);
/* Remove the slot at index pos. */
void tsr__timeline_remove(tsr_timeline_t *tl, int pos);

/* One task for upward ranks. */
typedef struct tsr_rank_node {
    double cost;                   /* mean predicted execution time */
    double rank;                   /* cost + max over successors of
                                      (comm + their rank) */
    int npred;
    struct tsr_rank_node **pred;   /* predecessors still planned */
    double *comm;                  /* mean transfer time from pred[i] */
    bool frozen;                   /* dispatched: its rank no longer matters,
                                      and its predecessors are done */
} tsr_rank_node_t;

/* n was just submitted (a sink): rank = cost, then raise the ranks of its
 * ancestors through the predecessor lists, stopping at frozen nodes, and
 * call raised(node, arg) (if not NULL) for each ancestor whose rank rose.
 * Updates at most `budget` nodes (a bounded cost per submission); returns
 * how many it updated. */
int tsr__rank_add(tsr_rank_node_t *n, int budget,
                  void (*raised)(tsr_rank_node_t *node, void *arg), void *arg);

/* Static HEFT (Topcuoglu, Hariri, Wu, IEEE TPDS 2002) on n tasks numbered
 * in a topological order and p processors: cost[i*p + q] the time of task
 * i on processor q; edges[2k] → edges[2k+1] with communication time comm[k]
 * (paid only between different processors; its value is also the mean
 * used in the ranks). Tasks are taken by decreasing upward rank (ties:
 * lower index) and each placed on the processor where it finishes first,
 * inserted into an idle gap when one holds it. Fills proc, start, finish
 * and rank (each n entries; rank may be NULL) and returns the makespan, or
 * a negative value if memory runs out or the edges are not topological. */
double tsr__heft_static(int n, int p, const double *cost, int nedges,
                        const int *edges, const double *comm, int *proc,
                        double *start, double *finish, double *rank);

#endif
