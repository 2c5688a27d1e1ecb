/* transfer.h - transfer caches: whole batches of free small objects handed between
 * threads in O(1).
 *
 * When a thread cache overflows, its colder half goes here as one linked list instead of
 * back into slab bitmaps object by object; a thread cache that runs dry takes a list from
 * here before it refills from its arena.  A producer/consumer pair of threads then trades
 * lists, not objects.  Each class holds a bounded number of bytes; beyond that, objects
 * go back to their slabs. */
#ifndef TIDE_TRANSFER_H
#define TIDE_TRANSFER_H

#include <stdbool.h>

/* Keep the list HEAD of N objects of class CLS; false when the class is full. */
bool transfer_push(unsigned cls, void *head, unsigned n);
/* Take a list of class CLS: returns how many objects *HEAD holds (0: none). */
unsigned transfer_pop(unsigned cls, void **head);
/* Give every object held back to its slab (tide_purge, malloc_trim). */
void transfer_drain(void);
/* The same for the classes nobody took a batch from since the last call (the purger
 * thread, once a decay period): what idles here must not escape purging. */
void transfer_drain_idle(void);

/* Whether P is in a batch of class CLS held here (a double free; slow, for the checks). */
bool transfer_holds(unsigned cls, const void *p);

void transfer_lock_all(void);
void transfer_unlock_all(void);
void transfer_reinit_locks(void);

#endif
