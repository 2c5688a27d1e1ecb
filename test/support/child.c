/* SPDX-License-Identifier: MIT */
/* child.c - see child.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* execvpe, memfd_create, pipe2 */
#endif
#include "child.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

extern char **environ;

/* What a child may write before the rest is dropped: no test needs more, and a runaway
 * child must not take the test's memory. */
#define TT_CAPTURE_MAX ((size_t)64 << 20)

struct tt_buf {
    char *p;
    size_t len, cap;
};

static void buf_add(struct tt_buf *b, const char *s, size_t n)
{
    if (b->len + n > TT_CAPTURE_MAX)
        n = TT_CAPTURE_MAX - b->len;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            abort();
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static char *buf_take(struct tt_buf *b, size_t *len)
{
    if (!b->p)
        buf_add(b, "", 0);
    *len = b->len;
    return b->p;
}

static size_t name_len(const char *entry)
{
    const char *eq = strchr(entry, '=');
    return eq ? (size_t)(eq - entry) : strlen(entry);
}

static bool same_name(const char *entry, const char *name, size_t n)
{
    return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

/* The exec'd child's environment (see child.h); the strings it adds go to *OWNED. */
static char **child_env(const struct tt_child_spec *s, char **owned)
{
    static const char *const dropped[] = { "LD_PRELOAD", "TIDE_CONF", "MALLOC_CONF" };
    size_t n = 0, extra = 0;
    while (environ[n])
        n++;
    while (s->env && s->env[extra])
        extra++;
    char **env = calloc(n + extra + 3, sizeof *env);
    if (!env)
        abort();
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool keep = true;
        for (size_t d = 0; d < sizeof dropped / sizeof *dropped && keep; d++)
            keep = !same_name(environ[i], dropped[d], strlen(dropped[d]));
        for (size_t e = 0; e < extra && keep; e++)
            keep = !same_name(environ[i], s->env[e], name_len(s->env[e]));
        if (keep)
            env[k++] = environ[i];
    }
    for (size_t e = 0; e < extra; e++)
        if (strchr(s->env[e], '='))
            env[k++] = (char *)s->env[e];
    owned[0] = owned[1] = NULL;
    /* The test's own TIDE_CONF is the matrix's variant (support.h): the child runs under
     * it too, with CONF's entries after it, so that the test's own settings win. */
    const char *variant = getenv("TIDE_CONF");
    if (variant && !*variant)
        variant = NULL;
    if ((variant || s->conf) &&
        asprintf(&owned[0], "TIDE_CONF=%s%s%s", variant ? variant : "", variant && s->conf && *s->conf ? "," : "",
                 s->conf ? s->conf : "") > 0)
        env[k++] = owned[0];
    if (s->preload && asprintf(&owned[1], "LD_PRELOAD=%s", s->preload) > 0)
        env[k++] = owned[1];
    env[k] = NULL;
    return env;
}

/* The fd the child reads as stdin, or -1 with errno set. */
static int child_stdin(const struct tt_child_spec *s)
{
    if (!s->input)
        return open(s->stdin_path ? s->stdin_path : "/dev/null", O_RDONLY | O_CLOEXEC);
    int fd = memfd_create("tt-child-stdin", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    for (size_t off = 0, n = strlen(s->input); off < n;) {
        ssize_t w = write(fd, s->input + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        off += (size_t)w;
    }
    lseek(fd, 0, SEEK_SET);
    return fd;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads what FD holds now into B; false at end of file or on an error. */
static bool drain(int fd, struct tt_buf *b, bool *got)
{
    char chunk[65536];
    for (;;) {
        ssize_t r = read(fd, chunk, sizeof chunk);
        if (r > 0) {
            buf_add(b, chunk, (size_t)r);
            *got = true;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
}

/* In the child: only async-signal-safe calls (the test may have threads).  PARENT is the
 * test process: if Criterion kills it at a .timeout, its hang detector dies with it, so
 * the child is killed too rather than left running with no limit.  (The signal follows
 * the thread that forked; tt_child_run() returns only after the child has ended.) */
static void __attribute__((noreturn)) child_main(const struct tt_child_spec *s, char **env, int in, int out, int err,
                                                 pid_t parent)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(126);
    if (dup2(in, 0) < 0 || (out >= 0 && (dup2(out, 1) < 0 || dup2(err, 2) < 0)))
        _exit(126);
    if (s->cwd && chdir(s->cwd) != 0)
        _exit(126);
    if (!s->path)
        _exit(s->fn(s->arg));
    if (s->fixed_layout) {
        int persona = personality(0xffffffff);
        if (persona != -1)
            personality((unsigned long)persona | ADDR_NO_RANDOMIZE);
    }
    const char *argv0[] = { s->path, NULL };
    char *const *argv = (char *const *)(s->argv ? s->argv : argv0);
    if (strchr(s->path, '/'))
        execve(s->path, argv, env);
    else
        execvpe(s->path, argv, env);
    _exit(127);
}

int tt_child_run(const struct tt_child_spec *s, struct tt_child *c)
{
    memset(c, 0, sizeof *c);
    bool capture = !s->keep_output;
    int in = child_stdin(s), out[2] = { -1, -1 }, err[2] = { -1, -1 };
    if (in < 0)
        return errno;
    if (capture && (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)) {
        int e = errno;
        close(in);
        for (int i = 0; i < 2; i++)
            if (out[i] >= 0)
                close(out[i]);
        return e;
    }
    char *owned[2] = { NULL, NULL };
    char **env = s->path ? child_env(s, owned) : NULL;
    fflush(NULL); /* nothing buffered here is written twice */
    pid_t parent = getpid(), pid = fork();
    if (pid == 0)
        child_main(s, env, in, out[1], err[1], parent);
    int fork_err = errno;
    close(in);
    free(env);
    free(owned[0]);
    free(owned[1]);
    if (capture) {
        close(out[1]);
        close(err[1]);
    }
    if (pid < 0) {
        if (capture) {
            close(out[0]);
            close(err[0]);
        }
        return fork_err;
    }

    struct tt_buf ob = { 0 }, eb = { 0 };
    int fds[2] = { out[0], err[0] };
    struct tt_buf *bufs[2] = { &ob, &eb };
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
    /* The child's end shows as a readable pidfd, so a grandchild that keeps the pipes
     * open cannot keep the runner waiting; without pidfds, waitpid is polled. */
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    int64_t start = now_ms(), last_output = start;
    bool exited = false, reaped = false;
    int status = 0;
    while (!exited && (s->timeout_s || s->silence_s || fds[0] >= 0 || fds[1] >= 0)) {
        int64_t now = now_ms(), due = INT64_MAX, wait = -1;
        if (s->timeout_s)
            due = start + s->timeout_s * 1000LL;
        if (s->silence_s && capture && last_output + s->silence_s * 1000LL < due)
            due = last_output + s->silence_s * 1000LL;
        if (due != INT64_MAX && !c->hung) {
            if (now >= due) {
                kill(pid, SIGKILL);
                c->hung = true;
            } else {
                wait = due - now;
            }
        }
        if (pidfd < 0)
            wait = wait < 0 || wait > 50 ? 50 : wait;
        struct pollfd p[3];
        int np = 0, at[2] = { -1, -1 };
        for (int i = 0; i < 2; i++)
            if (fds[i] >= 0) {
                at[i] = np;
                p[np++] = (struct pollfd){ fds[i], POLLIN, 0 };
            }
        if (pidfd >= 0)
            p[np++] = (struct pollfd){ pidfd, POLLIN, 0 };
        if (poll(p, (nfds_t)np, (int)wait) < 0 && errno != EINTR)
            break;
        bool got = false;
        for (int i = 0; i < 2; i++)
            if (at[i] >= 0 && p[at[i]].revents && !drain(fds[i], bufs[i], &got)) {
                close(fds[i]);
                fds[i] = -1;
            }
        if (got)
            last_output = now_ms();
        if (pidfd >= 0 && p[np - 1].revents)
            exited = true;
        if (pidfd < 0 && waitpid(pid, &status, WNOHANG) == pid)
            exited = reaped = true;
    }
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0) {
            bool got = false;
            drain(fds[i], bufs[i], &got);
            close(fds[i]);
        }
    if (pidfd >= 0)
        close(pidfd);
    while (!reaped && waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    c->status = status;
    c->out = buf_take(&ob, &c->outlen);
    c->err = buf_take(&eb, &c->errlen);
    return 0;
}

void tt_child_free(struct tt_child *c)
{
    free(c->out);
    free(c->err);
    c->out = c->err = NULL;
}

bool tt_child_exited(const struct tt_child *c, int code)
{
    return !c->hung && WIFEXITED(c->status) && WEXITSTATUS(c->status) == code;
}

bool tt_child_signalled(const struct tt_child *c, int sig)
{
    return !c->hung && WIFSIGNALED(c->status) && WTERMSIG(c->status) == sig;
}

const char *tt_wait_status(int st, char *buf, size_t len)
{
    if (WIFEXITED(st))
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        snprintf(buf, len, "ended with wait status %#x", st);
    return buf;
}

const char *tt_child_how(const struct tt_child *c, char *buf, size_t len)
{
    if (c->hung) {
        snprintf(buf, len, "hung, and was killed");
        return buf;
    }
    return tt_wait_status(c->status, buf, len);
}

void tt_child_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
    const char *base = strrchr(file, '/');
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "%s:%d: %s: ", base ? base + 1 : file, line, cond);
    if (n < 0 || n > (int)sizeof buf - 2)
        n = (int)sizeof buf - 2;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m > 0)
        n += m;
    if (n > (int)sizeof buf - 2)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    if (write(2, buf, (size_t)n) < 0)
        _exit(2);
    _exit(1);
}

static char *read_memfd(int fd)
{
    off_t n = lseek(fd, 0, SEEK_END);
    char *s = malloc(n > 0 ? (size_t)n + 1 : 1);
    if (!s)
        abort();
    size_t got = 0;
    while (n > 0 && got < (size_t)n) {
        ssize_t r = pread(fd, s + got, (size_t)n - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    s[got] = '\0';
    return s;
}

void tt_capture(void (*fn)(void *arg), void *arg, char **out, char **err)
{
    int m[2] = { memfd_create("tt-capture-out", MFD_CLOEXEC), memfd_create("tt-capture-err", MFD_CLOEXEC) };
    if (m[0] < 0 || m[1] < 0)
        abort();
    fflush(stdout);
    fflush(stderr);
    int saved[2] = { dup(1), dup(2) };
    dup2(m[0], 1);
    dup2(m[1], 2);
    fn(arg);
    fflush(stdout);
    fflush(stderr);
    dup2(saved[0], 1);
    dup2(saved[1], 2);
    char **res[2] = { out, err };
    for (int i = 0; i < 2; i++) {
        close(saved[i]);
        if (res[i])
            *res[i] = read_memfd(m[i]);
        close(m[i]);
    }
}
