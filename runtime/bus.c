/* runtime/bus.c — the bus model: latency and bandwidth of every link between
 * the open memory nodes, measured with real copies through the copy
 * engines (memory/measure.c) and cached as bus.txt in the model directory
 * (perfmodel_store.c) under a signature of both ends, so that a machine and
 * configuration is measured once; a simulated platform's links are read
 * from its description (memory/phantom.h) instead. See docs/perfmodels.md.
 *
 * Must never: fail init over an unreadable or corrupt cache (one warning,
 * then measure), measure a link twice per init, or be read half-written
 * (readers see the links only once `ready` is published).
 */
#include "runtime/perfmodel.h"

#include "memory/phantom.h"
#include "runtime/internal.h"
#include "runtime/perfmodel_store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#define BUS_HEADER "# tessera bus v1"
#define BUS_FILE "bus.txt"
#define SMALL_BYTES 64
#define SMALL_REPS 10
#define BIG_REPS 4

static struct {
    pthread_mutex_t m;        /* calibration and reset */
    atomic_bool ready;        /* the tables below are complete ... */
    atomic_uint generation;   /* ... for this generation of the model store */
    int n;
    bool direct[TSR_MAX_NODES][TSR_MAX_NODES];
    double lat[TSR_MAX_NODES][TSR_MAX_NODES];
    double bw[TSR_MAX_NODES][TSR_MAX_NODES];
} bus = {.m = PTHREAD_MUTEX_INITIALIZER};

/* The links were measured for the nodes of one tsr_init; a new init opens
 * the model store again, so a generation that moved means stale links.
 * (The store does not call the bus model: the dependency runs one way.) */
bool tsr__bus_ready(void)
{
    return atomic_load_explicit(&bus.ready, memory_order_acquire) &&
           atomic_load_explicit(&bus.generation, memory_order_relaxed) ==
               tsr__pmstore_generation();
}

/* ---- signatures and the cache file -------------------------------------- */

typedef struct link_rec {
    char *a, *b;
    double lat, bw;
} link_rec_t;

typedef struct cache {
    link_rec_t *v;
    size_t n, cap;
} cache_t;

static void cache_free(cache_t *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->v[i].a);
        free(c->v[i].b);
    }
    free(c->v);
    memset(c, 0, sizeof *c);
}

static link_rec_t *cache_find(cache_t *c, const char *a, const char *b)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->v[i].a, a) == 0 && strcmp(c->v[i].b, b) == 0)
            return &c->v[i];
    return NULL;
}

static bool cache_put(cache_t *c, const char *a, const char *b, double lat, double bw)
{
    link_rec_t *r = cache_find(c, a, b);
    if (r) {
        r->lat = lat;
        r->bw = bw;
        return true;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        link_rec_t *v = realloc(c->v, cap * sizeof *v);
        if (!v)
            return false;
        c->v = v;
        c->cap = cap;
    }
    char *x = strdup(a), *y = strdup(b);
    if (!x || !y) {
        free(x);
        free(y);
        return false;
    }
    c->v[c->n++] = (link_rec_t){x, y, lat, bw};
    return true;
}

/* What identifies a node's link for the cache: it changes whenever the
 * configuration that determines the link's speed does. Spaces and '%' are
 * percent-encoded so that a signature is one token. */
static void signature(const tsr_node_t *nd, char *out, size_t len)
{
    char raw[400];
    switch (nd->kind) {
    case TSR_NODE_KIND_HOST:
        snprintf(raw, sizeof raw, "host");
        break;
    case TSR_NODE_KIND_SIM:
        snprintf(raw, sizeof raw, "sim:%zu:%.17g:%.17g", nd->capacity,
                 tsr__rt.cfg.sim_bandwidth, tsr__rt.cfg.sim_latency);
        break;
    case TSR_NODE_KIND_DISK:
        /* its file system decides the link's speed */
        snprintf(raw, sizeof raw, "disk:%s", tsr__rt.cfg.disk_dir ? tsr__rt.cfg.disk_dir : "");
        break;
    default: {
        tsr_device_info_t di;
        const char *name = "?";
        /* The node's index is the device it drives (ncuda takes the first
         * devices). */
        if (tsr_cuda_device_info(nd->index, &di) == TSR_OK)
            name = di.name;
        snprintf(raw, sizeof raw, "cuda:%s:%d", name, nd->index);
        break;
    }
    }
    size_t w = 0;
    for (const unsigned char *p = (const unsigned char *)raw; *p && w + 4 < len; p++) {
        if (*p <= ' ' || *p > '~' || *p == '%' || *p == '#')
            w += (size_t)snprintf(out + w, len - w, "%%%02X", *p);
        else
            out[w++] = (char)*p;
    }
    out[w] = 0;
}

/* Parse bus.txt into c; NULL or what is wrong (c then holds nothing). */
static const char *cache_parse(char *buf, cache_t *c, size_t *lineno)
{
    size_t hl = strlen(BUS_HEADER);
    *lineno = 0;
    if (strncmp(buf, BUS_HEADER, hl) != 0 || (buf[hl] != '\n' && buf[hl] != '\r'))
        return strncmp(buf, "# tessera bus v", 15) == 0 ? "unsupported version"
                                                         : "no version header";
    const char *why = NULL;
    for (char *p = buf; !why && *p;) {
        char *nl = strchr(p, '\n');
        ++*lineno;
        if (!nl) {
            why = "truncated line";
            break;
        }
        *nl = 0;
        if (nl > p && nl[-1] == '\r')
            nl[-1] = 0;
        if (*lineno > 1 && *p && *p != '#') {
            char a[400], b[400], extra[2];
            double lat, bw;
            int k = sscanf(p, "%399s %399s %lf %lf %1s", a, b, &lat, &bw, extra);
            if (k != 4)
                why = k < 4 ? "missing fields" : "extra fields";
            else if (!isfinite(lat) || lat < 0 || !isfinite(bw) || bw <= 0)
                why = "bad latency or bandwidth";
            else if (!cache_put(c, a, b, lat, bw))
                why = "out of memory";
        }
        p = nl + 1;
    }
    if (why)
        cache_free(c);
    return why;
}

static void cache_load(cache_t *c)
{
    const char *dir = tsr__pmstore_dir();
    char err[256] = "";
    bool missing;
    char *buf = tsr__pmstore_read(BUS_FILE, &missing, err, sizeof err);
    if (!buf) {
        if (!missing)
            fprintf(stderr, "tessera: ignoring bus model in %s/%s: %s\n", dir, BUS_FILE, err);
        return;
    }
    size_t lineno;
    const char *why = cache_parse(buf, c, &lineno);
    if (why && lineno > 1)
        fprintf(stderr, "tessera: ignoring bus model in %s/%s: line %zu: %s\n", dir,
                BUS_FILE, lineno, why);
    else if (why)
        fprintf(stderr, "tessera: ignoring bus model in %s/%s: %s\n", dir, BUS_FILE, why);
    free(buf);
}

static void cache_save(const cache_t *c)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return;
    fprintf(f, "%s\n# src dst latency_s bytes_per_s\n", BUS_HEADER);
    for (size_t i = 0; i < c->n; i++)
        fprintf(f, "%s %s %.17g %.17g\n", c->v[i].a, c->v[i].b, c->v[i].lat, c->v[i].bw);
    if (fclose(f) != 0) {
        free(text);
        return;
    }
    char err[512];
    if (tsr__pmstore_write(BUS_FILE, text, len, err, sizeof err) != 0)
        fprintf(stderr, "tessera: cannot save the bus model: %s\n", err);
    free(text);
}

/* ---- measuring ------------------------------------------------------------ */

static int measure(int s, int d, double *lat, double *bw, char *err, size_t errlen)
{
    double small;
    int rc = tsr__mem_time_copy(s, d, SMALL_BYTES, SMALL_REPS, &small, err, errlen);
    if (rc != TSR_OK)
        return rc;
    bool gpu = tsr__mem_node(s)->kind == TSR_NODE_KIND_CUDA ||
               tsr__mem_node(d)->kind == TSR_NODE_KIND_CUDA;
    size_t big = gpu ? (size_t)32 << 20 : (size_t)4 << 20;
    /* The disk tier's measuring copies take room in its file: at most a
     * quarter of it. */
    tsr_node_t *dk = tsr__mem_node(s)->kind == TSR_NODE_KIND_DISK   ? tsr__mem_node(s)
                     : tsr__mem_node(d)->kind == TSR_NODE_KIND_DISK ? tsr__mem_node(d)
                                                                    : NULL;
    if (dk && big > dk->capacity / 4)
        big = dk->capacity / 4 > SMALL_BYTES ? dk->capacity / 4 : SMALL_BYTES;
    double best;
    rc = tsr__mem_time_copy(s, d, big, BIG_REPS, &best, err, errlen);
    if (rc != TSR_OK)
        return rc;
    *lat = small;
    double xfer = best - small;
    if (!(xfer > best * 1e-3))
        xfer = best * 1e-3; /* latency-bound link: bandwidth is huge */
    if (!(xfer > 0))
        xfer = 1e-9;
    *bw = (double)big / xfer;
    return TSR_OK;
}

int tsr__bus_calibrate(char *err, size_t errlen)
{
    pthread_mutex_lock(&bus.m);
    if (tsr__bus_ready()) {
        pthread_mutex_unlock(&bus.m);
        return TSR_OK;
    }
    /* Readers skip the tables while they are rewritten. */
    atomic_store_explicit(&bus.ready, false, memory_order_release);
    bus.n = 0;
    unsigned generation = tsr__pmstore_generation();
    int n = tsr__mem_node_count();
    if (n < 1 || n > TSR_MAX_NODES) {
        pthread_mutex_unlock(&bus.m);
        snprintf(err, errlen, "%d memory nodes", n);
        return TSR_ESTATE;
    }
    static char sig[TSR_MAX_NODES][160];
    for (int i = 0; i < n; i++)
        signature(tsr__mem_node(i), sig[i], sizeof sig[i]);
    const char *dir = tsr__pmstore_dir();
    bool persist = dir && dir[0];
    cache_t cache = {0};
    if (persist)
        cache_load(&cache);
    bool measured = false;
    int rc = TSR_OK;
    for (int s = 0; s < n && rc == TSR_OK; s++)
        for (int d = 0; d < n && rc == TSR_OK; d++) {
            bus.direct[s][d] = false;
            bus.lat[s][d] = 0;
            bus.bw[s][d] = INFINITY;
            if (s == d)
                continue;
            tsr_node_t *S = tsr__mem_node(s), *D = tsr__mem_node(d);
            /* The engine of the destination, or of the source when the
             * destination is the host, performs the copy (as in the
             * directory). */
            bool direct = s == 0 || d == 0 || (D->ops && D->ops->peer && D->ops->peer(D, S));
            bus.direct[s][d] = direct;
            if (!direct)
                continue;
            link_rec_t *r = cache_find(&cache, sig[s], sig[d]);
            double lat, bw;
            if (tsr__phantom_link(s, d, &lat, &bw)) {
                /* A link the memory layer describes (a simulated
                 * platform's) is read, not measured. */
                if (!(bw > 0))
                    bw = INFINITY;
            } else if (r) {
                lat = r->lat;
                bw = r->bw;
            } else {
                char e[256] = "";
                rc = measure(s, d, &lat, &bw, e, sizeof e);
                if (rc != TSR_OK) {
                    snprintf(err, errlen, "measuring %s -> %s: %s", S->name, D->name, e);
                    break;
                }
                measured = true;
                if (!cache_put(&cache, sig[s], sig[d], lat, bw))
                    persist = false; /* out of memory: keep the file as it is */
            }
            bus.lat[s][d] = lat;
            bus.bw[s][d] = bw;
        }
    if (rc == TSR_OK && measured && persist)
        cache_save(&cache);
    cache_free(&cache);
    if (rc == TSR_OK) {
        bus.n = n;
        atomic_store_explicit(&bus.generation, generation, memory_order_relaxed);
        atomic_store_explicit(&bus.ready, true, memory_order_release);
    }
    pthread_mutex_unlock(&bus.m);
    return rc;
}

/* ---- the model ------------------------------------------------------------- */

static bool in_range(int src, int dst)
{
    return src >= 0 && dst >= 0 && src < bus.n && dst < bus.n;
}

bool tsr__bus_link(int src, int dst, double *latency_s, double *bytes_per_s)
{
    if (!tsr__bus_ready() || !in_range(src, dst))
        return false;
    double lat, bw;
    if (src == dst || bus.direct[src][dst]) {
        lat = bus.lat[src][dst];
        bw = bus.bw[src][dst];
    } else {
        /* Two hops through the host: latencies add, and so do the times
         * per byte. */
        lat = bus.lat[src][0] + bus.lat[0][dst];
        bw = 1.0 / (1.0 / bus.bw[src][0] + 1.0 / bus.bw[0][dst]);
    }
    if (latency_s)
        *latency_s = lat;
    if (bytes_per_s)
        *bytes_per_s = bw;
    return true;
}

double tsr__bus_time(int src, int dst, size_t bytes)
{
    if (src == dst || !tsr__bus_ready() || !in_range(src, dst))
        return 0;
    if (bus.direct[src][dst])
        return bus.lat[src][dst] + (double)bytes / bus.bw[src][dst];
    return bus.lat[src][0] + (double)bytes / bus.bw[src][0] + bus.lat[0][dst] +
           (double)bytes / bus.bw[0][dst];
}

int tsr_bus_model(int src, int dst, double *latency_s, double *bytes_per_s)
{
    if (!tsr__running())
        return tsr__fail(TSR_ESTATE, "bus_model: runtime not initialized");
    int n = tsr__mem_node_count();
    if (src < 0 || dst < 0 || src >= n || dst >= n)
        return tsr__fail(TSR_EINVAL, "bus_model: nodes %d -> %d (0-%d)", src, dst, n - 1);
    if (!tsr__bus_ready()) {
        char err[512];
        int rc = tsr__bus_calibrate(err, sizeof err);
        if (rc != TSR_OK)
            return tsr__fail(rc, "bus_model: %s", err);
    }
    if (!tsr__bus_link(src, dst, latency_s, bytes_per_s))
        return tsr__fail(TSR_ESTATE, "bus_model: not calibrated");
    return TSR_OK;
}
