/* tests/shim/runner.c — the runner behind the Criterion stand-in: runs each
 * registered test in a forked child and prints Criterion's synthesis line. */
#include "criterion/criterion.h"

#include <stdarg.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_TESTS 256
#define EXIT_SKIP 77

typedef struct {
    const char *suite, *name;
    void (*fn)(void);
} shim_test_t;
static shim_test_t tests[MAX_TESTS];
static int ntests;

void shim_register(const char *suite, const char *name, void (*fn)(void))
{
    if (ntests < MAX_TESTS)
        tests[ntests++] = (shim_test_t){suite, name, fn};
}

void shim_fail(const char *file, int line, const char *expr, const char *fmt, ...)
{
    fprintf(stderr, "[----] %s:%d: Assertion failed: %s\n", file, line, expr);
    if (fmt && *fmt) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "[----]   ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
    }
    fflush(stderr);
    _exit(1);
}

void shim_skip(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[SKIP] ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(stderr);
    _exit(EXIT_SKIP);
}

void shim_log(const char *level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[%s] ", level);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    int passed = 0, failed = 0, crashed = 0, skipped = 0;
    for (int i = 0; i < ntests; i++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            tests[i].fn();
            fflush(NULL);
            _exit(0);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            passed++;
        } else if (WIFEXITED(st) && WEXITSTATUS(st) == EXIT_SKIP) {
            skipped++;
        } else {
            failed++;
            if (WIFSIGNALED(st))
                crashed++;
            fprintf(stderr, "[FAIL] %s::%s%s\n", tests[i].suite, tests[i].name,
                    WIFSIGNALED(st) ? ": CRASH!" : "");
        }
    }
    fprintf(stderr, "[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | "
                    "Crashing: %d \n",
            passed + failed, passed, failed, crashed);
    return failed ? 1 : 0;
}
