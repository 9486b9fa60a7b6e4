/* lab/read_rec.c — the reader of StarPU's tasks.rec (recutils: records of
 * "Field: value" lines separated by blank lines), as starpu_fxt_tool writes
 * it and starpu_replay reads it.
 *
 * A record with a JobId is a task; records are taken in SubmitOrder (JobId
 * where a record has none; ties keep the file's order). Name: Model if
 * present, else Name. Handles (hexadecimal addresses, kept as written)
 * become data items, with Sizes (absent: 1 byte) and Modes (R, W, RW and
 * "|"-joined flags: COMMUTE or REDUX win, then SCRATCH); DependsOn (job ids)
 * are explicit dependencies on tasks submitted before; GFlop × 1e9 is flops;
 * Priority, WorkerId; StartTime/EndTime are in ms (time_unit_s 1e-3): start_s,
 * end_s, and seconds[CPU] = (EndTime - StartTime) × 1e-3 when MemoryNode is 0
 * (a worker on main RAM: a CPU; other nodes leave the kind unknown). A record
 * "Control: WontUse" makes a wont_use event of each of its Handles before
 * the next task. Other Control records and unknown fields are skipped;
 * '#' lines are comments.
 *
 * Must never: accept a dependency on a job that is not an earlier task, a
 * mode it does not know, counts of Handles, Modes and Sizes that differ, or
 * a number that does not parse; keep a pointer into the buffer.
 */
#include <stdlib.h>
#include <string.h>

#include "lab/build.h"

#define SHOW(s, n) (int)((n) > 40 ? 40 : (n)), (s)

typedef struct {
    const char *s;
    size_t n, line;             /* line 0: absent */
} field_t;

enum {
    F_NAME, F_MODEL, F_JOBID, F_SUBMIT, F_DEPS, F_HANDLES, F_MODES, F_SIZES, F_START, F_END,
    F_GFLOP, F_PRIO, F_WORKER, F_NODE, F_CONTROL, F_DURATIONS, F_COUNT
};
static const char *const field_names[F_COUNT] = {
    "Name", "Model", "JobId", "SubmitOrder", "DependsOn", "Handles", "Modes", "Sizes",
    "StartTime", "EndTime", "GFlop", "Priority", "WorkerId", "MemoryNode", "Control",
    "TesseraDurations",
};

typedef struct {
    field_t f[F_COUNT];
    size_t line;                /* its first line */
    uint64_t key;               /* SubmitOrder, else JobId */
    size_t index;               /* its place in the file */
} record_t;

static int by_key(const void *a, const void *b)
{
    const record_t *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

static int parse_mode(const char *s, size_t n)
{
    int r = 0, w = 0, commute = 0, redux = 0, scratch = 0;
    size_t i = 0;
    while (i <= n) {
        const char *bar = memchr(s + i, '|', n - i);
        size_t e = bar ? (size_t)(bar - s) : n, k = e - i;
        const char *f = s + i;
        if (lab_eq(f, k, "R"))
            r = 1;
        else if (lab_eq(f, k, "W"))
            w = 1;
        else if (lab_eq(f, k, "RW"))
            r = w = 1;
        else if (lab_eq(f, k, "COMMUTE"))
            commute = 1;
        else if (lab_eq(f, k, "REDUX"))
            redux = 1;
        else if (lab_eq(f, k, "SCRATCH"))
            scratch = 1;
        else
            return -1;
        if (!bar)
            break;
        i = e + 1;
    }
    if (commute)
        return TSR_COMMUTE;
    if (redux)
        return TSR_REDUX;
    if (scratch)
        return TSR_SCRATCH;
    return r && w ? TSR_RW : w ? TSR_W : TSR_R;
}

static size_t count_tokens(const field_t *f)
{
    size_t pos = 0, k = 0, tl;
    const char *tok;
    while (lab_token(f->s, f->n, &pos, &tok, &tl))
        k++;
    return k;
}

static int do_task(lab_builder_t *b, const record_t *r)
{
    const field_t *f = r->f;
    const field_t *name = f[F_MODEL].line ? &f[F_MODEL] : &f[F_NAME];
    const field_t *job = &f[F_JOBID];
    uint64_t id;
    if (lab_u64(job->s, job->n, &id) != 0)
        id = r->index;
    uint32_t t;
    int rc = lab_b_task(b, job->s, job->n, id, name->s, name->n, job->line, &t);
    if (rc != TSR_OK)
        return rc;
    tsr_lab_task_t *x = &b->g->task[t];
    if (f[F_PRIO].line && lab_int(f[F_PRIO].s, f[F_PRIO].n, &x->priority) != 0)
        return lab_fail(b, f[F_PRIO].line, "Priority '%.*s' is no integer",
                        SHOW(f[F_PRIO].s, f[F_PRIO].n));
    if (f[F_GFLOP].line) {
        double gf;
        if (lab_double(f[F_GFLOP].s, f[F_GFLOP].n, &gf) != 0)
            return lab_fail(b, f[F_GFLOP].line, "GFlop '%.*s' is no number",
                            SHOW(f[F_GFLOP].s, f[F_GFLOP].n));
        x->flops = gf * 1e9;
    }
    if (f[F_WORKER].line && lab_int(f[F_WORKER].s, f[F_WORKER].n, &x->worker) != 0)
        return lab_fail(b, f[F_WORKER].line, "WorkerId '%.*s' is no integer",
                        SHOW(f[F_WORKER].s, f[F_WORKER].n));
    if (f[F_NODE].line) {
        int node;
        if (lab_int(f[F_NODE].s, f[F_NODE].n, &node) != 0)
            return lab_fail(b, f[F_NODE].line, "MemoryNode '%.*s' is no integer",
                            SHOW(f[F_NODE].s, f[F_NODE].n));
        x->device_kind = node == 0 ? TSR_DEVICE_CPU : -1;
    }
    double ms[2];
    const int tf[2] = {F_START, F_END};
    for (int k = 0; k < 2; k++) {
        const field_t *v = &f[tf[k]];
        ms[k] = -1;
        if (v->line && (lab_double(v->s, v->n, &ms[k]) != 0 || ms[k] < 0))
            return lab_fail(b, v->line, "%s '%.*s' is no time", field_names[tf[k]],
                            SHOW(v->s, v->n));
    }
    if (ms[0] >= 0 && ms[1] >= 0 && ms[1] < ms[0])
        return lab_fail(b, f[F_END].line, "EndTime before StartTime");
    x->start_s = ms[0] >= 0 ? ms[0] * 1e-3 : -1;
    x->end_s = ms[1] >= 0 ? ms[1] * 1e-3 : -1;
    if (f[F_DURATIONS].line) { /* ours: "cpu=MS cuda=MS" */
        const field_t *d = &f[F_DURATIONS];
        size_t pos = 0;
        const char *tok;
        size_t tl;
        while (lab_token(d->s, d->n, &pos, &tok, &tl)) {
            const char *eq = memchr(tok, '=', tl);
            double v;
            if (!eq || lab_double(eq + 1, tl - (size_t)(eq - tok) - 1, &v) != 0 || !(v >= 0) ||
                v > 1e12)
                return lab_fail(b, d->line, "TesseraDurations '%.*s' is no KIND=MS",
                                SHOW(tok, tl));
            int kind = lab_kind_from_name(tok, (size_t)(eq - tok));
            if (kind >= 0) /* a kind this version does not know is skipped */
                x->seconds[kind] = v * 1e-3;
        }
    }
    if (ms[0] >= 0 && ms[1] >= 0 && x->device_kind >= 0)
        x->seconds[x->device_kind] = (ms[1] - ms[0]) * 1e-3;

    /* accesses */
    const field_t *hf = &f[F_HANDLES], *mf = &f[F_MODES], *sf = &f[F_SIZES];
    size_t nh = hf->line ? count_tokens(hf) : 0;
    if (nh && !mf->line)
        return lab_fail(b, hf->line, "Handles without Modes");
    if (mf->line && count_tokens(mf) != nh)
        return lab_fail(b, mf->line, "%zu Modes for %zu Handles", count_tokens(mf), nh);
    if (sf->line && count_tokens(sf) != nh)
        return lab_fail(b, sf->line, "%zu Sizes for %zu Handles", count_tokens(sf), nh);
    size_t hp = 0, mp = 0, sp = 0;
    for (size_t i = 0; i < nh; i++) {
        const char *h, *m, *s = NULL;
        size_t hl, ml, sl = 0;
        uint64_t addr, size = 1;
        lab_token(hf->s, hf->n, &hp, &h, &hl);
        lab_token(mf->s, mf->n, &mp, &m, &ml);
        if (lab_u64_hex(h, hl, &addr) != 0)
            return lab_fail(b, hf->line, "handle '%.*s' is no hexadecimal address",
                            SHOW(h, hl));
        int mode = parse_mode(m, ml);
        if (mode < 0)
            return lab_fail(b, mf->line, "unknown mode '%.*s'", SHOW(m, ml));
        if (sf->line) {
            lab_token(sf->s, sf->n, &sp, &s, &sl);
            if (lab_u64(s, sl, &size) != 0)
                return lab_fail(b, sf->line, "size '%.*s' is no number", SHOW(s, sl));
        }
        uint32_t d;
        if ((rc = lab_b_data(b, h, hl, size, &d)) != TSR_OK ||
            (rc = lab_b_access(b, t, d, mode)) != TSR_OK)
            return rc;
    }

    /* dependencies: on tasks submitted before */
    const field_t *df = &f[F_DEPS];
    size_t pos = 0, tl;
    const char *tok;
    while (df->line && lab_token(df->s, df->n, &pos, &tok, &tl)) {
        uint32_t p;
        if (lab_b_find_task(b, tok, tl, &p) != 0)
            return lab_fail(b, df->line, "DependsOn job '%.*s', no task submitted before",
                            SHOW(tok, tl));
        if ((rc = lab_b_dep(b, t, p)) != TSR_OK)
            return rc;
    }
    return TSR_OK;
}

static int do_wont_use(lab_builder_t *b, const record_t *r)
{
    const field_t *hf = &r->f[F_HANDLES];
    if (!hf->line)
        return lab_fail(b, r->line, "Control: WontUse without Handles");
    size_t pos = 0, hl;
    const char *h;
    while (lab_token(hf->s, hf->n, &pos, &h, &hl)) {
        uint64_t addr;
        uint32_t d;
        if (lab_u64_hex(h, hl, &addr) != 0)
            return lab_fail(b, hf->line, "handle '%.*s' is no hexadecimal address",
                            SHOW(h, hl));
        int rc = lab_b_data(b, h, hl, 1, &d);
        if (rc == TSR_OK)
            rc = lab_b_event(b, (uint32_t)b->g->ntasks, d, TSR_LAB_WONT_USE);
        if (rc != TSR_OK)
            return rc;
    }
    return TSR_OK;
}

/* Close the record being read: check it has a key and keep it. */
static int keep(lab_builder_t *b, record_t *r, record_t **all, size_t *n, size_t *cap)
{
    const field_t *c = &r->f[F_CONTROL];
    int wont_use = c->line && lab_eq(c->s, c->n, "WontUse");
    if (c->line && !wont_use)
        return TSR_OK;          /* another control record: skipped */
    if (!r->f[F_JOBID].line && !wont_use)
        return lab_fail(b, r->line, "record without JobId");
    const field_t *k = r->f[F_SUBMIT].line ? &r->f[F_SUBMIT] : &r->f[F_JOBID];
    if (k->line && lab_u64(k->s, k->n, &r->key) != 0) {
        /* a JobId with an MPI prefix ("1_42"): its trailing number */
        size_t i = k->n;
        while (i > 0 && k->s[i - 1] >= '0' && k->s[i - 1] <= '9')
            i--;
        if (k == &r->f[F_SUBMIT] || lab_u64(k->s + i, k->n - i, &r->key) != 0)
            return lab_fail(b, k->line, "%s '%.*s' is no number",
                            k == &r->f[F_SUBMIT] ? "SubmitOrder" : "JobId", SHOW(k->s, k->n));
    }
    if (!k->line)
        r->key = *n ? (*all)[*n - 1].key : 0; /* a WontUse without order: where it is */
    if (*n == *cap) {
        if (*n >= LAB_MAX_COUNT)
            return lab_fail(b, r->line, "more than %zu records", LAB_MAX_COUNT);
        size_t c2 = *cap ? 2 * *cap : 64;
        record_t *p = realloc(*all, c2 * sizeof *p);
        if (!p)
            return lab_nomem(b);
        *all = p, *cap = c2;
    }
    r->index = *n;
    (*all)[(*n)++] = *r;
    return TSR_OK;
}

int lab_read_rec(lab_builder_t *b, const char *buf, size_t len)
{
    lab_lines_t l;
    lab_lines_init(&l, buf, len);
    b->g->time_unit_s = 1e-3;
    record_t *all = NULL, cur;
    size_t n = 0, cap = 0;
    int open = 0, rc = TSR_OK;
    memset(&cur, 0, sizeof cur);
    while (rc == TSR_OK && lab_next_line(&l)) {
        size_t i = 0;
        while (i < l.n && lab_space(l.s[i]))
            i++;
        if (i == l.n) {         /* a blank line ends a record */
            if (open)
                rc = keep(b, &cur, &all, &n, &cap);
            open = 0;
            memset(&cur, 0, sizeof cur);
            continue;
        }
        if (l.s[0] == '#' || l.s[0] == '+')
            continue;           /* a comment; a continuation line */
        size_t k = 0;
        while (k < l.n && ((l.s[k] >= 'A' && l.s[k] <= 'Z') || (l.s[k] >= 'a' && l.s[k] <= 'z') ||
                           (l.s[k] >= '0' && l.s[k] <= '9') || l.s[k] == '_'))
            k++;
        if (k == 0 || k >= l.n || l.s[k] != ':') {
            rc = lab_fail(b, l.line, "'%.*s' is no 'Field: value' line", SHOW(l.s, l.n));
            break;
        }
        if (!open)
            cur.line = l.line;
        open = 1;
        size_t v = k + 1, e = l.n;
        while (v < e && lab_space(l.s[v]))
            v++;
        while (e > v && lab_space(l.s[e - 1]))
            e--;
        for (int f = 0; f < F_COUNT; f++)
            if (lab_eq(l.s, k, field_names[f])) {
                cur.f[f] = (field_t){l.s + v, e - v, l.line};
                break;
            }
    }
    if (rc == TSR_OK && open)
        rc = keep(b, &cur, &all, &n, &cap);
    if (rc == TSR_OK && n)
        qsort(all, n, sizeof *all, by_key);
    for (size_t i = 0; rc == TSR_OK && i < n; i++)
        rc = all[i].f[F_CONTROL].line ? do_wont_use(b, &all[i]) : do_task(b, &all[i]);
    free(all);
    return rc;
}
