/* SPDX-License-Identifier: MIT */
/*
 * api.c - the malloc family's contract, through the plain names and the tide_ twins.
 *
 *   size classes      every class boundary (class-1, class, class+1) up to 64 KiB, every
 *                     page boundary up to 1 MiB, sizes in MiB: usable size == class,
 *                     16-byte alignment, every usable byte writable, no overlap
 *   alignment         every power of two from 1 B to 1 GiB through posix_memalign,
 *                     aligned_alloc and memalign; valloc and pvalloc; bad alignments
 *                     (EINVAL), and non-powers of two compared with the host glibc
 *   errors            huge and overflowing requests: NULL (or an error number) + ENOMEM,
 *                     the old block untouched
 *   realloc           contents kept across every pair of classes, growth and shrink
 *                     chains, blocks growing side by side, aligned blocks; realloc(NULL,
 *                     n) and realloc(p, 0) as glibc; reallocarray
 *   calloc            zeroes, also on memory dirtied and freed just before (small and
 *                     large, same thread and other thread, after tide_purge())
 *   the rest          malloc(0), malloc_usable_size, free_sized, free_aligned_sized,
 *                     malloc_trim, mallinfo2, malloc_stats, tide_stats_get, tide_ranges
 */
#include "support.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

/* malloc_usable_size(malloc(n)) is exactly the class of n: tide's promise. In glibc mode
 * (checking the tests themselves) only usable >= n is asked. */
static bool USABLE_IS_CLASS(size_t u, size_t n)
{
#ifdef TIDE_TEST_GLIBC
    return u >= n;
#else
    /* under TIDE_CONF=thp:on, blocks of 2 MiB and more are whole huge pages (tide(3)) */
    char thp[16] = "";
    if (n >= 2 * MiB && tide_conf_get("thp", thp, sizeof thp) == 0 && strcmp(thp, "on") == 0)
        return u == tt_round_up(n, 2 * MiB);
    return u == tt_class_of(n);
#endif
}

static bool aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

/* Writes pattern over [p, p+n) (every byte when n <= full_max, else first and last 64 KiB
 * and one word per page) and reads it back. */
static void touch_and_check(const char *what, void *p, size_t n, size_t full_max)
{
    unsigned char *b = p;
    uint64_t seed = tt_seed(p, n);
    if (n <= full_max) {
        tt_fill(p, n, seed);
        size_t bad = tt_check(p, n, seed);
        cr_assert(bad == SIZE_MAX, "%s: byte %zu of %zu at %p did not keep its value", what, bad, n, p);
        return;
    }
    size_t edge = 64 * KiB;
    tt_fill(b, edge, seed);
    tt_fill(b + n - edge, edge, seed + 1);
    /* one word per page; one per MiB beyond 64 MiB, to keep huge blocks mostly untouched */
    size_t stride = n > 64 * MiB ? MiB : TT_PAGE;
    for (size_t off = edge; off + 8 <= n - edge; off += stride)
        memcpy(b + off, &off, 8);
    cr_assert(tt_check(b, edge, seed) == SIZE_MAX, "%s: head of %p (%zu B) lost its bytes", what, p, n);
    cr_assert(tt_check(b + n - edge, edge, seed + 1) == SIZE_MAX, "%s: tail of %p (%zu B) lost its bytes", what, p, n);
    for (size_t off = edge; off + 8 <= n - edge; off += stride) {
        size_t v;
        memcpy(&v, b + off, 8);
        cr_assert(v == off, "%s: word at offset %zu of %p (%zu B) lost its value", what, off, p, n);
    }
}

/* Bytes the allocator reports as handed out (tide: tide_stats allocated; glibc: mallinfo2). */
static uint64_t live_bytes(void)
{
#ifdef TIDE_TEST_GLIBC
    struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
#else
    tide_stats_t s;
    memset(&s, 0, sizeof s);
    tide_stats_get(&s, sizeof s);
    return s.allocated;
#endif
}

struct block {
    unsigned char *p;
    size_t n;     /* requested */
    size_t u;     /* usable */
};

static int cmp_block(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const struct block *)a)->p, y = (uintptr_t)((const struct block *)b)->p;
    return x < y ? -1 : x > y;
}

/* Sorts BLOCKS by address and asserts that no two [p, p+usable) overlap. */
static void assert_disjoint(const char *what, struct block *blocks, size_t n)
{
    qsort(blocks, n, sizeof *blocks, cmp_block);
    for (size_t i = 1; i < n; i++)
        cr_assert((uintptr_t)blocks[i - 1].p + blocks[i - 1].u <= (uintptr_t)blocks[i].p,
                  "%s: live blocks overlap: %p (%zu usable) and %p (%zu usable)", what,
                  blocks[i - 1].p, blocks[i - 1].u, blocks[i].p, blocks[i].u);
}

/* ==================================================================================== */
/* The process under test really allocates with tide.                                    */
/* ==================================================================================== */

Test(api, runner_allocates_with_tide)
{
#ifdef TIDE_TEST_GLIBC
    cr_skip_test("glibc mode");
#else
    uintptr_t r[64][2];
    size_t nr = tide_ranges(r, 64);
    cr_assert(nr >= 1 && nr <= 64, "tide_ranges() reports %zu ranges", nr);
    for (size_t i = 0; i < nr; i++) {
        cr_assert(r[i][0] < r[i][1], "range %zu is [%#" PRIxPTR ", %#" PRIxPTR ")", i, r[i][0], r[i][1]);
        cr_assert(r[i][0] % TT_PAGE == 0 && r[i][1] % TT_PAGE == 0,
                  "range %zu [%#" PRIxPTR ", %#" PRIxPTR ") is not page-aligned", i, r[i][0], r[i][1]);
        for (size_t j = 0; j < i; j++)
            cr_assert(r[i][1] <= r[j][0] || r[j][1] <= r[i][0], "ranges %zu and %zu overlap", i, j);
    }
    /* tide_ranges(NULL-ish, 0) only counts */
    cr_assert_eq(tide_ranges(r, 0), nr, "tide_ranges(out, 0) should still return the count");

    size_t sizes[] = {1, 100, 14336, 20000, 65536, 65537, MiB, 32 * MiB};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        void *p = malloc(sizes[i]);
        cr_assert(p && tt_in_tide(p, sizes[i]), "malloc(%zu) = %p is not inside tide's ranges", sizes[i], p);
        free(p);
    }
    char *s = strdup("criterion's own allocations go through the same malloc");
    cr_assert(tt_in_tide(s, strlen(s) + 1), "strdup() result %p is not inside tide's ranges", (void *)s);
    free(s);

    int on_stack;
    cr_assert(!tt_in_tide(&on_stack, sizeof on_stack), "a stack address lies inside tide's ranges");
    void *m = mmap(NULL, TT_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(m != MAP_FAILED);
    cr_assert(!tt_in_tide(m, TT_PAGE), "a foreign mmap lies inside tide's ranges");
    munmap(m, TT_PAGE);
#endif
}

/* ==================================================================================== */
/* Size classes                                                                          */
/* ==================================================================================== */

/* The test's own class function against the table in the issue. */
Test(api, class_table_is_the_documented_one)
{
    size_t c[128];
    size_t n = tt_classes(c, 128);
    static const size_t head[] = {16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640};
    static const size_t tail[] = {14336, 16384, 20480, 24576, 28672, 32768, 40960, 49152, 57344, 65536};
    cr_assert_eq(n, 44, "expected 35 small + 9 large classes, computed %zu", n);
    for (size_t i = 0; i < sizeof head / sizeof *head; i++)
        cr_assert_eq(c[i], head[i], "class %zu: %zu, expected %zu", i, c[i], head[i]);
    for (size_t i = 0; i < sizeof tail / sizeof *tail; i++)
        cr_assert_eq(c[n - 10 + i], tail[i], "class %zu: %zu, expected %zu", n - 10 + i, c[n - 10 + i], tail[i]);
    cr_assert_eq(tt_class_of(65537), 69632);
    cr_assert_eq(tt_class_of(14337), 16384);
    cr_assert_eq(tt_class_of(1), 16);
}

/* Every size worth testing against the class rule: each class and its neighbours, each
 * page multiple in (64 KiB, 1 MiB] and its neighbours, and sizes in MiB. */
static size_t boundary_sizes(size_t *out, size_t max)
{
    size_t c[128], k = 0;
    size_t nc = tt_classes(c, 128);
    for (size_t i = 0; i < nc; i++)
        for (int d = -1; d <= 1; d++)
            if (k < max)
                out[k++] = c[i] + (size_t)(ptrdiff_t)d;
    for (size_t pg = TT_LARGE_CLASS_MAX + TT_PAGE; pg <= MiB; pg += TT_PAGE)
        for (int d = -1; d <= 1; d++)
            if (k < max)
                out[k++] = pg + (size_t)(ptrdiff_t)d;
    static const size_t mib[] = {2 * MiB - 1, 2 * MiB, 2 * MiB + 1, 2 * MiB + TT_PAGE, 3 * MiB + 12345,
                                 4 * MiB - TT_PAGE - 1, 8 * MiB + 1, 16 * MiB - 1, 16 * MiB, 16 * MiB + 1,
                                 100 * MiB + 7};
    for (size_t i = 0; i < sizeof mib / sizeof *mib && k < max; i++)
        out[k++] = mib[i];
    /* dedupe (neighbouring classes share c+1 == next-1 only when 2 apart: never, but be safe) */
    size_t w = 0;
    for (size_t i = 0; i < k; i++) {
        bool dup = false;
        for (size_t j = 0; j < w && !dup; j++)
            dup = out[j] == out[i];
        if (!dup && out[i] > 0)
            out[w++] = out[i];
    }
    return w;
}

static void class_boundaries(const struct api *A)
{
    static size_t sizes[2048];
    size_t ns = boundary_sizes(sizes, 2048);
    struct block *b = calloc(ns, sizeof *b);
    cr_assert(b);
    for (size_t i = 0; i < ns; i++) {
        size_t n = sizes[i];
        errno = 0;
        unsigned char *p = A->malloc(n);
        cr_assert(p, "%s malloc(%zu) failed: %s", A->name, n, strerror(errno));
        cr_assert(aligned(p, 16), "%s malloc(%zu) = %p is not 16-byte aligned", A->name, n, (void *)p);
        size_t u = A->usable(p);
        cr_assert(USABLE_IS_CLASS(u, n), "%s malloc_usable_size(malloc(%zu)) = %zu, the class of %zu is %zu",
                     A->name, n, u, n, tt_class_of(n));
        b[i] = (struct block){p, n, u};
        tt_fill(p, u, tt_seed(p, u));
    }
    /* all live at once: every usable byte of every block kept its own value */
    for (size_t i = 0; i < ns; i++) {
        size_t bad = tt_check(b[i].p, b[i].u, tt_seed(b[i].p, b[i].u));
        cr_assert(bad == SIZE_MAX,
                  "%s: block %p from malloc(%zu) (usable %zu): byte %zu is 0x%02x, written 0x%02x "
                  "(overwritten by a neighbour?)", A->name, (void *)b[i].p, b[i].n, b[i].u, bad,
                  b[i].p[bad], tt_expected_byte(bad, tt_seed(b[i].p, b[i].u)));
    }
    assert_disjoint(A->name, b, ns);
    cr_assert_eq(tt_heap_check(), 0, "%s: tide_check() failed with %zu blocks live (see stderr)", A->name, ns);
    for (size_t i = 0; i < ns; i++) {
        if (i % 2)
            A->free_sized(b[i].p, b[i].n);
        else
            A->free(b[i].p);
    }
    free(b);
    cr_assert_eq(tt_heap_check(), 0, "%s: tide_check() failed after the frees (see stderr)", A->name);
}

Test(api, class_boundaries_plain, .timeout = 120) { class_boundaries(&api_plain); }
Test(api, class_boundaries_tide, .timeout = 120) { class_boundaries(&api_tide); }

/* One GiB and a bit: usable size is whole pages, alignment, pages writable (one word each). */
Test(api, one_gib_block, .timeout = 120)
{
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        size_t n = GiB + 1;
        unsigned char *p = A->malloc(n);
        cr_assert(p, "%s malloc(1 GiB + 1) failed: %s", A->name, strerror(errno));
        cr_assert(aligned(p, 16));
        cr_assert(USABLE_IS_CLASS(A->usable(p), n), "%s usable(malloc(1 GiB + 1)) = %zu, expected %zu", A->name,
                     A->usable(p), tt_class_of(n));
        size_t u = A->usable(p);
        for (size_t off = 0; off < u; off += TT_PAGE)
            p[off] = (unsigned char)(off >> 12);
        p[u - 1] = 0xab;
        for (size_t off = 0; off < u; off += TT_PAGE)
            cr_assert_eq(p[off], (unsigned char)(off >> 12), "%s 1 GiB block: page at offset %zu lost its byte",
                         A->name, off);
        cr_assert_eq(p[u - 1], 0xab);
        A->free(p);
    }
}

Test(api, malloc_zero)
{
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        enum { N = 1000 };
        struct block b[N];
        for (int i = 0; i < N; i++) {
            unsigned char *p = A->malloc(0);
            cr_assert(p, "%s malloc(0) returned NULL (%s)", A->name, strerror(errno));
            cr_assert(aligned(p, 16), "%s malloc(0) = %p is not 16-byte aligned", A->name, (void *)p);
            size_t u = A->usable(p);
            cr_assert(USABLE_IS_CLASS(u, 0), "%s malloc_usable_size(malloc(0)) = %zu; malloc(0) should come from the smallest class (16)",
                         A->name, u);
            b[i] = (struct block){p, 0, u};
            memset(p, i & 0xff, u);
        }
        assert_disjoint(A->name, b, N); /* also proves the pointers are unique */
        for (int i = 0; i < N; i++)
            A->free(b[i].p);
    }
}

/* Zero sizes reach every entry point and give unique, freeable pointers (as glibc). */
Test(api, zero_size_everywhere)
{
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        void *p[9];
        p[0] = A->calloc(0, 100);
        p[1] = A->calloc(100, 0);
        p[2] = A->realloc(NULL, 0);
        p[3] = A->reallocarray(NULL, 0, 0);
        p[4] = A->aligned_alloc(64, 0);
        p[5] = A->memalign(64, 0);
        cr_assert_eq(A->posix_memalign(&p[6], 64, 0), 0, "%s posix_memalign(64, 0) failed", A->name);
        p[7] = A->valloc(0);
        p[8] = A->pvalloc(0);
        const char *names[] = {"calloc(0, 100)", "calloc(100, 0)", "realloc(NULL, 0)", "reallocarray(NULL, 0, 0)",
                               "aligned_alloc(64, 0)", "memalign(64, 0)", "posix_memalign(64, 0)", "valloc(0)",
                               "pvalloc(0)"};
        for (int i = 0; i < 9; i++) {
            cr_assert(p[i], "%s %s returned NULL; glibc returns a unique pointer", A->name, names[i]);
            cr_assert(aligned(p[i], i >= 4 ? (i >= 7 ? TT_PAGE : 64) : 16), "%s %s = %p is misaligned", A->name,
                      names[i], p[i]);
            for (int j = 0; j < i; j++)
                cr_assert_neq(p[i], p[j], "%s %s and %s returned the same pointer", A->name, names[i], names[j]);
        }
        for (int i = 0; i < 9; i++)
            A->free(p[i]);
    }
}

/* calloc(1, n), calloc(n, 1) and realloc(NULL, n) at every boundary. */
Test(api, other_entry_points_at_boundaries, .timeout = 120)
{
    static size_t sizes[2048];
    size_t ns = boundary_sizes(sizes, 2048);
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        for (size_t i = 0; i < ns; i++) {
            size_t n = sizes[i];
            unsigned char *p = (i % 2) ? A->calloc(1, n) : A->calloc(n, 1);
            cr_assert(p && aligned(p, 16), "%s calloc(%zu) = %p", A->name, n, (void *)p);
            cr_assert_geq(A->usable(p), n, "%s usable(calloc(%zu)) = %zu", A->name, n, A->usable(p));
            size_t nz = tt_first_nonzero(p, n);
            cr_assert(nz == SIZE_MAX, "%s calloc(%zu): byte %zu is 0x%02x, not zero", A->name, n, nz, p[nz]);
            A->free(p);

            p = (i % 2) ? A->realloc(NULL, n) : A->reallocarray(NULL, 1, n);
            cr_assert(p && aligned(p, 16), "%s realloc(NULL, %zu) = %p", A->name, n, (void *)p);
            cr_assert(USABLE_IS_CLASS(A->usable(p), n), "%s usable(realloc(NULL, %zu)) = %zu, malloc(%zu) gives %zu",
                         A->name, n, A->usable(p), n, tt_class_of(n));
            touch_and_check(A->name, p, n, 256 * KiB);
            A->free(p);
        }
    }
}

/* 100,000 small objects of random sizes live at once, freed in random order. */
Test(api, many_small_objects, .timeout = 120)
{
    enum { N = 100000 };
    struct block *b = malloc(N * sizeof *b);
    cr_assert(b);
    tt_rng r = {42};
    for (int i = 0; i < N; i++) {
        size_t n = 1 + tt_below(&r, tt_below(&r, 8) ? 512 : TT_SMALL_MAX);
        unsigned char *p = (i % 3) ? malloc(n) : tide_malloc(n);
        cr_assert(p && aligned(p, 16), "malloc(%zu) = %p", n, (void *)p);
        b[i] = (struct block){p, n, n};
        tt_fill(p, n, tt_seed(p, n));
    }
    for (int i = 0; i < N; i++)
        cr_assert(tt_check(b[i].p, b[i].n, tt_seed(b[i].p, b[i].n)) == SIZE_MAX,
                  "object %p (%zu B) was overwritten", (void *)b[i].p, b[i].n);
    assert_disjoint("many small objects", b, N);
    for (int i = N - 1; i > 0; i--) { /* shuffle */
        int j = (int)tt_below(&r, (uint64_t)i + 1);
        struct block t = b[i];
        b[i] = b[j];
        b[j] = t;
    }
    for (int i = 0; i < N; i++)
        if (i % 2)
            free(b[i].p);
        else
            tide_free_sized(b[i].p, b[i].n);
    free(b);
}

/* ==================================================================================== */
/* Alignment                                                                             */
/* ==================================================================================== */

enum align_fn { AF_POSIX, AF_ALIGNED, AF_MEMALIGN };
static const char *const af_name[] = {"posix_memalign", "aligned_alloc", "memalign"};

static void *align_call(const struct api *A, enum align_fn f, size_t align, size_t n, int *err)
{
    void *p = NULL;
    errno = 0;
    switch (f) {
    case AF_POSIX:
        *err = A->posix_memalign(&p, align, n);
        return *err ? NULL : p;
    case AF_ALIGNED:
        p = A->aligned_alloc(align, n);
        break;
    case AF_MEMALIGN:
        p = A->memalign(align, n);
        break;
    }
    *err = p ? 0 : errno;
    return p;
}

static void alignments(enum align_fn f)
{
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        for (int k = f == AF_POSIX ? 3 : 0; k <= 30; k++) {
            size_t al = (size_t)1 << k;
            size_t cand[] = {1, 24, 4097, al - 1, al, al + 1, al + al / 2};
            struct block b[8];
            size_t nb = 0;
            for (size_t i = 0; i < sizeof cand / sizeof *cand; i++) {
                size_t n = cand[i];
                if (n == 0 || (al >= 64 * MiB && n > al + 1))
                    continue;
                bool dup = false;
                for (size_t j = 0; j < nb; j++)
                    dup |= b[j].n == n;
                if (dup)
                    continue;
                int err;
                unsigned char *p = align_call(A, f, al, n, &err);
                cr_assert(p, "%s %s(%zu, %zu) failed: %s", A->name, af_name[f], al, n, strerror(err));
                cr_assert(aligned(p, al), "%s %s(%zu, %zu) = %p is not %zu-aligned", A->name, af_name[f], al, n,
                          (void *)p, al);
                cr_assert(aligned(p, 16), "%s %s(%zu, %zu) = %p is not 16-aligned", A->name, af_name[f], al, n,
                          (void *)p);
                size_t u = A->usable(p);
                cr_assert_geq(u, n, "%s usable(%s(%zu, %zu)) = %zu", A->name, af_name[f], al, n, u);
                b[nb++] = (struct block){p, n, u};
                touch_and_check(af_name[f], p, n, 256 * KiB);
            }
            assert_disjoint(af_name[f], b, nb);
            for (size_t j = 0; j < nb; j++) {
                size_t bad = b[j].n <= 256 * KiB ? tt_check(b[j].p, b[j].n, tt_seed(b[j].p, b[j].n)) : SIZE_MAX;
                cr_assert(bad == SIZE_MAX, "%s %s(%zu, %zu) = %p: byte %zu changed while its neighbours were written",
                          A->name, af_name[f], al, b[j].n, (void *)b[j].p, bad);
                if (f == AF_ALIGNED)
                    A->free_aligned_sized(b[j].p, al, b[j].n);
                else
                    A->free(b[j].p);
            }
        }
    }
}

Test(api, alignments_posix_memalign, .timeout = 120) { alignments(AF_POSIX); }
Test(api, alignments_aligned_alloc, .timeout = 120) { alignments(AF_ALIGNED); }
Test(api, alignments_memalign, .timeout = 120) { alignments(AF_MEMALIGN); }

/* Many aligned blocks live together: distinct, aligned, intact. */
Test(api, many_aligned_blocks, .timeout = 60)
{
    static const size_t als[] = {32, 64, 256, 4096, 65536, 2 * MiB};
    for (size_t k = 0; k < sizeof als / sizeof *als; k++) {
        enum { N = 200 };
        struct block b[N];
        size_t al = als[k];
        for (int i = 0; i < N; i++) {
            size_t n = 1 + (size_t)i * 37 % (al < 4096 ? 1000 : 3 * al / 2);
            unsigned char *p = (i % 2) ? memalign(al, n) : tide_aligned_alloc(al, n);
            cr_assert(p && aligned(p, al), "aligned allocation %d (align %zu, size %zu) = %p", i, al, n, (void *)p);
            b[i] = (struct block){p, n, n};
            tt_fill(p, n, tt_seed(p, n));
        }
        for (int i = 0; i < N; i++)
            cr_assert(tt_check(b[i].p, b[i].n, tt_seed(b[i].p, b[i].n)) == SIZE_MAX,
                      "aligned block %p (align %zu, %zu B) was overwritten", (void *)b[i].p, al, b[i].n);
        assert_disjoint("aligned blocks", b, N);
        for (int i = 0; i < N; i++)
            free(b[i].p);
    }
}

Test(api, valloc_and_pvalloc)
{
    size_t sizes[] = {1, 16, 4095, 4096, 4097, 14336, 65536, 65537, 100000, 3 * MiB + 1};
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
            size_t n = sizes[i];
            unsigned char *p = A->valloc(n);
            cr_assert(p && aligned(p, TT_PAGE), "%s valloc(%zu) = %p is not page-aligned", A->name, n, (void *)p);
            cr_assert_geq(A->usable(p), n);
            touch_and_check("valloc", p, n, 4 * MiB);
            A->free(p);
            p = A->pvalloc(n);
            cr_assert(p && aligned(p, TT_PAGE), "%s pvalloc(%zu) = %p is not page-aligned", A->name, n, (void *)p);
            size_t whole = tt_round_up(n, TT_PAGE);
            cr_assert_geq(A->usable(p), whole, "%s pvalloc(%zu) must give whole pages (%zu B), usable is %zu", A->name,
                          n, whole, A->usable(p));
            touch_and_check("pvalloc", p, whole, 4 * MiB);
            A->free(p);
        }
    }
}

Test(api, posix_memalign_rejects_bad_alignment)
{
    static const size_t bad[] = {0, 1, 2, 4, 3, 12, 24, 48, 100, 4095, 4097, 3 * 4096, ((size_t)1 << 63) + 8, SIZE_MAX};
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
            void *sentinel = (void *)0x5a5a5a50, *p = sentinel;
            int r = A->posix_memalign(&p, bad[i], 100);
            cr_assert_eq(r, EINVAL, "%s posix_memalign(&p, %zu, 100) returned %d (%s), expected EINVAL", A->name, bad[i],
                         r, strerror(r));
            cr_assert(p == sentinel || p == NULL, "%s posix_memalign(&p, %zu, 100) failed but changed *memptr to %p",
                      A->name, bad[i], p);
        }
    }
}

/*
 * Non-power-of-two and absurd alignments for aligned_alloc and memalign: tide must do
 * what the host glibc does (glibc 2.36 rounds a non-power-of-two alignment up to the
 * next power of two and succeeds; glibc >= 2.38 makes aligned_alloc fail with EINVAL).
 * The reference is glibc's own function, looked up in libc.so.6.
 */
Test(api, odd_alignments_match_glibc)
{
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    cr_assert(libc, "libc.so.6 is not loaded?");
    void *(*g_aligned_alloc)(size_t, size_t) = (void *(*)(size_t, size_t))dlsym(libc, "aligned_alloc");
    void *(*g_memalign)(size_t, size_t) = (void *(*)(size_t, size_t))dlsym(libc, "memalign");
    void (*g_free)(void *) = (void (*)(void *))dlsym(libc, "free");
    cr_assert(g_aligned_alloc && g_memalign && g_free);
    static const size_t als[] = {0, 1, 3, 5, 24, 48, 96, 100, 4095, 4097, 12288, 3 * MiB,
                                 (size_t)1 << 63, ((size_t)1 << 63) + 1, SIZE_MAX};
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        for (int f = AF_ALIGNED; f <= AF_MEMALIGN; f++) {
            for (size_t i = 0; i < sizeof als / sizeof *als; i++) {
                size_t al = als[i];
                errno = 0;
                void *g = f == AF_ALIGNED ? g_aligned_alloc(al, 100) : g_memalign(al, 100);
                int gerr = g ? 0 : errno;
                int err;
                void *p = align_call(A, (enum align_fn)f, al, 100, &err);
                cr_assert_eq(!!p, !!g, "%s %s(%zu, 100) = %p (%s), but glibc's gives %p (%s)", A->name, af_name[f], al,
                             p, strerror(err), g, strerror(gerr));
                if (!g) {
                    cr_assert_eq(err, gerr, "%s %s(%zu, 100) failed with %s, glibc's with %s", A->name, af_name[f],
                                 al, strerror(err), strerror(gerr));
                    continue;
                }
                size_t want = 1;
                while (want < al && want < ((size_t)1 << 62))
                    want <<= 1; /* the next power of two */
                cr_assert(aligned(p, want < 16 ? 16 : want), "%s %s(%zu, 100) = %p is not %zu-aligned", A->name,
                          af_name[f], al, p, want);
                cr_assert_geq(A->usable(p), 100);
                memset(p, 0x77, 100);
                A->free(p);
                g_free(g);
            }
        }
    }
}

/* ==================================================================================== */
/* Errors: huge and overflowing requests                                                 */
/* ==================================================================================== */

#define EXPECT_ENOMEM(A, call, desc)                                                               \
    do {                                                                                         \
        errno = 0;                                                                               \
        void *r_ = (call);                                                                       \
        int e_ = errno;                                                                          \
        cr_assert(r_ == NULL, "%s %s returned %p, expected NULL", (A)->name, desc, r_);          \
        cr_assert_eq(e_, ENOMEM, "%s %s: errno is %d (%s), expected ENOMEM", (A)->name, desc, e_, \
                     strerror(e_));                                                              \
    } while (0)

static const size_t huge_sizes[] = {
    SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 15, SIZE_MAX - 16, SIZE_MAX - 4095, SIZE_MAX - 4096, SIZE_MAX - 65536,
    SIZE_MAX - 2 * MiB, (size_t)PTRDIFF_MAX + 1, (size_t)PTRDIFF_MAX, (size_t)PTRDIFF_MAX - 4095,
    (size_t)1 << 48,
};
#define NHUGE (sizeof huge_sizes / sizeof *huge_sizes)

Test(api, huge_requests_fail_with_enomem, .timeout = 60)
{
    char desc[128];
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        unsigned char *keep = A->malloc(1000);
        tt_fill(keep, 1000, 7);
        for (size_t i = 0; i < NHUGE; i++) {
            size_t n = huge_sizes[i];
            snprintf(desc, sizeof desc, "malloc(%#zx)", n);
            EXPECT_ENOMEM(A, A->malloc(n), desc);
            snprintf(desc, sizeof desc, "calloc(1, %#zx)", n);
            EXPECT_ENOMEM(A, A->calloc(1, n), desc);
            snprintf(desc, sizeof desc, "realloc(NULL, %#zx)", n);
            EXPECT_ENOMEM(A, A->realloc(NULL, n), desc);
            snprintf(desc, sizeof desc, "realloc(p, %#zx)", n);
            EXPECT_ENOMEM(A, A->realloc(keep, n), desc);
            snprintf(desc, sizeof desc, "valloc(%#zx)", n);
            EXPECT_ENOMEM(A, A->valloc(n), desc);
            snprintf(desc, sizeof desc, "pvalloc(%#zx)", n);
            EXPECT_ENOMEM(A, A->pvalloc(n), desc);
            static const size_t als[] = {16, 64, 4096, 2 * MiB, GiB};
            for (size_t j = 0; j < sizeof als / sizeof *als; j++) {
                snprintf(desc, sizeof desc, "aligned_alloc(%zu, %#zx)", als[j], n);
                EXPECT_ENOMEM(A, A->aligned_alloc(als[j], n), desc);
                snprintf(desc, sizeof desc, "memalign(%zu, %#zx)", als[j], n);
                EXPECT_ENOMEM(A, A->memalign(als[j], n), desc);
                void *p = (void *)0x5a5a5a50;
                int r = A->posix_memalign(&p, als[j], n);
                cr_assert_eq(r, ENOMEM, "%s posix_memalign(&p, %zu, %#zx) returned %d, expected ENOMEM", A->name,
                             als[j], n, r);
                cr_assert(p == (void *)0x5a5a5a50 || p == NULL, "%s failed posix_memalign changed *memptr to %p",
                          A->name, p);
            }
        }
        /* size + alignment padding overflows */
        EXPECT_ENOMEM(A, A->memalign(MiB, SIZE_MAX - MiB / 2), "memalign(1 MiB, SIZE_MAX - 512 KiB)");
        EXPECT_ENOMEM(A, A->aligned_alloc(GiB, SIZE_MAX - GiB + 1), "aligned_alloc(1 GiB, SIZE_MAX - 1 GiB + 1)");
        EXPECT_ENOMEM(A, A->pvalloc(SIZE_MAX - 4094), "pvalloc(SIZE_MAX - 4094) (page rounding overflows)");
        EXPECT_ENOMEM(A, A->pvalloc(SIZE_MAX - 8190), "pvalloc(SIZE_MAX - 8190)");
        /* alignments no address space can satisfy */
        EXPECT_ENOMEM(A, A->aligned_alloc((size_t)1 << 48, 1), "aligned_alloc(2^48, 1)");
        EXPECT_ENOMEM(A, A->aligned_alloc((size_t)1 << 62, 1), "aligned_alloc(2^62, 1)");
        EXPECT_ENOMEM(A, A->memalign((size_t)1 << 63, 1), "memalign(2^63, 1)");
        void *p = NULL;
        cr_assert_eq(A->posix_memalign(&p, (size_t)1 << 63, 1), ENOMEM, "%s posix_memalign(2^63, 1)", A->name);

        cr_assert(tt_check(keep, 1000, 7) == SIZE_MAX, "%s: the block of a failed realloc changed", A->name);
        cr_assert_geq(A->usable(keep), 1000);
        A->free(keep);
    }
}

Test(api, multiplication_overflow_fails_with_enomem)
{
    /* products that overflow size_t, some wrapping to small numbers (2^64 -> 0, 3 * (SIZE_MAX/3 + 1) -> 2) */
    static const size_t pairs[][2] = {
        {SIZE_MAX, 2}, {2, SIZE_MAX}, {(size_t)1 << 32, (size_t)1 << 32}, {(size_t)1 << 33, (size_t)1 << 31},
        {((size_t)1 << 63), 2}, {3, SIZE_MAX / 3 + 1}, {SIZE_MAX / 16 + 1, 16}, {65537, SIZE_MAX / 65536},
        {SIZE_MAX, SIZE_MAX}, {(size_t)1 << 62, 4},
    };
    char desc[128];
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        unsigned char *keep = A->malloc(300);
        tt_fill(keep, 300, 9);
        for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
            size_t x = pairs[i][0], y = pairs[i][1];
            snprintf(desc, sizeof desc, "calloc(%#zx, %#zx)", x, y);
            EXPECT_ENOMEM(A, A->calloc(x, y), desc);
            snprintf(desc, sizeof desc, "reallocarray(NULL, %#zx, %#zx)", x, y);
            EXPECT_ENOMEM(A, A->reallocarray(NULL, x, y), desc);
            snprintf(desc, sizeof desc, "reallocarray(p, %#zx, %#zx)", x, y);
            EXPECT_ENOMEM(A, A->reallocarray(keep, x, y), desc);
        }
        /* no overflow, but too big */
        EXPECT_ENOMEM(A, A->calloc((size_t)PTRDIFF_MAX / 2 + 1, 2), "calloc(2^62, 2)");
        EXPECT_ENOMEM(A, A->calloc(1, SIZE_MAX), "calloc(1, SIZE_MAX)");
        cr_assert(tt_check(keep, 300, 9) == SIZE_MAX, "%s: the block of a failed reallocarray changed", A->name);
        A->free(keep);
    }
}

/* vm.overcommit_memory: 0 heuristic, 1 always, 2 strict; -1 unknown. */
static int overcommit_policy(void)
{
    char *s = tt_read_file("/proc/sys/vm/overcommit_memory", NULL);
    int v = s && *s >= '0' && *s <= '2' ? *s - '0' : -1;
    free(s);
    return v;
}

/* RAM + swap in bytes: the heuristic policy refuses one mapping larger than that. */
static size_t ram_and_swap(void)
{
    struct sysinfo si;
    cr_assert_eq(sysinfo(&si), 0);
    return (size_t)(si.totalram + si.totalswap) * (si.mem_unit ? si.mem_unit : 1);
}

/* Requests the kernel's overcommit policy would refuse fail as in glibc (NULL + ENOMEM),
 * although tide's range is mapped with MAP_NORESERVE, which the kernel never refuses.
 * Under vm.overcommit_memory=1 glibc gets them too: skipped there. */
Test(api, absurd_requests_fail_with_enomem, .timeout = 60)
{
    if (overcommit_policy() == 1)
        cr_skip_test("vm.overcommit_memory is 1: the kernel grants every request, glibc's too");
    const size_t huge = (size_t)1 << 45, align = (size_t)1 << 44;
    char desc[128];
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        unsigned char *keep = A->malloc(100000);
        tt_fill(keep, 100000, 11);
        EXPECT_ENOMEM(A, A->malloc(huge), "malloc(1 << 45)");
        EXPECT_ENOMEM(A, A->aligned_alloc(align, 16), "aligned_alloc(1 << 44, 16)");
        EXPECT_ENOMEM(A, A->memalign(align, 4096), "memalign(1 << 44, 4096)");
        void *p = (void *)0x5a5a5a50;
        cr_assert_eq(A->posix_memalign(&p, align, 16), ENOMEM, "%s posix_memalign(&p, 1 << 44, 16)", A->name);
        EXPECT_ENOMEM(A, A->calloc(1, huge), "calloc(1, 1 << 45)");
        EXPECT_ENOMEM(A, A->calloc((size_t)1 << 25, (size_t)1 << 20), "calloc(1 << 25, 1 << 20)");
        EXPECT_ENOMEM(A, A->valloc(huge), "valloc(1 << 45)");
        EXPECT_ENOMEM(A, A->pvalloc(huge), "pvalloc(1 << 45)");
        EXPECT_ENOMEM(A, A->realloc(NULL, huge), "realloc(NULL, 1 << 45)");
        EXPECT_ENOMEM(A, A->realloc(keep, huge), "realloc(p, 1 << 45)");
        cr_assert(tt_check(keep, 100000, 11) == SIZE_MAX, "%s: the block of a refused realloc changed", A->name);
        for (int lg = 40; lg <= 46; lg += 2) {
            snprintf(desc, sizeof desc, "malloc(1 << %d)", lg);
            EXPECT_ENOMEM(A, A->malloc((size_t)1 << lg), desc);
        }
        A->free(keep);
    }
#ifndef TIDE_TEST_GLIBC
    tide_stats_t s;
    tide_stats_get(&s, sizeof s);
    cr_assert_lt(s.mapped, (uint64_t)1 << 40, "refused requests left %" PRIu64 " GiB mapped", s.mapped >> 30);
#endif
}

/* The size the heuristic policy allows, a large but reasonable request: 2 GiB, or a
 * quarter of RAM + swap on a small machine. */
static size_t reasonable_size(void)
{
    size_t quarter = ram_and_swap() / 4 / TT_PAGE * TT_PAGE;
    return quarter < 2 * GiB ? quarter : 2 * GiB;
}

/* Large requests the kernel grants still succeed, whatever the policy. */
Test(api, large_reasonable_requests_succeed, .timeout = 120)
{
    size_t n = reasonable_size();
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        /* calloc of purged pages needs no zeroing, so little of this becomes resident */
        A->malloc_trim(0);
        unsigned char *p = A->calloc(1, n);
        cr_assert(p, "%s calloc(1, %zu MiB) failed: %s", A->name, n >> 20, strerror(errno));
        for (size_t off = 0; off < n; off += MiB)
            cr_assert_eq(p[off], 0, "%s calloc(1, %zu MiB): byte %zu is not zero", A->name, n >> 20, off);
        A->free(p);
        p = A->malloc(n);
        cr_assert(p, "%s malloc(%zu MiB) failed: %s", A->name, n >> 20, strerror(errno));
        for (size_t off = 0; off < n; off += 64 * MiB) /* a word every 64 MiB, and the last byte */
            memcpy(p + off, &off, sizeof off);
        p[n - 1] = 0x5a;
        for (size_t off = 0; off < n; off += 64 * MiB) {
            size_t v;
            memcpy(&v, p + off, sizeof v);
            cr_assert_eq(v, off, "%s malloc(%zu MiB): the word at %zu MiB changed", A->name, n >> 20, off >> 20);
        }
        cr_assert_eq(p[n - 1], 0x5a);
        A->free(p);
        p = A->aligned_alloc(n / 2, n / 2);
        cr_assert(p && aligned(p, n / 2), "%s aligned_alloc(%zu MiB, %zu MiB) failed: %s", A->name, n >> 21, n >> 21,
                  strerror(errno));
        p = A->realloc(p, n);
        cr_assert(p, "%s realloc to %zu MiB failed: %s", A->name, n >> 20, strerror(errno));
        A->free(p);
    }
}

/* Under the heuristic policy (0) the limit is per request, not a total: blocks that
 * together exceed RAM + swap are granted one by one, and once they are freed the free
 * space tide keeps for them must not hide a single request above RAM + swap.  A realloc
 * is judged by its growth, as mremap is. */
Test(api, free_space_does_not_hide_a_refused_request, .timeout = 120)
{
    if (overcommit_policy() != 0)
        cr_skip_test("vm.overcommit_memory is %d: this checks the heuristic policy (0)", overcommit_policy());
    size_t r = ram_and_swap(), part = r / 2 / TT_PAGE * TT_PAGE;
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        void *b[3];
        for (int i = 0; i < 3; i++) {
            b[i] = A->malloc(part);
            cr_assert(b[i], "%s malloc(RAM + swap / 2 = %zu MiB) failed: %s", A->name, part >> 20, strerror(errno));
        }
        for (int i = 0; i < 3; i++)
            A->free(b[i]);
        EXPECT_ENOMEM(A, A->malloc(r + r / 4), "malloc(1.25 x RAM + swap) after freeing 1.5 x RAM + swap");
        EXPECT_ENOMEM(A, A->aligned_alloc(r / 2, r), "aligned_alloc(RAM + swap / 2, RAM + swap)");
        unsigned char *p = A->malloc(part);
        cr_assert(p);
        p[0] = 1;
        /* grows by 3/4 of RAM + swap: granted, as mremap grants it */
        unsigned char *q = A->realloc(p, r + r / 4);
        cr_assert(q, "%s realloc(RAM + swap / 2 -> 1.25 x RAM + swap) failed: %s", A->name, strerror(errno));
        cr_assert_eq(q[0], 1);
        /* grows by more than RAM + swap: refused, the block kept */
        EXPECT_ENOMEM(A, A->realloc(q, 3 * r), "realloc(1.25 x -> 3 x RAM + swap)");
        cr_assert_eq(q[0], 1);
        A->free(q);
        cr_assert_eq(tt_heap_check(), 0, "%s: tide_check() failed (see stderr)", A->name);
    }
}

/* ---- a freed giant block gives its address space back ------------------------------------ */

/* VmSize of this process in KiB. */
static long vmsize_kib(void)
{
    char *s = tt_read_file("/proc/self/status", NULL);
    long kib = -1;
    if (s) {
        char *l = strstr(s, "\nVmSize:");
        if (l)
            kib = strtol(l + 8, NULL, 10);
        free(s);
    }
    return kib;
}

/* A multi-GiB block the heuristic policy grants: half of RAM + swap, 2-8 GiB. */
static size_t giant_size(void)
{
    size_t n = ram_and_swap() / 2 / GiB * GiB;
    return n < 2 * GiB ? 2 * GiB : n > 8 * GiB ? 8 * GiB : n;
}

struct footprint {
    uint64_t mapped; /* tide's statistic (0 in glibc mode) */
    long vsz_kib;
    int vmas;        /* tide's range in /proc/self/maps */
};

static struct footprint footprint(void)
{
    struct footprint f = {0, vmsize_kib(), tt_count_vmas().tide};
#ifndef TIDE_TEST_GLIBC
    tide_stats_t s;
    tide_stats_get(&s, sizeof s);
    f.mapped = s.mapped;
    cr_assert_eq(s.active + s.dirty + s.lazy + s.clean + s.held + s.metadata, s.mapped,
                 "the statistics do not reconcile");
#endif
    return f;
}

/* After a block of N bytes is freed and purged, tide's mapped statistic and VmSize come back
 * to within N / 64 + 64 MiB of BEFORE: the page map's share of the block (8 bytes a page,
 * reserved 8 times ahead) stays mapped below the heap, and the trim leaves a growth step of
 * slack (a quarter of the rest of the heap).  The range is as many VMAs as before (1). */
static void assert_given_back(const char *what, struct footprint before, size_t n)
{
    struct footprint after = footprint();
    uint64_t bound = n / 64 + 64 * MiB;
    tt_report("api: %s: %zu MiB block freed: tide mapped %" PRIu64 " -> %" PRIu64 " MiB, VmSize %ld -> %ld MiB, "
              "VMAs %d -> %d",
              what, n >> 20, before.mapped >> 20, after.mapped >> 20, before.vsz_kib >> 10, after.vsz_kib >> 10,
              before.vmas, after.vmas);
#ifndef TIDE_TEST_GLIBC
    cr_assert_leq(after.mapped, before.mapped + bound, "%s: tide still maps %" PRIu64 " MiB (%" PRIu64 " before)", what,
                  after.mapped >> 20, before.mapped >> 20);
#endif
    cr_assert_leq((uint64_t)after.vsz_kib << 10, ((uint64_t)before.vsz_kib << 10) + bound,
                  "%s: VmSize is %ld MiB (%ld before)", what, after.vsz_kib >> 10, before.vsz_kib >> 10);
    cr_assert_eq(after.vmas, before.vmas, "%s: tide's range is %d VMAs (%d before)", what, after.vmas, before.vmas);
    cr_assert_eq(tt_heap_check(), 0, "%s: tide_check() failed (see stderr)", what);
}

/* Touch one byte every 64 MiB of the N-byte block at P (under thp:on each touch faults in
 * a 2 MiB page). */
static void touch_a_little(unsigned char *p, size_t n)
{
    for (size_t off = 0; off < n; off += 64 * MiB)
        p[off] = 1;
}

Test(api, freed_giant_block_gives_address_space_back_at_trim, .timeout = 300)
{
    size_t n = giant_size();
    struct footprint before = footprint();
    unsigned char *p = malloc(n);
    cr_assert(p, "malloc(%zu MiB) failed: %s", n >> 20, strerror(errno));
    touch_a_little(p, n);
    /* blocks allocated after it, still live: they must not settle above it */
    void *later[64];
    for (int i = 0; i < 64; i++)
        cr_assert((later[i] = malloc(i % 8 == 7 ? 300000 : 1000)) != NULL);
    free(p);
    malloc_trim(0);
    assert_given_back("malloc_trim", before, n);
    for (int i = 0; i < 64; i++)
        free(later[i]);
    /* and again from free space, as an aligned block */
    p = aligned_alloc(GiB, n);
    cr_assert(p, "aligned_alloc(1 GiB, %zu MiB) failed: %s", n >> 20, strerror(errno));
    touch_a_little(p, n);
    free(p);
    malloc_trim(0);
    assert_given_back("aligned, malloc_trim", before, n + GiB);
}

/* The blocks allocated after a giant block that ends the range go below it, not into a
 * growth of the range above it, also when they are more than the alignment slack a growth
 * for the giant block leaves below it (2 MiB) and the heap's first 4 MiB together: 16 MiB
 * of them here.  So its address space goes back once it is freed, whatever the random
 * start of the heap left free below it.  (With guard:on every block is a page longer and
 * freed ones are held, so the 2.4 MB of the test above outgrew that slack now and then.) */
Test(api, blocks_allocated_after_a_giant_block_stay_below_it, .timeout = 300)
{
    size_t n = giant_size();
    struct footprint before = footprint();
    unsigned char *p = malloc(n);
    cr_assert(p, "malloc(%zu MiB) failed: %s", n >> 20, strerror(errno));
    touch_a_little(p, n);
    void *later[64];
    for (int i = 0; i < 64; i++) {
        cr_assert((later[i] = malloc(256 << 10)) != NULL);
#ifndef TIDE_TEST_GLIBC
        cr_expect((unsigned char *)later[i] < p, "block %d of 256 KiB allocated after the %zu MiB block is above it",
                  i, n >> 20);
#endif
    }
    free(p);
    malloc_trim(0);
    assert_given_back("malloc_trim, 16 MiB allocated after it", before, n);
    for (int i = 0; i < 64; i++)
        free(later[i]);
}

/* Without malloc_trim: the default decay purges the block, and its address space follows. */
Test(api, freed_giant_block_gives_address_space_back_after_decay, .timeout = 600)
{
#ifdef TIDE_TEST_GLIBC
    cr_skip_test("glibc mode: tide's purger");
#else
    char purge[16], decay[32];
    cr_assert_eq(tide_conf_get("purge", purge, sizeof purge), 0);
    cr_assert_eq(tide_conf_get("decay_ms", decay, sizeof decay), 0);
    if (strcmp(purge, "none") == 0 || atol(decay) < 0)
        cr_skip_test("purge:%s, decay_ms:%s never purge by themselves", purge, decay);
    cr_assert_eq(tide_conf_set("background", "on"), 0); /* the purger thread, in this single-threaded test */
    size_t n = giant_size();
    struct footprint before = footprint();
    tide_stats_t s0;
    tide_stats_get(&s0, sizeof s0);
    unsigned char *p = malloc(n);
    cr_assert(p, "malloc(%zu MiB) failed: %s", n >> 20, strerror(errno));
    touch_a_little(p, n);
    free(p);
    /* Wait until tide's own counters show the block purged (a hang detector, not a
     * deadline): its trim happens in the same pass, before the counters move. */
    tide_stats_t s;
    for (int i = 0;; i++) {
        tide_stats_get(&s, sizeof s);
        if (s.purged_bytes >= s0.purged_bytes + n)
            break;
        cr_assert_lt(i, 30000, "the freed block was not purged in 5 minutes (decay_ms:%s): purged %" PRIu64
                     " MiB, dirty %" PRIu64 " MiB",
                     decay, (s.purged_bytes - s0.purged_bytes) >> 20, s.dirty >> 20);
        usleep(10000);
    }
    assert_given_back("after the purge", before, n);
#endif
}

/* A big buffer freed and built again, purged at every free (decay_ms:0): its address space
 * is given back once and mapped again once, not at every round; malloc_trim still gives it
 * back. */
Test(api, reused_giant_buffer_is_mapped_once, .timeout = 300)
{
#ifdef TIDE_TEST_GLIBC
    cr_skip_test("glibc mode: tide's counters");
#else
    cr_assert_eq(tide_conf_set("decay_ms", "0"), 0);
    size_t n = giant_size();
    struct footprint before = footprint();
    uint64_t grows[5];
    for (int round = 0; round < 5; round++) {
        tide_stats_t s0, s;
        tide_stats_get(&s0, sizeof s0);
        unsigned char *p = malloc(n);
        cr_assert(p, "round %d: malloc(%zu MiB) failed: %s", round, n >> 20, strerror(errno));
        touch_a_little(p, n);
        free(p);
        /* The free purges it at once, or the purger thread does if it holds the purge
         * lock just then: wait for the counters (a hang detector, not a deadline), so the
         * next round never meets the block still being purged. */
        for (int i = 0;; i++) {
            tide_stats_get(&s, sizeof s);
            if (s.purged_bytes >= s0.purged_bytes + n)
                break;
            cr_assert_lt(i, 30000, "round %d: the freed block was not purged in 5 minutes", round);
            usleep(10000);
        }
        grows[round] = s.grows;
    }
    tt_report("api: %zu MiB buffer reused under decay_ms:0: range growths after each round %" PRIu64 " %" PRIu64
              " %" PRIu64 " %" PRIu64 " %" PRIu64,
              n >> 20, grows[0], grows[1], grows[2], grows[3], grows[4]);
    cr_assert_eq(grows[4], grows[1], "the range grew again after round 2 (%" PRIu64 " -> %" PRIu64 " growths)",
                 grows[1], grows[4]);
    malloc_trim(0);
    assert_given_back("reused buffer, malloc_trim", before, n);
#endif
}

/* ==================================================================================== */
/* realloc                                                                               */
/* ==================================================================================== */

static const size_t realloc_sizes[] = {
    1, 8, 16, 17, 48, 100, 128, 129, 1000, 4095, 4096, 4097, 8192, 14336, 14337, 16384, 16385, 40000,
    65536, 65537, 69632, 69633, 100000, 256 * KiB, MiB - 1, MiB, MiB + 1, 3 * MiB + 12345, 8 * MiB, 16 * MiB + 1,
};
#define NREALLOC (sizeof realloc_sizes / sizeof *realloc_sizes)

/* realloc from each size to each other: prefix kept, usable size enough, neighbours intact.
 * Half the time a same-sized neighbour is allocated right after the block, so that growth
 * in place is blocked and the block has to move. */
static void realloc_pairs(const struct api *A)
{
    uint64_t seq = 1;
    for (size_t i = 0; i < NREALLOC; i++) {
        for (size_t j = 0; j < NREALLOC; j++) {
            size_t from = realloc_sizes[i], to = realloc_sizes[j];
            bool block = (i + j) % 2;
            uint64_t seed = seq++;
            unsigned char *p = A->malloc(from);
            cr_assert(p);
            tt_fill(p, from, seed);
            unsigned char *nb = NULL;
            if (block) {
                nb = A->malloc(from);
                tt_fill(nb, from, ~seed);
            }
            unsigned char *q = A->realloc(p, to);
            cr_assert(q, "%s realloc(%zu -> %zu) failed: %s", A->name, from, to, strerror(errno));
            cr_assert(aligned(q, 16), "%s realloc(%zu -> %zu) = %p is not 16-aligned", A->name, from, to, (void *)q);
            cr_assert_geq(A->usable(q), to, "%s usable(realloc(%zu -> %zu)) = %zu", A->name, from, to, A->usable(q));
            size_t keep = from < to ? from : to;
            size_t bad = tt_check(q, keep, seed);
            cr_assert(bad == SIZE_MAX,
                      "%s realloc(%p, %zu -> %zu) = %p: byte %zu of the kept %zu is 0x%02x, was 0x%02x%s", A->name,
                      (void *)p, from, to, (void *)q, bad, keep, q[bad], tt_expected_byte(bad, seed),
                      block ? " (a neighbour was allocated after the block)" : "");
            if (to > from) {
                /* the new part is writable */
                tt_fill(q + from, to - from, seed + 99);
                cr_assert(tt_check(q + from, to - from, seed + 99) == SIZE_MAX);
            }
            if (nb) {
                cr_assert(tt_check(nb, from, ~seed) == SIZE_MAX,
                          "%s realloc(%zu -> %zu) overwrote the neighbouring block %p", A->name, from, to, (void *)nb);
                A->free(nb);
            }
            A->free(q);
        }
    }
    cr_assert_eq(tt_heap_check(), 0, "%s: tide_check() failed after the reallocs (see stderr)", A->name);
}

Test(api, realloc_keeps_contents_plain, .timeout = 120) { realloc_pairs(&api_plain); }
Test(api, realloc_keeps_contents_tide, .timeout = 120) { realloc_pairs(&api_tide); }

/* Grow one block from 1 B to 32 MiB by ~1/8 each step, then shrink it back, checking the
 * kept bytes each step; then page-by-page growth from 64 KiB to 4 MiB. */
Test(api, realloc_growth_and_shrink_chains, .timeout = 120)
{
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        size_t n = 1;
        unsigned char *p = A->malloc(n);
        tt_fill(p, n, 5);
        while (n < 32 * MiB) {
            size_t m = n + n / 8 + 1;
            unsigned char *q = A->realloc(p, m);
            cr_assert(q, "%s realloc(%zu -> %zu) failed", A->name, n, m);
            size_t bad = tt_check(q, n, 5);
            cr_assert(bad == SIZE_MAX, "%s growing realloc %zu -> %zu: byte %zu lost", A->name, n, m, bad);
            tt_fill_range(q, n, m, 5);
            p = q;
            n = m;
        }
        while (n > 1) {
            size_t m = n - n / 8 - 1;
            if (m == 0)
                m = 1;
            unsigned char *q = A->realloc(p, m);
            cr_assert(q, "%s realloc(%zu -> %zu) failed", A->name, n, m);
            size_t bad = tt_check(q, m, 5);
            cr_assert(bad == SIZE_MAX, "%s shrinking realloc %zu -> %zu: byte %zu lost", A->name, n, m, bad);
            cr_assert_geq(A->usable(q), m);
            p = q;
            n = m;
        }
        A->free(p);

        /* page by page: the sizes a growing buffer of pages takes */
        n = 64 * KiB;
        p = A->malloc(n);
        tt_fill(p, n, 11);
        for (size_t step = 0; n < 4 * MiB; step++) {
            size_t m = n + TT_PAGE;
            unsigned char *q = A->realloc(p, m);
            cr_assert(q, "%s realloc(%zu -> %zu) failed", A->name, n, m);
            cr_assert_geq(A->usable(q), m);
            if (step % 64 == 0) {
                size_t bad = tt_check(q, n, 11);
                cr_assert(bad == SIZE_MAX, "%s page-step realloc %zu -> %zu: byte %zu lost", A->name, n, m, bad);
            } else {
                /* first page, last two pages and one word per page */
                cr_assert(tt_check(q, TT_PAGE, 11) == SIZE_MAX, "%s realloc %zu -> %zu: first page lost", A->name, n,
                          m);
                uint64_t w = tt_mix64(11);
                for (size_t off = 0; off + 8 <= n; off += TT_PAGE) {
                    uint64_t v, e = w + (off / 8) * TT_GOLDEN;
                    memcpy(&v, q + off, 8);
                    cr_assert(v == e, "%s realloc %zu -> %zu: word at offset %zu lost", A->name, n, m, off);
                }
                size_t tail = n - 2 * TT_PAGE;
                for (size_t off = tail; off < n; off += 8) {
                    uint64_t v, e = w + (off / 8) * TT_GOLDEN;
                    memcpy(&v, q + off, 8);
                    cr_assert(v == e, "%s realloc %zu -> %zu: word at offset %zu of the last pages lost", A->name,
                              n, m, off);
                }
            }
            /* the new page continues the same pattern, so that tt_check(p, n, 11) covers it all */
            tt_fill_range(q, n, m, 11);
            p = q;
            n = m;
        }
        cr_assert(tt_check(p, n, 11) == SIZE_MAX, "%s: page-by-page growth to %zu lost bytes", A->name, n);
        A->free(p);
    }
}

/* Four blocks growing side by side (none can grow in place for long), to several MiB, with
 * contents checked at every step: exercises moving large blocks. */
Test(api, realloc_blocks_growing_side_by_side, .timeout = 120)
{
    enum { K = 4 };
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        unsigned char *p[K];
        size_t n[K];
        for (int i = 0; i < K; i++) {
            n[i] = 60 * KiB + (size_t)i * 1000;
            p[i] = A->malloc(n[i]);
            tt_fill(p[i], n[i], 100 + (uint64_t)i);
        }
        for (int round = 0; round < 120; round++) {
            for (int i = 0; i < K; i++) {
                size_t m = n[i] + 64 * KiB + 1 + (size_t)round * 512;
                unsigned char *q = A->realloc(p[i], m);
                cr_assert(q, "%s realloc(%zu -> %zu) failed", A->name, n[i], m);
                size_t bad = tt_check(q, n[i], 100 + (uint64_t)i);
                cr_assert(bad == SIZE_MAX, "%s block %d realloc %zu -> %zu (%p -> %p): byte %zu lost", A->name, i, n[i],
                          m, (void *)p[i], (void *)q, bad);
                tt_fill_range(q, n[i], m, 100 + (uint64_t)i); /* the pattern goes on over the new bytes */
                p[i] = q;
                n[i] = m;
            }
        }
        cr_assert_eq(tt_heap_check(), 0, "%s: tide_check() failed with blocks grown side by side (see stderr)",
                     A->name);
        for (int i = 0; i < K; i++) {
            cr_assert(tt_check(p[i], n[i], 100 + (uint64_t)i) == SIZE_MAX, "%s block %d lost bytes", A->name, i);
            A->free(p[i]);
        }
    }
}

Test(api, realloc_of_aligned_blocks)
{
    static const size_t als[] = {64, 4096, 65536, 2 * MiB};
    static const size_t to[] = {10, 5000, 70000, 3 * MiB};
    for (size_t k = 0; k < sizeof als / sizeof *als; k++)
        for (size_t t = 0; t < sizeof to / sizeof *to; t++) {
            size_t n = 3000 + k * 1000;
            unsigned char *p = memalign(als[k], n);
            cr_assert(p && aligned(p, als[k]));
            tt_fill(p, n, k * 10 + t);
            unsigned char *q = realloc(p, to[t]);
            cr_assert(q && aligned(q, 16));
            size_t keep = n < to[t] ? n : to[t];
            cr_assert(tt_check(q, keep, k * 10 + t) == SIZE_MAX, "realloc(memalign(%zu, %zu), %zu) lost bytes", als[k],
                      n, to[t]);
            free(q);
        }
}

Test(api, realloc_null_and_zero)
{
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        /* realloc(NULL, n) is malloc(n) */
        for (size_t n = 1; n < 200000; n = n * 3 + 1) {
            void *p = A->realloc(NULL, n);
            cr_assert(p && aligned(p, 16) && USABLE_IS_CLASS(A->usable(p), n), "%s realloc(NULL, %zu) = %p, usable %zu",
                      A->name, n, p, p ? A->usable(p) : 0);
            A->free(p);
        }
        /* realloc(p, 0) frees p and returns NULL (glibc); the 64 MiB leave the books */
        void *p = A->malloc(16);
        cr_assert_null(A->realloc(p, 0), "%s realloc(p, 0) should free p and return NULL, as glibc", A->name);
        unsigned char *big = A->malloc(64 * MiB);
        cr_assert(big);
        memset(big, 1, 64 * MiB);
        uint64_t before = live_bytes();
        errno = 0;
        void *r = A->realloc(big, 0);
        cr_assert_null(r, "%s realloc(p, 0) of 64 MiB returned %p, expected NULL", A->name, r);
        uint64_t after = live_bytes();
        cr_assert_geq(before - after, 60 * MiB,
                      "%s realloc(p, 0) of a 64 MiB block: live bytes went from %" PRIu64 " to %" PRIu64
                      ", the block was not freed",
                      A->name, before, after);
        /* reallocarray(p, 0, n) is realloc(p, 0) as well */
        p = A->malloc(100);
        cr_assert_null(A->reallocarray(p, 0, 100), "%s reallocarray(p, 0, 100) should free p and return NULL", A->name);
    }
}

Test(api, reallocarray_is_checked_realloc)
{
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        unsigned char *p = A->reallocarray(NULL, 10, 100);
        cr_assert(p && USABLE_IS_CLASS(A->usable(p), 1000), "%s reallocarray(NULL, 10, 100) = %p", A->name, (void *)p);
        tt_fill(p, 1000, 3);
        unsigned char *q = A->reallocarray(p, 1000, 100);
        cr_assert(q && A->usable(q) >= 100000);
        cr_assert(tt_check(q, 1000, 3) == SIZE_MAX, "%s reallocarray lost the contents", A->name);
        q = A->reallocarray(q, 3, 7);
        cr_assert(q && A->usable(q) >= 21 && tt_check(q, 21, 3) == SIZE_MAX);
        A->free(q);
    }
}

/* ==================================================================================== */
/* calloc                                                                                */
/* ==================================================================================== */

static const size_t calloc_sizes[] = {1,     16,    17,     48,        100,      1024,     4095,
                                      4096,  14336, 16384,  20000,     40000,    65536,    65537,
                                      69632, 100000, 262144, MiB + 1, 3 * MiB, 8 * MiB + 100};
#define NCALLOC (sizeof calloc_sizes / sizeof *calloc_sizes)

static void assert_zero(const char *what, const unsigned char *p, size_t n)
{
    size_t nz = tt_first_nonzero(p, n);
    cr_assert(nz == SIZE_MAX, "%s: calloc'd block %p of %zu B has 0x%02x at offset %zu", what, (const void *)p, n,
              p[nz], nz);
}

Test(api, calloc_zeroes_fresh_memory)
{
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        for (size_t i = 0; i < NCALLOC; i++) {
            size_t n = calloc_sizes[i];
            unsigned char *p = A->calloc(n, 1);
            cr_assert(p && aligned(p, 16));
            assert_zero(A->name, p, n);
            A->free(p);
            p = A->calloc(3, n);
            cr_assert(p);
            assert_zero(A->name, p, 3 * n);
            A->free(p);
        }
    }
}

/* Dirty a block, free it, calloc the same size: zeros, many times over (the freed memory
 * comes straight back from the thread cache, the slab or the page heap). */
static void calloc_after_free(const struct api *A, bool purge_between)
{
    for (size_t i = 0; i < NCALLOC; i++) {
        size_t n = calloc_sizes[i];
        int rounds = n <= 65536 ? 200 : n <= MiB + 1 ? 40 : 10;
        if (purge_between)
            rounds = rounds / 4 + 1;
        for (int r = 0; r < rounds; r++) {
            unsigned char *p = A->malloc(n);
            cr_assert(p);
            memset(p, 0xa5, A->usable(p));
            A->free(p);
#ifndef TIDE_TEST_GLIBC
            if (purge_between)
                tide_purge();
#else
            (void)purge_between;
#endif
            p = (r % 2) ? A->calloc(1, n) : A->calloc(n, 1);
            cr_assert(p);
            assert_zero(A->name, p, n);
            memset(p, 0x5a, A->usable(p));
            A->free(p);
        }
        /* a batch: 64 dirty blocks freed, then 64 callocs */
        int batch = n <= 65536 ? 64 : 8;
        void *b[64];
        for (int k = 0; k < batch; k++) {
            b[k] = A->malloc(n);
            memset(b[k], 0xc3, A->usable(b[k]));
        }
        for (int k = 0; k < batch; k++)
            A->free(b[k]);
        for (int k = 0; k < batch; k++) {
            b[k] = A->calloc(n, 1);
            assert_zero(A->name, b[k], n);
        }
        for (int k = 0; k < batch; k++)
            A->free(b[k]);
    }
}

Test(api, calloc_zeroes_reused_memory, .timeout = 120)
{
    for (size_t a = 0; a < NAPIS; a++)
        calloc_after_free(apis[a], false);
}

Test(api, calloc_zeroes_memory_reused_after_purge, .timeout = 120)
{
    calloc_after_free(&api_plain, true);
}

/* The same under each purge policy, with no decay (pages purged as soon as they are
 * free): MADV_FREE'd pages keep their old bytes until the kernel reclaims them, so calloc
 * must not count on them being zero. */
static void calloc_under_policy(const char *policy)
{
#ifdef TIDE_TEST_GLIBC
    (void)policy;
    cr_skip_test("glibc mode");
#else
    cr_assert_eq(tide_conf_set("purge", policy), 0, "tide_conf_set(purge, %s): %s", policy, strerror(errno));
    cr_assert_eq(tide_conf_set("decay_ms", "0"), 0, "tide_conf_set(decay_ms, 0): %s", strerror(errno));
    calloc_after_free(&api_plain, false);
    calloc_after_free(&api_tide, true);
#endif
}

Test(api, calloc_zeroes_with_purge_free, .timeout = 120) { calloc_under_policy("free"); }
Test(api, calloc_zeroes_with_purge_dontneed, .timeout = 120) { calloc_under_policy("dontneed"); }
Test(api, calloc_zeroes_with_purge_none, .timeout = 120) { calloc_under_policy("none"); }

struct dirty_job {
    size_t n;
    int count;
    void **blocks;
};

static void *dirty_and_free(void *arg)
{
    struct dirty_job *j = arg;
    for (int k = 0; k < j->count; k++) {
        memset(j->blocks[k], 0xe7, malloc_usable_size(j->blocks[k]));
        free(j->blocks[k]);
    }
    return NULL;
}

/* Blocks dirtied and freed by another thread, then calloc'd here. */
Test(api, calloc_zeroes_memory_freed_by_another_thread, .timeout = 60)
{
    for (size_t i = 0; i < NCALLOC; i++) {
        size_t n = calloc_sizes[i];
        int count = n <= 65536 ? 256 : 8;
        void **blocks = malloc(sizeof(void *) * (size_t)count);
        for (int k = 0; k < count; k++)
            blocks[k] = malloc(n);
        struct dirty_job j = {n, count, blocks};
        pthread_t t;
        pthread_create(&t, NULL, dirty_and_free, &j);
        pthread_join(t, NULL);
        for (int k = 0; k < count; k++) {
            blocks[k] = calloc(1, n);
            assert_zero("calloc after a remote free", blocks[k], n);
        }
        for (int k = 0; k < count; k++)
            free(blocks[k]);
        free(blocks);
    }
}

/* ==================================================================================== */
/* The rest of the interface                                                             */
/* ==================================================================================== */

Test(api, null_arguments)
{
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        cr_assert_eq(A->usable(NULL), 0, "%s malloc_usable_size(NULL) should be 0", A->name);
        A->free(NULL);
        A->free_sized(NULL, 0);
        A->free_sized(NULL, 100);
        A->free_aligned_sized(NULL, 64, 0);
        int saved = errno = 1234;
        A->free(malloc(100));
        cr_assert_eq(errno, saved, "%s free() changed errno", A->name);
    }
}

Test(api, sized_frees)
{
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        for (size_t i = 0; i < NCALLOC; i++) {
            size_t n = calloc_sizes[i];
            void *p = A->malloc(n);
            A->free_sized(p, n);
            p = A->aligned_alloc(256, n);
            cr_assert(aligned(p, 256));
            A->free_aligned_sized(p, 256, n);
            p = A->aligned_alloc(2 * MiB, n);
            cr_assert(aligned(p, 2 * MiB));
            A->free_aligned_sized(p, 2 * MiB, n);
        }
    }
}

/* C23: free_sized(p, n) is free(p) when p came from malloc, calloc or realloc with n
 * the size asked for, whatever size class the block ended up in: after a realloc that
 * shrank a block in place, for example. */
Test(api, free_sized_with_the_size_asked_for)
{
    static const size_t pairs[][2] = {
        {256, 197},   {256, 200},     {4096, 3500},   {1000, 1010},   {14336, 12000}, {100, 1000},
        {20000, 17000}, {65536, 50000}, {100000, 70000}, {100000, 5000}, {MiB, 100000},  {200000, 300000},
        {3 * MiB, 2 * MiB + 1},
    };
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
            size_t from = pairs[i][0], to = pairs[i][1];
            void *q = A->realloc(A->malloc(from), to);
            cr_assert(q);
            tt_report("api: %s free_sized(realloc(malloc(%zu), %zu), %zu), usable %zu", A->name, from, to, to,
                      A->usable(q));
            A->free_sized(q, to);
            void *c = A->calloc(3, from / 3 + 1);
            A->free_sized(c, 3 * (from / 3 + 1));
        }
    }
}

/* The plain names and the tide_ twins are one allocator. */
Test(api, twins_are_interchangeable)
{
    for (size_t n = 1; n <= 4 * MiB; n = n * 5 + 3) {
        unsigned char *p = tide_malloc(n);
        cr_assert_eq(malloc_usable_size(p), tide_malloc_usable_size(p));
        tt_fill(p, n, n);
        p = realloc(p, 2 * n);
        cr_assert(tt_check(p, n, n) == SIZE_MAX);
        free(p);
        p = malloc(n);
        tt_fill(p, n, n);
        p = tide_realloc(p, n / 2 + 1);
        cr_assert(tt_check(p, n / 2 + 1, n) == SIZE_MAX);
        tide_free(p);
        p = calloc(1, n);
        tide_free_sized(p, n);
        p = tide_memalign(4096, n);
        free(p);
    }
}

Test(api, mallinfo2_counts_live_bytes)
{
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        struct mallinfo2 m0 = A->mallinfo2();
        unsigned char *p = A->malloc(64 * MiB);
        memset(p, 1, 64 * MiB);
        struct mallinfo2 m1 = A->mallinfo2();
        A->free(p);
        struct mallinfo2 m2 = A->mallinfo2();
        size_t l0 = m0.uordblks + m0.hblkhd, l1 = m1.uordblks + m1.hblkhd, l2 = m2.uordblks + m2.hblkhd;
        cr_assert_geq(l1, l0 + 64 * MiB,
                      "%s mallinfo2: uordblks + hblkhd went from %zu to %zu with a 64 MiB block live", A->name, l0, l1);
        cr_assert_geq(l1 - l2, 60 * MiB, "%s mallinfo2: uordblks + hblkhd went from %zu to %zu after freeing 64 MiB",
                      A->name, l1, l2);
    }
}

Test(api, malloc_trim_returns_0_or_1)
{
    for (size_t a = 0; a < NAPIS; a++) {
        const struct api *A = apis[a];
        void *b[64];
        for (int i = 0; i < 64; i++) {
            b[i] = A->malloc(256 * KiB);
            memset(b[i], 1, 256 * KiB);
        }
        for (int i = 0; i < 64; i++)
            A->free(b[i]);
        int r = A->malloc_trim(0);
        cr_assert(r == 0 || r == 1, "%s malloc_trim(0) returned %d", A->name, r);
        r = A->malloc_trim(MiB);
        cr_assert(r == 0 || r == 1, "%s malloc_trim(1 MiB) returned %d", A->name, r);
        /* still a working allocator */
        unsigned char *p = A->calloc(1, MiB);
        assert_zero("calloc after malloc_trim", p, MiB);
        A->free(p);
    }
}

/* malloc_trim and tide_purge return under every purge policy and with huge pages (with
 * thp:on only whole 2 MiB units are purged: small free runs must not be retried forever). */
Test(api, trim_and_purge_return_under_every_setting, .timeout = 30)
{
#ifdef TIDE_TEST_GLIBC
    cr_skip_test("glibc mode");
#else
    static const char *const settings[][2] = {
        {"thp", "off"}, {"purge", "free"}, {"purge", "dontneed"}, {"purge", "none"}, {"thp", "on"},
    };
    for (size_t i = 0; i < sizeof settings / sizeof *settings; i++) {
        cr_assert_eq(tide_conf_set(settings[i][0], settings[i][1]), 0, "tide_conf_set(%s, %s)", settings[i][0],
                     settings[i][1]);
        static const size_t sizes[] = {100, 20000, 65536, 300000, 3 * MiB};
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            unsigned char *p = malloc(sizes[k]);
            memset(p, 1, sizes[k]);
            free(p);
        }
        tt_report("api: %s:%s: tide_purge() ...", settings[i][0], settings[i][1]);
        size_t purged = tide_purge();
        tt_report("api: %s:%s: tide_purge() = %zu, malloc_trim(0) ...", settings[i][0], settings[i][1], purged);
        int r = malloc_trim(0);
        cr_assert(r == 0 || r == 1);
    }
#endif
}

static void call(void *fn) { ((void (*)(void))fn)(); }

/* Runs FN with fd 2 sent to a file; returns what was written there (and to fd 1 in *out). */
static char *capture_fds(void (*fn)(void), char **out)
{
    char *err;
    tt_capture(call, (void *)fn, out, &err);
    return err;
}

static void call_malloc_stats(void) { malloc_stats(); }
static void call_tide_malloc_stats(void) { tide_malloc_stats(); }

Test(api, malloc_stats_prints_on_stderr)
{
    void (*fns[])(void) = {call_malloc_stats, call_tide_malloc_stats};
    for (int i = 0; i < 2; i++) {
        void *p = malloc(1000);
        char *out, *err = capture_fds(fns[i], &out);
        cr_assert(err && out);
        cr_assert(strlen(err) > 0, "%s printed nothing on stderr", i ? "tide_malloc_stats()" : "malloc_stats()");
        cr_assert(strlen(out) == 0, "%s wrote to stdout: %.200s", i ? "tide_malloc_stats()" : "malloc_stats()", out);
        free(err);
        free(out);
        free(p);
    }
}

Test(api, tide_stats_reconcile)
{
    tt_skip_under("tcache:off", "free(64 MiB) starts the purger thread, whose creation glibc allocates with malloc: without thread caches that moves allocated between the snapshots");
#ifdef TIDE_TEST_GLIBC
    cr_skip_test("glibc mode");
#else
    tide_stats_t s0, s1, s2;
    cr_assert_eq(tide_stats_get(&s0, sizeof s0), 0);
    cr_assert_eq(s0.size, sizeof(tide_stats_t), "stats.size is %" PRIu64 ", sizeof(tide_stats_t) is %zu", s0.size,
                 sizeof(tide_stats_t));
    unsigned char *p = malloc(64 * MiB);
    memset(p, 3, 64 * MiB);
    cr_assert_eq(tide_stats_get(&s1, sizeof s1), 0);
    free(p);
    cr_assert_eq(tide_stats_get(&s2, sizeof s2), 0);
    tide_stats_t *ss[] = {&s0, &s1, &s2};
    for (int i = 0; i < 3; i++) {
        tide_stats_t *s = ss[i];
        cr_assert_eq(s->active + s->dirty + s->lazy + s->clean + s->held + s->metadata, s->mapped,
                     "snapshot %d: active %" PRIu64 " + dirty %" PRIu64 " + lazy %" PRIu64 " + clean %" PRIu64
                     " + metadata %" PRIu64 " != mapped %" PRIu64,
                     i, s->active, s->dirty, s->lazy, s->clean, s->metadata, s->mapped);
        cr_assert_leq(s->allocated, s->active, "snapshot %d: allocated %" PRIu64 " > active %" PRIu64, i,
                      s->allocated, s->active);
        cr_assert_geq(s->nranges, 1);
        cr_assert_eq(s->nranges, tide_ranges(NULL, 0), "stats.nranges %" PRIu64 " != tide_ranges() %zu", s->nranges,
                     tide_ranges(NULL, 0));
    }
    cr_assert_geq(s1.allocated, s0.allocated + 64 * MiB, "allocated %" PRIu64 " -> %" PRIu64 " with 64 MiB live",
                  s0.allocated, s1.allocated);
    cr_assert_geq(s1.resident, 64 * MiB, "resident %" PRIu64 " with 64 MiB touched", s1.resident);
    cr_assert_eq(s1.nmalloc_large, s0.nmalloc_large + 1, "nmalloc_large %" PRIu64 " -> %" PRIu64,
                 s0.nmalloc_large, s1.nmalloc_large);
    cr_assert_eq(s2.nfree_large, s1.nfree_large + 1, "nfree_large %" PRIu64 " -> %" PRIu64, s1.nfree_large,
                 s2.nfree_large);
    cr_assert_geq(s1.allocated - s2.allocated, 64 * MiB, "allocated %" PRIu64 " -> %" PRIu64 " after freeing 64 MiB",
                  s1.allocated, s2.allocated);

    /* a smaller stats_size fills only a prefix and must not write past it */
    unsigned char buf[sizeof(tide_stats_t) + 64];
    memset(buf, 0xee, sizeof buf);
    cr_assert_eq(tide_stats_get((tide_stats_t *)buf, 16), 0);
    for (size_t i = 16; i < sizeof buf; i++)
        cr_assert_eq(buf[i], 0xee, "tide_stats_get(out, 16) wrote byte %zu", i);
#endif
}
