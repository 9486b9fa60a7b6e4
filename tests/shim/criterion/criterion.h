/* tests/shim/criterion/criterion.h — a small stand-in for Criterion's test
 * macros, used only by the ThreadSanitizer build: Criterion's own runner
 * does not start under TSan. Each test runs in a forked child, as with
 * Criterion, and the runner prints Criterion's synthesis line.
 *
 * It must stay a strict subset of Criterion: a test that compiles against
 * this header compiles against the real one with the same meaning.
 */
#ifndef TSR_CRITERION_SHIM_H
#define TSR_CRITERION_SHIM_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void shim_register(const char *suite, const char *name, void (*fn)(void));
void shim_fail(const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((noreturn));
void shim_skip(const char *fmt, ...) __attribute__((noreturn));
void shim_log(const char *level, const char *fmt, ...);

#define Test(suite, name, ...)                                                  \
    static void suite##_##name##_impl(void);                                    \
    __attribute__((constructor)) static void suite##_##name##_reg(void)         \
    {                                                                           \
        shim_register(#suite, #name, suite##_##name##_impl);                    \
    }                                                                           \
    static void suite##_##name##_impl(void)

#define cr_assert(cond, ...)                                                    \
    do {                                                                        \
        if (!(cond))                                                            \
            shim_fail(__FILE__, __LINE__, #cond, "" __VA_ARGS__);               \
    } while (0)
#define cr_assert_not(cond, ...) cr_assert(!(cond), __VA_ARGS__)
#define cr_assert_eq(a, b, ...) cr_assert((a) == (b), __VA_ARGS__)
#define cr_assert_neq(a, b, ...) cr_assert((a) != (b), __VA_ARGS__)
#define cr_assert_lt(a, b, ...) cr_assert((a) < (b), __VA_ARGS__)
#define cr_assert_leq(a, b, ...) cr_assert((a) <= (b), __VA_ARGS__)
#define cr_assert_gt(a, b, ...) cr_assert((a) > (b), __VA_ARGS__)
#define cr_assert_geq(a, b, ...) cr_assert((a) >= (b), __VA_ARGS__)
#define cr_assert_null(a, ...) cr_assert((a) == NULL, __VA_ARGS__)
#define cr_assert_not_null(a, ...) cr_assert((a) != NULL, __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) cr_assert(strcmp((a), (b)) == 0, __VA_ARGS__)
#define cr_assert_float_eq(a, b, eps, ...)                                      \
    cr_assert(fabs((double)(a) - (double)(b)) <= (double)(eps), __VA_ARGS__)
#define cr_expect cr_assert
#define cr_expect_eq cr_assert_eq
#define cr_expect_geq cr_assert_geq
#define cr_expect_leq cr_assert_leq
#define cr_expect_neq cr_assert_neq
#define cr_expect_lt cr_assert_lt
#define cr_expect_gt cr_assert_gt
#define cr_expect_null cr_assert_null
#define cr_expect_not_null cr_assert_not_null
#define cr_expect_str_eq cr_assert_str_eq
#define cr_skip_test(...) shim_skip("" __VA_ARGS__)
#define cr_log_info(...) shim_log("INFO", __VA_ARGS__)
#define cr_log_warn(...) shim_log("WARN", __VA_ARGS__)
#define cr_log_error(...) shim_log("ERROR", __VA_ARGS__)

#endif
