/* SPDX-License-Identifier: MIT */
/* region.h - tide's address space: one contiguous range (a few if the kernel forces it)
 * and the page map that makes every pointer lookup arithmetic.
 *
 * Layout of a range:
 *
 *      pm_lo            base                                   end
 *        | page map  <-- |  heap pages -->                      |
 *
 * The heap grows up from base and the page map grows down from base, both with
 * MAP_FIXED_NOREPLACE, the same flags and the same name ("tide", given to each new
 * mapping whole as it is made), so the kernel keeps the whole range as one
 * VMA.  The entry of heap page i is the 8 bytes at base - 8 * (i + 1); pagemap.h says
 * what entries hold.  Nothing inside a
 * range is ever unmapped or mprotected; a range may shrink at its end (region_shrink),
 * which shortens its VMA without splitting it.  The page map never shrinks: lock-free
 * readers may still hold an old end and read the entries below base. */
#ifndef TIDE_REGION_H
#define TIDE_REGION_H

#include <stdbool.h>
#include <stdint.h>

#include "util.h"

#define REGION_MAX_RANGES 32
/* What tide's mappings are called in /proc/PID/maps and smaps: "[anon:tide]". */
#define REGION_NAME "tide"
/* Bytes of page map a heap page needs (pagemap.h holds the entry itself). */
#define REGION_PM_ENTRY_BYTES 8

typedef struct range_s {
    uintptr_t base;  /* first heap byte; the page map (pagemap.h) lies just below */
    uintptr_t end;   /* end of the mapped heap; read without the lock (atomic) */
    uintptr_t span;  /* end - base, kept with end (atomic): the free fast path's bound */
    uintptr_t pm_lo; /* lowest mapped byte of the page map */
} range_t;

typedef struct region_s {
    range_t ranges[REGION_MAX_RANGES];
    unsigned nranges;   /* read without the lock (atomic) */
    size_t heap_mapped; /* bytes of heap pages mapped, all ranges; read without the lock (atomic) */
    size_t pm_mapped;   /* bytes of page map mapped, all ranges; read without the lock (atomic) */
    bool thp;           /* every range carries MADV_HUGEPAGE (thp:on) */
    int advice;         /* thp:auto's advice on every range: REGION_ADVICE_* */
    bool inherited;     /* this process is a fork child: its ranges' VMAs came from the
                         * parent, and the kernel never merges a fresh mapping into them */
    size_t probe_min;   /* requests of at least this many bytes are put to the kernel */
    size_t admitted_max; /* the largest request the kernel granted (atomic) */
    size_t trim_keep;   /* free tail a trim leaves: what the range grew by after the last one */
    bool trimmed;       /* the last range shrank since it last grew */
} region_t;

/* A free tail smaller than this is never given back (see region_trim_point). */
#define REGION_TRIM_MIN GiB
/* The least a range grows by. */
#define REGION_MIN_GROW (4 * MiB)

extern region_t region TIDE_HIDDEN;

enum { REGION_ADVICE_NONE, REGION_ADVICE_HUGE, REGION_ADVICE_NOHUGE };

int region_init(bool thp);
/* Whether the kernel's overcommit policy would grant a request for BYTES that it must
 * account for: what glibc would map for it (a block's size with its alignment slack, the
 * growth of a realloc, which mremap charges).  MAP_NORESERVE hides tide's range from the
 * policy, and a request may be served from free space the range already has, so large
 * requests ask the kernel (os_commit_probe) whether the range grows or not.  0 or ENOMEM.
 * No lock needed; never called on a fast path. */
int region_admit(size_t bytes);
/* Map at least MIN_BYTES more heap, at the end of the last range when possible.
 * On success *ADDR and *LEN give the fresh span and *RANGE its range index.  Caller holds
 * the page-heap lock. */
int region_grow(size_t min_bytes, uintptr_t *addr, size_t *len, unsigned *range);
/* Where range I should end when its free, purged tail starts at TAIL and ACTIVE bytes
 * are in use, or 0 to keep it whole.  FORGET (malloc_trim, tide_purge) drops the slack
 * learned from earlier regrowth.  Caller holds the page-heap lock. */
uintptr_t region_trim_point(unsigned i, uintptr_t tail, size_t active, bool forget);
/* Unmap range I from NEW_END (2 MiB-aligned, above base) to its end.  The pages there
 * must be free and hold nothing resident.  Caller holds the page-heap lock. */
int region_shrink(unsigned i, uintptr_t new_end);
/* Apply MADV_HUGEPAGE to every range, whole (never a sub-range: that would split it). */
void region_set_thp(bool on);
/* thp:auto's advice (REGION_ADVICE_*) on every range, whole; a range's new pages take it
 * too.  Caller holds the page-heap lock. */
void region_set_advice(int advice);
/* Give fresh pages mapped over [ADDR, ADDR+LEN) of a range (a heal) the range's advice, so
 * that they merge back into its VMA. */
void region_advise_fresh(uintptr_t addr, size_t len);

/* The range holding ADDR, or NULL: the first range by arithmetic, the rest by a scan
 * of the (tiny) range table. */
static inline const range_t *region_range_of(uintptr_t addr)
{
    const range_t *r = &region.ranges[0];
    if (likely(addr - r->base < ATOMIC_LOAD(&r->span)))
        return r;
    unsigned n = ATOMIC_LOAD_ACQ(&region.nranges);
    for (unsigned i = 1; i < n; i++) {
        r = &region.ranges[i];
        if (addr - r->base < ATOMIC_LOAD(&r->span))
            return r;
    }
    return NULL;
}

/* Bytes of tide's ranges that are resident, and the VMAs that cover them. */
size_t region_resident(void);
long region_vmas(void);

#endif
