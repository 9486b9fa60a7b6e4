/* tools/cli.c — the shared pieces of the GPT-2 command-line programs: flag
 * parsing, one-line error reporting, runtime start-up, model shape flags,
 * tokenizer and shard checks, and small helpers (see cli.h).
 */
#include "cli.h"
#include "fault.h"
#include "runtime/file.h"
#include "shards.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *cli_prog = "tessera";

/* ---- messages ---------------------------------------------------------- */

/* The last message reported, without the program's name: the ranks of a
 * data-parallel run tell the others why they stopped (agree.h). */
static char last_message[512];

static void vreport(const char *fmt, va_list ap, const char *suffix)
{
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (suffix == NULL)
        suffix = "";
    /* the whole line in one write: under mpirun the ranks' lines would
     * otherwise interleave mid-line */
    size_t len = strlen(cli_prog) + 2 + (n > 0 ? (size_t)n : 0) + strlen(suffix) + 2;
    char *line = malloc(len);
    fflush(stdout);
    if (line == NULL || n < 0) {
        free(line);
        fprintf(stderr, "%s: ", cli_prog);
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "%s\n", suffix);
        return;
    }
    size_t off = (size_t)snprintf(line, len, "%s: ", cli_prog);
    vsnprintf(line + off, len - off, fmt, ap);
    snprintf(last_message, sizeof last_message, "%s%s", line + off, suffix);
    off += (size_t)n;
    snprintf(line + off, len - off, "%s\n", suffix);
    fputs(line, stderr);
    free(line);
}

const char *cli_last_message(void)
{
    return last_message;
}

int cli_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(fmt, ap, NULL);
    va_end(ap);
    return 1;
}

int cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(fmt, ap, " (see --help)");
    va_end(ap);
    return 2;
}

int cli_lib_fail(int rc, const char *fmt, ...)
{
    const char *msg = tsr_error_message();
    if (msg == NULL || msg[0] == '\0')
        msg = tsr_strerror(rc);
    char detail[1024];
    snprintf(detail, sizeof detail, ": %s", msg);
    va_list ap;
    va_start(ap, fmt);
    vreport(fmt, ap, detail);
    va_end(ap);
    return 1;
}

/* ---- flags ------------------------------------------------------------- */

cli_opt_t *cli_find(cli_opt_t *opts, int nopts, const char *name)
{
    for (int i = 0; i < nopts; i++)
        if (strcmp(opts[i].name, name) == 0)
            return &opts[i];
    return NULL;
}

int cli_seen(cli_opt_t *opts, int nopts, const char *name)
{
    cli_opt_t *o = cli_find(opts, nopts, name);
    return o != NULL && o->seen;
}

static cli_opt_t *find_long(cli_opt_t *opts, int nopts, const char *name, size_t len)
{
    for (int i = 0; i < nopts; i++)
        if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0)
            return &opts[i];
    return NULL;
}

static cli_opt_t *find_short(cli_opt_t *opts, int nopts, char c)
{
    for (int i = 0; i < nopts; i++)
        if (opts[i].short_name != 0 && opts[i].short_name == c)
            return &opts[i];
    return NULL;
}

/* Store `value` into o; 0, or 2 after a usage error. */
static int set_value(cli_opt_t *o, const char *shown, const char *value)
{
    char *end;
    errno = 0;
    switch (o->type) {
    case CLI_INT: {
        long long v = strtoll(value, &end, 10);
        if (value[0] == '\0' || *end != '\0' || errno != 0 || (double)v < o->min ||
            (double)v > o->max)
            return cli_usage_error("%s needs an integer in [%.0f, %.0f], not '%s'", shown,
                                   o->min, o->max, value);
        *(int *)o->dst = (int)v;
        break;
    }
    case CLI_U64: {
        unsigned long long v = strtoull(value, &end, 10);
        if (value[0] == '\0' || value[0] == '-' || *end != '\0' || errno != 0)
            return cli_usage_error("%s needs a non-negative integer, not '%s'", shown, value);
        *(uint64_t *)o->dst = (uint64_t)v;
        break;
    }
    case CLI_FLOAT: {
        double v = strtod(value, &end);
        if (value[0] == '\0' || *end != '\0' || errno != 0 || !isfinite(v) || v < o->min ||
            v > o->max)
            return cli_usage_error("%s needs a number in [%g, %g], not '%s'", shown, o->min,
                                   o->max, value);
        *(double *)o->dst = v;
        break;
    }
    case CLI_STR:
        if (value[0] == '\0')
            return cli_usage_error("%s needs a non-empty value", shown);
        *(const char **)o->dst = value;
        break;
    case CLI_BOOL:
        *(int *)o->dst = 1;
        break;
    }
    o->seen = 1;
    return 0;
}

int cli_set(cli_opt_t *o, const char *value)
{
    char shown[96];
    snprintf(shown, sizeof shown, "--%s", o->name);
    return set_value(o, shown, value);
}

void cli_format(const cli_opt_t *o, char *buf, size_t size)
{
    switch (o->type) {
    case CLI_INT:
    case CLI_BOOL:
        snprintf(buf, size, "%d", *(const int *)o->dst);
        break;
    case CLI_U64:
        snprintf(buf, size, "%llu", (unsigned long long)*(const uint64_t *)o->dst);
        break;
    case CLI_FLOAT:
        snprintf(buf, size, "%.17g", *(const double *)o->dst);
        break;
    case CLI_STR: {
        const char *s = *(const char *const *)o->dst;
        snprintf(buf, size, "%s", s ? s : "");
        break;
    }
    }
}

int cli_parse(const char *prog, const char *usage, cli_opt_t *opts, int nopts, int argc,
              char **argv, const char **pos, int max_pos, int *npos)
{
    cli_prog = prog;
    *npos = 0;
    int flags_done = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int is_flag = !flags_done && a[0] == '-' && a[1] != '\0';
        if (!is_flag) {
            if (pos == NULL || *npos >= max_pos)
                return cli_usage_error("unexpected argument '%s'", a);
            pos[(*npos)++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            flags_done = 1;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        }
        cli_opt_t *o = NULL;
        const char *value = NULL;
        char shown[96];
        if (a[1] == '-') {
            const char *name = a + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            o = find_long(opts, nopts, name, len);
            if (o == NULL)
                return cli_usage_error("unknown option '%.*s'", (int)(len + 2), a);
            if (eq != NULL)
                value = eq + 1;
            snprintf(shown, sizeof shown, "--%s", o->name);
        } else {
            o = a[2] == '\0' ? find_short(opts, nopts, a[1]) : NULL;
            if (o == NULL)
                return cli_usage_error("unknown option '%s'", a);
            snprintf(shown, sizeof shown, "-%c", o->short_name);
        }
        if (o->type == CLI_BOOL) {
            if (value != NULL)
                return cli_usage_error("%s takes no value", shown);
        } else if (value == NULL) {
            if (i + 1 >= argc)
                return cli_usage_error("%s needs a value", shown);
            value = argv[++i];
        }
        int rc = set_value(o, shown, value ? value : "");
        if (rc != 0)
            return rc;
    }
    return -1;
}

/* ---- runtime and model ------------------------------------------------- */

const char *cli_simulated(void)
{
    const char *s = getenv("TESSERA_SIMULATE");
    return s != NULL && *s != '\0' ? s : NULL;
}

int cli_refuse_simulation(const char *consequence)
{
    const char *platform = cli_simulated();
    if (platform == NULL)
        return 0;
    return cli_usage_error("TESSERA_SIMULATE=%s: simulated runs have no real data (every "
                           "tensor reads as zeros), so %s: use tessera-sim to simulate a "
                           "training step (docs/simulation.md), or unset TESSERA_SIMULATE",
                           platform, consequence);
}

int cli_runtime_init(int threads, const char *sched)
{
    /* the programs refuse before they touch a file; this is the backstop
     * for one that forgets (its runtime would be the simulated one) */
    int refused = cli_refuse_simulation("this program's results would be meaningless");
    if (refused != 0)
        return refused;
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    if (threads > 0)
        cfg.ncpu = threads;
    else if (tsr_cuda_device_count() > 0)
        /* The model cuts GPU-sized tiles when GPUs are there (docs/gpt2.md),
         * and CPU workers beside them take such tasks under eager and slow
         * the step by orders of magnitude: the GPUs alone, unless --threads
         * or TESSERA_NCPU (which overrides this) asks for CPU workers. */
        cfg.ncpu = -1;
    if (sched != NULL)
        cfg.sched = sched;
    int rc = tsr_init(&cfg);
    if (rc != TSR_OK)
        return cli_lib_fail(rc, "cannot start the runtime");
    return 0;
}

void cli_model_opts(cli_opt_t *opts, tsr_gpt2_config_t *cfg)
{
    const cli_opt_t o[CLI_MODEL_NOPTS] = {
        {"vocab", 0, CLI_INT, &cfg->vocab_size, 2, 1e7, 0},
        {"context", 0, CLI_INT, &cfg->context, 1, 1e6, 0},
        {"layers", 0, CLI_INT, &cfg->layers, 1, 1e4, 0},
        {"heads", 0, CLI_INT, &cfg->heads, 1, 1e5, 0},
        {"channels", 0, CLI_INT, &cfg->channels, 1, 1e6, 0},
        {"tile-tokens", 0, CLI_INT, &cfg->tile_tokens, 0, 1e7, 0},
        {"tile-vocab", 0, CLI_INT, &cfg->tile_vocab, 0, 1e7, 0},
        {"tile-hidden", 0, CLI_INT, &cfg->tile_hidden, 0, 1e7, 0},
        {"tile-channels", 0, CLI_INT, &cfg->tile_channels, 0, 1e6, 0},
    };
    memcpy(opts, o, sizeof o);
}

int cli_config_from_checkpoint(const char *what, const tsr_gpt2_config_t *ckpt,
                               const tsr_gpt2_config_t *flags, cli_opt_t *model_opts,
                               tsr_gpt2_config_t *out)
{
    static const char *names[] = {"vocab", "context", "layers", "heads", "channels"};
    const int have[] = {ckpt->vocab_size, ckpt->context, ckpt->layers, ckpt->heads,
                        ckpt->channels};
    const int want[] = {flags->vocab_size, flags->context, flags->layers, flags->heads,
                        flags->channels};
    for (int i = 0; i < 5; i++)
        if (cli_seen(model_opts, CLI_MODEL_NOPTS, names[i]) && have[i] != want[i])
            return cli_fail("--%s %d conflicts with '%s' (%s %d)", names[i], want[i], what,
                            names[i], have[i]);
    *out = *ckpt;
    out->tile_tokens = flags->tile_tokens;
    out->tile_vocab = flags->tile_vocab;
    out->tile_hidden = flags->tile_hidden;
    out->tile_channels = flags->tile_channels;
    out->recompute = flags->recompute;
    out->precision = flags->precision;
    return 0;
}

int cli_read_config(const char *path, tsr_gpt2_config_t *cfg)
{
    if (cli_regular_file("checkpoint", path) != 0)
        return 1;
    int rc = tsr_gpt2_read_config(path, cfg);
    if (rc != TSR_OK)
        return cli_lib_fail(rc, "cannot read the configuration of checkpoint '%s'", path);
    return 0;
}

void cli_config_describe(const tsr_gpt2_config_t *cfg, char *buf, size_t size)
{
    snprintf(buf, size, "%d layers, %d heads, %d channels, context %d, vocab %d", cfg->layers,
             cfg->heads, cfg->channels, cfg->context, cfg->vocab_size);
}

/* ---- tokenizer and data ------------------------------------------------ */

/* The first of two candidate files that exists in dir, into buf. */
static int find_in_dir(char *buf, size_t size, const char *dir, const char *a, const char *b)
{
    if (cli_path(buf, size, dir, a) != 0)
        return 1;
    if (cli_file_exists(buf))
        return 0;
    char alt[4096];
    if (cli_path(alt, sizeof alt, dir, b) != 0)
        return 1;
    if (cli_file_exists(alt)) {
        snprintf(buf, size, "%s", alt);
        return 0;
    }
    return cli_fail("tokenizer folder '%s' has neither %s nor %s", dir, a, b);
}

static int open_json(const char *path, tsr_tokenizer_t **out)
{
    int rc = tsr_tokenizer_open_json(out, path);
    if (rc != TSR_OK)
        return cli_lib_fail(rc, "cannot load the tokenizer '%s'", path);
    return 0;
}

int cli_tokenizer_open(const char *dir, tsr_tokenizer_t **out)
{
    int rc;
    if (dir == NULL) {
        rc = tsr_tokenizer_open(out, NULL, NULL);
        if (rc != TSR_OK)
            return cli_lib_fail(rc, "cannot create the byte-level tokenizer");
        return 0;
    }
    struct stat st;
    if (stat(dir, &st) != 0)
        return cli_fail("tokenizer folder '%s' %s", dir,
                        errno == ENOENT ? "does not exist" : strerror(errno));
    if (S_ISREG(st.st_mode))
        return open_json(dir, out); /* a tokenizer.json named directly */
    if (!S_ISDIR(st.st_mode))
        return cli_fail("tokenizer folder '%s' is not a folder", dir);
    char enc[4096], bpe[4096];
    /* a folder with only a tokenizer.json (Llama 3's) */
    char alt[4096];
    if (cli_path(enc, sizeof enc, dir, "encoder.json") != 0 ||
        cli_path(alt, sizeof alt, dir, "vocab.json") != 0 ||
        cli_path(bpe, sizeof bpe, dir, "tokenizer.json") != 0)
        return 1;
    if (!cli_file_exists(enc) && !cli_file_exists(alt) && cli_file_exists(bpe))
        return open_json(bpe, out);
    if (find_in_dir(enc, sizeof enc, dir, "encoder.json", "vocab.json") != 0 ||
        find_in_dir(bpe, sizeof bpe, dir, "vocab.bpe", "merges.txt") != 0)
        return 1;
    rc = tsr_tokenizer_open(out, enc, bpe);
    if (rc != TSR_OK)
        return cli_lib_fail(rc, "cannot load the tokenizer from '%s'", dir);
    return 0;
}

int cli_check_shard(const char *role, const char *path, int vocab, size_t min_tokens,
                    size_t *ntokens, int *max_id)
{
    if (cli_regular_file(role, path) != 0 || shards_check(role, path) != 0)
        return 1;
    tsr_shard_t *s = NULL;
    int rc = tsr_shard_open(&s, path);
    if (rc != TSR_OK)
        return cli_lib_fail(rc, "%s '%s' is not a token shard", role, path);
    size_t n = tsr_shard_size(s);
    /* GPT-2's uint16 tokens or Llama 3's uint32 ones */
    const uint16_t *t16 = tsr_shard_width(s) == 2 ? tsr_shard_tokens(s) : NULL;
    const uint32_t *t32 = tsr_shard_width(s) == 4 ? tsr_shard_tokens32(s) : NULL;
    int bad = 0, max = 0;
    if (n < min_tokens) {
        bad = cli_fail("%s '%s' has %zu tokens, fewer than the %zu that one batch needs "
                       "(sequences x seq + 1); use a smaller batch or --seq",
                       role, path, n, min_tokens);
    } else {
        for (size_t i = 0; i < n; i++) {
            int id = t16 != NULL ? (int)t16[i] : (int)t32[i]; /* <= INT32_MAX: checked */
            if (id > max)
                max = id;
            if (id >= vocab) {
                bad = cli_fail("%s '%s' has token id %d (at token %zu), outside the model's "
                               "vocabulary of %d ids: data from another tokenizer?",
                               role, path, id, i, vocab);
                break;
            }
        }
    }
    tsr_shard_close(s);
    if (ntokens != NULL)
        *ntokens = n;
    if (max_id != NULL)
        *max_id = max;
    return bad;
}

/* ---- small helpers ----------------------------------------------------- */

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cli_duration(double s, char *buf, size_t size)
{
    if (!(s >= 0.0) || s > 1e8) {
        snprintf(buf, size, "?");
        return;
    }
    long t = (long)(s + 0.5);
    if (t < 60)
        snprintf(buf, size, "%lds", t);
    else if (t < 3600)
        snprintf(buf, size, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(buf, size, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
}

int cli_read_file(const char *path, char **data, size_t *len)
{
    int is_stdin = strcmp(path, "-") == 0;
    /* A stream is read as '-' (standard input): a FIFO by name blocks the
     * open for ever when nothing writes to it, so only regular files are
     * opened by name. */
    struct stat st;
    if (!is_stdin && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return cli_fail("'%s' is a directory, not a file", path);
    char why[128];
    FILE *f = is_stdin ? stdin : tsr__fopen_regular(path, why, sizeof why);
    if (f == NULL)
        return errno == EINVAL
                   ? cli_fail("'%s' is %s; give '-' to read standard input", path, why)
                   : cli_fail("cannot open '%s': %s", path, why);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    if (buf == NULL) {
        if (!is_stdin)
            fclose(f);
        return cli_fail("out of memory reading '%s'", path);
    }
    for (;;) {
        if (n == cap) {
            char *nb = cap > ((size_t)-1) / 4 ? NULL : realloc(buf, 2 * cap + 1);
            if (nb == NULL) {
                free(buf);
                if (!is_stdin)
                    fclose(f);
                return cli_fail("out of memory reading '%s'", path);
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int err = ferror(f);
    if (!is_stdin)
        fclose(f);
    if (err) {
        free(buf);
        return cli_fail("cannot read '%s'", path);
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return 0;
}

int cli_path(char *buf, size_t size, const char *dir, const char *name)
{
    size_t len = strlen(dir);
    int n = snprintf(buf, size, len > 0 && dir[len - 1] == '/' ? "%s%s" : "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= size)
        return cli_fail("path too long: '%s/%s'", dir, name);
    return 0;
}

int cli_mkdirs(const char *path)
{
    char buf[4096];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf)
        return cli_fail("bad folder name '%s'", path);
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return cli_fail("cannot create folder '%s': %s", buf, strerror(errno));
        buf[i] = c;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return cli_fail("'%s' exists and is not a folder", path);
    return 0;
}

int cli_regular_file(const char *role, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return errno == ENOENT ? cli_fail("%s '%s' does not exist", role, path)
                               : cli_fail("%s '%s' cannot be reached: %s", role, path,
                                          strerror(errno));
    if (S_ISDIR(st.st_mode))
        return cli_fail("%s '%s' is a directory, not a file", role, path);
    if (!S_ISREG(st.st_mode))
        return cli_fail("%s '%s' is not a regular file (a %s)", role, path,
                        S_ISFIFO(st.st_mode)   ? "FIFO"
                        : S_ISSOCK(st.st_mode) ? "socket"
                        : S_ISCHR(st.st_mode)  ? "character device"
                        : S_ISBLK(st.st_mode)  ? "block device"
                                               : "special file");
    return 0;
}

int cli_file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* File systems that cannot sync a folder (EINVAL) still hold the files. */
int cli_pid_gone(long pid)
{
    return pid == (long)getpid() || (kill((pid_t)pid, 0) != 0 && errno == ESRCH);
}

int cli_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return cli_fail("cannot open folder '%s': %s", dir, strerror(errno));
    int rc = fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP;
    int e = errno;
    close(fd);
    return rc ? cli_fail("cannot sync folder '%s': %s", dir, strerror(e)) : 0;
}

int cli_write_synced(const char *path, const void *buf, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0)
        return cli_fail("cannot create '%s': %s", path, strerror(errno));
    const char *failed = NULL;
    if (fault_write() != 0)
        failed = "write";
    else {
        ssize_t w = write(fd, buf, n);
        if (w != (ssize_t)n)
            failed = "write", errno = w < 0 ? errno : ENOSPC; /* a short write: full */
    }
    if (failed == NULL) {
        fault_after();
        if (fsync(fd) != 0)
            failed = "sync";
    }
    int e = errno;
    if (close(fd) != 0 && failed == NULL)
        failed = "close", e = errno;
    if (failed == NULL)
        return 0;
    unlink(path);
    return cli_fail("cannot %s '%s': %s", failed, path, strerror(e));
}

int cli_fnv64_file(const char *path, uint64_t *sum)
{
    char why[128];
    FILE *f = tsr__fopen_regular(path, why, sizeof why);
    if (f == NULL)
        return cli_fail("cannot open '%s': %s", path, why);
    static unsigned char buf[1 << 16];
    uint64_t h = 0xcbf29ce484222325ull;
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        for (size_t i = 0; i < n; i++)
            h = (h ^ buf[i]) * 0x100000001b3ull;
    int err = ferror(f);
    fclose(f);
    if (err)
        return cli_fail("cannot read '%s'", path);
    *sum = h;
    return 0;
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void cli_rng_seed(cli_rng_t *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t cli_rng_next(cli_rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double cli_rng_uniform(cli_rng_t *r)
{
    return (double)(cli_rng_next(r) >> 11) * 0x1.0p-53;
}

void cli_json_str(const char *s)
{
    putchar('"');
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            putchar('\\');
        if ((unsigned char)*s >= 0x20)
            putchar(*s);
    }
    putchar('"');
}
