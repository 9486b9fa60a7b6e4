/* runtime/platform.c — platform files (JSON, in human units: GB/s, µs,
 * GiB, TFLOPS) read into tsr_platform_t, and the roofline rate model that
 * estimates a task's duration on a device never measured. The format is
 * documented in platforms/README.md and docs/simulation.md.
 *
 * Must never: accept a key it does not know (a typo must not silently
 * leave a default in place), accept a number out of its range, abort on a
 * bad file, keep a pointer into the parsed document, or read the clock.
 */
#include "runtime/platform.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/error.h"
#include "runtime/file.h"
#include "runtime/json.h"

#define MAX_FILE ((size_t)1 << 20)   /* a platform file is a few KiB */
#define GB 1e9                       /* GB/s: decimal, as datasheets */
#define GIB 1073741824.0             /* GiB: binary, as memory sizes */
#define TERA 1e12
#define MICRO 1e-6
#define MAX_GIB 1048576.0            /* 1 PiB: keeps bytes in a size_t */
/* Physical floors. A rate near 0 (1e-300 TFLOPS) makes every task last
 * longer than the virtual clock counts: the step time saturated and the run
 * "succeeded". 1e-6 of the unit (1 MFLOP/s, 1 kB/s) is far below any real
 * device; an efficiency under 0.1% is a broken model, not a slow device;
 * a node under a page holds no tile (and 0 bytes of host would read as
 * "unlimited"). Latencies are at most 1e6 µs (1 s) and finite. */
#define MIN_RATE 1e-6                /* TFLOPS, GB/s */
#define MIN_EFFICIENCY 1e-3
#define MIN_GIB (4096 / GIB)         /* one page */
#define MAX_US 1e6                   /* 1 s */
#define MAX_CPU_WORKERS 4096
#define MAX_DRIVES 64

/* What a validation error names: the file and the field path. */
typedef struct ctx {
    const char *path;
} ctx_t;

/* "platform <file>: <field>: <why>" as TSR_EINVAL. */
__attribute__((format(printf, 3, 4))) static int bad(const ctx_t *c, const char *field,
                                                     const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return tsr__fail(TSR_EINVAL, "platform %s: %s: %s", c->path, field, why);
}

/* field = prefix.key (or key when prefix is empty) into buf. */
static const char *join(char *buf, size_t n, const char *prefix, const char *key)
{
    if (snprintf(buf, n, "%s%s%s", prefix, prefix[0] ? "." : "", key) >= (int)n)
        memcpy(buf + n - 4, "...", 4);   /* a long field still names its start */
    return buf;
}

/* Every member of obj must be one of the NULL-terminated allowed keys. */
static int only_keys(const ctx_t *c, const tsr__json_t *obj, const char *prefix,
                     const char *const *allowed)
{
    for (size_t i = 0; i < obj->len; i++) {
        const char *k = obj->items[i].key;
        int known = 0;
        for (int j = 0; allowed[j] && !known; j++)
            known = strlen(allowed[j]) == obj->items[i].key_len && !strcmp(allowed[j], k);
        if (!known) {
            char f[256];
            return bad(c, join(f, sizeof f, prefix, k), "unknown key");
        }
    }
    return 0;
}

/* obj.key, required, of JSON type `type`, into *out. */
static int get_typed(const ctx_t *c, const tsr__json_t *obj, const char *prefix,
                     const char *key, tsr__json_type_t type, const tsr__json_t **out)
{
    char f[256];
    const tsr__json_t *v = tsr__json_get(obj, key);
    *out = v;
    if (!v)
        return bad(c, join(f, sizeof f, prefix, key), "missing");
    if (v->type != type)
        return bad(c, join(f, sizeof f, prefix, key), "must be %s %s, not a %s",
                   type == TSR__JSON_OBJECT ? "an" : "a", tsr__json_type_name(type),
                   tsr__json_type_name(v->type));
    return 0;
}

/* obj.key as an object (required) into *out. */
static int get_object(const ctx_t *c, const tsr__json_t *obj, const char *prefix,
                      const char *key, const tsr__json_t **out)
{
    return get_typed(c, obj, prefix, key, TSR__JSON_OBJECT, out);
}

/* obj.key as a number in [lo, hi] (lo excluded when lo_open) into *out;
 * when absent: *out = dflt if !required, else an error. */
static int get_number(const ctx_t *c, const tsr__json_t *obj, const char *prefix,
                      const char *key, bool required, double dflt, double lo, bool lo_open,
                      double hi, double *out)
{
    char f[256];
    const tsr__json_t *v = tsr__json_get(obj, key);
    *out = dflt;
    if (!v)
        return required ? bad(c, join(f, sizeof f, prefix, key), "missing") : 0;
    if (v->type != TSR__JSON_NUMBER)
        return bad(c, join(f, sizeof f, prefix, key), "must be a number, not a %s",
                   tsr__json_type_name(v->type));
    double x = v->num;
    if (!(lo_open ? x > lo : x >= lo) || !(x <= hi))
        return bad(c, join(f, sizeof f, prefix, key), "%g is out of range (%s %g, at most %g)",
                   x, lo_open ? "more than" : "at least", lo, hi);
    *out = x;
    return 0;
}

/* obj.key as an integer in [lo, hi] (required). */
static int get_int(const ctx_t *c, const tsr__json_t *obj, const char *prefix,
                   const char *key, int64_t lo, int64_t hi, int *out)
{
    char f[256];
    const tsr__json_t *v = tsr__json_get(obj, key);
    int64_t x;
    if (!v)
        return bad(c, join(f, sizeof f, prefix, key), "missing");
    if (v->type != TSR__JSON_NUMBER || tsr__json_i64(v, &x) != 0)
        return bad(c, join(f, sizeof f, prefix, key), "must be an integer");
    if (x < lo || x > hi)
        return bad(c, join(f, sizeof f, prefix, key),
                   "%lld is out of range (%lld to %lld)", (long long)x, (long long)lo,
                   (long long)hi);
    *out = (int)x;
    return 0;
}

/* obj.key as a string (required) of fewer than n bytes, no NUL inside. */
static int get_string(const ctx_t *c, const tsr__json_t *obj, const char *prefix,
                      const char *key, char *out, size_t n)
{
    char f[256];
    const tsr__json_t *v;
    int rc = get_typed(c, obj, prefix, key, TSR__JSON_STRING, &v);
    if (rc)
        return rc;
    if (v->len == 0 || v->len >= n || strlen(v->str) != v->len)
        return bad(c, join(f, sizeof f, prefix, key),
                   "must be 1 to %zu bytes without NUL", n - 1);
    memcpy(out, v->str, v->len + 1);
    return 0;
}

/* An optional free-text field ("source", "notes"): a string or an array
 * of strings. */
static int check_text(const ctx_t *c, const tsr__json_t *obj, const char *prefix,
                      const char *key)
{
    char f[256];
    const tsr__json_t *v = tsr__json_get(obj, key);
    if (!v || v->type == TSR__JSON_STRING)
        return 0;
    if (v->type == TSR__JSON_ARRAY) {
        for (size_t i = 0; i < v->len; i++)
            if (v->items[i].type != TSR__JSON_STRING)
                return bad(c, join(f, sizeof f, prefix, key),
                           "item %zu must be a string, not a %s", i,
                           tsr__json_type_name(v->items[i].type));
        return 0;
    }
    return bad(c, join(f, sizeof f, prefix, key),
               "must be a string or an array of strings, not a %s",
               tsr__json_type_name(v->type));
}

/* ---- pieces ------------------------------------------------------------------ */

/* A link object {"bandwidth_gbs", "latency_us"} into l. */
static int read_link(const ctx_t *c, const tsr__json_t *obj, const char *prefix,
                     const char *key, tsr_phantom_link_t *l, const char *const *extra_keys,
                     const tsr__json_t **out_obj)
{
    char f[256];
    const tsr__json_t *o;
    int rc = get_object(c, obj, prefix, key, &o);
    if (rc)
        return rc;
    join(f, sizeof f, prefix, key);
    const char *keys[8] = {"bandwidth_gbs", "latency_us", "source", "notes"};
    int nk = 4;
    for (int i = 0; extra_keys && extra_keys[i] && nk < 7; i++)
        keys[nk++] = extra_keys[i];
    keys[nk] = NULL;
    double bw, lat;
    if ((rc = only_keys(c, o, f, keys)) || (rc = check_text(c, o, f, "source")) ||
        (rc = check_text(c, o, f, "notes")) ||
        (rc = get_number(c, o, f, "bandwidth_gbs", true, 0, MIN_RATE, false, 1e6, &bw)) ||
        (rc = get_number(c, o, f, "latency_us", true, 0, 0, false, MAX_US, &lat)))
        return rc;
    l->bandwidth = bw * GB;
    l->latency = lat * MICRO;
    if (out_obj)
        *out_obj = o;
    return 0;
}

/* A device object into d; tf32 and bf16 are allowed on CUDA only. */
static int read_device(const ctx_t *c, const tsr__json_t *o, const char *prefix, bool cuda,
                       tsr_platform_device_t *d)
{
    static const char *const keys[] = {"fp32_tflops", "tf32_tflops", "bf16_tflops",
                                       "memory_bandwidth_gbs",
                                       "launch_us", "flops_efficiency", "bytes_efficiency",
                                       "codelets", "source", "notes", NULL};
    char f[256];
    int rc;
    double tf, tf32, bf16, bw, launch;
    memset(d, 0, sizeof *d);
    if ((rc = only_keys(c, o, prefix, keys)) || (rc = check_text(c, o, prefix, "source")) ||
        (rc = check_text(c, o, prefix, "notes")) ||
        (rc = get_number(c, o, prefix, "fp32_tflops", true, 0, MIN_RATE, false, 1e6, &tf)) ||
        (rc = get_number(c, o, prefix, "tf32_tflops", false, 0, MIN_RATE, false, 1e6, &tf32)) ||
        (rc = get_number(c, o, prefix, "bf16_tflops", false, 0, MIN_RATE, false, 1e6, &bf16)) ||
        (rc = get_number(c, o, prefix, "memory_bandwidth_gbs", true, 0, MIN_RATE, false, 1e6,
                         &bw)) ||
        (rc = get_number(c, o, prefix, "launch_us", true, 0, 0, false, MAX_US, &launch)) ||
        (rc = get_number(c, o, prefix, "flops_efficiency", true, 0, MIN_EFFICIENCY, false, 1,
                         &d->flops_efficiency)) ||
        (rc = get_number(c, o, prefix, "bytes_efficiency", true, 0, MIN_EFFICIENCY, false, 1,
                         &d->bytes_efficiency)))
        return rc;
    if (!cuda && tsr__json_get(o, "tf32_tflops"))
        return bad(c, join(f, sizeof f, prefix, "tf32_tflops"), "only a CUDA device has TF32");
    if (!cuda && tsr__json_get(o, "bf16_tflops"))
        return bad(c, join(f, sizeof f, prefix, "bf16_tflops"),
                   "only a CUDA device has a bf16 tensor-core rate");
    d->peak_flops = tf * TERA;
    d->peak_flops_tf32 = tf32 * TERA;
    d->peak_flops_bf16 = bf16 * TERA;
    d->mem_bandwidth = bw * GB;
    d->launch = launch * MICRO;

    const tsr__json_t *cls = tsr__json_get(o, "codelets");
    if (!cls)
        return 0;
    char cf[256];
    join(cf, sizeof cf, prefix, "codelets");
    if (cls->type != TSR__JSON_OBJECT)
        return bad(c, cf, "must be an object, not a %s", tsr__json_type_name(cls->type));
    if (cls->len > TSR_PLATFORM_MAX_CODELETS)
        return bad(c, cf, "%zu codelets, at most %d", cls->len, TSR_PLATFORM_MAX_CODELETS);
    static const char *const ckeys[] = {"flops_efficiency", "bytes_efficiency", "source",
                                        "notes", NULL};
    for (size_t i = 0; i < cls->len; i++) {
        const tsr__json_t *e = &cls->items[i];
        tsr_platform_codelet_t *pc = &d->codelets[d->ncodelets++];
        join(f, sizeof f, cf, e->key);
        if (e->key_len == 0 || e->key_len >= sizeof pc->name || strlen(e->key) != e->key_len)
            return bad(c, f, "a codelet name must be 1 to %zu bytes", sizeof pc->name - 1);
        if (e->type != TSR__JSON_OBJECT)
            return bad(c, f, "must be an object, not a %s", tsr__json_type_name(e->type));
        memcpy(pc->name, e->key, e->key_len + 1);
        if ((rc = only_keys(c, e, f, ckeys)) || (rc = check_text(c, e, f, "source")) ||
            (rc = check_text(c, e, f, "notes")) ||
            (rc = get_number(c, e, f, "flops_efficiency", false, 0, MIN_EFFICIENCY, false, 1,
                             &pc->flops_efficiency)) ||
            (rc = get_number(c, e, f, "bytes_efficiency", false, 0, MIN_EFFICIENCY, false, 1,
                             &pc->bytes_efficiency)))
            return rc;
        if (pc->flops_efficiency == 0 && pc->bytes_efficiency == 0)
            return bad(c, f, "needs flops_efficiency or bytes_efficiency");
    }
    return 0;
}

/* accelerators[gi]: a group of `count` identical accelerators appended to
 * p->mem (and its PCIe switches). */
static int read_group(const ctx_t *c, const tsr__json_t *g, int gi, tsr_platform_t *p,
                      bool *has_cuda)
{
    static const char *const keys[] = {"kind", "count", "memory_gib", "link", "pcie_switch",
                                       "nvlink", "fill_bandwidth_gbs", "source", "notes",
                                       NULL};
    static const char *const switch_keys[] = {"accelerators_per_switch", NULL};
    char pre[64], f[256];
    snprintf(pre, sizeof pre, "accelerators[%d]", gi);
    if (g->type != TSR__JSON_OBJECT)
        return bad(c, pre, "must be an object, not a %s", tsr__json_type_name(g->type));
    char kind[16];
    int count, rc;
    double gib, fill;
    tsr_phantom_acc_t a;
    memset(&a, 0, sizeof a);
    a.pcie_switch = -1;
    if ((rc = only_keys(c, g, pre, keys)) || (rc = check_text(c, g, pre, "source")) ||
        (rc = check_text(c, g, pre, "notes")) ||
        (rc = get_string(c, g, pre, "kind", kind, sizeof kind)))
        return rc;
    if (!strcmp(kind, "cuda"))
        a.kind = TSR_NODE_KIND_CUDA;
    else if (!strcmp(kind, "sim"))
        a.kind = TSR_NODE_KIND_SIM;
    else
        return bad(c, join(f, sizeof f, pre, "kind"), "\"%s\": must be \"cuda\" or \"sim\"",
                   kind);
    int room = TSR_PHANTOM_MAX_ACC - p->mem.nacc;
    if ((rc = get_int(c, g, pre, "count", 1, room > 0 ? room : 1, &count)))
        return rc;
    if (count > room)
        return bad(c, join(f, sizeof f, pre, "count"), "more than %d accelerators in all",
                   TSR_PHANTOM_MAX_ACC);
    if ((rc = get_number(c, g, pre, "memory_gib", true, 0, MIN_GIB, false, MAX_GIB, &gib)) ||
        (rc = read_link(c, g, pre, "link", &a.link, NULL, NULL)) ||
        (rc = get_number(c, g, pre, "fill_bandwidth_gbs", false, 0, MIN_RATE, false, 1e6, &fill)))
        return rc;
    a.capacity = (size_t)(gib * GIB);
    a.fill_bandwidth = fill * GB;   /* 0: the device's bandwidth, set by the caller */

    int per_switch = 0;
    tsr_phantom_link_t sw = {0, 0};
    if (tsr__json_get(g, "pcie_switch")) {
        const tsr__json_t *so;
        if ((rc = read_link(c, g, pre, "pcie_switch", &sw, switch_keys, &so)) ||
            (rc = get_int(c, so, join(f, sizeof f, pre, "pcie_switch"),
                          "accelerators_per_switch", 1, TSR_PHANTOM_MAX_ACC, &per_switch)))
            return rc;
    }
    if (tsr__json_get(g, "nvlink")) {
        if (a.kind != TSR_NODE_KIND_CUDA)
            return bad(c, join(f, sizeof f, pre, "nvlink"),
                       "only CUDA accelerators have a GPU fabric");
        if ((rc = read_link(c, g, pre, "nvlink", &a.nvlink, NULL, NULL)))
            return rc;
        a.peer = true;
    }
    *has_cuda = *has_cuda || a.kind == TSR_NODE_KIND_CUDA;

    /* accelerator i of the group sits behind switch i / per_switch of it */
    for (int i = 0; i < count; i++) {
        tsr_phantom_acc_t *d = &p->mem.acc[p->mem.nacc++];
        *d = a;
        if (per_switch > 0) {
            if (i % per_switch == 0)
                p->mem.switches[p->mem.nswitches++] = sw;
            d->pcie_switch = p->mem.nswitches - 1;
        }
    }
    return 0;
}

/* "disk": NVMe drives below the host, per drive in the file (decimal GB and
 * GB/s, as drive datasheets give them), every drive together in out->mem.disk
 * (RAID-0: capacities and bandwidths add up; the latency is one drive's). */
static int read_disk(const ctx_t *c, const tsr__json_t *root, tsr_platform_t *out,
                     bool has_cuda)
{
    static const char *const keys[] = {"count", "capacity_gb", "read_bandwidth_gbs",
                                       "write_bandwidth_gbs", "latency_us", "gpudirect",
                                       "source", "notes", NULL};
    const tsr__json_t *d = tsr__json_get(root, "disk");
    if (!d)
        return 0;
    int count, rc;
    double gb, rd, wr, lat;
    if (d->type != TSR__JSON_OBJECT)
        return bad(c, "disk", "must be an object, not a %s", tsr__json_type_name(d->type));
    if ((rc = only_keys(c, d, "disk", keys)) || (rc = check_text(c, d, "disk", "source")) ||
        (rc = check_text(c, d, "disk", "notes")) ||
        (rc = get_int(c, d, "disk", "count", 1, MAX_DRIVES, &count)) ||
        (rc = get_number(c, d, "disk", "capacity_gb", true, 0, 4096 / GB, false, MAX_GIB * GIB / GB,
                         &gb)) ||
        (rc = get_number(c, d, "disk", "read_bandwidth_gbs", true, 0, MIN_RATE, false, 1e6,
                         &rd)) ||
        (rc = get_number(c, d, "disk", "write_bandwidth_gbs", true, 0, MIN_RATE, false, 1e6,
                         &wr)) ||
        (rc = get_number(c, d, "disk", "latency_us", true, 0, 0, false, MAX_US, &lat)))
        return rc;
    double total = gb * GB * count;
    if (total > (double)TSR_PHANTOM_MAX_DISK)
        return bad(c, "disk.capacity_gb", "%d drives of %g GB: %g GB in all, more than %g GB "
                   "(32 TiB, the simulation's limit)", count, gb, total / GB,
                   (double)TSR_PHANTOM_MAX_DISK / GB);
    bool gpudirect = false;
    const tsr__json_t *g = tsr__json_get(d, "gpudirect");
    if (g) {
        if (g->type != TSR__JSON_TRUE && g->type != TSR__JSON_FALSE)
            return bad(c, "disk.gpudirect", "must be true or false, not a %s",
                       tsr__json_type_name(g->type));
        gpudirect = g->type == TSR__JSON_TRUE;
        if (gpudirect && !has_cuda)
            return bad(c, "disk.gpudirect", "no accelerator has kind \"cuda\"");
    }
    if (out->mem.nacc > TSR_PHANTOM_MAX_ACC - 1)
        return bad(c, "disk", "no memory node left for it beside %d accelerators (at most %d "
                   "with a disk)", out->mem.nacc, TSR_PHANTOM_MAX_ACC - 1);
    tsr_phantom_disk_t *k = &out->mem.disk;
    k->capacity = (size_t)total;
    k->read.bandwidth = rd * GB * count;
    k->write.bandwidth = wr * GB * count;
    k->read.latency = k->write.latency = lat * MICRO;
    k->gpudirect = gpudirect;
    return 0;
}

/* ---- the file ------------------------------------------------------------------ */

/* The whole file into a malloc'd buffer. */
static int read_file(const char *path, char **buf, size_t *len)
{
    *buf = NULL;
    char why[128];
    FILE *f = tsr__fopen_regular(path, why, sizeof why);
    if (!f) {
        int e = errno;
        return tsr__fail(e == ENOENT || e == ENOTDIR ? TSR_ENOTFOUND : TSR_EIO,
                         "platform %s: cannot open: %s", path, why);
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        return tsr__fail(TSR_EIO, "platform %s: cannot read its size", path);
    }
    if ((size_t)st.st_size > MAX_FILE) {
        fclose(f);
        return tsr__fail(TSR_EINVAL, "platform %s: larger than %zu KiB", path, MAX_FILE >> 10);
    }
    size_t cap = (size_t)st.st_size + 1, n = 0, r;
    char *b = malloc(cap);
    if (!b) {
        fclose(f);
        return tsr__fail(TSR_ENOMEM, "platform %s: out of memory", path);
    }
    while (n < cap && (r = fread(b + n, 1, cap - n, f)) > 0)
        n += r;
    int err = ferror(f);
    fclose(f);
    if (err || n == cap) {
        free(b);
        return tsr__fail(TSR_EIO, "platform %s: read failed (or the file changed)", path);
    }
    *buf = b;
    *len = n;
    return 0;
}

/* The validated document into out (zeroed first). */
static int read_platform(const ctx_t *c, const tsr__json_t *root, tsr_platform_t *out)
{
    static const char *const keys[] = {"name", "models", "models_key", "task_overhead_us",
                                       "host", "devices", "accelerators", "disk", "source",
                                       "notes", NULL};
    static const char *const host_keys[] = {"memory_gib", "memory_bandwidth_gbs",
                                            "memory_latency_us", "cpu_workers", "source",
                                            "notes", NULL};
    static const char *const dev_keys[] = {"cpu", "cuda", NULL};
    int rc;
    if (root->type != TSR__JSON_OBJECT)
        return bad(c, "(top level)", "must be an object, not a %s",
                   tsr__json_type_name(root->type));
    char models[16];
    double overhead;
    if ((rc = only_keys(c, root, "", keys)) || (rc = check_text(c, root, "", "source")) ||
        (rc = check_text(c, root, "", "notes")) ||
        (rc = get_string(c, root, "", "name", out->name, sizeof out->name)) ||
        (rc = get_string(c, root, "", "models", models, sizeof models)) ||
        (rc = get_number(c, root, "", "task_overhead_us", true, 0, 0, false, MAX_US, &overhead)))
        return rc;
    if (!strcmp(models, "machine"))
        out->machine_models = true;
    else if (strcmp(models, "rates"))
        return bad(c, "models", "\"%s\": must be \"rates\" or \"machine\"", models);
    if (tsr__json_get(root, "models_key")) {
        if ((rc = get_string(c, root, "", "models_key", out->models_key,
                             sizeof out->models_key)))
            return rc;
        if (!out->machine_models)
            return bad(c, "models_key", "only with \"models\": \"machine\"");
        /* a folder name inside the model directory, nothing else */
        if (strchr(out->models_key, '/') || !strcmp(out->models_key, ".") ||
            !strcmp(out->models_key, ".."))
            return bad(c, "models_key", "\"%s\": must be a folder name of the model directory",
                       out->models_key);
    }
    out->task_overhead = overhead * MICRO;

    /* host */
    const tsr__json_t *host;
    double gib, bw, lat;
    if ((rc = get_object(c, root, "", "host", &host)) ||
        (rc = only_keys(c, host, "host", host_keys)) ||
        (rc = check_text(c, host, "host", "source")) ||
        (rc = check_text(c, host, "host", "notes")) ||
        (rc = get_number(c, host, "host", "memory_gib", true, 0, MIN_GIB, false, MAX_GIB, &gib)) ||
        (rc = get_number(c, host, "host", "memory_bandwidth_gbs", true, 0, MIN_RATE, false, 1e6,
                         &bw)) ||
        (rc = get_number(c, host, "host", "memory_latency_us", false, 0, 0, false, MAX_US,
                         &lat)) ||
        (rc = get_int(c, host, "host", "cpu_workers", 0, MAX_CPU_WORKERS, &out->ncpu)))
        return rc;
    out->mem.host_capacity = (size_t)(gib * GIB);
    out->mem.host_mem.bandwidth = bw * GB;
    out->mem.host_mem.latency = lat * MICRO;

    /* accelerators */
    bool has_cuda = false;
    const tsr__json_t *accs = tsr__json_get(root, "accelerators");
    if (accs) {
        if (accs->type != TSR__JSON_ARRAY)
            return bad(c, "accelerators", "must be an array, not a %s",
                       tsr__json_type_name(accs->type));
        for (size_t i = 0; i < accs->len; i++)
            if ((rc = read_group(c, &accs->items[i], (int)i, out, &has_cuda)))
                return rc;
    }
    if (out->ncpu == 0 && out->mem.nacc == 0)
        return bad(c, "host.cpu_workers", "0 CPU workers and no accelerators: nothing runs");

    /* devices: the CPU always (SIM accelerators' workers run CPU code too),
     * CUDA exactly when some accelerator is one */
    const tsr__json_t *devs, *d;
    if ((rc = get_object(c, root, "", "devices", &devs)) ||
        (rc = only_keys(c, devs, "devices", dev_keys)) ||
        (rc = get_object(c, devs, "devices", "cpu", &d)) ||
        (rc = read_device(c, d, "devices.cpu", false, &out->device[TSR_DEVICE_CPU])))
        return rc;
    if (has_cuda) {
        if ((rc = get_object(c, devs, "devices", "cuda", &d)) ||
            (rc = read_device(c, d, "devices.cuda", true, &out->device[TSR_DEVICE_CUDA])))
            return rc;
    } else if (tsr__json_get(devs, "cuda")) {
        return bad(c, "devices.cuda", "no accelerator has kind \"cuda\"");
    }
    if ((rc = read_disk(c, root, out, has_cuda)))
        return rc;

    /* a zero fill runs at the node's memory bandwidth unless given */
    for (int i = 0; i < out->mem.nacc; i++) {
        tsr_phantom_acc_t *a = &out->mem.acc[i];
        if (a->fill_bandwidth == 0)
            a->fill_bandwidth = a->kind == TSR_NODE_KIND_CUDA
                                    ? out->device[TSR_DEVICE_CUDA].mem_bandwidth
                                    : out->device[TSR_DEVICE_CPU].mem_bandwidth;
    }
    return 0;
}

int tsr__platform_load(const char *path, tsr_platform_t *out)
{
    if (!path || !out)
        return tsr__fail(TSR_EINVAL, "platform: no file given");
    memset(out, 0, sizeof *out);
    ctx_t c = {.path = path};
    if (strlen(path) >= sizeof out->path)
        return tsr__fail(TSR_EINVAL, "platform %.64s…: path too long", path);
    char *buf;
    size_t len = 0;
    int rc = read_file(path, &buf, &len);
    if (rc)
        return rc;
    char what[sizeof out->path + 16];
    snprintf(what, sizeof what, "platform %s", path);
    tsr__json_doc_t *doc;
    rc = tsr__json_parse(buf, len, what, &doc);
    free(buf);
    if (rc)
        return rc;
    rc = read_platform(&c, tsr__json_root(doc), out);
    tsr__json_free(doc);
    if (rc) {
        memset(out, 0, sizeof *out);
        return rc;
    }
    memcpy(out->path, path, strlen(path) + 1);
    return 0;
}

/* ---- the rate model ------------------------------------------------------------ */

/* launch + max(flops / (peak × eff), bytes / (bandwidth × eff)); a codelet
 * listed under the device overrides the efficiencies it names. A kind the
 * platform does not describe (rates 0) contributes its launch only. */
double tsr__platform_task_seconds(const tsr_platform_t *p, int kind, const tsr_codelet_t *cl,
                                  const size_t *sizes, int nbuffers, const void *args,
                                  int cuda_fp32)
{
    if (kind < 0 || kind >= TSR_DEVICE_KINDS)
        return 0;
    const tsr_platform_device_t *d = &p->device[kind];
    double flops = cl->flops ? cl->flops(args, sizes) : 0;
    double bytes = 0;
    if (cl->bytes) {
        bytes = cl->bytes(args, sizes);
    } else {
        for (int i = 0; i < nbuffers; i++)
            bytes += (double)sizes[i];
    }
    double fe = d->flops_efficiency, be = d->bytes_efficiency;
    for (int i = 0; cl->name && i < d->ncodelets; i++) {
        if (!strcmp(d->codelets[i].name, cl->name)) {
            if (d->codelets[i].flops_efficiency > 0)
                fe = d->codelets[i].flops_efficiency;
            if (d->codelets[i].bytes_efficiency > 0)
                be = d->codelets[i].bytes_efficiency;
            break;
        }
    }
    /* the codelets whose CUDA kernels run on tensor cores in TF32 mode:
     * GEMMs and the attention's products (kernels/cuda/attention_tc.cu,
     * heads up to 128 wide; wider ones are the FP32 kernels of the codelets
     * "attn_fwd_wide" and "attn_bwd_wide", priced at the FP32 peak) */
    double peak = d->peak_flops;
    if (kind == TSR_DEVICE_CUDA && cuda_fp32 == TSR_CUDA_FP32_TF32 && d->peak_flops_tf32 > 0 &&
        cl->name &&
        (strstr(cl->name, "gemm") || !strcmp(cl->name, "attn_fwd") || !strcmp(cl->name, "attn_bwd")))
        peak = d->peak_flops_tf32;
    /* bf16 operands run on the bf16 tensor cores in either fp32 mode */
    if (kind == TSR_DEVICE_CUDA && d->peak_flops_bf16 > 0 && cl->name &&
        !strcmp(cl->name, "gemm_bf16"))
        peak = d->peak_flops_bf16;
    double tc = flops > 0 && peak * fe > 0 ? flops / (peak * fe) : 0;
    double tm = bytes > 0 && d->mem_bandwidth * be > 0 ? bytes / (d->mem_bandwidth * be) : 0;
    return d->launch + (tc > tm ? tc : tm);
}
