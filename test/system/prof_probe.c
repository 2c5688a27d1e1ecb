/* SPDX-License-Identifier: MIT */
/* prof_probe.c - workloads for the heap profiler's tests (test/system/prof.c), run with
 * TIDE_CONF=prof:on,...; the profiles they dump are read by google-pprof and jeprof.
 *
 * Built twice: as it is (Debian's gcc omits frame pointers, so tide takes stacks with
 * backtrace()) and with -fno-omit-frame-pointer (tide follows frame pointers).  The
 * functions that allocate are noinline and named, so that the readers can name them.
 *
 *   prof_probe shares PATH     two threads, each 150 MiB live from alloc_big (small
 *                              blocks) and 50 MiB from alloc_small (big ones); dump to PATH
 *   prof_probe entries PATH    4 MiB live through each entry point (C++'s operator new
 *                              too), from call_<entry>
 *   prof_probe fork DIR        children forked beside a thread that allocates; each child
 *                              allocates from a thread of its own and exits (prof_final)
 *   prof_probe empty PATH      a dump before anything is allocated
 *   prof_probe freed PATH      64 MiB allocated and freed by alloc_and_free, then a dump
 *   prof_probe grow MIB        MIB MiB allocated by grow_heap in 64 KiB blocks (prof_interval)
 *   prof_probe stress PATH     4 threads malloc, realloc and free at random while another
 *                              dumps; then everything is freed
 *   prof_probe first           64 blocks of 1 KiB, the program's first allocations
 *   prof_probe siblings PATH   4 MiB from sibling_a and 2 MiB from sibling_b, in turns, each
 *                              through the same make_block, from the same depth of the stack
 *   prof_probe inslab [double|interior|cleared|released]  samples of 4-14 KiB, held by two threads,
 *                              freed by others (see run_inslab)
 *   prof_probe crossfree DIR   12 threads each hold 2 MiB from cross_alloc (DIR/held.heap);
 *                              12 other threads free them (DIR/freed.heap)
 * Each prints "samples S live L walks W backtraces B dumps D reused R" (tide_stats_get) last. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getcpu, sched_setaffinity (test/system/static builds it without config.h) */
#endif
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tide.h"

#define MiB ((size_t)1 << 20)

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Log-uniform in [lo, hi]. */
static size_t log_uniform(uint64_t *s, size_t lo, size_t hi)
{
    unsigned a = 63 - (unsigned)__builtin_clzl(lo), b = 63 - (unsigned)__builtin_clzl(hi);
    unsigned e = a + (unsigned)(rng_next(s) % (b - a + 1));
    size_t n = ((size_t)1 << e) + rng_next(s) % ((size_t)1 << e);
    return n < lo ? lo : n > hi ? hi : n;
}

static void die(const char *what)
{
    fprintf(stderr, "prof_probe: %s: %s\n", what, strerror(errno));
    exit(2);
}

static void *xmalloc_checked(void *p)
{
    if (!p)
        die("allocation");
    return p;
}

typedef struct blocks_s {
    void **v;
    size_t n, cap;
} blocks_t;

/* (noinline: its own allocations are its own in the profile) */
__attribute__((noinline)) static void keep(blocks_t *b, void *p)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 4096;
        b->v = realloc(b->v, b->cap * sizeof *b->v);
        if (!b->v)
            die("realloc");
    }
    b->v[b->n++] = p;
}

static void release(blocks_t *b)
{
    for (size_t i = 0; i < b->n; i++)
        free(b->v[i]);
    free(b->v);
    memset(b, 0, sizeof *b);
}

static void print_stats(void)
{
    tide_stats_t s;
    tide_stats_get(&s, sizeof s);
    printf("samples %llu live %llu walks %llu backtraces %llu dumps %llu reused %llu\n",
           (unsigned long long)s.prof_samples, (unsigned long long)s.prof_live_samples,
           (unsigned long long)s.prof_frame_walks, (unsigned long long)s.prof_backtraces,
           (unsigned long long)s.prof_dumps, (unsigned long long)s.prof_stacks_reused);
    fflush(stdout);
}

static void dump(const char *path)
{
    if (tide_prof_dump(path) != 0)
        die("tide_prof_dump");
}

/* ---- shares ------------------------------------------------------------------------- */

/* TOTAL bytes in small blocks (16 B - 16 KiB, log-uniform: most on the fast path). */
__attribute__((noinline)) void alloc_big(blocks_t *b, size_t total, uint64_t seed)
{
    for (size_t s = 0; s < total;) {
        size_t n = log_uniform(&seed, 16, 16384);
        keep(b, xmalloc_checked(malloc(n)));
        s += n;
    }
}

/* TOTAL bytes in big blocks (8 KiB - 2 MiB), some by calloc. */
__attribute__((noinline)) void alloc_small(blocks_t *b, size_t total, uint64_t seed)
{
    for (size_t s = 0; s < total;) {
        size_t n = log_uniform(&seed, 8192, 2 * MiB);
        keep(b, xmalloc_checked(n & 1 ? calloc(1, n) : malloc(n)));
        s += n;
    }
}

static blocks_t shares_blocks[2];

static void *shares_thread(void *arg)
{
    int t = (int)(intptr_t)arg;
    alloc_big(&shares_blocks[t], 150 * MiB, 11 + (uint64_t)t);
    alloc_small(&shares_blocks[t], 50 * MiB, 22 + (uint64_t)t);
    return NULL;
}

static int run_shares(const char *path)
{
    pthread_t th[2];
    for (int t = 0; t < 2; t++)
        if (pthread_create(&th[t], NULL, shares_thread, (void *)(intptr_t)t) != 0)
            die("pthread_create");
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], NULL);
    dump(path);
    print_stats();
    return 0;
}

/* ---- entries ------------------------------------------------------------------------ */

#define ENTRY_BYTES (4 * MiB)
static blocks_t entry_blocks;

/* Block sizes of every kind: small, cached large, large. */
static size_t entry_size(unsigned i) { return (size_t[]){ 100, 3000, 20000, 70000, 300000 }[i % 5]; }

#define ENTRY_FUNC(name, expr)                                                                                 \
    __attribute__((noinline)) void call_##name(void)                                                          \
    {                                                                                                         \
        size_t s = 0;                                                                                         \
        for (unsigned i = 0; s < ENTRY_BYTES; i++) {                                                          \
            size_t n = entry_size(i);                                                                         \
            if (s + n > ENTRY_BYTES)                                                                          \
                n = ENTRY_BYTES - s;                                                                          \
            void *p = (expr);                                                                                 \
            keep(&entry_blocks, xmalloc_checked(p));                                                          \
            s += n;                                                                                           \
        }                                                                                                     \
    }

ENTRY_FUNC(malloc, malloc(n))
ENTRY_FUNC(calloc, calloc(n, 1))
ENTRY_FUNC(realloc, realloc(NULL, n))
ENTRY_FUNC(reallocarray, reallocarray(NULL, n, 1))
ENTRY_FUNC(memalign, memalign(64, n))
ENTRY_FUNC(aligned_alloc, aligned_alloc(256, n))
ENTRY_FUNC(valloc, valloc(n))

/* C++'s operator new in its eight forms, by their Itanium names (tide's: the probe links
 * libtide); the nothrow_t and align_val_t arguments are a reference and a size_t. */
void *_Znwm(size_t);
void *_Znam(size_t);
void *_ZnwmRKSt9nothrow_t(size_t, const void *);
void *_ZnamRKSt9nothrow_t(size_t, const void *);
void *_ZnwmSt11align_val_t(size_t, size_t);
void *_ZnamSt11align_val_t(size_t, size_t);
void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t, size_t, const void *);
void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t, size_t, const void *);
static const char nothrow_tag; /* (std::nothrow: an empty object, never read) */
ENTRY_FUNC(new, _Znwm(n))
ENTRY_FUNC(new_array, _Znam(n))
ENTRY_FUNC(new_nothrow, _ZnwmRKSt9nothrow_t(n, &nothrow_tag))
ENTRY_FUNC(new_array_nothrow, _ZnamRKSt9nothrow_t(n, &nothrow_tag))
ENTRY_FUNC(new_aligned, _ZnwmSt11align_val_t(n, 64))
ENTRY_FUNC(new_array_aligned, _ZnamSt11align_val_t(n, 4096))
ENTRY_FUNC(new_aligned_nothrow, _ZnwmSt11align_val_tRKSt9nothrow_t(n, 16, &nothrow_tag))
ENTRY_FUNC(new_array_aligned_nothrow, _ZnamSt11align_val_tRKSt9nothrow_t(n, 256, &nothrow_tag))

__attribute__((noinline)) void call_posix_memalign(void)
{
    size_t s = 0;
    for (unsigned i = 0; s < ENTRY_BYTES; i++) {
        size_t n = entry_size(i);
        if (s + n > ENTRY_BYTES)
            n = ENTRY_BYTES - s;
        void *p = NULL;
        if (posix_memalign(&p, 128, n) != 0)
            die("posix_memalign");
        keep(&entry_blocks, p);
        s += n;
    }
}

/* pvalloc rounds up to pages: 4 MiB in whole pages. */
__attribute__((noinline)) void call_pvalloc(void)
{
    for (size_t s = 0; s < ENTRY_BYTES; s += 16384)
        keep(&entry_blocks, xmalloc_checked(pvalloc(16384)));
}

/* Blocks that grow by realloc from 16 bytes to 1 MiB: copies while small, then in place
 * or moved as large blocks; four of them live at the end. */
__attribute__((noinline)) void call_realloc_grow(void)
{
    for (int k = 0; k < 4; k++) {
        void *p = NULL;
        for (size_t n = 16; n <= MiB; n += n / 2 + 16)
            p = xmalloc_checked(realloc(p, n));
        keep(&entry_blocks, xmalloc_checked(realloc(p, MiB)));
    }
}

static int run_entries(const char *path)
{
    call_malloc();
    call_calloc();
    call_realloc();
    call_reallocarray();
    call_memalign();
    call_aligned_alloc();
    call_posix_memalign();
    call_valloc();
    call_pvalloc();
    call_realloc_grow();
    call_new();
    call_new_array();
    call_new_nothrow();
    call_new_array_nothrow();
    call_new_aligned();
    call_new_array_aligned();
    call_new_aligned_nothrow();
    call_new_array_aligned_nothrow();
    dump(path);
    print_stats();
    return 0;
}

/* ---- fork --------------------------------------------------------------------------- */

static atomic_int fork_stop;

__attribute__((noinline)) void alloc_in_parent_thread(uint64_t seed)
{
    void *v[64] = { 0 };
    while (!atomic_load(&fork_stop)) {
        unsigned i = (unsigned)(rng_next(&seed) % 64);
        free(v[i]);
        v[i] = xmalloc_checked(malloc(log_uniform(&seed, 16, 256 * 1024)));
    }
    for (int i = 0; i < 64; i++)
        free(v[i]);
}

static void *fork_spinner(void *arg)
{
    (void)arg;
    alloc_in_parent_thread(5);
    return NULL;
}

static blocks_t fork_parent_blocks, fork_child_blocks;

__attribute__((noinline)) void alloc_before_fork(void)
{
    uint64_t seed = 3;
    for (size_t s = 0; s < 32 * MiB;) {
        size_t n = log_uniform(&seed, 16, 65536);
        keep(&fork_parent_blocks, xmalloc_checked(malloc(n)));
        s += n;
    }
}

__attribute__((noinline)) void alloc_in_child_thread(void)
{
    uint64_t seed = 4;
    for (size_t s = 0; s < 32 * MiB;) {
        size_t n = log_uniform(&seed, 16, 65536);
        keep(&fork_child_blocks, xmalloc_checked(malloc(n)));
        s += n;
    }
}

static void *child_thread(void *arg)
{
    (void)arg;
    alloc_in_child_thread();
    return NULL;
}

/* Twenty children, forked while a thread allocates (so fork takes tide's locks); each
 * allocates 32 MiB from a thread of its own and exits: prof_final dumps its heap. */
static int run_fork(void)
{
    printf("parent %d\n", (int)getpid());
    alloc_before_fork();
    pthread_t spinner;
    if (pthread_create(&spinner, NULL, fork_spinner, NULL) != 0)
        die("pthread_create");
    for (int k = 0; k < 20; k++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0) {
            pthread_t th;
            if (pthread_create(&th, NULL, child_thread, NULL) != 0)
                _exit(3);
            pthread_join(th, NULL);
            printf("child %d\n", (int)getpid());
            exit(0); /* prof_final */
        }
        int st;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "prof_probe: child %d failed: status %#x\n", (int)pid, st);
            return 1;
        }
    }
    atomic_store(&fork_stop, 1);
    pthread_join(spinner, NULL);
    release(&fork_parent_blocks);
    print_stats();
    return 0;
}

/* ---- empty, freed, grow ------------------------------------------------------------- */

__attribute__((noinline)) void alloc_and_free(void)
{
    blocks_t b = { 0 };
    uint64_t seed = 9;
    for (size_t s = 0; s < 64 * MiB;) {
        size_t n = log_uniform(&seed, 16, 1 << 20);
        keep(&b, xmalloc_checked(malloc(n)));
        s += n;
    }
    release(&b);
}

__attribute__((noinline)) void grow_heap(size_t mib)
{
    blocks_t b = { 0 };
    for (size_t s = 0; s < mib * MiB; s += 65536)
        keep(&b, xmalloc_checked(malloc(65536)));
    /* live until exit */
}

/* ---- stress ------------------------------------------------------------------------- */

static atomic_int stress_stop;

__attribute__((noinline)) void stress_work(uint64_t seed)
{
    enum { SLOTS = 512 };
    void *v[SLOTS] = { 0 };
    /* A tenth in a short run (TIDE_TEST_SHORT: the configuration matrix, test/support). */
    const char *short_run = getenv("TIDE_TEST_SHORT");
    const int rounds = short_run && *short_run ? 20000 : 200000;
    for (int it = 0; it < rounds; it++) {
        unsigned i = (unsigned)(rng_next(&seed) % SLOTS);
        size_t n = log_uniform(&seed, 1, it % 64 == 0 ? 4 * MiB : 65536);
        switch (rng_next(&seed) % 4) {
        case 0:
            free(v[i]);
            v[i] = NULL;
            break;
        case 1:
            v[i] = xmalloc_checked(realloc(v[i], n));
            break;
        case 2:
            free(v[i]);
            v[i] = xmalloc_checked(n & 1 ? calloc(n, 1) : malloc(n));
            break;
        default:
            free(v[i]);
            if (posix_memalign(&v[i], (size_t)16 << (n % 9), n) != 0)
                die("posix_memalign");
        }
        if (v[i] && malloc_usable_size(v[i]) < n)
            die("usable size below the request");
    }
    for (int i = 0; i < SLOTS; i++)
        free(v[i]);
}

static void *stress_thread(void *arg)
{
    stress_work((uint64_t)(intptr_t)arg);
    return NULL;
}

static void *stress_dumper(void *arg)
{
    const char *path = arg;
    while (!atomic_load(&stress_stop))
        dump(path);
    return NULL;
}

static int run_stress(const char *path)
{
    pthread_t th[4], d;
    if (pthread_create(&d, NULL, stress_dumper, (void *)path) != 0)
        die("pthread_create");
    for (int t = 0; t < 4; t++)
        if (pthread_create(&th[t], NULL, stress_thread, (void *)(intptr_t)(t + 1)) != 0)
            die("pthread_create");
    for (int t = 0; t < 4; t++)
        pthread_join(th[t], NULL);
    atomic_store(&stress_stop, 1);
    pthread_join(d, NULL);
    if (tide_check() != 0)
        return 1;
    dump(path);
    print_stats();
    return 0;
}

/* Two callers of one function, called in turns from one place: every malloc returns to
 * the same address in make_block with the same stack pointer, and only the next return
 * address tells the stacks apart (the case a stack recognised again must not confuse). */
__attribute__((noinline)) static void *make_block(size_t n)
{
    void *p = xmalloc_checked(malloc(n));
    __asm__ volatile("" ::: "memory"); /* (no tail call) */
    return p;
}

static volatile int siblings_seen[2]; /* (different bodies: not folded into one function) */

__attribute__((noinline, noipa)) static void *sibling_a(size_t n)
{
    void *p = make_block(n);
    siblings_seen[0]++;
    return p;
}

__attribute__((noinline, noipa)) static void *sibling_b(size_t n)
{
    void *p = make_block(n);
    siblings_seen[1]++;
    return p;
}

static int run_siblings(const char *path)
{
    enum { N = 1024 };
    static void *a[N], *b[N];
    for (int i = 0; i < N; i++) {
        a[i] = sibling_a(4096);
        b[i] = sibling_b(2048);
    }
    dump(path);
    print_stats();
    for (int i = 0; i < N; i++) {
        free(a[i]);
        free(b[i]);
    }
    return 0;
}

/* Sampled blocks behave as any other (every allocation is sampled at prof_sample:1): the
 * usable size of their request, zeroed by calloc though cut from blocks the program dirtied,
 * kept by realloc, freed by tide_free_sized, and their records gone when they are.  With
 * "double", a sampled small block freed twice, which must abort. */
static int run_blocks(const char *how)
{
    if (strcmp(how, "double") == 0) {
        char *p = xmalloc_checked(malloc(64));
        free(p);
        free(p);
        fprintf(stderr, "<not caught>\n");
        return 0;
    }
    /* What was live before (the runtime's own blocks, under a sanitizer) stays live. */
    tide_stats_t before;
    tide_stats_get(&before, sizeof before);
    static const size_t sizes[] = { 1, 64, 100, 4000, 14336, 16384, 20000, 65536, 70000 };
    enum { NS = sizeof sizes / sizeof sizes[0], N = 64 };
    static unsigned char *dirty[N];
    for (int round = 0; round < 4; round++) {
        /* Blocks of every cached class, dirtied and freed, for calloc's blocks to come from. */
        for (int i = 0; i < N; i++)
            dirty[i] = memset(xmalloc_checked(malloc(sizes[i % NS])), 0xab, sizes[i % NS]);
        for (int i = 0; i < N; i++)
            free(dirty[i]);
        for (int i = 0; i < NS; i++) {
            size_t n = sizes[i];
            unsigned char *z = xmalloc_checked(calloc(1, n));
            for (size_t k = 0; k < n; k++)
                if (z[k]) {
                    fprintf(stderr, "calloc(1, %zu): byte %zu is %#x\n", n, k, z[k]);
                    return 1;
                }
            unsigned char *p = xmalloc_checked(malloc(n));
            size_t usable = malloc_usable_size(p);
            size_t want = n <= 16 ? 16 : n;
            if (usable < want || (n <= 14336 && usable >= 2 * want + 16)) {
                fprintf(stderr, "malloc(%zu): usable size %zu\n", n, usable);
                return 1;
            }
            memset(p, 0x5a, usable);
            unsigned char *q = xmalloc_checked(realloc(p, n + 3000));
            for (size_t k = 0; k < usable && k < n + 3000; k++)
                if (q[k] != 0x5a) {
                    fprintf(stderr, "realloc(%zu -> %zu): byte %zu is %#x\n", n, n + 3000, k, q[k]);
                    return 1;
                }
            tide_free_sized(q, n + 3000);
            tide_free_sized(z, n);
        }
    }
    tide_stats_t after;
    tide_stats_get(&after, sizeof after);
    if (after.prof_live_samples > before.prof_live_samples) {
        fprintf(stderr, "%llu records live after every block was freed, %llu before\n",
                (unsigned long long)after.prof_live_samples, (unsigned long long)before.prof_live_samples);
        return 1;
    }
    print_stats();
    return 0;
}

/* ---- samples freed by another thread ------------------------------------------------------ */

/* The blocks of small samples, promoted to the smallest large class, freed by a thread
 * that did not sample them, round after round (every allocation is sampled at
 * prof_sample:1).  The next samples must get those blocks again, not new ones from the
 * page heap: prints "large N" with how many large blocks the page heap handed out. */
#define HANDOFF_ROUNDS 200
#define HANDOFF_N 4
static void *free_all(void *arg)
{
    void **v = arg;
    for (int i = 0; i < HANDOFF_N; i++)
        free(v[i]);
    return NULL;
}

static int run_handoff(void)
{
    static void *v[HANDOFF_N];
    tide_stats_t before, after;
    tide_stats_get(&before, sizeof before);
    for (int round = 0; round < HANDOFF_ROUNDS; round++) {
        for (int i = 0; i < HANDOFF_N; i++)
            v[i] = xmalloc_checked(malloc(64));
        pthread_t t;
        if (pthread_create(&t, NULL, free_all, v) != 0)
            die("pthread_create");
        pthread_join(t, NULL);
    }
    tide_stats_get(&after, sizeof after);
    printf("large %llu samples %llu\n", (unsigned long long)(after.nmalloc_large - before.nmalloc_large),
           (unsigned long long)(after.prof_samples - before.prof_samples));
    return 0;
}

/* ---- samples of a page or more, in their slab ------------------------------------------ */

/* Blocks of the small classes of a page or more (4-14 KiB), every one sampled at
 * prof_sample:1, held by two threads, then freed half by the thread that did not allocate
 * them: they stay regions of their slabs (the page heap hands out no large block for
 * them), tide_check finds the heap sound while they are live, and every record goes with
 * its block.  Prints "large N samples S live L after A check C": large blocks handed out,
 * samples taken, records live while held and after, tide_check's result.  With "double",
 * one of them freed twice; with "interior", a pointer 16 bytes into one freed: both must
 * abort. */
#define INSLAB_N 64
static const size_t inslab_sizes[] = { 4096, 5000, 8192, 14336 };
static void *inslab_held[2][INSLAB_N];

static void *inslab_alloc(void *arg)
{
    void **v = arg;
    for (int i = 0; i < INSLAB_N; i++) {
        size_t n = inslab_sizes[i % 4];
        v[i] = memset(xmalloc_checked(i % 8 == 1 ? calloc(1, n) : malloc(n)), i, n);
    }
    return NULL;
}

static void *inslab_free_other(void *arg)
{
    void **v = arg;
    for (int i = 0; i < INSLAB_N; i += 2)
        free(v[i]);
    return NULL;
}

/* Keep the calling thread on the CPU it runs on.  A thread cache refills from the arena of
 * its CPU and flushes to the arena of each block's slab (tcache.c): a probe that moved
 * between its frees and its mallocs would refill from other lists than the one that holds
 * a block freed twice, and meet that copy only at the next collection (as
 * test/api/hardening's cases pin themselves). */
static void pin_cpu(void)
{
    int cpu = sched_getcpu();
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
}

static pthread_barrier_t inslab_barrier;

static void *inslab_free_again(void *p)
{
    free(p); /* the double free: into this thread's cache */
    pthread_barrier_wait(&inslab_barrier);
    pthread_barrier_wait(&inslab_barrier); /* the main thread has emptied the block's slab */
    return malloc(8192);
}

static int run_inslab(const char *how)
{
    if (strcmp(how, "double") == 0 || strcmp(how, "interior") == 0) {
        char *p = xmalloc_checked(malloc(8192));
        if (how[0] == 'd')
            free(p);
        free(how[0] == 'd' ? p : p + 16);
        fprintf(stderr, "<not caught>\n");
        return 0;
    }
    if (strcmp(how, "cleared") == 0) {
        /* A sample whose key a use after free cleared, pushed out of the cache by the frees
         * of 3,000 others, freed again: it is handed out once, and then found on a list
         * while it is a live sample again (as test/api/hardening's unsampled case). */
        enum { N = 3000 };
        static void *others[N];
        pin_cpu();
        void **p = xmalloc_checked(malloc(8192));
        for (int i = 0; i < N; i++)
            others[i] = xmalloc_checked(malloc(8192));
        free(p);
        ((void *volatile *)p)[1] = NULL;
        for (int i = 0; i < N; i++)
            free(others[i]);
        free(p);
        for (int i = 0; i < 2 * N; i++)
            xmalloc_checked(malloc(8192));
        malloc_trim(0); /* a collection: a copy left on a list is found there */
        fprintf(stderr, "<not caught>\n");
        return 0;
    }
    if (strcmp(how, "released") == 0) {
        /* A sample back in its slab, freed again by another thread (into that thread's
         * cache: the key over the slab mark), then the rest of its slab freed and pushed
         * out of this thread's cache while the transfer cache and the bin's kept slabs are
         * full and nothing is purged: the slab goes back to the page heap, the key still
         * in the block, which the other thread's cache would hand out (as
         * test/api/hardening's unsampled case).  In allocation order: A (4 MiB: fill the
         * transfer cache and the kept slabs), B (2 MiB: push the block out), the block with
         * W on either side (its slab, of 2 regions, lies within), C (2 MiB). */
        enum { A = 512, B = 256, W = 4, C = 256, AT = A + B + W, N = AT + W + 1 + C };
        static void *v[N];
        pin_cpu();
        tide_conf_set("decay_ms", "-1");
        for (int i = 0; i < N; i++)
            v[i] = xmalloc_checked(malloc(8192));
        void *p = v[AT];
        v[AT] = NULL;
        for (int i = 0; i < A; i++)
            free(v[i]);
        free(p);
        for (int i = A; i < A + B; i++)
            free(v[i]);
        pthread_t t;
        pthread_barrier_init(&inslab_barrier, NULL, 2);
        if (pthread_create(&t, NULL, inslab_free_again, p) != 0)
            die("pthread_create");
        pthread_barrier_wait(&inslab_barrier);
        for (int i = A + B; i < N; i++)
            free(v[i]);
        pthread_barrier_wait(&inslab_barrier);
        void *got = NULL;
        pthread_join(t, &got);
        for (int i = 0; i < 2 * N; i++)
            if (xmalloc_checked(malloc(8192)) == got) {
                fprintf(stderr, "<handed out twice: %p>\n", got);
                return 5;
            }
        malloc_trim(0);
        fprintf(stderr, "<not caught>\n");
        return 0;
    }
    /* A thread first: glibc keeps a joined thread's stack and its DTV (a malloc, sampled)
     * for the next, which then allocates nothing of its own.  Then a free that leaves pages
     * dirty, now that the process has threads: tide's purger thread starts (its DTV too). */
    pthread_t t;
    if (pthread_create(&t, NULL, inslab_free_other, (void *[INSLAB_N]){ 0 }) != 0)
        die("pthread_create");
    pthread_join(t, NULL);
    free(memset(xmalloc_checked(malloc(4 * MiB)), 1, 4 * MiB));
    tide_stats_t before, held, after;
    tide_stats_get(&before, sizeof before);
    inslab_alloc(inslab_held[0]);
    if (pthread_create(&t, NULL, inslab_alloc, inslab_held[1]) != 0)
        die("pthread_create");
    pthread_join(t, NULL);
    tide_stats_get(&held, sizeof held);
    int check = tide_check();
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < INSLAB_N; i++)
            for (size_t j = 0; j < inslab_sizes[i % 4]; j += 512)
                if (((unsigned char *)inslab_held[k][i])[j] != (unsigned char)i) {
                    fprintf(stderr, "block %d of thread %d: byte %zu changed\n", i, k, j);
                    return 1;
                }
    /* The even ones by a thread that did not allocate them, the rest here; one realloc'd. */
    if (pthread_create(&t, NULL, inslab_free_other, inslab_held[0]) != 0)
        die("pthread_create");
    pthread_join(t, NULL);
    inslab_free_other(inslab_held[1]);
    inslab_held[1][1] = xmalloc_checked(realloc(inslab_held[1][1], 3000));
    for (int k = 0; k < 2; k++)
        for (int i = 1; i < INSLAB_N; i += 2)
            free(inslab_held[k][i]);
    tide_stats_get(&after, sizeof after);
    printf("large %llu samples %llu live %llu after %llu check %d\n",
           (unsigned long long)(held.nmalloc_large - before.nmalloc_large),
           (unsigned long long)(held.prof_samples - before.prof_samples),
           (unsigned long long)(held.prof_live_samples - before.prof_live_samples),
           (unsigned long long)(after.prof_live_samples - before.prof_live_samples), check);
    return 0;
}

/* ---- samples freed by other threads ------------------------------------------------- */

/* More threads than the profiler has shards of counts (8) sample, and as many new ones
 * free what they sampled: the counts a freeing thread takes off are not where the
 * sampling thread put them, and their sum must still be nothing live. */
#define CROSS_THREADS 12
#define CROSS_BYTES (2 * MiB)
static blocks_t cross_held[CROSS_THREADS];

__attribute__((noinline)) void cross_alloc(blocks_t *b, uint64_t seed)
{
    for (size_t s = 0; s < CROSS_BYTES;) {
        size_t n = log_uniform(&seed, 16, 16384);
        keep(b, xmalloc_checked(malloc(n)));
        s += n;
    }
}

static void *cross_sampler(void *arg)
{
    intptr_t t = (intptr_t)arg;
    cross_alloc(&cross_held[t], (uint64_t)t + 77);
    return NULL;
}

static void *cross_freer(void *arg)
{
    release(&cross_held[((intptr_t)arg + 1) % CROSS_THREADS]);
    return NULL;
}

static void cross_run(void *(*fn)(void *))
{
    pthread_t th[CROSS_THREADS];
    for (intptr_t t = 0; t < CROSS_THREADS; t++)
        if (pthread_create(&th[t], NULL, fn, (void *)t) != 0)
            die("pthread_create");
    for (int t = 0; t < CROSS_THREADS; t++)
        pthread_join(th[t], NULL);
}

static int run_crossfree(const char *dir)
{
    char path[512];
    cross_run(cross_sampler);
    snprintf(path, sizeof path, "%s/held.heap", dir);
    dump(path);
    cross_run(cross_freer);
    snprintf(path, sizeof path, "%s/freed.heap", dir);
    dump(path);
    print_stats();
    return 0;
}

/* ---- one size ----------------------------------------------------------------------- */

/* 32 MiB live in blocks of SIZE bytes (ARG: "SIZE:PATH"), malloc's, counted by the fast
 * path's countdown of their class, dumped to PATH: the profile's totals must estimate
 * their bytes and count. */
#define CLASS_BYTES (32 * MiB)
/* The blocks are kept in an array that is not malloc's, so that nothing else is live. */
__attribute__((noinline)) void alloc_one_size(size_t size)
{
    size_t n = CLASS_BYTES / size;
    void **kept = mmap(NULL, n * sizeof *kept, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (kept == MAP_FAILED)
        die("mmap");
    for (size_t i = 0; i < n; i++)
        kept[i] = xmalloc_checked(malloc(size));
}

static int run_class(const char *arg)
{
    char *end;
    size_t size = strtoul(arg, &end, 10);
    if (*end != ':' || !size)
        die("class: want SIZE:PATH");
    alloc_one_size(size);
    dump(end + 1);
    print_stats();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: prof_probe shares|entries|fork|empty|freed|grow|stress|siblings|first|blocks|class|"
                        "handoff|inslab|crossfree [ARG]\n");
        return 2;
    }
    const char *mode = argv[1], *arg = argc > 2 ? argv[2] : "";
    if (strcmp(mode, "shares") == 0)
        return run_shares(arg);
    if (strcmp(mode, "entries") == 0)
        return run_entries(arg);
    if (strcmp(mode, "fork") == 0)
        return run_fork();
    if (strcmp(mode, "empty") == 0) {
        dump(arg);
        print_stats();
        return 0;
    }
    if (strcmp(mode, "freed") == 0) {
        alloc_and_free();
        dump(arg);
        print_stats();
        return 0;
    }
    if (strcmp(mode, "grow") == 0) {
        grow_heap((size_t)atol(arg));
        print_stats();
        return 0;
    }
    if (strcmp(mode, "stress") == 0)
        return run_stress(arg);
    if (strcmp(mode, "siblings") == 0)
        return run_siblings(arg);
    if (strcmp(mode, "blocks") == 0)
        return run_blocks(arg);
    if (strcmp(mode, "class") == 0)
        return run_class(arg);
    if (strcmp(mode, "handoff") == 0)
        return run_handoff();
    if (strcmp(mode, "inslab") == 0)
        return run_inslab(arg);
    if (strcmp(mode, "crossfree") == 0)
        return run_crossfree(arg);
    if (strcmp(mode, "first") == 0) {
        void *first[64];
        for (int i = 0; i < 64; i++)
            first[i] = xmalloc_checked(malloc(1024));
        print_stats();
        for (int i = 0; i < 64; i++)
            free(first[i]);
        return 0;
    }
    fprintf(stderr, "prof_probe: unknown mode %s\n", mode);
    return 2;
}
