/* SPDX-License-Identifier: MIT */
/*
 * mixed.c - a working set of mixed sizes: an array of slots, each holding a block;
 * every operation frees a random slot's block and puts a new one of a random size in
 * it.  Sizes are log-uniform-ish from 16 B to 64 KiB, with one in 64 from 64 KiB to
 * 1 MiB, so the small, medium and large paths all run and the heap fragments; the
 * working set is about 200 MiB.  One byte per page of each block is written, so that
 * the peak RSS is real and an allocator that purges too eagerly pays the refaults.
 * With -t 2, each thread owns half of the slots.
 * Usage: mixed [-t 1|2] [-w PERCENT]   Prints "elapsed_s" and "peak_rss_kib".
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "probe.h"
#include "rng.h"

#define SLOTS 16384          /* in total, split between the threads */
#define OPS 3000000ULL       /* replacements in total, split between the threads */
#define MAX_THREADS 2
#define PAGE 4096

struct worker {
    pthread_t thread;
    unsigned index;
    size_t nslots;
    uint64_t ops;
    void **slot;
};

/* 2^e + a uniform part of 2^e, e uniform: each power-of-two range equally likely. */
static size_t random_size(rng_t *rng)
{
    unsigned lo = 4, hi = 16; /* 16 B .. 64 KiB */
    if (rng_below(rng, 64) == 0)
        lo = 16, hi = 20;     /* 64 KiB .. 1 MiB */
    unsigned e = lo + (unsigned)rng_below(rng, hi - lo);
    return ((size_t)1 << e) + (size_t)rng_below(rng, (uint64_t)1 << e);
}

static void *new_block(rng_t *rng)
{
    size_t size = random_size(rng);
    char *p = bench_malloc(size);
    for (size_t i = 0; i < size; i += PAGE)
        p[i] = 1;
    p[size - 1] = 1;
    return p;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    rng_t rng;
    rng_seed(&rng, 7, w->index);

    for (size_t i = 0; i < w->nslots; i++)
        w->slot[i] = new_block(&rng);
    for (uint64_t op = 0; op < w->ops; op++) {
        size_t i = rng_below(&rng, w->nslots);
        free(w->slot[i]);
        w->slot[i] = new_block(&rng);
    }
    for (size_t i = 0; i < w->nslots; i++)
        free(w->slot[i]);
    return NULL;
}

int main(int argc, char **argv)
{
    unsigned percent = 100, nthreads = 1;
    int c;
    while ((c = getopt(argc, argv, "t:w:")) != -1) {
        if (c == 'w')
            percent = (unsigned)bench_parse_count(optarg, "-w");
        else if (c == 't')
            nthreads = (unsigned)bench_parse_count(optarg, "-t");
        else
            nthreads = 0;
    }
    if (optind < argc || nthreads < 1 || nthreads > MAX_THREADS) {
        fprintf(stderr, "usage: mixed [-t 1|2] [-w PERCENT]\n");
        return 1;
    }

    /* The slot arrays are outside the allocator under test. */
    static void *slots[SLOTS];
    struct worker workers[MAX_THREADS];
    const uint64_t ops = bench_scaled(OPS, percent);

    double t0 = probe_now();
    for (unsigned i = 0; i < nthreads; i++) {
        workers[i] = (struct worker){
            .index = i,
            .nslots = SLOTS / nthreads,
            .ops = ops / nthreads,
            .slot = slots + i * (SLOTS / nthreads),
        };
        if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i])) {
            fprintf(stderr, "mixed: pthread_create failed\n");
            return 1;
        }
    }
    for (unsigned i = 0; i < nthreads; i++)
        pthread_join(workers[i].thread, NULL);
    printf("elapsed_s %.6f\n", probe_now() - t0);
    printf("ops %llu\n", (unsigned long long)(ops / nthreads * nthreads));
    printf("peak_rss_kib %ld\n", probe_peak_rss_kib());
    printf("allocator %s\n", probe_malloc_provider());
    return 0;
}
