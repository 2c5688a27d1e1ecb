/* remap.h - large realloc without copying: grow in place, else move the pages with
 * mremap(MREMAP_DONTUNMAP) inside tide's range, never leaving a hole. */
#ifndef TIDE_REMAP_H
#define TIDE_REMAP_H

#include <stddef.h>
#include <stdint.h>

#include "extent.h"

void remap_init(void);
/* Move large block E (growing to USABLE bytes) to a place where it can grow, keeping
 * its contents.  Returns the new address, or NULL when the caller must copy. */
void *remap_grow(extent_t *e, size_t usable);
/* A block that was moved sits in VMAs of its own: merge them back before it is freed. */
void remap_before_free(extent_t *e);
void remap_count_in_place(void);
void remap_count_copy(extent_t *e);

void remap_prefork(void);
void remap_postfork_parent(void);
void remap_postfork_child(void);

typedef struct remap_stats_s {
    uint64_t moves, heals, copies, in_place, live;
} remap_stats_t;
void remap_stats(remap_stats_t *out);

#endif
