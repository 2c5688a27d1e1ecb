/* SPDX-License-Identifier: MIT */
/* mapcount.c - tide in a process that has used (nearly) all of vm.max_map_count.
 *
 * A child process maps single pages with gaps between them (each its own VMA, far from
 * tide's range) until only a few hundred VMAs are left, or none, then uses tide: small and
 * large blocks, growth of the heap, reallocs that would move pages with mremap (each move
 * costs VMAs).  Allocations must stay correct; where the kernel refuses a new VMA, growth
 * fails with ENOMEM and realloc copies instead of moving; nothing crashes; tide_check()
 * passes; and once the pages are unmapped, tide grows again.  Each scenario runs in a child
 * so that the test runner keeps its own VMAs. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"

#define MiB ((size_t)1 << 20)
#define PG 4096

static long read_long(const char *path)
{
    FILE *f = fopen(path, "r");
    long v = -1;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static long count_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    long n = 0;
    int c;
    if (!f)
        return -1;
    while ((c = getc_unlocked(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

/* ---- the child's checks: a failure prints a line and exits non-zero ---------------- */

static int failures;
#define CHECK(cond, ...)                                                 \
    do {                                                                 \
        if (!(cond)) {                                                   \
            fprintf(stderr, "mapcount: FAILED %s: ", #cond);             \
            fprintf(stderr, __VA_ARGS__);                                \
            fprintf(stderr, "\n");                                       \
            failures++;                                                  \
        }                                                                \
    } while (0)

static void heap_ok(const char *when)
{
    char why[256];
    CHECK(tt_heap_sound(why, sizeof why), "%s %s", why, when);
}

static uint64_t pat(const void *key, size_t off) { return ((uintptr_t)key * 0x9E3779B97F4A7C15ULL) ^ (off * 0xc4ceb9fe1a85ec53ULL); }

/* Write (or check) one word in each page of [P, P+N), keyed by KEY. */
static size_t sparse(void *p, size_t n, const void *key, int check)
{
    size_t bad = 0;
    for (size_t o = 0; o + 8 <= n; o += (n > 65536 ? PG : 8)) {
        uint64_t v = pat(key, o), g;
        if (!check) {
            memcpy((char *)p + o, &v, 8);
        } else {
            memcpy(&g, (char *)p + o, 8);
            bad += g != v;
        }
    }
    return bad;
}

/* Map single pages two pages apart until only HEADROOM VMAs are left, or until the kernel
 * refuses (HEADROOM < 0).  Returns the area used (to unmap later). */
static char *area;
static size_t area_len;

static long fill_maps(long headroom)
{
    long max = read_long("/proc/sys/vm/max_map_count"), have = count_maps();
    if (max <= 0 || have < 0)
        return -1;
    long want = headroom >= 0 ? max - headroom - have : max + 16 - have;
    if (want <= 0)
        return 0;
    area_len = (size_t)want * 2 * PG;
    /* Find a free stretch of address space, then give it back and fill it page by page. */
    area = mmap(NULL, area_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (area == MAP_FAILED)
        return -1;
    munmap(area, area_len);
    long made = 0;
    for (long i = 0; i < want; i++) {
        void *p = mmap(area + (size_t)i * 2 * PG, PG, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == MAP_FAILED) {
            if (errno != ENOMEM)
                fprintf(stderr, "mapcount: mmap failed with errno %d\n", errno);
            break;
        }
        made++;
    }
    return made;
}

static void unfill_maps(void)
{
    if (area && area_len)
        munmap(area, area_len);
    area = NULL;
}

typedef struct blk_s {
    char *p;
    size_t n;
    const void *key;
} blk_t;

static blk_t blks[20000];
static size_t nblks;

static void keep(void *p, size_t n)
{
    blks[nblks++] = (blk_t){ p, n, p };
    sparse(p, n, p, 0);
}

static void check_all(const char *when)
{
    size_t bad = 0;
    for (size_t i = 0; i < nblks; i++)
        bad += sparse(blks[i].p, blks[i].n, blks[i].key, 1);
    CHECK(bad == 0, "%zu words changed %s", bad, when);
}

static void free_all(void)
{
    for (size_t i = 0; i < nblks; i++)
        free(blks[i].p);
    nblks = 0;
}

/* Reallocs of large blocks that cannot grow in place (a live block after each): they move
 * pages when the kernel lets them, copy otherwise; the contents must survive either way. */
static void reallocs(int rounds, unsigned long *moves, unsigned long *copies)
{
    tide_stats_t s0 = tt_stats();
    for (int i = 0; i < rounds; i++) {
        size_t n = (size_t)(1 + i % 4) * MiB;
        /* A block with a live neighbour right after it, so that it cannot grow in place
         * (other pairs are kept live as fillers). */
        char *a = malloc(n), *b = malloc(n);
        for (int tries = 0; a && b && b != a + n && tries < 32; tries++) {
            keep(a, n);
            keep(b, n);
            a = malloc(n);
            b = malloc(n);
        }
        CHECK(a && b && b == a + n, "malloc for a blocked realloc");
        if (!a || !b)
            return;
        sparse(a, n, a, 0);
        char *q = realloc(a, 3 * n);
        CHECK(q != NULL, "realloc(%zu -> %zu) failed", n, 3 * n);
        if (q) {
            CHECK(sparse(q, n, a, 1) == 0, "realloc lost the contents");
            blks[nblks++] = (blk_t){ q, n, a };
        }
        keep(b, n);
    }
    tide_stats_t s1 = tt_stats();
    *moves = s1.remap_moves - s0.remap_moves;
    *copies = s1.remap_copies - s0.remap_copies;
}

static int scenario(long headroom)
{
    tide_conf_set("remap", "on");
    tide_conf_set("remap_threshold", "65536");
    tide_conf_set("remap_max", "16");
    /* Room in the range for what follows once no VMA can be had. */
    void *pre = malloc(768 * MiB);
    CHECK(pre != NULL, "pre-growth");
    free(pre);

    long made = fill_maps(headroom), max = read_long("/proc/sys/vm/max_map_count"), now = count_maps();
    fprintf(stderr, "mapcount: mapped %ld single pages: %ld of %ld VMAs in use\n", made, now, max);
    CHECK(made > 1000, "could not use up the VMAs (%ld)", made);
    CHECK(headroom < 0 ? now >= max : now >= max - headroom - 2, "VMAs in use: %ld of %ld", now, max);

    /* Small and large blocks from the space tide has. */
    for (int i = 0; i < 5000; i++) {
        size_t n = 1 + (size_t)(i * 7919) % 4096;
        void *p = malloc(n);
        CHECK(p != NULL, "small malloc(%zu)", n);
        if (p)
            keep(p, n);
    }
    for (int i = 0; i < 16; i++) {
        size_t n = (size_t)(1 + i % 8) * MiB;
        void *p = malloc(n);
        CHECK(p != NULL, "large malloc(%zu)", n);
        if (p)
            keep(p, n);
    }
    heap_ok("after small and large allocations");

    /* Reallocs: with a few hundred VMAs left they move; with none, they copy. */
    unsigned long moves = 0, copies = 0;
    reallocs(40, &moves, &copies);
    fprintf(stderr, "mapcount: 40 blocked reallocs: %lu moved pages, %lu copied; tide's range in %lu VMAs\n", moves,
            copies, (unsigned long)tt_stats().vmas);
    if (headroom >= 64)
        CHECK(moves > 0, "no realloc moved pages with %ld VMAs to spare", headroom);
    if (headroom < 0)
        CHECK(moves == 0 && copies == 40, "at the limit every realloc must copy (moves %lu, copies %lu)", moves, copies);
    heap_ok("after reallocs");
    check_all("after reallocs");

    /* Growth of the heap: 1 GiB more than the range has. */
    tide_stats_t s0 = tt_stats();
    size_t grow = (size_t)s0.mapped + 1024 * MiB;
    errno = 0;
    void *g = malloc(grow);
    int err = errno;
    fprintf(stderr, "mapcount: growing the heap by %zu MiB: %s\n", grow >> 20, g ? "ok" : strerror(err));
    if (g) {
        sparse(g, grow, g, 0);
        CHECK(sparse(g, grow, g, 1) == 0, "grown block");
        free(g);
    } else {
        CHECK(err == ENOMEM, "growth failed with errno %d, not ENOMEM", err);
    }
    if (headroom >= 64)
        CHECK(g != NULL, "growth failed with %ld VMAs to spare", headroom);
    heap_ok("after growth");
    tide_purge();
    heap_ok("after purging");

    /* Freeing everything (moved blocks are healed by mmap, which may fail here). */
    check_all("before freeing");
    free_all();
    heap_ok("after freeing everything");

    /* VMAs back: tide grows again. */
    unfill_maps();
    void *h = malloc(grow);
    CHECK(h != NULL, "no growth after the VMAs were given back");
    if (h) {
        sparse(h, grow, h, 0);
        CHECK(sparse(h, grow, h, 1) == 0, "block after recovery");
        free(h);
    }
    heap_ok("at the end");
    tide_stats_t s = tt_stats();
    fprintf(stderr, "mapcount: tide: %lu moves, %lu copies, %lu heals, %lu VMAs in its range at the end\n",
            (unsigned long)s.remap_moves, (unsigned long)s.remap_copies, (unsigned long)s.remap_heals,
            (unsigned long)s.vmas);
    return failures ? 1 : 0;
}

/* The scenario runs in a freshly exec'd copy of this program (MAPCOUNT_SCENARIO names the
 * headroom), not in a fork child: in a fork child tide never moves pages with mremap, since
 * a heal could not merge back into the VMA inherited from the parent. */
__attribute__((constructor)) static void scenario_entry(void)
{
    const char *h = getenv("MAPCOUNT_SCENARIO");
    if (h)
        _exit(scenario(atol(h)));
}

static void in_child(long headroom)
{
    /* (the configuration matrix, test/support/support.h) */
    tt_skip_under("guard:on", "counts blocks laid side by side and reallocs that move pages; under guard:on "
                              "blocks end at guard pages and are copied, not moved");
    tt_skip_under("thp:on", "counts blocks laid side by side; under thp:on a block of 2 MiB or more is "
                            "whole huge pages");
    /* Each scenario maps some 65,000 VMAs first: a short run keeps the middle one. */
    if (tt_short() && headroom != 10)
        cr_skip_test("a short run (TIDE_TEST_SHORT): the scenario with ten VMAs left stands for the three");
    char h[64];
    snprintf(h, sizeof h, "MAPCOUNT_SCENARIO=%ld", headroom);
    const char *argv[] = {"mapcount", NULL}, *env[] = {h, NULL};
    struct tt_child_spec spec = {.path = "/proc/self/exe", .argv = argv, .env = env, .keep_output = true};
    struct tt_child c;
    cr_assert(tt_child_run(&spec, &c) == 0);
    int st = c.status;
    cr_assert(WIFEXITED(st), "the child died of signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    cr_assert(WEXITSTATUS(st) == 0, "the child found failures (see its lines above)");
}

Test(mapcount, three_hundred_vmas_left, .timeout = 300) { in_child(300); }
Test(mapcount, ten_vmas_left, .timeout = 300) { in_child(10); }
Test(mapcount, no_vma_left, .timeout = 300) { in_child(-1); }
