/* SPDX-License-Identifier: MIT */
/* extent_dirty.c - the page heap's dirty runs: handed to the purge engine and taken back,
 * and the free tail of the range given back to the kernel.
 *
 * Runs being purged are marked EXTENT_PURGING outside the lock (neither allocatable nor
 * mergeable) and counted as dirty until they are put back as lazy or clean. */
#include "extent.h"
#include "extent_internal.h"

#include "os.h"
#include "pagemap.h"
#include "region.h"
#include "report.h"

/* Extend purging run E over the rest of the 2 MiB unit its LEFT (or right) end falls in,
 * when a clean or lazy free neighbour holds all of that rest.  Otherwise the unit, free
 * but in pieces of two states, would never be purged whole, and the dirty piece would
 * keep the clean runs on either side from ever merging: under thp:on with decay_ms:0 the
 * soak grew tide's range to 4x its live bytes with gigabytes free in pieces of <= 33 MiB.
 * The pages taken are clean or lazy already: purging them again costs the kernel little.
 * Lock held. */
static void absorb_unit_rest(extent_t *e, bool left)
{
    uintptr_t edge = left ? e->addr : extent_end(e);
    uintptr_t unit_edge = left ? ALIGN_DOWN(edge, HUGEPAGE) : ALIGN_UP(edge, HUGEPAGE);
    if (unit_edge == edge)
        return;
    extent_t *n = extent_free_neighbour(e, left, EXTENT_NFREE);
    if (!n || n->state == EXTENT_DIRTY || (left ? n->addr > unit_edge : extent_end(n) < unit_edge))
        return;
    size_t k = (left ? edge - unit_edge : unit_edge - edge) >> LG_PAGE;
    unsigned state = n->state;
    extent_tree_remove(n);
    extent_clear_edges(n);
    /* N's first page goes inside E when E takes all of N, or its left part. */
    if (!left || k == n->npages) {
        extent_keep_freed_head(e, n);
        n->freed &= (uint8_t)~EXTENT_FREED_AT_START;
    }
    if (k == n->npages) {
        extent_desc_put(n);
    } else {
        n->npages -= k;
        if (!left)
            n->addr = unit_edge;
        extent_insert_free(n, state, n->stamp);
    }
    if (left)
        e->addr = unit_edge;
    e->npages += k;
    pageheap.npages[EXTENT_DIRTY] += k; /* purging pages count as dirty */
    extent_set_free_edges(e);
}

/* Cut the last NPAGES pages off dirty run E, the oldest, as a run of their own in no
 * tree; E keeps the rest (and the freed heads inside it name E, as carve() leaves them).
 * NULL when no descriptor can be had.  Lock held. */
static extent_t *split_tail(extent_t *e, size_t npages)
{
    if (extent_desc_reserve(1) != 0)
        return NULL;
    extent_tree_remove(e);
    extent_clear_edges(e);
    extent_t *x = extent_desc_get();
    e->npages -= npages;
    x->addr = extent_end(e);
    x->npages = npages;
    x->range = e->range;
    x->state = EXTENT_DIRTY;
    x->stamp = e->stamp;
    x->freed = e->freed & EXTENT_FREED_INSIDE;
    extent_set_free_edges(e);
    extent_tree_insert(e);
    /* E was the oldest: back to the front of the age order. */
    list_remove(&e->lru);
    list_insert_after(&pageheap.dirty_lru, &e->lru);
    extent_set_free_edges(x);
    return x;
}

size_t extent_take_dirty(uint64_t older_than, bool whole_units, extent_t **out, size_t max, size_t max_pages,
                         bool exact)
{
    size_t n = 0, pages = 0;
    while (n < max && pages < max_pages) {
        list_node_t *l = list_first(&pageheap.dirty_lru);
        if (!l)
            break;
        extent_t *e = container_of(l, extent_t, lru);
        if (e->stamp > older_than)
            break;
        /* A run that ends the range is purged whole, however little of it is due: the
         * part a cut would keep would pin the address space below it, which the trim
         * gives back only from a clean end (a freed giant block's first pages kept 640
         * MiB of its range mapped). */
        bool ends_range = extent_end(e) == region.ranges[e->range].end;
        if (exact && !whole_units && !ends_range && e->npages > max_pages - pages) {
            /* The high end: allocation takes the lowest address first, so the part kept
             * is the part wanted first. */
            e = split_tail(e, max_pages - pages);
            if (!e)
                break;
        } else {
            extent_tree_remove(e);
        }
        e->state = EXTENT_PURGING;
        pageheap.npages[EXTENT_DIRTY] += e->npages; /* still dirty until purged */
        if (whole_units) {
            absorb_unit_rest(e, true);
            absorb_unit_rest(e, false);
        }
        pages += e->npages;
        out[n++] = e;
    }
    return n;
}

void extent_put_purged(extent_t **ext, size_t n, extent_state_t state)
{
    for (size_t i = 0; i < n; i++) {
        extent_t *e = ext[i];
        TIDE_ASSERT(e->state == EXTENT_PURGING);
        pageheap.npages[EXTENT_DIRTY] -= e->npages;
        /* Purged, the pages may become slabs again (the freed heads' entries stay). */
        if (state != EXTENT_DIRTY) {
            e->freed &= (uint8_t)~EXTENT_FREED_INSIDE;
            extent_units_purged(e->range, e->addr, e->npages); /* huge pages split */
        }
        extent_insert_free(e, state, state == EXTENT_DIRTY ? os_now_ns() : 0);
    }
}

void extent_put_purged_span(extent_t *e, uintptr_t lo, uintptr_t hi, extent_state_t state)
{
    pageheap.npages[EXTENT_DIRTY] -= e->npages;
    if (extent_desc_reserve(2) != 0) {
        extent_insert_free(e, EXTENT_DIRTY, os_now_ns());
        return;
    }
    /* The fringes stay dirty, with a fresh stamp so this pass does not take them again. */
    uint64_t now = os_now_ns();
    uintptr_t start = e->addr, end = extent_end(e);
    e->addr = lo;
    e->npages = (hi - lo) >> LG_PAGE;
    if (hi < end)
        extent_add_free_run(hi, (end - hi) >> LG_PAGE, e->range, EXTENT_DIRTY, now);
    if (lo > start)
        extent_add_free_run(start, (lo - start) >> LG_PAGE, e->range, EXTENT_DIRTY, now);
    /* Purged, the pages may become slabs again; a head at START now begins the fringe
     * (whose edge tells a second free), and LO is no head. */
    e->freed = lo > start ? 0 : e->freed & EXTENT_FREED_AT_START;
    extent_units_purged(e->range, e->addr, e->npages);
    extent_insert_free(e, state, 0);
}

uint64_t extent_oldest_dirty(void)
{
    list_node_t *l = list_first(&pageheap.dirty_lru);
    return l ? container_of(l, extent_t, lru)->stamp : 0;
}

/* Whether E is free and purged: nothing of it waits for the decay policy. */
static bool purged_free(const extent_t *e) { return e->state == EXTENT_CLEAN || e->state == EXTENT_LAZY; }

/* The free, purged runs that end the last range (clean and lazy ones side by side), when
 * region_trim_point() wants part of them back: returns the run that holds the cut and sets
 * *CUT, else NULL.  Lock held. */
static extent_t *trim_candidate(bool forget, uintptr_t *cut)
{
    unsigned i = region.nranges - 1;
    const range_t *r = &region.ranges[i];
    if (r->end - r->base < REGION_TRIM_MIN)
        return NULL;
    /* Every extent writes the entry of its last page: this one is never stale. */
    pm_entry_t entry = pm_read(r, r->end - PAGE);
    extent_t *last = pm_desc(entry), *first = last;
    if (!pm_is_free_edge(entry) || last->range != i || extent_end(last) != r->end || !purged_free(last))
        return NULL;
    for (int runs = 1; runs < SPAN_MAX_RUNS; runs++) {
        extent_t *n = extent_free_neighbour(first, true, EXTENT_NFREE);
        if (!n || !purged_free(n))
            break;
        first = n;
    }
    *cut = region_trim_point(i, first->addr, pageheap.npages_active << LG_PAGE, forget);
    if (!*cut)
        return NULL;
    extent_t *c = first;
    while (extent_end(c) <= *cut)
        c = extent_free_neighbour(c, false, EXTENT_NFREE);
    return c;
}

/* Cut free run T, the tail of the range, at CUT and unmap the range from there.  Its pages
 * beyond CUT must hold nothing resident (a clean run).  Lock held. */
static void trim_clean(extent_t *t, uintptr_t cut)
{
    extent_tree_remove(t);
    if (region_shrink(t->range, cut) != 0) {
        extent_tree_insert(t);
        return;
    }
    extent_clear_edges(t);
    if (cut == t->addr) {
        extent_desc_put(t);
        return;
    }
    t->npages = (cut - t->addr) >> LG_PAGE;
    extent_set_free_edges(t);
    extent_tree_insert(t);
}

void extent_trim_tail(bool forget)
{
    if (ATOMIC_LOAD(&region.heap_mapped) < REGION_TRIM_MIN)
        return;
    lock_acquire(&pageheap.lock);
    uintptr_t cut;
    extent_t *t = extent_desc_reserve(1) == 0 ? trim_candidate(forget, &cut) : NULL;
    if (t && t->state == EXTENT_CLEAN && extent_end(t) == region.ranges[t->range].end) {
        /* Nothing resident: munmap only frees page tables (tens of microseconds a GiB). */
        trim_clean(t, cut);
        t = NULL;
    }
    if (!t) {
        lock_release(&pageheap.lock);
        return;
    }
    /* Lazy pages beyond the cut may still be resident, and unmapping frees them: about
     * 0.3 s a GiB here, too long to hold the lock.  The runs from T to the end become one
     * (lazy: the least clean state), and the part beyond the cut is purged outside the
     * lock as a purge pass would (marked purging: neither allocatable nor mergeable
     * meanwhile), then cut if it still ends the range (the range may have grown past it). */
    unsigned range = t->range;
    t = extent_merge_span(t, pm_desc(pm_read(&region.ranges[range], region.ranges[range].end - PAGE)));
    extent_tree_remove(t);
    extent_clear_edges(t);
    extent_t *x = extent_desc_get();
    x->addr = cut;
    x->npages = (extent_end(t) - cut) >> LG_PAGE;
    x->range = (uint8_t)range;
    x->state = EXTENT_PURGING;
    t->npages -= x->npages;
    if (t->npages) {
        extent_set_free_edges(t);
        extent_tree_insert(t);
    } else {
        extent_desc_put(t);
    }
    extent_set_free_edges(x);
    pageheap.npages[EXTENT_DIRTY] += x->npages; /* purging pages count as dirty */
    lock_release(&pageheap.lock);

    int err = os_purge(x->addr, extent_size(x), OS_ADV_DONTNEED);

    lock_acquire(&pageheap.lock);
    pageheap.npages[EXTENT_DIRTY] -= x->npages;
    /* It may merge with a clean run before it: X still holds CUT and the end. */
    extent_insert_free(x, err ? EXTENT_LAZY : EXTENT_CLEAN, 0);
    if (!err && extent_end(x) == region.ranges[range].end)
        trim_clean(x, cut);
    lock_release(&pageheap.lock);
}
