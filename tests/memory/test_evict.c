/* Victim selection: the eviction order (memory/evict.h) against a sorted
 * copy of its items; the window rule's fetches into a small accelerator
 * against an offline Belady (MIN) simulation of the same accesses, and the
 * LRU rule's against a naive LRU simulation; a tiled GEMM under the window
 * rule against a double-precision reference. */
#include "../runtime/util.h"

#include "memory/evict.h"
#include "memory/memory.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- the order against a naive reference -------------------------------- */

#define NITEMS 300

/* The key as evict.h documents it, kept here independently: tier (0
 * first), then under the window rule the next use (largest first), then
 * the time of the last insert/touch — oldest first in tier 1, newest
 * first in tier 0. */
typedef struct shadow {
    bool live;
    int tier;
    uint64_t next_use, time;
} shadow_t;

static shadow_t sh[NITEMS];
static int sort_rule;

static int cmp_ref(const void *pa, const void *pb)
{
    const shadow_t *a = &sh[*(const int *)pa], *b = &sh[*(const int *)pb];
    if (a->tier != b->tier)
        return a->tier < b->tier ? -1 : 1;
    if (a->tier == 1 && sort_rule == TSR_MEM_EVICT_WINDOW && a->next_use != b->next_use)
        return a->next_use > b->next_use ? -1 : 1;
    if (a->tier == 0)
        return a->time > b->time ? -1 : 1;
    return a->time < b->time ? -1 : 1;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A next use drawn from few values, so that ties (and NONE) happen. */
static uint64_t draw_next_use(void)
{
    uint64_t x = rnd() % 12;
    return x == 0 ? TSR_NEXT_USE_NONE : x * 10;
}

static void check_visit(tsr_evict_order_t *o, tsr_evict_item_t *items)
{
    int ref[NITEMS], n = 0;
    for (int i = 0; i < NITEMS; i++)
        if (sh[i].live)
            ref[n++] = i;
    qsort(ref, (size_t)n, sizeof ref[0], cmp_ref);
    tsr_evict_visit_t v = {0};
    tsr__evict_visit_start(o, &v);
    int k = 0;
    for (tsr_evict_item_t *it; (it = tsr__evict_visit_next(o, &v)); k++) {
        cr_assert_lt(k, n, "the visit yields more items than are live (%d)", n);
        cr_assert_eq(it - items, ref[k], "visit position %d: item %td, sorted reference %d",
                     k, it - items, ref[k]);
    }
    cr_assert_eq(k, n, "the visit yields %d items, %d are live", k, n);
    cr_assert(!v.truncated);
    tsr__evict_visit_end(&v);
}

static void order_random(int rule)
{
    static tsr_evict_item_t items[NITEMS];
    tsr_evict_order_t o;
    tsr__evict_init(&o, rule);
    sort_rule = rule;
    memset(sh, 0, sizeof sh);
    uint64_t time = 0;
    for (int i = 0; i < NITEMS; i++)
        items[i] = (tsr_evict_item_t){.idx = TSR_EVICT_NOWHERE};
    for (int round = 0; round < 40; round++) {
        for (int step = 0; step < 200; step++) {
            int i = (int)(rnd() % NITEMS);
            int op = (int)(rnd() % 4);
            if (!sh[i].live) {
                /* insert: the caller sets the next use first (as the
                 * directory copies its entry's) */
                items[i].next_use = sh[i].next_use = draw_next_use();
                bool matters = rnd() % 4 != 0;
                cr_assert(tsr__evict_insert(&o, &items[i], matters));
                sh[i] = (shadow_t){true, matters, sh[i].next_use, ++time};
            } else if (op == 0) {
                tsr__evict_remove(&o, &items[i]);
                cr_assert_eq(items[i].idx, TSR_EVICT_NOWHERE);
                sh[i].live = false;
            } else if (op == 1) {
                bool matters = rnd() % 3 != 0;
                tsr__evict_touch(&o, &items[i], matters);
                sh[i].tier = matters;
                sh[i].time = ++time;
            } else {
                uint64_t nu = draw_next_use();
                tsr__evict_set_next_use(&o, &items[i], nu);
                sh[i].next_use = nu;
            }
        }
        check_visit(&o, items);
    }
    /* Removing the visited item and starting again (as an eviction does)
     * still yields the rest in order: remove every other one. */
    int ref[NITEMS], n = 0;
    for (int i = 0; i < NITEMS; i++)
        if (sh[i].live)
            ref[n++] = i;
    qsort(ref, (size_t)n, sizeof ref[0], cmp_ref);
    tsr_evict_visit_t v = {0};
    tsr__evict_visit_start(&o, &v);
    int k = 0, removed = 0;
    for (tsr_evict_item_t *it; (it = tsr__evict_visit_next(&o, &v));) {
        /* after a restart, the kept items before come again: skip them */
        if (it - items != ref[k]) {
            bool seen = false;
            for (int j = 0; j < k; j++)
                seen |= ref[j] == it - items;
            cr_assert(seen, "item %td out of order (expected %d)", it - items, ref[k]);
            continue;
        }
        if (k % 2 == 0) {
            tsr__evict_remove(&o, it);
            sh[ref[k]].live = false;
            tsr__evict_visit_removed(&o, &v);
            removed++;
        }
        k++;
    }
    cr_assert_eq(k, n);
    cr_assert_eq(o.n, (uint32_t)(n - removed));
    tsr__evict_visit_end(&v);
    check_visit(&o, items);
    tsr__evict_fini(&o);
}

Test(order, window_matches_sorted_reference) { order_random(TSR_MEM_EVICT_WINDOW); }
Test(order, lru_matches_sorted_reference) { order_random(TSR_MEM_EVICT_LRU); }

/* ---- Belady and LRU on a simulated accelerator ------------------------- */

/* Misses of a cache of k slots over the accesses a[0..m), evicting what
 * the next use of is furthest (never: furthest of all), computed offline
 * by looking ahead in a. */
static int misses_min(const int *a, int m, int k)
{
    int cache[64], n = 0, misses = 0;
    for (int i = 0; i < m; i++) {
        bool hit = false;
        for (int c = 0; c < n; c++)
            hit |= cache[c] == a[i];
        if (hit)
            continue;
        misses++;
        if (n < k) {
            cache[n++] = a[i];
            continue;
        }
        int victim = 0, far = -1;
        for (int c = 0; c < n; c++) {
            int next = m; /* never again */
            for (int j = i + 1; j < m; j++)
                if (a[j] == cache[c]) {
                    next = j;
                    break;
                }
            if (next > far) {
                far = next;
                victim = c;
            }
        }
        cache[victim] = a[i];
    }
    return misses;
}

/* The same, evicting the least recently used. */
static int misses_lru(const int *a, int m, int k)
{
    int cache[64], last[64], n = 0, misses = 0;
    for (int i = 0; i < m; i++) {
        int at = -1;
        for (int c = 0; c < n; c++)
            if (cache[c] == a[i])
                at = c;
        if (at < 0) {
            misses++;
            if (n < k) {
                at = n++;
            } else {
                at = 0;
                for (int c = 1; c < n; c++)
                    if (last[c] < last[at])
                        at = c;
            }
            cache[at] = a[i];
        }
        last[at] = i;
    }
    return misses;
}

static int touch_kernel(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    (void)e;
    ((volatile unsigned char *)b[0])[0];
    ((unsigned char *)b[1])[0]++;
    return 0;
}

static const tsr_codelet_t touch_cl = {.name = "touch", .impl = {touch_kernel}, .nbuffers = 2};

#define TILE 4096
#define GATE 64

/* Runs task i = (read tile a[i], RW the gate) for i < m on one simulated
 * accelerator with room for k tiles (and the small gate), under `rule`,
 * and returns the tiles copied into it. The gate chains the tasks, so they
 * run in program order, one ready at a time: no task's data is prefetched
 * before the task before it completed, and each request sees exactly the
 * window of the tasks not yet run (the gate itself is always the copy used
 * next and last: neither rule evicts it). The application holds the gate
 * while it submits, so that every task is in the window before the first
 * runs. Tiles are only read: an eviction is a drop, never a write-back.
 * Nothing else moves tiles: the worker holds one task at a time
 * (pipeline 1, so no request for a later task reserves room early), eager
 * prefetches nothing at push, and the host is unlimited (no readiness
 * prefetch). Each fetch is then exactly one miss of the rule. */
static int fetched_tiles(const int *a, int m, int ntiles, int k, int rule)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = -1;
    cfg.bind = 0;
    cfg.sched = "eager";
    cfg.nsim = 1;
    cfg.sim_mem = (size_t)k * TILE + GATE;
    cfg.pipeline = 1;
    cfg.evict = rule;
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "%s", tsr_error_message());
    unsigned char *mem = calloc((size_t)ntiles, TILE);
    tsr_handle_t tiles[64], gate;
    for (int t = 0; t < ntiles; t++)
        cr_assert_eq(tsr_handle_register(&tiles[t], mem + (size_t)t * TILE, TILE), TSR_OK);
    cr_assert_eq(tsr_handle_alloc(&gate, GATE), TSR_OK);
    void *p;
    cr_assert_eq(tsr_handle_acquire(gate, TSR_RW, &p), TSR_OK, "%s", tsr_error_message());
    for (int i = 0; i < m; i++) {
        tsr_access_t acc[2] = {{tiles[a[i]], TSR_R}, {gate, TSR_RW}};
        tsr_task_desc_t d = {.codelet = &touch_cl, .nbuffers = 2, .buffers = acc};
        cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
    }
    cr_assert_eq(tsr_handle_release(gate), TSR_OK);
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    /* host → sim: the tiles, and the gate once (less than a tile) */
    uint64_t bytes = tsr_memory_link_bytes(0, 1);
    stop_runtime();
    free(mem);
    return (int)(bytes / TILE);
}

static void belady_case(const int *a, int m, int ntiles, int k)
{
    int want_min = misses_min(a, m, k), want_lru = misses_lru(a, m, k);
    int win = fetched_tiles(a, m, ntiles, k, TSR_EVICT_WINDOW);
    int lru = fetched_tiles(a, m, ntiles, k, TSR_EVICT_LRU);
    cr_log_info("%d accesses over %d tiles, room for %d: window %d fetches (MIN %d), "
                "LRU %d (naive LRU %d)", m, ntiles, k, win, want_min, lru, want_lru);
    cr_assert_eq(win, want_min, "window rule: %d fetches, offline MIN: %d", win, want_min);
    cr_assert_eq(lru, want_lru, "LRU rule: %d fetches, naive LRU: %d", lru, want_lru);
}

Test(belady, cyclic_accesses)
{
    /* 0 1 … 6 0 1 … 6 …: LRU misses every access (each tile was used the
     * longest ago exactly when it comes back); MIN keeps k - 1 tiles. */
    int a[70];
    for (int i = 0; i < 70; i++)
        a[i] = i % 7;
    belady_case(a, 70, 7, 4);
    cr_assert_eq(misses_lru(a, 70, 4), 70);
}

Test(belady, random_accesses)
{
    int a[120];
    uint64_t s = 12345;
    for (int i = 0; i < 120; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        a[i] = (int)((s >> 33) % 10);
    }
    belady_case(a, 120, 10, 4);
}

/* ---- readiness: what runs next is not what was submitted next --------- */

/* R chains of L steps, submitted chain by chain (like an i-j-k loop);
 * step l of chain c reads tile tile_of(c, l) and read-writes the chain's
 * gate (a tile-sized handle: it orders the chain). Under eager with one
 * worker the chains' steps become ready one round at a time and run round
 * by round — step 0 of every chain, then step 1 of every chain — far from
 * submission order, so a rule reading submission numbers alone guesses the
 * next uses wrong. The window rule ranks a use by a ready task before any
 * use by a waiting one, in the order the tasks became ready. */
enum { RR_CHAINS = 4, RR_STEPS = 8, RR_TILES = 10, RR_ROOM = 6 };

static int tile_of(int c, int l) { return (3 * c + 7 * l + (c * l) % 3) % RR_TILES; }

static int rr_log[RR_CHAINS * RR_STEPS], rr_n;

static int rr_kernel(void **b, const void *args, const tsr_exec_t *e)
{
    (void)e;
    ((volatile unsigned char *)b[0])[0];
    ((unsigned char *)b[1])[0]++;
    rr_log[rr_n++] = *(const int *)args; /* one worker: no race */
    return 0;
}

static const tsr_codelet_t rr_cl = {.name = "rr", .impl = {rr_kernel}, .nbuffers = 3};

/* Offline MIN over the tasks in the order they ran, each needing its tile
 * and its gate at once (slots: RR_TILES tiles, then the gates): a missing
 * item evicts the resident item, not used by this task, whose next use is
 * furthest. Counts copies into the accelerator: every tile miss, and a
 * gate miss after the gate's first use (the first is zeros, made there). */
static int rr_min(const int *order, int m)
{
    int res[16], n = 0, copies = 0;
    bool used[RR_CHAINS] = {false};
    for (int i = 0; i < m; i++) {
        int c = order[i] / RR_STEPS, l = order[i] % RR_STEPS;
        int need[2] = {tile_of(c, l), RR_TILES + c};
        for (int q = 0; q < 2; q++) {
            bool hit = false;
            for (int r = 0; r < n; r++)
                hit |= res[r] == need[q];
            if (hit)
                continue;
            copies += q == 0 || used[c];
            if (n < RR_ROOM) {
                res[n++] = need[q];
                continue;
            }
            int victim = -1, far = -1;
            for (int r = 0; r < n; r++) {
                if (res[r] == need[0] || res[r] == need[1])
                    continue;
                int next = m;
                for (int j = i + 1; j < m && next == m; j++) {
                    int c2 = order[j] / RR_STEPS, l2 = order[j] % RR_STEPS;
                    if (tile_of(c2, l2) == res[r] || RR_TILES + c2 == res[r])
                        next = j;
                }
                if (next > far) {
                    far = next;
                    victim = r;
                }
            }
            res[victim] = need[q];
        }
        used[c] = true;
    }
    return copies;
}

static int rr_run(int rule, int *order)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = -1;
    cfg.bind = 0;
    cfg.sched = "eager";
    cfg.nsim = 1;
    cfg.sim_mem = (size_t)RR_ROOM * TILE + GATE; /* and `hold`, below */
    cfg.pipeline = 1;
    cfg.evict = rule;
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "%s", tsr_error_message());
    unsigned char *mem = calloc(RR_TILES, TILE);
    tsr_handle_t tiles[RR_TILES], gate[RR_CHAINS], hold;
    for (int t = 0; t < RR_TILES; t++)
        cr_assert_eq(tsr_handle_register(&tiles[t], mem + (size_t)t * TILE, TILE), TSR_OK);
    for (int c = 0; c < RR_CHAINS; c++)
        cr_assert_eq(tsr_handle_alloc(&gate[c], TILE), TSR_OK);
    /* Every task in the window before the first runs: every task also
     * reads `hold`, which the application holds while it submits (in use
     * by every task, it is never the copy evicted). */
    cr_assert_eq(tsr_handle_alloc(&hold, GATE), TSR_OK);
    void *p;
    cr_assert_eq(tsr_handle_acquire(hold, TSR_RW, &p), TSR_OK, "%s", tsr_error_message());
    rr_n = 0;
    for (int c = 0; c < RR_CHAINS; c++)
        for (int l = 0; l < RR_STEPS; l++) {
            int id = c * RR_STEPS + l;
            tsr_access_t acc[3] = {
                {tiles[tile_of(c, l)], TSR_R}, {gate[c], TSR_RW}, {hold, TSR_R}};
            tsr_task_desc_t d = {.codelet = &rr_cl, .nbuffers = 3, .buffers = acc,
                                 .args = &id, .args_size = sizeof id};
            cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
        }
    cr_assert_eq(tsr_handle_release(hold), TSR_OK);
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    uint64_t bytes = tsr_memory_link_bytes(0, 1);
    memcpy(order, rr_log, sizeof rr_log);
    cr_assert_eq(rr_n, RR_CHAINS * RR_STEPS);
    stop_runtime();
    free(mem);
    return (int)(bytes / TILE);
}

Test(belady, tasks_run_in_readiness_order)
{
    int order[RR_CHAINS * RR_STEPS];
    int win = rr_run(TSR_EVICT_WINDOW, order);
    /* the tasks ran round by round, as eager makes them ready */
    for (int i = 0; i < RR_CHAINS * RR_STEPS; i++)
        cr_assert_eq(order[i], (i % RR_CHAINS) * RR_STEPS + i / RR_CHAINS, "task %d ran %d-th",
                     order[i], i);
    int want = rr_min(order, RR_CHAINS * RR_STEPS);
    int lru_order[RR_CHAINS * RR_STEPS];
    int lru = rr_run(TSR_EVICT_LRU, lru_order);
    cr_log_info("round-robin chains: window %d copies, offline MIN of the order run %d, "
                "LRU %d", win, want, lru);
    cr_assert_eq(win, want, "window rule: %d copies, offline MIN: %d", win, want);
}

/* ---- results under the window rule ------------------------------------- */

typedef struct { int nb; } gemm_args_t;

static int gemm_kernel(void **b, const void *args, const tsr_exec_t *e)
{
    (void)e;
    int nb = ((const gemm_args_t *)args)->nb;
    const double *A = b[0], *B = b[1];
    double *C = b[2];
    for (int j = 0; j < nb; j++)
        for (int l = 0; l < nb; l++)
            for (int i = 0; i < nb; i++)
                C[i + j * nb] += A[i + l * nb] * B[l + j * nb];
    return 0;
}

static const tsr_codelet_t gemm_cl = {.name = "gemm", .impl = {gemm_kernel}, .nbuffers = 3};

/* C += A B over nt×nt tiles of nb×nb on accelerators with room for a few
 * tiles (C tiles are written back as they are evicted), against the same
 * product in naive loops over whole matrices. */
static void gemm_case(int ncpu, int nsim, const char *sched, int rule)
{
    enum { NT = 5, NB = 12 };
    size_t tile = (size_t)NB * NB;
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = ncpu;
    cfg.sched = sched;
    cfg.bind = 0;
    cfg.nsim = nsim;
    cfg.sim_mem = 7 * tile * sizeof(double);
    cfg.evict = rule;
    cr_assert_eq(tsr_init(&cfg), TSR_OK, "%s", tsr_error_message());
    double *mem = malloc(3 * NT * NT * tile * sizeof(double));
    double *ref = malloc(NT * NT * tile * sizeof(double));
    for (size_t i = 0; i < 3 * NT * NT * tile; i++)
        mem[i] = sin(0.7 * (double)i) * 0.5;
    double *A = mem, *B = mem + NT * NT * tile, *C = B + NT * NT * tile;
    memcpy(ref, C, NT * NT * tile * sizeof(double));
    /* the element (r, c) of a matrix: tile (r / NB, c / NB), column-major */
#define AT(M, r, c) (M)[((size_t)((r) / NB) + (size_t)((c) / NB) * NT) * tile + \
                        (size_t)((r) % NB) + (size_t)((c) % NB) * NB]
    for (int r = 0; r < NT * NB; r++)
        for (int c = 0; c < NT * NB; c++) {
            double s = 0;
            for (int l = 0; l < NT * NB; l++)
                s += AT(A, r, l) * AT(B, l, c);
            AT(ref, r, c) += s;
        }
    tsr_handle_t h[3 * NT * NT];
    for (int i = 0; i < 3 * NT * NT; i++)
        cr_assert_eq(tsr_handle_register(&h[i], mem + (size_t)i * tile, tile * sizeof(double)),
                     TSR_OK);
    gemm_args_t args = {NB};
    for (int i = 0; i < NT; i++)
        for (int j = 0; j < NT; j++)
            for (int k = 0; k < NT; k++) {
                tsr_access_t acc[3] = {{h[i + k * NT], TSR_R},
                                       {h[NT * NT + k + j * NT], TSR_R},
                                       {h[2 * NT * NT + i + j * NT], TSR_RW}};
                tsr_task_desc_t d = {.codelet = &gemm_cl, .nbuffers = 3, .buffers = acc,
                                     .args = &args, .args_size = sizeof args};
                cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
            }
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    for (int i = 0; i < 3 * NT * NT; i++)
        cr_assert_eq(tsr_handle_unregister(h[i]), TSR_OK);
    /* The same products in another order: rounding differs slightly. */
    for (size_t x = 0; x < NT * NT * tile; x++)
        cr_assert(fabs(C[x] - ref[x]) <= 1e-12 * (1 + fabs(ref[x])), "C[%zu] = %.17g, "
                  "reference %.17g", x, C[x], ref[x]);
    stop_runtime();
    free(mem);
    free(ref);
#undef AT
}

Test(gemm, window_one_sim) { gemm_case(-1, 1, "eager", TSR_EVICT_WINDOW); }
Test(gemm, window_two_sims_and_a_cpu) { gemm_case(1, 2, "dmda", TSR_EVICT_WINDOW); }
Test(gemm, lru_two_sims_and_a_cpu) { gemm_case(1, 2, "dmda", TSR_EVICT_LRU); }
