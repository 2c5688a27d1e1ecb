/* SPDX-License-Identifier: MIT */
/*
 * criterion/criterion.h - the part of Criterion's interface the multithreaded suites use,
 * for their ThreadSanitizer build only (test/tsan.mk; test/tsan/runner.c runs them).
 *
 * Criterion 2.4 cannot start under TSan (its runner maps an arena where TSan keeps its
 * shadow memory, Criterion issue #274), so check-tsan builds those suites against this
 * header instead, put first on their include path.  It keeps what the suites rely on:
 * Test(suite, name, .timeout/.init/.fini/.description/.disabled), each test in a forked
 * process of its own; cr_assert* (the test ends, failed), cr_expect* (it fails at its
 * end), cr_skip_test, cr_log_*.  Assertions run on the test's own thread, as with
 * Criterion (test/support/support.h's tt_fail is for the others).
 */
#ifndef TIDE_TSAN_CRITERION_H
#define TIDE_TSAN_CRITERION_H

#include <stdbool.h>

struct tt_cr_opts {
    void (*init)(void);
    void (*fini)(void);
    double timeout; /* seconds; 0: the runner's default */
    const char *description;
    bool disabled;
};

struct tt_cr_test {
    const char *suite, *name;
    void (*fn)(void);
    struct tt_cr_opts opts;
    struct tt_cr_test *next;
};

void tt_cr_register(struct tt_cr_test *t);
void tt_cr_fail(bool fatal, const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void tt_cr_skip(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void tt_cr_log(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define Test(suite, name, ...)                                                                               \
    static void tt_cr_fn_##suite##_##name(void);                                                             \
    static struct tt_cr_test tt_cr_test_##suite##_##name = {                                                 \
        #suite, #name, tt_cr_fn_##suite##_##name, { __VA_ARGS__ }, 0                                         \
    };                                                                                                       \
    __attribute__((constructor)) static void tt_cr_reg_##suite##_##name(void)                                \
    {                                                                                                        \
        tt_cr_register(&tt_cr_test_##suite##_##name);                                                        \
    }                                                                                                        \
    static void tt_cr_fn_##suite##_##name(void)

/* The message, when given, is a string literal and its arguments (as the suites write
 * it); the leading " " keeps an absent one from being an empty format. */
#define tt_cr_check_(fatal, cond, expr, ...)                                                                 \
    do {                                                                                                     \
        if (!(cond))                                                                                         \
            tt_cr_fail((fatal), __FILE__, __LINE__, (expr), " " __VA_ARGS__);                                \
    } while (0)

#define cr_assert(cond, ...) tt_cr_check_(true, cond, #cond, __VA_ARGS__)
#define cr_expect(cond, ...) tt_cr_check_(false, cond, #cond, __VA_ARGS__)
#define cr_assert_fail(...) tt_cr_check_(true, 0, "cr_assert_fail", __VA_ARGS__)
#define cr_expect_fail(...) tt_cr_check_(false, 0, "cr_expect_fail", __VA_ARGS__)
#define cr_assert_not(cond, ...) tt_cr_check_(true, !(cond), "!(" #cond ")", __VA_ARGS__)
#define cr_expect_not(cond, ...) tt_cr_check_(false, !(cond), "!(" #cond ")", __VA_ARGS__)
#define tt_cr_cmp_(fatal, a, op, b, ...) tt_cr_check_(fatal, (a)op(b), #a " " #op " " #b, __VA_ARGS__)
#define cr_assert_eq(a, b, ...) tt_cr_cmp_(true, a, ==, b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) tt_cr_cmp_(true, a, !=, b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) tt_cr_cmp_(true, a, <, b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) tt_cr_cmp_(true, a, <=, b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) tt_cr_cmp_(true, a, >, b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) tt_cr_cmp_(true, a, >=, b, __VA_ARGS__)
#define cr_expect_eq(a, b, ...) tt_cr_cmp_(false, a, ==, b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...) tt_cr_cmp_(false, a, !=, b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...) tt_cr_cmp_(false, a, <, b, __VA_ARGS__)
#define cr_expect_leq(a, b, ...) tt_cr_cmp_(false, a, <=, b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...) tt_cr_cmp_(false, a, >, b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...) tt_cr_cmp_(false, a, >=, b, __VA_ARGS__)
#define cr_assert_null(p, ...) tt_cr_check_(true, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...) tt_cr_check_(true, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_expect_null(p, ...) tt_cr_check_(false, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_expect_not_null(p, ...) tt_cr_check_(false, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) tt_cr_check_(true, strcmp((a), (b)) == 0, #a " equals " #b, __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...) tt_cr_check_(false, strcmp((a), (b)) == 0, #a " equals " #b, __VA_ARGS__)

#define cr_skip_test(...) tt_cr_skip(" " __VA_ARGS__)
#define cr_log_info(...) tt_cr_log("----", __VA_ARGS__)
#define cr_log_warn(...) tt_cr_log("WARN", __VA_ARGS__)
#define cr_log_error(...) tt_cr_log("ERR ", __VA_ARGS__)

#endif /* TIDE_TSAN_CRITERION_H */
