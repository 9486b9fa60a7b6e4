/* tools/shards.c — the shard pair of tessera-tokenize, published together
 * under a manifest (see shards.h).
 */
#include "shards.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "fault.h"
#include "runtime/file.h"

#define MAGIC "tessera-tokenize shards 1"

/* The paths of a pair: final names, temporaries, the backup of the old
 * validation shard. */
typedef struct pair {
    char dir[4096], base[1024];
    char train[4096], val[4096], manifest[4096];
    char train_tmp[4096], val_tmp[4096], val_old[4096], manifest_tmp[4096];
} pair_t;

static int pair_paths(pair_t *p, const char *prefix)
{
    const char *slash = strrchr(prefix, '/');
    size_t dlen = slash ? (size_t)(slash - prefix) : 1;
    const char *base = slash ? slash + 1 : prefix;
    long pid = (long)getpid();
    if (dlen >= sizeof p->dir || strlen(base) + 16 >= sizeof p->base ||
        strlen(prefix) + 64 >= sizeof p->train)
        return cli_fail("output prefix too long: '%s'", prefix);
    if (*base == '\0')
        return cli_fail("output prefix '%s' names a folder, not a file prefix", prefix);
    snprintf(p->dir, sizeof p->dir, "%.*s", (int)dlen, slash ? prefix : ".");
    if (slash == prefix)
        snprintf(p->dir, sizeof p->dir, "/");
    snprintf(p->base, sizeof p->base, "%s", base);
    snprintf(p->train, sizeof p->train, "%s_train.bin", prefix);
    snprintf(p->val, sizeof p->val, "%s_val.bin", prefix);
    snprintf(p->manifest, sizeof p->manifest, "%s.manifest", prefix);
    snprintf(p->train_tmp, sizeof p->train_tmp, "%s_train.bin.tmp.%ld", prefix, pid);
    snprintf(p->val_tmp, sizeof p->val_tmp, "%s_val.bin.tmp.%ld", prefix, pid);
    snprintf(p->val_old, sizeof p->val_old, "%s_val.bin.old.%ld", prefix, pid);
    snprintf(p->manifest_tmp, sizeof p->manifest_tmp, "%s.manifest.tmp.%ld", prefix, pid);
    return 0;
}

/* Remove the temporaries and backups that a killed run left beside the
 * pair: "<base>_train.bin.…<pid>", "<base>_val.bin.…<pid>",
 * "<base>.manifest.…<pid>" of processes that are gone. */
static int clean(const pair_t *p)
{
    static const char *const kinds[] = {"_train.bin.", "_val.bin.", ".manifest."};
    size_t blen = strlen(p->base);
    DIR *d = opendir(p->dir);
    if (d == NULL)
        return cli_fail("cannot list '%s': %s", p->dir, strerror(errno));
    int status = 0;
    struct dirent *e;
    while (status == 0 && (e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        int ours = 0;
        for (int k = 0; k < 3 && strncmp(n, p->base, blen) == 0; k++)
            ours |= strncmp(n + blen, kinds[k], strlen(kinds[k])) == 0;
        const char *dot = strrchr(n, '.');
        char *end;
        long pid = ours && dot ? strtol(dot + 1, &end, 10) : 0;
        if (!ours || pid <= 0 || *end != '\0' ||
            (strncmp(dot - 4, ".tmp", 4) != 0 && strncmp(dot - 4, ".old", 4) != 0) ||
            !cli_pid_gone(pid))
            continue;
        char path[4096];
        if (cli_path(path, sizeof path, p->dir, n) != 0)
            status = 1;
        else if (unlink(path) != 0 && errno != ENOENT)
            status = cli_fail("cannot remove the leftover '%s': %s", path, strerror(errno));
    }
    closedir(d);
    return status;
}

/* One shard, complete and synced, at tmp; its checksum. */
static int write_shard(const char *tmp, const int32_t *tokens, size_t n, int width,
                       uint64_t *sum)
{
    if (fault_write() != 0)
        return cli_fail("cannot write '%s': %s (injected by TESSERA_FAULT_AT)", tmp,
                        strerror(ENOSPC));
    int rc = tsr_shard_write_width(tmp, tokens, n, width);
    if (rc != TSR_OK)
        return cli_lib_fail(rc, "cannot write '%s'", tmp);
    fault_after();
    return cli_fnv64_file(tmp, sum);
}

/* The manifest, complete and synced, at its temporary name. */
static int write_manifest(const pair_t *p, size_t ntrain, uint64_t strain, size_t nval,
                          uint64_t sval)
{
    char text[4096];
    int n = snprintf(text, sizeof text, MAGIC "\ntrain %s_train.bin %zu %016" PRIx64 "\n",
                     p->base, ntrain, strain);
    if (nval > 0)
        n += snprintf(text + n, sizeof text - (size_t)n, "val %s_val.bin %zu %016" PRIx64 "\n",
                      p->base, nval, sval);
    if (cli_write_synced(p->manifest_tmp, text, (size_t)n) != 0)
        return 1;
    fault_after();
    return 0;
}

/* The renames. The old validation shard gets a second name (a backup for a
 * rollback) and stays in place until the new one replaces it, so the pair
 * never lacks a validation shard it had. On failure everything is as it was. */
static int swap_in(const pair_t *p, size_t nval)
{
    struct stat st;
    int had_val = stat(p->val, &st) == 0;
    if (had_val) {
        /* with no new validation shard, the old one goes: moved aside */
        if ((nval > 0 ? link(p->val, p->val_old) : rename(p->val, p->val_old)) != 0)
            return cli_fail("cannot keep '%s' as '%s': %s", p->val, p->val_old,
                            strerror(errno));
        fault_after();
    }
    if (nval > 0) {
        if (rename(p->val_tmp, p->val) != 0) {
            int e = errno;
            if (had_val)
                unlink(p->val_old);
            return cli_fail("cannot rename '%s' to '%s': %s", p->val_tmp, p->val, strerror(e));
        }
        fault_after();
    }
    if (rename(p->train_tmp, p->train) != 0) {
        int e = errno;
        /* the pair as it was: the old validation shard back (or none) */
        if (had_val)
            rename(p->val_old, p->val);
        else
            unlink(p->val);
        return cli_fail("cannot rename '%s' to '%s': %s (the previous '%s' is back)",
                        p->train_tmp, p->train, strerror(e), p->val);
    }
    fault_after();
    return 0;
}

int shards_publish(const char *prefix, const int32_t *tokens, size_t ntrain, size_t nval,
                   int width)
{
    pair_t p;
    uint64_t strain = 0, sval = 0;
    if (pair_paths(&p, prefix) != 0 || clean(&p) != 0)
        return 1;
    /* 1. every byte written and synced under temporary names: a full disk
     *    fails here, with the old pair untouched */
    int status = write_shard(p.train_tmp, tokens, ntrain, width, &strain);
    if (status == 0 && nval > 0)
        status = write_shard(p.val_tmp, tokens + ntrain, nval, width, &sval);
    if (status == 0)
        status = write_manifest(&p, ntrain, strain, nval, sval);
    /* 2. renames only: the shards, then the manifest that describes them */
    if (status == 0)
        status = swap_in(&p, nval);
    if (status != 0) {
        unlink(p.train_tmp);
        unlink(p.val_tmp);
        unlink(p.manifest_tmp);
        return status;
    }
    if (rename(p.manifest_tmp, p.manifest) != 0) {
        /* the new pair is in, exposed by the old manifest as not matching */
        status = cli_fail("cannot rename '%s' to '%s': %s", p.manifest_tmp, p.manifest,
                          strerror(errno));
        unlink(p.manifest_tmp);
    } else {
        fault_after();
        status = cli_sync_dir(p.dir);
    }
    if (status == 0)
        fault_after();
    /* 3. the old validation shard is of no use any more */
    if (unlink(p.val_old) != 0 && errno != ENOENT && status == 0)
        status = cli_fail("cannot remove '%s': %s", p.val_old, strerror(errno));
    if (status == 0)
        fault_after();
    return status;
}

/* ---- checking ------------------------------------------------------------ */

int shards_check(const char *role, const char *path)
{
    static const char *const kinds[] = {"_train.bin", "_val.bin"};
    size_t len = strlen(path);
    int kind = -1;
    for (int k = 0; k < 2; k++)
        if (len > strlen(kinds[k]) && strcmp(path + len - strlen(kinds[k]), kinds[k]) == 0)
            kind = k;
    if (kind < 0 || len + 16 > 4096)
        return 0;
    char manifest[4096];
    snprintf(manifest, sizeof manifest, "%.*s.manifest", (int)(len - strlen(kinds[kind])),
             path);
    char why[128];
    FILE *f = tsr__fopen_regular(manifest, why, sizeof why);
    if (f == NULL && errno == EINVAL)
        return cli_fail("%s '%s': its manifest '%s' is %s", role, path, manifest, why);
    if (f == NULL)
        return 0; /* shards of another tool */
    char line[4352], name[4096], want_name[4096];
    const char *slash = strrchr(path, '/');
    snprintf(want_name, sizeof want_name, "%s", slash ? slash + 1 : path);
    int magic = fgets(line, sizeof line, f) != NULL && strcmp(line, MAGIC "\n") == 0;
    int found = 0;
    uint64_t want = 0;
    while (magic && !found && fgets(line, sizeof line, f) != NULL) {
        char what[8];
        unsigned long long tokens;
        char hex[17];
        if (sscanf(line, "%7s %4095s %llu %16s", what, name, &tokens, hex) == 4 &&
            strcmp(what, kind ? "val" : "train") == 0 && strcmp(name, want_name) == 0) {
            char *end;
            want = strtoull(hex, &end, 16);
            found = *end == '\0' && strlen(hex) == 16;
        }
    }
    fclose(f);
    if (!magic)
        return cli_fail("'%s' is not a manifest of tessera-tokenize", manifest);
    if (!found)
        return cli_fail("%s '%s' is not listed in '%s': left from another run of "
                        "tessera-tokenize? run it again",
                        role, path, manifest);
    uint64_t got;
    if (cli_fnv64_file(path, &got) != 0)
        return 1;
    if (got != want)
        return cli_fail("%s '%s' does not match '%s' (checksum %016" PRIx64 " listed, %016"
                        PRIx64 " found): the shards are not of one run of tessera-tokenize "
                        "(interrupted while replacing them?); run it again",
                        role, path, manifest, want, got);
    return 0;
}
