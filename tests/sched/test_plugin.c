/* Scheduler plug-ins: the example plug-in (examples/sched-plugin, policy
 * "affinity") loaded by path, by name through TESSERA_SCHED_PATH and from
 * the installed plug-in directory, running random task graphs whose results
 * are compared with a sequential execution, on CPU workers and on CPU + 2
 * simulated accelerators; and every way a plug-in can be refused (missing
 * file, not a shared object, no symbol, no pop, a pointer exported instead
 * of the policy, an unknown name), each with a message saying why.
 *
 * The plug-ins are built by examples/sched-plugin/meson.build; the test
 * finds them from its own executable's path (the build directory is the
 * first directory above it holding meson-private/). */
#include "../runtime/util.h"

#include <ftw.h>
#include <limits.h>
#include <link.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PLUGIN_NAME "affinity"
#define PLUGIN_FILE "libtessera-sched-" PLUGIN_NAME ".so"

/* ---- where things are ---------------------------------------------------- */

/* The build directory: the first directory above this executable holding
 * meson-private/. */
static void build_root(char *out, size_t size)
{
    char dir[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    cr_assert(n > 0, "cannot read /proc/self/exe");
    dir[n] = '\0';
    char *slash;
    while ((slash = strrchr(dir, '/')) && slash != dir) {
        *slash = '\0';
        char probe[PATH_MAX + 16];
        snprintf(probe, sizeof probe, "%s/meson-private", dir);
        if (access(probe, F_OK) == 0) {
            snprintf(out, size, "%s", dir);
            return;
        }
    }
    cr_assert(0, "no meson build directory above this test executable");
}

/* Each test decides the policy itself: what the caller's environment
 * says (TESSERA_SCHED=… make test) must not change what is checked. */
static void fresh_env(void)
{
    unsetenv("TESSERA_SCHED");
    unsetenv("TESSERA_SCHED_PATH");
    unsetenv("AFFINITY_WEIGHT");
    unsetenv("AFFINITY_STATS");
}

/* A file of examples/sched-plugin (sub: "" or "broken/") in the build
 * directory, which must exist. */
static void plugin_file(char *out, size_t size, const char *sub, const char *file)
{
    char root[PATH_MAX];
    build_root(root, sizeof root);
    int n = snprintf(out, size, "%s/examples/sched-plugin/%s%s", root, sub, file);
    cr_assert(n > 0 && (size_t)n < size);
    cr_assert_eq(access(out, R_OK), 0, "%s is missing: build the project (ninja) first", out);
}

static void plugin_dir(char *out, size_t size, const char *sub)
{
    plugin_file(out, size, sub, "");
    size_t len = strlen(out);
    if (len > 1 && out[len - 1] == '/')
        out[len - 1] = '\0';
}

/* A fresh temporary directory, removed by rm_tree. */
static void make_tmpdir(char *out, size_t size)
{
    const char *base = getenv("TMPDIR");
    snprintf(out, size, "%s/tessera-plugin-XXXXXX", base && *base ? base : "/tmp");
    cr_assert_not_null(mkdtemp(out), "mkdtemp %s", out);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void rm_tree(const char *dir) { nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS); }

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

/* Init with `sched` on two CPU workers; the status (the runtime stopped
 * again if it started). */
static int try_init(const char *sched)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 2;
    cfg.bind = 0;
    cfg.ncuda = 0;
    cfg.sched = sched;
    int rc = tsr_init(&cfg);
    if (rc == TSR_OK)
        stop_runtime();
    return rc;
}

/* ---- a random task graph, checked against a sequential run -------------- */

#define NHANDLES 24
#define WORDS 8
#define NTASKS 1200
#define MAXBUF 4

typedef struct {
    uint64_t id;
    int nbuf;
    int mode[MAXBUF];
} dag_args_t;

static uint64_t mixlog[NTASKS], reflog[NTASKS];
static atomic_long ran_on[64];

static uint64_t hash64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* An order-sensitive update: what a task reads goes into `mix` (logged, so
 * a task reading another version than in sequence shows), what it writes
 * depends on it. The reference calls the same function in submission
 * order. */
static void update(void **b, const dag_args_t *a, uint64_t *log)
{
    uint64_t mix = hash64(a->id + 1);
    for (int i = 0; i < a->nbuf; i++)
        if (a->mode[i] == TSR_R || a->mode[i] == TSR_RW) {
            const uint64_t *v = b[i];
            for (int k = 0; k < WORDS; k++)
                mix = hash64(mix ^ v[k]);
        }
    for (int i = 0; i < a->nbuf; i++) {
        uint64_t *v = b[i];
        for (int k = 0; k < WORDS; k++) {
            if (a->mode[i] == TSR_W)
                v[k] = mix + (uint64_t)k;
            else if (a->mode[i] == TSR_RW)
                v[k] = v[k] * 6364136223846793005ull + mix + (uint64_t)k;
            else if (a->mode[i] == TSR_COMMUTE)
                v[k] += hash64(a->id * 31 + (uint64_t)k); /* order-free */
        }
    }
    log[a->id] = mix;
}

static int dag_kernel(void **b, const void *args, const tsr_exec_t *e)
{
    update(b, args, mixlog);
    atomic_fetch_add(&ran_on[e->worker % 64], 1);
    return 0;
}

static const tsr_codelet_t dag_cl[MAXBUF + 1] = {
    {.name = "dag0", .impl = {dag_kernel}, .nbuffers = 0},
    {.name = "dag1", .impl = {dag_kernel}, .nbuffers = 1},
    {.name = "dag2", .impl = {dag_kernel}, .nbuffers = 2},
    {.name = "dag3", .impl = {dag_kernel}, .nbuffers = 3},
    {.name = "dag4", .impl = {dag_kernel}, .nbuffers = 4},
};

/* Run a random graph under the runtime already started; compare every
 * task's inputs and every handle's final value with the sequence. */
static void run_dag(unsigned seed, int ntasks)
{
    static uint64_t data[NHANDLES][WORDS], ref[NHANDLES][WORDS];
    cr_assert_leq(ntasks, NTASKS);
    srand(seed);
    for (int h = 0; h < NHANDLES; h++)
        for (int k = 0; k < WORDS; k++)
            data[h][k] = ref[h][k] = hash64((uint64_t)(h * WORDS + k) ^ seed);
    memset(mixlog, 0, sizeof mixlog);
    memset(reflog, 0, sizeof reflog);
    for (int w = 0; w < 64; w++)
        atomic_store(&ran_on[w], 0);

    tsr_handle_t hs[NHANDLES];
    for (int h = 0; h < NHANDLES; h++)
        cr_assert_eq(tsr_handle_register(&hs[h], data[h], sizeof data[h]), TSR_OK);
    static const tsr_mode_t modes[] = {TSR_R, TSR_R, TSR_R, TSR_W, TSR_RW, TSR_RW,
                                       TSR_COMMUTE};
    for (int t = 0; t < ntasks; t++) {
        if (rand() % 150 == 0) {
            /* Host access in program order: the sequence's value there. */
            int h = rand() % NHANDLES;
            uint64_t *p;
            if (tsr_handle_acquire(hs[h], TSR_R, (void **)&p) != TSR_OK) {
                /* The wait names the task that failed. */
                char msg[1024];
                snprintf(msg, sizeof msg, "%s", tsr_error_message());
                tsr_wait_all();
                cr_assert(0, "seed %u: %s (%s)", seed, msg, tsr_error_message());
            }
            for (int k = 0; k < WORDS; k++)
                cr_assert_eq(p[k], ref[h][k], "seed %u: handle %d at task %d", seed, h, t);
            cr_assert_eq(tsr_handle_release(hs[h]), TSR_OK);
        }
        dag_args_t a = {.id = (uint64_t)t, .nbuf = 1 + rand() % MAXBUF};
        tsr_access_t acc[MAXBUF];
        void *refbufs[MAXBUF];
        bool used[NHANDLES] = {false};
        for (int i = 0; i < a.nbuf; i++) {
            int h;
            do /* skewed, so that chains form beside independent work */
                h = rand() % 3 == 0 ? rand() % NHANDLES : rand() % 6;
            while (used[h]);
            used[h] = true;
            a.mode[i] = modes[rand() % (int)(sizeof modes / sizeof modes[0])];
            acc[i] = (tsr_access_t){hs[h], a.mode[i]};
            refbufs[i] = ref[h];
        }
        tsr_task_desc_t d = {.codelet = &dag_cl[a.nbuf], .nbuffers = a.nbuf,
                             .buffers = acc, .args = &a, .args_size = sizeof a,
                             .priority = rand() % 3};
        cr_assert_eq(tsr_submit(&d, NULL), TSR_OK, "%s", tsr_error_message());
        update(refbufs, &a, reflog);
    }
    cr_assert_eq(tsr_wait_all(), TSR_OK, "%s", tsr_error_message());
    for (int h = 0; h < NHANDLES; h++)
        cr_assert_eq(tsr_handle_unregister(hs[h]), TSR_OK);
    long total = 0;
    for (int w = 0; w < 64; w++)
        total += atomic_load(&ran_on[w]);
    cr_assert_eq(total, ntasks, "seed %u: %ld tasks ran, %d submitted", seed, total, ntasks);
    for (int t = 0; t < ntasks; t++)
        cr_assert_eq(mixlog[t], reflog[t], "seed %u: task %d read other data than in sequence",
                     seed, t);
    for (int h = 0; h < NHANDLES; h++)
        for (int k = 0; k < WORDS; k++)
            cr_assert_eq(data[h][k], ref[h][k], "seed %u: handle %d word %d", seed, h, k);
}

/* Accelerator memory for 1/3 of the working set (8 handles; a task uses
 * at most 4): fetches, evictions and write-backs on every run. */
#define SIM_MEM (sizeof(uint64_t) * WORDS * NHANDLES / 3)

static void run_sched(const char *sched, int ncpu, int nsim, unsigned seed, int ntasks)
{
    start_runtime_sim(ncpu, sched, 0, nsim, nsim ? SIM_MEM : 0);
    run_dag(seed, ntasks);
    stop_runtime();
    if (nsim) {
        char line[256] = "";
        for (int w = 0; w < ncpu + nsim && w < 64; w++)
            snprintf(line + strlen(line), sizeof line - strlen(line), " %ld",
                     atomic_load(&ran_on[w]));
        cr_log_info("seed %u, %d cpu + %d sim: tasks per worker:%s", seed, ncpu, nsim, line);
    }
}

/* ---- loading and running the example ------------------------------------ */

Test(plugin, by_path_on_cpu_workers, .timeout = 300)
{
    fresh_env();
    char path[PATH_MAX];
    plugin_file(path, sizeof path, "", PLUGIN_FILE);
    for (unsigned seed = 1; seed <= 4; seed++)
        run_sched(path, 1 + (int)seed, 0, seed, NTASKS);
}

Test(plugin, by_path_on_cpu_and_two_sims, .timeout = 300)
{
    fresh_env();
    char path[PATH_MAX];
    plugin_file(path, sizeof path, "", PLUGIN_FILE);
    for (unsigned seed = 10; seed < 14; seed++)
        run_sched(path, 1, 2, seed, NTASKS);
}

Test(plugin, on_two_sims_only, .timeout = 300)
{
    fresh_env();
    char path[PATH_MAX];
    plugin_file(path, sizeof path, "", PLUGIN_FILE);
    run_sched(path, -1, 2, 20, NTASKS);
}

/* The policy's knob: 0 ignores where data is, 100 follows it at any load. */
Test(plugin, affinity_weights, .timeout = 300)
{
    fresh_env();
    char path[PATH_MAX];
    plugin_file(path, sizeof path, "", PLUGIN_FILE);
    setenv("AFFINITY_WEIGHT", "0", 1);
    run_sched(path, 2, 2, 30, NTASKS / 2);
    setenv("AFFINITY_WEIGHT", "100", 1);
    setenv("AFFINITY_STATS", "1", 1);
    run_sched(path, 2, 2, 31, NTASKS / 2);
    /* A bad value fails the policy's init, and init with it. */
    setenv("AFFINITY_WEIGHT", "heavy", 1);
    cr_assert_eq(try_init(path), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "init failed"), "%s", tsr_error_message());
    unsetenv("AFFINITY_WEIGHT");
    unsetenv("AFFINITY_STATS");
    cr_assert_eq(try_init(path), TSR_OK, "%s", tsr_error_message());
}

Test(plugin, by_name_through_the_search_path, .timeout = 300)
{
    fresh_env();
    char dir[PATH_MAX], tmp[PATH_MAX], sp[3 * PATH_MAX];
    plugin_dir(dir, sizeof dir, "");
    make_tmpdir(tmp, sizeof tmp);
    /* A directory without it, an empty entry and a missing directory are
     * passed over. */
    snprintf(sp, sizeof sp, "%s::%s/none:%s", tmp, tmp, dir);
    setenv("TESSERA_SCHED_PATH", sp, 1);
    run_sched(PLUGIN_NAME, 3, 0, 40, NTASKS / 2);
    run_sched(PLUGIN_NAME, 1, 2, 41, NTASKS / 2);
    /* TESSERA_SCHED names it as well as the configuration does. */
    setenv("TESSERA_SCHED", PLUGIN_NAME, 1);
    run_sched(NULL, 2, 0, 42, NTASKS / 4);
    unsetenv("TESSERA_SCHED");
    unsetenv("TESSERA_SCHED_PATH");
    /* Without the search path the name means nothing. */
    cr_assert_eq(try_init(PLUGIN_NAME), TSR_ENOTFOUND);
    rm_tree(tmp);
}

/* N.so when there is no libtessera-sched-N.so. */
Test(plugin, plain_file_name)
{
    fresh_env();
    char path[PATH_MAX], tmp[PATH_MAX], link[PATH_MAX + 32];
    plugin_file(path, sizeof path, "", PLUGIN_FILE);
    make_tmpdir(tmp, sizeof tmp);
    snprintf(link, sizeof link, "%s/mine.so", tmp);
    cr_assert_eq(symlink(path, link), 0);
    setenv("TESSERA_SCHED_PATH", tmp, 1);
    run_sched("mine", 2, 0, 50, NTASKS / 4);
    unsetenv("TESSERA_SCHED_PATH");
    rm_tree(tmp);
}

/* The first directory holding a file for the name decides, even when that
 * file is unusable; built-in names are never looked up. */
Test(plugin, search_order)
{
    fresh_env();
    char dir[PATH_MAX], bad[PATH_MAX], file[PATH_MAX + 64], sp[2 * PATH_MAX + 2];
    plugin_dir(dir, sizeof dir, "");
    make_tmpdir(bad, sizeof bad);
    snprintf(file, sizeof file, "%s/" PLUGIN_FILE, bad);
    write_file(file, "not a shared object\n");

    snprintf(sp, sizeof sp, "%s:%s", dir, bad);
    setenv("TESSERA_SCHED_PATH", sp, 1);
    cr_assert_eq(try_init(PLUGIN_NAME), TSR_OK, "%s", tsr_error_message());

    snprintf(sp, sizeof sp, "%s:%s", bad, dir);
    setenv("TESSERA_SCHED_PATH", sp, 1);
    cr_assert_eq(try_init(PLUGIN_NAME), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), file), "%s", tsr_error_message());

    snprintf(file, sizeof file, "%s/libtessera-sched-eager.so", bad);
    write_file(file, "not a shared object either\n");
    cr_assert_eq(try_init("eager"), TSR_OK, "%s", tsr_error_message());
    unsetenv("TESSERA_SCHED_PATH");
    rm_tree(bad);
}

/* libtessera's directory: the library loaded in this process. */
static int find_libtessera(struct dl_phdr_info *info, size_t size, void *out)
{
    (void)size;
    const char *slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    if (slash && strncmp(slash + 1, "libtessera.so", 13) == 0) {
        snprintf(out, PATH_MAX, "%.*s", (int)(slash - info->dlpi_name), info->dlpi_name);
        return 1;
    }
    return 0;
}

/* <libdir>/tessera/sched, next to the library, is searched after
 * TESSERA_SCHED_PATH: where `meson install` puts the example. */
Test(plugin, installed_directory)
{
    fresh_env();
    char path[PATH_MAX], libdir[PATH_MAX] = "";
    plugin_file(path, sizeof path, "", PLUGIN_FILE);
    cr_assert_eq(dl_iterate_phdr(find_libtessera, libdir), 1, "libtessera is not loaded");
    char tdir[PATH_MAX + 16], sdir[PATH_MAX + 32], name[64], link[PATH_MAX + 128];
    snprintf(tdir, sizeof tdir, "%s/tessera", libdir);
    snprintf(sdir, sizeof sdir, "%s/sched", tdir);
    (void)mkdir(tdir, 0755);
    (void)mkdir(sdir, 0755);
    struct stat st;
    if (stat(sdir, &st) != 0 || !S_ISDIR(st.st_mode) || access(sdir, W_OK) != 0)
        cr_skip_test("cannot write to %s", sdir);
    snprintf(name, sizeof name, "installed-%ld", (long)getpid());
    snprintf(link, sizeof link, "%s/libtessera-sched-%s.so", sdir, name);
    cr_assert_eq(symlink(path, link), 0, "symlink %s", link);
    unsetenv("TESSERA_SCHED_PATH");
    int rc = try_init(name);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tsr_error_message());
    (void)unlink(link);
    /* Only if empty: another run of this test may be using them. */
    (void)rmdir(sdir);
    (void)rmdir(tdir);
    cr_assert_eq(rc, TSR_OK, "%s", msg);
}

/* ---- refused plug-ins ----------------------------------------------------- */

Test(plugin_errors, missing_file)
{
    fresh_env();
    char tmp[PATH_MAX], file[PATH_MAX + 32];
    make_tmpdir(tmp, sizeof tmp);
    snprintf(file, sizeof file, "%s/no-such-policy.so", tmp);
    cr_assert_eq(try_init(file), TSR_ENOTFOUND);
    cr_assert(strstr(tsr_error_message(), file), "%s", tsr_error_message());
    rm_tree(tmp);
}

Test(plugin_errors, not_a_shared_object)
{
    fresh_env();
    char tmp[PATH_MAX], file[PATH_MAX + 32];
    make_tmpdir(tmp, sizeof tmp);
    snprintf(file, sizeof file, "%s/garbage.so", tmp);
    write_file(file, "\x7f" "ELF but not really: garbage\n");
    cr_assert_eq(try_init(file), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), file), "%s", tsr_error_message());
    cr_assert(strstr(tsr_error_message(), "shared object"), "%s", tsr_error_message());
    /* A directory is no plug-in either. */
    cr_assert_eq(try_init(tmp), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), tmp), "%s", tsr_error_message());
    rm_tree(tmp);
}

Test(plugin_errors, no_symbol)
{
    fresh_env();
    char path[PATH_MAX];
    plugin_file(path, sizeof path, "broken/", "libtessera-sched-broken-nosym.so");
    cr_assert_eq(try_init(path), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), path), "%s", tsr_error_message());
    cr_assert(strstr(tsr_error_message(), "exports no 'tsr_sched_policy'"), "%s",
              tsr_error_message());
}

Test(plugin_errors, policy_without_pop)
{
    fresh_env();
    char path[PATH_MAX];
    plugin_file(path, sizeof path, "broken/", "libtessera-sched-broken-nopop.so");
    cr_assert_eq(try_init(path), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), path), "%s", tsr_error_message());
    cr_assert(strstr(tsr_error_message(), "no pop"), "%s", tsr_error_message());
}

Test(plugin_errors, pointer_instead_of_policy)
{
    fresh_env();
    char path[PATH_MAX];
    plugin_file(path, sizeof path, "broken/", "libtessera-sched-broken-pointer.so");
    cr_assert_eq(try_init(path), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), path), "%s", tsr_error_message());
    cr_assert(strstr(tsr_error_message(), "not a pointer"), "%s", tsr_error_message());
}

Test(plugin_errors, unknown_name_with_search_path)
{
    fresh_env();
    char dir[PATH_MAX], broken[PATH_MAX], sp[2 * PATH_MAX + 2];
    plugin_dir(dir, sizeof dir, "");
    plugin_dir(broken, sizeof broken, "broken/");
    snprintf(sp, sizeof sp, "%s:%s", dir, broken);
    setenv("TESSERA_SCHED_PATH", sp, 1);
    cr_assert_eq(try_init("no-such-policy"), TSR_ENOTFOUND);
    cr_assert(strstr(tsr_error_message(), "no-such-policy"), "%s", tsr_error_message());
    cr_assert(strstr(tsr_error_message(), "eager"), "lists the built-ins: %s",
              tsr_error_message());
    unsetenv("TESSERA_SCHED_PATH");
}

/* A name whose file is found but unusable: TSR_EINVAL naming the file, not
 * "unknown scheduler". */
Test(plugin_errors, broken_plugin_found_by_name)
{
    fresh_env();
    char broken[PATH_MAX], file[PATH_MAX + 64];
    plugin_dir(broken, sizeof broken, "broken/");
    setenv("TESSERA_SCHED_PATH", broken, 1);
    static const char *const names[] = {"broken-nosym", "broken-nopop", "broken-pointer"};
    for (int i = 0; i < 3; i++) {
        snprintf(file, sizeof file, "%s/libtessera-sched-%s.so", broken, names[i]);
        cr_assert_eq(try_init(names[i]), TSR_EINVAL, "%s", names[i]);
        cr_assert(strstr(tsr_error_message(), file), "%s", tsr_error_message());
    }
    unsetenv("TESSERA_SCHED_PATH");
    /* Nothing was left behind by the refusals. */
    cr_assert_eq(try_init("eager"), TSR_OK, "%s", tsr_error_message());
}
