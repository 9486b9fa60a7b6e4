/* lab/build.h — what the lab's readers share (lab/graph.c): a builder that
 * collects tasks, data items, accesses and dependencies in any order and
 * makes them a tsr_lab_graph_t (topological order, cycle check, flat
 * arrays); line splitting and number parsing over a buffer with no NUL;
 * the dependencies the sequential-task-flow rules imply.
 *
 * Must never: read past a (pointer, length) it is given, keep a pointer into
 * the reader's buffer, or let a count pass LAB_MAX_COUNT (every index fits a
 * uint32 and every size computation fits a size_t).
 */
#ifndef TSR_LAB_BUILD_H
#define TSR_LAB_BUILD_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "lab/graph.h"

/* The most tasks, data items, accesses, dependencies or events one graph
 * may hold (each): far below UINT32_MAX, so that indices and the products
 * of counts by element sizes cannot overflow. */
#define LAB_MAX_COUNT ((size_t)1 << 26)

/* ---- a hash table from byte strings to indices --------------------------- */
typedef struct lab_map_ent {
    uint64_t hash;
    char *key;                  /* owned copy; NULL: empty slot */
    uint32_t klen;
    uint32_t val;
} lab_map_ent_t;

typedef struct lab_map {
    lab_map_ent_t *ent;
    size_t cap, n;              /* cap: a power of two, or 0 */
} lab_map_t;

/* 0 and *val when found, -1 when not. */
int lab_map_get(const lab_map_t *m, const char *key, size_t klen, uint32_t *val);
/* Add key -> val (key not yet there). TSR_OK or TSR_ENOMEM. */
int lab_map_put(lab_map_t *m, const char *key, size_t klen, uint32_t val);
void lab_map_free(lab_map_t *m);

/* ---- the builder --------------------------------------------------------- */
typedef struct lab_pending_access {
    uint32_t task, data;
    int mode;
} lab_pending_access_t;

typedef struct lab_edge {
    uint32_t task, pred;
    int keep;                   /* 1: an explicit dependency; 0: order only */
} lab_edge_t;

typedef struct lab_builder {
    tsr_lab_graph_t *g;         /* tasks and data as they come; access, dep
                                   and event arrays are filled by finish */
    const char *what;           /* the input's name, for messages */
    char *err;
    size_t errlen;
    size_t cap_task, cap_data;
    size_t *line;               /* per task: the line that made it */
    lab_pending_access_t *acc;
    size_t nacc, cap_acc;
    lab_edge_t *edge;
    size_t nedge, cap_edge;
    tsr_lab_event_t *ev;
    size_t nev, cap_ev;
    lab_map_t tasks, data;      /* key -> index */
} lab_builder_t;

/* An empty graph of format `format`; TSR_OK or TSR_ENOMEM (message set). */
int lab_b_init(lab_builder_t *b, const char *format, const char *what, char *err,
               size_t errlen);
/* TSR_EINVAL with "WHAT:LINE: message" (line 0: "WHAT: message") in err and
 * in the thread's error message. */
int lab_fail(lab_builder_t *b, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int lab_nomem(lab_builder_t *b);

/* A new task known by `key` (unique: a second task of one key is an
 * error naming `line`), with the source's id and name; defaults: unknown
 * flops, durations, worker and run. */
int lab_b_task(lab_builder_t *b, const char *key, size_t klen, uint64_t id, const char *name,
               size_t nlen, size_t line, uint32_t *out);
/* The same keyed by the decimal id. */
int lab_b_task_id(lab_builder_t *b, uint64_t id, const char *name, size_t nlen, size_t line,
                  uint32_t *out);
int lab_b_find_task(const lab_builder_t *b, const char *key, size_t klen, uint32_t *out);
int lab_b_find_task_id(const lab_builder_t *b, uint64_t id, uint32_t *out);
/* The data item named `name`, made with `size` (0 becomes 1) when new; an
 * item met again keeps the larger of its sizes. */
int lab_b_data(lab_builder_t *b, const char *name, size_t nlen, uint64_t size, uint32_t *out);
int lab_b_find_data(const lab_builder_t *b, const char *name, size_t nlen, uint32_t *out);
int lab_b_access(lab_builder_t *b, uint32_t task, uint32_t data, int mode);
/* task follows pred (any two tasks: the order is checked by finish). */
int lab_b_dep(lab_builder_t *b, uint32_t task, uint32_t pred);
/* task comes after pred in the order, without an explicit dependency (the
 * accesses imply it: pred writes an item task reads). */
int lab_b_order(lab_builder_t *b, uint32_t task, uint32_t pred);
/* An event before task `before` (the current task count: after the last). */
int lab_b_event(lab_builder_t *b, uint32_t before, uint32_t data, int kind);
/* Order the tasks (stable: a task keeps its place unless a predecessor comes
 * after it in the file), refuse a cycle naming a task on it, and hand the
 * graph over. The builder is emptied either way. */
int lab_b_finish(lab_builder_t *b, tsr_lab_graph_t **out);
/* The longest task duration a graph may give (seconds, about 32 years):
 * every reader's durations are held to it when the graph is finished, so
 * that whatever one format reads, the writers' output reads back. */
#define LAB_MAX_SECONDS 1e9
void lab_b_discard(lab_builder_t *b);

/* ---- lines and numbers --------------------------------------------------- */
typedef struct lab_lines {
    const char *p, *end;
    size_t line;                /* of the line last returned, from 1 */
    const char *s;              /* that line, without its "\n" or "\r\n" */
    size_t n;
} lab_lines_t;

void lab_lines_init(lab_lines_t *l, const char *buf, size_t len);
/* 1 and the next line in l->s/l->n, 0 at the end. */
int lab_next_line(lab_lines_t *l);

/* Whitespace (blank, tab, \r, \v, \f). */
int lab_space(char c);
/* The next whitespace-separated token of s[*pos .. n): 1 and its bounds, 0
 * when none is left. */
int lab_token(const char *s, size_t n, size_t *pos, const char **tok, size_t *tlen);
/* Whole-string conversions: 0 and the value, -1 when s[0..n) is not one
 * (empty, trailing characters, out of range, not finite). */
int lab_u64(const char *s, size_t n, uint64_t *v);
int lab_u64_hex(const char *s, size_t n, uint64_t *v);
int lab_int(const char *s, size_t n, int *v);
int lab_double(const char *s, size_t n, double *v);
/* s[0..n) equals the NUL-terminated word. */
int lab_eq(const char *s, size_t n, const char *word);
/* The next token of s[*pos .. n) as KEY=VALUE: 1 and the key's and the
 * value's bounds; 0 when none is left; -1 (with *key, *klen the token) when
 * the token has no '='. */
int lab_key_value(const char *s, size_t n, size_t *pos, const char **key, size_t *klen,
                  const char **val, size_t *vlen);
/* "cpu" -> TSR_DEVICE_CPU, "cuda" -> TSR_DEVICE_CUDA; -1 otherwise. */
int lab_kind_from_name(const char *s, size_t n);
/* "R", "W", "RW", "COMMUTE", "REDUX", "SCRATCH" -> TSR_R…; -1 otherwise. */
int lab_mode_from_name(const char *s, size_t n);
/* The name of a mode as above ("?" for none of them). */
const char *lab_mode_name(int mode);

/* ---- the graph's meaning ------------------------------------------------- */
/* Every task's predecessors, explicit and implied by the accesses under the
 * sequential-task-flow rules of docs/lab.md (as runtime/record.c writes
 * them): task t's are list[off[t] .. off[t+1]), ascending, no duplicates.
 * TSR_OK or TSR_ENOMEM; the caller frees *off and *list. */
int lab_all_deps(const tsr_lab_graph_t *g, uint32_t **off, uint32_t **list);

/* The last message of the lab's JSON parser (lab/json_error.c). */
const char *lab_json_message(void);

/* The readers: fill b from buf[0..len). */
int lab_read_tessera(lab_builder_t *b, const char *buf, size_t len);
int lab_read_rec(lab_builder_t *b, const char *buf, size_t len);
int lab_read_dot(lab_builder_t *b, const char *buf, size_t len);
int lab_read_stg(lab_builder_t *b, const char *buf, size_t len);
int lab_read_wfcommons(lab_builder_t *b, const char *buf, size_t len);

#endif
