/* SPDX-License-Identifier: MIT */
/* size_class.h - from a request size to its class, and to the bytes tide hands out.
 * The tables (sc_size, sc_lookup, ...) are computed at build time into size_class_table.h
 * (gen_size_class_table.c); this header adds the functions over them, with the same prefix.
 *
 * Requests up to SC_SMALL_MAX are served from slabs, up to SC_CACHED_MAX from
 * page-multiple "large cached" classes, and above that from whole pages. */
#ifndef TIDE_SIZE_CLASS_H
#define TIDE_SIZE_CLASS_H

#include "size_class_table.h"
#include "util.h"

/* The class of SIZE, for SIZE <= SC_CACHED_MAX (0 counts as 1). */
TIDE_INLINE unsigned sc_class_of(size_t size)
{
    if (likely(size <= SC_LOOKUP_MAX))
        return sc_lookup[(size + 15) >> 4];
    size_t x = size - 1;
    unsigned lg = lg_floor(x), shift = lg - 2;
    return 4 + (lg - 6) * 4 + (unsigned)((x >> shift) & 3);
}

/* Whether OFFSET from the start of a slab of class CLS is the start of a region. */
TIDE_INLINE bool sc_starts_region(unsigned cls, uintptr_t offset)
{
    uint64_t c = sc_div64[cls];
    return (uint64_t)offset * c < c;
}

/* The usable size tide gives a request of SIZE bytes; 0 when SIZE is too large. */
static inline size_t sc_usable(size_t size)
{
    if (size <= SC_CACHED_MAX)
        return sc_size[sc_class_of(size)];
    if (size > TIDE_MAX_BLOCK)
        return 0;
    return ALIGN_UP(size, PAGE);
}

/* The class whose extent is exactly NPAGES pages, or -1 when none is. */
static inline int sc_large_class_of_pages(size_t npages)
{
    size_t bytes = npages << LG_PAGE;
    if (bytes < sc_size[SC_NSMALL] || bytes > SC_CACHED_MAX)
        return -1;
    unsigned c = sc_class_of(bytes);
    return sc_size[c] == bytes ? (int)c : -1;
}

#endif
