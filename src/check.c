/* SPDX-License-Identifier: MIT */
/* check.c - heap consistency walk.
 *
 * With every lock held, walk each range from base to end through the page map and check
 * that extents tile it exactly, that every page-map entry the fast path may read is
 * right, that free runs are coalesced and counted, that slab bitmaps agree with their
 * counts, that the empty slabs the bins keep are empty slabs of their bin, that only large
 * blocks of cached classes carry the mark of a block in a thread cache, and that the
 * statistics reconcile. */
#include "check.h"

#include <errno.h>

#include "arena.h"
#include "extent.h"
#include "pagemap.h"
#include "region.h"
#include "report.h"
#include "size_class_table.h"

static int check_fail(const char *what, uintptr_t addr)
{
    char hex[24];
    const char *pieces[] = { "heap check: ", what, " at ", report_fmt_u64(hex, addr, 1) };
    report_line(pieces, ARRAY_SIZE(pieces));
    return EINVAL;
}

static int walk_range(const range_t *r, size_t npages[EXTENT_NFREE], size_t *active, size_t *slab, size_t *meta,
                      size_t *guards, size_t *held)
{
    unsigned prev_free_state = ~0u;
    uintptr_t a = r->base, end = ATOMIC_LOAD(&r->end);
    while (a < end) {
        pm_entry_t entry = pm_read(r, a);
        size_t n;
        if (pm_is_reserved(entry)) {
            n = pm_reserved_pages(entry);
            if (n == 0 || pm_read(r, a + ((n - 1) << LG_PAGE)) != entry)
                return check_fail("reserved pages with bad entries", a);
            *meta += n;
            prev_free_state = ~0u;
        } else {
            extent_t *e = pm_desc(entry);
            if (!e || e->addr != a || e->npages == 0)
                return check_fail("no extent starts where the previous one ended", a);
            n = e->npages;
            if (extent_end(e) > end)
                return check_fail("extent runs past the end of its range", a);
            /* Only a large block of a cached class is ever in a thread cache. */
            if (ATOMIC_LOAD(&e->cached) && (e->state != EXTENT_LARGE || e->cls >= SC_NCACHED))
                return check_fail("cached mark on an extent no cache holds", a);
            if (e->state < EXTENT_NFREE || e->state == EXTENT_PURGING) {
                if (entry != pm_free_edge(e) || pm_read(r, extent_end(e) - PAGE) != pm_free_edge(e))
                    return check_fail("free run with bad boundary entries", a);
                /* Two runs being purged may meet (each took the rest of a 2 MiB unit from
                 * the clean run between them): they merge when they are put back. */
                if (e->state == prev_free_state && e->state != EXTENT_PURGING)
                    return check_fail("two adjacent free runs in the same state", a);
                npages[e->state == EXTENT_PURGING ? EXTENT_DIRTY : e->state] += n;
                prev_free_state = e->state;
            } else if (e->state == EXTENT_SLAB) {
                if (e->cls >= SC_NSMALL || e->guard > 1 || n != sc_slab_pages[e->cls] + e->guard)
                    return check_fail("slab of a bad class or size", a);
                unsigned nquar = 0;
                for (size_t i = 0; i < n - e->guard; i++) {
                    pm_entry_t want = pm_slab_page(e, e->cls, i), got = pm_read(r, a + (i << LG_PAGE));
                    size_t off = i << LG_PAGE;
                    /* (A page of a class of a page or more may be marked: its block sampled.
                     * A page where a freed large block started, and a region starts, is
                     * stale: that region is never handed out, its bit clear.) */
                    if (got == pm_stale_page(want) && off % sc_size[e->cls] == 0 && pm_was_head(r, a + off) &&
                        !(e->bitmap[(off / sc_size[e->cls]) >> 6] >> ((off / sc_size[e->cls]) & 63) & 1)) {
                        nquar++;
                        continue;
                    }
                    if (got != want && !(sc_size[e->cls] >= PAGE && got == pm_sampled_page(want)))
                        return check_fail("slab page with a bad entry", a + (i << LG_PAGE));
                }
                if (nquar != e->nquar)
                    return check_fail("slab's stale pages disagree with its count of regions never handed out", a);
                if (e->guard && pm_read(r, extent_end(e) - PAGE) != pm_guard(e))
                    return check_fail("slab guard page with a bad entry", extent_end(e) - PAGE);
                *guards += e->guard;
                unsigned nfree = 0;
                for (unsigned w = 0; w < SC_MAX_NREGS / 64; w++)
                    nfree += (unsigned)__builtin_popcountll(e->bitmap[w]);
                if (nfree != e->nfree || nfree > sc_nregs[e->cls])
                    return check_fail("slab bitmap disagrees with its free count", a);
                *active += n;
                *slab += n;
                prev_free_state = ~0u;
            } else if (e->state == EXTENT_LARGE) {
                size_t bp = extent_block_pages(e);
                if (bp == 0 || entry != pm_large_head(e, e->cls) ||
                    (bp > 1 && pm_read(r, a + ((bp - 1) << LG_PAGE)) != pm_large_tail(e)) ||
                    (e->guard && (pm_read(r, extent_guard_page(e)) != pm_guard(e) ||
                                  pm_read(r, extent_end(e) - PAGE) != pm_guard(e))))
                    return check_fail("large block with bad boundary entries", a);
                for (size_t i = 1; i + 1 < bp; i++) {
                    if (pm_class(pm_read(r, a + (i << LG_PAGE))) != PM_NO_CLASS)
                        return check_fail("class tag inside a large block", a + (i << LG_PAGE));
                }
                *active += n;
                *guards += e->guard;
                prev_free_state = ~0u;
            } else if (e->state == EXTENT_HELD) {
                for (size_t i = 0; i < n; i++)
                    if (pm_read(r, a + (i << LG_PAGE)) != pm_guard(e))
                        return check_fail("held block with a bad entry", a + (i << LG_PAGE));
                *held += n;
                prev_free_state = ~0u;
            } else {
                return check_fail("extent in an unknown state", a);
            }
        }
        a += n << LG_PAGE;
    }
    return a == end ? 0 : check_fail("extents overrun the range", a);
}

/* Every slab on a bin's list of empty slabs is a live, empty slab of that bin (the page
 * map leads to it: the range walk checked it), and the counts agree.  Bin locks and the
 * page-heap lock held. */
static int check_kept_slabs(void)
{
    for (unsigned i = 0; i < narenas; i++) {
        size_t pages = 0;
        for (unsigned c = 0; c < SC_NSMALL; c++) {
            const bin_t *bin = &arenas[i]->bins[c];
            size_t n = 0;
            for (const list_node_t *l = bin->empty.next; l != &bin->empty; l = l->next, n++) {
                const extent_t *slab = container_of(l, extent_t, lru);
                /* (Bounded: a list that loops is caught here, not walked for ever.) */
                if (n >= bin->nslabs)
                    return check_fail("a bin's list of kept slabs is longer than its slabs", n);
                if (slab->state != EXTENT_SLAB || slab->cls != c || slab->arena != i ||
                    slab->nfree != sc_nregs[c] - slab->nquar ||
                    pm_any_slab_class(pm_read(extent_range(slab), slab->addr)) != c ||
                    pm_desc(pm_read(extent_range(slab), slab->addr)) != slab)
                    return check_fail("a kept slab that is not an empty slab of its bin", slab->addr);
                pages += slab->npages;
            }
            if (n != bin->nempty)
                return check_fail("a bin's count of kept slabs disagrees with its list", n);
        }
        if (pages != arenas[i]->empty_pages)
            return check_fail("an arena's pages of kept slabs disagree with its bins", pages);
    }
    return 0;
}

int check_heap(void)
{
    int err = 0;
    arenas_lock_all();
    lock_acquire(&pageheap.lock);
    size_t npages[EXTENT_NFREE] = { 0 }, active = 0, slab = 0, meta = 0, guards = 0, held = 0;
    unsigned n = ATOMIC_LOAD_ACQ(&region.nranges);
    for (unsigned i = 0; i < n && !err; i++)
        err = walk_range(&region.ranges[i], npages, &active, &slab, &meta, &guards, &held);
    if (!err)
        err = check_kept_slabs();
    if (!err) {
        for (unsigned s = 0; s < EXTENT_NFREE && !err; s++)
            if (npages[s] != pageheap.npages[s])
                err = check_fail("free pages disagree with the page heap's count", s);
        if (!err && (active != pageheap.npages_active || slab != pageheap.npages_slab || meta != pageheap.npages_reserved))
            err = check_fail("active, slab or reserved pages disagree with the counts", active);
        if (!err && (guards != pageheap.npages_guard || held != pageheap.npages_held))
            err = check_fail("guard or held pages disagree with the counts", guards);
        size_t total = active + meta + held + npages[0] + npages[1] + npages[2];
        if (!err && (total << LG_PAGE) != region.heap_mapped)
            err = check_fail("pages do not add up to what is mapped", total);
    }
    lock_release(&pageheap.lock);
    arenas_unlock_all();
    return err;
}
