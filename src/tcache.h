/* SPDX-License-Identifier: MIT */
/* tcache.h - per-thread caches (the fast path), and each thread's place on an arena.
 *
 * Each thread keeps, per size class, a singly linked list of free objects threaded
 * through their first word, and a count of the room left (which shares its word with the
 * heap profiler's countdown of the class's allocations).  malloc pops and free
 * pushes with no lock and no system call; a miss grows the class's capacity (up to
 * 512 KiB of objects, within a budget of 4 MiB for all of a thread's small classes: a
 * class grows by taking the capacity others hold unused, else that of the one least
 * recently missed, with its objects) and takes a whole
 * list from a transfer cache when another thread has left one there, else a refill
 * from the thread's arena; a full cache keeps its 8
 * most recent objects and hands the rest to a transfer cache in one piece (a large
 * class: to the page heap in one lock round).  A freed object's second
 * word holds a key (its link's mask), which the pop that hands it out checks and clears: a
 * double free is found there, or where the object goes back to its slab (freelist.h),
 * and free(p); free(p) at once.  A thread is placed on the arena with the fewest
 * threads when it first allocates, and leaves it when it exits. */
#ifndef TIDE_TCACHE_H
#define TIDE_TCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "extent.h"
#include "freelist.h"
#include "size_class_table.h"
#include "util.h"

enum {
    TCACHE_UNINIT = 0, /* first call of the thread: set up on the slow path */
    TCACHE_ACTIVE,
    TCACHE_DISABLED,   /* tcache:off, or the thread is exiting: go to the arena */
    TCACHE_BUSY        /* being set up: calls made meanwhile go to the arena */
};

typedef struct tcache_s {
    /* Per class, one word (tcache_room and the profiler's countdown, prof.h): in its low 16
     * bits the room left in the list (cap - count; 0 also while not ACTIVE), above them how
     * many more of the class's allocations the heap profiler lets by before it samples one.
     * The malloc fast path takes one from the countdown and gives one to the room in a
     * single subtraction, the profiler on or off (off, the countdown never runs out): the
     * word turns negative when a sample is due. */
    int64_t room[SC_NCACHED];
    void *head[SC_NCACHED];
    uint16_t cap[SC_NCACHED];   /* capacity: grows each time the class runs dry */
    /* A large class's head's extent, from the page-map entry read when the block became the
     * head (the free's lookup, or the check of the link that led to it): the pop checks
     * and clears the extent's cached mark without looking the block up again. */
    extent_t *head_ext[SC_NCACHED - SC_NSMALL];
    /* Bytes this thread may still ask for before the profiler samples one of the requests
     * that the fast path does not count (prof.h): above 14 KiB, aligned, a growth. */
    int64_t prof_left;
    /* The small classes' capacities in bytes, added up: at most TCACHE_BUDGET. */
    uint32_t cap_bytes;
    /* Slow-path events (a class ran dry or overflowed), counted; and when each small
     * class last had one: the budget takes capacity from the class missed longest ago. */
    uint32_t tick;
    uint32_t last_miss[SC_NSMALL];
    uint16_t arena;
    uint8_t state;
} tcache_t;

extern __thread tcache_t tcache_tls __attribute__((tls_model("initial-exec")));

/* The calling thread's cache, its address in a register.  Left to itself GCC reaches a
 * class's head and room through %fs with an index (%fs:0x160(%rdx,%rcx,8)), and a
 * malloc's load of the head then waits longer for the last malloc's store of it: with
 * the plain base+offset addressing this gives, mallocs of one size in a row take 0.86x
 * the time (bench/pairs burst) and bench/powers 0.61x, for one instruction more a
 * malloc (bench/results/2026-12-07-tcache-register.md). */
TIDE_INLINE tcache_t *tcache_here(void)
{
    tcache_t *tc = &tcache_tls;
    __asm__("" : "+r"(tc));
    return tc;
}

/* What a thread's small classes' capacities may add up to: as much as their limits
 * added up to (3.9 MiB) before one class could grow past 128 KiB. */
#define TCACHE_BUDGET ((uint32_t)(4 * MiB))

#define TCACHE_ROOM_BITS 16
#define TCACHE_ROOM_MASK (((int64_t)1 << TCACHE_ROOM_BITS) - 1)
#define TCACHE_PROF_ONE ((int64_t)1 << TCACHE_ROOM_BITS) /* one allocation of the countdown */
/* The room left in TC's list for CLS. */
TIDE_INLINE unsigned tcache_room(const tcache_t *tc, size_t cls) { return (unsigned)(tc->room[cls] & TCACHE_ROOM_MASK); }
TIDE_INLINE void tcache_set_room(tcache_t *tc, size_t cls, unsigned room)
{
    tc->room[cls] = (tc->room[cls] & ~TCACHE_ROOM_MASK) | (int64_t)room;
}

/* Set the profiler's countdown of CLS to LEFT allocations (at most 2^46), keeping the room. */
TIDE_INLINE void tcache_set_countdown(tcache_t *tc, size_t cls, int64_t left)
{
    tc->room[cls] = (int64_t)((uint64_t)left << TCACHE_ROOM_BITS) | (tc->room[cls] & TCACHE_ROOM_MASK);
}

/* Push OBJ, freed, on TC's list for CLS (the caller checked that there is room): its link
 * encoded, the key in its second word (freelist.h): stores only.  The fast path's push
 * and the slow paths' are this one. */
TIDE_INLINE void tcache_push(tcache_t *tc, void **obj, size_t cls)
{
    fl_list(obj, tc->head[cls]);
    tc->head[cls] = obj;
    /* A compiler barrier: without it GCC 12 keeps the count the free fast path tested in a
     * register and writes it back, where it can compare and decrement it in memory (two
     * instructions fewer a malloc(64) + free pair). */
    __asm__("" ::: "memory");
    tc->room[cls]--;
}

/* Slow paths: the cache of CLS is empty / full or not set up. */
void *tcache_alloc_slow(unsigned cls);
void tcache_free_slow(void *p, unsigned cls, extent_t *ext); /* EXT: P's slab or large extent */
/* Abort with FUNC's name when P (of class CLS) is in the calling thread's cache or a
 * transfer cache (it holds the key) or free in its slab (the slab mark, or any mark in a
 * thread without a cache): realloc's check, which reads the block anyway (free() reads
 * nothing of it), and free_sized's in a thread without a cache. */
void tcache_check_not_freed(void *p, unsigned cls, const char *func);
/* Empty the calling thread's cache. */
void tcache_flush_self(void);
/* Empty it and every transfer cache, then purge every dirty page (malloc_trim,
 * tide_purge): bytes purged. */
size_t tcache_trim(void);
/* Set up once per process: the thread-exit hook. */
void tcache_boot(void);
/* Place threads on, and refill from, only the first N arenas from now on (0: all of
 * them); threads already placed keep their arena, blocks go back to theirs
 * (mallopt(M_ARENA_MAX)). */
void tcache_arena_max(unsigned n);

/* The calling thread's large-block placement hint (the extent layer reads and writes it). */
extent_hint_t *tcache_large_hint(void);

typedef struct tcache_stats_s {
    uint64_t nthreads;
} tcache_stats_t;
void tcache_stats(tcache_stats_t *out);

#endif
