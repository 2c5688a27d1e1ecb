/* SPDX-License-Identifier: MIT */
/* prof_record.c - the heap profiler's records and counts: a sampled block's record (its
 * stack, sizes and weight), in the block's extent or, for a sample kept in its slab, in a
 * table apart (prof_slab_lock); each stack's weighted counts in the shard of the thread
 * that samples or frees; the promoted blocks kept for the next small samples; a record
 * through realloc. */
#include "prof_internal.h"

#include "large.h"
#include "meta.h"

_Static_assert(sizeof(extent_prof_t) <= sizeof(((extent_t *)0)->bitmap), "a record does not grow the extent");

static uint64_t prof_interval_mark; /* atomic: live bytes at the last interval dump */
static unsigned prof_next_shard; /* atomic: the shard of the next thread that samples */

/* ---- the shards' counts ---------------------------------------------------------- */

/* Its weight in bytes, SIZE * INV rounded: below 2^47 (size * inv is about prof_sample for a
 * block below it, at most 1.6 size above), so SIZE * COUNT_FX stays below 2^57. */
static uint64_t prof_rec_bytes(const extent_prof_t *r) { return (r->size * r->count_fx + PROF_FX / 2) / PROF_FX; }

/* The calling thread's shard: given in turn to the threads as they first sample or free
 * a sample. */
TIDE_SAMPLE_PATH static prof_shard_t *prof_my_shard(void)
{
    prof_tls_t *t = &prof_tls;
    if (unlikely(!t->shard))
        t->shard = (uint8_t)(ATOMIC_ADD(&prof_next_shard, 1) % PROF_SHARDS + 1);
    return &prof_shards[t->shard - 1];
}

/* Shard SH's counts of stack S, their chunk made when it is the first of it SH counts
 * (SH's lock held); NULL when the metadata ran out. */
TIDE_SAMPLE_PATH static prof_counts_t *prof_counts(prof_shard_t *sh, const prof_stack_t *s)
{
    prof_counts_t **c = &sh->chunk[s->id / PROF_CHUNK_STACKS];
    if (unlikely(!*c) && !(*c = meta_alloc(PROF_CHUNK_STACKS * sizeof **c)))
        return NULL;
    return &(*c)[s->id % PROF_CHUNK_STACKS];
}

/* Counts C of R's stack in shard SH, and SH's live bytes, gain (ADD) or lose R's weights;
 * the cumulative counts too when R is a new sample (SAMPLED).  SH's lock held. */
TIDE_INLINE void prof_weigh(prof_shard_t *sh, prof_counts_t *c, const extent_prof_t *r, bool add,
                            bool sampled)
{
    uint64_t count = r->count_fx, bytes = prof_rec_bytes(r);
    if (add) {
        c->live_count += count;
        c->live_bytes += bytes;
        ATOMIC_STORE(&sh->live_bytes, sh->live_bytes + bytes);
    } else {
        c->live_count -= count;
        c->live_bytes -= bytes;
        ATOMIC_STORE(&sh->live_bytes, sh->live_bytes - bytes);
    }
    if (sampled) {
        c->alloc_count += count;
        c->alloc_bytes += bytes;
    }
}

/* ---- records --------------------------------------------------------------------- */

/* The stack BT: the entry it was recognised as, else found or added, and then remembered
 * by the cached stack it came from.  No lock held. */
TIDE_SAMPLE_PATH static prof_stack_t *prof_stack_get(const prof_bt_t *bt)
{
    if (bt->stack)
        return bt->stack;
    prof_stack_t *s = prof_stack_of(bt);
    /* (Still the entry BT was found in: a signal handler's sample between may have
     * replaced it, with its own frame.) */
    if (s && bt->cached && bt->cached->frame == bt->frame)
        bt->cached->stack = s;
    return s;
}

/* Fill record R of a sample of stack S (NULL: none could be had) and count it in shard SH,
 * whose lock is held: false when it stays unprofiled (out of metadata). */
TIDE_SAMPLE_PATH static bool record_in(prof_shard_t *sh, extent_prof_t *r, prof_stack_t *s, const prof_bt_t *bt,
                                       size_t size, size_t usable, uint64_t count_fx)
{
    sh->nfound[bt->how]++;
    /* A recognised stack's counts in this thread's shard are kept with it. */
    prof_cached_t *k = bt->cached;
    bool mine = k && k->frame == bt->frame && k->stack == s;
    prof_counts_t *c = mine && k->counts ? k->counts : s ? prof_counts(sh, s) : NULL;
    if (!c) {
        sh->ndropped++;
        return false;
    }
    if (mine)
        k->counts = c;
    *r = (extent_prof_t){ .stack = s,
                          .size = size,
                          .count_fx = count_fx,
                          .usable = (uint32_t)usable,
                          .shard = (uint8_t)(sh - prof_shards) };
    prof_weigh(sh, c, r, true, true);
    sh->nlive++;
    return true;
}

/* Record E's block: in E, with E->prof set. */
TIDE_SAMPLE_PATH static bool record_extent(prof_shard_t *sh, extent_t *e, prof_stack_t *s, const prof_bt_t *bt,
                                           size_t size, size_t usable, uint64_t count_fx)
{
    if (!record_in(sh, &e->prof_rec, s, bt, size, usable, count_fx))
        return false;
    e->prof = 1;
    return true;
}

/* After a sample, with prof_interval set (INTERVAL): a dump when the live heap grew by it
 * since the last.  The shards' live bytes are read without their locks (a dump a sample
 * early or late is no matter); one thread wins the mark and dumps. */
static TIDE_NOINLINE void prof_interval_check(uint64_t interval)
{
    uint64_t live = 0;
    for (unsigned k = 0; k < PROF_SHARDS; k++)
        live += ATOMIC_LOAD(&prof_shards[k].live_bytes);
    uint64_t mark = ATOMIC_LOAD(&prof_interval_mark);
    if ((int64_t)(live - mark) >= (int64_t)interval &&
        __atomic_compare_exchange_n(&prof_interval_mark, &mark, live, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        prof_dump_auto(1, true);
}

/* After a sample, its locks released: RECORDED when it was counted. */
TIDE_INLINE void record_done(bool recorded)
{
    uint64_t interval = prof_set.interval;
    if (recorded && unlikely(interval))
        prof_interval_check(interval);
}

/* The weight of a sample taken with the probability of PSIZE bytes. */
/* The small class of exactly SIZE bytes, or SC_NSMALL. */
TIDE_SAMPLE_PATH static unsigned prof_class_sized(size_t size)
{
    if (size > SC_LOOKUP_MAX)
        return SC_NSMALL;
    unsigned c = sc_lookup[(size + 15) >> 4];
    return c < SC_NSMALL && sc_size[c] == size ? c : SC_NSMALL;
}

TIDE_INLINE uint64_t record_weight(size_t psize)
{
    unsigned cls = prof_class_sized(psize);
    return cls < SC_NSMALL ? prof_class[cls].count_fx : prof_count_fx(1 / prof_probability(psize));
}

TIDE_SAMPLE_PATH void prof_record(extent_t *e, const prof_bt_t *bt, size_t size, size_t usable, size_t psize)
{
    prof_stack_t *s = prof_stack_get(bt);
    uint64_t count_fx = record_weight(psize);
    prof_shard_t *sh = prof_my_shard();
    lock_acquire(&sh->lock);
    bool recorded = record_extent(sh, e, s, bt, size, usable, count_fx);
    lock_release(&sh->lock);
    record_done(recorded);
}

/* ---- frees ----------------------------------------------------------------------- */

/* SH, whose lock is held, could not get metadata for the counts of R's stack: the shard
 * that sampled R has them.  Its lock is held on return, with the counts in *C. */
static TIDE_NOINLINE prof_shard_t *free_in_sampling_shard(prof_shard_t *sh, const extent_prof_t *r, prof_counts_t **c)
{
    lock_release(&sh->lock);
    sh = &prof_shards[r->shard];
    lock_acquire(&sh->lock);
    *c = prof_counts(sh, r->stack);
    return sh;
}

/* Take record R's weights off, in the calling thread's shard (else the one that sampled
 * it, when this one could not get metadata for the counts of its stack): that shard, its
 * lock held. */
TIDE_SAMPLE_PATH static prof_shard_t *unweigh(const extent_prof_t *r)
{
    prof_shard_t *sh = prof_my_shard();
    lock_acquire(&sh->lock);
    prof_counts_t *c = prof_counts(sh, r->stack);
    if (unlikely(!c))
        sh = free_in_sampling_shard(sh, r, &c);
    prof_weigh(sh, c, r, false, false);
    sh->nlive--;
    return sh;
}

TIDE_SAMPLE_PATH bool prof_free(extent_t *e, bool keep)
{
    e->prof = 0;
    prof_shard_t *sh = unweigh(&e->prof_rec);
    keep = keep && sh->nspare < PROF_SPARE_MAX;
    if (keep) {
        /* As a thread cache marks the blocks it holds: a second free finds the mark. */
        ATOMIC_STORE(&e->cached, 1);
        sh->spare[sh->nspare] = e;
        ATOMIC_STORE(&sh->nspare, sh->nspare + 1);
    }
    lock_release(&sh->lock);
    return keep;
}

/* ---- blocks kept for the next small samples -------------------------------------- */

/* A kept block from shard SH, whose lock is held, or NULL. */
TIDE_SAMPLE_PATH static extent_t *spare_take(prof_shard_t *sh)
{
    if (!sh->nspare)
        return NULL;
    ATOMIC_STORE(&sh->nspare, sh->nspare - 1);
    extent_t *e = sh->spare[sh->nspare];
    ATOMIC_STORE(&e->cached, 0);
    return e;
}

/* Shard SH (the caller's, its lock not held) has no kept block: move another shard's
 * into it, all of them, so that the next samples find them at home (a sample freed by
 * another thread leaves its block in that thread's shard, and a lock of that shard's for
 * each sample would pass its lines between the CPUs again).  Whether any moved. */
static bool spare_steal(prof_shard_t *sh)
{
    prof_shard_t *from = NULL;
    if (ATOMIC_LOAD(&prof_next_shard) < 2)
        return false; /* only this thread's shard in use: no look at the others' lines */
    for (unsigned k = 0; k < PROF_SHARDS && !from; k++)
        if (&prof_shards[k] != sh && ATOMIC_LOAD(&prof_shards[k].nspare))
            from = &prof_shards[k];
    if (!from)
        return false;
    extent_t *moved[PROF_SPARE_MAX];
    unsigned n = 0, i = 0;
    lock_acquire(&from->lock);
    while (from->nspare) {
        moved[n++] = from->spare[from->nspare - 1];
        ATOMIC_STORE(&from->nspare, from->nspare - 1);
    }
    lock_release(&from->lock);
    lock_acquire(&sh->lock);
    for (; i < n && sh->nspare < PROF_SPARE_MAX; i++) {
        sh->spare[sh->nspare] = moved[i];
        ATOMIC_STORE(&sh->nspare, sh->nspare + 1);
    }
    lock_release(&sh->lock);
    /* (Another thread of this shard freed samples meanwhile: no room for the rest.) */
    for (unsigned j = i; j < n; j++) {
        ATOMIC_STORE(&moved[j]->cached, 0);
        large_free(moved[j]);
    }
    return n > 0;
}

TIDE_SAMPLE_PATH extent_t *prof_record_kept(const prof_bt_t *bt, size_t size, size_t usable, size_t psize)
{
    /* A peek first, so that none kept costs no lock. */
    prof_shard_t *sh = prof_my_shard();
    if (!ATOMIC_LOAD(&sh->nspare) && !spare_steal(sh))
        return NULL;
    prof_stack_t *s = prof_stack_get(bt);
    uint64_t count_fx = record_weight(psize);
    lock_acquire(&sh->lock);
    extent_t *e = spare_take(sh);
    bool recorded = e && record_extent(sh, e, s, bt, size, usable, count_fx);
    lock_release(&sh->lock);
    record_done(recorded);
    return e;
}

void prof_trim(void)
{
    for (unsigned k = 0; k < PROF_SHARDS; k++) {
        prof_shard_t *sh = &prof_shards[k];
        extent_t *kept[PROF_SPARE_MAX];
        unsigned n = 0;
        lock_acquire(&sh->lock);
        for (extent_t *e; (e = spare_take(sh)) != NULL;)
            kept[n++] = e;
        lock_release(&sh->lock);
        for (unsigned i = 0; i < n; i++)
            large_free(kept[i]);
    }
}

/* ---- samples kept in their slab ---------------------------------------------------- */

/* Their records, by block address: open addressing with linear probing, under
 * prof_slab_lock (after the shards' locks, before meta's).  A removal moves the entries
 * after it back into the hole (no tombstones: a table serves any number of samples that
 * come and go without filling up).  Grown by doubling when three quarters full, from the
 * metadata (the old table stays there, unused: at most as much again). */
typedef struct prof_slab_rec_s {
    uintptr_t addr; /* 0: an empty slot */
    extent_prof_t rec;
} prof_slab_rec_t;

#define PROF_SLAB_LG_MIN 8
static prof_slab_rec_t *prof_slab_tab;
static unsigned prof_slab_lg; /* the table holds 2^prof_slab_lg slots */
static size_t prof_slab_n;    /* records in it */

static size_t slab_home(uintptr_t a)
{
    return (size_t)(((uint64_t)(a >> LG_PAGE) * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - prof_slab_lg));
}

static void slab_put(uintptr_t a, const extent_prof_t *r)
{
    size_t mask = ((size_t)1 << prof_slab_lg) - 1, i = slab_home(a);
    while (prof_slab_tab[i].addr)
        i = (i + 1) & mask;
    prof_slab_tab[i] = (prof_slab_rec_t){ .addr = a, .rec = *r };
}

/* Room for one record more, the table grown if need be: false when the metadata ran out. */
static bool slab_room(void)
{
    size_t cap = prof_slab_tab ? (size_t)1 << prof_slab_lg : 0;
    if ((prof_slab_n + 1) * 4 <= cap * 3)
        return true;
    unsigned lg = cap ? prof_slab_lg + 1 : PROF_SLAB_LG_MIN;
    prof_slab_rec_t *t = meta_alloc(sizeof *t << lg), *old = prof_slab_tab;
    if (!t)
        return false;
    prof_slab_tab = t;
    prof_slab_lg = lg;
    for (size_t i = 0; i < cap; i++)
        if (old[i].addr)
            slab_put(old[i].addr, &old[i].rec);
    return true;
}

/* Take the record of block A out into *R: false when there is none. */
static bool slab_take(uintptr_t a, extent_prof_t *r)
{
    if (!prof_slab_tab)
        return false;
    size_t mask = ((size_t)1 << prof_slab_lg) - 1, i = slab_home(a);
    while (prof_slab_tab[i].addr != a) {
        if (!prof_slab_tab[i].addr)
            return false;
        i = (i + 1) & mask;
    }
    *r = prof_slab_tab[i].rec;
    prof_slab_n--;
    /* Each entry after the hole, up to the next empty slot, moves into it unless its home
     * lies cyclically in (hole, entry]: then it is where a search from its home finds it. */
    for (size_t j = (i + 1) & mask; prof_slab_tab[j].addr; j = (j + 1) & mask) {
        size_t h = slab_home(prof_slab_tab[j].addr);
        if (((j - h) & mask) >= ((j - i) & mask)) {
            prof_slab_tab[i] = prof_slab_tab[j];
            i = j;
        }
    }
    prof_slab_tab[i].addr = 0;
    return true;
}

TIDE_SAMPLE_PATH void prof_record_in_slab(void *p, extent_t *slab, const prof_bt_t *bt, size_t size, size_t psize)
{
    uintptr_t a = (uintptr_t)p;
    prof_stack_t *s = prof_stack_get(bt);
    uint64_t count_fx = record_weight(psize);
    prof_shard_t *sh = prof_my_shard();
    extent_prof_t r;
    lock_acquire(&sh->lock);
    lock_acquire(&prof_slab_lock);
    bool recorded = false;
    if (slab_room()) {
        recorded = record_in(sh, &r, s, bt, size, 0, count_fx);
        if (recorded) {
            slab_put(a, &r);
            prof_slab_n++;
            extent_mark_sampled(slab, a, true);
        }
    } else {
        sh->nfound[bt->how]++;
        sh->ndropped++;
    }
    lock_release(&prof_slab_lock);
    lock_release(&sh->lock);
    record_done(recorded);
}

TIDE_SAMPLE_PATH void prof_free_in_slab(void *p, extent_t *slab)
{
    uintptr_t a = (uintptr_t)p;
    extent_prof_t r;
    lock_acquire(&prof_slab_lock);
    bool found = slab_take(a, &r);
    if (found)
        extent_mark_sampled(slab, a, false);
    lock_release(&prof_slab_lock);
    if (found)
        lock_release(&unweigh(&r)->lock);
}

/* ---- realloc --------------------------------------------------------------------- */

TIDE_SAMPLE_PATH size_t prof_usable(const extent_t *e)
{
    return e->prof_rec.usable ? e->prof_rec.usable : extent_block_size(e);
}

extent_prof_t prof_detach(extent_t *e)
{
    extent_prof_t r = { 0 };
    if (e->prof)
        r = e->prof_rec;
    e->prof = 0;
    return r;
}

void prof_reattach(const extent_prof_t *rec, extent_t *e)
{
    if (rec->stack) {
        e->prof_rec = *rec;
        e->prof = 1;
    }
}

void prof_resized(const extent_prof_t *rec, extent_t *e, size_t old_size, size_t size, void *frame)
{
    if (rec->stack) {
        /* Sampled at its old size with probability p, it would have been sampled by now
         * with 1 - (1 - p) exp(-growth / R) (an unsampled block counts its growth, below):
         * that is its weight from now on.  A block that shrank keeps its p. */
        /* (In the shard that sampled it, which has counts of its stack.) */
        extent_prof_t r = *rec;
        prof_shard_t *sh = &prof_shards[r.shard];
        lock_acquire(&sh->lock);
        prof_counts_t *c = prof_counts(sh, r.stack);
        prof_weigh(sh, c, &r, false, false);
        if (size > r.size) {
            double p = (double)PROF_FX / (double)r.count_fx;
            p = 1 - (1 - p) * (1 - prof_one_minus_exp_neg((double)(size - r.size) / prof_set.rate));
            r.count_fx = prof_count_fx(1 / p);
        }
        r.size = size;
        r.usable = 0; /* a large block now */
        prof_weigh(sh, c, &r, true, false);
        e->prof_rec = r;
        e->prof = 1;
        lock_release(&sh->lock);
        return;
    }
    if (size > old_size && size - old_size <= TIDE_MAX_BLOCK && prof_count(size - old_size)) {
        prof_bt_t bt;
        prof_backtrace(&bt, frame);
        prof_record(e, &bt, size, 0, size);
    }
}

