/* remap.h - large realloc without copying.
 *
 * A large block grows in place when the pages after it are free (bookkeeping only: they
 * are mapped already).  Otherwise, above remap_threshold, its pages move with
 * mremap(MREMAP_DONTUNMAP) to a free place inside tide's range, congruent modulo 2 MiB
 * (page tables move whole) and with room to keep growing; the old place stays mapped,
 * empty, and becomes clean free space: no hole.  A moved block lives in VMAs of its own
 * until it is freed or moved again, when an mmap(MAP_FIXED) over its old pages heals
 * them back into the range's VMA.  The VMAs such blocks cost are capped by remap_max. */
#ifndef TIDE_REMAP_H
#define TIDE_REMAP_H

#include <stddef.h>
#include <stdint.h>

#include "extent.h"

/* Resize large block E to USABLE bytes (a page multiple >= 16 KiB): in place, else by
 * moving its pages, else by copying it to a place where it has room to keep growing.
 * Returns the block's address (E is then stale if it moved), or NULL when the caller
 * must allocate, copy and free (small sizes) or memory is exhausted. */
void *remap_realloc(extent_t *e, size_t usable);
/* E is about to be freed: heal the VMAs of its moved part. */
void remap_before_free(extent_t *e);

typedef struct remap_stats_s {
    uint64_t moves, heals, copies, in_place, live, vmas, vmas_peak;
} remap_stats_t;
void remap_stats(remap_stats_t *out);

#endif
