/* SPDX-License-Identifier: MIT */
/* arena.h - arenas: the size-class bins of slabs that small objects come from.
 *
 * Threads are spread over the arenas (4 per CPU by default) so that refills and
 * flushes from different threads rarely meet on a lock.  Each bin has its own lock
 * and keeps its non-full slabs in address order, so allocation packs the lowest
 * slabs first and the highest ones drain.  A slab that empties stays in its bin, on
 * the bin's list of empty slabs (up to a bound), so that a refill a moment later finds
 * it instead of cutting a new one from the page heap; the purge path gives back those
 * that stayed empty for decay_ms (arena_release_empty). */
#ifndef TIDE_ARENA_H
#define TIDE_ARENA_H

#include "extent.h"
#include "lock.h"
#include "rbtree.h"
#include "size_class_table.h"

/* One cache line: an arena's 35 bins then lie on 2 KiB, one page, which is what fork's
 * handlers write in the parent after the fork (each page they write is copied then). */
typedef struct bin_s {
    lock_t lock;
    uint32_t nempty;     /* the empty slabs kept (atomic: read without the lock) */
    rb_root_t nonfull;   /* slabs with a free region, by address (the empty ones too) */
    list_node_t empty;   /* the empty slabs kept, by when they emptied (oldest first) */
    size_t nslabs;       /* live slabs */
    size_t nregs_live;   /* regions handed out (to threads' caches or the program) */
    size_t nquar;        /* regions its live slabs never hand out (extent.h: nquar) */
} TIDE_ALIGNED_CL bin_t;
#ifndef TIDE_LOCK_RANKS /* (the ranks make a lock 8 bytes: two lines in debug builds) */
_Static_assert(sizeof(bin_t) == TIDE_CACHELINE, "a bin is one cache line");
#endif

/* A bin's counts, under its lock, where regions leave and come back to the slabs (refills
 * and flushes), as jemalloc's bin stats: never on the thread cache's fast path. */
typedef struct bin_counts_s {
    uint64_t nslabs_made; /* slabs it took from the page heap, ever */
    uint64_t nmalloc;     /* regions handed out, ever */
    uint64_t nfree;       /* regions returned, ever (nmalloc - nfree == nregs_live) */
    uint64_t nfills;      /* arena_fill calls that took regions */
    uint64_t nflushes;    /* lock rounds that returned regions */
} TIDE_ALIGNED_CL bin_counts_t;

typedef struct arena_s {
    unsigned ind;
    unsigned nthreads; /* threads placed on it (atomic; the thread layer counts them) */
    /* A thread has been placed on it or filled from it, ever (atomic; set under transfer's
     * ready_lock, which fork takes before the bins).  No bin of an arena without it has
     * ever held a region, so fork's handlers leave its locks (and their pages) alone. */
    bool joined;
    size_t empty_pages; /* pages of the empty slabs its bins keep (atomic) */
    bin_t bins[SC_NSMALL];
    bin_counts_t counts[SC_NSMALL]; /* [class]: its bin's */
} arena_t;

extern arena_t **arenas;
extern unsigned narenas;

/* N arenas, in metadata: 0 or ENOMEM. */
int arenas_init(unsigned n);

/* Take up to N regions of class CLS from ARENA, linked through their first word
 * (freelist.h), lowest address first.  Returns how many; *HEAD gets the list. */
unsigned arena_fill(unsigned arena, unsigned cls, void **head, unsigned n);
/* Return N small regions of class CLS (from any arenas) to their slabs, aborting with
 * CALLER's name on a double free.  Returns how many slabs emptied: kept by their bin or
 * given back to the page heap (then dirty); either way the caller tells
 * background_after_free, so that the purge path comes back for them. */
unsigned arena_return(void **objs, unsigned n, unsigned cls, const char *caller);
/* The same for a list of COUNT of them (freelist.h); a longer list is corrupted. */
unsigned arena_return_list(void *head, unsigned count, unsigned cls, const char *caller);
/* Whether small region P (of a live slab) is free in its slab: a double free, or a free of
 * a region never handed out. */
bool arena_region_is_free(extent_t *slab, uintptr_t p);
/* Give the empty slabs the bins keep back to the page heap, those kept since OLDER_THAN
 * (ns, os_now_ns) or before; UINT64_MAX: all.  They become dirty as of when they emptied,
 * so a purge pass right after takes the ones that have decayed.  No lock held. */
void arena_release_empty(uint64_t older_than);
/* Whether any bin keeps an empty slab (a racy peek, for the purger thread's sleep). */
bool arena_holds_empty(void);

/* For fork: every bin lock of every arena, in a fixed order. */
/* OP on every bin's lock, by arena then class (fork: init.c's table of ranks). */
void arenas_locks(lock_op_t op);
/* ARENA may be filled from from now on.  Under transfer's ready_lock. */
void arena_join(unsigned arena);
/* Every bin's lock, and back (tide_check). */
void arenas_lock_all(void);
void arenas_unlock_all(void);

typedef struct arena_stats_s {
    size_t allocated; /* bytes of small regions handed out */
    size_t nslabs;
    size_t nslabs_made;
    size_t nslabs_empty; /* empty slabs the bins keep */
} arena_stats_t;
void arenas_stats(arena_stats_t *out);

/* One size class's bins: of one arena, or added up over all of them. */
typedef struct bin_stats_s {
    uint64_t nmalloc, nfree, nfills, nflushes;
    uint64_t live;       /* regions handed out (to threads' caches or the program) */
    uint64_t nfree_regs; /* regions free in the slabs */
    uint64_t nslabs, nslabs_made, nslabs_empty;
} bin_stats_t;
#define ARENA_ALL UINT32_MAX
/* OUT[c] for every small class c, of arena AI or, for ARENA_ALL, of all.  Takes each bin
 * lock in turn, and holds none when it returns. */
void arenas_bin_stats(unsigned ai, bin_stats_t out[SC_NSMALL]);

#endif
