/* lab/read_stg.c — the reader of the Standard Task Graph set (Kasahara
 * lab): the first line is n, the tasks without the dummy entry and exit;
 * then n + 2 lines "id time npred pred...", ids 0 to n + 1 in order; lines
 * starting with '#' (the set puts its notes at the end) and blank lines are
 * skipped.
 *
 * Every line is a task named "t<id>", the dummy entry (0) and exit (n + 1)
 * kept as tasks of zero time, so that the graph keeps the set's shape (a
 * single source and sink). Durations: seconds[CPU] = time × 1e-3 (a unit is
 * a millisecond, time_unit_s 1e-3), seconds[CUDA] unknown (-1). Each pred is
 * an explicit dependency.
 *
 * The variant with communication costs is told apart by its task lines,
 * "id time npred" followed by npred lines "pred cost": the first task line
 * with npred > 0 says which (3 numbers: costs; 3 + npred: plain). An edge of
 * cost c > 0 becomes a data item "p->id" of c bytes written (W) by p and
 * read (R) by id; an edge of cost 0 an explicit dependency.
 *
 * Must never: accept a task line out of order, a pred that is no task, fewer
 * or more task lines than n + 2, or a count that does not parse.
 */
#include <stdio.h>
#include <string.h>

#include "lab/build.h"

#define SHOW(s, n) (int)((n) > 40 ? 40 : (n)), (s)

/* The next line that is not blank or a comment: 1, or 0 at the end. */
static int next(lab_lines_t *l)
{
    while (lab_next_line(l)) {
        size_t i = 0;
        while (i < l->n && lab_space(l->s[i]))
            i++;
        if (i < l->n && l->s[i] != '#')
            return 1;
    }
    return 0;
}

/* The line's numbers into v[0..*k) (at most max); -1 when one is no
 * number. */
static int numbers(lab_builder_t *b, const lab_lines_t *l, uint64_t *v, size_t max, size_t *k)
{
    size_t pos = 0, tl;
    const char *tok;
    *k = 0;
    while (lab_token(l->s, l->n, &pos, &tok, &tl)) {
        if (*k == max)
            return lab_fail(b, l->line, "more numbers than the line should have");
        if (lab_u64(tok, tl, &v[*k]) != 0)
            return lab_fail(b, l->line, "'%.*s' is no non-negative integer", SHOW(tok, tl));
        (*k)++;
    }
    return TSR_OK;
}

static int edge(lab_builder_t *b, size_t line, uint32_t t, uint64_t pred, uint64_t cost,
                uint64_t ntotal)
{
    if (pred >= ntotal)
        return lab_fail(b, line, "pred %llu is no task (0 to %llu)", (unsigned long long)pred,
                        (unsigned long long)(ntotal - 1));
    uint32_t p = (uint32_t)pred;
    if (cost == 0)
        return lab_b_dep(b, t, p);
    char name[48];
    int n = snprintf(name, sizeof name, "%llu->%llu", (unsigned long long)pred,
                     (unsigned long long)b->g->task[t].id);
    uint32_t d;
    int rc = lab_b_data(b, name, (size_t)n, cost, &d);
    if (rc == TSR_OK)
        rc = lab_b_access(b, p, d, TSR_W);
    if (rc == TSR_OK)
        rc = lab_b_access(b, t, d, TSR_R);
    if (rc == TSR_OK)
        rc = lab_b_order(b, t, p);
    return rc;
}

int lab_read_stg(lab_builder_t *b, const char *buf, size_t len)
{
    lab_lines_t l;
    lab_lines_init(&l, buf, len);
    b->g->time_unit_s = 1e-3;
    uint64_t v[3];
    size_t k;
    int rc;
    if (!next(&l))
        return lab_fail(b, 1, "empty: no task count");
    if ((rc = numbers(b, &l, v, 1, &k)) != TSR_OK)
        return rc;
    if (k != 1)
        return lab_fail(b, l.line, "the first line is not the task count");
    if (v[0] > LAB_MAX_COUNT - 2)
        return lab_fail(b, l.line, "%llu tasks: more than %zu", (unsigned long long)v[0],
                        LAB_MAX_COUNT - 2);
    uint64_t ntotal = v[0] + 2;
    int comm = -1; /* unknown until a task line with preds */
    size_t last = l.line;
    for (uint64_t id = 0; id < ntotal; id++) {
        if (!next(&l))
            return lab_fail(b, last, "%llu task lines of %llu (n + 2): the file ends",
                            (unsigned long long)id, (unsigned long long)ntotal);
        last = l.line;
        /* id time npred, then preds (plain) or nothing (costs) */
        size_t pos = 0, tl;
        const char *tok[3];
        size_t tlen[3];
        uint64_t num[3];
        double time;
        for (int i = 0; i < 3; i++) {
            if (!lab_token(l.s, l.n, &pos, &tok[i], &tlen[i]))
                return lab_fail(b, l.line, "a task line is 'id time npred pred...'");
        }
        if (lab_u64(tok[0], tlen[0], &num[0]) != 0 || lab_u64(tok[2], tlen[2], &num[2]) != 0)
            return lab_fail(b, l.line, "a task line is 'id time npred pred...'");
        if (lab_double(tok[1], tlen[1], &time) != 0 || time < 0)
            return lab_fail(b, l.line, "time '%.*s' is no non-negative number",
                            SHOW(tok[1], tlen[1]));
        if (num[0] != id)
            return lab_fail(b, l.line, "task %llu where task %llu should be",
                            (unsigned long long)num[0], (unsigned long long)id);
        if (num[2] >= ntotal)
            return lab_fail(b, l.line, "%llu preds: more than the tasks",
                            (unsigned long long)num[2]);
        char name[32];
        int nl = snprintf(name, sizeof name, "t%llu", (unsigned long long)id);
        uint32_t t;
        if ((rc = lab_b_task_id(b, id, name, (size_t)nl, l.line, &t)) != TSR_OK)
            return rc;
        b->g->task[t].seconds[TSR_DEVICE_CPU] = time * 1e-3;
        size_t rest = 0, p2 = pos;
        const char *x;
        while (lab_token(l.s, l.n, &p2, &x, &tl))
            rest++;
        if (num[2] > 0 && comm < 0)
            comm = rest == 0;
        if (comm != 1 || num[2] == 0) {
            if (rest != num[2])
                return lab_fail(b, l.line, "%llu preds announced, %zu given",
                                (unsigned long long)num[2], rest);
            for (uint64_t i = 0; i < num[2]; i++) {
                uint64_t pred;
                lab_token(l.s, l.n, &pos, &x, &tl);
                if (lab_u64(x, tl, &pred) != 0)
                    return lab_fail(b, l.line, "pred '%.*s' is no task id", SHOW(x, tl));
                if ((rc = edge(b, l.line, t, pred, 0, ntotal)) != TSR_OK)
                    return rc;
            }
            continue;
        }
        if (rest != 0)
            return lab_fail(b, l.line, "a task line with costs is 'id time npred'");
        for (uint64_t i = 0; i < num[2]; i++) {
            if (!next(&l))
                return lab_fail(b, last, "the file ends in the preds of task %llu",
                                (unsigned long long)id);
            last = l.line;
            if ((rc = numbers(b, &l, v, 2, &k)) != TSR_OK)
                return rc;
            if (k != 2)
                return lab_fail(b, l.line, "a pred line is 'pred cost'");
            if ((rc = edge(b, l.line, t, v[0], v[1], ntotal)) != TSR_OK)
                return rc;
        }
    }
    if (next(&l))
        return lab_fail(b, l.line, "more than the %llu task lines (n + 2)",
                        (unsigned long long)ntotal);
    return TSR_OK;
}
