/* tessera-bench-beyond-ram — train a GPT-2 whose training state is at least
 * twice this machine's RAM, with the host capped well below the state and
 * the rest on the disk tier (docs/memory.md#the-disk-tier), and say how
 * close the disk traffic comes to what it must be.
 *
 * The program: reads the RAM (sysconf; --ram-gib overrides it, a rehearsal
 * switch for a small run) and the free space of the disk directory; picks
 * a GPT-2 shape (vocabulary 50257, 64-wide heads) whose state — parameters,
 * gradients and the two AdamW moments, 16 bytes per parameter — is at least
 * 2 × RAM, and refuses (exit 3) when the disk cannot hold it with margin;
 * measures the disk's sequential write and read bandwidth (O_DIRECT, a file
 * of --bw-gib GiB, deleted after); starts the runtime with the host capped
 * at --host-frac of the RAM and the disk tier; creates the model with
 * random weights and random tokens; trains --steps steps, each waited for,
 * and prints per step the time, the loss, the bytes read from and written
 * to the disk against their lower bounds, the bandwidth achieved against
 * the measured one, and the peak RSS.
 *
 * The lower bounds, per step, with P parameters, S = 16 P the state and H
 * the host cap (bytes of runtime-allocated host copies):
 *  - writes ≥ 12 P − H: p, m and v are rewritten in a step (by AdamW), and
 *    at the end at most H bytes of them are on the host; the newest value
 *    of the rest lives only on the disk, so it was written there during the
 *    step. The gradients are consumed by the update (their copies dropped
 *    where the state does not fit: nn/trainer.c), so none need be written.
 *    With clipping (--grad-clip > 0) every gradient is complete when the
 *    norm is read, before any update: at most H bytes of them are then on
 *    the host, the rest was written to disk — writes ≥ 16 P − 2 H.
 *  - reads ≥ 12 P − H: at the start of a step at most H bytes are on the
 *    host, so at least 12 P − H bytes of p, m and v are only on the disk,
 *    and each is read (forward reads p, AdamW reads p, m, v) before it is
 *    rewritten. The gradients start from zeros: they need not be read
 *    (with clipping the ones written to disk before the norm are read back:
 *    a tighter bound, 16 P − 2 H, that the figures do not use, so that they
 *    stay comparable with earlier runs). In the first step the moments are
 *    born zero (never written before): reads ≥ 4 P − H there.
 * Activations share the host cap, so these bounds are not tight; they are
 * what no schedule can beat.
 *
 * Must never: write outside the disk directory; leave its bandwidth file
 * behind; run when the disk cannot hold the state (it refuses instead).
 */
#include <tessera/gpt2.h>
#include <tessera/tessera.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "bench/bench_util.h"

#define GIB ((double)(1ull << 30))
#define VOCAB 50257
#define CONTEXT 1024
/* Exit codes: 2 usage, 3 the disk is too small (or the directory unusable),
 * 1 anything else. */
enum { EXIT_USAGE = 2, EXIT_NO_DISK = 3 };

typedef struct options {
    double ram_gib;     /* 0: the machine's */
    double host_frac;   /* host cap = host_frac × RAM */
    double bw_gib;      /* size of the bandwidth test file */
    const char *disk_dir;
    const char *sched;
    const char *evict;  /* NULL: the runtime's default */
    double grad_clip;   /* AdamW's global-norm clipping; 0: none */
    int layers, channels; /* 0: chosen from the RAM */
    int batch, seq, steps, threads, recompute, plan_only;
    long seed;
} options_t;

static void usage(void)
{
    fprintf(stderr,
            "usage: tessera-bench-beyond-ram [options]\n"
            "  --disk-dir DIR     the disk tier's directory (default: disk/ beside\n"
            "                     this program, in the build directory)\n"
            "  --ram-gib X        the RAM figure the model is sized from (default: this\n"
            "                     machine's); a rehearsal switch: --ram-gib 1 runs a\n"
            "                     small model in a few minutes\n"
            "  --host-frac X      host cap as a fraction of that RAM (default 0.4)\n"
            "  --layers N --channels N   the shape (default: chosen so that the\n"
            "                     state, 16 B/param, is at least 2 x RAM)\n"
            "  --batch N --seq N  tokens per step (default 1 x 64)\n"
            "  --steps N          training steps (default 3)\n"
            "  --bw-gib X         size of the disk bandwidth test file (default 2)\n"
            "  --threads N        CPU workers (default: one per core)\n"
            "  --sched NAME       scheduling policy (default the runtime's)\n"
            "  --evict lru|window victim selection (TESSERA_EVICT)\n"
            "  --recompute        GPT-2 activation recomputation\n"
            "  --plan             print the plan (shape, sizes, space) and stop\n"
            "  --grad-clip X      AdamW's global-norm clipping (default 1; 0: none,\n"
            "                     and no norm: each tile's update runs as soon as\n"
            "                     its gradient is complete, during the backward pass)\n"
            "  --seed N           weights and tokens (default 1)\n");
}

static int parse_num(const char *s, double lo, double hi, double *out)
{
    char *end = NULL;
    double v = strtod(s, &end);
    if (!*s || *end || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, options_t *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            exit(0);
        }
        if (!strcmp(a, "--recompute")) {
            o->recompute = 1;
            continue;
        }
        if (!strcmp(a, "--plan")) {
            o->plan_only = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "beyond-ram: %s: missing value or unknown option\n", a);
            return -1;
        }
        const char *v = argv[++i];
        double x = 0;
        struct {
            const char *name;
            double lo, hi;
            double *d;
            int *n;
        } nums[] = {
            {"--ram-gib", 1.0 / 64, 1 << 20, &o->ram_gib, NULL},
            {"--host-frac", 0.01, 0.95, &o->host_frac, NULL},
            {"--bw-gib", 1.0 / 64, 1024, &o->bw_gib, NULL},
            {"--layers", 1, 1024, NULL, &o->layers},
            {"--channels", 64, 1 << 16, NULL, &o->channels},
            {"--batch", 1, 1024, NULL, &o->batch},
            {"--seq", 1, CONTEXT, NULL, &o->seq},
            {"--steps", 1, 1000, NULL, &o->steps},
            {"--threads", 0, 4096, NULL, &o->threads},
        };
        int done = 0;
        for (size_t k = 0; k < sizeof nums / sizeof nums[0] && !done; k++) {
            if (strcmp(a, nums[k].name))
                continue;
            if (parse_num(v, nums[k].lo, nums[k].hi, &x) ||
                (nums[k].n && x != floor(x))) {
                fprintf(stderr, "beyond-ram: %s: bad value '%s'\n", a, v);
                return -1;
            }
            if (nums[k].d)
                *nums[k].d = x;
            else
                *nums[k].n = (int)x;
            done = 1;
        }
        if (done)
            continue;
        if (!strcmp(a, "--disk-dir")) {
            o->disk_dir = v;
        } else if (!strcmp(a, "--sched")) {
            o->sched = v;
        } else if (!strcmp(a, "--evict")) {
            if (strcmp(v, "lru") && strcmp(v, "window")) {
                fprintf(stderr, "beyond-ram: --evict: lru or window, not '%s'\n", v);
                return -1;
            }
            o->evict = v;
        } else if (!strcmp(a, "--grad-clip")) {
            char *end;
            o->grad_clip = strtod(v, &end);
            if (end == v || *end || !(o->grad_clip >= 0 && o->grad_clip < 1e30)) {
                fprintf(stderr, "beyond-ram: --grad-clip: bad value '%s'\n", v);
                return -1;
            }
        } else if (!strcmp(a, "--seed")) {
            if (parse_num(v, 0, 1 << 30, &x)) {
                fprintf(stderr, "beyond-ram: --seed: bad value '%s'\n", v);
                return -1;
            }
            o->seed = (long)x;
        } else {
            fprintf(stderr, "beyond-ram: unknown option %s\n", a);
            return -1;
        }
    }
    if (o->channels % 64) {
        fprintf(stderr, "beyond-ram: --channels must be a multiple of 64 (64-wide heads)\n");
        return -1;
    }
    return 0;
}

/* GPT-2's parameter count: wte (V, C), wpe (ctx, C), per layer ln_1, ln_2
 * (2 × 2C), c_attn (C, 3C) + 3C, attn c_proj (C, C) + C, c_fc (C, 4C) + 4C,
 * mlp c_proj (4C, C) + C = 12 C² + 13 C, and ln_f (2C). */
static double gpt2_params(int layers, int channels)
{
    double c = channels;
    return (double)VOCAB * c + CONTEXT * c + layers * (12 * c * c + 13 * c) + 2 * c;
}

/* A shape whose 16 B/param state is at least `state`: channels from a
 * depth of about 32 layers (a multiple of 128), then the fewest layers. */
static void pick_shape(double state, int *layers, int *channels)
{
    double p = state / 16;
    if (*channels == 0) {
        double c = sqrt(p / (12.0 * 32));
        int ch = 128 * (int)floor(c / 128 + 0.5);
        *channels = ch < 256 ? 256 : ch > 8192 ? 8192 : ch;
    }
    if (*layers == 0) {
        double c = *channels, fixed = (double)VOCAB * c + CONTEXT * c + 2 * c;
        double per = 12 * c * c + 13 * c;
        int l = p > fixed ? (int)ceil((p - fixed) / per) : 1;
        *layers = l < 1 ? 1 : l;
    }
}

/* mkdir -p, one level at a time. */
static int make_dirs(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return -1;
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0755) && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(buf, 0755) && errno != EEXIST ? -1 : 0;
}

/* ---- the disk's sequential bandwidth ------------------------------------ */

/* Write then read `bytes` sequentially in 8 MiB blocks with O_DIRECT (the
 * page cache would otherwise answer the reads from RAM); where the file
 * system refuses O_DIRECT (tmpfs), buffered with fdatasync and the cache
 * dropped for the file (posix_fadvise), said in *direct. The file is
 * deleted. Returns 0, or -1 with a message. */
static int disk_bandwidth(const char *dir, double bytes, double *wbw, double *rbw, int *direct)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/beyond-ram-bw.%ld", dir, (long)getpid());
    const size_t blk = (size_t)8 << 20;
    size_t nblk = (size_t)ceil(bytes / (double)blk);
    void *buf = NULL;
    if (posix_memalign(&buf, 4096, blk)) {
        fprintf(stderr, "beyond-ram: out of memory\n");
        return -1;
    }
    for (size_t i = 0; i < blk / 8; i++)
        ((uint64_t *)buf)[i] = i * 0x9e3779b97f4a7c15ull; /* not zeros: no shortcut */
    *direct = 1;
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_DIRECT, 0600);
    if (fd < 0 && errno == EINVAL) {
        *direct = 0;
        fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    }
    if (fd < 0) {
        fprintf(stderr, "beyond-ram: open %s: %s\n", path, strerror(errno));
        free(buf);
        return -1;
    }
    int rc = 0;
    double t0 = bench_now();
    for (size_t i = 0; i < nblk && !rc; i++)
        if (write(fd, buf, blk) != (ssize_t)blk) {
            fprintf(stderr, "beyond-ram: write %s at %zu: %s\n", path, i * blk,
                    strerror(errno));
            rc = -1;
        }
    if (!rc && fdatasync(fd)) {
        fprintf(stderr, "beyond-ram: fdatasync %s: %s\n", path, strerror(errno));
        rc = -1;
    }
    *wbw = (double)(nblk * blk) / (bench_now() - t0);
    if (!*direct)
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    if (!rc) {
        fd = open(path, O_RDONLY | (*direct ? O_DIRECT : 0));
        if (fd < 0) {
            fprintf(stderr, "beyond-ram: open %s: %s\n", path, strerror(errno));
            rc = -1;
        } else {
            t0 = bench_now();
            for (size_t i = 0; i < nblk && !rc; i++)
                if (read(fd, buf, blk) != (ssize_t)blk) {
                    fprintf(stderr, "beyond-ram: read %s at %zu: %s\n", path, i * blk,
                            strerror(errno));
                    rc = -1;
                }
            *rbw = (double)(nblk * blk) / (bench_now() - t0);
            close(fd);
        }
    }
    unlink(path);
    free(buf);
    return rc;
}

/* ---- the run ------------------------------------------------------------ */

static int failed(int rc, const char *what)
{
    if (rc == TSR_OK)
        return 0;
    fprintf(stderr, "beyond-ram: %s: %s (%s)\n", what, tsr_strerror(rc), tsr_error_message());
    return 1;
}

static double peak_rss_gib(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) ? NAN : (double)ru.ru_maxrss * 1024 / GIB;
}

/* The disk tier's node id, or -1. */
static int disk_node(void)
{
    for (int i = 0; i < tsr_memory_node_count(); i++) {
        tsr_node_stats_t st;
        if (tsr_memory_node_stats(i, &st) == TSR_OK && st.kind == TSR_NODE_DISK)
            return i;
    }
    return -1;
}

/* Bytes that crossed between the host (node 0) and the disk, each way. */
static void disk_bytes(int disk, double *read, double *written)
{
    *read = (double)tsr_memory_link_bytes(disk, 0);
    *written = (double)tsr_memory_link_bytes(0, disk);
}

int main(int argc, char **argv)
{
    options_t o = {.grad_clip = 1.0, .host_frac = 0.4, .bw_gib = 2, .batch = 1, .seq = 64, .steps = 3,
                   .seed = 1};
    if (parse_args(argc, argv, &o)) {
        usage();
        return EXIT_USAGE;
    }

    /* RAM, and the disk directory (default: disk/ beside the program). */
    double ram = o.ram_gib > 0 ? o.ram_gib * GIB
                               : (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    char dir[PATH_MAX];
    if (o.disk_dir) {
        snprintf(dir, sizeof dir, "%s", o.disk_dir);
    } else {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0) {
            fprintf(stderr, "beyond-ram: cannot find this program's directory: give --disk-dir\n");
            return EXIT_USAGE;
        }
        exe[n] = 0;
        snprintf(dir, sizeof dir, "%s/disk", dirname(exe));
    }
    if (make_dirs(dir)) {
        fprintf(stderr, "beyond-ram: cannot create the disk directory %s: %s\n", dir,
                strerror(errno));
        return EXIT_NO_DISK;
    }
    struct statvfs vfs;
    if (statvfs(dir, &vfs)) {
        fprintf(stderr, "beyond-ram: statvfs %s: %s\n", dir, strerror(errno));
        return EXIT_NO_DISK;
    }
    double free_b = (double)vfs.f_bavail * (double)vfs.f_frsize;

    /* The shape, the state and the space it needs. */
    pick_shape(2 * ram, &o.layers, &o.channels);
    double params = gpt2_params(o.layers, o.channels);
    double state = 16 * params, host = o.host_frac * ram;
    /* The disk tier holds what the host does not, and a copy may exist on
     * both while it is written back: the whole state, plus a quarter for
     * the pool's fragmentation and the activations. */
    double disk_mem = ceil(1.25 * state / (1 << 20)) * (1 << 20);
    /* The tier's file and the bandwidth file never coexist; 1 GiB spare. */
    double need = fmax(disk_mem, o.bw_gib * GIB) + GIB;
    int heads = o.channels / 64;
    printf("beyond-ram: RAM %.1f GiB%s, host cap %.1f GiB (%.0f%%), disk %s: %.1f GiB free\n",
           ram / GIB, o.ram_gib > 0 ? " (--ram-gib: a rehearsal)" : "", host / GIB,
           100 * o.host_frac, dir, free_b / GIB);
    printf("beyond-ram: GPT-2 %d layers x %d channels (%d heads), vocab %d: %.3f B params, "
           "state %.1f GiB (16 B/param) = %.2f x RAM; disk tier %.1f GiB; tokens %d x %d\n",
           o.layers, o.channels, heads, VOCAB, params / 1e9, state / GIB, state / ram,
           disk_mem / GIB, o.batch, o.seq);
    printf("{\"bench\":\"beyond-ram\",\"figure\":\"plan\",\"ram_gib\":%.3f,\"rehearsal\":%s,"
           "\"host_cap_gib\":%.3f,\"disk_free_gib\":%.3f,\"disk_tier_gib\":%.3f,"
           "\"layers\":%d,\"channels\":%d,\"heads\":%d,\"vocab\":%d,\"batch\":%d,\"seq\":%d,"
           "\"params\":%.0f,\"state_gib\":%.3f,\"state_over_ram\":%.3f}\n",
           ram / GIB, o.ram_gib > 0 ? "true" : "false", host / GIB, free_b / GIB,
           disk_mem / GIB, o.layers, o.channels, heads, VOCAB, o.batch, o.seq, params,
           state / GIB, state / ram);
    fflush(stdout);
    if (state < 2 * ram)
        printf("beyond-ram: note: the shape given makes the state %.2f x RAM, under 2x\n",
               state / ram);
    if (free_b < need) {
        fprintf(stderr,
                "beyond-ram: not enough disk: %s has %.1f GiB free, the run needs %.1f GiB "
                "(the disk tier %.1f GiB for a %.1f GiB state, and 1 GiB spare). Free space, "
                "give --disk-dir on a larger file system, or rehearse smaller with --ram-gib.\n",
                dir, free_b / GIB, need / GIB, disk_mem / GIB, state / GIB);
        return EXIT_NO_DISK;
    }
    if (o.plan_only)
        return 0;

    /* The disk's own sequential bandwidth, in this run. */
    double wbw = 0, rbw = 0;
    int direct = 0;
    if (disk_bandwidth(dir, o.bw_gib * GIB, &wbw, &rbw, &direct))
        return 1;
    printf("beyond-ram: disk sequential (%.1f GiB, %s): write %.3f GB/s, read %.3f GB/s\n",
           o.bw_gib, direct ? "O_DIRECT" : "buffered, cache dropped", wbw / 1e9, rbw / 1e9);
    printf("{\"bench\":\"beyond-ram\",\"figure\":\"disk_sequential\",\"file_gib\":%.3f,"
           "\"direct\":%s,\"write_gbs\":%.4g,\"read_gbs\":%.4g}\n",
           o.bw_gib, direct ? "true" : "false", wbw / 1e9, rbw / 1e9);
    fflush(stdout);

    /* The runtime: host capped, the disk tier below it. */
    tsr_config_t rc;
    tsr_config_init(&rc);
    if (o.evict)
        rc.evict = strcmp(o.evict, "lru") ? TSR_EVICT_WINDOW : TSR_EVICT_LRU;
    rc.ncpu = o.threads;
    if (o.sched)
        rc.sched = o.sched;
    rc.host_mem = (size_t)host;
    rc.disk_dir = dir;
    rc.disk_mem = (size_t)disk_mem;
    if (failed(tsr_init(&rc), "tsr_init (the disk tier)"))
        return 1;
    int status = 1;
    tsr_gpt2_t *m = NULL;
    int32_t *tokens = NULL, *targets = NULL;
    int disk = disk_node();
    if (disk < 0) {
        fprintf(stderr, "beyond-ram: the runtime has no disk node\n");
        goto out;
    }
    size_t ntok = (size_t)o.batch * (size_t)o.seq;
    tokens = malloc(ntok * sizeof *tokens);
    targets = malloc(ntok * sizeof *targets);
    if (!tokens || !targets) {
        fprintf(stderr, "beyond-ram: out of memory\n");
        goto out;
    }
    uint64_t x = (uint64_t)o.seed;
    for (size_t i = 0; i < ntok; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        tokens[i] = (int32_t)((x >> 33) % VOCAB);
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        targets[i] = (int32_t)((x >> 33) % VOCAB);
    }

    tsr_gpt2_config_t mc;
    tsr_gpt2_config_default(&mc);
    mc.layers = o.layers;
    mc.channels = o.channels;
    mc.heads = heads;
    mc.vocab_size = VOCAB;
    mc.context = CONTEXT;
    mc.recompute = o.recompute;
    double t0 = bench_now(), r0, w0, r1, w1;
    if (failed(tsr_gpt2_create(&m, &mc, o.batch, o.seq), "tsr_gpt2_create") ||
        failed(tsr_gpt2_init_weights(m, (uint64_t)o.seed), "tsr_gpt2_init_weights") ||
        failed(tsr_wait_all(), "initialisation"))
        goto out;
    double p = (double)tsr_gpt2_num_params(m);
    disk_bytes(disk, &r0, &w0);
    printf("beyond-ram: initialised in %.1f s (%.2f GB written to the disk)\n",
           bench_now() - t0, w0 / 1e9);
    printf("\n%4s %9s %8s %9s %9s %9s %9s %8s %8s %9s\n", "step", "s/step", "loss",
           "read GB", ">= GB", "write GB", ">= GB", "rd GB/s", "wr GB/s", "RSS GiB");

    tsr_adamw_config_t opt;
    tsr_adamw_config_default(&opt);
    opt.grad_clip = (float)o.grad_clip;
    double total = 0, tot_r = 0, tot_w = 0;
    for (int s = 1; s <= o.steps; s++) {
        float loss = NAN, norm = 0;
        t0 = bench_now();
        if (failed(tsr_gpt2_zero_grad(m), "tsr_gpt2_zero_grad") ||
            failed(tsr_gpt2_forward(m, tokens, targets, NULL), "tsr_gpt2_forward") ||
            failed(tsr_gpt2_backward(m, 1.0f), "tsr_gpt2_backward") ||
            failed(tsr_gpt2_step(m, &opt, 3e-4f, o.grad_clip > 0 ? &norm : NULL),
                   "tsr_gpt2_step") ||
            failed(tsr_gpt2_loss(m, &loss), "tsr_gpt2_loss") ||
            failed(tsr_wait_all(), "tsr_wait_all"))
            goto out;
        double dt = bench_now() - t0;
        disk_bytes(disk, &r1, &w1);
        double rd = r1 - r0, wr = w1 - w0;
        r0 = r1;
        w0 = w1;
        /* The bounds of the header comment. */
        double lb_r = fmax(0, (s == 1 ? 4 : 12) * p - host);
        double lb_w = fmax(0, o.grad_clip > 0 ? 16 * p - 2 * host : 12 * p - host);
        double rss = peak_rss_gib();
        total += dt;
        tot_r += rd;
        tot_w += wr;
        printf("%4d %9.2f %8.4f %9.2f %9.2f %9.2f %9.2f %8.3f %8.3f %9.2f\n", s, dt,
               (double)loss, rd / 1e9, lb_r / 1e9, wr / 1e9, lb_w / 1e9, rd / dt / 1e9,
               wr / dt / 1e9, rss);
        char sl[32];
        bench_json_num(sl, sizeof sl, 1, loss);
        printf("{\"bench\":\"beyond-ram\",\"figure\":\"step\",\"step\":%d,\"s_per_step\":%.4g,"
               "\"loss\":%s,\"read_gb\":%.4g,\"read_lower_bound_gb\":%.4g,\"write_gb\":%.4g,"
               "\"write_lower_bound_gb\":%.4g,\"read_gbs\":%.4g,\"write_gbs\":%.4g,"
               "\"peak_rss_gib\":%.4g}\n",
               s, dt, sl, rd / 1e9, lb_r / 1e9, wr / 1e9, lb_w / 1e9, rd / dt / 1e9,
               wr / dt / 1e9, rss);
        fflush(stdout);
    }
    /* The time the bounds' bytes take at the measured sequential speeds:
     * the floor of a step's I/O on this disk (steady state). */
    double floor_s = fmax(0, 12 * p - host) / rbw +
                     fmax(0, o.grad_clip > 0 ? 16 * p - 2 * host : 12 * p - host) / wbw;
    double sps = total / o.steps, rss = peak_rss_gib();
    printf("\nbeyond-ram: %.2f s/step over %d steps; disk %.3f GB/s read (sequential %.3f), "
           "%.3f GB/s written (sequential %.3f), averaged over the steps; the bounds' "
           "bytes at the sequential speeds take %.2f s/step; peak RSS %.2f GiB (host cap "
           "%.1f GiB, RAM %.1f GiB)\n",
           sps, o.steps, tot_r / total / 1e9, rbw / 1e9, tot_w / total / 1e9, wbw / 1e9,
           floor_s, rss, host / GIB, ram / GIB);
    printf("{\"bench\":\"beyond-ram\",\"figure\":\"summary\",\"layers\":%d,\"channels\":%d,"
           "\"heads\":%d,\"batch\":%d,\"seq\":%d,\"params\":%.0f,\"steps\":%d,"
           "\"s_per_step\":%.4g,\"read_gbs\":%.4g,\"write_gbs\":%.4g,"
           "\"seq_read_gbs\":%.4g,\"seq_write_gbs\":%.4g,\"io_floor_s_per_step\":%.4g,"
           "\"peak_rss_gib\":%.4g,\"host_cap_gib\":%.4g,\"ram_gib\":%.4g,\"recompute\":%d,"
           "\"evict\":\"%s\",\"tflops\":%.4g}\n",
           o.layers, o.channels, heads, o.batch, o.seq, p, o.steps, sps, tot_r / total / 1e9,
           tot_w / total / 1e9, rbw / 1e9, wbw / 1e9, floor_s, rss, host / GIB, ram / GIB,
           o.recompute, o.evict ? o.evict : "default",
           6 * p * (double)ntok / sps / 1e12);
    status = 0;
out:
    if (m)
        tsr_gpt2_free(m);
    free(tokens);
    free(targets);
    if (failed(tsr_shutdown(), "tsr_shutdown"))
        status = 1;
    return status;
}
