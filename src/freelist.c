/* SPDX-License-Identifier: MIT */
/* freelist.c - the secret of the encoded free lists, and the full check of a link. */
#include "freelist.h"

#include <stdlib.h>

#include "os.h"
#include "pagemap.h"
#include "region.h"
#include "report.h"
#include "size_class.h"

uintptr_t freelist_secret, freelist_slab_mark;

_Static_assert(QUANTUM == 16, "a key's low 4 bits are the secret's");

void freelist_init(void)
{
    /* Never 0: an all-zero word must not decode to a NULL link (the end of a list) in a
     * page of its own. */
    freelist_secret = (uintptr_t)os_random_seed() | ((uintptr_t)1 << 63);
    /* Drawn apart from the secret (it is stored in free objects, where a use after free
     * can read it), and never a key: a key's low 4 bits are the secret's. */
    freelist_slab_mark = ((uintptr_t)os_random_seed() & ~(uintptr_t)(QUANTUM - 1)) |
                         ((freelist_secret ^ 1) & (QUANTUM - 1));
}

void *freelist_block_of(const void *next, unsigned cls)
{
    uintptr_t a = (uintptr_t)next;
    const range_t *r = region_range_of(a);
    if (!r || !fl_plausible(next))
        return NULL;
    pm_entry_t e = pm_read(r, a);
    /* (A class tag is the same test for small and large classes: pm_class.  On a stale
     * page, the region at the page's start is never handed out, so never free.) */
    if (pm_class(e) != cls &&
        !(cls < SC_NSMALL && pm_is_stale_page(e) && pm_stale_class(e) == cls && (a & PAGE_MASK) != 0))
        return NULL;
    return (cls < SC_NSMALL ? sc_starts_region(cls, a - pm_slab_base(e, a)) : (a & PAGE_MASK) == 0) ? pm_desc(e)
                                                                                                   : NULL;
}

bool freelist_valid(const void *next, unsigned cls) { return freelist_block_of(next, cls) != NULL; }

/* Whether NEXT starts a region of a slab of CLS on a page the heap profiler marked: the
 * live sampled block there (prof.h; a region of a page or more is the only one to start on
 * its page). */
static bool sampled_block(const void *next, unsigned cls)
{
    uintptr_t a = (uintptr_t)next;
    const range_t *r = region_range_of(a);
    if (!r || !fl_plausible(next) || cls >= SC_NSMALL)
        return false;
    pm_entry_t e = pm_read(r, a);
    return pm_is_sampled_page(e) && pm_sampled_class(e) == cls && sc_starts_region(cls, a - pm_slab_base(e, a));
}

void freelist_corrupt(const char *func, const void *obj, const void *next, unsigned cls)
{
    /* A list that leads to a live sample of its class holds a block freed twice (or written
     * after its free), as one that leads to any other live block does, which its pop finds
     * by its lost key: the same report, whether or not the profiler sampled the block. */
    if (sampled_block(next, cls))
        freelist_lost_key(func, next);
    char o[24], nx[24], size[24];
    const char *pieces[] = { func, "(): corrupted free list: the object after ", report_fmt_u64(o, (uintptr_t)obj, 1),
                             " (a free block of ", report_fmt_u64(size, sc_size[cls], 0), " bytes) is ",
                             report_fmt_u64(nx, (uintptr_t)next, 1), ", not a free block of its class" };
    report_line(pieces, ARRAY_SIZE(pieces));
    abort();
}

void freelist_lost_key(const char *func, const void *obj)
{
    report_double_free_found(func, obj, "freed twice, or written after its free");
}

void freelist_bad_block(const char *func, const void *obj, unsigned cls, const char *why)
{
    char o[24], size[24];
    const char *pieces[] = { func, "(): corrupted free list: ", report_fmt_u64(o, (uintptr_t)obj, 1), " (a block of ",
                             report_fmt_u64(size, sc_size[cls], 0), " bytes) ", why };
    report_line(pieces, ARRAY_SIZE(pieces));
    abort();
}

void freelist_bad_pop(void *const *obj)
{
    /* The pop checked the key first, with an xor that leaves 0 where the key was: any
     * other word says it was gone (whatever the link says).  The link is as the free, or
     * whatever wrote it since, left it. */
    if (obj[1] != NULL)
        freelist_lost_key("malloc", obj);
    void *next = fl_next(obj);
    const range_t *r = region_range_of((uintptr_t)obj);
    pm_entry_t e = r ? pm_read(r, (uintptr_t)obj) : PM_EMPTY;
    freelist_corrupt("malloc", obj, next, pm_is_slab_page(e) ? pm_slab_class(e) : 0);
}

void *freelist_next_checked(void *const *obj, unsigned cls, const char *func)
{
    void *next = fl_next(obj);
    if (next && !freelist_valid(next, cls))
        freelist_corrupt(func, obj, next, cls);
    return next;
}
