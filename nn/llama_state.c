/* nn/llama_state.c — a Llama model's optimizer state beside a checkpoint
 * (tessera/llama.h, tsr_llama_save_state / load_state): the AdamW moments
 * by Hugging Face name, the step counter and the caller's text, in one
 * safetensors file written atomically. Reads and writes the model through
 * its public accessors only, plus the step counter. */
#include <tessera/llama.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/io/safetensors.h"
#include "nn/llama_model.h"
#include "runtime/error.h"

static const char *const prefix[2] = {"m.", "v."};
static const int part[2] = {TSR_GPT2_ADAM_M, TSR_GPT2_ADAM_V};

typedef struct {
    tsr_llama_t *m;
} fill_ctx_t;

/* tensor i of the file: moment i / names of name i % names */
static int fill(void *ctx, size_t i, void *buf, size_t bytes)
{
    tsr_llama_t *m = ((fill_ctx_t *)ctx)->m;
    const llama_name_t *n = &m->names[i % (size_t)m->nnames];
    if (n->numel * sizeof(float) != bytes)
        return tsr__fail(TSR_ESTATE, "llama state: %s has %zu elements, not %zu", n->name,
                         n->numel, bytes / sizeof(float));
    return tsr_llama_get(m, n->name, part[i / (size_t)m->nnames], buf, NULL);
}

int tsr_llama_save_state(tsr_llama_t *m, const char *path, const char *extra)
{
    TSR_TRY(tsr__llama_check(m, "llama_save_state"));
    if (!path)
        return tsr__fail(TSR_EINVAL, "llama_save_state: NULL path");
    tsr__st_writer_t *w;
    TSR_TRY(tsr__st_writer_create(&w));
    fill_ctx_t ctx = {m};
    int rc = TSR_OK;
    for (int k = 0; k < 2 && !rc; k++)
        for (int i = 0; i < m->nnames && !rc; i++) {
            const llama_name_t *n = &m->names[i];
            char full[128];
            uint64_t shape[2] = {(uint64_t)n->rows, (uint64_t)n->cols};
            snprintf(full, sizeof full, "%s%s", prefix[k], n->name);
            rc = tsr__st_writer_add_fill(w, full, TSR__ST_F32, n->cols ? 2 : 1, shape, fill,
                                         &ctx);
        }
    char step[16];
    snprintf(step, sizeof step, "%d", m->train.steps);
    if (!rc)
        rc = tsr__st_writer_meta(w, "step", step);
    if (!rc)
        rc = tsr__st_writer_meta(w, "extra", extra ? extra : "");
    if (!rc)
        rc = tsr__st_writer_write(w, path);
    tsr__st_writer_free(w);
    return rc;
}

/* Every moment tensor present, F32 and of its shape; the step a count */
static int check_file(tsr_llama_t *m, tsr__st_reader_t *r, const char *path, int *step)
{
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < m->nnames; i++) {
            const llama_name_t *n = &m->names[i];
            char full[128];
            snprintf(full, sizeof full, "%s%s", prefix[k], n->name);
            const tsr__st_tensor_t *t = tsr__st_find(r, full);
            if (!t)
                return tsr__fail(TSR_EINVAL, "state %s: missing tensor %s", path, full);
            if (t->dtype != TSR__ST_F32 || (size_t)t->numel != n->numel)
                return tsr__fail(TSR_EINVAL, "state %s: %s is not F32 of %zu elements", path,
                                 full, n->numel);
        }
    const char *s = tsr__st_metadata(r, "step");
    char *end = NULL;
    long v = s ? strtol(s, &end, 10) : -1;
    if (!s || !*s || *end || v < 0 || v > INT_MAX)
        return tsr__fail(TSR_EINVAL, "state %s: metadata \"step\" missing or not a count", path);
    *step = (int)v;
    return TSR_OK;
}

int tsr_llama_load_state(tsr_llama_t *m, const char *path, char *extra, size_t extra_size)
{
    TSR_TRY(tsr__llama_check(m, "llama_load_state"));
    if (!path)
        return tsr__fail(TSR_EINVAL, "llama_load_state: NULL path");
    tsr__st_reader_t *r;
    TSR_TRY(tsr__st_open(&r, path));
    int step = 0, rc = check_file(m, r, path, &step);
    const char *x = tsr__st_metadata(r, "extra");
    if (!rc && extra && strlen(x ? x : "") + 1 > extra_size)
        rc = tsr__fail(TSR_EINVAL, "state %s: extra text of %zu bytes does not fit %zu", path,
                       strlen(x), extra_size);
    float *buf = NULL;
    for (int k = 0; k < 2 && !rc; k++)
        for (int i = 0; i < m->nnames && !rc; i++) {
            const llama_name_t *n = &m->names[i];
            char full[128];
            snprintf(full, sizeof full, "%s%s", prefix[k], n->name);
            float *grown = realloc(buf, n->numel * sizeof *buf);
            if (!grown) {
                rc = tsr__fail(TSR_ENOMEM, "state %s: out of memory", path);
                break;
            }
            buf = grown;
            rc = tsr__st_read_f32(r, tsr__st_find(r, full), buf, n->numel);
            if (!rc)
                rc = tsr_llama_set(m, n->name, part[k], buf, n->numel);
        }
    free(buf);
    if (!rc) {
        m->train.steps = step;
        if (extra)
            snprintf(extra, extra_size, "%s", x ? x : "");
    }
    tsr__st_close(r);
    return rc;
}
