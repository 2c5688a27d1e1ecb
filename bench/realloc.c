/* SPDX-License-Identifier: MIT */
/*
 * realloc.c - growing large blocks with realloc: what an allocator that moves pages
 * (glibc's mremap, tide's mremap into its own range) saves over one that copies bytes.
 *
 *   --mode=double  one block, 1 MiB doubled up to --max (default 1 GiB)
 *   --mode=step    one block, 1 MiB grown --step bytes at a time (default 64 KiB) to --max
 *   --mode=pair    blocks A and B, allocated back to back, grown alternately by --step up
 *                  to --max each (default 256 MiB), so that each growth finds the other
 *                  block in its way: the move path, and its copy fallback once tide's
 *                  budget of moved blocks is spent
 *
 * Every page a growth adds gets one byte written (a per-page marker), and the first page
 * is filled with a pattern; at the end, before the final free and outside the timings,
 * every marker and the first page are checked: a mismatch exits 2.
 *
 * Prints "key value" lines: total_s (allocation, every realloc and every touch; not the
 * final free, which is free_s), realloc_s (the sum of CLOCK_MONOTONIC around each
 * realloc call: the time spent inside realloc), realloc_calls, peak_rss_kib, and the VMA
 * count at start (after the first allocation), at peak size and after the final free.
 * Under tide (found through weak references to tide_stats_get and tide_ranges, so the
 * program never links libtide) the VMAs are those overlapping tide's ranges and the
 * remap counters are printed; under any other allocator, the process's VMAs.
 * --time-limit=SECONDS stops the growth once that much time has gone by (for allocators
 * that copy, whose time grows with the square of the size): "complete 0" and
 * "reached_bytes" then say how far it got, and the times are lower bounds.
 * Usage: realloc [--mode=double|step|pair] [--step=BYTES] [--start=BYTES] [--max=BYTES]
 *                [--time-limit=SECONDS]   (BYTES takes a k, m or g suffix)
 */
#include "config.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tide.h"

#include "bench.h"
#include "probe.h"

/* Resolve to the preloaded libtide when there is one, and stay NULL otherwise. */
extern int tide_stats_get(tide_stats_t *out, size_t stats_size) __attribute__((weak));
extern size_t tide_ranges(uintptr_t (*out)[2], size_t max) __attribute__((weak));

#define PAGE 4096u
#define MAX_RANGES 32

enum mode { MODE_DOUBLE, MODE_STEP, MODE_PAIR };

static double realloc_s;
static uint64_t realloc_calls;

/* The marker of page I of block WHICH: never 0, so a page lost to a fresh zero page
 * cannot pass for its own. */
static inline unsigned char marker(size_t i, unsigned which)
{
    return (unsigned char)(((i + 1) * 2654435761u + which * 97u) >> 24) | 1u;
}

static inline unsigned char first_page_byte(size_t j, unsigned which)
{
    return (unsigned char)(j * 7u + 3u + which);
}

/* Write the marker of every page in [FROM, TO) (byte offsets, FROM page-aligned). */
static void touch(unsigned char *p, size_t from, size_t to, unsigned which)
{
    for (size_t off = from; off < to; off += PAGE)
        p[off] = marker(off / PAGE, which);
}

static unsigned char *timed_realloc(unsigned char *p, size_t size)
{
    double t0 = probe_now();
    unsigned char *q = realloc(p, size);
    realloc_s += probe_now() - t0;
    realloc_calls++;
    if (!q) {
        fprintf(stderr, "realloc: realloc(%zu) failed\n", size);
        exit(1);
    }
    return q;
}

static unsigned char *new_block(size_t size, unsigned which)
{
    unsigned char *p = bench_malloc(size);
    touch(p, 0, size, which);
    for (size_t j = 0; j < PAGE; j++)
        p[j] = first_page_byte(j, which);
    return p;
}

/* The first page and every page's marker; returns the number of wrong pages. */
static size_t check(const unsigned char *p, size_t size, unsigned which, const char *name)
{
    size_t bad = 0;
    for (size_t j = 0; j < PAGE; j++)
        if (p[j] != first_page_byte(j, which)) {
            fprintf(stderr, "realloc: block %s: byte %zu of the first page is %u, not %u\n",
                    name, j, p[j], first_page_byte(j, which));
            bad++;
            break;
        }
    for (size_t off = PAGE; off < size; off += PAGE)
        if (p[off] != marker(off / PAGE, which)) {
            if (bad < 5)
                fprintf(stderr, "realloc: block %s: page %zu holds %u, not %u\n", name,
                        off / PAGE, p[off], marker(off / PAGE, which));
            bad++;
        }
    return bad;
}

/* VMAs: those overlapping tide's ranges under tide, else the whole process's. */
static long count_vmas(void)
{
    if (tide_ranges) {
        uintptr_t ranges[MAX_RANGES][2];
        size_t n = tide_ranges(ranges, MAX_RANGES);
        long inside = -1;
        if (probe_maps_count((const uintptr_t(*)[2])ranges, n < MAX_RANGES ? n : MAX_RANGES,
                             &inside) < 0)
            return -1;
        return inside;
    }
    return probe_maps_count(NULL, 0, NULL);
}

static void usage(void)
{
    fprintf(stderr, "usage: realloc [--mode=double|step|pair] [--step=BYTES] [--start=BYTES] "
                    "[--max=BYTES] [--time-limit=SECONDS]\n");
    exit(1);
}

int main(int argc, char **argv)
{
    enum mode mode = MODE_DOUBLE;
    size_t step = 64 << 10, start = 1 << 20, max = 0;
    double limit = 0; /* seconds, 0: none */
    static const struct option longopts[] = {
        { "mode", required_argument, NULL, 'm' },
        { "step", required_argument, NULL, 's' },
        { "start", required_argument, NULL, 'b' },
        { "max", required_argument, NULL, 'x' },
        { "time-limit", required_argument, NULL, 't' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (c == 'm') {
            if (!strcmp(optarg, "double"))
                mode = MODE_DOUBLE;
            else if (!strcmp(optarg, "step"))
                mode = MODE_STEP;
            else if (!strcmp(optarg, "pair"))
                mode = MODE_PAIR;
            else
                usage();
        } else if (c == 's') {
            step = bench_parse_bytes(optarg, "realloc", "--step");
        } else if (c == 'b') {
            start = bench_parse_bytes(optarg, "realloc", "--start");
        } else if (c == 'x') {
            max = bench_parse_bytes(optarg, "realloc", "--max");
        } else if (c == 't') {
            char *end;
            limit = strtod(optarg, &end);
            if (end == optarg || *end || !(limit > 0)) {
                fprintf(stderr, "realloc: --time-limit: expected positive seconds, got '%s'\n",
                        optarg);
                return 1;
            }
        } else {
            usage();
        }
    }
    if (optind < argc)
        usage();
    if (!max)
        max = mode == MODE_PAIR ? (size_t)256 << 20 : (size_t)1 << 30;
    if (start % PAGE || step % PAGE || start < PAGE || max < start) {
        fprintf(stderr, "realloc: --start and --step must be multiples of %u, --max >= --start\n",
                PAGE);
        return 1;
    }

    tide_stats_t st0 = { 0 }, st1 = { 0 };
    const int have_tide = tide_stats_get && tide_ranges;

    const double t0 = probe_now();
    unsigned char *a = new_block(start, 0), *b = NULL;
    if (mode == MODE_PAIR)
        b = new_block(start, 1);
    /* Outside the timings: the counts at start, after the first allocation(s). */
    double paused = probe_now();
    const long vmas_start = count_vmas();
    if (have_tide)
        tide_stats_get(&st0, sizeof st0);
    double skipped = probe_now() - paused;

    size_t size = start, size_b = start;
    const double deadline = limit > 0 ? t0 + skipped + limit : 0;
#define IN_TIME() (!deadline || probe_now() < deadline)
    if (mode == MODE_DOUBLE) {
        while (size < max && IN_TIME()) {
            size_t next = size * 2 < max ? size * 2 : max;
            a = timed_realloc(a, next);
            touch(a, size, next, 0);
            size = next;
        }
    } else if (mode == MODE_STEP) {
        while (size < max && IN_TIME()) {
            size_t next = max - size > step ? size + step : max;
            a = timed_realloc(a, next);
            touch(a, size, next, 0);
            size = next;
        }
    } else {
        while ((size < max || size_b < max) && IN_TIME()) {
            if (size < max) {
                size_t next = max - size > step ? size + step : max;
                a = timed_realloc(a, next);
                touch(a, size, next, 0);
                size = next;
            }
            if (size_b < max) {
                size_t next = max - size_b > step ? size_b + step : max;
                b = timed_realloc(b, next);
                touch(b, size_b, next, 1);
                size_b = next;
            }
        }
    }
    const double total_s = probe_now() - t0 - skipped;

    const long peak_rss_kib = probe_peak_rss_kib();
    const long vmas_peak = count_vmas();
    size_t bad = check(a, size, 0, "A");
    if (b)
        bad += check(b, size_b, 1, "B");

    const double f0 = probe_now();
    free(a);
    free(b);
    const double free_s = probe_now() - f0;
    const long vmas_after = count_vmas();
    if (have_tide)
        tide_stats_get(&st1, sizeof st1);

    static const char *const names[] = { "double", "step", "pair" };
    printf("mode %s\n", names[mode]);
    printf("max_bytes %zu\n", max);
    printf("complete %d\n", size == max && (!b || size_b == max));
    printf("reached_bytes %zu\n", size);
    printf("total_s %.6f\n", total_s);
    printf("realloc_s %.6f\n", realloc_s);
    printf("realloc_calls %" PRIu64 "\n", realloc_calls);
    printf("free_s %.6f\n", free_s);
    printf("peak_rss_kib %ld\n", peak_rss_kib);
    printf("vmas_scope %s\n", have_tide ? "tide" : "process");
    printf("vmas_start %ld\n", vmas_start);
    printf("vmas_peak %ld\n", vmas_peak);
    printf("vmas_after_free %ld\n", vmas_after);
    if (have_tide) {
        printf("remap_moves %" PRIu64 "\n", st1.remap_moves - st0.remap_moves);
        printf("remap_heals %" PRIu64 "\n", st1.remap_heals - st0.remap_heals);
        printf("remap_copies %" PRIu64 "\n", st1.remap_copies - st0.remap_copies);
        printf("remap_in_place %" PRIu64 "\n", st1.remap_in_place - st0.remap_in_place);
    }
    printf("pages_checked %zu\n", (size + size_b * (b != NULL)) / PAGE);
    printf("pages_bad %zu\n", bad);
    printf("allocator %s\n", probe_malloc_provider());
    if (bad) {
        fprintf(stderr, "realloc: %zu page(s) lost their contents\n", bad);
        return 2;
    }
    return fflush(stdout) == 0 ? 0 : 1;
}
