/* SPDX-License-Identifier: MIT */
/*
 * page_heap.c - the page heap (src/extent.c, through extent.h) by itself: best fit, split,
 * coalescing, the merge of spans in different states, and descriptor accounting.
 *
 * The page heap is one per process, so each case runs in a forked child (one thread,
 * nothing else allocating there), through the child runner: the child takes every free
 * run the test process left as a block of its own, so that nothing but the runs the case
 * lays out can serve a request, then builds a workspace of known pages and calls extent_*
 * directly.  The policy (docs/architecture.md, "Large blocks and the page heap") fixes
 * where each request lands, so the cases assert exact addresses relative to each other.
 * After every step tide_check() walks the heap, and the descriptors are counted: the free
 * ones, the free runs in the trees and the blocks the child holds add up to the same
 * number throughout (nothing here makes or drops a descriptor but the page heap's own
 * splitting and merging, whose exact changes each step states).
 *
 * The child reports with write(2) and _exit: it must not allocate, or a new slab could take
 * pages of the runs under test.
 */
#include <criterion/criterion.h>
#include <sys/mman.h>

#include "support.h"

#include "extent.h"
#include "extent_internal.h"
#include "lock.h"
#include "pagemap.h"
#include "rbtree.h"

/* The child reports a failed check with TT_CHILD_CHECK (test/support/child.h): one line on
 * stderr, written without allocating, and exit status 1. */
#define CHECK TT_CHILD_CHECK

/* ---- the child's hold on the heap ------------------------------------------------------- */

#define MAX_HELD 65536
static extent_t *held[MAX_HELD]; /* every block the child took and still holds */
static size_t nheld;
static size_t desc_total; /* free descriptors + free runs + held blocks, at the start */

static size_t runs_in(unsigned state, size_t *pages)
{
    size_t n = 0, p = 0;
    for (rb_node_t *x = rb_first(&pageheap.free[state]); x; x = rb_next(x), n++)
        p += container_of(x, extent_t, rb)->npages;
    if (pages)
        *pages = p;
    return n;
}

static size_t descriptors(void)
{
    return pageheap.ndesc_free + runs_in(EXTENT_DIRTY, NULL) + runs_in(EXTENT_LAZY, NULL) +
           runs_in(EXTENT_CLEAN, NULL) + nheld;
}

/* The heap is sound and no descriptor went missing: checked after every step. */
#define STEP_OK(what)                                                                      \
    do {                                                                                   \
        CHECK(tide_check() == 0, "tide_check() failed %s", what);                           \
        CHECK(descriptors() == desc_total, "%s: %zu descriptors, %zu at the start", what,  \
              descriptors(), desc_total);                                                  \
        CHECK(pageheap.ndesc_free >= 16, "%s: only %zu free descriptors left", what,       \
              pageheap.ndesc_free);                                                        \
    } while (0)

static void hold(extent_t *e)
{
    CHECK(nheld < MAX_HELD, "more than %d blocks", MAX_HELD);
    held[nheld++] = e;
}

static void unhold(extent_t *e)
{
    for (size_t i = 0; i < nheld; i++)
        if (held[i] == e) {
            held[i] = held[--nheld];
            return;
        }
    tt_child_fail(__FILE__, __LINE__, "unhold", "%p is not held", (void *)e);
}

static extent_t *take(size_t npages, size_t align)
{
    extent_t *e = extent_alloc_large(npages, align, NULL);
    CHECK(e != NULL, "extent_alloc_large(%zu pages) failed", npages);
    CHECK(e->npages == npages && e->state == EXTENT_LARGE, "a block of %zu pages in state %u for %zu", e->npages,
          e->state, npages);
    CHECK(align <= PAGE || (e->addr & (align - 1)) == 0, "%#lx is not aligned to %zu", (unsigned long)e->addr, align);
    hold(e);
    return e;
}

static void give(extent_t *e)
{
    unhold(e);
    extent_free(e, NULL);
}

/* The runs left, from the test process, are taken whole as blocks: the largest of each
 * state, dirty first, as best fit hands out an exact fit whole. */
static void isolate(void)
{
    lock_acquire(&pageheap.lock);
    int err = extent_desc_reserve(256);
    lock_release(&pageheap.lock);
    CHECK(err == 0, "no descriptors");
    for (unsigned s = 0; s < EXTENT_NFREE; s++)
        while (!rb_empty(&pageheap.free[s])) {
            extent_t *last = container_of(rb_last(&pageheap.free[s]), extent_t, rb);
            uintptr_t addr = last->addr;
            size_t npages = last->npages;
            extent_t *e = take(npages, PAGE);
            CHECK(e->npages == npages, "the run at %#lx of %zu pages was split", (unsigned long)addr, npages);
        }
    desc_total = descriptors();
    STEP_OK("after taking every free run");
}

/* The state of a run, by name, for messages. */
static const char *state_name(unsigned s)
{
    static const char *const names[] = { "dirty", "lazy", "clean", "-", "purging", "large", "slab", "retired" };
    return s < sizeof names / sizeof *names ? names[s] : "?";
}

/* The free run that starts at ADDR must be NPAGES pages in STATE. */
static void expect_run(int line, uintptr_t addr, size_t npages, unsigned state)
{
    const range_t *r = region_range_of(addr);
    if (!r)
        tt_child_fail(__FILE__, line, "expect_run", "%#lx is in no range", (unsigned long)addr);
    pm_entry_t e = pm_read(r, addr);
    extent_t *f = pm_desc(e);
    if (!pm_is_free_edge(e) || f->addr != addr)
        tt_child_fail(__FILE__, line, "expect_run", "no free run starts at %#lx (entry %#llx)", (unsigned long)addr,
                   (unsigned long long)e);
    if (f->npages != npages || f->state != state)
        tt_child_fail(__FILE__, line, "expect_run", "the run at %#lx is %zu pages %s, want %zu pages %s", (unsigned long)addr,
                   f->npages, state_name(f->state), npages, state_name(state));
}
#define EXPECT_RUN(addr, npages, state) expect_run(__LINE__, (addr), (npages), (state))

/* No free run starts at ADDR (it was taken, or merged into one before it). */
static void expect_no_run(int line, uintptr_t addr)
{
    const range_t *r = region_range_of(addr);
    pm_entry_t e = r ? pm_read(r, addr) : 0;
    extent_t *f = pm_desc(e);
    if (pm_is_free_edge(e) && f->addr == addr && f->state < EXTENT_NFREE)
        tt_child_fail(__FILE__, line, "expect_no_run", "a free run of %zu pages %s starts at %#lx", f->npages, state_name(f->state),
                   (unsigned long)addr);
}
#define EXPECT_NO_RUN(addr) expect_no_run(__LINE__, (addr))

/* Block E starts at ADDR. */
#define EXPECT_AT(e, want)                                                                 \
    CHECK((e)->addr == (want), "the block is at %+ld pages from the workspace, want %+ld", \
          (long)(((e)->addr - ws) >> LG_PAGE), (long)(((want) - ws) >> LG_PAGE))

/* ---- the workspace: a layout of live blocks and free runs ------------------------------- */

enum { LIVE = 9 };

struct piece {
    size_t npages;
    unsigned state; /* LIVE or a free state */
    uintptr_t addr; /* filled in */
    extent_t *block; /* LIVE: the block */
};

/* A piece of NPAGES pages in STATE (LIVE or a free state); layout() fills in the rest. */
#define P(npages, state) { (npages), (state), 0, NULL }

static uintptr_t ws; /* where the workspace starts */

/* Purges the dirty runs the heap has (only the layout's) as a purge pass would, and puts
 * them back in STATE. */
static void purge_dirty_to(unsigned state)
{
    extent_t *runs[64];
    lock_acquire(&pageheap.lock);
    size_t n = extent_take_dirty(UINT64_MAX, false, runs, 64, SIZE_MAX, false);
    lock_release(&pageheap.lock);
    for (size_t i = 0; i < n; i++)
        CHECK(madvise((void *)runs[i]->addr, extent_size(runs[i]), state == EXTENT_CLEAN ? MADV_DONTNEED : MADV_FREE) ==
                  0,
              "madvise: %s", strerror(errno));
    lock_acquire(&pageheap.lock);
    extent_put_purged(runs, n, (extent_state_t)state);
    lock_release(&pageheap.lock);
}

/* Lays out P[0..N) from a fresh span, in that order, and returns where it starts.  The
 * span is fenced: a held block follows it, and whatever precedes it is no free run. */
static uintptr_t layout(struct piece *p, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += p[i].npages;
    /* Nothing is free: this grows the range, and the block starts the fresh span. */
    extent_t *span = take(total, PAGE);
    for (unsigned s = 0; s < EXTENT_NFREE; s++) {
        size_t pages;
        size_t runs = runs_in(s, &pages);
        CHECK(runs <= 1, "%zu %s runs beside the fresh span", runs, state_name(s));
        if (runs) /* the rest of the fresh span: fence it off */
            take(pages, PAGE);
    }
    ws = span->addr;
    give(span); /* one dirty run, the only free run of the heap */
    EXPECT_RUN(ws, total, EXTENT_DIRTY);
    uintptr_t at = ws;
    for (size_t i = 0; i < n; i++) {
        p[i].addr = at;
        p[i].block = take(p[i].npages, PAGE);
        CHECK(p[i].block->addr == at, "piece %zu is at %+ld pages, want %+ld", i, (long)((p[i].block->addr - ws) >> 12),
              (long)((at - ws) >> 12));
        at += p[i].npages << LG_PAGE;
    }
    /* The lazy pieces first, then the clean ones, each purged while the only dirty runs,
     * then the dirty ones. */
    static const unsigned order[] = { EXTENT_LAZY, EXTENT_CLEAN, EXTENT_DIRTY };
    for (unsigned k = 0; k < 3; k++) {
        for (size_t i = 0; i < n; i++)
            if (p[i].state == order[k]) {
                give(p[i].block);
                p[i].block = NULL;
            }
        if (order[k] != EXTENT_DIRTY)
            purge_dirty_to(order[k]);
    }
    for (size_t i = 0; i < n; i++)
        if (p[i].state != LIVE && (i == 0 || p[i - 1].state != p[i].state))
            CHECK(pm_is_free_edge(pm_read(region_range_of(p[i].addr), p[i].addr)), "piece %zu is not free", i);
    STEP_OK("after the layout");
    return ws;
}

/* ---- the cases (each runs in a child) --------------------------------------------------- */

#define PG(k) ((uintptr_t)(k) << LG_PAGE)

/* The smallest run that fits, lowest address first; a run is split only when it is
 * larger than the request, and the rest stays free where it was. */
static int best_fit_case(void *unused)
{
    isolate();
    struct piece p[] = {
        P(1, LIVE), P(8, EXTENT_DIRTY), P(1, LIVE), P(4, EXTENT_DIRTY), P(1, LIVE), P(6, EXTENT_DIRTY),
        P(1, LIVE), P(4, EXTENT_DIRTY), P(1, LIVE), P(5, EXTENT_DIRTY), P(1, LIVE),
    };
    layout(p, sizeof p / sizeof *p);
    uintptr_t a8 = p[1].addr, b4 = p[3].addr, c6 = p[5].addr, d4 = p[7].addr, e5 = p[9].addr;
    size_t d0 = pageheap.ndesc_free;

    extent_t *x = take(4, PAGE); /* two exact fits: the lower one */
    EXPECT_AT(x, b4);
    EXPECT_NO_RUN(b4);
    CHECK(pageheap.ndesc_free == d0, "an exact fit took a descriptor");
    STEP_OK("after the first 4 pages");
    x = take(4, PAGE); /* the other one */
    EXPECT_AT(x, d4);
    STEP_OK("after the second 4 pages");
    x = take(5, PAGE); /* 5 fits exactly: not the 6 or the 8 at lower addresses */
    EXPECT_AT(x, e5);
    STEP_OK("after 5 pages");
    x = take(5, PAGE); /* the 6 is the smallest that holds 5; its last page stays free */
    EXPECT_AT(x, c6);
    EXPECT_RUN(c6 + PG(5), 1, EXTENT_DIRTY);
    CHECK(pageheap.ndesc_free == d0 - 1, "a split took %zd descriptors", (ssize_t)(d0 - pageheap.ndesc_free));
    STEP_OK("after a split");
    x = take(1, PAGE); /* the page left over, not a page of the 8 */
    EXPECT_AT(x, c6 + PG(5));
    EXPECT_RUN(a8, 8, EXTENT_DIRTY);
    STEP_OK("after 1 page");
    x = take(9, PAGE); /* nothing holds 9: the range grows, the 8 stays */
    CHECK(x->addr >= ws + PG(33) || x->addr + PG(9) <= ws, "9 pages came from inside the workspace");
    EXPECT_RUN(a8, 8, EXTENT_DIRTY);
    STEP_OK("after growing");
    return 0;
}

/* Dirty runs before lazy ones before clean ones, whatever their sizes and addresses; a
 * block from a clean run is known to be zeroed, one from any other is not. */
static int state_order_case(void *unused)
{
    isolate();
    struct piece p[] = {
        P(1, LIVE), P(4, EXTENT_CLEAN), P(1, LIVE), P(4, EXTENT_LAZY), P(1, LIVE), P(8, EXTENT_DIRTY),
        P(1, LIVE), P(2, EXTENT_LAZY), P(1, LIVE), P(2, EXTENT_CLEAN), P(1, LIVE),
    };
    layout(p, sizeof p / sizeof *p);
    uintptr_t c4 = p[1].addr, l4 = p[3].addr, d8 = p[5].addr, l2 = p[7].addr, c2 = p[9].addr;
    struct {
        size_t npages;
        uintptr_t want;
        bool zeroed;
    } steps[] = {
        { 4, d8, false },          /* dirty first: the 8, not the exact fits before it */
        { 4, d8 + PG(4), false },  /* the rest of it */
        { 2, l2, false },          /* then lazy, the smallest first */
        { 4, l4, false },
        { 2, c2, true },           /* then clean */
        { 4, c4, true },
    };
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
        extent_t *x = take(steps[i].npages, PAGE);
        EXPECT_AT(x, steps[i].want);
        CHECK(x->zeroed == steps[i].zeroed, "step %zu: zeroed is %d", i, x->zeroed);
        STEP_OK("after a step");
    }
    return 0;
}

/* Carving a block out of a run leaves what is before and after it free, in the run's
 * state, and takes one descriptor for each such piece; an aligned block starts at the
 * first aligned page of the run. */
static int split_case(void *unused)
{
    isolate();
    struct piece p[] = { P(1, LIVE), P(32, EXTENT_LAZY), P(1, LIVE) };
    layout(p, sizeof p / sizeof *p);
    uintptr_t r = p[1].addr;
    size_t d0 = pageheap.ndesc_free;

    extent_t *a = take(5, PAGE);
    EXPECT_AT(a, r);
    EXPECT_RUN(r + PG(5), 27, EXTENT_LAZY);
    CHECK(pageheap.ndesc_free == d0 - 1, "one piece left, %zd descriptors taken", (ssize_t)(d0 - pageheap.ndesc_free));
    STEP_OK("after a split at the start");

    const size_t align = 8 * PAGE;
    uintptr_t rest = r + PG(5), start = ALIGN_UP(rest, align);
    size_t lead = (start - rest) >> LG_PAGE, trail = 27 - lead - 4;
    extent_t *b = take(4, align);
    EXPECT_AT(b, start);
    if (lead)
        EXPECT_RUN(rest, lead, EXTENT_LAZY);
    EXPECT_RUN(start + PG(4), trail, EXTENT_LAZY);
    CHECK(pageheap.ndesc_free == d0 - 1 - (lead > 0) - 1, "lead %zu, trail %zu: %zd descriptors taken", lead, trail,
          (ssize_t)(d0 - pageheap.ndesc_free));
    const range_t *rg = region_range_of(b->addr);
    CHECK(pm_read(rg, b->addr) == pm_large_head(b, b->cls) && pm_read(rg, b->addr + PG(3)) == pm_large_tail(b),
          "the aligned block's edges are not written");
    STEP_OK("after an aligned split");

    /* The first block, freed, is dirty: it does not join the lazy lead after it. */
    give(a);
    EXPECT_RUN(r, 5, EXTENT_DIRTY);
    if (lead)
        EXPECT_RUN(rest, lead, EXTENT_LAZY);
    STEP_OK("after freeing the first block");
    return 0;
}

/* A freed block joins its free neighbours in the same state (each join gives a
 * descriptor back), never those in another state; purged runs join too. */
static int coalesce_case(void *unused)
{
    isolate();
    struct piece p[] = {
        P(1, LIVE), P(2, LIVE), P(3, LIVE), P(4, LIVE), P(2, LIVE), P(3, LIVE), P(4, LIVE), P(1, LIVE),
    };
    layout(p, sizeof p / sizeof *p);
    size_t d0 = pageheap.ndesc_free;

    give(p[2].block); /* between two live blocks: alone */
    EXPECT_RUN(p[2].addr, 3, EXTENT_DIRTY);
    CHECK(pageheap.ndesc_free == d0, "a free without a neighbour changed the descriptors");
    STEP_OK("after the middle block");
    give(p[1].block); /* joins the run after it */
    EXPECT_RUN(p[1].addr, 5, EXTENT_DIRTY);
    EXPECT_NO_RUN(p[2].addr);
    CHECK(pageheap.ndesc_free == d0 + 1, "a join gave back %zd descriptors", (ssize_t)(pageheap.ndesc_free - d0));
    STEP_OK("after the block before it");
    give(p[3].block); /* joins the run before it */
    EXPECT_RUN(p[1].addr, 9, EXTENT_DIRTY);
    CHECK(pageheap.ndesc_free == d0 + 2, "two joins gave back %zd descriptors", (ssize_t)(pageheap.ndesc_free - d0));
    STEP_OK("after the block after it");

    /* Across states: the 9 pages become clean; beside them, a lazy run between two dirty
     * ones; nothing joins. */
    purge_dirty_to(EXTENT_CLEAN);
    EXPECT_RUN(p[1].addr, 9, EXTENT_CLEAN);
    give(p[5].block);
    purge_dirty_to(EXTENT_LAZY);
    EXPECT_RUN(p[5].addr, 3, EXTENT_LAZY);
    size_t d1 = pageheap.ndesc_free;
    give(p[4].block); /* clean before it, lazy after it */
    give(p[6].block); /* lazy before it, live after it */
    EXPECT_RUN(p[1].addr, 9, EXTENT_CLEAN);
    EXPECT_RUN(p[4].addr, 2, EXTENT_DIRTY);
    EXPECT_RUN(p[5].addr, 3, EXTENT_LAZY);
    EXPECT_RUN(p[6].addr, 4, EXTENT_DIRTY);
    CHECK(pageheap.ndesc_free == d1, "runs in different states were joined");
    STEP_OK("after freeing beside a lazy run");
    /* Purged alike, the three join; the clean run before them stays apart. */
    purge_dirty_to(EXTENT_LAZY);
    EXPECT_RUN(p[4].addr, 9, EXTENT_LAZY);
    EXPECT_RUN(p[1].addr, 9, EXTENT_CLEAN);
    CHECK(pageheap.ndesc_free == d1 + 2, "three lazy runs gave back %zd descriptors", (ssize_t)(pageheap.ndesc_free - d1));
    STEP_OK("after purging them alike");
    return 0;
}

/* When no single run holds a request, adjacent runs in different states are merged into
 * one in the least clean of their states (which may then join a run in that state beyond
 * the span), and the block is carved from its start. */
static int span_merge_case(void *unused)
{
    isolate();
    struct piece p[] = {
        P(1, LIVE), P(4, EXTENT_DIRTY), P(4, EXTENT_LAZY), P(4, EXTENT_CLEAN), P(1, LIVE),
        P(2, EXTENT_DIRTY), P(4, EXTENT_LAZY), P(6, EXTENT_DIRTY), P(1, LIVE),
    };
    layout(p, sizeof p / sizeof *p);
    uintptr_t d4 = p[1].addr, d2 = p[5].addr;
    size_t dirty0 = pageheap.npages[EXTENT_DIRTY], lazy0 = pageheap.npages[EXTENT_LAZY],
           clean0 = pageheap.npages[EXTENT_CLEAN];
    CHECK(dirty0 == 12 && lazy0 == 8 && clean0 == 4, "the layout holds %zu dirty, %zu lazy, %zu clean pages", dirty0,
          lazy0, clean0);

    /* 10 pages: the largest dirty run (6) and the lazy 4 before it make a span; merged, it
     * is dirty and joins the dirty 2 before it, so the block starts there. */
    size_t d0 = pageheap.ndesc_free;
    extent_t *x = take(10, PAGE);
    EXPECT_AT(x, d2);
    CHECK(!x->zeroed, "a block from a dirty span is not zeroed");
    EXPECT_RUN(d2 + PG(10), 2, EXTENT_DIRTY);
    CHECK(pageheap.ndesc_free == d0 + 2 - 1, "a merge of 3 runs and a split: %zd descriptors",
          (ssize_t)(pageheap.ndesc_free - d0));
    CHECK(pageheap.npages[EXTENT_LAZY] == 4, "%zu lazy pages left", pageheap.npages[EXTENT_LAZY]);
    STEP_OK("after the span of 3 runs");

    /* 11 pages: only the dirty 4, lazy 4 and clean 4 side by side hold them. */
    d0 = pageheap.ndesc_free;
    x = take(11, PAGE);
    EXPECT_AT(x, d4);
    CHECK(!x->zeroed, "a block from a dirty span is not zeroed");
    EXPECT_RUN(d4 + PG(11), 1, EXTENT_DIRTY);
    CHECK(pageheap.npages[EXTENT_LAZY] == 0 && pageheap.npages[EXTENT_CLEAN] == 0, "%zu lazy, %zu clean pages left",
          pageheap.npages[EXTENT_LAZY], pageheap.npages[EXTENT_CLEAN]);
    CHECK(pageheap.ndesc_free == d0 + 2 - 1, "a merge of 3 runs and a split: %zd descriptors",
          (ssize_t)(pageheap.ndesc_free - d0));
    STEP_OK("after the span of 3 states");
    return 0;
}

/* A decay pass that may purge fewer pages than the oldest run holds takes only its high
 * end: the rest stays dirty, first in the age order with its stamp, and the pages
 * taken go back clean beside it. */
static int take_exact_case(void *unused)
{
    isolate();
    struct piece p[] = { P(1, LIVE), P(8, LIVE), P(1, LIVE), P(4, LIVE), P(1, LIVE) };
    layout(p, sizeof p / sizeof *p);
    give(p[1].block); /* the oldest */
    give(p[3].block);
    extent_t *runs[64];
    lock_acquire(&pageheap.lock);
    uint64_t stamp = extent_oldest_dirty();
    size_t n = extent_take_dirty(UINT64_MAX, false, runs, 64, 3, true);
    CHECK(n == 1, "%zu runs taken for 3 pages", n);
    CHECK(runs[0]->addr == p[1].addr + PG(5) && runs[0]->npages == 3 && runs[0]->state == EXTENT_PURGING,
          "took %zu pages at %+ld pages, state %s", runs[0]->npages, (long)((runs[0]->addr - p[1].addr) >> 12),
          state_name(runs[0]->state));
    CHECK(pageheap.npages[EXTENT_DIRTY] == 12, "%zu pages counted dirty, want 12 (purging pages count)",
          pageheap.npages[EXTENT_DIRTY]);
    extent_t *first = container_of(list_first(&pageheap.dirty_lru), extent_t, lru);
    CHECK(first->addr == p[1].addr && first->npages == 5 && first->stamp == stamp,
          "the oldest run is now %zu pages at %+ld pages", first->npages, (long)((first->addr - p[1].addr) >> 12));
    extent_put_purged(runs, n, EXTENT_CLEAN);
    lock_release(&pageheap.lock);
    EXPECT_RUN(p[1].addr, 5, EXTENT_DIRTY);
    EXPECT_RUN(p[1].addr + PG(5), 3, EXTENT_CLEAN);
    EXPECT_RUN(p[3].addr, 4, EXTENT_DIRTY);
    STEP_OK("after a pass took 3 of the oldest run's 8 pages");
    return 0;
}

/* ---- the tests ---------------------------------------------------------------------------- */

static void in_child(int (*fn)(void *))
{
    /* (the configuration matrix, test/support/support.h) */
    tt_skip_under("guard:on", "lays out blocks page by page; guard:on adds a guard page to every block");
    free(malloc(1)); /* tide is up */
    tt_assert_child_ok(fn, NULL, 120);
}

Test(page_heap, best_fit_takes_the_smallest_run_lowest_address_first, .timeout = 180) { in_child(best_fit_case); }
Test(page_heap, dirty_before_lazy_before_clean, .timeout = 180) { in_child(state_order_case); }
Test(page_heap, split_leaves_the_right_pieces_free, .timeout = 180) { in_child(split_case); }
Test(page_heap, coalesces_with_neighbours_in_the_same_state_only, .timeout = 180) { in_child(coalesce_case); }
Test(page_heap, merges_a_span_of_states_when_no_run_fits, .timeout = 180) { in_child(span_merge_case); }
Test(page_heap, a_decay_pass_takes_the_high_end_of_the_oldest_run, .timeout = 180) { in_child(take_exact_case); }

/* The range's first 2 MiB unit holds the guard page and nothing else (extent_init): a unit
 * with a guard in it is never a huge page, so any page of it in use would cost every fork
 * a page-table entry to copy.  The first blocks, small and large, land past it. */
Test(page_heap, the_ranges_first_unit_holds_only_its_guard)
{
    enum { N = 256 };
    void *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = malloc((size_t)16 << (i % 14));
        cr_assert_not_null(p[i]);
        memset(p[i], 1, 16);
    }
    const range_t *r = &region.ranges[0];
    unsigned char vec[HUGEPAGE >> LG_PAGE];
    cr_assert_eq(mincore((void *)r->base, HUGEPAGE, vec), 0);
    unsigned resident = 0;
    for (size_t i = 0; i < sizeof vec; i++)
        resident += vec[i] & 1;
    cr_expect_eq(resident, 0, "%u pages of the range's first unit are resident", resident);
    pm_entry_t e = pm_read(r, r->base);
    cr_expect(pm_is_reserved(e) && pm_reserved_pages(e) >= HUGEPAGE >> LG_PAGE,
              "the pages kept out of use at the range's base are not its whole first unit");
    for (int i = 0; i < N; i++) {
        cr_expect_geq((uintptr_t)p[i], r->base + HUGEPAGE, "a block of %zu B at %p, in the first unit",
                      (size_t)16 << (i % 14), p[i]);
        free(p[i]);
    }
}
