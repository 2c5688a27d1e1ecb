/* SPDX-License-Identifier: MIT */
/* large_realloc.c - large realloc: contents survive growth and shrinking with remap on and
 * off, moves leave no hole, the VMA count stays within 1 + 2 x remap_max and returns
 * to its baseline, and several threads can do it at once. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#define MiB ((size_t)1 << 20)
#define MIN_(a, b) ((a) < (b) ? (a) : (b))

/* The byte every block holds at offset I (a hash: independent of the block's history). */
static inline uint8_t byte_at(size_t i, uint64_t salt)
{
    uint64_t x = (i >> 3) * 0x9E3779B97F4A7C15ull ^ salt;
    x ^= x >> 29;
    return (uint8_t)(x >> (8 * (i & 7)));
}

static void fill(uint8_t *p, size_t from, size_t to, uint64_t salt)
{
    for (size_t i = from; i < to; i++)
        p[i] = byte_at(i, salt);
}

static size_t first_bad(const uint8_t *p, size_t from, size_t to, uint64_t salt)
{
    for (size_t i = from; i < to; i++)
        if (p[i] != byte_at(i, salt))
            return i;
    return SIZE_MAX;
}

/* Spot checks after every step: 64 random bytes and the first and last byte of every
 * 2 MiB unit, so a lost or misplaced page or page table is caught at once. */
static size_t spot_check(const uint8_t *p, size_t n, uint64_t salt, uint64_t *rng)
{
    for (int k = 0; k < 64; k++) {
        *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
        size_t i = (size_t)(*rng >> 16) % n;
        if (p[i] != byte_at(i, salt))
            return i;
    }
    for (size_t u = 0; u < n; u += 2 * MiB) {
        size_t last = MIN_(u + 2 * MiB, n) - 1;
        if (p[u] != byte_at(u, salt))
            return u;
        if (p[last] != byte_at(last, salt))
            return last;
    }
    return SIZE_MAX;
}
/* Lines of /proc/self/maps that overlap tide's ranges. */
static long tide_vmas(void) { return tt_count_vmas().tide; }

/* A block of WALL bytes right after the N bytes at P, so that P cannot grow in place: the
 * first one asked for usually lands there, but a free run elsewhere (whose state depends
 * on when the purger last ran) may take it first, so ask until one does. */
static void *wall_after(void *p, size_t n, size_t wall)
{
    void *tries[64], *w = NULL;
    int k = 0;
    while (k < 64 && (w = malloc(wall)) != (char *)p + n)
        tries[k++] = w;
    while (k > 0)
        free(tries[--k]);
    cr_assert_eq(w, (char *)p + n, "no block of %zu bytes would go right after %p", wall, p);
    return w;
}

/* Whether every byte of [lo, hi) is covered by some mapping. */
static bool mapped(uintptr_t lo, uintptr_t hi)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    uintptr_t covered = lo;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        if (sscanf(line, "%lx-%lx", &a, &b) == 2 && a <= covered && b > covered)
            covered = b;
    }
    fclose(f);
    return covered >= hi;
}

/* Grow one block from 1 MiB to 1 GiB (128 MiB in a short run: tt_short) by STEP bytes
 * (0: doubling), then shrink it back in big steps, checking contents all the way. */
static void grow_and_check(const char *remap, size_t step)
{
    const size_t top = tt_short() ? 128 * MiB : 1024 * MiB;
    cr_assert_eq(tide_conf_set("remap", remap), 0);
    uint64_t salt = 0x1234567 + step, rng = 42;
    size_t n = MiB;
    uint8_t *p = malloc(n);
    cr_assert_not_null(p);
    fill(p, 0, n, salt);
    /* Something right after the block, now and then, so that it cannot always grow in place. */
    void *blockers[32];
    int nblock = 0;
    tide_stats_t s0 = tt_stats();
    size_t steps = 0;
    while (n < top) {
        size_t next = step ? MIN_(n + step, top) : 2 * n;
        uint8_t *q = realloc(p, next);
        cr_assert_not_null(q, "realloc to %zu failed", next);
        size_t bad = spot_check(q, n, salt, &rng);
        cr_assert_eq(bad, SIZE_MAX, "remap:%s step %zu: byte %zu lost growing %zu -> %zu", remap, step, bad, n, next);
        if ((n & (n - 1)) == 0 || !step) { /* a full check at every power of two */
            bad = first_bad(q, 0, n, salt);
            cr_assert_eq(bad, SIZE_MAX, "remap:%s: byte %zu lost at %zu bytes", remap, bad, n);
        }
        fill(q, n, next, salt);
        p = q;
        n = next;
        if (++steps % 1024 == 0 && nblock < 32)
            blockers[nblock++] = malloc(4 * MiB);
    }
    cr_assert_eq(first_bad(p, 0, n, salt), SIZE_MAX, "remap:%s: contents lost at %zu MiB", remap, n >> 20);
    tide_stats_t s1 = tt_stats();
    cr_log_info("remap:%s, %s: %lu in place, %lu moves, %lu copies", remap, step ? "64 KiB steps" : "doubling",
                (unsigned long)(s1.remap_in_place - s0.remap_in_place), (unsigned long)(s1.remap_moves - s0.remap_moves),
                (unsigned long)(s1.remap_copies - s0.remap_copies));
    if (strcmp(remap, "off") == 0)
        cr_expect_eq(s1.remap_moves, s0.remap_moves, "remap:off must never move pages");
    while (n > MiB) {
        n /= 4;
        p = realloc(p, n);
        cr_assert_not_null(p);
        cr_assert_eq(first_bad(p, 0, n, salt), SIZE_MAX, "remap:%s: contents lost shrinking to %zu", remap, n);
    }
    free(p);
    for (int i = 0; i < nblock; i++)
        free(blockers[i]);
    cr_expect_eq(tide_check(), 0);
}

Test(remap, growth_in_64k_steps_remap_on, .timeout = 300) { grow_and_check("on", 64 * 1024); }
Test(remap, growth_in_64k_steps_remap_off, .timeout = 300) { grow_and_check("off", 64 * 1024); }
Test(remap, growth_by_doubling_remap_on, .timeout = 300) { grow_and_check("on", 0); }
Test(remap, growth_by_doubling_remap_off, .timeout = 300) { grow_and_check("off", 0); }

/* Blocks that cannot grow in place (each has a neighbour right after it) move; the old
 * place stays mapped; the VMA count never passes 1 + 2 x remap_max and comes back to the
 * baseline when the blocks are freed. */
Test(remap, moves_leave_no_hole_and_vmas_stay_bounded, .timeout = 120)
{
    tt_skip_under("guard:on", "it moves pages with mremap; guard:on copies a block that has a guard page");
    const long cap = 4;
    cr_assert_eq(tide_conf_set("remap", "on"), 0);
    cr_assert_eq(tide_conf_set("remap_max", "4"), 0);
    long base_vmas = tide_vmas();
    enum { N = 12 };
    uint8_t *blk[N];
    void *wall[N];
    size_t size[N];
    for (int i = 0; i < N; i++) {
        size[i] = 2 * MiB;
        blk[i] = malloc(size[i]);
        wall[i] = malloc(MiB); /* right after the block */
        fill(blk[i], 0, size[i], (uint64_t)i);
    }
    long max_vmas = base_vmas;
    uint64_t moves0 = tt_stats().remap_moves;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            uintptr_t old; /* an address, kept to look at the maps afterwards */
            memcpy(&old, &blk[i], sizeof old);
            size_t old_size = size[i];
            uint64_t before = tt_stats().remap_moves;
            uint8_t *q = realloc(blk[i], size[i] * 2);
            cr_assert_not_null(q);
            cr_assert_eq(first_bad(q, 0, old_size, (uint64_t)i), SIZE_MAX, "block %d lost data", i);
            blk[i] = q;
            size[i] *= 2;
            fill(q, old_size, size[i], (uint64_t)i);
            if (tt_stats().remap_moves > before)
                cr_expect(mapped(old, old + old_size), "the old place of a moved block became a hole");
            long v = tide_vmas();
            if (v > max_vmas)
                max_vmas = v;
            cr_expect_leq(v, 1 + 2 * cap, "%ld VMAs with remap_max %ld", v, cap);
            cr_expect_leq(tt_stats().remap_live, (uint64_t)cap);
        }
    }
    uint64_t moves = tt_stats().remap_moves - moves0;
    cr_log_info("remap_max %ld: %lu moves, at most %ld VMAs in tide's range (baseline %ld)", cap,
                (unsigned long)moves, max_vmas, base_vmas);
    cr_expect_gt(moves, 0, "nothing moved: the test no longer exercises the mremap path");
    for (int i = 0; i < N; i++) {
        cr_assert_eq(first_bad(blk[i], 0, size[i], (uint64_t)i), SIZE_MAX);
        free(blk[i]);
        free(wall[i]);
    }
    cr_expect_eq(tide_vmas(), base_vmas, "the VMA count did not return to its baseline after the frees");
    cr_expect_eq(tt_stats().remap_live, 0);
    cr_expect_eq(tide_check(), 0);
    tide_conf_set("remap_max", "1");
}

/* A moved block shrunk into a small size and freed heals as well. */
Test(remap, moved_block_shrunk_then_freed_heals)
{
    tt_skip_under("guard:on", "it moves pages with mremap; guard:on copies a block that has a guard page");
    long base_vmas = tide_vmas();
    uint8_t *p = malloc(2 * MiB), *wall = wall_after(p, 2 * MiB, MiB);
    fill(p, 0, 2 * MiB, 9);
    uint8_t *q = realloc(p, 8 * MiB);
    cr_assert_not_null(q);
    cr_expect_eq(first_bad(q, 0, 2 * MiB, 9), SIZE_MAX);
    q = realloc(q, 20000); /* a cached large class */
    cr_expect_eq(first_bad(q, 0, 20000, 9), SIZE_MAX);
    free(q);
    free(wall);
    cr_expect_eq(tide_vmas(), base_vmas);
    cr_expect_eq(tt_stats().remap_live, 0);
}

static long realloc_reps; /* tt_rounds(3), set before the threads start */

static void *realloc_worker(void *arg)
{
    uint64_t salt = (uintptr_t)arg, rng = salt;
    for (long rep = 0; rep < realloc_reps; rep++) {
        size_t n = MiB;
        uint8_t *p = malloc(n);
        fill(p, 0, n, salt);
        void *wall = malloc(256 * 1024);
        while (n < 128 * MiB) {
            size_t next = n + n / 2 + 64 * 1024;
            uint8_t *q = realloc(p, next);
            if (!q || spot_check(q, n, salt, &rng) != SIZE_MAX)
                return (void *)1;
            fill(q, n, next, salt);
            p = q;
            n = next;
        }
        if (first_bad(p, 0, n, salt) != SIZE_MAX)
            return (void *)2;
        free(p);
        free(wall);
    }
    return NULL;
}

Test(remap, threads_reallocating_at_once, .timeout = 300)
{
    pthread_t t[4];
    realloc_reps = tt_rounds(3);
    for (long i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, realloc_worker, (void *)(i + 1));
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        cr_expect_null(r, "thread %d: contents lost (%p)", i, r);
    }
    cr_expect_eq(tt_stats().remap_live, 0);
    cr_expect_eq(tide_check(), 0);
}

/* Pairs of blocks allocated back to back and grown alternately, so that each growth
 * finds the other block in its way and moves (or copies once the budget is spent). */
enum { PAIR_THREADS = 4, PAIR_ROUNDS = 20, PAIR_REMAP_MAX = 4 };
static long pair_maps_max; /* the most VMAs a maps snapshot showed in tide's range */

static void *pair_worker(void *arg)
{
    uint64_t salt = (uintptr_t)arg;
    for (long round = 0, rounds = tt_rounds(PAIR_ROUNDS); round < rounds; round++) {
        uint8_t *blk[2];
        size_t n[2] = { MiB, MiB };
        for (int k = 0; k < 2; k++) {
            blk[k] = malloc(n[k]);
            if (!blk[k])
                return (void *)1;
            fill(blk[k], 0, 64 * 1024, salt + (uint64_t)k);
        }
        while (n[1] < 32 * MiB) {
            for (int k = 0; k < 2; k++) {
                uint8_t *q = realloc(blk[k], n[k] + 256 * 1024);
                if (!q || first_bad(q, 0, 64 * 1024, salt + (uint64_t)k) != SIZE_MAX)
                    return (void *)2;
                if (q != blk[k]) {
                    if (tt_stats().remap_live > PAIR_REMAP_MAX)
                        return (void *)3;
                    /* Torn while other threads move, so only a hint; the counter is the proof. */
                    long v = tide_vmas(), m = __atomic_load_n(&pair_maps_max, __ATOMIC_RELAXED);
                    while (v > m && !__atomic_compare_exchange_n(&pair_maps_max, &m, v, true, __ATOMIC_RELAXED,
                                                                 __ATOMIC_RELAXED))
                        ;
                }
                blk[k] = q;
                n[k] += 256 * 1024;
                q[n[k] - 1] = 1;
            }
        }
        free(blk[0]);
        free(blk[1]);
    }
    return NULL;
}

/* Several threads moving blocks at once: a move reserves the cost of its new pieces while
 * the old ones still exist, so the extra VMAs that moved blocks occupy (tide's own count,
 * raised after each mremap and lowered after each heal) never pass 2 x remap_max. */
Test(remap, threads_moving_at_once_stay_within_the_vma_budget, .timeout = 300)
{
    tt_skip_under("guard:on", "it moves pages with mremap; guard:on copies a block that has a guard page");
    const long cap = PAIR_REMAP_MAX;
    cr_assert_eq(tide_conf_set("remap", "on"), 0);
    cr_assert_eq(tide_conf_set("remap_max", "4"), 0);
    tide_stats_t s0 = tt_stats();
    pthread_t t[PAIR_THREADS];
    for (long i = 0; i < PAIR_THREADS; i++)
        pthread_create(&t[i], NULL, pair_worker, (void *)(i * 16 + 1));
    for (int i = 0; i < PAIR_THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        cr_expect_null(r, "thread %d: realloc failed or lost contents (1, 2) or more than remap_max blocks were "
                       "moved at once (3): %p", i, r);
    }
    tide_stats_t s1 = tt_stats();
    cr_log_info("%d threads, remap_max %ld: %lu moves, %lu copies, %lu in place; at most %lu extra VMAs by tide's "
                "count, %ld VMAs in tide's range in maps snapshots",
                PAIR_THREADS, cap, (unsigned long)(s1.remap_moves - s0.remap_moves),
                (unsigned long)(s1.remap_copies - s0.remap_copies),
                (unsigned long)(s1.remap_in_place - s0.remap_in_place), (unsigned long)s1.remap_vmas_peak,
                pair_maps_max);
    cr_expect_gt(s1.remap_moves, s0.remap_moves, "nothing moved: the test no longer exercises the mremap path");
    cr_expect_leq(s1.remap_vmas_peak, (uint64_t)(2 * cap), "moved blocks occupied %lu extra VMAs with remap_max %ld",
                  (unsigned long)s1.remap_vmas_peak, cap);
    cr_expect_eq(s1.remap_vmas, 0, "%lu extra VMAs still counted after every block was freed",
                 (unsigned long)s1.remap_vmas);
    cr_expect_eq(s1.remap_live, 0);
    cr_expect_eq(tide_check(), 0);
    tide_conf_set("remap_max", "1");
}

/* Random frees, mallocs and reallocs of blocks between 1 and 16 MiB (at most 256 MiB
 * live): the range must not keep growing.  Dirty, lazy and clean runs side by side once
 * made it grow without bound, and more so when many moved blocks were allowed. */
static void bounded_address_space(const char *conf_max)
{
    cr_assert_eq(tide_conf_set("remap_max", conf_max), 0);
    enum { SLOTS = 32 };
    char *b[SLOTS] = { 0 };
    size_t n[SLOTS] = { 0 }, live = 0, peak = 0;
    unsigned s = 12345;
    uint64_t mapped0 = tt_stats().mapped;
    for (long it = 0, rounds = tt_rounds(6000); it < rounds; it++) {
        s = s * 1103515245u + 12345u;
        int i = (s >> 8) % SLOTS, op = (s >> 16) % 3;
        size_t want = (size_t)(1 + ((s >> 20) % 16)) << 20;
        if (b[i] && op == 0) {
            free(b[i]);
            live -= n[i];
            b[i] = NULL;
            n[i] = 0;
            continue;
        }
        if (live - n[i] + want > 256 * MiB)
            continue;
        char *q = realloc(b[i], want);
        cr_assert_not_null(q);
        for (size_t o = n[i]; o < want; o += 4096)
            q[o] = 1;
        live += want - n[i];
        b[i] = q;
        n[i] = want;
        peak = live > peak ? live : peak;
    }
    uint64_t grown = tt_stats().mapped - mapped0;
    cr_log_info("remap_max %s: peak live %zu MiB, range grew by %lu MiB", conf_max, peak >> 20,
                (unsigned long)(grown >> 20));
    cr_expect_leq(grown, 3 * peak + 64 * MiB, "remap_max %s: the range grew by %lu MiB for %zu MiB live", conf_max,
                  (unsigned long)(grown >> 20), peak >> 20);
    for (int i = 0; i < SLOTS; i++)
        free(b[i]);
    cr_expect_eq(tide_check(), 0);
    tide_conf_set("remap_max", "1");
}

Test(remap, address_space_stays_bounded_under_random_reallocs, .timeout = 120) { bounded_address_space("1"); }
Test(remap, address_space_stays_bounded_with_many_moved_blocks, .timeout = 120) { bounded_address_space("16"); }

/* In a fork child the kernel never merges a fresh mapping into the VMA inherited from the
 * parent, so a heal would leave VMAs behind: the child copies instead of moving, and its
 * range stays within the parent's VMAs plus one at each end for its own growth (the heap
 * grows up, the page map down). */
static int copy_in_child(void *parent_vmas_p)
{
    long parent_vmas = *(long *)parent_vmas_p;
    uint64_t moves0 = tt_stats().remap_moves;
    for (int round = 0; round < 3; round++) {
        size_t n = MiB;
        uint8_t *p = malloc(n), *wall = malloc(MiB);
        fill(p, 0, n, 5);
        for (; n < 64 * MiB; n *= 2) {
            p = realloc(p, 2 * n);
            if (!p || first_bad(p, 0, n, 5) != SIZE_MAX)
                return 1;
            fill(p, n, 2 * n, 5);
        }
        if (tide_vmas() > parent_vmas + 2)
            return 2;
        free(p);
        free(wall);
    }
    return tt_stats().remap_moves == moves0 && tide_vmas() <= parent_vmas + 2 ? 0 : 3;
}

Test(remap, fork_child_copies_and_keeps_its_vmas, .timeout = 60)
{
    long parent_vmas = tide_vmas();
    struct tt_child_spec spec = { .fn = copy_in_child, .arg = &parent_vmas, .keep_output = true };
    struct tt_child c;
    cr_assert(tt_child_run(&spec, &c) == 0);
    int st = c.status;
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
}

struct moved_block {
    void *q;
    long base_vmas;
};

static int free_moved_in_child(void *arg)
{
    struct moved_block *m = arg;
    void *q = m->q;
    long base_vmas = m->base_vmas;
    tide_stats_t c0 = tt_stats();
    free(q);
    tide_stats_t c1 = tt_stats();
    int bad = 0;
    if ((long)c0.vmas > base_vmas + (long)c0.remap_vmas)
        bad |= 1;
    if ((long)c1.vmas > base_vmas + (long)c1.remap_vmas)
        bad |= 2;
    if (c1.remap_live != 0)
        bad |= 4;
    if (bad)
        fprintf(stderr, "child: %lu VMAs, %lu extra counted before the free; %lu and %lu after (base %ld)\n",
                (unsigned long)c0.vmas, (unsigned long)c0.remap_vmas, (unsigned long)c1.vmas,
                (unsigned long)c1.remap_vmas, base_vmas);
    return bad;
}

/* A fork child that frees a block moved by its parent cannot heal it (a fresh mapping does
 * not merge into the inherited VMA): the pieces stay, and so must their place in tide's
 * count of extra VMAs. */
Test(remap, fork_child_freeing_a_moved_block_keeps_counting_its_vmas, .timeout = 60)
{
    tt_skip_under("guard:on", "it moves pages with mremap; guard:on copies a block that has a guard page");
    long base_vmas = tide_vmas();
    uint8_t *p = malloc(2 * MiB), *wall = wall_after(p, 2 * MiB, MiB);
    fill(p, 0, 2 * MiB, 11);
    uint64_t moves0 = tt_stats().remap_moves;
    uint8_t *q = realloc(p, 8 * MiB);
    cr_assert_not_null(q);
    cr_assert_eq(tt_stats().remap_moves, moves0 + 1, "the realloc did not move pages");
    cr_assert_gt(tide_vmas(), base_vmas);
    struct moved_block m = { q, base_vmas };
    struct tt_child_spec spec = { .fn = free_moved_in_child, .arg = &m, .keep_output = true };
    struct tt_child c;
    cr_assert(tt_child_run(&spec, &c) == 0);
    int st = c.status;
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d (1: count low before the free, 2: after, "
              "4: still live)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    cr_expect_eq(first_bad(q, 0, 2 * MiB, 11), SIZE_MAX, "the parent's block changed");
    free(q);
    free(wall);
    cr_expect_eq(tide_vmas(), base_vmas);
    cr_expect_eq(tt_stats().remap_vmas, 0);
}
