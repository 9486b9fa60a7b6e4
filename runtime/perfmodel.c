/* runtime/perfmodel.c — codelet execution-time models: a ring of recent
 * samples per (codelet name, device kind, footprint of the buffer sizes),
 * estimated by the ring's median; a log-log regression over the codelet's
 * other footprints for sizes never (or not yet reliably) seen; persistence
 * as codelets.txt in the model directory (perfmodel_store.c), which this
 * file formats and parses. See docs/perfmodels.md.
 *
 * Must never: hold the lock while calling a codelet's flops estimator or
 * doing file I/O, abort or fail init on a corrupt or unreadable file (one
 * warning line, then empty models), write the model file in place.
 */
#include "runtime/perfmodel.h"

#include "runtime/internal.h"
#include "runtime/perfmodel_store.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#define PM_HEADER "# tessera perfmodels v1"
#define PM_FILE "codelets.txt"

static const char *const kind_name[TSR_DEVICE_KINDS] = {"cpu", "cuda"};
enum { X_BYTES = 0, X_FLOPS = 1, X_KINDS = 2 };
static const char *const xkind_name[X_KINDS] = {"bytes", "flops"};

/* ---- the models ---------------------------------------------------------- */

typedef struct fpm {
    uint64_t fp;
    int nbuffers;
    size_t sizes[TSR_MAX_BUFFERS];
    int xkind;               /* X_BYTES / X_FLOPS */
    double x;                /* the regression variable (0: unusable) */
    unsigned count;          /* samples ever recorded (saturates) */
    unsigned n;              /* samples in the ring, <= WINDOW */
    unsigned head;           /* where the next sample goes */
    double ring[TSR_PERFMODEL_WINDOW];
    double median;           /* of the ring, kept current on insert */
} fpm_t;

typedef struct kmodel {      /* one codelet on one device kind */
    fpm_t **v;               /* footprints, in insertion order */
    size_t n, cap;
    uint32_t *idx;           /* open addressing: index into v + 1, 0 empty */
    size_t idxcap;           /* power of two, > 2 n */
    bool reg_dirty;          /* a sample arrived since the fit below */
    bool reg_ok[X_KINDS];
    double reg_a[X_KINDS], reg_b[X_KINDS];
} kmodel_t;

typedef struct cmodel {
    char *name;
    uint64_t hash;
    kmodel_t k[TSR_DEVICE_KINDS];
} cmodel_t;

static struct {
    pthread_mutex_t m;       /* everything below */
    bool open;
    int calibrate;
    bool persist;            /* a directory is set */
    bool dirty;              /* something to save */
    cmodel_t **tab;          /* open addressing by name hash */
    size_t cap, n;
} pm = {.m = PTHREAD_MUTEX_INITIALIZER};


static uint64_t footprint(const size_t *sizes, int nbuffers)
{
    uint64_t v = (uint64_t)nbuffers;
    uint64_t h = tsr__fnv1a(TSR_FNV0, &v, sizeof v);
    for (int i = 0; i < nbuffers; i++) {
        v = (uint64_t)sizes[i];
        h = tsr__fnv1a(h, &v, sizeof v);
    }
    return h;
}

static uint64_t name_hash(const char *name)
{
    return tsr__fnv1a(TSR_FNV0, name, strlen(name));
}

/* The regression variable of one run: the codelet's flops when it has an
 * estimator, else the bytes of its buffers. 0 when unusable. */
static double regression_x(const tsr_codelet_t *cl, const size_t *sizes, int nbuffers,
                           const void *args, int *xkind)
{
    double x = 0;
    if (cl->flops) {
        *xkind = X_FLOPS;
        x = cl->flops(args, sizes);
    } else {
        *xkind = X_BYTES;
        for (int i = 0; i < nbuffers; i++)
            x += (double)sizes[i];
    }
    return isfinite(x) && x > 0 ? x : 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void fpm_add(fpm_t *f, double s)
{
    f->ring[f->head] = s;
    f->head = (f->head + 1) % TSR_PERFMODEL_WINDOW;
    if (f->n < TSR_PERFMODEL_WINDOW)
        f->n++;
    if (f->count < UINT_MAX)
        f->count++;
    double t[TSR_PERFMODEL_WINDOW];
    memcpy(t, f->ring, f->n * sizeof t[0]);
    qsort(t, f->n, sizeof t[0], cmp_double);
    f->median = f->n % 2 ? t[f->n / 2] : 0.5 * (t[f->n / 2 - 1] + t[f->n / 2]);
}

static void cmodel_free(cmodel_t *c)
{
    if (!c)
        return;
    for (int k = 0; k < TSR_DEVICE_KINDS; k++) {
        for (size_t i = 0; i < c->k[k].n; i++)
            free(c->k[k].v[i]);
        free(c->k[k].v);
        free(c->k[k].idx);
    }
    free(c->name);
    free(c);
}

static void models_free(void)
{
    for (size_t i = 0; i < pm.cap; i++)
        cmodel_free(pm.tab[i]);
    free(pm.tab);
    pm.tab = NULL;
    pm.cap = pm.n = 0;
}

static cmodel_t *cmodel_find(const char *name, uint64_t h)
{
    if (!pm.cap)
        return NULL;
    for (size_t i = h & (pm.cap - 1);; i = (i + 1) & (pm.cap - 1)) {
        cmodel_t *c = pm.tab[i];
        if (!c)
            return NULL;
        if (c->hash == h && strcmp(c->name, name) == 0)
            return c;
    }
}

static cmodel_t *cmodel_get(const char *name, uint64_t h)
{
    cmodel_t *c = cmodel_find(name, h);
    if (c)
        return c;
    if (2 * (pm.n + 1) > pm.cap) {
        size_t cap = pm.cap ? 2 * pm.cap : 16;
        cmodel_t **t = calloc(cap, sizeof *t);
        if (!t)
            return NULL;
        for (size_t i = 0; i < pm.cap; i++) {
            cmodel_t *o = pm.tab[i];
            if (!o)
                continue;
            size_t j = o->hash & (cap - 1);
            while (t[j])
                j = (j + 1) & (cap - 1);
            t[j] = o;
        }
        free(pm.tab);
        pm.tab = t;
        pm.cap = cap;
    }
    c = calloc(1, sizeof *c);
    if (!c || !(c->name = strdup(name))) {
        free(c);
        return NULL;
    }
    c->hash = h;
    size_t j = h & (pm.cap - 1);
    while (pm.tab[j])
        j = (j + 1) & (pm.cap - 1);
    pm.tab[j] = c;
    pm.n++;
    return c;
}

static bool same_sizes(const fpm_t *f, const size_t *sizes, int nbuffers)
{
    if (f->nbuffers != nbuffers)
        return false;
    for (int i = 0; i < nbuffers; i++)
        if (f->sizes[i] != sizes[i])
            return false;
    return true;
}

static fpm_t *fpm_find(const kmodel_t *k, uint64_t fp, const size_t *sizes, int nbuffers)
{
    if (!k->idxcap)
        return NULL;
    for (size_t i = fp & (k->idxcap - 1);; i = (i + 1) & (k->idxcap - 1)) {
        uint32_t s = k->idx[i];
        if (!s)
            return NULL;
        fpm_t *f = k->v[s - 1];
        if (f->fp == fp && same_sizes(f, sizes, nbuffers))
            return f;
    }
}

static fpm_t *fpm_get(kmodel_t *k, uint64_t fp, const size_t *sizes, int nbuffers)
{
    fpm_t *f = fpm_find(k, fp, sizes, nbuffers);
    if (f)
        return f;
    if (k->n >= UINT32_MAX - 1)
        return NULL;
    if (k->n == k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 8;
        fpm_t **v = realloc(k->v, cap * sizeof *v);
        if (!v)
            return NULL;
        k->v = v;
        k->cap = cap;
    }
    if (2 * (k->n + 1) > k->idxcap) {
        size_t cap = k->idxcap ? 2 * k->idxcap : 16;
        uint32_t *t = calloc(cap, sizeof *t);
        if (!t)
            return NULL;
        for (size_t i = 0; i < k->n; i++) {
            size_t j = k->v[i]->fp & (cap - 1);
            while (t[j])
                j = (j + 1) & (cap - 1);
            t[j] = (uint32_t)(i + 1);
        }
        free(k->idx);
        k->idx = t;
        k->idxcap = cap;
    }
    f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->fp = fp;
    f->nbuffers = nbuffers;
    if (nbuffers > 0)
        memcpy(f->sizes, sizes, (size_t)nbuffers * sizeof sizes[0]);
    k->v[k->n] = f;
    size_t j = fp & (k->idxcap - 1);
    while (k->idx[j])
        j = (j + 1) & (k->idxcap - 1);
    k->idx[j] = (uint32_t)(k->n + 1);
    k->n++;
    return f;
}

static unsigned trust_threshold(void)
{
    return pm.calibrate ? TSR_PERFMODEL_CALIBRATE_SAMPLES : TSR_PERFMODEL_MIN_SAMPLES;
}

/* Least squares of log(median) on log(x) over the trusted footprints of one
 * kind of regression variable; b clamped to [0.5, 3]; b = 1 (proportional)
 * when fewer than two distinct x. Lock held. */
static void fit(kmodel_t *k)
{
    for (int xk = 0; xk < X_KINDS; xk++) {
        double sx = 0, sy = 0, x0 = 0;
        size_t m = 0;
        bool distinct = false;
        for (size_t i = 0; i < k->n; i++) {
            const fpm_t *f = k->v[i];
            if (f->xkind != xk || f->count < TSR_PERFMODEL_MIN_SAMPLES || !(f->x > 0) ||
                !(f->median > 0))
                continue;
            if (m == 0)
                x0 = f->x;
            else if (f->x != x0)
                distinct = true;
            sx += log(f->x);
            sy += log(f->median);
            m++;
        }
        k->reg_ok[xk] = m > 0;
        if (!m)
            continue;
        double mx = sx / (double)m, my = sy / (double)m, b = 1;
        if (distinct) {
            double sxx = 0, sxy = 0;
            for (size_t i = 0; i < k->n; i++) {
                const fpm_t *f = k->v[i];
                if (f->xkind != xk || f->count < TSR_PERFMODEL_MIN_SAMPLES ||
                    !(f->x > 0) || !(f->median > 0))
                    continue;
                double dx = log(f->x) - mx;
                sxx += dx * dx;
                sxy += dx * (log(f->median) - my);
            }
            b = sxx > 0 ? sxy / sxx : 1;
            if (!(b >= 0.5))
                b = 0.5;
            if (b > 3)
                b = 3;
        }
        k->reg_a[xk] = my - b * mx;
        k->reg_b[xk] = b;
    }
    k->reg_dirty = false;
}

/* ---- samples and estimates ----------------------------------------------- */

static bool args_ok(const tsr_codelet_t *cl, int device_kind, const size_t *sizes,
                    int nbuffers)
{
    return cl && cl->name && cl->name[0] && device_kind >= 0 &&
           device_kind < TSR_DEVICE_KINDS && nbuffers >= 0 &&
           nbuffers <= TSR_MAX_BUFFERS && (nbuffers == 0 || sizes);
}

/* The codelet's own model of the task (tsr_codelet_t.seconds): its answer,
 * or -1 where it has none. */
static double own_model(const tsr_codelet_t *cl, int device_kind, const size_t *sizes,
                        const void *args)
{
    if (!cl || !cl->seconds || device_kind < 0 || device_kind >= TSR_DEVICE_KINDS)
        return -1;
    double s = cl->seconds(args, sizes, device_kind);
    return isfinite(s) && s >= 0 ? s : -1;
}

void tsr__perfmodel_sample(const tsr_codelet_t *cl, int device_kind,
                           const size_t *sizes, int nbuffers, const void *args,
                           double seconds)
{
    if (!args_ok(cl, device_kind, sizes, nbuffers) || !isfinite(seconds) || seconds < 0 ||
        own_model(cl, device_kind, sizes, args) >= 0)
        return;
    uint64_t fp = footprint(sizes, nbuffers), h = name_hash(cl->name);
    int xkind;
    double x = regression_x(cl, sizes, nbuffers, args, &xkind);
    pthread_mutex_lock(&pm.m);
    if (pm.open) {
        cmodel_t *c = cmodel_get(cl->name, h);
        fpm_t *f = c ? fpm_get(&c->k[device_kind], fp, sizes, nbuffers) : NULL;
        if (f) { /* out of memory: the sample is lost, nothing else */
            f->xkind = xkind;
            f->x = x;
            fpm_add(f, seconds);
            c->k[device_kind].reg_dirty = true;
            pm.dirty = true;
        }
    }
    pthread_mutex_unlock(&pm.m);
}

/* The estimate of a device never measured (installed by the simulation
 * driver), and whether history answers first where it has one. */
static struct {
    tsr_perfmodel_prior_fn fn;
    bool history;
} prior;

void tsr__perfmodel_set_prior(tsr_perfmodel_prior_fn fn, bool history)
{
    prior.fn = fn;
    prior.history = history;
}

bool tsr__perfmodel_estimate(const tsr_codelet_t *cl, int device_kind,
                             const size_t *sizes, int nbuffers, const void *args,
                             tsr_perfmodel_info_t *out)
{
    tsr_perfmodel_info_t info = {0, 0, 0};
    bool ok = false;
    double own = own_model(cl, device_kind, sizes, args);
    if (own >= 0) {
        info.seconds = own;
        if (out)
            *out = info;
        return true;
    }
    if (!args_ok(cl, device_kind, sizes, nbuffers)) {
        if (out)
            *out = info;
        return false;
    }
    if (prior.fn && !prior.history) {
        info.seconds = prior.fn(cl, device_kind, sizes, nbuffers, args);
        if (out)
            *out = info;
        return true;
    }
    uint64_t fp = footprint(sizes, nbuffers), h = name_hash(cl->name);
    int xkind = X_BYTES;
    double x = -1; /* computed only if the regression is needed */
    pthread_mutex_lock(&pm.m);
    for (int pass = 0; pass < 2 && !ok; pass++) {
        cmodel_t *c = pm.open ? cmodel_find(cl->name, h) : NULL;
        if (!c)
            break;
        kmodel_t *k = &c->k[device_kind];
        const fpm_t *f = fpm_find(k, fp, sizes, nbuffers);
        info.nsamples = f ? f->count : 0;
        if (f && f->count >= trust_threshold()) {
            info.seconds = f->median;
            ok = true;
            break;
        }
        /* Calibrating: only real samples of this footprint count. */
        if (pm.calibrate || !k->n)
            break;
        if (x < 0) {
            /* The flops estimator is the application's code: not under the
             * lock. The models may change meanwhile: look again. */
            pthread_mutex_unlock(&pm.m);
            x = regression_x(cl, sizes, nbuffers, args, &xkind);
            pthread_mutex_lock(&pm.m);
            continue;
        }
        if (k->reg_dirty)
            fit(k);
        if (x > 0 && k->reg_ok[xkind]) {
            double t = exp(k->reg_a[xkind] + k->reg_b[xkind] * log(x));
            if (isfinite(t)) {
                info.seconds = t;
                info.from_regression = 1;
                ok = true;
            }
        }
    }
    pthread_mutex_unlock(&pm.m);
    if (!ok && prior.fn) {
        info.seconds = prior.fn(cl, device_kind, sizes, nbuffers, args);
        info.from_regression = 0;
        ok = true;
    }
    if (out)
        *out = info;
    return ok;
}

bool tsr__perfmodel_draw(const tsr_codelet_t *cl, int device_kind, const size_t *sizes,
                         int nbuffers, const void *args, double u, double *seconds)
{
    if (!cl || !cl->name || device_kind < 0 || device_kind >= TSR_DEVICE_KINDS || !(u >= 0) ||
        u >= 1 || own_model(cl, device_kind, sizes, args) >= 0)
        return false;
    uint64_t fp = footprint(sizes, nbuffers), h = name_hash(cl->name);
    bool ok = false;
    pthread_mutex_lock(&pm.m);
    cmodel_t *c = pm.open ? cmodel_find(cl->name, h) : NULL;
    const fpm_t *f = c ? fpm_find(&c->k[device_kind], fp, sizes, nbuffers) : NULL;
    if (f && f->count >= trust_threshold() && f->n > 0) {
        *seconds = f->ring[(unsigned)(u * f->n) % f->n];
        ok = true;
    }
    pthread_mutex_unlock(&pm.m);
    return ok;
}

/* ---- the file -------------------------------------------------------------- */

/* Codelet names are written percent-encoded: bytes below '!' (space,
 * controls), above '~', '%' and '#' become %XX. */
static void put_name(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p <= ' ' || *p > '~' || *p == '%' || *p == '#')
            fprintf(f, "%%%02X", *p);
        else
            fputc(*p, f);
    }
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decode a name token in place; false if malformed. */
static bool decode_name(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (*r != '%') {
            *w++ = *r;
            continue;
        }
        int a = hexval(r[1]), b = a >= 0 ? hexval(r[2]) : -1;
        if (a < 0 || b < 0 || (a == 0 && b == 0))
            return false;
        *w++ = (char)(a * 16 + b);
        r += 2;
    }
    *w = 0;
    return w != s;
}

/* The models as the file's text, in a malloc'ed buffer. Lock held. */
static char *format_models(size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f)
        return NULL;
    fprintf(f, "%s\n", PM_HEADER);
    fprintf(f, "# name kind footprint nbuffers sizes... xkind x count nring "
               "samples... (oldest first)\n");
    for (size_t i = 0; i < pm.cap; i++) {
        const cmodel_t *c = pm.tab[i];
        if (!c)
            continue;
        for (int k = 0; k < TSR_DEVICE_KINDS; k++)
            for (size_t j = 0; j < c->k[k].n; j++) {
                const fpm_t *m = c->k[k].v[j];
                put_name(f, c->name);
                fprintf(f, " %s %016llx %d", kind_name[k], (unsigned long long)m->fp,
                        m->nbuffers);
                for (int b = 0; b < m->nbuffers; b++)
                    fprintf(f, " %zu", m->sizes[b]);
                fprintf(f, " %s %.17g %u %u", xkind_name[m->xkind], m->x, m->count, m->n);
                unsigned start = m->n < TSR_PERFMODEL_WINDOW ? 0 : m->head;
                for (unsigned s = 0; s < m->n; s++)
                    fprintf(f, " %.17g", m->ring[(start + s) % TSR_PERFMODEL_WINDOW]);
                fputc('\n', f);
            }
    }
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static char *next_token(char **s)
{
    char *p = *s;
    while (*p == ' ' || *p == '\t')
        p++;
    if (!*p)
        return NULL;
    char *t = p;
    while (*p && *p != ' ' && *p != '\t')
        p++;
    if (*p)
        *p++ = 0;
    *s = p;
    return t;
}

static bool parse_u64(const char *t, int base, unsigned long long max,
                      unsigned long long *v)
{
    if (!t || !*t || *t == '-' || *t == '+')
        return false;
    char *end;
    errno = 0;
    *v = strtoull(t, &end, base);
    return errno == 0 && !*end && *v <= max;
}

static bool parse_double(const char *t, double *v)
{
    if (!t || !*t)
        return false;
    char *end;
    errno = 0;
    *v = strtod(t, &end);
    return !*end && isfinite(*v) && *v >= 0;
}

/* One model line (without its newline); NULL, or what is wrong. */
static const char *parse_line(char *line)
{
    char *s = line, *name = next_token(&s), *t;
    if (!name || !decode_name(name))
        return "bad codelet name";
    int kind = -1;
    t = next_token(&s);
    for (int k = 0; t && k < TSR_DEVICE_KINDS; k++)
        if (strcmp(t, kind_name[k]) == 0)
            kind = k;
    if (kind < 0)
        return "bad device kind";
    unsigned long long fp, v;
    if (!parse_u64(next_token(&s), 16, ULLONG_MAX, &fp))
        return "bad footprint";
    if (!parse_u64(next_token(&s), 10, TSR_MAX_BUFFERS, &v))
        return "bad buffer count";
    int nbuffers = (int)v;
    size_t sizes[TSR_MAX_BUFFERS];
    for (int i = 0; i < nbuffers; i++) {
        if (!parse_u64(next_token(&s), 10, SIZE_MAX, &v))
            return "bad buffer size";
        sizes[i] = (size_t)v;
    }
    if (footprint(sizes, nbuffers) != fp)
        return "footprint does not match the sizes";
    t = next_token(&s);
    int xkind = -1;
    for (int k = 0; t && k < X_KINDS; k++)
        if (strcmp(t, xkind_name[k]) == 0)
            xkind = k;
    if (xkind < 0)
        return "bad regression variable kind";
    double x;
    if (!parse_double(next_token(&s), &x))
        return "bad regression variable";
    unsigned long long count, nring;
    if (!parse_u64(next_token(&s), 10, UINT_MAX, &count))
        return "bad sample count";
    if (!parse_u64(next_token(&s), 10, TSR_PERFMODEL_WINDOW, &nring) || nring == 0 ||
        nring > count)
        return "bad number of samples";
    double ring[TSR_PERFMODEL_WINDOW];
    for (unsigned i = 0; i < nring; i++)
        if (!parse_double(next_token(&s), &ring[i]))
            return "bad or missing sample";
    if (next_token(&s))
        return "extra fields";

    cmodel_t *c = cmodel_get(name, name_hash(name));
    if (!c)
        return "out of memory";
    kmodel_t *k = &c->k[kind];
    if (fpm_find(k, fp, sizes, nbuffers))
        return "duplicate model";
    fpm_t *f = fpm_get(k, fp, sizes, nbuffers);
    if (!f)
        return "out of memory";
    for (unsigned i = 0; i < nring; i++)
        fpm_add(f, ring[i]);
    f->count = (unsigned)count;
    f->xkind = xkind;
    f->x = x;
    k->reg_dirty = true;
    return NULL;
}

/* Parse codelets.txt (read by the caller, outside the lock) into the
 * (empty) models; on any error warn and leave them empty. Lock held. */
static void load_models(char *buf)
{
    const char *why = NULL;
    size_t lineno = 0;
    char *p = buf;
    size_t hl = strlen(PM_HEADER);
    if (strncmp(p, PM_HEADER, hl) != 0 || (p[hl] != '\n' && p[hl] != '\r'))
        why = strncmp(p, "# tessera perfmodels v", 22) == 0 ? "unsupported version"
                                                             : "no version header";
    while (!why && *p) {
        char *nl = strchr(p, '\n');
        lineno++;
        if (!nl) {
            why = "truncated line";
            break;
        }
        *nl = 0;
        if (nl > p && nl[-1] == '\r')
            nl[-1] = 0;
        if (lineno > 1 && *p && *p != '#')
            why = parse_line(p);
        p = nl + 1;
    }
    if (why) {
        if (lineno > 1)
            fprintf(stderr, "tessera: ignoring performance models in %s/%s: line %zu: %s\n",
                    tsr__pmstore_dir(), PM_FILE, lineno, why);
        else
            fprintf(stderr, "tessera: ignoring performance models in %s/%s: %s\n",
                    tsr__pmstore_dir(), PM_FILE, why);
        models_free();
    }
}

/* ---- open, save, close ------------------------------------------------- */

static int save_now(char *err, size_t errlen)
{
    pthread_mutex_lock(&pm.m);
    if (!pm.open || !pm.persist) {
        pthread_mutex_unlock(&pm.m);
        return TSR_OK;
    }
    size_t len = 0;
    char *text = format_models(&len);
    bool was_dirty = pm.dirty;
    pm.dirty = false;
    pthread_mutex_unlock(&pm.m);
    if (!text) {
        snprintf(err, errlen, "out of memory");
        pthread_mutex_lock(&pm.m);
        pm.dirty |= was_dirty;
        pthread_mutex_unlock(&pm.m);
        return TSR_ENOMEM;
    }
    int rc = tsr__pmstore_write(PM_FILE, text, len, err, errlen) == 0 ? TSR_OK
                                                                           : TSR_EIO;
    free(text);
    if (rc != TSR_OK) {
        pthread_mutex_lock(&pm.m);
        pm.dirty |= was_dirty;
        pthread_mutex_unlock(&pm.m);
    }
    return rc;
}

int tsr__perfmodel_open(const char *dir, int calibrate, char *err, size_t errlen)
{
    if (calibrate < 0 || calibrate > 2) {
        snprintf(err, errlen, "calibrate=%d (0-2)", calibrate);
        return TSR_EINVAL;
    }
    tsr__perfmodel_close();
    int rc = tsr__pmstore_open(dir, err, errlen);
    if (rc != TSR_OK)
        return rc;
    bool persist = tsr__pmstore_dir()[0] != 0;
    /* The file is read outside the lock; nothing samples before open ends. */
    char *text = NULL;
    if (persist && calibrate != 2) {
        char rerr[256] = "";
        bool missing;
        text = tsr__pmstore_read(PM_FILE, &missing, rerr, sizeof rerr);
        if (!text && !missing)
            fprintf(stderr, "tessera: ignoring performance models in %s/%s: %s\n",
                    tsr__pmstore_dir(), PM_FILE, rerr);
    }
    pthread_mutex_lock(&pm.m);
    pm.calibrate = calibrate;
    pm.persist = persist;
    if (persist && calibrate != 2 && text)
        load_models(text);
    /* calibrate=2 forgets what is stored: the file is rewritten at close. */
    pm.dirty = persist && calibrate == 2;
    pm.open = true;
    pthread_mutex_unlock(&pm.m);
    free(text);
    return TSR_OK;
}

int tsr__perfmodel_save(void)
{
    char err[512];
    int rc = save_now(err, sizeof err);
    if (rc != TSR_OK)
        return tsr__fail(rc, "performance models: %s", err);
    return TSR_OK;
}

void tsr__perfmodel_close(void)
{
    pthread_mutex_lock(&pm.m);
    bool was_open = pm.open, save = pm.open && pm.persist && pm.dirty;
    pthread_mutex_unlock(&pm.m);
    if (!was_open)
        return;
    if (save) {
        char err[512];
        if (save_now(err, sizeof err) != TSR_OK)
            fprintf(stderr, "tessera: cannot save performance models: %s\n", err);
    }
    pthread_mutex_lock(&pm.m);
    models_free();
    pm.open = false;
    pm.persist = false;
    pm.dirty = false;
    pthread_mutex_unlock(&pm.m);
    tsr__pmstore_close();
}

/* ---- public calls ------------------------------------------------------- */

static int check_args(const char *what, const tsr_codelet_t *cl, int device_kind,
                      const size_t *sizes, int nbuffers)
{
    if (!tsr__running())
        return tsr__fail(TSR_ESTATE, "%s: runtime not initialized", what);
    if (!cl)
        return tsr__fail(TSR_EINVAL, "%s: codelet is NULL", what);
    if (!cl->name || !cl->name[0])
        return tsr__fail(TSR_EINVAL, "%s: the codelet has no name (models are keyed by it)",
                         what);
    if (device_kind < 0 || device_kind >= TSR_DEVICE_KINDS)
        return tsr__fail(TSR_EINVAL, "%s '%s': device kind %d (0-%d)", what, cl->name,
                         device_kind, TSR_DEVICE_KINDS - 1);
    if (nbuffers < 0 || nbuffers > TSR_MAX_BUFFERS || nbuffers != cl->nbuffers)
        return tsr__fail(TSR_EINVAL, "%s '%s': %d buffers given, the codelet takes %d", what,
                         cl->name, nbuffers, cl->nbuffers);
    if (nbuffers > 0 && !sizes)
        return tsr__fail(TSR_EINVAL, "%s '%s': sizes is NULL", what, cl->name);
    return TSR_OK;
}

int tsr_perfmodel_record(const tsr_codelet_t *cl, int device_kind, const size_t *sizes,
                         int nbuffers, const void *args, double seconds)
{
    int rc = check_args("perfmodel_record", cl, device_kind, sizes, nbuffers);
    if (rc != TSR_OK)
        return rc;
    if (!isfinite(seconds) || seconds < 0)
        return tsr__fail(TSR_EINVAL, "perfmodel_record '%s': %g seconds", cl->name, seconds);
    tsr__perfmodel_sample(cl, device_kind, sizes, nbuffers, args, seconds);
    return TSR_OK;
}

int tsr_perfmodel_predict(const tsr_codelet_t *cl, int device_kind, const size_t *sizes,
                          int nbuffers, const void *args, tsr_perfmodel_info_t *out)
{
    int rc = check_args("perfmodel_predict", cl, device_kind, sizes, nbuffers);
    if (rc != TSR_OK)
        return rc;
    if (!out)
        return tsr__fail(TSR_EINVAL, "perfmodel_predict '%s': out is NULL", cl->name);
    if (!tsr__perfmodel_estimate(cl, device_kind, sizes, nbuffers, args, out))
        return tsr__fail(TSR_ENOTFOUND,
                         "perfmodel_predict '%s' on %s: %s (%u sample(s) of these sizes)",
                         cl->name, kind_name[device_kind],
                         pm.calibrate ? "not calibrated yet" : "nothing known",
                         out->nsamples);
    return TSR_OK;
}

int tsr_perfmodel_save(void)
{
    if (!tsr__running())
        return tsr__fail(TSR_ESTATE, "perfmodel_save: runtime not initialized");
    return tsr__perfmodel_save();
}
