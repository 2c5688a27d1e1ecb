/* SPDX-License-Identifier: MIT */
/*
 * stress.c - many threads allocating, reallocating and freeing, many objects freed by a
 * thread other than the one that allocated them.
 *
 * Every object is filled with a pattern derived from its address and size when it is
 * allocated, and every byte is checked before it is freed (and before and after each
 * realloc).  Sizes are log-uniform over 1 B - 4 MiB (so half are under 2 KiB), through
 * every allocation entry point.  Objects change hands through shared slots: a thread
 * puts its new object into a random slot (of the group its phase gives it, see
 * PHASE_OPS) and frees whatever was there.
 *
 * The amount of work is fixed (no timing assertions); TIDE_STRESS_SCALE=<n> in the
 * environment multiplies it for longer runs.
 */
#include "support.h"

#include <criterion/criterion.h>
#include <pthread.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

struct obj {
    unsigned char *p;
    size_t n;
    int owner;    /* thread that allocated it */
    size_t align; /* 0: from malloc, calloc or realloc (free_sized may free it); else the
                   * alignment asked of aligned_alloc/posix_memalign/memalign (for
                   * free_aligned_sized) */
};

struct slot {
    pthread_mutex_t mu;
    struct obj o;
};

enum { NSLOTS = 1024, NLOCAL = 64 };

static struct slot slots[NSLOTS];

/* The threads meet every PHASE_OPS operations.  In phase P, thread I hands objects over
 * only through the slots of group (I + P) mod N, which thread I + 1 used in the phase
 * before, so most of what it frees there is that thread's, however the threads are
 * scheduled: with the slots free for all, a thread that ran alone for a while freed its
 * own objects, and 8 threads on 2 CPUs freed 23-30 % of their objects remotely depending
 * on how fast each one's operations were. */
#define PHASE_OPS 256

struct shared {
    size_t max_size;
    long ops_per_thread;
    int nthreads;
    pthread_barrier_t phase;
    atomic_long allocs, frees, remote_frees, reallocs, bytes;
};

struct worker {
    int id;
    struct shared *sh;
    pthread_t tid;
};

static long scale(void)
{
    const char *s = getenv("TIDE_STRESS_SCALE");
    long k = s ? strtol(s, NULL, 10) : 1;
    return k > 0 ? k : 1;
}

static const char *const how_names[] = {"malloc", "calloc", "aligned_alloc", "posix_memalign", "realloc(NULL)",
                                        "tide_malloc", "memalign"};

/* Allocates a random-sized object through a random entry point and fills it. */
static struct obj alloc_obj(tt_rng *r, int id, struct shared *sh)
{
    size_t n = tt_log_uniform(r, sh->max_size);
    unsigned char *p = NULL;
    size_t align = 16;
    int how = (int)tt_below(r, 100);
    how = how < 55 ? 0 : how < 65 ? 1 : how < 73 ? 2 : how < 79 ? 3 : how < 85 ? 4 : how < 95 ? 5 : 6;
    switch (how) {
    case 0: p = malloc(n); break;
    case 1: p = calloc(1, n); break;
    case 2: align = (size_t)16 << tt_below(r, 9); p = aligned_alloc(align, n); break;
    case 3: {
        void *q = NULL;
        align = (size_t)8 << tt_below(r, 10);
        if (posix_memalign(&q, align, n) == 0)
            p = q;
        break;
    }
    case 4: p = realloc(NULL, n); break;
    case 5: p = tide_malloc(n); break;
    case 6: align = (size_t)32 << tt_below(r, 8); p = memalign(align, n); break;
    }
    if (!p) {
        tt_fail("thread %d: %s(%zu) failed: %s", id, how_names[how], n, strerror(errno));
        return (struct obj){NULL, 0, id, 0};
    }
    if ((uintptr_t)p % (align < 16 ? 16 : align))
        tt_fail("thread %d: %s(%zu) with alignment %zu returned %p", id, how_names[how], n, align, (void *)p);
    if (malloc_usable_size(p) < n)
        tt_fail("thread %d: %s(%zu) = %p has usable size %zu", id, how_names[how], n, (void *)p, malloc_usable_size(p));
    if (how == 1) {
        size_t nz = tt_first_nonzero(p, n);
        if (nz != SIZE_MAX)
            tt_fail("thread %d: calloc(1, %zu) = %p has 0x%02x at offset %zu", id, n, (void *)p, p[nz], nz);
    }
    tt_fill(p, n, tt_seed(p, n));
    atomic_fetch_add_explicit(&sh->allocs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&sh->bytes, (long)n, memory_order_relaxed);
    bool is_aligned = how == 2 || how == 3 || how == 6;
    return (struct obj){p, n, id, is_aligned ? align : 0};
}

static bool verify(const struct obj *o, int id, const char *when)
{
    size_t bad = tt_check(o->p, o->n, tt_seed(o->p, o->n));
    if (bad != SIZE_MAX) {
        tt_fail("thread %d, %s: object %p of %zu B allocated by thread %d: byte %zu is 0x%02x, should be 0x%02x", id, when,
                (void *)o->p, o->n, o->owner, bad, o->p[bad], tt_expected_byte(bad, tt_seed(o->p, o->n)));
        return false;
    }
    return true;
}

static void free_obj(tt_rng *r, struct obj *o, int id, struct shared *sh)
{
    if (!o->p)
        return;
    verify(o, id, "before free");
    /* C23: free_sized for what malloc/calloc/realloc returned, free_aligned_sized for
     * what aligned_alloc returned (tide accepts it for every aligned entry point) */
    switch (tt_below(r, 10)) {
    case 7:
        if (o->align)
            free_aligned_sized(o->p, o->align, o->n);
        else
            free_sized(o->p, o->n);
        break;
    case 8: tide_free(o->p); break;
    case 9:
        if (o->align)
            tide_free_aligned_sized(o->p, o->align, o->n);
        else
            tide_free_sized(o->p, o->n);
        break;
    default: free(o->p); break;
    }
    atomic_fetch_add_explicit(&sh->frees, 1, memory_order_relaxed);
    if (o->owner != id)
        atomic_fetch_add_explicit(&sh->remote_frees, 1, memory_order_relaxed);
    o->p = NULL;
}

static void realloc_obj(tt_rng *r, struct obj *o, int id, struct shared *sh)
{
    if (!o->p)
        return;
    if (!verify(o, id, "before realloc"))
        return;
    size_t m = tt_log_uniform(r, sh->max_size);
    uint64_t old_seed = tt_seed(o->p, o->n);
    unsigned char *q = realloc(o->p, m);
    if (!q) {
        tt_fail("thread %d: realloc(%p, %zu -> %zu) failed: %s", id, (void *)o->p, o->n, m, strerror(errno));
        return;
    }
    size_t keep = o->n < m ? o->n : m;
    size_t bad = tt_check(q, keep, old_seed);
    if (bad != SIZE_MAX)
        tt_fail("thread %d: realloc(%p, %zu -> %zu) = %p: byte %zu of the kept %zu changed", id, (void *)o->p, o->n, m,
                (void *)q, bad, keep);
    if ((uintptr_t)q % 16 || malloc_usable_size(q) < m)
        tt_fail("thread %d: realloc(.., %zu) = %p, usable %zu", id, m, (void *)q, malloc_usable_size(q));
    tt_fill(q, m, tt_seed(q, m));
    o->p = q;
    o->n = m;
    o->align = 0; /* realloc's result is a plain block */
    atomic_fetch_add_explicit(&sh->reallocs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&sh->bytes, (long)m, memory_order_relaxed);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct shared *sh = w->sh;
    tt_rng r = {0x5eed0000u + (uint64_t)w->id};
    struct obj local[NLOCAL];
    memset(local, 0, sizeof local);
    unsigned group = NSLOTS / (unsigned)sh->nthreads;
    for (long op = 0; op < sh->ops_per_thread; op++) {
        if (op % PHASE_OPS == 0 && op != 0)
            pthread_barrier_wait(&sh->phase);
        if (tt_has_failed())
            continue; /* (to the end: the others wait at each phase) */
        int c = (int)tt_below(&r, 100);
        if (c < 35) { /* replace a private object */
            struct obj *o = &local[tt_below(&r, NLOCAL)];
            free_obj(&r, o, w->id, sh);
            *o = alloc_obj(&r, w->id, sh);
        } else if (c < 45) { /* resize a private object */
            realloc_obj(&r, &local[tt_below(&r, NLOCAL)], w->id, sh);
        } else { /* hand an object over: swap it into a shared slot, free what was there */
            struct obj mine = alloc_obj(&r, w->id, sh);
            unsigned g = (unsigned)(w->id + op / PHASE_OPS) % (unsigned)sh->nthreads;
            struct slot *s = &slots[g * group + tt_below(&r, group)];
            pthread_mutex_lock(&s->mu);
            struct obj theirs = s->o;
            s->o = mine;
            pthread_mutex_unlock(&s->mu);
            free_obj(&r, &theirs, w->id, sh);
        }
    }
    for (int i = 0; i < NLOCAL; i++)
        free_obj(&r, &local[i], w->id, sh);
    return NULL;
}

static void run_stress(int nthreads, size_t max_size, long total_ops)
{
    struct shared sh = {.max_size = max_size, .ops_per_thread = total_ops * scale() / nthreads, .nthreads = nthreads};
    cr_assert_eq(pthread_barrier_init(&sh.phase, NULL, (unsigned)nthreads), 0);
    for (int i = 0; i < NSLOTS; i++) {
        pthread_mutex_init(&slots[i].mu, NULL);
        slots[i].o = (struct obj){NULL, 0, -1, 0};
    }
    struct worker w[16];
    for (int i = 0; i < nthreads; i++) {
        w[i] = (struct worker){i, &sh, 0};
        cr_assert_eq(pthread_create(&w[i].tid, NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(w[i].tid, NULL);
    pthread_barrier_destroy(&sh.phase);
    cr_assert(!tt_has_failed(), "%s", tt_failure);
    /* what is left in the slots is freed here, by a thread that allocated none of it */
    tt_rng r = {1};
    for (int i = 0; i < NSLOTS; i++)
        free_obj(&r, &slots[i].o, -1, &sh);
    cr_assert(!tt_has_failed(), "%s", tt_failure);
    long remote = atomic_load(&sh.remote_frees), frees = atomic_load(&sh.frees);
    tt_report("stress: %d threads, sizes 1 B - %zu KiB: %ld allocations (%ld MiB), %ld reallocs, %ld frees, "
              "%ld of them by another thread",
              nthreads, max_size / KiB, atomic_load(&sh.allocs), atomic_load(&sh.bytes) >> 20,
              atomic_load(&sh.reallocs), frees, remote);
    cr_assert_eq(frees, atomic_load(&sh.allocs), "every object allocated must have been freed once");
    cr_assert_eq(tt_heap_check(), 0, "tide_check() failed after the stress (see stderr)");
    cr_assert_geq(remote * 4, frees, "too few objects were freed by another thread (%ld of %ld): the test is not doing "
                                     "what it claims", remote, frees);
}

Test(stress, two_threads, .timeout = 180) { run_stress(2, 4 * MiB, 8000); }
Test(stress, four_threads, .timeout = 180) { run_stress(4, 4 * MiB, 8000); }
Test(stress, eight_threads, .timeout = 180) { run_stress(8, 4 * MiB, 8000); }
/* small classes only: many more operations, nearly all of them in the thread caches and
 * the slabs, half of the frees remote */
Test(stress, eight_threads_small_objects, .timeout = 180) { run_stress(8, TT_SMALL_MAX, 1200000); }

/* ---- producer / consumer: every free is remote ------------------------------------- */

enum { RING = 4096 };

struct ring {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    struct obj q[RING];
    size_t head, tail; /* head - tail items */
    int producers_left;
};

struct pc_arg {
    struct ring *ring;
    struct shared *sh;
    int id;
    long items;
};

static void *producer(void *arg)
{
    struct pc_arg *a = arg;
    tt_rng r = {0xabcdef00u + (uint64_t)a->id};
    for (long i = 0; i < a->items && !tt_has_failed(); i++) {
        struct obj o = alloc_obj(&r, a->id, a->sh);
        pthread_mutex_lock(&a->ring->mu);
        while (a->ring->head - a->ring->tail == RING)
            pthread_cond_wait(&a->ring->not_full, &a->ring->mu);
        a->ring->q[a->ring->head++ % RING] = o;
        pthread_cond_signal(&a->ring->not_empty);
        pthread_mutex_unlock(&a->ring->mu);
    }
    pthread_mutex_lock(&a->ring->mu);
    a->ring->producers_left--;
    pthread_cond_broadcast(&a->ring->not_empty);
    pthread_mutex_unlock(&a->ring->mu);
    return NULL;
}

static void *consumer(void *arg)
{
    struct pc_arg *a = arg;
    tt_rng r = {0x12345600u + (uint64_t)a->id};
    for (;;) {
        pthread_mutex_lock(&a->ring->mu);
        while (a->ring->head == a->ring->tail && a->ring->producers_left > 0)
            pthread_cond_wait(&a->ring->not_empty, &a->ring->mu);
        if (a->ring->head == a->ring->tail) {
            pthread_mutex_unlock(&a->ring->mu);
            return NULL;
        }
        struct obj o = a->ring->q[a->ring->tail++ % RING];
        pthread_cond_signal(&a->ring->not_full);
        pthread_mutex_unlock(&a->ring->mu);
        free_obj(&r, &o, a->id, a->sh);
    }
}

Test(stress, producers_and_consumers, .timeout = 180)
{
    struct shared sh = {.max_size = 64 * KiB};
    struct ring *ring = calloc(1, sizeof *ring);
    pthread_mutex_init(&ring->mu, NULL);
    pthread_cond_init(&ring->not_empty, NULL);
    pthread_cond_init(&ring->not_full, NULL);
    ring->producers_left = 2;
    struct pc_arg args[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (struct pc_arg){ring, &sh, i, 100000 * scale()};
        pthread_create(&t[i], NULL, i < 2 ? producer : consumer, &args[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    cr_assert(!tt_has_failed(), "%s", tt_failure);
    tt_report("producers/consumers: %ld objects (%ld MiB) allocated by 2 threads, all freed by 2 others",
              atomic_load(&sh.allocs), atomic_load(&sh.bytes) >> 20);
    cr_assert_eq(atomic_load(&sh.frees), atomic_load(&sh.allocs));
    cr_assert_eq(atomic_load(&sh.remote_frees), atomic_load(&sh.frees));
    free(ring);
    cr_assert_eq(tt_heap_check(), 0, "tide_check() failed after the producers and consumers (see stderr)");
}

/* Giant blocks (1.5-3 GiB, a word every 64 MiB touched) allocated, grown and freed by one
 * thread while two others run the workload above: every free of a giant block purges it
 * at once and gives the range's tail back, and with purge:free the tail's pages are
 * purged outside the page-heap lock, while the range may grow past them. */
static atomic_int giants_stop;
static atomic_long giant_rounds;

static bool giant_check(const unsigned char *p, size_t n)
{
    for (size_t off = 0; off < n; off += 64 * MiB) {
        size_t v;
        memcpy(&v, p + off, sizeof v);
        if (v != off) {
            tt_fail("giant block %p (%zu MiB): the word at %zu MiB changed", (void *)p, n >> 20, off >> 20);
            return false;
        }
    }
    return true;
}

static void *giant_main(void *arg)
{
    (void)arg;
    tt_rng r = {0x61a47};
    while ((!atomic_load(&giants_stop) || atomic_load(&giant_rounds) < 4) && !tt_has_failed()) {
        size_t n = (size_t)(1536 + tt_below(&r, 1536)) * MiB;
        unsigned char *p = malloc(n);
        if (!p) {
            tt_fail("giant malloc(%zu MiB) failed: %s", n >> 20, strerror(errno));
            break;
        }
        for (size_t off = 0; off < n; off += 64 * MiB)
            memcpy(p + off, &off, sizeof off);
        if (tt_below(&r, 2)) {
            size_t m = n + 512 * MiB;
            unsigned char *q = realloc(p, m);
            if (!q) {
                tt_fail("giant realloc(%zu -> %zu MiB) failed: %s", n >> 20, m >> 20, strerror(errno));
                free(p);
                break;
            }
            p = q;
            if (!giant_check(p, n))
                break;
            for (size_t off = 0; off < m; off += 64 * MiB)
                memcpy(p + off, &off, sizeof off);
            n = m;
        }
        bool ok = giant_check(p, n);
        free(p);
        if (!ok)
            break;
        if (atomic_fetch_add(&giant_rounds, 1) % 4 == 3 && tt_heap_check() != 0)
            tt_fail("tide_check() failed beside giant blocks (see stderr)");
    }
    return NULL;
}

static void stress_beside_giants(const char *policy, const char *thp)
{
#ifdef TIDE_TEST_GLIBC
    (void)policy, (void)thp;
#else
    cr_assert_eq(tide_conf_set("purge", policy), 0);
    cr_assert_eq(tide_conf_set("decay_ms", "0"), 0);
    cr_assert_eq(tide_conf_set("thp", thp), 0);
    cr_assert_eq(tide_conf_set("remap_max", "64"), 0); /* giant reallocs move pages rather than copy them */
#endif
    pthread_t g;
    cr_assert_eq(pthread_create(&g, NULL, giant_main, NULL), 0);
    run_stress(2, 4 * MiB, 8000);
    atomic_store(&giants_stop, 1);
    pthread_join(g, NULL);
    cr_assert(!tt_has_failed(), "%s", tt_failure);
    tt_report("stress: %ld giant blocks beside the workload (purge:%s, thp:%s)", atomic_load(&giant_rounds), policy,
              thp);
    malloc_trim(0);
    cr_assert_eq(tt_heap_check(), 0, "tide_check() failed at the end (see stderr)");
#ifndef TIDE_TEST_GLIBC
    /* (How much address space comes back depends on where the workload's last slabs sit:
     * only the free tail above them can go.) */
    tide_stats_t s;
    tide_stats_get(&s, sizeof s);
    tt_report("stress: after malloc_trim: %" PRIu64 " MiB mapped, %" PRIu64 " VMAs", s.mapped >> 20, s.vmas);
    cr_assert_eq(s.vmas, 1, "tide's range is %" PRIu64 " VMAs", s.vmas);
#endif
}

Test(stress, beside_giant_blocks_purge_free, .timeout = 300) { stress_beside_giants("free", "off"); }
Test(stress, beside_giant_blocks_dontneed_thp, .timeout = 300) { stress_beside_giants("dontneed", "on"); }
