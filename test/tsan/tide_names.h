/* SPDX-License-Identifier: MIT */
/*
 * tide_names.h - in the ThreadSanitizer build of the multithreaded suites (test/tsan.mk),
 * the malloc family the tests call is tide's, by its tide_ names.
 *
 * A TSan process's malloc is TSan's own allocator (libtsan comes first; tide cannot be
 * the process's malloc, test/tsan.mk says why), so only tide_ names reach tide.  This
 * header, given to the suites' sources with -include, maps the plain names to them: the
 * mirror image of test/support/support.h's TIDE_TEST_GLIBC block, which maps tide_ names
 * to plain ones.  The macros are object-like, so that a table of the functions
 * (support.h's api_plain) and members named like them are renamed alike.  mallinfo2 is
 * left alone: its name is also the tag of the struct it returns (tide_mallinfo2 returns
 * that struct too), and none of these suites calls it.
 *
 * Every block a test gets from these names must go back through them, and a block the C
 * library allocates (strdup, asprintf, getline, open_memstream, tt_capture) through the C
 * library's free: none of the suites built so frees one.  test/support/child.c and the
 * runner are built without this header, so that their pairs (asprintf/free, the
 * captured output tt_child_free frees) stay the C library's.
 */
#ifndef TIDE_TSAN_NAMES_H
#define TIDE_TSAN_NAMES_H

/* For the few lines a suite leaves out under TSan, each saying why. */
#define TIDE_TEST_TSAN 1

/* The system's declarations first, under their own names (their include guards keep
 * them from being read again below the macros). */
#include <malloc.h>
#include <stdlib.h>

#include <tide.h>

#define malloc tide_malloc
#define free tide_free
#define calloc tide_calloc
#define realloc tide_realloc
#define reallocarray tide_reallocarray
#define posix_memalign tide_posix_memalign
#define aligned_alloc tide_aligned_alloc
#define memalign tide_memalign
#define valloc tide_valloc
#define pvalloc tide_pvalloc
#define malloc_usable_size tide_malloc_usable_size
#define free_sized tide_free_sized
#define free_aligned_sized tide_free_aligned_sized
#define malloc_trim tide_malloc_trim
#define malloc_stats tide_malloc_stats
#define malloc_info tide_malloc_info
#define mallopt tide_mallopt

#endif /* TIDE_TSAN_NAMES_H */
