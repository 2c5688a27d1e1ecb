/* SPDX-License-Identifier: MIT */
/* purge.h - the purge engine: dirty runs go back to the kernel.
 *
 * A dirty run is purged once it has stayed free for decay_ms (at once with 0, never
 * with -1) and the dirty pages exceed those the program reused over the last decay_ms
 * (a decay pass keeps that many, the oldest purged first), by the policy in force:
 * MADV_DONTNEED (its pages become clean: zero on the next touch), MADV_FREE (lazy: the
 * kernel takes them only under memory pressure) or none.  Runs are collected under the page-heap lock, purged outside it, many in one
 * process_madvise call, and put back as clean or lazy.  When the engine runs is the
 * caller's business (background.h). */
#ifndef TIDE_PURGE_H
#define TIDE_PURGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lock.h"

/* Purge the dirty runs freed at or before OLDER_THAN (ns, os_now_ns) by POLICY.  WAIT:
 * wait for a pass in progress; else give up to it (under decay_ms 0 leaving it a mark to
 * run one more pass).  WHOLE: whole runs even with huge pages (an explicit full purge).
 * Returns bytes purged. */
size_t purge_pass(uint64_t older_than, long policy, bool wait, bool whole);
/* Purge every dirty page now (tide_purge, malloc_trim).  Returns bytes purged. */
size_t purge_all(void);
/* When the oldest dirty run comes due (ns), or 0 when nothing is dirty as far as the
 * engine knows; set by each pass, and by the first free after one (purge_set_due). */
uint64_t purge_next_due(void);
/* Tell the decay the time (ns, os_now_ns): the first caller in each quarter of decay_ms
 * marks how many pages had been reused by then.  Lock-free; no system call. */
void purge_note_time(uint64_t now);
void purge_set_due(uint64_t ns);

/* fork: OP on purge_lock (init.c's table of ranks). */
void purge_locks(lock_op_t op);

typedef struct purge_stats_s {
    uint64_t passes, purged_bytes;
} purge_stats_t;
void purge_stats(purge_stats_t *out);

#endif
