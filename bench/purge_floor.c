/* SPDX-License-Identifier: MIT */
/*
 * purge_floor.c - what purging on every free costs the kernel alone, with no allocator:
 * the ceiling an allocator's "purge every free" ebizzy run can reach on this machine.
 *
 * Each thread copies a CHUNK (5 MiB, ebizzy -s 5242880) into its own buffer, which
 * starts on a 2 MiB boundary, then purges the buffer with the advice, as tide does with
 * decay_ms:0: with --thp=on the buffer has MADV_HUGEPAGE and only its whole 2 MiB units
 * are purged (a sub-unit advice would split a huge page); with --thp=off every page is.
 * The copy source is one buffer shared by the threads, written once.
 * Usage: purge_floor [--advice=none|dontneed|free] [--thp=on|off] [--threads=N]
 *                    [--seconds=S] [--chunk=BYTES]
 * Prints "records_per_s", "purges", "purged_bytes" and "thp_refused" (1: the kernel
 * refused MADV_HUGEPAGE).
 */
#include "config.h"

#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "bench.h"
#include "probe.h"

#define HUGE_UNIT ((size_t)2 << 20)
#define ALIGN_UP(x, a) (((x) + ((a) - 1)) & ~((__typeof__(x))(a) - 1))
#define MAX_THREADS 64

static int advice = MADV_DONTNEED; /* 0: none */
static int thp;
static size_t chunk = 5242880;
static const char *src;
static volatile int running = 1;
static volatile int thp_refused;

struct worker {
    pthread_t thread;
    uint64_t records, purges, purged_bytes;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    size_t span = ALIGN_UP(chunk, HUGE_UNIT) + HUGE_UNIT;
    char *map = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        perror("purge_floor: mmap");
        exit(1);
    }
    /* A kernel without THP refuses the advice: the run goes on with small pages (and
     * says so), purging the same whole units. */
    if (thp && madvise(map, span, MADV_HUGEPAGE) != 0)
        thp_refused = 1;
    char *buf = (char *)ALIGN_UP((uintptr_t)map, HUGE_UNIT);
    size_t purge_len = thp ? chunk & ~(HUGE_UNIT - 1) : ALIGN_UP(chunk, (size_t)4096);
    while (running) {
        memcpy(buf, src, chunk);
        bench_escape(buf);
        w->records++;
        if (advice && purge_len) {
            if (madvise(buf, purge_len, advice) != 0) {
                perror("purge_floor: madvise");
                exit(1);
            }
            w->purges++;
            w->purged_bytes += purge_len;
        }
    }
    return NULL;
}

static void usage(void)
{
    fprintf(stderr, "usage: purge_floor [--advice=none|dontneed|free] [--thp=on|off] "
                    "[--threads=N] [--seconds=S] [--chunk=BYTES]\n");
    exit(1);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "advice", required_argument, NULL, 'a' }, { "thp", required_argument, NULL, 'h' },
        { "threads", required_argument, NULL, 't' }, { "seconds", required_argument, NULL, 's' },
        { "chunk", required_argument, NULL, 'c' },   { NULL, 0, NULL, 0 },
    };
    unsigned nthreads = 2;
    double seconds = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'a':
            if (!strcmp(optarg, "none"))
                advice = 0;
            else if (!strcmp(optarg, "dontneed"))
                advice = MADV_DONTNEED;
            else if (!strcmp(optarg, "free"))
                advice = MADV_FREE;
            else
                usage();
            break;
        case 'h':
            if (strcmp(optarg, "on") && strcmp(optarg, "off"))
                usage();
            thp = !strcmp(optarg, "on");
            break;
        case 't':
            nthreads = (unsigned)bench_parse_count(optarg, "purge_floor: --threads");
            if (nthreads > MAX_THREADS)
                usage();
            break;
        case 's': {
            char *end;
            seconds = strtod(optarg, &end);
            if (end == optarg || *end || !(seconds > 0 && seconds <= 3600))
                usage();
            break;
        }
        case 'c':
            chunk = bench_parse_bytes(optarg, "purge_floor", "--chunk");
            break;
        default:
            usage();
        }
    }
    if (optind < argc)
        usage();

    char *s = bench_malloc(chunk);
    memset(s, 7, chunk);
    src = s;
    static struct worker workers[MAX_THREADS];
    double t0 = probe_now();
    for (unsigned i = 0; i < nthreads; i++)
        if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i])) {
            fprintf(stderr, "purge_floor: pthread_create failed\n");
            return 1;
        }
    struct timespec d = { (time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9) };
    nanosleep(&d, NULL);
    running = 0;
    uint64_t records = 0, purges = 0, bytes = 0;
    for (unsigned i = 0; i < nthreads; i++) {
        pthread_join(workers[i].thread, NULL);
        records += workers[i].records;
        purges += workers[i].purges;
        bytes += workers[i].purged_bytes;
    }
    double elapsed = probe_now() - t0;
    printf("records_per_s %.0f\n", (double)records / elapsed);
    printf("purges %llu\n", (unsigned long long)purges);
    printf("purged_bytes %llu\n", (unsigned long long)bytes);
    printf("thp_refused %d\n", thp_refused);
    return 0;
}
