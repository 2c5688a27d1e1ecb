/* SPDX-License-Identifier: MIT */
/* region.c - reserving and growing tide's contiguous range(s).
 *
 * The first range is placed at a random 2 MiB-aligned address between 16 and 32 TiB,
 * far below the kernel's mmap area and far above brk, so it can grow for terabytes.
 * Growth is geometric (a quarter of what is mapped, at least 4 MiB) to keep the number
 * of mmap calls logarithmic while VSZ stays within a small factor of the heap.  A new
 * range is started only when the pages after the last one are taken or the kernel
 * refuses to extend it.
 *
 * The range is mapped with MAP_NORESERVE, so the kernel never refuses it: a request big
 * enough that the kernel might is first put to the kernel itself (region_admit), and a
 * free tail far larger than the heap needs is unmapped again (region_trim_point). */
#include "region.h"

#include <errno.h>

#include "os.h"

region_t region;

#define REGION_HINT_LO ((uintptr_t)16 << 40)
#define REGION_HINT_SLOTS ((uintptr_t)(8 << 20)) /* 2 MiB slots: [16, 32) TiB, 23 bits */
/* The page map is reserved for this many times the heap, so that it rarely grows. */
#define REGION_PM_SLACK 8
/* Requests from this size on are put to the kernel (region_admit).  Below it the probe
 * cannot fail: the heuristic policy (vm.overcommit_memory=0) refuses only a single
 * mapping larger than RAM + swap, strict accounting (2) ignores MAP_NORESERVE and so
 * refuses tide's own extension, and "always" (1) refuses nothing.  256 MiB keeps the
 * probe (two system calls, 5-10 microseconds) away from ordinary requests; on a machine
 * with less than 1 GiB of RAM + swap it is a quarter of that. */
#define REGION_PROBE_MIN (256 * MiB)

/* Where range R ends now; lock-free readers take span (end - base) as the bound, so a
 * shrink lowers span first and a growth raises it last. */
static void range_set_end(range_t *r, uintptr_t new_end)
{
    if (new_end < r->end) {
        ATOMIC_STORE_REL(&r->span, new_end - r->base);
        ATOMIC_STORE_REL(&r->end, new_end);
    } else {
        ATOMIC_STORE_REL(&r->end, new_end);
        ATOMIC_STORE_REL(&r->span, new_end - r->base);
    }
}

static size_t pm_bytes_for(size_t heap_bytes) { return ALIGN_UP((heap_bytes >> LG_PAGE) * REGION_PM_ENTRY_BYTES, PAGE); }

static void region_apply_thp(range_t *r)
{
    if (region.thp || region.advice == REGION_ADVICE_HUGE)
        os_hugepage(r->pm_lo, r->end - r->pm_lo);
    else if (region.advice == REGION_ADVICE_NOHUGE)
        os_nohugepage(r->pm_lo, r->end - r->pm_lo);
}

/* Reserve a new range of HEAP bytes (plus its page map) at HINT, or anywhere. */
static int range_create(uintptr_t hint, size_t heap)
{
    unsigned n = region.nranges;
    if (n == REGION_MAX_RANGES)
        return ENOMEM;
    size_t pm = pm_bytes_for(heap * REGION_PM_SLACK);
    uintptr_t lo = 0;
    int err = EEXIST;
    if (hint) {
        lo = hint - pm;
        err = os_map_at(lo, pm + heap);
    }
    if (err) {
        /* Anywhere, with slack so that base can sit on a 2 MiB boundary. */
        uintptr_t a;
        size_t total = pm + heap + HUGEPAGE;
        err = os_map_anywhere(total, PAGE, &a);
        if (err)
            return err;
        lo = a;
        uintptr_t base = ALIGN_UP(a + pm, HUGEPAGE);
        pm = base - a;
        heap = a + total - base;
    }
    /* Whole, and before anything can merge with it (see os_name). */
    os_name(lo, pm + heap, REGION_NAME);
    range_t *r = &region.ranges[n];
    r->pm_lo = lo;
    r->base = lo + pm;
    range_set_end(r, r->base + heap);
    ATOMIC_STORE(&region.heap_mapped, region.heap_mapped + heap);
    ATOMIC_STORE(&region.pm_mapped, region.pm_mapped + pm);
    region_apply_thp(r);
    ATOMIC_STORE_REL(&region.nranges, n + 1);
    return 0;
}

int region_init(bool thp)
{
    region.thp = thp;
    size_t ram = os_ram_and_swap();
    region.probe_min = ram ? MIN(REGION_PROBE_MIN, MAX(ram / 4, PAGE)) : REGION_PROBE_MIN;
    uint64_t seed = os_random_seed();
    for (int attempt = 0; attempt < 8; attempt++, seed = os_random_seed()) {
        uintptr_t hint = REGION_HINT_LO + (uintptr_t)(seed % REGION_HINT_SLOTS) * HUGEPAGE;
        if (range_create(hint, REGION_MIN_GROW) == 0)
            return 0;
    }
    return range_create(0, REGION_MIN_GROW);
}

/* Extend range R by LEN bytes at its end (and its page map below, when needed). */
static int range_extend(range_t *r, size_t len)
{
    uintptr_t new_end = r->end + len;
    if (new_end < r->end)
        return ENOMEM;
    uintptr_t pm_need = r->base - pm_bytes_for(new_end - r->base);
    if (pm_need < r->pm_lo) {
        uintptr_t want = r->base - pm_bytes_for((new_end - r->base) * REGION_PM_SLACK);
        if (want > r->base) /* wrapped below 0 */
            want = pm_need;
        int err = os_map_at(want, r->pm_lo - want);
        if (err && want != pm_need) {
            want = pm_need;
            err = os_map_at(want, r->pm_lo - want);
        }
        if (err)
            return err;
        os_name(want, r->pm_lo - want, REGION_NAME); /* now it merges into the range's VMA */
        ATOMIC_STORE(&region.pm_mapped, region.pm_mapped + (r->pm_lo - want));
        r->pm_lo = want;
    }
    int err = os_map_at(r->end, len);
    if (err)
        return err;
    os_name(r->end, len, REGION_NAME);
    ATOMIC_STORE(&region.heap_mapped, region.heap_mapped + len);
    range_set_end(r, new_end);
    region_apply_thp(r);
    return 0;
}

int region_admit(size_t bytes)
{
    if (bytes < region.probe_min || bytes <= ATOMIC_LOAD(&region.admitted_max))
        return 0;
    if (os_commit_probe(bytes) == 0) {
        /* Under the heuristic policy the answer depends on the size alone: a smaller
         * request is granted too.  (Under the other two a probe decides nothing: see
         * REGION_PROBE_MIN and below.) */
        size_t cur = ATOMIC_LOAD(&region.admitted_max);
        while (cur < bytes && !__atomic_compare_exchange_n(&region.admitted_max, &cur, bytes, true,
                                                           __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            ;
        return 0;
    }
    /* Strict accounting charges tide's range in full already (it ignores MAP_NORESERVE):
     * free space tide holds needs nothing more, and the kernel refuses a growth itself.
     * Refusing here would count the free pages twice. */
    return os_overcommit_policy() == 2 ? 0 : ENOMEM;
}

/* A growth of the last range after a trim gave address space back: the next trims keep
 * that much, so a buffer that is freed and built again is mapped once, not every time. */
static void region_note_growth(size_t len)
{
    if (region.trimmed) {
        region.trim_keep = MAX(region.trim_keep, len);
        region.trimmed = false;
    }
}

int region_grow(size_t min_bytes, uintptr_t *addr, size_t *len, unsigned *range)
{
    size_t need = ALIGN_UP(min_bytes, HUGEPAGE);
    if (need < min_bytes)
        return ENOMEM;
    size_t step = MAX(need, MAX(region.heap_mapped / 4, REGION_MIN_GROW));
    step = ALIGN_UP(step, HUGEPAGE);
    unsigned n = region.nranges;
    range_t *r = &region.ranges[n - 1];
    uintptr_t old_end = r->end;
    /* Try the geometric step, then just what is needed (strict overcommit may refuse
     * the larger one). */
    if (range_extend(r, step) == 0 || (step > need && range_extend(r, need) == 0)) {
        *addr = old_end;
        *len = r->end - old_end;
        *range = n - 1;
        region_note_growth(*len);
        return 0;
    }
    /* The neighbourhood is taken: start a further range well away from this one. */
    uintptr_t hint = ALIGN_UP(r->end, GiB) + 64 * GiB;
    if (range_create(hint, step) != 0 && (step == need || range_create(hint, need) != 0))
        return ENOMEM;
    r = &region.ranges[n];
    *addr = r->base;
    *len = r->end - r->base;
    *range = n;
    region.trimmed = false;
    return 0;
}

/* When a range's free tail goes back to the kernel.  Only pages already purged are
 * unmapped, so the decay policy still decides when memory goes back; this decides when
 * the address space follows it.  The tail is cut when it is
 *   - at least REGION_TRIM_MIN (1 GiB): smaller heaps never map and unmap;
 *   - more than the bytes in use: VSZ stays within about twice what the program uses, as
 *     in-place growth at the range's end keeps it (may_extend in extent.c);
 *   - more than twice what the cut leaves, which is the geometric step the rest of the
 *     range would grow by next (a quarter of it, at least 4 MiB): the tail a growth leaves
 *     is smaller than its step, so no growth is undone by the next purge pass;
 *     and at least what the range grew by right after the last cut (trim_keep): a program
 *     that frees and rebuilds a big buffer pays one map and unmap, not one every time.
 * The cut keeps the range's end on a 2 MiB boundary (whole huge pages). */
uintptr_t region_trim_point(unsigned i, uintptr_t tail, size_t active, bool forget)
{
    const range_t *r = &region.ranges[i];
    size_t free_tail = r->end - tail;
    if (forget)
        region.trim_keep = 0;
    size_t keep = MAX(MAX((region.heap_mapped - free_tail) / 4, REGION_MIN_GROW), region.trim_keep);
    if (free_tail < REGION_TRIM_MIN || free_tail <= active || free_tail / 2 <= keep)
        return 0;
    uintptr_t cut = ALIGN_UP(tail + keep, HUGEPAGE);
    return cut < r->end ? cut : 0;
}

int region_shrink(unsigned i, uintptr_t new_end)
{
    range_t *r = &region.ranges[i];
    uintptr_t end = r->end;
    /* munmap of the VMA's tail shortens it without a split.  Lock-free readers that still
     * hold the old end only read page-map entries below base, which stay mapped. */
    int err = os_unmap(new_end, end - new_end);
    if (err)
        return err;
    ATOMIC_STORE(&region.heap_mapped, region.heap_mapped - (end - new_end));
    range_set_end(r, new_end);
    region.trimmed = true;
    return 0;
}

void region_advise_fresh(uintptr_t addr, size_t len)
{
    /* (The advice only moves on, none to huge to nohuge: read again after giving it, a
     * change that came between is given too, as region_set_advice may have advised the
     * whole range before these pages took the older one.) */
    int a;
    do {
        a = ATOMIC_LOAD(&region.advice);
        if (region.thp || a == REGION_ADVICE_HUGE)
            os_hugepage(addr, len);
        else if (a == REGION_ADVICE_NOHUGE)
            os_nohugepage(addr, len);
    } while (ATOMIC_LOAD(&region.advice) != a);
}

void region_set_advice(int advice)
{
    ATOMIC_STORE(&region.advice, advice);
    unsigned n = ATOMIC_LOAD_ACQ(&region.nranges);
    for (unsigned i = 0; i < n; i++)
        region_apply_thp(&region.ranges[i]);
}

void region_set_thp(bool on)
{
    region.thp = on;
    unsigned n = ATOMIC_LOAD_ACQ(&region.nranges);
    for (unsigned i = 0; i < n; i++)
        region_apply_thp(&region.ranges[i]);
}

size_t region_resident(void)
{
    size_t total = 0;
    unsigned n = ATOMIC_LOAD_ACQ(&region.nranges);
    for (unsigned i = 0; i < n; i++) {
        const range_t *r = &region.ranges[i];
        total += os_resident(r->base, ATOMIC_LOAD(&r->end) - r->base);
    }
    return total;
}

long region_vmas(void)
{
    long total = 0;
    unsigned n = ATOMIC_LOAD_ACQ(&region.nranges);
    for (unsigned i = 0; i < n; i++) {
        const range_t *r = &region.ranges[i];
        long v = os_count_vmas(r->pm_lo, ATOMIC_LOAD(&r->end));
        if (v < 0)
            return -1;
        total += v;
    }
    return total;
}
