/* SPDX-License-Identifier: MIT */
/* purge.c - the purge engine: one pass over the decayed dirty runs, batched, and the
 * decay's bookkeeping (how much of them it keeps, when the next pass is due).  Who calls
 * it when, the free-time tick and the idle purger thread, is background.c.
 *
 * Every dirty run carries the time it was freed, the page heap keeps dirty runs in age
 * order, and no run is purged before it has been free for decay_ms.  A decay pass then
 * purges the oldest runs only as far as the dirty pages exceed the pages the program
 * took back from dirty or lazy runs over the last decay_ms: a program whose working set
 * keeps coming back keeps as much resident as it keeps reusing, and what it does not
 * reuse (a burst, an idle process's heap) goes back as before.  The reuse is counted by
 * sub-windows of decay_ms / 4, so the allowance falls a quarter decay at a time once the
 * program stops reusing (see docs/architecture.md). */
#include "purge.h"

#include "conf.h"
#include "extent.h"
#include "lock.h"
#include "os.h"

#include <string.h>

#define PURGE_BATCH 64              /* runs per process_madvise call */
#define PURGE_BATCH_PAGES (64 << 8) /* 64 MiB a round: bounds a round's latency */

/* The decay's memory of the recent past: the running count of pages reused
 * (pageheap.reused) as it stood when each of the last sub-windows of decay_ms /
 * REUSE_SPLIT began, so that the pages reused over the last decay_ms are the count now
 * less its mark REUSE_SPLIT sub-windows back.  Marks are set by whoever first sees a new
 * sub-window (purge_note_time); a sub-window nobody saw gets the count as of the next
 * one seen, so that reuse is never dated later than it happened. */
#define REUSE_SPLIT 4
#define NMARKS (REUSE_SPLIT + 1)
static size_t reuse_mark[NMARKS];       /* by sub-window, modulo NMARKS (atomic) */
static uint64_t mark_epoch, mark_len;   /* the latest sub-window marked, and the length (ns) */

static lock_t purge_lock TIDE_FORK_LOCK = LOCK_INITIALIZER(LOCK_RANK_PURGE); /* one purger at a time */
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

static size_t reused_now(void) { return __atomic_load_n(&pageheap.reused, __ATOMIC_RELAXED); }

void purge_note_time(uint64_t now)
{
    long decay = ATOMIC_LOAD(&conf.decay_ms);
    if (decay <= 0)
        return;
    uint64_t len = (uint64_t)decay * 1000000u / REUSE_SPLIT, epoch = now / len;
    uint64_t last = ATOMIC_LOAD(&mark_epoch);
    if (epoch == last && ATOMIC_LOAD(&mark_len) == len)
        return;
    if (!__atomic_compare_exchange_n(&mark_epoch, &last, epoch, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return; /* another thread marks this one */
    size_t count = reused_now();
    if (ATOMIC_LOAD(&mark_len) != len || epoch < last || epoch - last >= NMARKS) {
        /* New decay_ms, or nobody looked for a whole window: nothing counts as recent. */
        last = epoch - NMARKS;
        ATOMIC_STORE(&mark_len, len);
    }
    for (uint64_t e = last + 1; e <= epoch; e++)
        ATOMIC_STORE(&reuse_mark[e % NMARKS], count);
}

/* The pages reused over the last decay_ms, seen AHEAD sub-windows from now if nothing is
 * reused meanwhile: what a decay pass leaves dirty. */
static size_t decay_keeps(unsigned ahead)
{
    if (ahead >= REUSE_SPLIT)
        return 0;
    uint64_t epoch = ATOMIC_LOAD(&mark_epoch);
    size_t count = reused_now(), mark = ATOMIC_LOAD(&reuse_mark[(epoch + ahead + 1) % NMARKS]);
    return count > mark ? count - mark : 0;
}

/* When what the decay keeps next falls below DIRTY pages, if nothing is reused meanwhile:
 * the start of a later sub-window. */
static uint64_t decay_keeps_until(size_t dirty)
{
    unsigned ahead = 1;
    while (decay_keeps(ahead) >= dirty)
        ahead++;
    return (ATOMIC_LOAD(&mark_epoch) + ahead) * ATOMIC_LOAD(&mark_len);
}

/* Purge dirty runs freed at or before OLDER_THAN.  DECAY (a decay pass): only beyond
 * what decay_keeps() allows.  WHOLE (an explicit full purge) purges runs whole even with
 * huge pages.  Returns bytes purged.  purge_lock held. */
static size_t pass(uint64_t older_than, long policy, bool decay_pass, bool whole)
{
    os_advice_t advice = policy_advice(policy);
    extent_state_t done_state = advice == OS_ADV_FREE ? EXTENT_LAZY : EXTENT_CLEAN;
    bool thp = ATOMIC_LOAD(&conf.thp) == THP_ON && !whole;
    long decay = ATOMIC_LOAD(&conf.decay_ms);
    decay_pass = decay_pass && decay > 0;
    size_t total = 0, left = SIZE_MAX; /* pages this pass may still take */
    if (decay_pass) {
        /* Only one purger at a time: every page counted dirty here is in a tree. */
        lock_acquire(&pageheap.lock);
        purge_note_time(os_now_ns());
        size_t dirty = pageheap.npages[EXTENT_DIRTY], keep = decay_keeps(0);
        left = dirty > keep ? dirty - keep : 0;
        lock_release(&pageheap.lock);
    }
    for (;;) {
        extent_t *batch[PURGE_BATCH];
        struct iovec iov[PURGE_BATCH];
        lock_acquire(&pageheap.lock);
        size_t n = left ? extent_take_dirty(older_than, thp, batch, PURGE_BATCH, MIN(left, PURGE_BATCH_PAGES),
                                            decay_pass)
                        : 0;
        if (n == 0) {
            uint64_t oldest = extent_oldest_dirty(), due = 0;
            if (decay > 0 && oldest && oldest <= older_than && decay_pass)
                due = decay_keeps_until(pageheap.npages[EXTENT_DIRTY]); /* kept: until that falls */
            else if (decay > 0)
                due = (oldest ? oldest : os_now_ns()) + (uint64_t)decay * 1000000u;
            ATOMIC_STORE(&purge_next_ns, due);
            lock_release(&pageheap.lock);
            break;
        }
        for (size_t i = 0; i < n && left != SIZE_MAX; i++)
            left -= MIN(left, batch[i]->npages);
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
    size_t total = pass(older_than, policy, !at_once && older_than != UINT64_MAX, whole);
    for (;;) {
        lock_release(&purge_lock);
        if (!__atomic_load_n(&purge_again, __ATOMIC_SEQ_CST) || !lock_try(&purge_lock))
            return total;
        __atomic_store_n(&purge_again, 0, __ATOMIC_SEQ_CST);
        long now_policy = ATOMIC_LOAD(&conf.purge);
        if (now_policy != PURGE_NONE)
            total += pass(os_now_ns(), now_policy, false, false);
    }
}

size_t purge_all(void)
{
    long policy = ATOMIC_LOAD(&conf.purge);
    return purge_pass(UINT64_MAX, policy == PURGE_NONE ? PURGE_DONTNEED : policy, true, true);
}

uint64_t purge_next_due(void) { return ATOMIC_LOAD(&purge_next_ns); }

void purge_set_due(uint64_t ns) { ATOMIC_STORE(&purge_next_ns, ns); }

void purge_locks(lock_op_t op) { lock_apply(&purge_lock, op); }

void purge_stats(purge_stats_t *out)
{
    out->passes = ATOMIC_LOAD(&purge_passes);
    out->purged_bytes = ATOMIC_LOAD_ACQ(&purge_bytes);
}
