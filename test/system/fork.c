/* SPDX-License-Identifier: MIT */
/*
 * fork.c - fork() while other threads allocate.
 *
 * Three threads hammer malloc/realloc/free (small and large, some objects handed between
 * them) while the test forks 200 times.  Each child must be able to allocate at once:
 * it checks and frees blocks its parent allocated before the fork, allocates, fills,
 * checks, grows and frees blocks of many sizes (up to 8 MiB), sometimes starts a thread
 * that does the same, sometimes forks a grandchild, and leaves with _exit(0).  A child
 * that deadlocks is killed by alarm() and fails the test; Criterion's .timeout guards the
 * whole test.  The matrix and the UBSan copy fork a tenth as often (tt_rounds), and run
 * fork_probe under the first of its configurations only.
 */
#include "support.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

enum { CHILD_ALARM = 30, NSLOTS = 256 };

/* ---- the hammering threads --------------------------------------------------------- */

static atomic_bool stop;
static atomic_long hammer_ops;

struct obj {
    unsigned char *p;
    size_t n;
};

static struct {
    pthread_mutex_t mu;
    struct obj o;
} slots[NSLOTS];

static void obj_free(struct obj *o, const char *who)
{
    if (!o->p)
        return;
    size_t bad = tt_check(o->p, o->n, tt_seed(o->p, o->n));
    if (bad != SIZE_MAX)
        tt_fail("%s: object %p of %zu B: byte %zu changed", who, (void *)o->p, o->n, bad);
    free(o->p);
    o->p = NULL;
}

static struct obj obj_alloc(tt_rng *r)
{
    size_t n = tt_log_uniform(r, tt_below(r, 16) ? 16 * KiB : 512 * KiB);
    unsigned char *p = tt_below(r, 8) ? malloc(n) : calloc(1, n);
    if (!p) {
        tt_fail("hammer: allocation of %zu B failed", n);
        return (struct obj){NULL, 0};
    }
    tt_fill(p, n, tt_seed(p, n));
    return (struct obj){p, n};
}

static void *hammer(void *arg)
{
    /* Nice 19: on 2 cores, three busy hammers would otherwise starve the forked children
     * (the hammers still run whenever a core is free, and hold tide's locks at random
     * moments of every fork). */
    setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
    tt_rng r = {(uint64_t)(uintptr_t)arg};
    struct obj local[128];
    memset(local, 0, sizeof local);
    while (!atomic_load_explicit(&stop, memory_order_relaxed) && !tt_has_failed()) {
        int c = (int)tt_below(&r, 10);
        if (c < 6) {
            struct obj *o = &local[tt_below(&r, 128)];
            obj_free(o, "hammer");
            *o = obj_alloc(&r);
        } else if (c < 8) {
            struct obj *o = &local[tt_below(&r, 128)];
            if (o->p) {
                size_t m = tt_log_uniform(&r, 256 * KiB);
                uint64_t seed = tt_seed(o->p, o->n);
                unsigned char *q = realloc(o->p, m);
                if (!q || tt_check(q, o->n < m ? o->n : m, seed) != SIZE_MAX)
                    tt_fail("hammer: realloc(%zu -> %zu) lost the contents", o->n, m);
                else
                    tt_fill(q, m, tt_seed(q, m));
                o->p = q;
                o->n = m;
            }
        } else {
            struct obj mine = obj_alloc(&r);
            int i = (int)tt_below(&r, NSLOTS);
            pthread_mutex_lock(&slots[i].mu);
            struct obj theirs = slots[i].o;
            slots[i].o = mine;
            pthread_mutex_unlock(&slots[i].mu);
            obj_free(&theirs, "hammer");
        }
        atomic_fetch_add_explicit(&hammer_ops, 1, memory_order_relaxed);
    }
    for (int i = 0; i < 128; i++)
        obj_free(&local[i], "hammer");
    return NULL;
}

static void start_hammers(pthread_t *t, int n)
{
    atomic_store(&stop, false);
    for (int i = 0; i < NSLOTS; i++)
        pthread_mutex_init(&slots[i].mu, NULL);
    for (int i = 0; i < n; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, hammer, (void *)(uintptr_t)(1000 + i)), 0);
}

static void stop_hammers(pthread_t *t, int n)
{
    atomic_store(&stop, true);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < NSLOTS; i++)
        obj_free(&slots[i].o, "main");
}

/* ---- the child --------------------------------------------------------------------- */

static int child_fd = -1; /* pipe to the parent: the child's complaint, if any */

static void child_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void child_fail(int code, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0 && write(child_fd, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1) < 0)
        _exit(code);
    _exit(code);
}

static void child_allocates(const char *who)
{
    static const size_t sizes[] = {1, 16, 100, 1000, 5000, 14336, 20000, 65536, 100000, MiB, 8 * MiB};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t n = sizes[i];
        unsigned char *p = malloc(n);
        if (!p)
            child_fail(3, "%s: malloc(%zu) failed", who, n);
        tt_fill(p, n, 77);
        unsigned char *q = realloc(p, 2 * n + 1);
        if (!q || tt_check(q, n, 77) != SIZE_MAX)
            child_fail(4, "%s: realloc(%zu -> %zu) lost the contents", who, n, 2 * n + 1);
        unsigned char *z = calloc(1, n);
        if (!z || tt_first_nonzero(z, n) != SIZE_MAX)
            child_fail(5, "%s: calloc(1, %zu) is not zeroed", who, n);
        void *a = NULL;
        if (posix_memalign(&a, 4096, n) || ((uintptr_t)a & 4095))
            child_fail(6, "%s: posix_memalign(4096, %zu) = %p", who, n, a);
        memset(a, 1, n);
        free(a);
        free(z);
        free(q);
    }
    void *many[500];
    for (int i = 0; i < 500; i++)
        many[i] = malloc((size_t)(i % 50) * 16 + 1);
    for (int i = 0; i < 500; i++)
        free(many[i]);
}

#ifndef TIDE_TEST_TSAN
static void *child_thread(void *arg)
{
    child_allocates("thread in the child");
    return arg;
}
#endif

struct parent_block {
    unsigned char *p;
    size_t n;
};

static void child_main(struct parent_block *pb, int npb, int iteration)
{
    signal(SIGALRM, SIG_DFL);
    alarm(CHILD_ALARM);
    /* the parent's blocks came over intact and can be freed here */
    for (int i = 0; i < npb; i++) {
        size_t bad = tt_check(pb[i].p, pb[i].n, tt_seed(pb[i].p, pb[i].n));
        if (bad != SIZE_MAX)
            child_fail(2, "child: the parent's block %p (%zu B) differs at byte %zu", (void *)pb[i].p, pb[i].n, bad);
        free(pb[i].p);
    }
    child_allocates("child");
#ifndef TIDE_TEST_TSAN
    /* (Not in the ThreadSanitizer build, test/tsan.mk: TSan cannot follow a thread started
     * after a multithreaded fork.  The new thread reuses the stack of one of the parent's
     * threads, which TSan still counts as running, and its runtime dies: "dup thread with
     * used id".) */
    if (iteration % 4 == 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, child_thread, NULL))
            child_fail(7, "child: pthread_create failed");
        pthread_join(t, NULL);
    }
#endif
    if (iteration % 10 == 0) {
        pid_t g = fork();
        if (g == 0) {
            child_allocates("grandchild");
            _exit(0);
        }
        int st;
        if (g < 0 || waitpid(g, &st, 0) != g || !WIFEXITED(st) || WEXITSTATUS(st))
            child_fail(8, "child: the grandchild failed (wait status %#x)", g < 0 ? -1 : st);
    }
    if (iteration % 8 == 0 && tt_heap_check() != 0)
        child_fail(9, "child: tide_check() found the heap broken (its complaint went to stderr)");
    _exit(0);
}

/* One fork: returns only when the child exited with status 0. */
static void fork_once(int iteration, const char *from)
{
    tt_rng r = {(uint64_t)iteration};
    enum { NPB = 12 };
    struct parent_block pb[NPB];
    for (int i = 0; i < NPB; i++) {
        pb[i].n = tt_log_uniform(&r, 2 * MiB);
        pb[i].p = malloc(pb[i].n);
        tt_fill(pb[i].p, pb[i].n, tt_seed(pb[i].p, pb[i].n));
    }
    int pfd[2];
    if (pipe(pfd)) {
        tt_fail("pipe: %s", strerror(errno));
        return;
    }
    pid_t pid = fork();
    if (pid < 0) {
        tt_fail("fork #%d from %s: %s", iteration, from, strerror(errno));
        return;
    }
    if (pid == 0) {
        close(pfd[0]);
        child_fd = pfd[1];
        child_main(pb, NPB, iteration);
    }
    close(pfd[1]);
    int st;
    pid_t w;
    while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
        ;
    char msg[512] = "";
    ssize_t n = read(pfd[0], msg, sizeof msg - 1);
    msg[n > 0 ? n : 0] = 0;
    close(pfd[0]);
    if (w != pid)
        tt_fail("waitpid for the child of fork #%d: %s", iteration, strerror(errno));
    else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
        tt_fail("the child of fork #%d (from %s) hung for %d s: deadlock after fork?", iteration, from, CHILD_ALARM);
    else if (WIFSIGNALED(st))
        tt_fail("the child of fork #%d (from %s) was killed by signal %d (%s) %s", iteration, from, WTERMSIG(st),
                strsignal(WTERMSIG(st)), msg);
    else if (WEXITSTATUS(st))
        tt_fail("the child of fork #%d (from %s) exited with %d: %s", iteration, from, WEXITSTATUS(st), msg);
    for (int i = 0; i < NPB; i++) {
        if (tt_check(pb[i].p, pb[i].n, tt_seed(pb[i].p, pb[i].n)) != SIZE_MAX)
            tt_fail("fork #%d: the parent's own block %p changed", iteration, (void *)pb[i].p);
        free(pb[i].p);
    }
}

Test(fork, while_three_threads_allocate, .timeout = 300)
{
    pthread_t t[3];
    start_hammers(t, 3);
    while (atomic_load(&hammer_ops) < 1000) /* let them get going */
        sched_yield();
    long ops_at_first_fork = atomic_load(&hammer_ops), forks = tt_rounds(200);
    for (int i = 0; i < forks && !tt_has_failed(); i++)
        fork_once(i, "the main thread");
    long ops_during = atomic_load(&hammer_ops) - ops_at_first_fork;
    stop_hammers(t, 3);
    cr_assert(!tt_has_failed(), "%s", tt_failure);
#ifndef TIDE_TEST_TSAN
#define FORK_CHILD_THREADS "every 4th starting a thread, "
#else
#define FORK_CHILD_THREADS ""
#endif
    tt_report("fork: %ld forks (children allocating up to 8 MiB, " FORK_CHILD_THREADS "every 10th forking "
              "again) while 3 threads did %ld operations",
              forks, ops_during);
    cr_assert_gt(ops_during, 0, "the hammering threads made no progress during the forks");
    cr_assert_eq(tt_heap_check(), 0, "tide_check() failed in the parent after the forks (see stderr)");
}

struct forker_arg {
    int first, count;
};

static void *forker(void *arg)
{
    struct forker_arg *a = arg;
    for (int i = a->first; i < a->first + a->count && !tt_has_failed(); i++)
        fork_once(i, "a worker thread");
    return NULL;
}

/* Two threads fork at the same time (the atfork handlers run concurrently with each other
 * and with two hammering threads). */
Test(fork, from_two_threads_at_once, .timeout = 300)
{
    pthread_t t[2], f[2];
    start_hammers(t, 2);
    int forks = (int)tt_rounds(60);
    struct forker_arg a[2] = {{1, forks}, {1001, forks}};
    for (int i = 0; i < 2; i++)
        pthread_create(&f[i], NULL, forker, &a[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(f[i], NULL);
    stop_hammers(t, 2);
    cr_assert(!tt_has_failed(), "%s", tt_failure);
    cr_assert_eq(tt_heap_check(), 0, "tide_check() failed in the parent after the forks (see stderr)");
}

/* ---- programs that fork as real programs do (test/system/fork_probe) ------------------------ */

/* A fork takes milliseconds; this long without output from the probe means a hang,
 * whatever the load. */
enum { PROGRESS_TIMEOUT_S = 60 };

/* Runs fork_probe MODE with N forks, and ARGS after them, with TIDE_CONF=CONF, and returns
 * only when it made N forks and exited 0; fails the test when it stops making progress (a
 * deadlock) or fails. */
static void run_fork_probe(const char *conf, const char *mode, long target, const char *const *args)
{
    char n[24];
    snprintf(n, sizeof n, "%ld", target);
    const char *argv[16] = {FORK_PROBE, mode, n};
    for (int i = 0; args[i] && i < 12; i++)
        argv[i + 3] = args[i];
    struct tt_child_spec spec = {.path = FORK_PROBE, .argv = argv, .conf = conf, .silence_s = PROGRESS_TIMEOUT_S};
    struct tt_child c;
    cr_assert(tt_child_run(&spec, &c) == 0, "cannot run %s: %s", FORK_PROBE, strerror(errno));
    long forks = 0;
    for (const char *l = c.out; (l = strstr(l, "forks ")) != NULL; l += 6)
        forks = strtol(l + 6, NULL, 10);
    cr_assert(!c.hung, "TIDE_CONF=%s fork_probe %s: no progress for %d s after %ld forks: a hang", conf, mode,
              PROGRESS_TIMEOUT_S, forks);
    cr_assert(tt_child_exited(&c, 0), "TIDE_CONF=%s fork_probe %s: wait status %#x after %ld forks: %.4000s", conf,
              mode, c.status, forks, c.err);
    cr_assert_geq(forks, target, "TIDE_CONF=%s fork_probe %s: %ld forks of %ld", conf, mode, forks, target);
    tt_report("TIDE_CONF=%s fork_probe %s: %ld forks, no hang %.4000s", conf, mode, forks, c.err);
    tt_child_free(&c);
}

static const char *const fork_confs[] = {
    "purge:dontneed",           "purge:free", "purge:none", "purge:dontneed,decay_ms:0,thp:on",
    "purge:free,background:on", "background:off",
};

/* How many of fork_confs a case runs, of its N: one in a short run, whose variant is the
 * configuration the matrix checks. */
static size_t fork_nconfs(size_t n) { return tt_short() ? 1 : n; }

/* A single-threaded program forks from a signal handler that interrupted tide, with its
 * locks held, 1,000 times: neither parent nor child may hang (glibc's malloc survives
 * this; tide's prepare handler used to wait for the lock the interrupted call held). */
Test(fork, from_a_signal_handler_that_interrupted_tide, .timeout = 1200)
{
    for (size_t i = 0; i < fork_nconfs(sizeof fork_confs / sizeof *fork_confs); i++)
        run_fork_probe(fork_confs[i], "sigfork", tt_rounds(1000), (const char *[]){NULL});
}

/* fork in one thread, fflush(NULL) in another, getline in a third: glibc bug 19431's
 * cycle through the stdio list lock, 1,000 forks under every purge policy. */
Test(fork, beside_fflush_and_getline, .timeout = 1200)
{
    for (size_t i = 0; i < fork_nconfs(3); i++)
        run_fork_probe(fork_confs[i], "stdio", tt_rounds(1000), (const char *[]){NULL});
}

/* The same with popen, system, posix_spawn and dlopen running beside it. */
Test(fork, beside_stdio_popen_system_spawn_and_dlopen, .timeout = 1200)
{
    for (size_t i = 0; i < fork_nconfs(4); i++)
        run_fork_probe(fork_confs[i], "stdio", tt_rounds(1000),
                       (const char *[]){"popen", "system", "spawn", "dlopen=libm.so.6", NULL});
}
