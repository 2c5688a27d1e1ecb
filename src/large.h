/* SPDX-License-Identifier: MIT */
/* large.h - large blocks (above the cached classes, or moved): allocation, free, and
 * realloc without copying.
 *
 * A large block grows in place when the pages after it are free (bookkeeping only: they
 * are mapped already).  Otherwise, above remap_threshold, its pages move with
 * mremap(MREMAP_DONTUNMAP) to a free place inside tide's range, congruent modulo 2 MiB
 * (page tables move whole) and with room to keep growing; the old place stays mapped,
 * empty, and becomes clean free space: no hole.  A moved block lives in VMAs of its own
 * until it is freed or moved again, when an mmap(MAP_FIXED) over its old pages heals
 * them back into the range's VMA.  The VMAs such blocks cost are capped by remap_max. */
#ifndef TIDE_LARGE_H
#define TIDE_LARGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "extent.h"

/* A block of at least SIZE bytes above the cached classes, aligned to ALIGN (a power of
 * two >= PAGE), zeroed when ZERO; NULL when the kernel's overcommit policy refuses it or
 * memory is exhausted. */
void *large_alloc(size_t size, size_t align, bool zero);
/* Free large block E, healing the VMAs of its moved part first. */
void large_free(extent_t *e);
/* Resize large block E to USABLE bytes (a page multiple >= 16 KiB): in place, else by
 * moving its pages, else by copying it to a place where it has room to keep growing.
 * Returns the block's address (E is then stale if it moved), or NULL when the caller
 * must allocate, copy and free (small sizes) or memory is exhausted. */
void *large_realloc(extent_t *e, size_t usable);

typedef struct large_stats_s {
    uint64_t moves, heals, copies, in_place, live, vmas, vmas_peak;
} large_stats_t;
void large_stats(large_stats_t *out);

#endif
