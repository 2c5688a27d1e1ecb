/* SPDX-License-Identifier: MIT */
/* lock.c - the contended path of tide's lock: spin, then sleep on the futex.  The caller
 * (lock_acquire) has counted the lock in tide_locks_held already. */
#include "lock.h"

__thread unsigned tide_locks_held __attribute__((tls_model("initial-exec")));

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

void lock_acquire_slow(lock_t *l)
{
    /* Poll without writing (the holder's cache line stays put), take it when free. */
    for (unsigned i = 0; i < LOCK_SPINS; i++) {
        cpu_relax();
        uint32_t free_word = 0;
        if (__atomic_load_n(&l->word, __ATOMIC_RELAXED) == 0 &&
            __atomic_compare_exchange_n(&l->word, &free_word, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return;
    }
    /* Sleep: mark the word contended; whoever sets it to 0 from 2 wakes one sleeper. */
    while (__atomic_exchange_n(&l->word, 2, __ATOMIC_ACQUIRE) != 0)
        os_futex_wait(&l->word, 2);
}
