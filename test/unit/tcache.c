/* SPDX-License-Identifier: MIT */
/*
 * tcache.c - a thread cache's capacities (src/tcache.c): a class that runs dry grows past
 * 128 KiB, up to 512 KiB of objects; the capacities of a thread's small classes add up to
 * at most TCACHE_BUDGET (4 MiB) however many classes grow; and the capacity a growing
 * class takes from the others is capacity that holds nothing, so that no cached object
 * moves while there is any.
 *
 * Each case runs in a thread of its own (a cache of its own, set up at its first malloc),
 * in a forked child, and reads the thread's tcache_t.  Blocks are of the classes' own
 * sizes, so that each malloc and free is of the class asked about.
 */
#include <criterion/criterion.h>
#include <pthread.h>

#include "support.h"

#include "size_class.h"
#include "tcache.h"
#include "util.h"

#define CHECK TT_CHILD_CHECK

/* The calling thread's cache.  The empty asm hides where the pointer comes from, so that
 * GCC keeps it instead of computing &tcache_tls again at each use: under UBSan, GCC 12
 * tests that computation for NULL with the flags of its `add tcache_tls@gottpoff(%rip)`,
 * which the linker turns into a lea that sets none, and the checks then saw a null cache
 * whenever the comparison before them had said equal (tools/check_tls_flags.py). */
static tcache_t *this_cache(void)
{
    tcache_t *tc = &tcache_tls;
    __asm__("" : "+r"(tc));
    return tc;
}

/* The small classes' capacities added up, from the capacities themselves. */
static size_t cap_sum(const tcache_t *tc)
{
    size_t sum = 0;
    for (unsigned c = 0; c < SC_NSMALL; c++)
        sum += (size_t)tc->cap[c] * sc_size[c];
    return sum;
}

static unsigned count_of(const tcache_t *tc, unsigned c) { return tc->cap[c] - tcache_room(tc, c); }

/* N blocks of class C, allocated into V; and freed.  V is static, not malloc'ed: a
 * block of another class would be a miss of that class, which may take capacity. */
static void take(unsigned c, unsigned n, void **v)
{
    for (unsigned i = 0; i < n; i++) {
        v[i] = malloc(sc_size[c]);
        CHECK(v[i], "malloc(%u)", (unsigned)sc_size[c]);
        *(char *)v[i] = 1;
    }
}

static void give(void **v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        free(v[i]);
}

static void *blocks[4096];

/* N blocks of class C, allocated, then freed. */
static void burst_of(unsigned c, unsigned n)
{
    take(c, n, blocks);
    give(blocks, n);
}

/* A burst of class C: as many blocks as its largest capacity. */
static void burst(unsigned c) { burst_of(c, sc_tcache_max[c]); }

/* The child runner's case: the function FN, run in a thread of its own. */
static int in_a_thread(void *fn)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, (void *(*)(void *))fn, NULL) == 0, "pthread_create");
    pthread_join(t, NULL);
    return 0;
}

/* ---- the limits --------------------------------------------------------------------- */

Test(tcache, every_initial_capacity_and_any_one_largest_fit_in_the_budget)
{
    size_t init = 0, largest = 0, all = 0;
    for (unsigned c = 0; c < SC_NSMALL; c++) {
        size_t max = (size_t)sc_tcache_max[c] * sc_size[c];
        cr_assert(sc_tcache_max[c] <= 4096 && max <= 512 * KiB + sc_size[c],
                  "class %u (%u B): at most %u objects, %zu bytes", c, (unsigned)sc_size[c],
                  (unsigned)sc_tcache_max[c], max);
        cr_assert(sc_tcache_max[c] >= sc_tcache_init[c]);
        init += (size_t)sc_tcache_init[c] * sc_size[c];
        largest = MAX(largest, max);
        all += max;
    }
    /* make_room relies on this: it can always make room for one class to grow. */
    cr_assert(init + largest <= TCACHE_BUDGET, "initial %zu + largest %zu > budget %u", init, largest,
              (unsigned)TCACHE_BUDGET);
    /* And the budget binds: every class at its largest would be far above it. */
    cr_assert(all > 2 * (size_t)TCACHE_BUDGET, "the largest capacities add up to %zu only", all);
}

/* ---- growth --------------------------------------------------------------------------- */

static void *grows_to_its_limit(void *arg)
{
    (void)arg;
    unsigned c = sc_class_of(1024);
    tcache_t *tc = this_cache();
    for (unsigned r = 0; r < 20; r++)
        burst_of(c, 600);
    CHECK(tc->state == TCACHE_ACTIVE, "the thread's cache is not active");
    CHECK(tc->cap[c] == sc_tcache_max[c], "the 1 KiB class's capacity is %u, not its limit %u",
          (unsigned)tc->cap[c], (unsigned)sc_tcache_max[c]);
    CHECK((size_t)tc->cap[c] * 1024 == 512 * KiB, "the 1 KiB class holds at most %u objects", (unsigned)tc->cap[c]);
    /* 500 blocks freed into the emptied cache all stay there (the limit was 128). */
    take(c, 500, blocks);
    static void *rest[4096];
    unsigned nrest = 0;
    while (count_of(tc, c) != 0 && nrest < ARRAY_SIZE(rest))
        rest[nrest++] = malloc(1024); /* (pops: the list is not empty) */
    CHECK(count_of(tc, c) == 0, "the 1 KiB class's cache did not empty");
    give(blocks, 500);
    CHECK(count_of(tc, c) == 500, "the 1 KiB class caches %u objects after 500 were freed", count_of(tc, c));
    give(rest, nrest);
    return NULL;
}

Test(tcache, a_class_used_in_bursts_grows_past_128_KiB_to_512_KiB, .timeout = 120)
{
    tt_skip_under("tcache:off", "it measures the thread caches, which tcache:off turns off");
    tt_skip_under("prof:on", "it counts the objects cached; a sampled one is freed past the cache");
    tt_assert_child_ok(in_a_thread, (void *)grows_to_its_limit, 60);
}

/* ---- the budget --------------------------------------------------------------------- */

static void *stays_in_budget(void *arg)
{
    (void)arg;
    tcache_t *tc = this_cache();
    /* No allocation but the bursts': background:auto would start its thread from one of
     * these frees, and pthread_create's calloc would grow another class, which may take
     * the growing class's capacity before the check below. */
    CHECK(tide_conf_set("background", "off") == 0, "background:off");
    free(malloc(1)); /* the cache is set up */
    for (unsigned r = 0; r < 3; r++) {
        for (unsigned c = 0; c < SC_NSMALL; c++) {
            burst(c);
            size_t sum = cap_sum(tc);
            CHECK(sum <= TCACHE_BUDGET, "round %u, class %u: capacities add up to %zu bytes", r, c, sum);
            CHECK(tc->cap_bytes == sum, "round %u, class %u: cap_bytes %u, the capacities %zu", r, c,
                  (unsigned)tc->cap_bytes, sum);
            /* The growing class got its room: nothing took capacity from it during its
             * burst (it can end a little below its limit when its last refill was a
             * transfer list that set its capacity to the list's length). */
            CHECK(tc->cap[c] * 4u >= sc_tcache_max[c] * 3u, "round %u: class %u grew to %u of %u", r, c,
                  (unsigned)tc->cap[c], (unsigned)sc_tcache_max[c]);
            for (unsigned d = 0; d < SC_NSMALL; d++) {
                CHECK(tc->cap[d] >= sc_tcache_init[d], "class %u below its initial capacity", d);
                CHECK(tcache_room(tc, d) <= tc->cap[d], "class %u holds more than its capacity", d);
            }
        }
    }
    return NULL;
}

Test(tcache, every_class_in_bursts_keeps_the_capacities_within_the_budget, .timeout = 120)
{
    tt_skip_under("tcache:off", "it measures the thread caches, which tcache:off turns off");
    tt_assert_child_ok(in_a_thread, (void *)stays_in_budget, 60);
}

/* Classes whose blocks are all in use: their caches hold nothing. */
#define NHELD 8
static const unsigned held_size[NHELD] = {4096, 5120, 6144, 7168, 8192, 10240, 12288, 14336};

static void *unused_capacity_goes_first(void *arg)
{
    (void)arg;
    tcache_t *tc = this_cache();
    /* A class that caches many objects, missed before all the others. */
    unsigned kept = sc_class_of(512);
    burst_of(kept, sc_tcache_max[kept] * 3 / 4); /* (all of them stay cached: no overflow) */
    unsigned count = count_of(tc, kept);
    void *head = tc->head[kept];
    CHECK(count > 2u * sc_tcache_init[kept], "the 512 B class caches %u objects", count);
    /* Then classes grown to their largest with every block kept in use, until the budget
     * made some give capacity up. */
    static void *held[NHELD][128];
    bool shrank = false;
    for (unsigned i = 0; i < NHELD; i++) {
        unsigned c = sc_class_of(held_size[i]);
        CHECK(sc_tcache_max[c] <= ARRAY_SIZE(held[i]), "class %u: %u objects", c, (unsigned)sc_tcache_max[c]);
        take(c, sc_tcache_max[c], held[i]);
        CHECK(cap_sum(tc) <= TCACHE_BUDGET, "over the budget");
        for (unsigned j = 0; j < i; j++) {
            unsigned d = sc_class_of(held_size[j]);
            shrank |= tc->cap[d] < sc_tcache_max[d];
        }
    }
    CHECK(shrank, "no class gave capacity up: the case does not reach the budget");
    CHECK(count_of(tc, kept) == count && tc->head[kept] == head,
          "the 512 B class's cached objects moved (%u, then %u) while others had capacity that held nothing",
          count, count_of(tc, kept));
    for (unsigned i = 0; i < NHELD; i++) {
        unsigned c = sc_class_of(held_size[i]);
        give(held[i], sc_tcache_max[c]);
    }
    return NULL;
}

Test(tcache, capacity_that_holds_nothing_is_taken_before_any_cached_object_moves, .timeout = 120)
{
    tt_skip_under("tcache:off", "it measures the thread caches, which tcache:off turns off");
    tt_assert_child_ok(in_a_thread, (void *)unused_capacity_goes_first, 60);
}
