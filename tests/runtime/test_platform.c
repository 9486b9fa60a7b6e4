/* tests/runtime/test_platform.c — platform files and the rate model:
 * every shipped file in platforms/ loads (and dgx-a100.json holds the
 * datasheet numbers in the struct's units, its NVMe drives among them),
 * malformed files (bad "disk" fields among them) are refused
 * with the right code and a message naming the field, the roofline equals
 * hand arithmetic, and the nn codelets' flops and bytes estimates equal
 * counts made by hand or by naive loops over what the kernels do.
 *
 * Never: depend on timing, or leave a temporary file behind.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn/ops.h"
#include "runtime/platform.h"

static char tmpdir[] = "/tmp/tsr-platform-XXXXXX";
static char tmpfile_path[4096];

static void make_tmpdir(void)
{
    cr_assert_not_null(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
    unlink(tmpfile_path);
    rmdir(tmpdir);
}

/* Write text to <tmpdir>/p.json and return its path. */
static const char *write_file(const char *text)
{
    snprintf(tmpfile_path, sizeof tmpfile_path, "%s/p.json", tmpdir);
    FILE *f = fopen(tmpfile_path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    return tmpfile_path;
}

/* A valid platform with one placeholder, %s, inside the top-level object
 * (after "name") where a test adds or replaces members. Rates chosen for
 * hand arithmetic: CPU 1 TFLOPS / 100 GB/s, CUDA 10 TFLOPS (TF32 40, BF16 80) / 1000
 * GB/s, launch 5 µs, efficiencies 0.5, "k" overrides the CUDA flops
 * efficiency to 0.25. */
#define BASE_HEAD "{\"name\": \"t\", \"models\": \"rates\", \"task_overhead_us\": 2,\n"
#define BASE_HOST                                                                       \
    "\"host\": {\"memory_gib\": 16, \"memory_bandwidth_gbs\": 50, \"cpu_workers\": 2},\n"
#define BASE_DEVICES                                                                    \
    "\"devices\": {\"cpu\": {\"fp32_tflops\": 1, \"memory_bandwidth_gbs\": 100,"        \
    " \"launch_us\": 0, \"flops_efficiency\": 0.5, \"bytes_efficiency\": 0.5},\n"       \
    " \"cuda\": {\"fp32_tflops\": 10, \"tf32_tflops\": 40, \"bf16_tflops\": 80,"      \
    " \"memory_bandwidth_gbs\": 1000,"                                                 \
    " \"launch_us\": 5, \"flops_efficiency\": 0.5, \"bytes_efficiency\": 0.5,"          \
    " \"codelets\": {\"k\": {\"flops_efficiency\": 0.25}}}},\n"
#define BASE_ACC                                                                        \
    "\"accelerators\": [{\"kind\": \"cuda\", \"count\": 4, \"memory_gib\": 2,"          \
    " \"link\": {\"bandwidth_gbs\": 25, \"latency_us\": 10},"                           \
    " \"pcie_switch\": {\"accelerators_per_switch\": 2, \"bandwidth_gbs\": 30,"         \
    " \"latency_us\": 1},"                                                              \
    " \"nvlink\": {\"bandwidth_gbs\": 300, \"latency_us\": 5}}]}\n"
#define BASE BASE_HEAD BASE_HOST BASE_DEVICES BASE_ACC

static tsr_platform_t plat;

/* Load text; expect `code` and, when failing, a message holding `field`. */
static void expect_load(const char *text, int code, const char *field)
{
    int rc = tsr__platform_load(write_file(text), &plat);
    cr_assert_eq(rc, code, "rc %d (want %d): %s", rc, code, rc ? tsr_error_message() : "");
    if (field) {
        const char *msg = tsr_error_message();
        cr_assert(strstr(msg, field) != NULL, "message \"%s\" does not name %s", msg, field);
        cr_assert(strstr(msg, tmpfile_path) != NULL, "message \"%s\" does not name the file",
                  msg);
    }
}

/* ---- the shipped files ------------------------------------------------------ */

static void platforms_dir(char *buf, size_t n)
{
    const char *root = getenv("TESSERA_SOURCE_ROOT");
    snprintf(buf, n, "%s/platforms", root ? root : ".");
}

Test(platform, every_shipped_file_loads)
{
    char dir[4096], path[8192];
    platforms_dir(dir, sizeof dir);
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "cannot open %s", dir);
    int nfiles = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".json"))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        int rc = tsr__platform_load(path, &plat);
        cr_expect_eq(rc, TSR_OK, "%s: %s", e->d_name, rc ? tsr_error_message() : "");
        cr_expect_str_eq(plat.path, path);
        nfiles++;
    }
    closedir(d);
    cr_assert_geq(nfiles, 6, "only %d platform files in %s", nfiles, dir);
}

Test(platform, dgx_a100_holds_the_datasheet_numbers)
{
    char dir[4096], path[8192];
    platforms_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/dgx-a100.json", dir);
    cr_assert_eq(tsr__platform_load(path, &plat), TSR_OK, "%s", tsr_error_message());
    cr_expect_str_eq(plat.name, "dgx-a100");
    cr_expect(!plat.machine_models);
    cr_expect_eq(plat.ncpu, 120); /* Tessera's default: 128 cores less 8 GPU drivers */
    cr_expect_eq(plat.mem.host_capacity, (size_t)900 << 30);
    cr_expect_float_eq(plat.mem.host_mem.bandwidth, 409.6e9, 1);
    const tsr_platform_device_t *g = &plat.device[TSR_DEVICE_CUDA];
    cr_expect_float_eq(g->peak_flops, 19.5e12, 1);
    cr_expect_float_eq(g->peak_flops_tf32, 156e12, 1);
    cr_expect_float_eq(g->peak_flops_bf16, 312e12, 1);
    cr_expect_float_eq(g->mem_bandwidth, 2039e9, 1);
    cr_expect_float_eq(g->launch, 5e-6, 1e-12);
    cr_expect_eq(plat.mem.nacc, 8);
    cr_expect_eq(plat.mem.nswitches, 4);
    for (int i = 0; i < 8; i++) {
        const tsr_phantom_acc_t *a = &plat.mem.acc[i];
        cr_expect_eq(a->kind, TSR_NODE_KIND_CUDA);
        cr_expect_eq(a->capacity, (size_t)80 << 30);
        cr_expect_eq(a->pcie_switch, i / 2, "GPU %d behind switch %d", i, a->pcie_switch);
        cr_expect(a->peer);
        cr_expect_float_eq(a->nvlink.bandwidth, 300e9, 1);
        cr_expect_float_eq(a->link.bandwidth, 25e9, 1);
        cr_expect_float_eq(a->link.latency, 10e-6, 1e-12);
        cr_expect_float_eq(a->fill_bandwidth, 2039e9, 1); /* the default: HBM */
    }
    /* 4 x 3.84 TB NVMe data drives, RAID-0 (the 640 GB model) */
    cr_expect_eq(plat.mem.disk.capacity, (size_t)15360000000000ull);
    cr_expect_float_eq(plat.mem.disk.read.bandwidth, 28e9, 1);
    cr_expect_float_eq(plat.mem.disk.write.bandwidth, 14e9, 1);
    cr_expect(!plat.mem.disk.gpudirect);
}

/* ---- a valid file, field by field ---------------------------------------------- */

Test(platform, base_file_fields, .init = make_tmpdir, .fini = remove_tmpdir)
{
    expect_load(BASE, TSR_OK, NULL);
    cr_expect_float_eq(plat.task_overhead, 2e-6, 1e-15);
    cr_expect_eq(plat.ncpu, 2);
    cr_expect_eq(plat.mem.host_capacity, (size_t)16 << 30);
    cr_expect_float_eq(plat.mem.host_mem.bandwidth, 50e9, 1);
    cr_expect_eq(plat.mem.nacc, 4);
    cr_expect_eq(plat.mem.nswitches, 2);
    cr_expect_float_eq(plat.mem.switches[1].bandwidth, 30e9, 1);
    cr_expect_float_eq(plat.mem.switches[1].latency, 1e-6, 1e-15);
    cr_expect_eq(plat.mem.acc[3].pcie_switch, 1);
    cr_expect_eq(plat.device[TSR_DEVICE_CUDA].ncodelets, 1);
    cr_expect_str_eq(plat.device[TSR_DEVICE_CUDA].codelets[0].name, "k");
}

Test(platform, sim_group_without_switch_or_nvlink, .init = make_tmpdir, .fini = remove_tmpdir)
{
    expect_load(BASE_HEAD BASE_HOST
                "\"devices\": {\"cpu\": {\"fp32_tflops\": 1, \"memory_bandwidth_gbs\": 100,"
                " \"launch_us\": 0, \"flops_efficiency\": 0.5, \"bytes_efficiency\": 0.5}},"
                "\"accelerators\": [{\"kind\": \"sim\", \"count\": 2, \"memory_gib\": 0.0625,"
                " \"link\": {\"bandwidth_gbs\": 2, \"latency_us\": 10}}]}",
                TSR_OK, NULL);
    cr_expect_eq(plat.mem.nacc, 2);
    cr_expect_eq(plat.mem.nswitches, 0);
    cr_expect_eq(plat.mem.acc[1].kind, TSR_NODE_KIND_SIM);
    cr_expect_eq(plat.mem.acc[1].capacity, (size_t)64 << 20);
    cr_expect_eq(plat.mem.acc[1].pcie_switch, -1);
    cr_expect(!plat.mem.acc[1].peer);
    cr_expect_float_eq(plat.mem.acc[1].fill_bandwidth, 100e9, 1); /* the CPU's */
}

/* ---- bad files -------------------------------------------------------------------- */

/* "models_key" names the model-directory folder of another machine whose
 * models a "machine" platform uses; nothing else is accepted. */
Test(platform, models_key, .init = make_tmpdir, .fini = remove_tmpdir)
{
#define MACHINE_HEAD "{\"name\": \"t\", \"models\": \"machine\", \"task_overhead_us\": 2,\n"
    expect_load(MACHINE_HEAD "\"models_key\": \"gpu-node-1a2b3c4d\",\n" BASE_HOST BASE_DEVICES
                BASE_ACC, TSR_OK, NULL);
    cr_expect(plat.machine_models);
    cr_expect_str_eq(plat.models_key, "gpu-node-1a2b3c4d");
    expect_load(MACHINE_HEAD BASE_HOST BASE_DEVICES BASE_ACC, TSR_OK, NULL);
    cr_expect_str_eq(plat.models_key, "");
    expect_load(BASE_HEAD "\"models_key\": \"gpu-node\",\n" BASE_HOST BASE_DEVICES BASE_ACC,
                TSR_EINVAL, "models_key: only with");
    expect_load(MACHINE_HEAD "\"models_key\": \"../x\",\n" BASE_HOST BASE_DEVICES BASE_ACC,
                TSR_EINVAL, "models_key: \"../x\": must be a folder name");
    expect_load(MACHINE_HEAD "\"models_key\": \"..\",\n" BASE_HOST BASE_DEVICES BASE_ACC,
                TSR_EINVAL, "models_key");
    expect_load(MACHINE_HEAD "\"models_key\": 3,\n" BASE_HOST BASE_DEVICES BASE_ACC,
                TSR_EINVAL, "models_key: must be a string");
#undef MACHINE_HEAD
}

Test(platform, missing_field, .init = make_tmpdir, .fini = remove_tmpdir)
{
    expect_load(BASE_HEAD BASE_DEVICES BASE_ACC, TSR_EINVAL, "host: missing");
    expect_load("{\"name\": \"t\", \"task_overhead_us\": 2, " BASE_HOST BASE_DEVICES BASE_ACC,
                TSR_EINVAL, "models: missing");
}

Test(platform, negative_bandwidth, .init = make_tmpdir, .fini = remove_tmpdir)
{
    expect_load(BASE_HEAD BASE_HOST BASE_DEVICES
                "\"accelerators\": [{\"kind\": \"cuda\", \"count\": 1, \"memory_gib\": 2,"
                " \"link\": {\"bandwidth_gbs\": -25, \"latency_us\": 10}}]}",
                TSR_EINVAL, "accelerators[0].link.bandwidth_gbs: -25 is out of range");
    expect_load(BASE_HEAD
                "\"host\": {\"memory_gib\": 16, \"memory_bandwidth_gbs\": 0, \"cpu_workers\": 2},"
                BASE_DEVICES BASE_ACC,
                TSR_EINVAL, "host.memory_bandwidth_gbs");
}

Test(platform, unknown_key, .init = make_tmpdir, .fini = remove_tmpdir)
{
    /* a typo must not leave a default in place */
    expect_load(BASE_HEAD BASE_HOST BASE_DEVICES
                "\"accelerators\": [{\"kind\": \"cuda\", \"count\": 1, \"memory_gib\": 2,"
                " \"link\": {\"bandwith_gbs\": 25, \"latency_us\": 10}}]}",
                TSR_EINVAL, "accelerators[0].link.bandwith_gbs: unknown key");
    expect_load("{\"nmae\": \"t\", " BASE_HOST BASE_DEVICES BASE_ACC, TSR_EINVAL,
                "nmae: unknown key");
}

Test(platform, wrong_type, .init = make_tmpdir, .fini = remove_tmpdir)
{
    expect_load(BASE_HEAD BASE_HOST BASE_DEVICES
                "\"accelerators\": [{\"kind\": \"cuda\", \"count\": \"8\", \"memory_gib\": 2,"
                " \"link\": {\"bandwidth_gbs\": 25, \"latency_us\": 10}}]}",
                TSR_EINVAL, "accelerators[0].count: must be an integer");
    expect_load(BASE_HEAD "\"host\": [16]," BASE_DEVICES BASE_ACC, TSR_EINVAL,
                "host: must be an object, not a array");
    expect_load("[1, 2]", TSR_EINVAL, "must be an object");
}

Test(platform, out_of_range_and_inconsistent, .init = make_tmpdir, .fini = remove_tmpdir)
{
    /* 32 accelerators: one more than the phantom nodes hold */
    expect_load(BASE_HEAD BASE_HOST BASE_DEVICES
                "\"accelerators\": [{\"kind\": \"cuda\", \"count\": 32, \"memory_gib\": 2,"
                " \"link\": {\"bandwidth_gbs\": 25, \"latency_us\": 10}}]}",
                TSR_EINVAL, "accelerators[0].count");
    /* an efficiency above 1 */
    expect_load(BASE_HEAD BASE_HOST
                "\"devices\": {\"cpu\": {\"fp32_tflops\": 1, \"memory_bandwidth_gbs\": 100,"
                " \"launch_us\": 0, \"flops_efficiency\": 1.5, \"bytes_efficiency\": 0.5}}}",
                TSR_EINVAL, "devices.cpu.flops_efficiency: 1.5 is out of range");
    /* tensor-core rates on a CPU */
    expect_load(BASE_HEAD BASE_HOST
                "\"devices\": {\"cpu\": {\"fp32_tflops\": 1, \"memory_bandwidth_gbs\": 100,"
                " \"bf16_tflops\": 2, \"launch_us\": 0, \"flops_efficiency\": 1,"
                " \"bytes_efficiency\": 0.5}}}",
                TSR_EINVAL, "devices.cpu.bf16_tflops: only a CUDA device");
    /* a CUDA device without CUDA accelerators, and the reverse */
    expect_load(BASE_HEAD BASE_HOST BASE_DEVICES "\"accelerators\": []}", TSR_EINVAL,
                "devices.cuda: no accelerator");
    expect_load(BASE_HEAD BASE_HOST
                "\"devices\": {\"cpu\": {\"fp32_tflops\": 1, \"memory_bandwidth_gbs\": 100,"
                " \"launch_us\": 0, \"flops_efficiency\": 0.5, \"bytes_efficiency\": 0.5}},"
                BASE_ACC,
                TSR_EINVAL, "devices.cuda: missing");
    /* NVLink on a simulated accelerator */
    expect_load(BASE_HEAD BASE_HOST BASE_DEVICES
                "\"accelerators\": [{\"kind\": \"sim\", \"count\": 1, \"memory_gib\": 2,"
                " \"link\": {\"bandwidth_gbs\": 2, \"latency_us\": 10},"
                " \"nvlink\": {\"bandwidth_gbs\": 300, \"latency_us\": 5}}]}",
                TSR_EINVAL, "accelerators[0].nvlink");
    /* nothing to run on */
    expect_load(BASE_HEAD
                "\"host\": {\"memory_gib\": 16, \"memory_bandwidth_gbs\": 50, \"cpu_workers\": 0},"
                "\"devices\": {\"cpu\": {\"fp32_tflops\": 1, \"memory_bandwidth_gbs\": 100,"
                " \"launch_us\": 0, \"flops_efficiency\": 0.5, \"bytes_efficiency\": 0.5}}}",
                TSR_EINVAL, "host.cpu_workers");
    expect_load(BASE_HEAD BASE_HOST BASE_DEVICES
                "\"accelerators\": [{\"kind\": \"tpu\", \"count\": 1, \"memory_gib\": 2,"
                " \"link\": {\"bandwidth_gbs\": 2, \"latency_us\": 10}}]}",
                TSR_EINVAL, "accelerators[0].kind");
}

Test(platform, not_json, .init = make_tmpdir, .fini = remove_tmpdir)
{
    expect_load("{\"name\": \"t\",", TSR_EINVAL, NULL);
    cr_expect(strstr(tsr_error_message(), tmpfile_path) != NULL, "%s", tsr_error_message());
    expect_load("", TSR_EINVAL, NULL);
}

Test(platform, missing_file, .init = make_tmpdir, .fini = remove_tmpdir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/none.json", tmpdir);
    cr_expect_eq(tsr__platform_load(path, &plat), TSR_ENOTFOUND);
    cr_expect(strstr(tsr_error_message(), "none.json") != NULL, "%s", tsr_error_message());
    cr_expect_eq(tsr__platform_load(tmpdir, &plat), TSR_EIO, "a directory is no file");
}

/* ---- the rate model ----------------------------------------------------------------- */

static double est_flops, est_bytes;
static double fixed_flops(const void *args, const size_t *sizes)
{
    (void)args, (void)sizes;
    return est_flops;
}
static double fixed_bytes(const void *args, const size_t *sizes)
{
    (void)args, (void)sizes;
    return est_bytes;
}

Test(platform, roofline_equals_hand_arithmetic, .init = make_tmpdir, .fini = remove_tmpdir)
{
    expect_load(BASE, TSR_OK, NULL);
    tsr_codelet_t cl = {.name = "scale", .nbuffers = 1, .flops = fixed_flops,
                        .bytes = fixed_bytes};
    size_t sizes[2] = {1000, 3000};
    double t;

    /* compute-bound on CUDA: 2e12 flops at 10e12 × 0.5 = 0.4 s; 1e9 bytes
     * at 1e12 × 0.5 = 2 ms; + 5 µs launch */
    est_flops = 2e12, est_bytes = 1e9;
    t = tsr__platform_task_seconds(&plat, TSR_DEVICE_CUDA, &cl, sizes, 2, NULL,
                                   TSR_CUDA_FP32_TF32);
    cr_expect_float_eq(t, 5e-6 + 0.4, 1e-12);

    /* memory-bound on CUDA: 1e9 flops = 0.2 ms; 4e11 bytes = 0.8 s */
    est_flops = 1e9, est_bytes = 4e11;
    t = tsr__platform_task_seconds(&plat, TSR_DEVICE_CUDA, &cl, sizes, 2, NULL,
                                   TSR_CUDA_FP32_TF32);
    cr_expect_float_eq(t, 5e-6 + 0.8, 1e-12);

    /* the same on the CPU: 1e9 / 0.5e12 = 2 ms against 4e11 / 50e9 = 8 s */
    t = tsr__platform_task_seconds(&plat, TSR_DEVICE_CPU, &cl, sizes, 2, NULL,
                                   TSR_CUDA_FP32_TF32);
    cr_expect_float_eq(t, 8.0, 1e-9);

    /* no bytes function: the buffers' 4000 bytes; no flops function: 0 */
    tsr_codelet_t plain = {.name = "plain", .nbuffers = 2};
    t = tsr__platform_task_seconds(&plat, TSR_DEVICE_CUDA, &plain, sizes, 2, NULL,
                                   TSR_CUDA_FP32_TF32);
    cr_expect_float_eq(t, 5e-6 + 4000 / 5e11, 1e-15);
}

Test(platform, per_codelet_override_and_tf32, .init = make_tmpdir, .fini = remove_tmpdir)
{
    expect_load(BASE, TSR_OK, NULL);
    size_t sizes[1] = {0};
    est_flops = 2e12, est_bytes = 0;
    /* "k" runs at 0.25 of the CUDA peak: 2e12 / 2.5e12 = 0.8 s */
    tsr_codelet_t k = {.name = "k", .nbuffers = 1, .flops = fixed_flops, .bytes = fixed_bytes};
    double t = tsr__platform_task_seconds(&plat, TSR_DEVICE_CUDA, &k, sizes, 1, NULL,
                                          TSR_CUDA_FP32_TF32);
    cr_expect_float_eq(t, 5e-6 + 0.8, 1e-12);
    /* …but the CPU has no override: 2e12 / 0.5e12 = 4 s */
    t = tsr__platform_task_seconds(&plat, TSR_DEVICE_CPU, &k, sizes, 1, NULL,
                                   TSR_CUDA_FP32_TF32);
    cr_expect_float_eq(t, 4.0, 1e-9);
    /* a GEMM in TF32 runs at the TF32 peak: 2e12 / (40e12 × 0.5) = 0.1 s;
     * in strict FP32 at the FP32 peak: 0.4 s */
    tsr_codelet_t g = {.name = "my_gemm", .nbuffers = 1, .flops = fixed_flops,
                       .bytes = fixed_bytes};
    t = tsr__platform_task_seconds(&plat, TSR_DEVICE_CUDA, &g, sizes, 1, NULL,
                                   TSR_CUDA_FP32_TF32);
    cr_expect_float_eq(t, 5e-6 + 0.1, 1e-12);
    t = tsr__platform_task_seconds(&plat, TSR_DEVICE_CUDA, &g, sizes, 1, NULL,
                                   TSR_CUDA_FP32_STRICT);
    cr_expect_float_eq(t, 5e-6 + 0.4, 1e-12);
    /* the bf16 GEMM at the BF16 peak in either mode: 2e12 / (80e12 × 0.5) */
    tsr_codelet_t gb = {.name = "gemm_bf16", .nbuffers = 1, .flops = fixed_flops,
                        .bytes = fixed_bytes};
    int modes[2] = {TSR_CUDA_FP32_TF32, TSR_CUDA_FP32_STRICT};
    for (int i = 0; i < 2; i++) {
        t = tsr__platform_task_seconds(&plat, TSR_DEVICE_CUDA, &gb, sizes, 1, NULL, modes[i]);
        cr_expect_float_eq(t, 5e-6 + 0.05, 1e-12, "mode %d: %.9f s", modes[i], t);
    }
    /* …and on a CPU at its own peak, as any codelet: 4 s */
    t = tsr__platform_task_seconds(&plat, TSR_DEVICE_CPU, &gb, sizes, 1, NULL,
                                   TSR_CUDA_FP32_TF32);
    cr_expect_float_eq(t, 4.0, 1e-9);
    /* the attention on heads the tensor-core kernels take at the TF32 peak
     * (0.1 s), on wider ones (the FP32 kernels) at the FP32 peak (0.4 s) */
    const char *attn[4] = {"attn_fwd", "attn_bwd", "attn_fwd_wide", "attn_bwd_wide"};
    for (int i = 0; i < 4; i++) {
        tsr_codelet_t a = {.name = attn[i], .nbuffers = 1, .flops = fixed_flops,
                           .bytes = fixed_bytes};
        t = tsr__platform_task_seconds(&plat, TSR_DEVICE_CUDA, &a, sizes, 1, NULL,
                                       TSR_CUDA_FP32_TF32);
        cr_expect_float_eq(t, 5e-6 + (i < 2 ? 0.1 : 0.4), 1e-12, "%s: %.9f s", attn[i], t);
    }
}

/* ---- the nn codelets' estimates ---------------------------------------------------- */

static double flops_of(const char *name, const void *args, const size_t *sizes)
{
    const tsr_codelet_t *cl = tsr__op_codelet(name);
    cr_assert_not_null(cl, "no codelet %s", name);
    return cl->flops ? cl->flops(args, sizes) : 0;
}

static double bytes_of(const char *name, const void *args, const size_t *sizes)
{
    const tsr_codelet_t *cl = tsr__op_codelet(name);
    cr_assert_not_null(cl, "no codelet %s", name);
    cr_assert_not_null(cl->bytes, "%s has no bytes estimate", name);
    return cl->bytes(args, sizes);
}

Test(codelets, every_one_has_estimates)
{
    static const char *const movers[] = {"fill",        "copy",        "copy_rows",
                                         "attn_init",   "f32_to_bf16", "bf16_to_f32",
                                         "regroup"};
    int n = 0;
    for (const tsr_codelet_t *cl; (cl = tsr__op_codelet_at(n)); n++) {
        cr_expect_not_null(cl->bytes, "%s has no bytes estimate", cl->name);
        int mover = 0;
        for (size_t i = 0; i < sizeof movers / sizeof *movers; i++)
            mover |= !strcmp(movers[i], cl->name);
        if (mover)
            cr_expect_null(cl->flops, "%s moves data only: no flops function", cl->name);
        else
            cr_expect_not_null(cl->flops, "%s has no flops estimate", cl->name);
        cr_expect_eq(tsr__op_codelet(cl->name), cl);
    }
    cr_expect_eq(n, 59); /* 37, less regroup_bf16, with the 5 fused GEMM epilogues, the 6
                          * Llama layers (RMSNorm, SwiGLU, RoPE forward and backward) and
                          * their 4 bf16 producers (RMSNorm, SwiGLU forward and backward),
                          * LayerNorm over row tiles' 6 (partial sums, deviations,
                          * combine, apply, gradient partials, gradient apply), and the
                          * attention's 2 for heads wider than its tensor-core kernels */
    cr_expect_null(tsr__op_codelet("nope"));
}

/* Visible (query, key) pairs as kernels/cpu/attention.c walks them. */
static double naive_pairs(int tq, int tk, int nb, int q0, int k0)
{
    double n = 0;
    for (int i = 0; i < tq; i++) {
        long nvis = (long)q0 + i - k0 + 1;
        n += nvis < 0 ? 0 : (nvis > tk ? tk : nvis);
    }
    return n * nb;
}

Test(codelets, attention_pairs_match_the_kernel_loop)
{
    int shapes[][5] = {{4, 4, 1, 0, 0},   {4, 4, 2, 4, 0},  {8, 4, 1, 0, 0},
                       {4, 8, 1, 0, 0},   {5, 3, 3, 7, 2},  {64, 64, 1, 128, 64},
                       {64, 64, 1, 0, 64}, {3, 7, 1, 10, 0}, {7, 3, 1, 0, 5}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int *x = shapes[s];
        cr_expect_float_eq(tsr__attn_pairs(x[0], x[1], x[2], x[3], x[4]),
                           naive_pairs(x[0], x[1], x[2], x[3], x[4]), 1e-9,
                           "tq %d tk %d nb %d q0 %d k0 %d", x[0], x[1], x[2], x[3], x[4]);
    }
}

Test(codelets, hand_counts)
{
    /* GEMM m 3, n 4, k 5: 2 m n k = 120 flops; A 15, B 20,
     * C 12 elements, C read too when beta != 0 */
    tsr__gemm_args_t g = {0, 0, 3, 4, 5, 1.0f, 1.0f};
    cr_expect_float_eq(flops_of("gemm", &g, NULL), 120, 1e-9);
    cr_expect_float_eq(bytes_of("gemm", &g, NULL), 4 * (15 + 20 + 24), 1e-9);
    g.beta = 0.0f;
    cr_expect_float_eq(bytes_of("gemm", &g, NULL), 4 * (15 + 20 + 12), 1e-9);

    /* attention forward on a diagonal tile, d 2, tq = tk = 4: pairs 1+2+3+4
     * = 10, each 4d + 5 = 13 → 130; an off-diagonal tile (q0 4, k0 0): all
     * 16 pairs → 208; backward 10d + 6 = 26 per pair */
    size_t asz[9] = {32, 32, 32, 32, 32, 16, 32, 32, 32};
    tsr__attn_args_t a = {2, 4, 4, 1, 0, 0, 1.0f, 0, 1, 2, 2, 0, 1, 0, 0}; /* one head, one sequence */
    cr_expect_float_eq(flops_of("attn_fwd", &a, asz), 130, 1e-9);
    cr_expect_float_eq(flops_of("attn_bwd", &a, asz), 260, 1e-9);
    /* the wide heads' codelets count alike (only their rates differ) */
    cr_expect_float_eq(flops_of("attn_fwd_wide", &a, asz), 130, 1e-9);
    cr_expect_float_eq(flops_of("attn_bwd_wide", &a, asz), 260, 1e-9);
    a.q0 = 4;
    cr_expect_float_eq(flops_of("attn_fwd", &a, asz), 208, 1e-9);
    /* q, k, v read (96), ms and acc read and written (2 × 64) */
    size_t fsz[5] = {32, 32, 32, 32, 32};
    cr_expect_float_eq(bytes_of("attn_fwd", &a, fsz), 96 + 128, 1e-9);
    /* a task takes every head of its tile, sequence by sequence: 3 heads of
     * 2 sequences do 6 times the work */
    a.nb = 3, a.nseq = 2;
    cr_expect_float_eq(flops_of("attn_fwd", &a, asz), 6 * 208, 1e-9);
    cr_expect_float_eq(flops_of("attn_bwd", &a, asz), 6 * 16 * 26, 1e-9);

    /* LayerNorm forward, C 8 features × T 3 tokens: 3 × (8 × 8 + 5) = 207;
     * x read, out written (2 × 96 bytes), gamma, beta (64), mean, rstd (24) */
    tsr__mn_args_t ln = {8, 3};
    cr_expect_float_eq(flops_of("layernorm_fwd", &ln, NULL), 207, 1e-9);
    cr_expect_float_eq(bytes_of("layernorm_fwd", &ln, NULL), 192 + 64 + 24, 1e-9);

    /* AdamW on 10 elements: 17 each; g read, p, m, v read and written */
    size_t wsz[4] = {40, 40, 40, 40};
    cr_expect_float_eq(flops_of("adamw", NULL, wsz), 170, 1e-9);
    cr_expect_float_eq(bytes_of("adamw", NULL, wsz), 7 * 40, 1e-9);
    /* … with the bf16 copy: the same flops, and 10 × 2 bytes written more */
    size_t wsz16[5] = {40, 40, 40, 40, 20};
    cr_expect_float_eq(flops_of("adamw_bf16", NULL, wsz16), 170, 1e-9);
    cr_expect_float_eq(bytes_of("adamw_bf16", NULL, wsz16), 7 * 40 + 20, 1e-9);

    /* embedding: C 4, T 6 tokens, a vocabulary tile of 10 of 40: 1.5 tokens
     * expected in it, 4 adds each; tokens read (24), per token a column
     * read and one read and written (3 × 16 bytes) */
    tsr__embed_args_t e = {4, 6, 10, 0, 40};
    cr_expect_float_eq(flops_of("embedding_fwd", &e, NULL), 6, 1e-9);
    cr_expect_float_eq(bytes_of("embedding_fwd", &e, NULL), 24 + 1.5 * 48, 1e-9);

    /* cross-entropy backward, nv 5 × T 2: 3 per logit + 1 per column */
    tsr__xent_args_t x = {5, 2, 0, 0, 1.0f};
    cr_expect_float_eq(flops_of("crossentropy_bwd", &x, NULL), 32, 1e-9);

    /* bf16 GEMM, the shape above: A and B in 2 bytes (2 × 35), C fp32 read
     * and written (4 × 24), or bf16 written only (2 × 12) */
    tsr__gemm_bf16_args_t g16 = {{0, 0, 3, 4, 5, 1.0f, 1.0f}, 0};
    cr_expect_float_eq(flops_of("gemm_bf16", &g16, NULL), 120, 1e-9);
    cr_expect_float_eq(bytes_of("gemm_bf16", &g16, NULL), 70 + 96, 1e-9);
    g16.g.beta = 0.0f, g16.c_bf16 = 1;
    cr_expect_float_eq(bytes_of("gemm_bf16", &g16, NULL), 70 + 24, 1e-9);
    /* GEMMs with an epilogue, the shape above (m 3, n 4, k 5, beta 1):
     * bias 1 flop per C element and the bias read (3 floats); bias + GELU 11
     * per element, the GELU input written too (12 floats); the GELU
     * gradient 13 per element with its row sums, its input read (12) and
     * the bias gradient read and written (6); A's row sums m k */
    tsr__gemm_ep_args_t ge = {{0, 0, 3, 4, 5, 1.0f, 1.0f}, 1 /* TSR_EPI_BIAS */, 0, 0};
    cr_expect_float_eq(flops_of("gemm_bias", &ge, NULL), 120 + 12, 1e-9);
    cr_expect_float_eq(bytes_of("gemm_bias", &ge, NULL), 4 * (15 + 20 + 24 + 3), 1e-9);
    ge.kind = 2, ge.g.beta = 0.0f; /* TSR_EPI_BIAS_GELU */
    cr_expect_float_eq(flops_of("gemm_bias_gelu", &ge, NULL), 120 + 132, 1e-9);
    cr_expect_float_eq(bytes_of("gemm_bias_gelu", &ge, NULL), 4 * (15 + 20 + 12 + 3 + 12), 1e-9);
    ge.kind = 4; /* TSR_EPI_DGELU_BGRAD */
    cr_expect_float_eq(flops_of("gemm_dgelu_bgrad", &ge, NULL), 120 + 156, 1e-9);
    cr_expect_float_eq(bytes_of("gemm_dgelu_bgrad", &ge, NULL), 4 * (15 + 20 + 12 + 12 + 6),
                       1e-9);
    ge.kind = 5, ge.g.beta = 1.0f, ge.ab16 = 1; /* TSR_EPI_BGRADA, bf16 A and B */
    cr_expect_float_eq(flops_of("gemm_bgrada", &ge, NULL), 120 + 15, 1e-9);
    cr_expect_float_eq(bytes_of("gemm_bgrada", &ge, NULL), 70 + 4 * (24 + 6), 1e-9);
    /* conversion of 10 elements: 4 bytes read, 2 written each (either way) */
    size_t vsz[2] = {40, 20};
    cr_expect_float_eq(bytes_of("f32_to_bf16", NULL, vsz), 60, 1e-9);
    size_t wsz2[2] = {20, 40};
    cr_expect_float_eq(bytes_of("bf16_to_f32", NULL, wsz2), 60, 1e-9);
    /* LayerNorm into bf16, the case above: the fp32 flops (207); the fp32
     * bytes (280) less 2 per output (48) plus the scratch written and read
     * (8 per element: 192), i.e. + 6 per element */
    cr_expect_float_eq(flops_of("layernorm_fwd_bf16", &ln, NULL), 207, 1e-9);
    cr_expect_float_eq(bytes_of("layernorm_fwd_bf16", &ln, NULL), 280 + 6 * 24, 1e-9);
    /* the Llama layers into bf16: the fp32 kernels' estimates (kernels/
     * rmsnorm.h, swiglu.h), + 6 bytes per element of each bf16 output (the
     * scratch written and read, the output in 2 bytes; RMSNorm's backward
     * reads dx once more instead of a scratch) */
    tsr__rms_args_t rms = {8, 3, 1e-5f};
    cr_expect_float_eq(flops_of("rmsnorm_fwd_bf16", &rms, NULL), 3 * (4 * 8 + 4), 1e-9);
    cr_expect_float_eq(bytes_of("rmsnorm_fwd_bf16", &rms, NULL),
                       4 * (2 * 24 + 8 + 3) + 6 * 24, 1e-9);
    cr_expect_float_eq(flops_of("rmsnorm_bwd_bf16", &ln, NULL), 3 * (12 * 8 + 1), 1e-9);
    cr_expect_float_eq(bytes_of("rmsnorm_bwd_bf16", &ln, NULL),
                       4 * (4 * 24 + 3 * 8 + 3) + 6 * 24, 1e-9);
    cr_expect_float_eq(flops_of("swiglu_fwd_bf16", &ln, NULL), 6 * 24, 1e-9);
    cr_expect_float_eq(bytes_of("swiglu_fwd_bf16", &ln, NULL), 12 * 24 + 6 * 24, 1e-9);
    cr_expect_float_eq(flops_of("swiglu_bwd_bf16", &ln, NULL), 12 * 24, 1e-9);
    cr_expect_float_eq(bytes_of("swiglu_bwd_bf16", &ln, NULL), 20 * 24 + 12 * 24, 1e-9);

    /* copy moves 2 × its buffer, no flops */
    size_t csz[2] = {400, 400};
    cr_expect_float_eq(flops_of("copy", NULL, csz), 0, 1e-9);
    cr_expect_float_eq(bytes_of("copy", NULL, csz), 800, 1e-9);
}

/* ---- physical bounds and hostile paths -------------------------------------- */

/* BASE with the first `from` replaced by `to`. */
static const char *base_with(const char *from, const char *to)
{
    static char buf[4096];
    const char *base = BASE;
    const char *at = strstr(base, from);
    cr_assert_not_null(at, "BASE has no '%s'", from);
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - base), base, to, at + strlen(from));
    return buf;
}

/* A rate near 0 made every task last longer than the virtual clock counts:
 * the step time saturated at 2^63 ns and the run succeeded. Rates are at
 * least 1e-6 of their unit, efficiencies at least 0.001, memories at least
 * a page (4 KiB); the message names the field and the value. */
Test(platform, rates_below_their_floor, .init = make_tmpdir, .fini = remove_tmpdir)
{
    static const struct {
        const char *from, *to, *field;
    } cases[] = {
        {"\"fp32_tflops\": 1,", "\"fp32_tflops\": 1e-300,",
         "devices.cpu.fp32_tflops: 1e-300 is out of range"},
        {"\"tf32_tflops\": 40,", "\"tf32_tflops\": 1e-7,",
         "devices.cuda.tf32_tflops: 1e-07 is out of range"},
        {"\"bf16_tflops\": 80,", "\"bf16_tflops\": 1e-7,",
         "devices.cuda.bf16_tflops: 1e-07 is out of range"},
        {"\"memory_bandwidth_gbs\": 100,", "\"memory_bandwidth_gbs\": 1e-300,",
         "devices.cpu.memory_bandwidth_gbs: 1e-300 is out of range"},
        {"\"bandwidth_gbs\": 25,", "\"bandwidth_gbs\": 1e-300,",
         "accelerators[0].link.bandwidth_gbs: 1e-300 is out of range"},
        {"\"bandwidth_gbs\": 300,", "\"bandwidth_gbs\": 5e-7,",
         "accelerators[0].nvlink.bandwidth_gbs: 5e-07 is out of range"},
        {"\"flops_efficiency\": 0.5,", "\"flops_efficiency\": 1e-300,",
         "devices.cpu.flops_efficiency: 1e-300 is out of range"},
        {"\"flops_efficiency\": 0.25", "\"flops_efficiency\": 1e-9",
         "devices.cuda.codelets.k.flops_efficiency: 1e-09 is out of range"},
        {"\"memory_gib\": 16,", "\"memory_gib\": 1e-300,",
         "host.memory_gib: 1e-300 is out of range"},
        {"\"memory_gib\": 2,", "\"memory_gib\": 1e-7,",
         "accelerators[0].memory_gib: 1e-07 is out of range"},
        {"\"latency_us\": 10}", "\"latency_us\": 2e6}",
         "accelerators[0].link.latency_us: 2e+06 is out of range"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_load(base_with(cases[i].from, cases[i].to), TSR_EINVAL, cases[i].field);
    /* the floors themselves are accepted */
    expect_load(base_with("\"fp32_tflops\": 1,", "\"fp32_tflops\": 1e-6,"), TSR_OK, NULL);
    cr_expect_float_eq(plat.device[TSR_DEVICE_CPU].peak_flops, 1e6, 1e-3);
    expect_load(base_with("\"bandwidth_gbs\": 25,", "\"bandwidth_gbs\": 1e-6,"), TSR_OK, NULL);
    expect_load(base_with("\"flops_efficiency\": 0.5,", "\"flops_efficiency\": 0.001,"), TSR_OK,
                NULL);
}

/* ---- the disk ("disk": NVMe drives below the host) ------------------------------ */

#define ACC_ARRAY                                                                       \
    "\"accelerators\": [{\"kind\": \"cuda\", \"count\": 4, \"memory_gib\": 2,"          \
    " \"link\": {\"bandwidth_gbs\": 25, \"latency_us\": 10}}]"
#define DISK_OK                                                                         \
    "{\"count\": 4, \"capacity_gb\": 3840, \"read_bandwidth_gbs\": 7,"                   \
    " \"write_bandwidth_gbs\": 3.5, \"latency_us\": 100, \"gpudirect\": true,"             \
    " \"notes\": \"per drive\"}"

/* The base file with `accs` (a member) and "disk": disk. */
static const char *with_disk(const char *accs, const char *disk)
{
    static char buf[8192];
    snprintf(buf, sizeof buf, "%s%s%s%s, \"disk\": %s}\n", BASE_HEAD, BASE_HOST, BASE_DEVICES,
             accs, disk);
    return buf;
}

/* A disk's drives add up (RAID-0): capacity and bandwidth times count,
 * latency one drive's; without "disk" there is none. */
Test(platform, disk_fields, .init = make_tmpdir, .fini = remove_tmpdir)
{
    expect_load(BASE, TSR_OK, NULL);
    cr_expect_eq(plat.mem.disk.capacity, 0);
    expect_load(with_disk(ACC_ARRAY, DISK_OK), TSR_OK, NULL);
    const tsr_phantom_disk_t *d = &plat.mem.disk;
    cr_expect_eq(d->capacity, (size_t)15360000000000ull);
    cr_expect_float_eq(d->read.bandwidth, 28e9, 1);
    cr_expect_float_eq(d->write.bandwidth, 14e9, 1);
    cr_expect_float_eq(d->read.latency, 100e-6, 1e-12);
    cr_expect_float_eq(d->write.latency, 100e-6, 1e-12);
    cr_expect(d->gpudirect);
}

/* Every bad disk field is refused, naming it. */
Test(platform, bad_disk_fields, .init = make_tmpdir, .fini = remove_tmpdir)
{
    static const struct {
        const char *disk, *field;
    } cases[] = {
        {"[4]", "disk: must be an object"},
        {"{\"count\": 0, \"capacity_gb\": 1, \"read_bandwidth_gbs\": 1,"
         " \"write_bandwidth_gbs\": 1, \"latency_us\": 1}", "disk.count: 0 is out of range"},
        {"{\"count\": 2.5, \"capacity_gb\": 1, \"read_bandwidth_gbs\": 1,"
         " \"write_bandwidth_gbs\": 1, \"latency_us\": 1}", "disk.count: must be an integer"},
        {"{\"count\": 1, \"capacity_gb\": 0, \"read_bandwidth_gbs\": 1,"
         " \"write_bandwidth_gbs\": 1, \"latency_us\": 1}", "disk.capacity_gb: 0 is out of range"},
        {"{\"count\": 64, \"capacity_gb\": 1000, \"read_bandwidth_gbs\": 1,"
         " \"write_bandwidth_gbs\": 1, \"latency_us\": 1}", "disk.capacity_gb: 64 drives"},
        {"{\"count\": 1, \"capacity_gb\": 1, \"read_bandwidth_gbs\": 1e-300,"
         " \"write_bandwidth_gbs\": 1, \"latency_us\": 1}",
         "disk.read_bandwidth_gbs: 1e-300 is out of range"},
        {"{\"count\": 1, \"capacity_gb\": 1, \"read_bandwidth_gbs\": 1,"
         " \"write_bandwidth_gbs\": -3, \"latency_us\": 1}",
         "disk.write_bandwidth_gbs: -3 is out of range"},
        {"{\"count\": 1, \"capacity_gb\": 1, \"write_bandwidth_gbs\": 1, \"latency_us\": 1}",
         "disk.read_bandwidth_gbs: missing"},
        {"{\"count\": 1, \"capacity_gb\": 1, \"read_bandwidth_gbs\": 1,"
         " \"write_bandwidth_gbs\": 1, \"latency_us\": 2e6}", "disk.latency_us: 2e+06 is out of range"},
        {"{\"count\": 1, \"capacity_gb\": 1, \"read_bandwidth_gbs\": 1,"
         " \"write_bandwidth_gbs\": 1, \"latency_us\": 1, \"gpudirect\": \"yes\"}",
         "disk.gpudirect: must be true or false"},
        {"{\"count\": 1, \"capacity_gb\": 1, \"read_bandwidth_gbs\": 1,"
         " \"write_bandwidth_gbs\": 1, \"latency_us\": 1, \"rpm\": 7200}", "disk.rpm: unknown key"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_load(with_disk(ACC_ARRAY, cases[i].disk), TSR_EINVAL, cases[i].field);
    /* GPUDirect Storage needs a CUDA accelerator */
    expect_load(BASE_HEAD BASE_HOST
                "\"devices\": {\"cpu\": {\"fp32_tflops\": 1, \"memory_bandwidth_gbs\": 100,"
                " \"launch_us\": 0, \"flops_efficiency\": 0.5, \"bytes_efficiency\": 0.5}},"
                "\"accelerators\": [{\"kind\": \"sim\", \"count\": 1, \"memory_gib\": 2,"
                " \"link\": {\"bandwidth_gbs\": 2, \"latency_us\": 10}}], \"disk\": " DISK_OK "}",
                TSR_EINVAL, "disk.gpudirect: no accelerator");
    /* the disk is a memory node: 31 accelerators leave none for it */
    expect_load(with_disk("\"accelerators\": [{\"kind\": \"cuda\", \"count\": 31,"
                          " \"memory_gib\": 2, \"link\": {\"bandwidth_gbs\": 25,"
                          " \"latency_us\": 10}}]", DISK_OK),
                TSR_EINVAL, "disk: no memory node left");
}

/* A FIFO (or a folder) where the platform file belongs is refused before
 * it is opened: open() on a FIFO without a writer never returned. */
Test(platform, fifo_refused_at_once, .init = make_tmpdir, .fini = remove_tmpdir)
{
    snprintf(tmpfile_path, sizeof tmpfile_path, "%s/fifo.json", tmpdir);
    cr_assert_eq(mkfifo(tmpfile_path, 0600), 0);
    alarm(20); /* a blocking open ends the test as a crash, not a hang */
    int rc = tsr__platform_load(tmpfile_path, &plat);
    alarm(0);
    cr_assert_eq(rc, TSR_EIO, "rc %d: %s", rc, tsr_error_message());
    cr_assert(strstr(tsr_error_message(), "not a regular file (a FIFO)"), "%s",
              tsr_error_message());
    cr_assert(strstr(tsr_error_message(), tmpfile_path), "%s", tsr_error_message());
    rc = tsr__platform_load(tmpdir, &plat);
    cr_assert_eq(rc, TSR_EIO, "rc %d: %s", rc, tsr_error_message());
    cr_assert(strstr(tsr_error_message(), "a directory"), "%s", tsr_error_message());
}
