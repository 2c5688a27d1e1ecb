/* guard.h - guard pages as a policy: guard:on's quarantine of freed large blocks, and the
 * SIGSEGV handler that explains a guard page hit.
 *
 * The page heap (extent.h) makes the guard pages: with guard:on every slab and large block
 * is carved with one more page, made a guard page with MADV_GUARD_INSTALL, which marks page
 * table entries and splits no VMA.  Here:
 *   - a freed large block (guarded, at most guard_quarantine bytes) has all its pages made
 *     guard pages and is held (extent_hold), first in first out, until the blocks held
 *     after it pass guard_quarantine bytes; then its pages become ordinary again, zero, a
 *     clean free run.  A touch while it is held faults; a free of it is a double free.
 *   - the SIGSEGV handler (installed only when guard is set, chained to the program's
 *     previous one) prints one report for a fault on a guard page tide made: the address,
 *     the block and its size, overflow or use after free; then it restores the previous
 *     handler and returns, so the access faults again under the previous disposition (the
 *     default: killed by SIGSEGV). */
#ifndef TIDE_GUARD_H
#define TIDE_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf.h"
#include "extent.h"
#include "util.h"

/* Start-up (the heap exists) and tide_conf_set of guard: installs the SIGSEGV handler
 * once guard is set. */
void guard_boot(void);

/* Free large block E (not sampled; moved pieces healed): held as a guard when it has a
 * guard page and fits the quarantine, else given back (extent_free). */
void guard_free_large(extent_t *e, extent_hint_t *hint);

void guard_prefork(void);
void guard_postfork_parent(void);
void guard_postfork_child(void);

#endif
