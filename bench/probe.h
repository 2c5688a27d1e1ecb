/*
 * probe.h - what the benchmarks measure about the process itself, without knowing
 * which allocator is loaded: time, peak RSS, VMA count and who provides malloc.
 */
#ifndef TIDE_BENCH_PROBE_H
#define TIDE_BENCH_PROBE_H

#include <stddef.h>

/* CLOCK_MONOTONIC in seconds. */
double probe_now(void);

/* Peak resident set size in KiB: VmHWM of /proc/self/status, else getrusage's ru_maxrss. */
long probe_peak_rss_kib(void);

/* Number of mappings (lines of /proc/self/maps), or -1 if it cannot be read. */
long probe_vma_count(void);

/* Path of the object that defines the malloc this process calls, e.g.
 * "/lib/x86_64-linux-gnu/libjemalloc.so.2", or "unknown".  Lets a caller check that an
 * LD_PRELOAD really took effect instead of silently falling back to glibc. */
const char *probe_malloc_provider(void);

#endif
