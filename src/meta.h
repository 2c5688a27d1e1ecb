/* SPDX-License-Identifier: MIT */
/* meta.h - tide's own memory, apart from the heap.
 *
 * Extent descriptors (with the slabs' bitmaps), arenas, bins and transfer caches live in a
 * range of their own, not among the blocks the program writes: no overflow of a block
 * reaches them.  Like the heap's range it is one VMA, mapped with MAP_NORESERVE and grown
 * at its end; nothing in it is ever freed.  Memory comes zero-filled and cache-line
 * aligned. */
#ifndef TIDE_META_H
#define TIDE_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lock.h"

/* Reserve the range (start-up): 0 or ENOMEM. */
int meta_init(void);
/* SIZE bytes of zeroed metadata, or NULL when memory is exhausted.  Any lock may be held:
 * meta's own is taken last. */
void *meta_alloc(size_t size);

/* Whether a 2 MiB unit of the range was handed out whole since meta_take_full_unit last
 * said there was none. */
bool meta_full_unit_waits(void);

/* MADV_HUGEPAGE on the range, and from now on on what it grows by (to 2 MiB boundaries):
 * a unit first touched from here is a huge page at its first fault.  thp:auto's heap
 * takes it when it gives its own range that advice; metadata is never purged, so it
 * keeps it. */
void meta_advise_huge(void);
/* The next aligned 2 MiB unit wholly handed out (each once), or 0: thp:auto collapses it
 * when it is resident (extent_huge.c).  Takes meta's lock. */
uintptr_t meta_take_full_unit(void);

typedef struct meta_stats_s {
    size_t mapped; /* bytes mapped */
    size_t used;   /* bytes handed out */
    unsigned nchunks;
} meta_stats_t;
void meta_stats(meta_stats_t *out);
/* The mapped chunks [lo, hi), at most MAX; returns how many there are. */
unsigned meta_chunks(uintptr_t (*out)[2], unsigned max);

/* fork: OP on meta_lock (init.c's table of ranks). */
void meta_locks(lock_op_t op);

#endif
