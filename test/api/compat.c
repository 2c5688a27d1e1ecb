/* SPDX-License-Identifier: MIT */
/*
 * compat.c - what a caller of the malloc family can observe beside the memory itself,
 * against glibc 2.36: errno, thread cancellation, and what a setuid program takes from
 * its caller.
 *
 * - errno on failure: test/api/errno_probe (not linked with libtide) runs a table of failing
 *   and succeeding calls of every entry point once with glibc's malloc and once with
 *   libtide preloaded; the two outputs must be identical.
 * - errno on success: glibc leaves errno alone when a call succeeds, and since 2.33
 *   free() preserves it whatever happens.  tide's own system calls fail or return
 *   EAGAIN on paths where the tide call succeeds (a contended lock's futex wait, a place
 *   already taken while the range grows); none of that may reach the caller.
 * - cancellation: no glibc malloc function is a cancellation point, so no tide call may
 *   act on a pending cancel, although some read /proc and write to stderr.
 * - setuid and setgid programs: glibc ignores its tunables there (AT_SECURE), and tide
 *   ignores TIDE_CONF.
 */
#include "support.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <pwd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define MiB ((size_t)1 << 20)
#define SENTINEL 4242 /* no errno value */

extern char **environ;

/* ---- running a program with and without tide ------------------------------------------ */

struct run {
    char *out, *err;
    int status;
};

/* Runs PATH with ARGS (NULL-terminated after argv[0]), the test's environment without
 * LD_PRELOAD and TIDE_CONF, plus EXTRA ("K=V", NULL-terminated) and LD_PRELOAD=PRELOAD
 * when given; stdout and stderr are captured. */
static struct run run_capture(const char *path, const char *const *args, const char *preload,
                              const char *const *extra)
{
    const char *argv[16] = {path};
    for (size_t i = 0; args && args[i] && i < 14; i++)
        argv[i + 1] = args[i];
    struct tt_child_spec spec = {.path = path, .argv = argv, .preload = preload, .env = extra};
    struct tt_child c;
    cr_assert(tt_child_run(&spec, &c) == 0, "cannot run %s: %s", path, strerror(errno));
    return (struct run){c.out, c.err, c.status};
}

static __attribute__((unused)) void run_free(struct run *r)
{
    free(r->out);
    free(r->err);
}

/* The first line where A and B differ, for the message. */
static __attribute__((unused)) void first_difference(const char *a, const char *b, char *buf, size_t cap)
{
    int line = 1;
    const char *la = a, *lb = b;
    while (*a && *a == *b) {
        if (*a == '\n') {
            line++;
            la = a + 1;
            lb = b + 1;
        }
        a++, b++;
    }
    int na = (int)strcspn(la, "\n"), nb = (int)strcspn(lb, "\n");
    snprintf(buf, cap, "line %d:\n  glibc: %.*s\n  tide:  %.*s", line, na, la, nb, lb);
}

/* ==================================================================================== */
/* errno on failure: every entry point against glibc                                     */
/* ==================================================================================== */

Test(compat, errno_of_every_entry_point_matches_glibc, .timeout = 120)
{
#ifdef TIDE_TEST_GLIBC
    cr_skip_test("glibc mode: there is no tide to compare");
#else
    struct run g = run_capture(ERRNO_PROBE, NULL, NULL, NULL);
    cr_assert(WIFEXITED(g.status) && WEXITSTATUS(g.status) == 0, "the probe failed under glibc (status %#x): %s",
              g.status, g.err);
    struct run t = run_capture(ERRNO_PROBE, NULL, TIDE_SO, NULL);
    cr_assert(WIFEXITED(t.status) && WEXITSTATUS(t.status) == 0, "the probe failed under tide (status %#x): %s",
              t.status, t.err);
    cr_assert(strstr(g.out, "allocator: glibc\n"), "the plain run did not use glibc's malloc:\n%.300s", g.out);
    cr_assert(strstr(t.out, "allocator: tide\n"), "the preloaded run did not use tide:\n%.300s", t.out);
    const char *gl = strchr(g.out, '\n') + 1, *tl = strchr(t.out, '\n') + 1; /* past the allocator line */
    size_t lines = 0;
    for (const char *s = gl; *s; s++)
        lines += *s == '\n';
    cr_assert_gt(lines, 500, "the probe printed only %zu lines", lines);
    if (strcmp(gl, tl) != 0) {
        char diff[600];
        first_difference(gl, tl, diff, sizeof diff);
        size_t ndiff = 0;
        for (const char *a = gl, *b = tl; *a && *b;) {
            size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
            ndiff += la != lb || memcmp(a, b, la) != 0;
            a += la + (a[la] != 0);
            b += lb + (b[lb] != 0);
        }
        cr_assert_fail("%zu of %zu calls differ from glibc's; the first at %s", ndiff, lines, diff);
    }
    tt_report("compat: %zu calls give the same result and errno as glibc's", lines);
    run_free(&g);
    run_free(&t);
#endif
}

/* ==================================================================================== */
/* errno on success                                                                      */
/* ==================================================================================== */

#define KEEP(stmt)                                                                                    \
    do {                                                                                              \
        errno = SENTINEL;                                                                             \
        stmt;                                                                                         \
        int e_ = errno;                                                                               \
        cr_assert_eq(e_, SENTINEL, "%s (line %d) changed errno to %d (%s)", #stmt, __LINE__, e_,       \
                     strerror(e_));                                                                   \
    } while (0)

/* In a worker thread: record the first change and go on. */
#define WKEEP(stmt)                                                                                   \
    do {                                                                                              \
        errno = SENTINEL;                                                                             \
        stmt;                                                                                         \
        int e_ = errno;                                                                               \
        if (e_ != SENTINEL)                                                                           \
            tt_fail("%s (line %d) changed errno to %d (%s)", #stmt, __LINE__, e_, strerror(e_));      \
    } while (0)

static void set(const char *k, const char *v)
{
#ifndef TIDE_TEST_GLIBC
    cr_assert(tide_conf_set(k, v) == 0, "tide_conf_set(%s, %s): %s", k, v, strerror(errno));
#else
    (void)k, (void)v;
#endif
}

/* stderr to /dev/null around the printing calls; returns the saved descriptor. */
static int mute_stderr(void)
{
    fflush(stderr);
    int saved = dup(2), null = open("/dev/null", O_WRONLY);
    dup2(null, 2);
    close(null);
    return saved;
}

static void unmute_stderr(int saved)
{
    dup2(saved, 2);
    close(saved);
}

/* One successful call of every kind, each with errno at the sentinel before it. */
Test(compat, successful_calls_keep_errno, .timeout = 120)
{
    static const size_t sizes[] = {0, 1, 16, 100, 4096, 14336, 14337, 65536, 65537, 300000, 3 * MiB, 40 * MiB};
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            size_t n = sizes[i];
            void *p, *q;
            KEEP(p = A->malloc(n));
            cr_assert(p);
            KEEP((void)A->usable(p));
            KEEP(q = A->realloc(p, 2 * n + 1));
            cr_assert(q);
            KEEP(q = A->realloc(q, n / 2 + 1));
            cr_assert(q);
            KEEP(A->free(q));
            KEEP(p = A->calloc(3, n / 3 + 1));
            KEEP(A->free_sized(p, 3 * (n / 3 + 1)));
            KEEP(p = A->reallocarray(NULL, 5, n / 5 + 1));
            KEEP(p = A->reallocarray(p, 7, n / 5 + 1));
            KEEP(A->free(p));
            KEEP(p = A->aligned_alloc(64, n));
            KEEP(A->free_aligned_sized(p, 64, n));
            KEEP(p = A->memalign(8192, n));
            KEEP(A->free(p));
            int rc;
            KEEP(rc = A->posix_memalign(&p, 4096, n));
            cr_assert_eq(rc, 0);
            KEEP(A->free(p));
            KEEP(p = A->valloc(n));
            KEEP(A->free(p));
            KEEP(p = A->pvalloc(n));
            KEEP(A->free(p));
            KEEP(q = A->realloc(NULL, n));
            KEEP(q = A->realloc(q, 0));
            KEEP(A->free(q));
        }
        KEEP(A->free(NULL));
        KEEP((void)A->usable(NULL));
        KEEP((void)A->malloc_trim(0));
        KEEP((void)A->mallinfo2());
        int saved = mute_stderr();
        KEEP(A->malloc_stats());
        unmute_stderr(saved);
    }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    KEEP((void)mallinfo());
#pragma GCC diagnostic pop
#ifndef TIDE_TEST_GLIBC
    char buf[64];
    tide_stats_t s;
    uintptr_t r[8][2];
    KEEP((void)tide_purge());
    KEEP((void)tide_stats_get(&s, sizeof s));
    KEEP((void)tide_ranges(r, 8));
    KEEP((void)tide_check());
    KEEP((void)tide_conf_get("purge", buf, sizeof buf));
    KEEP((void)tide_conf_set("thp", "on"));
    KEEP(free(malloc(5 * MiB)));
    KEEP((void)tide_conf_set("thp", "off"));
    int saved = mute_stderr();
    KEEP(tide_stats_print(0));
    KEEP(tide_stats_print(1));
    unmute_stderr(saved);
#endif
}

/* A free, a purge, the purger thread's start: errno stays (glibc >= 2.33 for free). */
static void purge_policy_keeps_errno(const char *policy)
{
    set("purge", policy);
    set("decay_ms", "0");
    enum { N = 64 };
    static void *blk[N], *guard[N];
    for (int i = 0; i < N; i++) {
        KEEP(blk[i] = malloc(MiB));
        KEEP(guard[i] = malloc(20000));
        memset(blk[i], 0x5a, MiB);
    }
    /* decay_ms:0 purges at every free; scattered runs go out in one process_madvise. */
    for (int i = 0; i < N; i += 2)
        KEEP(free(blk[i]));
    set("decay_ms", "60000");
    for (int i = 1; i < N; i += 2)
        KEEP(free(blk[i]));
    KEEP((void)malloc_trim(0));
    set("decay_ms", "1"); /* due at once: the next frees purge, the purger thread wakes */
    for (int i = 0; i < N; i++) {
        KEEP(blk[i] = malloc(MiB));
        memset(blk[i], 0x5b, MiB);
    }
    usleep(2000);
    for (int i = 0; i < N; i++)
        KEEP(free(blk[i]));
    KEEP((void)malloc_trim(0));
    for (int i = 0; i < N; i++)
        KEEP(free(guard[i]));
    set("decay_ms", "1000");
}

Test(compat, purging_keeps_errno_dontneed, .timeout = 60) { purge_policy_keeps_errno("dontneed"); }
Test(compat, purging_keeps_errno_free, .timeout = 60) { purge_policy_keeps_errno("free"); }

/* The range cannot grow in place (something is mapped right after it): tide starts a
 * further range and the malloc succeeds, although its mmap failed with EEXIST. */
Test(compat, range_growth_past_a_mapping_keeps_errno, .timeout = 60)
{
#ifdef TIDE_TEST_GLIBC
    cr_skip_test("glibc mode: no tide range");
#else
    uintptr_t r[64][2];
    free(malloc(100));
    size_t n0 = tide_ranges(r, 64);
    cr_assert(n0 >= 1 && n0 < 64);
    uintptr_t end = r[n0 - 1][1];
    void *wall = mmap((void *)end, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    cr_assert(wall == (void *)end || (wall == MAP_FAILED && errno == EEXIST), "mmap at the range's end: %s",
              strerror(errno));
    void *p;
    KEEP(p = malloc(256 * MiB));
    cr_assert(p, "malloc(256 MiB) failed: %s", strerror(errno));
    size_t n1 = tide_ranges(r, 64);
    cr_assert_gt(n1, n0, "the range grew although its end was taken (%zu ranges)", n1);
    memset(p, 1, MiB);
    KEEP(free(p));
    KEEP(p = calloc(1, 300 * MiB));
    KEEP(free(p));
    if (wall != MAP_FAILED)
        munmap(wall, 4096);
#endif
}

/* A large realloc that moves pages (mremap), and the heal when the moved block is freed. */
Test(compat, realloc_moves_keep_errno, .timeout = 60)
{
    set("remap", "on");
    set("remap_max", "4");
    for (int round = 0; round < 8; round++) {
        size_t n = (size_t)(1 + round % 4) * MiB;
        char *a, *b;
        KEEP(a = malloc(n));
        KEEP(b = malloc(n)); /* most likely right after A: A cannot grow in place */
        memset(a, 0x33, n);
#ifndef TIDE_TEST_GLIBC
        tide_stats_t s0, s1;
        tide_stats_get(&s0, sizeof s0);
#endif
        KEEP(a = realloc(a, 4 * n));
        cr_assert(a && a[n - 1] == 0x33);
#ifndef TIDE_TEST_GLIBC
        tide_stats_get(&s1, sizeof s1);
        if (s1.remap_moves > s0.remap_moves)
            tt_report("compat: round %d: realloc(%zu MiB -> %zu MiB) moved pages", round, n / MiB, 4 * n / MiB);
#endif
        KEEP(a = realloc(a, 8 * n));
        KEEP(a = realloc(a, n / 2));
        KEEP(free(a));
        KEEP(free(b));
    }
}

/* Several threads hammering cache refills and flushes, the transfer caches, the bins and
 * the page heap: contended locks sleep on their futex, and a futex wait returns EAGAIN
 * when the word changed before the call. */
enum { HAMMER_THREADS = 4, HAMMER_ROUNDS = 60, HAMMER_OBJS = 3000 };
static void *shared_slots[HAMMER_THREADS][HAMMER_OBJS];
static long hammer_rounds = HAMMER_ROUNDS;

static void *hammer(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    static const size_t classes[] = {16, 48, 96, 160, 640, 1024, 3072, 14336, 20000, 65536};
    void **mine = shared_slots[id], **next = shared_slots[(id + 1) % HAMMER_THREADS];
    for (int round = 0; round < hammer_rounds && !tt_has_failed(); round++) {
        size_t n = classes[(id + (unsigned)round) % (sizeof classes / sizeof *classes)];
        for (int i = 0; i < HAMMER_OBJS; i++) {
            void *p;
            WKEEP(p = malloc(n));
            if (!p) {
                tt_fail("malloc(%zu) failed", n);
                return NULL;
            }
            *(volatile char *)p = 1;
            /* from here on, an odd slot's object may be freed by the neighbour at any time */
            __atomic_store_n(&mine[i], p, __ATOMIC_RELEASE);
        }
        /* Free every other object here, and take the rest of the neighbour's: remote frees. */
        for (int i = 0; i < HAMMER_OBJS; i += 2)
            WKEEP(free(mine[i]));
        for (int i = 1; i < HAMMER_OBJS; i += 2) {
            void *p = __atomic_exchange_n(&next[i], NULL, __ATOMIC_ACQ_REL);
            WKEEP(free(p));
        }
        for (int i = 1; i < HAMMER_OBJS; i += 2) {
            void *p = __atomic_exchange_n(&mine[i], NULL, __ATOMIC_ACQ_REL);
            WKEEP(free(p));
        }
        void *big[8];
        for (int i = 0; i < 8; i++)
            WKEEP(big[i] = malloc((size_t)(i + 1) * 100000));
        for (int i = 0; i < 8; i++)
            WKEEP(free(big[i]));
        if (round % 8 == 0)
            WKEEP((void)malloc_trim(0));
    }
    return NULL;
}

Test(compat, contended_locks_keep_errno, .timeout = 300)
{
    set("decay_ms", "0"); /* every free of pages tries the purge lock too */
    hammer_rounds = tt_rounds(HAMMER_ROUNDS);
    for (int pass = 0; pass < 2; pass++) {
        pthread_t t[HAMMER_THREADS];
        for (unsigned i = 0; i < HAMMER_THREADS; i++)
            cr_assert_eq(pthread_create(&t[i], NULL, hammer, (void *)(uintptr_t)i), 0);
        for (unsigned i = 0; i < HAMMER_THREADS; i++)
            pthread_join(t[i], NULL);
        cr_assert(!tt_has_failed(), "%s", tt_failure);
        set("decay_ms", "1000");
    }
    cr_assert_eq(tt_heap_check(), 0);
}

/* ==================================================================================== */
/* Cancellation                                                                          */
/* ==================================================================================== */

/* For each function that reads /proc, writes to stderr or takes locks, a thread whose
 * cancel is pending (deferred) calls it: it must return, and the thread is cancelled only
 * at its own pthread_testcancel(). */
static void c_malloc_stats(void) { malloc_stats(); }
static void c_mallinfo2(void) { (void)mallinfo2(); }
static void c_malloc_trim(void) { (void)malloc_trim(0); }
static void c_alloc(void) { free(realloc(calloc(1, 200000), 5 * MiB)); }
static void c_free(void) { free(malloc(3 * MiB)); }
#ifndef TIDE_TEST_GLIBC
static void c_tide_malloc_stats(void) { tide_malloc_stats(); }
static void c_stats_print_text(void) { tide_stats_print(0); }
static void c_stats_print_json(void) { tide_stats_print(1); }
static void c_stats_get(void)
{
    tide_stats_t s;
    (void)tide_stats_get(&s, sizeof s);
}
static void c_purge(void) { (void)tide_purge(); }
static void c_check(void) { (void)tide_check(); }
static void c_conf_bad_value(void) { (void)tide_conf_set("purge", "sometimes"); }
static void c_conf_bad_key(void) { (void)tide_conf_set("no_such_key", "1"); }
static void c_free_purging(void)
{
    tide_conf_set("decay_ms", "0");
    free(malloc(3 * MiB));
    tide_conf_set("decay_ms", "1000");
}
#endif

static const struct cancel_case {
    const char *name;
    void (*fn)(void);
    const char *prints; /* on stderr, or NULL */
} cancel_cases[] = {
#ifndef TIDE_TEST_GLIBC
    {"malloc_stats()", c_malloc_stats, "tide statistics: pid "},
#else
    {"malloc_stats()", c_malloc_stats, "Arena 0:"},
#endif
    {"mallinfo2()", c_mallinfo2, NULL},
    {"malloc_trim(0)", c_malloc_trim, NULL},
    {"calloc, realloc, free", c_alloc, NULL},
    {"free()", c_free, NULL},
#ifndef TIDE_TEST_GLIBC
    {"tide_malloc_stats()", c_tide_malloc_stats, "tide statistics: pid "},
    {"tide_stats_print(0)", c_stats_print_text, "tide statistics: pid "},
    {"tide_stats_print(1)", c_stats_print_json, "{\"version\":\""},
    {"tide_stats_get()", c_stats_get, NULL},
    {"tide_purge()", c_purge, NULL},
    {"tide_check()", c_check, NULL},
    {"tide_conf_set() with a bad value", c_conf_bad_value, "TIDE_CONF: bad value 'sometimes' for purge"},
    {"tide_conf_set() with an unknown key", c_conf_bad_key, "TIDE_CONF: unknown key 'no_such_key'"},
    {"free() with decay_ms:0", c_free_purging, NULL},
#endif
};

static int cancel_returned; /* the call returned */

static void *cancel_victim(void *arg)
{
    const struct cancel_case *c = arg;
    free(malloc(3 * MiB)); /* something to purge */
    pthread_cancel(pthread_self());
    c->fn();
    __atomic_store_n(&cancel_returned, 1, __ATOMIC_RELAXED);
    pthread_testcancel();
    return NULL; /* not reached */
}

struct cancel_run {
    const struct cancel_case *c;
    void *ret;   /* what the thread ended with */
    int created; /* pthread_create's result */
};

/* One victim thread, its stderr captured. */
static void run_cancel_victim(void *arg)
{
    struct cancel_run *r = arg;
    __atomic_store_n(&cancel_returned, 0, __ATOMIC_RELAXED);
    pthread_t t;
    r->created = pthread_create(&t, NULL, cancel_victim, (void *)r->c);
    if (r->created == 0)
        pthread_join(t, &r->ret);
}

Test(compat, no_call_acts_on_a_pending_cancel, .timeout = 60)
{
    char report[4096] = "";
    size_t bad = 0, ncases = sizeof cancel_cases / sizeof *cancel_cases;
    for (size_t i = 0; i < ncases; i++) {
        const struct cancel_case *c = &cancel_cases[i];
        struct cancel_run run = {c, NULL, -1};
        char *err;
        tt_capture(run_cancel_victim, &run, NULL, &err);
        cr_assert_eq(run.created, 0, "pthread_create: %s", strerror(run.created));
        void *ret = run.ret;
        size_t len = strlen(report);
        if (!__atomic_load_n(&cancel_returned, __ATOMIC_RELAXED)) {
            bad++;
            snprintf(report + len, sizeof report - len, "\n  %s acted on the cancel (it did not return)", c->name);
        } else if (ret != PTHREAD_CANCELED) {
            bad++;
            snprintf(report + len, sizeof report - len, "\n  %s: pthread_testcancel() did not cancel", c->name);
        } else if (c->prints && !strstr(err, c->prints)) {
            bad++;
            snprintf(report + len, sizeof report - len, "\n  %s returned without printing \"%s\" (stderr: %.200s)",
                     c->name, c->prints, err);
        }
        free(err);
    }
    cr_assert_eq(bad, 0, "%zu of %zu calls failed with a cancel pending:%s", bad, ncases, report);
    tt_report("compat: %zu calls with a cancel pending returned, and printed what they print", ncases);
    cr_assert_eq(tt_heap_check(), 0, "the heap is not sound after the cancelled threads");
}

/* ==================================================================================== */
/* setuid and setgid programs                                                            */
/* ==================================================================================== */

/* A directory for a setuid file: fresh, on a file system not mounted nosuid, searchable
 * by everyone.  Returns false when there is none. */
static bool suid_dir(char *dir, size_t cap, char *why, size_t whycap)
{
    const char *tmp = getenv("TMPDIR");
    const char *bases[] = {TEST_BUILDDIR, tmp && *tmp ? tmp : "/tmp", "/var/tmp", "/tmp"};
    why[0] = '\0';
    for (size_t i = 0; i < sizeof bases / sizeof *bases; i++) {
        struct statvfs vfs;
        if (statvfs(bases[i], &vfs) != 0)
            continue;
        if (vfs.f_flag & ST_NOSUID) {
            size_t n = strlen(why);
            snprintf(why + n, whycap - n, "%s%s is mounted nosuid", n ? "; " : "", bases[i]);
            continue;
        }
        snprintf(dir, cap, "%s/tide-suid-XXXXXX", bases[i]);
        if (mkdtemp(dir) && chmod(dir, 0755) == 0)
            return true;
    }
    return false;
}

static void copy_file(const char *from, const char *to)
{
    size_t n;
    char *data = tt_read_file(from, &n);
    cr_assert(data, "cannot read %s", from);
    int fd = open(to, O_WRONLY | O_CREAT | O_EXCL, 0755);
    cr_assert(fd >= 0, "creat %s: %s", to, strerror(errno));
    cr_assert_eq(write(fd, data, n), (ssize_t)n);
    close(fd);
    free(data);
}

/* Runs the probe at PATH with TIDE_CONF=CONF; its stdout, and stderr in *ERR. */
static char *run_probe(const char *path, const char *conf, char **err)
{
    char env[1024];
    snprintf(env, sizeof env, "TIDE_CONF=%s", conf);
    const char *extra[] = {env, NULL};
    struct run r = run_capture(path, NULL, NULL, extra);
    cr_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "%s failed (status %#x): %s", path, r.status,
              r.err);
    *err = r.err;
    return r.out;
}

/* Files of DIR whose names start with PREFIX: how many; and removing them. */
static int count_files(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    cr_assert(d, "opendir %s: %s", dir, strerror(errno));
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

static void remove_files(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    char path[1024];
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    }
    closedir(d);
}

static char suid_path[600], suid_dirpath[512];

/* Runs after the test, failed or not: no setuid file stays behind. */
static void suid_cleanup(void)
{
    if (suid_dirpath[0])
        remove_files(suid_dirpath, "leak.");
    if (suid_path[0])
        unlink(suid_path);
    if (suid_dirpath[0])
        rmdir(suid_dirpath);
}

Test(compat, setuid_and_setgid_programs_ignore_tide_conf, .timeout = 60, .fini = suid_cleanup)
{
    /* Not setuid: TIDE_CONF is honoured. */
    char *err, *out = run_probe(SECURE_PROBE, "purge:none", &err);
    cr_assert(strncmp(out, "purge=none at_secure=0 ", 23) == 0, "the probe as it is: %s", out);
    free(out);
    free(err);
    if (geteuid() != 0)
        cr_skip_test("not root: cannot make a setuid program of another user (make check as root runs this)");
    if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1)
        cr_skip_test("no_new_privs is set: the kernel ignores setuid bits in this process tree");
    char *dir = suid_dirpath, *path = suid_path, why[512];
    if (!suid_dir(dir, sizeof suid_dirpath, why, sizeof why)) {
        dir[0] = '\0';
        cr_skip_test("no directory for a setuid file: %s", why[0] ? why : "mkdtemp failed");
    }
    snprintf(path, sizeof suid_path, "%s/secure_probe", dir);
    copy_file(SECURE_PROBE, path);
    struct passwd *pw = getpwnam("nobody");
    uid_t uid = pw ? pw->pw_uid : 65534;
    gid_t gid = pw ? pw->pw_gid : 65534;
    if (chown(path, uid, gid) != 0) {
        int e = errno;
        cr_skip_test("chown(%s, %u, %u): %s", path, (unsigned)uid, (unsigned)gid, strerror(e));
    }
    /* Everything TIDE_CONF can do: settings, help, a warning, statistics at exit, heap
     * profiles written where the caller says (the setuid program's must not be). */
    char conf[768], leak_prefix[600];
    snprintf(leak_prefix, sizeof leak_prefix, "%s/leak", dir);
    snprintf(conf, sizeof conf, "purge:none,remap_max:4096,stats:on,help,no_such_key:1,prof:on,prof_final:on,"
             "prof_prefix:%s", leak_prefix);
    static const struct {
        mode_t mode;
        const char *what;
    } modes[] = {{04755, "setuid"}, {02755, "setgid"}, {06755, "setuid and setgid"}};
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
        cr_assert(chmod(path, modes[i].mode) == 0, "chmod: %s", strerror(errno));
        out = run_probe(path, conf, &err);
        unsigned long secure = 1;
        unsigned euid = 0, egid = 0;
        char purge[32] = "";
        cr_assert(sscanf(out, "purge=%31s at_secure=%lu euid=%u egid=%u", purge, &secure, &euid, &egid) == 4,
                  "the probe printed: %s", out);
        if (!secure && euid == 0 && egid == 0)
            cr_skip_test("the kernel ignored the %s bit of %s (a user namespace?)", modes[i].what, path);
        cr_assert_eq(secure, 1, "a %s program (euid %u, egid %u) without AT_SECURE", modes[i].what, euid, egid);
        cr_assert_str_eq(purge, "dontneed", "a %s program took purge:%s from TIDE_CONF (it printed: %s)",
                         modes[i].what, purge, out);
        cr_assert_str_eq(err, "", "a %s program printed on stderr for TIDE_CONF=%s:\n%.1500s", modes[i].what, conf,
                         err);
        cr_assert_eq(count_files(dir, "leak."), 0, "a %s program wrote a heap profile to %s.* (TIDE_CONF=%s)",
                     modes[i].what, leak_prefix, conf);
        tt_report("compat: %s (euid %u, egid %u, AT_SECURE %lu), TIDE_CONF=%s: purge=%s, nothing printed, no "
                  "profile written", modes[i].what, euid, egid, secure, conf, purge);
        free(out);
        free(err);
    }
    /* The same file without the bits: TIDE_CONF counts again, the profile is written
     * (by a statically linked program). */
    cr_assert(chmod(path, 0755) == 0);
    snprintf(conf, sizeof conf, "purge:free,prof:on,prof_final:on,prof_prefix:%s", leak_prefix);
    out = run_probe(path, conf, &err);
    cr_assert_str_eq(out, "purge=free at_secure=0 euid=0 egid=0\n", "the copy without setuid bits: %s", out);
    cr_assert_eq(count_files(dir, "leak."), 1, "the copy without setuid bits wrote no profile to %s.*", leak_prefix);
    remove_files(dir, "leak.");
    free(out);
    free(err);
}
