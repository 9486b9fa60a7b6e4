/* HEFT planning against the worked example of Topcuoglu, Hariri and Wu
 * (IEEE TPDS 13(3), 2002, Fig. 2 and Table 1): ten tasks, three
 * processors. The paper gives the upward ranks and the HEFT makespan (80);
 * a naive recursive rank and an independent schedule checker are the
 * references here. Also the timeline's gap insertion on small cases
 * worked out by hand. */
#include <criterion/criterion.h>

#include "sched/plan.h"

#include <math.h>
#include <string.h>

#define N 10
#define P 3

/* Table 1: computation cost of task i on P1, P2, P3. */
static const double cost[N * P] = {
    14, 16, 9,  13, 19, 18, 11, 13, 19, 13, 8, 17, 12, 13, 10,
    13, 16, 9,  7,  15, 11, 5,  11, 14, 18, 12, 20, 21, 7, 16,
};
/* Fig. 2: edges (0-based) and their communication costs. */
static const int edges[] = {0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 1, 7, 1, 8, 2, 6,
                            3, 7, 3, 8, 4, 8, 5, 7, 6, 9, 7, 9, 8, 9};
static const double comm[] = {18, 12, 9, 11, 14, 19, 16, 23, 27, 23, 13, 15, 17, 11, 13};
#define NE ((int)(sizeof comm / sizeof comm[0]))

/* rank_u(i) = mean cost + max over successors (comm + rank_u), by plain
 * recursion over the edge list. */
static double naive_rank(int i)
{
    double m = (cost[i * P] + cost[i * P + 1] + cost[i * P + 2]) / 3, best = 0;
    for (int k = 0; k < NE; k++)
        if (edges[2 * k] == i) {
            double r = comm[k] + naive_rank(edges[2 * k + 1]);
            if (r > best)
                best = r;
        }
    return m + best;
}

Test(heft, paper_example_ranks_and_makespan)
{
    int proc[N];
    double start[N], finish[N], rank[N];
    double ms = tsr__heft_static(N, P, cost, NE, edges, comm, proc, start, finish, rank);

    /* Ranks: the paper's table, and the naive recursion. */
    const double paper[N] = {108, 77, 80, 80, 69, 63.333, 42.667, 35.667, 44.333, 14.667};
    for (int i = 0; i < N; i++) {
        cr_assert_float_eq(rank[i], naive_rank(i), 1e-9, "rank of n%d", i + 1);
        cr_assert_float_eq(rank[i], paper[i], 1e-3, "rank of n%d: %g, paper %g", i + 1,
                           rank[i], paper[i]);
    }
    /* The paper's HEFT schedule has makespan 80. */
    cr_assert_float_eq(ms, 80.0, 1e-9, "makespan %g, paper 80", ms);

    /* The schedule is valid: each task runs for its cost on its processor,
     * after every predecessor's result has arrived, and no two tasks
     * overlap on one processor. */
    for (int i = 0; i < N; i++) {
        cr_assert(proc[i] >= 0 && proc[i] < P);
        cr_assert_float_eq(finish[i] - start[i], cost[i * P + proc[i]], 1e-9);
        for (int k = 0; k < NE; k++)
            if (edges[2 * k + 1] == i) {
                int a = edges[2 * k];
                double arrive = finish[a] + (proc[a] == proc[i] ? 0 : comm[k]);
                cr_assert(start[i] >= arrive - 1e-9, "n%d starts at %g before n%d's data (%g)",
                          i + 1, start[i], a + 1, arrive);
            }
        for (int j = 0; j < i; j++)
            if (proc[j] == proc[i])
                cr_assert(finish[i] <= start[j] + 1e-9 || finish[j] <= start[i] + 1e-9,
                          "n%d and n%d overlap on P%d", i + 1, j + 1, proc[i] + 1);
    }
    /* The entry task goes where it is fastest (P3: 9), as in the paper. */
    cr_assert_eq(proc[0], 2);
    cr_assert_float_eq(finish[0], 9.0, 1e-9);
    cr_assert_float_eq(finish[9], 80.0, 1e-9, "the exit task ends the schedule");
}

Test(heft, rejects_edges_out_of_order)
{
    const int back[] = {1, 0};
    const double c1[] = {1}, costs[2] = {1, 1};
    int proc[2];
    double s[2], f[2];
    cr_assert_lt(tsr__heft_static(2, 1, costs, 1, back, c1, proc, s, f, NULL), 0);
}

/* A plan with a gap: slot A ends at 10, slot B waits for data until 30.
 * A task of length 15 ready at 5 fits in [10, 25]; one of 25 does not and
 * goes after B; without insertion everything goes to the end. */
Test(heft, timeline_gap_insertion)
{
    tsr_slot_t v[8];
    tsr_timeline_t tl = {v, 0, 8};
    cr_assert(tsr__timeline_insert(&tl, 0, (tsr_slot_t){0, 0, 0, 10, NULL}));
    cr_assert(tsr__timeline_insert(&tl, 1, (tsr_slot_t){0, 0, 30, 5, NULL}));
    tsr__timeline_retime(&tl, 0);
    cr_assert_float_eq(v[0].end, 10, 1e-12);
    cr_assert_float_eq(v[1].start, 30, 1e-12);
    cr_assert_float_eq(v[1].end, 35, 1e-12);

    int pos;
    double s = tsr__timeline_fit(&tl, 0, 5, 15, true, &pos);
    cr_assert_eq(pos, 1);
    cr_assert_float_eq(s, 10, 1e-12);
    s = tsr__timeline_fit(&tl, 0, 5, 25, true, &pos);
    cr_assert_eq(pos, 2);
    cr_assert_float_eq(s, 35, 1e-12);
    s = tsr__timeline_fit(&tl, 0, 5, 15, false, &pos);
    cr_assert_eq(pos, 2);
    cr_assert_float_eq(s, 35, 1e-12);
    /* Data arriving inside the gap: a short task still fits before B. */
    s = tsr__timeline_fit(&tl, 0, 28, 1, true, &pos);
    cr_assert_eq(pos, 1, "a task ready at 28 of length 1 fits before 30");
    cr_assert_float_eq(s, 28, 1e-12);

    /* Inserting shifts later slots; a full timeline refuses. */
    cr_assert(tsr__timeline_insert(&tl, 1, (tsr_slot_t){0, 0, 5, 15, NULL}));
    tsr__timeline_retime(&tl, 0);
    cr_assert_float_eq(v[1].start, 10, 1e-12);
    cr_assert_float_eq(v[2].start, 30, 1e-12);
    tsr__timeline_remove(&tl, 0);
    cr_assert_eq(tl.n, 2);
    tsr_timeline_t full = {v, 8, 8};
    cr_assert(!tsr__timeline_insert(&full, 0, v[0]));
}

/* Ranks maintained as tasks arrive equal the ranks of the whole graph,
 * and a frozen (dispatched) task stops the walk. */
Test(heft, incremental_ranks)
{
    /* chain a → b → c with a second successor d of a */
    tsr_rank_node_t a = {.cost = 1}, b = {.cost = 2}, c = {.cost = 3}, d = {.cost = 10};
    tsr_rank_node_t *pb[] = {&a}, *pc[] = {&b}, *pd[] = {&a};
    double cb[] = {0.5}, cc[] = {0.25}, cd[] = {4};
    b.pred = pb, b.comm = cb, b.npred = 1;
    c.pred = pc, c.comm = cc, c.npred = 1;
    d.pred = pd, d.comm = cd, d.npred = 1;
    tsr__rank_add(&a, 100, NULL, NULL);
    cr_assert_float_eq(a.rank, 1, 1e-12);
    tsr__rank_add(&b, 100, NULL, NULL);
    cr_assert_float_eq(a.rank, 1 + 0.5 + 2, 1e-12);
    tsr__rank_add(&c, 100, NULL, NULL);
    cr_assert_float_eq(b.rank, 2 + 0.25 + 3, 1e-12);
    cr_assert_float_eq(a.rank, 1 + 0.5 + 5.25, 1e-12);
    tsr__rank_add(&d, 100, NULL, NULL);
    cr_assert_float_eq(a.rank, 1 + 4 + 10, 1e-12);
    /* b dispatched: a later successor of b raises nothing. */
    b.frozen = true;
    tsr_rank_node_t e = {.cost = 100, .pred = pc, .comm = cc, .npred = 1};
    pc[0] = &b;
    tsr__rank_add(&e, 100, NULL, NULL);
    cr_assert_float_eq(b.rank, 5.25, 1e-12);
    cr_assert_float_eq(a.rank, 15, 1e-12);
}
