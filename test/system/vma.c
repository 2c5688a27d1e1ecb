/* SPDX-License-Identifier: MIT */
/*
 * vma.c - tide's heap stays a handful of VMAs.
 *
 * Two threads churn 1 GiB in total (512 MiB each, counted in bytes requested) through
 * mixed sizes: log-uniform 16 B - 4 MiB, large blocks grown and shrunk with realloc
 * (moves), blocks aligned to 64 KiB and 2 MiB, every page of every block touched.  Then
 * the lines of /proc/self/maps that overlap tide_ranges() are counted three times: with
 * the working sets still live, after everything was freed, and after tide_purge().  Each
 * count must be at most 4.  The counts are printed in the test's log.  On a kernel that
 * names mappings, each of those VMAs is [anon:tide] (the names keep the counts as they
 * are); on one that does not (EINVAL), none is.
 */
#include "support.h"

#include <criterion/criterion.h>
#include <pthread.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define MAX_TIDE_VMAS 4

enum { NLIVE = 192 };

struct blk {
    unsigned char *p;
    size_t n;
};

struct churner {
    int id;
    size_t target, allocated;
    long reallocs, aligned;
    struct blk live[NLIVE];
};

/* One word per page (its own address) plus the last byte: every page is touched, as in a
 * real program, which matters for how the kernel merges moved pages. */
static void touch(struct blk *b)
{
    for (size_t off = 0; off + 8 < b->n; off += 4096) { /* < : the last byte is separate */
        uintptr_t v = (uintptr_t)(b->p + off);
        memcpy(b->p + off, &v, 8);
    }
    b->p[b->n - 1] = (unsigned char)b->n;
}

static void check(const struct blk *b, int id)
{
    for (size_t off = 0; off + 8 < b->n; off += 4096) {
        uintptr_t v;
        memcpy(&v, b->p + off, 8);
        if (v != (uintptr_t)(b->p + off)) {
            tt_fail("thread %d: block %p (%zu B): the word at offset %zu changed", id, (void *)b->p, b->n, off);
            return;
        }
    }
    if (b->p[b->n - 1] != (unsigned char)b->n)
        tt_fail("thread %d: block %p (%zu B): the last byte changed", id, (void *)b->p, b->n);
}

static void *churn(void *arg)
{
    struct churner *c = arg;
    tt_rng r = {0x7a3e0000u + (uint64_t)c->id};
    while (c->allocated < c->target && !tt_has_failed()) {
        struct blk *b = &c->live[tt_below(&r, NLIVE)];
        int what = (int)tt_below(&r, 100);
        if (what < 35 && b->p && b->n > 16 * KiB) {
            /* grow or shrink a large block: realloc moves it when it cannot stay */
            check(b, c->id);
            size_t m = tt_below(&r, 3) ? b->n + b->n / 2 + tt_below(&r, MiB) : b->n / 3 + 1;
            if (m > 24 * MiB)
                m = 24 * MiB;
            unsigned char *old = b->p;
            unsigned char *q = realloc(b->p, m);
            if (!q) {
                tt_fail("thread %d: realloc(%zu -> %zu) failed", c->id, b->n, m);
                break;
            }
            /* the kept pages still hold the words written at the old address */
            for (size_t off = 0; off + 8 < b->n && off + 8 <= m; off += 4096) {
                uintptr_t v;
                memcpy(&v, q + off, 8);
                if (v != (uintptr_t)(old + off)) {
                    tt_fail("thread %d: realloc(%p, %zu -> %zu) = %p lost the word at offset %zu", c->id,
                            (void *)old, b->n, m, (void *)q, off);
                    return NULL;
                }
            }
            b->p = q;
            b->n = m;
            touch(b);
            c->allocated += m;
            c->reallocs++;
            continue;
        }
        if (b->p) {
            check(b, c->id);
            free(b->p);
        }
        size_t n = tt_log_uniform(&r, 4 * MiB);
        if (n < 16)
            n = 16;
        if (what >= 90) {
            size_t al = tt_below(&r, 2) ? 64 * KiB : 2 * MiB;
            b->p = aligned_alloc(al, n);
            c->aligned++;
        } else {
            b->p = malloc(n);
        }
        if (!b->p) {
            tt_fail("thread %d: allocation of %zu B failed", c->id, n);
            break;
        }
        b->n = n;
        touch(b);
        c->allocated += n;
    }
    return NULL;
}

static char label[160] = ""; /* the configuration under test, for the printed lines */

static void report_vmas(const char *when, struct tt_vmas v)
{
    tide_stats_t s;
    memset(&s, 0, sizeof s);
    tide_stats_get(&s, sizeof s);
    tt_report("vma [%s]: %s: %d of the process's %d VMAs overlap tide's %zu range(s) (bound %d), %d named [anon:tide]; "
              "stats: vmas %" PRIu64
              ", mapped %" PRIu64 " MiB, grows %" PRIu64 ", remap moves %" PRIu64 ", heals %" PRIu64 ", live moved %" PRIu64
              ", in place %" PRIu64 ", copies %" PRIu64,
              label, when, v.tide, v.total, v.nranges, MAX_TIDE_VMAS, v.named, s.vmas, s.mapped >> 20, s.grows, s.remap_moves,
              s.remap_heals, s.remap_live, s.remap_in_place, s.remap_copies);
}

/* CONF: NULL-terminated key, value pairs set with tide_conf_set() before the churn. */
static void churn_and_count(const char *const *conf)
{
#ifdef TIDE_TEST_GLIBC
    (void)conf;
    cr_skip_test("glibc mode: tide_ranges() does not exist");
#else
    snprintf(label, sizeof label, "default");
    for (size_t i = 0; conf && conf[i]; i += 2) {
        cr_assert_eq(tide_conf_set(conf[i], conf[i + 1]), 0, "tide_conf_set(%s, %s): %s", conf[i], conf[i + 1],
                     strerror(errno));
        snprintf(i ? label + strlen(label) : label, i ? sizeof label - strlen(label) : sizeof label, "%s%s:%s",
                 i ? "," : "", conf[i], conf[i + 1]);
    }
    struct tt_vmas start = tt_count_vmas();
    cr_assert_geq(start.nranges, 1, "tide_ranges() reports no range");
    report_vmas("at start", start);

    static struct churner c[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        c[i] = (struct churner){.id = i, .target = 512 * MiB};
        cr_assert_eq(pthread_create(&t[i], NULL, churn, &c[i]), 0);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    cr_assert(!tt_has_failed(), "%s", tt_failure);
    tt_report("vma [%s]: churned %zu + %zu MiB (%ld + %ld reallocs, %ld + %ld aligned blocks)", label, c[0].allocated >> 20,
              c[1].allocated >> 20, c[0].reallocs, c[1].reallocs, c[0].aligned, c[1].aligned);

    struct tt_vmas live = tt_count_vmas();
    report_vmas("working sets live", live);
    cr_assert_eq(tt_heap_check(), 0, "tide_check() failed after the churn (see stderr)");
    size_t live_bytes = 0;
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < NLIVE; k++)
            if (c[i].live[k].p) {
                check(&c[i].live[k], i);
                live_bytes += c[i].live[k].n;
                free(c[i].live[k].p);
            }
    cr_assert(!tt_has_failed(), "%s", tt_failure);
    struct tt_vmas freed = tt_count_vmas();
    report_vmas("all freed", freed);
    tt_report("vma [%s]: calling tide_purge()", label);
    tide_purge();
    struct tt_vmas purged = tt_count_vmas();
    report_vmas("after tide_purge()", purged);

    cr_assert_leq(live.tide, MAX_TIDE_VMAS, "%d VMAs overlap tide's ranges with %zu MiB live (bound %d)", live.tide,
                  live_bytes >> 20, MAX_TIDE_VMAS);
    cr_assert_leq(freed.tide, MAX_TIDE_VMAS, "%d VMAs overlap tide's ranges after everything was freed (bound %d)",
                  freed.tide, MAX_TIDE_VMAS);
    cr_assert_leq(purged.tide, MAX_TIDE_VMAS, "%d VMAs overlap tide's ranges after tide_purge() (bound %d)",
                  purged.tide, MAX_TIDE_VMAS);
    cr_assert_geq(live.tide, 1, "no VMA overlaps tide's ranges: is tide_ranges() right?");
    bool names = tt_kernel_names_vmas();
    const struct tt_vmas *counts[] = {&start, &live, &freed, &purged};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        cr_assert_eq(counts[i]->named, names ? counts[i]->tide : 0,
                     "%d of tide's %d VMAs are [anon:tide], on a kernel that %s mappings", counts[i]->named,
                     counts[i]->tide, names ? "names" : "does not name");
#endif
}

Test(vma, one_gib_of_churn_on_two_threads, .timeout = 60) { churn_and_count(NULL); }

/* Transparent huge pages: MADV_HUGEPAGE on a sub-range would split the VMA. */
Test(vma, one_gib_of_churn_with_thp, .timeout = 60)
{
    const char *conf[] = {"thp", "on", NULL};
    churn_and_count(conf);
}

/* Purging every page as soon as it is free: madvise must never split the heap. */
Test(vma, one_gib_of_churn_purging_at_once, .timeout = 60)
{
    const char *conf[] = {"decay_ms", "0", "purge", "dontneed", NULL};
    churn_and_count(conf);
}
