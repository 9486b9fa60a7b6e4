/* lab/read_dot.c — the reader of task graphs in DOT, as DAGGEN writes them
 * and SimGrid's DAG loader reads them: `digraph G { a [size="1e9"];
 * a -> b [size="1e6"]; }`.
 *
 * Every node is a task named by its id (quoted or not), in order of first
 * appearance; its `size` attribute is its flops (no duration: seconds stay
 * unknown). An edge u -> v (chains a -> b -> c are several edges) whose
 * `size` is > 0 becomes a data item "u->v" of that many bytes, written (W) by
 * u and read (R) by v; an edge of size 0 or without one is an explicit
 * dependency. SimGrid's `root` and `end` nodes are ordinary tasks here (they
 * are a source and a sink already). Tasks are put in a topological order,
 * stable by first appearance; a cycle is refused naming a task on it.
 * `graph`, `node` and `edge` default attribute statements, `ID = ID` graph
 * attributes and attributes other than size are read and ignored; `//`,
 * C block comments and `#` line comments are skipped; `;` and `,` are optional.
 *
 * Not supported (refused with the line): undirected graphs (`--`),
 * subgraphs, ports (`a:p`), HTML strings (`<...>`).
 *
 * Must never: read past the buffer, accept a size that is not a
 * non-negative number, or keep a pointer into the buffer.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lab/build.h"

#define SHOW(s, n) (int)((n) > 40 ? 40 : (n)), (s)

enum { T_END, T_ID, T_LBRACE, T_RBRACE, T_LBRACKET, T_RBRACKET, T_EQ, T_SEMI, T_COMMA, T_ARROW };

typedef struct {
    lab_builder_t *b;
    const char *p, *end;
    size_t line;
    /* the token last read */
    int kind;
    char *text;                 /* an ID, unquoted and unescaped (owned) */
    size_t len, cap;
    size_t tline;
} lexer_t;

static int put(lexer_t *x, char c)
{
    if (x->len + 1 >= x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 64;
        if (cap > ((size_t)1 << 30))
            return lab_fail(x->b, x->line, "an id longer than 1 GiB");
        char *p = realloc(x->text, cap);
        if (!p)
            return lab_nomem(x->b);
        x->text = p, x->cap = cap;
    }
    x->text[x->len++] = c;
    x->text[x->len] = 0;
    return TSR_OK;
}

static int id_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == '-' || c >= 0x80;
}

/* The next token into x->kind (and x->text for an ID). */
static int lex(lexer_t *x)
{
    x->len = 0;
    if (put(x, 0) != TSR_OK)
        return TSR_ENOMEM;
    x->len = 0;
    for (;;) {
        while (x->p < x->end && (lab_space(*x->p) || *x->p == '\n')) {
            if (*x->p == '\n')
                x->line++;
            x->p++;
        }
        if (x->p + 1 < x->end && x->p[0] == '/' && x->p[1] == '/') {
            while (x->p < x->end && *x->p != '\n')
                x->p++;
            continue;
        }
        if (x->p < x->end && *x->p == '#') {
            while (x->p < x->end && *x->p != '\n')
                x->p++;
            continue;
        }
        if (x->p + 1 < x->end && x->p[0] == '/' && x->p[1] == '*') {
            size_t start = x->line;
            x->p += 2;
            while (x->p + 1 < x->end && !(x->p[0] == '*' && x->p[1] == '/')) {
                if (*x->p == '\n')
                    x->line++;
                x->p++;
            }
            if (x->p + 1 >= x->end)
                return lab_fail(x->b, start, "a /* comment that does not end");
            x->p += 2;
            continue;
        }
        break;
    }
    x->tline = x->line;
    if (x->p >= x->end) {
        x->kind = T_END;
        return TSR_OK;
    }
    char c = *x->p;
    const char *single = "{}[]=;,";
    const char *s = memchr(single, c, 7);
    if (s && c) {
        static const int kinds[] = {T_LBRACE, T_RBRACE, T_LBRACKET, T_RBRACKET,
                                    T_EQ, T_SEMI, T_COMMA};
        x->kind = kinds[s - single];
        x->p++;
        return TSR_OK;
    }
    if (c == '-' && x->p + 1 < x->end && x->p[1] == '>') {
        x->kind = T_ARROW;
        x->p += 2;
        return TSR_OK;
    }
    if (c == '-' && x->p + 1 < x->end && x->p[1] == '-')
        return lab_fail(x->b, x->line, "an undirected edge '--': a task graph is a digraph");
    if (c == '"') {
        x->p++;
        while (x->p < x->end && *x->p != '"') {
            char ch = *x->p++;
            if (ch == '\\' && x->p < x->end) {
                ch = *x->p++;
                if (ch == '\n') { /* a line continuation */
                    x->line++;
                    continue;
                }
                if (ch != '"' && ch != '\\' && put(x, '\\') != TSR_OK)
                    return TSR_ENOMEM;
            } else if (ch == '\n')
                x->line++;
            if (put(x, ch) != TSR_OK)
                return TSR_ENOMEM;
        }
        if (x->p >= x->end)
            return lab_fail(x->b, x->tline, "a quoted string that does not end");
        x->p++;
        /* "a" + "b" concatenation is not supported: refused at the '+' */
        x->kind = T_ID;
        return TSR_OK;
    }
    if (c == '<')
        return lab_fail(x->b, x->line, "HTML strings <...> are not supported");
    if (!id_char((unsigned char)c))
        return lab_fail(x->b, x->line, "unexpected character '%c'",
                        c >= 0x20 && c < 0x7f ? c : '?');
    while (x->p < x->end && id_char((unsigned char)*x->p)) {
        if (*x->p == '-' && x->p + 1 < x->end && (x->p[1] == '>' || x->p[1] == '-'))
            break;
        if (put(x, *x->p++) != TSR_OK)
            return TSR_ENOMEM;
    }
    x->kind = T_ID;
    return TSR_OK;
}

static int is_kw(const lexer_t *x, const char *w)
{
    if (x->kind != T_ID || x->len != strlen(w))
        return 0;
    for (size_t i = 0; i < x->len; i++) {
        char c = x->text[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != w[i])
            return 0;
    }
    return 1;
}

static int node(lexer_t *x, uint32_t *t)
{
    lab_builder_t *b = x->b;
    if (is_kw(x, "subgraph"))
        return lab_fail(b, x->tline, "subgraphs are not supported");
    if (lab_b_find_task(b, x->text, x->len, t) == 0)
        return TSR_OK;
    return lab_b_task(b, x->text, x->len, b->g->ntasks, x->text, x->len, x->tline, t);
}

/* `size` of an attribute list: *size (-1: none). The lexer is on '['. */
static int attrs(lexer_t *x, double *size, size_t *size_line)
{
    int rc;
    while (x->kind == T_LBRACKET) {
        if ((rc = lex(x)) != TSR_OK)
            return rc;
        while (x->kind != T_RBRACKET) {
            if (x->kind != T_ID)
                return lab_fail(x->b, x->tline, "an attribute name expected");
            int is_size = x->len == 4 && memcmp(x->text, "size", 4) == 0;
            size_t line = x->tline;
            if ((rc = lex(x)) != TSR_OK)
                return rc;
            if (x->kind != T_EQ)
                return lab_fail(x->b, x->tline, "'=' expected after an attribute name");
            if ((rc = lex(x)) != TSR_OK)
                return rc;
            if (x->kind != T_ID)
                return lab_fail(x->b, x->tline, "an attribute value expected");
            if (is_size) {
                if (lab_double(x->text, x->len, size) != 0 || *size < 0)
                    return lab_fail(x->b, x->tline, "size '%.*s' is no non-negative number",
                                    SHOW(x->text, x->len));
                *size_line = line;
            }
            if ((rc = lex(x)) != TSR_OK)
                return rc;
            if (x->kind == T_SEMI || x->kind == T_COMMA)
                if ((rc = lex(x)) != TSR_OK)
                    return rc;
            if (x->kind == T_END)
                return lab_fail(x->b, x->tline, "an attribute list that does not end");
        }
        if ((rc = lex(x)) != TSR_OK)
            return rc;
    }
    return TSR_OK;
}

static int edge(lexer_t *x, uint32_t u, uint32_t v, double size, size_t line)
{
    lab_builder_t *b = x->b;
    if (u == v)
        return lab_fail(b, line, "task '%.64s' depends on itself", b->g->task[u].name);
    if (!(size > 0))
        return lab_b_dep(b, v, u);
    if (size > 1.8e19)
        return lab_fail(b, line, "an edge of more than 2^64 bytes");
    const char *un = b->g->task[u].name, *vn = b->g->task[v].name;
    size_t ul = strlen(un), vl = strlen(vn);
    char *name = malloc(ul + vl + 3);
    if (!name)
        return lab_nomem(b);
    memcpy(name, un, ul);
    memcpy(name + ul, "->", 2);
    memcpy(name + ul + 2, vn, vl + 1);
    uint32_t d;
    int rc = lab_b_data(b, name, ul + vl + 2, (uint64_t)ceil(size), &d);
    free(name);
    if (rc == TSR_OK)
        rc = lab_b_access(b, u, d, TSR_W);
    if (rc == TSR_OK)
        rc = lab_b_access(b, v, d, TSR_R);
    if (rc == TSR_OK)
        rc = lab_b_order(b, v, u);
    return rc;
}

static int statements(lexer_t *x)
{
    lab_builder_t *b = x->b;
    int rc;
    uint32_t *chain = NULL;
    size_t nchain = 0, cchain = 0;
    for (;;) {
        if (x->kind == T_RBRACE)
            break;
        if (x->kind == T_END) {
            rc = lab_fail(b, x->tline, "the graph's '}' is missing");
            goto out;
        }
        if (x->kind == T_SEMI || x->kind == T_COMMA) {
            if ((rc = lex(x)) != TSR_OK)
                goto out;
            continue;
        }
        if (x->kind == T_LBRACE) {
            rc = lab_fail(b, x->tline, "subgraphs are not supported");
            goto out;
        }
        if (x->kind != T_ID) {
            rc = lab_fail(b, x->tline, "a statement expected");
            goto out;
        }
        /* graph/node/edge [attrs]: defaults, ignored */
        if (is_kw(x, "graph") || is_kw(x, "node") || is_kw(x, "edge")) {
            double size = -1;
            size_t sl = 0;
            if ((rc = lex(x)) != TSR_OK)
                goto out;
            if (x->kind != T_LBRACKET) {
                rc = lab_fail(b, x->tline, "'[' expected after graph, node or edge");
                goto out;
            }
            if ((rc = attrs(x, &size, &sl)) != TSR_OK)
                goto out;
            continue;
        }
        /* ID = ID, or a node, or an edge chain */
        char *first = malloc(x->len + 1);
        if (!first) {
            rc = lab_nomem(b);
            goto out;
        }
        memcpy(first, x->text, x->len + 1);
        size_t flen = x->len, fline = x->tline;
        int sub = is_kw(x, "subgraph");
        if ((rc = lex(x)) != TSR_OK) {
            free(first);
            goto out;
        }
        if (x->kind == T_EQ) {
            free(first);
            if ((rc = lex(x)) != TSR_OK)
                goto out;
            if (x->kind != T_ID) {
                rc = lab_fail(b, x->tline, "a value expected after '='");
                goto out;
            }
            if ((rc = lex(x)) != TSR_OK)
                goto out;
            continue;
        }
        if (sub) {
            free(first);
            rc = lab_fail(b, fline, "subgraphs are not supported");
            goto out;
        }
        if (x->kind == T_ID && x->len > 0 && x->text[0] == ':') {
            free(first);
            rc = lab_fail(b, x->tline, "ports are not supported");
            goto out;
        }
        uint32_t t;
        rc = lab_b_find_task(b, first, flen, &t) == 0
                 ? TSR_OK
                 : lab_b_task(b, first, flen, b->g->ntasks, first, flen, fline, &t);
        free(first);
        if (rc != TSR_OK)
            goto out;
        nchain = 0;
        for (;;) {
            if (nchain == cchain) {
                size_t c = cchain ? 2 * cchain : 8;
                uint32_t *p = c <= LAB_MAX_COUNT ? realloc(chain, c * sizeof *p) : NULL;
                if (!p) {
                    rc = lab_nomem(b);
                    goto out;
                }
                chain = p, cchain = c;
            }
            chain[nchain++] = t;
            if (x->kind != T_ARROW)
                break;
            if ((rc = lex(x)) != TSR_OK)
                goto out;
            if (x->kind != T_ID) {
                rc = lab_fail(b, x->tline, "a node expected after '->'");
                goto out;
            }
            if ((rc = node(x, &t)) != TSR_OK || (rc = lex(x)) != TSR_OK)
                goto out;
        }
        double size = -1;
        size_t sline = fline;
        if (x->kind == T_LBRACKET && (rc = attrs(x, &size, &sline)) != TSR_OK)
            goto out;
        if (nchain == 1) {
            if (size >= 0)
                b->g->task[chain[0]].flops = size;
        } else {
            for (size_t i = 0; i + 1 < nchain; i++)
                if ((rc = edge(x, chain[i], chain[i + 1], size, fline)) != TSR_OK)
                    goto out;
        }
    }
    rc = TSR_OK;
out:
    free(chain);
    return rc;
}

int lab_read_dot(lab_builder_t *b, const char *buf, size_t len)
{
    lexer_t x = {.b = b, .p = buf, .end = buf + len, .line = 1};
    int rc = lex(&x);
    if (rc == TSR_OK && is_kw(&x, "strict"))
        rc = lex(&x);
    if (rc == TSR_OK && is_kw(&x, "graph"))
        rc = lab_fail(b, x.tline, "an undirected graph: a task graph is a digraph");
    else if (rc == TSR_OK && !is_kw(&x, "digraph"))
        rc = lab_fail(b, x.tline, "no 'digraph'");
    if (rc == TSR_OK)
        rc = lex(&x);
    if (rc == TSR_OK && x.kind == T_ID)
        rc = lex(&x);
    if (rc == TSR_OK && x.kind != T_LBRACE)
        rc = lab_fail(b, x.tline, "'{' expected after digraph");
    if (rc == TSR_OK)
        rc = lex(&x);
    if (rc == TSR_OK)
        rc = statements(&x);
    if (rc == TSR_OK)
        rc = lex(&x);
    if (rc == TSR_OK && x.kind != T_END)
        rc = lab_fail(b, x.tline, "something after the graph's '}'");
    free(x.text);
    return rc;
}
