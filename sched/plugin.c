/* sched/plugin.c — loading a policy from a shared object.
 *
 * A plug-in is a shared object exporting `const tsr_sched_policy_t
 * tsr_sched_policy`. TESSERA_SCHED names it either by path (anything with a
 * '/') or by name N, looked up as libtessera-sched-N.so, then N.so, in each
 * directory of TESSERA_SCHED_PATH (colon-separated), then in the installed
 * plug-in directory <libdir>/tessera/sched, found next to this library.
 *
 * Must never keep a library open that did not give a usable policy, and
 * never trust what a plug-in exports before checking it: a file that is
 * found but unusable is an error naming the file and the reason.
 */
#include "runtime/internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PLUGIN_SYMBOL "tsr_sched_policy"
#define PLUGIN_SUBDIR "tessera/sched"

/* Anything inside this library: dladdr on it gives the library's path. */
static const char self_anchor = 0;

/* Whether addr lies in a loaded object (the plug-in, or a library it uses). */
static bool in_loaded_object(const void *addr)
{
    Dl_info info;
    return dladdr(addr, &info) != 0 && info.dli_fbase != NULL;
}

/* Check what `tsr_sched_policy` resolved to before anyone calls through
 * it: the symbol is a data object at least as large as the structure this
 * runtime reads (a plug-in built against an older header, or one exporting
 * a pointer to its policy, is smaller), and the name and callbacks point
 * into loaded code. Returns TSR_OK or fails with a message. */
static int check_policy(const char *path, const tsr_sched_policy_t *p)
{
    if ((uintptr_t)p % _Alignof(tsr_sched_policy_t) != 0)
        return tsr__fail(TSR_EINVAL,
                         "scheduler plug-in '%s': '" PLUGIN_SYMBOL
                         "' is misaligned (%p): not a tsr_sched_policy_t",
                         path, (const void *)p);
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (!dladdr1(p, &info, (void **)&sym, RTLD_DL_SYMENT) || !info.dli_fbase)
        return tsr__fail(TSR_EINVAL,
                         "scheduler plug-in '%s': '" PLUGIN_SYMBOL
                         "' lies in no loaded object",
                         path);
    /* The symbol table entry, when dladdr found this very symbol (not an
     * alias or a neighbour). */
    if (sym && info.dli_saddr == (const void *)p) {
        if (ELF64_ST_TYPE(sym->st_info) == STT_FUNC ||
            ELF64_ST_TYPE(sym->st_info) == STT_GNU_IFUNC)
            return tsr__fail(TSR_EINVAL,
                             "scheduler plug-in '%s': '" PLUGIN_SYMBOL
                             "' is a function; export the policy structure: "
                             "const tsr_sched_policy_t " PLUGIN_SYMBOL
                             " = {...};",
                             path);
        if (sym->st_size != 0 && sym->st_size < sizeof(tsr_sched_policy_t))
            return tsr__fail(TSR_EINVAL,
                             "scheduler plug-in '%s': '" PLUGIN_SYMBOL
                             "' is %zu bytes but a tsr_sched_policy_t is %zu: "
                             "export the structure itself (not a pointer to "
                             "it), built against this <tessera/sched.h>",
                             path, (size_t)sym->st_size, sizeof(tsr_sched_policy_t));
    }

    const char *missing = !p->name ? "name" : !p->push ? "push" : !p->pop ? "pop" : NULL;
    if (missing)
        return tsr__fail(TSR_EINVAL,
                         "scheduler plug-in '%s': the policy has no %s "
                         "(name, push and pop are required)",
                         path, missing);
    const struct {
        const char *what;
        const void *addr;
    } ptrs[] = {
        {"name", p->name},
        {"description", p->description},
        /* Function pointers only compared as addresses, never called here. */
        {"init", p->init ? (const void *)(uintptr_t)p->init : NULL},
        {"deinit", p->deinit ? (const void *)(uintptr_t)p->deinit : NULL},
        {"submitted", p->submitted ? (const void *)(uintptr_t)p->submitted : NULL},
        {"push", (const void *)(uintptr_t)p->push},
        {"pop", (const void *)(uintptr_t)p->pop},
        {"done", p->done ? (const void *)(uintptr_t)p->done : NULL},
    };
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (ptrs[i].addr && !in_loaded_object(ptrs[i].addr))
            return tsr__fail(TSR_EINVAL,
                             "scheduler plug-in '%s': the policy's %s (%p) "
                             "points into no loaded object",
                             path, ptrs[i].what, ptrs[i].addr);
    if (!p->name[0])
        return tsr__fail(TSR_EINVAL, "scheduler plug-in '%s': the policy's name is empty",
                         path);
    return TSR_OK;
}

/* Whether a file (not a directory) is at `path`. */
static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

/* Load the plug-in at `path` (which contains a '/', so dlopen never
 * searches the library path). TSR_ENOTFOUND if there is no such file. */
static int load_file(const char *path, const tsr_sched_policy_t **out, void **dl_out)
{
    (void)dlerror(); /* clear a stale error of this thread */
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *why = dlerror();
        if (!why)
            why = "unknown dlopen error";
        struct stat st;
        if (stat(path, &st) != 0)
            return tsr__fail(TSR_ENOTFOUND, "scheduler plug-in '%s': %s", path, why);
        return tsr__fail(TSR_EINVAL,
                         "scheduler plug-in '%s': cannot be loaded as a shared "
                         "object: %s",
                         path, why);
    }
    (void)dlerror();
    const tsr_sched_policy_t *p = dlsym(dl, PLUGIN_SYMBOL);
    if (!p) {
        dlclose(dl);
        return tsr__fail(TSR_EINVAL,
                         "scheduler plug-in '%s' exports no '" PLUGIN_SYMBOL "'",
                         path);
    }
    int rc = check_policy(path, p);
    if (rc != TSR_OK) {
        dlclose(dl);
        return rc;
    }
    *out = p;
    *dl_out = dl;
    return TSR_OK;
}

/* Look for N's file in directory `dir` (length len, not terminated):
 * libtessera-sched-N.so, then N.so. TSR_ENOTFOUND (no message) if neither
 * is there; otherwise what loading the first one found gives. */
static int load_from_dir(const char *dir, size_t len, const char *name,
                         const tsr_sched_policy_t **out, void **dl_out)
{
    static const char *const patterns[] = {"%.*s/libtessera-sched-%s.so", "%.*s/%s.so"};
    for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++) {
        char path[4096];
        int n = snprintf(path, sizeof path, patterns[i], (int)len, dir, name);
        if (n < 0 || (size_t)n >= sizeof path)
            continue; /* no file can have this name */
        if (file_exists(path))
            return load_file(path, out, dl_out);
    }
    return TSR_ENOTFOUND;
}

/* <libdir>/tessera/sched, <libdir> being where this library was loaded
 * from; false if that cannot be told. */
static bool installed_dir(char *buf, size_t size)
{
    Dl_info info;
    if (!dladdr(&self_anchor, &info) || !info.dli_fname)
        return false;
    const char *slash = strrchr(info.dli_fname, '/');
    if (!slash)
        return false; /* the main program, named without a directory */
    int n = snprintf(buf, size, "%.*s/" PLUGIN_SUBDIR,
                     (int)(slash - info.dli_fname), info.dli_fname);
    return n > 0 && (size_t)n < size;
}

/* A policy by name: the first file found in the search path decides. */
static int load_by_name(const char *name, const tsr_sched_policy_t **out, void **dl_out)
{
    const char *sp = getenv("TESSERA_SCHED_PATH");
    while (sp && *sp) {
        const char *end = strchr(sp, ':');
        size_t len = end ? (size_t)(end - sp) : strlen(sp);
        /* Empty entries are skipped (they do not mean the current
         * directory, as they would in PATH). */
        if (len > 0) {
            int rc = load_from_dir(sp, len, name, out, dl_out);
            if (rc != TSR_ENOTFOUND)
                return rc;
        }
        sp = end ? end + 1 : NULL;
    }
    char dir[4096];
    if (installed_dir(dir, sizeof dir))
        return load_from_dir(dir, strlen(dir), name, out, dl_out);
    return TSR_ENOTFOUND;
}

int tsr__sched_plugin_load(const char *name, const tsr_sched_policy_t **out, void **dl_out)
{
    *out = NULL;
    *dl_out = NULL;
    if (!name || !*name)
        return TSR_ENOTFOUND;
    if (strchr(name, '/'))
        return load_file(name, out, dl_out);
    /* TSR_ENOTFOUND only when no directory holds a file for the name
     * (the caller then lists the built-ins); a file found but unusable is
     * TSR_EINVAL, naming the file. */
    return load_by_name(name, out, dl_out);
}

void tsr__sched_plugin_unload(void *dl)
{
    if (dl)
        dlclose(dl);
}
