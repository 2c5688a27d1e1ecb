/* SPDX-License-Identifier: MIT */
/*
 * larson.c - server-style remote frees, after Larson and Krishnan's benchmark: each
 * thread works on an array of SLOTS blocks of 8-1000 bytes, repeatedly freeing a random
 * slot and refilling it with a new block of a random size, and after OPS_PER_TURN such
 * replacements hands the array on and takes another one, so most frees are of blocks
 * another thread allocated.  The arrays (2 per thread) wait in one FIFO queue guarded by
 * a mutex that a thread takes twice per turn; a thread never waits for an array (the
 * queue always holds as many as there are threads), so with more threads than CPUs it
 * only waits on the allocator.  (Larson's original starts a new thread for each hand-over;
 * that would measure thread creation too.)  The arrays are filled before the clock
 * starts, by the main thread: the first frees of every array are remote too.
 *
 * --sized frees through the allocator's sized free, found through weak references:
 * free_sized (C23; tide), sdallocx (jemalloc), tc_free_sized (tcmalloc), mi_free_size
 * (mimalloc), else plain free; the "free_fn" line names the one used.
 *
 * -t THREADS (default 2) share a fixed amount of work.  Prints "key value" lines:
 * elapsed_s, csw (context switches during the run, getrusage), peak_rss_kib, free_fn,
 * allocator.
 * Usage: larson [-t THREADS] [-w PERCENT] [--sized]
 */
#include "config.h"

#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shape.h"
#include "probe.h"
#include "rng.h"

#define SLOTS 2048
#define MIN_SIZE 8
#define MAX_SIZE 1000
#define OPS_PER_TURN 1024
#define OPS 1000000ULL /* replacements, in total */
#define MAX_THREADS 64
#define MAX_ARRAYS (2 * MAX_THREADS)

/* Each resolves to the preloaded allocator's function when it has one, else NULL. */
extern void free_sized(void *p, size_t size) __attribute__((weak));
extern void sdallocx(void *p, size_t size, int flags) __attribute__((weak));
extern void tc_free_sized(void *p, size_t size) __attribute__((weak));
extern void mi_free_size(void *p, size_t size) __attribute__((weak));

static void by_sdallocx(void *p, size_t size) { sdallocx(p, size, 0); }
static void by_free(void *p, size_t size) { (void)size; free(p); }

struct array {
    void *block[SLOTS];
    uint32_t size[SLOTS];
};

static struct array arrays[MAX_ARRAYS];
static void (*free_fn)(void *, size_t) = by_free;

/* The FIFO of arrays waiting for a thread. */
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned queue[MAX_ARRAYS], queue_head, queue_len, narrays;

/* Put array GIVE (unless negative) at the tail of the queue; with TAKE, take the head
 * and return it. */
static unsigned trade(int give, int take)
{
    unsigned a = 0;
    pthread_mutex_lock(&queue_lock);
    if (give >= 0)
        queue[(queue_head + queue_len++) % narrays] = (unsigned)give;
    if (take) {
        a = queue[queue_head];
        queue_head = (queue_head + 1) % narrays;
        queue_len--;
    }
    pthread_mutex_unlock(&queue_lock);
    return a;
}

struct worker {
    pthread_t thread;
    unsigned id;
    uint64_t turns;
};

static pthread_barrier_t start;

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    rng_t rng;
    rng_seed(&rng, 4141, w->id + 1);
    pthread_barrier_wait(&start);
    int held = -1;
    for (uint64_t t = 0; t < w->turns; t++) {
        struct array *a = &arrays[held = (int)trade(held, 1)];
        for (unsigned i = 0; i < OPS_PER_TURN; i++) {
            unsigned slot = (unsigned)rng_below(&rng, SLOTS);
            free_fn(a->block[slot], a->size[slot]);
            uint32_t size = MIN_SIZE + (uint32_t)rng_below(&rng, MAX_SIZE - MIN_SIZE + 1);
            char *p = bench_malloc(size);
            p[0] = (char)i;
            a->block[slot] = p;
            a->size[slot] = size;
        }
    }
    if (held >= 0)
        trade(held, 0);
    return NULL;
}

int main(int argc, char **argv)
{
    static const char usage[] = "usage: larson [-t THREADS] [-w PERCENT] [--sized]\n";
    static const struct option longopts[] = { { "sized", no_argument, NULL, 's' }, { 0 } };
    unsigned percent = 100, nthreads = 2;
    int sized = 0, c;
    while ((c = getopt_long(argc, argv, "t:w:", longopts, NULL)) != -1) {
        if (c == 'w')
            percent = (unsigned)bench_parse_count(optarg, "-w");
        else if (c == 't')
            nthreads = (unsigned)bench_parse_count(optarg, "-t");
        else if (c == 's')
            sized = 1;
        else {
            fprintf(stderr, "%s", usage);
            return 1;
        }
    }
    if (optind < argc || nthreads > MAX_THREADS) {
        fprintf(stderr, "%s", usage);
        return 1;
    }
    const char *free_name = "free";
    if (sized) {
        if (free_sized)
            free_fn = free_sized, free_name = "free_sized";
        else if (sdallocx)
            free_fn = by_sdallocx, free_name = "sdallocx";
        else if (tc_free_sized)
            free_fn = tc_free_sized, free_name = "tc_free_sized";
        else if (mi_free_size)
            free_fn = mi_free_size, free_name = "mi_free_size";
    }

    rng_t rng;
    rng_seed(&rng, 4141, 0);
    narrays = 2 * nthreads;
    for (unsigned a = 0; a < narrays; a++) {
        for (unsigned s = 0; s < SLOTS; s++) {
            uint32_t size = MIN_SIZE + (uint32_t)rng_below(&rng, MAX_SIZE - MIN_SIZE + 1);
            char *p = bench_malloc(size);
            p[0] = 1;
            arrays[a].block[s] = p;
            arrays[a].size[s] = size;
        }
        queue[a] = a;
    }
    queue_len = narrays;

    static struct worker workers[MAX_THREADS];
    uint64_t turns = bench_scaled(OPS, percent) / OPS_PER_TURN;
    turns = turns ? turns : 1;
    pthread_barrier_init(&start, NULL, nthreads + 1);
    for (unsigned i = 0; i < nthreads; i++) {
        workers[i].id = i;
        workers[i].turns = turns / nthreads + (i < turns % nthreads);
        if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) != 0) {
            fprintf(stderr, "larson: pthread_create failed\n");
            return 1;
        }
    }
    long csw0 = bench_context_switches();
    double t0 = probe_now();
    pthread_barrier_wait(&start);
    for (unsigned i = 0; i < nthreads; i++)
        pthread_join(workers[i].thread, NULL);
    double t1 = probe_now();
    long csw1 = bench_context_switches();

    for (unsigned a = 0; a < narrays; a++)
        for (unsigned s = 0; s < SLOTS; s++)
            free(arrays[a].block[s]);
    shape_report(t0, t1, csw1 - csw0);
    printf("free_fn %s\n", free_name);
    printf("allocator %s\n", probe_malloc_provider());
    return 0;
}
