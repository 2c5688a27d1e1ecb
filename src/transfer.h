/* SPDX-License-Identifier: MIT */
/* transfer.h - transfer caches: whole batches of free small objects handed between
 * threads in O(1).
 *
 * When a thread cache overflows, its colder part goes here as one linked list instead of
 * back into slab bitmaps object by object; a thread cache that runs dry takes a list from
 * here before it refills from its arena.  A producer/consumer pair of threads then trades
 * lists, not objects.  There is one cache per class and arena, and a list goes to the
 * arena its objects came from: objects return to the threads that allocate them, which
 * often share a core with the threads that free them.  (One cache per class for all
 * arenas handed one pair's objects to another pair's producer on the other core: every
 * object then crossed cores, and 2 producer/consumer pairs ran 8x slower than pinned.)
 * Each holds a bounded number of bytes; beyond that, objects go back to their slabs. */
#ifndef TIDE_TRANSFER_H
#define TIDE_TRANSFER_H

#include <stdbool.h>

#include "lock.h"

/* The caches of NARENA arenas, at start-up: 0 or ENOMEM. */
int transfer_init(unsigned narena);
/* A thread joins ARENA: make its caches usable. */
void transfer_arena_ready(unsigned arena);
/* Keep the list HEAD of N objects of class CLS in ARENA's cache; false when it is full. */
bool transfer_push(unsigned arena, unsigned cls, void *head, unsigned n);
/* Take a list of class CLS from ARENA's cache: how many objects *HEAD holds (0: none). */
unsigned transfer_pop(unsigned arena, unsigned cls, void **head);
/* Give every object held back to its slab (tide_purge, malloc_trim). */
void transfer_drain(void);
/* The same for the classes nobody took a batch from since the last call (the purger
 * thread, once a decay period): what idles here must not escape purging. */
void transfer_drain_idle(void);

/* Whether P is in a batch of class CLS held here (a double free; slow, for the checks). */
bool transfer_holds(unsigned cls, const void *p);

/* fork: OP on ready_lock, and on the caches' locks of the arenas in use (init.c's table
 * of ranks). */
void transfer_ready_locks(lock_op_t op);
void transfer_locks(lock_op_t op);

#endif
