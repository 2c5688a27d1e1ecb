/* SPDX-License-Identifier: MIT */
/*
 * misuse.c - freeing what tide does not own, and double frees.
 *
 * tide's promise: free() or realloc() of a pointer it does not own (a stack address,
 * a foreign mmap, a small number, an address no mapping can hold, an interior pointer)
 * and a double free of a small object print exactly one line on stderr,
 *     tide: free(): invalid pointer 0x...
 *     tide: free(): double free 0x...
 *     tide: realloc(): invalid pointer 0x...
 * (0x + lowercase hex), and abort (SIGABRT) at that call.  A double free with other
 * frees between is found where the block is taken next instead (free() loads nothing from
 * the block): no later than the malloc that would hand it out a second time, so those
 * tests go on allocating after the second free, and fail if a block comes back twice:
 *     tide: malloc(): double free 0x... (freed twice, or ...)
 *
 * Each test does the misuse twice:
 *   1. in a forked child whose stderr is a pipe: the test checks the child died of
 *      SIGABRT, the exact line, and that the call did not return;
 *   2. in the test process itself, which Criterion expects to die of SIGABRT
 *      (.signal = SIGABRT), so the abort happens in the same process the pointer came
 *      from, not only in a copy of it.
 */
#include "support.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

#define MiB ((size_t)1 << 20)

enum kind {
    FREE_PTR,            /* free(ptr) */
    REALLOC_PTR,         /* realloc(ptr, 100) */
    DOUBLE_FREE,         /* free(ptr); free(ptr) */
    DOUBLE_FREE_FLUSHED, /* free(ptr); free 20,000 others of its class; free(ptr); malloc... */
    DOUBLE_FREE_REMOTE,  /* another thread frees ptr; then free(ptr); malloc... */
    REALLOC_ZERO_FREE,   /* realloc(ptr, 0); free(ptr) */
    DOUBLE_FREE_BUSY,    /* free(others[0..n)), free(ptr); another thread allocates small
                            objects of 30 classes; free(ptr) */
};

struct misuse {
    enum kind kind;
    bool twins;        /* through tide_free/tide_realloc instead of the plain names */
    void *ptr;         /* the pointer misused */
    void **others;     /* DOUBLE_FREE_FLUSHED: live objects of the same class */
    size_t nothers;
    size_t size;       /* DOUBLE_FREE_FLUSHED, _REMOTE: what malloc asks for after */
};

static void (*fr(const struct misuse *m))(void *) { return m->twins ? tide_free : free; }
static void *(*re(const struct misuse *m))(void *, size_t) { return m->twins ? tide_realloc : realloc; }

static void *remote_free(void *arg)
{
    free(arg);
    return NULL;
}

/* New slabs for 30 classes, made while a large block has just been freed (and, with a
 * second thread, the purger started). */
static void *small_objects(void *arg)
{
    (void)arg;
    for (int i = 0; i < 120; i++)
        *(volatile char *)malloc(48 + 16 * (size_t)(i % 30) + 512 * (size_t)(i / 30)) = 1;
    return NULL;
}

/* After the second free of M->ptr: malloc blocks of its size, keeping them all, until one
 * of them comes back twice (the failure: returns) or many more than any cache holds were
 * handed out; then malloc_trim(0), which gives every cached block back to its slab (a
 * collection: a copy of the block left on a list is found there); returns if nothing
 * aborted.  The thread is pinned to its CPU (commit_in_child), so that its refills and
 * flushes meet the same arena's slabs and lists. */
static void malloc_until_twice(const struct misuse *m)
{
    enum { N = 50000 };
    unsigned seen = 0;
    for (unsigned i = 0; i < N; i++) {
        void *q = malloc(m->size);
        if (q == m->ptr && ++seen == 2)
            return;
    }
    malloc_trim(0);
}

/* The misuse itself. Returns only if tide did not abort. */
static void commit(const struct misuse *m)
{
    switch (m->kind) {
    case FREE_PTR:
        fr(m)(m->ptr);
        break;
    case REALLOC_PTR:
        re(m)(m->ptr, 100);
        break;
    case DOUBLE_FREE:
        fr(m)(m->ptr);
        fr(m)(m->ptr);
        break;
    case DOUBLE_FREE_FLUSHED:
        fr(m)(m->ptr);
        for (size_t i = 0; i < m->nothers; i++)
            free(m->others[i]);
        fr(m)(m->ptr);
        malloc_until_twice(m);
        break;
    case DOUBLE_FREE_REMOTE: {
        pthread_t t;
        pthread_create(&t, NULL, remote_free, m->ptr);
        pthread_join(t, NULL);
        fr(m)(m->ptr);
        malloc_until_twice(m);
        break;
    }
    case REALLOC_ZERO_FREE:
        re(m)(m->ptr, 0);
        fr(m)(m->ptr);
        break;
    case DOUBLE_FREE_BUSY: {
        for (size_t i = 0; i < m->nothers; i++)
            free(m->others[i]);
        fr(m)(m->ptr);
        pthread_t t;
        pthread_create(&t, NULL, small_objects, NULL);
        pthread_join(t, NULL);
        fr(m)(m->ptr);
        break;
    }
    }
}

static void no_core_dumps(void)
{
    struct rlimit rl = {0, 0};
    setrlimit(RLIMIT_CORE, &rl);
}

/* In the child: commit the misuse; getting past it is a failure the parent reports. */
static int commit_in_child(void *m)
{
    tt_pin_cpu(-1);
    commit(m);
    static const char msg[] = "<the call returned>\n";
    if (write(2, msg, sizeof msg - 1) < 0)
        return 98;
    return 99;
}

/* Runs the misuse in a forked child, which must abort with one of the EXPECTED stderr
 * contents (NULL-terminated); WHAT describes the call for messages. */
static void expect_abort_in_child(const struct misuse *m, const char *what, const char *const *expected)
{
    no_core_dumps();
    /* a deadlock fails the test instead of hanging it */
    struct tt_child_spec spec = {.fn = commit_in_child, .arg = (void *)m, .timeout_s = 20};
    struct tt_child c;
    cr_assert(tt_child_run(&spec, &c) == 0, "fork: %s", strerror(errno));
    const char *out = c.err;
    char sbuf[128];
#ifdef TIDE_TEST_GLIBC
    /* glibc detects some of these with its own words and misses others: just report */
    (void)expected;
    fprintf(stderr, "[tide-test] glibc mode: %s -> %s, stderr \"%s\"\n", what, tt_child_how(&c, sbuf, sizeof sbuf), out);
#else
    cr_assert(tt_child_signalled(&c, SIGABRT), "%s: the child %s instead of aborting; its stderr: \"%s\"", what,
              tt_child_how(&c, sbuf, sizeof sbuf), out);
    bool ok = false;
    for (const char *const *e = expected; *e && !ok; e++)
        ok = strcmp(out, *e) == 0;
    cr_assert(ok, "%s: stderr should be exactly \"%s\"%s%s%s, it was \"%s\"", what, expected[0], expected[1] ? " (or \"" : "",
              expected[1] ? expected[1] : "", expected[1] ? "\")" : "", out);
#endif
    tt_child_free(&c);
}

/* The misuse in a child, then in the test process itself, which Criterion expects to die of
 * SIGABRT (.signal = SIGABRT). */
static void expect_abort(const struct misuse *m, const char *what, const char *const *expected)
{
    expect_abort_in_child(m, what, expected);
#ifdef TIDE_TEST_GLIBC
    abort(); /* what tide must do in the test process itself */
#else
    /* now here: Criterion expects this process to die of SIGABRT */
    int devnull = open("/dev/null", O_WRONLY);
    int saved = dup(2);
    dup2(devnull, 2);
    commit(m);
    dup2(saved, 2);
    cr_assert_fail("%s returned in the test process instead of aborting", what);
#endif
}

static void expect_line(const struct misuse *m, const char *what, const char *fmt, const void *ptr)
{
    char line[128];
    snprintf(line, sizeof line, fmt, (uintptr_t)ptr);
    const char *const expected[] = {line, NULL};
    expect_abort(m, what, expected);
}

#define INVALID_FREE "tide: free(): invalid pointer 0x%" PRIxPTR "\n"
#define DOUBLE_FREE_LINE "tide: free(): double free 0x%" PRIxPTR "\n"
#define INVALID_REALLOC "tide: realloc(): invalid pointer 0x%" PRIxPTR "\n"
/* Where a block freed twice is taken next: a pop that finds its key gone, or a refill
 * that finds it holds no longer the mark of a block free in its slab. */
#define LOST_KEY_LINE "tide: malloc(): double free 0x%" PRIxPTR " (freed twice, or written after its free)\n"
#define IN_SLAB_LINE "tide: malloc(): double free 0x%" PRIxPTR " (freed twice, or never allocated)\n"
/* ... or a collection that gives a copy back to its slab (malloc_trim's flush). */
#define RETURNED_LINE "tide: free(): double free 0x%" PRIxPTR " (freed twice, or written after its free)\n"

static void foreign(enum kind kind, bool twins, void *ptr, const char *what)
{
    struct misuse m = {kind, twins, ptr, NULL, 0, 0};
    expect_line(&m, what, kind == FREE_PTR ? INVALID_FREE : INVALID_REALLOC, ptr);
}

/* ---- pointers that were never tide's ----------------------------------------------- */

Test(misuse, free_stack_address, .signal = SIGABRT)
{
    char buf[64];
    foreign(FREE_PTR, false, buf + 16, "free(stack address)");
}

Test(misuse, tide_free_stack_address, .signal = SIGABRT)
{
    char buf[64];
    foreign(FREE_PTR, true, buf + 16, "tide_free(stack address)");
}

Test(misuse, free_foreign_mmap, .signal = SIGABRT)
{
    void *p = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(p != MAP_FAILED);
    foreign(FREE_PTR, false, p, "free(pointer from mmap)");
}

Test(misuse, free_0x1000, .signal = SIGABRT) { foreign(FREE_PTR, false, (void *)0x1000, "free((void *)0x1000)"); }

Test(misuse, free_misaligned_junk, .signal = SIGABRT)
{
    foreign(FREE_PTR, false, (void *)0x7f0012345671, "free((void *)0x7f0012345671)");
}

Test(misuse, free_kernel_address, .signal = SIGABRT)
{
    foreign(FREE_PTR, false, (void *)0xffff888000000000, "free((void *)0xffff888000000000)");
}

Test(misuse, free_top_of_address_space, .signal = SIGABRT)
{
    foreign(FREE_PTR, false, (void *)(UINTPTR_MAX & ~(uintptr_t)15), "free((void *)0xfffffffffffffff0)");
}

Test(misuse, realloc_stack_address, .signal = SIGABRT)
{
    char buf[64];
    foreign(REALLOC_PTR, false, buf + 16, "realloc(stack address, 100)");
}

Test(misuse, tide_realloc_stack_address, .signal = SIGABRT)
{
    char buf[64];
    foreign(REALLOC_PTR, true, buf + 16, "tide_realloc(stack address, 100)");
}

Test(misuse, realloc_0x1000, .signal = SIGABRT)
{
    foreign(REALLOC_PTR, false, (void *)0x1000, "realloc((void *)0x1000, 100)");
}

Test(misuse, realloc_foreign_mmap, .signal = SIGABRT)
{
    void *p = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(p != MAP_FAILED);
    foreign(REALLOC_PTR, false, p, "realloc(pointer from mmap, 100)");
}

/* ---- interior pointers ------------------------------------------------------------- */

static void interior(enum kind kind, bool twins, size_t size, size_t off)
{
    unsigned char *p = malloc(size);
    memset(p, 1, size);
    char what[96];
    snprintf(what, sizeof what, "%s%s(malloc(%zu) + %zu)", twins ? "tide_" : "", kind == FREE_PTR ? "free" : "realloc",
             size, off);
    foreign(kind, twins, p + off, what);
}

Test(misuse, free_interior_16, .signal = SIGABRT) { interior(FREE_PTR, false, 16, 8); }
Test(misuse, free_interior_48, .signal = SIGABRT) { interior(FREE_PTR, false, 48, 8); }
Test(misuse, free_interior_1000, .signal = SIGABRT) { interior(FREE_PTR, false, 1000, 8); }
Test(misuse, free_interior_1000_at_16, .signal = SIGABRT) { interior(FREE_PTR, false, 1000, 16); }
Test(misuse, free_interior_14336, .signal = SIGABRT) { interior(FREE_PTR, false, 14336, 8); }
Test(misuse, tide_free_interior_64, .signal = SIGABRT) { interior(FREE_PTR, true, 64, 8); }
Test(misuse, realloc_interior_64, .signal = SIGABRT) { interior(REALLOC_PTR, false, 64, 8); }
Test(misuse, realloc_interior_4096, .signal = SIGABRT) { interior(REALLOC_PTR, false, 4096, 16); }
/* large blocks: an address inside one is not a block tide handed out either */
Test(misuse, free_interior_large_page, .signal = SIGABRT) { interior(FREE_PTR, false, MiB, 4096); }
Test(misuse, free_interior_large_16, .signal = SIGABRT) { interior(FREE_PTR, false, 100000, 16); }
Test(misuse, realloc_interior_large, .signal = SIGABRT) { interior(REALLOC_PTR, false, 3 * MiB, 65536); }

/* ---- double frees of small objects ------------------------------------------------- */

static void double_free(enum kind kind, bool twins, size_t size)
{
    struct misuse m = {kind, twins, malloc(size), NULL, 0, size};
    memset(m.ptr, 2, size);
    if (kind == DOUBLE_FREE_FLUSHED) {
        m.nothers = 20000;
        m.others = malloc(m.nothers * sizeof(void *));
        for (size_t i = 0; i < m.nothers; i++)
            m.others[i] = malloc(size);
    }
    char what[160];
    static const char *const how[] = {
        [DOUBLE_FREE] = "free(p); free(p)",
        [DOUBLE_FREE_FLUSHED] = "free(p); free 20,000 others of its class; free(p); malloc until p comes twice",
        [DOUBLE_FREE_REMOTE] = "another thread frees p; free(p); malloc until p comes twice",
        [REALLOC_ZERO_FREE] = "realloc(p, 0); free(p)",
    };
    snprintf(what, sizeof what, "p = malloc(%zu); %s%s", size, how[kind], twins ? " (tide_ names)" : "");
    if (kind == DOUBLE_FREE_FLUSHED || kind == DOUBLE_FREE_REMOTE) {
        char a[160], b[160], c[160], d[160];
        snprintf(a, sizeof a, LOST_KEY_LINE, (uintptr_t)m.ptr);
        snprintf(b, sizeof b, IN_SLAB_LINE, (uintptr_t)m.ptr);
        snprintf(c, sizeof c, RETURNED_LINE, (uintptr_t)m.ptr);
        snprintf(d, sizeof d, DOUBLE_FREE_LINE, (uintptr_t)m.ptr);
        const char *const expected[] = {a, b, c, d, NULL};
        expect_abort(&m, what, expected);
    } else {
        expect_line(&m, what, DOUBLE_FREE_LINE, m.ptr);
    }
}

Test(misuse, double_free_16, .signal = SIGABRT) { double_free(DOUBLE_FREE, false, 16); }
Test(misuse, double_free_48, .signal = SIGABRT) { double_free(DOUBLE_FREE, false, 48); }
Test(misuse, double_free_256, .signal = SIGABRT) { double_free(DOUBLE_FREE, false, 256); }
Test(misuse, double_free_4096, .signal = SIGABRT) { double_free(DOUBLE_FREE, false, 4096); }
Test(misuse, double_free_14336, .signal = SIGABRT) { double_free(DOUBLE_FREE, false, 14336); }
Test(misuse, tide_double_free_100, .signal = SIGABRT) { double_free(DOUBLE_FREE, true, 100); }
Test(misuse, double_free_after_cache_flush, .signal = SIGABRT, .timeout = 60)
{
    double_free(DOUBLE_FREE_FLUSHED, false, 32);
}
Test(misuse, double_free_after_remote_free, .signal = SIGABRT) { double_free(DOUBLE_FREE_REMOTE, false, 80); }
Test(misuse, free_after_realloc_to_zero, .signal = SIGABRT) { double_free(REALLOC_ZERO_FREE, false, 64); }

/* ---- double frees of large blocks: once freed, tide does not own the address -------- */

static void double_free_large(size_t size)
{
    struct misuse m = {DOUBLE_FREE, false, malloc(size), NULL, 0, size};
    memset(m.ptr, 3, size);
    char a[128], b[128], what[96];
    snprintf(a, sizeof a, DOUBLE_FREE_LINE, (uintptr_t)m.ptr);
    snprintf(b, sizeof b, INVALID_FREE, (uintptr_t)m.ptr);
    snprintf(what, sizeof what, "p = malloc(%zu); free(p); free(p)", size);
    const char *const expected[] = {a, b, NULL};
    expect_abort(&m, what, expected);
}

Test(misuse, double_free_large_cached_class, .signal = SIGABRT) { double_free_large(20000); }
Test(misuse, double_free_large_1mib, .signal = SIGABRT) { double_free_large(MiB); }

/* A large block's double free is as sure as a small one's: the pages it gave back are not
 * the first a new slab takes, and the page map tells the second free the block is free,
 * also when it merged with free pages before it. */
static void double_free_large_busy(size_t size, bool merged)
{
    /* Slabs keep away from a freed block's first page; large blocks do not, and prof:on
     * turns the other thread's sampled small blocks into large ones, one of which may
     * start where P did: the second free then frees it (docs/security.md's limit).  A
     * block of a cached class is found in the cache, whatever the other thread made.
     * Above the cached classes the case is asserted in the child alone, so that the test
     * can be skipped (a test that must die of SIGABRT cannot). */
    bool cached = size <= 65536;
    if (!cached)
        tt_skip_under("prof:on", "sampled small blocks become large blocks, which may start where the freed block did");
    void *before = merged ? malloc(size) : NULL;
    struct misuse m = {DOUBLE_FREE_BUSY, false, malloc(size), &before, merged, size};
    memset(m.ptr, 3, size);
    char what[160], line[128];
    snprintf(what, sizeof what, "p = malloc(%zu); %sfree(p); another thread allocates; free(p)", size,
             merged ? "free(the block before p); " : "");
    if (cached) {
        expect_line(&m, what, DOUBLE_FREE_LINE, m.ptr);
        return;
    }
    snprintf(line, sizeof line, DOUBLE_FREE_LINE, (uintptr_t)m.ptr);
    const char *const expected[] = {line, NULL};
    expect_abort_in_child(&m, what, expected);
}

Test(misuse, double_free_large_with_new_slabs_between) { double_free_large_busy(200000, false); }
Test(misuse, double_free_large_merged_with_new_slabs_between) { double_free_large_busy(200000, true); }
Test(misuse, double_free_3mib_with_new_slabs_between) { double_free_large_busy(3 * MiB, false); }
Test(misuse, double_free_cached_class_with_new_slabs_between, .signal = SIGABRT)
{
    double_free_large_busy(20000, false);
}
