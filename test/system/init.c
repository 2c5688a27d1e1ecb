/* SPDX-License-Identifier: MIT */
/* init.c - tide starts up wherever its first call comes from. */
#include <criterion/criterion.h>
#include <sys/wait.h>

#include "support.h"

static int run(const char *mode, const char *preload)
{
    const char *argv[] = {INIT_PROBE, mode, NULL};
    struct tt_child_spec spec = {.path = INIT_PROBE, .argv = argv, .preload = preload, .keep_output = true};
    struct tt_child c;
    cr_assert(tt_child_run(&spec, &c) == 0);
    return WIFEXITED(c.status) ? WEXITSTATUS(c.status) : 128 + WTERMSIG(c.status);
}

Test(init, from_another_librarys_constructor) { cr_expect_eq(run("ctor", NULL), 0); }
Test(init, from_dlsym_as_the_first_call) { cr_expect_eq(run("dlsym", NULL), 0); }
Test(init, from_the_dynamic_loader_under_ld_preload) { cr_expect_eq(run("dlopen", TIDE_LIB), 0); }
Test(init, from_tls_destructors_without_leaking, .timeout = 60) { cr_expect_eq(run("tls", NULL), 0); }
