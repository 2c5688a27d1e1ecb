/* SPDX-License-Identifier: MIT */
/* lock.c - the contended path of tide's lock: spin, then sleep on the futex.  The caller
 * (lock_acquire) has counted the lock in tide_locks_held already.  In debug builds, the
 * check of the order in which a thread takes its locks (lock.h's ranks). */
#include "lock.h"

#include <stdbool.h>

#include "util.h"

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

uint32_t tide_fork_gate TIDE_FORK_LOCK;

void lock_gate_raise(void) { __atomic_store_n(&tide_fork_gate, 1, __ATOMIC_SEQ_CST); }

void lock_gate_lower(lock_op_t op)
{
    if (op == LOCK_OP_RESET)
        __atomic_store_n(&tide_fork_gate, 0, __ATOMIC_RELAXED);
    else if (__atomic_exchange_n(&tide_fork_gate, 0, __ATOMIC_RELEASE) == 2)
        os_futex_wake(&tide_fork_gate, INT32_MAX);
}

void lock_gate_pass(lock_t *l)
{
    for (unsigned i = 0; __atomic_load_n(&l->word, __ATOMIC_SEQ_CST) != 0; i++) {
        cpu_relax();
        /* Its holder is off its CPU: sleep on it, as a taker would (a write, but rare). */
        if (i == LOCK_SPINS) {
            lock_acquire(l);
            lock_release(l);
            return;
        }
    }
}

/* L is held, and the gate was seen up.  The thread that forks (another prepare handler
 * may allocate) and one that holds another lock go on. */
void lock_gate_wait(lock_t *l)
{
    while (tide_locks_held == 1 && __atomic_load_n(&tide_fork_gate, __ATOMIC_SEQ_CST) != 0) {
        lock_release(l);
        uint32_t g = 1;
        while (g != 0) {
            g = __atomic_load_n(&tide_fork_gate, __ATOMIC_ACQUIRE);
            if (g == 1 && !__atomic_compare_exchange_n(&tide_fork_gate, &g, 2, false, __ATOMIC_ACQUIRE,
                                                       __ATOMIC_ACQUIRE))
                continue;
            if (g != 0)
                os_futex_wait(&tide_fork_gate, 2);
        }
        lock_acquire(l);
    }
}

#ifdef TIDE_LOCK_RANKS
/* The order is checked as jemalloc's witnesses check theirs, with a count per rank instead
 * of a list of the locks held (fork holds every bin of every arena): a lock may be taken
 * while no lock of its rank or above is held; one of a MANY rank also after the last one
 * of its rank taken (by nth, then address), as long as any of that rank is held.  (jemalloc
 * relaxes its check while forking; tide's fork takes the ranks in this order, and each
 * rank's locks in theirs, so it needs no exception.) */
static const struct {
    const char *name;
    bool many;
} lock_rank_info[LOCK_NRANKS] = {
    [LOCK_RANK_NONE] = { "an unranked lock", false },
#define LOCK_RANK_INFO(id, name, many) [LOCK_RANK_##id] = { name, many },
    LOCK_RANKS(LOCK_RANK_INFO)
#undef LOCK_RANK_INFO
};

typedef struct lock_held_s {
    uint32_t n[LOCK_NRANKS];         /* the locks of each rank this thread holds */
    uint32_t last_nth[LOCK_NRANKS];  /* the last of each rank taken (while n > 0) */
    const void *last[LOCK_NRANKS];
} lock_held_t;
static __thread lock_held_t lock_held __attribute__((tls_model("initial-exec")));

/* "NAME"; for a lock of a MANY rank "NAME NTH at 0xADDR", for an unranked one "NAME at
 * 0xADDR"; in BUF. */
static const char *lock_name(char buf[96], unsigned rank, unsigned nth, const void *addr)
{
    if (rank >= LOCK_NRANKS)
        rank = LOCK_RANK_NONE;
    if (rank != LOCK_RANK_NONE && !lock_rank_info[rank].many)
        return lock_rank_info[rank].name;
    char num[24], hex[24];
    const char *pieces[] = { lock_rank_info[rank].name, rank ? " " : "", rank ? report_fmt_u64(num, nth, 0) : "",
                             " at ", report_fmt_u64(hex, (uintptr_t)addr, 1) };
    size_t n = 0;
    for (size_t i = 0; i < ARRAY_SIZE(pieces); i++)
        for (const char *p = pieces[i]; *p && n + 1 < 96; p++)
            buf[n++] = *p;
    buf[n] = '\0';
    return buf;
}

/* Abort: taking the lock of RANK (NTH, at ADDR) while holding the last one of rank HELD
 * taken (LOCK_RANK_NONE: the lock has no rank). */
__attribute__((noreturn, cold)) static void lock_order_fail(unsigned rank, unsigned nth, const void *addr,
                                                             unsigned held)
{
    char a[96], b[96];
    report_lock_order(lock_name(a, rank, nth, addr), rank,
                      held ? lock_name(b, held, lock_held.last_nth[held], lock_held.last[held]) : NULL, held);
}

void lock_rank_take(unsigned rank, unsigned nth, const void *addr)
{
    if (rank == LOCK_RANK_NONE || rank >= LOCK_NRANKS)
        lock_order_fail(rank, nth, addr, LOCK_RANK_NONE);
    for (unsigned r = LOCK_NRANKS - 1; r > rank; r--)
        if (lock_held.n[r])
            lock_order_fail(rank, nth, addr, r);
    if (lock_held.n[rank] &&
        (!lock_rank_info[rank].many || nth < lock_held.last_nth[rank] ||
         (nth == lock_held.last_nth[rank] && (uintptr_t)addr <= (uintptr_t)lock_held.last[rank])))
        lock_order_fail(rank, nth, addr, rank);
    lock_held.n[rank]++;
    lock_held.last_nth[rank] = nth;
    lock_held.last[rank] = addr;
}

void lock_rank_drop(unsigned rank)
{
    TIDE_CHECK(rank < LOCK_NRANKS && lock_held.n[rank] > 0);
    lock_held.n[rank]--;
}

void lock_rank_forget_all(void)
{
    for (unsigned r = 0; r < LOCK_NRANKS; r++)
        lock_held.n[r] = 0;
}
#endif
