/* nn/params.c — a model's parameter table (nn/params.h): the two-pass
 * construction of tiled tensors, parameters by name, host access (ZeRO
 * shares included), bf16 refresh and zeroed gradients. */
#include "nn/params.h"

#include <tessera/gpt2.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/ops.h"
#include "runtime/error.h"
#include "runtime/splitmix.h"

/* ---- construction --------------------------------------------------------- */

int tsr__build_tensor(tsr__build_t *b, tsr_tensor_t *t, const char *name, const char *field,
                      long long rows, long long cols, long long tile_rows, long long tile_cols,
                      int bf16)
{
    if (rows > INT_MAX || cols > INT_MAX)
        return tsr__fail(TSR_EINVAL, "%s: %s would be (%lld, %lld), beyond int sizes: "
                                     "%s too large", b->model, name, rows, cols, field);
    long long tr = tile_rows < rows ? tile_rows : rows;
    long long tc = tile_cols < cols ? tile_cols : cols;
    if (tr * tc > INT_MAX)
        return tsr__fail(TSR_EINVAL, "%s: %s in tiles of (%lld, %lld): a tile may hold at "
                                     "most %d elements; %s too large", b->model, name, tr, tc,
                         INT_MAX, field);
    b->ntiles += (rows / tr + (rows % tr != 0)) * (cols / tc + (cols % tc != 0));
    if (b->ntiles > MODEL_MAX_TILES)
        return tsr__fail(TSR_EINVAL, "%s: at %s the model has more than %d tiles: %s too "
                                     "large, or its tiles too small", b->model, name,
                         MODEL_MAX_TILES, field);
    if (b->dry)
        return TSR_OK;
    return bf16 ? tsr__tensor_init_bf16(t, (int)rows, (int)cols, (int)tr, (int)tc)
                : tsr__tensor_init(t, (int)rows, (int)cols, (int)tr, (int)tc);
}

int tsr__params_reserve(tsr__params_t *ps, int cap)
{
    ps->p = calloc((size_t)cap, sizeof *ps->p);
    if (!ps->p)
        return tsr__fail(TSR_ENOMEM, "%s: no memory for the parameter table", ps->model);
    ps->cap = cap;
    return TSR_OK;
}

int tsr__params_add(tsr__params_t *ps, tsr__build_t *b, param_t **out, const char *name,
                    const char *field, long long rows, long long cols, long long trows,
                    long long tcols, int decay, int gemm)
{
    param_t dry_p, *p = &dry_p;
    if (!b->dry) {
        if (ps->n >= ps->cap) /* the model reserved too few: its bug */
            return tsr__fail(TSR_ESTATE, "%s: parameter table full at %s", ps->model, name);
        p = &ps->p[ps->n++];
    }
    snprintf(p->name, sizeof p->name, "%s", name);
    p->decay = decay;
    *out = b->dry ? NULL : p;
    TSR_TRY(tsr__build_tensor(b, &p->p, name, field, rows, cols, trows, tcols, 0));
    TSR_TRY(tsr__build_tensor(b, &p->g, name, field, rows, cols, trows, tcols, 0));
    TSR_TRY(tsr__build_tensor(b, &p->m, name, field, rows, cols, trows, tcols, 0));
    if (gemm && ps->bf16)
        TSR_TRY(tsr__build_tensor(b, &p->pb, name, field, rows, cols, trows, tcols, 1));
    return tsr__build_tensor(b, &p->v, name, field, rows, cols, trows, tcols, 0);
}

void tsr__params_each_tensor(tsr__params_t *ps, void (*fn)(tsr_tensor_t *))
{
    for (int i = 0; i < ps->n; i++) {
        fn(&ps->p[i].p);
        fn(&ps->p[i].g);
        fn(&ps->p[i].m);
        fn(&ps->p[i].v);
        fn(&ps->p[i].pb);
    }
}

void tsr__params_free(tsr__params_t *ps)
{
    for (int i = 0; ps->p && i < ps->n; i++)
        free(ps->p[i].owner);
    free(ps->p);
    ps->p = NULL;
    ps->n = ps->cap = 0;
}

/* ---- lookup and host access ---------------------------------------------- */

param_t *tsr__params_find(tsr__params_t *ps, const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0; i < ps->n; i++)
        if (!strcmp(ps->p[i].name, name))
            return &ps->p[i];
    return NULL;
}

size_t tsr__params_numel(const tsr__params_t *ps)
{
    size_t n = 0;
    for (int i = 0; i < ps->n; i++)
        n += tsr__tensor_numel(&ps->p[i].p);
    return n;
}

int tsr__params_owns(const tsr__params_t *ps, const param_t *p, size_t i)
{
    return !p->owner || p->owner[i] == ps->rank;
}

static tsr_tensor_t *param_part(param_t *p, int which)
{
    switch (which) {
    case TSR_GPT2_PARAM: return &p->p;
    case TSR_GPT2_GRAD: return &p->g;
    case TSR_GPT2_ADAM_M: return &p->m;
    case TSR_GPT2_ADAM_V: return &p->v;
    default: return NULL;
    }
}

/* A moment under ZeRO: this rank's tiles only. Reading gives zeros for the
 * others' tiles and writing skips them, without touching them (they would
 * get memory), so each rank saves and loads its own share. */
static int zero_share_access(tsr__params_t *ps, param_t *p, tsr_tensor_t *t, float *ptr,
                             int write)
{
    size_t ld = (size_t)t->rows, n = (size_t)t->grid_rows * t->grid_cols;
    for (size_t i = 0; i < n; i++) {
        tsr_tensor_t v = tsr__tensor_tile_view(t, i);
        size_t a = i % (size_t)t->grid_rows, b = i / (size_t)t->grid_rows;
        float *at = ptr + a * (size_t)t->tile_rows + b * (size_t)t->tile_cols * ld;
        if (tsr__params_owns(ps, p, i))
            TSR_TRY(write ? tsr__tensor_write(&v, at, ld) : tsr__tensor_read(&v, at, ld));
        else if (!write)
            for (int c = 0; c < v.cols; c++)
                memset(at + (size_t)c * ld, 0, (size_t)v.rows * sizeof *at);
    }
    return TSR_OK;
}

int tsr__params_access(tsr__params_t *ps, const char *fn, const char *name, int which,
                       float *ptr, size_t *numel, size_t given, int write)
{
    param_t *p = tsr__params_find(ps, name);
    if (!p)
        return tsr__fail(TSR_ENOTFOUND, "%s: no parameter named '%s'", ps->model,
                         name ? name : "(null)");
    tsr_tensor_t *t = param_part(p, which);
    if (!t)
        return tsr__fail(TSR_EINVAL, "%s: unknown parameter part %d", ps->model, which);
    size_t n = tsr__tensor_numel(t);
    if (numel)
        *numel = n;
    if (!ptr)
        return write ? tsr__fail(TSR_EINVAL, "%s: NULL data for %s", fn, name) : TSR_OK;
    if (write && given != n)
        return tsr__fail(TSR_EINVAL, "%s: %s has %zu elements, %zu given", fn, name, n, given);
    if (write && which == TSR_GPT2_GRAD)
        ps->grads_zero = 0;
    if (write && which == TSR_GPT2_PARAM && p->pb.tiles)
        ps->bf16_stale = 1; /* the next forward refreshes the bf16 copies */
    if (p->owner && (which == TSR_GPT2_ADAM_M || which == TSR_GPT2_ADAM_V))
        return zero_share_access(ps, p, t, ptr, write);
    return write ? tsr__tensor_write(t, ptr, (size_t)t->rows)
                 : tsr__tensor_read(t, ptr, (size_t)t->rows);
}

/* ---- whole-table maintenance --------------------------------------------- */

/* A weight's bf16 copy refreshed from its fp32 master: a conversion task
 * per tile, ordered after whatever wrote p last. Only after a set, a load or
 * an initialisation: after an optimizer step the AdamW task itself writes
 * the copy (tsr__op_adamw's pb), without a second pass over the weights. */
int tsr__params_refresh_stale(tsr__params_t *ps)
{
    if (!ps->bf16_stale)
        return TSR_OK;
    for (int i = 0; i < ps->n; i++)
        if (ps->p[i].pb.tiles)
            TSR_TRY(tsr__op_convert(&ps->p[i].p, &ps->p[i].pb));
    ps->bf16_stale = 0;
    return TSR_OK;
}

/* Nothing to submit when the gradients are known to be zero: a new model's
 * (fresh tiles read as zeros), or after an optimizer step, whose updates
 * consume them (each AdamW task zeroes its gradient tile while it has it in
 * cache: a separate pass of fill tasks wrote them from memory again, about
 * 4 % of the 124M GPT-2 step on 2 cores; or, where memory is short, the
 * tile's copies are dropped: nn/trainer.c, grads_dropped). */
int tsr__params_zero_grad(tsr__params_t *ps)
{
    if (ps->grads_zero)
        return TSR_OK;
    for (int i = 0; i < ps->n; i++)
        TSR_TRY(tsr__op_fill(&ps->p[i].g, 0.0f));
    ps->grads_zero = 1;
    return TSR_OK;
}

double tsr__params_normal(uint64_t *s)
{
    double u1 = ((double)(tsr__splitmix(s) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = (double)(tsr__splitmix(s) >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}
