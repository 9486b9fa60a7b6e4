/* lab/read_wfcommons.c — the reader of WfCommons workflows (WfFormat JSON),
 * schema 1.4 and 1.5 (and 1.3's "jobs" for "tasks").
 *
 * 1.4: workflow.tasks[] with name, id (optional: the name is the key),
 * runtimeInSeconds (or runtime), parents (ids, or names), files[] of
 * {link: input|output, name (or id), sizeInBytes (or size)}.
 * 1.5: workflow.specification.tasks[] with id, name, parents, inputFiles,
 * outputFiles (file ids); workflow.specification.files[] with id and
 * sizeInBytes; workflow.execution.tasks[] with id and runtimeInSeconds.
 *
 * A task's name in the graph is its "category" where it has one (its kind:
 * tasks of one kind share a model), else its name. Every file is a data item
 * of its size (0: 1 byte): an output is a W access of the task, an input an R
 * access (a file no task writes is an initial input, read only); parents are
 * explicit dependencies; a task that reads a file comes after every task
 * that writes it. runtimeInSeconds is seconds[CPU] (time_unit_s 1); the
 * other kinds stay unknown. Tasks are put in a topological order, stable by
 * their order in the file.
 *
 * JSON syntax errors name the line and column; the JSON tree keeps no lines,
 * so errors in its content name the task (its index and id) instead.
 *
 * Must never: accept a parent or file that does not exist, a size or
 * runtime that is not a non-negative number, or a cycle.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab/build.h"
#include "runtime/json.h"

typedef const tsr__json_t json_t;

static json_t *member(json_t *o, const char *key, tsr__json_type_t type)
{
    json_t *v = tsr__json_get(o, key);
    return v && v->type == type ? v : NULL;
}

static json_t *str(json_t *o, const char *key)
{
    return member(o, key, TSR__JSON_STRING);
}

/* A non-negative number member: 1 and *out, 0 when absent, -1 when bad. */
static int num(json_t *o, const char *key, double *out)
{
    json_t *v = tsr__json_get(o, key);
    if (!v)
        return 0;
    if (v->type != TSR__JSON_NUMBER || v->neg || !(v->num >= 0))
        return -1;
    *out = v->num;
    return 1;
}

#define TASK_FAIL(i, t, fmt, ...)                                                           \
    lab_fail(b, 0, "task %zu ('%.64s'): " fmt, (size_t)(i), (t) ? (t)->str : "?",         \
             __VA_ARGS__)

/* The key of task object `o`: id, else name. */
static json_t *task_key(json_t *o)
{
    json_t *id = str(o, "id");
    return id ? id : str(o, "name");
}

static int make_tasks(lab_builder_t *b, json_t *tasks, lab_map_t *names)
{
    int rc;
    for (size_t i = 0; i < tasks->len; i++) {
        json_t *o = &tasks->items[i];
        if (o->type != TSR__JSON_OBJECT)
            return lab_fail(b, 0, "task %zu is no object", i);
        json_t *key = task_key(o), *name = str(o, "name"), *cat = str(o, "category");
        if (!key)
            return lab_fail(b, 0, "task %zu has neither id nor name", i);
        json_t *shown = cat ? cat : name ? name : key;
        uint32_t t;
        if (lab_b_find_task(b, key->str, key->len, &t) == 0)
            return TASK_FAIL(i, key, "%s", "defined twice");
        if ((rc = lab_b_task(b, key->str, key->len, i, shown->str, shown->len, 0, &t)) !=
            TSR_OK)
            return rc;
        uint32_t old;
        if (name && lab_map_get(names, name->str, name->len, &old) != 0 &&
            lab_map_put(names, name->str, name->len, t) != TSR_OK)
            return lab_nomem(b);
        double rt = -1;
        int k = num(o, "runtimeInSeconds", &rt);
        if (k == 0)
            k = num(o, "runtime", &rt);
        if (k < 0)
            return TASK_FAIL(i, key, "%s", "runtime is no non-negative number");
        if (k > 0)
            b->g->task[t].seconds[TSR_DEVICE_CPU] = rt;
    }
    return TSR_OK;
}

static int parents(lab_builder_t *b, json_t *tasks, const lab_map_t *names)
{
    for (size_t i = 0; i < tasks->len; i++) {
        json_t *o = &tasks->items[i], *key = task_key(o);
        json_t *ps = tsr__json_get(o, "parents");
        if (!ps)
            continue;
        if (ps->type != TSR__JSON_ARRAY)
            return TASK_FAIL(i, key, "%s", "parents is no array");
        for (size_t k = 0; k < ps->len; k++) {
            json_t *p = &ps->items[k];
            uint32_t pt;
            if (p->type != TSR__JSON_STRING)
                return TASK_FAIL(i, key, "parent %zu is no string", k);
            if (lab_b_find_task(b, p->str, p->len, &pt) != 0 &&
                lab_map_get(names, p->str, p->len, &pt) != 0)
                return TASK_FAIL(i, key, "parent '%.64s' is no task", p->str);
            int rc = lab_b_dep(b, (uint32_t)i, pt);
            if (rc != TSR_OK)
                return rc;
        }
    }
    return TSR_OK;
}

/* A reader comes after every writer of what it reads. */
static int order_readers(lab_builder_t *b)
{
    size_t nd = b->g->ndata, na = b->nacc;
    uint32_t *off = calloc(nd + 1, sizeof *off), *wr = malloc((na + 1) * sizeof *wr);
    int rc = TSR_OK;
    if (!off || !wr) {
        rc = lab_nomem(b);
        goto out;
    }
    for (size_t i = 0; i < na; i++)
        if (b->acc[i].mode == TSR_W)
            off[b->acc[i].data + 1]++;
    for (size_t d = 0; d < nd; d++)
        off[d + 1] += off[d];
    for (size_t i = 0; i < na; i++) {
        if (b->acc[i].mode == TSR_W)
            wr[off[b->acc[i].data]++] = b->acc[i].task;
    }
    for (size_t d = nd; d > 0; d--)
        off[d] = off[d - 1];
    off[0] = 0;
    for (size_t i = 0; i < na && rc == TSR_OK; i++) {
        lab_pending_access_t a = b->acc[i];
        if (a.mode != TSR_R)
            continue;
        for (uint32_t k = off[a.data]; k < off[a.data + 1] && rc == TSR_OK; k++)
            if (wr[k] != a.task)
                rc = lab_b_order(b, a.task, wr[k]);
    }
out:
    free(off);
    free(wr);
    return rc;
}

static int files_14(lab_builder_t *b, json_t *tasks)
{
    for (size_t i = 0; i < tasks->len; i++) {
        json_t *o = &tasks->items[i], *key = task_key(o);
        json_t *fs = tsr__json_get(o, "files");
        if (!fs)
            continue;
        if (fs->type != TSR__JSON_ARRAY)
            return TASK_FAIL(i, key, "%s", "files is no array");
        for (size_t k = 0; k < fs->len; k++) {
            json_t *f = &fs->items[k];
            if (f->type != TSR__JSON_OBJECT)
                return TASK_FAIL(i, key, "file %zu is no object", k);
            json_t *link = str(f, "link"), *name = str(f, "name");
            if (!name)
                name = str(f, "id");
            if (!link || !name)
                return TASK_FAIL(i, key, "file %zu without link or name", k);
            int mode = strcmp(link->str, "input") == 0    ? TSR_R
                       : strcmp(link->str, "output") == 0 ? TSR_W
                                                           : -1;
            if (mode < 0)
                return TASK_FAIL(i, key, "file %zu: link '%.32s' is neither input nor output",
                                 k, link->str);
            double size = 0;
            int s = num(f, "sizeInBytes", &size);
            if (s == 0)
                s = num(f, "size", &size);
            if (s < 0 || size > 1.8e19)
                return TASK_FAIL(i, key, "file '%.64s': size is no non-negative number",
                                 name->str);
            uint32_t d;
            int rc = lab_b_data(b, name->str, name->len, (uint64_t)size, &d);
            if (rc == TSR_OK)
                rc = lab_b_access(b, (uint32_t)i, d, mode);
            if (rc != TSR_OK)
                return rc;
        }
    }
    return TSR_OK;
}

static int files_15(lab_builder_t *b, json_t *spec, json_t *tasks)
{
    json_t *files = tsr__json_get(spec, "files");
    if (files && files->type != TSR__JSON_ARRAY)
        return lab_fail(b, 0, "workflow.specification.files is no array");
    for (size_t k = 0; files && k < files->len; k++) {
        json_t *f = &files->items[k], *id = NULL;
        if (f->type == TSR__JSON_OBJECT)
            id = str(f, "id");
        if (!id)
            return lab_fail(b, 0, "file %zu has no id", k);
        double size = 0;
        if (num(f, "sizeInBytes", &size) < 0 || size > 1.8e19)
            return lab_fail(b, 0, "file '%.64s': sizeInBytes is no non-negative number",
                            id->str);
        uint32_t d;
        if (lab_b_find_data(b, id->str, id->len, &d) == 0)
            return lab_fail(b, 0, "file '%.64s' defined twice", id->str);
        int rc = lab_b_data(b, id->str, id->len, (uint64_t)size, &d);
        if (rc != TSR_OK)
            return rc;
    }
    static const char *const lists[2] = {"inputFiles", "outputFiles"};
    for (size_t i = 0; i < tasks->len; i++) {
        json_t *o = &tasks->items[i], *key = task_key(o);
        for (int l = 0; l < 2; l++) {
            json_t *fs = tsr__json_get(o, lists[l]);
            if (!fs)
                continue;
            if (fs->type != TSR__JSON_ARRAY)
                return TASK_FAIL(i, key, "%s is no array", lists[l]);
            for (size_t k = 0; k < fs->len; k++) {
                json_t *f = &fs->items[k];
                uint32_t d;
                if (f->type != TSR__JSON_STRING)
                    return TASK_FAIL(i, key, "%s %zu is no string", lists[l], k);
                if (lab_b_find_data(b, f->str, f->len, &d) != 0)
                    return TASK_FAIL(i, key, "file '%.64s' is not in specification.files",
                                     f->str);
                int rc = lab_b_access(b, (uint32_t)i, d, l ? TSR_W : TSR_R);
                if (rc != TSR_OK)
                    return rc;
            }
        }
    }
    return TSR_OK;
}

static int runtimes_15(lab_builder_t *b, json_t *workflow)
{
    json_t *exec = member(workflow, "execution", TSR__JSON_OBJECT);
    json_t *tasks = exec ? tsr__json_get(exec, "tasks") : NULL;
    if (!tasks)
        return TSR_OK;
    if (tasks->type != TSR__JSON_ARRAY)
        return lab_fail(b, 0, "workflow.execution.tasks is no array");
    for (size_t i = 0; i < tasks->len; i++) {
        json_t *o = &tasks->items[i], *id = NULL;
        if (o->type == TSR__JSON_OBJECT)
            id = str(o, "id");
        if (!id)
            return lab_fail(b, 0, "execution task %zu has no id", i);
        uint32_t t;
        if (lab_b_find_task(b, id->str, id->len, &t) != 0)
            return lab_fail(b, 0, "execution task '%.64s' is not in the specification",
                            id->str);
        double rt;
        int k = num(o, "runtimeInSeconds", &rt);
        if (k < 0)
            return lab_fail(b, 0, "execution task '%.64s': runtimeInSeconds is no "
                            "non-negative number", id->str);
        if (k > 0)
            b->g->task[t].seconds[TSR_DEVICE_CPU] = rt;
    }
    return TSR_OK;
}

int lab_read_wfcommons(lab_builder_t *b, const char *buf, size_t len)
{
    tsr__json_doc_t *doc;
    lab_map_t names = {0};
    b->g->time_unit_s = 1;
    if (tsr__json_parse(buf, len, b->what, &doc) != TSR_OK) {
        if (b->err && b->errlen)
            snprintf(b->err, b->errlen, "%s", lab_json_message());
        return TSR_EINVAL;
    }
    int rc = TSR_OK;
    json_t *root = tsr__json_root(doc);
    json_t *wf = member(root, "workflow", TSR__JSON_OBJECT);
    json_t *spec = wf ? member(wf, "specification", TSR__JSON_OBJECT) : NULL;
    json_t *tasks = spec ? tsr__json_get(spec, "tasks")
                    : wf ? (tsr__json_get(wf, "tasks") ? tsr__json_get(wf, "tasks")
                                                       : tsr__json_get(wf, "jobs"))
                         : NULL;
    if (!wf)
        rc = lab_fail(b, 0, "no \"workflow\" object: not a WfCommons workflow");
    else if (!tasks || tasks->type != TSR__JSON_ARRAY)
        rc = lab_fail(b, 0, "no task array (workflow.tasks, or workflow.specification.tasks)");
    if (rc == TSR_OK && tasks->len > LAB_MAX_COUNT)
        rc = lab_fail(b, 0, "more than %zu tasks", LAB_MAX_COUNT);
    if (rc == TSR_OK)
        rc = make_tasks(b, tasks, &names);
    if (rc == TSR_OK)
        rc = parents(b, tasks, &names);
    if (rc == TSR_OK)
        rc = spec ? files_15(b, spec, tasks) : files_14(b, tasks);
    if (rc == TSR_OK && spec)
        rc = runtimes_15(b, wf);
    if (rc == TSR_OK)
        rc = order_readers(b);
    lab_map_free(&names);
    tsr__json_free(doc);
    return rc;
}
