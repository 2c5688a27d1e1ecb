/* SPDX-License-Identifier: MIT */
/*
 * run.h - run bench/ebizzy (or any program) in a child process, with a
 * chosen LD_PRELOAD, and capture its exit status, stdout and stderr for the tests.
 */
#ifndef TIDE_TEST_BENCH_RUN_H
#define TIDE_TEST_BENCH_RUN_H

#include <stdbool.h>

struct run_result {
    int status;   /* exit code; 128 + signal number if killed; -1 if it could not start */
    char *out;    /* everything written to stdout, NUL-terminated */
    char *err;    /* everything written to stderr, NUL-terminated */
};

/* Run argv[0] (found through PATH) with LD_PRELOAD=preload (NULL: none; the caller's
 * LD_PRELOAD, TIDE_CONF and MALLOC_CONF are never passed on), extra_env ("NAME=value",
 * may be NULL) and input on stdin (NULL: empty). */
void run_program(struct run_result *r, const char *const argv[], const char *preload,
                 const char *extra_env, const char *input);

/* PATH with the given arguments (NULL-terminated, without argv[0]). */
void run_with_args(struct run_result *r, const char *path, const char *preload,
                   const char *extra_env, const char *const args[]);

/* bench/ebizzy with the given arguments (NULL-terminated, without argv[0]). */
void run_ebizzy(struct run_result *r, const char *preload, const char *extra_env,
                const char *const args[]);

void run_result_free(struct run_result *r);

/* Whether a preload failed because the library does not exist (ld.so's message). */
bool preload_missing(const struct run_result *r);

#endif
