/* SPDX-License-Identifier: MIT */
/* lock.h - the one lock type tide uses: a futex word that spins before it sleeps.
 *
 * tide's critical sections last a microsecond or less.  glibc's adaptive mutex spun too
 * briefly for that: two threads meeting on the page-heap lock fell into a convoy, each
 * hand-over a futex sleep and a wake-up of an idle CPU (a VM exit here), and mixed -t 2
 * ran at 0.6 s instead of 0.35 s in some runs.  This lock polls the word for up to
 * LOCK_SPINS pauses (a few tens of microseconds) before it sleeps, so that a sleep is
 * what happens when the holder is really off its CPU.  States: 0 free, 1 held, 2 held
 * and someone may sleep on it (Drepper, "Futexes are tricky", mutex 3).  A zero word is
 * free: a lock works before constructors run, and fork() handling re-initialises every
 * lock in the child. */
#ifndef TIDE_LOCK_H
#define TIDE_LOCK_H

#include <stdint.h>

#include "os.h"
#include "report.h"

typedef struct lock_s {
    uint32_t word;
} lock_t;

#define LOCK_INITIALIZER { 0 }
#define LOCK_SPINS 2000

/* How many of tide's locks the calling thread holds.  fork() from a signal handler that
 * interrupted this thread inside tide must not wait for a lock the thread itself holds:
 * the fork handlers read this (the child of such a fork may only call
 * async-signal-safe functions, so it does not need the heap to be consistent). */
extern __thread unsigned tide_locks_held __attribute__((tls_model("initial-exec")));

static inline void lock_init(lock_t *l) { __atomic_store_n(&l->word, 0, __ATOMIC_RELAXED); }

/* The count goes up before the lock is taken and down after it is released (the signal
 * fences keep the compiler from moving it): a handler that runs in between may see a
 * lock counted that is not held yet, never one held that is not counted. */
static inline int lock_try(lock_t *l)
{
    uint32_t free_word = 0;
    tide_locks_held++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (__atomic_compare_exchange_n(&l->word, &free_word, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    tide_locks_held--;
    return 0;
}

void lock_acquire_slow(lock_t *l);

static inline void lock_acquire(lock_t *l)
{
    uint32_t free_word = 0;
    tide_locks_held++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (__builtin_expect(!__atomic_compare_exchange_n(&l->word, &free_word, 1, false, __ATOMIC_ACQUIRE,
                                                      __ATOMIC_RELAXED), 0))
        lock_acquire_slow(l);
}

static inline void lock_release(lock_t *l)
{
    TIDE_ASSERT(tide_locks_held > 0 && __atomic_load_n(&l->word, __ATOMIC_RELAXED) != 0);
    if (__builtin_expect(__atomic_exchange_n(&l->word, 0, __ATOMIC_RELEASE) == 2, 0))
        os_futex_wake(&l->word, 1);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    tide_locks_held--;
}

#endif
