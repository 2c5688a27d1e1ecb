/* SPDX-License-Identifier: MIT */
/*
 * churn.c - churn with a swinging working set, after rpmalloc's benchmark: threads
 * allocate and free blocks of 8 B - 16 KiB (log-uniform: as many blocks in 8-16 B as in
 * 8-16 KiB) in waves, and some of the blocks a thread lets go are freed by the next
 * thread.
 *
 * Each thread owns CAPACITY / THREADS slots.  A wave fills them from a low of 1/8 up to
 * a high mark, replacing a random live block every REPLACE_EVERY allocations, then frees
 * random blocks down to the low again.  The high mark swings too: it is the whole
 * capacity for SWING waves, then a quarter of it for SWING waves, and so on, so the
 * memory a thread holds rises and falls on two time scales, and a page freed in one wave
 * is wanted again a moment or a swing later.  One block in CROSS_EVERY that a thread lets
 * go is not freed by it but chained onto the inbox of the next thread (an atomic push of
 * CHAIN blocks at a time, linked through their first word); every thread frees what
 * arrived in its inbox each INBOX_EVERY operations and once more at the end.  Nobody ever
 * waits for another thread but at the start and the end, so with more threads than CPUs
 * only the allocator makes them wait.  Every block has its first and last bytes written.
 *
 * -t THREADS (default 2) share the capacity and a fixed amount of work.  Prints "key
 * value" lines: elapsed_s, csw (context switches during the run, getrusage),
 * peak_rss_kib, allocator.
 * Usage: churn [-t THREADS] [-w PERCENT]
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "shape.h"
#include "probe.h"
#include "rng.h"

#define CAPACITY 4096         /* live blocks at most, all threads together */
#define OPS 1000000ULL        /* allocations and frees, all threads together */
#define REPLACE_EVERY 4
#define SWING 8               /* waves per half swing of the high mark */
#define CROSS_EVERY 8
#define CHAIN 32
#define INBOX_EVERY 256
#define MAX_THREADS 64

struct worker {
    pthread_t thread;
    unsigned id, nthreads;
    uint64_t ops;
    unsigned cap;
    void **live;     /* live[0 .. nlive) */
    unsigned nlive;
    void *chain;     /* blocks on their way to the next thread */
    unsigned nchain;
    void **chain_tail;
    _Alignas(64) _Atomic(void *) inbox;
};

static struct worker workers[MAX_THREADS];
static pthread_barrier_t start, done;

/* 8 B - 16 KiB, log-uniform. */
static size_t draw_size(rng_t *rng)
{
    unsigned lg = 3 + (unsigned)rng_below(rng, 11); /* 2^3 .. 2^13, then up to twice that */
    size_t lo = (size_t)1 << lg;
    return lo + rng_below(rng, lo + 1);
}

static void *alloc_block(rng_t *rng)
{
    size_t size = draw_size(rng);
    unsigned char *p = bench_malloc(size);
    p[0] = (unsigned char)size;
    p[size - 1] = (unsigned char)size;
    return p;
}

static void push_chain(struct worker *w)
{
    struct worker *next = &workers[(w->id + 1) % w->nthreads];
    void *head = atomic_load_explicit(&next->inbox, memory_order_relaxed);
    do
        *w->chain_tail = head;
    while (!atomic_compare_exchange_weak_explicit(&next->inbox, &head, w->chain,
                                                  memory_order_release, memory_order_relaxed));
    w->chain = NULL;
    w->nchain = 0;
}

/* Let block P go: freed here, or one time in CROSS_EVERY by the next thread. */
static void let_go(struct worker *w, rng_t *rng, void *p)
{
    if (w->nthreads == 1 || rng_below(rng, CROSS_EVERY) != 0) {
        free(p);
        return;
    }
    *(void **)p = w->chain;
    if (!w->chain)
        w->chain_tail = (void **)p;
    w->chain = p;
    if (++w->nchain == CHAIN)
        push_chain(w);
}

static void drain_inbox(struct worker *w)
{
    void *p = atomic_exchange_explicit(&w->inbox, NULL, memory_order_acquire);
    while (p) {
        void *next = *(void **)p;
        free(p);
        p = next;
    }
}

/* Free a random live block. */
static void drop_one(struct worker *w, rng_t *rng)
{
    unsigned i = (unsigned)rng_below(rng, w->nlive);
    void *p = w->live[i];
    w->live[i] = w->live[--w->nlive];
    let_go(w, rng, p);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    rng_t rng;
    rng_seed(&rng, 7, w->id + 1);
    unsigned low = w->cap / 8 ? w->cap / 8 : 1;
    uint64_t ops = 0, wave = 0;
    pthread_barrier_wait(&start);
    while (ops < w->ops) {
        unsigned high = (wave / SWING) % 2 == 0 ? w->cap : w->cap / 4;
        high = high > low ? high : low + 1;
        for (unsigned n = 0; w->nlive < high && ops < w->ops; n++, ops++) {
            if (n % REPLACE_EVERY == REPLACE_EVERY - 1)
                drop_one(w, &rng), ops++;
            w->live[w->nlive++] = alloc_block(&rng);
            if (n % INBOX_EVERY == 0)
                drain_inbox(w);
        }
        for (unsigned n = 0; w->nlive > low && ops < w->ops; n++, ops++) {
            drop_one(w, &rng);
            if (n % INBOX_EVERY == 0)
                drain_inbox(w);
        }
        wave++;
    }
    if (w->chain)
        push_chain(w);
    pthread_barrier_wait(&done); /* every push has been made */
    drain_inbox(w);
    while (w->nlive > 0)
        free(w->live[--w->nlive]);
    return NULL;
}

int main(int argc, char **argv)
{
    static const char usage[] = "usage: churn [-t THREADS] [-w PERCENT]\n";
    unsigned percent = 100, nthreads = 2;
    shape_parse(argc, argv, usage, MAX_THREADS, &nthreads, &percent);
    static void *slots[CAPACITY]; /* outside the allocator under test */
    uint64_t ops = bench_scaled(OPS, percent);
    unsigned cap = CAPACITY / nthreads;
    pthread_barrier_init(&start, NULL, nthreads + 1);
    pthread_barrier_init(&done, NULL, nthreads);
    for (unsigned i = 0; i < nthreads; i++) {
        struct worker *w = &workers[i];
        w->id = i;
        w->nthreads = nthreads;
        w->ops = ops / nthreads + (i < ops % nthreads);
        w->cap = cap;
        w->live = slots + (size_t)i * cap;
        atomic_init(&w->inbox, NULL);
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            fprintf(stderr, "churn: pthread_create failed\n");
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
    shape_report(t0, t1, csw1 - csw0);
    printf("allocator %s\n", probe_malloc_provider());
    return 0;
}
