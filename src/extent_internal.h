/* SPDX-License-Identifier: MIT */
/* extent_internal.h - the page heap's own helpers, shared by its files: extent.c
 * (descriptors, free runs, placement, allocation, free, resize), extent_dirty.c (runs
 * handed to the purge engine, the range's free tail) and extent_huge.c (2 MiB units,
 * thp:auto).  Nothing else includes it.  All of them need the page-heap lock held. */
#ifndef TIDE_EXTENT_INTERNAL_H
#define TIDE_EXTENT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "extent.h"

/* Runs one span merge may take in (extent_merge_span, and the walks that feed it). */
#define SPAN_MAX_RUNS 64

/* A recycled descriptor, zeroed; extent_desc_reserve() made sure there is one. */
extent_t *extent_desc_get(void);
void extent_desc_put(extent_t *e);
/* Make sure N descriptors can be had without allocating: 0 or ENOMEM.  (Inline: every
 * allocation from the page heap asks, and there are almost always enough.) */
int extent_desc_refill(size_t n);
static inline int extent_desc_reserve(size_t n) { return likely(pageheap.ndesc_free >= n) ? 0 : extent_desc_refill(n); }

/* Free run E in and out of its state's tree (and the dirty age list). */
void extent_tree_insert(extent_t *e);
void extent_tree_remove(extent_t *e);
/* The page-map entries of E's first and last pages. */
void extent_set_free_edges(extent_t *e);
void extent_clear_edges(extent_t *e);

/* The free neighbour of E on the left (or right) in STATE (EXTENT_NFREE: any free state),
 * or NULL. */
extent_t *extent_free_neighbour(const extent_t *e, bool left, unsigned state);
/* Insert E as a free run in STATE, merging it with its neighbours in that state. */
void extent_insert_free(extent_t *e, unsigned state, uint64_t stamp);
/* PART (about to be merged into RUN) started with a freed block's first page: that page
 * says so from now on, naming RUN.  Lock held. */
void extent_keep_freed_head(extent_t *run, const extent_t *part);
/* Make [ADDR, ADDR + NPAGES pages) of range RANGE a free run (one descriptor). */
void extent_add_free_run(uintptr_t addr, size_t npages, unsigned range, unsigned state, uint64_t stamp);
/* The pages the first blocks were placed past (extent_init) go to the heap: under
 * MADV_HUGEPAGE the unit they lie in can then be filled and collapsed.  Lock held. */
void extent_release_heap_skip(void);
/* Merge the adjacent free runs from L to R, whatever their states, into one in the least
 * clean of them; returns it, in its tree. */
extent_t *extent_merge_span(extent_t *l, extent_t *r);

/* The unit record (extent_huge.c): NPAGES pages at ADDR of range RANGE come into use
 * (USED) or leave it. */
void extent_units_use(unsigned range, uintptr_t addr, size_t npages, bool used);
/* NPAGES pages at ADDR of range RANGE were purged: a huge page they were in is split. */
void extent_units_purged(unsigned range, uintptr_t addr, size_t npages);

#endif
