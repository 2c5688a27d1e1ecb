/* run.c - see run.h. */
#include "config.h"

#include "run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Files, not pipes: the child may write a lot to both streams, and files cannot fill up. */
static char *slurp(FILE *f)
{
    long n;
    if (fflush(f) != 0 || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0)
        abort();
    char *buf = malloc((size_t)n + 1);
    if (!buf)
        abort();
    rewind(f);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n)
        abort();
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static bool inherited_allocator_setting(const char *entry)
{
    static const char *const names[] = { "LD_PRELOAD=", "TIDE_CONF=", "MALLOC_CONF=" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strncmp(entry, names[i], strlen(names[i])) == 0)
            return true;
    return false;
}

void run_program(struct run_result *r, const char *const argv[], const char *preload,
                 const char *extra_env, const char *input)
{
    FILE *in = tmpfile(), *out = tmpfile(), *err = tmpfile();
    if (!in || !out || !err)
        abort();
    if (input && (fputs(input, in) == EOF || fflush(in) != 0))
        abort();
    rewind(in);

    size_t n = 0;
    while (environ[n])
        n++;
    char **envp = calloc(n + 3, sizeof *envp);
    char *preload_entry = NULL;
    if (!envp)
        abort();
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!inherited_allocator_setting(environ[i]))
            envp[k++] = environ[i];
    if (preload) {
        if (asprintf(&preload_entry, "LD_PRELOAD=%s", preload) < 0)
            abort();
        envp[k++] = preload_entry;
    }
    if (extra_env)
        envp[k++] = (char *)extra_env;

    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        abort();
    if (pid == 0) {
        dup2(fileno(in), 0);
        dup2(fileno(out), 1);
        dup2(fileno(err), 2);
        environ = envp;
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid)
        abort();
    r->status = WIFEXITED(status) ? WEXITSTATUS(status)
              : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
    if (r->status == 127)
        r->status = -1;
    fclose(in);
    r->out = slurp(out);
    r->err = slurp(err);
    free(preload_entry);
    free(envp);
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
