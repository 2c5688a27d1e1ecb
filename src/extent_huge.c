/* SPDX-License-Identifier: MIT */
/* extent_huge.c - the page heap's 2 MiB units and thp:auto's huge pages.
 *
 * The page heap keeps a record of every 2 MiB unit of each range: how many of its pages
 * are in use (slabs, large blocks), whether it was made a huge page since pages of it
 * were last purged, and whether it waits to be.  Under thp:auto (where the system's THP
 * setting is madvise or always) the heap goes through three stages, each advice given to
 * each whole range (MADV_HUGEPAGE on part of one would split its VMA):
 *  - small (less than ADVISE_MIN_ACTIVE in use): no advice and no collapse, as thp:off.
 *    A huge page faulted for a slab would make it resident whole, and a small heap's
 *    page tables are a few hundred KiB.
 *  - huge (from ADVISE_MIN_ACTIVE in use): MADV_HUGEPAGE, so a fault in a unit with no
 *    page yet maps a huge page: a zeroed 2 MiB, no copy, no system call.  The units in
 *    use before it (below huge_from) are collapsed once dense: such a unit (DENSE_PAGES
 *    in use) waits in a queue; a slab creation (one at a time) and the purge passes look
 *    at it: when at most UNIT_SLACK of its pages are not resident (mincore) it is
 *    collapsed (MADV_COLLAPSE, which sets no VMA flag), which costs at most that much
 *    memory; else it is looked at again later, a few times.  So are the metadata range's
 *    units, under this advice and the next (with more slack: metadata is a small part of
 *    such a heap), and the page map's below each range's base: the unit that holds the
 *    entries of the heap's k-th GiB is looked at once that GiB could be in use.  Every
 *    page left in 4 KiB pages costs every fork a page-table entry to copy (about 0.1 us
 *    each here: a 1 GiB heap's page map and metadata, some 1,000 entries, were most of
 *    what a fork cost tide beyond mimalloc 3's).
 *  - nohuge (from the first purge that splits a unit with blocks in it): MADV_NOHUGEPAGE.
 *    Under MADV_HUGEPAGE khugepaged would collapse such a unit again, making the purged
 *    pages resident (up to 511 of a unit's 512 missing, max_ptes_none); from here the heap
 *    is thp:off's, with the huge pages it has kept until purges split them.
 * Purging is thp:off's: a decayed free run goes back with MADV_DONTNEED, which splits a
 * huge page it lies in (memory must go back).  The kernel's refusal of MADV_COLLAPSE (before
 * Linux 6.1) turns it off: exactly thp:off's behaviour, one line in the statistics. */
#include "extent.h"
#include "extent_internal.h"

#include <errno.h>
#include <string.h>

#include "conf.h"
#include "meta.h"
#include "os.h"

#define UNIT_PAGES (HUGEPAGE >> LG_PAGE)
/* A unit with this many pages in use waits to be collapsed (90%). */
#define DENSE_PAGES (UNIT_PAGES * 9 / 10)
/* ... and is collapsed when at most this many of its pages are not resident (1.6%). */
#define UNIT_SLACK 8
/* ... a unit of the metadata range or of a page map when at most this many (12.5%). */
#define META_SLACK 64
/* Times a dense unit that is not yet resident enough is looked at again. */
#define UNIT_TRIES 16
/* A page map's next unit is looked at again when this much more of the heap is in use. */
#define PM_LOOK_STEP (16 * MiB)
/* EINVALs for dense units before any collapse worked that mean the kernel refuses
 * MADV_COLLAPSE (one unit may hold what the kernel will not collapse). */
#define REFUSED_AFTER 4
#define QUEUE_LEN 512
/* MADV_HUGEPAGE from this many bytes in use: below it a huge page faulted whole for a slab
 * that hands out a few regions is mostly memory nobody asked for, and a small heap's
 * partly used slabs (arenas x classes) are a large part of it (test/stress/churn's 10,000
 * threads kept 6.5 MB more after malloc_trim when such units were made huge at once). */
#define ADVISE_MIN_ACTIVE (64 * MiB)

/* A unit's record: pages in use, and flags. */
#define U_USED 0x3ffu
#define U_HUGE (1u << 16)   /* collapsed since it last lost a page */
#define U_QUEUED (1u << 17) /* in the queue */
#define U_TRIES_SHIFT 24

typedef struct unit_tab_s {
    uint32_t *v;
    size_t n;
} unit_tab_t;

static unit_tab_t units[REGION_MAX_RANGES]; /* page-heap lock */
static uint64_t queue[QUEUE_LEN];           /* range << 56 | unit index; page-heap lock */
static unsigned q_head, q_len;              /* q_len read without the lock (atomic) */
static int thp_setting = -1;                /* os_thp_setting(), read at start-up */
static int refused;                         /* the kernel refuses MADV_COLLAPSE (atomic) */
static int einvals, collapse_ok;            /* atomic */
static uint64_t n_collapsed, n_failed, n_meta; /* atomic */
static size_t huge_from[REGION_MAX_RANGES]; /* units from here were empty at MADV_HUGEPAGE */
/* The page maps' units, counted down from each range's base: how many were collapsed or
 * given up, the tries of the next, and the pages in use at which to look again.  Page-heap
 * lock. */
static size_t pm_done[REGION_MAX_RANGES];
static unsigned pm_tries[REGION_MAX_RANGES];
static size_t pm_look_at = SIZE_MAX;
static int pm_due; /* pm_look_at reached (atomic) */
/* A metadata unit not resident enough when it was handed out, looked at again. */
static uintptr_t meta_again, meta_again_last; /* page-heap lock (meta_again read atomic) */
static unsigned meta_again_tries;

void extent_huge_init(void) { thp_setting = os_thp_setting(); }

bool extent_huge_active(void)
{
    return ATOMIC_LOAD(&conf.thp) == THP_AUTO && thp_setting > 0 && !ATOMIC_LOAD(&refused);
}

static uintptr_t unit_origin(unsigned range) { return ALIGN_DOWN(region.ranges[range].base, HUGEPAGE); }

/* The record of unit I of RANGE, the table grown to hold it; NULL when the metadata
 * range is exhausted (the record is advice: such units are never collapsed). */
static uint32_t *unit_rec(unsigned range, size_t i)
{
    unit_tab_t *t = &units[range];
    if (likely(i < t->n))
        return &t->v[i];
    size_t n = MAX(MAX(i + 1, 2 * t->n), (size_t)1024);
    uint32_t *v = meta_alloc(n * sizeof *v);
    if (!v)
        return NULL;
    if (t->n)
        memcpy(v, t->v, t->n * sizeof *v);
    t->v = v; /* (the old table stays: metadata is never freed) */
    t->n = n;
    return &t->v[i];
}

static bool queue_push(unsigned range, size_t i)
{
    if (q_len == QUEUE_LEN)
        return false;
    queue[(q_head + q_len) % QUEUE_LEN] = (uint64_t)range << 56 | i;
    ATOMIC_STORE(&q_len, q_len + 1);
    return true;
}

/* The heap's advice: region.advice, which the ranges take as they grow (set under the
 * page-heap lock, read anywhere). */
static int advice(void) { return ATOMIC_LOAD(&region.advice); }

bool extent_huge_faults(void) { return ATOMIC_LOAD(&region.thp) || advice() == REGION_ADVICE_HUGE; }

/* The heap's advice becomes A.  Page-heap lock held. */
static void set_advice(int a)
{
    region_set_advice(a);
    if (a != REGION_ADVICE_HUGE)
        return;
    meta_advise_huge();
    extent_release_heap_skip();
    pm_look_at = 0;
    /* The units in use so far: the dense ones wait to be collapsed (64 MiB of heap: at
     * most 32 of them, well within the queue). */
    unsigned n = ATOMIC_LOAD_ACQ(&region.nranges);
    for (unsigned r = 0; r < n; r++) {
        huge_from[r] = (ATOMIC_LOAD(&region.ranges[r].end) - unit_origin(r)) >> LG_HUGEPAGE;
        for (size_t i = 1; i < MIN(huge_from[r], units[r].n); i++) {
            uint32_t v = units[r].v[i];
            if ((v & U_USED) >= DENSE_PAGES && !(v & (U_HUGE | U_QUEUED)) && queue_push(r, i))
                units[r].v[i] = (v & ~(0xffu << U_TRIES_SHIFT)) | U_QUEUED;
        }
    }
}

/* Whether thp:auto collapses unit I of RANGE: only under MADV_HUGEPAGE (a small heap is
 * thp:off's), and only the units in use before it (the others come by fault as huge
 * pages); under MADV_NOHUGEPAGE the kernel collapses none. */
static bool collapsible(unsigned range, size_t i)
{
    return advice() == REGION_ADVICE_HUGE && i < huge_from[range];
}

void extent_units_use(unsigned range, uintptr_t addr, size_t npages, bool used)
{
    if (unlikely(used && advice() == REGION_ADVICE_NONE && (pageheap.npages_active << LG_PAGE) >= ADVISE_MIN_ACTIVE) &&
        extent_huge_active())
        set_advice(REGION_ADVICE_HUGE);
    if (used && pageheap.npages_active >= pm_look_at && advice() == REGION_ADVICE_HUGE)
        ATOMIC_STORE(&pm_due, 1);
    uintptr_t origin = unit_origin(range), end = addr + (npages << LG_PAGE);
    size_t first = (addr - origin) >> LG_HUGEPAGE, last = (end - 1 - origin) >> LG_HUGEPAGE;
    for (size_t i = first; i <= last; i++) {
        uint32_t *rec = unit_rec(range, i);
        if (!rec)
            return;
        uintptr_t lo = MAX(addr, origin + (i << LG_HUGEPAGE)), hi = MIN(end, origin + ((i + 1) << LG_HUGEPAGE));
        uint32_t k = (uint32_t)((hi - lo) >> LG_PAGE), v = *rec, u = v & U_USED;
        if (used) {
            u = MIN(u + k, (uint32_t)UNIT_PAGES);
            v = (v & ~U_USED) | u;
            /* (The range's first unit holds its guard page: never collapsed.) */
            if (u >= DENSE_PAGES && !(v & (U_HUGE | U_QUEUED)) && i > 0 && collapsible(range, i) && queue_push(range, i))
                v = (v & ~(0xffu << U_TRIES_SHIFT)) | U_QUEUED;
        } else {
            /* A free splits no huge page (a purge does: extent_units_purged); a unit that
             * empties may have been moved away (mremap), so it is looked at again. */
            u = u > k ? u - k : 0;
            v = (v & ~U_USED) | u;
            if (u == 0)
                v &= ~U_HUGE;
        }
        *rec = v;
    }
}

void extent_units_purged(unsigned range, uintptr_t addr, size_t npages)
{
    uintptr_t origin = unit_origin(range), end = addr + (npages << LG_PAGE);
    for (size_t i = (addr - origin) >> LG_HUGEPAGE; i <= (end - 1 - origin) >> LG_HUGEPAGE && i < units[range].n; i++) {
        /* Blocks in it: a split unit that khugepaged would fill in again. */
        if (advice() == REGION_ADVICE_HUGE && (units[range].v[i] & U_USED))
            set_advice(REGION_ADVICE_NOHUGE);
        units[range].v[i] &= ~U_HUGE;
    }
}

void extent_huge_thp_changed(void)
{
    lock_acquire(&pageheap.lock);
    /* thp:off from auto: no more huge faults (thp:on gives its own advice). */
    if (advice() == REGION_ADVICE_HUGE && ATOMIC_LOAD(&conf.thp) == THP_OFF)
        set_advice(REGION_ADVICE_NOHUGE);
    lock_release(&pageheap.lock);
}

bool extent_huge_pending(void)
{
    /* (The metadata range takes no advice: its units are collapsed under either.) */
    int a = advice();
    return a != REGION_ADVICE_NONE &&
           ((a == REGION_ADVICE_HUGE && (ATOMIC_LOAD(&q_len) != 0 || ATOMIC_LOAD(&pm_due))) ||
            meta_full_unit_waits() || ATOMIC_LOAD(&meta_again) != 0) &&
           extent_huge_active();
}

/* Collapse the unit at U when at most SLACK of its pages are missing (counted in the
 * statistics): 0, -1 when too many are, else the kernel's error.  No lock held. */
static int collapse_resident(uintptr_t u, size_t slack)
{
    if ((os_resident(u, HUGEPAGE) >> LG_PAGE) + slack < UNIT_PAGES)
        return -1;
    int err = os_collapse(u, HUGEPAGE);
    if (err)
        ATOMIC_ADD(&n_failed, 1);
    else
        ATOMIC_STORE(&collapse_ok, 1);
    return err;
}

/* The next unit of each range's page map whose GiB of heap is mapped.  Returns how many
 * were collapsed.  No lock held. */
static unsigned collapse_page_maps(void)
{
    unsigned done = 0;
    lock_acquire(&pageheap.lock);
    pm_look_at = pageheap.npages_active + (PM_LOOK_STEP >> LG_PAGE);
    ATOMIC_STORE(&pm_due, 0);
    unsigned n = ATOMIC_LOAD_ACQ(&region.nranges);
    for (unsigned r = 0; r < n && advice() == REGION_ADVICE_HUGE; r++) {
        const range_t *rg = &region.ranges[r];
        size_t k = pm_done[r];
        uintptr_t u = rg->base - (k + 1) * HUGEPAGE;
        if (u < rg->pm_lo || ATOMIC_LOAD(&rg->end) - rg->base < (k + 1) * (HUGEPAGE / REGION_PM_ENTRY_BYTES * PAGE))
            continue;
        lock_release(&pageheap.lock);
        int err = collapse_resident(u, META_SLACK);
        lock_acquire(&pageheap.lock);
        if (err == 0) {
            ATOMIC_ADD(&n_meta, 1);
            done++;
        }
        if (err >= 0 || ++pm_tries[r] >= UNIT_TRIES) {
            pm_done[r] = k + 1;
            pm_tries[r] = 0;
        }
    }
    lock_release(&pageheap.lock);
    return done;
}

/* A unit of the metadata range handed out whole (extent descriptors, mostly): collapsed
 * like a dense unit, when at most META_SLACK of its pages are missing; else looked at
 * again later (one such unit at a time), a few times.  Returns whether one was.  No lock
 * held. */
static bool collapse_meta_unit(void)
{
    lock_acquire(&pageheap.lock);
    uintptr_t u = meta_again;
    ATOMIC_STORE(&meta_again, 0);
    lock_release(&pageheap.lock);
    if (!u)
        u = meta_take_full_unit();
    if (!u)
        return false;
    int err = collapse_resident(u, META_SLACK);
    if (err == 0) {
        ATOMIC_ADD(&n_meta, 1);
        return true;
    }
    lock_acquire(&pageheap.lock);
    if (err < 0 && meta_again == 0) {
        if (u != meta_again_last) {
            meta_again_last = u;
            meta_again_tries = 0;
        }
        if (++meta_again_tries < UNIT_TRIES)
            ATOMIC_STORE(&meta_again, u);
    }
    lock_release(&pageheap.lock);
    return false;
}

void extent_huge_work(unsigned budget)
{
    if (budget && (meta_full_unit_waits() || ATOMIC_LOAD(&meta_again) != 0) && advice() != REGION_ADVICE_NONE &&
        extent_huge_active() && collapse_meta_unit())
        budget--;
    if (budget && advice() == REGION_ADVICE_HUGE && ATOMIC_LOAD(&pm_due) && extent_huge_active())
        budget -= MIN(budget, collapse_page_maps());
    for (unsigned look = 0; budget && look < 2 * budget + 2 && extent_huge_pending(); look++) {
        lock_acquire(&pageheap.lock);
        if (q_len == 0) {
            lock_release(&pageheap.lock);
            return;
        }
        uint64_t q = queue[q_head];
        q_head = (q_head + 1) % QUEUE_LEN;
        ATOMIC_STORE(&q_len, q_len - 1);
        unsigned range = (unsigned)(q >> 56);
        size_t i = (size_t)(q & (((uint64_t)1 << 56) - 1));
        uintptr_t u = unit_origin(range) + (i << LG_HUGEPAGE);
        uint32_t *rec = unit_rec(range, i);
        if (!rec) {
            lock_release(&pageheap.lock);
            continue;
        }
        uint32_t v = *rec;
        if ((v & U_USED) < DENSE_PAGES || (v & U_HUGE) || u + HUGEPAGE > ATOMIC_LOAD(&region.ranges[range].end) ||
            !collapsible(range, i)) {
            *rec = v & ~U_QUEUED;
            lock_release(&pageheap.lock);
            continue;
        }
        lock_release(&pageheap.lock);
        /* Its pages may be freed meanwhile: a collapse keeps every byte as it is, so at
         * worst a unit that just lost pages is resident again, until they decay. */
        int err = collapse_resident(u, UNIT_SLACK);
        lock_acquire(&pageheap.lock);
        rec = unit_rec(range, i);
        v = rec ? *rec : 0;
        if (err == 0) {
            v = (v & ~U_QUEUED) | U_HUGE;
            ATOMIC_ADD(&n_collapsed, 1);
            budget--;
        } else if (err < 0) {
            /* Not resident enough yet (slabs still to be written): again later. */
            uint32_t tries = (v >> U_TRIES_SHIFT) + 1;
            if (tries < UNIT_TRIES && queue_push(range, i))
                v = (v & ~(0xffu << U_TRIES_SHIFT)) | tries << U_TRIES_SHIFT;
            else
                v &= ~U_QUEUED;
        } else {
            v &= ~U_QUEUED;
            if (err == EINVAL && !ATOMIC_LOAD(&collapse_ok) && ATOMIC_ADD(&einvals, 1) + 1 >= REFUSED_AFTER) {
                ATOMIC_STORE(&refused, 1);
                if (advice() == REGION_ADVICE_HUGE)
                    set_advice(REGION_ADVICE_NOHUGE); /* (thp:off from here) */
            }
        }
        if (rec)
            *rec = v;
        lock_release(&pageheap.lock);
    }
}

void extent_huge_stats(extent_huge_stats_t *out)
{
    out->mode = ATOMIC_LOAD(&conf.thp);
    out->setting = thp_setting;
    out->refused = ATOMIC_LOAD(&refused) != 0;
    out->active = extent_huge_active();
    out->collapsed = ATOMIC_LOAD(&n_collapsed);
    out->advice = advice();
    out->failed = ATOMIC_LOAD(&n_failed);
    out->meta = ATOMIC_LOAD(&n_meta);
}
