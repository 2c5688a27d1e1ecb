/* malloc.c - the malloc family, under its glibc names and its tide_ twins.
 *
 * The fast paths are here, inline: a small malloc is a table lookup and a pop from the
 * thread's cache; a free is a page-map read (arithmetic on the range) and a push.
 * Everything else goes to a noinline slow path.  Each function is exported under its
 * glibc name and, as an alias, under its tide_ name. */
#include <errno.h>
#include <malloc.h>
#include <string.h>

#include "tide.h"

#include "extent.h"
#include "freelist.h"
#include "init.h"
#include "large.h"
#include "pagemap.h"
#include "region.h"
#include "report.h"
#include "size_class.h"
#include "stats.h"
#include "tcache.h"

/* ---- blocks: what a pointer is ---------------------------------------------------- */

typedef struct block_s {
    unsigned cls;   /* size class, or EXTENT_NO_CLASS for a large block without one */
    extent_t *ext;  /* the slab or large extent */
    size_t usable;
} block_t;

/* Describe the block at P, aborting with FUNC's name when P is not one of tide's. */
static void block_lookup(void *p, const char *func, block_t *b)
{
    uintptr_t a = (uintptr_t)p;
    const range_t *r = region_range_of(a);
    if (unlikely(!r))
        report_invalid_pointer(func, p);
    pm_entry_t entry = pm_read(r, a);
    extent_t *e = pm_desc(entry);
    if (pm_is_slab_page(entry)) {
        if (unlikely(!sc_starts_region(pm_slab_class(entry), a - pm_slab_base(entry, a))))
            report_invalid_pointer(func, p);
        b->cls = pm_slab_class(entry);
        b->ext = e;
        b->usable = sc_size[b->cls];
        return;
    }
    if (pm_is_large_edge(entry) && e->addr == a && e->state == EXTENT_LARGE) {
        b->cls = pm_class(entry);
        b->ext = e;
        b->usable = extent_size(e);
        return;
    }
    if (pm_is_free_edge(entry) && e->addr == a)
        report_double_free(func, p);
    /* A freed block's first page inside a free run; its descriptor may have been merged
     * away since (then the pointer is only invalid, as far as can be told). */
    if (pm_is_freed_head(entry) && e->state < EXTENT_NFREE && e->addr < a && a < extent_end(e))
        report_double_free(func, p);
    report_invalid_pointer(func, p);
}

static void block_free(void *p, const block_t *b)
{
    /* A moved block (shrunk into a cached class) must be healed, not cached. */
    if (b->cls != EXTENT_NO_CLASS && !(b->ext->state == EXTENT_LARGE && b->ext->moved_pieces))
        tcache_free_slow(p, b->cls);
    else
        large_free(b->ext);
}

/* ---- allocation ---------------------------------------------------------------------- */

static TIDE_NOINLINE void *malloc_slow(size_t size)
{
    void *p = NULL;
    if (likely(init_ensure())) {
        if (size <= SC_CACHED_MAX)
            p = tcache_alloc_slow(sc_class_of(size));
        else
            p = large_alloc(size, PAGE, false);
    }
    if (unlikely(!p))
        errno = ENOMEM;
    return p;
}

TIDE_EXPORT void *tide_malloc(size_t size)
{
    if (likely(size <= SC_LOOKUP_MAX)) {
        unsigned cls = sc_lookup[(size + 15) >> 4];
        tcache_t *tc = &tcache_tls;
        void **p = tc->head[cls];
        if (likely(p != NULL)) {
            void *next = fl_next(p);
            /* (A loop onto itself: P freed twice, its key cleared between by a use after
             * free.) */
            if (unlikely(!fl_plausible(next) || next == p))
                freelist_corrupt_after(p, next);
            tc->head[cls] = next;
            p[1] = NULL;
            tc->avail[cls]++;
            return p;
        }
    }
    return malloc_slow(size);
}

/* ---- free ----------------------------------------------------------------------------- */

static TIDE_NOINLINE void free_slow(void *p)
{
    if (!p)
        return;
    block_t b;
    block_lookup(p, "free", &b);
    block_free(p, &b);
}

TIDE_EXPORT void tide_free(void *p)
{
    uintptr_t a = (uintptr_t)p;
    const range_t *r = &region.ranges[0];
    uintptr_t base = r->base, off = a - base;
    if (likely(off < ATOMIC_LOAD(&r->span))) {
        pm_entry_t entry = pm_read_offset(r, off);
        unsigned cls = pm_slab_class(entry);
        tcache_t *tc = &tcache_tls;
        void **obj = p;
        /* A small class, P the start of one of its regions (not a pointer into one), room
         * in the cache, and not already freed: neither holding the key nor the object just
         * freed (whose key a use after free may have cleared: the push would make a loop). */
        if (likely(cls < SC_NSMALL && sc_starts_region(cls, a - pm_slab_base(entry, a)) && tc->avail[cls] != 0 &&
                   !fl_marked(obj))) {
            fl_set_next(obj, tc->head[cls]);
            obj[1] = (void *)freelist_key;
            tc->head[cls] = obj;
            tc->avail[cls]--;
            return;
        }
    }
    free_slow(p);
}

/* ---- the rest of the family ----------------------------------------------------------- */

TIDE_EXPORT void *tide_calloc(size_t nmemb, size_t size)
{
    size_t total;
    if (unlikely(__builtin_mul_overflow(nmemb, size, &total))) {
        errno = ENOMEM;
        return NULL;
    }
    if (total <= SC_CACHED_MAX) {
        void *p = tide_malloc(total);
        if (p)
            memset(p, 0, total);
        return p;
    }
    void *p = init_ensure() ? large_alloc(total, PAGE, true) : NULL;
    if (!p)
        errno = ENOMEM;
    return p;
}

/* The usable size an aligned request gets, and its class (or EXTENT_NO_CLASS). */
static size_t aligned_usable(size_t align, size_t size, unsigned *cls)
{
    if (align <= PAGE && size <= SC_CACHED_MAX) {
        /* The first class that is a multiple of ALIGN: slabs start on a page, so its
         * regions are ALIGN-aligned. */
        for (unsigned c = sc_class_of(MAX(size, align)); c < SC_NCACHED; c++) {
            if (sc_size[c] % align == 0) {
                *cls = c;
                return sc_size[c];
            }
        }
    }
    *cls = EXTENT_NO_CLASS;
    if (size > TIDE_MAX_BLOCK)
        return 0;
    return MAX(ALIGN_UP(size, PAGE), PAGE);
}

static void *aligned_alloc_impl(size_t align, size_t size)
{
    if (align <= QUANTUM)
        return tide_malloc(size);
    void *p = NULL;
    if (init_ensure()) {
        unsigned cls;
        size_t usable = aligned_usable(align, size, &cls);
        if (usable && cls != EXTENT_NO_CLASS)
            p = tcache_alloc_slow(cls);
        else if (usable)
            p = large_alloc(usable, MAX(align, PAGE), false);
    }
    if (!p)
        errno = ENOMEM;
    return p;
}

TIDE_EXPORT void *tide_memalign(size_t align, size_t size)
{
    /* glibc: a non-power-of-two alignment is rounded up; beyond half the address
     * space it is EINVAL. */
    if (align > SIZE_MAX / 2 + 1) {
        errno = EINVAL;
        return NULL;
    }
    if (!IS_POW2(align))
        align = align ? (size_t)1 << (lg_floor(align) + 1) : 1;
    return aligned_alloc_impl(align, size);
}

TIDE_EXPORT void *tide_aligned_alloc(size_t align, size_t size) { return tide_memalign(align, size); }

TIDE_EXPORT int tide_posix_memalign(void **memptr, size_t align, size_t size)
{
    if (!IS_POW2(align) || align % sizeof(void *) != 0)
        return EINVAL; /* errno untouched, as glibc's */
    void *p = aligned_alloc_impl(align, size); /* ENOMEM in errno too, as glibc's */
    if (!p)
        return ENOMEM;
    *memptr = p;
    return 0;
}

TIDE_EXPORT void *tide_valloc(size_t size) { return aligned_alloc_impl(PAGE, size); }

TIDE_EXPORT void *tide_pvalloc(size_t size)
{
    if (size > TIDE_MAX_BLOCK) {
        errno = ENOMEM;
        return NULL;
    }
    return aligned_alloc_impl(PAGE, MAX(ALIGN_UP(size, PAGE), PAGE));
}

static void *realloc_move(void *p, size_t old_usable, size_t size, const block_t *b)
{
    void *q = tide_malloc(size);
    if (!q)
        return NULL;
    memcpy(q, p, MIN(old_usable, size));
    block_free(p, b);
    return q;
}

TIDE_EXPORT void *tide_realloc(void *p, size_t size)
{
    if (!p)
        return tide_malloc(size);
    if (size == 0) {
        tide_free(p);
        return NULL;
    }
    block_t b;
    block_lookup(p, "realloc", &b);
    /* A freed object still in a thread cache or back in its slab looks live here. */
    if (unlikely(b.cls != EXTENT_NO_CLASS && fl_marked(p)))
        tcache_check_not_freed(p, b.cls, "realloc");
    size_t usable = sc_usable(size);
    if (unlikely(!usable)) {
        errno = ENOMEM;
        return NULL;
    }
    if (usable == b.usable)
        return p;
    if (b.ext->state == EXTENT_LARGE && usable >= sc_size[SC_NSMALL]) {
        /* Page runs both: in place, else by moving pages, else by a copy to a roomy place. */
        void *q = large_realloc(b.ext, usable);
        if (q)
            return q;
    } else if (b.ext->state == EXTENT_SLAB && size < b.usable && size > b.usable / 2) {
        return p; /* a small shrink: not worth a copy */
    }
    return realloc_move(p, b.usable, size, &b);
}

TIDE_EXPORT void *tide_reallocarray(void *p, size_t nmemb, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(nmemb, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return tide_realloc(p, total);
}

TIDE_EXPORT size_t tide_malloc_usable_size(void *p)
{
    if (!p)
        return 0;
    block_t b;
    block_lookup(p, "malloc_usable_size", &b);
    return b.usable;
}

/* Whether SIZE can be the size a block of USABLE bytes was last asked for (malloc,
 * calloc or realloc): its own usable size, or less after a realloc that shrank a small
 * block in place (by at most half), or up to a huge page less under thp:on. */
static bool size_fits_block(size_t size, size_t usable)
{
    if (size > usable)
        return false;
    return usable <= MAX(sc_usable(size), 2 * size) || (usable >= HUGEPAGE && usable - size < HUGEPAGE);
}

TIDE_EXPORT void tide_free_sized(void *p, size_t size)
{
    if (!p)
        return;
    block_t b;
    block_lookup(p, "free_sized", &b);
    if (unlikely(!size_fits_block(size, b.usable)))
        report_fatal("free_sized", "size does not match the allocation of", p);
    block_free(p, &b);
}

TIDE_EXPORT void tide_free_aligned_sized(void *p, size_t align, size_t size)
{
    if (!p)
        return;
    block_t b;
    block_lookup(p, "free_aligned_sized", &b);
    unsigned cls;
    size_t want = align <= QUANTUM ? sc_usable(size) : aligned_usable(align, size, &cls);
    if (unlikely(want != b.usable && !size_fits_block(size, b.usable)))
        report_fatal("free_aligned_sized", "size does not match the allocation of", p);
    if (unlikely(align > QUANTUM && ((uintptr_t)p & (align - 1))))
        report_fatal("free_aligned_sized", "alignment does not match the allocation of", p);
    block_free(p, &b);
}

TIDE_EXPORT int tide_malloc_trim(size_t pad)
{
    (void)pad;
    return init_ensure() && tcache_trim() > 0;
}

TIDE_EXPORT struct mallinfo2 tide_mallinfo2(void)
{
    struct mallinfo2 mi;
    memset(&mi, 0, sizeof mi);
    if (!init_ensure())
        return mi;
    tide_stats_t s;
    stats_collect(&s, false);
    mi.arena = s.mapped;
    mi.uordblks = s.allocated;
    mi.fordblks = s.dirty + s.lazy + s.clean;
    mi.hblks = s.nmalloc_large - s.nfree_large;
    mi.keepcost = s.clean;
    return mi;
}

TIDE_EXPORT void tide_malloc_stats(void)
{
    if (init_ensure())
        stats_print(0);
}

/* ---- glibc names ------------------------------------------------------------------------ */

#define TIDE_ALIAS(name, target) __typeof__(target) name __attribute__((alias(#target), visibility("default")))

TIDE_ALIAS(malloc, tide_malloc);
TIDE_ALIAS(free, tide_free);
TIDE_ALIAS(calloc, tide_calloc);
TIDE_ALIAS(realloc, tide_realloc);
TIDE_ALIAS(reallocarray, tide_reallocarray);
TIDE_ALIAS(posix_memalign, tide_posix_memalign);
TIDE_ALIAS(aligned_alloc, tide_aligned_alloc);
TIDE_ALIAS(memalign, tide_memalign);
TIDE_ALIAS(valloc, tide_valloc);
TIDE_ALIAS(pvalloc, tide_pvalloc);
TIDE_ALIAS(malloc_usable_size, tide_malloc_usable_size);
TIDE_ALIAS(free_sized, tide_free_sized);
TIDE_ALIAS(free_aligned_sized, tide_free_aligned_sized);
TIDE_ALIAS(malloc_trim, tide_malloc_trim);
TIDE_ALIAS(mallinfo2, tide_mallinfo2);
TIDE_ALIAS(malloc_stats, tide_malloc_stats);
/* glibc's cfree is gone, but old binaries may still call it. */
TIDE_ALIAS(cfree, tide_free);

TIDE_EXPORT struct mallinfo mallinfo(void)
{
    struct mallinfo2 m2 = tide_mallinfo2();
    struct mallinfo m;
    memset(&m, 0, sizeof m);
    m.arena = (int)m2.arena;
    m.uordblks = (int)m2.uordblks;
    m.fordblks = (int)m2.fordblks;
    m.hblks = (int)m2.hblks;
    m.keepcost = (int)m2.keepcost;
    return m;
}

