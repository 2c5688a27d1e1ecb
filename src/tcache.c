/* SPDX-License-Identifier: MIT */
/* tcache.c - thread caches: refill, flush, set-up and tear-down. */
#include "tcache.h"

#include <pthread.h>
#include <string.h>

#include "arena.h"
#include "background.h"
#include "conf.h"
#include "extent.h"
#include "freelist.h"
#include "guard.h"
#include "os.h"
#include "pagemap.h"
#include "purge.h"
#include "report.h"
#include "size_class.h"
#include "transfer.h"

__thread tcache_t tcache_tls __attribute__((tls_model("initial-exec")));

static pthread_key_t tcache_exit_key;
static int tcache_booted;  /* atomic */
static uint64_t tcache_nthreads; /* atomic */
/* Where this thread last freed a large block (see extent_hint_t). */
static __thread extent_hint_t tcache_hint __attribute__((tls_model("initial-exec")));
/* Calls from a thread whose cache is not usable go to this thread's arena. */
static __thread uint16_t tcache_direct_arena __attribute__((tls_model("initial-exec")));
static __thread uint8_t tcache_has_arena __attribute__((tls_model("initial-exec")));

/* The arenas threads are placed on and refill from: the first tcache_arenas of them
 * (0: all); mallopt(M_ARENA_MAX) lowers it (atomic). */
static unsigned tcache_arenas;

static unsigned arenas_in_use(void)
{
    unsigned n = ATOMIC_LOAD(&tcache_arenas);
    return n && n < narenas ? n : narenas;
}

void tcache_arena_max(unsigned n) { ATOMIC_STORE(&tcache_arenas, n); }

/* Place the calling thread on the arena with the fewest threads, and make the arena's
 * transfer caches usable. */
static unsigned choose_arena(void)
{
    unsigned best = 0, best_n = ~0u, used = arenas_in_use();
    for (unsigned i = 0; i < used; i++) {
        unsigned t = ATOMIC_LOAD(&arenas[i]->nthreads);
        if (t < best_n) {
            best = i;
            best_n = t;
        }
    }
    ATOMIC_ADD(&arenas[best]->nthreads, 1);
    transfer_arena_ready(best);
    return best;
}

static unsigned thread_arena(void)
{
    if (!tcache_has_arena) {
        tcache_direct_arena = (uint16_t)choose_arena();
        tcache_has_arena = 1;
    }
    return tcache_direct_arena;
}

/* The arena a refill of the cache comes from: the one of the CPU the thread runs on (its
 * own arena where the CPU is not known).  Threads that take turns on a CPU then share
 * slabs, so more threads than CPUs touch no more memory than one thread a CPU
 * (bench/churn -t 8: 11,070 page faults instead of 18,178, 0.83-0.94x the time), while
 * threads on different CPUs meet on no lock.  A thread that moves takes from its new
 * CPU's arena; its frees go back to their slabs' arenas as before. */
static unsigned refill_arena(const tcache_t *tc)
{
    int cpu = os_cpu();
    if (cpu < 0)
        return tc->arena;
    unsigned ai = (unsigned)cpu % arenas_in_use();
    transfer_arena_ready(ai);
    return ai;
}

/* ---- without a cache ---------------------------------------------------------------- */

static void *alloc_direct(unsigned cls)
{
    background_start();
    if (unlikely(guard_sampling()))
        guard_sample_charge(sc_size[cls]);
    if (cls < SC_NSMALL) {
        void **p;
        if (!arena_fill(thread_arena(), cls, (void **)&p, 1))
            return NULL;
        p[1] = NULL; /* the key the refill wrote: handed out now */
        return p;
    }
    extent_t *e = extent_alloc_large(sc_size[cls] >> LG_PAGE, PAGE, &tcache_hint);
    if (!e)
        return NULL;
    /* The pages may have been a slab's: a mark left in them is no longer one. */
    ((void **)e->addr)[1] = NULL;
    return (void *)e->addr;
}

static void free_direct(void *p, unsigned cls)
{
    if (cls < SC_NSMALL) {
        /* Straight to its slab, whose bitmap finds a second free. */
        if (arena_return(&p, 1, cls, "free"))
            background_after_free();
        return;
    }
    guard_free_large(extent_of_block((uintptr_t)p), &tcache_hint);
    background_after_free();
}

/* ---- flushing --------------------------------------------------------------------- */

/* Keep the KEEP most recently freed objects of CLS, give the rest back: as one batch to
 * the transfer cache when it has room, else to their slabs (a large class: to the page
 * heap).  Pages that become dirty are reported to the purge policy.  INCOMING is the
 * block whose free made the flush (or NULL): found in the list, it is a double free whose
 * key a use after free cleared. */
static void tcache_flush(tcache_t *tc, unsigned cls, unsigned keep, const void *incoming)
{
    unsigned count = tc->cap[cls] - tcache_room(tc, cls);
    void **cut = NULL, **rest = tc->head[cls];
    for (unsigned i = 0; i < keep && rest; i++) {
        cut = rest;
        /* These few stay in the cache, whose pops check them as the fast path does; the
         * rest is checked fully wherever it is walked next (a slab's return, a refill). */
        if (unlikely(cut == incoming))
            report_double_free("free", incoming);
        rest = fl_next(cut);
        if (unlikely(!fl_plausible(rest)))
            freelist_corrupt("free", cut, rest, cls);
    }
    if (cut)
        fl_set_next(cut, NULL);
    else
        tc->head[cls] = NULL;
    tcache_set_room(tc, cls, tc->cap[cls] - MIN(keep, count));
    if (!rest)
        return;
    if (cls < SC_NSMALL) {
        /* To the arena of the first object's slab: a thread frees mostly what one other
         * thread allocated, so that is where the list is wanted. */
        const range_t *r = region_range_of((uintptr_t)rest);
        extent_t *slab = pm_desc(pm_read(r, (uintptr_t)rest));
        if (!transfer_push(slab->arena, cls, rest, count - keep) && arena_return_list(rest, count - keep, cls, "free"))
            background_after_free();
        return;
    }
    /* A large class caches at most SC_TCACHE_MAX_LARGE blocks, so one batch holds them all,
     * and a link that leads to a block no cache holds (forged, or a loop) is found before
     * the page heap gets any pages. */
    extent_t *batch[SC_TCACHE_MAX_LARGE];
    unsigned n = 0, left = count - keep;
    TIDE_ASSERT(left <= ARRAY_SIZE(batch));
    /* Each link's check reads the page-map entry that names the block's extent: one read
     * per block.  (The first block is the cache's head, pushed by a free that looked it
     * up, or the link after the cut, which had only the fast path's check.) */
    extent_t *e = fl_block_of(rest, cls);
    if (unlikely(!e))
        freelist_corrupt("free", cut, rest, cls);
    void **prev = cut;
    for (void **p = rest; p;) {
        if (unlikely(left-- == 0))
            freelist_corrupt("free", p, fl_next(p), cls);
        void **next = fl_next(p);
        extent_t *next_e = NULL;
        if (next && unlikely(!(next_e = fl_block_of(next, cls))))
            freelist_corrupt("free", p, next, cls);
        if (unlikely(!ATOMIC_LOAD(&e->cached)))
            freelist_corrupt("free", prev, p, cls);
        ATOMIC_STORE(&e->cached, 0);
        batch[n++] = e;
        prev = p;
        p = next;
        e = next_e;
    }
    extent_free_many(batch, n, &tcache_hint);
    background_after_free();
}

static void tcache_flush_all(tcache_t *tc)
{
    for (unsigned c = 0; c < SC_NCACHED; c++)
        if (tc->head[c])
            tcache_flush(tc, c, 0, NULL);
}

/* ---- the budget ------------------------------------------------------------------- */

/* Small class CLS had a slow-path event (it ran dry or overflowed). */
TIDE_INLINE void note_miss(tcache_t *tc, unsigned cls) { tc->last_miss[cls] = ++tc->tick; }

/* Small class CLS's capacity becomes CAP, its list holding COUNT <= CAP objects. */
TIDE_INLINE void set_capacity(tcache_t *tc, unsigned cls, unsigned cap, unsigned count)
{
    tc->cap_bytes = tc->cap_bytes - tc->cap[cls] * sc_size[cls] + cap * sc_size[cls];
    tc->cap[cls] = (uint16_t)cap;
    tcache_set_room(tc, cls, cap - count);
}

/* Shrink small class CLS's capacity to CAP.  A list longer than that goes away whole
 * (only the class missed longest ago is shrunk below what it holds: its objects are the
 * coldest), and a whole list goes to a transfer cache without walking it. */
static void shrink_cap(tcache_t *tc, unsigned cls, unsigned cap)
{
    unsigned count = tc->cap[cls] - tcache_room(tc, cls);
    if (count > cap) {
        tcache_flush(tc, cls, 0, NULL);
        count = 0;
    }
    set_capacity(tc, cls, cap, count);
}

/* Small class CLS is to grow to CAP: keep the thread within TCACHE_BUDGET, as tcmalloc's
 * thread caches take capacity from each other.  Capacity that holds nothing goes first:
 * the class with the most unused capacity gives up to half of it (never going below where
 * it started, nor below what it holds), so that no object moves.  Only when no class has
 * that much unused does the class missed longest ago lose half of its capacity and its
 * objects.  The budget holds every class's initial capacity and any one class's largest
 * (test/unit/tcache), so this always ends with room for CAP. */
static void make_room(tcache_t *tc, unsigned cls, unsigned cap)
{
    while (tc->cap_bytes - tc->cap[cls] * sc_size[cls] + cap * sc_size[cls] > TCACHE_BUDGET) {
        unsigned spare_c = SC_NSMALL, old_c = SC_NSMALL, spare_cap = 0;
        size_t spare = 0;
        uint32_t age = 0;
        for (unsigned c = 0; c < SC_NSMALL; c++) {
            if (c == cls || tc->cap[c] <= sc_tcache_init[c])
                continue;
            unsigned count = tc->cap[c] - tcache_room(tc, c);
            unsigned to = MAX(MAX(tc->cap[c] / 2u, (unsigned)sc_tcache_init[c]), count);
            if ((size_t)(tc->cap[c] - to) * sc_size[c] > spare) {
                spare = (size_t)(tc->cap[c] - to) * sc_size[c];
                spare_c = c;
                spare_cap = to;
            }
            if (tc->tick - tc->last_miss[c] >= age) {
                age = tc->tick - tc->last_miss[c];
                old_c = c;
            }
        }
        if (spare_c != SC_NSMALL)
            shrink_cap(tc, spare_c, spare_cap);
        else if (old_c != SC_NSMALL)
            shrink_cap(tc, old_c, MAX(tc->cap[old_c] / 2u, (unsigned)sc_tcache_init[old_c]));
        else
            return; /* (not reached: see above) */
    }
}

/* ---- life cycle ----------------------------------------------------------------- */

static void tcache_thread_exit(void *arg)
{
    tcache_t *tc = arg;
    if (tc->state != TCACHE_ACTIVE)
        return;
    tcache_flush_all(tc);
    /* Later calls of this thread (other TLS destructors) go straight to the arena. */
    tc->state = TCACHE_DISABLED;
    for (unsigned c = 0; c < SC_NCACHED; c++)
        tcache_set_room(tc, c, 0);
    ATOMIC_SUB(&arenas[tc->arena]->nthreads, 1);
    tcache_has_arena = 0;
    ATOMIC_SUB(&tcache_nthreads, 1);
}

void tcache_boot(void)
{
    pthread_key_create(&tcache_exit_key, tcache_thread_exit);
    ATOMIC_STORE_REL(&tcache_booted, 1);
}

static void tcache_init(tcache_t *tc)
{
    if (!ATOMIC_LOAD_ACQ(&tcache_booted))
        return; /* too early in start-up: stay UNINIT and use the arena meanwhile */
    if (!ATOMIC_LOAD(&conf.tcache)) {
        tc->state = TCACHE_DISABLED;
        return;
    }
    tc->state = TCACHE_BUSY;
    tc->arena = (uint16_t)thread_arena();
    /* pthread_setspecific may allocate (keys past the first 32): BUSY sends that to the arena. */
    if (pthread_setspecific(tcache_exit_key, tc) != 0) {
        tc->state = TCACHE_DISABLED;
        return;
    }
    tc->cap_bytes = 0;
    for (unsigned c = 0; c < SC_NCACHED; c++) {
        tcache_set_room(tc, c, tc->cap[c] = sc_tcache_init[c]);
        if (c < SC_NSMALL)
            tc->cap_bytes += tc->cap[c] * sc_size[c];
    }
    ATOMIC_ADD(&tcache_nthreads, 1);
    tc->state = TCACHE_ACTIVE;
}

/* ---- slow paths ------------------------------------------------------------------- */

static TIDE_NOINLINE __attribute__((noreturn, cold)) void large_bad_head(void **p, unsigned cls, extent_t *e)
{
    if (!ATOMIC_LOAD(&e->cached))
        freelist_bad_block("malloc", p, cls, "is in use: a forged link");
    freelist_bad_block("malloc", p, cls, "lost its key: written after free");
}

/* P, the head of large class CLS, about to be handed out: a block a cache holds has its
 * extent's mark and its key, as glibc checks its big chunks' links.  Without the mark the
 * link that led here was forged (to a block in use); without the key a use after free
 * wrote it. */
TIDE_INLINE bool large_head_ok(const tcache_t *tc, void *const *p, unsigned cls)
{
    return ATOMIC_LOAD(&tc->head_ext[cls - SC_NSMALL]->cached) && p[1] == fl_key(p);
}

TIDE_INLINE void large_leaves_cache(tcache_t *tc, void **p, unsigned cls)
{
    extent_t *e = tc->head_ext[cls - SC_NSMALL];
    if (unlikely(!large_head_ok(tc, p, cls)))
        large_bad_head(p, cls, e);
    ATOMIC_STORE(&e->cached, 0);
}

/* tcache_alloc_slow when the list is empty, its link not in the first range, or the cache
 * not active: apart, so that the pop saves no registers for the refill. */
static TIDE_NOINLINE void *alloc_dry(unsigned cls)
{
    tcache_t *tc = &tcache_tls;
    if (tc->state == TCACHE_UNINIT)
        tcache_init(tc);
    if (tc->state != TCACHE_ACTIVE)
        return alloc_direct(cls);
    void **p = tc->head[cls];
    if (p) { /* a link in another range (or a corrupted one) */
        if (cls >= SC_NSMALL)
            large_leaves_cache(tc, p, cls);
        void **next = fl_next_checked(p, cls, "malloc");
        if (cls >= SC_NSMALL) {
            tc->head_ext[cls - SC_NSMALL] = next ? fl_block_of(next, cls) : NULL;
            p[1] = NULL;
        } else if (unlikely(!fl_take_key(p))) {
            freelist_lost_key("malloc", p);
        }
        tc->head[cls] = next;
        tc->room[cls]++; /* (no carry: the room is at most the capacity) */
        return p;
    }
    if (cls >= SC_NSMALL)
        return alloc_direct(cls);
    /* Dry: a class used in bursts gets a bigger cache (slow start, as tcmalloc's lists). */
    unsigned cap = MIN((unsigned)tc->cap[cls] + tc->cap[cls] / 2u, (unsigned)sc_tcache_max[cls]);
    void *head;
    unsigned want = MAX(sc_tcache_init[cls] / 2u, 1u);
    if (unlikely(guard_sampling())) /* stop where this thread's sampling interval ends */
        want = guard_sample_batch(sc_size[cls], want);
    background_start();
    unsigned ai = refill_arena(tc);
    unsigned got = transfer_pop(ai, cls, &head);
    if (got)
        cap = MAX(cap, got);
    else if (!(got = arena_fill(ai, cls, &head, want)))
        return NULL; /* (a bigger cache holds more, but a refill from slabs stays small) */
    if (unlikely(guard_sampling()))
        guard_sample_charge((size_t)got * sc_size[cls]);
    p = head;
    tc->head[cls] = fl_next_checked(p, cls, "malloc");
    note_miss(tc, cls);
    if (cap > tc->cap[cls])
        make_room(tc, cls, cap);
    set_capacity(tc, cls, cap, got - 1);
    if (unlikely(!fl_take_key(p)))
        freelist_lost_key("malloc", p);
    return p;
}

/* tcache_alloc_slow of a large class: the pop of a block whose extent carries the cached
 * mark and which holds its key (else alloc_dry decides), or a block from the page heap. */
static TIDE_NOINLINE void *alloc_large(unsigned cls)
{
    if (cls < SC_NSMALL)
        __builtin_unreachable(); /* (the link's check then has no small-class case) */
    tcache_t *tc = &tcache_tls;
    void **p = tc->head[cls], *next;
    pm_entry_t e;
    if (likely(tc->state == TCACHE_ACTIVE)) {
        if (likely(p) && (fl_valid_first_range(next = fl_next(p), cls, &e) || !next) && large_head_ok(tc, p, cls)) {
            extent_t **head_ext = &tc->head_ext[cls - SC_NSMALL];
            ATOMIC_STORE(&(*head_ext)->cached, 0);
            *head_ext = next ? pm_desc(e) : NULL;
            tc->head[cls] = next;
            p[1] = NULL;
            tc->room[cls]++;
            return p;
        }
        if (!p)
            return alloc_direct(cls); /* (a large class has no refill) */
    }
    return alloc_dry(cls);
}

void *tcache_alloc_slow(unsigned cls)
{
    if (cls >= SC_NSMALL)
        return alloc_large(cls);
    tcache_t *tc = &tcache_tls;
    void **p = tc->head[cls], *next;
    pm_entry_t e;
    /* A link that the inline check does not pass (another range, or corrupted) is popped
     * by alloc_dry: a tail call, so that this path saves no registers. */
    if (likely(tc->state == TCACHE_ACTIVE)) {
        if (likely(p) && (fl_valid_first_range(next = fl_next(p), cls, &e) || !next)) {
            if (unlikely(!fl_take_key(p)))
                freelist_lost_key("malloc", p);
            tc->head[cls] = next;
            tc->room[cls]++;
            return p;
        }
    }
    return alloc_dry(cls);
}

void tcache_check_not_freed(void *p, unsigned cls, const char *func)
{
    void *mark = ((void **)p)[1];
    tcache_t *tc = &tcache_tls;
    /* Back in its slab: its mark says so; in a thread without a cache (tcache:off, or its
     * cache gone), where every free goes there, whatever a use after free left in it. */
    if (cls < SC_NSMALL && (mark == (void *)freelist_slab_mark || tc->state != TCACHE_ACTIVE)) {
        const range_t *r = region_range_of((uintptr_t)p);
        if (arena_region_is_free(pm_desc(pm_read(r, (uintptr_t)p)), (uintptr_t)p))
            report_double_free(func, p);
        if (mark == (void *)freelist_slab_mark)
            return;
    }
    if (mark != fl_key(p))
        return;
    /* The walk is bounded by the count: a list made to loop ends too. */
    unsigned left = tc->state == TCACHE_ACTIVE ? tc->cap[cls] - tcache_room(tc, cls) : 0;
    for (void **q = tc->head[cls]; q && left; q = fl_next_checked(q, cls, func), left--)
        if (q == p)
            report_double_free(func, p);
    if (cls < SC_NSMALL && transfer_holds(cls, p))
        report_double_free(func, p);
}

/* EXT, the extent of a large block of class CLS, is about to be pushed on TC's list. */
TIDE_INLINE void large_mark(tcache_t *tc, extent_t *ext, unsigned cls)
{
    ATOMIC_STORE(&ext->cached, 1);
    tc->head_ext[cls - SC_NSMALL] = ext;
}

/* tcache_free_slow for all but the plain push: apart, so that the push saves no registers
 * for the flush and the checks. */
static TIDE_NOINLINE void free_to_cache_slow(void *p, unsigned cls, extent_t *ext)
{
    tcache_t *tc = &tcache_tls;
    if (tc->state == TCACHE_UNINIT)
        tcache_init(tc);
    if (tc->state == TCACHE_ACTIVE && p == tc->head[cls])
        report_double_free("free", p);
    /* guard:on: a large block goes to the quarantine, not to a cache that hands it out
     * again at once. */
    if (tc->state != TCACHE_ACTIVE || (cls >= SC_NSMALL && ATOMIC_LOAD(&conf.guard))) {
        free_direct(p, cls);
        return;
    }
    /* Full: keep only the few most recent (warm) objects, so that the cut is found by
     * walking a handful of nodes and the batch given away is big. */
    if (tcache_room(tc, cls) == 0) {
        if (cls < SC_NSMALL)
            note_miss(tc, cls);
        tcache_flush(tc, cls, MIN(tc->cap[cls] / 4u, 8u), p);
    }
    if (cls >= SC_NSMALL)
        large_mark(tc, ext, cls);
    void **obj = p;
    tcache_push(tc, obj, cls);
}

void tcache_free_slow(void *p, unsigned cls, extent_t *ext)
{
    tcache_t *tc = &tcache_tls;
    void **obj = p;
    /* The case of a block above the fast path's sizes, or of a free the fast path left for
     * a full cache' flush: everything else (the head itself, guard:on's large blocks, no
     * room, no active cache) is looked at in free_to_cache_slow. */
    if (likely(tc->state == TCACHE_ACTIVE && obj != tc->head[cls] && tcache_room(tc, cls) != 0 &&
               (cls < SC_NSMALL || !ATOMIC_LOAD(&conf.guard)))) {
        /* A large block's extent says it is cached: a second free finds it there
         * (block_find), whichever thread's cache holds it. */
        if (cls >= SC_NSMALL)
            large_mark(tc, ext, cls);
        tcache_push(tc, obj, cls);
        return;
    }
    free_to_cache_slow(p, cls, ext);
}

void tcache_flush_self(void)
{
    tcache_t *tc = &tcache_tls;
    if (tc->state == TCACHE_ACTIVE)
        tcache_flush_all(tc);
}

size_t tcache_trim(void)
{
    tcache_flush_self();
    transfer_drain();
    arena_release_empty(UINT64_MAX);
    return purge_all();
}

extent_hint_t *tcache_large_hint(void) { return &tcache_hint; }

void tcache_stats(tcache_stats_t *out) { out->nthreads = ATOMIC_LOAD(&tcache_nthreads); }
