/* SPDX-License-Identifier: MIT */
/*
 * pairs.c - one thread, small malloc/free pairs of 16..1024 bytes, in two patterns:
 *   batch  allocate BATCH objects, then free them all in allocation order, repeat
 *          (the thread cache overflows and refills: the slab and central paths);
 *   lifo   allocate DEPTH objects and free them in reverse order, repeat
 *          (the thread-cache fast path, with a small stack of live objects);
 *   burst  allocate N objects of one size, write each whole, free them in allocation
 *          order, repeat, for N of 25, 100, 400 and 1600 and sizes 16, 32 and 64 (the
 *          shape of glibc's benchtests/bench-malloc-simple: each malloc takes the head
 *          its class's last malloc just wrote, so what bounds it is how soon a pop can
 *          start after the one before, where batch and lifo go from class to class).
 * Sizes come from a fixed table, so every allocator serves the same requests.
 * Usage: pairs [-w PERCENT] [batch|lifo|burst]...   Prints "<pattern>_s <seconds>" lines.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "probe.h"
#include "rng.h"

#define NSIZES 4096 /* power of two */
#define BATCH 1000
#define DEPTH 8
#define BATCH_PAIRS 20000000ULL
#define LIFO_PAIRS 50000000ULL
#define BURST_PAIRS 24000000ULL

static size_t sizes[NSIZES];

static void run_batch(uint64_t pairs)
{
    static void *objs[BATCH];
    size_t next = 0;
    for (uint64_t done = 0; done < pairs; done += BATCH) {
        for (int i = 0; i < BATCH; i++) {
            char *p = bench_malloc(sizes[next++ & (NSIZES - 1)]);
            p[0] = (char)i;
            objs[i] = p;
        }
        bench_escape(objs);
        for (int i = 0; i < BATCH; i++)
            free(objs[i]);
    }
}

static void run_lifo(uint64_t pairs)
{
    void *stack[DEPTH];
    size_t next = 0;
    for (uint64_t done = 0; done < pairs; done += DEPTH) {
        for (int i = 0; i < DEPTH; i++) {
            char *p = bench_malloc(sizes[next++ & (NSIZES - 1)]);
            p[0] = (char)i;
            stack[i] = p;
        }
        bench_escape(stack);
        for (int i = DEPTH - 1; i >= 0; i--)
            free(stack[i]);
    }
}

static void run_burst(uint64_t pairs)
{
    static int *objs[1600];
    static const int counts[] = { 25, 100, 400, 1600 };
    const uint64_t each = pairs / 12; /* pairs for each of the 3 sizes x 4 counts */
    for (size_t size = 16; size <= 64; size *= 2)
        for (int k = 0; k < 4; k++) {
            const int n = counts[k];
            for (uint64_t done = 0; done < each; done += (uint64_t)n) {
                for (int i = 0; i < n; i++) {
                    int *p = bench_malloc(size);
                    for (size_t w = 0; w < size / sizeof(int); w++)
                        p[w] = (int)w;
                    objs[i] = p;
                }
                bench_escape(objs);
                for (int i = 0; i < n; i++)
                    free(objs[i]);
            }
        }
}

int main(int argc, char **argv)
{
    unsigned percent = 100;
    int c;
    while ((c = getopt(argc, argv, "w:")) != -1) {
        if (c != 'w') {
            fprintf(stderr, "usage: pairs [-w PERCENT] [batch|lifo|burst]...\n");
            return 1;
        }
        percent = (unsigned)bench_parse_count(optarg, "-w");
    }

    rng_t rng;
    rng_seed(&rng, 1, 0);
    for (size_t i = 0; i < NSIZES; i++)
        sizes[i] = 16 + rng_below(&rng, 1024 - 16 + 1);

    const char *all[] = { "batch", "lifo", "burst" };
    char **patterns = optind < argc ? argv + optind : (char **)all;
    int npatterns = optind < argc ? argc - optind : 3;
    for (int i = 0; i < npatterns; i++) {
        const char *name = patterns[i];
        double t0 = probe_now();
        if (strcmp(name, "batch") == 0) {
            run_batch(bench_scaled(BATCH_PAIRS, percent));
        } else if (strcmp(name, "lifo") == 0) {
            run_lifo(bench_scaled(LIFO_PAIRS, percent));
        } else if (strcmp(name, "burst") == 0) {
            run_burst(bench_scaled(BURST_PAIRS, percent));
        } else {
            fprintf(stderr, "pairs: unknown pattern '%s' (batch, lifo, burst)\n", name);
            return 1;
        }
        printf("%s_s %.6f\n", name, probe_now() - t0);
    }
    printf("peak_rss_kib %ld\n", probe_peak_rss_kib());
    printf("allocator %s\n", probe_malloc_provider());
    return 0;
}
