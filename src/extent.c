/* SPDX-License-Identifier: MIT */
/* extent.c - the page heap: best-fit allocation of page runs, coalescing, descriptors.
 *
 * Free runs live in three trees (dirty, lazy, clean) ordered by (size, address), so a
 * request takes the smallest run that fits, lowest address first.  Allocation prefers
 * dirty runs (their pages are resident: no page faults), then lazy, then clean, and
 * grows the range only when none fits.  Descriptors of extents come from the metadata
 * range (meta.c), a mapping of its own away from the heap, which no overflow of user
 * memory reaches.  The dirty runs' side (handing them to the purge engine, taking them
 * back, giving the range's free tail back) is extent_dirty.c; the 2 MiB units and
 * thp:auto, extent_huge.c.
 *
 * Bottom up: an extent's page-map edges, descriptors, free runs, the range (start-up,
 * reserved pages, growth), guard pages; placement (the run that fits, where in it: a
 * giant block at the range's end, a slab away from freed blocks' first pages, a large
 * block at its thread's hint); then allocation, free, resize and move, held blocks,
 * lookups. */
#include "extent.h"
#include "extent_internal.h"

#include <errno.h>
#include <string.h>

#include "conf.h"
#include "meta.h"
#include "os.h"
#include "pagemap.h"
#include "report.h"
#include "size_class.h"

pageheap_t pageheap TIDE_FORK_LOCK;

/* A hint may name the run a block just freed into (see extent_hint_t) only while the run is
 * about the block's own place: cutting a small block from the start of a big merged run,
 * instead of the best fit, fragmented the address space (the soak's range grew from ~2 GiB
 * to 5-8 GiB for 1 GiB live). */
#define HINT_SLACK_PAGES (HUGEPAGE >> LG_PAGE)

#define DESC_BATCH 32 /* descriptors fetched from the metadata range at a time */
#define SPAN_CANDIDATES 8   /* largest runs of each state a span search starts from */
#define EXTEND_SLACK (64 * MiB) /* growth in place by extending the range is always allowed this far */
#define HEAP_SKIP_MAX_PAGES 512 /* the first blocks start up to this many pages into the heap's second unit */
#define SLAB_AVOID_TRIES 8 /* runs take() looks at past a freed block's (for a slab) */
#define GIANT_PAGES ((256 * MiB) >> LG_PAGE) /* blocks placed to let the range shrink after them (take) */

/* The first blocks' random offset into the range's second unit, kept out of use until
 * thp:auto's huge pages (extent_init).  Lock held. */
static extent_t *heap_skip;

/* ---- page-map edges -------------------------------------------------------------- */

const range_t *extent_range(const extent_t *e) { return &region.ranges[e->range]; }

/* NPAGES pages from BASE of R kept out of use: no descriptor, the first and last entries
 * carry the length. */
static void mark_reserved(const range_t *r, uintptr_t base, size_t npages)
{
    pm_write(r, base + ((npages - 1) << LG_PAGE), pm_reserved(npages));
    pm_write(r, base, pm_reserved(npages));
}

/* The entries of E's first and last pages (one page: FIRST). */
static void set_edges(extent_t *e, pm_entry_t first, pm_entry_t last)
{
    const range_t *r = extent_range(e);
    if (e->npages > 1)
        pm_write(r, extent_end(e) - PAGE, last);
    pm_write(r, e->addr, first);
}

void extent_set_free_edges(extent_t *e) { set_edges(e, pm_free_edge(e), pm_free_edge(e)); }

/* A large block's first page carries its class (the free path reads it); its last
 * page only says "large", so a pointer into that page is never taken for a block.  Its
 * guard page, when it has one, names it (the SIGSEGV handler reads that). */
static TIDE_NOINLINE void set_guarded_large_boundaries(extent_t *e)
{
    const range_t *r = extent_range(e);
    size_t bp = extent_block_pages(e);
    pm_write(r, extent_end(e) - PAGE, pm_guard(e));
    pm_write(r, extent_guard_page(e), pm_guard(e));
    if (bp > 1)
        pm_write(r, e->addr + ((bp - 1) << LG_PAGE), pm_large_tail(e));
    pm_write(r, e->addr, pm_large_head(e, e->cls));
}

/* (Inline without a guard page: every large block's allocation writes them.) */
TIDE_INLINE void extent_set_large_boundaries(extent_t *e)
{
    if (likely(!e->guard))
        set_edges(e, pm_large_head(e, e->cls), pm_large_tail(e));
    else
        set_guarded_large_boundaries(e);
}

void extent_clear_edges(extent_t *e)
{
    const range_t *r = extent_range(e);
    pm_write(r, e->addr, PM_EMPTY);
    if (e->npages > 1)
        pm_write(r, extent_end(e) - PAGE, PM_EMPTY);
}

/* ---- descriptors ----------------------------------------------------------------- */

void extent_desc_put(extent_t *e)
{
    e->state = EXTENT_RETIRED;
    e->addr = (uintptr_t)pageheap.desc_free;
    pageheap.desc_free = e;
    pageheap.ndesc_free++;
}

extent_t *extent_desc_get(void)
{
    extent_t *e = pageheap.desc_free;
    TIDE_CHECK(e != NULL); /* extent_desc_reserve() comes first */
    pageheap.desc_free = (extent_t *)e->addr;
    pageheap.ndesc_free--;
    memset(e, 0, sizeof *e);
    return e;
}

/* Make sure N descriptors can be had without allocating: they come from the metadata
 * range (meta.h), apart from the heap, DESC_BATCH at a time. */
int extent_desc_refill(size_t n)
{
    while (pageheap.ndesc_free < n) {
        size_t each = ALIGN_UP(sizeof(extent_t), (size_t)TIDE_CACHELINE);
        char *batch = meta_alloc(DESC_BATCH * each);
        if (!batch)
            return ENOMEM;
        for (unsigned i = 0; i < DESC_BATCH; i++) {
            extent_t *e = (extent_t *)(batch + i * each);
            e->state = EXTENT_RETIRED;
            extent_desc_put(e);
        }
    }
    return 0;
}

/* ---- free runs ------------------------------------------------------------------- */

static int extent_cmp(const rb_node_t *a, const rb_node_t *b)
{
    const extent_t *x = container_of(a, extent_t, rb), *y = container_of(b, extent_t, rb);
    if (x->npages != y->npages)
        return x->npages < y->npages ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int extent_cmp_npages(const rb_node_t *a, const void *key)
{
    const extent_t *x = container_of(a, extent_t, rb);
    return x->npages < *(const size_t *)key ? -1 : 0;
}

void extent_tree_insert(extent_t *e)
{
    TIDE_ASSERT(e->state < EXTENT_NFREE && e->npages > 0);
    rb_insert(&pageheap.free[e->state], &e->rb, extent_cmp);
    pageheap.npages[e->state] += e->npages;
    if (e->state == EXTENT_DIRTY)
        list_push_back(&pageheap.dirty_lru, &e->lru);
}

void extent_tree_remove(extent_t *e)
{
    TIDE_ASSERT(e->state < EXTENT_NFREE && pageheap.npages[e->state] >= e->npages);
    rb_erase(&e->rb, &pageheap.free[e->state]);
    pageheap.npages[e->state] -= e->npages;
    if (e->state == EXTENT_DIRTY)
        list_remove(&e->lru);
}

/* The free neighbour of E on the left (or right) in state STATE (EXTENT_NFREE: in any
 * free state), or NULL. */
extent_t *extent_free_neighbour(const extent_t *e, bool left, unsigned state)
{
    const range_t *r = extent_range(e);
    uintptr_t probe;
    if (left) {
        if (e->addr == r->base)
            return NULL;
        probe = e->addr - PAGE;
    } else {
        probe = extent_end(e);
        if (probe >= ATOMIC_LOAD(&r->end))
            return NULL;
    }
    pm_entry_t entry = pm_read(r, probe);
    if (!pm_is_free_edge(entry))
        return NULL;
    extent_t *n = pm_desc(entry);
    /* The entry may be stale (an interior page of a merged run): check the boundary. */
    bool state_ok = state == EXTENT_NFREE ? n->state < EXTENT_NFREE : n->state == state;
    if (!state_ok || (left ? extent_end(n) != e->addr : n->addr != probe))
        return NULL;
    return n;
}

/* Insert E as a free run in STATE, merging it with free neighbours in the same state. */
void extent_insert_free(extent_t *e, unsigned state, uint64_t stamp)
{
    e->state = (uint8_t)state;
    e->stamp = stamp;
    e->cls = EXTENT_NO_CLASS;
    e->moved_len = 0;
    e->moved_pieces = 0;
    e->guard = 0;
    e->sample = 0;
    extent_t *n = extent_free_neighbour(e, true, state);
    if (n) {
        extent_tree_remove(n);
        extent_keep_freed_head(e, e);
        e->addr = n->addr;
        e->npages += n->npages;
        e->stamp = MAX(e->stamp, n->stamp);
        e->freed = (uint8_t)((n->freed & EXTENT_FREED_AT_START) | ((e->freed | n->freed) & EXTENT_FREED_INSIDE));
        extent_desc_put(n);
    }
    n = extent_free_neighbour(e, false, state);
    if (n) {
        extent_tree_remove(n);
        extent_keep_freed_head(e, n);
        e->npages += n->npages;
        e->stamp = MAX(e->stamp, n->stamp);
        e->freed |= n->freed & EXTENT_FREED_INSIDE;
        extent_desc_put(n);
    }
    extent_set_free_edges(e);
    extent_tree_insert(e);
}

void extent_keep_freed_head(extent_t *run, const extent_t *part)
{
    /* PART's first page becomes an interior page of RUN: a freed block's head keeps
     * saying so there (set_edges writes only RUN's edges, after this). */
    if (part->freed & EXTENT_FREED_AT_START)
        pm_write(extent_range(part), part->addr, pm_freed_head(run));
}

/* Make [ADDR, ADDR + NPAGES pages) of range RANGE a free run in STATE (it may merge
 * with its neighbours).  Needs one descriptor. */
void extent_add_free_run(uintptr_t addr, size_t npages, unsigned range, unsigned state, uint64_t stamp)
{
    extent_t *e = extent_desc_get();
    e->addr = addr;
    e->npages = npages;
    e->range = (uint8_t)range;
    extent_insert_free(e, state, stamp);
}

/* Merge the adjacent free runs from L to R (whatever their states) into one run, in the
 * least clean of their states, and return it (in its tree, coalesced with neighbours in
 * that state).  Lock held. */
extent_t *extent_merge_span(extent_t *l, extent_t *r)
{
    extent_t *parts[SPAN_MAX_RUNS + 1];
    size_t n = 0;
    for (extent_t *x = l;; x = extent_free_neighbour(x, false, EXTENT_NFREE)) {
        parts[n++] = x;
        if (x == r)
            break;
    }
    unsigned state = EXTENT_CLEAN;
    uint64_t stamp = 0;
    size_t npages = 0;
    for (size_t i = 0; i < n; i++) {
        state = MIN(state, (unsigned)parts[i]->state); /* dirty < lazy < clean */
        stamp = MAX(stamp, parts[i]->stamp);
        npages += parts[i]->npages;
        extent_tree_remove(parts[i]);
        if (i > 0) {
            extent_keep_freed_head(l, parts[i]);
            l->freed |= parts[i]->freed & EXTENT_FREED_INSIDE;
            extent_desc_put(parts[i]);
        }
    }
    l->npages = npages;
    /* It may now meet a run in its new state beyond the span: merge that too. */
    extent_insert_free(l, state, stamp);
    return l;
}

/* ---- the range: start-up, reserved pages, growth --------------------------------- */

int extent_init(void)
{
    lock_init(&pageheap.lock, LOCK_RANK_PAGEHEAP);
    list_init(&pageheap.dirty_lru);
    extent_huge_init();
    /* The first range starts empty: its first page is a guard (below it lies the page
     * map), and the rest of its first 2 MiB unit stays unused (address space, not
     * memory): a unit that holds the guard is never a huge page, and a fork copies an
     * entry for each of its 4 KiB pages in use.  The heap starts a random number of pages
     * (0 to 511) into the second unit, so that where the first blocks are has the range's
     * randomness and 9 bits more; those pages are kept out of use until thp:auto gives
     * the range huge pages (extent_release_heap_skip), so that the unit can be one. */
    const range_t *r = &region.ranges[0];
    size_t unit = HUGEPAGE >> LG_PAGE, skip = (size_t)(os_random_seed() % HEAP_SKIP_MAX_PAGES);
    extent_reserve_guard(0, r->base, unit + skip);
    if (extent_desc_reserve(2) != 0)
        return ENOMEM;
    if (skip) {
        heap_skip = extent_desc_get();
        heap_skip->addr = r->base + HUGEPAGE;
        heap_skip->npages = skip;
    }
    extent_add_free_run(r->base + ((unit + skip) << LG_PAGE), ((r->end - r->base) >> LG_PAGE) - unit - skip, 0,
                        EXTENT_CLEAN, 0);
    return 0;
}

void extent_release_heap_skip(void)
{
    extent_t *e = heap_skip;
    if (!e)
        return;
    heap_skip = NULL;
    mark_reserved(&region.ranges[0], region.ranges[0].base, HUGEPAGE >> LG_PAGE);
    pageheap.npages_reserved -= e->npages;
    extent_insert_free(e, EXTENT_CLEAN, 0);
}

void extent_reserve_guard(unsigned range, uintptr_t base, size_t npages)
{
    /* The guard costs no VMA where the kernel has MADV_GUARD_INSTALL (6.13+); elsewhere
     * the page simply stays unused. */
    mark_reserved(&region.ranges[range], base, npages);
    os_guard(base, PAGE);
    pageheap.npages_reserved += npages;
}

/* Map more of the range and add it as clean free pages.  Needs one descriptor. */
static int grow(size_t min_pages)
{
    uintptr_t addr;
    size_t len;
    unsigned range;
    int err = region_grow((min_pages + 1) << LG_PAGE, &addr, &len, &range);
    if (err)
        return err;
    if (addr == region.ranges[range].base) {
        /* A new range: its first page guards its page map too. */
        extent_reserve_guard(range, addr, 1);
        addr += PAGE;
        len -= PAGE;
    }
    extent_add_free_run(addr, len >> LG_PAGE, range, EXTENT_CLEAN, 0);
    return 0;
}

/* ---- guard pages ----------------------------------------------------------------- */

/* The kernel installs guard pages (atomic; cleared at its first EINVAL, never set again). */
static int extent_guards_ok = 1;

bool extent_guards_work(void) { return ATOMIC_LOAD(&extent_guards_ok) != 0; }

bool extent_guards_wanted(void) { return ATOMIC_LOAD(&conf.guard) && extent_guards_work(); }

bool extent_guard_install(uintptr_t addr, size_t len)
{
    if (!extent_guards_work())
        return false;
    int err = os_guard(addr, len);
    if (err == EINVAL && __atomic_exchange_n(&extent_guards_ok, 0, __ATOMIC_RELAXED)) {
        static const char *const pieces[] = {
            "guard pages are not available here (MADV_GUARD_INSTALL: Invalid argument; Linux 6.13 has them): "
            "running without them"
        };
        report_line(pieces, ARRAY_SIZE(pieces));
    }
    /* All or nothing: a call that failed part way (a fatal signal, out of memory for page
     * tables) may have made some of the pages guards, and they are about to be reused. */
    if (err && len > PAGE)
        os_unguard(addr, len);
    return err == 0;
}

/* The guard page of E, an ordinary page again: before its pages can be handed out.  No
 * lock held (E is the caller's alone). */
static void unguard_tail(const extent_t *e)
{
    if (e->guard)
        os_unguard(extent_guard_page(e), PAGE);
}

/* ---- placement ------------------------------------------------------------------- */

/* The smallest free run of at least NPAGES pages, dirty first, then lazy, then clean. */
static extent_t *best_fit(size_t npages)
{
    for (unsigned s = 0; s < EXTENT_NFREE; s++) {
        rb_node_t *n = rb_lower_bound(&pageheap.free[s], &npages, extent_cmp_npages);
        if (n)
            return container_of(n, extent_t, rb);
    }
    return NULL;
}

/* When no single run fits: a span of adjacent free runs in different states that holds
 * NEED pages, found around the largest runs of each state and merged.  This is what
 * keeps dirty, lazy and clean runs side by side from forcing the range to grow.  Lock
 * held. */
static extent_t *span_fit(size_t need)
{
    for (unsigned s = 0; s < EXTENT_NFREE; s++) {
        rb_node_t *node = rb_last(&pageheap.free[s]);
        for (int k = 0; node && k < SPAN_CANDIDATES; k++, node = rb_prev(node)) {
            extent_t *c = container_of(node, extent_t, rb), *l = c, *r = c;
            size_t total = c->npages, runs = 1;
            while (total < need && runs < SPAN_MAX_RUNS) {
                extent_t *ln = extent_free_neighbour(l, true, EXTENT_NFREE);
                extent_t *rn = extent_free_neighbour(r, false, EXTENT_NFREE);
                if (!ln && !rn)
                    break;
                if (ln) {
                    total += ln->npages;
                    l = ln;
                    runs++;
                }
                if (rn && runs < SPAN_MAX_RUNS) {
                    total += rn->npages;
                    r = rn;
                    runs++;
                }
            }
            if (total >= need)
                return extent_merge_span(l, r);
        }
    }
    return NULL;
}

/* The run to take NEED pages from: the best single fit, else a merged span, else fresh
 * pages from growing the range, by ROOM pages more when that can be had.  Lock held. */
static extent_t *find_fit(size_t need, size_t room)
{
    extent_t *f = best_fit(need);
    if (!f)
        f = span_fit(need);
    if (!f && ((room && grow(need + room) == 0) || grow(need) == 0))
        f = best_fit(need);
    return f;
}

/* Cut NPAGES pages at START out of free run F (which must hold them); the pieces
 * before and after stay free.  Returns F, now describing the cut, in no tree.  Needs
 * two descriptors.  Lock held. */
static extent_t *carve(extent_t *f, uintptr_t start, size_t npages)
{
    TIDE_CHECK(start >= f->addr && start + (npages << LG_PAGE) <= extent_end(f));
    extent_tree_remove(f);
    /* The run's boundary entries must not survive inside the cut: clear them before the
     * pieces around it write theirs. */
    extent_clear_edges(f);
    unsigned state = f->state;
    uint64_t stamp = f->stamp;
    size_t lead = (start - f->addr) >> LG_PAGE;
    size_t trail = f->npages - lead - npages;
    extent_t *cut = f;
    if (lead) {
        /* F stays the lead's, as freed heads inside the lead name it. */
        cut = extent_desc_get();
        cut->range = f->range;
        f->npages = lead;
        extent_insert_free(f, state, stamp);
    }
    if (trail) {
        extent_t *t = extent_desc_get();
        t->addr = start + (npages << LG_PAGE);
        t->npages = trail;
        t->range = cut->range;
        t->freed = f->freed & EXTENT_FREED_INSIDE; /* (it may: what is known is of all F) */
        extent_insert_free(t, state, stamp);
    }
    cut->freed = 0;
    cut->guard = 0;
    cut->sample = 0;
    cut->addr = start;
    cut->npages = npages;
    cut->zeroed = state == EXTENT_CLEAN;
    cut->moved_len = 0;
    cut->moved_pieces = 0;
    pageheap.npages_active += npages;
    extent_units_use(cut->range, start, npages, true);
    if (state != EXTENT_CLEAN)
        __atomic_store_n(&pageheap.reused, pageheap.reused + npages, __ATOMIC_RELAXED);
    return cut;
}

/* The pages a growth for a giant block of NPAGES adds below it (take): the step the range
 * would grow by next, a quarter of it with the block, at least REGION_MIN_GROW, and short
 * enough that the block still goes to the end (REGION_TRIM_MIN).  Lock held. */
static size_t giant_room(size_t npages)
{
    size_t step = MAX(((region.heap_mapped >> LG_PAGE) + npages) / 4, REGION_MIN_GROW >> LG_PAGE);
    return MIN(step, (REGION_TRIM_MIN / 2) >> LG_PAGE);
}

/* F holds the first page of a freed large block, which a slab cut from it could cover: a
 * run that holds none, among the next sizes up in F's state and the best fits in the other
 * states; else F.  Lock held. */
static extent_t *avoid_freed(extent_t *f, size_t need)
{
    rb_node_t *n = &f->rb;
    for (int k = 0; k < SLAB_AVOID_TRIES && (n = rb_next(n)); k++) {
        extent_t *g = container_of(n, extent_t, rb);
        if (!(g->freed & EXTENT_FREED_INSIDE))
            return g;
    }
    for (unsigned s = 0; s < EXTENT_NFREE; s++) {
        n = s == f->state ? NULL : rb_lower_bound(&pageheap.free[s], &need, extent_cmp_npages);
        for (int k = 0; n && k < SLAB_AVOID_TRIES; k++, n = rb_next(n)) {
            extent_t *g = container_of(n, extent_t, rb);
            if (!(g->freed & EXTENT_FREED_INSIDE))
                return g;
        }
    }
    return f;
}

/* Take NPAGES pages aligned to ALIGN out of the free runs (growing if need be).
 * Returns the descriptor of the taken run, in no tree.  Lock held. */
static extent_t *take(size_t npages, size_t align, bool slab)
{
    size_t align_pages = align >> LG_PAGE;
    size_t need = npages + (align_pages > 1 ? align_pages - 1 : 0);
    if (need < npages || extent_desc_reserve(3) != 0)
        return NULL;
    extent_t *f = find_fit(need, npages >= GIANT_PAGES ? giant_room(npages) : 0);
    if (!f)
        return NULL;
    /* New slabs do not go first into pages a large block just gave back: a second free
     * of the block would take the slab's first region for it. */
    if (slab && (f->freed & EXTENT_FREED_INSIDE))
        f = avoid_freed(f, need);
    align = MAX(align, PAGE);
    uintptr_t start = ALIGN_UP(f->addr, align);
    /* A giant block taken from the run that ends the range, when what it leaves of that
     * run is too small ever to be given back (extent_trim_tail), goes to the run's end:
     * the small blocks that come next fill the rest below it instead of settling above it,
     * so once freed it becomes the range's free tail and its address space can go back.
     * (This is the common case: the range just grew for it, and by giant_room more, so
     * that the rest is the room a growth would give those blocks, not just the alignment
     * slack: once that was used up, the next growth went above the block and kept it.) */
    if (npages >= GIANT_PAGES && extent_end(f) == ATOMIC_LOAD(&extent_range(f)->end) &&
        ((f->npages - npages) << LG_PAGE) < REGION_TRIM_MIN)
        start = ALIGN_DOWN(extent_end(f) - (npages << LG_PAGE), align);
    return carve(f, start, npages);
}

/* The free run HINT names, when it still starts there, is about the freed block's own size
 * and holds NPAGES pages aligned to ALIGN.  Lock held. */
static extent_t *hinted_run(const extent_hint_t *hint, size_t npages, size_t align)
{
    const range_t *r = hint && hint->addr ? region_range_of(hint->addr) : NULL;
    if (!r)
        return NULL;
    pm_entry_t entry = pm_read(r, hint->addr);
    extent_t *f = pm_desc(entry);
    if (!pm_is_free_edge(entry) || f->addr != hint->addr || f->state >= EXTENT_NFREE ||
        f->npages > 2 * hint->pages + HINT_SLACK_PAGES)
        return NULL;
    uintptr_t start = ALIGN_UP(f->addr, MAX(align, PAGE));
    return start + (npages << LG_PAGE) <= extent_end(f) ? f : NULL;
}

/* ---- allocation ------------------------------------------------------------------ */

/* A large block of NPAGES pages, a guard page after it when GUARD (and padding to ALIGN),
 * of no class when CLASSLESS. */
TIDE_INLINE extent_t *alloc_large(size_t npages, size_t align, extent_hint_t *hint, bool guard, bool classless)
{
    size_t trail = unlikely(guard) ? ALIGN_UP(npages + 1, MAX(align, PAGE) >> LG_PAGE) - npages : 0;
    size_t total = npages + trail;
    lock_acquire(&pageheap.lock);
    extent_t *e = NULL, *f = extent_desc_reserve(3) == 0 ? hinted_run(hint, total, align) : NULL;
    if (hint)
        hint->addr = 0; /* used once */
    if (f)
        e = carve(f, ALIGN_UP(f->addr, MAX(align, PAGE)), total);
    else
        e = take(total, align, false);
    if (e) {
        e->state = EXTENT_LARGE;
        e->guard = (uint32_t)trail;
        int cls = classless ? -1 : sc_large_class_of_pages(npages);
        e->cls = cls < 0 ? EXTENT_NO_CLASS : (uint8_t)cls;
        extent_set_large_boundaries(e);
        pageheap.nlarge_alloc++;
        pageheap.npages_guard += trail;
        pageheap.npages_guard_large += trail;
    }
    lock_release(&pageheap.lock);
    /* The page is the caller's alone from here: no need to hold the lock across the call. */
    if (e && guard)
        extent_guard_install(extent_guard_page(e), PAGE);
    return e;
}

extent_t *extent_alloc_large(size_t npages, size_t align, extent_hint_t *hint)
{
    return alloc_large(npages, align, hint, extent_guards_wanted(), false);
}

extent_t *extent_alloc_sampled(size_t npages, unsigned sample)
{
    if (!extent_guards_work())
        return NULL;
    extent_t *e = alloc_large(npages, PAGE, NULL, true, true);
    if (e)
        e->sample = (uint16_t)sample;
    return e;
}

/* Make E, just taken, a slab of class CLS owned by arena ARENA with GUARD guard pages,
 * every region free.  Lock held. */
static void make_slab(extent_t *e, unsigned cls, unsigned arena, unsigned guard)
{
    e->state = EXTENT_SLAB;
    e->guard = guard;
    e->cls = (uint8_t)cls;
    e->arena = (uint16_t)arena;
    unsigned nregs = sc_nregs[cls];
    e->nfree = (uint16_t)nregs;
    for (unsigned w = 0; w < SC_MAX_NREGS / 64; w++) {
        unsigned lo = w * 64;
        e->bitmap[w] = nregs >= lo + 64 ? ~(uint64_t)0 : nregs > lo ? (((uint64_t)1 << (nregs - lo)) - 1) : 0;
    }
    const range_t *r = extent_range(e);
    e->nquar = 0;
    for (size_t i = 0; i < sc_slab_pages[cls]; i++) {
        pm_entry_t entry = pm_slab_page(e, cls, i);
        /* A region that would start where a freed large block did is never handed out,
         * and its page leaves the fast path, whose slow path reports a free there (the
         * block's second free: test/api/hardening). */
        size_t off = i << LG_PAGE;
        if (unlikely(pm_was_head(r, e->addr + off)) && off % sc_size[cls] == 0 && e->nfree > 1) {
            unsigned idx = (unsigned)(off / sc_size[cls]);
            e->bitmap[idx >> 6] &= ~((uint64_t)1 << (idx & 63));
            e->nfree--;
            e->nquar++;
            entry = pm_stale_page(entry);
        }
        pm_write(r, e->addr + off, entry);
    }
    if (guard)
        pm_write(r, extent_end(e) - PAGE, pm_guard(e));
    pageheap.nslabs++;
    pageheap.npages_slab += e->npages;
    pageheap.npages_guard += guard;
}

/* The clean free run that starts at ADDR, when it holds NPAGES pages and no freed block's
 * first page; else NULL.  Lock held. */
static extent_t *clean_run_at(unsigned range, uintptr_t addr, size_t npages)
{
    const range_t *r = &region.ranges[range];
    if (addr >= ATOMIC_LOAD(&r->end))
        return NULL;
    pm_entry_t entry = pm_read(r, addr);
    extent_t *f = pm_desc(entry);
    if (!pm_is_free_edge(entry) || f->addr != addr || f->state != EXTENT_CLEAN || f->npages < npages ||
        (f->freed & EXTENT_FREED_INSIDE))
        return NULL;
    return f;
}

unsigned extent_alloc_slabs(unsigned cls, unsigned arena, unsigned want, extent_t **out)
{
    unsigned guard = extent_guards_wanted();
    size_t npages = sc_slab_pages[cls];
    unsigned n = 0;
    bool fault = false;
    lock_acquire(&pageheap.lock);
    extent_t *e = take(npages + guard, PAGE, true);
    if (e) {
        /* Pages not yet resident, of a class whose slab is written on every page as it is
         * made: the next slabs from the clean pages right after it, so that one call
         * faults them all in (each fault costs a trap of its own).  Not where a fault maps
         * a huge page: one fault serves 512 pages there, and the call would mostly find
         * them resident already. */
        fault = e->zeroed && !guard && sc_size[cls] <= PAGE && !extent_huge_faults();
        out[n++] = e;
        for (extent_t *f; fault && n < want && extent_desc_reserve(3) == 0 &&
                          (f = clean_run_at(e->range, extent_end(out[n - 1]), npages)) != NULL;)
            out[n++] = carve(f, f->addr, npages);
        for (unsigned i = 0; i < n; i++)
            make_slab(out[i], cls, arena, guard);
    }
    lock_release(&pageheap.lock);
    if (e && guard)
        extent_guard_install(extent_end(e) - PAGE, PAGE);
    /* (The slabs are the caller's: no purge can come between.) */
    if (fault && n * npages > 1)
        os_populate(e->addr, (n * npages) << LG_PAGE);
    /* Huge pages (thp:auto): a dense unit waiting. */
    if (unlikely(extent_huge_pending()))
        extent_huge_work(1);
    return n;
}

/* ---- free ------------------------------------------------------------------------ */

/* Give E back to the free runs; a large block leaves HINT (when not NULL) naming the run
 * it went into.  Lock held. */
static void free_locked(extent_t *e, uint64_t now, extent_hint_t *hint)
{
    TIDE_ASSERT(e->state == EXTENT_SLAB || e->state == EXTENT_LARGE);
    const range_t *r = extent_range(e);
    if (e->state == EXTENT_SLAB) {
        for (size_t i = 0; i < e->npages; i++)
            pm_write(r, e->addr + (i << LG_PAGE), PM_EMPTY);
        pageheap.nslabs--;
        pageheap.npages_slab -= e->npages;
    } else {
        extent_clear_edges(e);
        /* The program may still hold its address (pagemap.h). */
        pm_set_was_head(r, e->addr);
        pageheap.nlarge_free++;
        pageheap.npages_guard_large -= e->guard;
    }
    pageheap.npages_guard -= e->guard;
    bool large = e->state == EXTENT_LARGE;
    size_t npages = e->npages;
    pageheap.npages_active -= npages;
    extent_units_use(e->range, e->addr, npages, false);
    /* The block's first page goes on telling a second free that the block is free: the
     * run's first page when nothing merges before it, else an interior page saying so
     * (extent_keep_freed_head). */
    e->freed = large ? EXTENT_FREED_AT_START | EXTENT_FREED_INSIDE : 0;
    extent_insert_free(e, EXTENT_DIRTY, now);
    if (large && hint) {
        hint->addr = e->addr; /* the merged run's start */
        hint->pages = npages;
    }
}

void extent_free(extent_t *e, extent_hint_t *hint)
{
    unguard_tail(e);
    lock_acquire(&pageheap.lock);
    free_locked(e, os_now_ns(), hint);
    lock_release(&pageheap.lock);
}

void extent_free_many(extent_t *const *v, unsigned n, extent_hint_t *hint)
{
    if (n == 0)
        return;
    uint64_t now = os_now_ns();
    for (unsigned i = 0; i < n; i++)
        unguard_tail(v[i]);
    lock_acquire(&pageheap.lock);
    for (unsigned i = 0; i < n; i++)
        free_locked(v[i], now, hint);
    lock_release(&pageheap.lock);
}

void extent_free_aged(extent_t *const *v, unsigned n)
{
    if (n == 0)
        return;
    for (unsigned i = 0; i < n; i++)
        unguard_tail(v[i]);
    lock_acquire(&pageheap.lock);
    for (unsigned i = 0; i < n; i++)
        free_locked(v[i], v[i]->stamp, NULL);
    lock_release(&pageheap.lock);
}

/* ---- resize and move ------------------------------------------------------------- */

/* Whether a block may grow in place by extending the range by NPAGES: only while the
 * range stays within twice the pages in use, else it had better move into the free space
 * the range already has (VSZ stays a small factor of what is used).  Lock held. */
static bool may_extend(size_t npages)
{
    size_t mapped = region.heap_mapped >> LG_PAGE, active = pageheap.npages_active;
    return mapped + npages <= 2 * (active + npages) + (EXTEND_SLACK >> LG_PAGE);
}

/* A free run of at least EXTRA pages right after block E: the runs that follow it, in
 * whatever states, merged; and when they reach the end of the last range, the range is
 * extended under them first.  NULL when the pages after E are not free.  Lock held. */
static extent_t *free_after(extent_t *e, size_t extra)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        extent_t *first = extent_free_neighbour(e, false, EXTENT_NFREE), *last = first;
        size_t total = first ? first->npages : 0, runs = 1;
        while (last && total < extra && runs < SPAN_MAX_RUNS) {
            extent_t *x = extent_free_neighbour(last, false, EXTENT_NFREE);
            if (!x)
                break;
            total += x->npages;
            last = x;
            runs++;
        }
        if (total >= extra)
            return first == last ? first : extent_merge_span(first, last);
        uintptr_t reach = last ? extent_end(last) : extent_end(e);
        if (attempt > 0 || reach != ATOMIC_LOAD(&extent_range(e)->end) || e->range != region.nranges - 1 ||
            !may_extend(extra - total) || grow(extra - total) != 0)
            return NULL;
    }
    return NULL;
}

bool extent_resize(extent_t *e, size_t npages)
{
    bool ok = false, shrink = npages < extent_block_pages(e);
    /* A guard page moves to the new end: the old one is the block's own page or goes to
     * the free run cut off, the new one is a page of the block or of the run taken. */
    uintptr_t old_guard = extent_guard_page(e), new_guard = e->addr + (npages << LG_PAGE);
    if (e->guard && shrink) {
        /* Before the cut-off pages can be handed out (the page that becomes the guard lies
         * past the new size: its contents may go). */
        extent_guard_install(new_guard, PAGE);
        os_unguard(old_guard, PAGE);
    }
    lock_acquire(&pageheap.lock);
    if (extent_desc_reserve(1) != 0)
        goto out;
    if (shrink) {
        size_t cut = extent_block_pages(e) - npages;
        extent_clear_edges(e);
        pageheap.npages_active -= cut;
        e->npages = npages + e->guard;
        extent_units_use(e->range, extent_end(e), cut, false);
        extent_add_free_run(extent_end(e), cut, e->range, EXTENT_DIRTY, os_now_ns());
        ok = true;
    } else {
        size_t extra = npages - extent_block_pages(e);
        extent_t *n = free_after(e, extra);
        if (!n)
            goto out;
        extent_tree_remove(n);
        if (n->npages > extra) {
            n->addr += extra << LG_PAGE;
            n->npages -= extra;
            extent_set_free_edges(n);
            extent_tree_insert(n);
        } else {
            extent_desc_put(n);
        }
        extent_clear_edges(e);
        pageheap.npages_active += extra;
        extent_units_use(e->range, extent_end(e), extra, true);
        e->npages = npages + e->guard;
        ok = true;
    }
    int cls = sc_large_class_of_pages(npages);
    e->cls = cls < 0 ? EXTENT_NO_CLASS : (uint8_t)cls;
    extent_set_large_boundaries(e);
out:
    lock_release(&pageheap.lock);
    if (e->guard && shrink && !ok) {
        os_unguard(new_guard, PAGE);
        extent_guard_install(old_guard, PAGE);
    } else if (e->guard && !shrink && ok) {
        extent_guard_install(new_guard, PAGE);
        os_unguard(old_guard, PAGE);
    }
    return ok;
}

extent_t *extent_alloc_move_target(size_t npages, uintptr_t congruent, bool any_address)
{
    unsigned guard = extent_guards_wanted();
    size_t slack = any_address ? 0 : HUGEPAGE >> LG_PAGE;
    size_t need = npages + guard + slack, room = 2 * npages + guard + slack;
    extent_t *e = NULL;
    lock_acquire(&pageheap.lock);
    if (extent_desc_reserve(3) != 0)
        goto out;
    /* A block that had to leave its place is growing: the best fit among the runs with
     * room to double it, at their start, so it can keep growing in place; else any run
     * that holds it.  (Worst fit, the middle of the largest run, halved the largest run
     * on every relocation: under the soak the range grew to 5-8 GiB for 1 GiB live.) */
    extent_t *f = best_fit(room);
    if (!f && !(f = find_fit(need, 0)))
        goto out;
    /* The slack in NEED makes room for an address of every residue mod 2 MiB. */
    uintptr_t start = any_address ? f->addr : f->addr + ((congruent - f->addr) & (HUGEPAGE - 1));
    e = carve(f, start, npages + guard);
    e->state = EXTENT_LARGE;
    e->cls = EXTENT_NO_CLASS;
    e->guard = guard;
    /* Its boundaries now, not after the move: the heap walk (tide_check) may run meanwhile. */
    extent_set_large_boundaries(e);
    pageheap.nlarge_alloc++;
    pageheap.npages_guard += guard;
    pageheap.npages_guard_large += guard;
out:
    lock_release(&pageheap.lock);
    if (e && guard)
        extent_guard_install(extent_guard_page(e), PAGE);
    return e;
}

void extent_finish_move(extent_t *old, extent_t *target)
{
    unguard_tail(old); /* (a guarded block is copied, not moved: large.c) */
    lock_acquire(&pageheap.lock);
    extent_clear_edges(old);
    pageheap.npages_guard -= old->guard;
    pageheap.npages_guard_large -= old->guard;
    pageheap.npages_active -= old->npages;
    extent_units_use(old->range, old->addr, old->npages, false);
    pageheap.nlarge_free++;
    extent_insert_free(old, EXTENT_CLEAN, 0);
    int cls = sc_large_class_of_pages(extent_block_pages(target));
    target->cls = cls < 0 ? EXTENT_NO_CLASS : (uint8_t)cls;
    extent_set_large_boundaries(target);
    lock_release(&pageheap.lock);
}

/* ---- held blocks (guard:on) ------------------------------------------------------ */

void extent_hold(extent_t *e)
{
    lock_acquire(&pageheap.lock);
    TIDE_ASSERT(e->state == EXTENT_LARGE);
    /* Every page names it: a touch anywhere in it is explained (guard.c), and a second
     * free finds it at its first page. */
    const range_t *r = extent_range(e);
    for (size_t i = 0; i < e->npages; i++)
        pm_write(r, e->addr + (i << LG_PAGE), pm_guard(e));
    e->state = EXTENT_HELD;
    pageheap.npages_active -= e->npages;
    extent_units_use(e->range, e->addr, e->npages, false);
    pageheap.npages_held += e->npages;
    pageheap.npages_guard -= e->guard;
    pageheap.npages_guard_large -= e->guard;
    pageheap.nlarge_free++;
    lock_release(&pageheap.lock);
}

void extent_release_held(extent_t *e)
{
    /* Guard pages hold nothing (installing them dropped the pages): ordinary again, they
     * read as zero. */
    TIDE_CHECK(os_unguard(e->addr, extent_size(e)) == 0);
    lock_acquire(&pageheap.lock);
    TIDE_ASSERT(e->state == EXTENT_HELD);
    pageheap.npages_held -= e->npages;
    e->freed = EXTENT_FREED_AT_START | EXTENT_FREED_INSIDE; /* a free of it now is still a double free */
    extent_insert_free(e, EXTENT_CLEAN, 0);
    lock_release(&pageheap.lock);
}

/* ---- lookups and statistics ------------------------------------------------------ */

void extent_mark_sampled(extent_t *slab, uintptr_t block, bool sampled)
{
    TIDE_ASSERT(slab->state == EXTENT_SLAB && sc_size[slab->cls] >= PAGE);
    pm_entry_t e = pm_slab_page(slab, slab->cls, (block - slab->addr) >> LG_PAGE);
    pm_write(extent_range(slab), block, sampled ? pm_sampled_page(e) : e);
}

extent_t *extent_of_block(uintptr_t addr)
{
    const range_t *r = region_range_of(addr);
    if (!r || (addr & PAGE_MASK))
        return NULL;
    pm_entry_t entry = pm_read(r, addr);
    if (!pm_is_slab_page(entry) && !pm_is_large_edge(entry))
        return NULL;
    extent_t *e = pm_desc(entry);
    if (e->addr != addr || (e->state != EXTENT_LARGE && e->state != EXTENT_SLAB))
        return NULL;
    return e;
}

void extent_stats(extent_stats_t *out)
{
    lock_acquire(&pageheap.lock);
    out->active = pageheap.npages_active << LG_PAGE;
    out->slab_bytes = pageheap.npages_slab << LG_PAGE;
    out->dirty = pageheap.npages[EXTENT_DIRTY] << LG_PAGE;
    out->lazy = pageheap.npages[EXTENT_LAZY] << LG_PAGE;
    out->clean = pageheap.npages[EXTENT_CLEAN] << LG_PAGE;
    out->reserved = pageheap.npages_reserved << LG_PAGE;
    out->guards = pageheap.npages_guard << LG_PAGE;
    out->large_guards = pageheap.npages_guard_large << LG_PAGE;
    out->held = pageheap.npages_held << LG_PAGE;
    out->nlarge_alloc = pageheap.nlarge_alloc;
    out->nlarge_free = pageheap.nlarge_free;
    out->nslabs = pageheap.nslabs;
    lock_release(&pageheap.lock);
}
