/* SPDX-License-Identifier: MIT */
/* large.c - large blocks: allocation (overcommit admission, huge-page rounding, zeroing),
 * free (healing moved pieces first), and realloc: in place, else mremap move, else copy.
 *
 * VMA budget: a moved block made of k pieces (a piece per move it went through with
 * data in another VMA; after a failed heal, per VMA it covered when it moved, counted from
 * the maps) splits the range's VMA into at most k + 2 VMAs, so it costs
 * k + 1 extra.  The sum over live moved blocks is kept at or below 2 * remap_max, which
 * keeps tide's range within 1 + 2 * remap_max VMAs; a move that would exceed it copies.
 *
 * The bound holds at every moment, with any number of threads moving at once, because the
 * budget is a reservation: taken (check and update in one compare-and-swap) before the
 * mremap makes the new pieces, given back only after the heal that removes the old ones,
 * never for pieces whose heal failed.  A block that moves again thus reserves its new
 * pieces while its old ones still exist: it needs room for both, so with remap_max 1 a
 * moved block never moves again but copies.  remap_vmas follows the pieces themselves
 * (raised after each mremap, lowered after each heal) and must stay within the budget. */
#include "large.h"

#include <string.h>

#include "background.h"
#include "conf.h"
#include "guard.h"
#include "os.h"
#include "region.h"
#include "size_class_table.h"
#include "tcache.h"

static uint64_t remap_moves, remap_heals, remap_copies, remap_in_place; /* atomic */
static uint64_t remap_live;   /* moved blocks not yet healed (atomic) */
static uint64_t remap_budget; /* extra VMAs they cost (atomic) */
/* Extra VMAs that moved pieces really occupy now, by the same cost model: raised right
 * after a move, lowered right after a heal (atomic); and its high-water mark. */
static uint64_t remap_vmas, remap_vmas_peak;
/* A heal failed: pieces may lie in free space, where blocks are carved across them unseen
 * (atomic; never cleared). */
static bool remap_strays;

static void vmas_raise(uint64_t n)
{
    uint64_t now = ATOMIC_ADD(&remap_vmas, n) + n, peak = ATOMIC_LOAD(&remap_vmas_peak);
    while (now > peak && !__atomic_compare_exchange_n(&remap_vmas_peak, &peak, now, true, __ATOMIC_RELAXED,
                                                      __ATOMIC_RELAXED))
        ;
}

static uint64_t block_cost(const extent_t *e) { return e->moved_pieces ? e->moved_pieces + 1u : 0; }

/* Fresh pages over [ADDR, ADDR+LEN), with the range's name and advice: they merge back
 * into the range's VMA.  False when the kernel refused (near vm.max_map_count, say): the
 * old VMAs stay, nothing is lost but their budget. */
static bool heal(uintptr_t addr, size_t len)
{
    if (os_map_over(addr, len) != 0) {
        ATOMIC_STORE(&remap_strays, true); /* before the pages can be freed (page-heap lock) */
        return false;
    }
    os_name(addr, len, REGION_NAME);
    region_advise_fresh(addr, len);
    ATOMIC_ADD(&remap_heals, 1);
    return true;
}

/* Reserve COST more of the VMA budget; false when it would pass 2 x remap_max.  Several
 * threads reserve at once: the check and the update are one compare-and-swap. */
static bool budget_take(uint64_t cost)
{
    uint64_t limit = 2 * (uint64_t)ATOMIC_LOAD(&conf.remap_max);
    uint64_t cur = ATOMIC_LOAD(&remap_budget);
    do {
        if (cur + cost > limit)
            return false;
    } while (!__atomic_compare_exchange_n(&remap_budget, &cur, cur + cost, true, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED));
    return true;
}

/* Give back COST, only once the VMAs it paid for are gone (the release orders the lowering
 * of remap_vmas and remap_live before a later budget_take() that sees it). */
static void budget_put(uint64_t cost) { __atomic_fetch_sub(&remap_budget, cost, __ATOMIC_RELEASE); }

/* E no longer counts as moved; its VMA budget comes back only if HEALED. */
static void forget_move(extent_t *e, bool healed)
{
    ATOMIC_SUB(&remap_live, 1);
    if (healed) {
        ATOMIC_SUB(&remap_vmas, block_cost(e));
        budget_put(block_cost(e));
    }
    e->moved_len = 0;
    e->moved_pieces = 0;
}

/* In a fork child a fresh mapping never merges into the VMAs inherited from the parent, so
 * a heal would remove none of them: it is not tried there, and the pieces keep their budget
 * for good (a child never moves, so that budget holds nothing back). */
static bool can_heal(void) { return !region.inherited; }

static void heal_before_free(extent_t *e)
{
    if (e->moved_pieces)
        forget_move(e, can_heal() && heal(e->addr, e->moved_len));
}

static void *remap_move(extent_t *e, size_t npages)
{
    size_t old_bytes = extent_block_size(e);
    /* Pieces at the new place: the old moved pieces, plus one for the part that grew in
     * place after the last move (it sits in the range's VMA, with other offsets). */
    unsigned pieces = e->moved_pieces ? e->moved_pieces + (e->moved_len < old_bytes) : 1;
    if (ATOMIC_LOAD(&remap_strays)) {
        /* The block may cover pieces a failed heal left behind: each VMA under it becomes a
         * piece of its own at the new place.  Only this thread changes the VMAs inside it. */
        long v = os_count_vmas(e->addr, e->addr + old_bytes);
        if (v < 0)
            return NULL; /* unknown: copy */
        pieces = MAX(pieces, (unsigned)MIN(v, 251));
    }
    uint64_t cost = pieces + 1u, old_cost = block_cost(e);
    /* The old pieces stay in their VMAs until healed after the move: the new ones are
     * reserved on top of them, and the old cost comes back only after their heal. */
    if (pieces > 250 || !budget_take(cost))
        return NULL;
    extent_t *t = extent_alloc_move_target(npages, e->addr, false);
    if (!t)
        goto fail;
    if (os_move(e->addr, old_bytes, t->addr) != 0) {
        extent_free(t, tcache_large_hint());
        background_after_free();
        goto fail;
    }
    vmas_raise(cost);
    /* The kernel moves the name with the pages; naming the new place as it is made keeps
     * the pieces "tide" even where an old piece's name had failed. */
    os_name(t->addr, old_bytes, REGION_NAME);
    if (e->moved_pieces) {
        /* The emptied old pieces rejoin the range's VMA; if they cannot, they keep paying. */
        if (heal(e->addr, e->moved_len)) {
            ATOMIC_SUB(&remap_vmas, old_cost);
            budget_put(old_cost);
        }
    } else {
        ATOMIC_ADD(&remap_live, 1);
    }
    t->moved_len = old_bytes;
    t->moved_pieces = (uint8_t)pieces;
    e->moved_len = 0;
    e->moved_pieces = 0;
    extent_finish_move(e, t);
    ATOMIC_ADD(&remap_moves, 1);
    return (void *)t->addr;
fail:
    budget_put(cost);
    return NULL;
}

/* Copy large block E into a new block of USABLE bytes placed where it has room to keep
 * growing (as a move would be), and free E.  NULL when memory is exhausted. */
static void *relocate_by_copy(extent_t *e, size_t usable)
{
    extent_t *t = extent_alloc_move_target(usable >> LG_PAGE, 0, true);
    if (!t)
        return NULL;
    memcpy((void *)t->addr, (const void *)e->addr, extent_block_size(e));
    heal_before_free(e);
    guard_free_large(e, tcache_large_hint());
    background_after_free();
    ATOMIC_ADD(&remap_copies, 1);
    return (void *)t->addr;
}

void *large_alloc(size_t size, size_t align, bool zero)
{
    if (size > TIDE_MAX_BLOCK)
        return NULL;
    /* What glibc would map for it (the block and its alignment slack, before thp:on's own
     * rounding) goes to the kernel's overcommit policy, whether the block then comes from
     * free space or the range grows for it. */
    if (region_admit(ALIGN_UP(size, PAGE) + (align > PAGE ? align - PAGE : 0)) != 0)
        return NULL;
    if (ATOMIC_LOAD(&conf.thp) == THP_ON && size >= HUGEPAGE) {
        /* Whole aligned huge pages: the kernel faults them in whole anyway, and the
         * block can later be purged whole, leaving no fringe that would split one. */
        size = ALIGN_UP(size, HUGEPAGE);
        align = MAX(align, HUGEPAGE);
    }
    if (unlikely(guard_sampling()))
        guard_sample_charge(size);
    extent_t *e = extent_alloc_large(pages_of(size), align, tcache_large_hint());
    background_start();
    background_tick();
    if (!e)
        return NULL;
    if (zero && !e->zeroed)
        memset((void *)e->addr, 0, size);
    else if (!e->zeroed)
        /* The pages may have been a slab's: the mark of a region never handed out, left
         * in them, must not reach a small block through a realloc's copy. */
        ((void **)e->addr)[1] = NULL;
    return (void *)e->addr;
}

void large_free(extent_t *e)
{
    heal_before_free(e);
    guard_free_large(e, tcache_large_hint());
    background_after_free();
    background_tick();
}

void *large_realloc(extent_t *e, size_t usable)
{
    size_t npages = usable >> LG_PAGE, bp = extent_block_pages(e);
    if (npages < bp && e->moved_len > usable) {
        /* The cut-off tail must not stay behind in VMAs of its own: once cut off, nothing
         * would heal them, and the pieces there (up to all of the block's) would outlive
         * its budget.  If the heal fails the block still shrinks (free_sized() will be told
         * the new size), but no longer counts as moved: its pieces, in the tail as in the
         * block, keep their budget for good, as after any failed heal.  (In a fork child
         * the tail stays unhealed: the block's budget is never given back there, so it
         * keeps paying for them.) */
        if (can_heal() && !heal(e->addr + usable, e->moved_len - usable))
            forget_move(e, false);
        else
            e->moved_len = usable;
    }
    /* Growth is put to the kernel's overcommit policy as mremap's would be (it charges
     * the growth only), wherever the pages come from; refused, the caller's malloc of
     * the whole new size is refused too. */
    if (npages > bp && region_admit((npages - bp) << LG_PAGE) != 0)
        return NULL;
    bool shrink = npages < bp;
    if (extent_resize(e, npages)) {
        if (shrink)
            background_after_free(); /* the cut-off tail is dirty */
        ATOMIC_ADD(&remap_in_place, 1);
        return (void *)e->addr;
    }
    if (shrink || usable <= SC_CACHED_MAX)
        return NULL; /* the caller copies through malloc: the new block has a size class */
    /* In a fork child a heal could not merge back into the inherited VMA: copy there.  A
     * block with a guard page is copied too: its old place is then held as a guard, so a
     * use of the old pointer faults instead of reading the zeros a move leaves. */
    void *q = NULL;
    if (extent_block_size(e) >= (size_t)ATOMIC_LOAD(&conf.remap_threshold) && ATOMIC_LOAD(&conf.remap) &&
        !region.inherited && !e->guard && os_has_dontunmap())
        q = remap_move(e, npages);
    return q ? q : relocate_by_copy(e, usable);
}

void large_stats(large_stats_t *out)
{
    out->moves = ATOMIC_LOAD(&remap_moves);
    out->heals = ATOMIC_LOAD(&remap_heals);
    out->copies = ATOMIC_LOAD(&remap_copies);
    out->in_place = ATOMIC_LOAD(&remap_in_place);
    out->live = ATOMIC_LOAD(&remap_live);
    out->vmas = ATOMIC_LOAD(&remap_vmas);
    out->vmas_peak = ATOMIC_LOAD(&remap_vmas_peak);
}
