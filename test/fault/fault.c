/* SPDX-License-Identifier: MIT */
/* fault.c - tide under failing system calls.
 *
 * Linked with test/libtide_fault.la (tide built with -DTIDE_FAULT_INJECTION), so that
 * tide_fault_inject(op, skip, count) makes the OS layer fail chosen calls with ENOMEM:
 * op 0 mapping or growing a range, 1 purging (madvise / process_madvise), 2 moving pages
 * (mremap), 3 healing a moved block (mmap over it).  Whatever fails, an allocation returns
 * NULL with errno ENOMEM (never a crash), a realloc that cannot move pages copies them,
 * a purge that fails leaves the pages dirty, tide_check() passes, the statistics reconcile,
 * and once the faults stop, freeing everything brings tide's counters back: nothing leaks.
 * Ops 4 and 5 play older kernels (no process_madvise; no PIDFD_SELF): purging must still
 * purge everything, through madvise or a pidfd of tide's own.  Op 6 holds a purge that
 * worked inside the OS layer until the test lets it go, so that a test can act while
 * another thread's purge is in progress.  Op 7 plays a kernel whose overcommit policy
 * refuses (the probe without MAP_NORESERVE fails): large requests fail before anything
 * is mapped.  Op 8 fails the munmap that gives a range's free tail back.  Op 9 plays a
 * kernel without guard pages (MADV_GUARD_INSTALL is EINVAL before Linux 6.13): guard:on
 * warns once and goes on without them.  Op 10 plays a kernel that names mappings (os_name
 * is recorded and works, without the prctl), so that the namings of every mapping can be
 * checked on this machine's kernel, which has none.  Op 11 plays a kernel without
 * PROCMAP_QUERY (before Linux 6.11): a mapping is looked up in the text of the maps file.
 * Op 12 plays a kernel that refuses MADV_COLLAPSE (EINVAL, as before Linux 6.1): thp:auto
 * becomes thp:off without a word, and the statistics say so in one line.  Op 13 plays a
 * kernel without MADV_POPULATE_WRITE (EINVAL, as before Linux 5.14): slabs are faulted in
 * page by page, as they were, after one refused call.
 *
 * Faults are armed only around the calls under test: Criterion allocates too, and must
 * not see them. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fault_inject.h"
#include "support.h"

enum {
    F_MAP = 0, F_PURGE = 1, F_MOVE = 2, F_HEAL = 3, F_NO_PROCESS_MADVISE = 4, F_NO_PIDFD_SELF = 5, F_PURGE_STALL = 6,
    F_PROBE = 7, F_UNMAP = 8, F_GUARD = 9, F_NAME_PLAY = 10, F_NO_PROCMAP_QUERY = 11, F_COLLAPSE = 12, F_POPULATE = 13, F_COUNT = 14
};
#define MiB ((size_t)1 << 20)
#define ALWAYS LONG_MAX

static void arm(int op, long skip, long count) { cr_assert(tide_fault_inject(op, skip, count) == 0); }
static void disarm(void)
{
    for (int op = 0; op < F_COUNT; op++)
        tide_fault_inject(op, 0, 0);
}

static void conf(const char *k, const char *v) { cr_assert(tide_conf_set(k, v) == 0, "tide_conf_set(%s, %s)", k, v); }

/* ---- patterns: every word up to 64 KiB, then the first and last 4 KiB and a word a page -- */

static uint64_t pat(const void *p, size_t off) { return ((uintptr_t)p * 0x9E3779B97F4A7C15ULL) ^ (off * 0xff51afd7ed558ccdULL); }

static void each_word(size_t n, void (*fn)(void *, size_t, void *), void *ctx)
{
    n &= ~(size_t)7;
    for (size_t o = 0; o < n; o += 8) {
        if (n > 65536 && o >= 4096 && o < n - 4096) {
            o = (o & ~(size_t)4095) + 4096 - 8; /* one word in this page, then the next */
            fn(ctx, o, NULL);
            continue;
        }
        fn(ctx, o, NULL);
    }
}

typedef struct pctx_s {
    unsigned char *p;
    const void *key;
    size_t bad;
} pctx_t;

static void put(void *c, size_t o, void *unused)
{
    (void)unused;
    pctx_t *x = c;
    uint64_t v = pat(x->key, o);
    memcpy(x->p + o, &v, 8);
}

static void get(void *c, size_t o, void *unused)
{
    (void)unused;
    pctx_t *x = c;
    uint64_t v;
    memcpy(&v, x->p + o, 8);
    if (v != pat(x->key, o))
        x->bad++;
}

/* Pattern N bytes at P keyed by KEY (the block's first address), or count mismatches. */
static void fill(void *p, size_t n, const void *key)
{
    pctx_t c = { p, key, 0 };
    each_word(n, put, &c);
}

static size_t bad_words(void *p, size_t n, const void *key)
{
    pctx_t c = { p, key, 0 };
    each_word(n, get, &c);
    return c.bad;
}

static uint64_t rnd_state = 0x1234567;
static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

typedef struct block_s {
    void *p;
    size_t n;
} block_t;

/* ---- growing the range fails --------------------------------------------------------- */

Test(fault, map_failures_give_enomem_and_leak_nothing, .timeout = 300)
{
    static block_t b[200000];
    size_t nb = 0;
    void *w = malloc(1000);
    free(w);
    tide_malloc_trim(0);
    tide_stats_t base = tt_stats();

    /* Every mapping fails: large blocks until the free space is gone, then every kind of
     * call, then small objects until no slab can be had. */
    unsigned long nulls = 0, bad_errno = 0, ok = 0;
    arm(F_MAP, 0, ALWAYS);
    for (int i = 0; i < 4000 && nulls < 64; i++) {
        size_t n = (1 + rnd() % 64) * MiB;
        errno = 0;
        void *p = malloc(n);
        if (!p) {
            nulls++;
            bad_errno += errno != ENOMEM;
        } else {
            b[nb++] = (block_t){ p, n };
            fill(p, n, p);
            ok++;
        }
    }
    void *q = NULL;
    errno = 0;
    bad_errno += (calloc(1, 512 * MiB) != NULL) + (errno != ENOMEM);
    errno = 0;
    bad_errno += (aligned_alloc(64 * MiB, 128 * MiB) != NULL) + (errno != ENOMEM);
    bad_errno += posix_memalign(&q, 4096, 512 * MiB) != ENOMEM;
    errno = 0;
    bad_errno += (memalign(1 << 30, 4096) != NULL) + (errno != ENOMEM);
    errno = 0;
    bad_errno += (valloc(512 * MiB) != NULL) + (errno != ENOMEM);
    errno = 0;
    bad_errno += (pvalloc(512 * MiB) != NULL) + (errno != ENOMEM);
    errno = 0;
    bad_errno += (reallocarray(NULL, 512, MiB) != NULL) + (errno != ENOMEM);
    if (nb > 0) {
        /* A realloc that needs room fails and leaves the block as it was. */
        errno = 0;
        bad_errno += (realloc(b[0].p, 1024 * MiB) != NULL) + (errno != ENOMEM);
    }
    nulls += 8;
    for (size_t sz = 14336; sz >= 16; sz /= 4) {
        for (int i = 0; i < 400000 && nb < sizeof b / sizeof b[0]; i++) {
            errno = 0;
            void *p = malloc(sz);
            if (!p) {
                nulls++;
                bad_errno += errno != ENOMEM;
                break;
            }
            b[nb++] = (block_t){ p, sz };
            fill(p, sz, p);
            ok++;
        }
    }
    bool heap_ok_under_faults = tide_check() == 0;
    disarm();

    cr_log_info("map faults: %lu allocations failed (all ENOMEM: %s), %lu succeeded from free space", nulls,
                bad_errno ? "no" : "yes", ok);
    cr_expect(bad_errno == 0, "%lu failed calls did not give NULL with ENOMEM", bad_errno);
    cr_expect(nulls > 8, "no allocation failed while every mapping failed");
    cr_assert(heap_ok_under_faults, "tide_check() failed while the faults were on");
    tt_assert_heap_ok("after map failures");
    size_t broken = 0;
    for (size_t i = 0; i < nb; i++)
        broken += bad_words(b[i].p, b[i].n, b[i].p);
    cr_expect(broken == 0, "%zu words of the blocks allocated under faults changed", broken);

    /* Faults off: tide grows again, and freeing everything gives back what it took. */
    void *big = malloc(256 * MiB);
    cr_assert(big != NULL, "no recovery: malloc(256 MiB) failed after the faults stopped");
    fill(big, 256 * MiB, big);
    cr_expect(bad_words(big, 256 * MiB, big) == 0);
    free(big);
    for (size_t i = 0; i < nb; i++)
        free(b[i].p);
    tide_malloc_trim(0);
    tt_assert_heap_ok("after freeing everything");
    tide_stats_t end = tt_stats();
    cr_expect(end.allocated <= base.allocated + 16384, "leak: allocated %lu at the start, %lu at the end",
              (unsigned long)base.allocated, (unsigned long)end.allocated);
    /* Active pages: the same, but for the one empty slab a bin may keep per class. */
    cr_expect(end.active <= base.active + 35 * 7 * 4096, "leak: active %lu at the start, %lu at the end",
              (unsigned long)base.active, (unsigned long)end.active);
}

Test(fault, large_blocks_return_active_exactly, .timeout = 120)
{
    tide_malloc_trim(0);
    tide_stats_t base = tt_stats();
    block_t b[64];
    size_t nb = 0;
    unsigned long nulls = 0;
    arm(F_MAP, 3, ALWAYS); /* a few growths succeed, then none */
    for (int i = 0; i < 64; i++) {
        size_t n = (1 + rnd() % 32) * MiB;
        void *p = malloc(n);
        if (p)
            b[nb++] = (block_t){ p, n };
        else
            nulls += errno == ENOMEM;
    }
    disarm();
    /* Criterion's messages allocate, and may cut slabs of classes not used so far (of up to
     * 7 pages): they wait until the statistics are read. */
    char why_with[256], why_after[256];
    bool sound_with = tt_heap_sound(why_with, sizeof why_with);
    for (size_t i = 0; i < nb; i++)
        free(b[i].p);
    bool sound_after = tt_heap_sound(why_after, sizeof why_after);
    tide_stats_t end = tt_stats();
    cr_log_info("map faults after 3 mappings: %lu of 64 large allocations failed with ENOMEM", nulls);
    cr_expect(nulls > 0);
    cr_assert(sound_with, "%s with large blocks", why_with);
    cr_assert(sound_after, "%s after freeing them", why_after);
    cr_expect(end.nmalloc_large - end.nfree_large == base.nmalloc_large - base.nfree_large,
              "large blocks live: %lu at the start, %lu after freeing them all",
              (unsigned long)(base.nmalloc_large - base.nfree_large), (unsigned long)(end.nmalloc_large - end.nfree_large));
    /* The test process (Criterion) may have taken a slab meanwhile: at most one, 7 pages. */
    cr_expect(end.active <= base.active + 7 * 4096, "active %lu at the start, %lu after freeing every large block",
              (unsigned long)base.active, (unsigned long)end.active);
}

/* Every point where growth can fail, one child process per (scenario, skip, count): the
 * children start from the same heap, so each trial fails a different call of the same
 * sequence. */
enum { S_MALLOC, S_REALLOC, S_SLABS, S_ALIGNED, S_CALLOC, NSCEN };
static const char *const scen_names[NSCEN] = { "malloc", "realloc", "slabs", "posix_memalign", "calloc" };

static int trial(int scen, long skip, long count, void *live, size_t live_n)
{
    tide_stats_t s0 = tt_stats();
    size_t want = s0.mapped + 8 * MiB; /* more than any free run: the range must grow */
    void *p = NULL;
    int rc = 0, failed = 0;
    static void *small[400000];
    size_t ns = 0;
    arm(F_MAP, skip, count);
    errno = 0;
    switch (scen) {
    case S_MALLOC:
        p = malloc(want);
        failed = !p;
        break;
    case S_REALLOC:
        p = realloc(live, want);
        failed = !p;
        break;
    case S_SLABS: /* small objects until a new slab needs the range to grow */
        for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
            small[ns] = malloc(14336);
            if (!small[ns]) {
                failed = 1;
                break;
            }
            ns++;
            if (tt_stats().mapped != s0.mapped)
                break;
        }
        break;
    case S_ALIGNED:
        rc = posix_memalign(&p, 256 * MiB, 4096);
        failed = rc != 0;
        if (failed)
            errno = rc;
        break;
    default:
        p = calloc(1, want);
        failed = !p;
    }
    int err = errno;
    disarm();
    if (failed && err != ENOMEM)
        return 10; /* a failure that is not ENOMEM */
    if (tide_check() != 0)
        return 11;
    tide_stats_t s = tt_stats();
    if (s.active + s.dirty + s.lazy + s.clean + s.held + s.metadata != s.mapped)
        return 12;
    if (scen == S_REALLOC) {
        void *blk = p ? p : live;
        if (bad_words(blk, live_n, live) != 0)
            return 13; /* the contents did not survive (a failed realloc keeps the block) */
    }
    if (scen == S_CALLOC && p) {
        unsigned char *c = p;
        for (size_t o = 0; o < want; o += 4096)
            if (c[o] || c[o + 4095])
                return 14;
    }
    if (p && scen != S_REALLOC) {
        memset(p, 0x5a, 4096);
        free(p);
    } else if (p) {
        free(p);
    }
    for (size_t i = 0; i < ns; i++)
        free(small[i]);
    tide_malloc_trim(0);
    if (tide_check() != 0)
        return 15;
    /* Recovery: the same call succeeds without faults. */
    void *again = malloc(want);
    if (!again)
        return 16;
    free(again);
    /* 1: failed cleanly; 0: a fault fired (a call after the SKIP that succeeded) and a
     * fallback absorbed it; 2: the call made no more than SKIP mappings, no fault fired. */
    if (failed)
        return 1;
    return s.grows - s0.grows > (uint64_t)skip ? 0 : 2;
}

struct trial_arg {
    int scen;
    long skip, count;
    void *live;
    size_t live_n;
};

static int trial_main(void *arg)
{
    struct trial_arg *a = arg;
    return trial(a->scen, a->skip, a->count, a->live, a->live_n);
}

Test(fault, map_fault_at_every_step_of_growth, .timeout = 600)
{
    static const long skips[] = { 0, 1, 2, 3 };
    static const long counts[] = { 1, 2, 3, 4, ALWAYS };
    /* A heap with some history: live small and large blocks, holes. */
    void *keep[64];
    for (int i = 0; i < 64; i++)
        keep[i] = malloc((size_t)(1 + rnd() % 4096) * ((i & 1) ? 1 : 1024));
    for (int i = 0; i < 64; i += 3)
        free(keep[i]);
    size_t live_n = 3 * MiB;
    void *live = malloc(live_n);
    fill(live, live_n, live);
    unsigned long absorbed[NSCEN] = { 0 }, failed[NSCEN] = { 0 }, missed[NSCEN] = { 0 }, trials = 0;
    for (int sc = 0; sc < NSCEN; sc++) {
        for (size_t i = 0; i < sizeof skips / sizeof skips[0]; i++) {
            for (size_t j = 0; j < sizeof counts / sizeof counts[0]; j++) {
                struct trial_arg a = { sc, skips[i], counts[j], live, live_n };
                struct tt_child_spec spec = { .fn = trial_main, .arg = &a, .keep_output = true };
                struct tt_child c;
                cr_assert(tt_child_run(&spec, &c) == 0);
                int st = c.status;
                cr_expect(WIFEXITED(st) && WEXITSTATUS(st) <= 2,
                          "%s with map faults after %ld calls, %ld of them: %s %d", scen_names[sc], skips[i], counts[j],
                          WIFEXITED(st) ? "check failed, code" : "killed by signal",
                          WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
                if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
                    absorbed[sc]++;
                else if (WIFEXITED(st) && WEXITSTATUS(st) == 1)
                    failed[sc]++;
                else if (WIFEXITED(st) && WEXITSTATUS(st) == 2)
                    missed[sc]++;
                trials++;
            }
        }
    }
    for (int sc = 0; sc < NSCEN; sc++)
        cr_log_info("map faults, %s: %lu trials failed with ENOMEM, %lu absorbed by a fallback, %lu needed fewer "
                    "mappings than the skip", scen_names[sc], failed[sc], absorbed[sc], missed[sc]);
    unsigned long fired = 0;
    for (int sc = 0; sc < NSCEN; sc++)
        fired += failed[sc] + absorbed[sc];
    cr_log_info("map faults: %lu trials, faults fired in %lu", trials, fired);
    for (int sc = 0; sc < NSCEN; sc++)
        cr_expect(failed[sc] > 0, "%s: no trial failed: the faults did not reach the growth path", scen_names[sc]);
}

/* ---- mremap fails: realloc copies --------------------------------------------------- */

/* A large block A with a live block right after it, so that A cannot grow in place.  Blocks
 * that land elsewhere stay allocated as fillers of the holes they found (freed by
 * free_fillers()) until two land side by side. */
static void *fillers[256];
static size_t nfillers;

static void free_fillers(void)
{
    while (nfillers)
        free(fillers[--nfillers]);
}

static void *blocked_block(size_t n, void **blocker)
{
    for (int tries = 0; tries < 100 && nfillers + 2 <= sizeof fillers / sizeof fillers[0]; tries++) {
        char *a = malloc(n), *b = malloc(n);
        if (a && b == a + n) {
            *blocker = b;
            return a;
        }
        fillers[nfillers++] = a;
        fillers[nfillers++] = b;
    }
    return NULL;
}

Test(fault, mremap_failure_makes_realloc_copy, .timeout = 120)
{
    conf("remap", "on");
    conf("remap_threshold", "65536");
    conf("remap_max", "16");
    unsigned long copies_by_fault = 0;
    for (int round = 0; round < 24; round++) {
        size_t n = (size_t)(1 + round % 6) * MiB;
        void *blocker;
        char *a = blocked_block(n, &blocker);
        cr_assert(a != NULL, "no block with a live neighbour after it");
        fill(a, n, a);
        tide_stats_t s0 = tt_stats();
        arm(F_MOVE, 0, 1);
        char *q = realloc(a, 4 * n);
        disarm();
        cr_assert(q != NULL, "realloc failed when mremap did: it must copy");
        tide_stats_t s1 = tt_stats();
        cr_expect(bad_words(q, n, a) == 0, "contents lost when mremap failed (round %d)", round);
        cr_expect(s1.remap_moves == s0.remap_moves, "a move was counted although mremap failed");
        cr_expect(s1.remap_copies == s0.remap_copies + 1, "the realloc did not copy");
        copies_by_fault += s1.remap_copies - s0.remap_copies;
        tt_assert_heap_ok("after a failed mremap");
        /* Without the fault a blocked realloc moves pages again. */
        free(q);
        void *blocker2;
        char *b2 = blocked_block(n, &blocker2);
        cr_assert(b2 != NULL, "no block with a live neighbour after it");
        fill(b2, n, b2);
        char *q2 = realloc(b2, 4 * n);
        cr_assert(q2 != NULL);
        cr_expect(bad_words(q2, n, b2) == 0, "contents lost by a realloc after the faults stopped");
        tt_assert_heap_ok("after a realloc without faults");
        free(q2);
        free(blocker);
        free(blocker2);
    }
    free_fillers();
    tide_stats_t s = tt_stats();
    cr_log_info("mremap faults: %lu injected, each made realloc copy; %lu moves without faults", copies_by_fault,
                (unsigned long)s.remap_moves);
    cr_expect(s.remap_moves > 0, "no realloc moved pages once mremap worked again");
    tt_assert_heap_ok("at the end");
}

/* ---- purging fails: the pages stay dirty ------------------------------------------------ */

static void purge_failure(const char *policy, bool vector)
{
    conf("purge", policy);
    conf("decay_ms", "-1");
    conf("background", "off");
    tide_purge();
    enum { N = 8 };
    void *blk[N], *guard[N];
    size_t n = 1 * MiB;
    for (int i = 0; i < N; i++) {
        blk[i] = malloc(n);
        guard[i] = malloc(n); /* keeps the freed runs apart: many ranges in one purge */
        memset(blk[i], 0xa5, n);
    }
    for (int i = 0; i < (vector ? N : 1); i++)
        free(blk[i]);
    tide_stats_t s0 = tt_stats();
    cr_assert(s0.dirty >= (vector ? N : 1) * n);

    arm(F_PURGE, 0, ALWAYS);
    size_t purged = tide_purge();
    disarm();
    tide_stats_t s1 = tt_stats();
    cr_expect(purged == 0, "tide_purge() claims %zu bytes although every purge failed", purged);
    cr_expect(s1.dirty == s0.dirty && s1.clean == s0.clean && s1.lazy == s0.lazy,
              "a failed purge changed the page states (dirty %lu -> %lu)", (unsigned long)s0.dirty,
              (unsigned long)s1.dirty);
    tt_assert_heap_ok("after a failed purge");
    /* Memory whose purge failed may hold old bytes: calloc must still hand out zeros. */
    unsigned char *z = calloc(1, n);
    cr_assert(z != NULL);
    size_t nonzero = 0;
    for (size_t o = 0; o < n; o++)
        nonzero += z[o] != 0;
    cr_expect(nonzero == 0, "calloc returned %zu non-zero bytes from memory whose purge failed", nonzero);
    free(z);

    /* decay_ms:0 purges on every free: each one fails, the memory stays dirty and sound. */
    conf("decay_ms", "0");
    arm(F_PURGE, 0, ALWAYS);
    for (int i = vector ? N : 1; i < N; i++)
        free(blk[i]);
    disarm();
    tt_assert_heap_ok("after frees whose purges failed");
    tide_stats_t s2 = tt_stats();
    cr_expect(s2.dirty >= s0.dirty, "memory was counted purged although the purges failed");

    /* Faults off: the same memory purges. */
    purged = tide_purge();
    tide_stats_t s3 = tt_stats();
    cr_expect(purged > 0 && s3.dirty < s2.dirty, "nothing purged once the faults stopped");
    tt_assert_heap_ok("after a purge that worked");
    for (int i = 0; i < N; i++)
        free(guard[i]);
    conf("decay_ms", "1000");
    conf("background", "on");
    cr_log_info("purge faults (%s, %s): a failed tide_purge left %lu MiB dirty, then purged %zu MiB", policy,
                vector ? "many runs" : "one run", (unsigned long)(s1.dirty >> 20), purged >> 20);
}

Test(fault, purge_failure_dontneed_one_run, .timeout = 60) { purge_failure("dontneed", false); }
Test(fault, purge_failure_dontneed_many_runs, .timeout = 60) { purge_failure("dontneed", true); }
Test(fault, purge_failure_free_one_run, .timeout = 60) { purge_failure("free", false); }
Test(fault, purge_failure_free_many_runs, .timeout = 60) { purge_failure("free", true); }

/* ---- older kernels: the purge falls back and still purges everything --------------------- */

/* Whether one of this process's descriptors is a pidfd. */
static bool holds_a_pidfd(void)
{
    char path[64], target[64];
    for (int fd = 0; fd < 1024; fd++) {
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n > 0) {
            target[n] = '\0';
            if (strstr(target, "pidfd"))
                return true;
        }
    }
    return false;
}

/* Free N separated 1 MiB runs, purge them with fault OP armed; what the OS layer counted. */
static void purge_scattered(int op, tide_stats_t *before, tide_stats_t *after)
{
    conf("purge", "dontneed");
    conf("decay_ms", "-1");
    conf("background", "off");
    enum { N = 100 };
    static void *blk[N], *guard[N];
    for (int i = 0; i < N; i++) {
        blk[i] = malloc(MiB);
        guard[i] = malloc(MiB);
        cr_assert(blk[i] && guard[i]);
        memset(blk[i], 0x5a, MiB);
    }
    for (int i = 0; i < N; i++)
        free(blk[i]);
    *before = tt_stats();
    cr_assert(before->dirty >= N * MiB);
    arm(op, 0, ALWAYS);
    errno = 4242;
    size_t purged = tide_purge();
    int err = errno;
    disarm();
    /* The failed call that made tide fall back is tide's business, not the caller's. */
    cr_expect(err == 4242, "tide_purge() succeeded but changed errno to %d (%s)", err, strerror(err));
    *after = tt_stats();
    cr_expect(purged >= N * MiB && after->dirty == 0, "purged %zu bytes, %lu left dirty", purged,
              (unsigned long)after->dirty);
    tt_assert_heap_ok("after a purge on an older kernel");
    for (int i = 0; i < N; i++)
        free(guard[i]);
}

Test(fault, purge_without_process_madvise_uses_madvise, .timeout = 60)
{
    tide_stats_t b, a;
    purge_scattered(F_NO_PROCESS_MADVISE, &b, &a);
    uint64_t calls = a.madvise_calls[0] - b.madvise_calls[0];
    cr_expect(a.process_madvise_calls == b.process_madvise_calls, "process_madvise counted although it failed");
    cr_expect(calls >= 100, "100 runs took %lu madvise calls", (unsigned long)calls);
    cr_log_info("without process_madvise: 100 runs purged by %lu madvise calls", (unsigned long)calls);
}

Test(fault, purge_without_pidfd_self_opens_a_pidfd, .timeout = 60)
{
    bool had_pidfd = holds_a_pidfd(); /* (on a kernel before 6.14 an earlier purge opened it) */
    tide_stats_t b, a;
    purge_scattered(F_NO_PIDFD_SELF, &b, &a);
    uint64_t calls = a.process_madvise_calls - b.process_madvise_calls;
    cr_expect(calls >= 2 && calls <= 4, "100 runs took %lu process_madvise calls", (unsigned long)calls);
    cr_expect(a.madvise_calls[0] - b.madvise_calls[0] <= 2, "the runs went to madvise one by one");
    cr_expect(had_pidfd || holds_a_pidfd(), "no pidfd of its own was opened");
    cr_log_info("without PIDFD_SELF: 100 runs purged by %lu process_madvise calls on an own pidfd",
                (unsigned long)calls);
}

/* ---- decay_ms:0 while another thread purges -------------------------------------------- */

typedef struct freer_s {
    void *p;
    long tid;
    int done;
} freer_t;

static void *freer_main(void *arg)
{
    freer_t *f = arg;
    __atomic_store_n(&f->tid, (long)syscall(SYS_gettid), __ATOMIC_RELEASE);
    free(f->p);
    __atomic_store_n(&f->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* The state letter of thread TID of this process (S: asleep). */
static char thread_state(long tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return '?';
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' ? paren[2] : '?';
}

static void nap_1ms(void)
{
    struct timespec ts = { 0, 1000000 };
    nanosleep(&ts, NULL);
}

/* In a fork child (only its own threads, none of Criterion's): thread A frees a block and
 * its purge is held just after its madvise, with purge_lock taken; thread B frees another
 * block meanwhile; then A's purge goes on.  Exit 0 when nothing is dirty once both frees
 * returned; 1 when B's pages stayed dirty; 3 and up when the scenario could not be set up. */
static int contended_free_child(void *unused)
{
    if (tide_conf_set("purge", "dontneed") || tide_conf_set("decay_ms", "0") || tide_conf_set("thp", "off") ||
        tide_conf_set("background", "off"))
        return 3;
    size_t na = 64 * MiB, nb = 4 * MiB;
    char *a = malloc(na), *ga = malloc(MiB), *b = malloc(nb), *gb = malloc(MiB); /* guards keep the runs apart */
    if (!a || !ga || !b || !gb)
        return 4;
    memset(a, 1, na);
    memset(b, 1, nb);
    tide_stats_t s0;
    tide_stats_get(&s0, sizeof s0);
    freer_t fa = { a, 0, 0 }, fb = { b, 0, 0 };
    pthread_t ta, tb;
    tide_fault_inject(F_PURGE_STALL, 0, 1);
    if (pthread_create(&ta, NULL, freer_main, &fa) != 0)
        return 5;
    /* A is held once its madvise has been counted. */
    tide_stats_t s;
    int i = 0;
    for (; i < 10000; i++, nap_1ms()) {
        tide_stats_get(&s, sizeof s);
        if (s.madvise_calls[0] + s.process_madvise_calls > s0.madvise_calls[0] + s0.process_madvise_calls)
            break;
    }
    if (i == 10000)
        return 6;
    if (pthread_create(&tb, NULL, freer_main, &fb) != 0)
        return 7;
    /* B's free returned, or B sleeps (on purge_lock) in 5 samples in a row. */
    int asleep = 0;
    for (i = 0; i < 10000 && !__atomic_load_n(&fb.done, __ATOMIC_ACQUIRE) && asleep < 5; i++, nap_1ms()) {
        long tid = __atomic_load_n(&fb.tid, __ATOMIC_ACQUIRE);
        asleep = tid && thread_state(tid) == 'S' ? asleep + 1 : 0;
    }
    int b_returned_first = __atomic_load_n(&fb.done, __ATOMIC_ACQUIRE);
    tide_fault_inject(F_PURGE_STALL, 0, 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    tide_stats_get(&s, sizeof s);
    fprintf(stderr, "contended free: B's free %s A's purge; %lu KiB dirty after both returned\n",
            b_returned_first ? "returned during" : "waited for", (unsigned long)(s.dirty >> 10));
    free(ga);
    free(gb);
    return s.dirty == 0 ? 0 : 1;
}

/* decay_ms:0 purges before free returns, also when another thread's purge holds purge_lock:
 * a free that found it taken used to leave its pages dirty (the other pass had collected
 * its runs before they were freed), until some later free came by. */
Test(fault, decay_0_free_purges_while_another_thread_purges, .timeout = 120)
{
    struct tt_child_spec spec = { .fn = contended_free_child, .keep_output = true };
    struct tt_child c;
    cr_assert(tt_child_run(&spec, &c) == 0);
    int st = c.status;
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) != 1,
              "a free with decay_ms:0 left its pages dirty while another thread purged (see stderr)");
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) <= 1, "the scenario failed: %s %d",
              WIFEXITED(st) ? "exit code" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/* ---- healing a moved block fails ---------------------------------------------------------- */

Test(fault, heal_failure_keeps_the_heap_sound, .timeout = 120)
{
    conf("remap", "on");
    conf("remap_threshold", "65536");
    conf("remap_max", "1"); /* room for one moved block: 2 VMAs */
    size_t n = 2 * MiB;
    void *blocker;
    char *a = blocked_block(n, &blocker);
    cr_assert(a != NULL);
    fill(a, n, a);
    tide_stats_t s0 = tt_stats();
    char *q = realloc(a, 4 * n);
    cr_assert(q != NULL);
    tide_stats_t s1 = tt_stats();
    cr_assert(s1.remap_moves == s0.remap_moves + 1, "the realloc did not move pages (moves %lu -> %lu)",
              (unsigned long)s0.remap_moves, (unsigned long)s1.remap_moves);
    cr_expect(bad_words(q, n, a) == 0);

    /* Freeing the moved block must heal its VMAs: that fails, and nothing else does. */
    arm(F_HEAL, 0, ALWAYS);
    free(q);
    disarm();
    tide_stats_t s2 = tt_stats();
    cr_expect(s2.remap_live == 0, "the freed block still counts as moved");
    cr_expect(s2.remap_heals == s1.remap_heals, "a heal was counted although it failed");
    tt_assert_heap_ok("after a failed heal");

    /* The unhealed VMAs keep their budget: the next realloc that would move copies. */
    char *a2 = blocked_block(n, &blocker);
    cr_assert(a2 != NULL);
    fill(a2, n, a2);
    char *q2 = realloc(a2, 4 * n);
    cr_assert(q2 != NULL);
    tide_stats_t s3 = tt_stats();
    cr_expect(bad_words(q2, n, a2) == 0, "contents lost");
    cr_expect(s3.remap_moves == s2.remap_moves, "a move although the VMA budget is spent");
    tt_assert_heap_ok("after a copy for want of budget");

    /* More budget: moves again, and a second move of the same block with its heal failing. */
    conf("remap_max", "16");
    fill(q2, 4 * n, q2);
    void *b2 = malloc(n);
    char *q3 = realloc(q2, 8 * n);
    cr_assert(q3 != NULL);
    cr_expect(bad_words(q3, 4 * n, q2) == 0);
    fill(q3, 8 * n, q3);
    void *b3 = malloc(n);
    arm(F_HEAL, 0, ALWAYS);
    char *q4 = realloc(q3, 16 * n); /* moves again: healing the old place fails */
    char *q5 = q4 ? realloc(q4, 12 * n) : NULL; /* a shrink heals the cut tail: fails too */
    disarm();
    cr_assert(q4 != NULL && q5 != NULL);
    cr_expect(bad_words(q5, 8 * n, q3) == 0, "contents lost across moves with failing heals");
    tt_assert_heap_ok("after moves with failing heals");
    free(q5);
    free(b2);
    free(b3);
    free(blocker);
    free_fillers();
    tt_assert_heap_ok("after freeing");

    conf("remap_max", "16");
    tt_assert_heap_ok("at the end");
    tide_stats_t s4 = tt_stats();
    cr_log_info("heal faults: moves %lu, heals %lu, copies %lu, VMAs %lu", (unsigned long)s4.remap_moves,
                (unsigned long)s4.remap_heals, (unsigned long)s4.remap_copies, (unsigned long)s4.vmas);
}

/* A shrink whose heal of the cut tail fails: the block still shrinks (a caller may free it
 * with free_sized() at its new size: a block that kept its old size failed that check, as
 * the soak's fault run found), its pieces keep their budget for good, and tide's range must
 * stay within 1 + 2 * remap_max VMAs. */
Test(fault, heal_failure_on_shrink_keeps_the_vma_bound, .timeout = 60)
{
    conf("remap", "on");
    conf("remap_threshold", "65536");
    conf("remap_max", "1");
    size_t n = 2 * MiB;
    tide_stats_t h0 = tt_stats();
    cr_assert(h0.vmas == 1, "tide's range starts in %lu VMAs", (unsigned long)h0.vmas);
    void *blocker;
    char *m = blocked_block(n, &blocker);
    cr_assert(m != NULL);
    char *mq = realloc(m, 4 * n);
    cr_assert(mq != NULL);
    cr_assert(tt_stats().remap_moves == h0.remap_moves + 1, "the realloc did not move pages");
    arm(F_HEAL, 0, ALWAYS);
    mq = realloc(mq, n / 2); /* shrink: healing the cut tail fails */
    disarm();
    cr_assert(mq != NULL);
    tide_free_sized(mq, n / 2);
    tide_stats_t h1 = tt_stats();
    cr_log_info("heal faults on a shrink: %lu VMAs after freeing the block, %lu moved blocks live",
                (unsigned long)h1.vmas, (unsigned long)h1.remap_live);
    /* Reallocs that would move: only as many as the budget allows. */
    void *m2q[4], *blockers[4];
    for (int i = 0; i < 4; i++) {
        char *m2 = blocked_block(n, &blockers[i]);
        cr_assert(m2 != NULL);
        m2q[i] = realloc(m2, 4 * n);
        cr_assert(m2q[i] != NULL);
        tide_stats_t h2 = tt_stats();
        cr_log_info("  realloc %d: moves %lu copies %lu in place %lu vmas %lu", i, (unsigned long)h2.remap_moves,
                    (unsigned long)h2.remap_copies, (unsigned long)h2.remap_in_place, (unsigned long)h2.vmas);
        cr_expect(h2.vmas <= 1 + 2 * 1, "%lu VMAs in tide's range with remap_max:1 after a shrink whose heal failed "
                  "(%lu moves since)", (unsigned long)h2.vmas, (unsigned long)(h2.remap_moves - h1.remap_moves));
    }
    for (int i = 0; i < 4; i++) {
        free(m2q[i]);
        free(blockers[i]);
    }
    free(blocker);
    free_fillers();
    tt_assert_heap_ok("at the end");
}

/* ---- the OS layer keeps errno --------------------------------------------------------------- */

/* Every primitive of src/os.c, called directly (this program links tide's objects) with
 * arguments that make its system call fail, and with ones that succeed: it returns what
 * happened and leaves errno as it was.  A futex wait on a word that no longer holds the
 * value is what a contended lock meets (EAGAIN); an EEXIST is what range growth meets. */
#include "meta.h"
#include "os.h"
#include <sys/mman.h>

#define KEEP_ERRNO(call)                                                                            \
    do {                                                                                            \
        errno = 4242;                                                                               \
        call;                                                                                       \
        int e_ = errno;                                                                             \
        cr_expect(e_ == 4242, "%s changed errno to %d (%s)", #call, e_, strerror(e_));              \
    } while (0)

Test(fault, os_primitives_keep_errno, .timeout = 60)
{
    free(malloc(1)); /* tide is up */
    uint32_t word = 0;
    KEEP_ERRNO(os_futex_wait(&word, 1)); /* EAGAIN: the word is not 1 */
    KEEP_ERRNO(os_futex_wake(&word, 1));
    KEEP_ERRNO(os_futex_wake((uint32_t *)(uintptr_t)8, 1)); /* EFAULT */

    /* A page of our own, and a hole (mapped, then unmapped) beside it. */
    char *pg = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(pg != MAP_FAILED);
    uintptr_t mine = (uintptr_t)pg, hole = (uintptr_t)pg + PAGE;
    munmap((void *)hole, PAGE);
    int r;
    KEEP_ERRNO(r = os_map_at(mine, PAGE));
    cr_expect(r == EEXIST, "os_map_at over a mapping: %d", r);
    KEEP_ERRNO(r = os_map_at(hole, PAGE));
    cr_expect(r == 0, "os_map_at in a hole: %d", r);
    KEEP_ERRNO(r = os_map_over(hole, PAGE));
    cr_expect(r == 0);
    munmap((void *)hole, PAGE);
    KEEP_ERRNO(r = os_map_over(mine + 1, PAGE)); /* EINVAL: unaligned */
    cr_expect(r != 0);
    uintptr_t out;
    KEEP_ERRNO(r = os_map_anywhere((size_t)1 << 62, PAGE, &out)); /* ENOMEM */
    cr_expect(r == ENOMEM);
    KEEP_ERRNO(r = os_map_anywhere(PAGE, 2 * MiB, &out));
    cr_expect(r == 0);
    if (r == 0)
        munmap((void *)out, PAGE);
    KEEP_ERRNO(r = os_purge(hole, PAGE, OS_ADV_DONTNEED)); /* ENOMEM: nothing mapped */
    cr_expect(r != 0);
    KEEP_ERRNO(r = os_purge(mine, PAGE, OS_ADV_FREE));
    cr_expect(r == 0);
    struct iovec bad[2] = {{(void *)hole, PAGE}, {(void *)(hole + 64 * PAGE), PAGE}};
    KEEP_ERRNO(r = os_purge_vec(bad, 2, OS_ADV_DONTNEED));
    cr_expect(r != 0);
    KEEP_ERRNO(r = os_hugepage(mine + 1, PAGE)); /* EINVAL */
    cr_expect(r != 0);
    KEEP_ERRNO(r = os_move(hole, PAGE, mine)); /* nothing to move */
    cr_expect(r != 0);
    KEEP_ERRNO(os_has_dontunmap());
    KEEP_ERRNO(r = os_name(mine, PAGE, "tide-test")); /* EINVAL without kernel support: 0 */
    cr_expect(r == 0, "os_name on a page of our own: %d", r);
    KEEP_ERRNO(os_name(hole, PAGE, "tide-test")); /* ENOMEM where the kernel names: nothing mapped */
    KEEP_ERRNO(os_resident(hole, PAGE)); /* mincore: ENOMEM */
    KEEP_ERRNO(os_count_vmas(mine, mine + PAGE));
    KEEP_ERRNO(os_overcommit_policy());
    KEEP_ERRNO(os_now_ns());
    KEEP_ERRNO(os_ncpus());
    KEEP_ERRNO(os_random_seed());
    KEEP_ERRNO(os_init());
    KEEP_ERRNO(r = os_commit_probe((size_t)1 << 62)); /* ENOMEM */
    cr_expect(r == ENOMEM, "os_commit_probe(2^62): %d", r);
    KEEP_ERRNO(r = os_commit_probe(PAGE));
    cr_expect(r == 0, "os_commit_probe(4096): %d", r);
    KEEP_ERRNO(r = os_unmap(mine + 1, PAGE)); /* EINVAL: unaligned */
    cr_expect(r != 0);
    KEEP_ERRNO(os_ram_and_swap());
    KEEP_ERRNO(os_overcommit_policy());
    /* write(2) to a closed stderr: EBADF */
    fflush(stderr);
    int saved = dup(2);
    close(2);
    KEEP_ERRNO(os_write_stderr("x\n", 2));
    dup2(saved, 2);
    close(saved);
    munmap(pg, PAGE);
}

/* os_vma_of asks the kernel for one mapping with PROCMAP_QUERY where it can, and reads
 * /proc/self/maps where it cannot: both give the same answers, for a thread's stack, a
 * page of tide's heap, a page of our own with a hole beside it, one that cannot be read,
 * and code. */
typedef struct {
    int err;
    uintptr_t lo, hi;
} vma_answer_t;

static vma_answer_t vma_of(uintptr_t addr)
{
    vma_answer_t a = { 0, 0, 0 };
    KEEP_ERRNO(a.err = os_vma_of(addr, &a.lo, &a.hi));
    return a;
}

static void *stack_of_a_thread(void *arg)
{
    volatile int here = 0;
    *(vma_answer_t *)arg = vma_of((uintptr_t)&here);
    return NULL;
}

Test(fault, a_mapping_is_found_alike_with_and_without_procmap_query, .timeout = 60)
{
    char *heap = malloc(100);
    char *pg = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(pg != MAP_FAILED);
    munmap(pg + PAGE, PAGE); /* [pg, +4K) ours, a hole, [pg + 8K, +4K) unreadable */
    cr_assert(mprotect(pg + 2 * PAGE, PAGE, PROT_NONE) == 0);
    volatile int here = 0;
    const uintptr_t at[] = { (uintptr_t)&here, (uintptr_t)heap, (uintptr_t)pg, (uintptr_t)pg + PAGE,
                             (uintptr_t)pg + 2 * PAGE, (uintptr_t)&malloc };
    const char *what[] = { "the main stack", "tide's heap", "our page", "the hole", "an unreadable page", "code" };
    enum { N = sizeof at / sizeof at[0] };
    vma_answer_t by_query[N + 1], by_text[N + 1];
    unsigned long queries = os_vma_queries;
    for (unsigned i = 0; i < N; i++)
        by_query[i] = vma_of(at[i]);
    pthread_t t;
    cr_assert(pthread_create(&t, NULL, stack_of_a_thread, &by_query[N]) == 0);
    pthread_join(t, NULL);
    unsigned long asked = os_vma_queries - queries;
    arm(F_NO_PROCMAP_QUERY, 0, ALWAYS);
    for (unsigned i = 0; i < N; i++)
        by_text[i] = vma_of(at[i]);
    cr_assert(pthread_create(&t, NULL, stack_of_a_thread, &by_text[N]) == 0);
    pthread_join(t, NULL);
    unsigned long asked_without = os_vma_queries - queries - asked;
    disarm();
    cr_expect(by_text[0].err == 0 && by_text[0].lo <= at[0] && at[0] < by_text[0].hi, "the main stack: %d",
              by_text[0].err);
    cr_expect(by_text[N].err == 0 && by_text[N].hi - by_text[N].lo >= 16 * PAGE, "a thread's stack: %d",
              by_text[N].err);
    cr_expect(by_text[2].err == 0 && by_text[2].lo == (uintptr_t)pg && by_text[2].hi == (uintptr_t)pg + PAGE);
    cr_expect(by_text[3].err == ENOENT, "the hole: %d", by_text[3].err);
    cr_expect(by_text[4].err == EACCES, "an unreadable page: %d", by_text[4].err);
    for (unsigned i = 0; i <= N; i++) {
        const char *w = i < N ? what[i] : "a thread's stack";
        cr_expect(by_query[i].err == by_text[i].err && by_query[i].lo == by_text[i].lo &&
                      by_query[i].hi == by_text[i].hi,
                  "%s: query %d [%#lx, %#lx), text %d [%#lx, %#lx)", w, by_query[i].err, by_query[i].lo,
                  by_query[i].hi, by_text[i].err, by_text[i].lo, by_text[i].hi);
    }
    cr_expect(asked_without == 0, "%lu queries made with the kernel played without them", asked_without);
    /* This machine's kernel (6.18) answers the query; an older one is asked once. */
    struct utsname u;
    int major = 0, minor = 0;
    if (uname(&u) == 0 && sscanf(u.release, "%d.%d", &major, &minor) == 2 && (major > 6 || (major == 6 && minor >= 11)))
        cr_expect(asked == N + 1, "%lu of %u lookups answered by the query", asked, N + 1);
    munmap(pg, PAGE);
    munmap(pg + 2 * PAGE, PAGE);
    free(heap);
}

/* A moved block that grew in place and moved again is made of two pieces.  A shrink whose
 * cut falls in the first piece, with the heal of the cut tail failing, must not leave those
 * pieces behind unpaid: after the block is freed, tide's count of extra VMAs still covers
 * what is in its range, and moves of other blocks keep it within 1 + 2 * remap_max. */
Test(fault, heal_failure_on_shrink_of_a_block_in_two_pieces_keeps_the_vma_bound, .timeout = 60)
{
    conf("remap", "on");
    conf("remap_threshold", "65536");
    conf("remap_max", "3"); /* room for the two-piece block (3) beside its old place (2) */
    const uint64_t limit = 1 + 2 * 3;
    size_t n = 2 * MiB;
    tide_stats_t h0 = tt_stats();
    cr_assert(h0.vmas == 1, "tide's range starts in %lu VMAs", (unsigned long)h0.vmas);
    void *blocker;
    char *m = blocked_block(n, &blocker);
    cr_assert(m != NULL);
    fill(m, n / 2, m);
    size_t size = 2 * n;
    char *q = realloc(m, size); /* moves: one piece of n bytes, then n grown in the range's VMA */
    cr_assert(q != NULL && tt_stats().remap_moves == h0.remap_moves + 1, "the first realloc did not move pages");
    /* Grow it by n at a time, with blocks of n allocated meanwhile, until one lands after
     * it and the growth moves it again. */
    for (int i = 0; i < 200 && tt_stats().remap_moves == h0.remap_moves + 1; i++) {
        cr_assert(nfillers < sizeof fillers / sizeof fillers[0]);
        fillers[nfillers++] = malloc(n);
        q = realloc(q, size + n);
        cr_assert(q != NULL);
        size += n;
    }
    tide_stats_t h1 = tt_stats();
    cr_assert(h1.remap_moves == h0.remap_moves + 2 && h1.remap_live == 1,
              "the block did not move a second time (moves %lu, live %lu)",
              (unsigned long)(h1.remap_moves - h0.remap_moves), (unsigned long)h1.remap_live);
    cr_expect(bad_words(q, n / 2, m) == 0, "contents lost by the second move");
    arm(F_HEAL, 0, ALWAYS);
    char *s = realloc(q, n / 2); /* the cut falls in the first piece: healing the tail fails */
    disarm();
    cr_assert(s != NULL);
    cr_expect(bad_words(s, n / 2, m) == 0, "contents lost by the shrink");
    free(s); /* heals what is left of the block */
    tide_stats_t h2 = tt_stats();
    cr_log_info("two pieces, tail heal failed: %lu VMAs after the free, %lu extra counted", (unsigned long)h2.vmas,
                (unsigned long)h2.remap_vmas);
    cr_expect(h2.vmas <= 1 + h2.remap_vmas, "%lu VMAs in tide's range but only %lu extra counted",
              (unsigned long)h2.vmas, (unsigned long)h2.remap_vmas);
    /* Moves of other blocks, as many as the budget allows. */
    void *moved[4], *blockers[4];
    for (int i = 0; i < 4; i++) {
        char *b = blocked_block(n, &blockers[i]);
        cr_assert(b != NULL);
        moved[i] = realloc(b, 2 * n);
        cr_assert(moved[i] != NULL);
        tide_stats_t h3 = tt_stats();
        cr_expect(h3.vmas <= limit, "%lu VMAs in tide's range with remap_max:3 after the stranded tail (%lu moves)",
                  (unsigned long)h3.vmas, (unsigned long)(h3.remap_moves - h2.remap_moves));
        cr_expect(h3.vmas <= 1 + h3.remap_vmas, "%lu VMAs in tide's range but only %lu extra counted",
                  (unsigned long)h3.vmas, (unsigned long)h3.remap_vmas);
    }
    tide_stats_t h4 = tt_stats();
    cr_log_info("then 4 blocked reallocs: %lu moves, %lu copies, %lu VMAs", (unsigned long)(h4.remap_moves - h2.remap_moves),
                (unsigned long)(h4.remap_copies - h2.remap_copies), (unsigned long)h4.vmas);
    for (int i = 0; i < 4; i++) {
        free(moved[i]);
        free(blockers[i]);
    }
    free(blocker);
    free_fillers();
    tt_assert_heap_ok("at the end");
    conf("remap_max", "1");
}

/* A moved block freed while healing fails leaves its piece in the free space.  A block
 * later carved across that piece spans two VMAs, and moving it makes two pieces, not the
 * one a first move makes: tide's count of extra VMAs must see them, and the range must
 * stay within 1 + 2 * remap_max VMAs. */
Test(fault, heal_failure_at_free_leaves_pieces_that_later_moves_count, .timeout = 60)
{
    conf("remap", "on");
    conf("remap_threshold", "65536");
    conf("remap_max", "3");
    const uint64_t limit = 1 + 2 * 3;
    size_t n = 2 * MiB;
    cr_assert(tt_stats().vmas == 1);
    void *blocker;
    char *m = blocked_block(n, &blocker);
    cr_assert(m != NULL);
    char *q = realloc(m, 4 * n); /* one piece: [q, q + n) */
    cr_assert(q != NULL && tt_stats().remap_live == 1, "the realloc did not move pages");
    arm(F_HEAL, 0, ALWAYS);
    free(q);
    disarm();
    uintptr_t piece_lo = (uintptr_t)q, piece_hi = piece_lo + n;
    bool across = false;
    void *moved[3], *blockers[3];
    for (int i = 0; i < 3; i++) {
        char *b = blocked_block(3 * n / 2, &blockers[i]);
        cr_assert(b != NULL);
        across |= (uintptr_t)b < piece_hi && (uintptr_t)b + 3 * n / 2 > piece_hi;
        moved[i] = realloc(b, 3 * n);
        cr_assert(moved[i] != NULL);
        tide_stats_t s = tt_stats();
        cr_log_info("block at piece%+ld: %lu VMAs, %lu extra counted, %lu moves", (long)((uintptr_t)b - piece_lo),
                    (unsigned long)s.vmas, (unsigned long)s.remap_vmas, (unsigned long)s.remap_moves);
        cr_expect(s.vmas <= 1 + s.remap_vmas, "%lu VMAs in tide's range but only %lu extra counted",
                  (unsigned long)s.vmas, (unsigned long)s.remap_vmas);
        cr_expect(s.vmas <= limit, "%lu VMAs in tide's range with remap_max:3", (unsigned long)s.vmas);
    }
    cr_expect(across, "no block was carved across the unhealed piece: the test misses its case");
    for (int i = 0; i < 3; i++) {
        free(moved[i]);
        free(blockers[i]);
    }
    free(blocker);
    free_fillers();
    tt_assert_heap_ok("at the end");
    conf("remap_max", "1");
}

/* ---- the kernel's overcommit policy refuses (the probe fails) --------------------------- */

static int overcommit_policy(void)
{
    FILE *f = fopen("/proc/sys/vm/overcommit_memory", "r");
    int v = -1;
    if (f) {
        if (fscanf(f, "%d", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

/* A refused probe: every large request fails with ENOMEM before anything is mapped (the
 * range and its page map stay as they were), whether the block would come from free
 * space or from growth; smaller requests are not asked; once the kernel grants again,
 * the same requests succeed. */
Test(fault, refused_probe_fails_large_requests_and_maps_nothing, .timeout = 60)
{
    if (overcommit_policy() == 2)
        cr_skip_test("vm.overcommit_memory is 2: a refused probe does not refuse free space tide holds");
    size_t big = 768 * MiB;
    /* Free space for BIG, the refusal must not depend on the range having to grow; made
     * of blocks below the threshold, since a granted request answers for smaller ones. */
    void *room[8];
    for (int i = 0; i < 8; i++)
        cr_assert((room[i] = malloc(200 * MiB)) != NULL);
    for (int i = 0; i < 8; i++)
        free(room[i]);
    char *keep = malloc(64 * MiB);
    cr_assert(keep);
    fill(keep, 64 * MiB, keep);
    tide_stats_t s0 = tt_stats();
    arm(F_PROBE, 0, ALWAYS);
    errno = 0;
    void *p1 = malloc(big);
    int e1 = errno;
    void *p2 = calloc(1, big);
    void *p3 = aligned_alloc(big, 4096);
    void *p4 = memalign(512 * MiB, 300 * MiB);
    errno = 0;
    char *k2 = realloc(keep, 64 * MiB + big);
    int e5 = errno;
    tide_stats_t s1 = tt_stats();
    void *small = malloc(200 * MiB); /* below the probe's threshold */
    char *grown = realloc(keep, 64 * MiB + 100 * MiB);
    disarm();
    cr_assert(p1 == NULL && e1 == ENOMEM, "malloc(768 MiB) under a refused probe: %p, errno %d", p1, e1);
    cr_assert(p2 == NULL && p3 == NULL && p4 == NULL, "calloc %p, aligned_alloc %p, memalign %p under a refused probe",
              p2, p3, p4);
    cr_assert(k2 == NULL && e5 == ENOMEM, "realloc growing by 768 MiB under a refused probe: %p, errno %d", k2, e5);
    cr_assert(s1.mapped == s0.mapped && s1.grows == s0.grows,
              "refused requests mapped something: mapped %lu -> %lu, grows %lu -> %lu", (unsigned long)s0.mapped,
              (unsigned long)s1.mapped, (unsigned long)s0.grows, (unsigned long)s1.grows);
    cr_assert(small != NULL, "malloc(200 MiB) failed: requests below the threshold must not be probed");
    cr_assert(grown != NULL, "realloc growing by 100 MiB failed: growth below the threshold must not be probed");
    cr_assert(bad_words(grown, 64 * MiB, keep) == 0, "the block lost its contents");
    tt_assert_heap_ok("after refused requests");
    void *p = malloc(big);
    cr_assert(p != NULL, "malloc(768 MiB) failed once the kernel grants again");
    free(p);
    free(small);
    free(grown);
    tt_assert_heap_ok("at the end");
}

/* ---- giving a freed giant block's address space back fails (munmap) ---------------------- */

static void unmap_failure(const char *policy)
{
    conf("purge", policy);
    size_t n = 3 * 1024 * MiB;
    tide_stats_t s0 = tt_stats();
    char *p = malloc(n);
    cr_assert(p);
    for (size_t off = 0; off < n; off += MiB)
        p[off] = 1;
    free(p);
    arm(F_UNMAP, 0, ALWAYS);
    tide_malloc_trim(0);
    tide_stats_t s1 = tt_stats(); /* armed still: the purger thread cannot unmap meanwhile either */
    disarm();
    cr_assert(s1.mapped >= s0.mapped + n, "%s: the tail shrank although munmap failed (mapped %lu -> %lu MiB)", policy,
              (unsigned long)(s0.mapped >> 20), (unsigned long)(s1.mapped >> 20));
    tt_assert_heap_ok("after a failed munmap");
    /* The pages are free and purged: the next trim gives them back. */
    tide_malloc_trim(0);
    tide_stats_t s2 = tt_stats();
    cr_log_info("unmap faults (%s): mapped %lu MiB, %lu with the 3 GiB block freed and munmap failing, %lu after",
                policy, (unsigned long)(s0.mapped >> 20), (unsigned long)(s1.mapped >> 20),
                (unsigned long)(s2.mapped >> 20));
    cr_assert(s2.mapped < s0.mapped + n / 8, "%s: nothing given back once munmap works (mapped %lu MiB)", policy,
              (unsigned long)(s2.mapped >> 20));
    cr_assert(s2.vmas == s0.vmas, "%s: %lu VMAs after the trim, %lu before", policy, (unsigned long)s2.vmas,
              (unsigned long)s0.vmas);
    tt_assert_heap_ok("after the trim");
}

Test(fault, unmap_failure_dontneed_keeps_the_tail, .timeout = 120) { unmap_failure("dontneed"); }
Test(fault, unmap_failure_free_keeps_the_tail, .timeout = 120) { unmap_failure("free"); }

/* ---- tide's mappings are named "tide" (PR_SET_VMA_ANON_NAME) ------------------------------ */

/* The OS layer records every call that makes or changes tide's mappings (os_trace).  With
 * op 10 (OS_OP_NAME) armed, naming plays a kernel that has CONFIG_ANON_VMA_NAME (the calls are recorded,
 * not made, and work); unarmed, os_name asks the real kernel, which on a kernel without
 * it refuses the first call (EINVAL) and is asked no more. */
#include <sys/prctl.h>
#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#endif
#ifndef PR_SET_VMA_ANON_NAME
#define PR_SET_VMA_ANON_NAME 0
#endif

/* Whether this kernel names anonymous mappings, asked on a page of the test's own. */
static bool kernel_names_mappings(void)
{
    void *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(p != MAP_FAILED);
    int r = prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)p, PAGE, (unsigned long)"tide-test");
    int e = errno;
    munmap(p, PAGE);
    cr_assert(r == 0 || e == EINVAL, "prctl(PR_SET_VMA_ANON_NAME) on a page of our own: %s", strerror(e));
    return r == 0;
}

typedef struct names_s {
    unsigned maps, heals, moves, hugepages;  /* mapping calls that worked, and THP advice */
    unsigned names, played, called, skipped; /* namings, by how they were done */
    unsigned refused;                        /* real namings the kernel refused with EINVAL */
    unsigned pm_ext, heap_ext;               /* maps that extended range 0 down / up */
    uintptr_t lo, end;                       /* range 0 as the trace has grown it */
} names_t;

/* The trace from FROM on: in each thread, every mapping call that worked (a reservation,
 * an extension, a heal, a move) is followed at once by one naming, "tide", of exactly the
 * span it mapped (a move: where the pages went), before any other call of that thread,
 * and every naming follows such a call.  LO and END: range 0 when FROM was taken. */
static names_t check_names(unsigned long from, uintptr_t lo, uintptr_t end, const char *when)
{
    names_t n = { .lo = lo, .end = end };
    unsigned long to = ATOMIC_LOAD(&os_trace_len);
    cr_assert(to <= OS_TRACE_MAX, "the trace overflowed (%lu calls)", to);
    struct {
        int tid;
        const os_trace_t *pending;
    } th[16];
    size_t nth = 0;
    for (unsigned long i = from; i < to; i++) {
        const os_trace_t *t = &os_trace[i];
        size_t k = 0;
        while (k < nth && th[k].tid != t->tid)
            k++;
        if (k == nth) {
            cr_assert(nth < ARRAY_SIZE(th));
            th[nth].tid = t->tid;
            th[nth++].pending = NULL;
        }
        const os_trace_t *m = th[k].pending;
        if (t->op == OS_TR_NAME) {
            cr_assert(m != NULL, "%s: call %lu names [%#lx, %#lx) without a mapping made just before", when, i,
                      (unsigned long)t->addr, (unsigned long)(t->addr + t->len));
            uintptr_t want = m->op == OS_TR_MOVE ? m->to : m->addr;
            cr_assert(t->addr == want && t->len == m->len,
                      "%s: call %lu names [%#lx, %#lx), not the whole of [%#lx, %#lx) mapped just before", when, i,
                      (unsigned long)t->addr, (unsigned long)(t->addr + t->len), (unsigned long)want,
                      (unsigned long)(want + m->len));
            /* The metadata range is "tide-meta", everything else "tide". */
            uintptr_t meta[32][2];
            size_t nmeta = meta_chunks(meta, 32);
            bool in_meta = false;
            for (size_t c = 0; c < nmeta; c++)
                in_meta |= want >= meta[c][0] && want < meta[c][1];
            cr_assert_str_eq(t->name, in_meta ? "tide-meta" : "tide", "%s: call %lu gives the name '%s'", when, i, t->name);
            n.names++;
            n.played += t->how == OS_NAME_PLAYED;
            n.skipped += t->how == OS_NAME_SKIPPED;
            if (t->how == OS_NAME_CALLED) {
                n.called++;
                n.refused += t->err == EINVAL;
                cr_assert(t->err == 0 || t->err == EINVAL, "%s: call %lu: the kernel said %s", when, i,
                          strerror(t->err));
            }
            th[k].pending = NULL;
            continue;
        }
        cr_assert(m == NULL, "%s: call %lu (op %d) comes before the naming of [%#lx, %#lx), mapped just before", when,
                  i, (int)t->op, (unsigned long)(m->op == OS_TR_MOVE ? m->to : m->addr),
                  (unsigned long)((m->op == OS_TR_MOVE ? m->to : m->addr) + m->len));
        if (t->err)
            continue;
        switch (t->op) {
        case OS_TR_MAP:
            n.maps++;
            if (t->addr + t->len == n.lo) {
                n.pm_ext++;
                n.lo = t->addr;
            } else if (t->addr == n.end) {
                n.heap_ext++;
                n.end = t->addr + t->len;
            }
            th[k].pending = t;
            break;
        case OS_TR_MAP_OVER:
            n.heals++;
            th[k].pending = t;
            break;
        case OS_TR_MOVE:
            n.moves++;
            th[k].pending = t;
            break;
        case OS_TR_HUGEPAGE:
            n.hugepages++;
            break;
        default:
            break;
        }
    }
    for (size_t k = 0; k < nth; k++)
        cr_assert(th[k].pending == NULL, "%s: the last mapping of thread %d, [%#lx, %#lx), was never named", when,
                  th[k].tid, (unsigned long)th[k].pending->addr,
                  (unsigned long)(th[k].pending->addr + th[k].pending->len));
    cr_log_info("%s: %u maps (%u of the page map, %u of the heap), %u heals, %u moves, %u namings (%u made, %u refused, "
                "%u skipped, %u played), %u huge-page advice",
                when, n.maps, n.pm_ext, n.heap_ext, n.heals, n.moves, n.names, n.called, n.refused, n.skipped, n.played,
                n.hugepages);
    return n;
}

/* The lines of /proc/self/maps inside tide's ranges, and how many of them are [anon:tide]. */
static void maps_in_tide(unsigned *lines, unsigned *named)
{
    uintptr_t r[8][2];
    size_t nr = tide_ranges(r, 8);
    FILE *f = fopen("/proc/self/maps", "r");
    cr_assert(f);
    char line[512];
    *lines = *named = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        if (sscanf(line, "%lx-%lx", &a, &b) != 2)
            continue;
        for (size_t i = 0; i < nr && i < 8; i++)
            if (a < r[i][1] && r[i][0] < b) {
                (*lines)++;
                *named += strstr(line, " [anon:tide]\n") != NULL;
                break;
            }
    }
    fclose(f);
}

static uintptr_t range0_lo(void)
{
    uintptr_t r[8][2];
    cr_assert(tide_ranges(r, 8) >= 1);
    return r[0][0];
}

static uintptr_t range0_end(void)
{
    uintptr_t r[8][2];
    cr_assert(tide_ranges(r, 8) >= 1);
    return r[0][1];
}

/* Large blocks, never touched, that make range 0 grow at both ends: 20 x 24 MiB needs a
 * page map for 480 MiB of heap where start-up reserved one for 32 MiB. */
enum { NGROW = 20 };
static void grow_heap(void *blocks[NGROW])
{
    for (int i = 0; i < NGROW; i++)
        cr_assert((blocks[i] = malloc(24 * MiB)) != NULL);
}

static void free_blocks(void *blocks[NGROW])
{
    for (int i = 0; i < NGROW; i++)
        free(blocks[i]);
}

/* For real, on whatever kernel runs the test: from start-up on (the range's reservation
 * included) every mapping was given its name, once and whole.  A kernel that cannot name
 * refused the first call and was not asked again; one that can took every name, and the
 * range is [anon:tide] in /proc/self/maps.  The range stays one VMA either way. */
Test(fault, every_mapping_is_named_once_whole_and_a_kernel_without_names_is_asked_once, .timeout = 60)
{
    conf("background", "off");
    bool kernel = kernel_names_mappings();
    void *blocks[NGROW];
    grow_heap(blocks);
    names_t n = check_names(0, 0, 0, kernel ? "since start-up, a kernel with names" : "since start-up, no names");
    cr_assert(n.maps >= 3, "only %u mappings since start-up: the heap did not grow", n.maps);
    cr_assert(n.names == n.maps + n.heals + n.moves);
    /* The trace starts with the reservation: 4 MiB of heap and its page map, in range 0. */
    unsigned long first = 0;
    while (first < os_trace_len && (os_trace[first].op != OS_TR_MAP || os_trace[first].err))
        first++;
    const os_trace_t *res = &os_trace[first];
    cr_assert(res->len > 4 * MiB && res->len < 5 * MiB && res->addr >= range0_lo() && res->addr + res->len <= range0_end(),
              "the first mapping, [%#lx, %#lx), is not the reservation of range 0", (unsigned long)res->addr,
              (unsigned long)(res->addr + res->len));
    tide_stats_t s = tt_stats();
    unsigned lines, named;
    maps_in_tide(&lines, &named);
    cr_log_info("kernel names mappings: %s; stats.named %lu; %u of %u VMAs of tide's range [anon:tide]; %lu prctl calls",
                kernel ? "yes" : "no", (unsigned long)s.named, named, lines, (unsigned long)os_counters.name_calls);
    if (kernel) {
        cr_assert(n.called == n.names && n.refused == 0 && n.skipped == 0,
                  "a kernel with names: %u namings, %u made, %u refused, %u skipped", n.names, n.called, n.refused,
                  n.skipped);
        cr_assert(s.named == 1);
        cr_assert(named == lines, "%u of tide's %u VMAs are [anon:tide]", named, lines);
    } else {
        cr_assert(n.called == 1 && n.refused == 1 && n.skipped == n.names - 1,
                  "a kernel without names was asked %u times (%u refused), %u namings skipped of %u", n.called,
                  n.refused, n.skipped, n.names);
        cr_assert(ATOMIC_LOAD(&os_counters.name_calls) == 1, "%lu prctl calls",
                  (unsigned long)os_counters.name_calls);
        cr_assert(s.named == 0);
        cr_assert(named == 0);
    }
    cr_assert(s.vmas == 1 && lines == 1, "tide's range is %lu VMAs (%u lines of the maps)", (unsigned long)s.vmas,
              lines);
    free_blocks(blocks);
    tt_assert_heap_ok("after the growth");
}

/* Each extension, of the heap upwards and of the page map downwards, is named whole right
 * after it is mapped (so it merges into the range's VMA), before the huge-page advice. */
static void extensions_are_named(bool thp)
{
    conf("background", "off");
    conf("thp", thp ? "on" : "off");
    uintptr_t lo = range0_lo(), end = range0_end();
    unsigned long from = ATOMIC_LOAD(&os_trace_len);
    arm(F_NAME_PLAY, 0, ALWAYS);
    void *blocks[NGROW];
    grow_heap(blocks);
    disarm();
    names_t n = check_names(from, lo, end, thp ? "growth with thp:on" : "growth");
    cr_assert(n.pm_ext >= 1 && n.heap_ext >= 2, "growth made %u page-map and %u heap extensions", n.pm_ext, n.heap_ext);
    cr_assert(n.maps == n.pm_ext + n.heap_ext, "%u maps, not all of them extensions of range 0", n.maps);
    cr_assert(n.played == n.names && n.names == n.maps, "%u maps, %u namings (%u played)", n.maps, n.names, n.played);
    cr_assert(n.lo == range0_lo() && n.end == range0_end(), "the extensions do not add up to range 0");
    if (thp)
        cr_assert(n.hugepages >= n.heap_ext, "%u huge-page advice for %u heap extensions", n.hugepages, n.heap_ext);
    cr_assert(tt_stats().vmas == 1);
    free_blocks(blocks);
    tt_assert_heap_ok("after the growth");
}

Test(fault, extensions_are_named_whole_before_they_merge, .timeout = 60) { extensions_are_named(false); }
Test(fault, extensions_are_named_before_the_huge_page_advice, .timeout = 60) { extensions_are_named(true); }

/* A further range, made when something else sits after the first one, is named whole: its
 * page map and heap are one mapping and one naming. */
Test(fault, a_further_range_is_named_whole, .timeout = 60)
{
    conf("background", "off");
    uintptr_t end = range0_end();
    void *wall = mmap((void *)end, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    cr_assert(wall == (void *)end, "could not map a page right after tide's range");
    unsigned long from = ATOMIC_LOAD(&os_trace_len);
    arm(F_NAME_PLAY, 0, ALWAYS);
    void *p = malloc(tt_stats().mapped + 64 * MiB);
    disarm();
    cr_assert(p != NULL);
    uintptr_t r[8][2];
    cr_assert(tide_ranges(r, 8) == 2, "no second range was made");
    names_t n = check_names(from, range0_lo(), end, "a further range");
    bool whole = false;
    for (unsigned long i = from; i < ATOMIC_LOAD(&os_trace_len); i++)
        whole |= os_trace[i].op == OS_TR_NAME && os_trace[i].addr == r[1][0] && os_trace[i].addr + os_trace[i].len == r[1][1];
    cr_assert(whole, "range 1 [%#lx, %#lx) was not named in one call", (unsigned long)r[1][0], (unsigned long)r[1][1]);
    cr_assert(n.played == n.names && n.names == n.maps);
    free(p);
    munmap(wall, PAGE);
    tt_assert_heap_ok("with two ranges");
}

/* A moved block is named where it went (a block of two pieces in one call), and every
 * heal names the fresh pages it maps: the old pieces after a second move, the tail a
 * shrink cuts off, and what is left at free. */
Test(fault, moved_blocks_and_healed_pieces_are_named, .timeout = 60)
{
    conf("background", "off");
    conf("remap", "on");
    conf("remap_threshold", "65536");
    conf("remap_max", "3");
    size_t n = 2 * MiB;
    tide_stats_t h0 = tt_stats();
    cr_assert(h0.vmas == 1);
    unsigned long from = ATOMIC_LOAD(&os_trace_len);
    uintptr_t lo = range0_lo(), end = range0_end();
    arm(F_NAME_PLAY, 0, ALWAYS);
    void *blocker;
    char *m = blocked_block(n, &blocker);
    cr_assert(m != NULL);
    fill(m, n / 2, m);
    size_t size = 2 * n;
    char *q = realloc(m, size);
    cr_assert(q != NULL && tt_stats().remap_moves == h0.remap_moves + 1, "the first realloc did not move pages");
    for (int i = 0; i < 200 && tt_stats().remap_moves == h0.remap_moves + 1; i++) {
        cr_assert(nfillers < sizeof fillers / sizeof fillers[0]);
        fillers[nfillers++] = malloc(n);
        q = realloc(q, size + n);
        cr_assert(q != NULL);
        size += n;
    }
    tide_stats_t h1 = tt_stats();
    cr_assert(h1.remap_moves == h0.remap_moves + 2, "the block did not move a second time");
    char *s = realloc(q, n / 2); /* the cut tail is healed */
    cr_assert(s != NULL);
    cr_expect(bad_words(s, n / 2, m) == 0, "contents lost");
    free(s); /* and the rest */
    disarm();
    tide_stats_t h2 = tt_stats();
    names_t c = check_names(from, lo, end, "moves and heals");
    cr_assert(c.moves == 2, "%u moves", c.moves);
    cr_assert(c.heals == h2.remap_heals - h0.remap_heals && c.heals >= 3, "%u heals traced, %lu counted", c.heals,
              (unsigned long)(h2.remap_heals - h0.remap_heals));
    cr_assert(c.played == c.names && c.names == c.maps + c.heals + c.moves);
    free(blocker);
    free_fillers();
    cr_assert(tt_stats().vmas == 1, "tide's range is %lu VMAs once the moved block is gone", (unsigned long)tt_stats().vmas);
    tt_assert_heap_ok("at the end");
    conf("remap_max", "1");
}

/* ---- no guard pages in the kernel ------------------------------------------------------- */

static void guard_einval_run(void *arg)
{
    void **v = arg;
    arm(F_GUARD, 0, ALWAYS);
    for (int i = 0; i < 16; i++) {
        v[i] = malloc((size_t)(64 + 32 * i) << 10);
        memset(v[i], 1, (size_t)(64 + 32 * i) << 10);
        v[16 + i] = malloc(4096);
        memset(v[16 + i], 2, 4096);
    }
    for (int i = 0; i < 32; i += 2)
        free(v[i]);
    disarm();
}

Test(fault, guard_einval_warns_once_and_runs_without_guard_pages, .timeout = 60)
{
    conf("guard", "on");
    void *v[32];
    char *err = NULL;
    tt_capture(guard_einval_run, v, NULL, &err);
    cr_expect_str_eq(err, "tide: guard pages are not available here (MADV_GUARD_INSTALL: Invalid argument; Linux 6.13 "
                          "has them): running without them\n");
    free(err);
    tide_stats_t s = tt_stats();
    /* At most the one page the first guarded block or slab was carved with is left. */
    cr_expect_leq(s.guard_bytes, 4096, "%lu bytes of guard pages after the kernel refused them",
                  (unsigned long)s.guard_bytes);
    cr_expect_eq(s.held, 0, "%lu bytes held as guards the kernel refused", (unsigned long)s.held);
    tt_assert_heap_ok("after guard pages were refused");
    /* For good: later blocks get no guard page, and a freed one is reused as before. */
    size_t before = s.guard_bytes;
    char *p = malloc(256 << 10);
    memset(p, 3, 256 << 10);
    free(p);
    char *q = malloc(256 << 10);
    s = tt_stats();
    cr_expect_eq(s.guard_bytes, before, "a guard page was made after the kernel refused them");
    cr_expect_eq(q, p, "a freed block was not reused at once without guard pages");
    free(q);
    for (int i = 1; i < 32; i += 2)
        free(v[i]);
    tt_assert_heap_ok("at the end");
}

/* ---- a kernel that refuses MADV_COLLAPSE ------------------------------------------------ */

#define COLLAPSE_OBJS (192 * 1024)
static void collapse_refused_run(void *arg)
{
    void **v = arg;
    for (int i = 0; i < COLLAPSE_OBJS; i++) {
        v[i] = malloc(512);
        if (v[i])
            memset(v[i], 5, 512);
    }
}

static void print_stats(void *unused)
{
    (void)unused;
    tide_stats_print(0);
}

Test(fault, refused_collapse_turns_thp_auto_off_without_a_warning, .timeout = 120)
{
    if (strcmp(tt_thp_setting(), "madvise") && strcmp(tt_thp_setting(), "always"))
        cr_skip_test("the system's THP setting is never: thp:auto is off already");
    conf("thp", "auto");
    static void *v[COLLAPSE_OBJS];
    char *err = NULL, *stats = NULL;
    arm(F_COLLAPSE, 0, ALWAYS);
    tt_capture(collapse_refused_run, v, NULL, &err); /* 96 MiB of slabs: the units in use before
                                                           * MADV_HUGEPAGE are collapsed */
    tt_capture(print_stats, NULL, NULL, &stats);
    disarm();
    cr_expect_str_eq(err, "", "a refused MADV_COLLAPSE printed something");
    cr_expect(strstr(stats, "  thp                    auto: off (the kernel refused MADV_COLLAPSE)\n") != NULL, "%s",
              stats);
    free(err);
    free(stats);
    for (int i = 0; i < COLLAPSE_OBJS; i++) {
        cr_assert(v[i] != NULL);
        free(v[i]);
    }
    tt_assert_heap_ok("after MADV_COLLAPSE was refused");
}

/* ---- slabs faulted in whole ------------------------------------------------------------ */

/* 64 B: one-page slabs, 256 of them, none there before (the runner allocates little). */
#define GROW_SIZE 64
#define GROW_OBJS 16384
#define GROW_SLAB_PAGES 1
#define BATCH_PAGES 8 /* src/arena.c: PREFAULT_BYTES */

typedef struct populates_s {
    unsigned calls, refused; /* this thread's populates, and those that failed */
    size_t pages;            /* pages the ones that worked covered */
} populates_t;

/* This thread's populates in the trace from FROM on.  Each asks for whole pages, and at
 * most a batch of them. */
static populates_t populates_since(unsigned long from)
{
    populates_t p = { 0 };
    unsigned long to = ATOMIC_LOAD(&os_trace_len);
    cr_assert(to <= OS_TRACE_MAX, "the trace overflowed (%lu calls)", to);
    int tid = (int)syscall(SYS_gettid);
    for (unsigned long i = from; i < to; i++) {
        const os_trace_t *t = &os_trace[i];
        if (t->op != OS_TR_POPULATE || t->tid != tid)
            continue;
        cr_assert(t->addr % PAGE == 0 && t->len % PAGE == 0 && t->len > 0 && t->len <= BATCH_PAGES * PAGE,
                  "call %lu populates [%#lx, %#lx)", i, (unsigned long)t->addr, (unsigned long)(t->addr + t->len));
        p.calls++;
        if (t->err)
            p.refused++;
        else
            p.pages += t->len / PAGE;
    }
    return p;
}

static void **grow_bin(tide_stats_t *before, tide_stats_t *after, unsigned long *from)
{
    static void *v[GROW_OBJS];
    /* Refills come from the arena of the CPU the thread is on. */
    cr_assert_eq(tt_pin_cpu(-1), 0, "sched_setaffinity: %s", strerror(errno));
    *before = tt_stats();
    *from = ATOMIC_LOAD(&os_trace_len);
    for (int i = 0; i < GROW_OBJS; i++) {
        v[i] = malloc(GROW_SIZE);
        cr_assert(v[i] != NULL);
        memset(v[i], i, GROW_SIZE);
    }
    *after = tt_stats();
    for (int i = 1; i < GROW_OBJS; i++)
        cr_assert(v[i] != v[i - 1]);
    return v;
}

static void free_all(void **v)
{
    for (int i = 0; i < GROW_OBJS; i++) {
        cr_assert_eq(*(unsigned char *)v[i], (unsigned char)i, "block %d was written over", i);
        free(v[i]);
    }
}

/* A bin that grows cuts its slabs a few at a time from fresh pages, and has them faulted in
 * with one call each time rather than a fault a page: most of its new pages come that way,
 * and the calls are fewer than a quarter of them.  What it cut ahead and has not used yet
 * waits in the bin as empty slabs do: less than one batch. */
Test(fault, a_growing_bin_faults_its_fresh_slabs_in_a_few_calls, .timeout = 60)
{
    tt_skip_under("guard:on", "a slab with a guard page is cut alone and faulted page by page");
    conf("decay_ms", "-1"); /* nothing cut ahead goes back during the test */
    tide_stats_t s0, s1;
    unsigned long from;
    void **v = grow_bin(&s0, &s1, &from);
    populates_t p = populates_since(from);
    size_t made = s1.nslabs_made - s0.nslabs_made;
    cr_assert_geq(made, 200, "%zu slabs made for %d blocks of %d B", made, GROW_OBJS, GROW_SIZE);
    cr_expect_eq(p.refused, 0, "the kernel refused %u of %u populates", p.refused, p.calls);
    cr_expect_geq(p.pages, made * GROW_SLAB_PAGES * 3 / 4, "%zu of the %zu new slab pages were populated", p.pages,
                  made * GROW_SLAB_PAGES);
    cr_expect_leq(p.calls * 4, p.pages, "%u calls for %zu pages", p.calls, p.pages);
    /* (Empty slabs kept before, of any bin, may have been used meanwhile: at most as many
     * more as a batch.) */
    cr_expect_lt(s1.nslabs_empty, s0.nslabs_empty + BATCH_PAGES / GROW_SLAB_PAGES,
                 "%lu empty slabs kept after, %lu before", (unsigned long)s1.nslabs_empty,
                 (unsigned long)s0.nslabs_empty);
    free_all(v);
    tt_assert_heap_ok("after the growth");
}

/* A program that needs one slab of a class cuts that one alone: nothing ahead. */
Test(fault, a_bin_with_one_slab_cuts_nothing_ahead, .timeout = 60)
{
    conf("decay_ms", "-1");
    cr_assert_eq(tt_pin_cpu(-1), 0, "sched_setaffinity: %s", strerror(errno));
    tide_stats_t s0 = tt_stats();
    void *p = malloc(GROW_SIZE);
    cr_assert(p != NULL);
    tide_stats_t s1 = tt_stats();
    cr_expect_leq(s1.nslabs_made - s0.nslabs_made, 1);
    /* (A kept slab may serve it: the count may fall, never rise.) */
    cr_expect_leq(s1.nslabs_empty, s0.nslabs_empty, "%lu empty slabs kept after, %lu before",
                  (unsigned long)s1.nslabs_empty, (unsigned long)s0.nslabs_empty);
    free(p);
}

/* decay_ms 0 asks for every free page back at once: nothing is cut ahead or faulted in
 * before it is used. */
Test(fault, decay_0_cuts_no_slab_ahead, .timeout = 60)
{
    conf("decay_ms", "0");
    tide_stats_t s0, s1;
    unsigned long from;
    void **v = grow_bin(&s0, &s1, &from);
    populates_t p = populates_since(from);
    cr_expect_eq(p.calls, 0, "%u populates under decay_ms 0", p.calls);
    cr_expect_leq(s1.nslabs_empty, s0.nslabs_empty, "%lu empty slabs before, %lu after", (unsigned long)s0.nslabs_empty,
                  (unsigned long)s1.nslabs_empty);
    free_all(v);
    tt_assert_heap_ok("after the growth");
}

/* Where a fault maps a huge page (thp:on here; thp:auto's advice on a big heap), one fault
 * serves 512 pages: nothing is populated. */
Test(fault, slabs_on_huge_pages_are_not_faulted_in, .timeout = 60)
{
    conf("thp", "on");
    tide_stats_t s0, s1;
    unsigned long from;
    void **v = grow_bin(&s0, &s1, &from);
    populates_t p = populates_since(from);
    cr_expect_eq(p.calls, 0, "%u populates under thp:on", p.calls);
    free_all(v);
    tt_assert_heap_ok("after the growth");
}

/* A class above a page writes only the pages its regions start on when its slab is made:
 * faulting the rest in would make resident what the program may never touch. */
Test(fault, slabs_of_a_class_above_a_page_are_not_faulted_in, .timeout = 60)
{
    conf("decay_ms", "-1");
    static void *v[512];
    unsigned long from = ATOMIC_LOAD(&os_trace_len);
    for (int i = 0; i < 512; i++) {
        v[i] = malloc(5000); /* 5120 B, 4 regions on 5 pages */
        cr_assert(v[i] != NULL);
        *(char *)v[i] = 1;
    }
    populates_t p = populates_since(from);
    cr_expect_eq(p.calls, 0, "%u populates of 5120 B slabs", p.calls);
    for (int i = 0; i < 512; i++)
        free(v[i]);
    tt_assert_heap_ok("at the end");
}

/* A kernel without MADV_POPULATE_WRITE is asked once; the slabs are then faulted page by
 * page, as they were, and nothing else changes. */
Test(fault, refused_populate_is_asked_once_and_slabs_still_work, .timeout = 60)
{
    tt_skip_under("guard:on", "a slab with a guard page is never populated");
    conf("decay_ms", "-1");
    arm(F_POPULATE, 0, ALWAYS);
    tide_stats_t s0, s1;
    unsigned long from;
    void **v = grow_bin(&s0, &s1, &from);
    disarm();
    populates_t p = populates_since(from);
    cr_expect_eq(p.calls, 1, "%u populates after the kernel refused one", p.calls);
    cr_expect_eq(p.refused, 1);
    cr_expect_geq(s1.nslabs_made - s0.nslabs_made, 200);
    free_all(v);
    tt_assert_heap_ok("after the refused populate");
}
