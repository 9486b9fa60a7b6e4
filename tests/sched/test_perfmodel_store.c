/* The model store (runtime/perfmodel_store.c) through its internal
 * interface: where the machine directory goes, whole-file writes that
 * replace a file and leave no temporary behind, reads that tell a missing
 * file from a bad one, and the generation that tells the bus model a new
 * init began. Files are checked by reading them back here with stdio, not
 * through the store.
 *
 * Every test works in a fresh directory under /tmp.
 */
#include <criterion/criterion.h>
#include <tessera/tessera.h>

#include "runtime/perfmodel_store.h"

#include <dirent.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[256];

static const char *fresh_dir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tsr-store-test-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    return tmpdir;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    remove(p);
    return 0;
}

static void cleanup(void)
{
    tsr__pmstore_close();
    nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The whole file at path, read here (NULL if it cannot be opened). */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char buf[1 << 16];
    *len = fread(buf, 1, sizeof buf - 1, f);
    buf[*len] = 0;
    fclose(f);
    return buf;
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Entries of dir other than . and .. */
static int entries(const char *dir, char names[][256], int max)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && n < max)
            snprintf(names[n++], 256, "%s", e->d_name);
    closedir(d);
    return n;
}

Test(store, machine_directory_is_one_level_under_dir_and_made_at_first_write)
{
    const char *dir = fresh_dir();
    char err[256] = "";
    cr_assert_eq(tsr__pmstore_open(dir, err, sizeof err), TSR_OK, "%s", err);
    const char *m = tsr__pmstore_dir();
    size_t dl = strlen(dir);
    cr_assert(strncmp(m, dir, dl) == 0 && m[dl] == '/' && m[dl + 1] && !strchr(m + dl + 1, '/'),
              "%s under %s", m, dir);
    char mdir[PATH_MAX];
    snprintf(mdir, sizeof mdir, "%s", m);
    cr_assert(!exists(mdir), "open created %s", mdir);

    const char text[] = "# a file\nline two\n";
    cr_assert_eq(tsr__pmstore_write("a.txt", text, sizeof text - 1, err, sizeof err), 0, "%s",
                 err);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/a.txt", mdir);
    size_t len;
    const char *got = slurp(path, &len);
    cr_assert_not_null(got, "%s", path);
    cr_assert_eq(len, sizeof text - 1);
    cr_assert(memcmp(got, text, len) == 0);
    cleanup();
}

Test(store, read_returns_what_is_on_disk)
{
    const char *dir = fresh_dir();
    char err[256] = "";
    cr_assert_eq(tsr__pmstore_open(dir, err, sizeof err), TSR_OK);
    /* Bytes 1..255 in a file written here: the store returns them all. */
    char text[255];
    for (int i = 0; i < 255; i++)
        text[i] = (char)(i + 1);
    cr_assert_eq(tsr__pmstore_write("b.txt", "x", 1, err, sizeof err), 0, "%s", err);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/b.txt", tsr__pmstore_dir());
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(text, 1, sizeof text, f), sizeof text);
    fclose(f);
    bool missing = true;
    char *got = tsr__pmstore_read("b.txt", &missing, err, sizeof err);
    cr_assert_not_null(got, "%s", err);
    cr_assert(!missing);
    cr_assert_eq(strlen(got), sizeof text);
    cr_assert(memcmp(got, text, sizeof text) == 0);
    free(got);
    cleanup();
}

Test(store, rewriting_replaces_the_whole_file_and_leaves_no_temporary)
{
    const char *dir = fresh_dir();
    char err[256] = "";
    cr_assert_eq(tsr__pmstore_open(dir, err, sizeof err), TSR_OK);
    static char big[40000];
    memset(big, 'z', sizeof big);
    cr_assert_eq(tsr__pmstore_write("c.txt", big, sizeof big, err, sizeof err), 0, "%s", err);
    cr_assert_eq(tsr__pmstore_write("c.txt", "short\n", 6, err, sizeof err), 0, "%s", err);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/c.txt", tsr__pmstore_dir());
    size_t len;
    const char *got = slurp(path, &len);
    cr_assert_not_null(got);
    cr_assert_eq(len, 6);
    cr_assert(memcmp(got, "short\n", 6) == 0);
    char names[8][256];
    int n = entries(tsr__pmstore_dir(), names, 8);
    cr_assert_eq(n, 1, "%d entries, the first %s", n, n ? names[0] : "");
    cr_assert_str_eq(names[0], "c.txt");
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0644, "mode %o", st.st_mode & 0777);
    cleanup();
}

Test(store, a_missing_file_is_not_an_error_a_bad_one_is)
{
    const char *dir = fresh_dir();
    char err[256] = "";
    cr_assert_eq(tsr__pmstore_open(dir, err, sizeof err), TSR_OK);
    bool missing = false;
    /* Before the machine directory exists. */
    cr_assert_null(tsr__pmstore_read("none.txt", &missing, err, sizeof err));
    cr_assert(missing);
    cr_assert_eq(tsr__pmstore_write("d.txt", "x", 1, err, sizeof err), 0, "%s", err);
    missing = false;
    cr_assert_null(tsr__pmstore_read("none.txt", &missing, err, sizeof err));
    cr_assert(missing);

    /* A NUL byte: not a text file. */
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/nul.txt", tsr__pmstore_dir());
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite("ab\0cd\n", 1, 6, f), 6);
    fclose(f);
    err[0] = 0;
    cr_assert_null(tsr__pmstore_read("nul.txt", &missing, err, sizeof err));
    cr_assert(!missing);
    cr_assert(strstr(err, "NUL") != NULL, "%s", err);

    /* A directory where a file should be. */
    snprintf(path, sizeof path, "%s/sub.txt", tsr__pmstore_dir());
    cr_assert_eq(mkdir(path, 0700), 0);
    err[0] = 0;
    cr_assert_null(tsr__pmstore_read("sub.txt", &missing, err, sizeof err));
    cr_assert(!missing);
    cr_assert(err[0], "a message");
    cleanup();
}

Test(store, a_write_that_cannot_create_the_directory_says_why)
{
    const char *dir = fresh_dir();
    /* A regular file where the model directory's parent should be. */
    char file[300], err[512] = "";
    snprintf(file, sizeof file, "%s/plain", dir);
    FILE *f = fopen(file, "w");
    cr_assert_not_null(f);
    fclose(f);
    cr_assert_eq(tsr__pmstore_open(file, err, sizeof err), TSR_OK);
    cr_assert_eq(tsr__pmstore_write("e.txt", "x", 1, err, sizeof err), -1);
    cr_assert(strstr(err, "cannot create") != NULL, "%s", err);
    size_t len;
    const char *got = slurp(file, &len);
    cr_assert(got && len == 0, "the file in the way is untouched");
    cleanup();
}

Test(store, empty_dir_keeps_nothing_on_disk)
{
    fresh_dir();
    char err[256] = "";
    cr_assert_eq(tsr__pmstore_open("", err, sizeof err), TSR_OK);
    cr_assert_str_eq(tsr__pmstore_dir(), "");
    cleanup();
}

Test(store, default_directory_is_under_xdg_cache_home_else_home)
{
    const char *dir = fresh_dir();
    char err[256] = "", want[400];
    setenv("XDG_CACHE_HOME", dir, 1);
    cr_assert_eq(tsr__pmstore_open(NULL, err, sizeof err), TSR_OK);
    snprintf(want, sizeof want, "%s/tessera/perfmodels/", dir);
    cr_assert(strncmp(tsr__pmstore_dir(), want, strlen(want)) == 0, "%s", tsr__pmstore_dir());
    /* A relative XDG_CACHE_HOME is ignored (the XDG rule): $HOME/.cache. */
    setenv("XDG_CACHE_HOME", "relative", 1);
    setenv("HOME", dir, 1);
    cr_assert_eq(tsr__pmstore_open(NULL, err, sizeof err), TSR_OK);
    snprintf(want, sizeof want, "%s/.cache/tessera/perfmodels/", dir);
    cr_assert(strncmp(tsr__pmstore_dir(), want, strlen(want)) == 0, "%s", tsr__pmstore_dir());
    cleanup();
}

Test(store, a_path_too_long_is_refused)
{
    fresh_dir();
    static char longdir[PATH_MAX + 10];
    longdir[0] = '/';
    memset(longdir + 1, 'a', sizeof longdir - 2);
    longdir[sizeof longdir - 1] = 0;
    char err[256] = "";
    cr_assert_eq(tsr__pmstore_open(longdir, err, sizeof err), TSR_EINVAL);
    cr_assert(strstr(err, "too long") != NULL, "%s", err);
    cleanup();
}

Test(store, every_open_and_close_is_a_new_generation)
{
    const char *dir = fresh_dir();
    char err[256] = "";
    unsigned g0 = tsr__pmstore_generation();
    cr_assert_eq(tsr__pmstore_open(dir, err, sizeof err), TSR_OK);
    cr_assert_eq(tsr__pmstore_generation(), g0 + 1);
    tsr__pmstore_close();
    cr_assert_eq(tsr__pmstore_generation(), g0 + 2);
    cr_assert_str_eq(tsr__pmstore_dir(), "");
    cr_assert_eq(tsr__pmstore_open("", err, sizeof err), TSR_OK);
    cr_assert_eq(tsr__pmstore_generation(), g0 + 3);
    cleanup();
}
