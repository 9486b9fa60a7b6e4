/* floor.c — the floor of the granularity benchmark: what handing tasks from
 * one submitting thread to `workers` polling threads costs on this machine
 * with no runtime at all, so that Tessera's efficiency can be read against
 * the best any runtime could reach here (not only against StarPU's).
 *
 * The submitter writes each task (its spin time) into an array and
 * publishes it by bumping one counter; workers, bound to cores 0..w-1 as
 * Tessera's are, claim the next published slot with a compare-and-swap,
 * spin, and count it done; idle workers poll the counter, yielding every
 * 128 polls as Tessera's do. No dependencies, no data, no allocation, no
 * timing per task: the cost left is the cache lines the two counters and
 * the slots move between cores, and the core the submitter shares.
 *
 * Must never: stand in for a runtime in any other benchmark (it runs only
 * independent tasks), or print.
 */
#include "bench_runtime.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define relax() _mm_pause()
#else
#define relax() ((void)0)
#endif

typedef struct floor_run {
    double *spin;                /* (ntasks) microseconds per task */
    int ntasks;
    _Alignas(64) atomic_int published;
    _Alignas(64) atomic_int next;
    _Alignas(64) atomic_int done;
    atomic_bool stop;
} floor_run_t;

typedef struct floor_worker {
    floor_run_t *run;
    int cpu;
} floor_worker_t;

static void *floor_worker(void *arg)
{
    floor_worker_t *fw = arg;
    floor_run_t *r = fw->run;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(fw->cpu, &one);
    (void)pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    unsigned polls = 0;
    while (!atomic_load_explicit(&r->stop, memory_order_acquire)) {
        int i = atomic_load_explicit(&r->next, memory_order_relaxed);
        if (i < atomic_load_explicit(&r->published, memory_order_acquire) &&
            atomic_compare_exchange_weak(&r->next, &i, i + 1)) {
            bench_spin(r->spin[i]);
            atomic_fetch_add_explicit(&r->done, 1, memory_order_release);
            continue;
        }
        if (++polls % 128 == 0)
            sched_yield();
        else
            relax();
    }
    return NULL;
}

int bench_floor_spin(int workers, double us, int ntasks, double *seconds)
{
    enum { MAXW = 256 };
    if (workers < 1 || workers > MAXW || ntasks < 1)
        return -1;
    floor_run_t *r = aligned_alloc(64, sizeof *r);
    double *spin = malloc((size_t)ntasks * sizeof *spin);
    if (!r || !spin) {
        free(r);
        free(spin);
        return -1;
    }
    r->spin = spin;
    r->ntasks = ntasks;
    atomic_init(&r->published, 0);
    atomic_init(&r->next, 0);
    atomic_init(&r->done, 0);
    atomic_init(&r->stop, false);
    int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    floor_worker_t fw[MAXW];
    pthread_t th[MAXW];
    int started = 0;
    for (int k = 0; k < workers; k++) {
        fw[k] = (floor_worker_t){.run = r, .cpu = ncpu > 0 ? k % ncpu : 0};
        if (pthread_create(&th[k], NULL, floor_worker, &fw[k]) != 0)
            break;
        started++;
    }
    int rc = started == workers ? 0 : -1;
    if (rc == 0) {
        double t0 = bench_now();
        for (int i = 0; i < ntasks; i++) {
            spin[i] = us;
            atomic_store_explicit(&r->published, i + 1, memory_order_release);
        }
        unsigned polls = 0;
        while (atomic_load_explicit(&r->done, memory_order_acquire) < ntasks)
            if (++polls % 128 == 0)
                sched_yield();
            else
                relax();
        *seconds = bench_now() - t0;
    }
    atomic_store_explicit(&r->stop, true, memory_order_release);
    for (int k = 0; k < started; k++)
        pthread_join(th[k], NULL);
    free(spin);
    free(r);
    return rc;
}
