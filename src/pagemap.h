/* SPDX-License-Identifier: MIT */
/* pagemap.h - the page map's entries: the one place that knows their format.
 *
 * Every heap page has an entry, below its range's base (region.h): finding what a pointer
 * is costs arithmetic and one load.  An entry holds a descriptor pointer in its low 48
 * bits, for a slab page the page's index in its slab in bits 48-50, and a tag in the top
 * 8 that says what the page is:
 *   slab page        every page of a slab: the slab, the page's index, its class;
 *   sampled page     a slab page of a class of a page or more (on which one block at most
 *                    starts) whose block the heap profiler sampled: the same, under a tag
 *                    of its own, so that the free fast path leaves that block to the slow
 *                    path, which takes its record off (prof_record.c);
 *   large head       the first page of a large block: the block, its cached class if it
 *                    has one;
 *   large tail       the last page of a large block: the block (no class);
 *   free edge        the first and last page of a free run: the run;
 *   freed head       the first page of a large block that was freed into a run starting
 *                    before it: the descriptor it was freed with (a second free of the
 *                    block sees it, and checks the descriptor before saying so);
 *   stale page       a slab page on which a region would start where a freed large
 *                    block started (see the was-head bit below): the same, under a tag
 *                    of its own, so that its frees take the slow path, which reports a
 *                    free of that address (the region there is never handed out);
 *   reserved         the first and last page of pages kept out of use (a guard): their
 *                    length in pages;
 *   guard            the trailing guard page of a slab or large block (guard:on,
 *                    guard_sample), and every page of a freed block held as a guard
 *                    (guard.h): the extent;
 *   empty (0)        no extent starts or ends here.
 * Interior pages of large blocks and free runs hold empty or stale large-tail, free-edge,
 * freed-head and guard entries, never one that carries a class: so the free fast path can
 * trust a slab page's class without looking at the descriptor.  (The tag of a class is the class
 * + 1, so that an empty entry carries none.)
 * Bit 55 of every entry, the was-head bit, outlives the entries written over it: it says
 * that a large block started on the page and was freed, so that the program may still hold
 * its address (a double free to come).  A slab made there later never hands out a region
 * starting at that address, and tags the page stale. */
#ifndef TIDE_PAGEMAP_H
#define TIDE_PAGEMAP_H

#include <stdbool.h>
#include <stdint.h>

#include "region.h"
#include "report.h"
#include "size_class_table.h"
#include "util.h"

typedef uint64_t pm_entry_t;
_Static_assert(sizeof(pm_entry_t) == REGION_PM_ENTRY_BYTES, "the region reserves the page map");

#define PM_NO_CLASS 0xFFu /* a large block without a cached class */

#define PM_TAG_SHIFT 56
#define PM_PTR_MASK (((uint64_t)1 << 48) - 1)
#define PM_PAGE_SHIFT 48
#define PM_PAGE_MASK 7u
_Static_assert(SC_SLAB_MAX_PAGES - 1 <= PM_PAGE_MASK, "every page of a slab has its offset in the entry");
#define PM_TAG_LARGE 0xF0u /* head of a classless large block, tail of any */
#define PM_TAG_FREE 0xF1u
#define PM_TAG_RESERVED 0xF2u
#define PM_TAG_FREED 0xF3u
#define PM_TAG_GUARD 0xF4u
#define PM_TAG_SAMPLED 0x80u /* + the class: a sampled page */
#define PM_TAG_STALE 0xB0u   /* + the class: a stale page */
#define PM_WAS_HEAD ((uint64_t)1 << 55)
_Static_assert(SC_NCACHED < PM_TAG_SAMPLED && PM_TAG_SAMPLED + SC_NSMALL <= PM_TAG_STALE &&
                   PM_TAG_STALE + SC_NSMALL <= PM_TAG_LARGE,
               "the tags are apart");

static inline pm_entry_t pm_make_(uintptr_t low, unsigned tag)
{
    TIDE_ASSERT(low <= PM_PTR_MASK);
    return (uint64_t)low | ((uint64_t)tag << PM_TAG_SHIFT);
}
static inline unsigned pm_tag_(pm_entry_t e) { return (unsigned)(e >> PM_TAG_SHIFT); }

/* ---- making entries -------------------------------------------------------------------- */

#define PM_EMPTY ((pm_entry_t)0)

static inline pm_entry_t pm_slab_page(const void *slab, unsigned cls, size_t page)
{
    TIDE_ASSERT(cls < SC_NSMALL && page <= PM_PAGE_MASK);
    return pm_make_((uintptr_t)slab, cls + 1u) | ((uint64_t)page << PM_PAGE_SHIFT);
}
/* Slab page entry E (pm_slab_page) as a sampled page (pm_slab_page gives it back). */
static inline pm_entry_t pm_sampled_page(pm_entry_t e)
{
    TIDE_ASSERT(pm_tag_(e) >= 1 && pm_tag_(e) <= SC_NSMALL);
    return (e & ~((uint64_t)0xFF << PM_TAG_SHIFT)) | ((uint64_t)(PM_TAG_SAMPLED + pm_tag_(e) - 1) << PM_TAG_SHIFT);
}
/* Slab page entry E (pm_slab_page) as a stale page. */
static inline pm_entry_t pm_stale_page(pm_entry_t e)
{
    TIDE_ASSERT(pm_tag_(e) >= 1 && pm_tag_(e) <= SC_NSMALL);
    return (e & ~((uint64_t)0xFF << PM_TAG_SHIFT)) | ((uint64_t)(PM_TAG_STALE + pm_tag_(e) - 1) << PM_TAG_SHIFT);
}
static inline pm_entry_t pm_large_head(const void *block, unsigned cls)
{
    return pm_make_((uintptr_t)block, cls == PM_NO_CLASS ? PM_TAG_LARGE : cls + 1u);
}
static inline pm_entry_t pm_large_tail(const void *block) { return pm_make_((uintptr_t)block, PM_TAG_LARGE); }
static inline pm_entry_t pm_free_edge(const void *run) { return pm_make_((uintptr_t)run, PM_TAG_FREE); }
static inline pm_entry_t pm_freed_head(const void *run) { return pm_make_((uintptr_t)run, PM_TAG_FREED); }
static inline pm_entry_t pm_guard(const void *ext) { return pm_make_((uintptr_t)ext, PM_TAG_GUARD); }
static inline pm_entry_t pm_reserved(size_t npages) { return pm_make_((uintptr_t)npages, PM_TAG_RESERVED); }

/* ---- reading them ---------------------------------------------------------------------- */

/* The class of a slab page; a value >= SC_NSMALL for every other entry (one subtraction
 * and a compare tell a slab page; the free fast path has pm_starts_small_region). */
TIDE_INLINE unsigned pm_slab_class(pm_entry_t e) { return pm_tag_(e) - 1u; }
static inline bool pm_is_slab_page(pm_entry_t e) { return pm_slab_class(e) < SC_NSMALL; }
/* The class an entry carries (a slab page, or the head of a large block of a cached
 * class), else PM_NO_CLASS. */
static inline unsigned pm_class(pm_entry_t e)
{
    unsigned c = pm_tag_(e) - 1u;
    return c < SC_NCACHED ? c : PM_NO_CLASS;
}
/* The head or the tail of a large block (which of the two: compare the block's address). */
static inline bool pm_is_large_edge(pm_entry_t e)
{
    unsigned t = pm_tag_(e);
    return t == PM_TAG_LARGE || (t > SC_NSMALL && t <= SC_NCACHED);
}
static inline bool pm_is_sampled_page(pm_entry_t e) { return pm_tag_(e) - PM_TAG_SAMPLED < SC_NSMALL; }
/* The class of a sampled page. */
static inline unsigned pm_sampled_class(pm_entry_t e) { return pm_tag_(e) - PM_TAG_SAMPLED; }
static inline bool pm_is_stale_page(pm_entry_t e) { return pm_tag_(e) - PM_TAG_STALE < SC_NSMALL; }
static inline unsigned pm_stale_class(pm_entry_t e) { return pm_tag_(e) - PM_TAG_STALE; }
/* The class of a slab page whatever its tag (plain, sampled, stale), else a value >=
 * SC_NSMALL. */
static inline unsigned pm_any_slab_class(pm_entry_t e)
{
    unsigned t = pm_tag_(e);
    return t - 1u < SC_NSMALL ? t - 1u : t - PM_TAG_SAMPLED < SC_NSMALL ? t - PM_TAG_SAMPLED
                                     : t - PM_TAG_STALE < SC_NSMALL   ? t - PM_TAG_STALE
                                                                      : SC_NSMALL;
}
static inline bool pm_is_free_edge(pm_entry_t e) { return pm_tag_(e) == PM_TAG_FREE; }
static inline bool pm_is_freed_head(pm_entry_t e) { return pm_tag_(e) == PM_TAG_FREED; }
static inline bool pm_is_guard(pm_entry_t e) { return pm_tag_(e) == PM_TAG_GUARD; }
static inline bool pm_is_reserved(pm_entry_t e) { return pm_tag_(e) == PM_TAG_RESERVED; }
static inline size_t pm_reserved_pages(pm_entry_t e) { return (size_t)(e & PM_PTR_MASK); }
/* The descriptor of a slab page, a large edge, a free edge, a freed head or a guard. */
static inline void *pm_desc(pm_entry_t e) { return (void *)(uintptr_t)(e & PM_PTR_MASK); }
/* The first byte of the slab that holds ADDR, from the entry of ADDR's page. */
TIDE_INLINE uintptr_t pm_slab_base(pm_entry_t e, uintptr_t addr)
{
    return (addr & ~(uintptr_t)PAGE_MASK) - ((uintptr_t)((e >> PM_PAGE_SHIFT) & PM_PAGE_MASK) << LG_PAGE);
}

/* The free fast path's one test of a page's entry E, for ADDR on that page: whether ADDR
 * starts a region of a slab of a small class.  The table is indexed by the tag itself, and
 * holds 0 (no offset passes) at every tag that is not a small class's: no separate test of
 * the class. */
TIDE_INLINE bool pm_starts_small_region(pm_entry_t e, uintptr_t addr)
{
    uint64_t c = sc_div64_by_tag[pm_tag_(e)];
    return (uint64_t)(addr - pm_slab_base(e, addr)) * c < c;
}
/* The class of a slab page, as an index (the fast path's: the subtraction folds into the
 * addresses it indexes). */
TIDE_INLINE size_t pm_slab_class_index(pm_entry_t e) { return (size_t)pm_tag_(e) - 1; }

/* ---- where they are -------------------------------------------------------------------- */

TIDE_INLINE pm_entry_t *pm_slot(const range_t *r, uintptr_t addr)
{
    return (pm_entry_t *)r->base - 1 - ((addr - r->base) >> LG_PAGE);
}
/* The entry of ADDR's page, without its was-head bit. */
TIDE_INLINE pm_entry_t pm_read(const range_t *r, uintptr_t addr) { return ATOMIC_LOAD(pm_slot(r, addr)) & ~PM_WAS_HEAD; }
/* Whether a freed large block started on ADDR's page. */
static inline bool pm_was_head(const range_t *r, uintptr_t addr) { return (ATOMIC_LOAD(pm_slot(r, addr)) & PM_WAS_HEAD) != 0; }
static inline void pm_set_was_head(const range_t *r, uintptr_t addr)
{
    ATOMIC_STORE(pm_slot(r, addr), ATOMIC_LOAD(pm_slot(r, addr)) | PM_WAS_HEAD);
}
/* The same from the page's byte offset OFF from BASE, the range's base (the free fast path
 * and the inline checks have both already). */
TIDE_INLINE pm_entry_t pm_read_offset(uintptr_t base, uintptr_t off)
{
    /* base[-1 - page], as base + ~page entries: one instruction less; in integers, where
     * the wrap-around is defined. */
    uintptr_t slot = base + (~(off >> LG_PAGE)) * sizeof(pm_entry_t);
    return ATOMIC_LOAD((const pm_entry_t *)slot);
}
/* Write ADDR's entry, keeping its was-head bit.  (Writers hold the page-heap lock, or own
 * the live slab whose page it is.) */
static inline void pm_write(const range_t *r, uintptr_t addr, pm_entry_t e)
{
    pm_entry_t *slot = pm_slot(r, addr);
    ATOMIC_STORE(slot, e | (ATOMIC_LOAD(slot) & PM_WAS_HEAD));
}

#endif
