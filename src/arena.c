/* SPDX-License-Identifier: MIT */
/* arena.c - slabs of small regions, refilled into thread caches and returned from them. */
#include "arena.h"

#include <errno.h>
#include <string.h>

#include "conf.h"
#include "freelist.h"
#include "meta.h"
#include "os.h"
#include "pagemap.h"
#include "report.h"
#include "size_class.h"

/* How many empty slabs the bins keep at hand: a bin up to 1 MiB of them, an arena up to
 * 4 MiB over all its bins; the purge path gives back what stays unused for decay_ms.
 * bench/powers frees 1000 blocks of 1024 B a round: what the thread cache (128 of them)
 * and the transfer cache (up to 1 MiB, less when other classes fill the arena's 2 MiB)
 * do not take empties up to 218 one-page slabs (872 KiB), wanted again a moment later. */
#define KEEP_BIN_PAGES (MiB >> LG_PAGE)
#define KEEP_ARENA_PAGES ((4 * MiB) >> LG_PAGE)
/* What a refill faults in at once, at most, when it cuts slabs from pages not yet
 * resident (slab_batch): a fault costs a trap, which a call to fault many saves (about
 * half the cost of a page on this kernel: bench/results/2026-12-08-slab-batch.md). */
#define PREFAULT_BYTES (32 * KiB)
#define SLAB_BATCH_MAX (PREFAULT_BYTES >> LG_PAGE)

arena_t **arenas;
unsigned narenas;

static int slab_cmp(const rb_node_t *a, const rb_node_t *b)
{
    const extent_t *x = container_of(a, extent_t, rb), *y = container_of(b, extent_t, rb);
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int arenas_init(unsigned n)
{
    arenas = meta_alloc(n * sizeof(arena_t *));
    if (!arenas)
        return ENOMEM;
    for (unsigned i = 0; i < n; i++) {
        arena_t *a = meta_alloc(sizeof(arena_t));
        if (!a)
            return ENOMEM;
        a->ind = i;
        for (unsigned c = 0; c < SC_NSMALL; c++) {
            lock_init_nth(&a->bins[c].lock, LOCK_RANK_BIN, i); /* by arena, then address */
            list_init(&a->bins[c].empty);
        }
        arenas[i] = a;
    }
    narenas = n;
    return 0;
}


/* SLAB, on BIN's list of empty slabs, is about to be used: off the list.  Bin lock held. */
static void unkeep(arena_t *a, bin_t *bin, extent_t *slab)
{
    list_remove(&slab->lru);
    ATOMIC_STORE(&bin->nempty, bin->nempty - 1);
    ATOMIC_SUB(&a->empty_pages, slab->npages);
}

/* SLAB, empty, on BIN's list of empty slabs from *NOW (the clock, read once per caller).
 * Bin lock held. */
static void keep(arena_t *a, bin_t *bin, extent_t *slab, uint64_t *now)
{
    if (!*now)
        *now = os_now_ns();
    slab->stamp = *now;
    list_push_back(&bin->empty, &slab->lru);
    ATOMIC_STORE(&bin->nempty, bin->nempty + 1);
    ATOMIC_ADD(&a->empty_pages, slab->npages);
}

/* Whether SLAB, just emptied, stays in BIN (on its list of empty slabs) rather than go
 * back to the page heap: always when it is the bin's only non-full slab (a bin that
 * empties and refills one slab must not cut it anew each time), else within the bounds,
 * and never under decay_ms 0, where every free purges at once.  *NOW: the clock, read
 * once per caller.  Bin lock held. */
static bool keep_empty(arena_t *a, bin_t *bin, extent_t *slab, uint64_t *now)
{
    const rb_node_t *root = bin->nonfull.node;
    if (root->left || root->right) {
        if (ATOMIC_LOAD(&conf.decay_ms) == 0 || (bin->nempty + 1) * slab->npages > KEEP_BIN_PAGES ||
            ATOMIC_LOAD(&a->empty_pages) + slab->npages > KEEP_ARENA_PAGES)
            return false;
    }
    keep(a, bin, slab, now);
    return true;
}

/* How many slabs a refill that needs one cuts at once from pages not yet resident
 * (extent_alloc_slabs): up to a quarter as many as BIN has, and PREFAULT_BYTES of them, so
 * that a bin that grows faults its pages in a few calls, and one that holds a slab or two
 * (most bins of a small program) cuts only what it needs.  None ahead under decay_ms 0. */
static unsigned slab_batch(const bin_t *bin, unsigned cls)
{
    if (ATOMIC_LOAD(&conf.decay_ms) == 0)
        return 1;
    size_t most = MAX((size_t)1, (PREFAULT_BYTES >> LG_PAGE) / sc_slab_pages[cls]);
    return (unsigned)MIN(MAX(bin->nslabs / 4, (size_t)1), MIN(most, (size_t)SLAB_BATCH_MAX));
}

unsigned arena_fill(unsigned ai, unsigned cls, void **head, unsigned n)
{
    arena_t *a = arenas[ai];
    TIDE_ASSERT(ATOMIC_LOAD(&a->joined)); /* (else fork would not take its bins) */
    bin_t *bin = &a->bins[cls];
    size_t size = sc_size[cls];
    void *first = NULL, **last = NULL;
    unsigned got = 0;
    lock_acquire_gated(&bin->lock);
    while (got < n) {
        rb_node_t *node = rb_first(&bin->nonfull);
        extent_t *slab;
        if (node) {
            slab = container_of(node, extent_t, rb);
            if (!list_empty(&slab->lru))
                unkeep(arenas[ai], bin, slab);
        } else {
            extent_t *made[SLAB_BATCH_MAX];
            unsigned nmade = extent_alloc_slabs(cls, ai, slab_batch(bin, cls), made);
            if (!nmade)
                break;
            uint64_t now = 0;
            for (unsigned k = 0; k < nmade; k++) {
                slab = made[k];
                /* Every region free in its slab holds the slab mark, which the refill
                 * checks (freelist.h).  (A kept slab taken again has it: a return writes
                 * it.) */
                for (unsigned i = 0; i < sc_nregs[cls]; i++)
                    ((void **)(slab->addr + i * size))[1] = (void *)freelist_slab_mark;
                list_init(&slab->lru); /* on no list of empty slabs */
                bin->nslabs++;
                a->counts[cls].nslabs_made++;
                bin->nquar += slab->nquar;
                rb_insert(&bin->nonfull, &slab->rb, slab_cmp);
                /* The ones cut ahead wait as empty slabs kept: given back unless used
                 * within decay_ms, as those are. */
                if (k > 0)
                    keep(a, bin, slab, &now);
            }
            slab = made[0];
        }
        TIDE_ASSERT(slab->nfree > 0 && slab->nfree <= sc_nregs[cls]);
        unsigned taken = 0;
        for (unsigned w = 0; w < SC_MAX_NREGS / 64 && got + taken < n; w++) {
            uint64_t bits = slab->bitmap[w];
            while (bits && got + taken < n) {
                unsigned b = (unsigned)__builtin_ctzll(bits);
                bits &= bits - 1;
                void **obj = (void **)(slab->addr + (w * 64 + b) * size);
                /* Free in its slab, it holds the slab mark: a free since (a double free of
                 * a block back in its slab, or of one never handed out) wrote the key over
                 * it, and the block is on a list already; a malloc cleared it. */
                if (unlikely(obj[1] != (void *)freelist_slab_mark)) {
                    lock_release(&bin->lock);
                    report_double_free_found("malloc", obj, "freed twice, or never allocated");
                }
                obj[1] = fl_key(obj);
                if (last)
                    fl_set_next(last, obj);
                else
                    first = obj;
                last = obj;
                taken++;
            }
            slab->bitmap[w] = bits;
        }
        slab->nfree = (uint16_t)(slab->nfree - taken);
        got += taken;
        if (slab->nfree == 0)
            rb_erase(&slab->rb, &bin->nonfull);
    }
    bin->nregs_live += got;
    a->counts[cls].nmalloc += got;
    a->counts[cls].nfills += got != 0;
    lock_release(&bin->lock);
    if (last)
        fl_set_next(last, NULL);
    *head = first;
    return got;
}

static extent_t *slab_of(uintptr_t p, unsigned cls, const char *caller)
{
    const range_t *r = region_range_of(p);
    if (r) {
        pm_entry_t entry = pm_read(r, p);
        extent_t *e = pm_desc(entry);
        if (pm_any_slab_class(entry) == cls && e->state == EXTENT_SLAB)
            return e;
    }
    report_invalid_pointer(caller, (void *)p);
}

/* Index of region P in SLAB, or abort when P is not the start of a region. */
static unsigned region_index(const extent_t *slab, uintptr_t p, const char *caller)
{
    unsigned cls = slab->cls;
    uintptr_t off = p - slab->addr;
    unsigned idx = (unsigned)((off * sc_div_magic[cls]) >> 32);
    if (unlikely((uintptr_t)idx * sc_size[cls] != off || idx >= sc_nregs[cls]))
        report_invalid_pointer(caller, (void *)p);
    return idx;
}

bool arena_region_is_free(extent_t *slab, uintptr_t p)
{
    bin_t *bin = &arenas[slab->arena]->bins[slab->cls];
    unsigned idx = region_index(slab, p, "free");
    lock_acquire_gated(&bin->lock);
    bool is_free = (slab->bitmap[idx >> 6] >> (idx & 63)) & 1;
    lock_release(&bin->lock);
    return is_free;
}

/* SLAB, empty and out of its bin, is about to go back to the page heap (CALLER: the call
 * that gives it back).  Each region it would hand out holds the slab mark, free in its
 * slab, unless it was freed again since it came back (the free stored the key over the
 * mark: it is on a list too, which would hand out memory the page heap owns, and the same
 * slot a second time once a slab or a block is cut there) or written after its free.
 * This is the last place that reads the slab as a slab, and after it nothing would: the
 * refill's check of the mark (arena_fill) never comes.  The pages are resident (a slab is
 * never purged), and a return has just written one of them. */
static void check_leaving(const extent_t *slab, const char *caller)
{
    size_t size = sc_size[slab->cls];
    for (unsigned w = 0; w < SC_MAX_NREGS / 64; w++) {
        for (uint64_t bits = slab->bitmap[w]; bits; bits &= bits - 1) {
            void *const *obj = (void *const *)(slab->addr + (w * 64 + (unsigned)__builtin_ctzll(bits)) * size);
            if (unlikely(obj[1] != (void *)freelist_slab_mark))
                report_double_free_found(caller, obj, "freed twice, or never allocated");
        }
    }
}

/* Give back N (at most 256) objects of CLS whose slabs are SLABS[i]: how many slabs
 * they emptied (kept in their bins or given back).  Each gets the slab mark. */
static unsigned return_to_slabs(void **objs, extent_t **slabs, unsigned n, unsigned cls, const char *caller);

unsigned arena_return(void **objs, unsigned n, unsigned cls, const char *caller)
{
    extent_t *slabs[256];
    unsigned emptied = 0;
    while (n > 0) {
        unsigned batch = MIN(n, 256u);
        for (unsigned i = 0; i < batch; i++)
            slabs[i] = slab_of((uintptr_t)objs[i], cls, caller);
        emptied += return_to_slabs(objs, slabs, batch, cls, caller);
        objs += batch;
        n -= batch;
    }
    return emptied;
}

static unsigned return_to_slabs(void **objs, extent_t **slabs, unsigned batch, unsigned cls, const char *caller)
{
    extent_t *give[256];
    unsigned ngive = 0, emptied = 0;
    uint64_t now = 0;
    /* One lock round per arena met in the batch: the first object's arena, the objects of
     * other arenas are kept for the next round. */
    unsigned left = batch;
    while (left > 0) {
        unsigned ai = slabs[0]->arena, keep = 0;
        arena_t *a = arenas[ai];
        bin_t *bin = &a->bins[cls];
        lock_acquire_gated(&bin->lock);
        for (unsigned i = 0; i < left; i++) {
            extent_t *slab = slabs[i];
            uintptr_t p = (uintptr_t)objs[i];
            if (slab->arena != ai) {
                slabs[keep] = slab;
                objs[keep++] = (void *)p;
                continue;
            }
            unsigned idx = region_index(slab, p, caller);
            uint64_t bit = (uint64_t)1 << (idx & 63);
            if (unlikely(slab->bitmap[idx >> 6] & bit)) {
                lock_release(&bin->lock);
                report_double_free(caller, (void *)p);
            }
            ((void **)p)[1] = (void *)freelist_slab_mark;
            slab->bitmap[idx >> 6] |= bit;
            slab->nfree++;
            TIDE_ASSERT(slab->nfree <= sc_nregs[cls]);
            if (slab->nfree == 1) {
                rb_insert(&bin->nonfull, &slab->rb, slab_cmp);
            } else if (slab->nfree == sc_nregs[cls] - slab->nquar) {
                emptied++;
                if (!keep_empty(a, bin, slab, &now)) {
                    rb_erase(&slab->rb, &bin->nonfull);
                    bin->nslabs--;
                    bin->nquar -= slab->nquar;
                    give[ngive++] = slab;
                }
            }
        }
        bin->nregs_live -= left - keep;
        a->counts[cls].nfree += left - keep;
        a->counts[cls].nflushes++;
        lock_release(&bin->lock);
        for (unsigned i = 0; i < ngive; i++) {
            check_leaving(give[i], caller);
            extent_free(give[i], NULL);
        }
        ngive = 0;
        left = keep;
    }
    return emptied;
}

unsigned arena_return_list(void *head, unsigned count, unsigned cls, const char *caller)
{
    void *objs[256];
    extent_t *slabs[256];
    unsigned n = 0, emptied = 0;
    void **p = head;
    extent_t *slab = p ? slab_of((uintptr_t)p, cls, caller) : NULL;
    while (p) {
        /* The walk is bounded by the count: a list made to loop ends too. */
        if (count-- == 0)
            freelist_corrupt(caller, p, p, cls);
        /* A listed object without its key was handed out meanwhile (it was on two lists:
         * its link may lead into the other one), or written after its free: found before
         * the link is followed. */
        if (unlikely(p[1] != fl_key(p)))
            freelist_lost_key(caller, p);
        /* Each link is checked as it is followed, by the page-map read that finds its slab. */
        void **next = fl_next(p);
        extent_t *next_slab = NULL;
        if (next && !(next_slab = fl_block_of(next, cls)))
            freelist_corrupt(caller, p, next, cls);
        objs[n] = p;
        slabs[n++] = slab;
        p = next;
        slab = next_slab;
        if (n == ARRAY_SIZE(objs) || !p) {
            emptied += return_to_slabs(objs, slabs, n, cls, caller);
            n = 0;
        }
    }
    return emptied;
}

void arena_release_empty(uint64_t older_than)
{
    for (unsigned i = 0; i < narenas; i++) {
        arena_t *a = arenas[i];
        for (unsigned c = 0; c < SC_NSMALL && ATOMIC_LOAD(&a->empty_pages) != 0; c++) {
            bin_t *bin = &a->bins[c];
            for (bool more = ATOMIC_LOAD(&bin->nempty) != 0; more;) {
                extent_t *batch[64];
                unsigned n = 0;
                lock_acquire_gated(&bin->lock);
                for (list_node_t *l; n < ARRAY_SIZE(batch) && (l = list_first(&bin->empty)) != NULL;) {
                    extent_t *slab = container_of(l, extent_t, lru);
                    if (slab->stamp > older_than)
                        break;
                    unkeep(a, bin, slab);
                    rb_erase(&slab->rb, &bin->nonfull);
                    bin->nslabs--;
                    bin->nquar -= slab->nquar;
                    batch[n++] = slab;
                }
                lock_release(&bin->lock);
                /* (In free's name, as the drain of the transfer caches that comes next.) */
                for (unsigned k = 0; k < n; k++)
                    check_leaving(batch[k], "free");
                extent_free_aged(batch, n);
                more = n == ARRAY_SIZE(batch);
            }
        }
    }
}

bool arena_holds_empty(void)
{
    for (unsigned i = 0; i < narenas; i++)
        if (ATOMIC_LOAD(&arenas[i]->empty_pages) != 0)
            return true;
    return false;
}

void arena_join(unsigned arena) { ATOMIC_STORE_REL(&arenas[arena]->joined, true); }

/* fork: the bins' locks are gated (lock.h), so that the parent writes none of their pages
 * after the fork (the first write to each would copy it: a page fault, tens of
 * microseconds on a guest).  The bins of an arena no thread has joined are not even
 * passed: a thread that joins one now waits for ready_lock, which the handlers took
 * first, and the only other takers of those locks (statistics, the heap check) change
 * nothing under them (the child's reset frees any such lock it inherited held). */
void arenas_locks(lock_op_t op)
{
    for (unsigned i = 0; i < narenas; i++)
        for (unsigned c = 0; c < SC_NSMALL && (op == LOCK_OP_RESET || ATOMIC_LOAD_ACQ(&arenas[i]->joined)); c++)
            lock_apply_gated(&arenas[i]->bins[c].lock, op);
}

void arenas_lock_all(void)
{
    for (unsigned i = 0; i < narenas; i++)
        for (unsigned c = 0; c < SC_NSMALL; c++)
            lock_acquire_gated(&arenas[i]->bins[c].lock);
}

void arenas_unlock_all(void)
{
    for (unsigned i = 0; i < narenas; i++)
        for (unsigned c = 0; c < SC_NSMALL; c++)
            lock_release(&arenas[i]->bins[c].lock);
}

void arenas_stats(arena_stats_t *out)
{
    memset(out, 0, sizeof *out);
    for (unsigned i = 0; i < narenas; i++) {
        for (unsigned c = 0; c < SC_NSMALL; c++) {
            bin_t *bin = &arenas[i]->bins[c];
            lock_acquire_gated(&bin->lock);
            out->allocated += bin->nregs_live * sc_size[c];
            out->nslabs += bin->nslabs;
            out->nslabs_made += arenas[i]->counts[c].nslabs_made;
            out->nslabs_empty += bin->nempty;
            lock_release(&bin->lock);
        }
    }
}

void arenas_bin_stats(unsigned ai, bin_stats_t out[SC_NSMALL])
{
    memset(out, 0, SC_NSMALL * sizeof *out);
    for (unsigned i = ai == ARENA_ALL ? 0 : ai; i < narenas && (ai == ARENA_ALL || i == ai); i++) {
        for (unsigned c = 0; c < SC_NSMALL; c++) {
            bin_t *bin = &arenas[i]->bins[c];
            bin_stats_t *o = &out[c];
            lock_acquire_gated(&bin->lock);
            const bin_counts_t *k = &arenas[i]->counts[c];
            o->nmalloc += k->nmalloc;
            o->nfree += k->nfree;
            o->nfills += k->nfills;
            o->nflushes += k->nflushes;
            o->live += bin->nregs_live;
            o->nfree_regs += bin->nslabs * sc_nregs[c] - bin->nregs_live - bin->nquar;
            o->nslabs += bin->nslabs;
            o->nslabs_made += k->nslabs_made;
            o->nslabs_empty += bin->nempty;
            lock_release(&bin->lock);
        }
    }
}
