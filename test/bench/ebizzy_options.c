/* SPDX-License-Identifier: MIT */
/*
 * ebizzy_options.c - bench/ebizzy's command line: every mistake prints the usage
 * on stderr and exits 1 before anything runs, and --help lists the extensions.
 */
#include "config.h"

#include <criterion/criterion.h>
#include <string.h>

#include "run.h"

/* ebizzy ARGS must fail with exit 1, the usage on stderr and nothing on stdout. */
static void expect_usage_error(const char *const args[], const char *message)
{
    struct run_result r;
    run_ebizzy(&r, NULL, NULL, args);
    cr_expect_eq(r.status, 1, "ebizzy %s %s: exit %d, expected 1", args[0],
                 args[1] ? args[1] : "", r.status);
    cr_expect(strstr(r.err, "usage: ebizzy") != NULL, "ebizzy %s: no usage on stderr:\n%s",
              args[0], r.err);
    cr_expect_str_empty(r.out, "ebizzy %s: wrote to stdout:\n%s", args[0], r.out);
    if (message)
        cr_expect(strstr(r.err, message) != NULL, "ebizzy %s: stderr lacks \"%s\":\n%s",
                  args[0], message, r.err);
    run_result_free(&r);
}

#define EXPECT_USAGE_ERROR(message, ...) \
    expect_usage_error((const char *const[]){ __VA_ARGS__, NULL }, message)

Test(ebizzy_options, zero_values)
{
    EXPECT_USAGE_ERROR("-t must not be 0", "-t", "0");
    EXPECT_USAGE_ERROR("-n must not be 0", "-n", "0");
    EXPECT_USAGE_ERROR("-s must not be 0", "-s", "0");
    EXPECT_USAGE_ERROR("-S must not be 0", "-S", "0");
    EXPECT_USAGE_ERROR("--realloc must not be 0", "--realloc=0");
}

Test(ebizzy_options, unknown_options)
{
    EXPECT_USAGE_ERROR("invalid option", "-x");
    EXPECT_USAGE_ERROR("unrecognized option", "--bogus");
    EXPECT_USAGE_ERROR("unexpected argument 'extra'", "-S", "1", "extra");
}

Test(ebizzy_options, m_with_M)
{
    EXPECT_USAGE_ERROR("-m and -M", "-m", "-M");
    EXPECT_USAGE_ERROR("-m and -M", "-M", "-S", "1", "-m");
}

Test(ebizzy_options, bad_values)
{
    EXPECT_USAGE_ERROR("-t: invalid value 'abc'", "-t", "abc");
    EXPECT_USAGE_ERROR("-t: invalid value '-2'", "-t", "-2");
    EXPECT_USAGE_ERROR("-S: invalid value '1x'", "-S", "1x");
    EXPECT_USAGE_ERROR("-n: invalid value ''", "-n", "");
    EXPECT_USAGE_ERROR("-s: invalid value", "-s", "99999999999999999999999");
    EXPECT_USAGE_ERROR("-t: invalid value", "-t", "100000");
    EXPECT_USAGE_ERROR("at least one 8-byte record", "-s", "7");
    EXPECT_USAGE_ERROR("requires an argument", "-t");
    EXPECT_USAGE_ERROR("--realloc: invalid value 'big'", "--realloc=big");
    EXPECT_USAGE_ERROR("invalid seed 'abc'", "--random=abc");
    EXPECT_USAGE_ERROR("invalid seed '-1'", "--random=-1");
    EXPECT_USAGE_ERROR("cannot be used with -m", "-m", "--realloc=4096");
}

Test(ebizzy_options, help_lists_everything)
{
    struct run_result r;
    run_ebizzy(&r, NULL, NULL, (const char *const[]){ "--help", NULL });
    cr_assert_eq(r.status, 0, "--help: exit %d", r.status);
    static const char *const options[] = {
        "-t N", "-n N", "-s N", "-S N", "-R", "-m", "-M", "-p", "-P", "-T", "-l", "-z", "-v",
        "--random[=SEED]", "--realloc=STEP", "--fork", "--json", "--help",
    };
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
        cr_expect(strstr(r.out, options[i]) != NULL, "--help does not list %s", options[i]);
    run_result_free(&r);
}
