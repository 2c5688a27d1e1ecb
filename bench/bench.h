/* SPDX-License-Identifier: MIT */
/*
 * bench.h - the few things every microbenchmark shares: its work scale (-w PERCENT),
 * dying on a failed allocation, and the "key value" lines that run.py reads.
 */
#ifndef TIDE_BENCH_BENCH_H
#define TIDE_BENCH_BENCH_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

/* Keep a pointer (and what it points to) alive in the optimiser's eyes, so that a
 * malloc/free pair cannot be elided or the stores into the block dropped. */
#define bench_escape(p) __asm__ volatile("" : : "r"(p) : "memory")

/* Scale a default amount of work by the -w PERCENT option (at least 1). */
static inline uint64_t bench_scaled(uint64_t work, unsigned percent)
{
    uint64_t n = work / 100 * percent + work % 100 * percent / 100;
    return n ? n : 1;
}

static inline void *bench_malloc(size_t size)
{
    void *p = malloc(size);
    if (!p) {
        fprintf(stderr, "malloc(%zu) failed\n", size);
        exit(1);
    }
    return p;
}

/* A positive decimal integer, or exit 1 with a message naming WHAT. */
static inline uint64_t bench_parse_count(const char *arg, const char *what)
{
    char *end;
    unsigned long long v = arg[0] >= '0' && arg[0] <= '9' ? strtoull(arg, &end, 10) : 0;
    if (v == 0 || *end) {
        fprintf(stderr, "%s: expected a positive integer, got '%s'\n", what, arg);
        exit(1);
    }
    return v;
}

/* Context switches of the whole process so far, voluntary and involuntary: a lock
 * convoy (threads sleeping on each other's locks) shows up here as well as in the time. */
static inline long bench_context_switches(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_nvcsw + ru.ru_nivcsw : -1;
}

/* A positive size with an optional k, m or g suffix; PROG: what to call ourselves in the
 * message.  Exits with a message otherwise. */
static inline size_t bench_parse_bytes(const char *arg, const char *prog, const char *what)
{
    char *end;
    unsigned long long v = arg[0] >= '0' && arg[0] <= '9' ? strtoull(arg, &end, 10) : 0;
    unsigned shift = 0;
    if (v && (*end == 'k' || *end == 'K'))
        shift = 10, end++;
    else if (v && (*end == 'm' || *end == 'M'))
        shift = 20, end++;
    else if (v && (*end == 'g' || *end == 'G'))
        shift = 30, end++;
    if (v == 0 || *end || v > (SIZE_MAX >> 2 >> shift)) {
        fprintf(stderr, "%s: %s: expected a positive size (k, m, g suffixes), got '%s'\n", prog,
                what, arg);
        exit(1);
    }
    return (size_t)v << shift;
}

#endif
