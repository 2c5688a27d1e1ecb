/* SPDX-License-Identifier: MIT */
/*
 * powers.c - the plainest single-thread small-object shape: allocate BLOCKS blocks of
 * one size, free them all (in allocation order), and do the same for each power of two
 * from 16 to 1024 bytes; repeat.  A round holds 1 MiB of 1024-byte blocks at its peak,
 * more than a thread cache keeps, so the slabs a round empties are needed again one
 * size later: an allocator that gives them back to its page heap cuts them again.
 *
 * -t THREADS runs that many threads, each on its own blocks, sharing the rounds (the
 * total work stays the same).  Prints "key value" lines: elapsed_s, csw (context
 * switches during the run, getrusage), peak_rss_kib, allocator.
 * Usage: powers [-t THREADS] [-w PERCENT]
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "shape.h"
#include "probe.h"

#define BLOCKS 1000
#define MIN_SIZE 16
#define MAX_SIZE 1024
#define ROUNDS 150ULL /* each round: every size once */
#define MAX_THREADS 64

struct worker {
    pthread_t thread;
    uint64_t rounds;
    void *objs[BLOCKS];
};

static pthread_barrier_t start;

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    pthread_barrier_wait(&start);
    for (uint64_t r = 0; r < w->rounds; r++) {
        for (size_t size = MIN_SIZE; size <= MAX_SIZE; size *= 2) {
            for (int i = 0; i < BLOCKS; i++) {
                char *p = bench_malloc(size);
                p[0] = (char)i;
                w->objs[i] = p;
            }
            bench_escape(w->objs);
            for (int i = 0; i < BLOCKS; i++)
                free(w->objs[i]);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    static const char usage[] = "usage: powers [-t THREADS] [-w PERCENT]\n";
    unsigned percent = 100, nthreads = 1;
    shape_parse(argc, argv, usage, MAX_THREADS, &nthreads, &percent);
    static struct worker workers[MAX_THREADS];
    uint64_t rounds = bench_scaled(ROUNDS, percent);
    for (unsigned i = 0; i < nthreads; i++)
        workers[i].rounds = rounds / nthreads + (i < rounds % nthreads);

    /* One thread runs on the main thread itself: -t 1 is a single-threaded process. */
    pthread_barrier_init(&start, NULL, nthreads);
    for (unsigned i = 1; i < nthreads; i++)
        if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) != 0) {
            fprintf(stderr, "powers: pthread_create failed\n");
            return 1;
        }
    long csw0 = bench_context_switches();
    double t0 = probe_now();
    worker_main(&workers[0]);
    for (unsigned i = 1; i < nthreads; i++)
        pthread_join(workers[i].thread, NULL);
    double t1 = probe_now();
    long csw1 = bench_context_switches();
    shape_report(t0, t1, csw1 - csw0);
    printf("allocator %s\n", probe_malloc_provider());
    return 0;
}
