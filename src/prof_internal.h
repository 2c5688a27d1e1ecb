/* SPDX-License-Identifier: MIT */
/* prof_internal.h - the heap profiler's types and state, shared by its files: prof.c (the
 * locks, start-up, fork, statistics), prof_math.c (the intervals, the countdowns, the
 * weights), prof_stack.c (call stacks and their table), prof_record.c (the records, the
 * shards' counts, the samples kept in their slab) and prof_dump.c (the dumps).  Nothing
 * else includes it.  Its names are hidden, so that the calls and loads between those
 * files are direct ones, as within one file. */
#ifndef TIDE_PROF_INTERNAL_H
#define TIDE_PROF_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lock.h"
#include "prof.h"
#include "util.h"

#define PROF_BUCKETS (1u << 14)
#define PROF_STACK_CHUNK (64 * KiB)
#define PROF_FX 1024u /* fixed-point unit of the weighted counts */
/* How a sample's stack was found (prof_bt_t.how). */
#define PROF_WALKED 0
#define PROF_RECOGNISED 1
#define PROF_UNWOUND 2

/* Weighted counts of the samples of one stack (or of all): counts in 1/PROF_FX.  A shard's
 * may wrap below zero (unsigned: defined); their sum is right. */
typedef struct prof_counts_s {
    uint64_t live_count, live_bytes;
    uint64_t alloc_count, alloc_bytes; /* the same, cumulative */
} prof_counts_t;

typedef struct prof_stack_s {
    struct prof_stack_s *next; /* in its bucket; set before the entry is published */
    uint64_t hash;
    uint32_t id;               /* where its counts are in each shard */
    uint32_t depth;
    prof_counts_t sum;         /* a dump's sum of the shards' counts (prof_lock) */
    uintptr_t pc[];
} prof_stack_t;

/* The locks, defined with the fork hooks that take them (prof.c, which gives their order). */
extern lock_t prof_lock TIDE_HIDDEN;      /* the table's growth, a dump */
extern lock_t prof_slab_lock TIDE_HIDDEN; /* the samples kept in their slab (prof_record.c) */

/* What a sample reads of the settings, in one line of its own: the conf line is not
 * touched by samples (prof and the prof keys are fixed at start-up). */
typedef struct prof_set_s {
    int ready;         /* atomic: booted, sampling may start */
    double rate;       /* prof_sample */
    uint64_t interval; /* prof_interval */
} TIDE_ALIGNED_CL prof_set_t;
extern prof_set_t prof_set TIDE_HIDDEN; /* prof.c */

/* For each small class, set at start-up (prof_sample does not change after): prof_sample over
 * its size, and the inverse of the probability that a block of its size is sampled, so
 * that a sample by a class's countdown computes neither an exponential nor a division;
 * side by side, since a sample reads both. */
typedef struct prof_class_s {
    double scale;
    uint64_t count_fx; /* the inverse, as a record's weight (prof_count_fx) */
} prof_class_t;
extern prof_class_t prof_class[SC_NSMALL] TIDE_HIDDEN; /* prof_math.c */

/* The probability that a block of SIZE bytes is sampled (prof_math.c has the rest of the
 * maths). */
TIDE_SAMPLE_PATH static inline double prof_probability(size_t size)
{
    double p = prof_one_minus_exp_neg((double)size / prof_set.rate);
    return p > 1e-300 ? p : 1e-300;
}

/* A record's weight in 1/PROF_FX blocks, from the inverse INV of its probability, rounded
 * once when it is recorded: the free takes back the same integers, with no floating point.
 * Through int64_t, one instruction where uint64_t takes a test and a branch: it stays below
 * 2^51 (INV < 2^41 at the largest prof_sample, 2^40). */
static inline uint64_t prof_count_fx(double inv) { return (uint64_t)(int64_t)(PROF_FX * inv + 0.5); }

/* The table of stacks (prof_stack.c). */
extern prof_stack_t **prof_buckets TIDE_HIDDEN; /* heads: atomic (read without prof_lock) */
extern uintptr_t prof_stack_cur TIDE_HIDDEN, prof_stack_end TIDE_HIDDEN;
extern uint64_t prof_nstacks TIDE_HIDDEN; /* under prof_lock */
/* The entry of the table for BT's addresses, added (under prof_lock) when new; NULL when
 * the metadata or the stacks' ids ran out. */
prof_stack_t *prof_stack_of(const prof_bt_t *bt) TIDE_HIDDEN;

/* Freed blocks of the smallest large class that small samples were promoted to, kept for
 * the next ones (up to this many a shard): a sample's block then comes and goes with the
 * lock the record takes anyway.  Without them, a block freed by another thread than the
 * one that sampled it went to that thread's cache, and the next sample of the first thread
 * took one from the page heap, under its lock, often in pages never touched before.  Few:
 * what they hold is neither live nor purged until malloc_trim (prof_trim). */
#define PROF_SPARE_MAX 8

/* A shard's counts of the stacks come in chunks of PROF_CHUNK_STACKS, made when it first
 * counts one of them: up to PROF_MAX_CHUNKS * PROF_CHUNK_STACKS stacks (a sample of a
 * stack beyond is dropped, as when the metadata runs out). */
#define PROF_SHARDS 8
#define PROF_CHUNK_STACKS 512u
#define PROF_MAX_CHUNKS 2048u

/* What a sample or a sampled free touches, in two lines: the first the lock, the counts'
 * chunks and the figures, the second the kept blocks.  The totals of the dump's header are
 * the sum of the stacks' counts; a shard keeps only its live bytes, for prof_interval. */
typedef struct prof_shard_s {
    lock_t lock;
    unsigned nspare;        /* atomic: peeked without the lock */
    prof_counts_t **chunk;  /* PROF_MAX_CHUNKS of them, from the metadata at start-up */
    uint64_t live_bytes;    /* atomic: prof_interval peeks at it */
    uint64_t nlive, ndropped;
    uint64_t nfound[3];     /* samples' stacks by how they were found (their sum: samples) */
    extent_t *spare[PROF_SPARE_MAX];
} TIDE_ALIGNED_CL prof_shard_t;
/* (Not in debug builds, whose locks carry their rank.) */
_Static_assert(sizeof(prof_shard_t) == 2 * TIDE_CACHELINE || sizeof(lock_t) > 4, "a shard is two lines");
extern prof_shard_t prof_shards[PROF_SHARDS] TIDE_HIDDEN; /* prof.c */

/* Every shard's lock, in their order, and back. */
static inline void prof_shards_lock(void)
{
    for (unsigned k = 0; k < PROF_SHARDS; k++)
        lock_acquire(&prof_shards[k].lock);
}
static inline void prof_shards_unlock(void)
{
    for (unsigned k = PROF_SHARDS; k-- > 0;)
        lock_release(&prof_shards[k].lock);
}

/* A stack unwound once, kept to be recognised again.  Unwinding without frame pointers
 * (libgcc's unwinder) costs some 20,000 instructions, 8 % of a program that
 * allocates 512 KiB blocks at full speed (ebizzy).  A call from the same place returns
 * to the same address with the same stack pointer; if every return address of the
 * frames above is still where the unwind found it (frame I's just below frame I-1's
 * canonical frame address), each frame has the same size and caller as before, and the
 * stack is the one unwound then.  Frames whose size varies (alloca) move the slots and
 * miss. */
#define PROF_CACHE_DEPTH 32
#define PROF_CACHE_WAYS 2
typedef struct prof_cached_s {
    uintptr_t frame;                  /* the entry's frame record, 0: empty */
    prof_stack_t *stack;              /* its entry in the table, once found (NULL: not yet) */
    struct prof_counts_s *counts;     /* the thread's shard's counts of it, once made */
    uintptr_t pc[PROF_CACHE_DEPTH];   /* pc[0] = the return address at frame + 8 */
    uint16_t slot[PROF_CACHE_DEPTH];  /* where pc[i] (i > 0) is: frame + 8 * slot[i] */
    uint8_t n;
} prof_cached_t;

#define PROF_DRAWS 16
typedef struct prof_tls_s {
    uint64_t rng;
    uintptr_t stack_lo, stack_hi; /* the thread's stack VMA, as last looked up */
    uint64_t armed_classes;       /* each class's countdown holds a drawn interval (a bit each) */
    uint8_t armed;                /* the same for the byte countdown */
    uint8_t busy;                 /* sampling: allocations made meanwhile are not sampled */
    uint8_t cached_next;          /* the way to replace next */
    uint8_t ndraws;               /* how many of draws[] are left, used from the end */
    uint8_t shard;                /* the thread's shard, + 1 (0: none yet) */
    double draws[PROF_DRAWS];     /* exponentials of mean 1, drawn ahead */
    prof_cached_t cached[PROF_CACHE_WAYS];
} prof_tls_t;
extern __thread prof_tls_t prof_tls __attribute__((tls_model("initial-exec"))) TIDE_HIDDEN; /* prof.c */

/* The dumps (prof_dump.c): how many were written, and one to PREFIX.PID.SEQ.KIND.heap (KIND
 * 0 the final one, 1 an interval's, 2 tide_prof_dump(NULL)'s). */
extern uint64_t prof_ndumps TIDE_HIDDEN; /* atomic */
int prof_dump_auto(unsigned kind, bool warn) TIDE_HIDDEN;

/* prof.h's functions that these files call from one another. */
bool prof_fire(void) TIDE_HIDDEN;
void prof_backtrace(prof_bt_t *bt, void *frame) TIDE_HIDDEN;

#endif
