/* purge.c - the purge engine: decay, batching, and the idle purger thread.
 *
 * The scheme is time-based rather than jemalloc's smooth curve: every dirty run carries
 * the time it was freed, the page heap keeps dirty runs in age order, and a run is
 * purged once it is older than decay_ms.  Memory that is reused within decay_ms never
 * pays a purge or a page fault, which is what keeps purging cheap (see
 * docs/architecture.md for the measurements behind the default). */
#include "purge.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/single_threaded.h>
#include <time.h>

#include "conf.h"
#include "extent.h"
#include "os.h"
#include "transfer.h"

#define PURGE_BATCH 64              /* runs per process_madvise call */
#define PURGE_BATCH_PAGES (64 << 8) /* 64 MiB a round: bounds a round's latency */

static lock_t purge_lock = LOCK_INITIALIZER; /* one purger at a time */
static uint64_t purge_next_ns;              /* no run is due before this (atomic) */
static uint64_t purge_passes, purge_bytes;  /* atomic */

/* The background purger. */
static pthread_mutex_t bg_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bg_cond;
static int bg_state;  /* 0 not started, 1 starting/running (atomic) */
static int bg_asleep; /* sleeping with nothing dirty: wake it on the next free (atomic) */

static os_advice_t policy_advice(long policy) { return policy == PURGE_FREE ? OS_ADV_FREE : OS_ADV_DONTNEED; }

/* With huge pages only whole aligned 2 MiB units are purged: purging part of one
 * splits it.  Returns false when E holds no whole unit. */
static bool purge_span(const extent_t *e, bool thp, uintptr_t *lo, uintptr_t *hi)
{
    *lo = e->addr;
    *hi = extent_end(e);
    if (thp) {
        *lo = ALIGN_UP(*lo, HUGEPAGE);
        *hi = ALIGN_DOWN(*hi, HUGEPAGE);
    }
    return *lo < *hi;
}

/* Purge dirty runs freed at or before OLDER_THAN.  WHOLE (an explicit full purge)
 * purges runs whole even with huge pages.  Returns bytes purged. */
static size_t purge_pass(uint64_t older_than, long policy, bool whole)
{
    os_advice_t advice = policy_advice(policy);
    extent_state_t done_state = advice == OS_ADV_FREE ? EXTENT_LAZY : EXTENT_CLEAN;
    bool thp = ATOMIC_LOAD(&conf.thp) != 0 && !whole;
    size_t total = 0;
    for (;;) {
        extent_t *batch[PURGE_BATCH];
        struct iovec iov[PURGE_BATCH];
        lock_acquire(&pageheap.lock);
        size_t n = extent_take_dirty(older_than, thp, batch, PURGE_BATCH, PURGE_BATCH_PAGES);
        if (n == 0) {
            uint64_t oldest = extent_oldest_dirty();
            long decay = ATOMIC_LOAD(&conf.decay_ms);
            uint64_t base = oldest ? oldest : os_now_ns();
            ATOMIC_STORE(&purge_next_ns, decay > 0 ? base + (uint64_t)decay * 1000000u : 0);
            lock_release(&pageheap.lock);
            break;
        }
        lock_release(&pageheap.lock);

        size_t k = 0, bytes = 0;
        for (size_t i = 0; i < n; i++) {
            uintptr_t lo, hi;
            if (purge_span(batch[i], thp, &lo, &hi)) {
                iov[k].iov_base = (void *)lo;
                iov[k].iov_len = hi - lo;
                bytes += hi - lo;
                k++;
            }
        }
        int err = os_purge_vec(iov, k, advice);

        lock_acquire(&pageheap.lock);
        if (err) {
            extent_put_purged(batch, n, EXTENT_DIRTY);
        } else if (!thp) {
            extent_put_purged(batch, n, done_state);
        } else {
            for (size_t i = 0; i < n; i++) {
                uintptr_t lo, hi;
                if (purge_span(batch[i], thp, &lo, &hi))
                    extent_put_purged_span(batch[i], lo, hi, done_state);
                else
                    extent_put_purged(&batch[i], 1, EXTENT_DIRTY);
            }
        }
        lock_release(&pageheap.lock);
        if (err)
            break;
        total += bytes;
    }
    /* Before the counters: once they show this pass, its trim is done too (tests wait on them). */
    extent_trim_tail(whole);
    if (total) {
        ATOMIC_ADD(&purge_passes, 1);
        __atomic_fetch_add(&purge_bytes, total, __ATOMIC_RELEASE);
    }
    return total;
}

/* A free with decay_ms 0 found a pass in progress (atomic).  That pass collected its runs
 * before the free, so it would not take the new one; instead of waiting for the lock
 * behind its madvise, the free leaves this mark, and whoever holds the lock runs one more
 * pass after it lets the lock go (the mark stays for the next holder when someone else
 * takes the lock first).  The mark is set before the try, so that it is never missed. */
static int purge_again;

static size_t purge_run(uint64_t older_than, long policy, bool wait, bool whole)
{
    bool at_once = !wait && older_than != UINT64_MAX && ATOMIC_LOAD(&conf.decay_ms) == 0;
    if (at_once)
        __atomic_store_n(&purge_again, 1, __ATOMIC_SEQ_CST);
    if (wait)
        lock_acquire(&purge_lock);
    else if (!lock_try(&purge_lock))
        return 0;
    if (at_once) {
        /* Clear the mark, then read the clock: every free that left it before has a
         * stamp this pass takes; one that leaves it after finds the lock held. */
        __atomic_store_n(&purge_again, 0, __ATOMIC_SEQ_CST);
        older_than = os_now_ns();
    }
    size_t total = purge_pass(older_than, policy, whole);
    for (;;) {
        lock_release(&purge_lock);
        if (!__atomic_load_n(&purge_again, __ATOMIC_SEQ_CST) || !lock_try(&purge_lock))
            return total;
        __atomic_store_n(&purge_again, 0, __ATOMIC_SEQ_CST);
        long now_policy = ATOMIC_LOAD(&conf.purge);
        if (now_policy != PURGE_NONE)
            total += purge_pass(os_now_ns(), now_policy, false);
    }
}

/* ---- the background purger ------------------------------------------------------- */

static void *bg_main(void *arg)
{
    (void)arg;
    /* Named by itself (a prctl): naming another thread writes to /proc/self/task/TID/comm. */
    pthread_setname_np(pthread_self(), "tide-purge");
    pthread_mutex_lock(&bg_mutex);
    for (;;) {
        long policy = ATOMIC_LOAD(&conf.purge), decay = ATOMIC_LOAD(&conf.decay_ms);
        if (ATOMIC_LOAD(&conf.background) == BACKGROUND_OFF || policy == PURGE_NONE || decay < 0) {
            ATOMIC_STORE(&bg_asleep, 1);
            pthread_cond_wait(&bg_cond, &bg_mutex);
            continue;
        }
        uint64_t now = os_now_ns();
        uint64_t due = ATOMIC_LOAD(&purge_next_ns);
        if (due <= now) {
            pthread_mutex_unlock(&bg_mutex);
            transfer_drain_idle();
            purge_run(now - MIN(now, (uint64_t)decay * 1000000u), policy, true, false);
            pthread_mutex_lock(&bg_mutex);
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
        if (!any_dirty) {
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
    /* This runs inside a free(), which must leave errno alone: a failed stack mmap in
     * pthread_create sets it. */
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
        pthread_mutex_lock(&bg_mutex);
        pthread_cond_signal(&bg_cond);
        pthread_mutex_unlock(&bg_mutex);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        tide_locks_held--;
    }
}

/* ---- entry points ---------------------------------------------------------------- */

void purge_init(void)
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

void purge_after_free(void)
{
    long policy = ATOMIC_LOAD(&conf.purge), decay = ATOMIC_LOAD(&conf.decay_ms);
    if (policy == PURGE_NONE || decay < 0)
        return;
    uint64_t now = os_now_ns();
    if (decay == 0) {
        /* At once: here, or by the pass in progress right after it (see purge_again). */
        purge_run(now, policy, false, false);
        return;
    }
    if (bg_wanted()) {
        if (!ATOMIC_LOAD(&bg_state))
            bg_start();
        else
            bg_wake();
    }
    uint64_t due = ATOMIC_LOAD(&purge_next_ns);
    if (due == 0) {
        /* Nothing was dirty: the run just freed is due one decay from now. */
        ATOMIC_STORE(&purge_next_ns, now + (uint64_t)decay * 1000000u);
        return;
    }
    if (now >= due)
        purge_run(now - (uint64_t)decay * 1000000u, policy, false, false);
}

void purge_tick(void)
{
    /* Free when nothing is dirty: no clock read. */
    uint64_t due = ATOMIC_LOAD(&purge_next_ns);
    if (due == 0 || ATOMIC_LOAD(&bg_state))
        return;
    long policy = ATOMIC_LOAD(&conf.purge), decay = ATOMIC_LOAD(&conf.decay_ms);
    if (policy == PURGE_NONE || decay <= 0)
        return;
    uint64_t now = os_now_ns();
    if (now < due)
        return;
    /* What the purger thread would do: the lists idling in transfer caches first. */
    transfer_drain_idle();
    purge_run(now - (uint64_t)decay * 1000000u, policy, false, false);
}

size_t purge_all(void)
{
    long policy = ATOMIC_LOAD(&conf.purge);
    return purge_run(UINT64_MAX, policy == PURGE_NONE ? PURGE_DONTNEED : policy, true, true);
}

void purge_prefork(void)
{
    lock_acquire(&purge_lock);
    pthread_mutex_lock(&bg_mutex);
}

void purge_postfork_parent(void)
{
    pthread_mutex_unlock(&bg_mutex);
    lock_release(&purge_lock);
}

void purge_postfork_child(bool locked)
{
    /* The purger thread did not survive the fork: the next free starts another. */
    ATOMIC_STORE(&bg_state, 0);
    ATOMIC_STORE(&bg_asleep, 0);
    if (!locked)
        return;
    lock_init(&purge_lock);
    pthread_mutex_init(&bg_mutex, NULL);
    purge_init();
}

void purge_stats(purge_stats_t *out)
{
    out->passes = ATOMIC_LOAD(&purge_passes);
    out->purged_bytes = ATOMIC_LOAD_ACQ(&purge_bytes);
    out->background_running = ATOMIC_LOAD(&bg_state);
}
