/* SPDX-License-Identifier: MIT */
/*
 * hardening.c - the attacks an overflow or a use after free makes on the heap's own
 * data, each turned into one precise line on stderr and an abort.
 *
 *   a forged next pointer   an 8-byte overflow from a small object into the next, free,
 *                           one rewrites its link with the address of a global: the
 *                           malloc that would follow the link aborts;
 *   a cleared key           free(p), a use after free that clears p's second word (the
 *                           key), free(p): the second free is found at once (p is the
 *                           cache's head: no load from p); a large block's extent says
 *                           it is cached, so its second free is found at once, with
 *                           frees between or from another thread;
 *   a link to a block in use a forged link of a large class, to a live block: malloc
 *                           and the flush find that no cache holds it;
 *   a slot never handed out free() of a region of a live slab that malloc never returned
 *                           (in the slab, or in the thread's cache) is found before the
 *                           region is handed out twice;
 *   a kept empty slab       a block whose slab emptied and stays in its bin, freed again,
 *                           is found before it is handed out twice (its regions hold the
 *                           slab mark when kept, and handed out again they free cleanly).
 * free() loads nothing from the block: a double free with other frees between is found
 * where the block is taken next (a pop, a refill, a return to its slab), no later than
 * the malloc that would hand it out again.  Those tests go on allocating after the misuse
 * (malloc_until_twice), and fail if a block comes back twice.
 * And false alarms that must not be: a large block whose pages still hold a slab's
 * mark, shrunk by realloc into a small block and freed; a live block holding a copy of a
 * freed one's key.
 * (The double frees of large blocks are in misuse.c.)  Each attack runs in a child.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "child.h"
#include "support.h"

#define MiB ((size_t)1 << 20)

static int target; /* what the forged pointer points at */

/* The configuration matrix's variants (support.h) these attacks' premises exclude: */
/* with guard:on a freed large block is a guard and a block ends at one: the test's read or
 * write of a freed block, or past a block, faults there before the attack it sets up */
#define SKIP_UNDER_GUARD() tt_skip_under("guard:on", "it reads or writes a freed large block or past a block on purpose: guard:on faults there first")
/* with tcache:off no thread cache holds a freed block: the list forged, the key cleared or
 * the cached slot is not there, and a double free is found by free() itself */
#define SKIP_UNDER_NO_TCACHE() tt_skip_under("tcache:off", "the attack is on what a thread cache holds; tcache:off has none")

/* Under prof:on (the matrix) a block the heap profiler samples is served and freed apart
 * from its class's lists: promoted to a large block of its own, or in its slab with its
 * page marked, and kept by the profiler when freed.  The blocks an attack sets up, and the
 * malloc meant to meet them, must be plain ones: plain_malloc is malloc(SIZE) with any
 * block the profiler sampled left aside, held, until one it did not (told by its count of
 * samples; the profiler is off for good when TIDE_CONF has not turned it on). */
static uint64_t prof_samples(void)
{
    char on[8] = "";
    if (tide_conf_get("prof", on, sizeof on) != 0 || strcmp(on, "on") != 0)
        return 0;
    tide_stats_t s;
    tide_stats_get(&s, sizeof s);
    return s.prof_samples;
}

static void *plain_malloc(size_t size)
{
    for (int i = 0; i < 1000; i++) {
        uint64_t before = prof_samples();
        void *p = malloc(size);
        if (!p || prof_samples() == before)
            return p;
    }
    fprintf(stderr, "<every block sampled: the attack cannot be set up (prof_sample too small)>\n");
    exit(6);
}

/* Runs FN in a child, which must die of SIGABRT with stderr starting with WANT. */
static void expect_abort(int (*fn)(void *), void *arg, const char *want)
{
    struct tt_child_spec spec = { .fn = fn, .arg = arg, .timeout_s = 60 };
    struct tt_child c;
    cr_assert_eq(tt_child_run(&spec, &c), 0);
    char how[96];
    cr_expect(tt_child_signalled(&c, SIGABRT), "the child %s (stderr: %s)", tt_child_how(&c, how, sizeof how), c.err);
    cr_expect(strncmp(c.err, want, strlen(want)) == 0, "stderr was \"%s\", want a line starting \"%s\"", c.err, want);
    cr_expect(strchr(c.err, '\n') == c.err + c.errlen - 1, "not one line: \"%s\"", c.err);
    tt_child_free(&c);
}

/* Malloc N blocks of SIZE, keeping them all, then malloc_trim(0), which gives every cached
 * block back to its slab (a collection: a copy left on a list is found there): returns if
 * nothing aborted and no block came twice (the caller then says the misuse was not
 * caught); a block handed out twice (or HELD, which the program holds) is the failure
 * itself: the child says so and exits 5.  The caller pins itself to its CPU first, so that
 * its refills and flushes meet the same arena's slabs and lists (tcache.c). */
static void malloc_until_twice_holding(size_t size, unsigned n, const void *held)
{
    void **got = calloc(n, sizeof *got);
    if (!got)
        exit(2);
    for (unsigned i = 0; i < n; i++) {
        got[i] = malloc(size);
        for (unsigned j = 0; j <= i; j++) {
            if ((j < i && got[j] == got[i]) || got[i] == held) {
                fprintf(stderr, "<handed out twice: %p>\n", got[i]);
                exit(5);
            }
        }
    }
    malloc_trim(0);
}

static void malloc_until_twice(size_t size, unsigned n) { malloc_until_twice_holding(size, n, NULL); }

/* ---- a forged next pointer ----------------------------------------------------------- */

static int forge(void *arg)
{
    (void)arg;
    char *p = malloc(64), *q = malloc(64);
    if (q != p + 64)
        return 2; /* the layout the attack needs */
    free(q);
    void *fake = &target;
    memcpy(p + 64, &fake, sizeof fake); /* 8 bytes past p: q's link */
    char *r = malloc(64);                 /* q again: following its link must abort */
    char *s = malloc(64);
    fprintf(stderr, "<not caught: %p %p>\n", (void *)r, (void *)s);
    return 0;
}

Test(hardening, a_forged_next_pointer_aborts, .timeout = 120)
{
    SKIP_UNDER_NO_TCACHE();
    /* Found in the child: the first two blocks of a fresh class lie side by side. */
    struct tt_child_spec spec = { .fn = forge, .timeout_s = 60 };
    struct tt_child c;
    for (int run = 0; run < 20; run++) {
        cr_assert_eq(tt_child_run(&spec, &c), 0);
        cr_assert(!tt_child_exited(&c, 2), "the two blocks were not neighbours");
        cr_expect(tt_child_signalled(&c, SIGABRT), "run %d: stderr: %s", run, c.err);
        cr_expect(strstr(c.err, "tide: malloc(): corrupted free list: the object after 0x") == c.err &&
                      strstr(c.err, " (a free block of 64 bytes) is 0x") && strstr(c.err, ", not a free block of its class\n"),
                  "run %d: stderr was \"%s\"", run, c.err);
        tt_child_free(&c);
    }
}

/* A use after free that rewrites the link of the block freed last is caught wherever the
 * pop is: the fast path's for a small class past 4 KiB (the lookup table covers every small
 * class), the slow pop's inline test of the first range for a large cached class, and a
 * flush's check of every link. */
static int forge_slow(void *arg)
{
    size_t size = (size_t)(uintptr_t)arg;
    void **p = malloc(size), **q = malloc(size);
    free(p);
    free(q); /* q heads the list, its link leads to p */
    q[0] = &target;
    void *r = malloc(size); /* q: its link must not be followed */
    void *s = malloc(size);
    fprintf(stderr, "<not caught: %p %p>\n", r, s);
    return 0;
}

static void forge_slow_case(size_t size)
{
    const char *want = "tide: malloc(): corrupted free list: the object after 0x";
    struct tt_child_spec spec = { .fn = forge_slow, .arg = (void *)(uintptr_t)size, .timeout_s = 60 };
    struct tt_child c;
    cr_assert_eq(tt_child_run(&spec, &c), 0);
    char how[96], tail[64];
    snprintf(tail, sizeof tail, " (a free block of %zu bytes) is 0x", size);
    cr_expect(tt_child_signalled(&c, SIGABRT), "the child %s (stderr: %s)", tt_child_how(&c, how, sizeof how), c.err);
    cr_expect(strstr(c.err, want) == c.err && strstr(c.err, tail), "stderr was \"%s\"", c.err);
    tt_child_free(&c);
}

Test(hardening, a_forged_next_pointer_past_4_kib_aborts_8192, .timeout = 60)
{
    SKIP_UNDER_NO_TCACHE();
    forge_slow_case(8192);
}
Test(hardening, a_forged_next_pointer_of_a_large_class_aborts, .timeout = 60)
{
    SKIP_UNDER_NO_TCACHE();
    SKIP_UNDER_GUARD();
    forge_slow_case(32768);
}

/* A thread's exit flushes its cache, and the walk of a large class checks every link. */
static void *free_two_and_forge(void *arg)
{
    (void)arg;
    void **p = malloc(32768), **q = malloc(32768);
    free(p);
    free(q);
    q[0] = &target;
    return NULL;
}

static int forge_then_exit(void *arg)
{
    (void)arg;
    pthread_t t;
    if (pthread_create(&t, NULL, free_two_and_forge, NULL) != 0)
        return 2;
    pthread_join(t, NULL);
    fprintf(stderr, "<not caught>\n");
    return 0;
}

Test(hardening, a_forged_next_pointer_of_a_large_class_aborts_in_a_flush, .timeout = 60)
{
    SKIP_UNDER_NO_TCACHE();
    SKIP_UNDER_GUARD();
    expect_abort(forge_then_exit, NULL, "tide: free(): corrupted free list: the object after 0x");
}

/* ---- a key cleared by a use after free --------------------------------------------------- */

static int cleared_key(void *arg)
{
    size_t size = (size_t)(uintptr_t)arg;
    void **p = malloc(size);
    free(p);
    p[1] = NULL; /* the use after free */
    free(p);
    void *a = malloc(size), *b = malloc(size);
    fprintf(stderr, "<not caught: %p %p>\n", a, b);
    return 0;
}

static void cleared_key_case(size_t size)
{
    expect_abort(cleared_key, (void *)(uintptr_t)size, "tide: free(): double free 0x");
}

Test(hardening, a_double_free_with_its_key_cleared_aborts_64, .timeout = 60) { cleared_key_case(64); }
Test(hardening, a_double_free_with_its_key_cleared_aborts_1024, .timeout = 60) { cleared_key_case(1024); }

/* ---- another block's key ------------------------------------------------------------- */

/* A use after free that copies one freed block's first words over another's (a stale
 * struct copied) leaves the second with a key that is not its own: a key is the block's
 * own mask, so the pop that would hand the second out finds it gone.  (With one key for
 * the whole process the copy passed for a key, and the pop found at best a corrupted
 * link.) */
static int copied_over(void *arg)
{
    size_t size = (size_t)(uintptr_t)arg;
    void **a = malloc(size), **b = malloc(size);
    free(a);
    free(b); /* the list: b, then a */
    void *volatile *from = (void *volatile *)a, *volatile *to = (void *volatile *)b;
    to[0] = from[0]; /* the use after free (volatile: a compiler that knows free would drop it) */
    to[1] = from[1];
    void *x = malloc(size);
    fprintf(stderr, "<not caught: %p>\n", x);
    return 0;
}

Test(hardening, a_freed_block_copied_over_another_is_found_at_the_pop_64, .timeout = 60)
{
    SKIP_UNDER_NO_TCACHE();
    expect_abort(copied_over, (void *)64, "tide: malloc(): double free 0x");
}
Test(hardening, a_freed_block_copied_over_another_is_found_at_the_pop_1024, .timeout = 60)
{
    SKIP_UNDER_NO_TCACHE();
    expect_abort(copied_over, (void *)1024, "tide: malloc(): double free 0x");
}

/* The same of a large block (16-64 KiB: thread caches hold them), with another free
 * between the two of p so that p is not the cache's head: its extent says it is cached. */
static int cleared_key_large_twice(void *arg)
{
    size_t size = (size_t)(uintptr_t)arg;
    void **p = malloc(size), **q = malloc(size);
    free(p);
    free(q);
    ((void *volatile *)p)[1] = NULL; /* the use after free (volatile: a compiler that knows free would drop it) */
    free(p);
    void *a = malloc(size), *b = malloc(size), *c = malloc(size);
    fprintf(stderr, "<not caught: %p %p %p>\n", a, b, c);
    return 0;
}

static void cleared_key_large_twice_case(size_t size)
{
    expect_abort(cleared_key_large_twice, (void *)(uintptr_t)size, "tide: free(): double free 0x");
}

Test(hardening, a_double_free_of_a_large_block_with_its_key_cleared_aborts_16k, .timeout = 60)
{
    SKIP_UNDER_GUARD();
    cleared_key_large_twice_case(16384);
}
Test(hardening, a_double_free_of_a_large_block_with_its_key_cleared_aborts_40k, .timeout = 60)
{
    SKIP_UNDER_GUARD();
    cleared_key_large_twice_case(40960);
}
Test(hardening, a_double_free_of_a_large_block_with_its_key_cleared_aborts_64k, .timeout = 60)
{
    SKIP_UNDER_GUARD();
    cleared_key_large_twice_case(65536);
}

/* A large block in one thread's cache, freed again by another thread. */
static void *free_in_thread(void *p)
{
    free(p);
    return NULL;
}

static int large_twice_across_threads(void *arg)
{
    (void)arg;
    void *p = malloc(32768);
    free(p); /* into this thread's cache */
    pthread_t t;
    if (pthread_create(&t, NULL, free_in_thread, p) != 0)
        return 2;
    pthread_join(t, NULL);
    void *a = malloc(32768), *b = malloc(32768);
    fprintf(stderr, "<not caught: %p %p>\n", a, b);
    return 0;
}

Test(hardening, a_double_free_of_a_large_block_cached_by_another_thread_aborts, .timeout = 60)
{
    expect_abort(large_twice_across_threads, NULL, "tide: free(): double free 0x");
}

/* A use after free that clears a cached large block's key is found when the block is
 * handed out again (glibc 2.36 dies of SIGSEGV in malloc on this one). */
static int cleared_key_large(void *arg)
{
    (void)arg;
    void **p = malloc(20000);
    free(p);
    ((void *volatile *)p)[1] = NULL;
    void *a = malloc(20000);
    fprintf(stderr, "<not caught: %p>\n", a);
    return 0;
}

Test(hardening, a_cleared_key_of_a_cached_large_block_aborts, .timeout = 60)
{
    SKIP_UNDER_NO_TCACHE();
    SKIP_UNDER_GUARD();
    expect_abort(cleared_key_large, NULL, "tide: malloc(): corrupted free list: 0x");
}

/* A link forged to a live block of the class, by one who read a free block's link while it
 * ended the list: the encoded word XOR the new target is the new link, whatever the
 * secret.  The block it leads to is in use, not cached: malloc must not hand it out. */
static int forge_to_live_large(void *arg)
{
    (void)arg;
    void **live = plain_malloc(16384), **p = plain_malloc(16384);
    free(p); /* the cache's only 16 KiB block: its link encodes NULL */
    ((uintptr_t *)p)[0] ^= (uintptr_t)live;
    void *a = plain_malloc(16384), *b = plain_malloc(16384);
    fprintf(stderr, "<not caught: %p %p (live %p)>\n", a, b, (void *)live);
    return 0;
}

Test(hardening, a_forged_link_to_a_large_block_in_use_aborts, .timeout = 60)
{
    SKIP_UNDER_NO_TCACHE();
    SKIP_UNDER_GUARD();
    expect_abort(forge_to_live_large, NULL, "tide: malloc(): corrupted free list: 0x");
}

/* A forged link that replaces a cached block by a live one (x freed, then p: p's link
 * names x; made to name the live block, whose own first word is made to end the list),
 * then frees enough to make the cache flush: the list is as long as the cache's count, so
 * only the extent's mark tells the flush that the block is not to be given back.  The
 * secret comes from x's link, which ended the list; the encoding is the library's
 * (src/freelist.h: link XOR its address times 0x5bd1e995 XOR the secret). */
static int forge_to_live_large_flushed(void *arg)
{
    (void)arg;
    void **live = plain_malloc(16384), **x = plain_malloc(16384), **p = plain_malloc(16384), *more[16];
    for (unsigned i = 0; i < 16; i++)
        more[i] = plain_malloc(16384);
    free(x); /* the cache's only 16 KiB block: its link encodes NULL */
    uintptr_t secret = ((uintptr_t *)x)[0] ^ (uintptr_t)x * 0x5bd1e995u;
    free(p);
    ((uintptr_t *)p)[0] ^= (uintptr_t)x ^ (uintptr_t)live;
    ((uintptr_t *)live)[0] = (uintptr_t)live * 0x5bd1e995u ^ secret;
    for (unsigned i = 0; i < 16; i++)
        free(more[i]);
    fprintf(stderr, "<not caught (live %p)>\n", (void *)live);
    return 0;
}

Test(hardening, a_forged_link_to_a_large_block_in_use_aborts_in_a_flush, .timeout = 60)
{
    SKIP_UNDER_NO_TCACHE();
    SKIP_UNDER_GUARD();
    expect_abort(forge_to_live_large_flushed, NULL, "tide: free(): corrupted free list: the object after 0x");
}

/* ---- a slot never handed out -------------------------------------------------------------- */

/* The first region of a fresh slab of SIZE's class: after 1 MiB of the class is taken
 * (and kept), every free region the process had is used, and the next page-aligned block
 * starts a slab made for it.  Its other regions were never handed out: those the refill
 * took in the thread's cache, the rest in the slab. */
static char *fresh_slab(size_t size)
{
    for (size_t taken = 0; taken < ((size_t)1 << 20); taken += size)
        if (!malloc(size))
            exit(2);
    /* (A sample promoted to a large block starts a page too: a page-aligned block after one
     * the profiler took is passed over, held.) */
    uint64_t samples = prof_samples();
    for (int i = 0; i < 100000; i++) {
        char *p = malloc(size);
        if (((uintptr_t)p & 4095) == 0) {
            uint64_t now = prof_samples();
            if (now == samples)
                return p;
            samples = now;
        }
    }
    exit(3);
}

static int never_handed_out(void *arg)
{
    tt_pin_cpu(-1);
    uintptr_t how = (uintptr_t)arg;
    if (how == 0) {
        char *p = fresh_slab(256);
        free(p + 3 * 256); /* in this thread's cache since the refill, never returned (not its head) */
        malloc_until_twice(256, 200);
    } else {
        char *p = fresh_slab(16);
        free(p + 16 * 200); /* still in the slab: a refill takes at most 100 of its 256 */
        malloc_until_twice(16, 1000);
    }
    fprintf(stderr, "<not caught>\n");
    return 0;
}

Test(hardening, a_free_of_a_cached_slot_never_handed_out_aborts, .timeout = 60)
{
    SKIP_UNDER_NO_TCACHE();
    expect_abort(never_handed_out, (void *)0, "tide: malloc(): double free 0x");
}
Test(hardening, a_free_of_a_slab_slot_never_handed_out_aborts, .timeout = 60)
{
    SKIP_UNDER_NO_TCACHE();
    expect_abort(never_handed_out, (void *)1, "tide: malloc(): double free 0x");
}

/* ---- no false alarm: a mark left in a large block's pages ------------------------------- */

/* A released slab leaves the fresh mark in the second word of each region malloc never
 * handed out; a large block later carved at such a region's page found it there, and a
 * realloc that shrinks the block into a small one copies it along, so the free of the
 * copy took a block malloc had returned for one it never had ("invalid pointer").  The
 * heap profiler hit it at every sampled block, each of them a large block of its own.
 * Here the mark, read from a region never handed out, reaches a large block's pages as a
 * freed block's contents, which is where the thread's next large block starts. */
static int stale_mark(void *arg)
{
    size_t size = (size_t)(uintptr_t)arg;
    char *volatile p = malloc(2048); /* volatile: the read past it is on purpose */
    void *mark = ((void **)(p + 2048))[1]; /* the slab's other region, in this thread's cache */
    void **big = malloc(size);
    big[1] = mark;
    free(big);
    void **again = malloc(size);
    if (again != big)
        return 2; /* the layout the case needs */
    void *small = realloc(again, 100);
    free(small);
    free(p);
    return 0;
}

static void stale_mark_case(size_t size)
{
    struct tt_child_spec spec = { .fn = stale_mark, .arg = (void *)(uintptr_t)size, .timeout_s = 60 };
    struct tt_child c;
    cr_assert_eq(tt_child_run(&spec, &c), 0);
    char how[96];
    cr_assert(!tt_child_exited(&c, 2), "the second block of %zu bytes did not start where the first was", size);
    cr_expect(tt_child_exited(&c, 0), "the child %s (stderr: %s)", tt_child_how(&c, how, sizeof how), c.err);
    tt_child_free(&c);
}

Test(hardening, a_mark_left_in_a_large_block_is_no_invalid_pointer_when_realloc_copies_it, .timeout = 60)
{
    SKIP_UNDER_GUARD();
    stale_mark_case(100 << 10);
    stale_mark_case(3 << 20);
}

/* A live block holding a copy of a freed block's first words (its link and its key, as
 * glibc's tst-tcfree3 copies them) frees as any other: the key alone is no double free,
 * for a small block or a large one of a cached class, and neither is the mark of a block
 * of that size that a cache holds. */
static int copied_key(void *arg)
{
    size_t size = (size_t)(uintptr_t)arg;
    void *volatile a = malloc(size), *volatile b = malloc(size);
    free(a);
    memcpy(b, a, 32); /* volatile: the read of a freed block is on purpose */
    free(b);
    void *c = malloc(size), *d = malloc(size);
    if (!c || !d || c == d)
        return 3;
    free(c);
    free(d);
    return 0;
}

Test(hardening, a_copied_key_in_a_live_block_is_no_double_free, .timeout = 60)
{
    SKIP_UNDER_GUARD();
    static const size_t sizes[] = { 32, 1024, 16384, 40960, 65536 };
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        struct tt_child_spec spec = { .fn = copied_key, .arg = (void *)(uintptr_t)sizes[i], .timeout_s = 60 };
        struct tt_child c;
        cr_assert_eq(tt_child_run(&spec, &c), 0);
        char how[96];
        cr_expect(tt_child_exited(&c, 0), "%zu bytes: the child %s (stderr: %s)", sizes[i], tt_child_how(&c, how, sizeof how),
                  c.err);
        tt_child_free(&c);
    }
}

/* And the marks' everyday use: large blocks of cached classes allocated by one thread,
 * freed by another (into that thread's cache, flushed when it fills and when the thread
 * exits), allocated again from there: no false alarm, and the heap check finds the marks
 * only on blocks that caches hold. */
#define HANDED_N 96
static void *handed[HANDED_N];

static void *alloc_handed(void *arg)
{
    (void)arg;
    for (unsigned i = 0; i < HANDED_N; i++) {
        handed[i] = malloc(16384 + (i % 13) * 4096); /* 16-64 KiB */
        if (handed[i])
            memset(handed[i], (int)i, 64);
    }
    return NULL;
}

static void *free_handed_then_reuse(void *arg)
{
    (void)arg;
    for (unsigned i = 0; i < HANDED_N; i += 2)
        free(handed[i]);
    for (unsigned i = 0; i < HANDED_N; i += 2)
        handed[i] = malloc(16384 + (i % 13) * 4096); /* from this thread's cache first */
    return tide_check() == 0 ? NULL : (void *)1;
}

Test(hardening, large_blocks_handed_between_threads_free_cleanly, .timeout = 120)
{
    for (unsigned round = 0; round < 4; round++) {
        pthread_t t;
        void *bad = NULL;
        cr_assert_eq(pthread_create(&t, NULL, alloc_handed, NULL), 0);
        pthread_join(t, NULL);
        for (unsigned i = 0; i < HANDED_N; i++)
            cr_assert(handed[i] != NULL);
        cr_assert_eq(pthread_create(&t, NULL, free_handed_then_reuse, NULL), 0);
        pthread_join(t, &bad);
        cr_assert_null(bad, "round %u: tide_check() failed in the thread (see stderr)", round);
        cr_assert_eq(tide_check(), 0, "round %u: tide_check() failed after the thread exited (see stderr)", round);
        for (unsigned i = 0; i < HANDED_N; i++)
            free(handed[i]); /* the main thread's cache, its flushes */
        cr_assert_eq(tide_check(), 0, "round %u: tide_check() failed after the frees (see stderr)", round);
    }
}

/* ---- slabs kept empty in their bin ----------------------------------------------------- */

/* A slab whose regions were all freed stays in its bin (arena.c) with what each region held
 * when freed: handed out again, a region frees as any other; freed twice, it is a double
 * free, told by its key and its bitmap bit, not taken for a pointer tide never gave. */
#define KEPT_N 2000 /* 500 one-page slabs: the transfer cache takes 1 MiB, the bin keeps up to 1 MiB */
/* Two rounds of KEPT_N blocks of 1 KiB (P[1500] unsampled) allocated and freed, so that
 * their bin keeps empty slabs: 0, or 2 (a malloc failed), 3 (no slab kept: the case the
 * caller is about did not happen). */
static int keep_empty_slabs(void **p)
{
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < KEPT_N; i++)
            if (!(p[i] = i == 1500 ? plain_malloc(1024) : malloc(1024)))
                return 2;
        for (int i = 0; i < KEPT_N; i++)
            free(p[i]);
    }
    tide_stats_t s;
    tide_stats_get(&s, sizeof s);
    return s.nslabs_empty == 0 ? 3 : 0;
}

static int kept_slab(void *arg)
{
    (void)arg;
    tt_pin_cpu(-1);
    static void *p[KEPT_N];
    tide_conf_set("decay_ms", "-1"); /* nothing is given back meanwhile */
    int err = keep_empty_slabs(p);
    if (err)
        return err;
    if (tide_check() != 0)
        return 4;
    /* Freed past what the transfer cache took (1 MiB of the class) and before what the
     * thread cache (128) holds at the end: in a slab that emptied. */
    free(p[1500]);
    malloc_until_twice(1024, 2 * KEPT_N);
    fprintf(stderr, "<not caught>\n");
    return 0;
}

Test(hardening, a_double_free_into_a_kept_empty_slab_aborts, .timeout = 60)
{
    SKIP_UNDER_NO_TCACHE();
    struct tt_child_spec spec = { .fn = kept_slab, .timeout_s = 60 };
    struct tt_child c;
    cr_assert_eq(tt_child_run(&spec, &c), 0);
    cr_assert(!tt_child_exited(&c, 2) && !tt_child_exited(&c, 3) && !tt_child_exited(&c, 4),
              "the setting up failed (2: malloc, 3: no slab kept, 4: tide_check): stderr: %s", c.err);
    char how[96];
    cr_expect(tt_child_signalled(&c, SIGABRT), "the child %s (stderr: %s)", tt_child_how(&c, how, sizeof how), c.err);
    cr_expect(strncmp(c.err, "tide: malloc(): double free 0x", 30) == 0, "stderr was \"%s\"", c.err);
    tt_child_free(&c);
}

/* ---- a block freed by a thread without a cache, freed again by one with a cache ---- */

/* A thread whose cache is gone (in a TLS destructor that runs after tide's own) frees
 * straight into the slab.  A second free from a thread with a cache puts the slot in that
 * cache while it is free in its slab: the refill that takes it from the slab finds that it
 * no longer holds the slab mark, before it is handed out twice. */
static pthread_key_t late_key;

static void free_late(void *p) { free(p); }

static void *keep_for_exit(void *p)
{
    malloc(64); /* this thread's cache exists, so its destructor runs first */
    pthread_setspecific(late_key, p);
    return NULL;
}

static int free_without_cache_then_with(void *arg)
{
    (void)arg;
    tt_pin_cpu(-1);
    /* Every free region of the class used first: p's slab is then the one refills go to. */
    for (size_t taken = 0; taken < ((size_t)1 << 20); taken += 64)
        if (!malloc(64))
            return 2;
    void *p = malloc(64);
    pthread_t t;
    /* Created after tide's key, so its destructor runs after tide's cache is flushed. */
    if (!p || pthread_key_create(&late_key, free_late) != 0 ||
        pthread_create(&t, NULL, keep_for_exit, p) != 0 || pthread_join(t, NULL) != 0)
        return 2;
    free(p);
    malloc_until_twice(64, 5000);
    fprintf(stderr, "<not caught>\n");
    return 0;
}

Test(hardening, a_double_free_after_a_free_by_an_exiting_thread_aborts, .timeout = 60)
{
    SKIP_UNDER_NO_TCACHE();
    expect_abort(free_without_cache_then_with, NULL, "tide: malloc(): double free 0x");
}

/* The same thread's free_sized twice, after its cache is gone: the slab finds the second
 * before the size is checked, in free_sized's name (as under tcache:off). */
static void free_sized_twice(void *p)
{
    free_sized(p, 64);
    free_sized(p, 100); /* a size of another class: the double free is what is wrong */
}

static int free_sized_twice_without_cache(void *arg)
{
    (void)arg;
    void *p = malloc(64);
    pthread_t t;
    if (!p || pthread_key_create(&late_key, free_sized_twice) != 0 ||
        pthread_create(&t, NULL, keep_for_exit, p) != 0 || pthread_join(t, NULL) != 0)
        return 2;
    fprintf(stderr, "<not caught>\n");
    return 0;
}

Test(hardening, free_sized_twice_by_a_thread_without_a_cache_aborts, .timeout = 60)
{
    expect_abort(free_sized_twice_without_cache, NULL, "tide: free_sized(): double free 0x");
}

/* ---- the same attacks through free_sized ---------------------------------------------- */

/* free_sized has a fast path of its own (the size's class is the block's): it must turn
 * away what free's does, and its slow path must still find what it finds. */
static int sized_misuse(void *arg)
{
    uintptr_t how = (uintptr_t)arg;
    void **p = malloc(64);
    if (how == 0) { /* a plain double free */
        free_sized(p, 64);
        free_sized(p, 64);
    } else if (how == 1) { /* the key cleared between the two frees */
        free_sized(p, 64);
        p[1] = NULL;
        free_sized(p, 64);
        void *a = malloc(64), *b = malloc(64);
        fprintf(stderr, "<not caught: %p %p>\n", a, b);
        return 0;
    } else if (how == 2) { /* a pointer into the block, with the block's size */
        free_sized((char *)p + 16, 48);
    } else if (how == 3) { /* the next region of the slab, never handed out */
        free_sized((char *)p + 64 * 200, 64);
    } else if (how == 4) { /* a size of another class */
        free_sized(p, 100);
    } else if (how == 5) { /* freed, then freed again with a wrong size: the double free is what is wrong */
        free(p);
        free_sized(p, 100);
    } else { /* freed, then freed again by free_aligned_sized */
        free(p);
        free_aligned_sized(p, 16, 64);
    }
    fprintf(stderr, "<not caught>\n");
    return 0;
}

Test(hardening, free_sized_twice_aborts, .timeout = 60)
{
    expect_abort(sized_misuse, (void *)0, "tide: free_sized(): double free 0x");
}
Test(hardening, free_sized_twice_with_its_key_cleared_aborts, .timeout = 60)
{
    expect_abort(sized_misuse, (void *)1, "tide: free_sized(): double free 0x");
}
Test(hardening, free_sized_of_a_pointer_into_a_block_aborts, .timeout = 60)
{
    expect_abort(sized_misuse, (void *)2, "tide: free_sized(): invalid pointer 0x");
}
Test(hardening, free_sized_of_a_slot_never_handed_out_aborts, .timeout = 60)
{
    expect_abort(sized_misuse, (void *)3, "tide: free_sized(): invalid pointer 0x");
}
Test(hardening, free_sized_with_the_size_of_another_class_aborts, .timeout = 60)
{
    expect_abort(sized_misuse, (void *)4, "tide: free_sized(): size does not match the allocation of 0x");
}
Test(hardening, free_sized_of_a_freed_block_is_its_double_free_whatever_the_size, .timeout = 60)
{
    expect_abort(sized_misuse, (void *)5, "tide: free_sized(): double free 0x");
}
Test(hardening, free_aligned_sized_of_a_freed_block_aborts_as_its_double_free, .timeout = 60)
{
    expect_abort(sized_misuse, (void *)6, "tide: free_aligned_sized(): double free 0x");
}

/* ---- no block handed out twice: the frees that today's contract catches later ---------- */

/* A block freed by one thread (into its cache: the thread lives on) and again by another:
 * it is on both threads' lists, and whichever thread takes it second aborts. */

static pthread_barrier_t twice_barrier;

static void *free_then_allocate(void *arg)
{
    void **p = arg;
    free(p[0]);                            /* into this thread's cache */
    pthread_barrier_wait(&twice_barrier);  /* the main thread frees it too */
    pthread_barrier_wait(&twice_barrier);  /* the main thread has allocated */
    malloc_until_twice_holding(80, 100, p[1]);
    return NULL;
}

static int twice_across_threads(void *arg)
{
    (void)arg;
    tt_pin_cpu(-1);
    void *p[2] = { malloc(80), NULL };
    pthread_t t;
    pthread_barrier_init(&twice_barrier, NULL, 2);
    if (!p[0] || pthread_create(&t, NULL, free_then_allocate, p) != 0)
        return 2;
    pthread_barrier_wait(&twice_barrier);
    free(p[0]); /* the double free: into this thread's cache too */
    /* This thread gets p back at once (its cache's head); the other thread must not. */
    p[1] = malloc(80);
    pthread_barrier_wait(&twice_barrier);
    pthread_join(t, NULL);
    fprintf(stderr, "<not caught (%p, %p)>\n", p[0], p[1]);
    return 0;
}

Test(hardening, a_block_freed_by_two_threads_is_never_handed_out_twice, .timeout = 60)
{
    SKIP_UNDER_NO_TCACHE();
    expect_abort(twice_across_threads, NULL, "tide: malloc(): double free 0x");
}

/* Runs FN(SIZE) in a child, which must abort with tide's report of a double free (at a
 * pop, a return or a slab's return: "tide: " and "(): double free 0x" after it); exit
 * status 2 says its setting up failed. */
static void expect_found_in_child(int (*fn)(void *), size_t size)
{
    struct tt_child_spec spec = { .fn = fn, .arg = (void *)(uintptr_t)size, .timeout_s = 60 };
    struct tt_child c;
    cr_assert_eq(tt_child_run(&spec, &c), 0);
    cr_assert(!tt_child_exited(&c, 2), "%zu bytes: the setting up failed: %s", size, c.err);
    char how[96];
    cr_expect(tt_child_signalled(&c, SIGABRT), "%zu bytes: the child %s (stderr: %s)", size,
              tt_child_how(&c, how, sizeof how), c.err);
    cr_expect(strstr(c.err, "(): double free 0x") != NULL && strncmp(c.err, "tide: ", 6) == 0,
              "%zu bytes: stderr was \"%s\"", size, c.err);
    tt_child_free(&c);
}

/* A 1-8 KiB block whose key a use after free cleared, pushed out of the thread's cache by
 * 3,000 frees of its class, then freed again: it is found where it is taken next (its slab
 * or a transfer cache: the key it lacks, the slab's bitmap, or the slab mark the second
 * free wrote over), before it is handed out twice. */
static int cleared_key_pushed_out(void *arg)
{
    tt_pin_cpu(-1);
    size_t size = (size_t)(uintptr_t)arg;
    enum { N = 3000 };
    static void *others[N];
    void **p = malloc(size);
    for (unsigned i = 0; i < N; i++)
        if (!(others[i] = malloc(size)))
            return 2;
    free(p);
    ((void *volatile *)p)[1] = NULL; /* the use after free */
    for (unsigned i = 0; i < N; i++)
        free(others[i]);
    free(p);
    malloc_until_twice(size, 2 * N);
    fprintf(stderr, "<not caught>\n");
    return 0;
}

Test(hardening, a_double_free_with_its_key_cleared_pushed_out_of_the_cache_aborts, .timeout = 60)
{
    static const size_t sizes[] = { 1024, 3072, 8192 };
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        expect_found_in_child(cleared_key_pushed_out, sizes[i]);
}
/* A block back in its slab, freed again by another thread (into that thread's cache: the
 * key over the slab mark), then every other block of its slab freed and pushed out of this
 * thread's cache while the transfer cache and the bin's kept slabs are full and decay_ms
 * -1 purges nothing: the slab empties and goes back to the page heap, its pages dirty, the
 * key still in the block.  The other thread's cache would hand out memory the page heap
 * owns, and a slab cut there next would hand out the same slot again: the block must be
 * found before either.  The blocks, in allocation order (addresses rising, in new slabs):
 * A (4 MiB: freed first, they fill the transfer cache and the bin's kept slabs), B (2 MiB:
 * push the block out of the cache), the block with RELEASED_WINDOW blocks on either side
 * (more than a slab holds: its slab lies within), C (2 MiB: push the window out). */
#define RELEASED_WINDOW 300 /* > 256, the most regions a slab has */
static pthread_barrier_t released_barrier;

struct released_arg {
    void *p;
    size_t size;
};

static void *free_again_then_allocate(void *arg)
{
    struct released_arg *a = arg;
    free(a->p); /* the double free: into this thread's cache */
    pthread_barrier_wait(&released_barrier);
    pthread_barrier_wait(&released_barrier); /* the main thread has emptied the block's slab */
    return malloc(a->size);
}

/* Joins T, which returns the block it got (before the fix: the block freed twice), then
 * mallocs BYTES of SIZE-byte blocks and a collection: none may be that block.  Returns 5
 * ("<handed out twice>") when one is, 0 ("<not caught>") when nothing aborted. */
static int join_then_malloc_past(pthread_t t, size_t size, size_t bytes)
{
    void *got = NULL;
    pthread_join(t, &got);
    for (size_t i = 0; i < bytes / size; i++)
        if (malloc(size) == got) {
            fprintf(stderr, "<handed out twice: %p>\n", got);
            return 5;
        }
    malloc_trim(0);
    fprintf(stderr, "<not caught>\n");
    return 0;
}

static int released_slab(void *arg)
{
    tt_pin_cpu(-1);
    size_t size = (size_t)(uintptr_t)arg;
    tide_conf_set("decay_ms", "-1"); /* nothing purged: the slab's pages keep what they hold */
    size_t na = 4 * MiB / size, nb = 2 * MiB / size, nc = 2 * MiB / size;
    size_t at = na + nb + RELEASED_WINDOW, n = at + RELEASED_WINDOW + 1 + nc;
    void **v = calloc(n, sizeof *v);
    if (!v)
        return 2;
    /* (Only the block itself must be one the profiler left alone: plain_malloc reads the
     * statistics twice a call, too slow for 130,000 blocks of 64 bytes.) */
    for (size_t i = 0; i < n; i++)
        if (!(v[i] = i == at ? plain_malloc(size) : malloc(size)))
            return 2;
    struct released_arg a = { v[at], size };
    v[at] = NULL;
    for (size_t i = 0; i < na; i++)
        free(v[i]);
    free(a.p); /* then pushed out of the cache, into its slab (the transfer cache is full) */
    for (size_t i = na; i < na + nb; i++)
        free(v[i]);
    pthread_t t;
    pthread_barrier_init(&released_barrier, NULL, 2);
    if (pthread_create(&t, NULL, free_again_then_allocate, &a) != 0)
        return 2;
    pthread_barrier_wait(&released_barrier);
    for (size_t i = na + nb; i < n; i++)
        free(v[i]); /* the block's slab empties: given back */
    pthread_barrier_wait(&released_barrier);
    return join_then_malloc_past(t, size, 12 * MiB);
}

Test(hardening, a_double_free_whose_slab_goes_back_to_the_page_heap_aborts, .timeout = 120)
{
    SKIP_UNDER_NO_TCACHE();
    static const size_t sizes[] = { 64, 1024, 8192 };
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        expect_found_in_child(released_slab, sizes[i]);
}

/* The same through the other way a slab goes back: kept empty in its bin (as in
 * kept_slab), a block of it freed again by another thread, and the kept slabs given back
 * by this thread's tide_purge (which empties this thread's cache, not the other's).  With
 * purge:free the pages keep what they held (MADV_FREE), the key too: the other thread's
 * cache would hand out the block from the page heap's pages. */
static int kept_slab_given_back(void *arg)
{
    (void)arg;
    tt_pin_cpu(-1);
    static void *p[KEPT_N];
    tide_conf_set("decay_ms", "-1");
    tide_conf_set("purge", "free");
    int err = keep_empty_slabs(p);
    if (err)
        return err;
    struct released_arg a = { p[1500], 1024 };
    pthread_t t;
    pthread_barrier_init(&released_barrier, NULL, 2);
    if (pthread_create(&t, NULL, free_again_then_allocate, &a) != 0)
        return 2;
    pthread_barrier_wait(&released_barrier);
    tide_purge(); /* the kept slabs go back to the page heap */
    pthread_barrier_wait(&released_barrier);
    return join_then_malloc_past(t, 1024, 8 * MiB);
}

Test(hardening, a_double_free_into_a_kept_slab_given_back_by_tide_purge_aborts, .timeout = 60)
{
    SKIP_UNDER_NO_TCACHE();
    struct tt_child_spec spec = { .fn = kept_slab_given_back, .timeout_s = 60 };
    struct tt_child c;
    cr_assert_eq(tt_child_run(&spec, &c), 0);
    cr_assert(!tt_child_exited(&c, 2) && !tt_child_exited(&c, 3),
              "the setting up failed (2: malloc, 3: no slab kept): stderr: %s", c.err);
    char how[96];
    cr_expect(tt_child_signalled(&c, SIGABRT), "the child %s (stderr: %s)", tt_child_how(&c, how, sizeof how), c.err);
    cr_expect(strstr(c.err, "(): double free 0x") != NULL && strncmp(c.err, "tide: ", 6) == 0, "stderr was \"%s\"",
              c.err);
    tt_child_free(&c);
}

/* A large block freed and purged, slabs made on its pages, and the stale pointer freed:
 * the region of a slab that starts there must not be handed out a second time (tide never
 * hands it out, and reports the free). */
static int stale_large_pointer(void *arg)
{
    tt_pin_cpu(-1);
    size_t size = (size_t)(uintptr_t)arg;
    char *big = malloc(MiB);
    if (!big)
        return 2;
    memset(big, 1, MiB);
    free(big);
    malloc_trim(0); /* purged: new slabs may take the pages */
    /* Small blocks until slabs cover the block's first page: the free runs are taken by
     * size (the process's smaller ones first), and a run from its start, so once a block
     * lies 8 pages past that page, a slab holds it.  Within 256 MiB of them. */
    size_t n = (256 * MiB) / size;
    bool covered = false, held = false;
    for (size_t i = 0; i < n && !covered; i++) {
        char *r = malloc(size);
        if (!r)
            return 2;
        held |= r == big;
        covered = r >= big + 8 * 4096 && r < big + MiB;
    }
    if (!covered)
        return 3; /* no slab came to the pages: the case did not happen */
    if (tide_check() != 0)
        return 4; /* (the heap walk knows the slab's stale page and its region kept out) */
    free(big); /* the stale free: a region of a slab starts there */
    malloc_until_twice_holding(size, 20000, held ? big : NULL);
    fprintf(stderr, "<not caught>\n");
    return 0;
}

Test(hardening, a_stale_free_of_a_purged_large_block_now_a_slab_aborts, .timeout = 60)
{
    SKIP_UNDER_GUARD();
    /* The case is a slab on the block's pages.  prof:on turns sampled small blocks into
     * large blocks of their own, and one of them may start at the stale address: the stale
     * free then frees it, the limit docs/security.md states for a large block made where
     * a freed one started. */
    tt_skip_under("prof:on", "sampled small blocks become large blocks, which may start at the stale address");
    static const size_t sizes[] = { 64, 1024, 4096 };
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        struct tt_child_spec spec = { .fn = stale_large_pointer, .arg = (void *)(uintptr_t)sizes[i], .timeout_s = 60 };
        struct tt_child c;
        cr_assert_eq(tt_child_run(&spec, &c), 0);
        cr_assert(!tt_child_exited(&c, 3), "%zu bytes: no slab was made on the freed block's pages", sizes[i]);
        cr_assert(!tt_child_exited(&c, 4), "%zu bytes: tide_check() failed: %s", sizes[i], c.err);
        char how[96];
        cr_expect(tt_child_signalled(&c, SIGABRT), "%zu bytes: the child %s (stderr: %s)", sizes[i],
                  tt_child_how(&c, how, sizeof how), c.err);
        cr_expect(strncmp(c.err, "tide: free(): double free 0x", 28) == 0, "%zu bytes: stderr was \"%s\"", sizes[i],
                  c.err);
        tt_child_free(&c);
    }
}
