/* purge.h - when free pages go back to the kernel.
 *
 * A dirty run is purged once it has stayed free for decay_ms (at once with 0, never
 * with -1), by the policy in force: MADV_DONTNEED (its pages become clean: zero on the
 * next touch), MADV_FREE (lazy: the kernel takes them only under memory pressure) or
 * none.  Runs are collected under the page-heap lock, purged outside it, many in one
 * process_madvise call, and put back as clean or lazy.  A background thread does the
 * same for a process that has stopped calling the allocator. */
#ifndef TIDE_PURGE_H
#define TIDE_PURGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void purge_init(void);
/* A free has just made pages dirty (no lock held). */
void purge_after_free(void);
/* A large block was allocated or freed (no lock held): when no purger thread runs, do
 * what it would have done by now (drain idle transfer caches, purge what has decayed),
 * so that a single-threaded program gives memory back from its own calls. */
void purge_tick(void);
/* Purge every dirty page now (tide_purge, malloc_trim).  Returns bytes purged. */
size_t purge_all(void);

void purge_prefork(void);
void purge_postfork_parent(void);
/* LOCKED: the prepare handler took the purge locks (see tide_prefork). */
void purge_postfork_child(bool locked);

typedef struct purge_stats_s {
    uint64_t passes, purged_bytes;
    int background_running;
} purge_stats_t;
void purge_stats(purge_stats_t *out);

#endif
