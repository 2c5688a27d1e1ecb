/* SPDX-License-Identifier: MIT */
/* malloc.c - the malloc family, under its glibc names and its tide_ twins.
 *
 * The fast paths are here, inline: a small malloc is a table lookup and a pop from the
 * thread's cache; a free is a page-map read (arithmetic on the range) and a push.
 * Everything else goes to a noinline slow path.  Each function is exported under its
 * glibc name and, as an alias, under its tide_ name.
 *
 * The heap profiler (prof.h) needs the program's call into tide: every function that may
 * sample takes the frame record of the entry point, which is either the entry point
 * itself or a noinline function it tail-calls (ENTRY_FRAME() there gives that function
 * a frame pointer, and its frame record holds the caller's frame pointer and return
 * address).  The fast paths stay without a frame.
 *
 * C++'s operators new and delete are here too, under their Itanium names: they are the
 * same fast paths with other slow ones (the new-handler, std::bad_alloc: cxx.h). */
#include <errno.h>
#include <malloc.h>
#include <string.h>

#include "tide.h"

#include "conf.h"
#include "cxx.h"
#include "extent.h"
#include "freelist.h"
#include "guard.h"
#include "init.h"
#include "large.h"
#include "pagemap.h"
#include "prof.h"
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
    bool sampled;   /* a block of guard_sample: its own extent, before a guard page */
    bool prof_slab; /* a block the heap profiler sampled, in its slab (a sampled page) */
} block_t;

/* Whether A is guard_sample's block in live large extent E, and if so describe it: out of
 * line, so that block_lookup_any stays a leaf for every other large block. */
static TIDE_NOINLINE bool block_sampled(uintptr_t a, extent_t *e, pm_entry_t entry, block_t *b)
{
    if (guard_sample_ptr(e) != a)
        return false;
    b->cls = pm_class(entry);
    b->ext = e;
    b->sampled = true;
    b->prof_slab = false;
    b->usable = guard_sample_usable(e);
    return true;
}

/* Describe the block at P, aborting with FUNC's name when P is not one of tide's: every
 * case (block_lookup has the common ones inline). */
static TIDE_NOINLINE void block_lookup_any(void *p, const char *func, block_t *b)
{
    uintptr_t a = (uintptr_t)p;
    const range_t *r = region_range_of(a);
    if (unlikely(!r))
        report_invalid_pointer(func, p);
    pm_entry_t entry = pm_read(r, a);
    extent_t *e = pm_desc(entry);
    b->sampled = false;
    b->prof_slab = pm_is_sampled_page(entry);
    unsigned cls = pm_any_slab_class(entry);
    if (cls < SC_NSMALL) {
        if (unlikely(!sc_starts_region(cls, a - pm_slab_base(entry, a))))
            report_invalid_pointer(func, p);
        /* A stale page's region at the page's start is never handed out: this address is
         * that of a large block freed before (pagemap.h), freed again. */
        if (unlikely(pm_is_stale_page(entry) && (a & PAGE_MASK) == 0))
            report_double_free(func, p);
        b->cls = cls;
        b->ext = e;
        b->usable = sc_size[cls];
        return;
    }
    if (pm_is_large_edge(entry) && e->state == EXTENT_LARGE) {
        /* Freed into a cache, whichever thread's: as glibc finds a freed chunk. */
        if (e->addr == a && ATOMIC_LOAD(&e->cached))
            report_double_free(func, p);
        if (likely(e->addr == a && !e->sample)) {
            b->cls = pm_class(entry);
            b->ext = e;
            b->usable = unlikely(e->prof) ? prof_usable(e) : extent_block_size(e);
            return;
        }
        if (e->sample && block_sampled(a, e, entry, b))
            return;
    }
    if (pm_is_free_edge(entry) && e->addr == a)
        report_double_free(func, p);
    /* A freed block held as a guard (guard.h): any of its pages names it. */
    if (pm_is_guard(entry) && e->state == EXTENT_HELD && a >= e->addr && a < extent_end(e) &&
        (e->sample ? guard_sample_ptr(e) == a : e->addr == a))
        report_double_free(func, p);
    /* A freed block's first page inside a free run; its descriptor may have been merged
     * away since (then the pointer is only invalid, as far as can be told). */
    if (pm_is_freed_head(entry) && e->state < EXTENT_NFREE && e->addr < a && a < extent_end(e))
        report_double_free(func, p);
    report_invalid_pointer(func, p);
}

/* The common cases of block_lookup, inline: a region of a slab, and a large block (not
 * guard_sample's) in the first range.  False: block_lookup_any decides. */
TIDE_INLINE bool block_find(void *p, block_t *b)
{
    uintptr_t a = (uintptr_t)p;
    const range_t *r = &region.ranges[0];
    uintptr_t base = r->base, off = a - base;
    if (likely(off < ATOMIC_LOAD(&r->span))) {
        pm_entry_t entry = pm_read_offset(base, off);
        extent_t *e = pm_desc(entry);
        unsigned cls = pm_slab_class(entry);
        if (pm_is_slab_page(entry)) {
            if (likely(sc_starts_region(cls, a - pm_slab_base(entry, a)))) {
                b->cls = cls;
                b->ext = e;
                b->usable = sc_size[cls];
                b->sampled = false;
                b->prof_slab = false;
                return true;
            }
        } else if (pm_is_large_edge(entry) && e->state == EXTENT_LARGE && e->addr == a && !e->sample &&
                   !ATOMIC_LOAD(&e->cached)) {
            b->cls = pm_class(entry);
            b->ext = e;
            b->usable = unlikely(e->prof) ? prof_usable(e) : extent_block_size(e);
            b->sampled = false;
            b->prof_slab = false;
            return true;
        }
    }
    return false;
}

/* Describe the block at P, aborting with FUNC's name when P is not one of tide's. */
TIDE_INLINE void block_lookup(void *p, const char *func, block_t *b)
{
    if (!block_find(p, b))
        block_lookup_any(p, func, b);
}

TIDE_INLINE void block_free(void *p, const block_t *b)
{
    extent_t *e = b->ext;
    if (unlikely(b->sampled)) {
        guard_sample_free(e);
        return;
    }
    if (unlikely(b->prof_slab))
        prof_free_in_slab(p, e);
    bool moved = e->state == EXTENT_LARGE && e->moved_pieces;
    /* A sample's block of the smallest large class may stay with the profiler for the next
     * sample (not under guard:on, whose large blocks go to the quarantine). */
    if (unlikely(e->state == EXTENT_LARGE && e->prof) &&
        prof_free(e, b->cls == SC_NSMALL && !moved && !ATOMIC_LOAD(&conf.guard)))
        return;
    /* A moved block (shrunk into a cached class) must be healed, not cached. */
    if (b->cls != EXTENT_NO_CLASS && !moved) {
        tcache_free_slow(p, b->cls, e);
        return;
    }
    large_free(e);
}

/* realloc's check: a freed object still in a thread cache or back in its slab looks live
 * to block_lookup.  Found here (realloc reads the block anyway), it is reported as
 * realloc's double free. */
static inline void realloc_check_not_freed(void *p, const block_t *b)
{
    if (unlikely(b->cls != EXTENT_NO_CLASS && (((void **)p)[1] == fl_key(p) ||
                                               ((void **)p)[1] == (void *)freelist_slab_mark)))
        tcache_check_not_freed(p, b->cls, "realloc");
}

/* free_sized's and free_aligned_sized's check before they check the size they were given:
 * free(p); free_sized(p, n) is their double free, found as free's is, without a load from
 * P (tcache_free_slow would find it too, but as free's).  In a thread without a cache
 * (tcache:off, or its cache gone) a small block freed before is free in its slab: found
 * there, with the block's words read, before the size check and in their name. */
static inline void free_check_not_last(void *p, const block_t *b, const char *func)
{
    if (unlikely(b->cls != EXTENT_NO_CLASS && tcache_tls.state == TCACHE_ACTIVE && p == tcache_tls.head[b->cls]))
        report_double_free(func, p);
    if (unlikely(b->cls < SC_NSMALL && !b->sampled && tcache_tls.state != TCACHE_ACTIVE))
        tcache_check_not_freed(p, b->cls, func);
}

/* ---- allocation ---------------------------------------------------------------------- */

#define ENTRY_FRAME() __builtin_frame_address(0)
/* The value of EXPR, computed with the frame ENTRY_FRAME() gave alive: no tail call may
 * pop that frame before a sample has read it (the empty asm comes after the call). */
#define FRAMED(expr)                                                                               \
    __extension__({                                                                                \
        __typeof__(expr) framed_ = (expr);                                                         \
        __asm__ volatile("" ::: "memory");                                                         \
        framed_;                                                                                   \
    })

/* A sampled allocation of SIZE requested bytes that the program sees as USABLE bytes,
 * sampled with the probability of PSIZE bytes, aligned to ALIGN, zeroed when ZERO, with the
 * stack of the call whose frame record is FRAME.  A block of a small class of a page or
 * more stays what it would have been, a region of a slab, its record apart and its page
 * marked (prof_record_in_slab).  A smaller one is promoted to the smallest large class (as
 * jemalloc promotes to its smallest large size), whose extent carries the record: in a
 * slab, its page marked, the frees of the other blocks on that page would take the slow
 * path too.  Other blocks are large blocks of their own, the record in their extent; a
 * block of a cached class comes from the thread cache, so that a sample costs a cache pop,
 * not a trip to the page heap and the faults of pages it hands out.  (A promoted block is
 * another block than the program would have had, with pages of its own: on bench/churn,
 * whose samples are mostly of 4-14 KiB, the promoted blocks' first touches were most of
 * what the profiler cost.) */
TIDE_SAMPLE_PATH static void *alloc_sampled(size_t size, size_t usable, size_t psize, size_t align, bool zero, void *frame)
{
    prof_bt_t bt;
    prof_backtrace(&bt, frame);
    void *p;
    if (usable >= PAGE && usable <= SC_SMALL_MAX && align <= PAGE) {
        unsigned cls = sc_class_of(usable);
        p = tcache_alloc_slow(cls);
        if (p) {
            block_t b;
            block_lookup(p, "malloc", &b);
            prof_record_in_slab(p, b.ext, &bt, size, psize);
            if (zero)
                memset(p, 0, size);
        }
        return p;
    }
    if (usable <= SC_LOOKUP_MAX && align <= PAGE) {
        extent_t *kept = prof_record_kept(&bt, size, usable, psize);
        if (kept) {
            p = (void *)kept->addr;
            /* As every way out of the allocator does: whatever the second word held, it is no
             * key or mark of tide's once the program has the block. */
            ((void **)p)[1] = NULL;
            return zero ? memset(p, 0, size) : p;
        }
    }
    if (usable <= SC_CACHED_MAX && align <= PAGE) {
        p = tcache_alloc_slow(MAX(sc_class_of(usable), (unsigned)SC_NSMALL));
        if (p && zero)
            memset(p, 0, size);
    } else {
        p = large_alloc(usable, MAX(align, PAGE), zero);
    }
    if (p)
        prof_record(extent_of_block((uintptr_t)p), &bt, size, usable <= SC_CACHED_MAX ? usable : 0, psize);
    return p;
}

/* Whether to sample an allocation of SIZE bytes, and in *PSIZE the size its probability
 * is of; COUNTED: the fast path has counted it in its class's countdown (which is below
 * zero when a sample is due), else it is counted here in bytes. */
static inline bool alloc_sample(size_t size, bool counted, size_t *psize)
{
    if (counted) {
        unsigned cls = sc_lookup[(size + 15) >> 4];
        *psize = sc_size[cls];
        return prof_class_due(cls);
    }
    *psize = size;
    return size <= TIDE_MAX_BLOCK && prof_count(size);
}

/* SIZE bytes after the fast path (cache_pop) failed or was not tried. */
TIDE_INLINE void *malloc_any(size_t size, bool zero, void *frame)
{
    void *p = NULL;
    size_t psize;
    /* cache_pop counted every request it can serve, whether it served it or not: its
     * room goes back at once (this thread's own word). */
    if (size <= SC_LOOKUP_MAX)
        prof_take_back(sc_lookup[(size + 15) >> 4]);
    if (likely(init_ensure())) {
        /* guard_sample counts on slow paths only: the fast path pays nothing for it. */
        if (unlikely(alloc_sample(size, size <= SC_LOOKUP_MAX, &psize))) {
            p = alloc_sampled(size, sc_usable(size), psize, PAGE, zero, frame);
        } else if (unlikely(guard_sampling()) && size <= GUARD_SAMPLE_MAX && (p = guard_sample_alloc(size)) != NULL) {
            if (zero)
                memset(p, 0, size);
        } else if (size <= SC_CACHED_MAX) {
            p = tcache_alloc_slow(sc_class_of(size));
            if (p && zero)
                memset(p, 0, size);
        } else {
            p = large_alloc(size, PAGE, zero);
        }
    }
    if (unlikely(!p))
        errno = ENOMEM;
    return p;
}

static TIDE_NOINLINE void *malloc_slow(size_t size) { return FRAMED(malloc_any(size, false, ENTRY_FRAME())); }

/* The fast path for SIZE <= SC_LOOKUP_MAX: pop the head of the thread's list for its
 * class, and count the allocation against the profiler's countdown of the class.  NULL
 * when the list is empty or a sample is due (the popped object is put back); either way
 * the slow path takes the count's room back (prof_take_back).  The count and the room the
 * pop makes are one subtraction from the class's word (tcache.h), whether the profiler is
 * on or off: no test of the setting, and no store more than the pop's own.  It comes
 * last: a subtraction and a branch on it before the pop took bench/pairs' batch 10 % more
 * time (the branch waits for the word, which the class's last pop or push just wrote). */
TIDE_INLINE void *cache_pop(size_t size)
{
    unsigned cls = sc_lookup[(size + 15) >> 4];
    tcache_t *tc = tcache_here();
    void **p = tc->head[cls];
    if (likely(p != NULL)) {
        uintptr_t mask = fl_mask(p);
        /* P's key, on the line the link comes from: P freed twice is on the list twice,
         * and whichever copy is popped second finds the key gone (freelist.h). */
        FL_TAKE_KEY_OR_GOTO(p, mask, bad);
        void *next = (void *)((uintptr_t)p[0] ^ mask);
        if (unlikely(!fl_plausible(next)))
            goto bad;
        tc->head[cls] = next;
        /* The next pop's load of NEXT's link is the fast path's one likely miss (a list
         * freed a while ago): started now, it overlaps what the program does meanwhile
         * (bench/pairs' batch 0.95x the time, churn 0.97x, one instruction more). */
        __builtin_prefetch(next);
        int64_t room = tc->room[cls] - (TCACHE_PROF_ONE - 1);
        tc->room[cls] = room;
        if (likely(room >= 0))
            return p;
        /* Back on the list, as it was: its key again (the mask, from the link, so that the
         * pop need not keep it in a register). */
        p[1] = (void *)((uintptr_t)p[0] ^ (uintptr_t)next);
        tc->head[cls] = p;
        return NULL;
    bad: /* (one call of the cold path for both checks: two gave the fast path a frame) */
        freelist_bad_pop(p);
    }
    tc->room[cls] -= TCACHE_PROF_ONE - 1;
    return NULL;
}

/* P, non-NULL, is the value to return: with the countdown's base in a register, GCC
 * gave that base %rax and moved P there before the ret, one instruction per malloc more
 * than the profiler's subtraction and jump.  Asking for P in %rax from the pop on avoids
 * that. */
#ifdef __x86_64__
#define IN_RETURN_REG(p)                                                                           \
    do {                                                                                           \
        __asm__("" : "+a"(p));                                                                     \
        if ((p) == NULL)                                                                           \
            __builtin_unreachable();                                                               \
    } while (0)
#else
#define IN_RETURN_REG(p) ((void)0)
#endif

TIDE_EXPORT TIDE_FAST_ENTRY void *tide_malloc(size_t size)
{
    if (likely(size <= SC_LOOKUP_MAX)) {
        void *p = cache_pop(size);
        if (likely(p != NULL)) {
            IN_RETURN_REG(p);
            return p;
        }
    }
    return malloc_slow(size);
}

/* malloc inside another entry point, whose frame record is FRAME. */
static void *malloc_framed(size_t size, void *frame)
{
    if (likely(size <= SC_LOOKUP_MAX)) {
        void *p = cache_pop(size);
        if (likely(p != NULL))
            return p;
    }
    return malloc_any(size, false, frame);
}

/* ---- free ----------------------------------------------------------------------------- */

static TIDE_NOINLINE void free_any(void *p)
{
    block_t b;
    block_lookup_any(p, "free", &b);
    block_free(p, &b);
}

static TIDE_NOINLINE void free_slow(void *p)
{
    if (!p)
        return;
    block_t b;
    /* Apart from the rest (a tail call), so that this path saves no registers. */
    if (unlikely(!block_find(p, &b))) {
        free_any(p);
        return;
    }
    block_free(p, &b);
}

/* The free fast path: push P on the thread's list for its class and return true, or
 * false for the slow path.  With SIZED, SIZE is what the caller says P was asked for
 * (free_sized): the fast path takes only a size of P's own class, which fits P whatever
 * else holds; any other size (a block shrunk in place, a wrong size, a large one) is for
 * the slow path's full check.  The page-map read stays: it is what proves P is a region
 * of a live slab of that class at all. */
TIDE_INLINE bool cache_push(void *p, size_t size, bool sized)
{
    uintptr_t a = (uintptr_t)p;
    const range_t *r = &region.ranges[0];
    uintptr_t base = r->base, off = a - base;
    if (sized && unlikely(size > SC_LOOKUP_MAX))
        return false;
    if (likely(off < ATOMIC_LOAD(&r->span))) {
        pm_entry_t entry = pm_read_offset(base, off);
        /* sized: the class of SIZE, known before the entry is read. */
        size_t cls = sized ? sc_lookup[(size + 15) >> 4] : pm_slab_class_index(entry);
        tcache_t *tc = tcache_here();
        void **obj = p;
        /* P the start of a region of a slab of a small class (sized: the page's, which
         * SIZE's is), not a pointer into one, room in the cache, and not the object freed
         * last (free(p); free(p), found without a load from P: a double free with other
         * frees between is found where P's line is read anyway, see freelist.h). */
        if (likely((sized ? pm_slab_class(entry) == cls && sc_starts_region(cls, a - pm_slab_base(entry, a))
                          : pm_starts_small_region(entry, a)) &&
                   tcache_room(tc, cls) != 0 && obj != tc->head[cls])) {
            tcache_push(tc, obj, cls);
            return true;
        }
    }
    return false;
}

TIDE_EXPORT TIDE_FAST_ENTRY void tide_free(void *p)
{
    if (likely(cache_push(p, 0, false)))
        return;
    free_slow(p);
}

/* ---- the rest of the family ----------------------------------------------------------- */

static TIDE_NOINLINE void *calloc_slow(size_t total) { return FRAMED(malloc_any(total, true, ENTRY_FRAME())); }

TIDE_EXPORT void *tide_calloc(size_t nmemb, size_t size)
{
    size_t total;
    if (unlikely(__builtin_mul_overflow(nmemb, size, &total))) {
        errno = ENOMEM;
        return NULL;
    }
    if (likely(total <= SC_LOOKUP_MAX)) {
        void *p = cache_pop(total);
        if (likely(p != NULL))
            return memset(p, 0, total);
    }
    return calloc_slow(total);
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

static void *aligned_alloc_impl(size_t align, size_t size, void *frame)
{
    if (align <= QUANTUM)
        return malloc_framed(size, frame);
    void *p = NULL;
    if (init_ensure()) {
        unsigned cls;
        size_t usable = aligned_usable(align, size, &cls);
        size_t psize;
        if (usable && unlikely(alloc_sample(size, false, &psize)))
            p = alloc_sampled(size, usable, psize, align, false, frame);
        else if (usable && cls != EXTENT_NO_CLASS)
            p = tcache_alloc_slow(cls);
        else if (usable)
            p = large_alloc(usable, MAX(align, PAGE), false);
    }
    if (!p)
        errno = ENOMEM;
    return p;
}

static void *memalign_impl(size_t align, size_t size, void *frame)
{
    /* glibc: a non-power-of-two alignment is rounded up; beyond half the address
     * space it is EINVAL. */
    if (align > SIZE_MAX / 2 + 1) {
        errno = EINVAL;
        return NULL;
    }
    if (!IS_POW2(align))
        align = align ? (size_t)1 << (lg_floor(align) + 1) : 1;
    return aligned_alloc_impl(align, size, frame);
}

TIDE_EXPORT void *tide_memalign(size_t align, size_t size)
{
    return FRAMED(memalign_impl(align, size, ENTRY_FRAME()));
}

TIDE_EXPORT void *tide_aligned_alloc(size_t align, size_t size)
{
    return FRAMED(memalign_impl(align, size, ENTRY_FRAME()));
}

TIDE_EXPORT int tide_posix_memalign(void **memptr, size_t align, size_t size)
{
    if (!IS_POW2(align) || align % sizeof(void *) != 0)
        return EINVAL; /* errno untouched, as glibc's */
    void *p = FRAMED(aligned_alloc_impl(align, size, ENTRY_FRAME())); /* ENOMEM in errno too, as glibc's */
    if (!p)
        return ENOMEM;
    *memptr = p;
    return 0;
}

TIDE_EXPORT void *tide_valloc(size_t size) { return FRAMED(aligned_alloc_impl(PAGE, size, ENTRY_FRAME())); }

TIDE_EXPORT void *tide_pvalloc(size_t size)
{
    if (size > TIDE_MAX_BLOCK) {
        errno = ENOMEM;
        return NULL;
    }
    return FRAMED(aligned_alloc_impl(PAGE, MAX(ALIGN_UP(size, PAGE), PAGE), ENTRY_FRAME()));
}

static void *realloc_move(void *p, size_t old_usable, size_t size, const block_t *b, void *frame)
{
    void *q = malloc_framed(size, frame);
    if (!q)
        return NULL;
    memcpy(q, p, MIN(old_usable, size));
    block_free(p, b);
    return q;
}

static void *realloc_impl(void *p, size_t size, void *frame)
{
    if (!p)
        return malloc_framed(size, frame);
    if (size == 0) {
        tide_free(p);
        return NULL;
    }
    block_t b;
    block_lookup(p, "realloc", &b);
    realloc_check_not_freed(p, &b);
    size_t usable = sc_usable(size);
    if (unlikely(!usable)) {
        errno = ENOMEM;
        return NULL;
    }
    if (usable == b.usable && !b.sampled)
        return p; /* (a block the profiler sampled keeps its record as it was) */
    if (b.sampled) {
        /* guard_sample's block is right-aligned against its guard page for its old size:
         * a new block. */
    } else if (b.ext->state == EXTENT_LARGE && usable >= sc_size[SC_NSMALL]) {
        /* Page runs both: in place, else by moving pages, else by a copy to a roomy place.
         * (The sampled block's record follows it.) */
        extent_prof_t rec = prof_detach(b.ext);
        void *q = large_realloc(b.ext, usable);
        if (q) {
            if (unlikely(rec.stack || ATOMIC_LOAD(&conf.prof)))
                prof_resized(&rec, extent_of_block((uintptr_t)q), b.usable, size, frame);
            return q;
        }
        prof_reattach(&rec, b.ext);
    } else if (b.ext->state == EXTENT_SLAB && size < b.usable && size > b.usable / 2) {
        return p; /* a small shrink: not worth a copy */
    }
    return realloc_move(p, b.usable, size, &b, frame);
}

TIDE_EXPORT void *tide_realloc(void *p, size_t size) { return FRAMED(realloc_impl(p, size, ENTRY_FRAME())); }

TIDE_EXPORT void *tide_reallocarray(void *p, size_t nmemb, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(nmemb, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return FRAMED(realloc_impl(p, total, ENTRY_FRAME()));
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

static TIDE_NOINLINE void free_sized_slow(void *p, size_t size)
{
    if (!p)
        return;
    block_t b;
    block_lookup(p, "free_sized", &b);
    free_check_not_last(p, &b, "free_sized");
    if (unlikely(!size_fits_block(size, b.usable)))
        report_fatal("free_sized", "size does not match the allocation of", p);
    block_free(p, &b);
}

TIDE_EXPORT void tide_free_sized(void *p, size_t size)
{
    if (likely(cache_push(p, size, true)))
        return;
    free_sized_slow(p, size);
}

static TIDE_NOINLINE void free_aligned_sized_slow(void *p, size_t align, size_t size)
{
    if (!p)
        return;
    block_t b;
    block_lookup(p, "free_aligned_sized", &b);
    free_check_not_last(p, &b, "free_aligned_sized");
    unsigned cls;
    size_t want = align <= QUANTUM ? sc_usable(size) : aligned_usable(align, size, &cls);
    if (unlikely(want != b.usable && !size_fits_block(size, b.usable)))
        report_fatal("free_aligned_sized", "size does not match the allocation of", p);
    if (unlikely(align > QUANTUM && ((uintptr_t)p & (align - 1))))
        report_fatal("free_aligned_sized", "alignment does not match the allocation of", p);
    block_free(p, &b);
}

TIDE_EXPORT void tide_free_aligned_sized(void *p, size_t align, size_t size)
{
    /* An alignment of at most the quantum is any block's: free_sized's fast path. */
    if (likely(align <= QUANTUM && cache_push(p, size, true)))
        return;
    free_aligned_sized_slow(p, align, size);
}

TIDE_EXPORT int tide_malloc_trim(size_t pad)
{
    (void)pad;
    if (!init_ensure())
        return 0;
    prof_trim();
    return tcache_trim() > 0;
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

TIDE_EXPORT int tide_malloc_info(int options, FILE *fp)
{
    /* glibc's: no option is defined, any is EINVAL. */
    if (options != 0 || !fp) {
        errno = EINVAL;
        return -1;
    }
    if (!init_ensure())
        return 0;
    int err = stats_malloc_info(fp);
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

TIDE_EXPORT void tide_malloc_stats(void)
{
    if (init_ensure())
        stats_print(0);
}

/* glibc's parameters: M_ARENA_MAX has a meaning in tide, at any time (the arenas exist
 * from the start; threads are placed on, and refill from, only the first VALUE of them
 * from then on, as glibc's threads share the arenas it has).  The others tune glibc's
 * own heap (fast bins, its top chunk, mmap for large blocks, its checks and perturbing
 * byte): tide has none of that, and says so by returning 0, as glibc does for a
 * parameter it does not know. */
TIDE_EXPORT int tide_mallopt(int param, int value)
{
    switch (param) {
    case M_ARENA_MAX:
        if (value <= 0 || !init_ensure())
            return 0;
        tcache_arena_max((unsigned)value);
        return 1;
    default:
        return 0;
    }
}

/* ---- glibc names ------------------------------------------------------------------------ */

/* A ThreadSanitizer build serves its tide_ names only: TSan's runtime calls malloc before it
 * is initialised (the loader's error strings while it looks up what it intercepts), and
 * instrumented code cannot run then; its own allocator serves the malloc family and C++'s
 * operators, in every program it runs, even one that links libtide statically
 * (test/tsan.mk). */
#ifndef TIDE_TSAN

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
TIDE_ALIAS(mallopt, tide_mallopt);
TIDE_ALIAS(malloc_info, tide_malloc_info);
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


/* ---- C++: operators new and delete --------------------------------------------------------- */

/* The twenty that libstdc++ defines for x86_64, under their Itanium names, as the C++
 * standard has them ([new.delete]): new returns a block or throws std::bad_alloc, after
 * the program's new-handler could not make room (cxx.h); the nothrow forms return NULL
 * instead; new(0) is a block of its own, as malloc(0).  The fast paths are malloc's, and
 * free's and free_sized's: sized delete is free_sized (its size is what new was asked
 * for), so a size that does not fit the block aborts with free_sized's report.  An
 * alignment that is no power of two fails, without the handler, as libstdc++'s does. */

/* operator new of SIZE bytes aligned to ALIGN (at most the quantum: malloc's), after the
 * fast path failed or was not tried: the allocation, then the new-handler's loop; NULL or
 * std::bad_alloc when both fail. */
static TIDE_NOINLINE void *new_slow(size_t size, size_t align, bool nothrow)
{
    void *frame = ENTRY_FRAME(), *p = NULL;
    if (likely(IS_POW2(align))) {
        p = align <= QUANTUM ? malloc_any(size, false, frame) : aligned_alloc_impl(align, size, frame);
        while (unlikely(!p) && cxx_new_handler_run(nothrow))
            p = align <= QUANTUM ? malloc_framed(size, frame) : aligned_alloc_impl(align, size, frame);
    }
    if (unlikely(!p) && !nothrow)
        cxx_throw_bad_alloc();
    return FRAMED(p);
}

/* malloc's fast path for the alignments it gives, then new_slow (a tail call: its frame
 * record holds the program's return address, as malloc_slow's). */
TIDE_INLINE void *new_impl(size_t size, size_t align, bool nothrow)
{
    if (likely(IS_POW2(align) && align <= QUANTUM && size <= SC_LOOKUP_MAX)) {
        void *p = cache_pop(size);
        if (likely(p != NULL)) {
            IN_RETURN_REG(p);
            return p;
        }
    }
    return new_slow(size, align, nothrow);
}

/* operator new(size_t), operator new(size_t, const std::nothrow_t &) */
TIDE_EXPORT TIDE_FAST_ENTRY void *_Znwm(size_t size) { return new_impl(size, 1, false); }
TIDE_EXPORT void *_ZnwmRKSt9nothrow_t(size_t size, const void *nothrow_tag)
{
    (void)nothrow_tag;
    return new_impl(size, 1, true);
}
/* operator new(size_t, std::align_val_t), and with const std::nothrow_t & */
TIDE_EXPORT void *_ZnwmSt11align_val_t(size_t size, size_t align) { return new_impl(size, align, false); }
TIDE_EXPORT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t size, size_t align, const void *nothrow_tag)
{
    (void)nothrow_tag;
    return new_impl(size, align, true);
}
/* operator delete(void *, size_t, std::align_val_t): free_aligned_sized, whose arguments
 * come in another order. */
TIDE_EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t size, size_t align)
{
    if (likely(align <= QUANTUM && cache_push(p, size, true)))
        return;
    free_aligned_sized_slow(p, align, size);
}

/* new[] and delete[] are new and delete (the standard's default behaviour). */
TIDE_ALIAS(_Znam, _Znwm);
TIDE_ALIAS(_ZnamRKSt9nothrow_t, _ZnwmRKSt9nothrow_t);
TIDE_ALIAS(_ZnamSt11align_val_t, _ZnwmSt11align_val_t);
TIDE_ALIAS(_ZnamSt11align_val_tRKSt9nothrow_t, _ZnwmSt11align_val_tRKSt9nothrow_t);
/* operator delete(void *) and delete[], and their nothrow and aligned forms: free (the
 * extra arguments are not read). */
TIDE_ALIAS(_ZdlPv, tide_free);
TIDE_ALIAS(_ZdaPv, tide_free);
TIDE_ALIAS(_ZdlPvRKSt9nothrow_t, tide_free);
TIDE_ALIAS(_ZdaPvRKSt9nothrow_t, tide_free);
TIDE_ALIAS(_ZdlPvSt11align_val_t, tide_free);
TIDE_ALIAS(_ZdaPvSt11align_val_t, tide_free);
TIDE_ALIAS(_ZdlPvSt11align_val_tRKSt9nothrow_t, tide_free);
TIDE_ALIAS(_ZdaPvSt11align_val_tRKSt9nothrow_t, tide_free);
/* operator delete(void *, size_t) and delete[]: free_sized. */
TIDE_ALIAS(_ZdlPvm, tide_free_sized);
TIDE_ALIAS(_ZdaPvm, tide_free_sized);
TIDE_ALIAS(_ZdaPvmSt11align_val_t, _ZdlPvmSt11align_val_t);

#endif /* !TIDE_TSAN */
