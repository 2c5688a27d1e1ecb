/* SPDX-License-Identifier: MIT */
/*
 * prodcons.c - blocks that die on another thread: 2 producers malloc 64-byte blocks
 * and pass them, each through its own single-producer single-consumer ring, to 2
 * consumers that free them.  Every free is a remote free, which is what an allocator's
 * cross-thread path (remote free lists, central caches, arena locks) is built for.
 *
 * The rings cost little and the same under every allocator: each side keeps its own
 * index and the last one it saw of the other side, and the producer publishes blocks 64
 * at a time, as real pipelines hand over work in batches.  (A first version published
 * every block with a sequentially consistent store and read the other index each time:
 * perf put 89% of its cycles in that handshake when producers and consumers ran on
 * different cores, and its time swung 5x with where the scheduler put the threads.)
 * A thread that finds its ring empty (or full) polls briefly, then sleeps on a futex
 * until the other side has filled (or drained) half of the ring.
 *
 * -p PLACEMENT: any (the scheduler decides), pairs (each pair shares a CPU: the blocks
 * stay in one core's caches), split (producers share one CPU, consumers another: every
 * block crosses cores twice).  Pinned placements need 2 CPUs.
 * Usage: prodcons [-w PERCENT] [-p any|pairs|split]   Prints "elapsed_s <seconds>".
 */
#include "config.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench.h"
#include "probe.h"

#define PAIRS 2
#define RING_SIZE 4096 /* power of two */
#define BLOCK_SIZE 64
#define BLOCKS 40000000ULL /* in total, split between the producers */
#define SPINS 200          /* polls of an empty or full ring before sleeping */
#define PUBLISH_EVERY 64   /* blocks the producer hands over at once */

struct ring {
    _Alignas(64) _Atomic uint64_t head; /* written by the producer */
    _Alignas(64) _Atomic uint64_t tail; /* written by the consumer */
    _Alignas(64) _Atomic uint32_t consumer_asleep;
    _Alignas(64) _Atomic uint32_t producer_asleep;
    _Alignas(64) void *slot[RING_SIZE];
};

struct pair {
    struct ring ring;
    uint64_t blocks;
    pthread_t producer, consumer;
    int producer_cpu, consumer_cpu; /* -1: not pinned */
};

/* Sleep while *flag is 1 (it is set by the caller, cleared by the waker). */
static void sleep_on(_Atomic uint32_t *flag)
{
    while (atomic_load(flag) == 1)
        syscall(SYS_futex, flag, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
}

static void wake(_Atomic uint32_t *flag)
{
    atomic_store(flag, 0);
    syscall(SYS_futex, flag, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Wait until CHECK (re-evaluated) holds: poll, then announce the sleep in *flag and
 * check once more before sleeping; the other side tests *flag after each publication
 * (both sequentially consistent), so a wake-up cannot be lost. */
#define WAIT_UNTIL(check, flag)                                                   \
    do {                                                                          \
        for (unsigned polls_ = 0; !(check); polls_++) {                           \
            if (polls_ < SPINS)                                                   \
                continue;                                                         \
            atomic_store(flag, 1);                                                \
            if (check) {                                                          \
                atomic_store(flag, 0);                                            \
                break;                                                            \
            }                                                                     \
            sleep_on(flag);                                                       \
            polls_ = 0;                                                           \
        }                                                                         \
    } while (0)

/* Pin the calling thread to CPU (when it is not -1) before it does any work. */
static void pin_self(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
        fprintf(stderr, "prodcons: cannot pin a thread to CPU %d\n", cpu);
        exit(1);
    }
}

static void *producer_main(void *arg)
{
    struct pair *pair = arg;
    struct ring *r = &pair->ring;
    uint64_t head = 0, tail_seen = 0;

    pin_self(pair->producer_cpu);
    for (uint64_t i = 0; i < pair->blocks; i++) {
        uint64_t *block = bench_malloc(BLOCK_SIZE);
        block[0] = i; /* the consumer checks it: the block really travelled */
        if (head - tail_seen == RING_SIZE) {
            /* Publish what is held back first: a full ring must be visible as full. */
            atomic_store(&r->head, head);
            WAIT_UNTIL(head - (tail_seen = atomic_load(&r->tail)) < RING_SIZE,
                       &r->producer_asleep);
        }
        r->slot[head % RING_SIZE] = block;
        head++;
        bool last = i + 1 == pair->blocks;
        if (head % PUBLISH_EVERY == 0 || last) {
            atomic_store_explicit(&r->head, head, memory_order_release);
            /* Publication, then the look at the flag: the consumer does the reverse
             * (flag, then head), so one of the two sees the other. */
            atomic_thread_fence(memory_order_seq_cst);
            /* Wake a sleeping consumer once there is a batch for it, or at the end. */
            if (atomic_load_explicit(&r->consumer_asleep, memory_order_relaxed) &&
                (head - atomic_load(&r->tail) >= RING_SIZE / 2 || last))
                wake(&r->consumer_asleep);
        }
    }
    return NULL;
}

static void *consumer_main(void *arg)
{
    struct pair *pair = arg;
    struct ring *r = &pair->ring;
    uint64_t tail = 0, head_seen = 0;

    pin_self(pair->consumer_cpu);
    for (uint64_t i = 0; i < pair->blocks; i++) {
        if (tail == head_seen)
            WAIT_UNTIL((head_seen = atomic_load(&r->head)) != tail, &r->consumer_asleep);
        uint64_t *block = r->slot[tail % RING_SIZE];
        if (block[0] != i) {
            fprintf(stderr, "prodcons: block %llu arrived as %llu\n", (unsigned long long)i,
                    (unsigned long long)block[0]);
            exit(1);
        }
        free(block);
        atomic_store_explicit(&r->tail, ++tail, memory_order_release);
        if (tail % PUBLISH_EVERY == 0) {
            atomic_thread_fence(memory_order_seq_cst);
            /* Wake a sleeping producer once half of the ring is free. */
            if (atomic_load_explicit(&r->producer_asleep, memory_order_relaxed) &&
                atomic_load(&r->head) - tail <= RING_SIZE / 2)
                wake(&r->producer_asleep);
        }
    }
    return NULL;
}

/* The first two CPUs this process may run on, or exit when there are fewer. */
static void two_cpus(int cpu[2])
{
    cpu_set_t set;
    int n = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
            if (CPU_ISSET(c, &set))
                cpu[n++] = c;
    if (n < 2) {
        fprintf(stderr, "prodcons: -p pairs and -p split need 2 CPUs\n");
        exit(1);
    }
}

int main(int argc, char **argv)
{
    static const char usage[] = "usage: prodcons [-w PERCENT] [-p any|pairs|split]\n";
    unsigned percent = 100;
    const char *placement = "any";
    int c;
    while ((c = getopt(argc, argv, "w:p:")) != -1) {
        if (c == 'w') {
            percent = (unsigned)bench_parse_count(optarg, "-w");
        } else if (c == 'p' && (!strcmp(optarg, "any") || !strcmp(optarg, "pairs") ||
                                !strcmp(optarg, "split"))) {
            placement = optarg;
        } else {
            fprintf(stderr, "%s", usage);
            return 1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s", usage);
        return 1;
    }
    int cpu[2] = {-1, -1};
    if (strcmp(placement, "any"))
        two_cpus(cpu);

    /* The rings live outside the allocator under test (static), so they cost the same. */
    static struct pair pairs[PAIRS];
    const uint64_t blocks = bench_scaled(BLOCKS, percent);

    double t0 = probe_now();
    for (int i = 0; i < PAIRS; i++) {
        pairs[i].blocks = blocks / PAIRS;
        bool split = !strcmp(placement, "split");
        pairs[i].producer_cpu = split ? cpu[0] : cpu[i % 2];
        pairs[i].consumer_cpu = split ? cpu[1] : cpu[i % 2];
        if (pthread_create(&pairs[i].consumer, NULL, consumer_main, &pairs[i]) ||
            pthread_create(&pairs[i].producer, NULL, producer_main, &pairs[i])) {
            fprintf(stderr, "prodcons: pthread_create failed\n");
            return 1;
        }
    }
    for (int i = 0; i < PAIRS; i++) {
        pthread_join(pairs[i].producer, NULL);
        pthread_join(pairs[i].consumer, NULL);
    }
    printf("elapsed_s %.6f\n", probe_now() - t0);
    printf("placement %s\n", placement);
    printf("blocks %llu\n", (unsigned long long)(blocks / PAIRS * PAIRS));
    printf("peak_rss_kib %ld\n", probe_peak_rss_kib());
    printf("allocator %s\n", probe_malloc_provider());
    return 0;
}
