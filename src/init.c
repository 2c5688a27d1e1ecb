/* SPDX-License-Identifier: MIT */
/* init.c - start-up and fork: the heap is built on the first call (or by the constructor),
 * and fork() takes tide's locks so that the child can allocate at once. */
#include "init.h"

#include <pthread.h>
#include <stdbool.h>
#include <sys/single_threaded.h>

#include "arena.h"
#include "background.h"
#include "conf.h"
#include "extent.h"
#include "freelist.h"
#include "guard.h"
#include "lock.h"
#include "meta.h"
#include "os.h"
#include "prof.h"
#include "purge.h"
#include "region.h"
#include "stats.h"
#include "tcache.h"
#include "transfer.h"

int init_ready; /* atomic: the heap exists */
static lock_t tide_init_lock TIDE_FORK_LOCK = LOCK_INITIALIZER(LOCK_RANK_INIT);
/* This thread is building the heap: a call that comes back into tide meanwhile (from
 * a sanitizer's report, say) must fail rather than wait for itself. */
static __thread bool tide_booting __attribute__((tls_model("initial-exec")));

static void tide_prefork(void);
static void tide_postfork_parent(void);
static void tide_postfork_child(void);

TIDE_NOINLINE bool init_boot(void)
{
    if (tide_booting)
        return false;
    tide_booting = true;
    lock_acquire(&tide_init_lock);
    if (ATOMIC_LOAD(&init_ready)) {
        lock_release(&tide_init_lock);
        tide_booting = false;
        return true;
    }
    /* Nothing here may call malloc: the heap does not exist yet. */
    conf_init();
    os_init();
    freelist_init();
    unsigned n = conf.arenas ? (unsigned)conf.arenas : 4 * os_ncpus();
    int err = region_init(conf.thp == THP_ON);
    if (!err)
        err = meta_init();
    if (!err)
        err = extent_init();
    if (!err)
        err = arenas_init(n);
    if (!err)
        err = transfer_init(n);
    if (err) {
        lock_release(&tide_init_lock);
        tide_booting = false;
        return false;
    }
    background_init();
    ATOMIC_STORE_REL(&init_ready, 1);
    lock_release(&tide_init_lock);
    tide_booting = false;
    if (conf.verbose)
        stats_verbose();
    /* These may allocate: the heap is ready for them. */
    tcache_boot();
    pthread_atfork(tide_prefork, tide_postfork_parent, tide_postfork_child);
    prof_boot();
    guard_boot();
    return true;
}

__attribute__((constructor)) static void tide_constructor(void)
{
    os_unwind_start();
    init_ensure();
}

#ifndef PIC
/* Linked into a program (libtide.a): in a static one, libc's own start-up is over, and with
 * it the mallocs during which libgcc's unwinder could not even look for its tables; the
 * program's constructors, which may allocate too, come next. */
static void tide_preinit(int argc, char **argv, char **envp) { os_unwind_start(); }
__attribute__((section(".preinit_array"), used)) static void (*const tide_preinit_entry)(int, char **, char **) =
    tide_preinit;
#endif

__attribute__((destructor)) static void tide_destructor(void)
{
    os_unwind_stop();
    if (!ATOMIC_LOAD(&init_ready))
        return;
    prof_exit();
    stats_exit();
}

/* fork.
 *
 * In a multithreaded process the prepare handler takes every lock, rank by rank up
 * lock.h's order (fork_locks below), so that the child finds the heap consistent and its
 * locks free and can allocate at once; the parent releases them down the ranks, the child
 * resets them.
 *
 * glibc's fork takes its stdio list lock after the prepare handlers and before its own
 * malloc's locks, since a thread holding it may be about to allocate (getdelim does, and
 * fflush(NULL) holds it while it waits for a FILE whose holder is inside realloc): tide
 * takes that lock first, as glibc's own malloc in effect does, so the fork waits for
 * such a thread instead of deadlocking with it.  (It is recursive: glibc takes it again,
 * unlocks it once in the parent and resets it in the child before the child handlers.)
 *
 * Nothing is taken when the process is single-threaded (glibc's own test: then no other
 * thread can hold a lock, and fork may be called from a signal handler that interrupted
 * tide), nor when the forking thread holds one of tide's locks itself, which only a fork
 * from a signal handler can do.  The child of such a fork may only call
 * async-signal-safe functions, as POSIX says, so it does not need a consistent heap.
 * Forks nest (a handler may fork inside a fork handler), so whether each level locked is
 * kept on a per-thread stack of bits. */
extern void _IO_list_lock(void) __attribute__((weak));
extern void _IO_list_unlock(void) __attribute__((weak));

static __thread uint64_t tide_fork_locked __attribute__((tls_model("initial-exec")));

static void init_locks(lock_op_t op) { lock_apply(&tide_init_lock, op); }
static void pageheap_locks(lock_op_t op) { lock_apply(&pageheap.lock, op); }

/* The arenas' locks are gated (lock.h): the gate goes up before the first of them is
 * passed, and down when the handlers come back past them. */
static void gated_transfer_locks(lock_op_t op)
{
    if (op == LOCK_OP_TAKE)
        lock_gate_raise();
    transfer_locks(op);
    if (op != LOCK_OP_TAKE)
        lock_gate_lower(op);
}

/* How fork reaches the locks of each rank (lock.h): a new lock is a rank there and its
 * line here. */
static void (*const fork_locks[])(lock_op_t) = {
    [LOCK_RANK_INIT] = init_locks,
    [LOCK_RANK_PURGE] = purge_locks,
    [LOCK_RANK_BACKGROUND] = background_locks,
    [LOCK_RANK_TRANSFER_READY] = transfer_ready_locks,
    [LOCK_RANK_TRANSFER] = gated_transfer_locks,
    [LOCK_RANK_BIN] = arenas_locks,
    [LOCK_RANK_PROF] = prof_locks,
    [LOCK_RANK_PROF_SHARD] = prof_shard_locks,
    [LOCK_RANK_PROF_SLAB] = prof_slab_locks,
    [LOCK_RANK_GUARD] = guard_locks,
    [LOCK_RANK_PAGEHEAP] = pageheap_locks,
    [LOCK_RANK_META] = meta_locks,
};
_Static_assert(ARRAY_SIZE(fork_locks) == LOCK_NRANKS, "every rank has its line in fork_locks");

/* OP on every lock of every rank: up the ranks, or down them. */
static void fork_walk(lock_op_t op, bool down)
{
    for (unsigned i = 1; i < LOCK_NRANKS; i++) {
        unsigned r = down ? LOCK_NRANKS - i : i;
        TIDE_ASSERT(fork_locks[r] != NULL);
        fork_locks[r](op);
    }
}

static void tide_prefork(void)
{
    bool lock = !__libc_single_threaded && tide_locks_held == 0 && !tide_booting;
    tide_fork_locked = tide_fork_locked << 1 | lock;
    if (!lock)
        return;
    if (_IO_list_lock)
        _IO_list_lock();
    fork_walk(LOCK_OP_TAKE, false);
}

static bool tide_fork_pop(void)
{
    bool locked = tide_fork_locked & 1;
    tide_fork_locked >>= 1;
    return locked;
}

static void tide_postfork_parent(void)
{
    if (!tide_fork_pop())
        return;
    fork_walk(LOCK_OP_RELEASE, true);
    if (_IO_list_unlock)
        _IO_list_unlock();
}

static void tide_postfork_child(void)
{
    bool locked = tide_fork_pop();
    /* Whatever the fork: the ranges' VMAs are inherited, tide's pidfd names the parent,
     * and the purger thread did not come along. */
    region.inherited = true;
    os_postfork_child();
    background_postfork_child();
    if (!locked)
        return;
    fork_walk(LOCK_OP_RESET, false);
    tide_locks_held = 0; /* the ones taken by the prepare handler are free now */
    lock_rank_forget_all();
}
