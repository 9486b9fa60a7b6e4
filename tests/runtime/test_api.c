/* Public API: life cycle and misuse. Every wrong call returns an error code
 * and a message, and the runtime keeps working afterwards. */
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int add_one(void **b, const void *args, const tsr_exec_t *e)
{
    (void)args;
    (void)e;
    *(int *)b[0] += 1;
    return 0;
}

static const tsr_codelet_t cl_add = {.name = "add_one", .impl = {add_one}, .nbuffers = 1};
static const tsr_codelet_t cl_cuda_only = {.name = "cuda_only",
                                           .impl = {NULL, add_one}, .nbuffers = 1};

Test(api, init_shutdown_twice)
{
    start_runtime(2, NULL, 0);
    cr_assert_eq(tsr_worker_count(), 2);
    cr_assert_eq(tsr_init(NULL), TSR_ESTATE, "double init must fail");
    stop_runtime();
    cr_assert_eq(tsr_worker_count(), 0);
    cr_assert_eq(tsr_shutdown(), TSR_ESTATE);
    start_runtime(1, "prio", 0);
    stop_runtime();
}

Test(api, calls_before_init)
{
    tsr_handle_t h;
    int x = 0;
    cr_assert_eq(tsr_handle_register(&h, &x, sizeof x), TSR_ESTATE);
    cr_assert_eq(tsr_wait_all(), TSR_ESTATE);
    tsr_task_desc_t d = {.codelet = &cl_add};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_ESTATE);
    cr_assert(strlen(tsr_error_message()) > 0);
}

Test(api, unknown_scheduler)
{
    tsr_config_t cfg;
    tsr_config_init(&cfg);
    cfg.sched = "no-such-policy";
    cr_assert_eq(tsr_init(&cfg), TSR_ENOTFOUND);
    cr_assert(strstr(tsr_error_message(), "no-such-policy"), "%s", tsr_error_message());
    cfg.sched = "/nonexistent/policy.so";
    cr_assert_eq(tsr_init(&cfg), TSR_ENOTFOUND);
    /* The failed init left nothing behind. */
    start_runtime(1, NULL, 0);
    stop_runtime();
}

Test(api, bad_environment)
{
    setenv("TESSERA_NCPU", "two", 1);
    cr_assert_eq(tsr_init(NULL), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "TESSERA_NCPU"));
    setenv("TESSERA_NCPU", "3", 1);
    cr_assert_eq(tsr_init(NULL), TSR_OK);
    cr_assert_eq(tsr_worker_count(), 3);
    unsetenv("TESSERA_NCPU");
    stop_runtime();
    /* -1: no CPU workers (as the field); below that is malformed. */
    setenv("TESSERA_NCPU", "-2", 1);
    cr_assert_eq(tsr_init(NULL), TSR_EINVAL);
    cr_assert(strstr(tsr_error_message(), "TESSERA_NCPU"));
    setenv("TESSERA_NCPU", "-1", 1);
    setenv("TESSERA_NSIM", "1", 1);
    cr_assert_eq(tsr_init(NULL), TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_worker_count(), 1 + tsr_cuda_device_count(), "only accelerators' workers");
    unsetenv("TESSERA_NCPU");
    unsetenv("TESSERA_NSIM");
    stop_runtime();
}

/* Numbers beyond what a setting's field holds are refused, naming the
 * variable: a MiB count whose bytes overflow a size_t (2^44 MiB is 2^64
 * bytes, which wrapped to 0: "unlimited"), an int setting given a value of
 * 2^32 and more (TESSERA_NCPU=2^32+2 gave 2 workers), and values outside a
 * field's documented range. */
Test(api, environment_out_of_range)
{
    static const struct {
        const char *var, *value;
    } bad[] = {
        {"TESSERA_LIMIT_DISK_MEM", "17592186044416"},
        {"TESSERA_LIMIT_HOST_MEM", "17592186044416"},
        {"TESSERA_LIMIT_SIM_MEM", "17592186044417"},
        {"TESSERA_LIMIT_CUDA_MEM", "9223372036854775807"},
        {"TESSERA_NCPU", "4294967298"},
        {"TESSERA_NCPU", "4097"},
        {"TESSERA_NSIM", "4294967297"},
        {"TESSERA_NCUDA", "4294967296"},
        {"TESSERA_PIPELINE", "4294967300"},
        {"TESSERA_CUDA_STREAMS", "9"},
        {"TESSERA_CUDA_STREAMS", "-1"},
        {"TESSERA_CALIBRATE", "3"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv(bad[i].var, bad[i].value, 1);
        int rc = tsr_init(NULL);
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", tsr_error_message());
        if (rc == TSR_OK)
            tsr_shutdown();
        unsetenv(bad[i].var);
        cr_expect_eq(rc, TSR_EINVAL, "%s=%s: tsr_init returned %d", bad[i].var, bad[i].value,
                     rc);
        cr_expect(rc != TSR_OK && strstr(msg, bad[i].var) && strstr(msg, bad[i].value),
                  "%s=%s: the message does not name the variable and value: '%s'",
                  bad[i].var, bad[i].value, msg);
    }
    /* The largest MiB count that fits still passes the parse (it fails
     * later or not at all, but not as a wrapped number). */
    setenv("TESSERA_NCPU", "2", 1);
    setenv("TESSERA_LIMIT_HOST_MEM", "17592186044415", 1);
    int rc = tsr_init(NULL);
    unsetenv("TESSERA_NCPU");
    unsetenv("TESSERA_LIMIT_HOST_MEM");
    cr_assert_eq(rc, TSR_OK, "%s", tsr_error_message());
    cr_assert_eq(tsr_worker_count(), 2 + tsr_cuda_device_count());
    stop_runtime();
}

/* The same ranges through tsr_config_t: compute streams per GPU are 0
 * (the default) to 8. */
Test(api, config_cuda_streams_out_of_range)
{
    static const int bad[] = {-1, 9, 1000};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tsr_config_t cfg;
        tsr_config_init(&cfg);
        cfg.cuda_streams = bad[i];
        int rc = tsr_init(&cfg);
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", tsr_error_message());
        if (rc == TSR_OK)
            tsr_shutdown();
        cr_expect_eq(rc, TSR_EINVAL, "cuda_streams=%d: tsr_init returned %d", bad[i], rc);
        cr_expect(strstr(msg, "cuda_streams"), "cuda_streams=%d: '%s'", bad[i], msg);
    }
}

Test(api, misuse_of_handles_and_tasks)
{
    start_runtime(2, NULL, 0);
    int x = 0;
    tsr_handle_t h;
    cr_assert_eq(tsr_handle_register(NULL, &x, sizeof x), TSR_EINVAL);
    cr_assert_eq(tsr_handle_register(&h, NULL, 4), TSR_EINVAL);
    cr_assert_eq(tsr_handle_register(&h, &x, 0), TSR_EINVAL);
    cr_assert_eq(tsr_handle_register(&h, &x, sizeof x), TSR_OK);

    tsr_access_t acc[2] = {{h, TSR_RW}, {h, TSR_R}};
    tsr_task_desc_t d = {.codelet = &cl_add, .nbuffers = 2, .buffers = acc};
    cr_assert_eq(tsr_submit(&d, NULL), TSR_EINVAL, "wrong buffer count");
    cr_assert(strstr(tsr_error_message(), "add_one"), "%s", tsr_error_message());
    d.nbuffers = 1;
    tsr_access_t null_acc = {NULL, TSR_RW};
    d.buffers = &null_acc;
    cr_assert_eq(tsr_submit(&d, NULL), TSR_EINVAL, "null handle");
    tsr_access_t bad_mode = {h, (tsr_mode_t)77};
    d.buffers = &bad_mode;
    cr_assert_eq(tsr_submit(&d, NULL), TSR_EINVAL, "bad mode");
    d.buffers = acc;
    char big[TSR_MAX_ARGS + 1];
    d.args = big;
    d.args_size = sizeof big;
    cr_assert_eq(tsr_submit(&d, NULL), TSR_EINVAL, "args too large");
    d.args = NULL;
    d.args_size = 0;
    d.codelet = &cl_cuda_only;
    cr_assert_eq(tsr_submit(&d, NULL), TSR_ENODEV, "no CPU implementation");
    cr_assert_eq(tsr_submit(NULL, NULL), TSR_EINVAL);
    d.codelet = &cl_add;

    /* None of the refused submissions ran; a good one does. */
    cr_assert_eq(tsr_submit(&d, NULL), TSR_OK);
    cr_assert_eq(tsr_wait_all(), TSR_OK);

    /* Unregister while acquired is refused; release, then it works. */
    void *p;
    cr_assert_eq(tsr_handle_acquire(h, TSR_R, &p), TSR_OK);
    cr_assert_eq(*(int *)p, 1);
    cr_assert_eq(tsr_handle_acquire(h, TSR_R, &p), TSR_EBUSY);
    cr_assert_eq(tsr_handle_unregister(h), TSR_EBUSY);
    cr_assert_eq(tsr_wait_all(), TSR_EBUSY);
    cr_assert_eq(tsr_handle_release(h), TSR_OK);
    cr_assert_eq(tsr_handle_release(h), TSR_EINVAL, "release twice");
    cr_assert_eq(tsr_handle_acquire(h, TSR_SCRATCH, &p), TSR_EINVAL);
    cr_assert_eq(tsr_handle_unregister(h), TSR_OK);
    cr_assert_eq(x, 1);
    cr_assert_eq(tsr_handle_unregister(NULL), TSR_EINVAL);
    cr_assert_eq(tsr_task_wait(NULL), TSR_EINVAL);
    cr_assert_eq(tsr_wait_tag(0), TSR_EINVAL);
    stop_runtime();
}

Test(api, strerror_names_every_code)
{
    for (int c = TSR_EIO; c <= TSR_OK; c++)
        cr_assert(strncmp(tsr_strerror(c), "TSR_", 4) == 0, "code %d", c);
    cr_assert_str_eq(tsr_strerror(12345), "unknown status");
}

Test(api, shutdown_unregisters_and_releases)
{
    start_runtime(2, NULL, 0);
    int x = 0;
    tsr_handle_t h, h2;
    cr_assert_eq(tsr_handle_register(&h, &x, sizeof x), TSR_OK);
    cr_assert_eq(tsr_handle_alloc(&h2, 1000), TSR_OK);
    tsr_access_t a = {h, TSR_RW};
    tsr_task_desc_t d = {.codelet = &cl_add, .nbuffers = 1, .buffers = &a};
    void *p;
    cr_assert_eq(tsr_handle_acquire(h, TSR_RW, &p), TSR_OK);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(tsr_submit(&d, NULL), TSR_OK);
    /* Shutdown ends the acquisition, runs the ten tasks, frees both. */
    stop_runtime();
    cr_assert_eq(x, 10);
}

Test(api, device_query)
{
    int n = tsr_cuda_device_count();
    cr_assert_geq(n, 0);
    tsr_device_info_t info;
    cr_assert_eq(tsr_cuda_device_info(n, &info), TSR_ENODEV);
    if (n == 0) {
        cr_log_info("no CUDA device: device_info checks only the error path");
        return;
    }
    cr_assert_eq(tsr_cuda_device_info(0, &info), TSR_OK);
    cr_assert(info.total_mem > 0 && strlen(info.name) > 0);
}

/* TESSERA_TRACE: one complete ("X") event per task, with its name, on the
 * worker that ran it, in a file that is a JSON object. */
Test(api, trace_has_one_event_per_task)
{
    char path[] = "/tmp/tessera-trace-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    setenv("TESSERA_TRACE", path, 1);
    start_runtime(2, NULL, 0);
    unsetenv("TESSERA_TRACE");
    int x[50] = {0};
    for (int i = 0; i < 50; i++) {
        tsr_handle_t h;
        cr_assert_eq(tsr_handle_register(&h, &x[i], sizeof x[i]), TSR_OK);
        tsr_task_desc_t d = {.codelet = &cl_add, .nbuffers = 1,
                             .buffers = &(tsr_access_t){h, TSR_RW},
                             .name = i % 2 ? "odd \"task\"" : "even"};
        cr_assert_eq(tsr_submit(&d, NULL), TSR_OK);
    }
    stop_runtime();
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    unlink(path);
    buf[n] = 0;
    int events = 0, odd = 0;
    for (char *p = buf; (p = strstr(p, "\"ph\":\"X\"")) != NULL; p++)
        events++;
    for (char *p = buf; (p = strstr(p, "\"odd \\\"task\\\"\"")) != NULL; p++)
        odd++;
    cr_assert_eq(events, 50, "%d events", events);
    cr_assert_eq(odd, 25, "names must be JSON-escaped: %d", odd);
    cr_assert(buf[0] == '{' && strstr(buf, "]}"), "not a JSON object");
    for (int i = 0; i < 50; i++)
        cr_assert_eq(x[i], 1);
}
