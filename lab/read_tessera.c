/* lab/read_tessera.c — the reader of "tessera-graph 1" (docs/lab.md), the
 * file runtime/record.c writes.
 *
 * task lines become tasks (ID, NAME, prio, flops); each handle of an access
 * becomes the data item named by its decimal id (the largest size seen);
 * deps= are kept as explicit dependencies (they are the ones the accesses
 * imply: duplicates of what the modes say, harmless); ran lines give the
 * worker, the device kind (cpu, cuda; sim and others: -1), the start and end
 * in seconds and, when its status is 0 and the kind is known, seconds[kind];
 * wont_use H and invalidate H become events before the next task (a handle
 * no task used before becomes an item of 1 byte until a task gives its size).
 * Unknown keys and unknown lowercase line kinds are skipped (later versions
 * add them); blank lines and lines starting with '#' too.
 *
 * Must never: accept a dependency on a task not yet defined (a record
 * lists a task before any task that follows it), a ran line of an unknown
 * task or a second one of a task, a mode it does not know or a number that does not parse.
 */
#include <stdio.h>
#include <string.h>

#include "lab/build.h"

int lab_mode_from_name(const char *s, size_t n)
{
    if (lab_eq(s, n, "R"))
        return TSR_R;
    if (lab_eq(s, n, "W"))
        return TSR_W;
    if (lab_eq(s, n, "RW"))
        return TSR_RW;
    if (lab_eq(s, n, "COMMUTE"))
        return TSR_COMMUTE;
    if (lab_eq(s, n, "REDUX"))
        return TSR_REDUX;
    if (lab_eq(s, n, "SCRATCH"))
        return TSR_SCRATCH;
    return -1;
}

const char *lab_mode_name(int mode)
{
    switch (mode) {
    case TSR_R: return "R";
    case TSR_W: return "W";
    case TSR_RW: return "RW";
    case TSR_COMMUTE: return "COMMUTE";
    case TSR_REDUX: return "REDUX";
    case TSR_SCRATCH: return "SCRATCH";
    default: return "?";
    }
}

#define SHOW(s, n) (int)((n) > 40 ? 40 : (n)), (s)

/* The next comma-separated item of v[*pos .. n). */
static int next_item(const char *v, size_t n, size_t *pos, const char **it, size_t *len)
{
    if (*pos > n || (*pos == n && n > 0 && v[n - 1] != ','))
        return 0;
    if (n == 0)
        return 0;
    const char *c = memchr(v + *pos, ',', n - *pos);
    size_t e = c ? (size_t)(c - v) : n;
    *it = v + *pos, *len = e - *pos;
    *pos = e + 1;
    return 1;
}

/* seconds=cpu:S,cuda:S — the task's durations per device kind */
static int seconds_list(lab_builder_t *b, size_t line, tsr_lab_task_t *x, const char *v,
                        size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && v[j] != ',')
            j++;
        const char *colon = memchr(v + i, ':', j - i);
        if (!colon)
            return lab_fail(b, line, "seconds '%.*s' is no KIND:SECONDS", SHOW(v + i, j - i));
        size_t kl = (size_t)(colon - (v + i));
        int kind = lab_kind_from_name(v + i, kl);
        double sec;
        if (lab_double(colon + 1, j - i - kl - 1, &sec) != 0 || !(sec >= 0) ||
            sec > LAB_MAX_SECONDS)
            return lab_fail(b, line, "seconds '%.*s' is no duration", SHOW(v + i, j - i));
        if (kind >= 0) /* a kind this version does not know is skipped */
            x->seconds[kind] = sec;
        i = j + 1;
    }
    return TSR_OK;
}

static int access_list(lab_builder_t *b, size_t line, uint32_t task, const char *v, size_t n)
{
    size_t pos = 0, len;
    const char *it;
    while (next_item(v, n, &pos, &it, &len)) {
        const char *c1 = memchr(it, ':', len);
        const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - it)) : NULL;
        if (!c2)
            return lab_fail(b, line, "access '%.*s' is not HANDLE:MODE:SIZE", SHOW(it, len));
        uint64_t h, size;
        size_t hl = (size_t)(c1 - it), ml = (size_t)(c2 - c1 - 1),
               sl = len - (size_t)(c2 + 1 - it);
        if (lab_u64(it, hl, &h) != 0)
            return lab_fail(b, line, "access '%.*s': handle is no number", SHOW(it, len));
        int mode = lab_mode_from_name(c1 + 1, ml);
        if (mode < 0)
            return lab_fail(b, line, "access '%.*s': unknown mode '%.*s'", SHOW(it, len),
                            SHOW(c1 + 1, ml));
        if (lab_u64(c2 + 1, sl, &size) != 0)
            return lab_fail(b, line, "access '%.*s': size is no number", SHOW(it, len));
        uint32_t d;
        int rc = lab_b_data(b, it, hl, size, &d);
        if (rc == TSR_OK)
            rc = lab_b_access(b, task, d, mode);
        if (rc != TSR_OK)
            return rc;
    }
    return TSR_OK;
}

static int dep_list(lab_builder_t *b, size_t line, uint32_t task, const char *v, size_t n)
{
    size_t pos = 0, len;
    const char *it;
    while (next_item(v, n, &pos, &it, &len)) {
        uint64_t id;
        uint32_t p;
        if (lab_u64(it, len, &id) != 0)
            return lab_fail(b, line, "dependency '%.*s' is no task id", SHOW(it, len));
        if (lab_b_find_task_id(b, id, &p) != 0)
            return lab_fail(b, line, "dependency on task %llu, not defined before",
                            (unsigned long long)id);
        if (p == task)
            return lab_fail(b, line, "task %llu depends on itself", (unsigned long long)id);
        int rc = lab_b_dep(b, task, p);
        if (rc != TSR_OK)
            return rc;
    }
    return TSR_OK;
}

static int task_line(lab_builder_t *b, size_t line, const char *s, size_t n, size_t pos)
{
    const char *tok, *name;
    size_t tl, nl;
    uint64_t id;
    if (!lab_token(s, n, &pos, &tok, &tl) || lab_u64(tok, tl, &id) != 0)
        return lab_fail(b, line, "task line without a numeric ID");
    if (!lab_token(s, n, &pos, &name, &nl))
        return lab_fail(b, line, "task %llu without a name", (unsigned long long)id);
    uint32_t t;
    int rc = lab_b_task_id(b, id, name, nl, line, &t);
    if (rc != TSR_OK)
        return rc;
    tsr_lab_task_t *x = &b->g->task[t];
    size_t kl, vl;
    const char *v;
    while ((rc = lab_key_value(s, n, &pos, &tok, &kl, &v, &vl)) != 0) {
        if (rc < 0)
            return lab_fail(b, line, "'%.*s' is no key=value", SHOW(tok, kl));
        if (lab_eq(tok, kl, "prio")) {
            if (lab_int(v, vl, &x->priority) != 0)
                return lab_fail(b, line, "prio '%.*s' is no integer", SHOW(v, vl));
        } else if (lab_eq(tok, kl, "flops")) {
            if (lab_double(v, vl, &x->flops) != 0)
                return lab_fail(b, line, "flops '%.*s' is no number", SHOW(v, vl));
        } else if (lab_eq(tok, kl, "bytes")) {
            uint64_t bytes;
            if (lab_u64(v, vl, &bytes) != 0)
                return lab_fail(b, line, "bytes '%.*s' is no number", SHOW(v, vl));
        } else if (lab_eq(tok, kl, "access")) {
            if ((rc = access_list(b, line, t, v, vl)) != TSR_OK)
                return rc;
        } else if (lab_eq(tok, kl, "deps")) {
            if ((rc = dep_list(b, line, t, v, vl)) != TSR_OK)
                return rc;
        } else if (lab_eq(tok, kl, "seconds")) {
            if ((rc = seconds_list(b, line, x, v, vl)) != TSR_OK)
                return rc;
        }
        x = &b->g->task[t]; /* the arrays may have moved */
    }
    return TSR_OK;
}

static int ran_line(lab_builder_t *b, size_t line, const char *s, size_t n, size_t pos)
{
    const char *tok;
    size_t tl;
    uint64_t id, start = 0, end = 0;
    int have_start = 0, have_end = 0, status = 0;
    uint32_t t;
    if (!lab_token(s, n, &pos, &tok, &tl) || lab_u64(tok, tl, &id) != 0)
        return lab_fail(b, line, "ran line without a numeric ID");
    if (lab_b_find_task_id(b, id, &t) != 0)
        return lab_fail(b, line, "ran: no task %llu before", (unsigned long long)id);
    tsr_lab_task_t *x = &b->g->task[t];
    if (x->start_s >= 0 || x->end_s >= 0 || x->worker >= 0 || x->device_kind >= 0)
        return lab_fail(b, line, "task %llu ran twice", (unsigned long long)id);
    size_t kl, vl;
    const char *v;
    int kv;
    while ((kv = lab_key_value(s, n, &pos, &tok, &kl, &v, &vl)) != 0) {
        if (kv < 0)
            return lab_fail(b, line, "'%.*s' is no key=value", SHOW(tok, kl));
        if (lab_eq(tok, kl, "worker")) {
            if (lab_int(v, vl, &x->worker) != 0)
                return lab_fail(b, line, "worker '%.*s' is no integer", SHOW(v, vl));
        } else if (lab_eq(tok, kl, "device")) {
            x->device_kind = lab_kind_from_name(v, vl);
        } else if (lab_eq(tok, kl, "start_ns")) {
            if (lab_u64(v, vl, &start) != 0)
                return lab_fail(b, line, "start_ns '%.*s' is no number", SHOW(v, vl));
            have_start = 1;
        } else if (lab_eq(tok, kl, "end_ns")) {
            if (lab_u64(v, vl, &end) != 0)
                return lab_fail(b, line, "end_ns '%.*s' is no number", SHOW(v, vl));
            have_end = 1;
        } else if (lab_eq(tok, kl, "status")) {
            if (lab_int(v, vl, &status) != 0)
                return lab_fail(b, line, "status '%.*s' is no integer", SHOW(v, vl));
        }
    }
    if (have_start && have_end && end < start)
        return lab_fail(b, line, "ran: end_ns before start_ns");
    if (have_start)
        x->start_s = (double)start * 1e-9;
    if (have_end)
        x->end_s = (double)end * 1e-9;
    if (have_start && have_end && status == 0 && x->device_kind >= 0)
        x->seconds[x->device_kind] = (double)(end - start) * 1e-9;
    return TSR_OK;
}

static int event_line(lab_builder_t *b, size_t line, const char *s, size_t n, size_t pos,
                      int kind)
{
    const char *tok;
    size_t tl;
    uint64_t h;
    uint32_t d;
    if (!lab_token(s, n, &pos, &tok, &tl) || lab_u64(tok, tl, &h) != 0)
        return lab_fail(b, line, "%s without a numeric handle",
                        kind == TSR_LAB_WONT_USE ? "wont_use" : "invalidate");
    /* a handle no task used yet is an item of its own (1 byte until a task
     * says its size) */
    int rc = lab_b_data(b, tok, tl, 1, &d);
    return rc == TSR_OK ? lab_b_event(b, (uint32_t)b->g->ntasks, d, kind) : rc;
}

int lab_read_tessera(lab_builder_t *b, const char *buf, size_t len)
{
    lab_lines_t l;
    lab_lines_init(&l, buf, len);
    b->g->time_unit_s = 1e-9;
    if (!lab_next_line(&l))
        return lab_fail(b, 1, "empty: no 'tessera-graph 1' line");
    {
        size_t pos = 0, tl;
        const char *tok;
        if (!lab_token(l.s, l.n, &pos, &tok, &tl) || !lab_eq(tok, tl, "tessera-graph"))
            return lab_fail(b, 1, "not a tessera graph (no 'tessera-graph 1' line)");
        if (!lab_token(l.s, l.n, &pos, &tok, &tl) || !lab_eq(tok, tl, "1"))
            return lab_fail(b, 1, "tessera-graph version '%.*s' is not 1",
                            SHOW(tl ? tok : "", tl));
    }
    while (lab_next_line(&l)) {
        size_t pos = 0, kl;
        const char *kw;
        if (!lab_token(l.s, l.n, &pos, &kw, &kl) || kw[0] == '#')
            continue;
        int rc;
        if (lab_eq(kw, kl, "task"))
            rc = task_line(b, l.line, l.s, l.n, pos);
        else if (lab_eq(kw, kl, "ran"))
            rc = ran_line(b, l.line, l.s, l.n, pos);
        else if (lab_eq(kw, kl, "wont_use"))
            rc = event_line(b, l.line, l.s, l.n, pos, TSR_LAB_WONT_USE);
        else if (lab_eq(kw, kl, "invalidate"))
            rc = event_line(b, l.line, l.s, l.n, pos, TSR_LAB_INVALIDATE);
        else {
            for (size_t i = 0; i < kl; i++)
                if (!((kw[i] >= 'a' && kw[i] <= 'z') || kw[i] == '_'))
                    return lab_fail(b, l.line, "'%.*s' is no line kind", SHOW(kw, kl));
            rc = TSR_OK; /* a later version's line */
        }
        if (rc != TSR_OK)
            return rc;
    }
    return TSR_OK;
}
