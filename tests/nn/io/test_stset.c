/* sharded safetensors sets: written then read back bit for bit (F32, BF16,
 * float32 stored as BF16, several shards, a tensor exactly at the shard
 * limit), one shard as model.safetensors without an index, the switch
 * between the two layouts leaving no stray file; indexes and shards that
 * disagree (missing file, wrong shard, a tensor in two shards, truncated
 * shard, unnamed tensor, bad file name) refused naming file and tensor; a
 * write failing or killed at each of its steps leaves the previous set or
 * the new one whole, and the next write removes the leftovers. */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "io_util.h"
#include "nn/io/stset.h"
#include "runtime/error.h"

static void expect_open_fails(const char *path, int want, const char *needle)
{
    tsr__stset_t *s = (tsr__stset_t *)1;
    int rc = tsr__stset_open(&s, path);
    cr_assert_eq(rc, want, "%s: rc %d, want %d (%s)", needle, rc, want, tsr_error_message());
    cr_assert_null(s);
    cr_assert_not_null(strstr(tsr_error_message(), needle), "message \"%s\" lacks \"%s\"",
                       tsr_error_message(), needle);
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Tensors of `tag`: t0 F32 [3,5] (60 B), t1 BF16 [40] (80 B), t2 F32 [20] (80 B, the
 * limit), t3 F32 [2] (8 B), t4 float32 stored as BF16 [7] (14 B), t5 BF16 [0]. */
typedef struct {
    float t0[15], t2[20], t3[2], t4[7];
    uint16_t t1[40];
} data_t;

static void make_data(data_t *d, int tag)
{
    for (int i = 0; i < 15; i++)
        d->t0[i] = (float)(i * 0.37 - 2) + (float)tag;
    for (int i = 0; i < 40; i++)
        d->t1[i] = (uint16_t)(0x3f00 + 97 * i + tag);
    for (int i = 0; i < 20; i++)
        d->t2[i] = -1.0f / (float)(i + 1) + (float)tag;
    d->t3[0] = NAN, d->t3[1] = -0.0f;
    const float t4[7] = {1.0f, 1.00390625f, 1.01171875f, -3.3e38f, INFINITY, 1e-40f, NAN};
    memcpy(d->t4, t4, sizeof t4);
    d->t4[0] += (float)tag;
}

static void add_all(tsr__stset_writer_t *w, const data_t *d)
{
    uint64_t s0[2] = {3, 5}, s1[1] = {40}, s2[1] = {20}, s3[1] = {2}, s4[1] = {7}, s5[1] = {0};
    cr_assert_eq(tsr__stset_writer_add(w, "t0", TSR__ST_F32, 2, s0, d->t0), TSR_OK);
    cr_assert_eq(tsr__stset_writer_add(w, "t1", TSR__ST_BF16, 1, s1, d->t1), TSR_OK);
    cr_assert_eq(tsr__stset_writer_add(w, "t2", TSR__ST_F32, 1, s2, d->t2), TSR_OK);
    cr_assert_eq(tsr__stset_writer_add(w, "t3", TSR__ST_F32, 1, s3, d->t3), TSR_OK);
    cr_assert_eq(tsr__stset_writer_add_f32(w, "t4", TSR__ST_BF16, 1, s4, d->t4), TSR_OK);
    cr_assert_eq(tsr__stset_writer_add(w, "t5", TSR__ST_BF16, 1, s5, NULL), TSR_OK);
}

static int write_set(const char *dir, int tag, uint64_t limit)
{
    data_t d;
    make_data(&d, tag);
    tsr__stset_writer_t *w;
    cr_assert_eq(tsr__stset_writer_create(&w), TSR_OK);
    add_all(w, &d);
    cr_assert_eq(tsr__stset_writer_meta(w, "note", "x"), TSR_OK);
    int rc = tsr__stset_writer_write(w, dir, limit);
    tsr__stset_writer_free(w);
    return rc;
}

/* bf16 of t4 by hand: round to nearest even, NaN quiet. */
static const uint16_t t4_bf16[7] = {0x3f80, 0x3f80, 0x3f82, 0xff78, 0x7f80, 0x0001, 0x7fc0};

static void check_set(const char *dir, int tag)
{
    data_t d;
    make_data(&d, tag);
    tsr__stset_t *s;
    cr_assert_eq(tsr__stset_open(&s, dir), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr__stset_count(s), 6);
    unsigned char raw[80];
    float f[40];
    const tsr__stset_entry_t *e = tsr__stset_find(s, "t0");
    cr_assert_not_null(e);
    cr_assert_eq(e->t->ndim, 2);
    cr_assert_eq(e->t->shape[1], 5);
    cr_assert_eq(tsr__stset_read_raw(s, e, raw, 60), TSR_OK);
    cr_assert_eq(memcmp(raw, d.t0, 60), 0, "t0 of set %d", tag);
    e = tsr__stset_find(s, "t1");
    cr_assert_eq(e->t->dtype, TSR__ST_BF16);
    cr_assert_eq(tsr__stset_read_raw(s, e, raw, 80), TSR_OK);
    cr_assert_eq(memcmp(raw, d.t1, 80), 0);
    cr_assert_eq(tsr__stset_read_f32(s, e, f, 40), TSR_OK);
    for (int i = 0; i < 40; i++) {
        uint32_t u = (uint32_t)d.t1[i] << 16;
        cr_assert_eq(memcmp(&f[i], &u, 4), 0, "bf16 to f32 is exact");
    }
    e = tsr__stset_find(s, "t2");
    cr_assert_eq(tsr__stset_read_f32(s, e, f, 20), TSR_OK);
    cr_assert_eq(memcmp(f, d.t2, 80), 0);
    e = tsr__stset_find(s, "t3");
    cr_assert_eq(tsr__stset_read_f32(s, e, f, 2), TSR_OK);
    cr_assert_eq(memcmp(f, d.t3, 8), 0, "NaN and -0 bit for bit");
    e = tsr__stset_find(s, "t4");
    cr_assert_eq(e->t->dtype, TSR__ST_BF16);
    cr_assert_eq(tsr__stset_read_raw(s, e, raw, 14), TSR_OK);
    uint16_t want[7];
    memcpy(want, t4_bf16, sizeof want);
    if (tag)
        want[0] = 0; /* computed below */
    for (int i = 0; i < 7; i++) {
        uint16_t got = (uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8);
        if (i == 0 && tag) {
            float x = d.t4[0];
            uint32_t u;
            memcpy(&u, &x, 4);
            want[0] = (uint16_t)((u + 0x7fff + (u >> 16 & 1)) >> 16);
        }
        cr_assert_eq(got, want[i], "t4[%d]: %04x, want %04x", i, got, want[i]);
    }
    /* as bf16: BF16 as stored, F32 rounded */
    uint16_t h[40];
    cr_assert_eq(tsr__stset_read_bf16(s, tsr__stset_find(s, "t1"), h, 40), TSR_OK);
    cr_assert_eq(memcmp(h, d.t1, 80), 0);
    cr_assert_eq(tsr__stset_read_bf16(s, tsr__stset_find(s, "t3"), h, 2), TSR_OK);
    cr_assert_eq(h[0], 0x7fc0);
    cr_assert_eq(h[1], 0x8000);
    cr_assert_eq(tsr__stset_read_bf16(s, tsr__stset_find(s, "t3"), h, 3), TSR_EINVAL);
    e = tsr__stset_find(s, "t5");
    cr_assert_eq(e->t->numel, 0);
    cr_assert_eq(tsr__stset_read_f32(s, e, f, 0), TSR_OK);
    cr_assert_null(tsr__stset_find(s, "t6"));
    /* sizes that are not the tensor's */
    cr_assert_eq(tsr__stset_read_raw(s, tsr__stset_find(s, "t0"), raw, 59), TSR_EINVAL);
    cr_assert_eq(tsr__stset_read_f32(s, tsr__stset_find(s, "t0"), f, 14), TSR_EINVAL);
    tsr__stset_close(s);
}

Test(stset, sharded_round_trip_bit_exact)
{
    char dir[256], p[512];
    io_tmpdir(dir, sizeof dir);
    /* limit 80: [t0] 60, [t1] 80 (at the limit), [t2] 80, [t3 t4 t5] 22 */
    cr_assert_eq(write_set(dir, 0, 80), TSR_OK, "%s", tsr_error_message());
    check_set(dir, 0);
    tsr__stset_t *s;
    cr_assert_eq(tsr__stset_open(&s, dir), TSR_OK);
    cr_assert_eq(tsr__stset_shards(s), 4);
    cr_assert(tsr__stset_sharded(s));
    cr_assert_eq(tsr__stset_find(s, "t1")->shard, 1);
    cr_assert_eq(tsr__stset_find(s, "t2")->shard, 2);
    cr_assert_eq(tsr__stset_find(s, "t5")->shard, 3);
    tsr__stset_close(s);
    io_join(p, sizeof p, dir, "model-00002-of-00004.safetensors");
    cr_assert(io_exists(p));
    io_join(p, sizeof p, dir, TSR__STSET_INDEX);
    char *idx = io_read(p, NULL);
    cr_assert_not_null(strstr(idx, "\"total_size\": 242"), "%s", idx);
    cr_assert_not_null(strstr(idx, "\"t2\": \"model-00003-of-00004.safetensors\""), "%s", idx);
    free(idx);
    cr_assert_eq(count_files(dir), 5, "4 shards and the index, nothing else");
    /* the index file itself opens too */
    cr_assert_eq(tsr__stset_open(&s, p), TSR_OK, "%s", tsr_error_message());
    tsr__stset_close(s);
    /* limit 140: [t0 t1] is 140 exactly, [t2 t3 t4 t5] */
    cr_assert_eq(write_set(dir, 1, 140), TSR_OK, "%s", tsr_error_message());
    check_set(dir, 1);
    cr_assert_eq(tsr__stset_open(&s, dir), TSR_OK);
    cr_assert_eq(tsr__stset_shards(s), 2);
    cr_assert_eq(tsr__stset_find(s, "t1")->shard, 0);
    tsr__stset_close(s);
    cr_assert_eq(count_files(dir), 3, "the old shards are removed");
    /* a limit below a tensor: the tensor gets its own shard */
    cr_assert_eq(write_set(dir, 2, 10), TSR_OK, "%s", tsr_error_message());
    check_set(dir, 2);
    cr_assert_eq(count_files(dir), 6);
    io_rmtree(dir);
}

Test(stset, single_file_and_layout_switches)
{
    char dir[256], p[512];
    io_tmpdir(dir, sizeof dir);
    cr_assert_eq(write_set(dir, 0, 0), TSR_OK, "%s", tsr_error_message());
    check_set(dir, 0);
    io_join(p, sizeof p, dir, TSR__STSET_SINGLE);
    cr_assert(io_exists(p));
    cr_assert_eq(count_files(dir), 1);
    tsr__stset_t *s;
    cr_assert_eq(tsr__stset_open(&s, p), TSR_OK, "a single file by its path");
    cr_assert(!tsr__stset_sharded(s));
    tsr__stset_close(s);
    /* single -> sharded: model.safetensors goes */
    cr_assert_eq(write_set(dir, 1, 100), TSR_OK, "%s", tsr_error_message());
    check_set(dir, 1);
    cr_assert(!io_exists(p));
    /* sharded -> sharded with the same count: the other naming scheme */
    cr_assert_eq(write_set(dir, 2, 100), TSR_OK, "%s", tsr_error_message());
    check_set(dir, 2);
    io_join(p, sizeof p, dir, "model-00001-of-00004.b.safetensors");
    cr_assert(io_exists(p), "alternate names while the old set is in place");
    cr_assert_eq(count_files(dir), 5);
    cr_assert_eq(write_set(dir, 3, 100), TSR_OK, "%s", tsr_error_message());
    check_set(dir, 3);
    io_join(p, sizeof p, dir, "model-00001-of-00004.safetensors");
    cr_assert(io_exists(p));
    cr_assert_eq(count_files(dir), 5);
    /* sharded -> single: index, then shards removed */
    cr_assert_eq(write_set(dir, 4, 0), TSR_OK, "%s", tsr_error_message());
    check_set(dir, 4);
    cr_assert_eq(count_files(dir), 1);
    /* a folder that does not exist yet is created */
    io_join(p, sizeof p, dir, "sub");
    cr_assert_eq(write_set(p, 5, 0), TSR_OK, "%s", tsr_error_message());
    check_set(p, 5);
    io_rmtree(dir);
}

Test(stset, writer_refusals)
{
    tsr__stset_writer_t *w;
    cr_assert_eq(tsr__stset_writer_create(&w), TSR_OK);
    uint64_t sh[1] = {2};
    float x[2] = {1, 2};
    cr_assert_eq(tsr__stset_writer_write(w, "/nonexistent-dir-x/y", 0), TSR_EINVAL,
                 "no tensors");
    cr_assert_eq(tsr__stset_writer_add(w, "a", TSR__ST_F32, 1, sh, x), TSR_OK);
    cr_assert_eq(tsr__stset_writer_add(w, "a", TSR__ST_F32, 1, sh, x), TSR_EINVAL);
    cr_assert_eq(tsr__stset_writer_add(w, "", TSR__ST_F32, 1, sh, x), TSR_EINVAL);
    cr_assert_eq(tsr__stset_writer_add(w, "__metadata__", TSR__ST_F32, 1, sh, x), TSR_EINVAL);
    cr_assert_eq(tsr__stset_writer_add(w, "b", TSR__ST_F32, 1, sh, NULL), TSR_EINVAL);
    cr_assert_eq(tsr__stset_writer_add_f32(w, "c", TSR__ST_F16, 1, sh, x), TSR_EINVAL);
    cr_assert_eq(tsr__stset_writer_write(w, "/nonexistent-dir-x/y", 0), TSR_EIO);
    cr_assert_not_null(strstr(tsr_error_message(), "cannot create the folder"));
    tsr__stset_writer_free(w);
}

/* ---- sets that disagree with their index ---------------------------------- */

#define HDR_AB "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}," \
               "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[8,16]}}"
#define HDR_C "{\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}      "
#define HDR_CA "{\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}," \
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}"

static void hand_set(const char *dir, const char *index, const char *hdr2)
{
    char p[512];
    unsigned char data[16] = {0};
    io_join(p, sizeof p, dir, "s1.safetensors");
    io_st_file(p, HDR_AB, data, 16);
    io_join(p, sizeof p, dir, "s2.safetensors");
    io_st_file(p, hdr2, data, hdr2[2] == 'c' && strlen(hdr2) > 70 ? 8 : 4);
    io_join(p, sizeof p, dir, TSR__STSET_INDEX);
    io_write(p, index, strlen(index));
}

#define IDX(map) "{\"metadata\": {\"total_size\": 20}, \"weight_map\": {" map "}}"

Test(stset, hand_built_set_and_every_disagreement)
{
    char dir[256], p[512];
    io_tmpdir(dir, sizeof dir);
    hand_set(dir, IDX("\"a\": \"s1.safetensors\", \"b\": \"s1.safetensors\", "
                      "\"c\": \"s2.safetensors\""), HDR_C);
    tsr__stset_t *s;
    cr_assert_eq(tsr__stset_open(&s, dir), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr__stset_count(s), 3);
    cr_assert_eq(tsr__stset_shards(s), 2);
    cr_assert_str_eq(tsr__stset_at(s, 2)->name, "c");
    tsr__stset_close(s);

    hand_set(dir, IDX("\"a\": \"s1.safetensors\", \"b\": \"s1.safetensors\", "
                      "\"c\": \"s3.safetensors\""), HDR_C);
    expect_open_fails(dir, TSR_EIO, "shard s3.safetensors named by the index");
    hand_set(dir, IDX("\"a\": \"s1.safetensors\", \"b\": \"s2.safetensors\", "
                      "\"c\": \"s2.safetensors\""), HDR_C);
    expect_open_fails(dir, TSR_EINVAL,
                      "tensor b is in shard s1.safetensors, but the index maps it to "
                      "s2.safetensors");
    hand_set(dir, IDX("\"a\": \"s1.safetensors\", \"b\": \"s1.safetensors\", "
                      "\"c\": \"s2.safetensors\""), HDR_CA);
    expect_open_fails(dir, TSR_EINVAL, "tensor a is in two shards");
    hand_set(dir, IDX("\"a\": \"s1.safetensors\", \"b\": \"s1.safetensors\", "
                      "\"c\": \"s2.safetensors\", \"d\": \"s2.safetensors\""), HDR_C);
    expect_open_fails(dir, TSR_EINVAL,
                      "the index maps tensor d to shard s2.safetensors, which does not hold it");
    hand_set(dir, IDX("\"a\": \"s1.safetensors\", \"c\": \"s2.safetensors\""), HDR_C);
    expect_open_fails(dir, TSR_EINVAL,
                      "shard s1.safetensors holds tensor b, which the index does not name");
    hand_set(dir, IDX("\"a\": \"../s1.safetensors\""), HDR_C);
    expect_open_fails(dir, TSR_EINVAL, "not a file name in the checkpoint's folder");
    hand_set(dir, IDX(""), HDR_C);
    expect_open_fails(dir, TSR_EINVAL, "names no tensor");
    hand_set(dir, "{\"weight_map\": {\"a\": 3}}", HDR_C);
    expect_open_fails(dir, TSR_EINVAL, "maps tensor a to number");
    hand_set(dir, "{\"metadata\": {\"total_size\": -1}, \"weight_map\": {\"a\": \"x\"}}", HDR_C);
    expect_open_fails(dir, TSR_EINVAL, "total_size");
    hand_set(dir, "{\"weight_map\": {\"a\": \"s1.safetensors\", \"a\": \"s1.safetensors\"}}",
             HDR_C);
    expect_open_fails(dir, TSR_EINVAL, "duplicate key \"a\"");
    hand_set(dir, "{\"weight_map\": ", HDR_C);
    expect_open_fails(dir, TSR_EINVAL, "invalid JSON");
    /* a truncated shard */
    hand_set(dir, IDX("\"a\": \"s1.safetensors\", \"b\": \"s1.safetensors\", "
                      "\"c\": \"s2.safetensors\""), HDR_C);
    io_join(p, sizeof p, dir, "s1.safetensors");
    cr_assert_eq(truncate(p, 8 + (long)strlen(HDR_AB) + 10), 0);
    expect_open_fails(dir, TSR_EINVAL, "shard s1.safetensors named by the index");
    cr_assert_not_null(strstr(tsr_error_message(), "beyond the data area"), "%s",
                       tsr_error_message());
    /* nothing to read */
    io_join(p, sizeof p, dir, TSR__STSET_INDEX);
    unlink(p);
    expect_open_fails(dir, TSR_EIO, "neither model.safetensors nor");
    io_rmtree(dir);
}

/* ---- failures and kills at each step ----------------------------------------- */

static int fail_at, steps, kill_at;

static int failing_hook(const char *step, const char *path)
{
    (void)step, (void)path;
    return ++steps == fail_at;
}

static int killing_hook(const char *step, const char *path)
{
    (void)step, (void)path;
    if (++steps == kill_at)
        _exit(137);
    return 0;
}

/* Which of the sets 0..9 the folder holds whole; -1 when none. */
static int which_set(const char *dir)
{
    tsr__stset_t *s;
    if (tsr__stset_open(&s, dir) != TSR_OK)
        return -1;
    float t0[15];
    int rc = tsr__stset_read_f32(s, tsr__stset_find(s, "t0"), t0, 15);
    tsr__stset_close(s);
    if (rc != TSR_OK)
        return -1;
    int tag = (int)lrintf(t0[0] + 2.0f);
    check_set(dir, tag);
    return tag;
}

/* From a set of layout `from` (limit) to one of layout `to`, failing then
 * killing at each step. */
static void each_step(uint64_t from, uint64_t to)
{
    char dir[256];
    io_tmpdir(dir, sizeof dir);
    cr_assert_eq(write_set(dir, 0, from), TSR_OK);
    int files = count_files(dir);
    /* the number of steps of a write */
    tsr__stset_fault_hook = failing_hook;
    steps = 0, fail_at = -1;
    cr_assert_eq(write_set(dir, 1, to), TSR_OK);
    int total = steps;
    cr_assert_gt(total, 2);
    cr_assert_eq(write_set(dir, 0, from), TSR_OK);
    for (int n = 1; n <= total; n++) {
        steps = 0, fail_at = n;
        int rc = write_set(dir, 1, to);
        int got = which_set(dir);
        if (rc == TSR_OK)
            cr_assert_eq(got, 1, "a failure at a removal of the old set keeps the new one");
        else {
            cr_assert_eq(rc, TSR_EIO, "step %d: %s", n, tsr_error_message());
            cr_assert_eq(got, 0, "step %d failed: the previous set stays", n);
            cr_assert_eq(count_files(dir), files, "step %d: nothing left over", n);
        }
        steps = 0, fail_at = -1;
        cr_assert_eq(write_set(dir, 0, from), TSR_OK, "%s", tsr_error_message());
        cr_assert_eq(count_files(dir), files);
    }
    for (int n = 1; n <= total; n++) {
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            tsr__stset_fault_hook = killing_hook;
            steps = 0, kill_at = n;
            write_set(dir, 1, to);
            _exit(0);
        }
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFEXITED(st));
        int got = which_set(dir);
        cr_assert(got == 0 || got == 1, "killed before step %d: set %d", n, got);
        /* the next write goes through and leaves nothing behind */
        steps = 0, fail_at = -1;
        cr_assert_eq(write_set(dir, 0, from), TSR_OK, "%s", tsr_error_message());
        cr_assert_eq(which_set(dir), 0);
        cr_assert_eq(count_files(dir), files, "killed before step %d: leftovers", n);
    }
    tsr__stset_fault_hook = NULL;
    io_rmtree(dir);
}

Test(stset, failure_or_kill_at_each_step_sharded_to_sharded)
{
    each_step(100, 100);
}

Test(stset, failure_or_kill_at_each_step_sharded_to_other_count)
{
    each_step(100, 150);
}

Test(stset, failure_or_kill_at_each_step_single_to_sharded)
{
    each_step(0, 100);
}

Test(stset, failure_or_kill_at_each_step_sharded_to_single)
{
    each_step(100, 0);
}

/* A real write error inside a shard's data: the file size limit of a child
 * process (EFBIG, as a full disk gives ENOSPC) cuts the first shard short. */
Test(stset, write_error_inside_the_data_leaves_the_previous_set)
{
    char dir[256];
    io_tmpdir(dir, sizeof dir);
    for (int from = 0; from < 2; from++) {
        cr_assert_eq(write_set(dir, 0, from ? 100 : 0), TSR_OK);
        int files = count_files(dir);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            signal(SIGXFSZ, SIG_IGN);
            struct rlimit rl = {150, 150};
            setrlimit(RLIMIT_FSIZE, &rl);
            int rc = write_set(dir, 1, from ? 0 : 100);
            _exit(rc == TSR_EIO && strstr(tsr_error_message(), "cannot write") ? 0 : 1);
        }
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the write did not fail as expected");
        cr_assert_eq(which_set(dir), 0);
        cr_assert_eq(count_files(dir), files, "the failed write left files");
    }
    io_rmtree(dir);
}
