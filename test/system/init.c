/* init.c - tide starts up wherever its first call comes from. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int run(const char *mode, const char *preload)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (preload)
            setenv("LD_PRELOAD", preload, 1);
        execl(INIT_PROBE, INIT_PROBE, mode, (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

Test(init, from_another_librarys_constructor) { cr_expect_eq(run("ctor", NULL), 0); }
Test(init, from_dlsym_as_the_first_call) { cr_expect_eq(run("dlsym", NULL), 0); }
Test(init, from_the_dynamic_loader_under_ld_preload) { cr_expect_eq(run("dlopen", TIDE_LIB), 0); }
Test(init, from_tls_destructors_without_leaking, .timeout = 60) { cr_expect_eq(run("tls", NULL), 0); }
