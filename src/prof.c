/* SPDX-License-Identifier: MIT */
/* prof.c - the sampling heap profiler: its locks, start-up, fork and statistics.  The rest
 * is in prof_math.c (the intervals, the countdowns, the numbers), prof_stack.c (call stacks
 * and their table), prof_record.c (records, the shards' counts, the samples kept in their
 * slab) and prof_dump.c (the dumps), which share prof_internal.h.
 *
 * State: a table of distinct call stacks (hashed, chained, never freed), carved under
 * prof_lock from the metadata range (meta.h), apart from the heap, and read without it; a
 * record of each live sampled block (its stack, sizes and weight), in the block's extent
 * (extent_prof_t), or for a sample kept in its slab in a table apart (prof_slab_lock);
 * and the weighted live and cumulative counts of each stack, kept apart in PROF_SHARDS
 * shards, each with its own lock, of which a thread uses one.  A sample and a sampled
 * block's free (whichever thread frees it) add to and take from the counts of the calling
 * thread's shard alone, so two threads that sample touch no line the other writes (with
 * one lock and one set of counts for all, those lines passed between the CPUs at every
 * sample: at prof_sample:16k, bench/larson's samples took about twice the time they take
 * now).  A shard's count of a stack may go below zero; their sum over the shards, which a
 * dump takes, is the stack's.  Weights are fixed-point integers (counts in 1/1024ths),
 * rounded once when a sample is recorded, so that a free takes back exactly what its
 * sample added.  Locks: prof_lock (the table; a dump) before the shards' (in their order),
 * then prof_slab_lock, meta's last; a sample or a free holds one shard's lock at a time,
 * and takes prof_lock only to add a stack, holding no other, so nothing here can deadlock
 * with an allocation, and a fork waits for all of them (init.c takes them before the page
 * heap's). */
#include "prof_internal.h"

#include "conf.h"
#include "meta.h"
#include "os.h"

/* The locks (their order above), beside the fork hooks below that take them, and the
 * state that all of the profiler's files read. */
lock_t prof_lock TIDE_FORK_LOCK = LOCK_INITIALIZER(LOCK_RANK_PROF); /* the table's growth, a dump */
prof_set_t prof_set; /* what a sample reads of the settings */
prof_shard_t prof_shards[PROF_SHARDS] TIDE_FORK_LOCK = { [0 ... PROF_SHARDS - 1] = { .lock = LOCK_INITIALIZER(LOCK_RANK_PROF_SHARD) } };
lock_t prof_slab_lock TIDE_FORK_LOCK = LOCK_INITIALIZER(LOCK_RANK_PROF_SLAB); /* the samples kept in their slab */
__thread prof_tls_t prof_tls __attribute__((tls_model("initial-exec")));

void prof_boot(void)
{
    if (!ATOMIC_LOAD(&conf.prof))
        return;
    prof_set.rate = (double)conf.prof_sample;
    prof_set.interval = (uint64_t)conf.prof_interval;
    for (unsigned c = 0; c < SC_NSMALL; c++) {
        prof_class[c].scale = prof_set.rate / (double)sc_size[c];
        prof_class[c].count_fx = prof_count_fx(1 / prof_probability(sc_size[c]));
    }
    /* The tables' first chunks now: a sample then needs more only as stacks grow. */
    prof_buckets = meta_alloc(PROF_BUCKETS * sizeof *prof_buckets);
    void *stacks = meta_alloc(PROF_STACK_CHUNK);
    bool ok = prof_buckets && stacks;
    for (unsigned k = 0; k < PROF_SHARDS && ok; k++)
        ok = (prof_shards[k].chunk = meta_alloc(PROF_MAX_CHUNKS * sizeof *prof_shards[k].chunk)) != NULL;
    if (!ok) {
        ATOMIC_STORE(&conf.prof, 0);
        return;
    }
    prof_stack_cur = (uintptr_t)stacks;
    prof_stack_end = prof_stack_cur + PROF_STACK_CHUNK;
    /* The unwinder's first look-up may load libgcc_s and allocates: not inside a sample. */
    prof_tls.busy = 1;
    os_unwind_boot();
    prof_tls.busy = 0;
    ATOMIC_STORE_REL(&prof_set.ready, 1);
    /* This thread's allocations while tide started (these above among them) found the
     * profiler not ready and put off their look for 64 KiB: the program's own come next. */
    tcache_tls.prof_left = 0;
    for (unsigned c = 0; c < SC_NSMALL; c++)
        tcache_set_countdown(&tcache_tls, c, 0);
}

void prof_exit(void)
{
    if (ATOMIC_LOAD(&conf.prof) && ATOMIC_LOAD(&conf.prof_final) && ATOMIC_LOAD_ACQ(&prof_set.ready))
        prof_dump_auto(0, true);
}

void prof_locks(lock_op_t op) { lock_apply(&prof_lock, op); }
void prof_shard_locks(lock_op_t op)
{
    for (unsigned k = 0; k < PROF_SHARDS; k++)
        lock_apply(&prof_shards[k].lock, op);
}
void prof_slab_locks(lock_op_t op) { lock_apply(&prof_slab_lock, op); }

void prof_stats(prof_stats_t *out)
{
    *out = (prof_stats_t){ 0 };
    lock_acquire(&prof_lock);
    out->stacks = prof_nstacks;
    lock_release(&prof_lock);
    for (unsigned k = 0; k < PROF_SHARDS; k++) {
        prof_shard_t *sh = &prof_shards[k];
        lock_acquire(&sh->lock);
        out->samples += sh->nfound[PROF_WALKED] + sh->nfound[PROF_RECOGNISED] + sh->nfound[PROF_UNWOUND] - sh->ndropped;
        out->live_samples += sh->nlive;
        out->dropped += sh->ndropped;
        out->frame_walks += sh->nfound[PROF_WALKED];
        out->reused += sh->nfound[PROF_RECOGNISED];
        out->backtraces += sh->nfound[PROF_UNWOUND];
        lock_release(&sh->lock);
    }
    out->dumps = ATOMIC_LOAD(&prof_ndumps);
}
