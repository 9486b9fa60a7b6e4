/* Performance models and the bus model: the median against outliers, the
 * sample window, the log-log regression (on bytes and on flops) against a
 * fit computed here by hand, calibration modes, persistence and corrupt
 * files, argument and state errors, concurrent use, and the measured bus
 * of a throttled simulated accelerator with its cache.
 *
 * Every test works in a fresh directory under /tmp ($HOME and
 * $XDG_CACHE_HOME point there too), so nothing touches the user's cache.
 * Expected values are computed here with naive code, never taken from the
 * implementation.
 */
#include <criterion/criterion.h>
#include <tessera/tessera.h>

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------ */

static char tmpdir[256];

static const char *fresh_dir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tsr-pm-test-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    /* Nothing may fall back to the real cache directory. */
    setenv("HOME", tmpdir, 1);
    setenv("XDG_CACHE_HOME", tmpdir, 1);
    unsetenv("TESSERA_PERFMODEL_DIR");
    unsetenv("TESSERA_CALIBRATE");
    unsetenv("TESSERA_SCHED");
    unsetenv("TESSERA_NSIM");
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

static void cleanup(void) { nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static tsr_config_t config(const char *dir, int calibrate)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.ncpu = 1;
    cfg.bind = 0;
    cfg.ncuda = 0;
    cfg.perfmodel_dir = dir;
    cfg.calibrate = calibrate;
    return cfg;
}

static void start(const char *dir, int calibrate)
{
    tsr_config_t cfg = config(dir, calibrate);
    int rc = tsr_init(&cfg);
    cr_assert_eq(rc, TSR_OK, "tsr_init: %s", tsr_error_message());
}

static void stop(void)
{
    int rc = tsr_shutdown();
    cr_assert_eq(rc, TSR_OK, "tsr_shutdown: %s", tsr_error_message());
}

static int noop(void **b, const void *a, const tsr_exec_t *e)
{
    (void)b;
    (void)a;
    (void)e;
    return 0;
}

static const tsr_codelet_t cl1 = {.name = "pm_one", .impl = {noop}, .nbuffers = 1};
static const tsr_codelet_t cl2 = {.name = "pm_two", .impl = {noop}, .nbuffers = 2};
static const tsr_codelet_t cl_spaces = {.name = "pm with spaces %41 #x\ttab",
                                        .impl = {noop}, .nbuffers = 1};

/* flops come from the argument block, independent of the sizes */
static double args_flops(const void *args, const size_t *sizes)
{
    (void)sizes;
    return *(const double *)args;
}
static const tsr_codelet_t cl_flops = {.name = "pm_flops", .impl = {noop}, .nbuffers = 1,
                                       .flops = args_flops};

static void record(const tsr_codelet_t *cl, int kind, const size_t *sizes,
                   const void *args, double s)
{
    int rc = tsr_perfmodel_record(cl, kind, sizes, cl->nbuffers, args, s);
    cr_assert_eq(rc, TSR_OK, "record: %s", tsr_error_message());
}

static tsr_perfmodel_info_t predict_ok(const tsr_codelet_t *cl, int kind,
                                       const size_t *sizes, const void *args)
{
    tsr_perfmodel_info_t info;
    int rc = tsr_perfmodel_predict(cl, kind, sizes, cl->nbuffers, args, &info);
    cr_assert_eq(rc, TSR_OK, "predict: %s", tsr_error_message());
    return info;
}

static int predict_rc(const tsr_codelet_t *cl, int kind, const size_t *sizes,
                      const void *args)
{
    tsr_perfmodel_info_t info;
    return tsr_perfmodel_predict(cl, kind, sizes, cl->nbuffers, args, &info);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of v[0..n-1] by sorting a copy (mean of the middle two if even). */
static double naive_median(const double *v, int n)
{
    double t[256];
    memcpy(t, v, (size_t)n * sizeof *t);
    qsort(t, (size_t)n, sizeof *t, cmp);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static bool close_rel(double a, double b, double rel)
{
    return fabs(a - b) <= rel * fabs(b);
}

/* The one machine subdirectory under dir. */
static void machine_dir(const char *dir, char *out, size_t len)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    struct dirent *e;
    int found = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(out, len, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(out, &st) == 0 && S_ISDIR(st.st_mode))
            found++;
    }
    closedir(d);
    cr_assert_eq(found, 1, "one machine directory under %s", dir);
}

static void write_text(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(fwrite(text, 1, len, f), len);
    fclose(f);
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* stderr into a file while `fn` runs; returns what was written. */
static char captured[8192];
static int saved_fd = -1;
static char cap_path[300];

static void capture_begin(void)
{
    fflush(stderr);
    snprintf(cap_path, sizeof cap_path, "%s/stderr.txt", tmpdir);
    int fd = open(cap_path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    cr_assert_geq(fd, 0);
    saved_fd = dup(2);
    dup2(fd, 2);
    close(fd);
}

static const char *capture_end(void)
{
    fflush(stderr);
    dup2(saved_fd, 2);
    close(saved_fd);
    char *t = read_text(cap_path);
    snprintf(captured, sizeof captured, "%s", t ? t : "");
    unlink(cap_path);
    return captured;
}

/* ---- the median and the window -------------------------------------------- */

Test(perfmodel, median_ignores_a_spike)
{
    start(fresh_dir(), 0);
    size_t sz[1] = {4096};
    double v[16];
    for (int i = 0; i < 15; i++)
        v[i] = 190e-6 * (1 + 0.01 * (i % 5 - 2)); /* 186.2 … 193.8 µs */
    v[15] = 0.100;                                  /* one 100 ms spike */
    for (int i = 0; i < 16; i++)
        record(&cl1, TSR_DEVICE_CPU, sz, NULL, v[i]);
    tsr_perfmodel_info_t in = predict_ok(&cl1, TSR_DEVICE_CPU, sz, NULL);
    double ref = naive_median(v, 16);
    cr_assert(close_rel(in.seconds, ref, 1e-12), "%.17g vs %.17g", in.seconds, ref);
    cr_assert(in.seconds < 200e-6 && in.seconds > 180e-6, "%g", in.seconds);
    cr_assert_eq(in.nsamples, 16u);
    cr_assert_eq(in.from_regression, 0);
    /* The other device kind knows nothing. */
    cr_assert_eq(predict_rc(&cl1, TSR_DEVICE_CUDA, sz, NULL), TSR_ENOTFOUND);
    stop();
    cleanup();
}

Test(perfmodel, window_keeps_the_latest_samples)
{
    start(fresh_dir(), 0);
    size_t sz[1] = {1000};
    double v[45];
    for (int i = 0; i < 45; i++)
        v[i] = i < 13 ? 5.0 + i : 1e-3 * (1 + (i * 7) % 11);
    for (int i = 0; i < 45; i++)
        record(&cl1, TSR_DEVICE_CPU, sz, NULL, v[i]);
    tsr_perfmodel_info_t in = predict_ok(&cl1, TSR_DEVICE_CPU, sz, NULL);
    double ref = naive_median(v + 45 - 32, 32); /* the window: the last 32 */
    cr_assert(close_rel(in.seconds, ref, 1e-12), "%.17g vs %.17g", in.seconds, ref);
    cr_assert_eq(in.nsamples, 45u);
    stop();
    cleanup();
}

Test(perfmodel, too_few_samples_are_not_trusted)
{
    start(fresh_dir(), 0);
    size_t sz[1] = {1000};
    record(&cl1, TSR_DEVICE_CPU, sz, NULL, 1e-3);
    record(&cl1, TSR_DEVICE_CPU, sz, NULL, 2e-3);
    cr_assert_eq(predict_rc(&cl1, TSR_DEVICE_CPU, sz, NULL), TSR_ENOTFOUND);
    tsr_perfmodel_info_t in;
    cr_assert_eq(tsr_perfmodel_predict(&cl1, TSR_DEVICE_CPU, sz, 1, NULL, &in),
                 TSR_ENOTFOUND);
    cr_assert_eq(in.nsamples, 2u);
    record(&cl1, TSR_DEVICE_CPU, sz, NULL, 3e-3);
    in = predict_ok(&cl1, TSR_DEVICE_CPU, sz, NULL);
    cr_assert(close_rel(in.seconds, 2e-3, 1e-12));
    cr_assert_eq(in.from_regression, 0);
    cr_assert_eq(in.nsamples, 3u);
    stop();
    cleanup();
}

/* ---- regression -------------------------------------------------------------- */

static double law(double x) { return 1e-9 * pow(x, 1.5); }

Test(perfmodel, regression_follows_a_power_law_on_bytes)
{
    start(fresh_dir(), 0);
    /* Two buffers: x is their total size. */
    size_t a[2] = {60000, 40000}, b[2] = {100000, 300000}, q[2] = {4000000, 5000000};
    for (int i = 0; i < 3; i++) {
        record(&cl2, TSR_DEVICE_CPU, a, NULL, law(100000));
        record(&cl2, TSR_DEVICE_CPU, b, NULL, law(400000));
    }
    tsr_perfmodel_info_t in = predict_ok(&cl2, TSR_DEVICE_CPU, q, NULL);
    cr_assert_eq(in.from_regression, 1);
    cr_assert_eq(in.nsamples, 0u);
    cr_assert(close_rel(in.seconds, law(9000000), 1e-6), "%.17g vs %.17g", in.seconds,
              law(9000000));
    /* A footprint with too few samples also gets the regression. */
    record(&cl2, TSR_DEVICE_CPU, q, NULL, 123.0);
    in = predict_ok(&cl2, TSR_DEVICE_CPU, q, NULL);
    cr_assert_eq(in.from_regression, 1);
    cr_assert_eq(in.nsamples, 1u);
    cr_assert(close_rel(in.seconds, law(9000000), 1e-6));
    stop();
    cleanup();
}

/* Least squares of log t on log x, by the textbook formula. */
static void naive_fit(const double *x, const double *t, int n, double *a, double *b)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < n; i++) {
        double lx = log(x[i]), ly = log(t[i]);
        sx += lx;
        sy += ly;
        sxx += lx * lx;
        sxy += lx * ly;
    }
    *b = (n * sxy - sx * sy) / (n * sxx - sx * sx);
    if (*b < 0.5)
        *b = 0.5;
    if (*b > 3)
        *b = 3;
    *a = (sy - *b * sx) / n;
}

Test(perfmodel, regression_is_least_squares_over_medians)
{
    start(fresh_dir(), 0);
    double xs[4] = {1e4, 3e4, 1e5, 7e5}, med[4];
    for (int f = 0; f < 4; f++) {
        size_t sz[1] = {(size_t)xs[f]};
        double v[5];
        for (int i = 0; i < 5; i++) /* noisy, with one outlier each */
            v[i] = 2e-8 * pow(xs[f], 1.2) * (1 + 0.03 * ((f + i) % 3)) * (i == 4 ? 9 : 1);
        for (int i = 0; i < 5; i++)
            record(&cl1, TSR_DEVICE_CPU, sz, NULL, v[i]);
        med[f] = naive_median(v, 5);
    }
    double a, b;
    naive_fit(xs, med, 4, &a, &b);
    size_t q[1] = {2500000};
    tsr_perfmodel_info_t in = predict_ok(&cl1, TSR_DEVICE_CPU, q, NULL);
    double ref = exp(a + b * log(2500000.0));
    cr_assert_eq(in.from_regression, 1);
    cr_assert(close_rel(in.seconds, ref, 1e-9), "%.17g vs %.17g", in.seconds, ref);
    stop();
    cleanup();
}

Test(perfmodel, regression_slope_is_clamped)
{
    start(fresh_dir(), 0);
    double xs[2] = {1000, 2000}, ts[2] = {1e-6, 1e-6 * 64}; /* slope 6 */
    for (int f = 0; f < 2; f++) {
        size_t sz[1] = {(size_t)xs[f]};
        for (int i = 0; i < 3; i++)
            record(&cl1, TSR_DEVICE_CPU, sz, NULL, ts[f]);
    }
    double a, b;
    naive_fit(xs, ts, 2, &a, &b);
    cr_assert(b == 3);
    size_t q[1] = {8000};
    tsr_perfmodel_info_t in = predict_ok(&cl1, TSR_DEVICE_CPU, q, NULL);
    cr_assert(close_rel(in.seconds, exp(a + 3 * log(8000.0)), 1e-9), "%g", in.seconds);
    /* and from below: time falling with size gives slope 0.5 */
    double ts2[2] = {1e-3, 0.5e-3};
    for (int f = 0; f < 2; f++) {
        size_t sz[1] = {(size_t)xs[f]};
        for (int i = 0; i < 3; i++)
            record(&cl1, TSR_DEVICE_CUDA, sz, NULL, ts2[f]);
    }
    naive_fit(xs, ts2, 2, &a, &b);
    cr_assert(b == 0.5);
    in = predict_ok(&cl1, TSR_DEVICE_CUDA, q, NULL);
    cr_assert(close_rel(in.seconds, exp(a + 0.5 * log(8000.0)), 1e-9), "%g", in.seconds);
    stop();
    cleanup();
}

Test(perfmodel, one_footprint_scales_proportionally)
{
    start(fresh_dir(), 0);
    size_t sz[1] = {1000000}, q[1] = {3000000};
    for (int i = 0; i < 3; i++)
        record(&cl1, TSR_DEVICE_CPU, sz, NULL, 2e-3);
    tsr_perfmodel_info_t in = predict_ok(&cl1, TSR_DEVICE_CPU, q, NULL);
    cr_assert_eq(in.from_regression, 1);
    cr_assert(close_rel(in.seconds, 6e-3, 1e-9), "%g", in.seconds);
    stop();
    cleanup();
}

Test(perfmodel, regression_uses_flops_when_the_codelet_has_them)
{
    start(fresh_dir(), 0);
    /* flops grow as size^2 here, time is linear in flops: a fit on bytes
     * would say 1e-3 * 3^2 = 9 ms for the query, on flops 100 ms. */
    size_t s1[1] = {1000}, s2[1] = {2000}, q[1] = {3000};
    double f1 = 1e6, f2 = 4e6, fq = 1e8;
    for (int i = 0; i < 3; i++) {
        record(&cl_flops, TSR_DEVICE_CPU, s1, &f1, 1e-9 * f1);
        record(&cl_flops, TSR_DEVICE_CPU, s2, &f2, 1e-9 * f2);
    }
    tsr_perfmodel_info_t in = predict_ok(&cl_flops, TSR_DEVICE_CPU, q, &fq);
    cr_assert_eq(in.from_regression, 1);
    cr_assert(close_rel(in.seconds, 1e-9 * fq, 1e-6), "%.17g", in.seconds);
    stop();
    cleanup();
}

/* ---- calibration modes -------------------------------------------------------- */

Test(perfmodel, calibrating_refuses_regression_and_short_histories)
{
    start(fresh_dir(), 1);
    size_t s1[1] = {1000}, s2[1] = {2000}, q[1] = {5000};
    for (int i = 0; i < 3; i++) {
        record(&cl1, TSR_DEVICE_CPU, s1, NULL, 1e-3);
        record(&cl1, TSR_DEVICE_CPU, s2, NULL, 2e-3);
    }
    cr_assert_eq(predict_rc(&cl1, TSR_DEVICE_CPU, s1, NULL), TSR_ENOTFOUND);
    cr_assert_eq(predict_rc(&cl1, TSR_DEVICE_CPU, q, NULL), TSR_ENOTFOUND);
    for (int i = 3; i < 10; i++)
        record(&cl1, TSR_DEVICE_CPU, s1, NULL, 1e-3);
    tsr_perfmodel_info_t in = predict_ok(&cl1, TSR_DEVICE_CPU, s1, NULL);
    cr_assert(close_rel(in.seconds, 1e-3, 1e-12));
    cr_assert_eq(in.nsamples, 10u);
    cr_assert_eq(predict_rc(&cl1, TSR_DEVICE_CPU, q, NULL), TSR_ENOTFOUND,
                 "no regression while calibrating");
    stop();
    cleanup();
}

/* ---- persistence ------------------------------------------------------------ */

Test(perfmodel, models_persist_across_runs)
{
    const char *dir = fresh_dir();
    size_t s1[1] = {1000}, s2[1] = {8000}, s3[1] = {64}, q[1] = {20000}, p2[2] = {7, 9};
    double seq[40];
    for (int i = 0; i < 40; i++)
        seq[i] = 1e-4 * (1 + (i * 5) % 17);
    start(dir, 0);
    for (int i = 0; i < 20; i++)
        record(&cl1, TSR_DEVICE_CPU, s1, NULL, seq[i]);
    for (int i = 0; i < 4; i++) {
        record(&cl1, TSR_DEVICE_CPU, s2, NULL, 3e-3 + i * 1e-4);
        record(&cl1, TSR_DEVICE_CUDA, s1, NULL, 1e-5 / 3);
        record(&cl_spaces, TSR_DEVICE_CPU, s3, NULL, 0.1 / 3);
        record(&cl2, TSR_DEVICE_CUDA, p2, NULL, 0.25);
    }
    tsr_perfmodel_info_t a1 = predict_ok(&cl1, TSR_DEVICE_CPU, s1, NULL),
                         a2 = predict_ok(&cl1, TSR_DEVICE_CPU, s2, NULL),
                         aq = predict_ok(&cl1, TSR_DEVICE_CPU, q, NULL),
                         ac = predict_ok(&cl1, TSR_DEVICE_CUDA, s1, NULL),
                         as = predict_ok(&cl_spaces, TSR_DEVICE_CPU, s3, NULL),
                         a3 = predict_ok(&cl2, TSR_DEVICE_CUDA, p2, NULL);
    stop();

    char mdir[600], path[700];
    machine_dir(dir, mdir, sizeof mdir);
    snprintf(path, sizeof path, "%s/codelets.txt", mdir);
    const char *text = read_text(path);
    cr_assert_not_null(text, "%s exists", path);
    cr_assert(strncmp(text, "# tessera perfmodels v1\n", 24) == 0, "%s", text);

    start(dir, 0);
    tsr_perfmodel_info_t b1 = predict_ok(&cl1, TSR_DEVICE_CPU, s1, NULL),
                         b2 = predict_ok(&cl1, TSR_DEVICE_CPU, s2, NULL),
                         bq = predict_ok(&cl1, TSR_DEVICE_CPU, q, NULL),
                         bc = predict_ok(&cl1, TSR_DEVICE_CUDA, s1, NULL),
                         bs = predict_ok(&cl_spaces, TSR_DEVICE_CPU, s3, NULL),
                         b3 = predict_ok(&cl2, TSR_DEVICE_CUDA, p2, NULL);
    cr_assert(a1.seconds == b1.seconds && a1.nsamples == b1.nsamples);
    cr_assert(a2.seconds == b2.seconds && a2.nsamples == b2.nsamples);
    cr_assert(ac.seconds == bc.seconds && as.seconds == bs.seconds &&
              a3.seconds == b3.seconds);
    cr_assert_eq(bs.nsamples, 4u);
    cr_assert(close_rel(bq.seconds, aq.seconds, 1e-12) && bq.from_regression);
    /* The window goes on where it stopped: the median of the last 32 of
     * all 40 samples. */
    for (int i = 20; i < 40; i++)
        record(&cl1, TSR_DEVICE_CPU, s1, NULL, seq[i]);
    b1 = predict_ok(&cl1, TSR_DEVICE_CPU, s1, NULL);
    double ref = naive_median(seq + 8, 32);
    cr_assert(b1.seconds == ref, "%.17g vs %.17g", b1.seconds, ref);
    cr_assert_eq(b1.nsamples, 40u);
    /* An explicit save writes it now. */
    cr_assert_eq(tsr_perfmodel_save(), TSR_OK, "%s", tsr_error_message());
    stop();
    start(dir, 0);
    b1 = predict_ok(&cl1, TSR_DEVICE_CPU, s1, NULL);
    cr_assert(b1.seconds == ref && b1.nsamples == 40u);
    stop();
    cleanup();
}

Test(perfmodel, calibrate_2_forgets_stored_models)
{
    const char *dir = fresh_dir();
    size_t s1[1] = {1000};
    start(dir, 0);
    for (int i = 0; i < 12; i++)
        record(&cl1, TSR_DEVICE_CPU, s1, NULL, 1e-3);
    stop();
    start(dir, 2);
    cr_assert_eq(predict_rc(&cl1, TSR_DEVICE_CPU, s1, NULL), TSR_ENOTFOUND);
    stop();
    start(dir, 0);
    cr_assert_eq(predict_rc(&cl1, TSR_DEVICE_CPU, s1, NULL), TSR_ENOTFOUND,
                 "calibrate=2 replaced the stored models");
    stop();
    cleanup();
}

Test(perfmodel, in_memory_models_touch_no_file)
{
    const char *dir = fresh_dir();
    size_t s1[1] = {1000};
    start("", 0);
    for (int i = 0; i < 3; i++)
        record(&cl1, TSR_DEVICE_CPU, s1, NULL, 1e-3);
    cr_assert_eq(tsr_perfmodel_save(), TSR_OK);
    stop();
    start("", 0);
    cr_assert_eq(predict_rc(&cl1, TSR_DEVICE_CPU, s1, NULL), TSR_ENOTFOUND);
    stop();
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    cr_assert_eq(n, 0, "nothing written under $HOME or $XDG_CACHE_HOME");
    cleanup();
}

Test(perfmodel, default_directory_is_under_xdg_cache_home)
{
    const char *dir = fresh_dir();
    size_t s1[1] = {1000};
    start(NULL, 0);
    for (int i = 0; i < 3; i++)
        record(&cl1, TSR_DEVICE_CPU, s1, NULL, 1e-3);
    stop();
    char base[300], mdir[600], path[700];
    snprintf(base, sizeof base, "%s/tessera/perfmodels", dir);
    machine_dir(base, mdir, sizeof mdir);
    snprintf(path, sizeof path, "%s/codelets.txt", mdir);
    cr_assert_not_null(read_text(path), "%s", path);
    cleanup();
}

/* Write `content` as the model file, then check that init warns once and
 * starts with empty models. */
static void corrupt_case(const char *content, size_t len, const char *why)
{
    const char *dir = fresh_dir();
    size_t s1[1] = {1000};
    start(dir, 0);
    for (int i = 0; i < 3; i++)
        record(&cl1, TSR_DEVICE_CPU, s1, NULL, 1e-3);
    stop();
    char mdir[600], path[700];
    machine_dir(dir, mdir, sizeof mdir);
    snprintf(path, sizeof path, "%s/codelets.txt", mdir);
    write_text(path, content, len);

    capture_begin();
    tsr_config_t cfg = config(dir, 0);
    int rc = tsr_init(&cfg);
    const char *err = capture_end();
    cr_assert_eq(rc, TSR_OK, "%s: init: %s", why, tsr_error_message());
    cr_assert(strstr(err, "tessera: ignoring performance models in"), "%s: stderr: %s", why,
              err);
    cr_assert(strstr(err, path), "%s: names the file: %s", why, err);
    cr_assert_eq(predict_rc(&cl1, TSR_DEVICE_CPU, s1, NULL), TSR_ENOTFOUND, "%s", why);
    cr_assert_eq(predict_rc(&cl_spaces, TSR_DEVICE_CPU, s1, NULL), TSR_ENOTFOUND, "%s",
                 why);
    /* The models work, and are saved over the bad file. */
    for (int i = 0; i < 3; i++)
        record(&cl1, TSR_DEVICE_CPU, s1, NULL, 4e-3);
    stop();
    capture_begin();
    start(dir, 0);
    err = capture_end();
    cr_assert_eq(err[0], 0, "%s: no warning for the rewritten file: %s", why, err);
    tsr_perfmodel_info_t in = predict_ok(&cl1, TSR_DEVICE_CPU, s1, NULL);
    cr_assert(in.seconds == 4e-3);
    stop();
    cleanup();
}

#define CORRUPT(text, why) corrupt_case(text, sizeof text - 1, why)

Test(perfmodel, garbage_file_is_ignored)
{
    CORRUPT("\x01\xff\xfe garbage\n\x80\x81\n", "garbage");
}

Test(perfmodel, wrong_version_is_ignored)
{
    CORRUPT("# tessera perfmodels v2\n", "wrong version");
}

Test(perfmodel, empty_file_is_ignored) { CORRUPT("", "empty"); }

Test(perfmodel, file_with_a_nul_byte_is_ignored)
{
    CORRUPT("# tessera perfmodels v1\npm_one cpu\0", "NUL byte");
}

Test(perfmodel, truncated_line_is_ignored)
{
    /* A good line written by a first run, then the file cut short. */
    const char *dir = fresh_dir();
    size_t s1[1] = {1000};
    start(dir, 0);
    for (int i = 0; i < 5; i++)
        record(&cl1, TSR_DEVICE_CPU, s1, NULL, 1e-3 * (i + 1));
    record(&cl_spaces, TSR_DEVICE_CPU, s1, NULL, 1);
    stop();
    char mdir[600], path[700];
    machine_dir(dir, mdir, sizeof mdir);
    snprintf(path, sizeof path, "%s/codelets.txt", mdir);
    const char *got = read_text(path);
    cr_assert_not_null(got, "%s", path);
    char text[8192];
    snprintf(text, sizeof text, "%s", got);
    size_t len = strlen(text);
    cr_assert_gt(len, 40u);
    cleanup();
    corrupt_case(text, len - 12, "cut in the middle of a line");
}

Test(perfmodel, line_with_missing_samples_is_ignored)
{
    /* The file of a first run is fine; a line appended to it (another
     * codelet, with that run's valid footprint) declares 5 samples and
     * has 2. The whole file is ignored, its good line included. */
    const char *dir = fresh_dir();
    size_t s1[1] = {1000};
    start(dir, 0);
    for (int i = 0; i < 3; i++)
        record(&cl1, TSR_DEVICE_CPU, s1, NULL, 1e-3);
    stop();
    char mdir[600], path[700];
    machine_dir(dir, mdir, sizeof mdir);
    snprintf(path, sizeof path, "%s/codelets.txt", mdir);
    const char *got = read_text(path);
    cr_assert_not_null(got, "%s", path);
    char text[8192];
    snprintf(text, sizeof text, "%s", got);
    const char *line = strstr(text, "\npm_one cpu ");
    cr_assert_not_null(line, "%s", text);
    char fp[64];
    cr_assert_eq(sscanf(line + 1, "pm_one cpu %63s", fp), 1);
    cleanup();
    char bad[8192 + 128];
    snprintf(bad, sizeof bad, "%spm_bad cpu %s 1 1000 bytes 1000 5 5 0.001 0.001\n", text,
             fp);
    corrupt_case(bad, strlen(bad), "missing samples");
}

Test(perfmodel, bad_footprint_is_ignored)
{
    CORRUPT("# tessera perfmodels v1\n"
            "pm_one cpu 0123456789abcdef 1 1000 bytes 1000 3 3 0.001 0.001 0.001\n",
            "footprint does not match");
}

/* ---- errors ---------------------------------------------------------------- */

Test(perfmodel, unwritable_directory_fails_save_not_shutdown)
{
    const char *dir = fresh_dir();
    char file[400];
    snprintf(file, sizeof file, "%s/a-file", dir);
    write_text(file, "x", 1);
    start(file, 0); /* a regular file where the directory should be */
    size_t s1[1] = {1000};
    for (int i = 0; i < 3; i++)
        record(&cl1, TSR_DEVICE_CPU, s1, NULL, 1e-3);
    cr_assert_eq(tsr_perfmodel_save(), TSR_EIO);
    cr_assert(strstr(tsr_error_message(), "cannot create"), "%s", tsr_error_message());
    capture_begin();
    int rc = tsr_shutdown();
    const char *err = capture_end();
    cr_assert_eq(rc, TSR_OK, "shutdown: %s", tsr_error_message());
    cr_assert(strstr(err, "cannot save performance models"), "stderr: %s", err);
    cleanup();
}

Test(perfmodel, calls_need_a_running_runtime)
{
    fresh_dir();
    size_t s1[1] = {1000};
    tsr_perfmodel_info_t in;
    double l, b;
    cr_assert_eq(tsr_perfmodel_record(&cl1, 0, s1, 1, NULL, 1e-3), TSR_ESTATE);
    cr_assert_eq(tsr_perfmodel_predict(&cl1, 0, s1, 1, NULL, &in), TSR_ESTATE);
    cr_assert_eq(tsr_perfmodel_save(), TSR_ESTATE);
    cr_assert_eq(tsr_bus_model(0, 0, &l, &b), TSR_ESTATE);
    start(tmpdir, 0);
    stop();
    cr_assert_eq(tsr_perfmodel_record(&cl1, 0, s1, 1, NULL, 1e-3), TSR_ESTATE);
    cr_assert_eq(tsr_perfmodel_save(), TSR_ESTATE);
    cleanup();
}

Test(perfmodel, bad_arguments_are_refused)
{
    start(fresh_dir(), 0);
    size_t s1[2] = {1000, 1000};
    tsr_perfmodel_info_t in;
    static const tsr_codelet_t unnamed = {.impl = {noop}, .nbuffers = 1};
    cr_assert_eq(tsr_perfmodel_record(NULL, 0, s1, 1, NULL, 1e-3), TSR_EINVAL);
    cr_assert_eq(tsr_perfmodel_record(&unnamed, 0, s1, 1, NULL, 1e-3), TSR_EINVAL);
    cr_assert_eq(tsr_perfmodel_record(&cl1, -1, s1, 1, NULL, 1e-3), TSR_EINVAL);
    cr_assert_eq(tsr_perfmodel_record(&cl1, TSR_DEVICE_KINDS, s1, 1, NULL, 1e-3),
                 TSR_EINVAL);
    cr_assert_eq(tsr_perfmodel_record(&cl1, 0, s1, -1, NULL, 1e-3), TSR_EINVAL);
    cr_assert_eq(tsr_perfmodel_record(&cl1, 0, s1, 2, NULL, 1e-3), TSR_EINVAL,
                 "nbuffers differs from the codelet's");
    cr_assert_eq(tsr_perfmodel_record(&cl1, 0, s1, TSR_MAX_BUFFERS + 1, NULL, 1e-3),
                 TSR_EINVAL);
    cr_assert_eq(tsr_perfmodel_record(&cl1, 0, NULL, 1, NULL, 1e-3), TSR_EINVAL);
    cr_assert_eq(tsr_perfmodel_record(&cl1, 0, s1, 1, NULL, -1e-3), TSR_EINVAL);
    cr_assert_eq(tsr_perfmodel_record(&cl1, 0, s1, 1, NULL, NAN), TSR_EINVAL);
    cr_assert_eq(tsr_perfmodel_record(&cl1, 0, s1, 1, NULL, INFINITY), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "pm_one"), "%s", tsr_error_message());
    cr_assert_eq(tsr_perfmodel_predict(NULL, 0, s1, 1, NULL, &in), TSR_EINVAL);
    cr_assert_eq(tsr_perfmodel_predict(&cl1, 2, s1, 1, NULL, &in), TSR_EINVAL);
    cr_assert_eq(tsr_perfmodel_predict(&cl1, 0, s1, 1, NULL, NULL), TSR_EINVAL);
    cr_assert_eq(tsr_perfmodel_predict(&cl1, 0, s1, 17, NULL, &in), TSR_EINVAL);
    /* nothing was recorded by the refused calls */
    cr_assert_eq(tsr_perfmodel_predict(&cl1, 0, s1, 1, NULL, &in), TSR_ENOTFOUND);
    cr_assert_eq(in.nsamples, 0u);
    double l, b;
    int n = tsr_memory_node_count();
    cr_assert_eq(tsr_bus_model(-1, 0, &l, &b), TSR_EINVAL);
    cr_assert_eq(tsr_bus_model(0, n, &l, &b), TSR_EINVAL);
    stop();
    cleanup();
}

/* ---- concurrency ---------------------------------------------------------- */

#define NTHREADS 8
#define PER_THREAD 2000

static void *hammer(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < PER_THREAD; i++) {
        size_t sz[1] = {(size_t)(1000 * (1 + i % 4))};
        tsr_perfmodel_record(&cl1, TSR_DEVICE_CPU, sz, 1, NULL, 1e-6 * (1 + i % 4));
        tsr_perfmodel_info_t in;
        size_t q[1] = {(size_t)(500 + id)};
        tsr_perfmodel_predict(&cl1, TSR_DEVICE_CPU, q, 1, NULL, &in);
    }
    return NULL;
}

Test(perfmodel, concurrent_records_and_predictions)
{
    start(fresh_dir(), 0);
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, hammer, (void *)(intptr_t)i), 0);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    for (int k = 0; k < 4; k++) {
        size_t sz[1] = {(size_t)(1000 * (1 + k))};
        tsr_perfmodel_info_t in = predict_ok(&cl1, TSR_DEVICE_CPU, sz, NULL);
        cr_assert_eq(in.nsamples, NTHREADS * PER_THREAD / 4u);
        cr_assert(in.seconds == 1e-6 * (1 + k), "%g", in.seconds);
    }
    /* every footprint is time ∝ size: the regression is exact */
    size_t q[1] = {10000};
    tsr_perfmodel_info_t in = predict_ok(&cl1, TSR_DEVICE_CPU, q, NULL);
    cr_assert(close_rel(in.seconds, 1e-5, 1e-9), "%g", in.seconds);
    stop();
    cleanup();
}

/* ---- the bus model ------------------------------------------------------------ */

/* Under ThreadSanitizer the simulated engine's instrumented memcpy of a
 * large copy takes longer than the throttle it simulates, so the link
 * really is slower than configured: only the upper bound holds there. */
#if defined(__SANITIZE_THREAD__)
#define SLOW_MEMCPY 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SLOW_MEMCPY 1
#endif
#endif
#ifndef SLOW_MEMCPY
#define SLOW_MEMCPY 0
#endif

static bool bw_near(double measured, double configured)
{
    double low = SLOW_MEMCPY ? 0 : 0.7 * configured;
    return measured > low && measured < 1.3 * configured;
}

static void start_sim(const char *dir, int nsim, int calibrate)
{
    tsr_config_t cfg = config(dir, calibrate);
    cfg.nsim = nsim;
    cfg.sim_mem = 64 << 20;
    cfg.sim_bandwidth = 1e9;  /* 1000 MB/s */
    cfg.sim_latency = 50e-6;  /* 50 µs */
    int rc = tsr_init(&cfg);
    cr_assert_eq(rc, TSR_OK, "tsr_init: %s", tsr_error_message());
}

/* Both directions of one simulated accelerator's link, measured afresh
 * (models in memory only) until they match the configured link: on a
 * loaded machine the engine's own memcpy can outlast the throttle for a
 * while, and the link then really is slower, so up to three fresh
 * measurements are allowed. Returns whether one matched. */
static bool measure_sim(double bw, double lat, double l[2], double b[2])
{
    bool ok = false;
    for (int attempt = 0; attempt < 3 && !ok; attempt++) {
        tsr_config_t cfg = config("", 0);
        cfg.nsim = 1;
        cfg.sim_bandwidth = bw;
        cfg.sim_latency = lat;
        cr_assert_eq(tsr_init(&cfg), TSR_OK, "%s", tsr_error_message());
        cr_assert_eq(tsr_memory_node_count(), 2);
        /* lazily calibrated: the policy (eager) does not use models */
        cr_assert_eq(tsr_bus_model(0, 1, &l[0], &b[0]), TSR_OK, "%s", tsr_error_message());
        cr_assert_eq(tsr_bus_model(1, 0, &l[1], &b[1]), TSR_OK, "%s", tsr_error_message());
        stop();
        ok = true;
        for (int i = 0; i < 2; i++) {
            if (!bw_near(b[i], bw))
                ok = false;
            cr_log_info("attempt %d, direction %d: %.1f us, %.1f MB/s", attempt, i,
                        l[i] * 1e6, b[i] / 1e6);
        }
    }
    return ok;
}

Test(bus, measured_link_matches_the_simulated_one)
{
    fresh_dir();
    double l[2], b[2];
    cr_assert(measure_sim(1e9, 50e-6, l, b), "1000 MB/s: measured %g and %g B/s", b[0],
              b[1]);
    for (int i = 0; i < 2; i++)
        cr_assert(l[i] >= 25e-6 && l[i] <= 5e-3, "direction %d: %g s", i, l[i]);
    /* another configuration */
    cr_assert(measure_sim(2e9, 10e-6, l, b), "2000 MB/s: measured %g and %g B/s", b[0],
              b[1]);
    cleanup();
}

Test(bus, measured_links_are_cached)
{
    const char *dir = fresh_dir();
    start_sim(dir, 1, 0);
    double l[2], b[2];
    cr_assert_eq(tsr_bus_model(0, 1, &l[0], &b[0]), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_bus_model(1, 0, &l[1], &b[1]), TSR_OK, "%s", tsr_error_message());
    for (int i = 0; i < 2; i++)
        cr_assert(b[i] > 0 && b[i] < 1.3e9 && l[i] >= 25e-6, "%g s, %g B/s", l[i], b[i]);
    double l0, b0;
    cr_assert_eq(tsr_bus_model(0, 0, &l0, &b0), TSR_OK);
    cr_assert(l0 == 0 && isinf(b0));
    stop();

    char mdir[600], path[700];
    machine_dir(dir, mdir, sizeof mdir);
    snprintf(path, sizeof path, "%s/bus.txt", mdir);
    const char *text = read_text(path);
    cr_assert_not_null(text, "%s", path);
    cr_assert(strncmp(text, "# tessera bus v1\n", 17) == 0, "%s", text);

    /* Again: read back, not measured (measurements never repeat exactly). */
    start_sim(dir, 1, 0);
    double l2, b2;
    cr_assert_eq(tsr_bus_model(0, 1, &l2, &b2), TSR_OK);
    cr_assert(l2 == l[0] && b2 == b[0], "%.17g %.17g vs %.17g %.17g", l2, b2, l[0], b[0]);
    cr_assert_eq(tsr_bus_model(1, 0, &l2, &b2), TSR_OK);
    cr_assert(l2 == l[1] && b2 == b[1]);
    stop();

    /* Another configuration of the simulated link is another link: it is
     * measured, and the first one stays in the file. */
    tsr_config_t cfg = config(dir, 0);
    cfg.nsim = 1;
    cfg.sim_bandwidth = 2e9;
    cfg.sim_latency = 10e-6;
    cr_assert_eq(tsr_init(&cfg), TSR_OK);
    cr_assert_eq(tsr_bus_model(0, 1, &l2, &b2), TSR_OK);
    cr_assert(l2 != l[0] || b2 != b[0]);
    stop();
    start_sim(dir, 1, 0);
    cr_assert_eq(tsr_bus_model(0, 1, &l2, &b2), TSR_OK);
    cr_assert(l2 == l[0] && b2 == b[0]);
    stop();
    cleanup();
}

Test(bus, calibration_at_init_when_calibrating)
{
    const char *dir = fresh_dir();
    start_sim(dir, 1, 1);
    char mdir[600], path[700];
    machine_dir(dir, mdir, sizeof mdir);
    snprintf(path, sizeof path, "%s/bus.txt", mdir);
    cr_assert_not_null(read_text(path), "bus.txt written at init: %s", path);
    stop();
    cleanup();
}

Test(bus, corrupt_cache_is_measured_again)
{
    const char *dir = fresh_dir();
    start_sim(dir, 1, 1);
    stop();
    char mdir[600], path[700];
    machine_dir(dir, mdir, sizeof mdir);
    snprintf(path, sizeof path, "%s/bus.txt", mdir);
    const char *bad[] = {"# tessera bus v1\nhost sim:1 0.5\n", "# tessera bus v9\n",
                         "# tessera bus v1\nhost x -1 5\n", "\xff\x01junk"};
    for (int i = 0; i < 4; i++) {
        write_text(path, bad[i], strlen(bad[i]));
        capture_begin();
        tsr_config_t cfg = config(dir, 1);
        cfg.nsim = 1;
        cfg.sim_bandwidth = 1e9;
        cfg.sim_latency = 50e-6;
        int rc = tsr_init(&cfg);
        const char *err = capture_end();
        cr_assert_eq(rc, TSR_OK, "case %d: %s", i, tsr_error_message());
        cr_assert(strstr(err, "tessera: ignoring bus model in"), "case %d: %s", i, err);
        double l, b;
        cr_assert_eq(tsr_bus_model(0, 1, &l, &b), TSR_OK);
        cr_assert(b > 0 && b < 1.3e9 && l >= 25e-6, "case %d: %g s, %g B/s", i, l, b);
        stop();
        const char *text = read_text(path);
        cr_assert(text && strncmp(text, "# tessera bus v1\n", 17) == 0 &&
                      strstr(text, "\nhost sim:"),
                  "case %d: rewritten: %s", i, text ? text : "(none)");
    }
    cleanup();
}

Test(bus, accelerators_reach_each_other_through_the_host)
{
    start_sim("", 2, 0);
    double l01, b01, l10, b10, l02, b02, l20, b20, l12, b12;
    cr_assert_eq(tsr_bus_model(0, 1, &l01, &b01), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_bus_model(1, 0, &l10, &b10), TSR_OK);
    cr_assert_eq(tsr_bus_model(0, 2, &l02, &b02), TSR_OK);
    cr_assert_eq(tsr_bus_model(2, 0, &l20, &b20), TSR_OK);
    cr_assert_eq(tsr_bus_model(1, 2, &l12, &b12), TSR_OK);
    cr_assert(close_rel(l12, l10 + l02, 1e-12), "%g vs %g", l12, l10 + l02);
    double hop = 1 / (1 / b10 + 1 / b02);
    cr_assert(close_rel(b12, hop, 1e-12), "%g vs %g", b12, hop);
    cr_assert(b01 > 0 && b02 > 0 && b12 < b01 && b12 < b02);
    stop();
}
