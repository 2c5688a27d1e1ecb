/* SPDX-License-Identifier: MIT */
/* misuse_helper.c - commits one kind of misuse, chosen by name, for test/api/misuse_report.
 *
 *   misuse_helper CASE
 *
 * Before the misuse it prints on stdout, one per line, "ptr 0x..." for each address the
 * expected report may name (the parent builds the exact line from them), then "go".  If
 * tide lets the misuse pass, the helper prints "survived" and exits 0; the parent checks
 * for a SIGABRT and the exact line on stderr. */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tide.h"

static void say(const void *p) { printf("ptr %p\n", p); }

static void go(void)
{
    printf("go\n");
    fflush(stdout);
}

/* A pointer the compiler cannot see through. */
static void *volatile sink;
static void *hide(void *p)
{
    sink = p;
    return sink;
}

/* After a double free with other frees between: tide finds it where the block is taken
 * next, no later than the malloc that would hand it out again (free loads nothing from
 * the block).  Allocate blocks of SIZE until P comes back twice (that is the bug), then
 * give every cached block back (malloc_trim: a copy still listed is found there). */
static void malloc_until_twice(void *p, size_t size)
{
    unsigned seen = 0;
    for (unsigned i = 0; i < 100000 && seen < 2; i++)
        seen += tide_malloc(size) == p;
    tide_malloc_trim(0);
}

static void *second_thread_free(void *p)
{
    tide_free(p);
    tide_malloc_trim(0); /* this thread's cache goes back to the slab */
    return NULL;
}

static int run(const char *c)
{
    if (!strcmp(c, "double_free_small")) {
        /* Freed twice while still in the thread cache: caught at the second free. */
        void *p = tide_malloc(48);
        say(p);
        go();
        tide_free(p);
        tide_free(hide(p));
    } else if (!strcmp(c, "double_free_small_flushed")) {
        /* Freed, flushed back to its slab, freed again: the slab bitmap says so. */
        void *keep = tide_malloc(48), *p = tide_malloc(48);
        say(p);
        go();
        tide_free(p);
        tide_malloc_trim(0);
        tide_free(hide(p));
        malloc_until_twice(p, 48);
        tide_free(keep);
    } else if (!strcmp(c, "double_free_small_nocache")) {
        /* With tcache:off the first free returns the region to its slab at once. */
        void *keep = tide_malloc(100), *p = tide_malloc(100);
        say(p);
        go();
        tide_free(p);
        tide_free(hide(p));
        tide_free(keep);
    } else if (!strcmp(c, "double_free_cached_large")) {
        /* 20 KiB: a cached large class, kept in the thread cache when freed. */
        void *p = tide_malloc(20000);
        say(p);
        go();
        tide_free(p);
        tide_free(hide(p));
    } else if (!strcmp(c, "double_free_large")) {
        /* 1 MiB between two live blocks: its free run cannot merge, its start is known. */
        void *a = tide_malloc(1 << 20), *p = tide_malloc(1 << 20), *b = tide_malloc(1 << 20);
        say(p);
        go();
        tide_free(p);
        tide_free(hide(p));
        tide_free(a);
        tide_free(b);
    } else if (!strcmp(c, "double_free_other_thread")) {
        /* Freed by another thread (which flushes its cache), then here. */
        void *keep = tide_malloc(64), *p = tide_malloc(64);
        pthread_t t;
        say(p);
        go();
        pthread_create(&t, NULL, second_thread_free, p);
        pthread_join(t, NULL);
        tide_free(hide(p));
        malloc_until_twice(p, 64);
        tide_free(keep);
    } else if (!strcmp(c, "invalid_free_stack")) {
        char buf[64];
        void *p = hide(buf + 16);
        say(p);
        go();
        tide_free(p);
    } else if (!strcmp(c, "invalid_free_mmap")) {
        void *p = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        say(p);
        go();
        tide_free(p);
    } else if (!strcmp(c, "invalid_free_wild")) {
        void *p = hide((void *)0x1000);
        say(p);
        go();
        tide_free(p);
    } else if (!strcmp(c, "invalid_free_page_map")) {
        /* The lowest byte of tide's range: its page map, never a block. */
        uintptr_t r[4][2];
        tide_ranges(r, 4);
        void *p = (void *)r[0][0];
        say(p);
        go();
        tide_free(p);
    } else if (!strcmp(c, "invalid_free_guard")) {
        /* The first heap page of the first range: the guard over the page map below it,
         * never a block.  The heap starts on a 2 MiB boundary just above the page map. */
        uintptr_t r[4][2];
        tide_ranges(r, 4);
        uintptr_t base = (r[0][0] + ((uintptr_t)1 << 21) - 1) & ~(((uintptr_t)1 << 21) - 1);
        if (base >= r[0][1])
            return 77;
        void *p = (void *)base;
        say(p);
        go();
        tide_free(p);
    } else if (!strcmp(c, "interior_small_8")) {
        char *p = tide_malloc(64);
        say(p + 8);
        go();
        tide_free(hide(p + 8));
    } else if (!strcmp(c, "interior_small_1")) {
        char *p = tide_malloc(100);
        say(p + 1);
        go();
        tide_free(hide(p + 1));
    } else if (!strcmp(c, "interior_small_16")) {
        /* 16-aligned, inside a 64-byte object: caught at once by the free (the slab page's
         * index in the page map), at the latest when the cache goes back to the slab. */
        char *p = tide_malloc(64);
        say(p + 16);
        go();
        tide_free(hide(p + 16));
        tide_malloc_trim(0);
    } else if (!strcmp(c, "interior_large_4096")) {
        char *p = tide_malloc(1 << 20);
        say(p + 4096);
        go();
        tide_free(hide(p + 4096));
    } else if (!strcmp(c, "interior_large_16")) {
        char *p = tide_malloc(1 << 20);
        say(p + 16);
        go();
        tide_free(hide(p + 16));
    } else if (!strcmp(c, "interior_large_last_page")) {
        char *p = tide_malloc(1 << 20);
        say(p + (1 << 20) - 4096);
        go();
        tide_free(hide(p + (1 << 20) - 4096));
    } else if (!strcmp(c, "interior_cached_large_4096")) {
        char *p = tide_malloc(32768);
        say(p + 4096);
        go();
        tide_free(hide(p + 4096));
    } else if (!strcmp(c, "realloc_freed_small")) {
        /* Use after free: realloc of a block that sits in the thread cache. */
        void *p = tide_malloc(100);
        say(p);
        go();
        tide_free(p);
        sink = tide_realloc(hide(p), 100);
    } else if (!strcmp(c, "realloc_freed_small_grow")) {
        void *p = tide_malloc(100);
        say(p);
        go();
        tide_free(p);
        sink = tide_realloc(hide(p), 1000);
    } else if (!strcmp(c, "realloc_freed_cached_large")) {
        void *p = tide_malloc(20000);
        say(p);
        go();
        tide_free(p);
        sink = tide_realloc(hide(p), 60000);
    } else if (!strcmp(c, "realloc_freed_large")) {
        void *a = tide_malloc(1 << 20), *p = tide_malloc(1 << 20), *b = tide_malloc(1 << 20);
        say(p);
        go();
        tide_free(p);
        sink = tide_realloc(hide(p), 2 << 20);
        tide_free(a);
        tide_free(b);
    } else if (!strcmp(c, "realloc_invalid_stack")) {
        char buf[64];
        void *p = hide(buf);
        say(p);
        go();
        sink = tide_realloc(p, 100);
    } else if (!strcmp(c, "usable_size_invalid")) {
        void *p = hide((void *)0x7000);
        say(p);
        go();
        printf("%zu\n", tide_malloc_usable_size(p));
    } else if (!strcmp(c, "free_sized_wrong_small")) {
        void *p = tide_malloc(100);
        say(p);
        go();
        tide_free_sized(p, 1000);
    } else if (!strcmp(c, "free_sized_wrong_large")) {
        void *p = tide_malloc(1 << 20);
        say(p);
        go();
        tide_free_sized(p, 2 << 20);
    } else if (!strcmp(c, "free_sized_too_small")) {
        /* 1000 bytes asked, 10 given: far below anything that rounds to the block. */
        void *p = tide_malloc(1000);
        say(p);
        go();
        tide_free_sized(p, 10);
    } else if (!strcmp(c, "free_aligned_sized_wrong_size")) {
        void *p = tide_aligned_alloc(256, 1000);
        say(p);
        go();
        tide_free_aligned_sized(p, 256, 5000);
    } else if (!strcmp(c, "free_aligned_sized_wrong_alignment")) {
        /* 8 KiB with 4 KiB alignment: a block that is not 64 KiB-aligned, freed as if it
         * had been asked with 64 KiB alignment (same usable size, wrong alignment). */
        void *p = tide_aligned_alloc(4096, 8192);
        while (((uintptr_t)p & 0xffff) == 0)
            p = tide_aligned_alloc(4096, 8192);
        say(p);
        go();
        tide_free_aligned_sized(p, 65536, 8192);
    } else if (!strcmp(c, "free_sized_after_shrink")) {
        /* Not a misuse: C23 free_sized with the size given to the realloc that returned the
         * block (tide keeps a small block in place when it shrinks by less than half). */
        void *p = tide_malloc(100);
        void *q = tide_realloc(p, 60);
        say(q);
        go();
        tide_free_sized(q, 60);
    } else if (!strcmp(c, "free_sized_thp")) {
        /* Not a misuse: with thp:on a 3 MiB request is rounded to 4 MiB. */
        void *p = tide_malloc(3 << 20);
        say(p);
        go();
        tide_free_sized(p, 3 << 20);
        void *q = tide_aligned_alloc(4096, 3 << 20);
        tide_free_aligned_sized(q, 4096, 3 << 20);
    } else if (!strcmp(c, "bad_alignments")) {
        /* Not a misuse that aborts: bad alignments are errors the caller sees. */
        void *p = (void *)1;
        int bad = 0;
        static const size_t aligns[] = { 0, 1, 2, 4, 12, 24, 48, 100, 4097, (size_t)1 << 63 | 8 };
        for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
            if (tide_posix_memalign(&p, aligns[i], 64) != EINVAL || p != (void *)1) {
                printf("posix_memalign(%zu): not EINVAL\n", aligns[i]);
                bad++;
            }
        }
        errno = 0;
        if (tide_memalign(((size_t)1 << 63) + 1, 64) != NULL || errno != EINVAL) {
            printf("memalign(2^63 + 1): not NULL/EINVAL\n");
            bad++;
        }
        errno = 0;
        if (tide_aligned_alloc(((size_t)1 << 63) + 1, 64) != NULL || errno != EINVAL) {
            printf("aligned_alloc(2^63 + 1): not NULL/EINVAL\n");
            bad++;
        }
        /* glibc rounds a non-power-of-two alignment up. */
        void *q = tide_memalign(24, 100), *r = tide_aligned_alloc(48, 100);
        if (!q || ((uintptr_t)q & 31) || !r || ((uintptr_t)r & 63)) {
            printf("memalign(24)/aligned_alloc(48) not rounded up to 32/64\n");
            bad++;
        }
        tide_free(q);
        tide_free(r);
        go();
        printf("survived\n");
        return bad ? 1 : 0;
    } else {
        fprintf(stderr, "misuse_helper: unknown case %s\n", c);
        return 2;
    }
    printf("survived\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: misuse_helper CASE\n");
        return 2;
    }
    /* On one CPU: a thread's refills and flushes meet the arena of the CPU it runs on, and
     * the cases found at a refill need the block's own arena. */
    int cpu = sched_getcpu();
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        sched_setaffinity(0, sizeof set, &set);
    }
    return run(argv[1]);
}
