/* runtime/simulate.c — the simulation driver (runtime/driver.h): the node
 * a platform file describes (runtime/platform.h), run in virtual time.
 *
 * There are no threads. Each worker is a state machine driven by events of
 * the virtual clock (memory/vclock.h), mirroring a threads-driver worker:
 * idle until notified; a turn fills its pipeline from the policy (asking
 * the directory for each task's data, whose phantom copies complete as
 * events), then runs its first task whose data is there: a completion
 * event at now + the task's duration + the platform's task overhead, at
 * which the task's data is released and the task completed, and the
 * worker takes its next turn. The application's thread runs the events
 * whenever it waits, until what it waits for holds.
 *
 * A GPU worker has its node's compute lanes (TESSERA_CUDA_STREAMS, as the
 * threads driver): up to that many tasks run at once, as kernels queued on
 * different streams.  What overlaps is the host's part of a task (the
 * device's launch_us: launch and the host round trip that orders it); the
 * kernels themselves take the device one after another (a task's kernel
 * starts when both its launch is done and the previous kernel has ended).
 * With one lane that is exactly launch + kernel per task, in turn.
 *
 * A task's duration is what the performance models say (the history of
 * this machine where the platform asks for it and has one, else the
 * platform's rate model, installed as the models' prior), so that the
 * policies read exactly the durations the simulation uses. Nothing feeds
 * the models back. With simulate_exec, the implementation really runs at
 * the completion event: a CPU implementation (also for a simulated GPU,
 * whose phantom memory is host-addressable), on the replicas' real bytes.
 *
 * Must never: start a thread or read the wall clock; base a decision on
 * an address or on anything but the order of calls and the platform (two
 * runs of a program give the same events); wait forever (a wait whose
 * condition cannot become true with no event left fails).
 */
#include "runtime/driver.h"
#include "runtime/internal.h"
#include "runtime/perfmodel.h"
#include "runtime/perfmodel_store.h"
#include "runtime/platform.h"
#include "runtime/splitmix.h"

#include "kernels/gemm.h"
#include "memory/vclock.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One worker's state between events. */
typedef struct simw {
    bool idle;          /* nothing to do: a notify gives it a turn */
    bool turn_queued;   /* a turn event is scheduled */
    bool waiting;       /* holds tasks, none of whose data is there */
    int origin;         /* its turn was passed on by a worker that could not
                           take the queued tasks: the first such, or -1 */
    int nlanes;         /* tasks it may run at once: 1, or a GPU's compute lanes */
    int nrunning;       /* lanes with a completion event scheduled */
    tsr_task_t running[TSR_PIPE_MAX]; /* by lane; NULL: free */
    uint64_t run_start[TSR_PIPE_MAX];
    uint64_t dev_free;  /* when the device's last queued kernel ends */
    struct simlane {    /* a lane's completion event argument */
        tsr_worker_t *w;
        int lane;
    } lane[TSR_PIPE_MAX];
    uint64_t wait_since;
} simw_t;

static struct {
    tsr_platform_t plat;
    bool clock_on;
    simw_t *w;
    uint64_t draws;     /* the stream durations are drawn from (splitmix) */
} sim;

/* ---- durations ----------------------------------------------------------------- */

/* The rate model of the platform: the performance models' prior. */
static double sim_prior(const tsr_codelet_t *cl, int device_kind, const size_t *sizes,
                        int nbuffers, const void *args)
{
    return tsr__platform_task_seconds(&sim.plat, device_kind, cl, sizes, nbuffers, args,
                                      tsr__rt.cfg.cuda_fp32);
}

/* The longest task, and the latest virtual time, a run accepts. Beyond
 * them the clock would saturate (llround past INT64_MAX) and a step would
 * "take" a constant: a model or platform gives durations no device has. */
#define MAX_TASK_S 1e6
#define MAX_VIRTUAL_NS ((uint64_t)1 << 62) /* 146 years */

/* Virtual nanoseconds t takes on w: the models' estimate (what policies
 * read), plus the runtime's own work per task; UINT64_MAX (with the seconds
 * in *secs) beyond MAX_TASK_S. */
static uint64_t task_ns(const tsr_worker_t *w, tsr_task_t t, double *secs)
{
    tsr_perfmodel_info_t info;
    double s;
    /* A measured footprint: one of its recorded durations, drawn by a
     * deterministic stream (the n-th draw of a run is always the same), so
     * that sums and critical paths carry the measured spread; the policies
     * still read the models' robust estimate, as in a real run. */
    bool drawn = sim.plat.machine_models &&
                 tsr__perfmodel_draw(t->cl, w->device_kind, t->sizes, t->nbuffers, t->args,
                                     tsr__splitmix_unit(&sim.draws), &s);
    if (!drawn)
        s = tsr__perfmodel_estimate(t->cl, w->device_kind, t->sizes, t->nbuffers, t->args,
                                    &info)
                ? info.seconds
                : sim_prior(t->cl, w->device_kind, t->sizes, t->nbuffers, t->args);
    s += sim.plat.task_overhead;
    *secs = s;
    if (s > MAX_TASK_S)
        return UINT64_MAX;
    if (!(s > 0) || !isfinite(s))
        return 0;
    return (uint64_t)llround(s * 1e9);
}

/* ---- workers as state machines ------------------------------------------------- */

static void sim_turn(void *arg);
static void sim_complete(void *arg);

/* Give w a turn now (once: a queued turn covers every reason for one).
 * origin: the worker that began passing a turn on, or -1. */
static void queue_turn(tsr_worker_t *w, int origin)
{
    simw_t *s = &sim.w[w->id];
    s->idle = false;
    s->origin = s->turn_queued && s->origin < 0 ? -1 : origin;
    if (s->turn_queued)
        return;
    s->turn_queued = true;
    if (tsr__vclock_at(tsr__vclock_now(), sim_turn, w) != TSR_OK) {
        /* No memory for the event: the worker stays idle; a later
         * notify tries again. */
        s->turn_queued = false;
        s->idle = true;
    }
}

/* An idle worker other than `self` gets a turn (the lowest-numbered, as
 * the threads driver wakes the first sleeper). */
static void wake_one_idle(int self)
{
    for (int i = 0; i < tsr__rt.nworkers; i++)
        if (i != self && sim.w[i].idle) {
            queue_turn(&tsr__rt.workers[i], -1);
            return;
        }
}

/* w took nothing while tasks stay queued: they may be for workers of
 * another kind, all idle (no worker here polls, as a thread would). The
 * turn goes round the idle workers after w, once, back to where it began. */
static void pass_turn_on(tsr_worker_t *w, int origin)
{
    int n = tsr__rt.nworkers;
    if (origin < 0)
        origin = w->id;
    for (int k = 1; k < n; k++) {
        int i = (w->id + k) % n;
        if (i == origin)
            return;
        if (sim.w[i].idle) {
            queue_turn(&tsr__rt.workers[i], origin);
            return;
        }
    }
}

/* The directory's request for t is granted (an event, or a release). */
static void sim_data_ready(tsr_mem_req_t *r)
{
    tsr_task_t t = r->arg;
    tsr_worker_t *w = &tsr__rt.workers[t->run_worker];
    atomic_store(&t->data_state, DATA_READY);
    if (sim.w[w->id].nrunning < sim.w[w->id].nlanes)
        queue_turn(w, -1);
}

/* When t, started now on w and taking ns, ends: its host part (the
 * device's launch time, at most ns) overlaps other lanes' tasks, its
 * kernel waits for the device's previous one (one lane: now + ns). */
static uint64_t task_end(tsr_worker_t *w, uint64_t now, uint64_t ns)
{
    simw_t *s = &sim.w[w->id];
    double launch = w->device_kind >= 0 && w->device_kind < TSR_DEVICE_KINDS
                        ? sim.plat.device[w->device_kind].launch
                        : 0;
    uint64_t host = (uint64_t)llround(launch * 1e9);
    host = host < ns ? host : ns;
    uint64_t start = now + host > s->dev_free ? now + host : s->dev_free;
    s->dev_free = start + (ns - host);
    return s->dev_free;
}

/* Start t on w, on a free lane: its completion is an event. False when t
 * failed instead (w may take the next one). */
static bool run_task(tsr_worker_t *w, tsr_task_t t)
{
    simw_t *s = &sim.w[w->id];
    uint64_t now = tsr__vclock_now();
    double secs = 0;
    uint64_t ns = task_ns(w, t, &secs);
    uint64_t queued = s->dev_free > now ? s->dev_free - now : 0;
    if (now > MAX_VIRTUAL_NS || ns > MAX_VIRTUAL_NS - now - queued) {
        tsr__mem_release(&t->mreq);
        snprintf(t->mreq.err, sizeof t->mreq.err,
                 "a simulated duration of %g s %s: the platform's rates (or the models) "
                 "are not physical", secs,
                 ns == UINT64_MAX ? "(more than 1e6 s)" : "runs past the virtual clock's end");
        tsr__worker_fail(w, t, TSR_EINVAL);
        return false;
    }
    int lane = 0;
    while (s->running[lane])
        lane++;
    assert(lane < s->nlanes);
    uint64_t dev_free = s->dev_free;
    s->running[lane] = t;
    s->run_start[lane] = now;
    s->nrunning++;
    if (tsr__vclock_at(task_end(w, now, ns), sim_complete, &s->lane[lane]) != TSR_OK) {
        s->running[lane] = NULL;
        s->nrunning--;
        s->dev_free = dev_free;
        tsr__mem_release(&t->mreq);
        snprintf(t->mreq.err, sizeof t->mreq.err, "no memory for a simulation event");
        tsr__worker_fail(w, t, TSR_ENOMEM);
        return false;
    }
    return true;
}

/* What a threads-driver worker does in one pass of its loop: keep the
 * pipeline full, then run a task whose data is there; idle when there is
 * nothing. origin: as in pass_turn_on. Runs with tsr__tl_worker = w. */
static void step(tsr_worker_t *w, int origin)
{
    simw_t *s = &sim.w[w->id];
    bool took = false;
    for (;;) {
        while (w->ninflight + s->nrunning < w->depth) {
            long left;
            tsr_task_t t = tsr__worker_next(w, &left);
            if (!t)
                break;
            took = true;
            /* Tasks still queued beside an idle worker: pass one on. */
            if (left > 0)
                wake_one_idle(w->id);
            if (tsr__worker_take(w, t, sim_data_ready))
                w->inflight[w->ninflight++] = t;
        }
        if (s->nrunning >= s->nlanes)
            return;
        int i = tsr__worker_first_ready(w);
        if (i < 0) {
            if (w->ninflight > 0) {
                /* sim_data_ready gives the next turn. */
                if (!s->waiting) {
                    s->waiting = true;
                    s->wait_since = tsr__vclock_now();
                }
                return;
            }
            s->idle = true;
            if (!took && atomic_load(&tsr__rt.nqueued) > 0)
                pass_turn_on(w, origin);
            return;
        }
        if (s->waiting) {
            w->wait_ns += tsr__vclock_now() - s->wait_since;
            s->waiting = false;
        }
        tsr_task_t t = tsr__worker_remove(w, i);
        int status = atomic_load(&t->mreq.status);
        if (status != TSR_OK) {
            tsr__worker_fail(w, t, status);
            continue;
        }
        /* started (with a lane left: look for the next), or failed */
        if (run_task(w, t) && s->nrunning >= s->nlanes)
            return;
    }
}

/* Event: w's turn (woken by a push, its data, or a passed-on turn). */
static void sim_turn(void *arg)
{
    tsr_worker_t *w = arg;
    simw_t *s = &sim.w[w->id];
    int origin = s->origin;
    s->turn_queued = false;
    s->origin = -1;
    int saved = tsr__tl_worker;
    tsr__tl_worker = w->id;
    step(w, origin);
    tsr__tl_worker = saved;
}

/* simulate_exec: run t's CPU implementation on its replicas (a simulated
 * GPU's phantom memory is host memory). 0 or the implementation's status
 * in *rc; false when t already failed (and is complete). */
static bool execute(tsr_worker_t *w, tsr_task_t t, int *rc)
{
    void *bufs[TSR_MAX_BUFFERS];
    *rc = 0;
    if (tsr__worker_buffers(w, t, bufs) != TSR_OK)
        return false;
    tsr_kernel_fn impl = t->cl->impl[TSR_DEVICE_CPU];
    if (!impl) {
        snprintf(t->mreq.err, sizeof t->mreq.err,
                 "simulate_exec: codelet '%s' has no CPU implementation to execute",
                 t->cl->name ? t->cl->name : "");
        *rc = TSR_ENODEV;
        return true;
    }
    tsr_exec_t exec = {
        .worker = w->id,
        .device_kind = TSR_DEVICE_CPU,
        .nbuffers = t->nbuffers,
        .sizes = t->sizes,
        .memory_node = w->node,
        .cuda_fp32 = tsr__rt.cfg.cuda_fp32,
        .deterministic = tsr__rt.cfg.deterministic,
    };
    /* On the application's thread, as on a one-core worker: a GEMM starts
     * no thread team; the thread's own count comes back after. */
    int threads = tsr_cpu_gemm_set_thread_count(1);
    *rc = tsr__worker_run_impl(t, impl, bufs, &exec);
    if (threads > 0)
        tsr_cpu_gemm_set_thread_count(threads);
    return true;
}

/* Event: the task on one of w's lanes ends: execute it (simulate_exec),
 * finish it, and take the next turn at once (as a thread would). */
static void sim_complete(void *arg)
{
    const struct simlane *l = arg;
    tsr_worker_t *w = l->w;
    simw_t *s = &sim.w[w->id];
    tsr_task_t t = s->running[l->lane];
    int saved = tsr__tl_worker;
    tsr__tl_worker = w->id;
    int rc = 0;
    bool live = tsr__rt.cfg.simulate_exec ? execute(w, t, &rc) : true;
    s->running[l->lane] = NULL;
    s->nrunning--;
    if (live)
        tsr__worker_finish(w, t, rc, s->run_start[l->lane]);
    step(w, -1);
    tsr__tl_worker = saved;
}

/* ---- the driver ------------------------------------------------------------------ */

/* Undo sim_open: the models' prior and key, the virtual clock. */
static void sim_close(void)
{
    tsr__perfmodel_set_prior(NULL, false);
    tsr__pmstore_set_machine(NULL);
    if (sim.clock_on)
        tsr__vclock_stop();
    sim.clock_on = false;
}

/* Before the memory nodes: the platform, the virtual clock (time 0), the
 * phantom nodes to open (with the configuration's host_mem, disk_mem and
 * simulate_no_disk in place of the platform's), the models' key and
 * prior. */
static int sim_open(tsr_mem_config_t *mc)
{
    int rc = tsr__platform_load(tsr__rt.cfg.simulate, &sim.plat);
    if (rc != TSR_OK)
        return rc;
    rc = tsr__vclock_start();
    if (rc != TSR_OK)
        return tsr__fail(rc, "init: simulation: cannot start the virtual clock");
    sim.clock_on = true;
    sim.draws = 0;
    /* Time starts at 0 for everything the runtime reports. */
    tsr__rt.t0_ns = tsr__mem_now_ns();
    sim.plat.mem.exec = tsr__rt.cfg.simulate_exec != 0;
    /* The configuration's memory limits replace the platform's (a projection
     * with less host memory, or without the disk tier). */
    const tsr_config_t *cfg = &tsr__rt.cfg;
    if (cfg->host_mem)
        sim.plat.mem.host_capacity = cfg->host_mem;
    if (cfg->simulate_no_disk)
        sim.plat.mem.disk.capacity = 0;
    else if (cfg->disk_mem && sim.plat.mem.disk.capacity)
        sim.plat.mem.disk.capacity = cfg->disk_mem < TSR_PHANTOM_MAX_DISK ? cfg->disk_mem
                                                                         : TSR_PHANTOM_MAX_DISK;
    mc->phantom = &sim.plat.mem;
    /* The platform's devices, not this machine's. */
    mc->nsim = 0;
    mc->ncuda = 0;
    mc->host_capacity = sim.plat.mem.host_capacity;
    /* The models: this machine's, another machine's copied into the model
     * directory (models_key), or the platform's own (its rates). */
    tsr__pmstore_set_machine(!sim.plat.machine_models ? sim.plat.name
                             : sim.plat.models_key[0] ? sim.plat.models_key
                                                      : NULL);
    tsr__perfmodel_set_prior(sim_prior, sim.plat.machine_models);
    return TSR_OK;
}

/* The worker table, every worker idle. */
static int sim_start(void)
{
    const tsr_config_t *cfg = &tsr__rt.cfg;
    int ncpu = cfg->ncpu > 0 ? cfg->ncpu : cfg->ncpu < 0 ? 0 : sim.plat.ncpu;
    int rc = tsr__workers_table(ncpu, 0);
    if (rc != TSR_OK)
        return rc;
    sim.w = calloc((size_t)tsr__rt.nworkers, sizeof *sim.w);
    if (!sim.w)
        return tsr__fail(TSR_ENOMEM, "init: cannot allocate %d workers", tsr__rt.nworkers);
    for (int i = 0; i < tsr__rt.nworkers; i++) {
        tsr_worker_t *w = &tsr__rt.workers[i];
        simw_t *s = &sim.w[i];
        s->idle = true;
        s->origin = -1;
        int lanes = w->device_kind == TSR_DEVICE_CUDA ? tsr__mem_node(w->node)->exec_lanes : 1;
        s->nlanes = lanes < 1 ? 1 : lanes > TSR_PIPE_MAX ? TSR_PIPE_MAX : lanes;
        for (int l = 0; l < TSR_PIPE_MAX; l++)
            s->lane[l] = (struct simlane){w, l};
    }
    return TSR_OK;
}

static int sim_launch(void) { return TSR_OK; }

/* Every task is complete: the workers hold nothing. */
static void sim_stop(void)
{
    for (int i = 0; i < tsr__rt.nworkers; i++)
        tsr__worker_scratch_release(&tsr__rt.workers[i]);
}

/* Undo sim_start. */
static void sim_free(void)
{
    tsr__workers_table_free();
    free(sim.w);
    sim.w = NULL;
}

/* A push for `target`, or for anyone (-1): an idle worker gets a turn. */
static void sim_notify(int target)
{
    if (target >= 0 && target < tsr__rt.nworkers) {
        if (sim.w[target].idle)
            queue_turn(&tsr__rt.workers[target], -1);
        return;
    }
    wake_one_idle(-1);
}

/* Run events until pred holds. With no event left, nothing can change
 * any more: the simulated program deadlocked. */
static int sim_wait(bool (*pred)(void *), void *arg, const char *what)
{
    while (!pred(arg))
        if (!tsr__vclock_step())
            return tsr__fail(TSR_ESTATE,
                             "%s: the simulated program cannot go on: %ld task(s) pending "
                             "and no event left at virtual time %.9f s (a task waits for "
                             "a handle the application holds, or for memory never freed)",
                             what, atomic_load(&tsr__rt.pending),
                             (double)(tsr__vclock_now() - tsr__rt.t0_ns) * 1e-9);
    return TSR_OK;
}

/* Waiters run the events themselves: nobody sleeps. */
static void sim_wake(void) {}

const tsr_driver_t tsr__driver_simulate = {
    .name = "simulate",
    .open = sim_open,
    .close = sim_close,
    .start = sim_start,
    .launch = sim_launch,
    .stop = sim_stop,
    .free = sim_free,
    .notify = sim_notify,
    .wait = sim_wait,
    .wake = sim_wake,
    .measures = false,
};
