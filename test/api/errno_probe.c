/* SPDX-License-Identifier: MIT */
/* errno_probe.c - what every malloc-family entry point returns and leaves in errno.
 *
 * Not linked with libtide: test/api/compat runs it once as it is (glibc's malloc) and once
 * with libtide preloaded, and the two outputs must be identical.  Each line is one call:
 * its result (NULL or a pointer, a return value where glibc's is defined) and errno,
 * which is set to a sentinel before the call ("kept" when the call left it alone).
 *
 * Sizes are ones no allocator can serve (SIZE_MAX, above PTRDIFF_MAX, overflowing
 * products, alignments no address space has room for) or small ones, and absurd but
 * representable ones (malloc(1 << 45)): what glibc does with those depends on the
 * kernel's overcommit policy and RAM, and tide puts them to the same policy, so the two
 * runs on one machine agree whatever the policy. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* mallinfo */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SENTINEL 4242 /* no errno value */

static int last_errno;

static void put(const char *what, const char *result)
{
    if (last_errno == SENTINEL)
        printf("%-58s %-10s errno kept\n", what, result);
    else
        printf("%-58s %-10s errno %s\n", what, result, strerrorname_np(last_errno) ? strerrorname_np(last_errno) : "?");
}

static const char *kind(const void *p) { return p ? "pointer" : "NULL"; }

/* CALL with errno at the sentinel; E is errno right after it. */
#define CALL(expr) (errno = SENTINEL, __extension__({ __typeof__(expr) r_ = (expr); last_errno = errno; r_; }))

static char desc[160];

#define PTR(fmtargs, expr)                                                                                   \
    do {                                                                                                     \
        snprintf fmtargs;                                                                                    \
        void *p_ = CALL(expr);                                                                               \
        put(desc, kind(p_));                                                                                 \
        free(p_);                                                                                            \
    } while (0)

static const size_t huge[] = {
    SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 15, SIZE_MAX - 4095, SIZE_MAX - 4096, SIZE_MAX - 2 * 1024 * 1024,
    (size_t)PTRDIFF_MAX + 1, (size_t)PTRDIFF_MAX, (size_t)PTRDIFF_MAX - 4095,
};
#define NHUGE (sizeof huge / sizeof *huge)

static const size_t pairs[][2] = {
    {SIZE_MAX, 2}, {2, SIZE_MAX}, {(size_t)1 << 32, (size_t)1 << 32}, {(size_t)1 << 63, 2},
    {3, SIZE_MAX / 3 + 1}, {SIZE_MAX, SIZE_MAX}, {(size_t)PTRDIFF_MAX / 2 + 1, 2}, {1, SIZE_MAX},
    {0, SIZE_MAX}, {SIZE_MAX, 0}, {0, 0}, {1, 0}, {10, 10},
};
#define NPAIRS (sizeof pairs / sizeof *pairs)

/* Alignments: good ones, non-powers of two, too small for posix_memalign, too large
 * for any address space. */
static const size_t aligns[] = {
    0, 1, 2, 3, 4, 8, 16, 24, 48, 64, 100, 4096, 4097, 2 * 1024 * 1024, (size_t)1 << 30, (size_t)1 << 62,
    (size_t)1 << 63, ((size_t)1 << 63) + 8, SIZE_MAX - 7, SIZE_MAX,
};
#define NALIGNS (sizeof aligns / sizeof *aligns)

static const size_t align_sizes[] = {0, 1, 100, 5000, SIZE_MAX, SIZE_MAX - 4095, (size_t)PTRDIFF_MAX + 1};
#define NALIGN_SIZES (sizeof align_sizes / sizeof *align_sizes)

int main(void)
{
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    printf("allocator: %s\n", dlsym(RTLD_DEFAULT, "tide_malloc") ? "tide" : "glibc");

    PTR((desc, sizeof desc, "malloc(0)"), malloc(0));
    PTR((desc, sizeof desc, "malloc(1)"), malloc(1));
    PTR((desc, sizeof desc, "malloc(100000)"), malloc(100000));
    for (size_t i = 0; i < NHUGE; i++) {
        PTR((desc, sizeof desc, "malloc(%#zx)", huge[i]), malloc(huge[i]));
        PTR((desc, sizeof desc, "realloc(NULL, %#zx)", huge[i]), realloc(NULL, huge[i]));
        PTR((desc, sizeof desc, "valloc(%#zx)", huge[i]), valloc(huge[i]));
        PTR((desc, sizeof desc, "pvalloc(%#zx)", huge[i]), pvalloc(huge[i]));
    }
    PTR((desc, sizeof desc, "valloc(0)"), valloc(0));
    PTR((desc, sizeof desc, "pvalloc(0)"), pvalloc(0));
    PTR((desc, sizeof desc, "valloc(5000)"), valloc(5000));
    PTR((desc, sizeof desc, "pvalloc(5000)"), pvalloc(5000));

    for (size_t i = 0; i < NPAIRS; i++) {
        size_t x = pairs[i][0], y = pairs[i][1];
        PTR((desc, sizeof desc, "calloc(%#zx, %#zx)", x, y), calloc(x, y));
        PTR((desc, sizeof desc, "reallocarray(NULL, %#zx, %#zx)", x, y), reallocarray(NULL, x, y));
    }

    /* Failing resizes of a live block: NULL, and the block stays as it was. */
    for (int big = 0; big < 2; big++) {
        size_t n = big ? 200000 : 100;
        char *keep = malloc(n);
        memset(keep, 0x5c, n);
        for (size_t i = 0; i < NHUGE; i++) {
            snprintf(desc, sizeof desc, "realloc(p of %zu, %#zx)", n, huge[i]);
            void *q = CALL(realloc(keep, huge[i]));
            put(desc, kind(q));
        }
        for (size_t i = 0; i < NPAIRS; i++) {
            size_t x = pairs[i][0], y = pairs[i][1];
            if (!x || !y || (x == 10 && y == 10))
                continue; /* succeeds or frees KEEP: below */
            snprintf(desc, sizeof desc, "reallocarray(p of %zu, %#zx, %#zx)", n, x, y);
            void *q = CALL(reallocarray(keep, x, y));
            put(desc, kind(q));
        }
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += keep[i] != 0x5c;
        printf("block of %zu after the failed resizes: %s\n", n, bad ? "CHANGED" : "intact");
        /* Successful ones. */
        snprintf(desc, sizeof desc, "realloc(p of %zu, %zu)", n, 2 * n);
        keep = CALL(realloc(keep, 2 * n));
        put(desc, kind(keep));
        snprintf(desc, sizeof desc, "reallocarray(p of %zu, 3, %zu)", 2 * n, n);
        keep = CALL(reallocarray(keep, 3, n));
        put(desc, kind(keep));
        snprintf(desc, sizeof desc, "realloc(p, 0)");
        void *z = CALL(realloc(keep, 0));
        put(desc, kind(z));
        free(z);
    }
    PTR((desc, sizeof desc, "realloc(NULL, 0)"), realloc(NULL, 0));
    void *r0 = malloc(10);
    PTR((desc, sizeof desc, "reallocarray(p, 0, 7)"), reallocarray(r0, 0, 7));

    for (size_t i = 0; i < NALIGNS; i++) {
        for (size_t j = 0; j < NALIGN_SIZES; j++) {
            size_t al = aligns[i], n = align_sizes[j];
            PTR((desc, sizeof desc, "aligned_alloc(%#zx, %#zx)", al, n), aligned_alloc(al, n));
            PTR((desc, sizeof desc, "memalign(%#zx, %#zx)", al, n), memalign(al, n));
            void *const untouched = (void *)0x5a5a5a50;
            void *p = untouched;
            int r = CALL(posix_memalign(&p, al, n));
            char res[64];
            snprintf(res, sizeof res, "%s%s", r == 0 ? "0" : strerrorname_np(r),
                     r == 0 ? "" : p == untouched ? ",kept" : ",CHANGED");
            snprintf(desc, sizeof desc, "posix_memalign(&p, %#zx, %#zx)", al, n);
            put(desc, res);
            if (r == 0)
                free(p);
        }
    }

    /* Absurd but representable: the kernel's overcommit policy decides, for both.
     * (Where it grants them, calloc comes first: zeroing a reused block of 1 TiB would
     * bring the OOM killer.) */
    static const size_t absurd[] = {(size_t)1 << 40, (size_t)1 << 45};
    for (size_t i = 0; i < sizeof absurd / sizeof *absurd; i++) {
        size_t n = absurd[i];
        PTR((desc, sizeof desc, "calloc(1, %#zx)", n), calloc(1, n));
        PTR((desc, sizeof desc, "malloc(%#zx)", n), malloc(n));
        PTR((desc, sizeof desc, "realloc(NULL, %#zx)", n), realloc(NULL, n));
        PTR((desc, sizeof desc, "valloc(%#zx)", n), valloc(n));
        PTR((desc, sizeof desc, "aligned_alloc(%#zx, 16)", n / 2), aligned_alloc(n / 2, 16));
        PTR((desc, sizeof desc, "memalign(%#zx, 4096)", n / 2), memalign(n / 2, 4096));
        void *p = NULL;
        int r = CALL(posix_memalign(&p, n / 2, 16));
        snprintf(desc, sizeof desc, "posix_memalign(&p, %#zx, 16)", n / 2);
        put(desc, r == 0 ? "0" : strerrorname_np(r));
        if (r == 0)
            free(p);
        void *keep = malloc(200000);
        snprintf(desc, sizeof desc, "realloc(p of 200000, %#zx)", n);
        void *q = CALL(realloc(keep, n));
        put(desc, kind(q));
        free(q ? q : keep);
    }

    /* Calls that cannot fail. */
    size_t u = CALL(malloc_usable_size(NULL));
    snprintf(desc, sizeof desc, "malloc_usable_size(NULL)");
    put(desc, u ? "nonzero" : "0");
    void *p = malloc(100);
    u = CALL(malloc_usable_size(p));
    snprintf(desc, sizeof desc, "malloc_usable_size(p of 100)");
    put(desc, u >= 100 ? ">= 100" : "< 100");
    CALL((free(p), 0));
    put("free(p)", "-");
    CALL((free(NULL), 0));
    put("free(NULL)", "-");
    p = malloc(300000);
    CALL((free(p), 0));
    put("free(p of 300000)", "-");
    int t = CALL(malloc_trim(0));
    (void)t; /* 0 or 1 by what each allocator had to give back */
    put("malloc_trim(0)", "-");
    struct mallinfo2 mi = CALL(mallinfo2());
    (void)mi;
    put("mallinfo2()", "-");
    struct mallinfo m1 = CALL(mallinfo());
    (void)m1;
    put("mallinfo()", "-");
    fflush(stdout);
    CALL((malloc_stats(), 0));
    put("malloc_stats()", "-");
    return fflush(stdout) != 0;
}
