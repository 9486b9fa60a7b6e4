/* tools/ckpt.c — the run folder of tessera-train: a checkpoint folder per
 * save made visible by one rename, the pointer file `latest`, the model's
 * checksum in the state (see ckpt.h); every action of a save is a point of
 * the fault hook (fault.h).
 */
#include "ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "fault.h"
#include "runtime/file.h"

#define LATEST "latest"
#define MODEL_FILE "model.safetensors"
#define MODEL_DIR "model" /* a Llama's HF folder */
#define STATE_FILE "train.state"
#define SUM_KEY "model-fnv64 "

/* The name of the weights in a checkpoint folder. */
static const char *model_name(model_arch_t arch)
{
    return arch == MODEL_LLAMA ? MODEL_DIR : MODEL_FILE;
}

/* ---- files and folders --------------------------------------------------- */

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p) != 0 && errno != ENOENT;
}

/* rm -r; 0 or -1 (errno set). */
static int rmtree(const char *path)
{
    int rc = nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return rc != 0 && errno != ENOENT ? -1 : 0;
}

/* "step-00000050" or "step-00000050.1": the step, or -1. */
static int step_of_name(const char *name)
{
    if (strncmp(name, "step-", 5) != 0)
        return -1;
    int step = 0;
    for (int i = 5; i < 13; i++) {
        if (name[i] < '0' || name[i] > '9')
            return -1;
        step = step * 10 + (name[i] - '0');
    }
    return name[13] == '\0' || strcmp(name + 13, ".1") == 0 ? step : -1;
}

/* The checkpoint folder name that OUT/latest holds, into name[64]; 0, 1
 * after reporting a bad pointer, or -1 when there is no OUT/latest. */
static int read_latest(const char *out, char *name)
{
    char path[4096], buf[64];
    if (cli_path(path, sizeof path, out, LATEST) != 0)
        return 1;
    char why[128];
    FILE *f = tsr__fopen_regular(path, why, sizeof why);
    if (f == NULL && errno == ENOENT)
        return -1;
    if (f == NULL)
        return cli_fail("cannot open '%s': %s", path, why);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (n == 0 || buf[n - 1] != '\n')
        return cli_fail("'%s' is not a checkpoint pointer (one line 'step-NNNNNNNN')", path);
    buf[n - 1] = '\0';
    if (step_of_name(buf) < 0)
        return cli_fail("'%s' names '%.60s', not a checkpoint folder 'step-NNNNNNNN'", path, buf);
    memcpy(name, buf, n);
    return 0;
}

/* ".step-…tmp.<pid>" and "latest.tmp.<pid>": the pid; 0 if not ours. */
static long temp_pid(const char *name)
{
    const char *t = strstr(name, ".tmp.");
    if (t == NULL || (strncmp(name, ".step-", 6) != 0 && strncmp(name, LATEST ".tmp.", 11) != 0))
        return 0;
    char *end;
    long pid = strtol(t + 5, &end, 10);
    return *end == '\0' && pid > 0 ? pid : 0;
}

/* ---- cleaning ------------------------------------------------------------ */

int ckpt_clean(const char *out)
{
    char latest[64] = "";
    if (read_latest(out, latest) > 0)
        return 1;
    DIR *d = opendir(out);
    if (d == NULL)
        return errno == ENOENT ? 0 : cli_fail("cannot list '%s': %s", out, strerror(errno));
    int status = 0;
    struct dirent *e;
    while (status == 0 && (e = readdir(d)) != NULL) {
        long pid = temp_pid(e->d_name);
        /* a temporary of a running process (not this one) is its save */
        int stale = pid > 0 && cli_pid_gone(pid);
        /* a step folder `latest` does not name: published by no pointer
         * (killed before the pointer moved) or replaced (before removal) */
        int orphan = step_of_name(e->d_name) >= 0 && strcmp(e->d_name, latest) != 0;
        char path[4096];
        if (!stale && !orphan)
            continue;
        if (cli_path(path, sizeof path, out, e->d_name) != 0)
            status = 1;
        else if (rmtree(path) != 0)
            status = cli_fail("cannot remove the leftover '%s': %s", path, strerror(errno));
    }
    closedir(d);
    return status;
}

/* ---- saving -------------------------------------------------------------- */

/* OUT/latest := name, atomically and durably: a temporary, written and
 * synced, renamed over the pointer, the folder synced. Returns 0 or 1. */
static int write_latest(const char *out, const char *name)
{
    char path[4096], tmp[4096], line[64];
    if (cli_path(path, sizeof path, out, LATEST) != 0)
        return 1;
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return cli_fail("path too long: '%s.tmp'", path);
    size_t n = (size_t)snprintf(line, sizeof line, "%s\n", name);
    if (cli_write_synced(tmp, line, n) != 0)
        return 1;
    fault_after();
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return cli_fail("cannot rename '%s': %s", tmp, strerror(e));
    }
    fault_after();
    if (cli_sync_dir(out) != 0)
        return 1;
    fault_after();
    return 0;
}

/* The two files into the folder tmp; the state carries extra, then the
 * model's step and checksum. Returns 0 or 1. */
/* OUT/.shard-STEP.rank-R.state: a shard before rank 0 moves it in. */
static int shard_tmp_path(char *path, size_t size, const char *out, int step, int rank)
{
    char name[96];
    snprintf(name, sizeof name, ".shard-%08d.rank-%d.state", step, rank);
    return cli_path(path, size, out, name);
}

int ckpt_save_shard(const char *out, int step, int rank, uint64_t run, model_t *m)
{
    char path[4096], text[128];
    if (shard_tmp_path(path, sizeof path, out, step, rank) != 0)
        return 1;
    snprintf(text, sizeof text, "shard %d\ncheckpoint-step %d\nrun %016" PRIx64 "\n", rank, step,
             run);
    int rc = model_save_state(m, path, text);
    return rc != TSR_OK ? cli_lib_fail(rc, "cannot save '%s'", path) : 0;
}

int ckpt_shard_path(const ckpt_t *c, int rank, char *path, size_t size)
{
    if (rank == 0) {
        snprintf(path, size, "%s", c->state);
        return 0;
    }
    char name[64];
    snprintf(name, sizeof name, STATE_FILE ".%d", rank);
    return cli_path(path, size, c->dir, name);
}

/* Shards of the other ranks into the temporary checkpoint folder tmp. */
static int move_shards(const char *out, const char *tmp, int step, int nshards)
{
    for (int r = 1; r < nshards; r++) {
        char from[4096], to[4096], name[64];
        snprintf(name, sizeof name, STATE_FILE ".%d", r);
        if (shard_tmp_path(from, sizeof from, out, step, r) != 0 ||
            cli_path(to, sizeof to, tmp, name) != 0)
            return 1;
        if (rename(from, to) != 0)
            return cli_fail("cannot move rank %d's optimizer state '%s' into '%s': %s", r,
                            from, to, strerror(errno));
    }
    return 0;
}

static int write_pair(const char *tmp, int step, uint64_t run, model_t *m,
                      const char *extra, ckpt_t *c)
{
    c->arch = m->arch;
    if (cli_path(c->model, sizeof c->model, tmp, model_name(m->arch)) != 0 ||
        cli_path(c->state, sizeof c->state, tmp, STATE_FILE) != 0)
        return 1;
    if (fault_write() != 0)
        return cli_fail("cannot save '%s': %s (injected by TESSERA_FAULT_AT)", c->model,
                        strerror(ENOSPC));
    int rc = model_save(m, c->model);
    if (rc != TSR_OK)
        return cli_lib_fail(rc, "cannot save '%s'", c->model);
    fault_after();
    /* the checksum of the file (or folder) as it is on disk, read back */
    uint64_t sum;
    if (ckpt_model_sum(c->model, &sum) != 0)
        return 1;
    size_t len = strlen(extra);
    char *text = malloc(len + 128);
    if (text == NULL)
        return cli_fail("out of memory");
    snprintf(text, len + 128, "%s%s%016" PRIx64 "\ncheckpoint-step %d\nshard 0\nrun %016" PRIx64
             "\n", extra, SUM_KEY, sum, step, run);
    if (fault_write() != 0) {
        free(text);
        return cli_fail("cannot save '%s': %s (injected by TESSERA_FAULT_AT)", c->state,
                        strerror(ENOSPC));
    }
    rc = model_save_state(m, c->state, text);
    free(text);
    if (rc != TSR_OK)
        return cli_lib_fail(rc, "cannot save '%s'", c->state);
    fault_after();
    if (cli_sync_dir(tmp) != 0)
        return 1;
    fault_after();
    return 0;
}

int ckpt_save(const char *out, int step, uint64_t run, model_t *m, const char *extra,
              ckpt_t *saved)
{
    return ckpt_save_sharded(out, step, 1, run, m, extra, saved);
}

int ckpt_save_sharded(const char *out, int step, int nshards, uint64_t run, model_t *m,
                      const char *extra, ckpt_t *saved)
{
    char prev[64] = "", name[64], tmp[4096], final[4096];
    if (cli_mkdirs(out) != 0 || ckpt_clean(out) != 0 || read_latest(out, prev) > 0)
        return 1;
    /* A run restarted from scratch in the same folder may reach the step
     * that `latest` names: that folder stays until its successor is in. */
    snprintf(name, sizeof name, "step-%08d", step);
    if (strcmp(name, prev) == 0)
        snprintf(name, sizeof name, "step-%08d.1", step);
    if (cli_path(final, sizeof final, out, name) != 0)
        return 1;
    char tmp_name[96];
    snprintf(tmp_name, sizeof tmp_name, ".%s.tmp.%ld", name, (long)getpid());
    if (cli_path(tmp, sizeof tmp, out, tmp_name) != 0)
        return 1;

    /* 1. the pair, complete, in a temporary folder */
    if (mkdir(tmp, 0777) != 0)
        return cli_fail("cannot create folder '%s': %s", tmp, strerror(errno));
    fault_after();
    int published = 0, status = write_pair(tmp, step, run, m, extra, saved);
    if (status == 0 && nshards > 1) {
        status = move_shards(out, tmp, step, nshards);
        if (status == 0)
            status = cli_sync_dir(tmp);
    }
    /* 2. made visible whole by one rename */
    if (status == 0 && rename(tmp, final) != 0)
        status = cli_fail("cannot rename '%s' to '%s': %s", tmp, final, strerror(errno));
    if (status == 0) {
        published = 1;
        fault_after();
        status = cli_sync_dir(out);
    }
    if (status == 0)
        fault_after();
    /* 3. the pointer moves to it */
    if (status == 0)
        status = write_latest(out, name);
    if (status != 0) {
        /* `latest` still names the previous checkpoint: drop the new one */
        rmtree(published ? final : tmp);
        return 1;
    }
    /* 4. the checkpoint it replaced goes (any other step folder with it) */
    if (prev[0] != '\0') {
        char old[4096];
        if (cli_path(old, sizeof old, out, prev) == 0 && rmtree(old) != 0)
            fprintf(stderr, "%s: warning: cannot remove the previous checkpoint '%s': %s\n",
                    cli_prog, old, strerror(errno));
        fault_after();
    }
    saved->step = step;
    saved->arch = m->arch;
    snprintf(saved->dir, sizeof saved->dir, "%s", final);
    return cli_path(saved->model, sizeof saved->model, final, model_name(m->arch)) != 0 ||
           cli_path(saved->state, sizeof saved->state, final, STATE_FILE) != 0;
}

/* ---- finding and checking ------------------------------------------------ */

int ckpt_latest(const char *out, ckpt_t *c)
{
    char name[64], old_model[4096];
    int rc = read_latest(out, name);
    if (rc > 0)
        return 1;
    if (rc < 0) {
        if (cli_path(old_model, sizeof old_model, out, MODEL_FILE) == 0 &&
            cli_file_exists(old_model))
            return cli_fail("'%s' holds model.safetensors but no '%s' pointer: a run of an "
                            "earlier tessera-train, whose model and state cannot be checked "
                            "to match; start a new run from it with --init '%s'",
                            out, LATEST, old_model);
        return cli_fail("no checkpoint to resume in '%s' (no '%s/%s')", out, out, LATEST);
    }
    c->step = step_of_name(name);
    if (cli_path(c->dir, sizeof c->dir, out, name) != 0 ||
        cli_path(c->model, sizeof c->model, c->dir, MODEL_DIR) != 0 ||
        cli_path(c->state, sizeof c->state, c->dir, STATE_FILE) != 0)
        return 1;
    struct stat st;
    if (stat(c->dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return cli_fail("'%s/%s' names '%s', which is missing: the run folder was changed by "
                        "hand?", out, LATEST, c->dir);
    /* a Llama's checkpoint holds its HF folder; a GPT-2's its file */
    c->arch = stat(c->model, &st) == 0 && S_ISDIR(st.st_mode) ? MODEL_LLAMA : MODEL_GPT2;
    if (c->arch == MODEL_GPT2 && cli_path(c->model, sizeof c->model, c->dir, MODEL_FILE) != 0)
        return 1;
    if ((c->arch == MODEL_GPT2 && cli_regular_file("checkpoint file", c->model) != 0) ||
        cli_regular_file("checkpoint file", c->state) != 0)
        return 1;
    return 0;
}

/* The value after "\n<key>" in text (key ends with a space), or NULL. */
static const char *find_line(const char *text, const char *key)
{
    size_t k = strlen(key);
    for (const char *p = text; p != NULL; p = strchr(p, '\n')) {
        if (*p == '\n')
            p++;
        if (strncmp(p, key, k) == 0)
            return p + k;
    }
    return NULL;
}

void ckpt_shard_id(const char *extra, ckpt_shard_id_t *id)
{
    const char *r = find_line(extra, "shard "), *s = find_line(extra, "checkpoint-step "),
               *u = find_line(extra, "run ");
    id->rank = r ? atoi(r) : 0;
    id->step = s ? atoi(s) : -1;
    id->run = u ? strtoull(u, NULL, 16) : 0;
}

int ckpt_verify(const ckpt_t *c, const char *extra)
{
    const char *s = find_line(extra, "checkpoint-step "), *h = find_line(extra, SUM_KEY);
    char *end;
    long step = s ? strtol(s, &end, 10) : -1;
    if (s == NULL || *end != '\n' || h == NULL)
        return cli_fail("'%s' records no step or no checksum of its model: not written by "
                        "this tessera-train", c->state);
    if (step != c->step)
        return cli_fail("'%s' is the optimizer state of step %ld, but its folder '%s' is the "
                        "checkpoint of step %d: refusing to resume from a mismatched pair",
                        c->state, step, c->dir, c->step);
    uint64_t want = strtoull(h, &end, 16), got;
    if (end != h + 16 || *end != '\n')
        return cli_fail("'%s' holds a malformed checksum", c->state);
    if (ckpt_model_sum(c->model, &got) != 0)
        return 1;
    if (got != want)
        return cli_fail("'%s' does not match '%s' (model checksum %016" PRIx64 " recorded, "
                        "%016" PRIx64 " found): the weights and the optimizer state are of "
                        "different saves or the file was changed; refusing to resume",
                        c->model, c->state, want, got);
    return 0;
}

int ckpt_model_path(const char *arg, char *buf, size_t size)
{
    struct stat st;
    if (stat(arg, &st) == 0 && S_ISDIR(st.st_mode)) {
        char latest[4096], model[4096];
        ckpt_t c;
        if (cli_path(latest, sizeof latest, arg, LATEST) != 0 ||
            cli_path(model, sizeof model, arg, MODEL_FILE) != 0)
            return 1;
        if (stat(latest, &st) == 0) {
            if (ckpt_latest(arg, &c) != 0)
                return 1;
            snprintf(model, sizeof model, "%s", c.model);
        } else if (!cli_file_exists(model))
            return cli_fail("checkpoint '%s' is a folder with neither a '%s' pointer (a run "
                            "of tessera-train) nor a %s", arg, LATEST, MODEL_FILE);
        if ((size_t)snprintf(buf, size, "%s", model) >= size)
            return cli_fail("path too long: '%s'", model);
        return 0;
    }
    if (cli_regular_file("checkpoint", arg) != 0)
        return 1;
    if ((size_t)snprintf(buf, size, "%s", arg) >= size)
        return cli_fail("path too long: '%s'", arg);
    return 0;
}

int ckpt_model_path_arch(model_arch_t arch, const char *arg, char *buf, size_t size)
{
    if (arch == MODEL_GPT2)
        return ckpt_model_path(arg, buf, size);
    struct stat st;
    if (stat(arg, &st) != 0)
        return cli_fail("checkpoint '%s' does not exist", arg);
    char path[4096];
    const char *found = arg;
    if (S_ISDIR(st.st_mode)) {
        ckpt_t c;
        if (cli_path(path, sizeof path, arg, LATEST) != 0)
            return 1;
        if (stat(path, &st) == 0) { /* a run folder */
            if (ckpt_latest(arg, &c) != 0)
                return 1;
            if (c.arch != MODEL_LLAMA)
                return cli_fail("'%s' is a run of a GPT-2, not of a Llama (--arch gpt2)", arg);
            snprintf(path, sizeof path, "%s", c.model);
            found = path;
        } else if (cli_path(path, sizeof path, arg, MODEL_DIR) == 0 && stat(path, &st) == 0 &&
                   S_ISDIR(st.st_mode)) { /* a checkpoint folder of a run */
            found = path;
        }
    }
    if ((size_t)snprintf(buf, size, "%s", found) >= size)
        return cli_fail("path too long: '%s'", found);
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

int ckpt_model_sum(const char *path, uint64_t *sum)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return cli_fnv64_file(path, sum);
    struct dirent **names;
    int n = scandir(path, &names, NULL, by_name);
    if (n < 0)
        return cli_fail("cannot list '%s': %s", path, strerror(errno));
    uint64_t h = 0xcbf29ce484222325ull;
    int status = 0;
    for (int i = 0; i < n; i++) {
        char file[4096];
        uint64_t part;
        if (status == 0 && cli_path(file, sizeof file, path, names[i]->d_name) != 0)
            status = 1;
        if (status == 0 && stat(file, &st) == 0 && S_ISREG(st.st_mode)) {
            if (cli_fnv64_file(file, &part) != 0)
                status = 1;
            /* the name, then the file's own sum, into the folder's */
            for (const char *p = names[i]->d_name; status == 0 && *p; p++)
                h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
            for (int b = 0; status == 0 && b < 8; b++)
                h = (h ^ ((part >> (8 * b)) & 0xff)) * 0x100000001b3ull;
        }
        free(names[i]);
    }
    free(names);
    *sum = h;
    return status;
}
