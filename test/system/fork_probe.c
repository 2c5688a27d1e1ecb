/* SPDX-License-Identifier: MIT */
/*
 * fork_probe.c - programs that fork the ways real programs do, for test/system/fork.c.
 *
 *   fork_probe sigfork N
 *       Single-threaded (unless TIDE_CONF says background:on): a SIGALRM handler, every
 *       3 ms, forks, and the child _exits at once, while the main loop calls every tide
 *       entry point in turn, so that the handler interrupts each of them with its locks
 *       held.  POSIX lets a signal handler fork; the child may only call
 *       async-signal-safe functions.
 *   fork_probe stdio N [popen] [system] [spawn] [dlopen]
 *       One thread forks in a loop (each child allocates, frees and _exits), one calls
 *       fflush(NULL) in a loop, one reads lines with getline() from a FILE: the cycle of
 *       glibc bug 19431 (fork -> stdio list lock -> FILE lock -> realloc -> malloc lock)
 *       if the allocator's fork handler takes its locks before the stdio list lock.  The
 *       extra words add a thread each that runs popen/pclose, system, posix_spawn or
 *       dlopen/dlclose in a loop.
 *
 * Both print "forks K" every 50 forks and at the end, so that the test can tell a hang
 * (no progress) from a slow machine, and exit 0 after N forks.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tide.h"

extern char **environ;
/* C23; glibc 2.36 does not declare it, tide exports it. */
void free_sized(void *ptr, size_t size);

static void progress(long forks)
{
    /* write(2), not stdio: the signal handler of sigfork calls this too. */
    char buf[32];
    int n = snprintf(buf, sizeof buf, "forks %ld\n", forks);
    if (write(1, buf, (size_t)n) < 0)
        _exit(3);
}

/* ---- sigfork -------------------------------------------------------------------------- */

static volatile sig_atomic_t sig_forks, sig_failed;

static void on_alarm(int sig)
{
    (void)sig;
    int saved = errno;
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    if (pid < 0) {
        sig_failed = 1;
    } else {
        sig_forks++;
        if (sig_forks % 50 == 0)
            progress(sig_forks);
    }
    errno = saved;
}

/* One round of every entry point, with small, large and aligned sizes. */
static void every_call(void **slot, unsigned k, uint64_t r)
{
    size_t small = (size_t)(r >> 20) % 4096 + 1, large = (size_t)(r >> 24) % (4u << 20) + 65537;
    size_t n = (r & 3) == 0 ? large : small;
    switch ((r >> 8) % 16) {
    case 0:
        free(slot[k]);
        slot[k] = malloc(n);
        break;
    case 1:
        free(slot[k]);
        slot[k] = calloc(1, n);
        break;
    case 2:
        slot[k] = realloc(slot[k], n);
        break;
    case 3:
        free(slot[k]);
        slot[k] = NULL;
        if (posix_memalign(&slot[k], 64u << ((r >> 12) % 8), n) != 0)
            slot[k] = NULL;
        break;
    case 4:
        free(slot[k]);
        slot[k] = aligned_alloc(4096, n);
        break;
    case 5:
        free(slot[k]);
        slot[k] = memalign(256, n);
        break;
    case 6:
        free(slot[k]);
        slot[k] = valloc(n);
        break;
    case 7:
        if (slot[k])
            free_sized(slot[k], malloc_usable_size(slot[k]));
        slot[k] = malloc(n);
        break;
    case 8:
        slot[k] = reallocarray(slot[k], 2, n);
        break;
    case 9:
        if ((r >> 16) % 64 == 0)
            malloc_trim(0);
        break;
    case 10:
        if ((r >> 16) % 64 == 0)
            tide_purge();
        break;
    case 11: {
        struct mallinfo2 mi = mallinfo2();
        (void)mi;
        tide_stats_t st;
        tide_stats_get(&st, sizeof st);
        break;
    }
    case 12:
        if ((r >> 16) % 64 == 0 && tide_check() != 0)
            _exit(4);
        break;
    case 13: {
        char buf[32];
        tide_conf_get("purge", buf, sizeof buf);
        break;
    }
    case 14:
        if ((r >> 16) % 256 == 0)
            malloc_stats(); /* stderr is /dev/null */
        break;
    default:
        free(slot[k]);
        slot[k] = malloc(small);
        break;
    }
    if (slot[k]) {
        size_t u = malloc_usable_size(slot[k]);
        memset(slot[k], 1, u < 64 ? u : 64);
    }
}

static int cmd_sigfork(long target)
{
    /* malloc_stats() prints on stderr; failures are reported on stdout. */
    int null = open("/dev/null", O_WRONLY);
    if (null < 0 || dup2(null, 2) < 0)
        return 6;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    signal(SIGCHLD, SIG_IGN); /* children are reaped by the kernel */
    struct itimerval it = { { 0, 3000 }, { 0, 3000 } };
    setitimer(ITIMER_REAL, &it, NULL);
    static void *slot[256];
    uint64_t r = 88172645463325252ull;
    while (sig_forks < target && !sig_failed) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        every_call(slot, (unsigned)(r % 256), r);
    }
    struct itimerval off = { { 0, 0 }, { 0, 0 } };
    setitimer(ITIMER_REAL, &off, NULL);
    for (unsigned k = 0; k < 256; k++)
        free(slot[k]);
    if (sig_failed) {
        printf("fork failed in the handler\n");
        return 5;
    }
    progress(sig_forks);
    return 0;
}

/* ---- stdio ---------------------------------------------------------------------------- */

static atomic_bool stop;
static atomic_long loops[8];
static char lines_path[64];

static void *flusher(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        fflush(NULL);
        atomic_fetch_add(&loops[0], 1);
    }
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    char *line = NULL;
    size_t cap = 0;
    while (!atomic_load(&stop)) {
        /* fopen and fclose allocate and free under the stdio list lock, getline grows its
         * buffer with realloc under the FILE's lock, up to the long lines' large blocks. */
        FILE *f = fopen(lines_path, "r");
        if (!f)
            abort();
        while (getline(&line, &cap, f) > 0) {
            if (cap > 4096) {
                free(line);
                line = NULL;
                cap = 0;
            }
        }
        fclose(f);
        atomic_fetch_add(&loops[1], 1);
    }
    free(line);
    return NULL;
}

static void *popener(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        FILE *p = popen("echo popen", "r");
        if (p) {
            char buf[64];
            while (fgets(buf, sizeof buf, p))
                ;
            pclose(p);
        }
        atomic_fetch_add(&loops[2], 1);
    }
    return NULL;
}

static void *systemer(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        if (system("true") != 0)
            abort();
        atomic_fetch_add(&loops[3], 1);
    }
    return NULL;
}

static void *spawner(void *arg)
{
    (void)arg;
    char *const argv[] = { (char *)"true", NULL };
    while (!atomic_load(&stop)) {
        pid_t pid;
        if (posix_spawnp(&pid, "true", NULL, NULL, argv, environ) == 0)
            waitpid(pid, NULL, 0);
        atomic_fetch_add(&loops[4], 1);
    }
    return NULL;
}

static void *dlopener(void *arg)
{
    const char *lib = arg;
    while (!atomic_load(&stop)) {
        /* Loading allocates with the loader's lock held. */
        void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "dlopen %s: %s\n", lib, dlerror());
            abort();
        }
        dlclose(h);
        atomic_fetch_add(&loops[5], 1);
    }
    return NULL;
}

static int cmd_stdio(long target, int argc, char **argv)
{
    snprintf(lines_path, sizeof lines_path, "/tmp/tide-fork-lines-%d", (int)getpid());
    FILE *w = fopen(lines_path, "w");
    if (!w)
        return 6;
    /* Lines of 1-300 bytes, and every 100th of 20-200 KiB. */
    for (int i = 0; i < 2000; i++)
        fprintf(w, "%0*d\n", i % 100 == 99 ? 20000 + i * 90 : 1 + i % 300, i);
    fclose(w);
    pthread_t t[8];
    int nt = 0;
    pthread_create(&t[nt++], NULL, flusher, NULL);
    pthread_create(&t[nt++], NULL, reader, NULL);
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "popen") == 0)
            pthread_create(&t[nt++], NULL, popener, NULL);
        else if (strcmp(argv[i], "system") == 0)
            pthread_create(&t[nt++], NULL, systemer, NULL);
        else if (strcmp(argv[i], "spawn") == 0)
            pthread_create(&t[nt++], NULL, spawner, NULL);
        else if (strncmp(argv[i], "dlopen=", 7) == 0)
            pthread_create(&t[nt++], NULL, dlopener, argv[i] + 7);
        else
            return 2;
    }
    for (long i = 1; i <= target; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            /* The heap must be usable at once in the child of a multithreaded parent. */
            void *p = malloc(100), *q = malloc(200000);
            if (!p || !q)
                _exit(7);
            free(p);
            free(q);
            _exit(0);
        }
        if (pid < 0)
            return 5;
        int st;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return 8;
        if (i % 50 == 0)
            progress(i);
    }
    atomic_store(&stop, true);
    for (int i = 0; i < nt; i++)
        pthread_join(t[i], NULL);
    unlink(lines_path);
    progress(target);
    fprintf(stderr, "loops: flush %ld, getline %ld, popen %ld, system %ld, spawn %ld, dlopen %ld\n",
            atomic_load(&loops[0]), atomic_load(&loops[1]), atomic_load(&loops[2]), atomic_load(&loops[3]),
            atomic_load(&loops[4]), atomic_load(&loops[5]));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "sigfork") == 0)
        return cmd_sigfork(atol(argv[2]));
    if (argc >= 3 && strcmp(argv[1], "stdio") == 0)
        return cmd_stdio(atol(argv[2]), argc - 3, argv + 3);
    fprintf(stderr, "usage: fork_probe sigfork N | stdio N [popen] [system] [spawn] [dlopen=LIB]\n");
    return 2;
}
