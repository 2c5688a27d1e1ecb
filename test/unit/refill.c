/* SPDX-License-Identifier: MIT */
/*
 * refill.c - where a thread cache's refills come from (src/tcache.c): the arena of the
 * CPU the thread runs on, not the thread's own.  Eight threads that take turns on one
 * CPU each take their first block of a class from the same arena (CPU modulo the arenas),
 * whichever arena each was placed on; on another CPU, from that CPU's arena.
 *
 * Each case runs in a forked child (the child runner), pinned with sched_setaffinity, and
 * asks for blocks of a class nothing else in the child uses (5120 bytes), so that every
 * block is a region of a slab its refill cut from an arena's bin, whose arena the slab's
 * descriptor names.  The class is of more than a page: under prof:on (the matrix) a
 * sampled block of it stays the region of its slab it would have been, its page marked,
 * where a sampled block of less than a page would be promoted to a large block.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>

#include "support.h"

#include "arena.h"
#include "extent.h"
#include "pagemap.h"
#include "region.h"
#include "util.h"

#define CHECK TT_CHILD_CHECK
#define NTHREADS 8
#define SIZE 5120

static pthread_barrier_t all_allocated;
static void *blocks[NTHREADS];
static int cpus[NTHREADS];

static void *take_one(void *arg)
{
    unsigned i = (unsigned)(uintptr_t)arg;
    blocks[i] = malloc(SIZE);
    cpus[i] = sched_getcpu();
    /* Every thread holds its block (and its arena) until all have one. */
    pthread_barrier_wait(&all_allocated);
    return NULL;
}

/* The arena whose bin owns the slab P is a region of. */
static unsigned arena_of(void *p)
{
    const range_t *r = region_range_of((uintptr_t)p);
    pm_entry_t e = pm_read(r, (uintptr_t)p);
    CHECK(pm_is_slab_page(e) || pm_is_sampled_page(e), "%p is not in a slab", p);
    return ((extent_t *)pm_desc(e))->arena;
}

/* ARG: the CPU to run on. */
static int one_cpu_case(void *arg)
{
    int cpu = (int)(intptr_t)arg;
    CHECK(tt_pin_cpu(cpu) == 0, "sched_setaffinity(%d) failed", cpu);
    CHECK(narenas > 1, "%u arenas", narenas);
    pthread_barrier_init(&all_allocated, NULL, NTHREADS);
    pthread_t t[NTHREADS];
    for (unsigned i = 0; i < NTHREADS; i++)
        CHECK(pthread_create(&t[i], NULL, take_one, (void *)(uintptr_t)i) == 0, "pthread_create");
    for (unsigned i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    for (unsigned i = 0; i < NTHREADS; i++) {
        CHECK(blocks[i] != NULL, "thread %u got no block", i);
        CHECK(cpus[i] == cpu, "thread %u ran on CPU %d, pinned to %d", i, cpus[i], cpu);
        CHECK(arena_of(blocks[i]) == (unsigned)cpu % narenas,
              "thread %u's block (CPU %d) came from arena %u, not arena %u of %u", i, cpu,
              arena_of(blocks[i]), (unsigned)cpu % narenas, narenas);
    }
    for (unsigned i = 0; i < NTHREADS; i++)
        free(blocks[i]);
    return 0;
}

/* The CPUs this process may run on: the first and the last. */
static void allowed_cpus(int *first, int *last)
{
    cpu_set_t set;
    cr_assert(sched_getaffinity(0, sizeof set, &set) == 0);
    *first = *last = -1;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (CPU_ISSET(c, &set)) {
            if (*first < 0)
                *first = c;
            *last = c;
        }
    }
    cr_assert(*first >= 0);
}

Test(refill, threads_taking_turns_on_a_cpu_refill_from_its_arena, .timeout = 120)
{
    tt_skip_under("arenas:1", "it needs an arena for each CPU");
    tt_skip_under("tcache:off", "it watches thread caches refill; tcache:off has none");
    int first, last;
    allowed_cpus(&first, &last);
    free(malloc(1)); /* tide is up */
    tt_assert_child_ok(one_cpu_case, (void *)(intptr_t)first, 60);
}

Test(refill, on_another_cpu_from_that_cpus_arena, .timeout = 120)
{
    tt_skip_under("arenas:1", "it needs an arena for each CPU");
    tt_skip_under("tcache:off", "it watches thread caches refill; tcache:off has none");
    int first, last;
    allowed_cpus(&first, &last);
    if (first == last)
        cr_skip_test("one CPU only");
    free(malloc(1));
    tt_assert_child_ok(one_cpu_case, (void *)(intptr_t)last, 60);
}
