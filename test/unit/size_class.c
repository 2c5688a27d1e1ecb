/* SPDX-License-Identifier: MIT */
/*
 * size_class.c - size_class.h and its generated table (size_class_table.h) against the
 * documented rule (docs/architecture.md, "Size classes"): a 16-byte quantum, 4 classes per
 * doubling; small classes up to 14336 in slabs of 1-7 pages that waste nothing and hold
 * at least 2 regions; large cached classes up to 64 KiB; whole pages above.  The rule
 * is recomputed here (support.h's tt_class_of), not read from the table.
 */
#include <criterion/criterion.h>

#include "support.h"

#include "size_class.h"

Test(size_class, the_table_is_the_documented_one)
{
    size_t want[64];
    size_t n = tt_classes(want, 64);
    cr_assert_eq(n, SC_NCACHED, "%zu classes up to 64 KiB, the table has %d", n, SC_NCACHED);
    size_t nsmall = 0;
    for (size_t c = 0; c < n; c++) {
        cr_assert_eq(sc_size[c], want[c], "class %zu is %u bytes, want %zu", c, sc_size[c], want[c]);
        nsmall += want[c] <= TT_SMALL_MAX;
    }
    cr_assert_eq(nsmall, SC_NSMALL);
    cr_assert_eq(SC_NSMALL, 35);
    cr_assert_eq(SC_SMALL_MAX, TT_SMALL_MAX);
    cr_assert_eq(sc_size[SC_NSMALL - 1], SC_SMALL_MAX);
    cr_assert_eq(SC_CACHED_MAX, TT_LARGE_CLASS_MAX);
    cr_assert_eq(sc_size[SC_NCACHED - 1], SC_CACHED_MAX);
    for (unsigned c = SC_NSMALL; c < SC_NCACHED; c++)
        cr_assert_eq(sc_size[c] % PAGE, 0, "large cached class %u (%u bytes) is not whole pages", c, sc_size[c]);
}

Test(size_class, slabs_waste_nothing_and_hold_two_regions)
{
    for (unsigned c = 0; c < SC_NSMALL; c++) {
        size_t s = sc_size[c], pages = sc_slab_pages[c], bytes = pages * PAGE;
        cr_assert(pages >= 1 && pages <= 7, "class %u (%zu B): a slab of %zu pages", c, s, pages);
        cr_assert_eq(sc_nregs[c], bytes / s, "class %u (%zu B): %u regions in %zu bytes", c, s, sc_nregs[c], bytes);
        cr_assert_geq(sc_nregs[c], 2, "class %u (%zu B): fewer than 2 regions", c, s);
        cr_assert_leq(sc_nregs[c], SC_MAX_NREGS, "class %u: more regions than the bitmap has bits", c);
        cr_assert_eq(bytes % s, 0, "class %u (%zu B): %zu of %zu bytes wasted", c, s, bytes % s, bytes);
        /* the fewest pages that do it */
        for (size_t p = 1; p < pages; p++)
            cr_assert(p * PAGE % s != 0 || p * PAGE / s < 2, "class %u (%zu B): %zu pages would do, the slab has %zu",
                      c, s, p, pages);
    }
    /* 14336 is the largest class a slab of at most 7 pages holds twice: the next (16384) is
     * large. */
    cr_assert_gt(2 * (size_t)sc_size[SC_NSMALL], 7 * PAGE);
}

Test(size_class, class_of_every_size_is_the_smallest_that_holds_it, .timeout = 60)
{
    for (size_t n = 0; n <= SC_CACHED_MAX; n++) {
        unsigned c = sc_class_of(n);
        cr_assert_lt(c, SC_NCACHED, "sc_class_of(%zu) = %u", n, c);
        cr_assert_eq(sc_size[c], tt_class_of(n), "sc_class_of(%zu) is %u bytes, want %zu", n, sc_size[c],
                     tt_class_of(n));
        cr_assert(c == 0 || sc_size[c - 1] < n, "sc_class_of(%zu): class %u - 1 holds it too", n, c);
        if (n <= SC_LOOKUP_MAX)
            cr_assert_eq(sc_lookup[(n + 15) >> 4], c, "the lookup table disagrees at %zu", n);
    }
}

Test(size_class, usable_sizes)
{
    for (size_t n = 0; n <= SC_CACHED_MAX; n++)
        cr_assert_eq(sc_usable(n), tt_class_of(n), "sc_usable(%zu)", n);
    static const size_t above[] = { SC_CACHED_MAX + 1, 65537 + 4095, 100000, 1 << 20, (1 << 20) + 1, (size_t)1 << 40 };
    for (size_t i = 0; i < sizeof above / sizeof *above; i++)
        cr_assert_eq(sc_usable(above[i]), tt_round_up(above[i], TT_PAGE), "sc_usable(%zu)", above[i]);
    cr_assert_eq(sc_usable(TIDE_MAX_BLOCK), TIDE_MAX_BLOCK);
    cr_assert_eq(sc_usable(TIDE_MAX_BLOCK + 1), 0, "a request above the largest block is refused");
    cr_assert_eq(sc_usable(SIZE_MAX), 0);
}

Test(size_class, starts_region_at_every_offset_of_every_slab, .timeout = 60)
{
    for (unsigned c = 0; c < SC_NSMALL; c++) {
        size_t s = sc_size[c], bytes = (size_t)sc_slab_pages[c] * PAGE;
        for (uintptr_t off = 0; off < bytes; off++)
            cr_assert_eq(sc_starts_region(c, off), off % s == 0, "class %u (%zu B), offset %zu", c, s, (size_t)off);
        /* and the index arithmetic that goes with it */
        for (uintptr_t r = 0; r < sc_nregs[c]; r++)
            cr_assert_eq((r * s * sc_div_magic[c]) >> 32, r, "class %u: region %zu", c, (size_t)r);
    }
}

Test(size_class, large_class_of_pages)
{
    for (size_t np = 0; np <= 2 * (SC_CACHED_MAX / PAGE); np++) {
        int c = sc_large_class_of_pages(np);
        int want = -1;
        for (unsigned k = SC_NSMALL; k < SC_NCACHED; k++)
            if (sc_size[k] == np * PAGE)
                want = (int)k;
        cr_assert_eq(c, want, "sc_large_class_of_pages(%zu) = %d, want %d", np, c, want);
    }
}

Test(size_class, thread_cache_capacities)
{
    for (unsigned c = 0; c < SC_NCACHED; c++) {
        size_t s = sc_size[c], init = sc_tcache_init[c], max = sc_tcache_max[c];
        cr_assert(init >= 2 && init <= max, "class %u: capacity %zu growing to %zu", c, init, max);
        cr_assert_leq(max, 4096, "class %u: capacity up to %zu", c, max);
        if (c < SC_NSMALL) {
            cr_assert_leq(init, 200, "class %u: starts with %zu", c, init);
            cr_assert(init * s <= 128 * 1024 || init == 4, "class %u: starts with %zu bytes", c, init * s);
            cr_assert(max * s <= 512 * 1024 || max == init, "class %u: holds up to %zu bytes", c, max * s);
            /* The limit is the rule's, not lower: 512 KiB of objects, at most 4096. */
            cr_assert(max == (512 * 1024 / s > 4096 ? 4096 : 512 * 1024 / s) || max == init,
                      "class %u: holds up to %zu objects", c, max);
        } else {
            cr_assert(init >= 2 && init <= 8 && max == init, "large class %u: %zu growing to %zu", c, init, max);
        }
    }
}
