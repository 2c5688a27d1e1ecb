/* SPDX-License-Identifier: MIT */
/*
 * child.c - the test harness's child runner (test/support/child.c) by itself.
 *
 * A test that Criterion kills at its .timeout must not leave the child it was running
 * behind: that child has no hang detector of its own once its test is gone, and one was
 * found running for 76 minutes, holding 13 GB, while CI ran beside it.
 */
#include "support.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static int report_fd = -1;

/* The child of the "test": says who it is, then waits to be killed. */
static int sleeper(void *arg)
{
    (void)arg;
    pid_t me = getpid();
    if (write(report_fd, &me, sizeof me) != sizeof me)
        return 2;
    for (;;)
        pause();
}

/* Stands for a test process: runs SLEEPER through tt_child_run() with no hang detector. */
static void __attribute__((noreturn)) test_process(void)
{
    struct tt_child_spec spec = { .fn = sleeper, .keep_output = true };
    struct tt_child c;
    tt_child_run(&spec, &c);
    _exit(0);
}

Test(child, a_killed_test_takes_its_child_with_it, .timeout = 120)
{
    /* The grandchild is re-parented to this process when its parent dies, so that it
     * can be waited for here. */
    cr_assert(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
    int p[2];
    cr_assert(pipe(p) == 0);
    report_fd = p[1];
    pid_t test = fork();
    cr_assert(test >= 0);
    if (test == 0)
        test_process();
    close(p[1]);
    pid_t grandchild = 0;
    cr_assert(read(p[0], &grandchild, sizeof grandchild) == sizeof grandchild);
    close(p[0]);

    kill(test, SIGKILL); /* as Criterion does at a .timeout */
    int st;
    cr_assert(waitpid(test, &st, 0) == test);

    /* The grandchild must die of it; a bounded wait, so that a failure does not become
     * an orphan in its turn. */
    pid_t got = 0;
    for (int i = 0; i < 600 && got == 0; i++) {
        got = waitpid(grandchild, &st, WNOHANG);
        if (got == 0)
            usleep(100 * 1000);
    }
    if (got == 0) {
        kill(grandchild, SIGKILL);
        waitpid(grandchild, &st, 0);
        cr_assert_fail("the child of a killed test was still running a minute later");
    }
    cr_assert(got == grandchild && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
              "the child of a killed test ended with status %#x", st);
}
