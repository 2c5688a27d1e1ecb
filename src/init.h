/* SPDX-License-Identifier: MIT */
/* init.h - the heap's start-up, and fork.
 *
 * Every entry point makes sure the heap exists first: one load and a well-predicted branch
 * once it does.  Start-up reads TIDE_CONF (not in a setuid program), reserves the range,
 * sets up the page heap, arenas and transfer caches, then registers the thread-exit hook
 * and the fork handlers (they may allocate: the heap is ready by then). */
#ifndef TIDE_INIT_H
#define TIDE_INIT_H

#include <stdbool.h>

#include "util.h"

extern int init_ready; /* the heap exists (atomic) */
/* Build the heap; false when it cannot be built (or while this thread is building it). */
bool init_boot(void);

static inline bool init_ensure(void) { return likely(ATOMIC_LOAD_ACQ(&init_ready)) || init_boot(); }

#endif
