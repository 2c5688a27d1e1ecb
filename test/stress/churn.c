/* SPDX-License-Identifier: MIT */
/*
 * churn.c - 10,000 short-lived threads must not grow the process.
 *
 * Threads are created in waves of 50 and joined.  Each one frees a few blocks the main
 * thread handed it (remote frees, into its own cache), allocates ~110 objects of 13
 * small classes and one of a cached large class, frees most of them itself (they sit in
 * its thread cache when it exits), reallocates some, and hands the rest back to the main
 * thread, which frees them after the join.
 *
 * RSS (VmRSS) is taken after a warm-up of 100 threads and again after 10,000 more; the
 * growth must stay under CHURN_RSS_BOUND_KIB.  In the warm-up, the 50 threads of a wave
 * hold all their objects at the same time (a barrier), so the heap has already served
 * the largest working set a wave can reach (~13 MiB, more than the bound) before the
 * first figure: how much of it the threads of the churn happen to overlap is luck.  The figures are printed in the test's log.
 *
 * Each figure is taken after malloc_trim(0): free pages that merely wait for the purge
 * decay (tide's decay_ms, 1 s by default) are the purger's business, not a leak, and
 * their amount at any instant depends on timing.  What this test is after is memory
 * that stays with dead threads (caches not flushed, per-thread metadata not reused),
 * which no trim gives back.  The RSS before the trim is printed as well.
 */
#include "support.h"

#include <criterion/criterion.h>
#include <pthread.h>

#define KiB ((size_t)1 << 10)

enum { WAVE = 50, WARMUP = 100, CHURN = 10000, NIN = 4, NOUT = 40 };
#define CHURN_RSS_BOUND_KIB 8192L /* 8 MiB */

static const size_t classes[] = {16, 32, 48, 64, 96, 128, 256, 512, 1024, 2048, 4096, 8192, 14336};
#define NCLASSES (sizeof classes / sizeof *classes)

struct handed {
    unsigned char *p;
    size_t n;
};

struct job {
    int id;
    pthread_barrier_t *peak; /* warm-up: all threads of the wave meet here, every object live */
    struct handed in[NIN];   /* allocated by main, freed by the thread */
    struct handed out[NOUT]; /* allocated by the thread, freed by main */
    int nout;
};

static void check_free(struct handed *h, const char *who)
{
    if (!h->p)
        return;
    size_t bad = tt_check(h->p, h->n, tt_seed(h->p, h->n));
    if (bad != SIZE_MAX)
        tt_fail("%s: block %p of %zu B changed at byte %zu", who, (void *)h->p, h->n, bad);
    free(h->p);
    h->p = NULL;
}

static unsigned char *alloc_filled(size_t n)
{
    unsigned char *p = malloc(n);
    if (!p) {
        tt_fail("malloc(%zu) failed in a short-lived thread", n);
        return NULL;
    }
    tt_fill(p, n, tt_seed(p, n));
    return p;
}

static void *short_life(void *arg)
{
    struct job *j = arg;
    for (int i = 0; i < NIN; i++)
        check_free(&j->in[i], "thread freeing main's block");
    enum { PER = 8, N = PER * NCLASSES + 1 };
    struct handed h[N];
    int k = 0;
    for (size_t c = 0; c < NCLASSES; c++)
        for (int i = 0; i < PER; i++) {
            size_t n = classes[c] - (size_t)((j->id + i) % 7); /* inside the class */
            h[k++] = (struct handed){alloc_filled(n), n};
        }
    h[k++] = (struct handed){alloc_filled(24000), 24000}; /* a cached large class */
    if (j->peak)
        pthread_barrier_wait(j->peak);
    /* a few reallocs, within and across classes */
    for (int i = 0; i < N; i += 9) {
        size_t m = h[i].n + 40;
        uint64_t seed = tt_seed(h[i].p, h[i].n);
        unsigned char *q = realloc(h[i].p, m);
        if (!q || tt_check(q, h[i].n, seed) != SIZE_MAX)
            tt_fail("realloc(%zu -> %zu) in a short-lived thread lost the contents", h[i].n, m);
        tt_fill(q, m, tt_seed(q, m));
        h[i] = (struct handed){q, m};
    }
    /* about a third goes back to main, the rest is freed here, into this thread's cache */
    j->nout = 0;
    for (int i = 0; i < N; i++) {
        if (i % 3 == 0 && j->nout < NOUT)
            j->out[j->nout++] = h[i];
        else
            check_free(&h[i], "short-lived thread");
    }
    /* and a little more traffic straight through the cache */
    for (int i = 0; i < 20; i++)
        free(alloc_filled(classes[i % NCLASSES]));
    return NULL;
}

/* Runs NTHREADS threads in waves of WAVE. With AT_PEAK, the threads of each wave wait for
 * each other with all their objects live, so the wave reaches the largest working set a
 * wave can have (about 50 x 270 KB). */
static void run_waves(int nthreads, struct job *jobs, pthread_attr_t *attr, bool at_peak)
{
    for (int done = 0; done < nthreads && !tt_has_failed(); done += WAVE) {
        pthread_t t[WAVE];
        int n = nthreads - done < WAVE ? nthreads - done : WAVE;
        pthread_barrier_t peak;
        if (at_peak)
            pthread_barrier_init(&peak, NULL, (unsigned)n);
        for (int i = 0; i < n; i++) {
            struct job *j = &jobs[i];
            j->id = done + i;
            j->peak = at_peak ? &peak : NULL;
            for (int k = 0; k < NIN; k++) {
                size_t sz = classes[(size_t)(j->id + k) % NCLASSES];
                j->in[k] = (struct handed){alloc_filled(sz), sz};
            }
            int e = pthread_create(&t[i], attr, short_life, j);
            cr_assert_eq(e, 0, "pthread_create for thread %d: %s", done + i, strerror(e));
        }
        for (int i = 0; i < n; i++)
            pthread_join(t[i], NULL);
        if (at_peak)
            pthread_barrier_destroy(&peak);
        for (int i = 0; i < n; i++)
            for (int k = 0; k < jobs[i].nout; k++)
                check_free(&jobs[i].out[k], "main freeing a dead thread's block");
    }
    cr_assert(!tt_has_failed(), "%s", tt_failure);
}

struct snapshot {
    long raw_rss_kib; /* before malloc_trim(0) */
    long rss_kib;
    long lazyfree_kib; /* part of rss_kib the kernel may take back at will (MADV_FREE) */
    uint64_t allocated, active, dirty, lazy, mapped, nthreads;
};

static struct snapshot snap(void)
{
    long raw = tt_rss_kib();
    malloc_trim(0);
    struct snapshot s = {raw, tt_rss_kib(), tt_rollup_kib("LazyFree:"), 0, 0, 0, 0, 0, 0};
#ifndef TIDE_TEST_GLIBC
    tide_stats_t t;
    memset(&t, 0, sizeof t);
    tide_stats_get(&t, sizeof t);
    s.allocated = t.allocated;
    s.active = t.active;
    s.dirty = t.dirty;
    s.lazy = t.lazy;
    s.mapped = t.mapped;
    s.nthreads = t.nthreads;
#endif
    return s;
}

Test(churn, ten_thousand_threads, .timeout = 300)
{
    struct job *jobs = calloc(WAVE, sizeof *jobs);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 128 * KiB);

    /* The warm-up reaches the largest working set a wave can have, so that the heap has
     * grown to what the churn legitimately needs before RSS is first taken. */
    run_waves(WARMUP, jobs, &attr, true);
    struct snapshot before = snap();
    run_waves(CHURN, jobs, &attr, false);
    struct snapshot after = snap();

    long growth = after.rss_kib - before.rss_kib;
    tt_report("churn: %d threads in waves of %d after a warm-up of %d: VmRSS %ld KiB -> %ld KiB (growth %ld KiB, "
              "bound %ld KiB); LazyFree %ld KiB -> %ld KiB; before malloc_trim(0): %ld KiB -> %ld KiB",
              CHURN, WAVE, WARMUP, before.rss_kib, after.rss_kib, growth, CHURN_RSS_BOUND_KIB, before.lazyfree_kib,
              after.lazyfree_kib, before.raw_rss_kib, after.raw_rss_kib);
#ifndef TIDE_TEST_GLIBC
    tt_report("churn: tide stats before -> after: allocated %" PRIu64 " -> %" PRIu64 ", active %" PRIu64 " -> %" PRIu64
              ", dirty %" PRIu64 " -> %" PRIu64 ", lazy %" PRIu64 " -> %" PRIu64 ", mapped %" PRIu64 " -> %" PRIu64
              ", threads with a cache %" PRIu64 " -> %" PRIu64,
              before.allocated, after.allocated, before.active, after.active, before.dirty, after.dirty, before.lazy,
              after.lazy, before.mapped, after.mapped, before.nthreads, after.nthreads);
#endif
    cr_assert(before.rss_kib > 0 && after.rss_kib > 0, "could not read VmRSS");
    cr_assert_lt(growth, CHURN_RSS_BOUND_KIB,
                 "RSS grew by %ld KiB over %d short-lived threads (bound %ld KiB): thread caches not given back?",
                 growth, CHURN, CHURN_RSS_BOUND_KIB);
#ifndef TIDE_TEST_GLIBC
    cr_assert_leq(after.nthreads, before.nthreads + 1,
                  "tide counts %" PRIu64 " threads with a live cache after all joined (%" PRIu64 " before)",
                  after.nthreads, before.nthreads);
#endif
    cr_assert_eq(tt_heap_check(), 0, "tide_check() failed after the churn (see stderr)");
    pthread_attr_destroy(&attr);
    free(jobs);
}
