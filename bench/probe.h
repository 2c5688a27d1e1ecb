/* SPDX-License-Identifier: MIT */
/*
 * probe.h - what the benchmarks measure about the process itself, without knowing
 * which allocator is loaded: time, peak RSS, VMA count and who provides malloc.
 */
#ifndef TIDE_BENCH_PROBE_H
#define TIDE_BENCH_PROBE_H

#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in seconds. */
double probe_now(void);

/* Peak resident set size in KiB: VmHWM of /proc/self/status, else getrusage's ru_maxrss. */
long probe_peak_rss_kib(void);

/* Number of mappings (lines of /proc/self/maps), or -1 if it cannot be read. */
long probe_vma_count(void);

/* The functions below make no allocator call (open/read into the caller's or a stack
 * buffer), so a benchmark can use them in the middle of a measurement without touching
 * the heap under test. */

/* Lines of /proc/self/maps, or -1.  If INSIDE is not NULL, *INSIDE is set to the number
 * of those mappings that overlap one of the NRANGES [lo, hi) address ranges. */
long probe_maps_count(const uintptr_t (*ranges)[2], size_t nranges, long *inside);

/* Read a small file (such as /proc/self/status) into BUF, NUL-terminated and cut to
 * SIZE - 1 bytes.  Returns the length, or -1. */
long probe_read_file(const char *path, char *buf, size_t size);

/* The number after NAME (e.g. "VmRSS:") at the start of a line of TEXT, in the unit
 * the file uses (kB for /proc/self/status and smaps_rollup), or -1 if absent. */
long probe_field(const char *text, const char *name);

/* Path of the object that defines the malloc this process calls, e.g.
 * "/lib/x86_64-linux-gnu/libjemalloc.so.2", or "unknown".  Lets a caller check that an
 * LD_PRELOAD really took effect instead of silently falling back to glibc. */
const char *probe_malloc_provider(void);

#endif
