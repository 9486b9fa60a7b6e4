/* tests/mpi/test_mpi.c — communication tasks between ranks (tessera/mpi.h),
 * one case per run under mpirun: `test_mpi CASE` on every rank.
 *
 * MPI programs cannot run in Criterion's forked workers: this is a plain
 * program that exits 0 when every check on this rank holds and 1 with a
 * message otherwise. Every rank knows every rank's input from a formula, so
 * each checks its result against a sum it computes itself (the reference
 * never comes from the code under test).
 *
 * Cases: allreduce, ordered, bcast, ring, stf, overlap, timeout, simulate,
 * kill.
 */
#include <tessera/mpi.h>
#include <tessera/tessera.h>

#include <mpi.h>

#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks, failures;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "rank %d: %s:%d: ", rank, __FILE__, __LINE__);     \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            failures++;                                                        \
        }                                                                      \
    } while (0)

#define OK(call) CHECK((call) == TSR_OK, "%s: %s", #call, tsr_error_message())

/* Rank r's input at i: integers small enough that float sums are exact in
 * any order (the unordered all-reduce's reference). */
static float exact_input(int r, size_t i)
{
    return (float)((r + 1) * 1000 + (int)(i % 97));
}

/* Rank r's input at i for the ordered sum: magnitudes that differ by
 * orders, so that float addition in another order gives other bits. */
static float inexact_input(int r, size_t i)
{
    return sinf((float)r * 1.3f + (float)i * 0.7f) * powf(10.0f, (float)((r + (int)i) % 5 - 2));
}

/* ---- allreduce: several handles, odd sizes, float and double, sum and max -- */

static void case_allreduce(void)
{
    const size_t nf[] = {1, 7, 1000, 4099};
    enum { NH = 4 };
    float *buf[NH];
    tsr_handle_t h[NH];
    for (int k = 0; k < NH; k++) {
        buf[k] = malloc(nf[k] * sizeof(float));
        for (size_t i = 0; i < nf[k]; i++)
            buf[k][i] = exact_input(rank, i + (size_t)k);
        OK(tsr_handle_register(&h[k], buf[k], nf[k] * sizeof(float)));
        OK(tsr_mpi_allreduce(h[k], TSR_MPI_FLOAT, TSR_MPI_SUM));
    }
    /* doubles, and a maximum */
    double d[33];
    float mx[5];
    for (int i = 0; i < 33; i++)
        d[i] = (double)exact_input(rank, (size_t)i) / 8.0; /* exact: /8 is a shift */
    for (int i = 0; i < 5; i++)
        mx[i] = (float)((rank * 7 + i * 3) % 11);
    tsr_handle_t hd, hm;
    OK(tsr_handle_register(&hd, d, sizeof d));
    OK(tsr_handle_register(&hm, mx, sizeof mx));
    OK(tsr_mpi_allreduce(hd, TSR_MPI_DOUBLE, TSR_MPI_SUM));
    OK(tsr_mpi_allreduce(hm, TSR_MPI_FLOAT, TSR_MPI_MAX));
    OK(tsr_wait_all());
    for (int k = 0; k < NH; k++) {
        OK(tsr_handle_unregister(h[k]));
        for (size_t i = 0; i < nf[k]; i++) {
            float want = 0;
            for (int r = 0; r < nranks; r++)
                want += exact_input(r, i + (size_t)k);
            CHECK(buf[k][i] == want, "handle %d [%zu]: %g, want %g", k, i, buf[k][i], want);
        }
        free(buf[k]);
    }
    OK(tsr_handle_unregister(hd));
    OK(tsr_handle_unregister(hm));
    for (int i = 0; i < 33; i++) {
        double want = 0;
        for (int r = 0; r < nranks; r++)
            want += (double)exact_input(r, (size_t)i) / 8.0;
        CHECK(d[i] == want, "double [%d]: %g, want %g", i, d[i], want);
    }
    for (int i = 0; i < 5; i++) {
        float want = -1;
        for (int r = 0; r < nranks; r++)
            want = fmaxf(want, (float)((r * 7 + i * 3) % 11));
        CHECK(mx[i] == want, "max [%d]: %g, want %g", i, mx[i], want);
    }
}

/* ---- ordered: bitwise equal to ((x0 + x1) + x2) + … ------------------------- */

static void case_ordered(void)
{
    OK(tsr_mpi_set_ordered(1));
    const size_t n = 5003;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++)
        x[i] = y[i] = inexact_input(rank, i);
    tsr_handle_t hx, hy;
    OK(tsr_handle_register(&hx, x, n * sizeof *x));
    OK(tsr_handle_register(&hy, y, n * sizeof *y));
    /* Two in a row on different handles: posted in submission order. */
    OK(tsr_mpi_allreduce(hx, TSR_MPI_FLOAT, TSR_MPI_SUM));
    OK(tsr_mpi_allreduce(hy, TSR_MPI_FLOAT, TSR_MPI_SUM));
    OK(tsr_wait_all());
    OK(tsr_handle_unregister(hx));
    OK(tsr_handle_unregister(hy));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        float want = inexact_input(0, i);
        for (int r = 1; r < nranks; r++)
            want += inexact_input(r, i);
        if (memcmp(&x[i], &want, sizeof want) != 0 || memcmp(&y[i], &want, sizeof want) != 0)
            bad++;
    }
    CHECK(bad == 0, "ordered all-reduce: %zu of %zu elements differ in bits from the rank-order "
                    "sum", bad, n);
    free(x);
    free(y);
}

/* ---- bcast from every root ------------------------------------------------- */

static void case_bcast(void)
{
    const size_t n = 777; /* bytes: not a multiple of anything */
    for (int root = 0; root < nranks; root++) {
        unsigned char *b = malloc(n);
        for (size_t i = 0; i < n; i++)
            b[i] = (unsigned char)(rank * 31 + (int)i);
        tsr_handle_t h;
        OK(tsr_handle_register(&h, b, n));
        OK(tsr_mpi_bcast(h, root));
        OK(tsr_handle_unregister(h)); /* waits for the broadcast */
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += b[i] != (unsigned char)(root * 31 + (int)i);
        CHECK(bad == 0, "bcast from %d: %zu bytes differ", root, bad);
        free(b);
    }
}

/* ---- send/recv ring ----------------------------------------------------------- */

static void case_ring(void)
{
    const size_t n = 1531;
    float *out = malloc(n * sizeof *out), *in = calloc(n, sizeof *in);
    for (size_t i = 0; i < n; i++)
        out[i] = exact_input(rank, i);
    tsr_handle_t ho, hi;
    OK(tsr_handle_register(&ho, out, n * sizeof *out));
    OK(tsr_handle_register(&hi, in, n * sizeof *in));
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    /* Every rank receives first and sends second: non-blocking, no deadlock. */
    OK(tsr_mpi_recv(hi, prev, 5));
    OK(tsr_mpi_send(ho, next, 5));
    OK(tsr_wait_all());
    OK(tsr_handle_unregister(ho));
    OK(tsr_handle_unregister(hi));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += in[i] != exact_input(prev, i) || out[i] != exact_input(rank, i);
    CHECK(bad == 0, "ring: %zu elements differ from rank %d's input", bad, prev);
    free(out);
    free(in);
}

/* ---- compute tasks around a collective, in sequential task flow order ------- */

typedef struct { int rank; } fill_args_t;

static int fill_impl(void **b, const void *args, const tsr_exec_t *e)
{
    const fill_args_t *a = args;
    float *x = b[0];
    for (size_t i = 0; i < e->sizes[0] / sizeof *x; i++)
        x[i] = exact_input(a->rank, i);
    return 0;
}

/* out[0] = sum of in (a double, exact for these integers) */
static int total_impl(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    const float *x = b[0];
    double s = 0;
    for (size_t i = 0; i < e->sizes[0] / sizeof *x; i++)
        s += x[i];
    *(double *)b[1] = s;
    return 0;
}

static const tsr_codelet_t fill_cl = {.name = "fill", .impl = {fill_impl}, .nbuffers = 1};
static const tsr_codelet_t total_cl = {.name = "total", .impl = {total_impl}, .nbuffers = 2};

static void case_stf(void)
{
    const size_t n = 2049;
    tsr_handle_t h, t;
    OK(tsr_handle_alloc(&h, n * sizeof(float)));
    OK(tsr_handle_alloc(&t, sizeof(double)));
    fill_args_t fa = {rank};
    tsr_access_t a1[] = {{h, TSR_W}};
    tsr_task_desc_t d1 = {.codelet = &fill_cl, .nbuffers = 1, .buffers = a1, .args = &fa,
                          .args_size = sizeof fa};
    tsr_access_t a2[] = {{h, TSR_R}, {t, TSR_W}};
    tsr_task_desc_t d2 = {.codelet = &total_cl, .nbuffers = 2, .buffers = a2};
    /* No wait between: the handle's order alone sequences them. */
    OK(tsr_submit(&d1, NULL));
    OK(tsr_mpi_allreduce(h, TSR_MPI_FLOAT, TSR_MPI_SUM));
    OK(tsr_submit(&d2, NULL));
    double *p;
    OK(tsr_handle_acquire(t, TSR_R, (void **)&p));
    double want = 0;
    for (size_t i = 0; i < n; i++)
        for (int r = 0; r < nranks; r++)
            want += exact_input(r, i);
    CHECK(*p == want, "stf: the task after the all-reduce read a total of %.17g, want %.17g", *p,
          want);
    OK(tsr_handle_release(t));
    OK(tsr_handle_unregister(h));
    OK(tsr_handle_unregister(t));
}

/* ---- overlap: compute runs while a transfer waits for its peer ------------- */

static atomic_int ncompute;

static int count_impl(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args, (void)e;
    ((float *)b[0])[0] += 1.0f;
    atomic_fetch_add(&ncompute, 1);
    return 0;
}

static const tsr_codelet_t count_cl = {.name = "count", .impl = {count_impl}, .nbuffers = 1};

static void case_overlap(void)
{
    /* Rank 0 posts its all-reduce first; the others join only once rank 0
     * says its compute tasks are done. Those tasks can finish only if the
     * one CPU worker (TESSERA_NCPU=1) is not held by the transfer. */
    enum { NTASKS = 50 };
    const size_t n = 1 << 18;
    float *big = malloc(n * sizeof *big);
    for (size_t i = 0; i < n; i++)
        big[i] = exact_input(rank, i);
    tsr_handle_t h, c;
    OK(tsr_handle_register(&h, big, n * sizeof *big));
    OK(tsr_handle_alloc(&c, sizeof(float)));
    float zero = 0;
    float *pc;
    OK(tsr_handle_acquire(c, TSR_W, (void **)&pc));
    *pc = zero;
    OK(tsr_handle_release(c));
    int token = 0;
    if (rank == 0) {
        OK(tsr_mpi_allreduce(h, TSR_MPI_FLOAT, TSR_MPI_SUM));
        tsr_access_t a[] = {{c, TSR_RW}};
        tsr_task_desc_t d = {.codelet = &count_cl, .nbuffers = 1, .buffers = a, .tag = 7};
        for (int i = 0; i < NTASKS; i++)
            OK(tsr_submit(&d, NULL));
        OK(tsr_wait_tag(7));
        /* The all-reduce cannot have completed: no other rank has joined. */
        CHECK(atomic_load(&ncompute) == NTASKS, "overlap: %d of %d compute tasks ran",
              atomic_load(&ncompute), NTASKS);
        for (int r = 1; r < nranks; r++)
            MPI_Send(&token, 1, MPI_INT, r, 99, MPI_COMM_WORLD);
    } else {
        MPI_Recv(&token, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        OK(tsr_mpi_allreduce(h, TSR_MPI_FLOAT, TSR_MPI_SUM));
    }
    OK(tsr_wait_all());
    OK(tsr_handle_unregister(h));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        float want = 0;
        for (int r = 0; r < nranks; r++)
            want += exact_input(r, i);
        bad += big[i] != want;
    }
    CHECK(bad == 0, "overlap: %zu elements of the all-reduce differ", bad);
    free(big);
}

/* ---- timeout: the last rank does not join in time -------------------------- */

static void case_timeout(void)
{
    /* Run with TESSERA_MPI_TIMEOUT=2. */
    float x[64];
    for (int i = 0; i < 64; i++)
        x[i] = exact_input(rank, (size_t)i);
    tsr_handle_t h;
    OK(tsr_handle_register(&h, x, sizeof x));
    int last = nranks - 1, token = 0;
    if (rank != last) {
        OK(tsr_mpi_allreduce(h, TSR_MPI_FLOAT, TSR_MPI_SUM));
        int rc = tsr_wait_all();
        const char *msg = tsr_error_message();
        CHECK(rc == TSR_ETASK, "timeout: wait_all returned %d, want TSR_ETASK", rc);
        CHECK(strstr(msg, "allreduce") && strstr(msg, "timed out") && strstr(msg, "256 bytes"),
              "timeout: the message does not name the operation, size and cause: %s", msg);
        fprintf(stderr, "rank %d: the expected failure: %s\n", rank, msg);
        /* Reading the handle after its failed writer: TSR_ETASK too. */
        void *p;
        rc = tsr_handle_acquire(h, TSR_R, &p);
        CHECK(rc == TSR_ETASK, "timeout: acquire after the failed all-reduce returned %d", rc);
        MPI_Send(&token, 1, MPI_INT, last, 98, MPI_COMM_WORLD);
    } else {
        for (int r = 0; r < last; r++)
            MPI_Recv(&token, 1, MPI_INT, r, 98, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        /* Late: the collective the others abandoned completes now, so that
         * every rank can finalize. */
        OK(tsr_mpi_allreduce(h, TSR_MPI_FLOAT, TSR_MPI_SUM));
        OK(tsr_wait_all());
    }
    tsr_handle_unregister(h);
}

/* ---- simulation: no peers ---------------------------------------------------- */

static void case_simulate(void)
{
    /* Run with TESSERA_SIMULATE set: every communication call refuses. */
    tsr_handle_t h;
    OK(tsr_handle_alloc(&h, 64));
    int rc[4] = {tsr_mpi_allreduce(h, TSR_MPI_FLOAT, TSR_MPI_SUM), tsr_mpi_bcast(h, 0),
                 tsr_mpi_send(h, (rank + 1) % nranks, 0),
                 tsr_mpi_recv(h, (rank + 1) % nranks, 0)};
    for (int i = 0; i < 4; i++)
        CHECK(rc[i] == TSR_EINVAL, "simulate: call %d returned %d, want TSR_EINVAL", i, rc[i]);
    CHECK(strstr(tsr_error_message(), "simulation") != NULL, "simulate: message: %s",
          tsr_error_message());
    OK(tsr_handle_unregister(h));
}

/* ---- kill: a rank dies mid-job ------------------------------------------- */

static void case_kill(void)
{
    float x[1024];
    for (int i = 0; i < 1024; i++)
        x[i] = exact_input(rank, (size_t)i);
    tsr_handle_t h;
    OK(tsr_handle_register(&h, x, sizeof x));
    OK(tsr_mpi_allreduce(h, TSR_MPI_FLOAT, TSR_MPI_SUM));
    OK(tsr_wait_all());
    if (rank == 1)
        raise(SIGKILL);
    /* The others wait for a rank that is gone: mpirun ends the job (or,
     * failing that, the timeout fails the task and this rank exits 1). */
    OK(tsr_mpi_allreduce(h, TSR_MPI_FLOAT, TSR_MPI_SUM));
    int rc = tsr_wait_all();
    fprintf(stderr, "rank %d: after the kill: %s\n", rank, rc ? tsr_error_message() : "ok");
    exit(1);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: mpirun -np N %s CASE\n", argv[0]);
        return 2;
    }
    const char *c = argv[1];
    if (tsr_mpi_init(&argc, &argv) != TSR_OK) {
        fprintf(stderr, "mpi_init: %s\n", tsr_error_message());
        return 1;
    }
    rank = tsr_mpi_rank();
    nranks = tsr_mpi_size();
    int level;
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE && (!strcmp(c, "overlap") || !strcmp(c, "timeout"))) {
        /* These cases call MPI from the main thread beside the runtime's. */
        fprintf(stderr, "rank %d: MPI gives no MPI_THREAD_MULTIPLE: case %s cannot run\n", rank, c);
        return 1;
    }
    /* Order of calls: mpi_init once, before tsr_init. */
    CHECK(tsr_mpi_init(NULL, NULL) == TSR_ESTATE, "mpi_init twice must fail");

    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = !strcmp(c, "overlap") ? 1 : 2;
    cfg.perfmodel_dir = "";
    cfg.bind = 0;
    if (tsr_init(&cfg) != TSR_OK) {
        fprintf(stderr, "rank %d: init: %s\n", rank, tsr_error_message());
        return 1;
    }
    CHECK(tsr_mpi_finalize() == TSR_ESTATE, "mpi_finalize before tsr_shutdown must fail");
    if (!strcmp(c, "allreduce"))
        case_allreduce();
    else if (!strcmp(c, "ordered"))
        case_ordered();
    else if (!strcmp(c, "bcast"))
        case_bcast();
    else if (!strcmp(c, "ring"))
        case_ring();
    else if (!strcmp(c, "stf"))
        case_stf();
    else if (!strcmp(c, "overlap"))
        case_overlap();
    else if (!strcmp(c, "timeout"))
        case_timeout();
    else if (!strcmp(c, "simulate"))
        case_simulate();
    else if (!strcmp(c, "kill"))
        case_kill();
    else {
        fprintf(stderr, "unknown case %s\n", c);
        failures++;
    }
    int rc = tsr_shutdown();
    if (strcmp(c, "timeout") != 0)
        CHECK(rc == TSR_OK, "shutdown: %s", tsr_error_message());
    OK(tsr_mpi_finalize());
    if (failures)
        fprintf(stderr, "rank %d: case %s: %d check(s) failed\n", rank, c, failures);
    else if (rank == 0)
        printf("case %s: %d ranks: ok\n", c, nranks);
    return failures ? 1 : 0;
}
