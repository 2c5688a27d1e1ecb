/* SPDX-License-Identifier: MIT */
/* prof.h - the sampling heap profiler (TIDE_CONF=prof:on).
 *
 * Each thread counts the bytes it asks for down from an exponentially distributed
 * interval (mean prof_sample bytes, as jemalloc's and tcmalloc's samplers do): the
 * countdown lives in the thread cache, beside the lists the malloc fast path pops; the
 * fast path's are counts of allocations, one per class, in the same word as the room its
 * pop makes, so that the profiler on or off it costs no instruction and no store more
 * than the pop itself (a subtraction of the request from a countdown of its own, on every
 * malloc, cost bench/pairs' batch 5 % in time: a store, where stores are what that loop
 * waits on).  An allocation that takes the countdown below zero is sampled: its call
 * stack is recorded, and it is served so that its free takes the slow path, where the
 * profiler sees it: of a small class of a page or more, as the region of its slab it
 * would have been, its record in a table apart and its page marked (pagemap.h); else as a
 * large block of its own, whose extent carries its record (extent_prof_t).  A block of
 * SIZE bytes is sampled with probability p = 1 - exp(-SIZE / R) and weighted by 1 / p, so
 * the sums over sampled blocks estimate the live bytes and blocks without bias, whatever
 * their sizes.
 *
 * Dumps are the legacy heap-profile text that gperftools and jemalloc write ("heap
 * profile:" header, one line per stack, then /proc/self/maps), read unchanged by
 * google-pprof and jeprof.  The profiler's own memory is tide metadata (meta.h), never a
 * malloc.  A sample and a sampled block's free count in the calling thread's shard
 * (prof_record.c), under its lock (with prof_slab_lock inside it for a sample kept in its
 * slab), taken with no other tide lock held, before the page heap's. */
#ifndef TIDE_PROF_H
#define TIDE_PROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "extent.h"
#include "tcache.h"
#include "util.h"

#define PROF_MAX_DEPTH 64

struct prof_stack_s;
struct prof_cached_s;

typedef struct prof_bt_s {
    unsigned n;
    uint8_t how; /* how it was found: walked, recognised or unwound (the statistics) */
    /* Recognised as a stack already in the table: that entry, and then pc[] is not filled
     * in.  Else the thread's cached stack it is (NULL: none), keyed by the frame, to be
     * given the table's entry once it is found. */
    struct prof_stack_s *stack;
    struct prof_cached_s *cached;
    uintptr_t frame;
    uintptr_t pc[PROF_MAX_DEPTH]; /* return addresses, innermost first */
} prof_bt_t;

/* The classes the malloc fast path serves have countdowns of their own, in allocations,
 * in the thread cache's word of each class (tcache.h): drawn geometric, so that each
 * allocation of a class of SIZE bytes is sampled with probability 1 - exp(-SIZE / R),
 * as the byte countdown samples a block of SIZE bytes (the two are the same Poisson
 * process over the bytes, counted apart; a block of a class is weighed by its usable
 * size, as jemalloc samples by usable size). */
/* The countdown of CLS ran out: re-arm it, and tell whether this allocation is sampled. */
bool prof_class_fire(unsigned cls);
/* After the fast path counted an allocation of CLS and did not serve it: give back the
 * room its subtraction made (nothing was popped). */
TIDE_INLINE void prof_take_back(unsigned cls) { tcache_tls.room[cls]--; }
/* Whether that count made a sample due (prof_take_back first). */
TIDE_INLINE bool prof_class_due(unsigned cls)
{
    return unlikely(tcache_tls.room[cls] < 0) && prof_class_fire(cls);
}

/* Count SIZE requested bytes against the calling thread's byte countdown (the requests
 * the fast path does not count): true when this allocation is to be sampled. */
bool prof_fire(void);
static inline bool prof_count(size_t size)
{
    tcache_t *tc = &tcache_tls;
    return unlikely((tc->prof_left -= (int64_t)size) < 0) && prof_fire();
}

/* The call stack of the program's call into tide whose frame record is FRAME: the
 * frame that a function of tide's entry set up (FRAME[0] the caller's frame pointer,
 * FRAME[1] its return address).  A stack this thread unwound before is recognised
 * first; else frame pointers are followed within the thread's stack while they form a
 * chain; else libgcc's unwinder (or glibc's backtrace()) is cut at that return address. */
void prof_backtrace(prof_bt_t *bt, void *frame);
/* Record block E, sampled at SIZE requested bytes with the probability of PSIZE bytes
 * (its usable size when a class's countdown sampled it, else SIZE), that the program sees
 * as USABLE bytes (0: the extent's size). */
void prof_record(extent_t *e, const prof_bt_t *bt, size_t size, size_t usable, size_t psize);
/* Sampled block E is being freed.  KEEP: it is a block of the smallest large class that a
 * small sample was promoted to, which the profiler may keep for the next such sample; true
 * when it did (the caller then leaves the block alone). */
bool prof_free(extent_t *e, bool keep);
/* Record block P of SLAB, of a small class of a page or more, as a sample of stack BT:
 * the record in a table apart, P's page marked (extent_mark_sampled), as prof_record. */
void prof_record_in_slab(void *p, extent_t *slab, const prof_bt_t *bt, size_t size, size_t psize);
/* Block P of SLAB, on a page marked so, is being freed: its record taken off, the page
 * unmarked (nothing when P holds none: freed twice, which the free goes on to report). */
void prof_free_in_slab(void *p, extent_t *slab);
/* A block prof_free kept, for a small sample promoted to the smallest large class,
 * recorded as prof_record records one; NULL when none is kept. */
extent_t *prof_record_kept(const prof_bt_t *bt, size_t size, size_t usable, size_t psize);
/* Give the kept blocks back (malloc_trim, tide_purge). */
void prof_trim(void);
/* The usable size of sampled block E.  Pure: a caller that does not use it (free, which
 * describes the block as realloc does) does not read the record for it. */
size_t prof_usable(const extent_t *e) __attribute__((pure));
/* Around a realloc of E: take its record off (its stack NULL when it has none) ... */
extent_prof_t prof_detach(extent_t *e);
/* ... and put it back when the block stayed as it was, or else ... */
void prof_reattach(const extent_prof_t *rec, extent_t *e);
/* ... give it to the block E now is (E may be a new extent), whose requested size went
 * from OLD_SIZE (REC's own size when it has a stack) to SIZE.  An unsampled block that
 * grew counts its growth against the countdown and may be sampled now (FRAME as for
 * prof_backtrace). */
void prof_resized(const extent_prof_t *rec, extent_t *e, size_t old_size, size_t size, void *frame);

/* Without libm: the natural logarithm of X > 0 (normal), to about 1e-10 relative (the
 * profiler's intervals), and 1 - exp(-X) for X >= 0, to about 1e-13 relative (the weight of
 * a block whose size is no class's). */
double prof_ln(double x) TIDE_HIDDEN;
double prof_one_minus_exp_neg(double x) TIDE_HIDDEN;

/* tide_prof_dump(): 0 or an errno value (ENOENT with the profiler off). */
int prof_dump(const char *path);

/* Start-up (after the heap exists: finding the unwinder may load it, and allocate) and exit
 * (prof_final). */
void prof_boot(void);
void prof_exit(void);
/* fork: OP on prof_lock, on the shards' locks (in their order), on prof_slab_lock: three
 * ranks (init.c's table of ranks). */
void prof_locks(lock_op_t op);
void prof_shard_locks(lock_op_t op);
void prof_slab_locks(lock_op_t op);

typedef struct prof_stats_s {
    uint64_t samples, live_samples, stacks, frame_walks, backtraces, reused, dumps, dropped;
} prof_stats_t;
void prof_stats(prof_stats_t *out);

#endif
