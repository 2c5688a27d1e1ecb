/* SPDX-License-Identifier: MIT */
/* guard.h - guard pages as a policy: guard:on's quarantine of freed large blocks,
 * guard_sample's sampled blocks, and the SIGSEGV handler that explains a guard page hit.
 *
 * The page heap (extent.h) makes the guard pages: with guard:on every slab and large block
 * is carved with one more page, made a guard page with MADV_GUARD_INSTALL, which marks page
 * table entries and splits no VMA.  Here:
 *   - a freed large block (guarded, at most guard_quarantine bytes) has all its pages made
 *     guard pages and is held (extent_hold), first in first out, until the blocks held
 *     after it pass guard_quarantine bytes; then its pages become ordinary again, zero, a
 *     clean free run.  A touch while it is held faults; a free of it is a double free.
 *   - guard_sample:N: about one allocation of at most 64 KiB in N bytes (exponential
 *     intervals per thread, counted on slow paths only: see guard_sample_alloc) gets an
 *     extent of its own with a guard page after it, the block right-aligned against it (to
 *     16 bytes), and a record in the metadata range: size, and the backtraces of its malloc
 *     and its free.  Freed, it is held as above, in a queue of its own.
 *   - the SIGSEGV handler (installed only when guard or guard_sample is set, chained to the
 *     program's previous one) prints one report for a fault on a guard page tide made:
 *     the address, the block and its size, overflow or use after free, and the backtraces
 *     of a sampled block; then it restores the previous handler and returns, so the access
 *     faults again under the previous disposition (the default: killed by SIGSEGV). */
#ifndef TIDE_GUARD_H
#define TIDE_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf.h"
#include "extent.h"
#include "util.h"

/* Eligible for sampling: the small and cached classes. */
#define GUARD_SAMPLE_MAX 65536

/* Start-up (the heap exists) and tide_conf_set of a guard key: installs the SIGSEGV
 * handler once either key is set, and finds the unwinder (os_unwind_boot) while nothing of tide
 * is in progress. */
void guard_boot(void);

/* Free large block E (not sampled; moved pieces healed): held as a guard when it has a
 * guard page and fits the quarantine, else given back (extent_free). */
void guard_free_large(extent_t *e, extent_hint_t *hint);

/* ---- guard_sample ---- */
static inline bool guard_sampling(void) { return ATOMIC_LOAD(&conf.guard_sample) != 0; }
/* The sampled block for a malloc of SIZE (<= GUARD_SAMPLE_MAX) when this thread's interval
 * ends with it, else NULL (also when the block cannot be had: the caller allocates). */
void *guard_sample_alloc(size_t size);
/* The thread is handed BYTES it did not ask for one by one: a refill of its cache (the
 * objects it pops from there later are not counted again), a direct or a large block. */
void guard_sample_charge(size_t bytes);
/* How many objects of SIZE bytes a refill may take (at most WANT) before the thread's
 * interval ends: the allocation after them goes to the slow path and is sampled. */
unsigned guard_sample_batch(size_t size, unsigned want);
/* The block of sampled extent E (E->sample != 0): its address and usable size. */
uintptr_t guard_sample_ptr(const extent_t *e);
size_t guard_sample_usable(const extent_t *e);
/* Free sampled extent E: its free's backtrace, then held as a guard. */
void guard_sample_free(extent_t *e);

typedef struct guard_stats_s {
    uint64_t sampled;     /* blocks sampled since start-up */
    uint64_t sampled_live; /* sampled blocks not freed yet */
} guard_stats_t;
void guard_stats(guard_stats_t *out);

/* fork: OP on guard_lock (init.c's table of ranks). */
void guard_locks(lock_op_t op);

#endif
