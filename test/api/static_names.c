/* SPDX-License-Identifier: MIT */
/* static_names.c - a program linked with libtide.a that has names of its own which tide
 * also uses inside (issue 14).
 *
 * It defines `conf`, `region`, `pageheap`, `arenas`, `rb_erase`, `rb_insert_color`,
 * `heap_check`, `os_init` and `lock_acquire_slow` with other types and behaviour, as a
 * program with its own configuration or a Linux-style rbtree would.  Linked statically
 * against a libtide.a that exported its internals, that fails ("multiple definition")
 * or, worse, one side silently uses the other's object.  Here both must work: the
 * program's names keep their values and behaviour, and tide serves malloc/free of many
 * sizes (tide_stats_get and tide_ranges show it), from several threads (TLS), with its
 * constructor and destructor run (.init_array/.fini_array of the static link).
 *
 * Exit status 0 = pass; every failure is one line on stderr. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tide.h"

#include "child.h"

/* ---- the program's own names, all different from tide's -------------------------------- */

struct rb_node {
    struct rb_node *left, *right;
    int colour;
};
struct rb_root {
    struct rb_node *node;
    long inserts, erases;
};

int conf = 1234;                                 /* tide: conf_t conf */
char region[] = "the program's own region";      /* tide: region_t region */
double pageheap[4] = { 1.5, 2.5, 3.5, 4.5 };     /* tide: pageheap_t pageheap */
const char *arenas[] = { "north", "south", 0 };  /* tide: arena_t **arenas */
static long own_calls;                           /* calls of the functions below */

/* tide: void rb_insert_color(rb_node_t *, rb_root_t *) and rb_erase(...) */
void rb_insert_color(struct rb_node *n, struct rb_root *r)
{
    n->colour = 7;
    r->node = n;
    r->inserts++;
    own_calls++;
}
void rb_erase(struct rb_node *n, struct rb_root *r)
{
    n->colour = -7;
    r->node = 0;
    r->erases++;
    own_calls++;
}
/* tide: int heap_check(void), 0 for a consistent heap */
int heap_check(void) { own_calls++; return 42; }
/* tide: void os_init(void) */
void os_init(void) { own_calls++; }
/* tide: void lock_acquire_slow(lock_t *) */
long lock_acquire_slow(long x) { own_calls++; return x * 3; }

/* ---- checks ---------------------------------------------------------------------------- */

static int failures;
#define FAIL(...) (failures++, fprintf(stderr, "static_names: FAIL: " __VA_ARGS__), fputc('\n', stderr))

/* /proc/self/maps read without allocating (before main, tide may not be up). */
static char maps_ctor[1 << 16], maps_main[1 << 16];

static void read_maps(char *buf, size_t cap)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    size_t n = 0;
    if (fd >= 0) {
        ssize_t r;
        while (n + 1 < cap && (r = read(fd, buf + n, cap - 1 - n)) > 0)
            n += (size_t)r;
        close(fd);
    }
    buf[n] = 0;
}

/* Whether a mapping in the text of /proc/self/maps contains address a. */
static int maps_has(const char *maps, uintptr_t a)
{
    for (const char *p = maps; *p;) {
        char *q;
        uintptr_t lo = strtoull(p, &q, 16), hi = *q == '-' ? strtoull(q + 1, 0, 16) : 0;
        if (lo <= a && a < hi)
            return 1;
        const char *nl = strchr(p, '\n');
        if (!nl)
            break;
        p = nl + 1;
    }
    return 0;
}

/* Linked before libtide, so this runs before tide's constructor. */
__attribute__((constructor)) static void before_tide(void) { read_maps(maps_ctor, sizeof maps_ctor); }

static int in_tide(const void *p)
{
    uintptr_t r[32][2];
    size_t n = tide_ranges(r, 32);
    for (size_t i = 0; i < n && i < 32; i++)
        if ((uintptr_t)p >= r[i][0] && (uintptr_t)p < r[i][1])
            return 1;
    return 0;
}

static unsigned char pattern(size_t i, unsigned seed) { return (unsigned char)(seed * 31 + i); }

/* Writes one byte in each 61 and the last one. */
static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i += 61)
        p[i] = pattern(i, seed);
    if (n)
        p[n - 1] = pattern(n - 1, seed);
}

static int filled(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i += 61)
        if (p[i] != pattern(i, seed))
            return 0;
    return !n || p[n - 1] == pattern(n - 1, seed);
}

#define NBLOCKS 320

/* 0 .. 4335 bytes in steps of 17 (every small class), then 4 KiB .. 1 MiB (the large
 * classes and page-rounded blocks): about 15 MB for all NBLOCKS. */
static size_t size_of(int i)
{
    if (i < 256)
        return (size_t)i * 17;
    return ((size_t)4096 << ((i - 256) % 9)) + (size_t)(i % 7) * 4093;
}

/* Allocates, checks, reallocates and frees the first nblocks sizes; returns the number
 * of bad blocks. */
static int churn(unsigned seed, int nblocks)
{
    static __thread unsigned char *blocks[NBLOCKS];
    int bad = 0;
    for (int i = 0; i < nblocks; i++) {
        size_t n = size_of(i);
        blocks[i] = malloc(n);
        if (!blocks[i] || !in_tide(blocks[i]) || malloc_usable_size(blocks[i]) < n)
            bad++;
        else
            fill(blocks[i], n, seed + (unsigned)i);
    }
    for (int i = 0; i < nblocks; i++)
        if (blocks[i] && !filled(blocks[i], size_of(i), seed + (unsigned)i))
            bad++;
    for (int i = 0; i < nblocks; i += 2)
        free(blocks[i]);
    for (int i = 1; i < nblocks; i += 2) {
        unsigned char *p = realloc(blocks[i], size_of(i) * 2 + 1);
        if (!p || !in_tide(p) || !filled(p, size_of(i), seed + (unsigned)i))
            bad++;
        free(p);
    }
    return bad;
}

static void *thread_main(void *arg)
{
    intptr_t bad = 0;
    for (unsigned round = 0; round < 10; round++)
        bad += churn((unsigned)(uintptr_t)arg * 1000 + round, 256 + 18);
    return (void *)bad;
}

/* tide's destructor prints its statistics at exit when stats is on: run it in a child. */
static int exit_with_stats_on(void *unused)
{
    (void)unused;
    if (tide_conf_set("stats", "on") != 0)
        _exit(3);
    exit(0);
}

static void check_destructor(void)
{
    struct tt_child_spec spec = {.fn = exit_with_stats_on};
    struct tt_child c;
    if (tt_child_run(&spec, &c) != 0) {
        FAIL("fork: %s", strerror(errno));
        return;
    }
    if (!tt_child_exited(&c, 0))
        FAIL("the child that exits with stats on ended with status %#x", c.status);
    else if (!strstr(c.err, "tide statistics"))
        FAIL("tide's destructor did not run at exit (no statistics on stderr; got \"%.200s\")", c.err);
    tt_child_free(&c);
}

int main(void)
{
    read_maps(maps_main, sizeof maps_main);

    /* tide's constructor ran between ours and main: its range is in the second snapshot. */
    uintptr_t r[32][2];
    if (tide_ranges(r, 32) < 1)
        FAIL("tide_ranges: tide has no range");
    else if (maps_has(maps_ctor, r[0][0]))
        printf("static_names: note: tide was up before this program's constructor ran; "
               "its own constructor is not observed\n");
    else if (!maps_has(maps_main, r[0][0]))
        FAIL("tide's constructor did not run: its range was not mapped when main started");

    /* The program's data is its own, untouched by tide starting up. */
    if (conf != 1234)
        FAIL("conf is %d, not 1234", conf);
    if (strcmp(region, "the program's own region") != 0)
        FAIL("region was overwritten");
    if (pageheap[0] != 1.5 || pageheap[3] != 4.5)
        FAIL("pageheap was overwritten");
    if (strcmp(arenas[0], "north") != 0 || strcmp(arenas[1], "south") != 0 || arenas[2])
        FAIL("arenas was overwritten");

    tide_stats_t before, during, after;
    if (tide_stats_get(&before, sizeof before) != 0)
        FAIL("tide_stats_get: %s", strerror(errno));

    /* tide serves the malloc family: sizes 0 .. 4 KiB, large classes, big blocks. */
    void *held[NBLOCKS];
    size_t held_bytes = 0;
    for (int i = 0; i < NBLOCKS; i++) {
        held[i] = malloc(size_of(i));
        if (!held[i] || !in_tide(held[i]))
            FAIL("malloc(%zu) = %p is not tide's", size_of(i), held[i]);
        else
            memset(held[i], 0xa5, size_of(i));
        held_bytes += size_of(i);
    }
    void *c = calloc(1000, 24), *a = 0;
    if (!c || !in_tide(c) || ((unsigned char *)c)[23999] != 0)
        FAIL("calloc(1000, 24) = %p", c);
    if (posix_memalign(&a, 4096, 10000) != 0 || ((uintptr_t)a & 4095) || !in_tide(a))
        FAIL("posix_memalign(4096, 10000) = %p", a);
    tide_stats_get(&during, sizeof during);
    if (during.allocated < before.allocated + held_bytes / 2)
        FAIL("tide_stats_get: allocated %llu -> %llu while %zu bytes are held", (unsigned long long)before.allocated,
             (unsigned long long)during.allocated, held_bytes);
    if (during.nmalloc_large <= before.nmalloc_large)
        FAIL("tide_stats_get: no large allocation counted (%llu -> %llu)", (unsigned long long)before.nmalloc_large,
             (unsigned long long)during.nmalloc_large);
    for (int i = 0; i < NBLOCKS; i++)
        free(held[i]);
    free(c);
    free(a);

    int bad = churn(1, NBLOCKS);
    if (bad)
        FAIL("%d bad blocks in the main thread", bad);

    /* Several threads: the thread caches are TLS of the static link. */
    pthread_t t[4];
    for (intptr_t i = 0; i < 4; i++)
        if (pthread_create(&t[i], 0, thread_main, (void *)(i + 2)) != 0)
            FAIL("pthread_create");
    for (int i = 0; i < 4; i++) {
        void *res = 0;
        pthread_join(t[i], &res);
        if (res)
            FAIL("%ld bad blocks in thread %d", (long)(intptr_t)res, i);
    }
    tide_stats_get(&after, sizeof after);
    if (after.nfree_large <= before.nfree_large)
        FAIL("tide_stats_get: no large free counted");

    /* tide's heap check is tide's, not the program's heap_check (which says 42). */
    long calls = own_calls;
    if (tide_check() != 0)
        FAIL("tide_check() != 0");
    if (own_calls != calls)
        FAIL("tide called the program's functions (%ld calls)", own_calls - calls);

    /* The program's functions are its own. */
    struct rb_node node = { 0, 0, 0 };
    struct rb_root root = { 0, 0, 0 };
    rb_insert_color(&node, &root);
    if (node.colour != 7 || root.node != &node || root.inserts != 1)
        FAIL("the program's rb_insert_color did not run");
    rb_erase(&node, &root);
    if (node.colour != -7 || root.node || root.erases != 1)
        FAIL("the program's rb_erase did not run");
    if (heap_check() != 42)
        FAIL("the program's heap_check did not run");
    if (lock_acquire_slow(5) != 15)
        FAIL("the program's lock_acquire_slow did not run");
    os_init();
    if (own_calls != calls + 5)
        FAIL("the program's functions ran %ld times, not 5", own_calls - calls);
    if (conf != 1234 || strcmp(region, "the program's own region") != 0)
        FAIL("the program's data changed while tide worked");

    check_destructor();

    if (failures)
        return 1;
    printf("static_names: ok: the program's names and tide's allocator both work\n");
    return 0;
}
