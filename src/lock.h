/* SPDX-License-Identifier: MIT */
/* lock.h - the one lock type tide uses: a futex word that spins before it sleeps; and the
 * order in which tide's locks nest.
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

/* The ranks: THE order of tide's locks, lowest first.  A thread takes a lock only while
 * every lock it holds ranks below it.  The locks of a rank marked MANY may also be held
 * several at a time, taken in ascending order (their nth, then their address): only the
 * walks that take all of them do (fork, tide_check, a profile dump); no other rank's
 * locks nest with themselves.  Debug and UBSan builds check every acquisition against
 * this (lock.c), and fork takes the locks rank by rank, up this list: a new lock is a
 * rank here and its line in init.c's fork_locks. */
#define LOCK_RANKS(X)                                                                         \
    X(INIT, "tide_init_lock", 0)                /* start-up: everything else inside it */     \
    X(PURGE, "purge_lock", 0)                   /* a purge pass: the page heap inside */      \
    X(BACKGROUND, "bg_mutex", 0)                /* the purger's sleep (a pthread mutex) */    \
    X(TRANSFER_READY, "transfer ready_lock", 0) /* an arena's caches made ready */            \
    X(TRANSFER, "transfer lock", 1)             /* per arena and class */                     \
    X(BIN, "bin lock", 1)                       /* per arena and class; nth: the arena */     \
    X(PROF, "prof_lock", 0)                     /* the stack table's growth, a dump */        \
    X(PROF_SHARD, "prof shard lock", 1)         /* 8 */                                       \
    X(PROF_SLAB, "prof_slab_lock", 0)           /* samples kept in their slab */              \
    X(GUARD, "guard_lock", 0)                   /* the quarantine, the sampled records */     \
    X(PAGEHEAP, "pageheap.lock", 0)             /* the page heap */                           \
    X(META, "meta_lock", 0)                     /* the metadata range */

typedef enum lock_rank_e {
    LOCK_RANK_NONE, /* never ranked: taking it fails the check */
#define LOCK_RANK_ENUM(id, name, many) LOCK_RANK_##id,
    LOCK_RANKS(LOCK_RANK_ENUM)
#undef LOCK_RANK_ENUM
    LOCK_NRANKS
} lock_rank_t;

/* TIDE_DEBUG builds (./configure --enable-debug or --enable-ubsan, and the check-only
 * library the unit and fault suites link) check the order; the others keep the word alone,
 * and compile to what they did before ranks existed. */
#ifdef TIDE_DEBUG
#define TIDE_LOCK_RANKS 1
#endif

typedef struct lock_s {
    uint32_t word;
#ifdef TIDE_LOCK_RANKS
    uint32_t rank : 8; /* lock_rank_t */
    uint32_t nth : 24; /* the order among the locks of a MANY rank, before the address */
#endif
} lock_t;

#ifdef TIDE_LOCK_RANKS
#define LOCK_INITIALIZER(rank) { 0, (rank), 0 }
#else
#define LOCK_INITIALIZER(rank) { 0 }
#endif
#define LOCK_SPINS 2000

/* How many of tide's locks the calling thread holds.  fork() from a signal handler that
 * interrupted this thread inside tide must not wait for a lock the thread itself holds:
 * the fork handlers read this (the child of such a fork may only call
 * async-signal-safe functions, so it does not need the heap to be consistent). */
extern __thread unsigned tide_locks_held __attribute__((tls_model("initial-exec")));

#ifdef TIDE_LOCK_RANKS
/* The checks (lock.c): before a lock of RANK (NTH, at ADDR) is taken, abort with one line
 * naming it and a lock this thread holds that must come after it; after it is released,
 * forget it.  bg_mutex, a pthread mutex, is checked through them too. */
void lock_rank_take(unsigned rank, unsigned nth, const void *addr);
void lock_rank_drop(unsigned rank);
/* The forked child's thread holds none of them any more. */
void lock_rank_forget_all(void);
#else
static inline void lock_rank_take(unsigned rank, unsigned nth, const void *addr)
{
    (void)rank, (void)nth, (void)addr;
}
static inline void lock_rank_drop(unsigned rank) { (void)rank; }
static inline void lock_rank_forget_all(void) {}
#endif

/* NTH orders the locks of a MANY rank that are not in one array (the bins: their arena). */
static inline void lock_init_nth(lock_t *l, lock_rank_t rank, unsigned nth)
{
#ifdef TIDE_LOCK_RANKS
    l->rank = rank;
    l->nth = nth;
#else
    (void)rank, (void)nth;
#endif
    __atomic_store_n(&l->word, 0, __ATOMIC_RELAXED);
}

static inline void lock_init(lock_t *l, lock_rank_t rank) { lock_init_nth(l, rank, 0); }

#ifdef TIDE_LOCK_RANKS
#define LOCK_RANK_TAKE(l) lock_rank_take((l)->rank, (l)->nth, (l))
#define LOCK_RANK_DROP(l) lock_rank_drop((l)->rank)
#else
#define LOCK_RANK_TAKE(l) ((void)0)
#define LOCK_RANK_DROP(l) ((void)0)
#endif

/* The count goes up before the lock is taken and down after it is released (the signal
 * fences keep the compiler from moving it): a handler that runs in between may see a
 * lock counted that is not held yet, never one held that is not counted.  The rank check
 * runs inside the count (a fork from a handler that interrupts it takes no lock, so it
 * never checks against a half-made record), and before the try, whether it succeeds or
 * not: the order holds for try-locks too. */
static inline int lock_try(lock_t *l)
{
    uint32_t free_word = 0;
    tide_locks_held++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    LOCK_RANK_TAKE(l);
    if (__atomic_compare_exchange_n(&l->word, &free_word, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return 1;
    LOCK_RANK_DROP(l);
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
    LOCK_RANK_TAKE(l);
    if (__builtin_expect(!__atomic_compare_exchange_n(&l->word, &free_word, 1, false, __ATOMIC_ACQUIRE,
                                                      __ATOMIC_RELAXED), 0))
        lock_acquire_slow(l);
}

static inline void lock_release(lock_t *l)
{
    TIDE_ASSERT(tide_locks_held > 0 && __atomic_load_n(&l->word, __ATOMIC_RELAXED) != 0);
    if (__builtin_expect(__atomic_exchange_n(&l->word, 0, __ATOMIC_RELEASE) == 2, 0))
        os_futex_wake(&l->word, 1);
    LOCK_RANK_DROP(l);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    tide_locks_held--;
}

/* fork: what the handlers do to each lock, rank by rank (init.c's table).  The parent
 * releases them after the fork, when its first write to a page copies it: a page fault
 * each (tens of microseconds on a guest), so the locks outside the arenas are defined
 * TIDE_FORK_LOCK and lie together, on a page or two rather than one per file. */
#define TIDE_FORK_LOCK __attribute__((section("tide_fork_locks"), aligned(64)))

typedef enum lock_op_e {
    LOCK_OP_TAKE,    /* prepare: take it */
    LOCK_OP_RELEASE, /* parent: release it */
    LOCK_OP_RESET,   /* child: free again (its rank kept) */
} lock_op_t;

static inline void lock_apply(lock_t *l, lock_op_t op)
{
    if (op == LOCK_OP_TAKE)
        lock_acquire(l);
    else if (op == LOCK_OP_RELEASE)
        lock_release(l);
    else if (__atomic_load_n(&l->word, __ATOMIC_RELAXED) != 0)
        __atomic_store_n(&l->word, 0, __ATOMIC_RELAXED); /* (a free lock's page stays shared) */
}

/* The fork gate.  An arena's locks (ranks TRANSFER and BIN, 70 of them on 2-4 pages) are
 * not held across a fork: a fork leaves every page of the parent write-protected, so each
 * page their taking or releasing wrote would cost a fault per fork (tens of microseconds
 * on a guest).  Instead the prepare handler raises the gate and then waits, reading
 * only, until each of them is seen free; a thread that takes one afterwards, while
 * holding no other lock, sees the gate up, lets it go and sleeps until the fork is over
 * (the gate's store and load, the lock's exchange and the handler's load are sequentially
 * consistent: either the handler sees the lock taken and waits for it, or the taker sees
 * the gate up).  So no such lock is held, and none of the arenas' state is being changed,
 * when the fork copies the address space, and the handlers write only the gate, on the
 * TIDE_FORK_LOCK page.  A thread that already holds a lock goes on: it holds one of these
 * (the handler holds those below them; those above rank after them), and the handler
 * waits for it.  That needs the holders to let go of what they took after the gate no
 * later than what they held before it: no hand-over-hand locking of these ranks (the
 * walks that take them all take them all first). */
extern uint32_t tide_fork_gate; /* 0 down, 1 up, 2 up and someone may sleep on it */
void lock_gate_wait(lock_t *l);

static inline void lock_acquire_gated(lock_t *l)
{
    lock_acquire(l);
#if !defined(__x86_64__) && !defined(__i386__)
    __atomic_thread_fence(__ATOMIC_SEQ_CST); /* (x86's locked compare-exchange is one) */
#endif
    if (__builtin_expect(__atomic_load_n(&tide_fork_gate, __ATOMIC_SEQ_CST) != 0, 0))
        lock_gate_wait(l);
}

/* What the handlers do to a gated lock: TAKE waits until it is seen free (the gate is
 * up), the parent leaves it alone, the child frees it if a thread was turned back while
 * it held it. */
void lock_gate_pass(lock_t *l);
static inline void lock_apply_gated(lock_t *l, lock_op_t op)
{
    if (op == LOCK_OP_TAKE)
        lock_gate_pass(l);
    else if (op == LOCK_OP_RESET)
        lock_apply(l, op);
}

/* Prepare: up, before the first gated lock's pass.  Parent: down, waking who sleeps on it.
 * Child: down (nobody else is left to sleep on it). */
void lock_gate_raise(void);
void lock_gate_lower(lock_op_t op);

#endif
