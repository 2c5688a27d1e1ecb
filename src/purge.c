/* purge.c - the purge engine: one pass over the decayed dirty runs, batched, and the
 * decay's bookkeeping (when the next run comes due).  Who calls it when, the free-time
 * tick and the idle purger thread, is background.c.
 *
 * The scheme is time-based rather than jemalloc's smooth curve: every dirty run carries
 * the time it was freed, the page heap keeps dirty runs in age order, and a run is
 * purged once it is older than decay_ms.  Memory that is reused within decay_ms never
 * pays a purge or a page fault, which is what keeps purging cheap (see
 * docs/architecture.md for the measurements behind the default). */
#include "purge.h"

#include "conf.h"
#include "extent.h"
#include "lock.h"
#include "os.h"

#define PURGE_BATCH 64              /* runs per process_madvise call */
#define PURGE_BATCH_PAGES (64 << 8) /* 64 MiB a round: bounds a round's latency */

static lock_t purge_lock = LOCK_INITIALIZER; /* one purger at a time */
static uint64_t purge_next_ns;              /* no run is due before this (atomic) */
static uint64_t purge_passes, purge_bytes;  /* atomic */

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
 * purges runs whole even with huge pages.  Returns bytes purged.  purge_lock held. */
static size_t pass(uint64_t older_than, long policy, bool whole)
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

size_t purge_pass(uint64_t older_than, long policy, bool wait, bool whole)
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
    size_t total = pass(older_than, policy, whole);
    for (;;) {
        lock_release(&purge_lock);
        if (!__atomic_load_n(&purge_again, __ATOMIC_SEQ_CST) || !lock_try(&purge_lock))
            return total;
        __atomic_store_n(&purge_again, 0, __ATOMIC_SEQ_CST);
        long now_policy = ATOMIC_LOAD(&conf.purge);
        if (now_policy != PURGE_NONE)
            total += pass(os_now_ns(), now_policy, false);
    }
}

size_t purge_all(void)
{
    long policy = ATOMIC_LOAD(&conf.purge);
    return purge_pass(UINT64_MAX, policy == PURGE_NONE ? PURGE_DONTNEED : policy, true, true);
}

uint64_t purge_next_due(void) { return ATOMIC_LOAD(&purge_next_ns); }

void purge_set_due(uint64_t ns) { ATOMIC_STORE(&purge_next_ns, ns); }

void purge_prefork(void) { lock_acquire(&purge_lock); }

void purge_postfork_parent(void) { lock_release(&purge_lock); }

void purge_postfork_child(void) { lock_init(&purge_lock); }

void purge_stats(purge_stats_t *out)
{
    out->passes = ATOMIC_LOAD(&purge_passes);
    out->purged_bytes = ATOMIC_LOAD_ACQ(&purge_bytes);
}
