/* runtime/comm.c — tessera/mpi.h with MPI: communication tasks in the task
 * graph, driven by one communication thread per rank (docs/mpi.md).
 *
 * A communication task is an internal task (TSR_KIND_COMM) on one handle,
 * so sequential task flow orders it with the compute tasks around it. When
 * it is ready, tsr__task_ready hands it here; the communication thread gets
 * host access to the handle's bytes (from any accelerator or the disk, as an
 * acquisition does), copies them into a staging buffer, posts non-blocking
 * MPI on the staging buffer, polls every transfer in flight, and on
 * completion copies the result back, releases the access and completes the
 * task. The staging copy is what makes a timeout safe: a transfer a peer
 * never completes keeps its staging buffer (abandoned, still polled), never
 * the handle's memory.
 *
 * Collectives are posted in submission order (a sequence number taken at
 * submission), whatever order their tasks become ready in: MPI matches
 * collectives on a communicator by the order they are posted, and a
 * different order on two ranks would pair different handles.
 *
 * Must never: block a worker in MPI (workers only queue here); call MPI
 * from a thread other than this one's between tsr_init and tsr_shutdown
 * when MPI gives only MPI_THREAD_SERIALIZED; abort on a peer's failure (an
 * MPI error or a timeout fails the task with a message).
 */
#include <tessera/mpi.h>

#include <mpi.h>

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/error.h"
#include "runtime/internal.h"

enum { OP_SEND, OP_RECV, OP_ALLREDUCE, OP_BCAST };

/* The ordered all-reduce's point-to-point pieces use a tag of their own
 * (above every user tag; MPI guarantees tags up to 32767): collectives are
 * posted in the same order on every rank, and MPI does not overtake
 * between two ranks on one tag. */
enum { ORDERED_TAG = 32767 };

/* What a communication task transfers: its argument block. */
typedef struct comm_args {
    int op;          /* OP_… */
    int peer;        /* send: dest; recv: source; bcast: root */
    int tag;
    int type, red;   /* TSR_MPI_FLOAT/DOUBLE/BYTE; TSR_MPI_SUM/MAX */
    int ordered;     /* all-reduce in rank order (tsr_mpi_set_ordered) */
    double timeout;  /* seconds (tsr_mpi_set_timeout at submission); 0: none */
    uint64_t seq;    /* collectives: the submission number */
} comm_args_t;

/* One transfer in flight. */
typedef struct comm_op {
    struct comm_op *next;
    tsr_task_t t;            /* NULL once abandoned (timed out) */
    comm_args_t a;
    tsr_data_t *h;
    size_t bytes;
    tsr_mem_req_t req;       /* host access to the handle */
    unsigned char *stage;    /* staging: bytes (the ordered root: bytes per rank) */
    MPI_Request *reqs;
    int nreq;
    int phase;               /* ordered all-reduce: 0 gather, 1 broadcast */
    uint64_t deadline_ns;    /* 0: none */
    uint64_t posted_ns;      /* when its first request was posted (the trace) */
} comm_op_t;

static struct {
    /* MPI state: set by tsr_mpi_init, read by everyone after */
    int inited, finalized, owned;
    int rank, size, level;
    MPI_Comm comm;           /* MPI_COMM_WORLD duplicated: errors return */
    _Atomic double timeout;  /* seconds, below TSR__MPI_MAX_TIMEOUT_S; 0: none */
    atomic_int ordered;
    atomic_uint_fast64_t coll_seq; /* collectives submitted */
    uint64_t next_coll;      /* the next to post (communication thread) */
    /* the cores the process may use at tsr_mpi_init: the thread starts from
     * a worker, bound to that worker's core, and must not stay there */
    cpu_set_t cpus;
    bool have_cpus;
    /* elements per MPI call: INT_MAX (MPI's count is an int); smaller
     * under TESSERA_MPI_MAX_COUNT, which tests use to split small buffers */
    size_t max_count;
    comm_op_t *abandoned;    /* timed out, never completed: MPI may still
                                write their staging buffers */

    /* the communication thread and its queue (under m) */
    pthread_mutex_t m;
    pthread_cond_t cv;
    pthread_t thread;
    bool running, stop;
    comm_op_t *queue, *queue_tail;

    /* the trace's communication track: one event per completed transfer,
     * from its posting to its completion (written by the thread only, read
     * by tsr__trace_write after the thread stopped) */
    struct tsr_trace_event *ev;
    size_t nev, capev;
} C = {.timeout = 300.0, .max_count = INT_MAX, .m = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* ---- set-up -------------------------------------------------------------- */

int tsr_mpi_available(void)
{
    return 1;
}

int tsr_mpi_rank(void)
{
    return C.inited ? C.rank : 0;
}

int tsr_mpi_size(void)
{
    return C.inited ? C.size : 1;
}

static int mpi_fail(int status, const char *fn, int err)
{
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(err, s, &n) != MPI_SUCCESS)
        snprintf(s, sizeof s, "error %d", err);
    return tsr__fail(status, "%s: %s", fn, s);
}

int tsr_mpi_init(int *argc, char ***argv)
{
    if (C.inited || C.finalized)
        return tsr__fail(TSR_ESTATE, "mpi_init: called %s", C.inited ? "twice" : "after mpi_finalize");
    if (tsr__running())
        return tsr__fail(TSR_ESTATE, "mpi_init: call it before tsr_init");
    double timeout = atomic_load(&C.timeout);
    int trc = tsr__mpi_timeout_env(&timeout);
    if (trc < 0)
        return trc;
    int already = 0, level = MPI_THREAD_SINGLE;
    MPI_Initialized(&already);
    if (already) {
        MPI_Query_thread(&level);
    } else {
        int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &level);
        if (rc != MPI_SUCCESS)
            return mpi_fail(TSR_ENODEV, "mpi_init: MPI_Init_thread", rc);
    }
    /* SERIALIZED is enough: between tsr_init and tsr_shutdown only the
     * communication thread calls MPI. */
    if (level < MPI_THREAD_SERIALIZED) {
        if (!already)
            MPI_Finalize();
        return tsr__fail(TSR_ENODEV, "mpi_init: MPI gives thread level %d, the communication "
                                     "thread needs MPI_THREAD_SERIALIZED at least", level);
    }
    MPI_Comm comm;
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS) {
        if (!already)
            MPI_Finalize();
        return mpi_fail(TSR_ENODEV, "mpi_init: MPI_Comm_dup", rc);
    }
    MPI_Comm_rank(comm, &C.rank);
    MPI_Comm_size(comm, &C.size);
    C.comm = comm;
    C.level = level;
    C.owned = !already;
    atomic_store(&C.timeout, timeout);
    C.have_cpus = pthread_getaffinity_np(pthread_self(), sizeof C.cpus, &C.cpus) == 0;
    const char *mc = getenv("TESSERA_MPI_MAX_COUNT");
    if (mc && atoll(mc) > 0 && atoll(mc) < INT_MAX)
        C.max_count = (size_t)atoll(mc);
    C.inited = 1;
    return TSR_OK;
}

int tsr_mpi_finalize(void)
{
    if (!C.inited)
        return tsr__fail(TSR_ESTATE, "mpi_finalize: MPI is not initialized (tsr_mpi_init)");
    if (tsr__running())
        return tsr__fail(TSR_ESTATE, "mpi_finalize: call it after tsr_shutdown");
    tsr__comm_stop();
    if (C.abandoned) {
        /* MPI would progress them inside MPI_Finalize, on buffers and a
         * communicator in use: leave MPI as it is, the job must end. */
        C.inited = 0;
        C.finalized = 1;
        return tsr__fail(TSR_ETASK, "mpi_finalize: transfers that timed out are still in "
                                    "flight (a peer died or never joined): MPI is not "
                                    "finalized; end the job with a non-zero status");
    }
    MPI_Comm_free(&C.comm);
    C.inited = 0;
    C.finalized = 1;
    if (C.owned) {
        int rc = MPI_Finalize();
        if (rc != MPI_SUCCESS)
            return mpi_fail(TSR_ETASK, "mpi_finalize: MPI_Finalize", rc);
    }
    return TSR_OK;
}

int tsr_mpi_set_timeout(double seconds)
{
    double t;
    int rc = tsr__mpi_timeout(seconds, "mpi_set_timeout", &t);
    if (rc == TSR_OK)
        atomic_store(&C.timeout, t);
    return rc;
}

int tsr_mpi_set_ordered(int ordered)
{
    atomic_store(&C.ordered, ordered != 0);
    return TSR_OK;
}

/* ---- submission ---------------------------------------------------------- */

static size_t type_size(int type)
{
    return type == TSR_MPI_FLOAT ? sizeof(float) : type == TSR_MPI_DOUBLE ? sizeof(double) : 1;
}

static int submit_on(const char *fn, const char *name, tsr_data_t *h, tsr_mode_t mode,
                     comm_args_t *a);

static int submit(const char *fn, const char *name, tsr_handle_t id, tsr_mode_t mode,
                  comm_args_t *a)
{
    if (!C.inited)
        return tsr__fail(TSR_ESTATE, "%s: MPI is not initialized (tsr_mpi_init)", fn);
    tsr_data_t *h;
    int rc = tsr__handle_pin(id, fn, &h);
    if (rc)
        return rc;
    rc = submit_on(fn, name, h, mode, a);
    tsr__handle_unpin(h);
    return rc;
}

/* The transfer's task on pinned h. */
static int submit_on(const char *fn, const char *name, tsr_data_t *h, tsr_mode_t mode,
                     comm_args_t *a)
{
    if (tsr__rt.cfg.simulate)
        return tsr__fail(TSR_EINVAL, "%s: not in simulation (TESSERA_SIMULATE): a simulated "
                                     "run has no peers", fn);
    if (a->type < TSR_MPI_FLOAT || a->type > TSR_MPI_BYTE)
        return tsr__fail(TSR_EINVAL, "%s: unknown element type %d", fn, a->type);
    if (a->red < TSR_MPI_SUM || a->red > TSR_MPI_MAX)
        return tsr__fail(TSR_EINVAL, "%s: unknown reduction %d", fn, a->red);
    if (h->size % type_size(a->type))
        return tsr__fail(TSR_EINVAL, "%s: the handle's %zu bytes are not a whole number of "
                                     "%zu-byte elements", fn, h->size, type_size(a->type));
    /* deterministic mode: every all-reduce in rank order */
    a->ordered = atomic_load(&C.ordered) || tsr__rt.cfg.deterministic;
    a->timeout = atomic_load(&C.timeout);
    if (a->op == OP_ALLREDUCE || a->op == OP_BCAST)
        a->seq = atomic_fetch_add(&C.coll_seq, 1);
    return tsr__submit_internal_args(TSR_KIND_COMM, h, mode, name, a, sizeof *a, NULL);
}

static int check_peer(const char *fn, int peer, const char *what)
{
    if (C.inited && (peer < 0 || peer >= C.size))
        return tsr__fail(TSR_EINVAL, "%s: %s %d is not a rank of this job (0..%d)", fn, what,
                         peer, C.size - 1);
    return TSR_OK;
}

static int check_tag(const char *fn, int tag)
{
    return tag < 0 || tag >= ORDERED_TAG
               ? tsr__fail(TSR_EINVAL, "%s: tag %d is not in 0..%d", fn, tag, ORDERED_TAG - 1)
               : TSR_OK;
}

int tsr_mpi_send(tsr_handle_t h, int dest, int tag)
{
    int rc = check_peer("mpi_send", dest, "dest");
    if (rc || (rc = check_tag("mpi_send", tag)))
        return rc;
    comm_args_t a = {.op = OP_SEND, .peer = dest, .tag = tag, .type = TSR_MPI_BYTE};
    return submit("mpi_send", "mpi-send", h, TSR_R, &a);
}

int tsr_mpi_recv(tsr_handle_t h, int source, int tag)
{
    int rc = check_peer("mpi_recv", source, "source");
    if (rc || (rc = check_tag("mpi_recv", tag)))
        return rc;
    comm_args_t a = {.op = OP_RECV, .peer = source, .tag = tag, .type = TSR_MPI_BYTE};
    return submit("mpi_recv", "mpi-recv", h, TSR_W, &a);
}

int tsr_mpi_allreduce(tsr_handle_t h, int type, int op)
{
    comm_args_t a = {.op = OP_ALLREDUCE, .peer = -1, .type = type, .red = op};
    return submit("mpi_allreduce", "mpi-allreduce", h, TSR_RW, &a);
}

int tsr_mpi_bcast(tsr_handle_t h, int root)
{
    int rc = check_peer("mpi_bcast", root, "root");
    if (rc)
        return rc;
    comm_args_t a = {.op = OP_BCAST, .peer = root, .type = TSR_MPI_BYTE};
    return submit("mpi_bcast", "mpi-bcast", h, TSR_RW, &a);
}

/* ---- the communication thread --------------------------------------------- */

static MPI_Datatype mpi_type(int type)
{
    /* MPI_SUM is not defined on MPI_BYTE: bytes reduce as unsigned char. */
    return type == TSR_MPI_FLOAT ? MPI_FLOAT : type == TSR_MPI_DOUBLE ? MPI_DOUBLE
                                                                      : MPI_UNSIGNED_CHAR;
}

/* "allreduce of 4096 bytes with every rank" / "send of 8 bytes to rank 1" */
static void describe(const comm_op_t *o, char *buf, size_t len)
{
    const comm_args_t *a = &o->a;
    if (a->op == OP_SEND)
        snprintf(buf, len, "mpi send of %zu bytes to rank %d (tag %d)", o->bytes, a->peer, a->tag);
    else if (a->op == OP_RECV)
        snprintf(buf, len, "mpi recv of %zu bytes from rank %d (tag %d)", o->bytes, a->peer,
                 a->tag);
    else if (a->op == OP_BCAST)
        snprintf(buf, len, "mpi bcast of %zu bytes from root %d (collective %llu of %d ranks)",
                 o->bytes, a->peer, (unsigned long long)a->seq, C.size);
    else
        snprintf(buf, len, "mpi allreduce%s of %zu bytes (collective %llu of %d ranks)",
                 a->ordered ? " (ordered)" : "", o->bytes, (unsigned long long)a->seq, C.size);
}

/* Requests needed for `bytes` in pieces of at most INT_MAX elements. */
static int npieces(size_t bytes, size_t esize)
{
    size_t n = bytes / esize;
    size_t piece = C.max_count;
    return n == 0 ? 1 : (int)((n + piece - 1) / piece);
}

/* Post one kind of request over buf in pieces (elements of esize); each
 * piece's request goes to *reqs++. */
typedef int (*post_fn)(comm_op_t *o, void *buf, int count, MPI_Datatype dt, int peer,
                       MPI_Request *r);

static int post_isend(comm_op_t *o, void *buf, int count, MPI_Datatype dt, int peer,
                      MPI_Request *r)
{
    return MPI_Isend(buf, count, dt, peer, o->a.tag, C.comm, r);
}

static int post_irecv(comm_op_t *o, void *buf, int count, MPI_Datatype dt, int peer,
                      MPI_Request *r)
{
    return MPI_Irecv(buf, count, dt, peer, o->a.tag, C.comm, r);
}


static int post_isend_ord(comm_op_t *o, void *buf, int count, MPI_Datatype dt, int peer,
                          MPI_Request *r)
{
    (void)o;
    return MPI_Isend(buf, count, dt, peer, ORDERED_TAG, C.comm, r);
}

static int post_irecv_ord(comm_op_t *o, void *buf, int count, MPI_Datatype dt, int peer,
                          MPI_Request *r)
{
    (void)o;
    return MPI_Irecv(buf, count, dt, peer, ORDERED_TAG, C.comm, r);
}

static int post_iallreduce(comm_op_t *o, void *buf, int count, MPI_Datatype dt, int peer,
                           MPI_Request *r)
{
    (void)peer;
    return MPI_Iallreduce(MPI_IN_PLACE, buf, count, dt, o->a.red == TSR_MPI_MAX ? MPI_MAX
                                                                                : MPI_SUM,
                          C.comm, r);
}

static int post_ibcast(comm_op_t *o, void *buf, int count, MPI_Datatype dt, int peer,
                       MPI_Request *r)
{
    (void)o;
    return MPI_Ibcast(buf, count, dt, peer, C.comm, r);
}

static int post_pieces(comm_op_t *o, post_fn fn, unsigned char *buf, int peer)
{
    size_t esize = type_size(o->a.type);
    size_t n = o->bytes / esize, piece = C.max_count;
    MPI_Datatype dt = mpi_type(o->a.type);
    size_t done = 0;
    do {
        size_t c = n - done < piece ? n - done : piece;
        int rc = fn(o, buf + done * esize, (int)c, dt, peer, &o->reqs[o->nreq]);
        if (rc != MPI_SUCCESS)
            return rc;
        o->nreq++;
        done += c;
    } while (done < n);
    return MPI_SUCCESS;
}

/* dst[i] = dst[i] op src[i]: the ordered all-reduce's sum, rank after rank. */
static void combine(void *dst, const void *src, size_t bytes, int type, int red)
{
    if (type == TSR_MPI_FLOAT) {
        float *d = dst;
        const float *s = src;
        for (size_t i = 0; i < bytes / sizeof *d; i++)
            d[i] = red == TSR_MPI_SUM ? d[i] + s[i] : (s[i] > d[i] ? s[i] : d[i]);
    } else if (type == TSR_MPI_DOUBLE) {
        double *d = dst;
        const double *s = src;
        for (size_t i = 0; i < bytes / sizeof *d; i++)
            d[i] = red == TSR_MPI_SUM ? d[i] + s[i] : (s[i] > d[i] ? s[i] : d[i]);
    } else {
        unsigned char *d = dst;
        const unsigned char *s = src;
        for (size_t i = 0; i < bytes; i++)
            d[i] = red == TSR_MPI_SUM ? (unsigned char)(d[i] + s[i]) : (s[i] > d[i] ? s[i] : d[i]);
    }
}


/* dst = a + b, cut to len (the task's reason has room for 200 bytes). */
static void join(char *dst, size_t len, const char *a, const char *b)
{
    size_t n = 0;
    for (const char *p = a; *p && n + 1 < len; p++)
        dst[n++] = *p;
    for (const char *p = b; *p && n + 1 < len; p++)
        dst[n++] = *p;
    dst[n] = 0;
}

/* Complete o's task with `result` (a message for a failure) and forget the
 * task; the staging buffer stays with o. */
/* A transfer's span on the trace's communication track (tracing only; a
 * trace with holes beats a failed run when memory runs out). */
static void trace_op(const comm_op_t *o)
{
    if (!tsr__rt.tracing || !o->posted_ns)
        return;
    if (C.nev == C.capev) {
        size_t cap = C.capev ? 2 * C.capev : 1024;
        struct tsr_trace_event *ev = realloc(C.ev, cap * sizeof *ev);
        if (!ev)
            return;
        C.ev = ev;
        C.capev = cap;
    }
    struct tsr_trace_event *e = &C.ev[C.nev++];
    e->start_ns = o->posted_ns - tsr__rt.t0_ns;
    e->end_ns = tsr__now_ns() - tsr__rt.t0_ns;
    static const char *const op[] = {"mpi send", "mpi recv", "mpi allreduce", "mpi bcast"};
    snprintf(e->name, sizeof e->name, "%s %zu B", op[o->a.op], o->bytes);
}

size_t tsr__comm_trace(const struct tsr_trace_event **ev)
{
    *ev = C.ev;
    return C.nev;
}

void tsr__comm_trace_free(void)
{
    free(C.ev);
    C.ev = NULL;
    C.nev = C.capev = 0;
}

static void finish_task(comm_op_t *o, int result, const char *why)
{
    tsr_task_t t = o->t;
    if (!t)
        return;
    trace_op(o);
    tsr__mem_release(&o->req);
    if (result == TSR_RESULT_FAILED) {
        char d[160];
        describe(o, d, sizeof d);
        join(t->mreq.err, sizeof t->mreq.err, d, why);
    }
    o->t = NULL;
    tsr__task_complete(t, result, -1);
}

static void free_op(comm_op_t *o)
{
    free(o->stage);
    free(o->reqs);
    free(o);
}

static void mpi_reason(int err, char *buf, size_t len)
{
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(err, s, &n) != MPI_SUCCESS)
        snprintf(s, sizeof s, "error %d", err);
    snprintf(buf, len, ": MPI error: %.160s", s);
}

/* Start o: host access, staging copy, the first requests. false: o failed
 * (its task is complete) and is freed. */
static bool start(comm_op_t *o)
{
    char why[256];
    int mode = o->a.op == OP_SEND ? TSR_MEM_R : o->a.op == OP_RECV ? TSR_MEM_W : TSR_MEM_RW;
    int rc = tsr__handle_host_access(o->h, &o->req, mode);
    if (rc != TSR_OK) {
        /* No access: nothing to release. */
        tsr_task_t t = o->t;
        char d[160], why[256];
        describe(o, d, sizeof d);
        snprintf(why, sizeof why, ": no host access: %.200s", o->req.err);
        join(t->mreq.err, sizeof t->mreq.err, d, why);
        tsr__task_complete(t, TSR_RESULT_FAILED, -1);
        free_op(o);
        return false;
    }
    size_t esize = type_size(o->a.type);
    int root_ordered = o->a.op == OP_ALLREDUCE && o->a.ordered && C.rank == 0;
    size_t nstage = root_ordered ? (size_t)C.size : 1;
    int nreq = npieces(o->bytes, esize) * (root_ordered ? C.size : 1);
    o->stage = malloc(o->bytes * nstage + 1);
    o->reqs = malloc(sizeof *o->reqs * (size_t)nreq);
    if (!o->stage || !o->reqs) {
        finish_task(o, TSR_RESULT_FAILED, ": out of memory for the staging buffer");
        free_op(o);
        return false;
    }
    if (o->a.op != OP_RECV)
        memcpy(o->stage, o->req.ptr[0], o->bytes);
    o->posted_ns = tsr__now_ns();
    if (o->a.timeout > 0)
        o->deadline_ns = o->posted_ns + (uint64_t)(o->a.timeout * 1e9);
    switch (o->a.op) {
    case OP_SEND: rc = post_pieces(o, post_isend, o->stage, o->a.peer); break;
    case OP_RECV: rc = post_pieces(o, post_irecv, o->stage, o->a.peer); break;
    case OP_BCAST: rc = post_pieces(o, post_ibcast, o->stage, o->a.peer); break;
    default:
        if (!o->a.ordered || C.size == 1) {
            rc = C.size == 1 ? MPI_SUCCESS : post_pieces(o, post_iallreduce, o->stage, -1);
        } else if (root_ordered) {
            rc = MPI_SUCCESS;
            for (int r = 1; r < C.size && rc == MPI_SUCCESS; r++)
                rc = post_pieces(o, post_irecv_ord, o->stage + (size_t)r * o->bytes, r);
        } else {
            rc = post_pieces(o, post_isend_ord, o->stage, 0);
        }
    }
    if (rc != MPI_SUCCESS) {
        /* Requests already posted stay in flight: the op is abandoned. */
        mpi_reason(rc, why, sizeof why);
        finish_task(o, TSR_RESULT_FAILED, why);
        return o->nreq > 0 || (free_op(o), false);
    }
    return true;
}

/* o's requests are all complete: the next phase, or the end. Returns
 * whether o is done (its task complete). */
static bool advance(comm_op_t *o)
{
    if (!o->t)
        return true; /* abandoned: its last requests completed */
    if (o->a.op == OP_ALLREDUCE && o->a.ordered && C.size > 1 && o->phase == 0) {
        /* Gathered (rank 0) or sent (the others): rank 0 adds in rank
         * order, then everyone takes rank 0's result. */
        if (C.rank == 0)
            for (int r = 1; r < C.size; r++)
                combine(o->stage, o->stage + (size_t)r * o->bytes, o->bytes, o->a.type, o->a.red);
        o->phase = 1;
        o->nreq = 0;
        int rc = post_pieces(o, post_ibcast, o->stage, 0);
        /* its last collective call is posted: the next collective may go
         * (posted earlier, it could pass this broadcast on one rank and not
         * on another, and the ranks would pair different collectives) */
        C.next_coll++;
        if (rc != MPI_SUCCESS) {
            char why[256];
            mpi_reason(rc, why, sizeof why);
            finish_task(o, TSR_RESULT_FAILED, why);
            return o->nreq == 0;
        }
        return false;
    }
    if (o->a.op != OP_SEND)
        memcpy(o->req.ptr[0], o->stage, o->bytes);
    /* A cancelled collective took part (the ranks stay matched) but its
     * data came from a failed writer: the task reports the cancellation. */
    finish_task(o, atomic_load(&o->t->cancelled) ? TSR_RESULT_CANCELLED : TSR_RESULT_OK, NULL);
    return true;
}

/* Whether `o` may be posted now: point-to-point at once, collectives in
 * submission order, each once the one before has posted all its collective
 * calls (an ordered all-reduce's broadcast comes after its gather). */
static bool may_start(const comm_op_t *o, uint64_t next_coll)
{
    return (o->a.op != OP_ALLREDUCE && o->a.op != OP_BCAST) || o->a.seq == next_coll;
}

/* An ordered all-reduce on more than one rank posts its collective call
 * (the broadcast) only when its gather is complete (advance). */
static bool two_phase(const comm_op_t *o)
{
    return o->a.op == OP_ALLREDUCE && o->a.ordered && C.size > 1;
}

static bool any_startable(const comm_op_t *waiting)
{
    for (; waiting; waiting = waiting->next)
        if (may_start(waiting, C.next_coll))
            return true;
    return false;
}

static void *comm_thread(void *arg)
{
    (void)arg;
    comm_op_t *waiting = NULL; /* ready, not yet posted (collectives out of order) */
    comm_op_t *active = C.abandoned; /* posted; abandoned ones too */
    uint64_t stop_ns = 0;
    uint64_t idle_since = 0; /* since when polls complete nothing */
    C.abandoned = NULL;
    for (;;) {
        pthread_mutex_lock(&C.m);
        /* Collectives waiting for an earlier one can start only once it
         * arrives in the queue: they do not keep the thread awake. */
        while (!C.queue && !active && !C.stop && !any_startable(waiting))
            pthread_cond_wait(&C.cv, &C.m);
        comm_op_t *got = C.queue;
        C.queue = C.queue_tail = NULL;
        bool stop = C.stop;
        pthread_mutex_unlock(&C.m);
        /* Stop once nothing is left but abandoned transfers (a peer that
         * timed out): those get the timeout once more to complete (a late
         * peer), then stay with MPI, and tsr_mpi_finalize refuses. */
        bool live = waiting != NULL;
        for (comm_op_t *o = active; o && !live; o = o->next)
            live = o->t != NULL;
        if (stop && !got && !live) {
            if (!stop_ns)
                stop_ns = tsr__now_ns();
            /* a grace of the timeout, at most 5 s: shutdown must not wait
             * long for a peer that is gone */
            double grace = atomic_load(&C.timeout);
            grace = grace > 5.0 ? 5.0 : grace;
            if (!active || grace <= 0 || tsr__now_ns() - stop_ns > (uint64_t)(grace * 1e9))
                break;
        }

        while (got) {
            comm_op_t *o = got;
            got = got->next;
            /* A cancelled send or recv does not go out: its peer's task
             * fails at its timeout. A collective still takes part. */
            if ((o->a.op == OP_SEND || o->a.op == OP_RECV) && atomic_load(&o->t->cancelled)) {
                tsr__task_complete(o->t, TSR_RESULT_CANCELLED, -1);
                free(o);
                continue;
            }
            /* In arrival order: point-to-point transfers between two ranks
             * on one tag match in the order they are posted. */
            o->next = NULL;
            comm_op_t **tail = &waiting;
            while (*tail)
                tail = &(*tail)->next;
            *tail = o;
        }
        bool progress = true;
        while (progress) {
            progress = false;
            for (comm_op_t **p = &waiting; *p;) {
                comm_op_t *o = *p;
                if (!may_start(o, C.next_coll)) {
                    p = &o->next;
                    continue;
                }
                *p = o->next;
                if (o->a.op == OP_ALLREDUCE || o->a.op == OP_BCAST) {
                    if (!two_phase(o))
                        C.next_coll++; /* else at its broadcast (advance) */
                    progress = true;
                }
                if (start(o)) {
                    o->next = active;
                    active = o;
                }
            }
        }

        bool any = false;
        uint64_t now = tsr__now_ns();
        for (comm_op_t **p = &active; *p;) {
            comm_op_t *o = *p;
            int flag = 0;
            int rc = MPI_Testall(o->nreq, o->reqs, &flag, MPI_STATUSES_IGNORE);
            bool done = false;
            if (rc != MPI_SUCCESS) {
                char why[256];
                mpi_reason(rc, why, sizeof why);
                finish_task(o, TSR_RESULT_FAILED, why);
                done = true; /* its requests are freed or failed: nothing to poll */
            } else if (flag) {
                done = advance(o);
                any = true;
            } else if (o->t && o->deadline_ns && now > o->deadline_ns) {
                char why[256];
                snprintf(why, sizeof why, ": timed out after %g s (TESSERA_MPI_TIMEOUT), a "
                                          "peer did not take part", o->a.timeout);
                finish_task(o, TSR_RESULT_FAILED, why);
                any = true; /* abandoned: polled until MPI completes it */
            }
            if (done) {
                *p = o->next;
                free_op(o);
            } else {
                p = &o->next;
            }
        }
        if (!any && active) {
            /* Transfers in flight, none finished. MPI progresses only
             * inside our calls (a non-blocking collective advances a round
             * per test), so poll at once a few hundred times, yielding the
             * core to workers; then every 50 µs, so that a transfer waiting
             * for a slow peer costs the workers little CPU. */
            uint64_t t = tsr__now_ns();
            if (!idle_since)
                idle_since = t;
            if (t - idle_since < 50000000) {
                sched_yield();
            } else {
                struct timespec ts = {0, 50000};
                nanosleep(&ts, NULL);
            }
        } else {
            idle_since = 0;
        }
    }
    /* Abandoned transfers: MPI may still write their staging buffers. A
     * later runtime's thread polls them again. */
    C.abandoned = active;
    return NULL;
}

void tsr__comm_ready(tsr_task_t t)
{
    comm_op_t *o = calloc(1, sizeof *o);
    if (!o || !C.inited) {
        free(o);
        snprintf(t->mreq.err, sizeof t->mreq.err, "mpi: %s",
                 o ? "MPI was finalized" : "out of memory");
        tsr__task_complete(t, TSR_RESULT_FAILED, -1);
        return;
    }
    memcpy(&o->a, t->args, sizeof o->a);
    o->t = t;
    o->h = t->data[0];
    o->bytes = t->sizes[0];
    pthread_mutex_lock(&C.m);
    int rc = 0;
    if (!C.running) {
        C.stop = false;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        if (C.have_cpus)
            pthread_attr_setaffinity_np(&attr, sizeof C.cpus, &C.cpus);
        rc = pthread_create(&C.thread, &attr, comm_thread, NULL);
        pthread_attr_destroy(&attr);
        C.running = rc == 0;
    }
    if (rc == 0) {
        if (C.queue_tail)
            C.queue_tail->next = o;
        else
            C.queue = o;
        C.queue_tail = o;
        pthread_cond_signal(&C.cv);
    }
    pthread_mutex_unlock(&C.m);
    if (rc != 0) {
        snprintf(t->mreq.err, sizeof t->mreq.err, "mpi: cannot start the communication thread");
        free(o);
        tsr__task_complete(t, TSR_RESULT_FAILED, -1);
    }
}

void tsr__comm_stop(void)
{
    pthread_mutex_lock(&C.m);
    bool running = C.running;
    C.stop = true;
    pthread_cond_signal(&C.cv);
    pthread_mutex_unlock(&C.m);
    if (running)
        pthread_join(C.thread, NULL);
    pthread_mutex_lock(&C.m);
    C.running = false;
    pthread_mutex_unlock(&C.m);
}
