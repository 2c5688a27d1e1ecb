/* SPDX-License-Identifier: MIT */
/* run.c - see run.h: the suite's view of the child runner (test/support/child.h). */
#include "config.h"

#include "run.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "child.h"

void run_program(struct run_result *r, const char *const argv[], const char *preload,
                 const char *extra_env, const char *input)
{
    const char *env[] = { extra_env, NULL };
    struct tt_child_spec spec = { .path = argv[0], .argv = argv, .preload = preload,
                                  .env = extra_env ? env : NULL, .input = input ? input : "" };
    struct tt_child c;
    if (tt_child_run(&spec, &c) != 0)
        abort();
    r->status = WIFEXITED(c.status) ? WEXITSTATUS(c.status)
              : WIFSIGNALED(c.status) ? 128 + WTERMSIG(c.status) : -1;
    if (r->status == 127)
        r->status = -1;
    r->out = c.out;
    r->err = c.err;
}

void run_with_args(struct run_result *r, const char *path, const char *preload,
                   const char *extra_env, const char *const args[])
{
    const char *argv[64] = { path };
    size_t n = 1;
    for (; args[n - 1]; n++) {
        if (n == sizeof argv / sizeof argv[0] - 1)
            abort();
        argv[n] = args[n - 1];
    }
    argv[n] = NULL;
    run_program(r, argv, preload, extra_env, NULL);
}

void run_ebizzy(struct run_result *r, const char *preload, const char *extra_env,
                const char *const args[])
{
    run_with_args(r, EBIZZY_PATH, preload, extra_env, args);
}

void run_result_free(struct run_result *r)
{
    free(r->out);
    free(r->err);
}

bool preload_missing(const struct run_result *r)
{
    return strstr(r->err, "cannot be preloaded") != NULL;
}
