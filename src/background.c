/* SPDX-License-Identifier: MIT */
/* background.c - when the purge engine runs: at frees, at large allocations of a process
 * with no purger thread, and in the purger thread that gives an idle process's memory back.
 *
 * The thread starts lazily, at an allocation (a thread cache's refill, a large malloc),
 * and only once the program has a second thread of its own under background:auto (the
 * default; see bg_wanted); never inside a free (background_start says why); it
 * sleeps until the oldest dirty run is due, gives back the empty slabs the bins kept
 * unused for decay_ms, purges, then drains the transfer caches nobody took from. */
#include "background.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/single_threaded.h>
#include <time.h>

#include "arena.h"
#include "conf.h"
#include "extent.h"
#include "lock.h"
#include "os.h"
#include "purge.h"
#include "transfer.h"

static pthread_mutex_t bg_mutex TIDE_FORK_LOCK = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bg_cond;
static int bg_state;  /* 0 not started, 1 starting/running (atomic) */
static int bg_asleep; /* sleeping with nothing dirty: wake it on the next free (atomic) */

/* bg_mutex, ranked as tide's own locks are (lock.h; debug builds check it). */
static void bg_lock(void)
{
    lock_rank_take(LOCK_RANK_BACKGROUND, 0, &bg_mutex);
    pthread_mutex_lock(&bg_mutex);
}

static void bg_unlock(void)
{
    pthread_mutex_unlock(&bg_mutex);
    lock_rank_drop(LOCK_RANK_BACKGROUND);
}

/* Give back the empty slabs the bins kept since OLDER_THAN (they are dirty as of when
 * they emptied, so this pass purges them: an idle process's kept slabs go back within
 * two decays), purge what has decayed, then give the lists idling in transfer caches back
 * to their slabs.  The drain comes last: a slab it empties that its bin does not keep is
 * dirty from now on, and merged into a decayed dirty run beside it it would make the
 * whole run young again (a merged run keeps its newest stamp), keeping it resident for
 * one more decay (178 MiB of a 1 GiB burst, in test/system/purge's
 * single_threaded_program_purges_at_its_next_calls). */
static void purge_then_drain(uint64_t older_than, long policy, bool wait)
{
    arena_release_empty(older_than);
    purge_pass(older_than, policy, wait, false);
    transfer_drain_idle();
    /* Dense units waiting for huge pages (thp:auto), a few a pass. */
    extent_huge_work(8);
}

static void *bg_main(void *arg)
{
    (void)arg;
    /* Named by itself (a prctl): naming another thread writes to /proc/self/task/TID/comm. */
    pthread_setname_np(pthread_self(), "tide-purge");
    bg_lock();
    for (;;) {
        long policy = ATOMIC_LOAD(&conf.purge), decay = ATOMIC_LOAD(&conf.decay_ms);
        if (ATOMIC_LOAD(&conf.background) == BACKGROUND_OFF || policy == PURGE_NONE || decay < 0) {
            ATOMIC_STORE(&bg_asleep, 1);
            pthread_cond_wait(&bg_cond, &bg_mutex);
            continue;
        }
        uint64_t now = os_now_ns();
        purge_note_time(now);
        uint64_t due = purge_next_due();
        if (due <= now) {
            bg_unlock();
            purge_then_drain(now - MIN(now, (uint64_t)decay * 1000000u), policy, true);
            bg_lock();
            if (decay == 0 && ATOMIC_LOAD(&conf.decay_ms) == 0) {
                /* Every free purges at once, so nothing comes due with time: sleep until
                 * a free with decay_ms > 0 wakes us.  (purge_next_ns stays 0 with
                 * decay 0: looping here held purge_lock most of the time, and the frees
                 * that found it taken left their pages dirty.) */
                ATOMIC_STORE(&bg_asleep, 1);
                pthread_cond_wait(&bg_cond, &bg_mutex);
            }
            continue;
        }
        lock_acquire(&pageheap.lock);
        bool any_dirty = extent_oldest_dirty() != 0;
        lock_release(&pageheap.lock);
        /* Kept slabs come due too: a pass with nothing dirty sets the next one decay_ms on. */
        if (!any_dirty && !arena_holds_empty()) {
            ATOMIC_STORE(&bg_asleep, 1);
            pthread_cond_wait(&bg_cond, &bg_mutex);
            continue;
        }
        struct timespec ts = { (time_t)(due / 1000000000u), (long)(due % 1000000000u) };
        pthread_cond_timedwait(&bg_cond, &bg_mutex, &ts);
    }
    return NULL;
}

static void bg_start(void)
{
    int expected = 0;
    if (!__atomic_compare_exchange_n(&bg_state, &expected, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return;
    /* Block every signal in the purger: signals meant for the program must not land here. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    /* This runs inside a malloc, which must leave errno alone when it succeeds: a failed
     * stack mmap in pthread_create sets it. */
    int saved_errno = errno;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    if (pthread_create(&t, &attr, bg_main, NULL) != 0)
        ATOMIC_STORE(&bg_state, 0);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved_errno;
}

static void bg_wake(void)
{
    if (__atomic_exchange_n(&bg_asleep, 0, __ATOMIC_ACQ_REL)) {
        /* Counted as one of tide's locks (see lock.h): a fork from a signal handler that
         * interrupts this must not wait for the mutex. */
        tide_locks_held++;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        bg_lock();
        pthread_cond_signal(&bg_cond);
        bg_unlock();
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        tide_locks_held--;
    }
}

void background_init(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&bg_cond, &attr);
    pthread_condattr_destroy(&attr);
}

/* Whether the purger thread may run: background:on, or auto once the program has a
 * second thread of its own.  A single-threaded program gets no thread (it would make the
 * process multithreaded: unshare(CLONE_NEWUSER) fails, glibc's single-threaded paths
 * turn off, and its stack costs VMAs); it purges from its own calls instead.  glibc's
 * flag is what glibc itself trusts: it turns false when a thread is created, for good. */
static bool bg_wanted(void)
{
    long mode = ATOMIC_LOAD(&conf.background);
    return mode == BACKGROUND_ON || (mode == BACKGROUND_AUTO && !__libc_single_threaded);
}

/* Only an allocation starts the thread, never a free: glibc calls free() with its own
 * stack-cache lock held (__nptl_free_stacks frees a cached stack's TLS under it), and
 * pthread_create takes that lock, so a free that started the thread there waited for
 * itself for ever (test/system/prof under guard:on).  glibc allocates under no lock that
 * pthread_create takes, other than the loader's recursive ones. */
void background_start(void)
{
    if (ATOMIC_LOAD(&bg_state) || !bg_wanted())
        return;
    long policy = ATOMIC_LOAD(&conf.purge), decay = ATOMIC_LOAD(&conf.decay_ms);
    if (policy == PURGE_NONE || decay <= 0)
        return;
    bg_start();
}

void background_after_free(void)
{
    long policy = ATOMIC_LOAD(&conf.purge), decay = ATOMIC_LOAD(&conf.decay_ms);
    if (policy == PURGE_NONE || decay < 0)
        return;
    uint64_t now = os_now_ns();
    purge_note_time(now);
    if (decay == 0) {
        /* At once: here, or by the pass in progress right after it (see purge_again). */
        purge_pass(now, policy, false, false);
        return;
    }
    bool thread = ATOMIC_LOAD(&bg_state) != 0;
    if (thread)
        bg_wake();
    uint64_t due = purge_next_due();
    if (due == 0) {
        /* Nothing was dirty: the run just freed is due one decay from now. */
        purge_set_due(now + (uint64_t)decay * 1000000u);
        return;
    }
    /* With a purger thread the program's threads leave the passes to it: a free never
     * pays a madvise, and the thread never waits on purge_lock behind one. */
    if (now >= due && !thread)
        purge_pass(now - (uint64_t)decay * 1000000u, policy, false, false);
}

void background_tick(void)
{
    /* Free when nothing is dirty: no clock read. */
    uint64_t due = purge_next_due();
    if (due == 0 || ATOMIC_LOAD(&bg_state))
        return;
    long policy = ATOMIC_LOAD(&conf.purge), decay = ATOMIC_LOAD(&conf.decay_ms);
    if (policy == PURGE_NONE || decay <= 0)
        return;
    uint64_t now = os_now_ns();
    purge_note_time(now);
    if (now < due)
        return;
    purge_then_drain(now - (uint64_t)decay * 1000000u, policy, false);
}

void background_locks(lock_op_t op)
{
    if (op == LOCK_OP_TAKE) {
        bg_lock();
    } else if (op == LOCK_OP_RELEASE) {
        bg_unlock();
    } else {
        /* The child: the prepare handler's lock is given back by the thread that took it
         * (the child's one thread), not initialised again: initialising a locked mutex is
         * undefined (POSIX), and ThreadSanitizer saw the next bg_lock as a double lock.
         * The condition variable is made anew: the parent's waiter is not in the child. */
        pthread_mutex_unlock(&bg_mutex);
        background_init();
    }
}

void background_postfork_child(void)
{
    /* The purger thread did not survive the fork: the next allocation starts another. */
    ATOMIC_STORE(&bg_state, 0);
    ATOMIC_STORE(&bg_asleep, 0);
}

