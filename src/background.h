/* SPDX-License-Identifier: MIT */
/* background.h - when the purge engine runs: at the frees that make pages dirty, at large
 * mallocs and frees when no purger thread runs, and in the purger thread.
 *
 * background:on starts the thread at the first allocation, auto (the default) at the first
 * once the program has a second thread of its own, off never; never inside a free.  Without
 * the thread a process gives decayed pages back at its own next calls, not while idle. */
#ifndef TIDE_BACKGROUND_H
#define TIDE_BACKGROUND_H

#include <stdbool.h>

#include "lock.h"

void background_init(void);
/* An allocation's slow path (no lock held): start the purger thread if it is wanted and
 * not running. */
void background_start(void);
/* A free has just made pages dirty (no lock held): purge at once under decay_ms 0, wake
 * the purger thread, or purge what has come due. */
void background_after_free(void);
/* A large block was allocated or freed (no lock held): when no purger thread runs, do
 * what it would have done by now (drain idle transfer caches, purge what has decayed),
 * so that a single-threaded program gives memory back from its own calls. */
void background_tick(void);

/* fork: OP on bg_mutex (init.c's table of ranks; the child's reset makes the condition
 * variable again too). */
void background_locks(lock_op_t op);
/* In every child, whether the prepare handler took the locks or not. */
void background_postfork_child(void);

#endif
