/* SPDX-License-Identifier: MIT */
/*
 * runner.c - main() of the multithreaded suites' ThreadSanitizer build (test/tsan.mk),
 * in place of Criterion's runner, which cannot start under TSan (Criterion issue #274).
 *
 *   SUITE [--filter=GLOB] [--list] [--timeout-scale=N]
 *
 * Each test of the suite whose "suite/name" GLOB matches (fnmatch with FNM_EXTMATCH:
 * '@(a|b)', '!(a)' and the rest of ksh's patterns; default: all) runs in a forked process
 * of its own, as with Criterion (tests rely on it: static state, forked children, a
 * failed assertion ends the process), in a process group of its own, which is killed
 * after the test's .timeout times N seconds (TSan makes the code several times slower;
 * N defaults to 1).  Each prints a line PASS, FAIL or SKIP; the status is 0 only when at
 * least one test ran and none failed.  A test process that TSan reported a race in exits
 * with TSan's status (66), so the test fails.  This file runs in the test's process but is
 * built without the suites' tide_ names (test/tsan/tide_names.h): it allocates with the C
 * library's malloc, that is TSan's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* FNM_EXTMATCH, strsignal */
#endif
#include <errno.h>
#include <fnmatch.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "criterion/criterion.h"

enum { EXIT_FAILED = 1, EXIT_SKIPPED = 77 };

static struct tt_cr_test *first, **last = &first;
static bool expect_failed; /* in the test's process: a cr_expect failed */

void tt_cr_register(struct tt_cr_test *t)
{
    *last = t;
    last = &t->next;
}

void tt_cr_fail(bool fatal, const char *file, int line, const char *expr, const char *fmt, ...)
{
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s:%d: %s failed: %s:%s\n", file, line, fatal ? "assertion" : "expectation", expr, msg);
    fflush(NULL);
    if (fatal)
        _exit(EXIT_FAILED);
    expect_failed = true;
}

void tt_cr_skip(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "skipped:");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(NULL);
    _exit(EXIT_SKIPPED);
}

void tt_cr_log(const char *level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[%s] ", level);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Runs T in a child; returns 0 passed, 1 failed, 2 skipped. */
static int run(const struct tt_cr_test *t, double scale)
{
    fflush(NULL);
    double t0 = now();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "[FAIL] %s::%s: fork: %s\n", t->suite, t->name, strerror(errno));
        return 1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        if (t->opts.init)
            t->opts.init();
        t->fn();
        if (t->opts.fini)
            t->opts.fini();
        fflush(NULL);
        exit(expect_failed ? EXIT_FAILED : 0); /* (TSan's exit turns 0 into 66 after a report) */
    }
    setpgid(pid, pid); /* (either of the two calls may come first) */
    double limit = t->opts.timeout > 0 ? t->opts.timeout * scale : 0;
    int st;
    bool hung = false;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            fprintf(stderr, "[FAIL] %s::%s: waitpid: %s\n", t->suite, t->name, strerror(errno));
            return 1;
        }
        if (!hung && limit > 0 && now() - t0 > limit) {
            hung = true;
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
        }
        nanosleep(&(struct timespec){ 0, 20 * 1000 * 1000 }, NULL);
    }
    kill(-pid, SIGKILL); /* whatever the test left behind in its group */
    double secs = now() - t0;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        printf("[PASS] %s::%s (%.2f s)\n", t->suite, t->name, secs);
        return 0;
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == EXIT_SKIPPED) {
        printf("[SKIP] %s::%s\n", t->suite, t->name);
        return 2;
    }
    if (hung)
        printf("[FAIL] %s::%s: timed out after %.0f s (.timeout %g s x %g)\n", t->suite, t->name, secs,
               t->opts.timeout, scale);
    else if (WIFSIGNALED(st))
        printf("[FAIL] %s::%s: killed by signal %d (%s) after %.2f s\n", t->suite, t->name, WTERMSIG(st),
               strsignal(WTERMSIG(st)), secs);
    else
        printf("[FAIL] %s::%s: exit status %d after %.2f s%s\n", t->suite, t->name, WEXITSTATUS(st), secs,
               WEXITSTATUS(st) == 66 ? " (ThreadSanitizer's: it reported something)" : "");
    return 1;
}

int main(int argc, char **argv)
{
    const char *filter = "*";
    double scale = 1;
    bool list = false;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--filter=", 9) == 0)
            filter = argv[i] + 9;
        else if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc)
            filter = argv[++i];
        else if (strncmp(argv[i], "--timeout-scale=", 16) == 0 && atof(argv[i] + 16) > 0)
            scale = atof(argv[i] + 16);
        else if (strcmp(argv[i], "--list") == 0)
            list = true;
        else {
            fprintf(stderr, "usage: %s [--filter=GLOB] [--list] [--timeout-scale=N]\n", argv[0]);
            return 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    int ran = 0, failed = 0, skipped = 0;
    for (const struct tt_cr_test *t = first; t; t = t->next) {
        char full[512];
        snprintf(full, sizeof full, "%s/%s", t->suite, t->name);
        if (t->opts.disabled || fnmatch(filter, full, FNM_EXTMATCH) != 0)
            continue;
        if (list) {
            printf("%s\n", full);
            continue;
        }
        int r = run(t, scale);
        ran++;
        failed += r == 1;
        skipped += r == 2;
    }
    if (list)
        return 0;
    printf("Synthesis: Tested: %d | Passing: %d | Failing: %d | Skipped: %d\n", ran, ran - failed - skipped,
           failed, skipped);
    if (ran == 0)
        fprintf(stderr, "%s: no test matches '%s'\n", argv[0], filter);
    return ran == 0 || failed ? 1 : 0;
}
