/* SPDX-License-Identifier: MIT */
/*
 * pagemap.c - the page map's entries (src/pagemap.h) by themselves: every kind of entry
 * its constructors make reads back as that kind and nothing else, with its descriptor,
 * class, slab page or length; each of the 256 tags decodes to at most one kind; entries
 * go where pm_slot says, one per page below the range's base; and the constructors'
 * TIDE_ASSERTs stop what the format cannot hold.
 *
 * The entries are written into a page map of the test's own (an array below a made-up
 * range's base), never into tide's: nothing here goes through malloc or the heap.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <sys/resource.h>

#include "support.h"

#include "pagemap.h"
#include "size_class.h"
#include "size_class_table.h"

/* Descriptor addresses: the lowest, a real one, the highest 48-bit one. */
static char a_desc[64] __attribute__((aligned(64)));
static const uintptr_t descs[] = { 0x10, (uintptr_t)a_desc, ((uintptr_t)1 << 47) - 64, PM_PTR_MASK & ~(uintptr_t)7 };
#define NDESCS (sizeof descs / sizeof *descs)

enum kind { K_EMPTY, K_SLAB, K_LARGE, K_FREE, K_FREED, K_RESERVED, K_NONE };
static const char *const kind_names[] = { "empty", "slab page", "large edge", "free edge", "freed head", "reserved", "nothing" };

/* What the readers say E is; fails when two of them claim it. */
static enum kind kind_of(pm_entry_t e)
{
    int n = pm_is_slab_page(e) + pm_is_large_edge(e) + pm_is_free_edge(e) + pm_is_freed_head(e) + pm_is_reserved(e);
    cr_assert_leq(n, 1, "entry %#llx is %d kinds at once (slab %d, large %d, free %d, freed %d, reserved %d)",
                  (unsigned long long)e, n, pm_is_slab_page(e), pm_is_large_edge(e), pm_is_free_edge(e),
                  pm_is_freed_head(e), pm_is_reserved(e));
    if (pm_is_slab_page(e))
        return K_SLAB;
    if (pm_is_large_edge(e))
        return K_LARGE;
    if (pm_is_free_edge(e))
        return K_FREE;
    if (pm_is_freed_head(e))
        return K_FREED;
    if (pm_is_reserved(e))
        return K_RESERVED;
    return e == PM_EMPTY ? K_EMPTY : K_NONE;
}

static void expect_kind(pm_entry_t e, enum kind want, const char *what)
{
    enum kind k = kind_of(e);
    cr_assert_eq(k, want, "%s (%#llx) reads as %s, not %s", what, (unsigned long long)e, kind_names[k],
                 kind_names[want]);
}

/* Only a slab page passes the free fast path's test, and only a slab page or a cached
 * large head carries a class. */
static void expect_class(pm_entry_t e, unsigned cls, const char *what)
{
    cr_assert_eq(pm_class(e), cls, "%s: pm_class %u, want %u", what, pm_class(e), cls);
    if (cls < SC_NSMALL && pm_is_slab_page(e))
        cr_assert_eq(pm_slab_class(e), cls, "%s: pm_slab_class %u, want %u", what, pm_slab_class(e), cls);
    else
        cr_assert_geq(pm_slab_class(e), SC_NSMALL, "%s passes the free fast path's slab test", what);
}

Test(pagemap, the_tags_of_classes_and_kinds_do_not_overlap)
{
    cr_assert_lt(SC_NCACHED, PM_TAG_LARGE, "the tag of class %d meets PM_TAG_LARGE", SC_NCACHED - 1);
    cr_assert_geq(PM_NO_CLASS, SC_NCACHED, "PM_NO_CLASS is a class");
    cr_assert_lt(PM_TAG_FREED, 1u << (64 - PM_TAG_SHIFT));
    cr_assert_lt(PM_TAG_RESERVED, 1u << (64 - PM_TAG_SHIFT));
    cr_assert_geq(PM_TAG_SHIFT, PM_PAGE_SHIFT + 3, "the slab page index runs into the tag");
    cr_assert_eq(PM_PTR_MASK, ((uint64_t)1 << PM_PAGE_SHIFT) - 1, "the descriptor runs into the slab page index");
    for (unsigned c = 0; c < SC_NSMALL; c++)
        cr_assert_leq(sc_slab_pages[c], PM_PAGE_MASK + 1u, "a slab of class %u has more pages than the index holds", c);
    expect_kind(PM_EMPTY, K_EMPTY, "PM_EMPTY");
    expect_class(PM_EMPTY, PM_NO_CLASS, "PM_EMPTY");
}

Test(pagemap, slab_pages_read_back_with_their_slab_class_and_index)
{
    char what[96];
    for (size_t d = 0; d < NDESCS; d++)
        for (unsigned c = 0; c < SC_NSMALL; c++)
            for (size_t i = 0; i <= PM_PAGE_MASK; i++) {
                pm_entry_t e = pm_slab_page((void *)descs[d], c, i);
                snprintf(what, sizeof what, "slab page %zu of class %u, slab %#lx", i, c, (unsigned long)descs[d]);
                expect_kind(e, K_SLAB, what);
                expect_class(e, c, what);
                cr_assert_eq((uintptr_t)pm_desc(e), descs[d], "%s: descriptor %p", what, pm_desc(e));
                /* Every byte of the page finds the slab's first byte. */
                const uintptr_t slab = (uintptr_t)0x7f0000000000 + (d << 30), page = slab + (i << LG_PAGE);
                static const uintptr_t offs[] = { 0, 8, 16, PAGE / 2, PAGE - 1 };
                for (size_t o = 0; o < sizeof offs / sizeof *offs; o++)
                    cr_assert_eq(pm_slab_base(e, page + offs[o]), slab, "%s: pm_slab_base(+%#lx) is %#lx, want %#lx",
                                 what, (unsigned long)((i << LG_PAGE) + offs[o]),
                                 (unsigned long)pm_slab_base(e, page + offs[o]), (unsigned long)slab);
            }
}

Test(pagemap, large_edges_read_back_with_their_block_and_class)
{
    char what[96];
    for (size_t d = 0; d < NDESCS; d++) {
        void *b = (void *)descs[d];
        for (unsigned c = SC_NSMALL; c < SC_NCACHED; c++) {
            pm_entry_t e = pm_large_head(b, c);
            snprintf(what, sizeof what, "the head of a block of class %u at %p", c, b);
            expect_kind(e, K_LARGE, what);
            expect_class(e, c, what);
            cr_assert_eq(pm_desc(e), b, "%s: descriptor %p", what, pm_desc(e));
        }
        pm_entry_t h = pm_large_head(b, PM_NO_CLASS), t = pm_large_tail(b);
        snprintf(what, sizeof what, "the head of a classless block at %p", b);
        expect_kind(h, K_LARGE, what);
        expect_class(h, PM_NO_CLASS, what);
        cr_assert_eq(pm_desc(h), b, "%s: descriptor %p", what, pm_desc(h));
        snprintf(what, sizeof what, "the tail of a block at %p", b);
        expect_kind(t, K_LARGE, what);
        expect_class(t, PM_NO_CLASS, what); /* interior pages may hold stale tails */
        cr_assert_eq(pm_desc(t), b, "%s: descriptor %p", what, pm_desc(t));
        /* The tail of a cached block is its classless head: the same block, no class. */
        cr_assert_eq(t, h, "the tail and the classless head of %p differ", b);
    }
}

Test(pagemap, free_edges_freed_heads_and_reserved_pages_read_back_as_themselves)
{
    char what[96];
    for (size_t d = 0; d < NDESCS; d++) {
        pm_entry_t e = pm_free_edge((void *)descs[d]);
        snprintf(what, sizeof what, "the edge of a free run at %#lx", (unsigned long)descs[d]);
        expect_kind(e, K_FREE, what);
        expect_class(e, PM_NO_CLASS, what); /* interior pages may hold stale edges */
        cr_assert_eq((uintptr_t)pm_desc(e), descs[d], "%s: descriptor %p", what, pm_desc(e));
        e = pm_freed_head((void *)descs[d]);
        snprintf(what, sizeof what, "a freed head in the run at %#lx", (unsigned long)descs[d]);
        expect_kind(e, K_FREED, what);
        expect_class(e, PM_NO_CLASS, what);
        cr_assert_eq((uintptr_t)pm_desc(e), descs[d], "%s: descriptor %p", what, pm_desc(e));
    }
    static const size_t pages[] = { 1, 2, 7, 512, (size_t)1 << 34, PM_PTR_MASK };
    for (size_t i = 0; i < sizeof pages / sizeof *pages; i++) {
        pm_entry_t e = pm_reserved(pages[i]);
        snprintf(what, sizeof what, "%zu reserved pages", pages[i]);
        expect_kind(e, K_RESERVED, what);
        expect_class(e, PM_NO_CLASS, what);
        cr_assert_eq(pm_reserved_pages(e), pages[i], "%s: %zu pages", what, pm_reserved_pages(e));
    }
}

/* Every tag, with any descriptor bits, is one kind or none: the classes' tags are slab
 * pages then cached large heads, then the fixed tags; the rest read as nothing. */
Test(pagemap, each_tag_decodes_to_one_kind)
{
    for (unsigned tag = 0; tag < 256; tag++)
        for (size_t d = 0; d < NDESCS; d++) {
            pm_entry_t e = ((uint64_t)tag << PM_TAG_SHIFT) | (tag ? descs[d] : 0);
            enum kind want;
            unsigned cls = PM_NO_CLASS;
            if (tag == 0)
                want = K_EMPTY;
            else if (tag <= SC_NSMALL)
                want = K_SLAB, cls = tag - 1;
            else if (tag <= SC_NCACHED)
                want = K_LARGE, cls = tag - 1;
            else if (tag == PM_TAG_LARGE)
                want = K_LARGE;
            else if (tag == PM_TAG_FREE)
                want = K_FREE;
            else if (tag == PM_TAG_FREED)
                want = K_FREED;
            else if (tag == PM_TAG_RESERVED)
                want = K_RESERVED;
            else
                want = K_NONE;
            char what[64];
            snprintf(what, sizeof what, "tag %#x", tag);
            expect_kind(e, want, what);
            expect_class(e, cls, what);
            if (want != K_EMPTY && want != K_NONE && want != K_RESERVED)
                cr_assert_eq((uintptr_t)pm_desc(e), descs[d], "%s: descriptor %p", what, pm_desc(e));
        }
}

/* The free fast path's one test (pm_starts_small_region) says yes exactly where the full
 * one does: a slab page of a small class, and an offset that starts one of its regions.
 * Every tag and page index, every 16-byte offset of the page (regions are 16-aligned),
 * whatever the descriptor bits. */
Test(pagemap, the_fast_region_test_agrees_with_the_full_one_for_every_tag)
{
    static char slab[8 * 4096] __attribute__((aligned(4096)));
    for (unsigned tag = 0; tag < 256; tag++)
        for (unsigned page = 0; page <= PM_PAGE_MASK; page++) {
            pm_entry_t e = ((uint64_t)tag << PM_TAG_SHIFT) | ((uint64_t)page << PM_PAGE_SHIFT) | (uintptr_t)a_desc;
            bool slab_page = tag >= 1 && tag <= SC_NSMALL;
            if (slab_page)
                cr_assert_eq(pm_slab_class_index(e), pm_slab_class(e), "tag %#x", tag);
            for (uintptr_t off = 0; off < 4096; off += 16) {
                uintptr_t a = (uintptr_t)slab + page * 4096 + off;
                bool want = slab_page && sc_starts_region(pm_slab_class(e), a - pm_slab_base(e, a));
                cr_assert_eq(pm_starts_small_region(e, a), want, "tag %#x, page %u, offset %#lx: %d", tag, page,
                             (unsigned long)off, !want);
            }
        }
}

/* ---- where entries live ----------------------------------------------------------------- */

#define NPAGES 64
static pm_entry_t map[NPAGES]; /* the page map of a made-up range of NPAGES heap pages */

static range_t fake_range(void)
{
    uintptr_t base = (uintptr_t)(map + NPAGES);
    return (range_t){ .base = base, .end = base + NPAGES * PAGE, .pm_lo = (uintptr_t)map };
}

Test(pagemap, each_page_has_its_own_entry_below_the_base)
{
    memset(map, 0, sizeof map);
    range_t r = fake_range();
    for (size_t i = 0; i < NPAGES; i++) {
        uintptr_t page = r.base + i * PAGE;
        cr_assert_eq(pm_slot(&r, page), &map[NPAGES - 1 - i], "page %zu's entry is not the %zu-th below the base", i,
                     i + 1);
        cr_assert_eq(pm_slot(&r, page + PAGE - 1), pm_slot(&r, page), "the last byte of page %zu has another entry", i);
    }
    /* One entry of each kind, on every third page; the pages between stay empty. */
    for (size_t i = 0; i < NPAGES; i += 3) {
        uintptr_t page = r.base + i * PAGE;
        pm_entry_t e;
        switch (i / 3 % 6) {
        case 0: e = pm_slab_page(a_desc, (unsigned)(i % SC_NSMALL), i % 7); break;
        case 1: e = pm_large_head(a_desc, SC_NSMALL + (unsigned)(i % (SC_NCACHED - SC_NSMALL))); break;
        case 2: e = pm_large_tail(a_desc); break;
        case 3: e = pm_free_edge(a_desc); break;
        case 4: e = pm_freed_head(a_desc); break;
        default: e = pm_reserved(i + 1); break;
        }
        pm_write(&r, page, e);
        cr_assert_eq(pm_read(&r, page), e, "page %zu does not read back what was written", i);
        cr_assert_eq(pm_read(&r, page + 123), e, "page %zu: an interior byte reads another entry", i);
        cr_assert_eq(pm_read_offset(r.base, i * PAGE + 456), e, "page %zu: pm_read_offset reads another entry", i);
    }
    for (size_t i = 0; i < NPAGES; i++)
        if (i % 3)
            cr_assert_eq(pm_read(&r, r.base + i * PAGE), PM_EMPTY, "page %zu was written by its neighbour's write", i);
}

/* ---- what the format cannot hold ----------------------------------------------------------- */

static int slab_page_of_a_large_class(void *unused)
{
    pm_slab_page(a_desc, SC_NSMALL, 0);
    return 0;
}
static int slab_page_beyond_the_index(void *unused)
{
    pm_slab_page(a_desc, 0, PM_PAGE_MASK + 1);
    return 0;
}
static int descriptor_beyond_48_bits(void *unused)
{
    pm_free_edge((void *)((uintptr_t)1 << 48));
    return 0;
}
static int reserved_beyond_48_bits(void *unused)
{
    pm_reserved((size_t)1 << 48);
    return 0;
}

/* In the child: no core file for the abort. */
static int without_core(void *fn)
{
    struct rlimit rl = { 0, 0 };
    setrlimit(RLIMIT_CORE, &rl);
    return ((int (*)(void *))fn)(NULL);
}

/* FN must stop at a TIDE_ASSERT of pagemap.h whose condition holds COND (this build has
 * them on). */
static void expect_assert(int (*fn)(void *), const char *cond)
{
    struct tt_child_spec spec = { .fn = without_core, .arg = (void *)fn, .timeout_s = 60 };
    struct tt_child c;
    cr_assert(tt_child_run(&spec, &c) == 0, "fork: %s", strerror(errno));
    char how[128];
    cr_assert(tt_child_signalled(&c, SIGABRT), "%s: the child %s; stderr: %s", cond, tt_child_how(&c, how, sizeof how),
              c.err);
    cr_assert(strstr(c.err, "tide: internal error at ") && strstr(c.err, "pagemap.h:") && strstr(c.err, cond),
              "%s: stderr was \"%s\"", cond, c.err);
    tt_child_free(&c);
}

Test(pagemap, the_constructors_refuse_what_the_format_cannot_hold, .timeout = 120)
{
    /* The message holds the condition with its macros expanded (cls < 35 ...). */
    expect_assert(slab_page_of_a_large_class, "cls < ");
    expect_assert(slab_page_beyond_the_index, "page <= ");
    expect_assert(descriptor_beyond_48_bits, "low <= ");
    expect_assert(reserved_beyond_48_bits, "low <= ");
}
