/* sched/plan.c — timelines with gap insertion, upward ranks, static HEFT.
 * See plan.h. */
#include "sched/plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double maxd(double a, double b) { return a > b ? a : b; }

void tsr__timeline_retime(tsr_timeline_t *tl, double avail)
{
    double t = avail;
    for (int i = 0; i < tl->n; i++) {
        tsr_slot_t *s = &tl->v[i];
        s->start = maxd(t, s->ready);
        s->end = s->start + s->len;
        t = s->end;
    }
}

double tsr__timeline_fit(const tsr_timeline_t *tl, double avail, double ready,
                         double len, bool insert, int *pos)
{
    double prev_end = avail;
    if (insert)
        for (int i = 0; i < tl->n; i++) {
            double start = maxd(prev_end, ready);
            if (start + len <= tl->v[i].start) {
                *pos = i;
                return start;
            }
            prev_end = tl->v[i].end;
        }
    else if (tl->n > 0)
        prev_end = maxd(prev_end, tl->v[tl->n - 1].end);
    *pos = tl->n;
    return maxd(prev_end, ready);
}

bool tsr__timeline_insert(tsr_timeline_t *tl, int pos, tsr_slot_t slot)
{
    if (tl->n == tl->cap || pos < 0 || pos > tl->n)
        return false;
    memmove(&tl->v[pos + 1], &tl->v[pos], (size_t)(tl->n - pos) * sizeof tl->v[0]);
    tl->v[pos] = slot;
    tl->n++;
    return true;
}

void tsr__timeline_remove(tsr_timeline_t *tl, int pos)
{
    if (pos < 0 || pos >= tl->n)
        return;
    memmove(&tl->v[pos], &tl->v[pos + 1], (size_t)(tl->n - pos - 1) * sizeof tl->v[0]);
    tl->n--;
}

int tsr__rank_add(tsr_rank_node_t *n, int budget,
                  void (*raised)(tsr_rank_node_t *node, void *arg), void *arg)
{
    n->rank = n->cost;
    /* Depth-first walk up the predecessors whose rank rose; the stack holds
     * nodes whose new rank must still be passed on. */
    int cap = 64, top = 0, updated = 1;
    tsr_rank_node_t **stack = malloc((size_t)cap * sizeof *stack);
    if (!stack)
        return updated;
    stack[top++] = n;
    while (top > 0 && updated < budget) {
        tsr_rank_node_t *c = stack[--top];
        for (int i = 0; i < c->npred && updated < budget; i++) {
            tsr_rank_node_t *p = c->pred[i];
            if (!p || p->frozen)
                continue;
            double r = p->cost + c->comm[i] + c->rank;
            if (r <= p->rank)
                continue;
            p->rank = r;
            updated++;
            if (raised)
                raised(p, arg);
            if (top == cap) {
                tsr_rank_node_t **s2 = realloc(stack, (size_t)cap * 2 * sizeof *stack);
                if (!s2)
                    continue; /* its ancestors keep a lower rank: a hint */
                stack = s2;
                cap *= 2;
            }
            stack[top++] = p;
        }
    }
    free(stack);
    return updated;
}

double tsr__heft_static(int n, int p, const double *cost, int nedges,
                        const int *edges, const double *comm, int *proc,
                        double *start, double *finish, double *rank)
{
    double makespan = -1;
    tsr_rank_node_t *nodes = calloc((size_t)n, sizeof *nodes);
    tsr_rank_node_t **preds = calloc((size_t)nedges + 1, sizeof *preds);
    double *pcomm = calloc((size_t)nedges + 1, sizeof *pcomm);
    int *order = malloc((size_t)n * sizeof *order);
    tsr_timeline_t *tl = calloc((size_t)p, sizeof *tl);
    tsr_slot_t *slots = calloc((size_t)n * (size_t)p, sizeof *slots);
    if (!nodes || !preds || !pcomm || !order || !tl || !slots)
        goto out;
    for (int k = 0; k < nedges; k++)
        if (edges[2 * k] < 0 || edges[2 * k] >= edges[2 * k + 1] || edges[2 * k + 1] >= n)
            goto out;
    /* Tasks arrive in index order, each with its predecessors: the ranks
     * come from the same incremental walk the heft policy uses. */
    int used = 0;
    for (int i = 0; i < n; i++) {
        double mean = 0;
        for (int q = 0; q < p; q++)
            mean += cost[i * p + q];
        nodes[i].cost = mean / p;
        nodes[i].pred = &preds[used];
        nodes[i].comm = &pcomm[used];
        for (int k = 0; k < nedges; k++)
            if (edges[2 * k + 1] == i) {
                preds[used] = &nodes[edges[2 * k]];
                pcomm[used++] = comm[k];
                nodes[i].npred++;
            }
        tsr__rank_add(&nodes[i], n * n + 1, NULL, NULL);
    }
    /* Decreasing rank, ties by index (insertion sort: n is small). */
    for (int i = 0; i < n; i++) {
        int j = i;
        while (j > 0 && nodes[order[j - 1]].rank < nodes[i].rank) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    for (int q = 0; q < p; q++) {
        tl[q].v = &slots[(size_t)q * (size_t)n];
        tl[q].cap = n;
    }
    makespan = 0;
    for (int oi = 0; oi < n; oi++) {
        int i = order[oi], best = -1, best_pos = 0;
        double best_start = 0, best_fin = INFINITY;
        for (int q = 0; q < p; q++) {
            double ready = 0;
            for (int k = 0; k < nedges; k++)
                if (edges[2 * k + 1] == i) {
                    int a = edges[2 * k];
                    ready = maxd(ready, finish[a] + (proc[a] == q ? 0 : comm[k]));
                }
            int pos;
            double s = tsr__timeline_fit(&tl[q], 0, ready, cost[i * p + q], true, &pos);
            if (s + cost[i * p + q] < best_fin) {
                best = q;
                best_pos = pos;
                best_start = s;
                best_fin = s + cost[i * p + q];
            }
        }
        proc[i] = best;
        start[i] = best_start;
        finish[i] = best_fin;
        tsr__timeline_insert(&tl[best], best_pos,
                             (tsr_slot_t){best_start, best_fin, best_start,
                                          cost[i * p + best], NULL});
        makespan = maxd(makespan, best_fin);
    }
    if (rank)
        for (int i = 0; i < n; i++)
            rank[i] = nodes[i].rank;
out:
    free(nodes);
    free(preds);
    free(pcomm);
    free(order);
    free(tl);
    free(slots);
    return makespan;
}
