/* SPDX-License-Identifier: MIT */
/* extent_huge.c - the page heap's 2 MiB units and thp:auto's huge pages.
 *
 * The page heap keeps a record of every 2 MiB unit of each range: how many of its pages
 * are in use (slabs, large blocks), whether it was made a huge page since pages of it
 * were last purged, and whether it waits to be.  Under thp:auto (where the system's THP setting is
 * madvise or always) units become huge pages without MADV_HUGEPAGE, which would set a VMA
 * flag and split the range's one VMA when given to part of it:
 *  - a fresh unit that slabs start to fill (the slab covers the unit's start, the rest of
 *    it is clean free space) is collapsed at once (MADV_COLLAPSE after one page is
 *    written: one zeroed huge page instead of 512 faults), and the rest of it becomes a
 *    dirty run, "fresh" (zeros, not counted as reuse), so that the next slabs and blocks
 *    fill that unit first and, left unused, it decays and goes back like any dirty run;
 *  - a unit that becomes dense (DENSE_PAGES in use) waits in a queue; a slab creation
 *    (one at a time) and the purge passes look at it: when at most UNIT_SLACK of its
 *    pages are not resident (mincore) it is collapsed, which costs at most that much
 *    memory; else it is looked at again later, a few times.
 * Purging is thp:off's: a decayed free run goes back with MADV_DONTNEED, which splits a
 * huge page it lies in (memory must go back), and the unit is collapsed again once it is
 * dense again.  The kernel's refusal (no MADV_COLLAPSE before Linux 6.1) turns it off:
 * exactly thp:off's behaviour, one line in the statistics. */
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
/* Times a dense unit that is not yet resident enough is looked at again. */
#define UNIT_TRIES 16
/* EINVALs that mean the kernel refuses MADV_COLLAPSE: in a row for fresh units (which
 * nothing but a refusal fails so: a page written, nothing else in them), or for dense ones
 * before any collapse worked (a unit may hold what the kernel will not collapse). */
#define REFUSED_AFTER 4
#define QUEUE_LEN 512
/* Fresh units are collapsed up to this many in one call, one more per FRESH_PER_UNIT bytes
 * in use: each MADV_COLLAPSE call costs a fixed part (measured 0.07-2 s for 600 one-unit
 * calls on a loaded 2-CPU machine, 0.08 s for 75 calls of 8 units), and the units ahead
 * cost memory until slabs fill them (at most 1/32 of what is in use, and 16 MiB). */
#define FRESH_MAX_UNITS 8
/* No fresh units below this many bytes in use: a collapse makes a slab resident whole,
 * where 4 KiB pages fault in only what its regions handed out so far, and a small heap's
 * partly used slabs (arenas x classes) are a large part of it (test/stress/churn's 10,000
 * threads: 6.5 MB more after malloc_trim).  Below it, units are collapsed once dense and
 * resident (which counts only pages really touched). */
#define FRESH_MIN_ACTIVE (64 * MiB)
#define FRESH_PER_UNIT (64 * MiB)

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
static int einvals, fresh_einvals, collapse_ok; /* atomic */
static uint64_t n_collapsed, n_fresh, n_failed, n_meta; /* atomic */

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

void extent_units_use(unsigned range, uintptr_t addr, size_t npages, bool used)
{
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
            if (u >= DENSE_PAGES && !(v & (U_HUGE | U_QUEUED)) && i > 0 && queue_push(range, i))
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
    for (size_t i = (addr - origin) >> LG_HUGEPAGE; i <= (end - 1 - origin) >> LG_HUGEPAGE && i < units[range].n; i++)
        units[range].v[i] &= ~U_HUGE;
}

uintptr_t extent_huge_prepare_slab(extent_t *e, unsigned *nunits)
{
    if (!e->zeroed || e->guard || (pageheap.npages_active << LG_PAGE) < FRESH_MIN_ACTIVE || !extent_huge_active())
        return 0;
    /* The unit of the slab's last page, when the slab covers its start and clean free
     * space the rest of it: a fresh unit that slabs start to fill. */
    uintptr_t u = ALIGN_DOWN(extent_end(e) - 1, HUGEPAGE);
    if (e->addr > u || extent_desc_reserve(1) != 0)
        return 0;
    extent_t *t = extent_free_neighbour(e, false, EXTENT_CLEAN);
    size_t want = MIN(MAX((pageheap.npages_active << LG_PAGE) / FRESH_PER_UNIT, (size_t)1), (size_t)FRESH_MAX_UNITS);
    size_t k = 0; /* units, from U, that the slab and clean pages after it cover */
    while (k < want && (extent_end(e) >= u + (k + 1) * HUGEPAGE || (t && extent_end(t) >= u + (k + 1) * HUGEPAGE)))
        k++;
    size_t i = (u - unit_origin(e->range)) >> LG_HUGEPAGE;
    if (k == 0 || i == 0 || !unit_rec(e->range, i + k - 1))
        return 0;
    for (size_t j = 0; j < k; j++)
        units[e->range].v[i + j] |= U_HUGE;
    *nunits = (unsigned)k;
    uintptr_t end = u + k * HUGEPAGE;
    if (extent_end(e) < end) {
        /* The rest of the units: a fresh dirty run (zeros, resident once collapsed).  A
         * page of each further unit is written now, while nothing else can have it (zero
         * over zero): MADV_COLLAPSE wants a page in each unit. */
        for (size_t j = 1; j < k; j++)
            *(volatile char *)(u + j * HUGEPAGE) = 0;
        size_t n = (end - t->addr) >> LG_PAGE;
        extent_tree_remove(t);
        extent_clear_edges(t);
        if (t->npages > n) {
            extent_t *rest = extent_desc_get();
            rest->addr = end;
            rest->npages = t->npages - n;
            rest->range = t->range;
            rest->freed = t->freed & EXTENT_FREED_INSIDE;
            extent_insert_free(rest, EXTENT_CLEAN, 0);
        }
        t->npages = n;
        extent_insert_free(t, EXTENT_DIRTY, os_now_ns());
        if (t->addr == extent_end(e) && t->npages == n)
            t->fresh = 1; /* (no dirty neighbour merged into it) */
    }
    return u;
}

void extent_huge_collapse_fresh(uintptr_t u, unsigned k)
{
    /* One page written (the slab's, zero, so no byte changes): MADV_COLLAPSE wants a page
     * table with a page in it; the rest is zero-filled. */
    *(volatile char *)u = 0;
    int err = os_collapse(u, k * HUGEPAGE);
    if (!err) {
        ATOMIC_STORE(&collapse_ok, 1);
        ATOMIC_STORE(&fresh_einvals, 0);
        ATOMIC_ADD(&n_fresh, k);
        return;
    }
    ATOMIC_ADD(&n_failed, 1);
    if (err == EINVAL && ATOMIC_ADD(&fresh_einvals, 1) + 1 >= REFUSED_AFTER)
        ATOMIC_STORE(&refused, 1);
    const range_t *r = region_range_of(u);
    if (!r)
        return;
    lock_acquire(&pageheap.lock);
    unsigned range = (unsigned)(r - region.ranges);
    size_t i = (u - unit_origin(range)) >> LG_HUGEPAGE;
    for (unsigned j = 0; j < k; j++) {
        /* (Some may have been collapsed: they are looked at again once dense.) */
        uint32_t *rec = unit_rec(range, i + j);
        if (rec)
            *rec &= ~U_HUGE;
    }
    lock_release(&pageheap.lock);
}

bool extent_huge_pending(void) { return (ATOMIC_LOAD(&q_len) != 0 || meta_full_unit_waits()) && extent_huge_active(); }

/* A unit of the metadata range handed out whole (extent descriptors, mostly): collapsed
 * like a dense unit, when at most UNIT_SLACK of its pages are missing.  Returns whether it
 * was.  No lock held. */
static bool collapse_meta_unit(void)
{
    uintptr_t u = meta_take_full_unit();
    if (!u || (os_resident(u, HUGEPAGE) >> LG_PAGE) + UNIT_SLACK < UNIT_PAGES)
        return false;
    if (os_collapse(u, HUGEPAGE) != 0) {
        ATOMIC_ADD(&n_failed, 1);
        return false;
    }
    ATOMIC_STORE(&collapse_ok, 1);
    ATOMIC_ADD(&n_meta, 1);
    return true;
}

void extent_huge_work(unsigned budget)
{
    if (budget && meta_full_unit_waits() && extent_huge_active() && collapse_meta_unit())
        budget--;
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
        if ((v & U_USED) < DENSE_PAGES || (v & U_HUGE) || u + HUGEPAGE > ATOMIC_LOAD(&region.ranges[range].end)) {
            *rec = v & ~U_QUEUED;
            lock_release(&pageheap.lock);
            continue;
        }
        lock_release(&pageheap.lock);
        /* Its pages may be freed meanwhile: a collapse keeps every byte as it is, so at
         * worst a unit that just lost pages is resident again, until they decay. */
        int err = -1;
        if ((os_resident(u, HUGEPAGE) >> LG_PAGE) + UNIT_SLACK >= UNIT_PAGES)
            err = os_collapse(u, HUGEPAGE);
        lock_acquire(&pageheap.lock);
        rec = unit_rec(range, i);
        v = rec ? *rec : 0;
        if (err == 0) {
            v = (v & ~U_QUEUED) | U_HUGE;
            ATOMIC_STORE(&collapse_ok, 1);
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
            ATOMIC_ADD(&n_failed, 1);
            if (err == EINVAL && !ATOMIC_LOAD(&collapse_ok) && ATOMIC_ADD(&einvals, 1) + 1 >= REFUSED_AFTER)
                ATOMIC_STORE(&refused, 1);
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
    out->fresh = ATOMIC_LOAD(&n_fresh);
    out->failed = ATOMIC_LOAD(&n_failed);
    out->meta = ATOMIC_LOAD(&n_meta);
}
