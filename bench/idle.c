/* SPDX-License-Identifier: MIT */
/*
 * idle.c - what a purge policy leaves resident once a process goes idle, and what it
 * costs to use the memory again: the RSS side of the trade-off whose throughput side is
 * ebizzy.
 *
 * 1. A live heap of --live bytes (default 64 MiB) in blocks of 64 B - 64 KiB, every byte
 *    written; it stays allocated to the end.
 * 2. A burst of --burst bytes (default 1 GiB) in blocks of --min to --max bytes (default
 *    64 KiB - 4 MiB, log-uniform), one byte written per page; then all of it is freed.
 * 3. --idle-ms milliseconds (default 2500: 2.5 x tide's default decay_ms of 1000) without
 *    a single allocator call: clock_nanosleep, and /proc/self/status and smaps_rollup read
 *    with open/read into stack buffers.  VmRSS and LazyFree are sampled every
 *    --sample-ms (default 250) from the free onwards.
 * 4. The same burst (same sizes, same order) allocated and touched again: retouch_s, the
 *    cost of reusing memory after the idle period (page faults after MADV_DONTNEED or
 *    munmap, a cheap re-touch after MADV_FREE, nothing to redo when nothing was purged).
 *
 * Prints "key value" lines: rss_*_kib is VmRSS, nolazy_*_kib is VmRSS - LazyFree (what
 * the process still holds once the kernel takes back MADV_FREE pages), at the burst's
 * peak (*_peak_*) and at the end of the idle period (*_idle_*); "series" lists
 * ms:rss:nolazy samples of the idle period.  Under tide (a weak tide_conf_get), the
 * purge, decay_ms and thp settings in force are printed too.  The live heap is checked at the end: a
 * block that lost its contents exits 2.
 * --threads=2 starts a second thread first, which only waits for the end: a
 * multithreaded program (tide's default background:auto starts its purger thread only
 * in one; a single-threaded program purges at its own next calls, so it keeps the burst
 * through an idle period).
 * Usage: idle [--idle-ms=MS] [--sample-ms=MS] [--burst=BYTES] [--live=BYTES]
 *             [--min=BYTES] [--max=BYTES] [--seed=N] [--threads=1|2]   (BYTES: k, m, g suffixes)
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tide.h"

#include "bench.h"
#include "probe.h"
#include "rng.h"

/* Resolves to the preloaded libtide when there is one, and stays NULL otherwise: the
 * policy in force is reported with the figures. */
extern int tide_conf_get(const char *key, char *buf, size_t len) __attribute__((weak));

#define PAGE 4096u
#define MAX_LIVE (1u << 20)  /* blocks of the live heap: 64 MiB / 64 B */
#define MAX_BURST (1u << 18) /* blocks of a burst */
#define MAX_SAMPLES 4096

/* Outside the allocator under test. */
static unsigned char *live[MAX_LIVE];
static size_t live_size[MAX_LIVE];
static unsigned char *burst[MAX_BURST];
static size_t burst_size[MAX_BURST];

struct sample {
    long ms, rss_kib, lazy_kib;
};
static struct sample samples[MAX_SAMPLES];

/* VmRSS and LazyFree of the process, in KiB, without an allocator call. */
static void read_rss(long *rss_kib, long *lazy_kib)
{
    char buf[4096];
    *rss_kib = probe_read_file("/proc/self/status", buf, sizeof buf) > 0
        ? probe_field(buf, "VmRSS:") : -1;
    *lazy_kib = probe_read_file("/proc/self/smaps_rollup", buf, sizeof buf) > 0
        ? probe_field(buf, "LazyFree:") : -1;
    if (*rss_kib < 0 || *lazy_kib < 0) {
        fprintf(stderr, "idle: cannot read VmRSS or LazyFree from /proc/self\n");
        exit(1);
    }
}

static unsigned lg_floor(size_t x)
{
    unsigned lg = 0;
    while (x >>= 1)
        lg++;
    return lg;
}

/* Log-uniform in [lo, hi): a power-of-two range chosen uniformly, then a uniform size
 * in it (hi > lo, both powers of two). */
static size_t random_size(rng_t *rng, unsigned lg_lo, unsigned lg_hi)
{
    unsigned e = lg_lo + (unsigned)rng_below(rng, lg_hi - lg_lo);
    return ((size_t)1 << e) + (size_t)rng_below(rng, (uint64_t)1 << e);
}

/* Allocate the burst's blocks (sizes fixed by the first call) and touch every page. */
static void allocate_burst(size_t nblocks)
{
    for (size_t i = 0; i < nblocks; i++) {
        unsigned char *p = bench_malloc(burst_size[i]);
        for (size_t off = 0; off < burst_size[i]; off += PAGE)
            p[off] = (unsigned char)(i | 1);
        p[burst_size[i] - 1] = (unsigned char)(i | 1);
        burst[i] = p;
    }
}

static void free_burst(size_t nblocks)
{
    for (size_t i = 0; i < nblocks; i++)
        free(burst[i]);
}

static void sleep_until(const struct timespec *t0, long ms)
{
    struct timespec t = *t0;
    t.tv_sec += ms / 1000;
    t.tv_nsec += (ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L)
        t.tv_sec++, t.tv_nsec -= 1000000000L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR)
        ;
}

static void usage(void)
{
    fprintf(stderr, "usage: idle [--idle-ms=MS] [--sample-ms=MS] [--burst=BYTES] "
                    "[--live=BYTES] [--min=BYTES] [--max=BYTES] [--seed=N] [--threads=1|2]\n");
    exit(1);
}

/* The second thread of --threads=2: it makes no allocator call of its own. */
static pthread_mutex_t waiter_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t waiter_cv = PTHREAD_COND_INITIALIZER;
static int waiter_done;

static void *waiter(void *arg)
{
    pthread_mutex_lock(&waiter_mu);
    while (!waiter_done)
        pthread_cond_wait(&waiter_cv, &waiter_mu);
    pthread_mutex_unlock(&waiter_mu);
    return arg;
}

int main(int argc, char **argv)
{
    long idle_ms = 2500, sample_ms = 250;
    size_t burst_bytes = (size_t)1 << 30, live_bytes = (size_t)64 << 20;
    size_t min = (size_t)64 << 10, max = (size_t)4 << 20;
    uint64_t seed = 1, threads = 1;
    static const struct option longopts[] = {
        { "idle-ms", required_argument, NULL, 'i' },
        { "sample-ms", required_argument, NULL, 'S' },
        { "burst", required_argument, NULL, 'b' },
        { "live", required_argument, NULL, 'l' },
        { "min", required_argument, NULL, 'n' },
        { "max", required_argument, NULL, 'x' },
        { "seed", required_argument, NULL, 's' },
        { "threads", required_argument, NULL, 't' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'i': idle_ms = (long)bench_parse_count(optarg, "--idle-ms"); break;
        case 'S': sample_ms = (long)bench_parse_count(optarg, "--sample-ms"); break;
        case 'b': burst_bytes = bench_parse_bytes(optarg, "idle", "--burst"); break;
        case 'l': live_bytes = bench_parse_bytes(optarg, "idle", "--live"); break;
        case 'n': min = bench_parse_bytes(optarg, "idle", "--min"); break;
        case 'x': max = bench_parse_bytes(optarg, "idle", "--max"); break;
        case 's': seed = bench_parse_count(optarg, "--seed"); break;
        case 't': threads = bench_parse_count(optarg, "--threads"); break;
        default: usage();
        }
    }
    if (optind < argc)
        usage();
    if ((min & (min - 1)) || (max & (max - 1)) || min >= max) {
        fprintf(stderr, "idle: --min and --max must be powers of two, --min < --max\n");
        return 1;
    }
    if (threads != 1 && threads != 2) {
        fprintf(stderr, "idle: --threads must be 1 or 2\n");
        return 1;
    }
    pthread_t waiter_thread;
    if (threads == 2 && pthread_create(&waiter_thread, NULL, waiter, NULL) != 0) {
        fprintf(stderr, "idle: pthread_create failed\n");
        return 1;
    }
    if (idle_ms / sample_ms + 2 > MAX_SAMPLES)
        sample_ms = idle_ms / (MAX_SAMPLES - 2) + 1;

    rng_t rng;
    rng_seed(&rng, seed, 0);

    /* 1. The live heap, every byte written with its block's pattern. */
    size_t nlive = 0, total = 0;
    while (total < live_bytes && nlive < MAX_LIVE) {
        size_t size = random_size(&rng, 6, 16); /* 64 B .. 64 KiB */
        live[nlive] = bench_malloc(size);
        memset(live[nlive], (int)(nlive * 31u + 1u), size);
        live_size[nlive++] = size;
        total += size;
    }

    /* 2. The burst. */
    size_t nburst = 0;
    total = 0;
    while (total < burst_bytes && nburst < MAX_BURST) {
        size_t size = random_size(&rng, lg_floor(min), lg_floor(max));
        if (size > burst_bytes - total)
            size = burst_bytes - total;
        burst_size[nburst++] = size;
        total += size;
    }
    double t = probe_now();
    allocate_burst(nburst);
    const double burst_s = probe_now() - t;
    long rss_peak, lazy_peak;
    read_rss(&rss_peak, &lazy_peak);
    t = probe_now();
    free_burst(nburst);
    const double free_s = probe_now() - t;

    /* 3. Idle: no allocator call until the end of the period. */
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t nsamples = 0;
    for (long ms = 0;; ms += sample_ms) {
        if (ms > idle_ms)
            ms = idle_ms;
        if (ms > 0)
            sleep_until(&t0, ms);
        samples[nsamples].ms = ms;
        read_rss(&samples[nsamples].rss_kib, &samples[nsamples].lazy_kib);
        nsamples++;
        if (ms == idle_ms)
            break;
    }
    const struct sample *end = &samples[nsamples - 1];

    /* 4. The same burst again. */
    t = probe_now();
    allocate_burst(nburst);
    const double retouch_s = probe_now() - t;
    free_burst(nburst);

    size_t bad = 0;
    for (size_t i = 0; i < nlive; i++) {
        unsigned char want = (unsigned char)(i * 31u + 1u);
        if (live[i][0] != want || live[i][live_size[i] - 1] != want || live[i][live_size[i] / 2] != want) {
            if (bad++ < 5)
                fprintf(stderr, "idle: live block %zu (%zu bytes) lost its contents\n", i,
                        live_size[i]);
        }
        free(live[i]);
    }

    if (threads == 2) {
        pthread_mutex_lock(&waiter_mu);
        waiter_done = 1;
        pthread_cond_signal(&waiter_cv);
        pthread_mutex_unlock(&waiter_mu);
        pthread_join(waiter_thread, NULL);
    }
    printf("idle_ms %ld\n", idle_ms);
    printf("threads %" PRIu64 "\n", threads);
    printf("burst_bytes %zu\n", burst_bytes);
    printf("burst_blocks %zu\n", nburst);
    printf("live_bytes %zu\n", live_bytes);
    printf("live_blocks %zu\n", nlive);
    printf("burst_s %.6f\n", burst_s);
    printf("free_s %.6f\n", free_s);
    printf("retouch_s %.6f\n", retouch_s);
    printf("rss_peak_kib %ld\n", rss_peak);
    printf("nolazy_peak_kib %ld\n", rss_peak - lazy_peak);
    printf("rss_idle_kib %ld\n", end->rss_kib);
    printf("lazyfree_idle_kib %ld\n", end->lazy_kib);
    printf("nolazy_idle_kib %ld\n", end->rss_kib - end->lazy_kib);
    printf("series");
    for (size_t i = 0; i < nsamples; i++)
        printf("%s%ld:%ld:%ld", i ? "," : " ", samples[i].ms, samples[i].rss_kib,
               samples[i].rss_kib - samples[i].lazy_kib);
    printf("\n");
    printf("peak_rss_kib %ld\n", probe_peak_rss_kib());
    printf("live_bad %zu\n", bad);
    if (tide_conf_get) {
        static const char *const keys[] = { "purge", "decay_ms", "thp", "background" };
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            char value[64];
            if (tide_conf_get(keys[i], value, sizeof value) == 0)
                printf("tide_%s %s\n", keys[i], value);
        }
    }
    printf("allocator %s\n", probe_malloc_provider());
    if (bad) {
        fprintf(stderr, "idle: %zu live block(s) lost their contents\n", bad);
        return 2;
    }
    return fflush(stdout) == 0 ? 0 : 1;
}
