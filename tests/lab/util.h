/* tests/lab/util.h — what the lab's suites share: reading a graph from a
 * string (from a buffer of exactly its length, so that ASan sees a read
 * past it), expecting a refusal at a line, and looking at tasks, accesses
 * and dependencies by name.
 *
 * Must never: compare against the code's own output; every expected value
 * is written in the test.
 */
#ifndef TSR_TESTS_LAB_UTIL_H
#define TSR_TESTS_LAB_UTIL_H

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab/build.h"
#include "lab/graph.h"

/* A copy of s[0..n) in a buffer of exactly n bytes. */
static inline char *exact_copy(const char *s, size_t n)
{
    char *p = malloc(n ? n : 1);
    cr_assert_not_null(p);
    memcpy(p, s, n);
    return p;
}

static inline tsr_lab_graph_t *read_ok(const char *text, const char *format)
{
    char err[512];
    size_t n = strlen(text);
    char *buf = exact_copy(text, n);
    tsr_lab_graph_t *g = NULL;
    int rc = tsr_lab_read_buffer(buf, n, format, "t.in", &g, err, sizeof err);
    free(buf);
    cr_assert_eq(rc, TSR_OK, "read failed (%d): %s", rc, err);
    cr_assert_not_null(g);
    return g;
}

/* The read fails with TSR_EINVAL and a message naming "t.in:LINE:" (line 0:
 * just "t.in:") that contains `says`. */
static inline void read_bad(const char *text, const char *format, size_t line, const char *says)
{
    char err[512], want[64];
    size_t n = strlen(text);
    char *buf = exact_copy(text, n);
    tsr_lab_graph_t *g = (tsr_lab_graph_t *)1;
    int rc = tsr_lab_read_buffer(buf, n, format, "t.in", &g, err, sizeof err);
    free(buf);
    cr_assert_eq(rc, TSR_EINVAL, "read of %s succeeded or failed otherwise (%d): %s", text, rc,
                 err);
    cr_assert_null(g);
    if (line)
        snprintf(want, sizeof want, "t.in:%zu:", line);
    else
        snprintf(want, sizeof want, "t.in:");
    cr_assert_not_null(strstr(err, want), "'%s' does not name %s", err, want);
    if (says)
        cr_assert_not_null(strstr(err, says), "'%s' does not say '%s'", err, says);
}

/* Every prefix of text read from a buffer of its size: no crash, no read
 * past it (under ASan), and either a graph or a message. */
static inline void read_prefixes(const char *text, const char *format)
{
    size_t n = strlen(text);
    for (size_t k = 0; k <= n; k++) {
        char err[512];
        char *buf = exact_copy(text, k);
        tsr_lab_graph_t *g = NULL;
        int rc = tsr_lab_read_buffer(buf, k, format, "t.in", &g, err, sizeof err);
        free(buf);
        if (rc == TSR_OK)
            tsr_lab_free(g);
        else
            cr_assert(rc == TSR_EINVAL && err[0], "prefix %zu: rc %d, '%s'", k, rc, err);
    }
}

static inline uint32_t task_named(const tsr_lab_graph_t *g, const char *name)
{
    for (size_t i = 0; i < g->ntasks; i++)
        if (strcmp(g->task[i].name, name) == 0)
            return (uint32_t)i;
    cr_assert_fail("no task named %s", name);
    return 0;
}

static inline uint32_t data_named(const tsr_lab_graph_t *g, const char *name)
{
    for (size_t i = 0; i < g->ndata; i++)
        if (strcmp(g->data[i].name, name) == 0)
            return (uint32_t)i;
    cr_assert_fail("no data item named %s", name);
    return 0;
}

/* Task t's accesses as "NAME:MODE:SIZE,..." in its order. */
static inline void accesses_of(const tsr_lab_graph_t *g, uint32_t t, char *out, size_t n)
{
    const tsr_lab_task_t *x = &g->task[t];
    size_t k = 0;
    out[0] = 0;
    for (uint32_t a = 0; a < x->naccess && k < n; a++) {
        const tsr_lab_access_t *ac = &g->access[x->access_off + a];
        k += (size_t)snprintf(out + k, n - k, "%s%s:%s:%llu", a ? "," : "",
                              g->data[ac->data].name, lab_mode_name(ac->mode),
                              (unsigned long long)g->data[ac->data].size);
    }
}

/* Task t's explicit dependencies as "id,id,..." (ascending task order). */
static inline void deps_of(const tsr_lab_graph_t *g, uint32_t t, char *out, size_t n)
{
    const tsr_lab_task_t *x = &g->task[t];
    size_t k = 0;
    out[0] = 0;
    for (uint32_t d = 0; d < x->ndeps && k < n; d++)
        k += (size_t)snprintf(out + k, n - k, "%s%llu", d ? "," : "",
                              (unsigned long long)g->task[g->dep[x->dep_off + d]].id);
}

/* Every predecessor of task t (explicit and implied), as ids. */
static inline void all_deps_of(const tsr_lab_graph_t *g, uint32_t t, char *out, size_t n)
{
    uint32_t *off, *list;
    cr_assert_eq(lab_all_deps(g, &off, &list), TSR_OK);
    size_t k = 0;
    out[0] = 0;
    for (uint32_t d = off[t]; d < off[t + 1] && k < n; d++)
        k += (size_t)snprintf(out + k, n - k, "%s%llu", d > off[t] ? "," : "",
                              (unsigned long long)g->task[list[d]].id);
    free(off);
    free(list);
}

#define ASSERT_ACCESSES(g, t, want)                                                  \
    do {                                                                             \
        char got_[1024];                                                             \
        accesses_of(g, t, got_, sizeof got_);                                        \
        cr_assert_str_eq(got_, want, "task %u accesses", (unsigned)(t));              \
    } while (0)
#define ASSERT_DEPS(g, t, want)                                                      \
    do {                                                                             \
        char got_[1024];                                                             \
        deps_of(g, t, got_, sizeof got_);                                            \
        cr_assert_str_eq(got_, want, "task %u explicit deps", (unsigned)(t));         \
    } while (0)
#define ASSERT_ALL_DEPS(g, t, want)                                                  \
    do {                                                                             \
        char got_[1024];                                                             \
        all_deps_of(g, t, got_, sizeof got_);                                        \
        cr_assert_str_eq(got_, want, "task %u all deps", (unsigned)(t));              \
    } while (0)

#endif
