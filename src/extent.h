/* SPDX-License-Identifier: MIT */
/* extent.h - runs of pages ("extents") and the page heap that hands them out.
 *
 * Every page of a range belongs to one extent: a slab, a large block, reserved pages (a
 * range's first pages), a freed large block held as a guard, or a free run; extent
 * descriptors live apart, in the metadata range (meta.h).  A free run remembers what the
 * kernel holds for it:
 *   dirty - freed by the program, its pages likely resident;
 *   lazy  - given back with MADV_FREE: resident until the kernel needs the memory, and
 *           its contents are undefined (calloc must zero it);
 *   clean - known to read as zeros: never touched, or purged with MADV_DONTNEED.
 * Free runs of the same state coalesce with their neighbours; the page map gives the
 * neighbours in O(1).  One lock guards the page heap; the system calls made under it are
 * rare, and of a range as a whole: its growth (mmap), the unmapping of its clean free
 * tail, thp:auto's advice, and the growth of the metadata range (meta.c). */
#ifndef TIDE_EXTENT_H
#define TIDE_EXTENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "list.h"
#include "lock.h"
#include "rbtree.h"
#include "pagemap.h"
#include "region.h"
#include "size_class_table.h"
#include "util.h"

typedef enum {
    EXTENT_DIRTY = 0,
    EXTENT_LAZY = 1,
    EXTENT_CLEAN = 2,
    EXTENT_NFREE = 3, /* the free states above index the free trees */
    EXTENT_PURGING,   /* free, being purged outside the lock: neither allocatable nor mergeable */
    EXTENT_LARGE,     /* a large block in use */
    EXTENT_SLAB,      /* a slab in use */
    EXTENT_HELD,      /* a freed large block kept as a guard (guard.h): every page a guard */
    EXTENT_RETIRED    /* descriptor on the recycling list */
} extent_state_t;

#define EXTENT_NO_CLASS PM_NO_CLASS

/* The heap profiler's record of a block it sampled, kept in the block's extent, in the
 * line a free reads anyway (a table of records apart cost each sampled free a cache miss
 * more, on bench/mixed the profiler's costliest; the samples kept in their slab have
 * theirs in one, prof_record.c): its call stack, its requested size, the
 * inverse of the probability it was sampled with (its weight, in 1/1024ths of a block), the
 * usable size it would have had unsampled (0: the extent's), and the profiler's shard that
 * counted it. */
struct prof_stack_s;
typedef struct extent_prof_s {
    struct prof_stack_s *stack;
    uint64_t size;
    uint64_t count_fx;
    uint32_t usable;
    uint8_t shard; /* the profiler's shard that counted the sample */
} extent_prof_t;

typedef struct extent_s {
    uintptr_t addr;
    size_t npages;
    uint8_t state;     /* extent_state_t */
    uint8_t range;     /* index in region.ranges */
    uint8_t zeroed;    /* large, just allocated: every byte reads as zero */
    uint8_t cls;       /* slab: its class; large: its cached class or EXTENT_NO_CLASS */
    uint16_t nfree;    /* slab: free regions */
    uint16_t arena;    /* slab: the arena whose bin owns it */
    rb_node_t rb;      /* free: page-heap tree by (npages, addr); slab: bin's non-full tree */
    list_node_t lru;   /* dirty: the page heap's age order (oldest first); slab: on its
                          bin's list of empty slabs, or self-linked */
    uint64_t stamp;    /* dirty: when it was freed (ns); slab on that list: when it emptied */
    size_t moved_len;  /* large: its first moved_len bytes sit in VMAs of their own (mremap) */
    uint8_t moved_pieces; /* ... how many such VMAs */
    uint8_t freed;        /* free: EXTENT_FREED_* (first pages of freed large blocks) */
    uint16_t sample;   /* large, held: a sampled block (guard_sample): its record's index + 1 */
    uint32_t guard;    /* slab, large, held: pages after the block, not part of it: the first a
                        * guard page, the rest (if any) padding to the block's alignment */
    uint32_t prof;     /* large: 1 when the heap profiler sampled the block (its record in prof_rec) */
    uint8_t cached;    /* large: in a thread's cache (written by that thread, read by any free) */
    uint8_t nquar;     /* slab: regions never handed out, as they start where freed large blocks
                        * did (pagemap.h, the was-head bit): their bits stay clear */
    union {
        uint64_t bitmap[SC_MAX_NREGS / 64]; /* slab: bit set = region free */
        extent_prof_t prof_rec;             /* large, prof set: the profiler's (prof_record.c) */
    };
} extent_t;
/* A descriptor a slab (one for every 4 KiB of a heap of small objects) pays for in the
 * metadata range, rounded to cache lines: one byte more than 128 makes it 192. */
_Static_assert(sizeof(extent_t) <= 2 * TIDE_CACHELINE, "extent_t fits two cache lines");

/* A free run's first page is that of a large block freed into it (its page-map entry tells
 * a second free so); the run holds such a page somewhere (slabs avoid it, take()). */
#define EXTENT_FREED_AT_START 1u
#define EXTENT_FREED_INSIDE 2u

typedef struct extent_stats_s {
    size_t active, slab_bytes, dirty, lazy, clean, reserved; /* bytes */
    size_t guards, large_guards, held; /* bytes: live blocks' guard pages (in active), held blocks */
    size_t nlarge_alloc, nlarge_free, nslabs;
} extent_stats_t;

typedef struct pageheap_s {
    lock_t lock;
    rb_root_t free[EXTENT_NFREE];
    list_node_t dirty_lru;
    size_t npages[EXTENT_NFREE]; /* free pages by state; purging pages count as dirty */
    size_t npages_active, npages_slab, npages_reserved;
    size_t npages_guard, npages_guard_large, npages_held; /* guard pages of live slabs and blocks; held blocks */
    /* Pages ever taken again from dirty or lazy runs: freed pages reused while resident,
     * which the decay keeps as many of (purge.c).  Read without the lock. */
    size_t reused;
    size_t nlarge_alloc, nlarge_free, nslabs;
    extent_t *desc_free;  /* recycled descriptors (linked through addr) */
    size_t ndesc_free;
} pageheap_t;

extern pageheap_t pageheap;

/* The page heap over the first range (region_init and meta_init first): 0 or ENOMEM. */
int extent_init(void);
/* NPAGES pages at BASE, the start of range RANGE, are kept out of use, the first a guard
 * between the page map below it and the heap.  Lock held (or start-up). */
void extent_reserve_guard(unsigned range, uintptr_t base, size_t npages);

/* Where a thread last freed a large block: the free run it went into, and the block's
 * size.  The thread's next large block starts there when the run still fits (see
 * hinted_run), so a thread that frees and reallocates a buffer, and grows it, keeps
 * reusing its own warm pages instead of meeting other threads' buffers.  The caller owns
 * it (a thread's, in the thread layer); extent_free writes it, extent_alloc_large uses
 * it once. */
typedef struct extent_hint_s {
    uintptr_t addr;
    size_t pages;
} extent_hint_t;

/* A large block of NPAGES pages aligned to ALIGN (a power of two >= PAGE), at HINT's run
 * when it fits (HINT may be NULL); its zeroed field tells whether its bytes are known to
 * be zero.  NULL when memory is exhausted.  With extent_guards_wanted() a slab or large
 * block has one more page, a guard page after it (its guard field says so), and an
 * aligned block as many more as keep the extent's size a multiple of its alignment: the
 * pages up to the next aligned place would be a run no aligned block can use, and one that
 * small blocks would fill above a giant block that must end its range (extent.c, take). */
extent_t *extent_alloc_large(size_t npages, size_t align, extent_hint_t *hint);
/* Slabs for class CLS owned by arena ARENA, every region free: one, and, for a class of a
 * page or less, up to WANT when it is cut from pages not yet resident and more such pages
 * follow it; they go to OUT, at consecutive addresses, and are faulted in whole (the
 * caller writes every page at once, a fault at a time), unless faults map huge pages
 * there.  Returns how many; 0 when memory is exhausted. */
unsigned extent_alloc_slabs(unsigned cls, unsigned arena, unsigned want, extent_t **out);
/* Give a large block or a slab back: it becomes dirty and may be purged by policy (its
 * guard page, if any, an ordinary page again).  A large block sets HINT (when not NULL). */
void extent_free(extent_t *e, extent_hint_t *hint);
/* The same for N extents in one round of the page-heap lock (a thread cache's flush of
 * a large class: one lock round instead of one per block). */
void extent_free_many(extent_t *const *v, unsigned n, extent_hint_t *hint);
/* The same for N empty slabs a bin kept, each dirty as of its stamp (when it emptied),
 * so that the decay counts the time it was kept. */
void extent_free_aged(extent_t *const *v, unsigned n);
/* Grow or shrink large block E in place to NPAGES (its guard page, if any, moves to the
 * new end); false when the pages after it are not free. */
bool extent_resize(extent_t *e, size_t npages);
/* A place for a block of NPAGES pages that has to move: at the start of a free run with
 * room to double it, so that it can keep growing in place, at an address congruent to
 * CONGRUENT modulo 2 MiB (mremap moves such pages fastest) unless ANY_ADDRESS (a copy).
 * Returned as a large block of no class, its boundary entries written. */
extent_t *extent_alloc_move_target(size_t npages, uintptr_t congruent, bool any_address);
/* After the pages of OLD were moved to TARGET: OLD's place becomes clean free space and
 * TARGET the live block. */
void extent_finish_move(extent_t *old, extent_t *target);

/* ---- guard pages (guard:on, guard_sample; the policy is guard.c's) ---- */
/* Whether new slabs and large blocks get a trailing guard page: guard:on, on a kernel that
 * has guard pages. */
bool extent_guards_wanted(void);
/* Whether the kernel installs guard pages (false once it said EINVAL). */
bool extent_guards_work(void);
/* Make [ADDR, ADDR+LEN) guard pages (MADV_GUARD_INSTALL: their contents are dropped, no
 * VMA is split), all of them or none.  The first EINVAL (no guard pages before Linux 6.13)
 * prints one warning and turns guard pages off for good.  No lock held. */
bool extent_guard_install(uintptr_t addr, size_t len);
/* A sampled block's extent: NPAGES pages and a guard page after them, of no class; SAMPLE
 * is its record's index + 1.  NULL when memory is exhausted or guards do not work. */
extent_t *extent_alloc_sampled(size_t npages, unsigned sample);
/* Hold freed large block E as a guard: the caller made all its pages (padding included)
 * guard pages already.  It is neither allocatable nor mergeable, and a free of it is a
 * double free. */
void extent_hold(extent_t *e);
/* Give held extent E back: its guard pages become ordinary (zero) pages, a clean run. */
void extent_release_held(extent_t *e);
/* The pages and bytes of block E, its guard page (and padding) excluded. */
static inline size_t extent_block_pages(const extent_t *e) { return e->npages - e->guard; }
/* The guard page of E (when E->guard). */
static inline uintptr_t extent_guard_page(const extent_t *e) { return e->addr + (extent_block_pages(e) << LG_PAGE); }

/* Mark the page on which BLOCK, a block of slab SLAB of a class of a page or more, starts
 * as holding a block the heap profiler sampled (pagemap.h: its frees take the slow path),
 * or unmark it.  The caller keeps the block from being freed meanwhile. */
void extent_mark_sampled(extent_t *slab, uintptr_t block, bool sampled);

/* The extent whose first page is ADDR when it is a live large block or slab, else NULL. */
extent_t *extent_of_block(uintptr_t addr);

void extent_stats(extent_stats_t *out);

/* ---- for the purge engine (purge.c); in extent_dirty.c ---- */
/* Move dirty extents freed at or before OLDER_THAN (ns), oldest first, into OUT (at most
 * MAX of them, at most MAX_PAGES pages in all) and mark them purging.  With WHOLE_UNITS
 * (huge pages), an extent also takes the rest of a 2 MiB unit it ends in from a clean or
 * lazy neighbour that holds it, so that the unit can be purged whole.  EXACT (and not
 * WHOLE_UNITS): the last run taken is cut so that exactly MAX_PAGES are taken, else the
 * last run may go past them.  Lock held. */
size_t extent_take_dirty(uint64_t older_than, bool whole_units, extent_t **out, size_t max, size_t max_pages,
                         bool exact);
/* Return purged extents as STATE (lazy or clean), or back to dirty when the purge failed. */
void extent_put_purged(extent_t **ext, size_t n, extent_state_t state);
/* Return purged extent E whose pages [LO, HI) were purged: that span becomes STATE and
 * the rest dirty again (with huge pages only whole 2 MiB units are purged). */
void extent_put_purged_span(extent_t *e, uintptr_t lo, uintptr_t hi, extent_state_t state);
/* When the oldest dirty run was freed (ns, os_now_ns), or 0 when none is.  Lock held. */
uint64_t extent_oldest_dirty(void);
/* Give the free tail of the last range back to the kernel when region_trim_point() says
 * so: a clean tail is unmapped at once, a lazy one is purged outside the lock first.
 * FORGET: an explicit trim (malloc_trim, tide_purge).  Caller holds purge_lock (not the
 * page-heap lock): one trimmer at a time, never beside a purge pass. */
void extent_trim_tail(bool forget);

/* ---- huge pages under thp:auto (extent_huge.c) ---- */
/* Start-up: read the system's THP setting. */
void extent_huge_init(void);
/* thp:auto, a system THP setting of madvise or always, and a kernel that collapses. */
bool extent_huge_active(void);
/* The heap's ranges carry MADV_HUGEPAGE (thp:on, or thp:auto's advice on a big heap): a
 * fault in a unit with no page yet maps a huge page. */
bool extent_huge_faults(void);
/* conf.thp changed at run time. */
void extent_huge_thp_changed(void);
/* Dense units wait to be collapsed. */
bool extent_huge_pending(void);
/* Collapse up to BUDGET dense units that are resident enough (each looked at once, with
 * mincore, and collapsed with MADV_COLLAPSE outside the lock).  No lock held. */
void extent_huge_work(unsigned budget);
typedef struct extent_huge_stats_s {
    long mode;        /* conf.thp */
    int setting;      /* the system's: 0 never (or absent), 1 madvise, 2 always */
    bool refused;     /* the kernel refused MADV_COLLAPSE */
    bool active;
    int advice;       /* on the heap's ranges: REGION_ADVICE_* */
    uint64_t collapsed, failed; /* dense units collapsed; failures */
    uint64_t meta;    /* units of the metadata range collapsed */
} extent_huge_stats_t;
void extent_huge_stats(extent_huge_stats_t *out);

const range_t *extent_range(const extent_t *e);

static inline uintptr_t extent_end(const extent_t *e) { return e->addr + (e->npages << LG_PAGE); }
static inline size_t extent_size(const extent_t *e) { return e->npages << LG_PAGE; }
static inline size_t extent_block_size(const extent_t *e) { return extent_block_pages(e) << LG_PAGE; }

#endif
