/*
 * prodcons.c - blocks that die on another thread: 2 producers malloc 64-byte blocks
 * and pass them, each through its own single-producer single-consumer ring, to 2
 * consumers that free them.  Every free is a remote free, which is what an allocator's
 * cross-thread path (remote free lists, central caches, arena locks) is built for.
 *
 * The rings are lock-free and cost the same under every allocator.  A thread that finds
 * its ring empty (or full) polls briefly, then sleeps on a futex until the other side
 * has filled (or drained) half of the ring: the pairs work in large batches, and with
 * more threads than cores, the run does not depend on how sched_yield() is scheduled.
 * Usage: prodcons [-w PERCENT]   Prints "elapsed_s <seconds>".
 */
#include "config.h"

#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
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

static void *producer_main(void *arg)
{
    struct pair *pair = arg;
    struct ring *r = &pair->ring;
    uint64_t head = 0;

    for (uint64_t i = 0; i < pair->blocks; i++) {
        uint64_t *block = bench_malloc(BLOCK_SIZE);
        block[0] = i; /* the consumer checks it: the block really travelled */
        WAIT_UNTIL(head - atomic_load(&r->tail) < RING_SIZE, &r->producer_asleep);
        r->slot[head % RING_SIZE] = block;
        atomic_store(&r->head, ++head);
        /* Wake a sleeping consumer once there is a batch for it, or at the end. */
        if (atomic_load(&r->consumer_asleep) &&
            (head - atomic_load(&r->tail) >= RING_SIZE / 2 || i + 1 == pair->blocks))
            wake(&r->consumer_asleep);
    }
    return NULL;
}

static void *consumer_main(void *arg)
{
    struct pair *pair = arg;
    struct ring *r = &pair->ring;
    uint64_t tail = 0;

    for (uint64_t i = 0; i < pair->blocks; i++) {
        WAIT_UNTIL(atomic_load(&r->head) != tail, &r->consumer_asleep);
        uint64_t *block = r->slot[tail % RING_SIZE];
        if (block[0] != i) {
            fprintf(stderr, "prodcons: block %llu arrived as %llu\n", (unsigned long long)i,
                    (unsigned long long)block[0]);
            exit(1);
        }
        free(block);
        atomic_store(&r->tail, ++tail);
        /* Wake a sleeping producer once half of the ring is free. */
        if (atomic_load(&r->producer_asleep) && atomic_load(&r->head) - tail <= RING_SIZE / 2)
            wake(&r->producer_asleep);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    unsigned percent = 100;
    int c;
    while ((c = getopt(argc, argv, "w:")) != -1) {
        if (c != 'w') {
            fprintf(stderr, "usage: prodcons [-w PERCENT]\n");
            return 1;
        }
        percent = (unsigned)bench_parse_count(optarg, "-w");
    }
    if (optind < argc) {
        fprintf(stderr, "usage: prodcons [-w PERCENT]\n");
        return 1;
    }

    /* The rings live outside the allocator under test (static), so they cost the same. */
    static struct pair pairs[PAIRS];
    const uint64_t blocks = bench_scaled(BLOCKS, percent);

    double t0 = probe_now();
    for (int i = 0; i < PAIRS; i++) {
        pairs[i].blocks = blocks / PAIRS;
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
    printf("blocks %llu\n", (unsigned long long)(blocks / PAIRS * PAIRS));
    printf("peak_rss_kib %ld\n", probe_peak_rss_kib());
    printf("allocator %s\n", probe_malloc_provider());
    return 0;
}
